//! The call sender: sends the dispatcher's Calls on the current subscription's stream id,
//! each as its own request as the v1 API wants, so that a slow master never blocks the
//! dispatcher.
//!
//! A launch wave is one ACCEPT per agent and one ACKNOWLEDGE per update, each a round trip;
//! sent one after another they bound how fast 10,000 agents are covered. So the router
//! thread spreads the per-agent calls (ACCEPT, ACKNOWLEDGE, KILL, SHUTDOWN, MESSAGE) over a few lanes
//! by agent, keeping each agent's calls in order, while every call whose order matters
//! globally (DECLINE before a later REVIVE, SUPPRESS/REVIVE, RECONCILE, TEARDOWN) goes
//! through lane 0 in the order the dispatcher sent it.

use crate::mesos::client::SchedulerClient;
use crate::mesos::scheduler::{call, Call};
use crate::mesos::types::{AgentID, ExecutorID, FrameworkID};
use crate::mesos::Bytes;
use crate::scheduler::exchange::{CallOutcome, Input};
use crate::scheduler::metrics::Metrics;
use crossbeam_channel::{Receiver, Sender};
use log::{debug, warn};
use std::sync::Arc;

pub enum Outgoing {
    /// A new subscription: its client carries the master and the stream id.
    Connected(Box<SchedulerClient>),
    /// The stream broke: calls are dropped until the next subscription (the master resends
    /// unacknowledged updates and rescinds offers of a disconnected framework anyway).
    Disconnected,
    Call(Box<Call>),
    /// A framework MESSAGE, made into its `Call` only when it is sent.
    Message(Box<ExecutorMessage>),
}

impl Outgoing {
    /// The call this carries, a MESSAGE made whole (tests read what the dispatcher sent).
    pub fn into_call(self) -> Option<Call> {
        match self {
            Outgoing::Call(c) => Some(*c),
            Outgoing::Message(m) => Some(m.into_call()),
            Outgoing::Connected(_) | Outgoing::Disconnected => None,
        }
    }
}

/// A framework MESSAGE to one executor, kept small while it waits for its lane: a new
/// scheduler tells every executor its address at once (and a new target nudges every idle
/// one), and as `Call`s, 856 bytes inline each, 10,000 of them held 8 MB while the lanes sent
/// them (massif, a restart at 10,000 agents).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorMessage {
    /// Shared by the messages of one batch.
    pub framework_id: Option<Arc<str>>,
    /// The model's own agent id, shared: an announcement queues one MESSAGE per executor at
    /// once (10,000 after a restart), beside the whole model just loaded.
    pub agent_id: Arc<str>,
    pub executor_id: String,
    /// Shared by the messages of one announcement.
    pub data: Arc<[u8]>,
}

impl ExecutorMessage {
    pub fn into_call(self) -> Call {
        Call {
            framework_id: self.framework_id.map(|id| FrameworkID {
                value: (*id).into(),
            }),
            r#type: Some(call::Type::Message),
            message: Some(call::Message {
                agent_id: AgentID {
                    value: (&*self.agent_id).into(),
                },
                executor_id: ExecutorID {
                    value: self.executor_id.into(),
                },
                data: Bytes(self.data.to_vec()),
            }),
            ..Default::default()
        }
    }
}

/// Lanes for per-agent calls, beside the ordered lane 0.
const AGENT_LANES: usize = 4;

enum Lane {
    Connected(Box<SchedulerClient>),
    Disconnected,
    Call(Box<Call>),
    Message(Box<ExecutorMessage>),
}

/// The agent lane of calls to `agent` (1..=AGENT_LANES): any stable spread will do.
fn agent_lane(agent: &str) -> usize {
    1 + (crate::hash::content_hash(agent.as_bytes()) % AGENT_LANES as u64) as usize
}

