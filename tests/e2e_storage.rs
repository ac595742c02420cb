//! End to end, pre-configured mode on the dev cluster (5 agents): nodes report devices
//! through the executor API (driven by the test, with the executor secrets from the state
//! file), the scheduler's gateway worker makes the storage cluster match, and the nodes'
//! plans say `storage_ready` once every device is attached and the SDC is connected.
//! Counted through the gateway's own API: one SDS per agent, every device exactly once,
//! also across a scheduler SIGKILL mid-reconciliation, injected 500s, delays and token expiry.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::gateway::{self, GatewayConfig, GatewayHandle};
use devcluster::master::{self, MasterHandle};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use storage_framework::gateway::client::{GatewayClient, GatewayConfig as ClientConfig};
use storage_framework::secret::Secret;

const AGENTS: usize = 5;
const PASSWORD: &str = "E2e-Storage-Pa55";
const DEVICES: [&str; 3] = ["/dev/sdb", "/dev/sdc", "/dev/sdd"];

struct Rig {
    dir: PathBuf,
    master: MasterHandle,
    gw: GatewayHandle,
    port: u16,
    store: PathBuf,
    child: Option<Child>,
    experimental: bool,
}

impl Rig {
    fn new(name: &str) -> Rig {
        Rig::with_gateway(name, true)
    }

    /// `preconfigured: false` is `storage-devcluster --empty-gateway`: no system until the
    /// MDM cluster is built.
    fn with_gateway(name: &str, preconfigured: bool) -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-storage-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let master = master::start(master::MasterConfig {
            agents: AGENTS,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            // Real executors on fake hosts. Without package URLs they stop in `packages`
            // and wait, so the device reports this test makes are the only ones.
            host_standins: Some(cluster::host_standins(None)),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("dev cluster: {e}"));
        let mut config = GatewayConfig::new(PASSWORD, cluster::dev_mdms());
        if !preconfigured {
            config.preconfigured = None;
        }
        let gw = gateway::start(config).unwrap_or_else(|e| panic!("gateway: {e}"));
        Rig {
            store: dir.join("state.json"),
            dir,
            master,
            gw,
            port: free_port(),
            child: None,
            experimental: !preconfigured,
        }
    }

