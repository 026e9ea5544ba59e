#!/usr/bin/env bash
# Recovery after SIGKILL (issue 20): one Twinlog node and one Apache Kafka broker
# (scripts/kafka.sh) each get GB gigabytes of 1 KiB records (Kafka's ProducerPerformance,
# acks=1, the settings of many_partitions.sh) in one topic of PARTITIONS partitions, are
# killed with SIGKILL the moment the producer finishes, and are started again on the same
# data directory and port. Per system it prints the time from exec to
#   (a) the first Metadata answer (`twinlog topic list`, polled every 50 ms), and
#   (b) every partition serving: ListOffsets (latest) answers for all of them and the sum
#       of their log-end offsets is back to what it held before the kill, the records
#       produced (kcat -Q: one batched query, just before the kill, and after the restart
#       polled every 50 ms once (a) is done);
# then the restarted broker's RSS and its log's recovery lines, and a final comparison
# line. Copy the lines into perf/RESULTS.md with the commit and machine.
#
# Flush policy: both brokers run their defaults, log.flush.interval.messages and
# log.flush.interval.ms = Long.MAX_VALUE, i.e. never fsync on the append path (Twinlog:
# LogConfig::flush_messages/flush_ms = u64::MAX, "leave it to the OS"), and 1 GiB segments,
# so nothing is rolled (and flushed on roll) below 1 GiB a partition: every append is
# unflushed, no recovery point has moved and there is no clean-shutdown marker, so each
# restart recovers (scans, rebuilds indexes of) every segment. Twinlog runs with no
# config file (embedded defaults, buffered I/O); Kafka with kafka.sh's server.properties.
#
# Cold restarts: after the kill, `sync` and `echo 3 > /proc/sys/vm/drop_caches` (when it is
# writable, i.e. as root; otherwise the restart reads from the page cache, and the script
# says so). The sync writes the dirty pages the dead process left behind (SIGKILL loses
# nothing from the page cache): the brokers still see unflushed logs, but recovery reads
# them from disk rather than from memory. This drops the whole machine's page cache.
#
# Kafka's restart, a combined broker and controller: the controller replays the dead
# broker's registration and refuses the new one (DUPLICATE_BROKER_REGISTRATION) until that
# session times out (broker.session.timeout.ms, 9 s by default), then unfences it; Kafka
# answers no request before that. The script prints the log's "Loaded N logs in T ms"
# (the log recovery alone) and how many registrations were refused beside the timings.
# `kafka.sh start` would write new ports into server.properties, so the
# script re-executes the killed JVM itself, with the command line, environment and working
# directory read from /proc/PID before the kill (same ports, same data directory).
#
#   perf/scripts/recovery_bench.sh [TWINLOG_BIN] [GB] [PARTITIONS]   (defaults: 10, 1000)
#
# GB may be fractional (0.3). KEEP_DIR=1 keeps the work directory (under /work/benchtmp,
# or BENCH_TMP); TIMEOUT_S (default 1800) bounds each wait.
set -euo pipefail
BIN=${1:-target/release/twinlog}
GB=${2:-10}
PARTITIONS=${3:-1000}
TIMEOUT_S=${TIMEOUT_S:-1800}
TOPIC=bench # neither it nor the work dir may match "recover" (the log greps)
mkdir -p "${BENCH_TMP:-/work/benchtmp}"
DIR=$(mktemp -d "${BENCH_TMP:-/work/benchtmp}/twinlog-sigkill-bench.XXXXXX")
KPID= # the Kafka JVM: kafka.sh starts it with setsid, so it is no job of this shell
PROD_PID= # a running ProducerPerformance
kafka_of_dir() { # the JVM kafka.sh started in this work dir, if it still runs
  local p
  p=$(cat "$DIR/kafka/kafka.pid" 2> /dev/null) || return 0
  if { tr '\0' ' ' < "/proc/$p/cmdline"; } 2> /dev/null | grep -qF "$DIR/kafka/server.properties"; then
    echo "$p"
  fi
}
cleanup() {
  [ -n "$KPID" ] || KPID=$(kafka_of_dir) # interrupted before (or during) kafka.sh start
  if [ -n "$KPID" ]; then kill -KILL "$KPID" 2>/dev/null || true; fi
  if [ -n "$PROD_PID" ]; then kill -KILL "$PROD_PID" 2>/dev/null || true; fi
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP_DIR:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
rss_mib() { awk '/VmRSS/ {printf "%.0f\n", $2 / 1024}' "/proc/$1/status"; }
die() { echo "recovery_bench: $*" >&2; exit 1; }

RECORDS=$(python3 -c 'import sys; print(int(float(sys.argv[1]) * 10**9) // 1024)' "$GB")
[ "$RECORDS" -gt 0 ] || die "GB=$GB gives no records"
command -v kcat > /dev/null || die "kcat is not on PATH"
[ -x "$BIN" ] || die "$BIN is not an executable"
echo "recovery bench: $GB GB = $RECORDS records of 1 KiB across $PARTITIONS partitions; work dir $DIR"

QUERY=() # kcat -Q arguments: the latest offset of every partition, in one batched request
for ((p = 0; p < PARTITIONS; p++)); do QUERY+=(-t "$TOPIC:$p:-1"); done
end_offsets() { # bootstrap -> "PARTITIONS_ANSWERED SUM_OF_END_OFFSETS"
  { kcat -b "$1" -Q "${QUERY[@]}" 2> /dev/null || true; } \
    | awk '$3 == "offset" && $4 ~ /^[0-9]+$/ {n++; s += $4} END {printf "%d %d\n", n, s}'
}
metadata_up() { # bootstrap deadline: until Metadata answers
  until "$BIN" topic list --bootstrap-server "$1" > /dev/null 2>&1; do
    [ "$(date +%s)" -lt "$2" ] || die "no Metadata answer from $1 within ${TIMEOUT_S}s"
    sleep 0.05
  done
}
all_serving() { # bootstrap records deadline: until every partition answers, summing to records
  local got
  while :; do
    got=$(end_offsets "$1")
    [ "${got% *}" -eq "$PARTITIONS" ] && [ "${got#* }" -ge "$2" ] && return 0
    [ "$(date +%s)" -lt "$3" ] \
      || die "$1: after ${TIMEOUT_S}s only $got (partitions answered, records) of $PARTITIONS $2"
    sleep 0.05
  done
}
produce() { # bootstrap: ProducerPerformance's last line into LINE
  # A job (kafka.sh execs the JVM: PROD_PID is it), so that cleanup can end it.
  KAFKA_JAVA_OPTS="-Xmx1g" bash scripts/kafka.sh java org.apache.kafka.tools.ProducerPerformance \
      --topic "$TOPIC" --num-records "$RECORDS" --record-size 1024 --throughput -1 \
      --producer-props bootstrap.servers="$1" acks=1 linger.ms=5 batch.size=262144 \
      > "$DIR/produce.out" 2> /dev/null &
  PROD_PID=$!
  wait "$PROD_PID" || die "ProducerPerformance failed: $(tail -3 "$DIR/produce.out")"
  PROD_PID=
  LINE=$(tail -1 "$DIR/produce.out")
}
mbs() { sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/' <<< "$1"; }
cold() { # sync and drop the page cache, if allowed
  sync
  if { echo 3 > /proc/sys/vm/drop_caches; } 2> /dev/null; then
    echo "  sync; page cache dropped"
  else
    echo "  sync; page cache NOT dropped (/proc/sys/vm/drop_caches is not writable): a warm restart"
  fi
}
produced() { # bootstrap: the records the broker holds, from one ListOffsets query just
  # before the kill (read-only, a few ms: nothing is flushed by it); warns unless RECORDS
  local got
  got=$(end_offsets "$1")
  if [ "$got" != "$PARTITIONS $RECORDS" ]; then
    echo "  WARNING: before the kill $got (partitions answered, records), not $PARTITIONS $RECORDS" >&2
  fi
  echo "${got#* }"
}
recovery_lines() { # log name
  local n # Kafka's metadata replays print leaderRecoveryState: not log recovery
  n=$(grep -i recover "$1" | grep -vc 'Replayed ' || true)
  echo "  $2 log: $n lines matching 'recover' (metadata replays aside)$([ "$n" -gt 0 ] && echo ', the first 5:')"
  grep -i recover "$1" | grep -v 'Replayed ' | head -5 | cut -c1-300 | sed 's/^/    /' || true
}
declare -A META ALL

# ---- Twinlog ----
TA=127.0.0.1:$(free_port)
tstart() { # log
  NO_COLOR=1 "$BIN" serve --data-dir "$DIR/twinlog/data" --listen "$TA" > "$DIR/twinlog/$1" 2>&1 &
  TPID=$!
}
mkdir -p "$DIR/twinlog"
tstart first.log
metadata_up "$TA" $(($(date +%s) + TIMEOUT_S))
"$BIN" topic create "$TOPIC" --partitions "$PARTITIONS" --bootstrap-server "$TA" > /dev/null
t0=$(now)
produce "$TA"
t1=$(now)
held=$(produced "$TA")
kill -KILL "$TPID"
wait "$TPID" 2> /dev/null || true
echo "Twinlog: produced in $(elapsed "$t0" "$t1") s, $(mbs "$LINE") MB/s ($LINE); $held records held; SIGKILL"
cold
t0=$(now)
tstart restart.log
metadata_up "$TA" $(($(date +%s) + TIMEOUT_S))
t1=$(now)
all_serving "$TA" "$held" $(($(date +%s) + TIMEOUT_S))
t2=$(now)
META[twinlog]=$(elapsed "$t0" "$t1")
ALL[twinlog]=$(elapsed "$t0" "$t2")
echo "Twinlog restart after SIGKILL: Metadata after ${META[twinlog]} s, all $PARTITIONS partitions ($held records) after ${ALL[twinlog]} s, RSS $(rss_mib "$TPID") MiB"
recovery_lines "$DIR/twinlog/restart.log" Twinlog
echo "  Twinlog log: $(grep -c 'opened partition log.*clean=false' "$DIR/twinlog/restart.log" || true) partitions opened unclean, $(grep -c 'opened partition log.*clean=true' "$DIR/twinlog/restart.log" || true) clean"
python3 - "$DIR/twinlog/restart.log" <<'PY'
import datetime, sys
t = lambda l: datetime.datetime.fromisoformat(l.split()[0].rstrip("Z")[:26])
lines = open(sys.argv[1]).read().splitlines()
start = [l for l in lines if "twinlog starting" in l]
opened = [l for l in lines if "opened partition log" in l]
if start and opened:
    print("    partition logs opened %.2f s after 'twinlog starting'" % (t(opened[-1]) - t(start[0])).total_seconds())
PY
warns=$(grep -E ' (WARN|ERROR) ' "$DIR/twinlog/restart.log" || true)
if [ -n "$warns" ]; then
  echo "  Twinlog restart log: $(wc -l <<< "$warns") WARN/ERROR lines, the first 10:"
  head -10 <<< "$warns" | cut -c1-400 | sed 's/^/    /'
fi
kill -TERM "$TPID"
wait "$TPID" 2> /dev/null || true
rm -rf "$DIR/twinlog/data" # room for Kafka's copy

# ---- Apache Kafka ----
KDIR=$DIR/kafka
KA=$(bash scripts/kafka.sh start "$KDIR" | tail -1)
KPID=$(cat "$KDIR/kafka.pid")
"$BIN" topic create "$TOPIC" --partitions "$PARTITIONS" --bootstrap-server "$KA" > /dev/null
# Every partition has a leader before the producer starts (as the one Twinlog node's).
all_serving "$KA" 0 $(($(date +%s) + TIMEOUT_S))
# What the restart re-executes (kafka.sh's JVM command line, environment and cwd).
mapfile -d '' -t KCMD < "/proc/$KPID/cmdline"
mapfile -d '' -t KENV < "/proc/$KPID/environ"
KCWD=$(readlink "/proc/$KPID/cwd")
t0=$(now)
produce "$KA"
t1=$(now)
held=$(produced "$KA")
kill -KILL "$KPID"
# Not our child: wait until it is gone or a zombie (kill -0 succeeds on zombies).
while state=$(ps -o stat= -p "$KPID" 2> /dev/null) && [ "${state:0:1}" != Z ]; do sleep 0.01; done
KPID=
echo "Kafka: produced in $(elapsed "$t0" "$t1") s, $(mbs "$LINE") MB/s ($LINE); $held records held; SIGKILL"
cold
t0=$(now)
(cd "$KCWD" && exec env -i "${KENV[@]}" "${KCMD[@]}") < /dev/null > "$KDIR/restart.log" 2>&1 &
KPID=$!
metadata_up "$KA" $(($(date +%s) + TIMEOUT_S))
t1=$(now)
all_serving "$KA" "$held" $(($(date +%s) + TIMEOUT_S))
t2=$(now)
META[kafka]=$(elapsed "$t0" "$t1")
ALL[kafka]=$(elapsed "$t0" "$t2")
echo "Kafka restart after SIGKILL: Metadata after ${META[kafka]} s, all $PARTITIONS partitions ($held records) after ${ALL[kafka]} s, RSS $(rss_mib "$KPID") MiB"
recovery_lines "$KDIR/restart.log" Kafka
echo "  Kafka log: $(grep -c 'Recovering unflushed segment' "$KDIR/restart.log" || true) unflushed segments recovered; $(grep -c 'DUPLICATE_BROKER_REGISTRATION' "$KDIR/restart.log" || true) registrations refused as duplicate (the dead broker's session, broker.session.timeout.ms)"
grep -E 'Loaded [0-9]+ logs in' "$KDIR/restart.log" | cut -c1-300 | sed 's/^/    /' || true
kill -TERM "$KPID"
wait "$KPID" 2> /dev/null || true
KPID=

echo "recovery, $GB GB across $PARTITIONS partitions: Twinlog ${META[twinlog]} s to Metadata, ${ALL[twinlog]} s to all partitions; Kafka ${META[kafka]} s, ${ALL[kafka]} s; Kafka/Twinlog = $(python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) / max(float(sys.argv[2]), 0.01)))' "${ALL[kafka]}" "${ALL[twinlog]}") (all partitions)"
