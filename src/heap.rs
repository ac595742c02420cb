//! The scheduler's global allocator: dlmalloc's one heap behind the standard library's futex
//! lock instead of the crate's own `pthread_mutex_t`.
//!
//! Why dlmalloc: musl's allocator takes a lock and walks its slot metadata on every call,
//! which made decoding a one-offer OFFERS event eight times slower on the static build than
//! on glibc. dlmalloc is one heap behind one lock: as fast as glibc's on this load, and unlike
//! per-thread-cache allocators (mimalloc: 75 MB at 10,000 agents) it keeps no memory per
//! thread, of which the scheduler has 78. The executor keeps musl's.
//!
//! Why the standard library's lock: every allocation takes it. musl's `pthread_mutex_lock` and
//! `pthread_mutex_unlock` are calls into libc that check the mutex's type first: on the
//! one-offer OFFERS decode they were 12% of the instructions (callgrind, `tests/bench/wire.rs`),
//! and the decode allocates about 36 times per event. `std::sync::Mutex` takes and gives back an
//! uncontended lock with one atomic instruction each, inlined, and sleeps on a futex when
//! contended, as the pthread mutex does.
//!
//! Why each binary declares it ([`scheduler_heap!`]) rather than the library: one lock suits
//! the scheduler's few busy threads, not every program that links the library. The dev
//! cluster's 10,000 emulated executors, one thread each in the memory bench's process, spent
//! about a quarter of their CPU waking each other on this lock while they fetched their plans
//! after a restart (perf: `futex_wake` and the kernel's spinlocks).

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

/// Makes [`Heap`] the global allocator of the binary that calls it at its top level: the
/// scheduler's own, and the benches that time the scheduler's code in its process.
#[macro_export]
macro_rules! scheduler_heap {
    () => {
        #[global_allocator]
        static SCHEDULER_HEAP: $crate::heap::Heap = $crate::heap::Heap;
    };
}

#[cfg(test)]
mod tests {
    use super::Heap;
    use std::alloc::{GlobalAlloc, Layout};

    /// The heap directly (the unit tests' own allocator is the system's): sizes and
    /// alignments kept through realloc, zeroed memory zero, every chunk given back.
    #[test]
    fn allocates_aligned_zeroed_and_reallocated_memory() {
        unsafe {
            for align in [1usize, 8, 16, 64, 4096] {
                let layout = Layout::from_size_align(100, align).unwrap();
                let p = Heap.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "alignment {align}");
                assert!(std::slice::from_raw_parts(p, 100).iter().all(|&b| b == 0));
                for i in 0..100 {
                    *p.add(i) = i as u8;
                }
                let q = Heap.realloc(p, layout, 10_000);
                assert!(!q.is_null());
                assert_eq!(q as usize % align, 0, "alignment {align} after realloc");
                let kept = std::slice::from_raw_parts(q, 100);
                assert!(kept.iter().enumerate().all(|(i, &b)| b == i as u8));
                Heap.dealloc(q, Layout::from_size_align(10_000, align).unwrap());
            }
        }
    }
}