    fn start_scheduler(&mut self) {
        let mut args = scheduler_args(
            &self.master.addr().to_string(),
            self.port,
            &self.store,
            PASSWORD,
        );
        args.retain(|a| !a.starts_with("-storage.preconfig.gateway="));
        args.push(format!("-storage.preconfig.gateway={}", self.gw.addr()));
        args.push("-storage.capacity.interval=1".to_string());
        // Nodes this test drives on to `volume-driver` install REX-Ray from its URL.
        args.extend(cluster::shared_volume_driver_flags());
        if self.experimental {
            args.retain(|a| {
                !["primary", "secondary", "tiebreaker"]
                    .iter()
                    .any(|r| a.starts_with(&format!("-storage.preconfig.{r}=")))
            });
            args.push("-experimental=true".to_string());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("scheduler.log"))
            .expect("log");
        self.child = Some(
            Command::new(scheduler_bin())
                .args(args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("scheduler"),
        );
    }

    fn kill_scheduler(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn state(&self) -> Option<Value> {
        let body = ureq::get(&format!("{}/api/state", self.base()))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        serde_json::from_str(&body).ok()
    }

    /// Executor id -> (agent id, secret) once every agent runs its executor.
    fn executors(&self) -> BTreeMap<String, (String, String)> {
        wait_for(
            "an executor on every agent, saved with its secret",
            Duration::from_secs(60),
            || {
                if !self.store.exists() {
                    return None;
                }
                // Polled: the store may exist before its first batch is written.
                let saved = cluster::try_stored_state(&self.store).ok()?;
                let mut out = BTreeMap::new();
                for (agent, node) in &saved.model.nodes {
                    let exec = &node.task.as_ref()?.executor_id;
                    let secret = saved.executor_secrets.get(exec)?;
                    out.insert(exec.clone(), (agent.clone(), secret.clone()));
                }
                (out.len() == AGENTS).then_some(out)
            },
        )
    }

    fn post(&self, executor: &str, secret: &str, what: &str, body: &Value) -> u16 {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        agent
            .post(&format!(
                "{}/api/v1/executors/{executor}/{what}",
                self.base()
            ))
            .header("Authorization", &format!("Bearer {secret}"))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    }

    /// What the executor issue's executors will do: report devices, then `storage-attach`.
    fn report_devices(&self) {
        for (exec, (_, secret)) in self.executors() {
            assert_eq!(
                self.post(&exec, &secret, "devices", &json!({ "devices": DEVICES })),
                200
            );
            assert_eq!(
                self.post(&exec, &secret, "phase", &json!({"phase": "storage-attach"})),
                200
            );
        }
    }

    /// The agents' SDCs, installed with MDM_IP naming this cluster, connect.
    fn connect_sdcs(&self) {
        for a in self.master.agents().expect("agents") {
            self.gw
                .sdc_installed(&a.ip.to_string(), "127.0.0.1,127.0.0.2")
                .unwrap_or_else(|e| panic!("SDC: {e}"));
        }
    }

    fn ready_nodes(&self) -> usize {
        self.state()
            .and_then(|s| {
                Some(
                    s.pointer("/model/nodes")?
                        .as_object()?
                        .values()
                        .filter(|n| n["storage_ready"] == json!(true))
                        .count(),
                )
            })
            .unwrap_or(0)
    }

    fn wait_all_ready(&self, timeout: Duration) {
        wait_for("every node storage_ready", timeout, || {
            (self.ready_nodes() == AGENTS).then_some(())
        });
    }

    /// Through the gateway's own API: SDS name -> (ips, device paths).
    fn gateway_view(&self) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
        let mut c = GatewayClient::new(ClientConfig::new(
            &self.gw.addr().to_string(),
            Secret::new(PASSWORD),
            "2.0",
        ))
        .expect("client");
        let mut out = BTreeMap::new();
        for sds in c.list("/api/types/Sds/instances").expect("SDS list") {
            let id = sds["id"].as_str().unwrap_or_default().to_string();
            let ips = sds["ipList"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|e| e["ip"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let devices = c
                .list(&format!("/api/instances/Sds::{id}/relationships/Device"))
                .expect("devices")
                .iter()
                .filter_map(|d| d["deviceCurrentPathName"].as_str().map(str::to_string))
                .collect();
            let name = sds["name"].as_str().unwrap_or_default().to_string();
            assert!(
                out.insert(name.clone(), (ips, devices)).is_none(),
                "two SDSs named {name}"
            );
        }
        out
    }

    /// One SDS per agent at its address, each device once.
    fn assert_exactly_once(&self) {
        let view = self.gateway_view();
        assert_eq!(view.len(), AGENTS, "{view:?}");
        let agents = self.master.agents().expect("agents");
        for a in &agents {
            let (ips, devices) = view
                .get(a.hostname.as_str())
                .unwrap_or_else(|| panic!("no SDS for {}: {view:?}", a.hostname));
            assert_eq!(ips, &vec![a.ip.to_string()]);
            let mut sorted = devices.clone();
            sorted.sort();
            assert_eq!(sorted, DEVICES.to_vec(), "{}", a.hostname);
        }
        let total = self.gw.snapshot()["devices"].as_array().map(Vec::len);
        assert_eq!(total, Some(AGENTS * DEVICES.len()));
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill_scheduler();
    }
}

fn plan_says_ready(rig: &Rig) -> bool {
    rig.executors().iter().all(|(exec, (_, secret))| {
        let r = ureq::get(&format!("{}/api/v1/executors/{exec}/plan", rig.base()))
            .header("Authorization", &format!("Bearer {secret}"))
            .call();
        r.ok()
            .and_then(|r| r.into_body().read_to_string().ok())
            .and_then(|b| serde_json::from_str::<Value>(&b).ok())
            .is_some_and(|p| p["storage_ready"] == json!(true))
    })
}

#[test]
fn every_agent_gets_one_sds_and_each_device_once() {
    let mut rig = Rig::new("attach");
    rig.start_scheduler();
    // The flags' pool is read from the start, before anything is attached to it.
    wait_for(
        "the empty pool in /api/state",
        Duration::from_secs(30),
        || {
            let s = rig.state()?;
            let p = s.pointer("/model/pools")?.as_array()?.clone();
            (p.len() == 1 && p[0]["capacity_bytes"] == json!(0)).then_some(())
        },
    );
    rig.report_devices();
    // Devices attach, but the nodes wait for their SDCs.
    wait_for("devices attached", Duration::from_secs(60), || {
        let s = rig.state()?;
        let nodes = s.pointer("/model/nodes")?.as_object()?.clone();
        nodes
            .values()
            .all(|n| n["attached"].as_array().map(Vec::len) == Some(DEVICES.len()))
            .then_some(())
    });
    assert_eq!(rig.ready_nodes(), 0, "ready before the SDCs connected");
    assert!(!plan_says_ready(&rig));
    rig.connect_sdcs();
    rig.wait_all_ready(Duration::from_secs(60));
    assert!(plan_says_ready(&rig));
    rig.assert_exactly_once();

    // Capacity of the pool shows in /api/state and /metrics.
    let pools = wait_for(
        "pool capacity in /api/state",
        Duration::from_secs(30),
        || {
            let s = rig.state()?;
            let p = s.pointer("/model/pools")?.as_array()?.clone();
            (p.len() == 1 && p[0]["capacity_bytes"].as_u64() > Some(0)).then_some(p)
        },
    );
    assert_eq!(pools[0]["pool"], json!("default"));
    let metrics = ureq::get(&format!("{}/metrics", rig.base()))
        .call()
        .ok()
        .and_then(|r| r.into_body().read_to_string().ok())
        .unwrap_or_default();
    assert!(
        metrics.contains("storage_pool_capacity_bytes{"),
        "{metrics}"
    );
    assert!(!metrics.contains(PASSWORD));
    let state = rig.state().map(|s| s.to_string()).unwrap_or_default();
    assert!(!state.contains(PASSWORD));

    // A host reboot disconnects its SDC: the node is not storage_ready until it is back.
    let agent = rig.master.agents().expect("agents")[0].clone();
    let ip = agent.ip.to_string();
    rig.gw.set_sdc_connected(&ip, false);
    let node_of = |rig: &Rig| -> Option<Value> {
        rig.state()?
            .pointer("/model/nodes")?
            .as_object()?
            .values()
            .find(|n| n["ip"] == json!(ip))
            .cloned()
    };
    let node = wait_for("the lost SDC noticed", Duration::from_secs(30), || {
        node_of(&rig).filter(|n| n["storage_ready"] == json!(false))
    });
    assert_eq!(node["sdc_connected"], json!(false));
    assert!(
        node["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("not connected")),
        "{node}"
    );
    rig.gw
        .sdc_installed(&ip, "127.0.0.1,127.0.0.2")
        .expect("SDC back");
    rig.wait_all_ready(Duration::from_secs(60));
    assert_eq!(
        node_of(&rig).map(|n| n["last_error"].clone()),
        Some(Value::Null)
    );
    rig.assert_exactly_once();
}

#[test]
fn a_sigkill_mid_reconciliation_then_restart_adds_nothing_twice() {
    let mut rig = Rig::new("restart");
    rig.start_scheduler();
    rig.connect_sdcs();
    // A slow gateway, so that the kill lands in the middle of the work.
    rig.gw.set_delay(Duration::from_millis(150));
    rig.report_devices();
    wait_for(
        "some but not all SDSs created",
        Duration::from_secs(60),
        || {
            let n = rig.gw.snapshot()["sds"].as_array().map(Vec::len)?;
            (1..AGENTS).contains(&n).then_some(())
        },
    );
    rig.kill_scheduler();
    rig.gw.set_delay(Duration::ZERO);
    rig.start_scheduler();
    rig.wait_all_ready(Duration::from_secs(90));
    rig.assert_exactly_once();
}

#[test]
fn injected_500s_delays_and_token_expiry_are_survived() {
    let mut rig = Rig::new("faults");
    rig.start_scheduler();
    rig.connect_sdcs();
    wait_for("the scheduler subscribed", Duration::from_secs(60), || {
        (rig.state()?["subscribed"] == json!(true)).then_some(())
    });
    // More 500s in a row than one request's retries: the worker retries the node later.
    rig.gw.expire_tokens();
    rig.gw.fail_next(12);
    rig.gw.set_delay(Duration::from_millis(30));
    rig.report_devices();
    wait_for("the faults to be used up", Duration::from_secs(30), || {
        let s = rig.gw.snapshot();
        (s["requests"].as_u64()? > 12).then_some(())
    });
    rig.gw.expire_tokens();
    rig.wait_all_ready(Duration::from_secs(120));
    rig.gw.set_delay(Duration::ZERO);
    rig.assert_exactly_once();
}

/// Agent id -> persona, from /api/state.
fn personas(rig: &Rig) -> BTreeMap<String, String> {
    rig.state()
        .and_then(|s| {
            Some(
                s.pointer("/model/nodes")?
                    .as_object()?
                    .iter()
                    .map(|(a, n)| (a.clone(), n["persona"].as_str().unwrap_or("").to_string()))
                    .collect(),
            )
        })
        .unwrap_or_default()
}

#[test]
fn experimental_mode_attaches_once_the_primary_has_built_the_cluster() {
    let mut rig = Rig::with_gateway("experimental", false);
    rig.start_scheduler();
    let executors = rig.executors();
    let personas = personas(&rig);
    let primary = executors
        .iter()
        .find(|(_, (agent, _))| personas.get(agent).map(String::as_str) == Some("primary"))
        .map(|(e, (_, s))| (e.clone(), s.clone()))
        .unwrap_or_else(|| panic!("no primary among {personas:?}"));
    assert_eq!(
        personas.values().filter(|p| p.as_str() != "data").count(),
        3,
        "{personas:?}"
    );
    // The primary runs its cluster-init steps (issue 10's executor); every node reports its
    // devices and waits in storage-attach.
    assert_eq!(
        rig.post(
            &primary.0,
            &primary.1,
            "phase",
            &json!({"phase": "cluster-init"})
        ),
        200
    );
    for (exec, (_, secret)) in &executors {
        assert_eq!(
            rig.post(exec, secret, "devices", &json!({ "devices": DEVICES })),
            200
        );
        if *exec != primary.0 {
            assert_eq!(
                rig.post(exec, secret, "phase", &json!({"phase": "storage-attach"})),
                200
            );
        }
    }
    assert_eq!(
        rig.gw.snapshot()["requests"],
        json!(0),
        "no gateway call before the cluster exists"
    );
    // What the primary's `scli --rename_system` leads to; then it passes cluster-init.
    rig.gw.create_system("scaleio").expect("system");
    assert_eq!(
        rig.post(
            &primary.0,
            &primary.1,
            "phase",
            &json!({"phase": "storage-attach"})
        ),
        200
    );
    rig.connect_sdcs();
    rig.wait_all_ready(Duration::from_secs(90));
    let snap = rig.gw.snapshot();
    assert_eq!(snap["protectionDomains"].as_array().map(Vec::len), Some(1));
    assert_eq!(snap["protectionDomains"][0]["name"], json!("default"));
    assert_eq!(snap["storagePools"].as_array().map(Vec::len), Some(1));
    assert_eq!(snap["storagePools"][0]["name"], json!("default"));
    rig.assert_exactly_once();
}
