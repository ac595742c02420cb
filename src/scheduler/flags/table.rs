//! The flag table: the single source for parsing, validation lookups and `-help`.

use crate::contract::platform::{Component, DriverPackage, Platform};
use std::fmt::Write as _;
use std::sync::LazyLock;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    Value,
}

#[derive(Clone)]
pub(super) struct FlagDef {
    pub(super) name: &'static str,
    pub(super) group: &'static str,
    pub(super) kind: Kind,
    pub(super) hint: &'static str,
    /// As shown by -help; [`REQUIRED`] for required flags, "" for "not set".
    pub(super) default: &'static str,
    pub(super) help: &'static str,
}

pub(super) const REQUIRED: &str = "required";

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
const G_HEALTH: &str = "Storage health";
const G_ROLLOUT: &str = "Rollouts and upgrades";
const G_PACKAGES: &str =
    "Storage packages (URLs the executors download, each with its SHA-256; no default)";
const G_EXECUTOR: &str = "Executor resources";
const G_REXRAY: &str = "Volume driver";
const G_STORE: &str = "State store";

/// The rows before the storage packages' (generated per platform).
static HEAD: &[FlagDef] = &[
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
    flag!(G_REST, "rest.listen", "ip", "0.0.0.0",
        "IP address the REST server listens on (0.0.0.0: every IPv4 address, :: every address)"),
    flag!(G_REST, "rest.tls.cert", "path", "",
        "PEM file of the certificate (chain, leaf first) the REST server presents over TLS; give -rest.tls.key with it. Not given: a new self-signed certificate for -rest.address and this machine's hostname at each start, its key never written anywhere. Executors accept only this certificate (they get its SHA-256)"),
    flag!(G_REST, "rest.tls.key", "path", "",
        "PEM file of that certificate's private key (PKCS#8, PKCS#1 or SEC1); refused when group or others may read it"),
    flag!(G_REST, "rest.operator.token.file", "path", "",
        "File holding the operator API's bearer token (mode 0600, at least 16 characters; one trailing newline is ignored), else the environment variable STORAGE_OPERATOR_TOKEN. Without either, every operator write (pause, resume, node actions) answers 403"),
    flag!(G_STORAGE, "storage.password", "password", "",
        "Password of the storage gateway's admin user. Required from one of: -storage.password, -storage.password.file, or the environment variable STORAGE_PASSWORD (first given wins, in that order; giving both flags is an error). The file and the environment keep it out of process listings"),
    // The password off the command line.
    flag!(G_STORAGE, "storage.password.file", "path", "",
        "File holding the gateway password (one trailing newline is ignored)"),
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
    // Gateway TLS, start-up wait, capacity.
    flag!(G_STORAGE, "storage.gateway.fingerprint", "sha256:hex[,...]", "",
        "Accept only these gateway TLS certificates, by SHA-256 (a load balancer over several gateways shows several); default: the first one seen is trusted and kept"),
    flag!(G_STORAGE, "storage.gateway.cacert", "path", "",
        "PEM certificates to verify the gateway's against: the gateway's own self-signed one (accepted as it is), or the CA that signed it"),
    flag!(G_STORAGE, "storage.gateway.insecure", bool, "false",
        "Do not verify the gateway's TLS certificate at all"),
    flag!(G_STORAGE, "storage.wait", bool, "false",
        "When the gateway or a storage prerequisite is not ready at start, wait and retry instead of exiting with code 3"),
    flag!(G_HEALTH, "health.interval", "duration", "30",
        "How often the storage cluster's health and pool capacity are read from the gateway: seconds, or a number with unit s, m, h or d (-storage.capacity.interval is the same flag)"),
    flag!(G_HEALTH, "health.capacity.warn", "percent", "80",
        "A storage pool with more than this percent of its capacity in use is degraded (-storage.threshold is the same flag)"),
    flag!(G_HEALTH, "health.stale", "duration", "180",
        "Health data older than this (the gateway's last answered poll, a running executor's last contact) makes the cluster or the node unknown; must be longer than -health.interval. Not given: 180, or three -health.interval when that is longer"),
    flag!(G_ROLLOUT, "rollout.max-disrupted-per-domain", "count", "1",
        "Nodes of one protection domain that may be disrupted (a storage service stopped, a reboot) or not yet back at once; a disruptive step waits while the domain's data is degraded or rebuilding"),
];

