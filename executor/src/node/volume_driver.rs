//! The `volume-driver` phase (host-steps.md sections 7 and 8): REX-Ray installed from the
//! plan's package URL and ordered after the SDC's `scini` module, its configuration written,
//! REX-Ray (re)started, and, when the plan names an isolator, dvdcli and the DVDI isolator
//! module installed. Every
//! step checks the host first and does nothing that is already done, so a resumed executor
//! reinstalls nothing.
//!
//! Packages install through [`install`], as the storage packages do: downloads checked against
//! the SHA-256 the operator gave, packages judged installed by the package database.

use super::machine::{Findings, Phase};
use super::plan::{Download, Plan};
use super::{download, install, volume, Node, StepResult, NEEDS_CONFIGURATION};
use crate::host::commands::{Cmd, Runner};
use crate::host::facts::Facts;
use crate::host::services::{Service, State};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use storage_framework::contract::api::PhaseReport;
pub use storage_framework::contract::platform::DriverPackage;
use storage_framework::contract::platform::{profile, Platform, RexrayOrder};

/// Shown with the node (its phase reports' `warning`) when REX-Ray gets no credentials.
pub const NO_CREDENTIALS: &str = "REX-Ray has no gateway credentials, so its volume operations \
     fail: start the scheduler with -rexray.username=<a user with volume rights only> and its \
     password in -rexray.password.file=<file> (or REXRAY_PASSWORD)";

/// The phase report: from `volume-driver` on, it carries [`NO_CREDENTIALS`] when the plan
/// gives REX-Ray no user (derived from the plan, so a resumed executor reports it too).
pub fn phase_report(plan: &Plan, phase: Phase) -> PhaseReport {
    let mut report = PhaseReport::entered(phase);
    if phase >= Phase::VolumeDriver && plan.rexray_user().is_none() {
        report.warning = Some(NO_CREDENTIALS.into());
    }
    report
}

impl Node {
    pub(super) fn volume_driver(&mut self) -> StepResult {
        let platform = self.platform()?;
        let installed = self.install_driver_package(platform, DriverPackage::Rexray)?;
        let r = self.runner.as_mut();
        let ordered = order_after_scini(r, &self.facts, platform, &self.plan.hostname)?;
        let configured = self.write_rexray_config()?;
        ensure_rexray_runs(
            self.runner.as_mut(),
            platform,
            installed || ordered || configured,
            &self.plan.hostname,
        )?;
        let mut findings = Findings::default();
        if let Some(isolator) = self.plan.install.volume_driver.isolator.clone() {
            // The isolator runs dvdcli for every volume: without it, the module is useless.
            self.install_driver_package(platform, DriverPackage::Dvdcli)?;
            let dir = self.sandbox.join("isolator");
            if install_isolator(&self.facts, &isolator, &dir, &self.plan.hostname)? {
                self.isolator_installed = true;
                findings.needs_reboot = true;
            }
        }
        Ok(findings)
    }

    /// True when the file was written now.
    pub(super) fn write_rexray_config(&mut self) -> Result<bool, String> {
        let text = self.rexray_config_text()?;
        let written =
            volume::write_if_changed(&self.facts.path(volume::REXRAY_CONFIG), &text, 0o600)?;
        log::info!(
            "node {}: REX-Ray configuration {}{}",
            self.plan.hostname,
            if written {
                "written"
            } else {
                "already in place"
            },
            if self.plan.rexray_user().is_none() {
                " (without credentials: no -rexray.username/-rexray.password)"
            } else {
                ""
            }
        );
        Ok(written)
    }

    /// REX-Ray's configuration as the plan has it now.
    pub(super) fn rexray_config_text(&self) -> Result<String, String> {
        let install = &self.plan.install;
        let gateway = install
            .gateway
            .clone()
            .ok_or("the plan names no gateway for the volume driver")?;
        let (pd, pool) = self.plan.consuming_pool();
        let text = volume::rexray_config(&volume::RexRay {
            gateway: &gateway,
            system_name: &install.system_name,
            system_id: install.system_id.as_deref(),
            protection_domain: &pd,
            storage_pool: &pool,
            credentials: self.plan.rexray_user(),
            verify_gateway: install.volume_driver.verify_gateway,
        });
        Ok(text)
    }

