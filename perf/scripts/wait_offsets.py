#!/usr/bin/env python3
"""Waits until the partitions of a topic hold RECORDS records in all (the sum of their
high watermarks), polling every 100 ms with one confluent-kafka consumer, and prints one
JSON line: seconds until the first record arrived and until all had (from this script's
start), and the records seen.

    wait_offsets.py BOOTSTRAP TOPIC RECORDS [--timeout S]
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("records", type=int)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    start = time.monotonic()
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "wait-offsets",
                  "enable.auto.commit": False})
    first = None
    seen = 0
    try:
        while time.monotonic() - start < a.timeout:
            md = c.list_topics(a.topic, timeout=10)
            parts = md.topics[a.topic].partitions if a.topic in md.topics else {}
            seen = 0
            for p in parts:
                _, high = c.get_watermark_offsets(TopicPartition(a.topic, p), timeout=10, cached=False)
                seen += max(high, 0)
            if seen > 0 and first is None:
                first = time.monotonic() - start
            if seen >= a.records:
                print(json.dumps({"first_s": first, "done_s": time.monotonic() - start,
                                  "records": seen}), flush=True)
                return 0
            time.sleep(0.1)
    finally:
        c.close()
    print(json.dumps({"error": "timed out", "first_s": first, "records": seen}), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
