//! Plan long polls without a worker thread each. A REST worker that gets a plan request
//! with a wait sends it to the dispatcher with a tagged reply, hands the connection here
//! and serves others; this one thread holds every waiting connection (10,000 executors may
//! wait at once) and answers each when the dispatcher does, or at its deadline.

use super::http::{Body, Later, Response};
use super::{reply_response, Wait};
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

fn run(
    parks: Receiver<Park>,
    replies: Receiver<(u64, ExecutorReply)>,
    stop: Receiver<()>,
    count: Arc<AtomicUsize>,
    dispatcher_timeout: Duration,
) {
    let mut entries: HashMap<u64, Entry> = HashMap::new();
    let mut early: HashMap<u64, Vec<ExecutorReply>> = HashMap::new();
    // Deadlines, lazily deleted: an entry is expired only if its deadline is still this one.
    let mut deadlines: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let finish = |entries: &mut HashMap<u64, Entry>, id: u64, resp: &Response| {
        if let Some(e) = entries.remove(&id) {
            count.fetch_sub(1, Ordering::Relaxed);
            e.conn.answer(resp);
        }
    };
    loop {
        let timeout = deadlines
            .peek()
            .map(|Reverse((t, _))| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(3600));
        let mut got: Vec<(u64, ExecutorReply)> = Vec::new();
        select! {
            recv(parks) -> p => {
                let Ok(p) = p else { break };
                let deadline = Instant::now() + dispatcher_timeout;
                deadlines.push(Reverse((deadline, p.id)));
                entries.insert(p.id, Entry { conn: p.conn, deadline, wait: p.wait, parked: false });
                for r in early.remove(&p.id).unwrap_or_default() {
                    got.push((p.id, r));
                }
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
            match (entries.get_mut(&id), reply) {
                (None, reply) => {
                    if early.len() >= MAX_EARLY {
                        early.clear();
                    }
                    early.entry(id).or_default().push(reply);
                }
                (Some(e), ExecutorReply::Parked) => {
                    e.parked = true;
                    e.deadline = Instant::now() + e.wait;
                    deadlines.push(Reverse((e.deadline, id)));
                }
                (Some(_), reply) => finish(&mut entries, id, &reply_response(reply)),
            }
        }
        let now = Instant::now();
        while let Some(Reverse((t, id))) = deadlines.peek().copied() {
            if t > now {
                break;
            }
            deadlines.pop();
            let Some(e) = entries.get(&id).filter(|e| e.deadline == t) else {
                continue;
            };
            let resp = if e.parked {
                // The plan did not change within the wait.
                Response::new(304, "application/json", Body::Empty)
                    .with_header("Cache-Control", "no-store")
            } else {
                Wait::TimedOut(dispatcher_timeout).response()
            };
            finish(&mut entries, id, &resp);
        }
    }
    let ids: Vec<u64> = entries.keys().copied().collect();
    for id in ids {
        finish(&mut entries, id, &Wait::Stopping.response());
    }
}
