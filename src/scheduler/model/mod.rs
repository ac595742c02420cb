//! The cluster model: what the scheduler knows of every agent it manages. The dispatcher
//! thread owns it; everyone else sees copies (snapshots) or sends it messages.
//!
//! It is also the durable state: it is saved after every change and before any call that
//! depends on the change leaves the process. Each launch's executor secret is held with the
//! launch ([`TaskRecord::secret`]) as a [`Token`], which has no `Serialize`: serializing the
//! model (for `/api/state`) cannot reach it; the store writes it beside the node on purpose.

use crate::contract::ids::{self, EXECUTOR_PREFIX};
use crate::mesos::types::TaskState;
use crate::secret::Token;
use interned::Word;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

mod exact;
pub mod health;
pub mod interned;
pub mod maintenance;
pub mod nodes;
pub mod revision;
pub mod rollout;
pub mod sparse;
pub use health::{
    ClusterHealth, DeviceStatus, Health, HealthState, HostHealth, MdmMemberStatus, MdmStatus,
    NodeStorage, SdsStatus,
};
pub use nodes::{once_each, NodeIter, NodeMut, NodeValues, Nodes, WriteMark};
pub use revision::Revision;
pub use rollout::{NodeRollout, PlanKind, Step, StepState, StepStatus, Target};
pub use sparse::{DeviceNames, Sparse};

/// The version of the persisted state format this build writes and reads.
pub const STATE_VERSION: u32 = 1;

pub use crate::contract::plan::Layout;
pub use crate::contract::{Persona, Phase};

/// A node's [`Layout`], boxed when it has one (`sparse.rs`): most nodes use the global pool.
/// Saved and shown as before (`{}` for the global pool).
pub type NodeLayout = Sparse<Layout>;

static GLOBAL: Layout = Layout {
    sds: BTreeMap::new(),
    sdc: BTreeMap::new(),
};

impl sparse::Empty for Layout {
    fn empty() -> &'static Layout {
        &GLOBAL
    }
    fn is_empty(&self) -> bool {
        self.is_global()
    }
}

/// One launch of the storage executor on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub task_id: Box<str>,
    /// `None`: the usual executor id, derived from the task id ([`TaskRecord::executor_id`]);
    /// kept only when it differs (not a second id string per node).
    executor_id: Option<Box<str>>,
    /// Last Mesos state seen; saved and shown by its Mesos name (`TASK_RUNNING`).
    pub state: TaskState,
    pub launched_at_ms: u64,
    pub running_since_ms: Option<u64>,
    /// The SHA-256 of the secret this launch's executor presents (the secret itself went
    /// only into its `TaskInfo.data`); `None` once revoked (its agent is gone) or for a
    /// launch saved without one. Held here, 32 bytes, rather than in a map keyed by
    /// another copy of the executor id (~2 MB at 10,000 executors). Never
    /// serialized with the record (see its `Serialize`).
    pub secret: Option<Token>,
}

impl TaskRecord {
    /// A launch in `state`, not yet running, without a secret.
    pub fn new(task_id: &str, executor_id: &str, state: TaskState, launched_at_ms: u64) -> Self {
        let mut t = TaskRecord {
            task_id: task_id.into(),
            executor_id: None,
            state,
            launched_at_ms,
            running_since_ms: None,
            secret: None,
        };
        t.set_executor_id(executor_id);
        t
    }

    pub fn with_secret(mut self, secret: Token) -> Self {
        self.secret = Some(secret);
        self
    }

    pub fn running_since(mut self, ms: u64) -> Self {
        self.running_since_ms = Some(ms);
        self
    }

    /// The derived executor id's part after its prefix, when the task id has the usual form.
    fn derived_suffix(&self) -> Option<&str> {
        ids::task_suffix(&self.task_id)
    }

