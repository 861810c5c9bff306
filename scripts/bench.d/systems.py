# SPDX-License-Identifier: MIT
"""systems: how each contender is mounted, and unmounted whatever happens.

Every FUSE daemon runs in the foreground as a child of the benchmark, so the child's pid is
the daemon's pid (for peak RSS) and nothing detaches out of reach. Each child gets an
environment with every AWS_* and OBS_* variable removed (rclone refuses to start while
AWS_CA_BUNDLE is set, and no developer setting should leak into a figure), plus only what
that tool needs. Each mount gets a fresh, empty cache directory.

  hoardfs  build/hoardfs -f --path-style --cache-dir DIR --metadata-ttl TTL s3://BUCKET MNT
  s3fs     s3fs BUCKET MNT -f -o ro,url=,use_path_request_style,endpoint=us-east-1,sigv4,
           passwd_file=(0600),use_cache=DIR,ensure_diskfree=1024,stat_cache_expire=TTL
  rclone   rclone mount bench:BUCKET MNT --read-only --vfs-cache-mode full --cache-dir DIR
           --vfs-cache-max-size 1T --dir-cache-time TTLs  (remote from RCLONE_CONFIG_BENCH_*)
  local    no mount: the server's own files on the local disk

Everything else stays at each tool's defaults; --s3fs-opts and --rclone-args add more.
"""

import os
import re
import resource
import shutil
import signal
import subprocess
import threading
import time

# hoardfs "error:"/"warn:", s3fs "[ERR]"/"[WAN]"/"[CRT]", rclone "ERROR :"/"WARNING:"
PROBLEM_RE = re.compile(r"(?i)\b(error|warn|warning)\b\s*:|\[(ERR|WAN|CRT)\]")
HARD_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
MOUNT_TIMEOUT_S = 30
UNMOUNT_TIMEOUT_S = 30


