//! Counters for `/metrics`. Each is written by the one thread that does the counted thing
//! (subscription reader, call sender, dispatcher) and read by the REST server; atomics keep
//! that free of locks.

use crate::gateway::client::CallCounters;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Scheduler event types, in the order of `EVENT_NAMES`.
pub const EVENT_NAMES: [&str; 12] = [
    "SUBSCRIBED",
    "OFFERS",
    "INVERSE_OFFERS",
    "RESCIND",
    "RESCIND_INVERSE_OFFER",
    "UPDATE",
    "MESSAGE",
    "FAILURE",
    "ERROR",
    "HEARTBEAT",
    "UNKNOWN",
    "UNDECODABLE",
];

/// Call types we send, in the order of `CALL_NAMES`. A type missing here goes uncounted:
/// MESSAGE (the announcement after a restart, 10,000 calls at 10,000 agents, and every
/// nudge) and the maintenance answers were, until a bench asked how fast announcements
/// leave.
pub const CALL_NAMES: [&str; 13] = [
    "SUBSCRIBE",
    "TEARDOWN",
    "ACCEPT",
    "DECLINE",
    "REVIVE",
    "KILL",
    "ACKNOWLEDGE",
    "RECONCILE",
    "SUPPRESS",
    "SHUTDOWN",
    "MESSAGE",
    "ACCEPT_INVERSE_OFFERS",
    "DECLINE_INVERSE_OFFERS",
];

#[derive(Debug, Default)]
pub struct Metrics {
    pub events: [AtomicU64; EVENT_NAMES.len()],
    pub calls_ok: [AtomicU64; CALL_NAMES.len()],
    pub calls_failed: [AtomicU64; CALL_NAMES.len()],
    pub offers_accepted: AtomicU64,
    pub offers_declined: AtomicU64,
    pub reconnects: AtomicU64,
    /// Milliseconds since the epoch of the last event of any kind (0 = none yet).
    pub last_event_ms: AtomicU64,
    /// Requests to the storage gateway, and those that failed; shared with the gateway
    /// client, which counts them.
    pub gateway: Arc<CallCounters>,
}

impl Metrics {
    pub fn event(&self, name: &str, now_ms: u64) {
        let i = EVENT_NAMES
            .iter()
            .position(|n| *n == name)
            .unwrap_or(EVENT_NAMES.len() - 2);
        self.events[i].fetch_add(1, Relaxed);
        self.last_event_ms.store(now_ms, Relaxed);
    }

    pub fn call(&self, name: &str, ok: bool) {
        if let Some(i) = CALL_NAMES.iter().position(|n| *n == name) {
            let slot = if ok {
                &self.calls_ok
            } else {
                &self.calls_failed
            };
            slot[i].fetch_add(1, Relaxed);
        }
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_name() {
        let m = Metrics::default();
        m.event("OFFERS", 5);
        m.event("WHATEVER", 6);
        m.call("ACCEPT", true);
        m.call("ACCEPT", false);
        assert_eq!(Metrics::get(&m.events[1]), 1);
        assert_eq!(Metrics::get(&m.events[10]), 1);
        assert_eq!(Metrics::get(&m.calls_ok[2]), 1);
        assert_eq!(Metrics::get(&m.calls_failed[2]), 1);
        assert_eq!(Metrics::get(&m.last_event_ms), 6);
    }

    #[test]
    fn every_call_type_the_scheduler_sends_is_counted() {
        use crate::mesos::scheduler::call::Type;
        let sent = [
            Type::Subscribe,
            Type::Teardown,
            Type::Accept,
            Type::Decline,
            Type::Revive,
            Type::Kill,
            Type::Acknowledge,
            Type::Reconcile,
            Type::Suppress,
            Type::Shutdown,
            Type::Message,
            Type::AcceptInverseOffers,
            Type::DeclineInverseOffers,
        ];
        let m = Metrics::default();
        for t in sent {
            m.call(t.as_str(), true);
        }
        let counted: u64 = m.calls_ok.iter().map(Metrics::get).sum();
        assert_eq!(counted, sent.len() as u64);
    }
}
