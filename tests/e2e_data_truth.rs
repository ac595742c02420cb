//! End to end, the dev cluster tells the truth about the data. The real scheduler and
//! executors build a storage cluster in experimental mode on four host stand-ins (the MDM
//! trio and a data node, one protection domain); then, by host events alone (services
//! stopped as a person at the host would, a newer SDS package installed over the old one),
//! the dev gateway must show what a real one would, read through the gateway's own API and
//! the control API's event counters: an SDS down is `Disconnected` and degrades its pools; a
//! second SDS of the domain down while a copy is missing is one data-unavailable event; an
//! MDM member down makes the cluster `ClusteredDegraded` and a second one loses quorum; an
//! upgrade stops and starts the SDS (in the host's command log) and its pools rebuild.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use cluster::{free_port, scheduler_args, stage_packages, wait_for, KillOnDrop};
use devcluster::control::{self, ControlHandle};
use devcluster::gateway::GatewayHandle;
use devcluster::host::{self, FakeRoot, HostState, Invocation};
use devcluster::master::MasterHandle;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use storage_framework::gateway::api;
use storage_framework::gateway::client::{GatewayClient, GatewayConfig as ClientConfig};
use storage_framework::secret::Secret;

const AGENTS: usize = 4;
const PASSWORD: &str = "E2e-Data-Truth-Pa55";
/// The gateway looks at the hosts every 100 ms; slack for a machine that builds meanwhile.
const WITHIN: Duration = Duration::from_secs(15);
/// The newer build the upgrade installs (the vendor's 2.0.1.1 file names).
const NEWER: &str = "12000.122";

struct Rig {
    /// First: the scheduler ends before the cluster it runs on.
    _scheduler: KillOnDrop,
    control: ControlHandle,
    master: Arc<MasterHandle>,
    gw: Arc<GatewayHandle>,
    packages: Arc<tiny_http::Server>,
    port: u16,
    dir: PathBuf,
}

impl Rig {
    fn start() -> Rig {
        let dir = devrig::fresh_dir(&format!("e2e-data-truth-{}", std::process::id()));
        let listener = control::bind(0).expect("control API");
        let standins = cluster::host_standins(Some(listener.url()));
        let master = devrig::start_master(devrig::master_config(AGENTS, &dir, standins));
        let gw = devrig::start_gateway(PASSWORD, false);
        let control = devrig::serve_control(listener, &master, gw.clone());
        let (package_flags, packages) = stage_packages(&dir.join("packages"));
        let port = free_port();
        let mut args = scheduler_args(
            &master.addr().to_string(),
            port,
            &dir.join("state.json"),
            PASSWORD,
        );
        args.retain(|a| {
            !["gateway", "primary", "secondary", "tiebreaker"]
                .iter()
                .any(|r| a.starts_with(&format!("-storage.preconfig.{r}=")))
        });
        args.push(format!("-storage.preconfig.gateway={}", gw.addr()));
        args.push("-experimental=true".into());
        args.push("-rexray.username=rexray-vol".into());
        args.push("-rexray.password=Rexray-Vol-Pa55".into());
        args.extend(package_flags);
        Rig {
            _scheduler: devrig::spawn_scheduler(args, devrig::new_log(&dir)),
            control,
            master,
            gw,
            packages,
            port,
            dir,
        }
    }

    /// Every node `running`; returns hostname -> persona.
    fn wait_running(&self) -> Vec<(String, String)> {
        let base = format!("http://127.0.0.1:{}", self.port);
        wait_for("every node running", Duration::from_secs(300), || {
            let state = devrig::api_state(&base)?;
            let nodes = state.pointer("/model/nodes")?.as_object()?.clone();
            if let Some(f) = nodes.values().find(|n| {
                n["phase"] == "failed"
                    && !n["last_error"]
                        .as_str()
                        .is_some_and(|e| e.contains("Executor terminated"))
            }) {
                panic!("{} failed: {}", f["hostname"], f["last_error"]);
            }
            let all = nodes.len() == AGENTS && nodes.values().all(|n| n["phase"] == "running");
            all.then(|| {
                nodes
                    .values()
                    .map(|n| {
                        let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                        (s("hostname"), s("persona"))
                    })
                    .collect()
            })
        })
    }

    fn control(&self, method: &str, path: &str) -> Value {
        devrig::control_json(&self.control, method, path)
    }

    fn events(&self) -> Value {
        self.control("GET", "/control/gateway/events")
    }

    fn service(&self, agent: &str, name: &str, running: bool) {
        let n = agent.trim_start_matches("agent-");
        self.control(
            "POST",
            &format!("/control/agents/{n}/service?name={name}&running={running}"),
        );
    }

    fn client(&self) -> GatewayClient {
        GatewayClient::new(ClientConfig::new(
            &self.gw.addr().to_string(),
            Secret::new(PASSWORD),
            "2.0",
        ))
        .expect("gateway client")
    }

