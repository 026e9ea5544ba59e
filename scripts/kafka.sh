#!/usr/bin/env bash
# Apache Kafka as a test peer: resolves Kafka 4.x (broker, CLI tools, Java clients, Kafka
# Streams, MirrorMaker 2) with Maven, compiles the Java test clients, and starts, probes and
# stops a single-node KRaft broker on free loopback ports.
#
#   scripts/kafka.sh install                 resolve compat/kafka/lib (cached) and compile tests/java
#   scripts/kafka.sh start DIR               format and start a broker in DIR; prints its bootstrap
#   scripts/kafka.sh stop DIR                SIGTERM the broker of DIR (SIGKILL after 30 s)
#   scripts/kafka.sh attach DIR              start, print the bootstrap, stop when stdin closes
#                                            (the tests: the broker dies with the test process)
#   scripts/kafka.sh tool NAME ARGS...       a Kafka CLI tool by its bin/ name (kafka-topics, ...)
#   scripts/kafka.sh java MAIN_CLASS ARGS... any class on the classpath (test clients included)
#   scripts/kafka.sh mm2 PROPERTIES          MirrorMaker 2 (dedicated mode), with a server JVM
#   scripts/kafka.sh classpath               the classpath, for other scripts
#
# Everything listens on 127.0.0.1 only. JAVA_HOME picks the JVM (java on PATH otherwise).
# KAFKA_EXTRA_CONFIG: lines appended to the broker's server.properties. KAFKA_SSL_PORT with
# KAFKA_SSL_KEYSTORE (a PEM file with the key and the certificate chain): an SSL listener
# beside PLAINTEXT (benchmarks: TLS against Kafka's own).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
COMPAT="$ROOT/compat/kafka"
LIB="$COMPAT/lib"
CLASSES="$COMPAT/classes"
JAVA_SRC="$ROOT/tests/java"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
JAVAC="${JAVA_HOME:+$JAVA_HOME/bin/}javac"
# How long a broker may take to serve (a JVM on 2 busy cores needs a few seconds).
START_TIMEOUT_S="${KAFKA_START_TIMEOUT_S:-120}"

die() {
    echo "kafka.sh: $*" >&2
    exit 2
}

classpath() {
    printf '%s:%s/*' "$CLASSES" "$LIB"
}

# Short-lived JVMs (tools, test clients) start faster without the C2 compiler.
TOOL_OPTS=(-Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
    "-Dlog4j2.configurationFile=$COMPAT/log4j2-tools.properties")

install() {
    command -v mvn >/dev/null || die "mvn is not on PATH (Debian: apt-get install maven)"
    command -v "$JAVAC" >/dev/null || die "javac is not on PATH (a JDK 17+ is needed)"
    local stamp
    stamp="$(sha256sum "$COMPAT/pom.xml" | cut -d' ' -f1)"
    if [ -f "$COMPAT/.stamp" ] && [ "$(cat "$COMPAT/.stamp")" = "$stamp" ] && [ -d "$LIB" ]; then
        echo "compat/kafka/lib is current ($(ls "$LIB" | wc -l) jars)"
    else
        echo "resolving Apache Kafka with Maven into compat/kafka/lib"
        rm -rf "$LIB.tmp"
        mvn -q -B -f "$COMPAT/pom.xml" dependency:copy-dependencies \
            -DoutputDirectory="$LIB.tmp" -DincludeScope=runtime
        rm -rf "$LIB"
        mv "$LIB.tmp" "$LIB"
        echo "$stamp" >"$COMPAT/.stamp"
    fi
    compile_tests
}

