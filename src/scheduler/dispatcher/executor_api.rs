//! The scheduler side of the executor API: node plans (long poll), phase and device reports,
//! heartbeats.
//!
//! It runs on the dispatcher thread, the owner of the model. The REST server does the HTTP
//! side (paths, headers, JSON parsing and validation, through the constructors in
//! [`crate::scheduler::exchange`]) and
//! sends each call here as an [`ExecutorRequest`] with a reply channel; this side
//! authenticates the caller against the stored per-executor secrets, applies the call to the
//! model and answers.
//!
//! A plan request that already holds the current plan version is parked here (answered
//! `Parked` at once, so the REST worker knows its wait has begun) and answered from
//! [`ExecutorApi::after_batch`] once the plan changes. The REST worker enforces the wait
//! itself and answers "unchanged" when it runs out; parked entries past their deadline are
//! dropped on the next batch. After a batch only the plans whose inputs changed are rendered
//! again (see [`must_render`]): 10,000 parked executors cost one node's plan per report,
//! not 10,000; and the parked entries are met in one walk beside the model's nodes (both in
//! agent order), not each looked up: an unchanged node is one revision compare.
//!
//! An idle executor (a running node with no step to take) asks with `nudge=1` instead: it
//! holds no connection, and is kept here the same way with no reply to send. When its plan
//! moves on, the dispatcher owes it one framework MESSAGE ([`ExecutorApi::take_nudges`]),
//! after which the executor asks again. A held long poll costs the scheduler a parked TLS
//! connection, about 10 KB: 10,000 of them would be three times the app's `mem: 32`.

mod record;
mod walk;
use record::{record_devices, record_host, record_phase};
#[cfg(test)]
use walk::must_render;
use walk::Walked;

pub use super::parked::Nudge;
use super::parked::{executor_key, gone_executor, Parked, ParkedPlans};
use crate::contract::plan::{ClusterInit, NodePlan, PlanBody, PlanSecrets};
use crate::hash::content_hash;
use crate::scheduler::exchange::{
    ApiError, ExecutorCall, ExecutorReply, ExecutorRequest, PhaseReport, PlanAsk, PlanReply,
    ReplyTo,
};
use crate::scheduler::health::gate::{self, GateSettings};
use crate::scheduler::model::{ClusterModel, Node, Persisted, Phase};
use crate::scheduler::node_plan::mdm_cluster;
use crate::scheduler::node_plan::{self, InstallSettings};
use crate::scheduler::rollout;
use crate::secret::Secret;
use log::{debug, info};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

/// Plan requests parked at once, across all executors (each executor has at most one).
pub const MAX_PARKED: usize = 16_384;

/// Plan versions stay below 2^53 so that JSON readers that use doubles (JavaScript) see
/// them exactly.
const VERSION_MASK: u64 = (1 << 53) - 1;

#[derive(Debug, Default)]
pub struct ExecutorApi {
    /// Agent id -> its executor's parked plan request (a held long poll, bounded by
    /// [`MAX_PARKED`], or an owed nudge, bounded by the executors).
    parked: ParkedPlans,
    /// Nudges owed since the last [`ExecutorApi::take_nudges`].
    nudges: Vec<Nudge>,
    /// Executor id (its keyed hash) -> agent id (the model's own `Arc`), to avoid a scan of
    /// every node per call; checked on use, so a stale or colliding entry only costs the scan.
    /// Not two strings per executor (~1.5 MB once 10,000 executors have called).
    index: HashMap<u64, Arc<str>>,
    index_keys: RandomState,
    /// Replies to reports, sent after the batch is saved (see `after_batch`): what each
    /// answer says besides `recorded` (the plan a report of `running` or `storage-attach`
    /// registered its executor's nudge past, the devices a phase report carried).
    acks: Vec<(ReplyTo, ExecutorReply)>,
    /// Experimental mode: the gateway password MDM nodes need (see `set_mdm_gateway_password`).
    mdm_gateway_password: Option<Secret>,
    /// Changes with the password, so that plans that carry it change version.
    secrets_generation: u64,
    /// Install settings every plan carries.
    install: InstallSettings,
    /// Agent (the model's own `Arc`) -> when its executor last made an authenticated
    /// request of any kind, plan polls included (held here, not in the model: a poll changes
    /// nothing worth showing or saving).
    heard: HashMap<Arc<str>, u64>,
    /// Changes with the install settings (an input of every plan).
    install_generation: u64,
    /// The last full walk of the parked requests (see [`Walked`]); `None`: walk next batch.
    walked: Option<Walked>,
    /// Full walks so far (for tests).
    full_walks: u64,
    /// Plans rendered for parked requests after batches (for tests).
    rerendered: u64,
    /// `-rollout.max-disrupted-per-domain` (0: not set, taken as 1).
    max_disrupted_per_domain: usize,
    /// Passes over every node to find a caller missing from `index` (for tests).
    index_scans: u64,
    /// How often an idle executor asks for its plan (seconds; every plan carries it).
    idle_poll_s: u64,
}

impl ExecutorApi {
    pub fn new() -> Self {
        ExecutorApi::default()
    }

    /// HOOK for experimental mode: plans of MDM nodes (primary, secondary, tie-breaker) then
    /// carry `secrets.gateway_password`, which they need to set up the cluster and gateway.
    /// The plan is the only place a secret goes to an executor, and only to MDM nodes. Not
    /// called yet: the dispatcher passes `storage.password` here once the MDM work lands.
    pub fn set_mdm_gateway_password(&mut self, password: Option<Secret>) {
        self.mdm_gateway_password = password.filter(|p| !p.is_empty());
        self.secrets_generation += 1;
    }

    /// The install settings every plan carries, from the flags.
    pub fn set_install_settings(&mut self, install: InstallSettings) {
        self.install = install;
        self.install_generation += 1;
    }

    /// An idle executor's unprompted plan request is its only sign of life: three fit in
    /// `stale` (`-health.stale`), between 5 s and 5 minutes.
    pub fn set_idle_poll(&mut self, stale: std::time::Duration) {
        self.idle_poll_s = (stale.as_secs() / 3).clamp(5, 300);
        self.install_generation += 1;
    }

    /// How often an idle executor asks for its plan (seconds), as its plan tells it.
    pub fn idle_poll_s(&self) -> u64 {
        match self.idle_poll_s {
            0 => crate::contract::plan::DEFAULT_IDLE_POLL_S,
            s => s,
        }
    }

    /// The install settings every plan carries.
    pub fn install(&self) -> &InstallSettings {
        &self.install
    }

    /// The inputs every plan shares, as one number.
    fn shared_inputs(&self, state: &Persisted) -> u64 {
        let framework = state.model.framework_id.as_deref().unwrap_or("");
        let generations = [
            self.secrets_generation,
            self.install_generation,
            state.model.target.generation,
        ];
        content_hash(
            &[
                framework.as_bytes(),
                &generations.map(u64::to_le_bytes).concat(),
            ]
            .concat(),
        )
    }

    /// Whether the plan of `node` reads other nodes too (a reboot's hold reads the others
    /// and the cluster's health).
    fn reads_others(&self, node: &Node) -> bool {
        self.install.experimental || self.install.runs_scheduler(node) || node.phase.is_reboot()
    }

    /// The plan's `reboot_wait` and `waiting`: the scheduler's node reboots last; a reboot
    /// waits for the disruption budget.
    fn reboot_wait(
        &self,
        state: &Persisted,
        node: &Node,
        runs_scheduler: bool,
    ) -> (bool, Option<String>) {
        let hold = node
            .phase
            .is_reboot()
            .then(|| reboot_hold(&state.model, &node.agent_id, &self.gate()))
            .flatten();
        let last = node_plan::reboot_wait(node, runs_scheduler, state.model.nodes.values());
        (last || hold.is_some(), hold.map(|r| r.0))
    }

    /// The disruption budget's settings: one node per protection domain at a time.
    /// The disruption budget first-install reboots are held to.
    pub fn set_max_disrupted_per_domain(&mut self, n: usize) {
        self.max_disrupted_per_domain = n;
    }

    fn gate(&self) -> GateSettings {
        GateSettings {
            max_disrupted_per_domain: self.max_disrupted_per_domain.max(1),
            default_protection_domain: self.install.plan.protection_domain.clone(),
            default_pool: self.install.plan.storage_pool.clone(),
        }
    }

