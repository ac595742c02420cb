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

use crate::mesos::Encoding;
use crate::secret::Secret;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
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
    pub rexray: RexRay,
    pub store: StoreSettings,
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
    /// Port given with `-storage.preconfig.gateway=ip:port` (default 443).
    pub gateway_port: Option<u16>,
    /// Issue 9: gateway TLS, start-up wait, capacity polling.
    pub gateway_ca: Option<PathBuf>,
    pub wait: bool,
    pub capacity_interval: Duration,
    /// Percent of a pool's capacity in use above which it is flagged.
    pub threshold_pct: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mdms {
    pub primary: IpAddr,
    pub secondary: IpAddr,
    pub tiebreaker: IpAddr,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packages {
    pub ubuntu14: PackageUrls,
    /// RHEL 7 and CentOS 7 use the same packages.
    pub rhel7: PackageUrls,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageUrls {
    pub mdm: Option<String>,
    pub sds: Option<String>,
    pub sdc: Option<String>,
    pub lia: Option<String>,
    pub gw: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RexRay {
    pub branch: String,
    pub version: String,
    /// URL of the DVDI isolator module.
    pub isolator_binary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub kind: StoreKind,
    pub uri: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    File,
    /// Recognised so the error can say "not yet" rather than "unknown"; never produced by
    /// [`parse`] until the ZooKeeper store exists.
    ZooKeeper,
}

impl Config {
    /// One log line of the effective settings; no secrets.
    pub fn summary(&self) -> String {
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
            "masters={} encoding={} framework={:?} user={} role={} failover={}s rest={}:{} \
             {mdms} gateway={gateway} cluster={} pd={:?} pool={:?} api={} \
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
            self.storage
                .cluster_id
                .as_deref()
                .map(|id| format!("id {id}"))
                .unwrap_or_else(|| self.storage.cluster_name.clone()),
            self.storage.protection_domain,
            self.storage.storage_pool,
            self.storage.api_version,
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

// ---------------------------------------------------------------------------------------------
// The flag table: the single source for parsing, validation lookups and -help.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Value,
}

struct FlagDef {
    name: &'static str,
    group: &'static str,
    kind: Kind,
    hint: &'static str,
    /// As shown by -help; [`REQUIRED`] for required flags, "" for "not set".
    default: &'static str,
    help: &'static str,
}

const REQUIRED: &str = "required";

macro_rules! flag {
    ($group:expr, $name:expr, bool, $default:expr, $help:expr) => {
        FlagDef {
            name: $name,
            group: $group,
            kind: Kind::Bool,
            hint: "",
            default: $default,
            help: $help,
        }
    };
    ($group:expr, $name:expr, $hint:expr, $default:expr, $help:expr) => {
        FlagDef {
            name: $name,
            group: $group,
            kind: Kind::Value,
            hint: $hint,
            default: $default,
            help: $help,
        }
    };
}

const G_GENERAL: &str = "General";
const G_MESOS: &str = "Mesos";
const G_REST: &str = "REST interface";
const G_STORAGE: &str = "Storage cluster";
const G_PACKAGES: &str = "Storage packages (URLs the executors download; no default)";
const G_EXECUTOR: &str = "Executor resources";
const G_REXRAY: &str = "Volume driver";
const G_STORE: &str = "State store";

static FLAGS: &[FlagDef] = &[
    flag!(G_GENERAL, "loglevel", "level", "info",
        "Log verbosity: error, warn, info, debug or trace"),
    flag!(G_GENERAL, "debug", bool, "false",
        "Never reboot nodes, so their logs survive for debugging"),
    flag!(G_GENERAL, "experimental", bool, "false",
        "Let the framework build the storage cluster itself (MDM trio, gateway); required when no pre-configured MDM addresses are given"),
    flag!(G_GENERAL, "teardown", bool, "false",
        "Unregister the framework from the Mesos master (its executors end) and exit"),
    flag!(G_MESOS, "uri", "host:port[,host:port...]", REQUIRED,
        "Mesos master(s), port usually 5050; a list is tried in order; an http:// prefix is accepted"),
    flag!(G_MESOS, "mesos.encoding", "protobuf|json", "protobuf",
        "Encoding of calls and events on the Mesos scheduler API"),
    flag!(G_MESOS, "framework.name", "name", "storage-framework",
        "Framework name shown by Mesos"),
    flag!(G_MESOS, "user", "user", "root",
        "User the executors run as; installing packages needs root"),
    flag!(G_MESOS, "role", "role", "*",
        "Mesos role the framework registers with"),
    flag!(G_MESOS, "hostname", "host", "",
        "Hostname the framework registers with (default: Mesos fills in this agent's)"),
    flag!(G_MESOS, "failover.timeout", "duration", "604800",
        "How long Mesos keeps the executors running while the scheduler is away: seconds, or a number with unit s, m, h or d (e.g. 168h)"),
    flag!(G_REST, "rest.port", "port", REQUIRED,
        "Port of the scheduler's REST interface; the launcher supplies $PORT"),
    flag!(G_REST, "rest.address", "host", "$HOST, else $LIBPROCESS_IP, else this machine's hostname",
        "Host or IP address the executors use to reach this scheduler"),
    flag!(G_STORAGE, "storage.password", "password", REQUIRED,
        "Password of the storage gateway's admin user"),
    flag!(G_STORAGE, "storage.protectiondomain", "name", REQUIRED,
        "Name of the protection domain volumes come from"),
    flag!(G_STORAGE, "storage.storagepool", "name", REQUIRED,
        "Name of the storage pool volumes come from"),
    flag!(G_STORAGE, "storage.preconfig.primary", "ip", "",
        "IP address of the existing primary (master) MDM; give all three MDM flags or none"),
    flag!(G_STORAGE, "storage.preconfig.secondary", "ip", "",
        "IP address of the existing secondary (slave) MDM"),
    flag!(G_STORAGE, "storage.preconfig.tiebreaker", "ip", "",
        "IP address of the existing tie-breaker MDM"),
    flag!(G_STORAGE, "storage.preconfig.gateway", "ip[:port]", "",
        "IP address (and port, default 443) of the storage gateway (default: the primary MDM runs it)"),
    flag!(G_STORAGE, "storage.lbgateway", "host[:port]", "",
        "Address of a load-balanced gateway; takes precedence over -storage.preconfig.gateway"),
    flag!(G_STORAGE, "storage.clustername", "name", "scaleio",
        "Name of the storage system"),
    flag!(G_STORAGE, "storage.clusterid", "id", "",
        "Id of the storage system; takes precedence over -storage.clustername"),
    flag!(G_STORAGE, "storage.apiversion", "major.minor", "2.0",
        "Gateway REST API version"),
    // Issue 9: gateway TLS, start-up wait, capacity.
    flag!(G_STORAGE, "storage.gateway.cacert", "path", "",
        "PEM CA certificate to verify the gateway's TLS certificate against (default: not verified, as gateways ship self-signed ones)"),
    flag!(G_STORAGE, "storage.wait", bool, "false",
        "When the gateway or a storage prerequisite is not ready at start, wait and retry instead of exiting with code 3"),
    flag!(G_STORAGE, "storage.capacity.interval", "duration", "60",
        "How often pool capacity is read from the gateway: seconds, or a number with unit s, m, h or d"),
    flag!(G_STORAGE, "storage.threshold", "percent", "80",
        "A storage pool with more than this percent of its capacity in use is flagged"),
    flag!(G_PACKAGES, "storage.ubuntu14.mdm", "url", "", "MDM package for Ubuntu 14.04"),
    flag!(G_PACKAGES, "storage.ubuntu14.sds", "url", "", "SDS package for Ubuntu 14.04"),
    flag!(G_PACKAGES, "storage.ubuntu14.sdc", "url", "", "SDC package for Ubuntu 14.04"),
    flag!(G_PACKAGES, "storage.ubuntu14.lia", "url", "", "LIA package for Ubuntu 14.04"),
    flag!(G_PACKAGES, "storage.ubuntu14.gw", "url", "", "Gateway package for Ubuntu 14.04"),
    flag!(G_PACKAGES, "storage.rhel7.mdm", "url", "", "MDM package for RHEL/CentOS 7"),
    flag!(G_PACKAGES, "storage.rhel7.sds", "url", "", "SDS package for RHEL/CentOS 7"),
    flag!(G_PACKAGES, "storage.rhel7.sdc", "url", "", "SDC package for RHEL/CentOS 7"),
    flag!(G_PACKAGES, "storage.rhel7.lia", "url", "", "LIA package for RHEL/CentOS 7"),
    flag!(G_PACKAGES, "storage.rhel7.gw", "url", "", "Gateway package for RHEL/CentOS 7"),
    flag!(G_EXECUTOR, "executor.cpu.mdm", "cpus", "1.5",
        "CPUs reserved for the executor on an MDM node"),
    flag!(G_EXECUTOR, "executor.cpu.non", "cpus", "0.5",
        "CPUs reserved for the executor on a data node"),
    flag!(G_EXECUTOR, "executor.mem.mdm", "MB", "3072",
        "Memory (MB) reserved for the executor on an MDM node"),
    flag!(G_EXECUTOR, "executor.mem.non", "MB", "512",
        "Memory (MB) reserved for the executor on a data node"),
    flag!(G_EXECUTOR, "executor.cpu.factor", "factor", "1.0",
        "Share of an offer's CPUs the framework counts on, in (0, 1]; below 1 leaves headroom"),
    flag!(G_EXECUTOR, "executor.mem.factor", "factor", "1.0",
        "Share of an offer's memory the framework counts on, in (0, 1]"),
    flag!(G_EXECUTOR, "executor.altpath", "path", "",
        "Executor binary to serve instead of the storage-executor next to the scheduler"),
    flag!(G_REXRAY, "rexray.branch", "branch", "stable",
        "REX-Ray release branch"),
    flag!(G_REXRAY, "rexray.version", "version", "latest",
        "REX-Ray version within the branch"),
    flag!(G_REXRAY, "isolator.binary", "url", "",
        "URL of the Mesos DVDI isolator module to install"),
    flag!(G_STORE, "store.type", "file", "file",
        "Where the scheduler keeps its state (ZooKeeper: not yet supported)"),
    flag!(G_STORE, "store.uri", "path", "$MESOS_SANDBOX/storage-scheduler-state.json, else ./storage-scheduler-state.json",
        "Location of the state"),
];

/// Canonical definition for a name as written (without dashes), resolving the aliases.
fn lookup(name: &str) -> Option<&'static FlagDef> {
    let name = match name.strip_prefix("scaleio.") {
        Some(rest) => format!("storage.{rest}"),
        None => name.to_owned(),
    };
    let name = match name.strip_prefix("storage.centos7.") {
        Some(rest) => format!("storage.rhel7.{rest}"),
        None => name,
    };
    FLAGS.iter().find(|f| f.name == name)
}

fn is_help(name: &str) -> bool {
    matches!(name, "help" | "h")
}

pub fn version_line() -> String {
    format!("storage-scheduler {}", env!("CARGO_PKG_VERSION"))
}

/// The `-help` text: every flag with its default and meaning.
pub fn help_text() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: Mesos framework that keeps every agent ready to serve ScaleIO-class volumes.\n",
        version_line()
    );
    out.push_str(
        "Usage: storage-scheduler -name=value ...\n\
         Also accepted: -name value, --name=value, and a bare -flag for true.\n\
         Every -storage.* flag may be written -scaleio.* (earlier ScaleIO framework);\n\
         -storage.centos7.* is the same as -storage.rhel7.*.\n",
    );
    let mut group = "";
    for f in FLAGS {
        if f.group != group {
            group = f.group;
            let _ = writeln!(out, "\n{group}:");
        }
        let syntax = match f.kind {
            Kind::Bool => format!("-{}[=true|false]", f.name),
            Kind::Value => format!("-{}=<{}>", f.name, f.hint),
        };
        let default = match f.default {
            REQUIRED => " (required)".to_owned(),
            "" => String::new(),
            d => format!(" (default: {d})"),
        };
        let _ = writeln!(out, "  {syntax}\n      {}{default}", f.help);
    }
    out.push_str(
        "\nOther:\n  -help\n      Print this text and exit\n  -version\n      Print the version and exit\n",
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// A flag's value and how the operator spelled the flag (for error messages).
struct Given {
    written: String,
    value: String,
}

/// Parses the arguments after the program name (`std::env::args().skip(1)`). `env` supplies
/// environment variables (`HOST`, `LIBPROCESS_IP`, `HOSTNAME`, `MESOS_SANDBOX`) so tests do
/// not depend on the real environment. `Err` holds one message per problem; the caller prints
/// each on its own line and exits with status 2.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Parsed, Vec<String>> {
    let mut errors = Vec::new();
    let mut given: HashMap<&'static str, Given> = HashMap::new();
    // Flags already reported as malformed, so "missing" is not reported for them as well.
    let mut broken: HashSet<&'static str> = HashSet::new();
    let mut help = false;
    let mut version = false;

    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if arg == "--" {
            for rest in &args[i..] {
                errors.push(unexpected(rest));
            }
            break;
        }
        let body = match arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) {
            Some(body) if !body.is_empty() && !body.starts_with('-') && !body.starts_with('=') => {
                body
            }
            _ => {
                errors.push(unexpected(arg));
                continue;
            }
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        if is_help(name) {
            help = true;
            continue;
        }
        if name == "version" {
            version = true;
            continue;
        }
        let Some(def) = lookup(name) else {
            // The value is never echoed: a misspelt -storage.pasword would print the password.
            errors.push(format!(
                "-{name}: unknown flag (run with -help for the list)"
            ));
            if inline.is_none() && args.get(i).is_some_and(|next| !next.starts_with('-')) {
                i += 1;
            }
            continue;
        };
        let value = match (def.kind, inline) {
            (_, Some(v)) => v.to_owned(),
            (Kind::Bool, None) => match args.get(i) {
                // Go would leave a separate "false" as a stray argument; taking it is kinder.
                Some(next) if parse_bool(next).is_some() => {
                    i += 1;
                    next.clone()
                }
                _ => "true".to_owned(),
            },
            (Kind::Value, None) => match args.get(i) {
                Some(next) if !looks_like_known_flag(next) => {
                    i += 1;
                    next.clone()
                }
                _ => {
                    errors.push(format!("-{name}: missing value (write -{name}=<value>)"));
                    broken.insert(def.name);
                    continue;
                }
            },
        };
        let written = format!("-{name}");
        match given.get(def.name) {
            Some(prev) if prev.value != value => errors.push(format!(
                "-{}: given more than once with different values (as {} and {written})",
                def.name, prev.written
            )),
            Some(_) => {}
            None => {
                given.insert(def.name, Given { written, value });
            }
        }
    }

    if help {
        return Ok(Parsed::Help(help_text()));
    }
    if version {
        return Ok(Parsed::Version(version_line()));
    }

    let mut check = Check {
        given,
        broken,
        errors,
        env,
    };
    let config = check.config();
    if check.errors.is_empty() {
        Ok(Parsed::Run(Box::new(config)))
    } else {
        Err(check.errors)
    }
}

fn unexpected(arg: &str) -> String {
    // Not echoed in full: a stray argument may be a password split off by shell quoting.
    let shown: String = arg.chars().take(3).collect();
    let ellipsis = if arg.chars().count() > 3 { "..." } else { "" };
    format!(
        "unexpected argument \"{shown}{ellipsis}\" (flags are written -name=value; a value with spaces needs quoting)"
    )
}

fn looks_like_known_flag(arg: &str) -> bool {
    let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
        return false;
    };
    let name = body.split_once('=').map_or(body, |(n, _)| n);
    lookup(name).is_some() || is_help(name) || name == "version"
}

