//! Prerequisite checks of a pre-configured storage cluster, run before the scheduler
//! subscribes (design section 2, step 2): the gateway accepts the password; the chosen system
//! has its MDMs at the configured addresses and runs 2.0.1-2072 or newer within 2.x; the
//! protection domain and storage pool exist.
//!
//! The decisions ([`check_system`], [`parse_version`]) are pure functions of the gateway's
//! typed answers; [`run`] only fetches what they need.

use crate::gateway::api;
use crate::gateway::client::{GatewayClient, GatewayError};
use crate::gateway::types::{MdmCluster, MdmMember, System};
use crate::scheduler::flags::{Config, Mdms};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Exit code of a failed prerequisite (2 is for bad flags).
pub const EXIT_PREREQUISITE: i32 = 3;

/// Oldest supported system: 2.0.1-2072, which the gateway reports as `R2_0.10000.2072`.
pub const MIN_VERSION: Version = Version {
    major: 2,
    minor: 0,
    build: 10000,
    patch: 2072,
};

/// What the flags ask for.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub cluster_id: Option<String>,
    pub cluster_name: String,
    pub mdms: Mdms,
    pub protection_domain: String,
    pub storage_pool: String,
}

impl Wanted {
    /// `None` in experimental mode: there is no cluster to check before the framework builds it.
    pub fn from_config(config: &Config) -> Option<Wanted> {
        if config.experimental {
            return None;
        }
        let s = &config.storage;
        Some(Wanted {
            cluster_id: s.cluster_id.clone(),
            cluster_name: s.cluster_name.clone(),
            mdms: s.preconfig?,
            protection_domain: s.protection_domain.clone(),
            storage_pool: s.storage_pool.clone(),
        })
    }
}

/// One failed prerequisite: what (a flag or a prerequisite) and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub subject: String,
    pub found: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "storage prerequisite failed: {}: {}",
            self.subject, self.found
        )
    }
}

fn fail(subject: &str, found: impl Into<String>) -> Failure {
    Failure {
        subject: subject.to_string(),
        found: found.into(),
    }
}

/// What passed, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    pub system_id: String,
    pub system_name: String,
    pub version: String,
    /// The primary and secondary have swapped roles (after an MDM failover).
    pub swapped: bool,
}

/// `R<major>_<minor>.<build>.<patch>`, as in `EMC ScaleIO Version: R2_0.10000.2072`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub build: u32,
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "R{}_{}.{}.{}",
            self.major, self.minor, self.build, self.patch
        )
    }
}

/// Reads the version out of `systemVersionName` (the last `R..._...` word).
pub fn parse_version(text: &str) -> Option<Version> {
    let word = text
        .split_whitespace()
        .rev()
        .find(|w| w.starts_with('R') && w.contains('_'))?;
    let (major, rest) = word[1..].split_once('_')?;
    let mut parts = rest.split('.');
    let minor = parts.next()?.parse().ok()?;
    let build = parts.next()?.parse().ok()?;
    let patch = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(Version {
        major: major.parse().ok()?,
        minor,
        build,
        patch,
    })
}

/// The gateway's address: `-storage.lbgateway`, else `-storage.preconfig.gateway`, else the
/// primary MDM; port 443 unless given.
pub fn gateway_address(config: &Config) -> Option<String> {
    const HTTPS: u16 = 443;
    let s = &config.storage;
    if let Some(lb) = &s.lb_gateway {
        if let Ok(ip) = lb.parse::<IpAddr>() {
            return Some(SocketAddr::new(ip, HTTPS).to_string());
        }
        let has_port = lb
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        return Some(if has_port {
            lb.clone()
        } else {
            format!("{lb}:{HTTPS}")
        });
    }
    let ip = s.gateway.or(s.preconfig.map(|m| m.primary))?;
    Some(SocketAddr::new(ip, s.gateway_port.unwrap_or(HTTPS)).to_string())
}

/// Chooses the system and checks its MDMs and version (pure).
pub fn check_system(systems: &[System], wanted: &Wanted) -> Result<Passed, Failure> {
    let system = choose_system(systems, wanted)?;
    let system_name = system.name.clone().unwrap_or_default();
    let swapped = check_mdms(&system.mdm_cluster, &system_name, &wanted.mdms)?;
    let version = check_version(system, &system_name)?;
    Ok(Passed {
        system_id: system.id.clone(),
        system_name,
        version: version.to_string(),
        swapped,
    })
}

