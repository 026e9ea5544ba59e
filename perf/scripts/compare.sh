#!/usr/bin/env bash
# The comparison suite (issue 8): one command that measures, in one go on this machine,
#
#   1. the physical ceilings (`twinlog-perf ceilings`: CRC32C, memcpy, `dd oflag=direct`
#      sequential write, loopback TCP);
#   2. Twinlog produce and consume throughput and produce latency, 1 KiB records on 8
#      partitions, on a broker with 1 shard and with 2 shards (`twinlog-perf produce` /
#      `consume`; perf/scripts/client_bench.py when this twinlog-perf has no `produce`),
#      with the broker's CPU seconds per GB produced at max rate, and the open-loop latency
#      run at half of Kafka's max rate measured first (item 5); then small batches: one
#      partition fed one 1 KiB batch at a time by Kafka's ProducerPerformance, by
#      librdkafka (kcat -P) and by twinlog-perf (--pipeline 5) in turn (acks=1, linger.ms=0,
#      one record per batch, 5 requests in flight on one connection), against issue 20's
#      50 MB/s, and once more on a 1-shard broker with `spin.before.park.us` = $SMALL_SPIN_US;
#   3. native mirroring catch-up of a filled 8-partition topic (1 KiB records) into a
#      destination with 1 shard and with 2 shards, timed from AddTopicsToMirror until every
#      partition is MIRRORING with lag 0 (as perf/scripts/mirror_bench.sh), against the
#      MirrorMaker-style bridge on librdkafka (perf/bridge, `twinlog-bridge`) copying the
#      same source into a fresh 2-shard broker; the ratio native/bridge and native against
#      the lower of the disk and loopback ceilings;
#      MirrorMaker 2 (Apache Kafka's connect-mirror, a dedicated `connect-mirror-maker`
#      process tuned for throughput) copying the same source into a fresh 2-shard broker
#      is the headline comparison; the bridge stays as a second row;
#   4. the time from RemoveTopicsFromMirror to writable for 1 and 1,000 partitions;
#   5. Apache Kafka 4.1 (one KRaft broker from scripts/kafka.sh) under the same produce,
#      consume, latency and small-batch runs as item 2, with the same clients; it runs
#      before item 2, so that the latency rate can be half of Kafka's max rate;
#   6. replication: three Twinlog nodes, then three Apache Kafka nodes, an 8-partition
#      topic with replication factor 3 and min.insync.replicas=2, twinlog-perf produce
#      with acks=all and acks=1 (perf/scripts/cluster_bench.sh with SKIP_FAILOVER=1):
#      throughput and the three brokers' CPU seconds per GB, against issue 20's 2x and 0.5x;
#
# and appends a dated markdown section (commands, machine, date) to perf/RESULTS.md.
# The produce, consume and latency runs are also drawn side by side (`twinlog-perf report
# --html`): produce.html, consume.html and latency.html in REPORT_DIR. The mirroring step
# has no such page: its copiers (`twinlog mirror`, MirrorMaker 2, the bridge) write no
# twinlog-perf run reports.
# Every broker is fresh, on a free loopback port, with its data under $WORK.
#
#   perf/scripts/compare.sh
#
# Environment (all optional):
#   RECORDS=3000000        records in the mirrored source topic (1 KiB values)
#   RUNS=3                 catch-up runs per mirroring variant (each table cell: the median)
#   PRODUCE_SECONDS=10     length of each max-rate produce run (also capped by PRODUCE_RECORDS)
#   PRODUCE_RECORDS=4000000
#   LATENCY_RATE=…         records/s of the fixed-rate (open loop) latency runs; default:
#                          half of Kafka's max produce rate in this run (issue 20), or
#                          200000 with SKIP_KAFKA
#   LATENCY_SECONDS=5      length of each latency run
#   SMALL_RECORDS=200000   records of the small-batch runs (ProducerPerformance)
#   SKIP_SMALL=1           leave out the small-batch runs
#   SMALL_SPIN_US=50       spin.before.park.us of the extra 1-shard small-batch broker
#   REPLICATION_SECONDS=15 length of each replicated produce run (item 6)
#   SKIP_REPLICATION=1     leave out item 6 (also left out with SKIP_KAFKA)
#   FAILOVER_PARTITIONS="1 1000"
#   DEST_DIRECT_IO=true    `log.direct.io` of every copy's destination (native and bridge
#                          alike); the source and the produce/consume brokers keep the
#                          default (page cache)
#   MM2_RUNS=$RUNS         MirrorMaker 2 runs (each a fresh destination and MM2 process)
#   SKIP_KAFKA=1           leave out Apache Kafka and MirrorMaker 2 (items 3 and 5)
#   NO_BUILD=1             use the binaries already built (no cargo at all: TARGET_DIR,
#                          else $CARGO_TARGET_DIR, else ./target)
#   SKIP_BRIDGE=1          leave out the librdkafka bridge (perf/bridge) row
#   REPORT_DIR=…           where the HTML pages, the JSON runs and the markdown section are
#                          kept (default: a fresh /tmp/twinlog-compare-report.* directory)
#   BRIDGE_TARGET_DIR=…    cargo target dir of perf/bridge (default perf/bridge/target)
#   RESULTS=perf/RESULTS.md  where the section goes ("-": print it only)
#   WORK=…                 scratch directory (default: a fresh one under /tmp, removed after)
#   PROFILE_DIR=…          also run one more native catch-up under `perf record --call-graph
#                          dwarf` (source and destination brokers) and leave perf.data files
#                          and text reports there
#
# Needs the Rust toolchain, python3, .venv (scripts/test.sh creates it: confluent-kafka for
# the fill), cmake and a C compiler (the bridge's vendored librdkafka), bc, and for Kafka
# and MirrorMaker 2 a JDK with Maven (`scripts/kafka.sh install`, which scripts/test.sh runs). On a 2-core
# machine: about 5 minutes of measurements, 2 more for item 6 (half a minute more with PROFILE_DIR) after the builds
# (3.5 minutes for a release build of a changed workspace, 3 for the bridge's first).
# A quick check of the script itself (minutes, numbers not for RESULTS.md):
#   NO_BUILD=1 SKIP_BRIDGE=1 RESULTS=- RECORDS=100000 RUNS=1 PRODUCE_SECONDS=3 \
#     PRODUCE_RECORDS=300000 LATENCY_SECONDS=2 SMALL_RECORDS=20000 FAILOVER_PARTITIONS=1 \
#     REPLICATION_SECONDS=3 perf/scripts/compare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

