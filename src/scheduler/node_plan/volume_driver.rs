//! The volume-driver part of every node plan: where REX-Ray, dvdcli and the DVDI isolator
//! come from, and the scoped gateway user REX-Ray logs in as. Every node gets the same part;
//! the user's password travels only in the plan's `secrets` (see `executors.rs`), never in
//! the hashed, logged or stored parts. The admin password is not here: only MDM nodes' plans
//! carry it.

use crate::contract::plan::{Download, VolumeDriver};
use crate::contract::Platform;
use crate::scheduler::flags::Config;
use crate::secret::Secret;

/// The plan's volume-driver part and the user's password, from the flags.
pub fn from_config(c: &Config) -> (VolumeDriver, Option<Secret>) {
    let r = &c.rexray;
    let plan = VolumeDriver {
        // Every platform, given or not: the plan has always listed each.
        packages: Platform::ALL
            .into_iter()
            .map(|p| {
                (
                    p.key().to_string(),
                    r.packages.get(&p).cloned().unwrap_or_default(),
                )
            })
            .collect(),
        isolator: r.isolator_binary.as_ref().map(|url| Download {
            url: url.clone(),
            sha256: r.isolator_sha256.clone(),
        }),
        username: r.user.as_ref().map(|u| u.username.clone()),
        // Known only once the start-up has checked the gateway (`wiring.rs` sets it).
        verify_gateway: false,
    };
    let password = r
        .user
        .as_ref()
        .map(|u| u.password.clone())
        .filter(|p| !p.is_empty());
    (plan, password)
}

#[cfg(test)]
mod tests {
    use crate::scheduler::node_plan::InstallSettings;
    use crate::secret::Secret;

    #[test]
    fn the_password_is_never_serialized() {
        let mut settings = InstallSettings {
            rexray_password: Some(Secret::new("Vol-pw1")),
            ..Default::default()
        };
        settings.plan.volume_driver.username = Some("rexray".into());
        let json = serde_json::to_string(&settings.plan.volume_driver).unwrap();
        assert!(json.contains("\"username\":\"rexray\""), "{json}");
        let all = serde_json::to_string(&settings.plan).unwrap();
        assert!(!all.contains("Vol-pw1"), "{all}");
        assert!(!format!("{settings:?}").contains("Vol-pw1"));
    }
}
