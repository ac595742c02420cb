//! The offers of an OFFERS event, kept as the master encoded them and decoded one at a time.
//!
//! At 10,000 agents one OFFERS event holds 10,000 offers: some 3 MB on the wire, but about
//! 11 MB decoded (an `Offer` is 392 bytes before its resources, four of 176 bytes each). A
//! scheduler that decodes the event whole holds all of it while it works through the offers;
//! kept encoded, an offer costs its wire bytes until the moment it is looked at (at most
//! twice that while it waits: waiting offers share their event's bytes only when they are at
//! least half of them, and those bytes go with the last of them).
//!
//! The bytes are held once. A large event keeps the buffer the stream read it into
//! ([`RawOffers::from_buffer`]), and the offers that wait for the launch window share it:
//! copied out, the 10,000-offer event was held three times at once at the first rollout's
//! peak (the stream's buffer, the event's copy, the offers' copies: 11 MB), the largest
//! transient of a 10,000-agent scheduler.

use crate::mesos::proto::{DecodeError, Message, Reader, WIRE_LEN, WIRE_VARINT};
use crate::mesos::recordio;
use crate::mesos::scheduler::event;
use crate::mesos::types::Offer;
use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

/// The encoded offers of one OFFERS event: the event's bytes, shared, and where each offer
/// lies in them.
#[derive(Clone)]
pub struct RawOffers {
    bytes: Arc<Vec<u8>>,
    spans: Vec<(u32, u32)>,
}

/// Where each offer of `record` lies in it, when it is a protobuf OFFERS event that holds
/// nothing else this scheduler reads; `None` for any other event and for anything malformed,
/// which the whole-event decoder then reports as it does for every event.
fn offer_spans(record: &[u8]) -> Option<Vec<(u32, u32)>> {
    // Spans are u32: an event of 4 GiB is not one this scheduler reads.
    u32::try_from(record.len()).ok()?;
    let mut r = Reader::new(record);
    let mut is_offers = false;
    let mut spans = Vec::new();
    while !r.is_eof() {
        let key = r.varint().ok()?;
        match (key >> 3, (key & 7) as u8) {
            (1, WIRE_VARINT) => is_offers = r.varint().ok()? == event::Type::Offers.as_i32() as u64,
            (3, WIRE_LEN) => {
                let body = r.bytes().ok()?;
                let mut inner = Reader::new(body);
                while !inner.is_eof() {
                    let key = inner.varint().ok()?;
                    let wire = (key & 7) as u8;
                    if key >> 3 == 1 && wire == WIRE_LEN {
                        let offer = inner.bytes().ok()?;
                        let start = offer.as_ptr() as usize - record.as_ptr() as usize;
                        spans.push((start as u32, (start + offer.len()) as u32));
                    } else {
                        // Fields of later Mesos versions: not read (inverse offers come in an
                        // INVERSE_OFFERS event, decoded whole).
                        inner.skip(wire).ok()?;
                    }
                }
            }
            // Any other field (or wire type) is for the whole-event decoder.
            _ => return None,
        }
    }
    is_offers.then_some(spans)
}

impl RawOffers {
    /// The offers of `record` when it is a protobuf OFFERS event that holds nothing else this
    /// scheduler reads (`None` otherwise: the whole-event decoder reports it), its bytes copied.
    pub fn split(record: &[u8]) -> Option<RawOffers> {
        let spans = offer_spans(record)?;
        Some(RawOffers::from_buffer(
            record.to_vec(),
            0..record.len(),
            spans,
        ))
    }

    /// The offers of the record `records` returned last, when it is an OFFERS event (as
    /// [`RawOffers::split`]), taken out of the reader: a large record with the buffer it was
    /// read into, uncopied ([`recordio::Reader::take_last`]). `None` leaves the record there.
    pub fn take_from<R: Read>(records: &mut recordio::Reader<R>) -> Option<RawOffers> {
        let spans = offer_spans(records.last())?;
        let (buffer, at) = records.take_last();
        Some(RawOffers::from_buffer(buffer, at, spans))
    }

    /// The offers of the record at `at` in `buffer`, with `spans` from [`offer_spans`] of
    /// that record: the buffer is kept as it is, not copied.
    fn from_buffer(buffer: Vec<u8>, at: Range<usize>, spans: Vec<(u32, u32)>) -> RawOffers {
        debug_assert!(at.end <= buffer.len());
        let base = at.start as u32;
        let spans = spans
            .into_iter()
            .map(|(start, end)| (base + start, base + end))
            .collect();
        RawOffers {
            bytes: Arc::new(buffer),
            spans,
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The first `n` offers, to wait encoded; the rest stay. They share the event's bytes
    /// when they are at least half of them; otherwise they are copied out together, so that
    /// a few waiting offers never keep a large event alive.
    pub fn take_encoded(&mut self, n: usize) -> Vec<EncodedOffer> {
        let n = n.min(self.spans.len());
        let taken: usize = self.spans[..n]
            .iter()
            .map(|&(start, end)| (end - start) as usize)
            .sum();
        if taken * 2 >= self.bytes.len() {
            let bytes = &self.bytes;
            return self
                .spans
                .drain(..n)
                .map(|(start, end)| EncodedOffer {
                    bytes: bytes.clone(),
                    start,
                    end,
                })
                .collect();
        }
        let mut copy = Vec::with_capacity(taken);
        let mut spans = Vec::with_capacity(n);
        for (start, end) in self.spans.drain(..n) {
            let at = copy.len() as u32;
            copy.extend_from_slice(&self.bytes[start as usize..end as usize]);
            spans.push((at, copy.len() as u32));
        }
        let copy = Arc::new(copy);
        spans
            .into_iter()
            .map(|(start, end)| EncodedOffer {
                bytes: copy.clone(),
                start,
                end,
            })
            .collect()
    }

    /// The first `n` offers, decoded; the rest stay.
    pub fn take_decoded(&mut self, n: usize) -> Vec<Result<Offer, DecodeError>> {
        let n = n.min(self.spans.len());
        self.spans
            .drain(..n)
            .map(|(start, end)| Offer::decode(&self.bytes[start as usize..end as usize]))
            .collect()
    }
}

impl std::fmt::Debug for RawOffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RawOffers({} offers, {} bytes)",
            self.spans.len(),
            self.bytes.len()
        )
    }
}

