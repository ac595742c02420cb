//! The subscription reader thread: keeps one SUBSCRIBE stream open to the leading master
//! and feeds its events to the dispatcher.
//!
//! - A dead stream is noticed by silence: the read idle timeout is a few heartbeat intervals.
//! - A 307 is followed to the new leader at once; a master that cannot be reached makes it
//!   try the next one in `-uri`, after a jittered exponential backoff capped at 30 s.
//! - Re-subscription re-uses the framework id (so executors survive a scheduler restart).

use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::mesos::client::{
    ClientConfig, ClientError, SchedulerClient, SchedulerItem, StreamError,
};
use crate::mesos::scheduler::{call, event, Call};
use crate::mesos::types::{FrameworkID, FrameworkInfo};
use crate::scheduler::exchange::Input;
use crate::scheduler::master::sender::Outgoing;
use crate::scheduler::metrics::Metrics;
use crossbeam_channel::{Receiver, Sender};
use log::{debug, error, info, warn};
use std::sync::Arc;
use std::time::Duration;

/// Inputs queued for the dispatcher past which this reader stops reading the stream until
/// the dispatcher takes a batch. A restarted scheduler at 10,000 agents is sent an UPDATE for
/// every task while it is still busy starting (a health pass over every node, an announcement
/// to every executor); read as fast as they came, 28,000 decoded events of about 1 KB queued
/// up, 36 MB of its 57-68 MB peak. Unread, they wait in the socket and the master, as for
/// any slow subscriber: the read idle timeout counts only time spent reading, and the
/// dispatcher takes up to 4,096 inputs a batch anyway.
pub(crate) const MAX_QUEUED_INPUTS: usize = 1024;
/// Heartbeat interval assumed before the master has told us one (Mesos' default).
const DEFAULT_HEARTBEAT_SECS: f64 = 15.0;
/// Missed heartbeats before the stream counts as dead.
const HEARTBEATS_TO_DEATH: f64 = 4.0;

pub struct Subscriber {
    pub masters: Vec<String>,
    pub client_config: ClientConfig,
    pub framework_info: FrameworkInfo,
    pub framework_id: Option<String>,
    pub heartbeat_secs: Option<f64>,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    /// A token each time the dispatcher takes a batch of inputs ([`MAX_QUEUED_INPUTS`]).
    pub taken: Receiver<()>,
}

/// The master to subscribe to next.
struct Target {
    /// Position in `-uri` of the last master tried from the list.
    index: usize,
    master: String,
    /// Redirects followed in a row (a loop between confused masters must not spin).
    redirects: u32,
}

/// Why a subscription's event stream ended.
enum PumpEnd {
    /// The dispatcher is gone: the scheduler is stopping.
    DispatcherGone,
    /// The master sent ERROR (forwarded to the dispatcher).
    Error,
    /// The stream broke: subscribe again.
    Broken(String),
}

/// Whether a master's error text says the framework was removed (Mesos' `master.cpp`
/// answers a SUBSCRIBE with a removed id with "Framework has been removed"), as opposed to
/// "Framework failed over" (another instance subscribed with our id) and other errors.
pub fn is_removal(message: &str) -> bool {
    message.contains("Framework has been removed")
}

/// An ERROR event with `message`, for a removal learnt from a refused SUBSCRIBE.
fn error_event(message: &str) -> crate::mesos::scheduler::Event {
    crate::mesos::scheduler::Event {
        r#type: Some(event::Type::Error),
        error: Some(event::Error {
            message: message.into(),
        }),
        ..Default::default()
    }
}

fn idle_timeout(heartbeat: Option<f64>) -> Duration {
    let h = heartbeat
        .filter(|h| h.is_finite() && *h > 0.0)
        .unwrap_or(DEFAULT_HEARTBEAT_SECS);
    Duration::from_secs_f64((h * HEARTBEATS_TO_DEATH).clamp(2.0, 600.0))
}