    fn ip_of(&self, agent: &str) -> String {
        let agents = self.master.agents().expect("agents");
        let a = agents
            .iter()
            .find(|a| a.hostname == agent)
            .unwrap_or_else(|| panic!("no {agent}"));
        a.ip.to_string()
    }

    /// `mdmConnectionState` of the SDS at the agent's address, through the gateway's API.
    fn sds_connection(&self, agent: &str) -> Option<String> {
        let ip = self.ip_of(agent);
        let sdss = api::sdss(&mut self.client()).ok()?;
        let sds = sdss.into_iter().find(|s| s.ips().any(|i| i == ip))?;
        sds.mdm_connection_state
    }

    /// Degraded and pending-rebuild KiB over every pool, from `querySelectedStatistics`.
    fn missing_kb(&self) -> Option<(u64, u64)> {
        let mut c = self.client();
        let ids: Vec<String> = api::storage_pools(&mut c)
            .ok()?
            .into_iter()
            .map(|p| p.id)
            .collect();
        let stats = api::pool_statistics(&mut c, &ids).ok()?;
        Some(stats.values().fold((0, 0), |(d, p), s| {
            (
                d + s.degraded_healthy_capacity_in_kb,
                p + s.pending_fwd_rebuild_capacity_in_kb,
            )
        }))
    }

    /// `clusterState` and `goodNodesNum` of the MDM cluster.
    fn mdm_cluster(&self) -> Option<(String, u32)> {
        let systems = api::systems(&mut self.client()).ok()?;
        let m = &systems.first()?.mdm_cluster;
        Some((m.cluster_state.clone()?, m.good_nodes_num?))
    }

    fn agent_dir(&self, agent: &str) -> PathBuf {
        self.dir.join("mesos").join(agent)
    }

    fn host(&self, agent: &str) -> HostState {
        FakeRoot::open(&host::agent_root(&self.agent_dir(agent)))
            .and_then(|r| r.state())
            .unwrap_or_else(|e| panic!("{agent}'s host: {e}"))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        devrig::keep_dir_if_failed(&self.dir);
    }
}

fn count(events: &Value, key: &str) -> u64 {
    events[key].as_u64().unwrap_or(u64::MAX)
}

fn is_stop_of(i: &Invocation, service: &str) -> bool {
    let argv: Vec<&str> = i.argv.iter().map(String::as_str).collect();
    argv == ["systemctl", "stop", service] || argv == ["service", service, "stop"]
}

