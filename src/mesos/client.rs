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

use crate::mesos::codec::{CodecError, Encoding};
use crate::mesos::offers::RawOffers;
use crate::mesos::proto::Message;
use crate::mesos::recordio::{self, RecordIoError};
use crate::mesos::{executor, scheduler};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fmt;
use std::io::{self, Read};
use std::marker::PhantomData;
use std::time::Duration;
use ureq::http::Response;

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
    /// Largest single event accepted from the stream.
    pub max_event_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            encoding: Encoding::Protobuf,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            stream_idle_timeout: None,
            max_event_bytes: recordio::DEFAULT_MAX_RECORD,
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

/// Why reading the next event from an open stream failed. Except for `Decode`, the stream is
/// unusable afterwards: subscribe again.
#[derive(Debug)]
pub enum StreamError {
    /// Nothing arrived for the configured idle timeout.
    IdleTimeout { endpoint: String, idle: Duration },
    /// The connection failed or ended in the middle of the HTTP framing.
    Transport { endpoint: String, error: io::Error },
    /// The body is not valid RecordIO (or ended inside a record).
    Framing {
        endpoint: String,
        error: RecordIoError,
    },
    /// One record did not decode as an event. The framing is intact, so the next call to
    /// `next_event` continues with the following record.
    Decode { endpoint: String, error: CodecError },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::IdleTimeout { endpoint, idle } => write!(
                f,
                "{endpoint}: event stream silent for {} ms, giving up on it",
                idle.as_millis()
            ),
            StreamError::Transport { endpoint, error } => {
                write!(f, "{endpoint}: event stream broke: {error}")
            }
            StreamError::Framing { endpoint, error } => write!(f, "{endpoint}: {error}"),
            StreamError::Decode { endpoint, error } => {
                write!(f, "{endpoint}: undecodable event: {error}")
            }
        }
    }
}

impl std::error::Error for StreamError {}

/// The events of one subscription, read one RecordIO record at a time from the open body.
pub struct EventReader<E> {
    records: recordio::Reader<ureq::BodyReader<'static>>,
    encoding: Encoding,
    endpoint: String,
    idle: Option<Duration>,
    // fn() -> E: the reader produces E values but owns none, so it is Send whatever E is.
    _event: PhantomData<fn() -> E>,
}

/// The master's scheduler event stream.
pub type EventStream = EventReader<scheduler::Event>;
/// The agent's executor event stream.
pub type ExecutorEventStream = EventReader<executor::Event>;

impl<E: Message + DeserializeOwned> EventReader<E> {
    /// The next event; `Ok(None)` when the server ended the stream cleanly between events.
    pub fn next_event(&mut self) -> Result<Option<E>, StreamError> {
        let Some(record) = read_record(&mut self.records, &self.endpoint, self.idle)? else {
            return Ok(None);
        };
        decode_event(self.encoding, &self.endpoint, record).map(Some)
    }

    /// Method and URL of the stream, for logs.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// What the master's stream yields: an event, or the offers of an OFFERS event kept encoded
/// (issue 12: decoded whole, a 10,000-offer event held some 11 MB while the scheduler
/// worked through it).
pub enum SchedulerItem {
    Event(Box<scheduler::Event>),
    Offers(RawOffers),
}

impl EventReader<scheduler::Event> {
    /// The next event, an OFFERS event's offers undecoded when the stream is protobuf.
    pub fn next_item(&mut self) -> Result<Option<SchedulerItem>, StreamError> {
        let Some(record) = read_record(&mut self.records, &self.endpoint, self.idle)? else {
            return Ok(None);
        };
        if self.encoding == Encoding::Protobuf {
            if let Some(offers) = RawOffers::split(record) {
                return Ok(Some(SchedulerItem::Offers(offers)));
            }
        }
        decode_event(self.encoding, &self.endpoint, record)
            .map(|e| Some(SchedulerItem::Event(Box::new(e))))
    }
}

fn read_record<'r, R: Read>(
    records: &'r mut recordio::Reader<R>,
    endpoint: &str,
    idle: Option<Duration>,
) -> Result<Option<&'r [u8]>, StreamError> {
    match records.next_record() {
        Ok(record) => Ok(record),
        Err(RecordIoError::Io(error)) => Err(io_error(endpoint, idle, error)),
        Err(error) => Err(StreamError::Framing {
            endpoint: endpoint.to_owned(),
            error,
        }),
    }
}

