//! `storage-host-standin`: one binary standing in for the OS and storage tools an executor
//! runs (`dpkg`, `dpkg-query`, `apt-get`, `rpm`, `yum`, `scli`, `systemctl`, `service`,
//! `initctl`, `uname`, `reboot`, `shutdown`), chosen by the file name it is invoked under
//! (`storage-host-standin <command> args...` works too).
//!
//! It acts only on the fake root named by `STORAGE_HOST_ROOT` (see `devcluster::host` for the
//! contract and the layout) and refuses to run without one, so it can never change the real
//! machine. Output and exit statuses follow the real tools; where the real wording of a failure
//! is not known, the message is close in form and says what went wrong. The result of every run
//! (argv and status) is appended to the host's history.

use devcluster::host::{
    self, kernel_build, parse_deb_name, parse_rpm_name, password_hash, repository_package,
    Component, FakeRoot, HostProfile, HostState, Init, Invocation, Mdm, MdmCluster, MdmRole,
    Package, PackageFile, Packaging, Service, ServiceKind, CONTROL_ENV, ROOT_ENV, STANDIN_BIN,
    UBUNTU_SDC_KERNEL,
};
use std::io::{BufRead, Write};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

/// What a run prints, written out once the state is saved.
#[derive(Default)]
struct Io {
    out: String,
    err: String,
}

impl Io {
    fn out(&mut self, line: impl AsRef<str>) {
        self.out.push_str(line.as_ref());
        self.out.push('\n');
    }
    fn err(&mut self, line: impl AsRef<str>) {
        self.err.push_str(line.as_ref());
        self.err.push('\n');
    }
}

/// The environment of this run that the tools look at.
struct Env {
    mdm_ip: Option<String>,
    mdm_role_is_manager: Option<String>,
    token: Option<String>,
    gateway_password: Option<String>,
    control: Option<String>,
    /// Lines read from stdin before the state was locked (prompts, passwords).
    stdin: Vec<String>,
}

impl Env {
    fn from_process() -> Env {
        let var = |k: &str| std::env::var(k).ok();
        Env {
            mdm_ip: var("MDM_IP"),
            mdm_role_is_manager: var("MDM_ROLE_IS_MANAGER"),
            token: var("TOKEN").filter(|t| !t.is_empty()),
            gateway_password: var("GATEWAY_ADMIN_PASSWORD").filter(|t| !t.is_empty()),
            control: var(CONTROL_ENV).filter(|c| !c.is_empty()),
            stdin: Vec::new(),
        }
    }
}

/// What must happen after the state is saved and unlocked.
enum After {
    Reboot,
    PowerOff,
}

struct Outcome {
    status: i32,
    after: Option<After>,
}

fn done(status: i32) -> Outcome {
    Outcome {
        status,
        after: None,
    }
}

struct Ctx<'a> {
    root: &'a FakeRoot,
    env: &'a Env,
    io: Io,
}

