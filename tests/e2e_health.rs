//! End to end, storage health on the dev cluster: the real scheduler and executors (host
//! stand-ins, the dev gateway, pre-configured mode) walk four nodes to `running`; then each
//! fault the control API can make is injected in turn, and every surface an operator reads
//! must show it, naming the node (or pool) and the reason: `/api/health`, `/api/state`, the
//! status page as headless Chromium renders it, and `/metrics` as a real Prometheus parser
//! (the `prometheus_client` Python package) reads it. Clearing the fault clears all four. No
//! fault may end or start an executor (the master's launch record, the nodes' task ids).
//!
//! Needs Chromium and Debian's `python3-prometheus-client` (`scripts/test.sh` installs both);
//! `CHROMIUM=` and `PYTHON=` pick other binaries.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use devrig::{get, json, until};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AGENTS: usize = 4;
const PASSWORD: &str = "E2e-Health-Pa55";
/// `-health.interval`: the gateway is read every second.
const POLL: Duration = Duration::from_secs(1);
/// `-health.stale`, a few polls past the interval, so that only a real outage reads as stale.
const STALE: Duration = Duration::from_secs(6);
/// A fault the gateway shows is read by the next poll; a few polls of slack for a machine
/// that builds while the test runs.
const GATEWAY_WITHIN: Duration = Duration::from_secs(6);
/// The executors' plan poll (`STORAGE_EXECUTOR_PLAN_WAIT`): a running node checks its host
/// once per poll.
const PLAN_WAIT_SECS: u64 = 2;
/// A host fault is found at the executor's next check of its own host, a few plan polls.
const HOST_WITHIN: Duration = Duration::from_secs(4 * PLAN_WAIT_SECS + 4);
/// What one view shows, the other surfaces show too: they read the same model.
const SURFACES_WITHIN: Duration = Duration::from_secs(10);
/// The rebuild the dev gateway runs, short enough to watch it end by itself.
const REBUILD_SECS: u64 = 8;

/// One fault: how it is made and undone, and what every surface must then say.
struct Fault {
    name: &'static str,
    inject: String,
    /// `None`: the fault ends by itself.
    clear: Option<String>,
    within: Duration,
    /// The node (`agent-N`) the fault is on; `None`: the cluster's (banner, cluster reasons).
    host: Option<String>,
    /// Words one reason must hold, the node's or pool's name among them where it has one.
    words: Vec<String>,
    /// `storage_node_unhealthy{reason}` of a node fault.
    code: &'static str,
    /// Samples that must read so while the fault lasts.
    samples: Vec<Want>,
}

/// A sample of `/metrics` by name and labels, and what its value must be.
struct Want {
    name: &'static str,
    labels: Vec<(&'static str, String)>,
    is: Is,
}

#[derive(Clone, Copy, Debug)]
enum Is {
    Eq(f64),
    Above(f64),
    Below(f64),
}

fn want(name: &'static str, labels: &[(&'static str, &str)], is: Is) -> Want {
    Want {
        name,
        labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        is,
    }
}

/// The dev cluster, its gateway and control API, and the scheduler under test.
type Rig = devrig::PreconfigRig;

impl Rig {
    fn start() -> Rig {
        let flags = vec![
            format!("-health.interval={}", POLL.as_secs()),
            format!("-health.stale={}", STALE.as_secs()),
            // What a careful operator configures, so that a clean cluster shows no warning.
            "-rexray.username=rexray-vol".into(),
            "-rexray.password=Rexray-Vol-Pa55".into(),
        ];
        Rig::launch("e2e-health", AGENTS, PASSWORD, PLAN_WAIT_SECS, flags)
    }

    /// A control API call that must answer 200.
    fn control(&self, path: &str) -> Value {
        devrig::control_json(&self.control, "POST", path)
    }

    /// The master's launch record, as the control API serves it.
    fn launches(&self) -> Vec<Value> {
        let url = format!("{}/control/master/launches", self.control.url());
        let body = ureq::get(&url)
            .call()
            .and_then(|r| r.into_body().read_to_string())
            .unwrap_or_else(|e| panic!("launch record: {e}"));
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("launch record: {e}: {body}"))
    }
}

/// The node of `/api/state` on `host`.
fn node_in_state<'a>(state: &'a Value, host: &str) -> Option<&'a Value> {
    state["model"]["nodes"]
        .as_object()?
        .values()
        .find(|n| n["hostname"] == host)
}

