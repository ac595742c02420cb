//! Emulated storage executors that call the scheduler as the real one does
//! (`MasterConfig::synthetic_plan_waits`): each asks for its plan, reports its node's phases
//! to `running` (`POST .../phase`, each on a connection closed after it, as the storage
//! executor's) over TLS pinned to the scheduler's certificate and leaving from its own
//! agent's address (`bound_tcp.rs`), waiting after `storage-attach` until its plan says
//! `storage_ready` as the storage executor's node does (registered for a nudge, asking again
//! on one or every [`WAIT_POLL`]), then idles as the storage executor's running node does:
//! registered by its `running` report's answer for the plan that answer carries
//! (`nudge_past`), or else by asking with `nudge=1` on a connection closed
//! after the answer (which registers it for a nudge past the plan it holds then, a new one
//! too), and asks again when a framework MESSAGE nudges it (`plan_version`) or
//! announces the scheduler (a new address and certificate move it there), or when its slow
//! timer runs out. So the scheduler holds what a real cluster makes it hold.
//!
//! One thread per executor (the storage executor's node worker is one thread too), with a
//! small stack, so that 10,000 fit; a pacer hands out the phase reports at the rate asked
//! for, across them all. A registry thread owns what they saw: the plan version and target
//! generation each executor holds, and when it first saw that generation, which a bench reads
//! ([`super::MasterHandle::synthetic_plans`]) to time a plan change.

use super::bound_tcp::BoundTcp;
use super::synthetic::PhaseReportTarget;
use super::synthetic_phases::{report_phase, WALK};
use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::backoff::Backoff;
use storage_framework::contract::api::{self, Action};
use storage_framework::contract::Phase;
use storage_framework::tls::{self, Fingerprint, PinnedVerifier};

/// The storage executor's slow timer while it waits for its plan to move (its plan wait,
/// `DEFAULT_PLAN_WAIT`), jittered as its idle poll is.
const WAIT_POLL: Duration = Duration::from_secs(50);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The storage executor's unprompted plan request of an idle node when the plan does not say
/// (`IDLE_POLL`).
const IDLE_POLL: Duration =
    Duration::from_secs(storage_framework::contract::plan::DEFAULT_IDLE_POLL_S);
/// Between failed polls (the scheduler restarting, or presenting a certificate this
/// executor does not know yet), as the storage executor's retry: its jittered backoff
/// from `RETRY_START` up to `RETRY_MAX`, starting again after an answer or an announcement
/// (which also cuts the pause short). A fixed short pause made every executor whose slow timer ran
/// out while a restarted scheduler was not yet announced to it retry all along: at 10,000
/// agents 95,000 failed requests, each a full TLS handshake on the new scheduler, during
/// the plan change the memory bench times. Another certificate than the pinned one waits
/// the cap at once, as the storage executor does: only an announcement can change it.
const RETRY_START: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Enough for a blocking TLS client; the pages touched are what counts.
const STACK: usize = 256 * 1024;

/// What one emulated executor holds.
#[derive(Debug, Clone)]
pub struct SeenPlan {
    pub executor_id: String,
    pub version: u64,
    pub target_generation: u64,
    /// When this executor first got a plan of `target_generation`.
    pub generation_seen: Instant,
    /// When it last got an announcement of a new scheduler address or certificate.
    pub announced: Option<Instant>,
    /// Plan requests answered (200 or 304).
    pub answers: u64,
    /// Plan requests that failed (refused, reset, a certificate it does not accept).
    pub failures: u64,
    /// The scheduler answered its last plan request 304, or 200 to a `nudge=1` request: it
    /// owes this executor a nudge.
    pub idle: bool,
    /// Nudges received.
    pub nudges: u64,
    /// Its `running` report was recorded: it waits as an idle node, not for its disks.
    pub running: bool,
}

#[derive(Clone, PartialEq)]
struct Endpoint {
    url: String,
    pin: String,
}

/// A framework MESSAGE, read as the storage executor reads it.
enum Signal {
    Moved(Endpoint),
    Nudge,
}

enum Msg {
    Add(PhaseReportTarget),
    Announce { executor_id: String, data: Vec<u8> },
    Stats(Sender<Vec<SeenPlan>>),
}

