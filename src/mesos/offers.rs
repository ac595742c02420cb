//! The offers of an OFFERS event, kept as the master encoded them and decoded one at a time.
//!
//! At 10,000 agents one OFFERS event holds 10,000 offers: some 3 MB on the wire, but about
//! 11 MB decoded (an `Offer` is 392 bytes before its resources, four of 176 bytes each). A
//! scheduler that decodes the event whole holds all of it while it works through the offers;
//! kept encoded, an offer costs its wire bytes until the moment it is looked at.

use crate::mesos::proto::{DecodeError, Message, Reader, WIRE_LEN, WIRE_VARINT};
use crate::mesos::scheduler::event;
use crate::mesos::types::Offer;

/// The encoded offers of one OFFERS event: the event's bytes, shared, and where each offer
/// lies in them.
#[derive(Clone)]
pub struct RawOffers {
    record: Box<[u8]>,
    spans: Vec<(u32, u32)>,
}

impl RawOffers {
    /// The offers of `record` when it is a protobuf OFFERS event that holds nothing else
    /// this scheduler reads; `None` for any other event and for anything malformed, which
    /// the whole-event decoder then reports as it does for every event.
    pub fn split(record: &[u8]) -> Option<RawOffers> {
        // Spans are u32: an event of 4 GiB is not one this scheduler reads.
        u32::try_from(record.len()).ok()?;
        let mut r = Reader::new(record);
        let mut is_offers = false;
        let mut spans = Vec::new();
        while !r.is_eof() {
            let key = r.varint().ok()?;
            match (key >> 3, (key & 7) as u8) {
                (1, WIRE_VARINT) => {
                    is_offers = r.varint().ok()? == event::Type::Offers.as_i32() as u64
                }
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
        is_offers.then(|| RawOffers {
            record: record.into(),
            spans,
        })
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The first `n` offers, each copied out of the event so that the event's bytes can go
    /// while they wait; the rest stay.
    pub fn take_encoded(&mut self, n: usize) -> Vec<EncodedOffer> {
        let n = n.min(self.spans.len());
        self.spans
            .drain(..n)
            .map(|(start, end)| EncodedOffer(self.record[start as usize..end as usize].into()))
            .collect()
    }

    /// The first `n` offers, decoded; the rest stay.
    pub fn take_decoded(&mut self, n: usize) -> Vec<Result<Offer, DecodeError>> {
        let n = n.min(self.spans.len());
        self.spans
            .drain(..n)
            .map(|(start, end)| Offer::decode(&self.record[start as usize..end as usize]))
            .collect()
    }
}

impl std::fmt::Debug for RawOffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RawOffers({} offers, {} bytes)",
            self.spans.len(),
            self.record.len()
        )
    }
}

/// One offer as the master encoded it.
#[derive(Clone)]
pub struct EncodedOffer(Box<[u8]>);

impl EncodedOffer {
    pub fn decode(&self) -> Result<Offer, DecodeError> {
        Offer::decode(&self.0)
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
