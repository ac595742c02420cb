//! A simulated Mesos 1.4 master with N agents on loopback, strict about the v1 scheduler and
//! executor APIs: what a framework gets away with here it should get away with on a real
//! cluster.
//!
//! - Master: `POST /api/v1/scheduler` (protobuf and JSON; RecordIO event stream with
//!   `Mesos-Stream-Id`), `GET /version`, `GET /master/state`, `GET /flags`,
//!   `GET /master/redirect`; a second, standby master answers 307 until [`MasterHandle::fail_over`].
//! - Maintenance: `/master/maintenance/schedule` and `/status`, `/master/machine/down` and
//!   `/up`, inverse offers to the frameworks on draining agents (`maintenance.rs`).
//! - Agents: `agent-<n>` on 127.0.0.(n+1) when loopback aliases work (else 127.0.0.1), each
//!   with its own `POST /api/v1/executor`. Offers come from free resources; a LAUNCH fetches
//!   the executor's URIs into a sandbox and runs the command as a real child process with the
//!   `MESOS_*` environment a real agent gives.
//! - Synthetic agents: `synthetic-<n>`, any number of them (10,000 is the design load), with
//!   no HTTP server and no processes: their executors are emulated inside the owner thread
//!   (`synthetic.rs`) and answer launches, kills and shutdowns through the same status update
//!   path, so that a scheduler can be tried against a large cluster on one machine.
//! - Status updates are ordered per task and retried until acknowledged; executor exits,
//!   registration timeouts and agent loss turn into the updates and FAILURE events Mesos
//!   sends.
//!
//! Design: one owner thread holds all state (`state.rs`, `agent.rs`, `synthetic.rs`; its
//! JSON views are `views.rs`) and is fed by a crossbeam channel; HTTP connection threads
//! (`http.rs`, `endpoints.rs`) decode and validate requests, hand them over and wait for the
//! reply; every event stream is written by its own connection thread from a channel;
//! executor processes are fetched, spawned and reaped on their own threads (`process.rs`).
//! Timers are a heap bounding the owner's channel wait. The owner's work per allocation,
//! request and update does not grow with agents times frameworks, so that 10,000 synthetic
//! agents stay responsive.

mod agent;
mod bound_tcp;
mod endpoints;
mod faults;
mod http;
mod ids;
mod launches;
mod maintenance;
mod new_id;
mod operations;
mod partition;
mod process;
mod rescind;
mod resources;
mod state;
mod synthetic;
mod synthetic_fetch;
mod synthetic_phases;
mod synthetic_plans;
pub use synthetic::synthetic_host_ip;
pub use synthetic_plans::SeenPlan;
mod tap;
mod views;

use serde_json::{json, Value};
use state::{Cluster, Cmd, Control};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub use agent::parse_attribute;
pub use launches::{max_concurrent_executors, LaunchEvent, LaunchRecord};

/// The 1.4.0 release commit, reported by `/version` and `/master/state`.
const GIT_SHA: &str = "b3fd2e7ab26e118222fe18af4b92c53a3c01e6cc";
const BUILD_DATE: &str = "2017-09-01 19:25:33";
const BUILD_TIME: f64 = 1504293933.0;

/// Missed pings after which the master marks an agent unreachable (Mesos's default).
const MAX_AGENT_PING_TIMEOUTS: u32 = 5;

impl MasterConfig {
    /// The outage of a host reboot: [`reboot_outage`](Self::reboot_outage), by default one
    /// agent ping timeout longer than the agent removal timeout.
    pub fn reboot_outage(&self) -> Duration {
        self.reboot_outage.unwrap_or(
            self.agent_removal_timeout + self.agent_removal_timeout / MAX_AGENT_PING_TIMEOUTS,
        )
    }
}

