//! Synchronous client of the storage gateway's REST API (HTTPS, usually self-signed).
//!
//! One place wraps every call: login and token reuse, one re-login on 401/403 (some gateways
//! answer an expired token with 403), the `Accept` version header, timeouts, bounded jittered
//! retries of transient failures, and the gateway's `message`/`errorCode` in typed errors.
//! The password and the token are [`Secret`]s: they go into the `Authorization` header and
//! nowhere else (no error text, no log line carries them).
//!
//! It knows no resource: its requests are only reachable through the typed calls of
//! [`super::api`].

use super::paths::LOGIN;
use super::trust::{FirstUse, Trust};
use super::types::ErrorBody;
use crate::backoff::Backoff;
use crate::mesos::base64;
use crate::secret::Secret;
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// MDM return codes the framework acts on (design section 6).
pub mod code {
    /// Illegal syntax (a malformed id) or no MDM code at all.
    pub const NONE: i64 = 0;
    pub const NOT_FOUND: i64 = 3;
    pub const SDS_ADDRESS_IN_USE: i64 = 93;
    pub const SDS_NAME_IN_USE: i64 = 98;
    pub const PD_NAME_IN_USE: i64 = 141;
    pub const POOL_NAME_IN_USE: i64 = 173;
    pub const DEVICE_ALREADY_EXISTS: i64 = 206;
    pub const SDS_NOT_FOUND: i64 = 78;
    pub const DEVICE_NOT_FOUND: i64 = 126;
    /// The dev gateway's own numbers (the real codes are not in the public sources we read):
    /// a removal already under way, and the other SDSs of the domain could not hold the data.
    pub const REMOVE_IN_PROGRESS: i64 = 211;
    pub const NOT_ENOUGH_CAPACITY: i64 = 212;
}

/// How to reach and authenticate to the gateway.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// `host:port`.
    pub address: String,
    pub password: Secret,
    /// `-storage.apiversion`, sent as `Accept: application/json;version=<this>`.
    pub api_version: String,
    /// How the gateway's certificate is checked (`trust.rs`).
    pub trust: Trust,
    pub connect_timeout: Duration,
    /// Whole-request limit (connect, send, wait, read).
    pub request_timeout: Duration,
    /// Extra attempts after a transient failure (5xx without an MDM code, connection errors).
    pub retries: u32,
    pub retry_base: Duration,
}

