//! The `cluster-init` phase of MDM nodes in experimental mode (host-steps.md sections 2, 4
//! and 9): the primary runs the `scli` steps its plan hands over; then every MDM node
//! installs LIA (its installation id read with `scli --query_all`) and the gateway (its
//! `gatewayUser.properties` pointed at the MDMs, then the service restarted).
//!
//! Every step is judged by its exit status, and each one that is not idempotent is guarded
//! by the state that shows it done (the plan's `check`, read with `scli --query_cluster` or
//! a login), so an executor that resumes `cluster-init` skips what is done. Passwords go to
//! `scli` on standard input only: never on its argv (visible in `ps`), never in a log line or
//! an error (they show `<n secret line(s)>`).

use super::machine::Findings;
use super::plan::{Check, ClusterInit, ScliStep, StdinPassword};
use super::{volume, Node, StepResult};
use crate::host::commands::{self, Cmd, CommandError, Runner};
use crate::host::services::Service;
use std::time::{Duration, Instant};
use storage_framework::contract::platform::{Component, Platform};
use storage_framework::contract::Persona;

/// The factory password of a new MDM cluster (not a secret).
const FACTORY_PASSWORD: &str = "admin";
pub const INSTALLATION_ID: &str = "/opt/emc/scaleio/lia/cfg/installation_id.txt";
pub const GATEWAY_PROPERTIES: &str =
    "/opt/emc/scaleio/gateway/webapps/ROOT/WEB-INF/classes/gatewayUser.properties";
/// Written before the properties change and removed after the restart, so that an executor
/// killed between the two still restarts the gateway when it resumes.
const GATEWAY_RESTART_PENDING: &str = "/var/lib/storage-executor/gateway-restart-pending";
pub const GATEWAY_SERVICE: &str = "scaleio-gateway";
/// How long a step's effect may take to show in `--query_cluster` after it exited 0.
const VERIFY_DEADLINE: Duration = Duration::from_secs(30);
const VERIFY_POLL: Duration = Duration::from_millis(200);

fn scli(args: &[&str]) -> Cmd {
    Cmd::new("scli", args).deadline(Cmd::SCLI_DEADLINE)
}

