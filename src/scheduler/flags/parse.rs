//! Argument parsing: Go `flag` syntax into the given values, then [`Check`] for the config.

use super::check::Check;
use super::table::{help_text, is_help, lookup, version_line, Kind};
use super::values::{parse_bool, Given};
use super::Parsed;
use std::collections::{HashMap, HashSet};

/// Parses the arguments after the program name (`std::env::args().skip(1)`). `env` supplies
/// environment variables (`HOST`, `LIBPROCESS_IP`, `HOSTNAME`, `MESOS_SANDBOX`) so tests do
/// not depend on the real environment. `Err` holds one message per problem; the caller prints
/// each on its own line and exits with status 2.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Parsed, Vec<String>> {
    let scan = scan(args);
    if scan.help {
        return Ok(Parsed::Help(help_text()));
    }
    if scan.version {
        return Ok(Parsed::Version(version_line()));
    }
    let mut check = Check {
        given: scan.given,
        broken: scan.broken,
        errors: scan.errors,
        warnings: Vec::new(),
        env,
        without_digest: Vec::new(),
    };
    let config = check.config();
    if check.errors.is_empty() {
        Ok(Parsed::Run(Box::new(config)))
    } else {
        Err(check.errors)
    }
}

/// What the arguments say, before their values are checked.
#[derive(Default)]
struct Scan {
    given: HashMap<&'static str, Given>,
    /// Flags already reported as malformed, so "missing" is not reported for them as well.
    broken: HashSet<&'static str>,
    errors: Vec<String>,
    help: bool,
    version: bool,
}

fn scan(args: &[String]) -> Scan {
    let mut s = Scan::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if arg == "--" {
            for rest in &args[i..] {
                s.errors.push(unexpected(rest));
            }
            break;
        }
        let Some((name, inline)) = flag_parts(arg) else {
            s.errors.push(unexpected(arg));
            continue;
        };
        if is_help(name) {
            s.help = true;
            continue;
        }
        if name == "version" {
            s.version = true;
            continue;
        }
        let Some(def) = lookup(name) else {
            // The value is never echoed: a misspelt -storage.pasword would print the password.
            s.errors.push(format!(
                "-{name}: unknown flag (run with -help for the list)"
            ));
            if inline.is_none() && args.get(i).is_some_and(|next| !next.starts_with('-')) {
                i += 1;
            }
            continue;
        };
        match flag_value(def.kind, name, inline, args.get(i)) {
            Ok((value, took_next)) => {
                i += usize::from(took_next);
                s.record(def.name, format!("-{name}"), value);
            }
            Err(e) => {
                s.errors.push(e);
                s.broken.insert(def.name);
            }
        }
    }
    s
}

impl Scan {
    /// A flag's value; the same flag again must say the same.
    fn record(&mut self, flag: &'static str, written: String, value: String) {
        match self.given.get(flag) {
            Some(prev) if prev.value != value => self.errors.push(format!(
                "-{flag}: given more than once with different values (as {} and {written})",
                prev.written
            )),
            Some(_) => {}
            None => {
                self.given.insert(flag, Given { written, value });
            }
        }
    }
}

/// `-name`, `--name`, `-name=value`: the name and the inline value; `None` for anything else.
fn flag_parts(arg: &str) -> Option<(&str, Option<&str>)> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
        return None;
    }
    Some(match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    })
}

/// The value of flag `name`: inline, else the next argument where it can be one (then
/// `.1` is true: the caller skips it).
fn flag_value(
    kind: Kind,
    name: &str,
    inline: Option<&str>,
    next: Option<&String>,
) -> Result<(String, bool), String> {
    match (kind, inline) {
        (_, Some(v)) => Ok((v.to_owned(), false)),
        (Kind::Bool, None) => match next {
            // Go would leave a separate "false" as a stray argument; taking it is kinder.
            Some(next) if parse_bool(next).is_some() => Ok((next.clone(), true)),
            _ => Ok(("true".to_owned(), false)),
        },
        (Kind::Value, None) => match next {
            Some(next) if !looks_like_known_flag(next) => Ok((next.clone(), true)),
            _ => Err(format!("-{name}: missing value (write -{name}=<value>)")),
        },
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
