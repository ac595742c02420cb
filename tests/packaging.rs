//! The launcher app definitions in `packaging/`: valid against Marathon's JSON schema (checked
//! by a real validator, Python `jsonschema`), and exactly the shape of deployment-spec.md
//! sections 2.1, 2.2 and 9.

#[path = "support/schema.rs"]
mod schema;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const LATEST: &str = "packaging/storage-scheduler-latest.json";
const RELEASE: &str = "packaging/storage-scheduler-release.json";
const CUSTOM: &str = "packaging/storage-scheduler-custom.json";

/// The flags of spec 2.2, in its order, with the value each definition carries.
const FLAGS_2_2: [(&str, &str); 10] = [
    ("-loglevel", "debug"),
    ("-rest.port", "$PORT"),
    ("-uri", "<mesos_master_host>:5050"),
    ("-storage.password", "<GATEWAY_PASSWORD>"),
    ("-storage.protectiondomain", "<PROTECTION_DOMAIN_NAME>"),
    ("-storage.storagepool", "<STORAGE_POOL_NAME>"),
    ("-storage.preconfig.primary", "<PRIMARY_MDM_IP>"),
    ("-storage.preconfig.secondary", "<SECONDARY_MDM_IP>"),
    ("-storage.preconfig.tiebreaker", "<TIEBREAKER_MDM_IP>"),
    ("-storage.preconfig.gateway", "<GATEWAY_IP>"),
];

fn path(rel: &str) -> PathBuf {
    Path::new(ROOT).join(rel)
}

fn schema() -> PathBuf {
    schema::marathon_schema()
}

fn load(rel: &str) -> Value {
    let text = std::fs::read_to_string(path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Runs the schema validator on `files`: (valid, its report).
fn validate(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(path("tests/support/validate_app.py"))
        .arg(schema())
        .args(files)
        .output()
        .expect("python3 (scripts/test.sh installs it with python3-jsonschema)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "validator did not run: {report}"
    );
    (out.status.success(), report)
}

#[test]
fn every_definition_is_valid_against_the_marathon_schema() {
    for rel in [LATEST, RELEASE, CUSTOM] {
        let (ok, report) = validate(&[path(rel)]);
        assert!(ok, "{rel} is not a valid app definition:\n{report}");
    }
}

/// The validator must reject what Marathon's schema rejects, or the test above proves nothing.
#[test]
fn the_validator_rejects_invalid_definitions() {
    let dir = std::env::temp_dir().join(format!("packaging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = load(LATEST);
    type Breaker = fn(&mut Value);
    let cases: [(&str, Breaker, &str); 5] = [
        ("cpus-string", |d| d["cpus"] = "0.2".into(), "/cpus"),
        (
            "bad-operator",
            |d| d["constraints"][0][1] = "ONLY".into(),
            "/constraints/0/1",
        ),
        ("id-upper", |d| d["id"] = "Storage_Scheduler".into(), "/id"),
        ("uris-number", |d| d["uris"][1] = 7.into(), "/uris/1"),
        ("unknown-field", |d| d["cmdline"] = "x".into(), "/"),
    ];
    for (name, break_it, where_) in cases {
        let mut doc = base.clone();
        break_it(&mut doc);
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, doc.to_string()).unwrap();
        let (ok, report) = validate(&[file]);
        assert!(!ok, "{name}: accepted by the validator");
        assert!(report.contains(&format!(": {where_}:")), "{name}: {report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn definitions_follow_the_spec_exactly() {
    for (rel, base) in [
        (
            LATEST,
            format!("{{release_url}}/v{}", env!("CARGO_PKG_VERSION")),
        ),
        (RELEASE, "{release_url}/<release_tag>".to_string()),
        (CUSTOM, "{custom_binary_url}".to_string()),
    ] {
        let d = load(rel);
        let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys.len(),
            7,
            "{rel}: only the fields of spec 2.1: {keys:?}"
        );
        assert_eq!(d["id"], "storage-scheduler", "{rel}");
        assert_eq!(
            d["uris"],
            serde_json::json!([
                format!("{base}/storage-scheduler"),
                format!("{base}/storage-executor")
            ]),
            "{rel}"
        );
        assert_eq!(d["mem"], 32, "{rel}");
        assert_eq!(d["cpus"], 0.2, "{rel}");
        assert_eq!(d["instances"], 1, "{rel}");
        assert!(d["instances"].is_u64(), "{rel}: instances is an integer");
        assert_eq!(
            d["constraints"],
            serde_json::json!([["hostname", "UNIQUE"]]),
            "{rel}"
        );
        let cmd = d["cmd"].as_str().unwrap();
        let flags = cmd
            .strip_prefix("chmod u+x storage-scheduler && ./storage-scheduler ")
            .unwrap_or_else(|| panic!("{rel}: cmd has the spec's form: {cmd}"));
        let want: Vec<String> = FLAGS_2_2.iter().map(|(f, v)| format!("{f}={v}")).collect();
        let got: Vec<&str> = flags.split(' ').collect();
        assert_eq!(
            got, want,
            "{rel}: every flag of 2.2, -name=value, once each"
        );
    }
}

/// Spec 9: latest and a specific release share one shape; only `<release_tag>` differs.
#[test]
fn latest_and_specific_release_differ_only_in_the_tag() {
    let latest = std::fs::read_to_string(path(LATEST)).unwrap();
    let release = std::fs::read_to_string(path(RELEASE)).unwrap();
    let tag = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_ne!(latest, release);
    assert_eq!(latest.replace(&tag, "<release_tag>"), release);
}
