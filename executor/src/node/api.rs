//! The scheduler's executor API, as this executor calls it: the node plan (long poll), phase
//! and device reports. Every call carries the executor's secret as a bearer token; the
//! secret appears in no log line or error.
//!
//! Calls are retried ([`SchedulerApi::retry`]) with capped, jittered backoff for as long as
//! the scheduler is away: an unreachable or failing scheduler is never a failure of the node,
//! since Mesos keeps this executor running while its framework fails over (for up to the
//! failover timeout, a week by default). Only an answer that can never change (401: wrong
//! secret, 404: this executor was replaced) ends the retries. A long outage is logged once
//! when it starts and once when it ends, not per attempt.
//!
//! A scheduler may come back on another host or port, and always with another certificate.
//! It then tells its running executors its new address and certificate with a framework
//! MESSAGE ([`super::endpoint::message`]); the executor's main loop forwards them over a
//! channel, and the client switches to them at its next call, cutting short any backoff wait.
//!
//! An idle node ([`Scheduler::idle_wait`]) holds no connection to the scheduler: it asks for
//! its plan with `nudge=1`, and asks again when the scheduler's MESSAGE says the plan moved
//! on (or announces the scheduler anew: a new scheduler owes nobody a nudge), and otherwise
//! as often as the plan says (`idle_poll_s`, ± a fifth): Mesos delivers a MESSAGE at most
//! once, and that request is the node's sign of life, without which the scheduler shows it
//! `unknown` after `-health.stale`.
//! Calls go over TLS to the pinned certificate only (`endpoint.rs`, which also decides what
//! another certificate leads to), each on a new connection that resumes the client's TLS
//! session; the client starts a new session every [`SESSION_MAX_AGE`].

use super::endpoint::{on_mismatch, pin_grace, Endpoint, Mismatch, Signal};
use super::plan::Plan;
use std::fmt;
use std::io::Read;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use storage_framework::backoff::{Backoff, Jitter};
use storage_framework::contract::api::{self, Action};

/// The client's own bound on a call: the longest plan wait the scheduler grants, and a margin.
const CALL_TIMEOUT: Duration = Duration::from_secs(70);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_BODY: u64 = 1 << 20;
const RETRY_START: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// A TLS session is resumed for at most this long, then the client makes a new one with a
/// full handshake: a resumed TLS 1.2 connection is as safe as its session's master secret
/// (`storage_framework::tls::executor_client_config`), so this bounds what one stolen secret
/// opens. One full handshake an hour per executor is 3 a second at 10,000.
pub const SESSION_MAX_AGE: Duration = Duration::from_secs(3600);
/// How often an idle node asks for its plan when the plan does not say: a third of the
/// scheduler's default `-health.stale`. 10,000 idle executors ask 167 times a second, each
/// over a new TLS connection, which the scheduler holds for milliseconds.
pub const IDLE_POLL: Duration =
    Duration::from_secs(storage_framework::contract::plan::DEFAULT_IDLE_POLL_S);
/// The plan's `idle_poll_s` is taken within these bounds.
const IDLE_POLL_BOUNDS: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(300));

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The scheduler will never accept this executor's calls (401, 404): stop.
    Refused(String),
    /// No answer at all (connection refused, timeout): the scheduler is away.
    Unreachable(String),
    /// An answer worth another try: 5xx, 429, a body that did not parse.
    Transient(String),
    /// The scheduler's address presented another certificate than the pinned one.
    Pin(String),
    /// 409: the report does not fit the scheduler's record (a rollout report of another
    /// generation, or out of turn). An answer, not retried: the caller fetches the plan
    /// again and starts over.
    Conflict(String),
    /// 400 and the other 4xx but 408 and 429: the scheduler read the request and will not
    /// take it as it is (a device name it does not accept, a body too large). The same
    /// request gets the same answer: not retried; the caller fails what needed it.
    Rejected(String),
}

impl ApiError {
    /// The scheduler's answer to this request, final: sent again, it would get the same.
    fn is_final(&self) -> bool {
        matches!(
            self,
            ApiError::Refused(_) | ApiError::Conflict(_) | ApiError::Rejected(_)
        )
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Refused(s)
            | ApiError::Unreachable(s)
            | ApiError::Transient(s)
            | ApiError::Pin(s)
            | ApiError::Conflict(s)
            | ApiError::Rejected(s) => f.write_str(s),
        }
    }
}

/// How the scheduler answered lately, so that only a change of it is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Up,
    Unreachable,
    Failing,
    /// Its address presents another certificate than the pinned one.
    OtherCertificate,
}

