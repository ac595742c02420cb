//! Retry delays: jittered exponential backoff for reconnects, and the per-node relaunch delay.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Jittered exponential backoff ("equal jitter": half fixed, half random), so that a fleet
/// of schedulers or executors does not reconnect in lockstep after a master failover.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15)
            ^ u64::from(std::process::id()).rotate_left(32);
        Backoff {
            base,
            cap,
            attempt: 0,
            rng: seed | 1,
        }
    }

    /// The delay before the next attempt; grows until the cap.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << self.attempt.min(20))
            .min(self.cap);
        self.attempt = self.attempt.saturating_add(1);
        // xorshift64: jitter only needs to be different between processes, not secure.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let half = exp / 2;
        let jitter = (half.as_nanos() as u64)
            .checked_add(1)
            .map_or(0, |span| self.rng % span);
        half + Duration::from_nanos(jitter)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

/// Delay before relaunching a node whose executor ended after `failures` unstable launches:
/// 5 s, 10 s, 20 s ... capped at 5 minutes, so a crash-looping host does not spin.
pub fn relaunch_delay(failures: u32) -> Duration {
    let steps = failures.saturating_sub(1).min(16);
    Duration::from_secs(5)
        .saturating_mul(1u32 << steps)
        .min(Duration::from_secs(300))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_jitter_and_stays_under_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut prev_max = Duration::ZERO;
        for i in 0..12 {
            let d = b.next_delay();
            let exp = Duration::from_millis(500)
                .saturating_mul(1 << i)
                .min(Duration::from_secs(30));
            assert!(
                d >= exp / 2 && d <= exp,
                "attempt {i}: {d:?} outside [{:?}, {exp:?}]",
                exp / 2
            );
            prev_max = prev_max.max(d);
        }
        assert!(prev_max <= Duration::from_secs(30));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(500));
    }

    #[test]
    fn relaunch_delay_doubles_to_five_minutes() {
        assert_eq!(relaunch_delay(1), Duration::from_secs(5));
        assert_eq!(relaunch_delay(2), Duration::from_secs(10));
        assert_eq!(relaunch_delay(4), Duration::from_secs(40));
        assert_eq!(relaunch_delay(40), Duration::from_secs(300));
        assert_eq!(relaunch_delay(0), Duration::from_secs(5));
    }
}
