//! The ZooKeeper store (`-store.type=zk`): one znode per record under a base path.
//!
//! ```text
//! <base>/state          root record (framework id, launch sequence): the fencing epoch
//! <base>/nodes/<agent>  one record per cluster node (znodes hold at most ~1 MB)
//! <base>/leader         ephemeral lock: the session of the scheduler that writes
//! <base>                its data version counts the locks ever made (see `lock.rs`)
//! ```
//!
//! Fencing: every write is a `multi` with the expected version of each znode it replaces and a
//! `check` (or versioned `setData`) of `<base>/state`. A scheduler that takes the lock bumps
//! that version at once, so a stale one (partitioned, its session expired) fails its next
//! write with a version mismatch: it logs why and exits non-zero rather than overwrite newer
//! state. Connection loss is survived by resuming the session on the next server of the
//! ensemble; a new session must take the lock again and find `<base>/state` unchanged.
//!
//! Credentials: with `zk://user:password@hosts/path` every connection authenticates
//! (`addauth digest`) and every znode this store creates gets ZooKeeper's CREATOR_ALL ACL
//! (scheme `auth`: all permissions for that user's digest id alone), so a client without
//! them can neither read nor change the state. Ancestors of the base path it creates also
//! let anyone read them and create beside it (other frameworks share `/storage-framework`).
//! Znodes an earlier start made without credentials get that ACL when a store with
//! credentials first loads them. Without credentials the znodes are open to every client of
//! the ensemble (said once at start).
//!
//! A batch larger than one request (ZooKeeper refuses requests over ~1 MB) is split; the part
//! with the root record goes first, so a crash between parts never leaves a node record whose
//! launch sequence the root does not cover (task ids stay unique). Nothing of a batch is
//! acted on before all parts are written.

mod lock;
mod records;
mod session;
pub mod wire;

use super::{RecordStore, StoreError, ROOT_KEY};
use crate::secret::{mask_uri_credentials, Secret};
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use wire::{op, Conn};

const SESSION_TIMEOUT_MS: i32 = 10_000;

/// `zk://[user:password@]h1:2181,h2:2181/path` -> hosts and base path (`default_path` when
/// none is given); the credentials are [`credentials`]'. Errors show the URI masked.
pub fn parse_uri(uri: &str, default_path: &str) -> Result<(Vec<String>, String), String> {
    let shown = mask_uri_credentials(uri);
    let rest = uri
        .strip_prefix("zk://")
        .ok_or_else(|| format!("{shown:?} is not a zk:// URI (e.g. zk://h1:2181,h2:2181/path)"))?;
    let (hosts, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
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
        return Err(format!("{shown:?} names no ZooKeeper server"));
    }
    let path = path.trim_end_matches('/');
    let path = if path.is_empty() { default_path } else { path };
    if !path.starts_with('/') || path.contains("//") {
        return Err(format!("{shown:?}: {path:?} is not a ZooKeeper path"));
    }
    credentials(uri)?;
    Ok((hosts, path.to_owned()))
}

/// The `user:password@` of a zk:// URI, as given ("" without): for a URI rebuilt from its
/// parts.
pub fn userinfo(uri: &str) -> &str {
    let rest = uri.strip_prefix("zk://").unwrap_or("");
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority.rfind('@').map_or("", |at| &rest[..=at])
}

/// Digest credentials of a `zk://user:password@...` URI.
#[derive(Clone)]
pub struct Credentials {
    user: String,
    /// `user:password`, as `addauth digest` sends it.
    auth: Secret,
}

/// The credentials of `uri`, if it has any; an error (the URI masked) when they are not
/// `user:password` with both given.
pub fn credentials(uri: &str) -> Result<Option<Credentials>, String> {
    let info = userinfo(uri);
    let Some(info) = info.strip_suffix('@') else {
        return Ok(None);
    };
    match info.split_once(':') {
        Some((user, password)) if !user.is_empty() && !password.is_empty() => {
            Ok(Some(Credentials {
                user: user.to_owned(),
                auth: Secret::new(info),
            }))
        }
        _ => Err(format!(
            "{:?}: ZooKeeper credentials are given as zk://user:password@host:port/path",
            mask_uri_credentials(uri)
        )),
    }
}

