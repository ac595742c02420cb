//! `storage-scheduler ctl`: the operators' command-line client of the scheduler's REST API
//! (plan status, pause, resume, each node action, the events). A subcommand of the binary
//! operators already have, rather than a script: it brings the pinning TLS client and the
//! operator paths the scheduler itself parses, so no `curl -k` and no second copy of the
//! paths, and it adds no binary to ship.
//!
//! What it is asked is decided here without I/O ([`parse`], the printed lines); `client.rs`
//! makes the one HTTPS request. Exit codes: [`EXIT_DONE`], [`EXIT_REFUSED`], [`EXIT_USAGE`],
//! [`EXIT_UNREACHABLE`].

mod client;
mod lines;

use crate::scheduler::operator;
use crate::secret::Secret;
use crate::tls::Fingerprint;
use std::path::PathBuf;

/// The command was done (or started: the printed line says which).
pub const EXIT_DONE: i32 = 0;
/// The scheduler refused it, knows no such node, or could not do it now.
pub const EXIT_REFUSED: i32 = 1;
/// The command line or a file it names is wrong.
pub const EXIT_USAGE: i32 = 2;
/// The scheduler was not reached, its certificate was refused, or the token was.
pub const EXIT_UNREACHABLE: i32 = 3;

/// The environment variables read when the option is not given.
pub const ENV_URL: &str = "STORAGE_SCHEDULER_URL";
pub const ENV_FINGERPRINT: &str = "STORAGE_SCHEDULER_FINGERPRINT";
pub const ENV_CACERT: &str = "STORAGE_SCHEDULER_CACERT";
pub const ENV_TOKEN: &str = "STORAGE_OPERATOR_TOKEN";

/// Longest token file read: a token, not a document.
const MAX_TOKEN_FILE: u64 = 4096;

pub const USAGE: &str = "usage: storage-scheduler ctl [options] <command>

commands:
  status                        the plan: what it does, its step counts, nodes not done
  events                        the last operator actions and plan changes, newest first
  pause                         finish the steps in flight, start no other
  resume                        go on with the plan
  restart <host>                replace the node's executor; verify its host from the first phase
  retry <host>                  a failed node tries again at once
  decommission <host>           move the node's data away, remove its SDS, stop its services
  recommission <host>           a decommissioned node may run again
  replace <host>                the host is gone for good: remove its SDS now, forget the node
  remove-device <host> <device> remove one device (sdb or /dev/sdb) from the pool

options (each also from the environment variable named):
  -url=https://<host>:<port>    the scheduler's REST address (STORAGE_SCHEDULER_URL)
  -fingerprint=sha256:<hex>     the scheduler's certificate, as its log names it at start
                                (STORAGE_SCHEDULER_FINGERPRINT)
  -cacert=<file>                or a PEM file of the certificate or the CA that signed it
                                (STORAGE_SCHEDULER_CACERT)
  -token.file=<file>            the operator token, mode 0600 (else STORAGE_OPERATOR_TOKEN)

One line per outcome; exit 0 done, 1 refused, 2 bad usage, 3 scheduler not reached or
token refused.";

/// What the command asks of the scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `GET /api/plan`.
    Status,
    /// `GET /api/events`.
    Events,
    /// `POST` of an operator path (a write).
    Write(String),
}

/// How the scheduler's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    Pinned(Fingerprint),
    CaFile(PathBuf),
}

/// A whole command line, understood.
#[derive(Debug)]
pub struct Invocation {
    /// `https://host:port`, without a trailing slash.
    pub url: String,
    pub trust: Trust,
    /// Writes only: reads are open to whoever reaches the port.
    pub token: Option<Secret>,
    pub request: Request,
}

