//! The storage gateway simulator driven over real HTTPS, as the framework's gateway worker
//! will drive it: login, token reuse, listing, creation, duplicate handling, faults.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use devcluster::gateway::{self, GatewayConfig, GatewayHandle, MdmIps};
use serde_json::{json, Value};

const PASSWORD: &str = "Sio-Adm1n!";
const ACCEPT: &str = "application/json;version=2.0";
const GIB_KB: u64 = 1024 * 1024;

fn mdm() -> MdmIps {
    MdmIps {
        primary: "10.0.0.11".to_string(),
        secondary: "10.0.0.12".to_string(),
        tiebreaker: "10.0.0.13".to_string(),
    }
}

fn start(config: GatewayConfig) -> GatewayHandle {
    match gateway::start(config) {
        Ok(handle) => handle,
        Err(e) => panic!("gateway did not start: {e}"),
    }
}

fn start_default() -> GatewayHandle {
    start(GatewayConfig::new(PASSWORD, mdm()))
}

/// Independent of the simulator's own encoder, so a symmetric bug cannot hide.
fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

struct Reply {
    status: u16,
    body: Value,
    raw: String,
}

struct Client {
    agent: ureq::Agent,
    base: String,
    auth: Option<String>,
}

impl Client {
    fn new(gw: &GatewayHandle) -> Client {
        let tls = ureq::tls::TlsConfig::builder()
            .disable_verification(true)
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into();
        Client {
            agent,
            base: gw.url(),
            auth: None,
        }
    }

    /// Logs in as admin and uses the token for every later call.
    fn logged_in(gw: &GatewayHandle) -> Client {
        let mut client = Client::new(gw);
        let token = client.login(PASSWORD);
        client.use_token(&token);
        client
    }

    fn use_token(&mut self, token: &str) {
        self.auth = Some(basic("", token));
    }

    fn login(&self, password: &str) -> String {
        let reply = self.get_with("/api/login", Some(&basic("admin", password)));
        assert_eq!(reply.status, 200, "login failed: {}", reply.raw);
        match reply.body {
            Value::String(token) if !token.is_empty() => token,
            other => panic!("login answered {other}, not a JSON string"),
        }
    }

    fn finish(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
        let mut response = match response {
            Ok(r) => r,
            Err(e) => panic!("request failed at the transport level: {e}"),
        };
        let status = response.status().as_u16();
        let raw = match response.body_mut().read_to_string() {
            Ok(s) => s,
            Err(e) => panic!("cannot read the body: {e}"),
        };
        let body = if raw.is_empty() {
            Value::Null
        } else {
            match serde_json::from_str(&raw) {
                Ok(v) => v,
                Err(e) => panic!("status {status}: body is not JSON ({e}): {raw:?}"),
            }
        };
        Reply { status, body, raw }
    }

    fn get_with(&self, path: &str, auth: Option<&str>) -> Reply {
        let mut request = self
            .agent
            .get(format!("{}{path}", self.base))
            .header("Accept", ACCEPT);
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        Client::finish(request.call())
    }

    fn get(&self, path: &str) -> Reply {
        self.get_with(path, self.auth.as_deref())
    }

    fn post_raw(&self, path: &str, content_type: Option<&str>, body: &str) -> Reply {
        let mut request = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("Accept", ACCEPT);
        if let Some(auth) = &self.auth {
            request = request.header("Authorization", auth);
        }
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        Client::finish(request.send(body))
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        self.post_raw(path, Some(ACCEPT), &body.to_string())
    }

    /// POST that must succeed with `{"id": ...}`; returns the id.
    fn create(&self, type_name: &str, body: &Value) -> String {
        let reply = self.post(&format!("/api/types/{type_name}/instances"), body);
        assert_eq!(
            reply.status, 200,
            "creating {type_name} {body}: {}",
            reply.raw
        );
        match reply.body.get("id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            _ => panic!("create {type_name} answered {}", reply.raw),
        }
    }

    fn list(&self, path: &str) -> Vec<Value> {
        let reply = self.get(path);
        assert_eq!(reply.status, 200, "GET {path}: {}", reply.raw);
        match reply.body {
            Value::Array(items) => items,
            other => panic!("GET {path} answered {other}, not a list"),
        }
    }

    fn system(&self) -> Value {
        let systems = self.list("/api/types/System/instances");
        assert_eq!(systems.len(), 1, "expected one system: {systems:?}");
        systems[0].clone()
    }
}

/// Asserts the gateway's error body and returns its message.
fn assert_error(reply: &Reply, status: u16, error_code: u64) -> String {
    assert_eq!(reply.status, status, "unexpected reply {}", reply.raw);
    assert_eq!(reply.body["httpStatusCode"], json!(status), "{}", reply.raw);
    assert_eq!(reply.body["errorCode"], json!(error_code), "{}", reply.raw);
    match &reply.body["message"] {
        Value::String(m) if !m.is_empty() => m.clone(),
        _ => panic!("error without a message: {}", reply.raw),
    }
}

fn link(object: &Value, rel: &str) -> String {
    let links = object["links"].as_array().cloned().unwrap_or_default();
    for l in links {
        if l["rel"] == json!(rel) {
            if let Some(href) = l["href"].as_str() {
                return href.to_string();
            }
        }
    }
    panic!("no link {rel} in {object}")
}

