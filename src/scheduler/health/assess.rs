//! From facts to health: a gateway poll onto the model's nodes and pools, then every node's,
//! pool's and the cluster's health again, with the changes for the log.
//!
//! The rules per node are in `node.rs`, per pool and for the cluster in `pool.rs`. A node is
//! written to only when what it holds changes: at 10,000 nodes an unchanged poll or
//! assessment copies none of them (they stay shared with the views and the store's save).

use super::node::{contact_ms, device_trouble, node_health, Context};
use super::pool::{cluster_health, pool_health, Tally};
use super::{age_text, millis, Change, HealthSettings, CONTACT_STALE, GATEWAY_STALE};
use crate::gateway::types::{MdmCluster, MdmMember};
use crate::scheduler::gateway_work::report::HealthPoll;
use crate::scheduler::model::{
    ClusterHealth, ClusterModel, Health, MdmMemberStatus, MdmStatus, Node, Phase, PoolCapacity,
};
use std::ops::DerefMut;
use std::sync::Arc;

/// Puts a poll's answers into the model: each node's `storage` (its SDS found by id, else by
/// IP) and `sdc_connected`, the pools, the MDM cluster, `health.read_ms`. A node whose facts
/// did not change is not written to (it stays shared, nothing is saved for it).
///
/// A node the gateway lists nothing for keeps `storage: None` (no box per node that has no
/// SDS yet); `health.read_ms` says that the gateway was read. A node without a known IP keeps
/// its `sdc_connected`.
pub fn apply_poll(model: &mut ClusterModel, poll: &HealthPoll, settings: &HealthSettings) {
    let listed = &poll.listed;
    for mut node in model.nodes.values_mut() {
        let storage = listed.storage_of(node.sds_id.as_deref(), node.ip.as_deref());
        match (&node.storage, storage) {
            // The worker's poll starts from the last: most often the storage the node holds.
            (Some(held), Some(s)) if Arc::ptr_eq(held, s) => {}
            (Some(held), Some(s)) if held == s => node.share_storage(s),
            (None, None) => {}
            _ => node.storage = storage.cloned(),
        }
        if node.attached_after_poll {
            node.attached_after_poll = false;
        }
        let sdc = node.ip.as_deref().map(|ip| listed.sdc_connected(ip));
        if let Some(connected) = sdc.filter(|c| *c != node.sdc_connected) {
            node.sdc_connected = connected;
        }
    }
    apply_pools(model, &poll.pools, settings);
    model.health.mdm = poll.mdm.as_ref().map(mdm_status);
    model.health.read_ms = Some(poll.read_ms);
    model.health.poll_error = None;
}

/// A failed poll: its error kept (the data ages into `unknown` by [`reassess`]).
pub fn apply_failure(model: &mut ClusterModel, error: &str) {
    if model.health.poll_error.as_deref() != Some(error) {
        model.health.poll_error = Some(error.to_string());
    }
}

/// Every node's, pool's and the cluster's health from the model's facts at `now_ms`; the
/// changes, in a stable order (nodes by agent id, the pools as listed, the cluster). Only
/// nodes whose health changes are written to.
///
/// A running node's executor counts as heard from at its `last_contact_ms` or its last host
/// report; [`reassess_heard`] takes what the caller heard besides.
pub fn reassess(model: &mut ClusterModel, settings: &HealthSettings, now_ms: u64) -> Vec<Change> {
    reassess_heard(model, settings, now_ms, &|_| None)
}

/// [`reassess`], with `heard(agent)`: when the caller last heard from that node's executor
/// (plan polls, which are not written to the nodes).
pub fn reassess_heard(
    model: &mut ClusterModel,
    settings: &HealthSettings,
    now_ms: u64,
    heard: &dyn Fn(&str) -> Option<u64>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    reassess_heard_each(model, settings, now_ms, heard, &mut |c| changes.push(c));
    changes
}