/// The lane of a call: 0 for calls whose global order matters, else one chosen by agent.
fn lane_of(call: &Call) -> usize {
    let agent = call
        .acknowledge
        .as_ref()
        .map(|a| a.agent_id.value.as_str())
        .or_else(|| {
            call.accept.as_ref().and_then(|a| {
                a.operations
                    .iter()
                    .filter_map(|o| o.launch.as_ref())
                    .flat_map(|l| l.task_infos.iter())
                    .map(|t| t.agent_id.value.as_str())
                    .next()
            })
        })
        .or_else(|| {
            call.kill
                .as_ref()
                .and_then(|k| k.agent_id.as_ref())
                .map(|a| a.value.as_str())
        })
        .or_else(|| call.shutdown.as_ref().map(|s| s.agent_id.value.as_str()))
        .or_else(|| call.message.as_ref().map(|m| m.agent_id.value.as_str()));
    agent.map_or(0, agent_lane)
}

/// Where outcomes go: the dispatcher, which repairs what a lost call leaves undone.
#[derive(Clone)]
pub struct Reports {
    pub to: Sender<Input>,
    pub metrics: Arc<Metrics>,
}

impl Reports {
    /// Every failure goes back to the dispatcher; of the successes only those that change
    /// what the dispatcher believes of the master (the offer mode) and ACCEPTs (its launch
    /// window: it decides more launches as these leave), so that a launch wave's thousands
    /// of ACKs do not double the dispatcher's input.
    fn report(&self, call: Box<Call>, error: Option<String>) {
        let name = call.r#type.unwrap_or_default();
        self.metrics.call(name.as_str(), error.is_none());
        let wanted = error.is_some()
            || matches!(
                name,
                call::Type::Revive | call::Type::Suppress | call::Type::Accept
            );
        if wanted {
            let _ = self
                .to
                .send(Input::CallOutcome(CallOutcome { call, error }));
        }
    }
}

fn send(client: Option<&SchedulerClient>, call: Box<Call>, reports: &Reports) {
    let name = call.r#type.unwrap_or_default().as_str();
    let Some(c) = client else {
        debug!("not subscribed: {name} not sent");
        reports.report(call, Some("not subscribed".into()));
        return;
    };
    match c.call(&call) {
        Ok(()) => {
            // One line per call floods at scale: the dispatcher counts them (debug_tally).
            log::trace!("{name} sent to {}", c.master());
            reports.report(call, None);
        }
        Err(e) => {
            warn!("{name} failed: {e}");
            reports.report(call, Some(e.to_string()));
        }
    }
}

fn lane(inputs: Receiver<Lane>, reports: Reports) {
    let mut client: Option<Box<SchedulerClient>> = None;
    for msg in inputs {
        match msg {
            Lane::Connected(c) => client = Some(c),
            Lane::Disconnected => client = None,
            Lane::Call(call) => send(client.as_deref(), call, &reports),
            Lane::Message(m) => send_message(client.as_deref(), *m, &reports),
        }
    }
}

/// A MESSAGE made into its call at last, and sent.
fn send_message(client: Option<&SchedulerClient>, m: ExecutorMessage, reports: &Reports) {
    send(client, Box::new(m.into_call()), reports)
}

