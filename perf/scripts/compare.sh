#!/usr/bin/env bash
# The comparison suite (issue 8): one command that measures, in one go on this machine,
#
#   1. the physical ceilings (`twinlog-perf ceilings`: CRC32C, memcpy, `dd oflag=direct`
#      sequential write, loopback TCP);
#   2. Twinlog produce and consume throughput and produce latency, 1 KiB records on 8
#      partitions, on a broker with 1 shard and with 2 shards (`twinlog-perf produce` /
#      `consume`; perf/scripts/client_bench.py when this twinlog-perf has no `produce`);
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
#      consume and latency runs as item 2, with the same client;
#
# and appends a dated markdown section (commands, machine, date) to perf/RESULTS.md.
# Every broker is fresh, on a free loopback port, with its data under $WORK.
#
#   perf/scripts/compare.sh
#
# Environment (all optional):
#   RECORDS=3000000        records in the mirrored source topic (1 KiB values)
#   RUNS=3                 catch-up runs per mirroring variant (each table cell: the median)
#   PRODUCE_SECONDS=10     length of each max-rate produce run (also capped by PRODUCE_RECORDS)
#   PRODUCE_RECORDS=4000000
#   LATENCY_RATE=200000    records/s of the fixed-rate (open loop) latency run, 5 s
#   FAILOVER_PARTITIONS="1 1000"
#   DEST_DIRECT_IO=true    `log.direct.io` of every copy's destination (native and bridge
#                          alike); the source and the produce/consume brokers keep the
#                          default (page cache)
#   MM2_RUNS=$RUNS         MirrorMaker 2 runs (each a fresh destination and MM2 process)
#   SKIP_KAFKA=1           leave out Apache Kafka and MirrorMaker 2 (items 3 and 5)
#   NO_BUILD=1             use the binaries already built
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
# machine: about 5 minutes of measurements (half a minute more with PROFILE_DIR) after the builds
# (3.5 minutes for a release build of a changed workspace, 3 for the bridge's first).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

RECORDS=${RECORDS:-3000000}
RUNS=${RUNS:-3}
PRODUCE_SECONDS=${PRODUCE_SECONDS:-10}
PRODUCE_RECORDS=${PRODUCE_RECORDS:-4000000}
LATENCY_RATE=${LATENCY_RATE:-200000}
FAILOVER_PARTITIONS=${FAILOVER_PARTITIONS-1 1000}
DEST_DIRECT_IO=${DEST_DIRECT_IO:-true}
MM2_RUNS=${MM2_RUNS:-$RUNS}
SKIP_KAFKA=${SKIP_KAFKA:-}
RESULTS=${RESULTS:-perf/RESULTS.md}
PY=${PY:-.venv/bin/python}
BRIDGE_TARGET_DIR=${BRIDGE_TARGET_DIR:-$ROOT/perf/bridge/target}
PROFILE_DIR=${PROFILE_DIR:-}
STARTED=$(date -u +%s)

log() { printf '[compare %4ds] %s\n' $(($(date -u +%s) - STARTED)) "$*" >&2; }

# --- build ---------------------------------------------------------------------------
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
if [ -z "${NO_BUILD:-}" ]; then
    log "building twinlog and twinlog-perf (cargo build --release --workspace)"
    cargo build --release --workspace >&2
    log "building the bridge (perf/bridge, librdkafka vendored)"
    (cd perf/bridge && CARGO_TARGET_DIR=$BRIDGE_TARGET_DIR cargo build --release >&2)
fi
TWINLOG=$TARGET_DIR/release/twinlog
PERF=$TARGET_DIR/release/twinlog-perf
BRIDGE=$BRIDGE_TARGET_DIR/release/twinlog-bridge
for b in "$TWINLOG" "$PERF" "$BRIDGE"; do
    [ -x "$b" ] || { echo "compare.sh: $b is missing (build it or unset NO_BUILD)" >&2; exit 1; }
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

