//! Log lines on stderr (the agent keeps them in the sandbox's `stderr` file). Every line
//! names the executor, because operators read them merged from many agents. A URI's password
//! (a package URL's) is masked in every line.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn init(filter: &str, executor_id: &str) {
    let id = executor_id.to_string();
    let result = env_logger::Builder::new()
        .parse_filters(filter)
        .format(move |buf, record| {
            writeln!(
                buf,
                "{} {:<5} executor {}: {}",
                utc_now(),
                record.level(),
                id,
                storage_framework::secret::mask_uri_credentials(&record.args().to_string())
            )
        })
        .target(env_logger::Target::Stderr)
        .try_init();
    if let Err(e) = result {
        eprintln!("storage-executor: logging unavailable: {e}");
    }
}

fn utc_now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    utc(since.as_secs(), since.subsec_millis())
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for seconds since the epoch (proleptic Gregorian, UTC).
fn utc(secs: u64, millis: u32) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a calendar date, by 400-year eras (March-based years, so the
/// leap day comes last).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamps() {
        assert_eq!(utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(utc(1_709_251_199, 999), "2024-02-29T23:59:59.999Z");
        assert_eq!(utc(1_735_689_600, 0), "2025-01-01T00:00:00.000Z");
        assert_eq!(utc(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
    }
}
