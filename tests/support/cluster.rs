//! Shared by the tests and benches that run the real binaries on the dev cluster.
#![allow(dead_code)]

use devcluster::gateway::{self, GatewayConfig, GatewayHandle, MdmIps};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Polls `f` until it returns `Some`, failing with `what` at the deadline.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

include!("ports.rs");

/// A port for a server a test starts next (a scheduler's `-rest.port`); see `ports.rs`.
pub fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    port_below_ephemeral(20_000, 12_000, &NEXT)
}

pub fn scheduler_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_storage-scheduler"))
}

/// The executor binary beside the scheduler's (built by `cargo build -p storage-executor`).
pub fn executor_bin() -> PathBuf {
    let p = scheduler_bin().with_file_name("storage-executor");
    assert!(
        p.exists(),
        "{} missing: build it first (cargo build -p storage-executor; scripts/test.sh does)",
        p.display()
    );
    p
}

/// A static musl binary as `scripts/build-release.sh` ships it: the one place that knows
/// where that script leaves its artifacts. Fails (never skips) when it has not run.
pub fn release_artifact(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("dist/last-build")
        .join(name);
    assert!(
        p.exists(),
        "{} missing: run scripts/build-release.sh first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// A dev cluster gateway (pre-configured: MDMs 127.0.0.1/2/3, domain and pool `default`)
/// accepting `password`, shared by the tests of this process and never stopped: the
/// scheduler checks the storage cluster before it subscribes.
pub fn shared_gateway(password: &str) -> &'static GatewayHandle {
    static GATEWAYS: OnceLock<Mutex<HashMap<String, &'static GatewayHandle>>> = OnceLock::new();
    let mut map = GATEWAYS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(password.to_string()).or_insert_with(|| {
        let handle = gateway::start(GatewayConfig::new(password, dev_mdms()))
            .unwrap_or_else(|e| panic!("dev gateway: {e}"));
        Box::leak(Box::new(handle))
    })
}

/// The MDM addresses the pre-configured flags name.
pub fn dev_mdms() -> MdmIps {
    MdmIps {
        primary: "127.0.0.1".to_string(),
        secondary: "127.0.0.2".to_string(),
        tiebreaker: "127.0.0.3".to_string(),
    }
}

/// Flags of a pre-configured deployment against the dev cluster (and its gateway, see
/// [`shared_gateway`]).
pub fn scheduler_args(masters: &str, port: u16, store: &Path, password: &str) -> Vec<String> {
    let gateway = shared_gateway(password).addr().to_string();
    preconfigured_args(masters, port, store, password, &gateway)
}

/// [`scheduler_args`] against the gateway at `gateway` (a test's own, pre-configured with
/// [`dev_mdms`]).
pub fn preconfigured_args(
    masters: &str,
    port: u16,
    store: &Path,
    password: &str,
    gateway: &str,
) -> Vec<String> {
    vec![
        "-loglevel=debug".to_string(),
        format!("-rest.port={port}"),
        "-rest.address=127.0.0.1".to_string(),
        format!("-uri={masters}"),
        format!("-storage.password={password}"),
        "-storage.protectiondomain=default".to_string(),
        "-storage.storagepool=default".to_string(),
        "-storage.preconfig.primary=127.0.0.1".to_string(),
        "-storage.preconfig.secondary=127.0.0.2".to_string(),
        "-storage.preconfig.tiebreaker=127.0.0.3".to_string(),
        format!("-storage.preconfig.gateway={gateway}"),
        format!("-store.uri={}", store.display()),
        format!("-executor.altpath={}", executor_bin().display()),
    ]
}

/// Agent attributes that declare the SDS layout of `domains` (`(domain, pool)`), agents split
/// among them in consecutive blocks of `agents / domains.len()` (agents 1-3 `pd1`, 4-6 `pd2`),
/// each with one free disk, `/dev/xvdb`: for [`devcluster::master::MasterConfig::attributes`].
pub fn domain_layouts(
    agents: usize,
    domains: &[(&str, &str)],
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    let per = agents.div_ceil(domains.len().max(1));
    (1..=agents)
        .map(|n| {
            let (pd, sp) = domains[(n - 1) / per];
            let attrs = [
                ("storage-sds-domains".to_string(), pd.to_string()),
                (format!("storage-sds-{pd}"), sp.to_string()),
                (format!("storage-sds-{sp}"), "/dev/xvdb".to_string()),
            ];
            (n.to_string(), attrs.into_iter().collect())
        })
        .collect()
}

/// The host stand-in binary built with the dev cluster (`storage-host-standin`).
pub fn standin_bin() -> PathBuf {
    let p = scheduler_bin().with_file_name("storage-host-standin");
    assert!(
        p.exists(),
        "{} missing: build it first (cargo build -p storage-devcluster; scripts/test.sh does)",
        p.display()
    );
    p
}

/// Host stand-ins for every agent, RHEL 7 unless `per_agent` says otherwise: the executor
/// prepares its host, and no executor may ever act on the machine running the tests.
pub fn host_standins(control_url: Option<String>) -> devcluster::host::HostStandins {
    let mut s = devcluster::host::HostStandins::new(standin_bin(), control_url);
    s.profile = devcluster::host::HostProfile::Rhel7;
    s
}

/// Package files of both platforms in `dir` (`tests/devcluster/packages.txt`, storage and
/// volume driver), named as the vendor names them, served over HTTP from loopback (the server
/// lives as long as the returned handle), and the scheduler flags that hand them out. Every
/// file served is appended to `dir/served.log`, one name a line ([`served`]). Every package
/// comes with its SHA-256. A package of any other version is served too when asked for by
/// its vendor's file name (the host stand-ins read the version from the name): it is made
/// in `dir` on the first request ([`stand_in_package`] makes it ahead, for its digest).
pub fn stage_packages(dir: &Path) -> (Vec<String>, std::sync::Arc<tiny_http::Server>) {
    std::fs::create_dir_all(dir).expect("package dir");
    let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
    let addr = server.server_addr().to_ip().expect("ip");
    let (s, root) = (server.clone(), dir.to_path_buf());
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let name = req.url().trim_start_matches('/').to_string();
            let safe = !name.contains('/') && !name.contains("..");
            if safe && !root.join(&name).exists() && is_package_name(&name) {
                stand_in_package(&root, &name);
            }
            let file = safe
                .then(|| std::fs::File::open(root.join(&name)).ok())
                .flatten();
            if file.is_some() {
                use std::io::Write;
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(root.join("served.log"));
                if let Ok(mut log) = log {
                    let _ = writeln!(log, "{name}");
                }
            }
            let _ = match file {
                Some(f) => req.respond(tiny_http::Response::from_file(f)),
                None => req.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    let mut flags = Vec::new();
    // The one list of stand-in packages (scripts/demo.sh reads it too): `<flag> <file>`.
    let list = include_str!("../devcluster/packages.txt");
    for (flag, file) in list.lines().filter_map(|l| l.split_once(' ')) {
        let path = stand_in_package(dir, file);
        flags.push(format!("-{flag}=http://{addr}/{file}"));
        // Every download is checked against its digest.
        flags.push(format!("-{flag}.sha256={}", sha256_of(&path)));
    }
    (flags, server)
}

/// A vendor's package file name (`EMC-ScaleIO-sds-2.0-12000.122.el7.x86_64.rpm`,
/// `rexray_0.11.4-1_amd64.deb`), as the host stand-ins parse it.
pub fn is_package_name(name: &str) -> bool {
    devcluster::host::parse_rpm_name(name).is_some()
        || devcluster::host::parse_deb_name(name).is_some()
}

/// Writes the stand-in package `name` into `dir` (the same bytes whoever makes it, so its
/// digest is known ahead) and returns its path.
pub fn stand_in_package(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("stand-in package {name}\n")).expect("package file");
    path
}

/// The storage package flags of `build` (`12000.122`: 2.0-12000.122 in the vendor's names
/// instead of packages.txt's 2.0-10000.2072), with digests, served by the [`stage_packages`]
/// server at `addr` from `dir`: what a test redeploys with to upgrade.
pub fn storage_package_flags(addr: &str, dir: &Path, build: &str) -> Vec<String> {
    let list = include_str!("../devcluster/packages.txt");
    let mut flags = Vec::new();
    for (flag, file) in list.lines().filter_map(|l| l.split_once(' ')) {
        if !flag.starts_with("storage.") {
            continue;
        }
        let file = file.replace("10000.2072", build);
        let path = stand_in_package(dir, &file);
        flags.push(format!("-{flag}=http://{addr}/{file}"));
        flags.push(format!("-{flag}.sha256={}", sha256_of(&path)));
    }
    flags
}

/// Only the volume driver's flags of [`stage_packages`] (REX-Ray and dvdcli for both
/// platforms, with digests), served for the life of the test process: for tests that stage no
/// storage packages but drive nodes on to `volume-driver`, where a missing URL waits.
pub fn shared_volume_driver_flags() -> Vec<String> {
    static FLAGS: OnceLock<Vec<String>> = OnceLock::new();
    FLAGS
        .get_or_init(|| {
            // One directory for every test process (same files, same content), so that runs
            // leave no directories behind.
            let dir = std::env::temp_dir().join("storage-framework-volume-driver-packages");
            let (flags, server) = stage_packages(&dir);
            // The server serves as long as the process lives.
            std::mem::forget(server);
            flags
                .into_iter()
                .filter(|f| f.starts_with("-rexray."))
                .collect()
        })
        .clone()
}

/// Names of the files the package server of [`stage_packages`] served from `dir`, in order.
pub fn served(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("served.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The SHA-256 of a file, by coreutils' `sha256sum` (not by our own code under test).
pub fn sha256_of(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_string()
}

/// A child process killed (and reaped) when dropped, also when the test or bench panics, so
/// that a failed run leaves no scheduler behind.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Agents on which some task is TASK_RUNNING, by the master's snapshot (0 when it does not
/// answer).
pub fn agents_running(m: &devcluster::master::MasterHandle) -> usize {
    let Ok(snap) = m.snapshot() else { return 0 };
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

/// The state a scheduler saved in its file store, read with the scheduler's own loader.
pub fn stored_state(path: &Path) -> storage_framework::scheduler::model::Persisted {
    try_stored_state(path).unwrap_or_else(|e| panic!("stored state: {e}"))
}

/// [`stored_state`] for a poll: a store the scheduler has created but not yet written its
/// first batch to is an error here, not a panic.
pub fn try_stored_state(
    path: &Path,
) -> Result<storage_framework::scheduler::model::Persisted, String> {
    use storage_framework::scheduler::persist::StateStore;
    use storage_framework::store::JournalStore;
    let journal = JournalStore::read_only(path).map_err(|e| e.to_string())?;
    StateStore::new(Box::new(journal))
        .load()
        .map_err(|e| e.to_string())
}

/// Starts `sched` (a scheduler binary) on the dev cluster `m` with `exec` as its executor,
/// its state and log in `dir` (`scheduler.log`), at `-loglevel={loglevel}`: the benches'
/// scheduler.
pub fn spawn_bench_scheduler(
    sched: &Path,
    exec: &Path,
    m: &devcluster::master::MasterHandle,
    dir: &Path,
    loglevel: &str,
) -> std::process::Child {
    use std::process::{Command, Stdio};
    let _ = std::fs::create_dir_all(dir);
    let mut args = scheduler_args(
        &m.addr().to_string(),
        free_port(),
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

/// utime + stime of a process, in clock ticks (USER_HZ, 100 on Linux).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    cpu_split(pid).map(|(user, system)| user + system)
}

/// User and system CPU ticks of a process (`utime`, `stime` of `/proc/<pid>/stat`).
pub fn cpu_split(pid: u32) -> Option<(u64, u64)> {
    stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// User and system ticks of a process's or a thread's `stat` line.
fn stat_ticks(stat: &str) -> Option<(u64, u64)> {
    // Fields after `(comm)`: state is field 3; utime and stime are fields 14 and 15.
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// utime + stime of a process's threads, in clock ticks, summed by thread name with its
/// trailing number dropped (`rest-12` counts as `rest`; the main thread as `main`): where a
/// process's CPU went. A thread that ended before the reading is not in it.
pub fn cpu_by_thread(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut by = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some((head, _)), Some(open), Some((user, system))) =
            (stat.rsplit_once(')'), stat.find('('), stat_ticks(&stat))
        else {
            continue;
        };
        // The main thread goes by the process's (cut) name.
        let name = match task.file_name().to_str() == Some(pid.to_string().as_str()) {
            true => "main",
            false => head[open + 1..]
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .trim_end_matches('-'),
        };
        *by.entry(name.to_string()).or_insert(0) += user + system;
    }
    by
}

/// `later - earlier` by thread name, largest first, as `name seconds` (clock ticks at
/// `hz` a second), the first `top` of them and the rest summed.
pub fn thread_cpu_line(
    earlier: &std::collections::BTreeMap<String, u64>,
    later: &std::collections::BTreeMap<String, u64>,
    hz: f64,
    top: usize,
) -> String {
    let mut d: Vec<(&str, u64)> = later
        .iter()
        .map(|(k, v)| (k.as_str(), v.saturating_sub(*earlier.get(k).unwrap_or(&0))))
        .filter(|(_, v)| *v > 0)
        .collect();
    d.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> = d
        .iter()
        .take(top)
        .map(|(k, v)| format!("{k} {:.1} s", *v as f64 / hz))
        .collect();
    let rest: u64 = d.iter().skip(top).map(|(_, v)| v).sum();
    if rest > 0 {
        parts.push(format!("others {:.1} s", rest as f64 / hz));
    }
    parts.join(", ")
}

/// A field (`VmHWM`, `VmRSS`, `Threads`) of `/proc/<pid>/status`, as its number (kB for sizes).
pub fn proc_status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The fingerprint of the certificate a scheduler presents, from the last start its log
/// (`path`) records; `None` before it logged one.
pub fn logged_fingerprint(path: &Path) -> Option<storage_framework::tls::Fingerprint> {
    let log = std::fs::read_to_string(path).ok()?;
    // The REST server's start line: the log names other certificates too (the gateway's).
    let line = log.lines().rev().find(|l| l.contains("REST server on"))?;
    let at = line.rfind("certificate sha256:")? + "certificate ".len();
    let token: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == ':')
        .collect();
    storage_framework::tls::Fingerprint::parse(&token).ok()
}

/// An HTTPS client for the scheduler's executor API that accepts the certificate of
/// fingerprint `pin` only, as an executor's does; status codes are answers, not errors.
pub fn pinned_agent(pin: storage_framework::tls::Fingerprint) -> ureq::Agent {
    use storage_framework::tls;
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(20)))
        .build();
    let verifier = std::sync::Arc::new(tls::PinnedVerifier::new(vec![pin]));
    tls::agent(config, tls::executor_client_config(verifier))
}

/// Executor id -> the secret its latest launch's `TaskInfo.data` carried, as the dev master
/// handed it to the agent: the scheduler itself keeps only digests.
pub fn launched_secrets(
    master: &devcluster::master::MasterHandle,
) -> std::collections::BTreeMap<String, String> {
    master
        .launch_log()
        .unwrap_or_else(|e| panic!("launch log: {e}"))
        .into_iter()
        .filter_map(|r| Some((r.executor, r.secret?)))
        .collect()
}

/// The texts that show `secret` inside base64 of any data holding it, whatever its offset:
/// the middle of its encoding after 0, 1 or 2 bytes before it.
pub fn base64_forms(secret: &str) -> Vec<String> {
    use storage_framework::mesos::base64::encode;
    (0..3usize)
        .map(|offset| {
            let mut data = vec![0u8; offset];
            data.extend_from_slice(secret.as_bytes());
            let text = encode(&data);
            // Characters mixing in the bytes before it, and the last group, which mixes in
            // the bytes after it.
            let skip = (offset * 4).div_ceil(3);
            text[skip..text.len().saturating_sub(4)].to_owned()
        })
        .collect()
}

/// Fails naming `what` when `bytes` hold any of `secrets`, in clear or in base64.
pub fn assert_no_secret(bytes: &[u8], secrets: &[String], what: &str) {
    let text = String::from_utf8_lossy(bytes);
    for s in secrets {
        assert!(!s.is_empty());
        assert!(!text.contains(s.as_str()), "{what} holds a secret in clear");
        for form in base64_forms(s) {
            assert!(!text.contains(&form), "{what} holds a secret in base64");
        }
    }
}

/// `/proc/<pid>/limits` says the process may write no core file.
pub fn assert_no_core_dumps(pid: u32, what: &str) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap_or_else(|e| panic!("{what}: /proc/{pid}/limits: {e}"));
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap_or_else(|| panic!("{what}: no core limit in {limits}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&fields[4..6], ["0", "0"], "{what} may dump core: {line}");
}

/// Pids of the storage executors running with a working directory under `dir`.
pub fn executor_pids(dir: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let exe = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let is_executor = String::from_utf8_lossy(exe).ends_with("storage-executor");
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        if is_executor && cwd.starts_with(dir) {
            pids.push(pid);
        }
    }
    pids
}

/// From a scheduler log: the hosts whose reboot the scheduler granted (`<host>: rebooting its
/// host`), each checked to have had it before the gateway worker first created its SDS
/// (`<host>: creating SDS`), i.e. before any of its disks joined the pool; an error names the
/// first host attached before its reboot.
pub fn reboots_before_attach(log: &str) -> Result<Vec<String>, String> {
    let mut rebooted = Vec::new();
    let mut attached: Vec<String> = Vec::new();
    for line in log.lines() {
        if let Some((host, _)) = line.split_once(": rebooting its host") {
            let host = host.rsplit(' ').next().unwrap_or(host).to_string();
            if attached.contains(&host) {
                return Err(format!(
                    "{host} rebooted after its disks were attached: {line}"
                ));
            }
            rebooted.push(host);
        } else if let Some((host, _)) = line.split_once(": creating SDS") {
            attached.push(host.rsplit(' ').next().unwrap_or(host).to_string());
        }
    }
    Ok(rebooted)
}

/// From a scheduler log: no two of `hosts` were down for a reboot at once. A host is down from
/// its granted reboot (`<host>: rebooting its host`) until it reports a phase after it
/// (`<host>: phase ... -> storage-attach`, or `-> running`).
pub fn one_reboot_at_a_time(log: &str, hosts: &[String]) -> Result<(), String> {
    let mut down: Option<&str> = None;
    for line in log.lines() {
        for h in hosts {
            let back = [" -> storage-attach", " -> running"]
                .iter()
                .any(|p| line.contains(&format!(" {h}: phase ")) && line.ends_with(p));
            if line.contains(&format!(" {h}: rebooting its host")) {
                if let Some(other) = down.filter(|o| *o != h.as_str()) {
                    return Err(format!("{h} rebooted while {other} was down: {line}"));
                }
                down = Some(h);
            } else if back && down == Some(h.as_str()) {
                down = None;
            }
        }
    }
    Ok(())
}
