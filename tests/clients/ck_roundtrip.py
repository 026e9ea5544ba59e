#!/usr/bin/env python3
"""confluent-kafka round trip: create a topic, produce `count` records (record i to
partition i % P with the key, value, headers and timestamp of kt_common), then consume
every partition from the beginning and check each record exactly once, in order, with
exact content at the offset its delivery report gave. Optionally checks
offsets_for_times (ListOffsets by timestamp)."""

import argparse
import sys
import time

import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

from ck_common import consumer_conf, create_topic, wait_topic
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--create", action="store_true", help="CreateTopics via AdminClient")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--idempotent", action="store_true")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--no-null-headers", action="store_true")
    ap.add_argument("--check-times", action="store_true")
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    P, N = a.partitions, a.count
    null_headers = not a.no_null_headers
    timer = Timer()
    deadline = time.monotonic() + a.timeout

    note = create_topic(a.bootstrap, a.topic, P) if a.create else "auto-create"
    print("topic %s: %s" % (a.topic, note), file=sys.stderr)

    errors = []
    delivered = {}  # i -> (partition, offset)

    def on_delivery(err, msg):
        if err is not None:
            if len(errors) < 20:
                errors.append("%s: %s" % (msg.key(), err))
            else:
                errors.append(None)
            return
        delivered[index_of(msg.key())] = (msg.partition(), msg.offset())

    p = Producer(
        {
            "bootstrap.servers": a.bootstrap,
            "enable.idempotence": a.idempotent,
            "acks": a.acks,
            "compression.type": a.compression,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "queue.buffering.max.messages": 200000,
        }
    )
    wait_topic(p, a.topic, P)
    for i in range(N):
        while True:
            try:
                p.produce(
                    a.topic,
                    key=key_of(i),
                    value=value_of(i),
                    headers=headers_of(i, null_headers),
                    partition=i % P,
                    timestamp=timestamp_of(i),
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                p.poll(0.05)
                if time.monotonic() > deadline:
                    fail("producer queue stayed full")
        if i % 1000 == 0:
            p.poll(0)
    remaining = p.flush(max(1.0, deadline - time.monotonic()))
    produce_s = timer.lap()
    if remaining:
        fail("%d records not delivered before the deadline" % remaining, errors=errors[:20])
    if errors:
        fail("%d delivery errors" % len(errors), first=[e for e in errors if e][:20])
    if len(delivered) != N:
        fail("%d delivery reports for %d records" % (len(delivered), N))

    # Offsets of a fresh topic: partition p holds its records at 0, 1, 2, ... in order.
    per_part = [0] * P
    for i in range(N):
        part, off = delivered[i]
        if part != i % P:
            fail("record %d delivered to partition %d, produced to %d" % (i, part, i % P))
        if off != per_part[part]:
            fail(
                "record %d: delivery offset %d in partition %d, expected %d"
                % (i, off, part, per_part[part])
            )
        per_part[part] += 1

    c = Consumer(consumer_conf(a.bootstrap))
    try:
        for part in range(P):
            lo, hi = c.get_watermark_offsets(TopicPartition(a.topic, part), timeout=10)
            if (lo, hi) != (0, per_part[part]):
                fail(
                    "partition %d watermarks (%d, %d), expected (0, %d)"
                    % (part, lo, hi, per_part[part])
                )
        c.assign([TopicPartition(a.topic, part, OFFSET_BEGINNING) for part in range(P)])
        next_i = list(range(P))  # next expected index per partition
        got = 0
        consume_errors = []
        while got < N and time.monotonic() < deadline:
            for msg in c.consume(num_messages=2000, timeout=1.0):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        consume_errors.append(str(err))
                        print("consumer error: %s" % err, file=sys.stderr)
                    continue
                part = msg.partition()
                i = index_of(msg.key())
                if part >= P or i != next_i[part]:
                    fail(
                        "partition %d offset %d holds k%d, expected k%d (duplicate, gap "
                        "or reordering)" % (part, msg.offset(), i, next_i[part])
                    )
                next_i[part] += P
                check_record(msg, i, delivered[i], null_headers)
                got += 1
            if len(consume_errors) > 100:
                fail("consumer errors", errors=consume_errors[:20])
        consume_s = timer.lap()
        if got != N:
            fail(
                "consumed %d of %d records before the deadline" % (got, N),
                next_expected=next_i,
                errors=consume_errors[:20],
            )
        # Nothing past the end.
        for msg in c.consume(num_messages=100, timeout=0.5):
            if msg.error() is None:
                fail("extra record after all %d: p%d@%d" % (N, msg.partition(), msg.offset()))

    finally:
        c.close()
    times = None
    if a.check_times:
        # A consumer that is not fetching: on a fetching one each ListOffsets request
        # queues behind a long-polling Fetch on the same connection.
        c = Consumer(consumer_conf(a.bootstrap))
        try:
            times = check_offsets_for_times(c, a.topic, P, per_part)
        finally:
            c.close()
    summary(
        client="confluent-kafka %s" % (getattr(confluent_kafka, "__version__", None) or confluent_kafka.version()[0]),
        librdkafka=confluent_kafka.libversion()[0],
        topic=a.topic,
        topic_note=note,
        partitions=P,
        produced=N,
        consumed=got,
        compression=a.compression,
        idempotent=a.idempotent,
        produce_s=produce_s,
        consume_s=consume_s,
        offsets_for_times=times,
    )


def check_record(msg, i, delivered_at, null_headers):
    where = "p%d@%d (k%d)" % (msg.partition(), msg.offset(), i)
    if (msg.partition(), msg.offset()) != delivered_at:
        fail("%s: delivery report said p%d@%d" % ((where,) + delivered_at))
    if msg.value() != value_of(i):
        fail("%s: value %r, expected %r" % (where, msg.value(), value_of(i)))
    h = norm_headers(msg.headers())
    if h != headers_of(i, null_headers):
        fail("%s: headers %r, expected %r" % (where, h, headers_of(i, null_headers)))
    ts_type, ts = msg.timestamp()
    if ts_type != TIMESTAMP_CREATE_TIME or ts != timestamp_of(i):
        fail("%s: timestamp (%d, %d), expected CreateTime %d" % (where, ts_type, ts, timestamp_of(i)))


def check_offsets_for_times(c, topic, P, per_part):
    """Record at offset k of partition p is index k * P + p with timestamp BASE_TS + i."""
    queries = []  # (partition, timestamp, expected offset)
    for part in range(P):
        n = per_part[part]
        if n < 3:
            continue
        k = n // 2
        i = k * P + part
        queries.append((part, timestamp_of(i), k))  # exact timestamp
        if P > 1:
            queries.append((part, timestamp_of(i) - 1, k))  # between k-1 and k
        queries.append((part, timestamp_of(0) - 1000, 0))  # before everything
        queries.append((part, timestamp_of((n - 1) * P + part), n - 1))  # the last one
        queries.append((part, timestamp_of(n * P * 2), -1))  # after everything
    checked = 0
    # One request per round, each asking every partition once.
    rounds = {}
    for part, ts, want in queries:
        rounds.setdefault(part, []).append((ts, want))
    for r in range(max(len(v) for v in rounds.values()) if rounds else 0):
        batch = [(part, qs[r]) for part, qs in sorted(rounds.items()) if r < len(qs)]
        res = c.offsets_for_times([TopicPartition(topic, part, ts) for part, (ts, _) in batch], timeout=10)
        got = {x.partition: x for x in res}
        for part, (ts, want) in batch:
            x = got.get(part)
            if x is None:
                fail("offsets_for_times: no answer for partition %d" % part)
            if x.error is not None:
                fail("offsets_for_times(p%d, %d): %s" % (part, ts, x.error))
            if x.offset != want:
                fail("offsets_for_times(p%d, ts=%d) = %d, expected %d" % (part, ts, x.offset, want))
            checked += 1
    return checked


if __name__ == "__main__":
    main()
