//! The last view the dispatcher gave, shared by every read for a short while.
//!
//! On a cluster being installed, executors report hundreds of times a second, and each report
//! makes a new view. Asked for afresh, every read of `/api/state`, `/api/nodes/<host>`, the
//! status page or `/metrics` waited in the dispatcher's queue behind those reports and their
//! saves, and then rendered a view no other read had rendered yet: with 32 clients and 500
//! reports a second on 1,000 nodes, a p99 of 46 ms. A view younger than `max_age` is served
//! as it is; one older is refreshed by one read while the others keep being served it, so
//! only that read waits, and it also makes `/api/state`'s answers for the new view ready before
//! the view is kept (`state.rs`, `StateCache::prepare`): no other read waits for that encoding
//! either. An operator's write forgets the view: the writer's next read is made after its write.
//!
//! A kept view keeps the model's nodes of its moment alive, and the dispatcher's next write to
//! each of them copies it (`model/revision.rs`): a health poll, which writes every node, held
//! the model twice while a view was kept, and the allocator keeps what it was given. So the
//! sweeper thread drops the view once it is `max_age` old, or as soon as no read asked for it
//! for `idle`: reads now and then (a scrape, a status page) keep it about as briefly as their
//! own render did, a busy API keeps it for its whole `max_age`.

use crate::scheduler::exchange::View;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(super) struct ViewCache {
    max_age: Duration,
    /// A view no read asked for this long is let go.
    idle: Duration,
    state: Mutex<State>,
    /// A view was kept: the sweeper's cue.
    kept_one: Option<Sender<()>>,
}

#[derive(Default)]
struct State {
    kept: Option<Kept>,
    /// A read is asking the dispatcher for a newer view.
    refreshing: bool,
    /// Bumped by `forget`: a refresh asked for before a write does not keep its view.
    epoch: u64,
}

struct Kept {
    /// When the view was asked for (it is at least this fresh).
    asked: Instant,
    /// When a read was last served it.
    read: Instant,
    view: Arc<View>,
}

