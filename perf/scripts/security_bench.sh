#!/usr/bin/env bash
# Security benchmark: the cost of TLS, measured in one run against the same brokers.
#   1. Produce throughput of Kafka's own producer (ProducerPerformance, 1 KiB records,
#      8 partitions, acks=1) to one Twinlog broker and to one Apache Kafka broker, each
#      over PLAINTEXT and over SSL (the same certificate), rounds interleaved.
#   2. Native mirror catch-up of the same data from the Twinlog broker's PLAINTEXT
#      listener and from its SSL listener into a second broker.
# The certificates are made here with openssl (a CA and a broker certificate for
# 127.0.0.1). Prints one line per measurement and the TLS : plaintext ratios; copy them
# into perf/RESULTS.md with the commit and machine.
#
#   perf/scripts/security_bench.sh [TWINLOG_BIN] [RECORDS]
set -euo pipefail
BIN=${1:-target/release/twinlog}
RECORDS=${2:-500000}
DIR=$(mktemp -d /tmp/twinlog-security-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP_DIR:-}" ] || rm -rf "$DIR"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }

# Keys: a CA and a broker certificate with 127.0.0.1 as its subject alternative name.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/ca.key" -out "$DIR/ca.pem" \
    -days 2 -subj "/CN=bench CA" 2> /dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$DIR/broker.key" -out "$DIR/broker.csr" \
    -subj "/CN=127.0.0.1" 2> /dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$DIR/san.ext"
openssl x509 -req -in "$DIR/broker.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" \
    -CAcreateserial -out "$DIR/broker.crt" -days 2 -extfile "$DIR/san.ext" 2> /dev/null
cat "$DIR/broker.key" "$DIR/broker.crt" > "$DIR/broker.pem"

