//! Validation of the storage cluster flags: gateway, its password, the existing MDMs and the
//! API version.

use super::check::Check;
use super::secrets::SecretFlag;
use super::*;
use crate::gateway::trust::{self, TrustMode};
use crate::tls::Fingerprint;

impl Check<'_> {
    pub(super) fn storage(&mut self, experimental: bool) -> StorageSettings {
        let password = self.password();
        let protection_domain = self.required("storage.protectiondomain");
        let storage_pool = self.required("storage.storagepool");
        let preconfig = self.mdms(experimental);
        let (gateway, gateway_port) = self.gateway_address();
        let lb_gateway = self
            .raw("storage.lbgateway")
            .map(|v| self.host("storage.lbgateway", v, true));
        let cluster_name = self.text("storage.clustername", "scaleio");
        let cluster_id = self.raw("storage.clusterid");
        let api_version = self.text("storage.apiversion", "2.0");
        let is_version = api_version.split_once('.').is_some_and(|(a, b)| {
            [a, b]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        });
        if !is_version {
            self.fail(
                "storage.apiversion",
                format!("{api_version:?} is not a version like 2.0"),
            );
        }
        let packages = self.package_urls();
        let version = self.storage_version();
        StorageSettings {
            password,
            protection_domain,
            storage_pool,
            preconfig,
            gateway,
            lb_gateway,
            cluster_name,
            cluster_id,
            api_version,
            packages,
            version,
            gateway_port,
            gateway_trust: self.gateway_trust(),
            wait: self.boolean("storage.wait"),
        }
    }

    /// `-storage.version` as the vendor's package files carry it.
    fn storage_version(&mut self) -> String {
        const NAME: &str = "storage.version";
        let v = self.text(NAME, super::table::DEFAULT_STORAGE_VERSION);
        package_version(&v).unwrap_or_else(|| {
            self.fail(
                NAME,
                format!(
                    "{v:?} is not a storage version like 2.0.1-2072 (the release) or \
                     2.0-10000.2072 (as the package files carry it)"
                ),
            );
            String::new()
        })
    }

    /// `-storage.preconfig.gateway` as `ip` or `ip:port` (`[v6]:port`): a gateway may listen
    /// on a port other than the default, and then the port comes with its address.
    fn gateway_address(&mut self) -> (Option<IpAddr>, Option<u16>) {
        const NAME: &str = "storage.preconfig.gateway";
        let Some(v) = self.raw(NAME) else {
            return (None, None);
        };
        if let Ok(ip) = v.parse::<IpAddr>() {
            return (Some(ip), None);
        }
        match v.parse::<std::net::SocketAddr>() {
            Ok(sa) if sa.port() != 0 => (Some(sa.ip()), Some(sa.port())),
            _ => {
                self.fail(NAME, format!("{v:?} is not an IP address or ip:port"));
                (None, None)
            }
        }
    }

    /// How the gateway's certificate is checked: one of `-storage.gateway.fingerprint`,
    /// `.cacert`, `.insecure`, or first use without any.
    fn gateway_trust(&mut self) -> TrustMode {
        const PINS: &str = "storage.gateway.fingerprint";
        let mut pins = Vec::new();
        for item in self.raw(PINS).unwrap_or_default().split(',') {
            match item.trim() {
                "" => {}
                t => match Fingerprint::parse(t) {
                    Ok(f) => pins.push(f),
                    Err(e) => self.fail(PINS, e),
                },
            }
        }
        let ca = self.raw("storage.gateway.cacert").map(PathBuf::from);
        let insecure = self.boolean("storage.gateway.insecure");
        trust::select(pins, ca, insecure).unwrap_or_else(|e| {
            self.fail(PINS, e);
            TrustMode::FirstUse
        })
    }

    /// The gateway password from `-storage.password`, else `-storage.password.file`, else
    /// `STORAGE_PASSWORD`. Neither the value nor the file's content is ever echoed.
    fn password(&mut self) -> Secret {
        let names = SecretFlag {
            name: "storage.password",
            file: "storage.password.file",
            env: "STORAGE_PASSWORD",
            what: "the gateway password",
        };
        self.secret(&names, true).unwrap_or_default()
    }

    fn mdms(&mut self, experimental: bool) -> Option<Mdms> {
        const NAMES: [&str; 3] = [
            "storage.preconfig.primary",
            "storage.preconfig.secondary",
            "storage.preconfig.tiebreaker",
        ];
        let present: Vec<bool> = NAMES
            .iter()
            .map(|n| {
                self.broken.contains(n)
                    || self
                        .given
                        .get(n)
                        .is_some_and(|g| !g.value.trim().is_empty())
            })
            .collect();
        let ips: Vec<Option<IpAddr>> = NAMES.iter().map(|n| self.ip(n)).collect();
        let count = present.iter().filter(|p| **p).count();
        if count == 0 {
            if !experimental {
                self.errors.push(format!(
                    "-{}, -{} and -{} are missing: give the addresses of the existing MDMs \
                     (or -experimental=true to let the framework build the storage cluster)",
                    NAMES[0], NAMES[1], NAMES[2]
                ));
            }
            return None;
        }
        if count < 3 {
            let missing: Vec<String> = NAMES
                .iter()
                .zip(&present)
                .filter(|(_, p)| !**p)
                .map(|(n, _)| format!("-{n}"))
                .collect();
            let given: Vec<String> = NAMES
                .iter()
                .zip(&present)
                .filter(|(_, p)| **p)
                .map(|(n, _)| self.label(n))
                .collect();
            self.errors.push(format!(
                "{}: missing while {} {} given; the three MDM flags go together",
                missing.join(" and "),
                given.join(" and "),
                if given.len() == 1 { "is" } else { "are" }
            ));
            return None;
        }
        let [Some(primary), Some(secondary), Some(tiebreaker)] = [ips[0], ips[1], ips[2]] else {
            return None;
        };
        if primary == secondary || primary == tiebreaker || secondary == tiebreaker {
            self.errors.push(format!(
                "{}, {} and {}: the primary, secondary and tie-breaker MDM must be three different nodes",
                self.label(NAMES[0]),
                self.label(NAMES[1]),
                self.label(NAMES[2])
            ));
            return None;
        }
        Some(Mdms {
            primary,
            secondary,
            tiebreaker,
        })
    }
}

