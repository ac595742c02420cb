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

use crate::env::{Config, EnvError, AGENT_ENDPOINT};
use crate::host::facts::Facts;
use crate::node::{self, api, api::SchedulerApi, Outcome};
use crate::payload::{self, TaskPayload};
use crate::updates::{Ack, Book};
use crate::uuid;
use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use storage_framework::mesos::client::{
    ClientConfig, ClientError, ExecutorClient, ExecutorEventStream, StreamError,
};
use storage_framework::mesos::executor::{call, event, Call, Event};
use storage_framework::mesos::types::{
    task_status, ExecutorID, FrameworkID, TaskID, TaskInfo, TaskState, TaskStatus,
};
use storage_framework::mesos::Bytes;

/// The agent is on the same host; anything slower than this is an agent in trouble.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Without checkpointing the agent sets no retry limits, yet the first SUBSCRIBE may still
/// race the agent's bookkeeping of the launch. Retry for about as long as the agent's
/// default `--executor_registration_timeout` (1 minute) would wait for us anyway.
const FIRST_SUBSCRIBE_WINDOW: Duration = Duration::from_secs(60);
const FIRST_SUBSCRIBE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Backoff between subscription attempts starts here and doubles up to the cap. The floor
/// keeps a zero cap from turning the retry loop into a busy loop.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_FLOOR: Duration = Duration::from_millis(10);

/// Retries of an UPDATE whose POST failed while the stream stayed up.
const RESEND_START: Duration = Duration::from_millis(500);
const RESEND_MAX: Duration = Duration::from_secs(10);

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