    /// Handles one request; true when the model changed in a way worth saving. A heartbeat
    /// only refreshes `last_contact_ms`: with thousands of executors, saving the state for
    /// each would cost a disk write per heartbeat; it is saved with the next real change.
    pub fn handle(&mut self, state: &mut Persisted, req: ExecutorRequest, now_ms: u64) -> bool {
        let ExecutorRequest {
            executor_id,
            secret,
            call,
            reply,
        } = req;
        let agent = match self.authenticate(state, &executor_id, &secret) {
            Ok(a) => {
                if let Some(node) = state.model.nodes.get(&a) {
                    self.heard.insert(node.agent_id.clone(), now_ms);
                }
                a
            }
            Err(e) => {
                debug!("executor {executor_id}: {e}");
                let _ = reply.send(ExecutorReply::Failed(e));
                return false;
            }
        };
        match call {
            ExecutorCall::Plan(ask) => {
                self.on_plan(state, executor_id, agent, ask, now_ms, reply);
                false
            }
            ExecutorCall::Phase(report) => {
                self.on_phase(state, &executor_id, agent, report, now_ms, reply)
            }
            ExecutorCall::Devices(devices) => {
                let Some(node) = state.model.nodes.get_mut(&agent) else {
                    return false;
                };
                record_devices(node, devices, now_ms);
                self.acks.push((reply, ExecutorReply::Recorded));
                true
            }
            ExecutorCall::Heartbeat => {
                let Some(node) = state.model.nodes.get_mut(&agent) else {
                    return false;
                };
                node.last_contact_ms = Some(now_ms);
                self.acks.push((reply, ExecutorReply::Recorded));
                false
            }
            ExecutorCall::Health(problems) => {
                let changed = record_host(&mut state.model, &agent, problems, now_ms);
                self.acks.push((reply, ExecutorReply::Recorded));
                changed
            }
            ExecutorCall::Rollout(report) => {
                match rollout::record::record(&mut state.model, &agent, report, now_ms) {
                    Ok(changed) => {
                        self.acks.push((reply, ExecutorReply::Recorded));
                        changed
                    }
                    Err(e) => reply.refuse(ApiError::new(409, "rollout report refused", e)),
                }
            }
        }
    }

    /// A phase report into its node, with the devices it carries (recorded first, as if
    /// reported in order); a report of `running` or `storage-attach` registers its executor
    /// for a nudge. True when recorded.
    fn on_phase(
        &mut self,
        state: &mut Persisted,
        executor_id: &str,
        agent: String,
        mut report: PhaseReport,
        now_ms: u64,
        reply: ReplyTo,
    ) -> bool {
        if report.rebooting {
            if let Err(why) = may_reboot(&state.model, &agent, &self.gate()) {
                info!("agent {agent}: reboot claim refused: {why}");
                return reply.refuse(ApiError::new(409, "reboot held", why.0));
            }
        }
        let Some(node) = state.model.nodes.get_mut(&agent) else {
            return false;
        };
        // The executor waits next: idle once running; in `storage-attach` until its disks are
        // in the pool (`storage_ready`), which at 10,000 nodes takes minutes of gateway work.
        let waits = matches!(report.phase, Phase::Running | Phase::StorageAttach)
            && report.error.is_none()
            && !report.rebooting;
        let mut answer = ExecutorReply::Recorded;
        if let Some(devices) = report.devices.take() {
            record_devices(node, devices, now_ms);
            answer = ExecutorReply::RecordedDevices;
        }
        record_phase(node, report, now_ms);
        // Registered now, it need not ask with `nudge=1`. (Its report carries no devices:
        // cluster-init or volume-driver follows `devices`.)
        if let Some(plan) = waits
            .then(|| self.register_idle(state, executor_id, agent))
            .flatten()
        {
            answer = ExecutorReply::RecordedIdle(plan);
        }
        self.acks.push((reply, answer));
        true
    }

    /// The plan at once, or parked until it changes or the wait ends.
    fn on_plan(
        &mut self,
        state: &Persisted,
        executor_id: String,
        agent: String,
        wait: PlanAsk,
        now_ms: u64,
        reply: ReplyTo,
    ) {
        let trio = self.trio(state);
        let plan = match self.plan(state, &executor_id, &agent, trio.as_ref()) {
            Ok(p) => p,
            Err(e) => {
                let _ = reply.send(ExecutorReply::Failed(e));
                return;
            }
        };
        let unchanged = wait.version == Some(plan.version);
        if !wait.nudge && (!unchanged || wait.wait_ms == 0) {
            // A nudge owed for an older version would only bring this plan again.
            if self.parked.holds(&agent, &executor_id) == Some(false) {
                self.parked.remove(&agent);
            }
            let _ = reply.send(ExecutorReply::Plan(plan));
            return;
        }
        // An idle executor's request that finds a newer plan gets it, and the nudge past
        // it is owed from now on, as if it had asked again with that version: it need not
        // (at a new target, 10,000 second TLS connections, a third of the plan change's
        // handshakes).
        let holds = self.parked.holds(&agent, &executor_id);
        if !wait.nudge && self.parked.held() >= MAX_PARKED && holds != Some(true) {
            let _ = reply.send(ExecutorReply::Failed(ApiError::new(
                503,
                "too many waiting executors",
                format!("{MAX_PARKED} plan requests are already waiting; retry later"),
            )));
            return;
        }
        let deadline_ms = if wait.nudge {
            u64::MAX
        } else {
            now_ms.saturating_add(wait.wait_ms)
        };
        let held = (!wait.nudge).then(|| Box::new(reply.clone()));
        let answer = match (wait.nudge, unchanged) {
            (false, _) => ExecutorReply::Parked,
            (true, true) => ExecutorReply::Unchanged,
            (true, false) => ExecutorReply::Plan(plan.clone()),
        };
        self.park(state, &executor_id, agent, plan, deadline_ms, held);
        let _ = reply.send(answer);
    }

    /// Keeps an executor's plan request until its plan moves past `plan`: a held long poll
    /// (`held`, answered by then), or an idle executor owed a nudge.
    fn park(
        &mut self,
        state: &Persisted,
        executor_id: &str,
        agent: String,
        plan: PlanReply,
        deadline_ms: u64,
        held: Option<Box<ReplyTo>>,
    ) {
        let node = state.model.nodes.get(&agent);
        // The model's own key, so that `after_batch` meets it by pointer.
        let key = node.map_or_else(|| Arc::from(agent), |n| n.agent_id.clone());
        let parked = Parked {
            revision: node.map(|n| n.revision.get()),
            shared: self.shared_inputs(state),
            executor: executor_key(executor_id),
            version: plan.version,
            deadline_ms,
            reply: held,
        };
        // A request parked now was answered from the model as it is; the next quiet walk
        // must still see its deadline, and a plan that reads other nodes.
        let own_node_only = node.is_some_and(|n| !self.reads_others(n));
        match &mut self.walked {
            Some(w) if own_node_only => w.parked_since(deadline_ms),
            _ => self.walked = None,
        }
        self.parked.park(key, parked, plan);
    }

    /// An executor that reported `running` registered as its `nudge=1` request would: its
    /// plan now, which the report's answer carries (`None`: no plan, which the executor's
    /// own request will then say).
    fn register_idle(
        &mut self,
        state: &Persisted,
        executor_id: &str,
        agent: String,
    ) -> Option<PlanReply> {
        let trio = self.trio(state);
        let plan = match self.plan(state, executor_id, &agent, trio.as_ref()) {
            Ok(p) => p,
            Err(e) => {
                debug!("agent {agent}: no plan to register its idle executor at: {e}");
                return None;
            }
        };
        self.park(state, executor_id, agent, plan.clone(), u64::MAX, None);
        Some(plan)
    }

    /// The framework MESSAGEs owed to idle executors whose plans moved on.
    pub fn take_nudges(&mut self) -> Vec<Nudge> {
        std::mem::take(&mut self.nudges)
    }

    /// The batch's state could not be saved: its reports are answered 503, never
    /// "recorded" (the executor retries; the change stays in memory for the next save).
    pub fn refuse_reports(&mut self, why: &str) {
        for (reply, _) in self.acks.drain(..) {
            let _ = reply.send(ExecutorReply::Failed(ApiError::new(
                503,
                "not saved",
                format!("the scheduler could not save its state ({why}); retry later"),
            )));
        }
    }

    /// Plan requests parked now, held long polls and owed nudges (for tests and metrics).
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// Of [`ExecutorApi::parked`], the idle executors owed a nudge.
    pub fn nudges_owed(&self) -> usize {
        self.parked.len() - self.parked.held()
    }

    /// Walks of every parked request after batches so far (for tests).
    pub fn full_walks(&self) -> u64 {
        self.full_walks
    }

    /// Plans rendered again for parked requests after batches so far (for tests).
    pub fn rerendered(&self) -> u64 {
        self.rerendered
    }

    /// When the executor on `agent` last made a request (this scheduler's run only).
    pub fn heard_from(&self, agent: &str) -> Option<u64> {
        self.heard.get(agent).copied()
    }

    /// The node's agent id when the caller is a current executor with the right secret.
    fn authenticate(
        &mut self,
        state: &Persisted,
        executor_id: &str,
        presented: &Secret,
    ) -> Result<String, ApiError> {
        let unknown = ApiError::refused;
        let key = self.index_keys.hash_one(executor_id);
        let agent = match self.index.get(&key) {
            Some(agent) if is_current(state, agent, executor_id) => agent.clone(),
            _ => self.index_all(state, executor_id).ok_or_else(unknown)?,
        };
        // Only a launch's own secret, never revoked, and never an empty one (it would match
        // an empty presented one).
        let held = state.model.nodes[&*agent]
            .task
            .as_ref()
            .and_then(|t| t.secret.as_ref())
            .ok_or_else(unknown)?;
        if held.is_empty() || !held.matches(presented) {
            return Err(ApiError::refused());
        }
        // Stale entries of replaced launches are dropped as the index grows.
        if self.index.len() > state.model.nodes.len() * 2 + 16 {
            let keys = &self.index_keys;
            self.index.retain(|key, agent| {
                let current = state.model.nodes.get(agent).and_then(|n| n.task.as_ref());
                current.is_some_and(|t| keys.hash_one(&*t.executor_id()) == *key)
            });
        }
        self.index.insert(key, agent.clone());
        Ok(agent.to_string())
    }

