//! The node's walk through its phases, as pure decisions (design.md section 4):
//! `environment -> [reboot-prerequisites] -> packages -> devices -> [cluster-init] ->
//! volume-driver -> [reboot-final] -> storage-attach -> running`. Every reboot comes before
//! `storage-attach`, where the node's disks join the pool: a first install reboots only nodes
//! that hold no data yet.
//!
//! A phase is reported when the executor enters it, before any of its work, so the phase
//! the scheduler recorded is the one to resume: every phase's work is idempotent (it checks
//! the host's state before it acts), so redoing the recorded phase redoes nothing done.

pub use storage_framework::contract::Phase;

/// Where an executor starts: the phase the node's last executor reached (the plan's
/// `resume`), or the beginning when there is none or it is not one of ours.
///
/// A recorded `storage-attach` resumes at `volume-driver`: an executor of an earlier build
/// walked `storage-attach` before `volume-driver`, and a record of either order looks the
/// same; redoing `volume-driver` changes nothing on a host where it is done. Every other
/// phase of the earlier order resumes as it is: `volume-driver` and `reboot-final` then lead
/// to `storage-attach`, whose handshake is already done.
pub fn start(resume: Option<Phase>) -> Phase {
    match resume.filter(|p| p.walked_by_executor()) {
        Some(Phase::StorageAttach) => Phase::VolumeDriver,
        Some(p) => p,
        None => Phase::Environment,
    }
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
        Phase::Devices | Phase::ClusterInit => Phase::VolumeDriver,
        Phase::VolumeDriver if f.needs_reboot => Phase::RebootFinal,
        Phase::VolumeDriver | Phase::RebootFinal => Phase::StorageAttach,
        Phase::StorageAttach | Phase::Running => Phase::Running,
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
    /// The scheduler holds this reboot (the plan's `reboot_wait`: the node runs the scheduler
    /// and others are on their way, or the disruption budget has no room): wait for the plan.
    Wait,
    Now,
    /// The host already rebooted for this reason and it still holds: another reboot would
    /// end the same way, on every relaunch, so the operator has to look at the host.
    Again,
}

/// What the reboot marker says about an earlier reboot for one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Earlier {
    /// None asked for.
    None,
    /// Asked for in this boot: the executor ended before the host went down.
    Pending,
    /// Asked for in an earlier boot: the host rebooted since.
    Rebooted,
}

/// The earlier reboot for `reason` the marker text records (`<phase> <boot id>` lines), seen
/// from boot `boot`. Without a boot id a recorded reboot counts as done, since a reboot still
/// to come could not be told from one behind us and guessing "to come" reboots forever.
pub fn earlier(marker: &str, reason: Phase, boot: Option<&str>) -> Earlier {
    let recorded = marker.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next()? == reason.as_str()).then(|| words.next().unwrap_or(""))
    });
    match (recorded, boot) {
        (None, _) => Earlier::None,
        (Some(id), Some(b)) if !id.is_empty() && id == b => Earlier::Pending,
        (Some(_), _) => Earlier::Rebooted,
    }
}

/// The marker text once a reboot for `reason` is asked for from boot `boot`: the other
/// reasons' lines are kept.
pub fn mark(marker: &str, reason: Phase, boot: &str) -> String {
    let mut out: String = marker
        .lines()
        .filter(|l| {
            l.trim()
                .split_once(' ')
                .is_some_and(|(p, _)| p != reason.as_str())
        })
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    out.push_str(&format!("{} {boot}\n", reason.as_str()));
    out
}

