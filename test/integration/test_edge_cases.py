# SPDX-License-Identifier: MIT
"""The edge-case catalogue (shared/cases/edge-cases.md), one test per case,
each through a real mount against the local S3 server and asserting the
case's "Expected".  Sizes are scaled down where the catalogue's would not
fit a 2-core CI run; each docstring says how.  Each case names a kind of
fault, so several test more than the one repro (B01: every key-encoding
path, with all three signature schemes)."""
import concurrent.futures
import errno
import hashlib
import os
import random
import re
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

MiB = 1 << 20


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True,
                          text=True, **kw).stdout


def lay_out(s3, bucket, files):
    """Write {key: bytes} straight into the server's tree (served as
    objects, as benchmarks do): cheaper than thousands of PUTs."""
    for key, data in files.items():
        path = os.path.join(s3.root, bucket, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def ops(s3, *names):
    st = s3.stats(requests=False)
    return {n: st[n] for n in names}


def sanitized():
    """Whether HOARDFS_BIN is a sanitizer build (whose RSS means little)."""
    from conftest import HOARDFS
    out = subprocess.run(["ldd", HOARDFS], capture_output=True, text=True)
    return "libasan" in out.stdout or "libtsan" in out.stdout


def daemon_rss_kib(m):
    with open("/proc/%d/status" % m.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sig", ["v4", "v2", "obs"])
def test_b01_space_and_plus_in_keys(s3, bucket, mount_factory, sig):
    """Keys with space and '+' (and every other character a key-encoding
    path can get wrong) list exactly and read whole: object paths, listing
    prefixes, markers (pages of 3, no NextMarker) and the mounted prefix
    itself, under each signature scheme."""
    odd = ["a b+c.txt", "x+y/z w.bin", "100%.csv", "q&=?#;,@$!'()*~.txt",
           "한글 파일.txt", "x+y/%2B literal", "tab\there", "sp ace/in dir"]
    for k in odd:
        s3.put(bucket, k, rnd(10, k))
    s3.faults({"omit_next_marker": True, "max_keys_cap": 3})
    try:
        with mount_factory(bucket, args=["--signature", sig],
                           name="m-" + sig) as m:
            assert sorted(os.listdir(m.path)) == sorted(
                ["a b+c.txt", "x+y", "100%.csv", "q&=?#;,@$!'()*~.txt",
                 "한글 파일.txt", "tab\there", "sp ace"])
            assert sorted(os.listdir(os.path.join(m.path, "x+y"))) == [
                "%2B literal", "z w.bin"]
            for k in odd:
                assert read(os.path.join(m.path, k)) == rnd(10, k), k
            out = sh("sh", "-c", 'ls "$1"; ls "$1/x+y"; cat "$1/a b+c.txt" '
                     '| wc -c', "sh", m.path)
            assert "a b+c.txt\n" in out and "z w.bin\n" in out
            assert out.rstrip().endswith("10")
        with mount_factory(bucket, prefix="x+y", args=["--signature", sig],
                           name="p-" + sig) as m:
            assert sorted(os.listdir(m.path)) == ["%2B literal", "z w.bin"]
            assert read(os.path.join(m.path, "z w.bin")) == rnd(10,
                                                                "x+y/z w.bin")
    finally:
        s3.faults({})
    assert all(r["status"] < 300 for r in s3.stats()["requests"])


def test_b03_empty_dot_segments_do_not_break_the_parent(s3, bucket,
                                                        mount_factory):
    for k, n in [("exp2//A/f", 3), ("exp2/B/g", 3), ("c/./d", 1),
                 ("exp2/../h", 1), ("exp2/ok", 2)]:
        s3.put(bucket, k, rnd(n, k))
    with mount_factory(bucket) as m:
        assert sorted(os.listdir(os.path.join(m.path, "exp2"))) == [
            "B", "ok"]
        assert read(os.path.join(m.path, "exp2/B/g")) == rnd(3, "exp2/B/g")
        assert os.listdir(os.path.join(m.path, "c")) == []
        assert sorted(os.listdir(m.path)) == ["c", "exp2"]
    logs = m.logs()
    assert "skipping s3://%s/exp2//" % bucket in logs
    assert "skipping s3://%s/exp2/../: '.' or '..'" % bucket in logs
    assert logs.count("skipping s3://%s/exp2//" % bucket) == 1


def test_b04_segment_longer_than_name_max(s3, bucket, mount_factory):
    long_a = "a" * 300
    long_u = "好" * 90  # 270 bytes of UTF-8
    for k in ["d/" + long_a, "d/" + long_u, "d/ok"]:
        s3.put(bucket, k, b"four")
    with mount_factory(bucket) as m:
        out = sh("ls", os.path.join(m.path, "d"))
        assert out.split("\n")[:-1] == ["ok"]
        for name in (long_a, long_u):
            with pytest.raises(OSError) as e:
                os.stat(os.path.join(m.path, "d", name))
            assert e.value.errno == errno.ENAMETOOLONG
        assert read(os.path.join(m.path, "d/ok")) == b"four"
    logs = m.logs()
    assert logs.count("path segment longer than 255 bytes") == 2


def test_b05_implicit_directory(s3, bucket, mount_factory):
    s3.put(bucket, "foo/bar", b"abc")  # no "foo/" object
    with mount_factory(bucket) as m:
        assert os.listdir(m.path) == ["foo"]
        assert stat.S_ISDIR(os.stat(os.path.join(m.path, "foo")).st_mode)
        assert sh("cat", os.path.join(m.path, "foo/bar")) == "abc"


def test_b07_marker_beside_implicit_sibling(s3, bucket, mount_factory):
    s3.put(bucket, "b/", b"")
    s3.put(bucket, "b/file", b"1")
    s3.put(bucket, "ab/cd", b"1")
    s3.faults({"flavour": "obs"})
    try:
        with mount_factory(bucket) as m:
            assert sh("ls", m.path).split() == ["ab", "b"]
            assert os.listdir(os.path.join(m.path, "b")) == ["file"]
            assert os.listdir(os.path.join(m.path, "ab")) == ["cd"]
    finally:
        s3.faults({})


def test_b09_pfs_lists_the_directory_itself(s3, bucket, mount_factory):
    s3.put(bucket, "unit-test/test", b"t")
    s3.put(bucket, "unit-test/sub/x", b"x")
    s3.faults({"flavour": "obs", "pfs": True})
    try:
        with mount_factory(bucket, args=["--signature", "obs"]) as m:
            out = sh("ls", "-a", os.path.join(m.path, "unit-test"))
            assert out.split() == [".", "..", "sub", "test"]
        # Mounting the directory itself: its own entry is not a child.
        with mount_factory(bucket, prefix="unit-test", name="m2") as m:
            assert sh("ls", "-a", m.path).split() == [".", "..", "sub",
                                                      "test"]
            assert sh("ls", "-a", os.path.join(m.path, "sub")).split() == [
                ".", "..", "x"]
        lists = [r for r in s3.stats()["requests"] if r["op"] == "LIST"]
        assert lists  # the PFS answers were really seen
    finally:
        s3.faults({})


@pytest.mark.parametrize("next_marker", ["sent", "omitted"])
def test_b11_more_than_1000_objects(s3, bucket, mount_factory, next_marker):
    lay_out(s3, bucket, {"d/f%05d" % i: b"1" for i in range(2500)})
    if next_marker == "omitted":
        s3.faults({"omit_next_marker": True})
    try:
        with mount_factory(bucket) as m:
            d = os.path.join(m.path, "d")
            assert sh("sh", "-c", 'ls "$1" | wc -l', "sh", d).strip() == \
                "2500"
            assert sh("sh", "-c", 'find "$1" -type f | wc -l', "sh",
                      d).strip() == "2500"
        lists = [r for r in s3.stats()["requests"] if r["op"] == "LIST"]
        assert len(lists) == 1 + 1 + 3  # probe, root, three pages of d/
    finally:
        s3.faults({})


def test_b14_attributes_come_from_the_listing(s3, bucket, mount_factory,
                                              figures):
    n = 5000
    lay_out(s3, bucket, {"d/f%05d" % i: b"1" for i in range(n)})
    with mount_factory(bucket) as m:
        d = os.path.join(m.path, "d")
        s3.reset()
        t0 = time.monotonic()
        sh("ls", "-l", d)
        sh("du", "-s", d)
        out = sh("sh", "-c", 'find "$1" -size +0 | wc -l', "sh", d)
        first = time.monotonic() - t0
        assert out.strip() == str(n)
        st = ops(s3, "LIST", "HEAD", "GET")
        # The root and 5 pages of d/: O(pages), no HEAD, no GET.
        assert st == {"LIST": 1 + 5, "HEAD": 0, "GET": 0}, st
        s3.reset()
        t0 = time.monotonic()
        sh("ls", "-l", d)
        sh("du", "-s", d)
        sh("find", d, "-size", "+0")
        second = time.monotonic() - t0
        assert ops(s3, "LIST", "HEAD", "GET") == {"LIST": 0, "HEAD": 0,
                                                  "GET": 0}
    figures("B14 ls -l + du + find over %d keys: %d LISTs, 0 HEAD, %.2f s; "
            "again within the TTL: 0 requests, %.2f s"
            % (n, st["LIST"], first, second))


def test_b20_tiny_and_part_edge_objects(s3, bucket, mount_factory):
    sizes = {"one": 1, "zero": 0, "p": 8 * MiB, "p1": 8 * MiB + 1}
    for k, n in sizes.items():
        s3.put(bucket, k, rnd(n, k))
    with mount_factory(bucket) as m:
        for k, n in sizes.items():
            p = os.path.join(m.path, k)
            out = sh("sh", "-c", 'cat "$1" | wc -c', "sh", p)
            assert int(out) == n, k
            assert read(p) == rnd(n, k)
            with open(p, "rb") as f:
                f.seek(n)
                assert f.read(10) == b""
                f.seek(n + 100)
                assert f.read(1) == b""
    reqs = s3.stats()["requests"]
    assert not [r for r in reqs if r["op"] == "GET" and r["key"] == "zero"]
    assert not [r for r in reqs if r["range"] and "--" in r["range"]]
    assert all(r["status"] < 300 for r in reqs)


def test_b22_connection_reset_mid_body(s3, bucket, mount_factory, figures):
    """Scaled: 16 parallel sha256sum over 4 files of 16 MiB (1 MiB parts,
    64 GETs) instead of 20 x 300 MiB, 10% of GETs reset midway; then one
    object whose every GET breaks before any byte gets EIO, only once its
    retries are spent."""
    files = {"r/f%d" % i: rnd(16 * MiB, i) for i in range(4)}
    lay_out(s3, bucket, files)
    lay_out(s3, bucket, {"doomed": rnd(100 << 10, "doomed")})
    s3.faults({"seed": 22, "errors": [
        {"op": "GET", "key_regex": "^doomed$", "reset_after_bytes": 0},
        {"op": "GET", "rate": 0.1, "reset_after_bytes": 300000}]})
    try:
        with mount_factory(bucket, args=["--part-size", "1MiB"]) as m:
            t0 = time.monotonic()
            procs = [subprocess.Popen(
                ["sha256sum", os.path.join(m.path, k)],
                stdout=subprocess.PIPE, text=True)
                for _ in range(4) for k in files]
            for p, k in zip(procs, [k for _ in range(4) for k in files]):
                out, _ = p.communicate(timeout=120)
                assert p.returncode == 0
                assert out.split()[0] == hashlib.sha256(files[k]).hexdigest()
            wall = time.monotonic() - t0
            resets = s3.faults()["errors"][1]["injected"]
            assert resets > 0
            # Every retry resumed where the body broke: bytes fetched are
            # the objects' plus what the broken bodies had delivered.
            assert s3.stats(requests=False)["get_bytes"] <= \
                64 * MiB + resets * 300000
            t1 = time.monotonic()
            with pytest.raises(OSError) as e:
                read(os.path.join(m.path, "doomed"))
            assert e.value.errno == errno.EIO
            doomed_wall = time.monotonic() - t1
        doomed = [r for r in s3.stats()["requests"]
                  if r["key"] == "doomed" and r["op"] == "GET"]
        # The first try and 8 retries; the kernel's second read of the page
        # after its read-ahead failed gets the remembered error.
        assert len(doomed) == 9, len(doomed)
        assert re.search(r"GET s3://\S+/doomed .*after 9 tries in \d+ ms: "
                         r"retries exhausted", m.logs())
    finally:
        s3.faults({})
    figures("B22 16 readers x 16 MiB, 10%% GETs reset: %d resets, %.1f s; "
            "a never-answering GET gives EIO after 9 tries in %.1f s"
            % (resets, wall, doomed_wall))


def test_b27_slowdown_storm(s3, bucket, mount_factory, figures):
    """Scaled: 128 parallel stat/cat (64 files in 16 directories) instead
    of 256, under 30% 503 SlowDown with Retry-After on LIST/HEAD/GET."""
    files = {"s%02d/f%02d" % (i % 16, i): rnd(1000 + i, i) for i in range(64)}
    lay_out(s3, bucket, files)
    with mount_factory(bucket) as m:
        s3.faults({"seed": 27, "errors": [
            {"op": op, "rate": 0.3, "status": 503, "code": "SlowDown",
             "retry_after": 1} for op in ("LIST", "HEAD", "GET")]})
        s3.reset()
        t0 = time.monotonic()

        def one(job):
            kind, k = job
            p = os.path.join(m.path, k)
            if kind == "stat":
                return os.stat(p).st_size == len(files[k])
            return read(p) == files[k]

        jobs = [(kind, k) for k in files for kind in ("stat", "cat")]
        with concurrent.futures.ThreadPoolExecutor(128) as pool:
            assert all(pool.map(one, jobs))
        wall = time.monotonic() - t0
        st = s3.stats()
        injected = sum(r["injected"] for r in s3.faults()["errors"])
        s3.faults({})
    ok = [r for r in st["requests"] if r["status"] < 300]
    # One GET per file got through, and per directory a listing and at
    # most two targeted checks (LIST name/, HEAD name): everything else
    # was a SlowDown.
    assert sorted(r["key"] for r in ok if r["op"] == "GET") == sorted(files)
    meta = [(r["op"], r["key"], r.get("prefix")) for r in ok
            if r["op"] != "GET"]
    assert len(meta) <= (1 + 16) * 3, meta
    assert len(st["requests"]) == len(ok) + injected and injected > 0
    # No retry storm: after a SlowDown with Retry-After: 1 the same request
    # came back no sooner than a second later.
    last = {}
    for r in st["requests"]:
        k = (r["op"], r["key"], r.get("prefix"))
        if k in last and last[k]["status"] == 503:
            assert r["time"] - last[k]["time"] >= 0.95, (last[k], r)
        last[k] = r
    assert wall < 60
    summary = re.search(r"client: .*throttled.*lowest (\d+)", m.logs())
    assert summary and int(summary.group(1)) < 20  # the cap was cut
    figures("B27 128 stat/cat under 30%% SlowDown: %d requests for %d "
            "successes, lowest in-flight cap %s, %.1f s"
            % (len(st["requests"]), len(ok), summary.group(1), wall))


def test_b28_skewed_clock(s3, bucket, mount_factory):
    """The server's clock runs 16 minutes ahead (the same skew as a client
    clock 16 minutes behind, without libfaketime); later it jumps to 16
    minutes behind."""
    for k in ("a", "b"):
        s3.put(bucket, k, rnd(100, k))
    s3.faults({"clock_offset_s": 960})
    try:
        with mount_factory(bucket) as m:
            assert read(os.path.join(m.path, "a")) == rnd(100, "a")
            s3.faults({"clock_offset_s": -960})
            assert read(os.path.join(m.path, "b")) == rnd(100, "b")
        skewed = [r for r in s3.stats()["requests"] if r["status"] == 403]
        assert 1 <= len(skewed) <= 2
        warn = re.findall(r"warn: client: RequestTimeTooSkewed: the clock of "
                          r"127.0.0.1 is ([+-]\d+) s", m.logs())
        assert len(warn) == 2
        assert abs(int(warn[0]) - 960) <= 5 and abs(int(warn[1]) + 960) <= 5
    finally:
        s3.faults({})


def test_b30_many_open_files_bounded_memory(s3, bucket, mount_factory,
                                            figures):
    """Scaled: 48 open files of 4 MiB read 1 MiB each round-robin (not 500
    of 256 MiB), and ls -lR over 20,000 keys (not 1M); daemon RSS sampled
    throughout must stay under 64 MiB."""
    files = {"m/f%03d" % i: rnd(4 * MiB, i) for i in range(48)}
    lay_out(s3, bucket, files)
    lay_out(s3, bucket, {"t/%02d/k%05d" % (i % 20, i): b"k"
                         for i in range(20000)})
    with mount_factory(bucket, args=["--part-size", "1MiB"]) as m:
        peak = daemon_rss_kib(m)
        fds = [os.open(os.path.join(m.path, k), os.O_RDONLY) for k in files]
        try:
            for rnd_i in range(4):
                for fd, k in zip(fds, files):
                    off = rnd_i * MiB
                    assert os.pread(fd, MiB, off) == files[k][off:off + MiB]
                peak = max(peak, daemon_rss_kib(m))
        finally:
            for fd in fds:
                os.close(fd)
        p = subprocess.Popen(["ls", "-lR", os.path.join(m.path, "t")],
                             stdout=subprocess.PIPE, text=True)
        lines = 0
        for _ in p.stdout:
            lines += 1
            if lines % 2000 == 0:
                peak = max(peak, daemon_rss_kib(m))
        assert p.wait() == 0 and lines >= 20000
        peak = max(peak, daemon_rss_kib(m))
    assert peak < (64 if not sanitized() else 512) * 1024, peak
    figures("B30 48 open files + ls -lR of 20000 keys: daemon peak RSS "
            "%.1f MiB" % (peak / 1024))


def test_b32_st_blocks(s3, bucket, mount_factory):
    s3.put(bucket, "f", rnd(548618, "f"))
    s3.put(bucket, "d/g", rnd(1048576, "g"))
    s3.put(bucket, "z", b"")
    with mount_factory(bucket) as m:
        du = sh("du", "-B1", os.path.join(m.path, "f"),
                os.path.join(m.path, "z")).split()
        assert abs(int(du[0]) - 548618) <= 4096 and du[2] == "0"
        assert sh("du", "-sb", os.path.join(m.path, "d")).split()[0] == \
            "1048576"
        assert sh("stat", "-c", "%s %b %B", os.path.join(m.path, "f")) == \
            "548618 1072 512\n"
        assert os.stat(os.path.join(m.path, "f")).st_blksize >= 4096


def test_b33_foreign_objects_owner_and_modes(s3, bucket, mount_factory):
    """Mount as root with allow_other,uid=1000,gid=1000; uid 1000 and 1001
    both read (setpriv instead of sudo -u '#1000')."""
    s3.put(bucket, "f", b"1")
    s3.put(bucket, "dir/g", b"2")
    base = tempfile.mkdtemp(prefix="hoardfs-b33-")
    os.chmod(base, 0o755)  # other users must reach the mountpoint
    try:
        with mount_factory(bucket, base=base, args=[
                "-o", "allow_other,uid=1000,gid=1000"]) as m:
            os.chmod(base, 0o755)
            st = os.stat(os.path.join(m.path, "f"))
            assert (st.st_uid, st.st_gid) == (1000, 1000)
            assert stat.S_IMODE(st.st_mode) & 0o444 == 0o444
            dst = os.stat(os.path.join(m.path, "dir"))
            assert stat.S_IMODE(dst.st_mode) & 0o555 == 0o555
            for uid in (1000, 1001):
                out = subprocess.run(
                    ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid,
                     "--clear-groups", "cat", os.path.join(m.path, "f"),
                     os.path.join(m.path, "dir/g")],
                    capture_output=True, text=True, timeout=30)
                assert out.returncode == 0 and out.stdout == "12", \
                    (uid, out.stderr)
        # Explicit modes are used as given; never 000.
        with mount_factory(bucket, args=["--file-mode", "0644",
                                         "--dir-mode", "0755"],
                           name="m3") as m:
            assert stat.S_IMODE(os.stat(os.path.join(m.path, "f")).st_mode) \
                == 0o644
            assert stat.S_IMODE(os.stat(os.path.join(m.path,
                                                     "dir")).st_mode) == 0o755
            # No uid given: the mounting user owns everything.
            assert os.stat(os.path.join(m.path, "f")).st_uid == os.getuid()
    finally:
        shutil.rmtree(base, ignore_errors=True)
