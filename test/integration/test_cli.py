# SPDX-License-Identifier: MIT
"""The command line: bad options exit 2 naming the option; a missing bucket,
a wrong key, an unreachable endpoint or a loose passwd file exit 1 with one
line naming the cause, before any mount appears; secrets never show."""
import os
import socket
import subprocess

import pytest

from conftest import HOARDFS, clean_env, is_mounted

SECRET = "hoardfs-test-secret"


def run(args, env=None, timeout=30):
    return subprocess.run([HOARDFS] + args, env=env or clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def creds(s3, secret=None):
    return clean_env({"AWS_ACCESS_KEY_ID": s3.access_key,
                      "AWS_SECRET_ACCESS_KEY": secret or s3.secret_key})


def test_version_and_help():
    r = run(["--version"])
    assert r.returncode == 0 and r.stdout.startswith("hoardfs ")
    r = run(["--help"])
    assert r.returncode == 0
    for opt in ("--endpoint", "--region", "--path-style", "--cache-dir",
                "--passwd-file", "-o OPT"):
        assert opt in r.stdout


@pytest.mark.parametrize("args,named", [
    (["--bogus", "s3://bkt", "/mnt"], "--bogus"),
    (["-o", "bogus_opt", "s3://bkt", "/mnt"], "bogus_opt"),
    (["--part-size", "12Q", "s3://bkt", "/mnt"], "--part-size"),
    (["-o", "part_size=1", "s3://bkt", "/mnt"], "-o part_size"),
    (["--parallel", "0", "s3://bkt", "/mnt"], "--parallel"),
    (["--metadata-ttl", "soon", "s3://bkt", "/mnt"], "--metadata-ttl"),
    (["--endpoint", "ftp://x", "s3://bkt", "/mnt"], "--endpoint"),
    (["--endpoint"], "--endpoint"),
    (["--endpoint", "http://127.0.0.1:1", "gs://bkt", "/mnt"], "gs://bkt"),
    (["--endpoint", "http://127.0.0.1:1", "s3://a", "/mnt"], "bucket name"),
    (["--endpoint", "http://127.0.0.1:1", "s3://bkt"], "MOUNTPOINT"),
    (["s3://bkt", "/mnt"], "endpoint"),
    (["-o", "rw", "s3://bkt", "/mnt"], "read-only"),
])
def test_bad_usage_exits_2_naming_it(args, named):
    r = run(args)
    assert r.returncode == 2, r.stderr
    assert named in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def mount_and_read(args, env, path, want):
    """Run hoardfs -f with @args, check @path reads @want, unmount, and
    check the daemon exits 0."""
    mnt = str(path.parent)
    p = subprocess.Popen([HOARDFS, "-f"] + args, env=env,
                         stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            if is_mounted(mnt) or p.poll() is not None:
                break
            subprocess.run(["sleep", "0.02"])
        assert is_mounted(mnt), p.stderr.read()
        assert open(path, "rb").read() == want
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        assert p.wait(15) == 0


def test_fstab_words_are_accepted(s3, bucket, tmp_path):
    s3.put(bucket, "f", b"1")
    mnt = tmp_path / "m"
    mnt.mkdir()
    mount_and_read(
        ["-o", "endpoint=%s,path_style,cache_dir=%s,_netdev,nofail,"
         "x-systemd.automount,noatime,nodev,nosuid" % (s3.endpoint,
                                                      tmp_path / "c"),
         "s3://%s" % bucket, str(mnt)], creds(s3), mnt / "f", b"1")


def expect_runtime_failure(args, env, words, mnt):
    r = run(args, env=env)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert SECRET not in r.stderr and SECRET not in r.stdout
    assert not is_mounted(str(mnt))
    return lines[0]


def test_missing_bucket_exits_1(s3, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    expect_runtime_failure(
        ["--endpoint", s3.endpoint, "--path-style", "--cache-dir",
         str(tmp_path / "c"), "s3://no-such-bucket-here", str(mnt)],
        creds(s3), ["no-such-bucket-here", "NoSuchBucket"], mnt)


def test_wrong_secret_exits_1(s3, bucket, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    expect_runtime_failure(
        ["--endpoint", s3.endpoint, "--path-style", "--cache-dir",
         str(tmp_path / "c"), "s3://" + bucket, str(mnt)],
        creds(s3, secret="wrong-secret"), ["SignatureDoesNotMatch"], mnt)


def test_unreachable_endpoint_exits_1(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mnt = tmp_path / "m"
    mnt.mkdir()
    env = clean_env({"AWS_ACCESS_KEY_ID": "ak",
                     "AWS_SECRET_ACCESS_KEY": SECRET})
    expect_runtime_failure(
        ["--endpoint", "http://127.0.0.1:%d" % port, "--path-style",
         "--cache-dir", str(tmp_path / "c"), "s3://bucket", str(mnt)],
        env, ["cannot be reached", "127.0.0.1:%d" % port], mnt)


def test_no_credentials_exits_1(s3, tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    expect_runtime_failure(
        ["--endpoint", s3.endpoint, "s3://bucket", str(mnt)], clean_env(),
        ["no credentials"], mnt)


def test_passwd_file_mode_enforced(s3, bucket, tmp_path, mount_factory):
    pw = tmp_path / "passwd"
    pw.write_text("# comment\n%s:%s\n" % (s3.access_key, s3.secret_key))
    os.chmod(pw, 0o644)
    mnt = tmp_path / "m"
    mnt.mkdir()
    expect_runtime_failure(
        ["--endpoint", s3.endpoint, "--path-style", "--passwd-file", str(pw),
         "s3://" + bucket, str(mnt)], clean_env(), ["chmod 600", str(pw)],
        mnt)
    os.chmod(pw, 0o600)
    s3.put(bucket, "f", b"pw")
    # The passwd file wins over (wrong) environment credentials.
    env = clean_env({"AWS_ACCESS_KEY_ID": "wrong",
                     "AWS_SECRET_ACCESS_KEY": "wrong"})
    with mount_factory(bucket, args=["--passwd-file", str(pw)], env=env) as m:
        assert open(os.path.join(m.path, "f"), "rb").read() == b"pw"


def test_obs_env_credentials_win_over_aws(s3, bucket, mount_factory):
    s3.put(bucket, "f", b"obs")
    env = clean_env({"OBS_ACCESS_KEY_ID": s3.access_key,
                     "OBS_SECRET_ACCESS_KEY": s3.secret_key,
                     "AWS_ACCESS_KEY_ID": "wrong",
                     "AWS_SECRET_ACCESS_KEY": "wrong"})
    with mount_factory(bucket, env=env) as m:
        assert open(os.path.join(m.path, "f"), "rb").read() == b"obs"


def test_endpoint_from_environment(s3, bucket, tmp_path):
    s3.put(bucket, "f", b"env")
    mnt = tmp_path / "m"
    mnt.mkdir()
    env = creds(s3)
    env["AWS_ENDPOINT_URL"] = s3.endpoint
    mount_and_read(["--path-style", "--cache-dir", str(tmp_path / "c"),
                    "s3://" + bucket, str(mnt)], env, mnt / "f", b"env")


def test_relative_cache_dir_and_daemon_pid(s3, bucket, tmp_path):
    s3.put(bucket, "f", b"rel")
    mnt = tmp_path / "m"
    mnt.mkdir()
    env = creds(s3)
    r = subprocess.run([HOARDFS, "--endpoint", s3.endpoint, "--path-style",
                        "--cache-dir", "relcache", "s3://" + bucket,
                        str(mnt)], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    try:
        assert open(mnt / "f", "rb").read() == b"rel"
        # The cache is where the user meant, not under / after the fork.
        assert (tmp_path / "relcache" / "index.db").exists()
        pid = int((tmp_path / "relcache" / "lock").read_text())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            assert b"hoardfs" in f.read()  # the daemon, not its parent
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True)


def test_unsafe_mountpoints_are_refused(s3, bucket, tmp_path, mount_factory):
    s3.put(bucket, "f", b"x")
    mnt = tmp_path / "m"
    mnt.mkdir()
    env = creds(s3)
    base = [HOARDFS, "--endpoint", s3.endpoint, "--path-style"]
    # A cache dir at or under the mountpoint would hang every read.
    for cache in (mnt, mnt / "sub"):
        r = subprocess.run(base + ["--cache-dir", str(cache),
                                   "s3://" + bucket, str(mnt)], env=env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "inside the mountpoint" in r.stderr
        assert not is_mounted(str(mnt))
    # A missing mountpoint leaves no cache dir behind.
    r = subprocess.run(base + ["--cache-dir", str(tmp_path / "nc"),
                               "s3://" + bucket, str(tmp_path / "nope")],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and not (tmp_path / "nc").exists()
    # A mountpoint that is already mounted is refused, not stacked on.
    with mount_factory(bucket) as m:
        r = subprocess.run(base + ["--cache-dir", str(tmp_path / "c2"),
                                   "s3://" + bucket, m.path], env=env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "already mounted" in r.stderr


def test_sigterm_with_relative_mountpoint(s3, bucket, tmp_path):
    s3.put(bucket, "f", b"x")
    (tmp_path / "rel").mkdir()
    p = subprocess.Popen([HOARDFS, "-f", "--endpoint", s3.endpoint,
                          "--path-style", "--cache-dir", "c",
                          "s3://" + bucket, "rel"], env=creds(s3),
                         cwd=str(tmp_path), stderr=subprocess.PIPE)
    for _ in range(300):
        if is_mounted(str(tmp_path / "rel")) or p.poll() is not None:
            break
        subprocess.run(["sleep", "0.02"])
    assert is_mounted(str(tmp_path / "rel")), p.stderr.read()
    p.terminate()
    assert p.wait(15) == 0
    assert not is_mounted(str(tmp_path / "rel"))
