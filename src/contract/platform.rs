//! The operating systems the storage packages exist for, and everything that differs between
//! them, in one [`Profile`] each. Both sides read it: the scheduler for its per-platform flags
//! and the plan's package tables, the executor for its package tool, package names, services,
//! kernel rule and REX-Ray's start order. A new platform is a new variant and its profile;
//! the code that acts on a profile matches on its tools ([`PackageTool`], [`ServiceManager`],
//! [`RexrayOrder`]), not on platforms.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Platform {
    Ubuntu1404,
    Rhel7,
}

impl Platform {
    pub const ALL: [Platform; 2] = [Platform::Ubuntu1404, Platform::Rhel7];

    pub fn profile(self) -> &'static Profile {
        profile(self)
    }

    /// The name in the plan's package tables and in flag names (`ubuntu14`, `rhel7`).
    pub fn key(self) -> &'static str {
        self.profile().key
    }

    /// The platform of a key or one of its flag aliases.
    pub fn from_key(key: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| {
            let pr = p.profile();
            pr.key == key || pr.key_aliases.contains(&key)
        })
    }

    /// The supported platform an os-release text names (`ID` and `VERSION_ID`), or an
    /// error naming the system found.
    pub fn detect(os_release: &str) -> Result<Platform, String> {
        let field = |key: &str| {
            os_release.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        let id = field("ID").unwrap_or_default().to_ascii_lowercase();
        let version = field("VERSION_ID").unwrap_or_default();
        if let Some(p) = Platform::ALL
            .into_iter()
            .find(|p| p.profile().os.matches(&id, &version))
        {
            return Ok(p);
        }
        let name = field("PRETTY_NAME")
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("ID={id:?} VERSION_ID={version:?}"));
        let titles: Vec<&str> = Platform::ALL.iter().map(|p| p.profile().title).collect();
        Err(format!(
            "unsupported operating system {name}: the storage packages exist for {} only",
            titles.join(" and ")
        ))
    }
}

/// What one platform is and how it is handled.
#[derive(Debug)]
pub struct Profile {
    pub platform: Platform,
    /// The name in plans' package tables and in the scheduler's flags (`-storage.<key>.mdm`,
    /// `-rexray.<key>.rexray`).
    pub key: &'static str,
    /// Other spellings of `key` the flags accept.
    pub key_aliases: &'static [&'static str],
    /// How `-help` and messages name it.
    pub title: &'static str,
    pub os: OsMatch,
    pub package_tool: PackageTool,
    /// The storage components' installed package names.
    pub storage_packages: StoragePackages,
    /// Repository packages every node needs before the storage packages.
    pub prerequisites: &'static [&'static str],
    /// Repository packages MDM nodes need on top (the gateway's Java runtime).
    pub mdm_prerequisites: &'static [&'static str],
    /// The kernel the storage client needs, when this platform does not ship it.
    pub kernel: Option<KernelRule>,
    pub services: ServiceManager,
    pub rexray_order: RexrayOrder,
}

/// The os-release `ID`s and version a platform is recognised by.
#[derive(Debug)]
pub struct OsMatch {
    pub ids: &'static [&'static str],
    pub version: VersionMatch,
}

#[derive(Debug)]
pub enum VersionMatch {
    /// `VERSION_ID` is exactly this.
    Exact(&'static str),
    /// `VERSION_ID`'s part before the first dot is this.
    Major(&'static str),
}

impl OsMatch {
    fn matches(&self, id: &str, version: &str) -> bool {
        let version_ok = match self.version {
            VersionMatch::Exact(v) => version == v,
            VersionMatch::Major(m) => version.split('.').next() == Some(m),
        };
        self.ids.contains(&id) && version_ok
    }
}

/// How packages are queried and installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageTool {
    /// `dpkg-query`, `apt-get` and `dpkg -i`; `.deb` files.
    Deb,
    /// `rpm -q`, `yum` and `rpm -Uvh`; `.rpm` files.
    Rpm,
}

impl PackageTool {
    /// The tool that installs packages from the repositories (`<it> -y install <names>`).
    pub fn repository_installer(self) -> &'static str {
        match self {
            PackageTool::Deb => "apt-get",
            PackageTool::Rpm => "yum",
        }
    }

    /// The program and flag that install a package file.
    pub fn file_installer(self) -> (&'static str, &'static str) {
        match self {
            PackageTool::Deb => ("dpkg", "-i"),
            PackageTool::Rpm => ("rpm", "-Uvh"),
        }
    }

