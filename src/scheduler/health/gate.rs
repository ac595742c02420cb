//! The lifecycle's gate: may this node be disrupted now (a service stopped, a reboot, its SDS
//! removed), and if not, why. Pure: the model's health and phases in, an answer out.
//!
//! Read the model after [`super::assess::reassess`]: whether the gateway's data is fresh is
//! what the cluster's health says of it.
//!
//! A node that holds no data (no device attached or listed, not an MDM member) may always be
//! disrupted. Any other waits until: the gateway's data is fresh; for an MDM member, no other
//! MDM member is down (see [`down`]) and the MDM cluster is `ClusteredNormal`; fewer than
//! `max_disrupted_per_domain` other nodes of its protection domain are disrupted (see
//! [`disruption`]); and no pool of that domain has data degraded, failed, waiting to be
//! rebuilt or rebalanced, moving, or in maintenance.
//!
//! A reboot is granted when its executor claims it (`PhaseReport::rebooting`, recorded in
//! `Node::rebooting`): the claims of nodes waiting together reach the dispatcher one at a time,
//! so the first takes the budget's room and the next sees it taken ([`reboot_hold`]).

use super::{gib, GATEWAY_STALE};
use crate::mesos::types::TaskState;
use crate::scheduler::model::{ClusterModel, Node, Phase, PoolCapacity};

/// What the gate needs besides the model.
#[derive(Debug, Clone, PartialEq)]
pub struct GateSettings {
    /// Nodes of one protection domain that may be disrupted or not yet back at once
    /// (`-rollout.max-disrupted-per-domain`).
    pub max_disrupted_per_domain: usize,
    /// The protection domain and pool of a node whose layout names none (the flags').
    pub default_protection_domain: String,
    pub default_pool: String,
}

/// Why a node may not be disrupted now: one line for `/api/state` and the page
/// (`waiting: pool pd1/sp1 has 12.0 GiB to rebuild`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `Ok` when the node `agent` may be disrupted now; else the first blocker, one line
/// (`waiting: h2 of pd1 is not back (reboot-final)`).
pub fn may_disrupt(
    model: &ClusterModel,
    agent: &str,
    settings: &GateSettings,
) -> Result<(), Refusal> {
    let refuse = |why: String| Err(Refusal(format!("waiting: {why}")));
    let Some(node) = model.nodes.get(agent) else {
        return Err(Refusal(format!("no node of agent {agent} in the model")));
    };
    if !holds_data(node) && !mdm_member(node) {
        return Ok(());
    }
    let h = &model.health;
    if h.read_ms.is_none()
        || h.health
            .reasons
            .iter()
            .any(|r| r.starts_with(GATEWAY_STALE))
    {
        return refuse("no fresh gateway data".into());
    }
    if mdm_member(node) {
        // Before the cluster's state: the gateway may not have seen a member leave yet.
        let members = model.nodes.values().filter(|o| mdm_member(o));
        let mut others = members.filter(|o| o.agent_id != node.agent_id);
        if let Some((o, why)) = others.find_map(|o| Some((o, down(o)?))) {
            return refuse(format!("MDM member {} {why}", o.hostname));
        }
        let state = h.mdm.as_ref().and_then(|m| m.cluster_state.as_deref());
        match state {
            Some("ClusteredNormal") => {}
            Some(other) => return refuse(format!("the MDM cluster is {other}")),
            None => return refuse("the MDM cluster's state is not known".into()),
        }
    }
    let domain = domain_of(node, &model.pools, settings);
    if let Some(why) = others_disrupted(model, node, domain, settings) {
        return refuse(why);
    }
    let pools = model.pools.iter().filter(|p| p.protection_domain == domain);
    if let Some(why) = pools.filter_map(pool_blocker).next() {
        return refuse(why);
    }
    Ok(())
}

/// `Some(why)` when node `agent` asks to reboot (a reboot phase) and may not now: the plan's
/// `reboot_wait` and `waiting`, and the answer to its executor's claim.
pub fn reboot_hold(model: &ClusterModel, agent: &str, settings: &GateSettings) -> Option<Refusal> {
    let node = model.nodes.get(agent)?;
    if !node.phase.is_reboot() {
        return None;
    }
    may_disrupt(model, agent, settings).err()
}

