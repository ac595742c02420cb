//! End to end, node side: the real scheduler and executors on dev cluster agents whose hosts
//! are stand-ins (`devcluster::host`): Ubuntu 14.04, RHEL 7 and CentOS 7 hosts walk to
//! `running` (the Ubuntu one installs its kernel and reboots once; one whose boot loader keeps
//! booting the old kernel reboots once and then waits, naming both), an unsupported OS and a
//! failing package install end as failed nodes naming the cause, an executor killed
//! mid-install resumes without reinstalling, an agent restart keeps the executor, and no
//! executor secret shows in the master's or agents' state endpoints.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, host_standins, scheduler_args, scheduler_bin, stage_packages, wait_for};
use devcluster::control;
use devcluster::host::{self, FakeRoot, HostProfile, HostState, Package, UBUNTU_SDC_KERNEL};
use devcluster::master::{self, MasterHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A reboot means the host away past the agent ping timeout, its agent back under a new id and
/// a relaunch there.
const SETTLE: Duration = Duration::from_secs(120);
const PASSWORD: &str = "Scaleio123";
const VOLUME_PASSWORD: &str = "Vol-Pw-4711";

struct Rig {
    m: Arc<MasterHandle>,
    _control: control::ControlHandle,
    control_url: String,
    _packages: Arc<tiny_http::Server>,
    sched: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl Rig {
    fn start(name: &str, profiles: &[HostProfile], prepare: impl FnOnce(&Path)) -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-node-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let listener = control::bind(0).unwrap();
        let mut standins = host_standins(Some(listener.url()));
        standins.per_agent = profiles
            .iter()
            .enumerate()
            .map(|(i, p)| (i + 1, *p))
            .collect::<BTreeMap<_, _>>();
        let m = Arc::new(
            master::start(master::MasterConfig {
                agents: profiles.len(),
                heartbeat_interval: Duration::from_secs(1),
                work_dir: dir.join("mesos"),
                status_update_retry: Duration::from_secs(1),
                // Reboots take the new-id path; a short ping timeout keeps their outage
                // (one ping past it) short.
                agent_removal_timeout: Duration::from_secs(2),
                host_standins: Some(standins),
                ..Default::default()
            })
            .expect("dev cluster"),
        );
        // The rig's own gateway: SDC stand-ins register with it through the control API
        // (an SDC installed with this cluster's MDM_IP connects), as nodes need for
        // storage-attach.
        let gateway = Arc::new(
            devcluster::gateway::start(devcluster::gateway::GatewayConfig::new(
                PASSWORD,
                cluster::dev_mdms(),
            ))
            .expect("dev gateway"),
        );
        let gateway_addr = gateway.addr();
        let control = listener
            .serve(control::Targets {
                master: m.clone(),
                gateway: Some(gateway),
            })
            .unwrap();
        prepare(&dir.join("mesos"));
        let port = free_port();
        let mut args = scheduler_args(
            &m.addr().to_string(),
            port,
            &dir.join("state.json"),
            PASSWORD,
        );
        for a in args.iter_mut() {
            if a.starts_with("-storage.preconfig.gateway=") {
                *a = format!("-storage.preconfig.gateway={gateway_addr}");
            }
        }
        let (flags, packages) = stage_packages(&dir.join("packages"));
        args.extend(flags);
        let mut rig = Rig {
            m,
            control_url: control.url(),
            _control: control,
            _packages: packages,
            sched: None,
            port,
            dir,
            args,
        };
        rig.spawn();
        rig
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("scheduler.log"))
            .unwrap();
        self.sched = Some(
            Command::new(scheduler_bin())
                .args(&self.args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start storage-scheduler"),
        );
    }

    fn stop_scheduler(&mut self) {
        if let Some(mut c) = self.sched.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn state_text(&self) -> Option<String> {
        ureq::get(&format!("http://127.0.0.1:{}/api/state", self.port))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()
    }

    /// The node of `agent-<n>` in `/api/state`.
    fn node(&self, n: usize) -> Option<Value> {
        let state: Value = serde_json::from_str(&self.state_text()?).ok()?;
        let host = format!("agent-{n}");
        state["model"]["nodes"]
            .as_object()?
            .values()
            .find(|v| v["hostname"] == host.as_str())
            .cloned()
    }

    fn wait_phase(&self, n: usize, phase: &str) -> Value {
        wait_for(&format!("agent-{n} in phase {phase}"), SETTLE, || {
            self.node(n).filter(|v| v["phase"] == phase)
        })
    }

    fn wait_error(&self, n: usize, needles: &[&str]) -> String {
        let last = std::cell::RefCell::new(String::new());
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(
                &format!("agent-{n} failing with {needles:?}"),
                SETTLE,
                || {
                    let e = self.node(n)?["last_error"].as_str()?.to_string();
                    *last.borrow_mut() = e.clone();
                    needles.iter().all(|w| e.contains(w)).then_some(e)
                },
            )
        }));
        found.unwrap_or_else(|_| panic!("agent-{n}: last error seen: {}", last.borrow()))
    }

    fn root(&self, n: usize) -> FakeRoot {
        root_of(&self.dir.join("mesos"), n)
    }

    fn host(&self, n: usize) -> HostState {
        self.root(n).state().unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop_scheduler();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("scheduler log:\n{}", self.log());
            eprintln!(
                "executor logs:\n{}",
                executor_logs(&self.dir.join("mesos"), "storage-executor")
            );
        }
    }
}

