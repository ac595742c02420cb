//! An executor's reports into its node, no I/O but their log lines (one per change): a
//! phase, with the devices the phase before found; its host's problems; its devices.

use crate::contract::health::HostProblem;
use crate::scheduler::exchange::PhaseReport;
use crate::scheduler::model::{ClusterModel, HostHealth, Node, Phase};
use log::{info, warn};

/// A phase report into its node (the log names changes and new errors only).
pub(super) fn record_phase(node: &mut Node, report: PhaseReport, now_ms: u64) {
    if node.phase != report.phase {
        info!(
            "{}: phase {} -> {}{}",
            node.hostname,
            node.phase,
            report.phase,
            report
                .message
                .as_ref()
                .map(|m| format!(" ({m:?})"))
                .unwrap_or_default()
        );
    }
    if let Some(e) = &report.error {
        if node.last_error.as_deref() != Some(e.as_str()) {
            warn!("{}: {} reported error {e:?}", node.hostname, report.phase);
        }
    }
    // Claimed, the reboot lasts until the host reports a phase after it; the executor
    // relaunched there may first report the same phase again.
    let again = node.rebooting && Some(report.phase) == node.resume() && report.error.is_none();
    if report.rebooting && !node.rebooting {
        info!("{}: rebooting its host ({})", node.hostname, report.phase);
    }
    node.rebooting = report.rebooting || again;
    node.phase = report.phase;
    if !matches!(report.phase, Phase::Failed) {
        crate::scheduler::dispatcher::op_restart::record_progress(node, report.phase);
    }
    node.last_error = report.error.map(Into::into);
    if report.warning.is_some() && node.warning.as_deref() != report.warning.as_deref() {
        warn!(
            "{}: {} reported warning {:?}",
            node.hostname,
            report.phase,
            report.warning.as_deref().unwrap_or_default()
        );
    }
    node.warning = report.warning.map(Into::into);
    node.last_contact_ms = Some(now_ms);
    node.updated_ms = now_ms;
    if crate::scheduler::health::maintenance::back(node) {
        info!("{}: back from Mesos maintenance", node.hostname);
        node.maintenance = None;
    }
}

/// A host report into its node, only when its problems differ from the last report's (an
/// unchanged one writes and saves nothing).
pub(super) fn record_host(
    model: &mut ClusterModel,
    agent: &str,
    problems: Vec<HostProblem>,
    now_ms: u64,
) -> bool {
    let unchanged = |n: &Node| n.host.as_ref().map(|h| &h.problems) == Some(&problems);
    if model.nodes.get(agent).is_none_or(unchanged) {
        return false;
    }
    let Some(node) = model.nodes.get_mut(agent) else {
        return false;
    };
    let before = node.host.as_ref().map_or(0, |h| h.problems.len());
    if !problems.is_empty() {
        let reasons: Vec<String> = problems.iter().map(HostProblem::reason).collect();
        warn!("{}: host: {}", node.hostname, reasons.join("; "));
    } else if before > 0 {
        info!("{}: host: every problem cleared", node.hostname);
    }
    node.host = Some(Box::new(HostHealth {
        problems,
        reported_ms: now_ms,
    }));
    node.last_contact_ms = Some(now_ms);
    // The dispatcher assesses every health again (with the operator's thresholds).
    true
}

/// A device report into its node. A running node's report (its executor read the host again)
/// only adds: a device it no longer lists stays the node's, shown missing by the host checks,
/// until an operator removes it. A new one is attached by the storage work, the node staying
/// `running`.
pub(super) fn record_devices(node: &mut Node, devices: Vec<String>, now_ms: u64) {
    let devices = if node.phase == Phase::Running {
        let mut kept = node.devices.clone();
        let mut new = Vec::new();
        for d in devices {
            if !kept.contains(&d) {
                kept.push(d.clone());
                new.push(d);
            }
        }
        if !new.is_empty() {
            info!(
                "{}: new device(s) on the running node: {}; attaching",
                node.hostname,
                new.join(", ")
            );
        }
        kept
    } else {
        devices
    };
    if node.devices != devices {
        info!(
            "{}: devices {}",
            node.hostname,
            if devices.is_empty() {
                "none".to_owned()
            } else {
                devices.join(", ")
            }
        );
        node.devices = devices;
        node.updated_ms = now_ms;
    }
    node.last_contact_ms = Some(now_ms);
}