/// One offer as the master encoded it, in bytes it may share with other offers.
#[derive(Clone)]
pub struct EncodedOffer {
    bytes: Arc<Vec<u8>>,
    start: u32,
    end: u32,
}

impl EncodedOffer {
    pub fn decode(&self) -> Result<Offer, DecodeError> {
        Offer::decode(&self.bytes[self.start as usize..self.end as usize])
    }
}

/// An offer with these ids and nothing else, for tests.
#[cfg(test)]
pub(crate) fn test_offer(id: &str, agent: &str, hostname: &str) -> Offer {
    use crate::mesos::types::{AgentID, FrameworkID, OfferID};
    Offer {
        id: OfferID { value: id.into() },
        framework_id: FrameworkID { value: "fw".into() },
        agent_id: AgentID {
            value: agent.into(),
        },
        hostname: hostname.into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::scheduler::Event;

    fn offer(i: usize) -> Offer {
        test_offer(
            &format!("offer-{i}"),
            &format!("agent-{i}"),
            &format!("host-{i}"),
        )
    }

    fn offers_event(n: usize) -> Event {
        Event {
            r#type: Some(event::Type::Offers),
            offers: Some(event::Offers {
                offers: (0..n).map(offer).collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_offers_event_splits_into_offers_that_decode_as_the_whole_event_does() {
        let bytes = offers_event(3).encode();
        let mut raw = RawOffers::split(&bytes).expect("an OFFERS event");
        assert_eq!(raw.len(), 3);
        let first: Vec<Offer> = raw
            .take_encoded(1)
            .iter()
            .map(|o| o.decode().unwrap())
            .collect();
        let rest: Vec<Offer> = raw
            .take_decoded(5)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(raw.is_empty());
        let all = offers_event(3).offers.unwrap().offers;
        assert_eq!(first, all[..1]);
        assert_eq!(rest, all[1..]);
    }

    /// Waiting offers that are most of the event share its bytes; a few are copied out
    /// together, so that they never keep a large event alive. Both decode as the event does.
    #[test]
    fn waiting_offers_share_the_event_or_a_copy_of_their_own_bytes() {
        let bytes = offers_event(10).encode();
        let all = offers_event(10).offers.unwrap().offers;
        let mut raw = RawOffers::split(&bytes).unwrap();
        let few = raw.take_encoded(2);
        let few_bytes: usize = few.iter().map(|o| (o.end - o.start) as usize).sum();
        assert_eq!(
            few[0].bytes.len(),
            few_bytes,
            "copied out together, and only them"
        );
        assert!(Arc::ptr_eq(&few[0].bytes, &few[1].bytes));
        assert!(!Arc::ptr_eq(&few[0].bytes, &raw.bytes));
        let most = raw.take_encoded(8);
        assert!(
            most.iter().all(|o| Arc::ptr_eq(&o.bytes, &raw.bytes)),
            "shared"
        );
        let decoded: Vec<Offer> = few
            .iter()
            .chain(&most)
            .map(|o| o.decode().unwrap())
            .collect();
        assert_eq!(decoded, all);
    }

    /// A record inside a larger buffer (as the stream read it) splits as the record alone.
    #[test]
    fn offers_split_in_place_in_the_buffer_they_were_read_into() {
        let record = offers_event(3).encode();
        let mut buffer = b"12\n".to_vec();
        buffer.extend_from_slice(&record);
        buffer.extend_from_slice(b"5\nnext!");
        let at = 3..3 + record.len();
        let spans = offer_spans(&buffer[at.clone()]).unwrap();
        let mut raw = RawOffers::from_buffer(buffer, at, spans);
        let decoded: Vec<Offer> = raw
            .take_decoded(3)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(decoded, offers_event(3).offers.unwrap().offers);
    }

    #[test]
    fn other_events_and_malformed_bytes_are_left_to_the_whole_event_decoder() {
        let heartbeat = Event {
            r#type: Some(event::Type::Heartbeat),
            ..Default::default()
        };
        assert!(RawOffers::split(&heartbeat.encode()).is_none());
        let mut bytes = offers_event(2).encode();
        bytes.truncate(bytes.len() - 3);
        assert!(RawOffers::split(&bytes).is_none(), "truncated");
        // An empty OFFERS event is still one.
        let empty = offers_event(0).encode();
        assert_eq!(RawOffers::split(&empty).map(|r| r.len()), Some(0));
    }

    #[test]
    fn a_bad_offer_fails_alone() {
        let mut ev = offers_event(2);
        let mut bytes = ev.encode();
        // Corrupt the first offer's first key (its OfferID) into field 0.
        let raw = RawOffers::split(&bytes).unwrap();
        let first = raw.spans[0].0 as usize;
        bytes[first] = 0x00;
        let mut raw = RawOffers::split(&bytes).expect("still splits");
        let results = raw.take_decoded(2);
        assert!(results[0].is_err());
        assert_eq!(
            results[1].as_ref().unwrap(),
            &ev.offers.take().unwrap().offers[1]
        );
    }
}