fn root_of(work: &Path, n: usize) -> FakeRoot {
    FakeRoot::open(&host::agent_root(&work.join(format!("agent-{n}")))).unwrap()
}

/// Stand-in runs whose argv starts with `prefix`.
fn runs(h: &HostState, prefix: &[&str]) -> usize {
    h.history
        .iter()
        .filter(|i| i.argv.len() >= prefix.len() && i.argv.iter().zip(prefix).all(|(a, p)| a == p))
        .count()
}

fn installs_of(h: &HostState, package: &str) -> usize {
    h.history
        .iter()
        .filter(|i| {
            matches!(i.argv.first().map(String::as_str), Some("dpkg" | "rpm"))
                && matches!(i.argv.get(1).map(String::as_str), Some("-i" | "-Uvh"))
                && i.argv.iter().any(|a| a.contains(package))
        })
        .count()
}

fn get(url: &str) -> String {
    ureq::get(url)
        .call()
        .expect(url)
        .into_body()
        .read_to_string()
        .unwrap()
}

/// Every `stderr` file under `dir` whose path names `executor`.
fn executor_logs(dir: &Path, executor: &str) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if p.file_name().is_some_and(|f| f == "stderr")
                && p.to_string_lossy().contains(executor)
            {
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

#[test]
fn mixed_hosts_reach_running_and_failures_name_their_cause() {
    use HostProfile::*;
    let rig = Rig::start(
        "mixed",
        &[Ubuntu1404, Rhel7, Centos7, Ubuntu1604, Rhel7],
        |work| {
            // agent-5 already has a newer SDS: rpm refuses the older one the plan hands out.
            root_of(work, 5)
                .update(|s| {
                    s.packages.insert(
                        "EMC-ScaleIO-sds".into(),
                        Package {
                            version: "2.0".into(),
                            release: Some("14000.231.el7".into()),
                            arch: "x86_64".into(),
                            status: "install ok installed".into(),
                        },
                    );
                })
                .unwrap();
        },
    );
    // An unsupported OS and a failing install: failed nodes whose message names the cause.
    let os = rig.wait_error(4, &["TASK_FAILED", "environment", "Ubuntu 16.04"]);
    assert!(os.contains("unsupported operating system"), "{os}");
    let rpm = rig.wait_error(5, &["TASK_FAILED", "packages", "rpm -Uvh", "status 1"]);
    assert!(rpm.contains("newer"), "{rpm}");
    for n in 1..=3 {
        rig.wait_phase(n, "running");
    }

    // The Ubuntu host installed the kernel the SDC needs and rebooted exactly once.
    let ubuntu = rig.host(1);
    assert_eq!(ubuntu.running_kernel, UBUNTU_SDC_KERNEL);
    assert_eq!(ubuntu.boots, 1);
    assert_eq!(runs(&ubuntu, &["shutdown"]) + runs(&ubuntu, &["reboot"]), 1);
    assert_eq!(
        runs(
            &ubuntu,
            &["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]
        ),
        1
    );
    for n in 1..=3 {
        let h = rig.host(n);
        for (deb, rpm) in [
            ("emc-scaleio-sds", "EMC-ScaleIO-sds"),
            ("emc-scaleio-sdc", "EMC-ScaleIO-sdc"),
        ] {
            let name = if n == 1 { deb } else { rpm };
            assert!(
                h.installed(name).is_some(),
                "agent-{n}: {name} not installed"
            );
        }
        assert_eq!(
            h.sdc_mdm_ips.as_deref(),
            Some("127.0.0.1,127.0.0.2"),
            "agent-{n}"
        );
        assert!(
            h.installed("emc-scaleio-mdm").is_none() && h.installed("EMC-ScaleIO-mdm").is_none()
        );
        for i in &h.history {
            assert!(!i.argv.iter().any(|a| a.contains(PASSWORD)), "{:?}", i.argv);
        }
        let cfg = rig.root(n).join("etc/rexray/config.yml");
        let mode = std::fs::metadata(&cfg).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "agent-{n}: {}", cfg.display());
        let text = std::fs::read_to_string(&cfg).unwrap();
        assert!(
            text.contains("endpoint: \"https://127.0.0.1/api\""),
            "{text}"
        );
        // REX-Ray from its URL (checked against its digest), once,
        // ordered after scini; no isolator asked for, so no dvdcli. No -rexray.username: no
        // credentials, and a warning on the node naming the flags.
        assert_eq!(installs_of(&h, "rexray"), 1, "agent-{n}");
        assert_eq!(installs_of(&h, "dvdcli"), 0, "agent-{n}");
        assert!(h.installed("rexray").is_some(), "agent-{n}");
        assert!(
            !text.contains("password") && !text.contains("userName"),
            "{text}"
        );
        if n == 1 {
            let script = std::fs::read_to_string(rig.root(n).join("etc/init.d/rexray")).unwrap();
            assert!(script.contains("$syslog scini\n"), "{script}");
            assert_eq!(runs(&h, &["service", "rexray", "restart"]), 1, "agent-{n}");
        } else {
            let dropin = rig
                .root(n)
                .join("etc/systemd/system/rexray.service.d/after-scini.conf");
            let text = std::fs::read_to_string(&dropin).unwrap();
            assert!(text.contains("After=scini.service"), "{text}");
            assert_eq!(runs(&h, &["systemctl", "daemon-reload"]), 1, "agent-{n}");
            assert_eq!(
                runs(&h, &["systemctl", "restart", "rexray"]),
                1,
                "agent-{n}"
            );
        }
        assert!(h.services["rexray"].running, "agent-{n}: REX-Ray runs");
        let warning = rig.node(n).unwrap()["warning"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            warning.contains("-rexray.username") && warning.contains("-rexray.password"),
            "agent-{n}: {warning:?}"
        );
        let node = rig.node(n).unwrap();
        assert_eq!(
            node["devices"],
            serde_json::json!(["/dev/xvdb", "/dev/xvdc"])
        );
    }

    let page = get(&format!("http://127.0.0.1:{}/", rig.port));
    assert!(
        page.contains("class=\"warning\"") && page.contains("-rexray.username"),
        "the status page shows the volume driver's warning"
    );
    let log = rig.log();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("WARN")
                && l.contains("-rexray.username and -rexray.password are not given"))
            .count(),
        1,
        "one start-up warning line:\n{log}"
    );

    // An unsupported OS and a failing install: failed nodes whose message names the cause.
    let os = rig.wait_error(4, &["TASK_FAILED", "environment", "Ubuntu 16.04"]);
    assert!(os.contains("unsupported operating system"), "{os}");
    let rpm = rig.wait_error(5, &["TASK_FAILED", "packages", "rpm -Uvh", "status 1"]);
    assert!(rpm.contains("newer"), "{rpm}");
    assert_eq!(
        runs(&rig.host(4), &[]),
        0,
        "nothing ran on the unsupported host"
    );

    // No secret in /api/state, nor in the master's or agents' state endpoints.
    let state = rig.state_text().unwrap();
    assert!(!state.contains(PASSWORD));
    let secrets: Vec<String> = cluster::launched_secrets(&rig.m).into_values().collect();
    assert!(!secrets.is_empty());
    let master_state = get(&format!("http://{}/master/state", rig.m.addr()));
    assert!(
        master_state.contains("STORAGE_SCHEDULER_URL"),
        "the master shows executor environments, as Mesos does"
    );
    // The executors that walked their hosts to `running` reached the scheduler over HTTPS
    // (they refuse any other URL); only the binary comes over plain HTTP.
    assert!(
        master_state.contains("https://127.0.0.1:"),
        "the executors are sent to the scheduler's HTTPS side"
    );
    let mut pages = vec![master_state];
    for a in rig.m.agents().unwrap() {
        pages.push(get(&format!("http://{}/state", a.endpoint)));
    }
    for page in &pages {
        for s in &secrets {
            assert!(!page.contains(s.as_str()), "an executor secret is served");
        }
    }

    // An agent restart keeps the executor: it subscribes again, nothing is relaunched.
    let before = rig.node(2).unwrap()["task"].clone();
    let executor = before["executor_id"].as_str().unwrap().to_string();
    let agent2 = rig.dir.join("mesos/agent-2");
    let subscribed = |log: &str| log.matches("SUBSCRIBED: agent").count();
    assert_eq!(subscribed(&executor_logs(&agent2, &executor)), 1);
    rig.m.restart_agent(1).unwrap();
    wait_for("the executor re-subscribed", SETTLE, || {
        (subscribed(&executor_logs(&agent2, &executor)) >= 2).then_some(())
    });
    let after = rig.node(2).unwrap();
    assert_eq!(after["task"]["task_id"], before["task_id"]);
    assert_eq!(after["task"]["state"], "TASK_RUNNING");
    assert_eq!(after["phase"], "running");
}

