//! The environment the Mesos agent hands an executor (`MESOS_*`) and the executor's own
//! settings (`STORAGE_EXECUTOR_*`), parsed once at startup.
//!
//! Everything here is pure: [`Config::from_lookup`] reads variables through a closure so the
//! tests can feed it any environment.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;
use storage_framework::contract::api::MAX_PLAN_WAIT;

pub const FRAMEWORK_ID: &str = "MESOS_FRAMEWORK_ID";
pub const EXECUTOR_ID: &str = "MESOS_EXECUTOR_ID";
pub const AGENT_ENDPOINT: &str = "MESOS_AGENT_ENDPOINT";
pub const DIRECTORY: &str = "MESOS_DIRECTORY";
pub const SANDBOX: &str = "MESOS_SANDBOX";
pub const CHECKPOINT: &str = "MESOS_CHECKPOINT";
pub const RECOVERY_TIMEOUT: &str = "MESOS_RECOVERY_TIMEOUT";
pub const SUBSCRIPTION_BACKOFF_MAX: &str = "MESOS_SUBSCRIPTION_BACKOFF_MAX";
pub const SHUTDOWN_GRACE_PERIOD: &str = "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD";
pub const LOG_LEVEL: &str = storage_framework::contract::env::LOG_LEVEL;
/// The longest wait of one plan long poll, whole seconds (default 50, at most the scheduler's 60):
/// a running node checks its host once per plan wait. Tests shorten it.
pub const PLAN_WAIT: &str = "STORAGE_EXECUTOR_PLAN_WAIT";
/// The plan wait unless [`PLAN_WAIT`] says otherwise.
pub const DEFAULT_PLAN_WAIT: Duration = Duration::from_secs(50);
/// How long a scheduler certificate pin that never worked is kept through another
/// certificate, whole seconds (default `NEW_PIN_GRACE`, at most `PIN_GRACE`, both in
/// `node::endpoint`). Tests shorten it.
pub const NEW_PIN_GRACE: &str = "STORAGE_EXECUTOR_NEW_PIN_GRACE";

/// Retry limits that only exist when the framework checkpoints: the agent sets
/// `MESOS_RECOVERY_TIMEOUT` and `MESOS_SUBSCRIPTION_BACKOFF_MAX` only then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// How long to keep trying to re-subscribe after the connection to the agent broke.
    pub timeout: Duration,
    /// Upper bound of one wait between two subscription attempts.
    pub backoff_max: Duration,
}

/// Everything the executor needs from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub framework_id: String,
    pub executor_id: String,
    /// `host:port` of the agent, as the agent wrote it.
    pub agent_endpoint: String,
    /// The sandbox on the host's file system.
    pub directory: PathBuf,
    /// The sandbox as this process sees it (differs from `directory` inside a container).
    pub sandbox: PathBuf,
    /// `Some` when the framework checkpoints, i.e. the executor must outlive agent restarts.
    pub recovery: Option<Recovery>,
    /// How long the agent waits after SHUTDOWN before it destroys the container.
    pub shutdown_grace_period: Duration,
    /// An `env_logger` filter spec.
    pub log_filter: String,
    /// The longest wait of one plan long poll: a running node's host check cycle.
    pub plan_wait: Duration,
    /// How long a pin that never worked is kept through another certificate.
    pub new_pin_grace: Duration,
}

/// One environment variable that is missing or unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    pub variable: &'static str,
    pub problem: String,
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "environment variable {}: {}",
            self.variable, self.problem
        )
    }
}

impl std::error::Error for EnvError {}

