//! Day two: a running node walks to the scheduler's target generation (`contract::rollout`).
//! Once per plan cycle ([`Node::follow_target`], from the watch loop): when the plan's target
//! generation is ahead of the node's, the host's facts are gathered once, the steps they
//! show (`steps.rs`) are reported `planned`, and each step is asked for, started when the
//! plan's `grant` names it, done, checked and reported. The watch loop's long poll is the
//! wait for a grant, so the host checks go on while the node waits.
//!
//! A report the scheduler refuses (409: its generation moved, or the walk does not fit its
//! record) starts the walk again from what the host shows, which redoes nothing done; so
//! does a moved target. A failed step ends the walk until the target moves.

use super::api::ApiError;
use super::machine::Earlier;
use super::steps::{self, HostFacts, KernelFact, PackageFact};
use super::{install, volume, volume_driver, Node, NEEDS_CONFIGURATION};
use crate::host::packages;
use crate::host::services::Service;
use storage_framework::contract::api::Action;
use storage_framework::contract::platform::{profile, Component, DriverPackage, Platform};
use storage_framework::contract::rollout::{RolloutEvent, RolloutReport, Step};

/// Where the executor notes the day-two reboot it asks for (`<generation> <boot id>`): apart
/// from the install phases' marker, which `running` clears on the new boot before the walk
/// could read it.
const REBOOT_MARKER: &str = "/var/lib/storage-executor/rollout-reboot";
/// Refused reports that start the walk again within one plan cycle; more wait for the next.
const RESTARTS_PER_CYCLE: usize = 3;

/// Where the walk toward one target generation stands.
#[derive(Debug, Default)]
pub struct Walk {
    /// The target generation the steps lead to (0: none planned).
    target: u64,
    steps: Vec<Step>,
    /// The index of the next step in `steps`.
    next: usize,
    /// The next step was asked for; the plan's grant starts it.
    asked: bool,
    /// The waiting reason last logged.
    waiting: Option<String>,
    /// Reached, or a step failed: nothing more until the target moves.
    ended: bool,
    /// Why the host's facts could not be gathered, last logged.
    unplanned: Option<String>,
}

impl Node {
    /// One plan cycle of the walk toward the plan's target generation. `Err` (logged) only
    /// when the scheduler refuses this executor, which ends the watch.
    pub fn follow_target(&mut self) -> Result<(), ApiError> {
        let result = self.restarting_walk();
        if let Err(e) = &result {
            log::warn!(
                "node {}: the walk ends, the scheduler refused this executor: {e}",
                self.plan.hostname
            );
        }
        result
    }

    /// Nothing to walk now: at the target, or ended (reached, or a failed step) until the
    /// target moves. Else the walk waits seconds for a grant.
    pub(super) fn walk_settled(&self) -> bool {
        self.plan.target_generation <= self.plan.generation || self.walk.ended
    }

    fn restarting_walk(&mut self) -> Result<(), ApiError> {
        for _ in 0..RESTARTS_PER_CYCLE {
            match self.walk_on() {
                Err(ApiError::Conflict(why)) => {
                    log::info!(
                        "node {}: rollout report refused ({why}); starting the walk again \
                         from what the host shows",
                        self.plan.hostname
                    );
                    self.walk = Walk::default();
                    self.fetch_plan(None)?;
                }
                other => return other,
            }
        }
        Ok(())
    }

