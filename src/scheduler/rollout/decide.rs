//! May a node start the day-two step it asked for now? The vendor's order across the
//! cluster first (LIA everywhere, then the MDM cluster's secondary and tie-breaker before the
//! primary, then SDSs, SDCs and the volume driver, the gateway last), then, for a disruptive
//! step, the disruption budget: on top of `health::gate` (what the gateway shows), the steps
//! granted and not yet seen back by a gateway poll count as disruptions, so that two nodes
//! of a domain are never let go between two polls.
//!
//! One pass decides every waiting ask, in agent order, each decision counting the grants
//! made before it in the pass.

use crate::scheduler::health::gate::{self, GateSettings, Refusal};
use crate::scheduler::model::{ClusterModel, Node, Persona, Phase, Step, StepState, StepStatus};
use std::sync::Arc;

/// Where a step falls in the vendor's order; a step waits while any node has an unfinished
/// step of an earlier stage.
pub fn stage(step: Step, persona: Persona) -> u8 {
    match step {
        Step::UpgradeLia => 0,
        Step::UpgradeMdm if persona == Persona::Primary => 2,
        Step::UpgradeMdm => 1,
        Step::UpgradeSds | Step::Reboot => 3,
        Step::UpgradeSdc | Step::VolumeDriver | Step::ReplaceExecutor => 4,
        Step::UpgradeGateway => 5,
    }
}

/// A step that took an SDS down whose outage no poll showed counts as back this long after
/// it ended: the MDM notices a restarted SDS within seconds, so a poll that late would show
/// it. (An MDM member's step needs a poll after it showing the cluster `ClusteredNormal`.)
pub const UNSEEN_SETTLE_MS: u64 = 60_000;

/// A poll later than the step's end has seen its node back: for a step that stops an SDS,
/// one after its outage was seen, or, when none showed it, one [`UNSEEN_SETTLE_MS`] later.
fn seen_back(s: &StepStatus, read_ms: u64) -> bool {
    let stops_sds = matches!(s.step, Step::UpgradeSds | Step::Reboot);
    s.done_ms.is_some_and(|done| {
        let wait = if s.seen_disrupted || !stops_sds {
            0
        } else {
            UNSEEN_SETTLE_MS
        };
        read_ms > done.saturating_add(wait)
    })
}

/// Why every waiting step waits while an operator has paused the plan.
pub const PAUSED: &str = "waiting: the plan is paused by an operator";

/// One waiting ask's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub agent: Arc<str>,
    pub step: Step,
    pub answer: Result<(), Refusal>,
    /// Refused on what the gateway shows (or has not shown yet): the next health poll may
    /// change the answer, so it is worth having soon.
    pub awaits_gateway: bool,
}

/// Every waiting ask of the target generation, decided.
pub fn decide_all(model: &ClusterModel, settings: &GateSettings) -> Vec<Decision> {
    let target = model.target.generation;
    let asks: Vec<(&Node, Step)> = model
        .nodes
        .values()
        .filter_map(|n| {
            let r = n.rollout.as_deref().filter(|r| r.generation == target)?;
            let s = r.waiting()?;
            Some((n, s.step))
        })
        .collect();
    if asks.is_empty() {
        return Vec::new();
    }
    let mut pass = Pass::new(model, settings);
    asks.into_iter()
        .map(|(n, step)| {
            let (answer, awaits_gateway) = match pass.decide(n, step) {
                Ok(()) => (Ok(()), false),
                Err((why, gateway)) => (Err(why), gateway),
            };
            if answer.is_ok() {
                pass.granted.push((n, step));
            }
            Decision {
                agent: n.agent_id.clone(),
                step,
                answer,
                awaits_gateway,
            }
        })
        .collect()
}

