//! The node plan as the scheduler serves it (`GET /api/v1/executors/<id>/plan`). Fields the
//! executor does not use are ignored; a missing optional field takes its default, so an
//! older scheduler's plan still parses.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Deserialize, Default, Clone)]
pub struct Plan {
    pub version: u64,
    #[serde(default)]
    pub hostname: String,
    #[serde(default = "data_persona")]
    pub persona: String,
    #[serde(default)]
    pub layout: Layout,
    /// The phase the scheduler shows now.
    #[serde(default)]
    pub phase: String,
    /// The phase the node's last executor reached; a new executor resumes there.
    #[serde(default)]
    pub resume: Option<String>,
    #[serde(default)]
    pub storage_ready: bool,
    #[serde(default)]
    pub runs_scheduler: bool,
    #[serde(default)]
    pub reboot_wait: bool,
    #[serde(default)]
    pub install: Install,
    #[serde(default)]
    pub secrets: Option<Secrets>,
    /// Experimental mode: the SDC waits for the trio's addresses in `install.mdm_ips`.
    #[serde(default)]
    pub experimental: bool,
    /// Experimental mode, MDM nodes: the cluster build (see [`crate::node::cluster`]).
    #[serde(default)]
    pub cluster_init: Option<ClusterInit>,
}

fn data_persona() -> String {
    "data".into()
}

impl Plan {
    pub fn is_mdm(&self) -> bool {
        self.persona != "data"
    }

    pub fn password(&self) -> Option<&str> {
        self.secrets
            .as_ref()
            .map(|s| s.gateway_password.as_str())
            .filter(|p| !p.is_empty())
    }

    /// REX-Ray's gateway user and password, when the scheduler was given both.
    pub fn rexray_user(&self) -> Option<(&str, &str)> {
        let user = self.install.volume_driver.username.as_deref()?;
        let password = self
            .secrets
            .as_ref()
            .map(|s| s.rexray_password.as_str())
            .filter(|p| !p.is_empty())?;
        Some((user, password))
    }

    /// Devices the agent's attributes name (every domain and pool), in order, no repeats.
    pub fn listed_devices(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for pools in self.layout.sds.values() {
            for devices in pools.values() {
                for d in devices {
                    if !out.contains(d) {
                        out.push(d.clone());
                    }
                }
            }
        }
        out
    }

    /// The domain and pool this node consumes volumes from: the first SDC pair, else the
    /// first SDS pair, else the flags (host-steps section 7; maps are ordered, so this is
    /// deterministic).
    pub fn consuming_pool(&self) -> (String, String) {
        if let Some((pd, pool)) = self
            .layout
            .sdc
            .iter()
            .find_map(|(pd, pools)| Some((pd, pools.first()?)))
        {
            return (pd.clone(), pool.clone());
        }
        if let Some((pd, pool)) = self
            .layout
            .sds
            .iter()
            .find_map(|(pd, pools)| Some((pd, pools.keys().next()?)))
        {
            return (pd.clone(), pool.clone());
        }
        (
            self.install.protection_domain.clone(),
            self.install.storage_pool.clone(),
        )
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Plan {{ version: {}, persona: {}, phase: {}, resume: {:?}, storage_ready: {}, secrets: {} }}",
            self.version,
            self.persona,
            self.phase,
            self.resume,
            self.storage_ready,
            if self.secrets.is_some() { "present" } else { "none" }
        )
    }
}

#[derive(Deserialize, Default, Clone, Debug)]
pub struct Layout {
    #[serde(default)]
    pub sds: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    pub sdc: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize, Default, Clone, Debug)]
pub struct Install {
    #[serde(default)]
    pub packages: BTreeMap<String, Packages>,
    #[serde(default)]
    pub mdm_ips: Vec<String>,
    #[serde(default)]
    pub gateway: Option<String>,
    #[serde(default)]
    pub system_name: String,
    #[serde(default)]
    pub system_id: Option<String>,
    #[serde(default)]
    pub protection_domain: String,
    #[serde(default)]
    pub storage_pool: String,
    #[serde(default)]
    pub debug: bool,
    #[serde(default)]
    pub volume_driver: VolumeDriver,
}

