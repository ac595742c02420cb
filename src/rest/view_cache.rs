//! The last view the dispatcher gave, shared by every read for a short while.
//!
//! On a cluster being installed, executors report hundreds of times a second, and each report
//! makes a new view. Asked for afresh, every read of `/api/state`, `/api/nodes/<host>`, the
//! status page or `/metrics` waited in the dispatcher's queue behind those reports and their
//! saves, and then rendered a view no other read had rendered yet: with 32 clients and 500
//! reports a second on 1,000 nodes, a p99 of 46 ms. A view younger than `max_age` is served
//! as it is; one older is refreshed by one read while the others keep being served it, so
//! only that read waits. An operator's write forgets the view: the writer's next read is made
//! after its write.
//!
//! A kept view keeps the model's nodes of its moment alive, and the dispatcher's next write to
//! each of them copies it (`model/revision.rs`): a health poll, which writes every node, held
//! the model twice while a view was kept, and the allocator keeps what it was given. So the
//! sweeper thread drops the view once it is `max_age` old, or as soon as no read asked for it
//! for `idle`: reads now and then (a scrape, a status page) keep it about as briefly as their
//! own render did, a busy API keeps it for its whole `max_age`.

use crate::scheduler::exchange::View;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct ViewCache {
    max_age: Duration,
    /// A view no read asked for this long is let go.
    idle: Duration,
    kept: Mutex<Option<Kept>>,
    /// A read is asking the dispatcher for a newer view.
    refreshing: AtomicBool,
    /// Bumped by `forget`: a refresh asked for before a write does not keep its view.
    epoch: AtomicU64,
    /// When a read was last served the kept view, in nanoseconds since `base`.
    last_read: AtomicU64,
    base: Instant,
    /// A view was kept: the sweeper's cue.
    kept_one: Option<Sender<()>>,
}

struct Kept {
    /// When the view was asked for (it is at least this fresh).
    asked: Instant,
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
            kept: Mutex::new(None),
            refreshing: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
            base: Instant::now(),
            kept_one,
        }
    }

    fn note_read(&self, now: Instant) {
        let at = now.saturating_duration_since(self.base).as_nanos() as u64;
        self.last_read.store(at, Ordering::Relaxed);
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
        let now = Instant::now();
        let refresh = {
            let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            match kept.as_ref() {
                Some(k) if now.duration_since(k.asked) < self.max_age => {
                    self.note_read(now);
                    return Ok(k.view.clone());
                }
                Some(k) if self.refreshing.swap(true, Ordering::AcqRel) => {
                    self.note_read(now);
                    return Ok(k.view.clone());
                }
                // This read refreshes it.
                Some(_) => true,
                // None kept: every read asks, none waits for another.
                None => !self.refreshing.swap(true, Ordering::AcqRel),
            }
        };
        let epoch = self.epoch.load(Ordering::Acquire);
        let asked = Instant::now();
        let got = ask();
        if let Ok(view) = &got {
            self.keep(epoch, asked, view);
        }
        if refresh {
            self.refreshing.store(false, Ordering::Release);
        }
        got
    }

    fn keep(&self, epoch: u64, asked: Instant, view: &Arc<View>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        // Views answered out of order: the one asked for last stays.
        if kept.as_ref().is_some_and(|k| k.asked > asked) {
            return;
        }
        *kept = Some(Kept {
            asked,
            view: view.clone(),
        });
        self.note_read(Instant::now());
        if let Some(s) = &self.kept_one {
            let _ = s.send(());
        }
    }

    /// Drops the kept view: the next read asks the dispatcher (after an operator's write).
    pub(super) fn forget(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        self.epoch.fetch_add(1, Ordering::AcqRel);
        *kept = None;
    }

    /// Drops the kept view if at `now` it is `max_age` old or was not read for `idle`; else
    /// when to look again.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let k = kept.as_ref()?;
        let read = self.base + Duration::from_nanos(self.last_read.load(Ordering::Relaxed));
        let old = k.asked + self.max_age;
        let unread = read + self.idle;
        if now >= old || now >= unread {
            *kept = None;
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
        Arc::new(View {
            subscribed: true,
            master: None,
            disconnected_reason: None,
            suppressed: false,
            model: ClusterModel::default(),
            generated_ms: generation,
            generation,
            events: Default::default(),
        })
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
        let mut kept = cache.kept.lock().unwrap();
        let k = kept.as_mut().expect("a kept view");
        k.asked = Instant::now().checked_sub(AGE).expect("a clock past AGE");
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
        cache.note_read(t + secs(2.0));
        assert_eq!(cache.expire(t + secs(2.5)), Some(t + secs(3.0)));
        // ...and none for that long lets it go.
        assert_eq!(cache.expire(t + secs(3.0)), None);
        assert_eq!(read(&cache, &asked, 2), 2, "asked again");
        // However often it is read, it goes once old.
        cache.note_read(t + AGE + secs(0.5));
        assert_eq!(cache.expire(t + AGE + secs(1.0)), None);
        assert!(cache.kept.lock().unwrap().is_none());
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
        assert!(cache.kept.lock().unwrap().is_none());
    }
}