fn names(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn sds_body(name: &str, ip: &str, pd: &str) -> Value {
    json!({
        "name": name,
        "protectionDomainId": pd,
        "sdsIpList": [{"SdsIp": {"ip": ip, "role": "all"}}],
    })
}

/// The preconfigured `default` domain and pool ids.
fn default_pd_and_pool(client: &Client) -> (String, String) {
    let system = client.system();
    let pds = client.list(&link(&system, "/api/System/relationship/ProtectionDomain"));
    let pd = pds
        .iter()
        .find(|pd| pd["name"] == json!("default"))
        .unwrap_or_else(|| panic!("no default domain in {pds:?}"));
    let pools = client.list(&link(pd, "/api/ProtectionDomain/relationship/StoragePool"));
    let pool = pools
        .iter()
        .find(|p| p["name"] == json!("default"))
        .unwrap_or_else(|| panic!("no default pool in {pools:?}"));
    (
        pd["id"].as_str().unwrap_or_default().to_string(),
        pool["id"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn login_answers_a_token_and_refuses_bad_credentials() {
    let gw = start_default();
    let client = Client::new(&gw);
    let token = client.login(PASSWORD);
    assert!(token.len() > 20, "token {token:?} looks too short");
    assert_ne!(
        token,
        client.login(PASSWORD),
        "tokens must differ per login"
    );

    for auth in [
        Some(basic("admin", "wrong")),
        Some(basic("someone", PASSWORD)),
        Some("Basic !!!".to_string()),
        None,
    ] {
        let reply = client.get_with("/api/login", auth.as_deref());
        assert_error(&reply, 401, 0);
    }

    // curl encodes the credentials itself: the login works for an independent client too.
    let output = Command::new("curl")
        .args(["-sk", "-u", &format!("admin:{PASSWORD}")])
        .arg(format!("{}/api/login", gw.url()))
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) => panic!("curl could not run: {e}"),
    };
    assert!(output.status.success(), "curl failed: {output:?}");
    let body: Value = match serde_json::from_slice(&output.stdout) {
        Ok(v) => v,
        Err(e) => panic!("curl got a non-JSON login reply ({e}): {output:?}"),
    };
    assert!(body.as_str().is_some_and(|t| !t.is_empty()), "{body}");
}

#[test]
fn calls_need_a_valid_token_and_expired_tokens_need_a_new_login() {
    let gw = start_default();
    let mut client = Client::new(&gw);

    assert_error(&client.get("/api/types/System/instances"), 401, 0);
    client.use_token("not-a-token");
    assert_error(&client.get("/api/types/System/instances"), 401, 0);
    // The password is not a token.
    client.use_token(PASSWORD);
    assert_error(&client.get("/api/version"), 401, 0);

    let token = client.login(PASSWORD);
    client.use_token(&token);
    assert_eq!(client.get("/api/types/System/instances").status, 200);
    // The user part is ignored; only the token counts.
    let other_user = client.get_with("/api/version", Some(&basic("admin", &token)));
    assert_eq!(other_user.status, 200, "{}", other_user.raw);

    gw.expire_tokens();
    assert_error(&client.get("/api/types/System/instances"), 401, 0);
    let token = client.login(PASSWORD);
    client.use_token(&token);
    assert_eq!(client.get("/api/types/System/instances").status, 200);

    let logout = client.get("/api/logout");
    assert_eq!(logout.status, 200, "{}", logout.raw);
    assert_error(&client.get("/api/types/System/instances"), 401, 0);
}

#[test]
fn tokens_lapse_after_their_lifetime() {
    // Not early: under an hour's lifetime the token serves request after request (an
    // expiry computed in the wrong unit or ignored would end it at once).
    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.token_lifetime = Duration::from_secs(3600);
    let long_lived = start(config);
    let client = Client::logged_in(&long_lived);
    for _ in 0..20 {
        assert_eq!(client.get("/api/version").status, 200);
    }

    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.token_lifetime = Duration::from_millis(300);
    let gw = start(config);
    let client = Client::logged_in(&gw);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let reply = client.get("/api/version");
        if reply.status == 401 {
            assert_error(&reply, 401, 0);
            break;
        }
        assert_eq!(reply.status, 200, "{}", reply.raw);
        assert!(Instant::now() < deadline, "the token never lapsed");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A new login works again.
    let fresh = Client::logged_in(&gw);
    assert_eq!(fresh.get("/api/version").status, 200);
}

#[test]
fn version_is_a_json_string_with_or_without_the_version_header() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let reply = client.get("/api/version");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, json!("2.0"));
    assert_eq!(reply.raw, "\"2.0\"");

    let Some(auth) = client.auth.clone() else {
        panic!("client has no token");
    };
    let bare = client
        .agent
        .get(format!("{}/api/version", gw.url()))
        .header("Authorization", &auth)
        .call();
    let bare = Client::finish(bare);
    assert_eq!(bare.body, json!("2.0"));
}

#[test]
fn the_system_reports_the_mdm_trio_and_its_version() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let system = client.system();
    let id = system["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(id.len(), 16, "{system}");
    assert_eq!(system["name"], json!("scaleio"));
    assert_eq!(
        system["systemVersionName"],
        json!("EMC ScaleIO Version: R2_0.10000.2072")
    );
    let cluster = &system["mdmCluster"];
    assert_eq!(cluster["clusterMode"], json!("ThreeNodes"));
    assert_eq!(cluster["clusterState"], json!("ClusteredNormal"));
    let master = &cluster["master"];
    assert_eq!(master["ips"], json!(["10.0.0.11"]));
    assert_eq!(master["managementIPs"], json!(["10.0.0.11"]));
    assert_eq!(master["role"], json!("Manager"));
    // As on real systems: no status on the master, members carry patch 0, the cluster a name.
    assert!(master.get("status").is_none(), "{master}");
    assert_eq!(cluster["slaves"][0]["status"], json!("Normal"));
    assert_eq!(master["versionInfo"], json!("R2_0.10000.0"));
    assert_eq!(cluster["name"], json!("scaleio"));
    assert_eq!(master["port"], json!(9011));
    assert!(
        master["name"].is_string() && master["id"].is_string(),
        "{master}"
    );
    assert_eq!(cluster["slaves"][0]["ips"], json!(["10.0.0.12"]));
    assert_eq!(cluster["slaves"][0]["role"], json!("Manager"));
    assert_eq!(cluster["tieBreakers"][0]["ips"], json!(["10.0.0.13"]));
    assert_eq!(cluster["tieBreakers"][0]["role"], json!("TieBreaker"));
    assert_eq!(
        cluster["tieBreakers"][0]["versionInfo"],
        json!("R2_0.10000.0")
    );

    let self_href = link(&system, "self");
    assert_eq!(self_href, format!("/api/instances/System::{id}"));
    let single = client.get(&self_href);
    assert_eq!(single.status, 200);
    assert_eq!(single.body, system);

    let (pd, pool) = default_pd_and_pool(&client);
    assert_ne!(pd, pool);
    let snapshot = gw.snapshot();
    assert_eq!(snapshot["system"]["id"], json!(id));
    assert_eq!(snapshot["protectionDomains"][0]["id"], json!(pd));
    assert_eq!(snapshot["storagePools"][0]["id"], json!(pool));
}

