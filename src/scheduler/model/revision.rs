//! A node value's revision: a number no other node value had or will have in this process,
//! new at every write through [`super::Nodes`] and at every copy.
//!
//! Those that must tell whether a node was written since they last looked (the store's save,
//! the executor API's parked plan requests, the `/api/state` render) keep this number, not the
//! node. A kept `Arc<Node>` made the model's next write to that node copy it whole: after a
//! health poll or a restart's reconciliation, which write every node, the model was held
//! twice (about 16 MB at 10,000 nodes, against the app's `mem: 32`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Not part of what a node is: two nodes that hold the same facts are equal whatever their
/// revisions, and a revision is neither saved nor shown.
#[derive(Debug)]
pub struct Revision(u64);

/// Process-wide, so that a node removed and added again, or put back from a copy, never
/// repeats a number that something kept.
static NEXT: AtomicU64 = AtomicU64::new(1);

impl Revision {
    pub fn fresh() -> Revision {
        Revision(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    pub fn get(&self) -> u64 {
        self.0
    }

    /// The next number to be handed out: unchanged from one call to the next, no node was
    /// written (nor copied) in between.
    pub fn latest() -> u64 {
        NEXT.load(Ordering::Relaxed)
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