/// A storage version as the vendor's package files carry it: `2.0-10000.2072` as it is;
/// a release `A.B.C[.D]-N` (the spec's `2.0.1-2072`) as the vendor numbers its packages,
/// `A.B-<C*10000 + D*1000>.N` (2.0.1-2072 is 2.0-10000.2072, 2.0.1.3-211 2.0-13000.211).
pub(super) fn package_version(v: &str) -> Option<String> {
    let (head, tail) = v.split_once('-')?;
    let numbers = |s: &str| -> Option<Vec<u64>> {
        s.split('.')
            .map(|p| {
                (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| p.parse().ok())
                    .flatten()
            })
            .collect()
    };
    let head = numbers(head)?;
    let tail_numbers = numbers(tail)?;
    match (head.as_slice(), tail_numbers.as_slice()) {
        ([_, _], [_, ..]) => Some(v.to_string()),
        ([a, b, c, rest @ ..], [n]) if *c > 0 && rest.len() <= 1 => {
            let d = rest.first().copied().unwrap_or(0);
            (d < 10).then(|| format!("{a}.{b}-{}.{n}", c * 10_000 + d * 1_000))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::package_version;

    #[test]
    fn storage_versions_read_as_the_package_files_carry_them() {
        for (given, want) in [
            ("2.0.1-2072", Some("2.0-10000.2072")),
            ("2.0-10000.2072", Some("2.0-10000.2072")),
            ("2.0.1.3-211", Some("2.0-13000.211")),
            ("2.0-13000.211", Some("2.0-13000.211")),
            ("2.0.0-5014", None),
            ("2.0.1", None),
            ("2.0.1-", None),
            ("v2.0.1-2072", None),
            ("2.0.1-20 72", None),
            ("", None),
        ] {
            assert_eq!(package_version(given).as_deref(), want, "{given:?}");
        }
    }
}