fn decode_event<E: Message + DeserializeOwned>(
    encoding: Encoding,
    endpoint: &str,
    record: &[u8],
) -> Result<E, StreamError> {
    encoding
        .decode::<E>(record)
        .map_err(|error| StreamError::Decode {
            endpoint: endpoint.to_owned(),
            error,
        })
}

fn io_error(endpoint: &str, idle: Option<Duration>, error: io::Error) -> StreamError {
    // Only the per-read limit is an idle timeout; no other budget runs on the stream.
    let timed_out = match error
        .get_ref()
        .and_then(|e| e.downcast_ref::<ureq::Error>())
    {
        Some(ureq::Error::Timeout(ureq::Timeout::PerRead)) => true,
        Some(_) => false,
        None => error.kind() == io::ErrorKind::TimedOut,
    };
    match (timed_out, idle) {
        (true, Some(idle)) => StreamError::IdleTimeout {
            endpoint: endpoint.to_owned(),
            idle,
        },
        _ => StreamError::Transport {
            endpoint: endpoint.to_owned(),
            error,
        },
    }
}

impl<E: Message + DeserializeOwned> Iterator for EventReader<E> {
    type Item = Result<E, StreamError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

impl<E> fmt::Debug for EventReader<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventReader")
            .field("endpoint", &self.endpoint)
            .field("encoding", &self.encoding)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

/// A successful scheduler SUBSCRIBE: the id every later call must carry, and the events.
#[derive(Debug)]
pub struct Subscription {
    pub stream_id: String,
    pub events: EventStream,
}

/// One v1 API URL with the behaviour both APIs share.
#[derive(Debug, Clone)]
struct Endpoint {
    agent: ureq::Agent,
    url: String,
    config: ClientConfig,
}

/// What SUBSCRIBE hands back before the caller wraps it.
struct Opened<E> {
    stream_id: Option<String>,
    events: EventReader<E>,
}

impl Endpoint {
    fn new(base: &str, path: &str, config: ClientConfig) -> Endpoint {
        Endpoint {
            agent: new_agent(&config),
            url: format!("{base}{path}"),
            config,
        }
    }

    fn name(&self) -> String {
        format!("POST {}", self.url)
    }

    fn post(
        &self,
        body: &[u8],
        stream_id: Option<&str>,
        streaming: bool,
    ) -> Result<Response<ureq::Body>, ClientError> {
        let media = self.config.encoding.content_type();
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", media)
            .header("Accept", media);
        if let Some(id) = stream_id {
            request = request.header(STREAM_ID_HEADER, id);
        }
        if streaming {
            // See the module comment: only budgets that end with the response headers, plus
            // the per-read limit as the idle timeout of the stream.
            let t = Some(self.config.request_timeout);
            request = request
                .config()
                .timeout_global(None)
                .timeout_per_call(None)
                .timeout_recv_body(None)
                .timeout_send_request(t)
                .timeout_send_body(t)
                .timeout_recv_response(t)
                .timeout_per_read(self.config.stream_idle_timeout)
                .build();
        }
        log::trace!(
            "{} ({} bytes, {})",
            self.name(),
            body.len(),
            self.config.encoding
        );
        request
            .send(body)
            .map_err(|e| ClientError::Transport(format!("{}: {}", self.name(), e)))
    }

