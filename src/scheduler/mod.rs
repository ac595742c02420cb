//! `storage-scheduler`: wiring of the threads (see ARCHITECTURE.md).
//!
//! ```text
//! subscription reader --Input::Event--> dispatcher --Outgoing::Call--> call sender --> master
//! agent watcher ------Input::Agents---->     ^
//! REST server --------Input::View/Executor--+
//! signal thread ------Input::Shutdown-------+
//! ```

pub mod agents;
pub mod debug_tally;
pub mod dispatcher;
pub mod durability;
pub mod exchange;
pub mod executors;
pub mod faults;
pub mod flags;
pub mod launch;
pub mod mdm_cluster;
pub mod metrics;
pub mod model;
pub mod node_plan;
pub mod placement;
pub mod sender;
pub mod state_store;
pub mod stop;
pub mod storage;
#[doc(hidden)]
pub mod store_suite;
pub mod subscription;
pub mod volume_driver;

use crate::mesos::client::{ClientConfig, SchedulerClient};
use crate::mesos::scheduler::{call, Call};
use crate::mesos::types::{framework_info, FrameworkID, FrameworkInfo};
use crate::scheduler::state_store::StateStore;
use dispatcher::{Dispatcher, Exit};
use exchange::Input;
use flags::Config;
use log::{error, info, warn};
use metrics::Metrics;
use model::Persisted;
use std::sync::Arc;
use std::time::Duration;

/// How often the agent watcher asks the master for its agents.
const AGENT_POLL: Duration = Duration::from_secs(30);

/// Process exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;

fn client_config(config: &Config) -> ClientConfig {
    ClientConfig {
        encoding: config.encoding,
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(15),
        stream_idle_timeout: None,
        // Real events are kilobytes; a lower cap than RecordIO's default limits what one
        // hostile record can make the scheduler allocate.
        max_event_bytes: 4 * 1024 * 1024,
    }
}

