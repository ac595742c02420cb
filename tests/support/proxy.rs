//! A TCP proxy for tests that stands between two real parts and records every byte both ways,
//! optionally tampering: it replaces an HTTP response body by path (plain HTTP only), or
//! terminates TLS with a certificate of its own (a man in the middle). Threads only; it serves
//! until the process ends.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What one accepted connection carried. `up` is client to target, `down` target to client,
/// as the proxy read them (before any rewrite; after TLS termination under a MITM).
#[derive(Debug, Clone, Default)]
pub struct Conn {
    pub up: Vec<u8>,
    pub down: Vec<u8>,
    /// MITM: the TLS handshake with the client completed (the client accepted our certificate).
    pub tls_accepted: bool,
    /// MITM: why the TLS handshake with the client failed (a refusal shows up here).
    pub tls_refused: Option<String>,
}

/// Rewrites the body of the response to a request for `path`: `Some(new body)` replaces it.
pub type Rewrite = Box<dyn Fn(&str, &[u8]) -> Option<Vec<u8>> + Send + Sync>;

#[derive(Default)]
pub struct Tamper {
    pub rewrite: Option<Rewrite>,
    /// Terminate TLS with this configuration instead of passing it through.
    pub mitm: Option<Tls>,
}

pub struct Proxy {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<Conn>>>,
}

impl Proxy {
    /// Listens on `listen` (port 0: any) and forwards each connection to `target`; with no
    /// tampering, byte for byte, whatever the protocol.
    pub fn start(listen: SocketAddr, target: SocketAddr, tamper: Tamper) -> Proxy {
        let listener = TcpListener::bind(listen)
            .unwrap_or_else(|e| panic!("proxy cannot listen on {listen}: {e}"));
        let addr = listener.local_addr().expect("proxy address");
        let conns: Arc<Mutex<Vec<Conn>>> = Arc::default();
        let (shared, tamper) = (conns.clone(), Arc::new(tamper));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let id = {
                    let mut c = shared.lock().unwrap();
                    c.push(Conn::default());
                    c.len() - 1
                };
                let (log, tamper) = (Log(shared.clone(), id), tamper.clone());
                std::thread::spawn(move || serve(client, target, &tamper, log));
            }
        });
        Proxy { addr, conns }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A copy of everything recorded so far, one entry per connection in accept order.
    pub fn recorded(&self) -> Vec<Conn> {
        self.conns.lock().unwrap().clone()
    }
}

/// A throwaway self-signed certificate for `ip`, made by `openssl req -x509` in `dir`, as a
/// TLS server configuration.
pub fn self_signed(dir: &Path, ip: &str) -> Arc<rustls::ServerConfig> {
    std::fs::create_dir_all(dir).expect("certificate dir");
    for args in [
        format!("req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=mitm -addext subjectAltName=IP:{ip} -keyout key.pem -outform DER -out cert.der"),
        "pkcs8 -topk8 -nocrypt -in key.pem -outform DER -out key.der".to_string(),
    ] {
        let mut run = std::process::Command::new("openssl");
        let out = run.args(args.split(' ')).current_dir(dir).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args}: {out:?}");
    }
    let read = |f: &str| std::fs::read(dir.join(f)).expect("certificate file");
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(read("key.der"));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(vec![read("cert.der").into()], key.into())
    .expect("the certificate openssl made");
    Arc::new(config)
}

#[derive(Clone)]
struct Log(Arc<Mutex<Vec<Conn>>>, usize);

impl Log {
    fn with(&self, f: impl FnOnce(&mut Conn)) {
        f(&mut self.0.lock().unwrap()[self.1])
    }
}

fn serve(client: TcpStream, target: SocketAddr, tamper: &Tamper, log: Log) {
    let Ok(upstream) = TcpStream::connect(target) else {
        return;
    };
    let mut first = [0u8; 1];
    let tampering = tamper.rewrite.is_some() || tamper.mitm.is_some();
    if !tampering || client.peek(&mut first).unwrap_or(0) == 0 {
        return relay(client, upstream, log);
    }
    match (first[0], &tamper.mitm) {
        (0x16, Some(tls)) => mitm(client, upstream, tls, tamper, log),
        (b'A'..=b'Z', _) => http(
            BufReader::new(client),
            BufReader::new(upstream),
            tamper,
            &log,
        ),
        _ => relay(client, upstream, log),
    }
}

