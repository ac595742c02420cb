//! End to end, experimental mode on the dev cluster, with test proxies (`support/proxy.rs`) on
//! the wire: between the executors (and the agents' fetcher) and the scheduler, and between
//! the scheduler and the gateway. What crosses those wires must hide every secret, and a proxy
//! that tampers (swaps the executor binary, presents another certificate, rewrites a plan)
//! must be refused with the node failing on it and nothing run.
//!
//! The executors are told the scheduler is at `ADVERTISED` (`-rest.address`) while it listens
//! on 127.0.0.1 (`-rest.listen`) on the same port: the proxy takes the advertised address.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/proxy.rs"]
mod proxy;

use cluster::{stage_packages, wait_for, KillOnDrop};
use devcluster::control;
use devcluster::gateway::{self, GatewayConfig, GatewayHandle};
use devcluster::master::{self, LaunchEvent, MasterHandle};
use proxy::{Conn, Proxy, Tamper};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use storage_framework::contract::{api, env};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::scheduler::Call;

const AGENTS: usize = 5;
/// Letters and digits only, so that no JSON or URL escaping hides them from the search.
const GATEWAY_PASSWORD: &str = "Gw7AdminSecretPass42";
const REXRAY_USER: &str = "rexray-volumes";
const REXRAY_PASSWORD: &str = "Rx9VolumeSecretPass31";
/// The operator API's bearer token, as (flag, token); a flag ending in `.file` gets a file.
/// The rollout sends one operator command through the recording proxy and checks that token
/// too.
const OPERATOR_TOKEN: Option<(&str, &str)> =
    Some(("rest.operator.token.file", "Op3ratorTokenOfTheE2eRig7"));
/// A loopback alias no agent of the dev cluster takes (they are 127.0.0.2 and up).
const ADVERTISED: &str = "127.0.0.200";

struct Rig {
    dir: PathBuf,
    master: Arc<MasterHandle>,
    gw: Arc<GatewayHandle>,
    port: u16,
    child: Option<KillOnDrop>,
    _control: control::ControlHandle,
    _packages: Arc<tiny_http::Server>,
    package_flags: Vec<String>,
}

