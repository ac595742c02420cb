//! Phase reports of emulated storage executors (`MasterConfig::synthetic_phase_reports`):
//! each walks a node's phases to `running` through the scheduler's executor API
//! (`POST <scheduler>/api/v1/executors/<id>/phase`, `Authorization: Bearer <secret>`), as the
//! storage executor does while it installs its host, so that the scheduler's state keeps
//! changing the way it does on a real cluster being installed.
//!
//! One thread sends every report, round robin over the executors still walking, at a fixed
//! total rate: the load (and how often the scheduler's view changes) stays what the caller
//! chose whatever the number of agents. Runs off the owner thread.

use super::synthetic::PhaseReportTarget;
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use storage_framework::contract::api::{self, Action, PhaseReport};
use storage_framework::contract::Phase;

/// The phases a pre-configured node reports, in order.
const WALK: [Phase; 5] = [
    Phase::Environment,
    Phase::Packages,
    Phase::Devices,
    Phase::StorageAttach,
    Phase::Running,
];

pub(super) struct PhaseReporter {
    targets: Sender<PhaseReportTarget>,
}

impl PhaseReporter {
    /// `per_sec` reports a second in all.
    pub fn start(per_sec: f64) -> PhaseReporter {
        let (targets, rx) = crossbeam_channel::unbounded();
        let every = Duration::from_secs_f64(1.0 / per_sec.max(0.001));
        let spawned = std::thread::Builder::new()
            .name("synthetic-phases".into())
            .spawn(move || walk(&rx, every));
        if let Err(e) = spawned {
            log::warn!("synthetic phase reporter: {e}");
        }
        PhaseReporter { targets }
    }

    pub fn add(&self, target: PhaseReportTarget) {
        let _ = self.targets.send(target);
    }
}

fn walk(new: &Receiver<PhaseReportTarget>, every: Duration) {
    let http = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build(),
    );
    let mut walking: VecDeque<(PhaseReportTarget, usize)> = VecDeque::new();
    let mut next = Instant::now();
    loop {
        if walking.is_empty() {
            match new.recv() {
                Ok(t) => walking.push_back((t, 0)),
                Err(_) => return,
            }
        }
        loop {
            match new.try_recv() {
                Ok(t) => walking.push_back((t, 0)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let Some((target, step)) = walking.pop_front() else {
            continue;
        };
        // Paces the load generator itself (not a wait for some condition).
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next = Instant::now().max(next) + every;
        let url = format!(
            "{}{}",
            target.scheduler_url.trim_end_matches('/'),
            api::path(&target.executor_id, Action::Phase)
        );
        let body = serde_json::to_string(&PhaseReport::entered(WALK[step])).unwrap_or_default();
        let sent = http
            .post(&url)
            .header("Authorization", &format!("Bearer {}", target.secret))
            .header("Content-Type", "application/json")
            .send(body.as_bytes());
        let step = match sent.map(|r| r.status().as_u16()) {
            Ok(200..=299) => step + 1,
            // Tried again on its next turn: the scheduler may be restarting.
            Ok(status) => {
                log::debug!("{}: phase report answered {status}", target.executor_id);
                step
            }
            Err(e) => {
                log::debug!("{}: phase report failed: {e}", target.executor_id);
                step
            }
        };
        if step < WALK.len() {
            walking.push_back((target, step));
        }
    }
}
