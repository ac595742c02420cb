//! `cargo bench --bench scheduler`: the scheduler as a process on the dev cluster, run from
//! the static musl artifacts `scripts/build-release.sh` made (what ships; `bench_binary`
//! lines name them), at `-loglevel=info` and at the app definition's `-loglevel=debug`.
//!
//! - `scheduler_idle_cpu_pct`: CPU the scheduler uses once every agent is covered (5 agents,
//!   heartbeats every second), over 10 s; it should be close to zero: no busy loops, no
//!   fixed-period polling in the event path.
//! - `scheduler_cover_5_agents_ms`: from start to an executor running on each of 5 agents.
//! - `scheduler_cover_10k_agents_ms`: the same with 10,000 synthetic agents (executors
//!   emulated by the dev cluster) until every agent's task is TASK_RUNNING (not merely
//!   staged), and `scheduler_max_executors_per_agent` across that run, from the master's
//!   launch record. Each synthetic agent first downloads the executor binary from the
//!   scheduler's REST server, as a Mesos agent's fetcher does for the URI the scheduler sets
//!   (`cache: false`: every agent fetches; see `FETCHERS` for how many at once):
//!   `scheduler_bytes_served_10k` and `_per_agent` are what the agents received.
//!
//! The binaries measured are the release artifacts, or those in `STORAGE_BENCH_BIN_DIR`
//! (to compare two builds).

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::master;
use std::time::{Duration, Instant};

/// Downloads in flight at once on the one machine that hosts the 10,000 synthetic agents. On
/// a real cluster each agent fetches on its own host as its launch arrives, so a launch wave
/// can ask for thousands at once; here 128 (the scheduler's 64 REST workers busy, its queue
/// in use) keeps the machine's two cores from spending the run on client threads.
const FETCHERS: usize = 128;

fn ten_thousand(sched: &std::path::Path, exec: &std::path::Path, loglevel: &str, suffix: &str) {
    const N: usize = 10_000;
    let dir = std::env::temp_dir().join(format!("bench-scheduler-10k-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let m = master::start(master::MasterConfig {
        agents: 0,
        synthetic_agents: N,
        // STORAGE_BENCH_FETCHERS=0: no fetch (to see what the downloads cost).
        synthetic_fetchers: std::env::var("STORAGE_BENCH_FETCHERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(FETCHERS),
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    let start = Instant::now();
    let child = cluster::KillOnDrop(cluster::spawn_bench_scheduler(
        sched, exec, &m, &dir, loglevel,
    ));
    let deadline = start + Duration::from_secs(300);
    loop {
        let n = cluster::agents_running(&m);
        if n == N {
            break;
        }
        assert!(Instant::now() < deadline, "only {n} of {N} agents running");
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "bench scheduler_cover_10k_agents_ms{suffix} {} ms",
        start.elapsed().as_millis()
    );
    let log = m.launch_log().expect("launch log");
    let per_agent = master::max_concurrent_executors(&log, "storage-executor.");
    let most = per_agent.values().copied().max().unwrap_or(0);
    println!("bench scheduler_max_executors_per_agent{suffix} {most} executors");
    let over: Vec<&String> = per_agent
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(h, _)| h)
        .collect();
    if !over.is_empty() {
        println!(
            "# scheduler_max_executors_per_agent{suffix}: {} agents ran two at once, e.g. {:?}",
            over.len(),
            &over[..over.len().min(3)]
        );
    }
    let snap = m.snapshot().expect("snapshot");
    let (fetches, bytes) = (
        snap["synthetic_fetches"].as_u64().unwrap_or(0),
        snap["synthetic_fetched_bytes"].as_u64().unwrap_or(0),
    );
    println!("bench scheduler_bytes_served_10k{suffix} {bytes} bytes");
    println!(
        "bench scheduler_bytes_served_per_agent{suffix} {} bytes",
        bytes / N as u64
    );
    println!(
        "# scheduler_bytes_served_10k{suffix}: {fetches} fetches of {} bytes ({FETCHERS} at once); \
         scheduler peak RSS {} KiB (VmHWM, whole run)",
        std::fs::metadata(exec).map_or(0, |m| m.len()),
        cluster::proc_status_field(child.0.id(), "VmHWM").unwrap_or(0)
    );
    drop(child);
    drop(m);
    let log = std::fs::read(dir.join("scheduler.log")).unwrap_or_default();
    let lines = log.iter().filter(|&&b| b == b'\n').count();
    println!("bench scheduler_log_lines_10k{suffix} {lines} lines");
    println!("bench scheduler_log_bytes_10k{suffix} {} bytes", log.len());
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Time to cover 5 agents, then CPU over 10 s once covered.
fn five_agents(sched: &std::path::Path, exec: &std::path::Path, loglevel: &str, suffix: &str) {
    let dir = std::env::temp_dir().join(format!("bench-scheduler-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let m = master::start(master::MasterConfig {
        agents: 5,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("dev cluster");
    let start = Instant::now();
    let child = cluster::KillOnDrop(cluster::spawn_bench_scheduler(
        sched, exec, &m, &dir, loglevel,
    ));
    let deadline = start + Duration::from_secs(60);
    while cluster::agents_running(&m) != 5 {
        assert!(Instant::now() < deadline, "executors did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "bench scheduler_cover_5_agents_ms{suffix} {} ms",
        start.elapsed().as_millis()
    );
    // Let the launch settle (acknowledgements, suppression), then measure.
    std::thread::sleep(Duration::from_secs(2));
    let hz = 100.0; // USER_HZ on Linux
    let t0 = cluster::cpu_ticks(child.0.id()).expect("proc stat");
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let t1 = cluster::cpu_ticks(child.0.id()).expect("proc stat");
    let pct = (t1 - t0) as f64 / hz / w0.elapsed().as_secs_f64() * 100.0;
    println!("bench scheduler_idle_cpu_pct{suffix} {pct:.2} %");
    drop(child);
    drop(m);
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn main() {
    let artifact = |name: &str| match std::env::var_os("STORAGE_BENCH_BIN_DIR") {
        Some(dir) => std::path::PathBuf::from(dir).join(name),
        None => cluster::release_artifact(name),
    };
    let (sched, exec) = (artifact("storage-scheduler"), artifact("storage-executor"));
    for b in [&sched, &exec] {
        println!("bench_binary {}", b.display());
    }
    // STORAGE_BENCH_LEVELS=debug runs one level only (comparisons of debug logging).
    let levels = std::env::var("STORAGE_BENCH_LEVELS").unwrap_or_else(|_| "info,debug".into());
    for (level, suffix) in [("info", ""), ("debug", "_debug")] {
        if !levels.split(',').any(|l| l == level) {
            continue;
        }
        five_agents(&sched, &exec, level, suffix);
        ten_thousand(&sched, &exec, level, suffix);
    }
}
