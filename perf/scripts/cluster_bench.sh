#!/usr/bin/env bash
# Replication end to end (issue 17), Twinlog beside Apache Kafka 4.1 on this machine:
# three Twinlog nodes and three Kafka nodes (each a KRaft-style broker+controller, one
# metadata quorum per cluster) on loopback; on each cluster an 8-partition topic with
# replication factor 3, min.insync.replicas=2 and 256 MiB retention per partition; the same twinlog-perf producer (1 KiB
# records, closed loop, RUN_SECONDS) with acks=-1 and then acks=1, each cluster alone on
# the machine (Twinlog first; it is stopped while Kafka runs). Reported per run:
# throughput, p99 produce latency, and CPU seconds per GB (after an 8 s warm-up on each) (utime+stime of the cluster's
# three processes over the run, from /proc). Then, with both clusters up, on each cluster: the time from a
# SIGKILL of a partition leader to the first acks=all produce acknowledged by its new
# leader (a probe produces every 20 ms with a fresh connection through the survivors),
# and, on Twinlog, the time for a node's leaderships over FAILOVER_PARTITIONS partitions
# to move after its SIGKILL. Appends a section to perf/RESULTS.md.
#
#   perf/scripts/cluster_bench.sh
#
# Environment (optional): RUN_SECONDS=20 FAILOVER_PARTITIONS=1000 NO_BUILD=1
#   RESULTS=perf/RESULTS.md ("-": print only) WORK=… (scratch dir, removed after)
#   SESSION_TIMEOUT_MS=9000 (both clusters' broker.session.timeout.ms, Kafka's default)
#   TARGET_DIR=… (where the release binaries are; default $CARGO_TARGET_DIR, else target)
#   SKIP_FAILOVER=1 (the produce runs only: perf/scripts/compare.sh's replication step)
#   SUMMARY=FILE (also write the produce runs as JSON there, for compare.sh's report)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN_SECONDS=${RUN_SECONDS:-20}
FAILOVER_PARTITIONS=${FAILOVER_PARTITIONS:-1000}
SESSION_TIMEOUT_MS=${SESSION_TIMEOUT_MS:-9000}
RESULTS=${RESULTS:-perf/RESULTS.md}
WORK=${WORK:-$(mktemp -d /tmp/twinlog-cluster-XXXXXX)}
TARGET_DIR=${TARGET_DIR:-${CARGO_TARGET_DIR:-target}}
TWINLOG=$TARGET_DIR/release/twinlog
PERF=$TARGET_DIR/release/twinlog-perf
KAFKA_SH=scripts/kafka.sh
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
log() { printf '[cluster] %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { # utime+stime of the given pids, in clock ticks
    local t=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$t"
}
HZ=$(getconf CLK_TCK)

if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -p twinlog -p twinlog-perf >&2
fi
bash "$KAFKA_SH" install >&2

# ---- Twinlog: three nodes ----
declare -a TW_PORT TW_CPORT TW_PID
for i in 0 1 2; do TW_PORT[$i]=$(free_port); TW_CPORT[$i]=$(free_port); done
VOTERS="0@127.0.0.1:${TW_CPORT[0]},1@127.0.0.1:${TW_CPORT[1]},2@127.0.0.1:${TW_CPORT[2]}"
start_twinlog() {
    local i=$1
    mkdir -p "$WORK/tw$i"
    cat > "$WORK/tw$i/twinlog.toml" <<EOF
"node.id" = $i
"process.roles" = "broker,controller"
"controller.quorum.voters" = "$VOTERS"
"offsets.topic.num.partitions" = 8
"transaction.state.log.num.partitions" = 4
"broker.session.timeout.ms" = $SESSION_TIMEOUT_MS
"log.retention.check.interval.ms" = 5000
EOF
    NO_COLOR=1 "$TWINLOG" serve --config "$WORK/tw$i/twinlog.toml" --data-dir "$WORK/tw$i/data" \
        --listen "127.0.0.1:${TW_PORT[$i]}" >> "$WORK/tw$i/log" 2>&1 &
    TW_PID[$i]=$!
    PIDS+=("$!")
}
# Waits for node I's next "twinlog ready" line (its log is appended to across restarts).
declare -a TW_READY=(0 0 0)
wait_twinlog() {
    local i=$1
    TW_READY[$i]=$((TW_READY[$i] + 1))
    until [ "$(grep -c "twinlog ready" "$WORK/tw$i/log" 2>/dev/null || true)" -ge "${TW_READY[$i]}" ]; do sleep 0.1; done
}
start_twinlog_cluster() {
    local i
    for i in 0 1 2; do start_twinlog "$i"; done
    for i in 0 1 2; do wait_twinlog "$i"; done
}
stop_twinlog_cluster() { # SIGTERM, as an operator stops a node; the data stays
    local i
    for i in 0 1 2; do kill -TERM "${TW_PID[$i]}" 2>/dev/null || true; done
    for i in 0 1 2; do wait "${TW_PID[$i]}" 2>/dev/null || true; done
}
TW_BOOT="127.0.0.1:${TW_PORT[0]},127.0.0.1:${TW_PORT[1]},127.0.0.1:${TW_PORT[2]}"
start_twinlog_cluster

