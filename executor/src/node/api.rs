//! The scheduler's executor API, as this executor calls it: the node plan (long poll), phase
//! and device reports. Every call carries the executor's secret as a bearer token; the
//! secret appears in no log line or error.
//!
//! Reports are delivered reliably: [`SchedulerApi::report`] retries with backoff until the
//! scheduler answers that it recorded the report. Only an answer that can never change (401:
//! wrong secret, 404: this executor was replaced) ends the retries.

use super::plan::Plan;
use std::fmt;
use std::io::Read;
use std::time::Duration;

/// Longest wait of one plan long poll (the scheduler caps it at 60 s).
pub const PLAN_WAIT: Duration = Duration::from_secs(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_BODY: u64 = 1 << 20;
const RETRY_START: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The scheduler will never accept this executor's calls (401, 404): stop.
    Refused(String),
    /// Worth another try: transport trouble, 5xx, a body that did not parse.
    Transient(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Refused(s) | ApiError::Transient(s) => f.write_str(s),
        }
    }
}

pub struct SchedulerApi {
    base: String,
    secret: String,
    agent: ureq::Agent,
}

impl SchedulerApi {
    /// `scheduler_url` is `STORAGE_SCHEDULER_URL` (`http://host:port`).
    pub fn new(scheduler_url: &str, executor_id: &str, secret: &str) -> SchedulerApi {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(PLAN_WAIT + Duration::from_secs(10)))
            .build()
            .into();
        SchedulerApi {
            base: format!(
                "{}/api/v1/executors/{executor_id}",
                scheduler_url.trim_end_matches('/')
            ),
            secret: secret.to_string(),
            agent,
        }
    }

    /// The plan: at once without `version`, else when it differs from `version` or `wait`
    /// ran out (`Ok(None)`: unchanged).
    pub fn plan(&self, version: Option<u64>, wait: Duration) -> Result<Option<Plan>, ApiError> {
        let url = match version {
            Some(v) => format!("{}/plan?version={v}&wait={}", self.base, wait.as_secs()),
            None => format!("{}/plan", self.base),
        };
        let what = "GET plan";
        let response = self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.secret))
            .call()
            .map_err(|e| ApiError::Transient(format!("{what}: {e}")))?;
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

    /// `POST <base>/<action>` once.
    pub fn post(&self, action: &str, body: &serde_json::Value) -> Result<(), ApiError> {
        let what = format!("POST {action}");
        let response = self
            .agent
            .post(&format!("{}/{action}", self.base))
            .header("Authorization", &format!("Bearer {}", self.secret))
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| ApiError::Transient(format!("{what}: {e}")))?;
        let status = response.status().as_u16();
        let text = read_body(response);
        if status == 200 {
            Ok(())
        } else {
            Err(classify(&what, status, &text))
        }
    }

    /// Posts until the scheduler records it; backoff doubles from 200 ms to 30 s.
    pub fn report(&self, action: &str, body: &serde_json::Value) -> Result<(), ApiError> {
        retry(&format!("POST {action}"), || self.post(action, body))
    }
}

/// Runs `f` until it succeeds or is refused.
pub fn retry<T>(what: &str, mut f: impl FnMut() -> Result<T, ApiError>) -> Result<T, ApiError> {
    let mut delay = RETRY_START;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e @ ApiError::Refused(_)) => return Err(e),
            Err(ApiError::Transient(why)) => {
                log::warn!(
                    "{what} failed ({why}); retrying in {} ms",
                    delay.as_millis()
                );
                std::thread::sleep(delay);
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
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
        _ => ApiError::Transient(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn retry_stops_on_success_or_refusal() {
        let n = Cell::new(0);
        let r = retry("x", || {
            n.set(n.get() + 1);
            if n.get() < 3 {
                Err(ApiError::Transient("down".into()))
            } else {
                Ok(7)
            }
        });
        assert_eq!((r, n.get()), (Ok(7), 3));
        let r: Result<(), _> = retry("x", || Err(ApiError::Refused("404".into())));
        assert_eq!(r, Err(ApiError::Refused("404".into())));
    }

    #[test]
    fn statuses_are_classified() {
        assert!(matches!(classify("x", 401, b""), ApiError::Refused(_)));
        assert!(matches!(classify("x", 404, b"gone"), ApiError::Refused(_)));
        assert!(matches!(classify("x", 503, b""), ApiError::Transient(_)));
        assert!(classify("GET plan", 500, b"boom")
            .to_string()
            .contains("500: boom"));
    }
}
