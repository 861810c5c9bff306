# SPDX-License-Identifier: MIT
"""Behaviour of scripts/s3server.py, driven with boto3 and raw signed HTTP requests.

Each test asserts what AWS S3 does (status codes, error codes, listing order and rollup,
pagination, range semantics, URL encoding) so that hoardfs tests run against a server that
behaves like the real thing. Run: /usr/bin/python3 -m pytest -q test/integration/test_s3server.py
"""

import concurrent.futures
import hashlib
import hmac
import http.client
import importlib.util
import itertools
import os
import random
import re
import signal
import socket
import sys
import time
import urllib.parse
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3helper import S3Server, SERVER_SCRIPT  # noqa: E402

import botocore  # noqa: E402
import botocore.auth  # noqa: E402
import botocore.awsrequest  # noqa: E402
import botocore.credentials  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

_counter = itertools.count()


# --------------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def srv():
    with S3Server() as server:
        yield server


@pytest.fixture(scope="module")
def s3(srv):
    return srv.client(max_pool_connections=32)


@pytest.fixture
def bucket(srv, request):
    name = "t%d-%s" % (next(_counter), re.sub(r"[^a-z0-9]", "-", request.node.name.lower()))[:40]
    name = name.strip("-")
    srv.create_bucket(name)
    return name


def md5q(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def error_of(excinfo):
    resp = excinfo.value.response
    return resp["Error"]["Code"], resp["ResponseMetadata"]["HTTPStatusCode"]


def qkey(key):
    """Path-encode a key the way botocore does."""
    return urllib.parse.quote(key, safe="/~")


class RawSigner(botocore.auth.SigV4Auth):
    """botocore's SigV4 signer without its S3 payload-hash rewriting (we set
    X-Amz-Content-SHA256 ourselves, possibly wrong on purpose) and without path normalisation
    (S3 signs the path as sent)."""

    def _normalize_url_path(self, path):
        return path


def sign_request(srv, req, secret_key=None):
    """Sign an AWSRequest for srv in place (SigV4, us-east-1)."""
    if "X-Amz-Content-SHA256" not in req.headers:
        req.headers["X-Amz-Content-SHA256"] = hashlib.sha256(req.body or b"").hexdigest()
    creds = botocore.credentials.Credentials(srv.access_key, secret_key or srv.secret_key)
    RawSigner(creds, "s3", srv.region).add_auth(req)
    return dict(req.headers.items())


def raw_request(srv, method, path, query="", headers=None, body=b"", host=None,
                payload_hash=None, secret_key=None, sign=True, conn=None):
    """Send one request with http.client, SigV4-signed by botocore's signer. `path` and `query`
    must already be URI-encoded. Returns (status, lower-cased headers, body)."""
    host = host or "127.0.0.1:%d" % srv.port
    target = path + ("?" + query if query else "")
    hdrs = {"Host": host}
    hdrs.update(headers or {})
    if sign:
        req = botocore.awsrequest.AWSRequest(method=method, url="http://%s%s" % (host, target),
                                             data=body, headers=hdrs)
        if payload_hash is not None:
            req.headers["X-Amz-Content-SHA256"] = payload_hash
        hdrs = sign_request(srv, req, secret_key)
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request(method, target, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        if own:
            conn.close()


def xml_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None


def utf8_sorted(keys):
    return sorted(keys, key=lambda k: k.encode("utf-8"))


def model_list(keys, prefix, delimiter, after, max_keys):
    """S3 listing semantics by brute force over all keys: returns (items, truncated) where
    items are ("K", key) or ("P", common_prefix)."""
    out, last_cp, truncated = [], None, False
    for k in utf8_sorted(keys):
        if not k.startswith(prefix) or (after is not None and k.encode() <= after.encode()):
            continue
        if delimiter:
            j = k.find(delimiter, len(prefix))
            if j >= 0:
                cp = k[:j + len(delimiter)]
                if cp == last_cp or (after is not None and cp.encode() <= after.encode()):
                    continue
                if len(out) == max_keys:
                    truncated = True
                    break
                out.append(("P", cp))
                last_cp = cp
                continue
        if len(out) == max_keys:
            truncated = True
            break
        out.append(("K", k))
    return out, truncated


def items_of(resp):
    """Merge a ListObjects response back into key order as ("K", key) / ("P", prefix)."""
    items = [("K", c["Key"]) for c in resp.get("Contents", [])]
    items += [("P", p["Prefix"]) for p in resp.get("CommonPrefixes", [])]
    return sorted(items, key=lambda i: i[1].encode())


def put_many(s3, bucket, keys, body=lambda k: k.encode()):
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=body(k)), keys))


def load_server_module():
    spec = importlib.util.spec_from_file_location("s3server_mod", SERVER_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------------------------
# objects


@pytest.mark.parametrize("size", [0, 1, (1 << 20) + 1])
def test_put_get_head_delete_roundtrip(s3, bucket, size):
    data = os.urandom(size)
    key = "obj/bin-%d" % size
    put = s3.put_object(Bucket=bucket, Key=key, Body=data)
    assert put["ETag"] == md5q(data)
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == data
    assert got["ETag"] == md5q(data)
    assert got["ContentLength"] == size
    assert got["ContentType"] == "application/octet-stream"
    hdrs = got["ResponseMetadata"]["HTTPHeaders"]
    assert hdrs["accept-ranges"] == "bytes"
    assert re.match(r"^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$", hdrs["last-modified"])
    assert hdrs["x-amz-request-id"] and hdrs["x-amz-id-2"]
    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] == size and head["ETag"] == md5q(data)
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"] != hdrs["x-amz-request-id"]
    assert s3.delete_object(Bucket=bucket, Key=key)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key=key)
    assert error_of(e) == ("NoSuchKey", 404)
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key=key)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # Deleting a missing key is a success in S3.
    assert s3.delete_object(Bucket=bucket, Key=key)["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_overwrite_and_empty_etag(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"first")
    s3.put_object(Bucket=bucket, Key="k", Body=b"second!")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"second!"
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert s3.head_object(Bucket=bucket, Key="empty")["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'


def test_ranges(s3, bucket):
    data = bytes(range(256)) * 4  # 1024 bytes
    s3.put_object(Bucket=bucket, Key="r", Body=data)

    def get(rng):
        r = s3.get_object(Bucket=bucket, Key="r", Range=rng)
        return (r["ResponseMetadata"]["HTTPStatusCode"], r.get("ContentRange"), r["Body"].read(),
                r["ETag"])

    assert get("bytes=10-19") == (206, "bytes 10-19/1024", data[10:20], md5q(data))
    assert get("bytes=1000-") == (206, "bytes 1000-1023/1024", data[1000:], md5q(data))
    assert get("bytes=-5") == (206, "bytes 1019-1023/1024", data[-5:], md5q(data))
    assert get("bytes=1020-5000")[:3] == (206, "bytes 1020-1023/1024", data[1020:])  # clamped
    assert get("bytes=-5000")[:3] == (206, "bytes 0-1023/1024", data)
    assert get("bytes=0-0")[:3] == (206, "bytes 0-0/1024", data[:1])
    for malformed in ("bytes=abc", "bytes=5-2", "items=0-1", "bytes=0-1,3-4", "bytes=-"):
        status, crange, body, _ = get(malformed)
        assert (status, crange, body) == (200, None, data), malformed
    for bad in ("bytes=1024-", "bytes=1024-2000", "bytes=5000-"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="r", Range=bad)
        assert error_of(e) == ("InvalidRange", 416)
        assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes */1024"
    # Any range on an empty object is unsatisfiable, as on AWS (RFC 7233: nothing overlaps).
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    for rng in ("bytes=0-", "bytes=0-0", "bytes=-1"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="empty", Range=rng)
        assert error_of(e) == ("InvalidRange", 416)
    assert s3.get_object(Bucket=bucket, Key="empty")["Body"].read() == b""
    # HEAD honours Range too.
    head = s3.head_object(Bucket=bucket, Key="r", Range="bytes=0-9")
    assert head["ResponseMetadata"]["HTTPStatusCode"] == 206 and head["ContentLength"] == 10


def test_conditional_requests(s3, bucket):
    data = b"conditional"
    s3.put_object(Bucket=bucket, Key="c", Body=data)
    etag = md5q(data)
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == data
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag, Range="bytes=0-3")["Body"].read() == b"cond"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert error_of(e) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    assert s3.get_object(Bucket=bucket, Key="c", IfNoneMatch='"other"')["Body"].read() == data
    past = "Mon, 01 Jan 2001 00:00:00 GMT"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert error_of(e) == ("PreconditionFailed", 412)
    # If-Match that holds wins over a failing If-Unmodified-Since (RFC 7232 / S3).
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag, IfUnmodifiedSince=past)["Body"].read() == data