/// SUBSCRIBE as `framework_info`, re-using `framework_id` when there is one, with its role
/// suppressed: a (re)subscribed framework is otherwise offered every agent of the cluster at
/// once (at 10,000 agents one OFFERS event of 3.7 MB, held twice while split, then 10,000
/// DECLINEs) before its first SUPPRESS lands. The dispatcher REVIVEs as soon as a node or
/// an agent needs a launch (`offer_mode.rs`). A master older than 1.4 ignores the field and
/// offers as before.
pub fn subscribe_call(framework_info: &FrameworkInfo, framework_id: Option<&str>) -> Call {
    let mut info = framework_info.clone();
    info.id = framework_id.map(|id| FrameworkID { value: id.into() });
    let role = info.role.clone().unwrap_or_else(|| "*".into());
    Call {
        framework_id: info.id.clone(),
        r#type: Some(call::Type::Subscribe),
        subscribe: Some(call::Subscribe {
            framework_info: info,
            suppressed_roles: vec![role],
        }),
        ..Default::default()
    }
}

impl Subscriber {
    fn subscribe_call(&self) -> Call {
        subscribe_call(&self.framework_info, self.framework_id.as_deref())
    }

    /// Runs until `stop` fires or the dispatcher goes away.
    pub fn run(
        mut self,
        to_dispatcher: Sender<Input>,
        to_sender: Sender<Outgoing>,
        stop: Receiver<()>,
    ) {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut target = Target {
            index: 0,
            master: self.masters.first().cloned().unwrap_or_default(),
            redirects: 0,
        };
        loop {
            let mut cfg = self.client_config.clone();
            cfg.stream_idle_timeout = Some(idle_timeout(self.heartbeat_secs));
            let master = target.master.clone();
            let outcome = SchedulerClient::new(&master, cfg).and_then(|mut client| {
                info!("subscribing to master {master}");
                let sub = client.subscribe(&self.subscribe_call())?;
                Ok((client, sub))
            });
            let again = match outcome {
                Ok((client, sub)) => {
                    target.redirects = 0;
                    let links = (&to_dispatcher, &to_sender);
                    self.serve(client, sub.events, &master, links, &mut backoff)
                }
                Err(ClientError::Redirect { leader, .. }) => {
                    info!("master {master} is not the leader; following the redirect to {leader}");
                    target.redirects += 1;
                    target.master = leader;
                    // A redirect loop between confused masters must not spin.
                    if target.redirects <= 3 {
                        continue;
                    }
                    true
                }
                Err(e) => self.subscribe_failed(e, &mut target, &to_dispatcher),
            };
            if !again {
                return;
            }
            let delay = backoff.next_delay();
            debug!("next subscription attempt in {} ms", delay.as_millis());
            if crate::scheduler::stop::wait(&stop, delay) {
                return;
            }
        }
    }

    /// Tells the call sender and the dispatcher of the new subscription and pumps its
    /// events; `false` when this thread is done (ERROR, or the dispatcher gone).
    fn serve(
        &mut self,
        client: SchedulerClient,
        events: crate::mesos::client::EventStream,
        master: &str,
        (to_dispatcher, to_sender): (&Sender<Input>, &Sender<Outgoing>),
        backoff: &mut Backoff,
    ) -> bool {
        let _ = to_sender.send(Outgoing::Connected(Box::new(client)));
        let connected = Input::Connected {
            master: master.to_owned(),
        };
        if to_dispatcher.send(connected).is_err() {
            return false;
        }
        let end = self.pump(events, to_dispatcher, backoff);
        let _ = to_sender.send(Outgoing::Disconnected);
        match end {
            PumpEnd::Broken(reason) => {
                self.metrics
                    .reconnects
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                to_dispatcher.send(Input::Disconnected { reason }).is_ok()
            }
            // After an ERROR the framework is gone or another instance took over:
            // subscribing again (with the id, or without one) would register a second
            // framework or steal it back.
            PumpEnd::Error | PumpEnd::DispatcherGone => false,
        }
    }

