#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`make demo`: the main job on real data, end to end.

Starts the local S3 server on 127.0.0.1, uploads the Fashion-MNIST IDX files
from Debian's dataset-fashion-mnist to obs://datasets/fashion-mnist/, mounts
that prefix with hoardfs, and trains a small classifier for two epochs that
each read the files from the mountpoint (scripts/demo_train.py).  For every
epoch it prints wall time, bytes read and the requests the server counted.
The page cache is dropped between epochs, so epoch 2 is served by hoardfs's
cache on local disk, not by RAM.  A last epoch after a remount shows that the
cache survives it.  Epochs after the first must send 0 GETs, or the demo
fails.  Everything is unmounted and stopped on exit, also on Ctrl-C.

usage: /usr/bin/python3 scripts/demo.py BUILD/hoardfs
"""
import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "integration"))

import demo_train  # noqa: E402
from s3helper import S3Server, clean_env  # noqa: E402

DATASET_DIR = "/usr/share/datasets/fashion-mnist"
BUCKET, PREFIX = "datasets", "fashion-mnist/"


def upload(s3):
    total = 0
    s3.create_bucket(BUCKET)
    for name in demo_train.FILES:
        with gzip.open(os.path.join(DATASET_DIR, name + ".gz")) as f:
            data = f.read()
        s3.put(BUCKET, PREFIX + name, data)
        total += len(data)
        print("  uploaded obs://%s/%s%s (%d bytes)" % (BUCKET, PREFIX, name,
                                                     len(data)))
    return total


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == os.path.realpath(path) for line in f)


class Daemon:
    """hoardfs -f in the background; unmounts and waits on stop()."""

    def __init__(self, binary, s3, mnt, cache, log):
        env = clean_env()
        env.update(AWS_ACCESS_KEY_ID=s3.access_key,
                   AWS_SECRET_ACCESS_KEY=s3.secret_key)
        self.mnt = mnt
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [binary, "-f", "--endpoint", s3.endpoint, "--path-style",
             "--cache-dir", cache, "obs://%s/%s" % (BUCKET, PREFIX), mnt],
            env=env, stdout=self.log, stderr=self.log,
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not mounted(mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(log, errors="replace") as f:
                    sys.stderr.write(f.read()[-4000:])
                raise SystemExit("hoardfs did not mount")
            time.sleep(0.02)

    def stop(self):
        if mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            subprocess.run(["fusermount3", "-uz", self.mnt], check=False)
        self.log.close()


def drop_page_cache():
    """Make the next epoch read from hoardfs's disk cache, not from RAM."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def epoch(s3, model, mnt, n, label):
    s3.reset()
    r = demo_train.train_epoch(model, mnt, n)
    st = s3.stats(requests=False)
    print("%-28s %6.2f s  %9d bytes read  GET %3d  HEAD %2d  LIST %2d  "
          "accuracy %.3f" % (label, r["wall_s"], r["bytes"], st["GET"],
                             st["HEAD"], st["LIST"], r["accuracy"]))
    return st


def interrupted(signum, frame):
    raise KeyboardInterrupt


def main(argv):
    binary = os.path.abspath(argv[1])
    signal.signal(signal.SIGTERM, interrupted)
    work = tempfile.mkdtemp(prefix="hoardfs-demo-")
    mnt, cache = os.path.join(work, "mnt"), os.path.join(work, "cache")
    log = os.path.join(work, "hoardfs.log")
    os.mkdir(mnt)
    failed = False
    try:
        with S3Server(root=os.path.join(work, "s3")) as s3:
            print("hoardfs demo: local S3 server at %s" % s3.endpoint)
            size = upload(s3)
            print("  %d bytes in obs://%s/%s" % (size, BUCKET, PREFIX))
            d = Daemon(binary, s3, mnt, cache, log)
            print("mounted obs://%s/%s at %s (cache %s)\n"
                  % (BUCKET, PREFIX, mnt, cache))
            model = demo_train.Softmax(28 * 28, 10)
            later = []
            try:
                epoch(s3, model, mnt, 1, "epoch 1 (cold)")
                dropped = drop_page_cache()
                later.append(epoch(s3, model, mnt, 2,
                                   "epoch 2 (%s)" % ("page cache dropped"
                                                     if dropped else "warm")))
            finally:
                d.stop()
            d = Daemon(binary, s3, mnt, cache, log)
            try:
                drop_page_cache()
                later.append(epoch(s3, model, mnt, 3, "epoch 3 (remounted)"))
            finally:
                d.stop()
            failed = any(st["GET"] != 0 for st in later)
            print("\nepochs after the first sent %s GET requests to the store"
                  % ("no" if not failed else "SOME"))
    except KeyboardInterrupt:
        print("\ninterrupted; cleaned up", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