impl GatewayConfig {
    pub fn new(address: &str, password: Secret, api_version: &str) -> GatewayConfig {
        GatewayConfig {
            address: address.to_string(),
            password,
            api_version: api_version.to_string(),
            // Checked by default: the first certificate seen, and only it, from then on.
            trust: Trust::FirstUse(Arc::new(FirstUse::new(None))),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            retries: 3,
            retry_base: Duration::from_millis(200),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayError {
    /// Bad configuration (an unreadable CA file).
    Config(String),
    /// The TLS handshake failed: certificate not trusted, wrong host, protocol. `flag` is the
    /// one that decides what is trusted.
    Tls {
        address: String,
        detail: String,
        flag: &'static str,
    },
    /// No answer: refused, unreachable, timed out.
    Unreachable { address: String, detail: String },
    /// The login was refused (wrong password).
    LoginRefused { message: String },
    /// The gateway answered with an error.
    Api {
        method: &'static str,
        path: String,
        status: u16,
        error_code: Option<i64>,
        message: String,
    },
    /// A reply we cannot use (not JSON, not the answer's shape).
    BadReply {
        call: &'static str,
        path: String,
        detail: String,
    },
    /// A request that could not be encoded as JSON.
    Encode { call: &'static str, detail: String },
}

impl GatewayError {
    /// The MDM's code when the gateway gave one.
    pub fn error_code(&self) -> Option<i64> {
        match self {
            GatewayError::Api { error_code, .. } => *error_code,
            _ => None,
        }
    }

    /// Worth another attempt: the gateway or the network had a hiccup, not a verdict.
    pub fn is_transient(&self) -> bool {
        match self {
            GatewayError::Unreachable { .. } => true,
            GatewayError::Api {
                status, error_code, ..
            } => *status >= 500 && error_code.unwrap_or(code::NONE) == code::NONE,
            _ => false,
        }
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::Config(e) => write!(f, "{e}"),
            GatewayError::Tls {
                address,
                detail,
                flag,
            } => write!(
                f,
                "TLS handshake with the gateway at {address} failed: {detail} (check {flag})"
            ),
            GatewayError::Unreachable { address, detail } => {
                write!(f, "the gateway at {address} is unreachable: {detail}")
            }
            GatewayError::LoginRefused { message } => write!(
                f,
                "the gateway refused the login of user admin ({message}): check -storage.password"
            ),
            GatewayError::Api {
                method,
                path,
                status,
                error_code,
                message,
            } => {
                write!(f, "gateway {method} {path}: {status}")?;
                if let Some(c) = error_code {
                    write!(f, " errorCode {c}")?;
                }
                write!(f, ": {message}")
            }
            GatewayError::BadReply { call, path, detail } => {
                write!(f, "gateway reply to {call} ({path}) unusable: {detail}")
            }
            GatewayError::Encode { call, detail } => {
                write!(f, "gateway request {call} cannot be encoded: {detail}")
            }
        }
    }
}

impl std::error::Error for GatewayError {}

/// Requests sent to the gateway and those that failed, counted by the client (the one place
/// every call passes) and read by whoever reports them (the scheduler's `/metrics`).
#[derive(Debug, Default)]
pub struct CallCounters {
    pub calls: AtomicU64,
    pub errors: AtomicU64,
}

pub struct GatewayClient {
    config: GatewayConfig,
    agent: ureq::Agent,
    token: Option<Secret>,
    backoff: Backoff,
    counters: Option<Arc<CallCounters>>,
    /// HTTP requests sent (logins and retries included); read by the benchmark.
    requests: u64,
    /// The transport error the last request ended in; `None` once one is answered.
    unanswered: Option<GatewayError>,
    /// The certificate passed an ordinary chain check, names included (see `trust.rs`).
    chained: Arc<std::sync::atomic::AtomicBool>,
}

impl fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayClient")
            .field("address", &self.config.address)
            .finish_non_exhaustive()
    }
}

impl GatewayClient {
    pub fn new(config: GatewayConfig) -> Result<GatewayClient, GatewayError> {
        let chained = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tls = config
            .trust
            .client_config(chained.clone())
            .map_err(GatewayError::Config)?;
        let http = ureq::Agent::config_builder()
            // Error statuses carry the gateway's message and errorCode: read them.
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .user_agent(concat!("storage-framework/", env!("CARGO_PKG_VERSION")))
            .timeout_resolve(Some(config.connect_timeout))
            .timeout_connect(Some(config.connect_timeout))
            .timeout_global(Some(config.request_timeout))
            // Requests are small JSON and a large listing is read as it streams; ureq's
            // default 128 KiB each way was a quarter of the scheduler's heap at 100 agents.
            .input_buffer_size(16 * 1024)
            .output_buffer_size(16 * 1024);
        let tls = tls.unwrap_or_else(|| {
            crate::tls::client_config(Arc::new(crate::tls::Checked(crate::tls::AnyCertificate)))
        });
        let agent = crate::tls::agent(http.build(), tls);
        let backoff = Backoff::new(config.retry_base, config.retry_base * 16);
        Ok(GatewayClient {
            config,
            agent,
            token: None,
            backoff,
            counters: None,
            requests: 0,
            unanswered: None,
            chained,
        })
    }

    pub fn with_counters(mut self, counters: Arc<CallCounters>) -> GatewayClient {
        self.counters = Some(counters);
        self
    }

    pub fn address(&self) -> &str {
        &self.config.address
    }

    /// Points the client at another gateway (experimental mode: the primary MDM node's,
    /// known once it is chosen); the token of the old one is dropped.
    pub fn set_address(&mut self, address: &str) {
        self.config.address = address.to_string();
        self.token = None;
    }

    /// The gateway's certificate passed the one check the volume driver can repeat: a chain
    /// to `-storage.gateway.cacert` with the dialled address among its names.
    pub fn verified_by_chain(&self) -> bool {
        self.chained.load(Relaxed)
    }

