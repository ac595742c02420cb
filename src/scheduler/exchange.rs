//! What the REST server and the dispatcher exchange: the dispatcher's [`Input`]s, the
//! read-side [`View`] it hands out (one per generation), and the executor API's requests,
//! replies and errors. Both sides import this module; neither imports the other's internals.

use crate::contract::api::DevicesReport;
use crate::contract::health::{HostProblem, HostReport};
use crate::mesos::scheduler::Event;
use crate::scheduler::gateway_work::report::AttachQueue;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::model::{ClusterModel, Phase};
use crate::secret::{Secret, Token};
use crossbeam_channel::{Receiver, Sender};
use std::fmt;
use std::sync::Arc;

/// At most this many devices in one report (far above any real node).
pub const MAX_DEVICES: usize = 256;
/// Longest accepted device path.
pub const MAX_DEVICE_PATH: usize = 255;
/// Phase messages and errors are cut to this many characters before they enter the model.
pub const MAX_TEXT: usize = 4096;
/// At most this many problems in one host report (services, a module and every device).
pub const MAX_HOST_PROBLEMS: usize = MAX_DEVICES + 16;
/// A host problem's subject (a service, module or device) is at most this long.
const MAX_SUBJECT: usize = MAX_DEVICE_PATH;
/// A host problem's detail is cut to this many characters: one line of a reason.
const MAX_DETAIL: usize = 300;
/// One call of an executor, as the REST server hands it to the dispatcher.
#[derive(Debug)]
pub struct ExecutorRequest {
    pub executor_id: String,
    /// The bearer token the caller presented; compared in constant time with the stored one.
    pub secret: Secret,
    pub call: ExecutorCall,
    pub reply: ReplyTo,
}

/// Where the answer to an executor request goes: the REST worker's own channel, or, for a
/// plan long poll whose worker has moved on, the one channel of the REST side's waiter,
/// tagged with the wait's id (so 10,000 waits need no thread or channel each).
#[derive(Debug, Clone)]
pub enum ReplyTo {
    Direct(Sender<ExecutorReply>),
    Tagged {
        id: u64,
        to: Sender<(u64, ExecutorReply)>,
    },
}

impl ReplyTo {
    /// False when the asker is gone.
    pub fn send(&self, reply: ExecutorReply) -> bool {
        match self {
            ReplyTo::Direct(tx) => tx.send(reply).is_ok(),
            ReplyTo::Tagged { id, to } => to.send((*id, reply)).is_ok(),
        }
    }

    /// Answers with `e`; false, so that a handler can end with it ("nothing changed").
    pub fn refuse(&self, e: ApiError) -> bool {
        self.send(ExecutorReply::Failed(e));
        false
    }
}

impl From<Sender<ExecutorReply>> for ReplyTo {
    fn from(tx: Sender<ExecutorReply>) -> ReplyTo {
        ReplyTo::Direct(tx)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorCall {
    /// The node plan (see [`PlanAsk`]).
    Plan(PlanAsk),
    Phase(PhaseReport),
    /// Usable devices the executor found (validated: see [`ExecutorCall::devices_from_json`]).
    Devices(Vec<String>),
    Heartbeat,
    /// What a running executor found wrong on its host, sorted, without repeats.
    Health(Vec<HostProblem>),
    /// One event of a running node's day-two walk.
    Rollout(RolloutReport),
}

/// A plan request. Answered at once when `version` is absent or differs from the current
/// version, or when `wait_ms` is 0; otherwise parked until the plan changes. With `nudge`
/// (and `version`, no wait) an unchanged plan is answered `Unchanged` at once, and a
/// framework MESSAGE is owed to the executor when the plan moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanAsk {
    pub version: Option<u64>,
    pub wait_ms: u64,
    pub nudge: bool,
}

pub use crate::contract::api::PhaseReport;
pub use crate::contract::rollout::{RolloutEvent, RolloutReport};

/// The answer to one request.
pub enum ExecutorReply {
    Plan(PlanReply),
    /// The caller holds the current plan; the plan follows when it changes.
    Parked,
    /// The caller holds the current plan; a nudge follows when it changes (HTTP 304).
    Unchanged,
    /// The report is applied to the model.
    Recorded,
    /// A phase report is applied with the devices it carried
    /// (`contract::api::DEVICES_RECORDED_FIELD`).
    RecordedDevices,
    /// A report of `running` or `storage-attach` is applied, and the executor is owed a nudge
    /// once its plan moves past this one, which the answer carries
    /// (`contract::api::NUDGE_PAST_FIELD`).
    RecordedIdle(PlanReply),
    Failed(ApiError),
}

impl fmt::Debug for ExecutorReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecutorReply::Plan(p) => write!(f, "Plan({p:?})"),
            ExecutorReply::Parked => f.write_str("Parked"),
            ExecutorReply::Unchanged => f.write_str("Unchanged"),
            ExecutorReply::Recorded => f.write_str("Recorded"),
            ExecutorReply::RecordedDevices => f.write_str("RecordedDevices"),
            ExecutorReply::RecordedIdle(p) => write!(f, "RecordedIdle({p:?})"),
            ExecutorReply::Failed(e) => write!(f, "Failed({e:?})"),
        }
    }
}

