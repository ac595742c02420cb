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
//!
//! Why a large block's pages go back to the kernel when it is freed: dlmalloc keeps a freed
//! chunk in its bins, its pages resident, and gives back only the top of its heap. A large
//! block freed in the middle (the buffer of a 10,000-offer event, a listing, a map's table
//! before its resize) stayed in the resident set for good, under whatever was allocated
//! after it. Its whole pages are handed back (`MADV_DONTNEED`) just before it is freed,
//! while it is still ours; dlmalloc then writes its bookkeeping at the chunk's two ends only,
//! and a later allocation there faults in zeroed pages.

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

/// Freed blocks of this size and more give their whole pages back (see the module's doc).
/// Smaller ones are most of the calls, and hold at most a page or two each.
pub const RELEASE_AT: usize = 64 * 1024;

/// The whole pages inside `size` bytes at `ptr`, handed back to the kernel. Called before
/// the block is freed: once freed, another thread may be given it.
unsafe fn release_pages(ptr: *mut u8, size: usize) {
    const PAGE: usize = 4096;
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + size) & !(PAGE - 1);
    if end > start {
        // A failure (another page size) only keeps the pages, as before.
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
    }
}

unsafe impl GlobalAlloc for Heap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        heap().0.malloc(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= RELEASE_AT {
            release_pages(ptr, layout.size());
        }
        heap().0.free(ptr, layout.size(), layout.align())
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        heap().0.calloc(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() < RELEASE_AT {
            return heap()
                .0
                .realloc(ptr, layout.size(), layout.align(), new_size);
        }
        // A large block that moves is freed inside dlmalloc's realloc, out of reach: moved
        // here instead, so that its pages go back as any large block's do.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
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

    /// Resident pages of `len` bytes at `p` (a page-aligned start), by mincore(2).
    fn resident_pages(p: *mut u8, len: usize) -> usize {
        let mut vec = vec![0u8; len.div_ceil(4096)];
        let rc = unsafe { libc::mincore(p.cast(), len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        vec.iter().filter(|v| **v & 1 == 1).count()
    }

    /// A large block's whole pages leave the resident set when it is given back, and read
    /// as zeros if touched again; the bytes around them are kept.
    #[test]
    fn a_large_blocks_pages_go_back_to_the_kernel() {
        let size = 4 * super::RELEASE_AT;
        unsafe {
            let layout = Layout::from_size_align(size, 4096).unwrap();
            let p = Heap.alloc(layout);
            assert!(!p.is_null());
            std::ptr::write_bytes(p, 0xa5, size);
            assert_eq!(resident_pages(p, size), size / 4096);
            // One byte in: the first and last pages are not whole, and stay.
            super::release_pages(p.add(1), size - 2);
            assert_eq!(resident_pages(p, size), 2);
            assert_eq!(*p, 0xa5);
            assert_eq!(*p.add(size - 1), 0xa5);
            assert_eq!(*p.add(size / 2), 0);
            Heap.dealloc(p, layout);
        }
    }

    /// A large block moved by realloc keeps its bytes, growing and shrinking.
    #[test]
    fn a_large_block_keeps_its_bytes_through_realloc() {
        let big = 2 * super::RELEASE_AT;
        unsafe {
            let layout = Layout::from_size_align(big, 16).unwrap();
            let p = Heap.alloc(layout);
            for i in 0..big {
                *p.add(i) = (i % 251) as u8;
            }
            let q = Heap.realloc(p, layout, 3 * big);
            let kept = std::slice::from_raw_parts(q, big);
            assert!(kept.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
            let r = Heap.realloc(q, Layout::from_size_align(3 * big, 16).unwrap(), 1000);
            let kept = std::slice::from_raw_parts(r, 1000);
            assert!(kept.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
            Heap.dealloc(r, Layout::from_size_align(1000, 16).unwrap());
        }
    }
}