/// Resources every agent has.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentResources {
    pub cpus: f64,
    pub mem: f64,
    pub disk: f64,
    /// Inclusive port range.
    pub ports: (u64, u64),
    /// cpus and mem statically reserved for a role besides the above (the agent's
    /// `--resources="cpus(<role>):..;mem(<role>):.."`): offered only to that role's
    /// frameworks, usable only by resources that name the role.
    pub reserved: Option<Reservation>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub role: String,
    pub cpus: f64,
    pub mem: f64,
}

impl Default for AgentResources {
    fn default() -> Self {
        AgentResources {
            cpus: 4.0,
            mem: 8192.0,
            disk: 65536.0,
            ports: (31000, 32000),
            reserved: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct MasterConfig {
    pub agents: usize,
    /// Agents `synthetic-<n>` after the real ones (indices `agents..agents + synthetic_agents`)
    /// whose executors are emulated: no HTTP server, no sandbox, no process.
    pub synthetic_agents: usize,
    /// When above 0, synthetic agents fetch their executors' CommandInfo URIs over HTTP
    /// (counted, not stored; the snapshot's `synthetic_fetches`/`synthetic_fetched_bytes`)
    /// before the executor starts, this many downloads at a time; 0: they fetch nothing.
    pub synthetic_fetchers: usize,
    /// When set, emulated storage executors report node phases to `running` through the
    /// scheduler's executor API, this many reports a second in all (`synthetic_phases.rs`).
    pub synthetic_phase_reports: Option<f64>,
    /// With `synthetic_phase_reports` (without `synthetic_plan_waits`): once its node runs,
    /// each emulated executor goes on reporting its host's health in its turn, a problem
    /// found then cleared, so that the scheduler's state keeps changing at the reporter's
    /// rate for as long as the cluster lives (the REST benches' changing state).
    pub synthetic_health_reports: bool,
    /// With `synthetic_phase_reports`: each emulated executor calls the scheduler as the
    /// storage executor does, from its agent's address over a connection of its own: its
    /// phase reports, then its idle plan requests (`nudge=1`) once its node runs; it follows
    /// the scheduler's nudges and announcements (`synthetic_plans.rs`). One thread per
    /// executor.
    pub synthetic_plan_waits: bool,
    /// Each synthetic agent is a storage host of its own: it has its own address
    /// ([`synthetic_host_ip`], also its executor's source address) and its emulated executor
    /// reports one device, `/dev/sdb`, as it enters the devices phase, so that the scheduler
    /// attaches an SDS and a device per node. The caller registers each host's SDC with the
    /// gateway. Without it the synthetic agents share 127.0.0.1 and report no device, and
    /// the gateway holds one SDS for all of them.
    pub synthetic_storage: bool,
    pub agent_resources: AgentResources,
    /// Agent attributes by `agent-<n>` hostname or by `<n>` (the same number, 1-based), or by
    /// `synthetic-<n>` for synthetic agents, each a map of name to value in `--attributes` text
    /// form (`2` is a scalar, `d1,d2` text).
    pub attributes: BTreeMap<String, BTreeMap<String, String>>,
    /// A JSON file of the same shape as `attributes`, merged under it (values may be
    /// strings or numbers).
    pub attributes_file: Option<PathBuf>,
    pub heartbeat_interval: Duration,
    /// Agents' sandboxes live under `<work_dir>/agent-<n>/slaves/...`.
    pub work_dir: PathBuf,
    pub version: String,
    /// How long recovered resources wait before they are offered again (`--allocation_interval`).
    pub allocation_interval: Duration,
    /// First retry interval of unacknowledged status updates (doubles up to 10 minutes).
    pub status_update_retry: Duration,
    pub executor_registration_timeout: Duration,
    pub executor_shutdown_grace_period: Duration,
    /// How long a stopped agent stays disconnected before its tasks are reported unreachable
    /// (`agent_ping_timeout` x `max_agent_ping_timeouts`; `/flags` reports a fifth of it as
    /// `agent_ping_timeout`).
    pub agent_removal_timeout: Duration,
    /// How long a rebooting host is away before its agent registers under a new id; `None`:
    /// one ping timeout past `agent_removal_timeout`, so that the master has marked the old
    /// agent unreachable by then, as it has after a real reboot.
    pub reboot_outage: Option<Duration>,
    pub recovery_timeout: Duration,
    pub executor_reregistration_timeout: Duration,
    /// Reported as the `zk` flag.
    pub zk: Option<String>,
    /// Give each agent its own loopback address when the system allows it.
    pub distinct_agent_ips: bool,
    /// Keep a work dir that `start` created after shutdown. Either way it is kept when the
    /// handle is dropped during a panic, so that a failing test leaves its sandboxes.
    pub keep_work_dir: bool,
    /// Host stand-ins: each agent gets a fake root and stand-in commands under
    /// `<work_dir>/agent-<n>/host/`, and its executors the environment that points them there
    /// (see [`crate::host`]).
    pub host_standins: Option<crate::host::HostStandins>,
    /// Write every accepted scheduler and executor Call body into this directory (see
    /// `master/tap.rs`), for conformance checks of what a framework really sent.
    pub wire_tap: Option<PathBuf>,
    /// `--authenticate_http_readonly`: the read-only endpoints (`/master/state`, `/slaves`,
    /// `/frameworks`, `/flags`) answer 401 to a request without credentials.
    pub readonly_auth: bool,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            agents: 3,
            synthetic_agents: 0,
            synthetic_fetchers: 0,
            synthetic_phase_reports: None,
            synthetic_health_reports: false,
            synthetic_plan_waits: false,
            synthetic_storage: false,
            agent_resources: AgentResources::default(),
            attributes: BTreeMap::new(),
            attributes_file: None,
            heartbeat_interval: Duration::from_secs(15),
            work_dir: std::env::temp_dir().join(format!(
                "devcluster-{}-{:08x}",
                std::process::id(),
                ids::random_u64() as u32
            )),
            version: "1.4.0".into(),
            allocation_interval: Duration::from_secs(1),
            status_update_retry: Duration::from_secs(10),
            executor_registration_timeout: Duration::from_secs(60),
            executor_shutdown_grace_period: Duration::from_secs(5),
            agent_removal_timeout: Duration::from_secs(75),
            reboot_outage: None,
            recovery_timeout: Duration::from_secs(15 * 60),
            executor_reregistration_timeout: Duration::from_secs(2),
            zk: None,
            distinct_agent_ips: true,
            keep_work_dir: false,
            host_standins: None,
            wire_tap: None,
            readonly_auth: false,
        }
    }
}

/// Where an agent can be reached.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEndpoint {
    /// 0-based; the hostname is `agent-<index + 1>`, or `synthetic-<index + 1 - agents>`.
    pub index: usize,
    pub id: String,
    pub hostname: String,
    pub ip: Ipv4Addr,
    /// The agent's HTTP server (`MESOS_AGENT_ENDPOINT`); port 0 for a synthetic agent, which
    /// has none.
    pub endpoint: SocketAddr,
    /// Registered and reachable: false while its host is down and while it is cut off from
    /// the master.
    pub up: bool,
    /// Cut off from the master while its host runs on.
    pub partitioned: bool,
    pub attributes: BTreeMap<String, String>,
    pub synthetic: bool,
}

