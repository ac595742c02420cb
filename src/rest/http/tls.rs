//! TLS on the same port as plain HTTP: a connection whose first byte opens a TLS handshake
//! (a record of type 22) is wrapped in a rustls server connection; any other is plain HTTP.
//!
//! The socket stays a plain `TcpStream` throughout, so that the server's deadlines (one per
//! read, one per response), the per-address places, stopping (which cuts open sockets) and
//! the closer thread (which only sends bytes and drains) work for both kinds unchanged: a
//! TLS answer is sealed into its records first and those bytes go out like a plain one's.

use super::conn::{Read1, IDLE_SLICE};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// The first byte of every TLS connection: a handshake record (RFC 8446 section 5.1). No
/// HTTP method starts with it.
pub(super) const HANDSHAKE_RECORD: u8 = 0x16;

/// The first byte of a new connection, left in the socket; `None` when the client closed or
/// sent nothing by `deadline`, or the server stops.
pub(super) fn peek_first(
    stream: &TcpStream,
    deadline: Instant,
    stopping: &AtomicBool,
) -> Option<u8> {
    let mut byte = [0u8; 1];
    loop {
        let slice = (Instant::now() + IDLE_SLICE).min(deadline);
        let left = slice.saturating_duration_since(Instant::now());
        if left.is_zero() || stopping.load(Relaxed) {
            return None;
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.peek(&mut byte) {
            Ok(0) => return None,
            Ok(_) => return Some(byte[0]),
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A server connection for one client.
pub(super) fn accept(config: &Arc<ServerConfig>) -> io::Result<Box<ServerConnection>> {
    let mut tls = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
    // Answers are sealed whole before they are sent (see `seal`): no bound on the
    // plaintext taken at once.
    tls.set_buffer_limit(None);
    Ok(Box::new(tls))
}

/// Sends what the TLS layer has to send (handshake flights, alerts), all by `deadline`.
fn flush(stream: &mut TcpStream, tls: &mut ServerConnection, deadline: Instant) -> io::Result<()> {
    while tls.wants_write() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match tls.write_tls(stream) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One read from the socket, giving up at `deadline`: the handshake advances (its answer
/// sent at once) and any plaintext that arrived is appended to `buf`. `Data` also when
/// only the handshake advanced; an error in the handshake or a record sends its alert.
pub(super) fn fill(
    stream: &mut TcpStream,
    tls: &mut ServerConnection,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> io::Result<Read1> {
    flush(stream, tls, deadline)?;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Ok(Read1::TimedOut);
    }
    stream.set_read_timeout(Some(left))?;
    match tls.read_tls(stream) {
        Ok(0) => return Ok(Read1::Closed),
        Ok(_) => {}
        Err(e) if is_timeout(&e) => return Ok(Read1::TimedOut),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Read1::Data),
        Err(e) => return Err(e),
    }
    let state = match tls.process_new_packets() {
        Ok(state) => state,
        Err(e) => {
            let _ = flush(stream, tls, deadline);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    };
    let plain = state.plaintext_bytes_to_read();
    if plain > 0 {
        let start = buf.len();
        buf.resize(start + plain, 0);
        tls.reader().read_exact(&mut buf[start..])?;
    }
    flush(stream, tls, deadline)?;
    if plain == 0 && state.peer_has_closed() {
        return Ok(Read1::Closed);
    }
    Ok(Read1::Data)
}

/// What [`handshake`] says of a client that did not finish it in time.
pub(super) const TIMED_OUT: &str = "timed out";

/// Completes the handshake by `deadline`; `Err` says why it did not (failed, timed out, the
/// client left): the connection is then only to be dropped, there is no channel to answer on.
pub(super) fn handshake(
    stream: &mut TcpStream,
    tls: &mut ServerConnection,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(), &'static str> {
    while tls.is_handshaking() {
        match fill(stream, tls, buf, deadline) {
            Ok(Read1::Data) => {}
            Ok(Read1::TimedOut) => return Err(TIMED_OUT),
            Ok(Read1::Closed) => return Err("closed by the client"),
            Err(_) => return Err("failed"),
        }
    }
    Ok(())
}

/// `parts` as the TLS records that carry them, followed by a close_notify when `close`.
pub(super) fn seal(
    tls: &mut ServerConnection,
    parts: &[&[u8]],
    close: bool,
) -> io::Result<Vec<u8>> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    // Each record of up to 16 KiB adds a header, a content type and a tag (22 bytes).
    let mut out = Vec::with_capacity(len + len / 16_384 * 32 + 64);
    for part in parts {
        tls.writer().write_all(part)?;
    }
    if close {
        tls.send_close_notify();
    }
    while tls.wants_write() {
        tls.write_tls(&mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    /// A connected pair: what the client end sent, as the server end sees it.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().unwrap().0)
    }

    #[test]
    fn the_first_byte_tells_tls_from_plain_http_and_stays_in_the_socket() {
        let stopping = AtomicBool::new(false);
        let soon = || Instant::now() + Duration::from_secs(5);
        let (mut client, server) = pair();
        client.write_all(&[HANDSHAKE_RECORD, 3, 1]).unwrap();
        assert_eq!(
            peek_first(&server, soon(), &stopping),
            Some(HANDSHAKE_RECORD)
        );
        let mut all = [0u8; 3];
        (&server).read_exact(&mut all).unwrap();
        assert_eq!(
            all,
            [HANDSHAKE_RECORD, 3, 1],
            "the peeked byte is still there"
        );

        let (mut client, server) = pair();
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        assert_eq!(peek_first(&server, soon(), &stopping), Some(b'G'));

        let (client, server) = pair();
        drop(client);
        assert_eq!(peek_first(&server, soon(), &stopping), None);
    }

    #[test]
    fn a_silent_client_gives_nothing_by_the_deadline_nor_while_stopping() {
        let (_client, server) = pair();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        assert_eq!(peek_first(&server, deadline, &AtomicBool::new(false)), None);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(2),
            "{took:?}"
        );
        let far = Instant::now() + Duration::from_secs(30);
        let started = Instant::now();
        assert_eq!(peek_first(&server, far, &AtomicBool::new(true)), None);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
