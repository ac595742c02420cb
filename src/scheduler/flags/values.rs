//! Judging one flag value as text: Go's booleans, the placeholders of the spec's examples, a
//! master's `host:port` and a duration with its unit.
//! A leaf under both the scan of the arguments and the checks of their values.

use std::time::Duration;

/// A flag's value and how the operator spelled the flag (for error messages).
pub(super) struct Given {
    pub(super) written: String,
    pub(super) value: String,
}

/// Go's strconv.ParseBool, which the earlier framework's flags used.
pub(super) fn parse_bool(v: &str) -> Option<bool> {
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
pub(super) fn find_placeholder(v: &str) -> Option<&str> {
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
pub(super) fn is_whole_placeholder(v: &str) -> bool {
    let v = v.trim();
    [('<', '>'), ('[', ']'), ('{', '}')].iter().any(|&(o, c)| {
        v.len() >= 2
            && v.starts_with(o)
            && v.ends_with(c)
            && is_placeholder_words(&v[1..v.len() - 1])
    })
}

/// One `-uri` entry to `host:port`.
pub(super) fn parse_master(item: &str) -> Result<String, String> {
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
pub(super) fn parse_duration(v: &str) -> Option<Duration> {
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
