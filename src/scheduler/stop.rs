//! The stop signal of the scheduler's worker threads: a channel that is closed (its sender
//! dropped) when the scheduler stops.

use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// Waits up to `wait`; true when the thread should stop (a message came or the channel is
/// closed). A closed channel answers at once, so treating it as "no signal yet" would turn
/// every wait into a busy loop.
pub fn wait(stop: &Receiver<()>, wait: Duration) -> bool {
    !matches!(stop.recv_timeout(wait), Err(RecvTimeoutError::Timeout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn closed_channel_means_stop_and_open_one_waits() {
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        let t = Instant::now();
        assert!(!wait(&rx, Duration::from_millis(30)));
        assert!(t.elapsed() >= Duration::from_millis(30));
        drop(tx);
        assert!(wait(&rx, Duration::from_secs(60)));
    }
}
