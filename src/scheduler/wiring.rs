//! The threads of a running scheduler and the channels between them (ARCHITECTURE.md draws
//! them): each function starts one part and hands it the channel ends it owns.

use crate::contract::env::EXECUTOR_BINARY;
use crate::scheduler::dispatcher::Dispatcher;
use crate::scheduler::exchange::{Input, SecretUpdate};
use crate::scheduler::executor_binary::ExecutorBinary;
use crate::scheduler::flags::Config;
use crate::scheduler::gateway_work;
use crate::scheduler::master::{self, agent_watcher, sender, subscription};
use crate::scheduler::metrics::Metrics;
use crate::scheduler::model::Persisted;
use crate::scheduler::node_plan::InstallSettings;
use crate::scheduler::placement::{self, launch};
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the agent watcher asks the master for its agents.
const AGENT_POLL: Duration = Duration::from_secs(30);

/// Every channel of the scheduler, made before any thread starts.
pub struct Channels {
    pub inputs: (Sender<Input>, Receiver<Input>),
    pub calls: (Sender<sender::Outgoing>, Receiver<sender::Outgoing>),
    /// Dropped to tell the master-facing threads to stop.
    pub stop: (Sender<()>, Receiver<()>),
    pub secrets: (Sender<SecretUpdate>, Receiver<SecretUpdate>),
    /// The dispatcher took a batch of inputs: paces the subscription reader.
    pub taken: (Sender<()>, Receiver<()>),
}

impl Channels {
    /// The channels, with the executor secrets known now already queued for the REST side
    /// (the dispatcher publishes every later change).
    pub fn new(state: &Persisted) -> Channels {
        let secrets = crossbeam_channel::unbounded();
        for (executor_id, digest) in state.executor_secrets() {
            let _ = secrets.0.send(SecretUpdate::Known {
                executor_id: executor_id.into_owned(),
                digest: *digest,
            });
        }
        Channels {
            inputs: crossbeam_channel::unbounded(),
            calls: crossbeam_channel::unbounded(),
            stop: crossbeam_channel::bounded(0),
            secrets,
            taken: crossbeam_channel::bounded(1),
        }
    }
}

/// The call sender, the subscription reader and the agent watcher.
pub fn start_master_threads(
    config: &Config,
    state: &Persisted,
    channels: &Channels,
    metrics: &Arc<Metrics>,
) -> Vec<JoinHandle<()>> {
    let mut threads = Vec::new();
    let reports = sender::Reports {
        to: channels.inputs.0.clone(),
        metrics: metrics.clone(),
    };
    let calls = channels.calls.1.clone();
    threads.push(spawn("call-sender", move || sender::run(calls, reports)));

    let sub = subscription::Subscriber {
        masters: config.masters.clone(),
        client_config: master::client_config(config),
        framework_info: master::framework_info(config),
        framework_id: state.model.framework_id.clone(),
        heartbeat_secs: state.model.heartbeat_secs,
        metrics: metrics.clone(),
        clock: crate::clock::system(),
        taken: channels.taken.1.clone(),
    };
    let (i, o, s) = (
        channels.inputs.0.clone(),
        channels.calls.0.clone(),
        channels.stop.1.clone(),
    );
    threads.push(spawn("subscription", move || sub.run(i, o, s)));

    let (masters, cfg, i, s) = (
        config.masters.clone(),
        master::client_config(config),
        channels.inputs.0.clone(),
        channels.stop.1.clone(),
    );
    threads.push(spawn("agent-watcher", move || {
        agent_watcher::run(masters, cfg, AGENT_POLL, i, s)
    }));
    threads
}

/// What start-up established about TLS, which launches and plans carry on.
pub struct TlsFacts {
    /// The scheduler's certificate, as executors pin it.
    pub fingerprint: String,
    /// The gateway's certificate was checked by a chain and a name, which REX-Ray can repeat.
    pub gateway_verified_by_chain: bool,
}