/// The `Cluster:` line of `scli --query_cluster` as `key -> value` pairs
/// (`Name: x, ID: y, Mode: 3_node, ...`).
fn cluster_fields(query: &str) -> Vec<(String, String)> {
    let mut lines = query.lines().map(str::trim);
    if !lines.any(|l| l == "Cluster:") {
        return Vec::new();
    }
    lines
        .next()
        .unwrap_or("")
        .split(", ")
        .filter_map(|f| f.split_once(": "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Whether `scli --query_cluster`'s output shows `check` (the cluster's own state, not a
/// success phrase). `ClusterExists` and `PasswordSet` are decided by exit status instead.
pub fn shows(check: &Check, query: &str) -> bool {
    let field = |key: &str, want: &str| {
        cluster_fields(query)
            .iter()
            .any(|(k, v)| k == key && v == want)
    };
    match check {
        Check::ClusterExists | Check::PasswordSet => false,
        Check::Mode { mode } => field("Mode", mode),
        Check::Named { name } => field("Name", name),
        Check::Member { ip } => query.lines().any(|l| {
            let l = l.trim();
            l.starts_with("IPs:") && l.split([',', ' ']).map(str::trim).any(|token| token == ip)
        }),
    }
}

/// The value of the `Installation ID` line of `scli --query_all`.
pub fn installation_id(query_all: &str) -> Option<String> {
    query_all
        .lines()
        .find_map(|l| l.trim().strip_prefix("Installation ID:"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && !v.contains(char::is_whitespace))
}

/// `gatewayUser.properties` with `mdm.ip.addresses` and `security.bypass_certificate_check`
/// set (host-steps section 9); every other line kept as it was, missing keys appended.
pub fn gateway_properties(old: &str, mdm_ips: &[String]) -> String {
    let wanted = [
        ("mdm.ip.addresses", mdm_ips.join(",")),
        ("security.bypass_certificate_check", "true".to_string()),
    ];
    let mut seen = [false; 2];
    let mut out = String::new();
    for line in old.lines() {
        let key = line.split_once('=').map(|(k, _)| k.trim());
        match wanted.iter().position(|(k, _)| Some(*k) == key) {
            Some(i) if !seen[i] => {
                seen[i] = true;
                out.push_str(&format!("{}={}\n", wanted[i].0, wanted[i].1));
            }
            // A repeated key would override ours when the gateway reads the file.
            Some(_) => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (i, (k, v)) in wanted.iter().enumerate() {
        if !seen[i] {
            out.push_str(&format!("{k}={v}\n"));
        }
    }
    out
}

/// The build's one password and how a step's stdin names it.
fn stdin_line(which: StdinPassword, password: &str) -> &str {
    match which {
        StdinPassword::Factory => FACTORY_PASSWORD,
        StdinPassword::Admin => password,
    }
}

fn login(password: &str, mdm_ip: Option<&str>) -> Cmd {
    let mut args = Vec::new();
    if let Some(ip) = mdm_ip {
        args.extend(["--mdm_ip", ip]);
    }
    args.extend(["--login", "--username", "admin"]);
    scli(&args).secret_stdin(password)
}

/// Whether `check` holds now.
fn holds(r: &mut dyn Runner, check: &Check, password: &str) -> Result<bool, String> {
    let fail = |e: CommandError| format!("querying the MDM cluster: {e}");
    match check {
        Check::ClusterExists => Ok(r.run(&scli(&["--query_cluster"])).map_err(fail)?.status == 0),
        Check::PasswordSet => Ok(r.run(&login(password, None)).map_err(fail)?.status == 0),
        other => {
            let out = r.check(&scli(&["--query_cluster"])).map_err(fail)?;
            Ok(shows(other, &out.stdout))
        }
    }
}

/// Runs the primary's `scli` steps in order, skipping each whose state shows it done.
/// Returns the names of the steps run (the others were done already).
///
/// A check's answer is kept until the step that brings it about runs: the factory login and
/// the password change share `PasswordSet`, and asking it again after the factory login
/// would mean a failed login inside the session that the change needs.
pub fn create_cluster(
    r: &mut dyn Runner,
    steps: &[ScliStep],
    password: &str,
    deadline: Duration,
) -> Result<Vec<String>, String> {
    let mut ran = Vec::new();
    let mut known: Vec<(Check, bool)> = Vec::new();
    for step in steps {
        let what = || format!("scli step {:?}", step.name);
        if let Some(c) = &step.check {
            let done = match known.iter().find(|(k, _)| k == c) {
                Some((_, v)) => *v,
                None => {
                    let v = holds(r, c, password).map_err(|e| format!("{}: {e}", what()))?;
                    known.push((c.clone(), v));
                    v
                }
            };
            if done {
                log::info!("cluster-init: {} already done", step.name);
                continue;
            }
        }
        let args: Vec<&str> = step.args.iter().map(String::as_str).collect();
        let mut cmd = scli(&args);
        for which in &step.stdin {
            cmd = cmd.secret_stdin(stdin_line(*which, password));
        }
        r.check(&cmd).map_err(|e| format!("{}: {e}", what()))?;
        if let Some(c) = step.check.as_ref().filter(|_| step.verify) {
            let until = Instant::now() + deadline;
            while !holds(r, c, password).map_err(|e| format!("{}: {e}", what()))? {
                if Instant::now() >= until {
                    return Err(format!(
                        "{}: `{}` exited 0, but the cluster does not show it done ({c:?}) \
                         after {} s",
                        what(),
                        cmd.display(),
                        deadline.as_secs()
                    ));
                }
                std::thread::sleep(VERIFY_POLL);
            }
            known.retain(|(k, _)| k != c);
            known.push((c.clone(), true));
        }
        log::info!("cluster-init: {} done", step.name);
        ran.push(step.name.clone());
    }
    Ok(ran)
}

/// The cluster's installation id, through the primary MDM (`scli --mdm_ip`).
pub fn read_installation_id(
    r: &mut dyn Runner,
    primary: &str,
    password: &str,
) -> Result<String, String> {
    r.check(&login(password, Some(primary)))
        .map_err(|e| format!("logging in to the MDM cluster at {primary}: {e}"))?;
    let out = r
        .check(&scli(&["--mdm_ip", primary, "--query_all"]))
        .map_err(|e| format!("reading the installation id: {e}"))?;
    installation_id(&out.stdout).ok_or_else(|| {
        format!(
            "`scli --mdm_ip {primary} --query_all` exited 0 but printed no `Installation ID` \
             line; output ends: {}",
            commands::tail(&out.stdout).trim()
        )
    })
}

/// Restarts the gateway service and checks it runs (exit status of the init system's own
/// query, not its wording).
pub fn restart_gateway(r: &mut dyn Runner, platform: Platform) -> Result<(), String> {
    let gateway = Service::new(platform, GATEWAY_SERVICE);
    gateway
        .restart(r)
        .map_err(|e| format!("restarting the gateway: {e}"))?;
    gateway
        .check_running(r)
        .map_err(|e| format!("the gateway does not run after its restart: {e}"))
}

/// Whether the plan lets this MDM node do its part now: the primary once it holds its
/// steps (the standbys run their MDM), the others once the primary has built the cluster.
pub fn may_go_on(plan: &super::plan::Plan) -> bool {
    plan.cluster_init.as_ref().is_some_and(|c| {
        if c.role == Persona::Primary {
            !c.steps.is_empty()
        } else {
            c.cluster_created
        }
    })
}

impl Node {
    /// `cluster-init` (MDM nodes, experimental mode).
    pub(super) fn cluster_init(&mut self) -> StepResult {
        let platform = self.platform()?;
        self.wait_for_plan(
            "its turn in the MDM cluster build (cluster_init.waiting_for)",
            may_go_on,
        )?;
        let ci: ClusterInit = self.plan.cluster_init.clone().unwrap_or_default();
        let password = self
            .plan
            .password()
            .ok_or("the plan carries no admin password, which the MDM cluster build needs")?
            .to_string();
        let primary = ci
            .primary_ip
            .clone()
            .ok_or("the plan names no primary MDM address")?;
        if ci.role == Persona::Primary {
            let ran = create_cluster(self.runner.as_mut(), &ci.steps, &password, VERIFY_DEADLINE)?;
            log::info!(
                "node {}: MDM cluster {} ({} of {} scli steps run, the rest were done)",
                self.plan.hostname,
                if ran.is_empty() {
                    "already built"
                } else {
                    "built"
                },
                ran.len(),
                ci.steps.len()
            );
        }
        self.install_component(platform, Component::Lia)?;
        let id = read_installation_id(self.runner.as_mut(), &primary, &password)?;
        volume::write_if_changed(&self.facts.path(INSTALLATION_ID), &format!("{id}\n"), 0o644)?;
        self.install_component(platform, Component::Gateway)?;
        self.point_gateway_at_mdms(platform, &ci.mdm_ips)?;
        Ok(Findings::default())
    }

    pub(super) fn point_gateway_at_mdms(
        &mut self,
        platform: Platform,
        mdm_ips: &[String],
    ) -> Result<(), String> {
        if mdm_ips.len() != 2 {
            return Err(format!(
                "the plan names {} manager MDM address(es) for the gateway; it needs the \
                 primary and the secondary",
                mdm_ips.len()
            ));
        }
        let path = self.facts.path(GATEWAY_PROPERTIES);
        let old = std::fs::read_to_string(&path)
            .map_err(|e| format!("the gateway package left no {}: {e}", path.display()))?;
        let pending = self.facts.path(GATEWAY_RESTART_PENDING);
        let new = gateway_properties(&old, mdm_ips);
        if new != old {
            volume::write_if_changed(&pending, "", 0o600)?;
            volume::write_if_changed(&path, &new, 0o644)?;
        } else if !pending.exists() {
            log::info!(
                "node {}: gateway already points at the MDMs",
                self.plan.hostname
            );
            return Ok(());
        }
        restart_gateway(self.runner.as_mut(), platform)?;
        let _ = std::fs::remove_file(&pending);
        log::info!(
            "node {}: gateway points at MDMs {} and was restarted",
            self.plan.hostname,
            mdm_ips.join(",")
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::commands::Output;

    const QUERY_1_NODE: &str = "Cluster:\n    Name: N/A, ID: 1a2b, Mode: 1_node, State: Normal, \
        Active: 1/1, Replicas: 1/1\n    Virtual IPs: N/A\nMaster MDM:\n    Name: mdm1, ID: 0x1\n        \
        IPs: 10.0.0.1, Management IPs: 10.0.0.1, Port: 9011, Virtual IP interfaces: N/A\n\
        Standby MDMs:\n    Name: mdm2, ID: 0x2, Manager\n        IPs: 10.0.0.2, Port: 9011\n";
    const QUERY_3_NODE: &str = "Cluster:\n    Name: pool-sys, ID: 1a2b, Mode: 3_node, State: \
        Normal, Active: 3/3, Replicas: 2/2\nMaster MDM:\n    Name: mdm1, ID: 0x1\n        IPs: \
        10.0.0.1, Management IPs: 10.0.0.1, Port: 9011\nSlave MDMs:\n    Name: mdm2, ID: 0x2\n        \
        IPs: 10.0.0.2, Management IPs: 10.0.0.2, Port: 9011\nTie-Breakers:\n    Name: tb, ID: 0x3\n        \
        IPs: 10.0.0.3, Port: 9011\n";

    #[test]
    fn query_cluster_output_decides_what_is_done() {
        let member = |ip: &str| Check::Member { ip: ip.into() };
        assert!(shows(&member("10.0.0.2"), QUERY_1_NODE));
        assert!(!shows(&member("10.0.0.3"), QUERY_1_NODE));
        assert!(
            !shows(&member("10.0.0."), QUERY_1_NODE),
            "whole addresses only"
        );
        assert!(shows(&member("10.0.0.3"), QUERY_3_NODE));
        let mode = |m: &str| Check::Mode { mode: m.into() };
        assert!(shows(&mode("1_node"), QUERY_1_NODE) && !shows(&mode("3_node"), QUERY_1_NODE));
        assert!(shows(&mode("3_node"), QUERY_3_NODE));
        let named = |n: &str| Check::Named { name: n.into() };
        assert!(shows(&named("pool-sys"), QUERY_3_NODE));
        assert!(
            !shows(&named("mdm1"), QUERY_3_NODE),
            "an MDM's name is not the system's"
        );
        assert!(!shows(&named("pool-sys"), QUERY_1_NODE));
        assert!(!shows(&mode("3_node"), ""));
    }

    #[test]
    fn scli_waits_a_minute_for_the_mdm() {
        assert_eq!(login("pw", None).deadline, Cmd::SCLI_DEADLINE);
        assert_eq!(scli(&["--query_cluster"]).deadline, Cmd::SCLI_DEADLINE);
    }

    #[test]
    fn installation_id_is_read_from_query_all() {
        let out = "System Info:\n\tProduct:  EMC ScaleIO Version: R2_0.10000.2072\n\tID: 1a\n\
                   \tInstallation ID: 5f0c3a2b1d9e8f70\n\tMDM cluster state: Normal\n";
        assert_eq!(installation_id(out).as_deref(), Some("5f0c3a2b1d9e8f70"));
        assert_eq!(installation_id("System Info:\n\tInstallation ID: \n"), None);
        assert_eq!(installation_id(""), None);
    }

    #[test]
    fn gateway_properties_set_two_keys_and_keep_the_rest() {
        let old = "mdm.ip.addresses=\nmdm.port=6611\nsecurity.bypass_certificate_check=false\n\
                   features.enable_IM=true\n";
        let ips = ["10.0.0.1".to_string(), "10.0.0.2".to_string()];
        let new = gateway_properties(old, &ips);
        assert_eq!(
            new,
            "mdm.ip.addresses=10.0.0.1,10.0.0.2\nmdm.port=6611\n\
             security.bypass_certificate_check=true\nfeatures.enable_IM=true\n"
        );
        assert_eq!(gateway_properties(&new, &ips), new, "idempotent");
        assert_eq!(
            gateway_properties("a=b\nmdm.ip.addresses=x\nmdm.ip.addresses=y", &ips),
            "a=b\nmdm.ip.addresses=10.0.0.1,10.0.0.2\nsecurity.bypass_certificate_check=true\n"
        );
    }

    /// A scripted scli: the cluster's state, and every command run (argv and stdin).
    #[derive(Default)]
    struct FakeScli {
        exists: bool,
        password: Option<String>,
        logged_in: bool,
        standby: Vec<String>,
        mode: String,
        name: Option<String>,
        ran: Vec<String>,
        stdin_seen: Vec<String>,
        /// A command whose argv contains this fails with status 7.
        fail_on: Option<&'static str>,
    }

    impl FakeScli {
        fn query(&self) -> String {
            let mut q = format!(
                "Cluster:\n    Name: {}, ID: 1, Mode: {}, State: Normal\nMaster MDM:\n        \
                 IPs: 10.0.0.1, Port: 9011\n",
                self.name.as_deref().unwrap_or("N/A"),
                self.mode
            );
            for ip in &self.standby {
                q.push_str(&format!("Standby MDMs:\n        IPs: {ip}, Port: 9011\n"));
            }
            q
        }
    }

    impl Runner for FakeScli {
        fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
            let line = cmd.args.join(" ");
            self.ran.push(line.clone());
            self.stdin_seen.extend(cmd.secret_stdin.iter().cloned());
            let out = |status: i32, text: &str| {
                Ok(Output {
                    status,
                    stdout: text.to_string(),
                    tail: text.to_string(),
                })
            };
            if self.fail_on.is_some_and(|f| line.contains(f)) {
                return out(7, "Error: MDM failed command.  Status: Could not connect");
            }
            let has = |a: &str| cmd.args.iter().any(|x| x == a);
            let stdin = |i: usize| cmd.secret_stdin.get(i).cloned().unwrap_or_default();
            if has("--create_mdm_cluster") {
                if self.exists {
                    return out(1, "Error: MDM cluster already exists");
                }
                self.exists = true;
                self.mode = "1_node".into();
                self.password = Some("admin".into());
                return out(0, "");
            }
            if !self.exists {
                return out(1, "Error: The MDM cluster state is incorrect");
            }
            if has("--query_cluster") {
                return out(0, &self.query());
            }
            if has("--login") {
                self.logged_in = self.password.as_deref() == Some(&stdin(0));
                return out(if self.logged_in { 0 } else { 1 }, "");
            }
            if !self.logged_in {
                return out(1, "Error: Permission denied. Please login first");
            }
            if has("--set_password") {
                if self.password.as_deref() != Some(&stdin(0)) {
                    return out(1, "Error: Invalid username or password");
                }
                self.password = Some(stdin(1));
            } else if has("--add_standby_mdm") {
                let ip = cmd.args[cmd.args.iter().position(|a| a == "--new_mdm_ip").unwrap() + 1]
                    .clone();
                if self.standby.contains(&ip) {
                    return out(1, "Error: An MDM with the same IP address already exists");
                }
                self.standby.push(ip);
            } else if has("--switch_cluster_mode") {
                if self.mode == "3_node" {
                    return out(1, "Error: already in the requested mode");
                }
                self.mode = "3_node".into();
            } else if has("--rename_system") {
                self.name = Some(cmd.args.last().unwrap().clone());
            } else if has("--query_all") {
                return out(0, "System Info:\n\tInstallation ID: 00aa11bb22cc33dd\n");
            }
            out(0, "")
        }
    }

    const PW: &str = "Adm1n-Secret";

    fn steps() -> Vec<ScliStep> {
        // The scheduler's steps, as its plan serializes them.
        let json = serde_json::json!([
            {"name": "create the MDM cluster", "args": ["--create_mdm_cluster", "--master_mdm_ip", "10.0.0.1", "--accept_license"], "check": {"kind": "cluster_exists"}, "verify": true},
            {"name": "log in with the factory password", "args": ["--login", "--username", "admin"], "stdin": ["factory"], "check": {"kind": "password_set"}},
            {"name": "set the admin password", "args": ["--set_password"], "stdin": ["factory", "admin"], "check": {"kind": "password_set"}, "verify": true},
            {"name": "log in with the admin password", "args": ["--login", "--username", "admin"], "stdin": ["admin"]},
            {"name": "add the secondary MDM", "args": ["--add_standby_mdm", "--new_mdm_ip", "10.0.0.2"], "check": {"kind": "member", "ip": "10.0.0.2"}, "verify": true},
            {"name": "add the tie-breaker", "args": ["--add_standby_mdm", "--new_mdm_ip", "10.0.0.3"], "check": {"kind": "member", "ip": "10.0.0.3"}, "verify": true},
            {"name": "switch to a three-node cluster", "args": ["--switch_cluster_mode"], "check": {"kind": "mode", "mode": "3_node"}, "verify": true},
            {"name": "name the system", "args": ["--rename_system", "--new_name", "sys"], "check": {"kind": "named", "name": "sys"}, "verify": true}
        ]);
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_fresh_cluster_runs_every_step_with_passwords_only_on_stdin() {
        let mut s = FakeScli::default();
        let ran = create_cluster(&mut s, &steps(), PW, Duration::ZERO).unwrap();
        assert_eq!(ran.len(), 8, "{ran:?}");
        assert!(s.exists && s.mode == "3_node" && s.name.as_deref() == Some("sys"));
        assert_eq!(s.password.as_deref(), Some(PW));
        assert_eq!(s.standby, ["10.0.0.2", "10.0.0.3"]);
        assert!(s.ran.iter().all(|l| !l.contains(PW)), "{:?}", s.ran);
        assert!(s.stdin_seen.iter().any(|l| l == PW));
    }

    #[test]
    fn a_resumed_build_skips_what_is_done_and_repeats_no_unsafe_step() {
        let mut s = FakeScli::default();
        create_cluster(&mut s, &steps(), PW, Duration::ZERO).unwrap();
        s.logged_in = false;
        s.ran.clear();
        let ran = create_cluster(&mut s, &steps(), PW, Duration::ZERO).unwrap();
        assert_eq!(ran, ["log in with the admin password"], "{:?}", s.ran);
        assert!(!s.ran.iter().any(|l| l.contains("--create_mdm_cluster")
            || l.contains("--set_password")
            || l.contains("--add_standby_mdm")
            || l.contains("--switch_cluster_mode")));
        // Killed after the secondary was added: the rest is done, the secondary not again.
        let mut s = FakeScli::default();
        create_cluster(&mut s, &steps()[..5], PW, Duration::ZERO).unwrap();
        s.logged_in = false;
        s.ran.clear();
        let ran = create_cluster(&mut s, &steps(), PW, Duration::ZERO).unwrap();
        assert_eq!(
            ran,
            [
                "log in with the admin password",
                "add the tie-breaker",
                "switch to a three-node cluster",
                "name the system"
            ]
        );
        assert_eq!(s.standby, ["10.0.0.2", "10.0.0.3"]);
    }

    #[test]
    fn a_failing_step_names_its_command_status_and_output_but_no_password() {
        let mut s = FakeScli {
            fail_on: Some("10.0.0.3"),
            ..Default::default()
        };
        let e = create_cluster(&mut s, &steps(), PW, Duration::ZERO).unwrap_err();
        assert!(e.contains("\"add the tie-breaker\""), "{e}");
        assert!(
            e.contains("`scli --add_standby_mdm --new_mdm_ip 10.0.0.3`"),
            "{e}"
        );
        assert!(e.contains("exited with status 7"), "{e}");
        assert!(e.contains("Could not connect"), "{e}");
        assert!(!e.contains(PW));
        // A login refused: the stdin is named, never shown.
        let mut s = FakeScli::default();
        let mut bad = steps();
        bad.remove(2); // no password change: the admin password is refused
        let e = create_cluster(&mut s, &bad, PW, Duration::ZERO).unwrap_err();
        assert!(
            e.contains("--login --username admin < <1 secret line(s)>"),
            "{e}"
        );
        assert!(e.contains("exited with status 1"), "{e}");
    }

    #[test]
    fn a_step_that_exits_0_without_effect_fails_at_its_deadline() {
        struct Liar(FakeScli);
        impl Runner for Liar {
            fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
                if cmd.args.iter().any(|a| a == "--switch_cluster_mode") {
                    return Ok(Output {
                        status: 0,
                        stdout: String::new(),
                        tail: String::new(),
                    });
                }
                self.0.run(cmd)
            }
        }
        let mut s = Liar(FakeScli::default());
        let e = create_cluster(&mut s, &steps(), PW, Duration::from_millis(1)).unwrap_err();
        assert!(
            e.contains("switch to a three-node cluster") && e.contains("exited 0"),
            "{e}"
        );
    }

    #[test]
    fn missing_ids_are_errors() {
        // An unknown stdin password never reaches here: the plan does not parse (see the
        // contract's `an_unknown_stdin_password_does_not_parse`).
        let mut s = FakeScli::default();
        create_cluster(&mut s, &steps(), PW, Duration::ZERO).unwrap();
        assert_eq!(
            read_installation_id(&mut s, "10.0.0.1", PW).unwrap(),
            "00aa11bb22cc33dd"
        );
        assert!(s
            .ran
            .iter()
            .any(|l| l == "--mdm_ip 10.0.0.1 --login --username admin"));
        let e = read_installation_id(&mut s, "10.0.0.1", "wrong").unwrap_err();
        assert!(e.contains("logging in") && !e.contains("wrong"), "{e}");
    }

    #[test]
    fn the_primary_goes_on_with_its_steps_the_others_once_the_cluster_exists() {
        let plan = |ci: &str| -> super::super::plan::Plan {
            serde_json::from_str(&format!(r#"{{"version":1,"persona":"secondary"{ci}}}"#)).unwrap()
        };
        assert!(!may_go_on(&plan("")), "no cluster build in the plan: wait");
        assert!(!may_go_on(&plan(
            r#","cluster_init":{"role":"primary","steps":[]}"#
        )));
        assert!(may_go_on(&plan(
            r#","cluster_init":{"role":"primary","steps":[{"name":"n","args":[]}]}"#
        )));
        assert!(!may_go_on(&plan(
            r#","cluster_init":{"role":"secondary","cluster_created":false}"#
        )));
        assert!(may_go_on(&plan(
            r#","cluster_init":{"role":"tiebreaker","cluster_created":true}"#
        )));
    }

    #[test]
    fn gateway_restart_is_checked_by_status() {
        struct Init(Vec<String>, i32);
        impl Runner for Init {
            fn run(&mut self, cmd: &Cmd) -> Result<Output, CommandError> {
                self.0.push(cmd.display());
                let status = if cmd.args.contains(&"is-active".to_string()) {
                    self.1
                } else {
                    0
                };
                Ok(Output {
                    status,
                    stdout: String::new(),
                    tail: "inactive".into(),
                })
            }
        }
        let mut ok = Init(Vec::new(), 0);
        restart_gateway(&mut ok, Platform::Rhel7).unwrap();
        assert_eq!(
            ok.0,
            [
                "systemctl restart scaleio-gateway",
                "systemctl is-active scaleio-gateway"
            ]
        );
        let mut ub = Init(Vec::new(), 0);
        restart_gateway(&mut ub, Platform::Ubuntu1404).unwrap();
        assert_eq!(
            ub.0,
            [
                "service scaleio-gateway restart",
                "service scaleio-gateway status"
            ]
        );
        let e = restart_gateway(&mut Init(Vec::new(), 3), Platform::Rhel7).unwrap_err();
        assert!(e.contains("does not run") && e.contains("status 3"), "{e}");
    }
}