fn error(variable: &'static str, problem: impl Into<String>) -> EnvError {
    EnvError {
        variable,
        problem: problem.into(),
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, EnvError> {
        Config::from_lookup(|name| std::env::var_os(name))
    }

    /// Parses the variables `get` returns. The first problem found is reported.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Result<Config, EnvError> {
        let text = |name: &'static str| -> Result<Option<String>, EnvError> {
            match get(name) {
                None => Ok(None),
                Some(raw) => raw
                    .into_string()
                    .map(Some)
                    .map_err(|_| error(name, "is not valid UTF-8")),
            }
        };
        let required = |name: &'static str| -> Result<String, EnvError> {
            match text(name)? {
                None => Err(error(
                    name,
                    "is not set; the Mesos agent sets it when it launches an executor",
                )),
                Some(v) if v.trim().is_empty() => Err(error(name, "is empty")),
                Some(v) => Ok(v.trim().to_string()),
            }
        };
        let duration = |name: &'static str| -> Result<Duration, EnvError> {
            let raw = required(name)?;
            parse_duration(&raw).map_err(|why| error(name, format!("{raw:?}: {why}")))
        };

        let framework_id = required(FRAMEWORK_ID)?;
        let executor_id = required(EXECUTOR_ID)?;
        let agent_endpoint = required(AGENT_ENDPOINT)?;
        check_endpoint(&agent_endpoint).map_err(|why| error(AGENT_ENDPOINT, why))?;
        let directory = PathBuf::from(required(DIRECTORY)?);
        // The containerizer, not the agent, sets MESOS_SANDBOX; outside a container image
        // it is the host path anyway.
        let sandbox = match text(SANDBOX)? {
            Some(s) if !s.trim().is_empty() => PathBuf::from(s.trim()),
            _ => directory.clone(),
        };
        let checkpoint = {
            let raw = required(CHECKPOINT)?;
            parse_bool(&raw).ok_or_else(|| {
                error(
                    CHECKPOINT,
                    format!("{raw:?} is not a boolean (1, 0, true or false)"),
                )
            })?
        };
        let recovery = if checkpoint {
            Some(Recovery {
                timeout: duration(RECOVERY_TIMEOUT)?,
                backoff_max: duration(SUBSCRIPTION_BACKOFF_MAX)?,
            })
        } else {
            None
        };
        let shutdown_grace_period = duration(SHUTDOWN_GRACE_PERIOD)?;
        let log_filter = match text(LOG_LEVEL)? {
            None => "info".to_string(),
            Some(raw) => parse_log_filter(&raw).map_err(|why| error(LOG_LEVEL, why))?,
        };
        let (plan_wait, new_pin_grace) = waits(&text)?;
        Ok(Config {
            plan_wait,
            new_pin_grace,
            framework_id,
            executor_id,
            agent_endpoint,
            directory,
            sandbox,
            recovery,
            shutdown_grace_period,
            log_filter,
        })
    }
}

/// The plan wait and the new-pin grace, whole seconds each, from `text` (a variable's value,
/// if set): the poll's `wait` parameter counts seconds, up to the scheduler's longest wait;
/// the grace is at most that of a pin that worked.
fn waits(
    text: &dyn Fn(&'static str) -> Result<Option<String>, EnvError>,
) -> Result<(Duration, Duration), EnvError> {
    let secs = |name, default, max, what| match text(name)? {
        None => Ok(default),
        Some(raw) => parse_secs(&raw, max, what).map_err(|why| error(name, why)),
    };
    let plan_wait = secs(PLAN_WAIT, DEFAULT_PLAN_WAIT, MAX_PLAN_WAIT, "a plan wait")?;
    let grace = secs(
        NEW_PIN_GRACE,
        crate::node::endpoint::NEW_PIN_GRACE,
        crate::node::endpoint::PIN_GRACE,
        "a certificate grace",
    )?;
    Ok((plan_wait, grace))
}

/// Whole seconds from 1 to `max` (`what` names the setting in the error).
fn parse_secs(raw: &str, max: Duration, what: &str) -> Result<Duration, String> {
    let max = max.as_secs();
    match raw.trim().parse::<u64>() {
        Ok(secs) if (1..=max).contains(&secs) => Ok(Duration::from_secs(secs)),
        _ => Err(format!(
            "{raw:?} is not {what}: whole seconds from 1 to {max}"
        )),
    }
}

fn parse_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" => Some(true),
        "0" | "false" => Some(false),
        _ => None,
    }
}

