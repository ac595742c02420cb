//! `cargo bench --bench upgrade`: `upgrade_seconds_20`, a rolling upgrade of the storage
//! software as the operator waits for it. 20 dev-cluster agents with real executor processes
//! and RHEL 7 host stand-ins (whose commands take no time), two protection domains of 10 (the
//! SDS layout declared in agent attributes, as the e2e tests declare it), pre-configured mode,
//! the dev gateway rebuilding for 1 s after each SDS outage (`--rebuild-seconds 1`), the
//! scheduler reading the gateway's health every second (`-health.interval=1`, the shortest
//! the flag takes) and its default budget of one disrupted node per domain. The first rollout
//! (not measured) brings every node to `running` at the first generation; then the scheduler
//! restarts with the package URLs of a newer build (the vendor's file names at 2.0-12000.122),
//! and the figure is the time from that restart to every node at the new target generation on
//! `/api/state` with every storage package on every host at the new version.
//!
//! `upgrade_floor_seconds_20` is what no scheduler can beat under the budget: upgrading an
//! SDS restarts it, and its domain's pools then rebuild for the rebuild time `R`; the budget
//! (at most `B` nodes of a domain disrupted or not yet back, the pools clean before the next)
//! makes a domain's SDSs go in `ceil(n_d / B)` rounds of at least `R` each, and domains go in
//! parallel, so the floor is `max over domains d of ceil(n_d / B) * R`: 10 SDSs x 1 s = 10 s
//! here. Everything else (downloads, installs, SDCs) takes no time on the stand-ins.
//! `upgrade_floor_ratio_20` is the figure over the floor (target 1.5).
//!
//! The bench's own checks, from the dev gateway's `GET /control/gateway/events` after the run
//! (counted from the start, first rollout included): no data-unavailable event, no quorum
//! loss, and at most `B` SDSs of each domain down at once, each domain seen down (an upgrade
//! that restarts no SDS would measure nothing). A failed check, a failed step or node, or a
//! timeout exits non-zero with the reason (`scripts/bench.sh` reports the part as crashed).
//!
//! The binaries measured are those in `STORAGE_BENCH_BIN_DIR` (bench.sh points it at the
//! release build), else the ones cargo built next to this bench. `BENCH_KEEP=1` keeps the
//! work directory (the scheduler's log: `scheduler.log`).

#[path = "../support/cluster.rs"]
mod cluster;

