//! Pure: the operator's commands. What an authenticated `POST` asks for (`parse`, from the
//! request's path), and the answer the dispatcher gives (`Outcome`). The REST side checks the
//! operator token before anything here runs; the dispatcher decides and acts
//! (`dispatcher/operator.rs` and the files it names per action).

use serde::Serialize;

/// One operator command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `POST /api/plan/pause`: the step in flight finishes, no other starts.
    Pause,
    /// `POST /api/plan/resume`.
    Resume,
    /// `POST /api/nodes/<host>/<action>`.
    Node { host: String, action: NodeAction },
}

/// What an operator can ask of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAction {
    /// Replace the executor and re-verify the host from the first phase.
    Restart,
    /// A failed node tries again at once.
    Retry,
    /// Move the SDS's data away, remove it, stop the node's services; never relaunched.
    Decommission,
    /// A decommissioned node may be launched again.
    Recommission,
    /// The host is gone for good: remove its SDS at once and forget the node.
    Replace,
    /// Remove one device (its path, `/dev/sdb`, or its name under `/dev`, `sdb`) from the pool.
    RemoveDevice(String),
}

impl NodeAction {
    pub fn name(&self) -> &'static str {
        match self {
            NodeAction::Restart => "restart",
            NodeAction::Retry => "retry",
            NodeAction::Decommission => "decommission",
            NodeAction::Recommission => "recommission",
            NodeAction::Replace => "replace",
            NodeAction::RemoveDevice(_) => "remove-device",
        }
    }
}

impl Command {
    /// The action's name, as logs and `/api/events` show it.
    pub fn action(&self) -> &'static str {
        match self {
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Node { action, .. } => action.name(),
        }
    }

    /// What it acts on: `plan`, a host, or a host's device (`host:/dev/sdb`).
    pub fn target(&self) -> String {
        match self {
            Command::Pause | Command::Resume => "plan".into(),
            Command::Node {
                host,
                action: NodeAction::RemoveDevice(d),
            } => format!("{host}:{d}"),
            Command::Node { host, .. } => host.clone(),
        }
    }
}

/// The paths of operator writes, for the REST router and the CLI: `None` when `path` is not
/// one of them (the router then answers 404 or 405 as for any path), `Some(Err)` when it is
/// one of their shapes with something wrong in it.
pub fn parse(path: &str) -> Option<Result<Command, String>> {
    match path {
        "/api/plan/pause" => return Some(Ok(Command::Pause)),
        "/api/plan/resume" => return Some(Ok(Command::Resume)),
        _ => {}
    }
    let rest = path.strip_prefix("/api/nodes/")?;
    let (host, action) = rest.split_once('/')?;
    Some(node_command(host, action))
}

fn node_command(host: &str, action: &str) -> Result<Command, String> {
    let host = decode(host).ok_or_else(|| format!("bad host name in the path: {host:?}"))?;
    if host.is_empty() || host.len() > 255 {
        return Err("the path names no host".into());
    }
    let action = match action {
        "restart" => NodeAction::Restart,
        "retry" => NodeAction::Retry,
        "decommission" => NodeAction::Decommission,
        "recommission" => NodeAction::Recommission,
        "replace" => NodeAction::Replace,
        other => NodeAction::RemoveDevice(device(other)?),
    };
    Ok(Command::Node { host, action })
}

/// `devices/<name>/remove`, the name percent-encoded when it is a path.
fn device(action: &str) -> Result<String, String> {
    let known = "restart, retry, decommission, recommission, replace, devices/<name>/remove";
    let name = action
        .strip_prefix("devices/")
        .and_then(|r| r.strip_suffix("/remove"))
        .ok_or_else(|| format!("unknown node action {action:?}; known: {known}"))?;
    let name = decode(name).ok_or_else(|| format!("bad device name in the path: {name:?}"))?;
    let path = if name.starts_with('/') {
        name
    } else {
        format!("/dev/{name}")
    };
    let ok = path.len() <= 255
        && !path.contains("..")
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.:".contains(&b));
    if !ok || path == "/dev/" {
        return Err(format!("bad device name {path:?}"));
    }
    Ok(path)
}

/// Percent-decoding of one path segment; `None` on a bad escape or non-UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The dispatcher's answer to a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The HTTP status: 200 done (or started: `message` says which), 404 no such node, 409
    /// refused now (`message` says why), 503 done but not saved (or not running yet).
    pub status: u16,
    pub message: String,
}

impl Outcome {
    pub fn done(message: impl Into<String>) -> Outcome {
        Outcome {
            status: 200,
            message: message.into(),
        }
    }
    pub fn refused(message: impl Into<String>) -> Outcome {
        Outcome {
            status: 409,
            message: message.into(),
        }
    }
    pub fn not_found(message: impl Into<String>) -> Outcome {
        Outcome {
            status: 404,
            message: message.into(),
        }
    }
    pub fn accepted(&self) -> bool {
        self.status == 200
    }
    /// `accepted` or `refused`, as the log line and `/api/events` name it.
    pub fn word(&self) -> &'static str {
        match self.status {
            200 => "accepted",
            404 => "unknown",
            409 => "refused",
            _ => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, action: NodeAction) -> Option<Result<Command, String>> {
        Some(Ok(Command::Node {
            host: host.into(),
            action,
        }))
    }

    #[test]
    fn paths_become_commands() {
        assert_eq!(parse("/api/plan/pause"), Some(Ok(Command::Pause)));
        assert_eq!(parse("/api/plan/resume"), Some(Ok(Command::Resume)));
        assert_eq!(parse("/api/plan"), None);
        assert_eq!(parse("/api/nodes/h1"), None);
        assert_eq!(
            parse("/api/nodes/h1/restart"),
            node("h1", NodeAction::Restart)
        );
        assert_eq!(
            parse("/api/nodes/h1/devices/sdb/remove"),
            node("h1", NodeAction::RemoveDevice("/dev/sdb".into()))
        );
        assert_eq!(
            parse("/api/nodes/h1/devices/%2Fdev%2Fxvdf/remove"),
            node("h1", NodeAction::RemoveDevice("/dev/xvdf".into()))
        );
        let cmd = parse("/api/nodes/h1/devices/sdb/remove").unwrap().unwrap();
        assert_eq!(
            (cmd.action(), cmd.target()),
            ("remove-device", "h1:/dev/sdb".into())
        );
    }

    #[test]
    fn bad_paths_name_what_is_wrong() {
        let err = |p: &str| parse(p).unwrap().unwrap_err();
        assert!(err("/api/nodes/h1/reboot").contains("unknown node action \"reboot\""));
        assert!(err("/api/nodes/h1/devices/..%2Fetc/remove").contains("bad device name"));
        assert!(err("/api/nodes/h1/devices/%zz/remove").contains("bad device name"));
        assert!(err("/api/nodes//restart").contains("names no host"));
    }
}