/// An MDM node past `cluster-init`, in the MDM cluster. Before, its MDM belongs to no cluster
/// (a first install's `reboot-prerequisites` reboots it freely).
fn mdm_member(n: &Node) -> bool {
    let past = |p: Phase| p > Phase::ClusterInit && p <= Phase::Running;
    n.persona.is_mdm() && (past(n.phase) || n.progress.is_some_and(past))
}

/// Data on the node: devices the framework attached or the gateway lists on its SDS.
fn holds_data(n: &Node) -> bool {
    !n.attached.is_empty() || n.storage.as_ref().is_some_and(|s| !s.devices.is_empty())
}

/// Why a node's host is away now, whatever it holds: its reboot claimed and not yet behind it
/// (or, by an executor that claims none, its launch ended in a reboot phase), `lost`, its
/// agent gone, or its machine given up to a Mesos maintenance window. A node waiting in a reboot phase for its turn is up.
pub fn down(n: &Node) -> Option<String> {
    let running = n
        .task
        .as_ref()
        .is_some_and(|t| t.state == TaskState::Running);
    if n.rebooting || (n.phase.is_reboot() && !running) {
        return Some(format!("is not back ({})", n.phase));
    }
    if n.phase == Phase::Lost {
        return Some("is lost".into());
    }
    if n.gone_since_ms.is_some() {
        return Some("is gone (its agent is not listed)".into());
    }
    if n.maintenance.as_ref().is_some_and(|m| m.accepted()) {
        return Some("is drained for Mesos maintenance".into());
    }
    None
}

/// Why a node that holds data is not serving it now: down (see [`down`]), a restart accepted,
/// a phase of an install it walks again (not back), its SDS off the MDM or in maintenance.
/// `None`: serving, or it holds no data (then nothing of the domain's depends on it).
/// `storage-attach` is serving: the last phase of an install, entered after every reboot,
/// where the disks join.
pub fn disruption(n: &Node) -> Option<String> {
    if !holds_data(n) {
        return None;
    }
    if let Some(why) = down(n) {
        return Some(why);
    }
    if n.restart.is_some() && n.phase == Phase::Running {
        // Its restart is accepted and its executor about to end: as good as not back.
        return Some("is restarting".into());
    }
    match n.phase {
        Phase::Running | Phase::Failed | Phase::StorageAttach => {}
        p if p.is_reboot() => {}
        p => return Some(format!("is not back ({p})")),
    }
    let sds = n.storage.as_deref().and_then(|s| s.sds.as_ref())?;
    if sds
        .mdm_connection
        .as_deref()
        .is_some_and(|c| c != "Connected")
    {
        return Some("has its SDS disconnected from the MDM".into());
    }
    if sds
        .maintenance
        .as_deref()
        .is_some_and(|m| m != "NoMaintenance")
    {
        return Some("is in maintenance".into());
    }
    None
}

/// The gateway's last poll shows what a disruption of `node` does: the node not serving
/// (see [`disruption`]), an MDM member's cluster not `ClusteredNormal`, or a pool of its
/// domain with data degraded, rebuilding or moving. A disruptive step's outage must be seen
/// (or time must pass) before the node counts as back: the MDM notices a restarted SDS only
/// after a while, and a poll in between shows all well.
pub fn shows_disruption(model: &ClusterModel, node: &Node, settings: &GateSettings) -> bool {
    if disruption(node).is_some() {
        return true;
    }
    let mdm = model.health.mdm.as_ref();
    if node.persona.is_mdm()
        && mdm.is_some_and(|m| m.cluster_state.as_deref() != Some("ClusteredNormal"))
    {
        return true;
    }
    let domain = domain_of(node, &model.pools, settings);
    model
        .pools
        .iter()
        .filter(|p| p.protection_domain == domain)
        .any(|p| pool_blocker(p).is_some())
}