impl ViewCache {
    /// A cache keeping views up to `max_age` (zero: none, every read asks the dispatcher),
    /// each while reads keep coming within a tenth of that; its sweeper thread ends when the
    /// cache is dropped.
    pub(super) fn start(max_age: Duration) -> std::io::Result<Arc<ViewCache>> {
        let idle = max_age / 10;
        if max_age.is_zero() {
            return Ok(Arc::new(ViewCache::new(max_age, idle, None)));
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let cache = Arc::new(ViewCache::new(max_age, idle, Some(tx)));
        let weak = Arc::downgrade(&cache);
        std::thread::Builder::new()
            .name("rest-view-sweep".into())
            .spawn(move || sweep(&rx, |now| weak.upgrade().map(|c| c.expire(now))))?;
        Ok(cache)
    }

    fn new(max_age: Duration, idle: Duration, kept_one: Option<Sender<()>>) -> ViewCache {
        ViewCache {
            max_age,
            idle,
            state: Mutex::new(State::default()),
            kept_one,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept view while it is fresh, or while another read refreshes it; else a view
    /// from `ask` (the dispatcher), kept for the next reads.
    pub(super) fn get<E>(
        &self,
        ask: impl FnOnce() -> Result<Arc<View>, E>,
    ) -> Result<Arc<View>, E> {
        if self.max_age.is_zero() {
            return ask();
        }
        let (refresh, epoch) = {
            let mut state = self.state();
            let now = Instant::now();
            let fresh = |k: &Kept| now.duration_since(k.asked) < self.max_age;
            let State {
                kept, refreshing, ..
            } = &mut *state;
            let refresh = match kept {
                // Fresh, or another read refreshes it: served as it is.
                Some(k) if fresh(k) || *refreshing => {
                    k.read = now;
                    return Ok(k.view.clone());
                }
                // This read refreshes it.
                Some(_) => true,
                // None kept: every read asks, none waits for another.
                None => !*refreshing,
            };
            *refreshing |= refresh;
            (refresh, state.epoch)
        };
        let asked = Instant::now();
        let got = ask();
        let mut state = self.state();
        if refresh {
            state.refreshing = false;
        }
        if let Ok(view) = &got {
            self.keep(&mut state, epoch, asked, view);
        }
        got
    }

    fn keep(&self, state: &mut State, epoch: u64, asked: Instant, view: &Arc<View>) {
        // Asked for before a write, or answered out of order (the one asked for last stays).
        if state.epoch != epoch || state.kept.as_ref().is_some_and(|k| k.asked > asked) {
            return;
        }
        state.kept = Some(Kept {
            asked,
            read: Instant::now(),
            view: view.clone(),
        });
        if let Some(s) = &self.kept_one {
            let _ = s.send(());
        }
    }

    /// Drops the kept view: the next read asks the dispatcher (after an operator's write).
    pub(super) fn forget(&self) {
        let mut state = self.state();
        state.epoch += 1;
        state.kept = None;
    }

    /// Drops the kept view if at `now` it is `max_age` old or was not read for `idle`; else
    /// when to look again.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let mut state = self.state();
        let k = state.kept.as_ref()?;
        let old = k.asked + self.max_age;
        let unread = k.read + self.idle;
        if now >= old || now >= unread {
            state.kept = None;
            return None;
        }
        Some(old.min(unread))
    }
}

/// Until the cache is gone: after each view kept, and then at each time `expire` names,
/// calls `expire` (which answers `None` once the cache is gone, as when nothing is kept).
fn sweep(kept_one: &Receiver<()>, expire: impl Fn(Instant) -> Option<Option<Instant>>) {
    let mut due: Option<Instant> = None;
    loop {
        let woke = match due {
            Some(at) => kept_one.recv_deadline(at),
            None => kept_one.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        if let Err(RecvTimeoutError::Disconnected) = woke {
            return;
        }
        match expire(Instant::now()) {
            Some(next) => due = next,
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::ClusterModel;
    use std::cell::Cell;

    const AGE: Duration = Duration::from_secs(60);

    fn view(generation: u64) -> Arc<View> {
        Arc::new(View::of(ClusterModel::default(), generation))
    }

    /// `cache.get` answered by a dispatcher that counts its calls and answers `generation`.
    fn read(cache: &ViewCache, asked: &Cell<u32>, generation: u64) -> u64 {
        let got: Result<_, ()> = cache.get(|| {
            asked.set(asked.get() + 1);
            Ok(view(generation))
        });
        got.unwrap().generation
    }

    /// Makes the kept view `AGE` old, as if asked for that long ago.
    fn age(cache: &ViewCache) {
        let mut state = cache.state();
        let k = state.kept.as_mut().expect("a kept view");
        k.asked = Instant::now().checked_sub(AGE).expect("a clock past AGE");
    }

    /// As if a read was served the kept view at `at`.
    fn read_at(cache: &ViewCache, at: Instant) {
        cache.state().kept.as_mut().expect("a kept view").read = at;
    }

    #[test]
    fn a_fresh_view_is_served_without_asking_and_an_old_one_is_asked_for_again() {
        let cache = ViewCache::new(AGE, AGE, None);
        let asked = Cell::new(0);
        assert_eq!(read(&cache, &asked, 1), 1);
        assert_eq!(read(&cache, &asked, 2), 1, "served the kept view");
        assert_eq!(asked.get(), 1);
        age(&cache);
        assert_eq!(read(&cache, &asked, 3), 3);
        assert_eq!(read(&cache, &asked, 4), 3, "the new one is kept");
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn without_an_age_every_read_asks() {
        let cache = ViewCache::start(Duration::ZERO).unwrap();
        let asked = Cell::new(0);
        assert_eq!((read(&cache, &asked, 1), read(&cache, &asked, 2)), (1, 2));
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn while_one_read_refreshes_the_others_are_served_the_kept_view() {
        let cache = ViewCache::new(AGE, AGE, None);
        let asked = Cell::new(0);
        read(&cache, &asked, 1);
        age(&cache);
        let during: Result<_, ()> = cache.get(|| {
            // Another read meanwhile: the kept view, no second question.
            let other: Result<_, ()> = cache.get(|| panic!("asked twice"));
            assert_eq!(other.unwrap().generation, 1);
            Ok(view(2))
        });
        assert_eq!(during.unwrap().generation, 2);
        assert_eq!(read(&cache, &asked, 3), 2, "the refreshed view is kept");
        // A failed refresh lets the next read try again.
        age(&cache);
        let failed: Result<Arc<View>, &str> = cache.get(|| Err("busy"));
        assert!(failed.is_err());
        assert_eq!(read(&cache, &asked, 4), 4);
    }

    #[test]
    fn a_write_forgets_the_view_and_a_read_asked_before_it_is_not_kept() {
        let cache = ViewCache::new(AGE, AGE, None);
        let asked = Cell::new(0);
        read(&cache, &asked, 1);
        cache.forget();
        assert_eq!(read(&cache, &asked, 2), 2, "asked again after the write");
        cache.forget();
        let racing: Result<_, ()> = cache.get(|| {
            cache.forget();
            Ok(view(3))
        });
        assert_eq!(racing.unwrap().generation, 3, "its own reader gets it");
        assert_eq!(read(&cache, &asked, 4), 4, "but it was not kept");
    }

    #[test]
    fn a_kept_view_goes_when_old_or_when_no_read_came_for_its_idle_time() {
        let secs = Duration::from_secs_f64;
        let cache = ViewCache::new(AGE, secs(1.0), None);
        let asked = Cell::new(0);
        read(&cache, &asked, 1);
        let t = Instant::now();
        let next = cache.expire(t).expect("kept: read just now");
        assert!(next <= t + secs(1.0), "looked at again once idle");
        // Reads keep it past one idle time...
        read_at(&cache, t + secs(2.0));
        assert_eq!(cache.expire(t + secs(2.5)), Some(t + secs(3.0)));
        // ...and none for that long lets it go.
        assert_eq!(cache.expire(t + secs(3.0)), None);
        assert_eq!(read(&cache, &asked, 2), 2, "asked again");
        // However often it is read, it goes once old.
        read_at(&cache, t + AGE + secs(0.5));
        assert_eq!(cache.expire(t + AGE + secs(1.0)), None);
        assert!(cache.state().kept.is_none());
    }

    #[test]
    fn a_view_no_read_asks_for_again_is_let_go_once_old() {
        let cache = ViewCache::start(Duration::from_millis(20)).unwrap();
        let v = view(1);
        let weak = Arc::downgrade(&v);
        let got: Result<_, ()> = cache.get(move || Ok(v));
        drop(got);
        let deadline = Instant::now() + Duration::from_secs(10);
        while weak.upgrade().is_some() {
            assert!(Instant::now() < deadline, "the sweeper kept the view");
            std::thread::yield_now();
        }
        assert!(cache.state().kept.is_none());
    }
}