    fn walk_on(&mut self) -> Result<(), ApiError> {
        let target = self.plan.target_generation;
        if target <= self.plan.generation {
            self.walk = Walk::default();
            return Ok(());
        }
        if self.walk.target != target {
            if self.walk.target != 0 {
                log::info!(
                    "node {}: the target moved from generation {} to {target}; walking again",
                    self.plan.hostname,
                    self.walk.target
                );
            }
            let unplanned = self.walk.unplanned.take();
            self.walk = Walk {
                unplanned,
                ..Walk::default()
            };
            self.plan_walk(target)?;
        }
        while !self.walk.ended && self.walk.target == target {
            let Some(&step) = self.walk.steps.get(self.walk.next) else {
                self.send(target, RolloutEvent::Reached)?;
                log::info!(
                    "node {}: at generation {target}: every step done",
                    self.plan.hostname
                );
                self.walk.ended = true;
                break;
            };
            if step == Step::Reboot && self.rebooted_for(target) {
                let reason = self.reboot_in_vain(target);
                return self.fail(target, step, reason);
            }
            if !self.walk.asked {
                self.send(target, RolloutEvent::Ask { step })?;
                self.walk.asked = true;
                // The plan held now predates the ask: its grant comes with a later one.
                break;
            }
            if self.plan.grant != Some(step) {
                self.log_waiting(step);
                break;
            }
            self.take_step(target, step)?;
        }
        Ok(())
    }

    /// Gathers the host's facts and reports the steps they show (the walk stays unplanned,
    /// for the next cycle, when they cannot be gathered).
    fn plan_walk(&mut self, target: u64) -> Result<(), ApiError> {
        let host = self.plan.hostname.clone();
        let facts = match self.gather() {
            Ok(f) => f,
            Err(e) => {
                if self.walk.unplanned.as_ref() != Some(&e) {
                    log::warn!("node {host}: cannot plan the walk to generation {target}: {e}");
                }
                self.walk.unplanned = Some(e);
                return Ok(());
            }
        };
        let steps = steps::needed(&facts);
        self.walk = Walk {
            target,
            steps: steps.clone(),
            ..Walk::default()
        };
        if self.after_reboot(target, &steps)? {
            return Ok(());
        }
        self.send(
            target,
            RolloutEvent::Planned {
                steps: steps.clone(),
            },
        )?;
        if steps.is_empty() {
            log::info!("node {host}: at generation {target} already: nothing to do");
            self.walk.ended = true;
            return Ok(());
        }
        let names: Vec<&str> = steps.iter().map(|s| s.as_str()).collect();
        log::info!(
            "node {host}: walking to generation {target}: {}",
            names.join(", ")
        );
        Ok(())
    }

    /// Why a second reboot for one walk is refused: another would end the same way.
    fn reboot_in_vain(&self, target: u64) -> String {
        let kernel = self.facts.kernel().unwrap_or_else(|_| "unknown".into());
        format!(
            "the host rebooted once for generation {target} and kernel {kernel} still runs \
             (the boot loader default is {}); not rebooting again: fix the boot loader, then \
             reboot the host by hand",
            self.facts.boot_loader_default()
        )
    }

    /// Whether the marker shows this walk's reboot behind us.
    fn rebooted_for(&self, target: u64) -> bool {
        let marker = self.facts.read(REBOOT_MARKER).unwrap_or_default();
        let boot = self.facts.boot_id();
        steps::earlier_reboot(&marker, boot.as_deref()) == Some((target, Earlier::Rebooted))
    }

    /// On the boot after the walk's reboot, which the host no longer needs: tells the
    /// scheduler it is done (and the generation reached when nothing else is left) rather
    /// than planning anew. True when that finished the planning.
    fn after_reboot(&mut self, target: u64, needed: &[Step]) -> Result<bool, ApiError> {
        let marker = self.facts.path(REBOOT_MARKER);
        if !marker.exists() || needed.contains(&Step::Reboot) {
            return Ok(false);
        }
        let rebooted = self.rebooted_for(target);
        // A marker of another generation or boot is stale, and this one is now told.
        let _ = std::fs::remove_file(&marker);
        if !rebooted {
            return Ok(false);
        }
        log::info!(
            "node {}: rebooted for generation {target}",
            self.plan.hostname
        );
        self.send(target, RolloutEvent::Done { step: Step::Reboot })?;
        if !needed.is_empty() {
            return Ok(false);
        }
        self.walk.ended = true;
        self.send(target, RolloutEvent::Reached)?;
        log::info!(
            "node {}: at generation {target}: every step done",
            self.plan.hostname
        );
        Ok(true)
    }

