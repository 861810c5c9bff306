# SPDX-License-Identifier: MIT
"""Real OBS, through real mounts: virtual-hosted addressing (the default for
a DNS endpoint, reached here with --resolve), the three signature schemes
with the security token in each scheme's own header [P §2.5], and
ListObjects V1 paging without NextMarker [P §3]."""
import errno
import os
import subprocess

import pytest

from conftest import HOARDFS, clean_env, is_mounted
from s3helper import S3Server

DOMAIN = "obs.test"  # no DNS knows it: only --resolve makes it reachable
TOKEN = "obs-security-token-1"


@pytest.fixture(scope="module")
def obs(tmp_path_factory):
    """An OBS-flavoured server: OBS namespace and headers, virtual-hosted
    style only for BUCKET.obs.test, and a security token required."""
    with S3Server(root=str(tmp_path_factory.mktemp("obsroot")),
                  extra_args=["--vhost-domain", DOMAIN, "--flavour", "obs",
                              "--security-token", TOKEN]) as srv:
        srv.boto = srv.client(session_token=TOKEN)
        srv.boto.create_bucket(Bucket="obs-bkt")
        yield srv


def obs_env(obs, token=TOKEN):
    return clean_env({"OBS_ACCESS_KEY_ID": obs.access_key,
                      "OBS_SECRET_ACCESS_KEY": obs.secret_key,
                      "OBS_SECURITY_TOKEN": token})


def vhost_args(obs, bucket):
    return ["--resolve", "%s.%s:%d:127.0.0.1" % (bucket, DOMAIN, obs.port)]


KEYS = {"plain.txt": b"plain", "dir/a b+c.txt": b"space and plus",
        "dir/100%.csv": b"percent", "dir/sub/q&=?#.bin": b"query chars"}


@pytest.mark.parametrize("sig", ["v4", "v2", "obs"])
def test_virtual_hosted_signatures_and_token(obs, mount_factory, sig):
    for k, v in KEYS.items():
        obs.boto.put_object(Bucket="obs-bkt", Key=k, Body=v)
    obs.reset()
    with mount_factory("obs-bkt", path_style=False,
                       endpoint="http://%s:%d" % (DOMAIN, obs.port),
                       env=obs_env(obs), name="m-" + sig,
                       args=["--signature", sig] + vhost_args(
                           obs, "obs-bkt")) as m:
        for k, v in KEYS.items():
            with open(os.path.join(m.path, k), "rb") as f:
                assert f.read() == v, k
        assert sorted(os.listdir(os.path.join(m.path, "dir"))) == [
            "100%.csv", "a b+c.txt", "sub"]
    reqs = obs.stats()["requests"]
    # Every request was accepted: signature, token header and Host (the
    # endpoint host itself does not resolve, so none went path-style).
    assert reqs and all(r["status"] < 300 for r in reqs), \
        [r for r in reqs if r["status"] >= 300]
    assert {r["op"] for r in reqs} >= {"GET", "LIST"}


def test_token_in_the_wrong_header_is_refused(obs, tmp_path):
    """The server checks the token in the scheme's header: a wrong one is
    an InvalidToken at mount time, one line, exit 1, no secret shown."""
    mnt = tmp_path / "m"
    mnt.mkdir()
    r = subprocess.run(
        [HOARDFS, "--endpoint", "http://%s:%d" % (DOMAIN, obs.port),
         "--signature", "obs"] + vhost_args(obs, "obs-bkt") + [
            "--cache-dir", str(tmp_path / "c"), "s3://obs-bkt", str(mnt)],
        env=obs_env(obs, token="stale-token"), capture_output=True,
        text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "InvalidToken" in r.stderr and len(r.stderr.splitlines()) == 1
    assert obs.secret_key not in r.stderr and "stale-token" not in r.stderr
    assert not is_mounted(str(mnt))


def test_path_style_with_obs_signing(obs, mount_factory):
    obs.boto.put_object(Bucket="obs-bkt", Key="ps/one", Body=b"1")
    with mount_factory("obs-bkt", prefix="ps", env=obs_env(obs),
                       args=["-o", "signature=obs"], name="m-ps",
                       endpoint="http://127.0.0.1:%d" % obs.port) as m:
        assert os.listdir(m.path) == ["one"]
        assert open(os.path.join(m.path, "one"), "rb").read() == b"1"


def test_v1_paging_without_next_marker(obs, mount_factory):
    """Pages of 7 entries and no NextMarker: the client continues from the
    last Key or CommonPrefix, whichever is larger [P §3], with keys whose
    encoding matters in the marker."""
    names = set()
    for i in range(20):
        k = "pg/f %02d+x" % i
        obs.boto.put_object(Bucket="obs-bkt", Key=k, Body=b"%d" % i)
        names.add(k[3:])
    for i in range(9):  # prefixes interleaved with keys, some pages end on one
        obs.boto.put_object(Bucket="obs-bkt", Key="pg/f %02d+d/x" % (2 * i),
                            Body=b"d")
        names.add("f %02d+d" % (2 * i))
    obs.faults({"omit_next_marker": True, "max_keys_cap": 7})
    try:
        obs.reset()
        with mount_factory("obs-bkt", prefix="pg", env=obs_env(obs),
                           args=["--signature", "obs"], name="m-pg",
                           endpoint="http://127.0.0.1:%d" % obs.port) as m:
            got = os.listdir(m.path)
            assert sorted(got) == sorted(names)
            assert open(os.path.join(m.path, "f 19+x"), "rb").read() == b"19"
        lists = [r for r in obs.stats()["requests"] if r["op"] == "LIST"]
        # The probe (max-keys 1) and ceil(29 / 7) = 5 pages of the root.
        assert len(lists) == 1 + 5, lists
    finally:
        obs.faults({})


def test_object_changed_mid_read_is_estale(s3, bucket, mount_factory):
    """A part fetched after the object was overwritten carries If-Match
    with the listed ETag: 412, which the reader sees as ESTALE [P §4], never
    bytes of the new version mixed into the old."""
    old = os.urandom(4 << 20)
    s3.put(bucket, "chg", old)
    with mount_factory(bucket, args=["--part-size", "64KiB"]) as m:
        # Slow bodies (32 KiB/s per connection) keep most parts unfetched.
        s3.faults({"bandwidth_bps": 32 << 10})
        try:
            fd = os.open(os.path.join(m.path, "chg"), os.O_RDONLY)
            try:
                assert os.pread(fd, 4096, 0) == old[:4096]
                # Overwrite while the later parts are still unfetched, then
                # let them go: each now meets If-Match with the old ETag.
                s3.put(bucket, "chg", os.urandom(4 << 20))
                s3.faults({})
                with pytest.raises(OSError) as e:
                    os.pread(fd, 4096, (4 << 20) - 4096)
                assert e.value.errno == errno.ESTALE
            finally:
                os.close(fd)
        finally:
            s3.faults({})
    stale = [r for r in s3.stats()["requests"] if r["status"] == 412]
    assert stale and all(r["key"] == "chg" for r in stale)
