//! End to end, state that survives its host: the real scheduler on the dev
//! cluster, whose master's `/flags` names a real ZooKeeper (Debian's package).
//!
//! - A scheduler SIGKILLed and started again from another working directory, with no store
//!   flag, finds its state in the master's ZooKeeper: it re-subscribes with the same
//!   framework id and launches no second executor.
//! - With nothing stored and its framework still active at the master, a scheduler refuses to
//!   register a second one, naming the framework and the flags that allow it.

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
    master::start(master::MasterConfig {
        agents: AGENTS,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        status_update_retry: Duration::from_secs(1),
        zk,
        // The executors prepare fake hosts, never the machine running the tests.
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
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
