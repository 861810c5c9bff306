# SPDX-License-Identifier: MIT
"""make install / uninstall, and real mounts through mount(8): the
installed mount.fuse.hoardfs helper with `mount -t fuse.hoardfs` and with
an fstab line (`mount -T FILE`), and mount.fuse3's path to a hoardfs found
through the shell's default PATH.

mount(8) removes PATH and HOME from a helper's environment, so a test
cannot put hoardfs on PATH for it.  Each mount test runs in a private mount
namespace (unshare -m) where the installed files are laid over /usr/bin and
/sbin with a read-only overlayfs, or the build over /usr/local/bin with a
bind mount: mount(8) then finds exactly what `make install` wrote, and the
host's directories are untouched."""
import os
import shutil
import stat
import subprocess
import time

import pytest

from conftest import HOARDFS, REPO, clean_env

SANITIZE = os.environ.get("HOARDFS_SANITIZE", "")
# fstab words that mount(8), mount.fuse3 or systemd read; all must mount.
FSTAB_WORDS = "_netdev,allow_other,x-systemd.automount,nofail"
INSTALLED = ["usr/bin/hoardfs", "sbin/mount.fuse.hoardfs",
             "usr/share/man/man1/hoardfs.1",
             "usr/share/man/man8/mount.fuse.hoardfs.8"]
EXIT_TIMEOUT_S = 15


def make(*args):
    # The outer make's jobserver descriptors are not inherited: drop its
    # flags so the inner make runs plainly.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "--no-print-directory", "-C", REPO,
                        "SANITIZE=" + SANITIZE] + list(args), env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def destdir(tmp_path_factory):
    """`make install DESTDIR=... PREFIX=/usr`, once for the module."""
    root = tmp_path_factory.mktemp("destdir")
    make("install", "DESTDIR=%s" % root, "PREFIX=/usr")
    return root


