//! The ZooKeeper session: connecting (and resuming) across the ensemble, one request at a
//! time on the live connection, the basic znode requests, and the pinger that keeps the
//! session alive while the store is idle.

use super::wire::{self, code, op, Conn, Dec, Enc};
use super::{Session, ZkStore, SESSION_TIMEOUT_MS};
use crate::store::{RecordStore, StoreError};
use std::io;
use std::time::Duration;

const IO_TIMEOUT: Duration = Duration::from_secs(3);

impl ZkStore {
    /// One request on a live connection, reconnecting (resuming the session) across the
    /// ensemble first if needed.
    pub(super) fn call(
        &self,
        s: &mut Session,
        o: i32,
        body: &[u8],
    ) -> Result<wire::Reply, StoreError> {
        if let Some(why) = &s.fenced {
            return Err(StoreError::Fenced { why: why.clone() });
        }
        connect(&self.hosts, &self.base, s).map_err(|e| self.connect_err(e))?;
        if !s.leader && s.epoch.is_some() {
            // A new session: the lock must be taken again and the state found as we left it.
            self.retake(s)?;
        }
        let conn = s.conn.as_mut().expect("connected above");
        match conn.call(o, body) {
            Ok(r) if r.err == code::SESSION_EXPIRED => {
                s.conn = None;
                s.leader = false;
                Err(self.zk_err("request", r.err))
            }
            Ok(r) => Ok(r),
            Err(e) => {
                s.conn = None;
                Err(self.io_err("talk to", e))
            }
        }
    }

    /// A failed connection; refused credentials are said as such.
    fn connect_err(&self, e: io::Error) -> StoreError {
        if e.kind() == io::ErrorKind::PermissionDenied {
            return StoreError::Unsupported {
                what: format!("{}: {e}", self.describe()),
            };
        }
        self.io_err("connect to", e)
    }

    pub(super) fn create(
        &self,
        s: &mut Session,
        path: &str,
        data: &[u8],
        flags: i32,
    ) -> Result<i32, StoreError> {
        let mut e = Enc::default();
        e.string(path).buf(data).acl(&self.acl_of(path)).int(flags);
        Ok(self.call(s, op::CREATE, &e.0)?.err)
    }