/// The rows between the storage packages' and the volume driver's packages'.
static MIDDLE: &[FlagDef] = &[
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
        "Ignored, accepted so that earlier app definitions still start: it chose a REX-Ray release on Bintray, which is gone. Give the package URLs below instead"),
    flag!(G_REXRAY, "rexray.version", "version", "latest",
        "Ignored, like -rexray.branch"),
];

/// The rows after the volume driver's packages'.
static TAIL: &[FlagDef] = &[
    flag!(G_REXRAY, "rexray.username", "user", "",
        "Gateway user REX-Ray logs in as on every node: a user scoped to volume work, not the admin (whose password goes only to MDM nodes). Give it with -rexray.password; without both, REX-Ray's configuration has no credentials and every node shows a warning"),
    flag!(G_REXRAY, "rexray.password", "password", "",
        "Password of -rexray.username. From one of: -rexray.password, -rexray.password.file, or the environment variable REXRAY_PASSWORD (first given wins, in that order; giving both flags is an error)"),
    flag!(G_REXRAY, "rexray.password.file", "path", "",
        "File holding the -rexray.username password (one trailing newline is ignored)"),
    flag!(G_REXRAY, "isolator.binary", "url", "",
        "URL of the Mesos DVDI isolator module to install"),
    flag!(G_REXRAY, "isolator.sha256", "hex", "",
        "SHA-256 of the isolator module"),
    flag!(G_STORE, "store.type", "file|zk", "file",
        "Where the scheduler keeps its state: a journal file, or ZooKeeper"),
    flag!(G_STORE, "store.uri", "path", "$MESOS_SANDBOX/storage-scheduler-state.json, else ./storage-scheduler-state.json",
        "Location of the state: a file path, or zk://host:port,.../path (default path /storage-framework/<framework.name>)"),
    // Framework adoption and store helpers.
    flag!(G_STORE, "framework.id", "id", "",
        "With nothing stored: adopt this running framework instead of registering a new one"),
    flag!(G_STORE, "framework.new", bool, "false",
        "With nothing stored: register a new framework even if one of the same name and role is active"),
    flag!(G_STORE, "framework.guard", bool, "true",
        "With nothing stored: refuse to start unless the master's framework list shows no active framework of the same name and role (false: skip that check)"),
    flag!(G_STORE, "store.dump", bool, "false",
        "Print the stored state as JSON (secrets masked) and exit"),
    flag!(G_STORE, "store.delete", bool, "false",
        "Delete the stored state and exit (needs -yes)"),
    flag!(G_STORE, "yes", bool, "false",
        "Confirms -store.delete"),
    flag!(G_STORE, "store.import", "path", "",
        "Copy a state file into the ZooKeeper store given by -store.type=zk/-store.uri and exit"),
];

/// Every flag, in `-help` order: the fixed rows and, per platform profile, the package URL
/// flags (`-storage.<key>.<component>`, `-rexray.<key>.<package>[.sha256]`).
pub(super) static FLAGS: LazyLock<Vec<FlagDef>> = LazyLock::new(|| {
    let mut all: Vec<FlagDef> = HEAD.to_vec();
    all.extend(Platform::ALL.into_iter().flat_map(storage_package_flags));
    all.push(flag!(G_PACKAGES, UNVERIFIED, bool, "false",
        "Install packages given without their SHA-256 (storage, REX-Ray, dvdcli and the isolator) unchecked, with a start-up warning for each; without it such a package URL is an error"));
    all.push(flag!(G_PACKAGES, "storage.version", "version", DEFAULT_STORAGE_VERSION,
        "Version of the storage software the nodes run: a storage package given no URL must be installed at it already (else its node fails naming the package's flag). The release as the deployment spec writes it (2.0.1-2072, the package files' 2.0-10000.2072) or as the vendor's package files carry it"));
    all.extend_from_slice(MIDDLE);
    all.extend(
        Platform::ALL
            .into_iter()
            .enumerate()
            .flat_map(|(i, p)| driver_package_flags(p, i == 0)),
    );
    all.extend_from_slice(TAIL);
    all
});

/// Made once per process for the table, which lives as long.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The storage software version of the deployment spec (section 1, prerequisite 2).
pub(super) const DEFAULT_STORAGE_VERSION: &str = "2.0.1-2072";

/// The flag that lets a package URL go without its digest.
pub(super) const UNVERIFIED: &str = "storage.packages.unverified";

