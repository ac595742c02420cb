//! Host stand-ins: a fake root per agent and stand-in OS and storage commands, so that a real
//! `storage-executor` can walk its install phases on a laptop without touching the machine.
//!
//! # Contract with the executor
//!
//! The executor reaches the host through exactly two doors, and the devcluster replaces both
//! when [`HostStandins`] is set in the master's config:
//!
//! - **Host facts are read under a root directory** named by the environment variable
//!   `STORAGE_HOST_ROOT` (default `/`): `<root>/etc/os-release`, `<root>/proc/sys/kernel/osrelease`,
//!   `<root>/proc/mounts`, `<root>/sys/block/...`, `<root>/dev/...`, and files the executor
//!   writes (`<root>/etc/rexray/config.yml`, `<root>/opt/emc/scaleio/...`, ...) go there too.
//! - **Commands run through `PATH`** (never by absolute path): `dpkg`, `dpkg-query`, `apt-get`,
//!   `rpm`, `yum`, `scli`, `systemctl`, `service`, `initctl`, `uname`, `reboot`, `shutdown`.
//!
//! The agent launches every executor with `STORAGE_HOST_ROOT=<agent dir>/host/root`, with
//! `<agent dir>/host/bin` in front of `PATH` (a directory of symlinks to the multi-call binary
//! `storage-host-standin`), and with `STORAGE_DEVCLUSTER_CONTROL=<control API URL>` through which
//! the stand-ins reach the devcluster (gateway system creation, agent reboot). Children of the
//! executor inherit all three, so an executor that passes its environment on (the default of
//! `std::process::Command`) needs nothing else.
//!
//! Every command name is present in the stand-in directory whatever the profile, so that a
//! command the simulated OS lacks can never fall through to the real machine's tool (a real
//! `reboot`!). Such a command answers like a shell that cannot find it: `<name>: command not
//! found` on stderr and exit status 127. `systemctl` is missing on Ubuntu 14.04 (Upstart),
//! `apt-get`/`dpkg` on RHEL, `yum`/`rpm` on Ubuntu, and `scli` until the MDM package is installed.
//!
//! # What the fake root holds
//!
//! - `etc/os-release` with the real contents of the profile's release, `etc/lsb-release`
//!   (Ubuntu) or `etc/redhat-release` (RHEL/CentOS), `etc/hostname` (`agent-<n>`).
//! - `proc/sys/kernel/osrelease` (what `uname -r` prints) and `proc/sys/kernel/version`. Ubuntu
//!   14.04 starts on `3.13.0-170-generic`, not the `4.4.0-38-generic` the storage client needs:
//!   the executor has to install `linux-image-4.4.0-38-generic` and reboot. RHEL 7 runs
//!   `3.10.0-1160.el7.x86_64` and never needs that.
//! - `proc/mounts`, `proc/swaps`, `proc/partitions` and `sys/block/<dev>/{size,removable,ro,dev,
//!   holders/,queue/rotational,<partition>/...}`, plus a 64 KiB head for every block device under
//!   `dev/` holding the on-disk signatures blkid would look at. The default disk set
//!   ([`default_disks`]):
//!
//!   | device | state | how the executor can tell |
//!   |---|---|---|
//!   | `xvda` | system disk: MBR, `xvda1` root filesystem, `xvda2` swap | partitions in sysfs; `xvda1` mounted (Ubuntu 14.04 lists it as `/dev/disk/by-uuid/<uuid>`, a symlink under `dev/`); `xvda2` in `proc/swaps`; MBR signature `55 aa` at byte 510 |
//!   | `xvdb`, `xvdc` | free | nothing: no partitions, holders, mounts or signatures |
//!   | `xvdd` | whole-disk filesystem, not mounted | only its content: the ext4 superblock magic `53 ef` at byte 1080 of `dev/xvdd` (no partition, holder or mount) |
//!   | `xvde` | LVM physical volume | `holders/dm-0`; `LABELONE`/`LVM2 001` at bytes 512/536; `dm-0` (`vg0-data`) is mounted as `/dev/mapper/vg0-data` |
//!   | `loop0`, `ram0`, `sr0` | virtual / removable | names; `sr0` has `removable` = 1 |
//!   | `scinia` | a mapped storage volume | name (`scini*`) |
//!
//!   Filesystem signatures are represented the way they exist on a real disk, in the device's
//!   first bytes, because sysfs does not show them: a blkid-free check reads the head of
//!   `<root>/dev/<name>` (ext2/3/4 magic at 1080, XFS `XFSB` at 0, swap `SWAPSPACE2` at 4086, LVM
//!   `LABELONE` at 512, GPT `EFI PART` at 512, MBR `55 aa` at 510).
//! - `proc/modules` and `sys/module/scini`: the SDC's `scini` module is loaded exactly while
//!   its `scini` service runs (written with every change of the state).
//! - `var/lib/storage-host-standin/state.json` ([`HostState`]): installed packages, services,
//!   running and pending kernel, MDM cluster, and the history of every stand-in invocation
//!   (argv and exit status, so tests can check order and that no secret went on a command line).
//!   The file is `0600` and is the one source of truth for the stand-ins; it is locked while a
//!   stand-in or the devcluster changes it.
//!
//! # Effects beyond the host
//!
//! Installing storage packages changes only the host, as in the real system: an SDS joins the
//! cluster when it is added through the gateway, not by installation. Installing one over an
//! installed version (`dpkg -i`, `rpm -Uvh`) stops its service and starts it again as the
//! package scripts do (`systemctl stop sds` / `service sds stop` and the start, in the
//! history): the dev gateway sees the new SDS process as an outage, as an MDM would. `scli --rename_system`
//! (the last step of cluster creation, host-steps section 4) creates the gateway's system under
//! that name when the gateway has none (experimental mode): the simulated gateway reports a
//! named 3-node cluster and cannot rename a system, so the system appears when its final name is
//! known. `reboot` and `shutdown -r now` ask the control API to reboot the agent: the pending
//! kernel becomes the running one (unless `etc/default/grub` says `GRUB_DEFAULT=saved` and
//! `boot/grub/grubenv`'s `saved_entry` names another installed kernel, which GRUB boots
//! instead; Ubuntu roots start with `GRUB_DEFAULT=0`), enabled services come back, and the agent restarts (its
//! executors die with it). `shutdown -h now` stops the agent. `mesos-slave` is a service of the
//! fake host: restarting it (after the isolator configuration) is recorded in its `restarts`
//! count but does not restart the devcluster agent (the control API's `restart` does that:
//! checkpointed executors survive it, as on a real agent). Every boot writes a new
//! `proc/sys/kernel/random/boot_id`.
//!
//! # Fidelity
//!
//! Taken from the real systems: the release files; `uname` formats; the dpkg, dpkg-query,
//! apt-get, rpm and yum messages and exit statuses for missing, foreign, already installed and
//! unknown packages (dpkg-query exits 1 for a missing package, `rpm -q` prints `package X is
//! not installed` on stdout); the storage package names, versions and service names; the
//! installation phrases (`sds start/running, process N`, `Success configuring module`,
//! `Starting scini`, `Created symlink from`, `The EMC ScaleIO Gateway is running`); the scli
//! phrases (`Successfully created the MDM Cluster`, `Logged in`, `Password changed
//! successfully`, `Successfully added a standby MDM`, `Successfully switched the cluster mode`,
//! `Mode: 3_node`, `Successfully renamed system to`, `Installation ID`, `Error: MDM failed
//! command.  Status: The MDM cluster state is incorrect`); an MDM installed without
//! `MDM_ROLE_IS_MANAGER=1` is a tie-breaker.
//!
//! Close in form but not verified wording: the other scli failures (exit status 1), the SDC
//! failing on an Ubuntu kernel other than `4.4.0-38-generic`, the gateway package refusing to
//! install without `GATEWAY_ADMIN_PASSWORD`, MDM and SDS depending on libaio, the password
//! complexity rule, and scli reading passwords from stdin when `--password` /
//! `--old_password` / `--new_password` are absent (the real scli prompts; whether it reads a
//! pipe or only the terminal is not verified, so an executor relying on it should be checked
//! on a real host).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use storage_framework::contract::Platform;