def clean_env(extra=None):
    """os.environ without AWS_*/OBS_* (and without RCLONE_*), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "OBS_", "RCLONE_"))}
    env.update(extra or {})
    return env


def is_mounted(path):
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp == real:
                return True
    return False


def force_unmount(path):
    """Unmount whatever is mounted on path: clean first, lazy as a last resort."""
    for args in (["fusermount3", "-u", path], ["umount", path], ["fusermount3", "-uz", path]):
        if not is_mounted(path):
            return
        subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        time.sleep(0.2)


class Mount:
    """A running FUSE daemon on a mountpoint. Subclasses give the command line."""

    name = "?"
    has_daemon = True

    def __init__(self, ctx, dataset, tag):
        self.ctx = ctx
        self.dataset = dataset
        self.mnt = os.path.join(ctx.work, "mnt", "%s-%s" % (self.name, tag))
        self.cache = os.path.join(ctx.work, "cache", "%s-%s" % (self.name, tag))
        self.log_path = os.path.join(ctx.work, "logs", "%s-%s-%s.log"
                                     % (self.name, dataset.name, tag))
        self.proc = None
        self.peak_rss_mib = None
        self.peak_fds = None
        self._sampler = None

    # -- to be provided by subclasses
    def command(self):
        raise NotImplementedError

    def env(self):
        return clean_env()

    # -- lifecycle
    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def root(self):
        return self.mnt

    def start(self):
        for d in (self.mnt, self.cache, os.path.dirname(self.log_path)):
            os.makedirs(d, exist_ok=True)
        force_unmount(self.mnt)
        shutil.rmtree(self.cache, ignore_errors=True)
        os.makedirs(self.cache, mode=0o700)
        log = open(self.log_path, "wb")
        try:
            nofile = getattr(self.ctx, "nofile", 0)
            self.proc = subprocess.Popen(
                self.command(), env=self.env(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,  # Ctrl-C goes to us only
                preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                       (nofile, max(nofile, HARD_NOFILE))))
                if nofile else None)
        finally:
            log.close()
        self.ctx.cleanup.append(self.stop)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not is_mounted(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError("%s did not mount %s; log %s:\n%s"
                                   % (self.name, self.mnt, self.log_path, tail))
            time.sleep(0.05)
        # Mounted is not the same as answering: wait until the root can be listed.
        os.listdir(self.mnt)
        self._sampler = threading.Thread(target=self._sample_loop, args=(self.proc,),
                                         daemon=True)
        self._sampler.start()
        return self

    def _sample_loop(self, proc):
        """Peak open fds (and RSS) every 0.2 s while the daemon runs."""
        from workload import open_fds
        while proc.poll() is None and self.proc is proc:
            n = open_fds(proc.pid)
            if n is not None:
                self.peak_fds = max(self.peak_fds or 0, n)
            self.sample_rss()
            time.sleep(0.2)

    def log_problems(self):
        """(number of error/warning lines in the daemon's log, the first of them)."""
        n, first = 0, None
        try:
            with open(self.log_path, errors="replace") as f:
                for line in f:
                    if PROBLEM_RE.search(line):
                        n += 1
                        if first is None:
                            first = line.strip()[:200]
        except OSError:
            pass
        return n, first

    def sample_rss(self):
        """Remember the daemon's peak RSS (VmHWM) while it is alive."""
        proc = self.proc
        if proc and proc.poll() is None:
            from workload import peak_rss_mib
            v = peak_rss_mib(proc.pid)
            if v is not None:
                self.peak_rss_mib = max(self.peak_rss_mib or 0, v)

    def stop(self):
        """Unmount and stop the daemon; idempotent, safe from a signal handler's unwind."""
        if self.proc is None:
            return
        self.sample_rss()
        proc, self.proc = self.proc, None
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        try:
            proc.wait(UNMOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        force_unmount(self.mnt)
        if self.stop in self.ctx.cleanup:
            self.ctx.cleanup.remove(self.stop)
        if not self.ctx.keep_caches:
            shutil.rmtree(self.cache, ignore_errors=True)

    def log_tail(self, nbytes=3000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - nbytes))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


class Hoardfs(Mount):
    name = "hoardfs"

    def command(self):
        c = self.ctx
        return [c.hoardfs_bin, "-f", "--endpoint", c.endpoint, "--path-style",
                "--cache-dir", self.cache, "--metadata-ttl", str(c.metadata_ttl),
                *c.hoardfs_args, "s3://%s" % self.dataset.bucket, self.mnt]

    def env(self):
        return clean_env({"AWS_ACCESS_KEY_ID": self.ctx.access_key,
                          "AWS_SECRET_ACCESS_KEY": self.ctx.secret_key})

    def cache_data_files(self):
        """The data files in the cache dir (largest first), for reading them directly."""
        out = []
        for dirpath, _, names in os.walk(os.path.join(self.cache, "data")):
            for n in names:
                p = os.path.join(dirpath, n)
                out.append((os.path.getsize(p), p))
        return [p for _, p in sorted(out, reverse=True)]


class S3fs(Mount):
    name = "s3fs"

    def command(self):
        c = self.ctx
        passwd = os.path.join(c.work, "s3fs.passwd")
        with open(os.open(passwd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("%s:%s\n" % (c.access_key, c.secret_key))
        os.chmod(passwd, 0o600)
        opts = ["ro", "passwd_file=" + passwd, "url=" + c.endpoint, "use_path_request_style",
                "endpoint=us-east-1", "sigv4", "use_cache=" + self.cache,
                # keep 1 GiB free on the cache disk (the default 0 keeps none)
                "ensure_diskfree=1024",
                "stat_cache_expire=%d" % c.metadata_ttl]
        opts += c.s3fs_opts
        return ["s3fs", self.dataset.bucket, self.mnt, "-f", "-o", ",".join(opts)]


class Rclone(Mount):
    name = "rclone"

    def command(self):
        c = self.ctx
        return ["rclone", "mount", "bench:" + self.dataset.bucket, self.mnt,
                "--read-only", "--vfs-cache-mode", "full", "--cache-dir", self.cache,
                "--vfs-cache-max-size", "1T", "--dir-cache-time", "%ds" % c.metadata_ttl,
                "--log-level", "NOTICE", *c.rclone_args]

    def env(self):
        c = self.ctx
        return clean_env({
            "RCLONE_CONFIG": "/dev/null",         # no rclone.conf: the remote is all env
            "RCLONE_CONFIG_BENCH_TYPE": "s3",
            "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
            "RCLONE_CONFIG_BENCH_ENDPOINT": c.endpoint,
            "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": c.access_key,
            "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": c.secret_key,
            "RCLONE_CONFIG_BENCH_REGION": "us-east-1",
            "RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE": "true"})


class Local(Mount):
    """No daemon: reads the server's own files (the dataset as it lies on local disk)."""
    name = "local"
    has_daemon = False

    @property
    def root(self):
        return self.dataset.dir

    @property
    def pid(self):
        return None

    def start(self):
        return self

    def stop(self):
        pass

    def sample_rss(self):
        pass

    def log_problems(self):
        return 0, None


SYSTEMS = {"hoardfs": Hoardfs, "s3fs": S3fs, "rclone": Rclone, "local": Local}
ORDER = ("hoardfs", "s3fs", "rclone", "local")
