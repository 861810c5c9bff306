# SPDX-License-Identifier: MIT
"""s3client: the smallest S3 client the benchmark needs, and the server's own ceiling.

It signs GET and ListObjects (V1) requests with SigV4 (UNSIGNED-PAYLOAD) over one
keep-alive http.client connection per thread of work. The benchmark uses it for two
things only: listing every dataset once before any timing (the server computes and caches
ETags on first listing, which must not be charged to the first mount), and measuring how
fast the Python server itself answers GETs with no FUSE layer in between (`ceiling`).
It is not a general S3 client: keys are assumed to be plain ASCII paths, and there are no
retries.
"""

import datetime
import hashlib
import hmac
import http.client
import multiprocessing
import time
import urllib.parse
import xml.etree.ElementTree as ET

ALGO = "AWS4-HMAC-SHA256"
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class Client:
    """One keep-alive connection to a path-style S3 endpoint on 127.0.0.1."""

    def __init__(self, host, port, access_key, secret_key, region="us-east-1"):
        self.host, self.port = host, port
        self.access_key, self.secret_key, self.region = access_key, secret_key, region
        self.conn = http.client.HTTPConnection(host, port, timeout=300)

    def close(self):
        self.conn.close()

    def _headers(self, path, query):
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        host = "%s:%d" % (self.host, self.port)
        canon_query = "&".join(
            "%s=%s" % (urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
            for k, v in sorted(query.items()))
        signed = "host;x-amz-content-sha256;x-amz-date"
        canon = "\n".join(["GET", path, canon_query,
                           "host:%s\nx-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:%s\n"
                           % (host, amz_date), signed, "UNSIGNED-PAYLOAD"])
        scope = "%s/%s/s3/aws4_request" % (day, self.region)
        to_sign = "\n".join([ALGO, amz_date, scope, hashlib.sha256(canon.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        return canon_query, {
            "Host": host, "x-amz-date": amz_date, "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
            "Authorization": "%s Credential=%s/%s, SignedHeaders=%s, Signature=%s"
                             % (ALGO, self.access_key, scope, signed, sig)}

    def get(self, bucket, key="", query=None, byte_range=None, sink=None):
        """GET /bucket/key; returns the body (or its length when sink is a bytearray to read
        into, so big bodies are not kept). Raises RuntimeError on a non-2xx answer."""
        path = "/%s/%s" % (bucket, urllib.parse.quote(key, safe="/-_.~"))
        canon_query, headers = self._headers(path, query or {})
        if byte_range:
            headers["Range"] = "bytes=%d-%d" % byte_range
        self.conn.request("GET", path + ("?" + canon_query if canon_query else ""),
                          headers=headers)
        resp = self.conn.getresponse()
        if resp.status // 100 != 2:
            body = resp.read()
            raise RuntimeError("GET %s -> %d %s" % (path, resp.status, body[:200]))
        if sink is None:
            return resp.read()
        total = 0
        view = memoryview(sink)
        while True:
            n = resp.readinto(view)
            if not n:
                return total
            total += n

    def list_all(self, bucket, prefix=""):
        """Every key under prefix (ListObjects V1, no delimiter), in order."""
        keys, marker = [], ""
        while True:
            query = {"prefix": prefix, "max-keys": "1000"}
            if marker:
                query["marker"] = marker
            root = ET.fromstring(self.get(bucket, query=query))
            page = [c.findtext(S3_NS + "Key") for c in root.iter(S3_NS + "Contents")]
            keys += page
            if root.findtext(S3_NS + "IsTruncated") != "true" or not page:
                return keys
            marker = root.findtext(S3_NS + "NextMarker") or page[-1]


def _get_slice(args):
    """Pool worker: GET every key of a slice over one connection; returns bytes read."""
    endpoint, bucket, items, barrier = args
    c = Client(*endpoint)
    buf = bytearray(1 << 20)
    total = 0
    try:
        if barrier is not None:
            barrier.wait()
        for key, rng in items:
            total += c.get(bucket, key, byte_range=rng, sink=buf)
    finally:
        c.close()
    return total


def ceiling(endpoint, bucket, items, streams):
    """Time GETs of items ([(key, (first, last) or None)]) from `streams` processes, each
    with its own connection and an interleaved slice. Returns (seconds, requests, bytes)."""
    slices = [items[i::streams] for i in range(streams)]
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(streams + 1)
    procs, results = [], ctx.Queue()

    def run(sl):
        try:
            results.put(_get_slice((endpoint, bucket, sl, barrier)))
        except BaseException as e:  # report, never hang the parent
            results.put(e)

    for sl in slices:
        p = ctx.Process(target=run, args=(sl,), daemon=True)
        p.start()
        procs.append(p)
    barrier.wait()
    t0 = time.monotonic()
    got = [results.get() for _ in procs]
    elapsed = time.monotonic() - t0
    for p in procs:
        p.join()
    errors = [g for g in got if isinstance(g, BaseException)]
    if errors:
        raise RuntimeError("ceiling GETs failed: %s" % errors[0])
    return elapsed, len(items), sum(got)
