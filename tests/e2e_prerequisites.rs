//! The scheduler binary checks the storage cluster before it subscribes: each failed
//! prerequisite is one line naming the flag or prerequisite and what was found, exit code 3,
//! and the password appears in no output. With `-storage.wait=true` it waits instead,
//! saying so in `/health`, and subscribes once the gateway is ready.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::gateway::{self, GatewayConfig, GatewayHandle};
use devcluster::master::{self, MasterHandle};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PASSWORD: &str = "Prereq-Pa55-Secret";

fn master() -> MasterHandle {
    let dir = tempdir("master");
    master::start(master::MasterConfig {
        agents: 1,
        work_dir: dir,
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("master: {e}"))
}

fn tempdir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "e2e-prereq-{what}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn start_gateway(edit: impl FnOnce(&mut GatewayConfig)) -> GatewayHandle {
    let mut config = GatewayConfig::new(PASSWORD, cluster::dev_mdms());
    edit(&mut config);
    gateway::start(config).unwrap_or_else(|e| panic!("gateway: {e}"))
}

/// The pre-configured flags pointed at `gw`, with `overrides` replacing flags of the same name.
fn args(m: &MasterHandle, gw: Option<&GatewayHandle>, overrides: &[String]) -> Vec<String> {
    let store = tempdir("store").join("state.json");
    let mut args = scheduler_args(&m.addr().to_string(), free_port(), &store, PASSWORD);
    if let Some(gw) = gw {
        args.retain(|a| !a.starts_with("-storage.preconfig.gateway="));
        args.push(format!("-storage.preconfig.gateway={}", gw.addr()));
    }
    for o in overrides {
        let name = o.split('=').next().unwrap_or_default();
        args.retain(|a| !a.starts_with(&format!("{name}=")));
        args.push(o.clone());
    }
    args
}

/// Runs the scheduler to its exit (bounded).
fn run(args: &[String]) -> Output {
    let child = Command::new(scheduler_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start storage-scheduler");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    let watchdog = std::thread::spawn(move || {
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            if !PathBuf::from(format!("/proc/{pid}")).exists() {
                return;
            }
        }
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let out = child.wait_with_output().expect("scheduler output");
    let _ = watchdog.join();
    out
}

/// Exit code 3, one error line naming `subject` and containing `found`, no password.
fn assert_fails(args: &[String], subject: &str, found: &str) {
    let out = run(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("storage prerequisite failed"))
        .unwrap_or_else(|| panic!("no prerequisite line in:\n{stderr}"));
    assert!(
        line.contains(subject) && line.contains(found),
        "expected {subject:?} and {found:?} in {line:?}"
    );
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "the password leaked:\n{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("SUBSCRIBE"),
        "subscribed anyway:\n{stderr}"
    );
}

#[test]
fn a_wrong_password_fails_naming_the_flag() {
    let m = master();
    let gw = start_gateway(|c| c.password = "Another-Password".into());
    assert_fails(
        &args(&m, Some(&gw), &[]),
        "-storage.password",
        "refused the login",
    );
}

#[test]
fn an_mdm_address_the_cluster_lacks_fails_naming_the_flag() {
    let m = master();
    let gw = start_gateway(|_| {});
    assert_fails(
        &args(
            &m,
            Some(&gw),
            &["-storage.preconfig.secondary=127.0.0.9".into()],
        ),
        "-storage.preconfig.secondary",
        "127.0.0.9 is not the secondary MDM",
    );
}

#[test]
fn a_too_old_system_fails_naming_the_version_found() {
    let m = master();
    let gw = start_gateway(|c| c.version_info = "R2_0.5014.0".into());
    assert_fails(
        &args(&m, Some(&gw), &[]),
        "storage system version",
        "runs R2_0.5014.0",
    );
}

#[test]
fn a_missing_domain_or_pool_fails_naming_the_flag() {
    let m = master();
    let gw = start_gateway(|_| {});
    assert_fails(
        &args(&m, Some(&gw), &["-storage.protectiondomain=pd9".into()]),
        "-storage.protectiondomain",
        "\"pd9\" does not exist",
    );
    assert_fails(
        &args(&m, Some(&gw), &["-storage.storagepool=sp9".into()]),
        "-storage.storagepool",
        "\"sp9\" does not exist",
    );
}

#[test]
fn an_unreachable_gateway_fails_naming_its_address() {
    let m = master();
    let address = format!("127.0.0.1:{}", free_port());
    assert_fails(
        &args(&m, None, &[format!("-storage.preconfig.gateway={address}")]),
        "storage gateway",
        &format!("{address} is unreachable"),
    );
}

#[test]
fn a_wrong_ca_fails_the_tls_handshake_clearly() {
    let m = master();
    let gw = start_gateway(|_| {});
    let other = start_gateway(|_| {});
    let dir = tempdir("ca");
    let wrong = dir.join("wrong-ca.pem");
    std::fs::write(&wrong, other.certificate_pem()).expect("write CA");
    assert_fails(
        &args(
            &m,
            Some(&gw),
            &[format!("-storage.gateway.cacert={}", wrong.display())],
        ),
        "-storage.gateway.cacert",
        "TLS handshake",
    );
    // The right CA passes the checks (the scheduler then runs; stop it).
    let right = dir.join("right-ca.pem");
    std::fs::write(&right, gw.certificate_pem()).expect("write CA");
    let mut a = args(
        &m,
        Some(&gw),
        &[format!("-storage.gateway.cacert={}", right.display())],
    );
    let port = free_port();
    a.retain(|x| !x.starts_with("-rest.port="));
    a.push(format!("-rest.port={port}"));
    let mut child = Command::new(scheduler_bin())
        .args(&a)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let health = format!("http://127.0.0.1:{port}/health");
    wait_for(
        "subscribed with a verified gateway",
        Duration::from_secs(30),
        || ureq::get(&health).call().ok().map(|_| ()),
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn with_wait_the_scheduler_reports_the_wait_and_goes_on_once_ready() {
    let m = master();
    let gw = start_gateway(|_| {});
    gw.fail_until_cleared();
    let port = free_port();
    let mut a = args(&m, Some(&gw), &["-storage.wait=true".into()]);
    a.retain(|x| !x.starts_with("-rest.port="));
    a.push(format!("-rest.port={port}"));
    let mut child = Command::new(scheduler_bin())
        .args(&a)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    let health = format!("http://127.0.0.1:{port}/health");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let body = wait_for(
        "/health to report the wait",
        Duration::from_secs(30),
        || {
            let mut r = agent.get(&health).call().ok()?;
            let status = r.status().as_u16();
            let body = r.body_mut().read_to_string().ok()?;
            (status == 503 && body.contains("waiting for the storage cluster")).then_some(body)
        },
    );
    assert!(body.contains("storage gateway"), "{body}");
    assert!(!body.contains(PASSWORD));
    gw.clear_faults();
    wait_for(
        "subscribed after the gateway came up",
        Duration::from_secs(60),
        || {
            let r = agent.get(&health).call().ok()?;
            (r.status().as_u16() == 200).then_some(())
        },
    );
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("-storage.wait=true"), "{stderr}");
    assert!(!stderr.contains(PASSWORD));
}
