//! `cargo bench --bench converge`: `converge_seconds_100`, the operator's wait. 100 dev-cluster
//! agents with real executor processes and host stand-ins (which take no time), from the
//! launcher call (`scripts/deploy.sh`, custom build served over HTTP) to every node `running`
//! on the scheduler's `/api/state`. The scheduler gets the package flags and the dev gateway as
//! `scripts/demo.sh` passes them (the package list is `tests/devcluster/packages.txt`). Half
//! the hosts (Ubuntu 14.04) need a kernel and reboot, with the shortest outage the dev master
//! allows (one agent ping past its 2 s removal timeout).
//!
//! `converge_floor_seconds_100` is the same rollout with executors built with the `floor`
//! feature (`STORAGE_BENCH_FLOOR_EXECUTOR`, which `scripts/bench.sh` builds): they do not wait
//! for the scheduler's leave (a reboot's room in the disruption budget, the devices in the
//! pool), so what is left is what the hosts, Mesos and the reports allow on this machine.
//! `converge_floor_ratio_100` is the first over the second. The real rollout goes first, the
//! floor first when `BENCH_RUN` (bench.sh's run number) is even.
//!
//! While nodes cannot reach `running`, it reports `converge_seconds_100_executors_running`
//! instead: the same start, up to an executor RUNNING on every agent, with a `#` line saying so
//! and where the nodes stopped.
//!
//! The binaries measured are those in `STORAGE_BENCH_BIN_DIR` (bench.sh points it at the
//! release build), else the ones cargo built next to this bench.

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::{control, gateway, host, launcher, master};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS: usize = 100;

fn get_json(url: &str) -> Option<serde_json::Value> {
    let body = ureq::get(url)
        .call()
        .ok()?
        .body_mut()
        .read_to_string()
        .ok()?;
    serde_json::from_str(&body).ok()
}

/// Serves `dir/storage-scheduler` and `dir/storage-executor`; returns the base URL.
fn serve(dir: PathBuf) -> (String, Arc<tiny_http::Server>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
    let addr = server.server_addr().to_ip().expect("ip");
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let name = req.url().trim_start_matches('/').to_string();
            let file = ["storage-scheduler", "storage-executor"]
                .contains(&name.as_str())
                .then(|| std::fs::File::open(dir.join(&name)).ok())
                .flatten();
            let _ = match file {
                Some(f) => req.respond(tiny_http::Response::from_file(f)),
                None => req.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    (format!("http://{addr}"), server)
}

/// Node count per phase on the scheduler's `/api/state`.
fn phases(scheduler: &str) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let Some(state) = get_json(&format!("{scheduler}/api/state")) else {
        return counts;
    };
    for n in state["model"]["nodes"].as_object().into_iter().flatten() {
        let p = n.1["phase"].as_str().unwrap_or("?").to_string();
        match counts.iter_mut().find(|(q, _)| *q == p) {
            Some((_, c)) => *c += 1,
            None => counts.push((p, 1)),
        }
    }
    counts
}

/// How one rollout ended: every node running after this long, or where it stopped.
enum Rollout {
    Running(Duration),
    /// Every executor ran after this long, the nodes did not all reach `running`.
    ExecutorsOnly(Duration, String),
    Stuck(String),
}

