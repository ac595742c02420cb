//! The leader lock: an ephemeral znode naming the scheduler process that writes, taken
//! again (with the state checked unchanged) whenever a new session starts.
//!
//! A scheduler killed on this host leaves its lock until its session expires; a new one takes
//! it at once when the holder is provably gone: same host, same boot, same PID namespace, and
//! its pid no longer runs the process that took the lock. A pid not visible here proves
//! nothing about a holder in another PID namespace (a container) or on another boot.
//!
//! Two stealers must not both win, and a lock's own version cannot tell them apart (a
//! re-created lock starts at version 0 again). So every lock is created together with a
//! write to `<base>`, whose data version thereby counts the locks ever made, and a steal is a
//! `multi` of a check of that count, as read before the holder, and the delete.

use super::wire::{self, code, op, Dec, Enc};
use super::{Session, ZkStore, SESSION_TIMEOUT_MS};
use crate::store::{RecordStore, StoreError};
use std::time::{Duration, Instant};

impl ZkStore {
    /// Takes the leader lock: waits while another live session holds it (a scheduler
    /// restarted after SIGKILL waits for its old session to expire), fails after that.
    pub(super) fn take_lock(&self, s: &mut Session, wait: bool) -> Result<(), StoreError> {
        self.ensure_path(s, &self.base)?;
        let lock = format!("{}/leader", self.base);
        let me = Owner::me();
        let deadline = Instant::now() + Duration::from_millis(2 * SESSION_TIMEOUT_MS as u64);
        loop {
            // Read before the holder: a lock made after this read changes it.
            let generation = self.generation(s)?;
            match self.create_lock(s, &lock, me.to_string().as_bytes())? {
                code::OK => {
                    s.leader = true;
                    return Ok(());
                }
                code::NODE_EXISTS => {}
                c => return Err(self.zk_err("take the leader lock", c)),
            }
            let holder = self.get(s, &lock)?;
            let text = holder
                .as_ref()
                .map(|(d, _)| String::from_utf8_lossy(d).into_owned());
            if let Some(text) = &text {
                if wait && Owner::parse(text).is_some_and(|o| o.is_dead_here(&me)) {
                    self.run_before_steal();
                    if self.steal(s, &lock, generation)? {
                        log::warn!(
                            "{}: the lock holder ({text}) is no longer running; took its lock",
                            self.describe()
                        );
                    }
                    continue;
                }
            }
            if !wait || Instant::now() >= deadline {
                return Err(self.fenced(
                    s,
                    format!(
                        "another scheduler ({}) holds {lock}; refusing to write beside it",
                        text.unwrap_or_default()
                    ),
                ));
            }
            log::info!(
                "{}: waiting for the leader lock held by another session",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The data version of `<base>`: how many locks were made under it.
    fn generation(&self, s: &mut Session) -> Result<i32, StoreError> {
        let mut e = Enc::default();
        e.string(&self.base).boolean(false);
        let r = self.call(s, op::GET_DATA, &e.0)?;
        if r.err != code::OK {
            return Err(self.zk_err(&format!("get {}", self.base), r.err));
        }
        let mut d = Dec::new(&r.body);
        d.buf()
            .and_then(|_| d.stat())
            .map(|stat| stat.version)
            .map_err(|e| self.io_err("read", e))
    }

    /// Creates the ephemeral lock and counts it in `<base>`'s version, in one `multi`.
    fn create_lock(&self, s: &mut Session, lock: &str, data: &[u8]) -> Result<i32, StoreError> {
        let mut create = Enc::default();
        create
            .string(lock)
            .buf(data)
            .acl(&self.acl_of(lock))
            .int(wire::EPHEMERAL);
        let mut count = Enc::default();
        count.string(&self.base).buf(b"").int(-1);
        self.multi_code(s, &[(op::CREATE, create.0), (op::SET_DATA, count.0)])
    }

    /// Deletes the lock only if no lock was made since `generation` was read; false when
    /// another stealer (or the holder's expiry and a new lock) came first.
    fn steal(&self, s: &mut Session, lock: &str, generation: i32) -> Result<bool, StoreError> {
        let mut check = Enc::default();
        check.string(&self.base).int(generation);
        let mut delete = Enc::default();
        delete.string(lock).int(-1);
        match self.multi_code(s, &[(op::CHECK, check.0), (op::DELETE, delete.0)])? {
            code::OK => Ok(true),
            code::BAD_VERSION | code::NO_NODE => {
                log::info!(
                    "{}: another scheduler changed the leader lock first",
                    self.describe()
                );
                Ok(false)
            }
            c => Err(self.zk_err("take a dead holder's lock", c)),
        }
    }

    /// A `multi` whose outcome is one code: OK, or the first failing operation's.
    fn multi_code(&self, s: &mut Session, ops: &[(i32, Vec<u8>)]) -> Result<i32, StoreError> {
        let mut e = Enc::default();
        for (t, body) in ops {
            e.int(*t).boolean(false).int(-1);
            e.0.extend_from_slice(body);
        }
        e.int(-1).boolean(true).int(-1);
        let r = self.call(s, op::MULTI, &e.0)?;
        if r.err != code::OK {
            return Ok(r.err);
        }
        // A failed multi answers one error result per operation: OK before the failing one,
        // its code, then "runtime inconsistency" after it.
        let mut d = Dec::new(&r.body);
        let bad = |e| self.io_err("read a multi reply from", e);
        loop {
            let t = d.int().map_err(bad)?;
            let done = d.boolean().map_err(bad)?;
            let _err = d.int().map_err(bad)?;
            match (done, t) {
                (true, _) => return Ok(code::OK),
                (false, -1) => match d.int().map_err(bad)? {
                    code::OK => {}
                    c => return Ok(c),
                },
                (false, op::CREATE) => {
                    d.string().map_err(bad)?;
                }
                (false, op::SET_DATA) => {
                    d.stat().map_err(bad)?;
                }
                (false, _) => {}
            }
        }
    }

    /// After a new session: the lock again, and `<base>/state` still at our version.
    pub(super) fn retake(&self, s: &mut Session) -> Result<(), StoreError> {
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
}

/// Who holds the lock, as its data says:
/// `pid <n> started <ticks> on <host> boot <boot id> pidns <pid namespace>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: guards against a reused pid.
    started: String,
    host: String,
    boot: String,
    pid_ns: String,
}

impl Owner {
    fn me() -> Owner {
        let pid = std::process::id();
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|h| h.trim().to_owned())
                .unwrap_or_default()
        };
        Owner {
            pid,
            started: process_start(pid).unwrap_or_default(),
            host: read("/proc/sys/kernel/hostname"),
            boot: read("/proc/sys/kernel/random/boot_id"),
            pid_ns: std::fs::read_link("/proc/self/ns/pid")
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// `None` for anything else, the shorter form of earlier builds included: a holder that
    /// did not say where it runs is never taken for dead.
    fn parse(text: &str) -> Option<Owner> {
        let parts: Vec<&str> = text.split_whitespace().collect();
        let ["pid", pid, "started", started, "on", host, "boot", boot, "pidns", pid_ns] = parts[..]
        else {
            return None;
        };
        Some(Owner {
            pid: pid.parse().ok()?,
            started: started.to_owned(),
            host: host.to_owned(),
            boot: boot.to_owned(),
            pid_ns: pid_ns.to_owned(),
        })
    }

    /// Dead only when it ran where we run (host, boot, PID namespace: what we cannot read
    /// ourselves never matches) and its process is gone.
    fn is_dead_here(&self, me: &Owner) -> bool {
        let known = !me.host.is_empty() && !me.boot.is_empty() && !me.pid_ns.is_empty();
        let here = self.host == me.host && self.boot == me.boot && self.pid_ns == me.pid_ns;
        known && here && process_start(self.pid).as_deref() != Some(self.started.as_str())
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} started {} on {} boot {} pidns {}",
            self.pid, self.started, self.host, self.boot, self.pid_ns
        )
    }
}

fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the parenthesised command name.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Owner {
        Owner {
            pid: 1,
            started: "5".into(),
            host: "h".into(),
            boot: "b".into(),
            pid_ns: "pid:[4026531836]".into(),
        }
    }

