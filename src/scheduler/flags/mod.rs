//! The scheduler's command line: every flag of deployment-spec.md section 2.2 plus the
//! operational ones, parsed into a typed [`Config`] and validated up front.
//!
//! Syntax follows Go's `flag` package, which the earlier ScaleIO framework used, so its app
//! definitions keep working: `-name=value`, `-name value`, `--name` forms, and a bare `-flag`
//! for a boolean. Every `-scaleio.<x>` is an alias of `-storage.<x>`, and `-storage.centos7.*`
//! of `-storage.rhel7.*`.
//!
//! Validation reports every problem at once, one line each naming the flag as the operator
//! wrote it, because a launcher round trip per typo is slow. The password is never echoed.

use crate::contract::Platform;
use crate::mesos::Encoding;
use crate::secret::Secret;
pub use crate::store::{StoreKind, StoreSettings};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// File name of the state file when `-store.uri` is not given.
pub const DEFAULT_STATE_FILE: &str = "storage-scheduler-state.json";

pub enum Parsed {
    Run(Box<Config>),
    /// `-help`: the text to print on stdout (exit 0).
    Help(String),
    /// `-version`: the line to print on stdout (exit 0).
    Version(String),
}

#[derive(Debug, Clone)]
pub struct Config {
    pub loglevel: log::LevelFilter,
    pub rest_port: u16,
    /// Host or IP address executors and agents use to reach this scheduler's REST server.
    pub rest_address: String,
    /// The address the REST server listens on.
    pub rest_listen: IpAddr,
    /// The operator's certificate and key for the REST server's TLS; `None`: a self-signed
    /// one made at start.
    pub rest_tls: Option<TlsFiles>,
    /// The operator API's bearer token; `None`: operator writes answer 403.
    pub operator_token: Option<crate::secret::Secret>,
    /// `host:port` of each master, `http://` and the API path stripped, in the order given.
    pub masters: Vec<String>,
    pub encoding: Encoding,
    pub framework: FrameworkSettings,
    pub experimental: bool,
    /// Never reboot nodes (their logs survive).
    pub debug: bool,
    /// Unregister the framework and exit instead of running.
    pub teardown: bool,
    pub executor: ExecutorResources,
    pub storage: StorageSettings,
    pub health: HealthWatch,
    /// Nodes of one protection domain that may be disrupted at once
    /// (`-rollout.max-disrupted-per-domain`).
    pub max_disrupted_per_domain: usize,
    pub rexray: RexRay,
    /// The package URL flags (as written) given without their SHA-256 under
    /// `-storage.packages.unverified=true`: installed unchecked, one start-up warning each.
    pub unverified_packages: Vec<String>,
    pub store: StoreSettings,
    /// Said at start, one line each (a password given as a plain flag value).
    pub warnings: Vec<String>,
}

/// `-rest.tls.cert` and `-rest.tls.key`: PEM files, read at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone)]
pub struct FrameworkSettings {
    pub user: String,
    pub name: String,
    pub role: String,
    /// `None`: Mesos fills in the hostname of the scheduler's agent.
    pub hostname: Option<String>,
    pub failover_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct ExecutorResources {
    pub cpu_mdm: f64,
    pub cpu_non: f64,
    /// Megabytes.
    pub mem_mdm: f64,
    /// Megabytes.
    pub mem_non: f64,
    /// Share of an offer's cpus the framework may count on, in (0, 1].
    pub cpu_factor: f64,
    /// Share of an offer's memory the framework may count on, in (0, 1].
    pub mem_factor: f64,
    /// Executor binary to serve instead of the one next to the scheduler.
    pub altpath: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct StorageSettings {
    pub password: Secret,
    pub protection_domain: String,
    pub storage_pool: String,
    /// `None` only in experimental mode: the framework builds the MDM trio itself.
    pub preconfig: Option<Mdms>,
    /// `None`: the gateway runs on the primary MDM (or behind `lb_gateway`).
    pub gateway: Option<IpAddr>,
    pub lb_gateway: Option<String>,
    pub cluster_name: String,
    /// When given, it identifies the system instead of `cluster_name`.
    pub cluster_id: Option<String>,
    pub api_version: String,
    pub packages: Packages,
    /// `-storage.version` as the vendor's package files carry it (`2.0-10000.2072`).
    pub version: String,
    /// Port given with `-storage.preconfig.gateway=ip:port` (default 443).
    pub gateway_port: Option<u16>,
    /// Gateway TLS, start-up wait.
    pub gateway_trust: crate::gateway::trust::TrustMode,
    pub wait: bool,
}

/// The storage cluster's health watch (`-health.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthWatch {
    /// How often the gateway is polled for health and capacity.
    pub interval: Duration,
    /// A pool with more than this percent of its capacity in use is degraded.
    pub capacity_warn_pct: f64,
    /// Data older than this is `unknown`.
    pub stale: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mdms {
    pub primary: IpAddr,
    pub secondary: IpAddr,
    pub tiebreaker: IpAddr,
}

/// Storage package URLs by platform: only the platforms given any.
pub type Packages = BTreeMap<Platform, PackageUrls>;
pub use crate::contract::plan::Packages as PackageUrls;

#[derive(Debug, Clone)]
pub struct RexRay {
    /// Ignored (Bintray is gone); kept so that earlier app definitions still parse.
    pub branch: String,
    pub version: String,
    /// URL of the DVDI isolator module.
    pub isolator_binary: Option<String>,
    /// The volume driver's packages, the isolator's digest, and its gateway user.
    pub isolator_sha256: Option<String>,
    pub packages: VolumeDriverPackages,
    pub user: Option<VolumeDriverUser>,
}

/// REX-Ray and dvdcli package downloads by platform: only the platforms given any.
pub type VolumeDriverPackages = BTreeMap<Platform, DriverPackages>;
pub use crate::contract::plan::{Download, DriverPackages};

/// The scoped gateway user REX-Ray logs in as on every node (never the admin).
#[derive(Debug, Clone)]
pub struct VolumeDriverUser {
    pub username: String,
    pub password: Secret,
}

impl RexRay {
    /// Start-up warnings about the volume driver's flags, one line each.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.branch != "stable" || self.version != "latest" {
            out.push(
                "-rexray.branch and -rexray.version are ignored (REX-Ray came from Bintray, \
                 which is gone); give -rexray.<ubuntu14|rhel7>.rexray package URLs instead"
                    .to_owned(),
            );
        }
        if self.user.is_none() {
            out.push(VOLUME_DRIVER_NO_USER.to_owned());
        }
        out
    }
}

/// Said at start and shown on every node when REX-Ray gets no gateway credentials.
pub const VOLUME_DRIVER_NO_USER: &str = "-rexray.username and -rexray.password are not given: \
     REX-Ray's configuration is written without gateway credentials, so volume operations \
     will fail until they are given";

/// The start-up warning about a package installed without its digest being checked.
pub fn unverified_warning(flag: &str) -> String {
    format!(
        "{flag}: no SHA-256 given, installed unchecked (-storage.packages.unverified=true): \
         whoever can change the file or the download in transit runs code as root on the nodes"
    )
}

impl Config {
    /// Base URL of this scheduler's REST server as agents and operators reach it over plain
    /// HTTP (the executor binary, the read-only routes).
    pub fn scheduler_url(&self) -> String {
        format!("http://{}:{}", self.rest_address, self.rest_port)
    }

    /// The same server over TLS, on the same port: the executor API's base URL.
    pub fn executor_api_url(&self) -> String {
        format!("https://{}:{}", self.rest_address, self.rest_port)
    }

    /// One log line of the effective settings; no secrets (URIs' passwords masked).
    pub fn summary(&self) -> String {
        crate::secret::mask_uri_credentials(&self.summary_line()).into_owned()
    }

