"""confluent-kafka helpers shared by the ck_*.py scripts."""

import time

from confluent_kafka import KafkaException

from kt_common import fail


def wait_topic(client, topic, partitions, timeout=30.0):
    """Waits until metadata shows `topic` with `partitions` partitions, each with a
    leader. A producer's metadata request auto-creates the topic."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            md = client.list_topics(topic, timeout=5)
            t = md.topics.get(topic)
            if t is None:
                last = "topic absent from metadata"
            elif t.error is not None:
                last = "topic error %s" % (t.error,)
            elif len(t.partitions) != partitions:
                last = "topic has %d partitions, want %d" % (len(t.partitions), partitions)
                if len(t.partitions) > 0:
                    fail(last)
            elif any(pm.leader < 0 for pm in t.partitions.values()):
                last = "a partition has no leader"
            else:
                return md
        except KafkaException as e:
            last = "list_topics: %s" % (e,)
        time.sleep(0.2)
    fail("topic %s not ready within %ss: %s" % (topic, timeout, last))


def create_topic(bootstrap, topic, partitions, timeout=30.0):
    """CreateTopics through AdminClient. Returns a note; an unsupported API is not an
    error (the broker then auto-creates the topic with num.partitions)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka import KafkaError

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    try:
        futures[topic].result(timeout=timeout + 5)
        return "created via CreateTopics"
    except KafkaException as e:
        err = e.args[0] if e.args else None
        code = err.code() if hasattr(err, "code") else None
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return "already existed"
        if code in (
            KafkaError.UNSUPPORTED_VERSION,
            KafkaError._UNSUPPORTED_FEATURE,
            KafkaError.INVALID_REQUEST,
        ):
            return "CreateTopics not supported (%s); relying on auto-create" % (err,)
        fail("create_topics(%s): %s" % (topic, e))
    except Exception as e:  # noqa: BLE001 - a timeout is reported like any error
        fail("create_topics(%s): %r" % (topic, e))


def consumer_conf(bootstrap, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        # Consumer groups are not served: partitions are assigned by hand and nothing is
        # ever committed, but librdkafka requires a group.id for a Consumer.
        "group.id": "twinlog-clients-test-never-committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "session.timeout.ms": 6000,
    }
    conf.update(extra)
    return conf
