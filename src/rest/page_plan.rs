//! The status page's plan: a section with what the plan does, its target generation and its
//! steps counted by state, and a row per node with a step that waits or failed, saying why;
//! and the same note in each such node's own row. The reasons come from executors and the
//! gateway: every value is escaped.

use super::page::esc;
use crate::scheduler::model::{ClusterModel, Node, StepState};
use crate::scheduler::rollout::view::{self, NodeSteps};
use std::fmt::Write;

/// Rows of blocked nodes the page shows; `/api/plan` has them all (up to its own bound).
const ROWS_MAX: usize = 50;

pub(super) const STYLE: &str = r#"
#plan{margin:14px 0 0;padding:10px 14px;background:var(--card);border:1px solid var(--line);border-radius:10px}
#plan h2{font-size:15px;margin:0 0 8px;font-weight:600}#plan h2 .sub{margin-left:8px}
#plan .totals{margin-bottom:8px}#plan table{border-radius:6px}#plan code{white-space:nowrap}
.plan-note{font-size:12px;margin-top:4px;overflow-wrap:anywhere;max-width:320px}
.plan-note.waiting,.plan-reason.waiting{color:var(--warn)}.plan-note.failed,.plan-reason.failed{color:var(--bad)}
"#;

fn class(state: StepState) -> &'static str {
    match state {
        StepState::Pending => "idle",
        StepState::InProgress => "busy",
        StepState::Waiting => "warn",
        StepState::Done => "ok",
        StepState::Failed => "bad",
    }
}

/// The plan's section.
pub(super) fn section(out: &mut String, model: &ClusterModel) {
    let plan = view::plan_view(model);
    let below = view::below_target(model);
    let _ = write!(
        out,
        "<section id=\"plan\"><h2>Plan: <span class=\"plan-kind\">{}</span>{}\
         <span class=\"sub\">target generation {}, {below} node{} below it \
         (<a href=\"/api/plan\">/api/plan</a>)</span></h2><div class=\"totals\">",
        esc(plan.kind.as_str()),
        if plan.paused {
            " <span class=\"badge warn plan-paused\" title=\"an operator paused the plan: \
             what is under way finishes, nothing else starts until resumed\">paused</span>"
        } else {
            ""
        },
        plan.generation,
        if below == 1 { "" } else { "s" }
    );
    for state in StepState::ALL {
        let _ = write!(
            out,
            "<span class=\"chip {}\">{} <b>{}</b></span>",
            class(state),
            state.as_str(),
            plan.counts.get(state)
        );
    }
    out.push_str("</div>");
    let blocked: Vec<&NodeSteps> = plan
        .nodes
        .iter()
        .filter(|n| n.steps.iter().any(|s| is_blocked(s.state)))
        .collect();
    if !blocked.is_empty() {
        out.push_str(
            "<table class=\"plan-nodes\"><thead><tr><th>Node</th><th>Generation</th>\
             <th>Step</th><th>State</th><th>Reason</th></tr></thead><tbody>",
        );
        for n in blocked.iter().take(ROWS_MAX) {
            blocked_row(out, n);
        }
        out.push_str("</tbody></table>");
    }
    let more = blocked.len().saturating_sub(ROWS_MAX) + plan.truncated;
    if more > 0 {
        let _ = write!(
            out,
            "<p class=\"sub\">{more} more node{} with steps left: see /api/plan</p>",
            if more == 1 { "" } else { "s" }
        );
    }
    out.push_str("</section>");
}

fn is_blocked(state: StepState) -> bool {
    matches!(state, StepState::Waiting | StepState::Failed)
}

/// A node's row: its first failed or waiting step and why.
fn blocked_row(out: &mut String, n: &NodeSteps) {
    let step = n
        .steps
        .iter()
        .find(|s| s.state == StepState::Failed)
        .or_else(|| n.steps.iter().find(|s| s.state == StepState::Waiting));
    let Some(step) = step else {
        return;
    };
    let state = step.state.as_str();
    let _ = write!(
        out,
        "<tr class=\"plan-{state}\"><td><div class=\"host plan-host\">{}</div><div class=\"sub agent\">{}</div></td>\
         <td>{} → {}</td><td><code>{}</code></td><td><span class=\"badge {}\">{state}</span></td>\
         <td><span class=\"plan-reason {state}\">{}</span></td></tr>",
        esc(&n.hostname),
        esc(&n.agent_id),
        n.generation,
        n.target_generation,
        esc(&step.step),
        class(step.state),
        esc(step.reason.as_deref().unwrap_or("")),
    );
}

/// The note for a node's own row: its walk's failed or waiting step and why (empty when none),
/// `upgrade-sds waiting: sds-2 of pd1 is rebuilding`.
pub(super) fn row_note(n: &Node, target: u64) -> String {
    let Some((step, state, reason)) = view::blocked_step(n, target) else {
        return String::new();
    };
    let state = state.as_str();
    let why = if reason.is_empty() {
        state.to_owned()
    } else if reason.starts_with(state) {
        reason.to_owned()
    } else {
        format!("{state}: {reason}")
    };
    format!(
        "<div class=\"plan-note {state}\">{} {}</div>",
        esc(step),
        esc(&why)
    )
}

