#!/usr/bin/env bash
# Performance figures. Every line of interest is `bench <name> <value> <unit>`; `bench_binary`
# lines name the binaries measured; a `# ` line says how to read a figure that is not yet what
# its name promises. Each part below is one self-contained block.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "bench_load $(cut -d' ' -f1-3 /proc/loadavg)"

# Release artifacts first: the scheduler and executor figures come from these static musl
# binaries, as shipped. The one place that says which release binaries are measured (the
# tests' twin is tests/support/cluster.rs: release_artifact).
scripts/build-release.sh >/dev/null
release_dir=dist/last-build
# release_size_scheduler_bytes (budget 4.5 MiB), release_size_executor_bytes (budget 3 MiB).
for bin in storage-scheduler storage-executor; do
  echo "bench release_size_${bin#storage-}_bytes $(stat -c %s "$release_dir/$bin") bytes"
done

# In-process figures (wire decode, the REST server against a fake dispatcher) have no
# shipped binary to run: they are built for the shipped target, static musl (the release
# profile's code generation, musl's allocator), and print the bench binary they ran.
musl=(--target x86_64-unknown-linux-musl)

# wire_decode_protobuf, wire_decode_json: events/s decoding an in-memory RecordIO stream of
# realistic OFFERS events, one thread: median of the passes (the _spread line: min-max).
cargo bench --quiet "${musl[@]}" --bench wire 2>/dev/null | grep '^bench'

# rest_state_p99_ms, rest_state_rps: GET /api/state with 1,000 nodes, 32 concurrent clients
# (in-process server, fake dispatcher, a view that never changes: the cache-hit path; see
# tests/bench/rest.rs; the changing state is rest_changing's, below).
cargo bench --quiet "${musl[@]}" --bench rest 2>/dev/null | grep '^bench'

# The benches' shared test helpers look for the executor and the host stand-ins beside the
# (bench) scheduler.
cargo build --quiet --release -p storage-executor -p storage-devcluster

# rest_state_cold_render_ms_1k, _10k, rest_state_p99_ms_changing_1k, _10k: the musl
# scheduler's /api/state (every node) while 1,000 / 10,000 synthetic nodes report phases
# (tests/bench/rest_changing.rs).
cargo bench --quiet --bench rest_changing 2>/dev/null | grep '^bench'

# scheduler_*: the musl scheduler process on the dev cluster, at -loglevel=info and (suffix
# _debug) at the shipped -loglevel=debug: cover 5 agents, idle CPU, 10,000 agents RUNNING,
# each agent having downloaded the executor from the scheduler (scheduler_bytes_served_*),
# and the log volume of that run (scheduler_log_*).
cargo bench --quiet --bench scheduler 2>/dev/null | grep '^bench'

# scheduler_peak_rss_mb_10k (target <= 16 MB, goal 12), scheduler_peak_rss_mb_100 (target
# <= 8 MB), scheduler_cpu_seconds_10k (target <= 10 s, goal 5): the musl scheduler from start
# to every task TASK_RUNNING on 10,000 (and 100) synthetic agents, at -loglevel=info. Peak RSS
# is the kernel's high-water mark, VmHWM of /proc/<pid>/status; CPU is utime + stime of
# /proc/<pid>/stat. See tests/bench/memory.rs.
cargo bench --quiet --bench memory 2>/dev/null | grep '^bench\|^# '

# node_install_seconds (target <= 1 s), executor_peak_rss_mb (target <= 10 MB, goal 6): one
# node's full install on a RHEL 7 host stand-in whose commands take no time.
cargo bench --quiet --bench node 2>/dev/null | grep '^bench'

# converge_seconds_100 (target <= 10 s, goal 5 s): deploy.sh -> launcher -> every node running
# on 100 agents with real executor processes; the release binaries, served as a custom build,
# with the package flags and gateway demo.sh passes (tests/devcluster/packages.txt).
STORAGE_BENCH_BIN_DIR="$release_dir" cargo bench --quiet --bench converge 2>/dev/null | grep '^bench \|^# '

# gateway_attach_seconds_100, gateway_requests_per_device (in-process, built for musl): the gateway worker attaching 100
# nodes x 4 devices on the dev gateway (targets <= 5 s and <= 2 requests per device).
cargo bench --quiet "${musl[@]}" --bench gateway 2>/dev/null | grep '^bench'

# store_bytes_written_per_update_10k (goal < 4 KB): see tests/bench/store.rs, when present.
if grep -q 'name = "store"' Cargo.toml; then
  cargo bench --quiet "${musl[@]}" --bench store 2>/dev/null | grep '^bench'
fi
echo "bench_load $(cut -d' ' -f1-3 /proc/loadavg)"
