//! `/metrics` in the Prometheus text exposition format (version 0.0.4).

use super::http::HttpStats;
use crate::scheduler::exchange::View;
use crate::scheduler::metrics::{Metrics, CALL_NAMES, EVENT_NAMES};
use crate::scheduler::model::Phase;
use std::fmt::Write;
use std::sync::atomic::AtomicU64;

pub struct Sources<'a> {
    pub metrics: &'a Metrics,
    /// `None` when the dispatcher did not answer: the model gauges are left out.
    pub view: Option<&'a View>,
    pub http: &'a HttpStats,
    pub long_polls: usize,
    pub now_ms: u64,
}

const P: &str = "storage_scheduler_";

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {P}{name} {help}");
    let _ = writeln!(out, "# TYPE {P}{name} {kind}");
}

fn get(c: &AtomicU64) -> u64 {
    Metrics::get(c)
}

/// Label values may hold any text; these three characters must be escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub fn render(s: &Sources) -> String {
    let m = s.metrics;
    let mut out = String::with_capacity(4096);

    family(
        &mut out,
        "info",
        "gauge",
        "Build of this scheduler (always 1).",
    );
    let _ = writeln!(
        out,
        "{P}info{{version=\"{}\"}} 1",
        label(env!("CARGO_PKG_VERSION"))
    );

    family(
        &mut out,
        "events_total",
        "counter",
        "Scheduler events received from the master, by event type.",
    );
    for (i, name) in EVENT_NAMES.iter().enumerate() {
        let _ = writeln!(
            out,
            "{P}events_total{{type=\"{}\"}} {}",
            label(name),
            get(&m.events[i])
        );
    }

    family(
        &mut out,
        "calls_total",
        "counter",
        "Calls sent to the master, by call type and result (ok: accepted by the master).",
    );
    for (i, name) in CALL_NAMES.iter().enumerate() {
        for (result, c) in [("ok", &m.calls_ok[i]), ("failed", &m.calls_failed[i])] {
            let _ = writeln!(
                out,
                "{P}calls_total{{type=\"{}\",result=\"{result}\"}} {}",
                label(name),
                get(c)
            );
        }
    }

    for (name, help, c) in [
        (
            "offers_accepted_total",
            "Offers accepted to launch a storage executor.",
            &m.offers_accepted,
        ),
        (
            "offers_declined_total",
            "Offers declined.",
            &m.offers_declined,
        ),
        (
            "reconnects_total",
            "Subscriptions to the master after the first one.",
            &m.reconnects,
        ),
        (
            "gateway_calls_total",
            "Requests made to the storage gateway.",
            &m.gateway.calls,
        ),
        (
            "gateway_errors_total",
            "Requests to the storage gateway that failed.",
            &m.gateway.errors,
        ),
    ] {
        family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{P}{name} {}", get(c));
    }

    let last = get(&m.last_event_ms);
    if last > 0 {
        family(
            &mut out,
            "last_event_age_seconds",
            "gauge",
            "Seconds since the last event from the master (absent before the first one).",
        );
        let _ = writeln!(
            out,
            "{P}last_event_age_seconds {:.3}",
            s.now_ms.saturating_sub(last) as f64 / 1000.0
        );
    }

    if let Some(v) = s.view {
        family(
            &mut out,
            "subscribed",
            "gauge",
            "1 while subscribed to the master, else 0.",
        );
        let _ = writeln!(out, "{P}subscribed {}", u8::from(v.subscribed));
        family(
            &mut out,
            "offers_suppressed",
            "gauge",
            "1 while offers are suppressed (every agent has its executor), else 0.",
        );
        let _ = writeln!(out, "{P}offers_suppressed {}", u8::from(v.suppressed));
        family(&mut out, "nodes", "gauge", "Nodes by phase.");
        for (phase, n) in v.model.phase_counts() {
            let _ = writeln!(out, "{P}nodes{{phase=\"{}\"}} {n}", label(phase.as_str()));
        }
        family(
            &mut out,
            "nodes_with_error",
            "gauge",
            "Nodes whose last report or status carried an error.",
        );
        let errors = v
            .model
            .nodes
            .values()
            .filter(|n| n.last_error.is_some())
            .count();
        let _ = writeln!(out, "{P}nodes_with_error {errors}");
        family(
            &mut out,
            "nodes_running_ratio",
            "gauge",
            "Share of the nodes in phase running (1 when there are none).",
        );
        let total = v.model.nodes.len();
        let running = v
            .model
            .nodes
            .values()
            .filter(|n| n.phase == Phase::Running)
            .count();
        let ratio = if total == 0 {
            1.0
        } else {
            running as f64 / total as f64
        };
        let _ = writeln!(out, "{P}nodes_running_ratio {ratio:.4}");
        pools(&mut out, v);
    }

    let h = s.http;
    family(
        &mut out,
        "http_connections_total",
        "counter",
        "Connections accepted by the REST server.",
    );
    let _ = writeln!(out, "{P}http_connections_total {}", get(&h.connections));
    family(
        &mut out,
        "http_rejected_total",
        "counter",
        "Connections refused with 503 because every REST worker was busy.",
    );
    let _ = writeln!(out, "{P}http_rejected_total {}", get(&h.rejected));
    family(
        &mut out,
        "http_timeouts_total",
        "counter",
        "Requests cut off because the client was too slow to send them (408).",
    );
    let _ = writeln!(out, "{P}http_timeouts_total {}", get(&h.timeouts));
    family(
        &mut out,
        "http_responses_total",
        "counter",
        "REST responses by status class.",
    );
    for class in 1..=5 {
        let _ = writeln!(
            out,
            "{P}http_responses_total{{code=\"{class}xx\"}} {}",
            get(&h.responses[class])
        );
    }
    family(
        &mut out,
        "executor_plan_waits",
        "gauge",
        "Executors waiting now for a change of their node plan.",
    );
    let _ = writeln!(out, "{P}executor_plan_waits {}", s.long_polls);
    out
}

