//! Host stand-ins: fake roots and the stand-in commands, run the way an executor runs them
//! (a child process with `PATH` and `STORAGE_HOST_ROOT` set), and their wiring into the
//! devcluster's agents.

mod master_support;

use devcluster::control;
use devcluster::gateway::{self, GatewayConfig, MdmIps};
use devcluster::host::{
    self, default_disks, FakeRoot, HostProfile, HostStandins, HostState, MdmRole, CONTROL_ENV,
    ROOT_ENV,
};
use master_support::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use storage_framework::mesos::types::*;
use storage_framework::mesos::Encoding;

const STANDIN: &str = env!("CARGO_BIN_EXE_storage-host-standin");
const SDS_DEB: &str = "EMC-ScaleIO-sds-2.0-10000.2072.Ubuntu.14.04.x86_64.deb";
const MDM_DEB: &str = "EMC-ScaleIO-mdm-2.0-10000.2072.Ubuntu.14.04.x86_64.deb";
const SDC_DEB: &str = "EMC-ScaleIO-sdc-2.0-10000.2072.Ubuntu.14.04.x86_64.deb";
const LIA_DEB: &str = "EMC-ScaleIO-lia-2.0-10000.2072.Ubuntu.14.04.x86_64.deb";
const GW_DEB: &str = "emc-scaleio-gateway_2.0-10000.2072_amd64.deb";
const SDS_RPM: &str = "EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm";
const SDC_RPM: &str = "EMC-ScaleIO-sdc-2.0-10000.2072.el7.x86_64.rpm";
const PASSWORD: &str = "Scaleio123";

struct Run {
    status: i32,
    out: String,
    err: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.out, self.err
        )
    }
}

/// A fake root with its stand-in directory, used like an executor would.
struct Host {
    dir: TempDir,
    root: PathBuf,
    bin: PathBuf,
    control: Option<String>,
}

impl Host {
    fn new(name: &str, profile: HostProfile) -> Host {
        let dir = temp_dir(name);
        let root = dir.join("root");
        FakeRoot::create(&root, profile, &default_disks(), "agent-1", Some(1)).unwrap();
        let bin = dir.join("bin");
        host::install_standins(&bin, Path::new(STANDIN)).unwrap();
        Host {
            dir,
            root,
            bin,
            control: None,
        }
    }

    fn fake(&self) -> FakeRoot {
        FakeRoot::open(&self.root).unwrap()
    }

    fn state(&self) -> HostState {
        self.fake().state().unwrap()
    }