/// What one pass knows of the whole cluster, plus the grants it made so far.
struct Pass<'a> {
    model: &'a ClusterModel,
    settings: &'a GateSettings,
    /// Why nothing may start: a failed step stops the plan.
    stopped: Option<String>,
    /// The earliest stage with an unfinished step, and a node that has it.
    earliest: Option<(u8, &'a Node, Step)>,
    /// A running node that has not said what it needs for the target yet.
    unplanned: Option<&'a Node>,
    granted: Vec<(&'a Node, Step)>,
}

impl<'a> Pass<'a> {
    fn new(model: &'a ClusterModel, settings: &'a GateSettings) -> Pass<'a> {
        let target = model.target.generation;
        let mut pass = Pass {
            model,
            settings,
            stopped: None,
            earliest: None,
            unplanned: None,
            granted: Vec::new(),
        };
        if model.paused {
            pass.stopped = Some(PAUSED.into());
        }
        for n in model.nodes.values() {
            // Taken out of the storage cluster by an operator: no step is its to walk.
            if !n.launchable() {
                continue;
            }
            let walk = n.rollout.as_deref().filter(|r| r.generation == target);
            let Some(r) = walk else {
                if n.phase == Phase::Running && n.generation < target {
                    pass.unplanned.get_or_insert(n);
                }
                continue;
            };
            if let Some(f) = r.failed() {
                pass.stopped.get_or_insert_with(|| {
                    format!(
                        "waiting: {}'s {} failed ({}); an operator acts or the target changes",
                        n.hostname,
                        f.step,
                        f.reason.as_deref().unwrap_or("no reason given")
                    )
                });
            }
            for s in r.steps.iter().filter(|s| s.state != StepState::Done) {
                let st = stage(s.step, n.persona);
                if pass.earliest.is_none_or(|(e, _, _)| st < e) {
                    pass.earliest = Some((st, n, s.step));
                }
            }
        }
        pass
    }

    /// `Err` carries whether the refusal rests on the gateway's data.
    fn decide(&self, node: &Node, step: Step) -> Result<(), (Refusal, bool)> {
        let refuse = |why: String| Err((Refusal(why), false));
        if let Some(why) = &self.stopped {
            return refuse(why.clone());
        }
        if node.replacing.is_some() {
            return refuse("waiting: its executor is being replaced".into());
        }
        if let Some(other) = self.unplanned {
            return refuse(format!(
                "waiting: {} has not said what it needs for generation {} yet",
                other.hostname, self.model.target.generation
            ));
        }
        let mine = stage(step, node.persona);
        if let Some((earliest, other, theirs)) = self.earliest {
            if earliest < mine {
                return refuse(format!(
                    "waiting: {} has {theirs} to do first (the vendor's upgrade order)",
                    other.hostname
                ));
            }
        }
        if !step.disruptive() {
            return Ok(());
        }
        if let Some((why, unseen)) = self.disrupting(node, step) {
            return Err((Refusal(format!("waiting: {why}")), unseen));
        }
        gate::may_disrupt(self.model, &node.agent_id, self.settings).map_err(|r| (r, true))
    }

    /// Another node whose disruptive step keeps `node` waiting: one at a time among MDM
    /// members for a step that stops the manager; per protection domain, up to the budget.
    fn disrupting(&self, node: &Node, step: Step) -> Option<(String, bool)> {
        let read_ms = self.model.health.read_ms.unwrap_or(0);
        let stops_mdm = node.persona.is_mdm() && matches!(step, Step::UpgradeMdm | Step::Reboot);
        let mut in_domain = 0;
        let mut first = None;
        let others = self
            .model
            .nodes
            .values()
            .filter_map(|o| Some((o, self.in_flight(o, read_ms)?)));
        let just_granted = self
            .granted
            .iter()
            .map(|(o, s)| (*o, (format!("{} was just let go ({s})", o.hostname), false)));
        for (o, (why, unseen)) in others.chain(just_granted) {
            if o.agent_id == node.agent_id {
                continue;
            }
            if stops_mdm && o.persona.is_mdm() {
                return Some((format!("{why} (one MDM member at a time)"), unseen));
            }
            if gate::same_domain(node, o, self.model, self.settings) {
                in_domain += 1;
                first.get_or_insert((why, unseen));
            }
        }
        (in_domain >= self.settings.max_disrupted_per_domain).then(|| first.unwrap_or_default())
    }

    /// `o`'s disruptive step under way, or done and not seen back by a gateway poll since
    /// (then `true`: a poll answers it).
    fn in_flight(&self, o: &Node, read_ms: u64) -> Option<(String, bool)> {
        let r = o.rollout.as_deref()?;
        let target = self.model.target.generation;
        r.steps
            .iter()
            .filter(|s| r.generation == target && s.step.disruptive())
            .find_map(|s| match s.state {
                StepState::InProgress => {
                    Some((format!("{} is doing {}", o.hostname, s.step), false))
                }
                StepState::Done if !seen_back(s, read_ms) => Some((
                    format!(
                        "{} did {}; no gateway poll has seen it back yet",
                        o.hostname, s.step
                    ),
                    true,
                )),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{
        DeviceStatus, Health, MdmStatus, NodeRollout, NodeStorage, PoolCapacity, SdsStatus,
        StepStatus,
    };

    const TARGET: u64 = 2;

    fn settings() -> GateSettings {
        GateSettings {
            max_disrupted_per_domain: 1,
            default_protection_domain: "pd1".into(),
            default_pool: "sp1".into(),
        }
    }

    fn storage(pd: &str) -> Option<Arc<NodeStorage>> {
        Some(Arc::new(NodeStorage {
            sds: Some(SdsStatus {
                id: "s".into(),
                protection_domain_id: Some(pd.into()),
                mdm_connection: Some("Connected".into()),
                membership: Some("Joined".into()),
                state: Some("Normal".into()),
                maintenance: Some("NoMaintenance".into()),
            }),
            devices: vec![DeviceStatus {
                path: "/dev/sdb".into(),
                storage_pool_id: Some(format!("pool-{pd}").into()),
                ..DeviceStatus::default()
            }],
        }))
    }

    /// h1 primary, h2 secondary, h3 tie-breaker (pd1); h4-h6 data nodes (pd2); all running
    /// at generation 1, each with a walk to 2 of `steps` (its persona's part), all pending.
    fn model(steps: &[Step]) -> ClusterModel {
        let mut m = ClusterModel::default();
        m.target.generation = TARGET;
        m.health.read_ms = Some(1);
        m.health.health = Health::healthy();
        m.health.mdm = Some(MdmStatus {
            cluster_state: Some("ClusteredNormal".into()),
            ..MdmStatus::default()
        });
        for pd in ["pd1", "pd2"] {
            m.pools.push(PoolCapacity {
                protection_domain: pd.into(),
                pool: "sp".into(),
                id: format!("pool-{pd}"),
                ..PoolCapacity::default()
            });
        }
        let personas = [Persona::Primary, Persona::Secondary, Persona::Tiebreaker];
        for i in 1..=6 {
            let persona = personas.get(i - 1).copied().unwrap_or(Persona::Data);
            let mine = steps
                .iter()
                .filter(|s| persona.is_mdm() || !matches!(s, Step::UpgradeLia | Step::UpgradeMdm))
                .map(|s| StepStatus::pending(*s))
                .collect();
            let n = Node {
                phase: Phase::Running,
                generation: 1,
                attached: vec!["/dev/sdb".into()],
                storage: storage(if i <= 3 { "pd1" } else { "pd2" }),
                rollout: Some(Box::new(NodeRollout {
                    generation: TARGET,
                    steps: mine,
                    granted: None,
                })),
                ..Node::new(&format!("a{i}"), &format!("h{i}"), persona, 0)
            };
            m.nodes.insert(format!("a{i}"), n);
        }
        m
    }

    fn set(m: &mut ClusterModel, agent: &str, step: Step, state: StepState) {
        let n = m.nodes.get_mut(agent).unwrap();
        let s = n.rollout.as_mut().unwrap().step_mut(step).unwrap();
        s.state = state;
        if state == StepState::Done {
            // Done, its outage shown by a poll (see the test of an unseen one below).
            s.done_ms = Some(10);
            s.seen_disrupted = true;
        }
    }

    fn answers(m: &ClusterModel) -> Vec<(String, Result<(), String>)> {
        decide_all(m, &settings())
            .into_iter()
            .map(|d| (d.agent.to_string(), d.answer.map_err(|r| r.0)))
            .collect()
    }

    #[test]
    fn a_paused_plan_grants_nothing_and_a_step_under_way_stays_granted() {
        let mut m = model(&[Step::UpgradeSds]);
        set(&mut m, "a1", Step::UpgradeSds, StepState::InProgress);
        for a in ["a4", "a5"] {
            set(&mut m, a, Step::UpgradeSds, StepState::Waiting);
        }
        m.paused = true;
        let a = answers(&m);
        assert_eq!(a.len(), 2, "only the waiting asks are decided: {a:?}");
        for (_, answer) in &a {
            assert_eq!(answer, &Err(PAUSED.to_string()));
        }
        m.paused = false;
        assert_eq!(answers(&m)[0], ("a4".into(), Ok(())));
    }

    #[test]
    fn the_vendors_order_holds_across_nodes() {
        let mut m = model(&[Step::UpgradeLia, Step::UpgradeSds]);
        set(&mut m, "a4", Step::UpgradeSds, StepState::Waiting);
        set(&mut m, "a1", Step::UpgradeLia, StepState::Waiting);
        let a = answers(&m);
        assert_eq!(a[0], ("a1".into(), Ok(())));
        assert_eq!(
            a[1].1,
            Err("waiting: h1 has upgrade-lia to do first (the vendor's upgrade order)".into())
        );
    }

    #[test]
    fn the_primary_waits_for_the_other_managers_and_members_go_one_at_a_time() {
        let mut m = model(&[Step::UpgradeMdm]);
        for a in ["a1", "a2", "a3"] {
            set(&mut m, a, Step::UpgradeMdm, StepState::Waiting);
        }
        let a = answers(&m);
        assert!(a[0]
            .1
            .as_ref()
            .unwrap_err()
            .contains("h2 has upgrade-mdm to do first"));
        assert_eq!(a[1], ("a2".into(), Ok(())));
        assert_eq!(
            a[2].1,
            Err("waiting: h2 was just let go (upgrade-mdm) (one MDM member at a time)".into())
        );
        set(&mut m, "a2", Step::UpgradeMdm, StepState::Done);
        set(&mut m, "a3", Step::UpgradeMdm, StepState::Done);
        m.health.read_ms = Some(20);
        m.health.mdm.as_mut().unwrap().cluster_state = Some("ClusteredDegraded".into());
        let a = answers(&m);
        assert_eq!(
            a[0].1,
            Err("waiting: the MDM cluster is ClusteredDegraded".into())
        );
    }

    #[test]
    fn one_sds_of_a_domain_at_a_time_and_only_once_the_pool_has_rebuilt() {
        let mut m = model(&[Step::UpgradeSds]);
        for a in ["a1", "a2", "a3", "a4", "a5", "a6"] {
            set(&mut m, a, Step::UpgradeSds, StepState::Waiting);
        }
        let granted: Vec<String> = answers(&m)
            .into_iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(a, _)| a)
            .collect();
        assert_eq!(granted, ["a1", "a4"], "one per domain");
        set(&mut m, "a4", Step::UpgradeSds, StepState::InProgress);
        let a5 = answers(&m).into_iter().find(|(a, _)| a == "a5").unwrap();
        assert_eq!(a5.1, Err("waiting: h4 is doing upgrade-sds".into()));
        set(&mut m, "a4", Step::UpgradeSds, StepState::Done);
        let a5 = answers(&m).into_iter().find(|(a, _)| a == "a5").unwrap();
        assert!(a5
            .1
            .unwrap_err()
            .contains("no gateway poll has seen it back yet"));
        m.health.read_ms = Some(20);
        m.pools[1].pending_rebuild_bytes = 1 << 30;
        let a5 = answers(&m).into_iter().find(|(a, _)| a == "a5").unwrap();
        assert_eq!(
            a5.1,
            Err("waiting: pool pd2/sp has 1.0 GiB to rebuild".into())
        );
        m.pools[1].pending_rebuild_bytes = 0;
        let a5 = answers(&m).into_iter().find(|(a, _)| a == "a5").unwrap();
        assert_eq!(a5.1, Ok(()));
    }

    /// A poll that shows all well right after a step, before the MDM noticed the SDS go,
    /// is no proof it is back: without its outage seen, the node counts as back only a
    /// while later.
    #[test]
    fn an_outage_no_poll_showed_holds_the_domain_for_a_while() {
        let mut m = model(&[Step::UpgradeSds]);
        set(&mut m, "a4", Step::UpgradeSds, StepState::Done);
        m.nodes
            .get_mut("a4")
            .unwrap()
            .rollout
            .as_mut()
            .unwrap()
            .steps[0]
            .seen_disrupted = false;
        set(&mut m, "a5", Step::UpgradeSds, StepState::Waiting);
        m.health.read_ms = Some(20);
        let a5 = |m: &ClusterModel| answers(m).into_iter().find(|(a, _)| a == "a5").unwrap().1;
        assert!(a5(&m)
            .unwrap_err()
            .contains("no gateway poll has seen it back yet"));
        m.health.read_ms = Some(10 + UNSEEN_SETTLE_MS + 1);
        assert_eq!(a5(&m), Ok(()));
    }

    #[test]
    fn steps_that_stop_nothing_go_together() {
        let mut m = model(&[Step::UpgradeSdc]);
        for a in ["a4", "a5", "a6"] {
            set(&mut m, a, Step::UpgradeSdc, StepState::Waiting);
        }
        assert!(answers(&m).iter().all(|(_, r)| r.is_ok()));
    }

    #[test]
    fn a_failed_step_stops_the_plan_and_a_silent_node_holds_it() {
        let mut m = model(&[Step::UpgradeSdc]);
        set(&mut m, "a5", Step::UpgradeSdc, StepState::Waiting);
        {
            let n = m.nodes.get_mut("a4").unwrap();
            let s = n
                .rollout
                .as_mut()
                .unwrap()
                .step_mut(Step::UpgradeSdc)
                .unwrap();
            s.state = StepState::Failed;
            s.reason = Some("dpkg exited 1".into());
        }
        assert_eq!(
            answers(&m)[0].1,
            Err(
                "waiting: h4's upgrade-sdc failed (dpkg exited 1); an operator acts or the \
                 target changes"
                    .into()
            )
        );
        m.nodes.get_mut("a4").unwrap().rollout = None;
        assert_eq!(
            answers(&m)[0].1,
            Err("waiting: h4 has not said what it needs for generation 2 yet".into())
        );
        m.nodes.get_mut("a4").unwrap().phase = Phase::Packages;
        assert_eq!(answers(&m)[0].1, Ok(()));
        m.nodes.get_mut("a5").unwrap().replacing =
            Some(Box::new(crate::scheduler::model::Replacement {
                to_sha256: "ab".into(),
                failed: None,
            }));
        assert_eq!(
            answers(&m)[0].1,
            Err("waiting: its executor is being replaced".into())
        );
    }
}
