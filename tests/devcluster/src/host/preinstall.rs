//! A host as the deployment spec's prerequisites may leave it before the framework arrives:
//! the storage data-node packages (SDS, SDC) already installed at a version and running, the
//! SDC configured with the MDMs' addresses, the repository prerequisites in place, Ubuntu
//! 14.04 already on the kernel the SDC needs, and (when asked) REX-Ray installed. What the
//! package scripts would have left is written as the stand-in's `dpkg`/`rpm` leave it, so
//! that the executor's queries (`dpkg-query`, `rpm -q`, services, `/proc/modules`) cannot
//! tell the two apart. No command is recorded in the host's history: nobody ran one under
//! the framework.

use super::{
    repository_package, Component, FakeRoot, HostState, Init, Package, Packaging, ServiceKind,
    UBUNTU_SDC_KERNEL,
};

/// What to find installed on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preinstalled {
    /// The storage packages' version as the vendor's files carry it (`2.0-10000.2072`).
    pub version: String,
    /// The primary and secondary MDM (`MDM_IP` the SDC was installed with).
    pub mdm_ips: String,
    /// REX-Ray's version, when it is installed too (`0.11.4-1`).
    pub rexray: Option<String>,
}

/// Makes the host of `root` one with `what` installed.
pub fn preinstall(root: &FakeRoot, what: &Preinstalled) -> Result<(), String> {
    split_version(&what.version)?;
    if let Some(v) = &what.rexray {
        split_version(v)?;
    }
    let profile = root.state()?.profile;
    let kernel = (profile == super::HostProfile::Ubuntu1404).then_some(UBUNTU_SDC_KERNEL);
    if let Some(k) = kernel {
        root.install_kernel_files(k)?;
        root.write_kernel(k)?;
    }
    root.write(
        "opt/emc/scaleio/sds/cfg/conf.txt",
        "tgt_net__recv_buffer=4096\n",
    )?;
    root.write(
        "bin/emc/scaleio/drv_cfg.txt",
        &format!("# ScaleIO SDC configuration\nmdm {}\n", what.mdm_ips),
    )?;
    root.mkdir("sys/module/scini")?;
    root.update(|s| -> Result<(), String> {
        prerequisites(s, kernel);
        for c in [Component::Sds, Component::Sdc] {
            storage_package(s, c, &what.version);
        }
        s.sdc_mdm_ips = Some(what.mdm_ips.clone());
        if let Some(v) = &what.rexray {
            let pkg = package(s, v, false);
            s.packages.insert("rexray".into(), pkg);
            crate::volume_driver::postinst("rexray", s, root)?;
        }
        Ok(())
    })?
}

/// Refuses what is no package version like `2.0-10000.2072` or `0.11.4-1`.
fn split_version(v: &str) -> Result<(&str, &str), String> {
    let ok = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    match v.split_once('-') {
        Some((a, b)) if ok(a) && ok(b) => Ok((a, b)),
        _ => Err(format!(
            "{v:?} is not a package version like 2.0-10000.2072"
        )),
    }
}

/// A package at `full` (`version-release`) as the profile's tool records it: Debian keeps
/// the whole text as its version, rpm the version and the release apart, the storage
/// vendor's releases with their `.el7` tag.
fn package(s: &HostState, full: &str, el7: bool) -> Package {
    let deb = s.profile.packaging() == Packaging::Deb;
    let (version, release) = full.split_once('-').unwrap_or((full, ""));
    Package {
        version: if deb { full } else { version }.to_string(),
        release: (!deb).then(|| format!("{release}{}", if el7 { ".el7" } else { "" })),
        arch: if deb { "amd64" } else { "x86_64" }.into(),
        status: "install ok installed".into(),
    }
}