    /// A downloaded package file in the sandbox.
    fn package(&self, file: &str) -> String {
        let p = self.dir.join("sandbox").join(file);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"!<arch>\npackage bytes").unwrap();
        p.to_string_lossy().into_owned()
    }

    fn run_full(&self, argv: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .env("PATH", path)
            .env(ROOT_ENV, &self.root)
            .env_remove(CONTROL_ENV)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        if let Some(c) = &self.control {
            cmd.env(CONTROL_ENV, c);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        if let Some(text) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        Run {
            status: out.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn run(&self, argv: &[&str]) -> Run {
        self.run_full(argv, &[], None)
    }

    fn ok(&self, argv: &[&str]) -> Run {
        let r = self.run(argv);
        assert_eq!(r.status, 0, "{argv:?}: {r:?}");
        r
    }

    fn ok_env(&self, argv: &[&str], env: &[(&str, &str)]) -> Run {
        let r = self.run_full(argv, env, None);
        assert_eq!(r.status, 0, "{argv:?}: {r:?}");
        r
    }
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Free disks as an executor finds them without blkid: no partitions, holders, mounts or
/// swap, no signature in the first bytes, and not a virtual, removable or mapped device.
fn free_disks(root: &Path) -> Vec<String> {
    let mounts = read(root, "proc/mounts") + &read(root, "proc/swaps");
    let mut mounted: Vec<String> = Vec::new();
    for line in mounts.lines() {
        let Some(dev) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rel) = dev.strip_prefix('/') else {
            continue;
        };
        let p = root.join(rel);
        let resolved = std::fs::canonicalize(&p).unwrap_or(p);
        if let Some(name) = resolved.file_name() {
            mounted.push(name.to_string_lossy().into_owned());
        }
    }
    let mut free = Vec::new();
    for entry in std::fs::read_dir(root.join("sys/block")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let dir = root.join("sys/block").join(&name);
        let virtual_dev = ["loop", "ram", "sr", "scini", "dm-"]
            .iter()
            .any(|p| name.starts_with(p));
        let removable = read(&dir, "removable").trim() == "1";
        let partitions = std::fs::read_dir(&dir)
            .unwrap()
            .any(|e| e.unwrap().path().join("partition").exists());
        let holders = std::fs::read_dir(dir.join("holders")).unwrap().count() > 0;
        let head = std::fs::read(root.join("dev").join(&name)).unwrap();
        let signature = head[..4096].iter().any(|b| *b != 0);
        if !(virtual_dev
            || removable
            || partitions
            || holders
            || signature
            || mounted.contains(&name))
        {
            free.push(name);
        }
    }
    free.sort();
    free
}

#[test]
fn an_ubuntu_root_has_the_release_files_kernel_and_disks_of_trusty() {
    let h = Host::new("layout-ubuntu", HostProfile::Ubuntu1404);
    let r = &h.root;
    let os = read(r, "etc/os-release");
    assert!(os.starts_with("NAME=\"Ubuntu\"\nVERSION=\"14.04.5 LTS, Trusty Tahr\"\nID=ubuntu\n"));
    assert!(os.contains("VERSION_ID=\"14.04\"\n"));
    assert!(read(r, "etc/lsb-release").contains("DISTRIB_RELEASE=14.04\nDISTRIB_CODENAME=trusty"));
    assert!(!r.join("etc/redhat-release").exists());
    assert_eq!(read(r, "proc/sys/kernel/osrelease"), "3.13.0-170-generic\n");
    assert_eq!(h.ok(&["uname", "-r"]).out, "3.13.0-170-generic\n");

    // Disks: the root by UUID as 14.04 lists it, an LVM member held by a mounted volume.
    let mounts = read(r, "proc/mounts");
    assert!(mounts.contains("/dev/disk/by-uuid/"), "{mounts}");
    assert!(mounts.contains("/dev/mapper/vg0-data /var/lib/docker ext4"));
    assert_eq!(read(r, "sys/block/xvdb/size"), "209715200\n");
    assert_eq!(read(r, "sys/block/xvdb/dev"), "202:16\n");
    assert_eq!(read(r, "sys/block/xvda/xvda1/partition"), "1\n");
    assert!(r.join("sys/block/xvde/holders/dm-0").is_dir());
    assert_eq!(read(r, "sys/block/dm-0/dm/name"), "vg0-data\n");
    assert_eq!(read(r, "sys/block/sr0/removable"), "1\n");
    assert!(r.join("sys/block/scinia").is_dir());
    let xvdd = std::fs::read(r.join("dev/xvdd")).unwrap();
    assert_eq!(&xvdd[1080..1082], &[0x53, 0xef], "ext4 superblock magic");
    assert!(read(r, "proc/swaps").contains("/dev/xvda2"));
    assert_eq!(free_disks(r), ["xvdb", "xvdc"]);

    let mode = std::fs::metadata(r.join("var/lib/storage-host-standin/state.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let s = h.state();
    assert_eq!(s.hostname, "agent-1");
    assert_eq!(s.agent, Some(1));
}

#[test]
fn a_rhel_root_is_rhel_7_9_with_xfs_and_no_debian_files() {
    let h = Host::new("layout-rhel", HostProfile::Rhel7);
    let r = &h.root;
    assert!(read(r, "etc/os-release")
        .contains("PRETTY_NAME=\"Red Hat Enterprise Linux Server 7.9 (Maipo)\""));
    assert_eq!(
        read(r, "etc/redhat-release"),
        "Red Hat Enterprise Linux Server release 7.9 (Maipo)\n"
    );
    assert!(!r.join("etc/lsb-release").exists());
    assert_eq!(h.ok(&["uname", "-r"]).out, "3.10.0-1160.el7.x86_64\n");
    assert!(read(r, "proc/mounts").contains("/dev/xvda1 / xfs "));
    assert_eq!(free_disks(r), ["xvdb", "xvdc"]);
    let centos = Host::new("layout-centos", HostProfile::Centos7);
    assert!(read(&centos.root, "etc/os-release").contains("ID=\"centos\""));
    assert_eq!(
        read(&centos.root, "etc/redhat-release"),
        "CentOS Linux release 7.9.2009 (Core)\n"
    );
}

#[test]
fn not_installed_answers_like_dpkg_and_the_commands_of_the_other_platform_are_missing() {
    let h = Host::new("missing", HostProfile::Ubuntu1404);
    let r = h.run(&["dpkg-query", "-W", "emc-scaleio-sds"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert_eq!(r.out, "");
    assert_eq!(
        r.err,
        "dpkg-query: no packages found matching emc-scaleio-sds\n"
    );
    let r = h.run(&["dpkg", "-s", "emc-scaleio-sds"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.err.starts_with(
        "dpkg-query: package 'emc-scaleio-sds' is not installed and no information is available\n"
    ));
    let r = h.run(&["dpkg", "-i", "/nonexistent/x.deb"]);
    assert_eq!(r.status, 1);
    assert!(
        r.err
            .contains("cannot access archive: No such file or directory"),
        "{r:?}"
    );
    let empty = h.dir.join("empty.deb");
    std::fs::write(&empty, b"").unwrap();
    let r = h.run(&["dpkg", "-i", empty.to_str().unwrap()]);
    assert_eq!(r.status, 1);
    assert!(r.err.contains("is not a debian format archive"), "{r:?}");
    for cmd in ["rpm", "yum", "systemctl", "scli"] {
        let r = h.run(&[cmd, "-q", "x"]);
        assert_eq!(r.status, 127, "{cmd}: {r:?}");
        assert_eq!(r.err, format!("{cmd}: command not found\n"));
    }
    let r = h.run(&["apt-get", "-y", "install", "no-such-package"]);
    assert_eq!(r.status, 100);
    assert!(r
        .err
        .contains("E: Unable to locate package no-such-package"));
    let hist = h.state().history;
    assert_eq!(hist.len(), 9);
    assert_eq!(hist[0].argv, ["dpkg-query", "-W", "emc-scaleio-sds"]);
    assert_eq!(hist[0].status, 1);
}

#[test]
fn dpkg_installs_storage_packages_with_versions_from_their_file_names() {
    let h = Host::new("dpkg", HostProfile::Ubuntu1404);
    let sds = h.package(SDS_DEB);
    // The SDS needs libaio1: dpkg unpacks it and leaves it unconfigured.
    let r = h.run(&["dpkg", "-i", &sds]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(
        r.err
            .contains("emc-scaleio-sds depends on libaio1; however:"),
        "{r:?}"
    );
    assert!(
        r.err.ends_with(&format!(
            "Errors were encountered while processing:\n {sds}\n"
        )),
        "{r:?}"
    );
    let r = h.ok(&[
        "dpkg-query",
        "-W",
        "--showformat=${Status}",
        "emc-scaleio-sds",
    ]);
    assert_eq!(r.out, "install ok unpacked");

    // Without -y apt-get asks, and a closed stdin aborts.
    let r = h.run(&["apt-get", "install", "libaio1", "zip"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(
        r.out.ends_with("Do you want to continue? [Y/n] Abort.\n"),
        "{r:?}"
    );
    assert!(h.state().installed("libaio1").is_none());
    let r = h.ok(&["apt-get", "-y", "install", "libaio1", "zip"]);
    assert!(r
        .out
        .contains("0 upgraded, 2 newly installed, 0 to remove and 0 not upgraded."));
    let r = h.ok(&["apt-get", "-y", "install", "zip"]);
    assert!(r.out.contains("zip is already the newest version."));
    assert!(r.out.contains("0 upgraded, 0 newly installed"));

    let r = h.ok(&["dpkg", "-i", &sds]);
    assert!(
        r.out
            .contains("Unpacking emc-scaleio-sds (2.0-10000.2072) over (2.0-10000.2072) ..."),
        "{r:?}"
    );
    assert!(r
        .out
        .contains("Setting up emc-scaleio-sds (2.0-10000.2072) ..."));
    let pid = h.state().services["sds"].pid.unwrap();
    assert!(
        r.out.contains(&format!("sds start/running, process {pid}")),
        "{r:?}"
    );

    assert_eq!(
        h.ok(&["dpkg-query", "-W", "emc-scaleio-sds"]).out,
        "emc-scaleio-sds\t2.0-10000.2072\n"
    );
    assert_eq!(
        h.ok(&[
            "dpkg-query",
            "-W",
            "-f",
            "${Version} ${Status}\\n",
            "emc-scaleio-sds"
        ])
        .out,
        "2.0-10000.2072 install ok installed\n"
    );
    let s = h.ok(&["dpkg", "-s", "emc-scaleio-sds"]).out;
    assert!(s.contains("Status: install ok installed\n"));
    assert!(s.contains("Version: 2.0-10000.2072\n"));
    assert!(h
        .ok(&["dpkg", "-l", "emc-scaleio-*"])
        .out
        .contains("ii  emc-scaleio-sds"));
    assert_eq!(
        h.ok(&["service", "sds", "status"]).out,
        format!("sds start/running, process {pid}\n")
    );
    assert_eq!(
        h.ok(&["initctl", "status", "sds"]).out,
        format!("sds start/running, process {pid}\n")
    );
    let r = h.run(&["service", "nope", "status"]);
    assert_eq!(
        (r.status, r.err.as_str()),
        (1, "nope: unrecognized service\n")
    );

    let gw = h.package(GW_DEB);
    let r = h.run(&["dpkg", "-i", &gw]);
    assert_eq!(r.status, 1, "the gateway needs its admin password: {r:?}");
    assert!(r.err.contains("GATEWAY_ADMIN_PASSWORD"));
    assert!(!h.state().packages.contains_key("emc-scaleio-gateway"));
    let r = h.ok_env(
        &["dpkg", "-i", &gw],
        &[("GATEWAY_ADMIN_PASSWORD", PASSWORD)],
    );
    assert!(r.out.contains("The EMC ScaleIO Gateway is running"));
    let props = read(
        &h.root,
        "opt/emc/scaleio/gateway/webapps/ROOT/WEB-INF/classes/gatewayUser.properties",
    );
    assert!(
        props.contains("mdm.ip.addresses=\n")
            && props.contains("security.bypass_certificate_check=false\n")
    );
    assert_eq!(
        h.ok(&["service", "scaleio-gateway", "status"]).out,
        "The EMC ScaleIO Gateway is running\n"
    );
    let lia = h.package(LIA_DEB);
    h.ok_env(&["dpkg", "-i", &lia], &[("TOKEN", PASSWORD)]);
    let s = h.state();
    assert!(s.lia_token_set && s.gateway_admin_password_set);
    assert!(h.root.join("opt/emc/scaleio/lia/cfg").is_dir());
    let state_text = read(&h.root, "var/lib/storage-host-standin/state.json");
    assert!(
        !state_text.contains(PASSWORD),
        "secrets from the environment are not kept"
    );
}

/// A control API stand-in: reboots the fake root as the devcluster would, and records calls.
struct ControlStub {
    url: String,
    calls: Arc<Mutex<Vec<String>>>,
    server: Arc<tiny_http::Server>,
}

impl ControlStub {
    fn start(root: PathBuf) -> ControlStub {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let url = format!("http://{}", server.server_addr().to_ip().unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (s, c) = (server.clone(), calls.clone());
        std::thread::spawn(move || {
            while let Ok(req) = s.recv() {
                c.lock()
                    .unwrap()
                    .push(format!("{} {}", req.method(), req.url()));
                let body = if req.url() == "/control/agents/1/reboot" {
                    let kernel = FakeRoot::open(&root).unwrap().boot().unwrap();
                    format!("{{\"agent\":1,\"done\":\"reboot\",\"kernel\":\"{kernel}\"}}")
                } else {
                    "{\"error\":\"no such endpoint\"}".to_string()
                };
                let _ = req.respond(tiny_http::Response::from_string(body));
            }
        });
        ControlStub { url, calls, server }
    }
}

impl Drop for ControlStub {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

#[test]
fn installing_the_kernel_and_rebooting_switches_the_running_kernel() {
    let mut h = Host::new("kernel", HostProfile::Ubuntu1404);
    let r = h.run(&["reboot"]);
    assert_eq!(r.status, 1, "no control API, no reboot: {r:?}");
    assert!(r.err.contains(CONTROL_ENV), "{r:?}");
    let stub = ControlStub::start(h.root.clone());
    h.control = Some(stub.url.clone());

    let r = h.ok(&["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]);
    assert!(r.out.contains("0 upgraded, 1 newly installed"), "{r:?}");
    assert!(r
        .out
        .contains("Found linux image: /boot/vmlinuz-4.4.0-38-generic"));
    assert_eq!(
        h.ok(&["dpkg-query", "-W", "linux-image-4.4.0-38-generic"])
            .out,
        "linux-image-4.4.0-38-generic\t4.4.0-38.57~14.04.1\n"
    );
    assert!(h.root.join("boot/vmlinuz-4.4.0-38-generic").exists());
    // Installed is not running: only a reboot switches.
    assert_eq!(h.ok(&["uname", "-r"]).out, "3.13.0-170-generic\n");
    let s = h.state();
    assert_eq!(s.pending_kernel.as_deref(), Some("4.4.0-38-generic"));
    let ssh_pid = s.services["ssh"].pid;

    let r = h.ok(&["shutdown", "-r", "now"]);
    assert_eq!(r.out, "");
    assert_eq!(
        *stub.calls.lock().unwrap(),
        ["POST /control/agents/1/reboot"]
    );
    assert_eq!(h.ok(&["uname", "-r"]).out, "4.4.0-38-generic\n");
    assert_eq!(
        h.ok(&["uname", "-a"]).out,
        "Linux agent-1 4.4.0-38-generic #57~14.04.1-Ubuntu SMP Tue Sep 6 17:20:43 UTC 2016 x86_64 x86_64 x86_64 GNU/Linux\n"
    );
    let s = h.state();
    assert_eq!(s.boots, 1);
    assert_eq!(s.pending_kernel, None);
    assert!(s.services["ssh"].running);
    assert_ne!(
        s.services["ssh"].pid, ssh_pid,
        "services restart with the host"
    );
    let r = h.run(&["shutdown", "-r", "+5"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert_eq!(
        stub.calls.lock().unwrap().len(),
        1,
        "a refused shutdown calls nobody"
    );
}

/// GRUB's saved default wins over the newest kernel: the host comes back on the kernel it
/// names, however often it reboots, until the default changes.
#[test]
fn a_saved_boot_loader_default_keeps_booting_its_kernel() {
    let mut h = Host::new("grub", HostProfile::Ubuntu1404);
    let stub = ControlStub::start(h.root.clone());
    h.control = Some(stub.url.clone());
    assert_eq!(
        read(&h.root, "etc/default/grub"),
        "GRUB_DEFAULT=0\nGRUB_TIMEOUT=10\n"
    );
    h.fake()
        .set_boot_loader_default("3.13.0-170-generic")
        .unwrap();
    h.ok(&["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]);
    for boot in 1..=2 {
        h.ok(&["reboot"]);
        assert_eq!(
            h.ok(&["uname", "-r"]).out,
            "3.13.0-170-generic\n",
            "boot {boot}"
        );
        assert_eq!(h.state().boots, boot);
    }
    // A saved entry naming a kernel that is not installed: GRUB falls back to the newest.
    assert_eq!(
        h.state().pending_kernel.as_deref(),
        Some("4.4.0-38-generic")
    );
    h.fake().set_boot_loader_default("9.9.9-1-generic").unwrap();
    h.ok(&["reboot"]);
    assert_eq!(h.ok(&["uname", "-r"]).out, "4.4.0-38-generic\n");
    // Back to the first entry: the saved entry is ignored.
    h.fake()
        .set_boot_loader_default("3.13.0-170-generic")
        .unwrap();
    std::fs::write(h.root.join("etc/default/grub"), "GRUB_DEFAULT=0\n").unwrap();
    h.ok(&["reboot"]);
    assert_eq!(h.ok(&["uname", "-r"]).out, "4.4.0-38-generic\n");
}

#[test]
fn the_sdc_needs_the_new_kernel_and_records_its_mdm_addresses() {
    let h = Host::new("sdc", HostProfile::Ubuntu1404);
    let sdc = h.package(SDC_DEB);
    let env = [("MDM_IP", "10.0.0.1,10.0.0.2")];
    let r = h.run_full(&["dpkg", "-i", &sdc], &env, None);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(
        r.err
            .contains("no scini driver for kernel 3.13.0-170-generic"),
        "{r:?}"
    );
    assert_eq!(
        h.ok(&[
            "dpkg-query",
            "-W",
            "--showformat=${Status}",
            "emc-scaleio-sdc"
        ])
        .out,
        "install ok half-configured"
    );
    h.ok(&["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]);
    h.fake().boot().unwrap();
    let r = h.ok_env(&["dpkg", "-i", &sdc], &env);
    assert!(r.out.contains("Success configuring module"), "{r:?}");
    assert_eq!(
        read(&h.root, "bin/emc/scaleio/drv_cfg.txt"),
        "# ScaleIO SDC configuration\nmdm 10.0.0.1,10.0.0.2\n"
    );
    assert_eq!(h.state().sdc_mdm_ips.as_deref(), Some("10.0.0.1,10.0.0.2"));
    assert_eq!(
        h.ok(&["service", "scini", "status"]).out,
        " * scini is running\n"
    );
}

fn install_mdm(h: &Host, manager: bool) {
    h.ok(&["apt-get", "-y", "install", "libaio1", "zip"]);
    let mdm = h.package(MDM_DEB);
    let role = if manager { "1" } else { "0" };
    let r = h.ok_env(&["dpkg", "-i", &mdm], &[("MDM_ROLE_IS_MANAGER", role)]);
    assert!(r.out.contains("mdm start/running, process"), "{r:?}");
    assert_eq!(
        read(&h.root, "opt/emc/scaleio/mdm/cfg/conf.txt"),
        format!("actor_role_is_manager={role}\n")
    );
}

/// A new cluster whose master MDM is the dev cluster's first agent address.
const CREATE_ON_127_0_0_2: [&str; 6] = [
    "scli",
    "--create_mdm_cluster",
    "--master_mdm_ip",
    "127.0.0.2",
    "--accept_license",
    "--approve_certificate",
];

const SWITCH_TO_3_NODE: [&str; 8] = [
    "scli",
    "--switch_cluster_mode",
    "--cluster_mode",
    "3_node",
    "--add_slave_mdm_name",
    "mdm2",
    "--add_tb_name",
    "tb",
];

fn scli_fails(h: &Host, argv: &[&str], stderr: &str) {
    let r = h.run(argv);
    assert_ne!(r.status, 0, "{argv:?} should fail: {r:?}");
    assert!(r.err.contains(stderr), "{argv:?}: {r:?}");
}

#[test]
fn the_scli_cluster_flow_runs_in_order_and_refuses_what_the_mdm_refuses() {
    let h = Host::new("scli", HostProfile::Ubuntu1404);
    assert_eq!(
        h.run(&["scli", "--query_cluster"]).status,
        127,
        "no MDM package, no scli"
    );
    install_mdm(&h, true);
    assert_eq!(h.state().mdm_role, Some(MdmRole::Manager));
    scli_fails(
        &h,
        &["scli", "--query_cluster"],
        "Status: The MDM cluster state is incorrect",
    );
    scli_fails(
        &h,
        &[
            "scli",
            "--login",
            "--username",
            "admin",
            "--password",
            "admin",
        ],
        "The MDM cluster state is incorrect",
    );
    let create = [
        "scli",
        "--create_mdm_cluster",
        "--master_mdm_ip",
        "10.0.0.1",
        "--master_mdm_management_ip",
        "10.0.0.1",
        "--master_mdm_name",
        "mdm1",
        "--accept_license",
        "--approve_certificate",
    ];
    scli_fails(&h, &create[..8], "--accept_license");
    assert_eq!(h.ok(&create).out, "Successfully created the MDM Cluster.\n");
    scli_fails(&h, &create, "MDM cluster already exists");
    let q = h.ok(&["scli", "--query_cluster"]).out;
    assert!(q.contains("Mode: 1_node"), "{q}");
    assert!(q.contains("Master MDM:\n    Name: mdm1"), "{q}");

    let standby_mgr = [
        "scli",
        "--add_standby_mdm",
        "--new_mdm_ip",
        "10.0.0.2",
        "--mdm_role",
        "manager",
        "--new_mdm_management_ip",
        "10.0.0.2",
        "--new_mdm_name",
        "mdm2",
    ];
    scli_fails(&h, &standby_mgr, "Please login first");
    scli_fails(
        &h,
        &[
            "scli",
            "--login",
            "--username",
            "admin",
            "--password",
            "wrong",
        ],
        "Invalid username or password",
    );
    let r = h.ok(&[
        "scli",
        "--login",
        "--username",
        "admin",
        "--password",
        "admin",
    ]);
    let id = h.state().scli.cluster.unwrap().id;
    assert_eq!(
        r.out,
        format!("Logged in. User role is SuperUser. System ID is {id}\n")
    );
    scli_fails(
        &h,
        &[
            "scli",
            "--set_password",
            "--old_password",
            "admin",
            "--new_password",
            "short",
        ],
        "at least 6 characters",
    );
    scli_fails(
        &h,
        &[
            "scli",
            "--set_password",
            "--old_password",
            "nope",
            "--new_password",
            PASSWORD,
        ],
        "Invalid username or password",
    );
    // Passwords can stay off the command line: old and new on stdin.
    let r = h.run_full(
        &["scli", "--set_password"],
        &[],
        Some(&format!("admin\n{PASSWORD}\n")),
    );
    assert_eq!(
        (r.status, r.out.as_str()),
        (0, "Password changed successfully\n"),
        "{r:?}"
    );
    scli_fails(
        &h,
        &[
            "scli",
            "--login",
            "--username",
            "admin",
            "--password",
            "admin",
        ],
        "Invalid username or password",
    );
    let r = h.run_full(
        &["scli", "--login", "--username", "admin"],
        &[],
        Some(&format!("{PASSWORD}\n")),
    );
    assert_eq!(r.status, 0, "{r:?}");

    let r = h.ok(&standby_mgr);
    assert!(
        r.out
            .starts_with("Successfully added a standby MDM. Object ID "),
        "{r:?}"
    );
    scli_fails(&h, &standby_mgr, "same IP address already exists");
    scli_fails(&h, &SWITCH_TO_3_NODE, "Could not find the standby MDM tb");
    h.ok(&[
        "scli",
        "--add_standby_mdm",
        "--new_mdm_ip",
        "10.0.0.3",
        "--mdm_role",
        "tb",
        "--new_mdm_name",
        "tb",
    ]);
    scli_fails(
        &h,
        &[
            "scli",
            "--switch_cluster_mode",
            "--cluster_mode",
            "3_node",
            "--add_slave_mdm_name",
            "tb",
            "--add_tb_name",
            "mdm2",
        ],
        "was not installed as a manager",
    );
    let switch = SWITCH_TO_3_NODE;
    assert_eq!(
        h.ok(&switch).out,
        "Successfully switched the cluster mode.\n"
    );
    scli_fails(&h, &switch, "already in the requested mode");
    let q = h.ok(&["scli", "--query_cluster"]).out;
    assert!(
        q.contains("Mode: 3_node, State: Normal, Active: 3/3"),
        "{q}"
    );
    assert!(q.contains("Slave MDMs:\n    Name: mdm2"), "{q}");
    assert!(q.contains("Tie-Breakers:\n    Name: tb"), "{q}");
    assert!(!q.contains("Standby MDMs:"), "{q}");

    scli_fails(
        &h,
        &[
            "scli",
            "--mdm_ip",
            "10.9.9.9",
            "--rename_system",
            "--new_name",
            "c1",
        ],
        "Failed to connect to MDM 10.9.9.9:6611",
    );
    assert_eq!(
        h.ok(&[
            "scli",
            "--mdm_ip",
            "10.0.0.1",
            "--rename_system",
            "--new_name",
            "c1"
        ])
        .out,
        "Successfully renamed system to c1\n"
    );
    let all = h.ok(&["scli", "--query_all"]).out;
    let install_id = all
        .lines()
        .find_map(|l| l.trim().strip_prefix("Installation ID: "))
        .expect("an Installation ID line");
    assert_eq!(install_id.len(), 16);
    assert!(install_id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(all.contains("Name:    c1"));
    h.ok(&["scli", "--logout"]);
    scli_fails(&h, &["scli", "--query_all"], "Please login first");

    let c = h.state().scli.cluster.unwrap();
    assert_eq!(c.name.as_deref(), Some("c1"));
    assert_eq!(c.mode, "3_node");
    assert_eq!(
        (c.slaves.as_slice(), c.tiebreakers.as_slice()),
        (&["mdm2".to_string()][..], &["tb".to_string()][..])
    );
    assert!(c.password_changed);
    assert_eq!(c.installation_id, install_id);
    let text = read(&h.root, "var/lib/storage-host-standin/state.json");
    assert!(!text.contains("\"admin_password_hash\": \"admin\""));
}

#[test]
fn a_tie_breaker_mdm_cannot_create_the_cluster() {
    let h = Host::new("scli-tb", HostProfile::Ubuntu1404);
    install_mdm(&h, false);
    scli_fails(
        &h,
        &[
            "scli",
            "--create_mdm_cluster",
            "--master_mdm_ip",
            "10.0.0.3",
            "--accept_license",
        ],
        "tie-breaker",
    );
    h.ok(&["service", "mdm", "stop"]);
    scli_fails(
        &h,
        &["scli", "--query_cluster"],
        "Failed to connect to MDM 127.0.0.1:6611",
    );
}

/// The argv of every command the host ran, in order.
fn history(h: &Host) -> Vec<Vec<String>> {
    h.state().history.into_iter().map(|i| i.argv).collect()
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn a_newer_package_over_an_installed_one_stops_and_starts_its_service_as_its_scripts_do() {
    // RHEL: `rpm -Uvh` of a newer build.
    let h = Host::new("upgrade-rpm", HostProfile::Rhel7);
    h.ok(&["yum", "-y", "install", "libaio"]);
    let old = h.package(SDS_RPM);
    h.ok(&["rpm", "-Uvh", &old]);
    // A first install starts the service and stops nothing.
    let first = history(&h);
    assert!(
        !first.iter().any(|a| a.contains(&"stop".to_string())),
        "{first:?}"
    );
    let pid = h.state().services["sds"].pid;
    let new = h.package("EMC-ScaleIO-sds-2.0-12000.122.el7.x86_64.rpm");
    h.ok(&["rpm", "-Uvh", &new]);
    assert_eq!(
        h.ok(&["rpm", "-q", "EMC-ScaleIO-sds"]).out,
        "EMC-ScaleIO-sds-2.0-12000.122.el7.x86_64\n"
    );
    let all = history(&h);
    assert_eq!(
        all[first.len()..],
        [
            argv(&["systemctl", "stop", "sds"]),
            argv(&["systemctl", "start", "sds"]),
            argv(&["rpm", "-Uvh", &new]),
            argv(&["rpm", "-q", "EMC-ScaleIO-sds"]),
        ]
    );
    let sds = &h.state().services["sds"];
    assert!(
        sds.running && sds.pid.is_some() && sds.pid != pid,
        "{sds:?}"
    );

    // Ubuntu: `dpkg -i` of a newer build, the Upstart job stopped and started.
    let h = Host::new("upgrade-deb", HostProfile::Ubuntu1404);
    h.ok(&["apt-get", "-y", "install", "libaio1"]);
    h.ok(&["dpkg", "-i", &h.package(SDS_DEB)]);
    let before = history(&h).len();
    let new = h.package("EMC-ScaleIO-sds-2.0-12000.122.Ubuntu.14.04.x86_64.deb");
    let r = h.ok(&["dpkg", "-i", &new]);
    assert!(
        r.out
            .contains("Unpacking emc-scaleio-sds (2.0-12000.122) over (2.0-10000.2072) ..."),
        "{r:?}"
    );
    assert!(r.out.contains("sds stop/waiting\n"), "{r:?}");
    assert_eq!(
        history(&h)[before..],
        [
            argv(&["service", "sds", "stop"]),
            argv(&["service", "sds", "start"]),
            argv(&["dpkg", "-i", &new]),
        ]
    );
    assert_eq!(
        h.ok(&["dpkg-query", "-W", "emc-scaleio-sds"]).out,
        "emc-scaleio-sds\t2.0-12000.122\n"
    );
    assert!(h.state().services["sds"].running);
}

#[test]
fn the_rpm_path_on_rhel_installs_with_yum_and_rpm_and_queries_like_rpm() {
    let h = Host::new("rpm", HostProfile::Rhel7);
    let r = h.run(&["rpm", "-q", "EMC-ScaleIO-sds"]);
    assert_eq!(
        (r.status, r.out.as_str()),
        (1, "package EMC-ScaleIO-sds is not installed\n")
    );
    let r = h.run(&["rpm", "-qi", "EMC-ScaleIO-sds"]);
    assert_eq!(
        (r.status, r.out.as_str()),
        (1, "package EMC-ScaleIO-sds is not installed\n")
    );
    for cmd in ["dpkg", "apt-get", "initctl"] {
        assert_eq!(h.run(&[cmd, "-l"]).status, 127, "{cmd}");
    }
    let sds = h.package(SDS_RPM);
    let r = h.run(&["rpm", "-Uvh", &sds]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.err.contains("error: Failed dependencies:\n\tlibaio is needed by EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64"), "{r:?}");
    let r = h.run(&["yum", "install", "libaio"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.out.contains("Exiting on user command"));
    let r = h.run(&["yum", "-y", "install", "libaio1"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(
        r.out.contains("No package libaio1 available.") && r.err.contains("Error: Nothing to do")
    );
    let r = h.ok(&[
        "yum",
        "-y",
        "install",
        "zip",
        "unzip",
        "libaio",
        "java-1.8.0-openjdk",
    ]);
    assert!(r.out.ends_with("Complete!\n"), "{r:?}");
    assert!(h
        .ok(&["yum", "-y", "install", "zip"])
        .out
        .contains("Package zip-3.0-11.el7.x86_64 already installed and latest version"));

    let r = h.ok(&["rpm", "-Uvh", &sds]);
    assert!(r.out.contains("Created symlink from /etc/systemd/system/multi-user.target.wants/sds.service to /usr/lib/systemd/system/sds.service."), "{r:?}");
    assert_eq!(
        h.ok(&["rpm", "-q", "EMC-ScaleIO-sds"]).out,
        "EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64\n"
    );
    let info = h.ok(&["rpm", "-qi", "EMC-ScaleIO-sds"]).out;
    assert!(
        info.contains("Version     : 2.0\nRelease     : 10000.2072.el7\n"),
        "{info}"
    );
    assert_eq!(
        h.ok(&[
            "rpm",
            "-q",
            "--qf",
            "%{VERSION}-%{RELEASE}\\n",
            "EMC-ScaleIO-sds"
        ])
        .out,
        "2.0-10000.2072.el7\n"
    );
    let r = h.run(&["rpm", "-Uvh", &sds]);
    assert_eq!(r.status, 1);
    assert!(r
        .err
        .contains("package EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64 is already installed"));

    let r = h.ok(&["systemctl", "is-active", "sds"]);
    assert_eq!(r.out, "active\n");
    let r = h.run(&["systemctl", "is-active", "sds", "nosuch"]);
    assert_eq!((r.status, r.out.as_str()), (3, "active\nunknown\n"));
    h.ok(&["systemctl", "stop", "sds.service"]);
    let r = h.run(&["systemctl", "is-active", "sds"]);
    assert_eq!((r.status, r.out.as_str()), (3, "inactive\n"));
    let r = h.run(&["service", "sds", "status"]);
    assert_eq!(r.status, 3);
    assert!(r
        .err
        .starts_with("Redirecting to /bin/systemctl status sds.service"));
    h.ok(&["service", "sds", "start"]);
    assert_eq!(h.ok(&["systemctl", "is-active", "sds"]).out, "active\n");

    let sdc = h.package(SDC_RPM);
    let r = h.ok_env(&["rpm", "-Uvh", &sdc], &[("MDM_IP", "10.0.0.1,10.0.0.2")]);
    assert!(r.out.contains("Starting scini"), "{r:?}");
    assert!(read(&h.root, "bin/emc/scaleio/drv_cfg.txt").contains("mdm 10.0.0.1,10.0.0.2\n"));
    let r = h.run_full(
        &[
            "rpm",
            "-Uvh",
            &h.package("EMC-ScaleIO-lia-2.0-10000.2072.el7.x86_64.rpm"),
        ],
        &[("TOKEN", "")],
        None,
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert!(!h.state().lia_token_set, "an empty TOKEN is no token");
}

// ---------------------------------------------------------------------------------------------
// With a real devcluster

/// Dumps its environment and `uname -r` where $DUMP says; with $REBOOT set it then installs
/// the kernel the SDC needs and reboots, as the executor's environment phase does.
const EXECUTOR_SCRIPT: &[u8] = b"#!/bin/sh
uname -r > \"$DUMP.uname.tmp\" 2>&1 && mv \"$DUMP.uname.tmp\" \"$DUMP.uname\"
command -v dpkg-query > \"$DUMP.which\"
env > \"$DUMP.env.tmp\" && mv \"$DUMP.env.tmp\" \"$DUMP.env\"
if [ -n \"$REBOOT\" ]; then
  apt-get -y install linux-image-4.4.0-38-generic > \"$DUMP.apt\" 2>&1
  reboot
  echo \"reboot returned $?\" > \"$DUMP.after-reboot\"
fi
exec sleep 300
";

fn script_executor(id: &str, files: &FileServer, dump: &Path, reboot: bool) -> ExecutorInfo {
    let mut variables = vec![environment::Variable {
        name: text("DUMP"),
        r#type: None,
        value: Some(text(&dump.to_string_lossy())),
    }];
    if reboot {
        variables.push(environment::Variable {
            name: text("REBOOT"),
            r#type: None,
            value: Some(text("1")),
        });
    }
    ExecutorInfo {
        executor_id: ExecutorID { value: text(id) },
        name: Some(text("host stand-in probe")),
        resources: vec![scalar("cpus", 0.1), scalar("mem", 32.0)],
        command: Some(CommandInfo {
            uris: vec![command_info::Uri {
                value: text(&files.url("/executor.sh")),
                executable: Some(true),
                ..Default::default()
            }],
            environment: Some(Environment { variables }),
            value: Some(text("./executor.sh")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Cluster {
    master: Arc<devcluster::master::MasterHandle>,
    gateway: Arc<gateway::GatewayHandle>,
    control: control::ControlHandle,
}

fn cluster_with_hosts(dir: &Path) -> Cluster {
    cluster_with_ubuntu_hosts(dir, 1)
}

fn cluster_with_ubuntu_hosts(dir: &Path, agents: usize) -> Cluster {
    let listener = control::bind(0).unwrap();
    let mut standins = HostStandins::new(PathBuf::from(STANDIN), Some(listener.url()));
    standins.per_agent = (1..=agents).map(|n| (n, HostProfile::Ubuntu1404)).collect();
    let master = Arc::new(cluster(agents, |cfg| {
        cfg.work_dir = dir.join("work");
        cfg.host_standins = Some(standins);
        // A reboot is away one ping past this, and its agent comes back under a new id.
        cfg.agent_removal_timeout = Duration::from_millis(500);
    }));
    let mut gw = GatewayConfig::new(
        PASSWORD,
        MdmIps {
            primary: "127.0.0.2".into(),
            secondary: "127.0.0.3".into(),
            tiebreaker: "127.0.0.4".into(),
        },
    );
    gw.preconfigured = None;
    let gateway = Arc::new(gateway::start(gw).unwrap());
    let control = listener
        .serve(control::Targets {
            master: master.clone(),
            gateway: Some(gateway.clone()),
        })
        .unwrap();
    Cluster {
        master,
        gateway,
        control,
    }
}

fn wait_for_file(p: &Path) -> String {
    wait_until(&format!("{}", p.display()), || {
        std::fs::read_to_string(p).ok()
    })
}

#[test]
fn agents_give_executors_the_fake_root_and_stand_ins_and_reboot_switches_their_kernel() {
    let dir = temp_dir("wiring");
    let c = cluster_with_hosts(&dir);
    let agent_dir = dir.join("work").join("agent-1");
    let root = host::agent_root(&agent_dir);
    let files = FileServer::start(vec![("/executor.sh", EXECUTOR_SCRIPT.to_vec())]);

    let sched = Sched::subscribe(
        c.master.addr(),
        Encoding::Protobuf,
        framework_info("probe", false),
    );
    let offer = sched.offers().remove(0);
    let dump = dir.join("first");
    sched.accept(
        &[&offer],
        vec![executor_task(
            "probe-1",
            &offer,
            script_executor("probe-1", &files, &dump, true),
        )],
    );
    wait_for_file(&dump.with_extension("env"));
    let env = read_env_dump(&dump.with_extension("env"));
    assert_eq!(env[ROOT_ENV], root.to_string_lossy());
    let bin = host::agent_bin(&agent_dir);
    assert!(
        env["PATH"].starts_with(&format!("{}:", bin.display())),
        "{}",
        env["PATH"]
    );
    assert_eq!(env[CONTROL_ENV], c.control.url());
    assert_eq!(
        wait_for_file(&dump.with_extension("uname")),
        "3.13.0-170-generic\n"
    );
    assert_eq!(
        wait_for_file(&dump.with_extension("which")).trim(),
        bin.join("dpkg-query").to_string_lossy()
    );

    // The script installed the kernel and rebooted: the control API booted the host and took
    // the agent down, which killed the executor before `reboot` could return. Away longer
    // than the ping timeout, the agent is marked unreachable (TASK_LOST for a framework that
    // is not partition-aware), and comes back under a new id.
    let fake = FakeRoot::open(&root).unwrap();
    let old_id = c.master.agents().unwrap()[0].id.clone();
    wait_until("the reboot", || {
        (fake.state().unwrap().boots == 1).then_some(())
    });
    let lost = sched.update_for("probe-1", TaskState::Lost);
    assert_eq!(lost.reason, Some(task_status::Reason::AgentRemoved));
    assert_eq!(
        lost.agent_id.as_ref().map(|a| a.value.as_str()),
        Some(old_id.as_str())
    );
    wait_until("the agent back under a new id", || {
        let a = c.master.agents().unwrap().remove(0);
        (a.up && a.id != old_id).then_some(())
    });
    assert_eq!(fake.running_kernel().unwrap(), "4.4.0-38-generic");
    assert!(read(&dir, "first.apt").contains("1 newly installed"));
    assert!(
        !dir.join("first.after-reboot").exists(),
        "reboot never returns"
    );
    let history: Vec<String> = fake
        .state()
        .unwrap()
        .history
        .iter()
        .map(|i| i.argv.join(" "))
        .collect();
    assert_eq!(
        history,
        [
            "uname -r",
            "apt-get -y install linux-image-4.4.0-38-generic",
            "reboot"
        ]
    );

    // A fresh framework gets offers made after the reboot; its executor sees the new kernel.
    sched.simple(storage_framework::mesos::scheduler::call::Type::Teardown);
    let sched2 = Sched::subscribe(
        c.master.addr(),
        Encoding::Protobuf,
        framework_info("probe2", false),
    );
    let offer = sched2.offers().remove(0);
    let dump2 = dir.join("second");
    sched2.accept(
        &[&offer],
        vec![executor_task(
            "probe-2",
            &offer,
            script_executor("probe-2", &files, &dump2, false),
        )],
    );
    assert_eq!(
        wait_for_file(&dump2.with_extension("uname")),
        "4.4.0-38-generic\n"
    );

    let resp = get(c.control.addr(), "/control/agents/1/host");
    assert_eq!(resp.status, 200, "{}", resp.text());
    let v = resp.json();
    assert_eq!(v["running_kernel"], "4.4.0-38-generic");
    assert_eq!(v["boots"], 1);
    assert_eq!(get(c.control.addr(), "/control/agents/7/host").status, 404);
    drop(c.gateway);
}

#[test]
fn renaming_the_new_mdm_cluster_creates_the_gateway_system() {
    let dir = temp_dir("gw-system");
    let c = cluster_with_hosts(&dir);
    let agent_dir = dir.join("work").join("agent-1");
    let mut h = Host {
        root: host::agent_root(&agent_dir),
        bin: host::agent_bin(&agent_dir),
        dir,
        control: Some(c.control.url()),
    };
    assert!(c.gateway.snapshot()["system"].is_null());
    install_mdm(&h, true);
    h.ok(&CREATE_ON_127_0_0_2);
    h.ok(&[
        "scli",
        "--login",
        "--username",
        "admin",
        "--password",
        "admin",
    ]);
    assert!(
        c.gateway.snapshot()["system"].is_null(),
        "no system before it has its name"
    );
    h.ok(&["scli", "--rename_system", "--new_name", "cluster1"]);
    let system = c.gateway.snapshot()["system"].clone();
    assert_eq!(system["name"], "cluster1");
    assert_eq!(
        h.state().scli.cluster.unwrap().gateway_system_id.as_deref(),
        system["id"].as_str()
    );
    h.ok(&["scli", "--rename_system", "--new_name", "cluster1"]);
    let r = h.run(&["scli", "--rename_system", "--new_name", "other"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.err.contains("cannot be renamed"), "{r:?}");
    assert_eq!(
        h.state().scli.cluster.unwrap().name.as_deref(),
        Some("cluster1")
    );
    assert_eq!(c.gateway.snapshot()["system"]["name"], "cluster1");

    let bad = request(
        c.control.addr(),
        "POST",
        "/control/gateway/create-system",
        &[],
        b"",
    );
    assert_eq!(bad.status, 400, "{}", bad.text());
    let same = request(
        c.control.addr(),
        "POST",
        "/control/gateway/create-system?name=cluster%31",
        &[],
        b"",
    );
    assert_eq!(same.status, 200, "{}", same.text());
    assert_eq!(same.json()["created"], false);
    h.control = None;
    let r = h.run(&["reboot"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(c.master.agents().unwrap()[0].up);
}

/// Agent `n`'s host of the cluster working under `cluster_dir`; `dir` holds its packages.
fn agent_host(c: &Cluster, cluster_dir: &Path, n: usize, dir: TempDir) -> Host {
    let agent_dir = cluster_dir.join("work").join(format!("agent-{n}"));
    Host {
        root: host::agent_root(&agent_dir),
        bin: host::agent_bin(&agent_dir),
        dir,
        control: Some(c.control.url()),
    }
}

/// Experimental mode on two hosts: another MDM host's `scli --mdm_ip <master>` acts on the
/// master's cluster with its own session; the three-node cluster's name creates the
/// gateway's system with that trio; an SDC installed before the cluster connects once it
/// exists.
#[test]
fn scli_reaches_the_master_from_another_host_and_the_trio_becomes_the_gateways() {
    let dir = temp_dir("gw-trio");
    let c = cluster_with_ubuntu_hosts(&dir, 3);
    let pri = agent_host(&c, &dir, 1, temp_dir("gw-trio-1"));
    let other = agent_host(&c, &dir, 2, temp_dir("gw-trio-2"));
    let tb = agent_host(&c, &dir, 3, temp_dir("gw-trio-3"));
    install_mdm(&pri, true);
    install_mdm(&other, true);
    // The SDC comes first, as in the executor's packages phase: no cluster to talk to yet.
    other.ok(&["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]);
    other.fake().boot().unwrap();
    let sdc = other.package(SDC_DEB);
    let r = other.ok_env(&["dpkg", "-i", &sdc], &[("MDM_IP", "127.0.0.2,127.0.0.3")]);
    assert!(r.err.contains("did not connect"), "{r:?}");
    pri.ok(&CREATE_ON_127_0_0_2);
    let query_all = ["scli", "--mdm_ip", "127.0.0.2", "--query_all"];
    scli_fails(&other, &query_all, "Please login first");
    let login = [
        "scli",
        "--mdm_ip",
        "127.0.0.2",
        "--login",
        "--username",
        "admin",
    ];
    let wrong = other.run_full(&login, &[], Some("nope\n"));
    assert!(
        wrong.err.contains("Invalid username or password"),
        "{wrong:?}"
    );
    let elsewhere = other.run_full(
        &[
            "scli",
            "--mdm_ip",
            "127.0.0.9",
            "--login",
            "--username",
            "admin",
        ],
        &[],
        Some("admin\n"),
    );
    assert!(
        elsewhere.err.contains("Failed to connect to MDM 127.0.0.9"),
        "{elsewhere:?}"
    );
    assert_eq!(other.run_full(&login, &[], Some("admin\n")).status, 0);
    let cluster = pri.state().scli.cluster.unwrap();
    assert!(other
        .ok(&query_all)
        .out
        .contains(&format!("Installation ID: {}", cluster.installation_id)));
    scli_fails(&pri, &["scli", "--query_all"], "Please login first");
    // Each run is in the caller's command log only.
    let logged = |h: &Host, verb: &str| {
        h.state()
            .history
            .iter()
            .filter(|i| i.argv.iter().any(|a| a == verb))
            .count()
    };
    assert_eq!(logged(&other, "--query_all"), 2);
    assert_eq!(logged(&pri, "--query_all"), 1);

    pri.ok(&[
        "scli",
        "--login",
        "--username",
        "admin",
        "--password",
        "admin",
    ]);
    let add = |ip: &str, role: &str, name: &str| {
        pri.run(&[
            "scli",
            "--add_standby_mdm",
            "--new_mdm_ip",
            ip,
            "--mdm_role",
            role,
            "--new_mdm_name",
            name,
        ])
    };
    // The master talks to the MDM it adds: it must run there, installed for that role.
    let r = add("127.0.0.4", "tb", "tb");
    assert!(
        r.err
            .contains("Could not communicate with the new MDM 127.0.0.4"),
        "{r:?}"
    );
    install_mdm(&tb, false);
    let r = add("127.0.0.4", "manager", "tb");
    assert!(
        r.err.contains("installed as a tie-breaker, not a manager"),
        "{r:?}"
    );
    assert_eq!(add("127.0.0.3", "manager", "mdm2").status, 0);
    assert_eq!(add("127.0.0.4", "tb", "tb").status, 0);
    pri.ok(&SWITCH_TO_3_NODE);
    assert!(c.gateway.snapshot()["system"].is_null());
    pri.ok(&[
        "scli",
        "--mdm_ip",
        "127.0.0.2",
        "--rename_system",
        "--new_name",
        "trio1",
    ]);
    let snap = c.gateway.snapshot();
    assert_eq!(snap["system"]["name"], "trio1");
    assert_eq!(
        snap["system"]["mdm"],
        serde_json::json!({"primary": "127.0.0.2", "secondary": "127.0.0.3", "tiebreaker": "127.0.0.4"})
    );
    let ip = c.master.agents().unwrap()[1].ip.to_string();
    assert_eq!(snap["sdc"].as_array().map(Vec::len), Some(1), "{snap}");
    assert_eq!(snap["sdc"][0]["ip"], serde_json::json!(ip));
    assert_eq!(snap["sdc"][0]["connected"], serde_json::json!(true));
}

/// An SDC installed with `MDM_IP` naming this cluster's MDMs registers with the
/// gateway (its Sdc list, by the agent's address); one naming other MDMs does not; a reboot
/// of the agent disconnects it.
#[test]
fn an_installed_sdc_connects_to_the_gateway_and_a_reboot_disconnects_it() {
    let dir = temp_dir("gw-sdc");
    let c = cluster_with_hosts(&dir);
    let agent_dir = dir.join("work").join("agent-1");
    let h = Host {
        root: host::agent_root(&agent_dir),
        bin: host::agent_bin(&agent_dir),
        dir,
        control: Some(c.control.url()),
    };
    c.gateway.create_system("scaleio").unwrap();
    h.ok(&["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]);
    h.fake().boot().unwrap();
    let sdc = h.package(SDC_DEB);
    let r = h.ok_env(&["dpkg", "-i", &sdc], &[("MDM_IP", "10.9.9.1,10.9.9.2")]);
    assert!(r.err.contains("did not connect"), "{r:?}");
    assert_eq!(c.gateway.snapshot()["sdc"], serde_json::json!([]));

    h.ok(&["dpkg", "-r", "emc-scaleio-sdc"]);
    h.ok_env(&["dpkg", "-i", &sdc], &[("MDM_IP", "127.0.0.2,127.0.0.3")]);
    let ip = c.master.agents().unwrap()[0].ip.to_string();
    let sdcs = c.gateway.snapshot()["sdc"].clone();
    assert_eq!(sdcs.as_array().map(Vec::len), Some(1), "{sdcs}");
    assert_eq!(sdcs[0]["ip"], serde_json::json!(ip));
    assert_eq!(sdcs[0]["connected"], serde_json::json!(true));

    let r = request(
        c.control.addr(),
        "POST",
        "/control/agents/1/reboot",
        &[],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        c.gateway.snapshot()["sdc"][0]["connected"],
        serde_json::json!(false)
    );
}

/// The control API stops and starts a host's services as a person at the host would: the
/// service's own status query says so, and `scini` unloaded is gone from `/proc/modules`.
#[test]
fn the_control_api_stops_and_starts_services_and_unloads_the_sdc_module() {
    let dir = temp_dir("service-control");
    let c = cluster_with_hosts(&dir);
    let agent_dir = dir.join("work").join("agent-1");
    let h = Host {
        root: host::agent_root(&agent_dir),
        bin: host::agent_bin(&agent_dir),
        dir,
        control: Some(c.control.url()),
    };
    assert!(!read(&h.root, "proc/modules").contains("scini"));
    h.ok(&[
        "apt-get",
        "-y",
        "install",
        "linux-image-4.4.0-38-generic",
        "libaio1",
    ]);
    h.fake().boot().unwrap();
    h.ok(&["dpkg", "-i", &h.package(SDS_DEB)]);
    h.ok_env(
        &["dpkg", "-i", &h.package(SDC_DEB)],
        &[("MDM_IP", "10.0.0.1")],
    );
    let modules = read(&h.root, "proc/modules");
    assert!(modules.starts_with("scini "), "{modules}");
    assert!(h.root.join("sys/module/scini").is_dir());

    let post = |query: &str| {
        let path = format!("/control/agents/1/service?{query}");
        request(c.control.addr(), "POST", &path, &[], b"")
    };
    let r = post("name=scini&running=false");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        serde_json::json!({"agent": 1, "service": "scini", "running": false})
    );
    assert!(!read(&h.root, "proc/modules").contains("scini"));
    assert!(!h.root.join("sys/module/scini").exists());
    let status = h.run(&["service", "scini", "status"]);
    assert_eq!(
        (status.status, status.out.as_str()),
        (3, " * scini is not running\n")
    );

    assert_eq!(post("name=sds&running=false").status, 200);
    assert_eq!(
        h.ok(&["service", "sds", "status"]).out,
        "sds stop/waiting\n"
    );
    assert_eq!(post("name=sds&running=true").status, 200);
    assert!(h
        .ok(&["service", "sds", "status"])
        .out
        .starts_with("sds start/running, process "));
    assert_eq!(post("name=scini&running=true").status, 200);
    assert!(read(&h.root, "proc/modules").starts_with("scini "));

    // Bad requests name what was wrong.
    for (query, status, needle) in [
        (
            "name=mdm&running=false",
            409,
            "service mdm is not installed",
        ),
        (
            "name=ssh&running=false",
            400,
            "ssh\\\" is not one of sds|lia|mdm|rexray|scini",
        ),
        ("name=sds&running=no", 400, "no\\\" is not true or false"),
        ("name=sds", 400, "service needs ?name="),
    ] {
        let r = post(query);
        assert_eq!(r.status, status, "{query}: {}", r.text());
        assert!(r.text().contains(needle), "{query}: {}", r.text());
    }
    let r = request(
        c.control.addr(),
        "POST",
        "/control/agents/7/service?name=sds&running=false",
        &[],
        b"",
    );
    assert_eq!(r.status, 404, "{}", r.text());
    drop(c.gateway);
}

/// A host whose packages were there before the framework answers every query the executor
/// makes as a host that installed them with the stand-in's `dpkg`/`rpm` does.
#[test]
fn a_preinstalled_host_answers_as_one_that_installed_the_packages() {
    let what = host::Preinstalled {
        version: "2.0-10000.2072".into(),
        mdm_ips: "10.0.0.1,10.0.0.2".into(),
        rexray: Some("0.11.4-1".into()),
    };
    let env = [("MDM_IP", "10.0.0.1,10.0.0.2")];
    for profile in [HostProfile::Ubuntu1404, HostProfile::Rhel7] {
        let deb = profile == HostProfile::Ubuntu1404;
        let installed = Host::new(&format!("installed-{}", profile.name()), profile);
        let (files, tool, flag) = if deb {
            installed.ok(&["apt-get", "-y", "install", "libaio1", "zip"]);
            installed.ok(&["apt-get", "-y", "install", "linux-image-4.4.0-38-generic"]);
            installed.fake().boot().unwrap();
            (
                [SDS_DEB, SDC_DEB, "rexray_0.11.4-1_amd64.deb"],
                "dpkg",
                "-i",
            )
        } else {
            installed.ok(&["yum", "-y", "install", "libaio", "zip", "unzip"]);
            (
                [SDS_RPM, SDC_RPM, "rexray-0.11.4-1.x86_64.rpm"],
                "rpm",
                "-Uvh",
            )
        };
        for f in files {
            let file = installed.package(f);
            installed.ok_env(&[tool, flag, &file], &env);
        }
        let found = Host::new(&format!("preinstalled-{}", profile.name()), profile);
        host::preinstall(&found.fake(), &what).unwrap();

        let names: [&str; 6] = if deb {
            [
                "emc-scaleio-sds",
                "emc-scaleio-sdc",
                "rexray",
                "libaio1",
                "zip",
                "linux-image-4.4.0-38-generic",
            ]
        } else {
            [
                "EMC-ScaleIO-sds",
                "EMC-ScaleIO-sdc",
                "rexray",
                "libaio",
                "zip",
                "unzip",
            ]
        };
        let mut queries: Vec<Vec<&str>> = names
            .iter()
            .map(|n| {
                if deb {
                    vec!["dpkg-query", "-W", "--showformat=${Status}\\t${Version}", n]
                } else {
                    vec!["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", n]
                }
            })
            .collect();
        queries.push(vec!["uname", "-r"]);
        for s in ["sds", "scini", "rexray"] {
            queries.push(if deb {
                vec!["service", s, "status"]
            } else {
                vec!["systemctl", "is-active", s]
            });
        }
        // Process ids differ from host to host, as they would.
        let pid_free = |s: &str| -> String {
            s.split("process ")
                .enumerate()
                .map(|(i, part)| match i {
                    0 => part.to_string(),
                    _ => format!(
                        "process <pid>{}",
                        part.trim_start_matches(|c: char| c.is_ascii_digit())
                    ),
                })
                .collect()
        };
        for q in &queries {
            let (a, b) = (installed.run(q), found.run(q));
            assert_eq!(
                (a.status, pid_free(&a.out)),
                (b.status, pid_free(&b.out)),
                "{q:?}: {a:?} {b:?}"
            );
        }
        for file in ["proc/modules", "bin/emc/scaleio/drv_cfg.txt"] {
            assert_eq!(
                read(&installed.root, file),
                read(&found.root, file),
                "{file}"
            );
        }
        let sdc = if deb {
            "emc-scaleio-sdc"
        } else {
            "EMC-ScaleIO-sdc"
        };
        assert_eq!(
            installed.state().installed(sdc),
            found.state().installed(sdc),
            "{profile:?}"
        );
    }
}