fn others_disrupted(
    model: &ClusterModel,
    node: &Node,
    domain: &str,
    settings: &GateSettings,
) -> Option<String> {
    let blockers = model
        .nodes
        .values()
        .filter(|o| o.agent_id != node.agent_id && same_domain(node, o, model, settings))
        .filter_map(|o| Some((o, disruption(o)?)));
    let mut count = 0;
    let mut first = None;
    for (o, why) in blockers {
        count += 1;
        first.get_or_insert_with(|| format!("{} of {domain} {why}", o.hostname));
    }
    if count < settings.max_disrupted_per_domain {
        return None;
    }
    Some(match (first, count) {
        (None, _) => format!(
            "no node of {domain} may be disrupted (at most {} at once)",
            settings.max_disrupted_per_domain
        ),
        (Some(one), 1) => one,
        (Some(one), n) => format!("{one} (and {} more)", n - 1),
    })
}

/// The protection domain (by name) a node serves: where the gateway has its devices, else its
/// layout's, else the flags'.
pub fn domain_of<'a>(
    node: &'a Node,
    pools: &'a [PoolCapacity],
    settings: &'a GateSettings,
) -> &'a str {
    let devices = node.storage.as_deref().into_iter().flat_map(|s| &s.devices);
    let listed = devices
        .filter_map(|d| d.storage_pool_id.as_deref())
        .find_map(|id| pools.iter().find(|p| p.id == id));
    match (listed, node.layout.sds.keys().next()) {
        (Some(p), _) => &p.protection_domain,
        (None, Some(declared)) => declared,
        (None, None) => &settings.default_protection_domain,
    }
}

/// Two nodes serve one protection domain: by the gateway's domain ids when both SDSs give
/// one, else by the names [`domain_of`] finds (ids are never compared with names).
pub fn same_domain(a: &Node, b: &Node, model: &ClusterModel, settings: &GateSettings) -> bool {
    match (domain_id(a), domain_id(b)) {
        (Some(x), Some(y)) => x == y,
        _ => domain_of(a, &model.pools, settings) == domain_of(b, &model.pools, settings),
    }
}

fn domain_id(n: &Node) -> Option<&str> {
    let sds = n.storage.as_deref()?.sds.as_ref()?;
    sds.protection_domain_id.as_deref()
}