mod preinstall;
pub use preinstall::{preinstall, Preinstalled};
mod hotplug;
pub use hotplug::disk_name;

/// The executor reads host facts under this root (default `/`).
pub const ROOT_ENV: &str = "STORAGE_HOST_ROOT";
/// The devcluster control API (`http://127.0.0.1:<port>`), for the stand-ins.
pub const CONTROL_ENV: &str = "STORAGE_DEVCLUSTER_CONTROL";
/// File name of the multi-call binary.
pub const STANDIN_BIN: &str = "storage-host-standin";
/// Every command name the stand-in directory holds.
pub const COMMANDS: &[&str] = &[
    "apt-get",
    "dpkg",
    "dpkg-query",
    "initctl",
    "reboot",
    "rpm",
    "scli",
    "service",
    "shutdown",
    "systemctl",
    "uname",
    "yum",
];
/// The kernel the storage client (SDC) of 2.0.1 needs on Ubuntu 14.04.
pub const UBUNTU_SDC_KERNEL: &str = "4.4.0-38-generic";

const STATE_DIR: &str = "var/lib/storage-host-standin";
const STATE_FILE: &str = "state.json";
const ROOT_UUID: &str = "c2b1a8e4-6d1f-4b3a-9b52-3f0a5e1d7c11";
const DEVICE_HEAD: u64 = 64 * 1024;

/// The operating system a fake root pretends to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HostProfile {
    /// Ubuntu 14.04.5 LTS (Trusty), Upstart, deb packages.
    Ubuntu1404,
    /// Red Hat Enterprise Linux Server 7.9, systemd, rpm packages.
    Rhel7,
    /// CentOS Linux 7 (2009), otherwise like RHEL 7.
    Centos7,
    /// Ubuntu 16.04.7 LTS: not supported by the storage packages; for refusal tests.
    Ubuntu1604,
}

/// How software is packaged on a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packaging {
    Deb,
    Rpm,
}

/// The init system of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    Upstart,
    Systemd,
}

impl HostProfile {
    pub const ALL: [HostProfile; 4] = [
        HostProfile::Ubuntu1404,
        HostProfile::Rhel7,
        HostProfile::Centos7,
        HostProfile::Ubuntu1604,
    ];

    /// `ubuntu14`, `rhel7`, `centos7` or `ubuntu16` (the `--host-profile` spelling).
    pub fn parse(s: &str) -> Result<HostProfile, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ubuntu14" | "ubuntu1404" | "ubuntu-14.04" | "trusty" => Ok(HostProfile::Ubuntu1404),
            "rhel7" | "rhel-7" => Ok(HostProfile::Rhel7),
            "centos7" | "centos-7" => Ok(HostProfile::Centos7),
            "ubuntu16" | "ubuntu1604" | "ubuntu-16.04" | "xenial" => Ok(HostProfile::Ubuntu1604),
            _ => Err(format!(
                "unknown host profile {s:?} (expected ubuntu14, rhel7, centos7 or ubuntu16)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HostProfile::Ubuntu1404 => "ubuntu14",
            HostProfile::Rhel7 => "rhel7",
            HostProfile::Centos7 => "centos7",
            HostProfile::Ubuntu1604 => "ubuntu16",
        }
    }

    pub fn packaging(self) -> Packaging {
        match self {
            HostProfile::Ubuntu1404 | HostProfile::Ubuntu1604 => Packaging::Deb,
            HostProfile::Rhel7 | HostProfile::Centos7 => Packaging::Rpm,
        }
    }

    pub fn init(self) -> Init {
        match self {
            HostProfile::Ubuntu1404 => Init::Upstart,
            _ => Init::Systemd,
        }
    }

    /// The product platform this stand-in plays, `None` for an unsupported system (the
    /// contract's [`Platform::detect`] reads the same from its `os_release`). Every
    /// platform of the contract has a stand-in (`every_platform_has_a_stand_in`).
    pub fn platform(self) -> Option<Platform> {
        match self {
            HostProfile::Ubuntu1404 => Some(Platform::Ubuntu1404),
            HostProfile::Rhel7 | HostProfile::Centos7 => Some(Platform::Rhel7),
            HostProfile::Ubuntu1604 => None,
        }
    }

    /// The kernel running when the host is created.
    pub fn initial_kernel(self) -> &'static str {
        match self {
            HostProfile::Ubuntu1404 => "3.13.0-170-generic",
            HostProfile::Rhel7 | HostProfile::Centos7 => "3.10.0-1160.el7.x86_64",
            HostProfile::Ubuntu1604 => "4.4.0-210-generic",
        }
    }

    /// `/etc/os-release` as the release ships it.
    pub fn os_release(self) -> &'static str {
        match self {
            HostProfile::Ubuntu1404 => {
                "NAME=\"Ubuntu\"\n\
                 VERSION=\"14.04.5 LTS, Trusty Tahr\"\n\
                 ID=ubuntu\n\
                 ID_LIKE=debian\n\
                 PRETTY_NAME=\"Ubuntu 14.04.5 LTS\"\n\
                 VERSION_ID=\"14.04\"\n\
                 HOME_URL=\"http://www.ubuntu.com/\"\n\
                 SUPPORT_URL=\"http://help.ubuntu.com/\"\n\
                 BUG_REPORT_URL=\"http://bugs.launchpad.net/ubuntu/\"\n"
            }
            HostProfile::Rhel7 => {
                "NAME=\"Red Hat Enterprise Linux Server\"\n\
                 VERSION=\"7.9 (Maipo)\"\n\
                 ID=\"rhel\"\n\
                 ID_LIKE=\"fedora\"\n\
                 VARIANT=\"Server\"\n\
                 VARIANT_ID=\"server\"\n\
                 VERSION_ID=\"7.9\"\n\
                 PRETTY_NAME=\"Red Hat Enterprise Linux Server 7.9 (Maipo)\"\n\
                 ANSI_COLOR=\"0;31\"\n\
                 CPE_NAME=\"cpe:/o:redhat:enterprise_linux:7.9:GA:server\"\n\
                 HOME_URL=\"https://www.redhat.com/\"\n\
                 BUG_REPORT_URL=\"https://bugzilla.redhat.com/\"\n\
                 \n\
                 REDHAT_BUGZILLA_PRODUCT=\"Red Hat Enterprise Linux 7\"\n\
                 REDHAT_BUGZILLA_PRODUCT_VERSION=7.9\n\
                 REDHAT_SUPPORT_PRODUCT=\"Red Hat Enterprise Linux\"\n\
                 REDHAT_SUPPORT_PRODUCT_VERSION=\"7.9\"\n"
            }
            HostProfile::Centos7 => {
                "NAME=\"CentOS Linux\"\n\
                 VERSION=\"7 (Core)\"\n\
                 ID=\"centos\"\n\
                 ID_LIKE=\"rhel fedora\"\n\
                 VERSION_ID=\"7\"\n\
                 PRETTY_NAME=\"CentOS Linux 7 (Core)\"\n\
                 ANSI_COLOR=\"0;31\"\n\
                 CPE_NAME=\"cpe:/o:centos:centos:7\"\n\
                 HOME_URL=\"https://www.centos.org/\"\n\
                 BUG_REPORT_URL=\"https://bugs.centos.org/\"\n\
                 \n\
                 CENTOS_MANTISBT_PROJECT=\"CentOS-7\"\n\
                 CENTOS_MANTISBT_PROJECT_VERSION=\"7\"\n\
                 REDHAT_SUPPORT_PRODUCT=\"centos\"\n\
                 REDHAT_SUPPORT_PRODUCT_VERSION=\"7\"\n\
                 \n"
            }
            HostProfile::Ubuntu1604 => {
                "NAME=\"Ubuntu\"\n\
                 VERSION=\"16.04.7 LTS (Xenial Xerus)\"\n\
                 ID=ubuntu\n\
                 ID_LIKE=debian\n\
                 PRETTY_NAME=\"Ubuntu 16.04.7 LTS\"\n\
                 VERSION_ID=\"16.04\"\n\
                 HOME_URL=\"http://www.ubuntu.com/\"\n\
                 SUPPORT_URL=\"http://help.ubuntu.com/\"\n\
                 BUG_REPORT_URL=\"http://bugs.launchpad.net/ubuntu/\"\n\
                 VERSION_CODENAME=xenial\n\
                 UBUNTU_CODENAME=xenial\n"
            }
        }
    }

    /// The other release files of the distribution, relative to the root.
    pub fn release_files(self) -> Vec<(&'static str, &'static str)> {
        match self {
            HostProfile::Ubuntu1404 => vec![(
                "etc/lsb-release",
                "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=14.04\nDISTRIB_CODENAME=trusty\n\
                 DISTRIB_DESCRIPTION=\"Ubuntu 14.04.5 LTS\"\n",
            )],
            HostProfile::Ubuntu1604 => vec![(
                "etc/lsb-release",
                "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=16.04\nDISTRIB_CODENAME=xenial\n\
                 DISTRIB_DESCRIPTION=\"Ubuntu 16.04.7 LTS\"\n",
            )],
            HostProfile::Rhel7 => {
                let line = "Red Hat Enterprise Linux Server release 7.9 (Maipo)\n";
                vec![("etc/redhat-release", line), ("etc/system-release", line)]
            }
            HostProfile::Centos7 => {
                let line = "CentOS Linux release 7.9.2009 (Core)\n";
                vec![
                    ("etc/redhat-release", line),
                    ("etc/centos-release", line),
                    ("etc/system-release", line),
                ]
            }
        }
    }

    /// Packages installed on a fresh host: name, version, release (rpm), architecture.
    fn base_packages(self) -> Vec<(&'static str, &'static str, Option<&'static str>)> {
        match self {
            HostProfile::Ubuntu1404 => vec![
                ("apt", "1.0.1ubuntu2.24", None),
                ("base-files", "7.2ubuntu5.6", None),
                ("bash", "4.3-7ubuntu1.7", None),
                ("coreutils", "8.21-1ubuntu5.4", None),
                ("dpkg", "1.17.5ubuntu5.8", None),
                ("linux-image-3.13.0-170-generic", "3.13.0-170.220", None),
                ("openssh-server", "1:6.6p1-2ubuntu2.13", None),
                ("upstart", "1.12.1-0ubuntu4.2", None),
            ],
            HostProfile::Ubuntu1604 => vec![
                ("apt", "1.2.35", None),
                ("base-files", "9.4ubuntu4.14", None),
                ("bash", "4.3-14ubuntu1.4", None),
                ("dpkg", "1.18.4ubuntu1.7", None),
                ("linux-image-4.4.0-210-generic", "4.4.0-210.242", None),
                ("systemd", "229-4ubuntu21.31", None),
            ],
            HostProfile::Rhel7 | HostProfile::Centos7 => {
                let rhel = self == HostProfile::Rhel7;
                vec![
                    ("bash", "4.2.46", Some("34.el7")),
                    ("coreutils", "8.22", Some("24.el7_9.2")),
                    ("kernel", "3.10.0", Some("1160.el7")),
                    ("openssh-server", "7.4p1", Some("21.el7")),
                    ("rpm", "4.11.3", Some("45.el7")),
                    ("systemd", "219", Some("78.el7_9.3")),
                    if rhel {
                        ("redhat-release-server", "7.9", Some("6.el7_9"))
                    } else {
                        ("centos-release", "7", Some("9.2009.1.el7.centos"))
                    },
                    (
                        "yum",
                        "3.4.3",
                        Some(if rhel { "168.el7" } else { "168.el7.centos" }),
                    ),
                ]
            }
        }
    }
}

