//! What the gateway worker tells the dispatcher. A leaf: the worker hands these to a sink it
//! is given, and the dispatcher's input type wraps them, so neither side imports the other.

use crate::scheduler::model::PoolCapacity;
use crate::tls::Fingerprint;

/// What the worker tells the dispatcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Node(NodeReport),
    Capacity(Vec<PoolCapacity>),
    /// The gateway's certificate was trusted on first use: to be kept in the state store
    /// (with the state, not in the model).
    Certificate {
        fingerprint: Fingerprint,
        address: String,
    },
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