/// The system `-storage.clusterid` names, else the one `-storage.clustername` names, else
/// the only one.
fn choose_system<'a>(systems: &'a [System], wanted: &Wanted) -> Result<&'a System, Failure> {
    let names = || -> Vec<String> {
        systems
            .iter()
            .map(|s| format!("{} (id {})", s.name.as_deref().unwrap_or("unnamed"), s.id))
            .collect()
    };
    if let Some(id) = &wanted.cluster_id {
        return systems.iter().find(|s| &s.id == id).ok_or_else(|| {
            fail(
                "-storage.clusterid",
                format!(
                    "no system with id {id:?}; the gateway has {}",
                    list(&names())
                ),
            )
        });
    }
    if let Some(s) = systems
        .iter()
        .find(|s| s.name.as_deref() == Some(wanted.cluster_name.as_str()))
    {
        return Ok(s);
    }
    match systems {
        [only] => Ok(only),
        _ => Err(fail(
            "-storage.clustername",
            format!(
                "no system named {:?}; the gateway has {}",
                wanted.cluster_name,
                list(&names())
            ),
        )),
    }
}

fn addresses(members: &[MdmMember]) -> Vec<String> {
    members
        .iter()
        .flat_map(MdmMember::addresses)
        .cloned()
        .collect()
}

/// The flags' MDMs hold their roles, or the primary and secondary have swapped them (after
/// an MDM failover): whether they have.
fn check_mdms(cluster: &MdmCluster, system_name: &str, mdms: &Mdms) -> Result<bool, Failure> {
    let masters = addresses(&cluster.masters);
    let slaves = addresses(&cluster.slaves);
    let tiebreakers = addresses(&cluster.tie_breakers);
    let found = format!(
        "system {system_name:?} has master {}, slaves {}, tie-breakers {}",
        list(&masters),
        list(&slaves),
        list(&tiebreakers)
    );
    let (primary, secondary, tiebreaker) = (
        mdms.primary.to_string(),
        mdms.secondary.to_string(),
        mdms.tiebreaker.to_string(),
    );
    let swapped =
        !masters.contains(&primary) && slaves.contains(&primary) && masters.contains(&secondary);
    if !swapped {
        if !masters.contains(&primary) {
            return Err(fail(
                "-storage.preconfig.primary",
                format!("{primary} is not the primary MDM: {found}"),
            ));
        }
        if !slaves.contains(&secondary) {
            return Err(fail(
                "-storage.preconfig.secondary",
                format!("{secondary} is not the secondary MDM: {found}"),
            ));
        }
    }
    if !tiebreakers.contains(&tiebreaker) {
        return Err(fail(
            "-storage.preconfig.tiebreaker",
            format!("{tiebreaker} is not the tie-breaker MDM: {found}"),
        ));
    }
    Ok(swapped)
}