def test_arbitrary_keys_round_trip(s3, bucket):
    keys = ["sp ace", "plus+sign", "pct%20not-decoded", "uni/ü/日本語", "a//b", "//lead",
            "./..", "a/./b", "a/../b", "dir/", "dir/child", "dir", "x" * 300 + "/y",
            "k" * 1024, ".s3server/looks-reserved", "tab\there", "a/b/", "?q=1&x#frag"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=("v:" + k).encode())
    for k in keys:
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == ("v:" + k).encode(), k
    listed = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        listed += [c["Key"] for c in page.get("Contents", [])]
    assert listed == utf8_sorted(keys)
    # V1 with delimiter rolls them up per S3 rules.
    r = s3.list_objects(Bucket=bucket, Delimiter="/")
    assert items_of(r) == model_list(keys, "", "/", None, 1000)[0]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"x")
    assert error_of(e) == ("KeyTooLongError", 400)
    # Delete a mix of plain and hashed keys; they disappear from listings.
    for k in ("dir/", "a//b", "dir"):
        s3.delete_object(Bucket=bucket, Key=k)
    listed = [c["Key"] for c in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert listed == utf8_sorted(set(keys) - {"dir/", "a//b", "dir"})


def test_url_encoding_type(srv, s3, bucket):
    keys = ["a b/c", "a+b", "100%.csv", "한글/x.txt", "x//y", "./..", "t/", "q&<>\"'"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"1")
    # boto3 asks for encoding-type=url itself and decodes: keys come back exactly.
    assert [c["Key"] for c in s3.list_objects(Bucket=bucket)["Contents"]] == utf8_sorted(keys)
    assert [c["Key"] for c in s3.list_objects_v2(Bucket=bucket)["Contents"]] == utf8_sorted(keys)
    # The raw response: Key, Prefix, Delimiter, CommonPrefixes percent-encoded, '/' kept,
    # space as %20 (s3-tests), '+' as %2B.
    status, _, body = raw_request(srv, "GET", "/" + bucket,
                                  "list-type=2&encoding-type=url&delimiter=%2F&prefix=")
    assert status == 200
    text = body.decode()
    assert "<EncodingType>url</EncodingType>" in text
    assert "<Key>a%2Bb</Key>" in text and "<Key>100%25.csv</Key>" in text
    assert "<Key>q%26%3C%3E%22%27</Key>" in text
    assert "<Prefix>a%20b/</Prefix>" in text
    assert "<Prefix>%ED%95%9C%EA%B8%80/</Prefix>" in text
    assert "<Prefix>x/</Prefix>" in text and "<Prefix>./</Prefix>" in text
    assert "<Delimiter>/</Delimiter>" in text
    # V1: Marker and NextMarker too.
    status, _, body = raw_request(srv, "GET", "/" + bucket,
                                  "encoding-type=url&delimiter=%2F&max-keys=1&marker=a%20b%2F")
    text = body.decode()
    assert "<Marker>a%20b/</Marker>" in text
    assert "<NextMarker>a%2Bb</NextMarker>" in text
    # Without encoding-type, XML escaping only.
    status, _, body = raw_request(srv, "GET", "/" + bucket, "prefix=q")
    assert "<Key>q&amp;&lt;&gt;&quot;&apos;</Key>" in body.decode() or \
        "<Key>q&amp;&lt;&gt;&quot;'</Key>" in body.decode()


# --------------------------------------------------------------------------------------------
# listing


def test_list_pagination_2500(srv, s3, bucket):
    # Laid out on disk (as benchmarks do); PUT paths are covered by the other tests.
    keys = ["k/%04d" % i for i in range(2500)]
    os.makedirs(os.path.join(srv.root, bucket, "k"))
    for k in keys:
        with open(os.path.join(srv.root, bucket, k), "wb") as fh:
            fh.write(b"x")
    r = s3.list_objects_v2(Bucket=bucket)
    assert r["KeyCount"] == 1000 and r["MaxKeys"] == 1000 and r["IsTruncated"] is True
    assert [c["Key"] for c in r["Contents"]] == keys[:1000]
    c0 = r["Contents"][0]
    assert c0["ETag"] == md5q(b"x") and c0["Size"] == 1 and c0["StorageClass"] == "STANDARD"
    assert "Owner" not in c0  # V2 without fetch-owner
    r2 = s3.list_objects_v2(Bucket=bucket, ContinuationToken=r["NextContinuationToken"])
    assert [c["Key"] for c in r2["Contents"]] == keys[1000:2000]
    assert r2["ContinuationToken"] == r["NextContinuationToken"]
    r3 = s3.list_objects_v2(Bucket=bucket, ContinuationToken=r2["NextContinuationToken"],
                            FetchOwner=True)
    assert [c["Key"] for c in r3["Contents"]] == keys[2000:]
    assert r3["IsTruncated"] is False and "NextContinuationToken" not in r3
    assert "ID" in r3["Contents"][0]["Owner"]
    # max-keys above 1000 is capped; V1 without delimiter has no NextMarker.
    r = s3.list_objects(Bucket=bucket, MaxKeys=1500)
    assert len(r["Contents"]) == 1000 and r["IsTruncated"] is True and "NextMarker" not in r
    assert "Owner" in r["Contents"][0]
    r = s3.list_objects(Bucket=bucket, Marker=r["Contents"][-1]["Key"])
    assert [c["Key"] for c in r["Contents"]] == keys[1000:2000]
    # Small pages through the paginators, V1 and V2.
    for op in ("list_objects", "list_objects_v2"):
        got, pages = [], 0
        for page in s3.get_paginator(op).paginate(Bucket=bucket, Prefix="k/01",
                                                  PaginationConfig={"PageSize": 7}):
            assert len(page.get("Contents", [])) <= 7
            got += [c["Key"] for c in page.get("Contents", [])]
            pages += 1
        assert got == keys[100:200] and pages == 15
    # max-keys=0: nothing, not truncated (as AWS / s3-tests).
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    assert r["KeyCount"] == 0 and r["IsTruncated"] is False and "Contents" not in r
    # start-after
    r = s3.list_objects_v2(Bucket=bucket, StartAfter="k/2495")
    assert [c["Key"] for c in r["Contents"]] == keys[2496:] and r["StartAfter"] == "k/2495"


def test_invalid_list_arguments(srv, bucket):
    for q in ("max-keys=abc", "max-keys=-1", "list-type=2&continuation-token=bogus",
              "encoding-type=base64"):
        status, hdrs, body = raw_request(srv, "GET", "/" + bucket, q)
        assert (status, xml_code(body)) == (400, "InvalidArgument"), q
        assert hdrs["x-amz-request-id"]


def test_delimiter_rollup_several_depths(s3, bucket):
    keys = ["a/b/c/d.txt", "a/b/c/", "a/b/e.txt", "a/f.txt", "a-b/x", "a.c", "g.txt",
            "a/b/c/deep/er/z", "h/", "h/i/j"]
    put_many(s3, bucket, keys)

    def ls(prefix, delimiter="/"):
        r = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter=delimiter)
        return ([c["Key"] for c in r.get("Contents", [])],
                [p["Prefix"] for p in r.get("CommonPrefixes", [])])

    assert ls("") == (["a.c", "g.txt"], ["a-b/", "a/", "h/"])
    assert ls("a/") == (["a/f.txt"], ["a/b/"])
    assert ls("a/b/") == (["a/b/e.txt"], ["a/b/c/"])
    assert ls("a/b/c/") == (["a/b/c/", "a/b/c/d.txt"], ["a/b/c/deep/"])
    assert ls("a/b/c/deep/er/") == (["a/b/c/deep/er/z"], [])
    assert ls("a/b") == ([], ["a/b/"])
    assert ls("h/") == (["h/"], ["h/i/"])
    assert ls("nothing/") == ([], [])
    # Delimiters other than '/'
    assert ls("", "b") == (["a.c", "a/f.txt", "g.txt", "h/", "h/i/j"], ["a-b", "a/b"])
    assert ls("a/", ".") == (["a/b/c/", "a/b/c/deep/er/z"], ["a/b/c/d.", "a/b/e.", "a/f."])
    for prefix, delim in [("a/", "."), ("", "/c"), ("a", "/"), ("", "a/b/c/"), ("a/b/c/", "e")]:
        r = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter=delim)
        assert items_of(r) == model_list(keys, prefix, delim, None, 1000)[0], (prefix, delim)
    # Rolled-up prefixes count against max-keys with Contents; V1 NextMarker names the last one.
    r = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2)
    assert items_of(r) == [("P", "a-b/"), ("K", "a.c")] and r["NextMarker"] == "a.c"
    r = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2, Marker=r["NextMarker"])
    assert items_of(r) == [("P", "a/"), ("K", "g.txt")] and r["NextMarker"] == "g.txt"
    r = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=2, Marker="a/")
    assert items_of(r) == [("K", "g.txt"), ("P", "h/")] and r["IsTruncated"] is False
    assert "NextMarker" not in r