# ---- Kafka: three nodes ----
declare -a KF_PORT KF_CPORT KF_PID
for i in 0 1 2; do KF_PORT[$i]=$(free_port); KF_CPORT[$i]=$(free_port); done
KVOTERS="0@127.0.0.1:${KF_CPORT[0]},1@127.0.0.1:${KF_CPORT[1]},2@127.0.0.1:${KF_CPORT[2]}"
CLUSTER_ID=$(bash "$KAFKA_SH" java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
for i in 0 1 2; do
    mkdir -p "$WORK/kf$i"
    cat > "$WORK/kf$i/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$KVOTERS
listeners=PLAINTEXT://127.0.0.1:${KF_PORT[$i]},CONTROLLER://127.0.0.1:${KF_CPORT[$i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${KF_PORT[$i]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$WORK/kf$i/data
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=4
broker.session.timeout.ms=$SESSION_TIMEOUT_MS
group.initial.rebalance.delay.ms=0
log.retention.check.interval.ms=5000
EOF
    bash "$KAFKA_SH" java kafka.tools.StorageTool format -t "$CLUSTER_ID" \
        -c "$WORK/kf$i/server.properties" > "$WORK/kf$i/format.log" 2>&1
done
KAFKA_CP=$(bash "$KAFKA_SH" classpath)
start_kafka() { # as kafka.sh starts its broker: full JIT, G1, a 1 GiB heap
    local i=$1
    java -Xms1g -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
        "-Dlog4j2.configurationFile=$PWD/compat/kafka/log4j2-server.properties" \
        -cp "$KAFKA_CP" kafka.Kafka "$WORK/kf$i/server.properties" \
        >> "$WORK/kf$i/server.log" 2>&1 < /dev/null &
    KF_PID[$i]=$!
    PIDS+=("$!")
}
start_kafka_cluster() {
    local i
    for i in 0 1 2; do start_kafka "$i"; done
    for i in 0 1 2; do until grep -q "Kafka Server started" "$WORK/kf$i/server.log"; do sleep 0.2; done; done
}
KF_BOOT="127.0.0.1:${KF_PORT[0]},127.0.0.1:${KF_PORT[1]},127.0.0.1:${KF_PORT[2]}"
kafka_jvm() { echo "${KF_PID[$1]}"; }

topics() { bash "$KAFKA_SH" tool kafka-topics --bootstrap-server "$1" "${@:2}"; }
wait_isr() { # BOOT TOPIC: every partition's ISR has 3 members
    local waited=0
    while topics "$1" --describe --topic "$2" --under-replicated-partitions 2>/dev/null | grep -q Partition; do
        sleep 0.5; waited=$((waited + 1))
        [ "$waited" -lt 240 ] || { log "$2: ISR not full"; return 1; }
    done
}
create_bench() { # BOOT
    # Retention keeps the disk bounded (about 8 x 320 MiB per replica) over every run.
    until topics "$1" --create --topic bench --partitions 8 --replication-factor 3 \
        --config min.insync.replicas=2 --config retention.bytes=268435456 \
        --config segment.bytes=67108864 >/dev/null 2>&1 || topics "$1" --list | grep -qx bench; do sleep 1; done
    sleep 2; wait_isr "$1" bench
}

# run CLUSTER ACKS: a closed-loop produce; prints "mb/s p99 cpu_s_per_gb"
run() {
    local c=$1 acks=$2 boot pids t0 t1
    if [ "$c" = tw ]; then boot=$TW_BOOT; pids=("${TW_PID[@]}"); else
        boot=$KF_BOOT; pids=("$(kafka_jvm 0)" "$(kafka_jvm 1)" "$(kafka_jvm 2)"); fi
    t0=$(cpu_ticks "${pids[@]}")
    "$PERF" produce --bootstrap-server "$boot" --topic bench --duration "${RUN_SECONDS}s" \
        --record-size 1024 --acks "$acks" --quiet --json-out "$WORK/$c$acks.json" > "$WORK/$c$acks.txt"
    t1=$(cpu_ticks "${pids[@]}")
    python3 - "$WORK/$c$acks.json" "$((t1 - t0))" "$HZ" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); ticks = int(sys.argv[2]); hz = int(sys.argv[3])
p = r["produce"]; gb = p["bytes"] / 1e9
print(f'{p["mb_per_s"]:.1f} {r["produce_latency"]["p99_ms"]:.2f} {ticks / hz / gb if gb else 0:.1f}')
EOF
}
declare -A RES
# measure CLUSTER: a warm-up (JIT, page cache, connections; not counted), then acks=all
# and acks=1.
measure() {
    local c=$1 boot=$TW_BOOT acks
    [ "$c" = kf ] && boot=$KF_BOOT
    "$PERF" produce --bootstrap-server "$boot" --topic bench --duration 8s --record-size 1024 \
        --acks 1 --quiet > "$WORK/$c-warmup.txt"
    for acks in -1 1; do
        log "$c acks=$acks: ${RUN_SECONDS}s closed loop"
        RES[$c$acks]=$(run "$c" "$acks")
        log "$c acks=$acks: ${RES[$c$acks]} (MB/s, p99 ms, CPU s/GB)"
    done
}
# Each cluster is measured alone: Twinlog is stopped while Kafka runs, Kafka is not yet
# started while Twinlog runs. Three idle JVM brokers take a share of two cores that a
# cluster beside them loses (perf/RESULTS.md, replication).
create_bench "$TW_BOOT"
measure tw
stop_twinlog_cluster
start_kafka_cluster
create_bench "$KF_BOOT"
measure kf

