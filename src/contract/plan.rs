//! The node plan (`GET /api/v1/executors/<id>/plan`): what the scheduler tells an executor
//! about its node. The scheduler serializes it from borrowed parts of its model (no copy per
//! plan); the executor reads it into owned parts. Fields an executor does not know are
//! ignored and a missing optional field takes its default, so plans of an older or newer
//! scheduler still parse.
//!
//! Secrets travel only in [`PlanSecrets`], apart from the hashed body: the plan's version
//! does not depend on their values, and `Debug` never shows them.

use super::platform::{Component, DriverPackage, Platform};
use super::{Persona, Phase};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// A versioned plan: `{"version": N, <body fields>, "secrets": {...}}`. The scheduler
/// serializes a `NodePlan<&PlanBody>`; the executor reads a `NodePlan` (owned body).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct NodePlan<'s, B = PlanBody<'static>> {
    /// Changes exactly when the body or the secrets' presence does.
    pub version: u64,
    #[serde(flatten)]
    pub body: B,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<PlanSecrets<'s>>,
}

impl<B> std::ops::Deref for NodePlan<'_, B> {
    type Target = B;
    fn deref(&self) -> &B {
        &self.body
    }
}

impl NodePlan<'_, PlanBody<'_>> {
    /// The admin password (MDM nodes in experimental mode), when given.
    pub fn password(&self) -> Option<&str> {
        self.secrets
            .as_ref()
            .and_then(|s| s.gateway_password.as_deref())
            .filter(|p| !p.is_empty())
    }

    /// REX-Ray's gateway user and password, when the scheduler was given both.
    pub fn rexray_user(&self) -> Option<(&str, &str)> {
        let user = self.install.volume_driver.username.as_deref()?;
        let password = self
            .secrets
            .as_ref()
            .and_then(|s| s.rexray_password.as_deref())
            .filter(|p| !p.is_empty())?;
        Some((user, password))
    }
}

impl fmt::Debug for NodePlan<'_, PlanBody<'_>> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |p: Option<Phase>| p.map_or("none", Phase::as_str);
        write!(
            f,
            "Plan {{ version: {}, persona: {}, phase: {}, resume: {}, storage_ready: {}, secrets: {} }}",
            self.version,
            self.persona,
            name(self.phase),
            name(self.resume),
            self.storage_ready,
            if self.secrets.is_some() { "present" } else { "none" }
        )
    }
}

/// Everything of a plan but its version and secrets; its JSON is what the version hashes.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct PlanBody<'a> {
    #[serde(default)]
    pub executor_id: Cow<'a, str>,
    #[serde(default)]
    pub agent_id: Cow<'a, str>,
    #[serde(default)]
    pub hostname: Cow<'a, str>,
    #[serde(default)]
    pub persona: Persona,
    #[serde(default)]
    pub layout: Cow<'a, Layout>,
    /// The phase the scheduler has recorded for the node.
    #[serde(default, deserialize_with = "super::phase::lenient")]
    pub phase: Option<Phase>,
    #[serde(default)]
    pub devices: Cow<'a, [String]>,
    #[serde(default)]
    pub attached: Cow<'a, [String]>,
    /// The storage-attach handshake: the executor leaves `storage-attach` once this is true.
    #[serde(default)]
    pub storage_ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<Cow<'a, str>>,
    /// What the executor needs to install the node.
    #[serde(default)]
    pub install: Cow<'a, Install>,
    /// The phase the node's last executor reached (kept across relaunches); a new executor
    /// resumes there.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::phase::lenient"
    )]
    pub resume: Option<Phase>,
    /// The node runs the scheduler: it reboots last.
    #[serde(default)]
    pub runs_scheduler: bool,
    /// Do not reboot yet: the node runs the scheduler and others are still on their way, or
    /// the disruption budget has no room for this node's reboot (`waiting` says why).
    #[serde(default)]
    pub reboot_wait: bool,
    /// Why the node's reboot, or the day-two step it asked for, waits, one line
    /// (`waiting: mdm-2 is not back (reboot-final)`, `waiting: sds-2 of pd1 is rebuilding`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// Experimental mode: the SDC waits for the trio's addresses (`install.mdm_ips`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub experimental: bool,
    /// Experimental mode, MDM nodes: their part of the MDM cluster build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_init: Option<ClusterInit>,
    /// The generation of the scheduler's declared target (packages, devices, volume driver,
    /// executor binary) this node should reach.
    #[serde(default)]
    pub target_generation: u64,
    /// The generation this node last reached; below `target_generation` a running executor
    /// walks the day-two steps (`contract::rollout`).
    #[serde(default)]
    pub generation: u64,
    /// The day-two step this node may start now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<super::rollout::Step>,
    /// The node is decommissioned and its SDS gone from the cluster: a running executor stops
    /// the node's storage services and ends its task (`TASK_FINISHED`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decommission: bool,
    /// An idle running node asks for its plan at least this often (seconds), whether nudged
    /// or not: its sign of life, a third of the scheduler's `-health.stale`, after which a
    /// silent executor's node is `unknown`. 0 (an older scheduler): [`DEFAULT_IDLE_POLL_S`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_poll_s: u64,
}

