# SPDX-License-Identifier: MIT
"""Soak under hard weather: 16 parallel checksum readers over 8 files of
24 MiB read in 256 KiB parts (768 ranged GETs at least per round), while
20% of GETs are answered 503 SlowDown and 10% are reset midway through
their body; three rounds, each on a fresh mount and empty cache.  Every
checksum must be right.  The figures (requests, retries, resumed bodies,
throttling, wall time) go to the session summary and the test's log; see
conftest.figures."""
import hashlib
import os
import random
import re
import subprocess
import time

MiB = 1 << 20
FILES = 8
SIZE = 24 * MiB
PART = 256 << 10
READERS = 16
ROUNDS = 3
RESET_AFTER = 100 << 10  # bytes of a body sent before the reset

SUMMARY = re.compile(
    r"client: (\d+) requests, (\d+) attempts, (\d+) retries \((\d+) "
    r"resumed bodies\), (\d+) throttled, (\d+) failed.*lowest (\d+)")


def one_round(s3, bucket, mount_factory, digests, n):
    keys = sorted(digests)
    with mount_factory(bucket, args=["--part-size", str(PART)],
                       name="soak%d" % n) as m:
        os.listdir(os.path.join(m.path, "soak"))
        # 503 first (20% of GETs); of the GETs that pass it, 12.5% are
        # reset midway: 10% of all GETs.
        s3.faults({"seed": n, "errors": [
            {"op": "GET", "rate": 0.2, "status": 503, "code": "SlowDown"},
            {"op": "GET", "rate": 0.125, "reset_after_bytes": RESET_AFTER}]})
        s3.reset()
        t0 = time.monotonic()
        procs = []
        for r in range(READERS):
            key = keys[r % FILES]
            procs.append((key, subprocess.Popen(
                ["sha256sum", os.path.join(m.path, key)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        bad = []
        for key, p in procs:
            out, err = p.communicate(timeout=240)
            if p.returncode != 0 or out.split()[0] != digests[key]:
                bad.append((key, p.returncode, out, err))
        wall = time.monotonic() - t0
        st = s3.stats()
        rules = s3.faults()["errors"]
        s3.faults({})
    assert not bad, bad
    gets = [r for r in st["requests"] if r["op"] == "GET"]
    slowdowns, resets = rules[0]["injected"], rules[1]["injected"]
    assert slowdowns > 0 and resets > 0
    assert len(gets) == len([r for r in gets if r["status"] < 300]) + \
        slowdowns
    # Whole and only once: every object byte was fetched once, plus what
    # the bodies that broke had sent before they broke.
    assert st["get_bytes"] <= FILES * SIZE + resets * RESET_AFTER
    summary = SUMMARY.search(m.logs())
    assert summary, m.logs()[-2000:]
    c = dict(zip(("requests", "attempts", "retries", "resumed", "throttled",
                  "failed", "lowest_cap"), map(int, summary.groups())))
    assert c["failed"] == 0
    assert c["throttled"] >= slowdowns and c["resumed"] >= resets - 1
    return {"wall": wall, "server_requests": len(st["requests"]),
            "gets": len(gets), "slowdowns": slowdowns, "resets": resets,
            "get_bytes": st["get_bytes"], **c}


def test_soak_checksums_under_503_and_resets(s3, bucket, mount_factory,
                                             figures):
    digests = {}
    for i in range(FILES):
        data = random.Random(i).randbytes(SIZE)
        key = "soak/f%d.bin" % i
        path = os.path.join(s3.root, bucket, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        digests[key] = hashlib.sha256(data).hexdigest()
    total = {}
    for n in range(ROUNDS):
        r = one_round(s3, bucket, mount_factory, digests, n)
        for k, v in r.items():
            total[k] = min(total.get(k, v), v) if k == "lowest_cap" \
                else total.get(k, 0) + v
    t = total
    figures("soak: %d rounds of %d readers over %d files x %d MiB "
            "(%d KiB parts): %.1f s reading (%.0f MiB/s); server: %d "
            "requests, %d GETs, %d SlowDown, %d reset midway, %d body "
            "bytes; client: %d requests, %d attempts, %d retries (%d "
            "resumed bodies), %d throttled, lowest in-flight cap %d, 0 "
            "failed; every checksum right"
            % (ROUNDS, READERS, FILES, SIZE // MiB, PART >> 10, t["wall"],
               ROUNDS * FILES * SIZE / MiB / t["wall"], t["server_requests"],
               t["gets"], t["slowdowns"], t["resets"], t["get_bytes"],
               t["requests"], t["attempts"], t["retries"], t["resumed"],
               t["throttled"], t["lowest_cap"]))
