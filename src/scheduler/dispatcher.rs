//! The dispatcher thread: sole owner of the cluster model. It reacts to Mesos events (from
//! the subscription reader), to agent lists (from the agent watcher) and to its own relaunch
//! deadlines, decides, persists, and only then hands the resulting Calls to the sender.
//!
//! Write-ahead rule: a launch is saved (task id, executor secret, launch sequence) before
//! its ACCEPT leaves, and a status update is saved before its ACKNOWLEDGE leaves, so a
//! scheduler killed at any instant never launches a second executor on an agent and never
//! loses an update.

use crate::mesos::scheduler::{call, event, Call, Event};
use crate::mesos::types::{
    offer, AgentID, ExecutorID, Filters, FrameworkID, OfferID, TaskID, TaskState, TaskStatus,
};
use crate::scheduler::backoff::relaunch_delay;
use crate::scheduler::executors::{ExecutorApi, ExecutorRequest};
use crate::scheduler::launch::{self, LaunchContext};
use crate::scheduler::metrics::Metrics;
use crate::scheduler::model::{ClusterModel, Node, Persisted, Phase, TaskRecord, STATE_VERSION};
use crate::scheduler::placement::{self, Decision, Settings, EXECUTOR_PREFIX};
use crate::scheduler::sender::Outgoing;
use crate::secret::random_token;
use crate::store::{encode_versioned, Store};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use log::{debug, error, info, warn};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A task that ran this long before ending was stable: its node's failure count restarts.
const STABLE_RUN_MS: u64 = 10 * 60 * 1000;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An agent as the master lists it (from the agent watcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownAgent {
    pub id: String,
    pub hostname: String,
}

/// Everything the dispatcher reacts to.
#[derive(Debug)]
pub enum Input {
    /// The subscription reader is connected to `master` (SUBSCRIBE answered 200).
    Connected {
        master: String,
    },
    Event(Box<Event>),
    Disconnected {
        reason: String,
    },
    /// The master's current agents.
    Agents(Vec<KnownAgent>),
    /// A copy of the current view, for the REST server.
    View(Sender<Arc<View>>),
    /// A call of an executor on the scheduler's executor API (REST server).
    Executor(ExecutorRequest),
    /// SIGTERM/SIGINT: save and stop, leaving the framework and its executors in place.
    Shutdown,
}

/// What the REST server shows: a consistent copy of the model plus connection facts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct View {
    pub subscribed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnected_reason: Option<String>,
    pub suppressed: bool,
    pub model: ClusterModel,
    pub generated_ms: u64,
    /// This view as JSON, encoded once by the first REST request that needs it (off the
    /// dispatcher thread) and shared by every request that gets the same view.
    #[serde(skip)]
    pub json: crate::rest::JsonCache,
}

/// How the dispatcher ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Shutdown requested; state saved.
    Stopped,
    /// The master removed the framework (ERROR event); the stored id was cleared.
    Removed(String),
    /// The input channel closed (a thread died).
    Orphaned,
}

pub struct Dispatcher {
    state: Persisted,
    store: Box<dyn Store>,
    settings: Settings,
    ctx: LaunchContext,
    out: Sender<Outgoing>,
    metrics: Arc<Metrics>,
    /// Calls decided in this batch, released after the state is saved.
    pending: Vec<Call>,
    dirty: bool,
    subscribed: bool,
    master: Option<String>,
    disconnected_reason: Option<String>,
    suppressed: bool,
    /// `None` until the agent watcher has reported once: until then we cannot tell that
    /// every agent is covered, so offers stay unsuppressed.
    known_agents: Option<BTreeMap<String, KnownAgent>>,
    view: Option<Arc<View>>,
    executors: ExecutorApi,
    /// Task id -> agent id of every node's current launch: derived from the model (rebuilt
    /// when the model is replaced) so that a status update finds its node without a scan;
    /// 10,000 launches would otherwise cost 10,000 scans of 10,000 nodes.
    task_index: HashMap<String, String>,
}

fn index_tasks(model: &ClusterModel) -> HashMap<String, String> {
    model
        .nodes
        .values()
        .filter_map(|n| Some((n.task.as_ref()?.task_id.clone(), n.agent_id.clone())))
        .collect()
}

impl Dispatcher {
    pub fn new(
        state: Persisted,
        store: Box<dyn Store>,
        settings: Settings,
        ctx: LaunchContext,
        out: Sender<Outgoing>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let task_index = index_tasks(&state.model);
        Dispatcher {
            task_index,
            state,
            store,
            settings,
            ctx,
            out,
            metrics,
            pending: Vec::new(),
            dirty: false,
            subscribed: false,
            master: None,
            disconnected_reason: None,
            suppressed: false,
            known_agents: None,
            view: None,
            executors: ExecutorApi::new(),
        }
    }

