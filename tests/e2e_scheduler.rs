//! End to end: the real `storage-scheduler` and `storage-executor` binaries against the dev
//! cluster's Mesos master and agents (real child processes, real HTTP).
//!
//! The invariant under every fault: each agent runs exactly one storage executor, never
//! two at once, and a dead one is replaced under a new task id.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master::{self, LaunchEvent, MasterHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
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

/// Task ids the master handed to agents, in order, from its own launch record.
fn launched_tasks(m: &MasterHandle) -> Vec<(u64, String, String)> {
    m.launch_log()
        .expect("launch log")
        .into_iter()
        .filter(|r| r.event == LaunchEvent::TaskLaunched)
        .map(|r| (r.seq, r.agent, r.task.unwrap_or_default()))
        .collect()
}

/// The master's record of the whole run: no agent ever had two storage executor runs alive
/// at once (however briefly: the record is every start and end, not a sample).
fn assert_one_executor_per_agent(m: &MasterHandle) {
    let log = m.launch_log().expect("launch log");
    let most = master::max_concurrent_executors(&log, "storage-executor.");
    assert_eq!(most.len(), AGENTS, "{most:?}");
    for (agent, n) in &most {
        assert_eq!(*n, 1, "{agent} ran {n} storage executors at once: {log:#?}");
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
    let masters = format!("{},{}", m.addr(), m.standby_addr());
    let mut sched = Scheduler::start(&dir, &masters, free_port());

    // 1. Five agents, five executors, five launches in the master's record.
    let first = wait_for("5 running executors", SETTLE, || all_running(&m));
    let fw = wait_for("framework id", SETTLE, || sched.framework_id());
    let launches = launched_tasks(&m);
    assert_eq!(launches.len(), AGENTS, "{launches:?}");

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
    // Through the cut, the failover and the restart not one task was launched.
    assert_eq!(launched_tasks(&m), launches);

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

    // 6. A host reboot kills its executor (an agent process restart would not: checkpointed
    // executors reconnect, tests/e2e_node.rs) and brings its agent back under a new id; back
    // within the ping timeout, the old agent is removed (TASK_GONE; the longer outage that
    // leaves it unreachable is tests/e2e_node.rs'). That host gets a new task id.
    let restarted = &agents[3];
    let before = launched_tasks(&m).last().map_or(0, |l| l.0);
    let new_id = m
        .reboot_agent(restarted.index, Some(Duration::from_secs(1)))
        .expect("host reboot");
    assert_ne!(new_id, restarted.id);
    let after_restart = wait_for("a new task on the restarted agent", SETTLE, || {
        all_running(&m).filter(|r| r[&restarted.hostname] != after_crash[&restarted.hostname])
    });
    let new_task = &after_restart[&restarted.hostname];
    let relaunched: Vec<_> = launched_tasks(&m)
        .into_iter()
        .filter(|(seq, _, _)| *seq > before)
        .collect();
    assert_eq!(
        relaunched,
        [(
            relaunched[0].0,
            restarted.hostname.clone(),
            new_task.clone()
        )],
        "exactly one launch after the restart, on the restarted agent"
    );
    let ended = m
        .launch_log()
        .expect("launch log")
        .into_iter()
        .find(|r| {
            r.event == LaunchEvent::ExecutorTerminated
                && r.executor
                    == after_crash[&restarted.hostname].replacen("storage.", "storage-executor.", 1)
        })
        .expect("the restarted agent's executor ended");
    assert!(
        ended.seq > before && ended.seq < relaunched[0].0,
        "the new task came after the old executor ended"
    );
    for (host, task) in &after_crash {
        if *host != restarted.hostname {
            assert_eq!(
                &after_restart[host], task,
                "{host} was relaunched needlessly"
            );
        }
    }

    assert_one_executor_per_agent(&m);
    let log = sched.log_text();
    assert!(!log.contains("Scaleio123"), "the password reached the log");
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
    assert!(cluster::stored_state(&sched.store).model.nodes.is_empty());
}

/// The same scheduler speaking Mesos JSON (`-mesos.encoding=json`) on the wire.
#[test]
fn json_encoding_covers_every_agent() {
    let dir = tempdir("json");
    let m = cluster(&dir);
    let store = dir.join("state.json");
    let port = free_port();
    let mut args = scheduler_args(&m.addr().to_string(), port, &store, "Scaleio123");
    args.push("-mesos.encoding=json".to_string());
    let mut child = Command::new(scheduler_bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("scheduler");
    let running = wait_for("5 running executors over JSON", SETTLE, || all_running(&m));
    assert_eq!(running.len(), AGENTS);
    // The counters /metrics serves are the ones the scheduler really increments.
    let metric = |name: &str| -> u64 {
        let text = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
            .call()
            .ok()
            .and_then(|r| r.into_body().read_to_string().ok())
            .unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0)
    };
    wait_for("the scheduler's counters", SETTLE, || {
        (metric("storage_scheduler_offers_accepted_total") >= AGENTS as u64
            && metric(r#"storage_scheduler_calls_total{type="ACCEPT",result="ok"}"#)
                >= AGENTS as u64
            && metric(r#"storage_scheduler_events_total{type="UPDATE"}"#) >= AGENTS as u64
            && metric(r#"storage_scheduler_calls_total{type="ACKNOWLEDGE",result="ok"}"#)
                >= AGENTS as u64)
            .then_some(())
    });
    let _ = child.kill();
    let _ = child.wait();
}

// ---- behaviour under the master's own faults ----

/// A second instance subscribing with our framework id makes the master send ERROR
/// "Framework failed over" to the first one (Mesos' `Master::failoverFramework`). The first
/// instance stops, keeps the framework id (the framework and its executors live on), and
/// subscribes no more: the master still knows exactly one framework.
#[test]
fn failed_over_instance_stops_and_keeps_the_framework_id() {
    use storage_framework::mesos::client::{ClientConfig, SchedulerClient};
    use storage_framework::mesos::types::FrameworkInfo;
    use storage_framework::scheduler::master::subscription::subscribe_call;

    let dir = tempdir("failed-over");
    let m = cluster(&dir);
    let mut sched = Scheduler::start(&dir, &m.addr().to_string(), free_port());
    let running = wait_for("5 running executors", SETTLE, || all_running(&m));
    let fw = wait_for("framework id", SETTLE, || sched.framework_id());

    let info = FrameworkInfo {
        user: "root".into(),
        name: "storage-framework".into(),
        failover_timeout: Some(3600.0),
        checkpoint: Some(true),
        ..Default::default()
    };
    let mut other =
        SchedulerClient::new(&m.addr().to_string(), ClientConfig::default()).expect("client");
    let sub = other
        .subscribe(&subscribe_call(&info, Some(&fw)))
        .expect("the second instance subscribes");

    let exit = wait_for("the first instance to exit", SETTLE, || {
        sched.child.try_wait().ok().flatten()
    });
    assert_eq!(exit.code(), Some(1), "{}", sched.log_text());
    assert!(sched.log_text().contains("Framework failed over"));
    let saved = std::fs::read_to_string(&sched.store).expect("state file");
    assert!(
        saved.contains(&fw),
        "the framework id was forgotten: {saved}"
    );

    let snap = m.snapshot().expect("snapshot");
    let frameworks = snap["frameworks"].as_array().expect("frameworks");
    assert_eq!(frameworks.len(), 1, "a second framework registered: {snap}");
    assert_eq!(frameworks[0]["id"], fw.as_str());
    assert_eq!(frameworks[0]["stream_id"], sub.stream_id.as_str());
    assert_eq!(all_running(&m).as_ref(), Some(&running));
}

/// The master refuses the first ACCEPT. The scheduler notices (the sender reports
/// the failure), asks the master about the task, gives the offer back, and relaunches on
/// that agent once the master says it does not know the task.
#[test]
fn a_refused_accept_is_noticed_and_repaired() {
    let dir = tempdir("lost-accept");
    let m = cluster(&dir);
    m.drop_next_call("ACCEPT").expect("fault");
    let sched = Scheduler::start(&dir, &m.addr().to_string(), free_port());
    wait_for("5 running executors", SETTLE, || all_running(&m));
    let log = sched.log_text();
    assert!(log.contains("was not taken"), "{log}");
    assert_one_executor_per_agent(&m);
}

/// After a failover the agents re-register late; reconciliation about their tasks is
/// answered only then. The scheduler asks again, with backoff, for
/// what is still unanswered, and launches nothing new meanwhile.
#[test]
fn reconciliation_is_repeated_until_late_agents_answer() {
    let dir = tempdir("late-reconcile");
    let m = cluster(&dir);
    let sched = Scheduler::start(&dir, &m.addr().to_string(), free_port());
    let running = wait_for("5 running executors", SETTLE, || all_running(&m));
    let before = sched.log_text().len();
    // Two agents stay away until two reconciliations have been answered without them, so
    // the order of answers does not depend on how fast this machine is.
    let late = [1, 3];
    m.fail_over_with_late_agents(&late).expect("failover");
    // Asked about all five, then again about exactly the two that did not answer.
    let counts = wait_for("a repeated, smaller reconciliation", SETTLE, || {
        let log = sched.log_text();
        let counts: Vec<usize> = log[before..]
            .lines()
            .filter_map(|l| l.split("reconciling ").nth(1))
            .filter_map(|rest| rest.split(' ').next()?.parse().ok())
            .collect();
        (counts.len() >= 2).then_some(counts)
    });
    assert_eq!(counts[..2], [AGENTS, late.len()], "{counts:?}");
    assert_eq!(all_running(&m).as_ref(), Some(&running));
    assert_one_executor_per_agent(&m);
}

/// Agents whose resources are mostly reserved for the scheduler's role (`-role=storage`):
/// too little is unreserved for any node, so every launch must carry the reservation (the
/// role) in its resources, or the master refuses it as more than available.
#[test]
fn launches_on_resources_reserved_for_the_role() {
    let dir = tempdir("reserved");
    let m = master::start(master::MasterConfig {
        agents: AGENTS,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(cluster::host_standins(None)),
        agent_resources: master::AgentResources {
            cpus: 0.2,
            mem: 128.0,
            reserved: Some(master::Reservation {
                role: "storage".into(),
                cpus: 4.0,
                mem: 8192.0,
            }),
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("dev cluster");
    let store = dir.join("state.json");
    let mut args = scheduler_args(&m.addr().to_string(), free_port(), &store, "Scaleio123");
    args.push("-role=storage".to_string());
    // Killed on drop, also when the test fails.
    let log = dir.join("scheduler.log");
    let mut sched = Scheduler {
        child: Command::new(scheduler_bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("scheduler"),
        port: 0,
        store,
        log: log.clone(),
        masters: m.addr().to_string(),
    };
    let running = wait_for("5 running executors on reserved resources", SETTLE, || {
        all_running(&m)
    });
    assert_eq!(running.len(), AGENTS);
    // Each launch was accepted at once: no task ever failed for want of resources.
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("TASK_ERROR"), "{text}");
    assert_eq!(
        m.launch_log()
            .unwrap()
            .iter()
            .filter(|r| r.event == LaunchEvent::TaskLaunched)
            .count(),
        AGENTS
    );
    let _ = sched.child.kill();
}

/// A cluster whose master marks a silent agent unreachable 3 s after it stops answering.
fn partition_cluster(dir: &Path) -> Arc<MasterHandle> {
    Arc::new(
        master::start(master::MasterConfig {
            agents: AGENTS,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            status_update_retry: Duration::from_secs(1),
            agent_removal_timeout: Duration::from_secs(3),
            host_standins: Some(cluster::host_standins(None)),
            ..Default::default()
        })
        .expect("dev cluster"),
    )
}

/// The node of `host` in the scheduler's `/api/state`.
fn node_of(sched: &Scheduler, host: &str) -> Option<Value> {
    sched.state()?["model"]["nodes"]
        .as_object()?
        .values()
        .find(|n| n["hostname"] == host)
        .cloned()
}

/// The newest entry of the master's launch record (0 when empty).
fn last_seq(m: &MasterHandle) -> u64 {
    m.launch_log()
        .expect("launch log")
        .last()
        .map_or(0, |r| r.seq)
}

/// Executor starts and task launches on `host` recorded after entry `after`.
fn launches_since(m: &MasterHandle, host: &str, after: u64) -> Vec<master::LaunchRecord> {
    m.launch_log()
        .expect("launch log")
        .into_iter()
        .filter(|r| r.seq > after && r.agent == host && r.event != LaunchEvent::ExecutorTerminated)
        .collect()
}

/// `f`'s first answer within `within`, polled; `None` when it gave none. For asserting
/// that something does not happen over a span a wrong scheduler would act in.
fn any_within<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = std::time::Instant::now() + within;
    while std::time::Instant::now() < end {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f()
}

/// The task of agent-1 becomes unreachable (a partition): its node waits where it was (not
/// lost), and nothing is launched on that host meanwhile. The partition heals with the task
/// still running: the node resumes, nothing relaunched.
#[test]
fn an_unreachable_agent_waits_and_resumes_with_its_task() {
    let dir = tempdir("partition-heal");
    let m = partition_cluster(&dir);
    let sched = Scheduler::start(&dir, &m.addr().to_string(), free_port());
    let running = wait_for("5 running executors", SETTLE, || all_running(&m));
    let host = "agent-1";
    let at_work = |n: &Value| !matches!(n["phase"].as_str(), Some("launching" | "lost" | "failed"));
    wait_for("agent-1's node at work", SETTLE, || {
        node_of(&sched, host).filter(at_work)
    });
    let mark = last_seq(&m);
    m.partition_agent(0).expect("partition");
    wait_for("the scheduler to hear TASK_UNREACHABLE", SETTLE, || {
        node_of(&sched, host).filter(|n| n["task"]["state"] == "TASK_UNREACHABLE")
    });
    // A scheduler that took the task for dead would relaunch after its first failure
    // backoff (5 s): watch twice as long.
    let early = any_within(Duration::from_secs(10), || {
        launches_since(&m, host, mark).into_iter().next()
    });
    assert!(
        early.is_none(),
        "launched on an unreachable agent: {early:?}"
    );
    m.heal_agent(0, true).expect("heal");
    let node = wait_for("agent-1's node to resume", SETTLE, || {
        node_of(&sched, host).filter(|n| {
            n["task"]["state"] == "TASK_RUNNING" && at_work(n) && n["last_error"].is_null()
        })
    });
    assert_eq!(node["task"]["task_id"], running[host].as_str());
    assert_eq!(node["failures"], 0);
    assert_eq!(launches_since(&m, host, mark), vec![]);
    assert_eq!(all_running(&m).as_ref(), Some(&running));
    assert_one_executor_per_agent(&m);
}

/// agent-2 comes back from its partition without its task: the master says nothing of it
/// until asked (reconciliation: TASK_GONE). The scheduler asks once the agent is listed
/// again and relaunches the node, once.
#[test]
fn an_agent_back_without_its_task_is_relaunched_once() {
    let dir = tempdir("partition-lost");
    let m = partition_cluster(&dir);
    let sched = Scheduler::start(&dir, &m.addr().to_string(), free_port());
    let running = wait_for("5 running executors", SETTLE, || all_running(&m));
    let host = "agent-2";
    let mark = last_seq(&m);
    m.partition_agent(1).expect("partition");
    wait_for("the scheduler to hear TASK_UNREACHABLE", SETTLE, || {
        node_of(&sched, host).filter(|n| n["task"]["state"] == "TASK_UNREACHABLE")
    });
    assert_eq!(launches_since(&m, host, mark), vec![]);
    m.heal_agent(1, false).expect("heal without the task");
    // The agent watcher polls every 30 s; then the first failure backoff.
    let now = wait_for("agent-2 relaunched", Duration::from_secs(90), || {
        all_running(&m).filter(|r| r[host] != running[host])
    });
    let launched: Vec<_> = launches_since(&m, host, mark)
        .into_iter()
        .filter(|r| r.event == LaunchEvent::TaskLaunched)
        .collect();
    assert_eq!(launched.len(), 1, "{launched:?}");
    assert_eq!(launched[0].task.as_deref(), Some(now[host].as_str()));
    let log = sched.log_text();
    assert!(log.contains("TASK_GONE"), "{log}");
    for other in running.keys().filter(|h| *h != host) {
        assert_eq!(now[other], running[other]);
    }
    assert_one_executor_per_agent(&m);
}

/// The offer of agent-3's first launch is rescinded just before the ACCEPT lands: the
/// master answers TASK_DROPPED (REASON_INVALID_OFFERS) and the agent never sees the task.
/// The launch never started, so the node is relaunched without a failure counted.
#[test]
fn a_launch_whose_offer_was_rescinded_is_relaunched_at_once() {
    let dir = tempdir("rescinded");
    let m = cluster(&dir);
    m.rescind_before_next_accept(2).expect("fault");
    let sched = Scheduler::start(&dir, &m.addr().to_string(), free_port());
    let running = wait_for("5 running executors", SETTLE, || all_running(&m));
    let log = sched.log_text();
    let dropped = log
        .lines()
        .find(|l| l.contains("TASK_DROPPED"))
        .unwrap_or_else(|| panic!("no TASK_DROPPED in the log: {log}"));
    assert!(dropped.contains("REASON_INVALID_OFFERS"), "{dropped}");
    let host = "agent-3";
    // The relaunch follows within the first failure backoff (5 s), which it does not wait.
    let relaunch = log
        .lines()
        .skip_while(|l| !l.contains("TASK_DROPPED"))
        .find(|l| l.contains("launching") && l.contains(&format!("agent {host} ")))
        .unwrap_or_else(|| panic!("no relaunch after TASK_DROPPED: {log}"));
    let waited = log_ms(relaunch) - log_ms(dropped);
    assert!(waited < 5_000, "relaunched {waited} ms after TASK_DROPPED");
    let node = node_of(&sched, host).expect("agent-3's node");
    assert_eq!(node["failures"], 0, "{node}");
    let launched: Vec<_> = launched_tasks(&m)
        .into_iter()
        .filter(|(_, agent, _)| agent == host)
        .collect();
    assert_eq!(launched.len(), 1, "{launched:?}");
    assert_eq!(launched[0].2, running[host]);
    assert_one_executor_per_agent(&m);
}

/// The time of day of a scheduler log line (`[2026-01-02T03:04:05.678Z ...`), in ms.
fn log_ms(line: &str) -> i64 {
    let time = line
        .split('T')
        .nth(1)
        .and_then(|t| t.get(..12))
        .unwrap_or_else(|| panic!("no time in {line:?}"));
    let parts: Vec<f64> = time
        .split(':')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("bad time in {line:?}")))
        .collect();
    ((parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]) * 1000.0).round() as i64
}
