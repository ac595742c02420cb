//! Storage gateway simulator: the HTTPS REST gateway of a ScaleIO 2.0.1 class system.
//!
//! It serves what the framework uses of the real gateway, with the real shapes:
//!
//! - HTTPS only, with a certificate made at startup like the one a real gateway ships:
//!   self-signed, a CA, its hostname as the only name (`cert.rs`); it can be replaced while
//!   the gateway runs ([`GatewayHandle::renew_certificate`]).
//! - `GET /api/login` with Basic `admin:<password>` answers a JSON string token; every other
//!   call carries Basic auth whose password is that token (the user part is ignored). A missing,
//!   unknown or expired token is a 401 with the gateway's JSON error body. Tokens lapse after an
//!   idle period and after a fixed lifetime, like the real ones; `GET /api/logout` drops one.
//! - `GET /api/version` answers a JSON string such as `"2.0"`. Requests without
//!   `Accept: application/json;version=...` are served too: public clients fetch the version
//!   before they know it, and retry after a re-login without that header.
//! - The object model (system with its MDM cluster, protection domains, storage pools, SDSs,
//!   devices), listing, relationships, creation (`POST .../instances` answers `{"id": ...}`)
//!   and capacity statistics.
//! - Errors are `{"message", "httpStatusCode", "errorCode"}`. Failures of the storage system
//!   itself (duplicates, unknown ids) are HTTP 500 with the MDM's return code as `errorCode`
//!   (the numbering is the one public clients test against: 3 not found, 78 SDS not found,
//!   93 SDS address in use, 98 SDS name in use, 141 protection domain name in use, 142
//!   protection domain not found, 171 storage pool not found, 173 storage pool name exists,
//!   206 device already exists). A request the gateway cannot parse is a 400 with errorCode 0.
//! - It refuses what the MDM refuses once it knows the hosts ([`GatewayHandle::watch_hosts`]):
//!   an SDS at an address where no SDS process listens (a second SDS on an address included),
//!   a device path its host does not have (`hosts.rs`). Every reply takes
//!   [`GatewayConfig::latency`] (a few milliseconds by default), as the MDM round trip does.
//!
//! - It tells the truth about the data (`data.rs`): an SDS whose host is down, whose `sds`
//!   process stopped or was replaced (a package install restarts it) is `Disconnected` until
//!   it runs again; its domain's pools show degraded and pending-rebuild capacity while it is
//!   down and for the rebuild time after ([`GatewayConfig::rebuild_time`]); an MDM member
//!   whose host or `mdm` process is down makes the cluster `ClusteredDegraded`. The model
//!   thread looks at the hosts every [`OBSERVE_EVERY`] and counts data-unavailable and
//!   quorum-loss events on the transitions it sees ([`GatewayHandle::events`]).
//!
//! One owner per piece of state: a model thread owns the whole storage model, the tokens and
//! the fault settings; connection threads and the [`GatewayHandle`] talk to it over a channel.
//! The hosts' state is the host stand-ins' (read through a [`HostDirectory`], never copied).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use serde_json::{json, Map, Value};

mod cert;
mod data;
mod health;
mod hosts;
mod removal;

pub use health::HealthFault;
pub use hosts::{HostDirectory, HostFacts};

/// Request heads above this are refused with 431: the real clients send a few hundred bytes.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Bodies above this are refused with 413; the largest real body (an SDS with its devices) is
/// a few KiB.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Connections beyond this are closed at once so that a misbehaving client cannot exhaust
/// threads.
const MAX_CONNECTIONS: usize = 64;
/// Socket read timeout: how often an idle connection thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// An idle keep-alive connection (or a client stuck mid-request) is closed after this.
const KEEP_ALIVE_IDLE: Duration = Duration::from_secs(30);
/// A client that does not read its response within this is dropped.
const WRITE_LIMIT: Duration = Duration::from_secs(10);
/// Upper bound on waiting for the model thread; it answers in microseconds unless stopping.
const MODEL_REPLY_LIMIT: Duration = Duration::from_secs(30);
/// How often the model thread looks at the hosts: a restarted SDS is seen whenever it is
/// looked at (its process id changed), so this only bounds how late an outage shows.
pub const OBSERVE_EVERY: Duration = Duration::from_millis(100);
/// How long rebuilding after an SDS outage takes unless configured.
pub const DEFAULT_REBUILD_TIME: Duration = Duration::from_secs(1);
/// Default SDS port of the real system (used for the address-in-use check).
const SDS_DEFAULT_PORT: u64 = 7072;
/// MDM port reported for the cluster members.
const MDM_PORT: u64 = 9011;
/// Volumes are allocated in 8 GiB units, so allocatable capacity is rounded down to them.
const ALLOCATION_UNIT_KB: u64 = 8 * 1024 * 1024;
const JSON: &str = "application/json;charset=UTF-8";

/// MDM return codes as the gateway reports them in `errorCode`.
mod code {
    pub const NONE: u64 = 0;
    pub const NOT_FOUND: u64 = 3;
    pub const NOT_CONNECTED: u64 = 4;
    pub const SDS_NOT_FOUND: u64 = 78;
    pub const SDS_ADDRESS_IN_USE: u64 = 93;
    pub const SDS_NAME_IN_USE: u64 = 98;
    pub const DEVICE_NOT_FOUND: u64 = 126;
    pub const PD_NAME_IN_USE: u64 = 141;
    pub const PD_NOT_FOUND: u64 = 142;
    pub const POOL_NOT_FOUND: u64 = 171;
    pub const POOL_NAME_IN_USE: u64 = 173;
    pub const POOL_NOT_IN_PD: u64 = 197;
    pub const SDS_NEEDS_SDS_IP: u64 = 199;
    pub const DEVICE_ALREADY_EXISTS: u64 = 206;
    /// The simulator's own number for "this device is already used by another SDS" (the
    /// real code is not in the public sources we read; clients must not treat it as 206).
    pub const DEVICE_IN_USE_BY_OTHER_SDS: u64 = 207;
    pub const DEVICE_TOO_LARGE: u64 = 208;
    pub const INVALID_NAME: u64 = 227;
    pub const INVALID_DEVICE_PATH: u64 = 283;
    /// The simulator's own numbers (the real codes are not in the public sources we read):
    /// no SDS answers at the address, and the SDS's host has no such device.
    pub const SDS_NOT_REACHABLE: u64 = 209;
    pub const DEVICE_NOT_ON_HOST: u64 = 210;
    /// Also the simulator's own: a removal under way already, and one the SDSs that stay
    /// could not hold the data of (the framework's client knows both).
    pub const REMOVE_IN_PROGRESS: u64 = 211;
    pub const NOT_ENOUGH_CAPACITY: u64 = 212;
}

/// An SDS holds this share (1/N) of its pool's usable capacity when its data moves (as an
/// outage counts it, `data.rs`).
const SHARE_OF_POOL: u64 = 10;

/// Addresses of the MDM trio the system reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MdmIps {
    pub primary: String,
    pub secondary: String,
    pub tiebreaker: String,
}

/// How to start the simulated gateway.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Port on 127.0.0.1; 0 picks an ephemeral one (see [`GatewayHandle::addr`]).
    pub port: u16,
    /// The admin password `GET /api/login` accepts (user `admin`).
    pub password: String,
    /// What `GET /api/version` answers.
    pub api_version: String,
    /// Version of the MDMs, `R<major>_<minor>.<build>.<patch>` (2.0.1-2072 is `R2_0.10000.2072`);
    /// `systemVersionName` is `EMC ScaleIO Version: <this>`.
    pub version_info: String,
    pub mdm: MdmIps,
    /// Name the system gets when it is created.
    pub system_name: String,
    /// `Some((domain, pool))`: a configured cluster with that protection domain and storage
    /// pool (pre-configured mode). `None`: no system until [`GatewayHandle::create_system`]
    /// (experimental mode, where the framework creates the MDM cluster itself).
    pub preconfigured: Option<(String, String)>,
    /// A token unused for this long is refused (the real gateway: 10 minutes).
    pub token_idle_timeout: Duration,
    /// A token older than this is refused whatever its use (the real gateway: 8 hours).
    pub token_lifetime: Duration,
    /// Size reported for every attached device unless the request limits it.
    pub device_capacity_kb: u64,
    /// Every reply takes at least this long, as a real gateway's round trip to its MDM does.
    pub latency: Duration,
    /// The certificate's common name (its only name, as on a real gateway: clients dial an
    /// IP address it does not name).
    pub hostname: String,
    /// How long a pool takes to rebuild what an SDS missed, after each outage once it is back.
    pub rebuild_time: Duration,
}

/// A real gateway answers in milliseconds (it asks the MDM); clients must not be tuned to a
/// simulator that answers in microseconds.
pub const DEFAULT_LATENCY: Duration = Duration::from_millis(3);

impl GatewayConfig {
    /// A pre-configured 2.0.1-2072 cluster with domain `default` and pool `default`, on an
    /// ephemeral port.
    pub fn new(password: &str, mdm: MdmIps) -> GatewayConfig {
        GatewayConfig {
            port: 0,
            password: password.to_string(),
            api_version: "2.0".to_string(),
            version_info: "R2_0.10000.2072".to_string(),
            mdm,
            system_name: "scaleio".to_string(),
            preconfigured: Some(("default".to_string(), "default".to_string())),
            token_idle_timeout: Duration::from_secs(10 * 60),
            token_lifetime: Duration::from_secs(8 * 60 * 60),
            device_capacity_kb: 100 * 1024 * 1024,
            latency: DEFAULT_LATENCY,
            hostname: "scaleio-gateway".to_string(),
            rebuild_time: DEFAULT_REBUILD_TIME,
        }
    }
}

/// A running gateway. Dropping it stops it.
pub struct GatewayHandle {
    addr: SocketAddr,
    hostname: String,
    certificate: std::sync::Mutex<cert::Served>,
    current: Arc<cert::Current>,
    commands: Sender<Command>,
    stop: Arc<AtomicBool>,
    outage: Arc<Outage>,
    acceptor: Option<JoinHandle<()>>,
    model: Option<JoinHandle<()>>,
}

/// A gateway that is down: every connection is closed before a byte of TLS is answered (what
/// a client sees of a gateway whose service died behind its address), and counted.
#[derive(Default)]
struct Outage {
    down: AtomicBool,
    turned_away: AtomicU64,
    /// Certificate renewals so far: a connection opened before the last one is closed at
    /// its next request, as a restarted gateway's would be.
    renewals: AtomicU64,
}

impl Outage {
    /// True (and counted) when the connection must be dropped.
    fn turns_away(&self) -> bool {
        let down = self.down.load(Ordering::SeqCst);
        if down {
            self.turned_away.fetch_add(1, Ordering::SeqCst);
        }
        down
    }
}

