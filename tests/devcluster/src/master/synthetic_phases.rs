//! Phase reports of emulated storage executors (`MasterConfig::synthetic_phase_reports`):
//! each walks a node's phases to `running` through the scheduler's executor API
//! (`POST <scheduler>/api/v1/executors/<id>/phase`, `Authorization: Bearer <secret>`), as the
//! storage executor does while it installs its host, so that the scheduler's state keeps
//! changing the way it does on a real cluster being installed.
//!
//! With `synthetic_health_reports`, an executor whose node runs goes on reporting its host's
//! health (`POST .../health`) in its turn: a stopped LIA found, then cleared, and so on, as a
//! flapping host check would. Each report changes the node, so the state keeps changing at
//! the chosen rate after the walks end.
//!
//! One thread paces every report, round robin over the executors still walking, at a fixed
//! total rate: the load (and how often the scheduler's view changes) stays what the caller
//! chose whatever the number of agents. `SENDERS` threads send them, as many executors
//! report at once on a real cluster: the scheduler answers a report once it is stored, so
//! one sender alone would be held to one report per fsync. Runs off the owner thread.

use super::synthetic::PhaseReportTarget;
use crossbeam_channel::{select, Receiver, Sender, TryRecvError};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::contract::api::{self, Action, DevicesReport, PhaseReport};
use storage_framework::contract::health::{HostCheck, HostProblem, HostReport};
use storage_framework::contract::Phase;
use storage_framework::tls::{self, Fingerprint, PinnedVerifier};