/// Issue 9: storage pool capacity as last read from the gateway. The names are the issue's
/// (`storage_pool_*`), not prefixed: they describe the storage cluster, not the scheduler.
fn pools(out: &mut String, v: &View) {
    if v.model.pools.is_empty() {
        return;
    }
    type Field = fn(&crate::scheduler::model::PoolCapacity) -> String;
    let families: [(&str, &str, Field); 4] = [
        ("capacity_bytes", "Raw capacity of the storage pool.", |p| {
            p.capacity_bytes.to_string()
        }),
        ("used_bytes", "Capacity in use in the storage pool.", |p| {
            p.used_bytes.to_string()
        }),
        (
            "available_bytes",
            "Capacity still available for volume allocation.",
            |p| p.available_bytes.to_string(),
        ),
        (
            "over_threshold",
            "1 while the pool's use is above -storage.threshold percent, else 0.",
            |p| u8::from(p.over_threshold).to_string(),
        ),
    ];
    for (name, help, field) in families {
        let _ = writeln!(out, "# HELP storage_pool_{name} {help}");
        let _ = writeln!(out, "# TYPE storage_pool_{name} gauge");
        for p in &v.model.pools {
            let _ = writeln!(
                out,
                "storage_pool_{name}{{protection_domain=\"{}\",pool=\"{}\"}} {}",
                label(&p.protection_domain),
                label(&p.pool),
                field(p)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn every_sample_has_help_and_type() {
        let m = Metrics::default();
        m.event("OFFERS", 1_000);
        m.call("ACCEPT", true);
        m.offers_declined.fetch_add(3, Relaxed);
        let http = HttpStats::default();
        let text = render(&Sources {
            metrics: &m,
            view: None,
            http: &http,
            long_polls: 2,
            now_ms: 3_500,
        });
        assert!(text.contains("storage_scheduler_events_total{type=\"OFFERS\"} 1\n"));
        assert!(text.contains("storage_scheduler_calls_total{type=\"ACCEPT\",result=\"ok\"} 1\n"));
        assert!(text.contains("storage_scheduler_offers_declined_total 3\n"));
        assert!(text.contains("storage_scheduler_last_event_age_seconds 2.500\n"));
        assert!(text.contains("storage_scheduler_executor_plan_waits 2\n"));
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(typed.insert(name.to_owned()), "TYPE twice for {name}");
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(typed.contains(name), "sample before its TYPE: {line}");
            }
        }
    }

    #[test]
    fn pools_have_capacity_gauges_and_a_threshold_flag() {
        let mut model = crate::scheduler::model::ClusterModel::default();
        model.pools.push(crate::scheduler::model::PoolCapacity {
            protection_domain: "pd".into(),
            pool: "sp".into(),
            capacity_bytes: 100,
            used_bytes: 90,
            available_bytes: 5,
            over_threshold: true,
            ..Default::default()
        });
        let view = View {
            subscribed: true,
            master: None,
            disconnected_reason: None,
            suppressed: false,
            model,
            generated_ms: 0,
            generation: 0,
        };
        let m = Metrics::default();
        let http = HttpStats::default();
        let text = render(&Sources {
            metrics: &m,
            view: Some(&view),
            http: &http,
            long_polls: 0,
            now_ms: 0,
        });
        for line in [
            "storage_pool_capacity_bytes{protection_domain=\"pd\",pool=\"sp\"} 100\n",
            "storage_pool_used_bytes{protection_domain=\"pd\",pool=\"sp\"} 90\n",
            "storage_pool_available_bytes{protection_domain=\"pd\",pool=\"sp\"} 5\n",
            "storage_pool_over_threshold{protection_domain=\"pd\",pool=\"sp\"} 1\n",
            "# TYPE storage_pool_used_bytes gauge\n",
        ] {
            assert!(text.contains(line), "{line} missing in {text}");
        }
    }

    #[test]
    fn label_escaping() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