A=127.0.0.1:$(free_port)
A_SSL=127.0.0.1:$(free_port)
B=127.0.0.1:$(free_port)
cat > "$DIR/a.toml" <<TOML
"listeners" = "PLAINTEXT://$A,SSL://$A_SSL"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "$DIR/broker.pem"
"num.partitions" = 8
"mirror.state.topic.num.partitions" = 8
TOML
cat > "$DIR/b.toml" <<TOML
"num.partitions" = 8
"mirror.state.topic.num.partitions" = 8
TOML
# Apache Kafka beside it, with an SSL listener on the same key (PKCS#8 PEM, as Kafka's
# PEM keystore wants it).
K_SSL=127.0.0.1:$(free_port)
K=$(KAFKA_SSL_PORT=${K_SSL#127.0.0.1:} KAFKA_SSL_KEYSTORE="$DIR/broker.pem" \
    KAFKA_EXTRA_CONFIG="num.partitions=8" bash scripts/kafka.sh start "$DIR/kafka")
trap 'bash scripts/kafka.sh stop "$DIR/kafka" > /dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP_DIR:-}" ] || rm -rf "$DIR"' EXIT
NO_COLOR=1 "$BIN" serve --config "$DIR/a.toml" --data-dir "$DIR/a" > "$DIR/a.log" 2>&1 &
A_PID=$!
NO_COLOR=1 "$BIN" serve --config "$DIR/b.toml" --data-dir "$DIR/b" --listen $B > "$DIR/b.log" 2>&1 &
for f in a b; do until grep -q "twinlog ready" "$DIR/$f.log"; do sleep 0.1; done; done
printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
    "$DIR/ca.pem" > "$DIR/ssl.properties"
: > "$DIR/plain.properties"

# 1. Produce: alternate the two listeners, twice each, to even out the noise.
produce() { # topic bootstrap properties
  KAFKA_JAVA_OPTS="-Xmx1g" bash scripts/kafka.sh java org.apache.kafka.tools.ProducerPerformance \
      --topic "$1" --num-records "$RECORDS" --record-size 1024 --throughput -1 \
      --producer-props bootstrap.servers="$2" acks=1 linger.ms=5 batch.size=262144 \
      --producer.config "$3" 2> /dev/null | tail -1 | sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/'
}
# CPU seconds (user + system) a process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$1/stat"; }
for round in 1 2; do
  for broker in twinlog kafka; do
    if [ $broker = twinlog ]; then pid=$A_PID; else pid=$(cat "$DIR/kafka/kafka.pid"); fi
    for kind in plain ssl; do
      topic="p-$kind-$round"
      if [ $broker = twinlog ]; then
        "$BIN" topic create "$topic" --partitions 8 --bootstrap-server $A > /dev/null
        if [ $kind = plain ]; then at=$A; else at=$A_SSL; fi
      else
        bash scripts/kafka.sh tool kafka-topics --bootstrap-server "$K" --create \
            --topic "$topic" --partitions 8 > /dev/null
        if [ $kind = plain ]; then at=$K; else at=$K_SSL; fi
      fi
      c0=$(cpu_s "$pid")
      mbs=$(produce "$topic" "$at" "$DIR/$kind.properties")
      c1=$(cpu_s "$pid")
      echo "produce $broker $kind round $round: $mbs MB/s, broker CPU $(python3 -c "print('%.2f' % ($c1 - $c0))") s"
      echo "$broker-$kind $mbs $c0 $c1" >> "$DIR/produce.txt"
    done
  done
done

# 2. Mirror catch-up of a plaintext-filled copy of round 1's data, once per listener.
catch_up() { # mirror topic source extra-configs...
  local m=$1 topic=$2 src=$3; shift 3
  "$BIN" mirror create "$m" --source "$src" "$@" --bootstrap-server $B > /dev/null
  local t0; t0=$(now)
  "$BIN" mirror add "$m" --topic "$topic" --bootstrap-server $B > /dev/null
  "$BIN" mirror wait "$m" --caught-up --poll-ms 20 --timeout 900 --bootstrap-server $B > /dev/null
  local t1; t1=$(now)
  sync
  python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$t1"
}
BYTES=$(du -sb "$DIR/a/p-plain-1-"* | awk '{s+=$1} END {printf "%.0f\n", s}')
s_plain=$(catch_up mp p-plain-1 $A)
s_ssl=$(catch_up ms p-ssl-1 $A_SSL --config security.protocol=SSL \
    --config ssl.truststore.type=PEM --config "ssl.truststore.location=$DIR/ca.pem")
python3 - "$DIR/produce.txt" "$BYTES" "$s_plain" "$s_ssl" "$RECORDS" <<'PY'
import sys
rates, cpu = {}, {}
b, sp, ss = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
for line in open(sys.argv[1]):
    kind, mbs, c0, c1 = line.split()
    rates.setdefault(kind, []).append(float(mbs))
    cpu.setdefault(kind, []).append(float(c1) - float(c0))
# The broker's CPU seconds per GB of record values produced (each run writes the same).
gb = int(sys.argv[5]) * 1024 / 1e9
cpu_per_gb = {k: min(v) / gb for k, v in cpu.items()}
best = {k: max(v) for k, v in rates.items()}
for broker in ("twinlog", "kafka"):
    pp, ps = best[broker + "-plain"], best[broker + "-ssl"]
    print("produce to %s (ProducerPerformance, best of 2): plaintext %.1f MB/s, TLS %.1f MB/s, TLS : plaintext = %.2f"
          % (broker, pp, ps, ps / pp))
    cp, cs = cpu_per_gb[broker + "-plain"], cpu_per_gb[broker + "-ssl"]
    print("  %s CPU per GB produced (least of 2): plaintext %.1f s, TLS %.1f s, TLS : plaintext = %.2f"
          % (broker, cp, cs, cs / cp))
print("produce over TLS, Twinlog : Kafka = %.2f (plaintext: %.2f); broker CPU per GB over TLS, Twinlog : Kafka = %.2f (plaintext: %.2f)"
      % (best["twinlog-ssl"] / best["kafka-ssl"], best["twinlog-plain"] / best["kafka-plain"],
         cpu_per_gb["twinlog-ssl"] / cpu_per_gb["kafka-ssl"], cpu_per_gb["twinlog-plain"] / cpu_per_gb["kafka-plain"]))
print("mirror catch-up of %.0f MB: plaintext %.2f s (%.0f MB/s), TLS %.2f s (%.0f MB/s), TLS : plaintext = %.2f"
      % (b / 1e6, sp, b / 1e6 / sp, ss, b / 1e6 / ss, sp / ss))
PY
