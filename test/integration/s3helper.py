# SPDX-License-Identifier: MIT
"""s3helper: start and drive the local S3 server (scripts/s3server.py) from integration tests.

Usage::

    from s3helper import S3Server

    with S3Server() as srv:                      # fresh temp root, free port, waits until ready
        srv.create_bucket("data")
        etag = srv.put("data", "dir/a.bin", b"...")   # signed PUT through boto3
        s3 = srv.client()                        # boto3 S3 client: path style, no retries
        srv.reset()                              # zero the request counters
        ...                                      # e.g. mount hoardfs on srv.endpoint
        st = srv.stats()                         # {"GET": n, "HEAD": n, "LIST": n, ...}
        srv.faults({"errors": [{"op": "GET", "status": 503, "count": 2}]})
    # the server is stopped (and its temp dir removed) here, even when the test failed

Objects can also be laid out directly on disk: a file written to
``os.path.join(srv.root, "data", "x/y.jpg")`` is served as key ``x/y.jpg`` of bucket ``data``
(create the bucket directory first, or call create_bucket). That is how benchmarks build large
trees without uploading them.

``S3Server(root=None, *, access_key=DEFAULT_ACCESS_KEY, secret_key=DEFAULT_SECRET_KEY,
region="us-east-1", port=0, extra_args=(), quiet=True, keep_root=None, start_timeout=20.0)``

  root          bucket directory tree; None creates a temp dir that stop() removes
                (unless keep_root=True). A given root is never removed.
  region        region the helper's clients sign with (the server accepts any region unless
                "--region R" is passed in extra_args).
  port          0 picks a free port; restart() reuses the port it got.
  extra_args    more server options, e.g. ["--security-token", "T"], ["--flavour", "obs"].
  quiet         False makes the server log one line per request to its log file.

Attributes: ``endpoint`` ("http://127.0.0.1:PORT"), ``host``, ``port``, ``root``,
``access_key``, ``secret_key``, ``region``, ``log_path`` (the server's stdout+stderr),
``proc`` (the subprocess.Popen).

Methods:
  start() -> S3Server            start and wait for readiness (called by __enter__)
  stop() -> None                 SIGTERM, wait, SIGKILL if needed; idempotent
  restart() -> None              stop and start again on the same root and port
  admin(method, path, body=None) -> dict   raw admin call, e.g. admin("GET", "/_admin/stats")
  stats(requests=True) -> dict   GET /_admin/stats ("requests" empty when requests=False)
  reset() -> None                POST /_admin/reset
  faults(config=None) -> dict    config None: read; a dict: POST it ({} clears); returns the
                                 server's view of the fault config
  credentials(spec=None) -> dict  read, or add/expire temporary credentials
  client(access_key=None, secret_key=None, session_token=None, region=None, **config)
                                 -> botocore S3 client
                                 path-style, SigV4, total_max_attempts=1 (so request counts
                                 are exact); **config overrides botocore.config.Config kwargs
  create_bucket(name) -> None
  put(bucket, key, data: bytes) -> str    the ETag (quoted MD5)
  get(bucket, key, range=None) -> bytes
  delete(bucket, key) -> None
  credentials_env() -> dict      AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_ENDPOINT_URL/...
                                 for launching other programs against this server

The server runs with a clean environment (every AWS_* and OBS_* variable removed), and boto3
clients are created with AWS_* removed from os.environ for the duration of client creation and
AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE pointing at /dev/null, so a developer's
AWS_CA_BUNDLE, profile or endpoint settings cannot leak into the tests.

Admin API (unsigned, not counted in stats):
  GET  /_admin/stats[?requests=0]   counters by op (GET, HEAD, LIST, PUT, DELETE, OTHER),
                                    bytes_sent, get_bytes and the last 100000 requests as
                                    {"op","bucket","key","range","status","bytes","request_id",
                                    "time"} (and "prefix" for a LIST)
  POST /_admin/reset                zero counters and the request log
  GET  /_admin/faults               current fault config (with remaining/injected per rule)
  POST /_admin/faults {...}         replace it: latency_ms, bandwidth_bps, clock_offset_s,
                                    flavour ("s3"|"obs"), seed, errors: [rule, ...] where a rule
                                    is {op, bucket, key_regex, rate, count} plus either
                                    {status, code, message, retry_after} (an S3 error),
                                    {reset_after_bytes: N} (RST after N body bytes) or
                                    {short_body_bytes: N} (FIN after N body bytes);
                                    pfs: true (OBS parallel file system listings: "dir/"
                                    lists itself), omit_next_marker: true (V1 without
                                    NextMarker)
  GET  /_admin/credentials          accepted access keys and their expiry (no secrets)
  POST /_admin/credentials {...}    temporary credentials: access_key, secret_key,
                                    security_token, expires_in_s, expire_others, expire;
                                    expired ones get 403 ExpiredToken
  GET  /_admin/health               {"ok": true}
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SERVER_SCRIPT = os.path.join(REPO, "scripts", "s3server.py")
PYTHON = "/usr/bin/python3"   # Debian's interpreter; another python3 may come first on PATH

DEFAULT_ACCESS_KEY = "hoardfs-test"
DEFAULT_SECRET_KEY = "hoardfs-test-secret"

_env_lock = threading.Lock()


def clean_env(base=None):
    """A copy of the environment without AWS_* and OBS_* variables."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if name.startswith(("AWS_", "OBS_")):
            del env[name]
    return env