/// Byte for byte both ways, one thread a direction.
fn relay(client: TcpStream, upstream: TcpStream, log: Log) {
    let copy = |mut from: TcpStream, mut to: TcpStream, log: Log, up: bool| {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            log.with(|c| if up { &mut c.up } else { &mut c.down }.extend_from_slice(&buf[..n]));
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    };
    let (c2, u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
    let l2 = log.clone();
    let back = std::thread::spawn(move || copy(u2, c2, l2, false));
    copy(client, upstream, log, true);
    let _ = back.join();
}

type Tls = Arc<rustls::ServerConfig>;

fn mitm(client: TcpStream, upstream: TcpStream, tls: &Tls, tamper: &Tamper, log: Log) {
    let conn = rustls::ServerConnection::new(tls.clone()).expect("TLS server");
    let mut tls = rustls::StreamOwned::new(conn, client);
    while tls.conn.is_handshaking() {
        if let Err(e) = tls.conn.complete_io(&mut tls.sock) {
            return log.with(|c| c.tls_refused = Some(e.to_string()));
        }
    }
    log.with(|c| c.tls_accepted = true);
    // The client took our certificate. Its plaintext goes on to the target as it is: the
    // verdict is the accepted handshake, and what the client then sends is on record.
    http(BufReader::new(tls), BufReader::new(upstream), tamper, &log);
}

/// HTTP/1.1 exchanges one after the other (what keep-alive clients do): each request goes up,
/// its response comes down, with its body replaced when the rewrite says so.
fn http<C: Read + Write, U: Read + Write>(
    mut client: BufReader<C>,
    mut upstream: BufReader<U>,
    tamper: &Tamper,
    log: &Log,
) {
    while let Some(head) = read_head(&mut client) {
        let path = head.split(|&b| b == b' ').nth(1).unwrap_or_default();
        let path = String::from_utf8_lossy(path).into_owned();
        let no_body = head.starts_with(b"HEAD ");
        let Some((raw, _)) = read_body(&mut client, &head, true) else {
            return;
        };
        let request = [head, raw].concat();
        log.with(|c| c.up.extend_from_slice(&request));
        let sent = upstream.get_mut().write_all(&request);
        if sent.and_then(|_| upstream.get_mut().flush()).is_err() {
            return;
        }
        let Some(head) = read_head(&mut upstream) else {
            return;
        };
        let status = head.get(9..12).unwrap_or_default();
        let empty = no_body || status.starts_with(b"1") || status == b"204" || status == b"304";
        let Some((raw, body)) = (if empty {
            Some(Default::default())
        } else {
            read_body(&mut upstream, &head, false)
        }) else {
            return;
        };
        log.with(|c| c.down.extend_from_slice(&[&head[..], &raw[..]].concat()));
        let replaced = tamper.rewrite.as_ref().and_then(|r| r(&path, &body));
        let response = match replaced {
            Some(new) => [with_length(&head, new.len()), new].concat(),
            None => [head, raw].concat(),
        };
        if client.get_mut().write_all(&response).is_err() || client.get_mut().flush().is_err() {
            return;
        }
    }
}

/// The head (start line and headers, through the blank line), or `None` at the end.
fn read_head(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    loop {
        let n = r.read_until(b'\n', &mut head).ok()?;
        if n == 0 || head.len() > 64 * 1024 {
            return None;
        }
        if head == b"\r\n" {
            head.clear(); // a stray line break between messages
        } else if head.ends_with(b"\r\n\r\n") {
            return Some(head);
        }
    }
}

fn header(head: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(head).lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_ascii_lowercase())
    })
}

/// The body as it came (raw) and decoded (chunks joined): by Content-Length, chunked, or (a
/// response without either) to the end of the stream.
fn read_body(r: &mut impl BufRead, head: &[u8], request: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    if header(head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        let (mut raw, mut body) = (Vec::new(), Vec::new());
        loop {
            let mut line = Vec::new();
            r.read_until(b'\n', &mut line).ok()?;
            raw.extend_from_slice(&line);
            let size = String::from_utf8_lossy(&line);
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            r.read_exact(&mut chunk).ok()?;
            raw.extend_from_slice(&chunk);
            body.extend_from_slice(&chunk[..size]);
            if size == 0 {
                return Some((raw, body));
            }
        }
    }
    let mut body = Vec::new();
    match header(head, "content-length").and_then(|v| v.parse::<u64>().ok()) {
        Some(n) => r.take(n).read_to_end(&mut body).ok()?,
        None if request => 0,
        None => r.read_to_end(&mut body).ok()?,
    };
    Some((body.clone(), body))
}

/// `head` with its length headers replaced by a Content-Length of `len`.
fn with_length(head: &[u8], len: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if name != "content-length" && name != "transfer-encoding" {
            out.push_str(&format!("{line}\r\n"));
        }
    }
    format!("{out}Content-Length: {len}\r\n\r\n").into_bytes()
}