    /// The certificate trusted on first use since the last call, if one was: to be kept.
    pub fn newly_trusted(&self) -> Option<crate::tls::Fingerprint> {
        match &self.config.trust {
            Trust::FirstUse(first) => first.take_new(),
            _ => None,
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Why the last request got no answer at all (refused, timed out, TLS); `None` when it
    /// was answered, whatever the status. Callers that fold errors into text read it to
    /// tell a gateway that is gone from one that refused a request.
    pub fn unanswered(&self) -> Option<&GatewayError> {
        self.unanswered.as_ref()
    }

    /// One `GET` sent once, with the token held if any and no login: any answer, whatever
    /// its status, proves the gateway is back (the worker's probe after an outage).
    pub(super) fn answers(&mut self, call: &'static str, path: &str) -> Result<u16, GatewayError> {
        let auth = basic("", self.token.as_ref().map(Secret::expose).unwrap_or(""));
        self.send(call, path, &auth, None, &mut whole_json)
            .map(|(status, _)| status)
    }

    /// `GET /api/login` with the admin password; keeps the token for later calls.
    pub fn login(&mut self) -> Result<(), GatewayError> {
        let auth = basic("admin", self.config.password.expose());
        let reply = self.with_retries(|c| c.send("login", LOGIN, &auth, None, &mut whole_json))?;
        let reply = match reply {
            (status, Body::Taken(body) | Body::Other(body)) => (status, body),
        };
        match reply {
            (200, Value::String(token)) if !token.is_empty() => {
                self.token = Some(Secret::new(token));
                Ok(())
            }
            (200, _) => Err(GatewayError::BadReply {
                call: "login",
                path: LOGIN.into(),
                detail: "the login answer is not a JSON string token".into(),
            }),
            (401 | 403, body) => Err(GatewayError::LoginRefused {
                message: message_of(&body).unwrap_or_else(|| "Unauthorized".into()),
            }),
            (status, body) => Err(api_error("GET", LOGIN, status, &body)),
        }
    }

    /// One `GET` of the typed API (`call` names it in errors).
    pub(super) fn get(&mut self, call: &'static str, path: &str) -> Result<Value, GatewayError> {
        self.call(call, "GET", path, None, &mut whole_json)
    }

    /// One `GET` whose answer `take` reads as it arrives (a listing, item by item), within
    /// [`STREAMED_LIMIT`]: its text is never held whole.
    pub(super) fn get_taking<T>(
        &mut self,
        call: &'static str,
        path: &str,
        take: &mut dyn FnMut(&mut dyn Read) -> Result<T, TakeError>,
    ) -> Result<T, GatewayError> {
        self.call(call, "GET", path, None, take)
    }

    /// One `POST` of the typed API.
    pub(super) fn post(
        &mut self,
        call: &'static str,
        path: &str,
        body: &Value,
    ) -> Result<Value, GatewayError> {
        self.call(call, "POST", path, Some(body), &mut whole_json)
    }

    /// Logs in when there is no token; after a 401/403 logs in once more and retries.
    fn call<T>(
        &mut self,
        call: &'static str,
        method: &'static str,
        path: &str,
        body: Option<&Value>,
        take: &mut dyn FnMut(&mut dyn Read) -> Result<T, TakeError>,
    ) -> Result<T, GatewayError> {
        if self.token.is_none() {
            self.login()?;
        }
        let mut relogged = false;
        loop {
            let auth = basic("", self.token.as_ref().map(Secret::expose).unwrap_or(""));
            let (status, reply) = self.with_retries(|c| c.send(call, path, &auth, body, take))?;
            let reply = match reply {
                Body::Taken(answer) => return Ok(answer),
                Body::Other(reply) => reply,
            };
            match status {
                401 | 403 if !relogged => {
                    log::debug!("gateway: {method} {path} answered {status}; logging in again");
                    relogged = true;
                    self.token = None;
                    self.login()?;
                }
                _ => {
                    if let Some(c) = &self.counters {
                        c.errors.fetch_add(1, Relaxed);
                    }
                    return Err(api_error(method, path, status, &reply));
                }
            }
        }
    }

    /// Repeats transient failures (5xx without an MDM code, connection errors) with jittered
    /// backoff, at most `retries` times.
    fn with_retries<T>(
        &mut self,
        mut attempt: impl FnMut(&mut GatewayClient) -> Result<(u16, Body<T>), GatewayError>,
    ) -> Result<(u16, Body<T>), GatewayError> {
        self.backoff.reset();
        let mut left = self.config.retries;
        loop {
            let outcome = attempt(self);
            let transient = match &outcome {
                Err(e) => e.is_transient(),
                Ok((_, Body::Taken(_))) => false,
                Ok((status, Body::Other(body))) => {
                    *status >= 500 && error_code_of(body).unwrap_or(code::NONE) == code::NONE
                }
            };
            if !transient || left == 0 {
                return outcome;
            }
            left -= 1;
            let delay = self.backoff.next_delay();
            log::debug!(
                "gateway at {}: transient failure, retrying in {delay:?}",
                self.config.address
            );
            std::thread::sleep(delay);
        }
    }

    /// One request: GET without a body, POST with one. A success's body goes to `take` as it
    /// arrives; any other status's body is read whole (an error object is small).
    fn send<T>(
        &mut self,
        call: &'static str,
        path: &str,
        auth: &str,
        body: Option<&Value>,
        take: &mut dyn FnMut(&mut dyn Read) -> Result<T, TakeError>,
    ) -> Result<(u16, Body<T>), GatewayError> {
        self.requests += 1;
        if let Some(c) = &self.counters {
            c.calls.fetch_add(1, Relaxed);
        }
        let url = format!("https://{}{path}", self.config.address);
        let accept = format!("application/json;version={}", self.config.api_version);
        let result = match body {
            None => self
                .agent
                .get(&url)
                .header("Authorization", auth)
                .header("Accept", &accept)
                .call(),
            Some(body) => self
                .agent
                .post(&url)
                .header("Authorization", auth)
                .header("Accept", &accept)
                .header("Content-Type", "application/json")
                .send(body.to_string()),
        };
        let read = result.map_err(Failed::Transport).and_then(|mut response| {
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                let mut reader = response
                    .body_mut()
                    .with_config()
                    .limit(STREAMED_LIMIT)
                    .reader();
                return match take(&mut reader) {
                    Ok(answer) => Ok((status, Body::Taken(answer))),
                    Err(TakeError::Io(e)) => Err(Failed::Transport(ureq::Error::Io(e))),
                    Err(TakeError::Bad(detail)) => Err(Failed::Bad(detail)),
                };
            }
            let text = response
                .body_mut()
                .with_config()
                .limit(WHOLE_LIMIT)
                .read_to_string()
                .map_err(Failed::Transport)?;
            Ok((
                status,
                Body::Other(json_of(status, &text).map_err(Failed::Bad)?),
            ))
        });
        match read {
            Ok(answer) => {
                self.unanswered = None;
                Ok(answer)
            }
            Err(Failed::Transport(e)) => {
                let e = self.transport_error(e);
                self.unanswered = Some(e.clone());
                Err(e)
            }
            Err(Failed::Bad(detail)) => {
                // It answered: the gateway is there, the answer is wrong.
                self.unanswered = None;
                Err(GatewayError::BadReply {
                    call,
                    path: path.into(),
                    detail,
                })
            }
        }
    }

    fn transport_error(&self, e: ureq::Error) -> GatewayError {
        let address = self.config.address.clone();
        let detail = e.to_string();
        let tls = matches!(e, ureq::Error::Tls(_))
            || ["certificate", "handshake", "tls", "CertificateUnknown"]
                .iter()
                .any(|w| {
                    detail
                        .to_ascii_lowercase()
                        .contains(&w.to_ascii_lowercase())
                });
        if tls {
            // A verifier's refusal (both fingerprints, the flag) reaches here wrapped by the
            // transport and rustls as "io: TLS: unexpected error: ..."; the refusal is the news.
            let detail = match detail.split_once("unexpected error: ") {
                Some((_, refusal)) => refusal.to_string(),
                None => detail,
            };
            GatewayError::Tls {
                address,
                detail,
                flag: self.config.trust.flag(),
            }
        } else {
            GatewayError::Unreachable { address, detail }
        }
    }
}

/// What a reply's body became.
pub(super) enum Body<T> {
    /// A success's, as its taker read it.
    Taken(T),
    /// Any other status's, as JSON (an error page that is not JSON: its text, shortened).
    Other(Value),
}

/// Why a success's body could not be taken.
pub(super) enum TakeError {
    /// The transport failed under it (cut, timed out, over its limit).
    Io(std::io::Error),
    /// It is not the answer's shape: what did not fit.
    Bad(String),
}

/// How a request failed inside [`GatewayClient::send`].
enum Failed {
    Transport(ureq::Error),
    Bad(String),
}

/// A body read whole: small JSON answers and error objects.
const WHOLE_LIMIT: u64 = 16 * 1024 * 1024;

/// A body taken as it streams (a listing): never held whole, so this only ends an answer
/// that would not end. At 10,000 SDSs a listing is some 7 MB on the dev gateway, and a real
/// gateway's objects carry more fields.
const STREAMED_LIMIT: u64 = 256 * 1024 * 1024;

/// A success's body as one JSON value, within [`WHOLE_LIMIT`]; empty reads as `null`.
fn whole_json(body: &mut dyn Read) -> Result<Value, TakeError> {
    let mut text = String::new();
    let mut limited = body.take(WHOLE_LIMIT + 1);
    limited.read_to_string(&mut text).map_err(TakeError::Io)?;
    if text.len() as u64 > WHOLE_LIMIT {
        return Err(TakeError::Bad(format!(
            "longer than {} MiB",
            WHOLE_LIMIT / 1024 / 1024
        )));
    }
    json_of(200, &text).map_err(TakeError::Bad)
}

/// A body's text under `status` as JSON; empty reads as `null`. An error page that is not
/// JSON still has a status worth reporting: its text, shortened.
fn json_of(status: u16, text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(_) if status >= 400 => Ok(Value::String(short(text))),
        Err(e) => Err(format!("not JSON ({e})")),
    }
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::encode(format!("{user}:{password}").as_bytes())
    )
}

