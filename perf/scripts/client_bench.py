#!/usr/bin/env python3
"""Produce/consume throughput and produce latency with one confluent-kafka client.

Usage: client_bench.py BOOTSTRAP [--records N] [--size BYTES] [--partitions P]

1. Max-rate produce of N records of SIZE bytes, acks=1, to a fresh topic: MB/s, rec/s.
2. Consume them back (assigned partitions): MB/s, rec/s.
3. Produce at half (--latency-fraction) the measured max rate (open loop, paced by send time): p50/p99/max
   latency from produce() to the delivery callback.
Prints one JSON object. Stands in until `twinlog-perf` (the load-generator issue).
"""
import argparse, json, time, uuid
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, int(round(p / 100.0 * (len(sorted_vals) - 1))))
    return sorted_vals[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--latency-fraction", type=float, default=0.5,
                    help="latency phase rate as a fraction of the measured max produce rate")
    a = ap.parse_args()
    topic = "bench-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    admin.create_topics([NewTopic(topic, a.partitions, 1)])[topic].result(30)
    payload = b"x" * a.size
    conf = {"bootstrap.servers": a.bootstrap, "acks": 1, "linger.ms": 5,
            "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}
    p = Producer(conf)
    t0 = time.time()
    for i in range(a.records):
        while True:
            try:
                p.produce(topic, payload, partition=i % a.partitions)
                break
            except BufferError:
                p.poll(0.001)
    p.flush(120)
    produce_s = time.time() - t0
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, q, 0) for q in range(a.partitions)])
    got = 0
    t0 = time.time()
    while got < a.records and time.time() - t0 < 120:
        for m in c.consume(10000, 1.0):
            if not m.error():
                got += 1
    consume_s = time.time() - t0
    c.close()
    rate = a.records / produce_s * a.latency_fraction
    lat = []
    n = min(a.records // 2, int(rate * 10))
    p2 = Producer(conf)

    def cb(err, msg):
        if err is None:
            lat.append(msg.latency())
    start = time.time()
    for i in range(n):
        if i % 64 == 0:
            # Open loop: keep to the schedule however slow the answers are.
            target = start + i / rate
            while time.time() < target:
                p2.poll(0)
            p2.poll(0)
        while True:
            try:
                p2.produce(topic, payload, partition=i % a.partitions, on_delivery=cb)
                break
            except BufferError:
                p2.poll(0.001)
    p2.flush(60)
    achieved = n / (time.time() - start)
    lat.sort()
    mb = a.records * a.size / 1e6
    print(json.dumps({
        "records": a.records, "record_bytes": a.size, "partitions": a.partitions,
        "produce_mb_s": round(mb / produce_s, 1), "produce_rec_s": round(a.records / produce_s),
        "consume_mb_s": round(mb * got / a.records / consume_s, 1), "consume_rec_s": round(got / consume_s),
        "latency_rate_rec_s": round(rate), "latency_achieved_rec_s": round(achieved),
        "latency_samples": len(lat),
        "latency_p50_ms": round(pct(lat, 50) * 1000, 2) if lat else None,
        "latency_p99_ms": round(pct(lat, 99) * 1000, 2) if lat else None,
        "latency_max_ms": round(lat[-1] * 1000, 2) if lat else None,
    }))


if __name__ == "__main__":
    main()