/// A serialized node plan. It may carry a secret (MDM nodes), so `Debug` shows only its
/// version and size.
#[derive(Clone, PartialEq, Eq)]
pub struct PlanReply {
    pub version: u64,
    pub json: Vec<u8>,
}

impl fmt::Debug for PlanReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PlanReply {{ version: {}, {} bytes }}",
            self.version,
            self.json.len()
        )
    }
}

/// An error for the caller: HTTP status, short error, detail naming what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub error: &'static str,
    pub detail: String,
}

impl ApiError {
    pub fn new(status: u16, error: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error,
            detail: detail.into(),
        }
    }

    /// The one answer to a caller that is no current executor or has not its secret: the
    /// same for both, so that no one can probe which executor ids exist. An executor given
    /// it stops (it can never change).
    pub fn refused() -> ApiError {
        ApiError::new(
            401,
            "unauthorized",
            "unknown executor, or not its secret: send Authorization: Bearer <the secret of this executor's TaskInfo.data>",
        )
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.error, self.detail)
    }
}

fn malformed(e: serde_json::Error) -> ApiError {
    ApiError::new(400, "malformed JSON", e.to_string())
}

impl ExecutorCall {
    /// A running node's report that a step which stops a storage service or the host ended.
    pub fn ends_a_disruptive_step(&self) -> bool {
        match self {
            ExecutorCall::Rollout(r) => match &r.event {
                RolloutEvent::Done { step } | RolloutEvent::Failed { step, .. } => {
                    step.disruptive()
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// `{"phase": "packages", "message": "...", "error": "..."}`; the phase by its kebab-case
    /// name. `launching` and `lost` are the scheduler's to set, never an executor's report.
    /// Devices it carries are checked as [`ExecutorCall::devices_from_json`] checks them.
    pub fn phase_from_json(body: &[u8]) -> Result<ExecutorCall, ApiError> {
        // Two steps so that a body that is not JSON at all gets the parser's own message,
        // and a JSON value of the wrong shape gets one naming the field.
        let value: serde_json::Value = serde_json::from_slice(body).map_err(malformed)?;
        let b: PhaseReport<String> = serde_json::from_value(value)
            .map_err(|e| ApiError::new(400, "invalid phase report", e.to_string()))?;
        let phase = Phase::parse(&b.phase).ok_or_else(|| {
            ApiError::new(
                400,
                "invalid phase report",
                format!(
                    "unknown phase {:?}; expected one of {}",
                    b.phase,
                    reportable_phases().join(", ")
                ),
            )
        })?;
        if phase.set_by_scheduler_only() {
            return Err(ApiError::new(
                400,
                "invalid phase report",
                format!(
                    "phase {phase} is set by the scheduler, not reported by executors; expected one of {}",
                    reportable_phases().join(", ")
                ),
            ));
        }
        if let Some(devices) = &b.devices {
            validate_devices(devices).map_err(|detail| {
                ApiError::new(400, "invalid phase report", format!("devices: {detail}"))
            })?;
        }
        Ok(ExecutorCall::Phase(PhaseReport {
            phase,
            message: clean_text(b.message),
            error: clean_text(b.error),
            warning: clean_text(b.warning),
            rebooting: b.rebooting && phase.is_reboot(),
            devices: b.devices,
        }))
    }

    /// `{"devices": ["/dev/sdb", ...]}`: absolute paths under `/dev/`, at most
    /// [`MAX_DEVICES`], no duplicates.
    pub fn devices_from_json(body: &[u8]) -> Result<ExecutorCall, ApiError> {
        let value: serde_json::Value = serde_json::from_slice(body).map_err(malformed)?;
        let b: DevicesReport = serde_json::from_value(value)
            .map_err(|e| ApiError::new(400, "invalid device report", e.to_string()))?;
        validate_devices(&b.devices)
            .map_err(|detail| ApiError::new(400, "invalid device report", detail))?;
        Ok(ExecutorCall::Devices(b.devices.into_owned()))
    }

    /// The heartbeat needs no body; one that is sent must still be JSON.
    pub fn heartbeat_from_json(body: &[u8]) -> Result<ExecutorCall, ApiError> {
        if !body.iter().all(u8::is_ascii_whitespace) {
            serde_json::from_slice::<serde_json::Value>(body).map_err(malformed)?;
        }
        Ok(ExecutorCall::Heartbeat)
    }

    /// `{"problems": [{"check": "service", "subject": "sds", "detail": "not running"}]}`:
    /// at most [`MAX_HOST_PROBLEMS`], each naming its subject; details are cut to one line.
    pub fn health_from_json(body: &[u8]) -> Result<ExecutorCall, ApiError> {
        let invalid = |detail: String| ApiError::new(400, "invalid host report", detail);
        let value: serde_json::Value = serde_json::from_slice(body).map_err(malformed)?;
        let r: HostReport = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        if r.problems.len() > MAX_HOST_PROBLEMS {
            return Err(invalid(format!(
                "{} problems reported; at most {MAX_HOST_PROBLEMS} are accepted",
                r.problems.len()
            )));
        }
        let mut problems = Vec::with_capacity(r.problems.len());
        for p in r.problems {
            let subject = p.subject.trim();
            let shown: String = subject.chars().take(80).collect();
            if subject.is_empty() || subject.len() > MAX_SUBJECT {
                return Err(invalid(format!(
                    "a {:?} problem's subject {shown:?} is empty or longer than {MAX_SUBJECT} \
                     bytes",
                    p.check
                )));
            }
            if subject.chars().any(char::is_control) {
                return Err(invalid(format!(
                    "subject {shown:?} contains a control character"
                )));
            }
            let line: String = p.detail.split_whitespace().collect::<Vec<_>>().join(" ");
            let detail = match clean_text(Some(line)) {
                Some(d) if d.chars().count() > MAX_DETAIL => d.chars().take(MAX_DETAIL).collect(),
                Some(d) => d,
                None => "failed".to_string(),
            };
            problems.push(HostProblem::new(p.check, subject, &detail));
        }
        problems.sort();
        problems.dedup();
        Ok(ExecutorCall::Health(problems))
    }

    /// `{"generation": 3, "event": "ask", "step": "upgrade-sds"}`; a failure's reason is cut
    /// to one line.
    pub fn rollout_from_json(body: &[u8]) -> Result<ExecutorCall, ApiError> {
        let invalid = |detail: String| ApiError::new(400, "invalid rollout report", detail);
        let value: serde_json::Value = serde_json::from_slice(body).map_err(malformed)?;
        let mut r: RolloutReport =
            serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        match &mut r.event {
            RolloutEvent::Planned { steps } => {
                let mut seen = steps.clone();
                seen.sort();
                seen.dedup();
                if seen.len() != steps.len() {
                    return Err(invalid("a step is planned twice".into()));
                }
            }
            RolloutEvent::Failed { reason, .. } => {
                let line: String = reason.split_whitespace().collect::<Vec<_>>().join(" ");
                *reason = match clean_text(Some(line)) {
                    Some(d) => d.chars().take(MAX_DETAIL).collect(),
                    None => "failed".to_string(),
                };
            }
            _ => {}
        }
        Ok(ExecutorCall::Rollout(r))
    }
}

fn reportable_phases() -> Vec<&'static str> {
    Phase::ALL
        .iter()
        .filter(|p| !p.set_by_scheduler_only())
        .map(|p| p.as_str())
        .collect()
}

/// Empty means absent; overlong text is cut (an executor may send a whole command output).
fn clean_text(s: Option<String>) -> Option<String> {
    let s = s?;
    // A download's error names its URL; a password in it stays out of logs and /api/state.
    let s = crate::secret::mask_uri_credentials(s.trim());
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    match s.char_indices().nth(MAX_TEXT) {
        Some((cut, _)) => Some(format!("{} [truncated]", &s[..cut])),
        None => Some(s.to_owned()),
    }
}

/// Checks a device list; the error names the offending entry.
pub fn validate_devices(devices: &[String]) -> Result<(), String> {
    if devices.len() > MAX_DEVICES {
        return Err(format!(
            "{} devices reported; at most {MAX_DEVICES} are accepted",
            devices.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for d in devices {
        let shown = d.chars().take(80).collect::<String>();
        if !d.starts_with("/dev/") || d.len() <= "/dev/".len() {
            return Err(format!(
                "device {shown:?} is not an absolute path under /dev/"
            ));
        }
        if d.len() > MAX_DEVICE_PATH {
            return Err(format!(
                "device {shown:?} is longer than {MAX_DEVICE_PATH} bytes"
            ));
        }
        if let Some(c) = d.chars().find(|c| {
            !(c.is_ascii_alphanumeric()
                || matches!(c, '/' | '.' | '_' | '-' | ':' | '+' | '@' | '='))
        }) {
            return Err(format!("device {shown:?} contains the character {c:?}"));
        }
        if d.ends_with('/')
            || d.split('/').any(|part| part == "." || part == "..")
            || d.contains("//")
        {
            return Err(format!(
                "device {shown:?} is not a plain path (empty, '.' or '..' component)"
            ));
        }
        if !seen.insert(d.as_str()) {
            return Err(format!("device {shown:?} is listed twice"));
        }
    }
    Ok(())
}

/// An agent as the master lists it (from the agent watcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownAgent {
    pub id: String,
    pub hostname: String,
}

/// Everything the dispatcher reacts to.
#[derive(Debug)]
pub enum Input {
    /// The subscription reader is connected to `master` (SUBSCRIBE answered 200).
    Connected {
        master: String,
    },
    Event(Box<Event>),
    /// The offers of an OFFERS event, still encoded: the dispatcher decodes them a few
    /// hundred at a time, as its launches leave (see `dispatcher/offer_backlog.rs`).
    Offers(crate::mesos::offers::RawOffers),
    Disconnected {
        reason: String,
    },
    /// The master's current agents.
    Agents(Vec<KnownAgent>),
    /// A copy of the current view, for the REST server.
    View(Sender<Arc<View>>),
    /// A call of an executor on the scheduler's executor API (REST server).
    Executor(ExecutorRequest),
    /// An operator's command, its token already checked (REST server).
    Operator(OperatorRequest),
    /// SIGTERM/SIGINT: save and stop, leaving the framework and its executors in place.
    Shutdown,
    /// The gateway worker's outcome of storage work.
    Storage(crate::scheduler::gateway_work::report::Report),
    /// What became of a call (call sender): every failure, every ACCEPT (the dispatcher's
    /// launch window), and REVIVE/SUPPRESS successes.
    CallOutcome(CallOutcome),
}

/// An operator's command and where its outcome goes (sent once the state it changed is
/// saved).
#[derive(Debug)]
pub struct OperatorRequest {
    pub command: crate::scheduler::operator::Command,
    pub reply: Sender<crate::scheduler::operator::Outcome>,
}

/// One entry of `/api/events`: an operator's action or a change of the plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoggedEvent {
    pub at_ms: u64,
    /// `action` (an operator's) or `plan` (the scheduler's own: a target change, a failed
    /// step, a node out of relaunches, maintenance).
    pub kind: &'static str,
    /// `pause`, `decommission`, `target`, `step-failed`, ...
    pub action: String,
    /// `plan`, a host, `host:/dev/sdb`.
    pub target: String,
    /// `accepted`, `refused`, `unknown`, `failed`, or for plan changes what it became.
    pub outcome: String,
    pub message: String,
}

/// A call and its fate: `error` is `None` when the master took it (202).
#[derive(Debug)]
pub struct CallOutcome {
    pub call: Box<crate::mesos::scheduler::Call>,
    pub error: Option<String>,
}

/// What the REST server shows: a consistent copy of the model plus connection facts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct View {
    pub subscribed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnected_reason: Option<String>,
    pub suppressed: bool,
    /// The gateway worker's attach queue (absent when idle).
    #[serde(skip_serializing_if = "AttachQueue::is_idle")]
    pub attach_queue: AttachQueue,
    pub model: ClusterModel,
    pub generated_ms: u64,
    /// Changes whenever what the view shows changes: readers key their caches (the JSON of
    /// `/api/state`) by it.
    #[serde(skip)]
    pub generation: u64,
    /// `/api/events`, newest first (not part of `/api/state`).
    #[serde(skip)]
    pub events: Arc<Vec<LoggedEvent>>,
}

#[cfg(test)]
impl View {
    /// A subscribed, quiet view of `model` at `generation`.
    pub fn of(model: ClusterModel, generation: u64) -> View {
        View {
            subscribed: true,
            master: None,
            disconnected_reason: None,
            suppressed: false,
            attach_queue: Default::default(),
            model,
            generated_ms: 0,
            generation,
            events: Default::default(),
        }
    }
}

/// What the REST server is started with. The scheduler does not start it itself (that
/// would make it import the REST server): `main` hands [`crate::scheduler::run`] a
/// [`StartRest`].
pub struct RestConfig {
    pub port: u16,
    /// Served to agents; the dispatcher names its digest in every launch.
    pub executor_binary: Arc<crate::scheduler::executor_binary::ExecutorBinary>,
    pub inputs: Sender<Input>,
    pub metrics: Arc<Metrics>,
    /// The dispatcher's executor secrets, as it grants and revokes them (the current ones
    /// first): the REST side checks a caller's secret before it reads the request's body.
    /// `None`: no early check; the dispatcher's own check is the only one.
    pub secrets: Option<Receiver<SecretUpdate>>,
    /// Set when the state lives where a relaunch loses it: `/health` and the page say so.
    pub state_warning: Option<String>,
    /// The certificate and key the server presents. With it, the executor API and every
    /// write are served over TLS only; without it (tests of the routes), all is plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The operator API's bearer token; `None`: operator writes answer 403.
    pub operator_token: Option<crate::secret::Secret>,
}

/// A change of the executor secrets the dispatcher accepts, published for the REST side's
/// early check. The dispatcher stays the owner and checks every call itself too.
#[derive(Debug)]
pub enum SecretUpdate {
    /// The digest of the executor's secret: the secret itself left with its launch.
    Known {
        executor_id: String,
        digest: Token,
    },
    Forget {
        executor_id: String,
    },
}

/// Starts the REST server; dropping what it returns stops the server.
pub type StartRest = Box<dyn FnOnce(RestConfig) -> Result<Box<dyn std::any::Any>, String>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A download's error names its URL: a password in it is masked before the report
    /// reaches a log line or `/api/state`.
    #[test]
    fn reported_texts_carry_no_uri_password() {
        let body = br#"{"phase":"packages","error":"http://pkg:S3cret@repo/x.deb: HTTP status 404","message":"from http://pkg:S3cret@repo/"}"#;
        let ExecutorCall::Phase(report) = ExecutorCall::phase_from_json(body).unwrap() else {
            panic!("a phase report");
        };
        assert_eq!(
            report.error.as_deref(),
            Some("http://pkg:***@repo/x.deb: HTTP status 404")
        );
        assert_eq!(report.message.as_deref(), Some("from http://pkg:***@repo/"));
    }

    #[test]
    fn phase_parsing_names_the_problem() {
        let e = ExecutorCall::phase_from_json(br#"{"phase":"dancing"}"#).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(
            e.detail.contains("dancing") && e.detail.contains("storage-attach"),
            "{e}"
        );
        let e = ExecutorCall::phase_from_json(br#"{"phase":"lost"}"#).unwrap_err();
        assert!(e.detail.contains("set by the scheduler"), "{e}");
        let e = ExecutorCall::phase_from_json(b"{not json").unwrap_err();
        assert_eq!(e.error, "malformed JSON");
        let e = ExecutorCall::phase_from_json(br#"{"message":"x"}"#).unwrap_err();
        assert!(e.detail.contains("phase"), "{e}");
        let long = format!(
            r#"{{"phase":"packages","error":"{}"}}"#,
            "x".repeat(MAX_TEXT + 10)
        );
        match ExecutorCall::phase_from_json(long.as_bytes()).unwrap() {
            ExecutorCall::Phase(p) => {
                assert!(p.error.unwrap().ends_with("[truncated]"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn host_reports_are_sorted_cut_and_checked() {
        let body = br#"{"problems":[
            {"check":"volume-driver","subject":"rexray","detail":"not running\n(status 3)"},
            {"check":"service","subject":" sds ","detail":""},
            {"check":"service","subject":"sds","detail":"failed"}]}"#;
        let ExecutorCall::Health(p) = ExecutorCall::health_from_json(body).unwrap() else {
            panic!("a host report");
        };
        let reasons: Vec<String> = p.iter().map(HostProblem::reason).collect();
        assert_eq!(
            reasons,
            [
                "service sds: failed",
                "volume driver rexray: not running (status 3)"
            ]
        );
        let long = format!(
            r#"{{"problems":[{{"check":"module","subject":"scini","detail":"{}"}}]}}"#,
            "x".repeat(1000)
        );
        let ExecutorCall::Health(p) = ExecutorCall::health_from_json(long.as_bytes()).unwrap()
        else {
            panic!("a host report");
        };
        assert_eq!(p[0].detail.len(), MAX_DETAIL);
        assert_eq!(
            ExecutorCall::health_from_json(b"{}").unwrap(),
            ExecutorCall::Health(Vec::new())
        );
        for (body, needle) in [
            (
                r#"{"problems":[{"check":"kernel","subject":"x","detail":"y"}]}"#,
                "kernel",
            ),
            (
                r#"{"problems":[{"check":"device","subject":" ","detail":"y"}]}"#,
                "empty",
            ),
            (
                r#"{"problems":[{"check":"device","subject":"a\u0007","detail":"y"}]}"#,
                "control",
            ),
            (r#"{"problems":"sds"}"#, "invalid type"),
        ] {
            let e = ExecutorCall::health_from_json(body.as_bytes()).unwrap_err();
            assert!(e.detail.contains(needle), "{body}: {e}");
        }
        let many: Vec<_> = (0..=MAX_HOST_PROBLEMS)
            .map(|i| serde_json::json!({"check": "device", "subject": format!("/dev/d{i}"), "detail": "missing"}))
            .collect();
        let body = serde_json::json!({ "problems": many }).to_string();
        let e = ExecutorCall::health_from_json(body.as_bytes()).unwrap_err();
        assert!(e.detail.contains("at most"), "{e}");
    }

    #[test]
    fn devices_are_validated() {
        assert!(ExecutorCall::devices_from_json(
            br#"{"devices":["/dev/sdb","/dev/disk/by-id/nvme-X_1:2"]}"#
        )
        .is_ok());
        for (body, needle) in [
            (r#"{"devices":["sdb"]}"#, "\"sdb\""),
            (r#"{"devices":["/dev/"]}"#, "under /dev/"),
            (r#"{"devices":["/dev/../etc/passwd"]}"#, "'..'"),
            (r#"{"devices":["/dev/sdb","/dev/sdb"]}"#, "twice"),
            (r#"{"devices":["/dev/sd b"]}"#, "' '"),
            (r#"{"devices":"/dev/sdb"}"#, "invalid type"),
        ] {
            let e = ExecutorCall::devices_from_json(body.as_bytes()).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.detail.contains(needle), "{body}: {e}");
        }
        let many: Vec<String> = (0..=MAX_DEVICES).map(|i| format!("/dev/d{i}")).collect();
        let body = serde_json::json!({ "devices": many }).to_string();
        let e = ExecutorCall::devices_from_json(body.as_bytes()).unwrap_err();
        assert!(e.detail.contains("at most 256"), "{e}");
    }

    /// Devices a phase report carries are checked as a device report's are, and the
    /// report is refused whole when one is wrong.
    #[test]
    fn devices_in_a_phase_report_are_validated() {
        let call = ExecutorCall::phase_from_json(
            br#"{"phase":"volume-driver","devices":["/dev/sdb","/dev/sdc"]}"#,
        );
        let Ok(ExecutorCall::Phase(report)) = call else {
            panic!("{call:?}");
        };
        assert_eq!(report.devices.unwrap(), ["/dev/sdb", "/dev/sdc"]);
        for (body, needle) in [
            (
                r#"{"phase":"volume-driver","devices":["sdb"]}"#,
                "devices: ",
            ),
            (
                r#"{"phase":"volume-driver","devices":["/dev/sdb","/dev/sdb"]}"#,
                "twice",
            ),
            (
                r#"{"phase":"volume-driver","devices":"/dev/sdb"}"#,
                "invalid type",
            ),
        ] {
            let e = ExecutorCall::phase_from_json(body.as_bytes()).unwrap_err();
            assert_eq!((e.status, e.error), (400, "invalid phase report"));
            assert!(e.detail.contains(needle), "{body}: {e}");
        }
    }
}