    pub(super) fn ensure_path(&self, s: &mut Session, path: &str) -> Result<(), StoreError> {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            let c = self.create(s, &at, b"", 0)?;
            if c != code::OK && c != code::NODE_EXISTS {
                return Err(self.zk_err(&format!("create {at}"), c));
            }
        }
        Ok(())
    }

    pub(super) fn get(
        &self,
        s: &mut Session,
        path: &str,
    ) -> Result<Option<(Vec<u8>, i32)>, StoreError> {
        let mut e = Enc::default();
        e.string(path).boolean(false);
        let r = self.call(s, op::GET_DATA, &e.0)?;
        match r.err {
            code::OK => {
                let mut d = Dec::new(&r.body);
                let data = d.buf().map_err(|e| self.io_err("read", e))?;
                let stat = d.stat().map_err(|e| self.io_err("read", e))?;
                Ok(Some((data, stat.version)))
            }
            code::NO_NODE => Ok(None),
            c => Err(self.zk_err(&format!("get {path}"), c)),
        }
    }

    pub(super) fn children(&self, s: &mut Session, path: &str) -> Result<Vec<String>, StoreError> {
        let mut e = Enc::default();
        e.string(path).boolean(false);
        let r = self.call(s, op::GET_CHILDREN, &e.0)?;
        match r.err {
            code::OK => {
                let mut d = Dec::new(&r.body);
                let n = d.int().map_err(|e| self.io_err("read", e))?;
                (0..n.max(0))
                    .map(|_| d.string().map_err(|e| self.io_err("read", e)))
                    .collect()
            }
            code::NO_NODE => Ok(Vec::new()),
            c => Err(self.zk_err(&format!("list {path}"), c)),
        }
    }

    /// With credentials, znodes an earlier start made without them (open to every client)
    /// get this store's ACL: the base's ACL says whether that is needed, once.
    pub(super) fn adopt_open_znodes(&self, s: &mut Session) -> Result<(), StoreError> {
        if !self.has_credentials() || !self.is_open(s, &self.base)? {
            return Ok(());
        }
        let nodes = format!("{}/nodes", self.base);
        let mut paths = vec![
            self.base.clone(),
            format!("{}/state", self.base),
            format!("{}/leader", self.base),
            nodes.clone(),
        ];
        let children = self.children(s, &nodes)?;
        paths.extend(children.into_iter().map(|n| format!("{nodes}/{n}")));
        for path in &paths {
            let mut e = Enc::default();
            e.string(path).acl(&self.acl_of(path)).int(-1);
            match self.call(s, op::SET_ACL, &e.0)?.err {
                code::OK | code::NO_NODE => {}
                c => return Err(self.zk_err(&format!("set the ACL of {path}"), c)),
            }
        }
        log::warn!(
            "{}: {} znodes made without credentials are now the credentials' alone",
            self.describe(),
            paths.len()
        );
        Ok(())
    }

    /// Whether `path`'s ACL lets every client in (`world:anyone`).
    fn is_open(&self, s: &mut Session, path: &str) -> Result<bool, StoreError> {
        let mut e = Enc::default();
        e.string(path);
        let r = self.call(s, op::GET_ACL, &e.0)?;
        if r.err != code::OK {
            return Err(self.zk_err(&format!("read the ACL of {path}"), r.err));
        }
        let mut d = Dec::new(&r.body);
        let read = |e| self.io_err("read", e);
        let n = d.int().map_err(read)?;
        for _ in 0..n.max(0) {
            let perms = d.int().map_err(read)?;
            let scheme = d.string().map_err(read)?;
            let _id = d.string().map_err(read)?;
            if scheme == "world" && perms != 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(super) fn start_pinger(&mut self) {
        if self.pinger.is_some() {
            return;
        }
        let session = self.session.clone();
        let stop = self.stop.clone();
        let hosts = self.hosts.clone();
        let base = self.base.clone();
        let spawned = std::thread::Builder::new()
            .name("zk-pinger".into())
            .spawn(move || {
                let every = Duration::from_millis(SESSION_TIMEOUT_MS as u64 / 3);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(every);
                    let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
                    if s.fenced.is_some() {
                        continue;
                    }
                    // Keep the session (and so the lock) alive while the dispatcher is idle;
                    // reconnect across the ensemble when a server goes away.
                    if s.conn.is_none() && connect(&hosts, &base, &mut s).is_err() {
                        continue;
                    }
                    if let Some(c) = s.conn.as_mut() {
                        if c.call(op::PING, &[]).is_err() {
                            s.conn = None;
                        }
                    }
                }
            });
        match spawned {
            Ok(h) => self.pinger = Some(h),
            Err(e) => log::warn!("cannot start the ZooKeeper pinger: {e}"),
        }
    }
}

/// Connects (resuming the session when there is one) to the next server that answers.
fn connect(hosts: &[String], base: &str, s: &mut Session) -> io::Result<()> {
    if s.conn.is_some() {
        return Ok(());
    }
    let mut last = io::Error::new(io::ErrorKind::NotConnected, "no server tried");
    // Twice round: an expired session is answered at once, then a new one is started.
    for _ in 0..2 * hosts.len() {
        let host = &hosts[s.next_host % hosts.len()];
        let resume = (s.id != 0).then_some((s.id, s.password.as_slice()));
        match Conn::connect(host, SESSION_TIMEOUT_MS, resume, IO_TIMEOUT) {
            Ok(Some(mut c)) => {
                authenticate(&mut c, s.auth.as_ref())?;
                if s.id != 0 && c.session_id != s.id {
                    s.leader = false;
                }
                s.id = c.session_id;
                s.password = c.password.clone();
                s.conn = Some(c);
                return Ok(());
            }
            Ok(None) => {
                last = io::Error::new(io::ErrorKind::NotConnected, "session expired");
                log::warn!(
                    "zookeeper {host}{base}: session 0x{:x} expired; starting a new one",
                    s.id
                );
                s.id = 0;
                s.leader = false;
                s.password.clear();
            }
            Err(e) => {
                log::warn!("zookeeper {host}: {e}");
                s.next_host = s.next_host.wrapping_add(1);
                last = e;
            }
        }
    }
    Err(last)
}

/// Sends the credentials on a new connection; a refusal is an error no other server changes.
fn authenticate(c: &mut Conn, auth: Option<&super::Credentials>) -> io::Result<()> {
    let Some(auth) = auth else { return Ok(()) };
    match c.add_auth("digest", auth.auth.expose().as_bytes())? {
        code::OK => Ok(()),
        err => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "ZooKeeper refused the credentials of the URI (error {err}, {})",
                wire::code_name(err)
            ),
        )),
    }
}
