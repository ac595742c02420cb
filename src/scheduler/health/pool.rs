//! A pool's and the cluster's health: missing copies and moving data in the pools, capacity
//! over the operators' threshold, the MDM cluster, and how many nodes are not healthy.

use super::{awaits_poll_only, combine, gib, AWAITING_POLL};
use crate::scheduler::model::{Health, HealthState, MdmStatus, PoolCapacity};

/// Nodes named in the cluster's reasons, at most (the rest are counted).
const NAMED_NODES: usize = 5;

/// The pool's health; `gateway_stale`: why its figures cannot be trusted now, if so.
pub(super) fn pool_health(p: &PoolCapacity, warn_pct: f64, gateway_stale: Option<&str>) -> Health {
    match gateway_stale {
        Some(why) => combine(Vec::new(), vec![why.to_string()]),
        None => combine(pool_problems(p, warn_pct), Vec::new()),
    }
}

fn pool_problems(p: &PoolCapacity, warn_pct: f64) -> Vec<String> {
    let name = format!("pool {}/{}", p.protection_domain, p.pool);
    let mut out = Vec::new();
    let degraded = p
        .degraded_healthy_bytes
        .saturating_add(p.degraded_failed_bytes);
    let rebuilding = p.pending_rebuild_bytes.saturating_add(p.moving_bytes) > 0;
    if p.failed_bytes > 0 {
        out.push(format!(
            "{name}: {} failed (no copy left)",
            gib(p.failed_bytes)
        ));
    }
    if degraded > 0 {
        let tail = if rebuilding { ", rebuilding" } else { "" };
        out.push(format!("{name}: {} degraded{tail}", gib(degraded)));
    } else if p.pending_rebuild_bytes > 0 {
        out.push(format!(
            "{name}: {} to rebuild",
            gib(p.pending_rebuild_bytes)
        ));
    }
    if p.pending_rebalance_bytes > 0 {
        out.push(format!(
            "{name}: {} to rebalance",
            gib(p.pending_rebalance_bytes)
        ));
    }
    if p.in_maintenance_bytes > 0 {
        out.push(format!(
            "{name}: {} in maintenance",
            gib(p.in_maintenance_bytes)
        ));
    }
    if p.used_pct > warn_pct {
        out.push(format!(
            "{name} is {} used (warn at {})",
            used_text(p.used_pct, warn_pct),
            warn_text(warn_pct)
        ));
    }
    out
}

/// `91%`; one decimal where the whole number would not show it above the threshold (`80.4%`).
fn used_text(v: f64, warn: f64) -> String {
    if v.round() <= warn {
        format!("{v:.1}%")
    } else {
        format!("{v:.0}%")
    }
}

fn warn_text(w: f64) -> String {
    if w.fract() == 0.0 {
        format!("{w:.0}%")
    } else {
        format!("{w}%")
    }
}

/// The nodes that are not healthy, as the cluster's reasons count them.
#[derive(Debug, Default)]
pub(super) struct Tally {
    degraded: (usize, Vec<String>),
    unknown: (usize, Vec<String>),
    /// Unknown only until the next gateway poll ([`AWAITING_POLL`]).
    waiting: (usize, Vec<String>),
}

impl Tally {
    pub fn count(&mut self, hostname: &str, health: &Health) {
        let (n, names) = match health.state {
            HealthState::Healthy => return,
            HealthState::Degraded => &mut self.degraded,
            HealthState::Unknown if awaits_poll_only(health) => &mut self.waiting,
            HealthState::Unknown => &mut self.unknown,
        };
        *n += 1;
        if names.len() < NAMED_NODES {
            names.push(hostname.to_string());
        }
    }

    fn reason(counted: &(usize, Vec<String>), state: &str) -> Option<String> {
        Tally::listed(counted).map(|(nodes, names)| format!("{nodes} {state}: {names}"))
    }

    fn waiting_reason(&self) -> Option<String> {
        Tally::listed(&self.waiting)
            .map(|(nodes, names)| format!("{AWAITING_POLL}: {nodes}: {names}"))
    }

    /// `2 nodes` and `h1, h2` (`, ...` when more were counted than named); `None` for none.
    fn listed((n, names): &(usize, Vec<String>)) -> Option<(String, String)> {
        let s = if *n == 1 { "" } else { "s" };
        let more = if *n > names.len() { ", ..." } else { "" };
        (*n > 0).then(|| {
            (
                format!("{n} node{s}"),
                format!("{}{more}", names.join(", ")),
            )
        })
    }
}