/// The phases a pre-configured node without an isolator reports, in order (its disks join
/// in `storage-attach`, after the volume driver).
pub(super) const WALK: [Phase; 6] = [
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
    /// `per_sec` reports a second in all; `health`: host health reports after the walk.
    pub fn start(per_sec: f64, health: bool) -> PhaseReporter {
        let (targets, rx) = crossbeam_channel::unbounded();
        let every = Duration::from_secs_f64(1.0 / per_sec.max(0.001));
        let spawned = std::thread::Builder::new()
            .name("synthetic-phases".into())
            .spawn(move || walk(&rx, every, health));
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
    Some(tls::agent(config, tls::executor_client_config(verifier)))
}

/// Reports in flight at most.
const SENDERS: usize = 32;

fn walk(new: &Receiver<PhaseReportTarget>, every: Duration, health: bool) {
    let (jobs, jobs_rx) = crossbeam_channel::bounded::<(PhaseReportTarget, usize)>(0);
    let (done_tx, done) = crossbeam_channel::unbounded::<(PhaseReportTarget, usize)>();
    for i in 0..SENDERS {
        let (jobs, done) = (jobs_rx.clone(), done_tx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("synthetic-phases-{i}"))
            .spawn(move || send_reports(&jobs, &done));
        if let Err(e) = spawned {
            log::warn!("synthetic phase sender {i}: {e}");
        }
    }
    drop((jobs_rx, done_tx));
    let mut walking: VecDeque<(PhaseReportTarget, usize)> = VecDeque::new();
    let mut next = Instant::now();
    loop {
        for d in done.try_iter() {
            requeue(d, health, &mut walking);
        }
        let Some(job) = walking.pop_front() else {
            select! {
                recv(new) -> t => match t {
                    Ok(t) => walking.push_back((t, 0)),
                    Err(_) => return,
                },
                recv(done) -> d => if let Ok(d) = d {
                    requeue(d, health, &mut walking);
                },
            }
            continue;
        };
        loop {
            match new.try_recv() {
                Ok(t) => walking.push_back((t, 0)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        // Paces the load generator itself (not a wait for some condition).
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next = Instant::now().max(next) + every;
        if jobs.send(job).is_err() {
            return;
        }
    }
}

/// An answered report: the executor's next report takes its turn: its next phase, or once
/// its node runs, its next health report (with `health`), else none.
fn requeue(
    (target, step): (PhaseReportTarget, usize),
    health: bool,
    walking: &mut VecDeque<(PhaseReportTarget, usize)>,
) {
    if step < WALK.len() || health {
        walking.push_back((target, step));
    }
}

/// The host report an executor sends at `step` past its walk: a problem on even steps, none
/// on odd ones, so that every report changes what the scheduler shows.
fn host_report(step: usize) -> HostReport {
    let problems = if (step - WALK.len()) % 2 == 0 {
        vec![HostProblem::new(
            HostCheck::Service,
            "lia",
            "not running (status 3)",
        )]
    } else {
        Vec::new()
    };
    HostReport { problems }
}

/// What the scheduler answered a report.
pub(super) struct Answered {
    pub status: u16,
    /// The plan the answer carried and registered the executor's nudge past
    /// (`api::NUDGE_PAST_FIELD`: a report of `running`).
    pub registered: Option<serde_json::Value>,
    /// The devices the report carried are recorded (`api::DEVICES_RECORDED_FIELD`).
    pub devices_recorded: bool,
}

/// Reports that the executor entered phase `WALK[step]` (past the walk: its host's health,
/// `host_report`), with the `devices` it found, if any, in the report of the phase after the
/// devices phase, as the storage executor does (by `POST devices` after, when the scheduler
/// does not say it recorded them): the last answer. Each answer is read whole, so that a
/// kept connection serves the executor's next call.
pub(super) fn report_phase(
    http: &ureq::Agent,
    scheduler_url: &str,
    executor_id: &str,
    secret: &str,
    step: usize,
    devices: &[String],
) -> Result<Answered, ureq::Error> {
    let post = |action: Action, body: Result<String, serde_json::Error>| {
        let url = format!(
            "{}{}",
            scheduler_url.trim_end_matches('/'),
            api::path(executor_id, action)
        );
        let body = body.unwrap_or_default();
        let mut request = http
            .post(&url)
            .header("Authorization", &format!("Bearer {secret}"))
            .header("Content-Type", "application/json");
        if action == Action::Phase {
            // As the storage executor: a phase's work takes minutes on a host, and after
            // `running` the node idles, holding no connection.
            request = request.header("Connection", "close");
        }
        let mut answer = request.send(body.as_bytes())?;
        let text = answer.body_mut().read_to_vec()?;
        Ok(read_answer(answer.status().as_u16(), &text))
    };
    let Some(&phase) = WALK.get(step) else {
        return post(Action::Health, serde_json::to_string(&host_report(step)));
    };
    let mut report = PhaseReport::entered(phase);
    let after_devices = step.checked_sub(1).and_then(|s| WALK.get(s)) == Some(&Phase::Devices);
    if after_devices && !devices.is_empty() {
        report.devices = Some(devices.to_vec());
    }
    let answered = post(Action::Phase, serde_json::to_string(&report))?;
    if report.devices.is_none()
        || answered.devices_recorded
        || !(200..300).contains(&answered.status)
    {
        return Ok(answered);
    }
    let found = DevicesReport {
        devices: devices.into(),
    };
    post(Action::Devices, serde_json::to_string(&found))
}

/// A report's answer, read as the storage executor reads it (`api::ReportAnswer`): the plan
/// it carries when it registered the nudge past it, and whether it recorded the devices the
/// report carried.
fn read_answer(status: u16, answer: &[u8]) -> Answered {
    let a = serde_json::from_slice::<api::ReportAnswer<serde_json::Value>>(answer).ok();
    let devices_recorded = a.as_ref().is_some_and(|a| a.devices_recorded);
    let registered = a.and_then(|a| {
        let plan = a.plan?;
        (a.nudge_past.is_some() && plan["version"].as_u64() == a.nudge_past).then_some(plan)
    });
    Answered {
        status,
        registered,
        devices_recorded,
    }
}

/// One sender: a report at a time, answered with the step the executor is at next.
fn send_reports(
    jobs: &Receiver<(PhaseReportTarget, usize)>,
    done: &Sender<(PhaseReportTarget, usize)>,
) {
    // One client per scheduler certificate (a failed-over scheduler has a new one).
    let mut clients: HashMap<String, Option<ureq::Agent>> = HashMap::new();
    for (target, step) in jobs {
        let http = clients
            .entry(target.pin.clone())
            .or_insert_with(|| pinned(&target.pin));
        let Some(http) = http else {
            log::warn!("{}: malformed scheduler fingerprint", target.executor_id);
            continue;
        };
        let sent = report_phase(
            http,
            &target.scheduler_url,
            &target.executor_id,
            &target.secret,
            step,
            &target.devices,
        );
        let step = match sent.map(|a| a.status) {
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
        if done.send((target, step)).is_err() {
            return;
        }
    }
}