    /// Starts the granted `step`, does it, checks it and reports how it ended.
    fn take_step(&mut self, target: u64, step: Step) -> Result<(), ApiError> {
        self.send(target, RolloutEvent::Started { step })?;
        log::info!("node {}: {step} (generation {target})", self.plan.hostname);
        match self.perform(target, step) {
            Ok(()) => {
                self.send(target, RolloutEvent::Done { step })?;
                log::info!("node {}: {step} done", self.plan.hostname);
                self.walk.next += 1;
                self.walk.asked = false;
                self.walk.waiting = None;
                Ok(())
            }
            Err(e) => {
                let reason = steps::one_line(e.trim_start_matches(NEEDS_CONFIGURATION));
                self.fail(target, step, reason)
            }
        }
    }

    fn fail(&mut self, target: u64, step: Step, reason: String) -> Result<(), ApiError> {
        log::error!(
            "node {}: {step} failed: {reason}; no further step until the target moves",
            self.plan.hostname
        );
        self.walk.ended = true;
        self.send(target, RolloutEvent::Failed { step, reason })
    }

    fn log_waiting(&mut self, step: Step) {
        if self.plan.waiting == self.walk.waiting {
            return;
        }
        self.walk.waiting = self.plan.waiting.clone();
        if let Some(why) = &self.walk.waiting {
            log::info!("node {}: {step} {why}", self.plan.hostname);
        }
    }

    fn send(&mut self, target: u64, event: RolloutEvent) -> Result<(), ApiError> {
        let report = RolloutReport {
            generation: target,
            event,
        };
        self.api.report(Action::Rollout, &report).map(drop)
    }

    /// What the walk compares with the plan: one package query per storage component the
    /// plan gives a file for, the volume driver's file, the kernel.
    fn gather(&mut self) -> Result<HostFacts, String> {
        let platform = self.platform()?;
        let mut facts = HostFacts::default();
        for &c in steps::components(&self.plan) {
            let Some(download) = self.plan.install.package(platform, c) else {
                continue;
            };
            let name = c.package(platform);
            let wanted = install::wanted_version(name, &download.url)?;
            let installed = packages::installed_version(self.runner.as_mut(), platform, name)
                .map_err(|e| e.to_string())?;
            facts.packages.push(PackageFact {
                component: c,
                wanted,
                installed,
            });
        }
        let driver = &self.plan.install.volume_driver;
        if driver.download(platform, DriverPackage::Rexray).is_some() {
            let wanted = self.rexray_config_text()?;
            let on_host = std::fs::read_to_string(self.facts.path(volume::REXRAY_CONFIG)).ok();
            facts.volume_driver = Some((on_host, wanted));
        }
        if let Some(rule) = &profile(platform).kernel {
            let running = self.facts.kernel()?;
            let image_installed = running == rule.release
                || packages::installed_version(self.runner.as_mut(), platform, rule.package)
                    .map_err(|e| e.to_string())?
                    .is_some();
            facts.kernel = Some(KernelFact {
                running,
                wanted: rule.release.to_string(),
                image_installed,
            });
        }
        Ok(facts)
    }

    fn perform(&mut self, target: u64, step: Step) -> Result<(), String> {
        let platform = self.platform()?;
        match step {
            Step::VolumeDriver => self.rewrite_volume_driver(platform),
            Step::Reboot => self.reboot_for(target),
            Step::ReplaceExecutor => Err("replace-executor is the scheduler's step".into()),
            _ => match steps::component_of(step) {
                Some(c) => self.upgrade(platform, c),
                None => Err(format!("{step} is no step of the executor")),
            },
        }
    }

