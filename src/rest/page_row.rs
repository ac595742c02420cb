//! One node's row of the status page: its host, persona, phase with what it waits for, health,
//! devices, last contact, task and last error. Every value escaped.

use super::page::{ago, esc, phase_class, utc, STALE_MS};
use crate::scheduler::model::{Node, Phase};
use std::fmt::Write;

pub(super) fn row(out: &mut String, n: &Node, target: u64, now_ms: u64) {
    let _ = write!(
        out,
        "<tr{}><td><div class=\"host\">{}</div><div class=\"sub agent\">{}</div></td>",
        if n.last_error.is_some() {
            " class=\"err\""
        } else {
            ""
        },
        esc(&n.hostname),
        esc(&n.agent_id)
    );
    let _ = write!(
        out,
        "<td><span class=\"badge persona{}\">{}</span></td>",
        if n.persona.is_mdm() { " mdm" } else { "" },
        esc(n.persona.as_str())
    );
    let note = match removal_note(n) {
        Some(note) => note.to_string(),
        None => super::page_plan::row_note(n, target),
    } + &super::page_plan::maintenance_note(n);
    phase_cells(out, n.phase, &note);
    super::page_health::cell(out, n);
    devices_cell(out, n);
    contact_cell(out, n.last_contact_ms, now_ms);
    task_cell(out, n, now_ms);
    match (&n.last_error, &n.warning) {
        (Some(e), _) => {
            let _ = write!(out, "<td><div class=\"error\">{}</div></td>", esc(e));
        }
        (None, Some(w)) => {
            let _ = write!(out, "<td><div class=\"warning\">{}</div></td>", esc(w));
        }
        (None, None) => out.push_str("<td><span class=\"none\">—</span></td>"),
    }
    out.push_str("</tr>");
}

/// Where taking the node's storage out is, in place of its plan note.
fn removal_note(n: &Node) -> Option<&'static str> {
    use crate::scheduler::model::Removal;
    Some(match (n.decommissioned, n.removal) {
        (true, _) => {
            "<div class=\"plan-note\">decommissioned: never launched until recommissioned</div>"
        }
        (_, Some(Removal::Draining)) => {
            "<div class=\"plan-note\">decommissioning: its SDS's data moves away</div>"
        }
        (_, Some(Removal::Stopping)) => {
            "<div class=\"plan-note\">decommissioning: its services stop</div>"
        }
        (_, Some(Removal::Replacing)) => {
            "<div class=\"plan-note\">replaced: its SDS is being removed</div>"
        }
        (false, None) => return None,
    })
}

/// The phase badge and the progress along the install path, with `note` (HTML) under it.
fn phase_cells(out: &mut String, phase: Phase, note: &str) {
    let class = phase_class(phase);
    let _ = write!(
        out,
        "<td><span class=\"badge {class}\">{}</span></td>",
        esc(phase.as_str())
    );
    let (pct, label) = match Phase::INSTALL.iter().position(|p| *p == phase) {
        Some(i) => (
            (i + 1) * 100 / Phase::INSTALL.len(),
            format!("step {} of {}", i + 1, Phase::INSTALL.len()),
        ),
        None if phase == Phase::Failed => (100, "stopped: failed".into()),
        None => (100, "stopped: lost".into()),
    };
    let _ = write!(
        out,
        "<td class=\"{class}\"><div class=\"step\">{}</div><div class=\"bar\"><i style=\"width:{pct}%\"></i></div>{note}</td>",
        esc(&label)
    );
}

/// Reported devices, the attached ones marked, those missing from the host or in error at
/// the gateway flagged with why; attached ones no longer reported too.
pub(super) fn devices_cell(out: &mut String, n: &Node) {
    const ATTACHED: &str = " class=\"att\" title=\"attached to the storage cluster\"";
    const MISSING: &str = " class=\"dev-bad\" title=\"missing from the host\"";
    const ERROR: &str = " class=\"dev-bad\" title=\"in error at the gateway\"";
    out.push_str("<td>");
    if n.devices.is_empty() && n.attached.is_empty() {
        out.push_str("<span class=\"none\">none reported</span>");
    }
    for d in &n.devices {
        let (class, mark) = if n.devices_missing.contains(d) {
            (MISSING, " missing")
        } else if n.device_errors.contains(d) {
            (ERROR, " in error")
        } else if n.attached.contains(d) {
            (ATTACHED, " ✓")
        } else {
            ("", "")
        };
        let _ = write!(out, "<code{class}>{}{mark}</code>", esc(d));
    }
    for d in n.attached.iter().filter(|d| !n.devices.contains(d)) {
        let _ = write!(out, "<code{ATTACHED}>{} ✓</code>", esc(d));
    }
    out.push_str("</td>");
}

fn contact_cell(out: &mut String, last: Option<u64>, now_ms: u64) {
    match last {
        Some(t) => {
            let _ = write!(
                out,
                "<td class=\"when{}\" title=\"{}\">{}</td>",
                if now_ms.saturating_sub(t) > STALE_MS {
                    " stale"
                } else {
                    ""
                },
                esc(&utc(t)),
                esc(&ago(now_ms, t))
            );
        }
        None => out.push_str("<td><span class=\"none\">never</span></td>"),
    }
}

/// The task's state, failed launches and the next relaunch.
pub(super) fn task_cell(out: &mut String, n: &Node, now_ms: u64) {
    out.push_str("<td>");
    match &n.task {
        Some(t) => {
            let name = t.state.as_str();
            let state = name.strip_prefix("TASK_").unwrap_or(name).to_lowercase();
            // The task id is long and rarely needed: on hover, and in /api/state.
            let _ = write!(
                out,
                "<div title=\"task {}\">{}</div>",
                esc(&t.task_id),
                esc(&state)
            );
        }
        None => out.push_str("<span class=\"none\">none</span>"),
    }
    if n.failures > 0 {
        let _ = write!(
            out,
            "<div class=\"sub\">{} failed launch{}</div>",
            n.failures,
            if n.failures == 1 { "" } else { "es" }
        );
    }
    if let Some(t) = n.retry_after_ms.filter(|t| *t > now_ms) {
        let _ = write!(
            out,
            "<div class=\"sub\">relaunch in {} s</div>",
            (t - now_ms).div_ceil(1000)
        );
    }
    if n.relaunch_stopped {
        out.push_str("<div class=\"sub relaunch-stopped\">not relaunched until retried</div>");
    }
    out.push_str("</td>");
}