/// Go's strconv.ParseBool, which the earlier framework's flags used.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Text of the first unreplaced placeholder in `v`: `<...>`, `[...]` or `{...}` holding words
/// (letters, digits, space, `_ - . / |`), as in the spec's `<GATEWAY_PASSWORD>`,
/// `[MASTER MDM IP ADDRESS]` and `{custom_binary_url}`. An IPv6 literal such as `[::1]` holds
/// colons, so it is not mistaken for one.
fn find_placeholder(v: &str) -> Option<&str> {
    for (open, close) in [('<', '>'), ('[', ']'), ('{', '}')] {
        let mut from = 0;
        while let Some(start) = v[from..].find(open).map(|s| s + from) {
            let inner_start = start + open.len_utf8();
            let Some(len) = v[inner_start..].find(close) else {
                break;
            };
            let inner = &v[inner_start..inner_start + len];
            if is_placeholder_words(inner) {
                return Some(&v[start..inner_start + len + close.len_utf8()]);
            }
            from = inner_start;
        }
    }
    None
}

fn is_placeholder_words(inner: &str) -> bool {
    !inner.trim().is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " _-./|".contains(c))
}

/// A password is only a placeholder when the whole value is one: `Pa[1]ss` is a password.
fn is_whole_placeholder(v: &str) -> bool {
    let v = v.trim();
    [('<', '>'), ('[', ']'), ('{', '}')].iter().any(|&(o, c)| {
        v.len() >= 2
            && v.starts_with(o)
            && v.ends_with(c)
            && is_placeholder_words(&v[1..v.len() - 1])
    })
}

