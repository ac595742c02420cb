//! The gateway client against the dev cluster's HTTPS gateway, started in-process: login and
//! token reuse, re-login after expiry, retries of injected 500s, TLS with and without a CA,
//! typed errors that carry the gateway's code and never the password.

use devcluster::gateway::{self, GatewayConfig as SimConfig, GatewayHandle, MdmIps};
use serde_json::json;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use storage_framework::gateway::client::{
    code, CallCounters, GatewayClient, GatewayConfig, GatewayError,
};
use storage_framework::secret::Secret;

const PASSWORD: &str = "Gw-Pa55word!";

fn start() -> GatewayHandle {
    let mdm = MdmIps {
        primary: "10.0.0.11".into(),
        secondary: "10.0.0.12".into(),
        tiebreaker: "10.0.0.13".into(),
    };
    gateway::start(SimConfig::new(PASSWORD, mdm)).unwrap_or_else(|e| panic!("gateway: {e}"))
}

fn config(gw: &GatewayHandle, password: &str) -> GatewayConfig {
    let mut c = GatewayConfig::new(&gw.addr().to_string(), Secret::new(password), "2.0");
    c.retry_base = Duration::from_millis(10);
    c.request_timeout = Duration::from_secs(10);
    c
}

fn client(gw: &GatewayHandle) -> GatewayClient {
    GatewayClient::new(config(gw, PASSWORD)).unwrap_or_else(|e| panic!("client: {e}"))
}

#[test]
fn logs_in_once_and_reuses_the_token() {
    let gw = start();
    let mut c = client(&gw);
    for _ in 0..3 {
        let systems = c.list("/api/types/System/instances").expect("systems");
        assert_eq!(systems.len(), 1);
    }
    // One login, three calls.
    assert_eq!(c.requests(), 4);
    assert_eq!(gw.snapshot()["activeTokens"], json!(1));
}

#[test]
fn logs_in_again_once_after_the_token_expires() {
    let gw = start();
    let mut c = client(&gw);
    c.get("/api/version").expect("version");
    gw.expire_tokens();
    let v = c.get("/api/version").expect("version after expiry");
    assert_eq!(v, json!("2.0"));
    // login, call, refused call, login, call.
    assert_eq!(c.requests(), 5);
}

#[test]
fn retries_injected_500s_and_gives_up_after_the_bound() {
    let gw = start();
    let mut c = client(&gw);
    c.login().expect("login");
    gw.fail_next(2);
    assert!(
        c.get("/api/version").is_ok(),
        "two 500s are within 3 retries"
    );
    gw.fail_until_cleared();
    let before = c.requests();
    let err = c
        .get("/api/version")
        .expect_err("a gateway failing for good");
    assert!(
        matches!(err, GatewayError::Api { status: 500, .. }),
        "{err}"
    );
    assert_eq!(c.requests() - before, 4, "one attempt plus 3 retries");
    gw.clear_faults();
}

#[test]
fn counts_every_request_and_each_failed_call_into_shared_counters() {
    let gw = start();
    let counters = Arc::new(CallCounters::default());
    let mut c = client(&gw).with_counters(Arc::clone(&counters));
    c.get("/api/version").expect("version");
    gw.fail_until_cleared();
    c.get("/api/version")
        .expect_err("a gateway failing for good");
    gw.clear_faults();
    // login, call, then one attempt plus 3 retries of the failing call.
    assert_eq!(counters.calls.load(Relaxed), 6);
    assert_eq!(counters.calls.load(Relaxed), c.requests());
    assert_eq!(
        counters.errors.load(Relaxed),
        1,
        "one failed call, not one per attempt"
    );
}

#[test]
fn mdm_answers_are_not_retried_and_carry_their_code() {
    let gw = start();
    let mut c = client(&gw);
    let absent = c
        .query_id("ProtectionDomain", &json!({"name": "absent"}))
        .expect("query");
    assert_eq!(absent, None);
    let pd = c
        .query_id("ProtectionDomain", &json!({"name": "default"}))
        .expect("query");
    assert!(pd.is_some_and(|id| id.len() == 16));
    let before = c.requests();
    let err = c
        .create("ProtectionDomain", &json!({"name": "default"}))
        .expect_err("duplicate name");
    assert_eq!(err.error_code(), Some(code::PD_NAME_IN_USE));
    assert!(err.to_string().contains("already in use"), "{err}");
    assert_eq!(c.requests() - before, 1, "an MDM verdict is not retried");
}

#[test]
fn a_wrong_password_is_refused_without_showing_it() {
    let gw = start();
    let wrong = "Wr0ng-Secret-Value";
    let mut c = GatewayClient::new(config(&gw, wrong)).expect("client");
    let err = c.login().expect_err("wrong password");
    assert!(matches!(err, GatewayError::LoginRefused { .. }), "{err}");
    let text = format!("{err} {err:?} {c:?}");
    assert!(text.contains("-storage.password"), "{text}");
    assert!(!text.contains(wrong) && !text.contains(PASSWORD), "{text}");
}

#[test]
fn verifies_against_a_given_ca_and_fails_clearly_with_a_wrong_one() {
    let gw = start();
    let other = start();
    let dir = std::env::temp_dir().join(format!("gwclient-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let right = dir.join("right.pem");
    let wrong = dir.join("wrong.pem");
    std::fs::write(&right, gw.certificate_pem()).expect("write");
    std::fs::write(&wrong, other.certificate_pem()).expect("write");

    let mut cfg = config(&gw, PASSWORD);
    cfg.ca_cert = Some(right);
    let mut c = GatewayClient::new(cfg).expect("client");
    c.login().expect("login with the pinned CA");

    let mut cfg = config(&gw, PASSWORD);
    cfg.ca_cert = Some(wrong);
    let mut c = GatewayClient::new(cfg).expect("client");
    let err = c.login().expect_err("a wrong CA");
    assert!(matches!(err, GatewayError::Tls { .. }), "{err:?}");
    assert!(err.to_string().contains("-storage.gateway.cacert"), "{err}");

    let mut cfg = config(&gw, PASSWORD);
    cfg.ca_cert = Some(dir.join("missing.pem"));
    let err = GatewayClient::new(cfg).expect_err("a missing CA file");
    assert!(err.to_string().contains("missing.pem"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_gateway_is_reported_as_such() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let mut cfg = GatewayConfig::new(&format!("127.0.0.1:{port}"), Secret::new(PASSWORD), "2.0");
    cfg.retries = 1;
    cfg.retry_base = Duration::from_millis(10);
    let mut c = GatewayClient::new(cfg).expect("client");
    let err = c.login().expect_err("nothing listens");
    assert!(matches!(err, GatewayError::Unreachable { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert_eq!(c.requests(), 2);
}
