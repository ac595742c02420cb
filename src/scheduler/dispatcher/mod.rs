//! The dispatcher thread: sole owner of the cluster model. It reacts to Mesos events (from
//! the subscription reader), to agent lists (from the agent watcher) and to its own relaunch
//! deadlines, decides, persists, and only then hands the resulting Calls to the sender.
//!
//! Write-ahead rule: a launch is saved (task id, executor secret, launch sequence) before
//! its ACCEPT leaves, and a status update is saved before its ACKNOWLEDGE leaves, so a
//! scheduler killed at any instant never launches a second executor on an agent and never
//! loses an update.

pub mod debug_tally;
pub mod executor_api;
pub mod faults;
mod parked;

use crate::clock::{self, Clock};
use crate::gateway::trust;
use crate::mesos::scheduler::{call, event, Call, Event};
use crate::mesos::types::{
    offer, AgentID, Filters, FrameworkID, OfferID, TaskID, TaskState, TaskStatus,
};
use crate::scheduler::dispatcher::executor_api::ExecutorApi;
use crate::scheduler::exchange::{CallOutcome, ExecutorCall, Input, KnownAgent, View};
use crate::scheduler::gateway_work::report::Report;
use crate::scheduler::master::sender::Outgoing;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::model::{ClusterModel, Node, Persisted, Phase, TaskRecord};
use crate::scheduler::persist::StateStore;
use crate::scheduler::placement::launch::{self, LaunchContext};
use crate::scheduler::placement::{self, Decision, Settings};
use crate::secret::random_token;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use log::{debug, error, info, warn};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

mod announce;
mod batch;
mod events;
mod health;
mod hosts;
mod maintenance;
mod offer_backlog;
mod offer_mode;
mod offers;
mod op_plan;
mod op_remove;
mod op_restart;
mod operator;
mod pending;
mod reconcile;
mod replace;
mod rollout;
mod secrets;
mod tasks;

use offer_mode::{Mode, OfferMode};
use reconcile::Reconciliation;

/// A task that ran this long before ending was stable: its node's failure count restarts.
const STABLE_RUN_MS: u64 = 10 * 60 * 1000;

/// How the dispatcher ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Shutdown requested; state saved.
    Stopped,
    /// The master removed the framework (ERROR event); the stored id was cleared.
    Removed(String),
    /// The master sent another ERROR ("Framework failed over": another instance subscribed
    /// with our id); the stored id is kept, since the framework and its executors live on.
    Error(String),
    /// The input channel closed (a thread died).
    Orphaned,
}

pub struct Dispatcher {
    state: Persisted,
    store: StateStore,
    settings: Settings,
    ctx: LaunchContext,
    out: Sender<Outgoing>,
    metrics: Arc<Metrics>,
    /// Calls decided in this batch, released after the state is saved.
    pending: pending::Pending,
    dirty: bool,
    subscribed: bool,
    master: Option<String>,
    disconnected_reason: Option<String>,
    offer_mode: OfferMode,
    recon: Reconciliation,
    /// Agents the master listed at its last report with no node then, less those launched
    /// on since (plus those whose launch was undone); `None` before the first report. Only these ids are kept: the
    /// managed ones are the nodes whose agent is not gone.
    unmanaged_agents: Option<BTreeSet<String>>,
    /// The view last handed out, for the next view request while nothing changed. Dropped
    /// before any other input is handled: a view holds every node, and the model's writes
    /// to nodes a view holds copy them (at 10,000 nodes, a health poll copied the model).
    view: Option<Arc<View>>,
    /// A view of `generation` was handed out: the next change makes a new generation.
    view_out: bool,
    /// The gateway worker's queue as the last view made showed it: the queue is no model
    /// write, so a change of it alone must move the generation too.
    shown_queue: crate::scheduler::gateway_work::report::AttachQueue,
    executors: ExecutorApi,
    /// Storage work for the gateway worker (see `gateway_work/`).
    storage: crate::scheduler::gateway_work::StorageSide,
    clock: Arc<dyn Clock>,
    /// Bumped whenever the view would show something new (see [`View::generation`]).
    generation: u64,
    /// Where executor secret changes go to the REST side (see `secrets.rs`).
    secret_feed: Option<Sender<crate::scheduler::exchange::SecretUpdate>>,
    /// Told each time a batch of inputs is taken: the subscription reader waits on it while
    /// too many of its events are queued (`master/subscription.rs`).
    taken: Option<Sender<()>>,
    /// Per-offer, per-update and per-call debug lines past a budget, counted.
    debug_tally: crate::scheduler::dispatcher::debug_tally::DebugTally,
    /// Offers not looked at yet: they wait for room in the launch window.
    offer_backlog: offer_backlog::OfferBacklog,
    /// ACCEPTs decided and not yet reported on by the sender.
    accepts_in_flight: usize,
    /// Executors quiet for too long get the address again (see `announce.rs`).
    reannounce: announce::Reannounce,
    /// The binary the REST server serves: each launch names its current digest.
    executor_binary: Option<Arc<crate::scheduler::executor_binary::ExecutorBinary>>,
    /// The `-health.*` thresholds, and when health was last reassessed (see `health.rs`).
    health: crate::scheduler::health::HealthSettings,
    health_checked_ms: u64,
    /// The next stale time as last computed, and the reassessment it followed: a bound
    /// never later than the exact one (see `health_deadline`).
    stale_at: std::cell::Cell<Option<(u64, u64)>>,
    /// The last walk of `next_deadline` (`offer_mode.rs`).
    node_deadlines: std::cell::Cell<Option<offer_mode::NodeDeadlines>>,
    /// The disruption budget's settings (see `rollout.rs`).
    gate: crate::scheduler::health::gate::GateSettings,
    /// When a waiting step last asked for a health poll.
    poll_asked_ms: u64,
    /// When `after_inputs` last walked the model, and how often it has (tests).
    walked_ms: u64,
    walks: u64,
    /// A batch of executor inputs wrote nodes and its walk was put off (`batch.rs`): due
    /// at the latest [`Dispatcher::walk_gap_ms`] after the last one.
    walk_owed: bool,
    /// Views asked for while the batch held unsaved changes: answered after the save, so
    /// that nothing (`/health` 200 included) shows what a crash could still lose.
    view_waiters: Vec<Sender<Arc<View>>>,
    /// Operator commands decided in this batch, answered after the save.
    operator_replies: Vec<(
        Sender<crate::scheduler::operator::Outcome>,
        crate::scheduler::operator::Outcome,
    )>,
    events: events::EventLog,
    /// `-node.max-failures` and the jitter of relaunch delays (see `op_plan.rs`).
    failure_budget: op_plan::FailureBudget,
    /// When the master last sent an inverse offer, per agent (see `maintenance.rs`).
    maintenance_asked: HashMap<String, u64>,
}

impl Dispatcher {
    pub fn new(
        state: Persisted,
        store: StateStore,
        settings: Settings,
        ctx: LaunchContext,
        out: Sender<Outgoing>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Dispatcher {
            state,
            store,
            settings,
            ctx,
            out,
            metrics,
            pending: Default::default(),
            dirty: false,
            subscribed: false,
            master: None,
            disconnected_reason: None,
            offer_mode: OfferMode::default(),
            recon: Reconciliation::default(),
            unmanaged_agents: None,
            view: None,
            view_out: false,
            shown_queue: Default::default(),
            executors: ExecutorApi::new(),
            storage: Default::default(),
            clock: clock::system(),
            generation: 0,
            secret_feed: None,
            taken: None,
            debug_tally: Default::default(),
            offer_backlog: Default::default(),
            accepts_in_flight: 0,
            executor_binary: None,
            reannounce: Default::default(),
            health: Default::default(),
            health_checked_ms: 0,
            stale_at: std::cell::Cell::new(None),
            node_deadlines: std::cell::Cell::new(None),
            gate: crate::scheduler::health::gate::GateSettings {
                max_disrupted_per_domain: 1,
                default_protection_domain: String::new(),
                default_pool: String::new(),
            },
            poll_asked_ms: 0,
            walked_ms: 0,
            walks: 0,
            walk_owed: false,
            view_waiters: Vec::new(),
            operator_replies: Vec::new(),
            events: Default::default(),
            failure_budget: Default::default(),
            maintenance_asked: HashMap::new(),
        }
    }

    /// Reads time from `clock` instead of the system clock (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Hands storage work to the gateway worker.
    pub fn set_storage(&mut self, storage: crate::scheduler::gateway_work::StorageSide) {
        self.storage = storage;
    }

    /// Install settings for every node plan.
    pub fn set_install_settings(&mut self, install: crate::scheduler::node_plan::InstallSettings) {
        self.executors.set_install_settings(install);
    }

    /// In experimental mode the MDM nodes' plans carry the gateway password (they create
    /// the cluster and install the gateway); nothing else ever receives it.
    pub fn set_mdm_gateway_password(&mut self, password: Option<crate::secret::Secret>) {
        self.executors.set_mdm_gateway_password(password);
    }

    pub fn set_taken_feed(&mut self, taken: Sender<()>) {
        self.taken = Some(taken);
    }

    pub fn model(&self) -> &ClusterModel {
        &self.state.model
    }

    /// Runs until shutdown or framework removal. Waits on its inputs, or until the next
    /// deadline (a relaunch, data turning stale): no fixed-period polling.
    pub fn run(mut self, inputs: Receiver<Input>) -> Exit {
        loop {
            let due = self.next_deadline();
            let timeout = due.map(|t| Duration::from_millis(t.saturating_sub(self.clock.now_ms())));
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
            if let Some(taken) = &self.taken {
                let _ = taken.try_send(());
            }
            if let Some(exit) = self.take_batch(batch, due) {
                return exit;
            }
        }
    }

    /// What is due after a batch of inputs (or a deadline): reconciliation, stuck launches,
    /// the offer mode, health whose data turned stale, storage work for the gateway worker.
    fn after_inputs(&mut self) {
        self.work_offer_backlog();
        self.reconcile_due();
        self.reannounce_to_quiet();
        self.reconsider_offers();
        self.reassess_health_when_stale();
        self.regrant();
        self.replace_executors();
        if self.storage.plan(&mut self.state.model) {
            self.dirty = true;
            self.touch_view();
        }
        if self.storage.queue() != self.shown_queue {
            self.touch_view();
        }
    }

    /// A call the sender reports on: the offer mode follows what the master took; a launch
    /// whose ACCEPT was not taken is asked about at once (it may or may not have reached
    /// the master), and replaced when the master says it does not know it.
    fn on_call_outcome(&mut self, o: CallOutcome) {
        let error = o.error.as_deref();
        let kind = o.call.r#type.unwrap_or_default();
        if kind == call::Type::Accept {
            self.accepts_in_flight = self.accepts_in_flight.saturating_sub(1);
        }
        if error.is_none()
            && self
                .debug_tally
                .note(self.clock.now_ms(), "call sent", || kind.as_str().into())
        {
            debug!(
                "{} sent to {}",
                kind.as_str(),
                self.master.as_deref().unwrap_or("the master")
            );
        }
        match kind {
            call::Type::Revive => self.on_mode_outcome(Mode::Revived, error),
            call::Type::Suppress => self.on_mode_outcome(Mode::Suppressed, error),
            call::Type::Accept => {
                let Some(e) = error else { return };
                let launched = o
                    .call
                    .accept
                    .iter()
                    .flat_map(|a| a.operations.iter())
                    .filter_map(|op| op.launch.as_ref())
                    .flat_map(|l| l.task_infos.iter());
                let tasks: Vec<(String, String)> = launched
                    .map(|t| (t.task_id.value.to_string(), t.agent_id.value.to_string()))
                    .collect();
                for (task, agent) in tasks {
                    warn!("agent {agent}: ACCEPT of task {task} was not taken ({e}); asking the master about it");
                    self.reconcile_task(&task, &agent);
                }
                // If the master never saw the ACCEPT, its offer is still outstanding and
                // holds the agent's resources: give it back (a used offer's DECLINE is
                // ignored by the master).
                let offer_ids: Vec<OfferID> =
                    o.call.accept.map(|a| a.offer_ids).unwrap_or_default();
                if !offer_ids.is_empty() {
                    let mut c = self.call(call::Type::Decline);
                    c.decline = Some(call::Decline {
                        offer_ids,
                        filters: Some(Filters {
                            refuse_seconds: Some(1.0),
                        }),
                    });
                    self.pending.push(c);
                }
            }
            // ACKNOWLEDGE: Mesos resends the update. DECLINE: the offer comes back. KILL of
            // a stray: it shows up again in reconciliation. RECONCILE: retried on its timer.
            _ => {}
        }
    }