    /// The package files' extension, for `-help`.
    pub fn file_extension(self) -> &'static str {
        match self {
            PackageTool::Deb => ".deb",
            PackageTool::Rpm => ".rpm",
        }
    }
}

/// How services are started, stopped and queried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceManager {
    /// `service <name> <verb>`; the state query is `status`.
    SysV,
    /// `systemctl <verb> <name>`; the state query is `is-active`; services are enabled at
    /// boot.
    Systemd,
}

impl ServiceManager {
    /// The program and arguments that apply `verb` to service `name`.
    pub fn command<'a>(self, name: &'a str, verb: &'a str) -> (&'static str, [&'a str; 2]) {
        match self {
            ServiceManager::SysV => ("service", [name, verb]),
            ServiceManager::Systemd => ("systemctl", [verb, name]),
        }
    }

    /// The verb whose exit status says whether a service runs (0) or not (3).
    pub fn state_query(self) -> &'static str {
        match self {
            ServiceManager::SysV => "status",
            ServiceManager::Systemd => "is-active",
        }
    }

    /// Whether services must also be enabled to start at boot.
    pub fn enables_at_boot(self) -> bool {
        match self {
            ServiceManager::SysV => false,
            ServiceManager::Systemd => true,
        }
    }
}

/// How REX-Ray is made to start after the SDC's `scini` module (host-steps section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RexrayOrder {
    /// `scini` in the init script's LSB `Required-Start`.
    InitScriptRequiredStart,
    /// A systemd drop-in with `After=scini.service`, then `systemctl daemon-reload`.
    SystemdDropIn,
}

/// A kernel the storage client needs, installed from the repositories and started by a
/// reboot.
#[derive(Debug)]
pub struct KernelRule {
    /// `uname -r` of the kernel.
    pub release: &'static str,
    /// The repository package that installs it.
    pub package: &'static str,
}

/// A storage component; its package URL flag is `-storage.<platform key>.<key>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    Mdm,
    Sds,
    Sdc,
    Lia,
    Gateway,
}

impl Component {
    pub const ALL: [Component; 5] = [
        Component::Mdm,
        Component::Sds,
        Component::Sdc,
        Component::Lia,
        Component::Gateway,
    ];

    /// The name in the plan's package tables and in flag names.
    pub fn key(self) -> &'static str {
        match self {
            Component::Mdm => "mdm",
            Component::Sds => "sds",
            Component::Sdc => "sdc",
            Component::Lia => "lia",
            Component::Gateway => "gw",
        }
    }

    /// How `-help` names it.
    pub fn title(self) -> &'static str {
        match self {
            Component::Mdm => "MDM",
            Component::Sds => "SDS",
            Component::Sdc => "SDC",
            Component::Lia => "LIA",
            Component::Gateway => "Gateway",
        }
    }

    /// The installed package's name on `platform`.
    pub fn package(self, platform: Platform) -> &'static str {
        let p = &platform.profile().storage_packages;
        match self {
            Component::Mdm => p.mdm,
            Component::Sds => p.sds,
            Component::Sdc => p.sdc,
            Component::Lia => p.lia,
            Component::Gateway => p.gateway,
        }
    }
}

/// The storage components' installed package names on one platform.
#[derive(Debug)]
pub struct StoragePackages {
    pub mdm: &'static str,
    pub sds: &'static str,
    pub sdc: &'static str,
    pub lia: &'static str,
    pub gateway: &'static str,
}

/// A package of the volume driver; its URL flag is `-rexray.<platform key>.<name>`. Its
/// installed name is the same on every platform (host-steps section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverPackage {
    Rexray,
    Dvdcli,
}

impl DriverPackage {
    pub const ALL: [DriverPackage; 2] = [DriverPackage::Rexray, DriverPackage::Dvdcli];

    pub fn name(self) -> &'static str {
        match self {
            DriverPackage::Rexray => "rexray",
            DriverPackage::Dvdcli => "dvdcli",
        }
    }

    /// How `-help` names it.
    pub fn title(self) -> &'static str {
        match self {
            DriverPackage::Rexray => "REX-Ray",
            DriverPackage::Dvdcli => "dvdcli",
        }
    }
}