    /// Installs component `c` at the plan's version through the install phases' own helper,
    /// then checks that its service runs.
    fn upgrade(&mut self, platform: Platform, c: Component) -> Result<(), String> {
        self.install_component(platform, c)?;
        if c == Component::Gateway {
            // A new gateway package may bring its own properties file.
            let ips = self.plan.cluster_init.as_ref().map(|ci| ci.mdm_ips.clone());
            if let Some(ips) = ips.filter(|ips| ips.len() == 2) {
                self.point_gateway_at_mdms(platform, &ips)?;
            }
        }
        let service = steps::service_of(c);
        Service::new(platform, service)
            .check_running(self.runner.as_mut())
            .map_err(|e| {
                format!(
                    "{} is at the plan's version but {service} does not run: {e}",
                    c.package(platform)
                )
            })
    }

    /// Writes REX-Ray's configuration as the plan has it and restarts REX-Ray, as the
    /// volume-driver phase does.
    fn rewrite_volume_driver(&mut self, platform: Platform) -> Result<(), String> {
        self.write_rexray_config()?;
        let r = self.runner.as_mut();
        volume_driver::ensure_rexray_runs(r, platform, true, &self.plan.hostname)?;
        Service::new(platform, super::health::VOLUME_DRIVER_SERVICE)
            .check_running(self.runner.as_mut())
            .map_err(|e| format!("REX-Ray does not run after its restart: {e}"))
    }