fn main() {
    let bin_dir = std::env::var_os("STORAGE_BENCH_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cluster::scheduler_bin().parent().unwrap().to_path_buf());
    let standin = cluster::scheduler_bin().with_file_name(host::STANDIN_BIN);
    for p in [
        bin_dir.join("storage-scheduler"),
        bin_dir.join("storage-executor"),
        standin.clone(),
    ] {
        assert!(
            p.exists(),
            "{} missing (scripts/bench.sh builds it)",
            p.display()
        );
    }
    let dir = std::env::temp_dir().join(format!("bench-converge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let floor_bins = std::env::var_os("STORAGE_BENCH_FLOOR_EXECUTOR").map(|exec| {
        // The release scheduler beside the floor executor: the scheduler serves the agents
        // the executor it was shipped with.
        let bins = dir.join("floor-bins");
        std::fs::create_dir_all(&bins).expect("floor binaries");
        std::fs::copy(
            bin_dir.join("storage-scheduler"),
            bins.join("storage-scheduler"),
        )
        .expect("scheduler copy");
        std::fs::copy(&exec, bins.join("storage-executor")).expect("floor executor copy");
        bins
    });
    // The second rollout runs on a box still busy from the first: bench.sh's even runs
    // (`BENCH_RUN`) measure the floor first, so that the median is not the order's.
    let floor_first = std::env::var("BENCH_RUN")
        .ok()
        .and_then(|r| r.parse::<u32>().ok())
        .is_some_and(|r| r % 2 == 0);
    let real_run = || rollout(&bin_dir, &standin, &dir.join("real"));
    let floor_run = || {
        floor_bins
            .as_ref()
            .map(|b| rollout(b, &standin, &dir.join("floor")))
    };
    let (real, floor) = if floor_first {
        let floor = floor_run();
        (real_run(), floor)
    } else {
        (real_run(), floor_run())
    };
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let real = match real {
        Rollout::Running(t) => t,
        Rollout::ExecutorsOnly(t, phases) => {
            println!(
                "bench converge_seconds_100_executors_running {:.2} s",
                t.as_secs_f64()
            );
            println!(
                "# converge_seconds_100: nodes do not reach running (phases 15 s later: {phases}); \
                 the figure above is the launcher call to an executor RUNNING on all {AGENTS} agents"
            );
            return;
        }
        Rollout::Stuck(why) => {
            println!("# converge_seconds_100: {why}");
            return;
        }
    };
    println!("bench converge_seconds_100 {:.2} s", real.as_secs_f64());
    match floor {
        None => println!(
            "# converge_floor_seconds_100: not measured (STORAGE_BENCH_FLOOR_EXECUTOR names no \
             executor built with `--features floor`; scripts/bench.sh builds one)"
        ),
        Some(Rollout::Running(f)) => {
            println!("bench converge_floor_seconds_100 {:.2} s", f.as_secs_f64());
            println!(
                "bench converge_floor_ratio_100 {:.2} x",
                real.as_secs_f64() / f.as_secs_f64()
            );
        }
        Some(Rollout::ExecutorsOnly(_, why) | Rollout::Stuck(why)) => {
            println!("# converge_floor_seconds_100: the floor rollout did not finish: {why}")
        }
    }
}

/// One rollout on a fresh dev cluster, launcher and gateway in `dir`, the scheduler and
/// executor served from `bin_dir`: from the launcher call to every node `running`.
fn rollout(bin_dir: &Path, standin: &Path, dir: &Path) -> Rollout {
    // The hosts reach the cluster through its control API: reboots, and SDCs registering
    // with the gateway (which storage-attach waits for), as in demo.sh and e2e_node.
    let listener = control::bind(0).expect("control API");
    let mut standins = host::HostStandins::new(standin.to_path_buf(), Some(listener.url()));
    standins.per_agent = (1..=AGENTS)
        .map(|n| {
            let p = if n % 2 == 1 {
                host::HostProfile::Ubuntu1404
            } else {
                host::HostProfile::Rhel7
            };
            (n, p)
        })
        .collect();
    let m = Arc::new(
        master::start(master::MasterConfig {
            agents: AGENTS,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            // Reboots (the Ubuntu hosts' kernel) are away one ping past this, as in demo.sh.
            agent_removal_timeout: Duration::from_secs(2),
            host_standins: Some(standins),
            keep_work_dir: std::env::var_os("BENCH_KEEP").is_some(),
            ..Default::default()
        })
        .expect("dev cluster"),
    );
    let gw = Arc::new(
        gateway::start(gateway::GatewayConfig::new(
            "Scaleio123",
            cluster::dev_mdms(),
        ))
        .expect("dev gateway"),
    );
    let control = listener
        .serve(control::Targets {
            master: m.clone(),
            gateway: Some(gw.clone()),
        })
        .expect("control API");
    let l = launcher::start(launcher::LauncherConfig {
        work_dir: dir.join("launcher"),
        ..Default::default()
    })
    .expect("launcher");
    let (base, _files) = serve(bin_dir.to_path_buf());
    // What the executors install and where the storage work goes, as demo.sh passes them.
    let gateway = gw.addr();
    let (packages, _package_server) = cluster::stage_packages(&dir.join("packages"));
    let mut flags = vec![format!("-storage.lbgateway={gateway}")];
    flags.extend(packages);

    let start = Instant::now();
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deploy.sh"))
        .args(["--custom", &base, "--launcher", &l.addr().to_string()])
        .args(["--master", &m.addr().to_string(), "--pd", "default"])
        .args(["--pool", "default", "--primary", "127.0.0.1"])
        .args(["--secondary", "127.0.0.2", "--tiebreaker", "127.0.0.3"])
        .args(["--gateway", "127.0.0.1"])
        .args(flags.iter().flat_map(|f| ["--flag", f.as_str()]))
        .env("STORAGE_GATEWAY_PASSWORD", "Scaleio123")
        .output()
        .expect("deploy.sh");
    assert!(
        out.status.success(),
        "deploy.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The scheduler's address, once the launcher runs it.
    let app_url = format!("{}/v2/apps/storage-scheduler", l.url());
    let scheduler = cluster::wait_for(
        "the launcher to run the scheduler",
        Duration::from_secs(60),
        || {
            let app = get_json(&app_url)?;
            let task = app["app"]["tasks"].as_array()?.first()?.clone();
            let port = task["ports"].as_array()?.first()?.as_u64()?;
            Some(format!("http://{}:{port}", task["host"].as_str()?))
        },
    );
    let deadline = start + Duration::from_secs(120);
    let show = |phases: &[(String, usize)]| {
        phases
            .iter()
            .map(|(p, c)| format!("{p} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut executors_at = None;
    let (mut last, mut moved_at) = (Vec::new(), start);
    let outcome = loop {
        let now = Instant::now();
        if executors_at.is_none() && cluster::agents_running(&m) == AGENTS {
            executors_at = Some(now);
        }
        let phases = phases(&scheduler);
        let running = phases
            .iter()
            .find(|(p, _)| p == "running")
            .map_or(0, |(_, c)| *c);
        if running == AGENTS {
            break Rollout::Running(now - start);
        }
        if phases != last {
            (last, moved_at) = (phases, now);
        }
        // Give up when no node has changed phase for 15 s (reboots included), or at the
        // deadline.
        if now > deadline || now > moved_at + Duration::from_secs(15) {
            break match executors_at {
                Some(t) => Rollout::ExecutorsOnly(t - start, show(&last)),
                None => Rollout::Stuck(format!(
                    "only {} of {AGENTS} executors running after {} s (node phases: {})",
                    cluster::agents_running(&m),
                    (now - start).as_secs(),
                    show(&last)
                )),
            };
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(l);
    drop(control);
    drop(m);
    outcome
}
