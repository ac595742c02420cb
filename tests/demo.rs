//! `scripts/demo.sh`, the README's run command: it deploys through the dev cluster's launcher,
//! follows the rollout, and stops everything it started, whether it ends by itself
//! (`--exit-when-ready`) or by Ctrl-C.
//!
//! In both modes `--exit-when-ready` exits 0 with every node running, the summary and the
//! ready file; in experimental mode the framework has built the MDM trio itself.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{executor_bin, scheduler_bin, wait_for};
use devcluster::host::{FakeRoot, UBUNTU_SDC_KERNEL};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The binaries demo.sh needs, all built into the scheduler's target directory.
fn bin_dir() -> PathBuf {
    executor_bin();
    let dir = scheduler_bin().parent().unwrap().to_path_buf();
    for b in ["storage-devcluster", "storage-host-standin"] {
        assert!(
            dir.join(b).exists(),
            "{b} missing in {}: cargo build --workspace (scripts/test.sh does)",
            dir.display()
        );
    }
    dir
}

fn work_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("demo-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Processes started for the demo: their command line names its work dir, or they run in it.
fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cwd.starts_with(dir) || cmdline.contains(&needle) {
            found.push(format!("{name}: {cmdline}"));
        }
    }
    found
}

fn demo(work: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.sh"));
    c.arg("--bin-dir")
        .arg(bin_dir())
        // The static release builds, as deployed: a debug scheduler outgrows the app's 32 MB
        // and the launcher kills it, as Marathon on Mesos would.
        .arg("--release-dir")
        .arg(
            cluster::release_artifact("storage-scheduler")
                .parent()
                .unwrap(),
        )
        .arg("--work-dir")
        .arg(work.join("run"))
        .args(extra);
    c
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    work: PathBuf,
    ready: PathBuf,
}

/// `demo.sh --exit-when-ready` with the default 5 agents (Ubuntu 14.04 and RHEL 7 alternating);
/// whatever the outcome, nothing it started is left running and it deployed with deploy.sh.
fn exit_when_ready(mode: &str, extra: &[&str]) -> Outcome {
    let work = work_dir(mode);
    let ready = work.join("ready.json");
    let mut args = vec![
        "--exit-when-ready",
        "--timeout",
        "120",
        "--ready-file",
        ready.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = demo(&work, &args).output().expect("run demo.sh");
    let o = Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        work,
        ready,
    };
    let left = processes_under(&o.work);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
    assert!(
        o.stderr.contains("deploy.sh: the launcher answered 201"),
        "{}",
        o.stderr
    );
    o
}

/// The summary of a demo as a careful operator configures it: no node flagged (no error, no
/// warning, no failed launch: each Ubuntu host's kernel reboot is planned), no warning about
/// the state store, one readable line per pool, and a healthy cluster where the scheduler
/// tells its health.
fn assert_clean_summary(stdout: &str) {
    for flagged in ["  error: ", "  warning: ", "failed launch", "\nwarning: "] {
        assert!(
            !stdout.contains(flagged),
            "{flagged:?} in the summary:\n{stdout}"
        );
    }
    let pools: Vec<&str> = stdout.lines().filter(|l| l.contains(": used ")).collect();
    assert_eq!(pools.len(), 1, "one pool line:\n{stdout}");
    assert_pool_line(pools[0], "default/default");
    if let Some(health) = stdout.lines().find(|l| l.starts_with("health:")) {
        assert_eq!(health, "health: healthy", "{stdout}");
    }
}

