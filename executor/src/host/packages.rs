//! Package management per platform (host-steps.md section 3): state queries with
//! `dpkg-query`/`rpm -q`, installs with `apt-get`/`yum` (repositories) and `dpkg -i`/`rpm -Uvh`
//! (downloaded files). A package counts as installed only when the state query says so.

use super::commands::{Cmd, CommandError, Runner};
use storage_framework::contract::platform::{profile, PackageTool, Platform};

/// The installed version (`version` for deb, `version-release` for rpm), `None` when the
/// package is absent or not fully installed. Any other answer of the tool is an error.
pub fn installed_version(
    r: &mut dyn Runner,
    platform: Platform,
    name: &str,
) -> Result<Option<String>, CommandError> {
    match profile(platform).package_tool {
        PackageTool::Deb => {
            // Not `dpkg -s`: the earlier code took its exit 0 with a message on stderr as
            // "installed". dpkg-query exits 1 for an unknown package.
            let cmd = Cmd::new(
                "dpkg-query",
                &["-W", "--showformat=${Status}\\t${Version}", name],
            )
            .deadline(Cmd::QUERY_DEADLINE);
            let out = r.run(&cmd)?;
            match out.status {
                0 => Ok(out
                    .stdout
                    .split_once('\t')
                    .filter(|(status, _)| status.trim() == "install ok installed")
                    .map(|(_, v)| v.trim().to_string())
                    .filter(|v| !v.is_empty())),
                1 => Ok(None),
                s => Err(CommandError::exited(&cmd, s, out.tail)),
            }
        }
        PackageTool::Rpm => {
            let cmd = Cmd::new("rpm", &["-q", "--qf", "%{VERSION}-%{RELEASE}", name])
                .deadline(Cmd::QUERY_DEADLINE);
            let out = r.run(&cmd)?;
            match out.status {
                0 => Ok(Some(out.stdout.trim().to_string()).filter(|v| !v.is_empty())),
                1 => Ok(None),
                s => Err(CommandError::exited(&cmd, s, out.tail)),
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
    let tool = profile(platform).package_tool.repository_installer();
    r.check(&Cmd::new(tool, &args).deadline(Cmd::INSTALL_DEADLINE))
        .map(drop)
}

/// `dpkg -i <file>` / `rpm -Uvh <file>`, with the component's environment in `base`.
pub fn install_file(
    r: &mut dyn Runner,
    platform: Platform,
    file: &str,
    base: Cmd,
) -> Result<(), CommandError> {
    let (program, flag) = profile(platform).package_tool.file_installer();
    let cmd = Cmd {
        program: program.into(),
        args: vec![flag.into(), file.into()],
        deadline: Cmd::INSTALL_DEADLINE,
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

/// The installed version `installed` is release `wanted` of the vendor: the same version,
/// or the same followed by one distribution tag (rpm's `2.0-10000.2072.el7` is the package
/// files' `2.0-10000.2072`).
pub fn is_release(installed: &str, wanted: &str) -> bool {
    if same_version(installed, wanted) {
        return true;
    }
    let Some(rest) = installed
        .to_ascii_lowercase()
        .strip_prefix(&wanted.to_ascii_lowercase())
        .map(str::to_owned)
    else {
        return false;
    };
    let tag = rest.strip_prefix('.').unwrap_or_default();
    tag.starts_with(|c: char| c.is_ascii_alphabetic())
        && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
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
    fn installs_get_minutes_and_queries_seconds() {
        let mut seen = Vec::new();
        let mut r = crate::host::scripted::Scripted::new(|c: &Cmd| {
            seen.push((c.program.clone(), c.deadline));
            (0, String::new())
        });
        let _ = installed_version(&mut r, Platform::Rhel7, "rexray");
        install_from_repository(&mut r, Platform::Rhel7, &["numactl"]).unwrap();
        install_file(&mut r, Platform::Ubuntu1404, "x.deb", Cmd::default()).unwrap();
        drop(r);
        assert_eq!(
            seen,
            [
                ("rpm".to_string(), Cmd::QUERY_DEADLINE),
                ("yum".to_string(), Cmd::INSTALL_DEADLINE),
                ("dpkg".to_string(), Cmd::INSTALL_DEADLINE),
            ]
        );
    }

    #[test]
    fn a_release_is_its_version_with_or_without_a_distribution_tag() {
        assert!(is_release("2.0-10000.2072.el7", "2.0-10000.2072"));
        assert!(is_release("2.0.10000.2072", "2.0-10000.2072"));
        assert!(is_release("2.0-10000.2072.el7_9", "2.0-10000.2072"));
        assert!(!is_release("2.0-10000.20721", "2.0-10000.2072"));
        assert!(!is_release("2.0-10000.2072.1", "2.0-10000.2072"));
        assert!(!is_release("2.0-10000.2073.el7", "2.0-10000.2072"));
        assert!(!is_release("2.0-10000", "2.0-10000.2072"));
    }

    #[test]
    fn versions_compare_by_parts() {
        assert!(same_version("2.0-10000.2072", "2.0.10000.2072"));
        assert!(same_version("2.0-10000.2072.el7", "2.0-10000.2072.el7"));
        assert!(!same_version("2.0-10000.2072", "2.0-10000.2073"));
        assert!(!same_version("2.0-10000.2072", "2.0-10000.2072.el7"));
    }
}
