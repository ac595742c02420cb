//! The cluster owner: one thread holds the master's and the agents' state, fed by a channel.
//! HTTP threads send it decoded calls and wait for a reply; process threads report launches
//! and exits; timers (heartbeats, retries, timeouts) live in a heap and bound the wait on
//! the channel, so nothing polls.

use super::faults::SchedulerFaults;
use super::http::{Reply, Response, Server, Stream, StreamMsg};
use super::ids::{new_uuid_string, uuid_string, uuid_v4};
use super::operations::Verdict;
use super::resources::Res;
use super::{AgentEndpoint, MasterConfig};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{executor, recordio, Bytes, Encoding};

/// Completed tasks kept per framework for `/master/state`.
const MAX_COMPLETED_TASKS: usize = 1000;
/// Statuses kept per task for `/master/state`.
const MAX_STATUSES: usize = 16;
/// Mesos' default `Filters.refuse_seconds`.
const DEFAULT_REFUSE_SECONDS: f64 = 5.0;
/// The allocator caps refuse filters at a year.
const MAX_REFUSE_SECONDS: f64 = 365.0 * 86400.0;
/// The real status update manager backs off up to ten minutes.
pub(super) const MAX_UPDATE_RETRY: Duration = Duration::from_secs(600);

pub enum Cmd {
    Scheduler {
        call: Box<scheduler::Call>,
        stream_id: Option<String>,
        accept: Encoding,
        reply: Sender<Reply>,
    },
    SchedulerStreamEnded(u64),
    Executor {
        agent: usize,
        call: Box<executor::Call>,
        accept: Encoding,
        reply: Sender<Reply>,
    },
    ExecutorStreamEnded {
        agent: usize,
        key: u64,
    },
    Process(ProcessEvent),
    /// The body of `/master/state`.
    MasterState(Sender<Result<Vec<u8>, String>>),
    /// `/master/slaves` (the agent watcher's endpoint).
    MasterSlaves(Sender<Result<Vec<u8>, String>>),
    AgentState {
        agent: usize,
        reply: Sender<Value>,
    },
    Control(Control),
    /// An operator's maintenance request; the reply is the body of a 200 or the message of
    /// a 400.
    Maintenance {
        call: super::maintenance::MaintenanceCall,
        body: Vec<u8>,
        reply: Sender<Result<Option<Value>, String>>,
    },
}

pub enum ProcessEvent {
    Started {
        agent: usize,
        run: u64,
        pid: u32,
    },
    LaunchFailed {
        agent: usize,
        run: u64,
        error: String,
    },
    /// A synthetic agent fetched its executor's URIs (`synthetic_fetch.rs`).
    Fetched {
        agent: usize,
        run: u64,
        bytes: u64,
    },
    /// Over the container's memory: the group is being killed for this reason.
    Limited {
        agent: usize,
        run: u64,
        message: String,
    },
    Exited {
        agent: usize,
        run: u64,
        /// The raw wait status, as the agent reports it in FAILURE.
        status: i32,
        description: String,
    },
}

pub enum Control {
    /// The snapshot as JSON bytes: the caller parses them, not the owner thread.
    Snapshot(Sender<Result<Vec<u8>, String>>),
    Agents(Sender<Vec<AgentEndpoint>>),
    Leader(Sender<SocketAddr>),
    CutStream {
        framework: Option<String>,
        reply: Sender<Result<usize, String>>,
    },
    StopAgent {
        index: usize,
        reply: Sender<Result<(), String>>,
    },
    StartAgent {
        index: usize,
        reply: Sender<Result<(), String>>,
    },
    /// The agent process restarts, its host stays up (see `restart_agent`).
    RestartAgent {
        index: usize,
        reply: Sender<Result<(), String>>,
    },
    /// The host reboots and its agent registers under a new id after `outage` (the
    /// configured one when `None`; see `new_id.rs`). The reply is the new id.
    Reboot {
        index: usize,
        outage: Option<Duration>,
        reply: Sender<Result<String, String>>,
    },
    KillExecutor {
        agent: usize,
        executor: String,
        reply: Sender<Result<(), String>>,
    },
    FailOver(Sender<Result<SocketAddr, String>>),
    /// A network partition and its end (see `partition.rs`).
    Partition {
        index: usize,
        reply: Sender<Result<(), String>>,
    },
    Heal {
        index: usize,
        keep_tasks: bool,
        reply: Sender<Result<(), String>>,
    },
    /// See `rescind.rs`.
    RescindBeforeAccept {
        index: usize,
        reply: Sender<Result<(), String>>,
    },
    LaunchLog(Sender<Vec<super::launches::LaunchRecord>>),
    SyntheticPlans(Sender<Vec<super::synthetic_plans::SeenPlan>>),
    /// Half-open streams: see `MasterHandle::freeze_scheduler_streams`.
    FreezeStreams(Sender<Result<usize, String>>),
    Shutdown(Sender<()>),
    // Scheduler-facing faults (see `faults.rs`).
    DropNextCall {
        kind: String,
        reply: Sender<Result<(), String>>,
    },
    FailOverSlow {
        window: Duration,
        reply: Sender<Result<SocketAddr, String>>,
    },
    FailOverLate {
        late: Vec<usize>,
        reply: Sender<Result<SocketAddr, String>>,
    },
}

#[derive(Debug, Clone)]
pub(super) enum Timer {
    Heartbeat {
        framework: String,
        key: u64,
    },
    Failover {
        framework: String,
        generation: u64,
    },
    Allocate,
    UpdateRetry {
        agent: usize,
        framework: String,
        task: String,
        generation: u64,
    },
    Registration {
        agent: usize,
        run: u64,
    },
    ShutdownGrace {
        agent: usize,
        run: u64,
    },
    Reregistration {
        agent: usize,
        generation: u64,
    },
    Unreachable {
        agent: usize,
        generation: u64,
    },
    /// A rebooting host's agent registers under its new id.
    Reboot {
        agent: usize,
        generation: u64,
    },
}

struct TimerEntry {
    at: Instant,
    seq: u64,
    timer: Timer,
}

impl PartialEq for TimerEntry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for TimerEntry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

pub(super) struct SchedConn {
    pub key: u64,
    pub stream_id: String,
    pub encoding: Encoding,
    pub tx: Sender<StreamMsg>,
}

pub(super) struct Framework {
    pub id: String,
    pub info: FrameworkInfo,
    pub conn: Option<SchedConn>,
    pub active: bool,
    pub suppressed: bool,
    /// Bumped on every (re)subscription; a failover timer from an older one is void.
    pub generation: u64,
    pub filters: Vec<Filter>,
    pub tasks: BTreeMap<String, Task>,
    pub completed_tasks: VecDeque<Task>,
    /// Tasks of unreachable agents that were replaced by a new agent on their host: Mesos
    /// 1.4 keeps them out of `tasks` (implicit reconciliation does not list them) until the
    /// registry forgets their agent, and `/master/state` shows them as unreachable.
    pub unreachable_tasks: BTreeMap<String, Task>,
    pub registered_time: f64,
    pub reregistered_time: f64,
    pub unregistered_time: f64,
}

