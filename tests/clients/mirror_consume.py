#!/usr/bin/env python3
"""Reads a whole topic (read_committed) with confluent-kafka assign() and prints one
JSON line: {"count": N, "keys": {prefix: count}, "duplicates": D}. Used to check what a
stock consumer sees on a mirror (no control batches, no aborted records)."""

import argparse
import json
import time

from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": "mirror-consume-check",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "fetch.message.max.bytes": 4 << 20,
    })
    c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in range(a.partitions)])
    eof = set()
    seen = set()
    dups = 0
    prefixes = {}
    deadline = time.monotonic() + a.timeout
    while len(eof) < a.partitions and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise SystemExit("consume error: %s" % m.error())
            k = m.key().decode()
            if k in seen:
                dups += 1
            seen.add(k)
            prefixes[k.split("-")[0]] = prefixes.get(k.split("-")[0], 0) + 1
    c.close()
    print(json.dumps({"count": len(seen), "keys": prefixes, "duplicates": dups,
                      "complete": len(eof) >= a.partitions}), flush=True)


if __name__ == "__main__":
    main()