    /// True when installed now.
    fn install_driver_package(
        &mut self,
        platform: Platform,
        p: DriverPackage,
    ) -> Result<bool, String> {
        let Some(download) = self
            .plan
            .install
            .volume_driver
            .download(platform, p)
            .cloned()
        else {
            // Nothing names a version of the volume driver's packages: any installed one.
            let r = self.runner.as_mut();
            let any = install::Wanted::Any;
            return match install::without_url(r, platform, p.name(), any, &self.plan.hostname)? {
                None => Ok(false),
                Some(found) => Err(no_driver_url(platform, p, &found)),
            };
        };
        let file = install::PackageFile {
            name: p.name(),
            url: &download.url,
            sha256: download.sha256.as_deref(),
        };
        let dir = self.sandbox.join("volume-driver");
        let r = self.runner.as_mut();
        install::install_package_file(r, platform, file, &dir, Cmd::default(), &self.plan.hostname)
    }
}

/// The configuration error of package `p` given no URL on `platform` and not installed
/// (`found` says what the package database shows): the node waits for a plan with a URL,
/// naming the flag (as for the storage packages).
pub fn no_driver_url(platform: Platform, p: DriverPackage, found: &str) -> String {
    let (key, name) = (platform.key(), p.name());
    format!("{NEEDS_CONFIGURATION}no {name} package URL for {key} and {found}: set -rexray.{key}.{name}")
}

/// Installs the isolator module from `isolator` (into `dir` first) unless it is in place,
/// with the wanted digest when one is given; true when installed now.
pub fn install_isolator(
    facts: &Facts,
    isolator: &Download,
    dir: &Path,
    host: &str,
) -> Result<bool, String> {
    let file = download::file_name(&isolator.url)
        .ok_or_else(|| format!("{}: the URL names no module file", isolator.url))?;
    let module = format!("/usr/lib/{file}");
    let digest_ok = isolator.sha256.as_deref().is_none_or(|want| {
        crate::sha256::file_hex(&facts.path(&module))
            .is_ok_and(|got| got.eq_ignore_ascii_case(want))
    });
    if volume::isolator_in_place(facts, &module) && digest_ok {
        log::info!("node {host}: isolator already in place");
        return Ok(false);
    }
    let path = download::fetch_verified(&isolator.url, isolator.sha256.as_deref(), dir)?;
    volume::install_isolator(facts, &path, &module)?;
    log::info!(
        "node {host}: isolator installed as {module}; the agent loads it only after a restart, \
         so this node reboots in reboot-final (with -debug=true: restart the agent by hand)"
    );
    Ok(true)
}

/// Makes REX-Ray start after the SDC's `scini` module (host-steps section 7): `scini` in the
/// init script's `Required-Start` (Ubuntu 14.04), or a systemd drop-in with
/// `After=scini.service` followed by `systemctl daemon-reload` (RHEL 7). Nothing when in place;
/// true when changed now.
pub fn order_after_scini(
    r: &mut dyn Runner,
    facts: &Facts,
    platform: Platform,
    host: &str,
) -> Result<bool, String> {
    match profile(platform).rexray_order {
        RexrayOrder::InitScriptRequiredStart => {
            let path = facts.path(volume::REXRAY_INIT_SCRIPT);
            let script = fs::read_to_string(&path).map_err(|e| {
                format!(
                    "{}: {e} (the rexray package should have installed it)",
                    volume::REXRAY_INIT_SCRIPT
                )
            })?;
            let edited = volume::init_script_after_scini(&script)
                .map_err(|e| format!("{}: {e}", volume::REXRAY_INIT_SCRIPT))?;
            let Some(text) = edited else {
                return Ok(false);
            };
            let mode = fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0o755);
            volume::write_if_changed(&path, &text, mode)?;
            log::info!("node {host}: REX-Ray's init script now requires scini");
            Ok(true)
        }
        RexrayOrder::SystemdDropIn => {
            let unit = volume::REXRAY_UNIT_DIRS
                .iter()
                .any(|d| facts.path(&format!("{d}/rexray.service")).is_file());
            if !unit {
                return Err(format!(
                    "no rexray.service in {} (the rexray package should have installed it)",
                    volume::REXRAY_UNIT_DIRS.join(", ")
                ));
            }
            let dropin = facts.path(volume::REXRAY_SCINI_DROPIN);
            if !volume::write_if_changed(&dropin, volume::REXRAY_SCINI_DROPIN_TEXT, 0o644)? {
                return Ok(false);
            }
            r.check(&Cmd::new("systemctl", &["daemon-reload"]).deadline(Cmd::QUERY_DEADLINE))
                .map_err(|e| e.to_string())?;
            log::info!("node {host}: REX-Ray's unit now starts after scini.service");
            Ok(true)
        }
    }
}