/// How often an idle node asks for its plan when the plan does not say (`idle_poll_s` 0): a
/// third of the scheduler's default `-health.stale`.
pub const DEFAULT_IDLE_POLL_S: u64 = 60;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PlanBody<'_> {
    pub fn is_mdm(&self) -> bool {
        self.persona.is_mdm()
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

/// Secrets handed to one executor. Only MDM nodes get the gateway (admin) password; every
/// node gets the volume driver's scoped user's password.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct PlanSecrets<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_password: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rexray_password: Option<Cow<'a, str>>,
}

impl fmt::Debug for PlanSecrets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PlanSecrets { <redacted> }")
    }
}

/// The storage layout declared by agent attributes (design section 3).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Layout {
    /// Protection domain -> pool -> devices this agent contributes (SDS).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sds: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Protection domain -> pools this agent consumes volumes from (SDC).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sdc: BTreeMap<String, Vec<String>>,
}

impl Layout {
    /// No attributes: the single global pool of the flags, devices discovered.
    pub fn is_global(&self) -> bool {
        self.sds.is_empty() && self.sdc.is_empty()
    }
}

/// The install settings every node's plan carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Install {
    /// By platform key ([`Platform::key`]): the storage packages' URLs.
    #[serde(default)]
    pub packages: BTreeMap<String, Packages>,
    /// The storage software's version as the vendor's package files carry it
    /// (`2.0-10000.2072`): a package given no URL must be installed at it already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_version: Option<String>,
    /// Primary and secondary MDM, the SDC's `MDM_IP` (empty in experimental mode until the
    /// framework has built its MDM trio).
    #[serde(default)]
    pub mdm_ips: Vec<String>,
    /// `host[:port]` of the gateway the volume driver talks to (`https://<it>/api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    #[serde(default)]
    pub system_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_id: Option<String>,
    #[serde(default)]
    pub protection_domain: String,
    #[serde(default)]
    pub storage_pool: String,
    /// `-debug`: never reboot.
    #[serde(default)]
    pub debug: bool,
    #[serde(default)]
    pub volume_driver: VolumeDriver,
}

impl Install {
    /// Where `component`'s package for `platform` comes from, with its SHA-256 when the
    /// scheduler was given one.
    pub fn package(&self, platform: Platform, component: Component) -> Option<Download> {
        self.packages.get(platform.key())?.get(component)
    }
}

/// The storage packages of one platform, by component: each URL, and apart (so that the
/// plan's URL fields keep their shape) the SHA-256 of those given one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packages {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sds: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lia: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
    /// By component key ([`Component::key`]): lower-case hex.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sha256: BTreeMap<String, String>,
}