static UBUNTU_1404: Profile = Profile {
    platform: Platform::Ubuntu1404,
    key: "ubuntu14",
    key_aliases: &[],
    title: "Ubuntu 14.04",
    os: OsMatch {
        ids: &["ubuntu"],
        version: VersionMatch::Exact("14.04"),
    },
    package_tool: PackageTool::Deb,
    storage_packages: StoragePackages {
        mdm: "emc-scaleio-mdm",
        sds: "emc-scaleio-sds",
        sdc: "emc-scaleio-sdc",
        lia: "emc-scaleio-lia",
        gateway: "emc-scaleio-gateway",
    },
    prerequisites: &["libaio1", "zip"],
    mdm_prerequisites: &[],
    kernel: Some(KernelRule {
        release: "4.4.0-38-generic",
        package: "linux-image-4.4.0-38-generic",
    }),
    services: ServiceManager::SysV,
    rexray_order: RexrayOrder::InitScriptRequiredStart,
};

/// RHEL 7 and CentOS 7 share packages.
static RHEL_7: Profile = Profile {
    platform: Platform::Rhel7,
    key: "rhel7",
    key_aliases: &["centos7"],
    title: "RHEL/CentOS 7",
    os: OsMatch {
        ids: &["rhel", "centos"],
        version: VersionMatch::Major("7"),
    },
    package_tool: PackageTool::Rpm,
    storage_packages: StoragePackages {
        mdm: "EMC-ScaleIO-mdm",
        sds: "EMC-ScaleIO-sds",
        sdc: "EMC-ScaleIO-sdc",
        lia: "EMC-ScaleIO-lia",
        gateway: "EMC-ScaleIO-gateway",
    },
    prerequisites: &["libaio", "zip", "unzip"],
    // The gateway runs on Java (host-steps section 3).
    mdm_prerequisites: &["java-1.8.0-openjdk"],
    kernel: None,
    services: ServiceManager::Systemd,
    rexray_order: RexrayOrder::SystemdDropIn,
};

/// The profile of `platform`.
pub fn profile(platform: Platform) -> &'static Profile {
    match platform {
        Platform::Ubuntu1404 => &UBUNTU_1404,
        Platform::Rhel7 => &RHEL_7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_has_its_own_profile_and_key() {
        for p in Platform::ALL {
            let pr = profile(p);
            assert_eq!(pr.platform, p);
            assert_eq!(Platform::from_key(pr.key), Some(p));
            for alias in pr.key_aliases {
                assert_eq!(Platform::from_key(alias), Some(p));
            }
            for c in Component::ALL {
                assert!(!c.package(p).is_empty());
            }
        }
        let keys: std::collections::BTreeSet<&str> =
            Platform::ALL.iter().map(|p| p.key()).collect();
        assert_eq!(keys.len(), Platform::ALL.len());
        assert_eq!(
            Component::Sdc.package(Platform::Ubuntu1404),
            "emc-scaleio-sdc"
        );
        assert_eq!(
            Component::Gateway.package(Platform::Rhel7),
            "EMC-ScaleIO-gateway"
        );
        assert_eq!(
            profile(Platform::Ubuntu1404).prerequisites,
            ["libaio1", "zip"]
        );
        assert_eq!(
            profile(Platform::Rhel7).mdm_prerequisites,
            ["java-1.8.0-openjdk"]
        );
        assert!(profile(Platform::Ubuntu1404).mdm_prerequisites.is_empty());
    }

    #[test]
    fn supported_releases_are_recognised_and_others_refused_by_name() {
        let ubuntu = "NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"14.04\"\nPRETTY_NAME=\"Ubuntu 14.04.5 LTS\"\n";
        assert_eq!(Platform::detect(ubuntu), Ok(Platform::Ubuntu1404));
        let rhel = "ID=\"rhel\"\nVERSION_ID=\"7.9\"\n";
        assert_eq!(Platform::detect(rhel), Ok(Platform::Rhel7));
        let centos = "ID=\"centos\"\nID_LIKE=\"rhel fedora\"\nVERSION_ID=\"7\"\n";
        assert_eq!(Platform::detect(centos), Ok(Platform::Rhel7));
        let e = Platform::detect("ID=ubuntu\nVERSION_ID=\"16.04\"\n").unwrap_err();
        assert!(e.contains("Ubuntu 14.04 and RHEL/CentOS 7 only"), "{e}");
    }

    #[test]
    fn service_commands_follow_the_manager() {
        assert_eq!(
            ServiceManager::SysV.command("rexray", "restart"),
            ("service", ["rexray", "restart"])
        );
        assert_eq!(
            ServiceManager::Systemd.command("rexray", "restart"),
            ("systemctl", ["restart", "rexray"])
        );
    }
}