/// Starts the gateway: makes its certificate, binds 127.0.0.1:`config.port`, and serves until
/// [`GatewayHandle::shutdown`] or drop.
pub fn start(config: GatewayConfig) -> Result<GatewayHandle, String> {
    validate_config(&config)?;
    let certificate = cert::make(&config.hostname)?;
    let current = Arc::new(cert::Current::new(&certificate));
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("gateway: TLS setup failed: {e}"))?
    .with_no_client_auth()
    .with_cert_resolver(current.clone());
    tls.session_storage = current.clone();
    let tls = Arc::new(tls);
    let hostname = config.hostname.clone();

    let listener = TcpListener::bind(("127.0.0.1", config.port))
        .map_err(|e| format!("gateway: cannot bind 127.0.0.1:{}: {e}", config.port))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("gateway: cannot read the bound address: {e}"))?;

    let model = Model::new(config)?;
    let (commands, inbox) = unbounded();
    let model = thread::Builder::new()
        .name("gateway-model".to_string())
        .spawn(move || run_model(model, inbox))
        .map_err(|e| format!("gateway: cannot start the model thread: {e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    let outage = Arc::new(Outage::default());
    let acceptor = {
        let commands = commands.clone();
        let stop = stop.clone();
        let outage = outage.clone();
        thread::Builder::new()
            .name("gateway-accept".to_string())
            .spawn(move || accept_loop(listener, tls, commands, stop, outage))
    };
    let acceptor = match acceptor {
        Ok(a) => a,
        Err(e) => {
            let _ = commands.send(Command::Stop);
            let _ = model.join();
            return Err(format!("gateway: cannot start the accept thread: {e}"));
        }
    };
    log::info!("storage gateway simulator listening on https://{addr}");
    Ok(GatewayHandle {
        addr,
        hostname,
        certificate: std::sync::Mutex::new(certificate),
        current,
        commands,
        stop,
        outage,
        acceptor: Some(acceptor),
        model: Some(model),
    })
}

impl GatewayHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:<port>`; the API is under `/api`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The certificate served now (PEM), for clients that verify against it.
    pub fn certificate_pem(&self) -> String {
        self.served().pem
    }

    /// The certificate served now (DER), for clients that pin its fingerprint.
    pub fn certificate_der(&self) -> Vec<u8> {
        self.served().der.to_vec()
    }

    /// Serves a new certificate (a new key, the same hostname) from the next handshake on,
    /// as a reinstalled gateway would; connections already open are closed at their next
    /// request.
    pub fn renew_certificate(&self) -> Result<(), String> {
        self.install(cert::make(&self.hostname)?);
        Ok(())
    }

    /// Serves the given chain (leaf first) and key from the next handshake on, as a gateway
    /// whose operator installed a CA-signed certificate; connections already open are closed
    /// at their next request.
    pub fn serve_pem(&self, chain_pem: &str, key_pem: &str) -> Result<(), String> {
        self.install(cert::from_pem(chain_pem, key_pem)?);
        Ok(())
    }

    fn install(&self, served: cert::Served) {
        self.current.replace(&served);
        *self.certificate.lock().unwrap_or_else(|p| p.into_inner()) = served;
        self.outage.renewals.fetch_add(1, Ordering::SeqCst);
    }

    fn served(&self) -> cert::Served {
        self.certificate
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The next `n` requests (any path, login included) get a 500; replaces any earlier count.
    pub fn fail_next(&self, n: u32) {
        self.send(Command::FailNext(n));
    }

    /// Every request gets a 500 until [`GatewayHandle::clear_faults`].
    pub fn fail_until_cleared(&self) {
        self.send(Command::FailAlways);
    }

    /// Injects or ends a health fault (`health.rs`); an error names a host, SDS, SDC or
    /// device the gateway does not have, or a figure out of range.
    pub fn inject(&self, fault: HealthFault) -> Result<(), String> {
        let (reply, answer) = bounded(1);
        self.send(Command::Health(fault, reply));
        answer
            .recv_timeout(MODEL_REPLY_LIMIT)
            .map_err(|_| "gateway: the model thread is not running".to_string())?
    }

    /// The data events since the start or the last reset: `{"data_unavailable": N,
    /// "quorum_loss": N, "max_sds_down_per_domain": {"<pd>": N}, "sds_down_now": {"<pd>": N},
    /// "log": [...]}`.
    pub fn events(&self) -> Result<Value, String> {
        let (reply, answer) = bounded(1);
        self.send(Command::Events(reply));
        answer
            .recv_timeout(MODEL_REPLY_LIMIT)
            .map_err(|_| "gateway: the model thread is not running".to_string())
    }

    /// Zeroes the event counters and the log.
    pub fn reset_events(&self) {
        self.send(Command::ResetEvents);
    }

    /// How long rebuilding takes after each SDS outage from now on (at most a day).
    pub fn set_rebuild_time(&self, lasts: Duration) -> Result<(), String> {
        let (reply, answer) = bounded(1);
        self.send(Command::RebuildTime(lasts, reply));
        answer
            .recv_timeout(MODEL_REPLY_LIMIT)
            .map_err(|_| "gateway: the model thread is not running".to_string())?
    }

    /// Ends injected failures, delays and health faults.
    pub fn clear_faults(&self) {
        self.send(Command::ClearFaults);
    }

    /// Every reply is held back this long before it is sent; zero removes the delay.
    pub fn set_delay(&self, delay: Duration) {
        self.send(Command::SetDelay(delay));
    }

    /// From now on an SDS or device is added only where `hosts` says the MDM would find it:
    /// an SDS process listening at the address, the device path on the SDS's host.
    pub fn watch_hosts(&self, hosts: HostDirectory) {
        self.send(Command::WatchHosts(hosts));
    }

    /// Takes the gateway down (`true`: every connection, new or kept alive, is closed
    /// unanswered) or brings it back; the storage model is kept.
    pub fn set_down(&self, down: bool) {
        self.outage.down.store(down, Ordering::SeqCst);
    }

    /// Connections and requests closed unanswered while the gateway was down.
    pub fn turned_away(&self) -> u64 {
        self.outage.turned_away.load(Ordering::SeqCst)
    }

    /// Invalidates every token handed out so far, as a gateway restart would.
    pub fn expire_tokens(&self) {
        self.send(Command::ExpireTokens);
    }

    /// Creates the system once the MDM cluster exists (experimental mode: what the primary's
    /// `scli --create_mdm_cluster` ... `--rename_system` leads to). Returns the system id.
    pub fn create_system(&self, name: &str) -> Result<String, String> {
        self.create_system_with(name, None)
    }

    /// [`GatewayHandle::create_system`] for a cluster whose trio the stand-ins built: the
    /// system reports `mdm` (the addresses of that cluster) instead of the configured ones.
    /// SDCs installed before, with an `MDM_IP` naming its primary or secondary, connect now
    /// (a real SDC keeps trying its MDMs until they answer).
    pub fn create_system_with(&self, name: &str, mdm: Option<MdmIps>) -> Result<String, String> {
        let (reply, answer) = bounded(1);
        self.send(Command::CreateSystem(name.to_string(), mdm, reply));
        answer
            .recv_timeout(MODEL_REPLY_LIMIT)
            .map_err(|_| "gateway: the model thread is not running".to_string())?
    }

    /// An SDC package was installed on host `ip` with `MDM_IP=mdm_ip`: the SDC registers
    /// with this cluster (and shows up in `/api/types/Sdc/instances`) when `mdm_ip` names
    /// its primary or secondary MDM. Returns the SDC id; an `MDM_IP` naming other MDMs is an
    /// error (that SDC talks to another cluster), and so is a cluster that does not exist yet.
    pub fn sdc_installed(&self, ip: &str, mdm_ip: &str) -> Result<String, String> {
        let (reply, answer) = bounded(1);
        self.send(Command::SdcInstalled(
            ip.to_string(),
            mdm_ip.to_string(),
            reply,
        ));
        answer
            .recv_timeout(MODEL_REPLY_LIMIT)
            .map_err(|_| "gateway: the model thread is not running".to_string())?
    }

    /// The SDC on host `ip` loses (host reboot) or regains its MDM connection; unknown
    /// hosts are ignored.
    pub fn set_sdc_connected(&self, ip: &str, connected: bool) {
        self.send(Command::SdcConnected(ip.to_string(), connected));
    }

    /// The storage model as JSON: `system` (null before creation), `protectionDomains`,
    /// `storagePools`, `sds`, `devices`, plus `activeTokens` and `requests` (requests served).
    pub fn snapshot(&self) -> Value {
        let (reply, answer) = bounded(1);
        self.send(Command::Snapshot(reply));
        answer
            .recv_timeout(MODEL_REPLY_LIMIT)
            .unwrap_or(Value::Null)
    }

    /// Stops accepting, stops the model and waits for both threads. Connections still open
    /// are answered 503 and closed.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn send(&self, command: Command) {
        if self.commands.send(command).is_err() {
            log::warn!("gateway: command ignored, the model thread has stopped");
        }
    }

    fn stop_threads(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            // The accept call blocks; a connection of our own wakes it to see the flag.
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
            let _ = acceptor.join();
        }
        if let Some(model) = self.model.take() {
            let _ = self.commands.send(Command::Stop);
            let _ = model.join();
        }
    }
}