/// The dispatcher, owner of the model, with the settings the flags give it.
pub fn dispatcher(
    config: &Config,
    tls: TlsFacts,
    state: Persisted,
    store: crate::scheduler::persist::StateStore,
    channels: &Channels,
    metrics: Arc<Metrics>,
    binary: Arc<ExecutorBinary>,
) -> Dispatcher {
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
        scheduler_url: config.scheduler_url(),
        api_url: config.executor_api_url(),
        fingerprint: tls.fingerprint,
        loglevel: config.loglevel.to_string().to_lowercase(),
        executor_sha256: None,
        executor_gzipped: false,
    };
    let mut dispatcher = Dispatcher::new(
        state,
        store,
        settings,
        ctx,
        channels.calls.0.clone(),
        metrics,
    );
    dispatcher.set_secret_feed(channels.secrets.0.clone());
    dispatcher.set_taken_feed(channels.taken.0.clone());
    dispatcher.set_executor_binary(binary.clone());
    let mut install = InstallSettings::from_config(config);
    install.plan.volume_driver.verify_gateway = tls.gateway_verified_by_chain;
    declare_target(&mut dispatcher, &install, &binary);
    dispatcher.set_install_settings(install);
    dispatcher.set_gate_settings(crate::scheduler::health::gate::GateSettings {
        max_disrupted_per_domain: config.max_disrupted_per_domain,
        default_protection_domain: config.storage.protection_domain.clone(),
        default_pool: config.storage.storage_pool.clone(),
    });
    dispatcher.set_max_failures(config.max_failures);
    dispatcher.set_health_settings(crate::scheduler::health::HealthSettings {
        capacity_warn_pct: config.health.capacity_warn_pct,
        stale: config.health.stale,
    });
    if config.experimental {
        dispatcher.set_mdm_gateway_password(Some(config.storage.password.clone()));
    }
    dispatcher
}

/// The gateway worker, fed by the dispatcher and answering as dispatcher inputs.
pub fn start_gateway_worker(
    config: &Config,
    client: crate::gateway::client::GatewayClient,
    dispatcher: &mut Dispatcher,
    inputs: Sender<Input>,
) -> JoinHandle<()> {
    let gateway_on_primary = client.address().is_empty();
    let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded();
    let mut settings = gateway_work::worker::WorkerSettings::new(
        config.health.interval,
        config.health.capacity_warn_pct,
    );
    if !config.experimental {
        settings.known_pools = vec![(
            config.storage.protection_domain.clone(),
            config.storage.storage_pool.clone(),
        )];
    }
    let worker = gateway_work::worker::Worker::new(client, settings);
    dispatcher.set_storage(
        gateway_work::StorageSide::new(
            jobs_tx,
            &config.storage.protection_domain,
            &config.storage.storage_pool,
        )
        .experimental(config.experimental)
        .reboot_after_devices(config.rexray.isolator_binary.is_some() && !config.debug)
        .gateway_on_primary(gateway_on_primary),
    );
    spawn("gateway-worker", move || {
        worker.run(jobs_rx, |r| inputs.send(Input::Storage(r)).is_ok())
    })
}

/// The executor binary served to agents: `-executor.altpath`, else `storage-executor` beside
/// this binary (the launcher fetches both into one sandbox).
pub fn executor_path(config: &Config) -> std::path::PathBuf {
    if let Some(p) = &config.executor.altpath {
        return p.clone();
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(EXECUTOR_BINARY)))
        .unwrap_or_else(|| EXECUTOR_BINARY.into())
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap_or_else(|e| panic!("cannot start thread {name}: {e}"))
}

/// The target this start declares: the plans' install settings and the executor binary.
fn declare_target(dispatcher: &mut Dispatcher, install: &InstallSettings, binary: &ExecutorBinary) {
    let packages = serde_json::to_string(&install.plan.packages).unwrap_or_default();
    let settings = serde_json::to_string(&install.plan).unwrap_or_default();
    let executor = binary.sha256().unwrap_or_default();
    dispatcher.declare_target(&crate::scheduler::rollout::target::Declared {
        packages: &packages,
        settings: &settings,
        executor_sha256: &executor,
    });
}
