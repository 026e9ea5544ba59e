#!/usr/bin/env bash
# Mirroring between two three-node clusters (issue 18), on this machine: a source and a
# destination cluster of three Twinlog nodes each (broker+controller, one metadata quorum
# per cluster) on loopback, replication factor 3 on both. Measured in one run:
#
#   1. native catch-up: RECORDS 1 KiB records (8 partitions) copied by the destination
#      leaders' mirror fetchers, replicated to RF 3 there; time from `mirror add` until
#      the destination's high watermarks hold every record, and CPU seconds per GB of all
#      six processes;
#   2. MirrorMaker 2 between the same clusters, the same data (the destination topic
#      deleted and created again with RF 3), timed from the MM2 process start until the
#      destination holds every record; CPU seconds of the six brokers and MM2;
#   3. failover: RemoveTopicsFromMirror to STOPPED (writable) for FAILOVER_PARTITIONS
#      mirrored partitions spread over the three destination brokers.
#
#   perf/scripts/mirror_cluster_bench.sh
#
# Environment (optional): RECORDS=300000 FAILOVER_PARTITIONS=1000 NO_BUILD=1 SKIP_MM2=1
#   RESULTS=perf/RESULTS.md ("-": print only) WORK=… (scratch dir, removed after)
# Needs .venv (scripts/test.sh creates it) and compat/kafka (scripts/kafka.sh install).
set -euo pipefail
cd "$(dirname "$0")/../.."
RECORDS=${RECORDS:-300000}
FAILOVER_PARTITIONS=${FAILOVER_PARTITIONS:-1000}
RESULTS=${RESULTS:-perf/RESULTS.md}
WORK=${WORK:-$(mktemp -d /tmp/twinlog-mirror-cluster-XXXXXX)}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
TWINLOG=$TARGET_DIR/release/twinlog
PERF=$TARGET_DIR/release/twinlog-perf
PY=${PY:-.venv/bin/python}
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
log() { printf '[mirror-cluster] %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_s() { # CPU seconds (user + system) of the given pids so far
    local t=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    python3 -c "print($t / $(getconf CLK_TCK))"
}
now() { date +%s.%N; }

if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -p twinlog -p twinlog-perf >&2
fi
[ -n "${SKIP_MM2:-}" ] || bash scripts/kafka.sh install >&2

# ---- two clusters of three nodes: s0..s2 (source), d0..d2 (destination) ----
declare -A PORT CPORT PID
for c in s d; do for i in 0 1 2; do PORT[$c$i]=$(free_port); CPORT[$c$i]=$(free_port); done; done
start_node() { # CLUSTER INDEX
    local c=$1 i=$2 voters
    voters="0@127.0.0.1:${CPORT[${c}0]},1@127.0.0.1:${CPORT[${c}1]},2@127.0.0.1:${CPORT[${c}2]}"
    mkdir -p "$WORK/$c$i"
    cat > "$WORK/$c$i/twinlog.toml" <<EOF
"node.id" = $i
"process.roles" = "broker,controller"
"controller.quorum.voters" = "$voters"
"offsets.topic.num.partitions" = 8
"transaction.state.log.num.partitions" = 4
"mirror.state.topic.num.partitions" = 8
"default.replication.factor" = 3
"num.partitions" = 8
EOF
    NO_COLOR=1 "$TWINLOG" serve --config "$WORK/$c$i/twinlog.toml" --data-dir "$WORK/$c$i/data" \
        --listen "127.0.0.1:${PORT[$c$i]}" >> "$WORK/$c$i/log" 2>&1 &
    PID[$c$i]=$!
    PIDS+=("$!")
}
for c in s d; do for i in 0 1 2; do start_node "$c" "$i"; done; done
for n in s0 s1 s2 d0 d1 d2; do until grep -q "twinlog ready" "$WORK/$n/log"; do sleep 0.1; done; done
boot() { echo "127.0.0.1:${PORT[${1}0]},127.0.0.1:${PORT[${1}1]},127.0.0.1:${PORT[${1}2]}"; }
S=$(boot s)
D=$(boot d)
D0=127.0.0.1:${PORT[d0]}
ALL_PIDS=("${PID[s0]}" "${PID[s1]}" "${PID[s2]}" "${PID[d0]}" "${PID[d1]}" "${PID[d2]}")
topics() { bash scripts/kafka.sh tool kafka-topics --bootstrap-server "$1" "${@:2}"; }
wait_isr() { # BOOT TOPIC: no partition under-replicated
    local waited=0
    sleep 1
    while topics "$1" --describe --topic "$2" --under-replicated-partitions 2>/dev/null | grep -q Partition; do
        sleep 0.5; waited=$((waited + 1))
        [ "$waited" -lt 240 ] || { log "$2: ISR not full"; return 1; }
    done
}
create() { # BOOT TOPIC PARTITIONS (a create that timed out may still have made it)
    until "$TWINLOG" topic create "$2" --partitions "$3" \
        --bootstrap-server "${1%%,*}" > /dev/null 2>&1 || topics "$1" --list | grep -qx "$2"; do sleep 1; done
}

