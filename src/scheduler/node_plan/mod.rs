//! What every node plan tells its executor about the install (issue 10): package URLs per
//! platform, the MDM addresses for the SDC, the gateway and storage system for the volume
//! driver, and the reboot policy. Pure: built once from the flags; the secrets stay out
//! (the gateway password goes only into MDM nodes' plans, see `executors.rs`).

pub mod mdm_cluster;
pub mod volume_driver;

use crate::scheduler::flags::{Config, PackageUrls};
use crate::scheduler::model::{Node, Phase};
use serde::Serialize;
use std::collections::BTreeMap;

/// Package URLs of one platform, by component.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlatformPackages {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mdm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sds: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sdc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lia: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
}

impl From<&PackageUrls> for PlatformPackages {
    fn from(u: &PackageUrls) -> Self {
        PlatformPackages {
            mdm: u.mdm.clone(),
            sds: u.sds.clone(),
            sdc: u.sdc.clone(),
            lia: u.lia.clone(),
            gw: u.gw.clone(),
        }
    }
}

/// The install settings shared by every node's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InstallSettings {
    /// `ubuntu14` and `rhel7` (RHEL and CentOS 7 share packages).
    pub packages: BTreeMap<&'static str, PlatformPackages>,
    /// Primary and secondary MDM, the SDC's `MDM_IP` (empty in experimental mode until the
    /// framework has built its MDM trio).
    pub mdm_ips: Vec<String>,
    /// `host[:port]` of the gateway the volume driver talks to (`https://<it>/api`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    pub system_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_id: Option<String>,
    pub protection_domain: String,
    pub storage_pool: String,
    /// `-debug`: never reboot.
    pub debug: bool,
    /// REX-Ray, dvdcli and the isolator (issue 10, volume driver).
    pub volume_driver: crate::scheduler::node_plan::volume_driver::VolumeDriverPlan,
    /// Host name or address of the scheduler (`-rest.address`): its node reboots last.
    #[serde(skip)]
    pub scheduler_host: String,
    /// Experimental mode: MDM nodes' plans carry the cluster build (`mdm_cluster`), and the
    /// SDC's addresses are the trio's.
    #[serde(skip)]
    pub experimental: bool,
}

impl InstallSettings {
    pub fn from_config(c: &Config) -> InstallSettings {
        let s = &c.storage;
        let packages = BTreeMap::from([
            ("ubuntu14", PlatformPackages::from(&s.packages.ubuntu14)),
            ("rhel7", PlatformPackages::from(&s.packages.rhel7)),
        ]);
        let mdm_ips = s
            .preconfig
            .map(|m| vec![m.primary.to_string(), m.secondary.to_string()])
            .unwrap_or_default();
        let gateway = s
            .lb_gateway
            .clone()
            .or_else(|| s.gateway.map(|g| g.to_string()))
            .or_else(|| s.preconfig.map(|m| m.primary.to_string()));
        InstallSettings {
            packages,
            mdm_ips,
            gateway,
            system_name: s.cluster_name.clone(),
            system_id: s.cluster_id.clone(),
            protection_domain: s.protection_domain.clone(),
            storage_pool: s.storage_pool.clone(),
            debug: c.debug,
            volume_driver:
                crate::scheduler::node_plan::volume_driver::VolumeDriverPlan::from_config(c),
            scheduler_host: c.rest_address.clone(),
            experimental: c.experimental,
        }
    }

    /// The node runs the scheduler (its host name or address is the scheduler's).
    pub fn runs_scheduler(&self, node: &Node) -> bool {
        !self.scheduler_host.is_empty() && node.hostname == self.scheduler_host
    }
}

/// The scheduler's own node reboots last: it waits while any other node is still on its
/// way (not running, failed or lost), so that the cluster never loses its scheduler while
/// others still need it.
pub fn reboot_wait<'a>(
    node: &Node,
    runs_scheduler: bool,
    all: impl Iterator<Item = &'a Node>,
) -> bool {
    runs_scheduler
        && all
            .filter(|n| n.agent_id != node.agent_id)
            .any(|n| !matches!(n.phase, Phase::Running | Phase::Failed | Phase::Lost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::Persona;

    #[test]
    fn scheduler_node_waits_for_every_other_node() {
        let me = Node::new("a1", "h1", Persona::Data, 0);
        let mut other = Node::new("a2", "h2", Persona::Data, 0);
        other.phase = Phase::Packages;
        assert!(reboot_wait(&me, true, [&me, &other].into_iter()));
        assert!(!reboot_wait(&me, false, [&me, &other].into_iter()));
        other.phase = Phase::Running;
        assert!(!reboot_wait(&me, true, [&me, &other].into_iter()));
        other.phase = Phase::Failed;
        assert!(!reboot_wait(&me, true, [&me, &other].into_iter()));
    }

    #[test]
    fn runs_scheduler_compares_host_names() {
        let s = InstallSettings {
            scheduler_host: "h1".into(),
            ..Default::default()
        };
        assert!(s.runs_scheduler(&Node::new("a1", "h1", Persona::Data, 0)));
        assert!(!s.runs_scheduler(&Node::new("a2", "h2", Persona::Data, 0)));
        assert!(!InstallSettings::default().runs_scheduler(&Node::new("a", "", Persona::Data, 0)));
    }
}
