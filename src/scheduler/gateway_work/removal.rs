//! Taking storage out through the gateway, for the worker thread: an SDS (`removeSds`) or one
//! device (`removeDevice`) is asked to go, retried with backoff while the gateway does not
//! answer, and watched in the health polls until the gateway no longer lists it (its data
//! has moved); then, or when the gateway refuses, the dispatcher is told.

use super::report::{HealthPoll, RemovalReport, Report};
use crate::backoff::Backoff;
use crate::gateway::api::{self, Removal};
use crate::gateway::client::{GatewayClient, GatewayError};
use std::collections::BTreeMap;
use std::time::Duration;

/// What to take out: a node's SDS, or one of its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveWant {
    pub agent_id: String,
    pub hostname: String,
    pub sds_name: String,
    /// Known from its attachment; found by name otherwise.
    pub sds_id: Option<String>,
    /// `None`: the SDS itself.
    pub device: Option<String>,
}

impl RemoveWant {
    fn what(&self) -> String {
        match &self.device {
            Some(d) => format!("{}: device {d}", self.hostname),
            None => format!("{}: SDS {}", self.hostname, self.sds_name),
        }
    }
}

struct Item {
    want: RemoveWant,
    /// The gateway's id of the object once its removal was accepted.
    started: Option<String>,
    due: u64,
    backoff: Backoff,
}

/// The removals the worker carries, keyed by agent and device.
#[derive(Default)]
pub struct Removals {
    items: BTreeMap<(String, Option<String>), Item>,
}

impl Removals {
    pub fn take(&mut self, want: RemoveWant, now: u64, base: Duration, cap: Duration) {
        let key = (want.agent_id.clone(), want.device.clone());
        self.items.entry(key).or_insert(Item {
            want,
            started: None,
            due: now,
            backoff: Backoff::new(base, cap),
        });
    }

    /// When the next one not yet accepted is due.
    pub fn next_due(&self) -> Option<u64> {
        let waiting = self.items.values().filter(|i| i.started.is_none());
        waiting.map(|i| i.due).min()
    }

    /// Some removal is under way at the gateway: polls should come soon.
    pub fn watching(&self) -> bool {
        self.items.values().any(|i| i.started.is_some())
    }

    /// The gateway's ids of the devices whose removal it accepted: a poll notes whether it
    /// still lists them.
    pub fn devices_watched(&self) -> Vec<String> {
        let started = self.items.values().filter(|i| i.want.device.is_some());
        started.filter_map(|i| i.started.clone()).collect()
    }

    /// Asks the gateway for each removal due; the reports of those it refused or had done.
    /// Stops at the first transient failure (the worker then checks the gateway).
    pub fn start_due(&mut self, client: &mut GatewayClient, now: u64) -> Vec<Report> {
        let due: Vec<_> = self
            .items
            .iter()
            .filter(|(_, i)| i.started.is_none() && i.due <= now)
            .map(|(k, _)| k.clone())
            .collect();
        let mut reports = Vec::new();
        for key in due {
            let Some(item) = self.items.get_mut(&key) else {
                continue;
            };
            match start(client, &item.want) {
                Ok(Some(id)) => {
                    log::info!("{}: removal accepted; its data moves", item.want.what());
                    item.started = Some(id);
                }
                Ok(None) => {
                    log::info!("{}: the gateway no longer lists it", item.want.what());
                    let item = self.items.remove(&key);
                    reports.extend(item.map(|i| done(i.want, Ok(()))));
                }
                Err(e) if e.is_transient() => {
                    item.due = now
                        + u64::try_from(item.backoff.next_delay().as_millis()).unwrap_or(u64::MAX);
                    log::warn!("{}: removal: {e}; retried", item.want.what());
                    break;
                }
                Err(e) => {
                    log::warn!("{}: the gateway refused the removal: {e}", item.want.what());
                    let item = self.items.remove(&key);
                    reports.extend(item.map(|i| done(i.want, Err(e.to_string()))));
                }
            }
        }
        reports
    }

    /// After a health poll: the removals whose object the gateway no longer lists are done.
    pub fn check(&mut self, poll: &HealthPoll) -> Vec<Report> {
        let gone: Vec<_> = self
            .items
            .iter()
            .filter(|(_, i)| {
                let Some(id) = &i.started else {
                    return false;
                };
                match i.want.device {
                    None => !poll.listed.has_sds(id),
                    Some(_) => poll.listed.has_watched_device(id) == Some(false),
                }
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut reports = Vec::new();
        for key in gone {
            if let Some(item) = self.items.remove(&key) {
                log::info!("{}: removed; its data has moved", item.want.what());
                reports.push(done(item.want, Ok(())));
            }
        }
        reports
    }
}

fn done(want: RemoveWant, outcome: Result<(), String>) -> Report {
    Report::Removed(RemovalReport {
        agent_id: want.agent_id,
        device: want.device,
        outcome,
    })
}

/// Asks for the removal: the object's id when accepted, `None` when it is gone already.
fn start(c: &mut GatewayClient, want: &RemoveWant) -> Result<Option<String>, GatewayError> {
    let sds_id = match &want.sds_id {
        Some(id) => Some(id.clone()),
        None => api::sds_id(c, &want.sds_name)?,
    };
    let Some(sds_id) = sds_id else {
        return Ok(None);
    };
    let (id, removal) = match &want.device {
        None => (sds_id.clone(), api::remove_sds(c, &sds_id)),
        Some(path) => {
            let on_sds = match api::sds_devices(c, &sds_id) {
                Ok(list) => list,
                Err(e) if e.error_code().is_some_and(|c| c != 0) => return Ok(None),
                Err(e) => return Err(e),
            };
            let Some(device) = on_sds
                .into_iter()
                .find(|d| &d.device_current_path_name == path)
            else {
                return Ok(None);
            };
            (device.id.clone(), api::remove_device(c, &device.id))
        }
    };
    Ok(match removal? {
        Removal::Started => Some(id),
        Removal::Gone => None,
    })
}