impl Drop for GatewayHandle {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

fn validate_config(config: &GatewayConfig) -> Result<(), String> {
    if config.password.is_empty() {
        return Err("gateway: config.password is empty".to_string());
    }
    for (field, ip) in [
        ("mdm.primary", &config.mdm.primary),
        ("mdm.secondary", &config.mdm.secondary),
        ("mdm.tiebreaker", &config.mdm.tiebreaker),
    ] {
        if ip.parse::<Ipv4Addr>().is_err() {
            return Err(format!(
                "gateway: config.{field} {ip:?} is not an IPv4 address"
            ));
        }
    }
    if config.hostname.is_empty() || config.hostname.contains(char::is_whitespace) {
        return Err(format!(
            "gateway: config.hostname {:?} is not a host name",
            config.hostname
        ));
    }
    if config.latency > Duration::from_secs(10) {
        return Err(format!(
            "gateway: config.latency {:?} is over 10 s: clients would time out",
            config.latency
        ));
    }
    if let Err(e) = check_name(&config.system_name) {
        return Err(format!("gateway: config.system_name: {e}"));
    }
    if let Some((domain, pool)) = &config.preconfigured {
        if let Err(e) = check_name(domain) {
            return Err(format!("gateway: config.preconfigured domain: {e}"));
        }
        if let Err(e) = check_name(pool) {
            return Err(format!("gateway: config.preconfigured pool: {e}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Threads: accept loop, connections, model.

enum Command {
    Http(ApiRequest, Sender<Reply>),
    FailNext(u32),
    FailAlways,
    ClearFaults,
    SetDelay(Duration),
    WatchHosts(HostDirectory),
    ExpireTokens,
    CreateSystem(String, Option<MdmIps>, Sender<Result<String, String>>),
    SdcInstalled(String, String, Sender<Result<String, String>>),
    SdcConnected(String, bool),
    Health(HealthFault, Sender<Result<(), String>>),
    Snapshot(Sender<Value>),
    Events(Sender<Value>),
    ResetEvents,
    RebuildTime(Duration, Sender<Result<(), String>>),
    Stop,
}

struct LiveConnection(Arc<AtomicUsize>);

impl Drop for LiveConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    model: Sender<Command>,
    stop: Arc<AtomicBool>,
    outage: Arc<Outage>,
) {
    let live = Arc::new(AtomicUsize::new(0));
    for incoming in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let tcp = match incoming {
            Ok(tcp) => tcp,
            Err(e) => {
                log::warn!("gateway: accept failed: {e}");
                // Persistent errors (out of descriptors) would otherwise spin this thread.
                thread::sleep(POLL);
                continue;
            }
        };
        if outage.turns_away() {
            continue;
        }
        if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            log::warn!("gateway: {MAX_CONNECTIONS} connections open, closing a new one");
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let guard = LiveConnection(live.clone());
        let (tls, model, stop) = (tls.clone(), model.clone(), stop.clone());
        let outage = outage.clone();
        let spawned = thread::Builder::new()
            .name("gateway-conn".to_string())
            .spawn(move || {
                let _guard = guard;
                serve_connection(tcp, tls, model, stop, &outage);
            });
        if let Err(e) = spawned {
            log::warn!("gateway: cannot start a connection thread: {e}");
        }
    }
}

fn serve_connection(
    tcp: TcpStream,
    tls: Arc<rustls::ServerConfig>,
    model: Sender<Command>,
    stop: Arc<AtomicBool>,
    outage: &Outage,
) {
    let _ = tcp.set_nodelay(true);
    if tcp.set_read_timeout(Some(POLL)).is_err()
        || tcp.set_write_timeout(Some(WRITE_LIMIT)).is_err()
    {
        return;
    }
    let server = match rustls::ServerConnection::new(tls) {
        Ok(server) => server,
        Err(e) => {
            log::warn!("gateway: TLS session setup failed: {e}");
            return;
        }
    };
    let born = outage.renewals.load(Ordering::SeqCst);
    let mut conn = HttpConn::new(rustls::StreamOwned::new(server, tcp), stop);
    serve_requests(&mut conn, &model, outage, born);
    let mut stream = conn.into_inner();
    stream.conn.send_close_notify();
    let _ = stream.flush();
    let _ = stream.sock.shutdown(Shutdown::Both);
}

fn serve_requests<S: Read + Write>(
    conn: &mut HttpConn<S>,
    model: &Sender<Command>,
    outage: &Outage,
    born: u64,
) {
    loop {
        match conn.read_request() {
            ReadOutcome::End => return,
            ReadOutcome::Reject(status, message) => {
                let body = error_body(status, code::NONE, &message);
                let _ = conn.write_response(status, &body, false);
                return;
            }
            // Kept-alive connections die with the gateway too.
            ReadOutcome::Request(_) if outage.turns_away() => return,
            ReadOutcome::Request(_) if outage.renewals.load(Ordering::SeqCst) != born => return,
            ReadOutcome::Request(request) => {
                let keep_alive = request.keep_alive;
                let reply = ask_model(model, request);
                if !reply.delay.is_zero() {
                    // The gateway's latency, plus any injected slowness.
                    thread::sleep(reply.delay);
                }
                if conn
                    .write_response(reply.status, &reply.body, keep_alive)
                    .is_err()
                    || !keep_alive
                {
                    return;
                }
            }
        }
    }
}

fn ask_model(model: &Sender<Command>, request: HttpRequest) -> Reply {
    let (reply, answer) = bounded(1);
    let api = ApiRequest {
        method: request.method,
        target: request.target,
        authorization: request.authorization,
        content_type: request.content_type,
        body: request.body,
    };
    if model.send(Command::Http(api, reply)).is_err() {
        return Reply::unavailable();
    }
    answer
        .recv_timeout(MODEL_REPLY_LIMIT)
        .unwrap_or_else(|_| Reply::unavailable())
}

fn run_model(mut model: Model, inbox: Receiver<Command>) {
    loop {
        let command = match inbox.recv_timeout(OBSERVE_EVERY) {
            Ok(command) => command,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                model.observe_if_due();
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        model.observe_if_due();
        match command {
            Command::Http(request, reply) => {
                let answer = model.handle(&request);
                let _ = reply.send(answer);
            }
            Command::FailNext(n) => model.faults.fail_next = n,
            Command::FailAlways => model.faults.fail_always = true,
            Command::ClearFaults => {
                model.faults = Faults::default();
                model.health = health::Faults::default();
                model.data.clear_cut_offs(Instant::now());
            }
            Command::SetDelay(delay) => model.faults.delay = delay,
            Command::WatchHosts(hosts) => model.hosts = Some(hosts),
            Command::ExpireTokens => model.tokens.clear(),
            Command::CreateSystem(name, mdm, reply) => {
                if let (Some(m), None) = (mdm, &model.system) {
                    model.mdm = m;
                }
                let created = model.create_system(&name);
                if created.is_ok() {
                    model.connect_waiting_sdcs();
                }
                let _ = reply.send(created);
            }
            Command::SdcInstalled(ip, mdm_ip, reply) => {
                let _ = reply.send(model.sdc_installed(&ip, &mdm_ip));
            }
            Command::SdcConnected(ip, connected) => model.set_sdc_connected(&ip, connected),
            Command::Health(fault, reply) => {
                let _ = reply.send(model.inject(fault));
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(model.snapshot());
            }
            Command::Events(reply) => {
                model.observe(Instant::now());
                let _ = reply.send(model.data.events());
            }
            Command::ResetEvents => {
                model.observe(Instant::now());
                model.data.reset_events();
            }
            Command::RebuildTime(lasts, reply) => {
                let _ = reply.send(model.data.set_rebuild_time(lasts));
            }
            Command::Stop => break,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 over any byte stream (the TLS stream in service, plain buffers in unit tests).

struct HttpRequest {
    method: String,
    target: String,
    authorization: Option<String>,
    content_type: Option<String>,
    body: Vec<u8>,
    keep_alive: bool,
}

enum ReadOutcome {
    Request(HttpRequest),
    /// The client closed, went idle or the gateway is stopping: close without a reply.
    End,
    /// Unparseable or oversized: reply with this status and close.
    Reject(u16, String),
}

enum Fail {
    End,
    Reject(u16, String),
}

struct HttpConn<S> {
    stream: S,
    buf: Vec<u8>,
    stop: Arc<AtomicBool>,
}

impl<S: Read + Write> HttpConn<S> {
    fn new(stream: S, stop: Arc<AtomicBool>) -> HttpConn<S> {
        HttpConn {
            stream,
            buf: Vec::new(),
            stop,
        }
    }

    fn into_inner(self) -> S {
        self.stream
    }

    fn read_more(&mut self, deadline: Instant) -> Result<(), Fail> {
        let mut chunk = [0u8; 8192];
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Err(Fail::End);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(Fail::End),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    if Instant::now() >= deadline {
                        return Err(Fail::End);
                    }
                }
                Err(e) => {
                    log::debug!("gateway: connection read failed: {e}");
                    return Err(Fail::End);
                }
            }
        }
    }

    fn read_request(&mut self) -> ReadOutcome {
        match self.try_read_request() {
            Ok(request) => ReadOutcome::Request(request),
            Err(Fail::End) => ReadOutcome::End,
            Err(Fail::Reject(status, message)) => ReadOutcome::Reject(status, message),
        }
    }

    fn try_read_request(&mut self) -> Result<HttpRequest, Fail> {
        let deadline = Instant::now() + KEEP_ALIVE_IDLE;
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos;
            }
            if self.buf.len() > MAX_HEAD_BYTES {
                return Err(too_large_head());
            }
            self.read_more(deadline)?;
        };
        if head_end > MAX_HEAD_BYTES {
            return Err(too_large_head());
        }
        let head: Vec<u8> = self.buf.drain(..head_end + 4).collect();
        let head = std::str::from_utf8(&head[..head_end])
            .map_err(|_| Fail::Reject(400, "the request head is not UTF-8".to_string()))?;
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or("");
        let mut parts = request_line.split(' ');
        let (method, target, version) =
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(m), Some(t), Some(v), None) if !m.is_empty() && t.starts_with('/') => {
                    (m, t, v)
                }
                _ => {
                    return Err(Fail::Reject(
                        400,
                        format!("malformed request line {request_line:?}"),
                    ))
                }
            };
        let http11 = match version {
            "HTTP/1.1" => true,
            "HTTP/1.0" => false,
            other => {
                return Err(Fail::Reject(
                    505,
                    format!("HTTP version {other:?} is not supported"),
                ))
            }
        };
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                return Err(Fail::Reject(400, format!("malformed header line {line:?}")));
            };
            let name = name.trim();
            if name.is_empty() || name.contains(' ') {
                return Err(Fail::Reject(400, format!("malformed header line {line:?}")));
            }
            headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let connection = header("connection").unwrap_or("").to_ascii_lowercase();
        // Every reply carries a body; after a HEAD the client would not read it, so that
        // connection cannot carry another request.
        let keep_alive = method != "HEAD"
            && if http11 {
                !connection.contains("close")
            } else {
                connection.contains("keep-alive")
            };
        let expects_continue = header("expect")
            .map(|v| v.eq_ignore_ascii_case("100-continue"))
            .unwrap_or(false);
        let body = if let Some(encoding) = header("transfer-encoding") {
            if !encoding.eq_ignore_ascii_case("chunked") {
                return Err(Fail::Reject(
                    501,
                    format!("transfer-encoding {encoding:?} is not supported"),
                ));
            }
            if expects_continue {
                self.send_continue()?;
            }
            self.read_chunked(deadline)?
        } else if let Some(length) = header("content-length") {
            let length: usize = length.parse().map_err(|_| {
                Fail::Reject(400, format!("content-length {length:?} is not a number"))
            })?;
            if length > MAX_BODY_BYTES {
                return Err(too_large_body());
            }
            if expects_continue && length > 0 {
                self.send_continue()?;
            }
            self.take_exact(length, deadline)?
        } else {
            Vec::new()
        };
        Ok(HttpRequest {
            method: method.to_string(),
            target: target.to_string(),
            authorization: header("authorization").map(str::to_string),
            content_type: header("content-type").map(str::to_string),
            body,
            keep_alive,
        })
    }

    fn send_continue(&mut self) -> Result<(), Fail> {
        if !self.buf.is_empty() {
            return Ok(());
        }
        self.stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .and_then(|_| self.stream.flush())
            .map_err(|_| Fail::End)
    }

    fn take_exact(&mut self, n: usize, deadline: Instant) -> Result<Vec<u8>, Fail> {
        while self.buf.len() < n {
            self.read_more(deadline)?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    fn read_line(&mut self, deadline: Instant) -> Result<String, Fail> {
        loop {
            if let Some(pos) = find(&self.buf, b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..pos + 2).collect();
                return String::from_utf8(line[..pos].to_vec())
                    .map_err(|_| Fail::Reject(400, "chunk framing is not UTF-8".to_string()));
            }
            if self.buf.len() > MAX_HEAD_BYTES {
                return Err(Fail::Reject(400, "chunk framing line too long".to_string()));
            }
            self.read_more(deadline)?;
        }
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, Fail> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line(deadline)?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| {
                Fail::Reject(400, format!("chunk size {size_text:?} is not hexadecimal"))
            })?;
            if size == 0 {
                // Trailer section, ended by an empty line.
                while !self.read_line(deadline)?.is_empty() {}
                return Ok(body);
            }
            if body.len().saturating_add(size) > MAX_BODY_BYTES {
                return Err(too_large_body());
            }
            let chunk = self.take_exact(size + 2, deadline)?;
            if &chunk[size..] != b"\r\n" {
                return Err(Fail::Reject(
                    400,
                    "chunk data is not followed by CRLF".to_string(),
                ));
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }

    fn write_response(&mut self, status: u16, body: &str, keep_alive: bool) -> io::Result<()> {
        let head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: {JSON}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
            reason(status),
            body.len(),
            if keep_alive { "keep-alive" } else { "close" },
        );
        self.stream.write_all(head.as_bytes())?;
        self.stream.write_all(body.as_bytes())?;
        self.stream.flush()
    }
}

fn too_large_head() -> Fail {
    Fail::Reject(
        431,
        format!("the request head is larger than {MAX_HEAD_BYTES} bytes"),
    )
}

