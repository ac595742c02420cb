//! Sending a response under one deadline, and a long poll's answer without waiting for its
//! reader.

use super::message::{reason, Body, Later, Response};
use rustls::ServerConnection;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// The status line and headers of `resp`, and whether its body is to be sent after them.
fn encode(resp: &Response, head_only: bool, keep_alive: bool) -> (String, bool) {
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
        let _ = write!(head, "Content-Length: {}\r\n", resp.body.size());
    }
    head.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let send_body = !head_only && resp.status != 304 && resp.status != 204;
    (head, send_body)
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
    let (head, send_body) = encode(resp, head_only, keep_alive);
    if let Some(tls) = tls {
        let body = if send_body {
            resp.body.contents()?
        } else {
            Cow::Borrowed(&[][..])
        };
        let sealed = super::tls::seal(tls, &[head.as_bytes(), &body], !keep_alive)?;
        return write_by(stream, &mut [io::IoSlice::new(&sealed)], deadline);
    }
    if let (Body::File { file, len }, true) = (&resp.body, send_body) {
        write_by(stream, &mut [io::IoSlice::new(head.as_bytes())], deadline)?;
        return send_file(stream, file, *len, deadline);
    }
    let body = if send_body { resp.body.bytes() } else { &[] };
    // Head and body in one system call (and so one segment for small answers) without
    // copying the body.
    write_by(
        stream,
        &mut [io::IoSlice::new(head.as_bytes()), io::IoSlice::new(body)],
        deadline,
    )
}

const SEND_FILE_PIECE: usize = 64 * 1024;

/// The first `len` bytes of `file` to `stream` by `deadline`, by sendfile(2): from the page
/// cache to the socket, through no buffer of ours (the executor binary, 3 MB, fetched by
/// every agent of a launch wave, held in memory per wave was 3 MB of the scheduler's peak).
fn send_file(stream: &mut TcpStream, file: &File, len: u64, deadline: Instant) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut offset: libc::off_t = 0;
    let end = libc::off_t::try_from(len).map_err(io::Error::other)?;
    while offset < end {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        // A piece at a time: the kernel gives each piece of a sendfile (a pipe's 64 KB) the
        // whole send timeout afresh, so a reader slow but never stopped kept one call going
        // far past the deadline.
        let count = usize::try_from(end - offset)
            .unwrap_or(usize::MAX)
            .min(SEND_FILE_PIECE);
        // SAFETY: both descriptors are open for the call (borrowed), and `offset` is a valid
        // place for the kernel to write the new offset to.
        let n = unsafe { libc::sendfile(stream.as_raw_fd(), file.as_raw_fd(), &mut offset, count) };
        match n {
            // The file is shorter than when its length was taken.
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n > 0 => {}
            _ => {
                let e = io::Error::last_os_error();
                // The socket's send timeout shows as EAGAIN: the loop checks the deadline.
                if !matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
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
        let (head, send_body) = encode(resp, self.head_only, keep.is_some());
        let body = match send_body.then(|| resp.body.contents()).transpose() {
            Ok(body) => body.unwrap_or_default(),
            Err(_) => return,
        };
        let body = &body[..];
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