#[test]
fn an_executor_killed_mid_install_resumes_without_reinstalling() {
    let mut rig = Rig::start("resume", &[HostProfile::Rhel7], |_| {});
    // The isolator (from the package server, with its digest) and
    // REX-Ray's scoped gateway user.
    let packages = rig.dir.join("packages");
    let module = "libmesos_dvdi_isolator-1.0.1.so";
    std::fs::write(packages.join(module), "stand-in isolator module\n").unwrap();
    let server = rig
        .args
        .iter()
        .find_map(|a| a.strip_prefix("-storage.rhel7.sds="))
        .and_then(|u| u.rsplit_once('/'))
        .map(|(base, _)| base.to_string())
        .unwrap();
    rig.args.extend([
        format!("-isolator.binary={server}/{module}"),
        format!(
            "-isolator.sha256={}",
            cluster::sha256_of(&packages.join(module))
        ),
        "-rexray.username=rexray-vol".to_string(),
        format!("-rexray.password={VOLUME_PASSWORD}"),
    ]);
    // Without the SDC's URL the node installs the SDS, then waits at `packages`.
    let full = rig.args.clone();
    rig.args.retain(|a| !a.starts_with("-storage.rhel7.sdc"));
    rig.stop_scheduler();
    rig.spawn();
    let e = rig.wait_error(1, &["packages", "-storage.rhel7.sdc"]);
    assert!(
        !e.contains("TASK_FAILED"),
        "a missing URL waits, it does not fail: {e}"
    );
    let h = rig.host(1);
    assert_eq!(installs_of(&h, "EMC-ScaleIO-sds"), 1);
    assert_eq!(runs(&h, &["yum", "-y", "install"]), 1);

    // Killed mid-install: the relaunched executor resumes at `packages`.
    let task = rig.node(1).unwrap()["task"].clone();
    let executor = task["executor_id"].as_str().unwrap().to_string();
    rig.m.kill_executor(0, &executor).unwrap();
    wait_for("a relaunch", SETTLE, || {
        let n = rig.node(1)?;
        (n["task"]["executor_id"] != executor.as_str()
            && n["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("-storage.rhel7.sdc")))
        .then_some(())
    });

    // The operator adds the URL but not dvdcli's, which the isolator needs: the node installs
    // REX-Ray, then waits at `volume-driver` naming the flag.
    rig.stop_scheduler();
    rig.args = full
        .iter()
        .filter(|a| !a.starts_with("-rexray.rhel7.dvdcli"))
        .cloned()
        .collect();
    rig.spawn();
    let e = rig.wait_error(1, &["volume-driver", "-rexray.rhel7.dvdcli"]);
    assert!(!e.contains("TASK_FAILED"), "{e}");
    assert_eq!(installs_of(&rig.host(1), "rexray"), 1);

    // Killed there: the relaunched executor resumes at `volume-driver` and installs nothing
    // again (the stand-ins' command log).
    let executor = rig.node(1).unwrap()["task"]["executor_id"]
        .as_str()
        .unwrap()
        .to_string();
    rig.m.kill_executor(0, &executor).unwrap();
    wait_for("a relaunch waiting at volume-driver", SETTLE, || {
        let n = rig.node(1)?;
        (n["task"]["executor_id"] != executor.as_str()
            && n["task"]["state"] == "TASK_RUNNING"
            && n["phase"] == "volume-driver"
            && n["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("-rexray.rhel7.dvdcli")))
        .then_some(())
    });

    // With dvdcli's URL: dvdcli and the isolator, one reboot for the agent to load it, then
    // `running`.
    rig.stop_scheduler();
    rig.args = full;
    rig.spawn();
    rig.wait_phase(1, "running");
    let h = rig.host(1);
    assert_eq!(installs_of(&h, "EMC-ScaleIO-sds"), 1, "SDS installed again");
    assert_eq!(installs_of(&h, "EMC-ScaleIO-sdc"), 1);
    assert_eq!(
        runs(&h, &["yum", "-y", "install"]),
        1,
        "prerequisites again"
    );
    assert_eq!(installs_of(&h, "rexray"), 1, "REX-Ray installed again");
    assert_eq!(installs_of(&h, "dvdcli"), 1);
    assert_eq!(runs(&h, &["systemctl", "daemon-reload"]), 1);
    // Started once after its install and config; the resumed executor found it running (and
    // after the reboot it came back, enabled).
    assert_eq!(runs(&h, &["systemctl", "restart", "rexray"]), 1);
    assert_eq!(runs(&h, &["systemctl", "start", "rexray"]), 0);
    assert!(runs(&h, &["systemctl", "is-active", "rexray"]) >= 1);
    assert!(h.services["rexray"].running && h.services["rexray"].enabled);
    assert_eq!(h.boots, 1, "one reboot, for the isolator");
    assert_eq!(runs(&h, &["shutdown", "-r"]), 1);
    // That reboot came before the node's disks joined the pool: the scheduler granted it
    // before it first created the node's SDS.
    let rebooted = cluster::reboots_before_attach(&rig.log()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rebooted, ["agent-1"]);
    assert!(rig.log().contains("agent-1: creating SDS"), "{}", rig.log());
    let root = rig.root(1);
    let isolation = std::fs::read_to_string(root.join("etc/mesos-slave/isolation")).unwrap();
    assert!(
        isolation.starts_with("com_emccode_mesos_DockerVolumeDriverIsolator,"),
        "{isolation}"
    );
    let mode = std::fs::metadata(root.join(&format!("usr/lib/{module}")))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);
    let served = cluster::served(&packages);
    for file in [
        "rexray-0.11.4-1.x86_64.rpm",
        "dvdcli-0.2.1-1.x86_64.rpm",
        module,
    ] {
        assert_eq!(
            served.iter().filter(|s| s.as_str() == file).count(),
            1,
            "{file} downloaded once: {served:?}"
        );
    }

    // The scoped user reaches REX-Ray's configuration (root only), and no output shows its
    // password; the node carries no warning.
    let cfg = std::fs::read_to_string(root.join("etc/rexray/config.yml")).unwrap();
    assert!(cfg.contains("userName: \"rexray-vol\""), "{cfg}");
    assert!(cfg.contains(&format!("password: \"{VOLUME_PASSWORD}\"")));
    assert!(rig.node(1).unwrap().get("warning").is_none());
    let state = rig.state_text().unwrap();
    let page = get(&format!("http://127.0.0.1:{}/", rig.port));
    let logs = format!(
        "{}{}",
        rig.log(),
        executor_logs(&rig.dir.join("mesos"), "storage-executor")
    );
    for (what, text) in [("state", &state), ("page", &page), ("logs", &logs)] {
        assert!(
            !text.contains(VOLUME_PASSWORD),
            "{what} shows the volume password"
        );
        assert!(!text.contains(PASSWORD), "{what} shows the admin password");
    }
    for i in &h.history {
        assert!(
            !i.argv.iter().any(|a| a.contains(VOLUME_PASSWORD)),
            "{:?}",
            i.argv
        );
    }
    // Nor the stored state (`-store.dump`).
    rig.stop_scheduler();
    let dump = Command::new(scheduler_bin())
        .args(&rig.args)
        .arg("-store.dump")
        .output()
        .expect("storage-scheduler -store.dump");
    let out = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.status.success() && out.contains("agent-1"), "{out}");
    let both = format!("{out}{}", String::from_utf8_lossy(&dump.stderr));
    assert!(!both.contains(VOLUME_PASSWORD) && !both.contains(PASSWORD));
}

/// GRUB's saved default keeps booting the old kernel: the Ubuntu host reboots once for the
/// kernel the SDC needs, comes back on the old one, and its node then waits with a
/// configuration error naming the running kernel and the boot loader's default instead of
/// rebooting the host on every relaunch.
#[test]
fn a_boot_loader_that_boots_another_kernel_costs_one_reboot_not_endless_ones() {
    let old = HostProfile::Ubuntu1404.initial_kernel();
    let rig = Rig::start("grub", &[HostProfile::Ubuntu1404], |work| {
        root_of(work, 1).set_boot_loader_default(old).unwrap();
    });
    let error = wait_for("agent-1 waiting with a configuration error", SETTLE, || {
        let boots = rig.host(1).boots;
        assert!(boots <= 1, "the host rebooted {boots} times for one reason");
        let n = rig.node(1)?;
        let e = n["last_error"].as_str()?.to_string();
        (n["phase"] == "reboot-prerequisites" && e.contains("boot loader")).then_some(e)
    });
    assert!(
        error.contains(&format!("kernel {old} runs"))
            && error.contains(UBUNTU_SDC_KERNEL)
            && error.contains(&format!(
                "saved_entry=Advanced options for Ubuntu>Ubuntu, with Linux {old}"
            )),
        "{error}"
    );
    let h = rig.host(1);
    assert_eq!(h.boots, 1);
    assert_eq!(runs(&h, &["shutdown"]) + runs(&h, &["reboot"]), 1);
    assert_eq!(h.running_kernel, old);
    let n = rig.node(1).unwrap();
    assert_eq!(
        n["task"]["state"], "TASK_RUNNING",
        "it waits for a new plan: {n}"
    );
}

/// The reboot of a first install (Ubuntu's kernel) as Mesos sees it: the host is away longer
/// than the agent ping timeout, so the master marks the old agent unreachable (the task
/// TASK_UNREACHABLE), then the host's agent registers under a new id. The node follows the
/// host to the new agent and runs there; the old task stays unreachable under the old
/// agent id; the host has one SDS and never had two executors at once.
#[test]
fn a_reboot_during_first_install_brings_the_node_back_under_a_new_agent_id() {
    let rig = Rig::start("new-id", &[HostProfile::Ubuntu1404], |_| {});
    let old_id = rig.m.agents().unwrap()[0].id.clone();
    let first = wait_for("agent-1's first task", SETTLE, || {
        rig.node(1)?["task"]["task_id"].as_str().map(str::to_string)
    });
    let node = rig.wait_phase(1, "running");
    let agent = rig.m.agents().unwrap()[0].clone();
    assert_ne!(agent.id, old_id, "the rebooted host's agent kept its id");
    assert_eq!(node["agent_id"], agent.id.as_str(), "{node}");
    assert_ne!(node["task"]["task_id"], first.as_str(), "{node}");
    assert_eq!(rig.host(1).boots, 1);
    // The reboot was the executor's own doing: no failed launch, no error left.
    assert_eq!(node["failures"], 0, "{node}");
    assert!(node["last_error"].is_null(), "{node}");

    // The master's view: the first task unreachable on the old agent, the new one running.
    let state: Value =
        serde_json::from_str(&get(&format!("{}/master/state", rig.m.url()))).unwrap();
    let fw = &state["frameworks"][0];
    let unreachable = fw["unreachable_tasks"].as_array().unwrap();
    assert!(
        unreachable.iter().any(|t| t["id"] == first.as_str()
            && t["slave_id"] == old_id.as_str()
            && t["state"] == "TASK_UNREACHABLE"),
        "{unreachable:?}"
    );
    let running: Vec<&Value> = fw["tasks"].as_array().unwrap().iter().collect();
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(running[0]["slave_id"], agent.id.as_str());
    assert_eq!(running[0]["state"], "TASK_RUNNING");

    // One node, one SDS at the host's address, one executor at a time.
    let nodes: Value = serde_json::from_str(&rig.state_text().unwrap()).unwrap();
    assert_eq!(nodes["model"]["nodes"].as_object().unwrap().len(), 1);
    let control: Value =
        serde_json::from_str(&get(&format!("{}/control/state", rig.control_url))).unwrap();
    let sds = control["gateway"]["sds"].as_array().unwrap();
    let here: Vec<&Value> = sds
        .iter()
        .filter(|s| {
            s["ips"]
                .as_array()
                .is_some_and(|ips| ips.iter().any(|ip| ip == agent.ip.to_string().as_str()))
        })
        .collect();
    assert_eq!(here.len(), 1, "{sds:?}");
    let log = rig.m.launch_log().unwrap();
    let most = master::max_concurrent_executors(&log, "storage-executor");
    assert_eq!(most.get("agent-1"), Some(&1), "{most:?}");
}
