//! End to end: the real `storage-scheduler` and `storage-executor` binaries against the dev
//! cluster's Mesos master and agents (real child processes, real HTTP).
//!
//! The invariant under every fault: each agent runs exactly one storage executor, never
//! two at once, and a dead one is replaced under a new task id.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master::{self, MasterHandle};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const AGENTS: usize = 5;

struct Scheduler {
    child: Child,
    port: u16,
    store: PathBuf,
    log: PathBuf,
    masters: String,
}

impl Scheduler {
    fn start(dir: &Path, masters: &str, port: u16) -> Scheduler {
        let store = dir.join("scheduler-state.json");
        let log = dir.join("scheduler.log");
        let mut s = Scheduler {
            child: Command::new("true").spawn().expect("placeholder"),
            port,
            store,
            log,
            masters: masters.to_owned(),
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        self.child = Command::new(scheduler_bin())
            .args(scheduler_args(
                &self.masters,
                self.port,
                &self.store,
                "Scaleio123",
            ))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start storage-scheduler");
    }

    fn state(&self) -> Option<Value> {
        let body = ureq::get(&format!("http://127.0.0.1:{}/api/state", self.port))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        serde_json::from_str(&body).ok()
    }

    fn framework_id(&self) -> Option<String> {
        self.state()?
            .pointer("/model/framework_id")?
            .as_str()
            .map(str::to_owned)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Running (or starting) storage executors per agent hostname, from the master's view.
fn active_executors(m: &MasterHandle) -> BTreeMap<String, Vec<(String, String)>> {
    let snap = m.snapshot().expect("master snapshot");
    let mut out = BTreeMap::new();
    for a in snap["agents"].as_array().into_iter().flatten() {
        let host = a["hostname"].as_str().unwrap_or("?").to_owned();
        let entry: &mut Vec<(String, String)> = out.entry(host).or_default();
        for e in a["executors"].as_array().into_iter().flatten() {
            if !e["id"]
                .as_str()
                .unwrap_or("")
                .starts_with("storage-executor.")
            {
                continue;
            }
            let state = e["state"].as_str().unwrap_or("");
            if matches!(state, "TERMINATED" | "TERMINATING") {
                continue;
            }
            for t in e["tasks"].as_array().into_iter().flatten() {
                let ts = t["state"].as_str().unwrap_or("");
                if matches!(
                    ts,
                    "TASK_STAGING" | "TASK_STARTING" | "TASK_RUNNING" | "TASK_KILLING"
                ) {
                    entry.push((t["id"].as_str().unwrap_or("").to_owned(), ts.to_owned()));
                }
            }
        }
    }
    out
}

/// Watches the master in the background: the most executors ever active at once on one
/// agent, and every task id ever seen.
struct Monitor {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<(usize, BTreeSet<String>)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    fn start(m: Arc<MasterHandle>) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new((0usize, BTreeSet::new())));
        let (s, st) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let active = active_executors(&m);
                let mut g = st.lock().unwrap();
                for tasks in active.values() {
                    g.0 = g.0.max(tasks.len());
                    for (t, _) in tasks {
                        g.1.insert(t.clone());
                    }
                }
                drop(g);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Monitor {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    fn max_per_agent(&self) -> usize {
        self.seen.lock().unwrap().0
    }

    fn tasks(&self) -> BTreeSet<String> {
        self.seen.lock().unwrap().1.clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every agent runs exactly one storage executor whose task is TASK_RUNNING; returns the
/// task ids by agent.
fn all_running(m: &MasterHandle) -> Option<BTreeMap<String, String>> {
    let active = active_executors(m);
    if active.len() != AGENTS {
        return None;
    }
    let mut out = BTreeMap::new();
    for (host, tasks) in active {
        match tasks.as_slice() {
            [(t, s)] if s == "TASK_RUNNING" => {
                out.insert(host, t.clone());
            }
            _ => return None,
        }
    }
    Some(out)
}

fn cluster(dir: &Path) -> Arc<MasterHandle> {
    Arc::new(
        master::start(master::MasterConfig {
            agents: AGENTS,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            status_update_retry: Duration::from_secs(1),
            host_standins: Some(cluster::host_standins(None)),
            ..Default::default()
        })
        .expect("dev cluster"),
    )
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SETTLE: Duration = Duration::from_secs(60);

#[test]
fn one_executor_per_agent_through_faults() {
    let dir = tempdir("faults");
    let m = cluster(&dir);
    let monitor = Monitor::start(m.clone());
    let masters = format!("{},{}", m.addr(), m.standby_addr());
    let mut sched = Scheduler::start(&dir, &masters, free_port());

    // 1. Five agents, five executors.
    let first = wait_for("5 running executors", SETTLE, || all_running(&m));
    let fw = wait_for("framework id", SETTLE, || sched.framework_id());
    // The monitor samples on its own clock: wait until it has seen the launch too.
    wait_for("the monitor to see every launch", SETTLE, || {
        (monitor.tasks().len() >= AGENTS).then_some(())
    });
    assert_eq!(monitor.tasks().len(), AGENTS, "{:?}", monitor.tasks());

    // 2. A cut event stream: the scheduler re-subscribes (same id) and launches nothing.
    let cut = m.cut_scheduler_stream(None).expect("cut stream");
    assert!(cut >= 1, "no stream was open to cut");
    wait_for("re-subscription after the cut", SETTLE, || {
        (sched.log_text().matches("subscribed as framework").count() >= 2).then_some(())
    });
    assert_eq!(all_running(&m).as_ref(), Some(&first));

    // 3. Master failover: the old master answers 307; the scheduler follows.
    m.fail_over().expect("failover");
    wait_for("subscription to the new leader", SETTLE, || {
        (sched.log_text().matches("subscribed as framework").count() >= 3).then_some(())
    });
    assert_eq!(all_running(&m).as_ref(), Some(&first));

    // 4. SIGKILL and restart: same framework id, no second executor anywhere.
    sched.child.kill().expect("SIGKILL");
    sched.child.wait().expect("reap");
    sched.spawn();
    wait_for("re-subscription after restart", SETTLE, || {
        (sched.log_text().matches("(re-used)").count() >= 3).then_some(())
    });
    assert_eq!(sched.framework_id().as_deref(), Some(fw.as_str()));
    assert_eq!(all_running(&m).as_ref(), Some(&first));

    // 5. An executor crash: relaunched on that agent under a new task id.
    let agents = m.agents().expect("agents");
    let victim = &agents[1];
    let victim_task = first[&victim.hostname].clone();
    let exec_id = victim_task.replacen("storage.", "storage-executor.", 1);
    m.kill_executor(victim.index, &exec_id)
        .expect("kill executor");
    let after_crash = wait_for("relaunch after the crash", SETTLE, || {
        all_running(&m).filter(|r| r[&victim.hostname] != victim_task)
    });
    for (host, task) in &first {
        if *host != victim.hostname {
            assert_eq!(&after_crash[host], task, "{host} was relaunched needlessly");
        }
    }

    // 6. An agent restart: whatever it does to its executor, the agent ends up with one.
    m.restart_agent(agents[3].index).expect("restart agent");
    wait_for("all running after the agent restart", SETTLE, || {
        all_running(&m).filter(|r| r.len() == AGENTS)
    });

    assert_eq!(
        monitor.max_per_agent(),
        1,
        "an agent ran two storage executors at once"
    );
    let log = sched.log_text();
    assert!(!log.contains("Scaleio123"), "the password reached the log");
    drop(monitor);
    drop(sched);
}

#[test]
fn sigterm_keeps_executors_and_teardown_removes_them() {
    let dir = tempdir("teardown");
    let m = cluster(&dir);
    let masters = m.addr().to_string();
    let mut sched = Scheduler::start(&dir, &masters, free_port());
    let running = wait_for("5 running executors", SETTLE, || all_running(&m));

    // SIGTERM: a clean stop, exit 0; the framework and its executors stay.
    let pid = sched.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let exit = sched.child.wait().expect("wait");
    assert_eq!(exit.code(), Some(0), "{}", sched.log_text());
    assert_eq!(all_running(&m).as_ref(), Some(&running));

    // -teardown: unregisters the framework; Mesos kills every executor.
    let mut args = scheduler_args(&masters, 1, &sched.store, "Scaleio123");
    args.push("-teardown".to_string());
    let out = Command::new(scheduler_bin())
        .args(&args)
        .output()
        .expect("run -teardown");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("every executor gone", SETTLE, || {
        active_executors(&m)
            .values()
            .all(|tasks| tasks.is_empty())
            .then_some(())
    });
    let saved = std::fs::read_to_string(&sched.store).expect("state file");
    assert!(!saved.contains("framework_id"), "{saved}");
}

/// The same scheduler speaking Mesos JSON (`-mesos.encoding=json`) on the wire.
#[test]
fn json_encoding_covers_every_agent() {
    let dir = tempdir("json");
    let m = cluster(&dir);
    let store = dir.join("state.json");
    let mut args = scheduler_args(&m.addr().to_string(), free_port(), &store, "Scaleio123");
    args.push("-mesos.encoding=json".to_string());
    let mut child = Command::new(scheduler_bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("scheduler");
    let running = wait_for("5 running executors over JSON", SETTLE, || all_running(&m));
    assert_eq!(running.len(), AGENTS);
    let _ = child.kill();
    let _ = child.wait();
}