/// The agent writes its libprocess address, `ip:port`. Only the shape is checked here; the
/// HTTP client validates the rest when it is built.
fn check_endpoint(raw: &str) -> Result<(), String> {
    let authority = raw
        .strip_prefix("http://")
        .unwrap_or(raw)
        .trim_end_matches('/');
    let Some((host, port)) = authority.rsplit_once(':') else {
        return Err(format!("{raw:?} is not host:port"));
    };
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        return Err(format!("{raw:?} has no usable host before the port"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{raw:?} has an invalid port {port:?}")),
    }
}

/// A plain level (`debug`) or an `env_logger` spec with module directives (`info,ureq=warn`).
fn parse_log_filter(raw: &str) -> Result<String, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let spec = raw.trim();
    if spec.is_empty() {
        return Ok("info".to_string());
    }
    let lower = spec.to_ascii_lowercase();
    if lower == "debug" {
        // ureq's own debug lines (every connection step) would drown this program's.
        return Ok("debug,ureq=info,ureq_proto=info".to_string());
    }
    if LEVELS.contains(&lower.as_str()) {
        return Ok(lower);
    }
    // A bare word that is no level would silently become a module filter that hides every
    // line of this program; only accept specs that are visibly module directives.
    let directives_ok = spec.split(',').all(|d| {
        let d = d.trim();
        match d.split_once('=') {
            Some((module, level)) => {
                !module.is_empty() && LEVELS.contains(&level.trim().to_ascii_lowercase().as_str())
            }
            None => LEVELS.contains(&d.to_ascii_lowercase().as_str()),
        }
    });
    if directives_ok {
        Ok(spec.to_string())
    } else {
        Err(format!(
            "{spec:?} is not a log level (off, error, warn, info, debug, trace) \
             or a filter such as \"info,ureq=warn\""
        ))
    }
}

/// Nanoseconds per unit of a Mesos (stout) duration string.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("secs", 1_000_000_000),
    ("mins", 60 * 1_000_000_000),
    ("hrs", 3_600 * 1_000_000_000),
    ("days", 86_400 * 1_000_000_000),
    ("weeks", 7 * 86_400 * 1_000_000_000),
];

/// More fractional digits than this are below a nanosecond for every unit that has them.
const MAX_FRACTION_DIGITS: usize = 18;

