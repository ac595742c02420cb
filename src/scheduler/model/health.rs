//! The health part of the model: what the gateway's last poll and the executor's last host
//! report said, and the health the dispatcher derived from them (`scheduler/health/`). Data
//! only; the rules live in `scheduler/health/`.
//!
//! A node's facts change only when the gateway's or the host's answer changes, never with
//! the time of a poll (that is kept once, in [`ClusterHealth::read_ms`]): an unchanged poll
//! copies no node and saves nothing.

use super::interned::Word;
use crate::contract::health::HostProblem;
use serde::{Deserialize, Serialize};

/// `healthy`, `degraded` (with reasons) or `unknown` (the data is stale or not read yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    Healthy,
    Degraded,
    #[default]
    Unknown,
}

impl HealthState {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "healthy",
            HealthState::Degraded => "degraded",
            HealthState::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for HealthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A health and why (empty reasons only when `healthy`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Health {
    pub state: HealthState,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::exact::vec"
    )]
    pub reasons: Vec<String>,
}

impl Health {
    pub fn healthy() -> Health {
        Health {
            state: HealthState::Healthy,
            reasons: Vec::new(),
        }
    }

    pub fn degraded(reasons: Vec<String>) -> Health {
        Health {
            state: HealthState::Degraded,
            reasons,
        }
    }

    pub fn unknown(reason: impl Into<String>) -> Health {
        Health {
            state: HealthState::Unknown,
            reasons: vec![reason.into()],
        }
    }

    pub fn is_healthy(&self) -> bool {
        self.state == HealthState::Healthy
    }
}

/// The executor's last host report on a running node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostHealth {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::exact::vec"
    )]
    pub problems: Vec<HostProblem>,
    /// When the report came (ms since the epoch).
    pub reported_ms: u64,
}

/// What the gateway's last poll said of one node: its SDS and its devices (the SDC's
/// connection is the node's `sdc_connected`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeStorage {
    /// `None`: the gateway lists no SDS for this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sds: Option<SdsStatus>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::exact::vec"
    )]
    pub devices: Vec<DeviceStatus>,
}

/// An SDS's states as the gateway names them (absent fields: the gateway did not say). The
/// texts every node shares are interned (`interned.rs`); the SDS's own id is not.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SdsStatus {
    /// Shared with the poll's maps (`gateway_work/poll.rs`), and from one poll to the next.
    pub id: std::sync::Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection_domain_id: Option<Word>,
    /// `mdmConnectionState`: `Connected` / `Disconnected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdm_connection: Option<Word>,
    /// `membershipState`: `Joined`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership: Option<Word>,
    /// `sdsState`: `Normal`, `RemovePending`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Word>,
    /// `maintenanceState`, only on systems that have SDS maintenance mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<Word>,
}

/// A device's states as the gateway names them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceStatus {
    pub path: Word,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_pool_id: Option<Word>,
    /// `deviceState`: `Normal`, `RemovePending`, `Error`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Word>,
    /// `errorState`: `None`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Word>,
}

/// The MDM cluster as the gateway's last poll showed it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MdmStatus {
    /// `ClusteredNormal`, `ClusteredDegraded`, `NotClustered`; `None`: not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_nodes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MdmMemberStatus>,
}

/// One member of the MDM cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MdmMemberStatus {
    /// `primary`, `secondary` or `tie-breaker`.
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// `Normal`, `Disconnected`, ... (absent on the primary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// The storage cluster's health: the MDM cluster's and the pools' (each pool's own is in its
/// [`super::PoolCapacity`]), and how fresh the gateway's data is.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClusterHealth {
    #[serde(flatten)]
    pub health: Health,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdm: Option<MdmStatus>,
    /// The last poll the gateway answered (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ms: Option<u64>,
    /// Why the last poll failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_error: Option<String>,
}
