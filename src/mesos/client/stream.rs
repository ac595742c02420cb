//! The event stream of a subscription: RecordIO records read from the open response body
//! and decoded one at a time, with an idle timeout told apart from other transport failures.

use crate::mesos::codec::{CodecError, Encoding};
use crate::mesos::offers::RawOffers;
use crate::mesos::proto::Message;
use crate::mesos::recordio::{self, RecordIoError};
use crate::mesos::{executor, scheduler};
use serde::de::DeserializeOwned;
use std::fmt;
use std::io::{self, Read};
use std::marker::PhantomData;
use std::time::Duration;

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
    pub(super) records: recordio::Reader<ureq::BodyReader<'static>>,
    pub(super) encoding: Encoding,
    pub(super) endpoint: String,
    pub(super) idle: Option<Duration>,
    // fn() -> E: the reader produces E values but owns none, so it is Send whatever E is.
    pub(super) _event: PhantomData<fn() -> E>,
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
/// (decoded whole, a 10,000-offer event held some 11 MB while the scheduler worked through
/// it).
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
