//! The calls a batch decided, held until the state is saved (write ahead), then handed to
//! the call sender.

use crate::mesos::scheduler::Call;

/// Boxed as they are made: a `Call` is 776 bytes inline and a launch wave is
/// 10,000 ACCEPTs. In a growing `Vec<Call>` they were copied at every doubling, copied again
/// into a box for the sender, and the vector's capacity (some 12 MB) stayed allocated after
/// the wave. Boxed, each call is made once and moves to the sender as a pointer (hence
/// clippy's `vec_box` is allowed here).
#[allow(clippy::vec_box)]
#[derive(Default)]
pub(super) struct Pending(Vec<Box<Call>>);

impl Pending {
    pub(super) fn push(&mut self, call: Call) {
        self.0.push(Box::new(call));
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Call> {
        self.0.iter().map(|c| &**c)
    }

    /// Drops every call and the room they took.
    pub(super) fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// The calls, in the order they were decided; leaves no capacity behind.
    #[allow(clippy::vec_box)]
    pub(super) fn take(&mut self) -> Vec<Box<Call>> {
        std::mem::take(&mut self.0)
    }
}