fn main() {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let invoked = args
        .first()
        .map(|a| {
            Path::new(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let (cmd, rest) = if invoked == STANDIN_BIN {
        match args.get(1) {
            Some(c) => (c.clone(), args[2..].to_vec()),
            None => {
                eprintln!("usage: {STANDIN_BIN} <command> [args...] (or invoke it through a symlink named after the command)");
                std::process::exit(2);
            }
        }
    } else {
        (invoked, args.get(1..).unwrap_or_default().to_vec())
    };
    let status = run(&cmd, &rest);
    std::process::exit(status);
}

fn run(cmd: &str, args: &[String]) -> i32 {
    let Some(root_dir) = std::env::var_os(ROOT_ENV) else {
        eprintln!(
            "{cmd}: devcluster stand-in: {ROOT_ENV} is not set; refusing to act on the real host"
        );
        return 2;
    };
    let root = match FakeRoot::open(Path::new(&root_dir)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{cmd}: devcluster stand-in: {ROOT_ENV}: {e}");
            return 2;
        }
    };
    if !host::COMMANDS.contains(&cmd) {
        eprintln!("{STANDIN_BIN}: {cmd:?} is not a command it stands in for");
        return 2;
    }
    let mut env = Env::from_process();
    env.stdin = read_answers(cmd, args);
    let mut argv = vec![cmd.to_string()];
    argv.extend(args.iter().cloned());
    let mut ctx = Ctx {
        root: &root,
        env: &env,
        io: Io::default(),
    };
    if cmd == "scli" {
        if let Some(status) = remote_scli(&root, args, &argv, &mut ctx) {
            flush(&ctx.io);
            return status;
        }
    }
    let outcome = root.update(|state| {
        let outcome = if available(cmd, state) {
            dispatch(cmd, args, state, &mut ctx)
        } else {
            ctx.io.err(format!("{cmd}: command not found"));
            done(127)
        };
        state.history.push(Invocation {
            argv: argv.clone(),
            status: outcome.status,
        });
        outcome
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{cmd}: devcluster stand-in: {e}");
            return 2;
        }
    };
    flush(&ctx.io);
    let Some(after) = outcome.after else {
        return outcome.status;
    };
    match power(&root, &env, after) {
        Ok(()) => outcome.status,
        Err(e) => {
            eprintln!("{cmd}: {e}");
            let _ = root.update(|s| {
                if let Some(last) = s.history.iter_mut().rev().find(|i| i.argv == argv) {
                    last.status = 1;
                }
            });
            1
        }
    }
}

fn flush(io: &Io) {
    let _ = std::io::stdout().lock().write_all(io.out.as_bytes());
    let _ = std::io::stderr().lock().write_all(io.err.as_bytes());
}

/// Stdin is read before the state is locked, so that a blocked reader cannot hold the lock:
/// confirmation prompts (no `-y`) and scli passwords not given as options.
fn read_answers(cmd: &str, args: &[String]) -> Vec<String> {
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let wanted = match cmd {
        "apt-get" if !args.iter().any(|a| assume_yes_apt(a)) && has("install") => 1,
        "yum" if !args.iter().any(|a| a == "-y" || a == "--assumeyes") && has("install") => 1,
        "scli" if has("--login") && !args.iter().any(|a| a.starts_with("--password")) => 1,
        "scli" if has("--set_password") => {
            usize::from(!args.iter().any(|a| a.starts_with("--old_password")))
                + usize::from(!args.iter().any(|a| a.starts_with("--new_password")))
        }
        _ => 0,
    };
    let stdin = std::io::stdin();
    let mut lines = Vec::new();
    for _ in 0..wanted {
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(n) if n > 0 => lines.push(line.trim_end_matches(['\r', '\n']).to_string()),
            _ => break,
        }
    }
    lines
}

fn assume_yes_apt(a: &str) -> bool {
    matches!(a, "-y" | "--yes" | "--assume-yes")
        || (a.starts_with('-') && !a.starts_with("--") && a.contains('y'))
}

/// Whether the simulated OS has the command at all.
fn available(cmd: &str, state: &HostState) -> bool {
    let deb = state.profile.packaging() == Packaging::Deb;
    match cmd {
        "dpkg" | "dpkg-query" | "apt-get" => deb,
        "rpm" | "yum" => !deb,
        "initctl" => state.profile.init() == Init::Upstart,
        "systemctl" => state.profile.init() == Init::Systemd,
        "scli" => state
            .packages
            .iter()
            .any(|(n, p)| Component::of_package(n) == Some(Component::Mdm) && p.installed()),
        _ => true,
    }
}

fn dispatch(cmd: &str, args: &[String], state: &mut HostState, ctx: &mut Ctx) -> Outcome {
    match cmd {
        "uname" => done(uname(args, state, &mut ctx.io)),
        "dpkg-query" => done(dpkg_query(args, state, &mut ctx.io)),
        "dpkg" => done(dpkg(args, state, ctx)),
        "apt-get" => done(apt_get(args, state, ctx)),
        "rpm" => done(rpm(args, state, ctx)),
        "yum" => done(yum(args, state, ctx)),
        "systemctl" => done(systemctl(args, state, &mut ctx.io)),
        "service" => done(service(args, state, &mut ctx.io)),
        "initctl" => done(initctl(args, state, &mut ctx.io)),
        "scli" => done(scli(args, state, ctx)),
        "reboot" => reboot(args, &mut ctx.io),
        "shutdown" => shutdown(args, state, &mut ctx.io),
        _ => {
            ctx.io.err(format!("{cmd}: command not found"));
            done(127)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// uname

fn uname(args: &[String], state: &HostState, io: &mut Io) -> i32 {
    // Field order is fixed whatever the order of the options: s n r v m p i o.
    let mut want = [false; 8];
    for a in args {
        if let Some(long) = a.strip_prefix("--") {
            let i = match long {
                "all" => {
                    want = [true; 8];
                    continue;
                }
                "kernel-name" => 0,
                "nodename" => 1,
                "kernel-release" => 2,
                "kernel-version" => 3,
                "machine" => 4,
                "processor" => 5,
                "hardware-platform" => 6,
                "operating-system" => 7,
                _ => {
                    io.err(format!("uname: unrecognized option '{a}'"));
                    io.err("Try 'uname --help' for more information.");
                    return 1;
                }
            };
            want[i] = true;
        } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            for c in short.chars() {
                let i = match c {
                    'a' => {
                        want = [true; 8];
                        continue;
                    }
                    's' => 0,
                    'n' => 1,
                    'r' => 2,
                    'v' => 3,
                    'm' => 4,
                    'p' => 5,
                    'i' => 6,
                    'o' => 7,
                    _ => {
                        io.err(format!("uname: invalid option -- '{c}'"));
                        io.err("Try 'uname --help' for more information.");
                        return 1;
                    }
                };
                want[i] = true;
            }
        } else {
            io.err(format!("uname: extra operand '{a}'"));
            io.err("Try 'uname --help' for more information.");
            return 1;
        }
    }
    if !want.iter().any(|w| *w) {
        want[0] = true;
    }
    let fields = [
        "Linux",
        state.hostname.as_str(),
        state.running_kernel.as_str(),
        kernel_build(&state.running_kernel),
        "x86_64",
        "x86_64",
        "x86_64",
        "GNU/Linux",
    ];
    let line: Vec<&str> = fields
        .iter()
        .zip(want)
        .filter(|(_, w)| *w)
        .map(|(f, _)| *f)
        .collect();
    io.out(line.join(" "));
    0
}

// ---------------------------------------------------------------------------------------------
// Debian tools

/// `*` and `?` as dpkg-query patterns use them.
fn glob(pattern: &str, name: &str) -> bool {
    fn rec(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => rec(&p[1..], n) || (!n.is_empty() && rec(p, &n[1..])),
            (Some(b'?'), Some(_)) => rec(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => rec(&p[1..], &n[1..]),
            _ => false,
        }
    }
    rec(pattern.as_bytes(), name.as_bytes())
}

fn status_abbrev(p: &Package) -> &'static str {
    match p.status.as_str() {
        "install ok installed" => "ii ",
        "install ok half-configured" => "iF ",
        "install ok unpacked" => "iU ",
        _ => "un ",
    }
}

fn describe(name: &str) -> String {
    match Component::of_package(name) {
        Some(Component::Mdm) => "ScaleIO Meta Data Manager".into(),
        Some(Component::Sds) => "ScaleIO Data Server".into(),
        Some(Component::Sdc) => "ScaleIO Data Client".into(),
        Some(Component::Lia) => "ScaleIO Light Installation Agent".into(),
        Some(Component::Gateway) => "ScaleIO Gateway".into(),
        None if name.starts_with("linux-image-") => "Linux kernel image".into(),
        None => format!("{name} package"),
    }
}

/// Expands a dpkg-query `--showformat`.
fn dpkg_format(fmt: &str, name: &str, p: &Package) -> String {
    let mut out = String::new();
    let mut rest = fmt;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("${") {
            if let Some(end) = after.find('}') {
                let field = after[..end].split(';').next().unwrap_or("");
                let value = match field {
                    "Package" | "binary:Package" => name.to_string(),
                    "Version" => p.version.clone(),
                    "Status" => p.status.clone(),
                    "db:Status-Abbrev" => status_abbrev(p).to_string(),
                    "Architecture" => p.arch.clone(),
                    "Installed-Size" => "1024".to_string(),
                    "Maintainer" => "devcluster <devcluster@localhost>".to_string(),
                    "binary:Summary" | "Description" => describe(name),
                    _ => String::new(),
                };
                out.push_str(&value);
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('\\') {
            match after.chars().next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some(c) => {
                    out.push('\\');
                    out.push(c);
                }
                None => out.push('\\'),
            }
            rest = after.get(1..).unwrap_or("");
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn dpkg_status_stanza(name: &str, p: &Package) -> String {
    format!(
        "Package: {name}\nStatus: {}\nPriority: optional\nSection: misc\nInstalled-Size: 1024\n\
         Maintainer: devcluster <devcluster@localhost>\nArchitecture: {}\nVersion: {}\n\
         Description: {}\n",
        p.status,
        p.arch,
        p.version,
        describe(name)
    )
}

fn dpkg_query(args: &[String], state: &HostState, io: &mut Io) -> i32 {
    let mut action = None;
    let mut format = None;
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-W" | "--show" => action = Some('W'),
            "-s" | "--status" => action = Some('s'),
            "-l" | "--list" => action = Some('l'),
            "-f" | "--showformat" => match it.next() {
                Some(f) => format = Some(f.clone()),
                None => {
                    io.err(format!("dpkg-query: error: option '{a}' needs a value"));
                    return 2;
                }
            },
            s if s.starts_with("--showformat=") => {
                format = Some(s["--showformat=".len()..].to_string())
            }
            s if s.starts_with("-f") && s.len() > 2 => format = Some(s[2..].to_string()),
            s if s.starts_with('-') => {
                io.err(format!("dpkg-query: error: unknown option {s}"));
                io.err("");
                io.err("Use --help for help about querying packages.");
                return 2;
            }
            s => names.push(s.to_string()),
        }
    }
    match action {
        Some('W') => {
            let fmt = format.unwrap_or_else(|| "${binary:Package}\\t${Version}\\n".to_string());
            let mut status = 0;
            let patterns = if names.is_empty() {
                vec!["*".to_string()]
            } else {
                names
            };
            for pat in &patterns {
                let matched: Vec<(&String, &Package)> = state
                    .packages
                    .iter()
                    .filter(|(n, _)| glob(pat, n))
                    .collect();
                if matched.is_empty() {
                    io.err(format!("dpkg-query: no packages found matching {pat}"));
                    status = 1;
                }
                for (n, p) in matched {
                    io.out.push_str(&dpkg_format(&fmt, n, p));
                }
            }
            status
        }
        Some('s') => {
            if names.is_empty() {
                io.err("dpkg-query: error: --status needs at least one package name argument");
                io.err("");
                io.err("Use --help for help about querying packages.");
                return 2;
            }
            let mut missing = false;
            for (i, n) in names.iter().enumerate() {
                match state.packages.get(n) {
                    Some(p) => {
                        if i > 0 {
                            io.out("");
                        }
                        io.out.push_str(&dpkg_status_stanza(n, p));
                    }
                    None => {
                        io.err(format!(
                            "dpkg-query: package '{n}' is not installed and no information is available"
                        ));
                        missing = true;
                    }
                }
            }
            if missing {
                io.err("Use dpkg --info (= dpkg-deb --info) to examine archive files,");
                io.err("and dpkg --contents (= dpkg-deb --contents) to list their contents.");
                1
            } else {
                0
            }
        }
        Some(_) => {
            let patterns = if names.is_empty() {
                vec!["*".to_string()]
            } else {
                names
            };
            let mut rows = Vec::new();
            let mut status = 0;
            for pat in &patterns {
                let matched: Vec<(&String, &Package)> = state
                    .packages
                    .iter()
                    .filter(|(n, _)| glob(pat, n))
                    .collect();
                if matched.is_empty() {
                    io.err(format!("dpkg-query: no packages found matching {pat}"));
                    status = 1;
                }
                rows.extend(matched);
            }
            if !rows.is_empty() {
                io.out("Desired=Unknown/Install/Remove/Purge/Hold");
                io.out("| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend");
                io.out("|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)");
                io.out("||/ Name                           Version                  Architecture Description");
                io.out("+++-==============================-========================-============-===============================");
                for (n, p) in rows {
                    io.out(format!(
                        "{} {:<30} {:<24} {:<12} {}",
                        status_abbrev(p),
                        n,
                        p.version,
                        p.arch,
                        describe(n)
                    ));
                }
            }
            status
        }
        None => {
            io.err("dpkg-query: error: need an action option");
            io.err("");
            io.err("Use --help for help about querying packages.");
            2
        }
    }
}

fn files_in_db(state: &HostState) -> usize {
    57118 + 97 * state.packages.len()
}

/// `.../<file name>` as dpkg abbreviates archive paths.
fn archive_display(path: &str) -> String {
    match Path::new(path).file_name() {
        Some(f) if path.contains('/') => format!(".../{}", f.to_string_lossy()),
        _ => path.to_string(),
    }
}

fn dpkg(args: &[String], state: &mut HostState, ctx: &mut Ctx) -> i32 {
    let Some(first) = args.first() else {
        dpkg_needs_action(&mut ctx.io);
        return 2;
    };
    match first.as_str() {
        "-s" | "--status" | "-l" | "--list" | "-W" | "--show" => {
            dpkg_query(args, state, &mut ctx.io)
        }
        "-i" | "--install" => {
            let files = &args[1..];
            if files.is_empty() {
                ctx.io
                    .err("dpkg: error: --install needs at least one package archive file argument");
                return 2;
            }
            let mut failed = Vec::new();
            for f in files {
                if !dpkg_install(f, state, ctx) {
                    failed.push(f.clone());
                }
            }
            errors_encountered(&mut ctx.io, &failed)
        }
        "-r" | "--remove" | "-P" | "--purge" => {
            for name in &args[1..] {
                match state.packages.remove(name) {
                    Some(p) => {
                        ctx.io.out(format!(
                            "(Reading database ... {} files and directories currently installed.)",
                            files_in_db(state)
                        ));
                        ctx.io.out(format!("Removing {name} ({}) ...", p.version));
                        if let Some(c) = Component::of_package(name) {
                            state.services.remove(c.service());
                        }
                    }
                    None => ctx.io.err(format!(
                        "dpkg: warning: ignoring request to remove {name} which isn't installed"
                    )),
                }
            }
            0
        }
        "--configure" => {
            let names: Vec<String> = if args.get(1).map(String::as_str) == Some("-a")
                || args.get(1).map(String::as_str) == Some("--pending")
            {
                state
                    .packages
                    .iter()
                    .filter(|(_, p)| !p.installed())
                    .map(|(n, _)| n.clone())
                    .collect()
            } else {
                args[1..].to_vec()
            };
            let mut failed = Vec::new();
            for name in names {
                let Some(p) = state.packages.get(&name).cloned() else {
                    ctx.io.err(format!("dpkg: error processing package {name} (--configure):\n package {name} is not installed and no information is available"));
                    failed.push(name);
                    continue;
                };
                if p.installed() {
                    ctx.io.err(format!("dpkg: error processing package {name} (--configure):\n package {name} is already installed and configured"));
                    failed.push(name);
                    continue;
                }
                if !deb_configure(&name, state, ctx, "--configure") {
                    failed.push(name);
                }
            }
            errors_encountered(&mut ctx.io, &failed)
        }
        _ => {
            dpkg_needs_action(&mut ctx.io);
            2
        }
    }
}

fn dpkg_needs_action(io: &mut Io) {
    io.err("dpkg: error: need an action option");
    io.err("");
    io.err("Type dpkg --help for help about installing and deinstalling packages [*];");
    io.err("Use 'apt' or 'aptitude' for user-friendly package management;");
}

fn errors_encountered(io: &mut Io, failed: &[String]) -> i32 {
    if failed.is_empty() {
        return 0;
    }
    io.err("Errors were encountered while processing:");
    for f in failed {
        io.err(format!(" {f}"));
    }
    1
}

/// Checks the archive exists and is a package of this platform; an error is what the real
/// tool prints about it.
fn read_archive(path: &str, packaging: Packaging) -> Result<PackageFile, &'static str> {
    let meta = std::fs::metadata(path).map_err(|_| "missing")?;
    let name = Path::new(path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parsed = match packaging {
        Packaging::Deb => parse_deb_name(&name),
        Packaging::Rpm => parse_rpm_name(&name),
    };
    match parsed {
        Some(p) if meta.is_file() && meta.len() > 0 => Ok(p),
        _ => Err("foreign"),
    }
}

fn dpkg_install(path: &str, state: &mut HostState, ctx: &mut Ctx) -> bool {
    let file = match read_archive(path, Packaging::Deb) {
        Ok(f) => f,
        Err("missing") => {
            ctx.io.err(format!(
                "dpkg: error processing archive {path} (--install):"
            ));
            ctx.io
                .err(" cannot access archive: No such file or directory");
            return false;
        }
        Err(_) => {
            ctx.io.err(format!(
                "dpkg-deb: error: '{path}' is not a debian format archive"
            ));
            ctx.io.err(format!(
                "dpkg: error processing archive {path} (--install):"
            ));
            ctx.io
                .err(" subprocess dpkg-deb --control returned error exit status 2");
            return false;
        }
    };
    let name = file.name.clone();
    let component = Component::of_package(&name);
    let previous = state.packages.get(&name).cloned();
    if previous.is_none() {
        ctx.io
            .out(format!("Selecting previously unselected package {name}."));
    }
    ctx.io.out(format!(
        "(Reading database ... {} files and directories currently installed.)",
        files_in_db(state)
    ));
    ctx.io
        .out(format!("Preparing to unpack {} ...", archive_display(path)));
    if let Err(e) = preinst(component, ctx.env) {
        ctx.io.err(e);
        ctx.io.err(format!(
            "dpkg: error processing archive {path} (--install):"
        ));
        ctx.io
            .err(" subprocess new pre-installation script returned error exit status 1");
        return false;
    }
    match &previous {
        Some(p) => ctx.io.out(format!(
            "Unpacking {name} ({}) over ({}) ...",
            file.version, p.version
        )),
        None => ctx
            .io
            .out(format!("Unpacking {name} ({}) ...", file.version)),
    }
    state.packages.insert(
        name.clone(),
        Package {
            version: file.version.clone(),
            release: None,
            arch: file.arch.clone(),
            status: "install ok unpacked".into(),
        },
    );
    if let Some(dep) = component.and_then(|c| missing_dependency(c, state)) {
        ctx.io.err(format!(
            "dpkg: dependency problems prevent configuration of {name}:"
        ));
        ctx.io.err(format!(" {name} depends on {dep}; however:"));
        ctx.io.err(format!("  Package {dep} is not installed."));
        ctx.io.err("");
        ctx.io.err(format!(
            "dpkg: error processing package {name} (--install):"
        ));
        ctx.io.err(" dependency problems - leaving unconfigured");
        return false;
    }
    deb_configure(&name, state, ctx, "--install")
}

/// Runs the post-installation of an unpacked Debian package.
fn deb_configure(name: &str, state: &mut HostState, ctx: &mut Ctx, action: &str) -> bool {
    let Some(version) = state.packages.get(name).map(|p| p.version.clone()) else {
        return false;
    };
    ctx.io.out(format!("Setting up {name} ({version}) ..."));
    let result = match Component::of_package(name) {
        Some(c) => postinst(c, state, ctx),
        None => devcluster::volume_driver::postinst(name, state, ctx.root),
    };
    let status = match &result {
        Ok(()) => "install ok installed",
        Err(_) => "install ok half-configured",
    };
    if let Some(p) = state.packages.get_mut(name) {
        p.status = status.into();
    }
    match result {
        Ok(()) => {
            if state.profile.init() == Init::Upstart
                && matches!(
                    Component::of_package(name),
                    Some(Component::Mdm | Component::Sds | Component::Lia)
                )
            {
                ctx.io
                    .out("Processing triggers for ureadahead (0.100.0-16) ...");
            }
            true
        }
        Err(e) => {
            ctx.io.err(e);
            ctx.io
                .err(format!("dpkg: error processing package {name} ({action}):"));
            ctx.io
                .err(" subprocess installed post-installation script returned error exit status 1");
            false
        }
    }
}

/// What a storage package needs installed first (the prerequisites of host-steps section 3).
fn missing_dependency(c: Component, state: &HostState) -> Option<&'static str> {
    let libaio = match state.profile.packaging() {
        Packaging::Deb => "libaio1",
        Packaging::Rpm => "libaio",
    };
    let needs = matches!(c, Component::Mdm | Component::Sds);
    (needs && state.installed(libaio).is_none()).then_some(libaio)
}

/// Checks made before anything is unpacked.
fn preinst(c: Option<Component>, env: &Env) -> Result<(), String> {
    if c == Some(Component::Gateway) && env.gateway_password.is_none() {
        return Err(
            "GATEWAY_ADMIN_PASSWORD must be set in the environment to install the gateway".into(),
        );
    }
    Ok(())
}

/// Effects of a storage package's installation scripts; the message on failure is what the
/// script prints. Installed over an installed version (`dpkg -i`, `rpm -Uvh`), the old
/// package's scripts stop its service first and the new one starts it again, as the real
/// packages do: the stop and the start are in the host's command log, and the service runs
/// as a new process. A first install only starts it.
fn postinst(c: Component, state: &mut HostState, ctx: &mut Ctx) -> Result<(), String> {
    let root = ctx.root;
    let upstart = state.profile.init() == Init::Upstart;
    let service = c.service();
    let replacing = state.services.contains_key(service);
    if replacing {
        script_service(state, "stop", service, &mut ctx.io);
    }
    match c {
        Component::Mdm => {
            let manager = ctx.env.mdm_role_is_manager.as_deref() == Some("1");
            state.mdm_role = Some(if manager {
                MdmRole::Manager
            } else {
                MdmRole::TieBreaker
            });
            root.write(
                "opt/emc/scaleio/mdm/cfg/conf.txt",
                &format!("actor_role_is_manager={}\n", u8::from(manager)),
            )?;
        }
        Component::Sds => root.write(
            "opt/emc/scaleio/sds/cfg/conf.txt",
            "tgt_net__recv_buffer=4096\n",
        )?,
        Component::Sdc => {
            if state.profile == HostProfile::Ubuntu1404 && state.running_kernel != UBUNTU_SDC_KERNEL
            {
                return Err(format!(
                    "Failed configuring module: no scini driver for kernel {} (this SDC supports {UBUNTU_SDC_KERNEL})",
                    state.running_kernel
                ));
            }
            let mut cfg = String::from("# ScaleIO SDC configuration\n");
            if let Some(ips) = &ctx.env.mdm_ip {
                for ip in ips.split(',') {
                    if ip.trim().parse::<Ipv4Addr>().is_err() {
                        return Err(format!(
                            "Invalid MDM_IP {ips:?}: {ip:?} is not an IPv4 address"
                        ));
                    }
                }
                cfg.push_str(&format!("mdm {ips}\n"));
            }
            root.write("bin/emc/scaleio/drv_cfg.txt", &cfg)?;
            root.mkdir("sys/module/scini")?;
            state.sdc_mdm_ips = ctx.env.mdm_ip.clone();
            // The running SDC registers with the cluster its MDM_IP names (gateway's Sdc list).
            if let (Some(agent), Some(ips), Some(_)) =
                (state.agent, &ctx.env.mdm_ip, &ctx.env.control)
            {
                let path = format!("/control/gateway/sdc?agent={agent}&mdm={ips}");
                if let Ok((status, body)) = control_post(ctx.env, &path) {
                    if status != 200 {
                        log_sdc_refusal(status, &body);
                    }
                }
            }
        }
        Component::Lia => {
            state.lia_token_set = ctx.env.token.is_some();
            root.write("opt/emc/scaleio/lia/cfg/conf.txt", "lia_port=9099\n")?;
        }
        Component::Gateway => {
            state.gateway_admin_password_set = ctx.env.gateway_password.is_some();
            root.write(
                "opt/emc/scaleio/gateway/webapps/ROOT/WEB-INF/classes/gatewayUser.properties",
                "mdm.ip.addresses=\nmdm.port=6611\nsecurity.bypass_certificate_check=false\n\
                 vmware-mode=false\nfeatures.enable_gateway=true\nfeatures.enable_IM=true\n",
            )?;
        }
    }
    let kind = match (c, upstart) {
        (Component::Sdc | Component::Gateway, true) => ServiceKind::SysV,
        (_, true) => ServiceKind::Upstart,
        (_, false) => ServiceKind::Systemd,
    };
    let restarted = state.services.get(service).map_or(0, |s| s.restarts + 1);
    state.add_service(service, kind);
    if let Some(s) = state.services.get_mut(service) {
        s.restarts = restarted;
    }
    if replacing {
        log_script_command(state, "start", service);
    }
    let pid = state.services.get(service).and_then(|s| s.pid).unwrap_or(0);
    match (c, kind) {
        (Component::Gateway, _) => ctx.io.out("The EMC ScaleIO Gateway is running"),
        (Component::Sdc, ServiceKind::Systemd) => {
            ctx.io.out(systemd_symlink(state.profile, service));
            ctx.io.out("Starting scini: [  OK  ]");
        }
        (Component::Sdc, _) => {
            ctx.io.out("Success configuring module");
            ctx.io.out(" * Starting scini ...   [ OK ]");
        }
        (_, ServiceKind::Upstart) => ctx
            .io
            .out(format!("{service} start/running, process {pid}")),
        _ => ctx.io.out(systemd_symlink(state.profile, service)),
    }
    Ok(())
}

/// A maintainer script stops `service` with the host's service tool (`systemctl stop sds`,
/// `service sds stop`); logged like any command it runs.
fn script_service(state: &mut HostState, verb: &str, service: &str, io: &mut Io) {
    if let Some(s) = state.services.get_mut(service) {
        if s.running && s.kind == ServiceKind::Upstart {
            io.out(format!("{service} stop/waiting"));
        }
        s.running = false;
        s.pid = None;
    }
    log_script_command(state, verb, service);
}

fn log_script_command(state: &mut HostState, verb: &str, service: &str) {
    let argv = match state.profile.init() {
        Init::Systemd => vec![
            "systemctl".to_string(),
            verb.to_string(),
            service.to_string(),
        ],
        Init::Upstart => vec!["service".to_string(), service.to_string(), verb.to_string()],
    };
    state.history.push(Invocation { argv, status: 0 });
}

fn systemd_symlink(profile: HostProfile, unit: &str) -> String {
    let lib = if profile.packaging() == Packaging::Rpm {
        "/usr/lib/systemd/system"
    } else {
        "/lib/systemd/system"
    };
    format!("Created symlink from /etc/systemd/system/multi-user.target.wants/{unit}.service to {lib}/{unit}.service.")
}

fn apt_get(args: &[String], state: &mut HostState, ctx: &mut Ctx) -> i32 {
    let mut yes = false;
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-o" || a == "-c" || a == "-t" {
            it.next();
        } else if a.starts_with('-') {
            yes |= assume_yes_apt(a);
        } else {
            words.push(a.clone());
        }
    }
    let Some((command, names)) = words.split_first() else {
        ctx.io.err("E: Invalid operation ");
        return 100;
    };
    match command.as_str() {
        "update" => {
            ctx.io.out("Hit http://archive.ubuntu.com trusty InRelease");
            ctx.io.out("Reading package lists...");
            0
        }
        "install" => {
            ctx.io.out("Reading package lists...");
            ctx.io.out("Building dependency tree...");
            ctx.io.out("Reading state information...");
            let mut new = Vec::new();
            for n in names {
                match repository_package(state.profile, n) {
                    None => {
                        ctx.io.err(format!("E: Unable to locate package {n}"));
                        return 100;
                    }
                    Some(p) => {
                        if state.installed(n).is_some() {
                            ctx.io.out(format!("{n} is already the newest version."));
                        } else if !new.iter().any(|q: &host::RepoPackage| q.name == *n) {
                            new.push(p);
                        }
                    }
                }
            }
            if !new.is_empty() {
                ctx.io.out("The following NEW packages will be installed:");
                let list: Vec<&str> = new.iter().map(|p| p.name.as_str()).collect();
                ctx.io.out(format!("  {}", list.join(" ")));
            }
            ctx.io.out(format!(
                "0 upgraded, {} newly installed, 0 to remove and 0 not upgraded.",
                new.len()
            ));
            if new.is_empty() {
                return 0;
            }
            ctx.io
                .out(format!("Need to get {} kB of archives.", 120 * new.len()));
            if !yes {
                ctx.io.out.push_str("Do you want to continue? [Y/n] ");
                match ctx.env.stdin.first().map(|s| s.trim().to_ascii_lowercase()) {
                    Some(a) if a.is_empty() || a == "y" || a == "yes" => ctx.io.out(""),
                    _ => {
                        ctx.io.out("Abort.");
                        return 1;
                    }
                }
            }
            for p in &new {
                ctx.io.out(format!(
                    "Selecting previously unselected package {}.",
                    p.name
                ));
                ctx.io.out(format!(
                    "(Reading database ... {} files and directories currently installed.)",
                    files_in_db(state)
                ));
                ctx.io.out(format!(
                    "Preparing to unpack .../{}_{}_amd64.deb ...",
                    p.name, p.version
                ));
                ctx.io
                    .out(format!("Unpacking {} ({}) ...", p.name, p.version));
                state.packages.insert(
                    p.name.clone(),
                    Package {
                        version: p.version.clone(),
                        release: None,
                        arch: "amd64".into(),
                        status: "install ok installed".into(),
                    },
                );
            }
            for p in &new {
                ctx.io
                    .out(format!("Setting up {} ({}) ...", p.name, p.version));
                if let Some(k) = &p.kernel {
                    if let Err(e) = install_kernel(k, state, ctx) {
                        ctx.io.err(format!("E: {e}"));
                        return 100;
                    }
                }
            }
            0
        }
        other => {
            ctx.io.err(format!("E: Invalid operation {other}"));
            100
        }
    }
}

