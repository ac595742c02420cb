//! The leader lock: an ephemeral znode naming the scheduler process that writes, taken
//! again (with the state checked unchanged) whenever a new session starts.

use super::wire::{self, code, op, Enc};
use super::{Session, ZkStore, SESSION_TIMEOUT_MS};
use crate::store::{RecordStore, StoreError};
use std::time::{Duration, Instant};

impl ZkStore {
    /// Takes the leader lock: waits while another live session holds it (a scheduler
    /// restarted after SIGKILL waits for its old session to expire), fails after that.
    pub(super) fn take_lock(&self, s: &mut Session, wait: bool) -> Result<(), StoreError> {
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
