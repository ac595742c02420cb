//! The operator's path, end to end: `scripts/deploy.sh` posts an app definition to the
//! Marathon-compatible launcher, which fetches both binaries over HTTP and starts the
//! scheduler with `$PORT`; the scheduler then puts an executor on every agent. Also: what
//! deploy.sh refuses, `--dry-run`, `--help`, `--password-in-env`, and a definition written for
//! the earlier ScaleIO framework deployed unchanged apart from the binary names.
//!
//! What is deployed is what ships: the static musl binaries `scripts/build-release.sh` made,
//! run by the launcher under the app's `mem` and `cpus`, enforced as Mesos' isolators would.
//! A scheduler that outgrew its 32 MB would be OOM-killed here, as in production.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/schema.rs"]
mod schema;

use cluster::{release_artifact, wait_for};
use devcluster::{launcher, master};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PASSWORD: &str = "Scaleio123";

/// Serves the two binaries as `{base}/storage-scheduler` and `{base}/storage-executor`.
fn serve_binaries() -> (String, Arc<tiny_http::Server>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
    let addr = server.server_addr().to_ip().expect("ip");
    let (sched, exec) = (
        release_artifact("storage-scheduler"),
        release_artifact("storage-executor"),
    );
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let file = match req.url() {
                "/build/storage-scheduler" => Some(&sched),
                "/build/storage-executor" => Some(&exec),
                _ => None,
            };
            let _ = match file.and_then(|f| std::fs::File::open(f).ok()) {
                Some(f) => req.respond(tiny_http::Response::from_file(f)),
                None => req.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    (format!("http://{addr}/build"), server)
}

struct Cluster {
    dir: PathBuf,
    master: master::MasterHandle,
    launcher: launcher::LauncherHandle,
}

/// A launcher alone, for what deploy.sh does before any scheduler runs.
fn launcher_only(name: &str) -> (PathBuf, launcher::LauncherHandle) {
    let dir = std::env::temp_dir().join(format!("e2e-deploy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let l = launcher::start(launcher::LauncherConfig {
        work_dir: dir.join("launcher"),
        ..Default::default()
    })
    .expect("launcher");
    (dir, l)
}

fn cluster(name: &str, agents: usize) -> Cluster {
    let dir = std::env::temp_dir().join(format!("e2e-deploy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let master = master::start(master::MasterConfig {
        agents,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("master");
    let launcher = launcher::start(launcher::LauncherConfig {
        work_dir: dir.join("launcher"),
        ..Default::default()
    })
    .expect("launcher");
    Cluster {
        dir,
        master,
        launcher,
    }
}

/// The dev gateway the scheduler checks before subscribing, as `ip:port`.
fn gateway() -> &'static str {
    let addr = cluster::shared_gateway(PASSWORD).addr().to_string();
    Box::leak(addr.into_boxed_str())
}

/// The storage-cluster values of a pre-configured deployment on the dev cluster.
fn storage_args() -> Vec<&'static str> {
    vec![
        "--pd",
        "default",
        "--pool",
        "default",
        "--primary",
        "127.0.0.1",
        "--secondary",
        "127.0.0.2",
        "--tiebreaker",
        "127.0.0.3",
        "--gateway",
        gateway(),
    ]
}

fn deploy(args: &[&str]) -> Output {
    Command::new(Path::new(ROOT).join("scripts/deploy.sh"))
        .args(args)
        .env("STORAGE_GATEWAY_PASSWORD", PASSWORD)
        .env_remove("STORAGE_LAUNCHER")
        .env_remove("STORAGE_MASTER")
        .output()
        .expect("run deploy.sh")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until each of the `n` agents runs one of our executors with a running task.
fn wait_covered(m: &master::MasterHandle, n: usize) {
    wait_for(
        &format!("an executor running on each of the {n} agents"),
        Duration::from_secs(90),
        || {
            let snap = m.snapshot().ok()?;
            let agents = snap["agents"].as_array()?;
            let covered = agents
                .iter()
                .filter(|a| {
                    a["executors"].as_array().is_some_and(|es| {
                        es.iter().any(|e| {
                            e["id"]
                                .as_str()
                                .unwrap_or("")
                                .starts_with("storage-executor.")
                                && e["tasks"].as_array().is_some_and(|ts| {
                                    ts.iter().any(|t| t["state"] == "TASK_RUNNING")
                                })
                        })
                    })
                })
                .count();
            (covered == n).then_some(())
        },
    );
}

/// The scheduler app as the launcher holds it (GET /v2/apps/storage-scheduler).
fn launcher_app(l: &launcher::LauncherHandle) -> serde_json::Value {
    let body = ureq::get(&format!("{}/v2/apps/storage-scheduler", l.url()))
        .call()
        .expect("GET the app")
        .into_body()
        .read_to_string()
        .expect("app body");
    serde_json::from_str::<serde_json::Value>(&body).expect("app JSON")["app"].clone()
}

/// Apps the launcher holds (GET /v2/apps).
fn launcher_apps(l: &launcher::LauncherHandle) -> Vec<serde_json::Value> {
    let body = ureq::get(&format!("{}/v2/apps", l.url()))
        .call()
        .expect("GET /v2/apps")
        .body_mut()
        .read_to_string()
        .expect("body");
    let doc: serde_json::Value = serde_json::from_str(&body).expect("json");
    doc["apps"].as_array().cloned().unwrap_or_default()
}

/// (pid, argv, environment) of every storage-scheduler process started under `dir`.
fn schedulers_under(dir: &Path) -> Vec<(u32, String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cwd.starts_with(dir) && cmdline.starts_with("./storage-scheduler ") {
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            found.push((pid, cmdline, String::from_utf8_lossy(&environ).into_owned()));
        }
    }
    found
}

#[test]
fn deploy_script_brings_up_scheduler_and_executors() {
    let c = cluster("custom", 3);
    let (base, _files) = serve_binaries();
    let launcher = c.launcher.addr().to_string();
    let master = c.master.addr().to_string();
    let mut args = vec![
        "--custom",
        &base,
        "--launcher",
        &launcher,
        "--master",
        &master,
    ];
    args.extend(storage_args());
    let out = deploy(&args);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "deploy.sh failed:\n{stdout}\n{stderr}"
    );
    // The launcher's answer is printed: the created app and its deployment.
    assert!(
        stdout.contains("answered 201") && stdout.contains("app /storage-scheduler"),
        "{stdout}"
    );
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));

    // The launcher runs the scheduler; the scheduler covers every agent.
    wait_covered(&c.master, 3);

    // Under its limits all along: the first scheduler task still runs, none ever failed.
    let app = launcher_app(&c.launcher);
    assert!(
        app["lastTaskFailure"].is_null(),
        "the scheduler task failed: {}",
        app["lastTaskFailure"]
    );
    assert_eq!(app["tasks"].as_array().map(Vec::len), Some(1), "{app}");
    let stats = ureq::get(&format!("{}/monitor/statistics", c.launcher.url()))
        .call()
        .expect("statistics")
        .into_body()
        .read_to_string()
        .expect("statistics body");
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("statistics JSON");
    let s = &stats[0]["statistics"];
    assert_eq!(s["mem_limit_bytes"], 32 * 1024 * 1024, "{stats}");
    eprintln!(
        "scheduler under the launcher: max RSS {} bytes, {} of {} periods throttled",
        s["mem_max_rss_bytes"], s["cpus_nr_throttled"], s["cpus_nr_periods"]
    );

    // Posting the same app again: the launcher refuses it (409, as Marathon does), and
    // deploy.sh updates the app instead (PUT), saying so with the deployment's id.
    let again = deploy(&args);
    let (stdout, stderr) = text(&again);
    assert_eq!(again.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("409")
            && stderr.contains("An app with id [/storage-scheduler] already exists"),
        "{stderr}"
    );
    assert!(
        stdout.contains("updated the existing app /storage-scheduler (deploymentId "),
        "{stdout}"
    );
}

