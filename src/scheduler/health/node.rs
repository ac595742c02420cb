//! One node's health from its facts: what the gateway's last poll said of its SDS, devices
//! and SDC, and what its executor last found on the host.
//!
//! What is assessed depends on where the node is, as an operator would read it:
//! - `running`: everything: the gateway's facts, the SDC, the host report, and whether the
//!   executor was heard from lately (else `unknown`).
//! - on its way (an install phase), `failed` or `lost`: only what the gateway lists for it.
//!   A node still installing raises no alarm for services it does not have yet: with no SDS,
//!   no attached device and no storage handshake done it is `healthy`. Once the gateway lists
//!   its SDS or devices, or it has attached devices, those count (a device in error is wrong
//!   whatever the phase); the SDC counts once the handshake was reached.
//! - in a reboot phase the SDS and SDC being off the MDM is the plan, not a problem of the
//!   node (what it means for the data shows in the pools, and the gate counts the node as
//!   disrupted). A host that is not back within [`REBOOT_GRACE_MS`] is a problem: a planned
//!   reboot counts no failed launch, so nothing else would flag a host that never returns.

use super::{combine, AWAITING_POLL};
use crate::contract::health::HostCheck;
use crate::scheduler::model::{DeviceStatus, Health, Node, Phase, SdsStatus};

/// How long a host may take to come back from a reboot its executor asked for: the
/// executor's own deadline for `shutdown -r` (10 minutes) and a boot.
pub const REBOOT_GRACE_MS: u64 = 15 * 60 * 1000;

/// What is common to every node's assessment at one time.
pub(super) struct Context<'a> {
    /// Why the gateway's data cannot be trusted now (stale or never read), if so.
    pub gateway_stale: Option<&'a str>,
    pub stale_ms: u64,
    /// The reason of a running node whose executor was not heard from within `stale_ms`.
    pub contact_stale: &'a str,
    pub now_ms: u64,
}

/// The node's health at `cx.now_ms`; `contact_ms`: when its executor was last heard from.
pub(super) fn node_health(node: &Node, contact_ms: Option<u64>, cx: &Context) -> Health {
    // Out of the storage cluster, or its SDS gone and its services stopping: nothing of it
    // is expected any more.
    if node.decommissioned || node.removal == Some(crate::scheduler::model::Removal::Stopping) {
        return Health::healthy();
    }
    let mut problems = Vec::new();
    let mut unknown = Vec::new();
    if gateway_applies(node) {
        match cx.gateway_stale {
            Some(why) => unknown.push(why.to_string()),
            None => gateway_problems(node, &mut problems, &mut unknown),
        }
    }
    if node.phase == Phase::Running {
        let fresh = contact_ms.is_some_and(|c| cx.now_ms.saturating_sub(c) < cx.stale_ms);
        if fresh {
            let host = node.host.as_deref().map_or(&[][..], |h| &h.problems[..]);
            problems.extend(host.iter().map(|p| p.reason()));
        } else {
            unknown.push(cx.contact_stale.to_string());
        }
    }
    if rebooting(node.phase) {
        let since = contact_ms.unwrap_or(0).max(node.updated_ms);
        if cx.now_ms.saturating_sub(since) >= REBOOT_GRACE_MS {
            // A fixed text: one change, one log line, however long the host stays away.
            problems.push(format!(
                "host {} not back from its reboot ({}) in {} min",
                node.hostname,
                node.phase,
                REBOOT_GRACE_MS / 60_000
            ));
        }
    }
    combine(problems, unknown)
}

/// When the executor was last heard from: a status update or report (`last_contact_ms`), its
/// last host report, or what the caller heard besides (plan polls are not written to nodes).
pub(super) fn contact_ms(node: &Node, heard: Option<u64>) -> Option<u64> {
    let reported = node.host.as_deref().map(|h| h.reported_ms);
    [node.last_contact_ms, reported, heard]
        .into_iter()
        .flatten()
        .max()
}