if [ -n "${SUMMARY:-}" ]; then
    python3 - "$SUMMARY" "${RES[tw-1]}" "${RES[kf-1]}" "${RES[tw1]}" "${RES[kf1]}" <<'EOF'
import json, sys
keys = ("mb_s", "p99_ms", "cpu_s_per_gb")
runs = [dict(zip(keys, map(float, r.split()))) for r in sys.argv[2:]]
json.dump({"twinlog_acks_all": runs[0], "kafka_acks_all": runs[1],
           "twinlog_acks_1": runs[2], "kafka_acks_1": runs[3]}, open(sys.argv[1], "w"), indent=1)
EOF
fi
[ -z "${SKIP_FAILOVER:-}" ] || exit 0
# The failover runs need both clusters up: Twinlog starts again on its data.
start_twinlog_cluster
wait_isr "$TW_BOOT" bench

# failover CLUSTER: SIGKILL the leader of bench-0, time to the first acks=all produce on
# the new leader; prints seconds.
leader_of() { # BOOT TOPIC PARTITION
    topics "$1" --describe --topic "$2" 2>/dev/null |
        awk -v p="$3" '$0 ~ "Partition: "p"\t" {for (i=1;i<=NF;i++) if ($i=="Leader:") print $(i+1)}'
}
probe_until_ok() { # BOOT T0: produce with acks=all until one is acknowledged
    python3 - "$1" "$2" <<'EOF'
import subprocess, sys, time
boot, start = sys.argv[1], float(sys.argv[2])
while time.time() - start < 120:
    r = subprocess.run(["kcat", "-P", "-b", boot, "-t", "bench", "-p", "0", "-X", "acks=all",
                        "-X", "message.timeout.ms=1000", "-X", "message.send.max.retries=0"],
                       input=b"probe\n", capture_output=True, timeout=10)
    if r.returncode == 0 and b"ERROR" not in r.stderr and b"failed" not in r.stderr:
        print(f"{time.time() - start:.2f}")
        sys.exit(0)
    time.sleep(0.02)
print("timeout")
EOF
}
failover() {
    local c=$1 boot leader pid survivors i
    if [ "$c" = tw ]; then boot=$TW_BOOT; else boot=$KF_BOOT; fi
    leader=$(leader_of "$boot" bench 0)
    if [ "$c" = tw ]; then pid=${TW_PID[$leader]}; else pid=$(kafka_jvm "$leader"); fi
    survivors=""
    for i in 0 1 2; do
        [ "$i" = "$leader" ] && continue
        if [ "$c" = tw ]; then survivors="$survivors,127.0.0.1:${TW_PORT[$i]}"; else
            survivors="$survivors,127.0.0.1:${KF_PORT[$i]}"; fi
    done
    local t0
    t0=$(date +%s.%N)
    kill -9 "$pid"
    probe_until_ok "${survivors#,}" "$t0"
    echo "$leader" > "$WORK/$c-killed"
}
log "failover: SIGKILL of bench-0's leader, time to the first acks=all produce"
FO_TW=$(failover tw); log "twinlog: ${FO_TW}s"
FO_KF=$(failover kf); log "kafka: ${FO_KF}s"

