//! The early secret check: an executor call with a missing, malformed or wrong bearer
//! secret, or for an executor the scheduler does not know, is answered before its body is
//! read or parsed (a wrong secret with a 1 MiB body costs a header's worth of work). A wrong
//! secret and an unknown executor get one answer ([`ApiError::refused`]): no caller learns
//! which executor ids exist.
//!
//! One thread owns the index of executor secrets. The dispatcher publishes every grant and
//! revocation on one channel ([`SecretUpdate`]), the REST workers ask on another; before
//! each answer the thread takes every update already sent, so a secret granted before its
//! launch left is known by the time the executor calls. No lock is shared. The dispatcher
//! remains the owner of the secrets and checks every call that passes here once more.

use super::http::{Gate, Request, Response};
use crate::contract::api::{self, Action};
use crate::scheduler::exchange::{ApiError, SecretUpdate};
use crate::secret::{Secret, Token};
use crossbeam_channel::{select, Receiver, Sender};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

/// A worker waits this long for the index; past it the call goes on to the dispatcher.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// What the index says of a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The secret matches (the dispatcher checks again).
    Pass,
    /// No such executor is known.
    Unknown,
    /// Known executor, other secret.
    Wrong,
}

struct Check {
    executor_id: String,
    presented: Secret,
    reply: Sender<Verdict>,
}

/// Index of executor id -> the SHA-256 of its secret, fed by `updates`. Both are held as
/// keyed hashes (SipHash under this process's random keys, which no caller can aim at or
/// read), not as copies (10,000 executors cost ~0.26 MB, not ~1.4 MB). This is the early
/// check only: the dispatcher compares the whole digest again. Two ids of one hash (odds ~3e-12 at
/// 10,000 executors) would only make one of them fail here; a wrong secret passing here
/// (odds 2^-64 a guess) is refused there.
#[derive(Default)]
struct Index {
    secrets: HashMap<u64, u64>,
    keys: RandomState,
}

impl Index {
    fn key(&self, executor_id: &str) -> u64 {
        self.keys.hash_one(executor_id)
    }

    /// The keyed hash of a secret's SHA-256; a separate domain from the ids'.
    fn digest(&self, digest: &Token) -> u64 {
        self.keys.hash_one(("secret", digest.digest()))
    }

    fn apply(&mut self, u: SecretUpdate) {
        match u {
            SecretUpdate::Known {
                executor_id,
                digest,
            } => {
                let (key, digest) = (self.key(&executor_id), self.digest(&digest));
                self.secrets.insert(key, digest);
            }
            SecretUpdate::Forget { executor_id } => {
                let key = self.key(&executor_id);
                self.secrets.remove(&key);
            }
        }
    }

    fn verdict(&self, executor_id: &str, presented: &Secret) -> Verdict {
        match self.secrets.get(&self.key(executor_id)) {
            None => Verdict::Unknown,
            // An empty stored secret would match an empty presented one: never accept it.
            Some(digest)
                if !presented.is_empty() && *digest == self.digest(&Token::new(presented)) =>
            {
                Verdict::Pass
            }
            Some(_) => Verdict::Wrong,
        }
    }
}

/// Starts the index thread; the returned gate asks it. The thread ends when the gate is
/// dropped (the server stopped).
pub fn start(updates: Receiver<SecretUpdate>) -> std::io::Result<Arc<Gate>> {
    let (checks_tx, checks) = crossbeam_channel::unbounded::<Check>();
    std::thread::Builder::new()
        .name("rest-secrets".into())
        .spawn(move || run(updates, checks))?;
    let gate = move |req: &Request| early_answer(req, &checks_tx);
    Ok(Arc::new(gate))
}

fn run(updates: Receiver<SecretUpdate>, checks: Receiver<Check>) {
    let mut index = Index::default();
    let mut feed = Some(updates);
    loop {
        let check = match &feed {
            Some(updates) => select! {
                recv(updates) -> u => {
                    match u {
                        Ok(u) => index.apply(u),
                        // The dispatcher ended: the index stays as it was.
                        Err(_) => feed = None,
                    }
                    continue;
                }
                recv(checks) -> c => c,
            },
            None => checks.recv(),
        };
        let Ok(check) = check else { return };
        // Every update sent before this check was asked goes first.
        if let Some(updates) = &feed {
            for u in updates.try_iter() {
                index.apply(u);
            }
        }
        let _ = check
            .reply
            .send(index.verdict(&check.executor_id, &check.presented));
    }
}

/// The answer for an executor call that must not go further, else `None`.
fn early_answer(req: &Request, checks: &Sender<Check>) -> Option<Response> {
    let (raw_id, action) = api::split_path(&req.path)?;
    // Unknown endpoints, wrong methods and malformed ids get the router's answer.
    let action = Action::from_segment(action)?;
    if !action.allowed_methods().contains(&req.method.as_str()) {
        return None;
    }
    let executor_id = super::http::percent_decode(raw_id)
        .ok()
        .filter(|id| !id.is_empty() && !id.contains('/'))?;
    let presented = match super::executor_api::bearer(req) {
        Ok(s) => s,
        Err(resp) => return Some(resp),
    };
    let (reply, verdict) = crossbeam_channel::bounded(1);
    let asked = checks.send(Check {
        executor_id: executor_id.clone(),
        presented,
        reply,
    });
    match asked
        .ok()
        .and_then(|()| verdict.recv_timeout(ANSWER_WITHIN).ok())?
    {
        Verdict::Pass => None,
        Verdict::Wrong | Verdict::Unknown => Some(super::executor_api::reply_response(
            crate::scheduler::exchange::ExecutorReply::Failed(ApiError::refused()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: &str, secret: &str) -> SecretUpdate {
        SecretUpdate::Known {
            executor_id: id.into(),
            digest: Token::from(secret),
        }
    }

    #[test]
    fn the_index_follows_grants_and_revocations() {
        let mut i = Index::default();
        i.apply(known("e1", "s1"));
        i.apply(known("e2", ""));
        assert_eq!(i.verdict("e1", &"s1".into()), Verdict::Pass);
        assert_eq!(i.verdict("e1", &"s2".into()), Verdict::Wrong);
        assert_eq!(i.verdict("e2", &"".into()), Verdict::Wrong);
        assert_eq!(i.verdict("e3", &"s1".into()), Verdict::Unknown);
        i.apply(SecretUpdate::Forget {
            executor_id: "e1".into(),
        });
        assert_eq!(i.verdict("e1", &"s1".into()), Verdict::Unknown);
    }

    #[test]
    fn a_grant_sent_before_a_check_is_seen_by_it() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let gate = start(rx).unwrap();
        let call = |id: &str, secret: &str| {
            let headers = vec![("authorization".into(), format!("Bearer {secret}"))];
            let path = format!("/api/v1/executors/{id}/phase");
            gate(&Request::new("POST", &path, headers, vec![]))
                .map(|r| (r.status, r.body.bytes().to_vec()))
        };
        for n in 0..200 {
            let id = format!("e{n}");
            tx.send(known(&id, "right")).unwrap();
            assert_eq!(call(&id, "right"), None, "{id}");
            assert_eq!(call(&id, "wrong").map(|r| r.0), Some(401));
        }
        // Unknown: the same answer as a wrong secret.
        assert_eq!(call("nobody", "right"), call("e1", "wrong"));
        // Not an executor call: not the gate's business.
        let other = Request::new("POST", "/api/state", vec![], vec![]);
        assert!(gate(&other).is_none());
    }
}