    fn subscribe<C, E>(&self, call: &C) -> Result<Opened<E>, ClientError>
    where
        C: Message + Serialize,
        E: Message + DeserializeOwned,
    {
        let body = self.config.encoding.encode(call);
        let response = self.post(&body, None, true)?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(self.failure(response, "200 with an event stream"));
        }
        self.check_content_type(&response)?;
        let stream_id = response
            .headers()
            .get(STREAM_ID_HEADER)
            .map(|value| valid_stream_id(value.as_bytes()))
            .transpose()
            .map_err(|detail| ClientError::Protocol {
                endpoint: self.name(),
                detail,
            })?;
        let body = response.into_body().into_reader();
        Ok(Opened {
            stream_id,
            events: EventReader {
                records: recordio::Reader::with_max_record(body, self.config.max_event_bytes),
                encoding: self.config.encoding,
                endpoint: self.name(),
                idle: self.config.stream_idle_timeout,
                _event: PhantomData,
            },
        })
    }

    fn call<C: Message + Serialize>(
        &self,
        call: &C,
        stream_id: Option<&str>,
    ) -> Result<(), ClientError> {
        let body = self.config.encoding.encode(call);
        let response = self.post(&body, stream_id, false)?;
        // 202 is what both APIs document; any 2xx still means the call was taken.
        if response.status().is_success() {
            // Draining a short body lets ureq pool the connection for the next call.
            let mut sink = [0u8; 512];
            let mut reader = response.into_body().into_reader().take(64 * 1024);
            while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
            return Ok(());
        }
        Err(self.failure(response, "202 Accepted"))
    }

    /// A stream in the other encoding would fail on every record with a confusing decode
    /// error; say what happened instead. Other media types are let through (proxies may
    /// rewrite them) and any mismatch then shows as a decode error.
    fn check_content_type(&self, response: &Response<ureq::Body>) -> Result<(), ClientError> {
        let Some(got) = response
            .headers()
            .get("Content-Type")
            .and_then(|v| v.to_str().ok())
        else {
            return Ok(());
        };
        let media = got.split(';').next().unwrap_or("").trim();
        let ours = self.config.encoding.content_type();
        let other = match self.config.encoding {
            Encoding::Protobuf => Encoding::Json,
            Encoding::Json => Encoding::Protobuf,
        };
        if media.eq_ignore_ascii_case(other.content_type()) {
            return Err(ClientError::Protocol {
                endpoint: self.name(),
                detail: format!("asked for an {ours} event stream but got {got}"),
            });
        }
        if !media.eq_ignore_ascii_case(ours) {
            log::warn!(
                "{}: event stream has Content-Type {got}, expected {ours}",
                self.name()
            );
        }
        Ok(())
    }

    fn failure(&self, response: Response<ureq::Body>, expected: &str) -> ClientError {
        classify(self.name(), response, expected)
    }
}

/// Maps a response that is not the expected success onto [`ClientError`].
fn classify(endpoint: String, response: Response<ureq::Body>, expected: &str) -> ClientError {
    let status = response.status().as_u16();
    match status {
        307 | 308 => {
            let location = response
                .headers()
                .get("Location")
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            match location.as_deref().map(parse_leader) {
                Some(Ok(leader)) => ClientError::Redirect { endpoint, leader },
                Some(Err(why)) => ClientError::Protocol {
                    endpoint,
                    detail: format!("HTTP {status} with an unusable Location: {why}"),
                },
                None => ClientError::Protocol {
                    endpoint,
                    detail: format!("HTTP {status} without a Location header"),
                },
            }
        }
        400..=499 => ClientError::Rejected {
            endpoint,
            status,
            message: error_message(response),
        },
        500..=599 => ClientError::ServerError {
            endpoint,
            status,
            message: error_message(response),
        },
        _ => {
            let message = error_message(response);
            let detail = if message.is_empty() {
                format!("unexpected HTTP {status}, expected {expected}")
            } else {
                format!("unexpected HTTP {status}, expected {expected}: {message}")
            };
            ClientError::Protocol { endpoint, detail }
        }
    }
}

