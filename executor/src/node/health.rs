//! A running node's host checks as pure decisions: what the node's own install left on its
//! host ([`expected`]), what one look at the host found wrong ([`findings`]), and whether the
//! scheduler has to hear of it ([`worth_sending`]). The looks themselves are `watch.rs`'s.

use super::plan::Plan;
use crate::host::services::State;
use storage_framework::contract::health::{HostCheck, HostProblem, HostReport};
use storage_framework::contract::platform::Platform;

/// The SDC's kernel module, as `/proc/modules` names it.
pub const SDC_MODULE: &str = "scini";
/// The volume driver's service.
pub const VOLUME_DRIVER_SERVICE: &str = "rexray";
/// The storage services' names, as their packages install them (the same on every platform).
pub const SDS_SERVICE: &str = "sds";
pub const MDM_SERVICE: &str = "mdm";
pub const LIA_SERVICE: &str = "lia";

/// What the node's install phases left on its host, to be found there on every look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Storage services the packages phase (SDS, and MDM on MDM nodes) and cluster-init (LIA)
    /// installed.
    pub services: Vec<&'static str>,
    /// Devices the scheduler recorded for this node's SDS.
    pub devices: Vec<String>,
    /// The volume driver's service, when the plan configures the volume driver.
    pub volume_driver: Option<&'static str>,
}

/// What the install phases of `plan` left on a host of `platform`. The volume driver runs on
/// every host past its phase (installed from the plan's URL or found installed without
/// one); on an unknown platform it is not checked.
pub fn expected(plan: &Plan, platform: Option<Platform>) -> Expected {
    let mut services = vec![SDS_SERVICE];
    if plan.is_mdm() {
        services.push(MDM_SERVICE);
        // cluster-init, experimental mode's MDM nodes only, installs the LIA.
        if plan.experimental {
            services.push(LIA_SERVICE);
        }
    }
    Expected {
        services,
        devices: plan.devices.to_vec(),
        volume_driver: platform.map(|_| VOLUME_DRIVER_SERVICE),
    }
}

/// What a service's state query said; `Err` when it could not be asked (one line).
pub type Seen = Result<State, String>;