/// Runs `ctl` with its arguments (those after `ctl`); the process's exit code.
pub fn main(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> i32 {
    if args
        .iter()
        .any(|a| matches!(a.as_str(), "-help" | "--help" | "-h"))
    {
        println!("{USAGE}");
        return EXIT_DONE;
    }
    let inv = match parse(args, env) {
        Ok(inv) => inv,
        Err(e) => {
            eprintln!("storage-scheduler ctl: {e}");
            eprintln!("storage-scheduler ctl: see storage-scheduler ctl -help");
            return EXIT_USAGE;
        }
    };
    match client::send(&inv) {
        Ok((status, body)) => {
            let (code, text) = lines::answer(&inv.request, status, &body);
            for line in text {
                println!("{line}");
            }
            code
        }
        Err(client::Failure::Usage(e)) => {
            eprintln!("storage-scheduler ctl: {e}");
            EXIT_USAGE
        }
        Err(client::Failure::Unreached(e)) => {
            eprintln!("storage-scheduler ctl: {}: {e}", inv.url);
            EXIT_UNREACHABLE
        }
    }
}

/// The command line into an [`Invocation`]; the error names what is wrong. Files named are
/// read here (the token's), so a bad one is a usage error before any request.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Invocation, String> {
    let mut opts = Options::default();
    let mut words = Vec::new();
    for a in args {
        match a.strip_prefix('-').and_then(|o| o.split_once('=')) {
            Some((name, value)) => opts.set(name, value)?,
            None if a.starts_with('-') => {
                return Err(format!("option {a:?} has no value (give {a}=<value>)"))
            }
            None => words.push(a.as_str()),
        }
    }
    let request = request(&words)?;
    let url = url(opts.url.or_else(|| env(ENV_URL)))?;
    let trust = trust(
        opts.fingerprint.or_else(|| env(ENV_FINGERPRINT)),
        opts.cacert.or_else(|| env(ENV_CACERT)),
    )?;
    let token = match request {
        Request::Write(_) => Some(token(opts.token_file, env(ENV_TOKEN))?),
        _ => None,
    };
    Ok(Invocation {
        url,
        trust,
        token,
        request,
    })
}

#[derive(Default)]
struct Options {
    url: Option<String>,
    fingerprint: Option<String>,
    cacert: Option<String>,
    token_file: Option<String>,
}

impl Options {
    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let slot = match name {
            "url" => &mut self.url,
            "fingerprint" => &mut self.fingerprint,
            "cacert" => &mut self.cacert,
            "token.file" => &mut self.token_file,
            _ => {
                return Err(format!(
                    "unknown option -{name}; known: -url, -fingerprint, -cacert, -token.file"
                ))
            }
        };
        if slot.replace(value.to_string()).is_some() {
            return Err(format!("-{name} is given twice"));
        }
        Ok(())
    }
}

/// The command words into a request; a node action's path is checked by the parser the
/// scheduler uses for it.
fn request(words: &[&str]) -> Result<Request, String> {
    let known = "status, events, pause, resume, restart, retry, decommission, recommission, replace, remove-device";
    let Some((&command, rest)) = words.split_first() else {
        return Err(format!("no command given; one of: {known}"));
    };
    let arity = |n: usize, shape: &str| -> Result<(), String> {
        if rest.len() == n {
            Ok(())
        } else {
            Err(format!("{command} takes {shape}, not {rest:?}"))
        }
    };
    let path = match command {
        "status" | "plan" => return arity(0, "no argument").map(|()| Request::Status),
        "events" => return arity(0, "no argument").map(|()| Request::Events),
        "pause" | "resume" => {
            arity(0, "no argument")?;
            format!("/api/plan/{command}")
        }
        "restart" | "retry" | "decommission" | "recommission" | "replace" => {
            arity(1, "one host name")?;
            format!("/api/nodes/{}/{command}", encode(rest[0]))
        }
        "remove-device" => {
            arity(2, "a host name and a device")?;
            format!(
                "/api/nodes/{}/devices/{}/remove",
                encode(rest[0]),
                encode(rest[1])
            )
        }
        other => return Err(format!("unknown command {other:?}; one of: {known}")),
    };
    match operator::parse(&path) {
        Some(Ok(_)) => Ok(Request::Write(path)),
        Some(Err(e)) => Err(e),
        None => Err(format!("{command}: not an operator action")),
    }
}

/// Percent-encoding of one path segment: everything but unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The scheduler's address: https only (the token must not cross the network in clear).
fn url(given: Option<String>) -> Result<String, String> {
    let Some(u) = given.filter(|u| !u.is_empty()) else {
        return Err(format!(
            "no scheduler address: give -url=https://<host>:<port> or set {ENV_URL}"
        ));
    };
    let rest = u.strip_prefix("https://").ok_or_else(|| {
        format!("-url={u}: the operator API is served over TLS only; give https://<host>:<port>")
    })?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("-url={u} names no host"));
    }
    Ok(u.trim_end_matches('/').to_string())
}

fn trust(fingerprint: Option<String>, cacert: Option<String>) -> Result<Trust, String> {
    match (fingerprint, cacert) {
        (Some(_), Some(_)) => Err("give -fingerprint or -cacert, not both".into()),
        (Some(f), None) => Fingerprint::parse(&f)
            .map(Trust::Pinned)
            .map_err(|e| format!("-fingerprint: {e}")),
        (None, Some(c)) => Ok(Trust::CaFile(PathBuf::from(c))),
        (None, None) => Err(format!(
            "no way to check the scheduler's certificate: give -fingerprint=sha256:<hex> (the \
             scheduler logs it at start: \"certificate sha256:...\") or -cacert=<file>, or set \
             {ENV_FINGERPRINT}"
        )),
    }
}

