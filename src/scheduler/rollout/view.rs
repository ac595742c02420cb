//! The plan as `GET /api/plan`, the page and `/metrics` show it: what the current plan does
//! (first rollout, upgrade, target change, or nothing), and each node's steps with their
//! states. A node that has never reached a generation shows its install phases, until its
//! executor plans a walk to the target; afterwards, its day-two walk (`Node::rollout`).
//! Only nodes with something left to do are listed (at most [`NODES_MAX`], the ones that
//! need an operator first); the counts cover every node.

use crate::scheduler::model::{ClusterModel, Node, Phase, PlanKind, StepState};
use serde::Serialize;

/// The most nodes one answer lists: it stays small when a whole large cluster upgrades.
pub const NODES_MAX: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanView {
    pub kind: PlanKind,
    pub generation: u64,
    /// An operator paused the plan: what is under way finishes, nothing else starts.
    pub paused: bool,
    pub nodes: Vec<NodeSteps>,
    pub counts: StepCounts,
    /// Nodes with something left to do that `nodes` leaves out (beyond [`NODES_MAX`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub truncated: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSteps {
    pub agent_id: String,
    pub hostname: String,
    pub generation: u64,
    pub target_generation: u64,
    pub steps: Vec<StepView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepView {
    /// A day-two step's name (`upgrade-sds`) or, in a first rollout, a phase's (`packages`).
    pub step: String,
    pub state: StepState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct StepCounts {
    pub pending: usize,
    #[serde(rename = "in-progress")]
    pub in_progress: usize,
    pub waiting: usize,
    pub done: usize,
    pub failed: usize,
}

impl StepCounts {
    fn add(&mut self, state: StepState) {
        *self.slot(state) += 1;
    }

    fn slot(&mut self, state: StepState) -> &mut usize {
        match state {
            StepState::Pending => &mut self.pending,
            StepState::InProgress => &mut self.in_progress,
            StepState::Waiting => &mut self.waiting,
            StepState::Done => &mut self.done,
            StepState::Failed => &mut self.failed,
        }
    }

    /// The count of `state`.
    pub fn get(&self, state: StepState) -> usize {
        match state {
            StepState::Pending => self.pending,
            StepState::InProgress => self.in_progress,
            StepState::Waiting => self.waiting,
            StepState::Done => self.done,
            StepState::Failed => self.failed,
        }
    }
}

/// One step of a node as the model holds it (borrowed: only listed nodes are copied).
#[derive(Debug, Clone, Copy)]
struct Borrowed<'a> {
    step: &'static str,
    state: StepState,
    reason: Option<&'a str>,
}

/// What a node shows: its steps, and whether it is listed.
struct Walk<'a> {
    steps: Vec<Borrowed<'a>>,
    listed: bool,
}

/// The node has never reached a generation and has no walk to the target planned: its
/// install is what it is doing.
fn installing(n: &Node, target: u64) -> bool {
    n.generation == 0 && n.rollout.as_ref().is_none_or(|r| r.generation != target)
}

/// Has not reached `running` yet, ever (a relaunch keeps `progress`).
fn first_install(n: &Node) -> bool {
    n.generation == 0 && n.phase != Phase::Running && n.progress != Some(Phase::Running)
}

/// The install phases: done before the node's phase, that one in progress (failed, with the
/// node's error), the rest pending.
fn install_steps(n: &Node) -> Vec<Borrowed<'_>> {
    let (at, failed) = match n.phase {
        Phase::Failed => (n.progress.unwrap_or(Phase::Launching), true),
        Phase::Lost => (n.progress.unwrap_or(Phase::Launching), false),
        // A relaunched executor resumes where the last one got to.
        p => (n.progress.map_or(p, |q| q.max(p)), false),
    };
    Phase::INSTALL
        .iter()
        .map(|&p| {
            let (state, reason) = if p < at || (p == at && p == Phase::Running) {
                (StepState::Done, None)
            } else if p > at {
                (StepState::Pending, None)
            } else if failed {
                (StepState::Failed, n.last_error.as_deref())
            } else {
                (StepState::InProgress, None)
            };
            Borrowed {
                step: p.as_str(),
                state,
                reason,
            }
        })
        .collect()
}