#[test]
fn domains_pools_sds_and_devices_are_created_and_listed() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let system = client.system();
    let system_id = system["id"].as_str().unwrap_or_default().to_string();

    let pd = client.create("ProtectionDomain", &json!({"name": "pd1"}));
    let pds = client.list(&format!(
        "/api/instances/System::{system_id}/relationships/ProtectionDomain"
    ));
    assert_eq!(names(&pds), ["default", "pd1"]);
    let pd_object = client.get(&format!("/api/instances/ProtectionDomain::{pd}"));
    assert_eq!(pd_object.status, 200);
    assert_eq!(pd_object.body["name"], json!("pd1"));
    assert_eq!(pd_object.body["systemId"], json!(system_id));

    let pool = client.create(
        "StoragePool",
        &json!({"name": "sp1", "protectionDomainId": pd}),
    );
    let pools = client.list(&format!(
        "/api/instances/ProtectionDomain::{pd}/relationships/StoragePool"
    ));
    assert_eq!(names(&pools), ["sp1"]);
    assert_eq!(pools[0]["id"], json!(pool));
    assert_eq!(pools[0]["protectionDomainId"], json!(pd));

    let sds = client.create("Sds", &sds_body("sds_10.1.0.5", "10.1.0.5", &pd));
    let sdss = client.list(&format!(
        "/api/instances/ProtectionDomain::{pd}/relationships/Sds"
    ));
    assert_eq!(sdss.len(), 1);
    assert_eq!(sdss[0]["id"], json!(sds));
    assert_eq!(sdss[0]["name"], json!("sds_10.1.0.5"));
    assert_eq!(sdss[0]["protectionDomainId"], json!(pd));
    assert_eq!(
        sdss[0]["ipList"],
        json!([{"ip": "10.1.0.5", "role": "all"}])
    );

    // The parameter is spelled deviceCurrentPathname; the object says deviceCurrentPathName.
    let device = client.create(
        "Device",
        &json!({
            "name": "/dev/xvdf",
            "deviceCurrentPathname": "/dev/xvdf",
            "storagePoolId": pool,
            "sdsId": sds,
            "testMode": "testAndActivate",
        }),
    );
    for path in [
        format!("/api/instances/Sds::{sds}/relationships/Device"),
        format!("/api/instances/StoragePool::{pool}/relationships/Device"),
    ] {
        let devices = client.list(&path);
        assert_eq!(devices.len(), 1, "{path}: {devices:?}");
        assert_eq!(devices[0]["id"], json!(device));
        assert_eq!(devices[0]["deviceCurrentPathName"], json!("/dev/xvdf"));
        assert_eq!(devices[0]["storagePoolId"], json!(pool));
        assert_eq!(devices[0]["sdsId"], json!(sds));
    }
    let single = client.get(&format!("/api/instances/Device::{device}"));
    assert_eq!(single.status, 200);
    assert_eq!(single.body["sdsId"], json!(sds));

    // Devices can also come with the SDS.
    let sds2 = client.create(
        "Sds",
        &json!({
            "name": "sds_10.1.0.6",
            "protectionDomainId": pd,
            "sdsIpList": [{"SdsIp": {"ip": "10.1.0.6", "role": "all"}}],
            "deviceInfoList": [
                {"devicePath": "/dev/xvdf", "storagePoolId": pool},
                {"devicePath": "/dev/xvdg", "storagePoolId": pool, "deviceName": "g"},
            ],
        }),
    );
    let devices = client.list(&format!("/api/instances/Sds::{sds2}/relationships/Device"));
    let paths: Vec<&Value> = devices
        .iter()
        .map(|d| &d["deviceCurrentPathName"])
        .collect();
    assert_eq!(paths, [&json!("/dev/xvdf"), &json!("/dev/xvdg")]);
    assert_eq!(client.list("/api/types/Device/instances").len(), 3);

    let snapshot = gw.snapshot();
    assert_eq!(snapshot["sds"].as_array().map(Vec::len), Some(2));
    assert_eq!(snapshot["devices"].as_array().map(Vec::len), Some(3));
    assert_eq!(snapshot["devices"][0]["path"], json!("/dev/xvdf"));
    assert_eq!(snapshot["devices"][0]["sdsId"], json!(sds));
    assert_eq!(snapshot["sds"][1]["ips"], json!(["10.1.0.6"]));
}

#[test]
fn duplicates_and_unknown_ids_fail_as_on_the_real_gateway() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let (pd, pool) = default_pd_and_pool(&client);

    let message = assert_error(
        &client.post(
            "/api/types/ProtectionDomain/instances",
            &json!({"name": "default"}),
        ),
        500,
        141,
    );
    assert!(
        message.contains("Protection Domain name already in use"),
        "{message}"
    );

    assert_error(
        &client.post(
            "/api/types/StoragePool/instances",
            &json!({"name": "default", "protectionDomainId": pd}),
        ),
        500,
        173,
    );
    // The same pool name in another domain is fine.
    let pd2 = client.create("ProtectionDomain", &json!({"name": "pd2"}));
    let pool2 = client.create(
        "StoragePool",
        &json!({"name": "default", "protectionDomainId": pd2}),
    );

    let sds = client.create("Sds", &sds_body("sds_a", "10.2.0.1", &pd));
    let message = assert_error(
        &client.post(
            "/api/types/Sds/instances",
            &sds_body("sds_b", "10.2.0.1", &pd),
        ),
        500,
        93,
    );
    assert!(
        message.contains("IP address and port already in use"),
        "{message}"
    );
    assert_error(
        &client.post(
            "/api/types/Sds/instances",
            &sds_body("sds_a", "10.2.0.2", &pd),
        ),
        500,
        98,
    );

    let device = json!({
        "deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": sds,
    });
    client.create("Device", &device);
    let message = assert_error(
        &client.post("/api/types/Device/instances", &device),
        500,
        206,
    );
    assert_eq!(
        message,
        "A device with the given name already exists in the SDS"
    );
    // The same path on another SDS is another disk.
    let other = client.create("Sds", &sds_body("sds_c", "10.2.0.3", &pd));
    client.create(
        "Device",
        &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": other}),
    );
    // A pool of another domain than the SDS's.
    assert_error(
        &client.post(
            "/api/types/Device/instances",
            &json!({"deviceCurrentPathname": "/dev/sdc", "storagePoolId": pool2, "sdsId": sds}),
        ),
        500,
        197,
    );

    let message = assert_error(
        &client.get("/api/instances/ProtectionDomain::fedcba9876543210"),
        500,
        142,
    );
    assert_eq!(message, "Could not find Protection Domain");
    assert_error(
        &client.get("/api/instances/ProtectionDomain::0123456789abcdef/relationships/Sds"),
        500,
        142,
    );
    assert_error(
        &client.get("/api/instances/StoragePool::fedcba9876543210"),
        500,
        171,
    );
    assert_error(
        &client.get("/api/instances/Sds::fedcba9876543210/relationships/Device"),
        500,
        78,
    );
    assert_error(
        &client.get("/api/instances/Device::fedcba9876543210"),
        500,
        126,
    );
    assert_error(
        &client.post(
            "/api/types/StoragePool/instances",
            &json!({"name": "x", "protectionDomainId": "ffffffff00000000"}),
        ),
        500,
        142,
    );
    assert_error(
        &client.post(
            "/api/types/Device/instances",
            &json!({"deviceCurrentPathname": "/dev/sdd", "storagePoolId": pool, "sdsId": "fedcba9876543210"}),
        ),
        500,
        78,
    );
    assert_error(
        &client.post(
            "/api/types/Device/instances",
            &json!({"deviceCurrentPathname": "/dev/sdd", "storagePoolId": "fedcba9876543210", "sdsId": sds}),
        ),
        500,
        171,
    );

    // Nothing failed half-way: exactly what succeeded is there.
    let snapshot = gw.snapshot();
    assert_eq!(
        snapshot["protectionDomains"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(snapshot["storagePools"].as_array().map(Vec::len), Some(2));
    assert_eq!(snapshot["sds"].as_array().map(Vec::len), Some(2));
    assert_eq!(snapshot["devices"].as_array().map(Vec::len), Some(2));
}

#[test]
fn malformed_requests_get_400s_and_the_gateway_keeps_serving() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let (pd, _) = default_pd_and_pool(&client);

    let reply = client.post_raw(
        "/api/types/ProtectionDomain/instances",
        Some("application/json"),
        "{not json",
    );
    assert!(
        assert_error(&reply, 400, 0).contains("not valid"),
        "{}",
        reply.raw
    );

    let reply = client.post("/api/types/StoragePool/instances", &json!({"name": "sp"}));
    let message = assert_error(&reply, 400, 0);
    assert!(message.contains("protectionDomainId"), "{message}");

    let reply = client.post(
        "/api/types/Sds/instances",
        &json!({"protectionDomainId": pd, "sdsIpList": ["10.0.0.1"]}),
    );
    assert!(
        assert_error(&reply, 400, 0).contains("SdsIp"),
        "{}",
        reply.raw
    );
    let reply = client.post(
        "/api/types/Sds/instances",
        &json!({"protectionDomainId": pd, "sdsIpList": [{"SdsIp": {"ip": "10.0.0.1", "role": "boss"}}]}),
    );
    assert_error(&reply, 400, 0);
    let reply = client.post("/api/types/ProtectionDomain/instances", &json!(["x"]));
    assert_error(&reply, 400, 0);
    let reply = client.post(
        "/api/types/ProtectionDomain/instances",
        &json!({"name": "has space"}),
    );
    assert_error(&reply, 500, 227);

    let reply = client.post_raw(
        "/api/types/ProtectionDomain/instances",
        None,
        r#"{"name":"x"}"#,
    );
    assert_error(&reply, 415, 0);

    assert_error(&client.get("/api/types/Volcano/instances"), 404, 0);
    assert_error(
        &client.get("/api/instances/ProtectionDomain::x/relationships/Nope"),
        404,
        0,
    );
    assert_error(&client.get("/api/elsewhere"), 404, 0);
    assert_error(&client.post("/api/version", &json!({})), 405, 0);

    // Plain HTTP and garbage on the TLS port: the connection is dropped, the server lives on.
    for garbage in [
        &b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0x00][..],
    ] {
        let mut raw = match TcpStream::connect(gw.addr()) {
            Ok(s) => s,
            Err(e) => panic!("cannot connect: {e}"),
        };
        let _ = raw.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = raw.write_all(garbage);
        let mut sink = Vec::new();
        // The server closes the connection: the read ends by EOF or reset, not by our timeout.
        match raw.read_to_end(&mut sink) {
            Ok(_) => {}
            Err(e) => assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "connection left open: {e}"
            ),
        }
    }
    let created = client.create("ProtectionDomain", &json!({"name": "after-garbage"}));
    assert!(!created.is_empty());
}