/// A Mesos maintenance window on the node's machine (HTML): given up to it, or why not yet.
pub(super) fn maintenance_note(n: &Node) -> String {
    let Some(m) = n.maintenance.as_deref() else {
        return String::new();
    };
    let text = match &m.reason {
        None => "maintenance: accepted, its machine may go".to_string(),
        Some(why) => format!("maintenance declined: {why}"),
    };
    format!("<div class=\"plan-note maintenance\">{}</div>", esc(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{
        NodeRollout, Persona, Phase, PlanKind, Step, StepStatus, Target,
    };

    fn upgrading(i: usize, step: Step, state: StepState, reason: &str) -> Node {
        let mut n = Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 0);
        n.phase = Phase::Running;
        n.generation = 1;
        n.rollout = Some(Box::new(NodeRollout {
            generation: 2,
            steps: vec![StepStatus {
                state,
                reason: Some(reason.into()),
                ..StepStatus::pending(step)
            }],
            granted: None,
        }));
        n
    }

    fn upgrade(nodes: Vec<Node>) -> ClusterModel {
        let mut m = ClusterModel {
            target: Target {
                generation: 2,
                previous: 1,
                change: Some(PlanKind::Upgrade),
                ..Default::default()
            },
            ..Default::default()
        };
        for n in nodes {
            m.nodes.insert(n.agent_id.clone(), n);
        }
        m
    }

    #[test]
    fn a_paused_plan_says_so() {
        let mut m = upgrade(vec![upgrading(1, Step::UpgradeSds, StepState::Waiting, "")]);
        let mut html = String::new();
        section(&mut html, &m);
        assert!(!html.contains("paused"), "{html}");
        m.paused = true;
        html.clear();
        section(&mut html, &m);
        assert!(
            html.contains(
                "<span class=\"plan-kind\">upgrade</span> <span class=\"badge warn plan-paused\""
            ),
            "{html}"
        );
        assert!(html.contains(">paused</span>"), "{html}");
    }

    #[test]
    fn the_section_names_the_plan_counts_and_each_blocked_node_escaped() {
        let m = upgrade(vec![
            upgrading(
                1,
                Step::UpgradeSds,
                StepState::Waiting,
                "waiting: sds-2 of <pd1> is rebuilding",
            ),
            upgrading(2, Step::UpgradeMdm, StepState::Failed, "rpm \"-Uvh\" & 1"),
            upgrading(3, Step::UpgradeLia, StepState::InProgress, ""),
        ]);
        let mut html = String::new();
        section(&mut html, &m);
        assert!(html.starts_with("<section id=\"plan\">"), "{html}");
        assert!(html.ends_with("</section>"), "{html}");
        assert!(
            html.contains("Plan: <span class=\"plan-kind\">upgrade</span>"),
            "{html}"
        );
        assert!(
            html.contains("target generation 2, 3 nodes below it"),
            "{html}"
        );
        for chip in [
            "pending <b>0</b>",
            "in-progress <b>1</b>",
            "waiting <b>1</b>",
            "done <b>0</b>",
            "failed <b>1</b>",
        ] {
            assert!(html.contains(chip), "{chip} in {html}");
        }
        assert!(html.contains(
            "<code>upgrade-sds</code></td><td><span class=\"badge warn\">waiting</span></td>\
             <td><span class=\"plan-reason waiting\">waiting: sds-2 of &lt;pd1&gt; is rebuilding</span>"
        ), "{html}");
        assert!(html.contains("rpm &quot;-Uvh&quot; &amp; 1"), "{html}");
        assert!(!html.contains("<pd1>") && !html.contains("& 1"), "{html}");
        assert_eq!(html.matches("<tr class=\"plan-").count(), 2, "{html}");
        assert!(
            html.find("h2</div>").unwrap() < html.find("h1</div>").unwrap(),
            "failed first: {html}"
        );
        assert_eq!(
            row_note(&m.nodes["a1"], 2),
            "<div class=\"plan-note waiting\">upgrade-sds waiting: sds-2 of &lt;pd1&gt; is rebuilding</div>"
        );
        assert_eq!(
            row_note(&m.nodes["a2"], 2),
            "<div class=\"plan-note failed\">upgrade-mdm failed: rpm &quot;-Uvh&quot; &amp; 1</div>"
        );
        assert_eq!(row_note(&m.nodes["a3"], 2), "");
        assert_eq!(row_note(&m.nodes["a1"], 3), "", "a walk to another target");
    }

    #[test]
    fn an_idle_plan_is_one_line_and_many_blocked_nodes_are_cut() {
        let mut html = String::new();
        section(&mut html, &ClusterModel::default());
        assert!(html.contains("plan-kind\">idle<"), "{html}");
        assert!(!html.contains("<table"), "{html}");
        let nodes = (0..ROWS_MAX + 7)
            .map(|i| upgrading(i, Step::Reboot, StepState::Waiting, "waiting: budget"))
            .collect();
        let mut html = String::new();
        section(&mut html, &upgrade(nodes));
        assert_eq!(html.matches("<tr class=\"plan-waiting\"").count(), ROWS_MAX);
        assert!(
            html.contains("7 more nodes with steps left: see /api/plan"),
            "{html}"
        );
    }
}
