#!/usr/bin/env bash
# Performance figures. Every line of interest is `bench <name> <value> <unit>`; `bench_binary`
# lines name the binaries measured. Each part below is one self-contained block.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "bench_load $(cut -d' ' -f1-3 /proc/loadavg)"

# Release artifacts first: the scheduler and executor figures come from these static musl
# binaries, as shipped (tests/support/cluster.rs: release_artifact).
scripts/build-release.sh >/dev/null
for bin in storage-scheduler storage-executor; do
  echo "bench binary_size_${bin#storage-} $(stat -c %s "target/release-artifacts/$bin") bytes"
done

# wire_decode_protobuf, wire_decode_json: events/s decoding an in-memory RecordIO stream of
# realistic OFFERS events, one thread: median of the passes (the _spread line: min-max). The
# library's decoder in the bench profile (glibc), not a shipped binary.
cargo bench --quiet --bench wire 2>/dev/null | grep '^bench '

# rest_state_p99_ms, rest_state_rps: GET /api/state with 1,000 nodes, 32 concurrent clients
# (in-process server, bench profile, fake dispatcher: see tests/bench/rest.rs).
cargo bench --quiet --bench rest 2>/dev/null | grep '^bench '

# The scheduler bench's shared test helpers look for the executor beside the (bench) scheduler.
cargo build --quiet --release -p storage-executor
# scheduler_*: the musl scheduler process on the dev cluster, at -loglevel=info and (suffix
# _debug) at the shipped -loglevel=debug: cover 5 agents, idle CPU, 10,000 agents RUNNING.
cargo bench --quiet --bench scheduler 2>/dev/null | grep '^bench'
echo "bench_load $(cut -d' ' -f1-3 /proc/loadavg)"