/// Headless Chromium's DOM of the status page (`--dump-dom`, the page as a browser built it).
fn page_dom(base: &str) -> String {
    let browser = std::env::var_os("CHROMIUM").unwrap_or_else(|| "chromium".into());
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let profile = tmp.join(format!("chromium-health-{}", std::process::id()));
    // A file, not a pipe: the page may outgrow a pipe's buffer before Chromium exits.
    let out = tmp.join(format!("health-page-{}.html", std::process::id()));
    let mut child = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .args(["--disable-sync", "--disable-dev-shm-usage", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("{base}/ui"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("page file"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {browser:?} (CHROMIUM= picks another): {e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for chromium") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed: {status}");
    std::fs::read_to_string(&out).expect("page")
}

/// The samples of `/metrics` as `prometheus_client`'s text parser reads them: name, labels,
/// value. A text the parser refuses fails the test.
fn metrics_parsed(base: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    const SCRIPT: &str = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = [[s.name, s.labels, s.value] for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]\n\
        print(json.dumps(out))\n";
    let text = get(base, "/metrics").unwrap_or_else(|e| panic!("{e}"));
    // Debian's package installs into the system Python, which a pyenv on PATH hides.
    let python = std::env::var("PYTHON").unwrap_or_else(|_| {
        let system = "/usr/bin/python3";
        (if Path::new(system).exists() {
            system
        } else {
            "python3"
        })
        .to_string()
    });
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {python}: {e}"));
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes())
        .expect("metrics to the parser");
    let out = child.wait_with_output().expect("parser");
    assert!(
        out.status.success(),
        "prometheus_client refused /metrics (apt-get install python3-prometheus-client): {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the parser's JSON")
}

type Samples = Vec<(String, BTreeMap<String, String>, f64)>;

/// The samples named `name` whose labels include `labels`.
fn sample_values(samples: &Samples, name: &str, labels: &[(&str, String)]) -> Vec<f64> {
    samples
        .iter()
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k) == Some(v)))
        .map(|(_, _, v)| *v)
        .collect()
}

fn check_want(samples: &Samples, w: &Want) -> Result<(), String> {
    let values = sample_values(samples, w.name, &w.labels);
    let ok = match (values.as_slice(), w.is) {
        ([v], Is::Eq(x)) => *v == x,
        ([v], Is::Above(x)) => *v > x,
        ([v], Is::Below(x)) => *v < x,
        _ => false,
    };
    ok.then_some(())
        .ok_or_else(|| format!("{}{:?} is {values:?}, wanted {:?}", w.name, w.labels, w.is))
}

/// Some reason in `reasons` holds every word.
fn names(reasons: &Value, words: &[String]) -> bool {
    reasons
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|r| words.iter().all(|w| r.contains(w.as_str())))
}

fn health_shows(f: &Fault, h: &Value) -> Result<(), String> {
    let ok = match &f.host {
        Some(host) => h["nodes"].as_array().into_iter().flatten().any(|n| {
            n["hostname"] == host.as_str()
                && n["agent_id"].is_string()
                && n["phase"] == "running"
                && n["state"] == "degraded"
                && names(&n["reasons"], &f.words)
        }),
        None => h["state"] == "degraded" && names(&h["reasons"], &f.words),
    };
    ok.then_some(()).ok_or_else(|| format!("/api/health: {h}"))
}

fn state_shows(f: &Fault, s: &Value) -> Result<(), String> {
    let health = match &f.host {
        Some(host) => &node_in_state(s, host).ok_or("no such node")?["health"],
        None => &s["model"]["health"],
    };
    (health["state"] == "degraded" && names(&health["reasons"], &f.words))
        .then_some(())
        .ok_or_else(|| format!("/api/state health: {health}"))
}

/// The HTML of the table row of `host`.
fn row_of<'a>(dom: &'a str, host: &str) -> Option<&'a str> {
    dom.split("<tr")
        .find(|r| r.contains(&format!("class=\"host\">{host}<")))
        .map(|r| r.split("</tr>").next().unwrap_or(r))
}

/// The banner's element and its content (up to its matching end tag).
fn banner(dom: &str) -> Option<&str> {
    let at = dom.find("id=\"health-banner\"")?;
    let start = dom[..at].rfind("<div")?;
    let (mut depth, mut i) = (0usize, start);
    loop {
        let close = i + dom[i..].find("</div")?;
        match dom[i..].find("<div").map(|o| i + o) {
            Some(open) if open < close => {
                depth += 1;
                i = open + 4;
            }
            _ => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(&dom[start..close]);
                }
                i = close + 5;
            }
        }
    }
}

