//! What the gateway worker tells the dispatcher, and what the view shows of its queue. A
//! leaf: the worker hands its reports to a sink it is given, and the dispatcher's input type
//! and the view wrap these types, so no side imports another.

use super::poll::Listed;
use crate::gateway::types::MdmCluster;
use crate::scheduler::model::PoolCapacity;
use crate::tls::Fingerprint;

/// How the attach work stands, for the operator (`/api/state`, the status page): a node
/// whose disks are due waits in the model while the worker holds its bounded queue
/// (`MAX_UNREPORTED`), and without this it showed no storage state and no reason for minutes
/// of a large rollout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AttachQueue {
    /// Nodes whose attach jobs the worker holds and has not reported on.
    pub with_worker: usize,
    /// Nodes whose disks are due that wait for a place in its queue: all but those the worker
    /// retries (it reported an error for them), which are with it.
    pub waiting: usize,
}

impl AttachQueue {
    pub fn is_idle(&self) -> bool {
        *self == AttachQueue::default()
    }
}

/// What the worker tells the dispatcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Node(NodeReport),
    /// One health poll's answers (`scheduler/health/` maps them onto the model).
    Health(Box<HealthPoll>),
    /// A health poll the gateway did not answer: why, and when (clock ms).
    HealthFailed {
        error: String,
        at_ms: u64,
    },
    /// The gateway's certificate was trusted on first use: to be kept in the state store
    /// (with the state, not in the model).
    Certificate {
        fingerprint: Fingerprint,
        address: String,
    },
    /// A removal the gateway finished (no longer lists the object) or refused.
    Removed(RemovalReport),
}

/// The end of an SDS's or a device's removal.
#[derive(Debug, Clone, PartialEq)]
pub struct RemovalReport {
    pub agent_id: String,
    /// `None`: the node's SDS.
    pub device: Option<String>,
    /// `Err`: the gateway's refusal.
    pub outcome: Result<(), String>,
}

/// The outcome of a node's work.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    pub agent_id: String,
    pub sds_id: Option<String>,
    /// Wanted devices present on the node's SDS.
    pub attached: Vec<String>,
    pub sdc_connected: bool,
    /// Why the node is not ready yet (the gateway's reason), `None` when it is.
    pub error: Option<String>,
}

/// What one health poll read: every SDS, device and SDC the gateway lists (kept as the model
/// keeps them, `poll.rs`), every pool the framework uses with its capacity and health figures
/// (one `querySelectedStatistics`), and the MDM cluster. A fixed handful of requests,
/// whatever the number of nodes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HealthPoll {
    /// When the answers were read (clock ms).
    pub read_ms: u64,
    pub listed: Listed,
    pub pools: Vec<PoolCapacity>,
    /// `None`: the gateway listed no system.
    pub mdm: Option<MdmCluster>,
    /// Requests the poll took (the bench's `gateway_requests_per_health_poll_1000`).
    pub requests: u32,
}
