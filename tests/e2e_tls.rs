//! End to end, the executors' pinned TLS to the scheduler: a tampering proxy at the address
//! the executors are given passes plain HTTP through (the agents fetch the executor binary,
//! as from the scheduler) but answers TLS with a certificate of its own. The executor refuses
//! it, and its node fails naming both fingerprints, without one host step run.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master;
use serde_json::Value;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use storage_framework::scheduler::identity;

struct Sched(Child);

impl Drop for Sched {
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

/// Copies one direction until either side ends, then ends both.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// One connection through the proxy: plain HTTP goes on to `upstream`, TLS meets `tls`.
fn proxy_one(client: TcpStream, upstream: SocketAddr, tls: Arc<rustls::ServerConfig>) {
    let mut first = [0u8; 1];
    if client.peek(&mut first).unwrap_or(0) == 0 {
        return;
    }
    if first[0] == 0x16 {
        let Ok(conn) = rustls::ServerConnection::new(tls) else {
            return;
        };
        let mut stream = rustls::StreamOwned::new(conn, client);
        // The handshake: the executor's verifier is what ends it.
        let _ = stream.flush();
        let _ = stream.conn.complete_io(&mut stream.sock);
        return;
    }
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    std::thread::spawn(move || pipe(c2, s2));
    pipe(server, client);
}

fn start_proxy(at: SocketAddr, upstream: SocketAddr, tls: Arc<rustls::ServerConfig>) {
    let listener = TcpListener::bind(at).expect("the proxy's address");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let tls = tls.clone();
            std::thread::spawn(move || proxy_one(client, upstream, tls));
        }
    });
}

fn nodes(port: u16) -> Vec<Value> {
    let text = ureq::get(&format!("http://127.0.0.1:{port}/api/state"))
        .call()
        .ok()
        .and_then(|r| r.into_body().read_to_string().ok())
        .unwrap_or_default();
    let state: Value = serde_json::from_str(&text).unwrap_or_default();
    state["model"]["nodes"]
        .as_object()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn an_executor_refuses_another_certificate_and_its_node_fails_naming_both() {
    let dir = tempdir("tls-tamper");
    let m = master::start(master::MasterConfig {
        agents: 1,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("dev cluster");
    let port = free_port();
    let log = dir.join("scheduler.log");
    let mut args = scheduler_args(
        &m.addr().to_string(),
        port,
        &dir.join("state.json"),
        "Pw-123",
    );
    args.retain(|a| !a.starts_with("-rest.address="));
    // The scheduler listens on 127.0.0.1 only; executors are sent to the proxy.
    args.push("-rest.listen=127.0.0.1".into());
    args.push("-rest.address=127.0.0.2".into());
    let forged = identity::self_signed(&["127.0.0.2".into()]).expect("the proxy's certificate");
    start_proxy(
        SocketAddr::from(([127, 0, 0, 2], port)),
        SocketAddr::from(([127, 0, 0, 1], port)),
        forged.server.clone(),
    );
    let _sched = Sched(
        Command::new(scheduler_bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start storage-scheduler"),
    );
    let real = wait_for(
        "the scheduler's certificate",
        Duration::from_secs(30),
        || cluster::logged_fingerprint(&log),
    );
    let error = wait_for("the node to fail", Duration::from_secs(120), || {
        nodes(port).into_iter().find_map(|n| {
            let e = n["last_error"].as_str()?.to_owned();
            e.contains("certificate").then_some(e)
        })
    });
    for fingerprint in [real.to_string(), forged.fingerprint.to_string()] {
        assert!(
            error.contains(&fingerprint),
            "{fingerprint} not in: {error}"
        );
    }
    // Nothing ran: no executor got as far as a phase.
    let logs = executor_stderr(&dir.join("mesos"));
    assert!(!logs.is_empty());
    for text in &logs {
        assert!(text.contains("another certificate"), "{text}");
        assert!(!text.contains(": phase "), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each executor's `stderr`.
fn executor_stderr(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if p.file_name().is_some_and(|f| f == "stderr")
                && p.to_string_lossy().contains("storage-executor")
            {
                out.push(std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}
