//! The status page's health: a banner with the storage cluster's state, its reasons and what
//! to do about each (absent while the cluster is healthy), and a badge per node row. Every
//! value is escaped.

use super::health::Kind;
use super::page::esc;
use crate::scheduler::model::{ClusterModel, HealthState, Node};
use std::fmt::Write;

/// Green, orange, grey.
pub(super) const STYLE: &str = r#"
.health-badge{display:inline-block;padding:2px 8px;border-radius:6px;font-size:12px;font-weight:600;white-space:nowrap}
.health-healthy{background:#dcfce7;color:#15803d}.health-degraded{background:#ffedd5;color:#c2410c}
.health-unknown{background:#e5e7eb;color:#4b5563}
#health-banner{margin:0 0 14px;padding:10px 14px;border-radius:10px;border:1px solid currentColor}
#health-banner ul{margin:6px 0 0;padding-left:20px}#health-banner .advice{color:var(--fg)}
.health-reasons{color:#c2410c;font-size:12px;overflow-wrap:anywhere;max-width:320px}
"#;

/// The banner, unless the cluster is healthy.
pub(super) fn banner(out: &mut String, model: &ClusterModel) {
    let health = &model.health.health;
    if health.is_healthy() {
        return;
    }
    let state = health.state.as_str();
    let _ = write!(
        out,
        "<div id=\"health-banner\" class=\"health-{state}\"><strong>Storage cluster {state}</strong>"
    );
    let nodes = |s: HealthState| model.nodes.values().filter(|n| n.health.state == s).count();
    let (degraded, unknown) = (nodes(HealthState::Degraded), nodes(HealthState::Unknown));
    if degraded + unknown > 0 {
        let _ = write!(
            out,
            " <span>({degraded} node{} degraded, {unknown} unknown: <a href=\"/api/health\">/api/health</a>)</span>",
            if degraded == 1 { "" } else { "s" }
        );
    }
    out.push_str("<ul>");
    if health.reasons.is_empty() {
        out.push_str("<li>no health data read from the gateway yet</li>");
    }
    for reason in &health.reasons {
        let _ = write!(out, "<li><span class=\"reason\">{}</span>", esc(reason));
        if let Some(advice) = Kind::of(reason).advice() {
            let _ = write!(out, " <span class=\"advice\">— {}</span>", esc(advice));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul></div>");
}

/// The node's health cell: its badge (the reasons on hover), and a degraded node's reasons.
pub(super) fn cell(out: &mut String, n: &Node) {
    let h = &n.health;
    let state = h.state.as_str();
    let reasons = esc(&h.reasons.join("; "));
    let _ = write!(
        out,
        "<td><span class=\"health-badge health-{state}\" title=\"{reasons}\">{state}</span>"
    );
    if h.state == HealthState::Degraded {
        let _ = write!(out, "<div class=\"health-reasons\">{reasons}</div>");
    }
    out.push_str("</td>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{Health, Persona};

    #[test]
    fn the_banner_names_the_state_the_reasons_and_what_to_do() {
        let mut m = ClusterModel::default();
        m.health.health = Health::healthy();
        let mut html = String::new();
        banner(&mut html, &m);
        assert_eq!(html, "", "no banner while healthy");

        m.health.health = Health::degraded(vec![
            "MDM cluster ClusteredDegraded (2 of 3 members up)".into(),
            "pool <pd1>/sp1: 12.0 GiB degraded, rebuilding".into(),
        ]);
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        n.health = Health::degraded(vec!["SDS sds-1 disconnected from the MDM".into()]);
        m.nodes.insert(n.agent_id.clone(), n);
        let mut html = String::new();
        banner(&mut html, &m);
        assert!(
            html.starts_with("<div id=\"health-banner\" class=\"health-degraded\"><strong>Storage cluster degraded</strong>"),
            "{html}"
        );
        assert!(html.contains("(1 node degraded, 0 unknown"), "{html}");
        assert!(html.contains("MDM cluster ClusteredDegraded (2 of 3 members up)</span> <span class=\"advice\">— bring the missing MDM member back"), "{html}");
        assert!(
            html.contains("pool &lt;pd1&gt;/sp1: 12.0 GiB degraded"),
            "{html}"
        );
        assert!(!html.contains("<pd1>"), "{html}");

        m.health.health = Health::default();
        let mut html = String::new();
        banner(&mut html, &m);
        assert!(html.contains("class=\"health-unknown\""), "{html}");
        assert!(
            html.contains("no health data read from the gateway yet"),
            "{html}"
        );
    }

    #[test]
    fn a_node_badge_carries_its_state_and_reasons_escaped() {
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        n.health = Health::degraded(vec![
            "service sds: \"not\" <running>".into(),
            "device /dev/sdb in error (DeviceFailed)".into(),
        ]);
        let mut html = String::new();
        cell(&mut html, &n);
        let reasons =
            "service sds: &quot;not&quot; &lt;running&gt;; device /dev/sdb in error (DeviceFailed)";
        assert!(
            html.contains(&format!(
                "<span class=\"health-badge health-degraded\" title=\"{reasons}\">degraded</span>"
            )),
            "{html}"
        );
        assert!(html.contains(&format!("<div class=\"health-reasons\">{reasons}</div>")));
        n.health = Health::healthy();
        let mut html = String::new();
        cell(&mut html, &n);
        assert_eq!(
            html,
            "<td><span class=\"health-badge health-healthy\" title=\"\">healthy</span></td>"
        );
    }
}
