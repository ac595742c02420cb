//! The `Volume driver` flag group: REX-Ray and dvdcli package URLs per platform with their
//! SHA-256, the isolator module, and the scoped gateway user REX-Ray logs in as. The user's
//! password is read like the gateway password (flag, file, environment). Also every package
//! URL's digest, storage packages included: a URL without one is an error unless
//! `-storage.packages.unverified=true`.

use super::check::{Check, SecretFlag};
use super::table::UNVERIFIED;
use super::*;
use crate::contract::platform::{Component, DriverPackage, Platform};

/// The flag `-<group>.<platform key>.<name>`, as the flag table spells it (every platform's
/// flags are in the table: `every_platform_has_its_flags`).
fn platform_flag(group: &str, platform: Platform, name: &str) -> &'static str {
    let wanted = format!("{group}.{}.{name}", platform.key());
    super::table::lookup(&wanted).map_or("", |f| f.name)
}

const REXRAY_PASSWORD: SecretFlag = SecretFlag {
    name: "rexray.password",
    file: "rexray.password.file",
    env: "REXRAY_PASSWORD",
    what: "the volume driver user's password",
};

impl Check<'_> {
    pub(super) fn volume_driver(&mut self) -> RexRay {
        let mut packages = VolumeDriverPackages::new();
        for platform in Platform::ALL {
            let mut p = DriverPackages::default();
            for package in DriverPackage::ALL {
                let url = platform_flag("rexray", platform, package.name());
                let sha = platform_flag("rexray", platform, &format!("{}.sha256", package.name()));
                let d = self.download(url, sha);
                match package {
                    DriverPackage::Rexray => p.rexray = d,
                    DriverPackage::Dvdcli => p.dvdcli = d,
                }
            }
            if p != DriverPackages::default() {
                packages.insert(platform, p);
            }
        }
        let isolator = self.download("isolator.binary", "isolator.sha256");
        let username = self.raw("rexray.username");
        if let Some(u) = &username {
            if u.chars().any(|c| c.is_control()) {
                self.fail("rexray.username", "must not hold control characters");
            }
        }
        let password = self.secret(&REXRAY_PASSWORD, false);
        let user = match (username, password) {
            (Some(username), Some(password)) => Some(VolumeDriverUser { username, password }),
            (None, None) => None,
            (Some(_), None) => {
                let has_error = self.errors.iter().any(|e| e.contains("rexray.password"));
                if !has_error {
                    self.fail(
                        "rexray.username",
                        "given without its password (-rexray.password, -rexray.password.file or REXRAY_PASSWORD)",
                    );
                }
                None
            }
            (None, Some(_)) => {
                self.fail(
                    "rexray.password",
                    "a password without -rexray.username: give the user too",
                );
                None
            }
        };
        RexRay {
            branch: self.raw("rexray.branch").unwrap_or_else(|| "stable".into()),
            version: self
                .raw("rexray.version")
                .unwrap_or_else(|| "latest".into()),
            isolator_binary: isolator.as_ref().map(|d| d.url.clone()),
            isolator_sha256: isolator.and_then(|d| d.sha256),
            packages,
            user,
        }
    }

    /// The storage packages' URL flags (`-storage.<platform>.<component>`) and their digests
    /// of every platform given any.
    pub(super) fn package_urls(&mut self) -> Packages {
        let mut packages = Packages::new();
        for platform in Platform::ALL {
            let mut urls = PackageUrls::default();
            for c in Component::ALL {
                let url = platform_flag("storage", platform, c.key());
                let sha = platform_flag("storage", platform, &format!("{}.sha256", c.key()));
                let download = self.download(url, sha);
                urls.set(c, download);
            }
            if urls != PackageUrls::default() {
                packages.insert(platform, urls);
            }
        }
        packages
    }

    /// A URL flag and the flag of its digest; a digest without its URL is an error, a URL
    /// without its digest is noted for [`Check::unverified_packages`].
    fn download(&mut self, url: &'static str, sha: &'static str) -> Option<Download> {
        let location = self.url(url);
        let digest = self.raw(sha).and_then(|v| {
            let hex = v.to_ascii_lowercase();
            if crate::sha256::is_hex_digest(&hex) {
                Some(hex)
            } else {
                self.fail(sha, format!("{v:?} is not a SHA-256 (64 hex digits)"));
                None
            }
        });
        if digest.is_some() && location.is_none() && !self.given.contains_key(url) {
            self.fail(sha, format!("given without -{url}"));
        }
        if location.is_some() && digest.is_none() && !self.broken_digest(sha) {
            self.without_digest.push((url, sha));
        }
        location.map(|url| Download {
            url,
            sha256: digest,
        })
    }
}

