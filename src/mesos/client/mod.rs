//! HTTP client for the Mesos v1 endpoints: the master's `/api/v1/scheduler`, the agent's
//! `/api/v1/executor` and the master's `GET /version`.
//!
//! Both v1 APIs work the same way: SUBSCRIBE answers `200` and keeps the connection open as a
//! RecordIO stream of events; every other call goes on its own connection and answers `202`.
//! One private `Endpoint` type holds that shared behaviour, generic over the call and event
//! types; [`SchedulerClient`] adds the master's stream id and redirects, [`ExecutorClient`]
//! is a thin wrapper.
//!
//! # Timeouts and the endless event stream
//!
//! ureq 3 checks its timeouts whenever it does network I/O, including while the caller reads
//! a response body, so the whole-exchange budgets (`timeout_global`, `timeout_per_call`,
//! `timeout_recv_body`) would cut a subscription after a fixed time however healthy it is.
//! The subscription request therefore clears them and sets only budgets that end once the
//! response headers are in (connect, send request/body, receive response), plus
//! `timeout_per_read`: ureq restarts that limit for every transport read, including body
//! reads, so it is exactly an idle timeout. It surfaces from the body reader as an
//! `io::Error` wrapping `ureq::Error::Timeout(Timeout::PerRead)`, which
//! [`StreamError::IdleTimeout`] reports. The idle limit is fixed when the request is sent
//! (ureq offers no way to change it on an open body), so the scheduler has to choose it before
//! SUBSCRIBED tells it the heartbeat interval (see [`ClientConfig::stream_idle_timeout`]).
//! Ordinary calls keep a whole-exchange budget ([`ClientConfig::request_timeout`]).

mod address;
mod endpoint;
mod get;
mod stream;

pub use address::{base_url, parse_leader};
pub use get::{get_json, get_json_streamed, MasterVersion};
pub use stream::{
    EventReader, EventStream, ExecutorEventStream, SchedulerItem, StreamError, StreamEvent,
    Subscription,
};

use crate::mesos::codec::Encoding;
use crate::mesos::recordio;
use crate::mesos::{executor, scheduler};
use endpoint::Endpoint;
use get::get_json_with;
use std::fmt;
use std::time::Duration;

/// Longest error body kept in [`ClientError::Rejected`] / [`ClientError::ServerError`]: the
/// master's explanations are one line; anything longer is noise in the log.
pub const MAX_ERROR_MESSAGE: usize = 4 * 1024;

/// Largest `GET /version` (or other small JSON) body accepted.
const MAX_JSON_BODY: u64 = 1024 * 1024;

/// A stream id is a UUID; the cap only keeps a hostile header out of later requests and logs.
const MAX_STREAM_ID: usize = 256;

const STREAM_ID_HEADER: &str = "Mesos-Stream-Id";

/// How the client talks to Mesos.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Encoding of request bodies and of the event stream.
    pub encoding: Encoding,
    /// Budget for resolving the host name and for opening the TCP connection (each).
    pub connect_timeout: Duration,
    /// Whole-exchange budget of an ordinary call, response body included. For SUBSCRIBE it
    /// bounds sending the request and receiving the response headers, not the stream.
    pub request_timeout: Duration,
    /// Longest silence tolerated on an open event stream before
    /// [`StreamError::IdleTimeout`]; `None` waits forever. The master sends HEARTBEAT events
    /// (every 15 s unless configured otherwise), so the scheduler sets a few intervals here.
    pub stream_idle_timeout: Option<Duration>,
    /// Largest single event accepted from the stream, of every type but a master's OFFERS.
    pub max_event_bytes: usize,
    /// Largest OFFERS event accepted from a master (an executor's stream has none). Checked
    /// apart because it alone grows with the cluster: one offer per agent.
    pub max_offers_event_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            encoding: Encoding::Protobuf,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            stream_idle_timeout: None,
            max_event_bytes: recordio::DEFAULT_MAX_RECORD,
            max_offers_event_bytes: recordio::DEFAULT_MAX_RECORD,
        }
    }
}