pub fn framework_info(config: &Config) -> FrameworkInfo {
    let f = &config.framework;
    FrameworkInfo {
        user: f.user.as_str().into(),
        name: f.name.as_str().into(),
        failover_timeout: Some(f.failover_timeout.as_secs_f64()),
        checkpoint: Some(true),
        role: Some(f.role.as_str().into()),
        hostname: f.hostname.as_deref().map(Into::into),
        webui_url: Some(format!("{}/ui", scheduler_url(config)).into()),
        capabilities: [
            framework_info::capability::Type::PartitionAware,
            framework_info::capability::Type::TaskKillingState,
        ]
        .into_iter()
        .map(|t| framework_info::Capability { r#type: Some(t) })
        .collect(),
        ..Default::default()
    }
}

/// Base URL of this scheduler's REST server as agents and operators reach it.
pub fn scheduler_url(config: &Config) -> String {
    format!("http://{}:{}", config.rest_address, config.rest_port)
}

/// Refuses masters older than 1.0 (the v1 API's first release). The first master that
/// answers decides; none answering is an error too.
fn check_master_version(config: &Config) -> Result<String, String> {
    let mut errors = Vec::new();
    for m in &config.masters {
        let client = SchedulerClient::new(m, client_config(config)).map_err(|e| e.to_string())?;
        match client.master_version() {
            Ok(v) => {
                return match v.at_least(1, 0) {
                    Ok(true) => Ok(v.version),
                    Ok(false) => Err(format!(
                        "master {m} runs Mesos {}, older than the required 1.0",
                        v.version
                    )),
                    Err(e) => Err(format!("master {m}: {e}")),
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(format!(
        "no master answered GET /version: {}",
        errors.join("; ")
    ))
}

fn load_state(store: &mut StateStore) -> Result<Persisted, String> {
    // Errors name the store (the file, the ensemble and path).
    store.load().map_err(|e| e.to_string())
}

/// Runs the scheduler until it is stopped; returns the process exit code.
pub fn run(config: Config, start_rest: exchange::StartRest) -> i32 {
    info!("{}", config.summary());
    // issue 12: a helper on an explicitly given store needs no master.
    if let (Some(helper), true) = (&config.store.helper, config.store.explicit) {
        return durability::run_helper(&config.store, helper);
    }
    for w in config.rexray.warnings() {
        warn!("{w}");
    }
    let version = match check_master_version(&config) {
        Ok(v) => v,
        Err(e) => {
            error!("{e}");
            return EXIT_FAILURE;
        }
    };
    info!("master runs Mesos {version}");

    let store_settings = durability::resolve(&config, &client_config(&config));
    if let Some(helper) = &store_settings.helper {
        return durability::run_helper(&store_settings, helper);
    }
    let mut store = match crate::store::open(&store_settings) {
        Ok(s) => StateStore::new(s),
        Err(e) => {
            error!("cannot open the state store: {e}");
            return EXIT_FAILURE;
        }
    };
    let mut state = match load_state(&mut store) {
        Ok(s) => s,
        Err(e) => {
            // Never reset silently: a lost framework id means a second executor on every agent.
            error!("cannot read the saved state: {e}; fix or move the file and restart");
            return EXIT_FAILURE;
        }
    };
    info!(
        "state from {}: framework {}, {} nodes",
        store.describe(),
        state.model.framework_id.as_deref().unwrap_or("(none yet)"),
        state.model.nodes.len()
    );

    if config.teardown {
        return teardown(&config, state, store);
    }
    if let Err(e) = durability::guard(&config, &client_config(&config), &mut state) {
        error!("{e}");
        return EXIT_FAILURE;
    }

    let metrics = Arc::new(Metrics::default());
    let (in_tx, in_rx) = crossbeam_channel::unbounded::<Input>();
    let (out_tx, out_rx) = crossbeam_channel::unbounded();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);

    // The secrets known now go first; the dispatcher publishes every later change.
    let (secrets_tx, secrets_rx) = crossbeam_channel::unbounded();
    for (executor_id, secret) in state.executor_secrets() {
        let _ = secrets_tx.send(exchange::SecretUpdate::Known {
            executor_id: executor_id.into_owned(),
            secret: secret.reveal(),
        });
    }
    let rest = match start_rest(exchange::RestConfig {
        port: config.rest_port,
        executor_path: executor_path(&config),
        inputs: in_tx.clone(),
        metrics: metrics.clone(),
        secrets: Some(secrets_rx),
    }) {
        Ok(r) => r,
        Err(e) => {
            error!("{e}");
            return EXIT_FAILURE;
        }
    };
    info!(
        "REST API, status page and executor binary on {}",
        scheduler_url(&config)
    );

    // Before the gateway checks, so that a scheduler waiting for the gateway still stops.
    if let Err(e) = signals::forward(in_tx.clone()) {
        warn!("cannot install signal handlers: {e}");
    }
    // Issue 9: the storage cluster's prerequisites, before subscribing.
    let gateway = match storage::startup::check_before_subscribing(
        &config,
        metrics.clone(),
        &in_rx,
        &state.model,
    ) {
        Ok(g) => g,
        Err(code) => return code,
    };

    let mut threads = Vec::new();
    {
        let reports = sender::Reports {
            to: in_tx.clone(),
            metrics: metrics.clone(),
        };
        threads.push(spawn("call-sender", move || sender::run(out_rx, reports)));
    }
    {
        let sub = subscription::Subscriber {
            masters: config.masters.clone(),
            client_config: client_config(&config),
            framework_info: framework_info(&config),
            framework_id: state.model.framework_id.clone(),
            heartbeat_secs: state.model.heartbeat_secs,
            metrics: metrics.clone(),
            clock: crate::clock::system(),
        };
        let (i, o, s) = (in_tx.clone(), out_tx.clone(), stop_rx.clone());
        threads.push(spawn("subscription", move || sub.run(i, o, s)));
    }
    {
        let (masters, cfg, i, s) = (
            config.masters.clone(),
            client_config(&config),
            in_tx.clone(),
            stop_rx.clone(),
        );
        threads.push(spawn("agent-watcher", move || {
            agents::run(masters, cfg, AGENT_POLL, i, s)
        }));
    }
    let worker_inputs = in_tx.clone();
    drop(in_tx);

    let (settings, ctx) = dispatcher_parts(&config, &state);
    let mut dispatcher = Dispatcher::new(state, store, settings, ctx, out_tx, metrics);
    dispatcher.set_secret_feed(secrets_tx);
    dispatcher.set_install_settings(node_plan::InstallSettings::from_config(&config));
    // Issue 9: the gateway worker, fed by the dispatcher, answering as dispatcher inputs.
    if let Some(client) = gateway {
        let gateway_on_primary = client.address().is_empty();
        let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded();
        let mut settings = storage::worker::WorkerSettings::new(
            config.storage.capacity_interval,
            config.storage.threshold_pct,
        );
        if !config.experimental {
            settings.known_pools = vec![(
                config.storage.protection_domain.clone(),
                config.storage.storage_pool.clone(),
            )];
        }
        let worker = storage::worker::Worker::new(client, settings);
        let to = worker_inputs;
        threads.push(spawn("gateway-worker", move || worker.run(jobs_rx, to)));
        dispatcher.set_storage(
            storage::StorageSide::new(
                jobs_tx,
                &config.storage.protection_domain,
                &config.storage.storage_pool,
            )
            .experimental(config.experimental)
            .gateway_on_primary(gateway_on_primary),
        );
    } else {
        drop(worker_inputs);
    }
    if config.experimental {
        dispatcher.set_mdm_gateway_password(Some(config.storage.password.clone()));
    }
    let exit = dispatcher.run(in_rx);
    drop(stop_tx);
    drop(rest);
    exit_code(exit)
}

/// The dispatcher's placement settings and launch context, from the flags.
fn dispatcher_parts(
    config: &Config,
    state: &Persisted,
) -> (placement::Settings, launch::LaunchContext) {
    let settings = placement::Settings {
        experimental: config.experimental,
        cpu_mdm: config.executor.cpu_mdm,
        cpu_non: config.executor.cpu_non,
        mem_mdm: config.executor.mem_mdm,
        mem_non: config.executor.mem_non,
        cpu_factor: config.executor.cpu_factor,
        mem_factor: config.executor.mem_factor,
    };
    let ctx = launch::LaunchContext {
        framework_id: state.model.framework_id.clone().unwrap_or_default(),
        scheduler_url: scheduler_url(config),
        loglevel: config.loglevel.to_string().to_lowercase(),
    };
    (settings, ctx)
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap_or_else(|e| panic!("cannot start thread {name}: {e}"))
}

/// The executor binary served to agents: `-executor.altpath`, else `storage-executor` beside
/// this binary (the launcher fetches both into one sandbox).
pub fn executor_path(config: &Config) -> std::path::PathBuf {
    if let Some(p) = &config.executor.altpath {
        return p.clone();
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| {
            p.parent()
                .map(|d| d.join(crate::contract::env::EXECUTOR_BINARY))
        })
        .unwrap_or_else(|| crate::contract::env::EXECUTOR_BINARY.into())
}

/// `-teardown`: subscribe with the stored framework id, unregister it (Mesos then kills
/// every executor), forget the id.
fn teardown(config: &Config, mut state: Persisted, mut store: StateStore) -> i32 {
    let Some(id) = state.model.framework_id.clone() else {
        error!(
            "-teardown: no framework id is stored in {}; nothing to tear down",
            store.describe()
        );
        return EXIT_FAILURE;
    };
    let fw = FrameworkID {
        value: id.as_str().into(),
    };
    let subscribe = subscription::subscribe_call(&framework_info(config), Some(&id));
    let mut master = config.masters[0].clone();
    for _ in 0..5 {
        let mut client = match SchedulerClient::new(&master, client_config(config)) {
            Ok(c) => c,
            Err(e) => {
                error!("-teardown: {e}");
                return EXIT_FAILURE;
            }
        };
        match client.subscribe(&subscribe) {
            Ok(_sub) => {
                let c = Call {
                    framework_id: Some(fw.clone()),
                    r#type: Some(call::Type::Teardown),
                    ..Default::default()
                };
                if let Err(e) = client.call(&c) {
                    error!("-teardown: TEARDOWN failed: {e}");
                    return EXIT_FAILURE;
                }
                state.model.framework_id = None;
                state.model.nodes.clear();
                // Rewritten whole: no earlier record of the framework id stays behind.
                if let Err(e) = store.replace(&state) {
                    error!("-teardown: framework {id} torn down, but the state could not be saved: {e}");
                    return EXIT_FAILURE;
                }
                info!("framework {id} torn down; its executors are being killed");
                return EXIT_OK;
            }
            Err(crate::mesos::client::ClientError::Redirect { leader, .. }) => master = leader,
            Err(e) => {
                error!("-teardown: SUBSCRIBE failed: {e}");
                return EXIT_FAILURE;
            }
        }
    }
    error!("-teardown: too many redirects");
    EXIT_FAILURE
}

mod signals {
    use super::exchange::Input;
    use crossbeam_channel::Sender;
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::iterator::Signals;

    /// SIGTERM and SIGINT become `Input::Shutdown` (a second one exits at once).
    pub fn forward(to: Sender<Input>) -> std::io::Result<()> {
        let mut signals = Signals::new([SIGTERM, SIGINT])?;
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let mut seen = false;
                for sig in signals.forever() {
                    if seen {
                        log::warn!("second signal {sig}: exiting now");
                        std::process::exit(super::EXIT_FAILURE);
                    }
                    seen = true;
                    log::info!("signal {sig}: stopping");
                    if to.send(Input::Shutdown).is_err() {
                        std::process::exit(super::EXIT_OK);
                    }
                }
            })?;
        Ok(())
    }
}