# --- 2. produce and consume ----------------------------------------------------------
if "$PERF" produce --help > /dev/null 2>&1 && "$PERF" consume --help > /dev/null 2>&1; then
    echo twinlog-perf > "$OUT/client"
else
    echo client_bench > "$OUT/client"
fi
for s in 1 2; do
    start p$s $s
    P=${ADDR[p$s]}
    if [ "$(cat "$OUT/client")" = twinlog-perf ]; then
        log "produce, $s shard(s): max rate"
        "$PERF" produce --bootstrap-server "$P" --topic bench --create-partitions 8 \
            --record-size 1024 --duration "${PRODUCE_SECONDS}s" --records "$PRODUCE_RECORDS" \
            --quiet --json-out "$OUT/produce-$s.json" > "$OUT/produce-$s.txt"
        log "consume, $s shard(s)"
        "$PERF" consume --bootstrap-server "$P" --topic bench --from earliest --to-end \
            --duration 120s --quiet --json-out "$OUT/consume-$s.json" > "$OUT/consume-$s.txt"
        log "produce, $s shard(s): $LATENCY_RATE records/s for 5 s"
        "$PERF" produce --bootstrap-server "$P" --topic lat --create-partitions 8 \
            --record-size 1024 --rate "$LATENCY_RATE" --duration 5s \
            --quiet --json-out "$OUT/latency-$s.json" > "$OUT/latency-$s.txt"
    else
        log "produce and consume, $s shard(s) (client_bench.py)"
        "$PY" perf/scripts/client_bench.py "$P" --records 500000 --partitions 8 \
            > "$OUT/client_bench-$s.json"
    fi
    stop p$s
done

# --- 5. the same produce and consume against Apache Kafka ------------------------------
if [ -z "$SKIP_KAFKA" ]; then
    log "Apache Kafka: one KRaft broker (scripts/kafka.sh start), num.partitions = 8"
    K=$(KAFKA_EXTRA_CONFIG="num.partitions=8" bash scripts/kafka.sh start "$WORK/kafka")
    log "produce, Kafka: max rate"
    "$PERF" produce --bootstrap-server "$K" --topic bench --create-partitions 8 \
        --record-size 1024 --duration "${PRODUCE_SECONDS}s" --records "$PRODUCE_RECORDS" \
        --quiet --json-out "$OUT/produce-kafka.json" > "$OUT/produce-kafka.txt"
    log "consume, Kafka"
    "$PERF" consume --bootstrap-server "$K" --topic bench --from earliest --to-end \
        --duration 120s --quiet --json-out "$OUT/consume-kafka.json" > "$OUT/consume-kafka.txt"
    log "produce, Kafka: $LATENCY_RATE records/s for 5 s"
    "$PERF" produce --bootstrap-server "$K" --topic lat --create-partitions 8 \
        --record-size 1024 --rate "$LATENCY_RATE" --duration 5s \
        --quiet --json-out "$OUT/latency-kafka.json" > "$OUT/latency-kafka.txt"
    bash scripts/kafka.sh stop "$WORK/kafka"
    rm -rf "$WORK/kafka"
fi

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