/// The operator token: `-token.file` (owner-only, one trailing newline dropped), else the
/// environment. Messages never contain it.
fn token(file: Option<String>, env: Option<String>) -> Result<Secret, String> {
    let text = match file {
        Some(path) => read_token_file(&path)?,
        None => env.ok_or_else(|| {
            format!("writes need the operator token: give -token.file=<file> or set {ENV_TOKEN}")
        })?,
    };
    let text = text.trim();
    if text.is_empty() {
        return Err("the operator token is empty".into());
    }
    if text.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err("the operator token holds spaces or control characters".into());
    }
    Ok(Secret::new(text.to_string()))
}

fn read_token_file(path: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("-token.file: {path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("-token.file: {path} is not a regular file"));
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "-token.file: {path} has mode {mode:04o}: group and others may read it; chmod 600 {path}"
        ));
    }
    if meta.len() > MAX_TOKEN_FILE {
        return Err(format!(
            "-token.file: {path} is {} bytes, over {MAX_TOKEN_FILE}",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("-token.file: {path}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("-token.file: {path} is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn with_env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn parsed(a: &[&str]) -> Result<Invocation, String> {
        let env = with_env(&[(ENV_TOKEN, "tok-123")]);
        let mut all = args(&["-url=https://sched:8080/", &format!("-fingerprint={PIN}")]);
        all.extend(args(a));
        parse(&all, &env)
    }

    #[test]
    fn commands_become_requests_with_the_scheduler_s_own_paths() {
        let req = |a: &[&str]| parsed(a).unwrap().request;
        assert_eq!(req(&["status"]), Request::Status);
        assert_eq!(req(&["events"]), Request::Events);
        assert_eq!(req(&["pause"]), Request::Write("/api/plan/pause".into()));
        assert_eq!(
            req(&["restart", "node-1.example"]),
            Request::Write("/api/nodes/node-1.example/restart".into())
        );
        assert_eq!(
            req(&["remove-device", "h1", "/dev/sdb"]),
            Request::Write("/api/nodes/h1/devices/%2Fdev%2Fsdb/remove".into())
        );
        let inv = parsed(&["retry", "h1"]).unwrap();
        assert_eq!(inv.url, "https://sched:8080");
        assert_eq!(inv.token.as_ref().map(|t| t.expose()), Some("tok-123"));
        assert!(
            parsed(&["status"]).unwrap().token.is_none(),
            "reads need none"
        );
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let err = |a: &[&str]| parsed(a).unwrap_err();
        assert!(err(&[]).contains("no command given"));
        assert!(err(&["reboot", "h1"]).contains("unknown command \"reboot\""));
        assert!(err(&["restart"]).contains("restart takes one host name"));
        assert!(err(&["pause", "now"]).contains("pause takes no argument"));
        assert!(err(&["remove-device", "h1", "../etc"]).contains("bad device name"));
        assert!(err(&["-colour=red", "status"]).contains("unknown option -colour"));
        let env = with_env(&[]);
        let e = |a: &[&str]| parse(&args(a), &env).unwrap_err();
        assert!(e(&["status"]).contains("no scheduler address"));
        assert!(e(&["-url=http://s:8080", "status"]).contains("TLS only"));
        assert!(e(&["-url=https://s:8080", "status"]).contains("-fingerprint=sha256:"));
        assert!(e(&["-url=https://s:8080", "-fingerprint=abc", "status"])
            .contains("not a certificate fingerprint"));
        let no_token = e(&[
            "-url=https://s:8080",
            &format!("-fingerprint={PIN}"),
            "pause",
        ]);
        assert!(no_token.contains("-token.file") && no_token.contains(ENV_TOKEN));
    }

    #[test]
    fn the_token_file_is_the_owner_s_alone_and_never_echoed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ctl-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "s3cret-token\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = file.display().to_string();
        let err = token(Some(path.clone()), None).unwrap_err();
        assert!(
            err.contains("mode 0644") && !err.contains("s3cret"),
            "{err}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let t = token(Some(path), Some("from-env".into())).unwrap();
        assert_eq!(
            t.expose(),
            "s3cret-token",
            "the file wins, its newline dropped"
        );
        assert!(!format!("{t:?}").contains("s3cret"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
