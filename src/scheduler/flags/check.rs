//! Validation: the given values into a typed [`Config`], one error per problem.

use super::table::FLAGS;
use super::values::{find_placeholder, is_whole_placeholder, parse_bool, Given};
use super::*;
use crate::store::StoreHelper;
use std::collections::{HashMap, HashSet};
/// Turns the given values into a Config, collecting one error per problem. Values that fail
/// are replaced by harmless stand-ins so checking can go on; the Config is only returned when
/// no error was found.
pub(super) struct Check<'a> {
    pub(super) given: HashMap<&'static str, Given>,
    pub(super) broken: HashSet<&'static str>,
    pub(super) errors: Vec<String>,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
}

impl Check<'_> {
    pub(super) fn label(&self, name: &'static str) -> String {
        match self.given.get(name) {
            Some(g) => g.written.clone(),
            None => format!("-{name}"),
        }
    }

    pub(super) fn fail(&mut self, name: &'static str, problem: impl std::fmt::Display) {
        let label = self.label(name);
        self.errors.push(format!("{label}: {problem}"));
    }

    /// The raw value when given and not a placeholder. Empty counts as not given (Go's
    /// "empty string" default), except for required flags, where it is its own error.
    pub(super) fn raw(&mut self, name: &'static str) -> Option<String> {
        debug_assert!(FLAGS.iter().any(|f| f.name == name), "{name} not in FLAGS");
        let value = self.given.get(name)?.value.clone();
        if let Some(p) = find_placeholder(&value) {
            self.fail(
                name,
                format!("{value:?} still holds the placeholder {p}; replace it with a real value"),
            );
            return None;
        }
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return None;
        }
        Some(trimmed.to_owned())
    }

    fn required(&mut self, name: &'static str) -> String {
        let present = self.given.contains_key(name);
        let placeholder = self
            .given
            .get(name)
            .is_some_and(|g| find_placeholder(&g.value).is_some());
        match self.raw(name) {
            Some(v) => v,
            None => {
                if !present {
                    if !self.broken.contains(name) {
                        self.fail(name, "required flag is missing");
                    }
                } else if !placeholder {
                    self.fail(name, "must not be empty");
                }
                String::new()
            }
        }
    }

    fn text(&mut self, name: &'static str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    fn boolean(&mut self, name: &'static str) -> bool {
        let Some(v) = self.raw(name) else {
            return false;
        };
        parse_bool(&v).unwrap_or_else(|| {
            self.fail(name, format!("{v:?} is not a boolean (true or false)"));
            false
        })
    }

    fn number(&mut self, name: &'static str, default: f64) -> Option<f64> {
        let Some(v) = self.raw(name) else {
            return Some(default);
        };
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() => Some(n),
            _ => {
                self.fail(name, format!("{v:?} is not a number"));
                None
            }
        }
    }

    fn positive(&mut self, name: &'static str, default: f64) -> f64 {
        match self.number(name, default) {
            Some(n) if n > 0.0 => n,
            Some(n) => {
                self.fail(name, format!("{n} must be greater than 0"));
                default
            }
            None => default,
        }
    }

    fn factor(&mut self, name: &'static str) -> f64 {
        match self.number(name, 1.0) {
            Some(n) if n > 0.0 && n <= 1.0 => n,
            Some(n) => {
                self.fail(name, format!("{n} is outside (0, 1]"));
                1.0
            }
            None => 1.0,
        }
    }

    fn port(&mut self, name: &'static str) -> u16 {
        let v = self.required(name);
        if v.is_empty() {
            return 0;
        }
        match v.parse::<u64>() {
            Ok(n @ 1..=65535) => u16::try_from(n).unwrap_or(0),
            Ok(n) => {
                self.fail(name, format!("port {n} is outside 1..65535"));
                0
            }
            Err(_) if v.starts_with('$') => {
                self.fail(
                    name,
                    format!("{v:?} is not a port number (the launcher should have replaced {v})"),
                );
                0
            }
            Err(_) => {
                self.fail(name, format!("{v:?} is not a port number"));
                0
            }
        }
    }

    fn ip(&mut self, name: &'static str) -> Option<IpAddr> {
        let v = self.raw(name)?;
        match v.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.fail(name, format!("{v:?} is not an IP address"));
                None
            }
        }
    }

    pub(super) fn url(&mut self, name: &'static str) -> Option<String> {
        let v = self.raw(name)?;
        let lower = v.to_ascii_lowercase();
        let ok = ["http://", "https://"]
            .iter()
            .any(|s| lower.starts_with(s) && lower.len() > s.len())
            && !v.contains(char::is_whitespace);
        if ok {
            Some(v)
        } else {
            self.fail(name, format!("{v:?} is not an http:// or https:// URL"));
            None
        }
    }

    /// A name that ends up in a URL or a command: no spaces or slashes.
    fn host(&mut self, name: &'static str, v: String, allow_port: bool) -> String {
        let bad = v.contains(char::is_whitespace)
            || v.contains('/')
            || (!allow_port && v.contains(':') && v.parse::<IpAddr>().is_err());
        if bad {
            let what = if allow_port {
                "is not a host name, IP address or host:port"
            } else {
                "is not a host name or IP address (give the port with its own flag)"
            };
            self.fail(name, format!("{v:?} {what}"));
        }
        v
    }

    fn env(&self, key: &str) -> Option<String> {
        (self.env)(key).filter(|v| !v.trim().is_empty())
    }

    pub(super) fn config(&mut self) -> Config {
        let loglevel = self.loglevel();
        let debug = self.boolean("debug");
        let experimental = self.boolean("experimental");
        let teardown = self.boolean("teardown");

        let masters = self.masters();
        let encoding = match self.raw("mesos.encoding") {
            None => Encoding::Protobuf,
            Some(v) => v.parse::<Encoding>().unwrap_or_else(|e| {
                self.fail("mesos.encoding", e);
                Encoding::Protobuf
            }),
        };
        let framework = FrameworkSettings {
            user: self.text("user", "root"),
            name: self.text("framework.name", "storage-framework"),
            role: self.text("role", "*"),
            hostname: self
                .raw("hostname")
                .map(|h| self.host("hostname", h, false)),
            failover_timeout: self.failover_timeout(),
        };

        let rest_port = self.port("rest.port");
        let rest_address = match self.raw("rest.address") {
            Some(a) => self.host("rest.address", a, false),
            None => self.default_rest_address(),
        };

        let executor = ExecutorResources {
            cpu_mdm: self.positive("executor.cpu.mdm", 1.5),
            cpu_non: self.positive("executor.cpu.non", 0.5),
            mem_mdm: self.positive("executor.mem.mdm", 3072.0),
            mem_non: self.positive("executor.mem.non", 512.0),
            cpu_factor: self.factor("executor.cpu.factor"),
            mem_factor: self.factor("executor.mem.factor"),
            altpath: self.raw("executor.altpath").map(PathBuf::from),
        };

        let storage = self.storage(experimental);
        let rexray = self.volume_driver();
        let store = self.store();

        Config {
            loglevel,
            rest_port,
            rest_address,
            masters,
            encoding,
            framework,
            experimental,
            debug,
            teardown,
            executor,
            storage,
            rexray,
            store,
        }
    }

    fn loglevel(&mut self) -> log::LevelFilter {
        let Some(v) = self.raw("loglevel") else {
            return log::LevelFilter::Info;
        };
        match v.to_ascii_lowercase().as_str() {
            "error" => log::LevelFilter::Error,
            "warn" | "warning" => log::LevelFilter::Warn,
            "info" => log::LevelFilter::Info,
            "debug" => log::LevelFilter::Debug,
            "trace" => log::LevelFilter::Trace,
            _ => {
                self.fail(
                    "loglevel",
                    format!("{v:?} is not a log level (error, warn, info, debug or trace)"),
                );
                log::LevelFilter::Info
            }
        }
    }

    fn masters(&mut self) -> Vec<String> {
        let v = self.required("uri");
        if v.is_empty() {
            return Vec::new();
        }
        let mut masters = Vec::new();
        for item in v.split(',') {
            match parse_master(item.trim()) {
                Ok(m) => masters.push(m),
                Err(problem) => self.fail("uri", problem),
            }
        }
        masters
    }

    fn failover_timeout(&mut self) -> Duration {
        const DEFAULT: Duration = Duration::from_secs(604_800);
        let Some(v) = self.raw("failover.timeout") else {
            return DEFAULT;
        };
        match parse_duration(&v) {
            Some(d) => d,
            None => {
                self.fail(
                    "failover.timeout",
                    format!(
                        "{v:?} is not a duration (seconds, or a number with unit s, m, h or d, e.g. 168h)"
                    ),
                );
                DEFAULT
            }
        }
    }

    fn default_rest_address(&self) -> String {
        self.env("HOST")
            .or_else(|| self.env("LIBPROCESS_IP"))
            .or_else(|| self.env("HOSTNAME"))
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "localhost".to_owned())
    }

    fn storage(&mut self, experimental: bool) -> StorageSettings {
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
            gateway_port,
            gateway_ca: self.raw("storage.gateway.cacert").map(PathBuf::from),
            wait: self.boolean("storage.wait"),
            capacity_interval: self.capacity_interval(),
            threshold_pct: self.threshold(),
        }
    }

    /// Issue 9: `-storage.preconfig.gateway` as `ip` or `ip:port` (`[v6]:port`).
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

    fn capacity_interval(&mut self) -> Duration {
        const NAME: &str = "storage.capacity.interval";
        const DEFAULT: Duration = Duration::from_secs(60);
        let Some(v) = self.raw(NAME) else {
            return DEFAULT;
        };
        match parse_duration(&v) {
            Some(d) if d >= Duration::from_secs(1) => d,
            _ => {
                self.fail(
                    NAME,
                    format!("{v:?} is not a duration of at least 1 second (e.g. 60 or 5m)"),
                );
                DEFAULT
            }
        }
    }

    fn threshold(&mut self) -> f64 {
        const NAME: &str = "storage.threshold";
        match self.number(NAME, 80.0) {
            Some(n) if n > 0.0 && n <= 100.0 => n,
            Some(n) => {
                self.fail(NAME, format!("{n} is not a percentage in (0, 100]"));
                80.0
            }
            None => 80.0,
        }
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

    /// A secret from `-<name>`, else `-<file>`, else the environment variable: `None` when
    /// none is given (an error only when `required`) or on an error. Like
    /// [`Check::required`], but no message ever contains the value.
    pub(super) fn secret(&mut self, f: &SecretFlag, required: bool) -> Option<Secret> {
        let SecretFlag {
            name,
            file,
            env,
            what,
        } = *f;
        let value = match (self.given.get(name), self.given.get(file)) {
            (Some(_), Some(_)) => {
                let other = self.label(file);
                self.fail(
                    name,
                    format!("give the password once: {other} is given too"),
                );
                return None;
            }
            (Some(g), None) => g.value.clone(),
            (None, Some(g)) => {
                let path = g.value.trim().to_owned();
                return match read_password_file(&path) {
                    Ok(p) => Some(Secret::new(p)),
                    Err(e) => {
                        self.fail(file, e);
                        None
                    }
                };
            }
            (None, None) => match (self.env)(env) {
                Some(v) if !v.is_empty() => return Some(Secret::new(v)),
                Some(_) => {
                    self.errors
                        .push(format!("{env}: the environment variable is empty"));
                    return None;
                }
                None => {
                    if required && !self.broken.contains(name) && !self.broken.contains(file) {
                        self.fail(
                            name,
                            format!(
                                "required flag is missing (or give -{file}=<path>, or set {env})"
                            ),
                        );
                    }
                    return None;
                }
            },
        };
        if is_whole_placeholder(&value) {
            self.fail(
                name,
                format!(
                    "the value is still the placeholder from the example; replace it with {what}"
                ),
            );
            return None;
        }
        // Not trimmed: spaces may be part of a password.
        if value.is_empty() {
            self.fail(name, "must not be empty");
            return None;
        }
        Some(Secret::new(value))
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

    fn store(&mut self) -> StoreSettings {
        let mut s = self.store_location();
        // issue 12: adoption and helpers.
        s.explicit = self.raw("store.type").is_some() || self.raw("store.uri").is_some();
        s.adopt_id = self.raw("framework.id").filter(|v| !v.is_empty());
        s.force_new = self.boolean("framework.new");
        if s.adopt_id.is_some() && s.force_new {
            self.fail("framework.new", "-framework.id adopts a framework, -framework.new registers a new one: give one of them");
        }
        let yes = self.boolean("yes");
        let helpers = [
            self.boolean("store.dump").then_some(StoreHelper::Dump),
            self.boolean("store.delete")
                .then_some(StoreHelper::Delete { yes }),
            self.raw("store.import")
                .map(|p| StoreHelper::Import(p.into())),
        ];
        let mut chosen = helpers.into_iter().flatten();
        s.helper = chosen.next();
        if chosen.next().is_some() {
            self.fail(
                "store.dump",
                "give one of -store.dump, -store.delete, -store.import",
            );
        }
        s
    }

    fn store_location(&mut self) -> StoreSettings {
        let kind = match self.raw("store.type").map(|v| v.to_ascii_lowercase()) {
            None => StoreKind::File,
            Some(v) if v == "file" => StoreKind::File,
            Some(v) if v == "zookeeper" || v == "zk" => StoreKind::ZooKeeper,
            Some(v) => {
                self.fail(
                    "store.type",
                    format!("{v:?} is not a store type (file, zk)"),
                );
                StoreKind::File
            }
        };
        if kind == StoreKind::ZooKeeper {
            // issue 12: default path /storage-framework/<framework name>.
            let name = self
                .raw("framework.name")
                .unwrap_or_else(|| "storage-framework".into());
            let default = format!("/storage-framework/{name}");
            let uri = match self.raw("store.uri") {
                None => {
                    self.fail(
                        "store.uri",
                        "-store.type=zk needs -store.uri=zk://host:port,.../path",
                    );
                    String::new()
                }
                Some(v) => match crate::store::zk::parse_uri(&v, &default) {
                    Ok((hosts, path)) => format!("zk://{}{path}", hosts.join(",")),
                    Err(e) => {
                        self.fail("store.uri", e);
                        String::new()
                    }
                },
            };
            return StoreSettings::new(kind, uri);
        }
        let uri = match self.raw("store.uri") {
            Some(v) => {
                let path = v.strip_prefix("file://").unwrap_or(&v).to_owned();
                if path.is_empty() || path.ends_with('/') {
                    self.fail("store.uri", format!("{v:?} does not name a file"));
                }
                path
            }
            None => match self.env("MESOS_SANDBOX") {
                Some(sandbox) => format!("{}/{DEFAULT_STATE_FILE}", sandbox.trim_end_matches('/')),
                None => format!("./{DEFAULT_STATE_FILE}"),
            },
        };
        StoreSettings::new(kind, uri)
    }
}

/// One `-uri` entry to `host:port`.
fn parse_master(item: &str) -> Result<String, String> {
    let example = "(e.g. 10.0.0.1:5050)";
    if item.is_empty() {
        return Err("empty entry in the list of masters".to_owned());
    }
    let lower = item.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &item["http://".len()..]
    } else if lower.starts_with("https://") {
        return Err(format!(
            "{item:?}: https is not supported; the scheduler talks plain HTTP to the master"
        ));
    } else if lower.starts_with("zk://") {
        return Err(format!(
            "{item:?}: ZooKeeper master detection is not supported; list the masters as host:port {example}"
        ));
    } else if let Some((scheme, _)) = item.split_once("://") {
        return Err(format!(
            "{item:?}: unsupported scheme {scheme:?}; give host:port {example}"
        ));
    } else {
        item
    };
    let rest = rest
        .strip_suffix("/api/v1/scheduler")
        .unwrap_or(rest)
        .trim_end_matches('/');
    let not_host_port = || format!("{item:?} is not host:port {example}");
    if rest.contains('/') {
        return Err(not_host_port());
    }
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        let (inner, after) = bracketed.split_once(']').ok_or_else(not_host_port)?;
        if inner.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{item:?}: [{inner}] is not an IPv6 address"));
        }
        let port = after.strip_prefix(':').ok_or_else(not_host_port)?;
        (&rest[..inner.len() + 2], port)
    } else {
        let (host, port) = rest.rsplit_once(':').ok_or_else(not_host_port)?;
        let valid = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_');
        if !valid {
            return Err(not_host_port());
        }
        (host, port)
    };
    match port.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(format!("{host}:{p}")),
        Ok(p) => Err(format!("{item:?}: port {p} is outside 1..65535")),
        Err(_) => Err(not_host_port()),
    }
}

/// Seconds as a plain number, or a number with unit s, m, h or d.
fn parse_duration(v: &str) -> Option<Duration> {
    let (number, unit) = match v.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => (&v[..at], &v[at..]),
        None => (v, "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    let n: f64 = number.trim().parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(n * scale).ok()
}

/// The three ways a secret may be given, and what it is (for messages).
#[derive(Clone, Copy)]
pub(super) struct SecretFlag {
    pub(super) name: &'static str,
    pub(super) file: &'static str,
    pub(super) env: &'static str,
    pub(super) what: &'static str,
}

/// Longest password file accepted: a password, not a document.
const MAX_PASSWORD_FILE: u64 = 4096;

/// The password in `path`: one trailing newline (`\n` or `\r\n`) is not part of it.
fn read_password_file(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("no path given".into());
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{path:?} is not a regular file"));
    }
    if meta.len() > MAX_PASSWORD_FILE {
        return Err(format!(
            "{path:?} is {} bytes; a password file holds at most {MAX_PASSWORD_FILE}",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{path:?} is not UTF-8 text"))?;
    let text = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if text.is_empty() {
        return Err(format!("{path:?} is empty"));
    }
    Ok(text.to_owned())
}