    /// Handles one input; `Some` ends the loop.
    pub fn handle(&mut self, input: Input) -> Option<Exit> {
        if !matches!(input, Input::View(_)) {
            self.view = None;
        }
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
                self.offer_backlog.clear();
                self.disconnected_reason = Some(reason);
                self.touch_view();
            }
            Input::Agents(agents) => self.on_agents(agents),
            Input::View(reply) if self.dirty => self.view_waiters.push(reply),
            Input::View(reply) => {
                let _ = reply.send(self.view());
            }
            Input::Operator(req) => self.on_operator(req),
            Input::Executor(req) => {
                let host_report =
                    matches!(req.call, ExecutorCall::Health(_)).then(|| req.executor_id.clone());
                let disrupted = req.call.ends_a_disruptive_step();
                if self
                    .executors
                    .handle(&mut self.state, req, self.clock.now_ms())
                {
                    self.dirty = true;
                    if let Some(executor) = host_report {
                        self.reassess_host_reported(&executor);
                    }
                    if disrupted {
                        // The budget counts the node as not back until a poll sees it.
                        self.storage.poll_soon();
                    }
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
            Input::Offers(offers) => self.admit_encoded_offers(offers),
            Input::Storage(Report::Certificate {
                fingerprint,
                address,
            }) => {
                info!("{}", trust::first_use_line(fingerprint, &address));
                self.state.gateway_certificate = Some(fingerprint);
                self.dirty = true;
            }
            Input::Storage(Report::Health(poll)) => self.on_health_poll(&poll),
            Input::Storage(Report::HealthFailed { error, .. }) => self.on_health_failure(&error),
            Input::Storage(Report::Removed(r)) => self.on_removed(r),
            Input::Storage(report) => {
                if self.storage.on_report(&mut self.state.model, report) {
                    self.dirty = true;
                    self.touch_view();
                }
            }
            Input::CallOutcome(o) => self.on_call_outcome(o),
        }
        None
    }

    fn touch_view(&mut self) {
        self.view = None;
        if std::mem::take(&mut self.view_out) {
            self.generation += 1;
        }
    }

    fn view(&mut self) -> Arc<View> {
        if let Some(v) = &self.view {
            return v.clone();
        }
        self.shown_queue = self.storage.queue();
        let v = Arc::new(View {
            subscribed: self.subscribed,
            master: self.master.clone(),
            disconnected_reason: self.disconnected_reason.clone(),
            suppressed: self.offer_mode.suppressed(),
            attach_queue: self.shown_queue,
            model: self.state.model.clone(),
            generated_ms: self.clock.now_ms(),
            generation: self.generation,
            events: self.events.snapshot(),
        });
        self.view = Some(v.clone());
        self.view_out = true;
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
        let now = self.clock.now_ms();
        let kind = ev.r#type.unwrap_or_default();
        match kind {
            event::Type::Subscribed => {
                if let Some(s) = ev.subscribed {
                    self.on_subscribed(s);
                }
            }
            event::Type::Offers => {
                if let Some(o) = ev.offers {
                    self.admit_decoded_offers(o.offers);
                }
            }
            event::Type::InverseOffers => {
                if let Some(o) = ev.inverse_offers {
                    self.on_inverse_offers(o.inverse_offers);
                }
            }
            event::Type::RescindInverseOffer => {
                if let Some(r) = ev.rescind_inverse_offer {
                    self.on_inverse_offer_rescinded(&r.inverse_offer_id.value);
                }
            }
            event::Type::Rescind => {
                if let Some(r) = ev.rescind {
                    debug!("offer {} rescinded", r.offer_id.value);
                    self.offer_backlog.rescind(r.offer_id.value.as_str());
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
                self.pending.clear();
                if !crate::scheduler::master::subscription::is_removal(&msg) {
                    error!("master sent ERROR: {msg}; keeping the framework id and stopping");
                    self.dirty = true;
                    return Some(Exit::Error(msg));
                }
                error!("master removed the framework: {msg}; clearing the stored framework id");
                self.state.model.framework_id = None;
                self.dirty = true;
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
        // Offers of an earlier subscription are gone with it.
        self.offer_backlog.clear();
        if let Some(h) = s.heartbeat_interval_seconds {
            self.state.model.heartbeat_secs = Some(h);
        }
        self.dirty = true;
        self.subscribed = true;
        self.offer_mode.subscribed(self.clock.now_ms());
        self.touch_view();

        self.reconcile_all();
        self.announce_address();
    }

    fn on_agents(&mut self, agents: Vec<KnownAgent>) {
        self.follow_hosts(agents.iter().map(|a| (a.id.as_str(), a.hostname.as_str())));
        let known: HashSet<&str> = agents.iter().map(|a| a.id.as_str()).collect();
        self.retire_gone_nodes(&known);
        self.ask_about_unreachable(&known);
        self.end_quiet_maintenance(&known);
        // Only the unmanaged agents' ids are kept: host names matter only as they come
        // (above).
        let unmanaged: BTreeSet<String> = agents
            .iter()
            .filter(|a| !self.state.model.nodes.contains_key(&a.id))
            .map(|a| a.id.clone())
            .collect();
        // An agent seen for the first time (not at the first report: the REVIVE that report
        // makes wanted covers those, filters and all) needs offers, also from agents the
        // master filters.
        if let Some(before) = &self.unmanaged_agents {
            if unmanaged.iter().any(|id| !before.contains(id)) {
                self.offer_mode.new_agent();
            }
        }
        let new: Vec<&KnownAgent> = agents
            .iter()
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
        self.unmanaged_agents = Some(unmanaged);
    }

    fn save(&mut self) -> Result<(), String> {
        // Writes only the records that changed.
        self.store
            .save(&self.state)
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
                    self.executors.refuse_reports(&e);
                    false
                }
            }
        } else {
            true
        };
        // Executors hear back only after the save: an acknowledged report is a saved one
        // (after a failed save it stays in memory, marked dirty, for the next attempt, and
        // its sender was answered 503 above).
        self.executors.after_batch(&self.state, self.clock.now_ms());
        self.send_nudges();
        self.answer_operators(saved);
        for reply in std::mem::take(&mut self.view_waiters) {
            let _ = reply.send(self.view());
        }
        if saved && crate::scheduler::dispatcher::faults::hold_after_launch_save() {
            let accept = |c: &Call| c.r#type == Some(call::Type::Accept);
            if self.pending.iter().any(accept) {
                crate::scheduler::dispatcher::faults::hold("hold-after-launch-save");
            }
        }
        for o in self.pending.take() {
            let ack = |c: &Call| c.r#type == Some(call::Type::Acknowledge);
            if !saved && matches!(&o, Outgoing::Call(c) if ack(c)) {
                continue;
            }
            if self.out.send(o).is_err() {
                error!("call sender is gone; dropping calls");
                break;
            }
        }
    }
}