for ((r = 1; r <= RUNS; r++)); do
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
w("Command: \`perf/scripts/compare.sh\` (RECORDS=$RECORDS, RUNS=$RUNS, PRODUCE_SECONDS=$PRODUCE_SECONDS, "
  "PRODUCE_RECORDS=$PRODUCE_RECORDS, LATENCY_RATE=$LATENCY_RATE). Machine: \`nproc\` = $MACHINE_CORES, "
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
      "--from earliest --to-end\`, then \`twinlog-perf produce --topic lat --rate $LATENCY_RATE --duration 5s\` "
      "(open loop; latency from each record's due time). Defaults: 2 threads, 1 producer, 5 connections, "
      "128 KiB batches, acks=1, no compression; MB = 10^6 bytes of record batches.")
    w("")
    w("| broker | produce, max rate | produce latency p50 / p99 / p99.9 / max | consume | at $LATENCY_RATE records/s: reached, latency p50 / p99 / p99.9 / max |")
    w("| --- | ---: | --- | ---: | --- |")
    def lat(l):
        return "%.2f / %.2f / %.2f / %.1f ms" % (l["p50_ms"], l["p99_ms"], l["p99_9_ms"], l["max_ms"]) if l else "n/a"
    for s in (1, 2):
        p, c, f = js("produce-%d.json" % s), js("consume-%d.json" % s), js("latency-%d.json" % s)
        w("| %d shard%s | %.1f MB/s, %s records/s | %s | %.1f MB/s, %s records/s | %s records/s, %s |" % (
            s, "" if s == 1 else "s", p["produce"]["mb_per_s"], format(round(p["produce"]["records_per_s"]), ","),
            lat(p.get("produce_latency")), c["consume"]["mb_per_s"], format(round(c["consume"]["records_per_s"]), ","),
            format(round(f["produce"]["records_per_s"]), ","), lat(f.get("produce_latency"))))
    kp, kc, kf = js("produce-kafka.json"), js("consume-kafka.json"), js("latency-kafka.json")
    if kp and kc and kf:
        w("| Apache Kafka 4.1.2 (1 KRaft broker, JVM) | %.1f MB/s, %s records/s | %s | %.1f MB/s, %s records/s | %s records/s, %s |" % (
            kp["produce"]["mb_per_s"], format(round(kp["produce"]["records_per_s"]), ","),
            lat(kp.get("produce_latency")), kc["consume"]["mb_per_s"],
            format(round(kc["consume"]["records_per_s"]), ","),
            format(round(kf["produce"]["records_per_s"]), ","), lat(kf.get("produce_latency"))))
        tp, tc, tf = js("produce-2.json"), js("consume-2.json"), js("latency-2.json")
        def p99(x):
            l = x.get("produce_latency")
            return l["p99_ms"] if l else float("nan")
        w("")
        w("Twinlog (2 shards) / Kafka, same client and workload: produce **%.2fx**, consume **%.2fx**; "
          "p99 produce latency at %s records/s, Kafka / Twinlog: **%.2fx** (Kafka: scripts/kafka.sh start, "
          "its defaults but \`num.partitions\` = 8, \`-Xmx1g\` G1)." % (
              tp["produce"]["mb_per_s"] / kp["produce"]["mb_per_s"],
              tc["consume"]["mb_per_s"] / kc["consume"]["mb_per_s"], format($LATENCY_RATE, ","),
              p99(kf) / p99(tf) if p99(tf) else float("nan")))
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
w("### Mirroring catch-up: native vs MirrorMaker 2 and a MirrorMaker-style bridge")
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
bridge = [js("bridge-%d.json" % r) for r in range(1, runs + 1)]
bsecs = [b["seconds"] for b in bridge]
bcpus = [float(rd("bridge-%d.cpu" % r)) for r in range(1, runs + 1)]
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
bmed = med(bsecs)
ratio = bmed / native[2]
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
      "copied record); CPU per GB, MirrorMaker 2 / native: **%.1fx**." % (
          mmed / native[2], med([m["done_s"] - m["first_s"] for m in mm2]) / native[2],
          med(mcpus) / cpu[2]))
    w("")
w("Native (2 shards) / bridge: **%.1fx** (records/s and MB/s alike; the target is at least 5x). "
  "Native reaches **%.0f%%** of the lower ceiling (%s; the target is at least 70%%). The bridge's own "
  "count of key, value and header bytes: %s MB/s. Native 2 shards / 1 shard: %.2fx. CPU per GB, bridge / native: "
  "%.1fx." % (
      ratio, 100 * src_bytes / 1e6 / native[2] / lower, lower_name,
      ", ".join("%.0f" % b["mb_per_s"] for b in bridge), native[1] / native[2], med(bcpus) / cpu[2]))
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
