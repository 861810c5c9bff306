#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""s3server.py: a local S3-compatible object server for hoardfs tests, the demo and benchmarks.

Python standard library only; run it with Debian's /usr/bin/python3:

    /usr/bin/python3 scripts/s3server.py --root DIR [--host 127.0.0.1] [--port 0]
        [--port-file FILE] [--access-key AK --secret-key SK] [--region REGION]
        [--security-token TOKEN] [--vhost-domain DOMAIN] [--flavour s3|obs] [--quiet]

It speaks enough of the S3 REST API for a read-mostly client: PUT/GET/HEAD/DELETE object
(single Range, If-Match/If-None-Match/If-(Un)Modified-Since), ListObjects V1 and V2, bucket
create/head/delete, ListBuckets, GetBucketLocation, CopyObject, DeleteObjects and multipart
upload. Requests must be signed (SigV4 header or presigned query, SigV2, or the OBS V2-style
scheme); an unsigned admin API under /_admin/ exposes request counters and fault injection.
It does not do versioning, ACLs, tagging, object metadata (Content-Type is always
application/octet-stream) or checksums other than MD5 ETags.

DESIGN
Storage. --root holds one directory per bucket. A key that is representable as a relative path
(no empty, '.' or '..' segment, no segment over 255 bytes, no trailing '/', no NUL, first
segment not the reserved name) and does not collide with the tree (a file where a directory is
needed or the reverse) is stored as a plain file at that path, so a tree laid out on disk by a
benchmark is served as objects with key = relative path. Every other key is stored under
BUCKET/.s3server/objects/<sha256(key)> with a JSON sidecar <sha256>.json holding the key. The
reserved directory also holds tmp/ (uploads are written there and renamed into place, so a
reader never sees a partial object), uploads/ (multipart parts) and etags.jsonl. A key lives in
exactly one place; lookups try the hashed index first, then the plain path. PUT objects persist
across restarts because both places are plain files on disk.

ETags are the quoted MD5 of the content (multipart: MD5 of the part MD5s, "-N"). They are
cached in memory per bucket keyed by key and validated by (size, mtime_ns, inode), and the
cache is appended to etags.jsonl so a restart does not re-hash a 70,000-file tree. A missing
ETag is computed on first need (GET, HEAD or listing; a listing hashes in a thread pool).

Listing. Keys come in UTF-8 byte order, which is Python code point order. A directory's
entries are sorted with a directory sorting as 'name/', so walking the tree depth-first in that
order yields keys in global order; the hashed keys (a small sorted list in memory) are merged
in with heapq.merge. The walk starts at the marker/start-after by bisecting each directory's
sorted entry list, descends only into directories that can hold the prefix, and does not
descend at all into a directory whose whole subtree rolls up into one CommonPrefix (it only
checks that the subtree holds a file). Sorted directory listings are cached by path and
validated by the directory's mtime_ns and inode; a directory modified less than two seconds
ago is not cached (mtime granularity), and our own PUT/DELETE drop the entries they touch.
Files laid out on disk while the server runs are therefore seen by the next listing.

Threads. ThreadingHTTPServer, one daemon thread per connection, HTTP/1.1 keep-alive,
request_queue_size 128. Per-bucket RLock guards the hashed index, the ETag cache and the
placement of objects (rename, mkdir, rmdir of empty parents); object bodies are read and
written outside it. GET bodies are sent with socket.sendfile from an fd opened before the
response, so a concurrent PUT (rename) never tears a body. Stats and fault rules have their own
locks. Every response carries Content-Length (except 204/304) and the request id header.

Auth. SigV4 is recomputed from the request line as received: canonical URI = the path as sent
(also accepted: the path re-encoded with the AWS UriEncode rules, for clients that sign a
normalised form), canonical query re-encoded from the decoded parameters, payload hash from
x-amz-content-sha256 (UNSIGNED-PAYLOAD, hex SHA-256 which is then checked against the body,
or STREAMING-* aws-chunked whose chunk signatures are checked). Clock skew over 15 minutes is
refused as S3 does. The admin API is not signed.

Accounting. Each S3 request is recorded once, when its response headers are written (so a
client that has read a response always finds it in /_admin/stats), with the number of body
bytes the server is about to send.

ADMIN API (path prefix /_admin/, unsigned, never counted; '_' cannot occur in a bucket name)
  GET  /_admin/stats[?requests=0]  {"GET","HEAD","LIST","PUT","DELETE","OTHER": counts,
                                    "bytes_sent": all response body bytes, "get_bytes": body
                                    bytes of 2xx object GETs, "requests": last 100000 of
                                    {"op","bucket","key","range","status","bytes","request_id",
                                    "time" (epoch seconds, when the response headers went out),
                                    and for a LIST "prefix"}}
  POST /_admin/reset               zero the counters and the request log
  GET  /_admin/faults              the fault config, with remaining/injected per rule
  POST /_admin/faults  JSON        replace the fault config ({} clears it):
         latency_ms       sleep before every S3 response
         bandwidth_bps    per-connection cap on GET body bytes/s
         clock_offset_s   shift the server clock (Date header, 15-minute skew check)
         flavour          "s3" | "obs" (OBS XML namespace, x-obs-request-id, Server: OBS)
         pfs              true: list like an OBS parallel file system bucket, whose
                          directories are real: a LIST of prefix "dir/" (ending in the
                          delimiter) returns "dir/" itself as its first Contents entry, size 0
         omit_next_marker true: ListObjects V1 never sends NextMarker, even with a delimiter;
                          the client must continue from the last Key or CommonPrefix
         max_keys_cap     N > 0: no listing page holds more than N entries (MaxKeys says N),
                          so paging and markers are exercised with a handful of keys
         seed             seed of the random generator used by rule rates
         errors           [rule, ...]; a rule has op (GET|HEAD|LIST|PUT|DELETE|OTHER|*),
                          bucket, key_regex (re.search on the key; the prefix for LIST), rate
                          (0..1), count (null = unlimited) and one action: status/code/message/
                          retry_after (an S3 error, default 503 SlowDown), reset_after_bytes N
                          (send headers and N body bytes, then RST), short_body_bytes N (then
                          FIN). The first matching rule that fires wins.
  GET  /_admin/credentials         {"credentials": [{"access_key", "expires_at", "expired",
                                    "has_token"}, ...]} (no secrets)
  POST /_admin/credentials JSON    temporary credentials, for token refresh tests:
         access_key, secret_key   add (or replace) a credential
         security_token           the token it requires (absent: any or none)
         expires_in_s             it expires this many seconds from now (absent: never)
         expire_others            true: every other credential expires now (a rotation)
         expire                   [access_key, ...] that expire now
       A request signed with an expired credential, or carrying an expired credential's
       token, gets 403 ExpiredToken; an unknown access key 403 InvalidAccessKeyId.
  GET  /_admin/health              {"ok": true, "root": ...}