/// What an executor's thread tells the registry, and when it happened: the registry,
/// one thread for all 10,000, may take it up much later.
struct Seen {
    executor_id: String,
    what: What,
    at: Instant,
}

enum What {
    Plan {
        version: u64,
        target_generation: u64,
        /// It answered a `nudge=1` request: the scheduler owes this executor a nudge.
        registered: bool,
    },
    Unchanged,
    Failed,
    Moved,
    Nudged,
    Running,
}

/// The handle: the registry thread ends when every handle is gone, and each executor's
/// thread after its poll under way.
#[derive(Clone)]
pub(super) struct PlanWaiters {
    msgs: Sender<Msg>,
}

impl PlanWaiters {
    /// `per_sec`: phase reports a second across the executors.
    pub fn start(per_sec: f64) -> PlanWaiters {
        let (msgs, rx) = crossbeam_channel::unbounded();
        let (turns_tx, turns) = crossbeam_channel::bounded::<()>(0);
        let every = Duration::from_secs_f64(1.0 / per_sec.max(0.001));
        let pacer = std::thread::Builder::new()
            .name("synthetic-pacer".into())
            .spawn(move || pace(&turns_tx, every));
        let spawned = pacer.and_then(|_| {
            std::thread::Builder::new()
                .name("synthetic-plans".into())
                .spawn(move || registry(&rx, &turns))
        });
        if let Err(e) = spawned {
            log::warn!("synthetic executors: {e}");
        }
        PlanWaiters { msgs }
    }

    /// An executor that has started: it reports its phases, then waits for plan changes.
    pub fn add(&self, target: PhaseReportTarget) {
        let _ = self.msgs.send(Msg::Add(target));
    }

    /// A framework MESSAGE to `executor_id` (an announcement or a nudge).
    pub fn message(&self, executor_id: &str, data: &[u8]) {
        let _ = self.msgs.send(Msg::Announce {
            executor_id: executor_id.to_string(),
            data: data.to_vec(),
        });
    }

    pub fn stats(&self, reply: Sender<Vec<SeenPlan>>) {
        let _ = self.msgs.send(Msg::Stats(reply));
    }
}

/// A nudge, or the announcement's address and certificate, as the storage executor reads
/// them.
fn signal(data: &[u8]) -> Option<Signal> {
    use storage_framework::contract::env;
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    if v[env::NUDGE_PLAN_VERSION].is_u64() {
        return Some(Signal::Nudge);
    }
    Some(Signal::Moved(Endpoint {
        url: v[env::ANNOUNCED_SCHEDULER_URL].as_str()?.to_string(),
        pin: v[env::ANNOUNCED_FINGERPRINT].as_str()?.to_string(),
    }))
}

