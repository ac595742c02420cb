//! The ZooKeeper client wire protocol (jute encoding), limited to what the store uses:
//! connect (with session resumption), digest authentication, ping, create, delete, getData,
//! getACL, setACL, getChildren, multi (create/setData/delete/check) and close.
//!
//! Why our own: the one synchronous Rust client on crates.io (`zookeeper` 0.8) builds on mio
//! 0.6 and bytes 0.5 and has not been released since 2020; the maintained ones need an async
//! runtime, which the design card rules out. This is a few hundred lines of framing.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

pub mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const GET_DATA: i32 = 4;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const SET_DATA: i32 = 5;
    pub const GET_CHILDREN: i32 = 8;
    pub const PING: i32 = 11;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CLOSE: i32 = -11;
    /// `addauth`: the connection's credentials (answered under [`super::AUTH_XID`]).
    pub const AUTH: i32 = 100;
}

/// ZooKeeper error codes we act on (`KeeperException.Code`).
pub mod code {
    pub const OK: i32 = 0;
    pub const NO_NODE: i32 = -101;
    pub const BAD_VERSION: i32 = -103;
    pub const NODE_EXISTS: i32 = -110;
    pub const NOT_EMPTY: i32 = -111;
    pub const SESSION_EXPIRED: i32 = -112;
    pub const NO_AUTH: i32 = -102;
    pub const AUTH_FAILED: i32 = -115;
}

pub fn code_name(c: i32) -> &'static str {
    match c {
        code::NO_NODE => "no such node",
        code::BAD_VERSION => "version mismatch",
        code::NODE_EXISTS => "node exists",
        code::NOT_EMPTY => "node has children",
        code::SESSION_EXPIRED => "session expired",
        -4 => "connection loss",
        -7 => "operation timeout",
        code::NO_AUTH => "not allowed by the znode's ACL",
        code::AUTH_FAILED => "authentication failed",
        -114 => "invalid ACL",
        _ => "error",
    }
}

pub const EPHEMERAL: i32 = 1;

/// ACL permission bits.
pub mod perms {
    pub const READ: i32 = 1;
    pub const CREATE: i32 = 4;
    pub const ALL: i32 = 31;
}
const PING_XID: i32 = -2;
pub const AUTH_XID: i32 = -4;
const WATCH_XID: i32 = -1;
/// Largest reply we accept (a znode holds at most about 1 MB; getChildren of 10,000 nodes
/// is well under this).
const MAX_FRAME: usize = 16 << 20;

#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn int(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn long(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn boolean(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }
    pub fn buf(&mut self, v: &[u8]) -> &mut Self {
        self.int(v.len() as i32);
        self.0.extend_from_slice(v);
        self
    }
    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buf(v.as_bytes())
    }
    /// The open ACL (world:anyone, all permissions): what a store without credentials
    /// creates (its records hold nothing secret), and what tests plant.
    pub fn open_acl(&mut self) -> &mut Self {
        self.int(1).int(perms::ALL).string("world").string("anyone")
    }

    /// `acl`: one entry per (permissions, scheme, id).
    pub fn acl(&mut self, acl: &[(i32, &str, &str)]) -> &mut Self {
        self.int(acl.len() as i32);
        for (perms, scheme, id) in acl {
            self.int(*perms).string(scheme).string(id);
        }
        self
    }
}

pub struct Dec<'a> {
    bytes: &'a [u8],
    at: usize,
}

fn short() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "ZooKeeper reply ends early")
}

impl<'a> Dec<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Dec { bytes, at: 0 }
    }
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self.at.checked_add(n).ok_or_else(short)?;
        let s = self.bytes.get(self.at..end).ok_or_else(short)?;
        self.at = end;
        Ok(s)
    }
    pub fn int(&mut self) -> io::Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn long(&mut self) -> io::Result<i64> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    pub fn boolean(&mut self) -> io::Result<bool> {
        Ok(self.take(1)?[0] != 0)
    }
    pub fn buf(&mut self) -> io::Result<Vec<u8>> {
        let n = self.int()?;
        if n < 0 {
            return Ok(Vec::new());
        }
        Ok(self.take(n as usize)?.to_vec())
    }
    pub fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.buf()?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "non-UTF-8 string"))
    }
    /// A `Stat`; we keep only the data version and the ephemeral owner.
    pub fn stat(&mut self) -> io::Result<Stat> {
        self.take(32)?; // czxid, mzxid, ctime, mtime
        let version = self.int()?;
        self.take(8)?; // cversion, aversion
        let owner = self.long()?;
        self.take(16)?; // dataLength, numChildren, pzxid
        Ok(Stat {
            version,
            ephemeral_owner: owner,
        })
    }
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub version: i32,
    pub ephemeral_owner: i64,
}

