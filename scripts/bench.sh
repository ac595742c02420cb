#!/usr/bin/env bash
# Performance figures. Every line of interest is `bench <name> <value> <unit>`; a `# ` line
# says how to read a figure that is not yet what its name promises.
set -euo pipefail
cd "$(dirname "$0")/.."
# The release artifacts (static musl, scripts/build-release.sh): the one place that says
# which release binaries the benches measure.
scripts/build-release.sh >/dev/null
release_dir=dist/last-build
# The scheduler bench runs the release executor beside the release scheduler.
cargo build --quiet --release -p storage-executor
# wire_decode_protobuf, wire_decode_json: events/s decoding an in-memory RecordIO stream of
# realistic OFFERS events, release build, one thread.
cargo bench --quiet --bench wire 2>/dev/null | grep '^bench '
# rest_state_p99_ms, rest_state_rps: GET /api/state with 1,000 nodes, 32 concurrent clients.
cargo bench --quiet --bench rest 2>/dev/null | grep '^bench '
# scheduler_cover_5_agents_ms, scheduler_idle_cpu_pct: the scheduler process on the dev cluster.
cargo bench --quiet --bench scheduler 2>/dev/null | grep '^bench '
# converge_seconds_100 (target <= 10 s, goal 5 s): deploy.sh -> launcher -> every node running
# on 100 agents with real executor processes; the release binaries, served as a custom build.
# The host stand-ins sit next to the bench's own scheduler build.
cargo build --quiet --release -p storage-devcluster
STORAGE_BENCH_BIN_DIR="$release_dir" cargo bench --quiet --bench converge 2>/dev/null | grep '^bench \|^# '
# gateway_attach_seconds_100, gateway_requests_per_device: the gateway worker attaching 100
# nodes x 4 devices on the dev gateway (targets <= 5 s and <= 2 requests per device).
cargo bench --quiet --bench gateway 2>/dev/null | grep '^bench '
# release_size_scheduler_bytes (budget 4 MiB), release_size_executor_bytes (budget 3 MiB).
for bin in storage-scheduler storage-executor; do
  echo "bench release_size_${bin#storage-}_bytes $(stat -c %s "$release_dir/$bin") bytes"
done