/// One phase report's turn every `every`, to whichever executor asks; ends when none is
/// left to ask.
fn pace(turns: &Sender<()>, every: Duration) {
    let mut next = Instant::now();
    while turns.send(()).is_ok() {
        next = Instant::now().max(next + every);
        // Paces the load generator itself (not a wait for some condition).
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
}

fn registry(msgs: &Receiver<Msg>, turns: &Receiver<()>) {
    let (seen_tx, seen) = crossbeam_channel::unbounded::<Seen>();
    let mut moves: HashMap<String, Sender<Signal>> = HashMap::new();
    let mut plans: HashMap<String, SeenPlan> = HashMap::new();
    loop {
        select! {
            recv(msgs) -> m => match m {
                Ok(Msg::Add(target)) => {
                    if moves.contains_key(&target.executor_id) {
                        continue;
                    }
                    let (tx, rx) = crossbeam_channel::unbounded();
                    let id = target.executor_id.clone();
                    let (seen, turns) = (seen_tx.clone(), turns.clone());
                    let spawned = std::thread::Builder::new()
                        .name("synthetic-executor".into())
                        .stack_size(STACK)
                        .spawn(move || run_executor(target, &rx, &seen, &turns));
                    match spawned {
                        Ok(_) => {
                            moves.insert(id, tx);
                        }
                        Err(e) => log::warn!("{id}: no plan waiter: {e}"),
                    }
                }
                Ok(Msg::Announce { executor_id, data }) => {
                    match (moves.get(&executor_id), signal(&data)) {
                        (Some(tx), Some(s)) => {
                            let _ = tx.send(s);
                        }
                        (_, None) => log::warn!("{executor_id}: MESSAGE unreadable"),
                        (None, _) => {}
                    }
                }
                Ok(Msg::Stats(reply)) => {
                    let _ = reply.send(plans.values().cloned().collect());
                }
                // Every handle is gone: dropping the move senders ends the executors.
                Err(_) => return,
            },
            recv(seen) -> s => {
                let Ok(s) = s else { continue };
                record(&mut plans, s);
            }
        }
    }
}

fn record(plans: &mut HashMap<String, SeenPlan>, s: Seen) {
    let now = s.at;
    let p = plans
        .entry(s.executor_id.clone())
        .or_insert_with(|| fresh(s.executor_id, now));
    match s.what {
        What::Plan {
            version,
            target_generation,
            registered,
        } => {
            if p.target_generation != target_generation || p.answers == 0 {
                p.generation_seen = now;
            }
            p.version = version;
            p.target_generation = target_generation;
            p.answers += 1;
            p.idle = registered;
        }
        What::Unchanged => {
            p.answers += 1;
            p.idle = true;
        }
        What::Failed => {
            p.failures += 1;
            p.idle = false;
        }
        What::Moved => p.announced = Some(now),
        What::Nudged => p.nudges += 1,
        What::Running => p.running = true,
    }
}

fn tell(seen: &Sender<Seen>, executor_id: &str, what: What) {
    let _ = seen.send(Seen {
        executor_id: executor_id.to_string(),
        what,
        at: Instant::now(),
    });
}

fn fresh(executor_id: String, now: Instant) -> SeenPlan {
    SeenPlan {
        executor_id,
        version: 0,
        target_generation: 0,
        generation_seen: now,
        announced: None,
        answers: 0,
        failures: 0,
        idle: false,
        nudges: 0,
        running: false,
    }
}

/// An HTTPS client of its own (one keep-alive connection from `source`, as an executor has)
/// that accepts the certificate of fingerprint `pin` only. Buffers of a size a plan fits in:
/// ureq's default 128 KiB each way, 10,000 times, would be 2.5 GB.
fn pinned(pin: &str, source: std::net::Ipv4Addr) -> Option<ureq::Agent> {
    let pin = Fingerprint::parse(pin).ok()?;
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .timeout_global(Some(REQUEST_TIMEOUT))
        .max_idle_connections(1)
        .max_idle_connections_per_host(1)
        .input_buffer_size(16 * 1024)
        .output_buffer_size(4 * 1024)
        .build();
    let verifier = Arc::new(PinnedVerifier::new(vec![pin]));
    Some(tls::agent_over(
        config,
        tls::executor_client_config(verifier),
        BoundTcp { local: source },
    ))
}

/// What an executor reads of its plan: the rest it does not need.
struct PlanFacts {
    version: u64,
    target_generation: u64,
    idle_poll_s: Option<u64>,
    storage_ready: bool,
}

fn plan_facts(body: &[u8]) -> Option<PlanFacts> {
    plan_facts_of(&serde_json::from_slice(body).ok()?)
}

fn plan_facts_of(v: &serde_json::Value) -> Option<PlanFacts> {
    Some(PlanFacts {
        version: v["version"].as_u64()?,
        target_generation: v["target_generation"].as_u64()?,
        idle_poll_s: v["idle_poll_s"].as_u64(),
        storage_ready: v["storage_ready"].as_bool().unwrap_or(false),
    })
}

/// When [`ask_until`] stops asking.
#[derive(Clone, Copy, PartialEq)]
enum Until {
    /// At the first plan.
    FirstPlan,
    /// At a plan that says the node's disks are in the pool (`storage-attach`'s wait).
    StorageReady,
    /// Never: the idle node's requests, until the cluster shuts down.
    ShutDown,
}

/// Where an executor sends its plan requests, and the client that trusts that scheduler.
struct Scheduler {
    at: Endpoint,
    source: std::net::Ipv4Addr,
    http: Option<ureq::Agent>,
}

impl Scheduler {
    fn new(url: &str, pin: &str, source: std::net::Ipv4Addr) -> Scheduler {
        Scheduler {
            at: Endpoint {
                url: url.trim_end_matches('/').to_string(),
                pin: pin.to_string(),
            },
            source,
            http: pinned(pin, source),
        }
    }

    /// An announcement: a new address or certificate gets a new client (and connection).
    fn follow(&mut self, to: Endpoint) {
        if to != self.at {
            *self = Scheduler::new(&to.url, &to.pin, self.source);
        }
    }
}

/// One emulated executor, as the storage executor goes: its plan, its phases, then its idle
/// plan requests, the first of them spared when its `running` report registered it for the
/// plan it holds.
fn run_executor(
    target: PhaseReportTarget,
    moves: &Receiver<Signal>,
    seen: &Sender<Seen>,
    turns: &Receiver<()>,
) {
    let id = target.executor_id.clone();
    let mut to = Scheduler::new(&target.scheduler_url, &target.pin, target.source);
    let bearer = format!("Bearer {}", target.secret);
    let mut held = Held {
        version: None,
        poll: IDLE_POLL,
        registered: false,
    };
    let ask = |to: &mut Scheduler, held: &mut Held, until: Until| {
        ask_until(&id, &bearer, to, moves, seen, held, until)
    };
    if !ask(&mut to, &mut held, Until::FirstPlan) {
        return;
    }
    let mut step = 0;
    let mut registered = None;
    while step < WALK.len() {
        if turns.recv().is_err() {
            return;
        }
        let Some(client) = &to.http else {
            log::warn!("{id}: malformed scheduler fingerprint");
            return;
        };
        let sent = report_phase(
            client,
            &to.at.url,
            &id,
            &target.secret,
            step,
            &target.devices,
        );
        match sent {
            Ok(a) if (200..=299).contains(&a.status) => {
                step += 1;
                registered = a.registered;
                if WALK[step - 1] == Phase::StorageAttach {
                    // Its disks: the answer may say they are in already, else it registered
                    // the wait.
                    let ready = registered
                        .take()
                        .and_then(|p| registration(&id, &p, seen, &mut held));
                    if ready != Some(true) && !ask(&mut to, &mut held, Until::StorageReady) {
                        return;
                    }
                }
            }
            // Tried again on a later turn: the scheduler may be restarting.
            Ok(a) => log::debug!("{id}: phase report answered {}", a.status),
            Err(e) => log::debug!("{id}: phase report failed: {e}"),
        }
        if !follow_moves(&id, moves, seen, &mut to) {
            return;
        }
    }
    tell(seen, &id, What::Running);
    // The `running` report's answer: the plan it registered the nudge past.
    if let Some(plan) = &registered {
        registration(&id, plan, seen, &mut held);
    }
    ask(&mut to, &mut held, Until::ShutDown);
}

/// A report's answer that registered the executor for a nudge past the plan it carries
/// (`running`, `storage-attach`): that plan is held, and the slow timer comes first. Whether
/// the plan says `storage_ready`.
fn registration(
    id: &str,
    plan: &serde_json::Value,
    seen: &Sender<Seen>,
    held: &mut Held,
) -> Option<bool> {
    let p = plan_facts_of(plan)?;
    held.version = Some(p.version);
    held.poll = p.idle_poll_s.map_or(IDLE_POLL, Duration::from_secs);
    held.registered = true;
    let plan = What::Plan {
        version: p.version,
        target_generation: p.target_generation,
        registered: true,
    };
    tell(seen, id, plan);
    Some(p.storage_ready)
}

/// Takes the queued MESSAGEs; false once the cluster shuts down.
fn follow_moves(
    id: &str,
    moves: &Receiver<Signal>,
    seen: &Sender<Seen>,
    to: &mut Scheduler,
) -> bool {
    loop {
        match moves.try_recv() {
            Ok(s) => take(id, s, seen, to),
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Disconnected) => return false,
        }
    }
}