#[test]
fn injected_faults_give_500s_and_delays_then_clear() {
    let gw = start_default();
    let client = Client::logged_in(&gw);

    gw.fail_next(2);
    for _ in 0..2 {
        let reply = client.get("/api/version");
        assert_error(&reply, 500, 0);
    }
    assert_eq!(client.get("/api/version").status, 200);

    gw.fail_until_cleared();
    for _ in 0..3 {
        assert_error(&client.get("/api/types/System/instances"), 500, 0);
    }
    // Login fails too while the gateway is broken.
    assert_eq!(
        client
            .get_with("/api/login", Some(&basic("admin", PASSWORD)))
            .status,
        500
    );
    gw.clear_faults();
    assert_eq!(client.get("/api/types/System/instances").status, 200);

    // A delay far beyond the client's timeout: the request ends by that timeout. (The
    // delayed connection thread sleeps on after the test; nothing waits for it.)
    gw.set_delay(Duration::from_secs(30));
    let impatient: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .disable_verification(true)
                .build(),
        )
        .timeout_global(Some(Duration::from_millis(500)))
        .build()
        .into();
    match impatient.get(format!("{}/api/version", gw.url())).call() {
        Err(ureq::Error::Timeout(_)) => {}
        other => panic!("a delayed reply ended otherwise: {other:?}"),
    }
    gw.set_delay(Duration::ZERO);
    assert_eq!(client.get("/api/version").status, 200);
    assert!(gw.snapshot()["requests"].as_u64().unwrap_or(0) >= 10);
}

#[test]
fn statistics_report_capacity_per_object() {
    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.device_capacity_kb = 100 * GIB_KB;
    let gw = start(config);
    let client = Client::logged_in(&gw);
    let (pd, pool) = default_pd_and_pool(&client);
    let sds = client.create("Sds", &sds_body("sds_1", "10.3.0.1", &pd));
    client.create(
        "Device",
        &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": sds}),
    );
    let small = client.create(
        "Device",
        &json!({
            "deviceCurrentPathname": "/dev/sdc", "storagePoolId": pool, "sdsId": sds,
            "capacityLimitInKb": 50 * GIB_KB,
        }),
    );

    let stats = client.get(&format!(
        "/api/instances/StoragePool::{pool}/relationships/Statistics"
    ));
    assert_eq!(stats.status, 200, "{}", stats.raw);
    let max = 150 * GIB_KB;
    let spare = max / 10;
    assert_eq!(stats.body["maxCapacityInKb"], json!(max));
    assert_eq!(stats.body["spareCapacityInKb"], json!(spare));
    assert_eq!(stats.body["capacityInUseInKb"], json!(0));
    assert_eq!(stats.body["numOfDevices"], json!(2));
    let unit = 8 * GIB_KB;
    assert_eq!(
        stats.body["capacityAvailableForVolumeAllocationInKb"],
        json!((max - spare) / 2 / unit * unit)
    );

    let system = client.system();
    let stats = client.get(&link(&system, "/api/System/relationship/Statistics"));
    assert_eq!(stats.body["maxCapacityInKb"], json!(max));
    assert_eq!(stats.body["numOfProtectionDomains"], json!(1));
    assert_eq!(stats.body["numOfStoragePools"], json!(1));
    assert_eq!(stats.body["numOfSds"], json!(1));

    let stats = client.get(&format!(
        "/api/instances/ProtectionDomain::{pd}/relationships/Statistics"
    ));
    assert_eq!(stats.body["numOfSds"], json!(1));
    assert_eq!(stats.body["maxCapacityInKb"], json!(max));
    let stats = client.get(&format!(
        "/api/instances/Sds::{sds}/relationships/Statistics"
    ));
    assert_eq!(stats.body["numOfDevices"], json!(2));
    let stats = client.get(&format!(
        "/api/instances/Device::{small}/relationships/Statistics"
    ));
    assert_eq!(stats.body["maxCapacityInKb"], json!(50 * GIB_KB));

    assert_error(
        &client.post(
            "/api/types/Device/instances",
            &json!({
                "deviceCurrentPathname": "/dev/sdd", "storagePoolId": pool, "sdsId": sds,
                "capacityLimitInKb": 101 * GIB_KB,
            }),
        ),
        500,
        208,
    );
}

