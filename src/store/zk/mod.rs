//! The ZooKeeper store (`-store.type=zk`): one znode per record under a base path.
//!
//! ```text
//! <base>/state          root record (framework id, launch sequence): the fencing epoch
//! <base>/nodes/<agent>  one record per cluster node (znodes hold at most ~1 MB)
//! <base>/leader         ephemeral lock: the session of the scheduler that writes
//! ```
//!
//! Fencing: every write is a `multi` with the expected version of each znode it replaces and a
//! `check` (or versioned `setData`) of `<base>/state`. A scheduler that takes the lock bumps
//! that version at once, so a stale one (partitioned, its session expired) fails its next
//! write with a version mismatch: it logs why and exits non-zero rather than overwrite newer
//! state. Connection loss is survived by resuming the session on the next server of the
//! ensemble; a new session must take the lock again and find `<base>/state` unchanged.
//!
//! A batch larger than one request (ZooKeeper refuses requests over ~1 MB) is split; the part
//! with the root record goes first, so a crash between parts never leaves a node record whose
//! launch sequence the root does not cover (task ids stay unique). Nothing of a batch is
//! acted on before all parts are written.

pub mod wire;

use super::{node_key, Change, Loaded, RecordStore, StoreError, ROOT_KEY};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use wire::{code, op, Conn, Dec, Enc};

const SESSION_TIMEOUT_MS: i32 = 10_000;
const IO_TIMEOUT: Duration = Duration::from_secs(3);
/// Below ZooKeeper's default 1 MB request limit with room for headers.
const MAX_MULTI_BYTES: usize = 512 * 1024;

/// `zk://h1:2181,h2:2181/path` -> hosts and base path (`default_path` when none is given).
pub fn parse_uri(uri: &str, default_path: &str) -> Result<(Vec<String>, String), String> {
    let rest = uri
        .strip_prefix("zk://")
        .ok_or_else(|| format!("{uri:?} is not a zk:// URI (e.g. zk://h1:2181,h2:2181/path)"))?;
    let (hosts, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    // Credentials (`user:pass@`) in a Mesos zk URL are for digest auth, which we do not use.
    let hosts = hosts.rsplit('@').next().unwrap_or(hosts);
    let hosts: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| {
            if h.contains(':') {
                h.to_owned()
            } else {
                format!("{h}:2181")
            }
        })
        .collect();
    if hosts.is_empty() {
        return Err(format!("{uri:?} names no ZooKeeper server"));
    }
    let path = path.trim_end_matches('/');
    let path = if path.is_empty() { default_path } else { path };
    if !path.starts_with('/') || path.contains("//") {
        return Err(format!("{uri:?}: {path:?} is not a ZooKeeper path"));
    }
    Ok((hosts, path.to_owned()))
}

struct Session {
    conn: Option<Conn>,
    id: i64,
    password: Vec<u8>,
    next_host: usize,
    /// Set once this scheduler has lost the right to write; every later write fails.
    fenced: Option<String>,
    /// Version of `<base>/state` this scheduler last wrote or read (`None`: not created).
    epoch: Option<i32>,
    leader: bool,
}