/// The body of an error response as text, trimmed and capped at [`MAX_ERROR_MESSAGE`].
fn error_message(response: Response<ureq::Body>) -> String {
    let mut raw = Vec::new();
    let mut reader = response
        .into_body()
        .into_reader()
        .take(MAX_ERROR_MESSAGE as u64 + 1);
    if let Err(e) = reader.read_to_end(&mut raw) {
        // Keep what arrived: the status alone already says the call failed.
        log::debug!("error body unreadable after {} bytes: {e}", raw.len());
    }
    let truncated = raw.len() > MAX_ERROR_MESSAGE;
    raw.truncate(MAX_ERROR_MESSAGE);
    let text = String::from_utf8_lossy(&raw);
    let mut message = text.trim().to_string();
    if truncated {
        message.push_str(" [truncated]");
    }
    message
}

fn valid_stream_id(raw: &[u8]) -> Result<String, String> {
    let id = std::str::from_utf8(raw)
        .map_err(|_| "Mesos-Stream-Id is not UTF-8".to_string())?
        .trim();
    if id.is_empty() {
        return Err("Mesos-Stream-Id header is empty".into());
    }
    if id.len() > MAX_STREAM_ID || !id.bytes().all(|b| b.is_ascii_graphic()) {
        let shown: String = id.chars().take(64).collect();
        return Err(format!("Mesos-Stream-Id {shown:?} is not a plain token"));
    }
    Ok(id.to_string())
}

/// `host:port` of the leading master from a redirect's `Location`, which Mesos writes as
/// `//host:port/master/api/v1/scheduler`; absolute `http(s)://host:port/...` is accepted too.
pub fn parse_leader(location: &str) -> Result<String, String> {
    let loc = location.trim();
    let lower = loc.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &loc[5..]
    } else if lower.starts_with("https://") {
        &loc[6..]
    } else {
        loc
    };
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(format!("{loc:?} names no host (expected //host:port/...)"));
    };
    let authority = rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("")
        .rsplit('@')
        .next()
        .unwrap_or("");
    check_authority(authority).map_err(|why| format!("{loc:?}: {why}"))?;
    Ok(authority.to_string())
}

fn check_authority(authority: &str) -> Result<(), String> {
    if authority.is_empty() {
        return Err("empty host".into());
    }
    if authority
        .bytes()
        .any(|b| !b.is_ascii_graphic() || matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\'))
    {
        return Err(format!("{authority:?} is not host[:port]"));
    }
    // The port is whatever follows the last ':' outside an IPv6 literal's brackets.
    let port = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => Some(&authority[i + 1..]),
        _ => None,
    };
    if let Some(port) = port {
        if port.parse::<u16>().is_err() {
            return Err(format!("{authority:?} has an invalid port {port:?}"));
        }
    }
    if authority.starts_with(':') {
        return Err(format!("{authority:?} has no host before the port"));
    }
    Ok(())
}