/// The operator commands the demo prints: the client with the scheduler's https address, its
/// certificate as its log names it and the token file the demo configured; the first of
/// them, run by the demo, answered with the plan.
fn assert_operator_commands(stdout: &str) {
    let export = stdout
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("export STORAGE_SCHEDULER_URL=https://")
        })
        .unwrap_or_else(|| panic!("no export line:\n{stdout}"));
    let fp = export
        .split("STORAGE_SCHEDULER_FINGERPRINT=")
        .nth(1)
        .unwrap_or_default();
    assert!(
        fp.starts_with("sha256:") && fp.len() == "sha256:".len() + 64,
        "{export}"
    );
    for command in [
        "ctl status",
        "pause",
        "resume",
        "restart agent-",
        "ctl events",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("storage-scheduler ctl") && l.contains(command)),
            "{command:?} not offered:\n{stdout}"
        );
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("  now: plan ")),
        "ctl status did not answer:\n{stdout}"
    );
}

/// `<pd/pool>: used <GiB> GiB of <GiB> GiB (<percent>%)`, one decimal each.
fn assert_pool_line(line: &str, pool: &str) {
    let number = |s: &str| {
        let decimals = s.split_once('.').map(|(_, d)| d.len());
        assert!(
            s.parse::<f64>().is_ok() && decimals == Some(1),
            "{s:?}: {line}"
        );
        s.parse::<f64>().unwrap()
    };
    let rest = line
        .strip_prefix(&format!("{pool}: used "))
        .unwrap_or_else(|| panic!("not {pool:?}'s pool line: {line}"));
    let (used, rest) = rest.split_once(" GiB of ").expect(line);
    let (total, pct) = rest.split_once(" GiB (").expect(line);
    let pct = pct.strip_suffix("%)").expect(line);
    assert!(number(used) <= number(total), "{line}");
    assert!((0.0..=100.0).contains(&number(pct)), "{line}");
}

/// Pre-configured mode: every node runs with the real scheduler, executors, host stand-ins
/// and gateway; the Ubuntu hosts installed the SDC's kernel and rebooted once (no `-debug`).
#[test]
fn preconfigured_demo_exits_0_with_every_node_running() {
    let o = exit_when_ready("preconfigured", &[]);
    assert_eq!(
        o.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        o.stdout,
        o.stderr
    );
    assert!(o.stdout.contains("status page: http://"), "{}", o.stdout);
    // The summary: a header and one running row per agent.
    let rows: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("agent-"))
        .collect();
    assert_eq!(rows.len(), 5, "{}", o.stdout);
    for row in &rows {
        assert!(row.contains(" running ") && row.contains(" 2/2 "), "{row}");
    }
    assert!(o.stdout.contains("node ") && o.stdout.contains("persona"));
    assert_clean_summary(&o.stdout);
    assert_operator_commands(&o.stdout);
    // The package URLs went through deploy.sh's --flag.
    for flag in [
        "-storage.ubuntu14.sdc=http://",
        "-storage.rhel7.sdc=http://",
    ] {
        assert!(o.stderr.contains(flag), "{flag} not passed:\n{}", o.stderr);
    }

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&o.ready).expect("ready file")).unwrap();
    for key in ["scheduler", "master", "launcher", "gateway", "control"] {
        assert!(doc[key].is_string(), "{key} missing: {doc}");
    }
    let agents = doc["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 5);
    // A work dir named with --work-dir is kept, so the hosts can be inspected.
    for (i, agent) in agents.iter().enumerate() {
        let root = agent["host_root"].as_str().expect("host_root");
        let host = FakeRoot::open(Path::new(root)).unwrap().state().unwrap();
        let name = agent["hostname"].as_str().unwrap();
        if i % 2 == 0 {
            assert_eq!(host.running_kernel, UBUNTU_SDC_KERNEL, "{name}");
            assert_eq!(host.boots, 1, "{name}: Ubuntu reboots once for its kernel");
        } else {
            assert_eq!(host.boots, 0, "{name}: RHEL 7 needs no reboot");
        }
    }
    let _ = std::fs::remove_dir_all(&o.work);
}

