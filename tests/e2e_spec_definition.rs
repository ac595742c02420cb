//! End to end, the customer's definition as deployment-spec.md writes it: the scheduler gets
//! the spec's flags only (section 2.2; no package URL flag at all) on the dev cluster in
//! pre-configured mode, with an Ubuntu 14.04 host and RHEL 7 hosts. The spec's prerequisites
//! allow the storage software to be installed already at 2.0.1-2072: on such hosts (the
//! control API's `hosts/preinstall`, REX-Ray installed too) every node reaches `running`
//! without downloading anything. On fresh hosts every node stops at `packages` with the
//! reason naming the flag that would give it the missing package, and its task keeps running
//! (a redeployed scheduler with the flag lets it go on).

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use cluster::{free_port, wait_for, KillOnDrop};
use devcluster::control;
use devcluster::host::HostProfile;
use devcluster::master::{MasterConfig, MasterHandle};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const AGENTS: usize = 3;
const PASSWORD: &str = "E2e-Spec-Def-Pa55";
/// The version the vendor's package files of release 2.0.1-2072 carry.
const PACKAGE_VERSION: &str = "2.0-10000.2072";
const WITHIN: Duration = Duration::from_secs(120);

struct Rig {
    /// First: the scheduler ends before the cluster it runs on.
    _scheduler: KillOnDrop,
    control: control::ControlHandle,
    _master: Arc<MasterHandle>,
    base: String,
    dir: PathBuf,
}

impl Rig {
    /// The dev cluster (agent 1 Ubuntu 14.04, the others RHEL 7), its hosts preinstalled at
    /// [`PACKAGE_VERSION`] when `preinstalled`, and the scheduler with the spec's flags.
    fn start(name: &str, preinstalled: bool) -> Rig {
        let dir = devrig::fresh_dir(&format!("e2e-spec-{name}-{}", std::process::id()));
        let listener = control::bind(0).expect("control API");
        let mut standins = cluster::host_standins(Some(listener.url()));
        standins.per_agent.insert(1, HostProfile::Ubuntu1404);
        let master = devrig::start_master(MasterConfig {
            status_update_retry: Duration::from_secs(1),
            // The fresh Ubuntu host reboots into the SDC's kernel: a short ping timeout
            // keeps the outage (one ping past it) short.
            agent_removal_timeout: Duration::from_secs(2),
            ..devrig::master_config(AGENTS, &dir, standins)
        });
        let gateway = devrig::start_gateway(PASSWORD, true);
        let gateway_addr = gateway.addr().to_string();
        let control = devrig::serve_control(listener, &master, gateway);
        if preinstalled {
            let path = format!(
                "/control/hosts/preinstall?version={PACKAGE_VERSION}&mdm=127.0.0.1,127.0.0.2&rexray=0.11.4-1"
            );
            let answer = ureq::post(&format!("{}{path}", control.url()))
                .send_empty()
                .and_then(|r| r.into_body().read_to_string())
                .unwrap_or_else(|e| panic!("POST {path}: {e}"));
            assert!(answer.contains("[1,2,3]"), "{answer}");
        }
        let port = free_port();
        let args = devrig::preconfig_args(&master, port, &dir, PASSWORD, &gateway_addr);
        assert!(
            !args.iter().any(|a| a.starts_with("-storage.ubuntu14.")
                || a.starts_with("-storage.rhel7.")
                || a.starts_with("-rexray.")),
            "the spec's flags only: {args:?}"
        );
        Rig {
            _scheduler: devrig::spawn_scheduler(args, devrig::new_log(&dir)),
            control,
            _master: master,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// `/api/state`'s nodes, once it answers.
    fn nodes(&self) -> Option<Vec<Value>> {
        let state = devrig::api_state(&self.base)?;
        Some(
            state["model"]["nodes"]
                .as_object()?
                .values()
                .cloned()
                .collect(),
        )
    }

    /// Waits until every agent has a node for which `done` holds.
    fn wait_every_node(&self, what: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut last = Vec::new();
        let seen = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(what, WITHIN, || {
                let nodes = self.nodes()?;
                last = nodes.clone();
                (nodes.len() == AGENTS && nodes.iter().all(&done)).then_some(nodes)
            })
        }));
        seen.unwrap_or_else(|_| {
            let shown: Vec<String> = last
                .iter()
                .map(|n| format!("{} {} {}", n["hostname"], n["phase"], n["last_error"]))
                .collect();
            panic!("{what}: nodes {shown:#?}; log in {}", self.dir.display())
        })
    }

    /// Agent `n`'s host stand-in state (packages, services, command history).
    fn host(&self, n: usize) -> Value {
        let url = format!("{}/control/agents/{n}/host", self.control.url());
        let body = ureq::get(&url)
            .call()
            .and_then(|r| r.into_body().read_to_string())
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{url}: {e}: {body}"))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        devrig::keep_dir_if_failed(&self.dir);
    }
}

/// The flag a node of `host` names for its first missing package (a data node: the SDS).
fn flag_for(host: &str) -> &'static str {
    if host == "agent-1" {
        "-storage.ubuntu14.sds"
    } else {
        "-storage.rhel7.sds"
    }
}

#[test]
fn the_spec_definition_on_preinstalled_hosts_reaches_running() {
    let rig = Rig::start("preinstalled", true);
    let nodes = rig.wait_every_node("every node running", |n| n["phase"] == "running");
    for n in &nodes {
        assert!(n["last_error"].is_null(), "{n}");
    }
    // Nothing was installed from a file: the packages were there.
    for agent in 1..=AGENTS {
        let host = rig.host(agent);
        let installs: Vec<String> = host["history"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["argv"].to_string())
            .filter(|a| a.contains("\"-i\"") || a.contains("\"-Uvh\""))
            .collect();
        assert!(installs.is_empty(), "agent {agent}: {installs:?}");
    }
    // Start-up says which packages have no URL, one line per platform.
    let log = rig.log();
    for key in ["ubuntu14", "rhel7"] {
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("packages for {key}: no URL")))
            .collect();
        assert_eq!(lines.len(), 1, "{key}: {log}");
        assert!(
            lines[0].contains("sds") && lines[0].contains("rexray"),
            "{}",
            lines[0]
        );
    }
}

#[test]
fn the_spec_definition_on_fresh_hosts_fails_every_node_naming_the_flag() {
    let rig = Rig::start("fresh", false);
    let nodes = rig.wait_every_node("every node failed naming its flag", |n| {
        let host = n["hostname"].as_str().unwrap_or_default();
        n["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(flag_for(host)))
    });
    for n in &nodes {
        assert_eq!(n["phase"], "packages", "{n}");
        let e = n["last_error"].as_str().unwrap_or_default();
        assert!(
            e.contains("[configuration]") && e.contains("not installed"),
            "{e}"
        );
    }
}
