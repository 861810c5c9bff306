# SPDX-License-Identifier: MIT
"""Warm, watch and steer a running mount, through the mount only: hoardfs
warm / status / evict, the control attributes behind them, --metrics-file
and SIGUSR1.  Every figure is checked against what the local S3 server
counted."""
import errno
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import HOARDFS, Mount, clean_env

KiB = 1024
MiB = 1024 * KiB


def run(args, timeout=120, env=None):
    return subprocess.run([HOARDFS] + args, capture_output=True, text=True,
                          timeout=timeout, env=env or clean_env())


def fnv1a64(key):
    """The documented shard hash (man hoardfs: --shard)."""
    h = 0xcbf29ce484222325
    for b in key.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def make_tree(s3, bucket, n=300, seed=1, prefix="train", big=0):
    """n small files laid out on the server's disk (served as objects),
    spread over a few directories, one of them empty; returns {key: data}.
    The first `big` files are 200 KiB, to span several parts."""
    rng = random.Random(seed)
    objs = {}
    for i in range(n):
        key = "%s/c%02d/img_%04d.bin" % (prefix, i % 7, i)
        size = 200 * KiB if i < big else (0 if i == 5 else rng.randrange(1, 6000))
        objs[key] = rng.randbytes(size)
    for key, data in objs.items():
        path = os.path.join(s3.root, bucket, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return objs


def gets_by_key(s3):
    out = {}
    for r in s3.stats()["requests"]:
        if r["op"] == "GET":
            out[r["key"]] = out.get(r["key"], 0) + 1
    return out


def read_tree(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def xattr(path, name):
    return os.getxattr(path, name).decode()


def status(m):
    r = run(["status", "--json", m.path])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_warm_then_epoch_sends_no_get(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket)
    nonempty = {k for k, v in objs.items() if v}
    s3.reset()
    with mount_factory(bucket) as m:
        r = run(["warm", m.path])
        assert r.returncode == 0, r.stderr
        assert "300 files" in r.stdout
        assert "%d fetched" % len(nonempty) in r.stdout
        assert " 0 failed" in r.stdout
        # One GET per non-empty object, nothing twice; the empty file
        # needs no request at all.
        gets = gets_by_key(s3)
        assert set(gets) == nonempty and set(gets.values()) == {1}
        for key in objs:
            assert xattr(os.path.join(m.path, key), "user.hoardfs.state") \
                == "cached"

        s3.reset()
        assert read_tree(m.path) == objs  # an epoch: every byte right
        assert s3.stats()["GET"] == 0

        s3.reset()
        r = run(["warm", m.path])  # again: it all is cached already
        assert r.returncode == 0, r.stderr
        assert "0 fetched" in r.stdout and "300 already cached" in r.stdout
        assert s3.stats()["GET"] == 0


def test_shards_cover_every_file_once(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=200, seed=2)
    objs = {k: v for k, v in objs.items() if v}  # empty files need no GET
    n = 3
    seen = {}
    with mount_factory(bucket) as m:
        for k in range(n):
            s3.reset()
            r = run(["warm", "--shard", "%d/%d" % (k, n), "--jobs", "4",
                     os.path.join(m.path, "train")])
            assert r.returncode == 0, r.stderr
            assert r.stdout.startswith("shard %d/%d: " % (k, n)), r.stdout
            gets = gets_by_key(s3)
            assert set(gets.values()) <= {1}
            for key in gets:
                assert key not in seen, (key, seen[key], k)
                seen[key] = k
                # The documented rule picked it.
                assert fnv1a64(key) % n == k
            assert gets, "an empty shard of 200 files is not plausible"
    assert set(seen) == set(objs)


def test_status_and_xattrs_match_the_server(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=60, seed=3, big=6)
    cold = {k: v for k, v in objs.items() if "/c00/" in k}
    warm = {k: v for k, v in objs.items() if k not in cold}
    s3.reset()  # before the mount: its start-up LIST counts too
    with mount_factory(bucket, args=["--part-size", "64KiB"]) as m:
        for key in cold:  # read without warming: waits for the store
            with open(os.path.join(m.path, key), "rb") as f:
                assert f.read() == cold[key]
        warm_dirs = sorted({os.path.dirname(k) for k in warm})
        r = run(["warm"] + [os.path.join(m.path, d) for d in warm_dirs])
        assert r.returncode == 0, r.stderr
        for key in warm:  # an epoch after the warm: all from the cache
            with open(os.path.join(m.path, key), "rb") as f:
                assert f.read() == warm[key]
        time.sleep(0.3)  # the last group commit
        st = status(m)
        srv = s3.stats()
        total = sum(len(v) for v in objs.values())

        assert st["bucket"] == bucket and st["mountpoint"] == m.path
        assert st["requests"]["GET"]["sent"] == srv["GET"] > len(objs)
        assert st["requests"]["HEAD"]["sent"] == srv["HEAD"]
        assert st["requests"]["LIST"]["sent"] == srv["LIST"]
        assert st["requests"]["failed"] == 0
        assert st["requests"]["get_bytes"] == srv["get_bytes"] == total
        assert st["fetch"]["bytes"] == total
        assert st["fetch"]["parts"] == srv["GET"]
        # Every byte read counted once.  A cold read is 'from the store'
        # only for the parts it had to wait for: read-ahead may have
        # brought the rest before the read arrived.
        reads = st["reads"]
        assert reads["bytes_from_cache"] + reads["bytes_from_store"] == total
        assert 0 < reads["bytes_from_store"] <= sum(
            len(v) for v in cold.values())
        assert reads["bytes_from_cache"] >= sum(len(v) for v in warm.values())
        assert reads["hit_ratio"] == pytest.approx(
            reads["bytes_from_cache"] / total, abs=1e-5)
        assert st["cache"]["used_bytes"] == total
        assert st["cache"]["objects"] == len(objs)
        assert st["uptime_sec"] >= 0 and st["version"]

        # The per-file attributes add up to the same, and so do the
        # directory figures.
        cached = sum(int(xattr(os.path.join(m.path, k),
                               "user.hoardfs.cached_bytes")) for k in objs)
        assert cached == total
        summary = json.loads(xattr(m.path, "user.hoardfs.summary"))
        assert summary == {"files": len(objs), "dirs": 8, "bytes": total,
                           "cached_bytes": total,
                           "cached_files": len(objs)}
        c00 = os.path.join(m.path, "train", "c00")
        assert xattr(c00, "user.hoardfs.size") == str(
            sum(len(v) for v in cold.values()))
        assert xattr(c00, "user.hoardfs.state") == "cached"

        # The table shows the same mount (the summary above may have
        # listed a directory that lookups had not needed).
        srv = s3.stats()
        r = run(["status", m.path])
        assert r.returncode == 0, r.stderr
        assert "s3://%s/" % bucket in r.stdout
        assert re.search(r"GET %d, HEAD %d, LIST %d sent" % (
            srv["GET"], srv["HEAD"], srv["LIST"]), r.stdout), r.stdout


def test_evict_then_read_fetches_again(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=70, seed=4)
    with mount_factory(bucket) as m:
        assert run(["warm", m.path]).returncode == 0
        time.sleep(0.3)
        d = os.path.join(m.path, "train", "c03")
        in_d = {k: v for k, v in objs.items() if "/c03/" in k}
        r = run(["evict", d])
        assert r.returncode == 0, r.stderr
        dropped = sum(len(v) for v in in_d.values())
        assert "(%d bytes)" % dropped in r.stdout, r.stdout
        for key in in_d:
            assert xattr(os.path.join(m.path, key),
                         "user.hoardfs.state") == "absent"
        s3.reset()
        for key, data in in_d.items():
            with open(os.path.join(m.path, key), "rb") as f:
                assert f.read() == data
        assert gets_by_key(s3) == {k: 1 for k, v in in_d.items() if v}

        # An open file is busy: kept, named, exit 1.
        busy = sorted(k for k in objs if "/c01/" in k and objs[k])[0]
        with open(os.path.join(m.path, busy), "rb") as f:
            f.read(1)
            r = run(["evict", os.path.join(m.path, busy)])
            assert r.returncode == 1
            assert "busy" in r.stderr and busy in r.stderr
            r = run(["evict", "--all", m.path])
            assert r.returncode == 1 and "1 busy" in r.stdout, r.stdout
            assert xattr(os.path.join(m.path, busy),
                         "user.hoardfs.state") == "cached"
        r = run(["evict", "--all", m.path])
        assert r.returncode == 0 and "0 busy" in r.stdout, r.stdout
        assert status(m)["cache"]["used_bytes"] == 0
        s3.reset()
        assert read_tree(m.path) == objs
        assert s3.stats()["GET"] == len([v for v in objs.values() if v])


def test_failed_warm_names_the_key(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=30, seed=5)
    bad = sorted(k for k, v in objs.items() if v)[7]
    # Every attempt fails, retries included (count: unlimited).
    s3.faults({"errors": [{"op": "GET", "key_regex": "^%s$" % re.escape(bad),
                           "status": 500, "code": "InternalError",
                           "rate": 1.0}]})
    with mount_factory(bucket) as m:
        r = run(["warm", m.path])
        assert r.returncode == 1
        assert bad in r.stderr and "Input/output error" in r.stderr, r.stderr
        assert "1 failed" in r.stdout
        assert "1 of 30 files failed" in r.stderr
        # The daemon's log line names operation, bucket, key, status, code
        # and request id.
        line = [ln for ln in m.logs().splitlines()
                if "GET s3://%s/%s" % (bucket, bad) in ln]
        assert line, m.logs()
        assert re.search(r" 500 InternalError request-id=\S+", line[0])
        assert xattr(os.path.join(m.path, bad), "user.hoardfs.state") != \
            "cached"
        # Everything else was cached; a rerun after the fault fetches the
        # one missing object only.
        s3.faults({})
        s3.reset()
        r = run(["warm", m.path])
        assert r.returncode == 0, r.stderr
        assert gets_by_key(s3) == {bad: 1}


def test_throttling_and_retries_show_in_status(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=12, seed=13)
    s3.faults({"errors": [{"op": "GET", "status": 503, "code": "SlowDown",
                           "retry_after": 0, "count": 3}]})
    s3.reset()
    with mount_factory(bucket) as m:
        r = run(["warm", m.path])
        assert r.returncode == 0, r.stderr
        st = status(m)
        srv = s3.stats()
        nonempty = len([v for v in objs.values() if v])
        assert st["requests"]["GET"]["sent"] == srv["GET"] == nonempty + 3
        assert st["requests"]["GET"]["retries"] == 3
        assert st["requests"]["throttled"] == 3
        assert st["requests"]["failed"] == 0
        r = run(["status", m.path])
        assert "3 throttled (429/503)" in r.stdout, r.stdout


def parse_prometheus(text):
    """A strict reader of the text exposition format: HELP and TYPE before
    each family's samples, counters named *_total; returns
    {(name, frozenset(labels)): value}."""
    samples, types, helps = {}, {}, set()
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name in helps and kind in ("counter", "gauge")
            types[name] = kind
        else:
            m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)", line)
            assert m, line
            name, labels, value = m.groups()
            assert name in types, "sample before its TYPE: " + line
            assert name.startswith("hoardfs_")
            if types[name] == "counter":
                assert name.endswith("_total"), name
            pairs = label_re.findall(labels)
            assert ",".join('%s="%s"' % p for p in pairs) == labels, line
            samples[(name, frozenset(pairs))] = float(value)
    return samples


def test_metrics_file_and_sigusr1(s3, bucket, mount_factory, tmp_path):
    objs = make_tree(s3, bucket, n=40, seed=6)
    prom = str(tmp_path / "hoardfs.prom")
    s3.reset()
    m = mount_factory(bucket, args=["--metrics-file", prom,
                                    "--log-level", "error"]).start()
    assert run(["warm", m.path]).returncode == 0
    time.sleep(0.3)
    m.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while "status: " not in m.logs():
        assert time.monotonic() < deadline, m.logs()
        time.sleep(0.05)
    srv = s3.stats()
    line = [ln for ln in m.logs().splitlines() if "status: " in ln][0]
    # Written whatever --log-level says: the user asked for it.
    assert " GET=%d " % srv["GET"] in line and " LIST=%d " % srv["LIST"] in line

    def value(samples, name, **labels):
        want = {("mountpoint", m.path)} | set(labels.items())
        return samples[(name, frozenset(want))]

    samples = parse_prometheus(open(prom).read())  # refreshed by SIGUSR1
    total = sum(len(v) for v in objs.values())
    assert value(samples, "hoardfs_requests_total", op="GET") == srv["GET"]
    assert value(samples, "hoardfs_requests_total", op="LIST") == srv["LIST"]
    assert value(samples, "hoardfs_fetched_bytes_total") == srv["get_bytes"]
    assert value(samples, "hoardfs_fetched_bytes_total") == total
    assert value(samples, "hoardfs_cache_used_bytes") == total
    assert value(samples, "hoardfs_read_bytes_total", source="cache") == 0
    info = [k for k in samples if k[0] == "hoardfs_info"]
    assert ("bucket", bucket) in info[0][1]

    with open(os.path.join(m.path, sorted(objs)[1]), "rb") as f:
        n = len(f.read())
    m.stop()
    # Rewritten at exit, with the read above; no temporary file left.
    samples = parse_prometheus(open(prom).read())
    assert value(samples, "hoardfs_read_bytes_total", source="cache") == n
    assert not os.path.exists(prom + ".tmp")


def test_metrics_file_unwritable_fails_the_start(s3, bucket, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    env = clean_env({"AWS_ACCESS_KEY_ID": s3.access_key,
                     "AWS_SECRET_ACCESS_KEY": s3.secret_key})
    r = run(["--endpoint", s3.endpoint, "--path-style", "--cache-dir",
             str(tmp_path / "c"), "--metrics-file",
             str(tmp_path / "no" / "such" / "m.prom"),
             "s3://" + bucket, str(mnt)], env=env)
    assert r.returncode == 1
    assert "--metrics-file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_warm_and_reader_share_each_part(s3, bucket, mount_factory):
    data = random.Random(7).randbytes(16 * MiB)
    s3.put(bucket, "big", data)
    s3.faults({"bandwidth_bps": 16 * MiB})
    s3.reset()
    with mount_factory(bucket, args=["--part-size", "1MiB",
                                     "--parallel", "4"]) as m:
        p = os.path.join(m.path, "big")
        got = []
        reader = threading.Thread(
            target=lambda: got.append(open(p, "rb").read()))
        reader.start()
        r = run(["warm", p])
        reader.join()
        assert r.returncode == 0, r.stderr
        assert got == [data]
    ranges = [x["range"] for x in s3.stats()["requests"] if x["op"] == "GET"]
    assert len(ranges) == 16 == len(set(ranges))


def test_background_warm(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=50, seed=8)
    s3.faults({"latency_ms": 50})
    with mount_factory(bucket) as m:
        t0 = time.monotonic()
        r = run(["warm", "--background", "--jobs", "2", m.path])
        assert r.returncode == 0, r.stderr
        assert time.monotonic() - t0 < 0.8  # the work: 25 rounds of 50 ms
        assert "background" in r.stdout
        deadline = time.monotonic() + 30
        while xattr(m.path, "user.hoardfs.state") != "cached":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert s3.stats()["GET"] == len([v for v in objs.values() if v])


def test_listxattr_names_no_side_effects(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=10, seed=9)
    with mount_factory(bucket) as m:
        key = sorted(k for k, v in objs.items() if v)[0]
        f = os.path.join(m.path, key)
        assert set(os.listxattr(m.path)) == {"user.hoardfs.key",
                                             "user.hoardfs.status"}
        assert os.listxattr(os.path.dirname(f)) == ["user.hoardfs.key"]
        assert "user.hoardfs.warm" not in os.listxattr(f)
        s3.reset()
        r = subprocess.run(["getfattr", "-R", "-d", "-m", "-", m.path],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "hoardfs.status" in r.stdout
        assert "hoardfs.warm" not in r.stdout
        assert s3.stats()["GET"] == 0  # nothing was warmed
        assert xattr(f, "user.hoardfs.state") == "absent"
        # The control attributes answer where they make sense only.
        with pytest.raises(OSError) as e:
            os.getxattr(os.path.dirname(f), "user.hoardfs.warm")
        assert e.value.errno == errno.EISDIR
        with pytest.raises(OSError) as e:
            os.getxattr(os.path.dirname(f), "user.hoardfs.status")
        assert e.value.errno == errno.ENODATA
        assert xattr(f, "user.hoardfs.warm") == "cached %d" % len(objs[key])
        assert xattr(f, "user.hoardfs.evict") == "evicted %d" % len(objs[key])
        assert xattr(f, "user.hoardfs.evict") == "evicted 0"


def test_prefix_mount_paths_and_keys(s3, bucket, mount_factory):
    objs = make_tree(s3, bucket, n=20, seed=10, prefix="ds/v1")
    with mount_factory(bucket, prefix="ds/v1") as m:
        sub = os.path.join(m.path, "c02")
        r = run(["warm", sub + "/", sub])  # the same tree twice: once
        assert r.returncode == 0, r.stderr
        n = len([k for k in objs if "/c02/" in k])
        assert r.stdout.startswith("%d files" % n), r.stdout
        assert json.loads(xattr(sub, "user.hoardfs.summary"))[
            "cached_files"] == n
        assert status(m)["prefix"] == "ds/v1/"


def test_only_root_or_the_daemon_user_evicts(s3, bucket):
    objs = make_tree(s3, bucket, n=10, seed=12)
    key = sorted(k for k, v in objs.items() if v)[0]
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    # pytest's tmp dirs are 0700: mount where another user can reach.
    top = tempfile.mkdtemp(prefix="hoardfs-perm-")
    os.chmod(top, 0o755)
    try:
        run_as_nobody_checks(s3, bucket, key, nobody, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def run_as_nobody_checks(s3, bucket, key, nobody, top):
    with Mount(s3, pathlib.Path(top), bucket,
               args=["-o", "allow_other"]) as m:
        f = os.path.join(m.path, key)
        # Warming is no more than reading: anyone who may read may warm.
        r = subprocess.run(nobody + [HOARDFS, "warm", f], capture_output=True,
                           text=True, env=clean_env())
        assert r.returncode == 0, r.stderr
        assert xattr(f, "user.hoardfs.state") == "cached"
        for args in (["evict", f], ["evict", "--all", m.path]):
            r = subprocess.run(nobody + [HOARDFS] + args, capture_output=True,
                               text=True, env=clean_env())
            assert r.returncode == 1, r.stderr
            assert "Operation not permitted" in r.stderr
        assert xattr(f, "user.hoardfs.state") == "cached"
        assert run(["evict", f]).returncode == 0  # root may


@pytest.mark.parametrize("args,named", [
    (["warm"], "PATH"),
    (["warm", "--jobs", "0", "/"], "--jobs"),
    (["warm", "--jobs=abc", "/"], "--jobs"),
    (["warm", "--shard", "3/3", "/"], "--shard"),
    (["warm", "--shard"], "--shard"),
    (["warm", "--bogus", "/"], "--bogus"),
    (["warm", "/proc"], "not on a hoardfs mount"),
    (["warm", "/no/such/path"], "/no/such/path"),
    (["status"], "MOUNTPOINT"),
    (["status", "/", "--all"], "--all"),
    (["status", "/proc"], "not on a hoardfs mount"),
    (["evict"], "PATH"),
    (["evict", "--all"], "--all"),
    (["evict", "--all", "/a", "/b"], "--all"),
    (["evict", "/proc/self"], "not on a hoardfs mount"),
    (["--metrics-file"], "--metrics-file"),
])
def test_usage_errors_exit_2(args, named):
    r = run(args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert named in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("cmd", ["warm", "status", "evict"])
def test_subcommand_help(cmd):
    r = run([cmd, "--help"])
    assert r.returncode == 0 and r.stdout.startswith("usage: hoardfs " + cmd)
    r = run(["--help"])
    assert "hoardfs %s" % cmd in r.stdout


def test_status_not_root(s3, bucket, mount_factory):
    make_tree(s3, bucket, n=5, seed=11)
    with mount_factory(bucket) as m:
        r = run(["status", os.path.join(m.path, "train")])
        assert r.returncode == 2 and "not the root" in r.stderr