impl Config {
    /// One start-up line per platform that lacks the URL of a package its nodes install:
    /// the storage components the mode installs (data nodes: SDS and SDC; experimental
    /// mode: all), REX-Ray, and dvdcli with the isolator.
    pub fn packages_without_url(&self) -> Vec<String> {
        let components: &[Component] = if self.storage.preconfig.is_some() {
            &[Component::Sds, Component::Sdc]
        } else {
            &Component::ALL
        };
        let mut lines = Vec::new();
        for platform in Platform::ALL {
            let key = platform.key();
            let urls = self.storage.packages.get(&platform);
            let mut flags: Vec<String> = components
                .iter()
                .filter(|c| urls.and_then(|u| u.get(**c)).is_none())
                .map(|c| format!("-storage.{key}.{}", c.key()))
                .collect();
            let driver = self.rexray.packages.get(&platform);
            for p in DriverPackage::ALL {
                let wanted = p == DriverPackage::Rexray || self.rexray.isolator_binary.is_some();
                if wanted && driver.and_then(|d| d.get(p)).is_none() {
                    flags.push(format!("-rexray.{key}.{}", p.name()));
                }
            }
            if flags.is_empty() {
                continue;
            }
            let names: Vec<&str> = flags.iter().filter_map(|f| f.rsplit('.').next()).collect();
            lines.push(format!(
                "packages for {key}: no URL for {}: a node needs them installed already \
                 (storage packages at {}) or fails naming the flag ({})",
                names.join(", "),
                self.storage.version,
                flags.join(", ")
            ));
        }
        lines
    }
}