/// `--password-in-env`: the scheduler gets the password from its environment, so the
/// process listing on the agent does not show it; it still deploys and covers the agents.
#[test]
fn password_in_env_keeps_it_out_of_the_process_listing() {
    let c = cluster("pwenv", 2);
    let (base, _files) = serve_binaries();
    let launcher = c.launcher.addr().to_string();
    let master = c.master.addr().to_string();
    let mut args = vec![
        "--custom",
        &base,
        "--launcher",
        &launcher,
        "--master",
        &master,
        "--password-in-env",
    ];
    args.extend(storage_args());
    let out = deploy(&args);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "deploy.sh failed:\n{stdout}\n{stderr}"
    );

    let apps = launcher_apps(&c.launcher);
    assert_eq!(apps.len(), 1);
    let cmd = apps[0]["cmd"].as_str().unwrap();
    assert!(!cmd.contains("-storage.password"), "{cmd}");
    assert_eq!(apps[0]["env"]["STORAGE_PASSWORD"], PASSWORD);

    wait_covered(&c.master, 2);
    let procs = schedulers_under(&c.dir);
    assert_eq!(procs.len(), 1, "one scheduler process: {procs:?}");
    let (pid, cmdline, environ) = &procs[0];
    assert!(
        !cmdline.contains(PASSWORD),
        "pid {pid} argv shows the password"
    );
    assert!(environ.contains(&format!("STORAGE_PASSWORD={PASSWORD}")));
}