/// Turns the given values into a Config, collecting one error per problem. Values that fail
/// are replaced by harmless stand-ins so checking can go on; the Config is only returned when
/// no error was found.
struct Check<'a> {
    given: HashMap<&'static str, Given>,
    broken: HashSet<&'static str>,
    errors: Vec<String>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Check<'_> {
    fn label(&self, name: &'static str) -> String {
        match self.given.get(name) {
            Some(g) => g.written.clone(),
            None => format!("-{name}"),
        }
    }

    fn fail(&mut self, name: &'static str, problem: impl std::fmt::Display) {
        let label = self.label(name);
        self.errors.push(format!("{label}: {problem}"));
    }

    /// The raw value when given and not a placeholder. Empty counts as not given (Go's
    /// "empty string" default), except for required flags, where it is its own error.
    fn raw(&mut self, name: &'static str) -> Option<String> {
        debug_assert!(FLAGS.iter().any(|f| f.name == name), "{name} not in FLAGS");
        let value = self.given.get(name)?.value.clone();
        if let Some(p) = find_placeholder(&value) {
            self.fail(
                name,
                format!("{value:?} still holds the placeholder {p}; replace it with a real value"),
            );
            return None;
        }
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return None;
        }
        Some(trimmed.to_owned())
    }

    fn required(&mut self, name: &'static str) -> String {
        let present = self.given.contains_key(name);
        let placeholder = self
            .given
            .get(name)
            .is_some_and(|g| find_placeholder(&g.value).is_some());
        match self.raw(name) {
            Some(v) => v,
            None => {
                if !present {
                    if !self.broken.contains(name) {
                        self.fail(name, "required flag is missing");
                    }
                } else if !placeholder {
                    self.fail(name, "must not be empty");
                }
                String::new()
            }
        }
    }

    fn text(&mut self, name: &'static str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    fn boolean(&mut self, name: &'static str) -> bool {
        let Some(v) = self.raw(name) else {
            return false;
        };
        parse_bool(&v).unwrap_or_else(|| {
            self.fail(name, format!("{v:?} is not a boolean (true or false)"));
            false
        })
    }

    fn number(&mut self, name: &'static str, default: f64) -> Option<f64> {
        let Some(v) = self.raw(name) else {
            return Some(default);
        };
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() => Some(n),
            _ => {
                self.fail(name, format!("{v:?} is not a number"));
                None
            }
        }
    }

    fn positive(&mut self, name: &'static str, default: f64) -> f64 {
        match self.number(name, default) {
            Some(n) if n > 0.0 => n,
            Some(n) => {
                self.fail(name, format!("{n} must be greater than 0"));
                default
            }
            None => default,
        }
    }

    fn factor(&mut self, name: &'static str) -> f64 {
        match self.number(name, 1.0) {
            Some(n) if n > 0.0 && n <= 1.0 => n,
            Some(n) => {
                self.fail(name, format!("{n} is outside (0, 1]"));
                1.0
            }
            None => 1.0,
        }
    }

    fn port(&mut self, name: &'static str) -> u16 {
        let v = self.required(name);
        if v.is_empty() {
            return 0;
        }
        match v.parse::<u64>() {
            Ok(n @ 1..=65535) => u16::try_from(n).unwrap_or(0),
            Ok(n) => {
                self.fail(name, format!("port {n} is outside 1..65535"));
                0
            }
            Err(_) if v.starts_with('$') => {
                self.fail(
                    name,
                    format!("{v:?} is not a port number (the launcher should have replaced {v})"),
                );
                0
            }
            Err(_) => {
                self.fail(name, format!("{v:?} is not a port number"));
                0
            }
        }
    }

    fn ip(&mut self, name: &'static str) -> Option<IpAddr> {
        let v = self.raw(name)?;
        match v.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.fail(name, format!("{v:?} is not an IP address"));
                None
            }
        }
    }

    fn url(&mut self, name: &'static str) -> Option<String> {
        let v = self.raw(name)?;
        let lower = v.to_ascii_lowercase();
        let ok = ["http://", "https://"]
            .iter()
            .any(|s| lower.starts_with(s) && lower.len() > s.len())
            && !v.contains(char::is_whitespace);
        if ok {
            Some(v)
        } else {
            self.fail(name, format!("{v:?} is not an http:// or https:// URL"));
            None
        }
    }

    /// A name that ends up in a URL or a command: no spaces or slashes.
    fn host(&mut self, name: &'static str, v: String, allow_port: bool) -> String {
        let bad = v.contains(char::is_whitespace)
            || v.contains('/')
            || (!allow_port && v.contains(':') && v.parse::<IpAddr>().is_err());
        if bad {
            let what = if allow_port {
                "is not a host name, IP address or host:port"
            } else {
                "is not a host name or IP address (give the port with its own flag)"
            };
            self.fail(name, format!("{v:?} {what}"));
        }
        v
    }

    fn env(&self, key: &str) -> Option<String> {
        (self.env)(key).filter(|v| !v.trim().is_empty())
    }

    fn config(&mut self) -> Config {
        let loglevel = self.loglevel();
        let debug = self.boolean("debug");
        let experimental = self.boolean("experimental");
        let teardown = self.boolean("teardown");

        let masters = self.masters();
        let encoding = match self.raw("mesos.encoding") {
            None => Encoding::Protobuf,
            Some(v) => v.parse::<Encoding>().unwrap_or_else(|e| {
                self.fail("mesos.encoding", e);
                Encoding::Protobuf
            }),
        };
        let framework = FrameworkSettings {
            user: self.text("user", "root"),
            name: self.text("framework.name", "storage-framework"),
            role: self.text("role", "*"),
            hostname: self
                .raw("hostname")
                .map(|h| self.host("hostname", h, false)),
            failover_timeout: self.failover_timeout(),
        };

        let rest_port = self.port("rest.port");
        let rest_address = match self.raw("rest.address") {
            Some(a) => self.host("rest.address", a, false),
            None => self.default_rest_address(),
        };

        let executor = ExecutorResources {
            cpu_mdm: self.positive("executor.cpu.mdm", 1.5),
            cpu_non: self.positive("executor.cpu.non", 0.5),
            mem_mdm: self.positive("executor.mem.mdm", 3072.0),
            mem_non: self.positive("executor.mem.non", 512.0),
            cpu_factor: self.factor("executor.cpu.factor"),
            mem_factor: self.factor("executor.mem.factor"),
            altpath: self.raw("executor.altpath").map(PathBuf::from),
        };

        let storage = self.storage(experimental);
        let rexray = RexRay {
            branch: self.text("rexray.branch", "stable"),
            version: self.text("rexray.version", "latest"),
            isolator_binary: self.url("isolator.binary"),
        };
        let store = self.store();

        Config {
            loglevel,
            rest_port,
            rest_address,
            masters,
            encoding,
            framework,
            experimental,
            debug,
            teardown,
            executor,
            storage,
            rexray,
            store,
        }
    }

    fn loglevel(&mut self) -> log::LevelFilter {
        let Some(v) = self.raw("loglevel") else {
            return log::LevelFilter::Info;
        };
        match v.to_ascii_lowercase().as_str() {
            "error" => log::LevelFilter::Error,
            "warn" | "warning" => log::LevelFilter::Warn,
            "info" => log::LevelFilter::Info,
            "debug" => log::LevelFilter::Debug,
            "trace" => log::LevelFilter::Trace,
            _ => {
                self.fail(
                    "loglevel",
                    format!("{v:?} is not a log level (error, warn, info, debug or trace)"),
                );
                log::LevelFilter::Info
            }
        }
    }

    fn masters(&mut self) -> Vec<String> {
        let v = self.required("uri");
        if v.is_empty() {
            return Vec::new();
        }
        let mut masters = Vec::new();
        for item in v.split(',') {
            match parse_master(item.trim()) {
                Ok(m) => masters.push(m),
                Err(problem) => self.fail("uri", problem),
            }
        }
        masters
    }

    fn failover_timeout(&mut self) -> Duration {
        const DEFAULT: Duration = Duration::from_secs(604_800);
        let Some(v) = self.raw("failover.timeout") else {
            return DEFAULT;
        };
        match parse_duration(&v) {
            Some(d) => d,
            None => {
                self.fail(
                    "failover.timeout",
                    format!(
                        "{v:?} is not a duration (seconds, or a number with unit s, m, h or d, e.g. 168h)"
                    ),
                );
                DEFAULT
            }
        }
    }

    fn default_rest_address(&self) -> String {
        self.env("HOST")
            .or_else(|| self.env("LIBPROCESS_IP"))
            .or_else(|| self.env("HOSTNAME"))
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "localhost".to_owned())
    }

    fn storage(&mut self, experimental: bool) -> StorageSettings {
        let password = self.password();
        let protection_domain = self.required("storage.protectiondomain");
        let storage_pool = self.required("storage.storagepool");
        let preconfig = self.mdms(experimental);
        let (gateway, gateway_port) = self.gateway_address();
        let lb_gateway = self
            .raw("storage.lbgateway")
            .map(|v| self.host("storage.lbgateway", v, true));
        let cluster_name = self.text("storage.clustername", "scaleio");
        let cluster_id = self.raw("storage.clusterid");
        let api_version = self.text("storage.apiversion", "2.0");
        let is_version = api_version.split_once('.').is_some_and(|(a, b)| {
            [a, b]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        });
        if !is_version {
            self.fail(
                "storage.apiversion",
                format!("{api_version:?} is not a version like 2.0"),
            );
        }
        let mut urls = |[mdm, sds, sdc, lia, gw]: [&'static str; 5]| PackageUrls {
            mdm: self.url(mdm),
            sds: self.url(sds),
            sdc: self.url(sdc),
            lia: self.url(lia),
            gw: self.url(gw),
        };
        let packages = Packages {
            ubuntu14: urls([
                "storage.ubuntu14.mdm",
                "storage.ubuntu14.sds",
                "storage.ubuntu14.sdc",
                "storage.ubuntu14.lia",
                "storage.ubuntu14.gw",
            ]),
            rhel7: urls([
                "storage.rhel7.mdm",
                "storage.rhel7.sds",
                "storage.rhel7.sdc",
                "storage.rhel7.lia",
                "storage.rhel7.gw",
            ]),
        };
        StorageSettings {
            password,
            protection_domain,
            storage_pool,
            preconfig,
            gateway,
            lb_gateway,
            cluster_name,
            cluster_id,
            api_version,
            packages,
            gateway_port,
            gateway_ca: self.raw("storage.gateway.cacert").map(PathBuf::from),
            wait: self.boolean("storage.wait"),
            capacity_interval: self.capacity_interval(),
            threshold_pct: self.threshold(),
        }
    }

    /// Issue 9: `-storage.preconfig.gateway` as `ip` or `ip:port` (`[v6]:port`).
    fn gateway_address(&mut self) -> (Option<IpAddr>, Option<u16>) {
        const NAME: &str = "storage.preconfig.gateway";
        let Some(v) = self.raw(NAME) else {
            return (None, None);
        };
        if let Ok(ip) = v.parse::<IpAddr>() {
            return (Some(ip), None);
        }
        match v.parse::<std::net::SocketAddr>() {
            Ok(sa) if sa.port() != 0 => (Some(sa.ip()), Some(sa.port())),
            _ => {
                self.fail(NAME, format!("{v:?} is not an IP address or ip:port"));
                (None, None)
            }
        }
    }

    fn capacity_interval(&mut self) -> Duration {
        const NAME: &str = "storage.capacity.interval";
        const DEFAULT: Duration = Duration::from_secs(60);
        let Some(v) = self.raw(NAME) else {
            return DEFAULT;
        };
        match parse_duration(&v) {
            Some(d) if d >= Duration::from_secs(1) => d,
            _ => {
                self.fail(
                    NAME,
                    format!("{v:?} is not a duration of at least 1 second (e.g. 60 or 5m)"),
                );
                DEFAULT
            }
        }
    }

    fn threshold(&mut self) -> f64 {
        const NAME: &str = "storage.threshold";
        match self.number(NAME, 80.0) {
            Some(n) if n > 0.0 && n <= 100.0 => n,
            Some(n) => {
                self.fail(NAME, format!("{n} is not a percentage in (0, 100]"));
                80.0
            }
            None => 80.0,
        }
    }

    /// Like [`Check::required`], but no message ever contains the value.
    fn password(&mut self) -> Secret {
        const NAME: &str = "storage.password";
        let Some(value) = self.given.get(NAME).map(|g| g.value.clone()) else {
            if !self.broken.contains(NAME) {
                self.fail(NAME, "required flag is missing");
            }
            return Secret::default();
        };
        if is_whole_placeholder(&value) {
            self.fail(
                NAME,
                "the value is still the placeholder from the example; replace it with the gateway password",
            );
            return Secret::default();
        }
        // Not trimmed: spaces may be part of a password.
        if value.is_empty() {
            self.fail(NAME, "must not be empty");
            return Secret::default();
        }
        Secret::new(value)
    }

    fn mdms(&mut self, experimental: bool) -> Option<Mdms> {
        const NAMES: [&str; 3] = [
            "storage.preconfig.primary",
            "storage.preconfig.secondary",
            "storage.preconfig.tiebreaker",
        ];
        let present: Vec<bool> = NAMES
            .iter()
            .map(|n| {
                self.broken.contains(n)
                    || self
                        .given
                        .get(n)
                        .is_some_and(|g| !g.value.trim().is_empty())
            })
            .collect();
        let ips: Vec<Option<IpAddr>> = NAMES.iter().map(|n| self.ip(n)).collect();
        let count = present.iter().filter(|p| **p).count();
        if count == 0 {
            if !experimental {
                self.errors.push(format!(
                    "-{}, -{} and -{} are missing: give the addresses of the existing MDMs \
                     (or -experimental=true to let the framework build the storage cluster)",
                    NAMES[0], NAMES[1], NAMES[2]
                ));
            }
            return None;
        }
        if count < 3 {
            let missing: Vec<String> = NAMES
                .iter()
                .zip(&present)
                .filter(|(_, p)| !**p)
                .map(|(n, _)| format!("-{n}"))
                .collect();
            let given: Vec<String> = NAMES
                .iter()
                .zip(&present)
                .filter(|(_, p)| **p)
                .map(|(n, _)| self.label(n))
                .collect();
            self.errors.push(format!(
                "{}: missing while {} {} given; the three MDM flags go together",
                missing.join(" and "),
                given.join(" and "),
                if given.len() == 1 { "is" } else { "are" }
            ));
            return None;
        }
        let [Some(primary), Some(secondary), Some(tiebreaker)] = [ips[0], ips[1], ips[2]] else {
            return None;
        };
        if primary == secondary || primary == tiebreaker || secondary == tiebreaker {
            self.errors.push(format!(
                "{}, {} and {}: the primary, secondary and tie-breaker MDM must be three different nodes",
                self.label(NAMES[0]),
                self.label(NAMES[1]),
                self.label(NAMES[2])
            ));
            return None;
        }
        Some(Mdms {
            primary,
            secondary,
            tiebreaker,
        })
    }

    fn store(&mut self) -> StoreSettings {
        let kind = match self.raw("store.type").map(|v| v.to_ascii_lowercase()) {
            None => StoreKind::File,
            Some(v) if v == "file" => StoreKind::File,
            Some(v) if v == "zookeeper" || v == "zk" => {
                self.fail(
                    "store.type",
                    "the ZooKeeper store is not supported yet; use -store.type=file",
                );
                StoreKind::File
            }
            Some(v) => {
                self.fail("store.type", format!("{v:?} is not a store type (file)"));
                StoreKind::File
            }
        };
        let uri = match self.raw("store.uri") {
            Some(v) => {
                let path = v.strip_prefix("file://").unwrap_or(&v).to_owned();
                if path.is_empty() || path.ends_with('/') {
                    self.fail("store.uri", format!("{v:?} does not name a file"));
                }
                path
            }
            None => match self.env("MESOS_SANDBOX") {
                Some(sandbox) => format!("{}/{DEFAULT_STATE_FILE}", sandbox.trim_end_matches('/')),
                None => format!("./{DEFAULT_STATE_FILE}"),
            },
        };
        StoreSettings { kind, uri }
    }
}