#[test]
fn experimental_mode_has_no_system_until_the_cluster_is_created() {
    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.preconfigured = None;
    let gw = start(config);
    let client = Client::logged_in(&gw);
    assert!(client.list("/api/types/System/instances").is_empty());
    assert_eq!(gw.snapshot()["system"], Value::Null);
    let reply = client.post(
        "/api/types/ProtectionDomain/instances",
        &json!({"name": "pd"}),
    );
    assert_eq!(reply.status, 500, "{}", reply.raw);

    match gw.create_system("bad name") {
        Err(e) => assert!(e.contains("bad name"), "{e}"),
        Ok(id) => panic!("a system with a space in its name was created: {id}"),
    }
    assert_eq!(gw.snapshot()["system"], Value::Null);
    let id = match gw.create_system("cluster1") {
        Ok(id) => id,
        Err(e) => panic!("create_system: {e}"),
    };
    let system = client.system();
    assert_eq!(system["id"], json!(id));
    assert_eq!(system["name"], json!("cluster1"));
    assert_eq!(system["mdmCluster"]["master"]["ips"], json!(["10.0.0.11"]));
    assert!(client
        .list(&link(&system, "/api/System/relationship/ProtectionDomain"))
        .is_empty());
    match gw.create_system("again") {
        Err(e) => assert!(e.contains("already exists"), "{e}"),
        Ok(id) => panic!("a second system {id} was created"),
    }

    let pd = client.create("ProtectionDomain", &json!({"name": "pd"}));
    client.create(
        "StoragePool",
        &json!({"name": "sp", "protectionDomainId": pd}),
    );
    assert_eq!(gw.snapshot()["storagePools"][0]["name"], json!("sp"));
}

/// `openssl x509 -text` of a PEM certificate.
fn x509_text(pem: &str) -> String {
    let dir = std::env::temp_dir().join(format!("gw-cert-{}-{}", std::process::id(), pem.len()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gateway.pem");
    std::fs::write(&file, pem).expect("write PEM");
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&file)
        .output()
        .expect("run openssl");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_certificate_is_made_like_a_real_gateways_and_can_be_renewed() {
    let gw = start_default();
    let text = x509_text(&gw.certificate_pem());
    assert!(
        text.contains("CN = scaleio-gateway") || text.contains("CN=scaleio-gateway"),
        "{text}"
    );
    assert!(text.contains("Basic Constraints: critical"), "{text}");
    assert!(text.contains("CA:TRUE"), "{text}");
    assert!(!text.contains("Subject Alternative Name"), "{text}");
    assert!(
        text.contains("Issuer: CN = scaleio-gateway")
            || text.contains("Issuer: CN=scaleio-gateway"),
        "{text}"
    );

    // An ordinary chain check refuses it even with itself as the root: a CA certificate
    // as the server's, and no name for 127.0.0.1. Clients must pin it or trust it on first use.
    let pem = gw.certificate_pem().into_bytes();
    let cert = match ureq::tls::Certificate::from_pem(&pem) {
        Ok(c) => c,
        Err(e) => panic!("certificate PEM unreadable: {e}"),
    };
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]))
        .build();
    let strict: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .tls_config(tls)
        .build()
        .into();
    assert!(strict
        .get(format!("{}/api/version", gw.url()))
        .call()
        .is_err());

    // A renewed certificate is served from the next connection on, with the same name.
    let before = gw.certificate_pem();
    assert_eq!(served_pem(&gw), before.trim());
    gw.renew_certificate().expect("renew");
    let after = gw.certificate_pem();
    assert_ne!(after, before);
    assert_eq!(served_pem(&gw), after.trim());
    assert!(x509_text(&after).contains("CA:TRUE"));
}

/// The certificate the gateway presents in a handshake now, as `openssl s_client` sees it.
fn served_pem(gw: &GatewayHandle) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &gw.addr().to_string()])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout);
    let begin = text.find("-----BEGIN CERTIFICATE-----");
    let end = text.find("-----END CERTIFICATE-----");
    match (begin, end) {
        (Some(b), Some(e)) => text[b..e + "-----END CERTIFICATE-----".len()].to_string(),
        _ => panic!("no certificate from openssl s_client:\n{text}"),
    }
}

#[test]
fn invalid_configs_are_refused_and_shutdown_frees_the_port() {
    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.mdm.secondary = "[SECONDARY MDM IP ADDRESS]".to_string();
    match gateway::start(config) {
        Err(e) => assert!(e.contains("mdm.secondary"), "{e}"),
        Ok(_) => panic!("a placeholder MDM address was accepted"),
    }
    match gateway::start(GatewayConfig::new("", mdm())) {
        Err(e) => assert!(e.contains("password"), "{e}"),
        Ok(_) => panic!("an empty password was accepted"),
    }

    let gw = start_default();
    let addr = gw.addr();
    assert!(addr.ip().is_loopback());
    assert_eq!(gw.url(), format!("https://127.0.0.1:{}", addr.port()));
    assert_eq!(Client::new(&gw).get("/api/version").status, 401);
    gw.shutdown();
    assert!(
        TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
}

fn query_id(client: &Client, type_name: &str, key: &Value) -> Reply {
    client.post(
        &format!("/api/types/{type_name}/instances/action/queryIdByKey"),
        key,
    )
}

#[test]
fn query_id_by_key_finds_domains_pools_sds_and_sdcs() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let (pd, pool) = default_pd_and_pool(&client);
    let sds = client.create("Sds", &sds_body("sds_q", "10.3.0.1", &pd));
    let sdc = match gw.sdc_installed("10.3.0.1", "10.0.0.11,10.0.0.12") {
        Ok(id) => id,
        Err(e) => panic!("SDC not registered: {e}"),
    };

    for (type_name, key, id) in [
        ("ProtectionDomain", json!({"name": "default"}), &pd),
        (
            "StoragePool",
            json!({"name": "default", "protectionDomainName": "default"}),
            &pool,
        ),
        ("Sds", json!({"name": "sds_q"}), &sds),
        ("Sdc", json!({"ip": "10.3.0.1"}), &sdc),
    ] {
        let reply = query_id(&client, type_name, &key);
        assert_eq!(reply.status, 200, "{type_name} {key}: {}", reply.raw);
        // A quoted id, exactly as the real gateway answers.
        assert_eq!(reply.raw, format!("\"{id}\""), "{type_name}");
    }
    for (type_name, key) in [
        ("ProtectionDomain", json!({"name": "absent"})),
        (
            "StoragePool",
            json!({"name": "absent", "protectionDomainName": "default"}),
        ),
        (
            "StoragePool",
            json!({"name": "default", "protectionDomainName": "absent"}),
        ),
        ("Sds", json!({"name": "absent"})),
        ("Sdc", json!({"ip": "10.9.9.9"})),
    ] {
        assert_error(&query_id(&client, type_name, &key), 500, 3);
    }
    // A key without its required field is a bad request, not "absent".
    assert_error(
        &query_id(&client, "StoragePool", &json!({"name": "default"})),
        400,
        0,
    );
}

