//! Sending a response under one deadline, and closing after an error without resetting
//! the connection under the client's feet.

use super::message::{reason, Later, Response};
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// After an error that closes the connection, unread input is drained this long (or this
/// much) first, so that the close does not reset the connection before the client has
/// read the error.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 4 * 1024 * 1024;

/// Reads the rest of a client's input for a moment before closing, so that the close does
/// not turn into a reset that destroys the error response in flight.
pub(super) fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut drained = 0;
    let mut tmp = [0u8; 16 * 1024];
    while drained < LINGER_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

pub(super) fn write_response(
    stream: &mut TcpStream,
    resp: &Response,
    head_only: bool,
    keep_alive: bool,
    deadline: Instant,
) -> io::Result<()> {
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
    let body: &[u8] = if send_body { body } else { &[] };
    // Head and body in one system call (and so one segment for small answers) without
    // copying the body.
    let mut bufs = [io::IoSlice::new(head.as_bytes()), io::IoSlice::new(body)];
    let mut bufs = &mut bufs[..];
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
    /// Writes `resp` (one deadline for the whole response) and closes the connection.
    pub fn answer(mut self, resp: &Response) {
        let class = usize::from(resp.status / 100).min(5);
        self.stats.responses[class].fetch_add(1, Relaxed);
        let deadline = Instant::now() + self.write_timeout;
        let _ = write_response(&mut self.stream, resp, self.head_only, false, deadline);
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
