//! `cargo bench --bench memory`: what the shipped scheduler (the static musl artifact of
//! `scripts/build-release.sh`, `dist/last-build`) costs in memory and CPU from its start until
//! every agent's task is TASK_RUNNING, on the dev cluster's synthetic agents (executors
//! emulated by the dev cluster, so only the scheduler's own work is measured).
//!
//! - `scheduler_peak_rss_mb_10k`, `scheduler_peak_rss_mb_100`: the kernel's high-water mark
//!   of the process's resident set (`VmHWM` in `/proc/<pid>/status`), read once every task
//!   runs, so no short peak between two samples is missed. Targets: 16 MB (goal 12) at
//!   10,000 agents, 8 MB at 100; the app definition gives the scheduler `mem: 32`.
//! - `scheduler_cpu_seconds_10k`: user + system CPU of the process over the same span
//!   (`utime` + `stime` of `/proc/<pid>/stat`); target 10 s, goal 5.
//!
//! `# ` lines add what helps to read them: the resident set once settled, split into anonymous
//! memory (heap, stacks) and the binary's own pages (about 4.5 MB of its 4 MB code and 1 MB
//! read-only data at any size: the kernel maps a file's cached pages 64 KB around each fault),
//! and the thread count.

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::master;
use std::path::Path;
use std::time::{Duration, Instant};

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

struct Cost {
    peak_kb: u64,
    settled_kb: u64,
    /// Of the settled resident set: the heap and stacks, and the pages of the binary's file
    /// (its code, mapped in 64 KB around each page run: clean, shared, reclaimable).
    settled_anon_kb: u64,
    settled_file_kb: u64,
    threads: u64,
    cpu_s: f64,
    elapsed: Duration,
}

/// Starts the scheduler on `n` synthetic agents and measures it until every task runs.
fn measure(sched: &Path, exec: &Path, n: usize) -> Cost {
    let dir = std::env::temp_dir().join(format!("bench-memory-{n}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");
    let m = master::start(master::MasterConfig {
        agents: 0,
        synthetic_agents: n,
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    let start = Instant::now();
    // The info level: the debug level's cost is the scheduler bench's `_debug` lines.
    let mut child = cluster::spawn_bench_scheduler(sched, exec, &m, &dir, "info");
    let pid = child.id();
    let deadline = start + Duration::from_secs(300);
    loop {
        let up = cluster::agents_running(&m);
        if up == n {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the scheduler exited ({status}) with {up} of {n} running; see {}",
                dir.join("scheduler.log").display()
            );
        }
        assert!(Instant::now() < deadline, "only {up} of {n} agents running");
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = start.elapsed();
    let peak_kb = cluster::proc_status_field(pid, "VmHWM").expect("VmHWM");
    let cpu_s = cluster::cpu_ticks(pid).expect("proc stat") as f64 / USER_HZ;
    // Settled: what it keeps once the launch wave is over.
    std::thread::sleep(Duration::from_secs(3));
    let settled_kb = cluster::proc_status_field(pid, "VmRSS").unwrap_or(0);
    let settled_anon_kb = cluster::proc_status_field(pid, "RssAnon").unwrap_or(0);
    let settled_file_kb = cluster::proc_status_field(pid, "RssFile").unwrap_or(0);
    let threads = cluster::proc_status_field(pid, "Threads").unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    drop(m);
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Cost {
        peak_kb,
        settled_kb,
        settled_anon_kb,
        settled_file_kb,
        threads,
        cpu_s,
        elapsed,
    }
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// `BENCH_SCHEDULER=<path>` measures another build (an A/B, or a profiler's wrapper script);
/// `BENCH_AGENTS=10000` measures one size only.
fn main() {
    let sched = std::env::var_os("BENCH_SCHEDULER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| cluster::release_artifact("storage-scheduler"));
    let only: Option<usize> = std::env::var("BENCH_AGENTS")
        .ok()
        .and_then(|s| s.parse().ok());
    let exec = cluster::release_artifact("storage-executor");
    println!("bench_binary {}", sched.display());
    for (n, name) in [(100, "100"), (10_000, "10k")] {
        if only.is_some_and(|o| o != n) {
            continue;
        }
        let c = measure(&sched, &exec, n);
        println!("bench scheduler_peak_rss_mb_{name} {} MB", mb(c.peak_kb));
        if n == 10_000 {
            println!("bench scheduler_cpu_seconds_{name} {:.2} s", c.cpu_s);
        }
        println!(
            "# {n} agents: VmHWM {} MB from start to every task running ({} ms); settled VmRSS {} MB \
             (anonymous {} MB, the binary's file {} MB), {} threads",
            mb(c.peak_kb),
            c.elapsed.as_millis(),
            mb(c.settled_kb),
            mb(c.settled_anon_kb),
            mb(c.settled_file_kb),
            c.threads
        );
    }
}