struct Session {
    conn: Option<Conn>,
    /// Sent on every new connection: ZooKeeper keeps credentials per connection.
    auth: Option<Credentials>,
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
    /// The ACL of every znode this store creates at or under `base`, and of its ancestors.
    acl: Vec<(i32, &'static str, String)>,
    ancestor_acl: Vec<(i32, &'static str, String)>,
    /// `user:***@` when the URI has credentials: what errors and logs show.
    shown_user: String,
    session: Arc<Mutex<Session>>,
    /// Key -> version of its znode, for compare-and-set.
    versions: HashMap<String, i32>,
    written: u64,
    pinger: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// Run once between deciding that the lock's holder is dead and deleting its lock (tests
    /// of two stealers).
    before_steal: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

fn escape(agent: &str) -> String {
    agent.replace('%', "%25").replace('/', "%2F")
}

fn unescape(name: &str) -> String {
    name.replace("%2F", "/").replace("%25", "%")
}

impl ZkStore {
    pub fn new(hosts: Vec<String>, base: String) -> ZkStore {
        let open = vec![(wire::perms::ALL, "world", "anyone".to_owned())];
        ZkStore {
            hosts,
            base,
            acl: open.clone(),
            ancestor_acl: open,
            shown_user: String::new(),
            session: Arc::new(Mutex::new(Session {
                conn: None,
                auth: None,
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
            before_steal: Mutex::new(None),
        }
    }

    /// The store of `zk://user:password@...`: authenticated, its znodes its own.
    pub fn with_credentials(mut self, credentials: Credentials) -> ZkStore {
        // Scheme `auth`: the server puts the connection's own digest id
        // (`user:base64(sha1(user:password))`) in the ACL: CREATOR_ALL.
        self.shown_user = format!("{}:***@", credentials.user);
        self.acl = vec![(wire::perms::ALL, "auth", String::new())];
        self.ancestor_acl = vec![
            (wire::perms::ALL, "auth", String::new()),
            (
                wire::perms::READ | wire::perms::CREATE,
                "world",
                "anyone".to_owned(),
            ),
        ];
        self.lock().auth = Some(credentials);
        self
    }

    /// Whether this store authenticates (its znodes are its own).
    pub fn has_credentials(&self) -> bool {
        !self.shown_user.is_empty()
    }

    fn acl_of(&self, path: &str) -> Vec<(i32, &str, &str)> {
        let acl = if path.len() < self.base.len() {
            &self.ancestor_acl
        } else {
            &self.acl
        };
        acl.iter().map(|(p, s, i)| (*p, *s, i.as_str())).collect()
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
        let hint = match (c, self.has_credentials()) {
            (wire::code::NO_AUTH, true) => {
                "; the credentials in the URI are not those the znodes were created with"
            }
            (wire::code::NO_AUTH, false) => {
                "; the znodes were created with credentials: give them as zk://user:password@..."
            }
            _ => "",
        };
        StoreError::Unsupported {
            what: format!(
                "{}: {what}: ZooKeeper error {c} ({}){hint}",
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

impl ZkStore {
    /// Runs `f` once, after this store has decided to take a dead holder's lock and before
    /// it deletes that lock: where another stealer can come between (tests).
    #[doc(hidden)]
    pub fn before_steal_for_test(&mut self, f: impl FnOnce() + Send + 'static) {
        *self.before_steal.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
    }

    fn run_before_steal(&self) {
        let hook = self
            .before_steal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(f) = hook {
            f();
        }
    }
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
        assert_eq!(userinfo("zk://u:p@h1:1/m"), "u:p@");
        assert_eq!(userinfo("zk://h1:1/a@b"), "");
        assert!(credentials("zk://h1:1/m").unwrap().is_none());
        for bad in ["zk://u@h1/m", "zk://:p@h1/m", "zk://u:@h1/m"] {
            let e = parse_uri(bad, d).expect_err(bad);
            assert!(e.contains("user:password@"), "{e}");
        }
        let e = parse_uri("zk://u:S3cret@", d).unwrap_err();
        assert!(e.contains("u:***@") && !e.contains("S3cret"), "{e}");
    }
}