/// [`reassess_heard`], each change handed to `each` as it is found rather than gathered:
/// when a poll changes thousands of nodes at once (an MDM failover disconnects every SDC),
/// the gathered changes were 1.3 MB of the scheduler's heap at 6,000 nodes (heaptrack), at
/// the moment the model itself grows with their reasons.
pub fn reassess_heard_each(
    model: &mut ClusterModel,
    settings: &HealthSettings,
    now_ms: u64,
    heard: &dyn Fn(&str) -> Option<u64>,
    each: &mut dyn FnMut(Change),
) {
    in_context(model, settings, now_ms, |model, cx| {
        let mut tally = Tally::default();
        for mut node in model.nodes.values_mut() {
            if let Some(c) = assess_node(&mut node, heard, cx) {
                each(c);
            }
            tally.count(&node.hostname, &node.health);
        }
        for p in &mut model.pools {
            p.over_threshold = p.used_pct > settings.capacity_warn_pct;
            let health = pool_health(p, settings.capacity_warn_pct, cx.gateway_stale);
            if p.health != health {
                let subject = format!("pool {}/{}", p.protection_domain, p.pool);
                each(change(subject, &mut p.health, health));
            }
        }
        if let Some(c) = cluster_change(model, &tally, cx) {
            each(c);
        }
    })
}

/// [`reassess_heard`] after what one node's executor found on its host changed (reported at
/// hundreds a second across a large cluster, each a pass over every node's rules was not
/// affordable): that node's health, and the cluster's from every node's health as last
/// assessed. Nothing else can move with a host report; what turns stale meanwhile is the
/// stale deadline's full reassessment.
pub fn reassess_node_heard(
    model: &mut ClusterModel,
    agent: &str,
    settings: &HealthSettings,
    now_ms: u64,
    heard: &dyn Fn(&str) -> Option<u64>,
) -> Vec<Change> {
    in_context(model, settings, now_ms, |model, cx| {
        let Some(mut node) = model.nodes.get_mut(agent) else {
            return Vec::new();
        };
        let mut changes: Vec<Change> = assess_node(&mut node, heard, cx).into_iter().collect();
        let mut tally = Tally::default();
        for node in model.nodes.values() {
            tally.count(&node.hostname, &node.health);
        }
        changes.extend(cluster_change(model, &tally, cx));
        changes
    })
}

/// `f` on `model` with what every node's assessment at `now_ms` shares.
fn in_context<T>(
    model: &mut ClusterModel,
    settings: &HealthSettings,
    now_ms: u64,
    f: impl FnOnce(&mut ClusterModel, &Context) -> T,
) -> T {
    let gateway_stale = gateway_stale(&model.health, settings, now_ms);
    let contact_stale = format!("{CONTACT_STALE} in the last {}", age_text(settings.stale));
    f(
        model,
        &Context {
            gateway_stale: gateway_stale.as_deref(),
            stale_ms: millis(settings.stale),
            contact_stale: &contact_stale,
            now_ms,
        },
    )
}

/// The cluster's health from the MDM, the pools and `nodes`, written when it changed.
fn cluster_change(model: &mut ClusterModel, nodes: &Tally, cx: &Context) -> Option<Change> {
    let mdm = model.health.mdm.as_ref();
    let cluster = cluster_health(mdm, &model.pools, nodes, cx.gateway_stale);
    (model.health.health != cluster)
        .then(|| change("cluster".into(), &mut model.health.health, cluster))
}

/// One node's health and device facts at `cx.now_ms`, written only where they changed (a
/// model node is copied at its first write while a view shares it); the change of its
/// health, if any.
fn assess_node<N: DerefMut<Target = Node>>(
    node: &mut N,
    heard: &dyn Fn(&str) -> Option<u64>,
    cx: &Context,
) -> Option<Change> {
    let health = node_health(node, contact_ms(node, heard(&node.agent_id)), cx);
    let (missing, errors) = device_trouble(node);
    if *node.devices_missing != missing {
        node.devices_missing = missing.into();
    }
    if *node.device_errors != errors {
        node.device_errors = errors.into();
    }
    (node.health != health).then(|| {
        let subject = format!("node {}", node.hostname);
        change(subject, &mut node.health, health)
    })
}

fn change(subject: String, health: &mut Health, to: Health) -> Change {
    let from = std::mem::replace(health, to.clone());
    Change { subject, from, to }
}