/// REX-Ray running with what was just installed or written: restarted when `changed`, else
/// started only when its state query says it is not running, so that a resumed executor
/// starts one that a crash left stopped. It is also made to start at boot.
pub fn ensure_rexray_runs(
    r: &mut dyn Runner,
    platform: Platform,
    changed: bool,
    host: &str,
) -> Result<(), String> {
    let rexray = Service::new(platform, "rexray");
    rexray.enable_at_boot(r).map_err(|e| e.to_string())?;
    if changed {
        rexray.restart(r).map_err(|e| e.to_string())?;
        log::info!("node {host}: REX-Ray restarted");
        return Ok(());
    }
    match rexray.state(r).map_err(|e| e.to_string())? {
        State::Running => log::info!("node {host}: REX-Ray already running"),
        State::Stopped => {
            rexray.start(r).map_err(|e| e.to_string())?;
            log::info!("node {host}: REX-Ray started");
        }
        State::Unknown { query, status } => {
            return Err(format!(
                "`{query}` exited with status {status}: REX-Ray's state is unknown"
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::scripted::Scripted;

    /// A runner whose every command exits 0.
    fn ok_runner() -> Scripted<impl FnMut(&Cmd) -> (i32, String)> {
        Scripted::new(|_: &Cmd| (0, String::new()))
    }

    fn plan(json: &str) -> Plan {
        serde_json::from_str(json).unwrap()
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("executor-vd-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn package_urls_come_from_the_plan_or_the_node_waits_naming_the_flag() {
        let p = plan(
            r#"{"version":1,"install":{"volume_driver":{"packages":{
                "rhel7":{"rexray":{"url":"http://r/rexray-0.11.4-1.x86_64.rpm","sha256":"ab"}}}}}}"#,
        );
        let vd = &p.install.volume_driver;
        let d = vd.download(Platform::Rhel7, DriverPackage::Rexray).unwrap();
        assert_eq!(d.sha256.as_deref(), Some("ab"));
        assert_eq!(
            install::wanted_version("rexray", &d.url).unwrap(),
            "0.11.4-1"
        );
        for (platform, pkg, flag) in [
            (
                Platform::Rhel7,
                DriverPackage::Dvdcli,
                "-rexray.rhel7.dvdcli",
            ),
            (
                Platform::Ubuntu1404,
                DriverPackage::Rexray,
                "-rexray.ubuntu14.rexray",
            ),
        ] {
            assert!(vd.download(platform, pkg).is_none());
            let e = no_driver_url(platform, pkg, "it is not installed");
            assert!(
                e.starts_with(NEEDS_CONFIGURATION) && e.contains(flag),
                "{e}"
            );
        }
        let deb = Download {
            url: "http://r/dvdcli_0.2.1-1_amd64.deb".into(),
            sha256: None,
        };
        assert_eq!(
            install::wanted_version("dvdcli", &deb.url).unwrap(),
            "0.2.1-1"
        );
        let bad = Download {
            url: "http://r/rexray.deb".into(),
            sha256: None,
        };
        let e = install::wanted_version("rexray", &bad.url).unwrap_err();
        assert!(e.contains("no version of package rexray"), "{e}");
    }

    #[test]
    fn ubuntu_init_script_is_ordered_after_scini_once() {
        let d = tmp("sysv");
        let facts = Facts::new(&d);
        let mut r = ok_runner();
        let e = order_after_scini(&mut r, &facts, Platform::Ubuntu1404, "h").unwrap_err();
        assert!(e.contains("/etc/init.d/rexray"), "{e}");
        let script = d.join("etc/init.d/rexray");
        fs::create_dir_all(script.parent().unwrap()).unwrap();
        fs::write(
            &script,
            "#!/bin/sh\n### BEGIN INIT INFO\n# Required-Start: $syslog\n### END INIT INFO\n",
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(order_after_scini(&mut r, &facts, Platform::Ubuntu1404, "h").unwrap());
        let text = fs::read_to_string(&script).unwrap();
        assert!(text.contains("# Required-Start: $syslog scini\n"), "{text}");
        let mode = fs::metadata(&script).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "the script stays executable");
        assert!(!order_after_scini(&mut r, &facts, Platform::Ubuntu1404, "h").unwrap());
        assert_eq!(fs::read_to_string(&script).unwrap(), text);
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn rhel_needs_the_unit_and_skips_a_drop_in_in_place() {
        let d = tmp("unit");
        let facts = Facts::new(&d);
        let mut r = ok_runner();
        let e = order_after_scini(&mut r, &facts, Platform::Rhel7, "h").unwrap_err();
        assert!(e.contains("no rexray.service"), "{e}");
        fs::create_dir_all(d.join("usr/lib/systemd/system")).unwrap();
        fs::write(d.join("usr/lib/systemd/system/rexray.service"), "[Unit]\n").unwrap();
        // Written once, with one `systemctl daemon-reload`; in place: nothing to do.
        assert!(order_after_scini(&mut r, &facts, Platform::Rhel7, "h").unwrap());
        assert!(!order_after_scini(&mut r, &facts, Platform::Rhel7, "h").unwrap());
        assert_eq!(r.ran, ["systemctl daemon-reload"]);
        let dropin = facts.path(volume::REXRAY_SCINI_DROPIN);
        assert_eq!(
            fs::read_to_string(dropin).unwrap(),
            volume::REXRAY_SCINI_DROPIN_TEXT
        );
        assert!(volume::REXRAY_SCINI_DROPIN_TEXT.contains("After=scini.service"));
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn isolator_is_verified_installed_once_and_replaced_when_its_digest_differs() {
        let d = tmp("iso");
        let facts = Facts::new(d.join("root"));
        let src = d.join("libmesos_dvdi_isolator-1.0.1.so");
        fs::write(&src, b"module v1").unwrap();
        let good = crate::sha256::hex(b"module v1");
        let mut iso = Download {
            url: format!("file://{}", src.display()),
            sha256: Some(good.clone()),
        };
        let dl = d.join("dl");
        assert!(install_isolator(&facts, &iso, &dl, "h").unwrap());
        assert!(
            !install_isolator(&facts, &iso, &dl, "h").unwrap(),
            "in place"
        );
        // A new module under the same name, with its digest: replaced.
        fs::write(&src, b"module v2").unwrap();
        iso.sha256 = Some(crate::sha256::hex(b"module v2"));
        assert!(install_isolator(&facts, &iso, &dl, "h").unwrap());
        let installed = facts.path("/usr/lib/libmesos_dvdi_isolator-1.0.1.so");
        assert_eq!(fs::read(&installed).unwrap(), b"module v2");
        // A download that is not what the digest says fails, naming the file and both.
        iso.sha256 = Some(good.clone());
        let e = install_isolator(&facts, &iso, &dl, "h").unwrap_err();
        assert!(
            e.contains("libmesos_dvdi_isolator-1.0.1.so") && e.contains(&good),
            "{e}"
        );
        assert!(e.contains(&crate::sha256::hex(b"module v2")), "{e}");
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn rexray_is_restarted_when_changed_else_started_only_when_stopped() {
        // RHEL 7, enabled at boot and stopped: started, not restarted.
        let mut r =
            Scripted::new(|c: &Cmd| (if c.args[0] == "is-active" { 3 } else { 0 }, String::new()));
        ensure_rexray_runs(&mut r, Platform::Rhel7, false, "h").unwrap();
        assert_eq!(
            r.ran,
            [
                "systemctl is-enabled rexray",
                "systemctl is-active rexray",
                "systemctl start rexray"
            ]
        );
        // Ubuntu 14.04, changed: restarted without asking its state.
        let mut r = ok_runner();
        ensure_rexray_runs(&mut r, Platform::Ubuntu1404, true, "h").unwrap();
        assert_eq!(r.ran, ["service rexray restart"]);
        // Running: left alone.
        let mut r = ok_runner();
        ensure_rexray_runs(&mut r, Platform::Ubuntu1404, false, "h").unwrap();
        assert_eq!(r.ran, ["service rexray status"]);
        // A state the query does not know: an error naming it.
        let mut r = Scripted::new(|_: &Cmd| (4, String::new()));
        let e = ensure_rexray_runs(&mut r, Platform::Ubuntu1404, false, "h").unwrap_err();
        assert_eq!(
            e,
            "`service rexray status` exited with status 4: REX-Ray's state is unknown"
        );
    }

    #[test]
    fn missing_credentials_warn_from_volume_driver_on() {
        let bare = plan(r#"{"version":1}"#);
        assert!(phase_report(&bare, Phase::Packages).warning.is_none());
        for p in [Phase::VolumeDriver, Phase::RebootFinal, Phase::Running] {
            let r = phase_report(&bare, p);
            let w = r.warning.as_deref().unwrap();
            assert!(
                w.contains("-rexray.username") && w.contains("-rexray.password"),
                "{w}"
            );
        }
        let with_user = plan(
            r#"{"version":1,"install":{"volume_driver":{"username":"rexray"}},
                "secrets":{"rexray_password":"Vol-pw1"}}"#,
        );
        assert_eq!(with_user.rexray_user(), Some(("rexray", "Vol-pw1")));
        let r = phase_report(&with_user, Phase::Running);
        assert!(r.warning.is_none());
        assert!(!serde_json::to_string(&r).unwrap().contains("Vol-pw1"));
        // A user without its password (or the reverse) is no user.
        let half = plan(r#"{"version":1,"secrets":{"rexray_password":"x"}}"#);
        assert_eq!(half.rexray_user(), None);
    }
}