def test_listing_matches_model_on_random_keys(s3, bucket):
    rnd = random.Random(1234)
    alphabet = ["a", "b", "/", "/", "-", ".", " ", "é", "+", "z"]
    keys = set()
    while len(keys) < 300:
        keys.add("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 7))))
    keys = sorted(keys)
    put_many(s3, bucket, keys)
    prefixes = ["", "a", "a/", "b/", "/", "é", "a/b", "zz"]
    delimiters = [None, "/", "b", "a/", "-"]
    for prefix in prefixes:
        for delim in delimiters:
            kw = {"Prefix": prefix}
            if delim:
                kw["Delimiter"] = delim
            r = s3.list_objects_v2(Bucket=bucket, **kw)
            want, _ = model_list(keys, prefix, delim, None, 1000)
            assert items_of(r) == want, (prefix, delim)
            assert r["KeyCount"] == len(want)
    # Page by page against the model, with V1 markers and V2 tokens.
    for prefix, delim, size in [("", "/", 4), ("a", "b", 3), ("", None, 11), ("/", "/", 2)]:
        after, token, pages = None, None, 0
        while True:
            kw = {"Prefix": prefix, "MaxKeys": size}
            if delim:
                kw["Delimiter"] = delim
            if token:
                kw["ContinuationToken"] = token
            r = s3.list_objects_v2(Bucket=bucket, **kw)
            want, trunc = model_list(keys, prefix, delim, after, size)
            assert items_of(r) == want and r["IsTruncated"] == trunc, (prefix, delim, after)
            pages += 1
            if not trunc:
                break
            after, token = want[-1][1], r["NextContinuationToken"]
        assert pages > 2
        after, pages = None, 0
        while True:
            kw = {"Prefix": prefix, "MaxKeys": size}
            if delim:
                kw["Delimiter"] = delim
            if after:
                kw["Marker"] = after
            r = s3.list_objects(Bucket=bucket, **kw)
            want, trunc = model_list(keys, prefix, delim, after, size)
            assert items_of(r) == want and r["IsTruncated"] == trunc, (prefix, delim, after)
            if not trunc:
                break
            after = r["NextMarker"] if delim else r["Contents"][-1]["Key"]
            assert after == want[-1][1]


def test_preexisting_tree_is_served(srv, s3):
    # Laid out on disk while the server runs, as benchmarks do: no upload, no restart.
    root = os.path.join(srv.root, "disk-tree")
    os.makedirs(root)
    files = {}
    for d in range(5):
        for f in range(30):
            rel = "d%02d/sub/f%03d.jpg" % (d, f)
            data = ("%s" % rel).encode() * (f + 1)
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "wb") as fh:
                fh.write(data)
            files[rel] = data
    with open(os.path.join(root, "top.txt"), "wb") as fh:
        fh.write(b"top")
    files["top.txt"] = b"top"
    os.makedirs(os.path.join(root, "empty/dir"))  # empty directories are not objects
    r = s3.list_objects_v2(Bucket="disk-tree", Delimiter="/")
    assert [c["Key"] for c in r["Contents"]] == ["top.txt"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["d%02d/" % d for d in range(5)]
    listed = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="disk-tree",
                                                             PaginationConfig={"PageSize": 40}):
        for c in page["Contents"]:
            listed[c["Key"]] = (c["Size"], c["ETag"])
    assert listed == {k: (len(v), md5q(v)) for k, v in files.items()}
    assert s3.get_object(Bucket="disk-tree", Key="d03/sub/f007.jpg")["Body"].read() == files["d03/sub/f007.jpg"]
    # A file added later shows up in the next listing (directory cache is validated).
    with open(os.path.join(root, "d00/sub/new.jpg"), "wb") as fh:
        fh.write(b"new")
    r = s3.list_objects_v2(Bucket="disk-tree", Prefix="d00/sub/new")
    assert [c["Key"] for c in r["Contents"]] == ["d00/sub/new.jpg"]
    # A file rewritten in place gets a new ETag.
    time.sleep(0.01)
    with open(os.path.join(root, "top.txt"), "wb") as fh:
        fh.write(b"TOP!")
    assert s3.head_object(Bucket="disk-tree", Key="top.txt")["ETag"] == md5q(b"TOP!")
    # The reserved directory never shows up.
    s3.put_object(Bucket="disk-tree", Key="trailing/", Body=b"")
    assert os.path.isdir(os.path.join(root, ".s3server"))
    keys = [c["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket="disk-tree")
            for c in p["Contents"]]
    assert not any(k.startswith(".s3server") for k in keys) and "trailing/" in keys


def test_large_tree_listing_is_fast(srv, s3):
    root = os.path.join(srv.root, "big-tree")
    for d in range(20):
        os.makedirs(os.path.join(root, "dir%03d" % d))
        for f in range(500):
            with open(os.path.join(root, "dir%03d/%05d.bin" % (d, f)), "wb") as fh:
                fh.write(b"%d" % f)
    # Timed with raw requests so that botocore's XML parsing is not what we measure.
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)

    def list_all(query):
        n, token, t0 = 0, None, time.monotonic()
        while True:
            q = query + ("&continuation-token=" + token if token else "")
            status, _, body = raw_request(srv, "GET", "/big-tree", q, conn=conn)
            assert status == 200
            n += body.count(b"<Key>") + body.count(b"<CommonPrefixes>")
            m = re.search(rb"<NextContinuationToken>([^<]*)<", body)
            if not m:
                return n, time.monotonic() - t0
            token = m.group(1).decode()

    n_root, t_root = list_all("delimiter=%2F&list-type=2")
    n, t_all = list_all("list-type=2")     # includes hashing 10,000 files for their ETags
    n2, t_again = list_all("list-type=2")  # ETags cached
    conn.close()
    assert n_root == 20 and n == n2 == 10000
    assert t_root < 1.0 and t_all < 10.0 and t_again < 3.0, (t_root, t_all, t_again)


