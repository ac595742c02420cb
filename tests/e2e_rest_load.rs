//! End to end: the real scheduler's REST server under hostile load on the dev cluster. One
//! source address (127.0.0.2) opens slow connections and sends a stream of bad requests;
//! the executors' address (127.0.0.1) is still answered, within a deadline and not with 503.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HOSTILE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// An executor's call must be answered this fast while the attack goes on.
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

struct Scheduler(Child);

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A TCP connection to `to` from the source address `from` (std cannot bind before
/// connecting).
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        return Err(std::io::ErrorKind::Unsupported.into());
    };
    let sockaddr = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor owned here; the addresses live across them.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let local = sockaddr(SocketAddrV4::new(from, 0));
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sockaddr(to);
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// An executor's heartbeat over HTTPS, as an executor sends it (a fresh connection each
/// time, so the handshake counts): its status, or why there was none.
fn heartbeat(agent: &ureq::Agent, url: &str, secret: &str) -> Result<u16, String> {
    agent
        .post(url)
        .header("Authorization", &format!("Bearer {secret}"))
        .send(&b""[..])
        .map(|r| r.status().as_u16())
        .map_err(|e| e.to_string())
}

/// Slow connections from the hostile address: each sends a byte of a request now and then,
/// never finishing it; dead ones are replaced, and more are opened all the time.
fn slow_connections(addr: SocketAddr, stop: Arc<AtomicBool>) {
    let mut conns: Vec<TcpStream> = Vec::new();
    let mut last_byte = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        while conns.len() < 300 {
            match connect_from(HOSTILE, addr) {
                Ok(mut s) => {
                    let _ = s.write_all(b"G");
                    conns.push(s);
                }
                Err(_) => break,
            }
        }
        if last_byte.elapsed() > Duration::from_secs(2) {
            conns.retain_mut(|s| s.write_all(b"E").is_ok());
            last_byte = Instant::now();
        }
        // Dropped by the server: opened again on the next round.
        conns.retain(|s| {
            s.set_nonblocking(true).ok();
            let mut b = [0u8; 512];
            s.peek(&mut b).is_err()
        });
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Bad requests from the hostile address, about 200 a second: a wrong secret with a body
/// that never comes, and garbage; the connections are kept open and never read.
fn bad_requests(addr: SocketAddr, stop: Arc<AtomicBool>) {
    let mut kept: std::collections::VecDeque<TcpStream> = Default::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if let Ok(mut s) = connect_from(HOSTILE, addr) {
            let req = if n.is_multiple_of(2) {
                "POST /api/v1/executors/nobody/phase HTTP/1.1\r\nHost: x\r\n\
                 Authorization: Bearer wrong\r\nContent-Length: 100000\r\n\r\n"
            } else {
                "NOT HTTP AT ALL\r\n\r\n"
            };
            let _ = s.write_all(req.as_bytes());
            kept.push_back(s);
            if kept.len() > 400 {
                kept.pop_front();
            }
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A current executor's id (from the state file) and its secret (as the dev master handed it
/// to the agent: the scheduler keeps only its digest).
fn executor_credentials(store: &Path, m: &master::MasterHandle) -> Option<(String, String)> {
    let state = cluster::try_stored_state(store).ok()?;
    let (id, _) = state.executor_secrets().next()?;
    let secret = cluster::launched_secrets(m).remove(&*id)?;
    Some((id.into_owned(), secret))
}

#[test]
fn hostile_load_from_one_address_leaves_executors_answered() {
    let dir = tempdir("rest-load");
    let m = master::start(master::MasterConfig {
        agents: 2,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("dev cluster");
    let port = free_port();
    let store = dir.join("state.json");
    let log = std::fs::File::create(dir.join("scheduler.log")).unwrap();
    let _sched = Scheduler(
        Command::new(scheduler_bin())
            .args(scheduler_args(
                &m.addr().to_string(),
                port,
                &store,
                "Scaleio123",
            ))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start storage-scheduler"),
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let (id, secret) = wait_for("an executor's secret", Duration::from_secs(60), || {
        executor_credentials(&store, &m)
    });
    let pin = wait_for(
        "the scheduler's certificate",
        Duration::from_secs(30),
        || cluster::logged_fingerprint(&dir.join("scheduler.log")),
    );
    // No pooled connection: every heartbeat connects and shakes hands anew.
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .max_idle_connections(0)
        .timeout_global(Some(ANSWER_WITHIN))
        .build();
    let verifier = Arc::new(storage_framework::tls::PinnedVerifier::new(vec![pin]));
    let agent = storage_framework::tls::agent(
        config,
        storage_framework::tls::executor_client_config(verifier),
    );
    let url = format!("https://127.0.0.1:{port}/api/v1/executors/{id}/heartbeat");
    let call = || heartbeat(&agent, &url, &secret);
    // The executor is known, and the probe is served before the attack.
    wait_for(
        "a first heartbeat answered",
        Duration::from_secs(30),
        || call().ok().filter(|s| *s != 503),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = [slow_connections, bad_requests]
        .into_iter()
        .map(|f| {
            let stop = stop.clone();
            std::thread::spawn(move || f(addr, stop))
        })
        .collect();
    let started = Instant::now();
    let mut failure = None;
    while started.elapsed() < Duration::from_secs(25) {
        let asked = Instant::now();
        match call() {
            // 404 would be an executor relaunched meanwhile: answered all the same.
            Ok(status) if status != 503 => {}
            other => {
                failure = Some(format!(
                    "{:.1} s into the attack, an executor's heartbeat got {other:?} after {:.1} s",
                    started.elapsed().as_secs_f64(),
                    asked.elapsed().as_secs_f64()
                ));
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        let _ = a.join();
    }
    if let Some(f) = failure {
        panic!("{f}");
    }
    // The attack was one: connections of its address were refused, slow ones cut off.
    let metrics = get(addr, "/metrics");
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"))
    };
    assert!(
        counter("storage_scheduler_http_rejected_total") > 0,
        "{metrics}"
    );
    assert!(
        counter("storage_scheduler_http_timeouts_total") > 0,
        "{metrics}"
    );
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}