/// The setting naming the scheduler's REST server.
const SCHEDULER_URL: &str = storage_framework::contract::env::SCHEDULER_URL;

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
    /// The scheduler's address as it last announced it (framework MESSAGE): it wins over
    /// the one the task was launched with, since a scheduler may come back elsewhere.
    scheduler_url: Option<String>,
    /// Where announced addresses go to the node worker's API client.
    moves: Option<Sender<String>>,
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
            scheduler_url: None,
            moves: None,
        }
    }

    fn run(mut self) -> i32 {
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

    /// Handles the events of one subscription until it breaks or the executor is done.
    fn serve(&mut self, rx: &Receiver<Incoming>) -> StreamOutcome {
        loop {
            let timer = [self.shutdown_deadline, self.resend_at]
                .into_iter()
                .flatten()
                .min();
            let received = match timer {
                Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let flow = match received {
                Ok(Incoming::Event(g, event)) if g == self.generation => self.handle(*event),
                Ok(Incoming::Ended(g, why)) if g == self.generation => {
                    return StreamOutcome::Broken(why)
                }
                Ok(Incoming::Event(..) | Incoming::Ended(..)) => Flow::Continue,
                Ok(Incoming::Node(task_id, outcome)) => self.on_node_outcome(&task_id, outcome),
                Err(RecvTimeoutError::Disconnected) => {
                    return StreamOutcome::Broken("the event reader stopped".into())
                }
                Err(RecvTimeoutError::Timeout) => self.on_timer(),
            };
            if let Flow::Exit(code) = flow {
                return StreamOutcome::Exit(code);
            }
            if self.shutdown_deadline.is_some() && self.book.unacknowledged() == 0 {
                log::info!("every update acknowledged; shut down");
                return StreamOutcome::Exit(EXIT_OK);
            }
            if self.launched_any
                && self.book.unacknowledged() == 0
                && self.book.live_task_ids().is_empty()
            {
                log::info!("no live task left and every update acknowledged; exiting");
                return StreamOutcome::Exit(EXIT_OK);
            }
        }
    }

    fn on_timer(&mut self) -> Flow {
        let now = Instant::now();
        if self.shutdown_deadline.is_some_and(|d| now >= d) {
            log::warn!(
                "{} updates still unacknowledged at the end of the shutdown grace period; \
                 exiting",
                self.book.unacknowledged()
            );
            return Flow::Exit(EXIT_OK);
        }
        if self.resend_at.is_some_and(|at| now >= at) {
            self.resend_at = None;
            self.flush();
        }
        Flow::Continue
    }

    fn handle(&mut self, event: Event) -> Flow {
        let Some(kind) = event.r#type else {
            log::debug!("event without a type; ignored");
            return Flow::Continue;
        };
        use event::Type;
        match kind {
            Type::Subscribed => match event.subscribed {
                Some(s) => self.on_subscribed(s),
                None => log::warn!("SUBSCRIBED event without its body; ignored"),
            },
            Type::Launch => match event.launch {
                Some(l) => self.on_launch(l.task),
                None => log::warn!("LAUNCH event without its body; ignored"),
            },
            Type::LaunchGroup => match event.launch_group {
                Some(g) => self.on_launch_group(g.task_group.tasks),
                None => log::warn!("LAUNCH_GROUP event without its body; ignored"),
            },
            Type::Kill => match event.kill {
                Some(k) => self.on_kill(&k.task_id.value),
                None => log::warn!("KILL event without its body; ignored"),
            },
            Type::Acknowledged => match event.acknowledged {
                Some(a) => self.on_acknowledged(&a.task_id.value, &a.uuid.0),
                None => log::warn!("ACKNOWLEDGED event without its body; ignored"),
            },
            Type::Message => match event.message {
                Some(m) => self.on_message(&m.data.0),
                None => log::warn!("MESSAGE event without its body; ignored"),
            },
            Type::Error => {
                let message = event.error.map(|e| e.message.to_string());
                log::error!(
                    "ERROR from the agent: {}; exiting",
                    message.as_deref().unwrap_or("(no message)")
                );
                return Flow::Exit(EXIT_FAILURE);
            }
            Type::Shutdown => self.on_shutdown(),
            Type::Heartbeat => log::debug!("HEARTBEAT"),
            Type::Unknown | Type::Other(_) => {
                log::debug!("event of unknown type {kind}; ignored");
            }
        }
        Flow::Continue
    }

    fn on_subscribed(&mut self, s: event::Subscribed) {
        self.failures = 0;
        let container = s
            .container_id
            .as_ref()
            .map_or("-".to_string(), |c| c.value.to_string());
        log::info!(
            "SUBSCRIBED: agent {} ({}), framework {:?}, container {container}",
            s.agent_info.hostname,
            s.agent_info
                .id
                .as_ref()
                .map_or("no id", |id| id.value.as_str()),
            s.framework_info.name.as_str()
        );
        self.agent_hostname = Some(s.agent_info.hostname.to_string());
    }

    /// The scheduler announces its REST address after every (re-)subscription, so that
    /// executors follow it to another host or port. The data is logged by size only.
    fn on_message(&mut self, data: &[u8]) {
        let url = match api::announced_url(data) {
            Ok(url) => url,
            Err(e) => {
                log::warn!(
                    "MESSAGE from the scheduler ({} bytes) ignored: {e}",
                    data.len()
                );
                return;
            }
        };
        if self.scheduler_url.as_deref() == Some(url.as_str()) {
            log::debug!("MESSAGE: the scheduler is still at {url}");
            return;
        }
        log::info!("MESSAGE: the scheduler is at {url}");
        if let Some(moves) = &self.moves {
            // A finished worker has dropped its receiver; nothing is left to tell it.
            let _ = moves.send(url.clone());
        }
        self.scheduler_url = Some(url);
    }

    fn on_launch(&mut self, task: TaskInfo) {
        self.launched_any = true;
        let id = task.task_id.value.to_string();
        let name = task.name.to_string();
        let payload = TaskPayload::from_task(&task, &self.inherited);
        if let Err(e) = self.book.launch(task, payload) {
            log::warn!("LAUNCH ignored: {e}");
            return;
        }
        // The payload stays in the book for the host phases; only its shape is logged.
        let shape = self
            .book
            .task(&id)
            .map_or_else(String::new, |t| t.payload.describe());
        log::info!("LAUNCH task {id} ({name:?}): {shape}");
        if self.shutdown_deadline.is_some() {
            self.send_status(
                &id,
                TaskState::Killed,
                "the executor is shutting down",
                None,
            );
            return;
        }
        let host = self
            .hostname
            .clone()
            .or_else(|| self.agent_hostname.clone())
            .unwrap_or_else(|| "an unnamed host".to_string());
        let message = format!("storage executor running on {host}");
        self.send_status(&id, TaskState::Running, &message, None);
        self.start_node(&id);
    }

    /// Starts the node worker for the task: it needs the scheduler's URL and the executor
    /// secret, which the scheduler puts in the task's data (never in the environment).
    fn start_node(&mut self, task_id: &str) {
        if self.node_started {
            log::warn!("task {task_id}: the node worker already runs for an earlier task");
            return;
        }
        let Some(task) = self.book.task(task_id) else {
            return;
        };
        let url = self
            .scheduler_url
            .clone()
            .or_else(|| task.payload.settings.get(SCHEDULER_URL).cloned());
        let secret = task.payload.data.as_deref().and_then(executor_secret);
        let (Some(url), Some(secret), Some(tx)) = (url, secret, self.tx.clone()) else {
            log::error!(
                "task {task_id}: no {SCHEDULER_URL} setting or no executor secret in the task \
                 data: this task is not from the storage scheduler; no host phases run"
            );
            return;
        };
        let (moves, moved) = mpsc::channel();
        self.moves = Some(moves);
        let api = SchedulerApi::new(&url, &self.config.executor_id, &secret, moved);
        let worker = node::Node::new(api, Facts::from_env(), self.config.sandbox.clone());
        let id = task_id.to_string();
        let spawned = thread::Builder::new().name("node".into()).spawn(move || {
            let outcome = worker.run();
            let _ = tx.send(Incoming::Node(id, outcome));
        });
        match spawned {
            Ok(_) => self.node_started = true,
            Err(e) => {
                let text = format!("cannot start the node worker thread: {e}");
                self.on_node_outcome(task_id, Outcome::Failed(text));
            }
        }
    }

    /// The node is running, or it failed: the task says so, with the same text the
    /// scheduler got as the phase's error. A finished task ends the executor once its
    /// update is acknowledged.
    fn on_node_outcome(&mut self, task_id: &str, outcome: Outcome) -> Flow {
        match outcome {
            Outcome::Running => {
                self.send_status(task_id, TaskState::Running, "storage node running", None);
            }
            Outcome::Failed(text) | Outcome::Refused(text) => {
                self.send_status(task_id, TaskState::Failed, &text, None);
                let wait = self.config.shutdown_grace_period.min(NEVER);
                self.shutdown_deadline = Some(after(Instant::now(), wait));
            }
        }
        Flow::Continue
    }

    /// Task groups are for the default executor; this one runs single tasks. Each task is
    /// failed at once so that none of them stays in limbo.
    fn on_launch_group(&mut self, tasks: Vec<TaskInfo>) {
        self.launched_any = true;
        log::warn!(
            "LAUNCH_GROUP of {} tasks: this executor does not run task groups",
            tasks.len()
        );
        for task in tasks {
            let id = task.task_id.value.to_string();
            let payload = TaskPayload::from_task(&task, &self.inherited);
            if let Err(e) = self.book.launch(task, payload) {
                log::warn!("LAUNCH_GROUP task ignored: {e}");
                continue;
            }
            self.send_status(
                &id,
                TaskState::Failed,
                "the storage executor does not run task groups",
                Some(task_status::Reason::TaskGroupInvalid),
            );
        }
    }

    fn on_kill(&mut self, id: &str) {
        match self.book.task(id) {
            Some(t) if !t.is_terminal() => {
                log::info!("KILL task {id}");
                self.send_status(id, TaskState::Killed, "killed on request", None);
            }
            Some(_) => log::info!("KILL task {id}: already ended, nothing to do"),
            None => log::warn!("KILL of task {id}, which this executor does not run; ignored"),
        }
    }

    fn on_acknowledged(&mut self, task_id: &str, uuid: &[u8]) {
        match self.book.acknowledge(task_id, uuid) {
            Ack::Acknowledged { state, task_done } => log::info!(
                "ACKNOWLEDGED {state} of task {task_id} (uuid {}){}",
                uuid::to_text(uuid),
                if task_done { "; task finished" } else { "" }
            ),
            Ack::Unknown => log::info!(
                "ACKNOWLEDGED task {task_id} uuid {}, which is not pending; ignored",
                uuid::to_text(uuid)
            ),
        }
    }

    fn on_shutdown(&mut self) {
        if self.shutdown_deadline.is_some() {
            log::info!("SHUTDOWN again; already shutting down");
            return;
        }
        let live = self.book.live_task_ids();
        // Leave part of the grace period for the process to exit before the agent kills it.
        let wait = self.config.shutdown_grace_period.min(NEVER).mul_f64(0.75);
        log::info!(
            "SHUTDOWN: killing {} tasks, exiting within {}",
            live.len(),
            show(wait)
        );
        self.shutdown_deadline = Some(after(Instant::now(), wait));
        for id in live {
            self.send_status(&id, TaskState::Killed, "the executor was shut down", None);
        }
    }

    /// Records an update with a fresh uuid and sends whatever is pending.
    fn send_status(
        &mut self,
        task_id: &str,
        state: TaskState,
        message: &str,
        reason: Option<task_status::Reason>,
    ) {
        let agent_id = self
            .book
            .task(task_id)
            .map(|t| t.info.agent_id.clone())
            .filter(|a| !a.value.is_empty());
        let uuid = uuid::random();
        let status = TaskStatus {
            task_id: TaskID {
                value: task_id.into(),
            },
            state,
            message: Some(message.into()),
            agent_id,
            timestamp: Some(unix_now()),
            executor_id: Some(ExecutorID {
                value: self.config.executor_id.as_str().into(),
            }),
            source: Some(task_status::Source::Executor),
            reason,
            uuid: Some(Bytes(uuid.to_vec())),
            ..TaskStatus::default()
        };
        if let Err(e) = self.book.record(status) {
            log::error!("{state} for task {task_id} not sent: {e}");
            return;
        }
        log::info!(
            "UPDATE task {task_id}: {state} (uuid {})",
            uuid::to_text(&uuid)
        );
        self.flush();
    }

    /// Sends pending updates oldest first and stops at the first failure, so that a task's
    /// updates never overtake each other; a failure schedules a resend.
    fn flush(&mut self) {
        while let Some(out) = self.book.next_undelivered() {
            let state = out.update.status.state;
            let request = self.new_call(call::Type::Update, |c| c.update = Some(out.update));
            match self.client.call(&request) {
                Ok(()) => {
                    self.book.mark_delivered(&out.uuid);
                    self.resend_delay = RESEND_START;
                }
                Err(e @ ClientError::Rejected { .. }) => {
                    // Resending the same body gets the same answer; it stays pending and
                    // goes out again with the next SUBSCRIBE.
                    log::error!("UPDATE {state} of task {} refused: {e}", out.task_id);
                    self.book.mark_delivered(&out.uuid);
                }
                Err(e) => {
                    let delay = self.resend_delay;
                    log::warn!(
                        "UPDATE {state} of task {} failed: {e}; retrying in {}",
                        out.task_id,
                        show(delay)
                    );
                    self.resend_at = Some(Instant::now() + delay);
                    self.resend_delay = (delay * 2).min(RESEND_MAX);
                    return;
                }
            }
        }
    }

    fn new_call(&self, kind: call::Type, fill: impl FnOnce(&mut Call)) -> Call {
        let mut c = Call {
            executor_id: ExecutorID {
                value: self.config.executor_id.as_str().into(),
            },
            framework_id: FrameworkID {
                value: self.config.framework_id.as_str().into(),
            },
            r#type: Some(kind),
            ..Call::default()
        };
        fill(&mut c);
        c
    }
}

/// `executor_secret` of the task data's JSON object.
fn executor_secret(data: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    v.get(storage_framework::contract::env::DATA_EXECUTOR_SECRET)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
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
    fn the_secret_comes_from_the_task_data() {
        assert_eq!(
            executor_secret(br#"{"executor_secret":"abc"}"#).as_deref(),
            Some("abc")
        );
        assert_eq!(executor_secret(br#"{"executor_secret":""}"#), None);
        assert_eq!(executor_secret(br#"{"persona":"data"}"#), None);
        assert_eq!(executor_secret(b"not json"), None);
    }

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
