//! `cargo bench --bench wire`: decoding the scheduler event stream, the way the scheduler
//! does it, on one thread.
//!
//! Prints `bench <name> <value> <unit>` lines (see scripts/bench.sh):
//! - `wire_decode_protobuf`: OFFERS events of one offer (cpus, mem, disk and ports, three
//!   text attributes) through the scheduler's path: the record split where the stream read it, the
//!   offers taken encoded (as they wait for the launch window), then each decoded.
//! - `wire_decode_offers_10k_ms`: one OFFERS event of 10,000 such offers, the same path.
//! - `wire_decode_protobuf_update`: UPDATE events (a task status as this framework's
//!   executors send it), decoded whole and boxed, as the stream hands every event that is
//!   not OFFERS to the dispatcher.
//! - `wire_decode_protobuf_whole_event`: the one-offer OFFERS event decoded whole (what a
//!   scheduler that does not split would pay; the figure this bench printed first).
//! - `wire_decode_json`: the one-offer OFFERS event in Mesos JSON, decoded whole (a JSON
//!   stream is not split).
//!
//! `WIRE_BENCH_STREAMS=<dir>` also writes the one-offer OFFERS and the UPDATE streams there
//! (`offers.recordio`, `update.recordio`), for `tests/bench/upb.sh` to decode with upb.
//!
//! Knobs, for instruction counts under callgrind: `WIRE_BENCH_PASSES` fixes the number of
//! passes, `WIRE_BENCH_EVENTS` the events per pass, `WIRE_BENCH_PROTOBUF_ONLY` skips JSON.
//! The timed work of each figure runs in one `#[inline(never)]` function named `pass_*`,
//! for `valgrind --tool=callgrind --toggle-collect='wire::pass_*'`.

#[path = "../support/bench.rs"]
mod bench;