impl Packages {
    pub fn get(&self, c: Component) -> Option<Download> {
        Some(Download {
            url: self.slot(c).clone()?,
            sha256: self.sha256.get(c.key()).cloned(),
        })
    }

    pub fn set(&mut self, c: Component, download: Option<Download>) {
        let (url, sha256) = match download {
            Some(d) => (Some(d.url), d.sha256),
            None => (None, None),
        };
        *self.slot_mut(c) = url;
        match sha256 {
            Some(hex) => self.sha256.insert(c.key().to_owned(), hex),
            None => self.sha256.remove(c.key()),
        };
    }

    fn slot(&self, c: Component) -> &Option<String> {
        match c {
            Component::Mdm => &self.mdm,
            Component::Sds => &self.sds,
            Component::Sdc => &self.sdc,
            Component::Lia => &self.lia,
            Component::Gateway => &self.gw,
        }
    }

    fn slot_mut(&mut self, c: Component) -> &mut Option<String> {
        match c {
            Component::Mdm => &mut self.mdm,
            Component::Sds => &mut self.sds,
            Component::Sdc => &mut self.sdc,
            Component::Lia => &mut self.lia,
            Component::Gateway => &mut self.gw,
        }
    }
}

/// Where REX-Ray, dvdcli and the isolator come from, and REX-Ray's gateway user (whose
/// password is a plan secret).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeDriver {
    /// By platform key ([`Platform::key`]).
    #[serde(default)]
    pub packages: BTreeMap<String, DriverPackages>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolator: Option<Download>,
    /// The scoped gateway user; `None`: REX-Ray's configuration gets no credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// REX-Ray verifies the gateway's certificate (`scaleio.insecure: false`): only when the
    /// scheduler verified it by the one check REX-Ray can repeat, a chain to a CA with the
    /// dialled address among its names. REX-Ray cannot pin a certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify_gateway: bool,
}

impl VolumeDriver {
    /// Where package `p` comes from on `platform`, when the scheduler was given it.
    pub fn download(&self, platform: Platform, p: DriverPackage) -> Option<&Download> {
        self.packages.get(platform.key())?.get(p)
    }
}

/// The volume driver's package downloads of one platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverPackages {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rexray: Option<Download>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dvdcli: Option<Download>,
}

impl DriverPackages {
    pub fn get(&self, p: DriverPackage) -> Option<&Download> {
        match p {
            DriverPackage::Rexray => self.rexray.as_ref(),
            DriverPackage::Dvdcli => self.dvdcli.as_ref(),
        }
    }
}

/// A file to download, with the SHA-256 (lower-case hex) it must have when one is given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Download {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// An MDM node's part of the cluster build (experimental mode; host-steps sections 2 and 4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInit {
    #[serde(default)]
    pub role: Persona,
    /// The primary's address: where `scli --mdm_ip` goes for the installation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_ip: Option<String>,
    /// Primary and secondary, for the gateway's `mdm.ip.addresses`.
    #[serde(default)]
    pub mdm_ips: Vec<String>,
    /// The primary's `scli` steps, in order, once every MDM node has installed its MDM
    /// package; empty otherwise (and always for the secondary and tie-breaker).
    #[serde(default)]
    pub steps: Vec<ScliStep>,
    /// Why the node must wait, when it must.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// The primary has passed `cluster-init`: the cluster exists, named, three nodes.
    #[serde(default)]
    pub cluster_created: bool,
}

/// One `scli` run of the cluster build. No step carries a password: `stdin` names which one
/// the executor writes to the command's standard input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScliStep {
    /// What it does, for logs and error messages.
    pub name: String,
    /// The arguments after `scli`; never a password.
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stdin: Vec<StdinPassword>,
    /// Skip the step when this holds before it. `None`: always run (a login).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// The step brings `check` about: after it exits 0, `check` must hold (polled with a
    /// deadline). False for the factory login, which `check` only makes unnecessary.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
}