fn too_large_body() -> Fail {
    Fail::Reject(
        413,
        format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

// ---------------------------------------------------------------------------------------------
// The model: storage objects, tokens, faults.

struct ApiRequest {
    method: String,
    target: String,
    authorization: Option<String>,
    content_type: Option<String>,
    body: Vec<u8>,
}

struct Reply {
    status: u16,
    body: String,
    /// Latency and injected delay the connection thread applies before sending.
    delay: Duration,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    fn ok(body: &Value) -> Reply {
        Reply::json(200, body)
    }

    fn error(status: u16, error_code: u64, message: &str) -> Reply {
        Reply {
            status,
            body: error_body(status, error_code, message),
            delay: Duration::ZERO,
        }
    }

    /// A failure reported by the storage system (not by the gateway's request handling).
    fn mdm(error_code: u64, message: &str) -> Reply {
        Reply::error(500, error_code, message)
    }

    fn bad_request(message: &str) -> Reply {
        Reply::error(
            400,
            code::NONE,
            &format!("Request message is not valid: {message}"),
        )
    }

    fn missing(parameter: &str) -> Reply {
        Reply::bad_request(&format!(
            "The following parameter(s) must be part of the request body: {parameter}."
        ))
    }

    fn unauthorized() -> Reply {
        Reply::error(401, code::NONE, "Unauthorized")
    }

    fn unavailable() -> Reply {
        Reply::error(503, code::NONE, "The gateway is shutting down")
    }
}

fn error_body(status: u16, error_code: u64, message: &str) -> String {
    json!({"message": message, "httpStatusCode": status, "errorCode": error_code}).to_string()
}

#[derive(Default)]
struct Faults {
    fail_next: u32,
    fail_always: bool,
    delay: Duration,
}

struct Token {
    created: Instant,
    last_used: Instant,
}

struct System {
    id: String,
    name: String,
    install_id: String,
    cluster_id: String,
    mdm_ids: [String; 3],
}

struct Pd {
    id: String,
    name: Option<String>,
}

struct Pool {
    id: String,
    name: Option<String>,
    pd_id: String,
    spare_percentage: u64,
}

struct Sds {
    id: String,
    name: Option<String>,
    pd_id: String,
    /// (ip, role)
    ips: Vec<(String, String)>,
    port: u64,
}

struct Sdc {
    id: String,
    ip: String,
    guid: String,
    connected: bool,
}

struct Device {
    id: String,
    name: Option<String>,
    path: String,
    pool_id: String,
    sds_id: String,
    capacity_kb: u64,
}

/// A device to attach, checked but not yet stored.
struct NewDevice {
    name: Option<String>,
    path: String,
    pool_id: String,
    capacity_kb: u64,
}

#[derive(Clone, Copy)]
enum Kind {
    System,
    Pd,
    Pool,
    Sds,
    Device,
    Sdc,
}

impl Kind {
    fn parse(type_name: &str) -> Option<Kind> {
        match type_name {
            "System" => Some(Kind::System),
            "ProtectionDomain" => Some(Kind::Pd),
            "StoragePool" => Some(Kind::Pool),
            "Sds" => Some(Kind::Sds),
            "Device" => Some(Kind::Device),
            "Sdc" => Some(Kind::Sdc),
            _ => None,
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Kind::System => "System",
            Kind::Pd => "ProtectionDomain",
            Kind::Pool => "StoragePool",
            Kind::Sds => "Sds",
            Kind::Device => "Device",
            Kind::Sdc => "Sdc",
        }
    }

    /// What the real system answers for an id it does not know.
    fn not_found(self) -> Reply {
        match self {
            Kind::System => Reply::mdm(code::NOT_FOUND, "Not found"),
            Kind::Pd => Reply::mdm(code::PD_NOT_FOUND, "Could not find Protection Domain"),
            Kind::Pool => Reply::mdm(code::POOL_NOT_FOUND, "Could not find Storage Pool"),
            Kind::Sds => Reply::mdm(code::SDS_NOT_FOUND, "Could not find SDS"),
            Kind::Device => Reply::mdm(code::DEVICE_NOT_FOUND, "Could not find the SDS device"),
            Kind::Sdc => Reply::mdm(code::NOT_FOUND, "Could not find the SDC"),
        }
    }

    /// Relationships served under `/relationships/<name>`.
    fn relationships(self) -> &'static [&'static str] {
        match self {
            Kind::System => &["Statistics", "ProtectionDomain", "Sdc"],
            Kind::Pd => &["Statistics", "StoragePool", "Sds"],
            Kind::Pool => &["Statistics", "Device", "Volume"],
            Kind::Sds => &["Statistics", "Device"],
            Kind::Device => &["Statistics"],
            Kind::Sdc => &["Statistics"],
        }
    }
}

/// Capacity totals over a set of devices.
#[derive(Default)]
struct Capacity {
    max_kb: u64,
    spare_kb: u64,
    allocatable_kb: u64,
    devices: usize,
    /// Injected health (`health.rs`); zero on devices.
    health: health::PoolFigures,
}

impl Capacity {
    fn add(&mut self, other: &Capacity) {
        self.max_kb += other.max_kb;
        self.spare_kb += other.spare_kb;
        self.allocatable_kb += other.allocatable_kb;
        self.devices += other.devices;
        self.health.in_use_kb += other.health.in_use_kb;
        self.health.degraded_kb += other.health.degraded_kb;
        self.health.pending_rebuild_kb += other.health.pending_rebuild_kb;
        self.health.moving_kb += other.health.moving_kb;
        self.health.rebalance_kb += other.health.rebalance_kb;
    }
}

struct Model {
    password: String,
    api_version: String,
    version_info: String,
    mdm: MdmIps,
    system_name: String,
    token_idle_timeout: Duration,
    token_lifetime: Duration,
    device_capacity_kb: u64,
    latency: Duration,
    hosts: Option<HostDirectory>,
    system: Option<System>,
    pds: Vec<Pd>,
    pools: Vec<Pool>,
    sdss: Vec<Sds>,
    devices: Vec<Device>,
    sdcs: Vec<Sdc>,
    /// SDCs installed before the cluster existed: (host address, their `MDM_IP`).
    waiting_sdcs: Vec<(String, String)>,
    tokens: HashMap<String, Token>,
    faults: Faults,
    health: health::Faults,
    data: data::DataModel,
    removals: removal::Removals,
    /// When the hosts were last looked at.
    observed: Option<Instant>,
    /// Addresses the host directory cannot see into (synthetic agents): not asked again.
    blind: std::collections::HashSet<String>,
    /// SDSs there were at the last look.
    observed_sdss: usize,
    ids_issued: u32,
    random: RandomState,
    nonce: u64,
    requests: u64,
    /// `GET /api/types/<type>/instances` answered, by type: what a client's listings cost.
    listings: std::collections::BTreeMap<&'static str, u64>,
}

impl Model {
    fn new(config: GatewayConfig) -> Result<Model, String> {
        let mut model = Model {
            password: config.password,
            api_version: config.api_version,
            version_info: config.version_info,
            mdm: config.mdm,
            system_name: config.system_name,
            token_idle_timeout: config.token_idle_timeout,
            token_lifetime: config.token_lifetime,
            device_capacity_kb: config.device_capacity_kb,
            latency: config.latency,
            hosts: None,
            system: None,
            pds: Vec::new(),
            pools: Vec::new(),
            sdss: Vec::new(),
            devices: Vec::new(),
            sdcs: Vec::new(),
            waiting_sdcs: Vec::new(),
            tokens: HashMap::new(),
            faults: Faults::default(),
            health: health::Faults::default(),
            data: data::DataModel::new(config.rebuild_time),
            removals: removal::Removals::default(),
            observed: None,
            blind: std::collections::HashSet::new(),
            observed_sdss: usize::MAX,
            ids_issued: 0,
            random: RandomState::new(),
            nonce: 0,
            requests: 0,
            listings: Default::default(),
        };
        if let Some((domain, pool)) = config.preconfigured {
            let name = model.system_name.clone();
            model.create_system(&name)?;
            let pd_id = model.next_id(0x5d00_0000);
            model.pds.push(Pd {
                id: pd_id.clone(),
                name: Some(domain),
            });
            let pool_id = model.next_id(0x5b00_0000);
            model.pools.push(Pool {
                id: pool_id,
                name: Some(pool),
                pd_id,
                spare_percentage: 10,
            });
        }
        Ok(model)
    }

    fn random_u64(&mut self) -> u64 {
        self.nonce += 1;
        let mut hasher = self.random.build_hasher();
        self.nonce.hash(&mut hasher);
        SystemTime::now().hash(&mut hasher);
        hasher.finish()
    }

    /// Ids look like the real ones (16 hex digits, the low half zero for top-level objects);
    /// the counter is scrambled by an odd multiplier, so ids stay unique but do not look
    /// sequential.
    fn next_id(&mut self, salt: u32) -> String {
        self.ids_issued += 1;
        let high = self.ids_issued.wrapping_mul(0x9E37_79B1) ^ salt;
        format!("{high:08x}00000000")
    }

    fn create_system(&mut self, name: &str) -> Result<String, String> {
        if let Some(system) = &self.system {
            return Err(format!("a system already exists (id {})", system.id));
        }
        check_name(name).map_err(|e| format!("system name {name:?}: {e}"))?;
        let id = format!("{:016x}", self.random_u64());
        let install_id = format!("{:016x}", self.random_u64());
        let cluster_id = format!("{}", self.random_u64() as i64);
        let mdm_ids = [
            format!("{:016x}", self.random_u64()),
            format!("{:016x}", self.random_u64()),
            format!("{:016x}", self.random_u64()),
        ];
        self.system = Some(System {
            id: id.clone(),
            name: name.to_string(),
            install_id,
            cluster_id,
            mdm_ids,
        });
        Ok(id)
    }

    fn snapshot(&self) -> Value {
        json!({
            "system": self.system.as_ref().map(|s| json!({
                "id": s.id,
                "name": s.name,
                "versionInfo": self.version_info,
                "mdm": {
                    "primary": self.mdm.primary,
                    "secondary": self.mdm.secondary,
                    "tiebreaker": self.mdm.tiebreaker,
                },
            })),
            "protectionDomains": self.pds.iter().map(|pd| json!({
                "id": pd.id, "name": pd.name,
            })).collect::<Vec<_>>(),
            "storagePools": self.pools.iter().map(|p| json!({
                "id": p.id, "name": p.name, "protectionDomainId": p.pd_id,
            })).collect::<Vec<_>>(),
            "sds": self.sdss.iter().map(|s| json!({
                "id": s.id, "name": s.name, "protectionDomainId": s.pd_id,
                "ips": s.ips.iter().map(|(ip, _)| ip.clone()).collect::<Vec<_>>(),
                "port": s.port,
                "sdsState": self.removal_state(Kind::Sds, &s.id, &s.id).unwrap_or("Normal"),
            })).collect::<Vec<_>>(),
            "devices": self.devices.iter().map(|d| json!({
                "id": d.id, "name": d.name, "path": d.path,
                "storagePoolId": d.pool_id, "sdsId": d.sds_id, "capacityKb": d.capacity_kb,
                "deviceState": self.removal_state(Kind::Device, &d.id, &d.sds_id).unwrap_or("Normal"),
            })).collect::<Vec<_>>(),
            "sdc": self.sdcs.iter().map(|s| json!({
                "id": s.id, "ip": s.ip, "guid": s.guid, "connected": s.connected,
            })).collect::<Vec<_>>(),
            "activeTokens": self.tokens.len(),
            "requests": self.requests,
            "listings": self.listings,
        })
    }

    fn handle(&mut self, request: &ApiRequest) -> Reply {
        self.requests += 1;
        self.finish_removals(Instant::now());
        let mut reply = self.route(request);
        reply.delay = self.latency + self.faults.delay;
        log::debug!(
            "gateway: {} {} -> {}",
            request.method,
            request.target,
            reply.status
        );
        reply
    }

    fn route(&mut self, request: &ApiRequest) -> Reply {
        if self.faults.fail_always || self.faults.fail_next > 0 {
            self.faults.fail_next = self.faults.fail_next.saturating_sub(1);
            return Reply::error(
                500,
                code::NONE,
                "Internal server error (fault injected by the simulator)",
            );
        }
        let raw_path = request.target.split('?').next().unwrap_or("");
        let path = percent_decode(raw_path);
        let path = if path.len() > 1 {
            path.trim_end_matches('/')
        } else {
            path.as_str()
        };
        let method = request.method.as_str();
        if path == "/api/login" {
            return self.login(method, request.authorization.as_deref());
        }
        if !self.authorized(request.authorization.as_deref()) {
            return Reply::unauthorized();
        }
        let Some(rest) = path.strip_prefix("/api/") else {
            return not_route(path);
        };
        let segments: Vec<&str> = rest.split('/').collect();
        match segments.as_slice() {
            ["logout"] => only_get(method, path).unwrap_or_else(|| {
                self.logout(request.authorization.as_deref());
                Reply {
                    status: 200,
                    body: String::new(),
                    delay: Duration::ZERO,
                }
            }),
            ["version"] => only_get(method, path)
                .unwrap_or_else(|| Reply::ok(&Value::String(self.api_version.clone()))),
            ["types", type_name, "instances"] => match Kind::parse(type_name) {
                None => not_route(path),
                Some(kind) => match method {
                    "GET" => {
                        *self.listings.entry(kind.type_name()).or_default() += 1;
                        Reply::ok(&self.list(kind))
                    }
                    "POST" => self.create(kind, request),
                    _ => not_allowed(method, path),
                },
            },
            ["types", type_name, "instances", "action", action] => {
                match (Kind::parse(type_name), method) {
                    (None, _) => not_route(path),
                    (Some(_), "POST") => self.action(type_name, action, request),
                    (Some(_), _) => not_allowed(method, path),
                }
            }
            ["instances", object]
                if parse_object(object).is_some_and(|(_, id)| !well_formed_id(id)) =>
            {
                malformed_id(object)
            }
            ["instances", object, "relationships", relation]
                if parse_object(object).is_some_and(|(kind, id)| {
                    !well_formed_id(id) && kind.relationships().contains(relation)
                }) =>
            {
                malformed_id(object)
            }
            ["instances", object] => match parse_object(object) {
                None => not_route(path),
                Some((kind, id)) => {
                    only_get(method, path).unwrap_or_else(|| match self.object_json(kind, id) {
                        Some(value) => Reply::ok(&value),
                        None => kind.not_found(),
                    })
                }
            },
            ["instances", object, "action", action] => match parse_object(object) {
                Some((_, id)) if !well_formed_id(id) => malformed_id(object),
                Some((kind, id)) if method == "POST" => match json_params(request) {
                    Ok(_) => self.instance_action(kind, id, action),
                    Err(reply) => reply,
                },
                Some(_) => not_allowed(method, path),
                None => not_route(path),
            },
            ["instances", object, "relationships", relation] => match parse_object(object) {
                Some((kind, id)) if kind.relationships().contains(relation) => {
                    only_get(method, path).unwrap_or_else(|| self.relationship(kind, id, relation))
                }
                _ => not_route(path),
            },
            _ => not_route(path),
        }
    }

    // --- actions ---------------------------------------------------------------------------

    fn action(&mut self, type_name: &str, action: &str, request: &ApiRequest) -> Reply {
        let params = match json_params(request) {
            Ok(params) => params,
            Err(reply) => return reply,
        };
        if self.system.is_none() {
            return Reply::mdm(code::NOT_CONNECTED, "Not connected");
        }
        let found = match (type_name, action) {
            ("ProtectionDomain", "queryIdByKey") => self.query_pd(&params),
            ("StoragePool", "queryIdByKey") => self.query_pool(&params),
            ("Sds", "queryIdByKey") => self.query_sds(&params),
            ("Sdc", "queryIdByKey") => self.query_sdc(&params),
            ("StoragePool", "querySelectedStatistics") => return self.selected_statistics(&params),
            _ => {
                return Reply::error(
                    404,
                    code::NONE,
                    &format!("No action {action} on type {type_name}"),
                )
            }
        };
        match found {
            // queryIdByKey answers the bare id as a JSON string.
            Ok(Some(id)) => Reply::ok(&Value::String(id)),
            Ok(None) => Reply::mdm(code::NOT_FOUND, "Not found"),
            Err(reply) => reply,
        }
    }

    fn query_pd(&self, params: &Map<String, Value>) -> Result<Option<String>, Reply> {
        let name = required_str(params, "name")?;
        Ok(self
            .pds
            .iter()
            .find(|pd| pd.name.as_deref() == Some(name.as_str()))
            .map(|pd| pd.id.clone()))
    }

    fn query_pool(&self, params: &Map<String, Value>) -> Result<Option<String>, Reply> {
        let name = required_str(params, "name")?;
        let pd_name = required_str(params, "protectionDomainName")?;
        let Some(pd) = self
            .pds
            .iter()
            .find(|pd| pd.name.as_deref() == Some(pd_name.as_str()))
        else {
            return Ok(None);
        };
        Ok(self
            .pools
            .iter()
            .find(|p| p.pd_id == pd.id && p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.id.clone()))
    }

    fn query_sds(&self, params: &Map<String, Value>) -> Result<Option<String>, Reply> {
        let name = required_str(params, "name")?;
        Ok(self
            .sdss
            .iter()
            .find(|s| s.name.as_deref() == Some(name.as_str()))
            .map(|s| s.id.clone()))
    }

    fn query_sdc(&self, params: &Map<String, Value>) -> Result<Option<String>, Reply> {
        let ip = required_str(params, "ip")?;
        Ok(self.sdcs.iter().find(|s| s.ip == ip).map(|s| s.id.clone()))
    }

    /// `{"ids": [...], "properties": [...]}` -> `{"<id>": {"<property>": ...}}`.
    fn selected_statistics(&self, params: &Map<String, Value>) -> Reply {
        let strings = |key: &str| -> Result<Vec<String>, Reply> {
            match params.get(key) {
                Some(Value::Array(items)) if !items.is_empty() => items
                    .iter()
                    .map(|i| {
                        i.as_str().map(str::to_string).ok_or_else(|| {
                            Reply::bad_request(&format!("{key} must be a list of strings"))
                        })
                    })
                    .collect(),
                None | Some(Value::Null) => Err(Reply::missing(key)),
                Some(_) => Err(Reply::bad_request(&format!(
                    "{key} must be a non-empty list of strings"
                ))),
            }
        };
        let (ids, properties) = match (strings("ids"), strings("properties")) {
            (Ok(ids), Ok(properties)) => (ids, properties),
            (Err(reply), _) | (_, Err(reply)) => return reply,
        };
        let mut out = Map::new();
        for id in ids {
            if !well_formed_id(&id) {
                return malformed_id(&id);
            }
            if self.pool(&id).is_none() {
                return Kind::Pool.not_found();
            }
            let all = self.statistics(Kind::Pool, &id);
            let mut selected = Map::new();
            for property in &properties {
                match all.get(property) {
                    Some(value) => selected.insert(property.clone(), value.clone()),
                    None => {
                        return Reply::bad_request(&format!(
                            "{property} is not a StoragePool statistic"
                        ))
                    }
                };
            }
            out.insert(id, Value::Object(selected));
        }
        Reply::ok(&Value::Object(out))
    }

    // --- SDCs ------------------------------------------------------------------------------

    fn sdc_installed(&mut self, ip: &str, mdm_ip: &str) -> Result<String, String> {
        if ip.parse::<Ipv4Addr>().is_err() {
            return Err(format!("SDC host address {ip:?} is not an IPv4 address"));
        }
        if self.system.is_none() {
            self.waiting_sdcs.retain(|(i, _)| i != ip);
            self.waiting_sdcs.push((ip.to_string(), mdm_ip.to_string()));
            return Err(
                "no MDM cluster yet: the SDC cannot connect (it will once the cluster exists)"
                    .to_string(),
            );
        }
        let ours = mdm_ip
            .split(',')
            .map(str::trim)
            .any(|m| m == self.mdm.primary || m == self.mdm.secondary);
        if !ours {
            return Err(format!(
                "MDM_IP {mdm_ip:?} names neither MDM of this cluster ({}, {})",
                self.mdm.primary, self.mdm.secondary
            ));
        }
        if let Some(sdc) = self.sdcs.iter_mut().find(|s| s.ip == ip) {
            sdc.connected = true;
            return Ok(sdc.id.clone());
        }
        let id = self.next_id(0x5dc0_0000);
        let guid = format!(
            "{:08X}-{:04X}-{:04X}-{:04X}-{:012X}",
            self.random_u64() as u32,
            self.random_u64() as u16,
            self.random_u64() as u16,
            self.random_u64() as u16,
            self.random_u64() & 0xffff_ffff_ffff
        );
        self.sdcs.push(Sdc {
            id: id.clone(),
            ip: ip.to_string(),
            guid,
            connected: true,
        });
        Ok(id)
    }

    fn connect_waiting_sdcs(&mut self) {
        for (ip, mdm_ip) in std::mem::take(&mut self.waiting_sdcs) {
            if let Err(e) = self.sdc_installed(&ip, &mdm_ip) {
                log::info!("gateway: the SDC on {ip} stays unconnected: {e}");
            }
        }
    }

    fn set_sdc_connected(&mut self, ip: &str, connected: bool) {
        if let Some(sdc) = self.sdcs.iter_mut().find(|s| s.ip == ip) {
            sdc.connected = connected;
        }
    }

    fn sdc_json(&self, sdc: &Sdc) -> Value {
        let system_id = self.system.as_ref().map(|s| s.id.as_str()).unwrap_or("");
        json!({
            "id": sdc.id,
            "name": null,
            "sdcIp": sdc.ip,
            "sdcGuid": sdc.guid,
            "sdcApproved": true,
            "mdmConnectionState": if self.health.sdc_connected(&sdc.ip, sdc.connected) {
                "Connected"
            } else {
                "Disconnected"
            },
            "onVmWare": false,
            "systemId": system_id,
            "versionInfo": member_version(&self.version_info),
            "links": links(Kind::Sdc, &sdc.id, Some(("systemId", Kind::System, system_id))),
        })
    }

    // --- authentication ------------------------------------------------------------------

    fn login(&mut self, method: &str, authorization: Option<&str>) -> Reply {
        if let Some(reply) = only_get(method, "/api/login") {
            return reply;
        }
        match authorization.and_then(parse_basic) {
            Some((user, password)) if user == "admin" && password == self.password => {
                let millis = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0);
                let secret = format!("{:016x}{:016x}", self.random_u64(), self.random_u64());
                // Same make-up as the real tokens: base64 of "user:millis:hex", unpadded.
                let token = base64_encode(format!("{user}:{millis}:{secret}").as_bytes())
                    .trim_end_matches('=')
                    .to_string();
                let now = Instant::now();
                self.tokens.insert(
                    token.clone(),
                    Token {
                        created: now,
                        last_used: now,
                    },
                );
                Reply::ok(&Value::String(token))
            }
            _ => Reply::unauthorized(),
        }
    }

    fn authorized(&mut self, authorization: Option<&str>) -> bool {
        let Some((_, token)) = authorization.and_then(parse_basic) else {
            return false;
        };
        let now = Instant::now();
        let Some(entry) = self.tokens.get_mut(&token) else {
            return false;
        };
        if now.duration_since(entry.last_used) >= self.token_idle_timeout
            || now.duration_since(entry.created) >= self.token_lifetime
        {
            self.tokens.remove(&token);
            return false;
        }
        entry.last_used = now;
        true
    }

    fn logout(&mut self, authorization: Option<&str>) {
        if let Some((_, token)) = authorization.and_then(parse_basic) {
            self.tokens.remove(&token);
        }
    }

    // --- reading -------------------------------------------------------------------------

    fn list(&self, kind: Kind) -> Value {
        let items: Vec<Value> = match kind {
            Kind::System => self.system.iter().map(|s| self.system_json(s)).collect(),
            Kind::Pd => self.pds.iter().map(|pd| self.pd_json(pd)).collect(),
            Kind::Pool => self.pools.iter().map(pool_json).collect(),
            Kind::Sds => self.sdss.iter().map(|s| self.sds_view(s)).collect(),
            Kind::Device => {
                // Each device's SDS by a map made once: a scan of the SDSs per device made
                // the listing of 10,000 quadratic, at every health poll.
                let sdss: HashMap<&str, &Sds> =
                    self.sdss.iter().map(|s| (s.id.as_str(), s)).collect();
                let sds_of = |d: &Device| sdss.get(d.sds_id.as_str()).copied();
                self.devices
                    .iter()
                    .map(|d| self.device_view_on(d, sds_of(d)))
                    .collect()
            }
            Kind::Sdc => self.sdcs.iter().map(|s| self.sdc_json(s)).collect(),
        };
        Value::Array(items)
    }

    fn object_json(&self, kind: Kind, id: &str) -> Option<Value> {
        match kind {
            Kind::System => self
                .system
                .as_ref()
                .filter(|s| s.id == id)
                .map(|s| self.system_json(s)),
            Kind::Pd => self.pd(id).map(|pd| self.pd_json(pd)),
            Kind::Pool => self.pool(id).map(pool_json),
            Kind::Sds => self.sds(id).map(|s| self.sds_view(s)),
            Kind::Device => self
                .devices
                .iter()
                .find(|d| d.id == id)
                .map(|d| self.device_view(d)),
            Kind::Sdc => self
                .sdcs
                .iter()
                .find(|s| s.id == id)
                .map(|s| self.sdc_json(s)),
        }
    }

    fn relationship(&self, kind: Kind, id: &str, relation: &str) -> Reply {
        if self.object_json(kind, id).is_none() {
            return kind.not_found();
        }
        if relation == "Statistics" {
            return Reply::ok(&self.statistics(kind, id));
        }
        let items: Vec<Value> = match (kind, relation) {
            (Kind::System, "ProtectionDomain") => {
                self.pds.iter().map(|pd| self.pd_json(pd)).collect()
            }
            (Kind::System, "Sdc") => self.sdcs.iter().map(|s| self.sdc_json(s)).collect(),
            (Kind::Pd, "StoragePool") => self
                .pools
                .iter()
                .filter(|p| p.pd_id == id)
                .map(pool_json)
                .collect(),
            (Kind::Pd, "Sds") => self
                .sdss
                .iter()
                .filter(|s| s.pd_id == id)
                .map(|s| self.sds_view(s))
                .collect(),
            (Kind::Pool, "Device") => self
                .devices
                .iter()
                .filter(|d| d.pool_id == id)
                .map(|d| self.device_view(d))
                .collect(),
            (Kind::Sds, "Device") => self
                .devices
                .iter()
                .filter(|d| d.sds_id == id)
                .map(|d| self.device_view(d))
                .collect(),
            // Volumes are outside what the simulator models: a pool has none.
            _ => Vec::new(),
        };
        Reply::ok(&Value::Array(items))
    }

    fn sds_view(&self, sds: &Sds) -> Value {
        let mut value = sds_json(sds);
        if self.data.sds_down(&sds.id) {
            value["mdmConnectionState"] = json!("Disconnected");
        }
        if let Some(state) = self.removal_state(Kind::Sds, &sds.id, &sds.id) {
            value["sdsState"] = json!(state);
        }
        value
    }

    fn device_view(&self, device: &Device) -> Value {
        self.device_view_on(device, self.sds(&device.sds_id))
    }

    /// A device as listed, `sds` being its SDS.
    fn device_view_on(&self, device: &Device, sds: Option<&Sds>) -> Value {
        let mut value = device_json(device);
        if let Some(state) = self.removal_state(Kind::Device, &device.id, &device.sds_id) {
            value["deviceState"] = json!(state);
        }
        let ips: Vec<&str> = sds
            .map(|s| s.ips.iter().map(|(ip, _)| ip.as_str()).collect())
            .unwrap_or_default();
        self.health.device(&mut value, &ips, &device.path);
        value
    }

    /// A health fault on, or off; the hosts it names must have what it names.
    fn inject(&mut self, fault: HealthFault) -> Result<(), String> {
        fault.check()?;
        let sds_at = |ip: &str| {
            self.sdss
                .iter()
                .find(|s| s.ips.iter().any(|(i, _)| i == ip))
        };
        match &fault {
            HealthFault::SdsConnected { ip, .. } => {
                sds_at(ip).ok_or_else(|| format!("no SDS at {ip}"))?;
            }
            HealthFault::SdcConnected { ip, .. } => {
                if !self.sdcs.iter().any(|s| s.ip == *ip) {
                    return Err(format!("no SDC at {ip}"));
                }
            }
            HealthFault::DeviceFailed { ip, path, .. } => {
                let sds = sds_at(ip).ok_or_else(|| format!("no SDS at {ip}"))?;
                if !self
                    .devices
                    .iter()
                    .any(|d| d.sds_id == sds.id && d.path == *path)
                {
                    return Err(format!("the SDS at {ip} has no device {path}"));
                }
            }
            HealthFault::MdmDegraded(_) | HealthFault::Rebuild(_) | HealthFault::Fill(_) => {
                if self.system.is_none() {
                    return Err("no MDM cluster yet".to_string());
                }
            }
        }
        log::info!("gateway: health fault {fault:?}");
        let now = Instant::now();
        match &fault {
            HealthFault::SdsConnected { ip, connected } => {
                let id = sds_at(ip).map(|s| s.id.clone()).unwrap_or_default();
                self.observe(now);
                let degraded = self.health.rebuilding(now);
                self.data.cut_off(&id, !connected, degraded, now);
            }
            HealthFault::MdmDegraded(on) => self.data.mdm_cut_off(*on),
            _ => {}
        }
        self.health.apply(fault);
        Ok(())
    }

    fn observe_if_due(&mut self) {
        let now = Instant::now();
        self.finish_removals(now);
        if self
            .observed
            .is_none_or(|at| now.duration_since(at) >= OBSERVE_EVERY)
        {
            self.observe(now);
        }
    }

    /// Looks at the hosts of every SDS and MDM member and tells the data model what they
    /// show. Addresses the directory cannot see into (synthetic agents) are not asked again,
    /// so that a cluster of them costs nothing once each was asked.
    fn observe(&mut self, now: Instant) {
        self.observed = Some(now);
        let sds_ips: Vec<Option<&str>> = self
            .sdss
            .iter()
            .map(|s| {
                sds_role_ips(&s.ips)
                    .into_iter()
                    .find(|ip| !self.blind.contains(*ip))
            })
            .collect();
        let mdm = [&self.mdm.primary, &self.mdm.secondary, &self.mdm.tiebreaker];
        let mdm_ips = mdm.map(|ip| {
            (self.system.is_some() && !self.blind.contains(ip.as_str())).then_some(ip.as_str())
        });
        let asked: Vec<&str> = sds_ips.iter().chain(&mdm_ips).flatten().copied().collect();
        // Nothing to look at, and no SDS added or removed: nothing can have changed.
        if asked.is_empty() && self.sdss.len() == self.observed_sdss {
            return;
        }
        self.observed_sdss = self.sdss.len();
        let facts = match (&self.hosts, asked.is_empty()) {
            (Some(hosts), false) => hosts.look_up_all(&asked),
            _ => vec![None; asked.len()],
        };
        let answers: HashMap<&str, Option<HostFacts>> = asked.iter().copied().zip(facts).collect();
        let answer = |ip: Option<&str>| ip.and_then(|ip| answers.get(ip).cloned().flatten());
        let seen: Vec<data::SdsSeen> = self
            .sdss
            .iter()
            .zip(&sds_ips)
            .map(|(sds, ip)| data::SdsSeen {
                id: &sds.id,
                name: sds.name.as_deref().unwrap_or(&sds.id),
                pd: pd_name_in(&self.pds, &sds.pd_id),
                process: match answer(*ip) {
                    Some(f) => f
                        .sds_process
                        .map_or(data::Process::Stopped, data::Process::Running),
                    None => data::Process::Unknown,
                },
            })
            .collect();
        let degraded = self.health.rebuilding(now);
        self.data.observe_sdss(&seen, degraded, now);
        self.data
            .observe_mdm(mdm_ips.map(|ip| answer(ip).and_then(|f| f.mdm_running)));
        if self.hosts.is_some() {
            let blind = answers.iter().filter(|(_, f)| f.is_none());
            let newly: Vec<String> = blind.map(|(ip, _)| ip.to_string()).collect();
            self.blind.extend(newly);
        }
    }

    fn pd(&self, id: &str) -> Option<&Pd> {
        self.pds.iter().find(|pd| pd.id == id)
    }

    fn pool(&self, id: &str) -> Option<&Pool> {
        self.pools.iter().find(|p| p.id == id)
    }

    fn sds(&self, id: &str) -> Option<&Sds> {
        self.sdss.iter().find(|s| s.id == id)
    }

    fn system_json(&self, system: &System) -> Value {
        // Real members report the build with patch 0 (`R2_0.10000.0` on an
        // `R2_0.10000.2072` system); only `systemVersionName` carries the full version.
        let member_version = member_version(&self.version_info);
        let member = |index: usize, name: &str, ip: &str, role: &str| {
            let mut value = json!({
                "id": system.mdm_ids[index],
                "name": name,
                "port": MDM_PORT,
                "ips": [ip],
                "managementIPs": [ip],
                "role": role,
                "status": "Normal",
                "versionInfo": member_version,
                "opensslVersion": "OpenSSL 1.0.2g  1 Mar 2016",
                "virtualInterfaces": [],
            });
            // The master carries no `status`; slaves and tie-breakers do.
            if index == 0 {
                if let Value::Object(map) = &mut value {
                    map.remove("status");
                }
            }
            value
        };
        let mut value = json!({
            "id": system.id,
            "name": system.name,
            "systemVersionName": format!("EMC ScaleIO Version: {}", self.version_info),
            "installId": system.install_id,
            "mdmCluster": {
                "id": system.cluster_id,
                "name": system.name,
                "clusterMode": "ThreeNodes",
                "clusterState": "ClusteredNormal",
                "goodNodesNum": 3,
                "goodReplicasNum": 2,
                "virtualIps": [],
                "master": member(0, "mdm1", &self.mdm.primary, "Manager"),
                "slaves": [member(1, "mdm2", &self.mdm.secondary, "Manager")],
                "tieBreakers": [member(2, "tb", &self.mdm.tiebreaker, "TieBreaker")],
                "standbyMDMs": [],
            },
            "mdmManagementPort": 6611,
            "capacityAlertHighThresholdPercent": 80,
            "capacityAlertCriticalThresholdPercent": 90,
            "remoteReadOnlyLimitState": false,
            "upgradeState": "NoUpgrade",
            "swid": "",
            "daysInstalled": 0,
            "maxCapacityInGb": "Unlimited",
            "capacityTimeLeftInDays": "Unlimited",
            "enterpriseFeaturesEnabled": true,
            "isInitialLicense": true,
            "defaultIsVolumeObfuscated": false,
            "restrictedSdcModeEnabled": false,
            "links": links(Kind::System, &system.id, None),
        });
        self.data.mdm_cluster(&mut value["mdmCluster"]);
        value
    }

    fn pd_json(&self, pd: &Pd) -> Value {
        let system_id = self.system.as_ref().map(|s| s.id.as_str()).unwrap_or("");
        let mut value = json!({
            "id": pd.id,
            "systemId": system_id,
            "protectionDomainState": "Active",
            "rebuildNetworkThrottlingEnabled": false,
            "rebalanceNetworkThrottlingEnabled": false,
            "overallIoNetworkThrottlingEnabled": false,
            "links": links(Kind::Pd, &pd.id, Some(("systemId", Kind::System, system_id))),
        });
        set_name(&mut value, &pd.name);
        value
    }

    fn statistics(&self, kind: Kind, id: &str) -> Value {
        let mut capacity = Capacity::default();
        let mut counts = Map::new();
        match kind {
            Kind::System => {
                for pool in &self.pools {
                    capacity.add(&self.pool_capacity(pool));
                }
                counts.insert("numOfProtectionDomains".into(), self.pds.len().into());
                counts.insert("numOfStoragePools".into(), self.pools.len().into());
                counts.insert("numOfSds".into(), self.sdss.len().into());
                counts.insert("numOfSdc".into(), 0.into());
            }
            Kind::Pd => {
                let pools: Vec<&Pool> = self.pools.iter().filter(|p| p.pd_id == id).collect();
                for pool in &pools {
                    capacity.add(&self.pool_capacity(pool));
                }
                counts.insert("numOfStoragePools".into(), pools.len().into());
                let sds_count = self.sdss.iter().filter(|s| s.pd_id == id).count();
                counts.insert("numOfSds".into(), sds_count.into());
            }
            Kind::Pool => {
                if let Some(pool) = self.pool(id) {
                    capacity = self.pool_capacity(pool);
                }
            }
            Kind::Sds => {
                for device in self.devices.iter().filter(|d| d.sds_id == id) {
                    capacity.add(&self.device_capacity(device));
                }
            }
            Kind::Device => {
                if let Some(device) = self.devices.iter().find(|d| d.id == id) {
                    capacity = self.device_capacity(device);
                }
            }
            Kind::Sdc => {}
        }
        let h = capacity.health;
        let mut stats = json!({
            "maxCapacityInKb": capacity.max_kb,
            "capacityLimitInKb": capacity.max_kb,
            "spareCapacityInKb": capacity.spare_kb,
            "capacityInUseInKb": h.in_use_kb,
            "unusedCapacityInKb": capacity.max_kb - capacity.spare_kb - h.in_use_kb,
            "capacityAvailableForVolumeAllocationInKb": capacity.allocatable_kb,
            "thinCapacityInUseInKb": 0,
            "thickCapacityInUseInKb": 0,
            "snapCapacityInUseInKb": 0,
            "snapCapacityInUseOccupiedInKb": 0,
            "protectedCapacityInKb": h.in_use_kb - h.degraded_kb,
            "degradedHealthyCapacityInKb": h.degraded_kb,
            "degradedFailedCapacityInKb": 0,
            "failedCapacityInKb": 0,
            "inMaintenanceCapacityInKb": 0,
            "pendingFwdRebuildCapacityInKb": h.pending_rebuild_kb,
            "pendingBckRebuildCapacityInKb": 0,
            "pendingRebalanceCapacityInKb": h.rebalance_kb,
            "movingCapacityInKb": h.moving_kb + h.rebalance_kb,
            "numOfDevices": capacity.devices,
            "numOfVolumes": 0,
            "numOfSnapshots": 0,
            "numOfVtrees": 0,
            "numOfThinBaseVolumes": 0,
            "numOfThickBaseVolumes": 0,
            "numOfUnmappedVolumes": 0,
            "numOfMappedToAllVolumes": 0,
        });
        if let Value::Object(map) = &mut stats {
            map.extend(counts);
        }
        stats
    }

    fn spare_percentage_of(&self, pool_id: &str) -> u64 {
        self.pool(pool_id).map(|p| p.spare_percentage).unwrap_or(0)
    }

    /// Spare is reserved per pool; the rest is mirrored (two copies), so half of it can hold
    /// volume data, in whole allocation units.
    fn capacity_from(max_kb: u64, spare_kb: u64, devices: usize) -> Capacity {
        let allocatable = (max_kb - spare_kb) / 2 / ALLOCATION_UNIT_KB * ALLOCATION_UNIT_KB;
        Capacity {
            max_kb,
            spare_kb,
            allocatable_kb: allocatable,
            devices,
            health: health::PoolFigures::default(),
        }
    }

    fn pool_capacity(&self, pool: &Pool) -> Capacity {
        let devices: Vec<&Device> = self
            .devices
            .iter()
            .filter(|d| d.pool_id == pool.id)
            .collect();
        let max_kb: u64 = devices.iter().map(|d| d.capacity_kb).sum();
        let spare_kb = max_kb * pool.spare_percentage / 100;
        let mut capacity = Model::capacity_from(max_kb, spare_kb, devices.len());
        let now = Instant::now();
        let pd = pd_name_in(&self.pds, &pool.pd_id);
        capacity.health = self.health.pool(max_kb - spare_kb, now).with(
            self.data.pool(pd, max_kb - spare_kb, now),
            max_kb - spare_kb,
        );
        capacity.health.rebalance_kb = self.rebalance_kb(&pool.id, max_kb - spare_kb, now);
        // Data in use is held twice: half of what is left can take new volumes.
        let free = max_kb - spare_kb - capacity.health.in_use_kb;
        capacity.allocatable_kb = free / 2 / ALLOCATION_UNIT_KB * ALLOCATION_UNIT_KB;
        capacity
    }

    fn device_capacity(&self, device: &Device) -> Capacity {
        let spare = device.capacity_kb * self.spare_percentage_of(&device.pool_id) / 100;
        Model::capacity_from(device.capacity_kb, spare, 1)
    }

    // --- creating --------------------------------------------------------------------------

    fn create(&mut self, kind: Kind, request: &ApiRequest) -> Reply {
        let params = match json_params(request) {
            Ok(params) => params,
            Err(reply) => return reply,
        };
        if self.system.is_none() {
            // No MDM cluster behind the gateway yet.
            return Reply::mdm(code::NOT_CONNECTED, "Not connected");
        }
        let result = match kind {
            Kind::Pd => self.create_pd(&params),
            Kind::Pool => self.create_pool(&params),
            Kind::Sds => self.create_sds(&params),
            Kind::Device => self.create_device(&params),
            Kind::System | Kind::Sdc => Err(not_allowed(
                "POST",
                &format!("/api/types/{}/instances", kind.type_name()),
            )),
        };
        match result {
            Ok(id) => Reply::ok(&json!({ "id": id })),
            Err(reply) => reply,
        }
    }
}

