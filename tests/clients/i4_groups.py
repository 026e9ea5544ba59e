"""Issue 4 consumer groups at scale, with confluent-kafka and kafka-python.

`produce`: one confluent-kafka producer (acks=all, linger.ms=20, large batches) writes
--count small records round-robin over --partitions partitions.

`consume-ck`: three confluent-kafka members of one group consume every record exactly
once between them while the group rebalances (m3 leaves after a third, m4 joins),
committing manually (every 2,000 records, on revoke and on leaving). Every
(partition, offset) below the high watermarks must be seen exactly once and the
committed offsets must end at the high watermarks.

`consume-kp`: the same with kafka-python KafkaConsumer members (one thread each,
subscribe, manual commit() after every poll's records).
"""

import argparse
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ck_common import create_topic, wait_topic
from kt_common import fail, summary


def produce(a):
    create_topic(a.bootstrap, a.topic, a.partitions)
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1000000,
        "batch.num.messages": 100000,
        "queue.buffering.max.messages": 500000,
    })
    wait_topic(p, a.topic, a.partitions)
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    t0 = time.monotonic()
    for i in range(a.count):
        while True:
            try:
                p.produce(a.topic, key=b"k%d" % i, value=b"v%d" % i,
                          partition=i % a.partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(60)
    if left or errors:
        fail("produce: %d undelivered, errors %s" % (left, errors[:5]))
    summary(produced=a.count, seconds=round(time.monotonic() - t0, 2))


def ends_of(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "i4-ends"})
    ends = {}
    for p in range(partitions):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if lo != 0:
            fail("partition %d starts at %d" % (p, lo))
        ends[p] = hi
    c.close()
    return ends


def check_coverage(seen, ends, count):
    if sum(ends.values()) != count:
        fail("high watermarks sum to %d, want %d" % (sum(ends.values()), count), ends=ends)
    missing = [(p, o) for p, hi in ends.items() for o in range(hi) if (p, o) not in seen]
    if missing or len(seen) != count:
        fail("consumed %d distinct records of %d; missing %d" % (len(seen), count, len(missing)),
             missing=missing[:20])


def check_committed(bootstrap, group, topic, ends):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    tps = [TopicPartition(topic, p) for p in sorted(ends)]
    committed = c.committed(tps, timeout=30)
    c.close()
    bad = [(tp.partition, tp.offset, ends[tp.partition], str(tp.error))
           for tp in committed if tp.error is not None or tp.offset != ends[tp.partition]]
    if bad:
        fail("committed offsets are not the partition ends: %s" % (bad,))


# ---------------------------------------------------------------- confluent-kafka


def ck_commit(c):
    try:
        c.commit(asynchronous=False)
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if err is None or err.code() != KafkaError._NO_OFFSET:
            raise


class CkMember:
    def __init__(self, a, name):
        self.name = name
        self.consumed = 0
        self.rebalances = []
        self.c = Consumer({
            "bootstrap.servers": a.bootstrap,
            "group.id": a.group,
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        })

        def on_assign(c, parts):
            self.rebalances.append(("assign", sorted(p.partition for p in parts)))

        def on_revoke(c, parts):
            self.rebalances.append(("revoke", sorted(p.partition for p in parts)))
            ck_commit(c)

        self.c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke)

    def poll(self, seen):
        msgs = self.c.consume(1000, 0.02)
        for m in msgs:
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                fail("%s: consume error %s" % (self.name, m.error()))
            key = (m.partition(), m.offset())
            if key in seen:
                fail("%s: record %s consumed twice (first by %s)" % (self.name, key, seen[key]))
            seen[key] = self.name
            self.consumed += 1
            if self.consumed % 2000 == 0:
                ck_commit(self.c)
        return len(msgs)

    def close(self):
        ck_commit(self.c)
        self.c.close()


def consume_ck(a):
    ends = ends_of(a.bootstrap, a.topic, a.partitions)
    seen = {}
    members = [CkMember(a, n) for n in ("m1", "m2", "m3")]
    closed = []
    deadline = time.monotonic() + a.timeout
    phase = 0
    while len(seen) < a.count:
        if time.monotonic() > deadline:
            fail("consumed %d of %d within %ss" % (len(seen), a.count, a.timeout),
                 per_member={m.name: m.consumed for m in members + closed},
                 rebalances={m.name: m.rebalances for m in members + closed})
        for m in members:
            m.poll(seen)
        if phase == 0 and len(seen) >= a.count // 3 and members[2].consumed > 0:
            gone = members.pop()
            gone.close()
            closed.append(gone)
            members.append(CkMember(a, "m4"))
            phase = 1
    for m in members:
        ck_commit(m.c)
    per_member = {m.name: m.consumed for m in members + closed}
    rebalances = {m.name: m.rebalances for m in members + closed}
    for m in members:
        m.close()
    check_coverage(seen, ends, a.count)
    check_committed(a.bootstrap, a.group, a.topic, ends)
    if per_member.get("m3", 0) == 0 or per_member.get("m4", 0) == 0:
        fail("a member consumed nothing: %s" % (per_member,), rebalances=rebalances)
    summary(client="confluent-kafka", consumed=len(seen), per_member=per_member,
            rebalances=rebalances)


