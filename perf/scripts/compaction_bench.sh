#!/usr/bin/env bash
# Compaction end to end (issue 16): a 1-shard Twinlog holds one compacted partition
# filled with PREFILL_RECORDS 1 KiB records whose keys are 10% unique; then an open-loop
# keyed produce at RATE records/s runs for SECONDS to the same partition (same shard)
# while the cleaner compacts the fill, and the same run is repeated on a broker whose
# cleaner is off (log.cleaner.enable=false). Prints the produce p99 of both, their ratio,
# and the cleaner's throughput (bytes it read over the clean's time, from its log line),
# and appends a section to perf/RESULTS.md.
#
#   perf/scripts/compaction_bench.sh
#
# Environment (optional): PREFILL_RECORDS=400000 RATE=20000 RUN_SECONDS=30 NO_BUILD=1
#   RESULTS=perf/RESULTS.md ("-": print only) WORK=… (scratch dir, removed after)
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFILL_RECORDS=${PREFILL_RECORDS:-400000}
RATE=${RATE:-20000}
SECONDS_RUN=${RUN_SECONDS:-30}
RESULTS=${RESULTS:-perf/RESULTS.md}
KEYS=$((PREFILL_RECORDS / 10))
WORK=${WORK:-$(mktemp -d /tmp/twinlog-compaction-XXXXXX)}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
TWINLOG=$TARGET_DIR/release/twinlog
PERF=$TARGET_DIR/release/twinlog-perf
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    wait 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
log() { printf '[compaction] %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -p twinlog -p twinlog-perf >&2
fi

# run NAME ENABLE: one broker, fill, measured produce; leaves $WORK/NAME.json and .log.
run() {
    local name=$1 enable=$2 port
    port=$(free_port)
    printf '"log.cleaner.enable" = %s\n"log.cleaner.backoff.ms" = 1000\n\n[[shard]]\ncore = 0\n' \
        "$enable" > "$WORK/$name.toml"
    NO_COLOR=1 "$TWINLOG" serve --config "$WORK/$name.toml" --data-dir "$WORK/$name" \
        --listen "127.0.0.1:$port" > "$WORK/$name.log" 2>&1 &
    PID=$!
    until grep -q "twinlog ready" "$WORK/$name.log"; do sleep 0.1; done
    local b=127.0.0.1:$port
    "$TWINLOG" topic create table --partitions 1 --bootstrap-server "$b" \
        --config cleanup.policy=compact --config segment.bytes=33554432 \
        --config min.cleanable.dirty.ratio=0.05 >&2
    log "$name: filling $PREFILL_RECORDS records over $KEYS keys"
    "$PERF" produce --bootstrap-server "$b" --topic table --records "$PREFILL_RECORDS" \
        --duration 600s --record-size 1024 --keyed --key-space "$KEYS" --quiet > "$WORK/$name-fill.txt"
    log "$name: measured produce, $RATE records/s for ${SECONDS_RUN}s"
    "$PERF" produce --bootstrap-server "$b" --topic table --rate "$RATE" \
        --duration "${SECONDS_RUN}s" --record-size 1024 --keyed --key-space "$KEYS" \
        --quiet --json-out "$WORK/$name.json" > "$WORK/$name.txt"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
}

run cleaning true
run baseline false
p99() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["produce_latency"]["p99_ms"])' "$1"; }
P_CLEAN=$(p99 "$WORK/cleaning.json")
P_BASE=$(p99 "$WORK/baseline.json")
# The cleaner's lines during the cleaning run: bytes read and time of each clean.
CLEANER=$(grep "log cleaned" "$WORK/cleaning.log" | sed 's/\x1b\[[0-9;]*m//g' |
    python3 -c '
import re, sys
read = ms = n = 0
for line in sys.stdin:
    r = re.search(r"read=(\d+)", line); e = re.search(r"elapsed_ms=(\d+)", line)
    if r and e:
        read += int(r.group(1)); ms += int(e.group(1)); n += 1
print(f"{n} {read} {ms} {read / 1e6 / (ms / 1e3) if ms else 0:.1f}")')
read -r CLEANS READ MS MBPS <<< "$CLEANER"
RATIO=$(python3 -c "print(f'{$P_CLEAN / $P_BASE:.2f}')")
COMMIT=$(git rev-parse --short HEAD)
SECTION=$(cat <<MD

## Compaction: cleaner throughput and produce p99 while cleaning ($(date -u +%Y-%m-%d), commit $COMMIT)

Machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r). Command: \`perf/scripts/compaction_bench.sh\`
(PREFILL_RECORDS=$PREFILL_RECORDS, RATE=$RATE, RUN_SECONDS=$SECONDS_RUN): a 1-shard broker, one compacted
partition filled with 1 KiB records whose keys are 10% unique, then an open-loop keyed produce to the
same partition while the cleaner compacts the fill; the same on a broker with \`log.cleaner.enable=false\`.

| | produce p99 (ms) |
|---|---|
| while cleaning | $P_CLEAN |
| cleaner off | $P_BASE |
| ratio | $RATIO |

Cleaner during the run: $CLEANS cleans, $READ bytes read in $MS ms of cleaning: $MBPS MB/s on one shard
(concurrently with the produce load).
MD
)
echo "$SECTION"
[ "$RESULTS" = "-" ] || echo "$SECTION" >> "$RESULTS"