/// The JSON object body of a POST, or the gateway's refusal.
fn json_params(request: &ApiRequest) -> Result<Map<String, Value>, Reply> {
    {
        let is_json = request
            .content_type
            .as_deref()
            .map(|t| {
                t.trim()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            })
            .unwrap_or(false);
        if !is_json {
            return Err(Reply::error(
                415,
                code::NONE,
                "Unsupported Media Type: the request body must be application/json",
            ));
        }
        let body: Value = match serde_json::from_slice(&request.body) {
            Ok(value) => value,
            Err(e) => {
                return Err(Reply::bad_request(&format!(
                    "the body is not valid JSON ({e})"
                )))
            }
        };
        let Value::Object(params) = body else {
            return Err(Reply::bad_request("the body must be a JSON object"));
        };
        Ok(params)
    }
}

impl Model {
    fn create_pd(&mut self, params: &Map<String, Value>) -> Result<String, Reply> {
        let name = optional_name(params, "name")?;
        if let Some(name) = &name {
            if self.pds.iter().any(|pd| pd.name.as_ref() == Some(name)) {
                return Err(Reply::mdm(
                    code::PD_NAME_IN_USE,
                    "Protection Domain name already in use. Please try a different name.",
                ));
            }
        }
        let id = self.next_id(0x5d00_0000);
        self.pds.push(Pd {
            id: id.clone(),
            name,
        });
        Ok(id)
    }