# --------------------------------------------------------------------------------------------
# auth and addressing


def test_bad_credentials(srv, bucket):
    s3 = srv.client()
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    with pytest.raises(ClientError) as e:
        srv.client(secret_key="wrong-secret").get_object(Bucket=bucket, Key="k")
    assert error_of(e) == ("SignatureDoesNotMatch", 403)
    with pytest.raises(ClientError) as e:
        srv.client(secret_key="wrong-secret").put_object(Bucket=bucket, Key="k", Body=b"evil")
    assert error_of(e) == ("SignatureDoesNotMatch", 403)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    # Without --security-token any session token is accepted, and any region.
    assert srv.client(session_token="whatever", region="cn-north-4").get_object(
        Bucket=bucket, Key="k")["Body"].read() == b"v"
    with pytest.raises(ClientError) as e:
        srv.client(access_key="AKIDUNKNOWN").list_objects_v2(Bucket=bucket)
    assert error_of(e) == ("InvalidAccessKeyId", 403)
    status, hdrs, body = raw_request(srv, "GET", "/%s/k" % bucket, sign=False)
    assert (status, xml_code(body)) == (403, "AccessDenied") and hdrs["x-amz-request-id"]
    assert b"<RequestId>" in body and b"<Resource>" in body
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="no-such-bucket-here", Key="k")
    assert error_of(e) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="no-such-bucket-here")
    assert error_of(e) == ("NoSuchBucket", 404)


def test_signature_covers_body_and_unsigned_headers(srv, bucket):
    path = "/%s/body" % bucket
    wrong = hashlib.sha256(b"something else").hexdigest()
    status, _, body = raw_request(srv, "PUT", path, body=b"payload", payload_hash=wrong)
    assert (status, xml_code(body)) == (400, "XAmzContentSHA256Mismatch")
    status, _, _ = raw_request(srv, "PUT", path, body=b"payload", payload_hash="UNSIGNED-PAYLOAD")
    assert status == 200
    # An x-amz-* header added after signing is refused.
    req = botocore.awsrequest.AWSRequest(method="GET", url="http://127.0.0.1:%d%s" % (srv.port, path),
                                         headers={"Host": "127.0.0.1:%d" % srv.port})
    hdrs = sign_request(srv, req)
    hdrs["x-amz-meta-sneaky"] = "1"
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("GET", path, headers=hdrs)
    resp = conn.getresponse()
    assert resp.status == 403 and xml_code(resp.read()) == "AccessDenied"
    conn.close()


def test_clock_skew_refused(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    srv.faults({"clock_offset_s": 3600})
    try:
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="k")
        assert error_of(e) == ("RequestTimeTooSkewed", 403)
        # The Date header tells the client the server's clock.
        date = e.value.response["ResponseMetadata"]["HTTPHeaders"]["date"]
        skew = email_date_to_ts(date) - time.time()
        assert 3500 < skew < 3700
    finally:
        srv.faults({})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"


def email_date_to_ts(value):
    import email.utils
    return email.utils.mktime_tz(email.utils.parsedate_tz(value))


def test_virtual_hosted_style(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="dir/v h", Body=b"vhost")
    s3.put_object(Bucket=bucket, Key="/lead", Body=b"lead")
    host = "%s.localhost:%d" % (bucket, srv.port)
    status, hdrs, body = raw_request(srv, "GET", "/dir/v%20h", host=host)
    assert (status, body) == (200, b"vhost")
    status, hdrs, body = raw_request(srv, "GET", "//lead", host=host)
    assert (status, body) == (200, b"lead")
    status, _, body = raw_request(srv, "GET", "/", "list-type=2&prefix=dir%2F", host=host)
    assert status == 200 and b"<Key>dir/v h</Key>" in body
    # A host name that is not a bucket (no bucket named 'nosuch') stays path style.
    status, _, body = raw_request(srv, "GET", "/%s/dir/v%%20h" % bucket,
                                  host="nosuch.localhost:%d" % srv.port)
    assert (status, body) == (200, b"vhost")
    # A bad signature through virtual hosting is still refused.
    status, _, body = raw_request(srv, "GET", "/dir/v%20h", host=host, secret_key="bad")
    assert (status, xml_code(body)) == (403, "SignatureDoesNotMatch")


def test_presigned_url(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="pre signed+key", Body=b"presigned body")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "pre signed+key"},
                                    ExpiresIn=60)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        assert resp.read() == b"presigned body"
    bad = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(bad, timeout=10)
    assert e.value.code == 403


def test_security_token_enforced():
    with S3Server(extra_args=["--security-token", "tok-123", "--region", "us-east-1"]) as srv:
        with pytest.raises(ClientError) as e:
            srv.client(session_token="tok-123", region="eu-west-1").list_buckets()
        assert error_of(e) == ("AuthorizationHeaderMalformed", 400)
        s3 = srv.client()
        with pytest.raises(ClientError) as e:
            s3.list_buckets()
        assert error_of(e) == ("InvalidToken", 403)
        with pytest.raises(ClientError) as e:
            srv.client(session_token="tok-999").list_buckets()
        assert error_of(e) == ("InvalidToken", 403)
        good = srv.client(session_token="tok-123")
        good.create_bucket(Bucket="tok")
        assert [b["Name"] for b in good.list_buckets()["Buckets"]] == ["tok"]