/// `http://host:port` from `host:port` or `http://host:port[/]`: the one place a master
/// address becomes a URL.
pub fn base_url(address: &str) -> Result<String, ClientError> {
    let invalid = |reason: String| ClientError::InvalidAddress {
        address: address.to_string(),
        reason,
    };
    let trimmed = address.trim();
    let rest = if trimmed
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
    {
        &trimmed[7..]
    } else if let Some(i) = trimmed.find("://") {
        return Err(invalid(format!(
            "scheme {:?} is not supported; give host:port (plain HTTP)",
            &trimmed[..i]
        )));
    } else {
        trimmed
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    check_authority(authority).map_err(invalid)?;
    Ok(format!("http://{authority}"))
}

fn new_agent(config: &ClientConfig) -> ureq::Agent {
    ureq::Agent::config_builder()
        // Statuses carry the API's answers (307 leader, 4xx reason); read them, do not fail.
        .http_status_as_error(false)
        // A redirect means "talk to another master", which resets the subscription; the
        // caller decides, and a followed POST would silently lose the stream id.
        .max_redirects(0)
        // Mesos lives on the cluster network; an HTTP_PROXY meant for the outside world
        // would only get in the way.
        .proxy(None)
        .user_agent(concat!("storage-framework/", env!("CARGO_PKG_VERSION")))
        .timeout_resolve(Some(config.connect_timeout))
        .timeout_connect(Some(config.connect_timeout))
        .timeout_global(Some(config.request_timeout))
        // Calls are a few kilobytes (a bigger body goes through in pieces) and events are
        // read as they stream; ureq's default 128 KiB each way is a quarter megabyte per
        // connection, and the sender holds five.
        .input_buffer_size(16 * 1024)
        .output_buffer_size(16 * 1024)
        .build()
        .into()
}

/// `GET url` and parse the body as JSON (at most 1 MiB), with the client's timeouts.
pub fn get_json(url: &str, config: &ClientConfig) -> Result<serde_json::Value, ClientError> {
    get_json_with(&new_agent(config), url, MAX_JSON_BODY)
}

/// `GET url` and deserialize the body as `T` while it is read (at most `max_bytes`): the
/// body is never held whole, so a type that keeps only what it needs (unknown fields are
/// skipped) costs what it keeps, not the size of the body. For answers that grow with the
/// cluster (`/master/slaves` is megabytes at 10,000 agents).
pub fn get_json_streamed<T: DeserializeOwned>(
    url: &str,
    config: &ClientConfig,
    max_bytes: u64,
) -> Result<T, ClientError> {
    let (endpoint, response) = get_ok(&new_agent(config), url)?;
    let reader = response
        .into_body()
        .into_with_config()
        .limit(max_bytes)
        .reader();
    serde_json::from_reader(std::io::BufReader::with_capacity(16 * 1024, reader)).map_err(|e| {
        if e.is_io() {
            ClientError::Transport(format!("{endpoint}: reading the body: {e}"))
        } else {
            ClientError::Protocol {
                endpoint,
                detail: format!("unexpected body: {e}"),
            }
        }
    })
}

/// `GET url` asking for JSON: the endpoint (for errors) and the response, when it is a 200.
fn get_ok(agent: &ureq::Agent, url: &str) -> Result<(String, Response<ureq::Body>), ClientError> {
    let endpoint = format!("GET {url}");
    log::debug!("{endpoint}");
    let response = agent
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| ClientError::Transport(format!("{endpoint}: {e}")))?;
    if response.status().as_u16() != 200 {
        return Err(classify(endpoint, response, "200 with a JSON body"));
    }
    Ok((endpoint, response))
}

fn get_json_with(
    agent: &ureq::Agent,
    url: &str,
    max_bytes: u64,
) -> Result<serde_json::Value, ClientError> {
    let (endpoint, response) = get_ok(agent, url)?;
    let body = response
        .into_body()
        .into_with_config()
        .limit(max_bytes)
        .read_to_vec()
        .map_err(|e| ClientError::Transport(format!("{endpoint}: reading the body: {e}")))?;
    serde_json::from_slice(&body).map_err(|e| ClientError::Protocol {
        endpoint,
        detail: format!("body is not JSON: {e}"),
    })
}

/// The master's `GET /version` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterVersion {
    /// e.g. `1.4.0`.
    pub version: String,
    #[serde(default)]
    pub git_sha: Option<String>,
    #[serde(default)]
    pub git_tag: Option<String>,
    #[serde(default)]
    pub build_date: Option<String>,
}

impl MasterVersion {
    /// `(major, minor, patch)` of `version`; a pre-release suffix (`1.10.0-rc1`) is ignored
    /// and a missing patch counts as 0.
    pub fn numbers(&self) -> Result<(u32, u32, u32), String> {
        let core = self.version.trim().split(['-', '+']).next().unwrap_or("");
        let mut parts = core.split('.');
        let mut next = |what: &str, required: bool| -> Result<u32, String> {
            match parts.next() {
                Some(p) => p.parse::<u32>().map_err(|_| {
                    format!("master version {:?}: {what} is not a number", self.version)
                }),
                None if required => Err(format!(
                    "master version {:?} lacks the {what}",
                    self.version
                )),
                None => Ok(0),
            }
        };
        let major = next("major", true)?;
        let minor = next("minor", true)?;
        let patch = next("patch", false)?;
        Ok((major, minor, patch))
    }

