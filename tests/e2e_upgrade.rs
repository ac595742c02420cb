//! End to end, a rolling upgrade on the dev cluster: six agents in two protection domains of
//! three (layouts from agent attributes), experimental mode, so that the executors install
//! everything on their host stand-ins. After the first rollout every node is `running` at
//! the first generation; then the scheduler restarts with package URLs of a newer version and
//! every node walks to the next generation, each step granted by the scheduler. The host
//! stand-ins' own records are the judges: every package at the new version on every node,
//! and the vendor's order across nodes (LIA everywhere before any MDM, the MDM secondary and
//! tie-breaker before the primary, SDSs before SDCs, the gateway last), read by watching the
//! hosts' package databases while the upgrade runs.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use cluster::{free_port, scheduler_args, stage_packages, wait_for, KillOnDrop};
use devcluster::control;
use devcluster::host::{self, FakeRoot, HostState};
use devcluster::master::{MasterConfig, MasterHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const AGENTS: usize = 6;
const PASSWORD: &str = "E2e-Upgrade-Pa55";
/// The version the staged packages carry, and the one the upgrade brings.
const OLD: &str = "2.0-10000.2072";
const NEW: &str = "2.0-12000.122";
/// The executors' plan poll: a running node looks at its target once per poll.
const PLAN_WAIT_SECS: u64 = 2;
/// The storage packages' installed names (RHEL 7 stand-ins) and their components.
const PACKAGES: [(&str, &str); 5] = [
    ("EMC-ScaleIO-lia", "lia"),
    ("EMC-ScaleIO-mdm", "mdm"),
    ("EMC-ScaleIO-sds", "sds"),
    ("EMC-ScaleIO-sdc", "sdc"),
    ("EMC-ScaleIO-gateway", "gateway"),
];

struct Rig {
    /// First: the scheduler ends before the cluster it runs on.
    scheduler: Option<KillOnDrop>,
    control: control::ControlHandle,
    master: Arc<MasterHandle>,
    gateway: String,
    _packages: Arc<tiny_http::Server>,
    package_flags: Vec<String>,
    port: u16,
    dir: PathBuf,
    /// Experimental mode (the executors build the MDM cluster), else a pre-configured
    /// storage cluster the nodes join as data nodes.
    experimental: bool,
}

/// Agents 1-3 hold domain `pd1`, agents 4-6 `pd2`, one free disk each.
fn layouts() -> BTreeMap<String, BTreeMap<String, String>> {
    (1..=AGENTS)
        .map(|n| {
            let (pd, sp) = if n <= 3 {
                ("pd1", "sp1")
            } else {
                ("pd2", "sp2")
            };
            let attrs = [
                ("storage-sds-domains".to_string(), pd.to_string()),
                (format!("storage-sds-{pd}"), sp.to_string()),
                (format!("storage-sds-{sp}"), "/dev/xvdb".to_string()),
            ];
            (n.to_string(), attrs.into_iter().collect())
        })
        .collect()
}

impl Rig {
    fn start() -> Rig {
        Rig::start_mode(true)
    }

    fn start_mode(experimental: bool) -> Rig {
        static RIGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = RIGS.fetch_add(1, Ordering::Relaxed);
        let dir = devrig::fresh_dir(&format!("e2e-upgrade-{}-{n}", std::process::id()));
        let listener = control::bind(0).expect("control API");
        let standins = devrig::standins_with_plan_wait(listener.url(), PLAN_WAIT_SECS);
        let master = devrig::start_master(MasterConfig {
            attributes: layouts(),
            ..devrig::master_config(AGENTS, &dir, standins)
        });
        // Experimental: no system until the executors build the MDM cluster.
        let gw = devrig::start_gateway(PASSWORD, !experimental);
        let gateway = gw.addr().to_string();
        let control = devrig::serve_control(listener, &master, gw);
        let (package_flags, packages) = stage_packages(&dir.join("packages"));
        Rig {
            scheduler: None,
            control,
            master,
            gateway,
            _packages: packages,
            package_flags,
            port: free_port(),
            dir,
            experimental,
        }
    }

    /// Starts the scheduler (on the same port and store every time) with the staged flags.
    fn start_scheduler(&mut self) {
        let mut args = scheduler_args(
            &self.master.addr().to_string(),
            self.port,
            &self.dir.join("state.json"),
            PASSWORD,
        );
        if self.experimental {
            args.retain(|a| !a.starts_with("-storage.preconfig."));
            args.push("-experimental=true".into());
        } else {
            args.retain(|a| !a.starts_with("-storage.preconfig.gateway="));
        }
        args.push(format!("-storage.preconfig.gateway={}", self.gateway));
        args.push("-health.interval=1".into());
        args.push("-rexray.username=rexray-vol".into());
        args.push("-rexray.password=Rexray-Vol-Pa55".into());
        args.extend(self.package_flags.iter().cloned());
        let log = devrig::append_log(&self.dir);
        self.scheduler = Some(devrig::spawn_scheduler(args, log));
    }

    /// Package files of the storage components at `NEW` beside the staged ones, and the
    /// flags that hand them out instead (digests of the new files).
    fn stage_new_version(&mut self) {
        let dir = self.dir.join("packages");
        self.package_flags = devrig::storage_packages_at(&self.package_flags, &dir, OLD, NEW);
    }

    fn state(&self) -> Option<Value> {
        devrig::api_state(&format!("http://127.0.0.1:{}", self.port))
    }

    /// Waits until every node is running at the target generation (at least `generation`);
    /// the nodes by host name. A failed phase or step fails the test with its reason.
    fn wait_at(&self, generation: u64, within: Duration) -> BTreeMap<String, Value> {
        wait_for(
            &format!("every node running at generation {generation}"),
            within,
            || {
                let s = self.state()?;
                let target = s.pointer("/model/target/generation")?.as_u64()?;
                let nodes = s.pointer("/model/nodes")?.as_object()?.clone();
                for n in nodes.values() {
                    let failed = n.pointer("/rollout/steps").and_then(|s| {
                        s.as_array()?
                            .iter()
                            .find(|s| s["state"] == "failed")
                            .cloned()
                    });
                    if let Some(step) = failed {
                        panic!("{}: step failed: {step}", n["hostname"]);
                    }
                    if n["phase"] == "failed"
                        && !n["last_error"]
                            .as_str()
                            .is_some_and(|e| e.contains("Executor terminated"))
                    {
                        panic!("{} failed: {}", n["hostname"], n["last_error"]);
                    }
                }
                let there = nodes.len() == AGENTS
                    && target >= generation
                    && nodes
                        .values()
                        .all(|n| n["phase"] == "running" && n["generation"] == target);
                there.then(|| {
                    let by_host = nodes
                        .values()
                        .map(|n| (n["hostname"].to_string(), n.clone()));
                    by_host
                        .map(|(h, n)| (h.trim_matches('"').to_string(), n))
                        .collect()
                })
            },
        )
    }

    /// A control API call that must answer 200 with JSON.
    fn control(&self, method: &str, path: &str) -> Value {
        devrig::control_json(&self.control, method, path)
    }

    fn host_root(&self, n: usize) -> PathBuf {
        host::agent_root(&self.dir.join("mesos").join(format!("agent-{n}")))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        devrig::keep_dir_if_failed(&self.dir);
    }
}

fn host_state(root: &Path) -> Option<HostState> {
    FakeRoot::open(root).ok()?.state().ok()
}

/// The component of each storage package `state` shows at `NEW`.
fn upgraded(state: &HostState) -> Vec<&'static str> {
    PACKAGES
        .iter()
        .filter(|(name, _)| {
            state.packages.get(*name).is_some_and(|p| {
                p.version == "2.0"
                    && p.release
                        .as_deref()
                        .is_some_and(|r| r.starts_with("12000.122"))
            })
        })
        .map(|(_, c)| *c)
        .collect()
}