compile_tests() {
    local sources=("$JAVA_SRC"/*.java)
    [ -e "${sources[0]}" ] || return 0
    local newest_src
    newest_src="$(ls -t "${sources[@]}" | head -1)"
    if [ -f "$CLASSES/.built" ] && [ "$CLASSES/.built" -nt "$newest_src" ] \
        && [ "$CLASSES/.built" -nt "$COMPAT/.stamp" ]; then
        echo "tests/java is compiled"
        return 0
    fi
    echo "compiling tests/java"
    rm -rf "$CLASSES"
    mkdir -p "$CLASSES"
    "$JAVAC" -nowarn -encoding UTF-8 -d "$CLASSES" -cp "$LIB/*" "${sources[@]}"
    touch "$CLASSES/.built"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {
    local dir="${1:?usage: kafka.sh start DIR}"
    [ -d "$LIB" ] || die "compat/kafka/lib is missing: run scripts/kafka.sh install"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    local port cport
    port="$(free_port)"
    cport="$(free_port)"
    while [ "$cport" = "$port" ]; do cport="$(free_port)"; done
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport${KAFKA_SSL_PORT:+,SSL://127.0.0.1:$KAFKA_SSL_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:$port${KAFKA_SSL_PORT:+,SSL://127.0.0.1:$KAFKA_SSL_PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
    if [ -n "${KAFKA_SSL_PORT:-}" ]; then
        [ -n "${KAFKA_SSL_KEYSTORE:-}" ] || die "KAFKA_SSL_PORT needs KAFKA_SSL_KEYSTORE (a PEM key and chain)"
        printf 'ssl.keystore.type=PEM\nssl.keystore.location=%s\n' "$KAFKA_SSL_KEYSTORE" >>"$dir/server.properties"
    fi
    if [ -n "${KAFKA_EXTRA_CONFIG:-}" ]; then
        printf '%s\n' "$KAFKA_EXTRA_CONFIG" >>"$dir/server.properties"
    fi
    if [ ! -f "$dir/data/meta.properties" ]; then
        "$JAVA" "${TOOL_OPTS[@]}" -cp "$(classpath)" kafka.tools.StorageTool format \
            -t "$("$JAVA" "${TOOL_OPTS[@]}" -cp "$(classpath)" kafka.tools.StorageTool random-uuid)" \
            -c "$dir/server.properties" >"$dir/format.log" 2>&1 \
            || { cat "$dir/format.log" >&2; die "kafka-storage format failed"; }
    fi
    # setsid: the broker gets its own process group, so that stop can end the whole JVM.
    setsid "$JAVA" -Xms256m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -Djava.awt.headless=true \
        "-Dlog4j2.configurationFile=$COMPAT/log4j2-server.properties" \
        -cp "$(classpath)" kafka.Kafka "$dir/server.properties" \
        </dev/null >"$dir/server.log" 2>&1 &
    echo $! >"$dir/kafka.pid"
    echo "127.0.0.1:$port" >"$dir/bootstrap"
    local waited=0
    until grep -q "Kafka Server started" "$dir/server.log" 2>/dev/null; do
        if ! kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
            tail -40 "$dir/server.log" >&2
            die "the Kafka broker exited during start-up (log: $dir/server.log)"
        fi
        if [ "$waited" -ge $((START_TIMEOUT_S * 10)) ]; then
            tail -40 "$dir/server.log" >&2
            stop "$dir"
            die "the Kafka broker did not start within ${START_TIMEOUT_S}s"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    echo "127.0.0.1:$port"
}

stop() {
    local dir="${1:?usage: kafka.sh stop DIR}"
    [ -f "$dir/kafka.pid" ] || return 0
    local pid
    pid="$(cat "$dir/kafka.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    local waited=0
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge 300 ]; then
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$dir/kafka.pid"
}

# The classes behind Kafka's bin/ scripts.
tool_class() {
    case "$1" in
        kafka-topics) echo org.apache.kafka.tools.TopicCommand ;;
        kafka-configs) echo kafka.admin.ConfigCommand ;;
        kafka-consumer-groups) echo org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
        kafka-get-offsets) echo org.apache.kafka.tools.GetOffsetShell ;;
        kafka-console-producer) echo org.apache.kafka.tools.ConsoleProducer ;;
        kafka-console-consumer) echo org.apache.kafka.tools.consumer.ConsoleConsumer ;;
        kafka-delete-records) echo org.apache.kafka.tools.DeleteRecordsCommand ;;
        kafka-producer-perf-test) echo org.apache.kafka.tools.ProducerPerformance ;;
        kafka-consumer-perf-test) echo org.apache.kafka.tools.ConsumerPerformance ;;
        kafka-transactions) echo org.apache.kafka.tools.TransactionsCommand ;;
        kafka-broker-api-versions) echo org.apache.kafka.tools.BrokerApiVersionsCommand ;;
        kafka-dump-log) echo kafka.tools.DumpLogSegments ;;
        kafka-storage) echo kafka.tools.StorageTool ;;
        kafka-acls) echo org.apache.kafka.tools.AclCommand ;;
        kafka-cluster) echo org.apache.kafka.tools.ClusterTool ;;
        kafka-log-dirs) echo org.apache.kafka.tools.LogDirsCommand ;;
        kafka-leader-election) echo org.apache.kafka.tools.LeaderElectionCommand ;;
        kafka-reassign-partitions) echo org.apache.kafka.tools.reassign.ReassignPartitionsCommand ;;
        kafka-metadata-quorum) echo org.apache.kafka.tools.MetadataQuorumCommand ;;
        connect-mirror-maker) echo org.apache.kafka.connect.mirror.MirrorMaker ;;
        *) die "unknown tool $1" ;;
    esac
}

cmd="${1:-}"
shift || true
case "$cmd" in
    install) install ;;
    compile) compile_tests ;;
    start) start "$@" ;;
    stop) stop "$@" ;;
    attach)
        start "$@"
        # Blocks until the caller's end of stdin closes (it exited), then stops.
        cat >/dev/null || true
        stop "$1"
        rm -rf "$1"
        ;;
    classpath) classpath; echo ;;
    tool)
        class="$(tool_class "${1:?usage: kafka.sh tool NAME ARGS...}")"
        shift
        exec "$JAVA" "${TOOL_OPTS[@]}" ${KAFKA_JAVA_OPTS:-} -cp "$(classpath)" "$class" "$@"
        ;;
    java)
        exec "$JAVA" "${TOOL_OPTS[@]}" ${KAFKA_JAVA_OPTS:-} -cp "$(classpath)" "$@"
        ;;
    mm2)
        # A long-running copier: full JIT and a heap like Kafka's bin/ scripts give it.
        # MM2_HEAP: 8 tasks with MB-sized fetches and producer buffers need more than 1 GiB.
        exec "$JAVA" -Xms512m "-Xmx${MM2_HEAP:-3g}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -Djava.awt.headless=true "-Dlog4j2.configurationFile=$COMPAT/log4j2-server.properties" \
            -cp "$(classpath)" org.apache.kafka.connect.mirror.MirrorMaker "$@"
        ;;
    *)
        sed -n "2,16p" "$0" >&2
        exit 2
        ;;
esac
