//! One batch of the dispatcher's inputs: handled in order, then what falls due after it
//! (the walks of every node, `after_inputs`), then one save. A batch that wrote nothing
//! skips the walks (see [`QUIET_WALK_MS`]); under a stream of inputs that each concern one
//! node (executor reports, task status updates, the gateway worker's node outcomes) or a
//! call's outcome they run at most once per [`Dispatcher::walk_gap_ms`] (see
//! [`NODES_PER_WALK_GAP_MS`]).

use super::*;

/// A batch of plan requests and view reads only (they write nothing `after_inputs` reads)
/// skips its walks of every node (offers, grants, replacements, storage work, stuck
/// launches), which otherwise follow every batch: at 10,000 idle executors asking for their
/// plans, and after a restart when all of them come at once, the walks were half of the
/// dispatcher's CPU. Something timed that the wake-up deadline does not cover still waits
/// at most this long.
pub(super) const QUIET_WALK_MS: u64 = 1_000;

/// Under a stream of inputs that each concern one node or one call, the walks after a batch
/// run at most once per millisecond for each this many nodes (250 ms at 10,000 nodes, none
/// below 40 nodes). Such inputs come one at a time, so batches of one or two follow each
/// other, and at 10,000 nodes each batch's walks of every node (about a millisecond each: a
/// cache miss per node) kept a busy rollout's dispatcher on the CPU the REST workers
/// needed. What they decide after one (its storage work, a grant, a replacement, a
/// relaunch) waits that long at most: a walk owed is a deadline (`next_deadline`). The gap
/// grows with the walks' cost, so a small cluster walks after every batch, as before. At
/// 100 nodes per millisecond (100 ms at 10,000), the walks of a first rollout of 10,000
/// agents, ten a second for as long as its disks took to attach, were still an eighth of
/// the scheduler's CPU (perf, the memory bench); none of what they decide is worth a
/// quarter of a second in a rollout of minutes.
pub(super) const NODES_PER_WALK_GAP_MS: usize = 40;

/// Inputs whose batches may put their walks off: each writes one node at most (an
/// executor's call its own, a status update its task's, a gateway outcome its node's), or
/// is a call's outcome, whose one follow-up that cannot wait, the launch window's next
/// offers, is answered at once (`take_batch`): a launch wave of 10,000 agents is 10,000
/// ACCEPTs, and each outcome walked every node. Nothing else in them must be acted on
/// sooner than the gap. Offers, the agent list, operators' commands and the
/// subscription's changes walk at once: a rollout's pace or an operator's answer waits on
/// them.
fn walk_may_wait(input: &Input) -> bool {
    match input {
        Input::View(_)
        | Input::Executor(_)
        | Input::Storage(Report::Node(_))
        | Input::CallOutcome(_) => true,
        Input::Event(ev) => matches!(
            ev.r#type,
            Some(event::Type::Update | event::Type::Heartbeat | event::Type::Message)
        ),
        _ => false,
    }
}

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
        let walk_may_wait = !batch.is_empty() && batch.iter().all(walk_may_wait);
        let written = self.state.model.nodes.stamp();
        for input in batch {
            if let Some(exit) = self.handle(input) {
                self.flush();
                return Some(exit);
            }
        }
        let now = self.clock.now_ms();
        // Nothing the walks read has changed since they last ran, and nothing timed is due:
        // they would decide nothing new.
        let unchanged = reads_only && !self.dirty && self.state.model.nodes.stamp() == written;
        let before = |gap: u64| due.is_none_or(|t| now < t) && now < self.walked_ms + gap;
        if unchanged && before(QUIET_WALK_MS) {
            // Nothing to walk for.
        } else if walk_may_wait && before(self.walk_gap_ms()) {
            // The launch window does not wait for the walks: an ACCEPT taken makes room.
            self.work_offer_backlog();
            self.walk_owed = true;
        } else {
            self.after_inputs();
            (self.walked_ms, self.walks, self.walk_owed) = (now, self.walks + 1, false);
        }
        self.flush();
        self.debug_tally.flush_due(now);
        // Write-ahead: storage work leaves only once its intent is saved.
        if !self.dirty {
            self.storage.release();
        }
        None
    }

    /// How long after the last walk a batch of such inputs may leave its walk owed.
    pub(super) fn walk_gap_ms(&self) -> u64 {
        (self.state.model.nodes.len() / NODES_PER_WALK_GAP_MS) as u64
    }

    /// When a walk put off must run (`None`: none is owed).
    pub(super) fn owed_walk_deadline(&self) -> Option<u64> {
        self.walk_owed.then(|| self.walked_ms + self.walk_gap_ms())
    }

    /// How many times the walks have run (tests).
    #[cfg(test)]
    pub(super) fn walks(&self) -> u64 {
        self.walks
    }
}
