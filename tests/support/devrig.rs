//! The parts of a dev cluster rig the e2e tests share: the master with host stand-ins, the
//! dev gateway, the control API, the scheduler, and reading their HTTP answers. Each test
//! keeps its own specifics (agents, attributes, flags) and passes them in. Needs
//! `support/cluster.rs` included as `mod cluster` beside it.
#![allow(dead_code)]

use super::cluster::{scheduler_args, scheduler_bin, KillOnDrop};
use devcluster::control::{self, ControlHandle, ControlListener};
use devcluster::gateway::{self, GatewayConfig, GatewayHandle};
use devcluster::host::HostStandins;
use devcluster::master::{self, MasterConfig, MasterHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The operator token [`PreconfigRig`] starts its scheduler with.
pub const OPERATOR_TOKEN: &str = "devrig-operator-token-0123456789";

/// `-rest.operator.token.file` with `token` in a new owner-only file under `dir`.
pub fn operator_token_flag(dir: &Path, token: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("operator.token");
    std::fs::write(&path, format!("{token}\n")).expect("token file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    format!("-rest.operator.token.file={}", path.display())
}

/// An operator command: `POST path` over https to the scheduler at `base` (its `http://`
/// address; the same port serves TLS), pinning the certificate its log in `dir` names, with
/// `token`. The status and the JSON answer.
pub fn operator(base: &str, dir: &Path, token: &str, path: &str) -> (u16, Value) {
    let pin = super::cluster::logged_fingerprint(&dir.join("scheduler.log"))
        .expect("the scheduler logged no certificate yet");
    let url = format!("{}{path}", base.replacen("http://", "https://", 1));
    let resp = super::cluster::pinned_agent(pin)
        .post(&url)
        .header("Authorization", &format!("Bearer {token}"))
        .send_empty()
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.into_body().read_to_string().unwrap_or_default();
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, value)
}

/// An empty directory of this run under the temp dir (what a previous run left is removed).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// Host stand-ins reporting to the control API, their executors polling the plan every
/// `plan_wait_secs` (`STORAGE_EXECUTOR_PLAN_WAIT`) so that a test sees a cycle quickly.
pub fn standins_with_plan_wait(control_url: String, plan_wait_secs: u64) -> HostStandins {
    let mut standins = super::cluster::host_standins(Some(control_url));
    let wait = (
        "STORAGE_EXECUTOR_PLAN_WAIT".into(),
        plan_wait_secs.to_string(),
    );
    standins.extra_env.push(wait);
    standins
}

/// The master's settings the e2e tests share: `agents` agents on host stand-ins, a
/// heartbeat a second, its work under `dir/mesos`. A test adds its own with `..`.
pub fn master_config(agents: usize, dir: &Path, standins: HostStandins) -> MasterConfig {
    MasterConfig {
        agents,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(standins),
        ..Default::default()
    }
}

pub fn start_master(config: MasterConfig) -> Arc<MasterHandle> {
    Arc::new(master::start(config).unwrap_or_else(|e| panic!("dev cluster: {e}")))
}

/// The test's own dev gateway (the test reads and changes it); with no system until the
/// executors build the MDM cluster unless `preconfigured`.
pub fn start_gateway(password: &str, preconfigured: bool) -> Arc<GatewayHandle> {
    let mut config = GatewayConfig::new(password, super::cluster::dev_mdms());
    if !preconfigured {
        config.preconfigured = None;
    }
    Arc::new(gateway::start(config).unwrap_or_else(|e| panic!("dev gateway: {e}")))
}

pub fn serve_control(
    listener: ControlListener,
    master: &Arc<MasterHandle>,
    gateway: Arc<GatewayHandle>,
) -> ControlHandle {
    listener
        .serve(control::Targets {
            master: master.clone(),
            gateway: Some(gateway),
        })
        .expect("control API")
}

/// [`scheduler_args`] of a pre-configured deployment, against `gateway` instead of the
/// shared one.
pub fn preconfig_args(
    master: &MasterHandle,
    port: u16,
    dir: &Path,
    password: &str,
    gateway: &str,
) -> Vec<String> {
    let mut args = scheduler_args(
        &master.addr().to_string(),
        port,
        &dir.join("state.json"),
        password,
    );
    args.retain(|a| !a.starts_with("-storage.preconfig.gateway="));
    args.push(format!("-storage.preconfig.gateway={gateway}"));
    args
}

/// `dir/scheduler.log`, new.
pub fn new_log(dir: &Path) -> std::fs::File {
    std::fs::File::create(dir.join("scheduler.log")).expect("log")
}

/// The scheduler with `args`, its log (stderr) into `log`.
pub fn spawn_scheduler(args: Vec<String>, log: std::fs::File) -> KillOnDrop {
    let child = Command::new(scheduler_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start storage-scheduler");
    KillOnDrop(child)
}

/// `package_flags` with every storage package moved from version `old` to `new`: the new
/// files written as stand-ins under `dir` and their digests given instead of the old ones.
pub fn storage_packages_at(
    package_flags: &[String],
    dir: &Path,
    old: &str,
    new: &str,
) -> Vec<String> {
    let mut flags = Vec::new();
    for flag in package_flags {
        let is_storage = flag.starts_with("-storage.");
        if is_storage && flag.contains(".sha256=") {
            continue;
        }
        if !is_storage {
            flags.push(flag.clone());
            continue;
        }
        let (name, url) = flag.split_once('=').expect("flag=value");
        let new_url = url.replace(old, new);
        let file = new_url.rsplit('/').next().expect("file name").to_string();
        let path = dir.join(&file);
        std::fs::write(&path, format!("stand-in package {file}\n")).expect("package");
        flags.push(format!("{name}={new_url}"));
        flags.push(format!(
            "{name}.sha256={}",
            super::cluster::sha256_of(&path)
        ));
    }
    flags
}

/// `dir/scheduler.log`, appended to (a restarted scheduler's lines follow the first's).
pub fn append_log(dir: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("scheduler.log"))
        .expect("log")
}

/// The body of a 200 answer; else what came instead.
pub fn get(base: &str, path: &str) -> Result<String, String> {
    let resp = ureq::get(&format!("{base}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp.into_body().read_to_string().unwrap_or_default();
    (status == 200)
        .then_some(())
        .ok_or_else(|| format!("GET {path}: {status} {body}"))?;
    Ok(body)
}

pub fn json(base: &str, path: &str) -> Result<Value, String> {
    let body = get(base, path)?;
    serde_json::from_str(&body).map_err(|e| format!("GET {path}: {e}: {body}"))
}

/// The JSON at `url`, once it answers with some.
pub fn get_json(url: &str) -> Option<Value> {
    let body = ureq::get(url)
        .call()
        .ok()?
        .into_body()
        .read_to_string()
        .ok()?;
    serde_json::from_str(&body).ok()
}

/// The scheduler's `/api/state` at `base`, once it answers.
pub fn api_state(base: &str) -> Option<Value> {
    get_json(&format!("{base}/api/state"))
}

/// A control API call (POST, else GET) and its status and answer (JSON, else the text).
pub fn control_call(control: &ControlHandle, post: bool, path: &str) -> (u16, Value) {
    let url = format!("{}{path}", control.url());
    let resp = if post {
        let req = ureq::post(&url).config().http_status_as_error(false);
        req.build().send_empty()
    } else {
        let req = ureq::get(&url).config().http_status_as_error(false);
        req.build().call()
    }
    .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.into_body().read_to_string().unwrap_or_default();
    let v = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, v)
}

/// A control API call (`method` GET, else POST) that must answer 200 with JSON.
pub fn control_json(control: &ControlHandle, method: &str, path: &str) -> Value {
    let url = format!("{}{path}", control.url());
    let resp = match method {
        "GET" => ureq::get(&url)
            .config()
            .http_status_as_error(false)
            .build()
            .call(),
        _ => ureq::post(&url)
            .config()
            .http_status_as_error(false)
            .build()
            .send_empty(),
    }
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.into_body().read_to_string().unwrap_or_default();
    assert_eq!(status, 200, "{method} {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"))
}

/// Polls `f` until it is `Ok`, failing at the deadline with `what` and its last complaint.
/// Returns how long it took.
pub fn until(what: &str, within: Duration, mut f: impl FnMut() -> Result<(), String>) -> Duration {
    let start = Instant::now();
    loop {
        let last = match f() {
            Ok(()) => return start.elapsed(),
            Err(e) => e,
        };
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?}: {last}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Hostname -> task id of every node, once all `agents` of them run. A scheduler that
/// exited (a flag it does not know) fails at once, with its log (`dir/scheduler.log`).
pub fn running_tasks(
    scheduler: &mut KillOnDrop,
    dir: &Path,
    base: &str,
    agents: usize,
) -> BTreeMap<String, String> {
    let mut tasks = BTreeMap::new();
    until("every node running", Duration::from_secs(180), || {
        if let Ok(Some(status)) = scheduler.0.try_wait() {
            let log = std::fs::read_to_string(dir.join("scheduler.log"));
            panic!(
                "the scheduler exited ({status}):\n{}",
                log.unwrap_or_default()
            );
        }
        let s = json(base, "/api/state")?;
        let nodes = s["model"]["nodes"].as_object().ok_or("no nodes")?;
        tasks = nodes
            .values()
            .filter(|n| n["phase"] == "running")
            .filter_map(|n| {
                let task = n["task"]["task_id"].as_str()?;
                Some((n["hostname"].as_str()?.to_string(), task.to_string()))
            })
            .collect();
        (tasks.len() == agents)
            .then_some(())
            .ok_or_else(|| format!("{} of {agents} running", tasks.len()))
    });
    tasks
}

/// Removes the rig's directory after a passing test; keeps it, and says where, after a
/// failing one.
pub fn keep_dir_if_failed(dir: &Path) {
    if std::thread::panicking() {
        eprintln!("scheduler log and sandboxes kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A pre-configured deployment on the dev cluster: `agents` agents on host stand-ins whose
/// executors poll the plan every `plan_wait_secs`, the test's own dev gateway (the test
/// reads and changes it) behind the control API, staged packages, and the scheduler with
/// the test's `flags` on top of [`preconfig_args`].
pub struct PreconfigRig {
    /// First: the scheduler ends before the cluster it runs on.
    pub scheduler: KillOnDrop,
    pub control: ControlHandle,
    pub master: Arc<MasterHandle>,
    pub packages: Arc<tiny_http::Server>,
    pub base: String,
    pub dir: PathBuf,
}

impl PreconfigRig {
    /// `name` names the run's directory under the temp dir.
    pub fn launch(
        name: &str,
        agents: usize,
        password: &str,
        plan_wait_secs: u64,
        flags: Vec<String>,
    ) -> PreconfigRig {
        let dir = fresh_dir(&format!("{name}-{}", std::process::id()));
        let listener = control::bind(0).expect("control API");
        let standins = standins_with_plan_wait(listener.url(), plan_wait_secs);
        let master = start_master(master_config(agents, &dir, standins));
        let gateway = start_gateway(password, true);
        let gateway_addr = gateway.addr().to_string();
        let control = serve_control(listener, &master, gateway);
        let port = super::cluster::free_port();
        let mut args = preconfig_args(&master, port, &dir, password, &gateway_addr);
        args.push(operator_token_flag(&dir, OPERATOR_TOKEN));
        args.extend(flags);
        let (package_flags, packages) = super::cluster::stage_packages(&dir.join("packages"));
        args.extend(package_flags);
        PreconfigRig {
            scheduler: spawn_scheduler(args, new_log(&dir)),
            control,
            master,
            packages,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }
}

impl Drop for PreconfigRig {
    fn drop(&mut self) {
        keep_dir_if_failed(&self.dir);
    }
}
