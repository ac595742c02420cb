//! Day two: how a running node walks from the generation it reached to the scheduler's
//! target generation. The executor finds the steps its host needs ([`Step`]), tells the
//! scheduler the walk (`planned`), and asks before each step (`ask`); the scheduler answers in
//! the plan (`grant`, or `waiting` with the reason), because only it sees the whole cluster:
//! the vendor's upgrade order and the disruption budget of each protection domain.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One step of a node's day-two walk. The order of the variants is the order a node walks
/// them; the cluster-wide order (the vendor's) is the scheduler's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    UpgradeLia,
    UpgradeMdm,
    UpgradeSds,
    UpgradeSdc,
    UpgradeGateway,
    /// Rewrite the volume driver's configuration and restart it.
    VolumeDriver,
    /// Reboot the host (a kernel or module that only a boot brings in).
    Reboot,
    /// The scheduler's own step: end the executor and launch the current binary.
    ReplaceExecutor,
}

impl Step {
    pub const ALL: [Step; 8] = [
        Step::UpgradeLia,
        Step::UpgradeMdm,
        Step::UpgradeSds,
        Step::UpgradeSdc,
        Step::UpgradeGateway,
        Step::VolumeDriver,
        Step::Reboot,
        Step::ReplaceExecutor,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Step::UpgradeLia => "upgrade-lia",
            Step::UpgradeMdm => "upgrade-mdm",
            Step::UpgradeSds => "upgrade-sds",
            Step::UpgradeSdc => "upgrade-sdc",
            Step::UpgradeGateway => "upgrade-gateway",
            Step::VolumeDriver => "volume-driver",
            Step::Reboot => "reboot",
            Step::ReplaceExecutor => "replace-executor",
        }
    }

    /// Stops a storage service or the host: the disruption budget decides when it runs.
    pub fn disruptive(self) -> bool {
        matches!(self, Step::UpgradeMdm | Step::UpgradeSds | Step::Reboot)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step as `/api/plan`, `/api/state` and the page show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepState {
    #[default]
    Pending,
    InProgress,
    /// Asked for and not granted yet; the reason says why.
    Waiting,
    Done,
    Failed,
}

impl StepState {
    pub const ALL: [StepState; 5] = [
        StepState::Pending,
        StepState::InProgress,
        StepState::Waiting,
        StepState::Done,
        StepState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::InProgress => "in-progress",
            StepState::Waiting => "waiting",
            StepState::Done => "done",
            StepState::Failed => "failed",
        }
    }
}

/// `POST /api/v1/executors/<id>/rollout`: one event of the node's walk toward `generation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutReport {
    pub generation: u64,
    #[serde(flatten)]
    pub event: RolloutEvent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum RolloutEvent {
    /// The steps this host needs, in the order it walks them (empty: it is there already).
    Planned {
        steps: Vec<Step>,
    },
    /// Ready for `step`; the executor waits for the plan's `grant` to name it.
    Ask {
        step: Step,
    },
    Started {
        step: Step,
    },
    Done {
        step: Step,
    },
    /// The step failed; the walk stops here until the target changes or an operator acts.
    Failed {
        step: Step,
        reason: String,
    },
    /// Every step done: the node is at `generation`.
    Reached,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_as_the_executor_sends_them() {
        let r: RolloutReport =
            serde_json::from_str(r#"{"generation":3,"event":"ask","step":"upgrade-sds"}"#).unwrap();
        assert_eq!(
            r,
            RolloutReport {
                generation: 3,
                event: RolloutEvent::Ask {
                    step: Step::UpgradeSds
                }
            }
        );
        let planned = RolloutReport {
            generation: 4,
            event: RolloutEvent::Planned {
                steps: vec![Step::UpgradeLia, Step::Reboot],
            },
        };
        let text = serde_json::to_string(&planned).unwrap();
        assert_eq!(
            text,
            r#"{"generation":4,"event":"planned","steps":["upgrade-lia","reboot"]}"#
        );
        let failed: RolloutReport = serde_json::from_str(
            r#"{"generation":4,"event":"failed","step":"reboot","reason":"no"}"#,
        )
        .unwrap();
        assert!(matches!(failed.event, RolloutEvent::Failed { .. }));
        assert!(
            serde_json::from_str::<RolloutReport>(r#"{"generation":1,"event":"dance"}"#).is_err()
        );
    }

    #[test]
    fn names_match_serde() {
        for s in Step::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        for s in StepState::ALL {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert!(Step::UpgradeSds.disruptive() && !Step::UpgradeLia.disruptive());
    }
}