/// One `-uri` entry to `host:port`.
fn parse_master(item: &str) -> Result<String, String> {
    let example = "(e.g. 10.0.0.1:5050)";
    if item.is_empty() {
        return Err("empty entry in the list of masters".to_owned());
    }
    let lower = item.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &item["http://".len()..]
    } else if lower.starts_with("https://") {
        return Err(format!(
            "{item:?}: https is not supported; the scheduler talks plain HTTP to the master"
        ));
    } else if lower.starts_with("zk://") {
        return Err(format!(
            "{item:?}: ZooKeeper master detection is not supported; list the masters as host:port {example}"
        ));
    } else if let Some((scheme, _)) = item.split_once("://") {
        return Err(format!(
            "{item:?}: unsupported scheme {scheme:?}; give host:port {example}"
        ));
    } else {
        item
    };
    let rest = rest
        .strip_suffix("/api/v1/scheduler")
        .unwrap_or(rest)
        .trim_end_matches('/');
    let not_host_port = || format!("{item:?} is not host:port {example}");
    if rest.contains('/') {
        return Err(not_host_port());
    }
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        let (inner, after) = bracketed.split_once(']').ok_or_else(not_host_port)?;
        if inner.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{item:?}: [{inner}] is not an IPv6 address"));
        }
        let port = after.strip_prefix(':').ok_or_else(not_host_port)?;
        (&rest[..inner.len() + 2], port)
    } else {
        let (host, port) = rest.rsplit_once(':').ok_or_else(not_host_port)?;
        let valid = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_');
        if !valid {
            return Err(not_host_port());
        }
        (host, port)
    };
    match port.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(format!("{host}:{p}")),
        Ok(p) => Err(format!("{item:?}: port {p} is outside 1..65535")),
        Err(_) => Err(not_host_port()),
    }
}

