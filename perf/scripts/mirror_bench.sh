#!/usr/bin/env bash
# Mirror benchmark: catch-up throughput of native mirroring (1 KiB records, 8 partitions,
# source and destination on this machine) and the time from RemoveTopicsFromMirror to
# writable for 1 and for 1,000 partitions.
#
#   perf/scripts/mirror_bench.sh [TWINLOG_BIN] [RECORDS]
#
# Environment: DEST_CONFIG (TOML lines for the destination only), MIRROR_CONFIG
# (`twinlog mirror create` arguments), KEEP_DIR=1 (keep the brokers' data and logs under
# /tmp/twinlog-mirror-bench.*; 3,000,000 records take 6.5 GB).
# Needs .venv (scripts/test.sh creates it) for the load producer. Prints one line per
# measurement; copy them into perf/RESULTS.md with the machine and date.
set -euo pipefail
BIN=${1:-target/release/twinlog}
RECORDS=${2:-300000}
PY=${PY:-.venv/bin/python}
DIR=$(mktemp -d /tmp/twinlog-mirror-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP_DIR:-}" ] || rm -rf "$DIR"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
A=127.0.0.1:$(free_port)
B=127.0.0.1:$(free_port)
cat > "$DIR/c.toml" <<TOML
"mirror.state.topic.num.partitions" = 8
"num.partitions" = 8
TOML
# Extra TOML lines for the destination only, e.g. DEST_CONFIG='"log.direct.io" = true'.
{ cat "$DIR/c.toml"; echo "${DEST_CONFIG:-}"; } > "$DIR/b.toml"
NO_COLOR=1 "$BIN" serve --config "$DIR/c.toml" --data-dir "$DIR/a" --listen $A > "$DIR/a.log" 2>&1 &
PID_A=$!
NO_COLOR=1 "$BIN" serve --config "$DIR/b.toml" --data-dir "$DIR/b" --listen $B > "$DIR/b.log" 2>&1 &
PID_B=$!
# CPU seconds (user + system, every thread) both brokers used so far.
cpu_both() { cat /proc/$PID_A/stat /proc/$PID_B/stat | awk -v hz="$(getconf CLK_TCK)" '{s += $14 + $15} END {printf "%.2f\n", s / hz}'; }
for f in a b; do until grep -q "twinlog ready" "$DIR/$f.log"; do sleep 0.1; done; done

now() { date +%s.%N; }
"$BIN" topic create bench --partitions 8 --bootstrap-server $A > /dev/null
"$PY" tests/clients/mirror_load.py --bootstrap $A --topic bench --partitions 8 \
    --count "$RECORDS" --value-size 1024 --compression none > /dev/null
# Flush the fill to disk first: the copy should not pay for writing back the load.
sync
BYTES=$(du -sb "$DIR/a/bench-"* | awk '{s+=$1} END {printf "%.0f\n", s}')
"$BIN" mirror create m --source $A ${MIRROR_CONFIG:-} --bootstrap-server $B > /dev/null
c0=$(cpu_both)
t0=$(now)
"$BIN" mirror add m --topic bench --bootstrap-server $B > /dev/null
# One process polling every 20 ms: a shell loop starting the CLI and python each time
# took a third of a core from the brokers being measured.
"$BIN" mirror wait m --caught-up --poll-ms 20 --timeout 600 --bootstrap-server $B > /dev/null
t1=$(now)
c1=$(cpu_both)
python3 - "$t0" "$t1" "$RECORDS" "$BYTES" "$c0" "$c1" <<'PY'
import sys
t0, t1, n, b = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = float(sys.argv[6]) - float(sys.argv[5])
s = t1 - t0
print("mirror catch-up: %d records (%.0f MB on disk) in %.2f s = %.0f MB/s, %.0f records/s, "
      "%.2f CPU s of both brokers = %.2f CPU s/GB"
      % (n, b / 1e6, s, b / 1e6 / s, n / s, cpu, cpu / (b / 1e9)))
PY

for P in ${FAILOVER_PARTITIONS-1 1000}; do
  "$BIN" topic create "fo$P" --partitions $P --bootstrap-server $A > /dev/null
  "$PY" tests/clients/mirror_load.py --bootstrap $A --topic "fo$P" --partitions $P \
      --count $((P * 10)) --value-size 100 > /dev/null
  "$BIN" mirror add m --topic "fo$P" --bootstrap-server $B > /dev/null
  "$BIN" mirror wait m --state MIRRORING --topic "fo$P" --timeout 300 --bootstrap-server $B > /dev/null
  t0=$(now)
  "$BIN" mirror remove m --topic "fo$P" --bootstrap-server $B > /dev/null
  "$BIN" mirror wait m --state STOPPED --topic "fo$P" --poll-ms 2 --timeout 300 --bootstrap-server $B > /dev/null
  t1=$(now)
  python3 -c "import sys; print('remove to writable, $P partition(s): %.3f s' % ($t1 - $t0))"
done