/// A running cluster; dropping it shuts everything down, child processes included.
pub struct MasterHandle {
    tx: crossbeam_channel::Sender<Cmd>,
    addrs: [SocketAddr; 2],
    servers: Vec<http::Server>,
    owner: Option<JoinHandle<()>>,
    work_dir: PathBuf,
    /// Set when `start` created the work dir and may remove it.
    remove_work_dir: bool,
}

/// Reads an attributes file: `{"agent-1": {"storage-persona": "primary"}, "2": {...}}`.
pub fn load_attributes(path: &Path) -> Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read attributes file {}: {e}", path.display()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("attributes file {} is not JSON: {e}", path.display()))?;
    let Value::Object(agents) = value else {
        return Err(format!(
            "attributes file {}: expected an object of agent -> attributes",
            path.display()
        ));
    };
    let mut out = BTreeMap::new();
    for (agent, attrs) in agents {
        let Value::Object(attrs) = attrs else {
            return Err(format!(
                "attributes file {}: attributes of {agent:?} must be an object",
                path.display()
            ));
        };
        let mut m = BTreeMap::new();
        for (name, v) in attrs {
            let text = match v {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(format!(
                    "attributes file {}: {agent}.{name} must be a string or a number, not {other}",
                    path.display()
                ))
                }
            };
            m.insert(name, text);
        }
        out.insert(agent, m);
    }
    Ok(out)
}

