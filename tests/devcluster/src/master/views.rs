//! The master's JSON views, `/master/state` and the test snapshot, serialized straight from
//! the cluster state into bytes. With 10,000 agents a `serde_json::Value` tree kept the owner
//! thread busy for hundreds of milliseconds per request (building, then dropping, millions of
//! small allocations); writing the same document from borrowed structs takes a fraction of it.

use super::resources::Res;
use super::state::*;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use storage_framework::mesos::types::*;

/// Attributes as an object of name to value (see `attributes_json`).
struct AttributesJson<'a>(&'a [Attribute]);

impl Serialize for AttributesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for a in self.0 {
            match a.r#type {
                value::Type::Scalar => {
                    if let Some(x) = &a.scalar {
                        m.serialize_entry(a.name.as_str(), &x.value)?;
                    }
                }
                value::Type::Text => {
                    if let Some(t) = &a.text {
                        m.serialize_entry(a.name.as_str(), t.value.as_str())?;
                    }
                }
                // Rare shapes: the one formatting there is.
                _ => {
                    if let Some(v) = attributes_json(std::slice::from_ref(a)).get(a.name.as_str()) {
                        m.serialize_entry(a.name.as_str(), v)?;
                    }
                }
            }
        }
        m.end()
    }
}

// ---- the test snapshot ----

#[derive(Serialize)]
struct Snapshot<'a> {
    leader: String,
    master_id: &'a str,
    frameworks: Vec<SnapFramework<'a>>,
    completed_frameworks: Vec<&'a str>,
    offers: usize,
    agents: Vec<SnapAgent<'a>>,
    synthetic_fetches: u64,
    synthetic_fetched_bytes: u64,
}

#[derive(Serialize)]
struct SnapFramework<'a> {
    id: &'a str,
    name: &'a str,
    connected: bool,
    active: bool,
    suppressed: bool,
    partition_aware: bool,
    stream_id: Option<&'a str>,
    filters: usize,
    tasks: Vec<SnapTask<'a>>,
    completed_tasks: Vec<SnapTaskState<'a>>,
    offers: Vec<SnapOffer<'a>>,
}

#[derive(Serialize)]
struct SnapTask<'a> {
    id: &'a str,
    state: TaskState,
    agent_id: &'a str,
    agent: usize,
    executor_id: Option<&'a str>,
}

#[derive(Serialize)]
struct SnapTaskState<'a> {
    id: &'a str,
    state: TaskState,
}

#[derive(Serialize)]
struct SnapOffer<'a> {
    id: &'a str,
    agent_id: &'a str,
    hostname: &'a str,
    resources: &'a Res,
}

#[derive(Serialize)]
struct SnapAgent<'a> {
    index: usize,
    id: &'a str,
    hostname: &'a str,
    ip: String,
    endpoint: String,
    up: bool,
    unreachable: bool,
    synthetic: bool,
    attributes: &'a std::collections::BTreeMap<String, String>,
    free: &'a Res,
    executors: Vec<SnapExecutor<'a>>,
    pending_updates: usize,
}

#[derive(Serialize)]
struct SnapExecutor<'a> {
    id: &'a str,
    framework_id: &'a str,
    state: &'static str,
    pid: Option<u32>,
    subscribed: bool,
    directory: &'a Path,
    container_id: &'a str,
    queued_tasks: Vec<&'a str>,
    tasks: Vec<SnapTaskState<'a>>,
}

// ---- /master/state ----

#[derive(Serialize)]
struct MasterState<'a> {
    version: &'a str,
    git_sha: &'static str,
    git_tag: &'a str,
    build_date: &'static str,
    build_time: f64,
    build_user: &'static str,
    start_time: f64,
    elected_time: f64,
    id: &'a str,
    pid: String,
    hostname: String,
    activated_slaves: usize,
    deactivated_slaves: usize,
    unreachable_slaves: usize,
    leader: String,
    leader_info: LeaderInfo<'a>,
    flags: &'a Value,
    slaves: Vec<Slave<'a>>,
    recovered_slaves: [u8; 0],
    frameworks: Vec<StateFramework<'a>>,
    completed_frameworks: Vec<StateCompleted<'a>>,
    orphan_tasks: [u8; 0],
    unregistered_frameworks: [u8; 0],
}

