//! `cargo bench --bench wire`: decoding throughput of the scheduler event stream.
//!
//! Prints `bench <name> <value> <unit>` lines (see scripts/bench.sh). The input is an
//! in-memory RecordIO stream of realistic OFFERS events: one offer with cpus, mem, disk and
//! ports, three text attributes, decoded into typed events on one thread.

#[path = "../support/bench.rs"]
mod bench;

use std::hint::black_box;
use std::time::{Duration, Instant};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::recordio;
use storage_framework::mesos::scheduler::{event, Event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::Encoding;

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

fn offers_event(i: usize) -> Event {
    Event {
        r#type: Some(event::Type::Offers),
        offers: Some(event::Offers {
            offers: vec![Offer {
                id: OfferID {
                    value: format!("5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e-O{i}").into(),
                },
                framework_id: FrameworkID {
                    value: "5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e-0001".into(),
                },
                agent_id: AgentID {
                    value: format!("5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e-S{}", i % 100).into(),
                },
                hostname: format!("agent-{}.dc1.example.com", i % 100).into(),
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
            }],
        }),
        ..Default::default()
    }
}

/// Rates of a few timed passes over `stream`, each decoding every record (sorted).
fn measure(stream: &[u8], events: usize, decode: impl Fn(&[u8]) -> Event) -> Vec<f64> {
    let mut rates = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    // WIRE_BENCH_PASSES fixes the pass count, for instruction counts under callgrind.
    let fixed: Option<usize> = std::env::var("WIRE_BENCH_PASSES")
        .ok()
        .and_then(|v| v.parse().ok());
    for _ in 0..fixed.unwrap_or(7) {
        let start = Instant::now();
        let mut reader = recordio::Reader::new(stream);
        let mut n = 0usize;
        while let Some(rec) = reader.next_record().expect("valid stream") {
            black_box(decode(rec));
            n += 1;
        }
        assert_eq!(n, events);
        rates.push(events as f64 / start.elapsed().as_secs_f64());
        if fixed.is_none() && Instant::now() > deadline && rates.len() >= 3 {
            break;
        }
    }
    rates.sort_by(f64::total_cmp);
    rates
}

/// The median figure, and the spread of the passes on a second line.
fn report(name: &str, rates: &[f64]) {
    let median = rates[rates.len() / 2];
    println!("bench {name} {median:.0} events/s");
    println!(
        "bench {name}_spread {:.0}-{:.0} events/s ({} passes, median above)",
        rates[0],
        rates[rates.len() - 1],
        rates.len()
    );
}

fn build(encoding: Encoding, events: usize) -> (Vec<u8>, usize) {
    let mut stream = Vec::new();
    let mut size = 0;
    for i in 0..events {
        let body = encoding.encode(&offers_event(i));
        size = body.len();
        recordio::encode(&body, &mut stream);
    }
    (stream, size)
}

fn main() {
    bench::print_in_process_binary();
    // `cargo bench` passes `--bench`; nothing else to parse.
    let events = std::env::var("WIRE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let (pb, pb_size) = build(Encoding::Protobuf, events);
    let rates = measure(&pb, events, |r| Event::decode(r).expect("valid event"));
    report("wire_decode_protobuf", &rates);
    eprintln!("  (protobuf event size {pb_size} bytes)");

    if std::env::var_os("WIRE_BENCH_PROTOBUF_ONLY").is_some() {
        return;
    }
    let events = 100_000;
    let (js, js_size) = build(Encoding::Json, events);
    let rates = measure(&js, events, |r| {
        Encoding::Json.decode::<Event>(r).expect("valid event")
    });
    report("wire_decode_json", &rates);
    eprintln!("  (json event size {js_size} bytes)");
}
