//! The main thread's stand-in for the dispatcher while the storage cluster is awaited
//! (`-storage.wait=true`): the REST server keeps getting views, which say why nothing runs.

use crate::scheduler::exchange::{Input, View};
use crate::scheduler::model::ClusterModel;
use crossbeam_channel::Receiver;
use std::sync::Arc;

/// Before the dispatcher runs (the storage cluster is awaited): answers the REST server's
/// view requests with a "waiting" view for `delay`; false when a shutdown was asked for.
pub fn serve_views(
    inputs: &Receiver<Input>,
    model: &ClusterModel,
    reason: &str,
    delay: std::time::Duration,
) -> bool {
    let until = std::time::Instant::now() + delay;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match inputs.recv_timeout(left) {
            Ok(Input::View(reply)) => {
                let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
                let _ = reply.send(Arc::new(View {
                    subscribed: false,
                    master: None,
                    disconnected_reason: Some(reason.to_string()),
                    suppressed: false,
                    attach_queue: Default::default(),
                    model: model.clone(),
                    generated_ms: now,
                    // Far above the dispatcher's own counter (which starts at 0), and new
                    // for each wait view, so REST caches never mix the two.
                    generation: (1 << 62) + now,
                    events: Default::default(),
                }));
            }
            Ok(Input::Operator(req)) => {
                let _ = req.reply.send(crate::scheduler::operator::Outcome {
                    status: 503,
                    message: format!("not running yet: {reason}"),
                });
            }
            Ok(Input::Shutdown) => return false,
            // Nothing else can be served before the dispatcher runs; executor calls get
            // their error from the dropped reply channel and retry.
            Ok(_) => {}
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => return true,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return false,
        }
    }
}