fn walk(n: &Node, target: u64) -> Walk<'_> {
    if installing(n, target) {
        let steps = install_steps(n);
        let listed = steps.iter().any(|s| s.state != StepState::Done);
        return Walk { steps, listed };
    }
    let Some(rollout) = n.rollout.as_ref().filter(|r| r.generation == target) else {
        // Below the target with no walk planned yet: listed, its steps unknown so far.
        return Walk {
            steps: Vec::new(),
            listed: n.generation < target,
        };
    };
    let steps: Vec<Borrowed<'_>> = rollout
        .steps
        .iter()
        .map(|s| Borrowed {
            step: s.step.as_str(),
            state: s.state,
            reason: s.reason.as_deref(),
        })
        .collect();
    let listed = n.generation < target || steps.iter().any(|s| s.state != StepState::Done);
    Walk { steps, listed }
}

/// What the plan does: a change under way while a node that ran before is below the target;
/// a first rollout while a node has not reached `running` yet (or, with no change, has not
/// reached the target); else nothing.
fn kind(model: &ClusterModel) -> PlanKind {
    let target = model.target.generation;
    let change = match model.target.change {
        Some(k @ (PlanKind::Upgrade | PlanKind::TargetChange)) => Some(k),
        _ => None,
    };
    let nodes = || model.nodes.values().filter(|n| n.launchable());
    if let Some(k) = change {
        if nodes().any(|n| n.generation < target && !first_install(n)) {
            return k;
        }
    }
    if nodes().any(first_install) {
        return PlanKind::FirstRollout;
    }
    if nodes().any(|n| n.generation < target) {
        return change.unwrap_or(PlanKind::FirstRollout);
    }
    PlanKind::Idle
}