    fn summary_line(&self) -> String {
        let mdms = match &self.storage.preconfig {
            Some(m) => format!(
                "pre-configured MDMs {}/{}/{}",
                m.primary, m.secondary, m.tiebreaker
            ),
            None => "experimental: framework builds the MDM trio".to_owned(),
        };
        let gateway = match (&self.storage.lb_gateway, &self.storage.gateway) {
            (Some(lb), _) => format!("load-balanced {lb}"),
            (None, Some(ip)) => ip.to_string(),
            (None, None) => "on the primary MDM".to_owned(),
        };
        let store = match self.store.kind {
            StoreKind::File => format!("file {}", self.store.uri),
            StoreKind::ZooKeeper => format!("zookeeper {}", self.store.uri),
        };
        format!(
            "masters={} encoding={} framework={:?} user={} role={} failover={}s rest={}:{} listen={} \
             {mdms} gateway={gateway} cluster={} pd={:?} pool={:?} api={} \
             health(interval={}s warn={}% stale={}s) max-disrupted-per-domain={} operator-api={} \
             executor(cpu mdm/non={}/{} mem mdm/non={}/{} factors={}/{}) store={store} \
             loglevel={} debug={} experimental={} teardown={}",
            self.masters.join(","),
            self.encoding,
            self.framework.name,
            self.framework.user,
            self.framework.role,
            self.framework.failover_timeout.as_secs(),
            self.rest_address,
            self.rest_port,
            self.rest_listen,
            self.storage
                .cluster_id
                .as_deref()
                .map(|id| format!("id {id}"))
                .unwrap_or_else(|| self.storage.cluster_name.clone()),
            self.storage.protection_domain,
            self.storage.storage_pool,
            self.storage.api_version,
            self.health.interval.as_secs_f64(),
            self.health.capacity_warn_pct,
            self.health.stale.as_secs_f64(),
            self.max_disrupted_per_domain,
            if self.operator_token.is_some() { "on" } else { "off (no token)" },
            self.executor.cpu_mdm,
            self.executor.cpu_non,
            self.executor.mem_mdm,
            self.executor.mem_non,
            self.executor.cpu_factor,
            self.executor.mem_factor,
            self.loglevel,
            self.debug,
            self.experimental,
            self.teardown,
        )
    }
}

mod check;
mod framework;
mod health;
mod parse;
mod secrets;
mod storage;
mod store;
mod table;
mod values;
mod volume;

pub use parse::parse;
pub use table::{help_text, version_line};

#[cfg(test)]
mod tests {
    use super::table::{lookup, Kind, FLAGS, NOT_USED_YET, REQUIRED};
    use super::values::find_placeholder;
    use super::*;
    use crate::contract::platform::Component;
    use crate::gateway::trust::TrustMode;

    const PASSWORD: &str = "S3cr3t-pw!";

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn base() -> Vec<String> {
        args(&[
            "-loglevel=debug",
            "-rest.port=31000",
            "-uri=10.0.0.21:5050",
            "-storage.password=S3cr3t-pw!",
            "-storage.protectiondomain=pd1",
            "-storage.storagepool=sp1",
            "-storage.preconfig.primary=10.0.0.12",
            "-storage.preconfig.secondary=10.0.0.11",
            "-storage.preconfig.tiebreaker=10.0.0.13",
            "-storage.preconfig.gateway=10.0.0.11",
        ])
    }