/// Experimental mode: the framework builds the MDM trio on the empty gateway (the primary's
/// executor runs the scheduler's `scli` steps on its host stand-in, which creates the
/// gateway's system), every MDM node gets LIA and the gateway, and every node runs.
#[test]
fn experimental_demo_exits_0_with_the_trio_built_and_every_node_running() {
    let o = exit_when_ready("experimental", &["--experimental"]);
    assert_eq!(
        o.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        o.stdout,
        o.stderr
    );
    let rows: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("agent-"))
        .collect();
    assert_eq!(rows.len(), 5, "{}", o.stdout);
    for row in &rows {
        assert!(row.contains(" running ") && row.contains(" 2/2 "), "{row}");
    }
    for persona in ["primary", "secondary", "tiebreaker"] {
        let n = rows
            .iter()
            .filter(|r| r.split_whitespace().nth(1) == Some(persona))
            .count();
        assert_eq!(n, 1, "one {persona}: {}", o.stdout);
    }
    assert_clean_summary(&o.stdout);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&o.ready).expect("ready file")).unwrap();
    let agents = doc["agents"].as_array().expect("agents");
    let clusters: Vec<String> = agents
        .iter()
        .filter_map(|a| {
            let root = a["host_root"].as_str()?;
            let host = FakeRoot::open(Path::new(root)).ok()?.state().ok()?;
            host.scli
                .cluster
                .map(|c| format!("{} {:?}", c.mode, c.name))
        })
        .collect();
    assert_eq!(
        clusters,
        ["3_node Some(\"scaleio\")"],
        "one MDM cluster, on the primary"
    );
    let _ = std::fs::remove_dir_all(&o.work);
}

/// Ctrl-C (SIGINT to the foreground process group) stops everything the demo started, once
/// every node runs and the demo waits for it, as the README tells.
#[test]
fn ctrl_c_stops_everything() {
    let work = work_dir("ctrl-c");
    let log = work.join("demo.log");
    let ready = work.join("ready.json");
    let mut command = demo(
        &work,
        &["--agents", "2", "--ready-file", ready.to_str().unwrap()],
    );
    command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .process_group(0);
    // A shell cannot trap a signal that was ignored when it started, and a test run started
    // in the background (`scripts/test.sh &`) passes SIGINT on ignored: give the demo what an
    // operator's terminal gives it.
    // SAFETY: between fork and exec only `signal` runs, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command.spawn().expect("run demo.sh");
    wait_for(
        "the demo waiting for Ctrl-C with every node running",
        Duration::from_secs(120),
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.contains("running; Ctrl-C stops everything")
                .then_some(())
        },
    );
    assert_clean_page(&ready);
    let procs = processes_under(&work);
    assert!(
        procs.iter().any(|p| p.contains("./storage-scheduler"))
            && procs
                .iter()
                .filter(|p| p.contains("storage-executor"))
                .count()
                >= 2,
        "the scheduler and 2 executors run under the demo:\n{}",
        procs.join("\n")
    );
    let pgid = format!("-{}", child.id());
    let killed = Command::new("kill")
        .args(["-INT", "--", &pgid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_for("demo.sh to exit", Duration::from_secs(30), || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C");
    let left = processes_under(&work);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
    let _ = std::fs::remove_dir_all(&work);
}

/// The status page and `/api/state` of a running demo flag nothing: no node has an error, a
/// warning or a failed launch (agent-1's kernel reboot is planned), and no banner says the
/// state dies with the sandbox.
fn assert_clean_page(ready: &Path) {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ready).expect("ready file")).unwrap();
    let scheduler = doc["scheduler"].as_str().expect("scheduler url");
    let get = |path: &str| {
        ureq::get(&format!("{scheduler}{path}"))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .into_body()
            .read_to_string()
            .unwrap()
    };
    let page = get("/");
    for flagged in [
        "class=\"warning\"",
        "class=\"error\"",
        "failed launch",
        "sandbox",
    ] {
        assert!(!page.contains(flagged), "{flagged} on the page:\n{page}");
    }
    let state: serde_json::Value = serde_json::from_str(&get("/api/state")).unwrap();
    let nodes = state["model"]["nodes"].as_object().expect("nodes");
    assert_eq!(nodes.len(), 2, "{state}");
    for n in nodes.values() {
        assert_eq!(n["phase"], "running", "{n}");
        assert!(n["last_error"].is_null() && n["warning"].is_null(), "{n}");
        assert_eq!(n["failures"], 0, "{n}");
    }
    let health: serde_json::Value = serde_json::from_str(&get("/health")).unwrap();
    assert!(health["state_warning"].is_null(), "{health}");
}