/// A definition written for the earlier ScaleIO framework (`-scaleio.*` flags, spec-shaped
/// placeholders filled in) deploys unchanged apart from the binary names, with the spec's
/// own curl command line.
#[test]
fn earlier_framework_definition_deploys_unchanged_but_for_binary_names() {
    let c = cluster("dropin", 2);
    let (base, _files) = serve_binaries();
    let old = serde_json::json!({
        "id": "scaleio-scheduler",
        "uris": [format!("{base}/scaleio-scheduler"), format!("{base}/scaleio-executor")],
        "cmd": format!(
            "chmod u+x scaleio-scheduler && ./scaleio-scheduler -loglevel=debug -rest.port=$PORT \
             -uri={} -scaleio.password={PASSWORD} -scaleio.protectiondomain=default \
             -scaleio.storagepool=default -scaleio.preconfig.primary=127.0.0.1 \
             -scaleio.preconfig.secondary=127.0.0.2 -scaleio.preconfig.tiebreaker=127.0.0.3 \
             -scaleio.preconfig.gateway={}",
            c.master.addr(),
            gateway()
        ),
        "mem": 32,
        "cpus": 0.2,
        "instances": 1,
        "constraints": [["hostname", "UNIQUE"]]
    })
    .to_string();
    // The only edit an operator makes: the binary names.
    let renamed = old
        .replace("scaleio-scheduler", "storage-scheduler")
        .replace("scaleio-executor", "storage-executor");
    assert_eq!(
        renamed
            .replace("storage-scheduler", "scaleio-scheduler")
            .replace("storage-executor", "scaleio-executor"),
        old
    );
    std::fs::create_dir_all(&c.dir).unwrap();
    let file = c.dir.join("scaleio.json");
    std::fs::write(&file, &renamed).unwrap();

    let out = Command::new("curl")
        .args(["-k", "-XPOST", "-d"])
        .arg(format!("@{}", file.display()))
        .args([
            "-H",
            "Content-Type: application/json",
            "-sS",
            "-w",
            " %{http_code}",
        ])
        .arg(format!("{}/v2/apps", c.launcher.addr()))
        .output()
        .expect("curl");
    let (stdout, stderr) = text(&out);
    assert!(stdout.ends_with(" 201"), "{stdout}{stderr}");
    wait_covered(&c.master, 2);
    // deploy.sh takes the same file as it is.
    let dry = deploy(&[
        "--definition",
        file.to_str().unwrap(),
        "--launcher",
        "127.0.0.1",
        "--dry-run",
    ]);
    assert!(dry.status.success(), "{:?}", text(&dry));
}

