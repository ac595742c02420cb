//! The calls a batch decided, held until the state is saved (write ahead), then handed to
//! the call sender.

use crate::mesos::scheduler::Call;
use crate::scheduler::master::sender::{ExecutorMessage, Outgoing};

/// Boxed as they are made: a `Call` is 856 bytes inline and a launch wave is
/// 10,000 ACCEPTs. In a growing `Vec<Call>` they were copied at every doubling, copied again
/// into a box for the sender, and the vector's capacity (some 12 MB) stayed allocated after
/// the wave. Boxed, each call is made once and moves to the sender as a pointer. MESSAGEs
/// stay in their small form until the sender sends them ([`ExecutorMessage`]).
#[derive(Default)]
pub(super) struct Pending(Vec<Outgoing>);

impl Pending {
    pub(super) fn push(&mut self, call: Call) {
        self.0.push(Outgoing::Call(Box::new(call)));
    }

    pub(super) fn push_message(&mut self, message: ExecutorMessage) {
        self.0.push(Outgoing::Message(Box::new(message)));
    }

    /// The calls held, MESSAGEs left out.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Call> {
        self.0.iter().filter_map(|o| match o {
            Outgoing::Call(c) => Some(&**c),
            _ => None,
        })
    }

    /// Drops every call and the room they took.
    pub(super) fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// The calls and MESSAGEs, in the order they were decided; leaves no capacity behind.
    pub(super) fn take(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.0)
    }
}
