//! The executor's conversation with its agent over the v1 executor API.
//!
//! Two threads: a reader owns the SUBSCRIBE response and forwards each event over a std
//! channel; the main thread owns all state (the [`Book`], timers) and sends every call.
//! A new channel is made per subscription, so nothing from a dead stream can reach the
//! main loop after it moved on.
//!
//! Disconnections follow the executor API documentation: without framework checkpointing the
//! executor exits when the stream breaks; with it, it re-subscribes (carrying unacknowledged
//! tasks and updates) with a backoff capped by `MESOS_SUBSCRIPTION_BACKOFF_MAX`, for at most
//! `MESOS_RECOVERY_TIMEOUT` counted from the moment the last good subscription broke.
//!
//! This file holds the executor's state and the helpers its parts share; subscribing, the
//! main loop, the tasks and the status updates each have their own file.

mod events;
mod status;
mod subscription;
mod tasks;

use crate::env::{Config, EnvError, AGENT_ENDPOINT};
use crate::node::Outcome;
use crate::payload;
use crate::updates::Book;
use status::RESEND_START;
use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use storage_framework::mesos::client::{ClientConfig, ExecutorClient};
use storage_framework::mesos::executor::Event;

/// The agent is on the same host; anything slower than this is an agent in trouble.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Durations from the environment can be absurdly long ("1000weeks"); past this they
/// all mean "never", and `Instant` arithmetic stays far from overflowing.
const NEVER: Duration = Duration::from_secs(10 * 365 * 86_400);

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;

/// The HTTP client for the agent named by `MESOS_AGENT_ENDPOINT`.
pub fn client(config: &Config) -> Result<ExecutorClient, EnvError> {
    let client_config = ClientConfig {
        connect_timeout: CONNECT_TIMEOUT,
        request_timeout: REQUEST_TIMEOUT,
        // The agent may stay silent for hours between events (older agents send no
        // HEARTBEAT); a broken agent shows up as a closed connection instead.
        stream_idle_timeout: None,
        ..ClientConfig::default()
    };
    ExecutorClient::new(&config.agent_endpoint, client_config).map_err(|e| EnvError {
        variable: AGENT_ENDPOINT,
        problem: e.to_string(),
    })
}

/// Runs the executor until it should exit; returns the exit code.
pub fn run(config: Config, client: ExecutorClient) -> i32 {
    Executor::new(config, client).run()
}

/// What the main loop receives: events of subscription number `.0` from its reader thread
/// (a stale subscription's leftovers are dropped by number), and the node worker's end.
enum Incoming {
    Event(u64, Box<Event>),
    /// The stream is over; the text says why.
    Ended(u64, String),
    /// The node worker finished for this task.
    Node(String, Outcome),
}

enum Flow {
    Continue,
    Exit(i32),
}

enum StreamOutcome {
    Exit(i32),
    Broken(String),
}

struct Executor {
    config: Config,
    client: ExecutorClient,
    book: Book,
    /// This host's name, for the TASK_RUNNING message.
    hostname: Option<String>,
    /// The agent's name for its host, from SUBSCRIBED.
    agent_hostname: Option<String>,
    /// `STORAGE_*` variables of this process, the defaults of every task's settings.
    inherited: BTreeMap<String, String>,
    /// Subscription attempts since the last SUBSCRIBED event (0: the current or last
    /// stream got one).
    failures: u32,
    /// Set by SHUTDOWN: the moment to exit even if updates are still unacknowledged.
    shutdown_deadline: Option<Instant>,
    /// A task was launched: once none is live and every update is acknowledged, this
    /// executor has nothing left to do (KILL ends a task, not its executor).
    launched_any: bool,
    /// When to resend updates whose POST failed, and the wait after that.
    resend_at: Option<Instant>,
    resend_delay: Duration,
    /// Number of the current subscription; events of older ones are dropped.
    generation: u64,
    /// Handed to reader threads and the node worker; the main loop owns the receiver.
    tx: Option<Sender<Incoming>>,
    /// A node worker was started (at most one per executor: one node per agent).
    node_started: bool,
    /// The scheduler's address and certificate as it last announced them (framework
    /// MESSAGE): they win over the launch's, since a scheduler may come back elsewhere and
    /// comes back with a new certificate.
    announced: Option<crate::node::endpoint::Endpoint>,
    /// Where the scheduler's MESSAGEs go to the node worker's API client.
    moves: Option<Sender<crate::node::endpoint::Signal>>,
}

impl Executor {
    fn new(config: Config, client: ExecutorClient) -> Executor {
        Executor {
            config,
            client,
            book: Book::new(),
            hostname: local_hostname(),
            agent_hostname: None,
            inherited: payload::inherited_settings(),
            failures: 0,
            shutdown_deadline: None,
            launched_any: false,
            resend_at: None,
            resend_delay: RESEND_START,
            generation: 0,
            tx: None,
            node_started: false,
            announced: None,
            moves: None,
        }
    }
}

fn after(start: Instant, wait: Duration) -> Instant {
    start + wait.min(NEVER)
}

fn local_hostname() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = raw.trim();
    (!name.is_empty()).then(|| name.to_string())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Durations in logs, in the agent's own notation where it is exact enough.
fn show(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}secs", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_durations_mean_never_and_do_not_overflow() {
        let now = Instant::now();
        assert!(after(now, Duration::MAX) >= now + Duration::from_secs(365 * 86_400));
        assert_eq!(
            after(now, Duration::from_secs(3)),
            now + Duration::from_secs(3)
        );
    }

    #[test]
    fn durations_for_logs() {
        assert_eq!(show(Duration::from_millis(250)), "250ms");
        assert_eq!(show(Duration::from_millis(3750)), "3.8secs");
        assert_eq!(show(Duration::from_secs(900)), "900.0secs");
    }
}