# ---- the data: RECORDS 1 KiB records on the source, replicated ----
create "$S" bench 8
wait_isr "$S" bench
"$PERF" produce --bootstrap-server "$S" --topic bench --records "$RECORDS" --record-size 1024 \
    --acks -1 --quiet > "$WORK/fill.txt"
sync
BYTES=$(du -sb "$WORK/s0/data/bench-"* | awk '{s+=$1} END {printf "%.0f\n", s}')
log "source: $RECORDS records, $BYTES bytes per replica"

# ---- 1. native mirroring ----
"$TWINLOG" mirror create m --source "$S" --bootstrap-server "$D0" > /dev/null
c0=$(cpu_s "${ALL_PIDS[@]}")
t0=$(now)
"$TWINLOG" mirror add m --topic bench --bootstrap-server "$D0" > /dev/null
# Done when the destination's high watermarks hold every record (replicated to its ISR),
# the same check as for MirrorMaker 2 below.
"$PY" perf/scripts/wait_offsets.py "$D" bench "$RECORDS" --timeout 900 > "$WORK/native.json"
t1=$(now)
c1=$(cpu_s "${ALL_PIDS[@]}")
NATIVE_S=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
NATIVE_CPU=$(python3 -c "print(f'{$c1 - $c0:.2f}')")
log "native: ${NATIVE_S} s, ${NATIVE_CPU} CPU s"

# ---- 3. failover of FAILOVER_PARTITIONS partitions over the three destination brokers ----
create "$S" many "$FAILOVER_PARTITIONS"
wait_isr "$S" many
"$PERF" produce --bootstrap-server "$S" --topic many --records $((FAILOVER_PARTITIONS * 10)) \
    --record-size 100 --acks -1 --quiet > /dev/null
"$TWINLOG" mirror add m --topic many --bootstrap-server "$D0" > /dev/null
"$TWINLOG" mirror wait m --state MIRRORING --topic many --timeout 600 --bootstrap-server "$D0" > /dev/null
LEADERS=$(topics "$D" --describe --topic many | grep -o 'Leader: [0-9]*' | sort | uniq -c | awk '{printf "%s%s x%s", sep, $3, $1; sep=", "}')
t0=$(now)
"$TWINLOG" mirror remove m --topic many --bootstrap-server "$D0" > /dev/null
"$TWINLOG" mirror wait m --state STOPPED --topic many --poll-ms 5 --timeout 600 --bootstrap-server "$D0" > /dev/null
t1=$(now)
FAILOVER_S=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
log "failover of $FAILOVER_PARTITIONS partitions (leaders: $LEADERS): ${FAILOVER_S} s"

# ---- 2. MirrorMaker 2 between the same clusters ----
MM2_S=n/a MM2_CPU=n/a MM2_FIRST=n/a
if [ -z "${SKIP_MM2:-}" ]; then
    "$TWINLOG" mirror remove m --topic bench --bootstrap-server "$D0" > /dev/null
    "$TWINLOG" mirror wait m --state STOPPED --topic bench --timeout 120 --bootstrap-server "$D0" > /dev/null
    topics "$D" --delete --topic bench > /dev/null
    sleep 3
    create "$D" bench 8
    wait_isr "$D" bench
    cat > "$WORK/mm2.properties" <<MM2
