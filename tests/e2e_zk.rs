//! End to end, state that survives its host: the real scheduler on the dev
//! cluster, whose master's `/flags` names a real ZooKeeper (Debian's package).
//!
//! - A scheduler SIGKILLed and started again from another working directory, with no store
//!   flag, finds its state in the master's ZooKeeper: it re-subscribes with the same
//!   framework id and launches no second executor.
//! - With nothing stored and its framework still active at the master, a scheduler refuses to
//!   register a second one, naming the framework and the flags that allow it, also when the
//!   master's framework list is many megabytes; when that list cannot be read it refuses to
//!   start unless `-framework.guard=false`.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/zookeeper.rs"]
mod zookeeper;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master::{self, LaunchEvent, MasterHandle};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(60);
const AGENTS: usize = 3;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("e2e-zk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cluster(dir: &Path, zk: Option<String>) -> MasterHandle {
    cluster_with(dir, zk, master::MasterConfig::default())
}

/// [`cluster`] with other settings (synthetic agents, the master's HTTP authentication).
fn cluster_with(dir: &Path, zk: Option<String>, config: master::MasterConfig) -> MasterHandle {
    master::start(master::MasterConfig {
        agents: AGENTS,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        status_update_retry: Duration::from_secs(1),
        zk,
        // The executors prepare fake hosts, never the machine running the tests.
        host_standins: Some(cluster::host_standins(None)),
        ..config
    })
    .expect("dev cluster")
}

struct Sched(Child);

impl Drop for Sched {
    fn drop(&mut self) {
        let _ = self.0.kill(); // SIGKILL
        let _ = self.0.wait();
    }
}

