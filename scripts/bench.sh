#!/usr/bin/env bash
# Performance figures. Every line of interest is `bench <name> <value> <unit>`; `bench_binary`
# lines name the binaries measured; a `# ` line says how to read a figure that is not yet what
# its name promises. Each part below is one self-contained block, run by `part`. At the end
# every figure is held to tests/bench/targets.txt: the run exits non-zero when one misses its
# target or is missing, or a part crashed (its output is shown).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=tests/bench/targets.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
crashed=()
echo "bench_load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v cores="$(nproc)" '$1 > cores { printf "# busy machine: load %s at start on %d cores; time figures are not comparable\n", $1, cores }' /proc/loadavg

# part NAME RUNS COMMAND...: runs COMMAND RUNS times (BENCH_RUN=1..RUNS in its environment: a
# bench may vary its order by it). With one run its figure lines pass
# through; with more, each figure is the median of the runs and `<name>_runs` gives their
# spread (min-max), so one noisy run neither passes nor fails a target.
part() {
  local name=$1 runs=$2
  shift 2
  local i
  for ((i = 1; i <= runs; i++)); do
    if ! BENCH_RUN=$i "$@" >"$work/$name.$i" 2>&1; then
      echo "# part $name crashed (run $i of $runs): $*"
      tail -n 30 "$work/$name.$i" | sed 's/^/#   /'
      crashed+=("$name")
      return 0
    fi
  done
  cat "$work/$name".* | awk -v runs="$runs" '
    /^bench_binary / || /^# / { if (!seen[$0]++) print; next }
    /^bench / && runs == 1 { print; next }
    /^bench / {
      if (!($2 in n)) order[++k] = $2
      v[$2, ++n[$2]] = $3; unit[$2] = $4
    }
    END {
      for (i = 1; i <= k; i++) {
        f = order[i]; c = n[f]
        for (a = 1; a <= c; a++) s[a] = v[f, a]
        for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (s[b] + 0 < s[a] + 0) { t = s[a]; s[a] = s[b]; s[b] = t }
        print "bench " f " " s[int((c + 1) / 2)] " " unit[f]
        if (c > 1 && f !~ /_spread$/) print "bench " f "_runs " s[1] "-" s[c] " " unit[f]
      }
    }' | tee -a "$work/figures"
}

# Release artifacts first: the scheduler and executor figures come from these static musl
# binaries, as shipped. The one place that says which release binaries are measured (the
# tests' twin is tests/support/cluster.rs: release_artifact).
scripts/build-release.sh >/dev/null
release_dir=dist/last-build
# release_size_scheduler_bytes, release_size_executor_bytes.
sizes() {
  for bin in storage-scheduler storage-executor; do
    echo "bench release_size_${bin#storage-}_bytes $(stat -c %s "$release_dir/$bin") bytes"
  done
}
part release 1 sizes

# In-process figures (wire decode, the REST server against a fake dispatcher) have no
# shipped binary to run: they are built for the shipped target, static musl (the release
# profile's code generation) with the scheduler's allocator (`src/heap.rs`) and, as the library
# brings them, its `memcmp`, `memcpy` and `memmove` in place of musl's (`src/memcmp.rs`,
# `src/memcpy.rs`), and print the bench binary they ran.
musl=(--target x86_64-unknown-linux-musl)

# wire_decode_protobuf, wire_decode_json: events/s decoding an in-memory RecordIO stream of
# realistic OFFERS events, one thread: median of the passes (the _spread line: min-max).
part wire 1 env WIRE_BENCH_STREAMS="$work/streams" cargo bench --quiet "${musl[@]}" --bench wire

# wire_decode_upb (and _update): Google's upb, the Python protobuf runtime's backend, decoding
# the streams the wire bench just decoded, whole events of the official Mesos protos
# (tests/bench/upb.sh; pip's protobuf in target/upb-venv). wire_decode_protobuf_upb_x is
# wire_decode_protobuf over wire_decode_upb: the issue's goal is 5.
part upb 1 tests/bench/upb.sh "$work/streams"
rm -rf "$work/streams"
upb_x() {
  awk '$1 == "bench" && $2 == "wire_decode_protobuf" { ours = $3 } $1 == "bench" && $2 == "wire_decode_upb" { upb = $3 }
    END { if (ours > 0 && upb > 0) printf "bench wire_decode_protobuf_upb_x %.2f x\n", ours / upb }' "$work/figures"
}
part upb_x 1 upb_x

# rest_state_p99_ms, rest_state_rps: GET /api/state with 1,000 nodes, 32 concurrent clients
# (in-process server, fake dispatcher, a view that never changes: the cache-hit path; see
# tests/bench/rest.rs; the changing state is rest_changing's, below).
part rest 3 cargo bench --quiet "${musl[@]}" --bench rest

# The benches' shared test helpers look for the executor and the host stand-ins beside the
# (bench) scheduler.
cargo build --quiet --release -p storage-executor -p storage-devcluster

# rest_state_cold_render_ms_1k, _10k, rest_state_p99_ms_changing_1k, _10k: the musl
# scheduler's /api/state (every node, 32 clients accepting gzip; _identity_: plain JSON) and
# rest_node_p99_ms_changing_*: /api/nodes/<host>, while 1,000 / 10,000 synthetic nodes report
# phases and then flapping host health, 500 reports/s in all (tests/bench/rest_changing.rs).
# rest_state_floor_p99_ms_changing_*, rest_state_floor_ratio_changing_*: the same clients and
# load against a server that only answers the same body (this machine's floor), and the
# scheduler's p99 over it.
part rest_changing 3 cargo bench --quiet --bench rest_changing

