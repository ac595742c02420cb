//! Offers wait here, encoded, until the launch window has room for what they may become.
//!
//! At 10,000 agents the first OFFERS event became 10,000 ACCEPTs at once, each a
//! few kilobytes of Call held until the sender had posted it (some 30 MB), next to the
//! decoded event (11 MB). Now at most [`LAUNCH_WINDOW`] ACCEPTs are between the dispatcher
//! and the master; up to [`MAX_WAITING`] offers wait as the master encoded them (about 550
//! bytes each, in their event's bytes when they are most of it, else copied out together:
//! `mesos/offers.rs`; an event's bytes live until its last waiting offer is taken) and are
//! decoded a window's worth at a time. Offers beyond that are answered
//! at once, launches among them declined for [`WINDOW_FULL_REFUSE_SECS`]: the master offers
//! those agents again a moment later, and meanwhile their resources are not held from other
//! frameworks. The pace of a launch wave is the sender's either way: it was always the one
//! sending 10,000 POSTs.

use crate::mesos::offers::{EncodedOffer, RawOffers};
use crate::mesos::proto::DecodeError;
use crate::mesos::types::Offer;
use std::collections::{HashSet, VecDeque};

/// ACCEPTs handed to the sender and not yet reported on, at most. Enough to keep the
/// sender's lanes busy between two refills.
pub(super) const LAUNCH_WINDOW: usize = 512;

/// Offers waiting for the window, at most (some 9 MB of them). A cluster of up to this many
/// agents launches in one pass; above it, every second the master offers the declined agents
/// again, and each of those rounds costs a decode of every offer: at 10,000 agents a cap of
/// 2,048 took the wave from 6 to 10 s and its CPU from 6.7 to 10.2 s, for no lower peak
/// (the waiting offers are gone by the time the model is whole, where the peak is).
pub(super) const MAX_WAITING: usize = 32 * LAUNCH_WINDOW;

/// How long an agent whose offer found the window full is not offered to us again.
pub(super) const WINDOW_FULL_REFUSE_SECS: f64 = 1.0;

/// Offers are taken again only once the window is half empty: taken one at a time as each
/// ACCEPT is reported, every launch would cost a save of its own.
pub(super) fn room(accepts_in_flight: usize) -> usize {
    if accepts_in_flight > LAUNCH_WINDOW / 2 {
        0
    } else {
        LAUNCH_WINDOW - accepts_in_flight
    }
}

enum Waiting {
    Encoded(EncodedOffer),
    /// From a JSON stream, which is decoded whole.
    Decoded(Box<Offer>),
}

#[derive(Default)]
pub(super) struct OfferBacklog {
    queue: VecDeque<Waiting>,
    /// Offers the master took back while they waited.
    rescinded: HashSet<String>,
}

impl OfferBacklog {
    /// Keeps what fits under [`MAX_WAITING`]; returns the rest, to be answered at once.
    pub(super) fn admit_encoded(&mut self, mut offers: RawOffers) -> RawOffers {
        let fits = MAX_WAITING.saturating_sub(self.queue.len());
        self.queue
            .extend(offers.take_encoded(fits).into_iter().map(Waiting::Encoded));
        offers
    }

