//! `storage-scheduler`: the start-up as a short sequence of named steps, then the dispatcher
//! loop until it stops. The threads and channels are wired in `wiring.rs` (ARCHITECTURE.md
//! draws them).
//!
//! ```text
//! subscription reader --Input::Event--> dispatcher --Outgoing::Call--> call sender --> master
//! agent watcher ------Input::Agents---->     ^
//! REST server --------Input::View/Executor--+
//! signal thread ------Input::Shutdown-------+
//! ```

pub mod dispatcher;
pub mod exchange;
pub mod executor_binary;
pub mod exit;
pub mod flags;
pub mod gateway_work;
pub mod health;
pub mod identity;
pub mod master;
pub mod metrics;
pub mod model;
pub mod node_plan;
pub mod operator;
pub mod persist;
pub mod placement;
pub mod rollout;
mod signals;
mod standin;
pub mod stop;
mod teardown;
mod wiring;

use dispatcher::Exit;
use exit::{EXIT_FAILURE, EXIT_OK};
use flags::Config;
use log::{error, info, warn};
use metrics::Metrics;
use model::Persisted;
use persist::StateStore;
use std::sync::Arc;

pub use master::framework_info;
pub use wiring::executor_path;

/// How a start-up step ends the process early: with this exit code.
type Step<T> = Result<T, i32>;

/// Runs the scheduler until it is stopped; returns the process exit code.
pub fn run(config: Config, start_rest: exchange::StartRest) -> i32 {
    info!("{}", config.summary());
    run_steps(&config, start_rest).unwrap_or_else(|code| code)
}

/// What the flags leave to be said at start: insecure choices, unverified packages, packages
/// without a URL.
fn log_settings_warnings(config: &Config) {
    for w in config.rexray.warnings().iter().chain(&config.warnings) {
        warn!("{w}");
    }
    for flag in &config.unverified_packages {
        warn!("{}", flags::unverified_warning(flag));
    }
    for line in config.packages_without_url() {
        info!("{line}");
    }
}

fn run_steps(config: &Config, start_rest: exchange::StartRest) -> Step<i32> {
    // A helper on an explicitly given store needs no master.
    if let (Some(helper), true) = (&config.store.helper, config.store.explicit) {
        return Ok(persist::setup::run_helper(&config.store, helper));
    }
    log_settings_warnings(config);
    let version = master::check_version(config).map_err(fail)?;
    info!("master runs Mesos {version}");
    let (mut store, mut state, state_warning) = open_state(config)?;
    if config.teardown {
        return Ok(teardown::run(config, state, store));
    }
    persist::setup::guard(config, &master::client_config(config), &mut state).map_err(fail)?;

    let identity = identity::load(config).map_err(fail)?;
    let metrics = Arc::new(Metrics::default());
    let channels = wiring::Channels::new(&state);
    let binary = Arc::new(executor_binary::ExecutorBinary::new(executor_path(config)));
    // Hashed now (the target names its digest) and gzipped beside the rest of the start, not
    // by the dispatcher at its first launch nor before the first announcement (150 ms at
    // 3 MB); one that cannot be read is told again at every launch.
    executor_binary::prepare(&binary);
    let rest = start_rest(exchange::RestConfig {
        port: config.rest_port,
        executor_binary: binary.clone(),
        inputs: channels.inputs.0.clone(),
        metrics: metrics.clone(),
        secrets: Some(channels.secrets.1.clone()),
        state_warning,
        tls: Some(identity.server),
        operator_token: config.operator_token.clone(),
    })
    .map_err(fail)?;
    info!(
        "REST server on {} (status page, state, health, metrics and the executor binary) \
         and {} (all of it, and the executor API), certificate {}",
        config.scheduler_url(),
        config.executor_api_url(),
        identity.fingerprint
    );
    // Before the gateway checks, so that a scheduler waiting for the gateway still stops.
    if let Err(e) = signals::forward(channels.inputs.0.clone()) {
        warn!("cannot install signal handlers: {e}");
    }
    let trust = gateway_work::startup::trust(config, state.gateway_certificate);
    let gateway = gateway_work::startup::check_before_subscribing(
        config,
        metrics.clone(),
        trust,
        |why, delay| standin::serve_views(&channels.inputs.1, &state.model, why, delay),
    )
    .map_err(|halt| match halt {
        gateway_work::startup::Halt::Prerequisite => gateway_work::prereq::EXIT_PREREQUISITE,
        gateway_work::startup::Halt::Shutdown => EXIT_OK,
    })?;
    if let Some(client) = &gateway {
        keep_gateway_certificate(client, &mut state, &mut store)?;
    }

    let _threads = wiring::start_master_threads(config, &state, &channels, &metrics);
    let tls = wiring::TlsFacts {
        fingerprint: identity.fingerprint.to_string(),
        gateway_verified_by_chain: volume_driver_verifies(gateway.as_ref()),
    };
    let mut dispatcher = wiring::dispatcher(config, tls, state, store, &channels, metrics, binary);
    if let Some(client) = gateway {
        let inputs = channels.inputs.0.clone();
        wiring::start_gateway_worker(config, client, &mut dispatcher, inputs);
    }
    let wiring::Channels { inputs, stop, .. } = channels;
    // The dispatcher's own input sender must go, so that it sees when every producer ended.
    drop(inputs.0);
    let exit = dispatcher.run(inputs.1);
    drop(stop);
    drop(rest);
    Ok(exit_code(exit))
}