// ---- the follower's decisions (scripts/demo_follow.py) against a fake launcher and scheduler

/// Serves the launcher's app (its task on this server's own port) and `/api/state` = `state`,
/// `/health` saying the state is durable, and no `/api/health`.
fn fake_launcher_and_scheduler(
    state: serde_json::Value,
) -> (String, std::sync::Arc<tiny_http::Server>) {
    let health = serde_json::json!({"status": "subscribed", "state_warning": null});
    fake_scheduler_with(state, health, None)
}

/// The same with `/health` = `health` and `/api/health` = `storage_health` when given.
fn fake_scheduler_with(
    state: serde_json::Value,
    health: serde_json::Value,
    storage_health: Option<serde_json::Value>,
) -> (String, std::sync::Arc<tiny_http::Server>) {
    let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let addr = server.server_addr().to_ip().unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let body = match req.url() {
                "/v2/apps/storage-scheduler" => {
                    serde_json::json!({"app": {"id": "/storage-scheduler",
                    "tasks": [{"state": "TASK_RUNNING", "host": "127.0.0.1", "ports": [addr.port()]}]}})
                }
                "/api/state" => state.clone(),
                "/health" => health.clone(),
                "/api/health" if storage_health.is_some() => storage_health.clone().unwrap(),
                _ => {
                    let _ = req.respond(tiny_http::Response::empty(404));
                    continue;
                }
            };
            let _ = req.respond(tiny_http::Response::from_string(body.to_string()));
        }
    });
    (addr.to_string(), server)
}

fn node(host: &str, phase: &str, attached: &[&str], error: Option<&str>) -> serde_json::Value {
    serde_json::json!({"hostname": host, "persona": "data", "phase": phase,
        "devices": ["/dev/sdb", "/dev/sdc"], "attached": attached, "last_error": error})
}

fn failures(mut node: serde_json::Value, n: u32) -> serde_json::Value {
    node["failures"] = n.into();
    node
}

