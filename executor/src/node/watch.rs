//! A running node keeps an eye on its host: once per plan wait (50 s unless
//! `STORAGE_EXECUTOR_PLAN_WAIT` says otherwise) it looks at what its install left there
//! (`health.rs` decides what counts and whether to tell) and reports a change with `POST
//! health`, reads its devices again (`rescan.rs`) and walks to its target generation
//! (`rollout.rs`). Between looks an idle node holds no connection to the scheduler: it is
//! nudged when its plan changes (`api.rs`). An unchanged host costs no call. Nothing here
//! fails the task, relaunches anything or walks a phase again.

use super::api::ApiError;
use super::health::{self, Expected, Look, SDS_SERVICE};
use super::{Node, Outcome};
use crate::host::services::Service;
use storage_framework::contract::api::Action;
use storage_framework::contract::health::{HostProblem, HostReport};

impl Node {
    /// Looks, tells the scheduler of a change, waits for the next plan; until the scheduler
    /// refuses this executor (it was replaced), which ends the watch and nothing else (`None`),
    /// or its plan says the node is decommissioned: its storage services are stopped and the
    /// task ends.
    pub fn watch(&mut self) -> Option<Outcome> {
        let mut told: Option<HostReport> = None;
        loop {
            let found = self.look();
            if health::worth_sending(told.as_ref(), &found) {
                self.log_findings(told.as_ref(), &found);
                match self.api.report(Action::Health, &found) {
                    Ok(_) => {}
                    // The same report would get the same answer; a different one may not.
                    Err(ApiError::Rejected(e)) => log::error!(
                        "node {}: the scheduler will not take the host report: {e}",
                        self.plan.hostname
                    ),
                    Err(e) => {
                        log::warn!(
                            "node {}: host checks end, the scheduler refused the report: {e}",
                            self.plan.hostname
                        );
                        return None;
                    }
                }
                told = Some(found);
            }
            if self.plan.decommission {
                return Some(self.stop_storage());
            }
            if self.rescan().is_err() {
                return None;
            }
            if self.follow_target().is_err() {
                return None;
            }
            // A walk between steps waits seconds for its grant: a long poll. An idle node
            // holds no connection and is nudged (`api.rs`).
            let version = self.plan.version;
            let waited = if self.walk_settled() {
                let poll = super::api::idle_poll(self.plan.idle_poll_s);
                self.api.idle_wait(version, poll)
            } else {
                self.api.plan_after(Some(version))
            };
            match waited {
                Ok(Some(plan)) => self.plan = plan,
                Ok(None) => {}
                Err(e) => {
                    log::warn!(
                        "node {}: host checks end, the scheduler refused the plan: {e}",
                        self.plan.hostname
                    );
                    return None;
                }
            }
        }
    }

    /// The node's SDS is gone from the cluster: its service stops, and stays stopped across
    /// reboots only as far as the operator disables it (a recommission starts it again).
    fn stop_storage(&mut self) -> Outcome {
        let host = self.plan.hostname.to_string();
        let platform = match self.platform() {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(format!("decommission: {e}")),
        };
        log::info!("node {host}: decommissioned; stopping its {SDS_SERVICE} service");
        match Service::new(platform, SDS_SERVICE).stop(self.runner.as_mut()) {
            Ok(()) => Outcome::Decommissioned(format!(
                "decommissioned: its SDS left the storage cluster and its {SDS_SERVICE} service is stopped"
            )),
            Err(e) => Outcome::Failed(format!("decommission: stopping {SDS_SERVICE}: {e}")),
        }
    }

    /// One look at the host: a state query per service, one read of `/proc/modules`, a
    /// stat per device.
    fn look(&mut self) -> HostReport {
        let platform = self.platform();
        let Expected {
            services,
            devices,
            volume_driver,
        } = health::expected(&self.plan, platform.as_ref().ok().copied());
        let mut query = |name: &'static str| {
            let seen = match &platform {
                Ok(p) => Service::new(*p, name)
                    .state(self.runner.as_mut())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            };
            (name, seen)
        };
        let look = Look {
            services: services.into_iter().map(&mut query).collect(),
            volume_driver: volume_driver.map(&mut query),
            modules: self.facts.read("/proc/modules"),
            missing_devices: devices
                .into_iter()
                .filter(|d| !self.facts.path(d).exists())
                .collect(),
        };
        health::findings(&look)
    }

    fn log_findings(&self, told: Option<&HostReport>, found: &HostReport) {
        let host = &self.plan.hostname;
        if !found.problems.is_empty() {
            let reasons: Vec<String> = found.problems.iter().map(HostProblem::reason).collect();
            log::warn!("node {host}: host: {}", reasons.join("; "));
        } else if told.is_some() {
            log::info!("node {host}: host: every problem cleared");
        } else {
            log::info!("node {host}: host checks find nothing wrong");
        }
    }
}