/// A new kernel image: its files, and GRUB's default for the next boot.
fn install_kernel(release: &str, state: &mut HostState, ctx: &mut Ctx) -> Result<(), String> {
    ctx.root.install_kernel_files(release)?;
    ctx.io.out("Running depmod.");
    ctx.io
        .out("update-initramfs: deferring update (hook will be called later)");
    ctx.io.out("Examining /etc/kernel/postinst.d.");
    ctx.io.out(format!(
        "update-initramfs: Generating /boot/initrd.img-{release}"
    ));
    ctx.io.out("Generating grub configuration file ...");
    ctx.io
        .out(format!("Found linux image: /boot/vmlinuz-{release}"));
    ctx.io
        .out(format!("Found initrd image: /boot/initrd.img-{release}"));
    if release != state.running_kernel {
        ctx.io.out(format!(
            "Found linux image: /boot/vmlinuz-{}",
            state.running_kernel
        ));
        ctx.io.out(format!(
            "Found initrd image: /boot/initrd.img-{}",
            state.running_kernel
        ));
    }
    ctx.io.out("done");
    state.pending_kernel = Some(release.to_string());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// RPM tools

fn nevra(name: &str, p: &Package) -> String {
    format!("{name}-{}.{}", p.full_version(), p.arch)
}

/// rpmvercmp: alternating numeric and alphabetic segments, numbers compared as numbers.
fn rpm_vercmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn segments(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut digit = None;
        for c in s.chars() {
            if !c.is_ascii_alphanumeric() {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                digit = None;
                continue;
            }
            let d = c.is_ascii_digit();
            if digit.is_some_and(|x| x != d) && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            digit = Some(d);
            cur.push(c);
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }
    let (sa, sb) = (segments(a), segments(b));
    for (x, y) in sa.iter().zip(&sb) {
        let xd = x.bytes().all(|c| c.is_ascii_digit());
        let yd = y.bytes().all(|c| c.is_ascii_digit());
        let ord = match (xd, yd) {
            (true, true) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => x.cmp(y),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    sa.len().cmp(&sb.len())
}

fn rpm_format(fmt: &str, name: &str, p: &Package) -> String {
    let mut out = String::new();
    let mut rest = fmt;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("%{") {
            if let Some(end) = after.find('}') {
                let value = match after[..end].to_ascii_uppercase().as_str() {
                    "NAME" => name.to_string(),
                    "VERSION" => p.version.clone(),
                    "RELEASE" => p.release.clone().unwrap_or_default(),
                    "ARCH" => p.arch.clone(),
                    "EPOCH" => "(none)".to_string(),
                    "SUMMARY" => describe(name),
                    _ => "(none)".to_string(),
                };
                out.push_str(&value);
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('\\') {
            match after.chars().next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c) => out.push(c),
                None => {}
            }
            rest = after.get(1..).unwrap_or("");
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn rpm_info(name: &str, p: &Package) -> String {
    format!(
        "Name        : {name}\nVersion     : {}\nRelease     : {}\nArchitecture: {}\n\
         Install Date: Mon 08 Jan 2018 10:00:00 AM UTC\nGroup       : Applications/System\n\
         Size        : 1048576\nLicense     : Proprietary\nSignature   : (none)\n\
         Source RPM  : {name}-{}.src.rpm\nBuild Date  : Tue 07 Mar 2017 09:00:00 AM UTC\n\
         Build Host  : build.devcluster\nRelocations : (not relocatable)\nSummary     : {}\n\
         Description :\n{}\n",
        p.version,
        p.release.as_deref().unwrap_or(""),
        p.arch,
        p.full_version(),
        describe(name),
        describe(name),
    )
}

fn rpm(args: &[String], state: &mut HostState, ctx: &mut Ctx) -> i32 {
    let mut letters = String::new();
    let mut format = None;
    let mut operands = Vec::new();
    let mut long = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--qf" || a == "--queryformat" {
            format = it.next().cloned();
        } else if let Some(f) = a.strip_prefix("--queryformat=").or(a.strip_prefix("--qf=")) {
            format = Some(f.to_string());
        } else if let Some(l) = a.strip_prefix("--") {
            long.push(l.to_string());
        } else if let Some(s) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            letters.push_str(s);
        } else {
            operands.push(a.clone());
        }
    }
    let has = |c: char| letters.contains(c);
    let has_long = |l: &str| long.iter().any(|x| x == l);
    if has('q') || has_long("query") {
        let info = (letters.contains('i') && has('q')) || has_long("info");
        let all = has('a') || has_long("all");
        if all {
            for (n, p) in state.packages.iter().filter(|(_, p)| p.installed()) {
                match &format {
                    Some(f) => ctx.io.out.push_str(&rpm_format(f, n, p)),
                    None => ctx.io.out(nevra(n, p)),
                }
            }
            return 0;
        }
        if operands.is_empty() {
            ctx.io.err("rpm: no arguments given for query");
            return 1;
        }
        let mut missing = 0;
        for n in &operands {
            match state.installed(n) {
                Some(p) => match (&format, info) {
                    (Some(f), _) => ctx.io.out.push_str(&rpm_format(f, n, p)),
                    (None, true) => ctx.io.out.push_str(&rpm_info(n, p)),
                    (None, false) => ctx.io.out(nevra(n, p)),
                },
                None => {
                    ctx.io.out(format!("package {n} is not installed"));
                    missing += 1;
                }
            }
        }
        return missing.min(255);
    }
    if has('e') || has_long("erase") {
        let mut status = 0;
        for n in &operands {
            if state.packages.remove(n).is_some() {
                if let Some(c) = Component::of_package(n) {
                    state.services.remove(c.service());
                }
            } else {
                ctx.io.err(format!("error: package {n} is not installed"));
                status = 1;
            }
        }
        return status;
    }
    let upgrade = has('U') || has_long("upgrade");
    let install = upgrade || has('i') || has_long("install");
    if !install {
        ctx.io.err("rpm: no operation specified");
        return 1;
    }
    if operands.is_empty() {
        ctx.io.err("rpm: no packages given for install");
        return 1;
    }
    let verbose = has('v') || has('h');
    let mut status = 0;
    for f in &operands {
        if !rpm_install(f, upgrade, verbose, state, ctx) {
            status = 1;
        }
    }
    status
}

fn rpm_install(
    path: &str,
    upgrade: bool,
    verbose: bool,
    state: &mut HostState,
    ctx: &mut Ctx,
) -> bool {
    let file = match read_archive(path, Packaging::Rpm) {
        Ok(f) => f,
        Err("missing") => {
            ctx.io.err(format!(
                "error: open of {path} failed: No such file or directory"
            ));
            return false;
        }
        Err(_) => {
            ctx.io.err(format!(
                "error: {path}: not an rpm package (or package manifest): "
            ));
            return false;
        }
    };
    let name = file.name.clone();
    let new = Package {
        version: file.version.clone(),
        release: file.release.clone(),
        arch: file.arch.clone(),
        status: "install ok installed".into(),
    };
    let new_nevra = nevra(&name, &new);
    if let Some(old) = state.installed(&name) {
        let cmp = rpm_vercmp(&old.version, &new.version).then_with(|| {
            rpm_vercmp(
                old.release.as_deref().unwrap_or(""),
                new.release.as_deref().unwrap_or(""),
            )
        });
        if verbose {
            ctx.io.out(
                "Preparing...                          ################################# [100%]",
            );
        }
        if cmp == std::cmp::Ordering::Equal {
            ctx.io
                .err(format!("\tpackage {new_nevra} is already installed"));
            return false;
        }
        if !upgrade || cmp == std::cmp::Ordering::Greater {
            let old_nevra = nevra(&name, old);
            if cmp == std::cmp::Ordering::Greater {
                ctx.io.err(format!(
                    "\tpackage {old_nevra} (which is newer than {new_nevra}) is already installed"
                ));
            } else {
                ctx.io.err(format!(
                    "\tfile /opt/emc/scaleio from install of {new_nevra} conflicts with file from package {old_nevra}"
                ));
            }
            return false;
        }
    } else if verbose {
        ctx.io
            .out("Preparing...                          ################################# [100%]");
    }
    let component = Component::of_package(&name);
    if let Some(dep) = component.and_then(|c| missing_dependency(c, state)) {
        ctx.io.err("error: Failed dependencies:");
        ctx.io.err(format!("\t{dep} is needed by {new_nevra}"));
        return false;
    }
    if let Err(e) = preinst(component, ctx.env) {
        ctx.io.err(e);
        ctx.io.err(format!(
            "error: %pre({new_nevra}) scriptlet failed, exit status 1"
        ));
        ctx.io.err(format!("error: {new_nevra}: install failed"));
        return false;
    }
    if verbose {
        let label: String = format!("{name}-{}", new.full_version())
            .chars()
            .take(34)
            .collect();
        ctx.io.out("Updating / installing...");
        ctx.io.out(format!(
            "   1:{label:<34}################################# [100%]"
        ));
    }
    state.packages.insert(name.clone(), new);
    let driver = devcluster::volume_driver::postinst(&name, state, ctx.root);
    if let Err(e) = driver {
        ctx.io.err(e);
        ctx.io.err(format!(
            "warning: %post({new_nevra}) scriptlet failed, exit status 1"
        ));
        return false;
    }
    if let Some(c) = component {
        if let Err(e) = postinst(c, state, ctx) {
            ctx.io.err(e);
            ctx.io.err(format!(
                "warning: %post({new_nevra}) scriptlet failed, exit status 1"
            ));
            return false;
        }
    }
    true
}

fn yum(args: &[String], state: &mut HostState, ctx: &mut Ctx) -> i32 {
    let mut yes = false;
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-y" | "--assumeyes" => yes = true,
            "-d" | "-e" | "-c" | "--enablerepo" | "--disablerepo" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => words.push(s.to_string()),
        }
    }
    let Some((command, names)) = words.split_first() else {
        ctx.io.err("You need to give some command");
        return 1;
    };
    match command.as_str() {
        "clean" | "makecache" => {
            ctx.io.out("Loaded plugins: fastestmirror");
            0
        }
        "install" | "localinstall" => {
            ctx.io.out("Loaded plugins: fastestmirror");
            let mut new = Vec::new();
            let mut files = Vec::new();
            let mut unknown = 0;
            for n in names {
                if n.ends_with(".rpm") {
                    files.push(n.clone());
                    continue;
                }
                match repository_package(state.profile, n) {
                    None => {
                        ctx.io.out(format!("No package {n} available."));
                        unknown += 1;
                    }
                    Some(p) => match state.installed(n) {
                        Some(have) => ctx.io.out(format!(
                            "Package {} already installed and latest version",
                            nevra(n, have)
                        )),
                        None => new.push(p),
                    },
                }
            }
            if new.is_empty() && files.is_empty() {
                if unknown > 0 {
                    ctx.io.err("Error: Nothing to do");
                    return 1;
                }
                ctx.io.out("Nothing to do");
                return 0;
            }
            ctx.io.out("Resolving Dependencies");
            ctx.io.out("--> Running transaction check");
            for p in &new {
                ctx.io.out(format!(
                    "---> Package {}.x86_64 0:{}-{} will be installed",
                    p.name,
                    p.version,
                    p.release.as_deref().unwrap_or("")
                ));
            }
            ctx.io.out("--> Finished Dependency Resolution");
            ctx.io.out("");
            ctx.io.out("Dependencies Resolved");
            ctx.io.out("");
            ctx.io.out(format!(
                "Transaction Summary\n{}\nInstall  {} Package{}",
                "=".repeat(80),
                new.len() + files.len(),
                if new.len() + files.len() == 1 {
                    ""
                } else {
                    "s"
                }
            ));
            ctx.io.out("");
            if !yes {
                ctx.io.out.push_str("Is this ok [y/d/N]: ");
                match ctx.env.stdin.first().map(|s| s.trim().to_ascii_lowercase()) {
                    Some(a) if a == "y" || a == "yes" => ctx.io.out(""),
                    _ => {
                        ctx.io.out("Exiting on user command");
                        ctx.io.out("Your transaction was saved, rerun it with:");
                        ctx.io.out(" yum load-transaction /tmp/yum_save_tx.yumtx");
                        return 1;
                    }
                }
            }
            ctx.io.out("Downloading packages:");
            ctx.io.out("Running transaction check");
            ctx.io.out("Running transaction test");
            ctx.io.out("Transaction test succeeded");
            ctx.io.out("Running transaction");
            let total = new.len();
            for (i, p) in new.iter().enumerate() {
                let label = format!(
                    "{}-{}-{}.x86_64",
                    p.name,
                    p.version,
                    p.release.as_deref().unwrap_or("")
                );
                ctx.io
                    .out(format!("  Installing : {label:<60} {}/{total}", i + 1));
                state.packages.insert(
                    p.name.clone(),
                    Package {
                        version: p.version.clone(),
                        release: p.release.clone(),
                        arch: "x86_64".into(),
                        status: "install ok installed".into(),
                    },
                );
            }
            let mut status = 0;
            for f in &files {
                if !rpm_install(f, true, false, state, ctx) {
                    status = 1;
                }
            }
            if status != 0 {
                return status;
            }
            ctx.io.out("");
            ctx.io.out("Installed:");
            for p in &new {
                ctx.io.out(format!(
                    "  {}.x86_64 0:{}-{}",
                    p.name,
                    p.version,
                    p.release.as_deref().unwrap_or("")
                ));
            }
            ctx.io.out("");
            ctx.io.out("Complete!");
            0
        }
        other => {
            ctx.io.err(format!(
                "No such command: {other}. Please use /usr/bin/yum --help"
            ));
            1
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Services

fn unit_name(s: &str) -> &str {
    s.strip_suffix(".service").unwrap_or(s)
}

fn systemctl(args: &[String], state: &mut HostState, io: &mut Io) -> i32 {
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let Some((verb, units)) = words.split_first() else {
        io.out("UNIT                      LOAD   ACTIVE SUB     DESCRIPTION");
        for (n, s) in &state.services {
            let (active, sub) = if s.running {
                ("active", "running")
            } else {
                ("inactive", "dead")
            };
            io.out(format!(
                "{:<25} loaded {active:<6} {sub:<7} {n}",
                format!("{n}.service")
            ));
        }
        return 0;
    };
    match *verb {
        "daemon-reload" => 0,
        "is-active" => {
            let mut all = true;
            for u in units {
                let word = match state.services.get(unit_name(u)) {
                    Some(s) if s.running => "active",
                    Some(_) => "inactive",
                    None => "unknown",
                };
                all &= word == "active";
                io.out(word);
            }
            if all && !units.is_empty() {
                0
            } else {
                3
            }
        }
        "is-enabled" => {
            let mut status = 0;
            for u in units {
                match state.services.get(unit_name(u)) {
                    Some(s) => {
                        io.out(if s.enabled { "enabled" } else { "disabled" });
                        if !s.enabled {
                            status = 1;
                        }
                    }
                    None => {
                        io.err(format!(
                            "Failed to get unit file state for {}.service: No such file or directory",
                            unit_name(u)
                        ));
                        status = 1;
                    }
                }
            }
            status
        }
        "status" => {
            let mut status = 0;
            for u in units {
                let name = unit_name(u);
                match state.services.get(name) {
                    Some(s) => {
                        let enabled = if s.enabled { "enabled" } else { "disabled" };
                        io.out(format!("\u{25cf} {name}.service - {name}"));
                        io.out(format!(
                            "   Loaded: loaded (/usr/lib/systemd/system/{name}.service; {enabled}; vendor preset: disabled)"
                        ));
                        if s.running {
                            io.out("   Active: active (running) since Mon 2018-01-08 10:00:00 UTC");
                            io.out(format!(" Main PID: {} ({name})", s.pid.unwrap_or(0)));
                        } else {
                            io.out("   Active: inactive (dead)");
                            status = 3;
                        }
                    }
                    None => {
                        io.err(format!("Unit {name}.service could not be found."));
                        status = 4;
                    }
                }
            }
            status
        }
        "start" | "stop" | "restart" | "reload" | "try-restart" | "enable" | "disable" => {
            let mut status = 0;
            for u in units {
                let name = unit_name(u);
                let Some(pid) = state.services.contains_key(name).then(|| state.take_pid()) else {
                    let what = match *verb {
                        "enable" | "disable" => format!(
                            "Failed to execute operation: No such file or directory ({name}.service)"
                        ),
                        v => format!(
                            "Failed to {v} {name}.service: Unit {name}.service failed to load: No such file or directory."
                        ),
                    };
                    io.err(what);
                    status = 5;
                    continue;
                };
                let profile = state.profile;
                let Some(s) = state.services.get_mut(name) else {
                    continue;
                };
                match *verb {
                    "start" if !s.running => {
                        s.running = true;
                        s.pid = Some(pid);
                    }
                    "stop" => {
                        s.running = false;
                        s.pid = None;
                    }
                    "restart" | "reload" => {
                        s.running = true;
                        s.pid = Some(pid);
                        s.restarts += 1;
                    }
                    "try-restart" if s.running => {
                        s.pid = Some(pid);
                        s.restarts += 1;
                    }
                    "enable" => {
                        if !s.enabled {
                            io.err(systemd_symlink(profile, name));
                        }
                        s.enabled = true;
                    }
                    "disable" => {
                        if s.enabled {
                            io.err(format!(
                                "Removed symlink /etc/systemd/system/multi-user.target.wants/{name}.service."
                            ));
                        }
                        s.enabled = false;
                    }
                    _ => {}
                }
            }
            status
        }
        other => {
            io.err(format!("Unknown operation '{other}'."));
            1
        }
    }
}

fn upstart_status(name: &str, s: &Service) -> String {
    match (s.running, s.pid) {
        (true, Some(pid)) => format!("{name} start/running, process {pid}"),
        _ => format!("{name} stop/waiting"),
    }
}

/// Upstart jobs through `initctl`/`service` and System V scripts through `service`.
fn upstart_action(tool: &str, verb: &str, name: &str, state: &mut HostState, io: &mut Io) -> i32 {
    let pid = state.take_pid();
    let Some(s) = state.services.get_mut(name) else {
        if tool == "initctl" {
            io.err(format!("initctl: Unknown job: {name}"));
        } else {
            io.err(format!("{name}: unrecognized service"));
        }
        return 1;
    };
    let sysv = s.kind == ServiceKind::SysV;
    if tool == "initctl" && sysv {
        io.err(format!("initctl: Unknown job: {name}"));
        return 1;
    }
    let gateway = name == Component::Gateway.service();
    match verb {
        "status" => {
            if sysv {
                let text = match (gateway, s.running) {
                    (true, true) => "The EMC ScaleIO Gateway is running".to_string(),
                    (true, false) => "The EMC ScaleIO Gateway is not running".to_string(),
                    (false, true) => format!(" * {name} is running"),
                    (false, false) => format!(" * {name} is not running"),
                };
                io.out(text);
                return if s.running { 0 } else { 3 };
            }
            io.out(upstart_status(name, s));
            0
        }
        "start" => {
            if s.running {
                if sysv {
                    return 0;
                }
                io.err(format!("start: Job is already running: {name}"));
                return 1;
            }
            s.running = true;
            s.pid = Some(pid);
            if gateway {
                io.out("The EMC ScaleIO Gateway is running");
            } else if !sysv {
                io.out(upstart_status(name, s));
            }
            0
        }
        "stop" => {
            if !s.running && !sysv {
                io.err("stop: Unknown instance: ");
                return 1;
            }
            s.running = false;
            s.pid = None;
            if !sysv {
                io.out(upstart_status(name, s));
            }
            0
        }
        "restart" | "reload" | "force-reload" => {
            if tool == "initctl" && !s.running {
                io.err("restart: Unknown instance: ");
                return 1;
            }
            if s.running && !sysv && tool == "service" {
                io.out(format!("{name} stop/waiting"));
            }
            s.running = true;
            s.pid = Some(pid);
            s.restarts += 1;
            if gateway {
                io.out("The EMC ScaleIO Gateway is running");
            } else if !sysv {
                io.out(upstart_status(name, s));
            }
            0
        }
        other => {
            if tool == "initctl" {
                io.err(format!("initctl: Unknown command: {other}"));
            } else {
                io.err(format!(
                    "Usage: service {name} {{start|stop|restart|status}}"
                ));
            }
            1
        }
    }
}

fn service(args: &[String], state: &mut HostState, io: &mut Io) -> i32 {
    let (Some(name), Some(verb)) = (args.first(), args.get(1)) else {
        io.err("Usage: service < option > | --status-all | [ service_name [ command | --full-restart ] ]");
        return 1;
    };
    match state.profile.init() {
        Init::Upstart => upstart_action("service", verb, name, state, io),
        Init::Systemd => {
            io.err(format!(
                "Redirecting to /bin/systemctl {verb} {name}.service"
            ));
            systemctl(&[verb.clone(), format!("{name}.service")], state, io)
        }
    }
}

fn initctl(args: &[String], state: &mut HostState, io: &mut Io) -> i32 {
    let (Some(verb), Some(name)) = (args.first(), args.get(1)) else {
        io.err("initctl: missing job name");
        io.err("Try `initctl --help' for more information.");
        return 1;
    };
    upstart_action("initctl", verb, name, state, io)
}

// ---------------------------------------------------------------------------------------------
// Reboot

fn reboot(args: &[String], io: &mut Io) -> Outcome {
    for a in args {
        if !matches!(
            a.as_str(),
            "-f" | "--force" | "-n" | "--no-sync" | "-w" | "--no-wall"
        ) {
            io.err(format!("reboot: unrecognized option '{a}'"));
            return done(1);
        }
    }
    Outcome {
        status: 0,
        after: Some(After::Reboot),
    }
}

fn shutdown(args: &[String], state: &HostState, io: &mut Io) -> Outcome {
    let mut mode = None;
    let mut when = None;
    for a in args {
        match a.as_str() {
            "-r" | "--reboot" => mode = Some(After::Reboot),
            "-h" | "-P" | "-H" | "--halt" | "--poweroff" => mode = Some(After::PowerOff),
            "-c" => {
                io.err("shutdown: no shutdown is scheduled");
                return done(1);
            }
            s if s.starts_with('-') => {
                io.err(format!(
                    "shutdown: invalid option -- '{}'",
                    s.trim_start_matches('-')
                ));
                return done(1);
            }
            s if when.is_none() => when = Some(s.to_string()),
            _ => {}
        }
    }
    match when.as_deref() {
        Some("now" | "+0" | "0") => {}
        None if state.profile.init() == Init::Upstart => {
            io.err("shutdown: time expected");
            return done(1);
        }
        other => {
            // A scheduled shutdown would leave the executor waiting on a timer it cannot see.
            io.err(format!(
                "shutdown: devcluster stand-in: only an immediate shutdown ('now') is simulated, not {:?}",
                other.unwrap_or("+1")
            ));
            return done(1);
        }
    }
    Outcome {
        status: 0,
        after: Some(mode.unwrap_or(After::PowerOff)),
    }
}

fn http() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build(),
    )
}

/// POSTs to the control API; the body of a refusal becomes the error.
fn control_post(env: &Env, path: &str) -> Result<(u16, serde_json::Value), String> {
    let base = env.control.as_deref().ok_or_else(|| {
        format!("{CONTROL_ENV} is not set: this host is not connected to a devcluster")
    })?;
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let mut resp = http()
        .post(&url)
        .send_empty()
        .map_err(|e| format!("devcluster control API at {base} unreachable: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    Ok((status, body))
}

/// GETs from the control API.
fn control_get(env: &Env, path: &str) -> Result<(u16, serde_json::Value), String> {
    let base = env.control.as_deref().ok_or_else(|| {
        format!("{CONTROL_ENV} is not set: this host is not connected to a devcluster")
    })?;
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let mut resp = http()
        .get(&url)
        .call()
        .map_err(|e| format!("devcluster control API at {base} unreachable: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    Ok((status, body))
}

/// Whether the MDM to be added at `ip` runs, installed for `role`: a real master talks to it.
/// Only on a devcluster (the control API finds the host by address); `Err` is scli's message.
fn new_mdm_ready(env: &Env, ip: &str, role: MdmRole) -> Result<(), String> {
    if env.control.is_none() {
        return Ok(());
    }
    let unreachable = || format!("Could not communicate with the new MDM {ip}");
    let (status, body) = control_get(env, &format!("/control/hosts/{ip}"))?;
    if status == 404 {
        return Err(unreachable());
    }
    if status != 200 {
        return Err(format!("devcluster control API answered {status}: {body}"));
    }
    let host: HostState = serde_json::from_value(body)
        .map_err(|e| format!("devcluster control API: host state unreadable: {e}"))?;
    if !host.service_running("mdm") {
        return Err(unreachable());
    }
    if host.mdm_role != Some(role) {
        return Err(format!(
            "The new MDM {ip} was installed as a {}",
            if role == MdmRole::Manager {
                "tie-breaker, not a manager"
            } else {
                "manager, not a tie-breaker"
            }
        ));
    }
    Ok(())
}

fn power(root: &FakeRoot, env: &Env, after: After) -> Result<(), String> {
    let state = root.state()?;
    let agent = state.agent.ok_or_else(|| {
        "devcluster stand-in: this fake root belongs to no devcluster agent".to_string()
    })?;
    let action = match after {
        After::Reboot => "reboot",
        After::PowerOff => "stop",
    };
    // When this process belongs to the agent's executor, the agent's restart kills it here;
    // that is the reboot taking the machine down under it.
    let (status, body) = control_post(env, &format!("/control/agents/{agent}/{action}"))?;
    if status != 200 {
        return Err(format!(
            "devcluster control API refused to {action} agent {agent}: {status} {}",
            body.get("error").and_then(|e| e.as_str()).unwrap_or("")
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// scli

const SCLI_COMMANDS: &[&str] = &[
    "create_mdm_cluster",
    "login",
    "logout",
    "set_password",
    "add_standby_mdm",
    "switch_cluster_mode",
    "query_cluster",
    "rename_system",
    "query_all",
];
const SCLI_FLAGS: &[&str] = &[
    "accept_license",
    "approve_certificate",
    "use_nonsecure_communication",
];
const SCLI_OPTIONS: &[&str] = &[
    "mdm_ip",
    "master_mdm_ip",
    "master_mdm_management_ip",
    "master_mdm_name",
    "username",
    "password",
    "old_password",
    "new_password",
    "new_mdm_ip",
    "new_mdm_management_ip",
    "new_mdm_name",
    "mdm_role",
    "cluster_mode",
    "add_slave_mdm_name",
    "add_slave_mdm_ip",
    "add_tb_name",
    "add_tb_ip",
    "new_name",
];
const MDM_VERSION: &str = "2.0.10000";

fn mdm_failed(io: &mut Io, status: &str) -> i32 {
    io.err(format!("Error: MDM failed command.  Status: {status}"));
    1
}

/// A fresh 16-hex-digit object id.
fn new_id(state: &HostState, salt: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    password_hash(
        &format!("{}-{}-{nanos}", state.hostname, std::process::id()),
        &format!("{salt}{}", state.history.len()),
    )
}

fn ip_list(v: &str) -> Result<Vec<String>, String> {
    let ips: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
    for ip in &ips {
        if ip.parse::<Ipv4Addr>().is_err() {
            return Err(format!("Invalid IP address: {ip}"));
        }
    }
    Ok(ips)
}

/// Three of the four character classes and at least six characters.
fn complex_enough(p: &str) -> bool {
    let classes = [
        p.chars().any(|c| c.is_ascii_lowercase()),
        p.chars().any(|c| c.is_ascii_uppercase()),
        p.chars().any(|c| c.is_ascii_digit()),
        p.chars().any(|c| !c.is_ascii_alphanumeric()),
    ];
    p.chars().count() >= 6 && classes.iter().filter(|c| **c).count() >= 3
}

/// `scli --mdm_ip <IP>` where IP is not this host's MDM cluster but another agent's master
/// MDM: the command acts on that host's cluster, as scli talks to a remote MDM over the
/// network; the session is this host's own (a login from here first). `None`: not remote.
/// The run is logged in this host's history, and the other host's is left alone.
fn remote_scli(root: &FakeRoot, args: &[String], argv: &[String], ctx: &mut Ctx) -> Option<i32> {
    let ip = args
        .iter()
        .position(|a| a == "--mdm_ip")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
        .or_else(|| args.iter().find_map(|a| a.strip_prefix("--mdm_ip=")))?
        .to_string();
    let own = root.state().ok()?;
    let serves = |s: &HostState| {
        s.scli
            .cluster
            .as_ref()
            .is_some_and(|c| c.master.ips.contains(&ip) || c.master.management_ips.contains(&ip))
    };
    if serves(&own) || !available("scli", &own) {
        return None;
    }
    // Siblings: <work>/agent-N/host/root, this one being <work>/agent-K/host/root.
    let work = root.path().parent()?.parent()?.parent()?;
    let target = std::fs::read_dir(work)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| host::agent_root(&e.path()))
        .filter(|p| p != root.path() && p.is_dir())
        .filter_map(|p| FakeRoot::open(&p).ok())
        .find(|r| r.state().is_ok_and(|s| serves(&s)))?;
    let status = target
        .update(|state| scli_as(args, state, ctx, Some(&own.hostname)))
        .unwrap_or_else(|e| {
            ctx.io.err(format!("scli: devcluster stand-in: {e}"));
            2
        });
    let _ = root.update(|s| {
        s.history.push(Invocation {
            argv: argv.to_vec(),
            status,
        })
    });
    Some(status)
}

fn scli(args: &[String], state: &mut HostState, ctx: &mut Ctx) -> i32 {
    scli_as(args, state, ctx, None)
}

/// `scli` acting on `state`'s MDM, for this host (`caller` `None`) or for another host.
fn scli_as(args: &[String], state: &mut HostState, ctx: &mut Ctx, caller: Option<&str>) -> i32 {
    let mut command = None;
    let mut flags = Vec::new();
    let mut opts: std::collections::BTreeMap<String, String> = Default::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(body) = a.strip_prefix("--") else {
            ctx.io.err(format!("Error: Unexpected argument: {a}"));
            return 1;
        };
        let (key, inline) = match body.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (body, None),
        };
        if SCLI_COMMANDS.contains(&key) {
            if let Some(c) = &command {
                ctx.io.err(format!(
                    "Error: Only one command may be given (--{c} and --{key})"
                ));
                return 1;
            }
            command = Some(key.to_string());
        } else if SCLI_FLAGS.contains(&key) {
            flags.push(key.to_string());
        } else if SCLI_OPTIONS.contains(&key) {
            let Some(v) = inline.or_else(|| it.next().cloned()) else {
                ctx.io.err(format!("Error: Missing value for --{key}"));
                return 1;
            };
            opts.insert(key.to_string(), v);
        } else {
            ctx.io.err(format!("Error: Unknown option: --{key}"));
            return 1;
        }
    }
    let Some(command) = command else {
        ctx.io
            .err("Usage: scli [--mdm_ip <IP>] --<command> [<options>]");
        return 1;
    };
    if !state.service_running("mdm") {
        let ip = opts.get("mdm_ip").map_or("127.0.0.1", String::as_str);
        ctx.io
            .err(format!("Error: Failed to connect to MDM {ip}:6611"));
        return 1;
    }
    if let Some(ip) = opts.get("mdm_ip") {
        // No cluster here and none elsewhere at that address (`remote_scli` found none).
        let reachable = match &state.scli.cluster {
            Some(c) => c.master.ips.contains(ip) || c.master.management_ips.contains(ip),
            None => command == "create_mdm_cluster",
        };
        if !reachable {
            ctx.io
                .err(format!("Error: Failed to connect to MDM {ip}:6611"));
            return 1;
        }
    }
    let logged_in = match caller {
        None => state.scli.session.is_some(),
        Some(c) => state.scli.remote_sessions.iter().any(|h| h == c),
    };
    let needs_login = !matches!(
        command.as_str(),
        "create_mdm_cluster" | "login" | "logout" | "query_cluster"
    );
    if command != "create_mdm_cluster" && state.scli.cluster.is_none() {
        return mdm_failed(&mut ctx.io, "The MDM cluster state is incorrect");
    }
    if needs_login && !logged_in {
        return mdm_failed(&mut ctx.io, "Permission denied. Please login first");
    }
    let opt = |k: &str| opts.get(k).cloned();
    match command.as_str() {
        "create_mdm_cluster" => {
            if state.scli.cluster.is_some() {
                return mdm_failed(&mut ctx.io, "MDM cluster already exists");
            }
            if state.mdm_role != Some(MdmRole::Manager) {
                return mdm_failed(
                    &mut ctx.io,
                    "This MDM was installed as a tie-breaker (MDM_ROLE_IS_MANAGER=0) and cannot be the master",
                );
            }
            if !flags.iter().any(|f| f == "accept_license") {
                ctx.io
                    .err("Error: The license must be accepted: use --accept_license");
                return 1;
            }
            let Some(ip) = opt("master_mdm_ip") else {
                ctx.io.err("Error: --master_mdm_ip is required");
                return 1;
            };
            let ips = match ip_list(&ip) {
                Ok(v) => v,
                Err(e) => {
                    ctx.io.err(format!("Error: {e}"));
                    return 1;
                }
            };
            let mgmt = match opt("master_mdm_management_ip").map(|m| ip_list(&m)) {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    ctx.io.err(format!("Error: {e}"));
                    return 1;
                }
                None => ips.clone(),
            };
            let id = new_id(state, "cluster");
            let installation_id = new_id(state, "installation");
            let master = Mdm {
                name: opt("master_mdm_name").unwrap_or_default(),
                id: new_id(state, "master"),
                ips,
                management_ips: mgmt,
                role: MdmRole::Manager,
            };
            state.scli.cluster = Some(MdmCluster {
                admin_password_hash: password_hash(&id, "admin"),
                id,
                installation_id,
                name: None,
                mode: "1_node".into(),
                master,
                standby: Vec::new(),
                slaves: Vec::new(),
                tiebreakers: Vec::new(),
                password_changed: false,
                gateway_system_id: None,
            });
            ctx.io.out("Successfully created the MDM Cluster.");
            0
        }
        "login" => {
            let user = opt("username").unwrap_or_else(|| "admin".into());
            let Some(password) = opt("password").or_else(|| ctx.env.stdin.first().cloned()) else {
                ctx.io
                    .err("Error: No password given (--password, or on standard input)");
                return 1;
            };
            let Some(c) = &state.scli.cluster else {
                return 1;
            };
            if user != "admin" || password_hash(&c.id, &password) != c.admin_password_hash {
                return mdm_failed(&mut ctx.io, "Invalid username or password");
            }
            let id = c.id.clone();
            match caller {
                None => state.scli.session = Some(user),
                Some(c) if !state.scli.remote_sessions.iter().any(|h| h == c) => {
                    state.scli.remote_sessions.push(c.to_string())
                }
                Some(_) => {}
            }
            ctx.io.out(format!(
                "Logged in. User role is SuperUser. System ID is {id}"
            ));
            0
        }
        "logout" => {
            match caller {
                None => state.scli.session = None,
                Some(c) => state.scli.remote_sessions.retain(|h| h != c),
            }
            ctx.io.out("Logged out.");
            0
        }
        "set_password" => {
            let mut from_stdin = ctx.env.stdin.iter().cloned();
            let old = opt("old_password").or_else(|| from_stdin.next());
            let new = opt("new_password").or_else(|| from_stdin.next());
            let (Some(old), Some(new)) = (old, new) else {
                ctx.io.err("Error: --old_password and --new_password are required (or one per line on standard input)");
                return 1;
            };
            let Some(c) = state.scli.cluster.as_mut() else {
                return 1;
            };
            if password_hash(&c.id, &old) != c.admin_password_hash {
                return mdm_failed(&mut ctx.io, "Invalid username or password");
            }
            if !complex_enough(&new) {
                return mdm_failed(
                    &mut ctx.io,
                    "The password must be at least 6 characters long and contain characters from at least 3 of: lower case, upper case, digits, special characters",
                );
            }
            c.admin_password_hash = password_hash(&c.id, &new);
            c.password_changed = true;
            ctx.io.out("Password changed successfully");
            0
        }
        "add_standby_mdm" => {
            let role = match opt("mdm_role").as_deref() {
                Some("manager") => MdmRole::Manager,
                Some("tb") | Some("tiebreaker") => MdmRole::TieBreaker,
                Some(other) => {
                    ctx.io
                        .err(format!("Error: Invalid --mdm_role {other} (manager or tb)"));
                    return 1;
                }
                None => {
                    ctx.io.err("Error: --mdm_role is required (manager or tb)");
                    return 1;
                }
            };
            let ips = match opt("new_mdm_ip").map(|v| ip_list(&v)) {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    ctx.io.err(format!("Error: {e}"));
                    return 1;
                }
                None => {
                    ctx.io.err("Error: --new_mdm_ip is required");
                    return 1;
                }
            };
            let mgmt = match opt("new_mdm_management_ip").map(|v| ip_list(&v)) {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    ctx.io.err(format!("Error: {e}"));
                    return 1;
                }
                None => Vec::new(),
            };
            let name = opt("new_mdm_name").unwrap_or_default();
            let id = new_id(state, &name);
            let Some(c) = state.scli.cluster.as_mut() else {
                return 1;
            };
            let members = std::iter::once(&c.master).chain(&c.standby);
            for m in members {
                if m.ips.iter().any(|ip| ips.contains(ip)) {
                    return mdm_failed(
                        &mut ctx.io,
                        "An MDM with the same IP address already exists",
                    );
                }
                if !name.is_empty() && m.name == name {
                    return mdm_failed(&mut ctx.io, "An MDM with the same name already exists");
                }
            }
            if let Err(e) = ips
                .first()
                .map_or(Ok(()), |ip| new_mdm_ready(ctx.env, ip, role))
            {
                return mdm_failed(&mut ctx.io, &e);
            }
            c.standby.push(Mdm {
                name,
                id: id.clone(),
                ips,
                management_ips: mgmt,
                role,
            });
            ctx.io
                .out(format!("Successfully added a standby MDM. Object ID {id}"));
            0
        }
        "switch_cluster_mode" => {
            let Some(mode) = opt("cluster_mode") else {
                ctx.io
                    .err("Error: --cluster_mode is required (1_node, 3_node or 5_node)");
                return 1;
            };
            let (slaves_wanted, tbs_wanted) = match mode.as_str() {
                "1_node" => (0, 0),
                "3_node" => (1, 1),
                "5_node" => (2, 2),
                other => {
                    ctx.io.err(format!("Error: Invalid --cluster_mode {other}"));
                    return 1;
                }
            };
            let Some(c) = state.scli.cluster.as_mut() else {
                return 1;
            };
            if c.mode == mode {
                return mdm_failed(&mut ctx.io, "The cluster is already in the requested mode");
            }
            // Standby MDMs named (or addressed) for a role; members stay in `standby` and are
            // marked by name in `slaves` / `tiebreakers`.
            let pick = |names: Option<String>, ips: Option<String>, role: MdmRole| {
                let wanted = names
                    .iter()
                    .flat_map(|n| n.split(','))
                    .map(|n| (true, n.trim().to_string()))
                    .chain(
                        ips.iter()
                            .flat_map(|n| n.split(','))
                            .map(|n| (false, n.trim().to_string())),
                    );
                let mut picked: Vec<String> = Vec::new();
                for (by_name, key) in wanted {
                    let found = c.standby.iter().find(|m| {
                        let member = c.slaves.contains(&m.name) || c.tiebreakers.contains(&m.name);
                        !member
                            && if by_name {
                                m.name == key
                            } else {
                                m.ips.contains(&key)
                            }
                    });
                    let Some(m) = found else {
                        return Err(format!("Could not find the standby MDM {key}"));
                    };
                    if m.role != role {
                        return Err(format!(
                            "The standby MDM {key} was not installed as a {}",
                            if role == MdmRole::Manager {
                                "manager"
                            } else {
                                "tie-breaker"
                            }
                        ));
                    }
                    picked.push(m.name.clone());
                }
                Ok(picked)
            };
            let slaves = pick(
                opt("add_slave_mdm_name"),
                opt("add_slave_mdm_ip"),
                MdmRole::Manager,
            );
            let tbs = pick(opt("add_tb_name"), opt("add_tb_ip"), MdmRole::TieBreaker);
            let (slaves, tbs) = match (slaves, tbs) {
                (Ok(s), Ok(t)) => (s, t),
                (Err(e), _) | (_, Err(e)) => return mdm_failed(&mut ctx.io, &e),
            };
            if c.slaves.len() + slaves.len() != slaves_wanted
                || c.tiebreakers.len() + tbs.len() != tbs_wanted
            {
                return mdm_failed(
                    &mut ctx.io,
                    &format!(
                        "{mode} needs {slaves_wanted} slave MDM(s) and {tbs_wanted} tie-breaker(s)"
                    ),
                );
            }
            c.slaves.extend(slaves);
            c.tiebreakers.extend(tbs);
            c.mode = mode;
            ctx.io.out("Successfully switched the cluster mode.");
            0
        }
        "query_cluster" => {
            let Some(c) = &state.scli.cluster else {
                return 1;
            };
            query_cluster(c, &mut ctx.io);
            0
        }
        "rename_system" => {
            let Some(name) = opt("new_name") else {
                ctx.io.err("Error: --new_name is required");
                return 1;
            };
            if name.is_empty() || name.len() > 31 || name.contains(char::is_whitespace) {
                return mdm_failed(&mut ctx.io, "Invalid name");
            }
            if ctx.env.control.is_some() {
                let trio = state
                    .scli
                    .cluster
                    .as_ref()
                    .and_then(three_node_trio)
                    .map(|[p, s, t]| format!("&primary={p}&secondary={s}&tiebreaker={t}"))
                    .unwrap_or_default();
                match control_post(
                    ctx.env,
                    &format!(
                        "/control/gateway/create-system?name={}{trio}",
                        percent_encode(&name)
                    ),
                ) {
                    Ok((200, body)) => {
                        if let Some(c) = state.scli.cluster.as_mut() {
                            c.gateway_system_id =
                                body.get("id").and_then(|v| v.as_str()).map(str::to_string);
                        }
                    }
                    // A devcluster without a gateway: nothing to tell.
                    Ok((404, _)) => {}
                    Ok((status, body)) => {
                        ctx.io.err(format!(
                            "Error: devcluster gateway refused the system name ({status}): {}",
                            body.get("error").and_then(|e| e.as_str()).unwrap_or("")
                        ));
                        return 1;
                    }
                    Err(e) => {
                        ctx.io.err(format!("Error: {e}"));
                        return 1;
                    }
                }
            }
            let Some(c) = state.scli.cluster.as_mut() else {
                return 1;
            };
            c.name = Some(name.clone());
            ctx.io.out(format!("Successfully renamed system to {name}"));
            0
        }
        "query_all" => {
            let Some(c) = &state.scli.cluster else {
                return 1;
            };
            let io = &mut ctx.io;
            io.out("System Info:");
            io.out("\tProduct:  EMC ScaleIO Version: R2_0.10000.2072");
            io.out(format!("\tID:      {}", c.id));
            io.out(format!("\tName:    {}", c.name.as_deref().unwrap_or("N/A")));
            io.out(format!("\tInstallation ID: {}", c.installation_id));
            io.out("\tMDM cluster state: Normal");
            io.out(format!("\tMDM cluster mode: {}", c.mode));
            io.out("");
            io.out("Query all returned 0 Protection Domains");
            0
        }
        _ => 1,
    }
}

/// The first address of the master, the slave and the tie-breaker of a three-node cluster:
/// what the gateway reports as its MDMs.
fn three_node_trio(c: &MdmCluster) -> Option<[String; 3]> {
    if c.mode != "3_node" {
        return None;
    }
    let by_name = |names: &[String]| {
        let name = names.first()?;
        c.standby
            .iter()
            .find(|m| &m.name == name)?
            .ips
            .first()
            .cloned()
    };
    Some([
        c.master.ips.first()?.clone(),
        by_name(&c.slaves)?,
        by_name(&c.tiebreakers)?,
    ])
}

fn query_cluster(c: &MdmCluster, io: &mut Io) {
    let na = |s: &str| {
        if s.is_empty() {
            "N/A".to_string()
        } else {
            s.to_string()
        }
    };
    let members = 1 + c.slaves.len() + c.tiebreakers.len();
    io.out("Cluster:");
    io.out(format!(
        "    Name: {}, ID: {}, Mode: {}, State: Normal, Active: {members}/{members}, Replicas: {}/{}",
        c.name.as_deref().unwrap_or("N/A"),
        c.id,
        c.mode,
        1 + c.slaves.len(),
        1 + c.slaves.len()
    ));
    io.out("    Virtual IPs: N/A");
    io.out("Master MDM:");
    io.out(format!(
        "    Name: {}, ID: 0x{}",
        na(&c.master.name),
        c.master.id
    ));
    io.out(format!(
        "        IPs: {}, Management IPs: {}, Port: 9011, Virtual IP interfaces: N/A",
        c.master.ips.join(", "),
        c.master.management_ips.join(", ")
    ));
    io.out(format!("        Version: {MDM_VERSION}"));
    let find = |name: &String| c.standby.iter().find(|m| &m.name == name);
    if !c.slaves.is_empty() {
        io.out("Slave MDMs:");
        for m in c.slaves.iter().filter_map(find) {
            io.out(format!("    Name: {}, ID: 0x{}", na(&m.name), m.id));
            io.out(format!(
                "        IPs: {}, Management IPs: {}, Port: 9011, Virtual IP interfaces: N/A",
                m.ips.join(", "),
                m.management_ips.join(", ")
            ));
            io.out(format!("        Status: Normal, Version: {MDM_VERSION}"));
        }
    }
    if !c.tiebreakers.is_empty() {
        io.out("Tie-Breakers:");
        for m in c.tiebreakers.iter().filter_map(find) {
            io.out(format!("    Name: {}, ID: 0x{}", na(&m.name), m.id));
            io.out(format!("        IPs: {}, Port: 9011", m.ips.join(", ")));
            io.out(format!("        Status: Normal, Version: {MDM_VERSION}"));
        }
    }
    let standby: Vec<&Mdm> = c
        .standby
        .iter()
        .filter(|m| !c.slaves.contains(&m.name) && !c.tiebreakers.contains(&m.name))
        .collect();
    if !standby.is_empty() {
        io.out("Standby MDMs:");
        for m in standby {
            let role = if m.role == MdmRole::Manager {
                "Manager"
            } else {
                "Tie Breaker"
            };
            io.out(format!("    Name: {}, ID: 0x{}, {role}", na(&m.name), m.id));
            io.out(format!("        IPs: {}, Port: 9011", m.ips.join(", ")));
        }
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An SDC that cannot reach its MDMs still installs (as on a real host); the refusal is only
/// visible in the gateway's Sdc list, so say it on stderr for whoever debugs the test.
fn log_sdc_refusal(status: u16, body: &serde_json::Value) {
    eprintln!(
        "storage-host-standin: the SDC did not connect to the cluster: {status} {}",
        body.get("error").and_then(|e| e.as_str()).unwrap_or("")
    );
}
