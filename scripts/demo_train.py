#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A training-style reader: loads Fashion-MNIST IDX files from a directory
(the hoardfs mountpoint in the demo) and trains a softmax classifier with
numpy, re-reading the files at the start of every epoch as a data loader
does.  It knows nothing of hoardfs or S3: it reads ordinary files.

Used by scripts/demo.py, which wraps each epoch with the request counts of
the S3 server.  Run alone: /usr/bin/python3 scripts/demo_train.py DIR
"""
import struct
import sys
import time

import numpy as np

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"
FILES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)

# IDX magic numbers: 0x00000803 for uint8 rank-3 (images), 0x00000801 for
# uint8 rank-1 (labels); http://yann.lecun.com/exdb/mnist/ "FILE FORMATS".
IDX_UBYTE_RANK3 = 0x803
IDX_UBYTE_RANK1 = 0x801


def read_idx(path):
    """Return (array, bytes read) for one IDX file of unsigned bytes."""
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    rank = magic & 0xFF
    if magic >> 8 != 0x08 or rank not in (1, 3):
        raise ValueError("%s: not an IDX ubyte file (magic %#x)" % (path, magic))
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank)
    expected = int(np.prod(dims))
    if body.size != expected:
        raise ValueError("%s: %d bytes of data, header says %d"
                         % (path, body.size, expected))
    return body.reshape(dims), len(data)


def load(directory):
    """Read all four files; returns (train_x, train_y, test_x, test_y, bytes)."""
    arrays, total = [], 0
    for name in FILES:
        arr, n = read_idx("%s/%s" % (directory, name))
        arrays.append(arr)
        total += n
    tx, ty, vx, vy = arrays
    tx = tx.reshape(len(tx), -1).astype(np.float32) / 255.0
    vx = vx.reshape(len(vx), -1).astype(np.float32) / 255.0
    return tx, ty.astype(np.int64), vx, vy.astype(np.int64), total


class Softmax:
    """Multinomial logistic regression trained by mini-batch SGD."""

    def __init__(self, features, classes, seed=0):
        rng = np.random.default_rng(seed)
        self.w = rng.normal(0, 0.01, (features, classes)).astype(np.float32)
        self.b = np.zeros(classes, dtype=np.float32)

    def logits(self, x):
        return x @ self.w + self.b

    def step(self, x, y, lr):
        z = self.logits(x)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1.0
        p /= len(y)
        self.w -= lr * (x.T @ p)
        self.b -= lr * p.sum(axis=0)
        return float(loss)

    def accuracy(self, x, y):
        return float((self.logits(x).argmax(axis=1) == y).mean())


def train_epoch(model, directory, epoch, batch=128, lr=0.5):
    """Load the data afresh from @directory and run one epoch over it."""
    t0 = time.monotonic()
    tx, ty, vx, vy, nbytes = load(directory)
    t_load = time.monotonic() - t0
    order = np.random.default_rng(epoch).permutation(len(tx))
    loss = 0.0
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        loss = model.step(tx[idx], ty[idx], lr)
    return {
        "epoch": epoch,
        "bytes": nbytes,
        "load_s": t_load,
        "wall_s": time.monotonic() - t0,
        "loss": loss,
        "accuracy": model.accuracy(vx, vy),
        "train_examples": len(tx),
    }


def main(argv):
    directory = argv[1]
    model = Softmax(28 * 28, 10)
    for epoch in (1, 2):
        r = train_epoch(model, directory, epoch)
        print("epoch %(epoch)d: %(wall_s).2f s, %(bytes)d bytes read, "
              "loss %(loss).3f, test accuracy %(accuracy).3f" % r)


if __name__ == "__main__":
    main(sys.argv)