/// The cluster's health: the MDM cluster, the pools (already assessed) and the nodes.
pub(super) fn cluster_health(
    mdm: Option<&MdmStatus>,
    pools: &[PoolCapacity],
    nodes: &Tally,
    gateway_stale: Option<&str>,
) -> Health {
    let mut problems = Vec::new();
    let mut unknown = Vec::new();
    match gateway_stale {
        Some(why) => unknown.push(why.to_string()),
        None => {
            problems.extend(mdm.and_then(mdm_problem));
            for p in pools
                .iter()
                .filter(|p| p.health.state == HealthState::Degraded)
            {
                problems.extend(p.health.reasons.iter().cloned());
            }
        }
    }
    problems.extend(Tally::reason(&nodes.degraded, "degraded"));
    unknown.extend(Tally::reason(&nodes.unknown, "unknown"));
    unknown.extend(nodes.waiting_reason());
    combine(problems, unknown)
}

fn mdm_problem(mdm: &MdmStatus) -> Option<String> {
    let state = mdm
        .cluster_state
        .as_deref()
        .filter(|s| *s != "ClusteredNormal")?;
    Some(match mdm.good_nodes {
        Some(good) if !mdm.members.is_empty() => format!(
            "MDM cluster {state} ({good} of {} members up)",
            mdm.members.len()
        ),
        _ => format!("MDM cluster {state}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::MdmMemberStatus;

    const GIB: u64 = 1 << 30;

    fn pool(f: impl FnOnce(&mut PoolCapacity)) -> PoolCapacity {
        let mut p = PoolCapacity {
            protection_domain: "pd1".into(),
            pool: "sp1".into(),
            id: "p1".into(),
            used_pct: 40.0,
            ..PoolCapacity::default()
        };
        f(&mut p);
        p
    }

    #[test]
    fn each_pool_figure_has_its_reason() {
        let cases: Vec<(PoolCapacity, Vec<&str>)> = vec![
            (pool(|_| {}), vec![]),
            (
                pool(|p| {
                    p.degraded_healthy_bytes = 8 * GIB;
                    p.degraded_failed_bytes = 4 * GIB;
                    p.pending_rebuild_bytes = 12 * GIB;
                }),
                vec!["pool pd1/sp1: 12.0 GiB degraded, rebuilding"],
            ),
            (
                pool(|p| p.degraded_healthy_bytes = 2 * GIB),
                vec!["pool pd1/sp1: 2.0 GiB degraded"],
            ),
            (
                pool(|p| {
                    p.degraded_healthy_bytes = 2 * GIB;
                    p.moving_bytes = GIB;
                }),
                vec!["pool pd1/sp1: 2.0 GiB degraded, rebuilding"],
            ),
            (
                pool(|p| p.pending_rebuild_bytes = 3 * GIB / 2),
                vec!["pool pd1/sp1: 1.5 GiB to rebuild"],
            ),
            (
                pool(|p| p.failed_bytes = GIB),
                vec!["pool pd1/sp1: 1.0 GiB failed (no copy left)"],
            ),
            (
                pool(|p| p.pending_rebalance_bytes = 3 * GIB),
                vec!["pool pd1/sp1: 3.0 GiB to rebalance"],
            ),
            (
                pool(|p| p.in_maintenance_bytes = 5 * GIB),
                vec!["pool pd1/sp1: 5.0 GiB in maintenance"],
            ),
            (
                pool(|p| p.used_pct = 90.6),
                vec!["pool pd1/sp1 is 91% used (warn at 80%)"],
            ),
            (
                pool(|p| p.used_pct = 80.4),
                vec!["pool pd1/sp1 is 80.4% used (warn at 80%)"],
            ),
            // Moving data alone (a rebalance under way with nothing pending) is not a problem.
            (pool(|p| p.moving_bytes = GIB), vec![]),
        ];
        for (p, reasons) in cases {
            let h = pool_health(&p, 80.0, None);
            assert_eq!(h.reasons, reasons, "{p:?}");
            let state = if reasons.is_empty() {
                HealthState::Healthy
            } else {
                HealthState::Degraded
            };
            assert_eq!(h.state, state, "{p:?}");
        }
    }

    #[test]
    fn the_capacity_threshold_is_the_operators() {
        let p = pool(|p| p.used_pct = 80.0);
        assert!(pool_health(&p, 80.0, None).is_healthy(), "at the threshold");
        assert_eq!(
            pool_health(&p, 75.5, None).reasons,
            ["pool pd1/sp1 is 80% used (warn at 75.5%)"]
        );
    }

    #[test]
    fn a_pool_is_unknown_when_the_gateway_data_is_stale() {
        let p = pool(|p| p.failed_bytes = GIB);
        let h = pool_health(&p, 80.0, Some("no gateway data yet"));
        assert_eq!(h, Health::unknown("no gateway data yet"));
    }

    fn mdm(state: &str, good: Option<u32>, members: usize) -> MdmStatus {
        MdmStatus {
            cluster_state: Some(state.into()),
            good_nodes: good,
            good_replicas: None,
            members: vec![MdmMemberStatus::default(); members],
        }
    }

    type ClusterCase<'a> = (
        Option<MdmStatus>,
        Vec<PoolCapacity>,
        &'a Tally,
        Option<&'a str>,
        Health,
    );

    #[test]
    fn the_cluster_reads_the_mdm_the_pools_and_the_nodes() {
        let healthy_pool = pool(|_| {});
        let mut sick_pool = pool(|p| p.pending_rebuild_bytes = 12 * GIB);
        sick_pool.health = pool_health(&sick_pool, 80.0, None);
        let mut two_down = Tally::default();
        for h in ["h2", "h3"] {
            two_down.count(h, &Health::degraded(vec!["x".into()]));
        }
        two_down.count("h1", &Health::healthy());
        let mut many = Tally::default();
        for i in 0..7 {
            many.count(&format!("h{i}"), &Health::unknown("x"));
        }
        let normal = mdm("ClusteredNormal", Some(3), 3);
        let none = Tally::default();
        let cases: Vec<ClusterCase> = vec![
            (
                Some(normal.clone()),
                vec![healthy_pool.clone()],
                &none,
                None,
                Health::healthy(),
            ),
            (None, vec![], &none, None, Health::healthy()),
            (
                Some(mdm("ClusteredDegraded", Some(2), 3)),
                vec![],
                &none,
                None,
                Health::degraded(vec![
                    "MDM cluster ClusteredDegraded (2 of 3 members up)".into()
                ]),
            ),
            (
                Some(mdm("NotClustered", None, 0)),
                vec![],
                &none,
                None,
                Health::degraded(vec!["MDM cluster NotClustered".into()]),
            ),
            (
                Some(normal.clone()),
                vec![healthy_pool.clone(), sick_pool.clone()],
                &two_down,
                None,
                Health::degraded(vec![
                    "pool pd1/sp1: 12.0 GiB to rebuild".into(),
                    "2 nodes degraded: h2, h3".into(),
                ]),
            ),
            (
                Some(normal.clone()),
                vec![],
                &many,
                None,
                Health::unknown("7 nodes unknown: h0, h1, h2, h3, h4, ..."),
            ),
            (
                Some(mdm("ClusteredDegraded", Some(2), 3)),
                vec![sick_pool.clone()],
                &none,
                Some("no gateway data yet"),
                Health::unknown("no gateway data yet"),
            ),
            (
                Some(normal),
                vec![],
                &two_down,
                Some("no gateway data yet"),
                Health::degraded(vec![
                    "2 nodes degraded: h2, h3".into(),
                    "no gateway data yet".into(),
                ]),
            ),
        ];
        for (i, (m, pools, nodes, stale, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                cluster_health(m.as_ref(), &pools, nodes, stale),
                want,
                "case {i}"
            );
        }
        let mut one = Tally::default();
        one.count("h4", &Health::degraded(vec!["x".into()]));
        assert_eq!(
            Tally::reason(&one.degraded, "degraded").unwrap(),
            "1 node degraded: h4"
        );
    }

    /// Nodes unknown only until the next poll are counted apart, under a reason of the same
    /// kind as theirs (logged as information); one also unknown for another reason is not.
    #[test]
    fn nodes_waiting_for_the_next_poll_are_counted_apart() {
        let waiting = |h: &str| Health::unknown(format!("{AWAITING_POLL}: the devices of {h}"));
        let mut t = Tally::default();
        t.count("h1", &waiting("h1"));
        t.count("h2", &waiting("h2"));
        let mut both = waiting("h3");
        both.reasons
            .push("no word from the executor in the last 180s".into());
        t.count("h3", &both);
        let got = cluster_health(None, &[], &t, None);
        assert_eq!(
            got,
            Health {
                state: HealthState::Unknown,
                reasons: vec![
                    "1 node unknown: h3".into(),
                    format!("{AWAITING_POLL}: 2 nodes: h1, h2"),
                ],
            }
        );
    }
}
