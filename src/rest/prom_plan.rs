//! The plan in `/metrics` (`storage_plan_*`, `storage_nodes_*`): steps by state
//! over every node, each state always present so that a dashboard's query never finds none,
//! and how far the cluster is from its target. Written with the health families.

use super::prom_health::{one, Family};
use crate::scheduler::model::StepState;
use crate::scheduler::rollout::view;

pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "plan_steps",
        help: "Steps of the plan by state (pending, in-progress, waiting, done, failed), over every node: install phases in a first rollout, day-two steps afterwards.",
        samples: |v, _| {
            let counts = view::step_counts(&v.model);
            let samples = StepState::ALL.iter().map(|s| {
                (
                    format!("state=\"{}\"", s.as_str()),
                    counts.get(*s).to_string(),
                )
            });
            Some(samples.collect())
        },
    },
    Family {
        name: "plan_generation",
        help: "The target generation every node walks toward (0 before the first is computed).",
        samples: |v, _| one(v.model.target.generation),
    },
    Family {
        name: "nodes_below_target",
        help: "Nodes that have not reached the target generation yet.",
        samples: |v, _| one(view::below_target(&v.model)),
    },
    Family {
        name: "plan_paused",
        help: "1 while an operator has paused the plan (what is under way finishes, nothing else starts), else 0.",
        samples: |v, _| one(u8::from(v.model.paused)),
    },
    Family {
        name: "nodes_relaunch_stopped",
        help: "Nodes whose launches failed -node.max-failures times in a row: not relaunched until an operator's retry.",
        samples: |v, _| one(v.model.nodes.values().filter(|n| n.relaunch_stopped).count()),
    },
];

#[cfg(test)]
mod tests {
    use crate::scheduler::exchange::View;
    use crate::scheduler::model::{ClusterModel, Node, Persona, Phase};

    fn text(model: ClusterModel) -> String {
        let v = View::of(model, 0);
        let mut out = String::new();
        super::super::prom_health::write(&mut out, &v, 0);
        out
    }

    #[test]
    fn every_state_has_a_sample_and_the_target_is_shown() {
        let empty = text(ClusterModel::default());
        for line in [
            "# TYPE storage_plan_steps gauge",
            "storage_plan_steps{state=\"pending\"} 0",
            "storage_plan_steps{state=\"in-progress\"} 0",
            "storage_plan_steps{state=\"waiting\"} 0",
            "storage_plan_steps{state=\"done\"} 0",
            "storage_plan_steps{state=\"failed\"} 0",
            "storage_plan_generation 0",
            "storage_nodes_below_target 0",
            "storage_plan_paused 0",
            "storage_nodes_relaunch_stopped 0",
        ] {
            assert!(empty.lines().any(|l| l == line), "{line} in\n{empty}");
        }
        let mut m = ClusterModel::default();
        m.target.generation = 1;
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        n.phase = Phase::Packages;
        m.nodes.insert(n.agent_id.clone(), n);
        let t = text(m);
        assert!(
            t.contains("storage_plan_steps{state=\"in-progress\"} 1\n"),
            "{t}"
        );
        assert!(t.contains("storage_plan_generation 1\n"), "{t}");
        assert!(t.contains("storage_nodes_below_target 1\n"), "{t}");
    }

    #[test]
    fn a_pause_and_nodes_out_of_relaunches_are_counted() {
        let mut m = ClusterModel {
            paused: true,
            ..ClusterModel::default()
        };
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        n.relaunch_stopped = true;
        m.nodes.insert(n.agent_id.clone(), n);
        let t = text(m);
        assert!(t.contains("\nstorage_plan_paused 1\n"), "{t}");
        assert!(t.contains("\nstorage_nodes_relaunch_stopped 1\n"), "{t}");
    }
}
