"""Issue 4 consume-transform-produce with confluent-kafka (exactly-once semantics).

`produce`: --count records with unique ids (key and value "id-<n>") over --partitions
partitions of the input topic; also creates the output topic.

`app`: the standard EOS loop. A read_committed consumer of group --group reads the
input; each batch is produced, transformed (same id), to the output topic inside a
transaction together with the consumer's positions (send_offsets_to_transaction). On an
abortable error the transaction is aborted, on a fatal or unknown error the producer is
re-created with the same transactional.id; either way the consumer rewinds to the
group's committed offsets. It survives the broker being killed and restarted, and exits
when the committed offsets reach the input's ends. Prints `progress <n>` after each
committed transaction.

`verify`: a read_committed consumer of the output sees every id exactly once.
"""

import argparse
import faulthandler
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ck_common import create_topic
from kt_common import fail, summary


def produce(a):
    create_topic(a.bootstrap, a.input, a.partitions)
    create_topic(a.bootstrap, a.output, a.partitions)
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 10})
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(a.count):
        v = b"id-%d" % i
        p.produce(a.input, key=v, value=v, partition=i % a.partitions, on_delivery=on_delivery)
        if i % 5000 == 0:
            p.poll(0)
    left = p.flush(60)
    if left or errors:
        fail("produce: %d undelivered, errors %s" % (left, errors[:5]))
    summary(produced=a.count)


def retry(what, fn, deadline):
    last = None
    while time.monotonic() < deadline:
        try:
            return fn()
        except KafkaException as e:
            last = e
            time.sleep(0.2)
    fail("%s kept failing: %s" % (what, last))


def app(a):
    deadline = time.monotonic() + a.timeout
    # A call stuck in librdkafka: print every thread's stack and exit.
    faulthandler.dump_traceback_later(a.timeout + 5, exit=True)
    tps = [TopicPartition(a.input, p) for p in range(a.partitions)]
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
    })
    ends = {}
    for tp in tps:
        _, hi = retry("watermarks", lambda tp=tp: c.get_watermark_offsets(tp, timeout=5),
                      deadline)
        ends[tp.partition] = hi

    def new_producer():
        p = Producer({
            "bootstrap.servers": a.bootstrap,
            "transactional.id": a.txn_id,
            "transaction.timeout.ms": 10000,
            "linger.ms": 5,
        })
        retry("init_transactions", lambda: p.init_transactions(10), deadline)
        return p

    def rewind():
        assignment = retry("assignment", c.assignment, deadline)
        if not assignment:
            return
        committed = retry("committed", lambda: c.committed(assignment, timeout=5), deadline)
        for tp in committed:
            off = tp.offset if tp.offset >= 0 else 0
            retry("seek", lambda tp=tp, off=off: c.seek(TopicPartition(a.input, tp.partition, off)),
                  deadline)

    def done():
        try:
            committed = c.committed(tps, timeout=5)
        except KafkaException:
            return False
        return all(tp.error is None and tp.offset == ends[tp.partition] for tp in committed)

    c.subscribe([a.input])
    p = new_producer()
    txns = 0
    records = 0
    recoveries = []
    while True:
        if time.monotonic() > deadline:
            fail("not done within %ss: %d transactions, %d records" % (a.timeout, txns, records),
                 recoveries=recoveries[-20:])
        msgs = c.consume(a.batch, 0.2)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            if done():
                break
            continue
        try:
            p.begin_transaction()
            for m in msgs:
                while True:
                    try:
                        p.produce(a.output, key=m.key(), value=b"out:" + m.value())
                        break
                    except BufferError:
                        p.poll(0.05)
            positions = c.position(c.assignment())
            p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 10)
            while True:
                try:
                    p.commit_transaction(10)
                    break
                except KafkaException as e:
                    err = e.args[0]
                    if err.retriable() and time.monotonic() < deadline:
                        recoveries.append("commit retry: %s" % (err,))
                        continue
                    raise
            txns += 1
            records += len(msgs)
            print("progress %d %d" % (txns, records), flush=True)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            recoveries.append(str(err))
            print("recover: %s" % (err,), flush=True)
            recreate = True
            if err is not None and hasattr(err, "txn_requires_abort") and err.txn_requires_abort():
                try:
                    p.abort_transaction(10)
                    recreate = False
                except KafkaException as e2:
                    recoveries.append("abort failed: %s" % (e2,))
            if recreate:
                # Fatal or unknown state: a new producer with the same transactional.id
                # bumps the epoch and aborts (or completes) whatever was left open.
                p = new_producer()
            rewind()
    c.close()
    summary(transactions=txns, records=records, recoveries=len(recoveries),
            recovery_errors=sorted(set(recoveries))[:10])


def verify(a):
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": "i4-verify",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(a.output, p, 0) for p in range(a.partitions)])
    counts = {}
    eof = set()
    deadline = time.monotonic() + a.timeout
    while len(eof) < a.partitions and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                fail("verify consume: %s" % (m.error(),))
            eof.discard(m.partition())
            v = m.value()
            if not v.startswith(b"out:id-") or m.key() != v[4:]:
                fail("unexpected output record key=%r value=%r" % (m.key(), v))
            i = int(v[7:])
            counts[i] = counts.get(i, 0) + 1
    c.close()
    if len(eof) < a.partitions:
        fail("no EOF on every output partition within %ss" % (a.timeout,))
    dups = sorted(i for i, n in counts.items() if n > 1)
    missing = sorted(set(range(a.count)) - set(counts))
    extra = sorted(set(counts) - set(range(a.count)))
    if dups or missing or extra:
        fail("output not exactly once: %d duplicated, %d missing, %d unexpected ids"
             % (len(dups), len(missing), len(extra)),
             duplicated=dups[:20], missing=missing[:20], unexpected=extra[:20])
    summary(distinct=len(counts), total=sum(counts.values()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["produce", "app", "verify"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", default="eos-in")
    ap.add_argument("--output", default="eos-out")
    ap.add_argument("--group", default="eos")
    ap.add_argument("--txn-id", default="eos-app")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=90)
    a = ap.parse_args()
    {"produce": produce, "app": app, "verify": verify}[a.mode](a)


if __name__ == "__main__":
    main()