    pub fn executor_id(&self) -> std::borrow::Cow<'_, str> {
        match (&self.executor_id, self.derived_suffix()) {
            (Some(id), _) => std::borrow::Cow::Borrowed(id),
            (None, Some(suffix)) => format!("{EXECUTOR_PREFIX}{suffix}").into(),
            // Unreachable by construction: such a task id keeps its executor id.
            (None, None) => std::borrow::Cow::Borrowed(""),
        }
    }

    /// [`crate::hash::content_hash`] of [`TaskRecord::executor_id`], without making the id.
    pub fn executor_hash(&self) -> u64 {
        let mut h = crate::hash::ContentHasher::default();
        match (&self.executor_id, self.derived_suffix()) {
            (Some(id), _) => h.update(id.as_bytes()),
            (None, Some(suffix)) => {
                h.update(ids::EXECUTOR_PREFIX.as_bytes());
                h.update(suffix.as_bytes());
            }
            (None, None) => {}
        }
        h.finish()
    }

    /// Whether `id` is this launch's executor id (no allocation).
    pub fn is_executor(&self, id: &str) -> bool {
        match (&self.executor_id, self.derived_suffix()) {
            (Some(mine), _) => **mine == *id,
            (None, Some(suffix)) => ids::executor_suffix(id) == Some(suffix),
            (None, None) => false,
        }
    }

    pub fn set_executor_id(&mut self, id: &str) {
        let derived = self
            .derived_suffix()
            .is_some_and(|suffix| ids::executor_suffix(id) == Some(suffix));
        self.executor_id = (!derived).then(|| id.into());
    }

    /// Still holds (or is about to hold) the agent: the node is covered.
    pub fn is_active(&self) -> bool {
        !self.state.is_terminal() && self.state != TaskState::Unknown
    }
}

/// The record's JSON, as `/api/state` and the store have always had it: both ids, never the
/// secret.
#[derive(Serialize, Deserialize)]
struct TaskRecordJson<S, E> {
    task_id: S,
    executor_id: E,
    state: TaskState,
    launched_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    running_since_ms: Option<u64>,
}

impl Serialize for TaskRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TaskRecordJson {
            task_id: &*self.task_id,
            executor_id: ExecutorIdJson(self),
            state: self.state,
            launched_at_ms: self.launched_at_ms,
            running_since_ms: self.running_since_ms,
        }
        .serialize(s)
    }
}

/// A launch's executor id as JSON, written in place when derived (a model's worth of nodes is
/// serialized at every `/api/state` render and store compaction: no string per node).
struct ExecutorIdJson<'a>(&'a TaskRecord);

impl Serialize for ExecutorIdJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (&self.0.executor_id, self.0.derived_suffix()) {
            (None, Some(suffix)) => s.collect_str(&format_args!("{EXECUTOR_PREFIX}{suffix}")),
            _ => s.serialize_str(&self.0.executor_id()),
        }
    }
}

impl<'de> Deserialize<'de> for TaskRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let j = TaskRecordJson::<String, String>::deserialize(d)?;
        let mut t = TaskRecord::new(&j.task_id, &j.executor_id, j.state, j.launched_at_ms);
        t.running_since_ms = j.running_since_ms;
        Ok(t)
    }
}