RECORDS=${RECORDS:-3000000}
RUNS=${RUNS:-3}
PRODUCE_SECONDS=${PRODUCE_SECONDS:-10}
PRODUCE_RECORDS=${PRODUCE_RECORDS:-4000000}
# Empty: half of Kafka's max rate, set once Kafka's produce run is done.
LATENCY_RATE=${LATENCY_RATE:-}
LATENCY_RATE_GIVEN=${LATENCY_RATE:+1}
LATENCY_SECONDS=${LATENCY_SECONDS:-5}
SMALL_RECORDS=${SMALL_RECORDS:-200000}
SKIP_SMALL=${SKIP_SMALL:-}
SMALL_SPIN_US=${SMALL_SPIN_US:-50}
REPLICATION_SECONDS=${REPLICATION_SECONDS:-15}
SKIP_REPLICATION=${SKIP_REPLICATION:-${SKIP_KAFKA:-}}
SKIP_BRIDGE=${SKIP_BRIDGE:-}
FAILOVER_PARTITIONS=${FAILOVER_PARTITIONS-1 1000}
DEST_DIRECT_IO=${DEST_DIRECT_IO:-true}
MM2_RUNS=${MM2_RUNS:-$RUNS}
SKIP_KAFKA=${SKIP_KAFKA:-}
RESULTS=${RESULTS:-perf/RESULTS.md}
PY=${PY:-.venv/bin/python}
BRIDGE_TARGET_DIR=${BRIDGE_TARGET_DIR:-$ROOT/perf/bridge/target}
PROFILE_DIR=${PROFILE_DIR:-}
REPORT_DIR=${REPORT_DIR:-$(mktemp -d /tmp/twinlog-compare-report.XXXXXX)}
mkdir -p "$REPORT_DIR"
STARTED=$(date -u +%s)

log() { printf '[compare %4ds] %s\n' $(($(date -u +%s) - STARTED)) "$*" >&2; }

# --- build ---------------------------------------------------------------------------
if [ -n "${NO_BUILD:-}" ]; then
    # No cargo at all (not even `cargo metadata`): another build may hold its locks.
    TARGET_DIR=${TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}}
else
    TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    log "building twinlog and twinlog-perf (cargo build --release --workspace)"
    cargo build --release --workspace >&2
    if [ -z "$SKIP_BRIDGE" ]; then
        log "building the bridge (perf/bridge, librdkafka vendored)"
        (cd perf/bridge && CARGO_TARGET_DIR=$BRIDGE_TARGET_DIR cargo build --release >&2)
    fi
fi
TWINLOG=$TARGET_DIR/release/twinlog
PERF=$TARGET_DIR/release/twinlog-perf
BRIDGE=$BRIDGE_TARGET_DIR/release/twinlog-bridge
NEEDED=("$TWINLOG" "$PERF")
[ -n "$SKIP_BRIDGE" ] || NEEDED+=("$BRIDGE")
for b in "${NEEDED[@]}"; do
    [ -x "$b" ] || { echo "compare.sh: $b is missing (build it, unset NO_BUILD, or SKIP_BRIDGE=1 for the bridge)" >&2; exit 1; }
done
[ -x "$PY" ] || { echo "compare.sh: $PY is missing (scripts/test.sh creates .venv)" >&2; exit 1; }
if [ -z "$SKIP_KAFKA" ] && [ ! -d compat/kafka/lib ]; then
    log "resolving Apache Kafka (scripts/kafka.sh install)"
    bash scripts/kafka.sh install >&2
fi

if [ -n "${WORK:-}" ]; then
    mkdir -p "$WORK"
    KEEP_WORK=1
else
    WORK=$(mktemp -d /tmp/twinlog-compare.XXXXXX)
fi
OUT=$WORK/out
mkdir -p "$OUT"
[ -n "$PROFILE_DIR" ] && mkdir -p "$PROFILE_DIR"

