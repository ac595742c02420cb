//! The gateway client against the dev cluster's HTTPS gateway, started in-process: login and
//! token reuse, re-login after expiry, retries of injected 500s, TLS with and without a CA,
//! typed errors that carry the gateway's code and never the password; and every typed call
//! answered by the dev gateway with the fields the real-shaped fixtures carry.

use devcluster::gateway::{self, GatewayConfig as SimConfig, GatewayHandle, MdmIps};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use storage_framework::gateway::api;
use storage_framework::gateway::client::{
    code, CallCounters, GatewayClient, GatewayConfig, GatewayError,
};
use storage_framework::gateway::trust::{FirstUse, Trust};
use storage_framework::gateway::types::{
    Device, DeviceInfo, NewDevice, NewProtectionDomain, NewSds, NewStoragePool, ProtectionDomain,
    Sdc, Sds, StatisticsById, StoragePool, System,
};
use storage_framework::secret::Secret;
use storage_framework::tls::Fingerprint;

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
        let systems = api::systems(&mut c).expect("systems");
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
    api::version(&mut c).expect("version");
    gw.expire_tokens();
    let v = api::version(&mut c).expect("version after expiry");
    assert_eq!(v, "2.0");
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
        api::version(&mut c).is_ok(),
        "two 500s are within 3 retries"
    );
    gw.fail_until_cleared();
    let before = c.requests();
    let err = api::version(&mut c).expect_err("a gateway failing for good");
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
    api::version(&mut c).expect("version");
    gw.fail_until_cleared();
    api::version(&mut c).expect_err("a gateway failing for good");
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
    let absent = api::protection_domain_id(&mut c, "absent").expect("query");
    assert_eq!(absent, None);
    let pd = api::protection_domain_id(&mut c, "default").expect("query");
    assert!(pd.is_some_and(|id| id.len() == 16));
    let before = c.requests();
    let new = NewProtectionDomain {
        name: "default".into(),
    };
    let err = api::create_protection_domain(&mut c, &new).expect_err("duplicate name");
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

    // The gateway's own self-signed CA certificate, which names no IP address: accepted as
    // the very certificate given.
    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::Ca(right);
    let mut c = GatewayClient::new(cfg).expect("client");
    c.login()
        .expect("login with the gateway's own certificate as CA");
    assert!(
        !c.verified_by_chain(),
        "a pin, not a chain REX-Ray could check"
    );

    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::Ca(wrong);
    let mut c = GatewayClient::new(cfg).expect("client");
    let err = c.login().expect_err("a wrong CA");
    assert!(matches!(err, GatewayError::Tls { .. }), "{err:?}");
    assert!(err.to_string().contains("-storage.gateway.cacert"), "{err}");

    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::Ca(dir.join("missing.pem"));
    let err = GatewayClient::new(cfg).expect_err("a missing CA file");
    assert!(err.to_string().contains("missing.pem"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn fingerprint(gw: &GatewayHandle) -> Fingerprint {
    Fingerprint::of(&gw.certificate_der())
}

#[test]
fn a_pinned_certificate_is_accepted_and_another_refused_naming_both() {
    let gw = start();
    let other = start();
    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::Pinned(vec![fingerprint(&other), fingerprint(&gw)]);
    let mut c = GatewayClient::new(cfg).expect("client");
    c.login().expect("one of the pins");

    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::Pinned(vec![fingerprint(&other)]);
    let mut c = GatewayClient::new(cfg).expect("client");
    let err = c.login().expect_err("not pinned");
    assert!(matches!(err, GatewayError::Tls { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&fingerprint(&gw).to_string()), "{text}");
    assert!(text.contains(&fingerprint(&other).to_string()), "{text}");
    assert!(text.contains("-storage.gateway.fingerprint"), "{text}");
}

#[test]
fn first_use_trusts_the_first_certificate_and_refuses_a_renewed_one() {
    let gw = start();
    let first = Arc::new(FirstUse::new(None));
    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::FirstUse(first.clone());
    let mut c = GatewayClient::new(cfg).expect("client");
    api::systems(&mut c).expect("first use");
    let old = fingerprint(&gw);
    assert_eq!(c.newly_trusted(), Some(old));
    assert_eq!(c.newly_trusted(), None, "handed over once");

    gw.renew_certificate().expect("renew");
    let new = fingerprint(&gw);
    let err = api::systems(&mut c).expect_err("a changed certificate");
    let text = err.to_string();
    assert!(
        text.contains(&old.to_string()) && text.contains(&new.to_string()),
        "{text}"
    );
    assert!(
        text.contains(&format!("-storage.gateway.fingerprint={new}")),
        "{text}"
    );
    assert_eq!(first.trusted(), Some(old), "the first one stays trusted");
    assert!(!text.contains(PASSWORD));
}

#[test]
fn insecure_accepts_any_certificate() {
    let gw = start();
    let mut cfg = config(&gw, PASSWORD);
    cfg.trust = Trust::Insecure;
    let mut c = GatewayClient::new(cfg).expect("client");
    api::systems(&mut c).expect("unverified");
    gw.renew_certificate().expect("renew");
    api::systems(&mut c).expect("still unverified");
    assert_eq!(c.newly_trusted(), None);
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

/// A fixture under `tests/fixtures/gateway/`.
fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gateway")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every field set in `fixture` (as decoded, then written back) that is not set in `sim`; a
/// list compares its first items.
fn unset_in_sim(fixture: &Value, sim: &Value, at: &str, out: &mut Vec<String>) {
    match (fixture, sim) {
        (Value::Null, _) => {}
        (Value::Array(f), Value::Array(s)) => match (f.first(), s.first()) {
            (Some(f), Some(s)) => unset_in_sim(f, s, &format!("{at}[0]"), out),
            (Some(_), None) => out.push(format!("{at} (empty)")),
            _ => {}
        },
        (Value::Object(f), Value::Object(s)) => {
            for (key, value) in f {
                let theirs = s.get(key).unwrap_or(&Value::Null);
                unset_in_sim(value, theirs, &format!("{at}.{key}"), out);
            }
        }
        (_, Value::Null) => out.push(at.to_string()),
        _ => {}
    }
}

/// The dev gateway's answer decodes (it got here) and sets every field the real-shaped
/// fixture sets.
fn agree<T: Serialize>(call: &str, fixture: &T, sim: &T) {
    let (f, s) = (
        serde_json::to_value(fixture).expect("fixture"),
        serde_json::to_value(sim).expect("sim"),
    );
    let mut missing = Vec::new();
    unset_in_sim(&f, &s, call, &mut missing);
    assert!(
        missing.is_empty(),
        "the dev gateway's answer to {call} lacks {missing:?}: {s}"
    );
}

fn decode_fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    api::decode("fixture", name, fixture(name)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_dev_gateway_answers_every_typed_call_as_the_fixtures_do() {
    let gw = start();
    let mut c = client(&gw);
    let ip = "10.1.0.5";
    gw.sdc_installed(ip, "10.0.0.11").expect("SDC");

    let version = api::version(&mut c).expect("version");
    agree(
        "version",
        &decode_fixture::<String>("version.json"),
        &version,
    );
    let systems = api::systems(&mut c).expect("systems");
    agree(
        "list systems",
        &decode_fixture::<Vec<System>>("systems.json"),
        &systems,
    );

    let pd = api::create_protection_domain(&mut c, &NewProtectionDomain { name: "pd2".into() })
        .expect("create pd");
    assert_eq!(
        api::protection_domain_id(&mut c, "pd2").expect("query"),
        Some(pd.clone())
    );
    let new_pool = NewStoragePool {
        name: "sp2".into(),
        protection_domain_id: pd.clone(),
    };
    let pool = api::create_storage_pool(&mut c, &new_pool).expect("create pool");
    assert_eq!(
        api::storage_pool_id(&mut c, "pd2", "sp2").expect("query"),
        Some(pool.clone())
    );
    let pds: Vec<ProtectionDomain> = api::protection_domains(&mut c).expect("pds");
    agree(
        "list protection domains",
        &decode_fixture::<Vec<ProtectionDomain>>("protection_domains.json"),
        &pds,
    );
    let pools: Vec<StoragePool> = api::storage_pools(&mut c).expect("pools");
    agree(
        "list storage pools",
        &decode_fixture::<Vec<StoragePool>>("storage_pools.json"),
        &pools,
    );

    let mut new_sds = NewSds::at("h1", &pd, ip);
    new_sds.device_info_list.push(DeviceInfo {
        device_path: "/dev/sdb".into(),
        storage_pool_id: pool.clone(),
    });
    let sds_id = api::create_sds(&mut c, &new_sds).expect("create sds");
    let device = NewDevice {
        device_current_pathname: "/dev/sdc".into(),
        sds_id: sds_id.clone(),
        storage_pool_id: pool.clone(),
    };
    api::create_device(&mut c, &device).expect("create device");
    assert_eq!(
        api::sds_id(&mut c, "h1").expect("query"),
        Some(sds_id.clone())
    );
    let sds = api::sds(&mut c, &sds_id).expect("sds");
    assert_eq!(sds.ips().collect::<Vec<_>>(), [ip]);
    agree("get SDS", &decode_fixture::<Sds>("sds.json"), &sds);
    let sdss = api::sdss(&mut c).expect("sdss");
    agree("list SDSs", &decode_fixture::<Vec<Sds>>("sdss.json"), &sdss);
    let on_sds = api::sds_devices(&mut c, &sds_id).expect("devices");
    let paths: Vec<&str> = on_sds
        .iter()
        .map(|d| d.device_current_path_name.as_str())
        .collect();
    assert_eq!(paths, ["/dev/sdb", "/dev/sdc"]);
    agree(
        "list SDS devices",
        &decode_fixture::<Vec<Device>>("devices.json"),
        &on_sds,
    );
    let all = api::devices(&mut c).expect("devices");
    agree(
        "list devices",
        &decode_fixture::<Vec<Device>>("devices.json"),
        &all,
    );

    let sdcs = api::sdcs(&mut c).expect("sdcs");
    assert!(
        sdcs.iter().any(|s| s.sdc_ip == ip && s.connected()),
        "{sdcs:?}"
    );
    agree("list SDCs", &decode_fixture::<Vec<Sdc>>("sdcs.json"), &sdcs);
    assert!(api::sdc_id(&mut c, ip).expect("query").is_some());

    let stats = api::pool_statistics(&mut c, std::slice::from_ref(&pool)).expect("stats");
    assert!(stats[&pool].max_capacity_in_kb > 0, "{stats:?}");
    // Keyed by pool id: the figures of one pool against the fixture's one.
    let recorded = decode_fixture::<StatisticsById>("pool_statistics.json");
    agree(
        "query pool statistics",
        &recorded.values().next(),
        &stats.values().next(),
    );

    let taken = api::create_device(&mut c, &device).expect_err("the device is there");
    assert_eq!(taken.error_code(), Some(code::DEVICE_ALREADY_EXISTS));
}

/// Every number the fixture has above zero is above zero in the dev gateway's answer too
/// (the figures differ; what is degraded must show as degraded).
fn nonzero_where_the_fixture_is(call: &str, fixture: &Value, sim: &Value) {
    let (Value::Object(f), Value::Object(s)) = (fixture, sim) else {
        panic!("{call}: not objects");
    };
    for (key, value) in f {
        let theirs = s.get(key).and_then(Value::as_u64).unwrap_or(0);
        if value.as_u64().unwrap_or(0) > 0 {
            assert!(theirs > 0, "{call}: {key} is 0 in {sim}");
        }
    }
}

#[test]
fn the_dev_gateways_injected_faults_read_as_the_degraded_fixtures() {
    use devcluster::gateway::HealthFault;
    let gw = start();
    let mut c = client(&gw);
    let ip = "10.1.0.7";
    gw.sdc_installed(ip, "10.0.0.11").expect("SDC");
    let pool = api::storage_pool_id(&mut c, "default", "default")
        .expect("query")
        .expect("the pre-configured pool");
    let pd = api::protection_domain_id(&mut c, "default")
        .expect("query")
        .expect("the pre-configured domain");
    let mut new_sds = NewSds::at("h1", &pd, ip);
    new_sds.device_info_list.push(DeviceInfo {
        device_path: "/dev/sdb".into(),
        storage_pool_id: pool.clone(),
    });
    api::create_sds(&mut c, &new_sds).expect("create sds");
    for fault in [
        HealthFault::SdsConnected {
            ip: ip.into(),
            connected: false,
        },
        HealthFault::SdcConnected {
            ip: ip.into(),
            connected: false,
        },
        HealthFault::DeviceFailed {
            ip: ip.into(),
            path: "/dev/sdb".into(),
            failed: true,
        },
        HealthFault::MdmDegraded(true),
        HealthFault::Rebuild(Duration::from_secs(3600)),
        HealthFault::Fill(12),
    ] {
        gw.inject(fault).expect("fault");
    }

    let sds = &api::sdss(&mut c).expect("sdss")[0];
    let want = &decode_fixture::<Vec<Sds>>("degraded/sdss.json")[0];
    assert_eq!(
        (
            &sds.mdm_connection_state,
            &sds.membership_state,
            &sds.sds_state
        ),
        (
            &want.mdm_connection_state,
            &want.membership_state,
            &want.sds_state
        )
    );
    let device = &api::devices(&mut c).expect("devices")[0];
    let want = &decode_fixture::<Vec<Device>>("degraded/devices.json")[0];
    assert_eq!(
        (&device.device_state, &device.error_state),
        (&want.device_state, &want.error_state)
    );
    let sdc = &api::sdcs(&mut c).expect("sdcs")[0];
    let want = &decode_fixture::<Vec<Sdc>>("degraded/sdcs.json")[0];
    assert_eq!(sdc.mdm_connection_state, want.mdm_connection_state);
    assert!(!sdc.connected());
    let cluster = &api::systems(&mut c).expect("systems")[0].mdm_cluster;
    let want = &decode_fixture::<Vec<System>>("degraded/systems.json")[0].mdm_cluster;
    assert_eq!(
        (
            &cluster.cluster_state,
            cluster.good_nodes_num,
            cluster.good_replicas_num
        ),
        (
            &want.cluster_state,
            want.good_nodes_num,
            want.good_replicas_num
        )
    );
    let status = |m: &storage_framework::gateway::types::MdmCluster| {
        m.slaves
            .iter()
            .map(|s| s.status.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(status(cluster), status(want));

    let stats = api::pool_statistics(&mut c, std::slice::from_ref(&pool)).expect("stats");
    let recorded = fixture("degraded/pool_statistics.json");
    nonzero_where_the_fixture_is(
        "query pool statistics",
        recorded
            .as_object()
            .and_then(|o| o.values().next())
            .expect("one pool"),
        &serde_json::to_value(stats[&pool]).expect("stats"),
    );
}

/// The rollout's gate counts a node's disruptive step as seen back by a poll whose `read_ms`
/// is after the step ended: a poll's figures must not be older than its stamp, so it carries
/// the time its first read began, not the time its last answer came.
#[test]
fn a_health_poll_is_stamped_with_when_its_reads_began() {
    use storage_framework::scheduler::gateway_work::reconcile::Reconciler;
    let mdm = MdmIps {
        primary: "10.0.0.11".into(),
        secondary: "10.0.0.12".into(),
        tiebreaker: "10.0.0.13".into(),
    };
    let mut sim = SimConfig::new(PASSWORD, mdm);
    sim.latency = Duration::from_millis(40);
    let gw = gateway::start(sim).unwrap_or_else(|e| panic!("gateway: {e}"));
    let mut r = Reconciler::new(client(&gw));
    let clock = storage_framework::clock::system();
    let before = clock.now_ms();
    let known = [("default".to_string(), "default".to_string())];
    let poll = r.health(&known, 80.0, &*clock, &[]).expect("health poll");
    let after = clock.now_ms();
    assert!(after - before >= 5 * 40, "a poll of five reads or more");
    assert!(
        poll.read_ms < before + 40,
        "stamped {} ms after the poll began ({} ms in all)",
        poll.read_ms - before,
        after - before
    );
}

/// `removeSds` and `removeDevice` as the fixtures show them under way: listed `RemovePending`
/// while their data moves (the pool rebalancing), asked again without harm, gone after; and
/// refused with the gateway's code when the SDSs that stay could not hold the data.
#[test]
fn removals_are_pending_while_data_moves_then_gone_or_refused_without_room() {
    use api::Removal;
    let gw = start();
    gw.set_rebuild_time(Duration::from_millis(400))
        .expect("rebuild time");
    let mut c = client(&gw);
    let pd = api::create_protection_domain(&mut c, &NewProtectionDomain { name: "pd3".into() })
        .expect("create pd");
    let new_pool = NewStoragePool {
        name: "sp3".into(),
        protection_domain_id: pd.clone(),
    };
    let pool = api::create_storage_pool(&mut c, &new_pool).expect("create pool");
    let mut ids = Vec::new();
    for (i, ip) in ["10.3.0.1", "10.3.0.2", "10.3.0.3"].into_iter().enumerate() {
        let mut new_sds = NewSds::at(&format!("r{i}"), &pd, ip);
        for path in ["/dev/sdb", "/dev/sdc"] {
            new_sds.device_info_list.push(DeviceInfo {
                device_path: path.into(),
                storage_pool_id: pool.clone(),
            });
        }
        ids.push(api::create_sds(&mut c, &new_sds).expect("create sds"));
    }
    assert_eq!(
        api::remove_sds(&mut c, &ids[0]).expect("remove"),
        Removal::Started
    );
    assert_eq!(
        api::remove_sds(&mut c, &ids[0]).expect("asked again"),
        Removal::Started
    );
    let sds = api::sds(&mut c, &ids[0]).expect("still listed");
    let want = &decode_fixture::<Vec<Sds>>("removing/sdss.json")[0];
    assert_eq!(sds.sds_state, want.sds_state);
    let stats = api::pool_statistics(&mut c, std::slice::from_ref(&pool)).expect("stats");
    assert!(
        stats[&pool].pending_rebalance_capacity_in_kb > 0,
        "{stats:?}"
    );

    let device = api::sds_devices(&mut c, &ids[1]).expect("devices")[0].clone();
    assert_eq!(
        api::remove_device(&mut c, &device.id).expect("remove device"),
        Removal::Started
    );
    let listed = api::devices(&mut c).expect("devices");
    let pending = listed.iter().find(|d| d.id == device.id).expect("listed");
    let want = &decode_fixture::<Vec<Device>>("removing/devices.json")[0];
    assert_eq!(pending.device_state, want.device_state);

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // The SDS's two devices and the other one.
    while api::devices(&mut c).expect("devices").len() > 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the removals never ended"
        );
        std::thread::yield_now();
    }
    assert_eq!(api::sdss(&mut c).expect("sdss").len(), 2);
    assert_eq!(
        api::remove_sds(&mut c, &ids[0]).expect("gone"),
        Removal::Gone
    );
    let left = api::devices(&mut c).expect("devices");
    assert!(left
        .iter()
        .all(|d| d.sds_id.as_deref() != Some(ids[0].as_str())));
    assert!(
        left.iter().all(|d| d.id != device.id),
        "the device went too"
    );

    // Two SDSs left: with data in use, neither may go.
    gw.inject(gateway::HealthFault::Fill(30)).expect("fill");
    let e = api::remove_sds(&mut c, &ids[2]).unwrap_err();
    assert_eq!(e.error_code(), Some(code::NOT_ENOUGH_CAPACITY), "{e}");
    assert!(e.to_string().contains("Not enough capacity"), "{e}");
    assert_eq!(api::sdss(&mut c).expect("sdss").len(), 2);
}
