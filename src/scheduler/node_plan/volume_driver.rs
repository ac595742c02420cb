//! The volume-driver part of every node plan (issue 10): where REX-Ray, dvdcli and the DVDI
//! isolator come from, and the scoped gateway user REX-Ray logs in as. Every node gets the
//! same part; the user's password travels only in the plan's `secrets` (see `executors.rs`),
//! never in the hashed, logged or stored parts. The admin password is not here: only MDM
//! nodes' plans carry it.

use crate::scheduler::flags::{Config, Download, DriverPackages};
use crate::secret::Secret;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Serialize)]
pub struct VolumeDriverPlan {
    /// `ubuntu14` and `rhel7`: the REX-Ray and dvdcli packages.
    pub packages: BTreeMap<&'static str, DriverPackages>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolator: Option<Download>,
    /// The scoped gateway user; `None`: REX-Ray's configuration gets no credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The user's password: handed out as a plan secret, never serialized here.
    #[serde(skip)]
    pub password: Option<Secret>,
}

impl PartialEq for VolumeDriverPlan {
    fn eq(&self, other: &Self) -> bool {
        let pw = |p: &Option<Secret>| p.as_ref().map(|s| s.expose().to_owned());
        self.packages == other.packages
            && self.isolator == other.isolator
            && self.username == other.username
            && pw(&self.password) == pw(&other.password)
    }
}

impl Eq for VolumeDriverPlan {}

impl VolumeDriverPlan {
    pub fn from_config(c: &Config) -> VolumeDriverPlan {
        let r = &c.rexray;
        VolumeDriverPlan {
            packages: BTreeMap::from([
                ("ubuntu14", r.packages.ubuntu14.clone()),
                ("rhel7", r.packages.rhel7.clone()),
            ]),
            isolator: r.isolator_binary.as_ref().map(|url| Download {
                url: url.clone(),
                sha256: r.isolator_sha256.clone(),
            }),
            username: r.user.as_ref().map(|u| u.username.clone()),
            password: r
                .user
                .as_ref()
                .map(|u| u.password.clone())
                .filter(|p| !p.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_serialized() {
        let plan = VolumeDriverPlan {
            username: Some("rexray".into()),
            password: Some(Secret::new("Vol-pw1")),
            ..Default::default()
        };
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains("\"username\":\"rexray\""), "{json}");
        assert!(!json.contains("Vol-pw1"), "{json}");
        assert!(!format!("{plan:?}").contains("Vol-pw1"));
    }
}