/// Attributes by agent index: real agents first (keys `agent-<n>` or `<n>`), then synthetic
/// ones (keys `synthetic-<n>`).
fn attributes_for(
    all: &BTreeMap<String, BTreeMap<String, String>>,
    agents: usize,
    synthetic: usize,
) -> Result<Vec<BTreeMap<String, String>>, String> {
    let mut out = vec![BTreeMap::new(); agents + synthetic];
    for (key, attrs) in all {
        let (number, offset, count, prefix) = match key.strip_prefix("synthetic-") {
            Some(n) => (n, agents, synthetic, "synthetic-"),
            None => (
                key.strip_prefix("agent-").unwrap_or(key),
                0,
                agents,
                "agent-",
            ),
        };
        let n: usize = number.parse().map_err(|_| {
            format!("attributes: {key:?} is none of agent-<n>, <n> or synthetic-<n>")
        })?;
        if n == 0 || n > count {
            let have = match count {
                0 => format!("there are no {prefix}<n> agents"),
                _ => format!("there are {prefix}1..{prefix}{count}"),
            };
            return Err(format!("attributes: {key:?} names no agent ({have})"));
        }
        out[offset + n - 1].extend(attrs.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Ok(out)
}

/// The `/flags` body of the master at `addr`.
fn flags_json(cfg: &MasterConfig, addr: SocketAddr) -> Value {
    let mut flags = json!({
        "agent_ping_timeout": process::mesos_duration(cfg.agent_removal_timeout / MAX_AGENT_PING_TIMEOUTS),
        "agent_reregister_timeout": "10mins",
        "allocation_interval": process::mesos_duration(cfg.allocation_interval),
        "allocator": "HierarchicalDRF",
        "authenticate_agents": "false",
        "authenticate_frameworks": "false",
        "authenticate_http_frameworks": "false",
        "authenticate_http_readonly": "false",
        "authenticate_http_readwrite": "false",
        "authenticators": "crammd5",
        "framework_sorter": "drf",
        "help": "false",
        "hostname_lookup": "true",
        "http_authenticators": "basic",
        "initialize_driver_logging": "true",
        "ip": addr.ip().to_string(),
        "hostname": addr.ip().to_string(),
        "log_auto_initialize": "true",
        "logbufsecs": "0",
        "logging_level": "INFO",
        "max_agent_ping_timeouts": MAX_AGENT_PING_TIMEOUTS.to_string(),
        "max_completed_frameworks": "50",
        "max_completed_tasks_per_framework": "1000",
        "port": addr.port().to_string(),
        "quiet": "false",
        "quorum": "1",
        "recovery_agent_removal_limit": "100%",
        "registry": "in_memory",
        "registry_fetch_timeout": "1mins",
        "registry_store_timeout": "20secs",
        "registry_strict": "false",
        "root_submissions": "true",
        "user_sorter": "drf",
        "version": "false",
        "work_dir": cfg.work_dir.join("master").to_string_lossy(),
        "zk_session_timeout": "10secs",
    });
    if let Some(zk) = &cfg.zk {
        flags["zk"] = Value::String(zk.clone());
    }
    json!({ "flags": flags })
}

fn version_json(cfg: &MasterConfig) -> Value {
    json!({
        "version": cfg.version,
        "build_date": BUILD_DATE,
        "build_time": BUILD_TIME,
        "build_user": "devcluster",
        "git_sha": GIT_SHA,
        "git_tag": cfg.version,
    })
}

/// Starts the masters (leader and standby), the agents and the owner thread.
pub fn start(mut config: MasterConfig) -> Result<MasterHandle, String> {
    if config.agents == 0 && config.synthetic_agents == 0 {
        return Err("a cluster needs at least one agent".into());
    }
    if config.heartbeat_interval.is_zero() {
        return Err("heartbeat_interval must be positive".into());
    }
    let mut attributes = match &config.attributes_file {
        Some(p) => load_attributes(p)?,
        None => BTreeMap::new(),
    };
    for (k, v) in std::mem::take(&mut config.attributes) {
        attributes.entry(k).or_default().extend(v);
    }
    let per_agent = attributes_for(&attributes, config.agents, config.synthetic_agents)?;
    config.attributes = attributes;
    let remove_work_dir = !config.keep_work_dir && !config.work_dir.exists();
    std::fs::create_dir_all(&config.work_dir)
        .map_err(|e| format!("cannot create work dir {}: {e}", config.work_dir.display()))?;
    if let Some(h) = &config.host_standins {
        for n in 1..=config.agents {
            let dir = config.work_dir.join(format!("agent-{n}"));
            crate::host::prepare_agent(h, &dir, n)
                .map_err(|e| format!("agent-{n} host stand-ins: {e}"))?;
        }
    }
    let listeners = [
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)),
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)),
    ];
    let mut bound = Vec::new();
    for l in listeners {
        let l = l.map_err(|e| format!("master: cannot listen on 127.0.0.1: {e}"))?;
        let a = l.local_addr().map_err(|e| format!("master: {e}"))?;
        bound.push((l, a));
    }
    let addrs = [bound[0].1, bound[1].1];
    let (tx, rx) = crossbeam_channel::unbounded();
    let leader = Arc::new(AtomicUsize::new(0));
    let mut servers = Vec::new();
    for (index, (listener, addr)) in bound.into_iter().enumerate() {
        let front = endpoints::MasterFront {
            index,
            tx: tx.clone(),
            leader: leader.clone(),
            addrs,
            flags: flags_json(&config, addr),
            version: version_json(&config),
            wire_tap: config.wire_tap.clone(),
            readonly_auth: config.readonly_auth,
        };
        let server = http::Server::from_listener(
            listener,
            &format!("master{index}"),
            endpoints::master_handler(front),
        )
        .map_err(|e| format!("master: {e}"))?;
        servers.push(server);
    }
    let work_dir = config.work_dir.clone();
    let cluster = Cluster::new(config, tx.clone(), leader, addrs, per_agent)?;
    let owner = thread::Builder::new()
        .name("devcluster-owner".into())
        .spawn(move || cluster.run(rx))
        .map_err(|e| format!("cannot start the cluster thread: {e}"))?;
    Ok(MasterHandle {
        tx,
        addrs,
        servers,
        owner: Some(owner),
        work_dir,
        remove_work_dir,
    })
}