/// The link after `result` and the one log line the change deserves, if any.
/// `grace`: how long another certificate is waited through ([`pin_grace`]).
fn link_change(
    before: Link,
    result: &Result<(), ApiError>,
    root: &str,
    grace: Duration,
) -> (Link, Option<String>) {
    let after = match result {
        // Listed, not `is_final`: a new kind of error is a new decision here.
        Ok(()) | Err(ApiError::Refused(_) | ApiError::Conflict(_) | ApiError::Rejected(_)) => {
            Link::Up
        }
        Err(ApiError::Unreachable(_)) => Link::Unreachable,
        Err(ApiError::Transient(_)) => Link::Failing,
        Err(ApiError::Pin(_)) => Link::OtherCertificate,
    };
    if after == before {
        return (after, None);
    }
    let line = match result {
        Err(e @ ApiError::Unreachable(_)) => format!(
            "scheduler at {root} unreachable ({e}); the task stays running, retrying with \
             backoff up to {} s (next log line when this changes)",
            RETRY_MAX.as_secs()
        ),
        Err(e @ ApiError::Pin(_)) => format!(
            "{e}; a scheduler that failed over announces its new certificate: the task stays \
             running, retrying with backoff up to {} s for at most {} (next log line when \
             this changes)",
            RETRY_MAX.as_secs(),
            span(grace)
        ),
        Err(e) => format!(
            "scheduler at {root} answers with errors ({e}); retrying with backoff up to {} s \
             (next log line when this changes)",
            RETRY_MAX.as_secs()
        ),
        Ok(()) => format!("scheduler at {root} answers again"),
    };
    (after, Some(line))
}

/// How often an idle node asks for its plan: the plan's `idle_poll_s`, within bounds, or
/// [`IDLE_POLL`] when it says nothing.
pub fn idle_poll(plan_s: u64) -> Duration {
    match plan_s {
        0 => IDLE_POLL,
        s => Duration::from_secs(s).clamp(IDLE_POLL_BOUNDS.0, IDLE_POLL_BOUNDS.1),
    }
}

/// `poll` ± a fifth, from `random`, so that executors started together do not ask together.
fn jittered(poll: Duration, random: u64) -> Duration {
    let spread = poll.as_millis() as u64 / 5;
    poll - Duration::from_millis(spread) + Duration::from_millis(random % (2 * spread + 1))
}

/// `15 min`, `2 min`, `90 s`.
fn span(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 120 && secs % 60 == 0 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// What a report's answer tells the node besides that it is recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The devices a phase report carried are the node's (`api::DEVICES_RECORDED_FIELD`):
    /// false from a scheduler of an older build, which read only the phase.
    pub devices: bool,
}

/// The scheduler as the node worker calls it: [`SchedulerApi`] over HTTPS, a stand-in in
/// unit tests. Both calls retry until the scheduler answers.
pub trait Scheduler: Send {
    /// The plan: at once without `version`, else once it differs from `version` or the
    /// plan wait ran out (`None`: unchanged).
    fn plan_after(&mut self, version: Option<u64>) -> Result<Option<Plan>, ApiError>;
    /// Posts `body` (JSON) to `action` until the scheduler records it.
    fn post_json(&mut self, action: Action, body: &str) -> Result<Recorded, ApiError>;
    /// An idle node's wait for a plan other than `version`, holding no connection while it
    /// waits, asking at least every `poll`; `None` once the plan wait (the host-check period)
    /// has passed unchanged.
    fn idle_wait(&mut self, version: u64, _poll: Duration) -> Result<Option<Plan>, ApiError> {
        self.plan_after(Some(version))
    }
}

impl dyn Scheduler {
    /// Posts `body` until the scheduler records it.
    pub fn report(
        &mut self,
        action: Action,
        body: &impl serde::Serialize,
    ) -> Result<Recorded, ApiError> {
        let text = serde_json::to_string(body).map_err(|e| {
            ApiError::Transient(format!(
                "POST {}: cannot encode the body: {e}",
                action.segment()
            ))
        })?;
        self.post_json(action, &text)
    }
}

impl Scheduler for SchedulerApi {
    fn plan_after(&mut self, version: Option<u64>) -> Result<Option<Plan>, ApiError> {
        // The scheduler keeps one request per executor: this one ends an owed nudge.
        self.nudge_for = None;
        self.answered_plan = None;
        let wait = if version.is_some() {
            self.plan_wait
        } else {
            Duration::ZERO
        };
        self.retry(|api| api.plan(version, wait))
    }