    fn create_pool(&mut self, params: &Map<String, Value>) -> Result<String, Reply> {
        let pd_id = required_id(params, "protectionDomainId")?;
        let name = optional_name(params, "name")?;
        let spare_percentage = optional_u64(params, "sparePercentage")?.unwrap_or(10);
        if spare_percentage > 99 {
            return Err(Reply::bad_request(&format!(
                "sparePercentage {spare_percentage} is not between 0 and 99"
            )));
        }
        if self.pd(&pd_id).is_none() {
            return Err(Kind::Pd.not_found());
        }
        if let Some(name) = &name {
            let taken = self
                .pools
                .iter()
                .any(|p| p.pd_id == pd_id && p.name.as_ref() == Some(name));
            if taken {
                return Err(Reply::mdm(
                    code::POOL_NAME_IN_USE,
                    "Storage Pool name already exists",
                ));
            }
        }
        let id = self.next_id(0x5b00_0000);
        self.pools.push(Pool {
            id: id.clone(),
            name,
            pd_id,
            spare_percentage,
        });
        Ok(id)
    }

    fn create_sds(&mut self, params: &Map<String, Value>) -> Result<String, Reply> {
        let pd_id = required_id(params, "protectionDomainId")?;
        let ip_list = match params.get("sdsIpList") {
            None | Some(Value::Null) => return Err(Reply::missing("sdsIpList")),
            Some(Value::Array(items)) if !items.is_empty() => items,
            Some(_) => return Err(Reply::bad_request(
                "sdsIpList must be a non-empty list of {\"SdsIp\": {\"ip\": ..., \"role\": ...}}",
            )),
        };
        let mut ips = Vec::new();
        for item in ip_list {
            ips.push(parse_sds_ip(item)?);
        }
        let name = optional_name(params, "name")?;
        let port = optional_u64(params, "sdsPort")?.unwrap_or(SDS_DEFAULT_PORT);
        if port == 0 || port > 65535 {
            return Err(Reply::bad_request(&format!("sdsPort {port} is not a port")));
        }
        let new_devices = match params.get("deviceInfoList") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut devices = Vec::new();
                for item in items {
                    devices.push(self.parse_device_info(item)?);
                }
                devices
            }
            Some(_) => return Err(Reply::bad_request("deviceInfoList must be a list")),
        };
        if self.pd(&pd_id).is_none() {
            return Err(Kind::Pd.not_found());
        }
        if !ips
            .iter()
            .any(|(_, role)| role == "all" || role == "sdsOnly")
        {
            return Err(Reply::mdm(
                code::SDS_NEEDS_SDS_IP,
                "SDS must have at least one IP for SDS communication.",
            ));
        }
        if let Some(name) = &name {
            if self.sdss.iter().any(|s| s.name.as_ref() == Some(name)) {
                return Err(Reply::mdm(
                    code::SDS_NAME_IN_USE,
                    "SDS name is already in use. Please use a different name.",
                ));
            }
        }
        let address_taken = self.sdss.iter().any(|s| {
            s.port == port
                && s.ips
                    .iter()
                    .any(|(ip, _)| ips.iter().any(|(new, _)| new == ip))
        });
        if address_taken {
            return Err(Reply::mdm(
                code::SDS_ADDRESS_IN_USE,
                "The SDS IP address and port already in use. Please try with different ones.",
            ));
        }
        let sds_ips = sds_role_ips(&ips);
        hosts::check_sds_address(self.hosts.as_ref(), &sds_ips, port).map_err(refused)?;
        for (index, device) in new_devices.iter().enumerate() {
            self.check_device_fits(&pd_id, device)?;
            hosts::check_device_path(self.hosts.as_ref(), &sds_ips, &device.path)
                .map_err(refused)?;
            let clash = new_devices[..index].iter().any(|earlier| {
                earlier.path == device.path
                    || (device.name.is_some() && earlier.name == device.name)
            });
            if clash {
                return Err(device_exists());
            }
        }
        let id = self.next_id(0x5500_0000);
        self.sdss.push(Sds {
            id: id.clone(),
            name,
            pd_id,
            ips,
            port,
        });
        for device in new_devices {
            self.store_device(device, &id);
        }
        Ok(id)
    }

    fn parse_device_info(&self, item: &Value) -> Result<NewDevice, Reply> {
        let Value::Object(info) = item else {
            return Err(Reply::bad_request(
                "each deviceInfoList entry must be an object",
            ));
        };
        let path = required_str(info, "devicePath")?;
        let pool_id = required_id(info, "storagePoolId")?;
        let name = optional_name(info, "deviceName")?;
        Ok(NewDevice {
            name,
            path,
            pool_id,
            capacity_kb: self.device_capacity_kb,
        })
    }

    fn create_device(&mut self, params: &Map<String, Value>) -> Result<String, Reply> {
        // Public clients spell the parameter `deviceCurrentPathname`; the device object itself
        // says `deviceCurrentPathName`. Both are accepted.
        let path = match (
            params.get("deviceCurrentPathname"),
            params.get("deviceCurrentPathName"),
        ) {
            (Some(_), _) => required_str(params, "deviceCurrentPathname")?,
            (None, Some(_)) => required_str(params, "deviceCurrentPathName")?,
            (None, None) => return Err(Reply::missing("deviceCurrentPathname")),
        };
        let pool_id = required_id(params, "storagePoolId")?;
        let sds_id = required_id(params, "sdsId")?;
        let name = optional_name(params, "name")?;
        let limit = optional_u64(params, "capacityLimitInKb")?;
        if let Some(limit) = limit {
            if limit > self.device_capacity_kb {
                return Err(Reply::mdm(
                    code::DEVICE_TOO_LARGE,
                    "The specified device size is too large. Please specify a size smaller than the capacity of the specified device.",
                ));
            }
        }
        let Some(sds) = self.sds(&sds_id) else {
            return Err(Kind::Sds.not_found());
        };
        let sds_pd = sds.pd_id.clone();
        let device = NewDevice {
            name,
            path,
            pool_id,
            capacity_kb: limit.filter(|l| *l > 0).unwrap_or(self.device_capacity_kb),
        };
        let sds_ips: Vec<String> = sds.ips.iter().map(|(ip, _)| ip.clone()).collect();
        let on_host: Vec<String> = sds_role_ips(&sds.ips)
            .into_iter()
            .map(str::to_string)
            .collect();
        self.check_device_fits(&sds_pd, &device)?;
        let clash = self.devices.iter().any(|d| {
            d.sds_id == sds_id
                && (d.path == device.path || (device.name.is_some() && d.name == device.name))
        });
        if clash {
            return Err(device_exists());
        }
        // Another SDS on the same host (same address, another port) already owns this disk.
        let used_elsewhere = self.devices.iter().any(|d| {
            d.sds_id != sds_id
                && d.path == device.path
                && self
                    .sds(&d.sds_id)
                    .is_some_and(|other| other.ips.iter().any(|(ip, _)| sds_ips.contains(ip)))
        });
        if used_elsewhere {
            return Err(Reply::mdm(
                code::DEVICE_IN_USE_BY_OTHER_SDS,
                "The device is already in use by another SDS",
            ));
        }
        let on_host: Vec<&str> = on_host.iter().map(String::as_str).collect();
        hosts::check_device_path(self.hosts.as_ref(), &on_host, &device.path).map_err(refused)?;
        Ok(self.store_device(device, &sds_id))
    }

    /// The device path is usable and its pool exists in the SDS's protection domain.
    fn check_device_fits(&self, sds_pd: &str, device: &NewDevice) -> Result<(), Reply> {
        if !device.path.starts_with('/') || device.path.len() < 2 {
            return Err(Reply::mdm(
                code::INVALID_DEVICE_PATH,
                "The path to the device is invalid. Please ensure that you are using the correct path.",
            ));
        }
        let Some(pool) = self.pool(&device.pool_id) else {
            return Err(Kind::Pool.not_found());
        };
        if pool.pd_id != sds_pd {
            return Err(Reply::mdm(
                code::POOL_NOT_IN_PD,
                "The specified Storage Pool is not in the specified Protection Domain",
            ));
        }
        Ok(())
    }

    fn store_device(&mut self, device: NewDevice, sds_id: &str) -> String {
        // Real device ids carry a per-SDS counter in the low half.
        let on_sds = self.devices.iter().filter(|d| d.sds_id == sds_id).count() as u32;
        let high = self.next_id(0xde00_0000);
        let id = format!("{}{:04x}0000", &high[..8], on_sds + 1);
        self.devices.push(Device {
            id: id.clone(),
            name: device.name,
            path: device.path,
            pool_id: device.pool_id,
            sds_id: sds_id.to_string(),
            capacity_kb: device.capacity_kb,
        });
        id
    }
}

