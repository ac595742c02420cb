//! Pure: which day-two steps a running host needs to match its plan, decided from facts
//! gathered once per walk (`rollout.rs` gathers them and walks the steps). A step is
//! needed only for what the host shows differing from the plan, so a walk started again
//! (after a refused report, a restart, a reboot) plans nothing that is already done.

use super::cluster::GATEWAY_SERVICE;
use super::health::{LIA_SERVICE, MDM_SERVICE, SDC_MODULE, SDS_SERVICE};
use super::machine::Earlier;
use super::plan::Plan;
use crate::host::packages;
use storage_framework::contract::platform::Component;
use storage_framework::contract::rollout::Step;

/// One storage package as the host has it and as the plan wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFact {
    pub component: Component,
    /// The version the plan's package file carries.
    pub wanted: String,
    /// What the package database shows (`None`: not installed).
    pub installed: Option<String>,
}

/// The kernel the platform's rule asks for, against the running one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFact {
    pub running: String,
    pub wanted: String,
    /// The wanted kernel's image package is installed: only a reboot is missing.
    pub image_installed: bool,
}

/// Everything the walk looks at, once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The storage packages of this persona that the plan gives a file for.
    pub packages: Vec<PackageFact>,
    /// The volume driver's configuration as the host has it (`None`: no file) and as the
    /// plan would write it now; `None` altogether when the plan configures no volume driver.
    pub volume_driver: Option<(Option<String>, String)>,
    /// `None` when the platform ships the kernel the storage client needs.
    pub kernel: Option<KernelFact>,
}

/// The storage components the install phases put on a node of `plan`'s persona: the
/// `packages` phase's, and on MDM nodes of experimental mode `cluster-init`'s LIA and gateway.
pub fn components(plan: &Plan) -> &'static [Component] {
    use Component::*;
    match (plan.is_mdm(), plan.experimental) {
        (true, true) => &[Mdm, Sds, Sdc, Lia, Gateway],
        (true, false) => &[Mdm, Sds, Sdc],
        (false, _) => &[Sds, Sdc],
    }
}

/// The step that brings component `c` to the plan's version.
pub fn upgrade_step(c: Component) -> Step {
    match c {
        Component::Lia => Step::UpgradeLia,
        Component::Mdm => Step::UpgradeMdm,
        Component::Sds => Step::UpgradeSds,
        Component::Sdc => Step::UpgradeSdc,
        Component::Gateway => Step::UpgradeGateway,
    }
}

/// The component an upgrade step installs.
pub fn component_of(step: Step) -> Option<Component> {
    Component::ALL
        .into_iter()
        .find(|&c| upgrade_step(c) == step)
}

/// The service component `c`'s package runs (the SDC's is its kernel module's).
pub fn service_of(c: Component) -> &'static str {
    match c {
        Component::Mdm => MDM_SERVICE,
        Component::Sds => SDS_SERVICE,
        Component::Sdc => SDC_MODULE,
        Component::Lia => LIA_SERVICE,
        Component::Gateway => GATEWAY_SERVICE,
    }
}

/// The steps `f` shows the host needs, in the order a node walks them.
pub fn needed(f: &HostFacts) -> Vec<Step> {
    let mut steps: Vec<Step> = f
        .packages
        .iter()
        .filter(|p| {
            !p.installed
                .as_deref()
                .is_some_and(|v| packages::same_version(v, &p.wanted))
        })
        .map(|p| upgrade_step(p.component))
        .collect();
    if let Some((on_host, wanted)) = &f.volume_driver {
        if on_host.as_deref() != Some(wanted.as_str()) {
            steps.push(Step::VolumeDriver);
        }
    }
    if f.kernel
        .as_ref()
        .is_some_and(|k| k.running != k.wanted && k.image_installed)
    {
        steps.push(Step::Reboot);
    }
    steps.sort();
    steps.dedup();
    steps
}

/// `text` as one line (a failed step's reason), bounded.
pub fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(1000).collect()
}

/// The day-two reboot marker's text: the generation whose walk asked for the reboot, and
/// the boot it was asked from.
pub fn reboot_mark(generation: u64, boot: &str) -> String {
    format!("{generation} {boot}\n")
}