    fn idle_wait(&mut self, version: u64, poll: Duration) -> Result<Option<Plan>, ApiError> {
        let until = Instant::now() + self.plan_wait;
        if let Some(plan) = self.answered_plan.take() {
            // The `running` (or `storage-attach`) report registered us past the plan its answer
            // carried, as our `nudge=1` request would have: the first ask is the slow timer's.
            self.nudge_for = Some(plan.version);
            self.next_idle_poll = Some(Instant::now() + jittered(poll, self.jitter.next_u64()));
            if plan.version != version {
                return Ok(Some(plan));
            }
        }
        loop {
            self.take_signals();
            let now = Instant::now();
            let due = self.next_idle_poll.is_none_or(|t| now >= t);
            if self.signalled || due || self.nudge_for != Some(version) {
                self.signalled = false;
                self.nudge_for = None;
                self.next_idle_poll = Some(now + jittered(poll, self.jitter.next_u64()));
                if let Some(plan) = self.retry(|api| api.plan_nudged(version))? {
                    // That answer also owes us the nudge past this plan
                    // (`contract::api::PLAN_NUDGE_PARAM`): no second request to register.
                    self.nudge_for = Some(plan.version);
                    return Ok(Some(plan));
                }
                self.nudge_for = Some(version);
            }
            let now = Instant::now();
            if now >= until {
                return Ok(None);
            }
            let wake = self.next_idle_poll.map_or(until, |t| t.min(until));
            match self.moves.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(signal) => self.take(signal),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(wake.saturating_duration_since(Instant::now()))
                }
            }
        }
    }

    fn post_json(&mut self, action: Action, body: &str) -> Result<Recorded, ApiError> {
        let (recorded, plan) = self.retry(|api| api.post_text(action, body))?;
        if plan.is_some() {
            self.answered_plan = plan;
        }
        Ok(recorded)
    }
}

pub struct SchedulerApi {
    /// The scheduler's REST base URL (`https://host:port`) and its certificate.
    endpoint: Endpoint,
    executor_id: String,
    secret: String,
    /// Accepts the pinned certificate only; made anew when the pin changes.
    agent: ureq::Agent,
    /// The scheduler's MESSAGEs (newer endpoints, nudges), from the main loop.
    moves: Receiver<Signal>,
    /// A MESSAGE came since the last idle plan request: ask again.
    signalled: bool,
    /// When an idle node asks for its plan unprompted next.
    next_idle_poll: Option<Instant>,
    /// The version the scheduler owes a nudge past (any other plan request ends that).
    nudge_for: Option<u64>,
    /// The plan a report's answer carried and registered the nudge past
    /// (`api::NUDGE_PAST_FIELD`): the idle wait that follows takes it (its version becomes
    /// `nudge_for`) and need not ask first.
    answered_plan: Option<Plan>,
    jitter: Jitter,
    link: Link,
    /// A call with the current pin has succeeded.
    pin_worked: bool,
    /// Since when calls have met another certificate.
    mismatch_since: Option<Instant>,
    /// When `agent`, and so its TLS session, is to be made anew.
    session_until: Instant,
    /// The longest wait of one plan long poll.
    plan_wait: Duration,
    /// How long a pin that never worked is kept through another certificate.
    new_pin_grace: Duration,
}

fn agent(endpoint: &Endpoint) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_global(Some(CALL_TIMEOUT))
        .build();
    endpoint.agent(config)
}

impl SchedulerApi {
    /// `endpoint` is the launch's (`STORAGE_SCHEDULER_URL` and the task data's fingerprint),
    /// or the latest one the scheduler announced; `moves` brings later announcements.
    pub fn new(
        endpoint: Endpoint,
        executor_id: &str,
        secret: &str,
        moves: Receiver<Signal>,
    ) -> SchedulerApi {
        SchedulerApi {
            agent: agent(&endpoint),
            session_until: Instant::now() + SESSION_MAX_AGE,
            endpoint,
            executor_id: executor_id.to_string(),
            secret: secret.to_string(),
            moves,
            signalled: false,
            next_idle_poll: None,
            nudge_for: None,
            answered_plan: None,
            jitter: Jitter::new(),
            link: Link::Up,
            pin_worked: false,
            mismatch_since: None,
            plan_wait: crate::env::DEFAULT_PLAN_WAIT,
            new_pin_grace: super::endpoint::NEW_PIN_GRACE,
        }
    }

    /// A pin that never worked is kept through another certificate for `grace` (tests
    /// shorten it).
    pub fn with_new_pin_grace(mut self, grace: Duration) -> SchedulerApi {
        self.new_pin_grace = grace;
        self
    }

    fn pin_grace(&self) -> Duration {
        pin_grace(self.pin_worked, self.new_pin_grace)
    }

    /// What is left of the pin grace since calls began to meet another certificate.
    fn pin_grace_left(&self) -> Duration {
        let since = self.mismatch_since.map_or(Duration::ZERO, |s| s.elapsed());
        self.pin_grace().saturating_sub(since)
    }

    /// Long polls wait at most `wait` (a running node checks its host once per poll).
    pub fn with_plan_wait(mut self, wait: Duration) -> SchedulerApi {
        self.plan_wait = wait;
        self
    }