/// A domain's name as events and logs call it (its id when it has none).
fn pd_name_in<'a>(pds: &'a [Pd], id: &'a str) -> &'a str {
    pds.iter()
        .find(|pd| pd.id == id)
        .and_then(|pd| pd.name.as_deref())
        .unwrap_or(id)
}

/// The addresses an SDS serves data on (all but `sdcOnly` ones).
fn sds_role_ips(ips: &[(String, String)]) -> Vec<&str> {
    ips.iter()
        .filter(|(_, role)| role != "sdcOnly")
        .map(|(ip, _)| ip.as_str())
        .collect()
}

fn refused(refusal: hosts::Refusal) -> Reply {
    match refusal {
        hosts::Refusal::NoSdsAt(ip, port) => Reply::mdm(
            code::SDS_NOT_REACHABLE,
            &format!("Could not connect to an SDS at {ip}:{port}. Please verify that the SDS is installed and running at this address."),
        ),
        hosts::Refusal::NoDevice(ip, path) => Reply::mdm(
            code::DEVICE_NOT_ON_HOST,
            &format!("The SDS at {ip} could not open device {path}. Please verify that the device exists on the SDS host."),
        ),
    }
}

fn device_exists() -> Reply {
    Reply::mdm(
        code::DEVICE_ALREADY_EXISTS,
        "A device with the given name already exists in the SDS",
    )
}