/// Everything known about one agent the framework manages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub agent_id: Arc<str>,
    pub hostname: String,
    pub persona: Persona,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskRecord>,
    #[serde(default)]
    pub layout: NodeLayout,
    /// Devices the executor reported as usable.
    #[serde(default, deserialize_with = "exact::vec")]
    pub devices: Vec<String>,
    /// Devices attached to the storage cluster (so a restart does not attach them again).
    #[serde(default, deserialize_with = "exact::vec")]
    pub attached: Vec<String>,
    /// The storage-attach handshake (the contract between gateway work and node plan): every reported device is attached
    /// and the SDC is connected; the executor may go on to `running`.
    #[serde(default)]
    pub storage_ready: bool,
    /// The gateway lists this node's SDC as connected to the MDMs.
    #[serde(default)]
    pub sdc_connected: bool,
    /// The agent's IP address (from its offers): the SDS and SDC are found by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<Box<str>>,
    /// Gateway id of this node's SDS, once created or found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sds_id: Option<Box<str>>,
    /// Write-ahead record of the gateway work handed to the gateway worker and not yet
    /// answered (saved before the work starts; a restart repeats it, finding by name what
    /// was already created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_intent: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<Box<str>>,
    /// A non-fatal problem the executor reported with its last phase (REX-Ray
    /// configured without gateway credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<Box<str>>,
    /// Last sign of life from the executor or a status update (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_contact_ms: Option<u64>,
    /// Launches that ended without a stable run; drives the relaunch backoff.
    #[serde(default)]
    pub failures: u32,
    /// No relaunch before this time (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Since when the master has not listed this node's agent (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_since_ms: Option<u64>,
    pub updated_ms: u64,
    /// The last phase an executor reported on its way to `running`. Unlike
    /// `phase`, a relaunch or a failure does not reset it: the next executor resumes here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Phase>,
    /// Its executor claimed a reboot (`PhaseReport::rebooting`) and the host has not reported
    /// a phase after it yet: the node is down for the disruption budget, whatever its task says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebooting: bool,
    /// The node's storage health, derived from `storage`, `host` and the cluster's data
    /// (`scheduler/health/`; which facts count in which phase is explained in `node.rs`).
    #[serde(default)]
    pub health: Health,
    /// The executor's last host report (a running node's executor keeps checking its host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Box<HostHealth>>,
    /// What the gateway's last poll said of this node's SDS and devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Arc<NodeStorage>>,
    /// The gateway worker attached devices after the last poll began, so `storage` (from
    /// that poll) cannot list this node's SDS yet: its absence is no fault until the next
    /// poll. Not saved: a restarted scheduler's first poll decides.
    #[serde(skip)]
    pub attached_after_poll: bool,
    /// The target generation this node last reached (its executor said `reached`).
    #[serde(default)]
    pub generation: u64,
    /// Its walk toward the target, once its executor planned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Box<NodeRollout>>,
    /// SHA-256 (hex) of the executor binary the current launch's command checked before it
    /// ran: the binary this node's executor runs. `None`: launched by a build that did not
    /// record it, or while the scheduler could not read the binary it serves. Interned: every
    /// node runs the one binary served, and a 64-byte text of its own was 0.8 MB of heap at
    /// 10,000 nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_sha256: Option<Word>,
    /// Its executor is being replaced by one of the binary served now (see
    /// `dispatcher/replace.rs`). Boxed, as `restart`: rare, and 8 bytes in every node where
    /// inline it was 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacing: Option<Box<Replacement>>,
    /// An operator's restart under way (see `dispatcher/op_restart.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<Box<Restart>>,
    /// The node's devices its running executor no longer finds on the host (derived from
    /// `host`; shown, never removed: removal is an operator's act).
    #[serde(default, skip_serializing_if = "DeviceNames::is_empty")]
    pub devices_missing: DeviceNames,
    /// The node's devices the gateway lists in error (derived from `storage`).
    #[serde(default, skip_serializing_if = "DeviceNames::is_empty")]
    pub device_errors: DeviceNames,
    /// `-node.max-failures` launches in a row failed: it is not relaunched until an operator's
    /// `retry`, a target change, or a new agent for its host (`phase` and `last_error` say
    /// how the last one ended).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relaunch_stopped: bool,
    /// An operator is taking the node's storage out (saved: a restarted scheduler goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removal: Option<Removal>,
    /// Its SDS was removed and its services stopped: never launched again until an operator
    /// recommissions it, whatever its agent offers.
    #[serde(default)]
    pub decommissioned: bool,
    /// Devices an operator had removed from the pool (and those on their way out): never
    /// attached again, though the host still has them.
    #[serde(default, skip_serializing_if = "DeviceNames::is_empty")]
    pub devices_removed: DeviceNames,
    #[serde(default, skip_serializing_if = "DeviceNames::is_empty")]
    pub devices_removing: DeviceNames,
    /// A Mesos maintenance window on its machine and the answer given; `null` without one.
    #[serde(default)]
    pub maintenance: Option<Box<maintenance::NodeMaintenance>>,
    /// New at every write through [`Nodes`] (see `revision.rs`). Not saved.
    #[serde(skip)]
    pub revision: Revision,
}

/// Where taking a node's storage out is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Removal {
    /// `decommission`: the gateway moves its SDS's data away; the SDS goes once that is done.
    Draining,
    /// `decommission`: its SDS is gone; its executor stops the node's services and ends.
    Stopping,
    /// `replace`: its SDS is removed at once (its data rebuilt from the other copies); the
    /// node is forgotten once the gateway took the removal.
    Replacing,
}

/// A node's executor replaced by a newer binary: killed, then relaunched on the next offer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replacement {
    /// The digest of the binary the relaunch runs.
    pub to_sha256: Box<str>,
    /// Why the relaunch did not come back `running`; the next node waits while this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<Box<str>>,
}

