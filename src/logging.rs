//! Which log lines the scheduler keeps. `-loglevel` speaks for this program only: its
//! dependencies (ureq, rustls, ...) log every connection step at debug, several lines per
//! request, which at the app definition's `-loglevel=debug` would bury our own lines and cost
//! CPU at scale. They stay at `warn` unless `RUST_LOG` asks for more (env_logger syntax, e.g.
//! `RUST_LOG=ureq=debug,rustls=debug`); its directives come last, so they win.

use log::LevelFilter;
use std::time::{SystemTime, UNIX_EPOCH};

/// The crates whose lines `-loglevel` governs: the library and the scheduler binary.
const OURS: [&str; 2] = ["storage_framework", "storage_scheduler"];

/// An env_logger filter spec for `-loglevel=level`, extended by `rust_log` (the `RUST_LOG`
/// variable) when set.
pub fn filter_spec(level: LevelFilter, rust_log: Option<&str>) -> String {
    let others = level.min(LevelFilter::Warn);
    let mut spec = others.to_string().to_lowercase();
    for krate in OURS {
        spec.push_str(&format!(",{krate}={}", level.to_string().to_lowercase()));
    }
    if let Some(extra) = rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        spec.push(',');
        spec.push_str(extra);
    }
    spec
}

/// `t` as RFC 3339 UTC with milliseconds (`2025-11-25T19:02:00.123Z`), the log lines'
/// timestamp. Written here rather than taken from env_logger's `humantime` feature, which
/// links a whole date-time library into a binary with a size budget for one format.
pub fn utc_millis(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days since 1970-01-01 to a proleptic Gregorian date, counted in 400-year eras from
    // 0000-03-01 so that the leap day ends a year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{:03}Z",
        since.subsec_millis()
    )
}

/// The lines a unit test's own thread logs, for tests that judge what is logged at which
/// level. Other threads' lines are not kept (tests run side by side in one process).
#[cfg(test)]
pub(crate) mod capture {
    use std::cell::RefCell;

    thread_local! {
        static LINES: RefCell<Option<Vec<(log::Level, String)>>> = const { RefCell::new(None) };
    }

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata) -> bool {
            LINES.with(|l| l.borrow().is_some())
        }
        fn log(&self, record: &log::Record) {
            LINES.with(|l| {
                if let Some(lines) = l.borrow_mut().as_mut() {
                    lines.push((record.level(), record.args().to_string()));
                }
            });
        }
        fn flush(&self) {}
    }

    /// Keeps this thread's lines from now on.
    pub(crate) fn start() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            log::set_logger(&Capture).expect("the one logger of the unit tests");
            log::set_max_level(log::LevelFilter::Trace);
        });
        LINES.with(|l| *l.borrow_mut() = Some(Vec::new()));
    }

    /// This thread's lines since `start` or the last `take`.
    pub(crate) fn take() -> Vec<(log::Level, String)> {
        LINES.with(|l| {
            l.borrow_mut()
                .as_mut()
                .map(std::mem::take)
                .unwrap_or_default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_stay_at_warn_unless_asked() {
        assert_eq!(
            filter_spec(LevelFilter::Debug, None),
            "warn,storage_framework=debug,storage_scheduler=debug"
        );
        assert_eq!(
            filter_spec(LevelFilter::Error, Some(" ")),
            "error,storage_framework=error,storage_scheduler=error"
        );
        assert_eq!(
            filter_spec(LevelFilter::Info, Some("ureq=debug")),
            "warn,storage_framework=info,storage_scheduler=info,ureq=debug"
        );
    }

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        use std::time::Duration;
        let at = |secs: u64, ms: u64| {
            utc_millis(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_764_097_320, 123), "2025-11-25T19:02:00.123Z");
        assert_eq!(at(4_102_444_799, 999), "2099-12-31T23:59:59.999Z");
    }
}