fn pool_json(pool: &Pool) -> Value {
    let mut value = json!({
        "id": pool.id,
        "protectionDomainId": pool.pd_id,
        "sparePercentage": pool.spare_percentage,
        "zeroPaddingEnabled": false,
        "useRmcache": false,
        "rmcacheWriteHandlingMode": "Cached",
        "rebuildEnabled": true,
        "rebalanceEnabled": true,
        "numOfParallelRebuildRebalanceJobsPerDevice": 2,
        "capacityAlertHighThreshold": 80,
        "capacityAlertCriticalThreshold": 90,
        "links": links(Kind::Pool, &pool.id, Some(("protectionDomainId", Kind::Pd, &pool.pd_id))),
    });
    set_name(&mut value, &pool.name);
    value
}

fn sds_json(sds: &Sds) -> Value {
    let mut value = json!({
        "id": sds.id,
        "protectionDomainId": sds.pd_id,
        "ipList": sds.ips.iter().map(|(ip, role)| json!({"ip": ip, "role": role})).collect::<Vec<_>>(),
        "port": sds.port,
        "sdsState": "Normal",
        "membershipState": "Joined",
        "mdmConnectionState": "Connected",
        "drlMode": "Volatile",
        "rmcacheEnabled": true,
        "rmcacheSizeInKb": 131072,
        "rmcacheFrozen": false,
        "isOnVmWare": false,
        "numOfIoBuffers": 0,
        "links": links(Kind::Sds, &sds.id, Some(("protectionDomainId", Kind::Pd, &sds.pd_id))),
    });
    set_name(&mut value, &sds.name);
    value
}

fn device_json(device: &Device) -> Value {
    let mut value = json!({
        "id": device.id,
        "deviceCurrentPathName": device.path,
        "deviceOriginalPathName": device.path,
        "storagePoolId": device.pool_id,
        "sdsId": device.sds_id,
        "deviceState": "Normal",
        "errorState": "None",
        "capacityLimitInKb": device.capacity_kb,
        "maxCapacityInKb": device.capacity_kb,
        "links": links(Kind::Device, &device.id, Some(("sdsId", Kind::Sds, &device.sds_id))),
    });
    // Unnamed devices (the usual case) answer `"name": null`, not a missing field.
    if let Value::Object(map) = &mut value {
        map.insert(
            "name".to_string(),
            device
                .name
                .clone()
                .map(Value::String)
                .unwrap_or(Value::Null),
        );
    }
    value
}

fn set_name(value: &mut Value, name: &Option<String>) {
    if let (Value::Object(map), Some(name)) = (value, name) {
        map.insert("name".to_string(), Value::String(name.clone()));
    }
}

/// `self`, the parent and every relationship, with the rel names public clients look up
/// (`/api/System/relationship/ProtectionDomain`, `/api/parent/relationship/systemId`, ...).
fn links(kind: Kind, id: &str, parent: Option<(&str, Kind, &str)>) -> Value {
    let type_name = kind.type_name();
    let self_href = format!("/api/instances/{type_name}::{id}");
    let mut links = vec![json!({"rel": "self", "href": self_href})];
    for relation in kind.relationships() {
        links.push(json!({
            "rel": format!("/api/{type_name}/relationship/{relation}"),
            "href": format!("{self_href}/relationships/{relation}"),
        }));
    }
    if let Some((field, parent_kind, parent_id)) = parent {
        links.push(json!({
            "rel": format!("/api/parent/relationship/{field}"),
            "href": format!("/api/instances/{}::{parent_id}", parent_kind.type_name()),
        }));
    }
    Value::Array(links)
}

fn parse_object(segment: &str) -> Option<(Kind, &str)> {
    let (type_name, id) = segment.split_once("::")?;
    if id.is_empty() {
        return None;
    }
    Some((Kind::parse(type_name)?, id))
}

fn only_get(method: &str, path: &str) -> Option<Reply> {
    if method == "GET" {
        None
    } else {
        Some(not_allowed(method, path))
    }
}

fn not_allowed(method: &str, path: &str) -> Reply {
    Reply::error(
        405,
        code::NONE,
        &format!("Method {method} is not allowed on {path}"),
    )
}

fn not_route(path: &str) -> Reply {
    Reply::error(404, code::NONE, &format!("No resource at {path}"))
}

fn parse_sds_ip(item: &Value) -> Result<(String, String), Reply> {
    let shape = "each sdsIpList entry must look like {\"SdsIp\": {\"ip\": \"10.0.0.1\", \"role\": \"all\"}}";
    let Some(Value::Object(inner)) = item.get("SdsIp") else {
        return Err(Reply::bad_request(shape));
    };
    let ip = match inner.get("ip") {
        Some(Value::String(ip)) => ip.clone(),
        _ => return Err(Reply::bad_request(shape)),
    };
    if ip.parse::<Ipv4Addr>().is_err() {
        return Err(Reply::bad_request(&format!(
            "SDS IP {ip:?} is not an IPv4 address"
        )));
    }
    let role = match inner.get("role") {
        None | Some(Value::Null) => "all".to_string(),
        Some(Value::String(role)) if ["all", "sdsOnly", "sdcOnly"].contains(&role.as_str()) => {
            role.clone()
        }
        Some(other) => {
            return Err(Reply::bad_request(&format!(
                "SDS IP role {other} is not one of all, sdsOnly, sdcOnly"
            )))
        }
    };
    Ok((ip, role))
}

/// Like [`required_str`] for an object id: a value that cannot be an id is the MDM's
/// "illegal syntax" (errorCode 0), not "not found".
fn required_id(params: &Map<String, Value>, key: &str) -> Result<String, Reply> {
    let id = required_str(params, key)?;
    if !well_formed_id(&id) {
        return Err(malformed_id(&id));
    }
    Ok(id)
}

/// Object ids are 16 hexadecimal digits.
fn well_formed_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn malformed_id(what: &str) -> Reply {
    Reply::mdm(code::NONE, &format!("Invalid object id: {what}"))
}

/// `R2_0.10000.2072` -> `R2_0.10000.0`: what MDM members and SDCs report.
fn member_version(version_info: &str) -> String {
    match version_info.rsplit_once('.') {
        Some((head, _patch)) => format!("{head}.0"),
        None => version_info.to_string(),
    }
}

fn required_str(params: &Map<String, Value>, key: &str) -> Result<String, Reply> {
    match params.get(key) {
        None | Some(Value::Null) => Err(Reply::missing(key)),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(Reply::missing(key)),
        Some(other) => Err(Reply::bad_request(&format!(
            "parameter {key} must be a string, got {other}"
        ))),
    }
}

fn optional_name(params: &Map<String, Value>, key: &str) -> Result<Option<String>, Reply> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => match check_name(name) {
            Ok(()) => Ok(Some(name.clone())),
            Err(_) => Err(Reply::mdm(
                code::INVALID_NAME,
                "The given name contains invalid characters. Use alphanumeric and punctuation characters only. Spaces are not allowed.",
            )),
        },
        Some(other) => Err(Reply::bad_request(&format!(
            "parameter {key} must be a string, got {other}"
        ))),
    }
}

/// Numbers arrive as JSON numbers or as decimal strings (public clients send both).
fn optional_u64(params: &Map<String, Value>, key: &str) -> Result<Option<u64>, Reply> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| {
            Reply::bad_request(&format!("parameter {key} must be a whole number, got {n}"))
        }),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| {
            Reply::bad_request(&format!(
                "parameter {key} must be a whole number, got {s:?}"
            ))
        }),
        Some(other) => Err(Reply::bad_request(&format!(
            "parameter {key} must be a whole number, got {other}"
        ))),
    }
}

/// Object names: 1 to 31 printable ASCII characters, no spaces (the storage system's rule).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_string());
    }
    if name.len() > 31 {
        return Err(format!("{name:?} is longer than 31 characters"));
    }
    if !name.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!(
            "{name:?} may hold only printable ASCII characters without spaces"
        ));
    }
    Ok(())
}

fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(value) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `Basic base64(user:password)` -> (user, password).
fn parse_basic(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64_decode(encoded.trim())?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(BASE64[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard alphabet; padding optional (clients send it, real tokens have none).
fn base64_decode(input: &str) -> Option<Vec<u8>> {
    let trimmed = input.trim_end_matches('=');
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in trimmed.bytes() {
        let value = BASE64.iter().position(|&b| b == c)? as u32;
        acc = (acc << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover symbol cannot encode a byte.
    if trimmed.len() % 4 == 1 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A byte stream that serves `input` and records what is written.
    struct Scripted {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn conn(input: &[u8]) -> HttpConn<Scripted> {
        HttpConn::new(
            Scripted {
                input: Cursor::new(input.to_vec()),
                output: Vec::new(),
            },
            Arc::new(AtomicBool::new(false)),
        )
    }

    #[test]
    fn base64_round_trips_every_length() {
        for len in 0..10 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 5) as u8).collect();
            let encoded = base64_encode(&data);
            assert_eq!(base64_decode(&encoded), Some(data.clone()), "len {len}");
            assert_eq!(base64_decode(encoded.trim_end_matches('=')), Some(data));
        }
        assert_eq!(base64_encode(b"admin:pw"), "YWRtaW46cHc=");
        assert_eq!(base64_decode("not*base64"), None);
    }

    #[test]
    fn basic_auth_splits_at_the_first_colon() {
        let header = format!("Basic {}", base64_encode(b":tok:en"));
        assert_eq!(
            parse_basic(&header),
            Some((String::new(), "tok:en".to_string()))
        );
        assert_eq!(parse_basic("Bearer abc"), None);
    }

    #[test]
    fn reads_pipelined_requests_with_length_and_chunked_bodies() {
        let mut c = conn(
            b"POST /api/x HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}\
GET /api/y HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n",
        );
        let ReadOutcome::Request(first) = c.read_request() else {
            panic!("first request not read");
        };
        assert_eq!(
            (first.method.as_str(), first.target.as_str()),
            ("POST", "/api/x")
        );
        assert_eq!(first.body, b"{}");
        assert!(first.keep_alive);
        let ReadOutcome::Request(second) = c.read_request() else {
            panic!("second request not read");
        };
        assert_eq!(second.body, b"abcde");
        assert!(!second.keep_alive);
        assert!(matches!(c.read_request(), ReadOutcome::End));
        let ReadOutcome::Request(head) = conn(b"HEAD /api/version HTTP/1.1\r\n\r\n").read_request()
        else {
            panic!("HEAD request not read");
        };
        assert!(!head.keep_alive);
    }

    #[test]
    fn rejects_malformed_and_oversized_requests() {
        for (input, status) in [
            (&b"GARBAGE\r\n\r\n"[..], 400),
            (b"GET /x HTTP/2.0\r\n\r\n", 505),
            (b"GET /x HTTP/1.1\r\nno colon\r\n\r\n", 400),
            (b"POST /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400),
            (b"POST /x HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413),
            (b"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            (
                b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                400,
            ),
        ] {
            match conn(input).read_request() {
                ReadOutcome::Reject(got, _) => assert_eq!(got, status, "{input:?}"),
                _ => panic!("{input:?} was not rejected"),
            }
        }
        let mut huge = b"GET /x HTTP/1.1\r\nX: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES + 10));
        assert!(matches!(
            conn(&huge).read_request(),
            ReadOutcome::Reject(431, _)
        ));
    }

    #[test]
    fn answers_expect_continue_before_the_body() {
        let mut c = conn(b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n");
        assert!(matches!(c.read_request(), ReadOutcome::Request(_)));
        assert!(c.stream.output.is_empty(), "no body, so no 100 Continue");
        let mut c = conn(b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n");
        // The body never comes: the reader gives up (End) after sending the interim reply.
        assert!(matches!(c.read_request(), ReadOutcome::End));
        assert_eq!(c.stream.output, b"HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn percent_decoding_keeps_bad_escapes() {
        assert_eq!(
            percent_decode("/api/instances/System%3A%3Aab"),
            "/api/instances/System::ab"
        );
        assert_eq!(percent_decode("/a%zz%4"), "/a%zz%4");
    }

    #[test]
    fn names_follow_the_storage_system_rule() {
        assert!(check_name("pd_1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("has space").is_err());
        assert!(check_name(&"x".repeat(32)).is_err());
    }
}
