//! The storage cluster's health as the dev gateway shows it: the faults the control API
//! injects (an SDC cut off from the MDM, a device in error, a rebuild of every pool that
//! drains over N seconds, a pool filled to P percent), laid over the answers the model gives,
//! with the field names and values a real 2.x gateway uses. An SDS or MDM member cut off is
//! the data model's (`data.rs`): it has consequences for the data. `/control/gateway/clear`
//! ends every one of them.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::data::LONGEST_REBUILD;

/// One fault to inject or end. Hosts are named by their address, as the MDM knows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthFault {
    /// The SDS on this host loses (`false`) or regains its MDM connection.
    SdsConnected { ip: String, connected: bool },
    /// The SDC on this host loses (`false`) or regains its MDM connection.
    SdcConnected { ip: String, connected: bool },
    /// The device at `path` of this host's SDS fails (`deviceState` `Error`) or is back.
    DeviceFailed {
        ip: String,
        path: String,
        failed: bool,
    },
    /// One MDM manager down (`ClusteredDegraded`), or back.
    MdmDegraded(bool),
    /// Every pool holds degraded data that is rebuilt over this long; zero ends it.
    Rebuild(Duration),
    /// Every pool's capacity in use is this percent of what it can hold; 0 is back to normal.
    Fill(u64),
}

impl HealthFault {
    /// Checks the figures; the objects named are checked by the model.
    pub fn check(&self) -> Result<(), String> {
        match self {
            HealthFault::Rebuild(d) if *d > LONGEST_REBUILD => Err(format!(
                "a rebuild of {}s is longer than a day",
                d.as_secs()
            )),
            HealthFault::Fill(pct) if *pct > 100 => Err(format!("pct={pct} is over 100 percent")),
            _ => Ok(()),
        }
    }
}

/// A rebuild under way: its degraded data drains to zero linearly, by the gateway's clock.
struct Rebuild {
    started: Instant,
    lasts: Duration,
}

impl Rebuild {
    /// What is left of `initial_kb` now.
    fn left_kb(&self, initial_kb: u64, now: Instant) -> u64 {
        let lasts = self.lasts.as_millis();
        let gone = now.duration_since(self.started).as_millis().min(lasts);
        if lasts == 0 {
            return 0;
        }
        (u128::from(initial_kb) * (lasts - gone) / lasts) as u64
    }
}

/// A pool's health figures, in KiB.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolFigures {
    pub in_use_kb: u64,
    pub degraded_kb: u64,
    pub pending_rebuild_kb: u64,
    pub moving_kb: u64,
    /// Data moving off an SDS or device being removed (no copy missing).
    pub rebalance_kb: u64,
}

impl PoolFigures {
    /// These figures and `other`'s, of a pool that can hold `usable_kb`: missing copies add
    /// up (to at most the pool), and what lacks a copy is data in use.
    pub fn with(self, other: PoolFigures, usable_kb: u64) -> PoolFigures {
        let degraded = (self.degraded_kb + other.degraded_kb).min(usable_kb);
        PoolFigures {
            in_use_kb: self.in_use_kb.max(other.in_use_kb).max(degraded),
            degraded_kb: degraded,
            pending_rebuild_kb: (self.pending_rebuild_kb + other.pending_rebuild_kb).min(usable_kb),
            moving_kb: (self.moving_kb + other.moving_kb).min(degraded),
            rebalance_kb: self.rebalance_kb + other.rebalance_kb,
        }
    }
}

#[derive(Default)]
pub struct Faults {
    sdc_down: BTreeSet<String>,
    failed_devices: BTreeSet<(String, String)>,
    rebuild: Option<Rebuild>,
    fill_pct: u64,
}

impl Faults {
    pub fn apply(&mut self, fault: HealthFault) {
        let set = |on: bool, set: &mut BTreeSet<String>, ip: String| {
            if on {
                set.insert(ip);
            } else {
                set.remove(&ip);
            }
        };
        match fault {
            // The data model's.
            HealthFault::SdsConnected { .. } | HealthFault::MdmDegraded(_) => {}
            HealthFault::SdcConnected { ip, connected } => set(!connected, &mut self.sdc_down, ip),
            HealthFault::DeviceFailed { ip, path, failed } => {
                if failed {
                    self.failed_devices.insert((ip, path));
                } else {
                    self.failed_devices.remove(&(ip, path));
                }
            }
            HealthFault::Rebuild(lasts) => {
                self.rebuild = (!lasts.is_zero()).then(|| Rebuild {
                    started: Instant::now(),
                    lasts,
                })
            }
            HealthFault::Fill(pct) => self.fill_pct = pct,
        }
    }

    /// Whether the SDC on `ip` is connected, given what the model says.
    pub fn sdc_connected(&self, ip: &str, connected: bool) -> bool {
        connected && !self.sdc_down.contains(ip)
    }

    /// A device answer of the device at `path` on the SDS at `ips`, failed when injected.
    pub fn device(&self, value: &mut Value, ips: &[&str], path: &str) {
        let failed = ips.iter().any(|ip| {
            self.failed_devices
                .contains(&(ip.to_string(), path.to_string()))
        });
        if failed {
            value["deviceState"] = json!("Error");
            value["errorState"] = json!("DeviceFailed");
        }
    }

    /// Whether an injected rebuild still leaves every pool missing copies.
    pub fn rebuilding(&self, now: Instant) -> bool {
        self.rebuild
            .as_ref()
            .is_some_and(|r| now.saturating_duration_since(r.started) < r.lasts)
    }

    /// A pool's figures when it can hold `usable_kb` (capacity less spare), now.
    pub fn pool(&self, usable_kb: u64, now: Instant) -> PoolFigures {
        let filled = usable_kb * self.fill_pct / 100;
        let Some(rebuild) = &self.rebuild else {
            return PoolFigures {
                in_use_kb: filled,
                ..PoolFigures::default()
            };
        };
        // A tenth of the pool lost a copy; what is degraded is data in use.
        let initial = usable_kb / 10;
        let left = rebuild.left_kb(initial, now);
        let per_second = initial / rebuild.lasts.as_secs().max(1);
        PoolFigures {
            in_use_kb: filled.max(initial),
            degraded_kb: left,
            pending_rebuild_kb: left,
            moving_kb: per_second.min(left),
            rebalance_kb: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_drains_to_zero_over_its_time() {
        let mut f = Faults::default();
        f.apply(HealthFault::Rebuild(Duration::from_secs(10)));
        let start = f.rebuild.as_ref().unwrap().started;
        let at = |s| f.pool(1_000_000, start + Duration::from_secs(s));
        assert_eq!(at(0).degraded_kb, 100_000);
        assert_eq!(at(0).in_use_kb, 100_000);
        assert_eq!(at(5).pending_rebuild_kb, 50_000);
        assert_eq!(at(5).moving_kb, 10_000);
        assert_eq!(
            at(10),
            PoolFigures {
                in_use_kb: 100_000,
                ..PoolFigures::default()
            }
        );
        assert_eq!(at(60).degraded_kb, 0);
        f.apply(HealthFault::Rebuild(Duration::ZERO));
        assert_eq!(f.pool(1_000_000, start), PoolFigures::default());
    }

    #[test]
    fn fill_sets_the_capacity_in_use() {
        let mut f = Faults::default();
        f.apply(HealthFault::Fill(91));
        assert_eq!(f.pool(1_000, Instant::now()).in_use_kb, 910);
        assert!(HealthFault::Fill(101).check().is_err());
        assert!(HealthFault::Rebuild(LONGEST_REBUILD * 2).check().is_err());
    }
}
