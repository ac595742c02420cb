//! What the MDM learns from the hosts: whether an SDS process listens where an SDS is added
//! (and which process: one that was restarted broke its connection), the devices it can open,
//! and whether each MDM member's process runs. A real MDM connects to the SDS at the address
//! it is given and has the SDS open each device, so it refuses an address where no SDS
//! process listens, a second SDS at an address whose one SDS process is taken, and a device
//! path the host lacks; and it loses an SDS or a member whose host or process goes away. The
//! dev gateway asks a [`HostDirectory`] (the dev cluster's stand-in hosts, whose state files
//! are the one owner of these facts) and keeps none of them itself; a gateway without one (a
//! gateway alone, in its own tests) knows no hosts and accepts any address and path.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// One host as the MDM would find it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The process id of the SDS listening on the host (on the default SDS port); `None`
    /// when none runs or the host is down.
    pub sds_process: Option<u32>,
    /// Absolute paths of the host's device nodes (`/dev/xvdb`, `/dev/disk/by-id/...`).
    pub device_paths: BTreeSet<String>,
    /// `None`: no MDM is installed on the host; else whether its `mdm` process runs (false
    /// while the host is down).
    pub mdm_running: Option<bool>,
}

impl HostFacts {
    pub fn sds_running(&self) -> bool {
        self.sds_process.is_some()
    }
}

/// Answers the hosts at some addresses, one answer per address in order: `Some(facts)`,
/// `Some(HostFacts::default())` when no host has the address (nothing listens there), `None`
/// when the address is a host this directory cannot see into (a synthetic agent): then the
/// gateway does not check it.
type LookUp = dyn Fn(&[&str]) -> Vec<Option<HostFacts>> + Send + Sync;

/// The hosts the gateway consults before it adds an SDS or a device, and watches after.
#[derive(Clone)]
pub struct HostDirectory(Arc<LookUp>);

impl HostDirectory {
    pub fn new(
        look_up: impl Fn(&[&str]) -> Vec<Option<HostFacts>> + Send + Sync + 'static,
    ) -> Self {
        HostDirectory(Arc::new(look_up))
    }

    pub fn look_up(&self, ip: &str) -> Option<HostFacts> {
        self.look_up_all(&[ip]).pop().flatten()
    }

    /// Several addresses at once (one look at the cluster for all of them).
    pub fn look_up_all(&self, ips: &[&str]) -> Vec<Option<HostFacts>> {
        let mut answers = (self.0)(ips);
        answers.resize(ips.len(), None);
        answers
    }
}

impl fmt::Debug for HostDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HostDirectory")
    }
}

/// Why the MDM refuses; the caller turns it into the gateway's error reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No SDS listens at `ip:port`.
    NoSdsAt(String, u64),
    /// The host at the SDS's address has no device at this path.
    NoDevice(String, String),
}

/// The SDS port a host's one SDS process listens on.
pub const SDS_PROCESS_PORT: u64 = 7072;

/// An SDS may be added at `ips`/`port` only where an SDS process listens: on every address
/// of the SDS role that the directory can see into, the host runs the SDS on `port`.
pub fn check_sds_address(
    hosts: Option<&HostDirectory>,
    sds_ips: &[&str],
    port: u64,
) -> Result<(), Refusal> {
    let Some(hosts) = hosts else { return Ok(()) };
    for ip in sds_ips {
        let Some(facts) = hosts.look_up(ip) else {
            continue;
        };
        if !facts.sds_running() || port != SDS_PROCESS_PORT {
            return Err(Refusal::NoSdsAt(ip.to_string(), port));
        }
    }
    Ok(())
}

/// A device may be added to an SDS only when the SDS's host has that device path (the
/// first address the directory can see into is the host's).
pub fn check_device_path(
    hosts: Option<&HostDirectory>,
    sds_ips: &[&str],
    path: &str,
) -> Result<(), Refusal> {
    let Some(hosts) = hosts else { return Ok(()) };
    let Some((ip, facts)) = sds_ips
        .iter()
        .find_map(|ip| hosts.look_up(ip).map(|f| (ip, f)))
    else {
        return Ok(());
    };
    if facts.device_paths.contains(path) {
        Ok(())
    } else {
        Err(Refusal::NoDevice(ip.to_string(), path.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> HostDirectory {
        HostDirectory::new(|ips| {
            ips.iter()
                .map(|ip| match *ip {
                    "10.0.0.1" => Some(HostFacts {
                        sds_process: Some(900),
                        device_paths: ["/dev/xvdb".to_string()].into(),
                        mdm_running: None,
                    }),
                    "10.0.0.2" => Some(HostFacts::default()),
                    _ => None,
                })
                .collect()
        })
    }

    #[test]
    fn an_sds_needs_a_running_sds_process_on_its_port() {
        let d = directory();
        assert_eq!(check_sds_address(Some(&d), &["10.0.0.1"], 7072), Ok(()));
        assert_eq!(
            check_sds_address(Some(&d), &["10.0.0.1"], 7073),
            Err(Refusal::NoSdsAt("10.0.0.1".into(), 7073))
        );
        assert_eq!(
            check_sds_address(Some(&d), &["10.0.0.2"], 7072),
            Err(Refusal::NoSdsAt("10.0.0.2".into(), 7072))
        );
        assert_eq!(check_sds_address(Some(&d), &["10.9.9.9"], 7073), Ok(()));
        assert_eq!(check_sds_address(None, &["10.0.0.2"], 1), Ok(()));
    }

    #[test]
    fn a_device_must_exist_on_the_sds_host() {
        let d = directory();
        assert_eq!(
            check_device_path(Some(&d), &["10.0.0.1"], "/dev/xvdb"),
            Ok(())
        );
        assert_eq!(
            check_device_path(Some(&d), &["10.9.9.9", "10.0.0.1"], "/dev/xvdz"),
            Err(Refusal::NoDevice("10.0.0.1".into(), "/dev/xvdz".into()))
        );
        assert_eq!(
            check_device_path(Some(&d), &["10.9.9.9"], "/dev/xvdz"),
            Ok(())
        );
    }
}