/// The store the flags (or the master) name, and the state saved in it; a store helper
/// (`-store.dump` and the like) runs here and ends the process.
fn open_state(config: &Config) -> Step<(StateStore, Persisted, Option<String>)> {
    let (settings, state_warning) = persist::setup::resolve(config, &master::client_config(config));
    if let Some(helper) = &settings.helper {
        return Err(persist::setup::run_helper(&settings, helper));
    }
    let mut store = crate::store::open(&settings)
        .map(StateStore::new)
        .map_err(|e| fail(format!("cannot open the state store: {e}")))?;
    // Never reset silently: a lost framework id means a second executor on every agent.
    // Errors name the store (the file, the ensemble and path).
    let state = store.load().map_err(|e| {
        fail(format!(
            "cannot read the saved state: {e}; fix or move the file and restart"
        ))
    })?;
    info!(
        "state from {}: framework {}, {} nodes",
        store.describe(),
        state.model.framework_id.as_deref().unwrap_or("(none yet)"),
        state.model.nodes.len()
    );
    if store.holds_clear_secrets() {
        // An earlier build's store: its executor secrets leave it now, not at the next change.
        store
            .save(&state)
            .map_err(|e| fail(format!("cannot rewrite the saved state: {e}")))?;
        info!(
            "{}: executor secrets rewritten as their digests",
            store.describe()
        );
    }
    Ok((store, state, state_warning))
}

/// Saves the gateway certificate the start-up checks trusted on first use, before anything
/// else relies on it (a scheduler that crashed after trusting it would otherwise trust
/// whatever it sees next).
fn keep_gateway_certificate(
    client: &crate::gateway::client::GatewayClient,
    state: &mut Persisted,
    store: &mut StateStore,
) -> Step<()> {
    let Some(fingerprint) = client.newly_trusted() else {
        return Ok(());
    };
    state.gateway_certificate = Some(fingerprint);
    store
        .save(state)
        .map_err(|e| fail(format!("cannot save the gateway's certificate: {e}")))?;
    info!(
        "{}",
        crate::gateway::trust::first_use_line(fingerprint, client.address())
    );
    Ok(())
}

/// Whether REX-Ray is to verify the gateway's certificate: only when it can repeat the
/// scheduler's check (it can neither pin nor skip the name check). Said once at start.
fn volume_driver_verifies(gateway: Option<&crate::gateway::client::GatewayClient>) -> bool {
    let Some(client) = gateway else {
        return false;
    };
    let chained = client.verified_by_chain();
    if chained {
        info!(
            "REX-Ray verifies the gateway's certificate too (scaleio.insecure: false): \
             the -storage.gateway.cacert CA must be in each node's system CA store"
        );
    } else {
        info!(
            "REX-Ray does not verify the gateway's certificate (scaleio.insecure: true): it can \
             only check a chain to a CA in the node's store that names the gateway's address"
        );
    }
    chained
}

/// Logs why the start-up stops and gives the exit code for it.
fn fail(message: impl std::fmt::Display) -> i32 {
    error!("{message}");
    EXIT_FAILURE
}

/// The process exit code for how the dispatcher ended.
fn exit_code(exit: Exit) -> i32 {
    match exit {
        Exit::Stopped => {
            info!("stopped; the framework and its executors stay registered");
            EXIT_OK
        }
        Exit::Removed(msg) => {
            error!("the master removed this framework ({msg}); exiting");
            EXIT_FAILURE
        }
        Exit::Error(msg) => {
            error!("the master sent ERROR ({msg}); exiting, the framework id is kept");
            EXIT_FAILURE
        }
        Exit::Orphaned => {
            error!("a scheduler thread ended unexpectedly; exiting");
            EXIT_FAILURE
        }
    }
}
