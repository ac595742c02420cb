//! Subscribing to the agent: SUBSCRIBE with backoff, re-subscribing after a broken stream
//! within the recovery window, and the reader thread that forwards one subscription's events.

use super::status::RESEND_START;
use super::{after, show, Executor, Incoming, StreamOutcome, EXIT_FAILURE, EXIT_OK};
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::{Duration, Instant};
use storage_framework::mesos::client::{ClientError, ExecutorEventStream, StreamError};
use storage_framework::mesos::executor::call;

/// Without checkpointing the agent sets no retry limits, yet the first SUBSCRIBE may still
/// race the agent's bookkeeping of the launch. Retry for about as long as the agent's
/// default `--executor_registration_timeout` (1 minute) would wait for us anyway.
const FIRST_SUBSCRIBE_WINDOW: Duration = Duration::from_secs(60);
const FIRST_SUBSCRIBE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Backoff between subscription attempts starts here and doubles up to the cap. The floor
/// keeps a zero cap from turning the retry loop into a busy loop.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_FLOOR: Duration = Duration::from_millis(10);

impl Executor {
    pub(super) fn run(mut self) -> i32 {
        log::info!(
            "starting: framework {}, agent {}, sandbox {}, checkpointing {}",
            self.config.framework_id,
            self.config.agent_endpoint,
            self.config.sandbox.display(),
            match self.config.recovery {
                Some(r) => format!(
                    "on (recovery timeout {}, backoff max {})",
                    show(r.timeout),
                    show(r.backoff_max)
                ),
                None => "off".to_string(),
            }
        );
        // Counted from the last time the agent was known to be there.
        let mut disconnected_since = Instant::now();
        let (tx, rx) = mpsc::channel();
        self.tx = Some(tx.clone());
        loop {
            let stream = match self.connect(disconnected_since) {
                Ok(stream) => stream,
                Err(code) => return code,
            };
            self.generation += 1;
            let (tx, generation) = (tx.clone(), self.generation);
            let spawned = thread::Builder::new()
                .name("event-reader".into())
                .spawn(move || read_events(stream, tx, generation));
            if let Err(e) = spawned {
                log::error!("cannot start the event reader thread: {e}");
                return EXIT_FAILURE;
            }
            let why = match self.serve(&rx) {
                StreamOutcome::Exit(code) => return code,
                StreamOutcome::Broken(why) => why,
            };
            if self.shutdown_deadline.is_some() {
                log::info!("connection to the agent ended while shutting down ({why}); exiting");
                return EXIT_OK;
            }
            let Some(recovery) = self.config.recovery else {
                log::error!(
                    "connection to the agent lost ({why}); the framework does not checkpoint, \
                     so this executor cannot outlive the agent: exiting"
                );
                return EXIT_FAILURE;
            };
            if self.failures == 0 {
                disconnected_since = Instant::now();
            }
            log::warn!(
                "connection to the agent lost ({why}); re-subscribing for up to {}",
                show(
                    after(disconnected_since, recovery.timeout)
                        .saturating_duration_since(Instant::now())
                )
            );
        }
    }

    /// SUBSCRIBE, retried with backoff until the recovery window from `since` is over.
    /// Attempts whose stream broke before SUBSCRIBED count as failures too, so an agent
    /// that accepts and drops connections is not hammered.
    fn connect(&mut self, since: Instant) -> Result<ExecutorEventStream, i32> {
        let (window, backoff_max) = match self.config.recovery {
            Some(r) => (r.timeout, r.backoff_max),
            None => (FIRST_SUBSCRIBE_WINDOW, FIRST_SUBSCRIBE_BACKOFF_MAX),
        };
        let deadline = after(since, window);
        let mut attempt = self.failures;
        let mut last_error: Option<ClientError> = None;
        loop {
            if attempt > 0 {
                let why = last_error.as_ref().map_or_else(
                    || "the last subscription ended before SUBSCRIBED".to_string(),
                    |e| format!("SUBSCRIBE failed: {e}"),
                );
                let now = Instant::now();
                if now >= deadline {
                    log::error!(
                        "{why}; no subscription to the agent for {}, giving up",
                        show(window)
                    );
                    return Err(EXIT_FAILURE);
                }
                let delay = backoff(attempt - 1, backoff_max).min(deadline - now);
                log::warn!("{why}; retrying in {}", show(delay));
                thread::sleep(delay);
            }
            attempt = attempt.saturating_add(1);
            let subscribe = self.book.subscribe();
            let (tasks, updates) = (
                subscribe.unacknowledged_tasks.len(),
                subscribe.unacknowledged_updates.len(),
            );
            let request = self.new_call(call::Type::Subscribe, |c| c.subscribe = Some(subscribe));
            match self.client.subscribe(&request) {
                Ok(stream) => {
                    log::info!(
                        "SUBSCRIBE accepted by {} ({tasks} unacknowledged tasks, \
                         {updates} unacknowledged updates)",
                        self.client.url()
                    );
                    // The SUBSCRIBE carried every pending update.
                    self.book.mark_all_delivered();
                    self.resend_at = None;
                    self.resend_delay = RESEND_START;
                    // Counts as failed until SUBSCRIBED arrives on the stream.
                    self.failures = attempt;
                    return Ok(stream);
                }
                Err(e @ ClientError::Rejected { .. }) => {
                    // A 4xx means the agent will never take this executor (unknown
                    // framework or executor, e.g. after an agent restart without recovery).
                    log::error!("SUBSCRIBE refused: {e}; exiting");
                    return Err(EXIT_FAILURE);
                }
                Err(e) => last_error = Some(e),
            }
        }
    }
}

/// Reader thread: forwards events until the stream ends or nobody listens.
fn read_events(mut stream: ExecutorEventStream, tx: Sender<Incoming>, generation: u64) {
    loop {
        let incoming = match stream.next_event() {
            Ok(Some(event)) => Incoming::Event(generation, Box::new(event)),
            Ok(None) => Incoming::Ended(
                generation,
                format!("{}: the agent closed the event stream", stream.endpoint()),
            ),
            Err(e @ StreamError::Decode { .. }) => {
                // The framing is intact, so the stream itself is still good.
                log::warn!("{e}; skipped");
                continue;
            }
            Err(e) => Incoming::Ended(generation, e.to_string()),
        };
        let last = matches!(incoming, Incoming::Ended(..));
        if tx.send(incoming).is_err() || last {
            return;
        }
    }
}

/// Wait before subscription attempt `attempt + 1`: doubling from [`BACKOFF_START`], never
/// above `max` (the agent expects a retry within every `MESOS_SUBSCRIPTION_BACKOFF_MAX`).
fn backoff(attempt: u32, max: Duration) -> Duration {
    let grown = BACKOFF_START.saturating_mul(1u32 << attempt.min(20));
    grown.min(max).max(BACKOFF_FLOOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let max = Duration::from_secs(2);
        let delays: Vec<u128> = (0..7).map(|a| backoff(a, max).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(backoff(u32::MAX, max), max);
    }

    #[test]
    fn backoff_respects_small_caps_but_never_spins() {
        assert_eq!(
            backoff(0, Duration::from_millis(50)),
            Duration::from_millis(50)
        );
        assert_eq!(backoff(5, Duration::ZERO), BACKOFF_FLOOR);
    }
}