impl Check<'_> {
    /// Whether the digest flag was given but refused (its own error already names it).
    fn broken_digest(&self, sha: &'static str) -> bool {
        self.given
            .get(sha)
            .is_some_and(|g| !g.value.trim().is_empty())
    }

    /// Package URLs given without their digest: errors naming both flags, or under
    /// `-storage.packages.unverified=true` the flags as written, one start-up warning each.
    pub(super) fn unverified_packages(&mut self) -> Vec<String> {
        let allowed = self.boolean(UNVERIFIED);
        let missing = std::mem::take(&mut self.without_digest);
        if allowed {
            return missing.iter().map(|(url, _)| self.label(url)).collect();
        }
        for (url, sha) in missing {
            self.fail(
                url,
                format!(
                    "no -{sha}: give the package's SHA-256 (64 hex digits, as sha256sum prints \
                     it), which the executor checks before installing it, or \
                     -{UNVERIFIED}=true to install it unchecked"
                ),
            );
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";

    fn args(extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "-uri=10.0.0.1:5050",
            "-rest.port=31000",
            "-storage.password=Adm1n-pw",
            "-storage.protectiondomain=pd",
            "-storage.storagepool=sp",
            "-storage.preconfig.primary=10.0.0.1",
            "-storage.preconfig.secondary=10.0.0.2",
            "-storage.preconfig.tiebreaker=10.0.0.3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    fn parse_env(extra: &[&str], env: &[(&str, &str)]) -> Result<Config, Vec<String>> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        match parse(&args(extra), &lookup) {
            Ok(Parsed::Run(c)) => Ok(*c),
            Ok(_) => panic!("not a run"),
            Err(e) => Err(e),
        }
    }

    #[test]
    fn start_up_names_the_packages_without_url_one_line_per_platform() {
        let c = parse_env(&[], &[]).unwrap();
        assert_eq!(c.storage.version, "2.0-10000.2072");
        let lines = c.packages_without_url();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].starts_with("packages for ubuntu14: no URL for sds, sdc, rexray:"));
        assert!(lines[1].contains("(-storage.rhel7.sds, -storage.rhel7.sdc, -rexray.rhel7.rexray)"));
        assert!(lines[1].contains("at 2.0-10000.2072"), "{}", lines[1]);
        // Every package of a platform given: no line for it; the isolator adds dvdcli.
        let u = "http://p/";
        let given = [
            format!("-storage.rhel7.sds={u}EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm"),
            format!("-storage.rhel7.sdc={u}EMC-ScaleIO-sdc-2.0-10000.2072.el7.x86_64.rpm"),
            format!("-rexray.rhel7.rexray={u}rexray-0.11.4-1.x86_64.rpm"),
            format!("-isolator.binary={u}libmesos_dvdi_isolator-1.0.1.so"),
            "-storage.packages.unverified=true".into(),
            "-storage.version=2.0.1.3-211".into(),
        ];
        let given: Vec<&str> = given.iter().map(String::as_str).collect();
        let c = parse_env(&given, &[]).unwrap();
        let lines = c.packages_without_url();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[1].starts_with("packages for rhel7: no URL for dvdcli:"),
            "{}",
            lines[1]
        );
        assert!(lines[0].contains("at 2.0-13000.211"), "{}", lines[0]);
        let e = parse_env(&["-storage.version=latest"], &[]).unwrap_err();
        assert!(
            e[0].starts_with("-storage.version: \"latest\" is not a storage version"),
            "{e:?}"
        );
    }

    #[test]
    fn package_urls_and_digests_per_platform() {
        let c = parse_env(
            &[
                "-rexray.ubuntu14.rexray=http://r/rexray_0.11.4-1_amd64.deb",
                &format!("-rexray.ubuntu14.rexray.sha256={SHA}"),
                "-rexray.centos7.dvdcli=http://r/dvdcli-0.2.1-1.x86_64.rpm",
                "-storage.packages.unverified=true",
                "-isolator.binary=http://r/libmesos_dvdi_isolator-1.0.1.so",
                &format!("-isolator.sha256={SHA}"),
            ],
            &[],
        )
        .unwrap();
        let u = c.rexray.packages[&Platform::Ubuntu1404]
            .rexray
            .clone()
            .unwrap();
        assert_eq!(u.url, "http://r/rexray_0.11.4-1_amd64.deb");
        assert_eq!(u.sha256.as_deref(), Some(SHA.to_ascii_lowercase().as_str()));
        let d = c.rexray.packages[&Platform::Rhel7].dvdcli.clone().unwrap();
        assert_eq!(
            (d.url.as_str(), d.sha256),
            ("http://r/dvdcli-0.2.1-1.x86_64.rpm", None)
        );
        assert!(c.rexray.packages[&Platform::Rhel7].rexray.is_none());
        assert_eq!(
            c.rexray.isolator_sha256.as_deref(),
            Some(SHA.to_ascii_lowercase().as_str())
        );
        assert_eq!(c.unverified_packages, ["-rexray.centos7.dvdcli"]);
    }

    #[test]
    fn a_package_url_without_its_digest_is_refused_naming_both_flags() {
        let e = parse_env(
            &[
                "-storage.rhel7.sds=http://p/sds.rpm",
                "-scaleio.centos7.sdc=http://p/sdc.rpm",
                "-rexray.ubuntu14.rexray=http://r/rexray_0.11.4-1_amd64.deb",
                "-isolator.binary=http://r/libmesos_dvdi_isolator-1.0.1.so",
            ],
            &[],
        )
        .unwrap_err();
        for (url, sha) in [
            ("-storage.rhel7.sds", "-storage.rhel7.sds.sha256"),
            ("-scaleio.centos7.sdc", "-storage.rhel7.sdc.sha256"),
            ("-rexray.ubuntu14.rexray", "-rexray.ubuntu14.rexray.sha256"),
            ("-isolator.binary", "-isolator.sha256"),
        ] {
            assert!(
                e.iter().any(|l| l.starts_with(&format!("{url}: no {sha}:"))
                    && l.contains("-storage.packages.unverified=true")),
                "{url}: {e:?}"
            );
        }
        assert_eq!(e.len(), 4, "{e:?}");
    }

    #[test]
    fn storage_package_digests_are_checked_and_carried() {
        let e = parse_env(
            &[
                "-storage.rhel7.sds=http://p/sds.rpm",
                "-storage.rhel7.sds.sha256=abc",
                &format!("-storage.ubuntu14.gw.sha256={SHA}"),
            ],
            &[],
        )
        .unwrap_err();
        assert!(
            e.iter()
                .any(|l| l.starts_with("-storage.rhel7.sds.sha256:") && l.contains("64 hex")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|l| l
                    .contains("-storage.ubuntu14.gw.sha256: given without -storage.ubuntu14.gw")),
            "{e:?}"
        );
        // A refused digest is its own error, not also a missing one.
        assert_eq!(e.len(), 2, "{e:?}");

        let c = parse_env(
            &[
                "-storage.rhel7.sds=http://p/sds.rpm",
                &format!("-storage.rhel7.sds.sha256={SHA}"),
            ],
            &[],
        )
        .unwrap();
        let sds = c.storage.packages[&Platform::Rhel7]
            .get(Component::Sds)
            .unwrap();
        assert_eq!(sds.sha256, Some(SHA.to_ascii_lowercase()));
        assert!(c.unverified_packages.is_empty());
    }

    #[test]
    fn unverified_packages_are_allowed_only_when_asked_with_a_warning_each() {
        let c = parse_env(
            &[
                "-storage.packages.unverified=true",
                "-scaleio.rhel7.sds=http://p/sds.rpm",
                "-storage.rhel7.sdc=http://p/sdc.rpm",
                &format!("-storage.rhel7.sdc.sha256={SHA}"),
                "-rexray.rhel7.rexray=http://r/rexray-0.11.4-1.x86_64.rpm",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            c.unverified_packages,
            ["-scaleio.rhel7.sds", "-rexray.rhel7.rexray"]
        );
        let w = unverified_warning(&c.unverified_packages[0]);
        assert!(
            w.starts_with("-scaleio.rhel7.sds: no SHA-256 given, installed unchecked"),
            "{w}"
        );
    }

    #[test]
    fn without_package_urls_nothing_is_asked_and_nothing_warned() {
        for extra in [&[][..], &["-storage.packages.unverified=true"][..]] {
            let c = parse_env(extra, &[]).unwrap();
            assert!(c.unverified_packages.is_empty());
            assert!(c.storage.packages.is_empty() && c.rexray.packages.is_empty());
        }
    }

    #[test]
    fn every_platform_has_its_flags() {
        for platform in Platform::ALL {
            for c in Component::ALL {
                assert!(!platform_flag("storage", platform, c.key()).is_empty());
            }
            for p in DriverPackage::ALL {
                assert!(!platform_flag("rexray", platform, p.name()).is_empty());
                let sha = format!("{}.sha256", p.name());
                assert!(!platform_flag("rexray", platform, &sha).is_empty());
            }
        }
    }

    #[test]
    fn bad_digests_and_orphans_are_named() {
        let e = parse_env(&["-rexray.rhel7.rexray.sha256=abc"], &[]).unwrap_err();
        assert!(
            e.iter()
                .any(|l| l.contains("-rexray.rhel7.rexray.sha256") && l.contains("64 hex")),
            "{e:?}"
        );
        let e = parse_env(&[&format!("-isolator.sha256={SHA}")], &[]).unwrap_err();
        assert!(
            e.iter()
                .any(|l| l.contains("given without -isolator.binary")),
            "{e:?}"
        );
        let e = parse_env(&["-rexray.ubuntu14.dvdcli=ftp://x/d.deb"], &[]).unwrap_err();
        assert!(
            e.iter().any(|l| l.contains("-rexray.ubuntu14.dvdcli")),
            "{e:?}"
        );
    }

    #[test]
    fn scoped_user_from_flag_file_or_environment() {
        let c = parse_env(
            &["-rexray.username=rexray", "-rexray.password=Vol-pw1"],
            &[],
        )
        .unwrap();
        let u = c.rexray.user.as_ref().unwrap();
        assert_eq!(
            (u.username.as_str(), u.password.expose()),
            ("rexray", "Vol-pw1")
        );
        assert!(c.rexray.warnings().is_empty());
        assert!(!format!("{c:?}").contains("Vol-pw1"));
        assert!(!c.summary().contains("Vol-pw1"));

        let c = parse_env(
            &["-rexray.username=rexray"],
            &[("REXRAY_PASSWORD", "Env-pw1")],
        )
        .unwrap();
        assert_eq!(c.rexray.user.unwrap().password.expose(), "Env-pw1");

        let dir = std::env::temp_dir().join(format!("rexray-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "File-pw1\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let flag = format!("-rexray.password.file={}", file.display());
        let c = parse_env(&["-rexray.username=rexray", &flag], &[]).unwrap();
        assert_eq!(c.rexray.user.unwrap().password.expose(), "File-pw1");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn half_a_user_is_an_error_and_none_a_warning() {
        let e = parse_env(&["-rexray.username=rexray"], &[]).unwrap_err();
        assert!(
            e.iter()
                .any(|l| l.contains("-rexray.username") && l.contains("without its password")),
            "{e:?}"
        );
        let e = parse_env(&["-rexray.password=Vol-pw1"], &[]).unwrap_err();
        assert!(
            e.iter().any(|l| l.contains("without -rexray.username")),
            "{e:?}"
        );
        assert!(!e.iter().any(|l| l.contains("Vol-pw1")), "{e:?}");

        let c = parse_env(&[], &[]).unwrap();
        assert!(c.rexray.user.is_none());
        let w = c.rexray.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("-rexray.username") && w[0].contains("-rexray.password"));
    }

    #[test]
    fn branch_and_version_are_accepted_and_ignored_with_one_warning() {
        let c = parse_env(
            &[
                "-rexray.branch=unstable",
                "-rexray.version=0.6.3",
                "-rexray.username=u",
                "-rexray.password=p",
            ],
            &[],
        )
        .unwrap();
        let w = c.rexray.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("ignored"), "{w:?}");
    }
}
