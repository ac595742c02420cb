//! `GET /api/state` with 1,000 nodes under 32 concurrent keep-alive clients on loopback:
//! p99 latency (target: at most 5 ms) and throughput. The dispatcher is the test fake (it
//! answers views from its cache, as the real one does between changes).
//!
//! The headline numbers are for clients that accept gzip, as browsers, `curl --compressed`
//! and most HTTP libraries do (the body is then about 35 KB instead of 540 KB); latency is to
//! the last byte received, decompression being the client's business. The same for clients
//! that do not accept gzip is printed as `rest_state_identity_*`.
//!
//! `cargo bench --bench rest`; `REST_BENCH_SECS` (default 4) and `REST_BENCH_CLIENTS`
//! (default 32) change the run. The whole run takes about `1.5 * REST_BENCH_SECS + 1` s.

#[path = "../support/rest_fake.rs"]
mod fake;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::rest::{self, RestConfig, ServerOptions};
use storage_framework::scheduler::metrics::Metrics;

const NODES: usize = 1000;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Run {
    /// Sorted.
    latencies: Vec<Duration>,
    secs: f64,
    size: usize,
}

impl Run {
    fn pct_ms(&self, p: f64) -> f64 {
        let n = self.latencies.len();
        self.latencies[((n as f64 * p).ceil() as usize).clamp(1, n) - 1].as_secs_f64() * 1000.0
    }

    fn rps(&self) -> f64 {
        self.latencies.len() as f64 / self.secs
    }
}

/// `clients` keep-alive connections asking for the state in a loop for `secs` (after a
/// short warm-up that is not measured).
fn run(addr: SocketAddr, clients: usize, secs: f64, gzip: bool) -> Run {
    let request: &'static [u8] = if gzip {
        b"GET /api/state HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\n\r\n"
    } else {
        b"GET /api/state HTTP/1.1\r\nHost: bench\r\n\r\n"
    };
    let accept: &[(&str, &str)] = if gzip {
        &[("Accept-Encoding", "gzip")]
    } else {
        &[]
    };
    let first = fake::request(addr, "GET", "/api/state", accept, b"");
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-encoding") == Some("gzip"), gzip);
    let size = first.body.len();

    let measure_from = Instant::now() + Duration::from_millis(500);
    let end = measure_from + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let mut conn = fake::connect(addr);
                let mut buf = Vec::new();
                let mut lat = Vec::with_capacity(100_000);
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    conn.write_all(request).expect("send");
                    let r = fake::read_response(&mut conn, &mut buf, false).expect("response");
                    assert_eq!(r.status, 200);
                    assert_eq!(r.body.len(), size, "the state changed during the bench");
                    if t0 >= measure_from {
                        lat.push(t0.elapsed());
                    }
                    if r.header("connection") == Some("close") {
                        conn = fake::connect(addr);
                        buf.clear();
                    }
                }
                lat
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("client thread"))
        .collect();
    assert!(!latencies.is_empty(), "no request completed");
    latencies.sort();
    Run {
        latencies,
        secs,
        size,
    }
}

fn main() {
    // What was measured: this bench binary, with the library linked in (bench.sh builds it
    // for the shipped musl target).
    println!(
        "bench_binary {} ({}, library in-process)",
        std::env::current_exe().map_or_else(|_| "?".into(), |p| p.display().to_string()),
        if cfg!(target_env = "musl") {
            "static musl"
        } else {
            "glibc"
        }
    );
    let secs: f64 = env("REST_BENCH_SECS", 4.0);
    let clients: usize = env("REST_BENCH_CLIENTS", 32);
    let fake = fake::Fake::start(
        fake::many_nodes(NODES),
        fake::Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
    );
    let server = rest::start_with(
        RestConfig {
            port: 0,
            executor_path: PathBuf::from("/nonexistent"),
            inputs: fake.inputs.clone(),
            metrics: Arc::new(Metrics::default()),
            secrets: None,
        },
        ServerOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ..ServerOptions::default()
        },
    )
    .expect("REST server");
    let addr = server.local_addr();
    let state = fake::get(addr, "/api/state");
    assert_eq!(
        state.json()["model"]["nodes"].as_object().map(|m| m.len()),
        Some(NODES)
    );

    let gz = run(addr, clients, secs, true);
    println!("bench rest_state_p99_ms {:.3} ms", gz.pct_ms(0.99));
    println!("bench rest_state_rps {:.0} req/s", gz.rps());
    eprintln!(
        "  (gzip: {} requests, {clients} clients, {NODES} nodes, {} bytes each; p50 {:.3} ms, max {:.3} ms)",
        gz.latencies.len(),
        gz.size,
        gz.pct_ms(0.5),
        gz.pct_ms(1.0)
    );
    let plain = run(addr, clients, secs / 2.0, false);
    println!(
        "bench rest_state_identity_p99_ms {:.3} ms",
        plain.pct_ms(0.99)
    );
    println!("bench rest_state_identity_rps {:.0} req/s", plain.rps());
    eprintln!(
        "  (identity: {} requests, {} bytes each; p50 {:.3} ms, max {:.3} ms)",
        plain.latencies.len(),
        plain.size,
        plain.pct_ms(0.5),
        plain.pct_ms(1.0)
    );
    drop(server);
}