/// The gateway's error object; an error page that is not one reads as empty.
fn error_body(body: &Value) -> ErrorBody {
    match body {
        Value::Object(_) => ErrorBody::deserialize(body).unwrap_or_default(),
        _ => ErrorBody::default(),
    }
}

fn error_code_of(body: &Value) -> Option<i64> {
    error_body(body).error_code
}

fn message_of(body: &Value) -> Option<String> {
    match body {
        Value::String(s) => Some(s.clone()),
        _ => error_body(body).message,
    }
}

fn api_error(method: &'static str, path: &str, status: u16, body: &Value) -> GatewayError {
    GatewayError::Api {
        method,
        path: path.to_string(),
        status,
        error_code: error_code_of(body),
        message: message_of(body).unwrap_or_else(|| "(no message)".into()),
    }
}

fn short(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_means_5xx_without_an_mdm_code_or_no_answer() {
        let api = |status, error_code| GatewayError::Api {
            method: "GET",
            path: "/x".into(),
            status,
            error_code,
            message: "m".into(),
        };
        assert!(api(500, Some(0)).is_transient());
        assert!(api(503, None).is_transient());
        assert!(!api(500, Some(code::NOT_FOUND)).is_transient());
        assert!(!api(400, Some(0)).is_transient());
        assert!(GatewayError::Unreachable {
            address: "a".into(),
            detail: "d".into()
        }
        .is_transient());
        assert!(!GatewayError::LoginRefused {
            message: "m".into()
        }
        .is_transient());
    }

    #[test]
    fn errors_name_the_gateway_code_and_message() {
        let e = api_error(
            "POST",
            "/api/types/Sds/instances",
            500,
            &serde_json::json!({"message": "SDS name in use", "errorCode": 98, "httpStatusCode": 500}),
        );
        assert_eq!(e.error_code(), Some(98));
        assert_eq!(
            e.to_string(),
            "gateway POST /api/types/Sds/instances: 500 errorCode 98: SDS name in use"
        );
    }
}