impl MasterHandle {
    /// The master that leads at start.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// `http://127.0.0.1:<port>` of [`addr`](Self::addr).
    pub fn url(&self) -> String {
        format!("http://{}", self.addrs[0])
    }

    /// The second master, standing by (307 to the leader) until [`fail_over`](Self::fail_over).
    pub fn standby_addr(&self) -> SocketAddr {
        self.addrs[1]
    }

    pub fn leader_addr(&self) -> Result<SocketAddr, String> {
        endpoints::control(&self.tx, Control::Leader)
    }

    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    pub fn agents(&self) -> Result<Vec<AgentEndpoint>, String> {
        endpoints::control(&self.tx, Control::Agents)
    }

    /// Frameworks (connection, tasks and their states, outstanding offers), agents (executors,
    /// processes, pending updates) as JSON, for tests.
    pub fn snapshot(&self) -> Result<Value, String> {
        let bytes = endpoints::control(&self.tx, Control::Snapshot)??;
        serde_json::from_slice(&bytes).map_err(|e| format!("the snapshot is not JSON: {e}"))
    }

    /// Cuts the subscription stream of one framework (or all), as a network failure would;
    /// the framework is then disconnected and its failover timeout runs. Returns how many
    /// streams were cut.
    pub fn cut_scheduler_stream(&self, framework_id: Option<&str>) -> Result<usize, String> {
        let framework = framework_id.map(str::to_string);
        endpoints::control(&self.tx, |reply| Control::CutStream { framework, reply })?
    }

