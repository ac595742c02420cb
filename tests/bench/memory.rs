//! `cargo bench --bench memory`: what the shipped scheduler (the static musl artifact of
//! `scripts/build-release.sh`, `dist/last-build`) costs in memory and CPU on a cluster doing
//! what a real one does, from its start until every node runs and every executor waits for
//! plan changes: on the dev cluster's synthetic agents, each agent fetches the executor
//! binary from the scheduler (`FETCHERS` at a time) and is a storage host of its own (an
//! address, one device, an SDC registered with the dev gateway), so that the scheduler
//! attaches an SDS and a device per node and every SDC check and health poll lists each
//! host; each emulated executor asks for its plan, reports its node's phases through the
//! executor API over TLS (`REPORTS_PER_SEC` in all), waits after `storage-attach` until the
//! scheduler has its disks in the pool (`storage_ready`), registered for a nudge and asking
//! every 40-60 s, and, once its node runs, idles as the
//! storage executor does: registered for a nudge by its `running` report's answer, which
//! carries its plan, it waits for the scheduler's framework MESSAGE, holding no connection
//! (`synthetic_plans.rs`).
//!
//! - `scheduler_peak_rss_mb_10k`, `scheduler_peak_rss_mb_100`: the kernel's high-water mark
//!   of the process's resident set (`VmHWM` in `/proc/<pid>/status`), so no short peak
//!   between two samples is missed: at 100 agents read once every executor waits and the
//!   scheduler has settled for 3 s; at 10,000 read again at the end of the idle window
//!   (below), since the storage attach and health polls go on long after the executors
//!   wait; and at either size again once the dev gateway holds every agent's disk, which
//!   the bench waits for (four minutes at most, else it fails). The app definition gives the
//!   scheduler `mem: 32`.
//! - `scheduler_cpu_seconds_10k`: user + system CPU of the process over the same span
//!   (`utime` + `stime` of `/proc/<pid>/stat`).
//! - `scheduler_idle_cpu_pct_10k`: the scheduler's CPU (user + system, percent of one core)
//!   over 30 s (one health poll interval) once the cluster is idle: from 75 s after the last
//!   executor went idle, when every executor's slow timer (48-72 s) runs, so that they ask
//!   for their plans at their steady rate, n / 60 a second, each over a new (resumed) TLS
//!   connection, and not before every disk is attached (the gateway worker's work is no
//!   idle cluster's). The app gives the
//!   scheduler `cpus: 0.2`, so this is what a quiet cluster costs out of 20.
//! - `plan_change_p99_ms_10k` (and `_100`): how long a new target takes to reach the idle
//!   executors: the scheduler is killed and started again on the same port and store with one
//!   install setting changed (a new target generation, as an operator's redeploy makes), and
//!   each executor's first plan of the new generation is timed from that start; p99 over the
//!   executors. It covers the new scheduler's recovery, its announcement to every executor
//!   (a framework MESSAGE through the master: the new certificate, which also has an idle
//!   executor ask for its plan) and the executors' new connections.
//!
//! `# ` lines add what helps to read them: the resident set once settled, split into anonymous
//! memory (heap, stacks) and the binary's own pages (about 4.5 MB of its 4 MB code and 1 MB
//! read-only data at any size: the kernel maps a file's cached pages 64 KB around each fault),
//! the thread count and open files, the REST server's connections and responses by the time
//! every executor waits (requests a connection carried: each new one is a TLS handshake, and
//! the worker pool's size trades threads against them), how the plan change's time splits,
//! and each CPU figure by the scheduler's threads (`rest` the REST workers, `main` the
//! dispatcher, `gateway-worker`, ...): the totals move with the machine's load by more than
//! most changes do, the split tells which part a change moved.

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::master;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;
/// Executor downloads at once, across the agents.
const FETCHERS: usize = 16;
/// Phase reports a second across the executors: six per node, so 10,000 nodes report for
/// 30 s.
const REPORTS_PER_SEC: f64 = 2_000.0;
/// How long after the peak's reading every disk may still take to attach (10,000 agents'
/// disks, one after another through the gateway, took about 90 s after the last executor
/// went idle on a 2-core machine).
const ATTACH_LIMIT: Duration = Duration::from_secs(240);
/// The open-file limit the scheduler runs with when the bench may set it.
const PRODUCTION_FILES: libc::rlim_t = 65_536;
/// The install setting the second start changes (a new target, nothing to install): the
/// volume driver's gateway user, whose password comes in the environment.
const NEW_TARGET: &str = "-rexray.username=bench-target-2";