/// What the distribution's repositories offer to `apt-get install` / `yum install`: version,
/// release (rpm) and what installing it means. `None` for unknown names (`E: Unable to locate
/// package`, `No package ... available.`).
pub fn repository_package(profile: HostProfile, name: &str) -> Option<RepoPackage> {
    let (version, release): (&str, Option<&str>) = match (profile.packaging(), name) {
        (Packaging::Deb, "libaio1") => ("0.3.109-4", None),
        (Packaging::Deb, "zip") => ("3.0-8", None),
        (Packaging::Deb, "unzip") => ("6.0-9ubuntu1.5", None),
        (Packaging::Deb, "numactl") => ("2.0.9~rc5-1ubuntu3.14.04.2", None),
        (Packaging::Deb, "linux-image-4.4.0-38-generic") if profile == HostProfile::Ubuntu1404 => {
            ("4.4.0-38.57~14.04.1", None)
        }
        (Packaging::Rpm, "libaio") => ("0.3.109", Some("13.el7")),
        (Packaging::Rpm, "zip") => ("3.0", Some("11.el7")),
        (Packaging::Rpm, "unzip") => ("6.0", Some("21.el7")),
        (Packaging::Rpm, "numactl") => ("2.0.12", Some("5.el7")),
        (Packaging::Rpm, "java-1.8.0-openjdk") => ("1.8.0.282.b08", Some("1.el7_9")),
        _ => return None,
    };
    Some(RepoPackage {
        name: name.to_string(),
        version: version.to_string(),
        release: release.map(str::to_string),
        kernel: name.strip_prefix("linux-image-").map(str::to_string),
    })
}

/// A package a repository offers.
#[derive(Debug, Clone, PartialEq)]
pub struct RepoPackage {
    pub name: String,
    pub version: String,
    pub release: Option<String>,
    /// Set for kernel images: the kernel release it boots (`uname -r`).
    pub kernel: Option<String>,
}

/// `uname -v` of the kernels the profiles know.
pub fn kernel_build(release: &str) -> &'static str {
    match release {
        "3.13.0-170-generic" => "#220-Ubuntu SMP Thu May 9 12:40:49 UTC 2019",
        "4.4.0-38-generic" => "#57~14.04.1-Ubuntu SMP Tue Sep 6 17:20:43 UTC 2016",
        "4.4.0-210-generic" => "#242-Ubuntu SMP Fri Apr 16 09:57:56 UTC 2021",
        "3.10.0-1160.el7.x86_64" => "#1 SMP Mon Oct 19 16:18:59 UTC 2020",
        _ => "#1 SMP Thu Jan 1 00:00:00 UTC 2015",
    }
}

// ---------------------------------------------------------------------------------------------
// Disks

/// What is on a simulated block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskUse {
    /// Nothing: no partition table, signature, holder or mount. The only kind to offer.
    Free,
    /// MBR with `<name>1` (root filesystem, mounted at `/`) and `<name>2` (swap).
    System,
    /// An ext4 filesystem on the whole disk, not mounted.
    Filesystem,
    /// An LVM physical volume held by a device-mapper volume mounted at `/var/lib/docker`.
    LvmMember,
    /// A loop device (`loop<n>`).
    Loop,
    /// A RAM disk (`ram<n>`).
    Ram,
    /// An optical drive (`sr<n>`): removable, read-only.
    Rom,
    /// A volume of the storage system mapped by the SDC (`scini<x>`).
    MappedVolume,
}

/// One simulated block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// Kernel name (`xvdb`): `/sys/block/<name>`, `/dev/<name>`.
    pub name: String,
    /// Size in 512-byte sectors, as `/sys/block/<name>/size` reports it.
    pub sectors: u64,
    pub usage: DiskUse,
}

impl Disk {
    pub fn new(name: &str, gib: u64, usage: DiskUse) -> Disk {
        Disk {
            name: name.to_string(),
            sectors: gib * 1024 * 1024 * 2,
            usage,
        }
    }
}

/// The default set: one system disk, two free disks, a disk with a filesystem, an LVM member,
/// and the devices an executor must never offer (loop, ram, rom, a mapped volume).
pub fn default_disks() -> Vec<Disk> {
    vec![
        Disk::new("xvda", 8, DiskUse::System),
        Disk::new("xvdb", 100, DiskUse::Free),
        Disk::new("xvdc", 100, DiskUse::Free),
        Disk::new("xvdd", 50, DiskUse::Filesystem),
        Disk::new("xvde", 20, DiskUse::LvmMember),
        Disk::new("loop0", 0, DiskUse::Loop),
        Disk {
            name: "ram0".into(),
            sectors: 131072,
            usage: DiskUse::Ram,
        },
        Disk::new("sr0", 0, DiskUse::Rom),
        Disk::new("scinia", 16, DiskUse::MappedVolume),
    ]
}

