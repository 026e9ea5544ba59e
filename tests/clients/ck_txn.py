"""Transactions with confluent-kafka.

A transactional producer commits one transaction (with the offsets of a consumer group
sent to it), aborts one and commits another across --partitions partitions. A
read_committed consumer must see exactly the committed records, a read_uncommitted one
all of them, and the group's committed offset must be the one sent in the transaction.
Then a second producer with the same transactional.id fences the first: the first gets
a fenced (fatal) error on its next transaction, the second commits. Last, a transaction
left open past its timeout is aborted by the broker: its records never become visible
to read_committed and its producer cannot commit it.

`after-restart`: the broker restarted; read_committed still sees exactly the committed
records and the transactional id can be initialised again (its coordinator state was
loaded from `__transaction_state`) and commit.
"""

import argparse

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ck_common import create_topic, wait_topic
from kt_common import fail, summary


def txn_producer(bootstrap, txn_id, timeout_ms=60000):
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": timeout_ms,
        "linger.ms": 5,
    })
    p.init_transactions(30)
    return p


def send(p, topic, partitions, prefix, count):
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=("%s-%d" % (prefix, i)).encode(),
                  partition=i % partitions)
    p.flush(30)


def read_all(bootstrap, topic, partitions, isolation, timeout):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "reader-" + isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values = []
    eof = set()
    import time
    deadline = time.monotonic() + timeout
    while len(eof) < partitions and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            fail("%s consume: %s" % (isolation, m.error()))
        eof.discard(m.partition())
        values.append(m.value().decode())
    c.close()
    if len(eof) < partitions:
        fail("%s: no EOF on every partition within %ss (%d records)"
             % (isolation, timeout, len(values)))
    return values


def is_fenced(e):
    err = e.args[0] if e.args else None
    if err is None or not hasattr(err, "code"):
        return False
    return err.fatal() or err.code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def timed_out(a):
    """A transaction open past its timeout is aborted by the broker's cleanup task."""
    import time
    b = a.bootstrap
    p = txn_producer(b, "tx-timeout", timeout_ms=1500)
    p.begin_transaction()
    send(p, a.topic, a.partitions, "expired", 8)
    # The LSO must move past the expired transaction once the broker aborts it.
    rc = read_all(b, a.topic, a.partitions, "read_committed", a.timeout)
    if any(v.startswith("expired") for v in rc):
        fail("read_committed saw records of an open transaction")
    time.sleep(4)
    try:
        p.commit_transaction(10)
    except KafkaException as e:
        return str(e.args[0])
    fail("commit of a timed-out transaction succeeded")


def after_restart(a):
    b = a.bootstrap
    want = ["commit1-%d" % i for i in range(40)] + ["commit2-%d" % i for i in range(20)] + \
        ["p2-%d" % i for i in range(4)]
    rc = sorted(read_all(b, a.topic, a.partitions, "read_committed", a.timeout))
    if rc != sorted(want):
        fail("after restart: read_committed saw %d records, want %d" % (len(rc), len(want)))
    p = txn_producer(b, "tx-ck")
    p.begin_transaction()
    send(p, a.topic, a.partitions, "p3", 4)
    p.commit_transaction(30)
    rc = read_all(b, a.topic, a.partitions, "read_committed", a.timeout)
    if sum(v.startswith("p3") for v in rc) != 4:
        fail("after restart: a new transaction's records are missing")
    summary(committed=len(rc))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run", "after-restart"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    if a.mode == "after-restart":
        after_restart(a)
        return
    b = a.bootstrap
    create_topic(b, a.topic, a.partitions)

    p1 = txn_producer(b, "tx-ck")
    wait_topic(p1, a.topic, a.partitions)
    group_consumer = Consumer({"bootstrap.servers": b, "group.id": a.group,
                               "enable.auto.commit": False})

    p1.begin_transaction()
    send(p1, a.topic, a.partitions, "commit1", 40)
    p1.send_offsets_to_transaction([TopicPartition(a.topic, 0, 7)],
                                   group_consumer.consumer_group_metadata(), 30)
    p1.commit_transaction(30)

    p1.begin_transaction()
    send(p1, a.topic, a.partitions, "abort", 40)
    p1.abort_transaction(30)

    p1.begin_transaction()
    send(p1, a.topic, a.partitions, "commit2", 20)
    p1.commit_transaction(30)

    committed = sorted(["commit1-%d" % i for i in range(40)] +
                       ["commit2-%d" % i for i in range(20)])
    everything = sorted(committed + ["abort-%d" % i for i in range(40)])
    rc = sorted(read_all(b, a.topic, a.partitions, "read_committed", a.timeout))
    if rc != committed:
        fail("read_committed saw %d records, want %d" % (len(rc), len(committed)),
             extra=sorted(set(rc) ^ set(committed))[:20])
    ru = sorted(read_all(b, a.topic, a.partitions, "read_uncommitted", a.timeout))
    if ru != everything:
        fail("read_uncommitted saw %d records, want %d" % (len(ru), len(everything)))

    offs = group_consumer.committed([TopicPartition(a.topic, 0)], timeout=30)
    if offs[0].offset != 7:
        fail("transactional offset commit: committed %s, want 7" % (offs[0].offset,))
    group_consumer.close()

    # Fencing: a second producer with the same transactional.id.
    p2 = txn_producer(b, "tx-ck")
    fenced = None
    try:
        p1.begin_transaction()
        send(p1, a.topic, a.partitions, "zombie", 4)
        p1.commit_transaction(30)
    except KafkaException as e:
        if not is_fenced(e):
            fail("first producer: unexpected error after fencing: %s" % (e,))
        fenced = str(e.args[0])
    if fenced is None:
        fail("first producer was not fenced")
    p2.begin_transaction()
    send(p2, a.topic, a.partitions, "p2", 4)
    p2.commit_transaction(30)
    rc = read_all(b, a.topic, a.partitions, "read_committed", a.timeout)
    if any(v.startswith("zombie") for v in rc) or sum(v.startswith("p2") for v in rc) != 4:
        fail("after fencing: read_committed saw zombie records or missed p2's")
    expired = timed_out(a)
    rc = read_all(b, a.topic, a.partitions, "read_committed", a.timeout)
    if any(v.startswith("expired") for v in rc):
        fail("read_committed saw records of a timed-out transaction")
    summary(committed=len(committed), uncommitted=len(everything), fenced=fenced,
            expired=expired)


if __name__ == "__main__":
    main()