    /// A SUBSCRIBE that failed: the next attempt goes to the next master; `false` when the
    /// master says the framework was removed (this thread never subscribes again).
    fn subscribe_failed(
        &self,
        e: ClientError,
        target: &mut Target,
        to_dispatcher: &Sender<Input>,
    ) -> bool {
        if let ClientError::Rejected { .. } = &e {
            error!("SUBSCRIBE refused: {e}");
            if is_removal(&e.to_string()) {
                // The dispatcher decides what the removal means for the stored id.
                let _ = to_dispatcher.send(Input::Event(Box::new(error_event(&e.to_string()))));
                return false;
            }
        } else {
            warn!("SUBSCRIBE failed: {e}");
        }
        if self.masters.len() > 1 {
            target.index = (target.index + 1) % self.masters.len();
            target.master = self.masters[target.index].clone();
        }
        let _ = to_dispatcher.send(Input::Disconnected {
            reason: e.to_string(),
        });
        true
    }

    /// Feeds events to the dispatcher until the stream ends.
    fn pump(
        &mut self,
        mut events: crate::mesos::client::EventStream,
        to_dispatcher: &Sender<Input>,
        backoff: &mut Backoff,
    ) -> PumpEnd {
        loop {
            match events.next_item() {
                Ok(Some(SchedulerItem::Offers(offers))) => {
                    self.metrics
                        .event(event::Type::Offers.as_str(), self.clock.now_ms());
                    if !wait_for_room(to_dispatcher, &self.taken)
                        || to_dispatcher.send(Input::Offers(offers)).is_err()
                    {
                        return PumpEnd::DispatcherGone;
                    }
                }
                Ok(Some(SchedulerItem::Event(ev))) => {
                    let kind = ev.r#type.unwrap_or_default();
                    self.metrics.event(kind.as_str(), self.clock.now_ms());
                    match kind {
                        event::Type::Subscribed => {
                            if let Some(s) = &ev.subscribed {
                                self.framework_id = Some(s.framework_id.value.to_string());
                                if let Some(h) = s.heartbeat_interval_seconds {
                                    self.heartbeat_secs = Some(h);
                                }
                            }
                            backoff.reset();
                        }
                        event::Type::Error => {
                            let _ = to_dispatcher.send(Input::Event(ev));
                            return PumpEnd::Error;
                        }
                        _ => {}
                    }
                    if !wait_for_room(to_dispatcher, &self.taken)
                        || to_dispatcher.send(Input::Event(ev)).is_err()
                    {
                        return PumpEnd::DispatcherGone;
                    }
                }
                Ok(None) => return PumpEnd::Broken("the master closed the event stream".into()),
                Err(StreamError::Decode { endpoint, error }) => {
                    self.metrics.event("UNDECODABLE", self.clock.now_ms());
                    warn!("{endpoint}: skipping an undecodable event: {error}");
                }
                // As with an undecodable event, the framing is intact and the stream goes on.
                Err(e @ StreamError::TooLarge { .. }) => {
                    self.metrics.event("UNDECODABLE", self.clock.now_ms());
                    warn!("{e}; skipping it");
                }
                Err(e) => return PumpEnd::Broken(e.to_string()),
            }
        }
    }
}

