//! The call sender thread: sends the dispatcher's Calls on the current subscription's
//! stream id, each on its own connection as the v1 API wants, so that a slow master never
//! blocks the dispatcher.

use crate::mesos::client::SchedulerClient;
use crate::mesos::scheduler::Call;
use crate::scheduler::metrics::Metrics;
use crossbeam_channel::Receiver;
use log::{debug, warn};
use std::sync::Arc;

pub enum Outgoing {
    /// A new subscription: its client carries the master and the stream id.
    Connected(Box<SchedulerClient>),
    /// The stream broke: calls are dropped until the next subscription (the master resends
    /// unacknowledged updates and rescinds offers of a disconnected framework anyway).
    Disconnected,
    Call(Box<Call>),
}

pub fn run(inputs: Receiver<Outgoing>, metrics: Arc<Metrics>) {
    let mut client: Option<Box<SchedulerClient>> = None;
    for msg in inputs {
        match msg {
            Outgoing::Connected(c) => client = Some(c),
            Outgoing::Disconnected => client = None,
            Outgoing::Call(call) => {
                let name = call.r#type.unwrap_or_default().as_str();
                let Some(c) = &client else {
                    debug!("not subscribed: dropping {name}");
                    metrics.call(name, false);
                    continue;
                };
                match c.call(&call) {
                    Ok(()) => {
                        debug!("{name} sent to {}", c.master());
                        metrics.call(name, true);
                    }
                    Err(e) => {
                        warn!("{name} failed: {e}");
                        metrics.call(name, false);
                    }
                }
            }
        }
    }
}