def test_sigv4_reference_vectors():
    # AWS documentation vectors (also in shared/reference/obs-protocol.md §2.3).
    m = load_server_module()
    key = m.sigv4_signing_key("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524", "us-east-1", "s3")
    scope = "20130524/us-east-1/s3/aws4_request"
    base = {"host": ["examplebucket.s3.amazonaws.com"], "x-amz-content-sha256": [m.EMPTY_SHA256],
            "x-amz-date": ["20130524T000000Z"], "range": ["bytes=0-9"]}

    def sig(uri, query, signed):
        cq = m.sigv4_canonical_query(query, True)
        creq = m.sigv4_canonical_request("GET", uri, cq, base.get, signed, m.EMPTY_SHA256)
        return m.sigv4_signature(key, m.sigv4_string_to_sign("20130524T000000Z", scope, creq))

    hs = ["host", "x-amz-content-sha256", "x-amz-date"]
    assert sig("/", "max-keys=2&prefix=J", hs) == \
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
    assert sig("/", "lifecycle", hs) == \
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
    assert sig("/test.txt", "", ["host", "range", "x-amz-content-sha256", "x-amz-date"]) == \
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def test_sigv2_and_obs_reference_vectors():
    m = load_server_module()
    # AWS SigV2 documentation example (obs-protocol.md §2.2).
    sts = m.v2_string_to_sign("GET", "", "", "Tue, 27 Mar 2007 19:36:42 +0000", {},
                              "/awsexamplebucket1/photos/puppy.jpg", "")
    assert sts == "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg"
    assert m.v2_signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", sts) == "qgk2+6Sv9/oM7G3qLEjTH1a1l1g="
    # OBS vectors (obs-protocol.md §2.1, SK "secret"); the Date line is empty with x-obs-date.
    sts = m.v2_string_to_sign("GET", "", "", "Sat, 12 Oct 2015 08:12:38 GMT", {}, "/bucket/object.txt", "")
    assert m.v2_signature("secret", sts) == "B5U/pJkM67Eng8teECN3J5PQQqU="
    sts = m.v2_string_to_sign("GET", "", "", "",
                              {"x-obs-security-token": ["TOKEN"],
                               "x-obs-date": ["Tue, 15 Oct 2015 07:20:09 GMT"]},
                              "/bucket/dir/a%20b.jpg", "")
    assert m.v2_signature("secret", sts) == "Le6Zk1EWnGK3J+cp+UOaPPRuFes="
    sts = m.v2_string_to_sign("GET", "", "", "", {"x-obs-date": ["Tue, 15 Oct 2015 07:20:09 GMT"]},
                              "/bucket/", "prefix=a&max-keys=5")
    assert m.v2_signature("secret", sts) == "uGJufpGYLhDsfCik7ZSFyf1fycw="
    # Sub-resources are part of the resource, sorted; listing parameters are not.
    sts = m.v2_string_to_sign("GET", "", "", "D", {}, "/b/k", "versionId=xxx&response-content-type=text%2Fplain&x=1")
    assert sts.endswith("/b/k?response-content-type=text/plain&versionId=xxx")


def test_sigv2_client_and_presigned(srv, bucket):
    s3v2 = srv.client(signature_version="s3")
    s3v2.put_object(Bucket=bucket, Key="v2/a b+c", Body=b"sigv2")
    assert s3v2.get_object(Bucket=bucket, Key="v2/a b+c")["Body"].read() == b"sigv2"
    assert [c["Key"] for c in s3v2.list_objects(Bucket=bucket, Prefix="v2/")["Contents"]] == ["v2/a b+c"]
    url = s3v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "v2/a b+c"})
    assert "AWSAccessKeyId=" in url
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        assert resp.read() == b"sigv2"
    with pytest.raises(ClientError) as e:
        srv.client(signature_version="s3", secret_key="nope").get_object(Bucket=bucket, Key="v2/a b+c")
    assert error_of(e) == ("SignatureDoesNotMatch", 403)


def test_obs_signature(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="obs/a b", Body=b"obs-signed")
    m = load_server_module()
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())

    def get(path, secret, host=None):
        sts = m.v2_string_to_sign("GET", "", "", "", {"x-obs-date": [date]},
                                  path if host is None else "/" + bucket + path, "")
        hdrs = {"x-obs-date": date, "Authorization": "OBS %s:%s" % (srv.access_key, m.v2_signature(secret, sts))}
        return raw_request(srv, "GET", path, headers=hdrs, sign=False, host=host)

    assert get("/%s/obs/a%%20b" % bucket, srv.secret_key)[::2] == (200, b"obs-signed")
    assert get("/obs/a%20b", srv.secret_key, host="%s.localhost:%d" % (bucket, srv.port))[::2] == \
        (200, b"obs-signed")
    status, _, body = get("/%s/obs/a%%20b" % bucket, "wrong")
    assert (status, xml_code(body)) == (403, "SignatureDoesNotMatch")


def test_aws_chunked_streaming_upload(srv, s3, bucket):
    """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD upload, chunk signatures computed here from the
    AWS spec; a corrupted chunk signature is refused."""
    data = os.urandom(70000)
    chunks = [data[:65536], data[65536:], b""]

    def build(corrupt):
        path = "/%s/chunked-obj" % bucket
        host = "127.0.0.1:%d" % srv.port
        body_len = sum(len("%x;chunk-signature=%s\r\n" % (len(c), "0" * 64)) + len(c) + 2 for c in chunks)
        req = botocore.awsrequest.AWSRequest(
            method="PUT", url="http://%s%s" % (host, path),
            headers={"Host": host, "Content-Encoding": "aws-chunked",
                     "x-amz-decoded-content-length": str(len(data)),
                     "Content-Length": str(body_len),
                     "X-Amz-Content-SHA256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"})
        hdrs = sign_request(srv, req)
        amz_date = hdrs["X-Amz-Date"]
        scope = "%s/us-east-1/s3/aws4_request" % amz_date[:8]
        seed = hdrs["Authorization"].rsplit("Signature=", 1)[1]
        k = b"AWS4" + srv.secret_key.encode()
        for part in (amz_date[:8], "us-east-1", "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        prev, body = seed, b""
        for c in chunks:
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev,
                             hashlib.sha256(b"").hexdigest(), hashlib.sha256(c).hexdigest()])
            sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
            prev = sig
            if corrupt and c is chunks[1]:
                sig = "f" * 64
            body += ("%x;chunk-signature=%s\r\n" % (len(c), sig)).encode() + c + b"\r\n"
        assert len(body) == body_len
        return path, hdrs, body

    for corrupt in (True, False):
        path, hdrs, body = build(corrupt)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("PUT", path, body=body, headers=hdrs)
        resp = conn.getresponse()
        out = resp.read()
        conn.close()
        if corrupt:
            assert (resp.status, xml_code(out)) == (403, "SignatureDoesNotMatch")
            with pytest.raises(ClientError):
                s3.head_object(Bucket=bucket, Key="chunked-obj")
        else:
            assert resp.status == 200, out
            assert resp.getheader("ETag") == md5q(data)
    assert s3.get_object(Bucket=bucket, Key="chunked-obj")["Body"].read() == data