impl Rig {
    /// The dev cluster with an empty gateway: the executors do the whole install on host
    /// stand-ins. The master's wire tap keeps every Call the scheduler sends, the only place
    /// the test can read the executors' secrets (`TaskInfo.data`) from.
    fn new(name: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-secrets-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let listener = control::bind(0).expect("control");
        let mut standins = cluster::host_standins(Some(listener.url()));
        // An executor waits 2 minutes for the announcement of a failed-over scheduler before
        // another certificate fails its node; no scheduler fails over here.
        standins
            .extra_env
            .push(("STORAGE_EXECUTOR_NEW_PIN_GRACE".into(), "3".into()));
        let master = Arc::new(
            master::start(master::MasterConfig {
                agents: AGENTS,
                heartbeat_interval: Duration::from_secs(1),
                work_dir: dir.join("mesos"),
                wire_tap: Some(dir.join("tap")),
                host_standins: Some(standins),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("dev cluster: {e}")),
        );
        let mut config = GatewayConfig::new(GATEWAY_PASSWORD, cluster::dev_mdms());
        config.preconfigured = None;
        let gw = Arc::new(gateway::start(config).unwrap_or_else(|e| panic!("gateway: {e}")));
        let targets = control::Targets {
            master: master.clone(),
            gateway: Some(gw.clone()),
        };
        let (package_flags, packages) = stage_packages(&dir.join("packages"));
        Rig {
            _control: listener.serve(targets).expect("control API"),
            port: cluster::free_port(),
            dir,
            master,
            gw,
            child: None,
            _packages: packages,
            package_flags,
        }
    }

    /// The proxy every executor and fetch goes through, at the address the scheduler gives out.
    fn executor_proxy(&self, tamper: Tamper) -> Proxy {
        let at: SocketAddr = format!("{ADVERTISED}:{}", self.port).parse().unwrap();
        let to: SocketAddr = format!("127.0.0.1:{}", self.port).parse().unwrap();
        Proxy::start(at, to, tamper)
    }

    /// A password file as an operator keeps it: owner-only.
    fn secret_file(&self, name: &str, secret: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, format!("{secret}\n")).expect("secret file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("mode");
        path.display().to_string()
    }

    fn start_scheduler(&mut self, gateway: SocketAddr) {
        let store = self.dir.join("state.json");
        let mut args =
            cluster::scheduler_args(&self.master.addr().to_string(), self.port, &store, "unused");
        let replaced = [
            "-rest.address=",
            "-storage.password=",
            "-storage.preconfig.",
        ];
        args.retain(|a| !replaced.iter().any(|p| a.starts_with(p)));
        args.extend([
            format!("-rest.address={ADVERTISED}"),
            "-rest.listen=127.0.0.1".to_string(),
            "-experimental=true".to_string(),
            format!("-storage.preconfig.gateway={gateway}"),
            format!(
                "-storage.password.file={}",
                self.secret_file("gw.pw", GATEWAY_PASSWORD)
            ),
            format!("-rexray.username={REXRAY_USER}"),
            format!(
                "-rexray.password.file={}",
                self.secret_file("rr.pw", REXRAY_PASSWORD)
            ),
        ]);
        if let Some((flag, token)) = OPERATOR_TOKEN {
            let value = match flag.ends_with(".file") {
                true => self.secret_file("operator.token", token),
                false => token.to_string(),
            };
            args.push(format!("-{flag}={value}"));
        }
        args.extend(self.package_flags.iter().cloned());
        let log = std::fs::File::create(self.dir.join("scheduler.log")).expect("log");
        let child = Command::new(cluster::scheduler_bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("scheduler");
        self.child = Some(KillOnDrop(child));
    }

    /// `/api/state`, read directly (not through the proxy under test).
    fn state(&self) -> Option<Value> {
        let req = ureq::get(&format!("http://127.0.0.1:{}/api/state", self.port));
        let body = req.call().ok()?.into_body().read_to_string().ok()?;
        serde_json::from_str(&body).ok()
    }

    fn nodes(&self) -> Option<Map<String, Value>> {
        self.state()?.pointer("/model/nodes")?.as_object().cloned()
    }

    /// Waits for every node to run; a failed node is a defect here, but for an executor that
    /// never started (the dev fetcher can race another launch's fork: "Text file busy").
    fn wait_all_running(&self, mut also: impl FnMut() -> bool) {
        wait_for("every node running", Duration::from_secs(300), || {
            if also() {
                return Some(());
            }
            let nodes = self.nodes()?;
            if let Some(f) = nodes.values().find(|n| {
                n["phase"] == "failed"
                    && !n["last_error"]
                        .as_str()
                        .is_some_and(|e| e.contains("Executor terminated"))
            }) {
                panic!("{} failed: {}", f["hostname"], f["last_error"]);
            }
            let running = nodes.values().all(|n| n["phase"] == "running");
            (nodes.len() == AGENTS && running).then_some(())
        });
    }

    /// Every executor secret the scheduler put in a launch's `TaskInfo.data`, by the master's
    /// wire tap: executor id -> secret.
    fn executor_secrets(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let files = std::fs::read_dir(self.dir.join("tap"))
            .into_iter()
            .flatten()
            .flatten();
        for f in files.filter(|f| f.file_name().to_string_lossy().ends_with(".scheduler.pb")) {
            let call = Call::decode(&std::fs::read(f.path()).expect("tap file"))
                .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            let ops = call.accept.iter().flat_map(|a| &a.operations);
            for task in ops.flat_map(|o| o.launch.iter().flat_map(|l| &l.task_infos)) {
                let data = task
                    .data
                    .as_ref()
                    .map(|d| d.0.as_slice())
                    .unwrap_or_default();
                let data: Value = serde_json::from_slice(data).expect("TaskInfo.data is JSON");
                let secret = data[env::DATA_EXECUTOR_SECRET].as_str();
                let id = task
                    .executor
                    .as_ref()
                    .map(|e| e.executor_id.value.to_string());
                let secret = secret.expect("an executor secret").to_string();
                out.insert(id.expect("an executor id"), secret);
            }
        }
        out
    }

    /// Files called `name` anywhere under the agents' work directories (sandboxes).
    fn sandbox_files(&self, name: &str) -> Vec<PathBuf> {
        let (mut stack, mut out) = (vec![self.dir.join("mesos")], Vec::new());
        while let Some(d) = stack.pop() {
            for p in std::fs::read_dir(&d)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
            {
                if p.is_dir() && !p.is_symlink() {
                    stack.push(p);
                } else if p.file_name().is_some_and(|f| f == name) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// Commands the executors ran on the host stand-ins, by agent.
    fn host_commands(&self) -> BTreeMap<String, Vec<String>> {
        let mut out = BTreeMap::new();
        for n in 1..=AGENTS {
            let agent = format!("agent-{n}");
            let root = devcluster::host::agent_root(&self.dir.join("mesos").join(&agent));
            let Ok(state) = devcluster::host::FakeRoot::open(&root).and_then(|r| r.state()) else {
                continue;
            };
            let ran: Vec<String> = state.history.iter().map(|i| i.argv.join(" ")).collect();
            if !ran.is_empty() {
                out.insert(agent, ran);
            }
        }
        out
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.child = None;
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(25).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!(
                "kept {} (scheduler.log, mesos/ sandboxes); scheduler log's end:\n{}",
                self.dir.display(),
                tail.join("\n")
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One occurrence of `needles[needle]` in connection `conn`, `up` or down, at byte `offset`.
#[derive(Debug, Clone, Copy)]
struct Hit {
    needle: usize,
    conn: usize,
    up: bool,
    offset: usize,
}

/// Every occurrence of every needle (each at least 2 bytes) in the recordings. The streams
/// hold whole executor binaries and tests build without optimisation: a table of the needles'
/// first two bytes rules out nearly every offset at the cost of one lookup.
fn find(conns: &[Conn], needles: &[Vec<u8>]) -> Vec<Hit> {
    let pair = |b: &[u8]| (b[0] as usize) << 8 | b[1] as usize;
    let mut starts = vec![false; 1 << 16];
    for n in needles {
        assert!(n.len() >= 2, "needle {n:?} too short to search for");
        starts[pair(n)] = true;
    }
    let mut hits = Vec::new();
    for (conn, c) in conns.iter().enumerate() {
        for (up, bytes) in [(true, &c.up), (false, &c.down)] {
            for offset in 0..bytes.len().saturating_sub(1) {
                if !starts[pair(&bytes[offset..])] {
                    continue;
                }
                for (needle, n) in needles.iter().enumerate() {
                    if bytes[offset..].starts_with(n) {
                        hits.push(Hit {
                            needle,
                            conn,
                            up,
                            offset,
                        });
                    }
                }
            }
        }
    }
    hits
}

/// `bytes[from..to]` as text, every byte inside one of `masked` shown as `*`.
fn excerpt(bytes: &[u8], from: usize, to: usize, masked: &[std::ops::Range<usize>]) -> String {
    let to = to.min(bytes.len());
    let mut shown = bytes[from..to].to_vec();
    for i in masked
        .iter()
        .flat_map(|m| m.clone())
        .filter(|i| (from..to).contains(i))
    {
        shown[i - from] = b'*';
    }
    String::from_utf8_lossy(&shown).escape_debug().to_string()
}

fn base64(bytes: &[u8], url_safe: bool) -> String {
    let alphabet: &[u8; 64] = match url_safe {
        false => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        true => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    };
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..=group.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The secret as it may cross a wire: as is, and in base64 (standard and URL-safe) at each of
/// the three alignments it can have inside a longer encoded text (`user:password` in a Basic
/// header), keeping only the characters that depend on the secret's bytes alone.
fn forms(secret: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![("plain".to_string(), secret.as_bytes().to_vec())];
    for (name, url_safe) in [("base64", false), ("URL-safe base64", true)] {
        for shift in 0..3 {
            let bytes = [&[0u8; 2][..shift], secret.as_bytes()].concat();
            let encoded = base64(&bytes, url_safe);
            // Characters touching a prefix bit, and the last one that holds only secret bits.
            let (start, end) = ((shift * 8).div_ceil(6), bytes.len() * 8 / 6);
            let form = format!("{name}, {shift} byte(s) into its group");
            out.push((form, encoded.as_bytes()[start..end].to_vec()));
        }
    }
    out.dedup_by(|a, b| a.1 == b.1);
    out
}

/// One line per secret, form and direction seen in the recordings of `channel`; `up`/`down`
/// name the directions. Each line: how often, and the first sighting's connection, byte
/// offset and the bytes around it, with every secret in them masked.
fn leaks(
    secrets: &[(String, String)],
    channel: &str,
    (up, down): (&str, &str),
    conns: &[Conn],
) -> Vec<String> {
    let mut names = Vec::new();
    let mut needles = Vec::new();
    for (what, secret) in secrets {
        for (form, bytes) in forms(secret) {
            names.push(format!("{what} ({form})"));
            needles.push(bytes);
        }
    }
    let hits = find(conns, &needles);
    let mut first: BTreeMap<(usize, bool), (usize, Hit)> = BTreeMap::new();
    for h in &hits {
        first.entry((h.needle, h.up)).or_insert((0, *h)).0 += 1;
    }
    let mut out = Vec::new();
    for ((needle, is_up), (count, h)) in first {
        let c = &conns[h.conn];
        let (dir, bytes) = if is_up { (up, &c.up) } else { (down, &c.down) };
        let masks: Vec<std::ops::Range<usize>> = hits
            .iter()
            .filter(|o| o.conn == h.conn && o.up == is_up)
            .map(|o| o.offset..o.offset + needles[o.needle].len())
            .collect();
        let (from, to) = (
            h.offset.saturating_sub(60),
            h.offset + needles[needle].len() + 60,
        );
        let around = excerpt(bytes, from, to, &masks);
        out.push(format!(
            "{} on the {channel} channel, {dir}: {count} time(s); first in connection {}, byte \
             {}: …{around}…",
            names[needle], h.conn, h.offset
        ));
    }
    out
}

/// Connections and bytes each way, to show that a proxy carried the traffic.
fn carried(conns: &[Conn]) -> String {
    let up: usize = conns.iter().map(|c| c.up.len()).sum();
    let down: usize = conns.iter().map(|c| c.down.len()).sum();
    format!("{} connection(s), {up} bytes up, {down} down", conns.len())
}

/// Requests to the executor API seen in clear (`up` bytes), as "connection N, byte O: line".
fn plain_executor_requests(conns: &[Conn]) -> Vec<String> {
    let needles: Vec<Vec<u8>> = ["GET ", "POST ", "PUT "]
        .iter()
        .map(|m| format!("{m}{}", api::PREFIX).into_bytes())
        .collect();
    let hits = find(conns, &needles).into_iter().filter(|h| h.up);
    hits.map(|h| {
        let rest = &conns[h.conn].up[h.offset..];
        let line = rest.split(|&b| b == b'\r').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        format!("connection {}, byte {}: `{line}`", h.conn, h.offset)
    })
    .collect()
}

fn summary(lines: &[String]) -> String {
    let shown: Vec<&str> = lines.iter().take(20).map(String::as_str).collect();
    let more = lines.len().saturating_sub(shown.len());
    format!(
        "{}{}",
        shown.join("\n"),
        if more > 0 {
            format!("\n… and {more} more")
        } else {
            String::new()
        }
    )
}

/// A whole rollout with every executor, fetch and gateway request through recording
/// proxies: none of the secrets crosses either wire, in any form.
#[test]
fn no_secret_crosses_the_wire_in_a_whole_rollout() {
    let mut rig = Rig::new("rollout");
    let executors = rig.executor_proxy(Tamper::default());
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let gateway = Proxy::start(local, rig.gw.addr(), Tamper::default());
    rig.start_scheduler(gateway.addr());
    rig.wait_all_running(|| false);
    if let Some((_, token)) = OPERATOR_TOKEN {
        // Through the recording proxy, as an operator's client on the network would.
        let pin = cluster::logged_fingerprint(&rig.dir.join("scheduler.log")).expect("pin");
        let url = format!("https://{ADVERTISED}:{}/api/plan/resume", rig.port);
        let resp = cluster::pinned_agent(pin)
            .post(&url)
            .header("Authorization", &format!("Bearer {token}"))
            .send_empty()
            .expect("operator command");
        let status = resp.status().as_u16();
        assert!(![401, 403].contains(&status), "token refused: {status}");
        let log = std::fs::read_to_string(rig.dir.join("scheduler.log")).unwrap_or_default();
        assert!(
            log.contains("operator resume plan"),
            "no log line for the command"
        );
        assert!(
            !log.contains(token),
            "the operator token is in the scheduler's log"
        );
    }

    let mut secrets = vec![
        (
            "the gateway password".to_string(),
            GATEWAY_PASSWORD.to_string(),
        ),
        (
            "the REX-Ray password".to_string(),
            REXRAY_PASSWORD.to_string(),
        ),
    ];
    if let Some((_, token)) = OPERATOR_TOKEN {
        secrets.push(("the operator token".to_string(), token.to_string()));
    }
    let launched = rig.executor_secrets();
    assert!(
        launched.len() >= AGENTS,
        "executor secrets in the wire tap: {}",
        launched.len()
    );
    for (id, s) in launched {
        secrets.push((format!("the executor secret of {id}"), s));
    }
    let (to_executor, to_gateway) = (executors.recorded(), gateway.recorded());
    let traffic = format!(
        "recorded: executor channel {}; gateway channel {}",
        carried(&to_executor),
        carried(&to_gateway)
    );
    let empty = |c: &[Conn]| c.iter().all(|c| c.up.is_empty() || c.down.is_empty());
    assert!(!empty(&to_executor) && !empty(&to_gateway), "{traffic}");
    let mut found = leaks(
        &secrets,
        "executor",
        ("executor → scheduler", "scheduler → executor"),
        &to_executor,
    );
    found.extend(leaks(
        &secrets,
        "gateway",
        ("scheduler → gateway", "gateway → scheduler"),
        &to_gateway,
    ));
    assert!(
        found.is_empty(),
        "secrets in the recorded bytes ({} secrets checked, each plain and in base64; \
         {traffic}):\n{}",
        secrets.len(),
        summary(&found)
    );
}

/// A proxy serves another `storage-executor` to the agents' fetcher: it never runs, and the
/// node fails with the digest mismatch named.
#[test]
fn a_swapped_executor_binary_never_runs_and_the_node_fails_naming_it() {
    let mut rig = Rig::new("swap");
    let marker = rig.dir.join("swapped-binary-ran");
    let script = format!(
        "#!/bin/sh\necho \"$PWD\" >> '{}'\nexit 7\n",
        marker.display()
    );
    let swapped_digest = {
        let p = rig.dir.join("swapped");
        std::fs::write(&p, &script).expect("script");
        cluster::sha256_of(&p)
    };
    // Launches fetch it gzipped: the tampered bytes go the same way.
    let served = format!("/{}.gz", env::EXECUTOR_BINARY);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, script.as_bytes()).expect("gzip");
    let swapped = gz.finish().expect("gzip");
    let rewrite: proxy::Rewrite =
        Box::new(move |path, _| (path == served).then(|| swapped.clone()));
    let executors = rig.executor_proxy(Tamper {
        rewrite: Some(rewrite),
        mitm: None,
    });
    rig.start_scheduler(rig.gw.addr());
    wait_for(
        "every agent to try an executor",
        Duration::from_secs(120),
        || {
            let log = rig.master.launch_log().ok()?;
            let ended: BTreeSet<&str> = log
                .iter()
                .filter(|r| r.event == LaunchEvent::ExecutorTerminated)
                .map(|r| r.agent.as_str())
                .collect();
            (marker.exists() || ended.len() == AGENTS).then_some(())
        },
    );
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(
        ran.is_empty(),
        "the swapped storage-executor (sha256 {swapped_digest}, the scheduler serves {}) ran in \
         these sandboxes:\n{ran}",
        cluster::sha256_of(&cluster::executor_bin())
    );
    assert_eq!(cluster::agents_running(&rig.master), 0, "an executor ran");
    let asked = plain_executor_requests(&executors.recorded());
    assert!(
        asked.is_empty(),
        "an executor called the executor API: {}",
        summary(&asked)
    );
    let named = |text: &str| {
        let t = text.to_ascii_lowercase();
        t.contains("sha256") || t.contains("sha-256") || t.contains("digest")
    };
    let stderr = wait_for(
        "a sandbox naming the digest mismatch",
        Duration::from_secs(30),
        || {
            let files = rig.sandbox_files("stderr");
            let texts: Vec<String> = files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap_or_default())
                .collect();
            texts
                .iter()
                .any(|t| named(t))
                .then(|| texts.join("\n---\n"))
        },
    );
    assert!(named(&stderr), "{stderr}");
    let failed = wait_for("a node failed", Duration::from_secs(30), || {
        let nodes = rig.nodes()?;
        nodes
            .values()
            .find(|n| n["last_error"].is_string())
            .cloned()
    });
    assert!(!failed["last_error"].is_null(), "{failed}");
}

/// A proxy terminates the executors' TLS with a certificate of its own: every executor
/// refuses it, its node fails naming the certificate, and nothing runs on the hosts.
#[test]
fn an_executor_refuses_another_certificate_and_its_node_fails_naming_it() {
    let mut rig = Rig::new("mitm");
    let tls = proxy::self_signed(&rig.dir.join("mitm"), ADVERTISED);
    let executors = rig.executor_proxy(Tamper {
        rewrite: None,
        mitm: Some(tls),
    });
    rig.start_scheduler(rig.gw.addr());
    let mut refused: BTreeMap<String, String> = BTreeMap::new();
    wait_for(
        "every node failed naming the certificate, or an executor talking through the proxy",
        Duration::from_secs(180),
        || {
            let conns = executors.recorded();
            if conns.iter().any(|c| c.tls_accepted) || !plain_executor_requests(&conns).is_empty() {
                return Some(());
            }
            for n in rig.nodes()?.values() {
                let error = n["last_error"].as_str().unwrap_or_default();
                if error.to_ascii_lowercase().contains("certificate") {
                    refused.insert(n["hostname"].as_str()?.to_string(), error.to_string());
                }
            }
            (refused.len() == AGENTS).then_some(())
        },
    );
    let conns = executors.recorded();
    let plain = plain_executor_requests(&conns);
    assert!(
        plain.is_empty(),
        "executors called the executor API in clear through the man in the middle:\n{}",
        summary(&plain)
    );
    if let Some((i, c)) = conns.iter().enumerate().find(|(_, c)| c.tls_accepted) {
        let sent = String::from_utf8_lossy(&c.up[..c.up.len().min(200)]).into_owned();
        panic!("an executor accepted the proxy's certificate (connection {i}) and sent: {sent}");
    }
    // Each refusal names the certificate the executor was given and the one it saw.
    let real = cluster::logged_fingerprint(&rig.dir.join("scheduler.log"))
        .expect("the scheduler logs its certificate's fingerprint");
    let forged = storage_framework::tls::Fingerprint::of(
        &std::fs::read(rig.dir.join("mitm").join("cert.der")).expect("the proxy's certificate"),
    );
    for (host, error) in &refused {
        for f in [real, forged] {
            assert!(
                error.contains(&f.to_string()),
                "{host}: {f} not in: {error}"
            );
        }
    }
    let refusals = conns.iter().filter(|c| c.tls_refused.is_some()).count();
    assert!(
        refusals >= AGENTS,
        "TLS refusals seen by the proxy: {refusals}"
    );
    assert_eq!(
        rig.host_commands(),
        BTreeMap::new(),
        "commands ran on the hosts"
    );
}

/// A proxy rewrites each plan (package URLs to a server of its own): over TLS it cannot, so
/// the executors never speak plain HTTP to the executor API and never fetch from that server.
#[test]
fn a_plan_rewritten_on_the_way_is_never_seen_or_obeyed() {
    let mut rig = Rig::new("plan");
    let (evil_flags, _evil) = stage_packages(&rig.dir.join("evil"));
    let origin = |flags: &[String]| -> String {
        let url = flags[0].split_once('=').expect("a URL flag").1;
        url[..=url.rfind('/').expect("a file name")].to_string()
    };
    let (good, evil) = (origin(&rig.package_flags), origin(&evil_flags));
    let rewrite: proxy::Rewrite = Box::new(move |path, body| {
        let plan = path.starts_with(api::PREFIX) && path.contains("/plan");
        plan.then(|| {
            String::from_utf8_lossy(body)
                .replace(&good, &evil)
                .into_bytes()
        })
    });
    let executors = rig.executor_proxy(Tamper {
        rewrite: Some(rewrite),
        mitm: None,
    });
    rig.start_scheduler(rig.gw.addr());
    let evil_dir = rig.dir.join("evil");
    rig.wait_all_running(|| !cluster::served(&evil_dir).is_empty());
    let plain = plain_executor_requests(&executors.recorded());
    let obeyed: BTreeSet<String> = cluster::served(&evil_dir).into_iter().collect();
    assert!(
        plain.is_empty() && obeyed.is_empty(),
        "the executors spoke plain HTTP to the executor API ({} requests), so a proxy could \
         rewrite their plans; files fetched from the rewritten package URL: {obeyed:?}\n{}",
        plain.len(),
        summary(&plain)
    );
}

/// The search's base64 forms find a secret at any position inside a longer encoded text, as
/// coreutils' `base64` encodes it (not the test's own encoder alone).
#[test]
fn the_base64_forms_find_a_secret_at_any_alignment() {
    for prefix in ["admin:", "user:", "rexray:"] {
        let text = format!("{prefix}{REXRAY_PASSWORD}");
        let mut run = Command::new("base64");
        let child = run.arg("-w0").stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = child.spawn().expect("base64 runs");
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write");
        drop(stdin);
        let standard = child.wait_with_output().expect("base64").stdout;
        let url_safe: Vec<u8> = standard
            .iter()
            .map(|&b| match b {
                b'+' => b'-',
                b'/' => b'_',
                b => b,
            })
            .collect();
        for encoded in [standard, url_safe] {
            let conns = [Conn {
                up: encoded.clone(),
                ..Default::default()
            }];
            let needles: Vec<Vec<u8>> = forms(REXRAY_PASSWORD).into_iter().map(|f| f.1).collect();
            let found = find(&conns, &needles);
            let text = String::from_utf8_lossy(&encoded);
            assert!(!found.is_empty(), "{text:?} ({prefix:?} first)");
        }
    }
}
