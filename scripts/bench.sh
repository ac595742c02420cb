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
# scheduler_cover_5_agents_ms, scheduler_idle_cpu_pct: the scheduler process on the dev cluster.
cargo bench --quiet --bench scheduler 2>/dev/null | grep '^bench '
# gateway_attach_seconds_100, gateway_requests_per_device: the gateway worker attaching 100
# nodes x 4 devices on the dev gateway (targets <= 5 s and <= 2 requests per device).
cargo bench --quiet --bench gateway 2>/dev/null | grep '^bench '
# Sizes of the static release artifacts.
scripts/build-release.sh >/dev/null
for bin in storage-scheduler storage-executor; do
  echo "bench binary_size_${bin#storage-} $(stat -c %s "target/release-artifacts/$bin") bytes"
done