/// The node's devices by path: those its running executor no longer finds on the host, and
/// those the gateway lists in error. Shown with the node; nothing acts on them here.
pub(super) fn device_trouble(node: &Node) -> (Vec<String>, Vec<String>) {
    let missing = match node.host.as_deref() {
        Some(h) if node.phase == Phase::Running => h
            .problems
            .iter()
            .filter(|p| p.check == HostCheck::Device)
            .map(|p| p.subject.clone())
            .collect(),
        _ => Vec::new(),
    };
    let errors = node
        .storage
        .as_deref()
        .into_iter()
        .flat_map(|s| &s.devices)
        .filter(|d| device_problem(d).is_some())
        .map(|d| d.path.to_string())
        .collect();
    (missing, errors)
}

fn gateway_applies(node: &Node) -> bool {
    node.phase == Phase::Running
        || node.storage_ready
        || node.storage.is_some()
        || !node.attached.is_empty()
}

fn rebooting(phase: Phase) -> bool {
    matches!(phase, Phase::RebootPrerequisites | Phase::RebootFinal)
}

fn gateway_problems(node: &Node, out: &mut Vec<String>, unknown: &mut Vec<String>) {
    let host = &node.hostname;
    let planned = rebooting(node.phase);
    let storage = node.storage.as_deref();
    match storage.and_then(|s| s.sds.as_ref()) {
        Some(sds) => sds_problems(host, sds, planned, out),
        // The poll the listing came from was read before the attach: only the next one can
        // say. (Taken for not listed, every node of a rollout flashed degraded until then.)
        None if !node.attached.is_empty() && node.attached_after_poll => unknown.push(format!(
            "{AWAITING_POLL}: the devices of {host} were attached after the last one"
        )),
        None if !node.attached.is_empty() => {
            out.push(format!("SDS of {host} not listed by the gateway"))
        }
        None => {}
    }
    for d in storage.into_iter().flat_map(|s| &s.devices) {
        out.extend(device_problem(d));
    }
    let sdc_expected = node.phase == Phase::Running || node.storage_ready;
    if sdc_expected && !planned && !node.sdc_connected {
        out.push(format!("SDC on {host} disconnected from the MDM"));
    }
}

/// A state the gateway gave that is not the healthy one (an absent state: not said).
fn not<'a>(
    state: &'a Option<crate::scheduler::model::interned::Word>,
    healthy: &str,
) -> Option<&'a str> {
    state.as_deref().filter(|s| *s != healthy)
}

fn sds_problems(host: &str, sds: &SdsStatus, planned: bool, out: &mut Vec<String>) {
    if let Some(c) = not(&sds.mdm_connection, "Connected").filter(|_| !planned) {
        out.push(if c == "Disconnected" {
            format!("SDS {host} disconnected from the MDM")
        } else {
            format!("SDS {host} disconnected from the MDM ({c})")
        });
    }
    if let Some(m) = not(&sds.membership, "Joined") {
        out.push(format!("SDS {host} not joined (membership {m})"));
    }
    if let Some(s) = not(&sds.state, "Normal") {
        out.push(format!("SDS {host} is {s}"));
    }
    if let Some(m) = not(&sds.maintenance, "NoMaintenance") {
        out.push(format!("SDS {host} in maintenance ({m})"));
    }
}

