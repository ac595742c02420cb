//! One v1 API endpoint: posting calls with the configured encoding and timeouts, opening
//! the SUBSCRIBE stream, and turning any other answer into a [`ClientError`].

use super::address::parse_leader;
use super::stream::{Caps, EventReader, StreamEvent};
use super::{ClientConfig, ClientError, MAX_ERROR_MESSAGE, MAX_STREAM_ID, STREAM_ID_HEADER};
use crate::mesos::codec::Encoding;
use crate::mesos::proto::Message;
use crate::mesos::recordio;
use serde::Serialize;
use std::io::Read;
use std::marker::PhantomData;
use ureq::http::Response;

/// One v1 API URL with the behaviour both APIs share.
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    pub(super) agent: ureq::Agent,
    pub(super) url: String,
    pub(super) config: ClientConfig,
}

/// What SUBSCRIBE hands back before the caller wraps it.
pub(super) struct Opened<E> {
    pub(super) stream_id: Option<String>,
    pub(super) events: EventReader<E>,
}

impl Endpoint {
    pub(super) fn new(base: &str, path: &str, config: ClientConfig) -> Endpoint {
        Endpoint {
            agent: new_agent(&config),
            url: format!("{base}{path}"),
            config,
        }
    }

    pub(super) fn name(&self) -> String {
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

    pub(super) fn subscribe<C, E>(&self, call: &C) -> Result<Opened<E>, ClientError>
    where
        C: Message + Serialize,
        E: StreamEvent,
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
        let caps = Caps {
            event: self.config.max_event_bytes,
            large: self.config.max_offers_event_bytes,
        };
        Ok(Opened {
            stream_id,
            events: EventReader {
                records: recordio::Reader::with_max_record(body, caps.record::<E>()),
                encoding: self.config.encoding,
                endpoint: self.name(),
                idle: self.config.stream_idle_timeout,
                caps,
                _event: PhantomData,
            },
        })
    }

    pub(super) fn call<C: Message + Serialize>(
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
pub(super) fn classify(
    endpoint: String,
    response: Response<ureq::Body>,
    expected: &str,
) -> ClientError {
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

pub(super) fn new_agent(config: &ClientConfig) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
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
        .build();
    crate::resolver::plain_agent(config)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
