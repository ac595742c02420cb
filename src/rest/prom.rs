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
pub(super) fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric family: its name (after the scheduler's prefix), type, help, and its samples
/// (`None`: the family is left out, e.g. the model's gauges when the dispatcher is silent).
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: fn(&Sources) -> Option<Vec<Sample>>,
}

/// A sample's labels (`a="x",b="y"`, already escaped; empty for none) and value.
type Sample = (String, String);

fn one(value: impl ToString) -> Option<Vec<Sample>> {
    Some(vec![(String::new(), value.to_string())])
}

fn counter(c: &AtomicU64) -> Option<Vec<Sample>> {
    one(get(c))
}

/// From the view, when the dispatcher answered.
fn of_view(s: &Sources, f: impl FnOnce(&View) -> Vec<Sample>) -> Option<Vec<Sample>> {
    s.view.map(f)
}

/// The scheduler's own families, in the order they are written; the storage pools' follow
/// them, then [`REST_FAMILIES`].
const SCHEDULER_FAMILIES: &[Family] = &[
    Family {
        name: "info",
        kind: "gauge",
        help: "Build of this scheduler (always 1).",
        samples: |_| {
            let version = label(env!("CARGO_PKG_VERSION"));
            Some(vec![(format!("version=\"{version}\""), "1".into())])
        },
    },
    Family {
        name: "events_total",
        kind: "counter",
        help: "Scheduler events received from the master, by event type.",
        samples: |s| {
            let events = EVENT_NAMES.iter().zip(&s.metrics.events);
            Some(
                events
                    .map(|(name, c)| (format!("type=\"{}\"", label(name)), get(c).to_string()))
                    .collect(),
            )
        },
    },
    Family {
        name: "calls_total",
        kind: "counter",
        help: "Calls sent to the master, by call type and result (ok: accepted by the master).",
        samples: |s| {
            let m = s.metrics;
            let mut out = Vec::new();
            for (i, name) in CALL_NAMES.iter().enumerate() {
                for (result, c) in [("ok", &m.calls_ok[i]), ("failed", &m.calls_failed[i])] {
                    let labels = format!("type=\"{}\",result=\"{result}\"", label(name));
                    out.push((labels, get(c).to_string()));
                }
            }
            Some(out)
        },
    },
    Family {
        name: "offers_accepted_total",
        kind: "counter",
        help: "Offers accepted to launch a storage executor.",
        samples: |s| counter(&s.metrics.offers_accepted),
    },
    Family {
        name: "offers_declined_total",
        kind: "counter",
        help: "Offers declined.",
        samples: |s| counter(&s.metrics.offers_declined),
    },
    Family {
        name: "reconnects_total",
        kind: "counter",
        help: "Subscriptions to the master after the first one.",
        samples: |s| counter(&s.metrics.reconnects),
    },
    Family {
        name: "gateway_calls_total",
        kind: "counter",
        help: "Requests made to the storage gateway.",
        samples: |s| counter(&s.metrics.gateway.calls),
    },
    Family {
        name: "gateway_errors_total",
        kind: "counter",
        help: "Requests to the storage gateway that failed.",
        samples: |s| counter(&s.metrics.gateway.errors),
    },
    Family {
        name: "last_event_age_seconds",
        kind: "gauge",
        help: "Seconds since the last event from the master (absent before the first one).",
        samples: |s| {
            let last = get(&s.metrics.last_event_ms);
            if last == 0 {
                return None;
            }
            one(format!(
                "{:.3}",
                s.now_ms.saturating_sub(last) as f64 / 1000.0
            ))
        },
    },
    Family {
        name: "subscribed",
        kind: "gauge",
        help: "1 while subscribed to the master, else 0.",
        samples: |s| {
            of_view(s, |v| {
                vec![(String::new(), u8::from(v.subscribed).to_string())]
            })
        },
    },
    Family {
        name: "offers_suppressed",
        kind: "gauge",
        help: "1 while offers are suppressed (every agent has its executor), else 0.",
        samples: |s| {
            of_view(s, |v| {
                vec![(String::new(), u8::from(v.suppressed).to_string())]
            })
        },
    },
    Family {
        name: "nodes",
        kind: "gauge",
        help: "Nodes by phase.",
        samples: |s| {
            of_view(s, |v| {
                let counts = v.model.phase_counts().into_iter();
                counts
                    .map(|(phase, n)| {
                        (
                            format!("phase=\"{}\"", label(phase.as_str())),
                            n.to_string(),
                        )
                    })
                    .collect()
            })
        },
    },
    Family {
        name: "nodes_with_error",
        kind: "gauge",
        help: "Nodes whose last report or status carried an error.",
        samples: |s| {
            of_view(s, |v| {
                let nodes = v.model.nodes.values();
                let errors = nodes.filter(|n| n.last_error.is_some()).count();
                vec![(String::new(), errors.to_string())]
            })
        },
    },
    Family {
        name: "nodes_running_ratio",
        kind: "gauge",
        help: "Share of the nodes in phase running (1 when there are none).",
        samples: |s| {
            of_view(s, |v| {
                let total = v.model.nodes.len();
                let nodes = v.model.nodes.values();
                let running = nodes.filter(|n| n.phase == Phase::Running).count();
                let ratio = if total == 0 {
                    1.0
                } else {
                    running as f64 / total as f64
                };
                vec![(String::new(), format!("{ratio:.4}"))]
            })
        },
    },
];

