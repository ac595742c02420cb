//! `/metrics` read back by a real Prometheus parser: the Python client's, as dashboards and
//! scrapers read it.

use std::process::Command;

/// A python3 that has Debian's `python3-prometheus-client` (scripts/test.sh installs it):
/// the one on the path, else the system's.
fn python_with_prometheus_client() -> &'static str {
    for python in ["python3", "/usr/bin/python3"] {
        let ok = Command::new(python)
            .args(["-c", "import prometheus_client"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return python;
        }
    }
    panic!("no python3 with prometheus_client: install python3-prometheus-client (scripts/test.sh does)")
}

/// Every sample of `text` as the Prometheus client's parser reads it (`name`, `labels`,
/// `value`); a text it refuses fails the test with the parser's error.
pub fn parse(text: &str) -> Vec<serde_json::Value> {
    const PARSE: &str = "import json, sys\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = []\n\
        for family in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in family.samples:\n\
        \x20       out.append({'name': s.name, 'labels': s.labels, 'value': s.value})\n\
        print(json.dumps(out))\n";
    let mut child = Command::new(python_with_prometheus_client())
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 starts");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(text.as_bytes())
            .expect("text to the parser");
    }
    let out = child.wait_with_output().expect("parser ends");
    assert!(
        out.status.success(),
        "the Prometheus parser refused /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the parser's samples as JSON")
}