    /// Whether this master is at least `major.minor`.
    pub fn at_least(&self, major: u32, minor: u32) -> Result<bool, String> {
        let (ma, mi, _) = self.numbers()?;
        Ok((ma, mi) >= (major, minor))
    }
}

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
    fn leader_from_protocol_relative_location() {
        assert_eq!(
            parse_leader("//10.0.0.7:5050/master/api/v1/scheduler").as_deref(),
            Ok("10.0.0.7:5050")
        );
        assert_eq!(
            parse_leader(" //master-2.example:5050/master/api/v1/scheduler ").as_deref(),
            Ok("master-2.example:5050")
        );
    }

    #[test]
    fn leader_from_absolute_location() {
        assert_eq!(
            parse_leader("http://10.0.0.8:5050/master/api/v1/scheduler").as_deref(),
            Ok("10.0.0.8:5050")
        );
        assert_eq!(
            parse_leader("HTTPS://m3:5051/x?y#z").as_deref(),
            Ok("m3:5051")
        );
        assert_eq!(parse_leader("//[::1]:5050/").as_deref(), Ok("[::1]:5050"));
        assert_eq!(parse_leader("//m4:5050").as_deref(), Ok("m4:5050"));
    }

    #[test]
    fn unusable_locations_are_errors() {
        for bad in [
            "/master/api/v1/scheduler",
            "",
            "//",
            "///master",
            "//:5050/x",
            "//host:50x0/x",
            "//host:99999/x",
            "http:/host:5050/",
            "//ho st:5050/",
        ] {
            let err = parse_leader(bad).expect_err(bad);
            assert!(!err.is_empty(), "{bad}");
        }
    }

    #[test]
    fn addresses_normalise_to_a_base_url() {
        assert_eq!(base_url("m1:5050").unwrap(), "http://m1:5050");
        assert_eq!(base_url(" http://m1:5050/ ").unwrap(), "http://m1:5050");
        assert_eq!(
            base_url("HTTP://10.0.0.1:5051").unwrap(),
            "http://10.0.0.1:5051"
        );
        for bad in [
            "zk://zk1:2181/mesos",
            "https://m1:5050",
            "",
            "m1:5050/master",
            "m1:x",
        ] {
            match base_url(bad) {
                Err(ClientError::InvalidAddress { address, reason }) => {
                    assert_eq!(address, bad);
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn stream_ids_must_be_plain_tokens() {
        assert_eq!(
            valid_stream_id(b" 3a1c2a3e-2b43-4f2c-9a6f-0f1d1f4a7b10 ").as_deref(),
            Ok("3a1c2a3e-2b43-4f2c-9a6f-0f1d1f4a7b10")
        );
        assert!(valid_stream_id(b"").is_err());
        assert!(valid_stream_id(b"a b").is_err());
        assert!(valid_stream_id(&[0xff, 0xfe]).is_err());
        assert!(valid_stream_id(&[b'a'; MAX_STREAM_ID + 1]).is_err());
    }

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
    fn master_version_numbers() {
        let v = |s: &str| MasterVersion {
            version: s.into(),
            git_sha: None,
            git_tag: None,
            build_date: None,
        };
        assert_eq!(v("1.4.0").numbers(), Ok((1, 4, 0)));
        assert_eq!(v("1.10.2-rc1").numbers(), Ok((1, 10, 2)));
        assert_eq!(v("2.0").numbers(), Ok((2, 0, 0)));
        assert!(v("1").numbers().is_err());
        assert!(v("one.two").numbers().is_err());
        assert_eq!(v("0.28.2").at_least(1, 0), Ok(false));
        assert_eq!(v("1.0.0").at_least(1, 0), Ok(true));
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