    /// Makes every open scheduler stream half-open, as a master host that vanished (power
    /// loss, partition) leaves it: the connection stays open and nothing more arrives on it,
    /// not even heartbeats; the master counts the frameworks as disconnected. Only the
    /// scheduler's own watchdog can notice. Returns how many streams were frozen.
    pub fn freeze_scheduler_streams(&self) -> Result<usize, String> {
        endpoints::control(&self.tx, Control::FreezeStreams)?
    }

    /// Takes agent `index` (0-based) down with its host: its executors are killed, its
    /// offers rescinded; after `agent_removal_timeout` its tasks become unreachable/lost.
    pub fn stop_agent(&self, index: usize) -> Result<(), String> {
        endpoints::control(&self.tx, |reply| Control::StopAgent { index, reply })?
    }

    /// Brings a stopped agent back with the same id and address (its host was cut off, not
    /// rebooted); updates it had not got acknowledged are sent again, as a checkpointing
    /// agent recovers them.
    pub fn start_agent(&self, index: usize) -> Result<(), String> {
        endpoints::control(&self.tx, |reply| Control::StartAgent { index, reply })?
    }

    /// Restarts agent `index`'s process on a host that stays up: executors of checkpointing
    /// frameworks live on and reconnect (within `executor_reregistration_timeout`), the
    /// others die. A host reboot is [`reboot_agent`](Self::reboot_agent).
    pub fn restart_agent(&self, index: usize) -> Result<(), String> {
        endpoints::control(&self.tx, |reply| Control::RestartAgent { index, reply })?
    }

    /// Reboots agent `index`'s host as Mesos 1.4 sees a reboot: the agent goes down with
    /// its executors now, and registers under a new id (its checkpointed state is of another
    /// boot) after `outage` (`None`: [`MasterConfig::reboot_outage`]). What becomes of the
    /// old agent's tasks depends on the outage (see `master/new_id.rs`). Returns the new id.
    pub fn reboot_agent(&self, index: usize, outage: Option<Duration>) -> Result<String, String> {
        endpoints::control(&self.tx, |reply| Control::Reboot {
            index,
            outage,
            reply,
        })?
    }

    /// Cuts agent `index` off from the master (a network partition): it and its executors
    /// run on, the master hears nothing; after `agent_removal_timeout` its tasks become
    /// unreachable (see `master/partition.rs`).
    pub fn partition_agent(&self, index: usize) -> Result<(), String> {
        endpoints::control(&self.tx, |reply| Control::Partition { index, reply })?
    }

    /// Ends agent `index`'s partition: it re-registers with its tasks, or (`keep_tasks`
    /// false, once it was marked unreachable) having lost them.
    pub fn heal_agent(&self, index: usize, keep_tasks: bool) -> Result<(), String> {
        endpoints::control(&self.tx, |reply| Control::Heal {
            index,
            keep_tasks,
            reply,
        })?
    }

    /// The next ACCEPT of an offer of agent `index` finds it rescinded just before it lands:
    /// its tasks are answered TASK_DROPPED, REASON_INVALID_OFFERS (see `master/rescind.rs`).
    pub fn rescind_before_next_accept(&self, index: usize) -> Result<(), String> {
        endpoints::control(&self.tx, |reply| Control::RescindBeforeAccept {
            index,
            reply,
        })?
    }

    /// SIGKILLs an executor's process group; the agent reports it as a crash.
    pub fn kill_executor(&self, agent: usize, executor_id: &str) -> Result<(), String> {
        let executor = executor_id.to_string();
        endpoints::control(&self.tx, |reply| Control::KillExecutor {
            agent,
            executor,
            reply,
        })?
    }