    fn url(&self, action: Action) -> String {
        format!(
            "{}{}",
            self.endpoint.url,
            api::path(&self.executor_id, action)
        )
    }

    /// A failed call as an [`ApiError`]: another certificate than the pinned one is told
    /// apart from a scheduler that is away.
    fn call_error(&self, what: &str, e: ureq::Error) -> ApiError {
        match certificate_error(&e) {
            Some(cert) => ApiError::Pin(format!(
                "{what}: the scheduler at {} presented another certificate than the one \
                 it gave this executor ({cert})",
                self.endpoint.url
            )),
            None => ApiError::Unreachable(format!("{what}: {e}")),
        }
    }

    /// The plan: at once without `version`, else when it differs from `version` or `wait`
    /// ran out (`Ok(None)`: unchanged). One attempt.
    pub fn plan(&self, version: Option<u64>, wait: Duration) -> Result<Option<Plan>, ApiError> {
        let url = match version {
            Some(v) => format!(
                "{}?{}={v}&{}={}",
                self.url(Action::Plan),
                api::PLAN_VERSION_PARAM,
                api::PLAN_WAIT_PARAM,
                wait.as_secs()
            ),
            None => self.url(Action::Plan),
        };
        self.plan_answer(self.agent.get(&url))
    }

    /// Sends a plan request: the plan, or `None` for 304 (unchanged).
    fn plan_answer(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
    ) -> Result<Option<Plan>, ApiError> {
        let what = "GET plan";
        let response = request
            .header("Authorization", &format!("Bearer {}", self.secret))
            .call()
            .map_err(|e| self.call_error(what, e))?;
        let status = response.status().as_u16();
        let body = read_body(response);
        match status {
            200 => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| ApiError::Transient(format!("{what}: the plan does not parse: {e}"))),
            304 => Ok(None),
            _ => Err(classify(what, status, &body)),
        }
    }

    /// The plan if it differs from `version`, else `None` and a nudge owed when it changes.
    /// One attempt, on a connection closed after it: the next call is minutes away.
    fn plan_nudged(&self, version: u64) -> Result<Option<Plan>, ApiError> {
        let url = format!(
            "{}?{}={version}&{}=1",
            self.url(Action::Plan),
            api::PLAN_VERSION_PARAM,
            api::PLAN_NUDGE_PARAM
        );
        let request = self.agent.get(&url).header("Connection", "close");
        self.plan_answer(request)
    }

    /// `POST <base>/<action>` once, `body` being JSON: what the answer says of the report
    /// ([`Recorded`]), and the plan it registered this executor's nudge past, if it did (a
    /// report of `running` or `storage-attach`).
    pub fn post_text(
        &self,
        action: Action,
        body: &str,
    ) -> Result<(Recorded, Option<Plan>), ApiError> {
        let what = format!("POST {}", action.segment());
        let mut request = self
            .agent
            .post(&self.url(action))
            .header("Authorization", &format!("Bearer {}", self.secret))
            .header("Content-Type", "application/json");
        if action == Action::Phase {
            // A phase's work takes minutes on a host, and `running`, which now needs no
            // plan request after it, is followed by an idle node: a connection kept would
            // only hold one of the scheduler's workers until its idle timeout.
            request = request.header("Connection", "close");
        }
        let response = request
            .send(body.as_bytes())
            .map_err(|e| self.call_error(&what, e))?;
        let status = response.status().as_u16();
        let text = read_body(response);
        if status == 200 {
            Ok(read_answer(&what, &text))
        } else {
            Err(classify(&what, status, &text))
        }
    }

    /// Runs `f` until it succeeds or is refused, waiting between attempts with jittered
    /// backoff doubling from 200 ms to 30 s. An announced new address ends the wait and
    /// restarts the backoff: the next attempt goes there at once. After another certificate
    /// the wait is the longest at once ([`retry_delay`]).
    pub fn retry<T>(
        &mut self,
        mut f: impl FnMut(&Self) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let mut backoff = Backoff::new(RETRY_START, RETRY_MAX);
        loop {
            self.take_signals();
            self.renew_session(Instant::now());
            let result = f(self);
            let outcome = result.as_ref().map(|_| ()).map_err(Clone::clone);
            if let Some(refused) = self.judge_pin(&outcome) {
                return Err(refused);
            }
            let (link, line) =
                link_change(self.link, &outcome, &self.endpoint.url, self.pin_grace());
            self.link = link;
            match (&outcome, line) {
                (Ok(()), Some(line)) => log::info!("{line}"),
                (_, Some(line)) => log::warn!("{line}"),
                (_, None) => {}
            }
            match &outcome {
                Ok(()) => return result,
                Err(e) if e.is_final() => return result,
                Err(e) => log::debug!("{e}; attempt {}", backoff.attempts() + 1),
            }
            let delay = retry_delay(&outcome, &mut backoff, self.pin_grace_left());
            let until = Instant::now() + delay;
            match self.moves.recv_timeout(delay) {
                Ok(signal) => {
                    self.take(signal);
                    self.take_signals();
                    backoff.reset();
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The main loop is gone; keep the pace without it.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()))
                }
            }
        }
    }

    /// Keeps track of the pin; the refusal that ends the retries when another certificate
    /// is not to be waited through.
    fn judge_pin(&mut self, outcome: &Result<(), ApiError>) -> Option<ApiError> {
        match outcome {
            Err(ApiError::Pin(text)) => {
                let since = *self.mismatch_since.get_or_insert_with(Instant::now);
                match on_mismatch(self.pin_grace(), since.elapsed()) {
                    Mismatch::Wait => None,
                    Mismatch::Fail => {
                        log::error!("{text}; the node fails");
                        Some(ApiError::Refused(text.clone()))
                    }
                }
            }
            Ok(())
            | Err(
                ApiError::Transient(_)
                | ApiError::Refused(_)
                | ApiError::Conflict(_)
                | ApiError::Rejected(_),
            ) => {
                // The scheduler answered through the pinned certificate.
                self.pin_worked = true;
                self.mismatch_since = None;
                None
            }
            Err(ApiError::Unreachable(_)) => None,
        }
    }

    /// A new agent, so a new TLS session, once the current one is [`SESSION_MAX_AGE`] old.
    fn renew_session(&mut self, now: Instant) {
        if now >= self.session_until {
            self.new_session(now);
        }
    }

    /// An agent for the current endpoint: its TLS session starts afresh, for an hour.
    fn new_session(&mut self, now: Instant) {
        self.agent = agent(&self.endpoint);
        self.session_until = now + SESSION_MAX_AGE;
    }

    /// Every MESSAGE queued so far.
    fn take_signals(&mut self) {
        while let Ok(signal) = self.moves.try_recv() {
            self.take(signal);
        }
    }

    /// A MESSAGE: a new address is followed; either kind has an idle node ask again.
    fn take(&mut self, signal: Signal) {
        self.signalled = true;
        if let Signal::Moved(endpoint) = signal {
            self.follow(endpoint);
        }
    }

    /// Switches to the scheduler's announced address and certificate.
    fn follow(&mut self, endpoint: Endpoint) {
        if endpoint == self.endpoint {
            return;
        }
        log::info!(
            "following the scheduler from {} ({}) to {} ({})",
            self.endpoint.url,
            self.endpoint.pin,
            endpoint.url,
            endpoint.pin
        );
        let new_pin = endpoint.pin != self.endpoint.pin;
        self.endpoint = endpoint;
        if new_pin {
            self.new_session(Instant::now());
            self.pin_worked = false;
            self.mismatch_since = None;
        }
    }
}