/// Each package's URL and its digest; the first platform's first digest flag says what a
/// digest is, the others do not repeat it.
fn storage_package_flags(p: Platform) -> Vec<FlagDef> {
    let prof = p.profile();
    let first = p == Platform::ALL[0];
    let mut out = Vec::new();
    for (i, c) in Component::ALL.into_iter().enumerate() {
        let name = leak(format!("storage.{}.{}", prof.key, c.key()));
        let help = leak(format!("{} package for {}", c.title(), prof.title));
        out.push(flag!(G_PACKAGES, name, "url", "", help));
        let note = if first && i == 0 {
            " (64 hex digits, as sha256sum prints it; the executor checks the download before installing it)"
        } else {
            ""
        };
        let sha = leak(format!("{name}.sha256"));
        let help = leak(format!(
            "SHA-256 of the {} package for {}{note}",
            c.title(),
            prof.title
        ));
        out.push(flag!(G_PACKAGES, sha, "hex", "", help));
    }
    out
}

/// The first platform's first digest flag says what a digest is; the others do not repeat it.
fn driver_package_flags(p: Platform, first: bool) -> Vec<FlagDef> {
    let prof = p.profile();
    let ext = prof.package_tool.file_extension();
    let mut out = Vec::new();
    for (i, d) in DriverPackage::ALL.into_iter().enumerate() {
        let name = leak(format!("rexray.{}.{}", prof.key, d.name()));
        let extra = match d {
            DriverPackage::Rexray => "",
            DriverPackage::Dvdcli => " (installed with the isolator)",
        };
        let help = leak(format!(
            "{} package ({ext}) for {}{extra}",
            d.title(),
            prof.title
        ));
        out.push(flag!(G_REXRAY, name, "url", "", help));
        let note = if first && i == 0 {
            " (64 hex digits; checked after download)"
        } else {
            ""
        };
        let sha = leak(format!("{name}.sha256"));
        let help = leak(format!(
            "SHA-256 of the {} package for {}{note}",
            d.title(),
            prof.title
        ));
        out.push(flag!(G_REXRAY, sha, "hex", "", help));
    }
    out
}

/// Flags that are checked but that this build does not act on yet; `-help` says so. None
/// today: the package flags and `-debug` are wired since the node work landed.
pub(super) const NOT_USED_YET: &[&str] = &[];

/// Earlier names of flags, still accepted: (as written, the flag's name).
pub(super) const RENAMED: &[(&str, &str)] = &[
    ("storage.capacity.interval", "health.interval"),
    ("storage.threshold", "health.capacity.warn"),
];

/// Canonical definition for a name as written (without dashes), resolving the aliases.
pub(super) fn lookup(name: &str) -> Option<&'static FlagDef> {
    let name = match name.strip_prefix("scaleio.") {
        Some(rest) => format!("storage.{rest}"),
        None => name.to_owned(),
    };
    let name = unalias_platform(name);
    let name = match RENAMED.iter().find(|(old, _)| *old == name) {
        Some((_, new)) => (*new).to_owned(),
        None => name,
    };
    FLAGS.iter().find(|f| f.name == name)
}

/// `<group>.<platform alias>.<rest>` as `<group>.<platform key>.<rest>`.
fn unalias_platform(name: String) -> String {
    for p in Platform::ALL {
        let prof = p.profile();
        for alias in prof.key_aliases {
            for group in ["storage", "rexray"] {
                if let Some(rest) = name.strip_prefix(&format!("{group}.{alias}.")) {
                    return format!("{group}.{}.{rest}", prof.key);
                }
            }
        }
    }
    name
}

pub(super) fn is_help(name: &str) -> bool {
    matches!(name, "help" | "h")
}

pub fn version_line() -> String {
    // The release tag and commit embedded by scripts/build-release.sh.
    crate::version::line("storage-scheduler")
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
         Every -storage.* flag may be written -scaleio.* (earlier ScaleIO framework);\n",
    );
    for p in Platform::ALL {
        for alias in p.profile().key_aliases {
            let _ = writeln!(
                out,
                "-storage.{alias}.* is the same as -storage.{}.*.",
                p.key()
            );
        }
    }
    let mut group = "";
    for f in FLAGS.iter() {
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
        let unused = if NOT_USED_YET.contains(&f.name) {
            " [checked, not used by this build yet]"
        } else {
            ""
        };
        let _ = writeln!(out, "  {syntax}\n      {}{default}{unused}", f.help);
    }
    out.push_str(
        "\nOther:\n  -help\n      Print this text and exit\n  -version\n      Print the version and exit\n",
    );
    out
}
