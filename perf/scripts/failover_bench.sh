#!/usr/bin/env bash
# Failover of many partitions (issue 20): a destination node mirrors a topic of
# PARTITIONS partitions (a few records each) from a source node; once it is caught up,
# `twinlog mirror remove` (RemoveTopicsFromMirror) makes them writable. Prints the time
# from the request to its answer and to every partition STOPPED (`mirror wait --state
# STOPPED`), with the commit and machine to note beside it in perf/RESULTS.md. The
# failover starts SETTLE_S seconds (default 5) after the catch-up.
#
#   perf/scripts/failover_bench.sh [TWINLOG_BIN] [PARTITIONS]
set -euo pipefail
BIN=${1:-target/release/twinlog}
PARTITIONS=${2:-10000}
DIR=$(mktemp -d /tmp/twinlog-failover-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }

S=127.0.0.1:$(free_port)
D=127.0.0.1:$(free_port)
NO_COLOR=1 "$BIN" serve --data-dir "$DIR/source" --listen $S > "$DIR/source.log" 2>&1 &
NO_COLOR=1 "$BIN" serve --data-dir "$DIR/dest" --listen $D > "$DIR/dest.log" 2>&1 &
for f in source dest; do until grep -q "twinlog ready" "$DIR/$f.log"; do sleep 0.1; done; done
"$BIN" topic create wide --partitions "$PARTITIONS" --bootstrap-server $S > /dev/null
# A few keyed records spread over the partitions, so that there is something to copy.
seq 1 20000 | sed 's/.*/k&:v&/' | kcat -b $S -P -t wide -K: -X linger.ms=20
"$BIN" mirror create dr --source $S --bootstrap-server $D > /dev/null
t0=$(now)
"$BIN" mirror add dr --topic wide --bootstrap-server $D > /dev/null
"$BIN" mirror wait dr --caught-up --poll-ms 200 --timeout 900 --bootstrap-server $D > /dev/null
echo "mirror of $PARTITIONS partitions caught up in $(elapsed "$t0" "$(now)") s"
# A failover of a mirror in steady state: the destination's controller may still be
# working through what adding 10,000 partitions left it (their leader epochs) for a
# second or two after the last one caught up.
sleep "${SETTLE_S:-5}"
t0=$(now)
"$BIN" mirror remove dr --topic wide --bootstrap-server $D > /dev/null
t1=$(now)
"$BIN" mirror wait dr --state STOPPED --poll-ms 20 --timeout 900 --bootstrap-server $D > /dev/null
t2=$(now)
echo "failover of $PARTITIONS partitions: RemoveTopicsFromMirror answered in $(elapsed "$t0" "$t1") s, all STOPPED (writable) after $(elapsed "$t0" "$t2") s"
