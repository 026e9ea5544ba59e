#!/usr/bin/env python3
"""A librdkafka mock cluster (3 brokers) driven through the mock API of the librdkafka
bundled in the confluent-kafka wheel (ctypes), so a test can move partition leaders.

Protocol on stdin/stdout (one JSON line out per command in):
  start: prints {"bootstrap": "...", "partitions": P}
  "produce N PREFIX" -> produces N records (idempotent), prints {"acked": N}
  "move"             -> moves every partition's leader to the next broker, prints {"moved": P}
  "fetch-errors N"   -> the next N Fetch requests are answered with an error on every
                        partition (alternately NOT_LEADER_OR_FOLLOWER and REQUEST_TIMED_OUT),
                        prints {"injected": N}
  EOF on stdin       -> exit
"""

import ctypes
import glob
import json
import os
import sys

import confluent_kafka
from confluent_kafka import Producer

TOPIC = os.environ.get("MOCK_TOPIC", "moving")
PARTITIONS = int(os.environ.get("MOCK_PARTITIONS", "4"))


def load_librdkafka():
    base = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    libs = glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*.so*"))
    if not libs:
        raise SystemExit("librdkafka from the confluent-kafka wheel not found")
    lib = ctypes.CDLL(libs[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
    lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                               ctypes.c_int]
    lib.rd_kafka_mock_partition_set_leader.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_int32, ctypes.c_int32]
    # Variadic: (cluster, ApiKey, count, error codes...).
    lib.rd_kafka_mock_push_request_errors.restype = None
    return lib


FETCH = 1
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7


def main():
    lib = load_librdkafka()
    conf = lib.rd_kafka_conf_new()
    err = ctypes.create_string_buffer(512)
    if lib.rd_kafka_conf_set(conf, b"test.mock.num.brokers", b"3", err, 512) != 0:
        raise SystemExit("conf: %s" % err.value)
    rk = lib.rd_kafka_new(0, conf, err, 512)
    if not rk:
        raise SystemExit("rd_kafka_new: %s" % err.value)
    mc = lib.rd_kafka_handle_mock_cluster(rk)
    bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
    lib.rd_kafka_mock_topic_create(mc, TOPIC.encode(), PARTITIONS, 3)
    leaders = {p: 1 + (p % 3) for p in range(PARTITIONS)}
    for p, b in leaders.items():
        lib.rd_kafka_mock_partition_set_leader(mc, TOPIC.encode(), p, b)
    print(json.dumps({"bootstrap": bootstrap, "partitions": PARTITIONS}), flush=True)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "produce":
            n, prefix = int(words[1]), words[2]
            acked = [0]

            def on_delivery(e, m):
                if e is None:
                    acked[0] += 1

            for i in range(n):
                producer.produce(TOPIC, key=("%s-%d" % (prefix, i)).encode(), value=b"v" * 50,
                                 partition=i % PARTITIONS, on_delivery=on_delivery)
                producer.poll(0)
            producer.flush(30)
            print(json.dumps({"acked": acked[0]}), flush=True)
        elif words[0] == "move":
            for p in range(PARTITIONS):
                leaders[p] = 1 + (leaders[p] % 3)
                lib.rd_kafka_mock_partition_set_leader(mc, TOPIC.encode(), p, leaders[p])
            print(json.dumps({"moved": PARTITIONS}), flush=True)
        elif words[0] == "fetch-errors":
            n = int(words[1])
            codes = [NOT_LEADER_OR_FOLLOWER if i % 2 == 0 else REQUEST_TIMED_OUT
                     for i in range(n)]
            lib.rd_kafka_mock_push_request_errors(
                ctypes.c_void_p(mc), ctypes.c_int16(FETCH), ctypes.c_size_t(n),
                *[ctypes.c_int(c) for c in codes])
            print(json.dumps({"injected": n}), flush=True)


if __name__ == "__main__":
    main()
