# SPDX-License-Identifier: MIT
"""Metadata without round trips: listings cached in memory and in the index
(a remount within the TTL sends no LIST), readdirplus answering ls -l with no
HEAD, targeted lookups for deep paths on a cold mount, negative entries, and
--prefetch-dir."""
import os
import subprocess
import time

from conftest import is_mounted  # noqa: F401  (fixtures live there)


def ops(s3):
    st = s3.stats()
    return {k: st[k] for k in ("GET", "HEAD", "LIST")}


def lists_under(s3, prefix):
    return [r for r in s3.stats()["requests"]
            if r["op"] == "LIST" and (r["key"] or "").startswith(prefix)]


def tree(s3, bucket, classes=5, per_class=40):
    keys = []
    for c in range(classes):
        for i in range(per_class):
            k = "train/c%02d/%04d.jpg" % (c, i)
            s3.put(bucket, k, b"%d-%d" % (c, i))
            keys.append(k)
    return keys


def epoch(m, keys):
    for k in keys:
        with open(os.path.join(m.path, k), "rb") as f:
            f.read()


def test_second_epoch_sends_nothing(s3, bucket, mount_factory):
    keys = tree(s3, bucket)
    with mount_factory(bucket, args=["--metadata-ttl", "600"]) as m:
        subprocess.run(["ls", "-lR", m.path], check=True,
                       stdout=subprocess.DEVNULL)
        epoch(m, keys)
        s3.reset()
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"])
        epoch(m, keys)
        subprocess.run(["ls", "-lR", m.path], check=True,
                       stdout=subprocess.DEVNULL)
        assert ops(s3) == {"GET": 0, "HEAD": 0, "LIST": 0}


def test_ls_du_find_cost_pages_not_heads_b14(s3, bucket, mount_factory):
    for i in range(2500):
        s3.put(bucket, "d/f%05d" % i, b"x")
    s3.reset()
    with mount_factory(bucket, args=["--metadata-ttl", "600"]) as m:
        out = subprocess.run(["ls", "-l", os.path.join(m.path, "d")],
                             check=True, capture_output=True,
                             text=True).stdout
        assert len(out.splitlines()) == 2501  # "total" plus 2500 files
        subprocess.run(["du", "-s", m.path], check=True,
                       stdout=subprocess.DEVNULL)
        n = subprocess.run(["find", m.path, "-type", "f"], check=True,
                           capture_output=True, text=True).stdout
        assert len(n.splitlines()) == 2500
        first = ops(s3)
        assert first["HEAD"] == 0 and first["GET"] == 0
        # the start-up probe, a targeted lookup of d, 3 pages of d/, root
        assert first["LIST"] <= 1 + 1 + 3 + 1
        s3.reset()
        subprocess.run(["ls", "-l", os.path.join(m.path, "d")], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["du", "-s", m.path], check=True,
                       stdout=subprocess.DEVNULL)
        assert ops(s3) == {"GET": 0, "HEAD": 0, "LIST": 0}


def test_remount_within_ttl_needs_no_list(s3, bucket, mount_factory,
                                          tmp_path):
    keys = tree(s3, bucket, classes=3, per_class=10)
    cache = tmp_path / "cache"
    args = ["--metadata-ttl", "600"]
    with mount_factory(bucket, cache_dir=cache, name="m1", args=args) as m:
        subprocess.run(["ls", "-lR", m.path], check=True,
                       stdout=subprocess.DEVNULL)
        epoch(m, keys)
    s3.reset()
    with mount_factory(bucket, cache_dir=cache, name="m2", args=args) as m:
        s3.reset()  # after the start-up probe
        subprocess.run(["ls", "-lR", m.path], check=True,
                       stdout=subprocess.DEVNULL)
        epoch(m, keys)
        assert ops(s3) == {"GET": 0, "HEAD": 0, "LIST": 0}


def test_stored_listing_expires_with_the_ttl(s3, bucket, mount_factory,
                                             tmp_path):
    s3.put(bucket, "a", b"1")
    cache = tmp_path / "cache"
    with mount_factory(bucket, cache_dir=cache, name="m1",
                       args=["--metadata-ttl", "1"]) as m:
        assert os.listdir(m.path) == ["a"]
    s3.put(bucket, "b", b"2")
    time.sleep(1.2)
    with mount_factory(bucket, cache_dir=cache, name="m2",
                       args=["--metadata-ttl", "1"]) as m:
        assert sorted(os.listdir(m.path)) == ["a", "b"]


def test_deep_path_on_cold_mount_lists_no_parent(s3, bucket, mount_factory):
    for i in range(1500):  # big parents: listing them would take pages
        s3.put(bucket, "big/f%04d" % i, b"x")
        s3.put(bucket, "big/deeper/g%04d" % i, b"y")
    s3.put(bucket, "big/deeper/down/file.bin", b"deep")
    s3.reset()
    with mount_factory(bucket) as m:
        s3.reset()
        with open(os.path.join(m.path, "big/deeper/down/file.bin"),
                  "rb") as f:
            assert f.read() == b"deep"
        st = ops(s3)
        # Two small requests per level at most, never a page of a parent.
        assert st["LIST"] + st["HEAD"] <= 2 * 4
        assert lists_under(s3, "big/deeper/g") == []
        big_pages = [r for r in s3.stats()["requests"]
                     if r["op"] == "LIST" and r["key"] in ("big/",
                                                          "big/deeper/")]
        assert big_pages == []


def test_many_lookups_switch_to_a_listing(s3, bucket, mount_factory):
    for i in range(50):
        s3.put(bucket, "d/f%02d" % i, b"z")
    with mount_factory(bucket) as m:
        s3.reset()
        for i in range(50):
            assert os.path.exists(os.path.join(m.path, "d/f%02d" % i))
        st = ops(s3)
        # One targeted lookup, then one listing answers the rest.
        assert st["HEAD"] <= 1
        assert st["LIST"] <= 6


def test_negative_entries_expire(s3, bucket, mount_factory):
    s3.put(bucket, "d/x", b"1")
    with mount_factory(bucket, args=["--metadata-ttl", "1",
                                     "--negative-ttl", "1"]) as m:
        p = os.path.join(m.path, "d/new")
        assert not os.path.exists(p)
        s3.put(bucket, "d/new", b"now here")
        time.sleep(1.3)
        with open(p, "rb") as f:
            assert f.read() == b"now here"


def test_prefetch_dir_fetches_the_next_files(s3, bucket, mount_factory):
    for i in range(12):
        s3.put(bucket, "d/f%02d" % i, b"%d" % i * 1000)
    with mount_factory(bucket, args=["--prefetch-dir", "4"]) as m:
        os.listdir(os.path.join(m.path, "d"))
        with open(os.path.join(m.path, "d/f00"), "rb") as f:
            f.read()
        deadline = time.monotonic() + 5
        want = ["d/f%02d" % i for i in range(1, 5)]
        while True:
            states = [os.getxattr(os.path.join(m.path, k),
                                  "user.hoardfs.state") for k in want]
            if all(s == b"cached" for s in states):
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.05)
        assert os.getxattr(os.path.join(m.path, "d/f05"),
                           "user.hoardfs.state") == b"absent"
        s3.reset()
        for k in want:
            with open(os.path.join(m.path, k), "rb") as f:
                f.read()
        # Each open hands one more file over (f05..f08), none of these.
        got = [r["key"] for r in s3.stats()["requests"] if r["op"] == "GET"]
        assert not set(got) & set(want)