/// Waits while the dispatcher has [`MAX_QUEUED_INPUTS`] queued, woken when it takes a batch
/// (the timeout only looks again); false when the dispatcher is gone.
fn wait_for_room(to: &Sender<Input>, taken: &Receiver<()>) -> bool {
    while to.len() >= MAX_QUEUED_INPUTS {
        if let Err(crossbeam_channel::RecvTimeoutError::Disconnected) =
            taken.recv_timeout(Duration::from_millis(100))
        {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_asks_for_its_role_suppressed() {
        let mut info = FrameworkInfo {
            role: Some("storage".into()),
            ..Default::default()
        };
        let call = subscribe_call(&info, Some("fw-1"));
        let sub = call.subscribe.expect("subscribe");
        assert_eq!(
            sub.suppressed_roles,
            vec![crate::mesos::Str::from("storage")]
        );
        assert_eq!(
            sub.framework_info.id.map(|id| id.value),
            Some("fw-1".into())
        );
        info.role = None;
        let sub = subscribe_call(&info, None).subscribe.expect("subscribe");
        assert_eq!(
            sub.suppressed_roles,
            vec![crate::mesos::Str::from("*")],
            "the default role"
        );
    }

    /// Runs `f` on a thread; true when it returned within `limit`.
    fn ends_within(limit: Duration, f: impl FnOnce() + Send + 'static) -> bool {
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            f();
            let _ = done_tx.send(());
        });
        done_rx.recv_timeout(limit).is_ok()
    }

    /// With the dispatcher's queue full the reader waits, whatever wakes it, until the
    /// dispatcher has taken inputs; it gives up only when the dispatcher is gone.
    #[test]
    fn the_reader_waits_while_the_dispatcher_queue_is_full() {
        let (to, queue) = crossbeam_channel::unbounded();
        let fill = |to: &Sender<Input>| {
            while to.len() < MAX_QUEUED_INPUTS {
                to.send(Input::Shutdown).unwrap();
            }
        };
        fill(&to);
        let (taken_tx, taken_rx) = crossbeam_channel::bounded(1);
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        let (waiter_to, waiter_taken) = (to.clone(), taken_rx.clone());
        std::thread::spawn(move || {
            let room = wait_for_room(&waiter_to, &waiter_taken);
            let _ = done_tx.send((room, waiter_to.len()));
        });
        // Woken with the queue still full, it goes back to waiting.
        taken_tx.send(()).unwrap();
        assert!(
            done_rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the reader went on with the queue full"
        );
        for _ in 0..10 {
            queue.recv().unwrap();
        }
        let _ = taken_tx.try_send(());
        let (room, len) = done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the reader goes on once the dispatcher took inputs");
        assert!(room && len < MAX_QUEUED_INPUTS, "{room} {len}");
        fill(&to);
        drop(taken_tx);
        assert!(!wait_for_room(&to, &taken_rx), "the dispatcher is gone");
    }

    #[test]
    fn a_closed_stop_channel_ends_the_retry_loop() {
        // Nothing listens on port 1: every SUBSCRIBE fails and the thread waits to retry.
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        drop(stop_tx);
        let (in_tx, in_rx) = crossbeam_channel::unbounded();
        let (out_tx, _out_rx) = crossbeam_channel::unbounded();
        let sub = Subscriber {
            masters: vec!["127.0.0.1:1".into()],
            client_config: ClientConfig::default(),
            framework_info: FrameworkInfo::default(),
            framework_id: Some("fw-1".into()),
            heartbeat_secs: None,
            metrics: Arc::new(Metrics::default()),
            clock: crate::clock::system(),
            taken: crossbeam_channel::never(),
        };
        assert!(
            ends_within(Duration::from_secs(5), move || sub
                .run(in_tx, out_tx, stop_rx)),
            "the subscription thread kept retrying after the stop"
        );
        // It tried once, and did not go on subscribing.
        assert!(in_rx.try_iter().count() <= 2);
    }

    #[test]
    fn only_the_removal_text_means_removal() {
        assert!(is_removal("Framework has been removed"));
        assert!(!is_removal("Framework failed over"));
        assert!(!is_removal(
            "The framework failover_timeout (NaN) is invalid"
        ));
    }

    #[test]
    fn idle_timeout_is_a_few_heartbeats() {
        assert_eq!(idle_timeout(None), Duration::from_secs(60));
        assert_eq!(idle_timeout(Some(1.0)), Duration::from_secs(4));
        assert_eq!(idle_timeout(Some(0.1)), Duration::from_secs(2));
        assert_eq!(idle_timeout(Some(f64::NAN)), Duration::from_secs(60));
    }
}
