//! Finishing connections off the workers and the long-poll thread: the rest of an answer a
//! slow reader has not taken yet, and the lingering read after an error that keeps the
//! close from resetting the connection before the client has read the error. One thread
//! holds them all and waits on them together (`poll(2)`), so neither a slow reader nor a
//! client that never closes holds anyone else up.

use crossbeam_channel::{Receiver, Sender};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// After an error that closes the connection, unread input is drained this long (or this
/// much) first.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 4 * 1024 * 1024;
/// New connections handed over wait at most this long for the thread to take them up.
const PICK_UP: Duration = Duration::from_millis(50);

struct Finish {
    stream: TcpStream,
    /// Still to send; then the write side is shut.
    unsent: Vec<u8>,
    sent: usize,
    deadline: Instant,
    /// After sending, read until the client closes or [`LINGER`] passes.
    linger: bool,
    drained: usize,
}

/// Hands connections to the closer thread; cheap to clone. The thread ends once every
/// handle is gone and what it holds is finished.
#[derive(Clone)]
pub struct Closer {
    tx: Sender<Finish>,
}

impl Closer {
    /// Holds at most `held` connections; past that a new one is closed at once.
    pub(super) fn start(held: usize) -> io::Result<Closer> {
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("rest-closer".into())
            .spawn(move || run(rx, held.max(1)))?;
        Ok(Closer { tx })
    }

    /// Sends `bytes` and closes, without blocking: what the client does not take now is
    /// sent by the closer thread until `deadline`.
    pub(super) fn send_and_close(&self, stream: TcpStream, bytes: Vec<u8>, deadline: Instant) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut f = Finish::new(stream, deadline, false);
        match write_some(&mut f.stream, &bytes) {
            Ok(n) if n == bytes.len() => {
                let _ = f.stream.shutdown(Shutdown::Write);
            }
            Ok(n) => {
                (f.unsent, f.sent) = (bytes, n);
                let _ = self.tx.send(f);
            }
            Err(_) => {}
        }
    }

    /// Closes after an error answer already sent: the client's unread input is drained for
    /// a moment first, by the closer thread.
    pub(super) fn linger(&self, stream: TcpStream) {
        let _ = stream.shutdown(Shutdown::Write);
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut f = Finish::new(stream, Instant::now() + LINGER, true);
        if f.drain() {
            let _ = self.tx.send(f);
        }
    }
}

/// Writes what the socket takes now.
fn write_some(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < bytes.len() {
        match stream.write(&bytes[n..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Finish {
    fn new(stream: TcpStream, deadline: Instant, linger: bool) -> Finish {
        Finish {
            stream,
            unsent: Vec::new(),
            sent: 0,
            deadline,
            linger,
            drained: 0,
        }
    }

    /// Reads what is there; `true` while the client has not closed.
    fn drain(&mut self) -> bool {
        let mut tmp = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => return false,
                Ok(n) => {
                    self.drained += n;
                    if self.drained >= LINGER_BYTES {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return e.kind() == io::ErrorKind::WouldBlock,
            }
        }
    }

    /// Progress once the socket is ready; `true` while there is more to do.
    fn progress(&mut self) -> bool {
        if self.sent < self.unsent.len() {
            match write_some(&mut self.stream, &self.unsent[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(_) => return false,
            }
            if self.sent < self.unsent.len() {
                return true;
            }
            self.unsent = Vec::new();
            let _ = self.stream.shutdown(Shutdown::Write);
            return self.linger;
        }
        self.drain()
    }

    fn events(&self) -> libc::c_short {
        if self.sent < self.unsent.len() {
            libc::POLLOUT
        } else {
            libc::POLLIN
        }
    }
}

fn run(rx: Receiver<Finish>, held: usize) {
    let mut all: Vec<Finish> = Vec::new();
    loop {
        if all.is_empty() {
            match rx.recv() {
                Ok(f) => all.push(f),
                Err(_) => return,
            }
        }
        for f in rx.try_iter() {
            // Dropped (closed) when too many are held already.
            if all.len() < held {
                all.push(f);
            }
        }
        let now = Instant::now();
        all.retain(|f| f.deadline > now);
        let Some(next) = all.iter().map(|f| f.deadline).min() else {
            continue;
        };
        let wait = next.saturating_duration_since(now).min(PICK_UP);
        let mut fds: Vec<libc::pollfd> = all
            .iter()
            .map(|f| libc::pollfd {
                fd: f.stream.as_raw_fd(),
                events: f.events(),
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a live, correctly sized array of pollfd for the whole call.
        let ready = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait.as_millis().max(1) as libc::c_int,
            )
        };
        if ready <= 0 {
            continue;
        }
        let mut i = 0;
        all.retain_mut(|f| {
            let r = fds[i].revents;
            i += 1;
            r == 0 || f.progress()
        });
    }
}