def test_make_install_and_uninstall(tmp_path):
    root = tmp_path / "root"
    make("install", "DESTDIR=%s" % root, "PREFIX=/usr")
    for rel in INSTALLED:
        assert (root / rel).is_file(), rel
    for rel in ("usr/bin/hoardfs", "sbin/mount.fuse.hoardfs"):
        assert os.stat(root / rel).st_mode & 0o777 == 0o755, rel
    for rel in INSTALLED[2:]:
        assert os.stat(root / rel).st_mode & 0o777 == 0o644, rel
    r = subprocess.run([str(root / "usr/bin/hoardfs"), "--version"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("hoardfs ")
    # The helper names the binary by its final path, not the DESTDIR one.
    helper = (root / "sbin/mount.fuse.hoardfs").read_text()
    assert "hoardfs='/usr/bin/hoardfs'" in helper
    assert "@BINDIR@" not in helper and str(root) not in helper
    # Installed man pages render without a warning.
    for page in INSTALLED[2:]:
        r = subprocess.run(["man", "--warnings", "-l", str(root / page)],
                           capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80"))
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert "hoardfs" in r.stdout
    make("uninstall", "DESTDIR=%s" % root, "PREFIX=/usr")
    left = [str(p) for p in root.rglob("*") if not p.is_dir()]
    assert left == []


def test_install_default_prefix_is_usr_local(tmp_path):
    make("install", "DESTDIR=%s" % tmp_path)
    assert (tmp_path / "usr/local/bin/hoardfs").is_file()
    assert (tmp_path / "usr/local/share/man/man1/hoardfs.1").is_file()
    # mount(8) only looks in /sbin for helpers, whatever the prefix.
    helper = tmp_path / "sbin/mount.fuse.hoardfs"
    assert "hoardfs='/usr/local/bin/hoardfs'" in helper.read_text()


def daemons(mountpoint):
    """Pids of hoardfs processes serving @mountpoint (any namespace)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"hoardfs") and \
                os.fsencode(mountpoint) in argv:
            pids.append(int(pid))
    return pids


def wait_no_daemon(mountpoint):
    """The daemon leaves once its mount is gone; kill it if it does not."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while daemons(mountpoint):
        if time.monotonic() > deadline:
            for pid in daemons(mountpoint):
                os.kill(pid, 9)
            raise AssertionError("hoardfs still runs after umount")
        time.sleep(0.05)


def in_namespace(script, *args):
    """Run @script with sh in a private mount namespace.  The script's
    mounts, and the namespace, end with the last process in it.  Exit
    status 77 from the script means its setup (overlayfs, bind mount) is
    not possible on this machine: the test is skipped."""
    if not shutil.which("unshare"):
        pytest.skip("unshare(1) is not installed")
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-euc",
         script, "sh"] + [str(a) for a in args],
        env=clean_env(), capture_output=True, text=True, timeout=120)
    if r.returncode == 77:  # the script's own setup, not mount(8), failed
        pytest.skip("cannot lay files over /usr here: " + r.stderr)
    return r


# Lay $1/usr/bin and $1/sbin over the real ones (read-only overlayfs) and
# mount, read, unmount.  "$2" is the mountpoint; the rest is the mount
# command.  The trap unmounts on any failure so the daemon exits.
OVERLAY_MOUNT = r"""
d=$1 mnt=$2; shift 2
for dir in usr/bin sbin; do
	real=$(realpath "/$dir")
	mount -t overlay overlay -o "lowerdir=$d/$dir:$real" "$real" || exit 77
done
trap 'umount "$mnt" 2>/dev/null || true' EXIT
"$@"
grep " $mnt " /proc/self/mountinfo
cat "$mnt/dir/hello.txt"
umount "$mnt"
trap - EXIT
"""


@pytest.fixture
def dataset(s3, bucket, tmp_path):
    """An object to read, a 0600 passwd file, a mountpoint, a cache dir."""
    s3.put(bucket, "train/dir/hello.txt", b"hello through mount(8)\n")
    pw = tmp_path / "passwd-hoardfs"
    pw.write_text("%s:%s\n" % (s3.access_key, s3.secret_key))
    os.chmod(pw, 0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    opts = "endpoint=%s,path_style,cache_dir=%s,passwd_file=%s" % (
        s3.endpoint, tmp_path / "cache", pw)
    yield {"source": "s3://%s/train" % bucket, "mnt": str(mnt),
           "opts": opts, "bucket": bucket}
    wait_no_daemon(str(mnt))


def check_mounted_output(r, ds):
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    info = lines[0].split()
    fstype, source = info[info.index("-") + 1:info.index("-") + 3]
    assert fstype == "fuse.hoardfs" and source == ds["source"], lines[0]
    assert "ro" in info[5].split(","), lines[0]
    assert lines[1] == "hello through mount(8)"


def test_mount_t_fuse_hoardfs_through_helper(destdir, dataset):
    ds = dataset
    r = in_namespace(OVERLAY_MOUNT, destdir, ds["mnt"], "mount", "-t",
                     "fuse.hoardfs", ds["source"], ds["mnt"], "-o",
                     FSTAB_WORDS + "," + ds["opts"])
    check_mounted_output(r, ds)


def test_fstab_line_mounts(destdir, dataset, tmp_path):
    ds = dataset
    fstab = tmp_path / "fstab"
    fstab.write_text("# hoardfs test\n%s %s fuse.hoardfs %s,%s 0 0\n" % (
        ds["source"], ds["mnt"], FSTAB_WORDS, ds["opts"]))
    r = subprocess.run(["findmnt", "--verify", "--tab-file", str(fstab)],
                       capture_output=True, text=True)
    assert "0 parse errors, 0 errors" in r.stdout + r.stderr, r.stdout
    r = in_namespace(OVERLAY_MOUNT, destdir, ds["mnt"], "mount", "-T",
                     fstab, ds["mnt"])
    check_mounted_output(r, ds)


def test_helper_reports_hoardfs_errors(destdir, dataset):
    """A bad option fails the mount(8) call with hoardfs's one line."""
    ds = dataset
    r = in_namespace(OVERLAY_MOUNT, destdir, ds["mnt"], "mount", "-t",
                     "fuse.hoardfs", ds["source"], ds["mnt"], "-o",
                     ds["opts"] + ",part_size=1")
    assert r.returncode != 0
    assert "part_size" in r.stderr, r.stderr


def test_fstab_line_makes_systemd_units(tmp_path):
    gen = "/lib/systemd/system-generators/systemd-fstab-generator"
    if not os.access(gen, os.X_OK):
        pytest.skip("systemd is not installed")
    fstab = tmp_path / "fstab"
    fstab.write_text(
        "obs://my-bucket/datasets /mnt/datasets fuse.hoardfs "
        "_netdev,allow_other,x-systemd.automount,"
        "endpoint=https://obs.cn-north-4.myhuaweicloud.com,"
        "passwd_file=/etc/passwd-hoardfs,cache_dir=/var/cache/hoardfs 0 0\n")
    out = [tmp_path / d for d in ("normal", "early", "late")]
    for d in out:
        d.mkdir()
    r = subprocess.run([gen] + [str(d) for d in out], capture_output=True,
                       text=True, env=dict(clean_env(),
                                           SYSTEMD_FSTAB=str(fstab)))
    assert r.returncode == 0, r.stderr
    unit = (out[0] / "mnt-datasets.mount").read_text()
    assert "Type=fuse.hoardfs" in unit
    assert "What=obs://my-bucket/datasets" in unit
    assert "Before=remote-fs.target" in unit  # _netdev: a network mount
    assert (out[0] / "mnt-datasets.automount").is_file()
    assert (out[0] / "remote-fs.target.requires" /
            "mnt-datasets.automount").exists()


# Without the helper, mount(8) runs mount.fuse3, which runs "hoardfs" with
# sh's default PATH (mount(8) passed none): /usr/local/bin, where the
# default `make install` puts it.  Bind the build there; hide an installed
# helper with a non-executable file so that mount.fuse3 is what runs.
FUSE3_MOUNT = r"""
bindir=$1 mnt=$2; shift 2
mount --bind "$bindir" /usr/local/bin || exit 77
helper=$(realpath /sbin)/mount.fuse.hoardfs
if [ -e "$helper" ]; then mount --bind /dev/null "$helper"; fi
trap 'umount "$mnt" 2>/dev/null || true' EXIT
"$@"
grep " $mnt " /proc/self/mountinfo
cat "$mnt/dir/hello.txt"
umount "$mnt"
trap - EXIT
"""


def test_mount_fuse3_runs_hoardfs_from_default_path(dataset, tmp_path):
    if not os.path.isdir("/usr/local/bin"):
        pytest.skip("no /usr/local/bin to bind over")
    ds = dataset
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(HOARDFS, bindir / "hoardfs")
    # mount.fuse3 passes rw on, which hoardfs refuses: give ro.
    r = in_namespace(FUSE3_MOUNT, bindir, ds["mnt"], "mount", "-t",
                     "fuse.hoardfs", ds["source"], ds["mnt"], "-o",
                     "ro," + FSTAB_WORDS + "," + ds["opts"])
    check_mounted_output(r, ds)


def test_helper_fake_and_verbose(destdir):
    """mount -f runs the helper with -f: nothing is started."""
    helper = str(destdir / "sbin/mount.fuse.hoardfs")
    r = subprocess.run([helper, "s3://bkt", "/nonexistent", "-f", "-v",
                        "-o", "rw,_netdev,cache_dir=/c", "-t",
                        "fuse.hoardfs"], capture_output=True, text=True,
                       env={})
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == ("mount.fuse.hoardfs: /usr/bin/hoardfs "
                                "s3://bkt /nonexistent -o _netdev,cache_dir=/c")
    r = subprocess.run([helper, "s3://bkt"], capture_output=True, text=True)
    assert r.returncode == 1 and "usage" in r.stderr
    assert stat.S_IMODE(os.stat(helper).st_mode) == 0o755
