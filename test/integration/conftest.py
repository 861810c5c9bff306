# SPDX-License-Identifier: MIT
"""Fixtures for the integration suite: a real local S3 server on 127.0.0.1
and real hoardfs mounts through /dev/fuse.

- `s3`: one server for the whole session (scripts/s3server.py).
- `bucket`: a fresh, empty bucket per test, and the server's counters reset.
- `mount_factory`: starts `hoardfs -f` on a temporary mountpoint with a
  controlled environment (no AWS_*, OBS_* or S3_* from the caller) and always
  unmounts, checking that the daemon exits and leaves no process behind.
"""
import hashlib
import os
import pathlib
import re
import resource
import signal
import socket
import subprocess
import time

import pytest

from s3helper import S3Server

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOARDFS = os.environ.get("HOARDFS_BIN") or os.path.join(REPO, "build", "hoardfs")

# How long a mount may take to appear, and an unmount to finish.
MOUNT_TIMEOUT_S = 15
EXIT_TIMEOUT_S = 15


def _closed_port():
    """A local port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Every hoardfs the tests start looks for ECS temporary credentials here
# last: a closed local port, so a test never reaches a real metadata
# service and "no credentials" is answered at once.
NO_METADATA_URL = "http://127.0.0.1:%d" % _closed_port()
MOXING_VARS = ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SECURITY_TOKEN")


def clean_env(extra=None):
    """The caller's environment without anything that would point hoardfs
    at another store or other credentials: no AWS_*, OBS_*, S3_* or MoXing
    variables, no ~/.aws/credentials, no metadata service."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "OBS_", "S3_", "HOARDFS_"))
           and k not in MOXING_VARS}
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["HOARDFS_ECS_METADATA_URL"] = NO_METADATA_URL
    env.update(extra or {})
    return env


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class Mount:
    """One hoardfs daemon in the foreground, mounted at `path`."""

    def __init__(self, s3, tmp_path, bucket, prefix="", cache_dir=None,
                 args=(), env=None, name="mnt", path_style=True,
                 endpoint=None, base=None, nofile=None):
        # base: another directory for the mountpoint, log and cache (one
        # that other users can reach, say), instead of the test's tmp_path
        tmp_path = pathlib.Path(base) if base else tmp_path
        self.s3 = s3
        self.endpoint = endpoint or s3.endpoint
        self.path_style = path_style
        self.path = str(tmp_path / name)
        self.cache_dir = str(cache_dir or tmp_path / (name + "-cache"))
        self.log_path = str(tmp_path / (name + ".log"))
        self.source = "s3://%s/%s" % (bucket, prefix) if prefix \
            else "s3://%s" % bucket
        self.args = list(args)
        self.env = env
        self.nofile = nofile  # open-file limit (soft and hard) to run under
        self.proc = None
        os.makedirs(self.path, exist_ok=True)

    def command(self):
        return [HOARDFS, "-f", "--endpoint", self.endpoint] + (
            ["--path-style"] if self.path_style else []) + [
                "--cache-dir", self.cache_dir] + self.args + [
                    self.source, self.path]

    def start(self):
        env = self.env if self.env is not None else clean_env({
            "AWS_ACCESS_KEY_ID": self.s3.access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3.secret_key,
        })
        self.log = open(self.log_path, "ab")
        limit = None
        if self.nofile:
            def limit():
                resource.setrlimit(resource.RLIMIT_NOFILE,
                                   (self.nofile, self.nofile))
        self.proc = subprocess.Popen(self.command(), env=env,
                                     stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log,
                                     preexec_fn=limit)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not is_mounted(self.path):
            if self.proc.poll() is not None:
                raise AssertionError("hoardfs exited %d before mounting:\n%s"
                                     % (self.proc.returncode, self.logs()))
            if time.monotonic() > deadline:
                raise AssertionError("mount did not appear:\n" + self.logs())
            time.sleep(0.02)
        return self

    def logs(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        """Unmount and check the daemon exited 0 by itself."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if is_mounted(self.path):
            subprocess.run(["fusermount3", "-u", self.path], check=False)
        try:
            rc = proc.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            subprocess.run(["fusermount3", "-uz", self.path], check=False)
            raise AssertionError("hoardfs did not exit after unmount:\n"
                                 + self.logs())
        finally:
            self.log.close()
        assert rc == 0, "hoardfs exited %d:\n%s" % (rc, self.logs())

    def kill(self, sig=signal.SIGKILL):
        """Kill the daemon (crash tests) and clear the dead mount."""
        proc, self.proc = self.proc, None
        proc.send_signal(sig)
        proc.wait(EXIT_TIMEOUT_S)
        self.log.close()
        subprocess.run(["fusermount3", "-uz", self.path], check=False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# Figures that tests report (soak and weather runs): printed at the end of
# the session whatever pytest's capture mode, and written to the tests' logs.
FIGURES = []


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("hard weather figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def figures(tmp_path):
    """report(line): keep a figure line for the session summary and
    append it to <tmp_path>/figures.log."""
    def report(line):
        FIGURES.append(line)
        with open(tmp_path / "figures.log", "a") as f:
            f.write(line + "\n")
        print(line)
    return report


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    with S3Server(root=str(tmp_path_factory.mktemp("s3root"))) as server:
        yield server


@pytest.fixture
def bucket(s3, request):
    """A new bucket named after the test, with the counters reset."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    name = ("t-%s-%s" % (slug[:40], digest)).strip("-")
    s3.create_bucket(name)
    s3.reset()
    return name


@pytest.fixture
def mount_factory(s3, tmp_path):
    mounts = []

    def make(bucket, **kw):
        m = Mount(s3, tmp_path, bucket, **kw)
        mounts.append(m)
        return m

    yield make
    errors = []
    for m in mounts:
        try:
            m.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)