pub fn reboot(needed: bool, earlier: Earlier, debug: bool, wait: bool) -> Reboot {
    match (needed, earlier, debug, wait) {
        (false, _, _, _) => Reboot::Skip,
        (true, Earlier::Rebooted, _, _) => Reboot::Again,
        (true, _, true, _) => Reboot::Forbidden,
        (true, _, false, true) => Reboot::Wait,
        (true, _, false, false) => Reboot::Now,
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
                VolumeDriver,
                StorageAttach,
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
        assert_eq!(next(ClusterInit, all), VolumeDriver);
        assert_eq!(next(VolumeDriver, all), RebootFinal);
        assert_eq!(next(RebootFinal, Findings::default()), StorageAttach);
        assert_eq!(next(StorageAttach, all), Running);
        assert_eq!(next(Running, all), Running);
    }

    #[test]
    fn no_reboot_after_the_disks_join_the_pool() {
        for needs_reboot in [false, true] {
            for cluster_init in [false, true] {
                let f = Findings {
                    needs_reboot,
                    cluster_init,
                };
                for &from in WALK {
                    let path = walk(start(Some(from)), f);
                    let Some(attach) = path.iter().position(|p| *p == Phase::StorageAttach) else {
                        assert_eq!(path, [Phase::Running]);
                        continue;
                    };
                    assert!(
                        path[attach..].iter().all(|p| !p.is_reboot()),
                        "{path:?} reboots after storage-attach"
                    );
                }
            }
        }
    }

    /// A scheduler upgraded mid-rollout hands the new executor a phase recorded by one that
    /// walked `storage-attach -> volume-driver -> [reboot-final] -> running`: every such
    /// record still ends `running` with the volume driver done and the handshake checked.
    #[test]
    fn a_phase_recorded_in_the_earlier_order_still_ends_well() {
        use Phase::*;
        let isolator = Findings {
            needs_reboot: true,
            cluster_init: false,
        };
        // Waiting for its disks (volume driver not done yet): the volume driver first.
        assert_eq!(
            walk(start(Some(StorageAttach)), isolator),
            [VolumeDriver, RebootFinal, StorageAttach, Running]
        );
        assert_eq!(
            walk(start(Some(StorageAttach)), Findings::default()),
            [VolumeDriver, StorageAttach, Running]
        );
        // Disks attached, volume driver under way: the handshake is checked again (done).
        assert_eq!(
            walk(start(Some(VolumeDriver)), Findings::default()),
            [VolumeDriver, StorageAttach, Running]
        );
        // Rebooting for the isolator: after it, the handshake, then running.
        assert_eq!(
            walk(start(Some(RebootFinal)), Findings::default()),
            [RebootFinal, StorageAttach, Running]
        );
    }

    #[test]
    fn resume_starts_at_the_recorded_phase() {
        for &p in WALK.iter().filter(|p| **p != Phase::StorageAttach) {
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
            walk(start(Phase::parse("volume-driver")), Findings::default()),
            [Phase::VolumeDriver, Phase::StorageAttach, Phase::Running]
        );
    }

    #[test]
    fn reboots_only_when_needed_never_twice_never_in_debug_scheduler_last() {
        use Earlier::*;
        // (needed, earlier, debug, wait) -> decision
        let table = [
            (false, None, false, false, Reboot::Skip),
            (false, None, true, true, Reboot::Skip),
            (false, Rebooted, false, false, Reboot::Skip),
            (true, None, true, false, Reboot::Forbidden),
            (true, None, false, true, Reboot::Wait),
            (true, None, false, false, Reboot::Now),
            (true, Pending, false, false, Reboot::Now),
            (true, Pending, false, true, Reboot::Wait),
            (true, Rebooted, false, false, Reboot::Again),
            (true, Rebooted, false, true, Reboot::Again),
            (true, Rebooted, true, false, Reboot::Again),
        ];
        for (needed, e, debug, wait, want) in table {
            assert_eq!(
                reboot(needed, e, debug, wait),
                want,
                "{needed} {e:?} {debug} {wait}"
            );
        }
    }

    #[test]
    fn the_marker_tells_each_reason_s_reboot_apart_by_boot() {
        use Phase::{RebootFinal as F, RebootPrerequisites as P};
        let both = "reboot-prerequisites b1\nreboot-final b2\n";
        // (marker, reason, current boot) -> earlier
        let table = [
            ("", P, Some("b1"), Earlier::None),
            ("reboot-final b1\n", P, Some("b1"), Earlier::None),
            ("reboot-prerequisites b1\n", P, Some("b1"), Earlier::Pending),
            (
                "reboot-prerequisites b1\n",
                P,
                Some("b2"),
                Earlier::Rebooted,
            ),
            (both, P, Some("b2"), Earlier::Rebooted),
            (both, F, Some("b2"), Earlier::Pending),
            // A bare boot id (no reason) guards nothing.
            ("b1\n", P, Some("b2"), Earlier::None),
            // No boot id, now or then: counted as rebooted rather than rebooting forever.
            ("reboot-prerequisites b1\n", P, None, Earlier::Rebooted),
            ("reboot-prerequisites \n", P, Some("b1"), Earlier::Rebooted),
        ];
        for (marker, reason, boot, want) in table {
            assert_eq!(
                earlier(marker, reason, boot),
                want,
                "{marker:?} {reason} {boot:?}"
            );
        }
        let m = mark("", P, "b1");
        assert_eq!(m, "reboot-prerequisites b1\n");
        let m = mark(&m, F, "b2");
        assert_eq!(m, both);
        assert_eq!(
            mark(&m, P, "b3"),
            "reboot-final b2\nreboot-prerequisites b3\n"
        );
        assert_eq!(
            earlier(&mark("b0\n", P, "b1"), P, Some("b1")),
            Earlier::Pending
        );
    }
}
