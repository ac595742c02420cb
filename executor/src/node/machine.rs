//! The node's walk through its phases, as pure decisions (design.md section 4):
//! `environment -> [reboot-prerequisites] -> packages -> devices -> [cluster-init] ->
//! storage-attach -> volume-driver -> [reboot-final] -> running`.
//!
//! A phase is reported when the executor enters it, before any of its work, so the phase
//! the scheduler recorded is the one to resume: every phase's work is idempotent (it checks
//! the host's state before it acts), so redoing the recorded phase redoes nothing done.

pub use storage_framework::contract::Phase;

/// Where an executor starts: the phase the node's last executor reached (the plan's
/// `resume`), or the beginning when there is none or it is not one of ours.
pub fn start(resume: Option<Phase>) -> Phase {
    resume
        .filter(|p| p.walked_by_executor())
        .unwrap_or(Phase::Environment)
}

/// What a finished phase found that decides the next one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Findings {
    /// Environment: a kernel was installed that only a reboot starts. Volume driver: the
    /// isolator was installed and the agent must restart to load it.
    pub needs_reboot: bool,
    /// The plan hands this node `scli` steps to run (experimental mode, primary MDM).
    pub cluster_init: bool,
}

/// The phase after `done`.
pub fn next(done: Phase, f: Findings) -> Phase {
    match done {
        Phase::Environment if f.needs_reboot => Phase::RebootPrerequisites,
        Phase::Environment | Phase::RebootPrerequisites => Phase::Packages,
        Phase::Packages => Phase::Devices,
        Phase::Devices if f.cluster_init => Phase::ClusterInit,
        Phase::Devices | Phase::ClusterInit => Phase::StorageAttach,
        Phase::StorageAttach => Phase::VolumeDriver,
        Phase::VolumeDriver if f.needs_reboot => Phase::RebootFinal,
        Phase::VolumeDriver | Phase::RebootFinal | Phase::Running => Phase::Running,
        // Never an executor's own phase (`start` never returns one): from the top.
        Phase::Launching | Phase::Failed | Phase::Lost => Phase::Environment,
    }
}

/// What to do about a reboot the node needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reboot {
    /// Nothing to do (not needed, or already done since it was asked for).
    Skip,
    /// `-debug=true`: no reboot; the text says what is left undone.
    Forbidden,
    /// This node runs the scheduler and others are still on their way: wait for the plan.
    Wait,
    Now,
}

pub fn reboot(needed: bool, debug: bool, wait: bool) -> Reboot {
    match (needed, debug, wait) {
        (false, _, _) => Reboot::Skip,
        (true, true, _) => Reboot::Forbidden,
        (true, false, true) => Reboot::Wait,
        (true, false, false) => Reboot::Now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The phases an executor walks, in order.
    const WALK: &[Phase] = Phase::INSTALL.split_at(1).1;

    fn walk(from: Phase, f: Findings) -> Vec<Phase> {
        let mut out = vec![from];
        let mut p = from;
        while p != Phase::Running {
            p = next(p, f);
            out.push(p);
        }
        out
    }

    #[test]
    fn a_data_node_walks_every_mandatory_phase_in_order() {
        use Phase::*;
        assert_eq!(
            walk(Environment, Findings::default()),
            [
                Environment,
                Packages,
                Devices,
                StorageAttach,
                VolumeDriver,
                Running
            ]
        );
    }

    #[test]
    fn bracketed_phases_only_when_needed() {
        use Phase::*;
        let all = Findings {
            needs_reboot: true,
            cluster_init: true,
        };
        assert_eq!(walk(Environment, all), WALK);
        assert_eq!(next(Devices, all), ClusterInit);
        assert_eq!(next(VolumeDriver, all), RebootFinal);
        assert_eq!(next(RebootFinal, Findings::default()), Running);
        assert_eq!(next(Running, all), Running);
    }

    #[test]
    fn resume_starts_at_the_recorded_phase() {
        for &p in WALK {
            assert_eq!(start(Phase::parse(p.as_str())), p);
        }
        // Nothing recorded, or a phase only the scheduler sets: from the start.
        for r in [
            None,
            Some("launching"),
            Some("failed"),
            Some("lost"),
            Some("bogus"),
        ] {
            assert_eq!(start(r.and_then(Phase::parse)), Phase::Environment, "{r:?}");
        }
        // A restart mid-install redoes only the recorded phase onwards.
        assert_eq!(
            walk(start(Phase::parse("storage-attach")), Findings::default()),
            [Phase::StorageAttach, Phase::VolumeDriver, Phase::Running]
        );
    }

    #[test]
    fn reboots_only_when_needed_never_in_debug_scheduler_last() {
        assert_eq!(reboot(false, false, false), Reboot::Skip);
        assert_eq!(reboot(false, true, true), Reboot::Skip);
        assert_eq!(reboot(true, true, false), Reboot::Forbidden);
        assert_eq!(reboot(true, false, true), Reboot::Wait);
        assert_eq!(reboot(true, false, false), Reboot::Now);
    }
}