/// Watches every host's package database until `stop`: for each `(agent, component)`, the
/// number of the look that first saw it at `NEW`. Two upgrades between two looks get the same
/// number, so an order is only ever proven broken, never made up.
fn watch_upgrades(
    roots: Vec<(usize, PathBuf)>,
    stop: Arc<AtomicBool>,
) -> Arc<Mutex<BTreeMap<(usize, &'static str), u64>>> {
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let out = seen.clone();
    std::thread::spawn(move || {
        let mut look = 0u64;
        while !stop.load(Ordering::Relaxed) {
            look += 1;
            for (n, root) in &roots {
                let Some(state) = host_state(root) else {
                    continue;
                };
                let mut seen = seen.lock().unwrap();
                for c in upgraded(&state) {
                    seen.entry((*n, c)).or_insert(look);
                }
            }
            // The pace of the looks, not a synchronisation: the test waits on the scheduler.
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    out
}

#[test]
fn a_new_package_version_reaches_every_node_in_the_vendor_s_order() {
    let mut rig = Rig::start();
    rig.start_scheduler();
    let first = rig.wait_at(1, Duration::from_secs(300));
    let persona: BTreeMap<usize, String> = (1..=AGENTS)
        .map(|n| {
            let node = &first[&format!("agent-{n}")];
            (n, node["persona"].as_str().expect("persona").to_string())
        })
        .collect();
    for n in 1..=AGENTS {
        let state = host_state(&rig.host_root(n)).expect("host state");
        assert_eq!(
            upgraded(&state),
            Vec::<&str>::new(),
            "agent-{n} before the upgrade"
        );
    }

    let roots = (1..=AGENTS).map(|n| (n, rig.host_root(n))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = watch_upgrades(roots, stop.clone());
    rig.control("POST", "/control/gateway/events/reset");
    rig.scheduler = None;
    rig.stage_new_version();
    rig.start_scheduler();
    rig.wait_at(2, Duration::from_secs(300));
    stop.store(true, Ordering::Relaxed);

    // Every node's packages at the new version, each installed by its `rpm -Uvh`.
    for n in 1..=AGENTS {
        let state = host_state(&rig.host_root(n)).expect("host state");
        let want: &[&str] = if persona[&n] == "data" {
            &["sds", "sdc"]
        } else {
            &["lia", "mdm", "sds", "sdc", "gateway"]
        };
        let mut got = upgraded(&state);
        got.retain(|c| want.contains(c));
        assert_eq!(
            got.len(),
            want.len(),
            "agent-{n} ({}): {got:?}",
            persona[&n]
        );
        for (name, c) in PACKAGES.iter().filter(|(_, c)| want.contains(c)) {
            let installed = state.history.iter().any(|i| {
                i.status == 0
                    && i.argv.first().is_some_and(|a| a.ends_with("rpm"))
                    && i.argv
                        .iter()
                        .any(|a| a.contains(&format!("{name}-2.0-12000.122")))
            });
            assert!(installed, "agent-{n}: no `rpm -Uvh` of {c} at {NEW}");
        }
    }

    // No data offline on the way: one SDS of a domain down at a time, the MDM cluster's
    // quorum kept.
    let events = rig.control("GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
    assert_eq!(events["quorum_loss"], 0, "{events}");
    let most = events["max_sds_down_per_domain"]
        .as_object()
        .expect("per domain");
    assert!(most.values().all(|n| n.as_u64() <= Some(1)), "{events}");

    // The vendor's order across nodes.
    let seen = seen.lock().unwrap().clone();
    let at = |c: &str| -> Vec<(usize, u64)> {
        seen.iter()
            .filter(|((_, k), _)| *k == c)
            .map(|((n, _), look)| (*n, *look))
            .collect()
    };
    let last = |c: &str| at(c).iter().map(|(_, l)| *l).max().expect(c);
    let first_of = |c: &str| at(c).iter().map(|(_, l)| *l).min().expect(c);
    let of = |c: &str, p: &str| {
        let n = persona
            .iter()
            .find(|(_, q)| *q == p)
            .map(|(n, _)| *n)
            .expect(p);
        seen[&(n, c)]
    };
    assert!(
        last("lia") <= first_of("mdm"),
        "LIA everywhere before any MDM: {seen:?}"
    );
    assert!(of("mdm", "secondary") <= of("mdm", "primary"), "{seen:?}");
    assert!(of("mdm", "tiebreaker") <= of("mdm", "primary"), "{seen:?}");
    assert!(last("sds") <= first_of("sdc"), "SDSs before SDCs: {seen:?}");
    for c in ["lia", "mdm", "sds", "sdc"] {
        assert!(
            last(c) <= first_of("gateway"),
            "the gateway last ({c}): {seen:?}"
        );
    }
}

impl Rig {
    fn plan(&self) -> Option<Value> {
        devrig::get_json(&format!("http://127.0.0.1:{}/api/plan", self.port))
    }

    /// The reason a waiting step of `host` shows on `/api/plan`, once it contains `part`.
    fn waits_saying(&self, host: &str, part: &str) -> String {
        wait_for(
            &format!("{host} waiting with a reason naming {part:?}"),
            Duration::from_secs(120),
            || {
                let plan = self.plan()?;
                let node = plan["nodes"]
                    .as_array()?
                    .iter()
                    .find(|n| n["hostname"] == host)?
                    .clone();
                node["steps"].as_array()?.iter().find_map(|s| {
                    let why = s["reason"].as_str()?;
                    (s["state"] == "waiting" && why.contains(part)).then(|| why.to_string())
                })
            },
        )
    }
}

/// Mid-upgrade, an SDS of the second domain drops off the MDM on its own: the other SDSs of
/// that domain wait and say why, none of them is upgraded while it is down or while the pool
/// rebuilds after it is back, and the upgrade then finishes with no data made unavailable.
#[test]
fn an_sds_that_drops_off_mid_upgrade_holds_its_domain_until_the_pool_has_rebuilt() {
    let mut rig = Rig::start();
    rig.start_scheduler();
    let first = rig.wait_at(1, Duration::from_secs(300));
    // A data node of pd2 (agents 4-6) goes down on its own; another of pd2 is watched.
    let pd2: Vec<usize> = (4..=AGENTS).collect();
    let (down, watched) = (pd2[1], pd2[2]);
    assert!(first.contains_key(&format!("agent-{down}")));
    rig.control("POST", "/control/gateway/rebuild-time?seconds=3");
    rig.control("POST", "/control/gateway/events/reset");
    rig.scheduler = None;
    rig.stage_new_version();
    rig.start_scheduler();
    wait_for("the upgrade under way", Duration::from_secs(120), || {
        let plan = rig.plan()?;
        (plan["kind"] == "upgrade" && plan["counts"]["done"].as_u64()? > 0).then_some(())
    });
    rig.control(
        "POST",
        &format!("/control/gateway/sds?agent={down}&connected=false"),
    );
    let why = rig.waits_saying(&format!("agent-{watched}"), "disconnected");
    assert!(why.contains(&format!("agent-{down}")), "{why}");
    let sds_at_new =
        |n: usize| host_state(&rig.host_root(n)).is_some_and(|s| upgraded(&s).contains(&"sds"));
    assert!(
        pd2.iter().all(|n| !sds_at_new(*n)),
        "an SDS of pd2 was upgraded while agent-{down}'s was down"
    );
    rig.control(
        "POST",
        &format!("/control/gateway/sds?agent={down}&connected=true"),
    );
    rig.wait_at(2, Duration::from_secs(300));
    let events = rig.control("GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
    assert_eq!(events["quorum_loss"], 0, "{events}");
    assert!(
        pd2.iter().all(|n| sds_at_new(*n)),
        "pd2 upgraded at the end"
    );
}

/// The same upgrade against a pre-configured storage cluster: every node a data node of one
/// of the two domains; each ends with its SDS and SDC at the new version, SDSs first, one SDS
/// of a domain at a time, no data made unavailable.
#[test]
fn a_new_package_version_reaches_every_data_node_of_a_preconfigured_cluster() {
    let mut rig = Rig::start_mode(false);
    rig.start_scheduler();
    rig.wait_at(1, Duration::from_secs(300));
    let roots = (1..=AGENTS).map(|n| (n, rig.host_root(n))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = watch_upgrades(roots, stop.clone());
    rig.control("POST", "/control/gateway/events/reset");
    rig.scheduler = None;
    rig.stage_new_version();
    rig.start_scheduler();
    rig.wait_at(2, Duration::from_secs(300));
    stop.store(true, Ordering::Relaxed);
    for n in 1..=AGENTS {
        let state = host_state(&rig.host_root(n)).expect("host state");
        assert_eq!(upgraded(&state), ["sds", "sdc"], "agent-{n}");
    }
    let events = rig.control("GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
    let most = events["max_sds_down_per_domain"]
        .as_object()
        .expect("per domain");
    assert!(most.values().all(|n| n.as_u64() <= Some(1)), "{events}");
    let seen = seen.lock().unwrap().clone();
    let looks = |c: &'static str| -> Vec<u64> {
        seen.iter()
            .filter(|((_, k), _)| *k == c)
            .map(|(_, l)| *l)
            .collect()
    };
    let last_sds = looks("sds").into_iter().max().expect("sds upgraded");
    let first_sdc = looks("sdc").into_iter().min().expect("sdc upgraded");
    assert!(last_sds <= first_sdc, "SDSs before SDCs: {seen:?}");
}