    /// In experimental mode the MDM nodes' plans carry the gateway password (they create
    /// the cluster and install the gateway); nothing else ever receives it.
    pub fn set_mdm_gateway_password(&mut self, password: Option<crate::secret::Secret>) {
        self.executors.set_mdm_gateway_password(password);
    }

    /// Install settings for every node plan (issue 10).
    pub fn set_install_settings(&mut self, install: crate::scheduler::node_plan::InstallSettings) {
        self.executors.set_install_settings(install);
    }

    pub fn model(&self) -> &ClusterModel {
        &self.state.model
    }

    /// Runs until shutdown or framework removal. Waits on its inputs, or until the next
    /// relaunch deadline: no fixed-period polling.
    pub fn run(mut self, inputs: Receiver<Input>) -> Exit {
        loop {
            let timeout = self
                .next_deadline()
                .map(|t| Duration::from_millis(t.saturating_sub(now_ms())));
            let first = match timeout {
                Some(t) => inputs.recv_timeout(t),
                None => inputs.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let mut batch = Vec::new();
            match first {
                Ok(input) => batch.push(input),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush();
                    return Exit::Orphaned;
                }
            }
            // Take what else is queued so that one save covers the whole batch (a launch
            // wave of thousands of agents is a flood of updates: one save per event would
            // write the whole state thousands of times).
            while batch.len() < 4096 {
                match inputs.try_recv() {
                    Ok(i) => batch.push(i),
                    Err(_) => break,
                }
            }
            for input in batch {
                if let Some(exit) = self.handle(input) {
                    self.flush();
                    return exit;
                }
            }
            self.reconsider_offers();
            self.flush();
        }
    }

    /// Handles one input; `Some` ends the loop.
    pub fn handle(&mut self, input: Input) -> Option<Exit> {
        match input {
            Input::Connected { master } => {
                info!("connected to master {master}");
                self.master = Some(master);
                self.disconnected_reason = None;
                self.touch_view();
            }
            Input::Disconnected { reason } => {
                warn!("disconnected from master: {reason}");
                self.subscribed = false;
                self.disconnected_reason = Some(reason);
                self.touch_view();
            }
            Input::Agents(agents) => self.on_agents(agents),
            Input::View(reply) => {
                let _ = reply.send(self.view());
            }
            Input::Executor(req) => {
                if self.executors.handle(&mut self.state, req, now_ms()) {
                    self.dirty = true;
                }
                // Even a heartbeat changes what the view shows (last contact).
                self.touch_view();
            }
            Input::Shutdown => {
                info!("shutdown requested: saving state, leaving executors running");
                self.dirty = true;
                return Some(Exit::Stopped);
            }
            Input::Event(ev) => return self.on_event(*ev),
        }
        None
    }

    fn touch_view(&mut self) {
        self.view = None;
    }

    fn view(&mut self) -> Arc<View> {
        if let Some(v) = &self.view {
            return v.clone();
        }
        let v = Arc::new(View {
            subscribed: self.subscribed,
            master: self.master.clone(),
            disconnected_reason: self.disconnected_reason.clone(),
            suppressed: self.suppressed,
            model: self.state.model.clone(),
            generated_ms: now_ms(),
            json: Default::default(),
        });
        self.view = Some(v.clone());
        v
    }

    fn call(&mut self, t: call::Type) -> Call {
        Call {
            framework_id: self
                .state
                .model
                .framework_id
                .as_ref()
                .map(|id| FrameworkID {
                    value: id.as_str().into(),
                }),
            r#type: Some(t),
            ..Default::default()
        }
    }

    fn on_event(&mut self, ev: Event) -> Option<Exit> {
        let now = now_ms();
        let kind = ev.r#type.unwrap_or_default();
        match kind {
            event::Type::Subscribed => {
                if let Some(s) = ev.subscribed {
                    self.on_subscribed(s);
                }
            }
            event::Type::Offers => {
                if let Some(o) = ev.offers {
                    self.on_offers(o.offers, now);
                }
            }
            event::Type::Rescind => {
                if let Some(r) = ev.rescind {
                    debug!("offer {} rescinded", r.offer_id.value);
                }
            }
            event::Type::Update => {
                if let Some(u) = ev.update {
                    self.on_update(u.status, now);
                }
            }
            event::Type::Failure => {
                if let Some(f) = ev.failure {
                    self.on_failure(f, now);
                }
            }
            event::Type::Error => {
                let msg = ev
                    .error
                    .map(|e| e.message.to_string())
                    .unwrap_or_else(|| "no message".into());
                error!("master removed the framework: {msg}; clearing the stored framework id");
                self.state.model.framework_id = None;
                self.dirty = true;
                self.pending.clear();
                return Some(Exit::Removed(msg));
            }
            event::Type::Message => {
                if let Some(m) = ev.message {
                    debug!(
                        "message from executor {} on agent {} ({} bytes)",
                        m.executor_id.value,
                        m.agent_id.value,
                        m.data.0.len()
                    );
                }
            }
            event::Type::Heartbeat => debug!("heartbeat"),
            other => debug!("ignoring event {other}"),
        }
        None
    }