Operations are classified as LIST (ListObjects V1/V2), GET/HEAD (object or HEAD bucket), PUT
(object, part, copy, CreateBucket), DELETE (object, bucket) and OTHER (ListBuckets, POSTs,
sub-resources).
"""

import argparse
import base64
import binascii
import bisect
import calendar
import collections
import concurrent.futures
import email.utils
import errno
import hashlib
import heapq
import hmac
import http
import http.server
import ipaddress
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
import traceback
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape as _sax_escape

DEFAULT_ACCESS_KEY = "hoardfs-test"
DEFAULT_SECRET_KEY = "hoardfs-test-secret"
RESERVED = ".s3server"            # per-bucket reserved directory, never listed
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
OBS_NS = "http://obs.myhwclouds.com/doc/2015-06-30/"
MAX_KEY_BYTES = 1024              # S3 key length limit
MAX_SEGMENT_BYTES = 255           # NAME_MAX of Linux file systems
MAX_LIST_KEYS = 1000              # S3 caps max-keys at 1000
IO_CHUNK = 1 << 20                # body copy unit: large enough for throughput, small for memory
SMALL_BODY = 256 << 10            # bodies up to this size go out in the same write as the headers
DRAIN_LIMIT = 8 << 20             # unread request body we drain to keep a connection alive
MAX_SKEW_S = 900                  # S3 refuses requests more than 15 minutes off
MIN_PART_SIZE = 5 << 20           # S3 minimum size of a multipart part except the last
REQUEST_LOG_MAX = 100000          # entries kept in /_admin/stats "requests"
DIRCACHE_MAX = 200000             # cached directory listings before the cache is flushed
DIRCACHE_RACY_NS = 2 * 10**9      # directories modified this recently are not cached
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
OWNER_ID = "6864f1d1c0a0a8e3f1ad3a1f7b3e0d9a5c5e8f7a6b4c3d2e1f0a9b8c7d6e5f4a"
OWNER_NAME = "hoardfs"
MAX_DATE = "\U0010ffff"           # sorts after every character a key can hold

ERROR_MESSAGES = {
    "AccessDenied": "Access Denied",
    "AuthorizationHeaderMalformed": "The authorization header is malformed.",
    "BadDigest": "The Content-MD5 you specified did not match what we received.",
    "BucketNotEmpty": "The bucket you tried to delete is not empty",
    "ExpiredToken": "The provided token has expired.",
    "EntityTooSmall": "Your proposed upload is smaller than the minimum allowed object size.",
    "IncompleteBody": "You did not provide the number of bytes specified by the Content-Length HTTP header.",
    "InternalError": "We encountered an internal error. Please try again.",
    "InvalidAccessKeyId": "The AWS Access Key Id you provided does not exist in our records.",
    "InvalidArgument": "Invalid Argument",
    "InvalidBucketName": "The specified bucket is not valid.",
    "InvalidDigest": "The Content-MD5 you specified is not valid.",
    "InvalidPart": "One or more of the specified parts could not be found. The part may not have "
                   "been uploaded, or the specified entity tag may not match the part's entity tag.",
    "InvalidPartOrder": "The list of parts was not in ascending order. Parts must be ordered by part number.",
    "InvalidRange": "The requested range is not satisfiable",
    "InvalidRequest": "Invalid Request",
    "InvalidToken": "The provided token is malformed or otherwise invalid.",
    "InvalidURI": "Couldn't parse the specified URI.",
    "KeyTooLongError": "Your key is too long",
    "MalformedXML": "The XML you provided was not well-formed or did not validate against our published schema.",
    "MethodNotAllowed": "The specified method is not allowed against this resource.",
    "MissingContentLength": "You must provide the Content-Length HTTP header.",
    "NoSuchBucket": "The specified bucket does not exist",
    "NoSuchKey": "The specified key does not exist.",
    "NoSuchUpload": "The specified upload does not exist. The upload ID may be invalid, or the "
                    "upload may have been aborted or completed.",
    "NotImplemented": "A header or parameter you provided implies functionality that is not implemented",
    "PreconditionFailed": "At least one of the pre-conditions you specified did not hold",
    "RequestTimeTooSkewed": "The difference between the request time and the current time is too large.",
    "ServiceUnavailable": "Please reduce your request rate.",
    "SignatureDoesNotMatch": "The request signature we calculated does not match the signature you "
                             "provided. Check your key and signing method.",
    "SlowDown": "Please reduce your request rate.",
    "TooManyRequests": "Please reduce your request rate.",
    "XAmzContentSHA256Mismatch": "The provided 'x-amz-content-sha256' header does not match what was computed.",
}

# Default S3 error code for an injected fault given only a status.
DEFAULT_CODE_FOR_STATUS = {
    400: "InvalidRequest", 403: "AccessDenied", 404: "NoSuchKey", 408: "RequestTimeout",
    409: "OperationAborted", 412: "PreconditionFailed", 416: "InvalidRange",
    429: "TooManyRequests", 500: "InternalError", 501: "NotImplemented",
    502: "BadGateway", 503: "SlowDown", 504: "GatewayTimeout",
}

# Query parameters that select a sub-resource rather than parametrise a listing/get.
BUCKET_SUBRESOURCES = frozenset(
    "accelerate acl analytics cors delete encryption intelligent-tiering inventory lifecycle "
    "location logging metrics notification object-lock ownershipControls policy policyStatus "
    "publicAccessBlock replication requestPayment tagging uploads versioning versions website".split())
OBJECT_SUBRESOURCES = frozenset(
    "acl attributes legal-hold restore retention select tagging torrent".split())
# Sub-resources that take part in the SigV2 / OBS canonical resource.
# Union of botocore's HmacV1Auth list and the OBS SDK's.
V2_SUBRESOURCES = frozenset(
    "accelerate acl analytics attname cors defaultObjectAcl delete inventory lifecycle location "
    "logging metrics notification object-lock partNumber policy replication requestPayment "
    "response-cache-control response-content-disposition response-content-encoding "
    "response-content-language response-content-type response-expires restore select "
    "select-type storageClass tagging torrent uploadId uploads versionId versioning versions "
    "website x-obs-security-token".split())
RESPONSE_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}
BUCKET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
RANGE_RE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


# --------------------------------------------------------------------------------------------
# Small helpers


class S3Error(Exception):
    """An S3 error response: HTTP status, error code, message and extra XML fields."""

    def __init__(self, status, code, message=None, headers=None, **fields):
        super().__init__(code)
        self.status = status
        self.code = code
        self.message = message or ERROR_MESSAGES.get(code, code)
        self.headers = headers or {}
        self.fields = fields


def xml_escape(text):
    """Escape for XML element content; quotes too, as S3 writes ETags as &quot;...&quot;."""
    return _sax_escape(str(text), {'"': "&quot;"})


def url_encode_key(text):
    """encoding-type=url encoding: percent-encode UTF-8, keep '/' (as S3 and s3-tests expect)."""
    return urllib.parse.quote(text, safe="/")


def uri_encode(data, keep_slash):
    """AWS UriEncode: keep A-Za-z0-9-._~ (and '/' when asked), %XX upper-case for the rest."""
    return urllib.parse.quote(data, safe="/" if keep_slash else "")


def http_date(ts):
    """RFC 1123 date with fixed English names (no locale)."""
    return email.utils.formatdate(ts, usegmt=True)


def iso_date(mtime_ns):
    """ListObjects LastModified: 2026-01-02T03:04:05.000Z."""
    sec, ns = divmod(mtime_ns, 10**9)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + ".%03dZ" % (ns // 10**6)


def parse_http_date(value):
    """Parse an RFC 1123 / RFC 850 / asctime date; None when unparsable."""
    try:
        parsed = email.utils.parsedate_tz(value)
    except (TypeError, ValueError):
        return None
    if parsed is None:
        return None
    return email.utils.mktime_tz(parsed)


def split_query(raw_query):
    """Split a raw query string into (raw_name, raw_value) pairs; a bare name has value ''."""
    pairs = []
    for part in raw_query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((name, value))
    return pairs


def decode_query_component(raw, plus_is_space=True):
    # In query strings '+' is form-encoded space for S3; in paths it is literal.
    if plus_is_space:
        raw = raw.replace("+", " ")
    return urllib.parse.unquote(raw, errors="surrogateescape")


def etag_matches(header_value, etag):
    """Does an If-Match / If-None-Match list match the (quoted) ETag?"""
    bare = etag.strip('"')
    for token in header_value.split(","):
        token = token.strip()
        if token == "*":
            return True
        if token.startswith("W/"):
            token = token[2:]
        if token.strip('"') == bare:
            return True
    return False


def parse_range(value, size):
    """Parse one 'bytes=' range. Returns (start, end) inclusive, None when the header is to be
    ignored (malformed, multi-range, end < start: S3 then answers 200 with the whole object),
    or 'unsatisfiable' (start >= size, suffix of 0, or any range on an empty object)."""
    m = RANGE_RE.match(value)
    if not m:
        return None
    first, last = m.groups()
    if first == "" and last == "":
        return None
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    start = int(first)
    end = int(last) if last != "" else size - 1
    if last != "" and end < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


def plain_relpath(key):
    """The relative path a key maps to as a plain file, or None if it must be hashed."""
    if not key or key.endswith("/") or "\0" in key:
        return None
    parts = key.split("/")
    if parts[0] == RESERVED:
        return None
    for part in parts:
        if part in ("", ".", "..") or len(part.encode("utf-8", "surrogateescape")) > MAX_SEGMENT_BYTES:
            return None
    return key


def key_hash(key):
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


# --------------------------------------------------------------------------------------------
# Accounting


class Stats:
    """Thread-safe request counters and a bounded request log."""

    OPS = ("GET", "HEAD", "LIST", "PUT", "DELETE", "OTHER")

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self._counts = dict.fromkeys(self.OPS, 0)
            self._bytes_sent = 0
            self._get_bytes = 0
            self._log = collections.deque(maxlen=REQUEST_LOG_MAX)

    def record(self, op, bucket, key, rng, status, nbytes, request_id, prefix=None):
        entry = {"op": op, "bucket": bucket, "key": key, "range": rng, "status": status,
                 "bytes": nbytes, "request_id": request_id, "time": time.time()}
        if op == "LIST":
            entry["prefix"] = prefix
        with self._lock:
            self._counts[op] += 1
            self._bytes_sent += nbytes
            if op == "GET" and 200 <= status < 300:
                self._get_bytes += nbytes  # object data only, not error documents
            self._log.append(entry)

    def snapshot(self, include_requests=True):
        with self._lock:
            out = dict(self._counts)
            out["bytes_sent"] = self._bytes_sent
            out["get_bytes"] = self._get_bytes
            out["requests"] = list(self._log) if include_requests else []
        return out


# --------------------------------------------------------------------------------------------
# Fault injection


class FaultRule:
    """One entry of the 'errors' list. Exactly one action: an error status (default 503
    SlowDown), reset_after_bytes (RST after N body bytes) or short_body_bytes (FIN after N)."""

    KEYS = {"op", "bucket", "key_regex", "status", "code", "message", "rate", "retry_after",
            "count", "reset_after_bytes", "short_body_bytes"}
    OPS = {"GET", "HEAD", "LIST", "PUT", "DELETE", "OTHER", "*"}

    def __init__(self, spec):
        if not isinstance(spec, dict):
            raise ValueError("each errors[] entry must be an object")
        unknown = set(spec) - self.KEYS
        if unknown:
            raise ValueError("unknown fault rule keys: %s" % ", ".join(sorted(unknown)))
        self.op = str(spec.get("op", "*")).upper()
        if self.op not in self.OPS:
            raise ValueError("bad op %r" % spec.get("op"))
        self.bucket = spec.get("bucket")
        self.key_regex = spec.get("key_regex")
        self._re = re.compile(self.key_regex) if self.key_regex else None
        self.reset_after_bytes = spec.get("reset_after_bytes")
        self.short_body_bytes = spec.get("short_body_bytes")
        if self.reset_after_bytes is not None and self.short_body_bytes is not None:
            raise ValueError("a rule has one of reset_after_bytes / short_body_bytes")
        self.body_fault = self.reset_after_bytes is not None or self.short_body_bytes is not None
        self.status = int(spec.get("status", 503))
        self.code = spec.get("code") or DEFAULT_CODE_FOR_STATUS.get(self.status, "InternalError")
        self.message = spec.get("message")
        self.rate = float(spec.get("rate", 1.0))
        self.retry_after = spec.get("retry_after")
        self.count = spec.get("count")
        self.remaining = None if self.count is None else int(self.count)
        self.injected = 0

    def matches(self, op, bucket, key):
        if self.op != "*" and self.op != op:
            return False
        if self.bucket is not None and self.bucket != bucket:
            return False
        if self._re is not None and not self._re.search(key or ""):
            return False
        return self.remaining is None or self.remaining > 0

    def to_json(self):
        out = {"op": self.op, "bucket": self.bucket, "key_regex": self.key_regex,
               "rate": self.rate, "count": self.count, "remaining": self.remaining,
               "injected": self.injected}
        if self.reset_after_bytes is not None:
            out["reset_after_bytes"] = self.reset_after_bytes
        elif self.short_body_bytes is not None:
            out["short_body_bytes"] = self.short_body_bytes
        else:
            out.update(status=self.status, code=self.code, message=self.message,
                       retry_after=self.retry_after)
        return out


class Faults:
    """Current fault-injection configuration (POST /_admin/faults). New kinds of fault are
    added as a top-level key here (validated in configure) and applied at one place in the
    handler: latency before the response, error rules after auth, body rules while sending."""

    KEYS = {"latency_ms", "bandwidth_bps", "errors", "clock_offset_s", "flavour", "seed",
            "omit_next_marker", "pfs", "max_keys_cap"}

    def __init__(self, flavour="s3"):
        self._lock = threading.Lock()
        self._default_flavour = flavour
        self.configure({})

    def configure(self, cfg):
        if not isinstance(cfg, dict):
            raise ValueError("fault config must be a JSON object")
        unknown = set(cfg) - self.KEYS
        if unknown:
            raise ValueError("unknown fault keys: %s" % ", ".join(sorted(unknown)))
        rules = [FaultRule(spec) for spec in cfg.get("errors") or []]
        flavour = cfg.get("flavour", self._default_flavour)
        if flavour not in ("s3", "obs"):
            raise ValueError("flavour must be s3 or obs")
        with self._lock:
            self.latency_ms = float(cfg.get("latency_ms") or 0)
            self.bandwidth_bps = int(cfg.get("bandwidth_bps") or 0)
            self.clock_offset_s = float(cfg.get("clock_offset_s") or 0)
            self.flavour = flavour
            self.rules = rules
            self.seed = cfg.get("seed")
            self._random = random.Random(self.seed)
            self.omit_next_marker = bool(cfg.get("omit_next_marker"))
            self.pfs = bool(cfg.get("pfs"))
            self.max_keys_cap = int(cfg.get("max_keys_cap") or 0)

    def to_json(self):
        with self._lock:
            return {"latency_ms": self.latency_ms, "bandwidth_bps": self.bandwidth_bps,
                    "clock_offset_s": self.clock_offset_s, "flavour": self.flavour,
                    "seed": self.seed, "omit_next_marker": self.omit_next_marker,
                    "pfs": self.pfs, "max_keys_cap": self.max_keys_cap,
                    "errors": [r.to_json() for r in self.rules]}

    def pick(self, op, bucket, key, body_fault):
        """First matching rule of the wanted kind that fires (rate), with its count consumed."""
        if not self.rules:
            return None
        with self._lock:
            for rule in self.rules:
                if rule.body_fault != body_fault or not rule.matches(op, bucket, key):
                    continue
                if rule.rate < 1.0 and self._random.random() >= rule.rate:
                    continue
                if rule.remaining is not None:
                    rule.remaining -= 1
                rule.injected += 1
                return rule
        return None

    def now(self):
        """Server clock as seen by clients (shifted by clock_offset_s)."""
        return time.time() + self.clock_offset_s


# --------------------------------------------------------------------------------------------
# Storage


class ObjectHandle:
    """An open object: fd plus the fstat taken right after open and its ETag."""

    __slots__ = ("fd", "size", "mtime_ns", "etag")

    def __init__(self, fd, size, mtime_ns, etag):
        self.fd = fd
        self.size = size
        self.mtime_ns = mtime_ns
        self.etag = etag

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Bucket:
    """Per-bucket state: the hashed-key index and the ETag cache (see DESIGN)."""

    def __init__(self, name, path, ident):
        self.name = name
        self.path = path
        self.ident = ident
        self.lock = threading.RLock()
        self.reserved = os.path.join(path, RESERVED)
        self.objdir = os.path.join(self.reserved, "objects")
        self.tmpdir = os.path.join(self.reserved, "tmp")
        self.updir = os.path.join(self.reserved, "uploads")
        self.etag_log_path = os.path.join(self.reserved, "etags.jsonl")
        self.hashed = {}            # key -> sha256 file name
        self.hashed_sorted = []     # sorted keys; replaced (never mutated) on change
        self.etags = {}             # key -> (size, mtime_ns, ino, etag)
        self._etag_log = None
        self._loaded = False

    def load(self):
        if self._loaded:
            return
        with self.lock:
            if self._loaded:
                return
            self._load_hashed()
            self._load_etags()
            self._loaded = True

    def _load_hashed(self):
        try:
            names = os.listdir(self.objdir)
        except OSError:
            names = []
        for name in names:
            if not name.endswith(".json"):
                continue
            h = name[:-5]
            try:
                with open(os.path.join(self.objdir, name), "r", encoding="utf-8",
                          errors="surrogateescape") as f:
                    key = json.load(f)["key"]
            except (OSError, ValueError, KeyError):
                continue
            if os.path.isfile(os.path.join(self.objdir, h)):
                self.hashed[key] = h
        self.hashed_sorted = sorted(self.hashed)

    def _load_etags(self):
        lines = 0
        try:
            with open(self.etag_log_path, "r", encoding="utf-8", errors="surrogateescape") as f:
                for line in f:
                    lines += 1
                    try:
                        key, size, mtime_ns, ino, etag = json.loads(line)
                    except ValueError:
                        continue  # a torn last line after a crash
                    if etag is None:
                        self.etags.pop(key, None)
                    else:
                        self.etags[key] = (size, mtime_ns, ino, etag)
        except FileNotFoundError:
            return
        except OSError:
            return
        if lines > 2 * len(self.etags) + 1000:
            self._compact_etag_log()

    def _compact_etag_log(self):
        os.makedirs(self.reserved, exist_ok=True)
        tmp = self.etag_log_path + ".tmp"
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
            for key, (size, mtime_ns, ino, etag) in self.etags.items():
                f.write(json.dumps([key, size, mtime_ns, ino, etag], ensure_ascii=False) + "\n")
        os.replace(tmp, self.etag_log_path)

    def record_etag(self, key, st, etag):
        entry = (st.st_size, st.st_mtime_ns, st.st_ino, etag)
        with self.lock:
            if self.etags.get(key) == entry:
                return
            self.etags[key] = entry
            self._append_etag_log([key, st.st_size, st.st_mtime_ns, st.st_ino, etag])

    def forget_etag(self, key):
        with self.lock:
            if self.etags.pop(key, None) is not None:
                self._append_etag_log([key, 0, 0, 0, None])

    def _append_etag_log(self, item):
        # Called with self.lock held. The log only saves re-hashing after a restart, so an
        # I/O error here is not fatal.
        try:
            if self._etag_log is None:
                os.makedirs(self.reserved, exist_ok=True)
                self._etag_log = open(self.etag_log_path, "a", encoding="utf-8",
                                      errors="surrogateescape")
            self._etag_log.write(json.dumps(item, ensure_ascii=False) + "\n")
            self._etag_log.flush()
        except OSError:
            pass

    def cached_etag(self, key, st):
        entry = self.etags.get(key)
        if entry and entry[0] == st.st_size and entry[1] == st.st_mtime_ns and entry[2] == st.st_ino:
            return entry[3]
        return None

    def set_hashed(self, key, h):
        with self.lock:
            if h is None:
                if self.hashed.pop(key, None) is not None:
                    keys = list(self.hashed_sorted)
                    keys.remove(key)
                    self.hashed_sorted = keys
            elif key not in self.hashed:
                self.hashed[key] = h
                keys = list(self.hashed_sorted)
                bisect.insort(keys, key)
                self.hashed_sorted = keys

    def close(self):
        with self.lock:
            if self._etag_log is not None:
                try:
                    self._etag_log.close()
                except OSError:
                    pass
                self._etag_log = None


def md5_of_fd(fd, size):
    h = hashlib.md5()
    offset = 0
    while True:
        data = os.pread(fd, IO_CHUNK, offset)
        if not data:
            break
        h.update(data)  # hashlib releases the GIL for large buffers
        offset += len(data)
    return h.hexdigest()


class Store:
    """Buckets and objects on disk (see DESIGN)."""

    FILE, HASHED, SUBTREE = 0, 1, 2

    def __init__(self, root):
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self._lock = threading.Lock()
        self._buckets = {}
        self._dircache = {}
        self._hash_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(8, (os.cpu_count() or 2)), thread_name_prefix="etag")

    # -- buckets

    @staticmethod
    def _bucket_name_ok(name):
        return bool(name) and "/" not in name and not name.startswith(".") and "\0" not in name

    def bucket(self, name):
        """The Bucket for an existing bucket directory; raises NoSuchBucket."""
        if name is None or not self._bucket_name_ok(name):
            raise S3Error(404, "NoSuchBucket", BucketName=name or "")
        path = os.path.join(self.root, name)
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            raise S3Error(404, "NoSuchBucket", BucketName=name)
        ident = (st.st_dev, st.st_ino)
        with self._lock:
            b = self._buckets.get(name)
            if b is None or b.ident != ident:
                if b is not None:
                    b.close()
                b = Bucket(name, path, ident)
                self._buckets[name] = b
        b.load()
        return b

    def bucket_exists(self, name):
        return self._bucket_name_ok(name) and os.path.isdir(os.path.join(self.root, name))

    def create_bucket(self, name):
        if not BUCKET_NAME_RE.match(name) or ".." in name or ".-" in name or "-." in name:
            raise S3Error(400, "InvalidBucketName", BucketName=name)
        try:
            ipaddress.ip_address(name)
            raise S3Error(400, "InvalidBucketName", BucketName=name)
        except ValueError:
            pass
        os.makedirs(os.path.join(self.root, name), exist_ok=True)

    def delete_bucket(self, name):
        b = self.bucket(name)
        with b.lock:
            if b.hashed or self._subtree_nonempty(b.path, True):
                raise S3Error(409, "BucketNotEmpty", BucketName=name)
            b.close()
            shutil.rmtree(b.path, ignore_errors=True)
            with self._lock:
                self._buckets.pop(name, None)
            self._drop_dircache_under(b.path)

    def list_buckets(self):
        out = []
        try:
            entries = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError:
            return out
        for e in entries:
            if self._bucket_name_ok(e.name) and e.is_dir():
                out.append((e.name, e.stat().st_mtime_ns))
        return out

    # -- objects

    def _locate(self, b, key):
        h = b.hashed.get(key)
        if h is not None:
            return os.path.join(b.objdir, h)
        rel = plain_relpath(key)
        if rel is None:
            return None
        return os.path.join(b.path, rel)

    def open_object(self, bucket, key):
        """Open an object for reading; raises NoSuchBucket / NoSuchKey."""
        b = self.bucket(bucket)
        path = self._locate(b, key)
        fd = None
        if path is not None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                fd = None
        if fd is None:
            raise S3Error(404, "NoSuchKey", Key=key)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise S3Error(404, "NoSuchKey", Key=key)
            etag = b.cached_etag(key, st)
            if etag is None:
                etag = '"%s"' % md5_of_fd(fd, st.st_size)
                b.record_etag(key, st, etag)
            return ObjectHandle(fd, st.st_size, st.st_mtime_ns, etag)
        except BaseException:
            os.close(fd)
            raise

    def new_tmp(self, b):
        """A new temporary file in the bucket's reserved dir (same file system as the target)."""
        os.makedirs(b.tmpdir, exist_ok=True)
        path = os.path.join(b.tmpdir, uuid.uuid4().hex)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        return path, fd

    def place(self, b, key, tmp_path, etag):
        """Move a finished temporary file into place as `key` and record its ETag. Returns the
        final stat."""
        st = os.stat(tmp_path)
        rel = plain_relpath(key)
        with b.lock:
            placed = False
            if rel is not None:
                dest = os.path.join(b.path, rel)
                try:
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    os.rename(tmp_path, dest)
                    placed = True
                except OSError as e:
                    # A file where a directory is needed (ENOTDIR/EEXIST) or a directory where
                    # the file should go (EISDIR): store the key hashed instead.
                    if e.errno not in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR,
                                       errno.ENAMETOOLONG, errno.ENOTEMPTY):
                        raise
                if placed:
                    self._drop_dircache_path(b, os.path.dirname(dest))
                    old = b.hashed.get(key)
                    if old is not None:
                        self._remove_hashed(b, key, old)
            if not placed:
                h = key_hash(key)
                os.makedirs(b.objdir, exist_ok=True)
                side_tmp = os.path.join(b.tmpdir, uuid.uuid4().hex + ".json")
                with open(side_tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
                    json.dump({"key": key}, f, ensure_ascii=False)
                # Sidecar first: a crash in between leaves a sidecar without data, ignored.
                os.replace(side_tmp, os.path.join(b.objdir, h + ".json"))
                os.replace(tmp_path, os.path.join(b.objdir, h))
                b.set_hashed(key, h)
            b.record_etag(key, st, etag)
        return st

    def _remove_hashed(self, b, key, h):
        for name in (h, h + ".json"):
            try:
                os.unlink(os.path.join(b.objdir, name))
            except FileNotFoundError:
                pass
        b.set_hashed(key, None)

    def delete_object(self, bucket, key):
        """Delete an object; a missing key is not an error (S3 answers 204 either way)."""
        b = self.bucket(bucket)
        with b.lock:
            h = b.hashed.get(key)
            if h is not None:
                self._remove_hashed(b, key, h)
                b.forget_etag(key)
                return
            rel = plain_relpath(key)
            if rel is None:
                return
            path = os.path.join(b.path, rel)
            try:
                if not os.path.isfile(path):
                    return
                os.unlink(path)
            except OSError:
                return
            b.forget_etag(key)
            # S3 has no directories: prune parents left empty so they list as nothing.
            parent = os.path.dirname(path)
            while parent != b.path and parent.startswith(b.path + os.sep):
                try:
                    os.rmdir(parent)
                except OSError:
                    break
                parent = os.path.dirname(parent)
            self._drop_dircache_path(b, os.path.dirname(path))

    # -- directory cache and walking

    def _drop_dircache_path(self, b, dirpath):
        """Forget cached listings of dirpath and its ancestors up to the bucket root."""
        with self._lock:
            while True:
                self._dircache.pop(dirpath, None)
                if dirpath == b.path or not dirpath.startswith(b.path):
                    break
                dirpath = os.path.dirname(dirpath)

    def _drop_dircache_under(self, path):
        with self._lock:
            for p in [p for p in self._dircache if p == path or p.startswith(path + os.sep)]:
                del self._dircache[p]

    def _dir_entries(self, path, is_bucket_root):
        """(entries, sortkeys) of a directory; entries are (sortkey, name, is_dir) sorted by
        sortkey = name for files, name + '/' for directories."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        cached = self._dircache.get(path)
        if cached is not None and cached[0] == st.st_mtime_ns and cached[1] == st.st_ino:
            return cached[2], cached[3]
        entries = []
        try:
            with os.scandir(path) as it:
                for e in it:
                    name = e.name
                    if is_bucket_root and name == RESERVED:
                        continue
                    try:
                        name.encode("utf-8")
                    except UnicodeEncodeError:
                        continue  # not a UTF-8 name: cannot be an S3 key
                    try:
                        if e.is_dir():
                            entries.append((name + "/", name, True))
                        elif e.is_file():
                            entries.append((name, name, False))
                    except OSError:
                        continue
        except OSError:
            return None
        entries.sort()
        keys = [e[0] for e in entries]
        if time.time_ns() - st.st_mtime_ns > DIRCACHE_RACY_NS:
            with self._lock:
                if len(self._dircache) >= DIRCACHE_MAX:
                    self._dircache.clear()
                self._dircache[path] = (st.st_mtime_ns, st.st_ino, entries, keys)
        return entries, keys

    def _subtree_nonempty(self, path, is_bucket_root=False):
        res = self._dir_entries(path, is_bucket_root)
        if res is None:
            return False
        entries = res[0]
        if any(not is_dir for _, _, is_dir in entries):
            return True
        return any(self._subtree_nonempty(os.path.join(path, name))
                   for _, name, is_dir in entries if is_dir)

    def _walk_plain(self, dirpath, relprefix, prefix, after, delim):
        """Yield (key, kind, path) for plain files under dirpath in key order, keys > after and
        starting with prefix. relprefix is the key prefix of dirpath ('' or 'a/b/'). A
        directory whose keys all roll up into one CommonPrefix yields one SUBTREE item."""
        res = self._dir_entries(dirpath, relprefix == "")
        if res is None:
            return
        entries, keys = res
        start = 0
        if after is not None:
            if after.startswith(relprefix):
                rel_after = after[len(relprefix):]
                start = bisect.bisect_right(keys, rel_after)
                # A directory that contains `after` still has keys past it.
                if start > 0 and entries[start - 1][2] and rel_after.startswith(keys[start - 1]):
                    start -= 1
            elif after > relprefix:
                return
        rel_prefix = None
        if len(prefix) > len(relprefix):
            rel_prefix = prefix[len(relprefix):]
            i = bisect.bisect_left(keys, rel_prefix)
            if i > 0 and entries[i - 1][2] and rel_prefix.startswith(keys[i - 1]):
                i -= 1
            start = max(start, i)
        for idx in range(start, len(entries)):
            sortkey, name, is_dir = entries[idx]
            if rel_prefix is not None and not sortkey.startswith(rel_prefix):
                if is_dir and rel_prefix.startswith(sortkey):
                    pass  # the prefix goes on inside this directory
                elif sortkey > rel_prefix:
                    break
                else:
                    continue
            full = relprefix + sortkey
            path = os.path.join(dirpath, name)
            if is_dir:
                if after is not None and after >= full and not after.startswith(full):
                    continue
                if delim and full.startswith(prefix) and full.find(delim, len(prefix)) >= 0:
                    # Every key below rolls up into the same CommonPrefix: do not descend.
                    if self._subtree_nonempty(path):
                        yield full, self.SUBTREE, path
                    continue
                yield from self._walk_plain(path, full, prefix, after, delim)
            else:
                if after is not None and full <= after:
                    continue
                yield full, self.FILE, path

    @staticmethod
    def _walk_hashed(b, keys, prefix, after):
        i = bisect.bisect_left(keys, prefix)
        if after is not None:
            i = max(i, bisect.bisect_right(keys, after))
        for key in keys[i:]:
            if not key.startswith(prefix):
                break
            h = b.hashed.get(key)
            if h is not None:
                yield key, Store.HASHED, os.path.join(b.objdir, h)

    def list_objects(self, bucket, prefix, delimiter, after, max_keys):
        """S3 listing core shared by V1 and V2.

        Returns (items, truncated): items are ("key", key, size, mtime_ns, etag) or
        ("prefix", common_prefix) in key order, at most max_keys of them; truncated tells
        whether more results follow."""
        b = self.bucket(bucket)
        orig_after = after
        if delimiter and after is not None and after.startswith(prefix):
            j = after.find(delimiter, len(prefix))
            if j >= 0:
                # The marker lies inside a CommonPrefix that was already returned: skip all of
                # it (S3 does not return a CommonPrefix twice across pages).
                after = max(after, after[:j + len(delimiter)] + MAX_DATE)
        if max_keys <= 0:
            return [], False
        merged = heapq.merge(self._walk_plain(b.path, "", prefix, after, delimiter),
                             self._walk_hashed(b, b.hashed_sorted, prefix, after),
                             key=lambda item: item[0])
        items = []
        files = []
        last_cp = None
        last_key = None
        truncated = False
        for key, kind, path in merged:
            if key == last_key:
                continue  # a key moving between plain and hashed storage during this listing
            last_key = key
            if delimiter:
                j = key.find(delimiter, len(prefix))
                if j >= 0:
                    cp = key[:j + len(delimiter)]
                    if cp == last_cp or (orig_after is not None and cp <= orig_after):
                        continue
                    if len(items) >= max_keys:
                        truncated = True
                        break
                    last_cp = cp
                    items.append(["prefix", cp])
                    continue
            if kind == self.SUBTREE:
                continue  # cannot happen: a SUBTREE always rolls up
            if len(items) >= max_keys:
                truncated = True
                break
            item = ["key", key, path]
            items.append(item)
            files.append(item)
        self._fill_object_info(b, files)
        return [tuple(i) for i in items if i[0] == "prefix" or len(i) == 5], truncated

    def _fill_object_info(self, b, files):
        """Turn ["key", key, path] into ["key", key, size, mtime_ns, etag] in place, hashing
        missing ETags in parallel. Objects that vanished meanwhile are left short (dropped)."""
        missing = []
        for item in files:
            key, path = item[1], item[2]
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            etag = b.cached_etag(key, st)
            if etag is None:
                missing.append((item, st))
            else:
                item[2:] = [st.st_size, st.st_mtime_ns, etag]
        if not missing:
            return

        def compute(arg):
            item, st = arg
            key, path = item[1], item[2]
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return
            try:
                st2 = os.fstat(fd)
                etag = '"%s"' % md5_of_fd(fd, st2.st_size)
            finally:
                os.close(fd)
            b.record_etag(key, st2, etag)
            item[2:] = [st2.st_size, st2.st_mtime_ns, etag]

        list(self._hash_pool.map(compute, missing))

    # -- multipart uploads

    def create_upload(self, bucket, key):
        b = self.bucket(bucket)
        upload_id = uuid.uuid4().hex
        d = os.path.join(b.updir, upload_id)
        os.makedirs(d)
        with open(os.path.join(d, "key.json"), "w", encoding="utf-8", errors="surrogateescape") as f:
            json.dump({"key": key}, f, ensure_ascii=False)
        return upload_id

    def upload_dir(self, bucket, key, upload_id):
        b = self.bucket(bucket)
        if not re.fullmatch(r"[0-9a-f]{32}", upload_id or ""):
            raise S3Error(404, "NoSuchUpload", UploadId=upload_id)
        d = os.path.join(b.updir, upload_id)
        try:
            with open(os.path.join(d, "key.json"), "r", encoding="utf-8",
                      errors="surrogateescape") as f:
                if json.load(f)["key"] != key:
                    raise S3Error(404, "NoSuchUpload", UploadId=upload_id)
        except (OSError, ValueError, KeyError):
            raise S3Error(404, "NoSuchUpload", UploadId=upload_id)
        return b, d

    def close(self):
        with self._lock:
            for b in self._buckets.values():
                b.close()
        self._hash_pool.shutdown(wait=False)


# --------------------------------------------------------------------------------------------
# Authentication


def sigv4_signing_key(secret_key, date, region, service):
    k = hmac.new(("AWS4" + secret_key).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def sigv4_canonical_query(raw_query, plus_is_space, exclude=()):
    """Canonical query string: decode each name/value, UriEncode them, sort by name then value."""
    pairs = []
    for raw_name, raw_value in split_query(raw_query):
        name = decode_query_component(raw_name, plus_is_space)
        if name in exclude:
            continue
        value = decode_query_component(raw_value, plus_is_space)
        pairs.append((uri_encode(name.encode("utf-8", "surrogateescape"), False),
                      uri_encode(value.encode("utf-8", "surrogateescape"), False)))
    pairs.sort()
    return "&".join("%s=%s" % p for p in pairs)


def sigv4_canonical_request(method, canonical_uri, canonical_query, header_values,
                            signed_headers, payload_hash):
    """The six-part canonical request. header_values maps a lower-case name to its values."""
    lines = []
    for name in signed_headers:
        values = header_values(name)
        value = ",".join(" ".join(v.split()) for v in values) if values else ""
        lines.append("%s:%s\n" % (name, value))
    return "\n".join([method, canonical_uri, canonical_query, "".join(lines),
                      ";".join(signed_headers), payload_hash])


def sigv4_string_to_sign(amz_date, scope, canonical_request):
    digest = hashlib.sha256(canonical_request.encode("utf-8", "surrogateescape")).hexdigest()
    return "AWS4-HMAC-SHA256\n%s\n%s\n%s" % (amz_date, scope, digest)


def sigv4_signature(signing_key, string_to_sign):
    return hmac.new(signing_key, string_to_sign.encode("utf-8", "surrogateescape"),
                    hashlib.sha256).hexdigest()


def sigv4_chunk_signature(signing_key, amz_date, scope, previous_signature, chunk_sha256_hex):
    """Signature of one aws-chunked chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD)."""
    sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous_signature,
                     EMPTY_SHA256, chunk_sha256_hex])
    return hmac.new(signing_key, sts.encode(), hashlib.sha256).hexdigest()


def v2_string_to_sign(method, content_md5, content_type, date_line, prefixed_headers,
                      resource, raw_query):
    """StringToSign of AWS SigV2 and of the OBS signature (same shape, x-amz- or x-obs-
    headers). prefixed_headers: lower-case name -> list of values; resource: '/bucket/key' as
    sent (encoded); sub-resources from raw_query are appended sorted, values decoded."""
    canon = "".join("%s:%s\n" % (n, ",".join(" ".join(v.split()) for v in prefixed_headers[n]))
                    for n in sorted(prefixed_headers))
    subs = []
    for n, v in split_query(raw_query):
        name = decode_query_component(n, False)
        if name in V2_SUBRESOURCES:
            subs.append((name, decode_query_component(v, False) if v != "" else None))
    subs.sort(key=lambda p: p[0])
    if subs:
        resource += "?" + "&".join(n if v is None else "%s=%s" % (n, v) for n, v in subs)
    return "%s\n%s\n%s\n%s\n%s%s" % (method, content_md5, content_type, date_line, canon, resource)


def v2_signature(secret_key, string_to_sign):
    return base64.b64encode(hmac.new(secret_key.encode(), string_to_sign.encode("utf-8", "surrogateescape"),
                                     hashlib.sha1).digest()).decode()


class AuthResult:
    """What a verified request carries forward to the body reader."""

    def __init__(self, scheme, payload_hash=None, signing_key=None, amz_date=None, scope=None,
                 seed_signature=None):
        self.scheme = scheme
        self.payload_hash = payload_hash
        self.signing_key = signing_key
        self.amz_date = amz_date
        self.scope = scope
        self.seed_signature = seed_signature


class Credential:
    """One accepted access key: its secret, the token it requires (None: any or none) and when
    it stops working (None: never)."""

    __slots__ = ("access_key", "secret_key", "security_token", "expires_at")

    def __init__(self, access_key, secret_key, security_token=None, expires_at=None):
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token
        self.expires_at = expires_at

    def expired(self, now):
        return self.expires_at is not None and now >= self.expires_at


class Auth:
    """Verifies SigV4 (header and presigned), SigV2 (header and presigned) and OBS signatures
    against a table of credentials. The one given on the command line never expires; temporary
    ones added through POST /_admin/credentials may, and then answer 403 ExpiredToken, as OBS
    and AWS do for a stale STS token (see ADMIN API)."""

    def __init__(self, access_key, secret_key, region, security_token):
        self.region = region                # None: accept any region in the scope
        self._lock = threading.Lock()
        self._creds = {access_key: Credential(access_key, secret_key, security_token)}
        self._retired_tokens = set()        # tokens of expired credentials
        self._keys = {}

    def add_credential(self, spec):
        """Admin: add/replace one credential and optionally expire the others (rotation)."""
        if not isinstance(spec, dict):
            raise ValueError("credentials config must be a JSON object")
        unknown = set(spec) - {"access_key", "secret_key", "security_token", "expires_in_s",
                               "expire_others", "expire"}
        if unknown:
            raise ValueError("unknown credential keys: %s" % ", ".join(sorted(unknown)))
        now = time.time()
        with self._lock:
            expire = list(spec.get("expire") or [])
            if spec.get("expire_others"):
                expire += [ak for ak in self._creds if ak != spec.get("access_key")]
            for ak in expire:
                c = self._creds.get(ak)
                if c is not None and not c.expired(now):
                    c.expires_at = now
                    if c.security_token is not None:
                        self._retired_tokens.add(c.security_token)
            if spec.get("access_key"):
                if not spec.get("secret_key"):
                    raise ValueError("secret_key is required with access_key")
                ttl = spec.get("expires_in_s")
                self._creds[spec["access_key"]] = Credential(
                    spec["access_key"], spec["secret_key"], spec.get("security_token"),
                    None if ttl is None else now + float(ttl))
        return self.credentials_json()

    def credentials_json(self):
        now = time.time()
        with self._lock:
            return {"credentials": [
                {"access_key": c.access_key, "expires_at": c.expires_at, "expired": c.expired(now),
                 "has_token": c.security_token is not None}
                for c in self._creds.values()]}

    def _credential(self, access_key):
        """The credential for access_key; 403 InvalidAccessKeyId or ExpiredToken."""
        with self._lock:
            c = self._creds.get(access_key)
        if c is None:
            raise S3Error(403, "InvalidAccessKeyId", AWSAccessKeyId=access_key)
        if c.expired(time.time()):
            raise S3Error(403, "ExpiredToken")
        return c

    def _signing_key(self, secret_key, date, region, service):
        k = (secret_key, date, region, service)
        key = self._keys.get(k)
        if key is None:
            key = sigv4_signing_key(secret_key, date, region, service)
            if len(self._keys) > 64:
                self._keys.clear()
            self._keys[k] = key
        return key

    def _check_token(self, cred, token):
        if cred.security_token is not None and token != cred.security_token:
            if token is not None and token in self._retired_tokens:
                raise S3Error(403, "ExpiredToken")
            raise S3Error(403, "InvalidToken")

    @staticmethod
    def _check_skew(req_time, now):
        if req_time is None or abs(now - req_time) > MAX_SKEW_S:
            raise S3Error(403, "RequestTimeTooSkewed",
                          RequestTime=http_date(req_time) if req_time else "",
                          ServerTime=http_date(now), MaxAllowedSkewMilliseconds=MAX_SKEW_S * 1000)

    def verify(self, req):
        """req: the handler (method, raw_path, raw_query, headers, bucket, vhost, now())."""
        auth = req.headers.get("Authorization")
        if auth is None:
            names = {decode_query_component(n) for n, _ in split_query(req.raw_query)}
            if "X-Amz-Algorithm" in names:
                return self._verify_v4(req, presigned=True)
            if "AWSAccessKeyId" in names and "Signature" in names:
                return self._verify_v2(req, "AWS", presigned=True)
            raise S3Error(403, "AccessDenied")
        auth = auth.strip()
        if auth.startswith("AWS4-HMAC-SHA256 "):
            return self._verify_v4(req, presigned=False, header=auth)
        if auth.startswith("AWS "):
            return self._verify_v2(req, "AWS", header=auth)
        if auth.startswith("OBS "):
            return self._verify_v2(req, "OBS", header=auth)
        raise S3Error(400, "InvalidArgument", "Unsupported Authorization Type",
                      ArgumentName="Authorization", ArgumentValue=auth.split(" ")[0])

    # -- SigV4

    def _verify_v4(self, req, presigned, header=None):
        query = {}
        for n, v in split_query(req.raw_query):
            query.setdefault(decode_query_component(n), decode_query_component(v))
        if presigned:
            if query.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
                raise S3Error(400, "AuthorizationQueryParametersError",
                              "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
            credential = query.get("X-Amz-Credential", "")
            signed = query.get("X-Amz-SignedHeaders", "")
            signature = query.get("X-Amz-Signature", "")
            amz_date = query.get("X-Amz-Date", "")
            token = query.get("X-Amz-Security-Token")
            payload_hash = req.headers.get("x-amz-content-sha256") or "UNSIGNED-PAYLOAD"
        else:
            fields = {}
            for part in header[len("AWS4-HMAC-SHA256 "):].split(","):
                name, _, value = part.strip().partition("=")
                fields[name] = value
            credential = fields.get("Credential")
            signed = fields.get("SignedHeaders")
            signature = fields.get("Signature")
            if not credential or signed is None or not signature:
                raise S3Error(400, "AuthorizationHeaderMalformed")
            amz_date = req.headers.get("x-amz-date")
            token = req.headers.get("x-amz-security-token")
            payload_hash = req.headers.get("x-amz-content-sha256")
            if payload_hash is None:
                raise S3Error(400, "InvalidRequest",
                              "Missing required header for this request: x-amz-content-sha256")
        parts = credential.split("/")
        if len(parts) != 5 or parts[4] != "aws4_request":
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          "The authorization header is malformed; the Credential is mal-formed")
        access_key, date, region, service, _ = parts
        cred = self._credential(access_key)
        if self.region is not None and region != self.region:
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          "The authorization header is malformed; the region '%s' is wrong; "
                          "expecting '%s'" % (region, self.region), Region=self.region)
        now = req.now()
        if amz_date:
            try:
                req_time = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
            except ValueError:
                req_time = None
        else:
            amz_date_hdr = req.headers.get("Date")
            req_time = parse_http_date(amz_date_hdr) if amz_date_hdr else None
            if req_time is not None:
                amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(req_time))
        if req_time is None:
            raise S3Error(403, "AccessDenied",
                          "AWS authentication requires a valid Date or x-amz-date header")
        if presigned:
            try:
                expires = int(query.get("X-Amz-Expires", ""))
            except ValueError:
                raise S3Error(400, "AuthorizationQueryParametersError",
                              "X-Amz-Expires should be a number")
            if now > req_time + expires:
                raise S3Error(403, "AccessDenied", "Request has expired")
            if req_time - now > MAX_SKEW_S:
                raise S3Error(403, "AccessDenied", "Request is not valid yet")
        else:
            self._check_skew(req_time, now)
        if amz_date[:8] != date:
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          "Invalid credential date. Date is not the same as X-Amz-Date.")
        if not (payload_hash in ("UNSIGNED-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                                 "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                                 "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
                or re.fullmatch(r"[0-9a-f]{64}", payload_hash)):
            raise S3Error(400, "InvalidArgument",
                          "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-..., or a "
                          "valid sha256 value.", ArgumentName="x-amz-content-sha256",
                          ArgumentValue=payload_hash)
        signed_headers = [h.strip().lower() for h in signed.split(";") if h.strip()]
        if "host" not in signed_headers:
            raise S3Error(403, "AccessDenied", "Host must be a signed header")
        unsigned = [name.lower() for name in req.headers.keys()
                    if name.lower().startswith("x-amz-") and name.lower() not in signed_headers]
        if unsigned and not presigned:
            raise S3Error(403, "AccessDenied",
                          "There were headers present in the request which were not signed",
                          HeadersNotSigned=", ".join(sorted(set(unsigned))))

        def header_values(name):
            values = req.headers.get_all(name)
            if values is None:
                return None
            # http.client decodes header bytes as latin-1; sign the original UTF-8 text.
            return [v.encode("latin-1", "replace").decode("utf-8", "surrogateescape")
                    for v in values]

        scope = "/".join([date, region, service, "aws4_request"])
        key = self._signing_key(cred.secret_key, date, region, service)
        uris = [req.raw_path]
        normalised = uri_encode(urllib.parse.unquote_to_bytes(req.raw_path), True)
        if normalised != req.raw_path:
            uris.append(normalised)
        exclude = ("X-Amz-Signature",) if presigned else ()
        queries = [sigv4_canonical_query(req.raw_query, True, exclude)]
        if "+" in req.raw_query:
            queries.append(sigv4_canonical_query(req.raw_query, False, exclude))
        ok = False
        for uri in uris:
            for cq in queries:
                creq = sigv4_canonical_request(req.command, uri, cq, header_values,
                                               signed_headers, payload_hash)
                expect = sigv4_signature(key, sigv4_string_to_sign(amz_date, scope, creq))
                if hmac.compare_digest(expect, signature):
                    ok = True
                    break
            if ok:
                break
        if not ok:
            raise S3Error(403, "SignatureDoesNotMatch", AWSAccessKeyId=access_key)
        self._check_token(cred, token)
        return AuthResult("v4", payload_hash=payload_hash, signing_key=key, amz_date=amz_date,
                          scope=scope, seed_signature=signature)

    # -- SigV2 and OBS (HMAC-SHA1)

    def _verify_v2(self, req, flavour, presigned=False, header=None):
        prefix = "x-obs-" if flavour == "OBS" else "x-amz-"
        query = {}
        for n, v in split_query(req.raw_query):
            query.setdefault(decode_query_component(n), decode_query_component(v))
        if presigned:
            access_key = query.get("AWSAccessKeyId", "")
            signature = query.get("Signature", "")
            try:
                expires = int(query.get("Expires", ""))
            except ValueError:
                raise S3Error(403, "AccessDenied", "Query-string authentication requires Expires")
            if req.now() > expires:
                raise S3Error(403, "AccessDenied", "Request has expired")
            date_line = str(expires)
            token = query.get("x-amz-security-token")
        else:
            access_key, _, signature = header.split(" ", 1)[1].strip().rpartition(":")
            if not access_key or not signature:
                raise S3Error(400, "InvalidArgument", "Authorization header is invalid")
            token = req.headers.get(prefix + "security-token")
        cred = self._credential(access_key)
        if not presigned:
            date_hdr = req.headers.get(prefix + "date")
            date_line = "" if date_hdr is not None else (req.headers.get("Date") or "")
            req_time = parse_http_date(date_hdr if date_hdr is not None else date_line)
            self._check_skew(req_time, req.now())
        prefixed = {}
        for name in req.headers.keys():
            lname = name.lower()
            if lname.startswith(prefix) and lname not in prefixed:
                prefixed[lname] = req.headers.get_all(name)
        resource = req.raw_path
        if req.vhost and req.bucket:
            resource = "/" + req.bucket + req.raw_path
        resources = [resource]
        if req.bucket and req.obj_key is None:
            # A bucket-level resource is '/bucket/' (botocore, OBS SDK) whether the URL
            # was '/bucket' or '/bucket/'.
            resources += [r for r in ("/%s/" % req.bucket, "/" + req.bucket) if r != resource]
        ok = False
        for res in resources:
            sts = v2_string_to_sign(req.command, req.headers.get("Content-MD5", ""),
                                    req.headers.get("Content-Type", ""), date_line, prefixed,
                                    res, req.raw_query)
            if hmac.compare_digest(v2_signature(cred.secret_key, sts), signature):
                ok = True
                break
        if not ok:
            raise S3Error(403, "SignatureDoesNotMatch", AWSAccessKeyId=access_key,
                          StringToSign=sts)
        self._check_token(cred, token)
        return AuthResult("v2")


# --------------------------------------------------------------------------------------------
# Request bodies


class BodyReader:
    """Reads a request body framed by Content-Length or HTTP chunked transfer coding, with
    readline() for aws-chunked framing on top."""

    def __init__(self, rfile, length, chunked):
        self.rfile = rfile
        self.remaining = length       # Content-Length mode: bytes left
        self.chunked = chunked
        self.chunk_left = 0
        self.eof = (not chunked) and length == 0
        self._buf = b""

    def _raw_read(self, n):
        if self.eof:
            return b""
        if not self.chunked:
            data = self.rfile.read(min(n, self.remaining))
            if not data:
                raise S3Error(400, "IncompleteBody")
            self.remaining -= len(data)
            if self.remaining == 0:
                self.eof = True
            return data
        if self.chunk_left == 0:
            line = self.rfile.readline(1024)
            if not line.endswith(b"\n"):
                raise S3Error(400, "IncompleteBody")
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise S3Error(400, "InvalidRequest", "Bad chunked transfer coding")
            if size == 0:
                while True:  # trailers
                    line = self.rfile.readline(65536)
                    if line in (b"\r\n", b"\n", b""):
                        break
                self.eof = True
                return b""
            self.chunk_left = size
        data = self.rfile.read(min(n, self.chunk_left))
        if not data:
            raise S3Error(400, "IncompleteBody")
        self.chunk_left -= len(data)
        if self.chunk_left == 0:
            self.rfile.readline(16)  # CRLF after the chunk data
        return data

    def read(self, n):
        if self._buf:
            data, self._buf = self._buf[:n], self._buf[n:]
            return data
        return self._raw_read(n)

    def readline(self, limit):
        while b"\n" not in self._buf and len(self._buf) < limit:
            data = self._raw_read(limit - len(self._buf))
            if not data:
                break
            self._buf += data
        i = self._buf.find(b"\n")
        end = i + 1 if i >= 0 else min(len(self._buf), limit)
        line, self._buf = self._buf[:end], self._buf[end:]
        return line

    def read_exact(self, n):
        out = []
        while n > 0:
            data = self.read(min(n, IO_CHUNK))
            if not data:
                raise S3Error(400, "IncompleteBody")
            out.append(data)
            n -= len(data)
        return b"".join(out)

    @property
    def done(self):
        return self.eof and not self._buf

    def drain(self, limit):
        """Read and discard up to limit bytes; True when the body was consumed entirely."""
        while not self.done:
            if limit <= 0:
                return False
            data = self.read(min(IO_CHUNK, limit))
            if not data:
                break
            limit -= len(data)
        return True


class AwsChunkedReader:
    """Decodes aws-chunked content (boto3/SDK streaming uploads), checking chunk signatures for
    STREAMING-AWS4-HMAC-SHA256-PAYLOAD. Trailers (checksums) are read and ignored."""

    def __init__(self, src, auth, decoded_length):
        self.src = src
        self.signed = auth.payload_hash.startswith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
        self.trailer = auth.payload_hash.endswith("-TRAILER")
        self.auth = auth
        self.prev_sig = auth.seed_signature
        self.decoded_length = decoded_length
        self.total = 0
        self.chunk_left = 0
        self.chunk_sig = None
        self.chunk_hash = None
        self.eof = False

    def _next_chunk(self):
        line = self.src.readline(4096)
        if not line.endswith(b"\n"):
            raise S3Error(400, "IncompleteBody")
        head, _, ext = line.strip().partition(b";")
        try:
            size = int(head, 16)
        except ValueError:
            raise S3Error(400, "InvalidRequest", "Malformed aws-chunked encoding")
        sig = None
        if ext.startswith(b"chunk-signature="):
            sig = ext[len(b"chunk-signature="):].decode("ascii", "replace")
        if self.signed and sig is None:
            raise S3Error(403, "SignatureDoesNotMatch", "Missing chunk signature")
        self.chunk_left = size
        self.chunk_sig = sig
        self.chunk_hash = hashlib.sha256()
        if size == 0:
            self._check_chunk_signature()
            while True:  # trailing headers up to the blank line
                line = self.src.readline(65536)
                if line in (b"\r\n", b"\n", b""):
                    break
            self.eof = True
            if self.decoded_length is not None and self.total != self.decoded_length:
                raise S3Error(400, "IncompleteBody")

    def _check_chunk_signature(self):
        if not self.signed:
            return
        a = self.auth
        expect = sigv4_chunk_signature(a.signing_key, a.amz_date, a.scope, self.prev_sig,
                                       self.chunk_hash.hexdigest())
        if not hmac.compare_digest(expect, self.chunk_sig or ""):
            raise S3Error(403, "SignatureDoesNotMatch", "Chunk signature does not match")
        self.prev_sig = expect

    def read(self, n):
        if self.eof:
            return b""
        if self.chunk_left == 0:
            self._next_chunk()
            if self.eof:
                return b""
        data = self.src.read(min(n, self.chunk_left))
        if not data:
            raise S3Error(400, "IncompleteBody")
        self.chunk_left -= len(data)
        self.total += len(data)
        self.chunk_hash.update(data)
        if self.chunk_left == 0:
            crlf = self.src.readline(16)
            if crlf.strip():
                raise S3Error(400, "InvalidRequest", "Malformed aws-chunked encoding")
            self._check_chunk_signature()
        return data


# --------------------------------------------------------------------------------------------
# HTTP handler


class S3Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "s3server"
    sys_version = ""
    disable_nagle_algorithm = True   # headers and a sendfile body go out as separate writes
    timeout = 300                     # idle keep-alive connections do not pin a thread forever

    # -- plumbing

    def parse_request(self):
        self._expect_100 = False
        return super().parse_request()

    def handle_expect_100(self):
        # Defer "100 Continue" until we start reading the body, so a request refused before
        # that (auth, missing bucket) is answered without inviting the upload.
        self._expect_100 = True
        return True

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            sys.stderr.write("s3server: %s - %s\n" % (self.address_string(), fmt % args))

    def log_request(self, code="-", size="-"):
        pass  # we log once per request in _dispatch

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_OPTIONS(self):
        self._dispatch("OPTIONS")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def now(self):
        return self.server.faults.now()

    def _raw_target(self):
        # self.path has '//' collapsed by http.server (an open-redirect guard); S3 keys may
        # start with '/', so take the target from the request line as received.
        words = self.requestline.split(" ")
        target = words[1] if len(words) >= 2 else self.path
        if target.startswith(("http://", "https://")):
            rest = target.split("://", 1)[1]
            target = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        return target

    def _dispatch(self, method):
        srv = self.server
        self._request_id = srv.new_request_id()
        self._t0 = time.monotonic()
        self._accounted = False
        self._headers_sent = False
        self._op = "OTHER"
        self.bucket = None
        self.obj_key = None
        self._range = None
        self._status = None
        self._body = None
        self._body_started = False
        self.vhost = False
        self._admin = False
        self.auth = None
        self.query = {}
        self.raw_path, self.raw_query = "/", ""
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        self._has_body = "chunked" in te or length != 0
        try:
            if length < 0:
                raise S3Error(400, "InvalidArgument", "Bad Content-Length")
            self._body = BodyReader(self.rfile, max(length, 0), "chunked" in te)
            target = self._raw_target()
            self.raw_path, _, self.raw_query = target.partition("?")
            if self.raw_path == "/_admin" or self.raw_path.startswith("/_admin/"):
                self._admin = True
                self._handle_admin(method)
            else:
                self._handle_s3(method)
        except S3Error as e:
            self._send_error(e)
        except (ConnectionError, socket.timeout, TimeoutError):
            self.close_connection = True
        except Exception:
            sys.stderr.write("s3server: internal error on %s %s\n%s" % (
                method, self.raw_path, traceback.format_exc()))
            if not self._headers_sent:
                try:
                    self._send_error(S3Error(500, "InternalError"))
                except OSError:
                    self.close_connection = True
            else:
                self.close_connection = True
        finally:
            self._finish_body()
            if not srv.quiet and not self._admin:
                sys.stderr.write("s3server: %s %s %s %s %.1fms\n" % (
                    method, self.raw_path, self._op, self._status, (time.monotonic() - self._t0) * 1000))

    def _finish_body(self):
        """Keep the connection usable after a response that did not read the request body."""
        if not self._has_body or self._body is None or self._body.done or self.close_connection:
            return
        if self._expect_100 and not self._body_started:
            # The client waits for 100 Continue that will not come; it may still send the
            # body later, so the connection cannot be reused safely.
            self.close_connection = True
            return
        try:
            if not self._body.drain(DRAIN_LIMIT):
                self.close_connection = True
        except (S3Error, OSError):
            self.close_connection = True

    def body(self):
        """The request body reader; sends the deferred 100 Continue on first use."""
        if self._expect_100 and not self._body_started:
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self._body_started = True
        return self._body

    def _will_close_after_unread_body(self):
        """Before sending a response: decide whether the unread body forces a close."""
        b = self._body
        if not self._has_body or b is None or b.done:
            return
        if self._expect_100 and not self._body_started:
            self.close_connection = True
        elif b.chunked or b.remaining > DRAIN_LIMIT:
            self.close_connection = True

    def _send_response(self, status, headers=(), body=b"", body_len=None, account_bytes=None):
        """Write the status line and headers, plus `body` in the same write. When the body is
        streamed by the caller, pass body_len (the Content-Length) and body=b''; account_bytes
        is what the caller will really send when that differs (an injected short body)."""
        if body_len is None:
            body_len = len(body)
        self._will_close_after_unread_body()
        srv = self.server
        obs = srv.faults.flavour == "obs"
        sent_bytes = 0 if self.command == "HEAD" else (
            body_len if account_bytes is None else account_bytes)
        if not self._admin and not self._accounted:
            self._accounted = True
            srv.stats.record(self._op, self.bucket, self.obj_key, self._range, status, sent_bytes,
                             self._request_id, self.query.get("prefix", ""))
        self._status = status
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Status %d" % status
        lines = ["HTTP/1.1 %d %s" % (status, reason),
                 "Date: " + http_date(self.now()),
                 "Server: " + ("OBS" if obs else "AmazonS3")]
        if not self._admin:
            rid = "x-obs-request-id" if obs else "x-amz-request-id"
            lines.append("%s: %s" % (rid, self._request_id))
            lines.append("%s: %s" % ("x-obs-id-2" if obs else "x-amz-id-2",
                                     base64.b64encode(self._request_id.encode() * 3).decode()))
        for name, value in headers:
            lines.append("%s: %s" % (name, value))
        if status not in (204, 304) and status >= 200:
            lines.append("Content-Length: %d" % body_len)
        if self.close_connection:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")
        if body and self.command != "HEAD":
            data += body
        self._headers_sent = True
        self.wfile.write(data)

    def _xml(self, root, inner, status=200, headers=()):
        ns = OBS_NS if self.server.faults.flavour == "obs" else S3_NS
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<%s xmlns="%s">%s</%s>'
                % (root, ns, "".join(inner), root)).encode("utf-8", "surrogateescape")
        self._send_response(status, [("Content-Type", "application/xml")] + list(headers), body)

    def _send_error(self, err):
        if self._headers_sent:
            self.close_connection = True
            return
        resource = urllib.parse.unquote(self.raw_path or "/")
        parts = ["<Code>%s</Code><Message>%s</Message>" % (xml_escape(err.code), xml_escape(err.message))]
        for name, value in err.fields.items():
            if value is None:
                continue
            parts.append("<%s>%s</%s>" % (name, xml_escape(value), name))
        parts.append("<Resource>%s</Resource><RequestId>%s</RequestId><HostId>%s</HostId>" % (
            xml_escape(resource), self._request_id,
            base64.b64encode(self._request_id.encode() * 3).decode()))
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error>%s</Error>' % "".join(parts)).encode(
            "utf-8", "surrogateescape")
        headers = [("Content-Type", "application/xml")] + list(err.headers.items())
        if self.command == "HEAD":
            body = b""  # HEAD errors carry no body; clients map by status
        self._send_response(err.status, headers, body)

    # -- admin API (unsigned, not counted)

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self._send_response(status, [("Content-Type", "application/json")], body)

    def _handle_admin(self, method):
        srv = self.server
        path = self.raw_path.rstrip("/")
        query = dict((decode_query_component(n), decode_query_component(v))
                     for n, v in split_query(self.raw_query))
        if path == "/_admin/stats" and method == "GET":
            include = query.get("requests", "1") not in ("0", "false", "no")
            return self._json(200, srv.stats.snapshot(include))
        if path == "/_admin/reset" and method == "POST":
            srv.stats.reset()
            return self._json(200, {"ok": True})
        if path == "/_admin/faults":
            if method == "GET":
                return self._json(200, srv.faults.to_json())
            if method in ("POST", "PUT"):
                data = self._read_all_small()
                try:
                    cfg = json.loads(data.decode() or "{}")
                    srv.faults.configure(cfg)
                except (ValueError, TypeError, re.error) as e:
                    return self._json(400, {"error": str(e)})
                return self._json(200, srv.faults.to_json())
        if path == "/_admin/credentials":
            if method == "GET":
                return self._json(200, srv.auth.credentials_json())
            if method in ("POST", "PUT"):
                data = self._read_all_small()
                try:
                    out = srv.auth.add_credential(json.loads(data.decode() or "{}"))
                except (ValueError, TypeError) as e:
                    return self._json(400, {"error": str(e)})
                return self._json(200, out)
        if path == "/_admin/health" and method == "GET":
            return self._json(200, {"ok": True, "root": srv.store.root})
        return self._json(404, {"error": "unknown admin endpoint %s %s" % (method, path)})

    def _read_all_small(self, limit=16 << 20):
        out = []
        total = 0
        reader = self.body()
        while True:
            data = reader.read(IO_CHUNK)
            if not data:
                break
            total += len(data)
            if total > limit:
                raise S3Error(400, "EntityTooLarge", "Request body too large")
            out.append(data)
        return b"".join(out)

    # -- S3

    def _resolve(self, path):
        """(bucket, key, vhost) from Host and the decoded path."""
        srv = self.server
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            hostname = host.split("]")[0] + "]"
        else:
            hostname = host.rsplit(":", 1)[0] if ":" in host else host
        vbucket = srv.vhost_bucket(hostname, self.command, path)
        if vbucket is not None:
            key = path[1:] if path.startswith("/") else path
            return vbucket, (key if key != "" else None), True
        if path in ("", "/"):
            return None, None, False
        rest = path[1:] if path.startswith("/") else path
        bucket, sep, key = rest.partition("/")
        if not sep or key == "":
            return bucket, None, False
        return bucket, key, False

    @staticmethod
    def _classify(method, bucket, key, query):
        if bucket is None:
            return "OTHER"
        if key is None:
            if method == "GET":
                return "OTHER" if BUCKET_SUBRESOURCES & set(query) else "LIST"
            if method == "HEAD":
                return "HEAD"
            if method == "PUT":
                return "PUT" if not BUCKET_SUBRESOURCES & set(query) else "OTHER"
            if method == "DELETE":
                return "DELETE" if not BUCKET_SUBRESOURCES & set(query) else "OTHER"
            return "OTHER"
        if method == "GET":
            return "OTHER" if (OBJECT_SUBRESOURCES & set(query)) or "uploadId" in query else "GET"
        if method == "HEAD":
            return "HEAD"
        if method == "PUT":
            return "OTHER" if OBJECT_SUBRESOURCES & set(query) else "PUT"
        if method == "DELETE":
            return "OTHER" if "uploadId" in query else "DELETE"
        return "OTHER"

    def _handle_s3(self, method):
        srv = self.server
        latency = srv.faults.latency_ms
        if latency:
            time.sleep(latency / 1000.0)
        try:
            path = urllib.parse.unquote_to_bytes(self.raw_path).decode("utf-8")
        except UnicodeDecodeError:
            raise S3Error(400, "InvalidURI")
        query = {}
        for n, v in split_query(self.raw_query):
            query.setdefault(decode_query_component(n), decode_query_component(v))
        self.query = query
        bucket, key, vhost = self._resolve(path)
        self.bucket, self.obj_key, self.vhost = bucket, key, vhost
        self._op = self._classify(method, bucket, key, query)
        if key is not None and len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise S3Error(400, "KeyTooLongError", Size=len(key.encode("utf-8")),
                          MaxSizeAllowed=MAX_KEY_BYTES)
        self.auth = srv.auth.verify(self)
        rule = srv.faults.pick(self._op, bucket, key if key is not None else query.get("prefix", ""),
                               body_fault=False)
        if rule is not None:
            headers = {}
            if rule.retry_after is not None:
                headers["Retry-After"] = str(rule.retry_after)
            raise S3Error(rule.status, rule.code, rule.message, headers=headers)

        if bucket is None:
            if method == "GET":
                return self._list_buckets()
            raise S3Error(405, "MethodNotAllowed", Method=method, ResourceType="SERVICE")
        if key is None:
            return self._bucket_op(method, bucket, query)
        return self._object_op(method, bucket, key, query)

    # -- bucket operations

    def _bucket_op(self, method, bucket, query):
        store = self.server.store
        subs = BUCKET_SUBRESOURCES & set(query)
        if method == "GET":
            if "location" in query:
                store.bucket(bucket)
                region = self.server.auth.region or "us-east-1"
                value = "" if region == "us-east-1" else xml_escape(region)
                return self._xml("LocationConstraint", [value])
            if subs:
                store.bucket(bucket)
                raise S3Error(501, "NotImplemented", Subresource=",".join(sorted(subs)))
            return self._list_objects(bucket, query)
        if method == "HEAD":
            store.bucket(bucket)
            return self._send_response(200, [("x-amz-bucket-region",
                                              self.server.auth.region or "us-east-1")])
        if method == "PUT":
            if subs:
                store.bucket(bucket)
                raise S3Error(501, "NotImplemented", Subresource=",".join(sorted(subs)))
            # The optional CreateBucketConfiguration body is read and ignored.
            self._read_all_small()
            store.create_bucket(bucket)
            return self._send_response(200, [("Location", "/" + bucket)])
        if method == "DELETE":
            if subs:
                store.bucket(bucket)
                raise S3Error(501, "NotImplemented", Subresource=",".join(sorted(subs)))
            store.delete_bucket(bucket)
            return self._send_response(204)
        if method == "POST" and "delete" in query:
            return self._delete_objects(bucket)
        raise S3Error(405, "MethodNotAllowed", Method=method, ResourceType="BUCKET")

    def _list_buckets(self):
        items = ["<Owner><ID>%s</ID><DisplayName>%s</DisplayName></Owner><Buckets>" % (OWNER_ID, OWNER_NAME)]
        for name, mtime_ns in self.server.store.list_buckets():
            items.append("<Bucket><Name>%s</Name><CreationDate>%s</CreationDate></Bucket>"
                         % (xml_escape(name), iso_date(mtime_ns)))
        items.append("</Buckets>")
        return self._xml("ListAllMyBucketsResult", items)

    def _list_objects(self, bucket, query):
        v2 = query.get("list-type") == "2"
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "") or None
        encoding = query.get("encoding-type")
        if encoding is not None and encoding != "url":
            raise S3Error(400, "InvalidArgument", "Invalid Encoding Method specified in Request",
                          ArgumentName="encoding-type", ArgumentValue=encoding)
        raw_max = query.get("max-keys")
        if raw_max is None:
            max_keys = MAX_LIST_KEYS
        else:
            try:
                max_keys = int(raw_max)
                if max_keys < 0:
                    raise ValueError
            except ValueError:
                raise S3Error(400, "InvalidArgument", "Provided max-keys not an integer or within "
                              "integer range", ArgumentName="max-keys", ArgumentValue=raw_max)
            max_keys = min(max_keys, MAX_LIST_KEYS)
        if self.server.faults.max_keys_cap:
            # Small pages make paging (and its markers) cheap to test.
            max_keys = min(max_keys, self.server.faults.max_keys_cap)
        token = query.get("continuation-token") if v2 else None
        start_after = query.get("start-after") if v2 else None
        marker = None if v2 else query.get("marker")
        if v2 and token is not None:
            try:
                raw = base64.urlsafe_b64decode(token.encode("ascii") + b"=" * (-len(token) % 4))
                if not raw.startswith(b"s3server:"):
                    raise ValueError
                after = raw[len(b"s3server:"):].decode("utf-8")
            except (ValueError, binascii.Error, UnicodeError):
                raise S3Error(400, "InvalidArgument", "The continuation token provided is incorrect",
                              ArgumentName="continuation-token", ArgumentValue=token)
        elif v2:
            after = start_after or None
        else:
            after = marker or None
        faults = self.server.faults
        # OBS parallel file system: directories are real, and listing "dir/" returns the
        # directory itself as a first, empty Contents entry (edge case B09).
        pfs_self = (faults.pfs and prefix.endswith(delimiter or "/") and max_keys > 0
                    and (after is None or after < prefix))
        if pfs_self:
            items, truncated = self.server.store.list_objects(bucket, prefix, delimiter, after,
                                                              max(max_keys - 1, 1))
            if items and items[0][0] == "key" and items[0][1] == prefix:
                pfs_self = False  # a real marker object is there already
            elif not items:
                pfs_self = False  # no such directory
            elif max_keys == 1:
                items, truncated = [], True
        else:
            items, truncated = self.server.store.list_objects(bucket, prefix, delimiter, after,
                                                              max_keys)
        if pfs_self:
            items = [("key", prefix, 0, time.time_ns(), '"%s"' % hashlib.md5(b"").hexdigest())] \
                + list(items)

        enc = url_encode_key if encoding == "url" else (lambda s: s)
        fetch_owner = (not v2) or query.get("fetch-owner", "").lower() == "true"
        head = ["<Name>%s</Name>" % xml_escape(bucket),
                "<Prefix>%s</Prefix>" % xml_escape(enc(prefix))]
        if v2:
            head.append("<MaxKeys>%d</MaxKeys>" % max_keys)
            head.append("<KeyCount>%d</KeyCount>" % len(items))
        else:
            head.append("<Marker>%s</Marker>" % xml_escape(enc(marker or "")))
            head.append("<MaxKeys>%d</MaxKeys>" % max_keys)
        if delimiter:
            head.append("<Delimiter>%s</Delimiter>" % xml_escape(enc(delimiter)))
        if encoding == "url":
            head.append("<EncodingType>url</EncodingType>")
        head.append("<IsTruncated>%s</IsTruncated>" % ("true" if truncated else "false"))
        last = items[-1][1] if items else None
        if v2:
            if token is not None:
                head.append("<ContinuationToken>%s</ContinuationToken>" % xml_escape(token))
            elif start_after is not None:
                head.append("<StartAfter>%s</StartAfter>" % xml_escape(enc(start_after)))
            if truncated and last is not None:
                # Unpadded URL-safe base64: the token can go into a query string verbatim.
                next_token = base64.urlsafe_b64encode(
                    b"s3server:" + last.encode("utf-8")).decode().rstrip("=")
                head.append("<NextContinuationToken>%s</NextContinuationToken>" % next_token)
        elif truncated and delimiter and last is not None and not faults.omit_next_marker:
            # AWS returns NextMarker only when a delimiter was given; otherwise the client
            # continues from the last Key (or CommonPrefix). The omit_next_marker fault
            # leaves it out always, as some S3-compatible servers do.
            head.append("<NextMarker>%s</NextMarker>" % xml_escape(enc(last)))
        owner = "<Owner><ID>%s</ID><DisplayName>%s</DisplayName></Owner>" % (OWNER_ID, OWNER_NAME)
        contents = []
        prefixes = []
        for item in items:
            if item[0] == "prefix":
                prefixes.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>"
                                % xml_escape(enc(item[1])))
            else:
                _, key, size, mtime_ns, etag = item
                contents.append("<Contents><Key>%s</Key><LastModified>%s</LastModified>"
                                "<ETag>%s</ETag><Size>%d</Size>%s<StorageClass>STANDARD"
                                "</StorageClass></Contents>"
                                % (xml_escape(enc(key)), iso_date(mtime_ns), xml_escape(etag),
                                   size, owner if fetch_owner else ""))
        return self._xml("ListBucketResult", head + contents + prefixes)

    def _delete_objects(self, bucket):
        store = self.server.store
        store.bucket(bucket)
        data = self._read_all_small()
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            raise S3Error(400, "MalformedXML")
        quiet = False
        keys = []
        for el in root:
            tag = el.tag.split("}")[-1]
            if tag == "Quiet":
                quiet = (el.text or "").strip().lower() == "true"
            elif tag == "Object":
                for sub in el:
                    if sub.tag.split("}")[-1] == "Key":
                        keys.append(sub.text or "")
        out = []
        for key in keys:
            store.delete_object(bucket, key)
            if not quiet:
                out.append("<Deleted><Key>%s</Key></Deleted>" % xml_escape(key))
        return self._xml("DeleteResult", out)

    # -- object operations

    def _object_op(self, method, bucket, key, query):
        subs = OBJECT_SUBRESOURCES & set(query)
        if subs and method in ("GET", "PUT", "DELETE", "POST"):
            self.server.store.bucket(bucket)
            raise S3Error(501, "NotImplemented", Subresource=",".join(sorted(subs)))
        if method in ("GET", "HEAD"):
            if "uploadId" in query:
                raise S3Error(501, "NotImplemented", "ListParts is not implemented")
            return self._get_object(bucket, key, query, head=(method == "HEAD"))
        if method == "PUT":
            if "uploadId" in query or "partNumber" in query:
                return self._upload_part(bucket, key, query)
            if self.headers.get("x-amz-copy-source") is not None:
                return self._copy_object(bucket, key)
            return self._put_object(bucket, key)
        if method == "DELETE":
            if "uploadId" in query:
                return self._abort_upload(bucket, key, query["uploadId"])
            self.server.store.delete_object(bucket, key)
            return self._send_response(204)
        if method == "POST":
            if "uploads" in query:
                upload_id = self.server.store.create_upload(bucket, key)
                self._read_all_small()
                return self._xml("InitiateMultipartUploadResult", [
                    "<Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>"
                    % (xml_escape(bucket), xml_escape(key), upload_id)])
            if "uploadId" in query:
                return self._complete_upload(bucket, key, query["uploadId"])
        raise S3Error(405, "MethodNotAllowed", Method=method, ResourceType="OBJECT")

    def _check_conditions(self, etag, mtime_s):
        """RFC 7232 order as S3 applies it: If-Match, else If-Unmodified-Since (412); then
        If-None-Match, else If-Modified-Since (304). Returns True for 304."""
        h = self.headers
        im, ius = h.get("If-Match"), h.get("If-Unmodified-Since")
        inm, ims = h.get("If-None-Match"), h.get("If-Modified-Since")
        if im is not None:
            if not etag_matches(im, etag):
                raise S3Error(412, "PreconditionFailed", Condition="If-Match")
        elif ius is not None:
            t = parse_http_date(ius)
            if t is not None and mtime_s > t:
                raise S3Error(412, "PreconditionFailed", Condition="If-Unmodified-Since")
        if inm is not None:
            return etag_matches(inm, etag)
        if ims is not None:
            t = parse_http_date(ims)
            if t is not None and t <= self.now() and mtime_s <= t:
                return True
        return False

    def _get_object(self, bucket, key, query, head):
        obj = self.server.store.open_object(bucket, key)
        try:
            mtime_s = obj.mtime_ns // 10**9
            base = [("ETag", obj.etag), ("Last-Modified", http_date(mtime_s))]
            if self._check_conditions(obj.etag, mtime_s):
                return self._send_response(304, base)
            size = obj.size
            status, start, length = 200, 0, size
            rng = self.headers.get("Range")
            headers = [("Accept-Ranges", "bytes"), ("Content-Type", "application/octet-stream")] + base
            if rng is not None:
                self._range = rng
                r = parse_range(rng, size)
                if r == "unsatisfiable":
                    raise S3Error(416, "InvalidRange", headers={"Content-Range": "bytes */%d" % size},
                                  RangeRequested=rng, ActualObjectSize=size)
                if r is not None:
                    status, start, length = 206, r[0], r[1] - r[0] + 1
                    headers.append(("Content-Range", "bytes %d-%d/%d" % (r[0], r[1], size)))
            for param, header in RESPONSE_OVERRIDES.items():
                if param in query:
                    headers = [(n, v) for n, v in headers if n != header]
                    headers.append((header, query[param]))
            headers.append(("x-amz-storage-class", "STANDARD"))
            if head:
                return self._send_response(status, headers, body_len=length)
            self._send_object_body(status, headers, obj.fd, start, length)
        finally:
            obj.close()

    def _send_object_body(self, status, headers, fd, offset, length):
        srv = self.server
        rule = srv.faults.pick(self._op, self.bucket, self.obj_key, body_fault=True) if length else None
        bps = srv.faults.bandwidth_bps
        limit = length
        if rule is not None:
            limit = min(length, rule.reset_after_bytes if rule.reset_after_bytes is not None
                        else rule.short_body_bytes)
        if rule is None and not bps and length <= SMALL_BODY:
            data = os.pread(fd, length, offset)
            if len(data) != length:  # the file shrank under us (someone truncated it in place)
                self.close_connection = True
                raise S3Error(500, "InternalError", "object changed while being read")
            return self._send_response(status, headers, data)
        # Content-Length announces the whole body; accounting records what we will send.
        self._send_response(status, headers, body_len=length, account_bytes=limit)
        sent = self._copy_fd(fd, offset, limit, bps)
        if rule is not None:
            self._abort_connection(rst=rule.reset_after_bytes is not None)
        elif sent != length:
            self.close_connection = True

    def _copy_fd(self, fd, offset, count, bps):
        sock = self.connection
        if count <= 0:
            return 0
        if not bps:
            with open(fd, "rb", buffering=0, closefd=False) as f:
                return sock.sendfile(f, offset, count)
        # Bandwidth cap: pace 1/20 s worth of bytes at a time.
        chunk = max(4096, min(IO_CHUNK, bps // 20))
        t0 = time.monotonic()
        sent = 0
        while sent < count:
            data = os.pread(fd, min(chunk, count - sent), offset + sent)
            if not data:
                break
            sock.sendall(data)
            sent += len(data)
            ahead = sent / bps - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        return sent

    def _abort_connection(self, rst):
        """End the connection mid-body: RST (SO_LINGER 0 + close) or a clean FIN."""
        self.close_connection = True
        sock = self.connection
        try:
            if rst:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.rfile.close()  # drop the makefile reference so close() really closes
                sock.close()
            else:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _body_reader(self):
        """The decoded request body (aws-chunked unwrapped when the client used it)."""
        raw = self.body()
        ph = getattr(self.auth, "payload_hash", None) or ""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if ph.startswith("STREAMING-") or "aws-chunked" in enc:
            if not ph.startswith("STREAMING-"):
                raise S3Error(400, "InvalidArgument", "aws-chunked requires a STREAMING payload hash")
            decoded = self.headers.get("x-amz-decoded-content-length")
            try:
                decoded = int(decoded) if decoded is not None else None
            except ValueError:
                raise S3Error(400, "InvalidArgument", "Bad x-amz-decoded-content-length")
            return AwsChunkedReader(raw, self.auth, decoded)
        if not self._has_body and self.command == "PUT" and \
                self.headers.get("Content-Length") is None:
            raise S3Error(411, "MissingContentLength")
        return raw

    def _receive_to_tmp(self, b):
        """Stream the request body to a temp file. Returns (tmp_path, md5 hex, size); checks
        Content-MD5 and a hex x-amz-content-sha256."""
        store = self.server.store
        reader = self._body_reader()
        ph = getattr(self.auth, "payload_hash", None) or ""
        want_sha = re.fullmatch(r"[0-9a-f]{64}", ph) is not None
        md5 = hashlib.md5()
        sha = hashlib.sha256() if want_sha else None
        path, fd = store.new_tmp(b)
        size = 0
        ok = False
        try:
            while True:
                data = reader.read(IO_CHUNK)
                if not data:
                    break
                md5.update(data)
                if sha is not None:
                    sha.update(data)
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                size += len(data)
            if sha is not None and sha.hexdigest() != ph:
                raise S3Error(400, "XAmzContentSHA256Mismatch", ClientComputedContentSHA256=ph,
                              S3ComputedContentSHA256=sha.hexdigest())
            cmd5 = self.headers.get("Content-MD5")
            if cmd5 is not None:
                try:
                    want = base64.b64decode(cmd5, validate=True)
                except (binascii.Error, ValueError):
                    raise S3Error(400, "InvalidDigest")
                if len(want) != 16:
                    raise S3Error(400, "InvalidDigest")
                if want != md5.digest():
                    raise S3Error(400, "BadDigest")
            ok = True
        finally:
            os.close(fd)
            if not ok:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return path, md5.hexdigest(), size

    def _put_object(self, bucket, key):
        store = self.server.store
        b = store.bucket(bucket)
        path, md5hex, _ = self._receive_to_tmp(b)
        etag = '"%s"' % md5hex
        try:
            store.place(b, key, path, etag)
        except BaseException:
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        return self._send_response(200, [("ETag", etag)])

    def _copy_object(self, bucket, key):
        store = self.server.store
        b = store.bucket(bucket)
        src = urllib.parse.unquote(self.headers.get("x-amz-copy-source").split("?")[0])
        src = src[1:] if src.startswith("/") else src
        sbucket, _, skey = src.partition("/")
        if not skey:
            raise S3Error(400, "InvalidArgument", "Copy Source must mention the source bucket and key",
                          ArgumentName="x-amz-copy-source")
        self._read_all_small()
        obj = store.open_object(sbucket, skey)
        try:
            path, fd = store.new_tmp(b)
            try:
                offset = 0
                while offset < obj.size:
                    n = os.sendfile(fd, obj.fd, offset, min(obj.size - offset, 1 << 30))
                    if n == 0:
                        break
                    offset += n
            finally:
                os.close(fd)
            etag = obj.etag
        finally:
            obj.close()
        st = store.place(b, key, path, etag)
        return self._xml("CopyObjectResult", ["<LastModified>%s</LastModified><ETag>%s</ETag>"
                                              % (iso_date(st.st_mtime_ns), xml_escape(etag))])

    def _upload_part(self, bucket, key, query):
        store = self.server.store
        upload_id = query.get("uploadId", "")
        try:
            part = int(query.get("partNumber", ""))
            if not 1 <= part <= 10000:
                raise ValueError
        except ValueError:
            raise S3Error(400, "InvalidArgument", "Part number must be an integer between 1 and 10000",
                          ArgumentName="partNumber")
        b, d = store.upload_dir(bucket, key, upload_id)
        path, md5hex, _ = self._receive_to_tmp(b)
        os.replace(path, os.path.join(d, "%05d" % part))
        with open(os.path.join(d, "%05d.md5" % part), "w") as f:
            f.write(md5hex)
        return self._send_response(200, [("ETag", '"%s"' % md5hex)])

    def _abort_upload(self, bucket, key, upload_id):
        _, d = self.server.store.upload_dir(bucket, key, upload_id)
        shutil.rmtree(d, ignore_errors=True)
        return self._send_response(204)

    def _complete_upload(self, bucket, key, upload_id):
        store = self.server.store
        b, d = store.upload_dir(bucket, key, upload_id)
        data = self._read_all_small()
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            raise S3Error(400, "MalformedXML")
        parts = []
        for el in root:
            if el.tag.split("}")[-1] != "Part":
                continue
            num, etag = None, None
            for sub in el:
                tag = sub.tag.split("}")[-1]
                if tag == "PartNumber":
                    num = int((sub.text or "0").strip())
                elif tag == "ETag":
                    etag = (sub.text or "").strip().strip('"')
            parts.append((num, etag))
        if not parts:
            raise S3Error(400, "MalformedXML")
        nums = [p[0] for p in parts]
        if nums != sorted(nums) or len(set(nums)) != len(nums):
            raise S3Error(400, "InvalidPartOrder")
        digests = []
        sizes = []
        for num, etag in parts:
            try:
                with open(os.path.join(d, "%05d.md5" % num)) as f:
                    have = f.read().strip()
                size = os.path.getsize(os.path.join(d, "%05d" % num))
            except (OSError, TypeError):
                raise S3Error(400, "InvalidPart", PartNumber=num, ETag=etag)
            if etag != have:
                raise S3Error(400, "InvalidPart", PartNumber=num, ETag=etag)
            digests.append(binascii.unhexlify(have))
            sizes.append(size)
        for num, size in zip(nums[:-1], sizes[:-1]):
            if size < MIN_PART_SIZE:
                raise S3Error(400, "EntityTooSmall", ProposedSize=size, MinSizeAllowed=MIN_PART_SIZE,
                              PartNumber=num)
        path, fd = store.new_tmp(b)
        try:
            for num in nums:
                with open(os.path.join(d, "%05d" % num), "rb") as src:
                    while True:
                        chunk = src.read(IO_CHUNK)
                        if not chunk:
                            break
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        etag = '"%s-%d"' % (hashlib.md5(b"".join(digests)).hexdigest(), len(parts))
        store.place(b, key, path, etag)
        shutil.rmtree(d, ignore_errors=True)
        location = "http://%s/%s/%s" % (self.headers.get("Host", ""), bucket,
                                        urllib.parse.quote(key, safe="/"))
        return self._xml("CompleteMultipartUploadResult", [
            "<Location>%s</Location><Bucket>%s</Bucket><Key>%s</Key><ETag>%s</ETag>"
            % (xml_escape(location), xml_escape(bucket), xml_escape(key), xml_escape(etag))])


# --------------------------------------------------------------------------------------------
# Server


class S3Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, address, store, auth, faults, quiet, vhost_domain=None):
        host = address[0]
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.store = store
        self.auth = auth
        self.faults = faults
        self.stats = Stats()
        self.quiet = quiet
        self.vhost_domain = vhost_domain.lower().lstrip(".") if vhost_domain else None
        self._rid_prefix = random.getrandbits(32)
        self._rid_counter = itertools.count(1)
        super().__init__(address, S3Handler)

    def server_bind(self):
        # HTTPServer.server_bind calls getfqdn(), a reverse DNS lookup that can stall.
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def new_request_id(self):
        return "%08X%08X" % (self._rid_prefix, next(self._rid_counter) & 0xFFFFFFFF)

    def vhost_bucket(self, hostname, method, path):
        """Bucket named by a virtual-hosted-style Host, or None for path style."""
        if not hostname or hostname.startswith("["):
            return None
        if self.vhost_domain is not None:
            suffix = "." + self.vhost_domain
            return hostname[:-len(suffix)] if hostname.endswith(suffix) else None
        try:
            ipaddress.ip_address(hostname)
            return None
        except ValueError:
            pass
        labels = hostname.split(".")
        if len(labels) < 2:
            return None
        # Longest leading run of labels that names an existing bucket (names may hold dots);
        # a host like s3.local without a bucket 's3' stays path style.
        for i in range(len(labels) - 1, 0, -1):
            cand = ".".join(labels[:i])
            if self.store.bucket_exists(cand):
                return cand
        if method == "PUT" and path in ("", "/"):
            return labels[0]  # CreateBucket in virtual-hosted style
        return None

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, socket.timeout, TimeoutError)):
            return
        super().handle_error(request, client_address)


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Local S3-compatible server for hoardfs tests.")
    ap.add_argument("--root", required=True, help="directory holding one subdirectory per bucket")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", help="write the listening port here (atomically)")
    ap.add_argument("--access-key", default=None, help="default " + DEFAULT_ACCESS_KEY)
    ap.add_argument("--secret-key", default=None, help="default: the test secret")
    ap.add_argument("--region", default=None,
                    help="enforce this region in signatures (default: accept any region)")
    ap.add_argument("--security-token", default=None,
                    help="require this x-amz-security-token (default: accept any or none)")
    ap.add_argument("--vhost-domain", default=None,
                    help="virtual-hosted style only for Host = BUCKET.DOMAIN (default: a Host "
                         "whose leading labels name an existing bucket)")
    ap.add_argument("--flavour", choices=("s3", "obs"), default="s3",
                    help="obs: OBS XML namespace and x-obs-* response headers")
    ap.add_argument("--bucket", action="append", default=[],
                    help="create this bucket at startup (repeatable)")
    ap.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = ap.parse_args(argv)
    if (args.access_key is None) != (args.secret_key is None):
        ap.error("--access-key and --secret-key go together")

    store = Store(args.root)
    for name in args.bucket:
        store.create_bucket(name)
    auth = Auth(args.access_key or DEFAULT_ACCESS_KEY, args.secret_key or DEFAULT_SECRET_KEY,
                args.region, args.security_token)
    faults = Faults(args.flavour)
    server = S3Server((args.host, args.port), store, auth, faults, args.quiet, args.vhost_domain)
    port = server.server_address[1]

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.port_file:
        write_port_file(args.port_file, port)
    host = args.host if ":" not in args.host else "[%s]" % args.host
    print("s3server listening on http://%s:%d" % (host, port), flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except SystemExit:
        pass
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