/// Seconds as a plain number, or a number with unit s, m, h or d.
fn parse_duration(v: &str) -> Option<Duration> {
    let (number, unit) = match v.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => (&v[..at], &v[at..]),
        None => (v, "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    let n: f64 = number.trim().parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(n * scale).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            c.rexray,
            RexRay {
                branch: "stable".into(),
                version: "latest".into(),
                isolator_binary: None
            }
        );
        assert_eq!(
            c.store,
            StoreSettings {
                kind: StoreKind::File,
                uri: "/sandbox/run-1/storage-scheduler-state.json".into()
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
        let u = &c.storage.packages.ubuntu14;
        assert_eq!(u.mdm.as_deref(), Some("http://pkgs/mdm.deb"));
        assert_eq!(u.sds.as_deref(), Some("http://pkgs/sds.deb"));
        assert_eq!(u.sdc.as_deref(), Some("http://pkgs/sdc.deb"));
        assert_eq!(u.lia.as_deref(), Some("http://pkgs/lia.deb"));
        assert_eq!(u.gw.as_deref(), Some("http://pkgs/gw.deb"));
        let r = &c.storage.packages.rhel7;
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
            "-scaleio.rhel7.mdm=http://p/mdm.rpm",
            "-scaleio.centos7.sdc=http://p/sdc.rpm",
            "-storage.centos7.lia=http://p/lia.rpm",
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
            c.storage.packages.ubuntu14.sds.as_deref(),
            Some("http://p/sds.deb")
        );
        assert_eq!(
            c.storage.packages.rhel7.mdm.as_deref(),
            Some("http://p/mdm.rpm")
        );
        assert_eq!(
            c.storage.packages.rhel7.sdc.as_deref(),
            Some("http://p/sdc.rpm")
        );
        assert_eq!(
            c.storage.packages.rhel7.lia.as_deref(),
            Some("http://p/lia.rpm")
        );
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
        // Flags of the earlier framework we do not support are unknown, not silently ignored.
        let e = one_error(&with(&[], &["-store.dump=true"]));
        assert_mentions(&e, &["-store.dump", "unknown flag"]);
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

    /// Issue 9: gateway port, CA, wait, capacity interval and threshold.
    #[test]
    fn gateway_flags_parse_and_refuse_bad_values() {
        let c = run(&with(
            &["storage.preconfig.gateway"],
            &[
                "-storage.preconfig.gateway=10.0.0.11:8443",
                "-storage.gateway.cacert=/etc/gw-ca.pem",
                "-storage.wait=true",
                "-storage.capacity.interval=5m",
                "-storage.threshold=90",
            ],
        ));
        assert_eq!(c.storage.gateway, Some("10.0.0.11".parse().expect("ip")));
        assert_eq!(c.storage.gateway_port, Some(8443));
        assert_eq!(
            c.storage.gateway_ca.as_deref(),
            Some(std::path::Path::new("/etc/gw-ca.pem"))
        );
        assert!(c.storage.wait);
        assert_eq!(c.storage.capacity_interval, Duration::from_secs(300));
        assert_eq!(c.storage.threshold_pct, 90.0);
        let c = run(&base());
        assert!(!c.storage.wait);
        assert_eq!(c.storage.capacity_interval, Duration::from_secs(60));
        assert_eq!(c.storage.threshold_pct, 80.0);
        for (flag, problem) in [
            ("-storage.capacity.interval=0", "at least 1 second"),
            ("-storage.threshold=150", "not a percentage"),
            ("-storage.wait=maybe", "not a boolean"),
            ("-storage.preconfig.gateway=10.0.0.11:0", "ip:port"),
        ] {
            let name = flag.trim_start_matches('-').split('=').next().unwrap_or("");
            let e = one_error(&with(&[name], &[flag]));
            assert_mentions(&e, &[problem]);
        }
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
        let e = one_error(&with(&[], &["-store.type=zookeeper"]));
        assert_mentions(&e, &["-store.type:", "ZooKeeper", "not supported yet"]);
        let e = one_error(&with(&[], &["-store.type=zk"]));
        assert_mentions(&e, &["-store.type:", "not supported yet"]);
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
        for f in FLAGS {
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
            "storage.password",
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

    #[test]
    fn version_flag() {
        let Ok(Parsed::Version(v)) = parse(&args(&["-version"]), &test_env()) else {
            panic!("-version must give the version");
        };
        assert_eq!(
            v,
            format!("storage-scheduler {}", env!("CARGO_PKG_VERSION"))
        );
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
        for f in FLAGS {
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
}