/// Downloads `url` into `dir` under its file name, as an operator fetching a package would.
fn download(url: &str, dir: &Path) -> PathBuf {
    let name = url.rsplit('/').next().expect("file name");
    let body = ureq::get(url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .into_body()
        .read_to_vec()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(!body.is_empty(), "{url} served nothing");
    std::fs::create_dir_all(dir).expect("download dir");
    let path = dir.join(name);
    std::fs::write(&path, body).expect("package file");
    path
}

#[test]
fn host_events_disconnect_sdss_degrade_pools_and_count_data_and_quorum_events() {
    let rig = Rig::start();
    let nodes = rig.wait_running();
    let of = |persona: &str| -> String {
        nodes
            .iter()
            .find(|(_, p)| p == persona)
            .map(|(h, _)| h.clone())
            .unwrap_or_else(|| panic!("no {persona} in {nodes:?}"))
    };
    let (primary, secondary, tiebreaker, data) =
        (of("primary"), of("secondary"), of("tiebreaker"), of("data"));
    // A first install starts services; nothing stopped one.
    for (host, _) in &nodes {
        let h = rig.host(host);
        assert!(
            !h.history.iter().any(|i| is_stop_of(i, "sds")),
            "{host}: a plain install logged a stop: {:?}",
            h.history
        );
    }
    // Whatever the first rollout did to the SDSs has rebuilt; count from here.
    wait_for("no data missing a copy", WITHIN, || {
        (rig.missing_kb()? == (0, 0)).then_some(())
    });
    rig.control("POST", "/control/gateway/events/reset");
    let e = rig.events();
    let mut keys: Vec<&str> = e
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "data_unavailable",
            "log",
            "max_sds_down_per_domain",
            "quorum_loss",
            "sds_down_now"
        ]
    );
    assert_eq!(
        (count(&e, "data_unavailable"), count(&e, "quorum_loss")),
        (0, 0),
        "{e}"
    );
    assert_eq!(e["sds_down_now"]["default"], 0, "{e}");

    // One SDS's service stopped: disconnected, its pools degraded, no event.
    rig.control("POST", "/control/gateway/rebuild-time?seconds=30");
    rig.service(&data, "sds", false);
    wait_for("the stopped SDS disconnected", WITHIN, || {
        (rig.sds_connection(&data)? == "Disconnected").then_some(())
    });
    let (degraded, pending) = rig.missing_kb().expect("pool statistics");
    assert!(
        degraded > 0 && pending > 0,
        "degraded {degraded}, pending {pending}"
    );
    assert_eq!(rig.sds_connection(&primary).as_deref(), Some("Connected"));
    assert_eq!(count(&rig.events(), "data_unavailable"), 0);

    // A second SDS of the domain down while the first is: data unavailable, once.
    rig.service(&tiebreaker, "sds", false);
    let e = wait_for("a data-unavailable event", WITHIN, || {
        let e = rig.events();
        (count(&e, "data_unavailable") == 1 && e["sds_down_now"]["default"] == 2).then_some(e)
    });
    assert_eq!(e["max_sds_down_per_domain"]["default"], 2, "{e}");
    assert_eq!(count(&rig.events(), "data_unavailable"), 1, "counted once");

    // Both back: connected, and the pools rebuild over the (now short) rebuild time.
    rig.control("POST", "/control/gateway/rebuild-time?seconds=1");
    rig.service(&data, "sds", true);
    rig.service(&tiebreaker, "sds", true);
    wait_for("both SDSs back and rebuilt", WITHIN, || {
        let back = rig.sds_connection(&data)? == "Connected"
            && rig.sds_connection(&tiebreaker)? == "Connected";
        (back && rig.missing_kb()? == (0, 0)).then_some(())
    });
    assert_eq!(count(&rig.events(), "data_unavailable"), 1);

    // MDM members: one down degrades the cluster, a second loses quorum.
    rig.service(&tiebreaker, "mdm", false);
    wait_for("ClusteredDegraded, 2 members", WITHIN, || {
        (rig.mdm_cluster()? == ("ClusteredDegraded".to_string(), 2)).then_some(())
    });
    assert_eq!(count(&rig.events(), "quorum_loss"), 0);
    rig.service(&secondary, "mdm", false);
    wait_for("quorum lost", WITHIN, || {
        (count(&rig.events(), "quorum_loss") == 1).then_some(())
    });
    assert_eq!(rig.mdm_cluster().expect("system").1, 1);
    rig.service(&tiebreaker, "mdm", true);
    rig.service(&secondary, "mdm", true);
    wait_for("ClusteredNormal again", WITHIN, || {
        (rig.mdm_cluster()?.0 == "ClusteredNormal").then_some(())
    });
    assert_eq!(count(&rig.events(), "quorum_loss"), 1);

    // A newer SDS package, served under its vendor's name although nobody staged it, installed
    // over the old one on the data node as `rpm -Uvh` does: the package's scripts stop and
    // start the service, the gateway sees the SDS go and come back, and its pools rebuild.
    rig.control("POST", "/control/gateway/events/reset");
    rig.control("POST", "/control/gateway/rebuild-time?seconds=30");
    let addr = rig.packages.server_addr().to_ip().expect("package server");
    let file = format!("EMC-ScaleIO-sds-2.0-{NEWER}.el7.x86_64.rpm");
    let package = download(&format!("http://{addr}/{file}"), &rig.dir.join("download"));
    let agent_dir = rig.agent_dir(&data);
    let status = Command::new(host::agent_bin(&agent_dir).join("rpm"))
        .arg("-Uvh")
        .arg(&package)
        .env(host::ROOT_ENV, host::agent_root(&agent_dir))
        .env(host::CONTROL_ENV, rig.control.url())
        .stdout(Stdio::null())
        .status()
        .expect("run rpm");
    assert!(status.success(), "rpm -Uvh {file}: {status}");
    let h = rig.host(&data);
    let sds = &h.packages["EMC-ScaleIO-sds"];
    assert_eq!(sds.release.as_deref(), Some(&*format!("{NEWER}.el7")));
    // The scripts' commands come before the install they are part of ends.
    let argv: Vec<Vec<&str>> = h
        .history
        .iter()
        .map(|i| i.argv.iter().map(String::as_str).collect())
        .collect();
    let rpm = argv
        .iter()
        .rposition(|a| a[..] == ["rpm", "-Uvh", &*package.to_string_lossy()])
        .unwrap_or_else(|| panic!("no rpm -Uvh in {argv:?}"));
    assert!(rpm >= 2, "{argv:?}");
    assert_eq!(argv[rpm - 2], ["systemctl", "stop", "sds"], "{argv:?}");
    assert_eq!(argv[rpm - 1], ["systemctl", "start", "sds"], "{argv:?}");
    assert!(h.services["sds"].running);
    let e = wait_for("the upgrade's disconnect and reconnect", WITHIN, || {
        let e = rig.events();
        let log = e["log"].to_string();
        (log.contains("disconnected: its sds process was restarted") && log.contains("reconnected"))
            .then_some(e)
    });
    assert_eq!(e["max_sds_down_per_domain"]["default"], 1, "{e}");
    assert_eq!(count(&e, "data_unavailable"), 0, "{e}");
    let (degraded, _) = rig.missing_kb().expect("pool statistics");
    assert!(degraded > 0, "the upgraded SDS's data rebuilds");
    assert_eq!(rig.sds_connection(&data).as_deref(), Some("Connected"));
}
