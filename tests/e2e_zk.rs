//! End to end, state that survives its host: the real scheduler on the dev
//! cluster, whose master's `/flags` names a real ZooKeeper (Debian's package).
//!
//! - A scheduler SIGKILLed and started again from another working directory, with no store
//!   flag, finds its state in the master's ZooKeeper: it re-subscribes with the same
//!   framework id and launches no second executor.
//! - With credentials in that `zk` flag the scheduler's znodes are its own: a client without
//!   them cannot read, write or delete them, the restarted scheduler can.
//! - With nothing stored and its framework still active at the master, a scheduler refuses to
//!   register a second one, naming the framework and the flags that allow it, also when the
//!   master's framework list is many megabytes; when that list cannot be read it refuses to
//!   start unless `-framework.guard=false`.
//! - The static musl scheduler that ships reaches the master, ZooKeeper and the gateway by
//!   host name: musl's own resolver, not glibc's, turns them into addresses.

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
    let volume_user = [
        "-rexray.username=rexray-vol",
        "-rexray.password=Rexray-Zk-Pa55",
    ];
    let first = spawn(&m, &dir.join("sandbox-1"), &log1, &volume_user);
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
    // Without credentials every client of the ensemble reads the znodes: read raw, they
    // hold no executor secret and no gateway password, in clear or in base64.
    let mut secrets: Vec<String> = cluster::launched_secrets(&m).into_values().collect();
    assert_eq!(secrets.len(), AGENTS);
    secrets.push("Scaleio123".to_owned());
    secrets.push("Rexray-Zk-Pa55".to_owned());
    let tree = zk.read_tree("/storage-framework");
    let records = tree.iter().filter(|(p, _)| p.contains("/nodes/")).count();
    assert_eq!(
        records,
        AGENTS,
        "{:?}",
        tree.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    for (path, data) in &tree {
        let data = data
            .as_deref()
            .unwrap_or_else(|| panic!("{path} unreadable"));
        cluster::assert_no_secret(data, &secrets, path);
    }
    // Said once at start: without credentials the znodes are open to every client.
    let said = read(&log1)
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("world-readable and world-writable"))
        .count();
    assert_eq!(said, 1, "{}", read(&log1));
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

/// The master's `zk` flag with credentials: the scheduler authenticates and its znodes are
/// its own. A client without them can neither read, write nor delete them; the scheduler
/// started again elsewhere takes over with them; the password is in no log line.
#[test]
fn with_credentials_only_the_scheduler_reaches_its_znodes_across_a_restart() {
    use storage_framework::store::zk::wire::{op, Conn, Enc};
    const ZK_PASSWORD: &str = "Zk-Cred-Pa55";
    const NO_AUTH: i32 = -102;
    let dir = tempdir("credentials");
    let zk = zookeeper::ZooKeeper::start(&dir.join("zk"));
    let uri = format!("zk://sf-user:{ZK_PASSWORD}@127.0.0.1:{}/mesos", zk.port);
    let m = cluster(&dir, Some(uri));
    let log1 = dir.join("first.log");
    let first = spawn(&m, &dir.join("sandbox-1"), &log1, &[]);
    wait_for("every task running", SETTLE, || {
        let tasks = read(&log1)
            .lines()
            .filter(|l| l.contains(": task storage.") && l.ends_with(" running"))
            .count();
        (running(&m) == AGENTS && tasks >= AGENTS).then_some(())
    });
    let base = "/storage-framework/storage-framework";
    let mut anon = Conn::connect(
        &format!("127.0.0.1:{}", zk.port),
        10_000,
        None,
        Duration::from_secs(3),
    )
    .unwrap()
    .expect("session");
    let mut ask = |o: i32, path: &str| {
        let mut e = Enc::default();
        match o {
            op::SET_DATA => e.string(path).buf(b"{}").int(-1),
            op::DELETE => e.string(path).int(-1),
            _ => e.string(path).boolean(false),
        };
        anon.call(o, &e.0).unwrap().err
    };
    let state = format!("{base}/state");
    for path in [base, state.as_str()] {
        assert_eq!(ask(op::GET_DATA, path), NO_AUTH, "read {path}");
        assert_eq!(ask(op::SET_DATA, path), NO_AUTH, "write {path}");
    }
    assert_eq!(ask(op::GET_CHILDREN, base), NO_AUTH);
    assert_eq!(ask(op::DELETE, &state), NO_AUTH);
    drop(first); // SIGKILL

    let log2 = dir.join("second.log");
    let second = spawn(&m, &dir.join("sandbox-2"), &log2, &[]);
    wait_for("re-subscription", SETTLE, || {
        read(&log2).contains("(re-used)").then_some(())
    });
    assert_eq!(ask(op::SET_DATA, &state), NO_AUTH);
    for log in [&log1, &log2] {
        let text = read(log);
        assert!(text.contains("zk://sf-user:***@127.0.0.1"), "{text}");
        assert!(
            !text.contains(ZK_PASSWORD),
            "the ZooKeeper password in {}",
            log.display()
        );
        assert!(!text.contains("world-readable"), "{text}");
    }
    let most = master::max_concurrent_executors(&m.launch_log().unwrap(), "storage-executor.");
    assert!(most.values().all(|n| *n == 1), "{most:?}");
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

/// The machine's own name when it resolves to loopback (where the dev cluster listens),
/// else `localhost`: a second name proves more of the resolver than one.
fn own_loopback_name() -> String {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = name.trim();
    let loopback = (name, 0)
        .to_socket_addrs()
        .map(|mut a| a.any(|a| a.ip().is_loopback()))
        .unwrap_or(false);
    if !name.is_empty() && loopback {
        name.to_string()
    } else {
        "localhost".to_string()
    }
}

/// The musl scheduler `scripts/build-release.sh` made; `None` (the test skips) only when this
/// machine cannot build the musl target at all.
fn musl_scheduler() -> Option<PathBuf> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/last-build/storage-scheduler");
    if built.exists() {
        return Some(built);
    }
    let has = |cmd: &str, args: &[&str], want: &str| {
        Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(want))
    };
    let target = "x86_64-unknown-linux-musl";
    let buildable = has("rustup", &["target", "list", "--installed"], target)
        && has("sh", &["-c", "command -v musl-gcc"], "musl-gcc");
    assert!(
        !buildable,
        "{} missing: run scripts/build-release.sh first (scripts/test.sh does)",
        built.display()
    );
    eprintln!("SKIPPED: the {target} target or musl-gcc is not installed here, so no static scheduler can be built (scripts/build-release.sh installs both)");
    None
}

