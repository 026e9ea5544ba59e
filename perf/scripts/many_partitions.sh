#!/usr/bin/env bash
# Many partitions (issue 20): one Twinlog node holding 10,000 partitions.
#   1. CreateTopics of one topic of 10,000 partitions (the per-topic maximum) and one of
#      8: how long the create takes, the broker's resident memory and open files after.
#   2. Produce with Kafka's ProducerPerformance (1 KiB records, acks=1, the settings of
#      compare.sh) to the 8-partition topic and to the 10,000-partition one, alternated,
#      twice each: the aggregate throughput to all of them against the 8 partitions'.
#   3. SIGTERM and start again: time from exec to serving Metadata, memory after.
# Prints one line per measurement; copy them into perf/RESULTS.md with the commit and
# machine.
#
#   perf/scripts/many_partitions.sh [TWINLOG_BIN] [RECORDS]
set -euo pipefail
BIN=${1:-target/release/twinlog}
RECORDS=${2:-500000}
PARTITIONS=10000
DIR=$(mktemp -d /tmp/twinlog-many-partitions.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP_DIR:-}" ] || rm -rf "$DIR"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
rss_mib() { awk '/VmRSS/ {printf "%.0f\n", $2 / 1024}' "/proc/$1/status"; }
open_files() { ls "/proc/$1/fd" | wc -l; }

A=127.0.0.1:$(free_port)
start() { # log
  NO_COLOR=1 "$BIN" serve --data-dir "$DIR/data" --listen $A > "$DIR/$1" 2>&1 &
  PID=$!
}
serving() { # waits until Metadata answers
  until "$BIN" topic list --bootstrap-server $A > /dev/null 2>&1; do sleep 0.05; done
}

t0=$(now)
start a.log
serving
echo "clean start-up to serving: $(elapsed "$t0" "$(now)") s, RSS $(rss_mib $PID) MiB"

t0=$(now)
"$BIN" topic create wide --partitions $PARTITIONS --bootstrap-server $A > /dev/null
t1=$(now)
"$BIN" topic create narrow --partitions 8 --bootstrap-server $A > /dev/null
echo "create $PARTITIONS partitions: $(elapsed "$t0" "$t1") s; RSS $(rss_mib $PID) MiB, $(open_files $PID) open files"

produce() { # topic
  KAFKA_JAVA_OPTS="-Xmx1g" bash scripts/kafka.sh java org.apache.kafka.tools.ProducerPerformance \
      --topic "$1" --num-records "$RECORDS" --record-size 1024 --throughput -1 \
      --producer-props bootstrap.servers="$A" acks=1 linger.ms=5 batch.size=262144 \
      2> /dev/null | tail -1 | sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/'
}
: > "$DIR/produce.txt"
for round in 1 2; do
  for topic in narrow wide; do
    mbs=$(produce $topic)
    echo "produce to $topic round $round: $mbs MB/s"
    echo "$topic $mbs" >> "$DIR/produce.txt"
  done
done
echo "after produce: RSS $(rss_mib $PID) MiB, $(open_files $PID) open files"

kill -TERM $PID
wait $PID || true
t0=$(now)
start b.log
serving
echo "restart with $PARTITIONS partitions to serving: $(elapsed "$t0" "$(now)") s, RSS $(rss_mib $PID) MiB, $(open_files $PID) open files"

python3 - "$DIR/produce.txt" <<'PY'
import sys
rates = {}
for line in open(sys.argv[1]):
    topic, mbs = line.split()
    rates.setdefault(topic, []).append(float(mbs))
n, w = max(rates["narrow"]), max(rates["wide"])
print("produce (best of 2): 8 partitions %.1f MB/s, 10,000 partitions %.1f MB/s, wide : narrow = %.2f" % (n, w, w / n))
PY