/// The scheduler without any store flag, in working directory `cwd`, logging to `log`.
fn spawn(m: &MasterHandle, cwd: &Path, log: &Path, extra: &[&str]) -> Sched {
    std::fs::create_dir_all(cwd).unwrap();
    let args: Vec<String> = scheduler_args(
        &m.addr().to_string(),
        free_port(),
        Path::new("x"),
        "Scaleio123",
    )
    .into_iter()
    .filter(|a| !a.starts_with("-store."))
    // An `-uri` among the extras replaces the leader's.
    .filter(|a| !(a.starts_with("-uri=") && extra.iter().any(|e| e.starts_with("-uri="))))
    .chain(extra.iter().map(|s| s.to_string()))
    .collect();
    let file = std::fs::File::create(log).expect("log");
    Sched(
        Command::new(scheduler_bin())
            .args(&args)
            .current_dir(cwd)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start storage-scheduler"),
    )
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn running(m: &MasterHandle) -> usize {
    m.launch_log()
        .unwrap_or_default()
        .iter()
        .filter(|r| r.event == LaunchEvent::ExecutorStarted)
        .count()
}

fn framework_id(log: &str) -> Option<String> {
    let at = log.rfind("subscribed as framework ")?;
    let rest = &log[at + "subscribed as framework ".len()..];
    Some(rest.split_whitespace().next()?.to_owned())
}

#[test]
fn sigkilled_scheduler_restarted_elsewhere_finds_its_state_in_the_masters_zookeeper() {
    let dir = tempdir("restart");
    let zk = zookeeper::ZooKeeper::start(&dir.join("zk"));
    let m = cluster(&dir, Some(zk.uri("/mesos")));
    let log1 = dir.join("first.log");
    let first = spawn(&m, &dir.join("sandbox-1"), &log1, &[]);
    // Running tasks, not just launches: a launch record is made before the agent fetches
    // the executor from the scheduler, and a fetch from a killed scheduler fails the task.
    wait_for("every task running", SETTLE, || {
        let log = read(&log1);
        let tasks = log
            .lines()
            .filter(|l| l.contains(": task storage.") && l.ends_with(" running"))
            .count();
        (running(&m) == AGENTS && tasks >= AGENTS).then_some(())
    });
    let fw = wait_for("framework id", SETTLE, || framework_id(&read(&log1)));
    assert!(
        read(&log1).contains("/storage-framework/"),
        "{}",
        read(&log1)
    );
    // No state file in the sandbox: the state went to ZooKeeper.
    assert!(std::fs::read_dir(dir.join("sandbox-1"))
        .unwrap()
        .next()
        .is_none());
    drop(first); // SIGKILL

    let log2 = dir.join("second.log");
    let second = spawn(&m, &dir.join("sandbox-2"), &log2, &[]);
    wait_for("re-subscription", SETTLE, || {
        read(&log2).contains("(re-used)").then_some(())
    });
    assert_eq!(framework_id(&read(&log2)).as_deref(), Some(fw.as_str()));
    // Reconciliation has had its round trip once the master's tasks are all known again;
    // the launch record says no executor was ever started twice.
    wait_for("reconciled", SETTLE, || {
        read(&log2).contains("running").then_some(())
    });
    // No task ended while the scheduler was away.
    assert!(!read(&log2).contains("ended TASK_"), "{}", read(&log2));
    let record = m.launch_log().unwrap();
    let most = master::max_concurrent_executors(&record, "storage-executor.");
    assert!(most.values().all(|n| *n == 1), "{most:?}");
    assert_eq!(running(&m), AGENTS, "{record:#?}");
    drop(second);
}

#[test]
fn lost_state_beside_an_active_framework_refuses_to_register_a_second() {
    let dir = tempdir("guard");
    let m = cluster(&dir, None);
    let log1 = dir.join("first.log");
    let first = spawn(&m, &dir.join("sandbox-1"), &log1, &[]);
    let fw = wait_for("framework id", SETTLE, || framework_id(&read(&log1)));
    // The file store said it is volatile.
    assert!(
        read(&log1).contains("dies with the sandbox"),
        "{}",
        read(&log1)
    );
    drop(first);
    // A relaunch in a new sandbox: no state, the framework still active (failover timeout).
    let log2 = dir.join("second.log");
    let mut second = spawn(&m, &dir.join("sandbox-2"), &log2, &[]);
    let status = wait_for("the scheduler to exit", SETTLE, || {
        second.0.try_wait().unwrap()
    });
    assert!(!status.success());
    let text = read(&log2);
    for part in [fw.as_str(), "-framework.id=", "-framework.new"] {
        assert!(text.contains(part), "missing {part:?}:\n{text}");
    }
    // -framework.id adopts it: same id, no second executor.
    let log3 = dir.join("third.log");
    let adopt = format!("-framework.id={fw}");
    let third = spawn(&m, &dir.join("sandbox-3"), &log3, &[adopt.as_str()]);
    wait_for("re-subscription", SETTLE, || {
        read(&log3).contains("(re-used)").then_some(())
    });
    let most = master::max_concurrent_executors(&m.launch_log().unwrap(), "storage-executor.");
    assert!(most.values().all(|n| *n == 1), "{most:?}");
    drop(third);
}

/// The master's `/master/frameworks` body in bytes.
fn frameworks_body_len(m: &MasterHandle) -> Option<usize> {
    let body = ureq::get(&format!("http://{}/master/frameworks", m.addr()))
        .call()
        .ok()?
        .into_body()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .ok()?;
    Some(body.len())
}

#[test]
fn a_twin_is_found_in_a_framework_list_over_a_mebibyte() {
    const SYNTHETIC: usize = 2_000;
    let dir = tempdir("big-list");
    let m = cluster_with(
        &dir,
        None,
        master::MasterConfig {
            synthetic_agents: SYNTHETIC,
            ..Default::default()
        },
    );
    let log1 = dir.join("first.log");
    let first = spawn(&m, &dir.join("sandbox-1"), &log1, &[]);
    let fw = wait_for("framework id", SETTLE, || framework_id(&read(&log1)));
    // Every task of every framework is listed, as Mesos lists them.
    wait_for("an executor on every agent", SETTLE * 3, || {
        (running(&m) >= AGENTS + SYNTHETIC).then_some(())
    });
    let size = frameworks_body_len(&m).expect("/master/frameworks");
    assert!(size > 1536 * 1024, "/master/frameworks: {size} bytes");
    drop(first);
    // Asked of the standby alone, which redirects to the leader.
    let log2 = dir.join("second.log");
    let standby = format!("-uri={}", m.standby_addr());
    let mut second = spawn(&m, &dir.join("sandbox-2"), &log2, &[standby.as_str()]);
    let status = wait_for("the scheduler to exit", SETTLE, || {
        second.0.try_wait().unwrap()
    });
    assert!(!status.success());
    let text = read(&log2);
    assert!(text.contains(&format!("framework {fw}")), "{text}");
}

#[test]
fn an_unreadable_framework_list_refuses_to_start_unless_the_guard_is_off() {
    let dir = tempdir("unreadable");
    // `--authenticate_http_readonly`: the scheduler has no credentials for the list.
    let m = cluster_with(
        &dir,
        None,
        master::MasterConfig {
            readonly_auth: true,
            ..Default::default()
        },
    );
    let log1 = dir.join("first.log");
    let mut first = spawn(&m, &dir.join("sandbox-1"), &log1, &[]);
    let status = wait_for("the scheduler to exit", SETTLE, || {
        first.0.try_wait().unwrap()
    });
    assert!(!status.success(), "{status}");
    let text = read(&log1);
    let url = format!("{}/master/frameworks", m.addr());
    for part in [url.as_str(), "401", "-framework.guard=false"] {
        assert!(text.contains(part), "missing {part:?}:\n{text}");
    }
    assert!(framework_id(&text).is_none(), "registered: {text}");
    let log2 = dir.join("second.log");
    let _second = spawn(
        &m,
        &dir.join("sandbox-2"),
        &log2,
        &["-framework.guard=false"],
    );
    wait_for("subscription without the check", SETTLE, || {
        framework_id(&read(&log2))
    });
}