#[test]
fn the_static_scheduler_reaches_master_zookeeper_and_gateway_by_host_name() {
    let Some(scheduler) = musl_scheduler() else {
        return;
    };
    let dir = tempdir("names");
    let zk = zookeeper::ZooKeeper::start(&dir.join("zk"));
    let m = cluster(&dir, None);
    let password = "Scaleio123";
    let gateway = cluster::shared_gateway(password).addr().port();
    let name = own_loopback_name();
    let by_name = [
        format!("-uri=localhost:{}", m.addr().port()),
        "-store.type=zk".to_string(),
        format!("-store.uri=zk://{name}:{}/storage-by-name", zk.port),
        format!("-storage.lbgateway=localhost:{gateway}"),
    ];
    let args: Vec<String> = scheduler_args("unused", free_port(), Path::new("x"), password)
        .into_iter()
        .filter(|a| {
            !["-uri=", "-store.", "-storage.preconfig.gateway="]
                .iter()
                .any(|p| a.starts_with(p))
        })
        .chain(by_name.iter().cloned())
        .collect();
    assert!(
        !args.iter().any(|a| a.contains("127.0.0.1:")),
        "an address literal with a port is left: {args:?}"
    );
    let log = dir.join("scheduler.log");
    let sandbox = dir.join("sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    let _sched = Sched(
        Command::new(&scheduler)
            .args(&args)
            .current_dir(&sandbox)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("start the static storage-scheduler"),
    );
    // Every agent's task running: the master was subscribed to, the state saved in
    // ZooKeeper first (write ahead), and the storage cluster checked through the gateway.
    wait_for("every task running", SETTLE, || {
        let text = read(&log);
        let tasks = text
            .lines()
            .filter(|l| l.contains(": task storage.") && l.ends_with(" running"))
            .count();
        (running(&m) == AGENTS && tasks >= AGENTS).then_some(())
    });
    let text = read(&log);
    assert!(
        text.contains(&format!("state from zookeeper zk://{name}:")),
        "{text}"
    );
    assert!(
        std::fs::read_dir(&sandbox).unwrap().next().is_none(),
        "the state went to a file, not to ZooKeeper"
    );
    assert!(cluster::shared_gateway(password).snapshot()["requests"].as_u64() > Some(0));
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