#[test]
fn selected_statistics_answer_per_pool_id() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let (pd, pool) = default_pd_and_pool(&client);
    let sds = client.create("Sds", &sds_body("sds_s", "10.4.0.1", &pd));
    client.create(
        "Device",
        &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": sds}),
    );
    let path = "/api/types/StoragePool/instances/action/querySelectedStatistics";
    let reply = client.post(
        path,
        &json!({"ids": [pool], "properties": ["maxCapacityInKb", "capacityInUseInKb",
            "capacityAvailableForVolumeAllocationInKb", "spareCapacityInKb"]}),
    );
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let stats = &reply.body[pool.as_str()];
    assert_eq!(
        stats["maxCapacityInKb"],
        json!(100 * GIB_KB),
        "{}",
        reply.raw
    );
    assert_eq!(stats["spareCapacityInKb"], json!(10 * GIB_KB));
    assert_eq!(stats["capacityInUseInKb"], json!(0));
    assert!(stats["capacityAvailableForVolumeAllocationInKb"].as_u64() > Some(0));
    // Only what was asked for.
    assert_eq!(stats.as_object().map(|m| m.len()), Some(4), "{stats}");

    assert_error(
        &client.post(
            path,
            &json!({"ids": ["fedcba9876543210"], "properties": ["maxCapacityInKb"]}),
        ),
        500,
        171,
    );
    assert_error(
        &client.post(path, &json!({"properties": ["maxCapacityInKb"]})),
        400,
        0,
    );
}

#[test]
fn sdcs_appear_when_installed_for_this_cluster_and_disconnect_on_reboot() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    assert!(client.list("/api/types/Sdc/instances").is_empty());
    // An SDC pointed at another cluster's MDMs never shows up here.
    let refused = gw.sdc_installed("10.5.0.1", "10.9.0.1,10.9.0.2");
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("names neither MDM")),
        "{refused:?}"
    );
    let id = match gw.sdc_installed("10.5.0.1", "10.0.0.12") {
        Ok(id) => id,
        Err(e) => panic!("SDC not registered: {e}"),
    };
    let sdcs = client.list("/api/types/Sdc/instances");
    assert_eq!(sdcs.len(), 1, "{sdcs:?}");
    let sdc = &sdcs[0];
    assert_eq!(sdc["id"], json!(id));
    assert_eq!(sdc["sdcIp"], json!("10.5.0.1"));
    assert_eq!(sdc["mdmConnectionState"], json!("Connected"));
    assert_eq!(sdc["versionInfo"], json!("R2_0.10000.0"));
    assert!(
        sdc["sdcGuid"].as_str().is_some_and(|g| g.len() == 36),
        "{sdc}"
    );

    let system = client.system();
    let related = client.list(&link(&system, "/api/System/relationship/Sdc"));
    assert_eq!(related, sdcs);

    gw.set_sdc_connected("10.5.0.1", false);
    let one = client.get(&format!("/api/instances/Sdc::{id}"));
    assert_eq!(one.status, 200, "{}", one.raw);
    assert_eq!(one.body["mdmConnectionState"], json!("Disconnected"));
    // Installing again (the host is back) reconnects the same SDC.
    assert_eq!(gw.sdc_installed("10.5.0.1", "10.0.0.11").ok(), Some(id));
    assert_eq!(
        client.list("/api/types/Sdc/instances")[0]["mdmConnectionState"],
        json!("Connected")
    );
}

#[test]
fn devices_have_a_null_name_and_malformed_ids_answer_error_code_0() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let (pd, pool) = default_pd_and_pool(&client);
    let sds = client.create("Sds", &sds_body("sds_n", "10.6.0.1", &pd));
    let device = client.create(
        "Device",
        &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": sds}),
    );
    let reply = client.get(&format!("/api/instances/Device::{device}"));
    assert_eq!(reply.status, 200);
    assert!(reply.raw.contains("\"name\":null"), "{}", reply.raw);

    for path in [
        "/api/instances/Sds::nope".to_string(),
        "/api/instances/StoragePool::12/relationships/Device".to_string(),
        "/api/instances/Device::zzzzzzzzzzzzzzzz".to_string(),
    ] {
        assert_error(&client.get(&path), 500, 0);
    }
    assert_error(
        &client.post(
            "/api/types/Device/instances",
            &json!({"deviceCurrentPathname": "/dev/sdc", "storagePoolId": pool, "sdsId": "nope"}),
        ),
        500,
        0,
    );
}

#[test]
fn a_device_used_by_another_sds_on_the_host_is_refused_with_its_own_code() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let (pd, pool) = default_pd_and_pool(&client);
    let first = client.create("Sds", &sds_body("sds_1", "10.7.0.1", &pd));
    let mut second_body = sds_body("sds_2", "10.7.0.1", &pd);
    second_body["sdsPort"] = json!(7073);
    let second = client.create("Sds", &second_body);
    client.create(
        "Device",
        &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": first}),
    );
    let reply = client.post(
        "/api/types/Device/instances",
        &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": second}),
    );
    let message = assert_error(&reply, 500, 207);
    assert!(message.contains("another SDS"), "{message}");
    // The same SDS again is the plain duplicate.
    assert_error(
        &client.post(
            "/api/types/Device/instances",
            &json!({"deviceCurrentPathname": "/dev/sdb", "storagePoolId": pool, "sdsId": first}),
        ),
        500,
        206,
    );
}

#[test]
fn a_wrong_password_is_a_401_with_the_json_error_body() {
    let gw = start_default();
    let client = Client::new(&gw);
    let reply = client.get_with("/api/login", Some(&basic("admin", "not-it")));
    let message = assert_error(&reply, 401, 0);
    assert_eq!(message, "Unauthorized");
    assert!(!reply.raw.contains("not-it"));
}

/// A gateway wired to one agent's stand-in host through the control API, as the dev cluster
/// runs it; the returned handles keep it alive.
struct HostedGateway {
    gateway: std::sync::Arc<GatewayHandle>,
    root: devcluster::host::FakeRoot,
    agent_ip: String,
    control: devcluster::control::ControlHandle,
    _master: std::sync::Arc<devcluster::master::MasterHandle>,
    dir: std::path::PathBuf,
}

