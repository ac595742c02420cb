//! Validation of the framework, master and REST flags: log level, masters, failover timeout
//! and the address executors use to reach this scheduler, and its TLS certificate files.

use super::check::Check;
use super::values::{parse_duration, parse_master};
use super::TlsFiles;
use std::path::PathBuf;
use std::time::Duration;

impl Check<'_> {
    pub(super) fn loglevel(&mut self) -> log::LevelFilter {
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

    pub(super) fn masters(&mut self) -> Vec<String> {
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

    pub(super) fn failover_timeout(&mut self) -> Duration {
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

    /// `-rest.tls.cert` and `-rest.tls.key`, both or neither.
    pub(super) fn rest_tls(&mut self) -> Option<TlsFiles> {
        match (self.raw("rest.tls.cert"), self.raw("rest.tls.key")) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: PathBuf::from(cert),
                key: PathBuf::from(key),
            }),
            (None, None) => None,
            (Some(_), None) => {
                self.fail(
                    "rest.tls.cert",
                    "give -rest.tls.key with it (both or neither)",
                );
                None
            }
            (None, Some(_)) => {
                self.fail(
                    "rest.tls.key",
                    "give -rest.tls.cert with it (both or neither)",
                );
                None
            }
        }
    }

    pub(super) fn default_rest_address(&self) -> String {
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
}
