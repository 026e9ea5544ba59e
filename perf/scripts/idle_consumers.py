#!/usr/bin/env python3
"""Idle long-poll consumers (issue 20): N connections each long-polling its own idle
partition with Fetch (max_wait_ms, min_bytes 1, at the log end), answered when the wait
runs out and sent again at once, as a consumer with nothing to read does. Measures the
broker process's CPU (user + system, /proc/PID/stat) over --seconds, once the polls are
going, and prints it as a share of one core.

    perf/scripts/idle_consumers.py --bootstrap 127.0.0.1:9092 --pid PID --topic idle \
        --partitions 1000 [--max-wait-ms 500] [--seconds 30]

The topic must exist with --partitions partitions and no records (or polls start at
offset 0 and are answered with data once). Fetch v4 is hand-encoded: this is a load
generator for one request shape, not a client.
"""

import argparse
import os
import selectors
import socket
import struct
import time


def fetch_request(correlation, topic, partition, max_wait_ms):
    client = b"idle-consumers"
    body = struct.pack(">hhih", 1, 4, correlation, len(client)) + client
    body += struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
    name = topic.encode()
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, partition, 0, 1 << 20)
    return struct.pack(">i", len(body)) + body


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class Poller:
    def __init__(self, addr, topic, partition, max_wait_ms):
        self.sock = socket.create_connection(addr)
        self.sock.setblocking(False)
        self.topic, self.partition, self.max_wait_ms = topic, partition, max_wait_ms
        self.correlation = 0
        self.buf = b""
        self.answers = 0

    def send(self):
        self.correlation += 1
        self.sock.sendall(fetch_request(self.correlation, self.topic, self.partition,
                                        self.max_wait_ms))

    def readable(self):
        """Reads what arrived; sends the next poll for each whole response."""
        data = self.sock.recv(1 << 16)
        if not data:
            raise SystemExit("the broker closed a connection")
        self.buf += data
        while len(self.buf) >= 4:
            (length,) = struct.unpack(">i", self.buf[:4])
            if len(self.buf) < 4 + length:
                break
            self.buf = self.buf[4 + length:]
            self.answers += 1
            self.send()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--max-wait-ms", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=30.0)
    a = ap.parse_args()
    host, port = a.bootstrap.rsplit(":", 1)
    addr = (host, int(port))
    sel = selectors.DefaultSelector()
    pollers = []
    for p in range(a.partitions):
        poller = Poller(addr, a.topic, p, a.max_wait_ms)
        sel.register(poller.sock, selectors.EVENT_READ, poller)
        pollers.append(poller)
        poller.send()

    def run(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.1):
                key.data.readable()

    # Warm up: every poller answered at least once (the first answers may carry data).
    run(max(2.0, 3 * a.max_wait_ms / 1000))
    before_answers = sum(p.answers for p in pollers)
    c0, t0 = cpu_seconds(a.pid), time.monotonic()
    run(a.seconds)
    c1, t1 = cpu_seconds(a.pid), time.monotonic()
    answers = sum(p.answers for p in pollers) - before_answers
    share = (c1 - c0) / (t1 - t0)
    print("%d idle long-poll consumers (max_wait_ms %d): %.0f answers/s, broker CPU %.2f s in %.1f s = %.1f%% of a core"
          % (a.partitions, a.max_wait_ms, answers / (t1 - t0), c1 - c0, t1 - t0, 100 * share))


if __name__ == "__main__":
    main()
