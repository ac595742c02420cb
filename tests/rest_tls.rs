//! The REST server's TLS: on the same port as plain HTTP, the executor API and every write
//! over TLS only (plain ones refused before the dispatcher sees them), the read-only routes
//! on both, and a TLS client that is slow or stops in its handshake holding no worker past
//! the server's deadlines. Clients: rustls with the executors' own pinned verifier, and curl
//! with the certificate as its CA.
#![cfg(feature = "scheduler")]

#[path = "support/rest_fake.rs"]
mod fake;

use fake::{get, read_response, request, secret_of, Connection, Fake, Reply};
use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage_framework::rest::{self, RestConfig, RestHandle, ServerOptions};
use storage_framework::scheduler::exchange::SecretUpdate;
use storage_framework::scheduler::identity::{self, Identity};
use storage_framework::scheduler::metrics::Metrics;
use storage_framework::tls::{self, Fingerprint, PinnedVerifier};

const H2: &str = "storage-02.dc1.example";

struct Server {
    _rest: RestHandle,
    _fake: Fake,
    addr: SocketAddr,
    fingerprint: Fingerprint,
    cert_der: Vec<u8>,
    /// The executor binary it serves: absent until a test writes it.
    binary: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.binary);
    }
}

fn start(opts: ServerOptions) -> Server {
    let made = identity::self_signed(&["localhost".to_owned()]).expect("a certificate");
    start_with(opts, made)
}

fn start_with(opts: ServerOptions, identity: Identity) -> Server {
    let state = fake::five_nodes();
    let (secrets_tx, secrets) = crossbeam_channel::unbounded();
    for (executor_id, digest) in state.executor_secrets() {
        let _ = secrets_tx.send(SecretUpdate::Known {
            executor_id: executor_id.into_owned(),
            digest: *digest,
        });
    }
    let Identity {
        fingerprint,
        server,
        cert_der,
    } = identity;
    let fake = Fake::start(
        state,
        Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
    );
    static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let binary = std::env::temp_dir().join(format!("rest-tls-executor-{}-{n}", std::process::id()));
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(binary.clone()),
            ),
            inputs: fake.inputs.clone(),
            metrics: Arc::new(Metrics::default()),
            secrets: Some(secrets),
            state_warning: None,
            tls: Some(server),
            operator_token: None,
        },
        opts,
    )
    .expect("REST server starts");
    Server {
        addr: rest.local_addr(),
        _rest: rest,
        _fake: fake,
        fingerprint,
        cert_der,
        binary,
    }
}

