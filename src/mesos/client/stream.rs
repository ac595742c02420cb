//! The event stream of a subscription: RecordIO records read from the open response body
//! and decoded one at a time, with an idle timeout told apart from other transport failures.
//!
//! One size cap for every event would have to let any event be as large as a large
//! cluster's OFFERS event (tens of MB in JSON). Instead the reader takes records up to the
//! largest cap there is, and a record over the cap of ordinary events is kept only when its
//! type, read from its first fields without decoding the rest, is the one allowed more.

use crate::mesos::codec::{CodecError, Encoding};
use crate::mesos::offers::RawOffers;
use crate::mesos::proto::{Message, Reader, WIRE_VARINT};
use crate::mesos::recordio::{self, RecordIoError};
use crate::mesos::{executor, scheduler};
use serde::de::DeserializeOwned;
use std::fmt;
use std::io::{self, Read};
use std::marker::PhantomData;
use std::time::Duration;

/// Why reading the next event from an open stream failed. Except for `Decode` and
/// `TooLarge`, the stream is unusable afterwards: subscribe again.
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
    /// One event over the cap of its type (`event_type` is its Mesos name, or `untyped`
    /// when it has none that can be read). It was read whole and is dropped; the next call
    /// continues after it.
    TooLarge {
        endpoint: String,
        event_type: String,
        size: usize,
        max: usize,
    },
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
            StreamError::TooLarge {
                endpoint,
                event_type,
                size,
                max,
            } => write!(
                f,
                "{endpoint}: {event_type} event of {size} bytes is over the {max}-byte cap of its type"
            ),
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
    pub(super) caps: Caps,
    // fn() -> E: the reader produces E values but owns none, so it is Send whatever E is.
    pub(super) _event: PhantomData<fn() -> E>,
}

/// The size caps of one stream's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Caps {
    /// Of every event but the stream's large type.
    pub(super) event: usize,
    /// Of the large type (see [`StreamEvent::LARGE_TYPE`]).
    pub(super) large: usize,
}

impl Caps {
    /// What the RecordIO reader may take before the type is known.
    pub(super) fn record<E: StreamEvent>(self) -> usize {
        match E::LARGE_TYPE {
            Some(_) => self.event.max(self.large),
            None => self.event,
        }
    }
}

/// The events a stream carries, as far as their size caps go.
pub trait StreamEvent: Message + DeserializeOwned {
    /// The Mesos name of the one type allowed the large cap, if the stream has one.
    const LARGE_TYPE: Option<&'static str>;
    /// The Mesos name of the type whose protobuf value is `value`.
    fn type_name(value: i32) -> String;
}

impl StreamEvent for scheduler::Event {
    // OFFERS is the only event that grows with the cluster (one offer per agent).
    const LARGE_TYPE: Option<&'static str> = Some("OFFERS");
    fn type_name(value: i32) -> String {
        scheduler::event::Type::from_i32(value).to_string()
    }
}

impl StreamEvent for executor::Event {
    const LARGE_TYPE: Option<&'static str> = None;
    fn type_name(value: i32) -> String {
        executor::event::Type::from_i32(value).to_string()
    }
}

/// The master's scheduler event stream.
pub type EventStream = EventReader<scheduler::Event>;
/// The agent's executor event stream.
pub type ExecutorEventStream = EventReader<executor::Event>;

