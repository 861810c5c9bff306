# SPDX-License-Identifier: MIT
"""scripts/modelarts/hoardfs-run.sh, the ModelArts boot script: it mounts
the --data_url prefix, hands the training command the mountpoint instead of
the URL, and unmounts when the command ends, with the command's status."""
import os
import subprocess

from conftest import HOARDFS, REPO, clean_env, is_mounted

RUN = os.path.join(REPO, "scripts", "modelarts", "hoardfs-run.sh")

# A stand-in for train.py: print the arguments it got, whether its data
# dir is a mount, and one file read through it.
TRAIN = r"""
import os, sys
url = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--data_url=")]
url = url[0] if url else sys.argv[sys.argv.index("--data_url") + 1]
print("ARGS", sys.argv[1:])
print("MOUNTED", os.path.ismount(url.rstrip("/")))
print("DATA", open(os.path.join(url, "dir/hello.txt")).read().strip())
sys.exit(int(os.environ.get("TRAIN_EXIT", "0")))
"""


def run(s3, tmp_path, args, extra_env=None):
    env = clean_env({
        "HOARDFS": HOARDFS,
        "HOARDFS_MOUNTPOINT": str(tmp_path / "mnt"),
        "HOARDFS_OPTS": "--path-style --cache-dir %s" % (tmp_path / "cache"),
        "OBS_ENDPOINT": s3.endpoint,
        "OBS_ACCESS_KEY_ID": s3.access_key,
        "OBS_SECRET_ACCESS_KEY": s3.secret_key,
    })
    env.update(extra_env or {})
    return subprocess.run([RUN, "/usr/bin/python3", "-c", TRAIN] + args,
                          env=env, capture_output=True, text=True,
                          timeout=120)


def test_data_url_is_mounted_for_the_command(s3, bucket, tmp_path):
    s3.put(bucket, "ds/dir/hello.txt", b"epoch data\n")
    mnt = str(tmp_path / "mnt")
    r = run(s3, tmp_path, ["--epochs", "2",
                           "--data_url=obs://%s/ds/" % bucket])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ARGS ['--epochs', '2', '--data_url=%s/']" % mnt in r.stdout
    assert "MOUNTED True" in r.stdout
    assert "DATA epoch data" in r.stdout
    assert not is_mounted(mnt)
    # Second form, and the command's failure is the script's.
    r = run(s3, tmp_path, ["--data_url", "s3://%s/ds" % bucket],
            {"TRAIN_EXIT": "3"})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "ARGS ['--data_url', '%s']" % mnt in r.stdout
    assert "DATA epoch data" in r.stdout
    assert not is_mounted(mnt)


def test_mount_failure_stops_before_the_command(s3, tmp_path):
    r = run(s3, tmp_path, ["--data_url=obs://no-such-bucket-here/ds"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ARGS" not in r.stdout  # the command never ran
    assert "NoSuchBucket" in r.stderr
    assert "could not mount obs://no-such-bucket-here/ds" in r.stderr
    assert not is_mounted(str(tmp_path / "mnt"))


def test_local_data_url_runs_the_command_as_given(s3, tmp_path):
    data = tmp_path / "local"
    (data / "dir").mkdir(parents=True)
    (data / "dir" / "hello.txt").write_text("local\n")
    r = run(s3, tmp_path, ["--data_url=%s" % data])
    assert r.returncode == 0, r.stderr
    assert "DATA local" in r.stdout and "MOUNTED False" in r.stdout
