//! One batch of the dispatcher's inputs: handled in order, then what falls due after it
//! (the walks of every node, `after_inputs`), then one save. A batch that wrote nothing
//! skips the walks (see [`QUIET_WALK_MS`]).

use super::*;
use crate::scheduler::model::Revision;

/// A batch of plan requests and view reads only (they write nothing `after_inputs` reads)
/// skips its walks of every node (offers, grants, replacements, storage work, stuck
/// launches), which otherwise follow every batch: at 10,000 idle executors asking for their
/// plans, and after a restart when all of them come at once, the walks were half of the
/// dispatcher's CPU. Something timed that the wake-up deadline does not cover still waits
/// at most this long.
pub(super) const QUIET_WALK_MS: u64 = 1_000;

/// Inputs that write nothing the walks after a batch read: a plan request writes no node
/// (`ExecutorApi::handle`), a view read nothing at all.
fn reads_only(input: &Input) -> bool {
    match input {
        Input::View(_) => true,
        Input::Executor(req) => matches!(req.call, ExecutorCall::Plan(_)),
        _ => false,
    }
}

impl Dispatcher {
    /// Handles a batch, decides what is due after it and saves; `due` is
    /// [`Dispatcher::next_deadline`] from before it.
    pub(super) fn take_batch(&mut self, batch: Vec<Input>, due: Option<u64>) -> Option<Exit> {
        let reads_only = !batch.is_empty() && batch.iter().all(reads_only);
        let written = Revision::made_here();
        for input in batch {
            if let Some(exit) = self.handle(input) {
                self.flush();
                return Some(exit);
            }
        }
        let now = self.clock.now_ms();
        // Nothing the walks read has changed since they last ran, and nothing timed is due:
        // they would decide nothing new.
        let unchanged = reads_only && !self.dirty && Revision::made_here() == written;
        let timely = due.is_none_or(|t| now < t) && now < self.walked_ms + QUIET_WALK_MS;
        if !(unchanged && timely) {
            self.after_inputs();
            (self.walked_ms, self.walks) = (now, self.walks + 1);
        }
        self.flush();
        self.debug_tally.flush_due(now);
        // Write-ahead: storage work leaves only once its intent is saved.
        if !self.dirty {
            self.storage.release();
        }
        None
    }

    /// How many times the walks have run (tests).
    #[cfg(test)]
    pub(super) fn walks(&self) -> u64 {
        self.walks
    }
}
