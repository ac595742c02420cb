//! Installing packages (host-steps.md section 3), one way for the storage components, LIA,
//! the gateway and the volume driver's packages: nothing happens when the package database
//! shows the package at the version its file's name carries; otherwise the file is downloaded
//! (checked against its SHA-256 when one is given), installed with the platform's tool, and
//! the database asked again, so that a tool that exits 0 without installing fails the step.
//! Repository packages are judged the same way, by the database and not the tool's output,
//! and so is a package given no URL, which must be found installed ([`without_url`]).

use super::download;
use crate::host::commands::{Cmd, Runner};
use crate::host::facts::Platform;
use crate::host::packages;
use std::path::{Path, PathBuf};

/// A package file and the package it installs.
#[derive(Debug, Clone, Copy)]
pub struct PackageFile<'a> {
    /// The installed package's name, as the package database knows it.
    pub name: &'a str,
    pub url: &'a str,
    /// The hex SHA-256 the download must have, when the operator gave one.
    pub sha256: Option<&'a str>,
}

/// The version package `name`'s file carries (`rexray_0.11.4-1_amd64.deb` -> `0.11.4-1`).
pub fn wanted_version(name: &str, url: &str) -> Result<String, String> {
    let file =
        download::file_name(url).ok_or_else(|| format!("{url}: the URL names no package file"))?;
    packages::version_in_file_name(&file, name)
        .ok_or_else(|| format!("{url}: the file name carries no version of package {name}"))
}

/// The version a package given no URL must be installed at.
#[derive(Debug, Clone, Copy)]
pub enum Wanted<'a> {
    /// This release (the storage software's version of the plan).
    Release(&'a str),
    /// Any version: nothing names one (REX-Ray, dvdcli).
    Any,
}

/// Package `name` has no URL to install it from: `None` (logged) when the package database
/// shows it at `wanted`; otherwise what the database shows instead, for the node's error.
pub fn without_url(
    r: &mut dyn Runner,
    platform: Platform,
    name: &str,
    wanted: Wanted,
    host: &str,
) -> Result<Option<String>, String> {
    let installed = packages::installed_version(r, platform, name).map_err(|e| e.to_string())?;
    Ok(match (installed, wanted) {
        (Some(v), Wanted::Release(w)) if packages::is_release(&v, w) => {
            log::info!("node {host}: {name} {v} already installed (no URL needed)");
            None
        }
        (Some(v), Wanted::Any) => {
            log::info!("node {host}: {name} {v} already installed (no URL given)");
            None
        }
        (Some(v), Wanted::Release(w)) => Some(format!("{name} {v} is installed, not {w}")),
        (None, Wanted::Release(w)) => Some(format!("{name} is not installed (wanted: {w})")),
        (None, Wanted::Any) => Some(format!("{name} is not installed")),
    })
}

/// A package the database does not show at its file's version.
#[derive(Debug)]
pub struct Missing<'a> {
    file: PackageFile<'a>,
    wanted: String,
    installed: Option<String>,
}

/// What installing `file` takes: `None` (logged) when the package database shows its package
/// at the version the file's name carries.
pub fn missing<'a>(
    r: &mut dyn Runner,
    platform: Platform,
    file: PackageFile<'a>,
    host: &str,
) -> Result<Option<Missing<'a>>, String> {
    let wanted = wanted_version(file.name, file.url)?;
    let installed =
        packages::installed_version(r, platform, file.name).map_err(|e| e.to_string())?;
    if installed
        .as_deref()
        .is_some_and(|v| packages::same_version(v, &wanted))
    {
        log::info!("node {host}: {} {wanted} already installed", file.name);
        return Ok(None);
    }
    Ok(Some(Missing {
        file,
        wanted,
        installed,
    }))
}

impl Missing<'_> {
    /// Downloads the package file into `dir`.
    pub fn download(&self, dir: &Path) -> Result<PathBuf, String> {
        download::fetch_verified(self.file.url, self.file.sha256, dir)
    }

    /// Installs the downloaded file at `path` (`dpkg -i` / `rpm -Uvh`, with `env`'s
    /// variables) and checks that the package database then shows the wanted version.
    pub fn install(
        self,
        r: &mut dyn Runner,
        platform: Platform,
        path: &Path,
        env: Cmd,
        host: &str,
    ) -> Result<(), String> {
        let Missing {
            file,
            wanted,
            installed,
        } = self;
        let name = file.name;
        log::info!(
            "node {host}: installing {name} {wanted}{}",
            installed
                .map(|v| format!(" (replacing {v})"))
                .unwrap_or_default()
        );
        packages::install_file(r, platform, &path.to_string_lossy(), env)
            .map_err(|e| e.to_string())?;
        match packages::installed_version(r, platform, name).map_err(|e| e.to_string())? {
            Some(v) if packages::same_version(&v, &wanted) => Ok(()),
            other => Err(format!(
                "installing {name} {wanted} exited 0, but the package database then shows {}",
                other.unwrap_or_else(|| "it not installed".into())
            )),
        }
    }
}