fn page_shows(f: &Fault, dom: &str) -> Result<(), String> {
    let words = |text: &str| f.words.iter().all(|w| text.contains(w.as_str()));
    match &f.host {
        Some(host) => {
            let row = row_of(dom, host).ok_or_else(|| format!("no row of {host}"))?;
            let badge = row
                .split("<span")
                .find(|s| s.contains("health-badge"))
                .ok_or_else(|| format!("no health badge in the row of {host}: {row}"))?;
            (badge.contains("health-degraded") && words(badge))
                .then_some(())
                .ok_or_else(|| format!("badge of {host}: <span{badge}"))
        }
        None => {
            let b = banner(dom).ok_or("no health banner")?;
            let tag = &b[..b.find('>').unwrap_or(b.len())];
            (tag.contains("health-degraded") && words(b))
                .then_some(())
                .ok_or_else(|| format!("banner: {b}"))
        }
    }
}

fn metrics_show(f: &Fault, samples: &Samples) -> Result<(), String> {
    let mut wants = Vec::new();
    match &f.host {
        Some(host) => wants.push(want(
            "storage_node_unhealthy",
            &[("host", host), ("reason", f.code)],
            Is::Eq(1.0),
        )),
        None => wants.push(want(
            "storage_health_state",
            &[("state", "degraded")],
            Is::Eq(1.0),
        )),
    }
    wants
        .iter()
        .chain(&f.samples)
        .try_for_each(|w| check_want(samples, w))
}