impl Drop for HostedGateway {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn hosted_gateway(name: &str) -> HostedGateway {
    use devcluster::{control, host, master};
    use std::sync::Arc;
    let dir = std::env::temp_dir().join(format!("gateway-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let listener = control::bind(0).expect("control API");
    let standins = host::HostStandins::new(
        env!("CARGO_BIN_EXE_storage-host-standin").into(),
        Some(listener.url()),
    );
    let master = Arc::new(
        master::start(master::MasterConfig {
            agents: 1,
            work_dir: dir.join("work"),
            host_standins: Some(standins),
            ..Default::default()
        })
        .expect("master"),
    );
    let gateway = Arc::new(start(GatewayConfig::new(PASSWORD, mdm())));
    let control = listener
        .serve(control::Targets {
            master: master.clone(),
            gateway: Some(gateway.clone()),
        })
        .expect("control API");
    let agent = master.agents().expect("agents").remove(0);
    let root = host::FakeRoot::open(&host::agent_root(&dir.join("work").join("agent-1")))
        .expect("agent 1's fake root");
    HostedGateway {
        gateway,
        root,
        agent_ip: agent.ip.to_string(),
        control,
        _master: master,
        dir,
    }
}

impl HostedGateway {
    fn start_sds(&self) {
        self.root
            .update(|s| s.add_service("sds", devcluster::host::ServiceKind::Systemd))
            .expect("start the host's SDS");
    }
}

fn sds_at(ip: &str, pd: &str, port: Option<u64>) -> Value {
    let mut body = sds_body(&format!("sds-{}", port.unwrap_or(7072)), ip, pd);
    if let Some(port) = port {
        body["sdsPort"] = json!(port);
    }
    body
}

#[test]
fn an_sds_is_refused_where_no_sds_process_runs() {
    let h = hosted_gateway("no-sds");
    let client = Client::logged_in(&h.gateway);
    let (pd, _) = default_pd_and_pool(&client);
    // The SDS package is not installed yet: nothing listens at the agent's address.
    let reply = client.post("/api/types/Sds/instances", &sds_at(&h.agent_ip, &pd, None));
    let message = assert_error(&reply, 500, 209);
    assert!(message.contains(&h.agent_ip), "{message}");
    // Nor at an address no host has.
    let reply = client.post("/api/types/Sds/instances", &sds_at("10.200.0.1", &pd, None));
    assert_error(&reply, 500, 209);
    h.start_sds();
    client.create("Sds", &sds_at(&h.agent_ip, &pd, None));
}

#[test]
fn a_second_sds_on_one_address_is_refused_on_any_port() {
    let h = hosted_gateway("second-sds");
    let client = Client::logged_in(&h.gateway);
    let (pd, _) = default_pd_and_pool(&client);
    h.start_sds();
    client.create("Sds", &sds_at(&h.agent_ip, &pd, None));
    // The host runs one SDS process, on the SDS port; it is taken.
    let mut again = sds_at(&h.agent_ip, &pd, None);
    again["name"] = json!("other");
    assert_error(&client.post("/api/types/Sds/instances", &again), 500, 93);
    let reply = client.post(
        "/api/types/Sds/instances",
        &sds_at(&h.agent_ip, &pd, Some(7073)),
    );
    assert_error(&reply, 500, 209);
    assert_eq!(client.list("/api/types/Sds/instances").len(), 1);
}

#[test]
fn a_device_is_refused_when_the_sds_host_has_no_such_path() {
    let h = hosted_gateway("no-device");
    let client = Client::logged_in(&h.gateway);
    let (pd, pool) = default_pd_and_pool(&client);
    h.start_sds();
    // An SDS added with its devices is refused as a whole when its host lacks one.
    let mut with_devices = sds_at(&h.agent_ip, &pd, None);
    with_devices["deviceInfoList"] = json!([
        {"devicePath": "/dev/xvdb", "storagePoolId": pool},
        {"devicePath": "/dev/xvdz", "storagePoolId": pool},
    ]);
    let reply = client.post("/api/types/Sds/instances", &with_devices);
    assert_error(&reply, 500, 210);
    assert!(client.list("/api/types/Sds/instances").is_empty());

    let sds = client.create("Sds", &sds_at(&h.agent_ip, &pd, None));
    let device =
        |path: &str| json!({"deviceCurrentPathname": path, "sdsId": sds, "storagePoolId": pool});
    let reply = client.post("/api/types/Device/instances", &device("/dev/xvdz"));
    let message = assert_error(&reply, 500, 210);
    assert!(message.contains("/dev/xvdz"), "{message}");
    client.create("Device", &device("/dev/xvdb"));
}

#[test]
fn replies_take_a_few_milliseconds_by_default_and_the_configured_latency_otherwise() {
    let gw = start_default();
    let client = Client::logged_in(&gw);
    let fastest = |client: &Client| {
        (0..5)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(client.get("/api/version").status, 200);
                started.elapsed()
            })
            .min()
            .unwrap_or_default()
    };
    let default = fastest(&client);
    assert!(
        default >= Duration::from_millis(2),
        "the default gateway answered in {default:?}: a real one takes milliseconds"
    );
    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.latency = Duration::from_millis(40);
    let slow = start(config);
    let taken = fastest(&Client::logged_in(&slow));
    assert!(taken >= Duration::from_millis(40), "{taken:?}");
}

impl HostedGateway {
    /// A control API request: its status and JSON answer.
    fn control(&self, path: &str) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut reply = agent
            .post(format!("{}{path}", self.control.url()))
            .send_empty()
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let body = reply.body_mut().read_to_string().unwrap_or_default();
        let status = reply.status().as_u16();
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }
}

/// `GET /control/gateway/events` of the hosted gateway.
fn events(h: &HostedGateway) -> Value {
    let url = format!("{}/control/gateway/events", h.control.url());
    let body = ureq::get(&url)
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn an_sds_whose_service_stops_or_restarts_disconnects_and_its_pool_rebuilds() {
    let h = hosted_gateway("sds-outage");
    let client = Client::logged_in(&h.gateway);
    let (pd, pool) = default_pd_and_pool(&client);
    h.start_sds();
    let sds = client.create("Sds", &sds_at(&h.agent_ip, &pd, None));
    let device = json!({"deviceCurrentPathname": "/dev/xvdb", "sdsId": sds, "storagePoolId": pool});
    client.create("Device", &device);
    let ok = |path: &str| {
        let (status, body) = h.control(path);
        assert_eq!(status, 200, "{path}: {body}");
    };
    let sds_state = || client.list("/api/types/Sds/instances")[0]["mdmConnectionState"].clone();
    let degraded = || {
        client
            .get(&format!(
                "/api/instances/StoragePool::{pool}/relationships/Statistics"
            ))
            .body["degradedHealthyCapacityInKb"]
            .as_u64()
            .unwrap()
    };
    let within = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    };
    // The gateway learns an SDS's connection by looking at its host: one stopped before the
    // first look is first seen down, which is no outage event (CI under load saw that once).
    within("the new SDS seen connected", &|| {
        sds_state() == json!("Connected")
    });
    ok("/control/gateway/rebuild-time?seconds=600");
    ok("/control/gateway/events/reset");

    // Stopped as a person at the host would: disconnected and degraded until it runs again.
    ok("/control/agents/1/service?name=sds&running=false");
    within("Disconnected", &|| sds_state() == json!("Disconnected"));
    assert!(degraded() > 0);
    let e = events(&h);
    assert_eq!(e["sds_down_now"]["default"], json!(1), "{e}");
    ok("/control/agents/1/service?name=sds&running=true");
    within("Connected", &|| sds_state() == json!("Connected"));
    assert!(degraded() > 0, "rebuilding for the rebuild time");

    // A restart between two looks (a new process) is an outage too, seen once.
    h.root
        .update(|s| {
            s.set_running("sds", false);
            s.set_running("sds", true);
        })
        .expect("restart the SDS");
    within("the restart seen", &|| {
        events(&h)["log"]
            .to_string()
            .contains("its sds process was restarted")
    });
    let e = events(&h);
    assert_eq!(e["max_sds_down_per_domain"]["default"], json!(1), "{e}");
    assert_eq!(e["data_unavailable"], json!(0), "one SDS only: {e}");
    let log = e["log"].to_string();
    assert_eq!(log.matches("disconnected").count(), 2, "{log}");

    // The host reboots: down while it is away, back (a new process) once its agent is.
    let before = events(&h)["log"].as_array().map_or(0, Vec::len);
    ok("/control/agents/1/reboot?outage_ms=1500");
    within("Disconnected while the host reboots", &|| {
        sds_state() == json!("Disconnected")
    });
    within("Connected after the reboot", &|| {
        sds_state() == json!("Connected")
    });
    let log = events(&h)["log"].clone();
    let lines: Vec<String> = log.as_array().unwrap()[before..]
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    assert!(
        lines[0].contains("disconnected: its host or sds process is down")
            && lines[1].contains("reconnected"),
        "{lines:?}"
    );

    // A short rebuild time ends the rebuild of the next outage by itself.
    ok("/control/gateway/rebuild-time?seconds=0.2");
    ok("/control/agents/1/service?name=sds&running=false");
    within("Disconnected again", &|| {
        sds_state() == json!("Disconnected")
    });
    ok("/control/agents/1/service?name=sds&running=true");
    within("rebuilt", &|| {
        sds_state() == json!("Connected") && degraded() == 0
    });
}