fn device_problem(d: &DeviceStatus) -> Option<String> {
    let error = not(&d.error, "None");
    match (d.state.as_deref(), error) {
        (Some("Error"), Some(e)) => Some(format!("device {} in error ({e})", d.path)),
        (Some("Error"), None) => Some(format!("device {} in error", d.path)),
        (_, Some(e)) => Some(format!("device {} in error state {e}", d.path)),
        (_, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::health::{HostCheck, HostProblem};
    use crate::scheduler::model::{HealthState, HostHealth, NodeStorage, Persona};
    use std::sync::Arc;

    const NOW: u64 = 10_000_000;
    const STALE: u64 = 180_000;

    fn cx(gateway_stale: Option<&str>) -> Context<'_> {
        Context {
            gateway_stale,
            stale_ms: STALE,
            contact_stale: "no word from the executor in the last 180s",
            now_ms: NOW,
        }
    }

    fn sds(conn: &str, membership: &str, state: &str, maintenance: Option<&str>) -> SdsStatus {
        SdsStatus {
            id: "s2".into(),
            protection_domain_id: Some("pd-id".into()),
            mdm_connection: Some(conn.into()),
            membership: Some(membership.into()),
            state: Some(state.into()),
            maintenance: maintenance.map(Into::into),
        }
    }

    fn good_sds() -> SdsStatus {
        sds("Connected", "Joined", "Normal", Some("NoMaintenance"))
    }

    fn device(state: &str, error: Option<&str>) -> DeviceStatus {
        DeviceStatus {
            path: "/dev/sdb".into(),
            storage_pool_id: Some("p1".into()),
            state: Some(state.into()),
            error: error.map(Into::into),
        }
    }

    /// A running node as the gateway and its host see it when all is well.
    fn running() -> Node {
        Node {
            phase: Phase::Running,
            storage_ready: true,
            sdc_connected: true,
            attached: vec!["/dev/sdb".into()],
            last_contact_ms: Some(NOW - 1000),
            storage: Some(Arc::new(NodeStorage {
                sds: Some(good_sds()),
                devices: vec![device("Normal", Some("None"))],
            })),
            ..Node::new("a2", "h2", Persona::Data, 0)
        }
    }

    fn with_sds(s: SdsStatus) -> Node {
        let mut n = running();
        Arc::make_mut(n.storage.as_mut().unwrap()).sds = Some(s);
        n
    }

    fn with_device(d: DeviceStatus) -> Node {
        let mut n = running();
        Arc::make_mut(n.storage.as_mut().unwrap()).devices = vec![d];
        n
    }

    fn with_host(problems: Vec<HostProblem>, reported_ms: u64) -> Node {
        let mut n = running();
        n.host = Some(Box::new(HostHealth {
            problems,
            reported_ms,
        }));
        n
    }

    #[test]
    fn missing_and_failed_devices_are_listed_by_path() {
        assert_eq!(device_trouble(&running()), (vec![], vec![]));
        let mut n = with_host(
            vec![
                HostProblem::new(HostCheck::Device, "/dev/sdd", "missing"),
                HostProblem::new(HostCheck::Service, "sds", "not running"),
            ],
            NOW,
        );
        Arc::make_mut(n.storage.as_mut().unwrap())
            .devices
            .push(DeviceStatus {
                path: "/dev/sdd".into(),
                ..device("Error", Some("DeviceFailed"))
            });
        let paths = |l: &[&str]| l.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            device_trouble(&n),
            (paths(&["/dev/sdd"]), paths(&["/dev/sdd"]))
        );
        // A host report counts only from a running executor; the gateway's word always.
        n.phase = Phase::Launching;
        assert_eq!(device_trouble(&n), (vec![], paths(&["/dev/sdd"])));
    }

    fn phase(mut n: Node, p: Phase) -> Node {
        n.phase = p;
        n
    }

    #[test]
    fn a_host_not_back_from_its_reboot_in_time_is_degraded() {
        for (phase, away, expected) in [
            (Phase::RebootFinal, REBOOT_GRACE_MS - 1, None),
            (
                Phase::RebootFinal,
                REBOOT_GRACE_MS,
                Some("host h2 not back from its reboot (reboot-final) in 15 min"),
            ),
            (
                Phase::RebootPrerequisites,
                REBOOT_GRACE_MS * 10,
                Some("host h2 not back from its reboot (reboot-prerequisites) in 15 min"),
            ),
            // Not a reboot phase: the grace does not apply.
            (Phase::Packages, REBOOT_GRACE_MS * 10, None),
        ] {
            let mut n = phase_at(running(), phase);
            n.last_contact_ms = Some(NOW - away);
            n.updated_ms = NOW - away;
            let (state, reasons) = health(&n, None);
            match expected {
                None => assert_eq!(state, HealthState::Healthy, "{phase} {away}: {reasons:?}"),
                Some(text) => {
                    assert_eq!(state, HealthState::Degraded, "{phase} {away}");
                    assert_eq!(reasons, [text], "{phase} {away}");
                    assert_eq!(crate::scheduler::health::reason_code(text), "host_reboot");
                }
            }
        }
    }

    fn phase_at(mut n: Node, p: Phase) -> Node {
        n.phase = p;
        n
    }

    fn health(n: &Node, gateway_stale: Option<&str>) -> (HealthState, Vec<String>) {
        let h = node_health(n, contact_ms(n, None), &cx(gateway_stale));
        (h.state, h.reasons)
    }

    #[test]
    fn each_gateway_fact_of_a_running_node_has_its_reason() {
        use HealthState::Degraded;
        let cases: Vec<(&str, Node, &str)> = vec![
            (
                "disconnected",
                with_sds(sds("Disconnected", "Joined", "Normal", None)),
                "SDS h2 disconnected from the MDM",
            ),
            (
                "other connection state",
                with_sds(sds("Connecting", "Joined", "Normal", None)),
                "SDS h2 disconnected from the MDM (Connecting)",
            ),
            (
                "not joined",
                with_sds(sds("Connected", "Decoupled", "Normal", None)),
                "SDS h2 not joined (membership Decoupled)",
            ),
            (
                "being removed",
                with_sds(sds("Connected", "Joined", "RemovePending", None)),
                "SDS h2 is RemovePending",
            ),
            (
                "maintenance",
                with_sds(sds("Connected", "Joined", "Normal", Some("InMaintenance"))),
                "SDS h2 in maintenance (InMaintenance)",
            ),
            (
                "device failed",
                with_device(device("Error", Some("DeviceFailed"))),
                "device /dev/sdb in error (DeviceFailed)",
            ),
            (
                "device in error without an error state",
                with_device(device("Error", Some("None"))),
                "device /dev/sdb in error",
            ),
            (
                "device error state only",
                with_device(device("Normal", Some("Unknown"))),
                "device /dev/sdb in error state Unknown",
            ),
            (
                "SDC",
                Node {
                    sdc_connected: false,
                    ..running()
                },
                "SDC on h2 disconnected from the MDM",
            ),
            (
                "SDS gone from the gateway",
                Node {
                    storage: None,
                    ..running()
                },
                "SDS of h2 not listed by the gateway",
            ),
        ];
        for (name, node, reason) in cases {
            assert_eq!(
                health(&node, None),
                (Degraded, vec![reason.to_string()]),
                "{name}"
            );
        }
    }

    #[test]
    fn a_running_node_with_all_well_is_healthy_and_absent_states_are_not_problems() {
        assert_eq!(health(&running(), None), (HealthState::Healthy, vec![]));
        let mut n = with_sds(SdsStatus {
            id: "s2".into(),
            ..SdsStatus::default()
        });
        Arc::make_mut(n.storage.as_mut().unwrap()).devices = vec![DeviceStatus {
            path: "/dev/sdb".into(),
            ..DeviceStatus::default()
        }];
        assert_eq!(health(&n, None), (HealthState::Healthy, vec![]));
        // A node without devices of its own (an SDC only) has no SDS to miss.
        let sdc_only = Node {
            attached: vec![],
            storage: None,
            ..running()
        };
        assert_eq!(health(&sdc_only, None), (HealthState::Healthy, vec![]));
    }

    #[test]
    fn host_problems_count_on_a_running_node_heard_from() {
        let n = with_host(
            vec![
                HostProblem::new(HostCheck::Service, "sds", "not running"),
                HostProblem::new(HostCheck::VolumeDriver, "rexray", "not running"),
            ],
            NOW - 5000,
        );
        assert_eq!(
            health(&n, None),
            (
                HealthState::Degraded,
                vec![
                    "service sds: not running".to_string(),
                    "volume driver rexray: not running".to_string()
                ]
            )
        );
        // Gateway facts first, then the host's.
        let mut both = n.clone();
        both.sdc_connected = false;
        assert_eq!(
            health(&both, None).1[0],
            "SDC on h2 disconnected from the MDM"
        );
        // An empty report is a healthy host.
        assert_eq!(
            health(&with_host(vec![], NOW), None).0,
            HealthState::Healthy
        );
    }

    #[test]
    fn an_executor_not_heard_from_within_stale_is_unknown_at_the_boundary() {
        let stale = "no word from the executor in the last 180s".to_string();
        for (last, state) in [
            (NOW - STALE + 1, HealthState::Healthy),
            (NOW - STALE, HealthState::Unknown),
            (NOW - 10 * STALE, HealthState::Unknown),
        ] {
            let n = Node {
                last_contact_ms: Some(last),
                ..running()
            };
            assert_eq!(health(&n, None).0, state, "last contact {last}");
        }
        let never = Node {
            last_contact_ms: None,
            ..running()
        };
        assert_eq!(
            health(&never, None),
            (HealthState::Unknown, vec![stale.clone()])
        );
        // A host report is contact too, and so is what the caller heard.
        let old = Node {
            last_contact_ms: Some(1),
            ..with_host(vec![], NOW - 10)
        };
        assert_eq!(health(&old, None).0, HealthState::Healthy);
        let heard = node_health(&never, contact_ms(&never, Some(NOW)), &cx(None));
        assert!(heard.is_healthy());
        // Stale host problems are not claimed: unknown, with gateway problems still shown.
        let mut silent = with_host(
            vec![HostProblem::new(HostCheck::Service, "sds", "not running")],
            NOW - STALE,
        );
        silent.last_contact_ms = None;
        assert_eq!(
            health(&silent, None),
            (HealthState::Unknown, vec![stale.clone()])
        );
        silent.sdc_connected = false;
        assert_eq!(
            health(&silent, None),
            (
                HealthState::Degraded,
                vec!["SDC on h2 disconnected from the MDM".to_string(), stale]
            )
        );
    }

    #[test]
    fn stale_gateway_data_makes_the_gateway_part_unknown() {
        let why = "no gateway data in the last 180s (last poll failed: refused)";
        let n = with_sds(sds("Disconnected", "Joined", "Normal", None));
        assert_eq!(
            health(&n, Some(why)),
            (HealthState::Unknown, vec![why.to_string()])
        );
        // The host's fresh findings still count.
        let h = with_host(
            vec![HostProblem::new(HostCheck::Module, "scini", "not loaded")],
            NOW,
        );
        assert_eq!(
            health(&h, Some(why)),
            (
                HealthState::Degraded,
                vec!["module scini: not loaded".to_string(), why.to_string()]
            )
        );
        // A node with nothing in the storage cluster yet does not wait for the gateway.
        let fresh = Node::new("a9", "h9", Persona::Data, 0);
        assert_eq!(health(&fresh, Some(why)), (HealthState::Healthy, vec![]));
    }

    #[test]
    fn a_node_on_its_way_raises_no_alarm_for_what_it_does_not_have_yet() {
        let bare = Node::new("a3", "h3", Persona::Primary, NOW);
        for p in Phase::INSTALL.iter().filter(|p| **p != Phase::Running) {
            assert_eq!(
                health(&phase(bare.clone(), *p), None),
                (HealthState::Healthy, vec![]),
                "{p}"
            );
        }
        // Its SDS is listed but the handshake is not done: no SDC expected, no host check.
        let attaching = Node {
            phase: Phase::StorageAttach,
            storage_ready: false,
            sdc_connected: false,
            last_contact_ms: None,
            ..running()
        };
        assert_eq!(health(&attaching, None), (HealthState::Healthy, vec![]));
        // A device in error is a problem in any phase.
        let broken = phase(
            with_device(device("Error", Some("DeviceFailed"))),
            Phase::VolumeDriver,
        );
        assert_eq!(
            health(&broken, None).1,
            ["device /dev/sdb in error (DeviceFailed)"]
        );
    }

    #[test]
    fn a_planned_reboot_is_not_a_disconnection_but_other_facts_count() {
        for p in [Phase::RebootPrerequisites, Phase::RebootFinal] {
            let mut n = phase(with_sds(sds("Disconnected", "Joined", "Normal", None)), p);
            n.sdc_connected = false;
            assert_eq!(health(&n, None), (HealthState::Healthy, vec![]), "{p}");
            Arc::make_mut(n.storage.as_mut().unwrap()).devices = vec![device("Error", None)];
            assert_eq!(health(&n, None).1, ["device /dev/sdb in error"], "{p}");
        }
    }

    #[test]
    fn a_lost_or_failed_node_shows_what_the_gateway_says_but_no_host_check() {
        for p in [Phase::Lost, Phase::Failed] {
            let mut n = phase(with_sds(sds("Disconnected", "Joined", "Normal", None)), p);
            n.sdc_connected = false;
            n.last_contact_ms = None;
            assert_eq!(
                health(&n, None),
                (
                    HealthState::Degraded,
                    vec![
                        "SDS h2 disconnected from the MDM".to_string(),
                        "SDC on h2 disconnected from the MDM".to_string()
                    ]
                ),
                "{p}"
            );
        }
    }
}
