//! End to end, the scheduler's invariants at their worst instants: the real binaries on the
//! dev cluster.
//!
//! - State is never reset silently: a corrupt or future-version state file stops the
//!   scheduler (non-zero exit, the file named) and is left byte for byte as it was.
//! - Write ahead: SIGKILLed after a launch is saved and before its ACCEPT leaves (the
//!   `hold-after-launch-save` fault point, `src/scheduler/faults.rs`), the restarted
//!   scheduler launches nothing twice: the master's own launch record shows one executor
//!   per agent, ever.
//! - A half-open master (stream open, no bytes, no heartbeats) is noticed by the watchdog.
//! - One writer per file store: a second scheduler on the same `-store.uri` exits non-zero
//!   naming the lock and its holder; the first carries on with its state intact.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master::{self, LaunchEvent, MasterHandle};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(60);

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("e2e-inv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cluster(dir: &Path, agents: usize) -> MasterHandle {
    master::start(master::MasterConfig {
        agents,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        status_update_retry: Duration::from_secs(1),
        // The executors prepare fake hosts, never the machine running the tests.
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("dev cluster")
}

/// A scheduler process, killed when dropped (a failing test leaves none behind).
struct Sched(Child);

impl Drop for Sched {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The scheduler with its log in `log` (appended), and `env` added to its environment.
fn spawn(args: &[String], log: &Path, env: &[(&str, &str)]) -> Sched {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Sched(
        Command::new(scheduler_bin())
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start storage-scheduler"),
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn corrupt_and_future_version_state_files_stop_the_scheduler_untouched() {
    let dir = tempdir("state");
    let m = cluster(&dir, 1);
    let cases: [(&str, &[u8]); 3] = [
        (
            "corrupt",
            b"{\"format\": \"storage-framework-state\", \"vers",
        ),
        ("garbage", b"\x00\xff not json at all"),
        (
            "future",
            br#"{"format":"storage-framework-state","version":99,"state":{}}"#,
        ),
    ];
    for (name, bytes) in cases {
        let store = dir.join(format!("{name}-state.json"));
        std::fs::write(&store, bytes).unwrap();
        let args = scheduler_args(&m.addr().to_string(), free_port(), &store, "Scaleio123");
        let log = dir.join(format!("{name}.log"));
        let mut child = spawn(&args, &log, &[]);
        // A scheduler that carried on would never exit: the deadline ends the wait then.
        let status = wait_for("the scheduler to exit", SETTLE, || {
            child.0.try_wait().expect("try_wait")
        });
        let stderr = read(&log);
        assert!(
            !status.success() && status.code().is_some(),
            "{name}: exited {status:?}\n{stderr}"
        );
        assert!(
            stderr.contains(&store.display().to_string()),
            "{name}: the message does not name the file:\n{stderr}"
        );
        if name == "future" {
            assert!(stderr.contains("99"), "{name}: {stderr}");
        }
        assert_eq!(
            std::fs::read(&store).unwrap(),
            bytes,
            "{name}: the state file was changed"
        );
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(name) && !n.ends_with(".log"))
            .filter(|n| n != &format!("{name}-state.json"))
            // The writer lock stays by design (removing it would race the next locker).
            .filter(|n| n != &format!("{name}-state.json.lock"))
            .collect();
        assert!(leftovers.is_empty(), "{name}: files left: {leftovers:?}");
    }
    // Nothing reached the master: no framework subscribed.
    let snap = m.snapshot().unwrap();
    assert_eq!(
        snap["frameworks"].as_array().map(Vec::len),
        Some(0),
        "{snap}"
    );
}

/// Agents whose one storage task is TASK_RUNNING, by hostname.
fn running(m: &MasterHandle) -> usize {
    let snap = m.snapshot().expect("snapshot");
    snap["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| {
            a["executors"].as_array().is_some_and(|es| {
                es.iter().any(|e| {
                    e["tasks"]
                        .as_array()
                        .is_some_and(|ts| ts.iter().any(|t| t["state"] == "TASK_RUNNING"))
                })
            })
        })
        .count()
}

#[test]
fn sigkill_between_launch_save_and_accept_launches_nothing_twice() {
    const AGENTS: usize = 3;
    let dir = tempdir("sigkill");
    let m = cluster(&dir, AGENTS);
    let store = dir.join("state.json");
    let log = dir.join("scheduler.log");
    let args = scheduler_args(&m.addr().to_string(), free_port(), &store, "Scaleio123");
    let first = spawn(
        &args,
        &log,
        &[("STORAGE_TEST_FAULT", "hold-after-launch-save")],
    );
    // How the wait ends: the dispatcher says it holds, and the saved state has the launches.
    wait_for("the fault point", SETTLE, || {
        read(&log)
            .contains("holding at fault point hold-after-launch-save")
            .then_some(())
    });
    let saved = cluster::stored_state(&store);
    let saved_tasks: Vec<String> = saved
        .model
        .nodes
        .values()
        .filter_map(|n| Some(n.task.as_ref()?.task_id.to_string()))
        .collect();
    assert!(
        !saved_tasks.is_empty(),
        "no launch saved: {:?}",
        saved.model
    );
    let before = m.launch_log().unwrap();
    assert!(
        before.is_empty(),
        "an ACCEPT left before the hold: {before:?}"
    );
    drop(first); // SIGKILL

    let second = spawn(&args, &log, &[]);
    wait_for("every agent running", SETTLE, || {
        (running(&m) == AGENTS).then_some(())
    });
    let log_entries = m.launch_log().unwrap();
    let most = master::max_concurrent_executors(&log_entries, "storage-executor.");
    assert_eq!(most.len(), AGENTS, "{log_entries:#?}");
    assert!(most.values().all(|n| *n == 1), "{most:?}");
    let starts = log_entries
        .iter()
        .filter(|r| r.event == LaunchEvent::ExecutorStarted)
        .count();
    assert_eq!(
        starts, AGENTS,
        "one executor per agent, ever: {log_entries:#?}"
    );
    drop(second);
}

#[test]
fn a_half_open_master_is_detected_by_the_watchdog() {
    let dir = tempdir("halfopen");
    let m = cluster(&dir, 3);
    let store = dir.join("state.json");
    let log = dir.join("scheduler.log");
    let args = scheduler_args(&m.addr().to_string(), free_port(), &store, "Scaleio123");
    let sched = spawn(&args, &log, &[]);
    wait_for("every agent running", SETTLE, || {
        (running(&m) == 3).then_some(())
    });
    // The watchdog's limit is fixed when SUBSCRIBE is sent, before the master names its
    // heartbeat interval: a first stream ever gets 4 x Mesos' default (60 s). Restarted, the
    // scheduler knows the interval from its state (1 s here) and watches with 4 s.
    drop(sched); // SIGKILL
    let sched = spawn(&args, &log, &[]);
    let subscribed = |l: &str| l.matches("subscribed as framework").count();
    wait_for("re-subscription after the restart", SETTLE, || {
        (subscribed(&read(&log)) == 2).then_some(())
    });
    assert_eq!(m.freeze_scheduler_streams().unwrap(), 1);
    // How the wait ends: the scheduler gives up on the silent stream by its watchdog (not
    // by a closed connection, which a frozen stream never shows) and subscribes again.
    let text = wait_for("re-subscription", SETTLE, || {
        Some(read(&log)).filter(|l| subscribed(l) >= 3)
    });
    assert!(
        text.contains("event stream silent for 4000 ms"),
        "not the watchdog:\n{text}"
    );
    assert!(
        !text.contains("the master closed the event stream"),
        "{text}"
    );
    // And nothing was relaunched for it.
    let starts = m
        .launch_log()
        .unwrap()
        .into_iter()
        .filter(|r| r.event == LaunchEvent::ExecutorStarted)
        .count();
    assert_eq!(starts, 3);
    drop(sched);
}

#[test]
fn a_second_scheduler_on_the_same_file_store_stops_and_the_first_carries_on() {
    const AGENTS: usize = 2;
    let dir = tempdir("twolock");
    let m = cluster(&dir, AGENTS);
    let store = dir.join("state.json");
    let master = m.addr().to_string();
    let mut first = spawn(
        &scheduler_args(&master, free_port(), &store, "Scaleio123"),
        &dir.join("first.log"),
        &[],
    );
    wait_for("every agent running", SETTLE, || {
        (running(&m) == AGENTS).then_some(())
    });
    let before = cluster::stored_state(&store);
    assert!(before.model.framework_id.is_some(), "{:?}", before.model);

    let second_log = dir.join("second.log");
    let mut second = spawn(
        &scheduler_args(&master, free_port(), &store, "Scaleio123"),
        &second_log,
        &[],
    );
    let status = wait_for("the second scheduler to exit", SETTLE, || {
        second.0.try_wait().expect("try_wait")
    });
    let stderr = read(&second_log);
    assert!(!status.success(), "second exited {status:?}\n{stderr}");
    let lock = format!("{}.lock", store.display());
    assert!(stderr.contains(&lock), "the lock is not named:\n{stderr}");
    assert!(
        stderr.contains(&format!("pid {} on ", first.0.id())),
        "the holder is not named:\n{stderr}"
    );

    assert!(
        first.0.try_wait().expect("try_wait").is_none(),
        "the first scheduler stopped:\n{}",
        read(&dir.join("first.log"))
    );
    let after = cluster::stored_state(&store);
    assert_eq!(after.model.framework_id, before.model.framework_id);
    let tasks = |p: &storage_framework::scheduler::model::Persisted| -> Vec<String> {
        p.model
            .nodes
            .values()
            .filter_map(|n| Some(n.task.as_ref()?.task_id.to_string()))
            .collect()
    };
    assert_eq!(tasks(&after), tasks(&before));
    assert_eq!(running(&m), AGENTS);
    let snap = m.snapshot().unwrap();
    assert_eq!(
        snap["frameworks"].as_array().map(Vec::len),
        Some(1),
        "{snap}"
    );
}