fn follower(args: &[&str]) -> (String, String) {
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/demo_follow.py"
        ))
        .args(args)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn follower_reports_ready_with_a_summary_and_ready_file() {
    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "running", &["/dev/sdb", "/dev/sdc"], None),
        "a2": node("agent-2", "running", &["/dev/sdb"], None),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, stderr) = follower(&["follow", &launcher, "2", "10", "0"]);
    let url = format!("http://{launcher}");
    assert_eq!(stdout.trim(), format!("ready {url}"), "{stderr}");
    assert!(stderr.contains("nodes 2/2: running 2"), "{stderr}");

    let (summary, _) = follower(&["summary", &url]);
    let rows: Vec<&str> = summary.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{summary}");
    assert!(
        rows[0].starts_with("agent-1") && rows[0].contains(" running ") && rows[0].contains("2/2")
    );
    assert!(rows[1].starts_with("agent-2") && rows[1].contains("1/2 /dev/sdb"));

    let dir = work_dir("ready-file");
    let dc = dir.join("devcluster.json");
    std::fs::write(
        &dc,
        r#"{"master": "127.0.0.1:5050", "launcher": "127.0.0.1:8080", "agents": []}"#,
    )
    .unwrap();
    let ready = dir.join("ready.json");
    follower(&[
        "ready-file",
        dc.to_str().unwrap(),
        &url,
        ready.to_str().unwrap(),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    assert_eq!(doc["scheduler"], url.as_str());
    assert_eq!(doc["master"], "127.0.0.1:5050");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the status page would flag shows in the summary too: a node's error, warning and
/// failed launches under its row, the state store's warning; pools one readable line each;
/// the storage health and its reasons once the scheduler serves `/api/health`.
#[test]
fn summary_shows_what_the_page_flags_pools_and_health() {
    const GIB: u64 = 1 << 30;
    let mut a2 = failures(node("agent-2", "running", &["/dev/sdb"], None), 1);
    a2["warning"] = "REX-Ray has no gateway credentials".into();
    let state = serde_json::json!({"subscribed": true, "model": {
        "nodes": {
            "a1": node("agent-1", "running", &["/dev/sdb", "/dev/sdc"], None),
            "a2": a2,
            "a3": node("agent-3", "failed", &[], Some("packages: download failed (404)")),
        },
        "pools": [{"protection_domain": "pd1", "pool": "sp1", "capacity_bytes": 100 * GIB,
            "spare_bytes": 10 * GIB, "used_bytes": 9 * GIB, "available_bytes": 81 * GIB,
            "used_pct": 10.0}],
    }});
    let health = serde_json::json!({"status": "subscribed",
        "state_warning": "state is kept in ./state.journal only"});
    let storage = serde_json::json!({"state": "degraded",
        "reasons": ["pool pd1/sp1 is 91% used (warn at 80%)"],
        "nodes": [{"agent_id": "a2", "hostname": "agent-2", "phase": "running",
            "state": "degraded", "reasons": ["service sds: not running"]}]});
    let (launcher, _s) = fake_scheduler_with(state.clone(), health, Some(storage));
    let (summary, _) = follower(&["summary", &format!("http://{launcher}")]);
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(
        lines[1..],
        [
            "agent-1        data        running   2/2 /dev/sdb /dev/sdc",
            "agent-2        data        running   1/2 /dev/sdb",
            "  warning: REX-Ray has no gateway credentials",
            "  1 failed launch",
            "agent-3        data        failed    0/2",
            "  error: packages: download failed (404)",
            "warning: state is kept in ./state.journal only",
            "pd1/sp1: used 9.0 GiB of 100.0 GiB (10.0%)",
            "health: degraded",
            "  pool pd1/sp1 is 91% used (warn at 80%)",
            "  agent-2: degraded: service sds: not running",
        ],
        "{summary}"
    );
    assert_pool_line(lines[8], "pd1/sp1");

    // A scheduler without /api/health (404): no health line.
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (summary, _) = follower(&["summary", &format!("http://{launcher}")]);
    assert!(
        summary.ends_with("pd1/sp1: used 9.0 GiB of 100.0 GiB (10.0%)\n"),
        "{summary}"
    );
    assert!(!summary.contains("health"), "{summary}");
}

#[test]
fn follower_names_failed_nodes_and_stuck_phases() {
    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "running", &[], None),
        "a2": failures(node("agent-2", "failed", &[], Some("packages: EMC-ScaleIO-sds: download failed (404)")), 2),
        "a3": node("agent-3", "packages", &[], None),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, _) = follower(&["follow", &launcher, "3", "10", "0"]);
    assert_eq!(
        stdout.trim(),
        "failed 1 node(s) failed: agent-2: packages: EMC-ScaleIO-sds: download failed (404)"
    );

    // One failure may pass (the scheduler relaunches the node): not the end.
    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "running", &[], None),
        "a2": failures(node("agent-2", "failed", &[], Some("TASK_FAILED: Executor terminated")), 1),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, _) = follower(&["follow", &launcher, "2", "1", "0"]);
    assert_eq!(
        stdout.trim(),
        "timeout after 1 s, 1 of 2 nodes are stuck in phase failed"
    );

    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "storage-attach", &[], None),
        "a2": node("agent-2", "environment", &[], None),
        "a3": node("agent-3", "environment", &[], None),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, _) = follower(&["follow", &launcher, "3", "1", "0"]);
    assert_eq!(
        stdout.trim(),
        "timeout after 1 s, 2 of 3 nodes are stuck in phase environment, 1 in storage-attach"
    );
}