fn options() -> ServerOptions {
    ServerOptions {
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        // Every read asks the fake dispatcher: tests read back at once what they changed.
        view_max_age: std::time::Duration::ZERO,
        ..ServerOptions::default()
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection that accepts only the server's certificate, as an executor's does.
fn tls_connect(s: &Server) -> Tls {
    let verifier = Arc::new(PinnedVerifier::new(vec![s.fingerprint]));
    let config = tls::client_config(verifier);
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    rustls::StreamOwned::new(conn, fake::connect(s.addr))
}

fn tls_request(s: &Server, method: &str, path: &str, body: &[u8], auth: bool) -> Reply {
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if auth {
        raw.push_str(&format!("Authorization: Bearer {}\r\n", secret_of(H2)));
    }
    raw.push_str("\r\n");
    let mut stream = tls_connect(s);
    stream.write_all(raw.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    read_response(&mut stream, &mut Vec::new(), method == "HEAD").expect("a TLS response")
}

fn executor_path(action: &str) -> String {
    format!("/api/v1/executors/{}/{action}", fake::executor_id(H2))
}

fn phase_of_h2(addr: SocketAddr) -> String {
    let r = get(addr, &format!("/api/nodes/{H2}"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["phase"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_executor_api_is_served_over_tls_and_refused_over_plain_http() {
    let s = start(options());
    let before = phase_of_h2(s.addr);
    assert_ne!(before, "packages");
    let auth = format!("Bearer {}", secret_of(H2));
    let report = br#"{"phase":"packages"}"#;
    let plain = request(
        s.addr,
        "POST",
        &executor_path("phase"),
        &[("Authorization", &auth)],
        report,
    );
    assert_eq!(plain.status, 403, "{}", plain.text());
    assert!(
        plain.text().contains("this endpoint needs https"),
        "{}",
        plain.text()
    );
    assert_eq!(
        phase_of_h2(s.addr),
        before,
        "the plain report reached the dispatcher"
    );
    let plan = request(
        s.addr,
        "GET",
        &executor_path("plan"),
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(plan.status, 403, "{}", plan.text());
    assert!(
        !plan.text().contains("\"version\""),
        "a plan over plain HTTP"
    );
    // Any write, on any path.
    assert_eq!(
        request(s.addr, "POST", "/api/state", &[], b"{}").status,
        403
    );

    let r = tls_request(&s, "POST", &executor_path("phase"), report, true);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(phase_of_h2(s.addr), "packages");
    let r = tls_request(&s, "GET", &executor_path("plan"), b"", true);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["version"].is_u64(), "{}", r.text());
    // The secret check still answers over TLS.
    let r = tls_request(&s, "POST", &executor_path("heartbeat"), b"", false);
    assert_eq!(r.status, 401, "{}", r.text());
}

#[test]
fn the_read_only_routes_answer_on_both() {
    let s = start(options());
    for path in ["/health", "/metrics", "/api/state", "/"] {
        assert_eq!(get(s.addr, path).status, 200, "plain {path}");
        assert_eq!(
            tls_request(&s, "GET", path, b"", false).status,
            200,
            "TLS {path}"
        );
    }
    // Only the certificate's absence: the route is reached over plain HTTP.
    assert_eq!(get(s.addr, "/storage-executor").status, 404);
}

/// The executor binary, sent from the page cache on plain HTTP, is read and sealed whole
/// over TLS: the same bytes on both.
#[test]
fn the_executor_binary_is_the_same_over_tls_and_plain_http() {
    let s = start(options());
    let content: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&s.binary, &content).unwrap();
    let plain = get(s.addr, "/storage-executor");
    let sealed = tls_request(&s, "GET", "/storage-executor", b"", false);
    for (r, how) in [(&plain, "plain"), (&sealed, "TLS")] {
        assert_eq!(r.status, 200, "{how}");
        assert_eq!(r.header("content-length"), Some("200000"), "{how}");
        assert!(r.body == content, "{how}: the body differs from the file");
    }
    assert_eq!(plain.header("etag"), sealed.header("etag"));
    let head = tls_request(&s, "HEAD", "/storage-executor", b"", false);
    assert_eq!(head.header("content-length"), Some("200000"));
    assert!(head.body.is_empty());
}

#[test]
fn a_plan_long_poll_is_answered_over_tls_from_the_waiter() {
    let s = start(options());
    let plan = tls_request(&s, "GET", &executor_path("plan"), b"", true);
    let version = plan.json()["version"].as_u64().unwrap();
    let started = Instant::now();
    let path = format!("{}?version={version}&wait=1", executor_path("plan"));
    let r = tls_request(&s, "GET", &path, b"", true);
    assert_eq!(r.status, 304, "{}", r.text());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[test]
fn curl_accepts_the_certificate_as_its_ca() {
    let s = start(options());
    let dir = std::env::temp_dir().join(format!("rest-tls-curl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, pem("CERTIFICATE", &s.cert_der)).unwrap();
    let url = format!("https://localhost:{}/health", s.addr.port());
    let out = std::process::Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca)
        .arg(&url)
        .output()
        .expect("curl runs");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && body.contains("subscribed"),
        "{body} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A short-deadline server with one worker: whatever holds it holds every client.
fn one_worker() -> Server {
    start(ServerOptions {
        workers: 1,
        request_timeout: Duration::from_secs(1),
        first_byte_timeout: Duration::from_secs(1),
        ..options()
    })
}

/// A real ClientHello, as the first flight of a rustls client.
fn client_hello(s: &Server) -> Vec<u8> {
    let mut conn = tls_connect(s).conn;
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    hello
}

/// Waits for the server to close `stream`; how long that took.
fn closed_after(mut stream: TcpStream, started: Instant) -> Duration {
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return started.elapsed(),
            Ok(_) => {}
        }
    }
}

fn assert_served_meanwhile(s: &Server) {
    let r = tls_request(s, "GET", "/health", b"", false);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn a_client_that_stops_in_the_handshake_holds_no_worker() {
    let s = one_worker();
    let hello = client_hello(&s);
    let mut stalled = TcpStream::connect(s.addr).unwrap();
    let started = Instant::now();
    stalled.write_all(&hello[..hello.len() / 2]).unwrap();
    let took = closed_after(stalled, started);
    assert!(took < Duration::from_secs(4), "held for {took:?}");
    assert_served_meanwhile(&s);
}

#[test]
fn a_client_that_trickles_its_handshake_is_cut_at_the_request_deadline() {
    let s = one_worker();
    let hello = client_hello(&s);
    let slow = TcpStream::connect(s.addr).unwrap();
    let started = Instant::now();
    let mut writer = slow.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for b in hello {
            if writer.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let took = closed_after(slow, started);
    // The whole hello would take over 10 s at this pace.
    assert!(took < Duration::from_secs(4), "held for {took:?}");
    assert_served_meanwhile(&s);
    let _ = trickle.join();
}

#[test]
fn a_tls_client_slow_to_send_its_request_gets_408_in_time() {
    let s = one_worker();
    let mut stream = tls_connect(&s);
    let started = Instant::now();
    stream.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
    let r = read_response(&mut stream, &mut Vec::new(), false).expect("an answer over TLS");
    assert_eq!(r.status, 408, "{}", r.text());
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_served_meanwhile(&s);
}

/// An operator's certificate and key, as PEM files (the key readable by its owner only).
#[test]
fn an_operators_certificate_from_pem_files_is_served_and_pinned() {
    use std::os::unix::fs::PermissionsExt;
    let made = tls::selfsigned::make(&["localhost".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("rest-tls-own-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = storage_framework::scheduler::flags::TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.cert, pem("CERTIFICATE", &made.cert_der)).unwrap();
    std::fs::write(&files.key, pem("PRIVATE KEY", made.key_pkcs8())).unwrap();
    std::fs::set_permissions(&files.key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let own = identity::from_files(&files).expect("the operator's files");
    assert_eq!(own.fingerprint, Fingerprint::of(&made.cert_der));
    let s = start_with(options(), own);
    let r = tls_request(&s, "GET", &executor_path("plan"), b"", true);
    assert_eq!(r.status, 200, "{}", r.text());
    // Another key than the certificate's is refused, naming both files.
    let other = tls::selfsigned::make(&["localhost".to_owned()]).unwrap();
    std::fs::write(&files.key, pem("PRIVATE KEY", other.key_pkcs8())).unwrap();
    let e = identity::from_files(&files).err().unwrap();
    assert!(e.contains("cert.pem") && e.contains("key.pem"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// PEM of DER bytes (base64 in lines of 64).
fn pem(label: &str, der: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::new();
    for chunk in der.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                b64.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                b64.push('=');
            }
        }
    }
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}
