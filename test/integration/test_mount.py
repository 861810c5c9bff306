# SPDX-License-Identifier: MIT
"""hoardfs 0.1 through a real mount: the tree matches the bucket, bytes match
the objects, the cache serves repeated reads without a GET, a remount over
the same cache dir sends no GET, and writes are refused."""
import errno
import hashlib
import os
import random
import signal
import stat
import subprocess
import time

import pytest

from conftest import HOARDFS, clean_env, is_mounted

PART = 64 * 1024  # --part-size used here, so part edges are cheap to test
SIZES = [0, 1, PART - 1, PART, PART + 1, 5 * PART + 123]


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def gets(s3):
    return s3.stats()["GET"]


def put_sizes(s3, bucket, prefix="sizes/"):
    objs = {}
    for n in SIZES:
        key = "%sf%d.bin" % (prefix, n)
        objs[key] = rnd(n, n)
        s3.put(bucket, key, objs[key])
    return objs


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def walk(root):
    """{relative path: ('d', 0) or ('f', size)} from an `ls -lR`-like walk."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs:
            p = os.path.join(d, name)
            assert stat.S_ISDIR(os.lstat(p).st_mode)
            out[os.path.relpath(p, root)] = ("d", 0)
        for name in files:
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = ("f", os.lstat(p).st_size)
    return out


def expected_tree(objs, prefix=""):
    out = {}
    for key, data in objs.items():
        rel = key[len(prefix):]
        parts = rel.split("/")
        for i in range(1, len(parts)):
            out["/".join(parts[:i])] = ("d", 0)
        out[rel] = ("f", len(data))
    return out


def test_tree_matches_bucket_listing(s3, bucket, mount_factory):
    objs = {}
    for i, key in enumerate(["top.txt", "a/one", "a/b/two", "a/b/c/three",
                             "deep/x/y/z/w/file", "img/cls%02d/%03d.jpg"]):
        if "%" in key:
            for c in range(3):
                for j in range(4):
                    k = key % (c, j)
                    objs[k] = rnd(100 + j, k)
        else:
            objs[key] = rnd(10 * i + 1, key)
    for k, v in objs.items():
        s3.put(bucket, k, v)
    with mount_factory(bucket) as m:
        assert walk(m.path) == expected_tree(objs)
        # `ls -lR` must work too and show every file
        out = subprocess.run(["ls", "-lR", m.path], check=True,
                             capture_output=True, text=True).stdout
        for k in objs:
            assert os.path.basename(k) in out


def test_prefix_mount_shows_only_the_prefix(s3, bucket, mount_factory):
    objs = {"data/train/a": b"A" * 7, "data/train/sub/b": b"B" * 3,
            "data/other": b"O", "outside": b"X"}
    for k, v in objs.items():
        s3.put(bucket, k, v)
    with mount_factory(bucket, prefix="data/train") as m:
        assert walk(m.path) == {"a": ("f", 7), "sub": ("d", 0),
                                "sub/b": ("f", 3)}
        assert read_all(os.path.join(m.path, "sub/b")) == b"BBB"


@pytest.mark.parametrize("size", SIZES)
def test_bytes_identical_at_part_edges(s3, bucket, mount_factory, size):
    data = rnd(size, size)
    s3.put(bucket, "obj", data)
    with mount_factory(bucket, args=["--part-size", str(PART)]) as m:
        got = read_all(os.path.join(m.path, "obj"))
        assert len(got) == size and sha(got) == sha(data)
        st = os.stat(os.path.join(m.path, "obj"))
        assert st.st_size == size
        assert st.st_blocks == (size + 511) // 512


def test_default_part_size_object_of_two_parts(s3, bucket, mount_factory):
    size = 8 * 1024 * 1024 + 1  # one byte past the default 8 MiB part
    data = rnd(size, 7)
    s3.put(bucket, "big", data)
    s3.reset()
    with mount_factory(bucket) as m:
        assert sha(read_all(os.path.join(m.path, "big"))) == sha(data)
    ranges = [r["range"] for r in s3.stats()["requests"] if r["op"] == "GET"]
    assert sorted(ranges) == ["bytes=0-8388607", "bytes=8388608-8388608"]


def test_random_offsets(s3, bucket, mount_factory):
    size = 9 * PART + 17
    data = rnd(size, 99)
    s3.put(bucket, "r.bin", data)
    rng = random.Random(5)
    with mount_factory(bucket, args=["--part-size", str(PART)]) as m:
        fd = os.open(os.path.join(m.path, "r.bin"), os.O_RDONLY)
        try:
            for _ in range(200):
                off = rng.randrange(0, size + 10)
                n = rng.randrange(1, 3 * PART)
                assert os.pread(fd, n, off) == data[off:off + n]
        finally:
            os.close(fd)


def test_second_read_sends_no_get(s3, bucket, mount_factory):
    objs = put_sizes(s3, bucket)
    with mount_factory(bucket, args=["--part-size", str(PART)]) as m:
        for k, v in objs.items():
            assert read_all(os.path.join(m.path, k)) == v
        first = gets(s3)
        # every non-empty object was fetched, the empty one with no GET
        assert first >= len([v for v in objs.values() if v])
        empty_gets = [r for r in s3.stats()["requests"]
                      if r["op"] == "GET" and r["key"].endswith("f0.bin")]
        assert empty_gets == []
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       check=False)
        for k, v in objs.items():
            assert read_all(os.path.join(m.path, k)) == v
        assert gets(s3) == first


def test_remount_reuses_cache_with_zero_gets(s3, bucket, mount_factory,
                                             tmp_path):
    objs = put_sizes(s3, bucket)
    cache = tmp_path / "shared-cache"
    with mount_factory(bucket, cache_dir=cache, name="m1",
                       args=["--part-size", str(PART)]) as m:
        for k, v in objs.items():
            assert read_all(os.path.join(m.path, k)) == v
    s3.reset()
    with mount_factory(bucket, cache_dir=cache, name="m2",
                       args=["--part-size", str(PART)]) as m:
        for k, v in objs.items():
            assert read_all(os.path.join(m.path, k)) == v
    assert gets(s3) == 0
    assert s3.stats()["HEAD"] == 0


def test_cache_dir_layout_and_modes(s3, bucket, mount_factory, tmp_path):
    s3.put(bucket, "secret name with spaces.txt", b"hello")
    cache = tmp_path / "c"
    with mount_factory(bucket, cache_dir=cache) as m:
        assert read_all(os.path.join(m.path,
                                     "secret name with spaces.txt")) == b"hello"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    files = []
    for d, _, names in os.walk(cache):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
        for n in names:
            files.append(os.path.join(d, n))
            assert "secret" not in n
    data_files = [f for f in files if "/data/" in f]
    assert len(data_files) == 1
    for f in data_files + [str(cache / "index.db")]:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f


def test_attributes_and_xattrs(s3, bucket, mount_factory):
    s3.put(bucket, "d/f", b"x" * 548618)
    with mount_factory(bucket, args=["--uid", "1234", "--gid", "4321"]) as m:
        st = os.stat(os.path.join(m.path, "d/f"))
        assert stat.S_IMODE(st.st_mode) == 0o444
        assert (st.st_uid, st.st_gid) == (1234, 4321)
        assert st.st_blocks == 1072  # ceil(548618 / 512), edge case B32
        dst = os.stat(os.path.join(m.path, "d"))
        assert stat.S_ISDIR(dst.st_mode)
        assert stat.S_IMODE(dst.st_mode) == 0o555
        f = os.path.join(m.path, "d/f")
        assert os.getxattr(f, "user.hoardfs.key") == b"d/f"
        etag = os.getxattr(f, "user.hoardfs.etag").decode()
        assert etag == '"%s"' % hashlib.md5(b"x" * 548618).hexdigest()
        assert os.getxattr(f, "user.hoardfs.state") == b"absent"
        read_all(f)
        deadline = time.monotonic() + 5
        while os.getxattr(f, "user.hoardfs.state") != b"cached":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert os.getxattr(f, "user.hoardfs.cached_bytes") == b"548618"
        assert "user.hoardfs.etag" in os.listxattr(f)


def test_writes_are_refused(s3, bucket, mount_factory):
    s3.put(bucket, "f", b"data")
    with mount_factory(bucket) as m:
        p = os.path.join(m.path, "f")
        for call in (lambda: open(p, "wb"),
                     lambda: open(os.path.join(m.path, "new"), "wb"),
                     lambda: os.mkdir(os.path.join(m.path, "dir")),
                     lambda: os.unlink(p),
                     lambda: os.rename(p, p + "2"),
                     lambda: os.chmod(p, 0o600),
                     lambda: os.setxattr(p, "user.x", b"1")):
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EROFS
        assert read_all(p) == b"data"


def test_missing_names(s3, bucket, mount_factory):
    s3.put(bucket, "a/b", b"1")
    with mount_factory(bucket) as m:
        assert not os.path.exists(os.path.join(m.path, "nope"))
        with pytest.raises(FileNotFoundError):
            open(os.path.join(m.path, "a/nope"), "rb")
        with pytest.raises(NotADirectoryError):
            os.listdir(os.path.join(m.path, "a/b"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_unmounts_cleanly(s3, bucket, mount_factory, sig):
    s3.put(bucket, "f", b"x")
    m = mount_factory(bucket).start()
    proc = m.proc
    proc.send_signal(sig)
    assert proc.wait(15) == 0
    assert not is_mounted(m.path)
    m.proc = None
    m.log.close()


def test_unmount_leaves_no_process(s3, bucket, mount_factory):
    s3.put(bucket, "big", rnd(3 * PART, 1))
    m = mount_factory(bucket, args=["--part-size", str(PART)]).start()
    pid = m.proc.pid
    with open(os.path.join(m.path, "big"), "rb") as f:
        f.read(10)
    m.stop()
    assert not os.path.exists("/proc/%d" % pid)
    assert not is_mounted(m.path)


def test_daemon_mode_returns_after_mount(s3, bucket, tmp_path):
    s3.put(bucket, "f", b"daemon")
    mnt = tmp_path / "dm"
    mnt.mkdir()
    env = clean_env({"AWS_ACCESS_KEY_ID": s3.access_key,
                     "AWS_SECRET_ACCESS_KEY": s3.secret_key})
    r = subprocess.run([HOARDFS, "--endpoint", s3.endpoint, "--path-style",
                        "--cache-dir", str(tmp_path / "dc"),
                        "s3://%s" % bucket, str(mnt)], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    try:
        assert is_mounted(str(mnt))
        assert read_all(str(mnt / "f")) == b"daemon"
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
    deadline = time.monotonic() + 10
    while True:
        ps = subprocess.run(["pgrep", "-f", str(mnt)], capture_output=True,
                            text=True).stdout.split()
        if not ps:
            break
        assert time.monotonic() < deadline, "daemon still running: %s" % ps
        time.sleep(0.1)


def test_key_names_cannot_forge_log_lines(s3, bucket, mount_factory):
    evil = ("inj/" + "q" * 256 + "\n2026-01-01T00:00:00.000Z hoardfs error: "
            "FORGED LINE \x1b[31mred")
    s3.put(bucket, evil, b"x")
    s3.put(bucket, "inj/ok", b"y")
    with mount_factory(bucket) as m:
        assert os.listdir(os.path.join(m.path, "inj")) == ["ok"]
    logs = m.logs()
    assert "\x1b" not in logs
    forged = [line for line in logs.splitlines() if "FORGED" in line]
    assert forged and all("skipping" in line for line in forged)


@pytest.mark.parametrize("args,want", [([], 1024),
                                       (["--max-read-ahead-kb", "256"], 256)])
def test_kernel_read_ahead_is_set(s3, bucket, mount_factory, args, want):
    # The kernel gives a FUSE mount 128 KiB of read-ahead; warm sequential
    # reads run faster with more, and every byte must still be right.
    data = os.urandom(3 * 1024 * 1024 + 17)
    s3.put(bucket, "seq.bin", data)
    with mount_factory(bucket, args=args) as m:
        path = os.path.join(m.path, "seq.bin")
        assert os.path.getsize(path) == len(data)  # the first GETATTR
        dev = os.stat(m.path).st_dev
        with open("/sys/class/bdi/%d:%d/read_ahead_kb"
                  % (os.major(dev), os.minor(dev))) as f:
            assert int(f.read()) == want
        with open(path, "rb") as f:
            assert f.read() == data
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"])
        with open(path, "rb") as f:
            assert f.read() == data