/// The wait before the next attempt after `outcome`. Another certificate at the scheduler's
/// address means a new scheduler is there, and only its announcement, which ends the wait at
/// once, can change the answer: attempts before it only cost that scheduler a whole TLS
/// handshake each, which after a restart thousands of executors make together (at 10,000,
/// 5,941 refused requests while a new target spread, memory bench). So the backoff's cap at
/// once, though no later than the moment the pin grace runs out, when the node fails.
fn retry_delay(
    outcome: &Result<(), ApiError>,
    backoff: &mut Backoff,
    grace_left: Duration,
) -> Duration {
    match outcome {
        Err(ApiError::Pin(_)) => backoff.capped_delay().min(grace_left),
        _ => backoff.next_delay(),
    }
}

/// The certificate's rejection in a failed call, if that is what failed it. The pinning
/// verifier's refusal reaches ureq's caller as text only (`storage_framework::tls`), naming
/// the certificate seen and the pinned one.
fn certificate_error(e: &ureq::Error) -> Option<String> {
    let text = e.to_string();
    storage_framework::tls::refused_certificate(&text).then_some(text)
}

/// A report's answer: what the caller learns ([`Recorded`]), and the plan it carries and
/// registered the executor's nudge past (`api::NUDGE_PAST_FIELD`); `None` from a scheduler
/// that does not register, and from an answer that is not what it should be (said in the
/// log): the idle wait then asks, as it always did.
fn read_answer(what: &str, body: &[u8]) -> (Recorded, Option<Plan>) {
    let answer = match serde_json::from_slice::<api::ReportAnswer<Plan>>(body) {
        Ok(a) => a,
        Err(e) => {
            log::warn!("{what}: the answer does not parse ({e}); asking for the plan when idle");
            return (Recorded::default(), None);
        }
    };
    let recorded = Recorded {
        devices: answer.devices_recorded,
    };
    let plan = match (answer.nudge_past, answer.plan) {
        (None, None) => None,
        (Some(past), Some(plan)) if plan.version == past => Some(plan),
        (past, plan) => {
            log::warn!(
                "{what}: the answer registers a nudge past {past:?} with plan {:?}; asking for the plan instead",
                plan.map(|p| p.version)
            );
            None
        }
    };
    (recorded, plan)
}

