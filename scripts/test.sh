#!/usr/bin/env bash
# The project's one test command (README names it; .ci/run calls it).
# It must pass on a fresh Debian machine that has only the Rust toolchain, so it installs
# what the tests need first: protoc and the official Mesos protos (wire conformance), curl.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

MESOS_PROTO=/usr/share/gocode/src/github.com/mesos/mesos-go/api/v1/lib/scheduler/scheduler.proto
missing=()
command -v protoc >/dev/null || missing+=(protobuf-compiler)
[ -f "$MESOS_PROTO" ] || missing+=(golang-github-mesos-mesos-go-dev)
command -v curl >/dev/null || missing+=(curl)
command -v go >/dev/null || missing+=(golang-go)             # mesos-go interop test (tests/interop.rs)
command -v python3 >/dev/null || missing+=(python3)          # scripts/deploy.sh
command -v chromium >/dev/null || missing+=(chromium)        # status page browser test
command -v openssl >/dev/null || missing+=(openssl)          # the test proxy's certificate (tests/support/proxy.rs)
# The ZooKeeper store's tests start a standalone server from this package (tests/support/zookeeper.rs).
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
python3 -c 'import jsonschema' 2>/dev/null || missing+=(python3-jsonschema) # tests/packaging.rs
# A real Prometheus parser reads /metrics (tests/support/prometheus.rs tries python3, then /usr/bin/python3).
python3 -c 'import prometheus_client' 2>/dev/null || /usr/bin/python3 -c 'import prometheus_client' 2>/dev/null \
  || missing+=(python3-prometheus-client)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's python3-jsonschema serves /usr/bin/python3; a python3 from elsewhere (pyenv) that
# still lacks it gets it from PyPI.
python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install -q jsonschema
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
rustup target list --installed | grep -qx x86_64-unknown-linux-musl \
  || rustup target add x86_64-unknown-linux-musl

# A one-shot run on a clean clone gains nothing from the incremental cache (3 GB of it at
# full debug info), and the disk is what CI ran out of.
export CARGO_INCREMENTAL=0
avail_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${avail_kb:-0}" -lt $((6 * 1024 * 1024)) ]; then
  log "warning: $((avail_kb / 1024)) MB free here; a clean build and test run needs about 6 GB"
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The executor builds the library without the scheduler's server dependencies.
cargo clippy -p storage-executor --quiet -- -D warnings

# Before the tests: tests/e2e_deploy.rs deploys these very artifacts.
log "release artifacts: static musl binaries"
scripts/build-release.sh

log "cargo test (unit, protoc conformance, robustness, dev cluster, end to end)"
# The end-to-end tests run the executor binary beside the scheduler's.
cargo build --quiet -p storage-executor -p storage-devcluster   # demo.sh and e2e tests run them
# Every test's sandboxes, dev clusters and copied binaries land under one directory: removed
# when the whole suite passed, kept (and named) for diagnosis when it did not.
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/storage-test.XXXXXX")
trap 'log "test files kept in $TEST_TMP"' ERR
TMPDIR="$TEST_TMP" cargo test --workspace
trap - ERR
rm -rf "$TEST_TMP"
log "disk used by the build: $(du -sh target | cut -f1)"
