#!/usr/bin/env python3
"""Consumer-group client for the mirror metadata sync tests (confluent-kafka), one mode
per run. Every mode prints one JSON line on stdout at the end.

consume-half: joins --group, consumes --count records of --topic, commits (synchronous)
    and leaves (--partition-fetch-bytes: librdkafka's max.partition.fetch.bytes). Writes the consumed keys to --keys-out, one per line.
    Prints {"count": N, "committed": {partition: offset}}.
consume-rest: joins --group and consumes from the group's committed offsets to the end of
    every one of --partitions partitions, commits and leaves. Writes the keys to
    --keys-out. Prints {"count": N, "first": {partition: first offset read}}.
hold: joins --group, waits for all --partitions partitions, commits offset
    --commit-offset for each, prints {"ready": true}, then stays an active member until
    --stop-file exists, and leaves. Prints {"done": true}.
"""

import argparse
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition


def fail(message):
    print(json.dumps({"error": message}), flush=True)
    sys.exit(1)


def consumer(a, **extra):
    conf = {
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "session.timeout.ms": 10000,
    }
    conf.update(extra)
    return Consumer(conf)


def write_keys(path, keys):
    if path:
        with open(path, "w") as f:
            for k in keys:
                f.write(k + "\n")


def consume_half(a):
    extra = {}
    if a.partition_fetch_bytes:
        # One batch per partition per fetch: the partitions interleave.
        extra["max.partition.fetch.bytes"] = a.partition_fetch_bytes
    c = consumer(a, **extra)
    c.subscribe([a.topic])
    keys = []
    deadline = time.monotonic() + a.timeout
    while len(keys) < a.count:
        if time.monotonic() > deadline:
            fail("consumed %d of %d records before the timeout" % (len(keys), a.count))
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            fail("consume error: %s" % m.error())
        keys.append(m.key().decode())
    c.commit(asynchronous=False)
    committed = c.committed(c.assignment(), timeout=10)
    c.close()
    write_keys(a.keys_out, keys)
    print(json.dumps({
        "count": len(keys),
        "committed": {str(tp.partition): tp.offset for tp in committed},
    }), flush=True)


def consume_rest(a):
    c = consumer(a, **{"enable.partition.eof": True})
    c.subscribe([a.topic])
    keys = []
    first = {}
    eof = set()
    deadline = time.monotonic() + a.timeout
    while len(eof) < a.partitions:
        if time.monotonic() > deadline:
            fail("reached the end of %d of %d partitions before the timeout"
                 % (len(eof), a.partitions))
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            fail("consume error: %s" % m.error())
        first.setdefault(str(m.partition()), m.offset())
        keys.append(m.key().decode())
    if keys:
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:
            fail("commit: %s" % e)
    c.close()
    write_keys(a.keys_out, keys)
    print(json.dumps({"count": len(keys), "first": first}), flush=True)


def hold(a):
    assigned = []

    def on_assign(_consumer, partitions):
        assigned[:] = partitions

    c = consumer(a)
    c.subscribe([a.topic], on_assign=on_assign)
    deadline = time.monotonic() + a.timeout
    while len(assigned) < a.partitions:
        if time.monotonic() > deadline:
            fail("assigned %d of %d partitions before the timeout"
                 % (len(assigned), a.partitions))
        c.poll(0.2)
    c.commit(offsets=[TopicPartition(a.topic, p, a.commit_offset)
                      for p in range(a.partitions)], asynchronous=False)
    print(json.dumps({"ready": True}), flush=True)
    deadline = time.monotonic() + a.timeout
    while not os.path.exists(a.stop_file):
        if time.monotonic() > deadline:
            fail("no stop file before the timeout")
        c.poll(0.2)
    c.close()
    print(json.dumps({"done": True}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["consume-half", "consume-rest", "hold"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--partition-fetch-bytes", type=int, default=0)
    ap.add_argument("--keys-out")
    ap.add_argument("--commit-offset", type=int, default=1)
    ap.add_argument("--stop-file")
    ap.add_argument("--timeout", type=float, default=90.0)
    a = ap.parse_args()
    if a.mode == "consume-half":
        consume_half(a)
    elif a.mode == "consume-rest":
        consume_rest(a)
    else:
        if not a.stop_file:
            fail("hold needs --stop-file")
        hold(a)


if __name__ == "__main__":
    main()
