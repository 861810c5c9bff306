# SPDX-License-Identifier: MIT
"""The cache engine through real mounts: versions validated by ETag, crash
safety, bounded size, single-flight fetches under crowds, integrity checks,
and one daemon per cache dir."""
import errno
import hashlib
import os
import random
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import HOARDFS, clean_env, is_mounted

MiB = 1024 * 1024


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def gets_for(s3, key):
    return [r for r in s3.stats()["requests"]
            if r["op"] == "GET" and r["key"] == key]


def data_files(cache):
    out = []
    for d, _, names in os.walk(os.path.join(cache, "data")):
        out += [os.path.join(d, n) for n in names]
    return out


def test_etag_change_same_size_b15(s3, bucket, mount_factory):
    s3.put(bucket, "t", b"foo0001\n")
    with mount_factory(bucket, args=["--metadata-ttl", "1"]) as m:
        p = os.path.join(m.path, "t")
        assert read_all(p) == b"foo0001\n"
        for i in range(2, 5):
            s3.put(bucket, "t", b"foo%04d\n" % i)  # same size, new ETag
            time.sleep(1.3)
            assert read_all(p) == b"foo%04d\n" % i
        # the old versions' data files are gone; only the latest remains
        assert len(data_files(m.cache_dir)) == 1


def test_rewrite_while_metadata_cached_b17(s3, bucket, mount_factory):
    s3.put(bucket, "dir/file", b"0123456789")
    s3.put(bucket, "dir/gone", b"abcdefghij")
    with mount_factory(bucket, args=["--metadata-ttl", "2"]) as m:
        f = os.path.join(m.path, "dir/file")
        g = os.path.join(m.path, "dir/gone")
        assert os.stat(f).st_size == 10 and os.stat(g).st_size == 10
        s3.put(bucket, "dir/file", rnd(100, 1))  # case B: rewritten
        s3.delete(bucket, "dir/gone")             # case A: deleted
        # Within the TTL: never a short or empty read passed off as data.
        with pytest.raises(OSError) as e:
            read_all(f)
        assert e.value.errno in (errno.ESTALE, errno.EIO)
        with pytest.raises(OSError) as e:
            read_all(g)
        assert e.value.errno in (errno.ENOENT, errno.ESTALE)
        time.sleep(2.2)
        # After the TTL the tree and the bytes reflect the change.
        assert os.stat(f).st_size == 100
        assert read_all(f) == rnd(100, 1)
        assert not os.path.exists(g)


def test_open_handle_keeps_its_version(s3, bucket, mount_factory):
    old = rnd(3 * 65536, 2)
    s3.put(bucket, "v", old)
    with mount_factory(bucket, args=["--metadata-ttl", "1",
                                     "--part-size", "65536"]) as m:
        p = os.path.join(m.path, "v")
        with open(p, "rb") as fh:
            assert fh.read() == old  # whole old version cached
            s3.put(bucket, "v", rnd(3 * 65536, 3))
            time.sleep(1.3)
            fh.seek(0)
            assert fh.read() == old  # the handle still reads its version
        assert read_all(p) == rnd(3 * 65536, 3)  # a new open: new version