/// When data in the model next turns stale (ms since the epoch), for the dispatcher's wait:
/// the gateway's last read, a running node's executor last heard from, each plus
/// `settings.stale`. What the model's health (after [`reassess`]) already shows as stale has
/// no such time any more; `None`: nothing can turn stale.
pub fn next_stale_ms(model: &ClusterModel, settings: &HealthSettings) -> Option<u64> {
    next_stale_heard(model, settings, &|_| None)
}

/// [`next_stale_ms`] with what the caller heard besides (as [`reassess_heard`]).
pub fn next_stale_heard(
    model: &ClusterModel,
    settings: &HealthSettings,
    heard: &dyn Fn(&str) -> Option<u64>,
) -> Option<u64> {
    let stale = millis(settings.stale);
    let shows = |h: &Health, prefix: &str| h.reasons.iter().any(|r| r.starts_with(prefix));
    let gateway = model
        .health
        .read_ms
        .filter(|_| !shows(&model.health.health, GATEWAY_STALE));
    let nodes = model
        .nodes
        .values()
        .filter(|n| n.phase == Phase::Running && !shows(&n.health, CONTACT_STALE))
        .filter_map(|n| contact_ms(n, heard(&n.agent_id)));
    gateway
        .into_iter()
        .chain(nodes)
        .map(|t| t.saturating_add(stale))
        .min()
}

/// Why the gateway's data cannot be trusted at `now_ms` (never read, or read `stale` ago or
/// longer), with the last poll's error; `None` while fresh.
fn gateway_stale(h: &ClusterHealth, settings: &HealthSettings, now_ms: u64) -> Option<String> {
    let failed = match &h.poll_error {
        Some(e) => format!(" (last poll failed: {e})"),
        None => String::new(),
    };
    match h.read_ms {
        None => Some(format!("{GATEWAY_STALE} yet{failed}")),
        Some(read) if now_ms.saturating_sub(read) >= millis(settings.stale) => Some(format!(
            "{GATEWAY_STALE} in the last {}{failed}",
            age_text(settings.stale)
        )),
        Some(_) => None,
    }
}

/// The poll's pools, over the operators' threshold or not; each keeps the health it had
/// (by domain and name) until [`reassess`] looks again, so that a change is seen as one.
fn apply_pools(model: &mut ClusterModel, pools: &[PoolCapacity], settings: &HealthSettings) {
    let old = std::mem::take(&mut model.pools);
    model.pools = pools
        .iter()
        .map(|p| {
            let was = old
                .iter()
                .find(|o| o.protection_domain == p.protection_domain && o.pool == p.pool);
            PoolCapacity {
                over_threshold: p.used_pct > settings.capacity_warn_pct,
                health: was.map(|o| o.health.clone()).unwrap_or_default(),
                ..p.clone()
            }
        })
        .collect();
}

