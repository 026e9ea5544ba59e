"""Consumer groups with confluent-kafka.

`consume`: produces --count records over --partitions partitions, then three consumers
of one group consume them with manual commits while the group rebalances (one member
leaves after a third of the records, a new one joins); every record must be consumed
exactly once and the committed offsets must end at the partitions' ends.

`check`: the group's committed offsets (OffsetFetch via `committed()`) must equal the
partitions' high watermarks.

`admin`: AdminClient lists, describes (Empty), fetches the offsets of and deletes the
group.
"""

import argparse
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ck_common import create_topic, wait_topic
from kt_common import fail, summary


def group_conf(bootstrap, group, name):
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }


def produce(bootstrap, topic, partitions, count):
    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    wait_topic(p, topic, partitions)
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(count):
        while True:
            try:
                p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        fail("produce: %d undelivered, errors %s" % (left, errors[:5]))


def commit_sync(c):
    try:
        c.commit(asynchronous=False)
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if err is None or err.code() != KafkaError._NO_OFFSET:
            raise


class Member:
    def __init__(self, bootstrap, group, topic, name, log):
        self.name = name
        self.log = log
        self.consumed = 0
        self.rebalances = []
        self.c = Consumer(group_conf(bootstrap, group, name))

        def on_assign(c, parts):
            self.rebalances.append(("assign", sorted(p.partition for p in parts)))

        def on_revoke(c, parts):
            self.rebalances.append(("revoke", sorted(p.partition for p in parts)))
            # Commit what was consumed before another member takes the partitions over.
            commit_sync(c)

        self.c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def poll(self, seen):
        msg = self.c.poll(0.05)
        if msg is None:
            return 0
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return 0
            fail("%s: consume error %s" % (self.name, msg.error()))
        key = (msg.partition(), msg.offset())
        if key in seen:
            fail("%s: record %s consumed twice (first by %s)" % (self.name, key, seen[key]))
        seen[key] = self.name
        self.consumed += 1
        if self.consumed % 500 == 0:
            commit_sync(self.c)
        return 1

    def close(self):
        commit_sync(self.c)
        self.c.close()


def consume(a):
    produce(a.bootstrap, a.topic, a.partitions, a.count)
    seen = {}
    log = []
    members = [Member(a.bootstrap, a.group, a.topic, n, log) for n in ("m1", "m2", "m3")]
    deadline = time.monotonic() + a.timeout
    left_at = a.count // 3
    phase = 0
    closed = []
    last_progress = time.monotonic()
    while len(seen) < a.count:
        if time.monotonic() > deadline:
            fail("consumed %d of %d within %ss" % (len(seen), a.count, a.timeout),
                 per_member={m.name: m.consumed for m in members + closed},
                 rebalances={m.name: m.rebalances for m in members + closed})
        got = 0
        for m in members:
            got += m.poll(seen)
        if got:
            last_progress = time.monotonic()
        if phase == 0 and len(seen) >= left_at:
            # m3 leaves (LeaveGroup), m4 joins.
            gone = members.pop()
            gone.close()
            closed.append(gone)
            members.append(Member(a.bootstrap, a.group, a.topic, "m4", log))
            phase = 1
    for m in members:
        commit_sync(m.c)
    # Everything consumed: the committed offsets are the partitions' ends.
    tps = [TopicPartition(a.topic, p) for p in range(a.partitions)]
    committed = members[0].c.committed(tps, timeout=30)
    ends = {}
    for tp in committed:
        lo, hi = members[0].c.get_watermark_offsets(TopicPartition(a.topic, tp.partition), timeout=10)
        ends[tp.partition] = hi
        if tp.offset != hi:
            fail("partition %d committed %d, end %d" % (tp.partition, tp.offset, hi))
    per_member = {m.name: m.consumed for m in members + closed}
    rebalances = {m.name: m.rebalances for m in members + closed}
    for m in members:
        m.close()
    if sum(per_member.values()) != a.count:
        fail("consumed %d, want %d" % (sum(per_member.values()), a.count))
    if per_member.get("m3", 0) == 0 or per_member.get("m4", 0) == 0:
        fail("a member consumed nothing: %s" % (per_member,), rebalances=rebalances)
    summary(consumed=len(seen), per_member=per_member, rebalances=rebalances,
            committed=sum(ends.values()), idle_s=round(time.monotonic() - last_progress, 2))


def check(a):
    c = Consumer(group_conf(a.bootstrap, a.group, "checker"))
    tps = [TopicPartition(a.topic, p) for p in range(a.partitions)]
    deadline = time.monotonic() + a.timeout
    last = None
    while time.monotonic() < deadline:
        try:
            committed = c.committed(tps, timeout=10)
            total = 0
            bad = []
            for tp in committed:
                _, hi = c.get_watermark_offsets(TopicPartition(a.topic, tp.partition), timeout=10)
                total += hi
                if tp.error is not None or tp.offset != hi:
                    bad.append((tp.partition, tp.offset, hi, str(tp.error)))
            if not bad:
                c.close()
                summary(committed=total, partitions=len(committed))
                return
            last = "mismatches %s" % (bad,)
        except KafkaException as e:
            last = "committed(): %s" % (e,)
        time.sleep(0.5)
    c.close()
    fail("committed offsets not at the partition ends: %s" % (last,))


def admin(a):
    """ListGroups, DescribeGroups, OffsetFetch (AdminClient), OffsetDelete and
    DeleteGroups on the (now empty) group."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    ad = AdminClient({"bootstrap.servers": a.bootstrap})
    listed = ad.list_consumer_groups(request_timeout=30).result()
    ids = [g.group_id for g in listed.valid]
    if a.group not in ids:
        fail("ListGroups does not show %s: %s" % (a.group, ids))
    desc = ad.describe_consumer_groups([a.group], request_timeout=30)[a.group].result()
    state = str(desc.state)
    if "EMPTY" not in state.upper():
        fail("DescribeGroups: %s is %s, want Empty" % (a.group, state))
    req = ConsumerGroupTopicPartitions(a.group)
    offsets = ad.list_consumer_group_offsets([req], request_timeout=30)[a.group].result()
    total = sum(tp.offset for tp in offsets.topic_partitions if tp.topic == a.topic)
    if len(offsets.topic_partitions) != a.partitions:
        fail("OffsetFetch via AdminClient: %d partitions, want %d"
             % (len(offsets.topic_partitions), a.partitions))
    ad.delete_consumer_groups([a.group], request_timeout=30)[a.group].result()
    listed = ad.list_consumer_groups(request_timeout=30).result()
    if a.group in [g.group_id for g in listed.valid]:
        fail("group %s still listed after DeleteGroups" % (a.group,))
    summary(listed=len(ids), state=state, committed=total, deleted=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["consume", "check", "admin"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--count", type=int, default=30000)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    if a.mode == "consume":
        consume(a)
    elif a.mode == "admin":
        admin(a)
    else:
        check(a)


if __name__ == "__main__":
    main()