impl Framework {
    pub fn partition_aware(&self) -> bool {
        self.info
            .capabilities
            .iter()
            .any(|c| c.r#type == Some(framework_info::capability::Type::PartitionAware))
    }

    pub fn role(&self) -> String {
        let multi = self
            .info
            .capabilities
            .iter()
            .any(|c| c.r#type == Some(framework_info::capability::Type::MultiRole));
        if multi {
            if let Some(r) = self.info.roles.first() {
                return r.to_string();
            }
        }
        self.info.role.as_deref().unwrap_or("*").to_string()
    }
}

pub(super) struct Filter {
    pub agent: usize,
    pub res: Res,
    pub until: Instant,
}

#[derive(Clone)]
pub(super) struct Task {
    pub info: TaskInfo,
    pub agent: usize,
    pub executor_id: Option<String>,
    pub state: TaskState,
    /// State and uuid of the latest update forwarded to the scheduler.
    pub update_uuid: Option<Vec<u8>>,
    pub statuses: Vec<TaskStatus>,
    pub resources: Res,
    /// The id of the agent it ran on, once that agent's host came back under a new id
    /// (`agent` then names the new agent).
    pub replaced_agent: Option<String>,
}

pub(super) struct OfferRec {
    pub framework: String,
    pub agent: usize,
    pub res: Res,
}

pub(super) struct CompletedFramework {
    pub id: String,
    pub info: FrameworkInfo,
    pub tasks: Vec<Task>,
    pub unregistered_time: f64,
}

pub(super) struct Agent {
    pub id: String,
    pub hostname: String,
    pub ip: Ipv4Addr,
    pub port: u16,
    pub server: Option<Server>,
    /// Executors are emulated (`synthetic.rs`); there is no server and no process.
    pub synthetic: bool,
    pub up: bool,
    pub unreachable: bool,
    /// Cut off from the master, running on (see `partition.rs`); `up` is false meanwhile.
    pub partitioned: bool,
    /// When the master marked it unreachable.
    pub unreachable_time: Option<TimeInfo>,
    /// Removed by the master while its machine is down for maintenance: not listed, and
    /// it may not register until the machine is up.
    pub removed: bool,
    /// The id this agent registers under when its rebooting host is back.
    pub rebooting_as: Option<String>,
    /// Bumped on every stop and start; an unreachable timer from before is void.
    pub generation: u64,
    pub total: Res,
    pub attributes: Vec<Attribute>,
    pub attributes_text: BTreeMap<String, String>,
    pub work_dir: PathBuf,
    pub registered_time: f64,
    pub frameworks: BTreeMap<String, AgentFramework>,
    /// The status update manager: one ordered stream per (framework, task).
    pub streams: BTreeMap<(String, String), UpdateStream>,
}

impl Agent {
    pub fn endpoint(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.port))
    }

    pub fn pid(&self) -> String {
        format!("slave(1)@{}:{}", self.ip, self.port)
    }
}

pub(super) struct AgentFramework {
    pub info: FrameworkInfo,
    pub terminating: bool,
    pub executors: BTreeMap<String, Executor>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExecState {
    /// Fetching and spawning.
    Launching,
    Registering,
    Running,
    Terminating,
    Terminated,
}

impl ExecState {
    pub fn name(self) -> &'static str {
        match self {
            ExecState::Launching => "LAUNCHING",
            ExecState::Registering => "REGISTERING",
            ExecState::Running => "RUNNING",
            ExecState::Terminating => "TERMINATING",
            ExecState::Terminated => "TERMINATED",
        }
    }
}

pub(super) struct ExecConn {
    pub key: u64,
    pub encoding: Encoding,
    pub tx: Sender<StreamMsg>,
}

pub(super) struct Executor {
    pub info: ExecutorInfo,
    pub run: u64,
    pub container_id: String,
    pub directory: PathBuf,
    pub state: ExecState,
    pub pid: Option<u32>,
    pub conn: Option<ExecConn>,
    pub queued: Vec<TaskInfo>,
    pub launched: BTreeMap<String, TaskState>,
    /// What the exit turns into when the agent itself ended the executor.
    pub pending_termination: Option<(TaskState, task_status::Reason, String)>,
    pub resources: Res,
    /// Set for a command task: the agent plays its command executor.
    pub command_task: Option<String>,
    pub kill_requested: bool,
    /// Killed together with its agent: no FAILURE reaches the master for it.
    pub lost_with_agent: bool,
    /// Outlived an agent restart (checkpointing framework) and has not subscribed again.
    pub recovering: bool,
}

pub(super) struct PendingUpdate {
    pub status: TaskStatus,
    pub from_executor: bool,
}

pub(super) struct UpdateStream {
    pub pending: VecDeque<PendingUpdate>,
    pub seen: HashSet<Vec<u8>>,
    pub generation: u64,
    pub interval: Duration,
}

pub(super) struct MasterSelf {
    pub id: String,
    pub addr: SocketAddr,
}

pub struct Cluster {
    pub(super) cfg: MasterConfig,
    pub(super) tx: Sender<Cmd>,
    pub(super) masters: [MasterSelf; 2],
    pub(super) leader: usize,
    pub(super) leader_shared: Arc<AtomicUsize>,
    pub(super) frameworks: BTreeMap<String, Framework>,
    pub(super) completed: Vec<CompletedFramework>,
    pub(super) offers: BTreeMap<String, OfferRec>,
    pub(super) agents: Vec<Agent>,
    timers: BinaryHeap<Reverse<TimerEntry>>,
    timer_seq: u64,
    next_framework: u64,
    pub(super) next_offer: u64,
    next_key: u64,
    pub(super) next_run: u64,
    allocation_due: Option<Instant>,
    /// Allocations scheduled for expiring refuse filters, as multiples of the allocation
    /// interval since `allocation_epoch`.
    allocation_ticks: BTreeSet<u128>,
    allocation_epoch: Instant,
    rotation: usize,
    pub(super) start_time: f64,
    pub(super) launch_log: super::launches::LaunchLog,
    /// Writers of frozen scheduler streams: kept so that their sockets stay open, never
    /// written to.
    frozen_streams: Vec<Sender<StreamMsg>>,
    pub(super) faults: SchedulerFaults,
    /// Agents whose next accepted offer is rescinded just before the ACCEPT lands.
    pub(super) rescind_before_accept: BTreeSet<usize>,
    /// Agents that came back under a new id so far (see `new_id.rs`).
    pub(super) renamed_agents: usize,
    /// Agents marked unreachable whose host then came back under a new id, with the time
    /// they were marked: Mesos's unreachable list, which explicit reconciliation reads.
    pub(super) unreachable_agents: BTreeMap<String, TimeInfo>,
    /// Synthetic agents' fetcher, when `synthetic_fetchers` asks for one, and what it got.
    pub(super) fetcher: Option<super::synthetic_fetch::Fetcher>,
    pub(super) synthetic_fetches: u64,
    pub(super) synthetic_fetched_bytes: u64,
    /// Emulated executors' phase reports, when `synthetic_phase_reports` asks for them.
    pub(super) phases: Option<super::synthetic_phases::PhaseReporter>,
    /// Their idle plan requests, when `synthetic_plan_waits` asks for them.
    pub(super) plans: Option<super::synthetic_plans::PlanWaiters>,
    pub(super) maintenance: super::maintenance::Maintenance,
}

pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A TaskStatus as the master or agent builds one.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_status(
    task_id: &str,
    state: TaskState,
    source: task_status::Source,
    reason: Option<task_status::Reason>,
    message: &str,
    agent_id: Option<&str>,
    executor_id: Option<&str>,
    uuid: Option<[u8; 16]>,
) -> TaskStatus {
    TaskStatus {
        task_id: TaskID {
            value: task_id.into(),
        },
        state,
        message: Some(message.into()),
        source: Some(source),
        reason,
        agent_id: agent_id.map(|v| AgentID { value: v.into() }),
        executor_id: executor_id.map(|v| ExecutorID { value: v.into() }),
        timestamp: Some(now_secs()),
        uuid: uuid.map(|u| Bytes(u.to_vec())),
        ..Default::default()
    }
}