    /// The agent of `executor_id` while it runs its node's current launch and has been
    /// indexed (at its launch or its first call).
    pub fn agent_of(&self, state: &Persisted, executor_id: &str) -> Option<Arc<str>> {
        let agent = self.index.get(&self.index_keys.hash_one(executor_id))?;
        is_current(state, agent, executor_id).then(|| agent.clone())
    }

    /// A launch's executor, indexed before its first call (an index filled by first calls
    /// scanned every node per new executor: 10,000 launches, 10^8 comparisons).
    pub fn launched(&mut self, executor_id: &str, agent: Arc<str>) {
        self.index
            .insert(self.index_keys.hash_one(executor_id), agent);
    }

    /// One pass over every node, indexing each current executor (after a restart the index
    /// is empty: the first call fills it); the agent of `executor_id`, if current.
    fn index_all(&mut self, state: &Persisted, executor_id: &str) -> Option<Arc<str>> {
        self.index_scans += 1;
        let mut found = None;
        for n in state.model.nodes.values() {
            let Some(t) = n.task.as_ref() else { continue };
            if t.is_executor(executor_id) {
                found = Some(n.agent_id.clone());
            }
            let key = self.index_keys.hash_one(&*t.executor_id());
            self.index.insert(key, n.agent_id.clone());
        }
        found
    }

    /// Experimental mode: the MDM trio's addresses, which every plan carries.
    fn trio(&self, state: &Persisted) -> Option<mdm_cluster::Trio> {
        self.install
            .experimental
            .then(|| mdm_cluster::Trio::of(state.model.nodes.values()))
    }

    /// Experimental mode: the install settings with the trio's addresses, and an MDM node's
    /// part of the cluster build.
    fn with_trio<'a>(
        &'a self,
        state: &Persisted,
        node: &Node,
        trio: Option<&mdm_cluster::Trio>,
    ) -> (Cow<'a, crate::contract::plan::Install>, Option<ClusterInit>) {
        let mut install = Cow::Borrowed(&self.install.plan);
        let Some(trio) = trio.filter(|_| self.install.experimental) else {
            return (install, None);
        };
        if install.mdm_ips.is_empty() {
            install.to_mut().mdm_ips = trio.managers();
        }
        let cluster_init = node
            .persona
            .is_mdm()
            .then(|| {
                mdm_cluster::plan(
                    node,
                    state.model.nodes.values(),
                    &self.install.plan.system_name,
                )
            })
            .flatten();
        (install, cluster_init)
    }

    fn plan(
        &self,
        state: &Persisted,
        executor_id: &str,
        agent: &str,
        trio: Option<&mdm_cluster::Trio>,
    ) -> Result<PlanReply, ApiError> {
        let node = state
            .model
            .nodes
            .get(agent)
            .ok_or_else(|| gone_executor(executor_id))?;
        let experimental = self.install.experimental;
        let (install, cluster_init) = self.with_trio(state, node, trio);
        let runs_scheduler = self.install.runs_scheduler(node);
        let (reboot_wait, waiting) = self.reboot_wait(state, node, runs_scheduler);
        let body = PlanBody {
            executor_id: Cow::Borrowed(executor_id),
            agent_id: Cow::Borrowed(&node.agent_id),
            hostname: Cow::Borrowed(&node.hostname),
            persona: node.persona,
            layout: Cow::Borrowed(&node.layout),
            phase: Some(node.phase),
            devices: Cow::Borrowed(&node.devices),
            attached: Cow::Borrowed(&node.attached),
            storage_ready: node.storage_ready,
            framework_id: state.model.framework_id.as_deref().map(Cow::Borrowed),
            install,
            resume: node.resume(),
            runs_scheduler,
            reboot_wait,
            waiting: waiting.or_else(|| rollout::view::waiting_reason(node)),
            experimental,
            cluster_init,
            target_generation: state.model.target.generation,
            generation: node.generation,
            grant: node.rollout.as_ref().and_then(|r| r.granted),
            decommission: node.removal == Some(crate::scheduler::model::Removal::Stopping),
            idle_poll_s: self.idle_poll_s,
        };
        let encode_error =
            |e: serde_json::Error| ApiError::new(500, "cannot encode plan", e.to_string());
        let hashed = serde_json::to_vec(&body).map_err(encode_error)?;
        let password = self
            .mdm_gateway_password
            .as_ref()
            .filter(|_| node.persona.is_mdm());
        let rexray_password = self.install.rexray_password.as_ref();
        let mut version = content_hash(&hashed);
        if password.is_some() || rexray_password.is_some() {
            // The secret's value stays out of the version; its presence and generation count.
            version = content_hash(
                &[version.to_le_bytes(), self.secrets_generation.to_le_bytes()].concat(),
            );
        }
        let version = version & VERSION_MASK;
        let plan = NodePlan {
            version,
            body: &body,
            secrets: (password.is_some() || rexray_password.is_some()).then(|| PlanSecrets {
                gateway_password: password.map(|p| Cow::Borrowed(p.expose())),
                rexray_password: rexray_password.map(|p| Cow::Borrowed(p.expose())),
            }),
        };
        let json = serde_json::to_vec(&plan).map_err(encode_error)?;
        Ok(PlanReply { version, json })
    }
}

/// Whether `agent`'s node may have its reboot now: not while an operator has paused the plan,
/// then as the disruption budget says.
fn may_reboot(model: &ClusterModel, agent: &str, gate: &GateSettings) -> Result<(), gate::Refusal> {
    if model.paused {
        return Err(gate::Refusal(rollout::decide::PAUSED.into()));
    }
    gate::may_disrupt(model, agent, gate)
}

/// Why the reboot of `agent`'s node, in a reboot phase, is held now (see [`may_reboot`]).
fn reboot_hold(model: &ClusterModel, agent: &str, gate: &GateSettings) -> Option<gate::Refusal> {
    let in_reboot_phase = model.nodes.get(agent).is_some_and(|n| n.phase.is_reboot());
    if in_reboot_phase && model.paused {
        return Some(gate::Refusal(rollout::decide::PAUSED.into()));
    }
    gate::reboot_hold(model, agent, gate)
}