#[test]
fn health_faults_are_injected_through_the_control_api_and_cleared() {
    let h = hosted_gateway("health");
    let client = Client::logged_in(&h.gateway);
    let (pd, pool) = default_pd_and_pool(&client);
    h.start_sds();
    let sds = client.create("Sds", &sds_at(&h.agent_ip, &pd, None));
    let device =
        |path: &str| json!({"deviceCurrentPathname": path, "sdsId": sds, "storagePoolId": pool});
    client.create("Device", &device("/dev/xvdb"));
    h.gateway
        .sdc_installed(&h.agent_ip, "10.0.0.11")
        .expect("SDC");
    let ok = |path: &str| {
        let (status, body) = h.control(path);
        assert_eq!(status, 200, "{path}: {body}");
    };
    let sds_state = || client.list("/api/types/Sds/instances")[0]["mdmConnectionState"].clone();
    let sdc_state = || client.list("/api/types/Sdc/instances")[0]["mdmConnectionState"].clone();
    let device_states = || {
        let d = client.list("/api/types/Device/instances").remove(0);
        (d["deviceState"].clone(), d["errorState"].clone())
    };
    let cluster = || client.system()["mdmCluster"].clone();
    let stats = || {
        client
            .get(&format!(
                "/api/instances/StoragePool::{pool}/relationships/Statistics"
            ))
            .body
    };
    let normal = || {
        assert_eq!(sds_state(), json!("Connected"));
        assert_eq!(sdc_state(), json!("Connected"));
        assert_eq!(device_states(), (json!("Normal"), json!("None")));
        assert_eq!(cluster()["clusterState"], json!("ClusteredNormal"));
        let s = stats();
        for field in [
            "capacityInUseInKb",
            "degradedHealthyCapacityInKb",
            "pendingFwdRebuildCapacityInKb",
            "movingCapacityInKb",
        ] {
            assert_eq!(s[field], json!(0), "{field}");
        }
    };
    normal();

    // An SDS cut off leaves a copy of its share missing until it is back (and, with no
    // rebuild time, rebuilt at once).
    ok("/control/gateway/rebuild-time?seconds=0");
    ok("/control/gateway/sds?agent=1&connected=false");
    assert_eq!(sds_state(), json!("Disconnected"));
    let s = stats();
    assert!(
        s["degradedHealthyCapacityInKb"].as_u64().unwrap() > 0,
        "{s}"
    );
    assert!(
        s["pendingFwdRebuildCapacityInKb"].as_u64().unwrap() > 0,
        "{s}"
    );
    ok("/control/gateway/sds?agent=1&connected=true");
    assert_eq!(sds_state(), json!("Connected"));
    assert_eq!(stats()["degradedHealthyCapacityInKb"], json!(0));
    ok("/control/gateway/sds?agent=1&connected=false");
    ok("/control/gateway/sdc-connection?agent=1&connected=false");
    assert_eq!(sdc_state(), json!("Disconnected"));
    ok("/control/gateway/device?agent=1&path=/dev/xvdb&failed=true");
    assert_eq!(device_states(), (json!("Error"), json!("DeviceFailed")));
    ok("/control/gateway/mdm?degraded=true");
    let c = cluster();
    assert_eq!(c["clusterState"], json!("ClusteredDegraded"));
    assert_eq!(
        (c["goodNodesNum"].clone(), c["goodReplicasNum"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(c["slaves"][0]["status"], json!("Disconnected"));

    ok("/control/gateway/fill?pct=91");
    let s = stats();
    let usable = s["maxCapacityInKb"].as_u64().unwrap() - s["spareCapacityInKb"].as_u64().unwrap();
    assert_eq!(s["capacityInUseInKb"], json!(usable * 91 / 100));

    // A rebuild drains to zero by the gateway's clock.
    ok("/control/gateway/sds?agent=1&connected=true");
    ok("/control/gateway/rebuild?seconds=2");
    let first = stats();
    let degraded = first["degradedHealthyCapacityInKb"].as_u64().unwrap();
    assert!(degraded > 0 && degraded <= usable / 10, "{first}");
    assert!(first["pendingFwdRebuildCapacityInKb"].as_u64().unwrap() > 0);
    assert!(first["movingCapacityInKb"].as_u64().unwrap() > 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = degraded;
    loop {
        let now = stats()["degradedHealthyCapacityInKb"].as_u64().unwrap();
        assert!(now <= last, "{now} after {last}");
        last = now;
        if now == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "still {now} KiB degraded");
        std::thread::yield_now();
    }
    assert_eq!(stats()["pendingFwdRebuildCapacityInKb"], json!(0));

    // Bad requests are named; nothing changes.
    for (path, status, says) in [
        (
            "/control/gateway/sds?agent=2&connected=false",
            404,
            "no agent 2",
        ),
        (
            "/control/gateway/sds?agent=1&connected=maybe",
            400,
            "true or false",
        ),
        (
            "/control/gateway/device?agent=1&path=/dev/nope&failed=true",
            404,
            "/dev/nope",
        ),
        ("/control/gateway/fill?pct=101", 400, "101"),
        ("/control/gateway/rebuild", 400, "seconds"),
        ("/control/gateway/rebuild-time?seconds=-1", 400, "-1"),
        ("/control/gateway/rebuild-time?seconds=90000", 400, "90000"),
        ("/control/gateway/mdm?degraded=1", 400, "true or false"),
    ] {
        let (got, body) = h.control(path);
        assert_eq!(got, status, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap_or("").contains(says),
            "{path}: {body}"
        );
    }

    ok("/control/gateway/clear");
    normal();
}