#[derive(Serialize)]
struct LeaderInfo<'a> {
    id: &'a str,
    pid: String,
    port: u16,
    hostname: String,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct Slave<'a> {
    id: &'a str,
    hostname: &'a str,
    port: u16,
    attributes: AttributesJson<'a>,
    pid: String,
    registered_time: f64,
    resources: &'a Res,
    used_resources: Res,
    offered_resources: Res,
    reserved_resources: Empty,
    unreserved_resources: &'a Res,
    active: bool,
    version: &'a str,
    capabilities: [&'static str; 3],
}

#[derive(Serialize)]
struct StateTask<'a> {
    id: &'a str,
    name: &'a str,
    framework_id: &'a str,
    executor_id: &'a str,
    slave_id: &'a str,
    state: TaskState,
    resources: &'a Res,
    role: &'static str,
    statuses: Vec<StateStatus>,
}

#[derive(Serialize)]
struct StateStatus {
    state: TaskState,
    timestamp: Option<f64>,
}

#[derive(Serialize)]
struct StateExecutor<'a> {
    executor_id: &'a str,
    name: Option<&'a str>,
    framework_id: &'a str,
    /// As the master writes an ExecutorInfo (`src/common/http.cpp`): the command with its
    /// environment, values included, for anyone who may read the endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a storage_framework::mesos::types::CommandInfo>,
    resources: &'a Res,
    slave_id: &'a str,
}

#[derive(Serialize)]
struct StateOffer<'a> {
    id: &'a str,
    framework_id: &'a str,
    slave_id: &'a str,
    resources: &'a Res,
}

#[derive(Serialize)]
struct StateFramework<'a> {
    id: &'a str,
    name: &'a str,
    hostname: &'a str,
    webui_url: &'a str,
    active: bool,
    connected: bool,
    recovered: bool,
    user: &'a str,
    failover_timeout: f64,
    checkpoint: bool,
    role: String,
    registered_time: f64,
    unregistered_time: f64,
    reregistered_time: f64,
    capabilities: Vec<framework_info::capability::Type>,
    used_resources: Res,
    offered_resources: Res,
    resources: Res,
    tasks: Vec<StateTask<'a>>,
    unreachable_tasks: Vec<StateTask<'a>>,
    completed_tasks: Vec<StateTask<'a>>,
    offers: Vec<StateOffer<'a>>,
    executors: Vec<StateExecutor<'a>>,
}

#[derive(Serialize)]
struct StateCompleted<'a> {
    id: &'a str,
    name: &'a str,
    user: &'a str,
    active: bool,
    connected: bool,
    unregistered_time: f64,
    tasks: [u8; 0],
    completed_tasks: Vec<StateTask<'a>>,
}

impl Cluster {
    /// Frameworks (connection, tasks and their states, outstanding offers), agents (executors,
    /// processes, pending updates), as JSON bytes.
    pub(super) fn snapshot_bytes(&self) -> Result<Vec<u8>, String> {
        let free = self.free_all();
        let frameworks = self
            .frameworks
            .values()
            .map(|f| SnapFramework {
                id: &f.id,
                name: f.info.name.as_str(),
                connected: f.conn.is_some(),
                active: f.active,
                suppressed: f.suppressed,
                partition_aware: f.partition_aware(),
                stream_id: f.conn.as_ref().map(|c| c.stream_id.as_str()),
                filters: f.filters.len(),
                tasks: f
                    .tasks
                    .values()
                    .map(|t| SnapTask {
                        id: t.info.task_id.value.as_str(),
                        state: t.state,
                        agent_id: &self.agents[t.agent].id,
                        agent: t.agent,
                        executor_id: t.executor_id.as_deref(),
                    })
                    .collect(),
                completed_tasks: f
                    .completed_tasks
                    .iter()
                    .map(|t| SnapTaskState {
                        id: t.info.task_id.value.as_str(),
                        state: t.state,
                    })
                    .collect(),
                offers: self
                    .offers
                    .iter()
                    .filter(|(_, o)| o.framework == f.id)
                    .map(|(id, o)| SnapOffer {
                        id,
                        agent_id: &self.agents[o.agent].id,
                        hostname: &self.agents[o.agent].hostname,
                        resources: &o.res,
                    })
                    .collect(),
            })
            .collect();
        let agents = self
            .agents
            .iter()
            .zip(&free)
            .enumerate()
            .map(|(i, (a, free))| SnapAgent {
                index: i,
                id: &a.id,
                hostname: &a.hostname,
                ip: a.ip.to_string(),
                endpoint: a.endpoint().to_string(),
                up: a.up,
                unreachable: a.unreachable,
                synthetic: a.synthetic,
                attributes: &a.attributes_text,
                free,
                executors: a
                    .frameworks
                    .iter()
                    .flat_map(|(fid, af)| {
                        af.executors.iter().map(move |(eid, e)| SnapExecutor {
                            id: eid,
                            framework_id: fid,
                            state: e.state.name(),
                            pid: e.pid,
                            // An emulated executor is subscribed for as long as it runs.
                            subscribed: e.conn.is_some()
                                || (a.synthetic && e.state == ExecState::Running),
                            directory: &e.directory,
                            container_id: &e.container_id,
                            queued_tasks: e
                                .queued
                                .iter()
                                .map(|t| t.task_id.value.as_str())
                                .collect(),
                            tasks: e
                                .launched
                                .iter()
                                .map(|(t, s)| SnapTaskState { id: t, state: *s })
                                .collect(),
                        })
                    })
                    .collect(),
                pending_updates: a.streams.values().map(|s| s.pending.len()).sum(),
            })
            .collect();
        let snapshot = Snapshot {
            leader: self.masters[self.leader].addr.to_string(),
            master_id: self.master_id(),
            frameworks,
            completed_frameworks: self.completed.iter().map(|c| c.id.as_str()).collect(),
            offers: self.offers.len(),
            agents,
            synthetic_fetches: self.synthetic_fetches,
            synthetic_fetched_bytes: self.synthetic_fetched_bytes,
        };
        serde_json::to_vec(&snapshot).map_err(|e| format!("cannot serialize the snapshot: {e}"))
    }

