# SPDX-License-Identifier: MIT
"""The credential chain through real mounts [P §6]: MoXing variables, the
AWS shared credentials file and profile, and temporary keys from an ECS
metadata service (a small stdlib server here) that the daemon renews in
the background before they expire, and at once when the store says they
expired.  Secrets never reach a log."""
import datetime
import http.server
import json
import os
import secrets
import subprocess
import threading
import time

import pytest

from conftest import HOARDFS, clean_env, is_mounted


class MetadataServer:
    """An ECS metadata service on 127.0.0.1 [P §6.2].  Each securitykey GET
    mints new temporary keys valid for `ttl` seconds and registers them
    with the S3 server.  mode: "imdsv2" (a token from PUT is required),
    "put_400" (PUT refused, as on CCE: plain GET), "no_agency" (401)."""

    def __init__(self, s3, ttl=3600, mode="imdsv2"):
        self.s3 = s3
        self.ttl = ttl
        self.mode = mode
        self.lock = threading.Lock()
        self.minted = []      # access keys, in order
        self.secrets = []     # everything secret handed out
        self.tokens = set()   # IMDSv2 tokens issued
        self.puts = 0
        self.gets = 0
        self.refused = 0
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, status, body, ctype="application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                with srv.lock:
                    srv.puts += 1
                if self.path != "/meta-data/latest/api/token":
                    return self.reply(404, "{}")
                if srv.mode == "put_400":
                    return self.reply(400, "bad request")
                ttl = (self.headers.get("X-Metadata-Token-Ttl-Seconds")
                       or self.headers.get("X-securitykey-Token-Ttl-Seconds"))
                if not ttl:
                    return self.reply(400, "no ttl")
                tok = "imds-" + secrets.token_hex(8)
                with srv.lock:
                    srv.tokens.add(tok)
                self.reply(200, tok, "text/plain")

            def do_GET(self):
                with srv.lock:
                    srv.gets += 1
                if self.path != "/openstack/latest/securitykey":
                    return self.reply(404, "{}")
                if srv.mode == "no_agency":
                    return self.reply(401, json.dumps({
                        "error": "Please configure Cloud Service Agency "
                                 "first"}))
                tok = (self.headers.get("X-Metadata-Token")
                       or self.headers.get("X-securitykey-Token"))
                if srv.mode == "imdsv2" and tok not in srv.tokens:
                    with srv.lock:
                        srv.refused += 1
                    return self.reply(401, json.dumps({"error": "token"}))
                self.reply(200, json.dumps(srv.mint()))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)

    def mint(self):
        with self.lock:
            n = len(self.minted) + 1
            ak = "TMPAK%04d%s" % (n, secrets.token_hex(4).upper())
            sk = "tmp-secret-" + secrets.token_hex(12)
            tok = "tmp-token-" + secrets.token_hex(24)
            self.minted.append(ak)
            self.secrets += [sk, tok]
        self.s3.credentials({"access_key": ak, "secret_key": sk,
                             "security_token": tok,
                             "expires_in_s": self.ttl})
        exp = datetime.datetime.now(datetime.timezone.utc) + \
            datetime.timedelta(seconds=self.ttl)
        return {"credential": {
            "access": ak, "secret": sk, "securitytoken": tok,
            "expires_at": exp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}

    def expire_all(self):
        with self.lock:
            keys = list(self.minted)
        self.s3.credentials({"expire": keys})

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def ecs_env(md):
    return clean_env({"HOARDFS_ECS_METADATA_URL": md.url})


def statuses(s3):
    return [r["status"] for r in s3.stats()["requests"]]


def assert_no_secrets(m, md):
    logs = m.logs()
    for secret in md.secrets:
        assert secret not in logs


@pytest.mark.parametrize("mode", ["imdsv2", "put_400"])
def test_ecs_keys_are_renewed_in_the_background(s3, bucket, mount_factory,
                                                mode, figures):
    """Keys living 6 s are renewed half-way (the 10-minute margin shrinks
    for short lives): reading for 8 s never meets an expired key."""
    for i in range(16):
        s3.put(bucket, "f%02d" % i, b"x" * (i + 1))
    with MetadataServer(s3, ttl=6, mode=mode) as md:
        s3.reset()
        m = mount_factory(bucket, env=ecs_env(md)).start()
        assert md.gets == 1
        t0 = time.monotonic()
        for i in range(16):
            with open(os.path.join(m.path, "f%02d" % i), "rb") as f:
                assert f.read() == b"x" * (i + 1)
            time.sleep(max(0, t0 + 0.5 * (i + 1) - time.monotonic()))
        m.stop()
        assert all(s < 300 for s in statuses(s3)), statuses(s3)
        # One at mount, then one every ~3 s of the 8 s of reading.
        assert md.gets >= 3, md.gets
        assert "credentials from the ECS metadata service" in m.logs()
        if mode == "imdsv2":
            assert md.puts >= md.gets and md.refused == 0
        # Renewed ahead of expiry, never waited for once expired.
        assert "expired; renewing" not in m.logs()
        assert_no_secrets(m, md)
        figures("ecs refresh (%s): %d metadata fetches in %.1f s, "
                "0 refused requests" % (mode, md.gets,
                                        time.monotonic() - t0))


def test_expired_token_is_renewed_and_retried(s3, bucket, mount_factory):
    s3.put(bucket, "a", b"first")
    s3.put(bucket, "b", b"second")
    with MetadataServer(s3, ttl=3600) as md:
        # Debug logging too: not even there may a secret appear.
        with mount_factory(bucket, env=ecs_env(md),
                           args=["--log-level", "debug"]) as m:
            assert open(os.path.join(m.path, "a"), "rb").read() == b"first"
            # The store rotates: every key handed out so far is expired.
            md.expire_all()
            s3.reset()
            assert open(os.path.join(m.path, "b"), "rb").read() == b"second"
            reqs = s3.stats()["requests"]
            # The first request with the old keys (a lookup or the GET) is
            # refused as expired; after the renewal everything is accepted.
            assert [r["status"] for r in reqs][0] == 403, reqs
            assert all(r["status"] < 300 for r in reqs[1:]), reqs
            assert [r["status"] for r in reqs
                    if r["key"] == "b" and r["op"] == "GET"] == [206], reqs
            assert md.gets == 2
        assert "ExpiredToken: renewing the credentials" in m.logs()
        assert_no_secrets(m, md)


def test_no_agency_is_named(s3, bucket, tmp_path):
    with MetadataServer(s3, mode="no_agency") as md:
        mnt = tmp_path / "m"
        mnt.mkdir()
        r = subprocess.run([HOARDFS, "--endpoint", s3.endpoint,
                            "--path-style", "s3://" + bucket, str(mnt)],
                           env=ecs_env(md), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1 and "agency" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1
        assert not is_mounted(str(mnt))


def test_moxing_variables(s3, bucket, mount_factory):
    s3.put(bucket, "f", b"mox")
    env = clean_env({"ACCESS_KEY_ID": s3.access_key,
                     "SECRET_ACCESS_KEY": s3.secret_key})
    with mount_factory(bucket, env=env) as m:
        assert open(os.path.join(m.path, "f"), "rb").read() == b"mox"
    assert "credentials from ACCESS_KEY_ID" in m.logs()


def test_shared_credentials_file_and_profile(s3, bucket, mount_factory,
                                             tmp_path):
    s3.put(bucket, "f", b"profile")
    cred = tmp_path / "credentials"
    cred.write_text("[default]\naws_access_key_id = nobody\n"
                    "aws_secret_access_key = wrong\n\n"
                    "[hoard]\naws_access_key_id = %s\n"
                    "aws_secret_access_key = %s\n" % (s3.access_key,
                                                     s3.secret_key))
    env = clean_env({"AWS_SHARED_CREDENTIALS_FILE": str(cred),
                     "AWS_PROFILE": "hoard"})
    with mount_factory(bucket, env=env) as m:
        assert open(os.path.join(m.path, "f"), "rb").read() == b"profile"
    assert "credentials from AWS shared credentials file" in m.logs()
    assert s3.secret_key not in m.logs()
    # ~/.aws/credentials when no file is named: HOME decides.
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(cred.read_text())
    env = clean_env({"HOME": str(home), "AWS_PROFILE": "hoard"})
    del env["AWS_SHARED_CREDENTIALS_FILE"]
    with mount_factory(bucket, env=env, name="m2") as m:
        assert open(os.path.join(m.path, "f"), "rb").read() == b"profile"
    # A profile the file lacks is an error, named.
    mnt = tmp_path / "m3"
    mnt.mkdir()
    env["AWS_PROFILE"] = "absent"
    r = subprocess.run([HOARDFS, "--endpoint", s3.endpoint, "--path-style",
                        "s3://" + bucket, str(mnt)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "AWS_PROFILE=absent" in r.stderr, r.stderr