/// Where REX-Ray, dvdcli and the isolator come from, and REX-Ray's gateway user.
#[derive(Deserialize, Default, Clone, Debug)]
pub struct VolumeDriver {
    /// By platform key (`ubuntu14`, `rhel7`).
    #[serde(default)]
    pub packages: BTreeMap<String, DriverPackages>,
    #[serde(default)]
    pub isolator: Option<Download>,
    #[serde(default)]
    pub username: Option<String>,
}

#[derive(Deserialize, Default, Clone, Debug)]
pub struct DriverPackages {
    pub rexray: Option<Download>,
    pub dvdcli: Option<Download>,
}

#[derive(Deserialize, Default, Clone, Debug)]
pub struct Download {
    pub url: String,
    #[serde(default)]
    pub sha256: Option<String>,
}

#[derive(Deserialize, Default, Clone, Debug)]
pub struct Packages {
    pub mdm: Option<String>,
    pub sds: Option<String>,
    pub sdc: Option<String>,
    pub lia: Option<String>,
    pub gw: Option<String>,
}

/// An MDM node's part of the cluster build, as the scheduler computes it.
#[derive(Deserialize, Default, Clone, Debug, PartialEq, Eq)]
pub struct ClusterInit {
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub primary_ip: Option<String>,
    /// Primary and secondary, for the gateway's `mdm.ip.addresses`.
    #[serde(default)]
    pub mdm_ips: Vec<String>,
    /// The primary's `scli` steps, in order (empty while it must wait, and for the others).
    #[serde(default)]
    pub steps: Vec<ScliStep>,
    #[serde(default)]
    pub waiting_for: Option<String>,
    #[serde(default)]
    pub cluster_created: bool,
}

#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScliStep {
    pub name: String,
    pub args: Vec<String>,
    /// Which password goes on each line of standard input: `factory` or `admin`.
    #[serde(default)]
    pub stdin: Vec<String>,
    /// Skip the step when this holds before it.
    #[serde(default)]
    pub check: Option<Check>,
    /// After the step exits 0, `check` must hold (polled with a deadline).
    #[serde(default)]
    pub verify: bool,
}

/// The state that shows a step done (the scheduler's `mdm_cluster::Check`).
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Check {
    ClusterExists,
    PasswordSet,
    Member { ip: String },
    Mode { mode: String },
    Named { name: String },
}

#[derive(Deserialize, Clone)]
pub struct Secrets {
    #[serde(default)]
    pub gateway_password: String,
    /// The volume driver's scoped gateway user's password (every node).
    #[serde(default)]
    pub rexray_password: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_plan_parses_with_defaults() {
        let p: Plan = serde_json::from_str(r#"{"version": 3}"#).unwrap();
        assert_eq!(p.persona, "data");
        assert!(!p.storage_ready && p.resume.is_none() && !p.is_mdm());
        assert_eq!(p.consuming_pool(), (String::new(), String::new()));
    }

    #[test]
    fn layout_decides_devices_and_pool() {
        let p: Plan = serde_json::from_str(
            r#"{"version":1,"persona":"primary",
                "layout":{"sds":{"pd1":{"fast":["/dev/sdb","/dev/sdc"],"slow":["/dev/sdb"]}},
                          "sdc":{"pd2":["p9"]}},
                "install":{"protection_domain":"d","storage_pool":"s"},
                "secrets":{"gateway_password":"Pw-123"}}"#,
        )
        .unwrap();
        assert_eq!(p.listed_devices(), ["/dev/sdb", "/dev/sdc"]);
        assert_eq!(p.consuming_pool(), ("pd2".into(), "p9".into()));
        assert_eq!(p.password(), Some("Pw-123"));
        assert!(!format!("{p:?}").contains("Pw-123"));
    }
}