/// Major and minor numbers the kernel would give the device.
fn device_numbers(disk: &Disk, index: u32) -> (u32, u32) {
    let letter = |prefix: &str| {
        disk.name
            .strip_prefix(prefix)
            .and_then(|rest| rest.bytes().next())
            .filter(u8::is_ascii_lowercase)
            .map(|b| u32::from(b - b'a') * 16)
    };
    let number = |prefix: &str| {
        disk.name
            .strip_prefix(prefix)
            .and_then(|rest| rest.parse::<u32>().ok())
    };
    match disk.usage {
        DiskUse::Loop => (7, number("loop").unwrap_or(index)),
        DiskUse::Ram => (1, number("ram").unwrap_or(index)),
        DiskUse::Rom => (11, number("sr").unwrap_or(index)),
        DiskUse::MappedVolume => (251, letter("scini").unwrap_or(index * 16)),
        _ => {
            if let Some(m) = letter("xvd") {
                (202, m)
            } else if let Some(m) = letter("sd") {
                (8, m)
            } else if let Some(m) = letter("vd") {
                (252, m)
            } else {
                (259, index)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// State

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// Debian: the full version (`2.0-10000.2072`). RPM: the version (`2.0`).
    pub version: String,
    /// RPM release (`10000.2072.el7`); `None` for Debian packages.
    pub release: Option<String>,
    /// `amd64` (deb) or `x86_64` (rpm).
    pub arch: String,
    /// dpkg status: `install ok installed`, or `install ok half-configured` when its
    /// maintainer script failed, `install ok unpacked` when dependencies were missing.
    pub status: String,
}

impl Package {
    pub fn installed(&self) -> bool {
        self.status == "install ok installed"
    }

    /// `version-release` for RPM, the version for Debian.
    pub fn full_version(&self) -> String {
        match &self.release {
            Some(r) => format!("{}-{r}", self.version),
            None => self.version.clone(),
        }
    }
}

/// How a service is managed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServiceKind {
    /// An Upstart job (`initctl`, `service` prints `<job> start/running, process <pid>`).
    Upstart,
    /// A System V init script under `/etc/init.d`.
    SysV,
    /// A systemd unit.
    Systemd,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    pub kind: ServiceKind,
    pub running: bool,
    /// Started at boot.
    pub enabled: bool,
    pub pid: Option<u32>,
    /// How often it was (re)started after the first start, for tests.
    pub restarts: u32,
}

/// Role an MDM was installed with (`MDM_ROLE_IS_MANAGER=1` or, the default, tie-breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdmRole {
    Manager,
    TieBreaker,
}

/// A member of the MDM cluster as `scli` knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mdm {
    pub name: String,
    pub id: String,
    pub ips: Vec<String>,
    pub management_ips: Vec<String>,
    pub role: MdmRole,
}

/// The MDM cluster created on this host with `scli --create_mdm_cluster`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdmCluster {
    pub id: String,
    pub installation_id: String,
    /// Set by `--rename_system`.
    pub name: Option<String>,
    /// `1_node`, `3_node` or `5_node`.
    pub mode: String,
    pub master: Mdm,
    /// Added with `--add_standby_mdm`, not (yet) cluster members.
    pub standby: Vec<Mdm>,
    /// Names of the cluster's slave MDMs and tie-breakers.
    pub slaves: Vec<String>,
    pub tiebreakers: Vec<String>,
    /// FNV-1a of the admin password, salted with the cluster id: the state file never holds a
    /// password in clear.
    pub admin_password_hash: String,
    /// The factory password `admin` was replaced.
    pub password_changed: bool,
    /// The gateway system created for it (experimental mode), if any.
    pub gateway_system_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScliState {
    pub cluster: Option<MdmCluster>,
    /// The user logged in through `scli --login`, until `--logout` or a reboot.
    pub session: Option<String>,
    /// Hosts whose `scli --mdm_ip <this MDM> --login` succeeded (their own sessions with
    /// this MDM), by host name.
    #[serde(default)]
    pub remote_sessions: Vec<String>,
}

/// One stand-in run: its argv (argv[0] being the command name) and its exit status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    pub argv: Vec<String>,
    pub status: i32,
}

/// Everything the stand-ins know about a host: `<root>/var/lib/storage-host-standin/state.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostState {
    pub profile: HostProfile,
    pub hostname: String,
    /// 1-based devcluster agent number (for `reboot` through the control API).
    pub agent: Option<usize>,
    pub running_kernel: String,
    /// Installed kernel the next boot runs.
    pub pending_kernel: Option<String>,
    /// Reboots so far.
    pub boots: u32,
    pub packages: BTreeMap<String, Package>,
    pub services: BTreeMap<String, Service>,
    /// Set by the MDM package from `MDM_ROLE_IS_MANAGER`.
    pub mdm_role: Option<MdmRole>,
    /// `MDM_IP` the SDC package was installed with.
    pub sdc_mdm_ips: Option<String>,
    /// `TOKEN` was in the LIA package's environment (its value is not kept).
    pub lia_token_set: bool,
    /// `GATEWAY_ADMIN_PASSWORD` was in the gateway package's environment (value not kept).
    pub gateway_admin_password_set: bool,
    pub scli: ScliState,
    pub history: Vec<Invocation>,
    pub next_pid: u32,
}

impl HostState {
    fn new(profile: HostProfile, hostname: &str, agent: Option<usize>) -> HostState {
        let rpm = profile.packaging() == Packaging::Rpm;
        let packages = profile
            .base_packages()
            .into_iter()
            .map(|(name, version, release)| {
                (
                    name.to_string(),
                    Package {
                        version: version.to_string(),
                        release: release.map(str::to_string),
                        arch: if rpm { "x86_64" } else { "amd64" }.to_string(),
                        status: "install ok installed".to_string(),
                    },
                )
            })
            .collect();
        let mut s = HostState {
            profile,
            hostname: hostname.to_string(),
            agent,
            running_kernel: profile.initial_kernel().to_string(),
            pending_kernel: None,
            boots: 0,
            packages,
            services: BTreeMap::new(),
            mdm_role: None,
            sdc_mdm_ips: None,
            lia_token_set: false,
            gateway_admin_password_set: false,
            scli: ScliState::default(),
            history: Vec::new(),
            next_pid: 812,
        };
        let (ssh, cron, kind) = match profile.init() {
            Init::Upstart => ("ssh", "cron", ServiceKind::Upstart),
            Init::Systemd => ("sshd", "crond", ServiceKind::Systemd),
        };
        for name in [ssh, cron, "mesos-slave"] {
            s.add_service(name, kind);
        }
        s
    }

    /// A fresh process id, as the next started daemon would get.
    pub fn take_pid(&mut self) -> u32 {
        self.next_pid += 37;
        self.next_pid
    }

    /// Registers an enabled, running service.
    pub fn add_service(&mut self, name: &str, kind: ServiceKind) {
        let pid = self.take_pid();
        self.services.insert(
            name.to_string(),
            Service {
                kind,
                running: true,
                enabled: true,
                pid: Some(pid),
                restarts: 0,
            },
        );
    }

    /// The installed and configured package `name`, if any.
    pub fn installed(&self, name: &str) -> Option<&Package> {
        self.packages.get(name).filter(|p| p.installed())
    }

    pub fn service_running(&self, name: &str) -> bool {
        self.services.get(name).is_some_and(|s| s.running)
    }

    /// Stops or starts installed service `name` as a person at the host would (the SDC's
    /// `scini`: its kernel module unloaded or loaded); false when it is not installed.
    pub fn set_running(&mut self, name: &str, running: bool) -> bool {
        let pid = self.take_pid();
        let Some(s) = self.services.get_mut(name) else {
            return false;
        };
        if s.running != running {
            s.running = running;
            s.pid = running.then_some(pid);
        }
        true
    }

