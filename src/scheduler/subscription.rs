//! The subscription reader thread: keeps one SUBSCRIBE stream open to the leading master
//! and feeds its events to the dispatcher.
//!
//! - A dead stream is noticed by silence: the read idle timeout is a few heartbeat intervals.
//! - A 307 is followed to the new leader at once; a master that cannot be reached makes it
//!   try the next one in `-uri`, after a jittered exponential backoff capped at 30 s.
//! - Re-subscription re-uses the framework id (so executors survive a scheduler restart).

use crate::clock::Clock;
use crate::mesos::client::{ClientConfig, ClientError, SchedulerClient, StreamError};
use crate::mesos::scheduler::{call, event, Call};
use crate::mesos::types::{FrameworkID, FrameworkInfo};
use crate::scheduler::backoff::Backoff;
use crate::scheduler::exchange::Input;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::sender::Outgoing;
use crossbeam_channel::{Receiver, Sender};
use log::{debug, error, info, warn};
use std::sync::Arc;
use std::time::Duration;

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
}

fn idle_timeout(heartbeat: Option<f64>) -> Duration {
    let h = heartbeat
        .filter(|h| h.is_finite() && *h > 0.0)
        .unwrap_or(DEFAULT_HEARTBEAT_SECS);
    Duration::from_secs_f64((h * HEARTBEATS_TO_DEATH).clamp(2.0, 600.0))
}

/// SUBSCRIBE as `framework_info`, re-using `framework_id` when there is one.
pub fn subscribe_call(framework_info: &FrameworkInfo, framework_id: Option<&str>) -> Call {
    let mut info = framework_info.clone();
    info.id = framework_id.map(|id| FrameworkID { value: id.into() });
    Call {
        framework_id: info.id.clone(),
        r#type: Some(call::Type::Subscribe),
        subscribe: Some(call::Subscribe {
            framework_info: info,
            suppressed_roles: Vec::new(),
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
        let mut index = 0usize;
        let mut master = self.masters.first().cloned().unwrap_or_default();
        let mut redirects = 0u32;
        loop {
            let mut cfg = self.client_config.clone();
            cfg.stream_idle_timeout = Some(idle_timeout(self.heartbeat_secs));
            let outcome = SchedulerClient::new(&master, cfg).and_then(|mut client| {
                info!("subscribing to master {master}");
                let sub = client.subscribe(&self.subscribe_call())?;
                Ok((client, sub))
            });
            let delay = match outcome {
                Ok((client, sub)) => {
                    redirects = 0;
                    let _ = to_sender.send(Outgoing::Connected(Box::new(client)));
                    if to_dispatcher
                        .send(Input::Connected {
                            master: master.clone(),
                        })
                        .is_err()
                    {
                        return;
                    }
                    let reason = self.pump(sub.events, &to_dispatcher, &mut backoff);
                    let _ = to_sender.send(Outgoing::Disconnected);
                    self.metrics
                        .reconnects
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    match reason {
                        Some(reason) => {
                            if to_dispatcher.send(Input::Disconnected { reason }).is_err() {
                                return;
                            }
                        }
                        None => return,
                    }
                    backoff.next_delay()
                }
                Err(ClientError::Redirect { leader, .. }) => {
                    redirects += 1;
                    info!("master {master} is not the leader; following the redirect to {leader}");
                    master = leader;
                    // A redirect loop between confused masters must not spin.
                    if redirects <= 3 {
                        continue;
                    }
                    backoff.next_delay()
                }
                Err(e) => {
                    match &e {
                        ClientError::Rejected { .. } => error!("SUBSCRIBE refused: {e}"),
                        _ => warn!("SUBSCRIBE failed: {e}"),
                    }
                    // Try the next configured master on the next attempt.
                    if self.masters.len() > 1 {
                        index = (index + 1) % self.masters.len();
                        master = self.masters[index].clone();
                    }
                    let _ = to_dispatcher.send(Input::Disconnected {
                        reason: e.to_string(),
                    });
                    backoff.next_delay()
                }
            };
            debug!("next subscription attempt in {} ms", delay.as_millis());
            if stop.recv_timeout(delay).is_ok() {
                return;
            }
        }
    }

    /// Feeds events to the dispatcher until the stream ends. `None` means the dispatcher is
    /// gone (stop); `Some(reason)` means reconnect.
    fn pump(
        &mut self,
        mut events: crate::mesos::client::EventStream,
        to_dispatcher: &Sender<Input>,
        backoff: &mut Backoff,
    ) -> Option<String> {
        loop {
            match events.next_event() {
                Ok(Some(ev)) => {
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
                            // The framework is gone: never re-subscribe with its id.
                            self.framework_id = None;
                        }
                        _ => {}
                    }
                    if to_dispatcher.send(Input::Event(Box::new(ev))).is_err() {
                        return None;
                    }
                }
                Ok(None) => return Some("the master closed the event stream".into()),
                Err(StreamError::Decode { endpoint, error }) => {
                    self.metrics.event("UNDECODABLE", self.clock.now_ms());
                    warn!("{endpoint}: skipping an undecodable event: {error}");
                }
                Err(e) => return Some(e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_timeout_is_a_few_heartbeats() {
        assert_eq!(idle_timeout(None), Duration::from_secs(60));
        assert_eq!(idle_timeout(Some(1.0)), Duration::from_secs(4));
        assert_eq!(idle_timeout(Some(0.1)), Duration::from_secs(2));
        assert_eq!(idle_timeout(Some(f64::NAN)), Duration::from_secs(60));
    }
}
