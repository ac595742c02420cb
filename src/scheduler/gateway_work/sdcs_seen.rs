//! The SDCs the gateway's last listing showed connected, kept for a short while so that the
//! nodes the worker attaches meanwhile need no listing of their own.
//!
//! Why: an attached node is ready once its SDC is connected, and the only way to read that is
//! to list every SDC of the cluster. In a large rollout the worker attaches a few nodes per
//! pass for minutes, and a listing per `poll_settle` (10,000 SDCs, twice a second) was 6% of
//! the scheduler's CPU (perf, 10,000-agent memory bench). A host's SDC is installed in its
//! `packages` phase, long before its disks join, so a listing a few seconds old already shows
//! it; one it does not show is listed for as before.
//!
//! The newest listing wins, whichever took it (the worker's check or a health poll): a poll
//! that finds an SDC gone replaces a check that found it connected, so a lost SDC is never
//! taken back as connected from older news.

use super::addrs::canonical;
use std::net::IpAddr;

/// How long a listing answers for the nodes it shows connected. Well under the health poll's
/// default interval (30 s), which checks every ready node's SDC again.
pub(super) const REUSE_MS: u64 = 10_000;

#[derive(Debug)]
pub(super) struct SdcsSeen {
    at_ms: u64,
    /// Sorted addresses, not strings: 17 bytes each and no allocation apiece (170 KB at
    /// 10,000 SDCs, held only while nodes await their SDC).
    connected: Box<[IpAddr]>,
}

impl SdcsSeen {
    /// The connected SDCs' addresses of a listing taken at `at_ms`.
    pub fn new(at_ms: u64, connected: &mut dyn Iterator<Item = &str>) -> SdcsSeen {
        SdcsSeen::of_ips(at_ms, connected.filter_map(canonical).collect())
    }

    /// [`SdcsSeen::new`], of the addresses written canonically. The listing's own check
    /// compares the strings, so only an address that compares the same both ways is kept or
    /// looked up (one spelled otherwise is listed for).
    pub fn of_ips(at_ms: u64, mut ips: Vec<IpAddr>) -> SdcsSeen {
        ips.sort_unstable();
        ips.dedup();
        SdcsSeen {
            at_ms,
            connected: ips.into_boxed_slice(),
        }
    }

    /// Whether the listing may still answer at `now_ms`.
    pub fn fresh(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.at_ms) <= REUSE_MS
    }

    /// Whether it showed the SDC at `ip` connected.
    pub fn connected(&self, ip: &str) -> bool {
        canonical(ip).is_some_and(|ip| self.connected.binary_search(&ip).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_for_the_addresses_it_listed_connected_while_fresh() {
        let listed = [
            "10.0.0.2",
            "10.0.0.1",
            "fe80::1",
            "not-an-ip",
            "10.0.0.1",
            "::ffff:10.0.0.9",
            "FE80::2",
        ];
        let seen = SdcsSeen::new(1_000, &mut listed.into_iter());
        assert!(seen.connected("10.0.0.1") && seen.connected("10.0.0.2"));
        assert!(seen.connected("fe80::1"));
        assert!(!seen.connected("10.0.0.3"));
        assert!(!seen.connected("not-an-ip"), "unparsed: listed for");
        // As the listing's string compare sees them: another spelling is another address.
        assert!(!seen.connected("10.0.0.9") && !seen.connected("fe80::2"));
        assert!(!seen.connected("FE80::1"));
        assert!(seen.fresh(1_000 + REUSE_MS));
        assert!(!seen.fresh(1_001 + REUSE_MS));
    }
}