fn read_body(response: ureq::http::Response<ureq::Body>) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = response
        .into_body()
        .into_reader()
        .take(MAX_BODY)
        .read_to_end(&mut out);
    out
}

fn classify(what: &str, status: u16, body: &[u8]) -> ApiError {
    let text: String = String::from_utf8_lossy(body).chars().take(300).collect();
    let msg = format!("{what}: scheduler answered {status}: {}", text.trim());
    match status {
        401 | 404 => ApiError::Refused(msg),
        409 => ApiError::Conflict(msg),
        408 | 429 => ApiError::Transient(msg),
        400..=499 => ApiError::Rejected(msg),
        _ => ApiError::Transient(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::mpsc;

    const PIN: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn at(url: &str) -> Endpoint {
        Endpoint::new(url, PIN).unwrap()
    }

    fn api(url: &str) -> (SchedulerApi, mpsc::Sender<Signal>) {
        let (tx, rx) = mpsc::channel();
        (SchedulerApi::new(at(url), "e1", "s3cret", rx), tx)
    }

    #[test]
    fn a_tls_session_is_renewed_at_the_first_call_once_it_is_an_hour_old() {
        let (mut api, _tx) = api("https://127.0.0.1:9");
        let until = api.session_until;
        assert!(until >= Instant::now() + SESSION_MAX_AGE - Duration::from_secs(60));
        api.renew_session(until - Duration::from_millis(1));
        assert_eq!(api.session_until, until, "renewed before its hour");
        // Due now: the next call makes a new agent, and the hour starts again.
        api.session_until = Instant::now();
        let before = Instant::now();
        let r = api.retry(|_| Ok::<_, ApiError>(()));
        assert_eq!(r, Ok(()));
        assert!(
            api.session_until >= before + SESSION_MAX_AGE,
            "the call kept a session past its hour"
        );
    }

    #[test]
    fn retry_stops_on_success_or_refusal() {
        let (mut api, _tx) = api("https://127.0.0.1:9");
        let n = Cell::new(0);
        let r = api.retry(|_| {
            n.set(n.get() + 1);
            match n.get() {
                1 => Err(ApiError::Unreachable("down".into())),
                2 => Err(ApiError::Transient("503".into())),
                _ => Ok(7),
            }
        });
        assert_eq!((r, n.get()), (Ok(7), 3));
        let r: Result<(), _> = api.retry(|_| Err(ApiError::Refused("404".into())));
        assert_eq!(r, Err(ApiError::Refused("404".into())));
    }

    #[test]
    fn an_announced_address_ends_the_wait_and_takes_the_next_call() {
        let (mut api, tx) = api("https://old:1/");
        let mut calls: Vec<(String, Instant)> = Vec::new();
        let r = api.retry(|a| {
            calls.push((a.endpoint.url.clone(), Instant::now()));
            if a.endpoint.url == "https://new:2" {
                return Ok(());
            }
            if calls.len() == 3 {
                tx.send(Signal::Moved(at("https://new:2"))).unwrap();
            }
            Err(ApiError::Unreachable("connection refused".into()))
        });
        assert_eq!(r, Ok(()));
        let roots: Vec<&str> = calls.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(
            roots,
            [
                "https://old:1",
                "https://old:1",
                "https://old:1",
                "https://new:2"
            ]
        );
        // The third wait would be 400-800 ms; the announcement cut it short.
        let gap = calls[3].1 - calls[2].1;
        assert!(gap < Duration::from_millis(200), "{gap:?}");
        assert!(api
            .url(Action::Plan)
            .starts_with("https://new:2/api/v1/executors/e1/"));
    }

    #[test]
    fn an_outage_is_logged_when_it_starts_and_when_it_ends() {
        let down = Err(ApiError::Unreachable("refused".into()));
        let failing = Err(ApiError::Transient("503".into()));
        let mut link = Link::Up;
        let mut lines = Vec::new();
        let other = Err(ApiError::Pin("another certificate".into()));
        for r in [
            &down,
            &down,
            &down,
            &failing,
            &failing,
            &other,
            &other,
            &Ok(()),
            &Ok(()),
        ] {
            let (l, line) = link_change(link, r, "https://s:1", super::super::endpoint::PIN_GRACE);
            link = l;
            lines.extend(line);
        }
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].contains("unreachable") && lines[0].contains("stays running"));
        assert!(lines[1].contains("answers with errors"));
        assert!(lines[2].contains("another certificate") && lines[2].contains("15 min"));
        assert!(lines[3].contains("answers again"));
    }

    /// The scheduler that launched this executor failed over before its first call: the
    /// launch's pin never worked, and the new scheduler's certificate is waited through until
    /// its announcement (a node failed at once here, and its executor was relaunched).
    #[test]
    fn a_pin_that_never_worked_waits_for_the_announcement_of_a_failed_over_scheduler() {
        const NEW: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
        let (mut api, tx) = api("https://s:1");
        let new = Endpoint::new("https://s:1", NEW).unwrap();
        let mut pins = Vec::new();
        let r = api.retry(|a| {
            pins.push(a.endpoint.pin.to_string());
            if a.endpoint.pin.to_string() == NEW {
                return Ok(());
            }
            tx.send(Signal::Moved(new.clone())).unwrap();
            Err(ApiError::Pin("another certificate".into()))
        });
        assert_eq!(r, Ok(()));
        assert_eq!(pins, [PIN, NEW]);
    }

    #[test]
    fn another_certificate_fails_the_node_when_the_grace_runs_out() {
        let (api, tx) = api("https://s:1");
        let mut api = api.with_new_pin_grace(Duration::from_millis(300));
        let other = || Err::<(), _>(ApiError::Pin("another certificate".into()));
        // Another certificate waits for a MESSAGE (or up to 30 s): one ends each wait here.
        let mismatch = || {
            tx.send(Signal::PlanChanged(1)).unwrap();
            other()
        };
        let start = Instant::now();
        let attempts = Cell::new(0);
        let r = api.retry(|_| {
            attempts.set(attempts.get() + 1);
            other()
        });
        assert_eq!(r, Err(ApiError::Refused("another certificate".into())));
        assert!(start.elapsed() >= Duration::from_millis(300));
        // Not asked again every 200 ms meanwhile: once more, as the grace ran out.
        assert_eq!(attempts.get(), 2);
        // Once the pin has worked, another certificate is waited through for longer.
        let n = Cell::new(0);
        let r = api.retry(|_| {
            n.set(n.get() + 1);
            match n.get() {
                1 => Ok(()),
                2 => mismatch(),
                _ => Ok(()),
            }
        });
        assert_eq!(r, Ok(()));
        let r = api.retry(|_| {
            n.set(n.get() + 1);
            if n.get() < 6 {
                mismatch()
            } else {
                Ok(())
            }
        });
        assert_eq!((r, n.get()), (Ok(()), 6));
        assert_eq!(api.pin_grace(), super::super::endpoint::PIN_GRACE);
    }

    /// Another certificate: the longest wait at once (a MESSAGE ends it), never past the
    /// pin grace; anything else climbs from the first step.
    #[test]
    fn another_certificate_waits_the_backoff_cap_within_the_grace() {
        let pin = Err(ApiError::Pin("another certificate".into()));
        let away = Err(ApiError::Unreachable("refused".into()));
        let grace = Duration::from_secs(600);
        let mut backoff = Backoff::new(RETRY_START, RETRY_MAX);
        let first = retry_delay(&away, &mut backoff, grace);
        assert!(first <= RETRY_START, "{first:?}");
        for _ in 0..20 {
            let d = retry_delay(&pin, &mut Backoff::new(RETRY_START, RETRY_MAX), grace);
            assert!(d >= RETRY_MAX / 2 && d <= RETRY_MAX, "{d:?}");
        }
        let short = Duration::from_secs(3);
        assert_eq!(retry_delay(&pin, &mut backoff, short), short);
    }

    #[test]
    fn an_idle_node_asks_unprompted_as_the_plan_says_within_a_fifth() {
        assert_eq!(idle_poll(0), IDLE_POLL, "an older scheduler's plan");
        assert_eq!(idle_poll(20), Duration::from_secs(20));
        assert_eq!(idle_poll(1), IDLE_POLL_BOUNDS.0);
        assert_eq!(idle_poll(86_400), IDLE_POLL_BOUNDS.1);
        let poll = Duration::from_secs(60);
        let fifth = poll / 5;
        assert_eq!(jittered(poll, 0), poll - fifth);
        let spread = fifth.as_millis() as u64;
        assert_eq!(jittered(poll, 2 * spread), poll + fifth);
        assert_eq!(jittered(poll, 2 * spread + 1), poll - fifth, "wraps");
        let mut jitter = Jitter::new();
        let polls: std::collections::BTreeSet<Duration> =
            (0..50).map(|_| jittered(poll, jitter.next_u64())).collect();
        assert!(polls.len() > 40, "spread out: {polls:?}");
    }

    /// A report's answer registers the nudge only when it carries the plan it names: an
    /// older scheduler's answer, or one that is not what it should be, leaves the idle wait
    /// to ask as before.
    #[test]
    fn a_report_answer_registers_with_the_plan_it_carries() {
        let plan = |body: &str| read_answer("POST phase", body.as_bytes()).1;
        let p = plan(r#"{"recorded":true,"nudge_past":7,"plan":{"version":7,"hostname":"h1"}}"#);
        assert_eq!(
            p.map(|p| (p.version, p.hostname.to_string())),
            Some((7, "h1".into()))
        );
        for other in [
            r#"{"recorded":true}"#,
            r#"{"recorded":true,"nudge_past":7}"#,
            r#"{"recorded":true,"nudge_past":7,"plan":{"version":8}}"#,
            r#"{"recorded":true,"nudge_past":7,"plan":{"version":"7"}}"#,
            r#"{"recorded":true,"plan":{"version":7}}"#,
            "recorded",
            "",
        ] {
            assert!(plan(other).is_none(), "{other}");
        }
    }

    /// Registered by its `running` report, an idle node takes the plan the answer carried
    /// and asks nothing until a MESSAGE or its slow timer: the waits end without a
    /// connection, the first with that plan when it is not the one the node held.
    #[test]
    fn a_node_registered_by_its_running_report_idles_without_asking() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let (api, _tx) = api(&url);
        let mut api = api.with_plan_wait(Duration::from_millis(200));
        // What `post_json` keeps of an answer `{"recorded":true,"nudge_past":7,"plan":{..}}`.
        let answer = r#"{"recorded":true,"nudge_past":7,"plan":{"version":7}}"#;
        api.answered_plan = read_answer("POST phase", answer.as_bytes()).1;
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let first = api.idle_wait(6, Duration::from_secs(60));
            let then = api.idle_wait(7, Duration::from_secs(60));
            let versions = |r: Result<Option<Plan>, ApiError>| r.map(|p| p.map(|p| p.version));
            let _ = done_tx.send((versions(first), versions(then)));
        });
        let ended = done.recv_timeout(Duration::from_secs(20));
        assert_eq!(
            ended,
            Ok((Ok(Some(7)), Ok(None))),
            "the idle wait asked the scheduler"
        );
        let asked = listener.accept();
        assert!(asked.is_err(), "a connection was made");
    }

    #[test]
    fn every_route_of_the_contract_has_its_url() {
        let (api, _tx) = api("https://s:1/");
        for r in api::ROUTES {
            let url = api.url(r.action);
            let path = url.strip_prefix("https://s:1").unwrap();
            assert_eq!(api::split_path(path), Some(("e1", r.segment)));
        }
    }

    /// The error `retry` hands back when every call is answered `status` with `body`, and
    /// how many calls it made (any but the first would have succeeded).
    fn answered(status: u16, body: &[u8]) -> (u32, ApiError) {
        let (mut api, _tx) = api("https://s:1");
        let n = Cell::new(0);
        let r: Result<(), _> = api.retry(|_| {
            n.set(n.get() + 1);
            if n.get() > 1 {
                return Ok(());
            }
            Err(classify("POST phase", status, body))
        });
        (n.get(), r.expect_err("handed back"))
    }

    #[test]
    fn a_conflict_is_an_answer_handed_back_not_retried() {
        let body = b"rollout report refused: generation 2 is not the target's (3)";
        let (calls, e) = answered(409, body);
        assert_eq!(calls, 1, "retried");
        assert!(matches!(e, ApiError::Conflict(_)), "{e:?}");
        assert!(e.to_string().contains("409: rollout report refused"), "{e}");
    }

    /// A report the scheduler will not take as it is (400: a device name it refuses) gets
    /// the same answer however often it is sent: handed back at once, naming the answer, so
    /// that the node fails what needed it rather than retrying for ever.
    #[test]
    fn a_report_refused_as_malformed_is_handed_back_not_retried() {
        let body = b"invalid phase report: device \"sd a\" is not a device name";
        let (calls, e) = answered(400, body);
        assert_eq!(calls, 1, "retried");
        assert!(matches!(e, ApiError::Rejected(_)), "{e:?}");
        assert!(e.to_string().contains("400: invalid phase report"), "{e}");
    }

    #[test]
    fn statuses_are_classified() {
        assert!(matches!(classify("x", 401, b""), ApiError::Refused(_)));
        assert!(matches!(classify("x", 404, b"gone"), ApiError::Refused(_)));
        assert!(matches!(classify("x", 413, b""), ApiError::Rejected(_)));
        assert!(matches!(classify("x", 408, b""), ApiError::Transient(_)));
        assert!(matches!(classify("x", 429, b""), ApiError::Transient(_)));
        assert!(matches!(classify("x", 503, b""), ApiError::Transient(_)));
        assert!(classify("GET plan", 500, b"boom")
            .to_string()
            .contains("500: boom"));
    }
}