@contextlib.contextmanager
def _no_aws_env():
    """Hide AWS_* from botocore while a session/client is being built (process-wide, so
    serialised with a lock)."""
    with _env_lock:
        saved = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
        for k in saved:
            del os.environ[k]
        os.environ["AWS_CONFIG_FILE"] = os.devnull
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
        try:
            yield
        finally:
            for k in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
                os.environ.pop(k, None)
            os.environ.update(saved)


class S3Server:
    """A running scripts/s3server.py subprocess (see the module docstring)."""

    def __init__(self, root=None, *, access_key=DEFAULT_ACCESS_KEY, secret_key=DEFAULT_SECRET_KEY,
                 region="us-east-1", port=0, extra_args=(), quiet=True, keep_root=None,
                 start_timeout=20.0):
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.extra_args = list(extra_args)
        self.quiet = quiet
        self.start_timeout = start_timeout
        self._workdir = tempfile.mkdtemp(prefix="s3server-")
        self._own_root = root is None
        self.keep_root = bool(keep_root)
        self.root = os.path.join(self._workdir, "root") if root is None else os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.port = port
        self.host = "127.0.0.1"
        self.endpoint = None
        self.log_path = os.path.join(self._workdir, "server.log")
        self.proc = None
        self._client = None

    # -- lifecycle

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            self._cleanup()
            raise

    def __exit__(self, *exc):
        self.stop()
        self._cleanup()
        return False

    def start(self):
        if self.proc is not None:
            return self
        port_file = os.path.join(self._workdir, "port")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(port_file)
        cmd = [PYTHON, SERVER_SCRIPT, "--root", self.root, "--host", self.host,
               "--port", str(self.port), "--port-file", port_file,
               "--access-key", self.access_key, "--secret-key", self.secret_key]
        if self.quiet:
            cmd.append("--quiet")
        cmd += self.extra_args
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(cmd, env=clean_env(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("s3server exited with %s; log:\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    break
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("s3server did not start; log:\n%s" % self.log_tail())
            time.sleep(0.02)
        self.endpoint = "http://%s:%d" % (self.host, self.port)
        while True:
            try:
                self.stats(requests=False)
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("s3server not answering; log:\n%s" % self.log_tail())
                time.sleep(0.02)
        return self

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._client = None

    def restart(self):
        self.stop()
        self.start()

    def _cleanup(self):
        # The work dir holds the port file, the log and (when we made it) the root; a root
        # passed in by the caller lives elsewhere and is never touched.
        if self._own_root and self.keep_root:
            return
        shutil.rmtree(self._workdir, ignore_errors=True)

    def log_tail(self, nbytes=4000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - nbytes))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # -- admin API

    def admin(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.endpoint + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        # A bare opener: no proxies from the environment for a loopback server.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=30) as resp:
                return json.loads(resp.read().decode() or "{}")
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")
            raise RuntimeError("admin %s %s -> %d: %s" % (method, path, e.code, detail)) from None

    def stats(self, requests=True):
        return self.admin("GET", "/_admin/stats" + ("" if requests else "?requests=0"))

    def reset(self):
        self.admin("POST", "/_admin/reset", {})

    def faults(self, config=None):
        if config is None:
            return self.admin("GET", "/_admin/faults")
        return self.admin("POST", "/_admin/faults", config)

    def credentials(self, spec=None):
        """spec None: the accepted keys; a dict: POST /_admin/credentials (see above)."""
        if spec is None:
            return self.admin("GET", "/_admin/credentials")
        return self.admin("POST", "/_admin/credentials", spec)

    # -- S3 through boto3

    def client(self, access_key=None, secret_key=None, session_token=None, region=None, **config):
        import boto3
        import botocore.config
        kwargs = dict(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=60)
        kwargs.update(config)
        with _no_aws_env():
            session = boto3.session.Session(
                aws_access_key_id=access_key or self.access_key,
                aws_secret_access_key=secret_key or self.secret_key,
                aws_session_token=session_token,
                region_name=region or self.region)
            return session.client("s3", endpoint_url=self.endpoint, verify=False,
                                  config=botocore.config.Config(**kwargs))

    def _c(self):
        if self._client is None:
            self._client = self.client()
        return self._client

    def create_bucket(self, name):
        self._c().create_bucket(Bucket=name)

    def put(self, bucket, key, data):
        return self._c().put_object(Bucket=bucket, Key=key, Body=data)["ETag"]

    def get(self, bucket, key, range=None):
        kwargs = {"Range": range} if range else {}
        return self._c().get_object(Bucket=bucket, Key=key, **kwargs)["Body"].read()

    def delete(self, bucket, key):
        self._c().delete_object(Bucket=bucket, Key=key)

    def credentials_env(self):
        """Environment variables pointing another program (hoardfs, aws CLI) at this server."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_ENDPOINT_URL_S3": self.endpoint}
