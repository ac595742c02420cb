//! Start-up with the storage gateway: the client for the configured address, and the
//! prerequisite checks run before subscribing (with `-storage.wait`, answering the REST
//! server's view requests while they wait).

use super::prereq;
use crate::backoff::Backoff;
use crate::gateway::client::{self, GatewayClient, GatewayConfig};
use crate::scheduler::exchange::{Input, View};
use crate::scheduler::exit::EXIT_OK;
use crate::scheduler::flags::Config;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::model::ClusterModel;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The client for the configured gateway, `None` when its address is not known yet
/// (experimental mode before the MDM trio exists).
pub fn client_for(
    config: &Config,
    metrics: Arc<Metrics>,
) -> Result<Option<GatewayClient>, client::GatewayError> {
    let address = match prereq::gateway_address(config) {
        Some(a) => a,
        // Experimental mode without a gateway flag: the gateway runs on the primary MDM
        // node, whose address the worker learns once the cluster is built.
        None if config.experimental => String::new(),
        None => return Ok(None),
    };
    let mut gc = GatewayConfig::new(
        &address,
        config.storage.password.clone(),
        &config.storage.api_version,
    );
    gc.ca_cert = config.storage.gateway_ca.clone();
    if gc.ca_cert.is_none() {
        log::warn!(
            "the storage gateway's TLS certificate{} is not verified \
             (give -storage.gateway.cacert=PATH to verify it)",
            if address.is_empty() {
                String::new()
            } else {
                format!(" at {address}")
            }
        );
    }
    Ok(Some(
        GatewayClient::new(gc)?.with_counters(Arc::clone(&metrics.gateway)),
    ))
}

/// Pre-configured mode: checks the storage cluster before the scheduler subscribes. A
/// failure is one error line and exit code 3; with `-storage.wait=true` the checks are
/// retried with backoff while `/health` and the page say what is awaited. Returns the
/// logged-in client, or the exit code.
pub fn check_before_subscribing(
    config: &Config,
    metrics: Arc<Metrics>,
    inputs: &Receiver<Input>,
    model: &ClusterModel,
) -> Result<Option<GatewayClient>, i32> {
    let fatal = |message: String| {
        log::error!("{message}");
        prereq::EXIT_PREREQUISITE
    };
    let mut client = match client_for(config, metrics) {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(None),
        Err(e) => return Err(fatal(e.to_string())),
    };
    let Some(wanted) = prereq::Wanted::from_config(config) else {
        return Ok(Some(client));
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        match prereq::run(&mut client, &wanted) {
            Ok(p) => {
                log::info!(
                    "storage cluster ready: system {:?} (id {}) version {}, gateway {}",
                    p.system_name,
                    p.system_id,
                    p.version,
                    client.address()
                );
                if p.swapped {
                    log::warn!(
                        "the primary and secondary MDMs have swapped roles (an MDM failover); going on"
                    );
                }
                return Ok(Some(client));
            }
            Err(f) if !config.storage.wait => return Err(fatal(f.to_string())),
            Err(f) => {
                let delay = backoff.next_delay();
                log::warn!(
                    "{f}; waiting (-storage.wait=true), next check in {:.1}s",
                    delay.as_secs_f64()
                );
                let reason = format!("waiting for the storage cluster: {f}");
                if !serve_while_waiting(inputs, model, &reason, delay) {
                    return Err(EXIT_OK);
                }
            }
        }
    }
}

/// Answers the REST server's view requests with a "waiting" view for `delay`; false when a
/// shutdown was asked for.
fn serve_while_waiting(
    inputs: &Receiver<Input>,
    model: &ClusterModel,
    reason: &str,
    delay: Duration,
) -> bool {
    let until = Instant::now() + delay;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match inputs.recv_timeout(left) {
            Ok(Input::View(reply)) => {
                let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
                let _ = reply.send(Arc::new(View {
                    subscribed: false,
                    master: None,
                    disconnected_reason: Some(reason.to_string()),
                    suppressed: false,
                    model: model.clone(),
                    generated_ms: now,
                    // Far above the dispatcher's own counter (which starts at 0), and new
                    // for each wait view, so REST caches never mix the two.
                    generation: (1 << 62) + now,
                }));
            }
            Ok(Input::Shutdown) => return false,
            // Nothing else can be served before the dispatcher runs; executor calls get
            // their error from the dropped reply channel and retry.
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}