pub struct ZkStore {
    hosts: Vec<String>,
    base: String,
    session: Arc<Mutex<Session>>,
    /// Key -> version of its znode, for compare-and-set.
    versions: HashMap<String, i32>,
    written: u64,
    pinger: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

fn escape(agent: &str) -> String {
    agent.replace('%', "%25").replace('/', "%2F")
}

fn unescape(name: &str) -> String {
    name.replace("%2F", "/").replace("%25", "%")
}

impl ZkStore {
    pub fn new(hosts: Vec<String>, base: String) -> ZkStore {
        ZkStore {
            hosts,
            base,
            session: Arc::new(Mutex::new(Session {
                conn: None,
                id: 0,
                password: Vec::new(),
                next_host: 0,
                fenced: None,
                epoch: None,
                leader: false,
            })),
            versions: HashMap::new(),
            written: 0,
            pinger: None,
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    fn path_of(&self, key: &str) -> String {
        if key == ROOT_KEY {
            format!("{}/state", self.base)
        } else if let Some(agent) = key.strip_prefix("node/") {
            format!("{}/nodes/{}", self.base, escape(agent))
        } else {
            format!("{}/other/{}", self.base, escape(key))
        }
    }

    fn lock(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn io_err(&self, action: &'static str, e: io::Error) -> StoreError {
        StoreError::Io {
            action,
            path: self.describe().into(),
            source: e,
        }
    }

    fn zk_err(&self, what: &str, c: i32) -> StoreError {
        StoreError::Unsupported {
            what: format!(
                "{}: {what}: ZooKeeper error {c} ({})",
                self.describe(),
                wire::code_name(c)
            ),
        }
    }

    fn fenced(&self, s: &mut Session, why: String) -> StoreError {
        let why = format!("{}: {why}", self.describe());
        s.fenced = Some(why.clone());
        StoreError::Fenced { why }
    }

    /// One request on a live connection, reconnecting (resuming the session) across the
    /// ensemble first if needed.
    fn call(&self, s: &mut Session, o: i32, body: &[u8]) -> Result<wire::Reply, StoreError> {
        if let Some(why) = &s.fenced {
            return Err(StoreError::Fenced { why: why.clone() });
        }
        connect(&self.hosts, &self.base, s).map_err(|e| self.io_err("connect to", e))?;
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

    fn create(
        &self,
        s: &mut Session,
        path: &str,
        data: &[u8],
        flags: i32,
    ) -> Result<i32, StoreError> {
        let mut e = Enc::default();
        e.string(path).buf(data).open_acl().int(flags);
        Ok(self.call(s, op::CREATE, &e.0)?.err)
    }

    fn ensure_path(&self, s: &mut Session, path: &str) -> Result<(), StoreError> {
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

    fn get(&self, s: &mut Session, path: &str) -> Result<Option<(Vec<u8>, i32)>, StoreError> {
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

    fn children(&self, s: &mut Session, path: &str) -> Result<Vec<String>, StoreError> {
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

    /// Takes the leader lock: waits while another live session holds it (a scheduler
    /// restarted after SIGKILL waits for its old session to expire), fails after that.
    fn take_lock(&self, s: &mut Session, wait: bool) -> Result<(), StoreError> {
        self.ensure_path(s, &self.base)?;
        let lock = format!("{}/leader", self.base);
        let me = lock_owner(std::process::id());
        let deadline = Instant::now() + Duration::from_millis(2 * SESSION_TIMEOUT_MS as u64);
        loop {
            match self.create(s, &lock, me.as_bytes(), wire::EPHEMERAL)? {
                code::OK => {
                    s.leader = true;
                    return Ok(());
                }
                code::NODE_EXISTS => {}
                c => return Err(self.zk_err("take the leader lock", c)),
            }
            let holder = self.get(s, &lock)?;
            if let Some((data, _)) = &holder {
                if wait && holder_is_dead_here(&String::from_utf8_lossy(data)) {
                    // A scheduler on this host that was killed: its session would hold the lock
                    // until it expires; its process is gone, so the lock is free now.
                    log::warn!(
                        "{}: the lock holder ({}) is no longer running; taking the lock",
                        self.describe(),
                        String::from_utf8_lossy(data)
                    );
                    let mut e = Enc::default();
                    e.string(&lock).int(-1);
                    self.call(s, op::DELETE, &e.0)?;
                    continue;
                }
            }
            if !wait || Instant::now() >= deadline {
                let who = holder
                    .map(|(d, _)| String::from_utf8_lossy(&d).into_owned())
                    .unwrap_or_default();
                return Err(self.fenced(
                    s,
                    format!("another scheduler ({who}) holds {lock}; refusing to write beside it"),
                ));
            }
            log::info!(
                "{}: waiting for the leader lock held by another session",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// After a new session: the lock again, and `<base>/state` still at our version.
    fn retake(&self, s: &mut Session) -> Result<(), StoreError> {
        let epoch = s.epoch;
        s.epoch = None; // avoid recursion through call()
        let result = (|| {
            // Someone else holding it now took over: no waiting.
            self.take_lock(s, false)?;
            let now = self
                .get(s, &format!("{}/state", self.base))?
                .map(|(_, v)| v);
            if now != epoch {
                return Err(self.fenced(
                    s,
                    format!(
                        "the stored state changed while this scheduler was away (version {:?}, expected {:?}): another scheduler wrote it",
                        now, epoch
                    ),
                ));
            }
            log::warn!(
                "{}: new ZooKeeper session; lock taken again, state unchanged",
                self.describe()
            );
            Ok(())
        })();
        s.epoch = epoch;
        result
    }

    fn start_pinger(&mut self) {
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

    fn multi(&mut self, s: &mut Session, ops: &[(i32, Vec<u8>, String)]) -> Result<(), StoreError> {
        let mut e = Enc::default();
        for (t, body, _) in ops {
            e.int(*t).boolean(false).int(-1);
            e.0.extend_from_slice(body);
        }
        e.int(-1).boolean(true).int(-1);
        let r = self.call(s, op::MULTI, &e.0)?;
        let mut d = Dec::new(&r.body);
        let mut results = Vec::new();
        let mut failed = None;
        let bad = |e| StoreError::Io {
            action: "read a multi reply from",
            path: self.describe().into(),
            source: e,
        };
        loop {
            let t = d.int().map_err(bad)?;
            let done = d.boolean().map_err(bad)?;
            let err = d.int().map_err(bad)?;
            if done {
                break;
            }
            match t {
                op::CREATE => {
                    d.string().map_err(bad)?;
                    results.push(Some(0));
                }
                op::SET_DATA => results.push(Some(d.stat().map_err(bad)?.version)),
                -1 => {
                    let code = d.int().map_err(bad)?;
                    if code != code::OK && failed.is_none() {
                        failed = Some((results.len(), code));
                    }
                    results.push(None);
                }
                _ => results.push(None),
            }
            let _ = err;
        }
        if let Some((i, c)) = failed.or((r.err != code::OK).then_some((0, r.err))) {
            let what = ops.get(i).map(|o| o.2.as_str()).unwrap_or("?");
            if matches!(c, code::BAD_VERSION | code::NODE_EXISTS | code::NO_NODE) {
                return Err(self.fenced(
                    s,
                    format!("{what} was changed by someone else ({}); another scheduler writes this state", wire::code_name(c)),
                ));
            }
            return Err(self.zk_err(&format!("write {what}"), c));
        }
        for ((t, _, key), v) in ops.iter().zip(results) {
            match (*t, v) {
                (op::DELETE, _) => {
                    self.versions.remove(key);
                }
                (_, Some(v)) if key == ROOT_KEY => {
                    s.epoch = Some(v);
                    self.versions.insert(key.clone(), v);
                }
                (_, Some(v)) => {
                    self.versions.insert(key.clone(), v);
                }
                _ => {}
            }
        }
        self.written += e.0.len() as u64;
        Ok(())
    }

    fn op_put(&self, key: &str, value: &[u8]) -> (i32, Vec<u8>, String) {
        let path = self.path_of(key);
        let mut e = Enc::default();
        match self.versions.get(key) {
            Some(v) => {
                e.string(&path).buf(value).int(*v);
                (op::SET_DATA, e.0, key.to_owned())
            }
            None => {
                e.string(&path).buf(value).open_acl().int(0);
                (op::CREATE, e.0, key.to_owned())
            }
        }
    }
}

impl ZkStore {
    /// Ends this store's session on the server while the store still believes it leads: what
    /// a partition longer than the session timeout does (tests of fencing).
    #[doc(hidden)]
    pub fn end_session_for_test(&mut self) {
        let mut s = self.lock();
        if let Some(c) = s.conn.as_mut() {
            let _ = c.call(op::CLOSE, &[]);
        }
        s.conn = None;
    }
}

/// `pid <n> started <ticks> on <host>`: enough to tell, on the same host, that the holder's
/// process is gone (the start time guards against a reused pid).
fn lock_owner(pid: u32) -> String {
    format!(
        "pid {pid} started {} on {}",
        process_start(pid).unwrap_or_default(),
        hostname()
    )
}

fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the parenthesised command name.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19).map(str::to_owned)
}

fn holder_is_dead_here(owner: &str) -> bool {
    let parts: Vec<&str> = owner.split_whitespace().collect();
    let ["pid", pid, "started", start, "on", host] = parts[..] else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == hostname() && process_start(pid).as_deref() != Some(start)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
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
            Ok(Some(c)) => {
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

impl Drop for ZkStore {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut s = self.lock();
        if let Some(c) = s.conn.as_mut() {
            // Ends the session at once: the lock is free for the next scheduler.
            let _ = c.call(op::CLOSE, &[]);
        }
        s.conn = None;
    }
}

impl RecordStore for ZkStore {
    fn load_all(&mut self) -> Result<Loaded, StoreError> {
        let session = self.session.clone();
        let mut guard = session.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if !s.leader {
            self.take_lock(s, true)?;
        }
        self.start_pinger();
        self.versions.clear();
        let root = self.get(s, &self.path_of(ROOT_KEY))?;
        let Some((root_bytes, root_version)) = root else {
            s.epoch = None;
            return Ok(Loaded::Empty);
        };
        // Take over: bump the epoch, so a stale leader's next write fails.
        let mut e = Enc::default();
        e.string(&self.path_of(ROOT_KEY))
            .buf(&root_bytes)
            .int(root_version);
        let r = self.call(s, op::SET_DATA, &e.0)?;
        if r.err != code::OK {
            return Err(self.fenced(
                s,
                format!("cannot take over the state ({})", wire::code_name(r.err)),
            ));
        }
        let v = Dec::new(&r.body)
            .stat()
            .map_err(|e| self.io_err("read", e))?
            .version;
        s.epoch = Some(v);
        self.versions.insert(ROOT_KEY.into(), v);
        let mut records = BTreeMap::new();
        records.insert(ROOT_KEY.to_owned(), root_bytes);
        let nodes = format!("{}/nodes", self.base);
        for name in self.children(s, &nodes)? {
            if let Some((data, v)) = self.get(s, &format!("{nodes}/{name}"))? {
                let key = node_key(&unescape(&name));
                self.versions.insert(key.clone(), v);
                records.insert(key, data);
            }
        }
        Ok(Loaded::Records(records))
    }

    fn apply(&mut self, batch: &[Change]) -> Result<(), StoreError> {
        let session = self.session.clone();
        let mut guard = session.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if !s.leader && s.epoch.is_none() && s.fenced.is_none() {
            self.take_lock(s, true)?;
            self.start_pinger();
        }
        if s.epoch.is_none() {
            self.ensure_path(s, &format!("{}/nodes", self.base))?;
        }
        // Root first (see the module docs), then nodes, in parts under the request limit.
        let mut ops = Vec::new();
        let root_put = batch
            .iter()
            .find(|c| matches!(c, Change::Put(k, _) if k == ROOT_KEY));
        match root_put {
            Some(Change::Put(k, v)) => ops.push(self.op_put(k, v)),
            _ => {
                let mut e = Enc::default();
                e.string(&self.path_of(ROOT_KEY)).int(s.epoch.unwrap_or(-1));
                ops.push((op::CHECK, e.0, ROOT_KEY.to_owned()));
            }
        }
        let mut size = ops[0].1.len();
        for c in batch {
            let o = match c {
                Change::Put(k, _) if k == ROOT_KEY => continue,
                Change::Put(k, v) => self.op_put(k, v),
                Change::Delete(k) => {
                    if !self.versions.contains_key(k) {
                        continue;
                    }
                    let mut e = Enc::default();
                    e.string(&self.path_of(k)).int(self.versions[k]);
                    (op::DELETE, e.0, k.clone())
                }
            };
            if size + o.1.len() > MAX_MULTI_BYTES && ops.len() > 1 {
                self.multi(s, &ops)?;
                ops.clear();
                let mut e = Enc::default();
                e.string(&self.path_of(ROOT_KEY)).int(s.epoch.unwrap_or(-1));
                ops.push((op::CHECK, e.0, ROOT_KEY.to_owned()));
                size = ops[0].1.len();
            }
            size += o.1.len();
            ops.push(o);
        }
        self.multi(s, &ops)
    }

    fn replace_all(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), StoreError> {
        let keep: std::collections::HashSet<&str> =
            records.iter().map(|(k, _)| k.as_str()).collect();
        let mut batch: Vec<Change> = self
            .versions
            .keys()
            .filter(|k| !keep.contains(k.as_str()))
            .map(|k| Change::Delete(k.clone()))
            .collect();
        batch.extend(
            records
                .iter()
                .map(|(k, v)| Change::Put(k.clone(), v.clone())),
        );
        if !records.iter().any(|(k, _)| k == ROOT_KEY) {
            // Nothing to hold the epoch: keep an empty-state root rather than none.
            return Err(StoreError::Unsupported {
                what: format!("{}: a replacement without a root record", self.describe()),
            });
        }
        self.apply(&batch)
    }

    fn destroy(&mut self) -> Result<(), StoreError> {
        let session = self.session.clone();
        let mut guard = session.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        if !s.leader {
            self.take_lock(s, true)?;
        }
        let nodes = format!("{}/nodes", self.base);
        let mut paths: Vec<String> = self
            .children(s, &nodes)?
            .into_iter()
            .map(|n| format!("{nodes}/{n}"))
            .collect();
        paths.push(nodes);
        paths.push(self.path_of(ROOT_KEY));
        for p in paths {
            let mut e = Enc::default();
            e.string(&p).int(-1);
            let c = self.call(s, op::DELETE, &e.0)?.err;
            if c != code::OK && c != code::NO_NODE {
                return Err(self.zk_err(&format!("delete {p}"), c));
            }
        }
        self.versions.clear();
        s.epoch = None;
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }

    fn describe(&self) -> String {
        format!("zookeeper zk://{}{}", self.hosts.join(","), self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse() {
        let d = "/storage-framework/x";
        assert_eq!(
            parse_uri("zk://h1:2181,h2/p/q", d).unwrap(),
            (vec!["h1:2181".into(), "h2:2181".into()], "/p/q".into())
        );
        assert_eq!(parse_uri("zk://h1:1", d).unwrap().1, d);
        assert_eq!(parse_uri("zk://u:p@h1:1/m", d).unwrap().0, vec!["h1:1"]);
        assert!(parse_uri("http://h", d).is_err());
        assert!(parse_uri("zk:///p", d).is_err());
        assert_eq!(unescape(&escape("a/b%c")), "a/b%c");
    }
}