# scheduler_*: the musl scheduler process on the dev cluster, at -loglevel=info and (suffix
# _debug) at the shipped -loglevel=debug: cover 5 agents, idle CPU, 10,000 agents RUNNING,
# each agent having downloaded the executor from the scheduler (scheduler_bytes_served_*),
# and the log volume of that run (scheduler_log_*).
part scheduler 1 cargo bench --quiet --bench scheduler

# scheduler_peak_rss_mb_10k, scheduler_peak_rss_mb_100, scheduler_cpu_seconds_10k: the musl
# scheduler from start until, on 10,000 (and 100) synthetic agents, each a storage host of its
# own (an address, a device, an SDC in the dev gateway, so the scheduler attaches an SDS and a
# device per node), every agent has fetched the executor, every emulated executor has reported
# its phases to running over TLS from its host's address (in storage-attach waiting, as the
# storage executor does, until the gateway work has its disks in the pool) and idles (nudge=1:
# no connection held), at -loglevel=info. Peak RSS is the kernel's
# high-water mark, VmHWM of /proc/<pid>/status, at 10,000 agents read again at the end of the
# idle window below (the storage attach and health polls go on after the executors idle);
# CPU is utime + stime of /proc/<pid>/stat.
# scheduler_idle_cpu_pct_10k: its CPU over 30 s once all 10,000 executors idle, each asking
# for its plan about once a minute. plan_change_p99_ms_10k (and _100): the scheduler restarted
# with a new target, until every executor has a plan of it. See tests/bench/memory.rs.
part memory 3 cargo bench --quiet --bench memory

# node_install_seconds, executor_peak_rss_mb: one
# node's full install on a RHEL 7 host stand-in whose commands take no time.
part node 3 cargo bench --quiet --bench node

# executor_health_bytes_per_hour: one idle running node's executor and the scheduler, both
# directions through a counting proxy, TLS included, per idle plan request times the 60 of an
# hour (tests/bench/host_health.rs).
part host_health 1 cargo bench --quiet --bench host_health

# converge_seconds_100: deploy.sh -> launcher -> every node running
# on 100 agents with real executor processes; the release binaries, served as a custom build,
# with the package flags and gateway demo.sh passes (tests/devcluster/packages.txt).
# converge_floor_seconds_100, converge_floor_ratio_100: the same rollout with an executor
# built with the `floor` feature, which does not wait for the scheduler's leave (the floor of
# this machine), built as the release is but in a target dir of its own, never in dist/.
cargo build --quiet --release "${musl[@]}" -p storage-executor --features floor --target-dir target/floor
floor_executor=target/floor/x86_64-unknown-linux-musl/release/storage-executor
part converge 3 env STORAGE_BENCH_BIN_DIR="$release_dir" STORAGE_BENCH_FLOOR_EXECUTOR="$floor_executor" \
  cargo bench --quiet --bench converge

# upgrade_seconds_20, upgrade_floor_seconds_20, upgrade_floor_ratio_20: a rolling upgrade of
# the storage packages on 20 agents in two protection domains of 10 (pre-configured, rebuild
# 1 s in the dev gateway), from the scheduler's restart with newer package URLs to every node
# at the new generation; the floor is the rebuild waits the disruption budget forces (see
# tests/bench/upgrade.rs). The run fails when the gateway counts data unavailable, a quorum
# loss or more than one SDS of a domain down at once.
part upgrade 3 env STORAGE_BENCH_BIN_DIR="$release_dir" cargo bench --quiet --bench upgrade

# gateway_attach_seconds_100, gateway_requests_per_device (in-process, built for musl): the
# gateway worker attaching 100 nodes x 4 devices on the dev gateway;
# gateway_requests_per_health_poll_1000: one health poll over 1,000 nodes in 4 pools.
part gateway 3 cargo bench --quiet "${musl[@]}" --bench gateway

# store_bytes_written_per_update_10k: see tests/bench/store.rs, when present.
if grep -q 'name = "store"' Cargo.toml; then
  part store 1 cargo bench --quiet "${musl[@]}" --bench store
fi
echo "bench_load $(cut -d' ' -f1-3 /proc/loadavg)"

# Every figure beside its target and goal (tests/bench/targets.txt).
awk '
  FNR == NR { if ($0 !~ /^#/ && NF >= 5) { tgt[$1] = $2; goal[$1] = $3; dir[$1] = $5; order[++k] = $1 } next }
  $1 == "bench" { got[$2] = $3 }
  END {
    bad = 0
    for (i = 1; i <= k; i++) {
      f = order[i]
      if (!(f in got)) { printf "bench_check %s missing (target %s)\n", f, tgt[f]; bad = 1; continue }
      if (got[f] !~ /^[0-9]+([.][0-9]+)?$/) { printf "bench_check %s unreadable: %s\n", f, got[f]; bad = 1; continue }
      if (tgt[f] == "-") { printf "bench_check %s %s goal-only goal %s\n", f, got[f], goal[f]; continue }
      ok = dir[f] == "max" ? got[f] + 0 <= tgt[f] + 0 : got[f] + 0 >= tgt[f] + 0
      printf "bench_check %s %s %s target %s goal %s\n", f, got[f], ok ? "ok" : "MISSED", tgt[f], goal[f]
      if (!ok) bad = 1
    }
    exit bad
  }' "$targets" "$work/figures" || status=1
if ((${#crashed[@]})); then
  echo "bench_check crashed: ${crashed[*]}"
  status=1
fi
exit "${status:-0}"