# Brokers started by this script: name -> pid; only these are stopped.
declare -A PID ADDR
cleanup() {
    for n in "${!PID[@]}"; do kill "${PID[$n]}" 2>/dev/null || true; done
    if [ -f "$WORK/kafka/kafka.pid" ]; then bash scripts/kafka.sh stop "$WORK/kafka"; fi
    wait 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Broker configs: 8 partitions by default; [[shard]] tables pick the cores. The `-dest`
# variants are for the destinations of copies.
for s in 1 2; do
    for role in "" -dest; do
        {
            echo '"mirror.state.topic.num.partitions" = 8'
            echo '"num.partitions" = 8'
            [ -z "$role" ] || echo "\"log.direct.io\" = $DEST_DIRECT_IO"
            for ((c = 0; c < s; c++)); do printf '\n[[shard]]\ncore = %d\n' $c; done
        } > "$WORK/shards$s$role.toml"
    done
done
sed "s/^core = 0$/core = 0\nspin.before.park.us = $SMALL_SPIN_US/" "$WORK/shards1.toml" > "$WORK/shards1-spin.toml"

# start NAME SHARDS [-dest]: a fresh broker; sets ADDR[NAME] and PID[NAME].
start() {
    local name=$1 shards=$2 role=${3:-} port
    port=$(free_port)
    rm -rf "$WORK/$name"
    NO_COLOR=1 "$TWINLOG" serve --config "$WORK/shards$shards$role.toml" --data-dir "$WORK/$name" \
        --listen 127.0.0.1:$port > "$WORK/$name.log" 2>&1 &
    PID[$name]=$!
    ADDR[$name]=127.0.0.1:$port
    local i=0
    until grep -q "twinlog ready" "$WORK/$name.log"; do
        sleep 0.1
        i=$((i + 1))
        if [ $i -gt 300 ] || ! kill -0 "${PID[$name]}" 2>/dev/null; then
            echo "compare.sh: broker $name did not start:" >&2
            tail -20 "$WORK/$name.log" >&2
            exit 1
        fi
    done
}

# stop NAME: stops the broker and removes its data.
stop() {
    local name=$1
    kill "${PID[$name]}" 2>/dev/null || true
    wait "${PID[$name]}" 2>/dev/null || true
    unset "PID[$name]"
    rm -rf "${WORK:?}/$name"
}

now() { date +%s.%N; }
# CPU seconds (user + system, every thread, io_uring workers included) a process used.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# run_rusage FILE CMD...: runs CMD, writes the CPU seconds it used to FILE.
run_rusage() {
    python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%.3f\n" % (u.ru_utime + u.ru_stime))
sys.exit(r.returncode)' "$@"
}

# Wait until every partition of mirror m on a destination is MIRRORING with lag 0. One
# process polling every 20 ms: a shell loop starting the CLI and python each time took a
# third of a core from the brokers being measured.
wait_caught_up() {
    "$TWINLOG" mirror wait m --caught-up --poll-ms 20 --timeout 600 --bootstrap-server "$1" > /dev/null
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
MACHINE_CORES=$(nproc)
MACHINE_MODEL=$(lscpu | grep 'Model name' | sed 's/^Model name:[[:space:]]*//')
log "machine: $MACHINE_CORES cores, $MACHINE_MODEL; work dir $WORK"

# --- 1. ceilings ---------------------------------------------------------------------
log "ceilings"
"$PERF" ceilings --dir "$WORK" --json "$OUT/ceilings.json" > "$OUT/ceilings.txt"

# --- 5, then 2. produce and consume: Apache Kafka first, then Twinlog ----------------
if "$PERF" produce --help > /dev/null 2>&1 && "$PERF" consume --help > /dev/null 2>&1; then
    echo twinlog-perf > "$OUT/client"
else
    echo client_bench > "$OUT/client"
fi

# measure_produce NAME BOOTSTRAP BROKER_PID LABEL: the max-rate produce run (8 partitions),
# with the broker process's CPU seconds around it (user + system, every thread, io_uring
# workers included) in NAME.cpu.
measure_produce() {
    local name=$1 bootstrap=$2 bpid=$3 label=$4 c0
    c0=$(cpu_of "$bpid")
    "$PERF" produce --bootstrap-server "$bootstrap" --topic bench --create-partitions 8 \
        --record-size 1024 --duration "${PRODUCE_SECONDS}s" --records "$PRODUCE_RECORDS" \
        --label "$label" --quiet --json-out "$OUT/produce-$name.json" > "$OUT/produce-$name.txt"
    echo "$(cpu_of "$bpid") - $c0" | bc > "$OUT/produce-$name.cpu"
}
# measure_latency NAME BOOTSTRAP LABEL: the open-loop run at LATENCY_RATE records/s.
measure_latency() {
    "$PERF" produce --bootstrap-server "$2" --topic lat --create-partitions 8 \
        --record-size 1024 --rate "$LATENCY_RATE" --duration "${LATENCY_SECONDS}s" \
        --label "$3" --quiet --json-out "$OUT/latency-$1.json" > "$OUT/latency-$1.txt"
}
# measure_small NAME BOOTSTRAP BROKER_PID: small batches on the existing 1-partition topic
# `small`, one 1 KiB record per batch, acks=1, at most 5 requests in flight, by three
# clients one after the other: Kafka's own producer (ProducerPerformance, batch.size=1024,
# linger.ms=0; with the C2 JIT: scripts/kafka.sh runs tools C1-only for start-up, which
# costs this client about a third of its rate) and librdkafka (kcat -P, batch.size=1: one message per
# batch), then twinlog-perf's pipelined producer (--batch-size 1024 --pipeline 5, one
# connection, one executor) when this twinlog-perf has --pipeline. Java: its last line (the
# totals) goes to small-NAME.txt; kcat: its seconds to small-NAME.kcat.time; twinlog-perf:
# its JSON report to small-NAME.perf.json. The broker's CPU seconds during each run go to
# .cpu, .kcat.cpu and .perf.cpu, the client's own to .client-cpu, .kcat.client-cpu and
# .perf.client-cpu.
measure_small() {
    local name=$1 bootstrap=$2 bpid=$3 c0 t0
    sync # the earlier runs' write-back done
    c0=$(cpu_of "$bpid")
    run_rusage "$OUT/small-$name.client-cpu" \
        env KAFKA_JAVA_OPTS="-Xmx1g -XX:TieredStopAtLevel=4" bash scripts/kafka.sh java org.apache.kafka.tools.ProducerPerformance \
        --topic small --num-records "$SMALL_RECORDS" --record-size 1024 --throughput -1 \
        --producer-props bootstrap.servers="$bootstrap" acks=1 linger.ms=0 batch.size=1024 \
        max.in.flight.requests.per.connection=5 > "$OUT/small-$name.out" 2> "$OUT/small-$name.err"
    echo "$(cpu_of "$bpid") - $c0" | bc > "$OUT/small-$name.cpu"
    tail -1 "$OUT/small-$name.out" > "$OUT/small-$name.txt"
    log "small batches, $name, Java producer: $(sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1 MB\/s/' "$OUT/small-$name.txt")"
    [ -s "$WORK/small-records.txt" ] || python3 -c 'import sys; sys.stdout.buffer.write((b"x" * 1024 + b"\n") * int(sys.argv[1]))' "$SMALL_RECORDS" > "$WORK/small-records.txt"
    sync
    c0=$(cpu_of "$bpid")
    t0=$(now)
    if run_rusage "$OUT/small-$name.kcat.client-cpu" kcat -P -b "$bootstrap" -t small -p 0 \
        -X linger.ms=0 -X batch.size=1 -X max.in.flight=5 -X acks=1 \
        < "$WORK/small-records.txt" 2> "$OUT/small-$name.kcat.err"; then
        echo "$(now) - $t0" | bc > "$OUT/small-$name.kcat.time"
        echo "$(cpu_of "$bpid") - $c0" | bc > "$OUT/small-$name.kcat.cpu"
        log "small batches, $name, librdkafka: $(python3 -c 'import sys; print("%.2f MB/s" % (int(sys.argv[1]) * 1024 / 2**20 / float(sys.argv[2])))' "$SMALL_RECORDS" "$(cat "$OUT/small-$name.kcat.time")")"
    else
        log "small batches, $name, librdkafka: failed (small-$name.kcat.err)"
    fi
    "$PERF" produce --help | grep -q -- --pipeline || return 0
    sync
    c0=$(cpu_of "$bpid")
    if run_rusage "$OUT/small-$name.perf.client-cpu" "$PERF" produce --bootstrap-server "$bootstrap" \
        --topic small --partitions 1 --records "$SMALL_RECORDS" --record-size 1024 --batch-size 1024 \
        --acks 1 --in-flight 1 --pipeline 5 --threads 1 --duration 10m --quiet \
        --json-out "$OUT/small-$name.perf.json" > "$OUT/small-$name.perf.txt" 2>&1; then
        echo "$(cpu_of "$bpid") - $c0" | bc > "$OUT/small-$name.perf.cpu"
        log "small batches, $name, twinlog-perf: $(grep -o '[0-9,]* records/s' "$OUT/small-$name.perf.txt")"
    else
        log "small batches, $name, twinlog-perf: failed (small-$name.perf.txt)"
    fi
}

# Kafka first: its max rate sets the latency runs' rate (issue 20: "at half of Kafka's
# maximum rate"), for Kafka and Twinlog alike.
if [ -z "$SKIP_KAFKA" ]; then
    log "Apache Kafka: one KRaft broker (scripts/kafka.sh start), num.partitions = 8"
    K=$(KAFKA_EXTRA_CONFIG="num.partitions=8" bash scripts/kafka.sh start "$WORK/kafka")
    KPID=$(cat "$WORK/kafka/kafka.pid")
    log "produce, Kafka: max rate"
    measure_produce kafka "$K" "$KPID" "Apache Kafka 4.1"
    if [ -z "$LATENCY_RATE" ]; then
        LATENCY_RATE=$(python3 -c 'import json, sys
print(max(1, round(json.load(open(sys.argv[1]))["produce"]["records_per_s"] / 2)))' "$OUT/produce-kafka.json")
        log "latency rate: half of Kafka's max, $LATENCY_RATE records/s"
    fi
    log "consume, Kafka"
    "$PERF" consume --bootstrap-server "$K" --topic bench --from earliest --to-end \
        --duration 120s --label "Apache Kafka 4.1" --quiet --json-out "$OUT/consume-kafka.json" \
        > "$OUT/consume-kafka.txt"
    log "produce, Kafka: $LATENCY_RATE records/s for $LATENCY_SECONDS s"
    measure_latency kafka "$K" "Apache Kafka 4.1"
    if [ -z "$SKIP_SMALL" ]; then
        bash scripts/kafka.sh tool kafka-topics --bootstrap-server "$K" --create --topic small \
            --partitions 1 > /dev/null
        log "small batches, Kafka: $SMALL_RECORDS records, 1 partition"
        measure_small kafka "$K" "$KPID"
    fi
    bash scripts/kafka.sh stop "$WORK/kafka"
    rm -rf "$WORK/kafka"
fi
LATENCY_RATE=${LATENCY_RATE:-200000}

for s in 1 2; do
    start p$s $s
    P=${ADDR[p$s]}
    label="Twinlog, $s shard$([ "$s" = 1 ] || echo s)"
    if [ "$(cat "$OUT/client")" = twinlog-perf ]; then
        log "produce, $s shard(s): max rate"
        measure_produce "$s" "$P" "${PID[p$s]}" "$label"
        log "consume, $s shard(s)"
        "$PERF" consume --bootstrap-server "$P" --topic bench --from earliest --to-end \
            --duration 120s --label "$label" --quiet --json-out "$OUT/consume-$s.json" \
            > "$OUT/consume-$s.txt"
        log "produce, $s shard(s): $LATENCY_RATE records/s for $LATENCY_SECONDS s"
        measure_latency "$s" "$P" "$label"
    else
        log "produce and consume, $s shard(s) (client_bench.py)"
        "$PY" perf/scripts/client_bench.py "$P" --records 500000 --partitions 8 \
            > "$OUT/client_bench-$s.json"
    fi
    if [ -z "$SKIP_SMALL" ]; then
        "$TWINLOG" topic create small --partitions 1 --bootstrap-server "$P" > /dev/null
        log "small batches, $s shard(s): $SMALL_RECORDS records, 1 partition"
        measure_small "$s" "$P" "${PID[p$s]}"
    fi
    stop p$s
done
if [ -z "$SKIP_SMALL" ]; then
    start p1spin 1 -spin
    "$TWINLOG" topic create small --partitions 1 --bootstrap-server "${ADDR[p1spin]}" > /dev/null
    log "small batches, 1 shard with spin.before.park.us = $SMALL_SPIN_US: $SMALL_RECORDS records, 1 partition"
    measure_small 1spin "${ADDR[p1spin]}" "${PID[p1spin]}"
    stop p1spin
fi

# Twinlog and Kafka side by side, one page per kind of run (the JSON runs are the input).
if [ "$(cat "$OUT/client")" = twinlog-perf ]; then
    "$PERF" report "$OUT"/produce-*.json --html "$OUT/produce.html" \
        --title "Produce at max rate, 1 KiB records, 8 partitions: Twinlog and Apache Kafka" > /dev/null
    "$PERF" report "$OUT"/consume-*.json --html "$OUT/consume.html" \
        --title "Consume, 1 KiB records, 8 partitions: Twinlog and Apache Kafka" > /dev/null
    "$PERF" report "$OUT"/latency-*.json --html "$OUT/latency.html" \
        --title "Produce latency at $LATENCY_RATE records/s (open loop), 1 KiB records, 8 partitions: Twinlog and Apache Kafka" > /dev/null
    cp "$OUT"/produce.html "$OUT"/consume.html "$OUT"/latency.html "$OUT"/produce-*.json \
        "$OUT"/consume-*.json "$OUT"/latency-*.json "$REPORT_DIR/"
    log "charts: $REPORT_DIR/produce.html, consume.html, latency.html"
fi
[ -n "$SKIP_SMALL" ] || cp "$OUT"/small-* "$REPORT_DIR/"

# --- 3. mirroring catch-up: native vs MirrorMaker 2 and the bridge --------------------

log "filling the source: $RECORDS records of 1 KiB on 8 partitions"
start a 2
A=${ADDR[a]}
"$TWINLOG" topic create bench --partitions 8 --bootstrap-server "$A" > /dev/null
t0=$(now)
"$PY" tests/clients/mirror_load.py --bootstrap "$A" --topic bench --partitions 8 \
    --count "$RECORDS" --value-size 1024 --compression none > "$OUT/fill.json"
t1=$(now)
echo "$t0 $t1" > "$OUT/fill.time"
# Record-batch bytes of the topic (the .log files; indexes are derived data).
find "$WORK/a" -path "*/bench-*" -name '*.log' -printf '%s\n' |
    awk '{s += $1} END {printf "%.0f\n", s}' > "$OUT/source.bytes"

native_run() { # SHARDS RUN
    local s=$1 r=$2
    start b "$s" -dest
    "$TWINLOG" mirror create m --source "$A" --bootstrap-server "${ADDR[b]}" > /dev/null
    local t0 t1 ca0 cb0
    sync # every copier starts with the disk's write-back done
    ca0=$(cpu_of "${PID[a]}")
    cb0=$(cpu_of "${PID[b]}")
    t0=$(now)
    "$TWINLOG" mirror add m --topic bench --bootstrap-server "${ADDR[b]}" > /dev/null
    wait_caught_up "${ADDR[b]}"
    t1=$(now)
    echo "$t0 $t1" > "$OUT/native-$s-$r.time"
    echo "$(cpu_of "${PID[a]}") - $ca0 + $(cpu_of "${PID[b]}") - $cb0" | bc > "$OUT/native-$s-$r.cpu"
    log "native, $s shard(s), run $r: $(python3 -c "print('%.2f s' % ($t1 - $t0))")"
    stop b
}
for s in 2 1; do
    for ((r = 1; r <= RUNS; r++)); do native_run "$s" "$r"; done
done

BRIDGE_RUNS=$RUNS
[ -z "$SKIP_BRIDGE" ] || BRIDGE_RUNS=0
for ((r = 1; r <= BRIDGE_RUNS; r++)); do
    start c 2 -dest
    "$TWINLOG" topic create bench --partitions 8 --bootstrap-server "${ADDR[c]}" > /dev/null
    sync
    ca0=$(cpu_of "${PID[a]}")
    cc0=$(cpu_of "${PID[c]}")
    run_rusage "$OUT/bridge-$r.rusage" "$BRIDGE" --source "$A" --destination "${ADDR[c]}" \
        --topic bench --partitions 8 > "$OUT/bridge-$r.json"
    echo "$(cpu_of "${PID[a]}") - $ca0 + $(cpu_of "${PID[c]}") - $cc0 + $(cat "$OUT/bridge-$r.rusage")" |
        bc > "$OUT/bridge-$r.cpu"
    log "bridge, run $r: $(cat "$OUT/bridge-$r.json")"
    stop c
done

# MirrorMaker 2 in a dedicated process: A -> B for `bench` only, no heartbeats,
# checkpoints, ACL or config sync (native mirroring's config sync is not timed either),
# topic names kept (IdentityReplicationPolicy), clients tuned like the bridge's. Timed from
# the MM2 process start (JVM and Connect start-up included) until the destination holds
# every record; `first_s` in the JSON is when the first one arrived.
mm2_run() { # RUN
    local r=$1 mpid
    start c 2 -dest
    "$TWINLOG" topic create bench --partitions 8 --bootstrap-server "${ADDR[c]}" > /dev/null
    cat > "$WORK/mm2.properties" <<MM2
clusters = A, B
A.bootstrap.servers = $A
B.bootstrap.servers = ${ADDR[c]}
A->B.enabled = true
B->A.enabled = false
A->B.topics = bench
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
emit.heartbeats.enabled = false
emit.checkpoints.enabled = false
sync.group.offsets.enabled = false
sync.topic.acls.enabled = false
sync.topic.configs.enabled = false
tasks.max = 8
offset.flush.interval.ms = 10000
A.consumer.fetch.max.bytes = 16777216
A.consumer.max.partition.fetch.bytes = 4194304
A.consumer.max.poll.records = 10000
A.consumer.fetch.max.wait.ms = 100
B.producer.batch.size = 1048576
B.producer.linger.ms = 10
B.producer.buffer.memory = 67108864
B.producer.max.request.size = 10485760
B.producer.compression.type = none
MM2
    sync
    ca0=$(cpu_of "${PID[a]}")
    cc0=$(cpu_of "${PID[c]}")
    (cd "$WORK" && exec bash "$ROOT/scripts/kafka.sh" mm2 "$WORK/mm2.properties" > "$WORK/mm2-$r.log" 2>&1) &
    mpid=$!
    PID[mm2]=$mpid
    "$PY" perf/scripts/wait_offsets.py "${ADDR[c]}" bench "$RECORDS" --timeout 1200 > "$OUT/mm2-$r.json"
    echo "$(cpu_of "${PID[a]}") - $ca0 + $(cpu_of "${PID[c]}") - $cc0 + $(cpu_of "$mpid")" | bc > "$OUT/mm2-$r.cpu"
    log "MirrorMaker 2, run $r: $(cat "$OUT/mm2-$r.json")"
    kill "$mpid" 2>/dev/null || true
    wait "$mpid" 2>/dev/null || true
    unset "PID[mm2]"
    stop c
}
if [ -z "$SKIP_KAFKA" ]; then
    for ((r = 1; r <= MM2_RUNS; r++)); do mm2_run "$r"; done
fi

if [ -n "$PROFILE_DIR" ]; then
    log "profiling one native catch-up (perf record on both brokers)"
    start b 2 -dest
    "$TWINLOG" mirror create m --source "$A" --bootstrap-server "${ADDR[b]}" > /dev/null
    perf record --call-graph dwarf,16384 -F 499 -p "${PID[b]}" -o "$PROFILE_DIR/dest.perf.data" 2> "$PROFILE_DIR/dest.record.txt" &
    PERF_B=$!
    perf record --call-graph dwarf,16384 -F 499 -p "${PID[a]}" -o "$PROFILE_DIR/source.perf.data" 2> "$PROFILE_DIR/source.record.txt" &
    PERF_A=$!
    sleep 1
    t0=$(now)
    "$TWINLOG" mirror add m --topic bench --bootstrap-server "${ADDR[b]}" > /dev/null
    wait_caught_up "${ADDR[b]}"
    t1=$(now)
    kill -INT "$PERF_B" "$PERF_A"
    wait "$PERF_B" "$PERF_A" || true
    echo "$t0 $t1" > "$PROFILE_DIR/catch-up.time"
    for side in dest source; do
        perf report -i "$PROFILE_DIR/$side.perf.data" --stdio --no-children --sort comm,dso,sym -G \
            --percent-limit 0.5 2> /dev/null | grep -v '^$' | head -400 > "$PROFILE_DIR/$side.report.txt" || true
        perf report -i "$PROFILE_DIR/$side.perf.data" --stdio --no-children --sort comm \
            2> /dev/null | grep -v '^$' | head -40 > "$PROFILE_DIR/$side.threads.txt" || true
    done
    stop b
fi

# --- 4. RemoveTopicsFromMirror to writable -------------------------------------------
start b 2 -dest
B=${ADDR[b]}
"$TWINLOG" mirror create m --source "$A" --bootstrap-server "$B" > /dev/null
for P in $FAILOVER_PARTITIONS; do
    log "remove to writable, $P partition(s)"
    "$TWINLOG" topic create "fo$P" --partitions "$P" --bootstrap-server "$A" > /dev/null
    "$PY" tests/clients/mirror_load.py --bootstrap "$A" --topic "fo$P" --partitions "$P" \
        --count $((P * 10)) --value-size 100 > /dev/null
    "$TWINLOG" mirror add m --topic "fo$P" --bootstrap-server "$B" > /dev/null
    "$TWINLOG" mirror wait m --state MIRRORING --topic "fo$P" --timeout 300 --bootstrap-server "$B" > /dev/null
    t0=$(now)
    "$TWINLOG" mirror remove m --topic "fo$P" --bootstrap-server "$B" > /dev/null
    "$TWINLOG" mirror wait m --state STOPPED --topic "fo$P" --poll-ms 2 --timeout 300 \
        --bootstrap-server "$B" > /dev/null
    t1=$(now)
    echo "$t0 $t1" > "$OUT/failover-$P.time"
done
stop b
stop a

# --- 6. replication: three nodes each, RF 3 ------------------------------------------
if [ -z "$SKIP_REPLICATION" ]; then
    log "replication: three Twinlog and three Kafka nodes, RF 3, ${REPLICATION_SECONDS}s per run"
    mkdir -p "$WORK/cluster"
    # Its own scratch directory under WORK: cluster_bench.sh removes it when done.
    TARGET_DIR=$TARGET_DIR NO_BUILD=1 SKIP_FAILOVER=1 RESULTS=- RUN_SECONDS=$REPLICATION_SECONDS \
        SUMMARY=$OUT/replication.json WORK=$WORK/cluster bash perf/scripts/cluster_bench.sh \
        > "$OUT/replication.txt" 2> "$OUT/replication.log" ||
        log "replication step failed: see replication.log"
    cp "$OUT"/replication.* "$REPORT_DIR/" 2>/dev/null || true
fi

# --- the report ----------------------------------------------------------------------
log "writing the report"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ", with uncommitted changes" || true)
SECTION=$(python3 - "$OUT" <<PY
import glob, json, os, statistics, sys
out = sys.argv[1]
def rd(name):
    with open(os.path.join(out, name)) as f:
        return f.read().strip()
def js(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
def span(name):
    a, b = map(float, rd(name).split())
    return b - a
runs = int("$RUNS")
records = int("$RECORDS")
src_bytes = int(rd("source.bytes"))
ceil = js("ceilings.json")
L = []
w = L.append
w("")
w("## Comparison suite, $(date -u +%Y-%m-%d) (perf/scripts/compare.sh)")
w("")
knobs = ("RECORDS=$RECORDS, RUNS=$RUNS, PRODUCE_SECONDS=$PRODUCE_SECONDS, PRODUCE_RECORDS=$PRODUCE_RECORDS, "
         + ("LATENCY_RATE=$LATENCY_RATE" if "$LATENCY_RATE_GIVEN" else "LATENCY_RATE unset: $LATENCY_RATE")
         + ", LATENCY_SECONDS=$LATENCY_SECONDS"
         + ("" if "$SKIP_SMALL" else ", SMALL_RECORDS=$SMALL_RECORDS")
         + ("" if "$SKIP_REPLICATION" else ", REPLICATION_SECONDS=$REPLICATION_SECONDS")
         + (", SKIP_BRIDGE=1" if "$SKIP_BRIDGE" else "") + (", SKIP_KAFKA=1" if "$SKIP_KAFKA" else ""))
w("Command: \`perf/scripts/compare.sh\` (" + knobs + "). Machine: \`nproc\` = $MACHINE_CORES, "
  "\`lscpu | grep 'Model name'\` = \"$MACHINE_MODEL\", $(uname -sr); date $(date -u '+%Y-%m-%d %H:%M') UTC; "
  "twinlog at $COMMIT$DIRTY. Every broker is a fresh release build on 127.0.0.1 with "
  "\`num.partitions\` = 8 and \`[[shard]]\` tables for its cores; brokers, clients and the bridge "
  "share the machine's cores; other sessions' work ran on the same VM (load average at the start "
  "$LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)), so wall-clock figures carry tens of "
  "percent of noise; CPU seconds per GB are steadier.")
w("")
w("### Physical ceilings")
w("")
w("\`twinlog-perf ceilings --dir WORK\`")
w("")
w("| ceiling | value |")
w("| --- | ---: |")
names = [("crc32c_gb_s", "CRC32C", "GB/s"), ("memcpy_gb_s", "memcpy", "GB/s"),
         ("seq_write_mb_s", "sequential write (\`dd oflag=direct\`)", "MB/s"),
         ("loopback_tcp_gb_s", "loopback TCP", "GB/s")]
for k, n, u in names:
    v = ceil.get(k)
    w("| %s | %s |" % (n, "%.2f %s" % (v, u) if v is not None else "failed: " + ceil.get(k + "_error", "?")))
disk = ceil.get("seq_write_mb_s") or float("inf")
loop = (ceil.get("loopback_tcp_gb_s") or float("inf")) * 1000
lower = min(disk, loop)
lower_name = "disk" if disk <= loop else "loopback"
w("")
client = rd("client")
w("### Produce and consume, 1 KiB records, 8 partitions")
w("")
if client == "twinlog-perf":
    w("\`twinlog-perf produce --bootstrap-server B --topic bench --create-partitions 8 --record-size 1024 "
      "--duration ${PRODUCE_SECONDS}s --records $PRODUCE_RECORDS\`, then \`twinlog-perf consume --topic bench "
      "--from earliest --to-end\`, then \`twinlog-perf produce --topic lat --rate $LATENCY_RATE --duration ${LATENCY_SECONDS}s\` "
      "(open loop; latency from each record's due time; the rate: %s). Defaults: 2 threads, 1 producer, 5 connections, "
      "128 KiB batches, acks=1, no compression; MB = 10^6 bytes of record batches. Apache Kafka ran first, "
      "then Twinlog with 1 and with 2 shards, each broker alone. Broker CPU: user + system seconds of the "
      "broker process (every thread, io_uring workers included) during the max-rate run, per GB of record "
      "batches produced." % (
          "given (LATENCY_RATE)" if "$LATENCY_RATE_GIVEN" else
          ("half of Kafka's max rate in this run" if not "$SKIP_KAFKA" else "the default without Kafka")))
    w("")
    w("| broker | produce, max rate | produce latency p50 / p99 / p99.9 / max | broker CPU per GB produced | consume | at $LATENCY_RATE records/s: reached, latency p50 / p99 / p99.9 / max |")
    w("| --- | ---: | --- | ---: | ---: | --- |")
    def cpu_gb(name, p):
        try:
            return float(rd("produce-%s.cpu" % name)) / (p["produce"]["bytes"] / 1e9)
        except (OSError, ValueError, ZeroDivisionError):
            return float("nan")
    def lat(l):
        return "%.2f / %.2f / %.2f / %.1f ms" % (l["p50_ms"], l["p99_ms"], l["p99_9_ms"], l["max_ms"]) if l else "n/a"
    for s in (1, 2):
        p, c, f = js("produce-%d.json" % s), js("consume-%d.json" % s), js("latency-%d.json" % s)
        w("| %d shard%s | %.1f MB/s, %s records/s | %s | %.2f s | %.1f MB/s, %s records/s | %s records/s, %s |" % (
            s, "" if s == 1 else "s", p["produce"]["mb_per_s"], format(round(p["produce"]["records_per_s"]), ","),
            lat(p.get("produce_latency")), cpu_gb(s, p), c["consume"]["mb_per_s"], format(round(c["consume"]["records_per_s"]), ","),
            format(round(f["produce"]["records_per_s"]), ","), lat(f.get("produce_latency"))))
    kp, kc, kf = js("produce-kafka.json"), js("consume-kafka.json"), js("latency-kafka.json")
    if kp and kc and kf:
        w("| Apache Kafka 4.1.2 (1 KRaft broker, JVM) | %.1f MB/s, %s records/s | %s | %.2f s | %.1f MB/s, %s records/s | %s records/s, %s |" % (
            kp["produce"]["mb_per_s"], format(round(kp["produce"]["records_per_s"]), ","),
            lat(kp.get("produce_latency")), cpu_gb("kafka", kp), kc["consume"]["mb_per_s"],
            format(round(kc["consume"]["records_per_s"]), ","),
            format(round(kf["produce"]["records_per_s"]), ","), lat(kf.get("produce_latency"))))
        tp, tc, tf = js("produce-2.json"), js("consume-2.json"), js("latency-2.json")
        def p99(x):
            l = x.get("produce_latency")
            return l["p99_ms"] if l else float("nan")
        w("")
        w("Twinlog (2 shards) / Kafka, same client and workload: produce **%.2fx** (issue 20: at least 2x), "
          "broker CPU per GB produced **%.2fx** (issue 20: at most 0.5x), consume **%.2fx**; "
          "p99 produce latency at %s records/s, Kafka / Twinlog: **%.2fx** (issue 20: at least 3x, "
          "Twinlog's p99 at most a third of Kafka's) (Kafka: scripts/kafka.sh start, "
          "its defaults but \`num.partitions\` = 8, \`-Xmx1g\` G1)." % (
              tp["produce"]["mb_per_s"] / kp["produce"]["mb_per_s"],
              cpu_gb(2, tp) / cpu_gb("kafka", kp),
              tc["consume"]["mb_per_s"] / kc["consume"]["mb_per_s"], format($LATENCY_RATE, ","),
              p99(kf) / p99(tf) if p99(tf) else float("nan")))
    w("")
    w("Charts, Twinlog and Kafka side by side: \`twinlog-perf report produce-*.json --html produce.html\` "
      "(and consume-*.json, latency-*.json), written with the JSON runs to $REPORT_DIR "
      "(produce.html, consume.html, latency.html; not committed).")
else:
    w("\`.venv/bin/python perf/scripts/client_bench.py B --records 500000 --partitions 8\` "
      "(confluent-kafka, one producer, acks=1; twinlog-perf had no produce command at this commit)")
    w("")
    w("| broker | produce | consume | latency at a quarter of max rate p50 / p99 / max |")
    w("| --- | ---: | ---: | --- |")
    for s in (1, 2):
        r = js("client_bench-%d.json" % s)
        w("| %d shard%s | %.1f MB/s, %s records/s | %.1f MB/s, %s records/s | %s / %s / %s ms |" % (
            s, "" if s == 1 else "s", r["produce_mb_s"], format(r["produce_rec_s"], ","), r["consume_mb_s"],
            format(r["consume_rec_s"], ","), r["latency_p50_ms"], r["latency_p99_ms"], r["latency_max_ms"]))
w("")
import re
def num(name):
    try:
        return float(rd(name))
    except (OSError, ValueError):
        return float("nan")
def small(name):
    """The Java producer's run on broker NAME, or None."""
    try:
        line = rd("small-%s.txt" % name)
    except OSError:
        return None
    m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency", line)
    if not m:
        return None
    r = {"rec_s": float(m.group(1)), "mb_s": float(m.group(2)), "avg_ms": float(m.group(3)), "max_ms": float(m.group(4))}
    m = re.search(r"(\d+) ms 99th", line)
    r["p99_ms"] = float(m.group(1)) if m else float("nan")
    r["cpu_gb"] = num("small-%s.cpu" % name) / (int("$SMALL_RECORDS") * 1024 / 1e9)
    r["client_cpu"] = num("small-%s.client-cpu" % name)
    return r
def small_kcat(name):
    """librdkafka's run on broker NAME, or None."""
    t = num("small-%s.kcat.time" % name)
    if t != t:
        return None
    n = int("$SMALL_RECORDS")
    return {"rec_s": n / t, "mb_s": n * 1024 / 2**20 / t, "cpu_gb": num("small-%s.kcat.cpu" % name) / (n * 1024 / 1e9),
            "client_cpu": num("small-%s.kcat.client-cpu" % name), "seconds": t}
def small_perf(name):
    """twinlog-perf's pipelined run on broker NAME, or None."""
    r = js("small-%s.perf.json" % name)
    if not r or r.get("errors"):
        return None
    p, lat = r["produce"], r["produce_latency"]
    n = p["records"]
    return {"rec_s": p["records_per_s"], "mb_s": n * 1024 / 2**20 / p["seconds"], "avg_ms": lat["mean_ms"],
            "p99_ms": lat["p99_ms"], "max_ms": lat["max_ms"], "cpu_gb": num("small-%s.perf.cpu" % name) / (n * 1024 / 1e9),
            "client_cpu": num("small-%s.perf.client-cpu" % name)}
if not "$SKIP_SMALL":
    w("### Small batches: one partition, one 1 KiB batch at a time")
    w("")
    w("Three clients in turn, each sending one 1 KiB record per batch, acks=1, at most 5 requests in flight, into a "
      "topic of one partition, on the same brokers right after their runs above (after \`sync\`). Java: "
      "\`bash scripts/kafka.sh java org.apache.kafka.tools.ProducerPerformance --topic small --num-records $SMALL_RECORDS "
      "--record-size 1024 --throughput -1 --producer-props bootstrap.servers=B acks=1 linger.ms=0 batch.size=1024 "
      "max.in.flight.requests.per.connection=5\` with \`KAFKA_JAVA_OPTS\` set to \`-Xmx1g -XX:TieredStopAtLevel=4\` (the C2 JIT; "
      "scripts/kafka.sh runs tools C1-only for start-up); MB/s, records/s and latencies as it prints them (its MB/sec "
      "is MiB/s of record values). librdkafka: \`kcat -P -b B -t small -p 0 -X linger.ms=0 -X batch.size=1 -X "
      "max.in.flight=5 -X acks=1\` reading $SMALL_RECORDS lines of 1,024 bytes, MiB/s of values over kcat's whole run "
      "(connect to last acknowledgement). twinlog-perf: \`twinlog-perf produce --topic small --partitions 1 --records "
      "$SMALL_RECORDS --record-size 1024 --batch-size 1024 --acks 1 --in-flight 1 --pipeline 5 --threads 1\` (one "
      "connection with 5 requests in flight, answers read in order; MiB/s of record values over its run, latency "
      "per request). The last Twinlog row is a 1-shard broker with \`spin.before.park.us = $SMALL_SPIN_US\` (the "
      "executor polls that long before it sleeps). Broker CPU: the broker process's user + system seconds during "
      "the run, per GB of record values; client CPU: the client process's own seconds.")
    w("")
    w("| client | broker | produce | records/s | latency avg / p99 / max | broker CPU per GB | client CPU | Twinlog : Kafka | issue 20: at least 50 MB/s |")
    w("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- |")
    names = [("1", "Twinlog, 1 shard"), ("2", "Twinlog, 2 shards"),
             ("1spin", "Twinlog, 1 shard, spin %s µs" % "$SMALL_SPIN_US"), ("kafka", "Apache Kafka 4.1.2")]
    for client, get in (("Java producer", small), ("librdkafka (kcat)", small_kcat),
                        ("twinlog-perf (pipeline 5)", small_perf)):
        ks = get("kafka")
        for n, label in names:
            r = get(n)
            if not r:
                if n != "kafka" or not "$SKIP_KAFKA":
                    w("| %s | %s | failed: see small-%s.* | | | | | | |" % (client, label, n))
                continue
            vs = "%.2fx" % (r["mb_s"] / ks["mb_s"]) if ks and n != "kafka" else ""
            goal = ("met" if r["mb_s"] >= 50 else "not met") if n != "kafka" else ""
            ms = lambda v: "%.0f" % v if v >= 10 else "%.2f" % v
            lat = ("%s / %s / %s ms" % (ms(r["avg_ms"]), ms(r["p99_ms"]), ms(r["max_ms"]))) if "avg_ms" in r else "—"
            w("| %s | %s | %.2f MB/s | %s | %s | %.2f s | %.1f s | %s | %s |" % (
                client, label, r["mb_s"], format(round(r["rec_s"]), ","), lat, r["cpu_gb"], r["client_cpu"], vs, goal))
    w("")
w("### Mirroring catch-up: native vs MirrorMaker 2" + ("" if "$SKIP_BRIDGE" else " and a MirrorMaker-style bridge"))
w("")
fill = span("fill.time")
w("Source: one 2-shard broker, topic \`bench\` with 8 partitions filled with %s records of 1 KiB "
  "(\`tests/clients/mirror_load.py --count %d --value-size 1024 --compression none\`, idempotent "
  "confluent-kafka producer, %.1f s), %.1f MB of record batches. Native: \`twinlog mirror create m "
  "--source A\` and \`twinlog mirror add m --topic bench\` on a fresh destination, timed from the add "
  "until \`twinlog mirror wait m --caught-up --poll-ms 20\` sees every partition MIRRORING with lag 0 "
  "(one DescribeMirrors every 20 ms). Every destination, native and the bridge's alike, runs with "
  "\`log.direct.io = $DEST_DIRECT_IO\`. Each copy starts after \`sync\` (the fill's and the previous copy's write-back done). Bridge: \`twinlog-bridge --source A --destination C "
  "--topic bench --partitions 8\` (perf/bridge: rdkafka 0.39 / librdkafka 2.12, assigned "
  "partitions, \`fetch.max.bytes\` 50 MiB, \`max.partition.fetch.bytes\` 4 MiB, "
  "\`queued.max.messages.kbytes\` 1 GiB, \`fetch.wait.max.ms\` 100; producer \`acks=all\`, "
  "idempotent, \`linger.ms\` 10, \`batch.size\` 1 MiB, no compression) into a fresh 2-shard broker "
  "with the topic created; its time runs from assign to the producer's flush. MB/s of both: the "
  "source's record-batch bytes over the time, so both count the same bytes. %d run%s each; the "
  "median, with every run in brackets. CPU seconds: user + system time of every process "
  "involved during the copy (source and destination brokers, io_uring workers included, and "
  "the bridge process), per GB of source batches." % (format(records, ","), records, fill, src_bytes / 1e6,
                                            runs, "" if runs == 1 else "s"))
w("")
def med(xs):
    return statistics.median(xs)
rows = []
native = {}
cpu = {}
for s in (2, 1):
    secs = [span("native-%d-%d.time" % (s, r)) for r in range(1, runs + 1)]
    native[s] = med(secs)
    cpus = [float(rd("native-%d-%d.cpu" % (s, r))) for r in range(1, runs + 1)]
    cpu[s] = med(cpus)
    rows.append(("native, destination with %d shard%s" % (s, "" if s == 1 else "s"), secs, cpus))
bruns = 0 if "$SKIP_BRIDGE" else runs
bridge = [js("bridge-%d.json" % r) for r in range(1, bruns + 1)]
bsecs = [b["seconds"] for b in bridge]
bcpus = [float(rd("bridge-%d.cpu" % r)) for r in range(1, bruns + 1)]
for b in bridge:
    if b["records"] != records:
        sys.exit("the bridge copied %d records, not %d" % (b["records"], records))
mm2 = [js("mm2-%d.json" % r) for r in range(1, int("$MM2_RUNS") + 1)] if not "$SKIP_KAFKA" else []
mm2 = [m for m in mm2 if m]
for m in mm2:
    if m.get("error") or m["records"] < records:
        sys.exit("MirrorMaker 2 did not copy every record: %s" % m)
msecs = [m["done_s"] for m in mm2]
mcpus = [float(rd("mm2-%d.cpu" % r)) for r in range(1, len(mm2) + 1)]
if mm2:
    rows.append(("MirrorMaker 2 (connect-mirror 4.1.2, dedicated process, 8 tasks), destination with 2 shards", msecs, mcpus))
if bridge:
    rows.append(("bridge (librdkafka), destination with 2 shards", bsecs, bcpus))
w("| copier | seconds | MB/s | records/s | vs the lower ceiling (%s, %.0f MB/s) | CPU seconds per GB |" % (lower_name, lower))
w("| --- | ---: | ---: | ---: | ---: | ---: |")
gb = src_bytes / 1e9
for name, secs, cpus in rows:
    m = med(secs)
    w("| %s | %.2f (%s) | %.0f (%s) | %s | %.0f%% | %.2f (%s) |" % (
        name, m, ", ".join("%.2f" % x for x in secs), src_bytes / 1e6 / m,
        ", ".join("%.0f" % (src_bytes / 1e6 / x) for x in secs), format(round(records / m), ","),
        100 * src_bytes / 1e6 / m / lower, med(cpus) / gb, ", ".join("%.2f" % (x / gb) for x in cpus)))
w("")
if mm2:
    mmed = med(msecs)
    w("MirrorMaker 2: \`scripts/kafka.sh mm2 mm2.properties\` (\`connect-mirror-maker\`, -Xmx3g G1, "
      "IdentityReplicationPolicy, \`tasks.max\` 8, no heartbeats, checkpoints, ACL or config sync; "
      "consumer \`fetch.max.bytes\` 16 MiB, \`max.partition.fetch.bytes\` 4 MiB, "
      "\`max.poll.records\` 10000; producer \`batch.size\` 1 MiB, \`linger.ms\` 10, \`buffer.memory\` 64 MiB, acks=all, "
      "idempotent, no compression), timed from its process start (JVM and Connect start-up "
      "included) until perf/scripts/wait_offsets.py sees every record on the destination; "
      "the first record arrived after %s s." % ", ".join("%.1f" % m["first_s"] for m in mm2))
    w("")
    w("Native (2 shards) / MirrorMaker 2: **%.1fx** in time (%.1fx counting MM2 from its first "
      "copied record; issue 20: at least 5x); CPU per GB, MirrorMaker 2 / native: **%.1fx** "
      "(issue 20: at least 5x)." % (
          mmed / native[2], med([m["done_s"] - m["first_s"] for m in mm2]) / native[2],
          med(mcpus) / cpu[2]))
    w("")
w("Native (2 shards) reaches **%.0f%%** of the lower ceiling (%s; issue 20: at least 85%%). "
  "Native 2 shards / 1 shard: %.2fx." % (100 * src_bytes / 1e6 / native[2] / lower, lower_name,
                                         native[1] / native[2]))
if bridge:
    w("")
    w("Native (2 shards) / bridge: **%.1fx** (records/s and MB/s alike). The bridge's own "
      "count of key, value and header bytes: %s MB/s. CPU per GB, bridge / native: %.1fx." % (
          med(bsecs) / native[2], ", ".join("%.0f" % b["mb_per_s"] for b in bridge), med(bcpus) / cpu[2]))
w("")
fo = [p for p in "$FAILOVER_PARTITIONS".split()]
if fo:
    w("### RemoveTopicsFromMirror to writable")
    w("")
    w("A 2-shard destination mirroring a topic of P partitions (10 records of 100 bytes each) from the "
      "source above, MIRRORING; timed from \`twinlog mirror remove m --topic T\` until \`twinlog mirror "
      "wait m --state STOPPED --topic T --poll-ms 2\` returns (every partition writable); CLI start included.")
    w("")
    w("| partitions | seconds |")
    w("| ---: | ---: |")
    for p in fo:
        w("| %s | %.3f |" % (format(int(p), ","), span("failover-%s.time" % p)))
    w("")
if not "$SKIP_REPLICATION":
    w("### Replication: three nodes, replication factor 3")
    w("")
    w("\`perf/scripts/cluster_bench.sh\` with SKIP_FAILOVER=1 and RUN_SECONDS=$REPLICATION_SECONDS: three Twinlog "
      "nodes and three Apache Kafka 4.1.2 nodes (KRaft, combined broker and controller roles, -Xmx1g G1 each) on "
      "loopback, each cluster alone on the machine's cores (Twinlog first, then stopped while Kafka runs); one topic of 8 partitions, replication factor 3, "
      "min.insync.replicas=2; \`twinlog-perf produce --acks A --duration ${REPLICATION_SECONDS}s --record-size 1024\` "
      "through all three nodes, closed loop, after an 8 s warm-up on each cluster. CPU: user + system seconds of "
      "the three broker processes over the run, per GB produced.")
    w("")
    r = js("replication.json")
    if not r:
        w("The step failed: see replication.log in $REPORT_DIR.")
    else:
        w("| acks | Twinlog | Kafka | Twinlog : Kafka (issue 20: at least 2x) | Twinlog CPU per GB | Kafka CPU per GB | ratio (issue 20: at most 0.5x) | p99 Twinlog / Kafka |")
        w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for acks, key in (("all", "acks_all"), ("1", "acks_1")):
            t, k = r["twinlog_" + key], r["kafka_" + key]
            tr = t["mb_s"] / k["mb_s"] if k["mb_s"] else float("nan")
            cr = t["cpu_s_per_gb"] / k["cpu_s_per_gb"] if k["cpu_s_per_gb"] else float("nan")
            w("| %s | %.1f MB/s | %.1f MB/s | **%.2fx** (%s) | %.1f s | %.1f s | **%.2fx** (%s) | %.2f / %.2f ms |" % (
                acks, t["mb_s"], k["mb_s"], tr, "met" if tr >= 2 else "not met", t["cpu_s_per_gb"],
                k["cpu_s_per_gb"], cr, "met" if cr <= 0.5 else "not met", t["p99_ms"], k["p99_ms"]))
    w("")
print("\n".join(L))
PY
)
if [ "$RESULTS" = - ]; then
    printf '%s\n' "$SECTION"
else
    printf '%s\n' "$SECTION" >> "$RESULTS"
    printf '%s\n' "$SECTION"
    log "appended to $RESULTS"
fi
