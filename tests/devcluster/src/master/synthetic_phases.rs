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
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::contract::api::{self, Action, PhaseReport};
use storage_framework::contract::Phase;
use storage_framework::tls::{self, Fingerprint, PinnedVerifier};

/// The phases a pre-configured node without an isolator reports, in order (its disks join
/// in `storage-attach`, after the volume driver).
const WALK: [Phase; 6] = [
    Phase::Environment,
    Phase::Packages,
    Phase::Devices,
    Phase::VolumeDriver,
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

/// An HTTPS client that accepts the scheduler's certificate of fingerprint `pin` only, as
/// the storage executor's does; `None` for a malformed pin.
fn pinned(pin: &str) -> Option<ureq::Agent> {
    let pin = Fingerprint::parse(pin).ok()?;
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build();
    let verifier = Arc::new(PinnedVerifier::new(vec![pin]));
    Some(tls::agent(config, tls::client_config(verifier)))
}

fn walk(new: &Receiver<PhaseReportTarget>, every: Duration) {
    // One client per scheduler certificate (a failed-over scheduler has a new one).
    let mut clients: HashMap<String, Option<ureq::Agent>> = HashMap::new();
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
        let http = clients
            .entry(target.pin.clone())
            .or_insert_with(|| pinned(&target.pin));
        let Some(http) = http else {
            log::warn!("{}: malformed scheduler fingerprint", target.executor_id);
            continue;
        };
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