/// Which password a step reads on its standard input, one line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StdinPassword {
    /// The factory password `admin` (not a secret).
    Factory,
    /// The admin password the plan's secrets carry.
    Admin,
}

/// The state that shows a step done, read with `scli --query_cluster` (or, for the
/// password, a login with the new one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Check {
    /// `scli --query_cluster` exits 0.
    ClusterExists,
    /// A login with the admin password succeeds.
    PasswordSet,
    /// `--query_cluster` lists an MDM with this address.
    Member { ip: String },
    /// `--query_cluster` shows `Mode: <mode>`.
    Mode { mode: String },
    /// `--query_cluster` shows `Name: <name>`.
    Named { name: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan as the scheduler served it before this module existed.
    const CAPTURED: &str = include_str!("testdata/plan.json");

    #[test]
    fn a_captured_plan_parses_and_serializes_to_the_same_bytes() {
        let p: NodePlan = serde_json::from_str(CAPTURED.trim()).unwrap();
        assert_eq!(p.persona, Persona::Primary);
        assert_eq!(
            (p.phase, p.resume),
            (Some(Phase::ClusterInit), Some(Phase::ClusterInit))
        );
        assert_eq!(
            p.install.package(Platform::Rhel7, Component::Sdc),
            Some(Download {
                url: "http://repo/EMC-ScaleIO-sdc-2.0-10000.2072.el7.x86_64.rpm".into(),
                sha256: None
            })
        );
        let sds = p.install.package(Platform::Ubuntu1404, Component::Sds);
        assert_eq!(
            sds.and_then(|d| d.sha256).as_deref(),
            Some("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae")
        );
        let rexray = p
            .install
            .volume_driver
            .download(Platform::Ubuntu1404, DriverPackage::Rexray)
            .unwrap();
        assert!(rexray.sha256.is_some());
        let ci = p.cluster_init.as_ref().unwrap();
        assert_eq!(ci.role, Persona::Primary);
        assert_eq!(
            ci.steps[2].stdin,
            [StdinPassword::Factory, StdinPassword::Admin]
        );
        assert_eq!(
            ci.steps[4].check,
            Some(Check::Member {
                ip: "10.0.0.2".into()
            })
        );
        assert_eq!(p.password(), Some("Gw-pass"));
        assert_eq!(p.rexray_user(), Some(("rexray", "Vol-pw1")));
        let shown = format!("{p:?}");
        assert!(
            !shown.contains("Gw-pass") && !shown.contains("Vol-pw1"),
            "{shown}"
        );
        // The scheduler's side: the borrowed body writes the same JSON.
        let plan = NodePlan {
            version: p.version,
            body: &p.body,
            secrets: p.secrets.clone(),
        };
        assert_eq!(serde_json::to_string(&plan).unwrap(), CAPTURED.trim());
    }

    #[test]
    fn a_minimal_plan_parses_with_defaults() {
        let p: NodePlan = serde_json::from_str(r#"{"version": 3}"#).unwrap();
        assert_eq!(p.persona, Persona::Data);
        assert!(!p.storage_ready && p.resume.is_none() && !p.is_mdm());
        assert_eq!(p.consuming_pool(), (String::new(), String::new()));
        let newer: NodePlan =
            serde_json::from_str(r#"{"version":1,"phase":"dancing","resume":"dancing","x":1}"#)
                .unwrap();
        assert_eq!((newer.phase, newer.resume), (None, None));
    }

    #[test]
    fn layout_decides_devices_and_pool() {
        let p: NodePlan = serde_json::from_str(
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

    #[test]
    fn an_unknown_stdin_password_does_not_parse() {
        let step = r#"{"name":"x","args":[],"stdin":["root"]}"#;
        let e = serde_json::from_str::<ScliStep>(step).unwrap_err();
        assert!(e.to_string().contains("root"), "{e}");
    }
}
