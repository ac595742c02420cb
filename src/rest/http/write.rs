//! Sending a response under one deadline, and a long poll's answer without waiting for its
//! reader.

use super::message::{reason, Later, Response};
use rustls::ServerConnection;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// The status line and headers of `resp`, and the body to send after them.
fn encode(resp: &Response, head_only: bool, keep_alive: bool) -> (String, &[u8]) {
    let body = resp.body.bytes();
    let mut head = String::with_capacity(256);
    let _ = write!(head, "HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (name, value) in &resp.headers {
        head.push_str(name);
        head.push_str(": ");
        // Values are ours, but a stray line break would split the response.
        head.extend(value.chars().filter(|c| *c != '\r' && *c != '\n'));
        head.push_str("\r\n");
    }
    if !(resp.status == 304 || resp.status == 204 || (100..200).contains(&resp.status)) {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    head.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let send_body = !head_only && resp.status != 304 && resp.status != 204;
    (head, if send_body { body } else { &[] })
}

/// Sends `resp` by `deadline`, through `tls` when the connection has it (then closing the
/// TLS session too when the connection is not kept).
pub(super) fn write_response(
    stream: &mut TcpStream,
    tls: Option<&mut ServerConnection>,
    resp: &Response,
    head_only: bool,
    keep_alive: bool,
    deadline: Instant,
) -> io::Result<()> {
    let (head, body) = encode(resp, head_only, keep_alive);
    if let Some(tls) = tls {
        let sealed = super::tls::seal(tls, &[head.as_bytes(), body], !keep_alive)?;
        return write_by(stream, &mut [io::IoSlice::new(&sealed)], deadline);
    }
    // Head and body in one system call (and so one segment for small answers) without
    // copying the body.
    write_by(
        stream,
        &mut [io::IoSlice::new(head.as_bytes()), io::IoSlice::new(body)],
        deadline,
    )
}

fn write_by(stream: &mut TcpStream, bufs: &mut [io::IoSlice], deadline: Instant) -> io::Result<()> {
    let mut bufs = bufs;
    while !bufs.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.flush()
}

impl Later {
    /// Sends `resp` without waiting for the client to read it: what it does not take at once
    /// the closer thread sends (one deadline for the whole response) and closes, so one slow
    /// reader does not hold up the answers to others. An answer taken whole keeps a
    /// keep-alive connection open for the client's next request.
    pub fn answer(mut self, resp: &Response) {
        let class = usize::from(resp.status / 100).min(5);
        self.stats.responses[class].fetch_add(1, Relaxed);
        let keep = self.keep.take();
        let (head, body) = encode(resp, self.head_only, keep.is_some());
        let mut bytes = match &mut self.tls {
            Some(tls) => match super::tls::seal(tls, &[head.as_bytes(), body], keep.is_none()) {
                Ok(sealed) => sealed,
                Err(_) => return,
            },
            None => {
                let mut bytes = Vec::with_capacity(head.len() + body.len());
                bytes.extend_from_slice(head.as_bytes());
                bytes.extend_from_slice(body);
                bytes
            }
        };
        if let Some(resume) = keep {
            match write_now(&mut self.stream, &bytes) {
                Ok(n) if n == bytes.len() => return resume(self.stream, self.tls),
                Ok(n) => drop(bytes.drain(..n)),
                Err(_) => return,
            }
        }
        let deadline = Instant::now() + self.write_timeout;
        self.closer.send_and_close(self.stream, bytes, deadline);
    }
}

/// Writes what the socket takes without blocking; how much that was.
fn write_now(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<usize> {
    stream.set_nonblocking(true)?;
    let mut sent = 0;
    let result = loop {
        match stream.write(&bytes[sent..]) {
            Ok(0) => break Ok(sent),
            Ok(n) => {
                sent += n;
                if sent == bytes.len() {
                    break Ok(sent);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(sent),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    stream.set_nonblocking(false)?;
    result
}
