# SPDX-License-Identifier: MIT
"""datasets: the three benchmark datasets, laid out directly on the S3 server's disk.

The server (scripts/s3server.py) serves ROOT/<bucket>/<key> as object <key> of <bucket>, so
each dataset is written as plain files under its own bucket directory; nothing is uploaded.

  big       bench-big/file.bin               one file, 1 GiB (quick: 256 MiB), random bytes
  imagenet  bench-imagenet/train/nXXXXXXXX/  10,000 files (quick: 2,000) in 100 class
            img_NNNNNN.JPEG                  directories, 80-140 KB each (mean ~110 KB),
                                             random bytes (JPEG-sized, not JPEG content)
  fmnist    bench-fmnist/{train,test}/       Fashion-MNIST from Debian's dataset-fashion-mnist,
            <label>/<index>.pgm              one binary PGM (P5, 28x28, 799 bytes) per image:
                                             70,000 files (quick: the first 10,000, split
                                             60:10 between train and test as the full set is)

Contents are deterministic (seeded), and a stamp file records the parameters a bucket was
built with, so a second run reuses the tree instead of writing it again.
"""

import gzip
import json
import os
import random
import shutil
import struct

FMNIST_DIR = "/usr/share/datasets/fashion-mnist"

SPECS = {
    # name: (bucket, full parameters, quick parameters)
    "big": ("bench-big", {"bytes": 1 << 30}, {"bytes": 256 << 20}),
    "imagenet": ("bench-imagenet", {"files": 10000, "classes": 100},
                 {"files": 2000, "classes": 100}),
    "fmnist": ("bench-fmnist", {"files": 70000}, {"files": 10000}),
}
ORDER = ("big", "imagenet", "fmnist")


class Dataset:
    """A built dataset: its bucket, its keys in a fixed order, and their total size."""

    def __init__(self, name, root, stamp_dir, quick):
        self.name = name
        self.stamp_dir = stamp_dir
        self.bucket, full, small = SPECS[name]
        self.params = small if quick else full
        self.dir = os.path.join(root, self.bucket)
        self.keys = []
        self.total_bytes = 0

    @property
    def sequential(self):
        """True for the one-big-file dataset (read by one sequential reader)."""
        return self.name == "big"

    def path(self, key):
        return os.path.join(self.dir, key)

    def _stamp_path(self):
        # Outside the server's root, so it is neither an object nor a bucket.
        return os.path.join(self.stamp_dir, self.bucket + ".json")

    def build(self, log):
        """Write the dataset unless an identical one is already on disk."""
        want = dict(self.params, name=self.name, version=2)
        try:
            with open(self._stamp_path()) as f:
                have = json.load(f)
        except (OSError, ValueError):
            have = None
        if have and have.get("params") == want:
            self.keys = have["keys"]
            self.total_bytes = have["total_bytes"]
            return False
        log("building dataset %s in %s" % (self.name, self.dir))
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        getattr(self, "_build_" + self.name)()
        os.makedirs(self.stamp_dir, exist_ok=True)
        tmp = self._stamp_path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"params": want, "keys": self.keys, "total_bytes": self.total_bytes}, f)
        os.replace(tmp, self._stamp_path())
        return True

    def _write(self, key, data):
        p = self.path(key)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        self.keys.append(key)
        self.total_bytes += len(data)

    def _build_big(self):
        rng = random.Random(1)
        size = self.params["bytes"]
        key = "file.bin"
        with open(self.path(key), "wb") as f:
            left = size
            while left:
                n = min(left, 16 << 20)
                f.write(rng.randbytes(n))
                left -= n
        self.keys = [key]
        self.total_bytes = size

    def _build_imagenet(self):
        rng = random.Random(2)
        files, classes = self.params["files"], self.params["classes"]
        wnids = ["n%08d" % (1440764 + 7919 * c) for c in range(classes)]
        for i in range(files):
            key = "train/%s/img_%06d.JPEG" % (wnids[i % classes], i)
            self._write(key, rng.randbytes(rng.randint(80000, 140000)))

    def _build_fmnist(self):
        want = self.params["files"]
        n_test = want // 7              # the full set is 60,000 train + 10,000 test
        n_train = want - n_test
        for split, prefix, count in (("train", "train", n_train), ("test", "t10k", n_test)):
            images = _idx(os.path.join(FMNIST_DIR, prefix + "-images-idx3-ubyte.gz"))
            labels = _idx(os.path.join(FMNIST_DIR, prefix + "-labels-idx1-ubyte.gz"))
            _, n, rows, cols = struct.unpack(">IIII", images[:16])
            if count > n:
                raise SystemExit("bench: %s has only %d images" % (prefix, n))
            header = b"P5\n%d %d\n255\n" % (cols, rows)
            px = rows * cols
            for i in range(count):
                label = labels[8 + i]
                self._write("%s/%d/%05d.pgm" % (split, label, i),
                            header + images[16 + i * px:16 + (i + 1) * px])


def _idx(path):
    """The raw bytes of a gzipped IDX file (the format is decoded by the caller)."""
    try:
        with gzip.open(path) as f:
            return f.read()
    except OSError as e:
        raise SystemExit("bench: cannot read %s (%s); is dataset-fashion-mnist installed? "
                         "scripts/install-bench-deps.sh installs it" % (path, e))