clusters = A, B
A.bootstrap.servers = $S
B.bootstrap.servers = $D
A->B.enabled = true
B->A.enabled = false
A->B.topics = bench
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
replication.factor = 3
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
B.producer.acks = all
MM2
    sync
    c0=$(cpu_s "${ALL_PIDS[@]}")
    t0=$(now)
    (cd "$WORK" && exec bash "$OLDPWD/scripts/kafka.sh" mm2 "$WORK/mm2.properties" > "$WORK/mm2.log" 2>&1) &
    MPID=$!
    PIDS+=("$MPID")
    "$PY" perf/scripts/wait_offsets.py "$D" bench "$RECORDS" --timeout 1800 > "$WORK/mm2.json"
    t1=$(now)
    c1=$(cpu_s "${ALL_PIDS[@]}" "$MPID" $(pgrep -P "$MPID" || true))
    kill "$MPID" 2>/dev/null || true
    MM2_S=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
    MM2_CPU=$(python3 -c "print(f'{$c1 - $c0:.2f}')")
    MM2_FIRST=$(python3 -c "import json; print(f'{json.load(open(\"$WORK/mm2.json\"))[\"first_s\"]:.2f}')")
    log "MirrorMaker 2: ${MM2_S} s, ${MM2_CPU} CPU s ($(cat "$WORK/mm2.json"))"
fi

SECTION=$(python3 - "$RECORDS" "$BYTES" "$NATIVE_S" "$NATIVE_CPU" "$MM2_S" "$MM2_CPU" \
    "$FAILOVER_PARTITIONS" "$FAILOVER_S" "$LEADERS" "$(git rev-parse --short HEAD)" "$(nproc)" \
    "$MM2_FIRST" <<'EOF'
import sys, datetime
n, b, ns, nc, ms, mc, fp, fs, leaders, commit, cpus, mfirst = sys.argv[1:]
b = int(b); gb = b / 1e9
def row(name, s, c):
    if s == "n/a":
        return f"| {name} | n/a | n/a | n/a |"
    s, c = float(s), float(c)
    return f"| {name} | {s:.2f} | {b / 1e6 / s:.0f} | {c / gb:.1f} |"
out = [
    "",
    f"## Mirroring between two three-node clusters ({datetime.date.today()}, commit {commit})",
    "",
    f"`perf/scripts/mirror_cluster_bench.sh` (RECORDS={n}, FAILOVER_PARTITIONS={fp}), on {cpus} vCPUs:",
    "a source and a destination cluster of three Twinlog nodes each (combined roles, one quorum",
    "per cluster) on loopback, all six processes (and MM2) on the same cores; topic of 8",
    f"partitions, RF 3 on both; {int(n):,} records of 1 KiB ({b / 1e6:.0f} MB per replica).",
    "CPU s/GB counts the six brokers (and the MM2 JVM) over the copy, per GB copied.",
    "",
    "| copy | seconds | MB/s | CPU s/GB |",
    "|---|---|---|---|",
    row("native (destination leaders' mirror fetchers, RF 3 replication)", ns, nc),
    row("MirrorMaker 2 (connect-mirror 4.1, dedicated, 8 tasks, acks=all)", ms, mc),
]
if ms != "n/a":
    copy = float(ms) - float(mfirst)
    out += ["", f"Native / MirrorMaker 2: **{float(ms) / float(ns):.1f}x** the throughput "
            f"({copy / float(ns):.1f}x counting MM2 only from its first record, {mfirst} s after "
            f"its start), **{(float(mc) / gb) / (float(nc) / gb):.1f}x** less CPU per GB. Both are "
            "done when the destination's high watermarks (so its ISR) hold every record."]
out += ["", f"Failover: RemoveTopicsFromMirror to every partition STOPPED (writable) for {fp} "
        f"mirrored partitions led by the three destination brokers ({leaders}): **{fs} s**."]
print("\n".join(out))
EOF
)
printf '%s\n' "$SECTION"
if [ "$RESULTS" != "-" ]; then printf '%s\n' "$SECTION" >> "$RESULTS"; fi