/// 2.0.1-2072 or newer within 2.x. Members' `versionInfo` carries patch 0 on real systems:
/// only `systemVersionName` counts.
fn check_version(system: &System, system_name: &str) -> Result<Version, Failure> {
    let text = system.system_version_name.as_deref().unwrap_or("");
    let version = parse_version(text).ok_or_else(|| {
        fail(
            "storage system version",
            format!("cannot read a version from systemVersionName {text:?}"),
        )
    })?;
    if version.major != MIN_VERSION.major || version < MIN_VERSION {
        return Err(fail(
            "storage system version",
            format!(
                "system {system_name:?} runs {version}; 2.0.1-2072 ({MIN_VERSION}) or newer within 2.x is required"
            ),
        ));
    }
    Ok(version)
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// Runs every check against the gateway. Transport failures name the gateway; a refused
/// login names `-storage.password` (never its value).
pub fn run(client: &mut GatewayClient, wanted: &Wanted) -> Result<Passed, Failure> {
    let gateway = |e: GatewayError| match e {
        GatewayError::LoginRefused { .. } => fail("-storage.password", e.to_string()),
        GatewayError::Tls { flag, .. } => fail(flag, e.to_string()),
        GatewayError::Config(_) => fail("-storage.gateway.cacert", e.to_string()),
        _ => fail("storage gateway", e.to_string()),
    };
    client.login().map_err(gateway)?;
    let systems = api::systems(client).map_err(gateway)?;
    let passed = check_system(&systems, wanted)?;
    let pd = &wanted.protection_domain;
    if api::protection_domain_id(client, pd)
        .map_err(gateway)?
        .is_none()
    {
        return Err(fail(
            "-storage.protectiondomain",
            format!(
                "protection domain {pd:?} does not exist in system {:?}",
                passed.system_name
            ),
        ));
    }
    let pool = &wanted.storage_pool;
    if api::storage_pool_id(client, pd, pool)
        .map_err(gateway)?
        .is_none()
    {
        return Err(fail(
            "-storage.storagepool",
            format!("storage pool {pool:?} does not exist in protection domain {pd:?}"),
        ));
    }
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wanted() -> Wanted {
        Wanted {
            cluster_id: None,
            cluster_name: "scaleio".into(),
            mdms: Mdms {
                primary: "10.0.0.11".parse().unwrap(),
                secondary: "10.0.0.12".parse().unwrap(),
                tiebreaker: "10.0.0.13".parse().unwrap(),
            },
            protection_domain: "pd".into(),
            storage_pool: "sp".into(),
        }
    }

    fn system(name: &str, version: &str, master: &str, slave: &str) -> System {
        serde_json::from_value(json!({
            "id": format!("{name}-id"), "name": name,
            "systemVersionName": format!("EMC ScaleIO Version: {version}"),
            "mdmCluster": {
                "master": {"ips": [master], "versionInfo": "R2_0.10000.0"},
                "slaves": [{"ips": [slave], "status": "Normal"}],
                "tieBreakers": [{"ips": ["10.0.0.13"], "status": "Normal"}],
            }
        }))
        .unwrap()
    }

    #[test]
    fn versions_parse_and_compare_as_numbers() {
        let v = parse_version("EMC ScaleIO Version: R2_0.10000.2072").unwrap();
        assert_eq!(v, MIN_VERSION);
        assert!(parse_version("R2_0.13000.211").unwrap() > MIN_VERSION);
        assert!(parse_version("R2_0.10000.999").unwrap() < MIN_VERSION);
        assert_eq!(parse_version("garbage"), None);
        assert_eq!(parse_version("R2_0.1.2.3"), None);
    }

    #[test]
    fn the_system_passes_with_its_mdms_and_version() {
        let s = [system(
            "scaleio",
            "R2_0.10000.2072",
            "10.0.0.11",
            "10.0.0.12",
        )];
        let p = check_system(&s, &wanted()).unwrap();
        assert_eq!(p.system_name, "scaleio");
        assert!(!p.swapped);
        // Swapped primary and secondary (after an MDM failover) still pass.
        let s = [system(
            "scaleio",
            "R2_0.13000.211",
            "10.0.0.12",
            "10.0.0.11",
        )];
        assert!(check_system(&s, &wanted()).unwrap().swapped);
    }

    #[test]
    fn each_mismatch_names_its_flag_and_what_was_found() {
        let s = [system(
            "scaleio",
            "R2_0.10000.2072",
            "10.0.0.11",
            "10.0.0.99",
        )];
        let e = check_system(&s, &wanted()).unwrap_err();
        assert_eq!(e.subject, "-storage.preconfig.secondary");
        assert!(e.found.contains("slaves 10.0.0.99"), "{e}");

        let s = [system("scaleio", "R2_0.5014.0", "10.0.0.11", "10.0.0.12")];
        let e = check_system(&s, &wanted()).unwrap_err();
        assert!(e.to_string().contains("runs R2_0.5014.0"), "{e}");
        let s = [system("scaleio", "R3_0.100.0", "10.0.0.11", "10.0.0.12")];
        assert!(check_system(&s, &wanted()).is_err(), "3.x is not 2.x");

        let two = [
            system("a", "R2_0.10000.2072", "10.0.0.11", "10.0.0.12"),
            system("b", "R2_0.10000.2072", "10.0.0.11", "10.0.0.12"),
        ];
        let e = check_system(&two, &wanted()).unwrap_err();
        assert_eq!(e.subject, "-storage.clustername");
        let mut w = wanted();
        w.cluster_id = Some("b-id".into());
        assert_eq!(check_system(&two, &w).unwrap().system_name, "b");
        w.cluster_id = Some("c-id".into());
        assert_eq!(
            check_system(&two, &w).unwrap_err().subject,
            "-storage.clusterid"
        );
    }
}