fn is_current(state: &Persisted, agent: &str, executor_id: &str) -> bool {
    state
        .model
        .nodes
        .get(agent)
        .and_then(|n| n.task.as_ref())
        .is_some_and(|t| t.is_executor(executor_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, SystemClock};
    use crate::contract::health::HostCheck;
    use crate::contract::health::HostProblem;
    use crate::scheduler::model::{Node, Persona, TaskRecord};
    use crossbeam_channel::Receiver;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn state() -> Persisted {
        let mut s = Persisted::default();
        s.model.framework_id = Some("fw-1".into());
        s.model.nodes.insert(
            "a1",
            Node {
                task: Some(
                    TaskRecord::new(
                        "storage.h1.1",
                        "storage-executor.h1.1",
                        crate::mesos::types::TaskState::Running,
                        1,
                    )
                    .running_since(2)
                    .with_secret(SECRET.into()),
                ),
                ..Node::new("a1", "h1", Persona::Data, 1)
            },
        );
        s
    }

    fn plan_req(
        version: Option<u64>,
        wait_ms: u64,
        secret: &str,
    ) -> (ExecutorRequest, Receiver<ExecutorReply>) {
        let call = ExecutorCall::Plan(PlanAsk {
            version,
            wait_ms,
            nudge: false,
        });
        req(call, secret)
    }

    fn req(call: ExecutorCall, secret: &str) -> (ExecutorRequest, Receiver<ExecutorReply>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (
            ExecutorRequest {
                executor_id: "storage-executor.h1.1".into(),
                secret: Secret::new(secret),
                call,
                reply: tx.into(),
            },
            rx,
        )
    }

    /// The plan version an executor gets at its first request.
    fn first_version(api: &mut ExecutorApi, s: &mut Persisted) -> u64 {
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(s, r, 1);
        plan_of(rx.try_recv().unwrap()).version
    }

    /// The executor of `a1` fetches its plan, then idles (`nudge=1`, answered 304 at 2):
    /// the version it holds.
    fn idle_executor(api: &mut ExecutorApi, s: &mut Persisted) -> u64 {
        let v = first_version(api, s);
        let (r, rx) = nudge_req(v);
        api.handle(s, r, 2);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Unchanged)));
        v
    }

    /// An idle executor's plan request (`nudge=1`); it holds `version`.
    fn nudge_req(version: u64) -> (ExecutorRequest, Receiver<ExecutorReply>) {
        let ask = PlanAsk {
            version: Some(version),
            wait_ms: 0,
            nudge: true,
        };
        req(ExecutorCall::Plan(ask), SECRET)
    }

    fn plan_of(r: ExecutorReply) -> PlanReply {
        match r {
            ExecutorReply::Plan(p) => p,
            other => panic!("expected a plan, got {other:?}"),
        }
    }

    /// A caller learns nothing of which executor ids exist: a wrong secret and an unknown
    /// executor get one answer.
    #[test]
    fn a_wrong_secret_and_an_unknown_executor_get_the_same_answer() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let mut answer = |id: &str, secret: &str| {
            let (mut r, rx) = req(ExecutorCall::Heartbeat, secret);
            r.executor_id = id.into();
            assert!(!api.handle(&mut s, r, 5));
            match rx.try_recv() {
                Ok(ExecutorReply::Failed(e)) => (e.status, e.error, e.detail),
                other => panic!("{other:?}"),
            }
        };
        let wrong = answer("storage-executor.h1.1", "nope");
        let unknown = answer("storage-executor.other.9", SECRET);
        assert_eq!(wrong.0, 401, "{wrong:?}");
        assert_eq!(wrong, unknown);
        assert_eq!(s.model.nodes["a1"].last_contact_ms, None);
    }

    #[test]
    fn phase_report_updates_the_node_and_is_acked_after_the_batch() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let call =
            ExecutorCall::phase_from_json(br#"{"phase":"packages","error":"boom"}"#).unwrap();
        let (r, rx) = req(call, SECRET);
        assert!(api.handle(&mut s, r, 50));
        assert!(rx.try_recv().is_err(), "acked before the batch ended");
        api.after_batch(&s, SystemClock.now_ms());
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)));
        let n = &s.model.nodes["a1"];
        assert_eq!(n.phase, Phase::Packages);
        assert_eq!(n.last_error.as_deref(), Some("boom"));
        assert_eq!(n.last_contact_ms, Some(50));
        assert_eq!(n.updated_ms, 50);

        let call = ExecutorCall::phase_from_json(br#"{"phase":"devices"}"#).unwrap();
        let (r, _rx) = req(call, SECRET);
        api.handle(&mut s, r, 60);
        assert_eq!(s.model.nodes["a1"].last_error, None);
    }

    /// Two MDM members waiting in `reboot-final`: the first claim is recorded, the second is
    /// refused naming the first, whose plan (and the second's) then says why it waits.
    #[test]
    fn the_second_mdm_member_s_reboot_claim_waits_for_the_first() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        s.model.health.read_ms = Some(1);
        s.model.health.health = crate::scheduler::model::Health::healthy();
        s.model.health.mdm = Some(crate::scheduler::model::MdmStatus {
            cluster_state: Some("ClusteredNormal".into()),
            ..Default::default()
        });
        let mut other = s.model.nodes["a1"].clone();
        other.agent_id = "a2".into();
        other.hostname = "h2".into();
        other.task = Some(TaskRecord::new(
            "storage.h2.1",
            "storage-executor.h2.1",
            crate::mesos::types::TaskState::Running,
            1,
        ));
        for n in [s.model.nodes.get_mut("a1").unwrap(), &mut other] {
            n.persona = Persona::Secondary;
            n.phase = Phase::RebootFinal;
            n.progress = Some(Phase::RebootFinal);
        }
        other.persona = Persona::Tiebreaker;
        s.model.nodes.insert("a2", other);
        let plan = |api: &mut ExecutorApi, s: &mut Persisted| {
            let (r, rx) = plan_req(None, 0, SECRET);
            api.handle(s, r, 5);
            let p = plan_of(rx.try_recv().unwrap());
            serde_json::from_slice::<serde_json::Value>(&p.json).unwrap()
        };
        let free = plan(&mut api, &mut s);
        assert_eq!(free["reboot_wait"], false);
        assert!(free.get("waiting").is_none());
        // h2 claimed first.
        s.model.nodes.get_mut("a2").unwrap().rebooting = true;
        let held = plan(&mut api, &mut s);
        assert_eq!(held["reboot_wait"], true);
        assert_eq!(
            held["waiting"],
            "waiting: MDM member h2 is not back (reboot-final)"
        );
        let claim = br#"{"phase":"reboot-final","rebooting":true}"#;
        let (r, rx) = req(ExecutorCall::phase_from_json(claim).unwrap(), SECRET);
        assert!(!api.handle(&mut s, r, 6));
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => {
                assert_eq!(e.status, 409);
                assert!(e.detail.contains("MDM member h2 is not back"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!s.model.nodes["a1"].rebooting);
        // h2 is back: the claim is recorded, and lasts through the relaunch's first report.
        let h2 = s.model.nodes.get_mut("a2").unwrap();
        h2.rebooting = false;
        h2.phase = Phase::StorageAttach;
        let (r, _rx) = req(ExecutorCall::phase_from_json(claim).unwrap(), SECRET);
        assert!(api.handle(&mut s, r, 7));
        assert!(s.model.nodes["a1"].rebooting);
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Launching;
        let again = br#"{"phase":"reboot-final"}"#;
        let (r, _rx) = req(ExecutorCall::phase_from_json(again).unwrap(), SECRET);
        api.handle(&mut s, r, 8);
        assert!(s.model.nodes["a1"].rebooting, "not back yet");
        let after = br#"{"phase":"storage-attach"}"#;
        let (r, _rx) = req(ExecutorCall::phase_from_json(after).unwrap(), SECRET);
        api.handle(&mut s, r, 9);
        assert!(!s.model.nodes["a1"].rebooting);
    }

    /// A paused plan holds a first install's reboot: the plan says why, a claim is refused,
    /// and the resume lets it go.
    #[test]
    fn a_paused_plan_holds_reboots_until_resumed() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let n = s.model.nodes.get_mut("a1").unwrap();
        n.phase = Phase::RebootPrerequisites;
        n.progress = Some(Phase::RebootPrerequisites);
        s.model.paused = true;
        let plan = |api: &mut ExecutorApi, s: &mut Persisted| {
            let (r, rx) = plan_req(None, 0, SECRET);
            api.handle(s, r, 5);
            let p = plan_of(rx.try_recv().unwrap());
            serde_json::from_slice::<serde_json::Value>(&p.json).unwrap()
        };
        let held = plan(&mut api, &mut s);
        assert_eq!(held["reboot_wait"], true);
        assert_eq!(held["waiting"], rollout::decide::PAUSED);
        let claim = br#"{"phase":"reboot-prerequisites","rebooting":true}"#;
        let (r, rx) = req(ExecutorCall::phase_from_json(claim).unwrap(), SECRET);
        assert!(!api.handle(&mut s, r, 6));
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => {
                assert_eq!(e.status, 409);
                assert!(e.detail.contains("paused"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!s.model.nodes["a1"].rebooting);
        s.model.paused = false;
        let free = plan(&mut api, &mut s);
        assert_eq!(free["reboot_wait"], false);
        let (r, _rx) = req(ExecutorCall::phase_from_json(claim).unwrap(), SECRET);
        assert!(api.handle(&mut s, r, 7));
        assert!(s.model.nodes["a1"].rebooting);
    }

    #[test]
    fn plan_long_poll_is_parked_until_the_plan_changes() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 1);
        let plan = plan_of(rx.try_recv().unwrap());
        let json: serde_json::Value = serde_json::from_slice(&plan.json).unwrap();
        assert_eq!(json["version"], plan.version);
        assert_eq!(json["hostname"], "h1");
        assert_eq!(json["phase"], "launching");
        assert!(json.get("secrets").is_none());

        let (r, rx) = plan_req(Some(plan.version), 60_000, SECRET);
        api.handle(&mut s, r, SystemClock.now_ms());
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Parked)));
        api.after_batch(&s, SystemClock.now_ms());
        assert!(rx.try_recv().is_err(), "answered without a change");
        assert_eq!(api.parked(), 1);

        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Environment;
        api.after_batch(&s, SystemClock.now_ms());
        let changed = plan_of(rx.try_recv().unwrap());
        assert_ne!(changed.version, plan.version);
        assert_eq!(api.parked(), 0);
    }

    /// A node `a<i>` on host `h<i>` whose executor `storage-executor.h<i>.<launch>` runs.
    fn running_node(i: usize, launch: u64) -> Node {
        let task = TaskRecord::new(
            &format!("storage.h{i}.{launch}"),
            &format!("storage-executor.h{i}.{launch}"),
            crate::mesos::types::TaskState::Running,
            launch,
        )
        .running_since(2)
        .with_secret(SECRET.into());
        Node {
            task: Some(task),
            ..Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 1)
        }
    }

    /// A plan request of `executor` (`nudge`: an idle one's, else a long poll).
    fn ask(
        api: &mut ExecutorApi,
        s: &mut Persisted,
        executor: &str,
        version: Option<u64>,
        nudge: bool,
    ) -> (ExecutorReply, Receiver<ExecutorReply>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let call = ExecutorCall::Plan(PlanAsk {
            version,
            wait_ms: if nudge { 0 } else { 60_000 },
            nudge,
        });
        let r = ExecutorRequest {
            executor_id: executor.into(),
            secret: Secret::new(SECRET),
            call,
            reply: tx.into(),
        };
        api.handle(s, r, 10);
        (rx.try_recv().expect("an answer or a parking"), rx)
    }

    /// Parked requests are walked beside the model's nodes, in agent order: only the
    /// requests whose node changed are answered or nudged, wherever they sit among nodes
    /// without one, and a request of an earlier launch on an agent is told it is gone.
    #[test]
    fn a_batch_answers_exactly_the_parked_requests_whose_node_changed() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        // Agents a1..a12: in the model's order a1, a10, a11, a12, a2, ...
        for i in 2..=12 {
            s.model.nodes.insert(format!("a{i}"), running_node(i, 1));
        }
        let exec = |i: usize| format!("storage-executor.h{i}.1");
        let mut idle = Vec::new();
        for i in [11, 2, 5, 9] {
            let (first, _) = ask(&mut api, &mut s, &exec(i), None, true);
            let v = plan_of(first).version;
            let (parked, _) = ask(&mut api, &mut s, &exec(i), Some(v), true);
            assert!(matches!(parked, ExecutorReply::Unchanged), "{i}");
            idle.push(i);
        }
        let v3 = plan_of(ask(&mut api, &mut s, &exec(3), None, false).0).version;
        let (parked, held) = ask(&mut api, &mut s, &exec(3), Some(v3), false);
        assert!(matches!(parked, ExecutorReply::Parked));
        assert_eq!((api.parked(), api.nudges_owed()), (5, 4));
        api.after_batch(&s, 20);
        assert!(api.take_nudges().is_empty(), "nothing changed");
        assert_eq!(
            api.rerendered(),
            0,
            "an unchanged node is not rendered again"
        );

        // a5 and a11 change; a9 is relaunched (a new executor); a3's long poll holds on.
        s.model.nodes.get_mut("a5").unwrap().phase = Phase::Environment;
        s.model.nodes.get_mut("a11").unwrap().phase = Phase::Environment;
        s.model.nodes.insert("a9", running_node(9, 2));
        api.after_batch(&s, 30);
        let mut nudged: Vec<(String, String)> = api
            .take_nudges()
            .into_iter()
            .map(|n| (n.agent_id.to_string(), n.executor_id))
            .collect();
        nudged.sort();
        // Each names the executor that asked (the parked request keeps only its hash).
        assert_eq!(nudged, [("a11".into(), exec(11)), ("a5".into(), exec(5))]);
        assert!(held.try_recv().is_err(), "a3 did not change");
        assert_eq!(
            (api.parked(), api.nudges_owed()),
            (2, 1),
            "a2 idle, a3 held"
        );

        // A long poll of the new launch on a3 takes the place of the earlier launch's.
        s.model.nodes.insert("a3", running_node(3, 2));
        let new3 = "storage-executor.h3.2";
        let v = plan_of(ask(&mut api, &mut s, new3, None, false).0).version;
        assert!(matches!(
            ask(&mut api, &mut s, new3, Some(v), false).0,
            ExecutorReply::Parked
        ));
        match held.try_recv() {
            Ok(ExecutorReply::Failed(e)) => assert_eq!(e.status, 404, "{e}"),
            other => panic!("the earlier launch's poll: {other:?}"),
        }
        assert_eq!((api.parked(), api.nudges_owed()), (2, 1));
    }

    /// An idle executor holds nothing: its unchanged plan is answered 304 at once, a newer
    /// one 200 at once, and when the plan moves past what it was answered it is owed one
    /// nudge (no reply), then nothing until it asks again.
    #[test]
    fn an_idle_executor_is_owed_one_nudge_when_its_plan_changes() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let v = first_version(&mut api, &mut s);
        // Kept: a nudge is never sent as a reply to it.
        let (r, rx) = nudge_req(v);
        api.handle(&mut s, r, 2);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Unchanged)));
        assert_eq!((api.parked(), api.nudges_owed()), (1, 1));
        api.after_batch(&s, 3);
        assert!(api.take_nudges().is_empty(), "the plan did not change");

        // What is parked keeps the node's revision, not the node: the write is in place.
        let at = Arc::as_ptr(s.model.nodes.get_shared("a1").unwrap());
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Environment;
        assert_eq!(Arc::as_ptr(s.model.nodes.get_shared("a1").unwrap()), at);
        api.after_batch(&s, 4);
        let nudges = api.take_nudges();
        assert_eq!(nudges.len(), 1);
        assert_eq!(&*nudges[0].agent_id, "a1");
        assert_eq!(nudges[0].executor_id, "storage-executor.h1.1");
        assert_ne!(nudges[0].version, v);
        assert!(rx.try_recv().is_err(), "a nudge is a MESSAGE, not a reply");
        assert_eq!(api.parked(), 0, "owed once");
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Packages;
        api.after_batch(&s, 5);
        assert!(api.take_nudges().is_empty(), "not asked again yet");

        // Asked with an old version, the plan comes at once, and the nudge past it is owed
        // from then on: the executor does not ask a second time to register.
        let (r, rx) = nudge_req(v);
        api.handle(&mut s, r, 6);
        let now = plan_of(rx.try_recv().unwrap()).version;
        assert_eq!((api.parked(), api.nudges_owed()), (1, 1));
        api.after_batch(&s, 7);
        assert!(api.take_nudges().is_empty(), "unchanged since that answer");
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Devices;
        api.after_batch(&s, 8);
        let nudges = api.take_nudges();
        assert_eq!(nudges.len(), 1);
        let later = nudges[0].version;
        assert_ne!(later, now);

        // A nudge owed for the current plan is dropped by a plain fetch.
        let (r, rx) = nudge_req(later);
        api.handle(&mut s, r, 9);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Unchanged)));
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Environment;
        let (r, rx) = plan_req(Some(later), 0, SECRET);
        api.handle(&mut s, r, 10);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Plan(_))));
        api.after_batch(&s, 11);
        assert!(api.take_nudges().is_empty());
        assert_eq!((api.parked(), api.nudges_owed()), (0, 0));
    }

    /// A report of `running` registers its executor as its `nudge=1` request would, and the
    /// answer, sent after the batch, says past which version: an executor holding that plan
    /// need not ask. So does one of `storage-attach`, after which the executor waits for its
    /// disks. Other reports, and a failed `running`, register nothing.
    #[test]
    fn a_running_report_registers_its_executor_for_a_nudge() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        first_version(&mut api, &mut s);
        let phase = |r: PhaseReport| req(ExecutorCall::Phase(r), SECRET);
        let (r, rx) = phase(PhaseReport::entered(Phase::VolumeDriver));
        api.handle(&mut s, r, 2);
        api.after_batch(&s, 3);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)));
        let (r, rx) = phase(PhaseReport::failed(Phase::Running, "boom".into()));
        api.handle(&mut s, r, 4);
        api.after_batch(&s, 5);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)));
        assert_eq!((api.parked(), api.nudges_owed()), (0, 0));

        let (r, rx) = phase(PhaseReport::entered(Phase::Running));
        api.handle(&mut s, r, 6);
        assert!(rx.try_recv().is_err(), "answered once the batch is saved");
        api.after_batch(&s, 7);
        let past = match rx.try_recv() {
            Ok(ExecutorReply::RecordedIdle(p)) => p.version,
            other => panic!("{other:?}"),
        };
        let trio = api.trio(&s);
        let now = api.plan(&s, "storage-executor.h1.1", "a1", trio.as_ref());
        assert_eq!(now.unwrap().version, past, "the plan the executor gets now");
        assert_eq!((api.parked(), api.nudges_owed()), (1, 1));
        api.after_batch(&s, 8);
        assert!(api.take_nudges().is_empty(), "the plan did not move");

        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Environment;
        api.after_batch(&s, 9);
        let nudges = api.take_nudges();
        assert_eq!(nudges.len(), 1, "owed without a nudge=1 request");
        assert_ne!(nudges[0].version, past);

        let (r, rx) = phase(PhaseReport::entered(Phase::StorageAttach));
        api.handle(&mut s, r, 10);
        api.after_batch(&s, 11);
        let past = match rx.try_recv() {
            Ok(ExecutorReply::RecordedIdle(p)) => p.version,
            other => panic!("storage-attach: {other:?}"),
        };
        assert_eq!((api.parked(), api.nudges_owed()), (1, 1));
        s.model.nodes.get_mut("a1").unwrap().storage_ready = true;
        api.after_batch(&s, 12);
        let nudges = api.take_nudges();
        assert_eq!(nudges.len(), 1, "its disks in the pool: nudged");
        assert_ne!(nudges[0].version, past);
    }

    /// A phase report that carries the devices the phase before found records them before
    /// its phase, and its answer, sent after the batch, says so; one without devices says
    /// nothing of them, and a refused one records neither.
    #[test]
    fn a_phase_report_records_the_devices_it_carries_before_its_phase() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let phase = |r: PhaseReport| req(ExecutorCall::Phase(r), SECRET);
        let mut report = PhaseReport::entered(Phase::VolumeDriver);
        report.devices = Some(vec!["/dev/sdb".into(), "/dev/sdc".into()]);
        let (r, rx) = phase(report);
        assert!(api.handle(&mut s, r, 2), "worth saving");
        assert!(rx.try_recv().is_err(), "answered once the batch is saved");
        api.after_batch(&s, 3);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::RecordedDevices)));
        let node = &s.model.nodes["a1"];
        assert_eq!(node.devices, ["/dev/sdb", "/dev/sdc"]);
        assert_eq!(node.phase, Phase::VolumeDriver);

        let (r, rx) = phase(PhaseReport::entered(Phase::RebootFinal));
        api.handle(&mut s, r, 4);
        api.after_batch(&s, 5);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)));
        assert_eq!(s.model.nodes["a1"].devices, ["/dev/sdb", "/dev/sdc"]);

        let mut report = PhaseReport::entered(Phase::VolumeDriver);
        report.devices = Some(vec!["/dev/sdd".into()]);
        let (r, rx) = req(ExecutorCall::Phase(report), "wrong");
        api.handle(&mut s, r, 6);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Failed(e)) if e.status == 401));
        let node = &s.model.nodes["a1"];
        assert_eq!((node.phase, node.devices.len()), (Phase::RebootFinal, 2));
    }

    /// After a batch that wrote no node and changed nothing every plan reads, the parked
    /// requests are not walked, until a held poll's deadline or a write.
    #[test]
    fn a_batch_that_wrote_no_node_walks_no_parked_request() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let v = idle_executor(&mut api, &mut s);
        api.after_batch(&s, 3);
        assert_eq!(api.full_walks(), 1);
        api.after_batch(&s, 4);
        assert_eq!(api.full_walks(), 1, "nothing changed");

        // A held poll parked meanwhile: walked once its deadline has come, and dropped.
        let (r, rx) = plan_req(Some(v), 1_000, SECRET);
        api.handle(&mut s, r, 5);
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Parked)));
        api.after_batch(&s, 1_004);
        assert_eq!((api.full_walks(), api.parked()), (1, 1));
        api.after_batch(&s, 1_005);
        assert_eq!((api.full_walks(), api.parked()), (2, 0));

        // A write: walked, and the idle executor owed its nudge.
        let (r, _rx) = nudge_req(v);
        api.handle(&mut s, r, 1_006);
        api.after_batch(&s, 1_007);
        let walks = api.full_walks();
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Environment;
        api.after_batch(&s, 1_008);
        assert_eq!(api.full_walks(), walks + 1);
        assert_eq!(api.take_nudges().len(), 1);
    }

    /// Under a stream of reports, each writing its own node, a batch walks the parked
    /// requests of the nodes it wrote (and of those that read others), not all of them; a
    /// write the model's log cannot list, or too many, and it walks them all.
    #[test]
    fn a_batch_walks_only_the_parked_requests_of_the_nodes_it_wrote() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        for i in 2..=40 {
            let (agent, host) = (format!("a{i}"), format!("h{i}"));
            let task = TaskRecord::new(
                &format!("storage.{host}.1"),
                &format!("storage-executor.{host}.1"),
                crate::mesos::types::TaskState::Running,
                1,
            );
            let node = Node {
                task: Some(task.running_since(2).with_secret(SECRET.into())),
                ..Node::new(&agent, &host, Persona::Data, 1)
            };
            s.model.nodes.insert(&agent, node);
        }
        // Every executor fetches its plan, then idles, owed a nudge.
        for i in 1..=40 {
            let mut ask = |version, nudge| {
                let (mut r, rx) = plan_req(version, 0, SECRET);
                r.executor_id = format!("storage-executor.h{i}.1");
                r.call = ExecutorCall::Plan(PlanAsk {
                    version,
                    wait_ms: 0,
                    nudge,
                });
                api.handle(&mut s, r, 2);
                rx.try_recv().unwrap()
            };
            let v = plan_of(ask(None, false)).version;
            assert!(matches!(ask(Some(v), true), ExecutorReply::Unchanged));
        }
        assert_eq!(api.parked(), 40);
        api.after_batch(&s, 3);
        let walks = api.full_walks();
        let nudged = |api: &mut ExecutorApi| -> Vec<String> {
            api.take_nudges()
                .iter()
                .map(|n| n.agent_id.to_string())
                .collect()
        };

        // One node written: its executor nudged, without a walk of the forty.
        s.model.nodes.get_mut("a5").unwrap().phase = Phase::Environment;
        api.after_batch(&s, 4);
        assert_eq!(nudged(&mut api), ["a5"]);
        assert_eq!(api.full_walks(), walks, "walked only what was written");
        // Written again and again, but to the same plan: nothing owed, still no full walk.
        s.model.nodes.get_mut("a6").unwrap().failures = 0;
        s.model.nodes.get_mut("a6").unwrap().failures = 0;
        api.after_batch(&s, 5);
        assert!(nudged(&mut api).is_empty());
        assert_eq!(api.full_walks(), walks);

        // Written in passing by a walk of every node: the log cannot say which.
        for mut n in s.model.nodes.values_mut() {
            if &*n.agent_id == "a7" {
                n.phase = Phase::Environment;
            }
        }
        api.after_batch(&s, 6);
        assert_eq!(nudged(&mut api), ["a7"]);
        assert_eq!(api.full_walks(), walks + 1);

        // More nodes written than a sixteenth of the parked requests: a full walk is as cheap.
        for a in ["a8", "a9", "a10"] {
            s.model.nodes.get_mut(a).unwrap().phase = Phase::Environment;
        }
        api.after_batch(&s, 7);
        assert_eq!(nudged(&mut api), ["a10", "a8", "a9"]);
        assert_eq!(api.full_walks(), walks + 2);
    }

    #[test]
    fn only_plans_whose_inputs_changed_are_rendered_again() {
        assert!(!must_render(false, true, true));
        assert!(must_render(false, false, true), "its node changed");
        assert!(
            must_render(false, true, false),
            "an input of every plan changed"
        );
        assert!(must_render(true, true, true), "it reads other nodes");

        let mut api = ExecutorApi::new();
        let mut s = state();
        s.model.nodes.insert(
            "a2",
            Node {
                task: Some(
                    TaskRecord::new(
                        "storage.h2.1",
                        "storage-executor.h2.1",
                        crate::mesos::types::TaskState::Running,
                        1,
                    )
                    .running_since(2)
                    .with_secret("s2".into()),
                ),
                ..Node::new("a2", "h2", Persona::Data, 1)
            },
        );
        let mut waits = Vec::new();
        for (agent, secret) in [("a1", SECRET), ("a2", "s2")] {
            let id = s
                .model
                .nodes
                .get(agent)
                .unwrap()
                .task
                .as_ref()
                .unwrap()
                .executor_id()
                .into_owned();
            let ask = |version, wait_ms| {
                let (tx, rx) = crossbeam_channel::unbounded();
                let call = ExecutorCall::Plan(PlanAsk {
                    version,
                    wait_ms,
                    nudge: false,
                });
                let req = ExecutorRequest {
                    executor_id: id.to_string(),
                    secret: Secret::new(secret),
                    call,
                    reply: tx.into(),
                };
                (req, rx)
            };
            let (r, rx) = ask(None, 0);
            api.handle(&mut s, r, 1);
            let v = plan_of(rx.try_recv().unwrap()).version;
            let (r, rx) = ask(Some(v), 60_000);
            api.handle(&mut s, r, SystemClock.now_ms());
            assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Parked)));
            waits.push(rx);
        }
        api.after_batch(&s, SystemClock.now_ms());
        assert_eq!(api.rerendered(), 0, "nothing changed");
        // A heartbeat writes its node (not its plan): that one plan is rendered, unchanged.
        s.model.nodes.get_mut("a2").unwrap().last_contact_ms = Some(5);
        api.after_batch(&s, SystemClock.now_ms());
        assert_eq!(api.rerendered(), 1);
        assert!(waits[1].try_recv().is_err(), "the plan did not change");
        api.after_batch(&s, SystemClock.now_ms());
        assert_eq!(
            api.rerendered(),
            1,
            "rendered from the same node: not again"
        );
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Environment;
        api.after_batch(&s, SystemClock.now_ms());
        assert_eq!(api.rerendered(), 2);
        assert!(matches!(waits[0].try_recv(), Ok(ExecutorReply::Plan(_))));
        // An input of every plan: both are rendered (the one still parked).
        s.model.framework_id = Some("fw-2".into());
        api.after_batch(&s, SystemClock.now_ms());
        assert_eq!(api.rerendered(), 3);
        assert!(matches!(waits[1].try_recv(), Ok(ExecutorReply::Plan(_))));
    }

    #[test]
    fn expired_waits_are_dropped() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 1);
        let v = plan_of(rx.try_recv().unwrap()).version;
        let (r, _rx) = plan_req(Some(v), 1, SECRET);
        api.handle(&mut s, r, 1); // deadline long past
        assert_eq!(api.parked(), 1);
        api.after_batch(&s, SystemClock.now_ms());
        assert_eq!(api.parked(), 0);
    }

    #[test]
    fn only_mdm_plans_carry_the_gateway_password() {
        let mut api = ExecutorApi::new();
        api.set_mdm_gateway_password(Some(Secret::new("Gw-pass")));
        let mut s = state();
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 1);
        let data = plan_of(rx.try_recv().unwrap());
        assert!(!String::from_utf8_lossy(&data.json).contains("Gw-pass"));

        s.model.nodes.get_mut("a1").unwrap().persona = Persona::Primary;
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 1);
        let mdm = plan_of(rx.try_recv().unwrap());
        let json: serde_json::Value = serde_json::from_slice(&mdm.json).unwrap();
        assert_eq!(json["secrets"]["gateway_password"], "Gw-pass");
        assert!(!format!("{mdm:?}").contains("Gw-pass"));
    }

    /// Every node gets the volume driver's scoped user; the admin password only
    /// MDM nodes. Neither is in the hashed plan body, the model or a Debug line.
    #[test]
    fn every_plan_carries_the_volume_driver_user_and_only_mdm_plans_the_admin() {
        let mut api = ExecutorApi::new();
        api.set_mdm_gateway_password(Some(Secret::new("Adm1n-pw")));
        let mut install = InstallSettings {
            rexray_password: Some(Secret::new("Vol-pw1")),
            ..Default::default()
        };
        install.plan.volume_driver.username = Some("rexray".into());
        api.set_install_settings(install);
        let mut s = state();
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 1);
        let data = plan_of(rx.try_recv().unwrap());
        let json: serde_json::Value = serde_json::from_slice(&data.json).unwrap();
        assert_eq!(json["secrets"]["rexray_password"], "Vol-pw1");
        assert_eq!(json["install"]["volume_driver"]["username"], "rexray");
        assert!(json["secrets"].get("gateway_password").is_none());
        assert!(!String::from_utf8_lossy(&data.json).contains("Adm1n-pw"));

        s.model.nodes.get_mut("a1").unwrap().persona = Persona::Primary;
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 1);
        let mdm = plan_of(rx.try_recv().unwrap());
        let json: serde_json::Value = serde_json::from_slice(&mdm.json).unwrap();
        assert_eq!(json["secrets"]["gateway_password"], "Adm1n-pw");
        assert_eq!(json["secrets"]["rexray_password"], "Vol-pw1");
        let stored = serde_json::to_string(&s.model).unwrap();
        let shown = format!("{mdm:?} {api:?} {stored}");
        assert!(
            !shown.contains("Vol-pw1") && !shown.contains("Adm1n-pw"),
            "{shown}"
        );
    }

    /// A phase report's warning (REX-Ray without credentials) stays with the node, shows in
    /// its serialized state, and goes with the next report that has none.
    #[test]
    fn phase_warnings_are_kept_with_the_node() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let call = ExecutorCall::phase_from_json(
            br#"{"phase":"volume-driver","warning":"no -rexray.username"}"#,
        )
        .unwrap();
        let (r, _rx) = req(call, SECRET);
        api.handle(&mut s, r, 5);
        let n = &s.model.nodes["a1"];
        assert_eq!(n.warning.as_deref(), Some("no -rexray.username"));
        assert_eq!(n.last_error, None, "a warning is not an error");
        let json = serde_json::to_value(n).unwrap();
        assert_eq!(json["warning"], "no -rexray.username");
        let call = ExecutorCall::phase_from_json(br#"{"phase":"running"}"#).unwrap();
        let (r, _rx) = req(call, SECRET);
        api.handle(&mut s, r, 6);
        assert_eq!(s.model.nodes["a1"].warning, None);
    }

    #[test]
    fn reports_of_an_unsaved_batch_get_503() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let call = ExecutorCall::phase_from_json(br#"{"phase":"packages"}"#).unwrap();
        let (r, rx) = req(call, SECRET);
        assert!(api.handle(&mut s, r, 50));
        api.refuse_reports("disk full");
        api.after_batch(&s, 60);
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => {
                assert_eq!(e.status, 503);
                assert!(e.detail.contains("disk full"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(rx.try_recv().is_err(), "answered twice");
    }

    #[test]
    fn plan_carries_install_settings_progress_and_readiness() {
        let mut api = ExecutorApi::new();
        let mut install = InstallSettings {
            plan: crate::contract::plan::Install {
                mdm_ips: vec!["10.0.0.1".into(), "10.0.0.2".into()],
                debug: true,
                ..Default::default()
            },
            ..Default::default()
        };
        install.plan.packages.insert(
            "rhel7".into(),
            crate::contract::plan::Packages {
                sds: Some("http://repo/EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm".into()),
                ..Default::default()
            },
        );
        api.set_install_settings(install);
        let mut s = state();
        let call = ExecutorCall::phase_from_json(br#"{"phase":"packages"}"#).unwrap();
        let (r, _rx) = req(call, SECRET);
        api.handle(&mut s, r, 5);
        let (r, _rx) = req(ExecutorCall::Devices(vec!["/dev/sdb".into()]), SECRET);
        api.handle(&mut s, r, 6);
        // A failure and a relaunch reset the phase, never the progress.
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Launching;
        // Set by the gateway side once the devices are in their pools and the SDC is up.
        s.model.nodes.get_mut("a1").unwrap().storage_ready = true;
        let (r, rx) = plan_req(None, 0, SECRET);
        api.handle(&mut s, r, 7);
        let json: serde_json::Value =
            serde_json::from_slice(&plan_of(rx.try_recv().unwrap()).json).unwrap();
        assert_eq!(json["resume"], "packages");
        assert_eq!(json["storage_ready"], true);
        assert_eq!(json["install"]["mdm_ips"][1], "10.0.0.2");
        assert_eq!(json["install"]["debug"], true);
        assert!(json["install"]["packages"]["rhel7"]["sds"]
            .as_str()
            .unwrap()
            .ends_with(".rpm"));
        assert_eq!(json["runs_scheduler"], false);
        assert_eq!(json["reboot_wait"], false);
    }

    #[test]
    fn a_running_nodes_device_report_adds_and_never_drops_and_keeps_it_running() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let devices = |s: &Persisted| s.model.nodes["a1"].devices.clone();
        let report = |api: &mut ExecutorApi, s: &mut Persisted, list: &[&str], at: u64| {
            let list = list.iter().map(|d| d.to_string()).collect();
            let (r, _rx) = req(ExecutorCall::Devices(list), SECRET);
            api.handle(s, r, at)
        };
        // The devices phase: the report is the node's list.
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Devices;
        assert!(report(&mut api, &mut s, &["/dev/sdb", "/dev/sdc"], 5));
        assert!(report(&mut api, &mut s, &["/dev/sdb"], 6));
        assert_eq!(devices(&s), ["/dev/sdb"]);
        // Running: a new device joins; one no longer listed stays.
        s.model.nodes.get_mut("a1").unwrap().phase = Phase::Running;
        assert!(report(&mut api, &mut s, &["/dev/sdd"], 7));
        assert_eq!(devices(&s), ["/dev/sdb", "/dev/sdd"]);
        assert!(report(
            &mut api,
            &mut s,
            &["/dev/sdb", "/dev/sdd", "/dev/sdd"],
            8
        ));
        assert_eq!(devices(&s), ["/dev/sdb", "/dev/sdd"]);
        assert_eq!(s.model.nodes["a1"].phase, Phase::Running);
    }

    #[test]
    fn experimental_plans_carry_the_trio_and_only_mdm_plans_the_cluster_build() {
        let mut api = ExecutorApi::new();
        api.set_install_settings(InstallSettings {
            experimental: true,
            plan: crate::contract::plan::Install {
                system_name: "sys".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        api.set_mdm_gateway_password(Some(Secret::new("Gw-pass")));
        let mut s = state();
        let plan_json = |api: &mut ExecutorApi, s: &mut Persisted| {
            let (r, rx) = plan_req(None, 0, SECRET);
            api.handle(s, r, 1);
            serde_json::from_slice::<serde_json::Value>(&plan_of(rx.try_recv().unwrap()).json)
                .unwrap()
        };
        // No trio placed yet: the SDC has no addresses to take, and is told to wait.
        let json = plan_json(&mut api, &mut s);
        assert_eq!(json["experimental"], true);
        assert_eq!(json["install"]["mdm_ips"], serde_json::json!([]));
        assert!(json.get("cluster_init").is_none());
        for (agent, persona, ip) in [
            ("a2", Persona::Primary, "10.0.0.1"),
            ("a3", Persona::Secondary, "10.0.0.2"),
        ] {
            let mut n = Node::new(agent, agent, persona, 1);
            n.ip = Some(ip.into());
            s.model.nodes.insert(agent, n);
        }
        let json = plan_json(&mut api, &mut s);
        assert_eq!(
            json["install"]["mdm_ips"],
            serde_json::json!(["10.0.0.1", "10.0.0.2"])
        );
        assert!(json.get("cluster_init").is_none() && json.get("secrets").is_none());
        s.model.nodes.get_mut("a1").unwrap().persona = Persona::Tiebreaker;
        let json = plan_json(&mut api, &mut s);
        assert_eq!(json["cluster_init"]["role"], "tiebreaker");
        assert_eq!(json["cluster_init"]["cluster_created"], false);
        assert_eq!(json["secrets"]["gateway_password"], "Gw-pass");
        assert!(!json["cluster_init"].to_string().contains("Gw-pass"));
    }

    #[test]
    fn a_current_launch_whose_secret_was_revoked_is_refused() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        // Its agent is gone: the launch stays on record, its secret does not.
        let node = s.model.nodes.get_mut("a1").unwrap();
        node.task.as_mut().unwrap().secret = None;
        let (r, rx) = req(ExecutorCall::Heartbeat, SECRET);
        assert!(!api.handle(&mut s, r, 1));
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => assert_eq!(e.status, 401),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            s.model.nodes["a1"].last_contact_ms, None,
            "nothing recorded"
        );
    }

    #[test]
    fn the_executor_index_stays_bounded_through_relaunches() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        for seq in 1..=40u64 {
            let id = format!("storage-executor.h1.{seq}");
            let node = s.model.nodes.get_mut("a1").unwrap();
            node.task.as_mut().unwrap().set_executor_id(&id);
            let (mut r, rx) = req(ExecutorCall::Heartbeat, SECRET);
            r.executor_id = id;
            api.handle(&mut s, r, seq);
            api.after_batch(&s, SystemClock.now_ms());
            assert!(
                matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)),
                "{seq}"
            );
            // One node: stale entries go once there are more than 2 x 1 + 16.
            assert!(api.index.len() <= 19, "{}", api.index.len());
        }
        // The current launch is still found through the index, a replaced one is not.
        let (r, rx) = req(ExecutorCall::Heartbeat, SECRET);
        api.handle(&mut s, r, 41);
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => assert_eq!(e.status, 401),
            other => panic!("{other:?}"),
        }
    }

    /// Neither a launch's first call nor every executor's first call after a restart scans
    /// every node: 10,000 of them would be 10^8 comparisons.
    #[test]
    fn executors_are_indexed_at_launch_and_all_at_once_after_a_restart() {
        let mut s = state();
        let mut api = ExecutorApi::new();
        let heartbeat = |api: &mut ExecutorApi, s: &mut Persisted, id: &str, secret: &str| {
            let (mut r, rx) = req(ExecutorCall::Heartbeat, secret);
            r.executor_id = id.into();
            api.handle(s, r, 5);
            api.after_batch(s, 6);
            assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)), "{id}");
        };
        for i in 2..=4 {
            let (agent, host) = (format!("a{i}"), format!("h{i}"));
            let (task, executor) = crate::contract::ids::make(&host, 1);
            let state = crate::mesos::types::TaskState::Staging;
            let secret = format!("secret-{i}");
            let launch =
                TaskRecord::new(&task, &executor, state, 1).with_secret(secret.as_str().into());
            let node = Node {
                task: Some(launch),
                ..Node::new(&agent, &host, Persona::Data, 1)
            };
            s.model.nodes.insert(agent.as_str(), node);
            api.launched(&executor, s.model.nodes[agent.as_str()].agent_id.clone());
        }
        for i in 2..=4 {
            let executor = crate::contract::ids::make(&format!("h{i}"), 1).1;
            heartbeat(&mut api, &mut s, &executor, &format!("secret-{i}"));
        }
        assert_eq!(api.index_scans, 0, "indexed at launch");
        // A restarted scheduler's first call indexes every executor.
        let mut api = ExecutorApi::new();
        heartbeat(&mut api, &mut s, "storage-executor.h1.1", SECRET);
        for i in 2..=4 {
            let executor = crate::contract::ids::make(&format!("h{i}"), 1).1;
            heartbeat(&mut api, &mut s, &executor, &format!("secret-{i}"));
        }
        assert_eq!(api.index_scans, 1);
    }

    #[test]
    fn a_replaced_executor_is_refused() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let (r, rx) = req(ExecutorCall::Heartbeat, SECRET);
        assert!(!api.handle(&mut s, r, 1), "a heartbeat alone is not saved");
        assert_eq!(s.model.nodes["a1"].last_contact_ms, Some(1));
        api.after_batch(&s, SystemClock.now_ms());
        assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)));
        // A relaunch replaced the task (keeping its secret, by accident of the test): the
        // old executor id is no node's launch any more.
        s.model
            .nodes
            .get_mut("a1")
            .unwrap()
            .task
            .as_mut()
            .unwrap()
            .set_executor_id("storage-executor.h1.2");
        let (r, rx) = req(ExecutorCall::Heartbeat, SECRET);
        assert!(!api.handle(&mut s, r, 2));
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => assert_eq!(e.status, 401),
            other => panic!("{other:?}"),
        }
        // Nor is its host report taken.
        let sds = HostProblem::new(HostCheck::Service, "sds", "not running");
        let (r, rx) = req(ExecutorCall::Health(vec![sds]), SECRET);
        assert!(!api.handle(&mut s, r, 3));
        match rx.try_recv() {
            Ok(ExecutorReply::Failed(e)) => assert_eq!(e.status, 401),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.model.nodes["a1"].host, None);
    }

    #[test]
    fn a_host_report_is_kept_and_saved_only_when_it_changes() {
        let mut api = ExecutorApi::new();
        let mut s = state();
        let sds = HostProblem::new(HostCheck::Service, "sds", "not running");
        let mut report = |s: &mut Persisted, problems: Vec<HostProblem>, at: u64| {
            let (r, rx) = req(ExecutorCall::Health(problems), SECRET);
            let saved = api.handle(s, r, at);
            api.after_batch(s, at);
            assert!(matches!(rx.try_recv(), Ok(ExecutorReply::Recorded)));
            saved
        };
        // (problems, saved, kept problems, reported at)
        let table = [
            (vec![], true, vec![], 10),
            (vec![], false, vec![], 10),
            (vec![sds.clone()], true, vec![sds.clone()], 30),
            (vec![sds.clone()], false, vec![sds.clone()], 30),
            (vec![], true, vec![], 50),
        ];
        for (i, (problems, saved, kept, at)) in table.into_iter().enumerate() {
            let before = s.model.nodes.get_shared("a1").unwrap().clone();
            assert_eq!(report(&mut s, problems, 10 * i as u64 + 10), saved, "{i}");
            let host = s.model.nodes["a1"].host.clone().unwrap();
            assert_eq!((host.problems, host.reported_ms), (kept, at), "{i}");
            let same = Arc::ptr_eq(&before, s.model.nodes.get_shared("a1").unwrap());
            assert_eq!(
                same, !saved,
                "{i}: an unchanged report leaves the node shared"
            );
        }
    }
}

