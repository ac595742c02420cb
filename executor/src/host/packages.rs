//! Package management per platform (host-steps.md section 3): state queries with
//! `dpkg-query`/`rpm -q`, installs with `apt-get`/`yum` (repositories) and `dpkg -i`/`rpm -Uvh`
//! (downloaded files). A package counts as installed only when the state query says so.

use super::commands::{Cmd, CommandError, Runner};
use super::facts::Platform;

/// A storage component and its package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Mdm,
    Sds,
    Sdc,
    Lia,
    Gateway,
}

impl Component {
    pub fn key(self) -> &'static str {
        match self {
            Component::Mdm => "mdm",
            Component::Sds => "sds",
            Component::Sdc => "sdc",
            Component::Lia => "lia",
            Component::Gateway => "gw",
        }
    }

    /// The installed package's name.
    pub fn package(self, platform: Platform) -> &'static str {
        match (platform, self) {
            (Platform::Ubuntu1404, Component::Mdm) => "emc-scaleio-mdm",
            (Platform::Ubuntu1404, Component::Sds) => "emc-scaleio-sds",
            (Platform::Ubuntu1404, Component::Sdc) => "emc-scaleio-sdc",
            (Platform::Ubuntu1404, Component::Lia) => "emc-scaleio-lia",
            (Platform::Ubuntu1404, Component::Gateway) => "emc-scaleio-gateway",
            (Platform::Rhel7, Component::Mdm) => "EMC-ScaleIO-mdm",
            (Platform::Rhel7, Component::Sds) => "EMC-ScaleIO-sds",
            (Platform::Rhel7, Component::Sdc) => "EMC-ScaleIO-sdc",
            (Platform::Rhel7, Component::Lia) => "EMC-ScaleIO-lia",
            (Platform::Rhel7, Component::Gateway) => "EMC-ScaleIO-gateway",
        }
    }
}

/// Repository packages every node needs first (design.md section 4).
pub fn prerequisites(platform: Platform) -> &'static [&'static str] {
    match platform {
        Platform::Ubuntu1404 => &["libaio1", "zip"],
        Platform::Rhel7 => &["libaio", "zip", "unzip"],
    }
}

/// Repository packages an MDM node needs besides [`prerequisites`]: the gateway runs on Java
/// (host-steps section 3), installed from the repository on RHEL 7 only.
pub fn mdm_prerequisites(platform: Platform) -> &'static [&'static str] {
    match platform {
        Platform::Ubuntu1404 => &[],
        Platform::Rhel7 => &["java-1.8.0-openjdk"],
    }
}

/// The installed version (`version` for deb, `version-release` for rpm), `None` when the
/// package is absent or not fully installed. Any other answer of the tool is an error.
pub fn installed_version(
    r: &mut dyn Runner,
    platform: Platform,
    name: &str,
) -> Result<Option<String>, CommandError> {
    match platform {
        Platform::Ubuntu1404 => {
            // Not `dpkg -s`: the earlier code took its exit 0 with a message on stderr as
            // "installed". dpkg-query exits 1 for an unknown package.
            let cmd = Cmd::new(
                "dpkg-query",
                &["-W", "--showformat=${Status}\\t${Version}", name],
            );
            let out = r.run(&cmd)?;
            match out.status {
                0 => Ok(out
                    .stdout
                    .split_once('\t')
                    .filter(|(status, _)| status.trim() == "install ok installed")
                    .map(|(_, v)| v.trim().to_string())
                    .filter(|v| !v.is_empty())),
                1 => Ok(None),
                s => Err(CommandError {
                    command: cmd.display(),
                    status: Some(s),
                    tail: out.tail,
                }),
            }
        }
        Platform::Rhel7 => {
            let cmd = Cmd::new("rpm", &["-q", "--qf", "%{VERSION}-%{RELEASE}", name]);
            let out = r.run(&cmd)?;
            match out.status {
                0 => Ok(Some(out.stdout.trim().to_string()).filter(|v| !v.is_empty())),
                1 => Ok(None),
                s => Err(CommandError {
                    command: cmd.display(),
                    status: Some(s),
                    tail: out.tail,
                }),
            }
        }
    }
}

/// Installs repository packages.
pub fn install_from_repository(
    r: &mut dyn Runner,
    platform: Platform,
    names: &[&str],
) -> Result<(), CommandError> {
    let mut args = vec!["-y", "install"];
    args.extend_from_slice(names);
    let tool = match platform {
        Platform::Ubuntu1404 => "apt-get",
        Platform::Rhel7 => "yum",
    };
    r.check(&Cmd::new(tool, &args)).map(drop)
}