/// Why a pool's data is not whole and settled now, if so.
fn pool_blocker(p: &PoolCapacity) -> Option<String> {
    let degraded = p
        .degraded_healthy_bytes
        .saturating_add(p.degraded_failed_bytes);
    let why = [
        (p.failed_bytes, "failed"),
        (p.pending_rebuild_bytes, "to rebuild"),
        (degraded, "degraded"),
        (p.pending_rebalance_bytes, "to rebalance"),
        (p.moving_bytes, "moving (a rebuild or rebalance under way)"),
        (p.in_maintenance_bytes, "in maintenance"),
    ]
    .into_iter()
    .find(|(bytes, _)| *bytes > 0)?;
    Some(format!(
        "pool {}/{} has {} {}",
        p.protection_domain,
        p.pool,
        gib(why.0),
        why.1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{
        DeviceStatus, Health, MdmStatus, NodeStorage, Persona, SdsStatus, TaskRecord,
    };
    use std::sync::Arc;

    const GIB: u64 = 1 << 30;

    fn settings(max: usize) -> GateSettings {
        GateSettings {
            max_disrupted_per_domain: max,
            default_protection_domain: "pd1".into(),
            default_pool: "sp1".into(),
        }
    }

    fn storage(pd_id: &str, pool_id: &str, conn: &str) -> Option<Arc<NodeStorage>> {
        Some(Arc::new(NodeStorage {
            sds: Some(SdsStatus {
                id: "s".into(),
                protection_domain_id: Some(pd_id.into()),
                mdm_connection: Some(conn.into()),
                membership: Some("Joined".into()),
                state: Some("Normal".into()),
                maintenance: Some("NoMaintenance".into()),
            }),
            devices: vec![DeviceStatus {
                path: "/dev/sdb".into(),
                storage_pool_id: Some(pool_id.into()),
                ..DeviceStatus::default()
            }],
        }))
    }

    /// A running data node of pd1 (pool id p1) serving its data.
    fn data(i: usize) -> Node {
        Node {
            phase: Phase::Running,
            attached: vec!["/dev/sdb".into()],
            storage: storage("pdid1", "p1", "Connected"),
            ..Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 0)
        }
    }

    fn pool(pd: &str, name: &str, id: &str) -> PoolCapacity {
        PoolCapacity {
            protection_domain: pd.into(),
            pool: name.into(),
            id: id.into(),
            ..PoolCapacity::default()
        }
    }

    /// Five nodes serving two domains (h1-h3 in pd1, h4-h5 in pd2), all well.
    fn model() -> ClusterModel {
        let mut m = ClusterModel {
            pools: vec![pool("pd1", "sp1", "p1"), pool("pd2", "sp2", "p2")],
            ..ClusterModel::default()
        };
        m.health.read_ms = Some(1);
        m.health.health = Health::healthy();
        m.health.mdm = Some(MdmStatus {
            cluster_state: Some("ClusteredNormal".into()),
            ..MdmStatus::default()
        });
        for i in 1..=5 {
            let mut n = data(i);
            if i > 3 {
                n.storage = storage("pdid2", "p2", "Connected");
            }
            m.nodes.insert(format!("a{i}"), n);
        }
        m
    }

    fn edit(m: &mut ClusterModel, agent: &str, f: impl FnOnce(&mut Node)) {
        f(m.nodes.get_mut(agent).unwrap());
    }

    type Case = (
        &'static str,
        fn(&mut ClusterModel),
        Result<(), &'static str>,
    );

    #[test]
    fn the_gate_on_a_table_of_states() {
        let cases: Vec<Case> =
            vec![
            ("all well", |_| {}, Ok(())),
            (
                "another of the domain rebooting",
                |m| edit(m, "a2", |n| n.phase = Phase::RebootFinal),
                Err("waiting: h2 of pd1 is not back (reboot-final)"),
            ),
            (
                "another of the domain relaunched on its new agent",
                |m| edit(m, "a3", |n| n.phase = Phase::Launching),
                Err("waiting: h3 of pd1 is not back (launching)"),
            ),
            (
                "another of the domain lost",
                |m| edit(m, "a2", |n| n.phase = Phase::Lost),
                Err("waiting: h2 of pd1 is lost"),
            ),
            (
                "another of the domain's agent gone",
                |m| edit(m, "a2", |n| n.gone_since_ms = Some(5)),
                Err("waiting: h2 of pd1 is gone (its agent is not listed)"),
            ),
            (
                "another of the domain's SDS disconnected",
                |m| edit(m, "a3", |n| n.storage = storage("pdid1", "p1", "Disconnected")),
                Err("waiting: h3 of pd1 has its SDS disconnected from the MDM"),
            ),
            (
                "another of the domain in maintenance",
                |m| {
                    edit(m, "a3", |n| {
                        let s = Arc::make_mut(n.storage.as_mut().unwrap()).sds.as_mut().unwrap();
                        s.maintenance = Some("InMaintenance".into());
                    })
                },
                Err("waiting: h3 of pd1 is in maintenance"),
            ),
            (
                "two others of the domain down",
                |m| {
                    edit(m, "a2", |n| n.phase = Phase::Lost);
                    edit(m, "a3", |n| n.phase = Phase::RebootFinal);
                },
                Err("waiting: h2 of pd1 is lost (and 1 more)"),
            ),
            (
                "a node of another domain rebooting",
                |m| edit(m, "a4", |n| n.phase = Phase::RebootFinal),
                Ok(()),
            ),
            (
                "another of the domain that never held data is installing",
                |m| {
                    edit(m, "a2", |n| {
                        n.phase = Phase::Packages;
                        n.attached.clear();
                        n.storage = None;
                    })
                },
                Ok(()),
            ),
            (
                "pending rebuild in the domain's pool",
                |m| m.pools[0].pending_rebuild_bytes = 12 * GIB,
                Err("waiting: pool pd1/sp1 has 12.0 GiB to rebuild"),
            ),
            (
                "degraded data in the domain's pool",
                |m| m.pools[0].degraded_healthy_bytes = 2 * GIB,
                Err("waiting: pool pd1/sp1 has 2.0 GiB degraded"),
            ),
            (
                "failed data in the domain's pool",
                |m| m.pools[0].failed_bytes = GIB,
                Err("waiting: pool pd1/sp1 has 1.0 GiB failed"),
            ),
            (
                "a rebalance waiting in the domain's pool",
                |m| m.pools[0].pending_rebalance_bytes = 3 * GIB,
                Err("waiting: pool pd1/sp1 has 3.0 GiB to rebalance"),
            ),
            (
                "data moving in the domain's pool",
                |m| m.pools[0].moving_bytes = GIB,
                Err("waiting: pool pd1/sp1 has 1.0 GiB moving (a rebuild or rebalance under way)"),
            ),
            (
                "data in maintenance in the domain's pool",
                |m| m.pools[0].in_maintenance_bytes = GIB,
                Err("waiting: pool pd1/sp1 has 1.0 GiB in maintenance"),
            ),
            (
                "a rebuild in another domain's pool",
                |m| m.pools[1].pending_rebuild_bytes = GIB,
                Ok(()),
            ),
            (
                "the gateway never read",
                |m| m.health.read_ms = None,
                Err("waiting: no fresh gateway data"),
            ),
            (
                "the gateway's data stale",
                |m| m.health.health = Health::unknown("no gateway data in the last 180s"),
                Err("waiting: no fresh gateway data"),
            ),
            (
                "the MDM cluster degraded (not an MDM member: no matter)",
                |m| m.health.mdm.as_mut().unwrap().cluster_state = Some("ClusteredDegraded".into()),
                Ok(()),
            ),
        ];
        for (name, setup, want) in cases {
            let mut m = model();
            setup(&mut m);
            let got = may_disrupt(&m, "a1", &settings(1));
            assert_eq!(got, want.map_err(|w| Refusal(w.into())), "{name}");
        }
    }

    #[test]
    fn an_mdm_member_waits_for_a_normal_mdm_cluster() {
        let mut m = model();
        edit(&mut m, "a1", |n| n.persona = Persona::Secondary);
        assert_eq!(may_disrupt(&m, "a1", &settings(1)), Ok(()));
        m.health.mdm.as_mut().unwrap().cluster_state = Some("ClusteredDegraded".into());
        assert_eq!(
            may_disrupt(&m, "a1", &settings(1)),
            Err(Refusal(
                "waiting: the MDM cluster is ClusteredDegraded".into()
            ))
        );
        m.health.mdm = None;
        assert_eq!(
            may_disrupt(&m, "a1", &settings(1)),
            Err(Refusal(
                "waiting: the MDM cluster's state is not known".into()
            ))
        );
        // A tie-breaker without data is still an MDM member.
        let mut tb = Node::new("a9", "h9", Persona::Tiebreaker, 0);
        tb.phase = Phase::Running;
        m.nodes.insert("a9", tb);
        assert!(may_disrupt(&m, "a9", &settings(1)).is_err());
        // Before its cluster exists, an MDM node's reboot disturbs no cluster.
        let mut early = Node::new("a8", "h8", Persona::Primary, 0);
        early.phase = Phase::RebootPrerequisites;
        m.nodes.insert("a8", early);
        assert_eq!(may_disrupt(&m, "a8", &settings(1)), Ok(()));
    }

    #[test]
    fn a_node_without_data_may_always_be_disrupted() {
        let mut m = model();
        m.health = Default::default();
        m.pools[0].failed_bytes = GIB;
        edit(&mut m, "a2", |n| n.phase = Phase::Lost);
        let mut bare = Node::new("a9", "h9", Persona::Data, 0);
        bare.phase = Phase::RebootPrerequisites;
        m.nodes.insert("a9", bare);
        assert_eq!(may_disrupt(&m, "a9", &settings(1)), Ok(()));
        // Devices the gateway lists count as data even before the framework recorded them.
        edit(&mut m, "a9", |n| {
            n.storage = storage("pdid1", "p1", "Connected")
        });
        assert!(may_disrupt(&m, "a9", &settings(1)).is_err());
        assert_eq!(
            may_disrupt(&m, "nobody", &settings(1)),
            Err(Refusal("no node of agent nobody in the model".into()))
        );
    }

    #[test]
    fn the_domain_limit_counts_other_nodes_only() {
        let mut m = model();
        // The node itself being down does not block it (it is what is being disrupted).
        edit(&mut m, "a1", |n| n.phase = Phase::RebootFinal);
        assert_eq!(may_disrupt(&m, "a1", &settings(1)), Ok(()));
        edit(&mut m, "a2", |n| n.phase = Phase::RebootFinal);
        assert!(may_disrupt(&m, "a1", &settings(1)).is_err());
        assert_eq!(may_disrupt(&m, "a1", &settings(2)), Ok(()));
        edit(&mut m, "a3", |n| n.phase = Phase::Lost);
        assert_eq!(
            may_disrupt(&m, "a1", &settings(2)),
            Err(Refusal(
                "waiting: h2 of pd1 is not back (reboot-final) (and 1 more)".into()
            ))
        );
        assert_eq!(
            may_disrupt(&model(), "a1", &settings(0)),
            Err(Refusal(
                "waiting: no node of pd1 may be disrupted (at most 0 at once)".into()
            ))
        );
    }

    #[test]
    fn the_domain_is_the_gateways_else_the_layouts_else_the_flags() {
        let s = settings(1);
        let pools = vec![pool("pdA", "spA", "pA"), pool("pd1", "sp1", "p1")];
        let listed = Node {
            storage: storage("pdidA", "pA", "Connected"),
            ..data(1)
        };
        assert_eq!(domain_of(&listed, &pools, &s), "pdA");
        let mut declared = Node {
            storage: None,
            ..data(2)
        };
        declared
            .layout
            .sds
            .entry("pdB".into())
            .or_default()
            .insert("spB".into(), vec!["/dev/sdb".into()]);
        assert_eq!(domain_of(&declared, &pools, &s), "pdB");
        let global = Node {
            storage: None,
            ..data(3)
        };
        assert_eq!(domain_of(&global, &pools, &s), "pd1");
        // An unknown pool id falls back to the layout's name, never compared with an id.
        let unknown_pool = Node {
            storage: storage("pdidZ", "pZ", "Connected"),
            ..declared.clone()
        };
        assert_eq!(domain_of(&unknown_pool, &pools, &s), "pdB");
        // Nodes whose SDSs give domain ids are compared by them; others by names.
        let mut m = model();
        edit(&mut m, "a2", |n| {
            n.phase = Phase::RebootFinal;
            n.storage = storage("pdid9", "p1", "Connected");
        });
        assert_eq!(may_disrupt(&m, "a1", &s), Ok(()), "another domain by id");
        edit(&mut m, "a2", |n| n.storage = None);
        assert_eq!(
            may_disrupt(&m, "a1", &s),
            Err(Refusal(
                "waiting: h2 of pd1 is not back (reboot-final)".into()
            )),
            "the same domain by name"
        );
    }

    /// A node whose executor runs (waiting in its phase, or on its way).
    fn launched(mut n: Node) -> Node {
        n.task = Some(TaskRecord::new("t", "e", TaskState::Running, 0));
        n
    }

    /// Experimental mode's first install: the MDM trio (holding no data yet: every reboot
    /// comes before storage-attach) asks to reboot at once; a data node without data too.
    fn trio_at_reboot_final() -> ClusterModel {
        let mut m = model();
        m.nodes = Default::default();
        for (i, persona) in [Persona::Primary, Persona::Secondary, Persona::Tiebreaker]
            .into_iter()
            .enumerate()
        {
            let mut n = Node::new(&format!("m{i}"), &format!("mdm-{i}"), persona, 0);
            n.phase = Phase::RebootFinal;
            n.progress = Some(Phase::RebootFinal);
            m.nodes.insert(format!("m{i}"), launched(n));
        }
        let mut d = Node::new("d1", "data-1", Persona::Data, 0);
        d.phase = Phase::RebootFinal;
        m.nodes.insert("d1", launched(d));
        m
    }

    #[test]
    fn mdm_members_reboot_one_at_a_time_and_data_free_nodes_at_once() {
        let s = settings(1);
        let mut m = trio_at_reboot_final();
        // Waiting together is no disruption: each may claim.
        for a in ["m0", "m1", "m2", "d1"] {
            assert_eq!(reboot_hold(&m, a, &s), None, "{a}");
        }
        // m1 claims first: the others of the trio wait; the data node does not.
        edit(&mut m, "m1", |n| n.rebooting = true);
        let held = Some(Refusal(
            "waiting: MDM member mdm-1 is not back (reboot-final)".into(),
        ));
        assert_eq!(reboot_hold(&m, "m0", &s), held);
        assert_eq!(reboot_hold(&m, "m2", &s), held);
        assert_eq!(reboot_hold(&m, "m1", &s), None, "its own claim again");
        assert_eq!(reboot_hold(&m, "d1", &s), None);
        // Its host away, relaunched, resuming at reboot-final: still not back.
        edit(&mut m, "m1", |n| {
            n.phase = Phase::Launching;
            n.task = None;
        });
        assert!(reboot_hold(&m, "m0", &s).is_some());
        edit(&mut m, "m1", |n| n.phase = Phase::RebootFinal);
        assert!(reboot_hold(&m, "m0", &s).is_some());
        // Back (a phase after the reboot) while the gateway still sees a member missing.
        edit(&mut m, "m1", |n| {
            n.rebooting = false;
            n.phase = Phase::StorageAttach;
        });
        m.health.mdm.as_mut().unwrap().cluster_state = Some("ClusteredDegraded".into());
        assert_eq!(
            reboot_hold(&m, "m0", &s),
            Some(Refusal(
                "waiting: the MDM cluster is ClusteredDegraded".into()
            ))
        );
        m.health.mdm.as_mut().unwrap().cluster_state = Some("ClusteredNormal".into());
        assert_eq!(reboot_hold(&m, "m0", &s), None);
        // Only reboot phases are held through the plan.
        edit(&mut m, "m2", |n| n.phase = Phase::VolumeDriver);
        edit(&mut m, "m0", |n| n.rebooting = true);
        assert_eq!(reboot_hold(&m, "m2", &s), None);
    }

    #[test]
    fn a_reboot_phase_is_down_only_once_claimed_or_its_launch_ended() {
        let waiting = launched(Node {
            phase: Phase::RebootFinal,
            ..data(2)
        });
        assert_eq!(down(&waiting), None);
        assert_eq!(disruption(&waiting), None);
        let claimed = Node {
            rebooting: true,
            ..waiting.clone()
        };
        assert_eq!(
            down(&claimed).as_deref(),
            Some("is not back (reboot-final)")
        );
        // An executor that claims nothing: its launch ending there is the reboot.
        let ended = Node {
            task: None,
            ..waiting.clone()
        };
        assert_eq!(
            disruption(&ended).as_deref(),
            Some("is not back (reboot-final)")
        );
        // The last phase of an install, after every reboot: serving.
        let joining = launched(Node {
            phase: Phase::StorageAttach,
            ..data(3)
        });
        assert_eq!(disruption(&joining), None);
        // A data node asking to reboot with another of its domain claimed: held.
        let mut m = model();
        edit(&mut m, "a1", |n| {
            *n = launched(Node {
                phase: Phase::RebootFinal,
                ..n.clone()
            })
        });
        edit(&mut m, "a2", |n| *n = claimed.clone());
        assert_eq!(
            reboot_hold(&m, "a1", &settings(1)),
            Some(Refusal(
                "waiting: h2 of pd1 is not back (reboot-final)".into()
            ))
        );
        edit(&mut m, "a2", |n| *n = waiting.clone());
        assert_eq!(reboot_hold(&m, "a1", &settings(1)), None);
    }
}