    /// Reboots through the install phases' path; the new boot's executor reports it done.
    fn reboot_for(&mut self, target: u64) -> Result<(), String> {
        if self.plan.install.debug {
            return Err("-debug=true forbids reboots: reboot the host by hand".into());
        }
        let boot = self.facts.boot_id().unwrap_or_default();
        let text = steps::reboot_mark(target, &boot);
        volume::write_if_changed(&self.facts.path(REBOOT_MARKER), &text, 0o600)?;
        self.shutdown(&format!("walk to generation {target}"))
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::{Recorded, Scheduler};
    use super::super::plan::Plan;
    use super::*;
    use crate::host::commands::Cmd;
    use crate::host::facts::Facts;
    use crate::host::scripted::Scripted;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    const OLD: &str = "2.0-10000.2072.el7";
    const NEW: &str = "2.0-12000.122.el7";
    const WAITING: &str = "waiting: sds-2 of pd1 is rebuilding";

    /// The scheduler's side, as far as the walk sees it: the plan and the node's record.
    #[derive(Default)]
    struct Record {
        plan: Plan,
        /// Every rollout report, `<generation> <event> [<step>]`, refused ones too.
        reports: Vec<String>,
        /// Rollout reports (by index) answered 409.
        conflicts: Vec<usize>,
        /// Plan fetches left; then the scheduler refuses the executor, ending the watch.
        fetches: usize,
        /// Plan fetches an ask waits (with [`WAITING`]) before its grant.
        hold: usize,
        /// The reasons of failed steps.
        reasons: Vec<String>,
        /// Moves the target to the next generation at this many fetches left.
        move_at: Option<usize>,
    }

    impl Record {
        fn apply(&mut self, r: &RolloutReport) -> Result<(), ApiError> {
            let p = &mut self.plan.body;
            let refuse = |why: &str| Err(ApiError::Conflict(format!("409: {why}")));
            if r.generation != p.target_generation {
                return refuse("not the target's generation");
            }
            match &r.event {
                RolloutEvent::Planned { steps } if steps.is_empty() => p.generation = r.generation,
                RolloutEvent::Ask { step } if self.hold == 0 => p.grant = Some(*step),
                RolloutEvent::Ask { .. } => p.waiting = Some(WAITING.into()),
                RolloutEvent::Started { step } if p.grant != Some(*step) => {
                    return refuse("not granted")
                }
                RolloutEvent::Done { .. } => p.grant = None,
                RolloutEvent::Failed { reason, .. } => {
                    p.grant = None;
                    self.reasons.push(reason.clone());
                }
                RolloutEvent::Reached => p.generation = r.generation,
                _ => {}
            }
            self.plan.version += 1;
            Ok(())
        }
    }

    struct Fake(Arc<Mutex<Record>>);

    impl Scheduler for Fake {
        fn plan_after(&mut self, _: Option<u64>) -> Result<Option<Plan>, ApiError> {
            let mut r = self.0.lock().unwrap();
            if r.fetches == 0 {
                return Err(ApiError::Refused("the test is over".into()));
            }
            r.fetches -= 1;
            if r.move_at == Some(r.fetches) {
                r.plan.body.target_generation += 1;
                r.plan.body.grant = None;
                r.plan.body.waiting = None;
                r.plan.version += 1;
            }
            if r.plan.waiting.is_some() {
                r.hold = r.hold.saturating_sub(1);
                if r.hold == 0 {
                    let asked = r.reports.last().and_then(|l| l.strip_prefix("2 ask "));
                    let step = asked.and_then(|s| serde_json::from_str(&format!("\"{s}\"")).ok());
                    r.plan.body.waiting = None;
                    r.plan.body.grant = step;
                    r.plan.version += 1;
                }
            }
            Ok(Some(r.plan.clone()))
        }

        fn post_json(&mut self, action: Action, body: &str) -> Result<Recorded, ApiError> {
            if action != Action::Rollout {
                return Ok(Recorded::default());
            }
            let report: RolloutReport = serde_json::from_str(body).unwrap();
            let mut r = self.0.lock().unwrap();
            let step = match &report.event {
                RolloutEvent::Planned { steps } => format!(" {steps:?}"),
                RolloutEvent::Ask { step }
                | RolloutEvent::Started { step }
                | RolloutEvent::Done { step }
                | RolloutEvent::Failed { step, .. } => format!(" {step}"),
                RolloutEvent::Reached => String::new(),
            };
            let event = serde_json::to_value(&report).unwrap()["event"].clone();
            let n = r.reports.len();
            let line = format!("{} {}{step}", report.generation, event.as_str().unwrap());
            r.reports.push(line);
            if r.conflicts.contains(&n) {
                return Err(ApiError::Conflict("409: the record moved".into()));
            }
            r.apply(&report).map(|()| Recorded::default())
        }
    }

    /// The host: its package database, stopped services, every command.
    #[derive(Default)]
    struct Host {
        installed: BTreeMap<String, String>,
        stopped: Vec<String>,
        /// Installing this package exits 1.
        broken: Option<&'static str>,
        ran: Vec<String>,
    }

    fn answer(host: &Mutex<Host>, cmd: &Cmd) -> (i32, String) {
        let mut h = host.lock().unwrap();
        h.ran.push(cmd.display());
        let args: Vec<&str> = cmd.args.iter().map(String::as_str).collect();
        match (cmd.program.as_str(), args.as_slice()) {
            ("rpm", ["-q", _, _, name]) => match h.installed.get(*name) {
                Some(v) => (0, v.clone()),
                None => (1, format!("package {name} is not installed")),
            },
            ("dpkg-query", [.., name]) => match h.installed.get(*name) {
                Some(v) => (0, format!("install ok installed\t{v}")),
                None => (1, String::new()),
            },
            ("rpm", ["-Uvh", path]) => {
                let file = path.rsplit('/').next().unwrap();
                let name = ["sds", "sdc", "mdm", "lia", "gateway"]
                    .map(|c| format!("EMC-ScaleIO-{c}"))
                    .into_iter()
                    .find(|n| file.starts_with(&format!("{n}-")))
                    .unwrap();
                if h.broken == Some(name.as_str()) {
                    return (1, "error: unpacking of archive failed".into());
                }
                let v = packages::version_in_file_name(file, &name).unwrap();
                h.installed.insert(name, v);
                (0, String::new())
            }
            ("systemctl", ["is-active", svc]) if h.stopped.iter().any(|s| s == svc) => {
                (3, "inactive".into())
            }
            _ => (0, String::new()),
        }
    }

    struct World {
        dir: PathBuf,
        record: Arc<Mutex<Record>>,
        host: Arc<Mutex<Host>>,
    }

    impl World {
        /// A RHEL 7 data node at generation 1 of target 2, its SDS and SDC at `installed`.
        fn new(name: &str, installed: &str) -> World {
            let dir =
                std::env::temp_dir().join(format!("executor-walk-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let os = dir.join("root/etc/os-release");
            std::fs::create_dir_all(os.parent().unwrap()).unwrap();
            std::fs::write(&os, "ID=\"rhel\"\nVERSION_ID=\"7.9\"\n").unwrap();
            let mut urls = serde_json::Map::new();
            for c in ["sds", "sdc"] {
                let file = dir.join(format!("pkgs/EMC-ScaleIO-{c}-{NEW}.x86_64.rpm"));
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, c).unwrap();
                urls.insert(c.into(), format!("file://{}", file.display()).into());
            }
            let plan = serde_json::json!({"version": 1, "hostname": "h1", "persona": "data",
                "install": {"packages": {"rhel7": urls}}, "target_generation": 2,
                "generation": 1});
            let record = Record {
                plan: serde_json::from_value(plan).unwrap(),
                fetches: 12,
                ..Record::default()
            };
            let mut host = Host::default();
            for c in ["sds", "sdc"] {
                host.installed
                    .insert(format!("EMC-ScaleIO-{c}"), installed.to_string());
            }
            World {
                dir,
                record: Arc::new(Mutex::new(record)),
                host: Arc::new(Mutex::new(host)),
            }
        }

        /// A running node's worker on this host and scheduler, watching until the scheduler
        /// ends it.
        fn watch(&self) -> Option<super::super::Outcome> {
            let host = self.host.clone();
            let runner = Scripted::new(move |cmd: &Cmd| answer(&host, cmd));
            let mut node = Node::with(
                Box::new(Fake(self.record.clone())),
                Box::new(runner),
                Facts::new(self.dir.join("root")),
                self.dir.join("sandbox"),
            );
            node.fetch_plan(None).unwrap();
            node.watch()
        }

        fn reports(&self) -> Vec<String> {
            self.record.lock().unwrap().reports.clone()
        }

        fn installs(&self) -> Vec<String> {
            let h = self.host.lock().unwrap();
            let installs = h.ran.iter().filter(|l| l.starts_with("rpm -Uvh"));
            installs
                .map(|l| l.rsplit('/').next().unwrap().to_string())
                .collect()
        }

        fn generation(&self) -> u64 {
            self.record.lock().unwrap().plan.generation
        }
    }

    impl Drop for World {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn rpm(c: &str) -> String {
        format!("EMC-ScaleIO-{c}-{NEW}.x86_64.rpm")
    }

    #[test]
    fn a_decommissioned_node_stops_its_sds_and_ends_without_walking() {
        let w = World::new("decommission", OLD);
        w.record.lock().unwrap().plan.body.decommission = true;
        let end = w.watch();
        assert!(
            matches!(&end, Some(super::super::Outcome::Decommissioned(t)) if t.contains("sds service is stopped")),
            "{end:?}"
        );
        let ran = w.host.lock().unwrap().ran.clone();
        assert!(ran.iter().any(|l| l == "systemctl stop sds"), "{ran:?}");
        assert!(
            w.reports().is_empty(),
            "no walk to the target: {:?}",
            w.reports()
        );
        assert_eq!(w.installs(), Vec::<String>::new());
    }

    #[test]
    fn nothing_is_planned_when_the_host_matches() {
        let w = World::new("match", NEW);
        w.watch();
        assert_eq!(w.reports(), ["2 planned []"]);
        assert_eq!(w.generation(), 2);
        assert_eq!(w.installs(), Vec::<String>::new());
    }

    #[test]
    fn each_step_waits_for_its_grant_and_is_checked() {
        let w = World::new("walk", OLD);
        w.record.lock().unwrap().hold = 2;
        w.watch();
        assert_eq!(
            w.reports(),
            [
                "2 planned [UpgradeSds, UpgradeSdc]",
                "2 ask upgrade-sds",
                "2 started upgrade-sds",
                "2 done upgrade-sds",
                "2 ask upgrade-sdc",
                "2 started upgrade-sdc",
                "2 done upgrade-sdc",
                "2 reached"
            ]
        );
        assert_eq!(w.generation(), 2);
        assert_eq!(w.installs(), [rpm("sds"), rpm("sdc")]);
        let h = w.host.lock().unwrap();
        assert!(h.installed.values().all(|v| v == NEW), "{:?}", h.installed);
        // Each checked: the package database asked again, the service's state.
        let sds = h.ran.iter().position(|l| l.contains("-Uvh")).unwrap();
        assert_eq!(
            h.ran[sds + 1..sds + 3],
            [
                "rpm -q --qf %{VERSION}-%{RELEASE} EMC-ScaleIO-sds",
                "systemctl is-active sds"
            ]
        );
    }

    #[test]
    fn a_refused_report_starts_the_walk_again_and_redoes_nothing_done() {
        let w = World::new("conflict", OLD);
        // `done upgrade-sds` is refused: the SDS is at the new version already.
        w.record.lock().unwrap().conflicts = vec![3];
        w.watch();
        assert_eq!(
            w.reports(),
            [
                "2 planned [UpgradeSds, UpgradeSdc]",
                "2 ask upgrade-sds",
                "2 started upgrade-sds",
                "2 done upgrade-sds",
                "2 planned [UpgradeSdc]",
                "2 ask upgrade-sdc",
                "2 started upgrade-sdc",
                "2 done upgrade-sdc",
                "2 reached"
            ]
        );
        assert_eq!(w.installs(), [rpm("sds"), rpm("sdc")]);
        assert_eq!(w.generation(), 2);
    }

    #[test]
    fn a_failed_step_stops_the_walk_until_the_target_moves() {
        let w = World::new("failed", OLD);
        w.host.lock().unwrap().broken = Some("EMC-ScaleIO-sds");
        w.watch();
        let reports = w.reports();
        assert_eq!(reports.len(), 4, "{reports:#?}");
        assert_eq!(reports[3], "2 failed upgrade-sds");
        assert_eq!(w.generation(), 1);
        assert_eq!(
            w.record.lock().unwrap().reasons,
            [format!(
                "`rpm -Uvh {}` exited with status 1; output ends: error: unpacking of archive \
                 failed",
                w.dir.join("sandbox/packages").join(rpm("sds")).display()
            )]
        );
        let h = w.host.lock().unwrap();
        assert_eq!(h.ran.iter().filter(|l| l.contains("-Uvh")).count(), 1);
        drop(h);
        // A new target: the walk starts again from the host.
        {
            let mut r = w.record.lock().unwrap();
            r.plan.body.target_generation = 3;
            r.plan.version += 1;
            r.fetches = 12;
        }
        w.host.lock().unwrap().broken = None;
        w.watch();
        let reports = w.reports();
        assert_eq!(reports[4], "3 planned [UpgradeSds, UpgradeSdc]");
        assert_eq!(reports.last().unwrap(), "3 reached");
        assert_eq!(w.generation(), 3);
    }

    #[test]
    fn a_target_moving_while_a_step_waits_starts_the_walk_again() {
        let w = World::new("moved", OLD);
        {
            let mut r = w.record.lock().unwrap();
            r.hold = 100;
            r.move_at = Some(8);
        }
        w.watch();
        let reports = w.reports();
        assert_eq!(
            reports[..3],
            [
                "2 planned [UpgradeSds, UpgradeSdc]",
                "2 ask upgrade-sds",
                "3 planned [UpgradeSds, UpgradeSdc]"
            ]
        );
        assert_eq!(reports[3], "3 ask upgrade-sds");
        assert_eq!(
            w.installs(),
            Vec::<String>::new(),
            "nothing started without a grant"
        );
    }

    #[test]
    fn a_changed_volume_driver_file_is_rewritten_and_rexray_restarted() {
        let w = World::new("driver", NEW);
        {
            let mut r = w.record.lock().unwrap();
            let url = "http://r/rexray-0.11.4-1.x86_64.rpm";
            let i = r.plan.body.install.to_mut();
            i.gateway = Some("gw:443".into());
            i.volume_driver
                .packages
                .entry("rhel7".into())
                .or_default()
                .rexray = Some(super::super::plan::Download {
                url: url.into(),
                sha256: None,
            });
        }
        let config = w.dir.join("root/etc/rexray/config.yml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(&config, "scaleio:\n  endpoint: https://old:443/api\n").unwrap();
        w.watch();
        assert_eq!(
            w.reports(),
            [
                "2 planned [VolumeDriver]",
                "2 ask volume-driver",
                "2 started volume-driver",
                "2 done volume-driver",
                "2 reached"
            ]
        );
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains("endpoint: \"https://gw:443/api\""), "{text}");
        let h = w.host.lock().unwrap();
        let restart = h.ran.iter().position(|l| l == "systemctl restart rexray");
        let restart = restart.expect("restarted");
        assert_eq!(h.ran[restart + 1], "systemctl is-active rexray");
    }

    /// An Ubuntu 14.04 host whose running kernel is `kernel` (its image installed), on boot
    /// `b2`, with the day-two reboot marker `marker`.
    fn ubuntu(name: &str, kernel: &str, marker: &str) -> World {
        let w = World::new(name, NEW);
        let root = w.dir.join("root");
        std::fs::write(
            root.join("etc/os-release"),
            "ID=ubuntu\nVERSION_ID=\"14.04\"\n",
        )
        .unwrap();
        for (path, text) in [
            ("proc/sys/kernel/osrelease", kernel),
            ("proc/sys/kernel/random/boot_id", "b2"),
            ("var/lib/storage-executor/rollout-reboot", marker),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        let mut r = w.record.lock().unwrap();
        r.plan.body.install.to_mut().packages.clear();
        drop(r);
        let image = "linux-image-4.4.0-38-generic";
        w.host
            .lock()
            .unwrap()
            .installed
            .insert(image.into(), "4.4.0-38.57".into());
        w
    }

    #[test]
    fn the_boot_after_its_reboot_reports_it_done_and_plans_no_other() {
        let w = ubuntu("rebooted", "4.4.0-38-generic", "2 b1\n");
        w.watch();
        assert_eq!(w.reports(), ["2 done reboot", "2 reached"]);
        assert_eq!(w.generation(), 2);
        assert!(!w
            .dir
            .join("root/var/lib/storage-executor/rollout-reboot")
            .exists());
    }

    #[test]
    fn a_reboot_that_did_not_bring_the_kernel_is_not_repeated() {
        let w = ubuntu("in-vain", "3.13.0-170-generic", "2 b1\n");
        w.watch();
        assert_eq!(w.reports(), ["2 planned [Reboot]", "2 failed reboot"]);
        let reasons = w.record.lock().unwrap().reasons.clone();
        assert!(
            reasons[0].contains("rebooted once for generation 2")
                && reasons[0].contains("kernel 3.13.0-170-generic still runs"),
            "{reasons:?}"
        );
        let h = w.host.lock().unwrap();
        assert!(
            !h.ran.iter().any(|l| l.starts_with("shutdown")),
            "{:?}",
            h.ran
        );
    }

    #[test]
    fn with_debug_a_needed_reboot_fails_its_step_instead() {
        let w = ubuntu("debug", "3.13.0-170-generic", "");
        w.record.lock().unwrap().plan.body.install.to_mut().debug = true;
        w.watch();
        assert_eq!(
            w.reports(),
            [
                "2 planned [Reboot]",
                "2 ask reboot",
                "2 started reboot",
                "2 failed reboot"
            ]
        );
        let reasons = w.record.lock().unwrap().reasons.clone();
        assert_eq!(
            reasons,
            ["-debug=true forbids reboots: reboot the host by hand"]
        );
        let h = w.host.lock().unwrap();
        assert!(
            !h.ran.iter().any(|l| l.starts_with("shutdown")),
            "{:?}",
            h.ran
        );
    }
}