/// `dpkg -i <file>` / `rpm -Uvh <file>`, with the component's environment in `base`.
pub fn install_file(
    r: &mut dyn Runner,
    platform: Platform,
    file: &str,
    base: Cmd,
) -> Result<(), CommandError> {
    let (program, flag) = match platform {
        Platform::Ubuntu1404 => ("dpkg", "-i"),
        Platform::Rhel7 => ("rpm", "-Uvh"),
    };
    let cmd = Cmd {
        program: program.into(),
        args: vec![flag.into(), file.into()],
        ..base
    };
    r.check(&cmd).map(drop)
}

/// The version a vendor package file carries in its name:
/// `EMC-ScaleIO-sds-2.0-10000.2072.Ubuntu.14.04.x86_64.deb` -> `2.0-10000.2072`,
/// `emc-scaleio-gateway_2.0-10000.2072_amd64.deb` -> `2.0-10000.2072`,
/// `EMC-ScaleIO-mdm-2.0-10000.2072.el7.x86_64.rpm` -> `2.0-10000.2072.el7`.
pub fn version_in_file_name(file: &str, package: &str) -> Option<String> {
    let lower = file.to_ascii_lowercase();
    let stem = lower
        .strip_suffix(".deb")
        .or_else(|| lower.strip_suffix(".rpm"))?;
    let mut stem = stem.to_string();
    for arch in [".x86_64", "_amd64", ".amd64", "_x86_64", ".noarch", "_all"] {
        if let Some(s) = stem.strip_suffix(arch) {
            stem = s.to_string();
            break;
        }
    }
    if let Some(i) = stem.find(".ubuntu.") {
        stem.truncate(i);
    }
    let rest = stem.strip_prefix(&package.to_ascii_lowercase())?;
    let version = rest.strip_prefix(['-', '_'])?;
    (!version.is_empty() && version.starts_with(|c: char| c.is_ascii_digit()))
        .then(|| version.to_string())
}

/// Versions compare by their numbers and words: dpkg may spell `2.0-10000.2072` as
/// `2.0.10000.2072`.
pub fn same_version(a: &str, b: &str) -> bool {
    let parts = |s: &str| -> Vec<String> {
        s.split(['.', '-', '_', '~', ':'])
            .filter(|p| !p.is_empty())
            .map(str::to_ascii_lowercase)
            .collect()
    };
    parts(a) == parts(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_vendor_file_names() {
        let cases = [
            (
                "EMC-ScaleIO-sds-2.0-10000.2072.Ubuntu.14.04.x86_64.deb",
                "emc-scaleio-sds",
                Some("2.0-10000.2072"),
            ),
            (
                "emc-scaleio-gateway_2.0-10000.2072_amd64.deb",
                "emc-scaleio-gateway",
                Some("2.0-10000.2072"),
            ),
            (
                "EMC-ScaleIO-mdm-2.0-10000.2072.el7.x86_64.rpm",
                "EMC-ScaleIO-mdm",
                Some("2.0-10000.2072.el7"),
            ),
            ("EMC-ScaleIO-sds-2.0.x86_64.rpm", "EMC-ScaleIO-sdc", None),
            ("sds.deb", "emc-scaleio-sds", None),
        ];
        for (file, pkg, want) in cases {
            assert_eq!(version_in_file_name(file, pkg).as_deref(), want, "{file}");
        }
    }

    #[test]
    fn versions_compare_by_parts() {
        assert!(same_version("2.0-10000.2072", "2.0.10000.2072"));
        assert!(same_version("2.0-10000.2072.el7", "2.0-10000.2072.el7"));
        assert!(!same_version("2.0-10000.2072", "2.0-10000.2073"));
        assert!(!same_version("2.0-10000.2072", "2.0-10000.2072.el7"));
    }

    #[test]
    fn package_names_per_platform() {
        assert_eq!(
            Component::Sdc.package(Platform::Ubuntu1404),
            "emc-scaleio-sdc"
        );
        assert_eq!(
            Component::Gateway.package(Platform::Rhel7),
            "EMC-ScaleIO-gateway"
        );
        assert_eq!(prerequisites(Platform::Ubuntu1404), ["libaio1", "zip"]);
        assert_eq!(mdm_prerequisites(Platform::Rhel7), ["java-1.8.0-openjdk"]);
        assert!(mdm_prerequisites(Platform::Ubuntu1404).is_empty());
    }
}