use cluster::KillOnDrop;
use devcluster::control::{self, ControlHandle};
use devcluster::gateway::{self, GatewayConfig, GatewayHandle};
use devcluster::host::{self, FakeRoot};
use devcluster::master::{self, MasterHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use storage_framework::gateway::api;
use storage_framework::gateway::client::{GatewayClient, GatewayConfig as ClientConfig};
use storage_framework::secret::Secret;

const AGENTS: usize = 20;
const DOMAINS: [(&str, &str); 2] = [("pd1", "sp1"), ("pd2", "sp2")];
const PASSWORD: &str = "Bench-Upgrade-Pa55";
/// The dev gateway's rebuild time after each SDS outage.
const REBUILD: Duration = Duration::from_secs(1);
/// `-rollout.max-disrupted-per-domain`, its default.
const BUDGET: usize = 1;
/// The build the upgrade brings (the first rollout installs packages.txt's 10000.2072).
const NEWER: &str = "12000.122";
const FIRST_ROLLOUT_LIMIT: Duration = Duration::from_secs(300);
const UPGRADE_LIMIT: Duration = Duration::from_secs(180);

struct Rig {
    /// First: the scheduler ends before the cluster it runs on.
    scheduler: Option<KillOnDrop>,
    control: ControlHandle,
    master: Arc<MasterHandle>,
    gw: Arc<GatewayHandle>,
    _packages: Arc<tiny_http::Server>,
    package_flags: Vec<String>,
    sched_bin: PathBuf,
    exec_bin: PathBuf,
    port: u16,
    dir: PathBuf,
}

fn bin_dir() -> PathBuf {
    std::env::var_os("STORAGE_BENCH_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cluster::scheduler_bin().parent().unwrap().to_path_buf())
}

impl Rig {
    fn start() -> Rig {
        let bins = bin_dir();
        let (sched_bin, exec_bin) = (
            bins.join("storage-scheduler"),
            bins.join("storage-executor"),
        );
        for p in [&sched_bin, &exec_bin, &cluster::standin_bin()] {
            assert!(
                p.exists(),
                "{} missing (scripts/bench.sh builds it)",
                p.display()
            );
        }
        let dir = std::env::temp_dir().join(format!("bench-upgrade-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("work dir");
        let listener = control::bind(0).expect("control API");
        let master = Arc::new(
            master::start(master::MasterConfig {
                agents: AGENTS,
                heartbeat_interval: Duration::from_secs(1),
                work_dir: dir.join("mesos"),
                host_standins: Some(cluster::host_standins(Some(listener.url()))),
                attributes: cluster::domain_layouts(AGENTS, &DOMAINS),
                keep_work_dir: std::env::var_os("BENCH_KEEP").is_some(),
                ..Default::default()
            })
            .expect("dev cluster"),
        );
        let mut config = GatewayConfig::new(PASSWORD, cluster::dev_mdms());
        config.rebuild_time = REBUILD;
        let gw = Arc::new(gateway::start(config).expect("dev gateway"));
        let control = listener
            .serve(control::Targets {
                master: master.clone(),
                gateway: Some(gw.clone()),
            })
            .expect("control API");
        let (package_flags, packages) = cluster::stage_packages(&dir.join("packages"));
        Rig {
            scheduler: None,
            control,
            master,
            gw,
            _packages: packages,
            package_flags,
            sched_bin,
            exec_bin,
            port: cluster::free_port(),
            dir,
        }
    }

    /// Starts the scheduler with the current package flags, on the same port and store every
    /// time (the executors find it there again); its log appends to `scheduler.log`.
    fn start_scheduler(&mut self) {
        let mut args = cluster::preconfigured_args(
            &self.master.addr().to_string(),
            self.port,
            &self.dir.join("state.json"),
            PASSWORD,
            &self.gw.addr().to_string(),
        );
        args.retain(|a| !a.starts_with("-executor.altpath="));
        args.push(format!("-executor.altpath={}", self.exec_bin.display()));
        args.push("-health.interval=1".into());
        args.extend(self.package_flags.iter().cloned());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("scheduler.log"))
            .expect("scheduler log");
        let child = Command::new(&self.sched_bin)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start storage-scheduler");
        self.scheduler = Some(KillOnDrop(child));
    }

    /// The storage package flags of the build `NEWER` in place of the staged ones.
    fn stage_newer(&mut self) {
        let addr = self
            .package_flags
            .iter()
            .find_map(|f| f.strip_prefix("-storage.rhel7.sds=http://"))
            .and_then(|rest| rest.split('/').next())
            .expect("the staged SDS package's address")
            .to_string();
        let newer = cluster::storage_package_flags(&addr, &self.dir.join("packages"), NEWER);
        self.package_flags.retain(|f| !f.starts_with("-storage."));
        self.package_flags.extend(newer);
    }

    fn state(&self) -> Option<Value> {
        let url = format!("http://127.0.0.1:{}/api/state", self.port);
        let body = ureq::get(&url)
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        serde_json::from_str(&body).ok()
    }

    fn host_root(&self, n: usize) -> PathBuf {
        host::agent_root(&self.dir.join("mesos").join(format!("agent-{n}")))
    }

    fn events(&self) -> Result<Value, String> {
        let url = format!("{}/control/gateway/events", self.control.url());
        let body = ureq::get(&url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?
            .into_body()
            .read_to_string()
            .map_err(|e| format!("GET {url}: {e}"))?;
        serde_json::from_str(&body).map_err(|e| format!("GET {url}: {e}: {body}"))
    }
}

/// Where the nodes are, for `/api/state` polls: `Ok(Some(generation))` once every node is
/// `running` at the target generation and that is at least `min`; `Err` on a failed step
/// or node (a first rollout's executor replaced after its agent came back is not one).
fn at_target(state: &Value, min: u64) -> Result<Option<u64>, String> {
    let Some(target) = state
        .pointer("/model/target/generation")
        .and_then(Value::as_u64)
    else {
        return Ok(None);
    };
    let empty = serde_json::Map::new();
    let nodes = state
        .pointer("/model/nodes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for n in nodes.values() {
        let steps = n.pointer("/rollout/steps").and_then(Value::as_array);
        if let Some(step) = steps.into_iter().flatten().find(|s| s["state"] == "failed") {
            return Err(format!("{}: step failed: {step}", n["hostname"]));
        }
        let terminated = n["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("Executor terminated"));
        if n["phase"] == "failed" && !terminated {
            return Err(format!("{} failed: {}", n["hostname"], n["last_error"]));
        }
    }
    let there = nodes.len() == AGENTS
        && target >= min
        && nodes
            .values()
            .all(|n| n["phase"] == "running" && n["generation"] == target);
    Ok(there.then_some(target))
}

/// Hosts with a storage package not at `build`, or none installed: `agent-N: EMC-ScaleIO-sds
/// 2.0-10000.2072.el7`.
fn behind(rig: &Rig, build: &str) -> Vec<String> {
    let mut out = Vec::new();
    for n in 1..=AGENTS {
        let state = FakeRoot::open(&rig.host_root(n)).and_then(|r| r.state());
        let Ok(state) = state else {
            out.push(format!("agent-{n}: no host state"));
            continue;
        };
        let storage: Vec<_> = state
            .packages
            .iter()
            .filter(|(name, _)| name.to_ascii_lowercase().starts_with("emc-scaleio"))
            .collect();
        if storage.is_empty() {
            out.push(format!("agent-{n}: no storage package"));
        }
        for (name, p) in storage {
            let full = format!("{}-{}", p.version, p.release.as_deref().unwrap_or_default());
            if !full.contains(build) {
                out.push(format!("agent-{n}: {name} {full}"));
            }
        }
    }
    out
}

/// Waits until every node is at a target generation of at least `min` and every host's
/// storage packages carry `build` (when given); returns the generation.
fn wait_at(rig: &Rig, min: u64, build: Option<&str>, limit: Duration) -> Result<u64, String> {
    let deadline = Instant::now() + limit;
    let mut last = String::from("no answer from /api/state");
    loop {
        if let Some(state) = rig.state() {
            match at_target(&state, min)? {
                Some(g) => {
                    let late = build.map(|b| behind(rig, b)).unwrap_or_default();
                    if late.is_empty() {
                        return Ok(g);
                    }
                    last = format!("packages behind: {}", late.join(", "));
                }
                None => last = summary(&state),
            }
        }
        if Instant::now() > deadline {
            return Err(format!("not there after {} s: {last}", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Node count per phase and generation, for a timeout's message.
fn summary(state: &Value) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let empty = serde_json::Map::new();
    let nodes = state
        .pointer("/model/nodes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for n in nodes.values() {
        let key = format!("{} at generation {}", n["phase"], n["generation"]);
        *counts.entry(key).or_default() += 1;
    }
    let target = state
        .pointer("/model/target/generation")
        .cloned()
        .unwrap_or_default();
    let counts: Vec<String> = counts.iter().map(|(k, c)| format!("{c} {k}")).collect();
    format!("target generation {target}; nodes: {}", counts.join(", "))
}

/// SDSs per protection domain name, as the gateway lists them.
fn sds_per_domain(rig: &Rig) -> Result<BTreeMap<String, usize>, String> {
    let config = ClientConfig::new(&rig.gw.addr().to_string(), Secret::new(PASSWORD), "2.0");
    let mut c = GatewayClient::new(config).map_err(|e| format!("gateway client: {e}"))?;
    let pds = api::protection_domains(&mut c).map_err(|e| format!("protection domains: {e}"))?;
    let mut out = BTreeMap::new();
    for s in api::sdss(&mut c).map_err(|e| format!("SDSs: {e}"))? {
        let pd = pds
            .iter()
            .find(|p| Some(&p.id) == s.protection_domain_id.as_ref());
        let name = pd
            .and_then(|p| p.name.clone())
            .unwrap_or_else(|| "?".into());
        *out.entry(name).or_default() += 1;
    }
    Ok(out)
}

/// The floor: the domains in parallel, each `ceil(SDSs / budget)` rebuilds in a row.
fn floor(sds: &BTreeMap<String, usize>) -> Duration {
    let rounds = sds.values().map(|n| n.div_ceil(BUDGET)).max().unwrap_or(0);
    REBUILD * rounds as u32
}

/// The gateway's events against the budget: `Err` with every breach.
fn check_events(events: &Value) -> Result<(), String> {
    let mut bad = Vec::new();
    for counter in ["data_unavailable", "quorum_loss"] {
        let n = events[counter].as_u64();
        if n != Some(0) {
            bad.push(format!("{counter} {}", events[counter]));
        }
    }
    for (pd, _) in DOMAINS {
        match events["max_sds_down_per_domain"][pd].as_u64() {
            Some(n) if (1..=BUDGET as u64).contains(&n) => {}
            Some(0) | None => bad.push(format!("no SDS of {pd} was ever seen down")),
            Some(n) => bad.push(format!("{n} SDSs of {pd} down at once (budget {BUDGET})")),
        }
    }
    if bad.is_empty() {
        return Ok(());
    }
    let log: Vec<String> = events["log"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .take(10)
        .map(|l| l.as_str().unwrap_or_default().to_string())
        .collect();
    Err(format!(
        "{} (gateway log, latest first: {})",
        bad.join("; "),
        log.join(" | ")
    ))
}

fn run(rig: &mut Rig) -> Result<(), String> {
    rig.start_scheduler();
    let first =
        wait_at(rig, 1, None, FIRST_ROLLOUT_LIMIT).map_err(|e| format!("first rollout: {e}"))?;
    let sds = sds_per_domain(rig)?;
    if sds.len() != DOMAINS.len() || sds.values().sum::<usize>() != AGENTS {
        return Err(format!(
            "after the first rollout the gateway lists SDSs {sds:?}"
        ));
    }

    let watch = GatewayWatch::start(rig.control.url());
    let (start, restart_at) = (Instant::now(), epoch_now());
    rig.scheduler = None;
    rig.stage_newer();
    rig.start_scheduler();
    wait_at(rig, first + 1, Some(NEWER), UPGRADE_LIMIT).map_err(|e| format!("upgrade: {e}"))?;
    let took = start.elapsed().as_secs_f64();
    let gateway_lines = watch.stop();
    let floor = floor(&sds).as_secs_f64();
    println!("bench upgrade_seconds_20 {took:.2} s");
    println!("bench upgrade_floor_seconds_20 {floor:.2} s");
    println!("bench upgrade_floor_ratio_20 {:.2} x", took / floor);
    let marks = Marks {
        restart: restart_at,
        end: restart_at + took,
        generation: first + 1,
        gateway: gateway_lines,
    };
    match timeline(rig, &marks) {
        Ok(line) => println!("# upgrade_seconds_20 timeline: {line}"),
        Err(why) => println!("# upgrade_seconds_20 timeline unavailable: {why}"),
    }
    check_events(&rig.events()?)
}

/// Seconds since the Unix epoch, now.
fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The dev gateway's event log lines as they appear, each with when it was first seen: the
/// SDSs' outages, which no process logs with a time. A thread polls the control API.
struct GatewayWatch {
    stop: Arc<AtomicBool>,
    lines: Arc<Mutex<Vec<(f64, String)>>>,
    thread: std::thread::JoinHandle<()>,
}

impl GatewayWatch {
    fn start(control: String) -> GatewayWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (s, l) = (stop.clone(), lines.clone());
        let url = format!("{control}/control/gateway/events");
        let read = move || -> Option<Vec<String>> {
            let body = ureq::get(&url)
                .call()
                .ok()?
                .into_body()
                .read_to_string()
                .ok()?;
            let v: Value = serde_json::from_str(&body).ok()?;
            let log = v["log"].as_array()?;
            Some(
                log.iter()
                    .filter_map(|l| Some(l.as_str()?.to_string()))
                    .collect(),
            )
        };
        let thread = std::thread::spawn(move || {
            // What is logged before the restart is the first rollout's.
            let mut seen = read().map_or(0, |l| l.len());
            while !s.load(Ordering::Relaxed) {
                if let Some(log) = read() {
                    let at = epoch_now();
                    let mut out = l.lock().unwrap_or_else(|e| e.into_inner());
                    out.extend(log.iter().skip(seen).map(|line| (at, line.clone())));
                    seen = seen.max(log.len());
                }
                // The pace of the looks (what they timestamp is good to this), not a wait.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        GatewayWatch {
            stop,
            lines,
            thread,
        }
    }

    fn stop(self) -> Vec<(f64, String)> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What the timeline is read against: times in seconds since the Unix epoch.
struct Marks {
    restart: f64,
    end: f64,
    generation: u64,
    gateway: Vec<(f64, String)>,
}

/// Seconds since the Unix epoch of a log line's UTC stamp (`[2026-11-26T07:21:11.634Z ...`
/// from the scheduler, the same without `[` from the executors).
fn stamp(line: &str) -> Option<f64> {
    let ts = line.trim_start_matches('[').get(..24)?;
    let (date, time) = ts.strip_suffix('Z')?.split_once('T')?;
    let d: Vec<i64> = date.split('-').filter_map(|x| x.parse().ok()).collect();
    let t: Vec<f64> = time.split(':').filter_map(|x| x.parse().ok()).collect();
    let ([y, m, day], [h, mi, s]) = (d.as_slice(), t.as_slice()) else {
        return None;
    };
    // Days since 1970-01-01 of a proleptic Gregorian date (years from March).
    let y = if *m <= 2 { y - 1 } else { *y };
    let (era, mp) = (y.div_euclid(400), (m + 9) % 12);
    let yoe = y - era * 400;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + (153 * mp + 2) / 5 + day - 1;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + mi * 60.0 + s)
}

/// The scheduler's grants of `step` at `generation` since `after`: (when, agent hostname).
fn grants(log: &str, step: &str, generation: u64, after: f64) -> Vec<(f64, String)> {
    let tail = format!(": may start {step} (generation {generation})");
    log.lines()
        .filter(|l| l.ends_with(&tail))
        .filter_map(|l| {
            let t = stamp(l).filter(|t| *t >= after)?;
            let host = l.split("node ").nth(1)?.split(':').next()?;
            Some((t, host.to_string()))
        })
        .collect()
}

/// When agent `n`'s executor started `step` at `generation`, from its sandbox's `stderr`.
fn step_started(dir: &Path, n: usize, step: &str, generation: u64) -> Option<f64> {
    let line = format!("node agent-{n}: {step} (generation {generation})");
    let mut todo = vec![dir.join("mesos").join(format!("agent-{n}")).join("slaves")];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.file_name().is_some_and(|f| f == "stderr") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                if let Some(t) = text.lines().filter(|l| l.contains(&line)).find_map(stamp) {
                    return Some(t);
                }
            }
        }
    }
    None
}

/// Where the upgrade's time went, one line: the restart to the first grant, then per SDS
/// step (means over every domain's steps, paired in order: the budget lets one at a time)
/// the grant to the executor starting it, to its SDS seen down by the gateway, the outage,
/// the rebuild, and the rebuilt pool to the domain's next grant (the health poll's lag);
/// then the last rebuild to every node at the target.
fn timeline(rig: &Rig, marks: &Marks) -> Result<String, String> {
    let log = std::fs::read_to_string(rig.dir.join("scheduler.log"))
        .map_err(|e| format!("scheduler.log: {e}"))?;
    let all = grants(&log, "upgrade-sds", marks.generation, marks.restart);
    let first = all
        .iter()
        .map(|g| g.0)
        .reduce(f64::min)
        .ok_or("no grant logged")?;
    let (mut wake, mut to_down, mut down, mut lag) = (vec![], vec![], vec![], vec![]);
    let mut last_rebuilt = first;
    for (i, (pd, _)) in DOMAINS.iter().enumerate() {
        let per = AGENTS / DOMAINS.len();
        let agents = (i * per + 1)..=((i + 1) * per);
        let mut g: Vec<&(f64, String)> = all
            .iter()
            .filter(|(_, h)| agents.clone().any(|n| *h == format!("agent-{n}")))
            .collect();
        g.sort_by(|a, b| a.0.total_cmp(&b.0));
        let seen = |what: &str| -> Vec<f64> {
            let needle = format!(" of {pd} {what}");
            marks
                .gateway
                .iter()
                .filter(|(_, l)| l.contains(&needle))
                .map(|(t, _)| *t)
                .collect()
        };
        let (downs, backs) = (seen("disconnected"), seen("reconnected"));
        if downs.len() != g.len() || backs.len() != g.len() {
            return Err(format!(
                "{pd}: {} grants, {} outages, {} reconnections",
                g.len(),
                downs.len(),
                backs.len()
            ));
        }
        for (k, (t, host)) in g.iter().enumerate() {
            let n: usize = host
                .trim_start_matches("agent-")
                .parse()
                .map_err(|_| host.clone())?;
            let started = step_started(&rig.dir, n, "upgrade-sds", marks.generation)
                .ok_or_else(|| format!("{host}: no start of upgrade-sds in its executor's log"))?;
            let rebuilt = backs[k] + REBUILD.as_secs_f64();
            wake.push(started - t);
            to_down.push(downs[k] - started);
            down.push(backs[k] - downs[k]);
            if let Some((next, _)) = g.get(k + 1) {
                lag.push(next - rebuilt);
            }
            last_rebuilt = last_rebuilt.max(rebuilt);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    Ok(format!(
        "restart -> first SDS grant {:.2} s; per SDS step (mean of {}): grant -> executor starts \
         it {:.2} s, -> SDS seen down {:.2} s, down {:.2} s, rebuild {:.2} s, rebuilt -> next \
         grant in its domain {:.2} s; last rebuild done -> every node at target {:.2} s",
        first - marks.restart,
        wake.len(),
        mean(&wake),
        mean(&to_down),
        mean(&down),
        REBUILD.as_secs_f64(),
        mean(&lag),
        marks.end - last_rebuilt,
    ))
}

fn main() {
    let mut rig = Rig::start();
    let dir = rig.dir.clone();
    let outcome = run(&mut rig);
    // The scheduler first, then the cluster, then its files.
    drop(rig);
    // A failed run keeps its logs and sandboxes for a look (and says where).
    if std::env::var_os("BENCH_KEEP").is_some() || outcome.is_err() {
        eprintln!("# upgrade: work directory kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let Err(why) = outcome {
        eprintln!("upgrade bench failed: {why}");
        std::process::exit(1);
    }
}