/// One look at the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    /// Each expected service, in [`Expected::services`] order.
    pub services: Vec<(&'static str, Seen)>,
    /// `/proc/modules`, or why it could not be read.
    pub modules: Result<String, String>,
    /// The expected devices that are not there.
    pub missing_devices: Vec<String>,
    pub volume_driver: Option<(&'static str, Seen)>,
}

/// Everything `look` found wrong, sorted (so that two looks at an unchanged host compare
/// equal).
pub fn findings(look: &Look) -> HostReport {
    let mut problems = Vec::new();
    for (name, seen) in &look.services {
        if let Some(detail) = not_running(seen) {
            problems.push(HostProblem::new(HostCheck::Service, name, &detail));
        }
    }
    let module = match &look.modules {
        Ok(text) if module_loaded(text, SDC_MODULE) => None,
        Ok(_) => Some("not loaded".to_string()),
        Err(e) => Some(format!("state unknown: {}", one_line(e))),
    };
    if let Some(detail) = module {
        problems.push(HostProblem::new(HostCheck::Module, SDC_MODULE, &detail));
    }
    for d in &look.missing_devices {
        problems.push(HostProblem::new(HostCheck::Device, d, "missing"));
    }
    if let Some((name, seen)) = &look.volume_driver {
        if let Some(detail) = not_running(seen) {
            problems.push(HostProblem::new(HostCheck::VolumeDriver, name, &detail));
        }
    }
    problems.sort();
    HostReport { problems }
}

/// Whether the scheduler has to hear of `found`: the first look after `running` always,
/// then only a change from what it was last told.
pub fn worth_sending(told: Option<&HostReport>, found: &HostReport) -> bool {
    told != Some(found)
}

/// `None` when the service runs, else what was found, as one line.
fn not_running(seen: &Seen) -> Option<String> {
    match seen {
        Ok(State::Running) => None,
        Ok(State::Stopped) => Some("not running".to_string()),
        Ok(State::Unknown { query, status }) => {
            Some(format!("not running (`{query}` exited with {status})"))
        }
        Err(e) => Some(format!("state unknown: {}", one_line(e))),
    }
}

/// Whether `/proc/modules` lists module `name` (its first field, one module a line).
pub fn module_loaded(proc_modules: &str, name: &str) -> bool {
    proc_modules
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// A command's error as one short line: a reason shows one line.
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage_framework::contract::plan::PlanBody;
    use storage_framework::contract::Persona;

    const MODULES: &str = "scini 794624 0 - Live 0xffffffffc0690000 (OE)\n\
                           xfs 1212416 1 - Live 0xffffffffc0520000\n";

    fn healthy() -> Look {
        Look {
            services: vec![("sds", Ok(State::Running)), ("mdm", Ok(State::Running))],
            modules: Ok(MODULES.to_string()),
            missing_devices: Vec::new(),
            volume_driver: Some(("rexray", Ok(State::Running))),
        }
    }

    fn reasons(r: &HostReport) -> Vec<String> {
        r.problems.iter().map(HostProblem::reason).collect()
    }

    #[test]
    fn a_report_goes_out_first_and_then_only_on_a_change() {
        let sds_stopped = Look {
            services: vec![("sds", Ok(State::Stopped)), ("mdm", Ok(State::Running))],
            ..healthy()
        };
        // (look, what the scheduler hears: None = nothing sent)
        let table: [(Look, Option<Vec<&str>>); 5] = [
            (healthy(), Some(vec![])),
            (healthy(), None),
            (sds_stopped.clone(), Some(vec!["service sds: not running"])),
            (sds_stopped, None),
            (healthy(), Some(vec![])),
        ];
        let mut told: Option<HostReport> = None;
        for (i, (look, heard)) in table.into_iter().enumerate() {
            let found = findings(&look);
            let sent = worth_sending(told.as_ref(), &found).then(|| reasons(&found));
            assert_eq!(
                sent,
                heard.map(|h| h.iter().map(|s| s.to_string()).collect()),
                "look {i}"
            );
            if sent.is_some() {
                told = Some(found);
            }
        }
    }

    #[test]
    fn every_check_names_its_subject() {
        let look = Look {
            services: vec![
                ("sds", Ok(State::Running)),
                (
                    "mdm",
                    Ok(State::Unknown {
                        query: "systemctl is-active mdm".into(),
                        status: 4,
                    }),
                ),
                ("lia", Err("cannot run systemctl:\nNo such file".into())),
            ],
            modules: Ok("xfs 1212416 1 - Live 0x0\nsciniX 1 0 - Live 0x0\n".into()),
            missing_devices: vec!["/dev/sdb".into()],
            volume_driver: Some(("rexray", Ok(State::Stopped))),
        };
        assert_eq!(
            reasons(&findings(&look)),
            [
                "service lia: state unknown: cannot run systemctl: No such file",
                "service mdm: not running (`systemctl is-active mdm` exited with 4)",
                "module scini: not loaded",
                "device /dev/sdb: missing",
                "volume driver rexray: not running",
            ]
        );
        let unread = Look {
            modules: Err("cannot read /proc/modules: gone".into()),
            ..healthy()
        };
        assert_eq!(
            reasons(&findings(&unread)),
            ["module scini: state unknown: cannot read /proc/modules: gone"]
        );
        assert!(findings(&healthy()).problems.is_empty());
    }

    #[test]
    fn the_install_decides_what_is_checked() {
        let plan = |persona: Persona, experimental: bool| Plan {
            body: PlanBody {
                persona,
                experimental,
                devices: vec!["/dev/sdb".to_string()].into(),
                ..Default::default()
            },
            ..Default::default()
        };
        // (persona, experimental) -> services
        let table = [
            (Persona::Data, false, vec!["sds"]),
            (Persona::Data, true, vec!["sds"]),
            (Persona::Tiebreaker, false, vec!["sds", "mdm"]),
            (Persona::Primary, true, vec!["sds", "mdm", "lia"]),
        ];
        for (persona, experimental, services) in table {
            let e = expected(&plan(persona, experimental), Some(Platform::Rhel7));
            assert_eq!(e.services, services, "{persona:?} {experimental}");
            assert_eq!(e.devices, ["/dev/sdb"]);
            assert_eq!(e.volume_driver, Some("rexray"), "with or without its URL");
        }
        let p = plan(Persona::Data, false);
        assert_eq!(expected(&p, None).volume_driver, None);
    }

    #[test]
    fn modules_are_matched_by_their_whole_name() {
        assert!(module_loaded(MODULES, "scini"));
        assert!(!module_loaded("sciniX 1 0 - Live 0x0\n", "scini"));
        assert!(!module_loaded("", "scini"));
    }
}
