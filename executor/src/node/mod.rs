//! The node half of the storage job: a worker thread that walks the node through its
//! phases ([`machine`]) on its host ([`crate::host`]), reporting each phase to the scheduler
//! ([`api`]) and handing the end (running, failed, replaced) to the executor's main loop.
//! Once running, the worker keeps checking its host on its plan cycle ([`watch`]).

pub mod api;
pub mod cluster;
pub mod download;
pub mod endpoint;
pub mod health;
pub mod install;
pub mod machine;
pub mod plan;
pub mod rescan;
pub mod rollout;
pub mod steps;
pub mod volume;
pub mod volume_driver;
pub mod watch;

use crate::host::commands::{Cmd, HostRunner, Runner};
use crate::host::devices;
use crate::host::facts::Facts;
use crate::host::packages;
use api::{ApiError, Scheduler, SchedulerApi};
use machine::{Earlier, Findings, Phase, Reboot};
use plan::Plan;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use storage_framework::contract::api::{Action, DevicesReport, PhaseReport};
use storage_framework::contract::platform::{profile, Component, Platform};

/// How long a `shutdown -r now` may take to end this process before it counts as failed.
const REBOOT_DEADLINE: Duration = Duration::from_secs(600);
/// Where the executor notes, per reason (phase), the boot a reboot was asked from (durable
/// across restarts): a second reboot for one reason is refused.
const REBOOT_MARKER: &str = "/var/lib/storage-executor/reboot-requested";

/// How the node's walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every phase done; the node is `running`.
    Running,
    /// A phase failed; the text names the phase, the command, its status and output tail.
    Failed(String),
    /// The scheduler refuses this executor (replaced or unknown): nothing left to do.
    Refused(String),
    /// Decommissioned: the node's storage services are stopped; the task is finished.
    Decommissioned(String),
}

/// A phase's failure: what went wrong, without the phase (added by the caller).
type StepResult = Result<Findings, String>;

/// Marks a failure the operator fixes in the scheduler's flags (a package URL not given):
/// the node reports it and waits for a new plan instead of failing its task, so that a
/// redeployed scheduler lets it carry on without a relaunch.
const NEEDS_CONFIGURATION: &str = "[configuration] ";

/// Built with the `floor` feature (the converge bench's floor run; never released), the
/// executor does not wait for the scheduler's leave: a reboot goes without the budget's room
/// and storage-attach ends without the devices in the pool. What such a rollout takes is what
/// the hosts and Mesos allow, the floor `converge_floor_ratio_100` holds the real one to.
const SKIP_WAITS: bool = cfg!(feature = "floor");

/// How often a node waiting for its plan to move asks unprompted: as often as its long poll
/// came back, so that the scheduler, which takes an executor of a node short of `running`
/// quiet for 75 s for one that lost it (`dispatcher/announce.rs`, `STALE_MS`), never does.
const WAIT_POLL: Duration = crate::env::DEFAULT_PLAN_WAIT;

pub struct Node {
    api: Box<dyn Scheduler>,
    facts: Facts,
    sandbox: PathBuf,
    plan: Plan,
    platform: Option<Platform>,
    /// Every host command of the node's phases.
    runner: Box<dyn Runner + Send>,
    /// The isolator was installed by this executor: the agent must restart to load it.
    isolator_installed: bool,
    /// Once running: the walk toward the scheduler's target generation.
    walk: rollout::Walk,
    /// The devices the `devices` phase found, told with the next phase's report.
    found: Option<Vec<String>>,
}

