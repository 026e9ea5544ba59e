"""SASL (PLAIN, or --mechanism SCRAM-SHA-256/512) with confluent-kafka and kafka-python against a SASL_PLAINTEXT listener,
or a SASL_SSL one with --ca naming the CA that signed the broker's certificate.

`roundtrip`: a confluent-kafka producer (acks=all) writes --count records, a
confluent-kafka consumer and a kafka-python consumer read every one back, all
authenticated as --user / --password. `refused`: confluent-kafka with a wrong password
must fail with an authentication error (not hang, not succeed). `reauth`: a
confluent-kafka producer acknowledged record by record for --seconds, across
several session lifetimes. `oauth`: OAUTHBEARER with the JWT of --token-file (handed
to librdkafka by an oauth_cb, re-read at each refresh): confluent-kafka produces --count
records and consumes them back. `oauth-denied`: a valid token for a principal without
WRITE; its record must fail with TOPIC_AUTHORIZATION_FAILED.
"""

import argparse
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kt_common import fail, summary


def protocol(a):
    return "SASL_SSL" if a.ca else "SASL_PLAINTEXT"


def ck_conf(a, password=None):
    if a.token_file:
        return oauth_conf(a)
    conf = {
        "bootstrap.servers": a.bootstrap,
        "security.protocol": protocol(a),
        "sasl.mechanisms": a.mechanism,
        "sasl.username": a.user,
        "sasl.password": password or a.password,
    }
    if a.ca:
        conf["ssl.ca.location"] = a.ca
    return conf


def oauth_conf(a):
    def token(_config):
        with open(a.token_file) as f:
            jwt = f.read().strip()
        # The expiry librdkafka refreshes before: the token's own `exp` is what the
        # broker enforces; ask again well before it.
        return jwt, time.time() + 30
    return {
        "bootstrap.servers": a.bootstrap,
        "security.protocol": protocol(a),
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": token,
    }


def consume(a, group):
    """The distinct values confluent-kafka reads from --topic in group `group` (up to
    --count, within 60 s)."""
    c = Consumer(dict(ck_conf(a), **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([a.topic])
    got = set()
    deadline = time.monotonic() + 60
    while len(got) < a.count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.add(m.value())
    c.close()
    return got


def oauth(a):
    p = Producer(dict(ck_conf(a), acks="all"))
    errors = []
    for i in range(a.count):
        p.produce(a.topic, value=b"o%d" % i,
                  on_delivery=lambda err, _m: err and errors.append(str(err)))
    left = p.flush(30)
    if left or errors:
        fail("produce over OAUTHBEARER: %d undelivered, %s" % (left, errors[:3]))
    got = consume(a, "oauth-ck")
    if len(got) != a.count:
        fail("confluent-kafka consumed %d of %d over OAUTHBEARER" % (len(got), a.count))
    summary(produced=a.count, consumed=len(got))


def oauth_denied(a):
    p = Producer(dict(ck_conf(a), acks="all", **{"message.timeout.ms": 20000}))
    errors = []
    p.produce(a.topic, value=b"denied",
              on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    if not errors or errors[0] is None:
        fail("a principal without WRITE produced over OAUTHBEARER")
    if errors[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
        fail("expected TOPIC_AUTHORIZATION_FAILED, got %s" % errors[0])
    summary(error=errors[0].name())


def roundtrip(a):
    admin = AdminClient(ck_conf(a))
    for f in admin.create_topics([NewTopic(a.topic, 2, 1)]).values():
        f.result(30)
    p = Producer(dict(ck_conf(a), acks="all"))
    errors = []
    for i in range(a.count):
        p.produce(a.topic, value=b"v%d" % i, partition=i % 2,
                  on_delivery=lambda err, _m: err and errors.append(str(err)))
    left = p.flush(30)
    if left or errors:
        fail("produce over SASL/PLAIN: %d undelivered, %s" % (left, errors[:3]))
    got = consume(a, "sasl-ck")
    if len(got) != a.count:
        fail("confluent-kafka consumed %d of %d over SASL/PLAIN" % (len(got), a.count))

    from kafka import KafkaConsumer
    tls = {"ssl_cafile": a.ca, "ssl_check_hostname": True} if a.ca else {}
    kc = KafkaConsumer(a.topic, bootstrap_servers=a.bootstrap, security_protocol=protocol(a),
                       sasl_mechanism=a.mechanism, sasl_plain_username=a.user,
                       sasl_plain_password=a.password, auto_offset_reset="earliest",
                       consumer_timeout_ms=10000, group_id="sasl-kp", **tls)
    kp = {r.value for r in kc}
    kc.close()
    if kp != got:
        fail("kafka-python consumed %d of %d over SASL/PLAIN" % (len(kp), a.count))
    summary(produced=a.count, confluent=len(got), kafka_python=len(kp))


def reauth(a):
    # One producer for --seconds, one record every 100 ms, each acknowledged before
    # the next: its connections outlive several sessions (connections.max.reauth.ms),
    # so librdkafka must re-authenticate on them (KIP-368) for none to be closed.
    p = Producer(dict(ck_conf(a), acks="all"))
    errors = []
    sent = 0
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline:
        p.produce(a.topic, value=b"r%d" % sent,
                  on_delivery=lambda err, _m: err and errors.append(str(err)))
        sent += 1
        if p.flush(10):
            fail("record %d not delivered within 10 s" % sent)
        time.sleep(0.1)
    if errors:
        fail("produce across re-authentications: %s" % errors[:3])
    summary(produced=sent)


def refused(a):
    # librdkafka logs the broker's answer ("SASL authentication error: Authentication
    # failed: ...") on stderr, which the test reads.
    admin = AdminClient(dict(ck_conf(a, password="wrong"), **{"reconnect.backoff.ms": 1000}))
    try:
        admin.list_topics(timeout=5)
        fail("confluent-kafka listed topics with a wrong password")
    except KafkaException as e:
        summary(error=str(e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["roundtrip", "refused", "reauth", "oauth", "oauth-denied"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="sasl")
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--token-file", help="OAUTHBEARER: a file holding the JWT")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--ca", help="PEM CA file: SASL_SSL instead of SASL_PLAINTEXT")
    ap.add_argument("--mechanism", default="PLAIN")
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    modes = {"roundtrip": roundtrip, "refused": refused, "reauth": reauth,
             "oauth": oauth, "oauth-denied": oauth_denied}
    modes[a.mode](a)


if __name__ == "__main__":
    main()
