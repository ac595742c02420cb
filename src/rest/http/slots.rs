//! Connections per source address: at most `serving` of one address are queued for or held
//! by a worker at once, a further `waiting` wait their turn (served by the worker that frees
//! the address's place), and the rest are refused. One address cannot take every worker, so
//! a flood of slow or bad connections from it leaves the executors' own calls served. Pure:
//! the server keeps it under a lock and does the I/O.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr};

/// What becomes of a new connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit<T> {
    /// Its address has a place: serve it now.
    Serve(T),
    /// Kept; [`Slots::release`] hands it out when its address's place frees.
    Waits,
    /// Its address has too many: refuse it.
    Refuse(T),
}

#[derive(Debug)]
struct Slot<T> {
    serving: usize,
    waiting: VecDeque<T>,
}

#[derive(Debug)]
pub(super) struct Slots<T> {
    serving: usize,
    waiting: usize,
    by_source: HashMap<IpAddr, Slot<T>>,
}

/// The key a connection counts under: an IPv4 address (also when mapped into IPv6), or an
/// IPv6 address's /64, which one host or site gets whole.
pub(super) fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

impl<T> Slots<T> {
    /// `serving` at least 1.
    pub(super) fn new(serving: usize, waiting: usize) -> Slots<T> {
        Slots {
            serving: serving.max(1),
            waiting,
            by_source: HashMap::new(),
        }
    }

    pub(super) fn admit(&mut self, source: IpAddr, conn: T) -> Admit<T> {
        let slot = self.by_source.entry(source).or_insert_with(|| Slot {
            serving: 0,
            waiting: VecDeque::new(),
        });
        if slot.serving < self.serving {
            slot.serving += 1;
            Admit::Serve(conn)
        } else if slot.waiting.len() < self.waiting {
            slot.waiting.push_back(conn);
            Admit::Waits
        } else {
            Admit::Refuse(conn)
        }
    }

    /// A connection of `source` is done; the next waiting one of it takes its place.
    pub(super) fn release(&mut self, source: IpAddr) -> Option<T> {
        let slot = self.by_source.get_mut(&source)?;
        if let Some(next) = slot.waiting.pop_front() {
            return Some(next);
        }
        slot.serving = slot.serving.saturating_sub(1);
        if slot.serving == 0 {
            self.by_source.remove(&source);
        }
        None
    }

    /// Whether connections of `source` wait for a place (an idle one of it then yields).
    pub(super) fn has_waiting(&self, source: IpAddr) -> bool {
        self.by_source
            .get(&source)
            .is_some_and(|s| !s.waiting.is_empty())
    }

    /// Addresses with a connection in service or waiting.
    #[cfg(test)]
    fn sources(&self) -> usize {
        self.by_source.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_address_gets_its_places_then_waits_then_is_refused() {
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        let mut s = Slots::new(2, 1);
        assert_eq!(s.admit(a, 1), Admit::Serve(1));
        assert_eq!(s.admit(a, 2), Admit::Serve(2));
        assert_eq!(s.admit(a, 3), Admit::Waits);
        assert_eq!(s.admit(a, 4), Admit::Refuse(4));
        // Another address is not held up by the first.
        assert_eq!(s.admit(b, 5), Admit::Serve(5));
        assert!(s.has_waiting(a) && !s.has_waiting(b));
        // The waiting one takes the freed place; then places free for good.
        assert_eq!(s.release(a), Some(3));
        assert!(!s.has_waiting(a));
        assert_eq!(s.admit(a, 6), Admit::Waits);
        assert_eq!(s.release(a), Some(6));
        assert_eq!(s.release(a), None);
        assert_eq!(s.admit(a, 7), Admit::Serve(7));
        assert_eq!(s.release(a), None);
        assert_eq!(s.release(a), None);
        assert_eq!(s.release(b), None);
        assert_eq!(s.sources(), 0, "nothing kept for addresses that left");
        // A release of an unknown address changes nothing.
        assert_eq!(s.release(a), None);
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(
            source(ip("2001:db8:1:2:aaaa::1")),
            source(ip("2001:db8:1:2:bbbb::9"))
        );
        assert_ne!(source(ip("2001:db8:1:2::1")), source(ip("2001:db8:1:3::1")));
        assert_eq!(source(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(source(ip("10.0.0.1")), ip("10.0.0.1"));
    }
}