    fn on_subscribed(&mut self, s: event::Subscribed) {
        let id = s.framework_id.value.to_string();
        if self.state.model.framework_id.as_deref() != Some(id.as_str()) {
            info!("subscribed as framework {id} (new id)");
            self.state.model.framework_id = Some(id.clone());
        } else {
            info!("subscribed as framework {id} (re-used)");
        }
        self.ctx.framework_id = id;
        if let Some(h) = s.heartbeat_interval_seconds {
            self.state.model.heartbeat_secs = Some(h);
        }
        self.dirty = true;
        self.subscribed = true;
        // A new subscription starts unsuppressed.
        self.suppressed = false;
        self.touch_view();

        // Explicit reconciliation of what we believe is live, then implicit to learn of
        // tasks we do not know (a launch whose record was lost is killed when it shows up).
        let tasks: Vec<call::reconcile::Task> = self
            .state
            .model
            .nodes
            .values()
            .filter_map(|n| {
                let t = n.task.as_ref().filter(|t| t.is_active())?;
                Some(call::reconcile::Task {
                    task_id: TaskID {
                        value: t.task_id.as_str().into(),
                    },
                    agent_id: Some(AgentID {
                        value: n.agent_id.as_str().into(),
                    }),
                })
            })
            .collect();
        if !tasks.is_empty() {
            info!("reconciling {} known tasks", tasks.len());
            let mut c = self.call(call::Type::Reconcile);
            c.reconcile = Some(call::Reconcile { tasks });
            self.pending.push(c);
        }
        let mut c = self.call(call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile::default());
        self.pending.push(c);
    }

