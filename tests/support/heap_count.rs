//! A global allocator that counts, per thread, the heap each thread holds and its peak: for
//! tests of what one path costs in heap, run on the calling thread while other threads of the
//! test (a dev gateway, the harness) allocate as they like. Include with `#[path]`; the test
//! binary that does gets it as its global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct PerThread;

thread_local! {
    /// Bytes this thread holds (what it allocated less what it freed), and their peak.
    pub static HELD: Cell<isize> = const { Cell::new(0) };
    pub static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: a thread being torn down has no counters left, and its frees count for
    // nothing here.
    let _ = HELD.try_with(|held| {
        let now = held.get() + delta;
        held.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call goes to the system allocator unchanged; the counters are plain
// thread-locals with no destructor, so counting allocates nothing.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static HEAP: PerThread = PerThread;

/// This thread's heap now, with its peak reset to it.
pub fn mark() -> isize {
    let now = HELD.with(Cell::get);
    PEAK.with(|p| p.set(now));
    now
}