#[cfg(test)]
mod captured_plan {
    use super::*;
    use crate::scheduler::model::{Node, Persona, TaskRecord};

    #[test]
    /// A plan's JSON, byte for byte, as the scheduler wrote it before the contract module.
    fn the_plan_json_is_unchanged() {
        let args: Vec<String> = [
            "-uri=10.0.0.1:5050",
            "-rest.port=31000",
            "-rest.address=h9",
            "-storage.password=Adm1n-pw",
            "-storage.protectiondomain=pd",
            "-storage.storagepool=sp",
            "-experimental",
            "-storage.clustername=sys",
            "-storage.lbgateway=gw.example:8443",
            "-storage.ubuntu14.sds=http://repo/EMC-ScaleIO-sds-2.0-10000.2072.Ubuntu.14.04.x86_64.deb",
            "-storage.ubuntu14.sds.sha256=2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            "-storage.packages.unverified=true",
            "-storage.ubuntu14.mdm=http://repo/EMC-ScaleIO-mdm-2.0-10000.2072.Ubuntu.14.04.x86_64.deb",
            "-storage.rhel7.sdc=http://repo/EMC-ScaleIO-sdc-2.0-10000.2072.el7.x86_64.rpm",
            "-storage.rhel7.gw=http://repo/EMC-ScaleIO-gateway-2.0-10000.2072.el7.noarch.rpm",
            "-rexray.ubuntu14.rexray=http://r/rexray_0.11.4-1_amd64.deb",
            "-rexray.ubuntu14.rexray.sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "-rexray.rhel7.dvdcli=http://r/dvdcli-0.2.1-1.x86_64.rpm",
            "-isolator.binary=http://r/libmesos_dvdi_isolator-1.0.1.so",
            "-rexray.username=rexray",
            "-rexray.password=Vol-pw1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = match crate::scheduler::flags::parse(&args, &|_: &str| None).unwrap() {
            crate::scheduler::flags::Parsed::Run(c) => c,
            _ => panic!(),
        };
        let mut api = ExecutorApi::new();
        api.set_install_settings(InstallSettings::from_config(&c));
        api.set_mdm_gateway_password(Some(Secret::new("Gw-pass")));
        let mut s = Persisted::default();
        s.model.framework_id = Some("fw-1".into());
        for (agent, persona, ip, progress) in [
            ("a1", Persona::Primary, "10.0.0.1", Phase::ClusterInit),
            ("a2", Persona::Secondary, "10.0.0.2", Phase::Devices),
            ("a3", Persona::Tiebreaker, "10.0.0.3", Phase::Devices),
        ] {
            let mut n = Node::new(agent, &format!("h-{agent}"), persona, 1);
            n.ip = Some(ip.into());
            n.progress = Some(progress);
            n.phase = progress;
            n.devices = vec!["/dev/sdb".into()];
            n.attached = vec!["/dev/sdb".into()];
            n.layout
                .sds
                .entry("pd1".into())
                .or_default()
                .insert("sp1".into(), vec!["/dev/sdb".into()]);
            n.layout.sdc.insert("pd1".into(), vec!["sp1".into()]);
            n.task = Some(
                TaskRecord::new(
                    &format!("storage.h-{agent}.1"),
                    &format!("storage-executor.h-{agent}.1"),
                    crate::mesos::types::TaskState::Running,
                    1,
                )
                .with_secret("s".into()),
            );
            s.model.nodes.insert(agent, n);
        }
        let (tx, rx) = crossbeam_channel::bounded(2);
        api.handle(
            &mut s,
            ExecutorRequest {
                executor_id: "storage-executor.h-a1.1".into(),
                secret: "s".into(),
                call: ExecutorCall::Plan(PlanAsk::default()),
                reply: tx.into(),
            },
            1,
        );
        match rx.try_recv().unwrap() {
            ExecutorReply::Plan(p) => assert_eq!(
                String::from_utf8(p.json).unwrap(),
                include_str!("../../contract/testdata/plan.json").trim()
            ),
            other => panic!("{other:?}"),
        }
    }
}
