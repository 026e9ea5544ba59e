#!/usr/bin/env python3
"""A foreign source cluster for mirror tests: librdkafka's mock cluster (3 brokers,
started in-process by the confluent-kafka wheel). Produces --count records to --topic
with an idempotent producer, prints one JSON line {"bootstrap": "...", "partitions": P,
"acked": N}, then keeps the cluster alive until stdin closes."""

import argparse
import json
import sys

from confluent_kafka import Producer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=1000)
    a = ap.parse_args()
    p = Producer({"test.mock.num.brokers": 3, "enable.idempotence": True, "linger.ms": 5})
    acked = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[0] += 1

    for i in range(a.count):
        p.produce(a.topic, key=("m-%d" % i).encode(), value=("%08d" % i).encode(),
                  on_delivery=on_delivery)
        p.poll(0)
    p.flush(30)
    md = p.list_topics(a.topic, timeout=10)
    brokers = ",".join("%s:%d" % (b.host, b.port) for b in md.brokers.values())
    print(json.dumps({"bootstrap": brokers, "partitions": len(md.topics[a.topic].partitions),
                      "acked": acked[0]}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
