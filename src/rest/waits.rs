//! Plan long polls without a worker thread each. A REST worker that gets a plan request
//! with a wait sends it to the dispatcher with a tagged reply, hands the connection here
//! and serves others; this one thread holds every waiting connection (10,000 executors may
//! wait at once) and answers each when the dispatcher does, or at its deadline.

use super::executor_api::reply_response;
use super::http::{Later, Response};
use super::Wait;
use crate::scheduler::exchange::{ExecutorReply, ReplyTo};
use crossbeam_channel::{select, Receiver, Sender};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Replies that came before their connection (the dispatcher can be quicker than the
/// hand-over); far more than ever pile up at once.
const MAX_EARLY: usize = 65_536;

pub(super) struct Waits {
    parks: Sender<Park>,
    replies: Sender<(u64, ExecutorReply)>,
    next_id: AtomicU64,
    /// Waits in progress (the `/metrics` gauge and the limit); decremented here.
    pub(super) count: Arc<AtomicUsize>,
}

struct Park {
    id: u64,
    conn: Later,
    wait: Duration,
}

struct Entry {
    conn: Later,
    deadline: Instant,
    wait: Duration,
    /// The dispatcher holds the request until the plan changes.
    parked: bool,
}

impl Waits {
    /// Starts the waiter thread; it ends (answering every wait 503) when `stop` closes.
    pub(super) fn start(
        stop: Receiver<()>,
        dispatcher_timeout: Duration,
    ) -> std::io::Result<Arc<Waits>> {
        let (parks, parks_rx) = crossbeam_channel::unbounded();
        let (replies, replies_rx) = crossbeam_channel::unbounded();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        std::thread::Builder::new()
            .name("rest-waits".into())
            .spawn(move || run(parks_rx, replies_rx, stop, c, dispatcher_timeout))?;
        Ok(Arc::new(Waits {
            parks,
            replies,
            next_id: AtomicU64::new(1),
            count,
        }))
    }

    /// A new wait: its id and where the dispatcher answers it.
    pub(super) fn reply_to(&self) -> (u64, ReplyTo) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let to = self.replies.clone();
        (id, ReplyTo::Tagged { id, to })
    }

    /// Takes the connection of wait `id`; `wait` is how long the caller may wait for a
    /// change once the dispatcher has parked its request.
    pub(super) fn park(&self, id: u64, conn: Later, wait: Duration) {
        if let Err(e) = self.parks.send(Park { id, conn, wait }) {
            self.count.fetch_sub(1, Ordering::Relaxed);
            e.into_inner().conn.answer(&Wait::Stopping.response());
        }
    }
}

/// The waiter thread's state: every held connection and the replies that came before theirs.
struct Waiter {
    entries: HashMap<u64, Entry>,
    early: HashMap<u64, Vec<ExecutorReply>>,
    /// Deadlines, lazily deleted: an entry is expired only if its deadline is still this one.
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    count: Arc<AtomicUsize>,
    dispatcher_timeout: Duration,
}

fn run(
    parks: Receiver<Park>,
    replies: Receiver<(u64, ExecutorReply)>,
    stop: Receiver<()>,
    count: Arc<AtomicUsize>,
    dispatcher_timeout: Duration,
) {
    let mut w = Waiter {
        entries: HashMap::new(),
        early: HashMap::new(),
        deadlines: BinaryHeap::new(),
        count,
        dispatcher_timeout,
    };
    loop {
        let timeout = w
            .deadlines
            .peek()
            .map(|Reverse((t, _))| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(3600));
        let mut got: Vec<(u64, ExecutorReply)> = Vec::new();
        select! {
            recv(parks) -> p => {
                let Ok(p) = p else { break };
                got = w.hold(p);
            },
            recv(replies) -> r => {
                if let Ok(r) = r {
                    got.push(r);
                }
            },
            recv(stop) -> _ => break,
            default(timeout) => {},
        }
        for (id, reply) in got {
            w.on_reply(id, reply);
        }
        w.expire(Instant::now());
    }
    let ids: Vec<u64> = w.entries.keys().copied().collect();
    for id in ids {
        w.finish(id, &Wait::Stopping.response());
    }
}

impl Waiter {
    /// Holds a handed-over connection; gives back the replies that came before it.
    fn hold(&mut self, p: Park) -> Vec<(u64, ExecutorReply)> {
        let deadline = Instant::now() + self.dispatcher_timeout;
        self.deadlines.push(Reverse((deadline, p.id)));
        let entry = Entry {
            conn: p.conn,
            deadline,
            wait: p.wait,
            parked: false,
        };
        self.entries.insert(p.id, entry);
        let early = self.early.remove(&p.id).unwrap_or_default();
        early.into_iter().map(|r| (p.id, r)).collect()
    }

    fn on_reply(&mut self, id: u64, reply: ExecutorReply) {
        match (self.entries.get_mut(&id), reply) {
            (None, reply) => {
                if self.early.len() >= MAX_EARLY {
                    self.early.clear();
                }
                self.early.entry(id).or_default().push(reply);
            }
            (Some(e), ExecutorReply::Parked) => {
                e.parked = true;
                e.deadline = Instant::now() + e.wait;
                self.deadlines.push(Reverse((e.deadline, id)));
            }
            (Some(_), reply) => self.finish(id, &reply_response(reply)),
        }
    }

    /// Answers every wait whose deadline has passed.
    fn expire(&mut self, now: Instant) {
        while let Some(Reverse((t, id))) = self.deadlines.peek().copied() {
            if t > now {
                break;
            }
            self.deadlines.pop();
            let Some(e) = self.entries.get(&id).filter(|e| e.deadline == t) else {
                continue;
            };
            let resp = if e.parked {
                // The plan did not change within the wait.
                reply_response(ExecutorReply::Unchanged)
            } else {
                Wait::TimedOut(self.dispatcher_timeout).response()
            };
            self.finish(id, &resp);
        }
    }

    fn finish(&mut self, id: u64, resp: &Response) {
        if let Some(e) = self.entries.remove(&id) {
            self.count.fetch_sub(1, Ordering::Relaxed);
            e.conn.answer(resp);
        }
    }
}