def test_http_chunked_transfer_encoding(srv, s3, bucket):
    path = "/%s/te-chunked" % bucket
    host = "127.0.0.1:%d" % srv.port
    req = botocore.awsrequest.AWSRequest(method="PUT", url="http://%s%s" % (host, path),
                                         headers={"Host": host, "Transfer-Encoding": "chunked",
                                                  "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    hdrs = sign_request(srv, req)
    parts = [b"hello ", b"chunked ", b"world" * 1000]
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("PUT", path, body=iter(parts), headers=hdrs,
                 encode_chunked=True)
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200
    conn.close()
    assert s3.get_object(Bucket=bucket, Key="te-chunked")["Body"].read() == b"".join(parts)


# --------------------------------------------------------------------------------------------
# other operations


def test_copy_multipart_delete_objects(s3, bucket):
    part1 = os.urandom(5 << 20)
    part2 = b"tail"
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp/obj")
    e1 = s3.upload_part(Bucket=bucket, Key="mp/obj", UploadId=up["UploadId"], PartNumber=1, Body=part1)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp/obj", UploadId=up["UploadId"], PartNumber=2, Body=part2)["ETag"]
    done = s3.complete_multipart_upload(Bucket=bucket, Key="mp/obj", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                                   {"PartNumber": 2, "ETag": e2}]})
    want = '"%s-2"' % hashlib.md5(hashlib.md5(part1).digest() + hashlib.md5(part2).digest()).hexdigest()
    assert done["ETag"] == want
    got = s3.get_object(Bucket=bucket, Key="mp/obj")
    assert got["ETag"] == want and got["Body"].read() == part1 + part2
    # Too small a non-last part is refused, as on S3.
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp/small")
    e1 = s3.upload_part(Bucket=bucket, Key="mp/small", UploadId=up["UploadId"], PartNumber=1, Body=b"a")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp/small", UploadId=up["UploadId"], PartNumber=2, Body=b"b")["ETag"]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp/small", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                                {"PartNumber": 2, "ETag": e2}]})
    assert error_of(e) == ("EntityTooSmall", 400)
    s3.abort_multipart_upload(Bucket=bucket, Key="mp/small", UploadId=up["UploadId"])
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="mp/small", UploadId=up["UploadId"], PartNumber=3, Body=b"c")
    assert error_of(e) == ("NoSuchUpload", 404)
    # Copy
    s3.copy_object(Bucket=bucket, Key="copy/of obj", CopySource={"Bucket": bucket, "Key": "mp/obj"})
    assert s3.get_object(Bucket=bucket, Key="copy/of obj")["Body"].read() == part1 + part2
    # DeleteObjects
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "mp/obj"}, {"Key": "copy/of obj"},
                                                             {"Key": "never-existed"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["copy/of obj", "mp/obj", "never-existed"]
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_buckets(srv, s3):
    s3.create_bucket(Bucket="bucket-ops")
    assert "bucket-ops" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.head_bucket(Bucket="bucket-ops")
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="bucket-missing")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    s3.put_object(Bucket="bucket-ops", Key="x", Body=b"1")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="bucket-ops")
    assert error_of(e) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket="bucket-ops", Key="x")
    s3.delete_bucket(Bucket="bucket-ops")
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="bucket-ops")
    assert error_of(e) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="Bad_Name")
    assert error_of(e) == ("InvalidBucketName", 400)
    # Unsupported method: 405 MethodNotAllowed with an XML error.
    status, hdrs, body = raw_request(srv, "PATCH", "/bucket-x/key")
    assert (status, xml_code(body)) == (405, "MethodNotAllowed") and hdrs["x-amz-request-id"]


# --------------------------------------------------------------------------------------------
# connections, accounting, faults, lifecycle


def test_keep_alive_across_errors(srv, bucket):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    sock_ids = set()
    try:
        for path, status_want in [("/%s/missing" % bucket, 404), ("/%s" % bucket, 200),
                                  ("/no-bucket-zz/x", 404), ("/%s/missing" % bucket, 404)]:
            status, hdrs, _ = raw_request(srv, "GET", path, conn=conn)
            assert status == status_want and "connection" not in hdrs
            sock_ids.add(id(conn.sock))
        # A refused PUT whose body was sent is drained, the connection stays usable.
        status, _, _ = raw_request(srv, "PUT", "/%s/x" % bucket, body=b"z" * 1000,
                                   secret_key="bad", conn=conn)
        assert status == 403
        status, _, _ = raw_request(srv, "GET", "/%s" % bucket, conn=conn)
        assert status == 200
        sock_ids.add(id(conn.sock))
    finally:
        conn.close()
    assert len(sock_ids) == 1


def test_concurrent_ranged_reads(srv, bucket):
    s3 = srv.client(max_pool_connections=32)
    data = os.urandom(4 << 20)
    s3.put_object(Bucket=bucket, Key="big", Body=data)

    def read(i):
        start = (i * 77777) % len(data)
        end = min(len(data) - 1, start + 300000)
        body = s3.get_object(Bucket=bucket, Key="big", Range="bytes=%d-%d" % (start, end))["Body"].read()
        return body == data[start:end + 1]

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        assert all(pool.map(read, range(200)))
    assert s3.get_object(Bucket=bucket, Key="big")["Body"].read() == data


def test_request_accounting(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="acct", Body=b"0123456789")
    srv.reset()
    assert srv.stats()["requests"] == []
    s3.get_object(Bucket=bucket, Key="acct")["Body"].read()
    s3.get_object(Bucket=bucket, Key="acct", Range="bytes=0-3")["Body"].read()
    s3.head_object(Bucket=bucket, Key="acct")
    s3.list_objects_v2(Bucket=bucket)
    s3.list_objects(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="acct2", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="acct2")
    with pytest.raises(ClientError):
        s3.get_object(Bucket=bucket, Key="missing")
    srv.admin("GET", "/_admin/faults")  # admin calls are not counted
    st = srv.stats()
    assert {k: st[k] for k in ("GET", "HEAD", "LIST", "PUT", "DELETE", "OTHER")} == \
        {"GET": 3, "HEAD": 1, "LIST": 2, "PUT": 1, "DELETE": 1, "OTHER": 0}
    assert st["get_bytes"] == 10 + 4  # object bytes of successful GETs only
    reqs = st["requests"]
    assert [r["op"] for r in reqs] == ["GET", "GET", "HEAD", "LIST", "LIST", "PUT", "DELETE", "GET"]
    assert reqs[1] == {"op": "GET", "bucket": bucket, "key": "acct", "range": "bytes=0-3",
                       "status": 206, "bytes": 4, "request_id": reqs[1]["request_id"],
                       "time": reqs[1]["time"]}
    assert reqs[0]["time"] <= reqs[1]["time"] <= time.time()
    assert reqs[0]["range"] is None and reqs[0]["status"] == 200
    assert reqs[-1]["status"] == 404 and reqs[-1]["key"] == "missing"
    assert reqs[3]["key"] is None and reqs[3]["bucket"] == bucket
    assert reqs[3]["prefix"] == "" and "prefix" not in reqs[0]
    assert st["bytes_sent"] >= st["get_bytes"]
    assert len({r["request_id"] for r in reqs}) == len(reqs)
    srv.reset()
    assert srv.stats(requests=False)["GET"] == 0


