//! The declared target: everything a running node should match (the storage packages, the
//! volume driver's settings, the executor binary), hashed. A scheduler started with flags
//! that hash the same keeps the stored generation; any change starts the next one, and the
//! nodes walk to it.

use crate::hash::content_hash;
use crate::scheduler::model::{PlanKind, Target};

/// The parts of the target, each already in a canonical text form (the plan's JSON of it).
#[derive(Debug, Clone, Copy)]
pub struct Declared<'a> {
    /// The storage packages (URLs, versions, digests) of every platform.
    pub packages: &'a str,
    /// Everything else the plan's install settings declare (volume driver, gateway, pool).
    pub settings: &'a str,
    /// The SHA-256 of the executor binary served.
    pub executor_sha256: &'a str,
}

fn hex(h: u64) -> String {
    format!("{h:016x}")
}

/// The target after a start with `declared`: the stored one when nothing changed, else the
/// next generation, an `upgrade` when the packages changed.
pub fn advance(stored: &Target, declared: &Declared<'_>) -> Target {
    let packages_digest = hex(content_hash(declared.packages.as_bytes()));
    let whole = [
        declared.packages,
        declared.settings,
        declared.executor_sha256,
    ]
    .join("\n");
    let digest = hex(content_hash(whole.as_bytes()));
    if stored.generation > 0 && stored.digest == digest {
        return stored.clone();
    }
    let first = stored.generation == 0;
    Target {
        generation: stored.generation + 1,
        change: Some(if first {
            PlanKind::FirstRollout
        } else if stored.packages_digest != packages_digest {
            PlanKind::Upgrade
        } else {
            PlanKind::TargetChange
        }),
        previous: stored.generation,
        digest,
        packages_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared<'a>(packages: &'a str, exe: &'a str) -> Declared<'a> {
        Declared {
            packages,
            settings: "{}",
            executor_sha256: exe,
        }
    }

    #[test]
    fn the_same_flags_keep_the_generation_and_a_change_starts_the_next() {
        let first = advance(&Target::default(), &declared("p1", "e1"));
        assert_eq!(first.generation, 1);
        assert_eq!(first.change, Some(PlanKind::FirstRollout));
        assert_eq!(advance(&first, &declared("p1", "e1")), first);
        let upgrade = advance(&first, &declared("p2", "e1"));
        assert_eq!((upgrade.generation, upgrade.previous), (2, 1));
        assert_eq!(upgrade.change, Some(PlanKind::Upgrade));
        let exe = advance(&upgrade, &declared("p2", "e2"));
        assert_eq!(exe.generation, 3);
        assert_eq!(exe.change, Some(PlanKind::TargetChange));
    }
}