/// The repository packages every node needs, and the kernel image the host runs.
fn prerequisites(s: &mut HostState, kernel: Option<&str>) {
    let names: &[&str] = match s.profile.packaging() {
        Packaging::Deb => &["libaio1", "zip"],
        Packaging::Rpm => &["libaio", "zip", "unzip"],
    };
    let image = kernel.map(|k| format!("linux-image-{k}"));
    for name in names.iter().copied().chain(image.as_deref()) {
        if let Some(p) = repository_package(s.profile, name) {
            let arch = if p.release.is_some() {
                "x86_64"
            } else {
                "amd64"
            };
            let pkg = Package {
                version: p.version,
                release: p.release,
                arch: arch.into(),
                status: "install ok installed".into(),
            };
            s.packages.insert(name.to_string(), pkg);
        }
    }
    if let Some(k) = kernel {
        s.running_kernel = k.to_string();
        s.pending_kernel = None;
    }
}

/// Storage component `c` installed at `version`, its service running.
fn storage_package(s: &mut HostState, c: Component, version: &str) {
    let deb = s.profile.packaging() == Packaging::Deb;
    let key = if c == Component::Sds { "sds" } else { "sdc" };
    let name = if deb {
        format!("emc-scaleio-{key}")
    } else {
        format!("EMC-ScaleIO-{key}")
    };
    let pkg = package(s, version, true);
    s.packages.insert(name, pkg);
    let kind = match (c, s.profile.init()) {
        (Component::Sdc, Init::Upstart) => ServiceKind::SysV,
        (_, Init::Upstart) => ServiceKind::Upstart,
        (_, Init::Systemd) => ServiceKind::Systemd,
    };
    s.add_service(c.service(), kind);
}

#[cfg(test)]
mod tests {
    use super::super::{default_disks, HostProfile};
    use super::*;

    fn root(profile: HostProfile, name: &str) -> (std::path::PathBuf, FakeRoot) {
        let dir = std::env::temp_dir().join(format!(
            "devcluster-preinstall-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let root = FakeRoot::create(&dir, profile, &default_disks(), "agent-1", Some(1)).unwrap();
        (dir, root)
    }

    #[test]
    fn packages_are_recorded_as_each_tool_spells_them() {
        let what = Preinstalled {
            version: "2.0-10000.2072".into(),
            mdm_ips: "127.0.0.1,127.0.0.2".into(),
            rexray: Some("0.11.4-1".into()),
        };
        let (dir, r) = root(HostProfile::Ubuntu1404, "deb");
        preinstall(&r, &what).unwrap();
        let s = r.state().unwrap();
        assert_eq!(
            s.installed("emc-scaleio-sds").unwrap().full_version(),
            "2.0-10000.2072"
        );
        assert_eq!(
            s.installed("emc-scaleio-sdc").unwrap().full_version(),
            "2.0-10000.2072"
        );
        assert_eq!(s.installed("rexray").unwrap().full_version(), "0.11.4-1");
        assert!(s.installed("libaio1").is_some());
        assert_eq!(s.running_kernel, UBUNTU_SDC_KERNEL);
        assert_eq!(r.running_kernel().unwrap(), UBUNTU_SDC_KERNEL);
        assert!(s.service_running("sds") && s.service_running("scini"));
        assert!(s.proc_modules().contains("scini"));
        assert!(s.history.is_empty());
        let _ = std::fs::remove_dir_all(dir);

        let (dir, r) = root(HostProfile::Rhel7, "rpm");
        preinstall(&r, &what).unwrap();
        let s = r.state().unwrap();
        let sds = s.installed("EMC-ScaleIO-sds").unwrap();
        assert_eq!(
            (sds.version.as_str(), sds.release.as_deref()),
            ("2.0", Some("10000.2072.el7"))
        );
        assert_eq!(s.installed("rexray").unwrap().full_version(), "0.11.4-1");
        assert_eq!(s.sdc_mdm_ips.as_deref(), Some("127.0.0.1,127.0.0.2"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_version_that_is_no_package_version_is_refused() {
        for bad in ["", "2.0", "2.0 1", "2.0-", "a/b-1"] {
            assert!(split_version(bad).is_err(), "{bad:?}");
        }
    }
}