/// A MESSAGE: an announcement moves the executor, a nudge is counted.
fn take(id: &str, s: Signal, seen: &Sender<Seen>, to: &mut Scheduler) {
    match s {
        Signal::Moved(e) => {
            tell(seen, id, What::Moved);
            to.follow(e);
        }
        Signal::Nudge => tell(seen, id, What::Nudged),
    }
}

/// What an executor holds between its plan requests.
struct Held {
    /// The plan version it holds (`None`: none yet; its next request is a plain one).
    version: Option<u64>,
    /// Its slow timer, as the plan says.
    poll: Duration,
    /// Its `running` report registered the nudge past `version`: the slow timer comes first.
    registered: bool,
}

/// The plan requests: until the first plan, else as a waiting node's: it asks with
/// `nudge=1` (its connection closed after the answer), then waits for a MESSAGE or its slow
/// timer (its plan's idle poll, or [`WAIT_POLL`] while it waits for its disks); asks at once
/// again after a new plan. False once the cluster shuts down.
fn ask_until(
    id: &str,
    bearer: &str,
    to: &mut Scheduler,
    moves: &Receiver<Signal>,
    seen: &Sender<Seen>,
    held: &mut Held,
    until: Until,
) -> bool {
    // The storage executor's jitter (± a fifth), drawn once per executor.
    let spread = storage_framework::hash::content_hash(id.as_bytes()) % 401;
    let jittered = |poll: Duration| poll.mul_f64(0.8 + spread as f64 / 1000.0);
    let mut retry = Backoff::new(RETRY_START, RETRY_MAX);
    let slow = |held: &Held| match until {
        Until::StorageReady => WAIT_POLL,
        _ => held.poll,
    };
    let mut pause = std::mem::take(&mut held.registered).then(|| jittered(slow(held)));
    loop {
        if let Some(pause) = pause.take() {
            match moves.recv_timeout(pause) {
                Ok(s) => {
                    retry.reset();
                    take(id, s, seen, to)
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
        if !follow_moves(id, moves, seen, to) {
            return false;
        }
        let Some(client) = &to.http else {
            log::warn!("{id}: malformed scheduler fingerprint");
            return false;
        };
        let mut url = format!("{}{}", to.at.url, api::path(id, Action::Plan));
        let nudged = held.version.is_some();
        if let Some(v) = held.version {
            url.push_str(&format!("?version={v}&nudge=1"));
        }
        let (mut other_certificate, mut storage_ready) = (false, false);
        let answer = client
            .get(&url)
            .header("Authorization", bearer)
            .header("Connection", "close")
            .call()
            .map_err(|e| e.to_string())
            .and_then(|mut r| {
                let status = r.status().as_u16();
                let body = r.body_mut().read_to_vec().map_err(|e| e.to_string())?;
                Ok((status, body))
            });
        let outcome = match answer {
            Ok((200, body)) => plan_facts(&body).map(|p| {
                held.version = Some(p.version);
                held.poll = p.idle_poll_s.map_or(IDLE_POLL, Duration::from_secs);
                storage_ready = p.storage_ready;
                What::Plan {
                    version: p.version,
                    target_generation: p.target_generation,
                    registered: nudged,
                }
            }),
            Ok((304, _)) => Some(What::Unchanged),
            Ok((status, _)) => {
                log::debug!("{id}: plan answered {status}");
                Some(What::Failed)
            }
            Err(e) => {
                log::debug!("{id}: plan request failed: {e}");
                other_certificate = storage_framework::tls::refused_certificate(&e);
                Some(What::Failed)
            }
        };
        let Some(outcome) = outcome else {
            log::warn!("{id}: plan without a version or target generation");
            return false;
        };
        // A first plan ends the first-only asking; after the phases it is asked again at
        // once (registering for the next nudge), as the storage executor does when its
        // `running` report did not register it. One that answered a `nudge=1` request
        // registered it already, so, as an unchanged one, it waits for a MESSAGE or the
        // slow timer; a failure after a pause.
        let first_plan = matches!(outcome, What::Plan { .. }) && !nudged;
        pause = match outcome {
            What::Plan { .. } if !nudged => {
                retry.reset();
                None
            }
            What::Failed if other_certificate => Some(retry.capped_delay()),
            What::Failed => Some(retry.next_delay()),
            _ => {
                retry.reset();
                Some(jittered(slow(held)))
            }
        };
        tell(seen, id, outcome);
        let done = match until {
            Until::FirstPlan => first_plan,
            Until::StorageReady => storage_ready,
            Until::ShutDown => false,
        };
        if done {
            return true;
        }
    }
}
