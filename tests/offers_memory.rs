//! What an OFFERS event of 10,000 offers costs the scheduler's heap on its way from the
//! stream to the offers waiting for the launch window. At 10,000 agents it is megabytes, and
//! it comes in the first rollout, when the model is being built: held three times at once (the
//! stream's buffer, the event's copy, each offer's copy), it was the largest transient of the
//! scheduler's peak. It must be held once.
//!
//! The heap is counted per thread, on the calling one.

use std::cell::Cell;
use storage_framework::mesos::offers::RawOffers;
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::recordio;
use storage_framework::mesos::scheduler::{event, Event};
use storage_framework::mesos::types::{AgentID, FrameworkID, Offer, OfferID};

#[path = "support/heap_count.rs"]
mod heap_count;

use heap_count::{mark, HELD, PEAK};

const OFFERS: usize = 10_000;
/// What may wait for the launch window (the dispatcher's `MAX_WAITING`).
const MAX_WAITING: usize = 16_384;

/// An offer of about the size a real agent's is (300 bytes: ids, a hostname, resources and
/// attributes), its bytes in one long hostname.
fn offer(i: usize) -> Offer {
    Offer {
        id: OfferID {
            value: format!("5f3a-offer-{i}").into(),
        },
        framework_id: FrameworkID {
            value: "5f3a-framework-0000".into(),
        },
        agent_id: AgentID {
            value: format!("5f3a-agent-S{i}").into(),
        },
        hostname: format!("{}-{i}.storage.example.com", "host".repeat(60)).into(),
        ..Default::default()
    }
}

#[test]
fn an_offers_event_of_ten_thousand_offers_is_held_once() {
    let event = Event {
        r#type: Some(event::Type::Offers),
        offers: Some(event::Offers {
            offers: (0..OFFERS).map(offer).collect(),
        }),
        ..Default::default()
    };
    let record = event.encode();
    drop(event);
    let mut stream = Vec::new();
    recordio::encode(&record, &mut stream);
    let record_len = record.len() as isize;
    drop(record);
    let mut reader = recordio::Reader::new(&stream[..]);

    let before = mark();
    // As the event stream does (`mesos/client/stream.rs`) ...
    reader.next_record().expect("reads").expect("a record");
    let mut raw = RawOffers::take_from(&mut reader).expect("an OFFERS event");
    // ... and the dispatcher's offer backlog.
    let waiting = raw.take_encoded(MAX_WAITING);
    drop(raw);
    let peak = PEAK.with(Cell::get) - before;
    let kept = HELD.with(Cell::get) - before;

    assert_eq!(waiting.len(), OFFERS);
    // The record once, and per offer its span and its place in the backlog's list.
    let bound = record_len + 64 * OFFERS as isize;
    assert!(
        peak <= bound,
        "an OFFERS event of {} KB peaked at {} KB of heap on its way to the backlog (bound \
         {} KB): it was copied",
        record_len / 1024,
        peak / 1024,
        bound / 1024
    );
    assert!(kept <= bound, "{} KB kept", kept / 1024);
    let first = waiting[0].decode().expect("decodes");
    assert_eq!(first, offer(0));
}
