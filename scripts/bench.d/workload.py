# SPDX-License-Identifier: MIT
"""workload: what an epoch is, and the measurements taken around it.

An epoch reads every file of a dataset once, whole, through a directory (a mountpoint or
the local copy):
  - one big file: one sequential reader, 1 MiB read() calls into a reused buffer (what
    `dd bs=1M` does), timed from open to the last byte;
  - many small files: 8 reader processes (processes, not threads, so Python's GIL is not
    the limit), each reading an interleaved slice of the file list after a fixed-seed
    shuffle, as a data loader with 8 workers does. Timed from a barrier that all 8 pass
    once forked to the moment the last one is done.
A reader that hits an error counts it and goes on; errors are reported beside the figure.

Also here: dropping the page cache, pre-reading files into it, a daemon's peak RSS
(VmHWM), and waiting until a daemon has finished its background work.
"""

import multiprocessing
import os
import random
import subprocess
import time

READ_BYTES = 1 << 20          # read() size: dd bs=1M
READERS = 8                   # parallel readers for small-file epochs (the figure)
SHUFFLE_SEED = 7              # same order for every system, so they do identical work


class EpochResult:
    """Wall time, files and bytes of one epoch, and how many files failed."""

    def __init__(self, seconds, files, nbytes, errors, first_error=None, timed_out=False):
        self.seconds, self.files, self.bytes = seconds, files, nbytes
        self.errors, self.first_error, self.timed_out = errors, first_error, timed_out

    @property
    def mb_s(self):
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    @property
    def files_s(self):
        return self.files / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self):
        return {"seconds": self.seconds, "files": self.files, "bytes": self.bytes,
                "errors": self.errors, "first_error": self.first_error,
                "timed_out": self.timed_out, "mb_s": self.mb_s, "files_s": self.files_s}


def _read_files(base, rels, buf):
    """Read each file whole; returns (files read, bytes, errors, first error text)."""
    files = nbytes = errors = 0
    first = None
    view = memoryview(buf)
    for rel in rels:
        try:
            fd = os.open(os.path.join(base, rel), os.O_RDONLY)
            try:
                while True:
                    n = os.readv(fd, [view])
                    if n == 0:
                        break
                    nbytes += n
            finally:
                os.close(fd)
            files += 1
        except OSError as e:
            errors += 1
            if first is None:
                first = "%s: %s" % (rel, e)
    return files, nbytes, errors, first


def _worker(base, rels, barrier, results):
    buf = bytearray(READ_BYTES)
    try:
        barrier.wait()
        results.put(_read_files(base, rels, buf))
    except BaseException as e:  # never leave the parent waiting
        results.put((0, 0, len(rels), repr(e)))


def epoch(base, keys, sequential, timeout_s):
    """Read every key under base once; returns an EpochResult."""
    if sequential:
        # One reader in this process: fork buys nothing for a single stream.
        t0 = time.monotonic()
        files, nbytes, errors, first = _read_files(base, keys, bytearray(READ_BYTES))
        return EpochResult(time.monotonic() - t0, files, nbytes, errors, first)
    order = list(keys)
    random.Random(SHUFFLE_SEED).shuffle(order)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(READERS + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(base, order[i::READERS], barrier, results),
                         daemon=True) for i in range(READERS)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.monotonic()
    got = []
    deadline = t0 + timeout_s
    timed_out = False
    while len(got) < READERS:
        try:
            got.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
        except Exception:  # queue.Empty: the deadline passed
            timed_out = True
            break
    seconds = time.monotonic() - t0
    if timed_out:
        for p in procs:
            p.kill()       # a reader stuck in a FUSE request dies once the mount is aborted
    for p in procs:
        p.join(timeout=5 if timed_out else None)
    files = sum(g[0] for g in got)
    nbytes = sum(g[1] for g in got)
    errors = sum(g[2] for g in got) + (len(order) - sum(g[0] + g[2] for g in got))
    first = next((g[3] for g in got if g[3]), None)
    if timed_out and first is None:
        first = "timed out after %.0f s" % timeout_s
    return EpochResult(seconds, files, nbytes, errors, first, timed_out)


def drop_page_cache():
    """sync, then drop clean page cache, dentries and inodes (needs root)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def preload(base, keys, sequential):
    """Read files once so that they sit in the page cache (the server's copy, before a
    cold epoch: the store should answer from memory, as a warmed remote store would)."""
    epoch(base, keys, sequential, timeout_s=3600)


def timed_ls(path):
    """Wall seconds of `ls -lR path > /dev/null`, and the number of lines it printed."""
    t0 = time.monotonic()
    p = subprocess.run(["ls", "-lR", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       check=False)
    seconds = time.monotonic() - t0
    return seconds, p.stdout.count(b"\n"), p.returncode


def _status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_rss_mib(pid):
    """The process's peak resident set (VmHWM) in MiB, or None when it is gone."""
    kb = _status_kb(pid, "VmHWM")
    return None if kb is None else kb / 1024.0


def _io_calls(pid):
    """read/write system calls the process made so far (fdatasync-bound work shows here
    even when it uses no CPU), or None."""
    try:
        with open("/proc/%d/io" % pid) as f:
            v = dict(line.split(": ") for line in f.read().splitlines())
        return int(v["syscr"]) + int(v["syscw"])
    except (OSError, KeyError, ValueError):
        return None


def _threads_in_d(pid):
    """How many of the process's threads are in uninterruptible sleep (disk I/O, fsync)."""
    n = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "D":
                        n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n


def open_fds(pid):
    """Number of open file descriptors of the process, or None."""
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def _cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])     # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def settle(pid, request_count, max_s=120.0, quiet_s=1.0):
    """Wait until the daemon uses (almost) no CPU, makes (almost) no read/write calls, has no
    thread in disk wait, and the server sees no new request for quiet_s, so background work
    (read-ahead, commits and their fdatasync, checksums) is charged to the epoch that caused
    it, not to the next one. request_count() returns the server's total. Returns the
    seconds waited."""
    t0 = time.monotonic()
    last = (_cpu_ticks(pid), _io_calls(pid), request_count())
    while time.monotonic() - t0 < max_s:
        time.sleep(quiet_s)
        now = (_cpu_ticks(pid), _io_calls(pid), request_count())
        busy = (None not in (now[0], last[0]) and now[0] - last[0] > 2) or \
               (None not in (now[1], last[1]) and now[1] - last[1] > 20) or \
               now[2] != last[2] or _threads_in_d(pid) > 0
        if not busy:
            break
        last = now
    return time.monotonic() - t0


def _cpu_jiffies():
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + vals[4]            # idle + iowait
    return sum(vals[:8]) - idle, sum(vals[:8])


def background_load(seconds=1.0):
    """Fraction of all CPUs busy over `seconds` while the benchmark itself is idle: work of
    other processes on the machine, which slows every figure taken meanwhile."""
    busy0, total0 = _cpu_jiffies()
    time.sleep(seconds)
    busy1, total1 = _cpu_jiffies()
    return (busy1 - busy0) / max(1, total1 - total0)
