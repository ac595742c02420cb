//! Pure: the scheduler's answer into the lines `ctl` prints and its exit code.

use super::{Request, EXIT_DONE, EXIT_REFUSED, EXIT_UNREACHABLE};
use serde_json::Value;

/// The lines to print for the answer (`status`, `body`) to `request`, and the exit code.
pub fn answer(request: &Request, status: u16, body: &[u8]) -> (i32, Vec<String>) {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if matches!(status, 401 | 403) {
        return (
            EXIT_UNREACHABLE,
            vec![format!(
                "not allowed ({status}): {}",
                error_text(&json, body)
            )],
        );
    }
    match request {
        Request::Write(_) => outcome(status, &json, body),
        Request::Status if status == 200 => (EXIT_DONE, plan(&json)),
        Request::Events if status == 200 => (EXIT_DONE, events(&json)),
        _ => (
            EXIT_REFUSED,
            vec![format!("failed ({status}): {}", error_text(&json, body))],
        ),
    }
}

/// A write's outcome, one line: `restart h1: accepted: ...`; not accepted exits non-zero.
fn outcome(status: u16, json: &Value, body: &[u8]) -> (i32, Vec<String>) {
    let field = |k: &str| json.get(k).and_then(Value::as_str);
    let line = match (field("action"), field("target"), field("outcome")) {
        (Some(action), Some(target), Some(word)) => format!(
            "{action} {target}: {word}: {}",
            field("message").unwrap_or_default()
        ),
        _ => format!("failed ({status}): {}", error_text(json, body)),
    };
    let code = if status == 200 {
        EXIT_DONE
    } else {
        EXIT_REFUSED
    };
    (code, vec![line])
}

/// `{"error","detail"}`, or the body's first line when it is not that.
fn error_text(json: &Value, body: &[u8]) -> String {
    let field = |k: &str| {
        json.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match (field("error"), field("detail")) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_string(),
        _ => String::from_utf8_lossy(body)
            .lines()
            .next()
            .unwrap_or("no answer")
            .chars()
            .take(300)
            .collect(),
    }
}

/// `/api/plan`: one summary line, then one per listed node with its first step not done.
fn plan(json: &Value) -> Vec<String> {
    let s = |v: &Value| v.as_str().unwrap_or("?").to_string();
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let counts = &json["counts"];
    let paused = match json.get("paused").and_then(Value::as_bool) {
        Some(true) => ", paused",
        _ => "",
    };
    let mut out = vec![format!(
        "plan {} generation {}{paused}: steps {} done, {} in progress, {} waiting, {} pending, {} failed",
        s(&json["kind"]),
        n(&json["generation"]),
        n(&counts["done"]),
        n(&counts["in-progress"]),
        n(&counts["waiting"]),
        n(&counts["pending"]),
        n(&counts["failed"]),
    )];
    for node in json["nodes"].as_array().into_iter().flatten() {
        let steps = node["steps"].as_array().into_iter().flatten();
        let Some(step) = steps.into_iter().find(|st| st["state"] != "done") else {
            continue;
        };
        let reason = step["reason"]
            .as_str()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        out.push(format!(
            "  {}: {} {}{reason}",
            s(&node["hostname"]),
            s(&step["step"]),
            s(&step["state"])
        ));
    }
    if let Some(more) = json.get("truncated").and_then(Value::as_u64) {
        out.push(format!("  and {more} more node(s) not listed"));
    }
    out
}

/// `/api/events`: one line each, newest first, as the scheduler lists them.
fn events(json: &Value) -> Vec<String> {
    let list = json["events"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return vec!["no events".into()];
    }
    list.iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            let at = e["at_ms"].as_u64().unwrap_or(0);
            let when = crate::logging::utc_millis(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(at),
            );
            format!(
                "{when} {} {} {}: {}: {}",
                s("kind"),
                s("action"),
                s("target"),
                s("outcome"),
                s("message")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write() -> Request {
        Request::Write("/api/nodes/h1/restart".into())
    }

    #[test]
    fn a_write_prints_its_outcome_in_one_line_and_a_refusal_exits_non_zero() {
        let done = br#"{"action":"restart","target":"h1","outcome":"accepted","message":"killed"}"#;
        assert_eq!(
            answer(&write(), 200, done),
            (EXIT_DONE, vec!["restart h1: accepted: killed".to_string()])
        );
        let refused =
            br#"{"action":"restart","target":"h1","outcome":"refused","message":"h1 is in a reboot"}"#;
        assert_eq!(
            answer(&write(), 409, refused),
            (
                EXIT_REFUSED,
                vec!["restart h1: refused: h1 is in a reboot".to_string()]
            )
        );
        let bad_token = br#"{"error":"unauthorized","detail":"wrong operator token"}"#;
        let (code, lines) = answer(&write(), 401, bad_token);
        assert_eq!(code, EXIT_UNREACHABLE);
        assert_eq!(
            lines,
            ["not allowed (401): unauthorized: wrong operator token"]
        );
        let (code, lines) = answer(&write(), 502, b"Bad Gateway\n<html>");
        assert_eq!(
            (code, lines[0].as_str()),
            (EXIT_REFUSED, "failed (502): Bad Gateway")
        );
    }

    #[test]
    fn the_plan_and_the_events_read_as_lines() {
        let plan = br#"{"kind":"upgrade","generation":3,"paused":true,
            "counts":{"pending":2,"in-progress":1,"waiting":1,"done":5,"failed":0},
            "nodes":[{"hostname":"h2","steps":[{"step":"upgrade-lia","state":"done"},
              {"step":"upgrade-sds","state":"waiting","reason":"waiting: pool pd1/sp1 rebuilds"}]}]}"#;
        let (code, lines) = answer(&Request::Status, 200, plan);
        assert_eq!(code, EXIT_DONE);
        assert_eq!(
            lines,
            [
                "plan upgrade generation 3, paused: steps 5 done, 1 in progress, 1 waiting, 2 pending, 0 failed",
                "  h2: upgrade-sds waiting (waiting: pool pd1/sp1 rebuilds)"
            ]
        );
        let events = br#"{"events":[{"at_ms":0,"kind":"action","action":"pause","target":"plan","outcome":"accepted","message":"paused"}]}"#;
        let (_, lines) = answer(&Request::Events, 200, events);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].ends_with(" action pause plan: accepted: paused"),
            "{}",
            lines[0]
        );
        assert!(lines[0].starts_with("1970-01-01"), "{}", lines[0]);
    }
}