/// `/api/health`: healthy, no node listed, every pool healthy.
fn health_clean(h: &Value) -> Result<(), String> {
    let pools_ok = h["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|p| p["state"] == "healthy");
    let nodes_ok = h["nodes"].as_array().is_some_and(Vec::is_empty);
    (h["state"] == "healthy" && pools_ok && nodes_ok)
        .then_some(())
        .ok_or_else(|| format!("/api/health: {h}"))
}

/// `/api/state`: every node healthy and still `running`, and the cluster healthy.
fn state_clean(s: &Value) -> Result<(), String> {
    let nodes: Vec<&Value> = s["model"]["nodes"]
        .as_object()
        .map(|m| m.values().collect())
        .unwrap_or_default();
    let bad: Vec<String> = nodes
        .iter()
        .filter(|n| n["health"]["state"] != "healthy" || n["phase"] != "running")
        .map(|n| format!("{} {} {}", n["hostname"], n["phase"], n["health"]))
        .collect();
    let cluster = &s["model"]["health"];
    (nodes.len() == AGENTS && bad.is_empty() && cluster["state"] == "healthy")
        .then_some(())
        .ok_or_else(|| format!("/api/state: nodes {bad:?}, cluster {cluster}"))
}

/// The page: no banner, a healthy badge on every row.
fn page_clean(dom: &str) -> Result<(), String> {
    if let Some(b) = banner(dom) {
        return Err(format!("a banner: {b}"));
    }
    // Class attributes only: the page's style sheet names the classes too.
    let healthy = dom.matches("class=\"health-badge health-healthy\"").count();
    let badges = dom.matches("class=\"health-badge ").count();
    (healthy == AGENTS && badges == AGENTS)
        .then_some(())
        .ok_or_else(|| format!("{healthy} healthy badges of {badges}, {AGENTS} nodes"))
}

fn metrics_clean(samples: &Samples) -> Result<(), String> {
    let n = AGENTS as f64;
    let pool = [("protection_domain", "default"), ("pool", "default")];
    let wants = [
        want("storage_health_state", &[("state", "healthy")], Is::Eq(1.0)),
        want(
            "storage_health_state",
            &[("state", "degraded")],
            Is::Eq(0.0),
        ),
        want("storage_nodes_health", &[("state", "healthy")], Is::Eq(n)),
        want("storage_sds_connected", &[], Is::Eq(n)),
        want("storage_sds_disconnected", &[], Is::Eq(0.0)),
        want("storage_sdc_connected", &[], Is::Eq(n)),
        want("storage_sdc_disconnected", &[], Is::Eq(0.0)),
        want("storage_device_errors", &[], Is::Eq(0.0)),
        want("storage_mdm_members_up", &[], Is::Eq(3.0)),
        want(
            "storage_mdm_cluster_state",
            &[("state", "ClusteredNormal")],
            Is::Eq(1.0),
        ),
        want("storage_pool_degraded_bytes", &pool, Is::Eq(0.0)),
        want("storage_pool_rebuilding_bytes", &pool, Is::Eq(0.0)),
        want("storage_pool_failed_bytes", &pool, Is::Eq(0.0)),
        want(
            "storage_health_data_age_seconds",
            &[],
            Is::Below(STALE.as_secs_f64()),
        ),
    ];
    wants.iter().try_for_each(|w| check_want(samples, w))?;
    let unhealthy = sample_values(samples, "storage_node_unhealthy", &[]);
    unhealthy
        .iter()
        .all(|v| *v == 0.0)
        .then_some(())
        .ok_or_else(|| format!("storage_node_unhealthy samples: {unhealthy:?}"))
}

/// Every surface shows `f` (`/api/health` within the fault's time, the others then within
/// [`SURFACES_WITHIN`]); prints how long each took.
fn assert_shown(base: &str, f: &Fault) {
    let n = f.name;
    let t = until(&format!("{n} in /api/health"), f.within, || {
        health_shows(f, &json(base, "/api/health")?)
    });
    eprintln!("{n}: /api/health shows it after {t:?}");
    until(&format!("{n} in /api/state"), SURFACES_WITHIN, || {
        state_shows(f, &json(base, "/api/state")?)
    });
    until(&format!("{n} in /metrics"), SURFACES_WITHIN, || {
        metrics_show(f, &metrics_parsed(base))
    });
    until(&format!("{n} on the page"), SURFACES_WITHIN, || {
        page_shows(f, &page_dom(base))
    });
}

/// Every surface is clean again within `within`.
fn assert_clean(base: &str, after: &str, within: Duration) {
    let t = until(&format!("/api/health clean {after}"), within, || {
        health_clean(&json(base, "/api/health")?)
    });
    eprintln!("/api/health clean {after} after {t:?}");
    until(
        &format!("/api/state clean {after}"),
        SURFACES_WITHIN,
        || state_clean(&json(base, "/api/state")?),
    );
    until(&format!("/metrics clean {after}"), SURFACES_WITHIN, || {
        metrics_clean(&metrics_parsed(base))
    });
    until(&format!("the page clean {after}"), SURFACES_WITHIN, || {
        page_clean(&page_dom(base))
    });
}

impl Rig {
    /// Hostname -> task id of every node, once all of them run. A scheduler that exited
    /// (a flag it does not know) fails at once, with its log.
    fn running_tasks(&mut self) -> BTreeMap<String, String> {
        devrig::running_tasks(&mut self.scheduler, &self.dir, &self.base, AGENTS)
    }
}

/// The faults, on different nodes; `device` is a device attached on agent-3.
fn faults(device: &str) -> Vec<Fault> {
    let pool = [("protection_domain", "default"), ("pool", "default")];
    let node = |name, n: usize, inject: &str, clear: &str, words: &[&str], code, samples| Fault {
        name,
        inject: inject.to_string(),
        clear: Some(clear.to_string()),
        within: GATEWAY_WITHIN,
        host: Some(format!("agent-{n}")),
        words: words.iter().map(|w| w.to_string()).collect(),
        code,
        samples,
    };
    let cluster = |name, inject: &str, clear: Option<&str>, words: &[&str], samples| Fault {
        name,
        inject: inject.to_string(),
        clear: clear.map(str::to_string),
        within: GATEWAY_WITHIN,
        host: None,
        words: words.iter().map(|w| w.to_string()).collect(),
        code: "",
        samples,
    };
    let mut service = node(
        "sds service stopped on agent-4",
        4,
        "/control/agents/4/service?name=sds&running=false",
        "/control/agents/4/service?name=sds&running=true",
        &["service sds", "not running"],
        "host_service",
        vec![],
    );
    service.within = HOST_WITHIN;
    vec![
        node(
            "SDS of agent-1 disconnected",
            1,
            "/control/gateway/sds?agent=1&connected=false",
            "/control/gateway/sds?agent=1&connected=true",
            &["SDS", "disconnected"],
            "sds_disconnected",
            vec![want("storage_sds_disconnected", &[], Is::Eq(1.0))],
        ),
        node(
            "SDC of agent-2 disconnected",
            2,
            "/control/gateway/sdc-connection?agent=2&connected=false",
            "/control/gateway/sdc-connection?agent=2&connected=true",
            &["SDC", "disconnected"],
            "sdc_disconnected",
            vec![want("storage_sdc_disconnected", &[], Is::Eq(1.0))],
        ),
        node(
            "device of agent-3 failed",
            3,
            &format!("/control/gateway/device?agent=3&path={device}&failed=true"),
            &format!("/control/gateway/device?agent=3&path={device}&failed=false"),
            &[device, "in error"],
            "device_error",
            vec![want("storage_device_errors", &[], Is::Eq(1.0))],
        ),
        service,
        cluster(
            "MDM cluster degraded",
            "/control/gateway/mdm?degraded=true",
            Some("/control/gateway/mdm?degraded=false"),
            &["MDM cluster", "ClusteredDegraded"],
            vec![
                want(
                    "storage_mdm_cluster_state",
                    &[("state", "ClusteredDegraded")],
                    Is::Eq(1.0),
                ),
                want("storage_mdm_members_up", &[], Is::Eq(2.0)),
            ],
        ),
        cluster(
            "pool rebuilding",
            &format!("/control/gateway/rebuild?seconds={REBUILD_SECS}"),
            None,
            &["pool default/default", "rebuilding"],
            vec![
                want("storage_pool_rebuilding_bytes", &pool, Is::Above(0.0)),
                want("storage_pool_degraded_bytes", &pool, Is::Above(0.0)),
            ],
        ),
        cluster(
            "pool filled over the warning",
            "/control/gateway/fill?pct=91",
            Some("/control/gateway/fill?pct=0"),
            &["pool default/default", "% used", "warn at 80%"],
            vec![],
        ),
    ]
}

#[test]
fn every_fault_shows_on_every_surface_naming_the_node_and_clears() {
    let mut rig = Rig::start();
    let base = rig.base.clone();
    let tasks = rig.running_tasks();
    assert_clean(&base, "once running", Duration::from_secs(30));
    let mark = rig.launches().len();
    let state = json(&base, "/api/state").expect("/api/state");
    let device = node_in_state(&state, "agent-3")
        .and_then(|n| n["attached"][0].as_str())
        .expect("a device attached on agent-3")
        .to_string();
    for f in faults(&device) {
        eprintln!("-- {}", f.name);
        rig.control(&f.inject);
        assert_shown(&base, &f);
        let within = match &f.clear {
            Some(path) => {
                rig.control(path);
                f.within
            }
            None => Duration::from_secs(REBUILD_SECS) + GATEWAY_WITHIN,
        };
        assert_clean(&base, &format!("after {}", f.name), within);
    }
    // No fault ended or started an executor, nor launched a task.
    let since: Vec<Value> = rig.launches().split_off(mark);
    assert!(since.is_empty(), "launch record since running: {since:#?}");
    assert_eq!(rig.running_tasks(), tasks, "every node keeps its task");
}

/// The page readers themselves, on a DOM of the agreed shape.
#[test]
fn the_banner_and_a_node_badge_are_read_from_the_dom() {
    let dom = "<body><div id=\"health-banner\" class=\"health-degraded\"><b>degraded</b>\
        <div class=\"r\">pool default/default is 91% used (warn at 80%)</div></div>\
        <div>after</div><table><tr><td><div class=\"host\">agent-2</div></td>\
        <td><span class=\"health-badge health-degraded\" title=\"SDC sdc-2 disconnected\">\
        degraded</span></td></tr></table></body>";
    let b = banner(dom).expect("a banner");
    assert!(
        b.ends_with("(warn at 80%)</div>") && !b.contains("after"),
        "{b}"
    );
    let fault = |host: Option<&str>, words: &[&str]| Fault {
        name: "t",
        inject: String::new(),
        clear: None,
        within: POLL,
        host: host.map(str::to_string),
        words: words.iter().map(|w| w.to_string()).collect(),
        code: "",
        samples: vec![],
    };
    assert_eq!(page_shows(&fault(None, &["91% used"]), dom), Ok(()));
    assert_eq!(
        page_shows(&fault(Some("agent-2"), &["SDC", "disconnected"]), dom),
        Ok(())
    );
    assert!(page_shows(&fault(Some("agent-2"), &["SDS"]), dom).is_err());
    assert!(page_shows(&fault(Some("agent-1"), &["SDC"]), dom).is_err());
    assert!(page_clean(dom).is_err());
}
