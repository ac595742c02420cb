//! Validation: the given values into a typed [`Config`], one error per problem. This file
//! holds the checker itself, its per-kind value checks and the assembly of the [`Config`]; the
//! groups of flags are checked in the sibling files.

use super::table::FLAGS;
use super::values::{find_placeholder, parse_bool, Given};
use super::*;
use std::collections::{HashMap, HashSet};

pub(super) use super::secrets::SecretFlag;

/// Turns the given values into a Config, collecting one error per problem. Values that fail
/// are replaced by harmless stand-ins so checking can go on; the Config is only returned when
/// no error was found.
pub(super) struct Check<'a> {
    pub(super) given: HashMap<&'static str, Given>,
    pub(super) broken: HashSet<&'static str>,
    pub(super) errors: Vec<String>,
    /// Said once at start, one line each; never a value.
    pub(super) warnings: Vec<String>,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    /// Package URL flags given without their digest flag: (URL flag, digest flag).
    pub(super) without_digest: Vec<(&'static str, &'static str)>,
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

    pub(super) fn required(&mut self, name: &'static str) -> String {
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

    pub(super) fn text(&mut self, name: &'static str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    pub(super) fn boolean(&mut self, name: &'static str) -> bool {
        let Some(v) = self.raw(name) else {
            return false;
        };
        parse_bool(&v).unwrap_or_else(|| {
            self.fail(name, format!("{v:?} is not a boolean (true or false)"));
            false
        })
    }

    pub(super) fn number(&mut self, name: &'static str, default: f64) -> Option<f64> {
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

    pub(super) fn positive(&mut self, name: &'static str, default: f64) -> f64 {
        match self.number(name, default) {
            Some(n) if n > 0.0 => n,
            Some(n) => {
                self.fail(name, format!("{n} must be greater than 0"));
                default
            }
            None => default,
        }
    }

    pub(super) fn factor(&mut self, name: &'static str) -> f64 {
        match self.number(name, 1.0) {
            Some(n) if n > 0.0 && n <= 1.0 => n,
            Some(n) => {
                self.fail(name, format!("{n} is outside (0, 1]"));
                1.0
            }
            None => 1.0,
        }
    }

    pub(super) fn port(&mut self, name: &'static str) -> u16 {
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

    pub(super) fn ip(&mut self, name: &'static str) -> Option<IpAddr> {
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
    pub(super) fn host(&mut self, name: &'static str, v: String, allow_port: bool) -> String {
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

    pub(super) fn env(&self, key: &str) -> Option<String> {
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
        let rest_listen = self
            .ip("rest.listen")
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        let rest_tls = self.rest_tls();
        let operator_token = self.operator_token();

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
        let health = self.health();
        let max_disrupted_per_domain = self.max_disrupted();
        let rexray = self.volume_driver();
        let unverified_packages = self.unverified_packages();
        let store = self.store();

        Config {
            loglevel,
            rest_port,
            rest_address,
            rest_listen,
            rest_tls,
            operator_token,
            masters,
            encoding,
            framework,
            experimental,
            debug,
            teardown,
            executor,
            storage,
            health,
            max_disrupted_per_domain,
            rexray,
            unverified_packages,
            store,
            warnings: std::mem::take(&mut self.warnings),
        }
    }
}
