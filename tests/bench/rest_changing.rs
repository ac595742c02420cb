//! `cargo bench --bench rest_changing`: `GET /api/state` of the real scheduler (the musl
//! release artifact, or `STORAGE_BENCH_BIN_DIR`) with its real dispatcher and file store,
//! on the dev cluster's synthetic agents, while the emulated executors report node phases
//! through the executor API and, once their node runs, host health (a check that flaps):
//! `REPORTS_PER_SEC` in all, the floor for 1,000 nodes and the same total for 10,000,
//! so that the view changes for as long as the bench measures.
//!
//! - `rest_state_cold_render_ms_1k`, `_10k`: median time to the last byte of a request that
//!   found a view no request had rendered yet, for 1,000 and 10,000 nodes: the dispatcher's
//!   view, its JSON encoding and the transfer over loopback (identity encoding, one client,
//!   asking for the largest answer the API gives: every node up to 1,000, else a page of
//!   1,000 nodes of the whole view; the bench checks that the full page came back). A
//!   `_spread` line gives min-max and count.
//! - `rest_state_views_per_sec_*`: distinct views the client saw a second (that the state
//!   really changed; reads share a view for up to 100 ms, `src/rest/view_cache.rs`).
//! - `rest_state_p99_ms_changing_*`: p99 latency of 32 concurrent clients asking for the
//!   same (a connection per request) while the state changes, accepting gzip as browsers
//!   and `curl --compressed` do (as `rest_state_p99_ms`); `rest_state_views_changing_*`: the
//!   distinct answers they were served (the bench fails if the state stood still);
//!   `rest_state_identity_p99_ms_changing_*`: the same clients asking for plain JSON.
//! - `rest_node_p99_ms_changing_*`: the same (gzip accepted) for `GET /api/nodes/<host>`,
//!   the clients taking the nodes' hosts in turn.
//!
//! - `rest_state_floor_p99_ms_changing_*`: this machine's floor for the same clients: the same
//!   requests, answered with the same gzip body by a server that does nothing else (`floor`,
//!   threads that each accept and answer, in this process), while the cluster keeps reporting
//!   as before; `rest_state_floor_ratio_changing_*` is the scheduler's p99 over it. What the
//!   scheduler adds is the ratio; what is left under the floor is the kernel's TCP and the
//!   CPU scheduling of 32 clients on this machine's cores.
//!
//! `BENCH_NODES=1000` (or `10000`) measures one size only.
//!
//! The executor downloads of `scheduler`'s bench are left out here (the agents fetch
//! nothing): they would add 17 GB of loopback traffic that is not what is measured.

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::master;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REPORTS_PER_SEC: f64 = 500.0;
/// `/api/state`'s largest page (src/rest/paging.rs).
const PAGE_MAX: usize = 1_000;
const MEASURE: Duration = Duration::from_secs(6);

fn artifact(name: &str) -> std::path::PathBuf {
    match std::env::var_os("STORAGE_BENCH_BIN_DIR") {
        Some(dir) => std::path::PathBuf::from(dir).join(name),
        None => cluster::release_artifact(name),
    }
}

/// How a client asks: as browsers and `curl --compressed` do, or for the plain JSON.
#[derive(Clone, Copy, PartialEq)]
enum Encoding {
    Gzip,
    Identity,
}

/// One GET on a connection of its own (the server may close a keep-alive connection when
/// others wait): the body as sent (gzip only when asked for and given).
fn get(port: u16, path: &str, encoding: Encoding) -> Vec<u8> {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut conn = BufReader::new(stream);
    let accept = match encoding {
        Encoding::Gzip => "Accept-Encoding: gzip\r\n",
        Encoding::Identity => "",
    };
    let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n{accept}Connection: close\r\n\r\n");
    conn.get_mut().write_all(req.as_bytes()).expect("send");
    let mut line = String::new();
    conn.read_line(&mut line).expect("status line");
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let mut len = 0;
    loop {
        let mut h = String::new();
        conn.read_line(&mut h).expect("header");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            if n.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().expect("length");
            }
        }
    }
    let mut body = vec![0; len];
    conn.read_exact(&mut body).expect("body");
    body
}

