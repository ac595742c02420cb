//! A node value's revision: a number no other node value had or will have in this process,
//! new at every write through [`super::Nodes`] and at every copy.
//!
//! Those that must tell whether a node was written since they last looked (the store's save,
//! the executor API's parked plan requests, the `/api/state` render) keep this number, not the
//! node. A kept `Arc<Node>` made the model's next write to that node copy it whole: after a
//! health poll or a restart's reconciliation, which write every node, the model was held
//! twice (about 16 MB at 10,000 nodes, against the app's `mem: 32`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Not part of what a node is: two nodes that hold the same facts are equal whatever their
/// revisions, and a revision is neither saved nor shown.
#[derive(Debug)]
pub struct Revision(u64);

/// Process-wide, so that a node removed and added again, or put back from a copy, never
/// repeats a number that something kept.
static NEXT: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Revisions made on this thread.
    static MADE_HERE: Cell<u64> = const { Cell::new(0) };
}

impl Revision {
    pub fn fresh() -> Revision {
        MADE_HERE.with(|n| n.set(n.get() + 1));
        Revision(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    pub fn get(&self) -> u64 {
        self.0
    }

    /// How many revisions this thread has made: unchanged from one call to the next, this
    /// thread wrote (or copied) no node in between. The model has one writer, the dispatcher's
    /// thread, so there it tells whether any node of the model changed; other threads' copies
    /// do not count (nor, in unit tests, other tests running beside).
    pub fn made_here() -> u64 {
        MADE_HERE.with(Cell::get)
    }
}

impl Default for Revision {
    fn default() -> Revision {
        Revision::fresh()
    }
}

/// A copy is a new value: whatever is written to it, nobody has seen it under this number.
impl Clone for Revision {
    fn clone(&self) -> Revision {
        Revision::fresh()
    }
}

impl PartialEq for Revision {
    fn eq(&self, _: &Revision) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatcher's "nothing written" checks count its own thread's revisions: another
    /// thread's (a test beside it, a view's copy) do not make it walk, nor hide its writes.
    #[test]
    fn another_threads_revisions_do_not_count_here() {
        let before = Revision::made_here();
        std::thread::spawn(|| Revision::fresh().get())
            .join()
            .unwrap();
        assert_eq!(Revision::made_here(), before);
        Revision::fresh();
        assert_eq!(Revision::made_here(), before + 1);
    }
}