/// Why a request to a Mesos endpoint failed. `endpoint` is the method and URL, e.g.
/// `POST http://10.0.0.1:5050/api/v1/scheduler`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The configured address is not `host:port` (or `http://host:port`).
    InvalidAddress { address: String, reason: String },
    /// `307`: this master is not the leader; `leader` is `host:port` of the one that is.
    Redirect { endpoint: String, leader: String },
    /// A 4xx: the call itself was refused; `message` is the response body, trimmed and capped.
    Rejected {
        endpoint: String,
        status: u16,
        message: String,
    },
    /// A 5xx (e.g. `503` while no master is elected); `message` as for `Rejected`.
    ServerError {
        endpoint: String,
        status: u16,
        message: String,
    },
    /// No HTTP response at all (connection refused, timeout, malformed response); the text
    /// names the URL.
    Transport(String),
    /// A response that breaks the API contract: an unexpected status, a missing or bad
    /// `Mesos-Stream-Id`, an unusable redirect, a body that is not the expected JSON.
    Protocol { endpoint: String, detail: String },
    /// A scheduler call attempted before SUBSCRIBE provided a stream id.
    NotSubscribed { endpoint: String },
}

impl ClientError {
    /// The HTTP status the server answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Redirect { .. } => Some(307),
            ClientError::Rejected { status, .. } | ClientError::ServerError { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::InvalidAddress { address, reason } => {
                write!(f, "invalid Mesos address {address:?}: {reason}")
            }
            ClientError::Redirect { endpoint, leader } => write!(
                f,
                "{endpoint}: HTTP 307, not the leading master; the leader is {leader}"
            ),
            ClientError::Rejected {
                endpoint,
                status,
                message,
            } => write!(f, "{endpoint}: rejected with HTTP {status}: {message}"),
            ClientError::ServerError {
                endpoint,
                status,
                message,
            } => write!(f, "{endpoint}: server error HTTP {status}: {message}"),
            ClientError::Transport(detail) => write!(f, "{detail}"),
            ClientError::Protocol { endpoint, detail } => write!(f, "{endpoint}: {detail}"),
            ClientError::NotSubscribed { endpoint } => write!(
                f,
                "{endpoint}: no Mesos-Stream-Id yet; SUBSCRIBE must succeed before other calls"
            ),
        }
    }
}

impl std::error::Error for ClientError {}

/// Client of a master's `/api/v1/scheduler`. Cloning shares the connection pool; a clone
/// made after [`subscribe`](Self::subscribe) carries the stream id too, so one clone can own
/// the event stream's thread while another sends calls.
#[derive(Debug, Clone)]
pub struct SchedulerClient {
    endpoint: Endpoint,
    master: String,
    base: String,
    stream_id: Option<String>,
}

impl SchedulerClient {
    /// `master` is `host:port` (or `http://host:port`) of any master.
    pub fn new(master: &str, config: ClientConfig) -> Result<SchedulerClient, ClientError> {
        let base = base_url(master)?;
        Ok(SchedulerClient {
            endpoint: Endpoint::new(&base, "/api/v1/scheduler", config),
            master: base["http://".len()..].to_string(),
            base,
            stream_id: None,
        })
    }

    /// `host:port` this client talks to.
    pub fn master(&self) -> &str {
        &self.master
    }

    /// The full scheduler API URL.
    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    pub fn config(&self) -> &ClientConfig {
        &self.endpoint.config
    }

    /// The id of the current subscription, if SUBSCRIBE succeeded.
    pub fn stream_id(&self) -> Option<&str> {
        self.stream_id.as_deref()
    }