# Twinlog: a node leading ~1/3 of FAILOVER_PARTITIONS partitions is killed; time until no
# partition is led by it any more (the controller's elections, seen in Metadata).
KILLED=$(cat "$WORK/tw-killed")
start_twinlog "$KILLED"; wait_twinlog "$KILLED"
until topics "$TW_BOOT" --create --topic many --partitions "$FAILOVER_PARTITIONS" --replication-factor 3 >/dev/null 2>&1; do sleep 1; done
wait_isr "$TW_BOOT" many
VICTIM=$(( (KILLED + 1) % 3 ))
LED=$(topics "$TW_BOOT" --describe --topic many | grep -c "Leader: $VICTIM	" || true)
SURV=""
for i in 0 1 2; do [ "$i" = "$VICTIM" ] || SURV="$SURV,127.0.0.1:${TW_PORT[$i]}"; done
SURV=${SURV#,}
T0=$(date +%s.%N)
kill -9 "${TW_PID[$VICTIM]}"
# Metadata polled every 20 ms until no partition names the victim as leader.
FO_MANY=$(.venv/bin/python - "$SURV" "$VICTIM" "$T0" <<'EOF2'
import sys, time
from confluent_kafka.admin import AdminClient
boot, victim, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
a = AdminClient({"bootstrap.servers": boot})
while time.time() - start < 120:
    try:
        t = a.list_topics("many", timeout=2).topics["many"]
        if t.partitions and all(p.leader not in (victim, -1) for p in t.partitions.values()):
            print(f"{time.time() - start:.2f}")
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.02)
print("timeout")
EOF2
)
log "twinlog: $LED leaderships of node $VICTIM moved in ${FO_MANY}s"

read -r TW_A_MB TW_A_P99 TW_A_CPU <<< "${RES[tw-1]}"
read -r KF_A_MB KF_A_P99 KF_A_CPU <<< "${RES[kf-1]}"
read -r TW_1_MB TW_1_P99 TW_1_CPU <<< "${RES[tw1]}"
read -r KF_1_MB KF_1_P99 KF_1_CPU <<< "${RES[kf1]}"
ratio() { python3 -c "print(f'{$1 / $2:.2f}' if $2 else 'n/a')"; }
COMMIT=$(git rev-parse --short HEAD)
SECTION=$(cat <<EOF

## Replication: three nodes, replication factor 3 ($(date -u +%Y-%m-%d), commit $COMMIT)

\`perf/scripts/cluster_bench.sh\` (RUN_SECONDS=$RUN_SECONDS, SESSION_TIMEOUT_MS=$SESSION_TIMEOUT_MS),
on $(nproc) vCPUs: three Twinlog nodes and three Apache Kafka 4.1 nodes (KRaft, combined
roles) on loopback, each cluster measured alone on the machine's cores; topic of 8 partitions, RF 3,
min.insync.replicas=2; twinlog-perf produce, 1 KiB records, closed loop. CPU s/GB is the
three broker processes' CPU time over the run per GB produced.

| run | Twinlog MB/s | Kafka MB/s | ratio | Twinlog p99 ms | Kafka p99 ms | Twinlog CPU s/GB | Kafka CPU s/GB | CPU ratio |
|---|---|---|---|---|---|---|---|---|
| acks=all | $TW_A_MB | $KF_A_MB | $(ratio "$TW_A_MB" "$KF_A_MB") | $TW_A_P99 | $KF_A_P99 | $TW_A_CPU | $KF_A_CPU | $(ratio "$TW_A_CPU" "$KF_A_CPU") |
| acks=1 | $TW_1_MB | $KF_1_MB | $(ratio "$TW_1_MB" "$KF_1_MB") | $TW_1_P99 | $KF_1_P99 | $TW_1_CPU | $KF_1_CPU | $(ratio "$TW_1_CPU" "$KF_1_CPU") |

Leader SIGKILL to the first acks=all produce acknowledged by the new leader (kcat probe
every 20 ms through the survivors): Twinlog ${FO_TW} s, Kafka ${FO_KF} s (both fence after
broker.session.timeout.ms = $SESSION_TIMEOUT_MS ms). Twinlog, $LED leaderships of a node
over $FAILOVER_PARTITIONS partitions moved ${FO_MANY} s after its SIGKILL.
EOF
)
printf '%s\n' "$SECTION"
if [ "$RESULTS" != "-" ]; then printf '%s\n' "$SECTION" >> "$RESULTS"; fi