/// An operator's restart: the launch killed for it, and how far the host's walk from the
/// first phase got. `progress` keeps what the node had reached before (an MDM member stays
/// one, a reboot still meets the budget) while this walk re-verifies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restart {
    /// The task id of the launch killed for the restart: its end is no failure.
    pub killed: Box<str>,
    /// The last phase the restart's executors reported; `None` before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Phase>,
}

impl Node {
    /// Where the node's next executor starts: the restart's walk while one is under way,
    /// else the phase the last executor reached.
    pub fn resume(&self) -> Option<Phase> {
        match &self.restart {
            Some(r) => r.at,
            None => self.progress,
        }
    }

    /// A node first seen now: nothing launched, no devices, no history.
    pub fn new(agent_id: &str, hostname: &str, persona: Persona, now_ms: u64) -> Node {
        Node {
            agent_id: agent_id.into(),
            hostname: hostname.to_owned(),
            persona,
            phase: Phase::Launching,
            task: None,
            layout: NodeLayout::default(),
            devices: Vec::new(),
            attached: Vec::new(),
            storage_ready: false,
            sdc_connected: false,
            ip: None,
            sds_id: None,
            storage_intent: None,
            last_error: None,
            warning: None,
            last_contact_ms: None,
            failures: 0,
            retry_after_ms: None,
            gone_since_ms: None,
            updated_ms: now_ms,
            progress: None,
            rebooting: false,
            // What the health rules say of a node that installs and holds nothing yet: made
            // `unknown`, every new node was changed (copied away from the save's snapshot,
            // and logged) by the first reassessment.
            health: Health::healthy(),
            host: None,
            storage: None,
            generation: 0,
            rollout: None,
            executor_sha256: None,
            replacing: None,
            restart: None,
            devices_missing: DeviceNames::default(),
            device_errors: DeviceNames::default(),
            relaunch_stopped: false,
            removal: None,
            decommissioned: false,
            devices_removed: DeviceNames::default(),
            devices_removing: DeviceNames::default(),
            maintenance: None,
            attached_after_poll: false,
            revision: Revision::fresh(),
        }
    }

    pub fn covered(&self) -> bool {
        self.task.as_ref().is_some_and(TaskRecord::is_active)
    }

    /// Waits for a launch at `now_ms`: launchable, not covered, past its backoff, not out of
    /// relaunches.
    pub fn awaits_launch(&self, now_ms: u64) -> bool {
        self.launchable()
            && !self.covered()
            && !self.relaunch_stopped
            && self.retry_after_ms.is_none_or(|t| t <= now_ms)
    }

    /// Its host is down for the reboot its executor claimed (the launch there unreachable or
    /// over), heard from no later than `since_ms`: it comes back as an agent with a new id,
    /// which the master offers at once to a framework that does not suppress offers.
    pub fn awaits_host(&self, since_ms: u64) -> bool {
        self.rebooting
            && self.last_contact_ms.is_some_and(|t| t >= since_ms)
            && self
                .task
                .as_ref()
                .is_none_or(|t| t.state == TaskState::Unreachable || !t.is_active())
    }

    /// May be launched (again): not decommissioned, nothing being taken out.
    pub fn launchable(&self) -> bool {
        !self.decommissioned && self.removal.is_none()
    }
}