    /// Sends SUBSCRIBE and returns the open event stream. The previous stream id is
    /// forgotten first, so a failed attempt never leaves a stale one behind.
    pub fn subscribe(&mut self, call: &scheduler::Call) -> Result<Subscription, ClientError> {
        self.stream_id = None;
        let opened = self.endpoint.subscribe::<_, scheduler::Event>(call)?;
        let Some(stream_id) = opened.stream_id else {
            return Err(ClientError::Protocol {
                endpoint: self.endpoint.name(),
                detail: "SUBSCRIBE answered 200 without a Mesos-Stream-Id header".into(),
            });
        };
        log::info!("subscribed to {} (stream {stream_id})", self.master);
        self.stream_id = Some(stream_id.clone());
        Ok(Subscription {
            stream_id,
            events: opened.events,
        })
    }

    /// Sends any call but SUBSCRIBE on its own connection with the stream id; `Ok` on 202.
    pub fn call(&self, call: &scheduler::Call) -> Result<(), ClientError> {
        let Some(stream_id) = self.stream_id.as_deref() else {
            return Err(ClientError::NotSubscribed {
                endpoint: self.endpoint.name(),
            });
        };
        self.endpoint.call(call, Some(stream_id))
    }

    /// `GET /version` of this master. Any master answers it, leading or not.
    pub fn master_version(&self) -> Result<MasterVersion, ClientError> {
        let url = format!("{}/version", self.base);
        let value = get_json_with(&self.endpoint.agent, &url, MAX_JSON_BODY)?;
        serde_json::from_value(value).map_err(|e| ClientError::Protocol {
            endpoint: format!("GET {url}"),
            detail: format!("not a Mesos version object: {e}"),
        })
    }
}

/// Client of an agent's `/api/v1/executor` (address from `MESOS_AGENT_ENDPOINT`). The
/// executor API has no stream id: the agent knows the executor from the call's ids.
#[derive(Debug, Clone)]
pub struct ExecutorClient {
    endpoint: Endpoint,
}

impl ExecutorClient {
    /// `agent` is `host:port` as in `MESOS_AGENT_ENDPOINT`.
    pub fn new(agent: &str, config: ClientConfig) -> Result<ExecutorClient, ClientError> {
        let base = base_url(agent)?;
        Ok(ExecutorClient {
            endpoint: Endpoint::new(&base, "/api/v1/executor", config),
        })
    }

    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    pub fn config(&self) -> &ClientConfig {
        &self.endpoint.config
    }

    /// Sends SUBSCRIBE and returns the open event stream.
    pub fn subscribe(&self, call: &executor::Call) -> Result<ExecutorEventStream, ClientError> {
        let opened = self.endpoint.subscribe::<_, executor::Event>(call)?;
        Ok(opened.events)
    }

    /// Sends UPDATE or MESSAGE on its own connection; `Ok` on 202.
    pub fn call(&self, call: &executor::Call) -> Result<(), ClientError> {
        self.endpoint.call(call, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_endpoint_and_status() {
        let e = ClientError::Rejected {
            endpoint: "POST http://m:5050/api/v1/scheduler".into(),
            status: 400,
            message: "Expecting 'framework_id' to be present".into(),
        };
        let shown = e.to_string();
        assert!(
            shown.contains("POST http://m:5050/api/v1/scheduler"),
            "{shown}"
        );
        assert!(shown.contains("400"), "{shown}");
        assert!(shown.contains("framework_id"), "{shown}");
        assert_eq!(e.status(), Some(400));

        let e = ClientError::Redirect {
            endpoint: "POST http://m:5050/api/v1/scheduler".into(),
            leader: "m2:5050".into(),
        };
        let shown = e.to_string();
        assert!(
            shown.contains("307") && shown.contains("m2:5050"),
            "{shown}"
        );
        assert!(shown.contains("http://m:5050"), "{shown}");
    }

    #[test]
    fn event_streams_can_move_to_a_reader_thread() {
        fn send<T: Send>() {}
        send::<EventStream>();
        send::<ExecutorEventStream>();
        send::<SchedulerClient>();
        send::<ExecutorClient>();
    }
}
