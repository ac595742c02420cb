//! What every node plan tells its executor about the install: package URLs per platform,
//! the MDM addresses for the SDC, the gateway and storage system for the volume driver, and
//! the reboot policy. Pure: built once from the flags; the secrets stay out of the plan's
//! body (the gateway password goes only into MDM nodes' plans, see `dispatcher/executor_api.rs`).

pub mod mdm_cluster;
pub mod volume_driver;

use crate::contract::plan::Install;
use crate::contract::Platform;
use crate::scheduler::flags::Config;
use crate::scheduler::model::{Node, Phase};
use crate::secret::Secret;

/// The install settings every node's plan carries, and what the scheduler keeps beside them.
#[derive(Debug, Clone, Default)]
pub struct InstallSettings {
    /// What every plan carries.
    pub plan: Install,
    /// The volume driver user's password: handed out as a plan secret, never in `plan`.
    pub rexray_password: Option<Secret>,
    /// Host name or address of the scheduler (`-rest.address`): its node reboots last.
    pub scheduler_host: String,
    /// Experimental mode: MDM nodes' plans carry the cluster build (`mdm_cluster`), and the
    /// SDC's addresses are the trio's.
    pub experimental: bool,
}

impl PartialEq for InstallSettings {
    fn eq(&self, other: &Self) -> bool {
        let pw = |p: &Option<Secret>| p.as_ref().map(|s| s.expose().to_owned());
        self.plan == other.plan
            && pw(&self.rexray_password) == pw(&other.rexray_password)
            && self.scheduler_host == other.scheduler_host
            && self.experimental == other.experimental
    }
}

impl Eq for InstallSettings {}

impl InstallSettings {
    pub fn from_config(c: &Config) -> InstallSettings {
        let s = &c.storage;
        // Every platform, given or not: the plan has always listed each.
        let packages = Platform::ALL
            .into_iter()
            .map(|p| {
                (
                    p.key().to_string(),
                    s.packages.get(&p).cloned().unwrap_or_default(),
                )
            })
            .collect();
        let mdm_ips = s
            .preconfig
            .map(|m| vec![m.primary.to_string(), m.secondary.to_string()])
            .unwrap_or_default();
        let gateway = s
            .lb_gateway
            .clone()
            .or_else(|| s.gateway.map(|g| g.to_string()))
            .or_else(|| s.preconfig.map(|m| m.primary.to_string()));
        let (volume_driver, rexray_password) =
            crate::scheduler::node_plan::volume_driver::from_config(c);
        InstallSettings {
            plan: Install {
                packages,
                storage_version: Some(s.version.clone()),
                mdm_ips,
                gateway,
                system_name: s.cluster_name.clone(),
                system_id: s.cluster_id.clone(),
                protection_domain: s.protection_domain.clone(),
                storage_pool: s.storage_pool.clone(),
                debug: c.debug,
                volume_driver,
            },
            rexray_password,
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

/// Whether the host of `node` is down for the reboot its executor asked for: the node is in a
/// reboot phase without an error (an executor that refuses to reboot again says why), reboots
/// are allowed (`-debug` forbids them) and it is not waiting its turn. Its launch ending then,
/// and its host coming back under a new agent id, is that reboot.
pub fn reboot_asked<'a>(
    node: &Node,
    install: &InstallSettings,
    all: impl Iterator<Item = &'a Node>,
) -> bool {
    matches!(node.phase, Phase::RebootPrerequisites | Phase::RebootFinal)
        && node.last_error.is_none()
        && !install.plan.debug
        && !reboot_wait(node, install.runs_scheduler(node), all)
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
    fn a_reboot_is_asked_for_in_a_reboot_phase_unless_forbidden_or_waiting() {
        let mut install = InstallSettings {
            scheduler_host: "h1".into(),
            ..Default::default()
        };
        let mut me = Node::new("a1", "h1", Persona::Data, 0);
        let mut other = Node::new("a2", "h2", Persona::Data, 0);
        other.phase = Phase::Running;
        let asked = |me: &Node, other: &Node, install: &InstallSettings| {
            reboot_asked(me, install, [me, other].into_iter())
        };
        for phase in [Phase::RebootPrerequisites, Phase::RebootFinal] {
            me.phase = phase;
            assert!(asked(&me, &other, &install), "{phase}");
        }
        me.phase = Phase::Packages;
        assert!(!asked(&me, &other, &install));
        me.phase = Phase::RebootPrerequisites;
        me.last_error = Some("the host rebooted once for this phase and ...".into());
        assert!(!asked(&me, &other, &install));
        me.last_error = None;
        me.phase = Phase::RebootFinal;
        // The scheduler's node waits while another is on its way.
        other.phase = Phase::Devices;
        assert!(!asked(&me, &other, &install));
        other.phase = Phase::Running;
        install.plan.debug = true;
        assert!(!asked(&me, &other, &install));
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