/// Routes the dispatcher's output until the dispatcher hangs up. This thread is lane 0
/// itself: ordered calls are sent from here, in order.
pub fn run(inputs: Receiver<Outgoing>, reports: Reports) {
    let mut lanes: Vec<Sender<Lane>> = Vec::with_capacity(AGENT_LANES);
    let mut threads = Vec::with_capacity(AGENT_LANES);
    for i in 1..=AGENT_LANES {
        let (tx, rx) = crossbeam_channel::unbounded();
        let r = reports.clone();
        match std::thread::Builder::new()
            .name(format!("call-lane-{i}"))
            .spawn(move || lane(rx, r))
        {
            Ok(t) => {
                lanes.push(tx);
                threads.push(t);
            }
            // Fewer lanes only means slower launch waves.
            Err(e) => warn!("cannot start call lane {i}: {e}"),
        }
    }
    let mut client: Option<Box<SchedulerClient>> = None;
    for msg in inputs {
        match msg {
            Outgoing::Connected(c) => {
                for l in &lanes {
                    let _ = l.send(Lane::Connected(c.clone()));
                }
                client = Some(c);
            }
            Outgoing::Disconnected => {
                for l in &lanes {
                    let _ = l.send(Lane::Disconnected);
                }
                client = None;
            }
            Outgoing::Call(call) => match lane_of(&call) {
                i if i > 0 && !lanes.is_empty() => {
                    let _ = lanes[(i - 1) % lanes.len()].send(Lane::Call(call));
                }
                _ => send(client.as_deref(), call, &reports),
            },
            // The lane a `Call` to that agent takes (`lane_of`), always a per-agent one.
            Outgoing::Message(m) => match lanes.len() {
                0 => send_message(client.as_deref(), *m, &reports),
                n => {
                    let _ = lanes[(agent_lane(&m.agent_id) - 1) % n].send(Lane::Message(m));
                }
            },
        }
    }
    drop(lanes);
    for t in threads {
        let _ = t.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::scheduler::call;
    use crate::mesos::types::*;

    /// A MESSAGE kept small is the call it stands for, and takes that call's lane.
    #[test]
    fn a_small_message_is_the_call_it_stands_for() {
        let m = ExecutorMessage {
            framework_id: Some("fw-1".into()),
            agent_id: "a1".into(),
            executor_id: "e1".into(),
            data: Arc::from(&b"{\"plan_version\":3}"[..]),
        };
        let c = m.into_call();
        assert_eq!(c.r#type, Some(call::Type::Message));
        assert_eq!(c.framework_id.as_ref().unwrap().value, "fw-1");
        let msg = c.message.as_ref().unwrap();
        assert_eq!(
            (msg.agent_id.value.as_str(), msg.executor_id.value.as_str()),
            ("a1", "e1")
        );
        assert_eq!(msg.data.0, b"{\"plan_version\":3}");
        assert_eq!(lane_of(&c), agent_lane("a1"));
        assert!(lane_of(&c) > 0, "a per-agent lane, not the ordered one");
    }

    fn of(t: call::Type) -> Call {
        Call {
            r#type: Some(t),
            ..Default::default()
        }
    }

    fn ack(agent: &str) -> Call {
        Call {
            acknowledge: Some(call::Acknowledge {
                agent_id: AgentID {
                    value: agent.into(),
                },
                task_id: TaskID { value: "t".into() },
                uuid: crate::mesos::Bytes(vec![1]),
            }),
            ..of(call::Type::Acknowledge)
        }
    }

    fn accept(agent: &str) -> Call {
        Call {
            accept: Some(call::Accept {
                offer_ids: vec![],
                operations: vec![offer::Operation {
                    r#type: Some(offer::operation::Type::Launch),
                    launch: Some(offer::operation::Launch {
                        task_infos: vec![TaskInfo {
                            agent_id: AgentID {
                                value: agent.into(),
                            },
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                }],
                filters: None,
            }),
            ..of(call::Type::Accept)
        }
    }

    #[test]
    fn per_agent_calls_share_a_lane_and_global_ones_take_lane_zero() {
        for a in ["a1", "agent-7", "S123"] {
            let l = lane_of(&ack(a));
            assert!((1..=AGENT_LANES).contains(&l));
            assert_eq!(
                lane_of(&accept(a)),
                l,
                "{a}: ACCEPT and ACK in different lanes"
            );
        }
        for t in [
            call::Type::Decline,
            call::Type::Revive,
            call::Type::Suppress,
            call::Type::Reconcile,
            call::Type::Teardown,
        ] {
            assert_eq!(lane_of(&of(t)), 0, "{t}");
        }
        // Agents spread over more than one lane.
        let lanes: std::collections::BTreeSet<usize> = (0..50)
            .map(|i| lane_of(&ack(&format!("agent-{i}"))))
            .collect();
        assert!(lanes.len() > 1);
    }
}