/// The operator's eye first: failed, then waiting, in progress, pending.
fn urgency(steps: &[Borrowed<'_>]) -> u8 {
    let has = |s: StepState| steps.iter().any(|b| b.state == s);
    if has(StepState::Failed) {
        0
    } else if has(StepState::Waiting) {
        1
    } else if has(StepState::InProgress) {
        2
    } else {
        3
    }
}

/// A listed node: its urgency, the node, its steps.
type Listed<'a> = (u8, &'a Node, Walk<'a>);

fn order(a: &Listed<'_>, b: &Listed<'_>) -> std::cmp::Ordering {
    (a.0, &a.1.hostname, &a.1.agent_id).cmp(&(b.0, &b.1.hostname, &b.1.agent_id))
}

fn copy(n: &Node, target: u64, steps: &[Borrowed<'_>]) -> NodeSteps {
    NodeSteps {
        agent_id: n.agent_id.to_string(),
        hostname: n.hostname.clone(),
        generation: n.generation,
        target_generation: target,
        steps: steps
            .iter()
            .map(|s| StepView {
                step: s.step.to_owned(),
                state: s.state,
                reason: s.reason.map(str::to_owned),
            })
            .collect(),
    }
}

/// The plan of `model` now.
pub fn plan_view(model: &ClusterModel) -> PlanView {
    let target = model.target.generation;
    let mut counts = StepCounts::default();
    let mut listed: Vec<Listed<'_>> = Vec::new();
    for n in model.nodes.values().filter(|n| n.launchable()) {
        let w = walk(n, target);
        for s in &w.steps {
            counts.add(s.state);
        }
        if w.listed {
            listed.push((urgency(&w.steps), n, w));
        }
    }
    let truncated = listed.len().saturating_sub(NODES_MAX);
    if truncated > 0 {
        listed.select_nth_unstable_by(NODES_MAX, order);
        listed.truncate(NODES_MAX);
    }
    listed.sort_unstable_by(order);
    PlanView {
        kind: kind(model),
        generation: target,
        paused: model.paused,
        nodes: listed
            .iter()
            .map(|(_, n, w)| copy(n, target, &w.steps))
            .collect(),
        counts,
        truncated,
    }
}

/// Every node's steps counted by state (what `plan_view` counts, without listing nodes).
pub fn step_counts(model: &ClusterModel) -> StepCounts {
    let target = model.target.generation;
    let mut counts = StepCounts::default();
    for n in model.nodes.values().filter(|n| n.launchable()) {
        for s in walk(n, target).steps {
            counts.add(s.state);
        }
    }
    counts
}

/// Nodes below the target generation.
pub fn below_target(model: &ClusterModel) -> usize {
    let target = model.target.generation;
    model
        .nodes
        .values()
        .filter(|n| n.generation < target)
        .count()
}

/// Why the step `node` asked for waits (the plan's `waiting`).
pub fn waiting_reason(node: &Node) -> Option<String> {
    node.rollout.as_ref()?.waiting()?.reason.clone()
}

/// The step of `node`'s walk to `target` an operator should see on its row: the failed one,
/// else the waiting one, with its reason.
pub fn blocked_step(node: &Node, target: u64) -> Option<(&'static str, StepState, &str)> {
    let r = node.rollout.as_ref().filter(|r| r.generation == target)?;
    let s = r.failed().or_else(|| r.waiting())?;
    Some((s.step.as_str(), s.state, s.reason.as_deref().unwrap_or("")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{NodeRollout, Persona, Step, StepStatus, Target};
    use serde_json::json;

    fn node(i: usize, phase: Phase, generation: u64) -> Node {
        let mut n = Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 0);
        n.phase = phase;
        n.progress = Some(phase).filter(|p| *p != Phase::Launching);
        n.generation = generation;
        n
    }

    fn model(target: Target, nodes: Vec<Node>) -> ClusterModel {
        let mut m = ClusterModel {
            target,
            ..Default::default()
        };
        for n in nodes {
            m.nodes.insert(n.agent_id.clone(), n);
        }
        m
    }

    fn target(generation: u64, change: PlanKind) -> Target {
        Target {
            generation,
            previous: generation - 1,
            change: Some(change),
            ..Default::default()
        }
    }

    fn status(step: Step, state: StepState, reason: Option<&str>) -> StepStatus {
        StepStatus {
            reason: reason.map(Into::into),
            state,
            ..StepStatus::pending(step)
        }
    }

    fn walking(mut n: Node, generation: u64, steps: Vec<StepStatus>) -> Node {
        n.rollout = Some(Box::new(NodeRollout {
            generation,
            steps,
            granted: None,
        }));
        n
    }

    fn states(n: &NodeSteps) -> Vec<(&str, StepState)> {
        n.steps.iter().map(|s| (s.step.as_str(), s.state)).collect()
    }

    /// The install phases of a node at `at`: done before, `state` at it, pending after.
    fn install(at: Phase, state: StepState) -> Vec<(&'static str, StepState)> {
        Phase::INSTALL
            .iter()
            .map(|&p| {
                let s = match p.cmp(&at) {
                    std::cmp::Ordering::Less => StepState::Done,
                    std::cmp::Ordering::Equal => state,
                    std::cmp::Ordering::Greater => StepState::Pending,
                };
                (p.as_str(), s)
            })
            .collect()
    }

    #[test]
    fn a_first_rollout_shows_each_unfinished_node_by_its_install_phases() {
        let mut failed = node(3, Phase::Failed, 0);
        failed.progress = Some(Phase::Devices);
        failed.last_error = Some("devices: /dev/sdb <busy>".into());
        // A relaunched executor resumes at its progress.
        let mut relaunched = node(4, Phase::Launching, 0);
        relaunched.progress = Some(Phase::Packages);
        let m = model(
            target(1, PlanKind::FirstRollout),
            vec![
                node(1, Phase::Running, 0),
                node(2, Phase::Packages, 0),
                failed,
                relaunched,
                node(5, Phase::Launching, 0),
            ],
        );
        let p = plan_view(&m);
        assert_eq!(p.kind, PlanKind::FirstRollout);
        assert_eq!(p.generation, 1);
        let hosts: Vec<&str> = p.nodes.iter().map(|n| n.hostname.as_str()).collect();
        assert_eq!(hosts, ["h3", "h2", "h4", "h5"], "failed first; h1 is done");
        assert_eq!(
            states(&p.nodes[0]),
            install(Phase::Devices, StepState::Failed)
        );
        let failed_step = p.nodes[0]
            .steps
            .iter()
            .find(|s| s.state == StepState::Failed);
        assert_eq!(
            failed_step.and_then(|s| s.reason.as_deref()),
            Some("devices: /dev/sdb <busy>")
        );
        assert_eq!(
            states(&p.nodes[1]),
            install(Phase::Packages, StepState::InProgress)
        );
        assert_eq!(states(&p.nodes[1]), states(&p.nodes[2]));
        assert_eq!(
            states(&p.nodes[3]),
            install(Phase::Launching, StepState::InProgress)
        );
        assert_eq!(
            (p.nodes[1].generation, p.nodes[1].target_generation),
            (0, 1)
        );
        // Every node counted, the finished one too.
        let n = Phase::INSTALL.len();
        let at = |phase: Phase| Phase::INSTALL.iter().position(|p| *p == phase).unwrap();
        let (pk, dv) = (at(Phase::Packages), at(Phase::Devices));
        assert_eq!(
            p.counts,
            StepCounts {
                pending: 2 * (n - pk - 1) + (n - dv - 1) + (n - 1),
                in_progress: 3,
                waiting: 0,
                done: n + 2 * pk + dv,
                failed: 1,
            }
        );
        assert_eq!(step_counts(&m), p.counts);
        assert_eq!(p.truncated, 0);
    }

    #[test]
    fn an_upgrade_shows_each_walk_with_why_a_step_waits_or_failed() {
        let t = target(2, PlanKind::Upgrade);
        let waits = "waiting: sds-2 of pd1 is rebuilding";
        let m = model(
            t,
            vec![
                walking(
                    node(1, Phase::Running, 1),
                    2,
                    vec![
                        status(Step::UpgradeLia, StepState::Done, None),
                        status(Step::UpgradeSds, StepState::Waiting, Some(waits)),
                        status(Step::UpgradeSdc, StepState::Pending, None),
                    ],
                ),
                walking(
                    node(2, Phase::Running, 1),
                    2,
                    vec![status(
                        Step::UpgradeSds,
                        StepState::Failed,
                        Some("rpm -Uvh: 1"),
                    )],
                ),
                walking(
                    node(3, Phase::Running, 2),
                    2,
                    vec![status(Step::UpgradeLia, StepState::Done, None)],
                ),
                // Its executor has not planned the walk yet; an old walk does not count.
                walking(
                    node(4, Phase::Running, 1),
                    1,
                    vec![status(Step::Reboot, StepState::Failed, Some("old"))],
                ),
                walking(
                    node(5, Phase::Running, 1),
                    2,
                    vec![status(Step::UpgradeMdm, StepState::InProgress, None)],
                ),
            ],
        );
        let p = plan_view(&m);
        assert_eq!(p.kind, PlanKind::Upgrade);
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["kind"], "upgrade");
        assert_eq!(j["generation"], 2);
        assert_eq!(
            j["nodes"][0],
            json!({"agent_id": "a2", "hostname": "h2", "generation": 1, "target_generation": 2,
                   "steps": [{"step": "upgrade-sds", "state": "failed", "reason": "rpm -Uvh: 1"}]})
        );
        assert_eq!(
            j["nodes"][1]["steps"],
            json!([{"step": "upgrade-lia", "state": "done"},
                   {"step": "upgrade-sds", "state": "waiting", "reason": waits},
                   {"step": "upgrade-sdc", "state": "pending"}])
        );
        assert_eq!(j["nodes"][2]["hostname"], "h5");
        assert_eq!(j["nodes"][3]["hostname"], "h4");
        assert_eq!(j["nodes"][3]["steps"], json!([]));
        assert_eq!(
            j["nodes"].as_array().unwrap().len(),
            4,
            "h3 is at the target"
        );
        assert_eq!(
            j["counts"],
            json!({"pending": 1, "in-progress": 1, "waiting": 1, "done": 2, "failed": 1})
        );
        assert!(j.get("truncated").is_none(), "{j}");
        assert_eq!(below_target(&m), 4);
        assert_eq!(waiting_reason(&m.nodes["a1"]).as_deref(), Some(waits));
        assert_eq!(
            blocked_step(&m.nodes["a1"], 2),
            Some(("upgrade-sds", StepState::Waiting, waits))
        );
        assert_eq!(
            blocked_step(&m.nodes["a2"], 2),
            Some(("upgrade-sds", StepState::Failed, "rpm -Uvh: 1"))
        );
        assert_eq!(blocked_step(&m.nodes["a4"], 2), None, "an old walk");
        // A target change is named as one; a new node's first install does not make it one.
        let mut m = m;
        m.target.change = Some(PlanKind::TargetChange);
        assert_eq!(plan_view(&m).kind, PlanKind::TargetChange);
        let newcomer = node(9, Phase::Packages, 0);
        let only_new = model(
            target(2, PlanKind::Upgrade),
            vec![walking(node(1, Phase::Running, 2), 2, vec![]), newcomer],
        );
        assert_eq!(plan_view(&only_new).kind, PlanKind::FirstRollout);
    }

    #[test]
    fn nothing_to_do_is_idle_and_lists_no_node() {
        assert_eq!(plan_view(&ClusterModel::default()).kind, PlanKind::Idle);
        let m = model(
            target(3, PlanKind::TargetChange),
            vec![
                walking(
                    node(1, Phase::Running, 3),
                    3,
                    vec![status(Step::VolumeDriver, StepState::Done, None)],
                ),
                node(2, Phase::Running, 3),
            ],
        );
        let p = plan_view(&m);
        assert_eq!(p.kind, PlanKind::Idle);
        assert!(p.nodes.is_empty());
        assert_eq!(p.counts.done, 1);
        assert_eq!(below_target(&m), 0);
        // The first rollout's last nodes ran but have not reached the generation yet.
        let m = model(
            target(1, PlanKind::FirstRollout),
            vec![node(1, Phase::Running, 0)],
        );
        assert_eq!(plan_view(&m).kind, PlanKind::FirstRollout);
        assert!(plan_view(&m).nodes.is_empty(), "its install is done");
    }

    #[test]
    fn a_large_upgrade_lists_a_thousand_nodes_the_failed_first() {
        let mut nodes = Vec::new();
        for i in 0..2_500 {
            let state = if i == 2_499 {
                StepState::Failed
            } else {
                StepState::Pending
            };
            let steps = vec![status(Step::UpgradeSds, state, None)];
            nodes.push(walking(node(i, Phase::Running, 1), 2, steps));
        }
        let m = model(target(2, PlanKind::Upgrade), nodes);
        let p = plan_view(&m);
        assert_eq!(p.nodes.len(), NODES_MAX);
        assert_eq!(p.truncated, 1_500);
        assert_eq!(
            p.nodes[0].hostname, "h2499",
            "the failed node is never left out"
        );
        assert_eq!((p.counts.pending, p.counts.failed), (2_499, 1));
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["truncated"], 1_500);
    }
}