use std::hint::black_box;
use std::time::{Duration, Instant};
use storage_framework::mesos::offers::RawOffers;
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::recordio;
use storage_framework::mesos::scheduler::{event, Event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{Bytes, Encoding};

// The scheduler's allocator, as in the shipped binary: this bench times its code in-process.
storage_framework::scheduler_heap!();

fn scalar(name: &str, v: f64) -> Resource {
    Resource {
        name: name.into(),
        r#type: value::Type::Scalar,
        scalar: Some(value::Scalar { value: v }),
        role: Some("*".into()),
        ..Default::default()
    }
}

fn text_attr(name: &str, v: &str) -> Attribute {
    Attribute {
        name: name.into(),
        r#type: value::Type::Text,
        text: Some(value::Text { value: v.into() }),
        ..Default::default()
    }
}

const UUID: &str = "5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e";

/// Offer `i` of agent `agent`, with ids shaped as the master makes them.
fn offer(i: usize, agent: usize) -> Offer {
    Offer {
        id: OfferID {
            value: format!("{UUID}-O{i}").into(),
        },
        framework_id: FrameworkID {
            value: format!("{UUID}-0001").into(),
        },
        agent_id: AgentID {
            value: format!("{UUID}-S{agent}").into(),
        },
        hostname: format!("agent-{agent}.dc1.example.com").into(),
        resources: vec![
            scalar("cpus", 8.0),
            scalar("mem", 31_744.0),
            scalar("disk", 409_600.0),
            Resource {
                name: "ports".into(),
                r#type: value::Type::Ranges,
                ranges: Some(value::Ranges {
                    range: vec![value::Range {
                        begin: 31000,
                        end: 32000,
                    }],
                }),
                role: Some("*".into()),
                ..Default::default()
            },
        ],
        attributes: vec![
            text_attr("rack", "r12"),
            text_attr("storage-sds-domains", "pd1"),
            text_attr("storage-persona", "data"),
        ],
        ..Default::default()
    }
}

fn offers_event(offers: Vec<Offer>) -> Event {
    Event {
        r#type: Some(event::Type::Offers),
        offers: Some(event::Offers { offers }),
        ..Default::default()
    }
}

/// A status update as this framework's executor sends it, relayed by the master.
fn update_event(i: usize) -> Event {
    let agent = i % 100;
    let host = format!("agent-{agent}.dc1.example.com");
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&(i as u64).to_le_bytes());
    Event {
        r#type: Some(event::Type::Update),
        update: Some(event::Update {
            status: TaskStatus {
                task_id: TaskID {
                    value: format!("storage.{host}.{}", i % 7).into(),
                },
                state: TaskState::Running,
                message: Some("phase INSTALLING".into()),
                agent_id: Some(AgentID {
                    value: format!("{UUID}-S{agent}").into(),
                }),
                timestamp: Some(1_764_000_000.0 + i as f64),
                executor_id: Some(ExecutorID {
                    value: format!("storage-executor.{host}.{}", i % 7).into(),
                }),
                source: Some(task_status::Source::Executor),
                uuid: Some(Bytes(uuid.to_vec())),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// Offers that may wait for the launch window at once (the dispatcher's `MAX_WAITING`).
const MAX_WAITING: usize = 16_384;
/// Offers the dispatcher decodes at a time (its `LAUNCH_WINDOW`).
const LAUNCH_WINDOW: usize = 512;

/// What the stream and the dispatcher do with the OFFERS records of `stream`: split each
/// where it was read (the stream: a large one keeps the reader's buffer, a small one is
/// copied), take its offers encoded into the backlog (the dispatcher), decode them a window at
/// a time and drop them once answered. Returns the offers decoded.
fn scheduler_offers(stream: &[u8]) -> usize {
    let mut reader = recordio::Reader::new(stream);
    let mut n = 0;
    while reader.next_record().expect("valid stream").is_some() {
        let mut raw = RawOffers::take_from(&mut reader).expect("an OFFERS event");
        let waiting: Vec<_> = raw.take_encoded(MAX_WAITING).into_iter().collect();
        drop(raw);
        for window in waiting.chunks(LAUNCH_WINDOW) {
            let offers: Vec<Offer> = window
                .iter()
                .map(|o| o.decode().expect("valid offer"))
                .collect();
            n += black_box(offers).len();
        }
    }
    n
}

/// What the stream does with any other record: decode it whole and box it for the channel.
fn scheduler_event(record: &[u8]) -> usize {
    let event = Box::new(Event::decode(record).expect("valid event"));
    black_box(event);
    1
}

#[inline(never)]
fn pass_offers(stream: &[u8]) -> usize {
    scheduler_offers(stream)
}

#[inline(never)]
fn pass_offers_10k(stream: &[u8]) -> usize {
    // Not the same code as `pass_offers`, which the linker would fold it into, leaving
    // callgrind one name for both.
    black_box(10_000);
    scheduler_offers(stream)
}

#[inline(never)]
fn pass_update(stream: &[u8]) -> usize {
    pass(stream, scheduler_event)
}

#[inline(never)]
fn pass_whole_event(stream: &[u8]) -> usize {
    pass(stream, |r| {
        black_box(Event::decode(r).expect("valid event"));
        1
    })
}

#[inline(never)]
fn pass_json(stream: &[u8]) -> usize {
    pass(stream, |r| {
        black_box(Encoding::Json.decode::<Event>(r).expect("valid event"));
        1
    })
}

/// Every record of `stream` through `decode`; returns the sum of what it returned.
fn pass(stream: &[u8], decode: impl Fn(&[u8]) -> usize) -> usize {
    let mut reader = recordio::Reader::new(stream);
    let mut n = 0usize;
    while let Some(rec) = reader.next_record().expect("valid stream") {
        n += decode(rec);
    }
    n
}

/// Seconds of each of a few timed passes (sorted), each checked to have decoded `items`.
fn measure(stream: &[u8], items: usize, pass: fn(&[u8]) -> usize) -> Vec<f64> {
    let mut secs = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    let fixed: Option<usize> = std::env::var("WIRE_BENCH_PASSES")
        .ok()
        .and_then(|v| v.parse().ok());
    for _ in 0..fixed.unwrap_or(15) {
        let start = Instant::now();
        assert_eq!(pass(stream), items);
        secs.push(start.elapsed().as_secs_f64());
        if fixed.is_none() && Instant::now() > deadline && secs.len() >= 5 {
            break;
        }
    }
    secs.sort_by(f64::total_cmp);
    secs
}

/// The median rate, and the spread of the passes on a second line.
fn report_rate(name: &str, events: usize, secs: &[f64]) {
    let rate = |s: f64| events as f64 / s;
    println!("bench {name} {:.0} events/s", rate(secs[secs.len() / 2]));
    println!(
        "bench {name}_spread {:.0}-{:.0} events/s ({} passes, median above)",
        rate(secs[secs.len() - 1]),
        rate(secs[0]),
        secs.len()
    );
}

/// The median time of one event, and the spread.
fn report_ms(name: &str, events: usize, secs: &[f64]) {
    let ms = |s: f64| s * 1000.0 / events as f64;
    println!("bench {name} {:.2} ms", ms(secs[secs.len() / 2]));
    println!(
        "bench {name}_spread {:.2}-{:.2} ms ({} passes, median above)",
        ms(secs[0]),
        ms(secs[secs.len() - 1]),
        secs.len()
    );
}

/// A RecordIO stream of `events` events; prints the size of the last one.
fn build(what: &str, encoding: Encoding, events: usize, event: impl Fn(usize) -> Event) -> Vec<u8> {
    let mut stream = Vec::new();
    let mut size = 0;
    for i in 0..events {
        let body = encoding.encode(&event(i));
        size = body.len();
        recordio::encode(&body, &mut stream);
    }
    eprintln!("  ({what}: {events} events of {size} bytes)");
    stream
}

/// The sizes of the decoded types, which every decoded event and offer pays.
fn print_sizes() {
    use std::mem::size_of;
    use storage_framework::mesos::offers::EncodedOffer;
    use storage_framework::mesos::scheduler::Call;
    use storage_framework::mesos::Str;
    eprintln!(
        "  (sizes: Str {}, Resource {}, Attribute {}, Offer {}, TaskStatus {}, TaskInfo {}, \
         Event {}, Call {}, RawOffers {}, EncodedOffer {})",
        size_of::<Str>(),
        size_of::<Resource>(),
        size_of::<Attribute>(),
        size_of::<Offer>(),
        size_of::<TaskStatus>(),
        size_of::<TaskInfo>(),
        size_of::<Event>(),
        size_of::<Call>(),
        size_of::<RawOffers>(),
        size_of::<EncodedOffer>(),
    );
}

fn main() {
    bench::print_in_process_binary();
    print_sizes();
    // `cargo bench` passes `--bench`; nothing else to parse.
    let events = std::env::var("WIRE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let pb = Encoding::Protobuf;
    let one_offer = |i: usize| offers_event(vec![offer(i, i % 100)]);

    let streams = std::env::var_os("WIRE_BENCH_STREAMS").map(std::path::PathBuf::from);
    let keep = |name: &str, stream: &[u8]| {
        if let Some(dir) = &streams {
            std::fs::create_dir_all(dir).expect("stream directory");
            std::fs::write(dir.join(name), stream).expect("stream written");
        }
    };
    let stream = build("one-offer OFFERS", pb, events, one_offer);
    keep("offers.recordio", &stream);
    let secs = measure(&stream, events, pass_offers);
    report_rate("wire_decode_protobuf", events, &secs);
    let secs = measure(&stream, events, pass_whole_event);
    report_rate("wire_decode_protobuf_whole_event", events, &secs);
    drop(stream);

    let big = |_| offers_event((0..10_000).map(|i| offer(i, i)).collect());
    let stream = build("10,000-offer OFFERS", pb, 1, big);
    let secs = measure(&stream, 10_000, pass_offers_10k);
    report_ms("wire_decode_offers_10k_ms", 1, &secs);
    drop(stream);

    let stream = build("UPDATE", pb, events, update_event);
    keep("update.recordio", &stream);
    let secs = measure(&stream, events, pass_update);
    report_rate("wire_decode_protobuf_update", events, &secs);
    drop(stream);

    if std::env::var_os("WIRE_BENCH_PROTOBUF_ONLY").is_some() {
        return;
    }
    let events = events / 2;
    let stream = build("one-offer OFFERS, JSON", Encoding::Json, events, one_offer);
    let secs = measure(&stream, events, pass_json);
    report_rate("wire_decode_json", events, &secs);
}