    /// `base()` with flags whose name matches one of `drop` removed and `extra` appended.
    fn with(drop: &[&str], extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = base()
            .into_iter()
            .filter(|arg| {
                let name = arg.trim_start_matches('-').split('=').next().unwrap_or("");
                !drop.contains(&name)
            })
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn test_env() -> impl Fn(&str) -> Option<String> {
        env_of(&[
            ("HOST", "agent-7.example"),
            ("MESOS_SANDBOX", "/sandbox/run-1"),
        ])
    }

    fn run(a: &[String]) -> Config {
        match parse(a, &test_env()) {
            Ok(Parsed::Run(c)) => *c,
            Ok(Parsed::Help(_)) => panic!("unexpected help"),
            Ok(Parsed::Version(_)) => panic!("unexpected version"),
            Err(e) => panic!("unexpected errors: {e:#?}"),
        }
    }

    fn errors(a: &[String]) -> Vec<String> {
        match parse(a, &test_env()) {
            Ok(_) => panic!("expected errors for {a:?}"),
            Err(e) => {
                for line in &e {
                    assert!(!line.contains(PASSWORD), "password leaked: {line}");
                    assert!(!line.contains('\n'), "one line per problem: {line}");
                }
                e
            }
        }
    }

    fn one_error(a: &[String]) -> String {
        let e = errors(a);
        assert_eq!(e.len(), 1, "expected exactly one error, got {e:#?}");
        e.into_iter().next().unwrap_or_default()
    }

    fn assert_mentions(line: &str, parts: &[&str]) {
        for p in parts {
            assert!(line.contains(p), "{line:?} should mention {p:?}");
        }
    }

    #[test]
    fn spec_flags_parse_with_defaults_for_the_rest() {
        let c = run(&base());
        assert_eq!(c.loglevel, log::LevelFilter::Debug);
        assert_eq!(c.rest_port, 31000);
        assert_eq!(c.masters, vec!["10.0.0.21:5050"]);
        assert_eq!(c.storage.password.expose(), PASSWORD);
        assert_eq!(c.storage.protection_domain, "pd1");
        assert_eq!(c.storage.storage_pool, "sp1");
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(
            c.storage.preconfig,
            Some(Mdms {
                primary: ip("10.0.0.12"),
                secondary: ip("10.0.0.11"),
                tiebreaker: ip("10.0.0.13"),
            })
        );
        assert_eq!(c.storage.gateway, Some(ip("10.0.0.11")));
        // Defaults.
        assert_eq!(c.encoding, Encoding::Protobuf);
        assert_eq!(c.rest_address, "agent-7.example");
        assert_eq!(c.framework.user, "root");
        assert_eq!(c.framework.name, "storage-framework");
        assert_eq!(c.framework.role, "*");
        assert_eq!(c.framework.hostname, None);
        assert_eq!(c.framework.failover_timeout, Duration::from_secs(604_800));
        assert!(!c.experimental && !c.debug && !c.teardown);
        assert_eq!(c.executor.cpu_mdm, 1.5);
        assert_eq!(c.executor.cpu_non, 0.5);
        assert_eq!(c.executor.mem_mdm, 3072.0);
        assert_eq!(c.executor.mem_non, 512.0);
        assert_eq!(c.executor.cpu_factor, 1.0);
        assert_eq!(c.executor.mem_factor, 1.0);
        assert_eq!(c.executor.altpath, None);
        assert_eq!(c.storage.lb_gateway, None);
        assert_eq!(c.storage.cluster_name, "scaleio");
        assert_eq!(c.storage.cluster_id, None);
        assert_eq!(c.storage.api_version, "2.0");
        assert_eq!(c.storage.packages, Packages::default());
        assert_eq!(
            (c.rexray.branch.as_str(), c.rexray.version.as_str()),
            ("stable", "latest")
        );
        assert_eq!(c.rexray.isolator_binary, None);
        assert_eq!(c.rexray.packages, VolumeDriverPackages::default());
        assert!(c.rexray.user.is_none());
        assert_eq!(
            c.store,
            StoreSettings {
                explicit: false,
                ..StoreSettings::new(
                    StoreKind::File,
                    "/sandbox/run-1/storage-scheduler-state.json"
                )
            }
        );
    }

    #[test]
    fn every_optional_flag_is_applied() {
        let c = run(&with(
            &[],
            &[
                "-debug",
                "-experimental=true",
                "-teardown=false",
                "-rest.address=10.1.1.1",
                "-mesos.encoding=json",
                "-user=storage",
                "-hostname=sched.example",
                "-role=storage-role",
                "-framework.name=blue",
                "-failover.timeout=168h",
                "-executor.cpu.mdm=2",
                "-executor.cpu.non=0.25",
                "-executor.mem.mdm=4096",
                "-executor.mem.non=256",
                "-executor.cpu.factor=0.5",
                "-executor.mem.factor=0.75",
                "-executor.altpath=/opt/storage-executor",
                "-storage.clustername=prod",
                "-storage.clusterid=6f831c6866417634",
                "-storage.lbgateway=gw.example:8443",
                "-storage.apiversion=2.1",
                "-storage.ubuntu14.mdm=http://pkgs/mdm.deb",
                "-storage.ubuntu14.sds=http://pkgs/sds.deb",
                "-storage.ubuntu14.sdc=http://pkgs/sdc.deb",
                "-storage.ubuntu14.lia=http://pkgs/lia.deb",
                "-storage.ubuntu14.gw=http://pkgs/gw.deb",
                "-storage.rhel7.mdm=https://pkgs/mdm.rpm",
                "-storage.rhel7.sds=https://pkgs/sds.rpm",
                "-storage.rhel7.sdc=https://pkgs/sdc.rpm",
                "-storage.rhel7.lia=https://pkgs/lia.rpm",
                "-storage.rhel7.gw=https://pkgs/gw.rpm",
                "-rexray.branch=unstable",
                "-rexray.version=0.6.3",
                "-isolator.binary=https://x/libmesos_dvdi_isolator-1.0.1.so",
                "-storage.packages.unverified=true",
                "-store.type=file",
                "-store.uri=/var/lib/storage/state.json",
            ],
        ));
        assert!(c.debug && c.experimental && !c.teardown);
        assert_eq!(c.rest_address, "10.1.1.1");
        assert_eq!(c.encoding, Encoding::Json);
        assert_eq!(c.framework.user, "storage");
        assert_eq!(c.framework.hostname.as_deref(), Some("sched.example"));
        assert_eq!(c.framework.role, "storage-role");
        assert_eq!(c.framework.name, "blue");
        assert_eq!(
            c.framework.failover_timeout,
            Duration::from_secs(168 * 3600)
        );
        assert_eq!(c.executor.cpu_mdm, 2.0);
        assert_eq!(c.executor.cpu_non, 0.25);
        assert_eq!(c.executor.mem_mdm, 4096.0);
        assert_eq!(c.executor.mem_non, 256.0);
        assert_eq!(c.executor.cpu_factor, 0.5);
        assert_eq!(c.executor.mem_factor, 0.75);
        assert_eq!(
            c.executor.altpath,
            Some(PathBuf::from("/opt/storage-executor"))
        );
        assert_eq!(c.storage.cluster_name, "prod");
        assert_eq!(c.storage.cluster_id.as_deref(), Some("6f831c6866417634"));
        assert_eq!(c.storage.lb_gateway.as_deref(), Some("gw.example:8443"));
        assert_eq!(c.storage.api_version, "2.1");
        let u = &c.storage.packages[&Platform::Ubuntu1404];
        assert_eq!(u.mdm.as_deref(), Some("http://pkgs/mdm.deb"));
        assert_eq!(u.sds.as_deref(), Some("http://pkgs/sds.deb"));
        assert_eq!(u.sdc.as_deref(), Some("http://pkgs/sdc.deb"));
        assert_eq!(u.lia.as_deref(), Some("http://pkgs/lia.deb"));
        assert_eq!(u.gw.as_deref(), Some("http://pkgs/gw.deb"));
        let r = &c.storage.packages[&Platform::Rhel7];
        assert_eq!(r.mdm.as_deref(), Some("https://pkgs/mdm.rpm"));
        assert_eq!(r.sds.as_deref(), Some("https://pkgs/sds.rpm"));
        assert_eq!(r.sdc.as_deref(), Some("https://pkgs/sdc.rpm"));
        assert_eq!(r.lia.as_deref(), Some("https://pkgs/lia.rpm"));
        assert_eq!(r.gw.as_deref(), Some("https://pkgs/gw.rpm"));
        assert_eq!(c.rexray.branch, "unstable");
        assert_eq!(c.rexray.version, "0.6.3");
        assert_eq!(
            c.rexray.isolator_binary.as_deref(),
            Some("https://x/libmesos_dvdi_isolator-1.0.1.so")
        );
        assert_eq!(c.store.uri, "/var/lib/storage/state.json");
        assert_eq!(
            c.unverified_packages.len(),
            11,
            "{:?}",
            c.unverified_packages
        );
    }

    #[test]
    fn accepted_syntaxes() {
        let c = run(&with(
            &["rest.port", "uri", "storage.storagepool", "loglevel"],
            &[
                "-rest.port",
                "31001",
                "--uri=10.0.0.1:5050",
                "--storage.storagepool",
                "pool-x",
                "--debug",
                "-experimental",
                "false",
                "-teardown=1",
                "--loglevel=WARN",
            ],
        ));
        assert_eq!(c.rest_port, 31001);
        assert_eq!(c.masters, vec!["10.0.0.1:5050"]);
        assert_eq!(c.storage.storage_pool, "pool-x");
        assert!(c.debug);
        assert!(!c.experimental);
        assert!(c.teardown);
        assert_eq!(c.loglevel, log::LevelFilter::Warn);
        // A bare boolean followed by another flag stays true and does not swallow it.
        let c = run(&with(&[], &["-debug", "-teardown"]));
        assert!(c.debug && c.teardown);
        // Go's boolean spellings.
        for (v, want) in [("t", true), ("F", false), ("TRUE", true), ("0", false)] {
            let c = run(&with(&[], &[&format!("-debug={v}")]));
            assert_eq!(c.debug, want, "-debug={v}");
        }
    }

    #[test]
    fn value_may_start_with_a_dash_unless_it_is_a_flag() {
        let c = run(&with(
            &["storage.password"],
            &["-storage.password", "-dash-pw"],
        ));
        assert_eq!(c.storage.password.expose(), "-dash-pw");
        let e = errors(&with(
            &["storage.password"],
            &["-storage.password", "-debug"],
        ));
        assert!(
            e.iter()
                .any(|l| l.contains("-storage.password: missing value")),
            "{e:#?}"
        );
        let e = one_error(&with(&["uri"], &["-uri"]));
        assert_mentions(&e, &["-uri", "missing value"]);
    }

    #[test]
    fn scaleio_aliases_work_for_every_storage_flag() {
        let a = args(&[
            "-rest.port=31000",
            "-uri=10.0.0.21:5050",
            "-scaleio.password=S3cr3t-pw!",
            "-scaleio.protectiondomain=pd1",
            "-scaleio.storagepool=sp1",
            "-scaleio.preconfig.primary=10.0.0.12",
            "-scaleio.preconfig.secondary=10.0.0.11",
            "-scaleio.preconfig.tiebreaker=10.0.0.13",
            "-scaleio.preconfig.gateway=10.0.0.11",
            "-scaleio.clusterid=abc",
            "-scaleio.clustername=n",
            "-scaleio.lbgateway=lb",
            "-scaleio.apiversion=2.0",
            "-scaleio.ubuntu14.sds=http://p/sds.deb",
            &format!("-scaleio.ubuntu14.sds.sha256={}", "a".repeat(64)),
            "-scaleio.rhel7.mdm=http://p/mdm.rpm",
            &format!("-scaleio.rhel7.mdm.sha256={}", "b".repeat(64)),
            "-scaleio.centos7.sdc=http://p/sdc.rpm",
            &format!("-scaleio.centos7.sdc.sha256={}", "C".repeat(64)),
            "-storage.centos7.lia=http://p/lia.rpm",
            &format!("-storage.centos7.lia.sha256={}", "d".repeat(64)),
        ]);
        let c = run(&a);
        assert_eq!(c.storage.password.expose(), PASSWORD);
        assert_eq!(c.storage.protection_domain, "pd1");
        assert_eq!(c.storage.storage_pool, "sp1");
        assert!(c.storage.preconfig.is_some());
        assert!(c.storage.gateway.is_some());
        assert_eq!(c.storage.cluster_id.as_deref(), Some("abc"));
        assert_eq!(c.storage.cluster_name, "n");
        assert_eq!(c.storage.lb_gateway.as_deref(), Some("lb"));
        assert_eq!(
            c.storage.packages[&Platform::Ubuntu1404].sds.as_deref(),
            Some("http://p/sds.deb")
        );
        assert_eq!(
            c.storage.packages[&Platform::Rhel7].mdm.as_deref(),
            Some("http://p/mdm.rpm")
        );
        assert_eq!(
            c.storage.packages[&Platform::Rhel7].sdc.as_deref(),
            Some("http://p/sdc.rpm")
        );
        assert_eq!(
            c.storage.packages[&Platform::Rhel7].lia.as_deref(),
            Some("http://p/lia.rpm")
        );
        let sdc = c.storage.packages[&Platform::Rhel7].get(Component::Sdc);
        assert_eq!(sdc.and_then(|d| d.sha256), Some("c".repeat(64)));
        assert!(c.unverified_packages.is_empty());
    }

    #[test]
    fn earlier_framework_app_definition_is_accepted_unchanged() {
        // The cmd of the earlier ScaleIO framework's example app definition.
        let cmd = "-loglevel=debug -rest.port=31005 -uri=10.0.0.21:5050 \
                   -scaleio.clusterid=6f831c6866417634 -scaleio.password=F00barbaz \
                   -scaleio.protectiondomain=default -scaleio.storagepool=default \
                   -scaleio.preconfig.primary=10.0.0.12 -scaleio.preconfig.secondary=10.0.0.11 \
                   -scaleio.preconfig.tiebreaker=10.0.0.13 -scaleio.preconfig.gateway=10.0.0.11";
        let a: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        let c = run(&a);
        assert_eq!(c.storage.cluster_id.as_deref(), Some("6f831c6866417634"));
        assert_eq!(c.rest_port, 31005);
    }

    #[test]
    fn repeated_flag_same_value_is_fine_different_is_an_error() {
        let c = run(&with(&[], &["-scaleio.storagepool=sp1"]));
        assert_eq!(c.storage.storage_pool, "sp1");
        let e = one_error(&with(&[], &["-scaleio.storagepool=other"]));
        assert_mentions(
            &e,
            &[
                "-storage.storagepool",
                "-scaleio.storagepool",
                "more than once",
            ],
        );
        // Different passwords: the error must not show either of them.
        let e = one_error(&with(&[], &["-scaleio.password=another-one"]));
        assert_mentions(&e, &["-storage.password", "more than once"]);
        assert!(!e.contains("another-one"), "{e}");
    }

    #[test]
    fn unknown_flag_is_named_and_its_value_not_echoed() {
        let e = one_error(&with(&[], &["-storage.pasword=hunter2"]));
        assert_mentions(&e, &["-storage.pasword", "unknown flag"]);
        assert!(!e.contains("hunter2"), "{e}");
        // `-name value` form: the value is skipped rather than reported as a stray argument.
        let e = one_error(&with(&[], &["-scaleio.pasword", "hunter2"]));
        assert_mentions(&e, &["-scaleio.pasword", "unknown flag"]);
        assert!(!e.contains("hunter2"), "{e}");
        // The earlier framework's store helpers exist again.
        let c = run(&with(&[], &["-store.dump=true"]));
        assert_eq!(c.store.helper, Some(crate::store::StoreHelper::Dump));
    }

    #[test]
    fn the_second_framework_guard_is_on_unless_turned_off() {
        assert!(!run(&with(&[], &[])).store.skip_guard);
        assert!(!run(&with(&[], &["-framework.guard=true"])).store.skip_guard);
        assert!(
            run(&with(&[], &["-framework.guard=false"]))
                .store
                .skip_guard
        );
        let e = one_error(&with(&[], &["-framework.guard=maybe"]));
        assert_mentions(&e, &["-framework.guard", "not a boolean"]);
    }

    #[test]
    fn stray_arguments_are_errors_and_are_not_echoed_in_full() {
        let e = one_error(&with(&[], &["hunter2-long"]));
        assert_mentions(&e, &["unexpected argument", "hun..."]);
        assert!(!e.contains("hunter2-long"), "{e}");
        let e = errors(&with(&[], &["--", "-debug"]));
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_mentions(&e[0], &["unexpected argument"]);
        let e = one_error(&with(&[], &["-"]));
        assert_mentions(&e, &["unexpected argument"]);
        let e = one_error(&with(&[], &["---debug"]));
        assert_mentions(&e, &["unexpected argument"]);
    }

    #[test]
    fn each_required_flag_missing_is_named() {
        for name in [
            "uri",
            "rest.port",
            "storage.password",
            "storage.protectiondomain",
            "storage.storagepool",
        ] {
            let e = one_error(&with(&[name], &[]));
            assert_mentions(&e, &[&format!("-{name}:"), "required flag is missing"]);
        }
    }

    #[test]
    fn empty_required_values_are_errors() {
        for name in [
            "uri",
            "rest.port",
            "storage.password",
            "storage.protectiondomain",
            "storage.storagepool",
        ] {
            let e = one_error(&with(&[name], &[&format!("-{name}=")]));
            assert_mentions(&e, &[&format!("-{name}:"), "must not be empty"]);
        }
    }

    #[test]
    fn all_errors_are_reported_together() {
        let e = errors(&args(&[
            "-rest.port=0",
            "-uri=master",
            "-storage.password=<GATEWAY_PASSWORD>",
            "-storage.preconfig.primary=10.0.0",
            "-executor.cpu.factor=2",
            "-bogus=1",
        ]));
        let all = e.join("\n");
        for part in [
            "-bogus: unknown flag",
            "-rest.port: port 0 is outside 1..65535",
            "-uri: \"master\" is not host:port",
            "-storage.password: the value is still the placeholder",
            "-storage.protectiondomain: required flag is missing",
            "-storage.storagepool: required flag is missing",
            "-storage.preconfig.primary: \"10.0.0\" is not an IP address",
            "-executor.cpu.factor: 2 is outside (0, 1]",
        ] {
            assert!(all.contains(part), "missing {part:?} in:\n{all}");
        }
        // Only the primary was given: the partial-MDM rule fires as well.
        assert!(all.contains("-storage.preconfig.secondary and -storage.preconfig.tiebreaker"));
        assert_eq!(e.len(), 9, "{all}");
    }

    #[test]
    fn placeholders_from_the_spec_are_rejected() {
        let e = one_error(&with(
            &["storage.password"],
            &["-storage.password=<GATEWAY_PASSWORD>"],
        ));
        assert_mentions(&e, &["-storage.password", "placeholder"]);
        assert!(
            !e.contains("GATEWAY_PASSWORD"),
            "password value echoed: {e}"
        );

        let e = one_error(&with(
            &["storage.preconfig.primary"],
            &["-storage.preconfig.primary=[MASTER MDM IP ADDRESS]"],
        ));
        assert_mentions(
            &e,
            &[
                "-storage.preconfig.primary",
                "placeholder",
                "[MASTER MDM IP ADDRESS]",
            ],
        );

        let e = one_error(&with(&[], &["-storage.ubuntu14.sds={custom}/sds.deb"]));
        assert_mentions(&e, &["-storage.ubuntu14.sds", "placeholder", "{custom}"]);

        let e = one_error(&with(&["uri"], &["-uri=<mesos_master_host>:5050"]));
        assert_mentions(&e, &["-uri", "<mesos_master_host>"]);

        let e = one_error(&with(
            &["uri"],
            &["-uri=[IP ADDRESS FOR MESOS MASTER]:5050"],
        ));
        assert_mentions(&e, &["-uri", "placeholder"]);

        let e = one_error(&with(
            &["storage.protectiondomain"],
            &["-storage.protectiondomain=<PROTECTION_DOMAIN_NAME>"],
        ));
        assert_mentions(&e, &["-storage.protectiondomain", "placeholder"]);

        let e = one_error(&with(&["rest.port"], &["-rest.port=<port>"]));
        assert_mentions(&e, &["-rest.port", "placeholder"]);

        let e = one_error(&with(&[], &["-debug=[true|false]"]));
        assert_mentions(&e, &["-debug", "placeholder"]);
    }

    #[test]
    fn brackets_that_are_not_placeholders_are_fine() {
        let c = run(&with(&["uri"], &["-uri=[::1]:5050"]));
        assert_eq!(c.masters, vec!["[::1]:5050"]);
        let c = run(&with(
            &["storage.password"],
            &["-storage.password=Pa[1]ss<w>rd"],
        ));
        assert_eq!(c.storage.password.expose(), "Pa[1]ss<w>rd");
        assert_eq!(find_placeholder("a<>b"), None);
        assert_eq!(find_placeholder("x{y:z}"), None);
        assert_eq!(find_placeholder("a<b> [c d]"), Some("<b>"));
    }

    #[test]
    fn uri_forms() {
        let c = run(&with(
            &["uri"],
            &["-uri=http://m1.example:5050, 10.0.0.2:5050,HTTP://m3:5051/api/v1/scheduler,m4:5050/"],
        ));
        assert_eq!(
            c.masters,
            vec!["m1.example:5050", "10.0.0.2:5050", "m3:5051", "m4:5050"]
        );
        for (bad, part) in [
            ("master", "is not host:port"),
            ("master:", "is not host:port"),
            ("master:abc", "is not host:port"),
            ("master:0", "outside 1..65535"),
            ("master:70000", "outside 1..65535"),
            (":5050", "is not host:port"),
            ("m1:5050,,m2:5050", "empty entry"),
            ("https://m:5050", "https is not supported"),
            ("zk://zk1:2181/mesos", "ZooKeeper"),
            ("ftp://m:5050", "unsupported scheme"),
            ("m:5050/other/path", "is not host:port"),
            ("[zz:zz]:5050", "not an IPv6 address"),
            ("::1:5050", "is not host:port"),
            ("bad host:5050", "is not host:port"),
        ] {
            let e = one_error(&with(&["uri"], &[&format!("-uri={bad}")]));
            assert_mentions(&e, &["-uri:", part]);
        }
    }

    #[test]
    fn rest_port_rules() {
        for (v, part) in [
            ("0", "outside 1..65535"),
            ("65536", "outside 1..65535"),
            ("-1", "is not a port number"),
            ("abc", "is not a port number"),
            ("$PORT", "the launcher should have replaced $PORT"),
        ] {
            let e = one_error(&with(&["rest.port"], &[&format!("-rest.port={v}")]));
            assert_mentions(&e, &["-rest.port:", part]);
        }
        assert_eq!(run(&with(&["rest.port"], &["-rest.port=1"])).rest_port, 1);
        assert_eq!(
            run(&with(&["rest.port"], &["-rest.port=65535"])).rest_port,
            65535
        );
    }

    #[test]
    fn preconfigured_addresses_must_be_ip_addresses() {
        for name in [
            "storage.preconfig.primary",
            "storage.preconfig.secondary",
            "storage.preconfig.tiebreaker",
            "storage.preconfig.gateway",
        ] {
            let e = one_error(&with(&[name], &[&format!("-{name}=mdm1.example")]));
            assert_mentions(
                &e,
                &[
                    &format!("-{name}:"),
                    "\"mdm1.example\" is not an IP address",
                ],
            );
        }
        let e = one_error(&with(
            &["storage.preconfig.primary"],
            &["-scaleio.preconfig.primary=10.0.0"],
        ));
        assert_mentions(
            &e,
            &["-scaleio.preconfig.primary: \"10.0.0\" is not an IP address"],
        );
        let c = run(&with(
            &["storage.preconfig.gateway"],
            &["-storage.preconfig.gateway=fd00::7"],
        ));
        assert_eq!(c.storage.gateway, Some("fd00::7".parse().expect("ip")));
    }

    /// Gateway port, CA, wait, capacity interval and threshold.
    #[test]
    fn gateway_flags_parse_and_refuse_bad_values() {
        let c = run(&with(
            &["storage.preconfig.gateway"],
            &[
                "-storage.preconfig.gateway=10.0.0.11:8443",
                "-storage.gateway.cacert=/etc/gw-ca.pem",
                "-storage.gateway.insecure=false",
                "-storage.wait=true",
                "-storage.capacity.interval=5m",
                "-storage.threshold=90",
            ],
        ));
        assert_eq!(c.storage.gateway, Some("10.0.0.11".parse().expect("ip")));
        assert_eq!(c.storage.gateway_port, Some(8443));
        assert_eq!(
            c.storage.gateway_trust,
            TrustMode::Ca("/etc/gw-ca.pem".into())
        );
        assert!(c.storage.wait);
        // The earlier names of the health flags.
        assert_eq!(c.health.interval, Duration::from_secs(300));
        assert_eq!(c.health.capacity_warn_pct, 90.0);
        let c = run(&base());
        assert_eq!(c.storage.gateway_trust, TrustMode::FirstUse);
        assert!(!c.storage.wait);
        for (flag, problem) in [
            ("-storage.capacity.interval=0", "at least 1 second"),
            ("-storage.threshold=150", "not a percentage"),
            ("-storage.wait=maybe", "not a boolean"),
            ("-storage.preconfig.gateway=10.0.0.11:0", "ip:port"),
            ("-storage.gateway.fingerprint=sha256:abc", "64 hex digits"),
            ("-storage.gateway.insecure=yes please", "not a boolean"),
        ] {
            let name = flag.trim_start_matches('-').split('=').next().unwrap_or("");
            let e = one_error(&with(&[name], &[flag]));
            assert_mentions(&e, &[problem]);
        }
    }

    #[test]
    fn health_flags_have_defaults_earlier_names_and_checks() {
        let c = run(&base());
        assert_eq!(
            c.health,
            HealthWatch {
                interval: Duration::from_secs(30),
                capacity_warn_pct: 80.0,
                stale: Duration::from_secs(180),
            }
        );
        let c = run(&with(
            &[],
            &[
                "-health.interval=1m",
                "-health.capacity.warn=85.5",
                "-health.stale=10m",
            ],
        ));
        assert_eq!(c.health.interval, Duration::from_secs(60));
        assert_eq!(c.health.capacity_warn_pct, 85.5);
        assert_eq!(c.health.stale, Duration::from_secs(600));
        assert!(c
            .summary()
            .contains("health(interval=60s warn=85.5% stale=600s)"));
        // Each earlier name, also in its -scaleio.* spelling, is the same flag.
        let c = run(&with(
            &[],
            &["-scaleio.capacity.interval=45", "-scaleio.threshold=70"],
        ));
        assert_eq!(c.health.interval, Duration::from_secs(45));
        assert_eq!(c.health.capacity_warn_pct, 70.0);
        // Polls further apart than the default age: stale after three of them.
        let c = run(&with(&[], &["-storage.capacity.interval=5m"]));
        assert_eq!(c.health.stale, Duration::from_secs(900));
        // Both names with different values: named as written.
        let e = one_error(&with(
            &[],
            &["-health.capacity.warn=90", "-storage.threshold=70"],
        ));
        assert_mentions(
            &e,
            &[
                "-storage.threshold",
                "-health.capacity.warn",
                "more than once",
            ],
        );
        for (flags, problem) in [
            (
                &["-health.interval=0.5"][..],
                "-health.interval: \"0.5\" is not a duration of at least 1 second",
            ),
            (
                &["-storage.capacity.interval=x"][..],
                "-storage.capacity.interval: \"x\" is not a duration",
            ),
            (
                &["-health.capacity.warn=0"][..],
                "-health.capacity.warn: 0 is not a percentage",
            ),
            (
                &["-storage.threshold=101"][..],
                "-storage.threshold: 101 is not a percentage",
            ),
            (
                &["-health.stale=soon"][..],
                "-health.stale: \"soon\" is not a duration",
            ),
            (
                &["-health.interval=60", "-health.stale=60"][..],
                "-health.stale: \"60\" is not longer than -health.interval (60 s)",
            ),
        ] {
            assert_mentions(&one_error(&with(&[], flags)), &[problem]);
        }
    }

    #[test]
    fn one_way_to_check_the_gateway_certificate() {
        let (a, b) = ("ab".repeat(32), "CD:".repeat(31) + "CD");
        let pins_flag = format!("-storage.gateway.fingerprint=sha256:{a}, sha256:{b}");
        let c = run(&with(&[], &[pins_flag.as_str()]));
        let pins = vec![
            crate::tls::Fingerprint::parse(&a).expect("pin"),
            crate::tls::Fingerprint::parse(&b).expect("pin"),
        ];
        assert_eq!(c.storage.gateway_trust, TrustMode::Pinned(pins));
        let c = run(&with(&[], &["-storage.gateway.insecure=true"]));
        assert_eq!(c.storage.gateway_trust, TrustMode::Insecure);
        let e = one_error(&with(
            &[],
            &[
                "-storage.gateway.insecure=true",
                "-storage.gateway.cacert=/etc/gw.pem",
            ],
        ));
        assert_mentions(
            &e,
            &["-storage.gateway.cacert", "-storage.gateway.insecure"],
        );
    }

    #[test]
    fn mdm_flags_go_together() {
        let e = one_error(&with(&["storage.preconfig.secondary"], &[]));
        assert_mentions(
            &e,
            &["-storage.preconfig.secondary", "missing", "go together"],
        );
        let e = one_error(&with(
            &[
                "storage.preconfig.secondary",
                "storage.preconfig.tiebreaker",
            ],
            &[],
        ));
        assert_mentions(
            &e,
            &[
                "-storage.preconfig.secondary and -storage.preconfig.tiebreaker",
                "-storage.preconfig.primary is given",
            ],
        );
        // Partial stays an error in experimental mode too.
        let e = one_error(&with(&["storage.preconfig.primary"], &["-experimental"]));
        assert_mentions(&e, &["-storage.preconfig.primary", "go together"]);
        let e = one_error(&with(
            &["storage.preconfig.tiebreaker"],
            &["-storage.preconfig.tiebreaker=10.0.0.12"],
        ));
        assert_mentions(&e, &["three different nodes"]);
    }

    #[test]
    fn no_mdm_flags_need_experimental() {
        let none = [
            "storage.preconfig.primary",
            "storage.preconfig.secondary",
            "storage.preconfig.tiebreaker",
        ];
        let e = one_error(&with(&none, &[]));
        assert_mentions(&e, &["-storage.preconfig.primary", "-experimental"]);
        let c = run(&with(&none, &["-experimental=true"]));
        assert!(c.experimental);
        assert_eq!(c.storage.preconfig, None);
        // Empty values count as not given.
        let c = run(&with(
            &none,
            &[
                "-experimental",
                "-storage.preconfig.primary=",
                "-storage.preconfig.secondary=",
                "-storage.preconfig.tiebreaker=",
            ],
        ));
        assert_eq!(c.storage.preconfig, None);
    }

    #[test]
    fn factor_rules() {
        for name in ["executor.cpu.factor", "executor.mem.factor"] {
            for v in ["0", "1.01", "-0.5", "2"] {
                let e = one_error(&with(&[], &[&format!("-{name}={v}")]));
                assert_mentions(&e, &[&format!("-{name}:"), "outside (0, 1]"]);
            }
            let e = one_error(&with(&[], &[&format!("-{name}=lots")]));
            assert_mentions(&e, &[&format!("-{name}:"), "not a number"]);
            let e = one_error(&with(&[], &[&format!("-{name}=NaN")]));
            assert_mentions(&e, &[&format!("-{name}:"), "not a number"]);
        }
        let c = run(&with(
            &[],
            &["-executor.cpu.factor=1", "-executor.mem.factor=0.01"],
        ));
        assert_eq!((c.executor.cpu_factor, c.executor.mem_factor), (1.0, 0.01));
    }

    #[test]
    fn executor_resources_must_be_positive() {
        for name in [
            "executor.cpu.mdm",
            "executor.cpu.non",
            "executor.mem.mdm",
            "executor.mem.non",
        ] {
            let e = one_error(&with(&[], &[&format!("-{name}=0")]));
            assert_mentions(&e, &[&format!("-{name}:"), "greater than 0"]);
        }
    }

    #[test]
    fn loglevel_values() {
        for (v, want) in [
            ("error", log::LevelFilter::Error),
            ("warn", log::LevelFilter::Warn),
            ("info", log::LevelFilter::Info),
            ("debug", log::LevelFilter::Debug),
            ("trace", log::LevelFilter::Trace),
        ] {
            assert_eq!(
                run(&with(&["loglevel"], &[&format!("-loglevel={v}")])).loglevel,
                want
            );
        }
        assert_eq!(
            run(&with(&["loglevel"], &[])).loglevel,
            log::LevelFilter::Info
        );
        let e = one_error(&with(&["loglevel"], &["-loglevel=loud"]));
        assert_mentions(&e, &["-loglevel:", "\"loud\"", "not a log level"]);
    }

    #[test]
    fn failover_timeout_forms() {
        for (v, secs) in [
            ("3600", 3600),
            ("45s", 45),
            ("30m", 1800),
            ("168h", 604_800),
            ("7d", 604_800),
            ("1.5h", 5400),
            ("0", 0),
        ] {
            let c = run(&with(&[], &[&format!("-failover.timeout={v}")]));
            assert_eq!(
                c.framework.failover_timeout,
                Duration::from_secs(secs),
                "{v}"
            );
        }
        for v in ["1w", "-5", "h", "1weeks", "10 minutes"] {
            let e = one_error(&with(&[], &[&format!("-failover.timeout={v}")]));
            assert_mentions(&e, &["-failover.timeout:", "is not a duration"]);
        }
    }

    #[test]
    fn encoding_values() {
        assert_eq!(
            run(&with(&[], &["-mesos.encoding=json"])).encoding,
            Encoding::Json
        );
        assert_eq!(
            run(&with(&[], &["-mesos.encoding=protobuf"])).encoding,
            Encoding::Protobuf
        );
        let e = one_error(&with(&[], &["-mesos.encoding=xml"]));
        assert_mentions(&e, &["-mesos.encoding:", "xml"]);
    }

    #[test]
    fn store_settings() {
        let e = one_error(&with(&[], &["-store.type=zk"]));
        assert_mentions(&e, &["-store.uri:", "zk://"]);
        let c = run(&with(
            &[],
            &["-store.type=zk", "-store.uri=zk://h1,h2:2182"],
        ));
        assert_eq!(c.store.kind, StoreKind::ZooKeeper);
        assert_eq!(
            c.store.uri,
            "zk://h1:2181,h2:2182/storage-framework/storage-framework"
        );
        let e = one_error(&with(&[], &["-store.type=zookeeper", "-store.uri=/x"]));
        assert_mentions(&e, &["-store.uri:", "zk://"]);
        let e = one_error(&with(&[], &["-store.type=etcd"]));
        assert_mentions(&e, &["-store.type:", "\"etcd\" is not a store type"]);
        let e = one_error(&with(&[], &["-store.uri=/var/lib/"]));
        assert_mentions(&e, &["-store.uri:", "does not name a file"]);
        let c = run(&with(&[], &["-store.uri=file:///var/lib/s.json"]));
        assert_eq!(c.store.uri, "/var/lib/s.json");
        // Without $MESOS_SANDBOX: the working directory.
        let no_sandbox = env_of(&[("HOST", "h")]);
        let Ok(Parsed::Run(c)) = parse(&base(), &no_sandbox) else {
            panic!("base args must parse");
        };
        assert_eq!(c.store.uri, "./storage-scheduler-state.json");
    }

    #[test]
    fn rest_address_defaults_and_rules() {
        let from = |env: &'static [(&'static str, &'static str)]| match parse(&base(), &env_of(env))
        {
            Ok(Parsed::Run(c)) => c.rest_address,
            _ => panic!("base args must parse"),
        };
        assert_eq!(from(&[("HOST", "h1"), ("LIBPROCESS_IP", "10.9.9.9")]), "h1");
        assert_eq!(
            from(&[("HOST", " "), ("LIBPROCESS_IP", "10.9.9.9")]),
            "10.9.9.9"
        );
        assert_eq!(from(&[("HOSTNAME", "named")]), "named");
        // Nothing in the environment: this machine's name, never empty.
        assert!(!from(&[]).is_empty());
        assert_eq!(
            run(&with(&[], &["-rest.address=10.2.2.2"])).rest_address,
            "10.2.2.2"
        );
        for bad in ["http://h", "h:8080", "a b"] {
            let e = one_error(&with(&[], &[&format!("-rest.address={bad}")]));
            assert_mentions(&e, &["-rest.address:", "is not a host name or IP address"]);
        }
    }

    #[test]
    fn the_rest_certificate_and_key_come_both_or_neither() {
        assert_eq!(run(&with(&[], &[])).rest_tls, None);
        let c = run(&with(
            &[],
            &[
                "-rest.tls.cert=/etc/s/cert.pem",
                "-rest.tls.key=/etc/s/key.pem",
            ],
        ));
        assert_eq!(
            c.rest_tls,
            Some(TlsFiles {
                cert: "/etc/s/cert.pem".into(),
                key: "/etc/s/key.pem".into()
            })
        );
        let e = one_error(&with(&[], &["-rest.tls.cert=/etc/s/cert.pem"]));
        assert_mentions(&e, &["-rest.tls.cert:", "give -rest.tls.key with it"]);
        let e = one_error(&with(&[], &["-rest.tls.key=/etc/s/key.pem"]));
        assert_mentions(&e, &["-rest.tls.key:", "give -rest.tls.cert with it"]);
    }

    #[test]
    fn rest_listen_defaults_to_every_ipv4_address_and_takes_an_ip() {
        assert_eq!(run(&with(&[], &[])).rest_listen.to_string(), "0.0.0.0");
        for ip in ["10.2.2.2", "::", "127.0.0.1"] {
            let c = run(&with(&[], &[&format!("-rest.listen={ip}")]));
            assert_eq!(c.rest_listen, ip.parse::<IpAddr>().unwrap());
        }
        let e = one_error(&with(&[], &["-rest.listen=myhost"]));
        assert_mentions(&e, &["-rest.listen:", "\"myhost\" is not an IP address"]);
    }

    #[test]
    fn other_value_checks_name_their_flag() {
        for (arg, part) in [
            (
                "-storage.ubuntu14.gw=pkgs/gw.deb",
                "-storage.ubuntu14.gw: \"pkgs/gw.deb\" is not an http:// or https:// URL",
            ),
            (
                "-scaleio.centos7.mdm=ftp://x",
                "-scaleio.centos7.mdm: \"ftp://x\" is not an http",
            ),
            ("-isolator.binary=x.so", "-isolator.binary:"),
            (
                "-storage.apiversion=two",
                "-storage.apiversion: \"two\" is not a version",
            ),
            ("-storage.lbgateway=a b", "-storage.lbgateway:"),
            ("-hostname=a/b", "-hostname:"),
            ("-debug=yes", "-debug: \"yes\" is not a boolean"),
        ] {
            let e = one_error(&with(&[], &[arg]));
            assert_mentions(&e, &[part]);
        }
    }

    #[test]
    fn password_never_appears_in_errors_debug_or_summary() {
        // Every error path that touches the password flag.
        for extra in [
            &["-storage.password="][..],
            &["-storage.password"][..],
            &["-scaleio.password=different"][..],
            &["-storage.pasword=S3cr3t-pw!"][..],
            &["-storage.pasword", "S3cr3t-pw!"][..],
            &["S3cr3t-pw!"][..],
        ] {
            let mut a = base();
            a.extend(extra.iter().map(|s| s.to_string()));
            let e = errors(&a); // asserts no line contains PASSWORD
            assert!(!e.is_empty());
        }
        let c = run(&base());
        let debug = format!("{c:?} {c:#?}");
        assert!(!debug.contains(PASSWORD), "{debug}");
        assert!(debug.contains("<redacted>"));
        let summary = c.summary();
        assert!(!summary.contains(PASSWORD), "{summary}");
    }

    #[test]
    fn summary_shows_the_effective_settings_on_one_line() {
        let s = run(&base()).summary();
        assert!(!s.contains('\n'));
        for part in [
            "masters=10.0.0.21:5050",
            "encoding=protobuf",
            "rest=agent-7.example:31000",
            "10.0.0.12/10.0.0.11/10.0.0.13",
            "gateway=10.0.0.11",
            "pd=\"pd1\"",
            "pool=\"sp1\"",
            "failover=604800s",
            "store=file /sandbox/run-1/storage-scheduler-state.json",
            "loglevel=DEBUG",
        ] {
            assert!(s.contains(part), "{part:?} missing from {s}");
        }
        let exp = [
            "storage.preconfig.primary",
            "storage.preconfig.secondary",
            "storage.preconfig.tiebreaker",
            "storage.preconfig.gateway",
        ];
        let s = run(&with(&exp, &["-experimental"])).summary();
        assert!(
            s.contains("experimental: framework builds the MDM trio"),
            "{s}"
        );
        assert!(s.contains("gateway=on the primary MDM"), "{s}");
    }

    #[test]
    fn help_lists_every_flag_with_default_and_meaning() {
        let Ok(Parsed::Help(text)) = parse(&args(&["-help"]), &test_env()) else {
            panic!("-help must give help");
        };
        for f in FLAGS.iter() {
            assert!(
                text.contains(&format!("-{}", f.name)),
                "-{} missing from help",
                f.name
            );
            assert!(text.contains(f.help), "meaning of -{} missing", f.name);
            if !f.default.is_empty() && f.default != REQUIRED {
                assert!(
                    text.contains(&format!("(default: {})", f.default)),
                    "default of -{} missing",
                    f.name
                );
            }
        }
        for name in [
            "uri",
            "rest.port",
            "storage.protectiondomain",
            "storage.storagepool",
        ] {
            let def = lookup(name).expect("flag");
            assert_eq!(def.default, REQUIRED, "{name} must be marked required");
        }
        assert!(text.contains("(required)"));
        assert!(text.contains("-scaleio.*"));
        assert!(text.contains("-version"));
        // Help wins over other problems and other spellings work.
        for a in [
            &["--help"][..],
            &["-h"][..],
            &["-bogus", "-help"][..],
            &["-uri=x", "--help=1"][..],
        ] {
            assert!(
                matches!(parse(&args(a), &test_env()), Ok(Parsed::Help(_))),
                "{a:?}"
            );
        }
    }

    // STORAGE_PASSWORD is the documented way; this covers the minimal fallback deploy.sh needs.
    #[test]
    fn password_from_storage_password_env() {
        let without: Vec<String> = base()
            .into_iter()
            .filter(|a| !a.starts_with("-storage.password="))
            .collect();
        let env = env_of(&[("HOST", "h"), ("STORAGE_PASSWORD", PASSWORD)]);
        let Ok(Parsed::Run(c)) = parse(&without, &env) else {
            panic!("STORAGE_PASSWORD must stand in for -storage.password");
        };
        assert_eq!(c.storage.password.expose(), PASSWORD);
        assert!(parse(&without, &test_env()).is_err());
    }

    #[test]
    fn version_flag() {
        let Ok(Parsed::Version(v)) = parse(&args(&["-version"]), &test_env()) else {
            panic!("-version must give the version");
        };
        assert_eq!(v, crate::version::line("storage-scheduler"));
        assert!(matches!(
            parse(&args(&["--version", "-bogus"]), &test_env()),
            Ok(Parsed::Version(_))
        ));
    }

    #[test]
    fn flag_table_is_consistent() {
        let mut names: Vec<&str> = FLAGS.iter().map(|f| f.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate flag names");
        for f in FLAGS.iter() {
            assert!(
                !f.name.starts_with("scaleio."),
                "aliases are not table entries"
            );
            assert!(
                f.kind == Kind::Bool || !f.hint.is_empty(),
                "-{} needs a hint",
                f.name
            );
        }
    }

    #[test]
    fn help_names_the_flags_not_used_yet() {
        let help = help_text();
        for name in NOT_USED_YET {
            assert!(lookup(name).is_some(), "{name} is not a flag");
            let entry = help.split(&format!("  -{name}")).nth(1).unwrap();
            let entry = entry.split("\n  -").next().unwrap();
            assert!(
                entry.contains("not used by this build yet"),
                "{name}: {entry}"
            );
        }
        let uri = help
            .split("  -uri=")
            .nth(1)
            .unwrap()
            .split("\n  -")
            .next()
            .unwrap();
        assert!(!uri.contains("not used"), "{uri}");
    }

    /// The password from a file or the environment, so `ps` does not show it.
    #[test]
    fn password_from_file_or_environment() {
        let dir = std::env::temp_dir().join(format!("pwfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
        set_mode(&file, 0o600);
        let file_flag = format!("-storage.password.file={}", file.display());
        let a = with(&["storage.password"], &[&file_flag]);
        assert_eq!(run(&a).storage.password.expose(), PASSWORD);

        let env = env_of(&[("STORAGE_PASSWORD", "from-env"), ("HOST", "h")]);
        let parsed = |a: &[String]| match parse(a, &env) {
            Ok(Parsed::Run(c)) => c.storage.password.expose().to_owned(),
            _ => panic!("{a:?} did not parse"),
        };
        assert_eq!(parsed(&with(&["storage.password"], &[])), "from-env");
        // The flags come first.
        assert_eq!(parsed(&base()), PASSWORD);
        assert_eq!(parsed(&a), PASSWORD);

        // Both flags: an error naming both; a missing file: named, and nothing echoed.
        let e = one_error(&with(&[], &[&file_flag]));
        assert_mentions(&e, &["-storage.password:", "-storage.password.file"]);
        let missing = format!("-storage.password.file={}", dir.join("nope").display());
        let e = one_error(&with(&["storage.password"], &[&missing]));
        assert_mentions(&e, &["-storage.password.file:", "nope"]);
        std::fs::write(&file, "\n").unwrap();
        let e = one_error(&with(&["storage.password"], &[&file_flag]));
        assert_mentions(&e, &["-storage.password.file:", "is empty"]);
        let e = one_error(&with(&["storage.password"], &[]));
        assert_mentions(&e, &["STORAGE_PASSWORD", "-storage.password.file"]);
        let help = help_text();
        assert!(help.contains("STORAGE_PASSWORD") && help.contains("-storage.password.file"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn set_mode(path: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The operator token comes from a file (owner-only) or the environment, never a plain
    /// flag; a short one is refused; the value is never in a message.
    #[test]
    fn the_operator_token_is_read_from_a_file_or_the_environment() {
        let token = "Op-token-for-the-flag-test-42";
        assert!(run(&base()).operator_token.is_none());
        let dir = std::env::temp_dir().join(format!("optoken-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, format!("{token}\n")).unwrap();
        let flag = format!("-rest.operator.token.file={}", file.display());
        let a = with(&[], &[&flag]);
        set_mode(&file, 0o644);
        assert_mentions(&one_error(&a), &["-rest.operator.token.file:", "0644"]);
        set_mode(&file, 0o600);
        assert_eq!(run(&a).operator_token.unwrap().expose(), token);
        std::fs::write(&file, "short\n").unwrap();
        let e = one_error(&a);
        assert_mentions(
            &e,
            &["-rest.operator.token.file:", "at least 16 characters"],
        );
        assert!(!e.contains("short"), "{e}");
        let env = env_of(&[
            ("HOST", "h"),
            ("STORAGE_OPERATOR_TOKEN", "Op-token-for-the-flag-test-42"),
        ]);
        match parse(&base(), &env) {
            Ok(Parsed::Run(c)) => assert_eq!(c.operator_token.unwrap().expose(), token),
            _ => panic!("STORAGE_OPERATOR_TOKEN not taken"),
        }
        let plain = with(&[], &[&format!("-rest.operator.token={token}")]);
        let e = one_error(&plain);
        assert!(!e.contains(token), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A password file others may read is refused, naming the file and its mode; the owner's
    /// own (0600, 0400) is taken.
    #[test]
    fn a_password_file_readable_by_others_is_refused() {
        let dir = std::env::temp_dir().join(format!("pwmode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
        let flag = format!("-storage.password.file={}", file.display());
        let a = with(&["storage.password"], &[&flag]);
        for mode in [0o644, 0o640, 0o604, 0o660] {
            set_mode(&file, mode);
            let e = one_error(&a);
            assert_mentions(
                &e,
                &[
                    "-storage.password.file:",
                    &file.display().to_string(),
                    &format!("{mode:04o}"),
                ],
            );
        }
        for mode in [0o600, 0o400] {
            set_mode(&file, mode);
            assert_eq!(run(&a).storage.password.expose(), PASSWORD);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A password given as a plain flag value is taken, with one warning naming the file
    /// flag and the environment variable; from a file or the environment, no warning.
    #[test]
    fn a_password_on_the_command_line_is_warned_about() {
        let c = run(&base());
        let w: Vec<&String> = c
            .warnings
            .iter()
            .filter(|w| w.contains("storage.password"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", c.warnings);
        assert_mentions(
            w[0],
            &[
                "-storage.password",
                "-storage.password.file",
                "STORAGE_PASSWORD",
            ],
        );
        assert!(!w[0].contains(PASSWORD));
        let env = env_of(&[("STORAGE_PASSWORD", "from-env"), ("HOST", "h")]);
        match parse(&with(&["storage.password"], &[]), &env) {
            Ok(Parsed::Run(c)) => assert!(c.warnings.is_empty(), "{:?}", c.warnings),
            _ => panic!("did not parse"),
        }
        let mut a = base();
        a.push("-rexray.username=vol".into());
        a.push("-rexray.password=Vol-pw1".into());
        let c = run(&a);
        let w = c
            .warnings
            .iter()
            .find(|w| w.contains("rexray.password"))
            .expect("a warning");
        assert_mentions(w, &["-rexray.password.file", "REXRAY_PASSWORD"]);
        assert!(!w.contains("Vol-pw1"));
    }

    /// Credentials in a store URI are honoured, and masked wherever the URI is shown.
    #[test]
    fn store_uri_credentials_are_kept_and_masked_in_the_summary() {
        let mut a = base();
        a.push("-store.type=zk".into());
        a.push("-store.uri=zk://alice:S3cret-zk@h1:2181,h2/sf".into());
        let c = run(&a);
        assert_eq!(c.store.uri, "zk://alice:S3cret-zk@h1:2181,h2:2181/sf");
        let line = c.summary();
        assert!(line.contains("zk://alice:***@h1:2181,h2:2181/sf"), "{line}");
        assert!(!line.contains("S3cret-zk"), "{line}");
        // A bad URI's error names it, masked.
        let mut a = base();
        a.push("-store.type=zk".into());
        a.push("-store.uri=zk://alice:S3cret-zk@".into());
        let e = one_error(&a);
        assert!(e.contains("alice:***@") && !e.contains("S3cret-zk"), "{e}");
    }
}