/// One connection to one server, carrying one session.
pub struct Conn {
    stream: TcpStream,
    xid: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    pub timeout_ms: i32,
}

/// A reply: its error code and body.
pub struct Reply {
    pub err: i32,
    pub body: Vec<u8>,
}

impl Conn {
    /// Connects to `host:port` and starts a session, or resumes `session` (id, password).
    /// `Ok(None)`: the server says the session to resume has expired.
    pub fn connect(
        addr: &str,
        timeout_ms: i32,
        session: Option<(i64, &[u8])>,
        io_timeout: Duration,
    ) -> io::Result<Option<Conn>> {
        let sock = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let stream = TcpStream::connect_timeout(&sock, io_timeout)?;
        stream.set_read_timeout(Some(io_timeout))?;
        stream.set_write_timeout(Some(io_timeout))?;
        stream.set_nodelay(true)?;
        let (id, pw) = session.unwrap_or((0, &[0u8; 16]));
        let mut e = Enc::default();
        e.int(0)
            .long(0)
            .int(timeout_ms)
            .long(id)
            .buf(pw)
            .boolean(false);
        let mut c = Conn {
            stream,
            xid: 0,
            session_id: 0,
            password: Vec::new(),
            timeout_ms: 0,
        };
        c.send_frame(&e.0)?;
        let frame = c.read_frame()?;
        let mut d = Dec::new(&frame);
        let _protocol = d.int()?;
        let negotiated = d.int()?;
        let sid = d.long()?;
        let pw = d.buf()?;
        if negotiated <= 0 || sid == 0 {
            return Ok(None);
        }
        c.session_id = sid;
        c.password = pw;
        c.timeout_ms = negotiated;
        Ok(Some(c))
    }

    fn send_frame(&mut self, body: &[u8]) -> io::Result<()> {
        let mut f = Vec::with_capacity(body.len() + 4);
        f.extend_from_slice(&(body.len() as i32).to_be_bytes());
        f.extend_from_slice(body);
        let sent = self.stream.write_all(&f);
        // An auth request's frame holds a password; zeroing every frame costs a memset.
        f.fill(0);
        sent
    }

    fn read_frame(&mut self) -> io::Result<Vec<u8>> {
        let mut len = [0; 4];
        self.stream.read_exact(&mut len)?;
        let n = i32::from_be_bytes(len);
        if n < 0 || n as usize > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ZooKeeper frame of {n} bytes"),
            ));
        }
        let mut f = vec![0; n as usize];
        self.stream.read_exact(&mut f)?;
        Ok(f)
    }

    /// Adds credentials to this connection (`addauth`): the answer's error code. The server
    /// closes the connection after a refusal.
    pub fn add_auth(&mut self, scheme: &str, auth: &[u8]) -> io::Result<i32> {
        let mut e = Enc::default();
        e.int(0).string(scheme).buf(auth);
        let reply = self.call(op::AUTH, &e.0);
        // Best effort, as `Secret`'s: the request's bytes held the password.
        e.0.fill(0);
        Ok(reply?.err)
    }

    /// Sends one request (`op` and its encoded body) and waits for its reply.
    pub fn call(&mut self, op: i32, body: &[u8]) -> io::Result<Reply> {
        let xid = match op {
            op::PING => PING_XID,
            op::AUTH => AUTH_XID,
            _ => {
                self.xid = self.xid.wrapping_add(1).max(1);
                self.xid
            }
        };
        let mut e = Enc::default();
        e.int(xid).int(op);
        e.0.extend_from_slice(body);
        let sent = self.send_frame(&e.0);
        if op == op::AUTH {
            e.0.fill(0);
        }
        sent?;
        loop {
            let frame = self.read_frame()?;
            let mut d = Dec::new(&frame);
            let got = d.int()?;
            let _zxid = d.long()?;
            let err = d.int()?;
            if got == WATCH_XID {
                continue; // we set no watches; ignore any
            }
            if got != xid {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("ZooKeeper reply for request {got}, expected {xid}"),
                ));
            }
            let at = d.at;
            return Ok(Reply {
                err,
                body: frame[at..].to_vec(),
            });
        }
    }
}
