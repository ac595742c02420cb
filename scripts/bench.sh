#!/usr/bin/env bash
# Performance figures. Every line of interest is `bench <name> <value> <unit>`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The scheduler bench runs the release executor beside the release scheduler.
cargo build --quiet --release -p storage-executor
# wire_decode_protobuf, wire_decode_json: events/s decoding an in-memory RecordIO stream of
# realistic OFFERS events, release build, one thread.
cargo bench --quiet --bench wire 2>/dev/null | grep '^bench '
# rest_state_p99_ms, rest_state_rps: GET /api/state with 1,000 nodes, 32 concurrent clients.
cargo bench --quiet --bench rest 2>/dev/null | grep '^bench '
# store_bytes_written_per_update_10k: bytes the file store writes per one-node save at 10,000
# nodes, compactions included (issue 12, goal under 4 KB).
cargo bench --quiet --bench store 2>/dev/null | grep '^bench '
# scheduler_cover_5_agents_ms, scheduler_idle_cpu_pct: the scheduler process on the dev cluster.
cargo bench --quiet --bench scheduler 2>/dev/null | grep '^bench '
# Sizes of the static release artifacts (scripts/build-release.sh, budgets 4 MiB and 3 MiB).
scripts/build-release.sh >/dev/null
release_dir=dist/last-build
for bin in storage-scheduler storage-executor; do
  echo "bench release_size_${bin#storage-}_bytes $(stat -c %s "$release_dir/$bin") bytes"
done