    /// Makes the other master the leader: every scheduler stream is cut and the old leader
    /// answers 307 to the new one. Returns the new leader's address.
    pub fn fail_over(&self) -> Result<SocketAddr, String> {
        endpoints::control(&self.tx, Control::FailOver)?
    }

    /// The master's record of every executor start and end and every task given to an
    /// agent, in order, since the cluster started.
    pub fn launch_log(&self) -> Result<Vec<LaunchRecord>, String> {
        endpoints::control(&self.tx, Control::LaunchLog)
    }

    /// What each emulated executor waiting for plan changes holds
    /// (`MasterConfig::synthetic_plan_waits`); empty without them.
    pub fn synthetic_plans(&self) -> Result<Vec<SeenPlan>, String> {
        endpoints::control(&self.tx, Control::SyntheticPlans)
    }

    /// The master refuses (503) the next scheduler call of type `kind` (a Mesos name such
    /// as `ACCEPT` or `REVIVE`) without acting on it.
    pub fn drop_next_call(&self, kind: &str) -> Result<(), String> {
        let kind = kind.to_string();
        endpoints::control(&self.tx, |reply| Control::DropNextCall { kind, reply })?
    }

    /// A failover after which the agents re-register one after another over `window`;
    /// until its agent has, reconciliation about a task gets no answer.
    pub fn fail_over_with_reregistration(&self, window: Duration) -> Result<SocketAddr, String> {
        endpoints::control(&self.tx, |reply| Control::FailOverSlow { window, reply })?
    }

    /// Fails over; the agents in `late` (indices) re-register only after two of the
    /// framework's explicit reconciliations were answered without them, the others at once.
    pub fn fail_over_with_late_agents(&self, late: &[usize]) -> Result<SocketAddr, String> {
        let late = late.to_vec();
        endpoints::control(&self.tx, |reply| Control::FailOverLate { late, reply })?
    }

    /// Stops everything and kills all executor processes.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(owner) = self.owner.take() {
            let _ = endpoints::control(&self.tx, Control::Shutdown);
            let _ = owner.join();
        }
        for s in &mut self.servers {
            s.stop();
        }
        if self.remove_work_dir && !thread::panicking() {
            self.remove_work_dir = false;
            if let Err(e) = std::fs::remove_dir_all(&self.work_dir) {
                log::warn!("cannot remove {}: {e}", self.work_dir.display());
            }
        }
    }
}

impl Drop for MasterHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_keys_name_agents() {
        let mut all = BTreeMap::new();
        all.insert(
            "agent-2".to_string(),
            BTreeMap::from([("a".to_string(), "1".to_string())]),
        );
        all.insert(
            "1".to_string(),
            BTreeMap::from([("b".to_string(), "x".to_string())]),
        );
        all.insert(
            "synthetic-2".to_string(),
            BTreeMap::from([("c".to_string(), "y".to_string())]),
        );
        let per = attributes_for(&all, 2, 2).unwrap();
        assert_eq!(per.len(), 4);
        assert_eq!(per[0]["b"], "x");
        assert_eq!(per[1]["a"], "1");
        assert!(per[2].is_empty());
        assert_eq!(per[3]["c"], "y");
        assert!(attributes_for(&all, 1, 2).unwrap_err().contains("agent-2"));
        let err = attributes_for(&all, 2, 1).unwrap_err();
        assert!(
            err.contains("synthetic-2") && err.contains("synthetic-1"),
            "{err}"
        );
        let err = attributes_for(&all, 2, 0).unwrap_err();
        assert!(err.contains("no synthetic-<n> agents"), "{err}");
        let mut bad = BTreeMap::new();
        bad.insert("x".to_string(), BTreeMap::new());
        assert!(attributes_for(&bad, 1, 0).is_err());
        bad.clear();
        bad.insert("synthetic-x".to_string(), BTreeMap::new());
        assert!(attributes_for(&bad, 1, 1).is_err());
    }
}
