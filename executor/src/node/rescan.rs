//! A running node reads its devices again once per plan cycle, as its `devices` phase did
//! (discovery, or the plan's own list), so that a disk added to the host joins the pool
//! without an operator. The node's devices only grow here: a device that left the host stays
//! in the report (the host checks report it missing; removing it is an operator's act), so a
//! disk pulled by mistake is never dropped from the storage cluster behind anyone's back.

use super::api::ApiError;
use super::Node;
use crate::host::devices;
use storage_framework::contract::api::{Action, DevicesReport};

/// The devices to report when the host shows `found` usable and the scheduler holds `known`:
/// `known` with every new one after it, or `None` when there is nothing new.
pub fn joined(known: &[String], found: &[String]) -> Option<Vec<String>> {
    let new: Vec<&String> = found.iter().filter(|d| !known.contains(d)).collect();
    if new.is_empty() {
        return None;
    }
    let mut out = known.to_vec();
    for d in new {
        if !out.contains(d) {
            out.push(d.clone());
        }
    }
    Some(out)
}

impl Node {
    /// Reads the host's devices again and reports the node's devices when a new usable one
    /// appeared. A host that cannot be read, or a report the scheduler will not take, is logged
    /// and tried again next cycle; `Err` only when the scheduler refused this executor (it was
    /// replaced).
    pub fn rescan(&mut self) -> Result<(), ApiError> {
        let host = self.plan.hostname.clone();
        let listed = self.plan.listed_devices();
        let found = if listed.is_empty() {
            devices::discover(&self.facts).map(|d| d.usable)
        } else {
            // A declared layout names every device the node may give: only those of it that
            // are now on the host and unused can join.
            Ok(listed
                .into_iter()
                .filter(|d| devices::check_listed(&self.facts, std::slice::from_ref(d)).is_ok())
                .collect())
        };
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                log::warn!("node {host}: devices not read again: {e}");
                return Ok(());
            }
        };
        let Some(devices) = joined(&self.plan.devices, &found) else {
            return Ok(());
        };
        let new: Vec<&str> = devices[self.plan.devices.len()..]
            .iter()
            .map(String::as_str)
            .collect();
        log::info!("node {host}: new device(s) {}; reporting", new.join(", "));
        let report = DevicesReport {
            devices: devices.into(),
        };
        match self.api.report(Action::Devices, &report) {
            Ok(_) => Ok(()),
            // Not this executor refused, but the report: the checks go on, and the next cycle
            // reports it again (one line a cycle while the host shows that device).
            Err(ApiError::Rejected(e)) => {
                log::error!("node {host}: the scheduler will not take the devices: {e}");
                Ok(())
            }
            Err(e) => {
                log::warn!("node {host}: host checks end, the scheduler refused the devices: {e}");
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_a_new_device_is_worth_a_report_and_none_is_dropped() {
        // (known, found usable, reported)
        type Case<'a> = (&'a [&'a str], &'a [&'a str], Option<&'a [&'a str]>);
        let table: [Case; 5] = [
            (&["/dev/xvdb"], &["/dev/xvdb"], None),
            (
                &["/dev/xvdb"],
                &["/dev/xvdb", "/dev/sdd"],
                Some(&["/dev/xvdb", "/dev/sdd"]),
            ),
            // Gone from the host: still the node's (the host checks report it missing).
            (&["/dev/xvdb", "/dev/xvdc"], &["/dev/xvdb"], None),
            (
                &["/dev/xvdb", "/dev/xvdc"],
                &["/dev/sdd"],
                Some(&["/dev/xvdb", "/dev/xvdc", "/dev/sdd"]),
            ),
            (&[], &[], None),
        ];
        for (known, found, reported) in table {
            assert_eq!(
                joined(&v(known), &v(found)),
                reported.map(v),
                "{known:?} {found:?}"
            );
        }
    }
}