/// The whole model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClusterModel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<String>,
    /// Keyed by agent id.
    #[serde(default)]
    pub nodes: Nodes,
    /// Increases with every launch, so task ids are never reused, across restarts too.
    #[serde(default)]
    pub launch_seq: u64,
    /// Heartbeat interval of the last subscription, to size the stream idle timeout of the
    /// next one before SUBSCRIBED says it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_secs: Option<f64>,
    /// Storage pools' capacity as last read from the gateway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolCapacity>,
    /// The storage cluster's health (MDM cluster, pools, the gateway data's age).
    #[serde(default)]
    pub health: ClusterHealth,
    /// The declared target every node walks toward (stored in the root record).
    #[serde(default)]
    pub target: Target,
    /// An operator paused the plan: no step, reboot, executor replacement or new node starts
    /// until resumed; those under way finish (stored in the root record).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// One storage pool's capacity (`querySelectedStatistics`), in bytes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PoolCapacity {
    pub protection_domain: String,
    pub pool: String,
    pub id: String,
    pub capacity_bytes: u64,
    pub used_bytes: u64,
    pub available_bytes: u64,
    pub spare_bytes: u64,
    /// Used over (capacity - spare), percent.
    pub used_pct: f64,
    /// Above `-health.capacity.warn`.
    pub over_threshold: bool,
    pub read_ms: u64,
    /// Data with one copy missing, still readable (`degradedHealthyCapacityInKb`).
    #[serde(default)]
    pub degraded_healthy_bytes: u64,
    /// Data with one copy missing, the other failed (`degradedFailedCapacityInKb`).
    #[serde(default)]
    pub degraded_failed_bytes: u64,
    /// Data with no copy (`failedCapacityInKb`).
    #[serde(default)]
    pub failed_bytes: u64,
    /// Data on SDSs in maintenance mode (`inMaintenanceCapacityInKb`).
    #[serde(default)]
    pub in_maintenance_bytes: u64,
    /// Waiting to be rebuilt (`pendingFwdRebuildCapacityInKb` + `pendingBckRebuildCapacityInKb`).
    #[serde(default)]
    pub pending_rebuild_bytes: u64,
    /// Waiting to be rebalanced (`pendingRebalanceCapacityInKb`).
    #[serde(default)]
    pub pending_rebalance_bytes: u64,
    /// Being rebuilt or rebalanced now (`movingCapacityInKb`).
    #[serde(default)]
    pub moving_bytes: u64,
    /// The pool's health (degraded or rebuilding data, over `-health.capacity.warn`).
    #[serde(default)]
    pub health: Health,
}

impl ClusterModel {
    /// Each node with a live task (reconciliation and the address announcement ask for them).
    pub fn active_tasks(&self) -> impl Iterator<Item = (&Node, &TaskRecord)> {
        self.nodes
            .values()
            .filter_map(|n| Some((n, n.task.as_ref().filter(|t| t.is_active())?)))
    }

    /// Node counts per phase, in phase order.
    pub fn phase_counts(&self) -> Vec<(Phase, usize)> {
        Phase::ALL
            .iter()
            .map(|p| (*p, self.nodes.values().filter(|n| n.phase == *p).count()))
            .collect()
    }
}

/// What the store holds: the model, the digests of its launches' executor secrets included.
#[derive(Debug, Clone, Default)]
pub struct Persisted {
    pub model: ClusterModel,
    /// The gateway's certificate trusted on first use (not a secret: a public certificate's
    /// digest), kept so that a changed one is noticed across restarts and failovers.
    pub gateway_certificate: Option<crate::tls::Fingerprint>,
}

impl Persisted {
    /// The secret of `executor_id` when it is a node's current launch (a scan: for start-up,
    /// dumps and tests; the REST side keeps its own index).
    pub fn executor_secret(&self, executor_id: &str) -> Option<&Token> {
        self.model.nodes.values().find_map(|n| {
            let t = n.task.as_ref().filter(|t| t.is_executor(executor_id))?;
            t.secret.as_ref()
        })
    }