/// Parses a Mesos duration string: a non-negative decimal number, possibly fractional,
/// directly followed by one of `ns`, `us`, `ms`, `secs`, `mins`, `hrs`, `days`, `weeks`
/// (`2secs`, `15mins`, `1.5secs`). Fractions of a nanosecond are rounded to the nearest.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let s = raw.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    if number.is_empty() {
        return Err("expected a number followed by a unit such as 5secs".into());
    }
    let Some(&(_, per_unit)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(if unit.is_empty() {
            "has no unit (ns, us, ms, secs, mins, hrs, days or weeks)".into()
        } else {
            format!("unknown unit {unit:?} (ns, us, ms, secs, mins, hrs, days or weeks)")
        });
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(format!("{number:?} is not a number"));
    }
    let too_long = || "is too long to be a duration".to_string();
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse::<u64>().map_err(|_| too_long())?.into()
    };
    let fraction = fraction.get(..MAX_FRACTION_DIGITS).unwrap_or(fraction);
    let fraction_nanos = if fraction.is_empty() {
        0
    } else {
        let digits: u128 = fraction.parse().map_err(|_| too_long())?;
        let scale = 10u128.pow(fraction.len() as u32);
        (digits * per_unit + scale / 2) / scale
    };
    let nanos = whole
        .checked_mul(per_unit)
        .and_then(|n| n.checked_add(fraction_nanos))
        .ok_or_else(too_long)?;
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| too_long())?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn base() -> HashMap<&'static str, &'static str> {
        HashMap::from([
            (FRAMEWORK_ID, "fw-0001"),
            (EXECUTOR_ID, "storage-executor-a1"),
            (AGENT_ENDPOINT, "10.0.0.5:5051"),
            (DIRECTORY, "/var/lib/mesos/slaves/s1/runs/r1"),
            (SANDBOX, "/mnt/mesos/sandbox"),
            (CHECKPOINT, "1"),
            (RECOVERY_TIMEOUT, "15mins"),
            (SUBSCRIPTION_BACKOFF_MAX, "2secs"),
            (SHUTDOWN_GRACE_PERIOD, "5secs"),
        ])
    }

    fn parse(vars: &HashMap<&'static str, &'static str>) -> Result<Config, EnvError> {
        Config::from_lookup(|name| vars.get(name).map(OsString::from))
    }

    #[test]
    fn full_checkpointing_environment() {
        let c = parse(&base()).unwrap();
        assert_eq!(c.framework_id, "fw-0001");
        assert_eq!(c.executor_id, "storage-executor-a1");
        assert_eq!(c.agent_endpoint, "10.0.0.5:5051");
        assert_eq!(
            c.directory,
            PathBuf::from("/var/lib/mesos/slaves/s1/runs/r1")
        );
        assert_eq!(c.sandbox, PathBuf::from("/mnt/mesos/sandbox"));
        assert_eq!(
            c.recovery,
            Some(Recovery {
                timeout: Duration::from_secs(900),
                backoff_max: Duration::from_secs(2),
            })
        );
        assert_eq!(c.shutdown_grace_period, Duration::from_secs(5));
        assert_eq!(c.log_filter, "info");
        assert_eq!(c.plan_wait, DEFAULT_PLAN_WAIT);
        assert_eq!(c.new_pin_grace, crate::node::endpoint::NEW_PIN_GRACE);
    }

    #[test]
    fn the_new_pin_grace_is_whole_seconds_up_to_that_of_a_pin_that_worked() {
        let mut vars = base();
        vars.insert(NEW_PIN_GRACE, "5");
        assert_eq!(parse(&vars).unwrap().new_pin_grace, Duration::from_secs(5));
        for bad in ["0", "901", "1.5", "soon"] {
            vars.insert(NEW_PIN_GRACE, bad);
            let e = parse(&vars).unwrap_err();
            assert_eq!(e.variable, NEW_PIN_GRACE, "{bad}");
            assert!(e.problem.contains(bad), "{e}");
        }
    }

    #[test]
    fn the_plan_wait_is_whole_seconds_up_to_the_scheduler_s_longest() {
        let mut vars = base();
        vars.insert(PLAN_WAIT, "2");
        assert_eq!(parse(&vars).unwrap().plan_wait, Duration::from_secs(2));
        for bad in ["0", "61", "1.5", "2secs", "soon"] {
            vars.insert(PLAN_WAIT, bad);
            let e = parse(&vars).unwrap_err();
            assert_eq!(e.variable, PLAN_WAIT, "{bad}");
            assert!(e.problem.contains(bad), "{e}");
        }
    }

    #[test]
    fn without_checkpointing_the_recovery_variables_are_not_needed() {
        let mut vars = base();
        vars.insert(CHECKPOINT, "0");
        vars.remove(RECOVERY_TIMEOUT);
        vars.remove(SUBSCRIPTION_BACKOFF_MAX);
        let c = parse(&vars).unwrap();
        assert_eq!(c.recovery, None);
        vars.insert(CHECKPOINT, "false");
        assert_eq!(parse(&vars).unwrap().recovery, None);
        vars.insert(CHECKPOINT, "true");
        assert_eq!(parse(&vars).unwrap_err().variable, RECOVERY_TIMEOUT);
    }

    #[test]
    fn sandbox_defaults_to_the_directory() {
        let mut vars = base();
        vars.remove(SANDBOX);
        let c = parse(&vars).unwrap();
        assert_eq!(c.sandbox, c.directory);
    }

    #[test]
    fn every_required_variable_is_named_when_missing() {
        for name in [
            FRAMEWORK_ID,
            EXECUTOR_ID,
            AGENT_ENDPOINT,
            DIRECTORY,
            CHECKPOINT,
            RECOVERY_TIMEOUT,
            SUBSCRIPTION_BACKOFF_MAX,
            SHUTDOWN_GRACE_PERIOD,
        ] {
            let mut vars = base();
            vars.remove(name);
            let err = parse(&vars).unwrap_err();
            assert_eq!(err.variable, name);
            let shown = err.to_string();
            assert!(shown.contains(name) && shown.contains("not set"), "{shown}");

            vars.insert(name, "  ");
            assert_eq!(parse(&vars).unwrap_err().variable, name);
        }
    }

    #[test]
    fn invalid_values_are_named() {
        let cases = [
            (CHECKPOINT, "yes"),
            (AGENT_ENDPOINT, "10.0.0.5"),
            (AGENT_ENDPOINT, "10.0.0.5:port"),
            (AGENT_ENDPOINT, ":5051"),
            (AGENT_ENDPOINT, "10.0.0.5:0"),
            (RECOVERY_TIMEOUT, "15"),
            (SUBSCRIPTION_BACKOFF_MAX, "2 secs"),
            (SHUTDOWN_GRACE_PERIOD, "five secs"),
            (LOG_LEVEL, "verbose"),
            (LOG_LEVEL, "info,ureq=loud"),
        ];
        for (name, value) in cases {
            let mut vars = base();
            vars.insert(name, value);
            let err = parse(&vars).unwrap_err();
            assert_eq!(err.variable, name, "{value}");
            assert!(err.to_string().contains(value), "{err}");
        }
    }

    #[test]
    fn non_utf8_values_are_named() {
        use std::os::unix::ffi::OsStringExt;
        let vars = base();
        let err = Config::from_lookup(|name| {
            if name == EXECUTOR_ID {
                Some(OsString::from_vec(vec![0xff, 0xfe]))
            } else {
                vars.get(name).map(OsString::from)
            }
        })
        .unwrap_err();
        assert_eq!(err.variable, EXECUTOR_ID);
        assert!(err.problem.contains("UTF-8"));
    }

    #[test]
    fn log_filters() {
        let mut vars = base();
        for (given, kept) in [
            ("debug", "debug,ureq=info,ureq_proto=info"),
            ("trace", "trace"),
            ("WARN", "warn"),
            ("", "info"),
            ("info,ureq=warn", "info,ureq=warn"),
            ("storage_executor=trace", "storage_executor=trace"),
        ] {
            vars.insert(LOG_LEVEL, given);
            assert_eq!(parse(&vars).unwrap().log_filter, kept, "{given}");
        }
    }

    #[test]
    fn every_duration_unit() {
        let cases = [
            ("7ns", Duration::from_nanos(7)),
            ("250us", Duration::from_micros(250)),
            ("500ms", Duration::from_millis(500)),
            ("2secs", Duration::from_secs(2)),
            ("15mins", Duration::from_secs(15 * 60)),
            ("3hrs", Duration::from_secs(3 * 3600)),
            ("2days", Duration::from_secs(2 * 86_400)),
            ("1weeks", Duration::from_secs(7 * 86_400)),
            ("0ns", Duration::ZERO),
            (" 5secs\n", Duration::from_secs(5)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn fractional_durations() {
        let cases = [
            ("1.5secs", Duration::from_millis(1500)),
            ("0.25mins", Duration::from_secs(15)),
            (".5ms", Duration::from_micros(500)),
            ("2.ms", Duration::from_millis(2)),
            ("1.333333hrs", Duration::from_nanos(4_799_998_800_000)),
            ("1.0000000001secs", Duration::from_nanos(1_000_000_000)),
            ("1.0000000006secs", Duration::from_nanos(1_000_000_001)),
            ("0.5ns", Duration::from_nanos(1)),
            (
                "1.1234567890123456789999weeks",
                Duration::from_nanos(679_466_665_994_667),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn bad_duration_strings() {
        for bad in [
            "",
            "secs",
            "15",
            "15 secs",
            "15sec",
            "15s",
            "15SECS",
            "-1secs",
            "+1secs",
            "1.2.3secs",
            ".secs",
            "1e3secs",
            "abc",
            "99999999999999999999weeks",
            "18446744073709551615weeks",
            "5secs5",
        ] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(!err.is_empty(), "{bad}");
        }
    }
}