struct Cost {
    peak_kb: u64,
    settled_kb: u64,
    /// Of the settled resident set: the heap and stacks, and the pages of the binary's file
    /// (its code, mapped in 64 KB around each page run: clean, shared, reclaimable).
    settled_anon_kb: u64,
    settled_file_kb: u64,
    threads: u64,
    open_files: usize,
    /// Plan long polls the scheduler held when every executor was idle.
    waiting: usize,
    /// The REST server's counters then: how many requests each connection carried, and
    /// what a smaller or larger worker pool trades (handshakes against threads).
    rest: RestCounts,
    cpu_s: f64,
    /// Of `cpu_s`, in the kernel (the executor downloads' sendfile, TCP, TLS connections).
    system_s: f64,
    /// `cpu_s` by thread (`cluster::thread_cpu_line`): which part of the scheduler to look at.
    by_thread: String,
    elapsed: Duration,
    /// From every executor waiting to every disk attached (or the settled reading, if later).
    attached_after: Duration,
    fetched_bytes: u64,
}

/// When the idle window starts, after the last executor went idle (and not before every
/// disk is attached), and how long it lasts: one health poll interval (the scheduler's
/// default, 30 s), so that the window holds one poll, whatever its phase.
const IDLE_FROM: Duration = Duration::from_secs(75);
const IDLE_WINDOW: Duration = Duration::from_secs(30);
/// Thread groups named in the CPU-by-thread lines; the rest are summed.
const THREADS_SHOWN: usize = 6;
/// The dev gateway's admin password (the scheduler's flag; one shared gateway per password).
const GATEWAY_PASSWORD: &str = "Scaleio123";

/// The scheduler's cost while every executor idles.
struct Idle {
    cpu_pct: f64,
    /// The window's CPU by thread.
    by_thread: String,
    /// Plan requests the executors made meanwhile (answered or not), a second.
    requests_per_s: f64,
    /// `VmHWM` and `VmRSS` at the window's end: the high-water mark of the whole first run.
    peak_kb: u64,
    rss_kb: u64,
    /// The window's end, after every executor went idle.
    ended_after: Duration,
}

/// How long a new target took to reach the executors, from the new scheduler's start.
struct PlanChange {
    announced_p99: Duration,
    seen_p50: Duration,
    seen_p99: Duration,
    seen_max: Duration,
    /// The new scheduler's VmHWM once every executor has the new plan.
    peak_kb: u64,
    /// The new scheduler's CPU (user + system) until then: its recovery, the announcements
    /// and every executor's new connection.
    cpu_s: f64,
    by_thread: String,
    /// Plan requests that failed meanwhile (refused while the scheduler was down, or made
    /// with the old certificate's pin before the announcement).
    failures: u64,
}

struct Scheduler {
    child: Child,
    port: u16,
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(
    sched: &Path,
    exec: &Path,
    m: &master::MasterHandle,
    dir: &Path,
    port: u16,
    extra: &[&str],
) -> Scheduler {
    let mut args = cluster::scheduler_args(
        &m.addr().to_string(),
        port,
        &dir.join("state.json"),
        GATEWAY_PASSWORD,
    );
    args.retain(|a| !a.starts_with("-executor.altpath=") && !a.starts_with("-loglevel="));
    // The info level: the debug level's cost is the scheduler bench's `_debug` lines.
    args.push("-loglevel=info".into());
    args.push(format!("-executor.altpath={}", exec.display()));
    args.extend(extra.iter().map(|a| a.to_string()));
    if let Ok(more) = std::env::var("BENCH_EXTRA_ARGS") {
        args.extend(more.split_whitespace().map(String::from));
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("scheduler.log"))
        .expect("scheduler log");
    let mut cmd = Command::new(sched);
    // A production agent's open-file limit (systemd's and Mesos' usual 65,536): the scheduler
    // sizes its long polls from it, and this machine's 20,000 would hold only 9,328 of them.
    // Raising a hard limit needs root; without it the scheduler keeps what it inherits.
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: PRODUCTION_FILES,
                rlim_max: PRODUCTION_FILES,
            };
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            Ok(())
        });
    }
    let child = cmd
        .args(args)
        .envs(
            extra
                .contains(&NEW_TARGET)
                .then_some(("REXRAY_PASSWORD", "bench-rexray-password")),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start scheduler");
    Scheduler { child, port }
}

