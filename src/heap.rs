//! The scheduler's global allocator: dlmalloc's one heap (why dlmalloc: `lib.rs`) behind the
//! standard library's futex lock instead of the crate's own `pthread_mutex_t`.
//!
//! Every allocation takes the lock. musl's `pthread_mutex_lock` and `pthread_mutex_unlock`
//! are calls into libc that check the mutex's type first: on the one-offer OFFERS decode they
//! were 12% of the instructions (callgrind, `tests/bench/wire.rs`), and the decode allocates
//! about 36 times per event. `std::sync::Mutex` takes and gives back an uncontended lock with
//! one atomic instruction each, inlined, and sleeps on a futex when contended, as the
//! pthread mutex does.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::{Mutex, MutexGuard};

pub struct Heap;

/// The heap; only ever touched under the lock.
struct Locked(dlmalloc::Dlmalloc);

// The heap's raw pointers are its own chunks, used only by whoever holds the lock.
unsafe impl Send for Locked {}

static HEAP: Mutex<Locked> = Mutex::new(Locked(dlmalloc::Dlmalloc::new()));

fn heap() -> MutexGuard<'static, Locked> {
    // Nothing panics while the heap is held (dlmalloc aborts on a corrupt heap): a poisoned
    // lock cannot happen, and would guard a whole heap if it did.
    HEAP.lock().unwrap_or_else(|e| e.into_inner())
}

unsafe impl GlobalAlloc for Heap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        heap().0.malloc(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        heap().0.free(ptr, layout.size(), layout.align())
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        heap().0.calloc(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        heap()
            .0
            .realloc(ptr, layout.size(), layout.align(), new_size)
    }
}
