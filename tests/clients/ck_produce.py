#!/usr/bin/env python3
"""confluent-kafka producer for the restart tests: produces records start..start+count
(record i to partition i % P, content of kt_common) at an optional rate and appends
every acknowledged record to --ack-file as "partition offset index" (line-buffered, so
the file is current while the broker is killed and restarted underneath)."""

import argparse
import sys
import time

import confluent_kafka
from confluent_kafka import Producer

from ck_common import wait_topic
from kt_common import Timer, fail, headers_of, index_of, key_of, summary, timestamp_of, value_of


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--ack-file", required=True)
    ap.add_argument("--rate", type=float, default=0.0, help="records/s; 0: unlimited")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--no-idempotence", action="store_true")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--timeout", type=float, default=150.0)
    a = ap.parse_args()
    P = a.partitions
    timer = Timer()
    deadline = time.monotonic() + a.timeout
    acked = [0]
    errors = []
    fatal = []
    ack_file = open(a.ack_file, "a", buffering=1)

    def on_delivery(err, msg):
        if err is not None:
            errors.append("%s: %s" % (msg.key(), err))
            if err.fatal():
                fatal.append(str(err))
            return
        ack_file.write("%d %d %d\n" % (msg.partition(), msg.offset(), index_of(msg.key())))
        acked[0] += 1

    def on_error(err):
        # Connection errors while the broker restarts are expected; log them.
        print("producer error: %s" % err, file=sys.stderr)
        if err.fatal():
            fatal.append(str(err))

    p = Producer(
        {
            "bootstrap.servers": a.bootstrap,
            "enable.idempotence": not a.no_idempotence,
            "acks": a.acks,
            "compression.type": a.compression,
            "linger.ms": 5,
            "message.timeout.ms": 90000,
            "retry.backoff.ms": 100,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "error_cb": on_error,
        }
    )
    wait_topic(p, a.topic, P)
    t0 = time.monotonic()
    end = a.start + a.count
    for i in range(a.start, end):
        if fatal:
            break
        if a.rate > 0 and (i - a.start) % 200 == 0:
            due = t0 + (i - a.start) / a.rate
            while time.monotonic() < due:
                p.poll(min(0.05, max(0.0, due - time.monotonic())))
        while True:
            try:
                p.produce(
                    a.topic,
                    key=key_of(i),
                    value=value_of(i),
                    headers=headers_of(i),
                    partition=i % P,
                    timestamp=timestamp_of(i),
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                p.poll(0.05)
                if time.monotonic() > deadline:
                    fail("producer queue stayed full")
        if i % 500 == 0:
            p.poll(0)
    remaining = p.flush(max(1.0, deadline - time.monotonic()))
    ack_file.close()
    info = dict(
        client="confluent-kafka %s" % (getattr(confluent_kafka, "__version__", None) or confluent_kafka.version()[0]),
        librdkafka=confluent_kafka.libversion()[0],
        topic=a.topic,
        start=a.start,
        count=a.count,
        acked=acked[0],
        errors=len(errors),
        undelivered=remaining,
        fatal=fatal[:3],
        seconds=timer.lap(),
    )
    if remaining or errors or fatal or acked[0] != a.count:
        fail(
            "%d of %d records acknowledged (%d delivery errors, %d undelivered, fatal: %s)"
            % (acked[0], a.count, len(errors), remaining, fatal[:3]),
            first_errors=errors[:10],
            **info
        )
    summary(**info)


if __name__ == "__main__":
    main()