/// A dispatcher for the unit tests of this folder: default resources, a framework id, the
/// executor binary's digest known.
#[cfg(test)]
pub(super) fn test_dispatcher(
    state: Persisted,
    saved: &crate::store::MemoryStore,
) -> (Dispatcher, Receiver<Outgoing>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let d = Dispatcher::new(
        state,
        StateStore::new(Box::new(saved.clone())),
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
            api_url: "https://sched:8080".into(),
            fingerprint: "sha256:ab".into(),
            loglevel: "info".into(),
            executor_sha256: Some("0".repeat(64)),
            executor_gzipped: false,
        },
        tx,
        Arc::new(Metrics::default()),
    );
    (d, rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::*;
    use crate::store::MemoryStore;

    struct Rig {
        d: Dispatcher,
        out: Receiver<Outgoing>,
        saved: MemoryStore,
        clock: Arc<crate::clock::ManualClock>,
        /// Calls sent and not yet looked at by the test.
        sent: Vec<Call>,
        /// Plays the call sender: every REVIVE/SUPPRESS is reported taken at once.
        auto_outcomes: bool,
    }

    fn rig() -> Rig {
        let saved = MemoryStore::new();
        let (d, rx) = test_dispatcher(Persisted::default(), &saved);
        let clock = crate::clock::ManualClock::at(clock::SystemClock.now_ms());
        let d = d.with_clock(clock.clone());
        Rig {
            d,
            out: rx,
            saved,
            clock,
            sent: Vec::new(),
            auto_outcomes: true,
        }
    }

    impl Rig {
        fn input(&mut self, i: Input) -> Option<Exit> {
            let r = self.d.handle(i);
            self.d.after_inputs();
            self.d.flush();
            self.collect();
            r
        }
        /// Moves what the dispatcher sent into `sent`, answering REVIVE/SUPPRESS.
        fn collect(&mut self) {
            loop {
                let new: Vec<Call> = self
                    .out
                    .try_iter()
                    .filter_map(Outgoing::into_call)
                    .collect();
                if new.is_empty() {
                    return;
                }
                let modes: Vec<Call> = new
                    .iter()
                    .filter(|c| {
                        matches!(
                            c.r#type,
                            Some(call::Type::Revive) | Some(call::Type::Suppress)
                        )
                    })
                    .cloned()
                    .collect();
                self.sent.extend(new);
                if !self.auto_outcomes {
                    return;
                }
                for c in modes {
                    self.d.handle(Input::CallOutcome(CallOutcome {
                        call: Box::new(c),
                        error: None,
                    }));
                }
                self.d.after_inputs();
                self.d.flush();
            }
        }
        /// Lets `ms` pass and runs what falls due.
        fn advance(&mut self, ms: u64) {
            self.clock.advance(ms);
            self.d.after_inputs();
            self.d.flush();
            self.collect();
        }
        fn event(&mut self, ev: Event) -> Option<Exit> {
            self.input(Input::Event(Box::new(ev)))
        }
        fn calls(&mut self) -> Vec<Call> {
            self.collect();
            std::mem::take(&mut self.sent)
        }
        fn saved_state(&self) -> Persisted {
            StateStore::new(Box::new(self.saved.clone()))
                .load()
                .unwrap()
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
                value: format!("offer-{agent}-{}", clock::SystemClock.now_ms()).into(),
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

    /// The executor secret each launch of `calls` carries in its `TaskInfo.data`, by
    /// agent: the only copy of it that leaves the dispatcher (it keeps digests).
    /// Subscribed, one offer of a1 accepted: its launch's executor id and secret.
    fn launched_on_a1(r: &mut Rig) -> (String, crate::secret::Secret) {
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let secret = launched_secrets(&r.calls())
            .remove("a1")
            .expect("a1's secret");
        let node = &r.d.model().nodes["a1"];
        let executor_id = node.task.as_ref().unwrap().executor_id().into_owned();
        (executor_id, secret)
    }

    /// The task id of a launch on `a1`.
    fn launched_task_on_a1(r: &mut Rig) -> String {
        launched_on_a1(r);
        let task = r.d.model().nodes["a1"].task.as_ref().unwrap();
        task.task_id.to_string()
    }

    fn launched_secrets(
        calls: &[Call],
    ) -> std::collections::HashMap<String, crate::secret::Secret> {
        calls
            .iter()
            .filter_map(|c| c.accept.as_ref())
            .flat_map(|a| a.operations.iter())
            .filter_map(|o| o.launch.as_ref())
            .flat_map(|l| l.task_infos.iter())
            .map(|t| {
                let data: serde_json::Value =
                    serde_json::from_slice(&t.data.as_ref().expect("task data").0).unwrap();
                let secret = data[crate::contract::env::DATA_EXECUTOR_SECRET]
                    .as_str()
                    .expect("a secret");
                (
                    t.agent_id.value.to_string(),
                    crate::secret::Secret::new(secret),
                )
            })
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

    /// A regression: `/health` answered 200 from the view before the framework id was
    /// saved, so a scheduler stopped right then restarted without it and refused to run.
    #[test]
    fn a_view_asked_for_in_a_batch_with_unsaved_changes_waits_for_the_save() {
        let mut r = rig();
        r.d.handle(Input::Event(Box::new(subscribed("fw-1"))));
        let (tx, rx) = crossbeam_channel::bounded(1);
        r.d.handle(Input::View(tx));
        assert!(rx.try_recv().is_err(), "answered before the save");
        r.d.flush();
        let v = rx.try_recv().expect("answered after the save");
        assert!(v.subscribed);
        assert_eq!(r.saved_state().model.framework_id.as_deref(), Some("fw-1"));
        // Nothing unsaved: answered at once.
        let (tx, rx) = crossbeam_channel::bounded(1);
        r.d.handle(Input::View(tx));
        assert!(rx.try_recv().is_ok());
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
        // What a launch leaves of its agent is refused as a covered agent's offer is.
        for accept in calls.iter().filter_map(|c| c.accept.as_ref()) {
            let refuse = accept.filters.as_ref().and_then(|f| f.refuse_seconds);
            assert_eq!(refuse, Some(placement::REFUSE_COVERED_SECS));
        }
        // The saved state already holds both launches and their secrets.
        let saved = r.saved_state();
        for (task, agent) in &launched {
            let node = &saved.model.nodes[agent];
            assert_eq!(&*node.task.as_ref().unwrap().task_id, task);
            assert!(node.task.as_ref().unwrap().secret.is_some());
        }
        // The same agents offered again are declined.
        r.event(offers(&["a1", "a2"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Decline)));
    }

    #[test]
    fn an_agent_whose_launch_was_undone_still_needs_offers() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.input(known(&["a1"]));
        let now = r.d.clock.now_ms();
        assert!(r.d.needs_offers(now), "a1 has no node");
        r.saved.set_failing(true);
        r.event(offers(&["a1"]));
        assert!(launched_task(&r.calls()).is_empty());
        assert!(
            r.d.needs_offers(now),
            "the launch was undone: a1 has no node again"
        );
        r.saved.set_failing(false);
        r.event(offers(&["a1"]));
        assert_eq!(launched_task(&r.calls()).len(), 1);
        assert!(!r.d.needs_offers(now), "a1 is covered");
    }

    #[test]
    fn failed_store_declines_instead_of_launching() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.calls();
        r.saved.set_failing(true);
        r.event(offers(&["a1"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(calls.iter().any(|c| c.r#type == Some(call::Type::Decline)));
        assert!(r.d.model().nodes.is_empty());
    }

    #[test]
    fn a_relaunch_whose_save_fails_leaves_node_secrets_and_sequence_as_they_were() {
        let mut r = rig();
        let (feed_tx, feed) = crossbeam_channel::unbounded();
        r.d.set_secret_feed(feed_tx);
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (first, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&first, "a1", TaskState::Failed, true));
        r.d.state.model.nodes.get_mut("a1").unwrap().retry_after_ms = Some(0);
        let node_before = r.d.model().nodes["a1"].clone();
        let seq_before = r.d.model().launch_seq;
        r.calls();
        let _ = feed.try_iter().count();
        r.saved.set_failing(true);
        r.event(offers(&["a1"]));
        assert!(launched_task(&r.calls()).is_empty());
        assert_eq!(r.d.model().nodes["a1"], node_before);
        // The node compares with its launch's secret.
        assert!(node_before.task.as_ref().unwrap().secret.is_some());
        assert_eq!(r.d.model().launch_seq, seq_before);
        assert_eq!(
            tasks::current_launch_of(r.d.model(), &first, Some("a1")).as_deref(),
            Some("a1")
        );
        // The REST side heard the grant taken back, and the old secret known again.
        let updates: Vec<_> = feed.try_iter().collect();
        let last_for = |id: &str| {
            updates.iter().rev().find_map(|u| match u {
                crate::scheduler::exchange::SecretUpdate::Known { executor_id, .. }
                    if executor_id == id =>
                {
                    Some(true)
                }
                crate::scheduler::exchange::SecretUpdate::Forget { executor_id }
                    if executor_id == id =>
                {
                    Some(false)
                }
                _ => None,
            })
        };
        let old_exec = node_before
            .task
            .as_ref()
            .unwrap()
            .executor_id()
            .into_owned();
        assert_eq!(last_for(&old_exec), Some(true), "{updates:?}");
        let granted: Vec<&String> = updates
            .iter()
            .filter_map(|u| match u {
                crate::scheduler::exchange::SecretUpdate::Known { executor_id, .. }
                    if *executor_id != old_exec =>
                {
                    Some(executor_id)
                }
                _ => None,
            })
            .collect();
        assert_eq!(granted.len(), 1, "{updates:?}");
        assert_eq!(last_for(granted[0]), Some(false), "{updates:?}");
    }

    #[test]
    fn offers_beyond_what_may_wait_are_declined_for_a_moment() {
        use super::offer_backlog::{LAUNCH_WINDOW, MAX_WAITING, WINDOW_FULL_REFUSE_SECS};
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.calls();
        let agents: Vec<String> = (0..MAX_WAITING + 10).map(|i| format!("a{i}")).collect();
        let names: Vec<&str> = agents.iter().map(String::as_str).collect();
        r.event(offers(&names));
        let calls = r.calls();
        assert_eq!(launched_task(&calls).len(), LAUNCH_WINDOW);
        let declined: Vec<(f64, usize)> = calls
            .iter()
            .filter_map(|c| c.decline.as_ref())
            .map(|d| {
                let refuse = d.filters.as_ref().and_then(|f| f.refuse_seconds);
                (refuse.unwrap_or(0.0), d.offer_ids.len())
            })
            .collect();
        assert_eq!(declined, [(WINDOW_FULL_REFUSE_SECS, 10)]);
        assert_eq!(r.d.offer_backlog.len(), MAX_WAITING - LAUNCH_WINDOW);
    }

    /// A subscribed dispatcher offered `n` agents at once: the ACCEPTs of its first window.
    fn launch_wave(r: &mut Rig, n: usize) -> Vec<Call> {
        r.event(subscribed("fw-1"));
        r.calls();
        let agents: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
        let names: Vec<&str> = agents.iter().map(String::as_str).collect();
        r.event(offers(&names));
        r.calls()
            .into_iter()
            .filter(|c| c.r#type == Some(call::Type::Accept))
            .collect()
    }

    #[test]
    fn a_launch_wave_leaves_a_window_at_a_time() {
        use super::offer_backlog::LAUNCH_WINDOW;
        let mut r = rig();
        let n = LAUNCH_WINDOW + 100;
        let first = launch_wave(&mut r, n);
        assert_eq!(first.len(), LAUNCH_WINDOW);
        // Launched nodes only: the rest of the offers wait, undecided.
        assert_eq!(r.d.model().nodes.len(), LAUNCH_WINDOW);
        let sent = |r: &mut Rig, c: Call| {
            r.input(Input::CallOutcome(CallOutcome {
                call: Box::new(c),
                error: None,
            }))
        };
        let mut first = first.into_iter();
        for c in first.by_ref().take(LAUNCH_WINDOW / 2 - 1) {
            sent(&mut r, c);
        }
        assert!(
            launched_task(&r.calls()).is_empty(),
            "window not half empty yet"
        );
        sent(&mut r, first.next().unwrap());
        let more = launched_task(&r.calls());
        assert_eq!(more.len(), 100);
        assert_eq!(r.d.model().nodes.len(), n);
        assert_eq!(r.saved_state().model.nodes.len(), n);
    }

    /// A call's outcome puts the walks of a big cluster off (a wave of 10,000 launches is
    /// 10,000 ACCEPTs), but not the launch window: the outcome that makes room launches the
    /// waiting offers in its own batch.
    #[test]
    fn call_outcomes_put_the_walks_off_but_not_the_launch_window() {
        use super::offer_backlog::LAUNCH_WINDOW;
        let mut r = rig();
        let n = LAUNCH_WINDOW + 100;
        let first = launch_wave(&mut r, n);
        assert_eq!(first.len(), LAUNCH_WINDOW);
        assert!(
            r.d.walk_gap_ms() > 0,
            "a cluster big enough to put walks off"
        );
        r.d.take_batch(Vec::new(), None);
        let walked = r.d.walks();
        for c in first {
            let outcome = Input::CallOutcome(CallOutcome {
                call: Box::new(c),
                error: None,
            });
            let due = r.d.next_deadline();
            assert!(r.d.take_batch(vec![outcome], due).is_none());
        }
        assert_eq!(r.d.walks(), walked, "every outcome's walk put off");
        assert!(r.d.owed_walk_deadline().is_some());
        assert_eq!(
            launched_task(&r.calls()).len(),
            100,
            "the window's room used"
        );
        assert_eq!(r.d.model().nodes.len(), n);
    }

    /// The dispatcher keeps the last view for the next request, but not past another
    /// input: its writes to nodes the view holds would copy them (a health poll, the model).
    /// Its generation still moves with the first change after it was handed out.
    #[test]
    fn a_view_handed_out_makes_no_later_write_copy_a_node() {
        let mut r = rig();
        let task = launched_task_on_a1(&mut r);
        let view = |r: &mut Rig| {
            let (tx, rx) = crossbeam_channel::bounded(1);
            r.input(Input::View(tx));
            rx.try_recv().expect("a view")
        };
        let first = view(&mut r).generation;
        assert_eq!(view(&mut r).generation, first, "nothing changed");
        let at = |r: &Rig| Arc::as_ptr(r.d.state.model.nodes.get_shared("a1").unwrap());
        let before = at(&r);
        r.event(update(&task, "a1", TaskState::Running, true));
        assert_eq!(at(&r), before, "written in place");
        assert!(view(&mut r).generation > first);
    }

    /// Nodes whose disks wait for a place in the gateway worker's queue have no storage
    /// state of their own: the view (`/api/state`, the status page) counts them.
    #[test]
    fn the_view_counts_the_nodes_waiting_for_the_gateway_worker() {
        use crate::scheduler::gateway_work::{report::AttachQueue, StorageSide, MAX_UNREPORTED};
        use crate::scheduler::model::Persona;
        let mut r = rig();
        let (tx, _jobs) = crossbeam_channel::unbounded();
        r.d.set_storage(StorageSide::new(tx, "pd", "sp"));
        let view = |r: &mut Rig| {
            let (tx, rx) = crossbeam_channel::bounded(1);
            r.input(Input::View(tx));
            rx.try_recv().expect("a view")
        };
        let idle = view(&mut r);
        assert!(idle.attach_queue.is_idle());
        let json = serde_json::to_value(&*idle).unwrap();
        assert!(json.get("attach_queue").is_none(), "absent when idle");
        for i in 0..MAX_UNREPORTED + 3 {
            let agent = format!("a{i}");
            let mut n = Node::new(&agent, &format!("h{i}"), Persona::Data, 0);
            n.task = Some(TaskRecord::new(
                &format!("t{i}"),
                &format!("e{i}"),
                TaskState::Running,
                0,
            ));
            n.phase = Phase::StorageAttach;
            n.devices = vec!["/dev/sdb".into()];
            n.ip = Some(format!("10.0.{}.{}", i / 200, i % 200 + 1).into());
            r.d.state.model.nodes.insert(agent, n);
        }
        r.d.after_inputs();
        let v = view(&mut r);
        let expected = AttachQueue {
            with_worker: MAX_UNREPORTED,
            waiting: 3,
        };
        assert_eq!(v.attach_queue, expected);
        let json = serde_json::to_value(&*v).unwrap();
        assert_eq!(json["attach_queue"]["waiting"], 3);
        assert!(v.generation > idle.generation);
        // A plan that moves only the queue (a waiting node lost its address: no write of the
        // plan's) still makes a new generation, which readers key their caches by.
        let waiting = r.d.state.model.nodes.keys().last().unwrap().to_string();
        r.d.state.model.nodes.get_mut(&waiting).unwrap().ip = None;
        r.d.view = None;
        r.d.after_inputs();
        let again = view(&mut r);
        assert_eq!(again.attach_queue.waiting, 2);
        assert!(
            again.generation > v.generation,
            "the same generation, another queue"
        );
    }

    /// Reconciliation after a restart answers every task: at 10,000 agents, 20,000 lines at
    /// info that said nothing new.
    #[test]
    fn a_task_running_again_as_known_is_logged_at_debug_a_new_running_at_info() {
        let mut r = rig();
        let task = launched_task_on_a1(&mut r);
        crate::logging::capture::start();
        let running_lines = |lines: Vec<(log::Level, String)>| -> Vec<log::Level> {
            let about = format!("task {task} running");
            lines
                .into_iter()
                .filter(|(_, l)| l.contains(&about))
                .map(|(level, _)| level)
                .collect()
        };
        r.event(update(&task, "a1", TaskState::Running, true));
        assert_eq!(
            running_lines(crate::logging::capture::take()),
            [log::Level::Info]
        );
        r.event(update(&task, "a1", TaskState::Running, false));
        assert_eq!(
            running_lines(crate::logging::capture::take()),
            [log::Level::Debug]
        );
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
            TaskState::Running
        );
        // No uuid (e.g. a reconciliation answer): nothing to acknowledge.
        r.event(update(&task, "a1", TaskState::Running, false));
        assert!(r.calls().iter().all(|c| c.acknowledge.is_none()));
        // A failed save holds the acknowledgement back: Mesos will resend. (A change: a
        // repeat of a saved update writes nothing and may be acknowledged.)
        r.saved.set_failing(true);
        r.event(update(&task, "a1", TaskState::Failed, true));
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
            .executor_id()
            .into_owned();
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

    /// A stray task is killed and its executor shut down; an offer naming an old
    /// executor of ours gets it shut down, the current one is left alone.
    #[test]
    fn stray_executors_are_shut_down() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(update("storage.host-a9.3", "a9", TaskState::Running, true));
        let calls = r.calls();
        let shutdown = calls
            .iter()
            .find_map(|c| c.shutdown.as_ref())
            .expect("shutdown");
        assert_eq!(shutdown.executor_id.value, "storage-executor.host-a9.3");
        assert_eq!(shutdown.agent_id.value, "a9");

        r.event(offers(&["a1"]));
        let current = r.d.model().nodes["a1"]
            .task
            .clone()
            .unwrap()
            .executor_id()
            .into_owned();
        let mut ev = offers(&["a1"]);
        let o = &mut ev.offers.as_mut().unwrap().offers[0];
        o.executor_ids = vec![
            ExecutorID {
                value: current.as_str().into(),
            },
            ExecutorID {
                value: "storage-executor.host-a1.0".into(),
            },
            ExecutorID {
                value: "someone-else".into(),
            },
        ];
        r.calls();
        r.event(ev);
        let shut: Vec<String> = r
            .calls()
            .iter()
            .filter_map(|c| c.shutdown.as_ref())
            .map(|s| s.executor_id.value.to_string())
            .collect();
        assert_eq!(shut, vec!["storage-executor.host-a1.0".to_string()]);
    }

    /// A host that comes back under a new agent id keeps its node (persona,
    /// devices, attachments) and is relaunched there; a node gone too long is retired.
    #[test]
    fn nodes_follow_hosts_across_new_agent_ids() {
        let mut r = rig();
        let (feed_tx, feed) = crossbeam_channel::unbounded();
        r.d.set_secret_feed(feed_tx);
        let forgotten = |feed: &Receiver<crate::scheduler::exchange::SecretUpdate>| -> Vec<String> {
            feed.try_iter()
                .filter_map(|u| match u {
                    crate::scheduler::exchange::SecretUpdate::Forget { executor_id } => {
                        Some(executor_id)
                    }
                    _ => None,
                })
                .collect()
        };
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (first, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&first, "a1", TaskState::Running, true));
        assert!(forgotten(&feed).is_empty());
        {
            let n = r.d.state.model.nodes.get_mut("a1").unwrap();
            n.persona = crate::scheduler::model::Persona::Primary;
            n.devices = vec!["/dev/sdb".into()];
            n.attached = vec!["/dev/sdb".into()];
        }
        // The host rebooted: agent a1b on host-a1, first seen in the master's agent list.
        r.input(Input::Agents(vec![KnownAgent {
            id: "a1b".into(),
            hostname: "host-a1".into(),
        }]));
        // The moved node's old launch is revoked (its agent, and executor, are gone).
        let first_executor = crate::contract::ids::executor_of_task(&first).unwrap();
        assert_eq!(forgotten(&feed), std::slice::from_ref(&first_executor));
        let moved = r.d.model().nodes["a1b"].task.clone().unwrap();
        assert_eq!(moved.state, TaskState::Gone);
        assert!(moved.secret.is_none());
        let mut ev = offers(&["a1b"]);
        ev.offers.as_mut().unwrap().offers[0].hostname = "host-a1".into();
        r.event(ev);
        let model = r.d.model();
        assert!(!model.nodes.contains_key("a1"), "the old node stayed");
        let n = &model.nodes["a1b"];
        assert_eq!(n.hostname, "host-a1");
        assert_eq!(n.persona, crate::scheduler::model::Persona::Primary);
        assert_eq!(n.attached, vec!["/dev/sdb".to_string()]);
        let (second, agent) = launched_task(&r.calls()).remove(0);
        assert_eq!(agent, "a1b");
        assert_ne!(second, first);
        assert!(forgotten(&feed).is_empty(), "revoked once");
        assert!(r.saved_state().executor_secret(&first_executor).is_none());

        // An agent the master stops listing: retired after the grace period.
        r.event(offers(&["a2"]));
        let (t2, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&t2, "a2", TaskState::Lost, true));
        r.input(known(&["a1b"]));
        assert!(r.d.model().nodes.contains_key("a2"));
        let _ = forgotten(&feed);
        r.clock.advance(hosts::RETIRE_AFTER_MS);
        r.input(known(&["a1b"]));
        assert!(
            !r.d.model().nodes.contains_key("a2"),
            "gone node not retired"
        );
        assert!(r.d.model().nodes.contains_key("a1b"));
        // Retiring the node revokes its last launch's secret.
        let t2_executor = crate::contract::ids::executor_of_task(&t2).unwrap();
        assert_eq!(forgotten(&feed), [t2_executor]);
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
    fn failed_over_error_keeps_the_framework_id() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        let exit = r.event(Event {
            r#type: Some(event::Type::Error),
            error: Some(event::Error {
                message: "Framework failed over".into(),
            }),
            ..Default::default()
        });
        assert_eq!(exit, Some(Exit::Error("Framework failed over".into())));
        assert_eq!(r.saved_state().model.framework_id.as_deref(), Some("fw-1"));
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
            StateStore::new(Box::new(r.saved.clone())),
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

    /// An executor report whose save failed is answered 503, never "recorded".
    #[test]
    fn executor_report_is_not_recorded_when_the_save_fails() {
        use crate::scheduler::exchange::{ExecutorCall, ExecutorReply, ExecutorRequest};
        let mut r = rig();
        let (executor_id, secret) = launched_on_a1(&mut r);
        let report = |r: &mut Rig| {
            let (tx, rx) = crossbeam_channel::unbounded();
            r.input(Input::Executor(ExecutorRequest {
                executor_id: executor_id.clone(),
                secret: secret.clone(),
                call: ExecutorCall::phase_from_json(br#"{"phase":"packages"}"#).unwrap(),
                reply: tx.into(),
            }));
            rx.try_recv().expect("answered")
        };
        r.saved.set_failing(true);
        match report(&mut r) {
            ExecutorReply::Failed(e) => assert_eq!(e.status, 503, "{e}"),
            other => panic!("a report that was not saved got {other:?}"),
        }
        r.saved.set_failing(false);
        assert!(matches!(report(&mut r), ExecutorReply::Recorded));
        assert_eq!(r.saved_state().model.nodes["a1"].phase, Phase::Packages);
    }

    fn has(calls: &[Call], t: call::Type) -> bool {
        calls.iter().any(|c| c.r#type == Some(t))
    }

    fn reconciled_tasks(calls: &[Call]) -> Vec<String> {
        calls
            .iter()
            .filter_map(|c| c.reconcile.as_ref())
            .flat_map(|r| r.tasks.iter())
            .map(|t| t.task_id.value.to_string())
            .collect()
    }

    /// A covered agent was declined for an hour; when its executor fails, only a
    /// REVIVE brings its offers back before that, suppressed or not.
    #[test]
    fn relaunch_revives_even_when_offers_are_not_suppressed() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        // a2 is never offered (it cannot take a launch): offers stay unsuppressed.
        r.input(known(&["a1", "a2"]));
        r.event(offers(&["a1"]));
        let (task, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&task, "a1", TaskState::Running, true));
        assert!(!r.d.offer_mode.suppressed());
        r.advance(10_000);
        r.calls();
        r.event(update(&task, "a1", TaskState::Failed, true));
        assert!(
            !has(&r.calls(), call::Type::Revive),
            "revived during the backoff"
        );
        // The backoff (5 s) ends: a1 newly needs a launch.
        r.advance(5_000);
        assert!(
            has(&r.calls(), call::Type::Revive),
            "no REVIVE for the relaunch"
        );
        // Rate-limited: a second node needing a launch right after waits its turn.
        r.input(known(&["a1", "a2", "a3"]));
        assert!(!has(&r.calls(), call::Type::Revive));
        r.advance(5_000);
        assert!(has(&r.calls(), call::Type::Revive));
    }

    /// The offer mode is believed only once the master took the call; a lost one
    /// is sent again, and every SUBSCRIBED re-sends the wanted mode.
    #[test]
    fn lost_offer_mode_calls_are_sent_again() {
        let mut r = rig();
        r.auto_outcomes = false;
        r.input(known(&["a1"]));
        r.event(subscribed("fw-1"));
        let calls = r.calls();
        let revive = calls
            .into_iter()
            .find(|c| c.r#type == Some(call::Type::Revive))
            .expect("the wanted mode is sent after SUBSCRIBED");
        r.input(Input::CallOutcome(CallOutcome {
            call: Box::new(revive.clone()),
            error: Some("connection reset".into()),
        }));
        assert!(
            !has(&r.calls(), call::Type::Revive),
            "retried without a pause"
        );
        r.advance(1_000);
        assert!(
            has(&r.calls(), call::Type::Revive),
            "lost REVIVE not resent"
        );
        r.input(Input::CallOutcome(CallOutcome {
            call: Box::new(revive),
            error: None,
        }));
        // Every agent covered: SUPPRESS, but not believed before the master took it.
        r.input(known(&["a1"]));
        r.event(offers(&["a1"]));
        let suppress = r
            .calls()
            .into_iter()
            .find(|c| c.r#type == Some(call::Type::Suppress))
            .expect("suppress");
        assert!(!r.d.view().suppressed);
        r.input(Input::CallOutcome(CallOutcome {
            call: Box::new(suppress),
            error: None,
        }));
        assert!(r.d.view().suppressed);
        // A new subscription: the wanted mode again.
        r.event(subscribed("fw-1"));
        assert!(has(&r.calls(), call::Type::Suppress));
    }

    /// The subscription leaves offers suppressed: they are revived for an agent without a
    /// node once the agent watcher lists one, or, when no list comes, after the wait.
    #[test]
    fn a_subscription_revives_offers_for_listed_agents_or_after_waiting_for_a_list() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        let calls = r.calls();
        assert!(
            !has(&calls, call::Type::Revive),
            "revived for unseen agents"
        );
        assert!(has(&calls, call::Type::Suppress), "the wanted mode is sent");
        r.input(known(&["a1"]));
        assert!(
            has(&r.calls(), call::Type::Revive),
            "a listed agent needs offers"
        );

        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.calls();
        r.advance(29_999);
        assert!(
            !has(&r.calls(), call::Type::Revive),
            "revived before the wait"
        );
        r.advance(1);
        assert!(
            has(&r.calls(), call::Type::Revive),
            "no agent list: offers revived after the wait"
        );
    }

    /// An ACCEPT the master did not take leaves the task in STAGING: the master is
    /// asked about it at once, and the node is relaunched when the master does not know it.
    #[test]
    fn lost_accept_is_reconciled_and_replaced() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.calls();
        r.event(offers(&["a1"]));
        let calls = r.calls();
        let (task, _) = launched_task(&calls)[0].clone();
        let accept = calls
            .into_iter()
            .find(|c| c.accept.is_some())
            .expect("accept");
        r.input(Input::CallOutcome(CallOutcome {
            call: Box::new(accept),
            error: Some("timed out".into()),
        }));
        let calls = r.calls();
        assert_eq!(reconciled_tasks(&calls), vec![task.clone()]);
        assert!(
            has(&calls, call::Type::Decline),
            "the offer was not given back"
        );
        r.event(update(&task, "a1", TaskState::Unknown, false));
        let node = &r.d.model().nodes["a1"];
        assert!(!node.covered());
        assert!(node.retry_after_ms.is_some());
        r.advance(6_000);
        r.event(offers(&["a1"]));
        let (second, _) = launched_task(&r.calls()).remove(0);
        assert_ne!(second, task);
    }

    /// Explicit reconciliation is repeated with backoff until every task has an
    /// answer; implicit reconciliation runs every 15 minutes.
    #[test]
    fn reconciliation_is_repeated_until_answered() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1", "a2"]));
        let tasks = launched_task(&r.calls());
        for (t, a) in &tasks {
            r.event(update(t, a, TaskState::Running, true));
        }
        // A master failover: the scheduler subscribes again and asks about both.
        r.event(subscribed("fw-1"));
        assert_eq!(reconciled_tasks(&r.calls()).len(), 2);
        // a1's agent answers; a2's has not re-registered yet.
        r.event(update(&tasks[0].0, "a1", TaskState::Running, false));
        r.advance(5_000);
        assert_eq!(reconciled_tasks(&r.calls()), vec![tasks[1].0.clone()]);
        // Backoff doubles: nothing after another 5 s, again after 10.
        r.advance(5_000);
        assert!(reconciled_tasks(&r.calls()).is_empty());
        r.advance(5_000);
        assert_eq!(reconciled_tasks(&r.calls()), vec![tasks[1].0.clone()]);
        r.event(update(&tasks[1].0, "a2", TaskState::Running, false));
        r.advance(60_000);
        assert!(!has(&r.calls(), call::Type::Reconcile));
        // Implicit reconciliation (no tasks listed) every 15 minutes.
        r.advance(reconcile::IMPLICIT_EVERY_MS);
        let calls = r.calls();
        assert!(calls
            .iter()
            .any(|c| c.reconcile.as_ref().is_some_and(|r| r.tasks.is_empty())));
    }

    /// A launch stuck in TASK_STAGING is killed and the node relaunched.
    #[test]
    fn launch_stuck_in_staging_is_killed_and_replaced() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        let (task, _) = launched_task(&r.calls()).remove(0);
        r.advance(reconcile::STAGING_TIMEOUT_MS - 1_000);
        assert!(r.calls().iter().all(|c| c.kill.is_none()));
        r.advance(1_000);
        let calls = r.calls();
        let kill = calls.iter().find_map(|c| c.kill.as_ref()).expect("kill");
        assert_eq!(kill.task_id.value, task.as_str());
        let node = &r.d.model().nodes["a1"];
        assert!(!node.covered());
        assert!(node.last_error.as_deref().unwrap().contains("TASK_STAGING"));
        r.advance(6_000);
        r.event(offers(&["a1"]));
        let (second, _) = launched_task(&r.calls()).remove(0);
        assert_ne!(second, task);
    }

    /// The deadlines found by walking every node are kept while no node is written, added or
    /// removed, and a relaunch's only while it lies ahead: each change is seen at once.
    #[test]
    fn node_deadlines_follow_every_write_removal_and_the_clock() {
        let mut r = rig();
        launched_on_a1(&mut r);
        let now = r.d.clock.now_ms();
        let launched = r.d.model().nodes["a1"]
            .task
            .as_ref()
            .unwrap()
            .launched_at_ms;
        let timeout = launched + reconcile::STAGING_TIMEOUT_MS;
        assert_eq!(r.d.node_deadlines(now).staging, Some(timeout));
        let set_state = |r: &mut Rig, state: TaskState| {
            let node = r.d.state.model.nodes.get_mut("a1").unwrap();
            node.task.as_mut().unwrap().state = state;
        };
        set_state(&mut r, TaskState::Running);
        assert_eq!(r.d.node_deadlines(now).staging, None, "a write");
        set_state(&mut r, TaskState::Staging);
        assert_eq!(r.d.node_deadlines(now).staging, Some(timeout));
        let node = r.d.state.model.nodes.remove("a1").unwrap();
        assert_eq!(r.d.node_deadlines(now).staging, None, "a removal");

        let mut node = node;
        node.task = None;
        node.retry_after_ms = Some(now + 100);
        r.d.state.model.nodes.insert("a1", node);
        assert_eq!(r.d.node_deadlines(now).relaunch, Some(now + 100));
        assert_eq!(r.d.node_deadlines(now + 99).relaunch, Some(now + 100));
        assert_eq!(r.d.node_deadlines(now + 100).relaunch, None, "passed");
    }

    /// Batches of plan requests and view reads only skip the walks of every node, for at
    /// most `QUIET_WALK_MS`, and never past a deadline; any other input walks. Each request
    /// is answered either way, and what the walks decide (here a stuck launch's KILL) comes
    /// within that bound.
    #[test]
    fn reads_only_skip_the_walks_for_a_second_at_most() {
        use crate::scheduler::exchange::{ExecutorCall, ExecutorReply, ExecutorRequest};
        let mut r = rig();
        let (executor_id, secret) = launched_on_a1(&mut r);
        let ask = |call: ExecutorCall| {
            let (tx, rx) = crossbeam_channel::unbounded();
            let req = ExecutorRequest {
                executor_id: executor_id.clone(),
                secret: secret.clone(),
                call,
                reply: tx.into(),
            };
            (Input::Executor(req), rx)
        };
        let plan = || ask(ExecutorCall::Plan(Default::default()));
        let now = r.d.clock.now_ms();
        assert!(r.d.take_batch(Vec::new(), None).is_none());
        let walked = r.d.walks();
        let (view_tx, view_rx) = crossbeam_channel::unbounded();
        let ((a, a_rx), (b, b_rx)) = (plan(), plan());
        r.d.take_batch(vec![a, Input::View(view_tx), b], Some(now + 10));
        assert_eq!(r.d.walks(), walked, "reads only, nothing due");
        assert!(matches!(a_rx.try_recv(), Ok(ExecutorReply::Plan(_))));
        assert!(matches!(b_rx.try_recv(), Ok(ExecutorReply::Plan(_))));
        assert!(view_rx.try_recv().is_ok());

        let (a, _a_rx) = plan();
        r.d.take_batch(vec![a], Some(now));
        assert_eq!(r.d.walks(), walked + 1, "a deadline reached");

        // A launch stuck past its timeout, and only plan requests coming: killed at the
        // first batch a second after the last walk.
        r.clock.advance(reconcile::STAGING_TIMEOUT_MS - 500);
        r.d.take_batch(Vec::new(), None);
        r.clock.advance(600);
        let (a, _a_rx) = plan();
        r.d.take_batch(vec![a], None);
        // Read straight from the channel: the rig's `collect` walks.
        let killed = |r: &Rig| {
            r.out
                .try_iter()
                .filter_map(Outgoing::into_call)
                .any(|c| c.kill.is_some())
        };
        assert!(!killed(&r));
        assert_eq!(r.d.walks(), walked + 2);
        r.clock.advance(batch::QUIET_WALK_MS - 600);
        let (a, _a_rx) = plan();
        r.d.take_batch(vec![a], None);
        assert!(killed(&r), "killed");
        assert_eq!(r.d.walks(), walked + 3);

        let report = ExecutorCall::phase_from_json(br#"{"phase":"packages"}"#).unwrap();
        let ((a, _a_rx), (b, _b_rx)) = (plan(), ask(report));
        r.d.take_batch(vec![a, b], None);
        assert_eq!(r.d.walks(), walked + 4, "a report is not a read");
    }

    /// Under a stream of one-node inputs (executor reports, status updates, gateway
    /// outcomes) a big cluster's walks run once per gap (50 ms at 2,000 nodes), owed
    /// meanwhile as a deadline; any other input, or the gap's end, walks.
    #[test]
    fn one_node_inputs_of_a_big_cluster_walk_once_per_gap() {
        use crate::scheduler::exchange::{ExecutorCall, ExecutorRequest};
        let mut r = rig();
        let (executor_id, secret) = launched_on_a1(&mut r);
        let a1 = r.d.model().nodes["a1"].clone();
        for i in 2..=2_000 {
            let mut n = a1.clone();
            n.hostname = format!("h{i}");
            n.agent_id = format!("a{i}").into();
            r.d.state.model.nodes.insert(format!("a{i}"), n);
        }
        assert_eq!(r.d.walk_gap_ms(), 50);
        let report = |phase: &str| {
            let (tx, _rx) = crossbeam_channel::unbounded();
            let json = format!(r#"{{"phase":"{phase}"}}"#);
            Input::Executor(ExecutorRequest {
                executor_id: executor_id.clone(),
                secret: secret.clone(),
                call: ExecutorCall::phase_from_json(json.as_bytes()).unwrap(),
                reply: tx.into(),
            })
        };
        let batch = |r: &mut Rig, input: Input| {
            let due = r.d.next_deadline();
            assert!(r.d.take_batch(vec![input], due).is_none());
            r.d.walks()
        };
        r.d.take_batch(Vec::new(), None);
        let (walked, at) = (r.d.walks(), r.d.clock.now_ms());
        assert_eq!(batch(&mut r, report("packages")), walked, "put off");
        assert_eq!(r.d.owed_walk_deadline(), Some(at + 50));
        assert!(r.d.next_deadline().is_some_and(|t| t <= at + 50));
        // A relaunch time written meanwhile: the walks that find it wait for the owed one.
        let a2 = r.d.state.model.nodes.get_mut("a2").unwrap();
        (a2.task, a2.retry_after_ms) = (None, Some(at + 60));
        assert_eq!(
            r.d.node_deadlines(at).relaunch,
            None,
            "not walked while owed"
        );
        r.clock.advance(49);
        assert_eq!(
            batch(&mut r, report("devices")),
            walked,
            "still within the gap"
        );
        r.clock.advance(1);
        assert_eq!(
            batch(&mut r, report("volume-driver")),
            walked + 1,
            "the gap's end"
        );
        assert_eq!(r.d.owed_walk_deadline(), None);
        assert_eq!(r.d.node_deadlines(at + 50).relaunch, Some(at + 60));
        assert_eq!(batch(&mut r, report("devices")), walked + 1);
        r.clock.advance(50);
        r.d.take_batch(Vec::new(), r.d.next_deadline());
        assert_eq!(r.d.walks(), walked + 2, "the deadline's wake-up walks");
        assert_eq!(batch(&mut r, report("packages")), walked + 2);
        // A task's status and a node's gateway outcome concern one node too.
        let task = r.d.model().nodes["a1"]
            .task
            .as_ref()
            .unwrap()
            .task_id
            .clone();
        let status = update(&task, "a1", TaskState::Running, true);
        assert_eq!(
            batch(&mut r, Input::Event(Box::new(status))),
            walked + 2,
            "a status update put off"
        );
        let attached = Report::Node(crate::scheduler::gateway_work::report::NodeReport {
            agent_id: "a2".into(),
            sds_id: Some("sds-2".into()),
            attached: vec!["/dev/sdb".into()],
            sdc_connected: true,
            error: None,
        });
        assert_eq!(
            batch(&mut r, Input::Storage(attached)),
            walked + 2,
            "a gateway outcome put off"
        );
        assert_eq!(
            batch(&mut r, Input::Agents(Vec::new())),
            walked + 3,
            "not about one node"
        );
    }

    /// Executors follow the scheduler: every SUBSCRIBED tells each live launch's executor
    /// the scheduler's address with a framework MESSAGE.
    #[test]
    fn every_subscription_announces_the_address_to_live_executors() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        let first = r.calls();
        assert!(!has(&first, call::Type::Message), "no executor yet");
        r.event(offers(&["a1", "a2"]));
        let launched = launched_task(&r.calls());
        r.event(update(&launched[1].0, "a2", TaskState::Failed, true));
        r.calls();
        // Re-subscription (e.g. after a failover): only a1's executor is live.
        r.event(subscribed("fw-1"));
        let messages: Vec<call::Message> =
            r.calls().into_iter().filter_map(|c| c.message).collect();
        assert_eq!(messages.len(), 1, "{messages:?}");
        let m = &messages[0];
        assert_eq!(m.agent_id.value, "a1");
        let node = &r.d.model().nodes["a1"];
        assert_eq!(
            m.executor_id.value,
            *node.task.as_ref().unwrap().executor_id()
        );
        let data: serde_json::Value = serde_json::from_slice(&m.data.0).unwrap();
        assert_eq!(
            data,
            serde_json::json!({
                "scheduler_url": "https://sched:8080",
                "scheduler_fingerprint": "sha256:ab"
            })
        );
    }

    fn update_for(
        task: &str,
        agent: &str,
        state: TaskState,
        reason: Option<task_status::Reason>,
    ) -> Event {
        let mut ev = update(task, agent, state, false);
        if let Some(u) = ev.update.as_mut() {
            u.status.reason = reason;
            u.status.source = Some(task_status::Source::Master);
        }
        ev
    }

    fn agent_lost(agent: &str) -> Event {
        Event {
            r#type: Some(event::Type::Failure),
            failure: Some(event::Failure {
                agent_id: Some(AgentID {
                    value: agent.into(),
                }),
                executor_id: None,
                status: None,
            }),
            ..Default::default()
        }
    }

    /// A running node on a1; returns its task id.
    fn running_on_a1(r: &mut Rig) -> String {
        r.event(subscribed("fw-1"));
        r.input(known(&["a1"]));
        r.event(offers(&["a1"]));
        let (task, _) = launched_task(&r.calls()).remove(0);
        r.event(update(&task, "a1", TaskState::Running, true));
        r.d.state.model.nodes.get_mut("a1").unwrap().phase = Phase::Running;
        r.calls();
        task
    }

    /// The master loses a1 (TASK_UNREACHABLE, then the agent-lost FAILURE): the node waits
    /// where it was, covered, and no offer of a1 becomes a launch however long it lasts. The
    /// agent comes back with the task (TASK_RUNNING from the master): the node resumes.
    #[test]
    fn an_unreachable_task_waits_and_resumes_when_its_agent_returns_with_it() {
        let mut r = rig();
        let task = running_on_a1(&mut r);
        r.event(update_for(
            &task,
            "a1",
            TaskState::Unreachable,
            Some(task_status::Reason::AgentRemoved),
        ));
        r.event(agent_lost("a1"));
        let node = &r.d.model().nodes["a1"];
        assert!(node.covered());
        assert_eq!(node.phase, Phase::Running);
        assert!(node.retry_after_ms.is_none());
        assert!(node
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("TASK_UNREACHABLE"));
        r.advance(3_600_000);
        r.event(offers(&["a1"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(has(&calls, call::Type::Decline));
        r.event(update_for(
            &task,
            "a1",
            TaskState::Running,
            Some(task_status::Reason::AgentReregistered),
        ));
        let node = &r.d.model().nodes["a1"];
        assert_eq!(node.phase, Phase::Running);
        assert_eq!(node.failures, 0);
        assert!(node.last_error.is_none(), "{:?}", node.last_error);
        assert_eq!(*node.task.as_ref().unwrap().task_id, *task);
        r.advance(600_000);
        r.event(offers(&["a1"]));
        assert!(launched_task(&r.calls()).is_empty());
    }

    /// The agent comes back without the task: the master says nothing until asked, so the
    /// scheduler asks as soon as the master lists the agent again; TASK_GONE relaunches the
    /// node, once. Mesos' other words for "gone" do the same.
    #[test]
    fn an_unreachable_task_is_asked_about_when_its_agent_is_back_and_relaunched_once_gone() {
        for gone in [
            TaskState::Gone,
            TaskState::GoneByOperator,
            TaskState::Unknown,
            TaskState::Lost,
        ] {
            let mut r = rig();
            let task = running_on_a1(&mut r);
            r.event(update_for(&task, "a1", TaskState::Unreachable, None));
            r.input(known(&[]));
            assert!(reconciled_tasks(&r.calls()).is_empty());
            r.input(known(&["a1"]));
            assert_eq!(reconciled_tasks(&r.calls()), vec![task.clone()]);
            r.event(update_for(
                &task,
                "a1",
                gone,
                Some(task_status::Reason::Reconciliation),
            ));
            let node = &r.d.model().nodes["a1"];
            assert!(!node.covered(), "{gone}");
            assert_eq!(node.phase, Phase::Lost);
            r.advance(6_000);
            r.event(offers(&["a1"]));
            let launched = launched_task(&r.calls());
            assert_eq!(launched.len(), 1, "{gone}");
            assert_ne!(launched[0].0, task);
            r.event(offers(&["a1"]));
            assert!(launched_task(&r.calls()).is_empty());
        }
    }

    /// Implicit reconciliation does not answer about a task the master forgot: unreachable
    /// tasks are named in a reconciliation at that period too.
    #[test]
    fn unreachable_tasks_are_asked_about_at_the_implicit_period() {
        let mut r = rig();
        let task = running_on_a1(&mut r);
        r.event(update_for(&task, "a1", TaskState::Unreachable, None));
        r.advance(reconcile::IMPLICIT_EVERY_MS);
        assert_eq!(reconciled_tasks(&r.calls()), vec![task.clone()]);
    }

    /// Reconciliation answers TASK_RUNNING for every task, every 15 minutes. For a launch
    /// known to run, that notes the contact on its node and saves nothing: nothing in the
    /// write log, the saved record as it was; a new revision, so that `/api/state` shows it.
    #[test]
    fn a_running_answer_for_a_running_launch_notes_the_contact_and_saves_nothing() {
        let mut r = rig();
        let task = running_on_a1(&mut r);
        r.advance(60_000);
        let stored = r.saved_state().model.nodes["a1"].last_contact_ms;
        let revision = r.d.model().nodes["a1"].revision.get();
        let mark = r.d.model().nodes.mark();
        r.advance(60_000);
        r.event(update_for(
            &task,
            "a1",
            TaskState::Running,
            Some(task_status::Reason::Reconciliation),
        ));
        let node = &r.d.model().nodes["a1"];
        assert_eq!(node.last_contact_ms, Some(r.clock.now_ms()));
        assert_ne!(node.revision.get(), revision);
        assert_eq!(r.d.model().nodes.written_since(mark), Some(&[][..]));
        assert_eq!(r.saved_state().model.nodes["a1"].last_contact_ms, stored);
        assert_ne!(stored, Some(r.clock.now_ms()));
    }

    /// An ACCEPT whose offer the master had rescinded: TASK_DROPPED (TASK_LOST for a
    /// framework that is not partition-aware), REASON_INVALID_OFFERS. The launch never
    /// started: relaunched at the next offer, no failure counted, no backoff.
    #[test]
    fn a_dropped_launch_is_relaunched_at_once_without_a_failure() {
        for state in [TaskState::Dropped, TaskState::Lost] {
            let mut r = rig();
            r.event(subscribed("fw-1"));
            r.input(known(&["a1"]));
            r.event(offers(&["a1"]));
            let (task, _) = launched_task(&r.calls()).remove(0);
            r.event(update_for(
                &task,
                "a1",
                state,
                Some(task_status::Reason::InvalidOffers),
            ));
            let node = &r.d.model().nodes["a1"];
            assert!(!node.covered());
            assert_eq!(node.failures, 0, "{state}");
            assert!(node.retry_after_ms.is_none(), "{state}");
            r.event(offers(&["a1"]));
            let launched = launched_task(&r.calls());
            assert_eq!(launched.len(), 1, "{state}");
            assert_ne!(launched[0].0, task);
        }
    }

    /// An executor that missed the announcement (a MESSAGE is best effort) gets it again
    /// once it has been quiet too long, without a new subscription; one that talks to us
    /// gets nothing. An idle one in `running` asks for its plan every idle poll: quiet past
    /// its longest gap, it is told too (it was not, and after the executor's pin grace a
    /// failover it never heard of failed its node).
    #[test]
    fn an_executor_quiet_too_long_is_told_the_address_again() {
        use crate::scheduler::exchange::{ExecutorCall, ExecutorRequest};
        let mut r = rig();
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1", "a2", "a3"]));
        let secrets = launched_secrets(&r.calls());
        let saved = r.saved_state();
        let poll = |r: &mut Rig, agent: &str| {
            let task = saved.model.nodes[agent].task.as_ref().unwrap();
            let executor_id = task.executor_id().into_owned();
            let secret = secrets[agent].clone();
            let (tx, _rx) = crossbeam_channel::unbounded();
            r.input(Input::Executor(ExecutorRequest {
                executor_id,
                secret,
                call: ExecutorCall::Heartbeat,
                reply: tx.into(),
            }));
        };
        r.d.state.model.nodes.get_mut("a3").unwrap().phase = Phase::Running;
        let messages = |r: &mut Rig| -> Vec<String> {
            r.calls()
                .into_iter()
                .filter_map(|c| c.message)
                .map(|m| m.agent_id.value.to_string())
                .collect()
        };
        let step = announce::STALE_MS / 3;
        for _ in 0..3 {
            r.advance(step);
            poll(&mut r, "a1");
            poll(&mut r, "a3");
        }
        r.advance(1_000);
        assert_eq!(messages(&mut r), vec!["a2".to_string()]);
        // The next one waits twice as long.
        for _ in 0..3 {
            r.advance(announce::STALE_MS / 2);
            poll(&mut r, "a1");
            poll(&mut r, "a3");
        }
        assert!(messages(&mut r).is_empty());
        r.advance(announce::STALE_MS / 2);
        assert_eq!(messages(&mut r), vec!["a2".to_string()]);
        // a3 runs idle and has stopped asking for its plan: told once quiet past its longest
        // poll gap, which is longer than an executor at work gets.
        let idle = announce::running_stale_ms(r.d.executors.idle_poll_s());
        assert!(idle > announce::STALE_MS);
        let due = r.d.executors.heard_from("a3").expect("a3 asked") + idle;
        let mut told = Vec::new();
        while r.clock.now_ms() + step < due {
            r.advance(step);
            poll(&mut r, "a1");
            told.extend(messages(&mut r));
        }
        r.advance(due - 1 - r.clock.now_ms());
        told.extend(messages(&mut r));
        assert!(told.is_empty(), "{told:?}");
        r.advance(1);
        assert_eq!(messages(&mut r), vec!["a3".to_string()]);
    }

    /// The next stale time is kept between batches, and what is kept is never later than the
    /// exact time: contacts only move it later, and it is computed again once it arrives.
    #[test]
    fn the_kept_stale_time_is_never_later_than_the_exact_one() {
        use crate::scheduler::health::assess;
        use crate::scheduler::model::Persona;
        let mut r = rig();
        let stale = Duration::from_secs(180);
        r.d.set_health_settings(crate::scheduler::health::HealthSettings {
            capacity_warn_pct: 80.0,
            stale,
        });
        let s = stale.as_millis() as u64;
        let t0 = r.clock.now_ms();
        let exact = |r: &Rig| {
            let heard = |a: &str| r.d.executors.heard_from(a);
            assess::next_stale_heard(&r.d.state.model, &r.d.health, &heard)
        };
        let n = r.d.state.model.nodes.get_mut("a1");
        assert!(n.is_none(), "a fresh rig");
        let mut n = Node::new("a1", "h1", Persona::Data, t0);
        (n.phase, n.last_contact_ms) = (Phase::Running, Some(t0));
        r.d.state.model.nodes.insert("a1", n);
        assert_eq!(r.d.health_deadline(), Some(t0 + s));
        // Heard from again: the exact time moves later, the kept one may wake early.
        r.advance(10_000);
        r.d.state.model.nodes.get_mut("a1").unwrap().last_contact_ms = Some(t0 + 10_000);
        let kept = r.d.health_deadline().unwrap();
        assert!(kept <= exact(&r).unwrap());
        // A node that starts running was just heard from.
        let mut n = Node::new("a2", "h2", Persona::Data, t0);
        (n.phase, n.last_contact_ms) = (Phase::Running, Some(r.clock.now_ms()));
        r.d.state.model.nodes.insert("a2", n);
        assert!(r.d.health_deadline().unwrap() <= exact(&r).unwrap());
        // Once the kept time arrives it is computed again.
        r.advance(s - 10_000);
        assert_eq!(r.d.health_deadline(), Some(t0 + 10_000 + s));
        assert_eq!(r.d.health_deadline(), exact(&r));
    }

    /// A host report is assessed with the operator's `-health.*` settings, as a gateway poll
    /// is: a pool at 85% with the warning at 90% stays healthy when a host report comes (it
    /// reassesses its node and the cluster, not the pools), and the node's change names its
    /// reason.
    #[test]
    fn a_host_report_is_assessed_with_the_operators_settings() {
        use crate::contract::health::{HostCheck, HostProblem};
        use crate::scheduler::exchange::{ExecutorCall, ExecutorRequest};
        use crate::scheduler::model::{HealthState, PoolCapacity};
        let mut r = rig();
        let (executor_id, secret) = launched_on_a1(&mut r);
        r.d.set_health_settings(crate::scheduler::health::HealthSettings {
            capacity_warn_pct: 90.0,
            stale: Duration::from_secs(180),
        });
        let model = &mut r.d.state.model;
        model.nodes.get_mut("a1").unwrap().phase = Phase::Running;
        model.health.read_ms = Some(r.clock.now_ms());
        model.pools.push(PoolCapacity {
            protection_domain: "pd".into(),
            pool: "sp".into(),
            used_pct: 85.0,
            ..Default::default()
        });
        // As the last gateway poll left them.
        r.d.reassess_health();
        let (tx, rx) = crossbeam_channel::unbounded();
        let sds = HostProblem::new(HostCheck::Service, "sds", "not running");
        r.input(Input::Executor(ExecutorRequest {
            executor_id,
            secret,
            call: ExecutorCall::Health(vec![sds]),
            reply: tx.into(),
        }));
        assert!(rx.try_recv().is_ok(), "answered");
        let m = r.d.model();
        assert_eq!(
            m.pools[0].health.state,
            HealthState::Healthy,
            "{:?}",
            m.pools[0].health
        );
        let health = &m.nodes["a1"].health;
        assert_eq!(health.state, HealthState::Degraded);
        assert!(
            health
                .reasons
                .iter()
                .any(|r| r == "service sds: not running"),
            "{health:?}"
        );
        let cluster = &m.health.health.reasons;
        assert!(
            cluster.iter().all(|r| !r.contains("pd/sp")),
            "the pool is not flagged: {cluster:?}"
        );
        assert_eq!(m.health.health.state, HealthState::Degraded, "{cluster:?}");
    }

    /// Devices the gateway worker attached after the gateway's last poll are not in that
    /// poll's listing: a host report in between finds the node unknown until the next poll,
    /// not "SDS ... not listed" (every node of a rollout flashed degraded for the half second
    /// until the next poll, and a demo's summary printed it), and not healthy (the cluster
    /// read healthy before any poll had seen the MDM cluster the attach went to). A poll
    /// that still lists no SDS flags it.
    #[test]
    fn a_node_attached_after_the_last_poll_is_unknown_until_a_poll_says() {
        use crate::contract::health::{HostCheck, HostProblem};
        use crate::scheduler::exchange::{ExecutorCall, ExecutorRequest};
        use crate::scheduler::gateway_work::report::{HealthPoll, NodeReport};
        use crate::scheduler::model::HealthState;
        let mut r = rig();
        let (executor_id, secret) = launched_on_a1(&mut r);
        let unlisted = "SDS of host-a1 not listed by the gateway";
        let model = &mut r.d.state.model;
        model.nodes.get_mut("a1").unwrap().phase = Phase::Running;
        model.health.read_ms = Some(r.clock.now_ms());
        r.advance(10);
        r.input(Input::Storage(Report::Node(NodeReport {
            agent_id: "a1".into(),
            sds_id: Some("sds-1".into()),
            attached: vec!["/dev/sdb".into()],
            sdc_connected: true,
            error: None,
        })));
        let host_report = |r: &mut Rig, problems: Vec<HostProblem>| {
            let (tx, rx) = crossbeam_channel::unbounded();
            r.input(Input::Executor(ExecutorRequest {
                executor_id: executor_id.clone(),
                secret: secret.clone(),
                call: ExecutorCall::Health(problems),
                reply: tx.into(),
            }));
            assert!(rx.try_recv().is_ok(), "answered");
        };
        host_report(&mut r, Vec::new());
        let health = r.d.model().nodes["a1"].health.clone();
        assert_eq!(health.state, HealthState::Unknown, "{health:?}");
        assert!(
            health.reasons[0].starts_with(crate::scheduler::health::AWAITING_POLL),
            "{health:?}"
        );
        let cluster = &r.d.model().health.health;
        assert_eq!(cluster.state, HealthState::Unknown, "{cluster:?}");

        r.advance(10);
        let poll = HealthPoll {
            read_ms: r.clock.now_ms(),
            requests: 5,
            ..Default::default()
        };
        r.input(Input::Storage(Report::Health(Box::new(poll))));
        let health = r.d.model().nodes["a1"].health.clone();
        assert!(health.reasons.iter().any(|r| r == unlisted), "{health:?}");
        // And it stays so: a later host report does not take the flag back.
        host_report(
            &mut r,
            vec![HostProblem::new(HostCheck::Service, "lia", "x")],
        );
        let health = &r.d.model().nodes["a1"].health;
        assert!(health.reasons.iter().any(|r| r == unlisted), "{health:?}");
    }

    /// Health is shown, never acted upon: a poll or a failed poll, with the node degraded
    /// and its data gone stale, sends no call, relaunches nothing and changes no phase.
    #[test]
    fn a_health_report_never_relaunches_or_changes_a_phase() {
        use crate::scheduler::gateway_work::report::HealthPoll;
        use crate::scheduler::model::Health;
        let mut r = rig();
        let task = running_on_a1(&mut r);
        r.d.state.model.nodes.get_mut("a1").unwrap().health =
            Health::degraded(vec!["SDS sds-1 disconnected from the MDM".into()]);
        r.d.set_health_settings(crate::scheduler::health::HealthSettings {
            capacity_warn_pct: 50.0,
            stale: Duration::from_secs(1),
        });
        let before = r.d.model().nodes["a1"].clone();
        let launches = r.d.model().launch_seq;
        let generation = r.d.view().generation;
        let poll = HealthPoll {
            read_ms: r.clock.now_ms(),
            requests: 5,
            ..Default::default()
        };
        r.input(Input::Storage(Report::Health(Box::new(poll))));
        r.advance(10_000);
        r.input(Input::Storage(Report::HealthFailed {
            error: "gateway 10.0.0.11: connection refused".into(),
            at_ms: r.clock.now_ms(),
        }));
        r.advance(200_000);
        // The executor, silent all along, is told the address again (`announce.rs`): a
        // MESSAGE, not health acting.
        let calls: Vec<_> = r
            .calls()
            .into_iter()
            .filter(|c| c.message.is_none())
            .collect();
        assert!(calls.is_empty(), "a health report sent calls: {calls:?}");
        let after = &r.d.model().nodes["a1"];
        assert_eq!(after.phase, Phase::Running);
        assert_eq!(
            after.task.as_ref().map(|t| t.task_id.to_string()),
            Some(task)
        );
        assert_eq!(after.failures, before.failures);
        assert_eq!(after.retry_after_ms, None);
        assert_eq!(r.d.model().launch_seq, launches);
        // The view shows the new data.
        assert!(r.d.view().generation > generation);
    }

    /// The host of a node in a reboot phase (its executor asked for the reboot) goes down
    /// with its launch, however Mesos says so: TASK_UNREACHABLE and no more (the master
    /// marked the agent unreachable before the new one registered), TASK_GONE (the new agent
    /// registered at its address first), TASK_LOST when reconciled, or TASK_FAILED from the
    /// agent as the host shuts down; then the host is back under a new agent id. A planned
    /// reboot is no failed launch: nothing counted, no backoff, no error, and the node stays
    /// in its phase (the scheduler's own node still waits for it) until its relaunch, at the
    /// host's first offer.
    #[test]
    fn a_planned_reboot_is_not_a_failed_launch() {
        use task_status::Reason;
        let endings: [&[(TaskState, Option<Reason>)]; 4] = [
            &[(TaskState::Gone, Some(Reason::AgentRemoved))],
            &[(TaskState::Unreachable, Some(Reason::AgentRemoved))],
            &[
                (TaskState::Unreachable, None),
                (TaskState::Lost, Some(Reason::Reconciliation)),
            ],
            &[(TaskState::Failed, Some(Reason::ExecutorTerminated))],
        ];
        for phase in [Phase::RebootPrerequisites, Phase::RebootFinal] {
            for ending in endings {
                let case = format!("{phase}, {ending:?}");
                let mut r = rig();
                let task = running_on_a1(&mut r);
                r.d.state.model.nodes.get_mut("a1").unwrap().phase = phase;
                for (state, reason) in ending {
                    r.event(update_for(&task, "a1", *state, *reason));
                }
                r.input(Input::Agents(vec![KnownAgent {
                    id: "a1b".into(),
                    hostname: "host-a1".into(),
                }]));
                let n = &r.d.model().nodes["a1b"];
                assert_eq!(n.failures, 0, "{case}");
                assert_eq!(n.retry_after_ms, None, "{case}");
                assert_eq!(n.last_error, None, "{case}");
                assert_eq!(n.phase, phase, "{case}");
                let mut ev = offers(&["a1b"]);
                ev.offers.as_mut().unwrap().offers[0].hostname = "host-a1".into();
                r.event(ev);
                assert_eq!(launched_task(&r.calls()).len(), 1, "relaunched: {case}");
            }
        }
    }

    /// A host down for the reboot its executor claimed comes back as an agent with a new id,
    /// which the master offers only to a framework that does not suppress offers: offers are
    /// revived from the moment the host is gone until the node is relaunched there (before,
    /// the agent watcher's next poll, up to 30 s later, was the only way to hear of it). A
    /// host away longer than the wait is left to that poll: offers are suppressed again.
    #[test]
    fn offers_are_revived_while_a_rebooting_host_is_away() {
        for back in [true, false] {
            let mut r = rig();
            let task = running_on_a1(&mut r);
            assert!(r.d.offer_mode.suppressed(), "back {back}");
            let n = r.d.state.model.nodes.get_mut("a1").unwrap();
            n.phase = Phase::RebootPrerequisites;
            n.rebooting = true;
            // Claimed, the host is still up: nothing to be offered yet.
            r.input(known(&["a1"]));
            assert!(!has(&r.calls(), call::Type::Revive), "back {back}");
            r.event(update_for(
                &task,
                "a1",
                TaskState::Unreachable,
                Some(task_status::Reason::AgentRemoved),
            ));
            assert!(has(&r.calls(), call::Type::Revive), "back {back}");
            // The master no longer lists the old agent: still waiting for the host.
            r.input(known(&[]));
            assert!(!has(&r.calls(), call::Type::Suppress), "back {back}");
            assert!(!r.d.offer_mode.suppressed(), "back {back}");
            if back {
                let mut ev = offers(&["a1b"]);
                ev.offers.as_mut().unwrap().offers[0].hostname = "host-a1".into();
                r.event(ev);
                let calls = r.calls();
                assert_eq!(launched_task(&calls)[0].1, "a1b");
                assert!(
                    has(&calls, call::Type::Suppress),
                    "relaunched: suppressed again"
                );
            } else {
                r.advance(10 * 60 * 1000 - 1);
                assert!(!has(&r.calls(), call::Type::Suppress), "within the wait");
                r.advance(2);
                assert!(has(&r.calls(), call::Type::Suppress), "away too long");
            }
        }
    }

    /// What is not a planned reboot still counts: a launch ending in another phase, one in a
    /// reboot phase when `-debug` forbids reboots, and one whose executor said in its reboot
    /// phase why it does not reboot.
    #[test]
    fn a_launch_ending_outside_a_planned_reboot_is_a_failed_launch() {
        for (phase, debug, error) in [
            (Phase::Packages, false, None),
            (Phase::RebootPrerequisites, true, None),
            (
                Phase::RebootPrerequisites,
                false,
                Some("rebooted once in vain"),
            ),
        ] {
            let mut r = rig();
            let mut install = crate::scheduler::node_plan::InstallSettings::default();
            install.plan.debug = debug;
            r.d.set_install_settings(install);
            let task = running_on_a1(&mut r);
            let n = r.d.state.model.nodes.get_mut("a1").unwrap();
            n.phase = phase;
            n.last_error = error.map(Into::into);
            r.event(update_for(
                &task,
                "a1",
                TaskState::Gone,
                Some(task_status::Reason::AgentRemoved),
            ));
            let n = &r.d.model().nodes["a1"];
            assert_eq!(n.failures, 1, "{phase}, debug {debug}");
            assert!(n.retry_after_ms.is_some(), "{phase}, debug {debug}");
            assert_eq!(n.phase, Phase::Lost, "{phase}, debug {debug}");
        }
    }

    /// A running node's walk: it asks, the dispatcher's pass grants (nothing else is under
    /// way), the plan carries the grant; a report of another generation is refused 409.
    #[test]
    fn a_running_nodes_ask_is_granted_in_its_plan() {
        use crate::contract::rollout::{RolloutEvent, RolloutReport, Step};
        use crate::scheduler::exchange::{ExecutorCall, ExecutorReply, ExecutorRequest};
        let mut r = rig();
        let (executor_id, secret) = launched_on_a1(&mut r);
        r.d.state.model.nodes.get_mut("a1").unwrap().phase = Phase::Running;
        r.d.state.model.target.generation = 2;
        let report = |r: &mut Rig, generation: u64, event: RolloutEvent| {
            let (tx, rx) = crossbeam_channel::unbounded();
            r.input(Input::Executor(ExecutorRequest {
                executor_id: executor_id.clone(),
                secret: secret.clone(),
                call: ExecutorCall::Rollout(RolloutReport { generation, event }),
                reply: tx.into(),
            }));
            rx.try_recv().unwrap()
        };
        let steps = vec![Step::UpgradeSdc];
        let planned = report(&mut r, 2, RolloutEvent::Planned { steps });
        assert!(matches!(planned, ExecutorReply::Recorded), "{planned:?}");
        let ask = RolloutEvent::Ask {
            step: Step::UpgradeSdc,
        };
        assert!(matches!(report(&mut r, 2, ask), ExecutorReply::Recorded));
        let walk = r.d.model().nodes["a1"].rollout.clone().unwrap();
        assert_eq!(walk.granted, Some(Step::UpgradeSdc));
        match report(&mut r, 1, RolloutEvent::Reached) {
            ExecutorReply::Failed(e) => assert_eq!(e.status, 409, "{e}"),
            other => panic!("{other:?}"),
        }
        let done = RolloutEvent::Done {
            step: Step::UpgradeSdc,
        };
        assert!(matches!(report(&mut r, 2, done), ExecutorReply::Recorded));
        assert!(matches!(
            report(&mut r, 2, RolloutEvent::Reached),
            ExecutorReply::Recorded
        ));
        assert_eq!(r.d.model().nodes["a1"].generation, 2);
        assert_eq!(r.saved_state().model.nodes["a1"].generation, 2, "saved");
    }

    fn kills(calls: &[Call]) -> Vec<String> {
        calls
            .iter()
            .filter_map(|c| c.kill.as_ref())
            .map(|k| k.task_id.value.to_string())
            .collect()
    }

    /// a1 and a2 launched and at `running` on the binary served now; their task ids.
    fn two_running(r: &mut Rig) -> BTreeMap<String, String> {
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1", "a2"]));
        let tasks: BTreeMap<String, String> = launched_task(&r.calls())
            .into_iter()
            .map(|(t, a)| (a, t))
            .collect();
        for (agent, task) in &tasks {
            r.event(update(task, agent, TaskState::Running, true));
            reach_running(r, agent);
        }
        r.calls();
        tasks
    }

    /// What the executor's `running` report does to its node.
    fn reach_running(r: &mut Rig, agent: &str) {
        let n = r.d.state.model.nodes.get_mut(agent).unwrap();
        n.phase = Phase::Running;
        n.progress = Some(Phase::Running);
        r.advance(1);
    }

    #[test]
    fn executors_of_an_older_binary_are_replaced_one_node_at_a_time() {
        let mut r = rig();
        let tasks = two_running(&mut r);
        let old = "0".repeat(64);
        assert_eq!(
            r.d.model().nodes["a1"].executor_sha256.as_deref(),
            Some(&*old)
        );
        // Every node records the one binary served: one text, not a copy per node.
        let digest = |a: &str| {
            r.d.model().nodes[a]
                .executor_sha256
                .as_deref()
                .map(str::as_ptr)
        };
        assert_eq!(
            digest("a1"),
            digest("a2"),
            "the digest is shared by the nodes"
        );
        r.advance(1);
        assert!(kills(&r.calls()).is_empty(), "nothing to replace");

        // A new build serves another binary: one node's task is killed, the choice saved first.
        let new = "1".repeat(64);
        r.d.ctx.executor_sha256 = Some(new.clone());
        r.advance(1);
        assert_eq!(kills(&r.calls()), [tasks["a1"].clone()]);
        let saved = r.saved_state().model.nodes["a1"].replacing.clone().unwrap();
        assert_eq!((&*saved.to_sha256, saved.failed), (&*new, None));
        r.advance(1);
        assert!(kills(&r.calls()).is_empty(), "one in flight at most");

        // Its end is no failure: the phase stays, the relaunch goes at once with the new digest.
        r.event(update(&tasks["a1"], "a1", TaskState::Killed, true));
        let n = &r.d.model().nodes["a1"];
        assert_eq!(
            (n.phase, n.failures, n.retry_after_ms),
            (Phase::Running, 0, None)
        );
        r.calls();
        r.event(offers(&["a1"]));
        let relaunch = launched_task(&r.calls());
        assert_eq!(relaunch.len(), 1);
        assert_ne!(relaunch[0].0, tasks["a1"]);
        let n = &r.d.model().nodes["a1"];
        assert_eq!(n.executor_sha256.as_deref(), Some(&*new));
        assert_eq!(n.progress, Some(Phase::Running), "it resumes at running");
        r.event(update(&relaunch[0].0, "a1", TaskState::Running, true));
        r.advance(1);
        assert!(kills(&r.calls()).is_empty(), "a1 is not at running yet");

        // a1 back at running on the new binary: the next node goes.
        reach_running(&mut r, "a1");
        assert!(r.d.model().nodes["a1"].replacing.is_none());
        r.advance(1);
        assert_eq!(kills(&r.calls()), [tasks["a2"].clone()]);
    }

    #[test]
    fn a_failed_replacement_stops_the_sequence_with_the_reason_on_its_node() {
        let mut r = rig();
        let tasks = two_running(&mut r);
        r.d.ctx.executor_sha256 = Some("1".repeat(64));
        r.advance(1);
        assert_eq!(kills(&r.calls()), [tasks["a1"].clone()]);
        r.event(update(&tasks["a1"], "a1", TaskState::Killed, true));
        r.event(offers(&["a1"]));
        let relaunch = launched_task(&r.calls());
        r.event(update(&relaunch[0].0, "a1", TaskState::Failed, true));
        r.advance(1);
        let n = &r.d.model().nodes["a1"];
        let failed = n
            .replacing
            .as_ref()
            .and_then(|x| x.failed.as_deref())
            .unwrap();
        assert!(
            failed.starts_with("executor replacement failed: TASK_FAILED"),
            "{failed}"
        );
        assert!(r.saved_state().model.nodes["a1"]
            .replacing
            .as_ref()
            .unwrap()
            .failed
            .is_some());
        for _ in 0..3 {
            r.advance(1);
            assert!(kills(&r.calls()).is_empty(), "the sequence stopped");
        }
        assert!(r.d.model().nodes["a2"].replacing.is_none());
    }

    fn operate(
        r: &mut Rig,
        command: crate::scheduler::operator::Command,
    ) -> crate::scheduler::operator::Outcome {
        let (reply, rx) = crossbeam_channel::bounded(1);
        r.input(Input::Operator(
            crate::scheduler::exchange::OperatorRequest { command, reply },
        ));
        rx.try_recv().expect("answered after the batch's save")
    }

    fn on_node(
        host: &str,
        action: crate::scheduler::operator::NodeAction,
    ) -> crate::scheduler::operator::Command {
        crate::scheduler::operator::Command::Node {
            host: host.into(),
            action,
        }
    }

    fn types(calls: &[Call]) -> Vec<call::Type> {
        calls.iter().filter_map(|c| c.r#type).collect()
    }

    /// Paused: saved, no new node, no executor replacement; what runs goes on. Resumed: both
    /// start, a REVIVE first for the agents declined meanwhile.
    #[test]
    fn a_pause_is_saved_holds_new_nodes_and_replacements_and_the_resume_lets_them_go() {
        use crate::scheduler::operator::Command;
        let mut r = rig();
        let tasks = two_running(&mut r);
        r.input(known(&["a1", "a2", "a3"]));
        r.event(offers(&["a3"]));
        let a3 = launched_task(&r.calls()).remove(0).0;
        r.event(update(&a3, "a3", TaskState::Running, true));
        reach_running(&mut r, "a3");
        r.calls();

        let o = operate(&mut r, Command::Pause);
        assert_eq!(o.status, 200, "{o:?}");
        assert!(o.message.starts_with("paused: "), "{o:?}");
        assert!(r.saved_state().model.paused, "saved with the answer");
        assert!(r.d.view().model.paused);
        assert!(
            crate::scheduler::rollout::view::plan_view(&r.d.view().model).paused,
            "/api/plan says so"
        );
        let logged = r.d.events.snapshot();
        assert_eq!(
            (logged[0].action.as_str(), logged[0].outcome.as_str()),
            ("pause", "accepted")
        );
        assert_eq!(
            operate(&mut r, Command::Pause).message,
            "the plan was paused already"
        );

        // A new agent: its offers are declined, and none are asked for.
        r.input(known(&["a1", "a2", "a3", "a4"]));
        r.event(offers(&["a4"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(types(&calls).contains(&call::Type::Decline));
        assert!(!r.d.model().nodes.contains_key("a4"));
        assert!(!r.d.needs_offers(r.d.clock.now_ms()));
        // A newer binary served: no executor is replaced.
        r.d.ctx.executor_sha256 = Some("1".repeat(64));
        r.advance(1);
        assert!(
            kills(&r.calls()).is_empty(),
            "nothing replaced while paused"
        );
        // An existing node's failed launch is relaunched as ever.
        r.event(update(&a3, "a3", TaskState::Failed, true));
        let due = r.d.model().nodes["a3"].retry_after_ms.unwrap();
        r.advance(due - r.d.clock.now_ms());
        r.calls();
        r.event(offers(&["a3"]));
        assert_eq!(launched_task(&r.calls()).len(), 1, "a3 relaunched");

        let o = operate(&mut r, Command::Resume);
        assert_eq!(o.status, 200, "{o:?}");
        assert!(!r.saved_state().model.paused);
        let calls = r.calls();
        assert!(
            types(&calls).contains(&call::Type::Revive),
            "{:?}",
            types(&calls)
        );
        assert_eq!(kills(&calls), [tasks["a1"].clone()], "the replacement goes");
        r.event(offers(&["a4"]));
        assert_eq!(launched_task(&r.calls()).len(), 1, "a4 launched");
        assert_eq!(
            operate(&mut r, Command::Resume).message,
            "the plan was not paused"
        );
    }

    /// A pause survives a restart: a dispatcher on the saved state is paused.
    #[test]
    fn a_pause_survives_a_restart() {
        let mut r = rig();
        r.event(subscribed("fw-1"));
        operate(&mut r, crate::scheduler::operator::Command::Pause);
        let mut again = rig();
        again.d.state = r.saved_state();
        again.event(subscribed("fw-1"));
        again.input(known(&["a9"]));
        again.event(offers(&["a9"]));
        assert!(launched_task(&again.calls()).is_empty());
        assert!(again.d.model().paused);
    }

    /// Fails `agent`'s launches until the failure budget stops it: the task ids launched.
    fn fail_until_stopped(r: &mut Rig, agent: &str) -> Vec<String> {
        let mut launched = Vec::new();
        for _ in 0..20 {
            let n = &r.d.model().nodes.get(agent);
            if n.is_some_and(|n| n.relaunch_stopped) {
                return launched;
            }
            if let Some(due) = n.and_then(|n| n.retry_after_ms) {
                r.advance(due.saturating_sub(r.d.clock.now_ms()));
            }
            r.calls();
            r.event(offers(&[agent]));
            let (task, _) = launched_task(&r.calls()).remove(0);
            r.event(update(&task, agent, TaskState::Failed, true));
            launched.push(task);
        }
        panic!("{agent} was never stopped")
    }

    #[test]
    fn a_node_failing_max_failures_times_in_a_row_is_left_failed_until_retried() {
        use crate::scheduler::operator::NodeAction;
        let mut r = rig();
        r.d.set_max_failures(3);
        r.event(subscribed("fw-1"));
        r.input(known(&["a1"]));
        let tasks = fail_until_stopped(&mut r, "a1");
        assert_eq!(tasks.len(), 3);
        let n = &r.d.model().nodes["a1"];
        assert_eq!(
            (n.phase, n.failures, n.retry_after_ms),
            (Phase::Failed, 3, None)
        );
        assert!(n.last_error.as_deref().unwrap().contains("TASK_FAILED"));
        assert!(r.saved_state().model.nodes["a1"].relaunch_stopped);
        let e = &r.d.events.snapshot()[0];
        assert_eq!(
            (e.kind, e.action.as_str(), e.outcome.as_str()),
            ("plan", "relaunch", "stopped")
        );
        assert!(
            e.message.contains("3 launches in a row failed"),
            "{}",
            e.message
        );
        // Not relaunched, not even asked for: the offers stop.
        r.advance(24 * 3_600_000);
        r.event(offers(&["a1"]));
        let calls = r.calls();
        assert!(launched_task(&calls).is_empty());
        assert!(!r.d.needs_offers(r.d.clock.now_ms()));

        // An unknown host, then the retry.
        assert_eq!(
            operate(&mut r, on_node("nowhere", NodeAction::Retry)).status,
            404
        );
        let o = operate(&mut r, on_node("host-a1", NodeAction::Retry));
        assert_eq!(o.status, 200, "{o:?}");
        assert!(
            o.message
                .contains("was not relaunched after 3 failed launch(es)"),
            "{o:?}"
        );
        assert!(o.message.contains("TASK_FAILED"), "{o:?}");
        let saved = &r.saved_state().model.nodes["a1"];
        assert_eq!((saved.relaunch_stopped, saved.failures), (false, 0));
        assert!(types(&r.calls()).contains(&call::Type::Revive));
        r.event(offers(&["a1"]));
        let relaunch = launched_task(&r.calls());
        assert_eq!(relaunch.len(), 1, "launched at once");
        // Its launch under way: nothing to retry.
        let o = operate(&mut r, on_node("host-a1", NodeAction::Retry));
        assert_eq!(o.status, 409, "{o:?}");
        assert!(o.message.contains("launch under way"), "{o:?}");
        // A failure now is the first of a new count.
        r.event(update(&relaunch[0].0, "a1", TaskState::Failed, true));
        let n = &r.d.model().nodes["a1"];
        assert_eq!((n.failures, n.relaunch_stopped), (1, false));
    }

    /// A stuck launch counts against the budget as a failed one.
    #[test]
    fn stuck_launches_count_against_the_failure_budget() {
        let mut r = rig();
        r.d.set_max_failures(1);
        r.event(subscribed("fw-1"));
        r.event(offers(&["a1"]));
        assert_eq!(launched_task(&r.calls()).len(), 1);
        r.advance(reconcile::STAGING_TIMEOUT_MS + 1);
        let n = &r.d.model().nodes["a1"];
        assert!(n.relaunch_stopped, "{n:?}");
        assert!(n.last_error.as_deref().unwrap().contains("TASK_STAGING"));
    }

    /// A new agent for the host, or a target change, gives a stopped node another round.
    #[test]
    fn a_new_agent_for_the_host_or_a_target_change_relaunches_a_stopped_node() {
        let mut r = rig();
        r.d.set_max_failures(1);
        r.event(subscribed("fw-1"));
        r.input(known(&["a1"]));
        fail_until_stopped(&mut r, "a1");
        r.input(Input::Agents(vec![KnownAgent {
            id: "a1-new".into(),
            hostname: "host-a1".into(),
        }]));
        let n = &r.d.model().nodes["a1-new"];
        assert_eq!((n.relaunch_stopped, n.failures), (false, 0));
        assert!(r.d.needs_offers(r.d.clock.now_ms()));

        fail_until_stopped(&mut r, "a1-new");
        let declared = crate::scheduler::rollout::target::Declared {
            packages: "p2",
            settings: "s",
            executor_sha256: "e",
        };
        r.d.declare_target(&declared);
        assert!(!r.d.model().nodes["a1-new"].relaunch_stopped);
        r.d.flush();
        assert!(!r.saved_state().model.nodes["a1-new"].relaunch_stopped);
    }

    fn operator(
        r: &mut Rig,
        host: &str,
        action: crate::scheduler::operator::NodeAction,
    ) -> crate::scheduler::operator::Outcome {
        operate(r, on_node(host, action))
    }

    #[test]
    fn restart_kills_the_executor_and_its_relaunch_walks_from_the_first_phase() {
        use crate::scheduler::operator::NodeAction::Restart;
        let mut r = rig();
        let tasks = two_running(&mut r);
        assert_eq!(operator(&mut r, "host-a9", Restart).status, 404);
        let done = operator(&mut r, "host-a1", Restart);
        assert_eq!(done.status, 200, "{}", done.message);
        assert_eq!(kills(&r.calls()), [tasks["a1"].clone()]);
        let saved = r.saved_state().model.nodes["a1"].restart.clone();
        assert_eq!(saved.map(|s| s.killed), Some(tasks["a1"].as_str().into()));
        let again = operator(&mut r, "host-a1", Restart);
        assert_eq!(again.status, 409);
        assert!(
            again.message.contains("restarting already"),
            "{}",
            again.message
        );
        // The replacement of older executors leaves it alone meanwhile.
        r.d.ctx.executor_sha256 = Some("1".repeat(64));
        r.advance(1);
        assert_eq!(kills(&r.calls()), [tasks["a2"].clone()], "a2 only");

        // The killed launch's end is no failure; the relaunch starts at the first phase.
        r.event(update(&tasks["a1"], "a1", TaskState::Killed, true));
        let n = &r.d.model().nodes["a1"];
        assert_eq!((n.failures, n.retry_after_ms), (0, None));
        r.event(offers(&["a1"]));
        let relaunch = launched_task(&r.calls());
        assert_eq!(relaunch.len(), 1);
        let n = &r.d.model().nodes["a1"];
        assert_eq!(n.resume(), None, "its plan says: from the beginning");
        assert_eq!(
            n.progress,
            Some(Phase::Running),
            "what it had reached stays"
        );
    }

    #[test]
    fn a_restart_of_a_node_that_holds_data_waits_for_the_disruption_budget() {
        use crate::scheduler::operator::NodeAction::Restart;
        let mut r = rig();
        let _tasks = two_running(&mut r);
        r.d.state.model.nodes.get_mut("a1").unwrap().attached = vec!["/dev/sdb".into()];
        let refused = operator(&mut r, "host-a1", Restart);
        assert_eq!(refused.status, 409);
        assert!(
            refused.message.contains("disruption budget")
                && refused.message.contains("no fresh gateway data"),
            "{}",
            refused.message
        );
        assert!(kills(&r.calls()).is_empty());
        assert!(r.d.model().nodes["a1"].restart.is_none());
    }
}