def test_fault_error_rule_with_count(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="flaky/one", Body=b"ok")
    s3.put_object(Bucket=bucket, Key="other", Body=b"ok")
    cfg = srv.faults({"errors": [{"op": "GET", "key_regex": "^flaky/", "status": 503,
                                  "code": "SlowDown", "rate": 1.0, "retry_after": 2, "count": 2}]})
    assert cfg["errors"][0]["remaining"] == 2
    try:
        for _ in range(2):
            with pytest.raises(ClientError) as e:
                s3.get_object(Bucket=bucket, Key="flaky/one")
            assert error_of(e) == ("SlowDown", 503)
            assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == "2"
        assert s3.get_object(Bucket=bucket, Key="other")["Body"].read() == b"ok"  # not matched
        assert s3.get_object(Bucket=bucket, Key="flaky/one")["Body"].read() == b"ok"
        assert s3.head_object(Bucket=bucket, Key="flaky/one")["ContentLength"] == 2  # op HEAD
        rule = srv.faults()["errors"][0]
        assert rule["remaining"] == 0 and rule["injected"] == 2
        # rate 0 never fires; op LIST matches on the prefix
        srv.faults({"errors": [{"op": "GET", "status": 500, "rate": 0.0},
                               {"op": "LIST", "key_regex": "^flaky", "status": 500}]})
        assert s3.get_object(Bucket=bucket, Key="flaky/one")["Body"].read() == b"ok"
        with pytest.raises(ClientError) as e:
            s3.list_objects_v2(Bucket=bucket, Prefix="flaky/")
        assert error_of(e) == ("InternalError", 500)
        assert s3.list_objects_v2(Bucket=bucket, Prefix="oth")["KeyCount"] == 1
        with pytest.raises(RuntimeError):
            srv.faults({"errors": [{"op": "GET", "stauts": 500}]})  # typo is refused
    finally:
        srv.faults({})
    assert srv.faults()["errors"] == []


