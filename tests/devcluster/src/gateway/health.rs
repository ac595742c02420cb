//! The storage cluster's health as the dev gateway shows it: the faults the control API
//! injects (an SDS or SDC cut off from the MDM, a device in error, the MDM cluster down a
//! member, a rebuild that drains over N seconds, a pool filled to P percent), laid over the
//! answers the model gives, with the field names and values a real 2.x gateway uses.
//! `/control/gateway/clear` ends every one of them.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The longest rebuild that can be asked for: a day.
const LONGEST_REBUILD: Duration = Duration::from_secs(24 * 60 * 60);

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
}

#[derive(Default)]
pub struct Faults {
    sds_down: BTreeSet<String>,
    sdc_down: BTreeSet<String>,
    failed_devices: BTreeSet<(String, String)>,
    mdm_degraded: bool,
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
            HealthFault::SdsConnected { ip, connected } => set(!connected, &mut self.sds_down, ip),
            HealthFault::SdcConnected { ip, connected } => set(!connected, &mut self.sdc_down, ip),
            HealthFault::DeviceFailed { ip, path, failed } => {
                if failed {
                    self.failed_devices.insert((ip, path));
                } else {
                    self.failed_devices.remove(&(ip, path));
                }
            }
            HealthFault::MdmDegraded(on) => self.mdm_degraded = on,
            HealthFault::Rebuild(lasts) => {
                self.rebuild = (!lasts.is_zero()).then(|| Rebuild {
                    started: Instant::now(),
                    lasts,
                })
            }
            HealthFault::Fill(pct) => self.fill_pct = pct,
        }
    }

    /// An SDS answer (`sds_json`) of the SDS at `ips`, with an injected disconnection.
    pub fn sds(&self, value: &mut Value, ips: &[&str]) {
        if ips.iter().any(|ip| self.sds_down.contains(*ip)) {
            value["mdmConnectionState"] = json!("Disconnected");
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

    /// The system's `mdmCluster` with one manager down when degraded.
    pub fn mdm_cluster(&self, cluster: &mut Value) {
        if !self.mdm_degraded {
            return;
        }
        cluster["clusterState"] = json!("ClusteredDegraded");
        cluster["goodNodesNum"] = json!(2);
        cluster["goodReplicasNum"] = json!(1);
        if let Some(slave) = cluster["slaves"].get_mut(0) {
            slave["status"] = json!("Disconnected");
        }
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