    /// `/proc/modules` of this host: a few modules every such host has, and the SDC's
    /// `scini` while its service has it loaded.
    pub fn proc_modules(&self) -> String {
        let mut text = String::new();
        if self.service_running(SDC_MODULE) {
            text.push_str("scini 794624 0 - Live 0xffffffffc0690000 (OE)\n");
        }
        text.push_str(
            "xfs 1212416 1 - Live 0xffffffffc0520000\n\
             libcrc32c 16384 1 xfs, Live 0xffffffffc0319000\n\
             dm_mod 126976 2 - Live 0xffffffffc02f2000\n",
        );
        text
    }
}

/// The SDC's kernel module; its service of the same name loads and unloads it.
pub const SDC_MODULE: &str = "scini";
/// The services the control API stops and starts (`scini`: the SDC's module).
pub const CONTROLLED_SERVICES: [&str; 5] = ["sds", "lia", "mdm", "rexray", SDC_MODULE];

/// Salted FNV-1a, so that the state file can check a password without holding it.
pub fn password_hash(salt: &str, password: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in salt.bytes().chain([0u8]).chain(password.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

// ---------------------------------------------------------------------------------------------
// The fake root

/// A directory laid out like the root of a host of some [`HostProfile`].
#[derive(Debug, Clone)]
pub struct FakeRoot {
    root: PathBuf,
}

extern "C" {
    fn flock(fd: i32, operation: i32) -> i32;
}
const LOCK_EX: i32 = 2;

/// Holds the state lock until dropped (closing the descriptor releases it).
struct StateLock(#[allow(dead_code)] File);

impl FakeRoot {
    /// Lays out a fresh fake root in `dir` (which must not hold one yet) for `profile` with
    /// `disks`, hostname `hostname` and, for devcluster agents, the 1-based agent number.
    pub fn create(
        dir: &Path,
        profile: HostProfile,
        disks: &[Disk],
        hostname: &str,
        agent: Option<usize>,
    ) -> Result<FakeRoot, String> {
        let root = FakeRoot {
            root: dir.to_path_buf(),
        };
        if root.state_path().exists() {
            return Err(format!("{} already holds a fake root", dir.display()));
        }
        let state = HostState::new(profile, hostname, agent);
        root.write("etc/os-release", profile.os_release())?;
        for (path, text) in profile.release_files() {
            root.write(path, text)?;
        }
        root.write("etc/hostname", &format!("{hostname}\n"))?;
        root.write(
            "etc/hosts",
            &format!("127.0.0.1 localhost\n127.0.1.1 {hostname}\n"),
        )?;
        root.write("proc/sys/kernel/hostname", &format!("{hostname}\n"))?;
        root.write_kernel(&state.running_kernel)?;
        root.write_boot_id(hostname, 0)?;
        root.install_kernel_files(&state.running_kernel)?;
        if profile.packaging() == Packaging::Deb {
            // Ubuntu's default: the first menu entry, which is the newest kernel.
            root.write("etc/default/grub", "GRUB_DEFAULT=0\nGRUB_TIMEOUT=10\n")?;
        }
        root.lay_out_disks(profile, disks)?;
        root.mkdir("etc/mesos-slave")?;
        root.mkdir("usr/lib")?;
        root.mkdir("tmp")?;
        root.mkdir(STATE_DIR)?;
        root.save(&state)?;
        Ok(root)
    }

    /// A fake root [`create`](Self::create) made earlier.
    pub fn open(dir: &Path) -> Result<FakeRoot, String> {
        let root = FakeRoot {
            root: dir.to_path_buf(),
        };
        if !root.state_path().is_file() {
            return Err(format!(
                "{} is not a devcluster fake root (no {STATE_DIR}/{STATE_FILE})",
                dir.display()
            ));
        }
        Ok(root)
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `<root>/<relative>`; a leading `/` is ignored so that host paths can be passed as is.
    pub fn join(&self, relative: &str) -> PathBuf {
        self.root.join(relative.trim_start_matches('/'))
    }

    /// The state file (replaced whole by every change).
    pub fn state_path(&self) -> PathBuf {
        self.root.join(STATE_DIR).join(STATE_FILE)
    }

    /// The current state (a consistent snapshot: writers replace the file atomically).
    pub fn state(&self) -> Result<HostState, String> {
        let path = self.state_path();
        let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{} is damaged: {e}", path.display()))
    }

    /// Runs `f` on the state under an exclusive lock and saves what it leaves, whether `f`
    /// succeeded or not (a failed command still changes the history, and maybe the packages).
    pub fn update<T>(&self, f: impl FnOnce(&mut HostState) -> T) -> Result<T, String> {
        let _lock = self.lock()?;
        let mut state = self.state()?;
        let out = f(&mut state);
        self.save(&state)?;
        Ok(out)
    }

    fn lock(&self) -> Result<StateLock, String> {
        let path = self.root.join(STATE_DIR).join("state.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // SAFETY: flock(2) on a descriptor we own; it only blocks until the lock is ours.
        let rc = unsafe { flock(file.as_raw_fd(), LOCK_EX) };
        if rc != 0 {
            return Err(format!(
                "cannot lock {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(StateLock(file))
    }

    fn save(&self, state: &HostState) -> Result<(), String> {
        let path = self.state_path();
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| format!("state: {e}"))?;
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.write_modules(state)
    }

    /// `proc/modules` and `sys/module/scini` as the state has the modules loaded, after
    /// every change of the state, so that they never disagree with the services. The file is
    /// replaced whole: a reader never sees it half written.
    fn write_modules(&self, state: &HostState) -> Result<(), String> {
        let path = self.join("proc/modules");
        let text = state.proc_modules();
        if !fs::read_to_string(&path).is_ok_and(|t| t == text) {
            let tmp = self.join("proc/modules.tmp");
            self.write("proc/modules.tmp", &text)?;
            fs::rename(&tmp, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        let sysfs = format!("sys/module/{SDC_MODULE}");
        if state.service_running(SDC_MODULE) {
            self.mkdir(&sysfs)
        } else {
            match fs::remove_dir_all(self.join(&sysfs)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("cannot remove {sysfs}: {e}"))
                }
                _ => Ok(()),
            }
        }
    }

    /// Boots the host again: the pending kernel (if any) becomes the running one, logins end,
    /// enabled services run with new process ids and disabled ones are stopped. Returns the
    /// running kernel.
    pub fn boot(&self) -> Result<String, String> {
        let chosen = self.boot_loader_kernel();
        let (kernel, boots, hostname) = self.update(|s| {
            // The newest kernel stays GRUB's first entry while a saved default overrides it.
            match &chosen {
                Some(k) if s.pending_kernel.as_ref() != Some(k) => s.running_kernel = k.clone(),
                _ => {
                    if let Some(k) = s.pending_kernel.take() {
                        s.running_kernel = k;
                    }
                }
            }
            s.boots += 1;
            s.scli.session = None;
            s.scli.remote_sessions.clear();
            let names: Vec<String> = s.services.keys().cloned().collect();
            for name in names {
                let pid = s.take_pid();
                if let Some(svc) = s.services.get_mut(&name) {
                    svc.running = svc.enabled;
                    svc.pid = svc.enabled.then_some(pid);
                }
            }
            (s.running_kernel.clone(), s.boots, s.hostname.clone())
        })?;
        self.write_kernel(&kernel)?;
        self.write_boot_id(&hostname, boots)?;
        Ok(kernel)
    }

    /// Makes GRUB boot `release` from now on, as `grub-set-default` does: `GRUB_DEFAULT=saved`
    /// in `etc/default/grub` and the entry in `boot/grub/grubenv`.
    pub fn set_boot_loader_default(&self, release: &str) -> Result<(), String> {
        self.write("etc/default/grub", "GRUB_DEFAULT=saved\nGRUB_TIMEOUT=10\n")?;
        self.write(
            "boot/grub/grubenv",
            &format!(
                "# GRUB Environment Block\nsaved_entry=Advanced options for Ubuntu>Ubuntu, \
                 with Linux {release}\n"
            ),
        )
    }

    /// The kernel GRUB's saved default names, when `GRUB_DEFAULT=saved` and that kernel is
    /// installed; otherwise GRUB boots its first entry, the newest kernel (the pending one).
    fn boot_loader_kernel(&self) -> Option<String> {
        let read = |p: &str| fs::read_to_string(self.join(p)).unwrap_or_default();
        let value = |text: &str, key: &str| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
                .next_back()
                .map(|v| v.trim().trim_matches('"').to_string())
        };
        if value(&read("etc/default/grub"), "GRUB_DEFAULT")? != "saved" {
            return None;
        }
        let entry = value(&read("boot/grub/grubenv"), "saved_entry")?;
        let release = entry.rsplit_once("with Linux ")?.1.trim().to_string();
        self.join(&format!("boot/vmlinuz-{release}"))
            .is_file()
            .then_some(release)
    }

    /// `proc/sys/kernel/random/boot_id`: a new one every boot, as the kernel makes.
    fn write_boot_id(&self, hostname: &str, boots: u32) -> Result<(), String> {
        let h = password_hash(hostname, &boots.to_string());
        let id = format!(
            "{}-{}-4{}-a{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..15],
            &h[1..4],
            &h[4..16]
        );
        self.write("proc/sys/kernel/random/boot_id", &format!("{id}\n"))
    }

    /// The kernel release the host runs (`/proc/sys/kernel/osrelease`).
    pub fn running_kernel(&self) -> Result<String, String> {
        let path = self.join("proc/sys/kernel/osrelease");
        fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
    }

    fn write_kernel(&self, release: &str) -> Result<(), String> {
        self.write("proc/sys/kernel/osrelease", &format!("{release}\n"))?;
        self.write(
            "proc/sys/kernel/version",
            &format!("{}\n", kernel_build(release)),
        )
    }

    /// `/boot/vmlinuz-<release>` and `/lib/modules/<release>/`, as a kernel package leaves them.
    pub fn install_kernel_files(&self, release: &str) -> Result<(), String> {
        self.write(&format!("boot/vmlinuz-{release}"), "")?;
        self.write(&format!("boot/initrd.img-{release}"), "")?;
        self.mkdir(&format!("lib/modules/{release}/kernel"))
    }

    /// Writes a file under the root, creating its directories.
    pub fn write(&self, relative: &str, text: &str) -> Result<(), String> {
        self.write_bytes(relative, text.as_bytes())
    }

    pub fn write_bytes(&self, relative: &str, bytes: &[u8]) -> Result<(), String> {
        let path = self.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub fn mkdir(&self, relative: &str) -> Result<(), String> {
        let path = self.join(relative);
        fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))
    }

    fn symlink(&self, target: &str, relative: &str) -> Result<(), String> {
        let path = self.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::os::unix::fs::symlink(target, &path)
            .map_err(|e| format!("cannot link {}: {e}", path.display()))
    }

    /// A device head: `DEVICE_HEAD` bytes (sparse) with `marks` written at their offsets.
    fn device(&self, name: &str, marks: &[(u64, &[u8])]) -> Result<(), String> {
        let path = self.join(&format!("dev/{name}"));
        let io = || -> std::io::Result<()> {
            let mut f = File::create(&path)?;
            f.set_len(DEVICE_HEAD)?;
            for (offset, bytes) in marks {
                f.seek(SeekFrom::Start(*offset))?;
                f.write_all(bytes)?;
            }
            Ok(())
        };
        io().map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn sysfs_device(
        &self,
        dir: &str,
        (major, minor): (u32, u32),
        sectors: u64,
    ) -> Result<(), String> {
        self.write(&format!("{dir}/size"), &format!("{sectors}\n"))?;
        self.write(&format!("{dir}/dev"), &format!("{major}:{minor}\n"))?;
        self.mkdir(&format!("{dir}/holders"))
    }

    fn lay_out_disks(&self, profile: HostProfile, disks: &[Disk]) -> Result<(), String> {
        const EXT_MAGIC: (u64, &[u8]) = (1080, &[0x53, 0xef]);
        const XFS_MAGIC: (u64, &[u8]) = (0, b"XFSB");
        const MBR: (u64, &[u8]) = (510, &[0x55, 0xaa]);
        const SWAP: (u64, &[u8]) = (4086, b"SWAPSPACE2");
        let ubuntu = profile.packaging() == Packaging::Deb;
        let root_fs = if ubuntu { "ext4" } else { "xfs" };
        let root_magic = if ubuntu { EXT_MAGIC } else { XFS_MAGIC };
        let mut partitions = vec![];
        let mut mounts = vec![];
        let mut swaps = vec![];
        let mut dm = 0u32;
        self.mkdir("dev")?;
        for (i, disk) in disks.iter().enumerate() {
            let name = disk.name.as_str();
            if name.is_empty() || name.contains(['/', '.']) {
                return Err(format!("disk name {name:?} is not a kernel device name"));
            }
            let numbers = device_numbers(disk, i as u32);
            let dir = format!("sys/block/{name}");
            self.sysfs_device(&dir, numbers, disk.sectors)?;
            let (removable, ro, rotational) = match disk.usage {
                DiskUse::Rom => ("1", "1", "1"),
                DiskUse::Loop | DiskUse::Ram | DiskUse::MappedVolume => ("0", "0", "0"),
                _ => ("0", "0", "1"),
            };
            self.write(&format!("{dir}/removable"), &format!("{removable}\n"))?;
            self.write(&format!("{dir}/ro"), &format!("{ro}\n"))?;
            self.write(
                &format!("{dir}/queue/rotational"),
                &format!("{rotational}\n"),
            )?;
            if !matches!(disk.usage, DiskUse::Loop | DiskUse::Rom) || disk.sectors > 0 {
                partitions.push((numbers, disk.sectors, name.to_string()));
            }
            match disk.usage {
                DiskUse::Free
                | DiskUse::Loop
                | DiskUse::Ram
                | DiskUse::Rom
                | DiskUse::MappedVolume => self.device(name, &[])?,
                DiskUse::Filesystem => self.device(name, &[EXT_MAGIC])?,
                DiskUse::System => {
                    self.device(name, &[MBR])?;
                    let swap_sectors = (disk.sectors / 16).max(2048);
                    let root_sectors = disk.sectors.saturating_sub(2048 + swap_sectors);
                    let parts = [
                        (1u32, 2048u64, root_sectors, root_magic),
                        (2, 2048 + root_sectors, swap_sectors, SWAP),
                    ];
                    for (n, start, sectors, magic) in parts {
                        let part = format!("{name}{n}");
                        let pdir = format!("{dir}/{part}");
                        let pnum = (numbers.0, numbers.1 + n);
                        self.sysfs_device(&pdir, pnum, sectors)?;
                        self.write(&format!("{pdir}/partition"), &format!("{n}\n"))?;
                        self.write(&format!("{pdir}/start"), &format!("{start}\n"))?;
                        self.device(&part, &[magic])?;
                        partitions.push((pnum, sectors, part));
                    }
                    let root_dev = if profile == HostProfile::Ubuntu1404 {
                        // 14.04's initramfs mounts the root by UUID, and /proc/mounts says so.
                        self.symlink(
                            &format!("../../{name}1"),
                            &format!("dev/disk/by-uuid/{ROOT_UUID}"),
                        )?;
                        format!("/dev/disk/by-uuid/{ROOT_UUID}")
                    } else {
                        format!("/dev/{name}1")
                    };
                    let opts = if ubuntu {
                        "rw,relatime,discard,data=ordered"
                    } else {
                        "rw,seclabel,relatime,attr2,inode64,noquota"
                    };
                    mounts.insert(0, format!("{root_dev} / {root_fs} {opts} 0 0"));
                    swaps.push(format!(
                        "/dev/{name}2                              partition\t{}\t0\t-1",
                        swap_sectors / 2
                    ));
                }
                DiskUse::LvmMember => {
                    self.device(name, &[(512, b"LABELONE"), (536, b"LVM2 001")])?;
                    let holder = format!("dm-{dm}");
                    let lv = if dm == 0 {
                        "vg0-data".to_string()
                    } else {
                        format!("vg{dm}-data")
                    };
                    let hdir = format!("sys/block/{holder}");
                    let hnum = (253, dm);
                    self.sysfs_device(&hdir, hnum, disk.sectors)?;
                    self.write(&format!("{hdir}/removable"), "0\n")?;
                    self.write(&format!("{hdir}/ro"), "0\n")?;
                    self.write(&format!("{hdir}/queue/rotational"), "1\n")?;
                    self.write(&format!("{hdir}/dm/name"), &format!("{lv}\n"))?;
                    self.mkdir(&format!("{hdir}/slaves/{name}"))?;
                    self.mkdir(&format!("{dir}/holders/{holder}"))?;
                    self.device(&holder, &[if ubuntu { EXT_MAGIC } else { XFS_MAGIC }])?;
                    self.symlink(&format!("../{holder}"), &format!("dev/mapper/{lv}"))?;
                    partitions.push((hnum, disk.sectors, holder));
                    let mountpoint = if dm == 0 {
                        "/var/lib/docker".to_string()
                    } else {
                        format!("/srv/data{dm}")
                    };
                    let opts = if ubuntu {
                        "ext4 rw,relatime,data=ordered"
                    } else {
                        "xfs rw,seclabel,relatime,attr2,inode64,noquota"
                    };
                    mounts.push(format!("/dev/mapper/{lv} {mountpoint} {opts} 0 0"));
                    dm += 1;
                }
            }
        }
        let mut table = String::from("major minor  #blocks  name\n\n");
        for ((major, minor), sectors, name) in &partitions {
            table.push_str(&format!(
                "{major:>4} {minor:>7} {:>10} {name}\n",
                sectors / 2
            ));
        }
        self.write("proc/partitions", &table)?;
        let mut swap_text = String::from("Filename\t\t\t\tType\t\tSize\tUsed\tPriority\n");
        for s in swaps {
            swap_text.push_str(&s);
            swap_text.push('\n');
        }
        self.write("proc/swaps", &swap_text)?;
        let mut text = String::new();
        for line in system_mounts(profile, &mounts) {
            text.push_str(&line);
            text.push('\n');
        }
        self.write("proc/mounts", &text)
    }
}

/// `/proc/mounts` of a freshly booted host: the pseudo filesystems of its release around the
/// disk mounts (`disk[0]` is the root when there is a system disk).
fn system_mounts(profile: HostProfile, disk: &[String]) -> Vec<String> {
    let (root, rest) = match disk.first() {
        Some(first) if first.contains(" / ") => (Some(first.clone()), &disk[1..]),
        _ => (None, disk),
    };
    let mut out: Vec<String> = Vec::new();
    match profile.init() {
        Init::Upstart => {
            out.push("rootfs / rootfs rw 0 0".into());
            out.push("sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0".into());
            out.push("proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0".into());
            out.push(
                "udev /dev devtmpfs rw,relatime,size=2013180k,nr_inodes=503295,mode=755 0 0".into(),
            );
            out.push(
                "devpts /dev/pts devpts rw,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=000 0 0"
                    .into(),
            );
            out.push("tmpfs /run tmpfs rw,nosuid,noexec,relatime,size=404804k,mode=755 0 0".into());
            out.extend(root);
            for l in [
                "none /sys/fs/cgroup tmpfs rw,relatime,size=4k,mode=755 0 0",
                "none /sys/fs/fuse/connections fusectl rw,relatime 0 0",
                "none /sys/kernel/debug debugfs rw,relatime 0 0",
                "none /sys/kernel/security securityfs rw,relatime 0 0",
                "none /run/lock tmpfs rw,nosuid,nodev,noexec,relatime,size=5120k 0 0",
                "none /run/shm tmpfs rw,nosuid,nodev,relatime 0 0",
                "none /run/user tmpfs rw,nosuid,nodev,noexec,relatime,size=102400k,mode=755 0 0",
                "none /sys/fs/pstore pstore rw,relatime 0 0",
                "systemd /sys/fs/cgroup/systemd cgroup rw,nosuid,nodev,noexec,relatime,name=systemd 0 0",
            ] {
                out.push(l.into());
            }
        }
        Init::Systemd => {
            for l in [
                "sysfs /sys sysfs rw,seclabel,nosuid,nodev,noexec,relatime 0 0",
                "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
                "devtmpfs /dev devtmpfs rw,seclabel,nosuid,size=1928292k,nr_inodes=482073,mode=755 0 0",
                "securityfs /sys/kernel/security securityfs rw,nosuid,nodev,noexec,relatime 0 0",
                "tmpfs /dev/shm tmpfs rw,seclabel,nosuid,nodev 0 0",
                "devpts /dev/pts devpts rw,seclabel,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=000 0 0",
                "tmpfs /run tmpfs rw,seclabel,nosuid,nodev,mode=755 0 0",
                "tmpfs /sys/fs/cgroup tmpfs ro,seclabel,nosuid,nodev,noexec,mode=755 0 0",
                "cgroup /sys/fs/cgroup/systemd cgroup rw,seclabel,nosuid,nodev,noexec,relatime,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd 0 0",
                "configfs /sys/kernel/config configfs rw,relatime 0 0",
            ] {
                out.push(l.into());
            }
            out.extend(root);
        }
    }
    out.extend(rest.iter().cloned());
    out
}

// ---------------------------------------------------------------------------------------------
// Wiring into the devcluster

/// Host stand-ins for a devcluster: every real agent gets a fake root and its executors the
/// environment of the contract above.
#[derive(Debug, Clone)]
pub struct HostStandins {
    /// Profile of agents not named in `per_agent`.
    pub profile: HostProfile,
    /// Profiles by 1-based agent number.
    pub per_agent: BTreeMap<usize, HostProfile>,
    /// The `storage-host-standin` binary the command symlinks point at.
    pub standin_bin: PathBuf,
    /// The control API URL handed to executors (`STORAGE_DEVCLUSTER_CONTROL`); without it
    /// `reboot` and gateway effects fail with a clear message.
    pub control_url: Option<String>,
    pub disks: Vec<Disk>,
    /// More variables for every executor (`STORAGE_EXECUTOR_PLAN_WAIT` to shorten a test's
    /// host check cycle).
    pub extra_env: Vec<(String, String)>,
}

impl HostStandins {
    /// Ubuntu 14.04 everywhere with the default disks.
    pub fn new(standin_bin: PathBuf, control_url: Option<String>) -> HostStandins {
        HostStandins {
            profile: HostProfile::Ubuntu1404,
            per_agent: BTreeMap::new(),
            standin_bin,
            control_url,
            disks: default_disks(),
            extra_env: Vec::new(),
        }
    }

    /// The profile of agent `n` (1-based).
    pub fn profile_for(&self, n: usize) -> HostProfile {
        self.per_agent.get(&n).copied().unwrap_or(self.profile)
    }
}

/// Every device node of the host as an absolute path (`/dev/xvdb`, `/dev/mapper/vg0-data`,
/// `/dev/disk/by-uuid/<uuid>`): what an SDS on it could open.
pub fn device_paths(root: &FakeRoot) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    let mut pending = vec![(root.join("dev"), "/dev".to_string(), 0)];
    while let Some((dir, shown, depth)) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{shown}/{name}");
            match entry.file_type() {
                Ok(t) if t.is_dir() && depth < 3 => pending.push((entry.path(), path, depth + 1)),
                Ok(t) if !t.is_dir() => {
                    found.insert(path);
                }
                _ => {}
            }
        }
    }
    found
}

/// `<agent work dir>/host/root`.
pub fn agent_root(agent_work_dir: &Path) -> PathBuf {
    agent_work_dir.join("host").join("root")
}

/// `<agent work dir>/host/bin`.
pub fn agent_bin(agent_work_dir: &Path) -> PathBuf {
    agent_work_dir.join("host").join("bin")
}

/// Fills `bin_dir` with one symlink per command of [`COMMANDS`] to `standin`.
pub fn install_standins(bin_dir: &Path, standin: &Path) -> Result<(), String> {
    if !standin.is_file() {
        return Err(format!(
            "the stand-in binary {} does not exist (build it: cargo build -p storage-devcluster)",
            standin.display()
        ));
    }
    fs::create_dir_all(bin_dir).map_err(|e| format!("cannot create {}: {e}", bin_dir.display()))?;
    for name in COMMANDS {
        let link = bin_dir.join(name);
        if fs::symlink_metadata(&link).is_ok() {
            fs::remove_file(&link)
                .map_err(|e| format!("cannot replace {}: {e}", link.display()))?;
        }
        std::os::unix::fs::symlink(standin, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    fs::set_permissions(bin_dir, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot chmod {}: {e}", bin_dir.display()))
}

/// Creates the fake root and the stand-in directory of agent `n` (1-based, hostname
/// `agent-<n>`) under its work dir, unless a fake root is already there (a restarted cluster
/// with a kept work dir finds its hosts as it left them).
pub fn prepare_agent(cfg: &HostStandins, agent_work_dir: &Path, n: usize) -> Result<(), String> {
    let root = agent_root(agent_work_dir);
    if FakeRoot::open(&root).is_err() {
        FakeRoot::create(
            &root,
            cfg.profile_for(n),
            &cfg.disks,
            &format!("agent-{n}"),
            Some(n),
        )?;
    }
    install_standins(&agent_bin(agent_work_dir), &cfg.standin_bin)
}

/// The variables the agent adds to an executor's environment: the root, `PATH` with the
/// stand-ins first, and the control API.
pub fn executor_env(cfg: &HostStandins, agent_work_dir: &Path) -> Vec<(String, String)> {
    let inherited = std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    let bin = agent_bin(agent_work_dir);
    let mut env = vec![
        (
            ROOT_ENV.to_string(),
            agent_root(agent_work_dir).to_string_lossy().into_owned(),
        ),
        (
            "PATH".to_string(),
            format!("{}:{inherited}", bin.to_string_lossy()),
        ),
    ];
    if let Some(url) = &cfg.control_url {
        env.push((CONTROL_ENV.to_string(), url.clone()));
    }
    env.extend(cfg.extra_env.iter().cloned());
    env
}

// ---------------------------------------------------------------------------------------------
// Storage package file names

/// Which storage component a package is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Mdm,
    Sds,
    Sdc,
    Lia,
    Gateway,
}

impl Component {
    /// The service the package starts.
    pub fn service(self) -> &'static str {
        match self {
            Component::Mdm => "mdm",
            Component::Sds => "sds",
            Component::Sdc => "scini",
            Component::Lia => "lia",
            Component::Gateway => "scaleio-gateway",
        }
    }

    /// `emc-scaleio-sds` (deb) / `EMC-ScaleIO-sds` (rpm) and the like.
    pub fn of_package(name: &str) -> Option<Component> {
        match name.to_ascii_lowercase().strip_prefix("emc-scaleio-")? {
            "mdm" => Some(Component::Mdm),
            "sds" => Some(Component::Sds),
            "sdc" => Some(Component::Sdc),
            "lia" => Some(Component::Lia),
            "gateway" => Some(Component::Gateway),
            _ => None,
        }
    }
}

/// A package file name taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFile {
    pub name: String,
    pub version: String,
    /// RPM release; `None` for Debian packages.
    pub release: Option<String>,
    pub arch: String,
}

/// A Debian package file name: `name_version_arch.deb`, or the storage vendor's
/// `EMC-ScaleIO-sds-2.0-10000.2072.Ubuntu.14.04.x86_64.deb` (package `emc-scaleio-sds`,
/// version `2.0-10000.2072`; Debian package names are lower case).
pub fn parse_deb_name(file: &str) -> Option<PackageFile> {
    let stem = file.strip_suffix(".deb")?;
    // The vendor style ends in `.<arch>` (which may itself hold an underscore: x86_64).
    let Some((rest, arch)) = strip_arch(stem) else {
        let parts: Vec<&str> = stem.split('_').collect();
        let [name, version, arch] = parts.as_slice() else {
            return None;
        };
        return nonempty(PackageFile {
            name: name.to_string(),
            version: version.to_string(),
            release: None,
            arch: arch.to_string(),
        });
    };
    // Drop a `.Ubuntu.14.04`-style distribution tag.
    let rest = match rest.find(".Ubuntu.") {
        Some(i) => &rest[..i],
        None => rest,
    };
    let (name, version, release) = split_nvr(rest)?;
    nonempty(PackageFile {
        name: name.to_ascii_lowercase(),
        version: format!("{version}-{release}"),
        release: None,
        arch: if arch == "x86_64" { "amd64" } else { arch }.to_string(),
    })
}

/// An RPM file name: `name-version-release.arch.rpm`.
pub fn parse_rpm_name(file: &str) -> Option<PackageFile> {
    let stem = file.strip_suffix(".rpm")?;
    let (rest, arch) = strip_arch(stem)?;
    let (name, version, release) = split_nvr(rest)?;
    nonempty(PackageFile {
        name: name.to_string(),
        version: version.to_string(),
        release: Some(release.to_string()),
        arch: arch.to_string(),
    })
}

fn nonempty(p: PackageFile) -> Option<PackageFile> {
    let ok = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace) && !s.contains('/');
    (ok(&p.name) && ok(&p.version) && ok(&p.arch)).then_some(p)
}

fn strip_arch(stem: &str) -> Option<(&str, &str)> {
    let (rest, arch) = stem.rsplit_once('.')?;
    matches!(
        arch,
        "x86_64" | "amd64" | "noarch" | "i686" | "i386" | "all"
    )
    .then_some((rest, arch))
}

fn split_nvr(s: &str) -> Option<(&str, &str, &str)> {
    let (nv, release) = s.rsplit_once('-')?;
    let (name, version) = nv.rsplit_once('-')?;
    (!name.is_empty() && !version.is_empty() && !release.is_empty())
        .then_some((name, version, release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_has_a_stand_in() {
        for p in Platform::ALL {
            assert!(
                HostProfile::ALL.iter().any(|h| h.platform() == Some(p)),
                "no stand-in host profile plays {p:?}"
            );
        }
        for h in HostProfile::ALL {
            assert_eq!(Platform::detect(h.os_release()).ok(), h.platform(), "{h:?}");
        }
    }

    #[test]
    fn package_file_names_parse_like_the_packages_name_themselves() {
        let d = parse_deb_name("EMC-ScaleIO-sds-2.0-10000.2072.Ubuntu.14.04.x86_64.deb").unwrap();
        assert_eq!(
            (d.name.as_str(), d.version.as_str()),
            ("emc-scaleio-sds", "2.0-10000.2072")
        );
        assert_eq!(d.arch, "amd64");
        let g = parse_deb_name("emc-scaleio-gateway_2.0-10000.2072_amd64.deb").unwrap();
        assert_eq!(
            (g.name.as_str(), g.version.as_str()),
            ("emc-scaleio-gateway", "2.0-10000.2072")
        );
        let r = parse_rpm_name("EMC-ScaleIO-mdm-2.0-10000.2072.el7.x86_64.rpm").unwrap();
        assert_eq!(r.name, "EMC-ScaleIO-mdm");
        assert_eq!(r.version, "2.0");
        assert_eq!(r.release.as_deref(), Some("10000.2072.el7"));
        let gw = parse_rpm_name("EMC-ScaleIO-gateway-2.0-10000.2072.x86_64.rpm").unwrap();
        assert_eq!(gw.release.as_deref(), Some("10000.2072"));
        assert!(parse_deb_name("notes.txt").is_none());
        assert!(parse_rpm_name("x.rpm").is_none());
        assert!(parse_deb_name("sds.deb").is_none());
        assert_eq!(
            Component::of_package("EMC-ScaleIO-lia"),
            Some(Component::Lia)
        );
        assert_eq!(
            Component::of_package("emc-scaleio-sdc"),
            Some(Component::Sdc)
        );
        assert_eq!(Component::of_package("zip"), None);
    }

    #[test]
    fn profiles_parse_and_name_round_trip() {
        for p in HostProfile::ALL {
            assert_eq!(HostProfile::parse(p.name()).unwrap(), p);
        }
        assert!(HostProfile::parse("debian9")
            .unwrap_err()
            .contains("debian9"));
    }

    #[test]
    fn password_hashes_depend_on_salt_and_password() {
        assert_eq!(password_hash("a", "b"), password_hash("a", "b"));
        assert_ne!(password_hash("a", "b"), password_hash("a", "c"));
        assert_ne!(password_hash("a", "b"), password_hash("x", "b"));
    }
}