/// Reports entering a phase, with the devices the phase before found if any. Devices the
/// scheduler does not say it recorded (an older build reads only the phase) go by
/// `POST devices` after, as they always did.
fn report_entered(
    api: &mut (dyn Scheduler + 'static),
    report: &PhaseReport,
) -> Result<(), ApiError> {
    let recorded = api.report(Action::Phase, report)?;
    match &report.devices {
        Some(devices) if !recorded.devices => {
            let found = DevicesReport {
                devices: devices.into(),
            };
            api.report(Action::Devices, &found).map(drop)
        }
        _ => Ok(()),
    }
}

impl Node {
    pub fn new(api: SchedulerApi, facts: Facts, sandbox: PathBuf) -> Node {
        Node::with(Box::new(api), Box::<HostRunner>::default(), facts, sandbox)
    }

    /// A node worker on `runner`'s host and `api`'s scheduler.
    fn with(
        api: Box<dyn Scheduler>,
        runner: Box<dyn Runner + Send>,
        facts: Facts,
        sandbox: PathBuf,
    ) -> Node {
        Node {
            api,
            facts,
            sandbox,
            plan: Plan::default(),
            platform: None,
            runner,
            isolator_installed: false,
            walk: rollout::Walk::default(),
            found: None,
        }
    }

    /// Walks the node to `running` or to its failure.
    pub fn run(&mut self) -> Outcome {
        if SKIP_WAITS {
            log::warn!("built with the `floor` feature: skips the scheduler's reboot budget and storage waits (a bench build, never for a real host)");
        }
        match self.fetch_plan(None) {
            Ok(()) => {}
            Err(e) => return Outcome::Refused(e.to_string()),
        }
        let mut phase = machine::start(self.plan.resume);
        log::info!(
            "node {}: {} persona{}, starting at phase {phase}{}",
            self.plan.hostname,
            self.plan.persona,
            if self.plan.runs_scheduler {
                " (runs the scheduler: reboots last)"
            } else {
                ""
            },
            match &self.plan.resume {
                Some(r) => format!(" (recorded: {r})"),
                None => String::new(),
            }
        );
        loop {
            let mut report = volume_driver::phase_report(&self.plan, phase);
            report.devices = self.found.take();
            match report_entered(self.api.as_mut(), &report) {
                Ok(()) => {}
                // Sending it again would get the same answer: the phase cannot start.
                Err(ApiError::Rejected(e)) => return self.fail_phase(phase, e),
                Err(e) => return Outcome::Refused(e.to_string()),
            }
            log::info!("node {}: phase {phase}", self.plan.hostname);
            let started = Instant::now();
            let result = self.step(phase);
            match result {
                Ok(findings) => {
                    log::debug!(
                        "node {}: phase {phase} done in {} ms",
                        self.plan.hostname,
                        started.elapsed().as_millis()
                    );
                    if phase == Phase::Running {
                        return Outcome::Running;
                    }
                    phase = machine::next(phase, findings);
                }
                Err(detail) if detail.starts_with(NEEDS_CONFIGURATION) => {
                    let text = format!("{phase}: {detail}");
                    log::error!(
                        "node {}: {text}; waiting for a new plan",
                        self.plan.hostname
                    );
                    let report = PhaseReport::failed(phase, text);
                    if let Err(e) = self.api.report(Action::Phase, &report) {
                        return Outcome::Refused(e.to_string());
                    }
                    let v = self.plan.version;
                    while self.plan.version == v {
                        if let Err(e) = self.fetch_plan(Some(v)) {
                            return Outcome::Refused(e.to_string());
                        }
                    }
                }
                Err(detail) => return self.fail_phase(phase, detail),
            }
        }
    }

    /// Reports `phase` failed for `detail` (the scheduler records it whether or not it
    /// recorded the phase's start) and ends the walk.
    fn fail_phase(&mut self, phase: Phase, detail: String) -> Outcome {
        let text = format!("{phase}: {detail}");
        log::error!("node {}: {text}", self.plan.hostname);
        let report = PhaseReport::failed(phase, text.clone());
        if let Err(e) = self.api.report(Action::Phase, &report) {
            log::warn!("node {}: failure not recorded: {e}", self.plan.hostname);
        }
        Outcome::Failed(text)
    }

    /// Gets the plan (retrying until the scheduler answers); with `version`, waits for a
    /// plan other than that one.
    fn fetch_plan(&mut self, version: Option<u64>) -> Result<(), ApiError> {
        if let Some(p) = self.api.plan_after(version)? {
            self.plan = p;
        }
        Ok(())
    }

    /// Waits until `done` holds for the plan, holding no connection: registered for a nudge
    /// by its first ask (`nudge=1`), the node asks again when the scheduler's MESSAGE says
    /// its plan moved, or every [`WAIT_POLL`] (jittered: a MESSAGE comes at most once).
    /// A long poll here was a TLS connection held per waiting node, about 10 KB of the
    /// scheduler's memory each, and in a first rollout nearly every node waits in
    /// `storage-attach` at once while the gateway attaches them a few hundred at a time:
    /// 100 MB at 10,000 nodes, against the app's `mem: 32`.
    fn wait_for_plan(&mut self, what: &str, done: impl Fn(&Plan) -> bool) -> Result<(), String> {
        let mut told = false;
        loop {
            let v = self.plan.version;
            let moved = self.api.idle_wait(v, WAIT_POLL);
            if let Some(p) = moved.map_err(|e| e.to_string())? {
                self.plan = p;
            }
            if done(&self.plan) {
                return Ok(());
            }
            if !told {
                log::info!(
                    "node {}: waiting for the scheduler: {what}",
                    self.plan.hostname
                );
                told = true;
            }
        }
    }

    fn platform(&mut self) -> Result<Platform, String> {
        if let Some(p) = self.platform {
            return Ok(p);
        }
        let p = self.facts.platform()?;
        self.platform = Some(p);
        Ok(p)
    }

    fn step(&mut self, phase: Phase) -> StepResult {
        match phase {
            Phase::Environment => self.environment(),
            Phase::RebootPrerequisites => self.reboot_prerequisites(),
            Phase::Packages => self.packages(),
            Phase::Devices => self.devices(),
            Phase::ClusterInit => self.cluster_init(),
            Phase::StorageAttach => self.storage_attach(),
            Phase::VolumeDriver => self.volume_driver(),
            Phase::RebootFinal => self.reboot_final(),
            Phase::Running => {
                // A host reboot that was asked for is behind us.
                let _ = std::fs::remove_file(self.facts.path(REBOOT_MARKER));
                Ok(Findings::default())
            }
            Phase::Launching | Phase::Failed | Phase::Lost => Err(format!(
                "{phase} is the scheduler's phase, not a step of the executor"
            )),
        }
    }

    fn environment(&mut self) -> StepResult {
        let platform = self.platform()?;
        let prof = profile(platform);
        let mut wanted: Vec<&str> = prof.prerequisites.to_vec();
        if self.plan.is_mdm() {
            wanted.extend_from_slice(prof.mdm_prerequisites);
        }
        install::from_repository(self.runner.as_mut(), platform, &wanted)?;
        let mut findings = Findings::default();
        if let Some(rule) = &prof.kernel {
            let kernel = self.facts.kernel()?;
            if kernel != rule.release {
                let image = rule.package;
                let r = self.runner.as_mut();
                if packages::installed_version(r, platform, image)
                    .map_err(|e| e.to_string())?
                    .is_none()
                {
                    packages::install_from_repository(r, platform, &[image])
                        .map_err(|e| e.to_string())?;
                }
                log::info!(
                    "node {}: kernel {kernel} runs; {} is installed and needs a reboot",
                    self.plan.hostname,
                    rule.release
                );
                findings.needs_reboot = true;
            }
        }
        Ok(findings)
    }

    fn reboot_prerequisites(&mut self) -> StepResult {
        let reason = Phase::RebootPrerequisites;
        let kernel = self.facts.kernel()?;
        let wanted = profile(self.platform()?).kernel.as_ref().map(|k| k.release);
        let needed = wanted.is_some_and(|w| kernel != w);
        let wanted = wanted.unwrap_or_default();
        match self.reboot_decision(reason, needed) {
            Reboot::Skip => Ok(Findings::default()),
            Reboot::Forbidden => Err(format!(
                "kernel {kernel} runs and the storage client needs {wanted}, which is \
                 installed; only a reboot starts it, and -debug=true forbids reboots"
            )),
            Reboot::Again => Err(self.rebooted_in_vain(&format!(
                "the storage client still needs kernel {wanted}, which is installed"
            ))),
            Reboot::Wait | Reboot::Now => self.reboot_now(reason),
        }
    }

    fn reboot_final(&mut self) -> StepResult {
        let reason = Phase::RebootFinal;
        // After a restart, the marker tells whether the reboot asked for has happened.
        let pending = self.earlier_reboot(reason) == Earlier::Pending;
        let needed = self.isolator_installed || pending;
        match self.reboot_decision(reason, needed) {
            Reboot::Skip => Ok(Findings::default()),
            Reboot::Forbidden => {
                log::warn!(
                    "node {}: the isolator loads only when the agent restarts; -debug=true \
                     forbids the reboot, so restart the agent by hand",
                    self.plan.hostname
                );
                Ok(Findings::default())
            }
            Reboot::Again => Err(self.rebooted_in_vain(
                "the isolator was installed again and still needs the agent to restart",
            )),
            Reboot::Wait | Reboot::Now => self.reboot_now(reason),
        }
    }

    /// The reboot marker's word on an earlier reboot for `reason`.
    fn earlier_reboot(&self, reason: Phase) -> Earlier {
        let marker = std::fs::read_to_string(self.facts.path(REBOOT_MARKER)).unwrap_or_default();
        machine::earlier(&marker, reason, self.facts.boot_id().as_deref())
    }

    fn reboot_decision(&self, reason: Phase, needed: bool) -> Reboot {
        let earlier = self.earlier_reboot(reason);
        machine::reboot(
            needed,
            earlier,
            self.plan.install.debug,
            self.plan.reboot_wait,
        )
    }

    /// The configuration error of a second reboot for one reason: the host and its boot
    /// loader are what the operator has to look at.
    fn rebooted_in_vain(&self, still: &str) -> String {
        let kernel = self
            .facts
            .kernel()
            .unwrap_or_else(|_| "unknown".to_string());
        format!(
            "{NEEDS_CONFIGURATION}the host rebooted once for this phase and {still}: \
             kernel {kernel} runs and the boot loader default is {}; not rebooting again \
             (fix the boot loader or the host, then reboot it by hand)",
            self.facts.boot_loader_default()
        )
    }

    /// Waits until this node may reboot, reboots, and waits to be ended by it.
    fn reboot_now(&mut self, reason: Phase) -> StepResult {
        self.claim_reboot(reason)?;
        let boot = self.facts.boot_id().unwrap_or_default();
        let marker = self.facts.path(REBOOT_MARKER);
        let before = std::fs::read_to_string(&marker).unwrap_or_default();
        let text = machine::mark(&before, reason, &boot);
        volume::write_if_changed(&marker, &text, 0o600)?;
        self.shutdown(reason.as_str())
    }

    /// `shutdown -r now`, and waiting to be ended by it; the reboot marker is written.
    fn shutdown(&mut self, why: &str) -> StepResult {
        log::warn!("node {}: rebooting the host ({why})", self.plan.hostname);
        self.runner
            .check(&Cmd::new("shutdown", &["-r", "now"]).deadline(Cmd::QUERY_DEADLINE))
            .map_err(|e| e.to_string())?;
        // The reboot ends this process; waiting is all that is left to do.
        let deadline = Instant::now() + REBOOT_DEADLINE;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_secs(1));
        }
        Err(format!(
            "`shutdown -r now` succeeded but the host did not reboot within {} s",
            REBOOT_DEADLINE.as_secs()
        ))
    }

    /// Waits until the plan lets this node reboot, then claims the reboot: the scheduler
    /// records it (the node counts as down from then on) or refuses it when another node took
    /// the budget's room first, and then this node waits for the plan again.
    fn claim_reboot(&mut self, reason: Phase) -> Result<(), String> {
        loop {
            self.fetch_plan(None).map_err(|e| e.to_string())?;
            while self.plan.reboot_wait && !SKIP_WAITS {
                log::info!(
                    "node {}: reboot held by the scheduler: {}",
                    self.plan.hostname,
                    self.plan.waiting.as_deref().unwrap_or(
                        "every other node before this one (it runs the scheduler) reboots"
                    )
                );
                let v = self.plan.version;
                self.fetch_plan(Some(v)).map_err(|e| e.to_string())?;
            }
            // As its entry report, so that the claim keeps the node's warning.
            let mut claim = volume_driver::phase_report(&self.plan, reason);
            claim.rebooting = true;
            // A refused claim (409: another node took the room first) waits for the plan to
            // change; the report itself retries what is transient.
            match self.api.report(Action::Phase, &claim) {
                Ok(_) => return Ok(()),
                Err(ApiError::Conflict(_)) if SKIP_WAITS => return Ok(()),
                Err(ApiError::Conflict(e)) => {
                    log::info!("node {}: reboot not granted: {e}", self.plan.hostname);
                    let v = self.plan.version;
                    self.fetch_plan(Some(v)).map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn packages(&mut self) -> StepResult {
        let platform = self.platform()?;
        // LIA and the gateway come in cluster-init, once the MDM cluster exists.
        let components: &[Component] = if self.plan.is_mdm() {
            &[Component::Mdm, Component::Sds, Component::Sdc]
        } else {
            &[Component::Sds, Component::Sdc]
        };
        for &c in components {
            self.install_component(platform, c)?;
        }
        Ok(Findings::default())
    }

    /// Installs component `c`'s package from the URL the plan gives for this platform,
    /// unless the package database shows it at that file's version. Without a URL the
    /// package must be installed at the plan's storage version already.
    fn install_component(&mut self, platform: Platform, c: Component) -> Result<(), String> {
        let Some(download) = self.plan.install.package(platform, c) else {
            return self.installed_without_url(platform, c);
        };
        let name = c.package(platform);
        let file = install::PackageFile {
            name,
            url: &download.url,
            sha256: download.sha256.as_deref(),
        };
        let r = self.runner.as_mut();
        let Some(pending) = install::missing(r, platform, file, &self.plan.hostname)? else {
            return Ok(());
        };
        if c == Component::Sdc && self.plan.experimental {
            // The SDC connects to the MDMs its MDM_IP names: the trio's, once placed.
            self.wait_for_plan(
                "the primary and secondary MDM addresses (install.mdm_ips)",
                |p| !p.install.mdm_ips.is_empty(),
            )?;
        }
        let path = pending.download(&self.sandbox.join("packages"))?;
        let env = self.component_env(c, name)?;
        let r = self.runner.as_mut();
        pending.install(r, platform, &path, env, &self.plan.hostname)
    }

    /// Component `c` has no URL: fine when installed at the plan's storage version; else a
    /// configuration error naming the flag (the node waits for a plan that gives it).
    fn installed_without_url(&mut self, platform: Platform, c: Component) -> Result<(), String> {
        let name = c.package(platform);
        let found = match self.plan.install.storage_version.as_deref() {
            Some(v) => {
                let r = self.runner.as_mut();
                let wanted = install::Wanted::Release(v);
                install::without_url(r, platform, name, wanted, &self.plan.hostname)?
            }
            None => Some("the plan names no storage version to find installed".into()),
        };
        let Some(found) = found else {
            return Ok(());
        };
        let key = platform.key();
        Err(format!(
            "{NEEDS_CONFIGURATION}no {} package URL for {key} and {found}: set -storage.{key}.{}",
            c.title(),
            c.key()
        ))
    }

    /// The environment component `c`'s package scripts read when package `name` installs.
    fn component_env(&self, c: Component, name: &str) -> Result<Cmd, String> {
        let cmd = Cmd::default();
        Ok(match c {
            Component::Mdm => {
                let manager = self.plan.persona.is_manager();
                cmd.env("MDM_ROLE_IS_MANAGER", if manager { "1" } else { "0" })
            }
            Component::Sdc if !self.plan.install.mdm_ips.is_empty() => {
                cmd.env("MDM_IP", &self.plan.install.mdm_ips.join(","))
            }
            Component::Lia | Component::Gateway => {
                let password = self.plan.password().ok_or_else(|| {
                    format!("the plan carries no admin password, which installing {name} needs")
                })?;
                let var = if c == Component::Lia {
                    "TOKEN"
                } else {
                    "GATEWAY_ADMIN_PASSWORD"
                };
                cmd.secret_env(var, password)
            }
            _ => cmd,
        })
    }

    fn devices(&mut self) -> StepResult {
        let listed = self.plan.listed_devices();
        let found = if listed.is_empty() {
            let d = devices::discover(&self.facts)?;
            for (dev, why) in &d.skipped {
                log::debug!("node {}: {dev} not offered: {why}", self.plan.hostname);
            }
            d.usable
        } else {
            devices::check_listed(&self.facts, &listed)?
        };
        log::info!(
            "node {}: devices {}",
            self.plan.hostname,
            if found.is_empty() {
                "none".to_string()
            } else {
                found.join(", ")
            }
        );
        self.found = Some(found);
        Ok(Findings {
            cluster_init: self.plan.experimental && self.plan.is_mdm(),
            ..Findings::default()
        })
    }

    fn storage_attach(&mut self) -> StepResult {
        if SKIP_WAITS {
            return Ok(Findings::default());
        }
        self.wait_for_plan(
            "its devices in the pool and its SDC connected (storage_ready)",
            |p| p.storage_ready,
        )?;
        Ok(Findings::default())
    }
}

#[cfg(test)]
mod tests {
    use super::api::Recorded;
    use super::*;

    /// A scheduler that records what it is sent, of a build that reads devices in a phase
    /// report or of an older one.
    struct Sent {
        reads_devices: bool,
        calls: Vec<(Action, serde_json::Value)>,
    }

    impl Scheduler for Sent {
        fn plan_after(&mut self, _: Option<u64>) -> Result<Option<Plan>, ApiError> {
            Err(ApiError::Refused("no plan here".into()))
        }

        fn post_json(&mut self, action: Action, body: &str) -> Result<Recorded, ApiError> {
            let body: serde_json::Value = serde_json::from_str(body).unwrap();
            let devices = self.reads_devices && body.get("devices").is_some();
            self.calls.push((action, body));
            Ok(Recorded { devices })
        }
    }

    fn entered(reads_devices: bool, devices: Option<&[&str]>) -> Vec<(Action, String)> {
        let mut api = Sent {
            reads_devices,
            calls: Vec::new(),
        };
        let mut report = PhaseReport::entered(Phase::VolumeDriver);
        report.devices = devices.map(|d| d.iter().map(|d| d.to_string()).collect());
        report_entered(&mut api, &report).unwrap();
        api.calls
            .into_iter()
            .map(|(a, body)| (a, body.to_string()))
            .collect()
    }

    /// A scheduler whose plan is ready after `waits` idle waits, noting each call.
    struct Waits {
        waits: u32,
        calls: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Scheduler for Waits {
        fn plan_after(&mut self, version: Option<u64>) -> Result<Option<Plan>, ApiError> {
            self.calls.lock().unwrap().push(format!("plan {version:?}"));
            Err(ApiError::Refused("a plan request, not a wait".into()))
        }

        fn post_json(&mut self, _: Action, _: &str) -> Result<Recorded, ApiError> {
            Ok(Recorded::default())
        }

        fn idle_wait(&mut self, version: u64, poll: Duration) -> Result<Option<Plan>, ApiError> {
            let line = format!("idle_wait {version} {}s", poll.as_secs());
            self.calls.lock().unwrap().push(line);
            self.waits -= 1;
            let ready = r#"{"version":2,"storage_ready":true}"#;
            Ok((self.waits == 0).then(|| serde_json::from_str(ready).unwrap()))
        }
    }

    /// A scheduler that will not take a phase's report as it is (400), recording the rest.
    struct Rejects {
        calls: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    }

    impl Scheduler for Rejects {
        fn plan_after(&mut self, _: Option<u64>) -> Result<Option<Plan>, ApiError> {
            Ok(Some(serde_json::from_str(r#"{"version":1}"#).unwrap()))
        }

        fn post_json(&mut self, _: Action, body: &str) -> Result<Recorded, ApiError> {
            let body: serde_json::Value = serde_json::from_str(body).unwrap();
            let failed = body["error"].is_string();
            self.calls.lock().unwrap().push(body);
            if failed {
                return Ok(Recorded::default());
            }
            let why = "POST phase: scheduler answered 400: invalid phase report: device \"sd a\"";
            Err(ApiError::Rejected(why.into()))
        }
    }

    /// A phase whose report the scheduler will not take cannot start: it fails, and the
    /// failure names the scheduler's answer (sent again, the report would get the same one).
    #[test]
    fn a_phase_report_the_scheduler_rejects_fails_the_phase_naming_the_answer() {
        let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let api = Rejects {
            calls: calls.clone(),
        };
        let runner = crate::host::scripted::Scripted::new(|c: &Cmd| panic!("ran {c:?}"));
        let dir = std::env::temp_dir();
        let mut node = Node::with(Box::new(api), Box::new(runner), Facts::new(&dir), dir);
        let outcome = node.run();
        let Outcome::Failed(text) = outcome else {
            panic!("{outcome:?}");
        };
        assert!(
            text.starts_with("environment: ") && text.contains("400: invalid"),
            "{text}"
        );
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0]["phase"], "environment");
        assert_eq!(calls[1]["phase"], "environment");
        assert!(calls[1]["error"]
            .as_str()
            .unwrap()
            .contains("invalid phase report"));
    }

    /// A node waiting for its plan to move (storage-attach, the MDM build) holds no long
    /// poll: it waits as an idle node does, registered for a nudge, asking again on the
    /// scheduler's MESSAGE or its slow timer, and never sends a plan request with a wait.
    #[test]
    fn a_node_waits_for_its_plan_without_holding_a_connection() {
        let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let api = Waits {
            waits: 3,
            calls: calls.clone(),
        };
        let runner = crate::host::scripted::Scripted::new(|_: &Cmd| (0, String::new()));
        let dir = std::env::temp_dir();
        let mut node = Node::with(Box::new(api), Box::new(runner), Facts::new(&dir), dir);
        node.wait_for_plan("storage_ready", |p| p.storage_ready)
            .unwrap();
        assert_eq!(
            *calls.lock().unwrap(),
            ["idle_wait 0 50s", "idle_wait 0 50s", "idle_wait 0 50s"]
        );
        assert_eq!(node.plan.version, 2);
    }

    /// The devices the devices phase found go with the next phase's report, one request;
    /// to a scheduler that does not say it recorded them, by `POST devices` after.
    #[test]
    fn found_devices_ride_on_the_next_phase_report() {
        let both = r#"{"devices":["/dev/sdb"],"phase":"volume-driver"}"#;
        assert_eq!(
            entered(true, Some(&["/dev/sdb"])),
            [(Action::Phase, both.to_string())]
        );
        assert_eq!(
            entered(false, Some(&["/dev/sdb"])),
            [
                (Action::Phase, both.to_string()),
                (Action::Devices, r#"{"devices":["/dev/sdb"]}"#.to_string())
            ]
        );
        assert_eq!(
            entered(false, None),
            [(Action::Phase, r#"{"phase":"volume-driver"}"#.to_string())]
        );
    }
}
