#!/usr/bin/env bash
# Small batches on one partition (issue 20): a fresh Twinlog broker, a topic of one
# partition, and one client sending one 1 KiB record per batch, acks=1, at most 5
# requests in flight; then what the run cost the broker.
#
#   perf/scripts/small_batches.sh BINARY [RECORDS] [SHARDS]
#
#   BINARY    a twinlog release binary (target/release/twinlog)
#   RECORDS   records to send (default 200000)
#   SHARDS    broker shards on cores 0.. (default 1: connection and partition on one shard)
#
# Environment:
#   CLIENT=java            Kafka's ProducerPerformance (default), linger.ms=0 batch.size=1024
#   CLIENT=kcat            librdkafka: kcat -P, linger.ms=0 batch.size=1 (one message a batch)
#   CLIENT=perf            twinlog-perf produce --batch-size 1024 --pipeline 5 (one connection,
#                          5 requests in flight on it), one executor; the binary beside BINARY
#   JAVA_OPTS_EXTRA=…      more JVM options for the Java client, e.g. -XX:TieredStopAtLevel=4
#                          (scripts/kafka.sh runs tools C1-only for start-up)
#   EXTRA=…                more client settings (Java: k=v producer props; kcat: -X k=v)
#   SPIN_US=…              spin.before.park.us of every shard (default: unset, 0)
#   CLIENT_CPUS=…          pin the client to these CPUs (taskset -c), e.g. 1 with SHARDS=1:
#                          broker and client on cores of their own, as on separate hosts
#
# Prints the client's totals and CPU seconds, the broker's CPU seconds and its busiest
# threads, and the broker's Produce and grouped-request counters (`/metrics`).
# Needs scripts/kafka.sh install (the Java client and kafka-topics) and kcat.
set -euo pipefail
BIN=$(realpath "${1:?usage: small_batches.sh BINARY [RECORDS] [SHARDS]}")
RECORDS=${2:-200000}
SHARDS=${3:-1}
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d -t twinlog-small-XXXXXX)
BP=
cleanup() {
    [ -z "$BP" ] || { kill "$BP" 2>/dev/null || true; wait "$BP" 2>/dev/null || true; }
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "$1"; }

port=$(free_port)
mport=$(free_port)
{
    echo '"num.partitions" = 1'
    echo "\"metrics.listen\" = \"127.0.0.1:$mport\""
    for ((c = 0; c < SHARDS; c++)); do
        printf '\n[[shard]]\ncore = %d\n' $c
        [ -z "${SPIN_US:-}" ] || echo "spin.before.park.us = $SPIN_US"
    done
} > "$WORK/broker.toml"
NO_COLOR=1 "$BIN" serve --config "$WORK/broker.toml" --data-dir "$WORK/data" \
    --listen 127.0.0.1:$port > "$WORK/broker.log" 2>&1 &
BP=$!
until grep -q "twinlog ready" "$WORK/broker.log"; do
    if ! kill -0 "$BP" 2>/dev/null; then
        echo "small_batches.sh: the broker did not start:" >&2
        tail -20 "$WORK/broker.log" >&2
        exit 1
    fi
    sleep 0.1
done
bash scripts/kafka.sh tool kafka-topics --bootstrap-server 127.0.0.1:$port --create \
    --topic small --partitions 1 --replication-factor 1 > /dev/null

PIN=()
[ -z "${CLIENT_CPUS:-}" ] || PIN=(taskset -c "$CLIENT_CPUS")
sync
c0=$(cpu_of "/proc/$BP/stat")
case "${CLIENT:-java}" in
kcat)
    python3 -c 'import sys; sys.stdout.buffer.write((b"x" * 1023 + b"\n") * int(sys.argv[1]))' \
        "$RECORDS" > "$WORK/records.txt"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "${PIN[@]}" /usr/bin/time -f "client CPU: %U s user + %S s system" kcat -P -b 127.0.0.1:$port \
        -t small -p 0 -X linger.ms=0 -X batch.size=1 -X max.in.flight=5 -X acks=1 ${EXTRA:-} \
        < "$WORK/records.txt"
    t1=$(date +%s.%N)
    python3 -c 'import sys; n, t = int(sys.argv[1]), float(sys.argv[2]); print("kcat: %d records in %.2f s, %.2f MB/s (10^6 bytes)" % (n, t, n * 1024 / t / 1e6))' \
        "$RECORDS" "$(echo "$t1 - $t0" | bc)"
    ;;
java)
    # shellcheck disable=SC2086
    KAFKA_JAVA_OPTS="-Xmx1g ${JAVA_OPTS_EXTRA:-}" "${PIN[@]}" /usr/bin/time \
        -f "client CPU: %U s user + %S s system over %e s" \
        bash scripts/kafka.sh java org.apache.kafka.tools.ProducerPerformance \
        --topic small --num-records "$RECORDS" --record-size 1024 --throughput -1 \
        --producer-props bootstrap.servers=127.0.0.1:$port acks=1 linger.ms=0 batch.size=1024 \
        max.in.flight.requests.per.connection=5 ${EXTRA:-} 2>&1 | tail -2
    ;;
perf)
    # shellcheck disable=SC2086
    "${PIN[@]}" /usr/bin/time -f "client CPU: %U s user + %S s system over %e s" \
        "$(dirname "$BIN")/twinlog-perf" produce --bootstrap-server 127.0.0.1:$port --topic small \
        --partitions 1 --records "$RECORDS" --record-size 1024 --batch-size 1024 --acks 1 \
        --in-flight 1 --pipeline 5 --threads 1 --duration 10m --quiet ${EXTRA:-} 2>&1 | tail -4
    ;;
*)
    echo "small_batches.sh: CLIENT is java, kcat or perf, not ${CLIENT}" >&2
    exit 2
    ;;
esac
echo "broker CPU: $(echo "$(cpu_of "/proc/$BP/stat") - $c0" | bc) s"
for t in /proc/$BP/task/*; do
    echo "  $(cat "$t/comm") $(cpu_of "$t/stat") s"
done | sort -k2 -rn | head -4
curl -s "127.0.0.1:$mport/metrics" |
    grep -E '^twinlog_produce_group|^twinlog_requests_total.*api="Produce"|^twinlog_inline_writes_total' || true
