//! Where a node is in its install (design section 4). The executor reports the phases it
//! walks; the scheduler sets `launching`, `failed` and `lost` from Mesos status updates.
//!
//! The install path is `environment -> [reboot-prerequisites] -> packages -> devices ->
//! [cluster-init] -> volume-driver -> [reboot-final] -> storage-attach -> running`: every
//! reboot comes before `storage-attach`, where the node's disks join the pool, so a first
//! install never reboots a node that holds data (no disruption budget to ask), however many
//! nodes install at once. An executor of an earlier build walked `storage-attach` before
//! `volume-driver`; the executor's walk (`executor/src/node/machine.rs`) still ends well from
//! a phase recorded in that order.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// Ordered along the install: a later phase compares greater.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Launching,
    Environment,
    RebootPrerequisites,
    Packages,
    Devices,
    ClusterInit,
    VolumeDriver,
    RebootFinal,
    StorageAttach,
    Running,
    Failed,
    Lost,
}

impl Phase {
    pub const ALL: [Phase; 12] = [
        Phase::Launching,
        Phase::Environment,
        Phase::RebootPrerequisites,
        Phase::Packages,
        Phase::Devices,
        Phase::ClusterInit,
        Phase::VolumeDriver,
        Phase::RebootFinal,
        Phase::StorageAttach,
        Phase::Running,
        Phase::Failed,
        Phase::Lost,
    ];

    /// The install path, in order, from the launch to `running`: [`Phase::ALL`] without the
    /// two ends that are not on it (`failed`, `lost`), which it lists last.
    pub const INSTALL: &'static [Phase] = Phase::ALL.split_at(Phase::ALL.len() - 2).0;

    /// The wire name (kebab-case), as plans, reports, `/api/state` and the store spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Launching => "launching",
            Phase::Environment => "environment",
            Phase::RebootPrerequisites => "reboot-prerequisites",
            Phase::Packages => "packages",
            Phase::Devices => "devices",
            Phase::ClusterInit => "cluster-init",
            Phase::VolumeDriver => "volume-driver",
            Phase::RebootFinal => "reboot-final",
            Phase::StorageAttach => "storage-attach",
            Phase::Running => "running",
            Phase::Failed => "failed",
            Phase::Lost => "lost",
        }
    }

    /// The phase of a wire name; `None` for any other text.
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// An executor walks this phase (and may resume at it); the others are the scheduler's.
    pub fn walked_by_executor(self) -> bool {
        match self {
            Phase::Launching | Phase::Failed | Phase::Lost => false,
            Phase::Environment
            | Phase::RebootPrerequisites
            | Phase::Packages
            | Phase::Devices
            | Phase::ClusterInit
            | Phase::VolumeDriver
            | Phase::RebootFinal
            | Phase::StorageAttach
            | Phase::Running => true,
        }
    }

    /// A reboot of the host (a disruption the scheduler may hold back: the plan's
    /// `reboot_wait`).
    pub fn is_reboot(self) -> bool {
        matches!(self, Phase::RebootPrerequisites | Phase::RebootFinal)
    }

    /// Only the scheduler sets this phase: an executor's report of it is refused. (An
    /// executor does report `failed`.)
    pub fn set_by_scheduler_only(self) -> bool {
        matches!(self, Phase::Launching | Phase::Lost)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A phase by its wire name, `None` when absent or unknown: a plan from a newer scheduler
/// with a phase this build does not know still parses (the executor starts from the top).
pub fn lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Phase>, D::Error> {
    let name = Option::<std::borrow::Cow<'de, str>>::deserialize(d)?;
    Ok(name.and_then(|n| Phase::parse(&n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_follow_the_install_order() {
        for (i, p) in Phase::ALL.into_iter().enumerate() {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<Phase>(&json).unwrap(), p);
            if i > 0 {
                assert!(
                    Phase::ALL[i - 1] < p,
                    "{p} comes after {}",
                    Phase::ALL[i - 1]
                );
            }
        }
        assert_eq!(Phase::parse("dancing"), None);
        assert!(Phase::INSTALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(Phase::INSTALL.last(), Some(&Phase::Running));
        let walked: Vec<Phase> = Phase::ALL
            .into_iter()
            .filter(|p| p.walked_by_executor())
            .collect();
        assert_eq!(walked, Phase::INSTALL[1..]);
        // No reboot after the disks join the pool.
        let attach = Phase::INSTALL
            .iter()
            .position(|p| *p == Phase::StorageAttach);
        assert!(Phase::INSTALL[attach.unwrap()..]
            .iter()
            .all(|p| !p.is_reboot()));
    }

    #[test]
    fn unknown_names_are_none_when_lenient() {
        #[derive(Deserialize)]
        struct R {
            #[serde(default, deserialize_with = "lenient")]
            resume: Option<Phase>,
        }
        let r: R = serde_json::from_str(r#"{"resume":"storage-attach"}"#).unwrap();
        assert_eq!(r.resume, Some(Phase::StorageAttach));
        for json in [r#"{"resume":"bogus"}"#, r#"{"resume":null}"#, "{}"] {
            assert_eq!(
                serde_json::from_str::<R>(json).unwrap().resume,
                None,
                "{json}"
            );
        }
    }
}
