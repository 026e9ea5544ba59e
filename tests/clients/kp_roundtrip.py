#!/usr/bin/env python3
"""kafka-python round trip: produce `count` records (record i to partition i % P, with
the key, value, headers and timestamp of kt_common; no null header values), then
consume every partition from the beginning with group_id=None and check each record
exactly once, in order, with exact content at the offset the producer was told."""

import argparse
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kt_common import (
    Timer,
    fail,
    headers_of,
    index_of,
    key_of,
    norm_headers,
    summary,
    timestamp_of,
    value_of,
)



# kafka-python 2.x guesses the broker version from ApiVersions within a 2 s default and
# falls back to 0.8-era requests when that runs out (seen on a loaded CI machine); 3.x
# removed the setting.
import kafka as _kafka

VERSION_PROBE = (
    {"api_version_auto_timeout_ms": 30000} if _kafka.__version__.startswith("2.") else {}
)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--compression", default=None)
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    P, N = a.partitions, a.count
    timer = Timer()
    deadline = time.monotonic() + a.timeout

    producer = KafkaProducer(
        bootstrap_servers=[a.bootstrap],
        **VERSION_PROBE,
        acks="all",
        linger_ms=5,
        compression_type=a.compression,
        request_timeout_ms=30000,
        max_block_ms=30000,
    )
    # Metadata for the topic auto-creates it; wait until it has all its partitions.
    parts = None
    while time.monotonic() < deadline:
        parts = producer.partitions_for(a.topic)
        if parts and len(parts) == P:
            break
        if parts and len(parts) != P:
            fail("topic %s has %d partitions, want %d" % (a.topic, len(parts), P))
        time.sleep(0.2)
    if not parts or len(parts) != P:
        fail("topic %s not ready: partitions_for = %r" % (a.topic, parts))

    futures = []
    for i in range(N):
        futures.append(
            producer.send(
                a.topic,
                key=key_of(i),
                value=value_of(i),
                headers=headers_of(i, null_values=False),
                partition=i % P,
                timestamp_ms=timestamp_of(i),
            )
        )
    producer.flush(timeout=max(1.0, deadline - time.monotonic()))
    delivered = {}
    per_part = [0] * P
    for i, f in enumerate(futures):
        try:
            md = f.get(timeout=max(1.0, deadline - time.monotonic()))
        except Exception as e:  # noqa: BLE001
            fail("record %d not delivered: %r" % (i, e))
        if md.partition != i % P or md.offset != per_part[i % P]:
            fail(
                "record %d acknowledged at p%d@%d, expected p%d@%d"
                % (i, md.partition, md.offset, i % P, per_part[i % P])
            )
        per_part[i % P] += 1
        delivered[i] = (md.partition, md.offset)
    producer.close(timeout=10)
    produce_s = timer.lap()

    consumer = KafkaConsumer(
        bootstrap_servers=[a.bootstrap],
        **VERSION_PROBE,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )
    tps = [TopicPartition(a.topic, part) for part in range(P)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    for tp in tps:
        if ends[tp] != per_part[tp.partition]:
            fail("end offset of p%d is %d, expected %d" % (tp.partition, ends[tp], per_part[tp.partition]))
    next_i = list(range(P))
    got = 0
    while got < N and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=1000, max_records=2000)
        for tp, records in batches.items():
            for r in records:
                i = index_of(r.key)
                where = "p%d@%d (k%d)" % (r.partition, r.offset, i)
                if i != next_i[r.partition]:
                    fail("%s: expected k%d (duplicate, gap or reordering)" % (where, next_i[r.partition]))
                next_i[r.partition] += P
                if (r.partition, r.offset) != delivered[i]:
                    fail("%s: producer was told p%d@%d" % ((where,) + delivered[i]))
                if r.value != value_of(i):
                    fail("%s: value %r, expected %r" % (where, r.value, value_of(i)))
                h = norm_headers(r.headers)
                if h != headers_of(i, null_values=False):
                    fail("%s: headers %r, expected %r" % (where, h, headers_of(i, False)))
                if r.timestamp != timestamp_of(i) or r.timestamp_type != 0:
                    fail("%s: timestamp %r type %r, expected CreateTime %d" % (where, r.timestamp, r.timestamp_type, timestamp_of(i)))
                got += 1
    consume_s = timer.lap()
    extra = consumer.poll(timeout_ms=300)
    consumer.close()
    if got != N:
        fail("consumed %d of %d records before the deadline" % (got, N), next_expected=next_i)
    if any(extra.values()):
        fail("records past the end: %r" % (extra,))
    summary(
        client="kafka-python %s" % kafka.__version__,
        python=sys.version.split()[0],
        topic=a.topic,
        partitions=P,
        produced=N,
        consumed=got,
        compression=a.compression,
        produce_s=produce_s,
        consume_s=consume_s,
    )


if __name__ == "__main__":
    main()