/// What the marker says of a day-two reboot seen from boot `boot`: the generation it was
/// for and whether the host has rebooted since. Without a boot id a recorded reboot counts
/// as done (as for the install phases' reboots: guessing "to come" would reboot forever).
pub fn earlier_reboot(marker: &str, boot: Option<&str>) -> Option<(u64, Earlier)> {
    let mut words = marker.split_whitespace();
    let generation = words.next()?.parse().ok()?;
    let asked_from = words.next().unwrap_or("");
    let earlier = match boot {
        Some(b) if !asked_from.is_empty() && asked_from == b => Earlier::Pending,
        _ => Earlier::Rebooted,
    };
    Some((generation, earlier))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(c: Component, installed: Option<&str>, wanted: &str) -> PackageFact {
        PackageFact {
            component: c,
            wanted: wanted.into(),
            installed: installed.map(str::to_string),
        }
    }

    fn plan(json: &str) -> Plan {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_host_that_matches_needs_nothing() {
        let f = HostFacts {
            packages: vec![
                pkg(Component::Sds, Some("2.0-12000.122"), "2.0-12000.122"),
                // The database's spelling of the same version.
                pkg(Component::Sdc, Some("2.0.12000.122"), "2.0-12000.122"),
            ],
            volume_driver: Some((Some("a: 1\n".into()), "a: 1\n".into())),
            kernel: Some(KernelFact {
                running: "4.4.0-38-generic".into(),
                wanted: "4.4.0-38-generic".into(),
                image_installed: true,
            }),
        };
        assert_eq!(needed(&f), []);
        assert_eq!(needed(&HostFacts::default()), []);
    }

    #[test]
    fn each_difference_is_its_step_in_the_walk_s_order() {
        let f = HostFacts {
            packages: vec![
                pkg(Component::Mdm, Some("2.0-10000.2072"), "2.0-12000.122"),
                pkg(Component::Sds, Some("2.0-10000.2072"), "2.0-12000.122"),
                pkg(Component::Sdc, Some("2.0-12000.122"), "2.0-12000.122"),
                pkg(Component::Lia, None, "2.0-12000.122"),
                pkg(Component::Gateway, Some("2.0-10000.2072"), "2.0-12000.122"),
            ],
            volume_driver: Some((None, "a: 1\n".into())),
            kernel: Some(KernelFact {
                running: "3.13.0-170-generic".into(),
                wanted: "4.4.0-38-generic".into(),
                image_installed: true,
            }),
        };
        assert_eq!(
            needed(&f),
            [
                Step::UpgradeLia,
                Step::UpgradeMdm,
                Step::UpgradeSds,
                Step::UpgradeGateway,
                Step::VolumeDriver,
                Step::Reboot
            ]
        );
        // A changed file is rewritten; a kernel whose image is not installed is no reboot's.
        let f = HostFacts {
            volume_driver: Some((Some("a: 0\n".into()), "a: 1\n".into())),
            kernel: Some(KernelFact {
                image_installed: false,
                ..f.kernel.clone().unwrap()
            }),
            ..HostFacts::default()
        };
        assert_eq!(needed(&f), [Step::VolumeDriver]);
    }

    #[test]
    fn components_follow_the_persona_and_the_mode() {
        use Component::*;
        let data = plan(r#"{"version":1,"persona":"data"}"#);
        assert_eq!(components(&data), [Sds, Sdc]);
        let mdm = plan(r#"{"version":1,"persona":"primary"}"#);
        assert_eq!(components(&mdm), [Mdm, Sds, Sdc]);
        let exp = plan(r#"{"version":1,"persona":"tiebreaker","experimental":true}"#);
        assert_eq!(components(&exp), [Mdm, Sds, Sdc, Lia, Gateway]);
        for c in Component::ALL {
            assert_eq!(component_of(upgrade_step(c)), Some(c));
        }
        assert_eq!(component_of(Step::Reboot), None);
        assert_eq!(service_of(Sdc), "scini");
        assert_eq!(service_of(Gateway), "scaleio-gateway");
    }

    #[test]
    fn the_reboot_marker_tells_a_reboot_behind_from_one_to_come() {
        let m = reboot_mark(4, "b1");
        assert_eq!(m, "4 b1\n");
        assert_eq!(earlier_reboot(&m, Some("b1")), Some((4, Earlier::Pending)));
        assert_eq!(earlier_reboot(&m, Some("b2")), Some((4, Earlier::Rebooted)));
        assert_eq!(earlier_reboot(&m, None), Some((4, Earlier::Rebooted)));
        assert_eq!(earlier_reboot("", Some("b1")), None);
        assert_eq!(earlier_reboot("x b1", Some("b1")), None);
    }
}