    fn state_task<'a>(&'a self, fw_id: &'a str, t: &'a Task) -> StateTask<'a> {
        StateTask {
            id: t.info.task_id.value.as_str(),
            name: t.info.name.as_str(),
            framework_id: fw_id,
            executor_id: t
                .info
                .executor
                .as_ref()
                .map(|e| e.executor_id.value.as_str())
                .unwrap_or(""),
            slave_id: t
                .replaced_agent
                .as_deref()
                .unwrap_or(&self.agents[t.agent].id),
            state: t.state,
            resources: &t.resources,
            role: "*",
            statuses: t
                .statuses
                .iter()
                .map(|s| StateStatus {
                    state: s.state,
                    timestamp: s.timestamp,
                })
                .collect(),
        }
    }

    fn state_framework<'a>(&'a self, f: &'a Framework) -> StateFramework<'a> {
        let mut used = Res::default();
        for t in f.tasks.values().filter(|t| !t.state.is_terminal()) {
            used.add(&t.resources);
        }
        let mut offered = Res::default();
        for o in self.offers.values().filter(|o| o.framework == f.id) {
            offered.add(&o.res);
        }
        let mut total = used.clone();
        total.add(&offered);
        let executors = self
            .agents
            .iter()
            .flat_map(|a| {
                a.frameworks
                    .get(&f.id)
                    .into_iter()
                    .flat_map(|af| af.executors.values())
                    .filter(|e| e.command_task.is_none() && e.state != ExecState::Terminated)
                    .map(move |e| StateExecutor {
                        executor_id: e.info.executor_id.value.as_str(),
                        name: e.info.name.as_deref(),
                        framework_id: &f.id,
                        command: e.info.command.as_ref(),
                        resources: &e.resources,
                        slave_id: &a.id,
                    })
            })
            .collect();
        let tasks = |unreachable: bool| {
            let replaced = f.unreachable_tasks.values().filter(move |_| unreachable);
            f.tasks
                .values()
                .filter(|t| (t.state == TaskState::Unreachable) == unreachable)
                .chain(replaced)
                .map(|t| self.state_task(&f.id, t))
                .collect()
        };
        StateFramework {
            id: &f.id,
            name: f.info.name.as_str(),
            hostname: f.info.hostname.as_deref().unwrap_or(""),
            webui_url: f.info.webui_url.as_deref().unwrap_or(""),
            active: f.active,
            connected: f.conn.is_some(),
            recovered: false,
            user: f.info.user.as_str(),
            failover_timeout: f.info.failover_timeout.unwrap_or(0.0),
            checkpoint: f.info.checkpoint.unwrap_or(false),
            role: f.role(),
            registered_time: f.registered_time,
            unregistered_time: f.unregistered_time,
            reregistered_time: f.reregistered_time,
            capabilities: f
                .info
                .capabilities
                .iter()
                .filter_map(|c| c.r#type)
                .collect(),
            used_resources: used,
            offered_resources: offered,
            resources: total,
            tasks: tasks(false),
            unreachable_tasks: tasks(true),
            completed_tasks: f
                .completed_tasks
                .iter()
                .map(|t| self.state_task(&f.id, t))
                .collect(),
            offers: self
                .offers
                .iter()
                .filter(|(_, o)| o.framework == f.id)
                .map(|(id, o)| StateOffer {
                    id,
                    framework_id: &f.id,
                    slave_id: &self.agents[o.agent].id,
                    resources: &o.res,
                })
                .collect(),
            executors,
        }
    }

    /// The agents as `/master/state` and `/master/slaves` list them.
    fn slaves(&self) -> Vec<Slave<'_>> {
        let free = self.free_all();
        let mut offered_on = vec![Res::default(); self.agents.len()];
        for o in self.offers.values() {
            if let Some(r) = offered_on.get_mut(o.agent) {
                r.add(&o.res);
            }
        }
        self.agents
            .iter()
            .zip(free.iter().zip(offered_on))
            .filter(|(a, _)| !a.unreachable && !a.removed)
            .map(|(a, (free, offered))| {
                let mut used = a.total.clone();
                used.subtract(free);
                used.subtract(&offered);
                Slave {
                    id: &a.id,
                    hostname: &a.hostname,
                    port: a.port,
                    attributes: AttributesJson(&a.attributes),
                    pid: a.pid(),
                    registered_time: a.registered_time,
                    resources: &a.total,
                    used_resources: used,
                    offered_resources: offered,
                    reserved_resources: Empty {},
                    unreserved_resources: &a.total,
                    active: a.up,
                    version: &self.cfg.version,
                    capabilities: ["MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT"],
                }
            })
            .collect()
    }

    /// `GET /master/slaves`: the agents alone, far smaller and cheaper than the state.
    pub(super) fn master_slaves_bytes(&self) -> Result<Vec<u8>, String> {
        let body = serde_json::json!({
            "slaves": self.slaves(),
            "recovered_slaves": [],
        });
        serde_json::to_vec(&body).map_err(|e| format!("cannot serialize the agents: {e}"))
    }

    /// The body of `GET /master/state`.
    pub(super) fn master_state_bytes(&self) -> Result<Vec<u8>, String> {
        let leader = &self.masters[self.leader];
        let slaves = self.slaves();
        let completed = self
            .completed
            .iter()
            .map(|c| StateCompleted {
                id: &c.id,
                name: c.info.name.as_str(),
                user: c.info.user.as_str(),
                active: false,
                connected: false,
                unregistered_time: c.unregistered_time,
                tasks: [],
                completed_tasks: c.tasks.iter().map(|t| self.state_task(&c.id, t)).collect(),
            })
            .collect();
        let flags = super::flags_json(&self.cfg, leader.addr);
        let ip = leader.addr.ip().to_string();
        let state = MasterState {
            version: &self.cfg.version,
            git_sha: super::GIT_SHA,
            git_tag: &self.cfg.version,
            build_date: super::BUILD_DATE,
            build_time: super::BUILD_TIME,
            build_user: "devcluster",
            start_time: self.start_time,
            elected_time: self.start_time,
            id: &leader.id,
            pid: format!("master@{}", leader.addr),
            hostname: ip.clone(),
            activated_slaves: self.agents.iter().filter(|a| a.up).count(),
            deactivated_slaves: self
                .agents
                .iter()
                .filter(|a| !a.up && !a.unreachable && !a.removed)
                .count(),
            unreachable_slaves: self.agents.iter().filter(|a| a.unreachable).count()
                + self.unreachable_agents.len(),
            leader: format!("master@{}", leader.addr),
            leader_info: LeaderInfo {
                id: &leader.id,
                pid: format!("master@{}", leader.addr),
                port: leader.addr.port(),
                hostname: ip,
            },
            flags: &flags["flags"],
            slaves,
            recovered_slaves: [],
            frameworks: self
                .frameworks
                .values()
                .map(|f| self.state_framework(f))
                .collect(),
            completed_frameworks: completed,
            orphan_tasks: [],
            unregistered_frameworks: [],
        };
        serde_json::to_vec(&state).map_err(|e| format!("cannot serialize the master state: {e}"))
    }
}
