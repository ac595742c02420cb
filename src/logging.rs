//! Which log lines the scheduler keeps. `-loglevel` speaks for this program only: its
//! dependencies (ureq, rustls, ...) log every connection step at debug, several lines per
//! request, which at the app definition's `-loglevel=debug` would bury our own lines and cost
//! CPU at scale. They stay at `warn` unless `RUST_LOG` asks for more (env_logger syntax, e.g.
//! `RUST_LOG=ureq=debug,rustls=debug`); its directives come last, so they win.

use log::LevelFilter;

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
}
