//! The health model (pure): from the gateway's polls and the executors' host reports to a
//! `healthy` / `degraded` / `unknown` per node, per pool and for the cluster, and the gate
//! the lifecycle asks before it disrupts a node ([`gate::may_disrupt`]).
//!
//! The dispatcher owns the model and calls these; nothing here does I/O or reads a clock:
//! `now_ms` is always passed in, so every rule is tested on tables of states.

pub mod assess;
pub mod gate;
pub mod maintenance;
mod node;
mod pool;
pub mod room;

use std::time::Duration;

/// What operators set (`-health.*` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthSettings {
    /// A pool with more than this percent of its capacity in use is `degraded`
    /// (`-health.capacity.warn`).
    pub capacity_warn_pct: f64,
    /// Data older than this is `unknown` (`-health.stale`): the gateway's last answered
    /// poll, a running executor's last contact.
    pub stale: Duration,
}

impl Default for HealthSettings {
    fn default() -> HealthSettings {
        HealthSettings {
            capacity_warn_pct: 80.0,
            stale: Duration::from_secs(180),
        }
    }
}

/// A change of health, for the one log line each (`node h1`, `pool pd1/sp1`, `cluster`).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub subject: String,
    pub from: crate::scheduler::model::Health,
    pub to: crate::scheduler::model::Health,
}

/// How a reason about data the gateway has not given lately begins (the node's, the pool's
/// and the cluster's alike).
pub const GATEWAY_STALE: &str = "no gateway data";
/// How a reason about a running executor not heard from lately begins.
pub const CONTACT_STALE: &str = "no word from the executor";
/// How a reason begins that the next gateway poll settles: a node whose devices were just
/// attached, which the last poll could not list yet. Logged as information: every node of a
/// rollout passes through it.
pub const AWAITING_POLL: &str = "waiting for the gateway's next poll";

/// Whether all `h` waits for is the next gateway poll ([`AWAITING_POLL`]).
pub fn awaits_poll_only(h: &crate::scheduler::model::Health) -> bool {
    h.reasons.iter().all(|r| r.starts_with(AWAITING_POLL))
}

/// The short code of a node's reason, for the `storage_node_unhealthy{reason}` gauge:
/// `sds_disconnected`, `sds_state` (not joined, not `Normal`, in maintenance, not listed),
/// `sdc_disconnected`, `device_error`, `host_service` (a service or the `scini` module),
/// `host_device`, `host_reboot`, `volume_driver`, `stale`, `waiting`; the cluster's `pool_full`,
/// `pool_degraded`, `mdm`; `other` for a text of none of these shapes.
pub fn reason_code(reason: &str) -> &'static str {
    let mut words = reason.split_whitespace();
    let first = words.next().unwrap_or("");
    let second = words.next().unwrap_or("");
    match first {
        "SDS" if reason.contains(" disconnected from the MDM") => "sds_disconnected",
        "SDS" => "sds_state",
        "SDC" => "sdc_disconnected",
        "host" if reason.contains(" not back from its reboot") => "host_reboot",
        "service" | "module" => "host_service",
        // The host's findings read `device /dev/sdb: missing`, the gateway's
        // `device /dev/sdb in error (...)`.
        "device" if second.ends_with(':') => "host_device",
        "device" => "device_error",
        "volume" if second == "driver" => "volume_driver",
        _ if reason.starts_with(GATEWAY_STALE) || reason.starts_with(CONTACT_STALE) => "stale",
        _ if reason.starts_with(AWAITING_POLL) => "waiting",
        "pool" if reason.contains("% used") => "pool_full",
        "pool" => "pool_degraded",
        "MDM" => "mdm",
        _ => "other",
    }
}

/// An amount of data as reasons show it: GiB with one decimal (a small non-zero amount is
/// not shown as nothing).
pub(crate) fn gib(bytes: u64) -> String {
    let g = bytes as f64 / (1u64 << 30) as f64;
    if bytes > 0 && g < 0.05 {
        "under 0.1 GiB".to_string()
    } else {
        format!("{g:.1} GiB")
    }
}

/// A duration as reasons show it (`180s`, `1500ms`).
fn age_text(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Known problems make a thing `degraded` (what is stale is added to its reasons); without
/// any, stale data makes it `unknown`.
fn combine(mut problems: Vec<String>, unknown: Vec<String>) -> crate::scheduler::model::Health {
    use crate::scheduler::model::{Health, HealthState};
    if !problems.is_empty() {
        problems.extend(unknown);
        Health::degraded(problems)
    } else if !unknown.is_empty() {
        Health {
            state: HealthState::Unknown,
            reasons: unknown,
        }
    } else {
        Health::healthy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_reason_has_its_code() {
        for (reason, code) in [
            ("SDS h2 disconnected from the MDM", "sds_disconnected"),
            ("SDS h2 not joined (membership Decoupled)", "sds_state"),
            ("SDS h2 is RemovePending", "sds_state"),
            (
                "SDS h2 in maintenance (SetMaintenanceInProgress)",
                "sds_state",
            ),
            ("SDS of h2 not listed by the gateway", "sds_state"),
            ("SDC on h2 disconnected from the MDM", "sdc_disconnected"),
            ("device /dev/sdb in error (DeviceFailed)", "device_error"),
            ("device /dev/sdb in error state Unknown", "device_error"),
            ("device /dev/sdb: missing", "host_device"),
            ("service sds: not running", "host_service"),
            ("module scini: not loaded", "host_service"),
            ("volume driver rexray: not running", "volume_driver"),
            ("no gateway data in the last 180s", "stale"),
            ("no gateway data yet (last poll failed: refused)", "stale"),
            ("no word from the executor in the last 180s", "stale"),
            ("pool pd1/sp1 is 91% used (warn at 80%)", "pool_full"),
            (
                "pool pd1/sp1: 12.0 GiB degraded, rebuilding",
                "pool_degraded",
            ),
            ("MDM cluster ClusteredDegraded (2 of 3 members up)", "mdm"),
            ("something else", "other"),
            ("", "other"),
        ] {
            assert_eq!(reason_code(reason), code, "{reason}");
        }
    }

    #[test]
    fn amounts_read_in_gib() {
        for (bytes, text) in [
            (0, "0.0 GiB"),
            (1, "under 0.1 GiB"),
            (12 << 30, "12.0 GiB"),
            ((3 << 30) / 2, "1.5 GiB"),
        ] {
            assert_eq!(gib(bytes), text);
        }
        assert_eq!(age_text(Duration::from_secs(180)), "180s");
        assert_eq!(age_text(Duration::from_millis(1500)), "1500ms");
    }
}