/// Installs `file` (downloaded into `dir`, installed with `env`'s variables) unless the
/// package database shows it at its version; true when installed now.
pub fn install_package_file(
    r: &mut dyn Runner,
    platform: Platform,
    file: PackageFile,
    dir: &Path,
    env: Cmd,
    host: &str,
) -> Result<bool, String> {
    let Some(pending) = missing(r, platform, file, host)? else {
        return Ok(false);
    };
    let path = pending.download(dir)?;
    pending.install(r, platform, &path, env, host)?;
    Ok(true)
}

/// Installs those of `names` the package database lacks from the platform's repositories,
/// then checks that the database shows each of them.
pub fn from_repository(
    r: &mut dyn Runner,
    platform: Platform,
    names: &[&str],
) -> Result<(), String> {
    let mut absent = Vec::new();
    for &name in names {
        if packages::installed_version(r, platform, name)
            .map_err(|e| e.to_string())?
            .is_none()
        {
            absent.push(name);
        }
    }
    if absent.is_empty() {
        return Ok(());
    }
    packages::install_from_repository(r, platform, &absent).map_err(|e| e.to_string())?;
    for name in &absent {
        if packages::installed_version(r, platform, name)
            .map_err(|e| e.to_string())?
            .is_none()
        {
            return Err(format!(
                "{name} is still not installed after the package manager succeeded"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::scripted::Scripted;
    use std::fs;

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("executor-install-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A package database holding `version` of one package until `dpkg -i`/`rpm -Uvh`
    /// installs `after_install`.
    fn database(
        version: Option<&'static str>,
        after_install: Option<&'static str>,
    ) -> impl FnMut(&Cmd) -> (i32, String) {
        let mut version = version;
        move |cmd: &Cmd| match cmd.program.as_str() {
            "dpkg-query" => match version {
                Some(v) => (0, format!("install ok installed\t{v}")),
                None => (1, String::new()),
            },
            "rpm" if cmd.args[0] == "-q" => match version {
                Some(v) => (0, v.to_string()),
                None => (1, String::new()),
            },
            _ => {
                version = after_install;
                (0, String::new())
            }
        }
    }

    #[test]
    fn an_installed_version_is_left_alone_without_a_download() {
        let d = tmp("same");
        let url = format!("file://{}/rexray_0.11.4-1_amd64.deb", d.display());
        let file = PackageFile {
            name: "rexray",
            url: &url,
            sha256: None,
        };
        // Spelled the way dpkg may spell it: the same version.
        let mut r = Scripted::new(database(Some("0.11.4.1"), None));
        let dl = d.join("dl");
        let now =
            install_package_file(&mut r, Platform::Ubuntu1404, file, &dl, Cmd::default(), "h");
        assert!(!now.unwrap());
        assert_eq!(
            r.ran,
            ["dpkg-query -W --showformat=${Status}\\t${Version} rexray"]
        );
        assert!(!dl.exists(), "nothing downloaded");
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn a_missing_package_is_downloaded_verified_installed_and_asked_again() {
        let d = tmp("new");
        let src = d.join("EMC-ScaleIO-lia-2.0-10000.2072.el7.x86_64.rpm");
        fs::write(&src, b"rpm").unwrap();
        let url = format!("file://{}", src.display());
        let file = PackageFile {
            name: "EMC-ScaleIO-lia",
            url: &url,
            sha256: Some(&crate::sha256::hex(b"rpm")),
        };
        let mut r = Scripted::new(database(Some("1.0-1.el7"), Some("2.0-10000.2072.el7")));
        let env = Cmd::default().secret_env("TOKEN", "Adm1n-pw");
        let dl = d.join("dl");
        assert!(install_package_file(&mut r, Platform::Rhel7, file, &dl, env, "h").unwrap());
        let installed = dl.join("EMC-ScaleIO-lia-2.0-10000.2072.el7.x86_64.rpm");
        assert_eq!(
            r.ran,
            [
                "rpm -q --qf %{VERSION}-%{RELEASE} EMC-ScaleIO-lia".to_string(),
                format!("TOKEN=<secret> rpm -Uvh {}", installed.display()),
                "rpm -q --qf %{VERSION}-%{RELEASE} EMC-ScaleIO-lia".to_string(),
            ]
        );
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn a_bad_digest_or_a_silent_tool_fails_the_install() {
        let d = tmp("bad");
        let src = d.join("dvdcli_0.2.1-1_amd64.deb");
        fs::write(&src, b"deb").unwrap();
        let url = format!("file://{}", src.display());
        let wrong = "0".repeat(64);
        let mut file = PackageFile {
            name: "dvdcli",
            url: &url,
            sha256: Some(&wrong),
        };
        let dl = d.join("dl");
        let mut r = Scripted::new(database(None, Some("0.2.1-1")));
        let e = install_package_file(&mut r, Platform::Ubuntu1404, file, &dl, Cmd::default(), "h")
            .unwrap_err();
        assert!(e.contains("SHA-256 mismatch"), "{e}");
        assert_eq!(
            r.ran.len(),
            1,
            "no install after a bad download: {:?}",
            r.ran
        );
        // The tool exits 0, the database shows nothing: an error naming what it shows.
        file.sha256 = None;
        let mut r = Scripted::new(database(None, None));
        let e = install_package_file(&mut r, Platform::Ubuntu1404, file, &dl, Cmd::default(), "h")
            .unwrap_err();
        assert!(
            e.contains("exited 0") && e.contains("it not installed"),
            "{e}"
        );
        let _ = fs::remove_dir_all(d);
    }

    #[test]
    fn without_a_url_only_the_installed_release_will_do() {
        let rpm = |v: Option<&'static str>| Scripted::new(database(v, None));
        let mut r = rpm(Some("2.0-10000.2072.el7"));
        let want = Wanted::Release("2.0-10000.2072");
        let found = without_url(&mut r, Platform::Rhel7, "EMC-ScaleIO-sds", want, "h");
        assert_eq!(found.unwrap(), None);
        assert_eq!(r.ran, ["rpm -q --qf %{VERSION}-%{RELEASE} EMC-ScaleIO-sds"]);
        let mut r = rpm(Some("1.32-402.1.el7"));
        let found = without_url(&mut r, Platform::Rhel7, "EMC-ScaleIO-sds", want, "h");
        assert_eq!(
            found.unwrap().as_deref(),
            Some("EMC-ScaleIO-sds 1.32-402.1.el7 is installed, not 2.0-10000.2072")
        );
        let mut r = Scripted::new(database(None, None));
        let found = without_url(&mut r, Platform::Ubuntu1404, "emc-scaleio-sdc", want, "h");
        assert_eq!(
            found.unwrap().as_deref(),
            Some("emc-scaleio-sdc is not installed (wanted: 2.0-10000.2072)")
        );
        // Nothing names a version: any installed one will do, none will not.
        let mut r = Scripted::new(database(Some("0.9.2"), None));
        let found = without_url(&mut r, Platform::Ubuntu1404, "rexray", Wanted::Any, "h");
        assert_eq!(found.unwrap(), None);
        let mut r = Scripted::new(database(None, None));
        let found = without_url(&mut r, Platform::Ubuntu1404, "rexray", Wanted::Any, "h");
        assert_eq!(found.unwrap().as_deref(), Some("rexray is not installed"));
    }

    #[test]
    fn repository_packages_install_only_what_is_absent() {
        let mut absent_until_installed = true;
        let mut r = Scripted::new(move |cmd: &Cmd| match cmd.program.as_str() {
            "rpm" if cmd.args.last().is_some_and(|a| a == "zip") => (0, "3.0-11.el7".into()),
            "rpm" if absent_until_installed => (1, String::new()),
            "rpm" => (0, "1".into()),
            _ => {
                absent_until_installed = false;
                (0, String::new())
            }
        });
        from_repository(&mut r, Platform::Rhel7, &["zip", "unzip"]).unwrap();
        assert_eq!(
            r.ran,
            [
                "rpm -q --qf %{VERSION}-%{RELEASE} zip",
                "rpm -q --qf %{VERSION}-%{RELEASE} unzip",
                "yum -y install unzip",
                "rpm -q --qf %{VERSION}-%{RELEASE} unzip"
            ]
        );
        let mut r =
            Scripted::new(|cmd: &Cmd| (if cmd.program == "rpm" { 1 } else { 0 }, String::new()));
        let e = from_repository(&mut r, Platform::Rhel7, &["libaio"]).unwrap_err();
        assert!(e.contains("libaio is still not installed"), "{e}");
    }
}
