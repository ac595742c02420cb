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
//!   launch record. Synthetic agents fetch nothing: the executor download is not in it.

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::master;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn clock_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the `(comm)`: state is field 3; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn running_on_all(m: &master::MasterHandle, n: usize) -> bool {
    let Ok(snap) = m.snapshot() else { return false };
    let agents = snap["agents"].as_array().cloned().unwrap_or_default();
    agents.len() == n
        && agents.iter().all(|a| {
            a["executors"].as_array().is_some_and(|es| {
                es.iter().any(|e| {
                    e["tasks"]
                        .as_array()
                        .is_some_and(|ts| ts.iter().any(|t| t["state"] == "TASK_RUNNING"))
                })
            })
        })
}

fn spawn_scheduler(
    sched: &std::path::Path,
    exec: &std::path::Path,
    m: &master::MasterHandle,
    dir: &std::path::Path,
    loglevel: &str,
) -> std::process::Child {
    let _ = std::fs::create_dir_all(dir);
    let mut args = cluster::scheduler_args(
        &m.addr().to_string(),
        cluster::free_port(),
        &dir.join("state.json"),
        "Scaleio123",
    );
    args[0] = format!("-loglevel={loglevel}");
    args.retain(|a| !a.starts_with("-executor.altpath="));
    args.push(format!("-executor.altpath={}", exec.display()));
    Command::new(sched)
        .args(args)
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(dir.join("scheduler.log"))
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
        )
        .spawn()
        .expect("start scheduler")
}

/// Agents whose storage task is TASK_RUNNING.
fn covered(m: &master::MasterHandle) -> usize {
    let Ok(snap) = m.snapshot() else {
        return 0;
    };
    snap["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| {
            a["executors"].as_array().into_iter().flatten().any(|e| {
                e["tasks"]
                    .as_array()
                    .is_some_and(|ts| ts.iter().any(|t| t["state"] == "TASK_RUNNING"))
            })
        })
        .count()
}

fn ten_thousand(sched: &std::path::Path, exec: &std::path::Path, loglevel: &str, suffix: &str) {
    const N: usize = 10_000;
    let dir = std::env::temp_dir().join(format!("bench-scheduler-10k-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let m = master::start(master::MasterConfig {
        agents: 0,
        synthetic_agents: N,
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    let start = Instant::now();
    let mut child = spawn_scheduler(sched, exec, &m, &dir, loglevel);
    let deadline = start + Duration::from_secs(300);
    loop {
        let n = covered(&m);
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
    let most = master::max_concurrent_executors(&log, "storage-executor.")
        .into_values()
        .max()
        .unwrap_or(0);
    println!("bench scheduler_max_executors_per_agent{suffix} {most} executors");
    let _ = child.kill();
    let _ = child.wait();
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
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
    let mut child = spawn_scheduler(sched, exec, &m, &dir, loglevel);
    let deadline = start + Duration::from_secs(60);
    while !running_on_all(&m, 5) {
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
    let t0 = clock_ticks(child.id()).expect("proc stat");
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let t1 = clock_ticks(child.id()).expect("proc stat");
    let pct = (t1 - t0) as f64 / hz / w0.elapsed().as_secs_f64() * 100.0;
    println!("bench scheduler_idle_cpu_pct{suffix} {pct:.2} %");
    let _ = child.kill();
    let _ = child.wait();
    drop(m);
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn main() {
    let sched = cluster::release_artifact("storage-scheduler");
    let exec = cluster::release_artifact("storage-executor");
    for b in [&sched, &exec] {
        println!("bench_binary {}", b.display());
    }
    for (level, suffix) in [("info", ""), ("debug", "_debug")] {
        five_agents(&sched, &exec, level, suffix);
        ten_thousand(&sched, &exec, level, suffix);
    }
}