    fn on_offers(&mut self, offers: Vec<crate::mesos::types::Offer>, now: u64) {
        let decisions = placement::decide(&self.state.model, &offers, &self.settings, now);
        let before = self.state.clone();
        let mut accepts = Vec::new();
        let mut declines: BTreeMap<u64, (Vec<OfferID>, f64)> = BTreeMap::new();
        for (offer, decision) in offers.into_iter().zip(decisions) {
            match decision {
                Decision::Launch {
                    persona,
                    layout,
                    task_resources,
                    executor_resources,
                } => {
                    let secret = match random_token() {
                        Ok(s) => s,
                        Err(e) => {
                            error!(
                                "agent {}: cannot make an executor secret: {e}",
                                offer.hostname
                            );
                            declines
                                .entry(5000)
                                .or_insert((Vec::new(), 5.0))
                                .0
                                .push(offer.id);
                            continue;
                        }
                    };
                    self.state.model.launch_seq += 1;
                    let seq = self.state.model.launch_seq;
                    let agent = offer.agent_id.value.to_string();
                    let task = launch::task_info(
                        &self.ctx,
                        launch::Launch {
                            agent_id: &agent,
                            hostname: &offer.hostname,
                            seq,
                            persona,
                            task_resources,
                            executor_resources,
                            secret: secret.expose(),
                        },
                    );
                    let (task_id, executor_id) = launch::ids(&offer.hostname, seq);
                    info!(
                        "agent {} ({}): launching {persona} executor, task {task_id}",
                        offer.hostname, agent
                    );
                    self.state
                        .executor_secrets
                        .insert(executor_id.clone(), secret.expose().to_owned());
                    let node = self
                        .state
                        .model
                        .nodes
                        .entry(agent.clone())
                        .or_insert_with(|| Node::new(&agent, &offer.hostname, persona, now));
                    // The secret of the launch this one replaces is of no use any more.
                    if let Some(old) = node.task.take() {
                        self.state.executor_secrets.remove(&old.executor_id);
                        self.task_index.remove(&old.task_id);
                    }
                    self.task_index.insert(task_id.clone(), agent.clone());
                    node.hostname = offer.hostname.to_string();
                    node.persona = persona;
                    node.layout = layout;
                    node.phase = Phase::Launching;
                    node.retry_after_ms = None;
                    node.updated_ms = now;
                    node.task = Some(TaskRecord {
                        task_id,
                        executor_id,
                        state: TaskState::Staging.as_str().to_owned(),
                        launched_at_ms: now,
                        running_since_ms: None,
                    });
                    accepts.push((offer.id, task));
                }
                Decision::Decline {
                    reason,
                    refuse_seconds,
                } => {
                    debug!(
                        "declining offer {} for {refuse_seconds} s: {reason}",
                        offer.id.value
                    );
                    declines
                        .entry((refuse_seconds * 1000.0) as u64)
                        .or_insert((Vec::new(), refuse_seconds))
                        .0
                        .push(offer.id);
                }
            }
        }

        if !accepts.is_empty() {
            // Write ahead: the launches must be on disk before any ACCEPT leaves.
            if let Err(e) = self.save() {
                error!("cannot save state before launching ({e}); declining these offers instead");
                self.state = before;
                self.task_index = index_tasks(&self.state.model);
                for (id, _) in accepts.drain(..) {
                    declines.entry(5000).or_insert((Vec::new(), 5.0)).0.push(id);
                }
            }
        }
        for (offer_id, task) in accepts {
            let mut c = self.call(call::Type::Accept);
            c.accept = Some(call::Accept {
                offer_ids: vec![offer_id],
                operations: vec![offer::Operation {
                    r#type: Some(offer::operation::Type::Launch),
                    launch: Some(offer::operation::Launch {
                        task_infos: vec![task],
                    }),
                }],
                filters: Some(Filters {
                    refuse_seconds: Some(5.0),
                }),
            });
            self.metrics
                .offers_accepted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.pending.push(c);
        }
        for (_, (offer_ids, refuse)) in declines {
            self.metrics
                .offers_declined
                .fetch_add(offer_ids.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let mut c = self.call(call::Type::Decline);
            c.decline = Some(call::Decline {
                offer_ids,
                filters: Some(Filters {
                    refuse_seconds: Some(refuse),
                }),
            });
            self.pending.push(c);
        }
        self.touch_view();
    }

    fn on_update(&mut self, status: TaskStatus, now: u64) {
        let task_id = status.task_id.value.to_string();
        let state = status.state;
        let why = describe(&status);
        let agent = status.agent_id.as_ref().map(|a| a.value.to_string());
        let ours = self.task_index.get(&task_id).cloned();
        match ours.and_then(|a| self.state.model.nodes.get_mut(&a)) {
            Some(node) => {
                let host = node.hostname.clone();
                let Some(task) = node.task.as_mut() else {
                    return;
                };
                let was_active = task.is_active();
                task.state = state.as_str().to_owned();
                node.last_contact_ms = Some(now);
                node.updated_ms = now;
                match state {
                    TaskState::Running => {
                        task.running_since_ms.get_or_insert(now);
                        info!("agent {host}: task {task_id} running");
                    }
                    TaskState::Unreachable => {
                        warn!("agent {host}: task {task_id} unreachable ({why})");
                        node.phase = Phase::Lost;
                        node.last_error = Some(format!("TASK_UNREACHABLE: {why}"));
                    }
                    s if s.is_terminal() || matches!(s, TaskState::Unknown) => {
                        let stable = task
                            .running_since_ms
                            .is_some_and(|since| now.saturating_sub(since) >= STABLE_RUN_MS);
                        if was_active {
                            node.failures = if stable { 1 } else { node.failures + 1 };
                            let delay = relaunch_delay(node.failures);
                            node.retry_after_ms = Some(now + delay.as_millis() as u64);
                            warn!(
                                "agent {host}: task {task_id} ended {} ({why}); relaunch in {} s (failure {})",
                                state,
                                delay.as_secs(),
                                node.failures
                            );
                        }
                        node.phase = match s {
                            TaskState::Lost
                            | TaskState::Gone
                            | TaskState::GoneByOperator
                            | TaskState::Dropped
                            | TaskState::Unknown => Phase::Lost,
                            _ => Phase::Failed,
                        };
                        node.last_error = Some(format!("{state}: {why}"));
                    }
                    _ => debug!("agent {host}: task {task_id} {state}"),
                }
                self.dirty = true;
            }
            None => {
                // Not the current launch of any node: a leftover of an earlier launch (its
                // record lost or superseded). Keep every agent at one executor: kill it.
                if !state.is_terminal() && !matches!(state, TaskState::Unknown) {
                    let stray = task_id.starts_with("storage.");
                    if stray {
                        warn!(
                            "agent {}: task {task_id} is not the current launch; killing it",
                            agent.as_deref().unwrap_or("?")
                        );
                        let mut c = self.call(call::Type::Kill);
                        c.kill = Some(call::Kill {
                            task_id: status.task_id.clone(),
                            agent_id: status.agent_id.clone(),
                            kill_policy: None,
                        });
                        self.pending.push(c);
                    } else {
                        debug!("update for a task we did not launch: {task_id}");
                    }
                }
            }
        }
        if let Some(uuid) = status.uuid.clone() {
            match status.agent_id.clone() {
                Some(agent_id) => {
                    let mut c = self.call(call::Type::Acknowledge);
                    c.acknowledge = Some(call::Acknowledge {
                        agent_id,
                        task_id: status.task_id.clone(),
                        uuid,
                    });
                    self.pending.push(c);
                }
                None => {
                    warn!("update for {task_id} has a uuid but no agent id; cannot acknowledge")
                }
            }
        }
        self.touch_view();
    }

    fn on_failure(&mut self, f: event::Failure, now: u64) {
        let agent = f.agent_id.map(|a| a.value.to_string());
        match (f.executor_id, agent) {
            (Some(exec), agent) => {
                let status = f
                    .status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "?".into());
                warn!(
                    "executor {} on agent {} exited with status {status}",
                    exec.value,
                    agent.as_deref().unwrap_or("?")
                );
                if let Some(node) = agent.and_then(|a| self.state.model.nodes.get_mut(&a)) {
                    // A task that already ended said why (TASK_FAILED with the executor's
                    // reason); its executor's exit after that is no news.
                    if node
                        .task
                        .as_ref()
                        .is_some_and(|t| t.executor_id == exec.value.as_str() && t.is_active())
                    {
                        node.last_error = Some(format!("executor exited with status {status}"));
                        node.updated_ms = now;
                        self.dirty = true;
                    }
                }
            }
            (None, Some(agent)) => {
                warn!("agent {agent} lost");
                if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                    node.phase = Phase::Lost;
                    node.last_error = Some("agent lost".into());
                    node.updated_ms = now;
                    self.dirty = true;
                }
            }
            (None, None) => debug!("FAILURE event without agent or executor"),
        }
        self.touch_view();
    }

    fn on_agents(&mut self, agents: Vec<KnownAgent>) {
        let known: BTreeMap<String, KnownAgent> =
            agents.into_iter().map(|a| (a.id.clone(), a)).collect();
        let new: Vec<&KnownAgent> = known
            .values()
            .filter(|a| !self.state.model.nodes.contains_key(&a.id))
            .collect();
        if !new.is_empty() {
            info!(
                "{} agent(s) without a storage executor: {}",
                new.len(),
                new.iter()
                    .take(5)
                    .map(|a| a.hostname.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        self.known_agents = Some(known);
    }

    /// Whether some agent needs a launch now (not in backoff).
    fn needs_offers(&self, now: u64) -> bool {
        let Some(known) = &self.known_agents else {
            return true;
        };
        let model = &self.state.model;
        known.keys().any(|id| match model.nodes.get(id) {
            None => true,
            Some(n) => !n.covered() && n.retry_after_ms.is_none_or(|t| t <= now),
        })
    }

    /// The earliest relaunch deadline still ahead, if any node waits on one.
    fn next_deadline(&self) -> Option<u64> {
        let now = now_ms();
        self.state
            .model
            .nodes
            .values()
            .filter(|n| !n.covered())
            .filter_map(|n| n.retry_after_ms)
            .filter(|t| *t > now)
            .min()
    }

    /// SUPPRESS when every agent is covered (or waiting out its backoff); REVIVE when one
    /// needs us. Only while subscribed: the calls need a stream.
    fn reconsider_offers(&mut self) {
        if !self.subscribed {
            return;
        }
        let needs = self.needs_offers(now_ms());
        if needs && self.suppressed {
            info!("reviving offers: an agent needs a storage executor");
            let c = self.call(call::Type::Revive);
            self.pending.push(c);
            self.suppressed = false;
            self.touch_view();
        } else if !needs && !self.suppressed {
            info!("every agent is covered: suppressing offers");
            let c = self.call(call::Type::Suppress);
            self.pending.push(c);
            self.suppressed = true;
            self.touch_view();
        }
    }

    fn save(&mut self) -> Result<(), String> {
        let bytes = encode_versioned(STATE_VERSION, &self.state);
        self.store
            .save(&bytes)
            .map_err(|e| format!("{}: {e}", self.store.describe()))?;
        self.dirty = false;
        Ok(())
    }

    /// Saves if needed, then releases the pending calls. If the save fails, calls that
    /// acknowledge what could not be saved are held back (Mesos resends the updates).
    fn flush(&mut self) {
        let saved = if self.dirty {
            match self.save() {
                Ok(()) => true,
                Err(e) => {
                    error!("cannot save state: {e}");
                    false
                }
            }
        } else {
            true
        };
        // Executors hear back only after the save: an acknowledged report is a saved one
        // (after a failed save it stays in memory, marked dirty, for the next attempt).
        self.executors.after_batch(&self.state);
        for c in self.pending.drain(..) {
            if !saved && c.r#type == Some(call::Type::Acknowledge) {
                continue;
            }
            if self.out.send(Outgoing::Call(Box::new(c))).is_err() {
                error!("call sender is gone; dropping calls");
                break;
            }
        }
    }

    /// Executor ids of our tasks that hold their agent (for the REST authenticator).
    pub fn active_executors(&self) -> BTreeSet<String> {
        self.state
            .model
            .nodes
            .values()
            .filter_map(|n| n.task.as_ref().filter(|t| t.is_active()))
            .map(|t| t.executor_id.clone())
            .collect()
    }
}

/// One line about a status: message, reason and source when Mesos gave them.
fn describe(s: &TaskStatus) -> String {
    let mut parts = Vec::new();
    if let Some(m) = s.message.as_ref().filter(|m| !m.is_empty()) {
        parts.push(m.to_string());
    }
    if let Some(r) = s.reason {
        parts.push(r.to_string());
    }
    if let Some(src) = s.source {
        parts.push(src.to_string());
    }
    if parts.is_empty() {
        "no detail".into()
    } else {
        parts.join(", ")
    }
}

/// Executor ids look like `storage-executor.<host>.<seq>`; an id of another framework's
/// executor never matches.
pub fn is_our_executor(id: &ExecutorID) -> bool {
    id.value.starts_with(EXECUTOR_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::*;
    use crate::store::StoreError;
    use std::sync::Mutex;

    /// A store in memory that can be told to fail; the test keeps a handle on its bytes.
    struct MemStore {
        bytes: Arc<Mutex<Option<Vec<u8>>>>,
        fail: Arc<Mutex<bool>>,
    }

    impl Store for MemStore {
        fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(self.bytes.lock().unwrap().clone())
        }
        fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
            if *self.fail.lock().unwrap() {
                return Err(StoreError::Unsupported {
                    what: "disk full (test)".into(),
                });
            }
            *self.bytes.lock().unwrap() = Some(state.to_vec());
            Ok(())
        }
        fn describe(&self) -> String {
            "memory".into()
        }
    }

    struct Rig {
        d: Dispatcher,
        out: Receiver<Outgoing>,
        saved: Arc<Mutex<Option<Vec<u8>>>>,
        fail: Arc<Mutex<bool>>,
    }

    fn rig() -> Rig {
        let saved = Arc::new(Mutex::new(None));
        let fail = Arc::new(Mutex::new(false));
        let (tx, rx) = crossbeam_channel::unbounded();
        let d = Dispatcher::new(
            Persisted::default(),
            Box::new(MemStore {
                bytes: saved.clone(),
                fail: fail.clone(),
            }),
            Settings {
                experimental: false,
                cpu_mdm: 1.5,
                cpu_non: 0.5,
                mem_mdm: 3072.0,
                mem_non: 512.0,
                cpu_factor: 1.0,
                mem_factor: 1.0,
            },
            LaunchContext {
                framework_id: String::new(),
                scheduler_url: "http://sched:8080".into(),
                loglevel: "info".into(),
            },
            tx,
            Arc::new(Metrics::default()),
        );
        Rig {
            d,
            out: rx,
            saved,
            fail,
        }
    }

    impl Rig {
        fn input(&mut self, i: Input) -> Option<Exit> {
            let r = self.d.handle(i);
            self.d.reconsider_offers();
            self.d.flush();
            r
        }
        fn event(&mut self, ev: Event) -> Option<Exit> {
            self.input(Input::Event(Box::new(ev)))
        }
        fn calls(&self) -> Vec<Call> {
            self.out
                .try_iter()
                .filter_map(|o| match o {
                    Outgoing::Call(c) => Some(*c),
                    _ => None,
                })
                .collect()
        }
        fn saved_state(&self) -> Persisted {
            let bytes = self.saved.lock().unwrap().clone().expect("state saved");
            crate::store::decode_versioned(&bytes, STATE_VERSION).unwrap()
        }
    }

    fn subscribed(id: &str) -> Event {
        Event {
            r#type: Some(event::Type::Subscribed),
            subscribed: Some(event::Subscribed {
                framework_id: FrameworkID { value: id.into() },
                heartbeat_interval_seconds: Some(15.0),
                master_info: None,
            }),
            ..Default::default()
        }
    }

    fn offer(agent: &str) -> Offer {
        let scalar = |n: &str, v: f64| Resource {
            name: n.into(),
            r#type: value::Type::Scalar,
            scalar: Some(value::Scalar { value: v }),
            role: Some("*".into()),
            ..Default::default()
        };
        Offer {
            id: OfferID {
                value: format!("offer-{agent}-{}", now_ms()).into(),
            },
            framework_id: FrameworkID { value: "fw".into() },
            agent_id: AgentID {
                value: agent.into(),
            },
            hostname: format!("host-{agent}").into(),
            resources: vec![scalar("cpus", 4.0), scalar("mem", 8192.0)],
            ..Default::default()
        }
    }

    fn offers(agents: &[&str]) -> Event {
        Event {
            r#type: Some(event::Type::Offers),
            offers: Some(event::Offers {
                offers: agents.iter().map(|a| offer(a)).collect(),
            }),
            ..Default::default()
        }
    }

    fn update(task: &str, agent: &str, state: TaskState, uuid: bool) -> Event {
        Event {
            r#type: Some(event::Type::Update),
            update: Some(event::Update {
                status: TaskStatus {
                    task_id: TaskID { value: task.into() },
                    state,
                    agent_id: Some(AgentID {
                        value: agent.into(),
                    }),
                    uuid: uuid.then(|| crate::mesos::Bytes(vec![7; 16])),
                    message: Some("test".into()),
                    ..Default::default()
                },
            }),
            ..Default::default()
        }
    }

    fn launched_task(calls: &[Call]) -> Vec<(String, String)> {
        calls
            .iter()
            .filter_map(|c| c.accept.as_ref())
            .flat_map(|a| a.operations.iter())
            .filter_map(|o| o.launch.as_ref())
            .flat_map(|l| l.task_infos.iter())
            .map(|t| (t.task_id.value.to_string(), t.agent_id.value.to_string()))
            .collect()
    }

    fn known(agents: &[&str]) -> Input {
        Input::Agents(
            agents
                .iter()
                .map(|a| KnownAgent {
                    id: a.to_string(),
                    hostname: format!("host-{a}"),
                })
                .collect(),
        )
    }

    #[test]
    fn subscribe_persists_the_id_and_reconciles() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        assert_eq!(r.saved_state().model.framework_id.as_deref(), Some("fw-1"));
        let calls = r.calls();
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Reconcile)
            && c.framework_id.as_ref().unwrap().value == "fw-1"));
    }

    #[test]
    fn one_launch_per_agent_saved_before_accept() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.calls();
        r.event(offers(&["a1", "a2"]));
        let calls = r.calls();
        let launched = launched_task(&calls);
        assert_eq!(launched.len(), 2);
        // The saved state already holds both launches and their secrets.
        let saved = r.saved_state();
        for (task, agent) in &launched {
            let node = &saved.model.nodes[agent];
            assert_eq!(&node.task.as_ref().unwrap().task_id, task);
            assert!(saved
                .executor_secrets
                .contains_key(&node.task.as_ref().unwrap().executor_id));
        }
        // The same agents offered again are declined.
        r.event(offers(&["a1", "a2"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Decline)));
    }

    #[test]
    fn failed_store_declines_instead_of_launching() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.calls();
        *r.fail.lock().unwrap() = true;
        r.event(offers(&["a1"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Decline)));
        assert!(r.d.model().nodes.is_empty());
    }

    #[test]
    fn updates_are_acknowledged_after_saving() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (task, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&task, "a1", TaskState::Running, true));
        let calls = r.calls();
        let ack = calls
            .iter()
            .find_map(|c| c.acknowledge.as_ref())
            .expect("acknowledged");
        assert_eq!(ack.task_id.value, task.as_str());
        assert_eq!(ack.uuid.0, vec![7; 16]);
        assert_eq!(
            r.saved_state().model.nodes["a1"]
                .task
                .as_ref()
                .unwrap()
                .state,
            "TASK_RUNNING"
        );
        // No uuid (e.g. a reconciliation answer): nothing to acknowledge.
        r.event(update(&task, "a1", TaskState::Running, false));
        assert!(r.calls().iter().all(|c| c.acknowledge.is_none()));
        // A failed save holds the acknowledgement back: Mesos will resend.
        *r.fail.lock().unwrap() = true;
        r.event(update(&task, "a1", TaskState::Running, true));
        assert!(r.calls().iter().all(|c| c.acknowledge.is_none()));
    }

    #[test]
    fn an_executor_exit_after_its_task_failed_keeps_the_failure_reason() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (task, _) = launched_task(&r.calls()).remove(0);
        let executor = r.d.model().nodes["a1"]
            .task
            .as_ref()
            .unwrap()
            .executor_id
            .clone();
        r.event(update(&task, "a1", TaskState::Failed, true));
        r.event(Event {
            r#type: Some(event::Type::Failure),
            failure: Some(event::Failure {
                agent_id: Some(AgentID { value: "a1".into() }),
                executor_id: Some(crate::mesos::types::ExecutorID {
                    value: executor.as_str().into(),
                }),
                status: Some(0),
            }),
            ..Default::default()
        });
        let e = r.d.model().nodes["a1"].last_error.clone().unwrap();
        assert!(e.contains("TASK_FAILED: test"), "{e}");
    }

    #[test]
    fn failed_executor_is_relaunched_with_a_new_task_id_after_backoff() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (first, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&first, "a1", TaskState::Failed, true));
        let node = &r.d.model().nodes["a1"];
        assert_eq!(node.phase, Phase::Failed);
        assert_eq!(node.failures, 1);
        assert!(node.last_error.as_deref().unwrap().contains("TASK_FAILED"));
        let retry = node.retry_after_ms.unwrap();
        // Within the backoff the agent is declined.
        r.event(offers(&["a1"]));
        assert!(launched_task(&r.calls()).is_empty());
        // After it, a new launch with a new task id.
        r.d.state.model.nodes.get_mut("a1").unwrap().retry_after_ms = Some(retry - 60_000);
        r.event(offers(&["a1"]));
        let (second, agent) = launched_task(&r.calls()).remove(0);
        assert_eq!(agent, "a1");
        assert_ne!(first, second);
    }

    #[test]
    fn suppress_when_covered_and_revive_when_an_agent_needs_us() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.input(known(&["a1", "a2"]));
        r.event(offers(&["a1", "a2"]));
        let calls = r.calls();
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Suppress)));
        // A new agent appears: revive.
        r.input(known(&["a1", "a2", "a3"]));
        let calls = r.calls();
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Revive)));
        r.event(offers(&["a3"]));
        assert!(r
            .calls()
            .iter()
            .any(|c| c.r#type == Some(call::Type::Suppress)));
    }

    #[test]
    fn stray_task_is_killed() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(update("storage.host-a9.3", "a9", TaskState::Running, true));
        let calls = r.calls();
        let kill = calls.iter().find_map(|c| c.kill.as_ref()).expect("kill");
        assert_eq!(kill.task_id.value, "storage.host-a9.3");
        assert!(calls.iter().any(|c| c.acknowledge.is_some()));
    }

    #[test]
    fn error_event_clears_the_framework_id() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        let exit = r.event(Event {
            r#type: Some(event::Type::Error),
            error: Some(event::Error {
                message: "Framework has been removed".into(),
            }),
            ..Default::default()
        });
        assert_eq!(
            exit,
            Some(Exit::Removed("Framework has been removed".into()))
        );
        assert_eq!(r.saved_state().model.framework_id, None);
    }

    #[test]
    fn restart_restores_and_reconciles_known_tasks() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (task, _) = launched_task(&r.calls()).remove(0);
        let saved = r.saved_state();
        // A new dispatcher from the saved state re-subscribes with the same id.
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut d2 = Dispatcher::new(
            saved,
            Box::new(MemStore {
                bytes: r.saved.clone(),
                fail: r.fail.clone(),
            }),
            r.d.settings.clone(),
            r.d.ctx.clone(),
            tx,
            Arc::new(Metrics::default()),
        );
        assert_eq!(d2.model().framework_id.as_deref(), Some("fw-1"));
        d2.handle(Input::Event(Box::new(subscribed("fw-1"))));
        d2.flush();
        let reconcile: Vec<String> = rx
            .try_iter()
            .filter_map(|o| match o {
                Outgoing::Call(c) => c.reconcile,
                _ => None,
            })
            .flat_map(|r| r.tasks)
            .map(|t| t.task_id.value.to_string())
            .collect();
        assert_eq!(reconcile, vec![task]);
        // And offers from the same agent do not launch a second executor.
        d2.handle(Input::Event(Box::new(offers(&["a1"]))));
        d2.flush();
        assert!(rx
            .try_iter()
            .all(|o| !matches!(o, Outgoing::Call(c) if c.accept.is_some())));
    }
}