    /// As [`Self::admit_encoded`], for a JSON stream's decoded offers.
    pub(super) fn admit_decoded(&mut self, mut offers: Vec<Offer>) -> Vec<Offer> {
        let fits = MAX_WAITING
            .saturating_sub(self.queue.len())
            .min(offers.len());
        let rest = offers.split_off(fits);
        self.queue
            .extend(offers.into_iter().map(|o| Waiting::Decoded(Box::new(o))));
        rest
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The master rescinded an offer: if it waits here, it is never answered.
    pub(super) fn rescind(&mut self, offer_id: &str) {
        if !self.queue.is_empty() {
            self.rescinded.insert(offer_id.to_owned());
        }
    }

    /// A new subscription, or none: the master has taken back every outstanding offer.
    pub(super) fn clear(&mut self) {
        self.queue = VecDeque::new();
        self.rescinded = HashSet::new();
    }

    /// Up to `n` offers, in the order they came, decoded. Rescinded ones are dropped; one that
    /// does not decode is dropped and returned in the errors (without its id it cannot be
    /// declined either: the master takes it back when the framework next fails over).
    pub(super) fn take(&mut self, n: usize) -> (Vec<Offer>, Vec<DecodeError>) {
        let mut offers = Vec::with_capacity(n.min(self.queue.len()));
        let mut errors = Vec::new();
        while offers.len() < n {
            let Some(w) = self.queue.pop_front() else {
                break;
            };
            let offer = match w {
                Waiting::Encoded(e) => match e.decode() {
                    Ok(o) => o,
                    Err(err) => {
                        errors.push(err);
                        continue;
                    }
                },
                Waiting::Decoded(o) => *o,
            };
            if self.rescinded.remove(offer.id.value.as_str()) {
                continue;
            }
            offers.push(offer);
        }
        if self.queue.is_empty() {
            // The event's bytes and the queue's room go with its last offer.
            self.clear();
        }
        (offers, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::proto::Message;
    use crate::mesos::scheduler::{event, Event};

    fn offer(i: usize) -> Offer {
        crate::mesos::offers::test_offer(&format!("o{i}"), &format!("a{i}"), &format!("h{i}"))
    }

    fn raw(range: std::ops::Range<usize>) -> RawOffers {
        let ev = Event {
            r#type: Some(event::Type::Offers),
            offers: Some(event::Offers {
                offers: range.map(offer).collect(),
            }),
            ..Default::default()
        };
        RawOffers::split(&ev.encode()).unwrap()
    }

    fn ids(offers: &[Offer]) -> Vec<String> {
        offers.iter().map(|o| o.id.value.to_string()).collect()
    }

    #[test]
    fn offers_come_out_in_order_a_window_at_a_time_and_rescinded_ones_never() {
        let mut b = OfferBacklog::default();
        assert!(b.admit_encoded(raw(0..5)).is_empty());
        assert!(b.admit_decoded(vec![offer(5), offer(6)]).is_empty());
        b.rescind("o1");
        b.rescind("o6");
        let (first, errors) = b.take(3);
        assert!(errors.is_empty());
        assert_eq!(ids(&first), ["o0", "o2", "o3"]);
        assert_eq!(b.len(), 3);
        let (rest, _) = b.take(10);
        assert_eq!(ids(&rest), ["o4", "o5"]);
        assert!(b.is_empty() && b.rescinded.is_empty());
        // A rescind of an offer that is not waiting is not remembered.
        b.rescind("o9");
        assert!(b.rescinded.is_empty());
    }

    #[test]
    fn the_window_refills_only_once_half_empty() {
        assert_eq!(room(0), LAUNCH_WINDOW);
        assert_eq!(room(LAUNCH_WINDOW / 2), LAUNCH_WINDOW / 2);
        assert_eq!(room(LAUNCH_WINDOW / 2 + 1), 0);
        assert_eq!(room(LAUNCH_WINDOW + 7), 0);
    }

    #[test]
    fn offers_beyond_the_cap_are_handed_back() {
        let mut b = OfferBacklog::default();
        let rest = b.admit_encoded(raw(0..MAX_WAITING - 2));
        assert!(rest.is_empty());
        let mut rest = b.admit_encoded(raw(0..5));
        assert_eq!(b.len(), MAX_WAITING);
        let back: Vec<String> = rest
            .take_decoded(10)
            .into_iter()
            .map(|o| o.unwrap().id.value.to_string())
            .collect();
        assert_eq!(back, ["o2", "o3", "o4"]);
        assert_eq!(ids(&b.admit_decoded(vec![offer(8)])), ["o8"]);
    }

    #[test]
    fn clear_forgets_every_waiting_offer() {
        let mut b = OfferBacklog::default();
        assert!(b.admit_encoded(raw(0..3)).is_empty());
        b.rescind("o0");
        b.clear();
        assert!(b.is_empty());
        assert!(b.take(5).0.is_empty());
    }
}
