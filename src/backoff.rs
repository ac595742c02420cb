//! Retry delays: jittered exponential backoff for reconnects, and the per-node relaunch delay.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Jittered exponential backoff ("equal jitter": half fixed, half random), so that a fleet
/// of schedulers or executors does not reconnect in lockstep after a master failover.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
    jitter: Jitter,
}

/// Random numbers for jitter: they only need to differ between processes and calls, not to be
/// unpredictable (xorshift64, seeded from the time and the process id).
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    pub fn new() -> Jitter {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15)
            ^ u64::from(std::process::id()).rotate_left(32);
        Jitter(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

impl Default for Jitter {
    fn default() -> Jitter {
        Jitter::new()
    }
}

/// "Equal jitter": half of `d` fixed, the other half picked by `random`.
fn equal_jitter(d: Duration, random: u64) -> Duration {
    let half = d / 2;
    let span = (half.as_nanos() as u64).saturating_add(1);
    half + Duration::from_nanos(random % span)
}

/// Doublings of the base counted at most (2^20 times any base here is past its cap).
const MAX_DOUBLINGS: u32 = 20;

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap,
            attempt: 0,
            jitter: Jitter::new(),
        }
    }

    /// The delay before the next attempt; grows until the cap.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << self.attempt.min(MAX_DOUBLINGS))
            .min(self.cap);
        self.attempt = self.attempt.saturating_add(1);
        equal_jitter(exp, self.jitter.next_u64())
    }

    /// The cap's delay (jittered), as if every step up to it had been taken: for an attempt
    /// that cannot succeed until something else wakes the waiter.
    pub fn capped_delay(&mut self) -> Duration {
        self.attempt = self.attempt.max(MAX_DOUBLINGS);
        self.next_delay()
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

/// [`relaunch_delay`] with equal jitter (`random` picks where in its upper half), so that
/// nodes that failed together (a bad package, a master failover) are not relaunched in
/// lockstep.
pub fn jittered_relaunch_delay(failures: u32, random: u64) -> Duration {
    equal_jitter(relaunch_delay(failures), random)
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

    #[test]
    fn jittered_relaunch_delays_spread_over_the_upper_half() {
        for failures in [1, 3, 40] {
            let full = relaunch_delay(failures);
            assert_eq!(jittered_relaunch_delay(failures, 0), full / 2);
            assert_eq!(
                jittered_relaunch_delay(failures, u64::MAX),
                full / 2 + Duration::from_nanos(u64::MAX % (full.as_nanos() as u64 / 2 + 1))
            );
            let mut jitter = Jitter::new();
            let delays: Vec<Duration> = (0..50)
                .map(|_| jittered_relaunch_delay(failures, jitter.next_u64()))
                .collect();
            assert!(
                delays.iter().all(|d| *d >= full / 2 && *d <= full),
                "{delays:?}"
            );
            let first = delays[0];
            assert!(delays.iter().any(|d| *d != first), "no spread: {delays:?}");
        }
    }
}
