//! Start-up with the storage gateway: the client for the configured address, and the
//! prerequisite checks run before subscribing (with `-storage.wait`, retried while the
//! caller's `wait` serves whoever asks meanwhile).

use super::prereq;
use crate::backoff::Backoff;
use crate::gateway::client::{self, GatewayClient, GatewayConfig};
use crate::gateway::trust::{FirstUse, Trust, TrustMode, FINGERPRINT_FLAG, INSECURE_FLAG};
use crate::scheduler::flags::Config;
use crate::scheduler::metrics::Metrics;
use crate::tls::Fingerprint;
use std::sync::Arc;
use std::time::Duration;

/// Why the scheduler stops before subscribing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// A prerequisite failed (logged): exit with [`prereq::EXIT_PREREQUISITE`].
    Prerequisite,
    /// A shutdown was asked for while waiting for the storage cluster.
    Shutdown,
}

/// What the gateway client trusts: the flags' choice; on first use, the certificate `stored`
/// by an earlier run, if any.
pub fn trust(config: &Config, stored: Option<Fingerprint>) -> Trust {
    match &config.storage.gateway_trust {
        TrustMode::Pinned(pins) => Trust::Pinned(pins.clone()),
        TrustMode::Ca(path) => Trust::Ca(path.clone()),
        TrustMode::Insecure => {
            log::warn!(
                "the storage gateway's TLS certificate is not verified ({INSECURE_FLAG}=true): \
                 whoever is between the scheduler and the gateway sees its password"
            );
            Trust::Insecure
        }
        TrustMode::FirstUse => {
            if let Some(f) = stored {
                log::info!(
                    "the storage gateway's certificate must be {f}, trusted on first use \
                     ({FINGERPRINT_FLAG} accepts another)"
                );
            }
            Trust::FirstUse(Arc::new(FirstUse::new(stored)))
        }
    }
}

/// The client for the configured gateway, `None` when its address is not known yet
/// (experimental mode before the MDM trio exists).
pub fn client_for(
    config: &Config,
    metrics: Arc<Metrics>,
    trust: Trust,
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
    gc.trust = trust;
    Ok(Some(
        GatewayClient::new(gc)?.with_counters(Arc::clone(&metrics.gateway)),
    ))
}

/// Pre-configured mode: checks the storage cluster before the scheduler subscribes. A
/// failure is one error line and [`Halt::Prerequisite`]; with `-storage.wait=true` the
/// checks are retried with backoff, and between two checks `wait(reason, delay)` lets
/// `/health` and the page say what is awaited (it answers false when a shutdown is asked
/// for). Returns the logged-in client.
pub fn check_before_subscribing(
    config: &Config,
    metrics: Arc<Metrics>,
    trust: Trust,
    mut wait: impl FnMut(&str, Duration) -> bool,
) -> Result<Option<GatewayClient>, Halt> {
    let fatal = |message: String| {
        log::error!("{message}");
        Halt::Prerequisite
    };
    let mut client = match client_for(config, metrics, trust) {
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
                if !wait(&reason, delay) {
                    return Err(Halt::Shutdown);
                }
            }
        }
    }
}