/// The REST server's own families.
const REST_FAMILIES: &[Family] = &[
    Family {
        name: "http_connections_total",
        kind: "counter",
        help: "Connections accepted by the REST server.",
        samples: |s| counter(&s.http.connections),
    },
    Family {
        name: "http_rejected_total",
        kind: "counter",
        help: "Connections refused with 503: every REST worker busy, or too many from one source address.",
        samples: |s| counter(&s.http.rejected),
    },
    Family {
        name: "http_timeouts_total",
        kind: "counter",
        help: "Requests cut off because the client was too slow to send them (408).",
        samples: |s| counter(&s.http.timeouts),
    },
    Family {
        name: "http_responses_total",
        kind: "counter",
        help: "REST responses by status class.",
        samples: |s| {
            let classes = 1..=5;
            Some(
                classes
                    .map(|c| {
                        (
                            format!("code=\"{c}xx\""),
                            get(&s.http.responses[c]).to_string(),
                        )
                    })
                    .collect(),
            )
        },
    },
    Family {
        name: "executor_plan_waits",
        kind: "gauge",
        help: "Executors waiting now for a change of their node plan.",
        samples: |s| one(s.long_polls),
    },
];

fn write_families(out: &mut String, s: &Sources, families: &[Family]) {
    for f in families {
        let Some(samples) = (f.samples)(s) else {
            continue;
        };
        family(out, f.name, f.kind, f.help);
        for (labels, value) in samples {
            let name = f.name;
            if labels.is_empty() {
                let _ = writeln!(out, "{P}{name} {value}");
            } else {
                let _ = writeln!(out, "{P}{name}{{{labels}}} {value}");
            }
        }
    }
}

pub fn render(s: &Sources) -> String {
    let mut out = String::with_capacity(4096);
    write_families(&mut out, s, SCHEDULER_FAMILIES);
    if let Some(v) = s.view {
        pools(&mut out, v);
        super::prom_health::write(&mut out, v, s.now_ms);
    }
    write_families(&mut out, s, REST_FAMILIES);
    out
}

/// Storage pool capacity as last read from the gateway. The names are not prefixed
/// (`storage_pool_*`): they describe the storage cluster, not the scheduler.
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
            "1 while the pool's use is above -health.capacity.warn percent, else 0.",
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
        let view = View::of(model, 0);
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
