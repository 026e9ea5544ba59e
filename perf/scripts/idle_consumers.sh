#!/usr/bin/env bash
# Idle long-poll consumers (issue 20), Twinlog and Apache Kafka in one run: each broker
# alone with a topic of 1,000 partitions, first with no client (its idle CPU), then with
# 1,000 connections long-polling one idle partition each (idle_consumers.py: Fetch with
# max_wait_ms 500, Kafka's consumer default). Prints each broker's CPU as a share of one
# core, and first the floor: `twinlog-perf idle-floor`, one epoll thread that answers the
# same polls with nothing else to do, the least any server spends on them here (the
# kernel's receive, loopback send and wake-ups). Copy the lines into perf/RESULTS.md
# with the commit and machine. SKIP_KAFKA=1 measures the floor and Twinlog only.
#
#   perf/scripts/idle_consumers.sh [TWINLOG_BIN] [SECONDS]
set -euo pipefail
BIN=${1:-target/release/twinlog}
PERF_BIN=${PERF_BIN:-$(dirname "$BIN")/twinlog-perf}
SECONDS_=${2:-30}
DIR=$(mktemp -d /tmp/twinlog-idle-consumers.XXXXXX)
trap 'bash scripts/kafka.sh stop "$DIR/kafka" > /dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$1/stat"; }
idle_share() { # pid seconds
  local c0 c1; c0=$(cpu_s "$1"); sleep "$2"; c1=$(cpu_s "$1")
  python3 -c "import sys; print('%.1f%%' % (100 * (float(sys.argv[2]) - float(sys.argv[1])) / float(sys.argv[3])))" "$c0" "$c1" "$2"
}

measure() { # name pid bootstrap
  sleep 5
  echo "$1 with 1,000 partitions, no client: $(idle_share "$2" "$SECONDS_") of a core"
  python3 perf/scripts/idle_consumers.py --bootstrap "$3" --pid "$2" --topic idle \
      --partitions 1000 --seconds "$SECONDS_" | sed "s/^/$1: /"
}

F=127.0.0.1:$(free_port)
"$PERF_BIN" idle-floor --listen $F > "$DIR/floor.log" 2>&1 &
F_PID=$!
until grep -q "listening on" "$DIR/floor.log"; do sleep 0.1; done
python3 perf/scripts/idle_consumers.py --bootstrap $F --pid $F_PID --topic idle \
    --partitions 1000 --seconds "$SECONDS_" | sed "s/^/floor (twinlog-perf idle-floor): /"
kill $F_PID; wait $F_PID 2>/dev/null || true

A=127.0.0.1:$(free_port)
NO_COLOR=1 "$BIN" serve --data-dir "$DIR/twinlog" --listen $A > "$DIR/twinlog.log" 2>&1 &
T_PID=$!
until grep -q "twinlog ready" "$DIR/twinlog.log"; do sleep 0.1; done
"$BIN" topic create idle --partitions 1000 --bootstrap-server $A > /dev/null
measure twinlog $T_PID $A
kill -TERM $T_PID; wait $T_PID || true
[ -n "${SKIP_KAFKA:-}" ] && exit 0

K=$(bash scripts/kafka.sh start "$DIR/kafka")
bash scripts/kafka.sh tool kafka-topics --bootstrap-server "$K" --create --topic idle \
    --partitions 1000 > /dev/null
measure kafka "$(cat "$DIR/kafka/kafka.pid")" "$K"