#[test]
fn dry_run_prints_the_spec_command_line_and_masks_the_password() {
    let dir = std::env::temp_dir().join(format!("e2e-deploy-dry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("storage-scheduler-v1.2.3.json");
    let file_s = file.to_str().unwrap();
    let mut args = vec![
        "--release",
        "v1.2.3",
        "--release-url",
        "https://downloads.example/storage",
        "--launcher",
        "marathon.example",
        "--master",
        "10.0.0.21",
        "--dry-run",
        "--out",
        file_s,
    ];
    args.extend(storage_args());
    let out = deploy(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "{stdout}"
    );
    assert!(stdout.contains("-storage.password=********"), "{stdout}");
    let want = format!(
        "curl -k -XPOST -d @{file_s} -H \"Content-Type: application/json\" marathon.example:8080/v2/apps"
    );
    assert!(
        stdout.lines().any(|l| l == want),
        "{want}\nnot in:\n{stdout}"
    );

    // The written file is the real, sendable definition: private, filled, schema-valid.
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        doc["uris"][0],
        "https://downloads.example/storage/v1.2.3/storage-scheduler"
    );
    let cmd = doc["cmd"].as_str().unwrap();
    assert!(
        cmd.contains(&format!("-storage.password={PASSWORD} ")),
        "{cmd}"
    );
    assert!(cmd.contains("-uri=10.0.0.21:5050 "), "{cmd}");
    let schema = schema::marathon_schema();
    let v = Command::new("python3")
        .arg(Path::new(ROOT).join("tests/support/validate_app.py"))
        .arg(&schema)
        .arg(&file)
        .output()
        .expect("python3");
    assert!(v.status.success(), "{:?}", text(&v));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unfilled_placeholders_are_refused_by_name_and_nothing_is_sent() {
    let (dir, l) = launcher_only("placeholders");
    let launcher = l.addr().to_string();
    let out = Command::new(Path::new(ROOT).join("scripts/deploy.sh"))
        .args(["--launcher", &launcher, "--pd", "pd1"])
        .env_remove("STORAGE_GATEWAY_PASSWORD")
        .env_remove("STORAGE_MASTER")
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for (placeholder, how) in [
        ("{release_url}", "--release-url"),
        ("<mesos_master_host>", "--master"),
        ("<GATEWAY_PASSWORD>", "STORAGE_GATEWAY_PASSWORD"),
        ("<STORAGE_POOL_NAME>", "--pool"),
        ("<PRIMARY_MDM_IP>", "--primary"),
        ("<SECONDARY_MDM_IP>", "--secondary"),
        ("<TIEBREAKER_MDM_IP>", "--tiebreaker"),
        ("<GATEWAY_IP>", "--gateway"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(placeholder) && l.contains(how)),
            "{placeholder} ({how}) not named:\n{stderr}"
        );
    }
    assert!(
        !stderr.contains("<PROTECTION_DOMAIN_NAME>"),
        "--pd was given"
    );
    // A bracketed placeholder of the earlier framework's definitions is caught as well.
    let file = dir.join("old.json");
    std::fs::write(
        &file,
        r#"{"id":"storage-scheduler","cmd":"./storage-scheduler -scaleio.clustername=[SCALEIO NAME]","uris":["http://x/storage-scheduler"]}"#,
    )
    .unwrap();
    let out = deploy(&[
        "--definition",
        file.to_str().unwrap(),
        "--launcher",
        &launcher,
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("[SCALEIO NAME]"), "{stderr}");
    assert!(launcher_apps(&l).is_empty(), "nothing may be sent");
}

#[test]
fn launcher_rejection_exits_non_zero_with_its_message() {
    let (dir, l) = launcher_only("rejected");
    let launcher = l.addr().to_string();
    let file = dir.join("bad.json");
    std::fs::write(
        &file,
        r#"{"id":"storage-scheduler","cmd":"true","cpus":-1,"mem":32,"instances":1}"#,
    )
    .unwrap();
    let out = deploy(&[
        "--definition",
        file.to_str().unwrap(),
        "--launcher",
        &launcher,
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("answered 422") && stderr.contains("/cpus: error.min"),
        "{stderr}"
    );

    // A launcher that is not there: non-zero, and says so.
    drop(l);
    let out = deploy(&[
        "--definition",
        file.to_str().unwrap(),
        "--launcher",
        &launcher,
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot reach the launcher"), "{stderr}");
}

#[test]
fn help_prints_usage_only() {
    let out = deploy(&["--help"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("deploy.sh: deploys storage-scheduler"),
        "{stdout}"
    );
    for option in [
        "--release TAG",
        "--custom URL",
        "--dry-run",
        "--password-in-env",
    ] {
        assert!(stdout.contains(option), "{option} missing:\n{stdout}");
    }
    // Nothing of the script itself.
    for code in ["set -euo", "here=", "#!/", "usage()"] {
        assert!(!stdout.contains(code), "{code:?} in help:\n{stdout}");
    }
}

#[test]
fn packages_url_fills_every_storage_package_flag_with_the_vendor_file_names() {
    let (dir, l) = launcher_only("packages-url");
    std::fs::create_dir_all(&dir).unwrap();
    // The vendor's file names as the dev cluster serves them (one list, storage lines).
    let list = include_str!("devcluster/packages.txt");
    let files: Vec<(&str, &str)> = list
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(flag, _)| flag.starts_with("storage."))
        .collect();
    assert_eq!(files.len(), 10, "two platforms of five components");
    let sums = dir.join("SHA256SUMS");
    let digest = |i: usize| format!("{i:02x}").repeat(32);
    let listed: String = files
        .iter()
        .enumerate()
        .map(|(i, (_, file))| format!("{}  {file}\n", digest(i)))
        .collect();
    std::fs::write(&sums, listed).unwrap();
    let launcher = l.addr().to_string();
    let mut args = vec![
        "--custom",
        "http://127.0.0.1:9/build",
        "--launcher",
        &launcher,
        "--master",
        "127.0.0.1",
        "--packages-url",
        "https://packages.example/scaleio/2.0.1/",
        "--packages-sums",
        sums.to_str().unwrap(),
    ];
    args.extend(storage_args());
    let out = deploy(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    // What the launcher was sent: every package flag and its digest, nothing else new.
    let cmd = launcher_app(&l)["cmd"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let flags: Vec<&str> = cmd
        .split(' ')
        .filter(|a| a.starts_with("-storage."))
        .collect();
    for (i, (flag, file)) in files.iter().enumerate() {
        let url = format!("-{flag}=https://packages.example/scaleio/2.0.1/{file}");
        assert!(flags.contains(&url.as_str()), "{url} not in {cmd}");
        let sha = format!("-{flag}.sha256={}", digest(i));
        assert!(flags.contains(&sha.as_str()), "{sha} not in {cmd}");
    }
    assert!(!cmd.contains("-storage.version="), "{cmd}");
    assert!(!cmd.contains("unverified"), "{cmd}");

    // A file the sums do not name is refused, naming it; nothing is sent.
    std::fs::write(&sums, "").unwrap();
    let out = deploy(&args);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no SHA-256 for EMC-ScaleIO-mdm-2.0-10000.2072.Ubuntu.14.04.x86_64.deb")
            && stderr.contains("--packages-sums"),
        "{stderr}"
    );

    // Another version: its file names, and the scheduler told the version too.
    let mut args = args.clone();
    args.extend(["--packages-version", "2.0-13000.211", "--flag"]);
    args.push("-storage.packages.unverified=true");
    let out = deploy(&[&args[..], &["--dry-run"]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for part in [
        "-storage.rhel7.sds=https://packages.example/scaleio/2.0.1/EMC-ScaleIO-sds-2.0-13000.211.el7.x86_64.rpm",
        "-storage.ubuntu14.gw=https://packages.example/scaleio/2.0.1/emc-scaleio-gateway_2.0-13000.211_amd64.deb",
        "-storage.version=2.0-13000.211",
    ] {
        assert!(stdout.contains(part), "{part} not in {stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