/// The scheduler's `/metrics` (plain HTTP), empty when it does not answer.
fn metrics(port: u16) -> String {
    let agent = ureq::Agent::config_builder()
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    agent
        .get(&format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

/// The sum of the samples of the scheduler's family `family` (its name without the
/// `storage_scheduler_` prefix) in `text`; 0 when it has none.
fn metric(text: &str, family: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix("storage_scheduler_")
                .and_then(|l| l.strip_prefix(family))
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

struct RestCounts {
    connections: u64,
    responses: u64,
    refused: u64,
}

impl RestCounts {
    fn of(text: &str) -> RestCounts {
        RestCounts {
            connections: metric(text, "http_connections_total"),
            responses: metric(text, "http_responses_total"),
            refused: metric(text, "http_rejected_total"),
        }
    }
}

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Waits until every task runs and every executor idles, owed a nudge by the scheduler;
/// returns how many plan long polls the scheduler holds then, and its REST counters.
fn wait_until_all_wait(
    s: &mut Scheduler,
    m: &master::MasterHandle,
    n: usize,
    dir: &Path,
) -> (usize, RestCounts) {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        // An executor with a plan runs (its task did); the dev master's snapshot of 10,000
        // agents is too slow to read this often.
        // One waiting for its disks is registered for a nudge too, but its node does not run.
        let (planned, idle) = m.synthetic_plans().map_or((0, 0), |p| {
            let planned = p.iter().filter(|p| p.answers > 0).count();
            (planned, p.iter().filter(|p| p.idle && p.running).count())
        });
        if idle == n {
            let text = metrics(s.port);
            let waits = metric(&text, "executor_plan_waits");
            return (waits as usize, RestCounts::of(&text));
        }
        if let Ok(Some(status)) = s.child.try_wait() {
            panic!(
                "the scheduler exited ({status}) with {planned} of {n} executors planned; see {}",
                dir.join("scheduler.log").display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{planned} of {n} executors with a plan, {idle} idle; see {}",
            dir.join("scheduler.log").display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts the scheduler on `n` synthetic agents and measures it until every executor waits
/// for a plan change; then times a new target's way to every executor.
fn measure(sched: &Path, exec: &Path, n: usize) -> (Cost, Option<Idle>, PlanChange) {
    let dir = std::env::temp_dir().join(format!("bench-memory-{n}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");
    let m = master::start(master::MasterConfig {
        agents: 0,
        synthetic_agents: n,
        synthetic_fetchers: FETCHERS,
        synthetic_phase_reports: Some(REPORTS_PER_SEC),
        synthetic_plan_waits: true,
        // Storage hosts, each with its address, a device and an SDC, as a real cluster's: the
        // scheduler attaches an SDS and a device per node, and each health poll lists them all.
        synthetic_storage: true,
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    let gw = cluster::shared_gateway(GATEWAY_PASSWORD);
    // Each host's SDC, registered as its package's install does (the synthetic hosts have no
    // package step): the dev MDM cluster's primary is 127.0.0.1.
    for agent in 0..n {
        gw.sdc_installed(&master::synthetic_host_ip(agent).to_string(), "127.0.0.1")
            .unwrap_or_else(|e| panic!("the SDC of synthetic agent {agent}: {e}"));
    }
    let start = Instant::now();
    let mut s = spawn(sched, exec, &m, &dir, cluster::free_port(), &[]);
    let pid = s.child.id();
    let (waiting, rest) = wait_until_all_wait(&mut s, &m, n, &dir);
    let elapsed = start.elapsed();
    let (user, system) = cluster::cpu_split(pid).expect("proc stat");
    let (user_s, system_s) = (user as f64 / USER_HZ, system as f64 / USER_HZ);
    let cpu_s = user_s + system_s;
    let by_thread = cpu_by_thread_since(pid, &Default::default());
    // Settled: what it keeps while the executors wait.
    std::thread::sleep(Duration::from_secs(3));
    let mut cost = Cost {
        // The high-water mark after the settling too: the scheduler's work goes on after the
        // last executor waits (one run at 10,000 agents read 31.7 MB then, and 48.8 MB
        // resident 3 s later).
        peak_kb: cluster::proc_status_field(pid, "VmHWM").expect("VmHWM"),
        settled_kb: cluster::proc_status_field(pid, "VmRSS").unwrap_or(0),
        settled_anon_kb: cluster::proc_status_field(pid, "RssAnon").unwrap_or(0),
        settled_file_kb: cluster::proc_status_field(pid, "RssFile").unwrap_or(0),
        threads: cluster::proc_status_field(pid, "Threads").unwrap_or(0),
        open_files: open_files(pid),
        waiting,
        rest,
        cpu_s,
        system_s,
        by_thread,
        elapsed,
        attached_after: Duration::ZERO,
        fetched_bytes: fetched_bytes(&m),
    };
    // The peak covers the storage work only once it is done: until the dev gateway's model
    // was mended, half of the 10,000 disks were still to attach when it was read. And the
    // idle window starts only after it: at 10,000 agents the gateway worker still attached
    // disks 95 s after the last executor went idle, and a window over that was no idle
    // cluster's cost.
    wait_until_attached(gw, n, &dir);
    cost.attached_after = (start + elapsed).elapsed();
    let hwm = cluster::proc_status_field(pid, "VmHWM").unwrap_or(0);
    cost.peak_kb = cost.peak_kb.max(hwm);
    let idle = (n > 100).then(|| idle_cost(pid, &m, start + elapsed));
    let change = plan_change(s, sched, exec, &m, &dir, n);
    drop(m);
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    (cost, idle, change)
}

/// Waits until the dev gateway holds a device on the SDS of each of the `n` agents, for at
/// most [`ATTACH_LIMIT`]; a bench's own check, since a figure read before then leaves out the
/// storage work of a real cluster.
fn wait_until_attached(gw: &devcluster::gateway::GatewayHandle, n: usize, dir: &Path) {
    use std::collections::HashSet;
    let ips: HashSet<String> = (0..n)
        .map(|a| master::synthetic_host_ip(a).to_string())
        .collect();
    let deadline = Instant::now() + ATTACH_LIMIT;
    loop {
        let snap = gw.snapshot();
        let list = |key: &str| snap[key].as_array().map_or(&[][..], |a| a.as_slice());
        let ours: HashSet<&str> = list("sds")
            .iter()
            .filter(|s| {
                let ip_is_ours =
                    |ip: &serde_json::Value| ip.as_str().is_some_and(|ip| ips.contains(ip));
                s["ips"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(ip_is_ours))
            })
            .filter_map(|s| s["id"].as_str())
            .collect();
        let attached: HashSet<&str> = list("devices")
            .iter()
            .filter_map(|d| d["sdsId"].as_str())
            .filter(|id| ours.contains(id))
            .collect();
        if attached.len() >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} agents' disks attached through the gateway {} s after the figures were read; see {}",
            attached.len(),
            ATTACH_LIMIT.as_secs(),
            dir.join("scheduler.log").display()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The scheduler's CPU over [`IDLE_WINDOW`], from [`IDLE_FROM`] after `all_waiting` or now,
/// whichever is later (the caller waits for every disk first).
fn idle_cost(pid: u32, m: &master::MasterHandle, all_waiting: Instant) -> Idle {
    let asked = || -> u64 {
        m.synthetic_plans()
            .map(|p| p.iter().map(|p| p.answers + p.failures).sum())
            .unwrap_or(0)
    };
    let ticks = || cluster::cpu_split(pid).map_or(0, |(u, s)| u + s);
    // The window is the measurement: a fixed span of the idle cluster's life.
    std::thread::sleep((all_waiting + IDLE_FROM).saturating_duration_since(Instant::now()));
    let (t0, a0, at, th0) = (
        ticks(),
        asked(),
        Instant::now(),
        cluster::cpu_by_thread(pid),
    );
    std::thread::sleep(IDLE_WINDOW);
    let (t1, a1, span) = (ticks(), asked(), at.elapsed().as_secs_f64());
    Idle {
        ended_after: all_waiting.elapsed(),
        cpu_pct: t1.saturating_sub(t0) as f64 / USER_HZ / span * 100.0,
        by_thread: cpu_by_thread_since(pid, &th0),
        requests_per_s: a1.saturating_sub(a0) as f64 / span,
        peak_kb: cluster::proc_status_field(pid, "VmHWM").unwrap_or(0),
        rss_kb: cluster::proc_status_field(pid, "VmRSS").unwrap_or(0),
    }
}

fn fetched_bytes(m: &master::MasterHandle) -> u64 {
    m.snapshot()
        .ok()
        .and_then(|s| s["synthetic_fetched_bytes"].as_u64())
        .unwrap_or(0)
}

/// Kills the scheduler, starts it again with a new target, and times each executor's first
/// plan of the new generation from that start.
fn plan_change(
    old: Scheduler,
    sched: &Path,
    exec: &Path,
    m: &master::MasterHandle,
    dir: &Path,
    n: usize,
) -> PlanChange {
    let before = m.synthetic_plans().expect("plan waiters");
    let generation = before
        .iter()
        .map(|p| p.target_generation)
        .max()
        .unwrap_or(0);
    let port = old.port;
    drop(old);
    let start = Instant::now();
    let new = spawn(sched, exec, m, dir, port, &[NEW_TARGET]);
    let mut new = new;
    let deadline = start + Duration::from_secs(600);
    let failed_before: u64 = before.iter().map(|p| p.failures).sum();
    let (seen, announced, failures) = loop {
        let plans = m.synthetic_plans().expect("plan waiters");
        let moved: Vec<_> = plans
            .iter()
            .filter(|p| p.target_generation > generation)
            .collect();
        if moved.len() >= n {
            let mut seen: Vec<Duration> = moved
                .iter()
                .map(|p| p.generation_seen.saturating_duration_since(start))
                .collect();
            let mut announced: Vec<Duration> = plans
                .iter()
                .filter_map(|p| p.announced)
                .map(|a| a.saturating_duration_since(start))
                .collect();
            seen.sort();
            announced.sort();
            let failed: u64 = plans.iter().map(|p| p.failures).sum();
            break (seen, announced, failed.saturating_sub(failed_before));
        }
        if let Ok(Some(status)) = new.child.try_wait() {
            panic!(
                "the restarted scheduler exited ({status}); see {}",
                dir.join("scheduler.log").display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} executors on the new target; see {}",
            moved.len(),
            dir.join("scheduler.log").display()
        );
        // Each executor's time is its own (taken in its thread), not this poll's: a slower
        // poll only spares the registry 10,000 copies at a time.
        std::thread::sleep(Duration::from_millis(200));
    };
    let p = |v: &[Duration], q: f64| {
        v.get(((v.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    PlanChange {
        announced_p99: p(&announced, 0.99),
        seen_p50: p(&seen, 0.5),
        seen_p99: p(&seen, 0.99),
        seen_max: seen.last().copied().unwrap_or_default(),
        peak_kb: cluster::proc_status_field(new.child.id(), "VmHWM").unwrap_or(0),
        cpu_s: cluster::cpu_split(new.child.id())
            .map(|(u, s)| (u + s) as f64 / USER_HZ)
            .unwrap_or(0.0),
        by_thread: cpu_by_thread_since(new.child.id(), &Default::default()),
        failures,
    }
}

/// The process's CPU by thread since `earlier` (a [`cluster::cpu_by_thread`] reading; empty:
/// since its start), as a `#` line shows it.
fn cpu_by_thread_since(pid: u32, earlier: &std::collections::BTreeMap<String, u64>) -> String {
    cluster::thread_cpu_line(
        earlier,
        &cluster::cpu_by_thread(pid),
        USER_HZ,
        THREADS_SHOWN,
    )
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// `BENCH_SCHEDULER=<path>` measures another build (an A/B, or a profiler's wrapper script);
/// `BENCH_AGENTS=10000` measures one size only (any other number: that size, as the large one);
/// `BENCH_EXTRA_ARGS` adds scheduler flags to both starts (an operator's certificate,
/// `-rest.tls.cert=... -rest.tls.key=...`, keeps the executors' pin through the restart).
fn main() {
    let sched = std::env::var_os("BENCH_SCHEDULER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| cluster::release_artifact("storage-scheduler"));
    let only: Option<usize> = std::env::var("BENCH_AGENTS")
        .ok()
        .and_then(|s| s.parse().ok());
    let exec = cluster::release_artifact("storage-executor");
    println!("bench_binary {}", sched.display());
    // Another size (a heap profiler's run is too slow for 10,000): measured as the large one.
    let sizes = match only {
        Some(n) if n != 100 && n != 10_000 => vec![(n, n.to_string())],
        _ => vec![(100, "100".to_string()), (10_000, "10k".to_string())],
    };
    for (n, name) in sizes {
        if only.is_some_and(|o| o != n) {
            continue;
        }
        let (c, idle, change) = measure(&sched, &exec, n);
        // At 10,000 agents the storage attach and the health polls go on long after the last
        // executor waits: a poll that finds thousands of nodes changed at once raised the
        // resident set by 7 MB, sometimes before the reading 3 s after that moment and
        // sometimes after it (26.3 MB read, 33.6 MB 15 s later). The high-water mark at the
        // idle window's end covers both.
        let peak_kb = idle
            .as_ref()
            .map_or(c.peak_kb, |i| i.peak_kb.max(c.peak_kb));
        println!("bench scheduler_peak_rss_mb_{name} {} MB", mb(peak_kb));
        if n > 100 {
            println!("bench scheduler_cpu_seconds_{name} {:.2} s", c.cpu_s);
            println!(
                "# {n} agents: CPU {:.1} s user, {:.1} s system (load average at the end {})",
                c.cpu_s - c.system_s,
                c.system_s,
                std::fs::read_to_string("/proc/loadavg")
                    .unwrap_or_default()
                    .trim()
            );
            println!("# {n} agents: that CPU by thread: {}", c.by_thread);
        }
        if let Some(idle) = idle {
            println!("bench scheduler_idle_cpu_pct_{name} {:.1} %", idle.cpu_pct);
            println!(
                "# {n} agents idle: {:.0} plan requests a second during the {} s window; its CPU by thread: {}",
                idle.requests_per_s,
                IDLE_WINDOW.as_secs(),
                idle.by_thread
            );
            println!(
                "# {n} agents: VmHWM {} MB at the idle window's end ({} s after every executor waits), VmRSS then {} MB",
                mb(idle.peak_kb),
                idle.ended_after.as_secs(),
                mb(idle.rss_kb)
            );
        }
        println!(
            "bench plan_change_p99_ms_{name} {} ms",
            change.seen_p99.as_millis()
        );
        println!(
            "bench scheduler_restart_peak_rss_mb_{name} {} MB",
            mb(change.peak_kb)
        );
        println!(
            "# {n} agents: VmHWM {} MB from start until every disk was attached ({} s after every executor waits; all waiting \
             after {} ms, {} MB of executor downloads); settled VmRSS {} MB (anonymous {} MB, the binary's file {} MB), \
             {} threads, {} open files, {} plan long polls held",
            mb(c.peak_kb),
            c.attached_after.as_secs(),
            c.elapsed.as_millis(),
            c.fetched_bytes / 1_000_000,
            mb(c.settled_kb),
            mb(c.settled_anon_kb),
            mb(c.settled_file_kb),
            c.threads,
            c.open_files,
            c.waiting
        );
        println!(
            "# {n} agents: the REST server by then: {} connections, {} responses ({:.2} a connection), {} refused with 503",
            c.rest.connections,
            c.rest.responses,
            c.rest.responses as f64 / c.rest.connections.max(1) as f64,
            c.rest.refused
        );
        println!(
            "# {n} agents, a new target: announcement p99 {} ms, new plan p50 {} ms, p99 {} ms, last {} ms \
             after the new scheduler's start; its VmHWM then {} MB, its CPU {:.1} s; {} plan requests failed meanwhile",
            change.announced_p99.as_millis(),
            change.seen_p50.as_millis(),
            change.seen_p99.as_millis(),
            change.seen_max.as_millis(),
            mb(change.peak_kb),
            change.cpu_s,
            change.failures
        );
        println!(
            "# {n} agents, a new target: the new scheduler's CPU by thread: {}",
            change.by_thread
        );
    }
}