    /// Every current launch's executor id and secret.
    pub fn executor_secrets(&self) -> impl Iterator<Item = (std::borrow::Cow<'_, str>, &Token)> {
        self.model.nodes.values().filter_map(|n| {
            let t = n.task.as_ref()?;
            Some((t.executor_id(), t.secret.as_ref()?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's record is the scheduler's largest holder of memory, one per agent: 10,000 of
    /// them at 600 bytes were 6 MB of a 32 MB app. What a node seldom has is boxed or shared
    /// (`replacing`, `restart`, the device lists, `sparse.rs`, the executor digest); a
    /// field inline in every node should be a choice, not an accident.
    #[test]
    fn a_node_record_holds_inline_only_what_every_node_has() {
        assert!(
            std::mem::size_of::<Node>() <= 496,
            "a node's record is {} bytes",
            std::mem::size_of::<Node>()
        );
    }

    #[test]
    fn covered_means_an_active_task() {
        let mut n = Node::new("a", "h", Persona::Data, 0);
        assert!(!n.covered());
        n.task = Some(
            TaskRecord::new("t", "e", TaskState::Staging, 0).with_secret(Token::from("s3cr3t")),
        );
        assert!(n.covered());
        // Saved by its Mesos name, as before the state was an enum.
        let json = serde_json::to_string(n.task.as_ref().unwrap()).unwrap();
        assert!(json.contains(r#""state":"TASK_STAGING""#), "{json}");
        assert!(
            !json.contains("s3cr3t") && !json.contains("secret"),
            "{json}"
        );
        let old: TaskRecord = serde_json::from_str(
            r#"{"task_id":"t","executor_id":"e","state":"TASK_RUNNING","launched_at_ms":1}"#,
        )
        .unwrap();
        assert_eq!(old.state, TaskState::Running);
        n.task.as_mut().unwrap().state = TaskState::Lost;
        assert!(!n.covered());
    }

    #[test]
    fn a_launch_derives_its_usual_executor_id_and_keeps_any_other() {
        let usual = TaskRecord::new(
            "storage.host-1.7",
            "storage-executor.host-1.7",
            TaskState::Staging,
            3,
        );
        assert!(usual.executor_id.is_none(), "derived, not stored");
        assert_eq!(usual.executor_id(), "storage-executor.host-1.7");
        assert!(usual.is_executor("storage-executor.host-1.7"));
        assert!(!usual.is_executor("storage-executor.host-1.8"));
        assert!(!usual.is_executor("storage.host-1.7"));
        // Saved and shown with both ids, as always.
        let json = serde_json::to_string(&usual).unwrap();
        assert_eq!(
            json,
            r#"{"task_id":"storage.host-1.7","executor_id":"storage-executor.host-1.7","state":"TASK_STAGING","launched_at_ms":3}"#
        );
        assert_eq!(serde_json::from_str::<TaskRecord>(&json).unwrap(), usual);
        // Any other pair is kept as it is.
        for (task, executor) in [
            ("t-a1", "storage-executor.a1"),
            ("storage.h.1", "other.h.1"),
        ] {
            let mut t = TaskRecord::new(task, executor, TaskState::Running, 1);
            assert_eq!(t.executor_id(), executor);
            assert!(t.is_executor(executor));
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<TaskRecord>(&json).unwrap(), t);
            t.set_executor_id("storage-executor.h.1");
            assert_eq!(t.executor_id(), "storage-executor.h.1");
        }
    }

    #[test]
    fn an_executor_hash_is_the_hash_of_the_executor_id_derived_or_kept() {
        use crate::hash::content_hash;
        for (task, executor) in [
            ("storage.host-1.7", "storage-executor.host-1.7"),
            ("storage.h.1", "other.h.1"),
        ] {
            let t = TaskRecord::new(task, executor, TaskState::Running, 1);
            assert_eq!(
                t.executor_hash(),
                content_hash(executor.as_bytes()),
                "{executor}"
            );
        }
    }

    #[test]
    fn model_json_round_trips() {
        let mut m = ClusterModel {
            framework_id: Some("fw".into()),
            launch_seq: 7,
            ..Default::default()
        };
        m.nodes.insert(
            "a1",
            Node {
                phase: Phase::StorageAttach,
                devices: vec!["/dev/sdb".into()],
                last_error: Some("x".into()),
                last_contact_ms: Some(5),
                failures: 2,
                executor_sha256: Some("ab".repeat(32).into()),
                replacing: Some(Box::new(Replacement {
                    to_sha256: "cd".repeat(32).into(),
                    failed: Some("executor replacement failed: TASK_FAILED".into()),
                })),
                ..Node::new("a1", "h1", Persona::Primary, 9)
            },
        );
        let mut declared = Node::new("a2", "h2", Persona::Data, 9);
        declared
            .layout
            .sds
            .entry("pd1".into())
            .or_default()
            .insert("sp1".into(), vec!["/dev/xvdf".into()]);
        declared.layout.sdc.insert("pd1".into(), vec!["sp1".into()]);
        m.nodes.insert("a2", declared);
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"storage-attach\""));
        // The global pool is shown as an empty layout, a declared one as declared.
        assert!(json.contains(r#""layout":{}"#), "{json}");
        assert!(
            json.contains(
                r#""layout":{"sds":{"pd1":{"sp1":["/dev/xvdf"]}},"sdc":{"pd1":["sp1"]}}"#
            ),
            "{json}"
        );
        assert!(
            json.contains(&format!(
                r#""executor_sha256":"{}","replacing":{{"to_sha256":"{}","failed":"executor replacement failed: TASK_FAILED"}}"#,
                "ab".repeat(32),
                "cd".repeat(32)
            )),
            "{json}"
        );
        let back: ClusterModel = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.nodes["a2"].layout.sds["pd1"]["sp1"], ["/dev/xvdf"]);
        assert!(back.nodes["a1"].layout.is_global());
    }
}
