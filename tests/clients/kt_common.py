"""Shared helpers of the client scripts: the deterministic record of index i, failure
and summary output. Works with Debian's python3 and the project's virtualenv."""

import json
import os
import sys
import time

# Explicit CreateTime of record i is BASE_TS + i (milliseconds). The test harness sets
# KT_BASE_TS a little in the past, the same for every script of a run: timestamps far in
# the past would make the broker roll a segment per batch (segment.ms counts from the
# first record's timestamp, as in Kafka) and could fall under retention.
BASE_TS = int(os.environ.get("KT_BASE_TS", "1700000000000"))


def key_of(i):
    return b"k%d" % i


def index_of(key):
    if key is None or not key.startswith(b"k"):
        raise ValueError("unexpected key %r" % (key,))
    return int(key[1:])


def value_of(i):
    """Value of record i: a few tombstones (None), otherwise text plus binary bytes."""
    if i % 997 == 996:
        return None
    # A compressible run (so that the producer really compresses), then binary bytes.
    return b"v%d|" % i + b"twinlog-" * (i % 16) + bytes(((i * 31 + j) & 0xFF) for j in range(i % 64))


def headers_of(i, null_values=True):
    """Headers of record i as a list of (str, bytes-or-None); some records have none."""
    m = i % 5
    if m == 0:
        return []
    if m == 1:
        return [("idx", b"%d" % i), ("dup", b"a"), ("dup", b"b")]
    if m == 2:
        return [("idx", b"%d" % i), ("empty", b"")]
    if m == 3 and null_values:
        return [("idx", b"%d" % i), ("null", None)]
    return [("idx", b"%d" % i)]


def timestamp_of(i):
    return BASE_TS + i


def norm_headers(h):
    """Headers as a client returned them, as a list of (str, bytes-or-None)."""
    if not h:
        return []
    out = []
    for k, v in h:
        if isinstance(k, bytes):
            k = k.decode()
        out.append((k, v))
    return out


def fail(msg, **extra):
    print("FAIL: " + msg, file=sys.stderr)
    if extra:
        print(json.dumps(extra, default=str)[:4000], file=sys.stderr)
    sys.exit(1)


def summary(**fields):
    fields.setdefault("ok", True)
    print(json.dumps(fields, default=str, sort_keys=True))


class Timer:
    def __init__(self):
        self.t0 = time.monotonic()

    def lap(self):
        t = time.monotonic()
        d = t - self.t0
        self.t0 = t
        return round(d, 3)
