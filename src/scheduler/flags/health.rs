//! Validation of the health watch's flags: the gateway poll's interval, the pools' warning
//! threshold and the age at which data counts as stale.

use super::check::Check;
use super::values::parse_duration;
use super::HealthWatch;
use std::time::Duration;

const INTERVAL_DEFAULT: Duration = Duration::from_secs(30);
const WARN_DEFAULT: f64 = 80.0;
const STALE_DEFAULT: Duration = Duration::from_secs(180);

impl Check<'_> {
    pub(super) fn health(&mut self) -> HealthWatch {
        let interval = self.health_interval();
        let capacity_warn_pct = self.capacity_warn();
        HealthWatch {
            interval,
            capacity_warn_pct,
            stale: self.stale(interval),
        }
    }

    /// At least 1: with 0 no disruptive step could ever run.
    pub(super) fn max_disrupted(&mut self) -> usize {
        const NAME: &str = "rollout.max-disrupted-per-domain";
        let Some(v) = self.raw(NAME) else {
            return 1;
        };
        match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                self.fail(NAME, format!("{v:?} is not a whole number of at least 1"));
                1
            }
        }
    }

    /// At least 1: a node gets at least its first launch.
    pub(super) fn max_failures(&mut self) -> u32 {
        const NAME: &str = "node.max-failures";
        let Some(v) = self.raw(NAME) else {
            return 5;
        };
        match v.parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                self.fail(NAME, format!("{v:?} is not a whole number of at least 1"));
                5
            }
        }
    }

    fn health_interval(&mut self) -> Duration {
        const NAME: &str = "health.interval";
        let Some(v) = self.raw(NAME) else {
            return INTERVAL_DEFAULT;
        };
        match parse_duration(&v) {
            Some(d) if d >= Duration::from_secs(1) => d,
            _ => {
                self.fail(
                    NAME,
                    format!("{v:?} is not a duration of at least 1 second (e.g. 30 or 5m)"),
                );
                INTERVAL_DEFAULT
            }
        }
    }

    fn capacity_warn(&mut self) -> f64 {
        const NAME: &str = "health.capacity.warn";
        match self.number(NAME, WARN_DEFAULT) {
            Some(n) if n > 0.0 && n <= 100.0 => n,
            Some(n) => {
                self.fail(NAME, format!("{n} is not a percentage in (0, 100]"));
                WARN_DEFAULT
            }
            None => WARN_DEFAULT,
        }
    }

    /// Given, it must outlast one poll, or every node would turn `unknown` between two polls.
    /// Not given: 180 s, or three polls when they are further apart (an app definition that
    /// polls every 5 minutes keeps starting).
    fn stale(&mut self, interval: Duration) -> Duration {
        const NAME: &str = "health.stale";
        let Some(v) = self.raw(NAME) else {
            return STALE_DEFAULT.max(interval * 3);
        };
        match parse_duration(&v) {
            Some(d) if d > interval => d,
            Some(_) => {
                let poll = self.label("health.interval");
                self.fail(
                    NAME,
                    format!(
                        "{v:?} is not longer than {poll} ({} s): every poll's data would be \
                         stale before the next one",
                        interval.as_secs_f64()
                    ),
                );
                STALE_DEFAULT.max(interval * 3)
            }
            None => {
                self.fail(NAME, format!("{v:?} is not a duration (e.g. 180 or 3m)"));
                STALE_DEFAULT.max(interval * 3)
            }
        }
    }
}
