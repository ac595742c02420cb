//! The scheduler binary checks the storage gateway's certificate, made by the dev gateway
//! like a real one (self-signed, `CA:TRUE`, its hostname only, no IP address), in each mode:
//! a pin, the certificate as `-storage.gateway.cacert`, trust on first use (kept in the state
//! store, a changed certificate refused at start and while running), and no check at all.
//! A refused certificate stops the start-up with the prerequisite exit code, naming both
//! fingerprints and the flag that accepts the new one.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, stored_state, wait_for};
use devcluster::gateway::{self, GatewayConfig, GatewayHandle};
use devcluster::master::{self, MasterHandle};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use storage_framework::tls::Fingerprint;

const PASSWORD: &str = "Tls-Pa55-Secret";
const PIN_FLAG: &str = "-storage.gateway.fingerprint";

fn master() -> MasterHandle {
    master::start(master::MasterConfig {
        agents: 1,
        work_dir: tempdir("master"),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("master: {e}"))
}

fn tempdir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "e2e-gwtls-{what}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn start_gateway() -> GatewayHandle {
    gateway::start(GatewayConfig::new(PASSWORD, cluster::dev_mdms()))
        .unwrap_or_else(|e| panic!("gateway: {e}"))
}

fn fingerprint(gw: &GatewayHandle) -> String {
    Fingerprint::of(&gw.certificate_der()).to_string()
}

/// The pre-configured flags pointed at `gw` with the state in `store` and the REST API on
/// `port`; `extra` added.
fn args(
    m: &MasterHandle,
    gw: &GatewayHandle,
    store: &Path,
    port: u16,
    extra: &[String],
) -> Vec<String> {
    let mut a = scheduler_args(&m.addr().to_string(), port, store, PASSWORD);
    a.retain(|x| !x.starts_with("-storage.preconfig.gateway="));
    a.push(format!("-storage.preconfig.gateway={}", gw.addr()));
    a.push("-storage.capacity.interval=1".into());
    a.extend(extra.iter().cloned());
    a
}