    #[test]
    fn owner_round_trips_and_earlier_forms_are_not_understood() {
        let o = me();
        assert_eq!(Owner::parse(&o.to_string()), Some(o));
        assert_eq!(Owner::parse("pid 7 started 9 on h"), None);
        assert_eq!(Owner::parse("pid x started 9 on h boot b pidns n"), None);
    }

    #[test]
    fn only_a_holder_that_ran_where_we_run_can_be_dead() {
        // No process has pid 0, so the holder's process is gone wherever it is ours.
        let gone = Owner { pid: 0, ..me() };
        assert!(gone.is_dead_here(&me()));
        for other in [
            Owner {
                host: "g".into(),
                ..gone.clone()
            },
            Owner {
                boot: "c".into(),
                ..gone.clone()
            },
            Owner {
                pid_ns: "pid:[1]".into(),
                ..gone.clone()
            },
        ] {
            assert!(!other.is_dead_here(&me()), "{other}");
        }
        let unknown = Owner {
            boot: String::new(),
            ..me()
        };
        assert!(!Owner {
            boot: String::new(),
            ..gone.clone()
        }
        .is_dead_here(&unknown));
        // Alive: our own process, with its real start time.
        let alive = Owner::me();
        assert!(!alive.is_dead_here(&Owner::me()));
    }
}
