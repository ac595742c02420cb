//! Interoperability with a real Mesos client library: mesos-go's v1 scheduler (`httpsched`)
//! and executor (`lib/executor`) libraries, as Debian ships them
//! (`golang-github-mesos-mesos-go-dev`), drive the dev cluster in every combination of
//! protobuf and JSON. The Go programs are in `tests/interop/src/interop/`; they are built here
//! in GOPATH mode, offline, into `target/tmp/interop/`. Missing Go or packages fail the test
//! (scripts/test.sh installs them), they never skip it.
//!
//! The scheduler is pointed at the standby master, so it must follow the 307; then it
//! subscribes, launches one task with the Go executor on the first offer, acknowledges its
//! updates, reconciles explicitly and implicitly, waits for heartbeats, kills the task and
//! tears the framework down. Each program reports its steps; the test checks them.

use devcluster::master::{self, MasterConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const GOCODE: &str = "/usr/share/gocode";
const DEADLINE: Duration = Duration::from_secs(90);

struct GoPrograms {
    scheduler: PathBuf,
    executor: PathBuf,
}

/// Builds both Go programs once per test run.
fn go_programs() -> &'static GoPrograms {
    static BUILT: OnceLock<GoPrograms> = OnceLock::new();
    BUILT.get_or_init(|| {
        let go = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
            .expect("`go` not on PATH: install golang-go (scripts/test.sh does)");
        let httpsched =
            Path::new(GOCODE).join("src/github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched");
        assert!(
            httpsched.is_dir(),
            "{} missing: install golang-github-mesos-mesos-go-dev (scripts/test.sh does)",
            httpsched.display()
        );
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop");
        let build = |name: &str| {
            let bin = out.join(format!("interop-{name}"));
            let result = Command::new(&go)
                .args(["build", "-o"])
                .arg(&bin)
                .arg(format!("interop/{name}"))
                .env("GOPATH", format!("{}:{GOCODE}", src.display()))
                .env("GO111MODULE", "off")
                .env("GOFLAGS", "")
                .env("GOPROXY", "off")
                .env("GOCACHE", out.join("gocache"))
                .current_dir(&src)
                .output()
                .expect("run go build");
            assert!(
                result.status.success(),
                "go build interop/{name} failed:\n{}",
                String::from_utf8_lossy(&result.stderr)
            );
            bin
        };
        GoPrograms {
            scheduler: build("scheduler"),
            executor: build("executor"),
        }
    })
}

/// Waits for `child` to exit by the deadline (killing it past that) and returns its stdout.
fn run_to_end(mut cmd: Command, what: &str) -> (bool, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let deadline = Instant::now() + DEADLINE;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn has_line(report: &str, line: &str) -> bool {
    report.lines().any(|l| l.trim_end() == line)
}

fn interop(scheduler_codec: &str, executor_codec: &str) {
    let progs = go_programs();
    let cluster = master::start(MasterConfig {
        agents: 1,
        heartbeat_interval: Duration::from_millis(300),
        allocation_interval: Duration::from_millis(50),
        ..Default::default()
    })
    .expect("dev cluster starts");
    let standby = cluster.standby_addr();
    let leader = cluster.leader_addr().expect("leader");
    let exec_report = cluster.work_dir().join(format!(
        "executor-{scheduler_codec}-{executor_codec}.report"
    ));

    let mut cmd = Command::new(&progs.scheduler);
    cmd.arg(format!("-master=http://{standby}/api/v1/scheduler"))
        .arg(format!("-codec={scheduler_codec}"))
        .arg(format!("-executor={}", progs.executor.display()))
        .arg(format!("-executor-codec={executor_codec}"))
        .arg(format!("-executor-report={}", exec_report.display()))
        .arg(format!("-timeout={}s", DEADLINE.as_secs() - 10));
    let (ok, sched) = run_to_end(cmd, "the interop scheduler");
    let executor = std::fs::read_to_string(&exec_report).unwrap_or_default();
    let context = format!("scheduler said:\n{sched}\nexecutor said:\n{executor}");
    assert!(ok, "the scheduler failed\n{context}");

    // The standby answered 307; the client followed it to the leader.
    assert!(
        has_line(
            &sched,
            &format!("REPORT exchanges [{standby}=307 {leader}=200]")
        ),
        "{context}"
    );
    let framework = format!("interop-{scheduler_codec}");
    for line in [
        "REPORT launched interop-task on agent-1".to_string(),
        "REPORT update interop-task TASK_RUNNING reason=none".into(),
        "REPORT acknowledged TASK_RUNNING".into(),
        "REPORT message from interop-exec: hello from interop-exec".into(),
        "REPORT reconciled explicit TASK_RUNNING".into(),
        "REPORT reconciled implicit TASK_RUNNING".into(),
        "REPORT acknowledged TASK_KILLED".into(),
        "REPORT teardown".into(),
        "REPORT stream closed after teardown".into(),
        "REPORT done".into(),
    ] {
        assert!(has_line(&sched, &line), "no `{line}`\n{context}");
    }
    let heartbeats: u32 = sched
        .lines()
        .find_map(|l| l.strip_prefix("REPORT heartbeats "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no heartbeats reported\n{context}"));
    assert!(heartbeats >= 2, "{context}");

    // The executor shuts down after the teardown; its report is complete then.
    let deadline = Instant::now() + DEADLINE;
    let executor = loop {
        let text = std::fs::read_to_string(&exec_report).unwrap_or_default();
        if has_line(&text, "shutdown") || text.contains("FAIL") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let context = format!("scheduler said:\n{sched}\nexecutor said:\n{executor}");
    assert!(!executor.contains("FAIL"), "{context}");
    for line in [
        "config executor=interop-exec checkpoint=true grace=5s".to_string(),
        format!("subscribed agent=agent-1 framework={framework}"),
        "launch interop-task".into(),
        "sent interop-task TASK_RUNNING".into(),
        "acknowledged interop-task".into(),
        "kill interop-task".into(),
        "sent interop-task TASK_KILLED".into(),
        "shutdown".into(),
    ] {
        assert!(has_line(&executor, &line), "no `{line}`\n{context}");
    }
    let acks = executor
        .lines()
        .filter(|l| *l == "acknowledged interop-task")
        .count();
    assert_eq!(acks, 2, "{context}");
    cluster.shutdown();
}

#[test]
fn mesos_go_protobuf_scheduler_and_protobuf_executor() {
    interop("protobuf", "protobuf");
}

#[test]
fn mesos_go_json_scheduler_and_json_executor() {
    interop("json", "json");
}

#[test]
fn mesos_go_protobuf_scheduler_and_json_executor() {
    interop("protobuf", "json");
}

#[test]
fn mesos_go_json_scheduler_and_protobuf_executor() {
    interop("json", "protobuf");
}