def test_fault_reset_and_short_body(srv, s3, bucket):
    data = os.urandom(1 << 20)
    s3.put_object(Bucket=bucket, Key="cut", Body=data)
    try:
        for rule in ({"op": "GET", "reset_after_bytes": 1000, "count": 1},
                     {"op": "GET", "short_body_bytes": 5000, "count": 1}):
            srv.faults({"errors": [rule]})
            srv.reset()
            url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "cut"})
            u = urllib.parse.urlsplit(url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            conn.request("GET", u.path + "?" + u.query)
            resp = conn.getresponse()
            assert resp.status == 200 and int(resp.getheader("Content-Length")) == len(data)
            got = b""
            with pytest.raises((http.client.IncompleteRead, ConnectionError)):
                while True:
                    chunk = resp.read(4096)
                    if not chunk:
                        raise http.client.IncompleteRead(got)
                    got += chunk
            conn.close()
            limit = rule.get("reset_after_bytes", rule.get("short_body_bytes"))
            assert len(got) <= limit and data.startswith(got)
            st = srv.stats()
            assert st["GET"] == 1 and st["requests"][0]["bytes"] == limit
            # count=1: the next GET is whole again.
            assert s3.get_object(Bucket=bucket, Key="cut")["Body"].read() == data
    finally:
        srv.faults({})


def test_fault_latency_and_bandwidth(srv, s3, bucket):
    data = os.urandom(300 << 10)
    s3.put_object(Bucket=bucket, Key="slow", Body=data)
    try:
        srv.faults({"latency_ms": 300})
        t0 = time.monotonic()
        s3.head_object(Bucket=bucket, Key="slow")
        assert time.monotonic() - t0 >= 0.3
        srv.faults({"bandwidth_bps": 1 << 20})
        t0 = time.monotonic()
        assert s3.get_object(Bucket=bucket, Key="slow")["Body"].read() == data
        assert time.monotonic() - t0 >= 0.25  # 300 KiB at 1 MiB/s
    finally:
        srv.faults({})
    t0 = time.monotonic()
    s3.get_object(Bucket=bucket, Key="slow")["Body"].read()
    assert time.monotonic() - t0 < 0.25


def test_obs_flavour(srv, s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"1")
    srv.faults({"flavour": "obs"})
    try:
        status, hdrs, body = raw_request(srv, "GET", "/" + bucket, "list-type=2")
        assert status == 200 and "x-obs-request-id" in hdrs and "x-amz-request-id" not in hdrs
        assert b'xmlns="http://obs.myhwclouds.com/doc/2015-06-30/"' in body
    finally:
        srv.faults({})


def test_objects_survive_restart_and_sigterm_exit_code():
    with S3Server() as srv:
        s3 = srv.client()
        s3.create_bucket(Bucket="persist")
        keys = {"plain/file": b"a", "trailing/": b"", "dbl//slash": b"b", "x" * 300: b"c",
                "sp ace/ü": b"d"}
        for k, v in keys.items():
            s3.put_object(Bucket="persist", Key=k, Body=v)
        old_port = srv.port
        proc = srv.proc
        srv.restart()
        assert proc.returncode == 0  # SIGTERM is a clean exit
        assert srv.port == old_port
        s3 = srv.client()
        for k, v in keys.items():
            got = s3.get_object(Bucket="persist", Key=k)
            assert got["Body"].read() == v and got["ETag"] == md5q(v)
        listed = [c["Key"] for c in s3.list_objects_v2(Bucket="persist")["Contents"]]
        assert listed == utf8_sorted(keys)
        proc = srv.proc
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


def test_port_file_and_banner(tmp_path):
    import subprocess
    from s3helper import PYTHON, clean_env
    port_file = tmp_path / "port"
    proc = subprocess.Popen([PYTHON, SERVER_SCRIPT, "--root", str(tmp_path / "root"), "--port", "0",
                             "--port-file", str(port_file), "--quiet"],
                            stdout=subprocess.PIPE, env=clean_env(), text=True)
    try:
        line = proc.stdout.readline().strip()
        port = int(port_file.read_text())
        assert line == "s3server listening on http://127.0.0.1:%d" % port
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert not list(tmp_path.glob("port.tmp*"))
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        proc.stdout.close()


def test_helper_ignores_aws_environment(srv, bucket, monkeypatch):
    # A developer's settings must not leak into the tests: a missing profile would make boto3
    # raise ProfileNotFound, a bogus CA bundle or endpoint would break requests.
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile-xyz")
    monkeypatch.setenv("AWS_CA_BUNDLE", "/nonexistent/ca.pem")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    s3 = srv.client()
    s3.put_object(Bucket=bucket, Key="env", Body=b"clean")
    assert s3.get_object(Bucket=bucket, Key="env")["Body"].read() == b"clean"
    assert os.environ["AWS_PROFILE"] == "no-such-profile-xyz"  # restored after client creation


# --------------------------------------------------------------------------------------------
# OBS listing modes and expiring credentials (the weather hoardfs must survive)


def test_fault_omit_next_marker(srv, s3, bucket):
    for k in ["d/a", "d/b", "d/sub/x", "d/t/y", "e"]:
        s3.put_object(Bucket=bucket, Key=k, Body=b"1")
    q = "delimiter=%2F&max-keys=2&prefix=d%2F"
    status, _, body = raw_request(srv, "GET", "/" + bucket, q)
    assert status == 200 and b"<NextMarker>d/b</NextMarker>" in body
    srv.faults({"omit_next_marker": True})
    try:
        assert srv.faults()["omit_next_marker"] is True
        status, _, body = raw_request(srv, "GET", "/" + bucket, q)
        assert status == 200 and b"<IsTruncated>true</IsTruncated>" in body
        assert b"NextMarker" not in body
        # The client continues from the last CommonPrefix: the marker skips the whole
        # rolled-up prefix, as S3 does.
        resp = s3.list_objects(Bucket=bucket, Prefix="d/", Delimiter="/", Marker="d/sub/")
        assert [p["Prefix"] for p in resp["CommonPrefixes"]] == ["d/t/"]
        assert "Contents" not in resp and "NextMarker" not in resp
        # max_keys_cap: small pages whatever the client asks for.
        srv.faults({"omit_next_marker": True, "max_keys_cap": 1})
        resp = s3.list_objects(Bucket=bucket, Prefix="d/", Delimiter="/", MaxKeys=1000)
        assert resp["MaxKeys"] == 1 and resp["IsTruncated"]
        assert [c["Key"] for c in resp["Contents"]] == ["d/a"]
        # V2 is unaffected: it has continuation tokens.
        status, _, body = raw_request(srv, "GET", "/" + bucket, q + "&list-type=2")
        assert b"<NextContinuationToken>" in body
    finally:
        srv.faults({})


def test_fault_pfs_lists_the_directory_itself(srv, s3, bucket):
    for k in ["unit-test/test", "unit-test/sub/x", "other/y"]:
        s3.put_object(Bucket=bucket, Key=k, Body=b"12")
    srv.faults({"pfs": True, "flavour": "obs"})
    try:
        resp = s3.list_objects(Bucket=bucket, Prefix="unit-test/", Delimiter="/")
        assert [c["Key"] for c in resp["Contents"]] == ["unit-test/", "unit-test/test"]
        assert resp["Contents"][0]["Size"] == 0
        assert [p["Prefix"] for p in resp["CommonPrefixes"]] == ["unit-test/sub/"]
        # The self entry counts against max-keys and paging goes on after it.
        resp = s3.list_objects(Bucket=bucket, Prefix="unit-test/", Delimiter="/", MaxKeys=1)
        assert [c["Key"] for c in resp["Contents"]] == ["unit-test/"] and resp["IsTruncated"]
        resp = s3.list_objects(Bucket=bucket, Prefix="unit-test/", Delimiter="/",
                               Marker="unit-test/")
        assert [c["Key"] for c in resp["Contents"]] == ["unit-test/test"]
        # The bucket root and a missing directory have no self entry.
        resp = s3.list_objects(Bucket=bucket, Delimiter="/")
        assert "Contents" not in resp
        resp = s3.list_objects(Bucket=bucket, Prefix="nope/", Delimiter="/")
        assert "Contents" not in resp
        # A real marker object is not doubled.
        s3.put_object(Bucket=bucket, Key="other/", Body=b"")
        resp = s3.list_objects(Bucket=bucket, Prefix="other/", Delimiter="/")
        assert [c["Key"] for c in resp["Contents"]] == ["other/", "other/y"]
    finally:
        srv.faults({})
    resp = s3.list_objects(Bucket=bucket, Prefix="unit-test/", Delimiter="/")
    assert [c["Key"] for c in resp["Contents"]] == ["unit-test/test"]


def test_expiring_credentials():
    with S3Server() as srv:
        srv.create_bucket("cred")
        srv.put("cred", "k", b"v")
        out = srv.admin("POST", "/_admin/credentials",
                        {"access_key": "TMP1", "secret_key": "sk1", "security_token": "tok1",
                         "expires_in_s": 3600})
        assert {c["access_key"] for c in out["credentials"]} == {srv.access_key, "TMP1"}
        assert all("secret" not in str(c) for c in out["credentials"])
        tmp = srv.client(access_key="TMP1", secret_key="sk1", session_token="tok1")
        assert tmp.get_object(Bucket="cred", Key="k")["Body"].read() == b"v"
        with pytest.raises(ClientError) as e:
            srv.client(access_key="TMP1", secret_key="sk1", session_token="bad").get_object(
                Bucket="cred", Key="k")
        assert error_of(e) == ("InvalidToken", 403)
        # Rotation: TMP2 replaces TMP1, whose requests now get ExpiredToken (also V2/OBS).
        srv.admin("POST", "/_admin/credentials",
                  {"access_key": "TMP2", "secret_key": "sk2", "security_token": "tok2",
                   "expire": ["TMP1"]})
        with pytest.raises(ClientError) as e:
            tmp.get_object(Bucket="cred", Key="k")
        assert error_of(e) == ("ExpiredToken", 403)
        v2 = srv.client(access_key="TMP1", secret_key="sk1", session_token="tok1",
                        signature_version="s3")
        with pytest.raises(ClientError) as e:
            v2.get_object(Bucket="cred", Key="k")
        assert error_of(e) == ("ExpiredToken", 403)
        new = srv.client(access_key="TMP2", secret_key="sk2", session_token="tok2")
        assert new.get_object(Bucket="cred", Key="k")["Body"].read() == b"v"
        # A retired token presented with a live key is expired too.
        with pytest.raises(ClientError) as e:
            srv.client(access_key="TMP2", secret_key="sk2", session_token="tok1").get_object(
                Bucket="cred", Key="k")
        assert error_of(e) == ("ExpiredToken", 403)
        # expires_in_s runs out by itself.
        srv.admin("POST", "/_admin/credentials",
                  {"access_key": "TMP3", "secret_key": "sk3", "expires_in_s": 0.5})
        t3 = srv.client(access_key="TMP3", secret_key="sk3")
        assert t3.get_object(Bucket="cred", Key="k")["Body"].read() == b"v"
        time.sleep(0.7)
        with pytest.raises(ClientError) as e:
            t3.get_object(Bucket="cred", Key="k")
        assert error_of(e) == ("ExpiredToken", 403)
        # expire_others leaves only the new one; the command-line key too.
        srv.admin("POST", "/_admin/credentials",
                  {"access_key": "TMP4", "secret_key": "sk4", "expire_others": True})
        with pytest.raises(ClientError) as e:
            srv.client().get_object(Bucket="cred", Key="k")
        assert error_of(e) == ("ExpiredToken", 403)
        with pytest.raises(RuntimeError):
            srv.admin("POST", "/_admin/credentials", {"acces_key": "typo"})
