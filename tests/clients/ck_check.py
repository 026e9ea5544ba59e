#!/usr/bin/env python3
"""Reads a whole topic with confluent-kafka (assigned partitions, from the beginning to
the high watermark) and checks it:
  * every record has the exact content of its index (kt_common) and sits in partition
    index % P; no index appears twice;
  * --range A:B: every index in [A, B) is present, nothing else, in index order within
    each partition, at offsets 0, 1, 2, ... (no gap, no duplicate);
  * --allowed A:B: indexes outside [A, B) are errors (records may be missing);
  * --ack-file F (repeatable, "partition offset index" lines): each acknowledged record
    is present exactly once at its acknowledged offset."""

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from ck_common import consumer_conf
from kt_common import Timer, fail, headers_of, index_of, norm_headers, summary, timestamp_of, value_of


def span(s):
    a, b = s.split(":")
    return int(a), int(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--range", type=span)
    ap.add_argument("--allowed", type=span)
    ap.add_argument("--ack-file", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    P = a.partitions
    timer = Timer()
    deadline = time.monotonic() + a.timeout

    c = Consumer(consumer_conf(a.bootstrap))
    high = []
    for part in range(P):
        lo, hi = c.get_watermark_offsets(TopicPartition(a.topic, part), timeout=10)
        if lo != 0:
            fail("partition %d log start offset %d, expected 0" % (part, lo))
        high.append(hi)
    total = sum(high)
    c.assign([TopicPartition(a.topic, part, OFFSET_BEGINNING) for part in range(P)])
    at = {}  # (partition, offset) -> index
    where_of = {}  # index -> (partition, offset)
    last_off = [-1] * P
    last_idx = [-1] * P
    out_of_order = []
    got = 0
    while got < total and time.monotonic() < deadline:
        for msg in c.consume(num_messages=2000, timeout=1.0):
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    print("consumer error: %s" % err, file=sys.stderr)
                continue
            part, off = msg.partition(), msg.offset()
            if off >= high[part]:
                continue  # past the watermark read at the start
            i = index_of(msg.key())
            where = "p%d@%d (k%d)" % (part, off, i)
            if off <= last_off[part]:
                fail("%s: offset not after the previous one (%d)" % (where, last_off[part]))
            if i <= last_idx[part]:
                out_of_order.append(where)
            last_off[part], last_idx[part] = off, i
            if i in where_of:
                fail("k%d appears twice: p%d@%d and %s" % ((i,) + where_of[i] + (where,)))
            where_of[i] = (part, off)
            at[(part, off)] = i
            if part != i % P:
                fail("%s: in the wrong partition" % where)
            if msg.value() != value_of(i):
                fail("%s: value %r, expected %r" % (where, msg.value(), value_of(i)))
            if norm_headers(msg.headers()) != headers_of(i):
                fail("%s: headers %r, expected %r" % (where, msg.headers(), headers_of(i)))
            if msg.timestamp()[1] != timestamp_of(i):
                fail("%s: timestamp %r, expected %d" % (where, msg.timestamp(), timestamp_of(i)))
            got += 1
    c.close()
    if got != total:
        fail("read %d of %d records (high watermarks %r) before the deadline" % (got, total, high))

    gaps = sum(high) - len(at)  # offsets below the watermark that held no record
    if a.range:
        lo, hi = a.range
        missing = [i for i in range(lo, hi) if i not in where_of]
        extra = sorted(i for i in where_of if not lo <= i < hi)
        if missing or extra:
            fail("%d missing, %d unexpected records" % (len(missing), len(extra)), missing=missing[:20], extra=extra[:20])
        if out_of_order:
            fail("records out of index order", first=out_of_order[:10])
        for part in range(P):
            for off in range(high[part]):
                if (part, off) not in at:
                    fail("partition %d has no record at offset %d (gap)" % (part, off))
    if a.allowed:
        lo, hi = a.allowed
        extra = sorted(i for i in where_of if not lo <= i < hi)
        if extra:
            fail("%d records outside [%d, %d)" % (len(extra), lo, hi), extra=extra[:20])

    acked = 0
    for path in a.ack_file:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                part, off, i = (int(x) for x in line.split())
                acked += 1
                if at.get((part, off)) != i:
                    fail(
                        "acknowledged k%d at p%d@%d, but that offset holds %s and k%d is at %s"
                        % (i, part, off, "k%d" % at[(part, off)] if (part, off) in at else "nothing", i, where_of.get(i, "nowhere"))
                    )
    summary(
        topic=a.topic,
        records=got,
        high_watermarks=high,
        acked_checked=acked,
        unacked_present=got - acked if a.ack_file else None,
        offset_gaps=gaps,
        out_of_order=len(out_of_order),
        seconds=timer.lap(),
    )


if __name__ == "__main__":
    main()