# ---------------------------------------------------------------- kafka-python


def consume_kp(a):
    import logging

    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    logging.basicConfig(level=logging.ERROR)

    ends = ends_of(a.bootstrap, a.topic, a.partitions)
    seen = {}
    # Records whose commit the coordinator refused mid-rebalance (REBALANCE_IN_PROGRESS
    # while the group completes a rebalance, as Kafka does): their re-delivery after the
    # rebalance is Kafka's at-least-once contract, not a duplicate.
    uncommitted = set()
    lock = threading.Lock()
    errors = []
    per_member = {}
    rebalances = {}
    stop = threading.Event()
    leave = threading.Event()
    gate = threading.Event()

    def member(name, stop_on):
        rebalances[name] = []
        per_member[name] = 0
        try:
            c = KafkaConsumer(
                bootstrap_servers=a.bootstrap,
                group_id=a.group,
                client_id=name,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
                max_poll_records=500,
            )

            class Listener(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked):
                    # Runs on kafka-python's IO thread, where a blocking commit() is
                    # refused: every poll's records are committed before the next poll.
                    rebalances[name].append(("revoke", sorted(tp.partition for tp in revoked)))

                def on_partitions_assigned(self, assigned):
                    rebalances[name].append(("assign", sorted(tp.partition for tp in assigned)))

            def take(batches):
                # Counts a poll's records and commits them; False on a duplicate.
                n = 0
                keys = []
                with lock:
                    for recs in batches.values():
                        for r in recs:
                            key = (r.partition, r.offset)
                            keys.append(key)
                            if key in uncommitted:
                                uncommitted.discard(key)
                                seen[key] = name
                                continue
                            if key in seen:
                                errors.append("%s: record %s consumed twice (first by %s)"
                                              % (name, key, seen[key]))
                                return False
                            seen[key] = name
                            n += 1
                per_member[name] += n
                if keys:
                    try:
                        c.commit()
                    except (RebalanceInProgressError, CommitFailedError):
                        with lock:
                            uncommitted.update(keys)
                return True

            c.subscribe([a.topic], listener=Listener())
            while not stop_on.is_set() and not errors:
                # Until the expected members hold partitions, take one record at a
                # time, so that a slow joiner still gets its share (see the main loop).
                if not take(c.poll(timeout_ms=50, max_records=500 if gate.is_set() else 1)):
                    return
            # The last commit may meet a rebalance (another member leaving): poll it
            # through, taking whatever it re-delivers, until a commit holds.
            deadline = time.monotonic() + 20
            while True:
                try:
                    c.commit()
                    break
                except (RebalanceInProgressError, CommitFailedError):
                    if time.monotonic() > deadline:
                        raise
                    if not take(c.poll(timeout_ms=100, max_records=500)):
                        return
            c.close(autocommit=False)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append("%s: %r" % (name, e))

    threads = [threading.Thread(target=member, args=("m1", stop), daemon=True),
               threading.Thread(target=member, args=("m2", stop), daemon=True),
               threading.Thread(target=member, args=("m3", leave), daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + a.timeout
    phase = 0
    while True:
        with lock:
            n = len(seen)
        if errors:
            stop.set()
            leave.set()
            fail("kafka-python: %s" % (errors[:5],), rebalances=rebalances)
        if n >= a.count:
            break
        if time.monotonic() > deadline:
            stop.set()
            leave.set()
            fail("consumed %d of %d within %ss" % (n, a.count, a.timeout),
                 per_member=per_member, rebalances=rebalances)
        # Phase 0 waits for m1..m3 to hold partitions, phase 1 for m4: until then
        # the members take one record per poll, so the joiner gets its share.
        waiting_for = ("m1", "m2", "m3") if phase == 0 else ("m4",)
        if not gate.is_set() and all(
                any(kind == "assign" and parts for kind, parts in rebalances.get(m, []))
                for m in waiting_for):
            gate.set()
        if phase == 0 and n >= a.count // 3 and per_member.get("m3", 0) > 0:
            gate.clear()
            leave.set()
            threads[2].join(30)
            t4 = threading.Thread(target=member, args=("m4", stop), daemon=True)
            t4.start()
            threads.append(t4)
            phase = 1
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join(30)
    if errors:
        fail("kafka-python: %s" % (errors[:5],), rebalances=rebalances)
    check_coverage(seen, ends, a.count)
    check_committed(a.bootstrap, a.group, a.topic, ends)
    if per_member.get("m3", 0) == 0 or per_member.get("m4", 0) == 0:
        fail("a member consumed nothing: %s" % (per_member,), rebalances=rebalances)
    summary(client="kafka-python", consumed=len(seen), per_member=per_member,
            rebalances=rebalances)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["produce", "consume-ck", "consume-kp"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--count", type=int, default=300000)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    {"produce": produce, "consume-ck": consume_ck, "consume-kp": consume_kp}[a.mode](a)


if __name__ == "__main__":
    main()