def test_kill9_mid_fetch_then_identical_b26(s3, bucket, mount_factory,
                                            tmp_path):
    size = 24 * MiB
    data = rnd(size, 26)
    s3.put(bucket, "g", data)
    cache = tmp_path / "cache"
    s3.faults({"bandwidth_bps": 8 * MiB})  # about 3 s for the object
    m = mount_factory(bucket, cache_dir=cache, name="m1",
                      args=["--part-size", str(MiB), "--parallel", "4"])
    m.start()
    reader = subprocess.Popen(["cat", os.path.join(m.path, "g")],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    time.sleep(1.2)
    m.kill()  # SIGKILL in the middle of the fetch
    reader.wait(10)
    s3.faults({})
    s3.reset()
    with mount_factory(bucket, cache_dir=cache, name="m2",
                       args=["--part-size", str(MiB)]) as m2:
        assert sha(read_all(os.path.join(m2.path, "g"))) == sha(data)
    # Parts recorded before the crash were reused, not fetched again.
    assert len(gets_for(s3, "g")) < size // MiB


def test_damaged_data_files_are_refetched(s3, bucket, mount_factory,
                                          tmp_path):
    objs = {"a": rnd(3 * MiB, 1), "b": rnd(3 * MiB, 2)}
    for k, v in objs.items():
        s3.put(bucket, k, v)
    cache = str(tmp_path / "cache")
    with mount_factory(bucket, cache_dir=cache, name="m1") as m:
        for k, v in objs.items():
            assert read_all(os.path.join(m.path, k)) == v
        time.sleep(0.5)  # let the last group commit land
    files = sorted(data_files(cache))
    assert len(files) == 2
    os.unlink(files[0])                  # one data file missing
    os.truncate(files[1], MiB)           # the other cut short
    s3.reset()
    with mount_factory(bucket, cache_dir=cache, name="m2") as m:
        for k, v in objs.items():
            assert read_all(os.path.join(m.path, k)) == v
    assert s3.stats()["GET"] >= 2
    assert "data file missing or resized" in m.logs()


def test_corrupt_index_is_replaced(s3, bucket, mount_factory, tmp_path):
    s3.put(bucket, "x", rnd(MiB, 4))
    cache = str(tmp_path / "cache")
    with mount_factory(bucket, cache_dir=cache, name="m1") as m:
        assert read_all(os.path.join(m.path, "x")) == rnd(MiB, 4)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(cache + "/index.db" + suffix):
            os.unlink(cache + "/index.db" + suffix)
    with open(cache + "/index.db", "r+b") as f:
        f.write(b"this is not a SQLite database at all" * 100)
    with mount_factory(bucket, cache_dir=cache, name="m2") as m:
        assert read_all(os.path.join(m.path, "x")) == rnd(MiB, 4)
    assert "corrupt" in m.logs()
    assert any(n.startswith("index.db.corrupt") for n in os.listdir(cache))


def tmpfs_at(path, size):
    """Mount a tmpfs of @size at the new directory @path; yields it."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs",
                    str(path)], check=True)
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def cache_fs(tmp_path):
    """A tmpfs of its own for a cache dir, so its use can be measured."""
    yield from tmpfs_at(tmp_path / "cachefs", "64m")


def cache_fs_used(fs, cache):
    """Bytes of data files in @cache, which sits alone on tmpfs @fs.

    statvfs gives the whole filesystem at one instant, where summing the
    files one by one could count a file about to be evicted together with
    the part that replaces it.  The index, its WAL and the lock file are
    taken off afterwards; they only grow, so this never counts high."""
    st = os.statvfs(fs)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    for n in os.listdir(cache):
        p = os.path.join(cache, n)
        if os.path.isfile(p):
            used -= os.stat(p).st_blocks * 512
    return used


def test_cache_size_limit_b24(s3, bucket, mount_factory, cache_fs):
    objs = {"s/f%03d" % i: rnd(MiB, i) for i in range(40)}
    for k, v in objs.items():
        s3.put(bucket, k, v)
    limit = 12 * MiB
    peak = [0]
    stop = threading.Event()
    cache = cache_fs / "cache"
    with mount_factory(bucket, cache_dir=cache,
                       args=["--cache-size", str(limit),
                             "--part-size", str(MiB)]) as m:
        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], cache_fs_used(cache_fs, cache))
                time.sleep(0.005)

        def read_some(keys, bad):
            for k in keys:
                if read_all(os.path.join(m.path, k)) != objs[k]:
                    bad.append(k)
        t = threading.Thread(target=sample)
        t.start()
        bad = []
        try:
            # Four readers at once, twice over (the second time after
            # evictions), so that several workers reserve room together.
            for _ in range(2):
                keys = sorted(objs)
                readers = [threading.Thread(target=read_some,
                                            args=(keys[i::4], bad))
                           for i in range(4)]
                for r in readers:
                    r.start()
                for r in readers:
                    r.join()
        finally:
            stop.set()
            t.join()
    print("peak cache bytes %d against a limit of %d" % (peak[0], limit))
    assert bad == []
    assert 0 < peak[0] <= limit, peak[0]
    assert "eviction:" in m.logs()


@pytest.fixture
def tiny_fs(tmp_path):
    """A 6 MiB tmpfs to play a cache disk that fills up."""
    yield from tmpfs_at(tmp_path / "tiny", "6m")


def test_full_cache_disk_never_fails_reads_b24(s3, bucket, mount_factory,
                                               tiny_fs):
    objs = {"f%02d" % i: rnd(MiB, 100 + i) for i in range(12)}
    for k, v in objs.items():
        s3.put(bucket, k, v)
    with open(tiny_fs / "junk", "wb") as f:  # leave about 2 MiB free
        f.write(b"\0" * 4 * MiB)
    with mount_factory(bucket, cache_dir=tiny_fs / "cache",
                       args=["--cache-min-free", "0",
                             "--part-size", str(MiB)]) as m:
        s3.reset()
        for k, v in sorted(objs.items()):
            assert read_all(os.path.join(m.path, k)) == v
        first = s3.stats(requests=False)
        for k, v in sorted(objs.items()):
            assert read_all(os.path.join(m.path, k)) == v
    print("full disk: %d GETs, %d bytes for %d bytes of objects"
          % (first["GET"], first["get_bytes"], 12 * MiB))
    # Bytes that met the full disk are fetched again for the reader, but
    # an object is not fetched whole twice (it reads around the cache).
    assert first["get_bytes"] <= 2 * 12 * MiB


def test_concurrent_readers_share_each_part(s3, bucket, mount_factory):
    size = 16 * MiB
    data = rnd(size, 8)
    s3.put(bucket, "big", data)
    s3.reset()
    results = []
    with mount_factory(bucket, args=["--part-size", str(MiB)]) as m:
        barrier = threading.Barrier(8)

        def reader():
            barrier.wait()
            results.append(sha(read_all(os.path.join(m.path, "big"))))
        threads = [threading.Thread(target=reader) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [sha(data)] * 8
    ranges = [r["range"] for r in gets_for(s3, "big")]
    assert len(ranges) == size // MiB == len(set(ranges))


def test_md5_mismatch_is_detected(s3, bucket, mount_factory):
    good = rnd(2 * MiB, 9)
    s3.put(bucket, "m", good)
    # Change the bytes on the server's disk but keep size and mtime, so
    # the server still announces the old MD5 ETag: a store serving bytes
    # that disagree with their ETag.
    path = os.path.join(s3.root, bucket, "m")
    st = os.stat(path)
    bad = bytearray(good)
    bad[12345] ^= 0xFF
    with open(path, "r+b") as f:
        f.write(bad)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with mount_factory(bucket) as m:
        p = os.path.join(m.path, "m")
        read_all(p)
        deadline = time.monotonic() + 10
        while "after a second fetch" not in m.logs():
            assert time.monotonic() < deadline, m.logs()
            time.sleep(0.1)
        assert "does not match its MD5" in m.logs()
        # Not cached: a later open fetches from the store again.
        assert os.getxattr(p, "user.hoardfs.cached_bytes") == b"0"


def test_second_daemon_on_cache_dir_refused(s3, bucket, mount_factory,
                                            tmp_path):
    s3.put(bucket, "f", b"1")
    cache = tmp_path / "cache"
    with mount_factory(bucket, cache_dir=cache, name="m1"):
        mnt2 = tmp_path / "m2"
        mnt2.mkdir()
        env = clean_env({"AWS_ACCESS_KEY_ID": s3.access_key,
                         "AWS_SECRET_ACCESS_KEY": s3.secret_key})
        r = subprocess.run([HOARDFS, "--endpoint", s3.endpoint,
                            "--path-style", "--cache-dir", str(cache),
                            "s3://" + bucket, str(mnt2)], env=env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1
        assert "in use by another hoardfs" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not is_mounted(str(mnt2))


def test_ephemeral_empties_cache(s3, bucket, mount_factory, tmp_path):
    s3.put(bucket, "f", rnd(MiB, 5))
    cache = tmp_path / "cache"
    with mount_factory(bucket, cache_dir=cache, args=["--ephemeral"]) as m:
        assert read_all(os.path.join(m.path, "f")) == rnd(MiB, 5)
        assert data_files(str(cache))
    assert data_files(str(cache)) == []
    assert not os.path.exists(cache / "index.db")


def test_mount_time_with_100k_cached_objects(s3, bucket, mount_factory,
                                             tmp_path):
    cache = tmp_path / "cache"
    s3.put(bucket, "f", b"x")
    with mount_factory(bucket, cache_dir=cache, name="m1") as m:
        read_all(os.path.join(m.path, "f"))
    db = sqlite3.connect(str(cache / "index.db"))
    with db:
        db.executemany(
            "INSERT INTO objects(bucket, key, etag, size, mtime, atime)"
            " VALUES (?, ?, ?, 1000, 0, ?)",
            (("other", b"k/%06d" % i, '"%032x"' % i, i)
             for i in range(100000)))
        db.execute(
            "INSERT INTO extents(object_id, off, end)"
            " SELECT id, 0, 1000 FROM objects WHERE bucket = 'other'")
    db.close()
    t0 = time.monotonic()
    m2 = mount_factory(bucket, cache_dir=cache, name="m2").start()
    elapsed = time.monotonic() - t0
    assert read_all(os.path.join(m2.path, "f")) == b"x"
    m2.stop()
    print("mount time with 100,000 cached objects: %.3f s" % elapsed)
    assert elapsed < 2.0


def test_janitor_removes_orphaned_data_files(s3, bucket, mount_factory,
                                             tmp_path):
    s3.put(bucket, "keep", rnd(MiB, 6))
    cache = tmp_path / "cache"
    with mount_factory(bucket, cache_dir=cache, name="m1") as m:
        assert read_all(os.path.join(m.path, "keep")) == rnd(MiB, 6)
    orphan = cache / "data" / "ab" / ("ab" + "0" * 62)
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"stale bytes of a forgotten object")
    os.utime(orphan, (time.time() - 3600,) * 2)
    kept = data_files(str(cache))
    with mount_factory(bucket, cache_dir=cache, name="m2") as m:
        deadline = time.monotonic() + 10
        while orphan.exists():
            assert time.monotonic() < deadline, m.logs()
            time.sleep(0.05)
        assert "removed 1 orphaned data files" in m.logs()
        s3.reset()
        assert read_all(os.path.join(m.path, "keep")) == rnd(MiB, 6)
        assert s3.stats()["GET"] == 0
    assert set(kept) - {str(orphan)} <= set(data_files(str(cache)))


@pytest.mark.parametrize("nofile", [None, 256])
def test_small_file_epoch_is_all_recorded(s3, bucket, mount_factory, nofile):
    # Thousands of objects finish faster than they can be committed; each
    # must still be recorded (the bench once lost half to EMFILE), so the
    # next epoch sends no GET.  Under a small open-file limit the bounded
    # commit backlog keeps descriptors for the files being read.
    root = os.path.join(s3.root, bucket)
    names = ["c%02d/%04d.bin" % (i % 30, i) for i in range(3000)]
    for n in names:
        os.makedirs(os.path.join(root, os.path.dirname(n)), exist_ok=True)
        with open(os.path.join(root, n), "wb") as f:
            f.write(rnd(700, n))
    with mount_factory(bucket, args=["--metadata-ttl", "600"],
                       nofile=nofile) as m:
        def epoch():
            def one(chunk):
                for n in chunk:
                    assert read_all(os.path.join(m.path, n)) == rnd(700, n)
            threads = [threading.Thread(target=one, args=(names[i::8],))
                       for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        epoch()
        time.sleep(1)  # let the last group commits land
        s3.reset()
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"])
        epoch()
        assert s3.stats(requests=False)["GET"] == 0
    assert "Too many open files" not in m.logs()


def test_parts_of_one_object_go_out_in_parallel(s3, bucket, mount_factory):
    # With a per-connection cap like a remote store's, one reader of one
    # object must get --parallel connections, not one.
    data = rnd(32 * MiB, 32)
    s3.put(bucket, "wide", data)
    with mount_factory(bucket, args=["--part-size", "4MiB",
                                     "--parallel", "8"]) as m:
        s3.faults({"bandwidth_bps": 8 * MiB})
        try:
            t0 = time.monotonic()
            assert sha(read_all(os.path.join(m.path, "wide"))) == sha(data)
            wall = time.monotonic() - t0
        finally:
            s3.faults({})
    print("32 MiB at 8 MiB/s per connection: %.2f s" % wall)
    assert wall < 2.0  # one connection at a time would take 4 s


def test_reads_wait_only_for_their_bytes_of_a_part(s3, bucket,
                                                  mount_factory):
    # A reader needs the bytes under its range, not the whole part: the
    # first bytes of an 8 MiB part at 2 MiB/s come long before its end.
    data = rnd(8 * MiB, 8)
    s3.put(bucket, "slow", data)
    with mount_factory(bucket, args=["--part-size", "8MiB"]) as m:
        s3.faults({"bandwidth_bps": 2 * MiB})
        try:
            t0 = time.monotonic()
            with open(os.path.join(m.path, "slow"), "rb") as f:
                head = f.read(64 * 1024)
                first = time.monotonic() - t0
                rest = f.read()
            wall = time.monotonic() - t0
        finally:
            s3.faults({})
    assert head + rest == data
    print("first 64 KiB after %.2f s, all 8 MiB after %.2f s"
          % (first, wall))
    assert wall > 3.0  # the cap held: the part takes 4 s
    assert first < 1.5, first


def test_cached_open_touches_the_lru_order(s3, bucket, mount_factory,
                                           tmp_path):
    # An open of a cached version writes nothing itself; its access time
    # reaches the index with the committer's next transaction, so the
    # eviction order still follows use.
    cache = tmp_path / "cache"
    s3.put(bucket, "a", rnd(1000, "a"))
    s3.put(bucket, "b", rnd(1000, "b"))

    def atimes():
        db = sqlite3.connect(str(cache / "index.db"))
        try:
            return {bytes(k).decode(): t for k, t in
                    db.execute("SELECT key, atime FROM objects")}
        finally:
            db.close()

    with mount_factory(bucket, cache_dir=cache) as m:
        read_all(os.path.join(m.path, "a"))
        read_all(os.path.join(m.path, "b"))
        time.sleep(1.5)
        before = atimes()
        time.sleep(1.1)  # atime is in whole seconds
        t0 = int(time.time())
        assert read_all(os.path.join(m.path, "a")) == rnd(1000, "a")
        deadline = time.monotonic() + 5
        while atimes()["a"] < t0 and time.monotonic() < deadline:
            time.sleep(0.1)
        after = atimes()
    assert after["a"] >= t0 > before["a"], (before, after)
    assert after["b"] == before["b"], (before, after)