pub(super) fn state_name(s: TaskState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

/// One scheduler or executor event, framed for the stream.
pub(super) fn frame<M: Message + serde::Serialize>(encoding: Encoding, m: &M) -> StreamMsg {
    StreamMsg::Data(recordio::frame(&encoding.encode(m)))
}

pub(super) fn sched_event(t: event::Type) -> scheduler::Event {
    scheduler::Event {
        r#type: Some(t),
        ..Default::default()
    }
}

/// `Instant + d`, or `None` when the sum does not fit (a failover timeout of years).
fn later(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

fn secs_duration(secs: f64) -> Option<Duration> {
    if !(0.0..=1e12).contains(&secs) {
        return None;
    }
    Some(Duration::from_secs_f64(secs))
}

impl Cluster {
    pub fn new(
        cfg: MasterConfig,
        tx: Sender<Cmd>,
        leader_shared: Arc<AtomicUsize>,
        addrs: [SocketAddr; 2],
        agent_attributes: Vec<BTreeMap<String, String>>,
    ) -> Result<Cluster, String> {
        let masters = addrs.map(|addr| MasterSelf {
            id: new_uuid_string(),
            addr,
        });
        let mut cluster = Cluster {
            cfg,
            tx,
            masters,
            leader: 0,
            leader_shared,
            frameworks: BTreeMap::new(),
            completed: Vec::new(),
            offers: BTreeMap::new(),
            agents: Vec::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            next_framework: 0,
            next_offer: 0,
            next_key: 0,
            next_run: 0,
            allocation_due: None,
            allocation_ticks: BTreeSet::new(),
            allocation_epoch: Instant::now(),
            rotation: 0,
            start_time: now_secs(),
            launch_log: Default::default(),
            frozen_streams: Vec::new(),
            faults: SchedulerFaults::default(),
            rescind_before_accept: BTreeSet::new(),
            renamed_agents: 0,
            unreachable_agents: BTreeMap::new(),
            fetcher: None,
            synthetic_fetches: 0,
            synthetic_fetched_bytes: 0,
            phases: None,
            plans: None,
            maintenance: Default::default(),
        };
        match (
            cluster.cfg.synthetic_phase_reports,
            cluster.cfg.synthetic_plan_waits,
        ) {
            (Some(rate), true) => {
                cluster.plans = Some(super::synthetic_plans::PlanWaiters::start(rate));
            }
            (Some(rate), false) => {
                cluster.phases = Some(super::synthetic_phases::PhaseReporter::start(
                    rate,
                    cluster.cfg.synthetic_health_reports,
                ));
            }
            (None, _) => {}
        }
        if cluster.cfg.synthetic_fetchers > 0 && cluster.cfg.synthetic_agents > 0 {
            let threads = cluster.cfg.synthetic_fetchers;
            cluster.fetcher = Some(super::synthetic_fetch::Fetcher::start(
                threads,
                cluster.tx.clone(),
            ));
        }
        let real = cluster.cfg.agents;
        for (i, attrs) in agent_attributes.into_iter().enumerate() {
            if i < real {
                cluster.add_agent(i, attrs)?;
            } else {
                cluster.add_synthetic_agent(i, i - real, attrs);
            }
        }
        Ok(cluster)
    }

    pub(super) fn master_id(&self) -> &str {
        &self.masters[self.leader].id
    }

    pub(super) fn next_key(&mut self) -> u64 {
        self.next_key += 1;
        self.next_key
    }

    pub(super) fn schedule(&mut self, after: Duration, timer: Timer) {
        let Some(at) = later(after) else { return };
        self.timer_seq += 1;
        self.timers.push(Reverse(TimerEntry {
            at,
            seq: self.timer_seq,
            timer,
        }));
    }

    pub fn run(mut self, rx: Receiver<Cmd>) {
        loop {
            let next = self.timers.peek().map(|Reverse(t)| t.at);
            let cmd = match next {
                Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(c) => Some(c),
                    Err(_) => break,
                },
            };
            if let Some(cmd) = cmd {
                if !self.handle(cmd) {
                    break;
                }
            }
            self.fire_timers();
        }
        self.shutdown_everything();
        // Processes that started after the last look must not outlive the cluster.
        for cmd in rx.try_iter() {
            if let Cmd::Process(ProcessEvent::Started { pid, .. }) = cmd {
                super::process::signal_group(pid, super::process::SIGKILL);
            }
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse(t)) = self.timers.peek() {
            if t.at > now {
                break;
            }
            let Some(Reverse(t)) = self.timers.pop() else {
                break;
            };
            self.on_timer(t.timer);
        }
    }

    fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Heartbeat { framework, key } => {
                let Some(fw) = self.frameworks.get(&framework) else {
                    return;
                };
                let Some(conn) = &fw.conn else { return };
                if conn.key != key {
                    return;
                }
                let _ = conn
                    .tx
                    .send(frame(conn.encoding, &sched_event(event::Type::Heartbeat)));
                let interval = self.cfg.heartbeat_interval;
                self.schedule(interval, Timer::Heartbeat { framework, key });
            }
            Timer::Failover {
                framework,
                generation,
            } => {
                let expired = self
                    .frameworks
                    .get(&framework)
                    .is_some_and(|f| f.conn.is_none() && f.generation == generation);
                if expired {
                    log::info!("framework {framework} failover timeout: removing it");
                    self.remove_framework(&framework);
                }
            }
            Timer::Allocate => {
                if self.allocation_due.is_some_and(|d| d <= Instant::now()) {
                    self.allocation_due = None;
                }
                self.allocate();
            }
            Timer::UpdateRetry {
                agent,
                framework,
                task,
                generation,
            } => self.retry_update(agent, framework, task, generation),
            Timer::Registration { agent, run } => self.registration_timeout(agent, run),
            Timer::ShutdownGrace { agent, run } => self.shutdown_grace_over(agent, run),
            Timer::Unreachable { agent, generation } => self.mark_unreachable(agent, generation),
            Timer::Reboot { agent, generation } => self.reboot_done(agent, generation),
            Timer::Reregistration { agent, generation } => {
                self.reregistration_timeout(agent, generation)
            }
        }
    }

    fn handle(&mut self, cmd: Cmd) -> bool {
        match cmd {
            Cmd::Scheduler {
                call,
                stream_id,
                accept,
                reply,
            } => {
                let r = self.scheduler_call(*call, stream_id, accept);
                let _ = reply.send(r);
            }
            Cmd::SchedulerStreamEnded(key) => {
                let id = self
                    .frameworks
                    .values()
                    .find(|f| f.conn.as_ref().is_some_and(|c| c.key == key))
                    .map(|f| f.id.clone());
                if let Some(id) = id {
                    log::info!("framework {id} disconnected");
                    self.disconnect_framework(&id);
                }
            }
            Cmd::Executor {
                agent,
                call,
                accept,
                reply,
            } => {
                let r = self.executor_call(agent, *call, accept);
                let _ = reply.send(r);
            }
            Cmd::ExecutorStreamEnded { agent, key } => self.executor_stream_ended(agent, key),
            Cmd::Process(ev) => self.process_event(ev),
            Cmd::MasterState(reply) => {
                let _ = reply.send(self.master_state_bytes());
            }
            Cmd::MasterSlaves(reply) => {
                let _ = reply.send(self.master_slaves_bytes());
            }
            Cmd::AgentState { agent, reply } => {
                let _ = reply.send(self.agent_state_json(agent));
            }
            Cmd::Control(c) => return self.control(c),
            Cmd::Maintenance { call, body, reply } => {
                let _ = reply.send(self.maintenance_call(call, &body));
            }
        }
        true
    }

    fn control(&mut self, c: Control) -> bool {
        match c {
            Control::Snapshot(reply) => {
                let _ = reply.send(self.snapshot_bytes());
            }
            Control::Agents(reply) => {
                let _ = reply.send(self.agent_endpoints());
            }
            Control::Leader(reply) => {
                let _ = reply.send(self.masters[self.leader].addr);
            }
            Control::CutStream { framework, reply } => {
                let ids: Vec<String> = self
                    .frameworks
                    .values()
                    .filter(|f| f.conn.is_some())
                    .filter(|f| framework.as_deref().is_none_or(|id| id == f.id))
                    .map(|f| f.id.clone())
                    .collect();
                if ids.is_empty() {
                    let _ = reply.send(Err(match framework {
                        Some(id) => format!("framework {id} has no open subscription stream"),
                        None => "no framework has an open subscription stream".into(),
                    }));
                    return true;
                }
                for id in &ids {
                    // Dropping the sender makes the writer abort the connection.
                    if let Some(f) = self.frameworks.get_mut(id) {
                        f.conn = None;
                    }
                    self.disconnect_framework(id);
                }
                let _ = reply.send(Ok(ids.len()));
            }
            Control::StopAgent { index, reply } => {
                let _ = reply.send(self.stop_agent(index));
            }
            Control::StartAgent { index, reply } => {
                let _ = reply.send(self.start_agent(index));
            }
            Control::RestartAgent { index, reply } => {
                let _ = reply.send(self.restart_agent(index));
            }
            Control::Reboot {
                index,
                outage,
                reply,
            } => {
                let _ = reply.send(self.reboot(index, outage));
            }
            Control::KillExecutor {
                agent,
                executor,
                reply,
            } => {
                let _ = reply.send(self.kill_executor_process(agent, &executor));
            }
            Control::FailOver(reply) => {
                let _ = reply.send(Ok(self.fail_over()));
            }
            Control::Partition { index, reply } => {
                let _ = reply.send(self.partition_agent(index));
            }
            Control::Heal {
                index,
                keep_tasks,
                reply,
            } => {
                let _ = reply.send(self.heal_agent(index, keep_tasks));
            }
            Control::RescindBeforeAccept { index, reply } => {
                let _ = reply.send(self.rescind_before_next_accept(index));
            }
            Control::FreezeStreams(reply) => {
                let ids: Vec<String> = self
                    .frameworks
                    .values()
                    .filter(|f| f.conn.is_some())
                    .map(|f| f.id.clone())
                    .collect();
                for id in &ids {
                    if let Some(conn) = self.frameworks.get_mut(id).and_then(|f| f.conn.take()) {
                        self.frozen_streams.push(conn.tx);
                    }
                    self.disconnect_framework(id);
                }
                let _ = reply.send(match ids.len() {
                    0 => Err("no framework has an open subscription stream".into()),
                    n => Ok(n),
                });
            }
            Control::LaunchLog(reply) => {
                let _ = reply.send(self.launch_log.entries());
            }
            Control::SyntheticPlans(reply) => match &self.plans {
                Some(plans) => plans.stats(reply),
                None => {
                    let _ = reply.send(Vec::new());
                }
            },
            Control::DropNextCall { kind, reply } => {
                let _ = reply.send(match call::Type::from_name(&kind) {
                    Some(t) => {
                        self.faults.drop_next(t);
                        Ok(())
                    }
                    None => Err(format!("{kind:?} is not a scheduler call type")),
                });
            }
            Control::FailOverSlow { window, reply } => {
                let leader = self.fail_over();
                self.faults.reregister_over(self.agents.len(), window);
                let _ = reply.send(Ok(leader));
            }
            Control::FailOverLate { late, reply } => {
                if let Some(bad) = late.iter().find(|&&i| i >= self.agents.len()) {
                    let _ = reply.send(Err(format!("there is no agent with index {bad}")));
                } else {
                    let leader = self.fail_over();
                    self.faults.reregister_after_asked(late);
                    let _ = reply.send(Ok(leader));
                }
            }
            Control::Shutdown(reply) => {
                self.shutdown_everything();
                let _ = reply.send(());
                return false;
            }
        }
        true
    }

    fn shutdown_everything(&mut self) {
        for agent in &mut self.agents {
            for f in agent.frameworks.values_mut() {
                for e in f.executors.values_mut() {
                    if let Some(pid) = e.pid.take() {
                        super::process::signal_group(pid, super::process::SIGKILL);
                    }
                    e.conn = None;
                }
            }
            if let Some(mut s) = agent.server.take() {
                s.stop();
            }
        }
        for f in self.frameworks.values_mut() {
            if let Some(c) = f.conn.take() {
                let _ = c.tx.send(StreamMsg::Close);
            }
        }
    }

    fn fail_over(&mut self) -> SocketAddr {
        self.leader = 1 - self.leader;
        self.leader_shared.store(self.leader, Ordering::SeqCst);
        log::info!(
            "master at {} is now the leader",
            self.masters[self.leader].addr
        );
        // The new leader knows the frameworks from the agents, but no connection survives;
        // it starts no failover timer until a framework re-subscribes and leaves again.
        for f in self.frameworks.values_mut() {
            f.conn = None;
            f.active = false;
            f.generation += 1;
        }
        self.offers.clear();
        self.forget_all_inverse_offers();
        self.masters[self.leader].addr
    }

    pub(super) fn agent_endpoints(&self) -> Vec<AgentEndpoint> {
        self.agents
            .iter()
            .enumerate()
            .map(|(index, a)| AgentEndpoint {
                index,
                id: a.id.clone(),
                hostname: a.hostname.clone(),
                ip: a.ip,
                endpoint: a.endpoint(),
                up: a.up,
                partitioned: a.partitioned,
                attributes: a.attributes_text.clone(),
                synthetic: a.synthetic,
            })
            .collect()
    }

    // ---- scheduler API ----

    fn scheduler_call(
        &mut self,
        call: scheduler::Call,
        stream_id: Option<String>,
        accept: Encoding,
    ) -> Reply {
        let t = call.r#type.unwrap_or(call::Type::Unknown);
        if t == call::Type::Subscribe {
            return self.subscribe(call, accept);
        }
        let fw_id = call
            .framework_id
            .as_ref()
            .map(|f| f.value.to_string())
            .unwrap_or_default();
        let Some(fw) = self.frameworks.get(&fw_id) else {
            return Response::text(400, "Framework cannot be found").into();
        };
        let Some(conn) = &fw.conn else {
            return Response::text(403, "Framework is not subscribed").into();
        };
        let Some(stream_id) = stream_id else {
            return Response::text(
                400,
                "All non-subscribe calls should include the 'Mesos-Stream-Id' header",
            )
            .into();
        };
        if stream_id != conn.stream_id {
            return Response::text(
                400,
                format!(
                    "The stream ID '{stream_id}' included in this request didn't match the \
                     stream ID currently associated with framework ID {fw_id}"
                ),
            )
            .into();
        }
        if self.faults.take_drop(t) {
            log::info!("fault: refusing {t} of framework {fw_id}");
            return Response::text(503, "Service Unavailable (injected fault)").into();
        }
        match t {
            call::Type::Teardown => {
                log::info!("TEARDOWN of framework {fw_id}");
                self.remove_framework(&fw_id);
            }
            call::Type::Accept => {
                if let Some(a) = call.accept {
                    self.accept(&fw_id, a);
                }
            }
            call::Type::Decline => {
                if let Some(d) = call.decline {
                    self.decline(&fw_id, d);
                }
            }
            call::Type::Revive => self.revive(&fw_id),
            call::Type::Suppress => {
                if let Some(f) = self.frameworks.get_mut(&fw_id) {
                    f.suppressed = true;
                }
            }
            call::Type::Kill => {
                if let Some(k) = call.kill {
                    self.kill(&fw_id, k);
                }
            }
            call::Type::Shutdown => {
                if let Some(s) = call.shutdown {
                    if let Some(agent) = self.agent_by_id(&s.agent_id.value) {
                        if self.agents[agent].up {
                            self.shutdown_executor(agent, &fw_id, &s.executor_id.value);
                        }
                    }
                }
            }
            call::Type::Acknowledge => {
                if let Some(a) = call.acknowledge {
                    self.acknowledge(&fw_id, a);
                }
            }
            call::Type::Reconcile => {
                if let Some(r) = call.reconcile {
                    let tasks = r
                        .tasks
                        .into_iter()
                        .map(|t| {
                            (
                                t.task_id.value.to_string(),
                                t.agent_id.map(|a| a.value.to_string()),
                            )
                        })
                        .collect();
                    self.reconcile(&fw_id, tasks);
                }
            }
            call::Type::Message => {
                if let Some(m) = call.message {
                    self.framework_message(&fw_id, m);
                }
            }
            call::Type::AcceptInverseOffers => {
                if let Some(a) = call.accept_inverse_offers {
                    self.answer_inverse_offers(
                        &fw_id,
                        &a.inverse_offer_ids,
                        a.filters.as_ref(),
                        true,
                    );
                }
            }
            call::Type::DeclineInverseOffers => {
                if let Some(d) = call.decline_inverse_offers {
                    self.answer_inverse_offers(
                        &fw_id,
                        &d.inverse_offer_ids,
                        d.filters.as_ref(),
                        false,
                    );
                }
            }
            // The built-in allocator ignores requests.
            call::Type::Request => {}
            call::Type::Subscribe => {}
            call::Type::Unknown | call::Type::Other(_) => {
                return Response::new(501).into();
            }
        }
        Response::new(202).into()
    }

    fn subscribe(&mut self, call: scheduler::Call, accept: Encoding) -> Reply {
        let subscribe = call.subscribe.unwrap_or_default();
        let suppressed_roles = subscribe.suppressed_roles;
        let mut info = subscribe.framework_info;
        let (tx, rx) = crossbeam_channel::unbounded();
        let key = self.next_key();
        let stream_id = new_uuid_string();
        let reply = {
            let tx_cmd = self.tx.clone();
            Reply::Stream(Stream {
                headers: vec![
                    ("Content-Type".into(), accept.content_type().into()),
                    ("Mesos-Stream-Id".into(), stream_id.clone()),
                ],
                rx,
                on_end: Box::new(move || {
                    let _ = tx_cmd.send(Cmd::SchedulerStreamEnded(key));
                }),
            })
        };
        let requested_id = info
            .id
            .as_ref()
            .map(|i| i.value.to_string())
            .filter(|v| !v.is_empty());
        let mut error = None;
        if let Some(id) = &requested_id {
            if self.completed.iter().any(|c| &c.id == id) {
                error = Some("Framework has been removed".to_string());
            }
        }
        let failover = info.failover_timeout.unwrap_or(0.0);
        if error.is_none() && (!failover.is_finite() || failover.abs() > 9.2e9) {
            error = Some(format!(
                "The framework failover_timeout ({failover}) is invalid"
            ));
        }
        if let Some(message) = error {
            log::info!(
                "refusing subscription of framework {:?}: {message}",
                info.name
            );
            let mut ev = sched_event(event::Type::Error);
            ev.error = Some(event::Error {
                message: message.into(),
            });
            let _ = tx.send(frame(accept, &ev));
            let _ = tx.send(StreamMsg::Close);
            return reply;
        }
        let conn = SchedConn {
            key,
            stream_id,
            encoding: accept,
            tx,
        };
        let now = now_secs();
        let id = match requested_id {
            Some(id) => id,
            None => {
                let id = format!("{}-{:04}", self.master_id(), self.next_framework);
                self.next_framework += 1;
                id
            }
        };
        info.id = Some(FrameworkID {
            value: id.as_str().into(),
        });
        match self.frameworks.get_mut(&id) {
            Some(fw) => {
                log::info!("framework {id} re-subscribed");
                if let Some(old) = fw.conn.take() {
                    let mut ev = sched_event(event::Type::Error);
                    ev.error = Some(event::Error {
                        message: "Framework failed over".into(),
                    });
                    let _ = old.tx.send(frame(old.encoding, &ev));
                    let _ = old.tx.send(StreamMsg::Close);
                }
                fw.info = info.clone();
                fw.conn = Some(conn);
                fw.active = true;
                fw.generation += 1;
                fw.reregistered_time = now;
            }
            None => {
                log::info!("framework {id} subscribed");
                self.frameworks.insert(
                    id.clone(),
                    Framework {
                        id: id.clone(),
                        info: info.clone(),
                        conn: Some(conn),
                        active: true,
                        suppressed: false,
                        generation: 0,
                        filters: Vec::new(),
                        tasks: BTreeMap::new(),
                        completed_tasks: VecDeque::new(),
                        unreachable_tasks: BTreeMap::new(),
                        registered_time: now,
                        reregistered_time: now,
                        unregistered_time: 0.0,
                    },
                );
            }
        }
        if let Some(fw) = self.frameworks.get_mut(&id) {
            // Without MULTI_ROLE a framework has one role; suppressing it suppresses all.
            let role = fw.role();
            fw.suppressed = suppressed_roles.iter().any(|r| *r == role);
        }
        // A failed-over framework gets its outstanding offers back as fresh ones.
        self.remove_offers_of(&id, false);
        for agent in &mut self.agents {
            if let Some(af) = agent.frameworks.get_mut(&id) {
                af.info = info.clone();
            }
        }
        let mut ev = sched_event(event::Type::Subscribed);
        ev.subscribed = Some(event::Subscribed {
            framework_id: FrameworkID {
                value: id.as_str().into(),
            },
            heartbeat_interval_seconds: Some(self.cfg.heartbeat_interval.as_secs_f64()),
            master_info: Some(self.master_info()),
        });
        self.send(&id, &ev);
        let interval = self.cfg.heartbeat_interval;
        self.schedule(interval, Timer::Heartbeat { framework: id, key });
        self.allocate();
        reply
    }

    pub(super) fn master_info(&self) -> MasterInfo {
        let m = &self.masters[self.leader];
        let ip = match m.addr {
            SocketAddr::V4(a) => *a.ip(),
            SocketAddr::V6(_) => Ipv4Addr::LOCALHOST,
        };
        MasterInfo {
            id: m.id.as_str().into(),
            // MasterInfo.ip holds the address in network byte order (MESOS-1201).
            ip: u32::from_ne_bytes(ip.octets()),
            port: u32::from(m.addr.port()),
            pid: Some(format!("master@{}", m.addr).into()),
            hostname: Some(ip.to_string().into()),
            version: Some(self.cfg.version.as_str().into()),
            address: Some(Address {
                hostname: Some(ip.to_string().into()),
                ip: Some(ip.to_string().into()),
                port: i32::from(m.addr.port()),
            }),
            domain: None,
        }
    }

    /// Sends one event on the framework's stream, if it has one.
    pub(super) fn send(&self, fw_id: &str, ev: &scheduler::Event) {
        if let Some(conn) = self.frameworks.get(fw_id).and_then(|f| f.conn.as_ref()) {
            let _ = conn.tx.send(frame(conn.encoding, ev));
        }
    }

    pub(super) fn send_update(&self, fw_id: &str, status: TaskStatus) {
        let mut ev = sched_event(event::Type::Update);
        ev.update = Some(event::Update { status });
        self.send(fw_id, &ev);
    }

    fn disconnect_framework(&mut self, id: &str) {
        let Some(fw) = self.frameworks.get_mut(id) else {
            return;
        };
        fw.conn = None;
        fw.active = false;
        fw.unregistered_time = now_secs();
        let generation = fw.generation;
        let timeout = fw.info.failover_timeout.unwrap_or(0.0);
        self.remove_offers_of(id, false);
        self.forget_inverse_offers_of(id);
        match secs_duration(timeout) {
            Some(d) => self.schedule(
                d,
                Timer::Failover {
                    framework: id.to_string(),
                    generation,
                },
            ),
            // Negative timeouts are valid durations that have already elapsed.
            None if timeout < 0.0 => self.remove_framework(id),
            None => {}
        }
    }

    pub(super) fn remove_framework(&mut self, id: &str) {
        let Some(mut fw) = self.frameworks.remove(id) else {
            return;
        };
        if let Some(c) = fw.conn.take() {
            let _ = c.tx.send(StreamMsg::Close);
        }
        self.offers.retain(|_, o| o.framework != id);
        self.forget_inverse_offers_of(id);
        let agents = self.agents.len();
        for a in 0..agents {
            let executors: Vec<String> = match self.agents[a].frameworks.get_mut(id) {
                Some(af) => {
                    af.terminating = true;
                    af.executors.keys().cloned().collect()
                }
                None => continue,
            };
            self.agents[a].streams.retain(|(f, _), _| f != id);
            for e in executors {
                self.shutdown_executor(a, id, &e);
            }
            self.cleanup_agent_framework(a, id);
        }
        let now = now_secs();
        let mut tasks: Vec<Task> = fw.completed_tasks.drain(..).collect();
        for (_, mut t) in std::mem::take(&mut fw.tasks) {
            if !t.state.is_terminal() {
                t.state = TaskState::Killed;
            }
            tasks.push(t);
        }
        self.completed.push(CompletedFramework {
            id: id.to_string(),
            info: fw.info,
            tasks,
            unregistered_time: now,
        });
        self.request_allocation();
    }

    /// Takes back every offer of the framework; the resources return without a filter.
    fn remove_offers_of(&mut self, fw_id: &str, rescind: bool) {
        let ids: Vec<String> = self
            .offers
            .iter()
            .filter(|(_, o)| o.framework == fw_id)
            .map(|(k, _)| k.clone())
            .collect();
        for oid in ids {
            self.offers.remove(&oid);
            if rescind {
                self.rescind(fw_id, &oid);
            }
        }
        self.request_allocation();
    }

    pub(super) fn rescind(&self, fw_id: &str, offer_id: &str) {
        let mut ev = sched_event(event::Type::Rescind);
        ev.rescind = Some(event::Rescind {
            offer_id: OfferID {
                value: offer_id.into(),
            },
        });
        self.send(fw_id, &ev);
    }

    pub(super) fn agent_by_id(&self, id: &str) -> Option<usize> {
        // Ids end in `-S<index>`: reading the index spares a search through 10,000 agents on
        // every acknowledgement.
        let by_index = id
            .rsplit_once("-S")
            .and_then(|(_, n)| n.parse::<usize>().ok())
            .filter(|&i| self.agents.get(i).is_some_and(|a| a.id == id));
        by_index.or_else(|| self.agents.iter().position(|a| a.id == id))
    }

    fn accept(&mut self, fw_id: &str, accept: call::Accept) {
        let ids: Vec<String> = accept
            .offer_ids
            .iter()
            .map(|o| o.value.to_string())
            .collect();
        self.rescind_raced(&ids);
        let error = self.validate_offers(fw_id, &ids);
        let mut agent = None;
        let mut available = Res::default();
        for oid in &ids {
            if let Some(o) = self.offers.remove(oid) {
                if error.is_none() {
                    agent = Some(o.agent);
                    available.add(&o.res);
                }
            }
        }
        let Some(fw) = self.frameworks.get(fw_id) else {
            return;
        };
        let partition_aware = fw.partition_aware();
        if let Some(error) = error {
            log::warn!("ACCEPT of framework {fw_id} used invalid offers: {error}");
            let state = if partition_aware {
                TaskState::Dropped
            } else {
                TaskState::Lost
            };
            for op in &accept.operations {
                let tasks = match op.r#type {
                    Some(offer::operation::Type::Launch) => {
                        op.launch.as_ref().map(|l| &l.task_infos)
                    }
                    Some(offer::operation::Type::LaunchGroup) => {
                        op.launch_group.as_ref().map(|g| &g.task_group.tasks)
                    }
                    _ => {
                        let message = format!("Operation attempted with invalid offers: {error}");
                        self.drop_operation(fw_id, op, &message);
                        continue;
                    }
                };
                for task in tasks.into_iter().flatten() {
                    let status = make_status(
                        &task.task_id.value,
                        state,
                        task_status::Source::Master,
                        Some(task_status::Reason::InvalidOffers),
                        &format!("Task launched with invalid offers: {error}"),
                        Some(&task.agent_id.value),
                        None,
                        None,
                    );
                    self.send_update(fw_id, status);
                }
            }
            self.request_allocation();
            return;
        }
        let Some(agent) = agent else { return };
        let fw_info = fw.info.clone();
        for op in accept.operations {
            let Verdict::Launch(launch) = self.judge_operation(fw_id, op) else {
                continue;
            };
            for mut task in launch.task_infos {
                if let Some(e) = task.executor.as_mut() {
                    if e.framework_id.is_none() {
                        e.framework_id = Some(FrameworkID {
                            value: fw_id.into(),
                        });
                    }
                }
                match self.validate_task(fw_id, agent, &task, &available) {
                    Err(message) => {
                        let status = make_status(
                            &task.task_id.value,
                            TaskState::Error,
                            task_status::Source::Master,
                            Some(task_status::Reason::TaskInvalid),
                            &message,
                            Some(&task.agent_id.value),
                            None,
                            None,
                        );
                        self.send_update(fw_id, status);
                    }
                    Ok((task_res, consumed)) => {
                        available.subtract(&consumed);
                        let executor_id = task
                            .executor
                            .as_ref()
                            .map(|e| e.executor_id.value.to_string())
                            .or_else(|| Some(task.task_id.value.to_string()));
                        if let Some(fw) = self.frameworks.get_mut(fw_id) {
                            fw.tasks.insert(
                                task.task_id.value.to_string(),
                                Task {
                                    info: task.clone(),
                                    agent,
                                    executor_id,
                                    state: TaskState::Staging,
                                    update_uuid: None,
                                    statuses: Vec::new(),
                                    resources: task_res,
                                    replaced_agent: None,
                                },
                            );
                        }
                        self.run_task(agent, fw_id, &fw_info, task);
                    }
                }
            }
        }
        let refuse = accept.filters.and_then(|f| f.refuse_seconds);
        self.recover(fw_id, agent, available, refuse);
    }

    /// The master's offer checks, in its order; the first failure wins.
    fn validate_offers(&self, fw_id: &str, ids: &[String]) -> Option<String> {
        if ids.is_empty() {
            return Some("No offers specified".into());
        }
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id) {
                return Some(format!("Duplicate offer {id} in offer list"));
            }
        }
        for id in ids {
            if !self.offers.contains_key(id) {
                return Some(format!("Offer {id} is no longer valid"));
            }
        }
        for id in ids {
            let o = &self.offers[id];
            if o.framework != fw_id {
                return Some(format!(
                    "Offer {id} has invalid framework {} while framework {fw_id} is expected",
                    o.framework
                ));
            }
        }
        let first = &self.offers[&ids[0]];
        for id in ids {
            let o = &self.offers[id];
            if o.agent != first.agent {
                return Some(format!(
                    "Aggregated offers must belong to one single agent. Offer {id} uses agent \
                     {} and agent {}",
                    self.agents[o.agent].id, self.agents[first.agent].id
                ));
            }
        }
        None
    }

    /// Returns the task's own resources and what it consumes from the offer (with its
    /// executor's when that executor is new).
    fn validate_task(
        &self,
        fw_id: &str,
        agent: usize,
        task: &TaskInfo,
        available: &Res,
    ) -> Result<(Res, Res), String> {
        let fw = self
            .frameworks
            .get(fw_id)
            .ok_or_else(|| "Framework is gone".to_string())?;
        let id = &task.task_id.value;
        if let Some(e) = validate_id(id) {
            return Err(format!("Task has an invalid TaskID: {e}"));
        }
        if fw.tasks.contains_key(id.as_str()) {
            return Err(format!("Task has duplicate ID: {id}"));
        }
        let agent_id = &self.agents[agent].id;
        if &task.agent_id.value != agent_id {
            return Err(format!(
                "Task uses invalid agent {} while agent {agent_id} is expected",
                task.agent_id.value
            ));
        }
        if let Some(g) = task
            .kill_policy
            .as_ref()
            .and_then(|k| k.grace_period.as_ref())
        {
            if g.nanoseconds < 0 {
                return Err("Task's 'kill_policy.grace_period' must be non-negative".into());
            }
        }
        if task.resources.is_empty() {
            return Err("Task uses no resources".into());
        }
        let task_res = Res::from_proto(&task.resources)
            .map_err(|e| format!("Task uses invalid resources: {e}"))?;
        if let Some(cmd) = &task.command {
            validate_command(cmd).map_err(|e| format!("Task's `CommandInfo` is invalid: {e}"))?;
        }
        if task.executor.is_some() == task.command.is_some() {
            return Err(
                "Task should have at least one (but not both) of CommandInfo or \
                        ExecutorInfo present"
                    .into(),
            );
        }
        let mut total = task_res.clone();
        if let Some(e) = &task.executor {
            if let Some(err) = validate_id(&e.executor_id.value) {
                return Err(format!("Executor has an invalid ExecutorID: {err}"));
            }
            let efw = e
                .framework_id
                .as_ref()
                .map(|f| f.value.as_str())
                .unwrap_or("");
            if efw != fw_id {
                return Err(format!(
                    "ExecutorInfo has an invalid FrameworkID (Actual: {efw} vs Expected: {fw_id})"
                ));
            }
            if matches!(e.r#type, Some(t) if t != executor_info::Type::Custom) {
                return Err("'ExecutorInfo.type' must be 'CUSTOM'".into());
            }
            let Some(cmd) = &e.command else {
                return Err("'ExecutorInfo.command' must be set".into());
            };
            validate_command(cmd)
                .map_err(|err| format!("Executor's `CommandInfo` is invalid: {err}"))?;
            if e.shutdown_grace_period
                .as_ref()
                .is_some_and(|g| g.nanoseconds < 0)
            {
                return Err("ExecutorInfo's 'shutdown_grace_period' must be non-negative".into());
            }
            let exec_res = Res::from_proto(&e.resources)
                .map_err(|err| format!("Executor uses invalid resources: {err}"))?;
            let existing = self.agents[agent]
                .frameworks
                .get(fw_id)
                .and_then(|f| f.executors.get(e.executor_id.value.as_str()))
                .filter(|x| x.state != ExecState::Terminated);
            match existing {
                Some(x) => {
                    if !same_executor(&x.info, e) {
                        return Err(format!(
                            "ExecutorInfo is not compatible with existing ExecutorInfo with \
                             same ExecutorID '{}'",
                            e.executor_id.value
                        ));
                    }
                }
                None => total.add(&exec_res),
            }
        }
        if !available.contains(&total) {
            return Err(format!(
                "Total resources {total} required by task and its executor is more than \
                 available {available}"
            ));
        }
        Ok((task_res, total))
    }

    fn decline(&mut self, fw_id: &str, d: call::Decline) {
        let refuse = d.filters.and_then(|f| f.refuse_seconds);
        for oid in d.offer_ids {
            let valid = self
                .offers
                .get(oid.value.as_str())
                .is_some_and(|o| o.framework == fw_id);
            if !valid {
                log::warn!("framework {fw_id} declined unknown offer {}", oid.value);
                continue;
            }
            if let Some(o) = self.offers.remove(oid.value.as_str()) {
                self.recover(fw_id, o.agent, o.res, refuse);
            }
        }
    }

    /// Returns resources to the pool; `refuse` seconds (default 5) keep them from this
    /// framework on that agent, as the allocator's refuse filter does.
    fn recover(&mut self, fw_id: &str, agent: usize, res: Res, refuse: Option<f64>) {
        let mut secs = refuse.unwrap_or(DEFAULT_REFUSE_SECONDS);
        if !secs.is_finite() || secs < 0.0 {
            secs = DEFAULT_REFUSE_SECONDS;
        }
        secs = secs.min(MAX_REFUSE_SECONDS);
        if secs > 0.0 && !res.is_empty() {
            if let (Some(fw), Some(until)) = (
                self.frameworks.get_mut(fw_id),
                later(Duration::from_secs_f64(secs)),
            ) {
                fw.filters.push(Filter { agent, res, until });
                self.allocate_at(until);
            }
        }
        self.request_allocation();
    }

    fn revive(&mut self, fw_id: &str) {
        if let Some(fw) = self.frameworks.get_mut(fw_id) {
            fw.filters.clear();
            fw.suppressed = false;
        }
        self.allocate();
    }

    fn kill(&mut self, fw_id: &str, k: call::Kill) {
        let task_id = k.task_id.value.to_string();
        let agent_hint = k.agent_id.as_ref().map(|a| a.value.to_string());
        let Some(task) = self
            .frameworks
            .get(fw_id)
            .and_then(|f| f.tasks.get(&task_id))
        else {
            log::warn!("cannot kill unknown task {task_id} of framework {fw_id}: reconciling");
            self.reconcile(fw_id, vec![(task_id, agent_hint)]);
            return;
        };
        let agent = task.agent;
        if agent_hint.is_some_and(|h| h != self.agents[agent].id) {
            log::warn!("KILL of task {task_id} names another agent; ignored");
            return;
        }
        if !self.agents[agent].up {
            return;
        }
        self.kill_task(agent, fw_id, &task_id, k.kill_policy);
    }

    fn acknowledge(&mut self, fw_id: &str, a: call::Acknowledge) {
        let Some(agent) = self.agent_by_id(&a.agent_id.value) else {
            log::warn!("ACKNOWLEDGE for unknown agent {}", a.agent_id.value);
            return;
        };
        if !self.agents[agent].up {
            return;
        }
        let task_id = a.task_id.value.to_string();
        let uuid = a.uuid.0;
        if let Some(fw) = self.frameworks.get_mut(fw_id) {
            let done = fw.tasks.get(&task_id).is_some_and(|t| {
                t.agent == agent && t.state.is_terminal() && t.update_uuid.as_ref() == Some(&uuid)
            });
            if done {
                if let Some(t) = fw.tasks.remove(&task_id) {
                    fw.completed_tasks.push_back(t);
                    if fw.completed_tasks.len() > MAX_COMPLETED_TASKS {
                        fw.completed_tasks.pop_front();
                    }
                }
            }
        }
        self.agent_acknowledge(agent, fw_id, &task_id, &uuid);
    }

    fn reconcile(&mut self, fw_id: &str, tasks: Vec<(String, Option<String>)>) {
        let explicit = !tasks.is_empty();
        let Some(fw) = self.frameworks.get(fw_id) else {
            return;
        };
        let pa = fw.partition_aware();
        let mut statuses = Vec::new();
        let known = |t: &Task, agents: &[Agent]| {
            let mut s = make_status(
                &t.info.task_id.value,
                t.state,
                task_status::Source::Master,
                Some(task_status::Reason::Reconciliation),
                "Reconciliation: Latest task state",
                Some(&agents[t.agent].id),
                t.executor_id.as_deref(),
                None,
            );
            if t.state == TaskState::Unreachable {
                s.unreachable_time = t.statuses.last().and_then(|x| x.unreachable_time.clone());
            }
            s
        };
        // Tasks on agents that have not re-registered with this leader get no answer.
        let transitioning: BTreeSet<usize> = (0..self.agents.len())
            .filter(|i| self.faults.transitioning(*i))
            .collect();
        let Some(fw) = self.frameworks.get(fw_id) else {
            return;
        };
        if tasks.is_empty() {
            for t in fw.tasks.values() {
                if !transitioning.contains(&t.agent) {
                    statuses.push(known(t, &self.agents));
                }
            }
        } else {
            for (task_id, agent_id) in tasks {
                if let Some(t) = fw.tasks.get(&task_id) {
                    if !transitioning.contains(&t.agent) {
                        statuses.push(known(t, &self.agents));
                    }
                    continue;
                }
                if agent_id
                    .as_ref()
                    .and_then(|a| self.agent_by_id(a))
                    .is_some_and(|i| transitioning.contains(&i))
                {
                    continue;
                }
                let registered = agent_id
                    .as_ref()
                    .and_then(|a| self.agent_by_id(a))
                    .filter(|&i| !self.agents[i].unreachable);
                let unreachable = agent_id
                    .as_ref()
                    .and_then(|a| self.agent_by_id(a))
                    .filter(|&i| self.agents[i].unreachable);
                // An agent replaced by a new one on its host while unreachable stays
                // unreachable.
                let replaced = agent_id
                    .as_ref()
                    .and_then(|a| self.unreachable_agents.get(a.as_str()));
                let (state, message) = if registered.is_some() {
                    (
                        TaskState::Gone,
                        "Reconciliation: Task is unknown to the agent",
                    )
                } else if unreachable.is_some() {
                    (
                        TaskState::Unreachable,
                        "Reconciliation: Task is unreachable",
                    )
                } else {
                    (TaskState::Unknown, "Reconciliation: Task is unknown")
                };
                let (state, message) = match replaced {
                    Some(_) => (
                        TaskState::Unreachable,
                        "Reconciliation: Task is unreachable",
                    ),
                    None => (state, message),
                };
                let state = if pa { state } else { TaskState::Lost };
                let mut s = make_status(
                    &task_id,
                    state,
                    task_status::Source::Master,
                    Some(task_status::Reason::Reconciliation),
                    message,
                    agent_id.as_deref(),
                    None,
                    None,
                );
                s.unreachable_time = replaced.cloned();
                statuses.push(s);
            }
        }
        for s in statuses {
            self.send_update(fw_id, s);
        }
        if explicit {
            self.faults.asked();
        }
    }

    /// Resources return to the pool at the next allocation tick, as the allocator batches.
    pub(super) fn request_allocation(&mut self) {
        let interval = self.cfg.allocation_interval;
        let Some(due) = later(interval) else { return };
        if self.allocation_due.is_some_and(|d| d <= due) {
            return;
        }
        self.allocation_due = Some(due);
        self.schedule(interval, Timer::Allocate);
    }

    /// An allocation once a refuse filter expires at `at`, rounded up to a grid of allocation
    /// intervals: the thousands of filters a large cluster's declines leave then share a few
    /// allocations instead of causing one each.
    pub(super) fn allocate_at(&mut self, at: Instant) {
        let step = self.allocation_step().as_nanos();
        let tick = at
            .saturating_duration_since(self.allocation_epoch)
            .as_nanos()
            .div_ceil(step);
        let Ok(offset) = u64::try_from(tick.saturating_mul(step)) else {
            return;
        };
        let Some(due) = self
            .allocation_epoch
            .checked_add(Duration::from_nanos(offset))
        else {
            return;
        };
        if self.allocation_ticks.insert(tick) {
            self.schedule(
                due.saturating_duration_since(Instant::now()),
                Timer::Allocate,
            );
        }
    }

    fn allocation_step(&self) -> Duration {
        self.cfg.allocation_interval.max(Duration::from_millis(1))
    }

    /// What each agent can still offer: total less running tasks, executors and offers, in
    /// one pass over each rather than one per agent.
    pub(super) fn free_all(&self) -> Vec<Res> {
        let mut free: Vec<Res> = self.agents.iter().map(|a| a.total.clone()).collect();
        for fw in self.frameworks.values() {
            for t in fw.tasks.values() {
                if !t.state.is_terminal() {
                    if let Some(f) = free.get_mut(t.agent) {
                        f.subtract(&t.resources);
                    }
                }
            }
        }
        for (f, a) in free.iter_mut().zip(&self.agents) {
            for af in a.frameworks.values() {
                for e in af.executors.values() {
                    if e.state != ExecState::Terminated {
                        f.subtract(&e.resources);
                    }
                }
            }
        }
        for o in self.offers.values() {
            if let Some(f) = free.get_mut(o.agent) {
                f.subtract(&o.res);
            }
        }
        free
    }

    pub(super) fn allocate(&mut self) {
        let now = Instant::now();
        let step = self.allocation_step().as_nanos();
        let past = now
            .saturating_duration_since(self.allocation_epoch)
            .as_nanos()
            / step;
        self.allocation_ticks = self.allocation_ticks.split_off(&(past + 1));
        let mut ids: Vec<String> = self
            .frameworks
            .values()
            .filter(|f| f.active && f.conn.is_some() && !f.suppressed)
            .map(|f| f.id.clone())
            .collect();
        for f in self.frameworks.values_mut() {
            f.filters.retain(|x| x.until > now);
        }
        if ids.is_empty() {
            // Suppressing stops offers, not inverse offers.
            self.send_inverse_offers();
            return;
        }
        // Rotate so that no framework always comes first.
        self.rotation = self.rotation.wrapping_add(1);
        let r = self.rotation % ids.len();
        ids.rotate_left(r);
        // Free resources once for all agents; agents with nothing left drop out of the
        // candidates, so that a cluster with everything offered or used costs little.
        let mut free = self.free_all();
        let mut candidates: Vec<usize> = (0..self.agents.len())
            .filter(|&a| self.agents[a].up && free[a].allocatable())
            .collect();
        for fw_id in ids {
            if candidates.is_empty() {
                break;
            }
            let Some(fw) = self.frameworks.get(&fw_id) else {
                continue;
            };
            let role = fw.role();
            let filtered: HashSet<usize> = fw
                .filters
                .iter()
                .filter(|f| free.get(f.agent).is_some_and(|r| f.res.contains(r)))
                .map(|f| f.agent)
                .collect();
            let mut batch = Vec::new();
            for &agent in &candidates {
                if filtered.contains(&agent) {
                    continue;
                }
                let res = free[agent].take_for(&role);
                if !res.allocatable() {
                    // All that is left is reserved for another role.
                    free[agent].add(&res);
                    continue;
                }
                let offer_id = format!("{}-O{}", self.master_id(), self.next_offer);
                self.next_offer += 1;
                let a = &self.agents[agent];
                let executor_ids = a
                    .frameworks
                    .get(&fw_id)
                    .map(|af| {
                        af.executors
                            .iter()
                            .filter(|(_, e)| e.state != ExecState::Terminated)
                            .map(|(id, _)| ExecutorID {
                                value: id.as_str().into(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                batch.push(Offer {
                    id: OfferID {
                        value: offer_id.as_str().into(),
                    },
                    framework_id: FrameworkID {
                        value: fw_id.as_str().into(),
                    },
                    agent_id: AgentID {
                        value: a.id.as_str().into(),
                    },
                    hostname: a.hostname.as_str().into(),
                    url: Some(Url {
                        scheme: "http".into(),
                        address: Address {
                            hostname: Some(a.hostname.as_str().into()),
                            ip: Some(a.ip.to_string().into()),
                            port: i32::from(a.port),
                        },
                        path: Some("/slave(1)".into()),
                        ..Default::default()
                    }),
                    domain: None,
                    unavailability: self.unavailability_of(agent).map(Box::new),
                    resources: res.to_proto(&role),
                    attributes: a.attributes.clone(),
                    executor_ids,
                    allocation_info: Some(resource::AllocationInfo {
                        role: Some(role.as_str().into()),
                    }),
                });
                self.offers.insert(
                    offer_id,
                    OfferRec {
                        framework: fw_id.clone(),
                        agent,
                        res,
                    },
                );
            }
            candidates.retain(|&a| free[a].allocatable());
            if !batch.is_empty() {
                // Like the master, one OFFERS event per framework and allocation.
                let mut ev = sched_event(event::Type::Offers);
                ev.offers = Some(event::Offers { offers: batch });
                self.send(&fw_id, &ev);
            }
        }
        // After the offers: a framework holding only an offer on a draining agent is asked too.
        self.send_inverse_offers();
    }

    /// The master's side of a status update from an agent.
    pub(super) fn master_update(&mut self, agent: usize, fw_id: &str, status: TaskStatus) {
        let Some(fw) = self.frameworks.get_mut(fw_id) else {
            log::info!("dropping update for removed framework {fw_id}");
            return;
        };
        let mut freed = false;
        if let Some(t) = fw.tasks.get_mut(status.task_id.value.as_str()) {
            if t.agent == agent {
                freed = !t.state.is_terminal() && status.state.is_terminal();
                t.state = status.state;
                t.update_uuid = status.uuid.as_ref().map(|u| u.0.clone());
                t.statuses.push(status.clone());
                if t.statuses.len() > MAX_STATUSES {
                    t.statuses.remove(0);
                }
            }
        }
        if freed {
            self.request_allocation();
        }
        self.send_update(fw_id, status);
    }

    fn framework_message(&mut self, fw_id: &str, m: call::Message) {
        let Some(agent) = self.agent_by_id(&m.agent_id.value) else {
            return;
        };
        let a = &self.agents[agent];
        if !a.up {
            return;
        }
        if a.synthetic {
            // An emulated executor that waits for plan changes follows the announcement.
            if let Some(plans) = &self.plans {
                plans.message(&m.executor_id.value, &m.data.0);
            }
            return;
        }
        let Some(e) = a
            .frameworks
            .get(fw_id)
            .and_then(|f| f.executors.get(m.executor_id.value.as_str()))
        else {
            return;
        };
        // As the agent's `schedulerMessage`: only a registered, running executor gets it;
        // for one that registers or terminates the message is dropped (best effort).
        if e.state != ExecState::Running {
            log::warn!(
                "dropping framework message for executor {} in state {}",
                m.executor_id.value,
                e.state.name()
            );
            return;
        }
        if let Some(conn) = &e.conn {
            let ev = executor::Event {
                r#type: Some(executor::event::Type::Message),
                message: Some(executor::event::Message { data: m.data }),
                ..Default::default()
            };
            let _ = conn.tx.send(frame(conn.encoding, &ev));
        }
    }
}

/// `/master/state` shows attributes as an object of name to value.
pub(super) fn attributes_json(attrs: &[Attribute]) -> Value {
    let mut m = serde_json::Map::new();
    for a in attrs {
        let v = match a.r#type {
            value::Type::Scalar => a.scalar.as_ref().map(|s| json!(s.value)),
            value::Type::Text => a.text.as_ref().map(|t| json!(t.value)),
            value::Type::Ranges => a.ranges.as_ref().map(|r| {
                json!(super::resources::ranges_text(
                    &r.range.iter().map(|x| (x.begin, x.end)).collect::<Vec<_>>()
                ))
            }),
            value::Type::Set => a
                .set
                .as_ref()
                .map(|s| json!(format!("{{{}}}", s.item.join(",")))),
            value::Type::Other(_) => None,
        };
        if let Some(v) = v {
            m.insert(a.name.to_string(), v);
        }
    }
    Value::Object(m)
}

/// The common ID rules Mesos applies to task, executor, agent and framework ids.
pub(super) fn validate_id(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("ID must not be empty".into());
    }
    if id.len() > 255 {
        return Some("ID must not be greater than 255 characters".into());
    }
    if id == "." || id == ".." {
        return Some(format!("'{id}' is disallowed"));
    }
    if id.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
        return Some(format!("'{id}' contains invalid characters"));
    }
    None
}

fn validate_command(cmd: &CommandInfo) -> Result<(), String> {
    let Some(env) = &cmd.environment else {
        return Ok(());
    };
    for v in &env.variables {
        match v.r#type {
            None | Some(environment::variable::Type::Value) => {
                if v.value.is_none() {
                    return Err(format!(
                        "Environment variable '{}' of type 'VALUE' must have a value set",
                        v.name
                    ));
                }
            }
            Some(environment::variable::Type::Secret) => {
                return Err(format!(
                    "Environment variable '{}' of type 'SECRET' must have a secret set",
                    v.name
                ));
            }
            _ => return Err("Environment variable of type 'UNKNOWN' is not allowed".into()),
        }
    }
    Ok(())
}

/// Two ExecutorInfos for the same id must agree, apart from what the master fills in.
fn same_executor(a: &ExecutorInfo, b: &ExecutorInfo) -> bool {
    let strip = |e: &ExecutorInfo| {
        let mut e = e.clone();
        e.framework_id = None;
        e
    };
    strip(a) == strip(b)
}

pub(super) fn uuid_text(bytes: &[u8]) -> String {
    uuid_string(bytes)
}

pub(super) fn fresh_uuid() -> [u8; 16] {
    uuid_v4()
}