/// Runs the scheduler to its exit (bounded).
fn run_to_exit(args: &[String]) -> Output {
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

/// A running scheduler whose log goes to a file, killed on drop.
struct Running {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Running {
    fn start(args: &[String], port: u16, dir: &Path) -> Running {
        let log = dir.join(format!("scheduler-{port}.log"));
        let child = Command::new(scheduler_bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"))
            .spawn()
            .expect("start storage-scheduler");
        Running { child, port, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until it has subscribed (`/health` answers 200).
    fn wait_running(&self) {
        let health = format!("http://127.0.0.1:{}/health", self.port);
        wait_for(
            "the scheduler to subscribe",
            Duration::from_secs(60),
            || {
                let r = ureq::get(&health).call().ok()?;
                (r.status().as_u16() == 200).then_some(())
            },
        );
        assert!(!self.log().contains(PASSWORD), "the password leaked");
    }

    /// The first log line containing every one of `words`, waited for.
    fn wait_line(&self, words: &[&str]) -> String {
        wait_for(
            &format!("a log line with {words:?}"),
            Duration::from_secs(60),
            || {
                self.log()
                    .lines()
                    .find(|l| words.iter().all(|w| l.contains(w)))
                    .map(str::to_string)
            },
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Exit code 3 with one prerequisite line holding every one of `words`; no password.
fn assert_refused(out: &Output, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("storage prerequisite failed"))
        .unwrap_or_else(|| panic!("no prerequisite line in:\n{stderr}"));
    for w in words {
        assert!(line.contains(w), "expected {w:?} in {line:?}");
    }
    assert!(!stderr.contains(PASSWORD), "the password leaked:\n{stderr}");
    assert!(
        !stderr.contains("SUBSCRIBE"),
        "subscribed anyway:\n{stderr}"
    );
}

#[test]
fn a_pinned_certificate_runs_and_a_wrong_pin_is_refused_naming_both() {
    let m = master();
    let gw = start_gateway();
    let other = start_gateway();
    let dir = tempdir("pin");
    let (right, wrong) = (fingerprint(&gw), fingerprint(&other));

    // A list, as behind a load balancer: any one of them will do.
    let port = free_port();
    let pins = format!("{PIN_FLAG}={wrong},{right}");
    let s = Running::start(
        &args(&m, &gw, &dir.join("a.json"), port, &[pins]),
        port,
        &dir,
    );
    s.wait_running();
    assert!(!s.log().contains("not verified"), "{}", s.log());
    drop(s);

    // The same state (the master knows this framework), another pin.
    let out = run_to_exit(&args(
        &m,
        &gw,
        &dir.join("a.json"),
        free_port(),
        &[format!("{PIN_FLAG}={wrong}")],
    ));
    assert_refused(&out, &[PIN_FLAG, &right, &wrong]);
}

#[test]
fn the_gateways_own_certificate_as_cacert_runs() {
    let m = master();
    let gw = start_gateway();
    let dir = tempdir("ca");
    let ca = dir.join("gateway.pem");
    std::fs::write(&ca, gw.certificate_pem()).expect("write the certificate");
    let port = free_port();
    let flag = format!("-storage.gateway.cacert={}", ca.display());
    let s = Running::start(
        &args(&m, &gw, &dir.join("s.json"), port, &[flag]),
        port,
        &dir,
    );
    s.wait_running();
    // Accepted as the very certificate given: a check REX-Ray cannot repeat.
    s.wait_line(&["REX-Ray does not verify", "insecure: true"]);
    // Nothing trusted on first use under a CA.
    assert_eq!(stored_state(&dir.join("s.json")).gateway_certificate, None);
}

/// `openssl` with `args` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// In `dir`: `ca.pem` (a site CA) and a gateway certificate it signed, `gw-<name>.pem` and
/// `gw-<name>.key`, with `san` as its subject alternative names.
fn ca_signed(dir: &Path, name: &str, san: &str) -> (String, String) {
    if !dir.join("ca.pem").exists() {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=Site CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign",
            ],
        );
    }
    let (key, csr, pem, ext) = (
        format!("gw-{name}.key"),
        format!("gw-{name}.csr"),
        format!("gw-{name}.pem"),
        format!("gw-{name}.ext"),
    );
    std::fs::write(
        dir.join(&ext),
        format!("basicConstraints=critical,CA:FALSE\nsubjectAltName={san}\nextendedKeyUsage=serverAuth\n"),
    )
    .expect("extensions");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            "/CN=scaleio-gateway",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &pem,
        ],
    );
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("read PEM");
    (read(&pem), read(&key))
}

#[test]
fn a_ca_signed_certificate_is_checked_by_chain_and_name_and_rexray_verifies_it_too() {
    let m = master();
    let gw = start_gateway();
    let dir = tempdir("chain");
    let (chain, key) = ca_signed(&dir, "ip", "IP:127.0.0.1");
    gw.serve_pem(&chain, &key).expect("serve");
    let ca = format!("-storage.gateway.cacert={}", dir.join("ca.pem").display());
    let store = dir.join("s.json");
    let port = free_port();
    let s = Running::start(
        &args(&m, &gw, &store, port, std::slice::from_ref(&ca)),
        port,
        &dir,
    );
    s.wait_running();
    s.wait_line(&[
        "REX-Ray verifies the gateway's certificate too",
        "insecure: false",
    ]);
    drop(s);

    // Signed by the CA but not for the address dialled: the names and the address are said.
    let (chain, key) = ca_signed(&dir, "dns", "DNS:gw.example.com");
    gw.serve_pem(&chain, &key).expect("serve");
    let out = run_to_exit(&args(&m, &gw, &store, free_port(), &[ca]));
    assert_refused(
        &out,
        &[
            "-storage.gateway.cacert",
            "CN=scaleio-gateway",
            "gw.example.com",
            "127.0.0.1",
        ],
    );
}

#[test]
fn first_use_keeps_the_certificate_and_refuses_a_changed_one() {
    let m = master();
    let gw = start_gateway();
    let dir = tempdir("tofu");
    let store = dir.join("state.json");
    let old = fingerprint(&gw);

    let port = free_port();
    let s = Running::start(&args(&m, &gw, &store, port, &[]), port, &dir);
    s.wait_running();
    let line = s.wait_line(&["on first use", &old]);
    assert!(line.contains(&format!("{PIN_FLAG}={old}")), "{line}");
    assert_eq!(
        stored_state(&store)
            .gateway_certificate
            .map(|f| f.to_string()),
        Some(old.clone())
    );

    // Replaced while the scheduler runs: its next connection is refused, naming both, and
    // the REST API stays up.
    gw.renew_certificate().expect("renew");
    let new = fingerprint(&gw);
    let line = s.wait_line(&[&old, &new, &format!("{PIN_FLAG}={new}")]);
    assert!(line.contains("changed"), "{line}");
    let health = format!("http://127.0.0.1:{port}/health");
    assert!(ureq::get(&health).call().is_ok(), "REST API gone");
    assert_eq!(
        stored_state(&store)
            .gateway_certificate
            .map(|f| f.to_string()),
        Some(old.clone()),
        "the first certificate stays the trusted one"
    );
    drop(s);

    // At the next start the stored one is checked.
    let out = run_to_exit(&args(&m, &gw, &store, free_port(), &[]));
    assert_refused(&out, &[&old, &new, &format!("{PIN_FLAG}={new}")]);

    // The operator accepts the new one with the flag the error names.
    let port = free_port();
    let accept = format!("{PIN_FLAG}={new}");
    let s = Running::start(&args(&m, &gw, &store, port, &[accept]), port, &dir);
    s.wait_running();
}

#[test]
fn insecure_runs_with_a_warning_and_two_modes_are_refused() {
    let m = master();
    let gw = start_gateway();
    let dir = tempdir("insecure");
    let port = free_port();
    let flag = "-storage.gateway.insecure=true".to_string();
    let s = Running::start(
        &args(&m, &gw, &dir.join("s.json"), port, &[flag]),
        port,
        &dir,
    );
    s.wait_running();
    s.wait_line(&["WARN", "not verified", "-storage.gateway.insecure=true"]);
    assert_eq!(stored_state(&dir.join("s.json")).gateway_certificate, None);
    drop(s);

    let out = run_to_exit(&args(
        &m,
        &gw,
        &dir.join("s.json"),
        free_port(),
        &[
            "-storage.gateway.insecure=true".into(),
            format!("{PIN_FLAG}={}", fingerprint(&gw)),
        ],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(PIN_FLAG) && stderr.contains("-storage.gateway.insecure"),
        "{stderr}"
    );
}