/// What tells one answer's content from another's without decoding it: a gzip body's
/// trailer (CRC-32 and length of the JSON), else the view's `generated_ms`.
fn content_key(body: &[u8]) -> Option<u64> {
    if body.starts_with(&[0x1f, 0x8b]) {
        let tail: [u8; 8] = body.get(body.len().checked_sub(8)?..)?.try_into().ok()?;
        return Some(u64::from_le_bytes(tail));
    }
    generated_ms(body)
}

/// The view's `generated_ms`, found without parsing the whole body.
fn generated_ms(body: &[u8]) -> Option<u64> {
    let key = b"\"generated_ms\":";
    let at = body.windows(key.len()).position(|w| w == key)? + key.len();
    let digits: String = body[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    digits.parse().ok()
}

fn measure(nodes: usize, label: &str) {
    let dir = std::env::temp_dir().join(format!("bench-rest-changing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let m = master::start(master::MasterConfig {
        agents: 0,
        synthetic_agents: nodes,
        synthetic_phase_reports: Some(REPORTS_PER_SEC),
        synthetic_health_reports: true,
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    let port = cluster::free_port();
    let mut args = cluster::scheduler_args(
        &m.addr().to_string(),
        port,
        &dir.join("state"),
        "Scaleio123",
    );
    args.retain(|a| !a.starts_with("-executor.altpath=") && !a.starts_with("-loglevel="));
    args.push(format!(
        "-executor.altpath={}",
        artifact("storage-executor").display()
    ));
    args.push("-loglevel=info".into());
    let child = Command::new(artifact("storage-scheduler"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("scheduler.log")).expect("log"))
        .spawn()
        .expect("scheduler");
    let child = cluster::KillOnDrop(child);
    cluster::wait_for(
        "every agent's executor running",
        Duration::from_secs(300),
        || (cluster::agents_running(&m) == nodes).then_some(()),
    );

    // The largest answer the API gives: every node up to a page's 1,000; above that a
    // 1,000-node page of the whole view (the cold render still builds the view of all).
    let page = nodes.min(PAGE_MAX);
    let path = format!("/api/state?limit={page}");
    let first = get(port, &path, Encoding::Identity);
    let state: serde_json::Value = serde_json::from_slice(&first).expect("state JSON");
    let shown = state["model"]["nodes"].as_object();
    let got = shown.map_or(0, |n| n.len());
    assert_eq!(got, page, "the render must hold a full page");
    let node_paths: Vec<String> = shown
        .into_iter()
        .flat_map(|n| n.values())
        .filter_map(|n| n["hostname"].as_str())
        .map(|h| format!("/api/nodes/{h}"))
        .collect();
    assert_eq!(node_paths.len(), page, "every node shows its host");
    let mut last = generated_ms(&first);
    let mut cold = Vec::new();
    let start = Instant::now();
    while start.elapsed() < MEASURE {
        let t0 = Instant::now();
        let body = get(port, &path, Encoding::Identity);
        let took = t0.elapsed();
        let g = generated_ms(&body);
        if g != last {
            cold.push(took);
            last = g;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let state = std::slice::from_ref(&path);
    let (p99, views) = concurrent_p99_ms(port, state, Encoding::Gzip);
    let (identity_p99, _) = concurrent_p99_ms(port, state, Encoding::Identity);
    let (node_p99, _) = concurrent_p99_ms(port, &node_paths, Encoding::Gzip);
    let body = get(port, &path, Encoding::Gzip);
    assert!(
        body.starts_with(&[0x1f, 0x8b]),
        "the state came back uncompressed"
    );
    let floor = Floor::start(body);
    let (floor_p99, _) = concurrent_p99_ms(floor.port, state, Encoding::Gzip);
    drop(floor);
    drop(child);
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!cold.is_empty(), "the state did not change while measured");
    assert!(views > 1, "the state stood still under the 32 clients");
    cold.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "bench rest_state_cold_render_ms_{label} {:.2} ms",
        ms(cold[cold.len() / 2])
    );
    println!(
        "bench rest_state_cold_render_ms_{label}_spread {:.2}-{:.2} ms ({} cold renders, {} bytes)",
        ms(cold[0]),
        ms(cold[cold.len() - 1]),
        cold.len(),
        first.len()
    );
    println!(
        "bench rest_state_views_per_sec_{label} {:.1} views/s",
        cold.len() as f64 / secs
    );
    println!("bench rest_state_p99_ms_changing_{label} {p99:.2} ms");
    println!("bench rest_state_views_changing_{label} {views} views");
    println!("bench rest_state_identity_p99_ms_changing_{label} {identity_p99:.2} ms");
    println!("bench rest_node_p99_ms_changing_{label} {node_p99:.2} ms");
    println!("bench rest_state_floor_p99_ms_changing_{label} {floor_p99:.2} ms");
    println!(
        "bench rest_state_floor_ratio_changing_{label} {:.2} x",
        p99 / floor_p99
    );
}

/// The floor: a server that answers every request with one body and does nothing else, as
/// fast as std sockets allow (threads that each take the next connection from the kernel).
struct Floor {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Floor {
    /// As many threads as the scheduler's REST pool had under this load (16 workers in a
    /// profile of it); 64 gave the floor a higher p99 here, not a lower one.
    const THREADS: usize = 16;

    fn start(body: Vec<u8>) -> Floor {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("floor bind");
        let port = listener.local_addr().expect("floor address").port();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let answer = std::sync::Arc::new([head.into_bytes(), body].concat());
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..Self::THREADS)
            .map(|_| {
                let listener = listener.try_clone().expect("floor listener");
                let (answer, stop) = (answer.clone(), stop.clone());
                std::thread::spawn(move || {
                    while let Ok((mut conn, _)) = listener.accept() {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        // The request's head, then the answer; the client closes.
                        let mut head = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        let _ = conn.write_all(&answer);
                    }
                })
            })
            .collect();
        Floor {
            port,
            stop,
            threads,
        }
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Each thread waits in accept: one connection each wakes it to see the stop.
        for _ in &self.threads {
            let _ = TcpStream::connect(("127.0.0.1", self.port));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// p99 latency of `CLIENTS` clients asking in a loop for `MEASURE` while the state changes,
/// each taking `paths` in turn (from a place of its own), and how many distinct answers
/// (`content_key`) they were served.
fn concurrent_p99_ms(port: u16, paths: &[String], encoding: Encoding) -> (f64, usize) {
    const CLIENTS: usize = 32;
    let end = Instant::now() + MEASURE;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let paths = paths.to_vec();
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                let mut views = std::collections::BTreeSet::new();
                for path in paths.iter().cycle().skip(c * paths.len() / CLIENTS) {
                    if Instant::now() >= end {
                        break;
                    }
                    let t0 = Instant::now();
                    let body = get(port, path, encoding);
                    lat.push(t0.elapsed());
                    views.extend(content_key(&body));
                }
                (lat, views)
            })
        })
        .collect();
    let mut all: Vec<Duration> = Vec::new();
    let mut views = std::collections::BTreeSet::new();
    for t in threads {
        let (lat, seen) = t.join().expect("client");
        all.extend(lat);
        views.extend(seen);
    }
    all.sort();
    let pct = |p: f64| {
        let at = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        all[at].as_secs_f64() * 1000.0
    };
    println!(
        "  ({} {:?}: {} requests, p50 {:.2} ms, max {:.2} ms)",
        paths.len(),
        if encoding == Encoding::Gzip {
            "gzip"
        } else {
            "identity"
        },
        all.len(),
        pct(0.5),
        pct(1.0)
    );
    (pct(0.99), views.len())
}

fn main() {
    println!("bench_binary {}", artifact("storage-scheduler").display());
    // `BENCH_NODES=1000` (or 10000) measures one size only.
    let only: Option<usize> = std::env::var("BENCH_NODES")
        .ok()
        .and_then(|n| n.parse().ok());
    for (nodes, label) in [(1_000, "1k"), (10_000, "10k")] {
        if only.is_none_or(|n| n == nodes) {
            measure(nodes, label);
        }
    }
}