fn mdm_status(c: &MdmCluster) -> MdmStatus {
    let member = |role: &str, m: &MdmMember| MdmMemberStatus {
        role: role.to_string(),
        name: m.name.clone(),
        ips: m.ips.clone(),
        status: m.status.clone(),
    };
    let primary = c.masters.iter().map(|m| member("primary", m));
    let secondary = c.slaves.iter().map(|m| member("secondary", m));
    let tie_breaker = c.tie_breakers.iter().map(|m| member("tie-breaker", m));
    MdmStatus {
        cluster_state: c.cluster_state.clone(),
        good_nodes: c.good_nodes_num,
        good_replicas: c.good_replicas_num,
        members: primary.chain(secondary).chain(tie_breaker).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::types::{Device, Sdc, Sds};
    use crate::scheduler::gateway_work::poll::Listed;
    use crate::scheduler::model::{HealthState, Persona};
    use std::sync::Arc;
    use std::time::Duration;

    const T0: u64 = 10_000_000;

    /// A poll as the gateway listed it, before the worker keeps it as the model does.
    #[derive(Clone, Default)]
    struct Polled {
        read_ms: u64,
        sdss: Vec<Sds>,
        devices: Vec<Device>,
        sdcs: Vec<Sdc>,
        pools: Vec<PoolCapacity>,
        mdm: Option<MdmCluster>,
        requests: u32,
    }

    /// The poll the worker would hand over for these listings.
    fn poll_of(p: &Polled) -> HealthPoll {
        let mut listed = Listed::default();
        p.sdss.iter().cloned().for_each(|s| listed.sds(s));
        p.devices.iter().cloned().for_each(|d| listed.device(d));
        p.sdcs.iter().cloned().for_each(|c| listed.sdc(c));
        HealthPoll {
            read_ms: p.read_ms,
            listed,
            pools: p.pools.clone(),
            mdm: p.mdm.clone(),
            requests: p.requests,
        }
    }

    fn apply(model: &mut ClusterModel, p: &Polled, settings: &HealthSettings) {
        apply_poll(model, &poll_of(p), settings);
    }
    const STALE: u64 = 180_000;

    fn settings() -> HealthSettings {
        HealthSettings {
            capacity_warn_pct: 80.0,
            stale: Duration::from_millis(STALE),
        }
    }

    fn sds(id: &str, ip: &str, conn: &str) -> Sds {
        Sds {
            name: Some(format!("name-{id}")),
            protection_domain_id: Some("pdid1".into()),
            mdm_connection_state: Some(conn.into()),
            ..Sds::joined(id, ip)
        }
    }

    fn device(sds: &str, path: &str, state: &str) -> Device {
        Device {
            id: format!("{sds}{path}"),
            name: None,
            device_current_path_name: path.into(),
            storage_pool_id: Some("p1".into()),
            sds_id: Some(sds.into()),
            device_state: Some(state.into()),
            error_state: Some("None".into()),
        }
    }

    fn sdc(ip: &str, connected: bool) -> Sdc {
        Sdc::at(
            ip,
            if connected {
                "Connected"
            } else {
                "Disconnected"
            },
        )
    }

    fn pool(used_pct: f64) -> PoolCapacity {
        PoolCapacity {
            protection_domain: "pd1".into(),
            pool: "sp1".into(),
            id: "p1".into(),
            used_pct,
            ..PoolCapacity::default()
        }
    }

    fn running(i: usize) -> Node {
        Node {
            phase: Phase::Running,
            ip: Some(format!("10.0.0.{i}").into()),
            sds_id: Some(format!("s{i}").into()),
            attached: vec!["/dev/sdb".into()],
            storage_ready: true,
            last_contact_ms: Some(T0),
            ..Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 0)
        }
    }

    /// Three running nodes all well, and the poll that says so.
    fn cluster() -> (ClusterModel, Polled) {
        let mut model = ClusterModel::default();
        let mut poll = Polled {
            read_ms: T0,
            pools: vec![pool(40.0)],
            mdm: Some(MdmCluster {
                id: None,
                name: None,
                cluster_mode: Some("ThreeNodes".into()),
                cluster_state: Some("ClusteredNormal".into()),
                good_nodes_num: Some(3),
                good_replicas_num: Some(2),
                masters: vec![MdmMember {
                    name: Some("m1".into()),
                    ips: vec!["10.0.0.1".into()],
                    ..MdmMember::default()
                }],
                slaves: vec![MdmMember {
                    name: Some("m2".into()),
                    status: Some("Normal".into()),
                    ..MdmMember::default()
                }],
                tie_breakers: vec![MdmMember {
                    status: Some("Normal".into()),
                    ..MdmMember::default()
                }],
            }),
            requests: 6,
            ..Polled::default()
        };
        for i in 1..=3 {
            model.nodes.insert(format!("a{i}"), running(i));
            let ip = format!("10.0.0.{i}");
            poll.sdss.push(sds(&format!("s{i}"), &ip, "Connected"));
            poll.devices
                .push(device(&format!("s{i}"), "/dev/sdb", "Normal"));
            poll.sdcs.push(sdc(&ip, true));
        }
        (model, poll)
    }

    fn shared(model: &ClusterModel) -> Vec<Arc<Node>> {
        model.nodes.values_shared().cloned().collect()
    }

    fn same(before: &[Arc<Node>], model: &ClusterModel) -> Vec<bool> {
        before
            .iter()
            .map(|n| Arc::ptr_eq(n, model.nodes.get_shared(&n.agent_id).unwrap()))
            .collect()
    }

    /// A node just made is already as the rules assess it: the first reassessment changes
    /// and copies none. (Made `unknown`, every node of a 10,000-agent launch wave was copied
    /// away from the save's snapshot, 6 MB, and logged "healthy again (was unknown)".)
    #[test]
    fn a_new_node_is_already_as_assessed() {
        let mut model = ClusterModel::default();
        for i in 1..=3 {
            let node = Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, T0);
            model.nodes.insert(format!("a{i}"), node);
        }
        let before = shared(&model);
        for now in [T0, T0 + STALE * 2] {
            let changes = reassess(&mut model, &settings(), now);
            let nodes: Vec<_> = changes.iter().filter(|c| c.subject != "cluster").collect();
            assert!(nodes.is_empty(), "{nodes:?}");
        }
        assert_eq!(same(&before, &model), [true; 3]);
    }

    #[test]
    fn a_poll_lands_on_its_nodes_pools_and_mdm() {
        let (mut model, mut poll) = cluster();
        // Found by IP when the node has no SDS id yet; devices by SDS id, sorted by path.
        model.nodes.get_mut("a2").unwrap().sds_id = None;
        poll.devices.push(device("s2", "/dev/sda", "Error"));
        poll.sdcs[2].mdm_connection_state = Some("Disconnected".into());
        poll.pools[0].used_pct = 91.0;
        apply(&mut model, &poll, &settings());
        let a2 = model.nodes["a2"].storage.as_deref().unwrap();
        let s = a2.sds.as_ref().unwrap();
        assert_eq!(
            (
                &*s.id,
                s.mdm_connection.as_deref(),
                s.protection_domain_id.as_deref()
            ),
            ("s2", Some("Connected"), Some("pdid1"))
        );
        let paths: Vec<_> = a2.devices.iter().map(|d| &*d.path).collect();
        assert_eq!(paths, ["/dev/sda", "/dev/sdb"]);
        assert_eq!(a2.devices[0].state.as_deref(), Some("Error"));
        assert!(model.nodes["a1"].sdc_connected && model.nodes["a2"].sdc_connected);
        assert!(!model.nodes["a3"].sdc_connected);
        assert!(model.pools[0].over_threshold);
        assert_eq!(model.health.read_ms, Some(T0));
        let mdm = model.health.mdm.as_ref().unwrap();
        assert_eq!(mdm.cluster_state.as_deref(), Some("ClusteredNormal"));
        assert_eq!((mdm.good_nodes, mdm.good_replicas), (Some(3), Some(2)));
        let roles: Vec<_> = mdm.members.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["primary", "secondary", "tie-breaker"]);
        assert_eq!(mdm.members[0].ips, ["10.0.0.1"]);
        assert_eq!(mdm.members[1].status.as_deref(), Some("Normal"));
        // An SDS the gateway no longer lists: none; a node without an IP keeps its SDC flag.
        poll.sdss.retain(|s| s.id != "s3");
        model.nodes.get_mut("a1").unwrap().ip = None;
        poll.sdcs.clear();
        apply(&mut model, &poll, &settings());
        assert!(model.nodes["a3"].storage.is_none());
        assert!(model.nodes["a1"].sdc_connected, "no IP: left as it was");
        assert!(!model.nodes["a2"].sdc_connected, "no SDC listed at its IP");
    }

    /// A node takes its storage from the poll shared, not copied: the first poll of a big
    /// cluster changes every node, and copies held it twice at the scheduler's peak.
    #[test]
    fn a_node_shares_its_storage_with_the_poll() {
        let (mut model, p) = cluster();
        let poll = poll_of(&p);
        apply_poll(&mut model, &poll, &settings());
        let polled = poll.listed.storage_of(Some("s1"), None).unwrap();
        let held = model.nodes["a1"].storage.as_ref().unwrap();
        assert!(Arc::ptr_eq(polled, held), "the node holds a copy");
    }

    /// An equal storage from another poll (one the worker did not start from, or a node read
    /// back from the store) is taken over with no write, so that the node and the worker's
    /// next poll hold one storage; not while a view shares the node.
    #[test]
    fn a_node_holding_an_equal_storage_takes_the_polls_with_no_write() {
        let (mut model, p) = cluster();
        apply(&mut model, &p, &settings());
        let revision = model.nodes["a1"].revision.clone();
        let viewed = shared(&model);
        let other = poll_of(&p);
        apply_poll(&mut model, &other, &settings());
        assert_eq!(
            same(&viewed, &model),
            [true, true, true],
            "a shared node is not copied"
        );
        let polled = other.listed.storage_of(Some("s1"), None).unwrap();
        assert!(!Arc::ptr_eq(
            polled,
            model.nodes["a1"].storage.as_ref().unwrap()
        ));
        drop(viewed);
        let before: Vec<*const Node> = shared(&model).iter().map(Arc::as_ptr).collect();
        apply_poll(&mut model, &other, &settings());
        let held = model.nodes["a1"].storage.as_ref().unwrap();
        assert!(Arc::ptr_eq(polled, held), "the node keeps its own copy");
        assert_eq!(model.nodes["a1"].revision, revision, "not a write");
        let after: Vec<*const Node> = shared(&model).iter().map(Arc::as_ptr).collect();
        assert_eq!(before, after, "no node copied");
    }

    #[test]
    fn an_unchanged_poll_or_assessment_copies_no_node() {
        let (mut model, mut poll) = cluster();
        apply(&mut model, &poll, &settings());
        reassess(&mut model, &settings(), T0 + 1);
        let before = shared(&model);
        poll.read_ms = T0 + 30_000;
        poll.pools[0].read_ms = T0 + 30_000;
        apply(&mut model, &poll, &settings());
        assert_eq!(same(&before, &model), [true, true, true]);
        assert!(reassess(&mut model, &settings(), T0 + 30_001).is_empty());
        assert_eq!(same(&before, &model), [true, true, true]);
        // One node's SDS disconnects: that node alone is copied, by the poll and the assessment.
        poll.sdss[1].mdm_connection_state = Some("Disconnected".into());
        apply(&mut model, &poll, &settings());
        assert_eq!(same(&before, &model), [true, false, true]);
        let after_poll = shared(&model);
        let changes = reassess(&mut model, &settings(), T0 + 30_002);
        assert_eq!(same(&after_poll, &model), [true, false, true]);
        let subjects: Vec<_> = changes.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["node h2", "cluster"]);
    }

    /// A host report reassesses its node and the cluster as a full pass would, and writes
    /// no other node.
    #[test]
    fn a_host_report_reassesses_its_node_and_the_cluster_alone() {
        use crate::contract::health::{HostCheck, HostProblem};
        use crate::scheduler::model::HostHealth;
        let (mut model, poll) = cluster();
        apply(&mut model, &poll, &settings());
        reassess(&mut model, &settings(), T0 + 1);
        let lia = HostProblem::new(HostCheck::Service, "lia", "not running (status 3)");
        model.nodes.get_mut("a2").unwrap().host = Some(Box::new(HostHealth {
            problems: vec![lia],
            reported_ms: T0 + 2,
        }));
        let mut full = model.clone();
        let before = shared(&model);
        let changes = reassess_node_heard(&mut model, "a2", &settings(), T0 + 3, &|_| None);
        assert_eq!(same(&before, &model), [true, false, true]);
        let subjects: Vec<_> = changes.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["node h2", "cluster"]);
        assert_eq!(model.nodes["a2"].health.state, HealthState::Degraded);
        let reasons = &model.health.health.reasons;
        assert!(reasons.iter().any(|r| r.contains("h2")), "{reasons:?}");
        reassess(&mut full, &settings(), T0 + 3);
        assert_eq!(model.health.health, full.health.health);
        assert_eq!(model.nodes["a2"].health, full.nodes["a2"].health);
        // Cleared: healthy again, node and cluster; an unknown agent changes nothing.
        model
            .nodes
            .get_mut("a2")
            .unwrap()
            .host
            .as_mut()
            .unwrap()
            .problems
            .clear();
        let changes = reassess_node_heard(&mut model, "a2", &settings(), T0 + 4, &|_| None);
        assert_eq!(changes.len(), 2);
        assert_eq!(model.health.health.state, HealthState::Healthy);
        assert!(reassess_node_heard(&mut model, "nope", &settings(), T0 + 5, &|_| None).is_empty());
    }

    #[test]
    fn ten_thousand_unchanged_nodes_stay_shared() {
        let mut model = ClusterModel::default();
        let mut poll = Polled {
            read_ms: T0,
            ..Polled::default()
        };
        for i in 0..10_000 {
            let ip = format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256);
            let mut n = running(i);
            n.ip = Some(ip.as_str().into());
            // Not assessed yet (as in a state saved before health was kept).
            n.health = Health::default();
            model.nodes.insert(format!("a{i}"), n);
            let id = format!("s{i}");
            poll.sdss.push(sds(&id, &ip, "Connected"));
            poll.devices.push(device(&id, "/dev/sdb", "Normal"));
            poll.sdcs.push(sdc(&ip, true));
        }
        apply(&mut model, &poll, &settings());
        assert_eq!(reassess(&mut model, &settings(), T0).len(), 10_001);
        let before = shared(&model);
        poll.read_ms = T0 + 1;
        apply(&mut model, &poll, &settings());
        assert!(reassess(&mut model, &settings(), T0 + 1).is_empty());
        assert!(same(&before, &model).into_iter().all(|s| s));
    }

    #[test]
    fn reassess_reports_each_change_once_in_a_stable_order() {
        let (mut model, mut poll) = cluster();
        // Not assessed yet (as in a state saved before health was kept).
        for mut n in model.nodes.values_mut() {
            n.health = Health::default();
        }
        apply(&mut model, &poll, &settings());
        let first = reassess(&mut model, &settings(), T0 + 1);
        let subjects: Vec<_> = first.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(
            subjects,
            ["node h1", "node h2", "node h3", "pool pd1/sp1", "cluster"]
        );
        assert!(first
            .iter()
            .all(|c| c.from.state == HealthState::Unknown && c.to.is_healthy()));
        assert!(model.health.health.is_healthy());
        poll.sdss[1].mdm_connection_state = Some("Disconnected".into());
        poll.pools[0].used_pct = 91.0;
        poll.pools[0].pending_rebuild_bytes = 12 << 30;
        poll.pools[0].degraded_healthy_bytes = 12 << 30;
        let mdm = poll.mdm.as_mut().unwrap();
        mdm.cluster_state = Some("ClusteredDegraded".into());
        mdm.good_nodes_num = Some(2);
        apply(&mut model, &poll, &settings());
        assert!(model.pools[0].health.is_healthy(), "kept until reassessed");
        let changes = reassess(&mut model, &settings(), T0 + 2);
        let shown: Vec<_> = changes
            .iter()
            .map(|c| (c.subject.as_str(), c.to.state, c.to.reasons.clone()))
            .collect();
        let pool_reasons = vec![
            "pool pd1/sp1: 12.0 GiB degraded, rebuilding".to_string(),
            "pool pd1/sp1 is 91% used (warn at 80%)".to_string(),
        ];
        let mut cluster_reasons = vec!["MDM cluster ClusteredDegraded (2 of 3 members up)".into()];
        cluster_reasons.extend(pool_reasons.clone());
        cluster_reasons.push("1 node degraded: h2".into());
        assert_eq!(
            shown,
            [
                (
                    "node h2",
                    HealthState::Degraded,
                    vec!["SDS h2 disconnected from the MDM".into()]
                ),
                ("pool pd1/sp1", HealthState::Degraded, pool_reasons),
                ("cluster", HealthState::Degraded, cluster_reasons),
            ]
        );
        assert!(reassess(&mut model, &settings(), T0 + 3).is_empty());
    }

    #[test]
    fn gateway_data_turns_stale_at_the_boundary_and_a_failure_is_named() {
        let (mut model, poll) = cluster();
        // Never read: every running node and the cluster are unknown.
        reassess(&mut model, &settings(), T0);
        assert_eq!(model.health.health.state, HealthState::Unknown);
        assert_eq!(
            model.health.health.reasons,
            ["no gateway data yet", "3 nodes unknown: h1, h2, h3"]
        );
        assert_eq!(model.nodes["a1"].health.reasons[0], "no gateway data yet");
        apply_failure(&mut model, "connection refused");
        reassess(&mut model, &settings(), T0);
        assert_eq!(
            model.health.health.reasons[0],
            "no gateway data yet (last poll failed: connection refused)"
        );
        apply(&mut model, &poll, &settings());
        assert_eq!(model.health.poll_error, None);
        for mut n in model.nodes.values_mut() {
            n.last_contact_ms = Some(T0 + 10 * STALE);
        }
        reassess(&mut model, &settings(), T0 + STALE - 1);
        assert!(
            model.health.health.is_healthy(),
            "fresh until `stale` has passed"
        );
        apply_failure(&mut model, "timed out");
        assert_eq!(
            model.health.read_ms,
            Some(T0),
            "a failure keeps the last read"
        );
        let changes = reassess(&mut model, &settings(), T0 + STALE);
        let why = "no gateway data in the last 180s (last poll failed: timed out)";
        assert_eq!(
            model.health.health.reasons,
            [why, "3 nodes unknown: h1, h2, h3"]
        );
        assert_eq!(model.pools[0].health, Health::unknown(why));
        assert_eq!(model.nodes["a2"].health, Health::unknown(why));
        assert_eq!(changes.len(), 5, "{changes:?}");
        // The reason does not change as the data ages: no new change, no node written.
        let before = shared(&model);
        assert!(reassess(&mut model, &settings(), T0 + 10 * STALE).is_empty());
        assert_eq!(same(&before, &model), [true, true, true]);
    }

    #[test]
    fn next_stale_is_the_earliest_time_something_turns_stale() {
        let (mut model, poll) = cluster();
        assert_eq!(
            next_stale_ms(&model, &settings()),
            Some(T0 + STALE),
            "contacts"
        );
        apply(&mut model, &poll, &settings());
        model.nodes.get_mut("a2").unwrap().last_contact_ms = Some(T0 - 5);
        reassess(&mut model, &settings(), T0);
        assert_eq!(next_stale_ms(&model, &settings()), Some(T0 - 5 + STALE));
        // What the caller heard moves a node's time on.
        let heard = |a: &str| (a == "a2").then_some(T0 + 7);
        assert_eq!(
            next_stale_heard(&model, &settings(), &heard),
            Some(T0 + STALE)
        );
        reassess_heard(&mut model, &settings(), T0 - 5 + STALE, &heard);
        assert!(model.nodes["a2"].health.is_healthy());
        // Once shown stale, a thing has no time left: no wake-up in the past.
        reassess(&mut model, &settings(), T0 + STALE);
        assert_eq!(model.health.health.state, HealthState::Unknown);
        assert_eq!(next_stale_ms(&model, &settings()), None);
        // Nodes not running have none.
        for mut n in model.nodes.values_mut() {
            n.phase = Phase::Packages;
        }
        model.health = ClusterHealth::default();
        assert_eq!(next_stale_ms(&model, &settings()), None);
    }

    #[test]
    fn pools_keep_their_health_across_polls_and_read_the_operators_threshold() {
        let (mut model, mut poll) = cluster();
        apply(&mut model, &poll, &settings());
        reassess(&mut model, &settings(), T0);
        poll.pools[0].used_pct = 85.0;
        poll.pools[0].over_threshold = false;
        let strict = HealthSettings {
            capacity_warn_pct: 90.0,
            ..settings()
        };
        apply(&mut model, &poll, &strict);
        assert!(!model.pools[0].over_threshold);
        assert!(model.pools[0].health.is_healthy());
        assert!(reassess(&mut model, &strict, T0).is_empty());
        apply(&mut model, &poll, &settings());
        assert!(model.pools[0].over_threshold);
        let changes = reassess(&mut model, &settings(), T0);
        assert_eq!(changes[0].subject, "pool pd1/sp1");
        assert_eq!(
            changes[0].to.reasons,
            ["pool pd1/sp1 is 85% used (warn at 80%)"]
        );
    }
}
