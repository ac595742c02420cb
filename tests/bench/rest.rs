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

#[path = "../support/bench.rs"]
mod bench;

#[path = "../support/rest_fake.rs"]
mod fake;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::rest::{self, RestConfig, ServerOptions};
use storage_framework::scheduler::metrics::Metrics;

// The scheduler's allocator, as in the shipped binary: this bench times its code in-process.
storage_framework::scheduler_heap!();

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

/// What the measuring clients keep of a response.
struct Seen {
    status: u16,
    body_len: usize,
    /// The server closes the connection after it.
    close: bool,
}

/// The measuring clients' response reader: it reads every byte to the body's last, but
/// keeps only what the bench checks and allocates nothing per response. The clients share
/// two cores and the allocator with the server they measure, so a client that copied each
/// body into a new buffer (the tests' `read_response`) would be measured along with the
/// server: with musl's allocator a 540 KB body is an mmap and an munmap per response.
#[derive(Default)]
struct Lean {
    /// Bytes read past the end of the last response (none without pipelining).
    buf: Vec<u8>,
}

impl Lean {
    fn read(&mut self, conn: &mut std::net::TcpStream) -> std::io::Result<Seen> {
        use std::io::Read;
        let mut tmp = [0u8; 64 * 1024];
        let head_end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = conn.read(&mut tmp)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&tmp[..n]);
        };
        let head = std::str::from_utf8(&self.buf[..head_end]).map_err(std::io::Error::other)?;
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other("bad status line"))?;
        let (mut body_len, mut close) = (0, false);
        for (name, value) in lines.filter_map(|l| l.split_once(':')) {
            if name.eq_ignore_ascii_case("content-length") {
                body_len = value.trim().parse().map_err(std::io::Error::other)?;
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.trim().eq_ignore_ascii_case("close");
            }
        }
        let buffered = self.buf.len() - head_end;
        if buffered >= body_len {
            self.buf.drain(..head_end + body_len);
        } else {
            self.buf.clear();
            let mut left = body_len - buffered;
            while left > 0 {
                let want = left.min(tmp.len());
                let n = conn.read(&mut tmp[..want])?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                left -= n;
            }
        }
        Ok(Seen {
            status,
            body_len,
            close,
        })
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
                let mut reader = Lean::default();
                let mut lat = Vec::with_capacity(100_000);
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    conn.write_all(request).expect("send");
                    let r = reader.read(&mut conn).expect("response");
                    assert_eq!(r.status, 200);
                    assert_eq!(r.body_len, size, "the state changed during the bench");
                    if t0 >= measure_from {
                        lat.push(t0.elapsed());
                    }
                    if r.close {
                        conn = fake::connect(addr);
                        reader = Lean::default();
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
    bench::print_in_process_binary();
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
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(PathBuf::from(
                    "/nonexistent",
                )),
            ),
            inputs: fake.inputs.clone(),
            metrics: Arc::new(Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: None,
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
