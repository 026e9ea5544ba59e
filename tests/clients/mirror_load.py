#!/usr/bin/env python3
"""Mirror test load (confluent-kafka): an idempotent producer writes --count records over
--partitions partitions, then a transactional producer runs --txn-rounds transactions of
--txn-records records each, committing even rounds and aborting odd ones. With
--open-txn the last transaction is left open (the process sleeps until killed; set
--txn-timeout-ms to keep the coordinator from aborting it first).
Prints one JSON line: {"acked": N, "committed": C, "aborted": A}."""

import argparse
import json
import sys
import time

from confluent_kafka import Producer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--prefix", default="r")
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--txn-rounds", type=int, default=0)
    ap.add_argument("--txn-records", type=int, default=50)
    ap.add_argument("--txn-id", default="mirror-load-txn")
    ap.add_argument("--open-txn", action="store_true")
    ap.add_argument("--txn-timeout-ms", type=int, default=0)
    ap.add_argument("--compression", default="lz4")
    a = ap.parse_args()

    acked = [0]
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    pad = "x" * max(0, a.value_size - 16)
    if a.count:
        p = Producer({
            "bootstrap.servers": a.bootstrap,
            "enable.idempotence": True,
            "compression.type": a.compression,
            "linger.ms": 5,
            "batch.num.messages": 1000,
            "message.timeout.ms": 60000,
        })
        for i in range(a.count):
            while True:
                try:
                    p.produce(a.topic, key=("%s-%d" % (a.prefix, i)).encode(),
                              value=("%012d%s" % (i, pad)).encode(),
                              partition=i % a.partitions, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        left = p.flush(60)
        if left:
            print("flush left %d records" % left, file=sys.stderr)
            sys.exit(1)
    if errors:
        print("delivery errors: %s" % errors[:5], file=sys.stderr)
        sys.exit(1)
    committed = aborted = 0
    if a.txn_rounds:
        conf = {
            "bootstrap.servers": a.bootstrap,
            "transactional.id": a.txn_id,
            "compression.type": "none",
            "linger.ms": 1,
        }
        if a.txn_timeout_ms:
            conf["transaction.timeout.ms"] = a.txn_timeout_ms
        t = Producer(conf)
        t.init_transactions(30)
        for r in range(a.txn_rounds):
            t.begin_transaction()
            for j in range(a.txn_records):
                t.produce(a.topic, key=("%s-txn-%d-%d" % (a.prefix, r, j)).encode(),
                          value=b"t" * 20, partition=j % a.partitions)
            t.flush(30)
            last = r == a.txn_rounds - 1
            if last and a.open_txn:
                print(json.dumps({"acked": acked[0], "committed": committed,
                                  "aborted": aborted, "open": True}), flush=True)
                time.sleep(3600)
            if r % 2 == 0:
                t.commit_transaction(30)
                committed += a.txn_records
            else:
                t.abort_transaction(30)
                aborted += a.txn_records
    print(json.dumps({"acked": acked[0], "committed": committed, "aborted": aborted}), flush=True)


if __name__ == "__main__":
    main()