impl<E: StreamEvent> EventReader<E> {
    /// The next event; `Ok(None)` when the server ended the stream cleanly between events.
    pub fn next_event(&mut self) -> Result<Option<E>, StreamError> {
        let Some(record) = read_record(&mut self.records, &self.endpoint, self.idle)? else {
            return Ok(None);
        };
        check_size::<E>(self.encoding, &self.endpoint, record, self.caps)?;
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
#[derive(Debug)]
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
        check_size::<scheduler::Event>(self.encoding, &self.endpoint, record, self.caps)?;
        if self.encoding == Encoding::Protobuf {
            if let Some(offers) = RawOffers::take_from(&mut self.records) {
                return Ok(Some(SchedulerItem::Offers(offers)));
            }
        }
        decode_event(self.encoding, &self.endpoint, self.records.last())
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

/// Refuses a record over the cap of its type. A record within the cap of ordinary events
/// costs one comparison; only a larger one has its type read.
fn check_size<E: StreamEvent>(
    encoding: Encoding,
    endpoint: &str,
    record: &[u8],
    caps: Caps,
) -> Result<(), StreamError> {
    if record.len() <= caps.event {
        return Ok(());
    }
    let event_type = peek_type::<E>(encoding, record);
    let large = event_type.is_some() && event_type.as_deref() == E::LARGE_TYPE;
    let max = if large { caps.large } else { caps.event };
    if record.len() <= max {
        return Ok(());
    }
    Err(StreamError::TooLarge {
        endpoint: endpoint.to_owned(),
        event_type: event_type.unwrap_or_else(|| "untyped".into()),
        size: record.len(),
        max,
    })
}

/// The type of an encoded event, without decoding the rest of it: protobuf field 1 (both
/// APIs' `Event.type`) or the JSON member `type`. `None` when absent or malformed.
fn peek_type<E: StreamEvent>(encoding: Encoding, record: &[u8]) -> Option<String> {
    match encoding {
        Encoding::Protobuf => {
            let mut r = Reader::new(record);
            while !r.is_eof() {
                let key = r.varint().ok()?;
                let wire = (key & 7) as u8;
                if key >> 3 == 1 && wire == WIRE_VARINT {
                    return Some(E::type_name(r.varint().ok()? as i32));
                }
                r.skip(wire).ok()?;
            }
            None
        }
        Encoding::Json => {
            // Every other member is skipped unbuilt, so this costs one pass over the text.
            #[derive(serde::Deserialize)]
            struct Head {
                r#type: Option<String>,
            }
            serde_json::from_slice::<Head>(record).ok()?.r#type
        }
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

impl<E: StreamEvent> Iterator for EventReader<E> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::scheduler::{event, Event};

    const CAPS: Caps = Caps {
        event: 100,
        large: 1000,
    };

    fn error_event(len: usize) -> Event {
        Event {
            r#type: Some(event::Type::Error),
            error: Some(event::Error {
                message: "e".repeat(len).into(),
            }),
            ..Default::default()
        }
    }

    fn offers_event(offers: usize) -> Event {
        let offer = crate::mesos::offers::test_offer("o", "a", "h");
        Event {
            r#type: Some(event::Type::Offers),
            offers: Some(event::Offers {
                offers: vec![offer; offers],
            }),
            ..Default::default()
        }
    }

    fn check(encoding: Encoding, event: &Event) -> Result<usize, StreamError> {
        let record = encoding.encode(event);
        check_size::<Event>(encoding, "POST m", &record, CAPS).map(|()| record.len())
    }

    #[test]
    fn the_large_type_is_offers() {
        assert_eq!(
            <Event as StreamEvent>::LARGE_TYPE,
            Some(event::Type::Offers.as_str())
        );
        assert_eq!(CAPS.record::<Event>(), 1000);
        assert_eq!(CAPS.record::<executor::Event>(), 100);
    }

    #[test]
    fn each_type_is_held_to_its_own_cap_in_both_encodings() {
        for encoding in [Encoding::Protobuf, Encoding::Json] {
            assert!(check(encoding, &error_event(10)).is_ok());
            let size = check(encoding, &offers_event(5)).expect("offers within the large cap");
            assert!(size > CAPS.event, "{encoding:?}: {size}");
            match check(encoding, &error_event(200)) {
                Err(StreamError::TooLarge {
                    event_type, max, ..
                }) => assert_eq!((event_type.as_str(), max), ("ERROR", 100)),
                other => panic!("{encoding:?}: {other:?}"),
            }
            match check(encoding, &offers_event(50)) {
                Err(e @ StreamError::TooLarge { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains("OFFERS event of"), "{text}");
                    assert!(text.contains("over the 1000-byte cap"), "{text}");
                }
                other => panic!("{encoding:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_large_record_of_no_readable_type_gets_the_small_cap() {
        for record in [&[0xffu8; 200][..], &[b'{'; 200][..]] {
            for encoding in [Encoding::Protobuf, Encoding::Json] {
                match check_size::<Event>(encoding, "POST m", record, CAPS) {
                    Err(StreamError::TooLarge {
                        event_type, max, ..
                    }) => {
                        assert_eq!(max, 100);
                        assert_eq!(event_type, "untyped");
                    }
                    other => panic!("{encoding:?}: {other:?}"),
                }
            }
        }
    }
}
