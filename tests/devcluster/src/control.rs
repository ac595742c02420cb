//! Fault injection over HTTP on loopback, so that tests written in any language (and people
//! with curl) can break the cluster on purpose.
//!
//! | method and path | effect |
//! |---|---|
//! | `GET /control/state` | master and gateway snapshots |
//! | `GET /control/master/launches` | the master's record of every executor start/end and task launch, in order |
//! | `POST /control/master/cut-stream` | close the scheduler event streams |
//! | `POST /control/master/freeze-stream` | scheduler event streams go half-open: open, silent, no heartbeats |
//! | `POST /control/master/failover` | the standby master leads; the old one answers 307 |
//! | `POST /control/master/failover?reregister_ms=N` | the same, and the agents re-register one after another over N ms: until its agent has, reconciliation about a task gets no answer |
//! | `POST /control/master/drop-next-call?type=ACCEPT` | the master refuses (503) the next scheduler call of that type |
//! | `POST /control/agents/<n>/stop`, `/start`, `/restart` | agent `n` (1-based): its host cut off (executors die, the agent keeps its id), back, or the agent process restarted on a host that stays up |
//! | `POST /control/agents/<n>/kill-executor?id=<executor id>` | SIGKILL that executor |
//! | `POST /control/agents/<n>/partition`, `/heal[?tasks=lost]` | agent `n` is cut off from the master (unreachable after the ping timeout), then re-registers with its tasks (or without them) |
//! | `POST /control/agents/<n>/rescind-before-accept` | the next ACCEPT of an offer of agent `n` finds it rescinded (TASK_DROPPED, REASON_INVALID_OFFERS) |
//! | `POST /control/gateway/fail?count=N` (no count: until cleared) | gateway answers 500 |
//! | `POST /control/gateway/clear` | end injected gateway faults, delays and health faults |
//! | `POST /control/gateway/delay?ms=N` | slow gateway replies |
//! | `POST /control/gateway/expire-tokens` | every gateway token becomes invalid |
//! | `POST /control/gateway/sdc?agent=N&mdm=<MDM_IP>` | agent N's SDC package was installed with that `MDM_IP`: its SDC registers with the gateway when the list names this cluster's MDMs (a reboot of the agent disconnects it until the next registration) |
//! | `POST /control/gateway/sds?agent=N&connected=false\|true` | agent N's SDS loses (or regains) its MDM connection (`mdmConnectionState`), as when its host or `sds` service is down (which the gateway sees by itself): its domain's pools miss copies until it is back and rebuilt |
//! | `POST /control/gateway/rebuild-time?seconds=S` | rebuilding what an SDS missed takes S seconds (decimals allowed) after each later outage, once it is back (`--rebuild-seconds`, default 1) |
//! | `GET /control/gateway/events` | `{"data_unavailable": N, "quorum_loss": N, "max_sds_down_per_domain": {"<pd>": N}, "sds_down_now": {"<pd>": N}, "log": [...]}`: data-unavailable events (an SDS of a domain down while another of it is down or rebuilding, or every pool rebuilds), quorum losses (two MDM members down), counted on transitions since the start or the last reset |
//! | `POST /control/gateway/events/reset` | zeroes those counters and the log |
//! | `POST /control/gateway/sdc-connection?agent=N&connected=false\|true` | agent N's SDC loses (or regains) its MDM connection; `true` ends only this injection, not a reboot's disconnection |
//! | `POST /control/gateway/device?agent=N&path=/dev/sdb&failed=true\|false` | that device of agent N's SDS is in error (`deviceState` `Error`, `errorState` `DeviceFailed`), or back |
//! | `POST /control/gateway/mdm?degraded=true\|false` | the MDM cluster is `ClusteredDegraded`, its secondary manager `Disconnected` (2 of 3 members up), or back; a member whose host or `mdm` service is down counts the same way, and two down lose quorum |
//! | `POST /control/gateway/rebuild?seconds=N` | every pool holds degraded data (a tenth of it) pending rebuild, draining to zero over N seconds of the gateway's clock; `seconds=0` ends it |
//! | `POST /control/gateway/fill?pct=P` | every pool's capacity in use is P percent of what it can hold; `pct=0` is back to normal |
//! | `POST /control/gateway/create-system?name=<name>[&primary=IP&secondary=IP&tiebreaker=IP]` | the empty gateway (experimental mode) gets its system, reporting that MDM trio when given (SDCs installed earlier with its `MDM_IP` connect); the same name again is a no-op, another name a 409 |
//! | `POST /control/agents/<n>/reboot[?outage_ms=N]` | agent `n`'s host reboots as in Mesos 1.4: down now, its executors dead; it boots its pending kernel (host stand-ins) and after the outage (default: the master's `reboot_outage`, longer than its agent ping timeout) its agent registers under a new id. Outlasting the ping timeout, the old agent is unreachable first (TASK_UNREACHABLE, FAILURE) and stays so; a shorter outage removes it (TASK_GONE, FAILURE). The reply names the new id |
//! | `POST /control/hosts/preinstall?version=V&mdm=<MDM_IP>[&rexray=V]` | every agent's host (host stand-ins) has the storage data-node packages (SDS, SDC) installed at version V (`2.0-10000.2072`) and running, as the spec's prerequisites allow, its SDC installed with that `MDM_IP` (and registered with the gateway); with `rexray`, REX-Ray too. Before the scheduler starts |
//! | `GET /control/hosts/<ip>` | the host stand-in state of the agent with that address (404 when none): how a stand-in `scli` finds the MDM it adds |
//! | `POST /control/agents/<n>/new-id[?outage_ms=N]` | the same as `reboot` |
//! | `GET /control/agents/<n>/host` | agent `n`'s host stand-in state (packages, services, kernel, MDM cluster, command history) |
//! | `POST /control/agents/<n>/service?name=<sds\|lia\|mdm\|rexray\|scini>&running=false\|true` | agent `n`'s installed service stopped or started as by hand; `scini` is the SDC's kernel module unloaded or loaded (`proc/modules`). 409 when the service is not installed |
//! | `POST /control/agents/<n>/disk?path=/dev/<name>&present=true\|false[&gib=N]` | a free disk plugged into agent `n`'s running host (sysfs, device node, `proc/partitions`), or pulled out (a whole disk only; one its SDS serves goes into error at the gateway) |
//!
//! The host stand-ins (`crate::host`) use the gateway and reboot endpoints; they find this API
//! in `STORAGE_DEVCLUSTER_CONTROL`, so [`bind`] comes first when the agents need the URL.
//! Serving also shows the gateway the agents' hosts, so that it refuses an SDS or a device
//! where the MDM would ([`crate::gateway::GatewayHandle::watch_hosts`]).

use crate::gateway::{GatewayHandle, HealthFault, HostDirectory, HostFacts};
use crate::host::{self, FakeRoot};
use crate::master::MasterHandle;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tiny_http::{Header, Method, Response, Server};

pub struct Targets {
    pub master: Arc<MasterHandle>,
    pub gateway: Option<Arc<GatewayHandle>>,
}

pub struct ControlHandle {
    server: Arc<Server>,
    addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ControlHandle {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn query<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    url.split_once('?')?
        .1
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// `%XX` escapes and `+` of a query value; `None` when an escape is malformed or not UTF-8.
fn percent_decode(v: &str) -> Option<String> {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Agent `index`'s host reboots: it goes down now with every process on it, boots (its
/// pending kernel, with host stand-ins), and its agent registers under a new id after the
/// outage (`?outage_ms=N`, else the master's configured one). Returns the reply naming the
/// new id, the outage and the kernel booted.
fn reboot_host(t: &Targets, index: usize, url: &str) -> Result<Value, (u16, String)> {
    let outage = match query(url, "outage_ms") {
        None => None,
        Some(ms) => Some(Duration::from_millis(ms.parse().map_err(|_| {
            (
                400,
                format!("outage_ms={ms:?} is not a number of milliseconds"),
            )
        })?)),
    };
    let id = t.master.reboot_agent(index, outage).map_err(|e| (400, e))?;
    // The SDC loses its MDM connection while the host is down, and has it again once the
    // host is back with the `scini` module its boot loads.
    if let (Some(g), Ok(agents)) = (&t.gateway, t.master.agents()) {
        if let Some(a) = agents.get(index) {
            let ip = a.ip.to_string();
            g.set_sdc_connected(&ip, false);
            if let Some(root) = agent_host(t, index) {
                reconnect_sdc_when_back(t.master.clone(), g.clone(), index, id.clone(), ip, root);
            }
        }
    }
    let mut reply = json!({"agent": index + 1, "done": "reboot", "id": id});
    if let Some(o) = outage {
        reply["outage_ms"] = json!(o.as_millis() as u64);
    }
    // The host is on its new kernel before its agent is back, so that the next executor
    // sees it.
    if let Some(root) = agent_host(t, index) {
        reply["kernel"] = json!(root.boot().map_err(|e| (500, e))?);
    }
    Ok(reply)
}

/// The gateway sees the agents' hosts as an MDM would: an SDS process listens where the
/// host is up (a host cut off from the master runs on) and runs its `sds` service; its MDM
/// runs where its `mdm` service does; its devices are the nodes under its fake `dev/`.
/// Agents without host stand-ins (synthetic ones) are not checked; an address no agent has
/// has nothing listening. The gateway looks often, so a host's state file is parsed again
/// only when its content changed.
fn host_directory(master: Weak<MasterHandle>) -> HostDirectory {
    let read = Mutex::new(HashMap::<usize, (StateStamp, ServicesSeen)>::new());
    HostDirectory::new(move |ips| {
        let Some(master) = master.upgrade() else {
            return Vec::new();
        };
        let Ok(agents) = master.agents() else {
            return Vec::new();
        };
        let by_ip: HashMap<String, &crate::master::AgentEndpoint> =
            agents.iter().map(|a| (a.ip.to_string(), a)).collect();
        let mut read = read.lock().unwrap_or_else(|e| e.into_inner());
        ips.iter()
            .map(|ip| {
                let Some(agent) = by_ip.get(*ip) else {
                    return Some(HostFacts::default());
                };
                if agent.synthetic {
                    return None;
                }
                let dir = master.work_dir().join(format!("agent-{}", agent.index + 1));
                let root = FakeRoot::open(&host::agent_root(&dir)).ok()?;
                let seen = services_seen(&root, &mut read, agent.index)?;
                let host_up = agent.up || agent.partitioned;
                Some(HostFacts {
                    sds_process: seen.sds.filter(|_| host_up),
                    device_paths: host::device_paths(&root),
                    mdm_running: seen.mdm.map(|running| running && host_up),
                })
            })
            .collect()
    })
}

/// A host state file's content, hashed: parsed again only when it changed.
type StateStamp = u64;

/// What the gateway watches of a host's services.
#[derive(Clone, Copy, PartialEq, Eq)]
struct ServicesSeen {
    /// The running `sds` process.
    sds: Option<u32>,
    /// `None`: no `mdm` service installed.
    mdm: Option<bool>,
}

/// The host's services, from its state file when it changed since the last look (`read`
/// holds what was read, by agent index; a state file that cannot be read keeps the last
/// answer).
fn services_seen(
    root: &FakeRoot,
    read: &mut HashMap<usize, (StateStamp, ServicesSeen)>,
    index: usize,
) -> Option<ServicesSeen> {
    use std::hash::{Hash, Hasher};
    let cached = read.get(&index).copied();
    let Ok(bytes) = std::fs::read(root.state_path()) else {
        return cached.map(|(_, seen)| seen);
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    let stamp = hasher.finish();
    if let Some((_, seen)) = cached.filter(|(was, _)| *was == stamp) {
        return Some(seen);
    }
    let Ok(state) = serde_json::from_slice::<host::HostState>(&bytes) else {
        return cached.map(|(_, seen)| seen);
    };
    let process = |name: &str| {
        state
            .services
            .get(name)
            .filter(|s| s.running)
            .map(|s| s.pid.unwrap_or(0))
    };
    let seen = ServicesSeen {
        sds: process("sds"),
        mdm: state.services.get("mdm").map(|s| s.running),
    };
    read.insert(index, (stamp, seen));
    Some(seen)
}

/// Agent `n` (1-based in URLs) as an index.
fn agent_index(n: &str) -> Result<usize, (u16, String)> {
    Ok(n.parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or((400, format!("agent number {n:?} is not 1, 2, ...")))?
        - 1)
}

/// Agent `index`'s service `?name=` stopped or started (`?running=false|true`), as a person
/// at the host would; `scini` is the SDC's kernel module.
fn set_service(t: &Targets, index: usize, url: &str) -> Result<Value, (u16, String)> {
    let names = host::CONTROLLED_SERVICES.join("|");
    let usage = || {
        (
            400,
            format!("service needs ?name=<{names}>&running=<true|false>"),
        )
    };
    let name = query(url, "name").ok_or_else(usage)?;
    if !host::CONTROLLED_SERVICES.contains(&name) {
        return Err((400, format!("service name {name:?} is not one of {names}")));
    }
    let running = match query(url, "running").ok_or_else(usage)? {
        "true" => true,
        "false" => false,
        other => return Err((400, format!("running={other:?} is not true or false"))),
    };
    let agent = index + 1;
    let root = agent_host(t, index).ok_or((404, format!("agent {agent} has no host stand-ins")))?;
    let installed = root
        .update(|s| s.set_running(name, running))
        .map_err(|e| (500, e))?;
    if !installed {
        return Err((
            409,
            format!("agent {agent}: service {name} is not installed"),
        ));
    }
    Ok(json!({"agent": agent, "service": name, "running": running}))
}

/// A disk `?path=/dev/<name>` plugged into (`present=true`, a free disk of `gib` GiB, 100 by
/// default) or pulled from (`present=false`) agent `index`'s running host. A pulled disk that
/// the agent's SDS serves is in error at the gateway from then on, as the SDS loses it; that
/// error stays until `/control/gateway/device?...&failed=false` or `/control/gateway/clear`.
fn set_disk(t: &Targets, index: usize, url: &str) -> Result<Value, (u16, String)> {
    let usage = || {
        (
            400,
            "disk needs ?path=/dev/<name>&present=<true|false>[&gib=N]".to_string(),
        )
    };
    let path = query(url, "path")
        .and_then(percent_decode)
        .ok_or_else(usage)?;
    let name = host::disk_name(&path).map_err(|e| (400, e))?;
    let present = match query(url, "present").ok_or_else(usage)? {
        "true" => true,
        "false" => false,
        other => return Err((400, format!("present={other:?} is not true or false"))),
    };
    let gib = match query(url, "gib") {
        None => 100,
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|g| (1..=1 << 20).contains(g))
            .ok_or((400, format!("gib={v:?} is not a size from 1 to 1048576")))?,
    };
    let agent = index + 1;
    let root = agent_host(t, index).ok_or((404, format!("agent {agent} has no host stand-ins")))?;
    let changed = if present {
        root.plug_disk(name, gib)
    } else {
        root.unplug_disk(name)
    }
    .map_err(|e| (409, format!("agent {agent}: {e}")))?;
    let mut reply = json!({"agent": agent, "path": path, "present": present, "changed": changed});
    if !present && changed {
        // The gateway refuses a fault on a device its SDS does not serve: then there is
        // nothing the SDS lost.
        let failed = match (&t.gateway, t.master.agents()) {
            (Some(g), Ok(agents)) => agents.get(index).is_some_and(|a| {
                g.inject(HealthFault::DeviceFailed {
                    ip: a.ip.to_string(),
                    path: path.clone(),
                    failed: true,
                })
                .is_ok()
            }),
            _ => false,
        };
        reply["gateway_device_failed"] = json!(failed);
    }
    Ok(reply)
}

/// The fake root of agent `index`, when the cluster runs host stand-ins.
/// Once agent `index` is up under its new id `id`, the SDC on `ip` is connected again if its
/// host loaded `scini` at boot. Watched off the control thread; gives up with the master.
fn reconnect_sdc_when_back(
    master: Arc<MasterHandle>,
    gateway: Arc<GatewayHandle>,
    index: usize,
    id: String,
    ip: String,
    root: FakeRoot,
) {
    let weak = Arc::downgrade(&master);
    drop(master);
    let watch = move || loop {
        let Some(master) = weak.upgrade() else {
            return;
        };
        let Ok(agents) = master.agents() else {
            return;
        };
        drop(master);
        if agents.get(index).is_some_and(|a| a.up && a.id == id) {
            if root
                .state()
                .is_ok_and(|s| s.service_running(host::SDC_MODULE))
            {
                gateway.set_sdc_connected(&ip, true);
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    if let Err(e) = std::thread::Builder::new()
        .name("sdc-reconnect".into())
        .spawn(watch)
    {
        log::warn!("control: agent {}: SDC reconnect watch: {e}", index + 1);
    }
}

fn agent_host(t: &Targets, index: usize) -> Option<FakeRoot> {
    let dir = t.master.work_dir().join(format!("agent-{}", index + 1));
    FakeRoot::open(&host::agent_root(&dir)).ok()
}

/// Experimental mode: the MDM cluster now exists under `name`, so the gateway reports it
/// (with `mdm`, the trio that cluster has, when given).
fn create_system(
    g: &GatewayHandle,
    name: &str,
    mdm: Option<crate::gateway::MdmIps>,
) -> Result<Value, (u16, String)> {
    let existing = g.snapshot();
    if let Some(system) = existing.get("system").filter(|s| !s.is_null()) {
        let id = system.get("id").cloned().unwrap_or(Value::Null);
        let have = system.get("name").and_then(Value::as_str).unwrap_or("");
        if have == name {
            return Ok(json!({"id": id, "name": name, "created": false}));
        }
        return Err((
            409,
            format!("the gateway already has system {have:?}; it cannot be renamed to {name:?}"),
        ));
    }
    let id = g.create_system_with(name, mdm).map_err(|e| (400, e))?;
    Ok(json!({"id": id, "name": name, "created": true}))
}

fn act(t: &Targets, method: &Method, url: &str) -> Result<Value, (u16, String)> {
    let path = url.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let bad = |e: String| (500, e);
    let gateway = || {
        t.gateway
            .as_ref()
            .ok_or((404, "no gateway in this cluster".to_string()))
    };
    match (method, parts.as_slice()) {
        (Method::Get, ["control", "state"]) => Ok(json!({
            "master": t.master.snapshot().map_err(bad)?,
            "gateway": t.gateway.as_ref().map(|g| g.snapshot()),
        })),
        (Method::Get, ["control", "master", "launches"]) => {
            let log = t.master.launch_log().map_err(bad)?;
            serde_json::to_value(log).map_err(|e| bad(e.to_string()))
        }
        (Method::Post, ["control", "master", "cut-stream"]) => {
            let n = t
                .master
                .cut_scheduler_stream(query(url, "framework"))
                .map_err(bad)?;
            Ok(json!({"streams_cut": n}))
        }
        (Method::Post, ["control", "master", "freeze-stream"]) => {
            let n = t.master.freeze_scheduler_streams().map_err(bad)?;
            Ok(json!({"streams_frozen": n}))
        }
        (Method::Post, ["control", "master", "failover"]) => {
            let leader = match query(url, "reregister_ms") {
                None => t.master.fail_over().map_err(bad)?,
                Some(ms) => {
                    let ms: u64 = ms
                        .parse()
                        .map_err(|_| (400, format!("reregister_ms={ms:?} is not a number")))?;
                    t.master
                        .fail_over_with_reregistration(Duration::from_millis(ms))
                        .map_err(bad)?
                }
            };
            Ok(json!({"leader": leader.to_string()}))
        }
        (Method::Post, ["control", "master", "drop-next-call"]) => {
            let kind = query(url, "type")
                .ok_or((400, "drop-next-call needs ?type=<call type>".to_string()))?;
            t.master.drop_next_call(kind).map_err(|e| (400, e))?;
            Ok(json!({"dropping_next": kind}))
        }
        (Method::Get, ["control", "hosts", ip]) => {
            let agents = t.master.agents().map_err(bad)?;
            let index = agents
                .iter()
                .position(|a| a.ip.to_string() == *ip)
                .ok_or((404, format!("no agent has address {ip}")))?;
            let root = agent_host(t, index)
                .ok_or((404, format!("agent {} has no host stand-ins", index + 1)))?;
            serde_json::to_value(root.state().map_err(bad)?).map_err(|e| bad(e.to_string()))
        }
        (Method::Get, ["control", "agents", n, "host"]) => {
            let index = agent_index(n)?;
            let root = agent_host(t, index)
                .ok_or((404, format!("agent {} has no host stand-ins", index + 1)))?;
            let state = root.state().map_err(bad)?;
            let mut v = serde_json::to_value(&state).map_err(|e| bad(e.to_string()))?;
            v["root"] = json!(root.path().display().to_string());
            Ok(v)
        }
        (Method::Post, ["control", "agents", n, "reboot" | "new-id"]) => {
            reboot_host(t, agent_index(n)?, url)
        }
        (Method::Post, ["control", "agents", n, "service"]) => set_service(t, agent_index(n)?, url),
        (Method::Post, ["control", "agents", n, "disk"]) => set_disk(t, agent_index(n)?, url),
        (Method::Post, ["control", "agents", n, action]) => {
            let index = agent_index(n)?;
            let reply = json!({"agent": index + 1, "done": action});
            match *action {
                "stop" => t.master.stop_agent(index),
                "start" => t.master.start_agent(index),
                "restart" => t.master.restart_agent(index),
                "partition" => t.master.partition_agent(index),
                "heal" => match query(url, "tasks") {
                    None | Some("kept") => t.master.heal_agent(index, true),
                    Some("lost") => t.master.heal_agent(index, false),
                    Some(v) => {
                        return Err((
                            400,
                            format!("heal takes tasks=kept or tasks=lost, not {v:?}"),
                        ))
                    }
                },
                "rescind-before-accept" => t.master.rescind_before_next_accept(index),
                "kill-executor" => {
                    let id = query(url, "id")
                        .ok_or((400, "kill-executor needs ?id=<executor id>".to_string()))?;
                    t.master.kill_executor(index, id)
                }
                other => return Err((404, format!("unknown agent action {other:?}"))),
            }
            .map_err(|e| (400, e))?;
            Ok(reply)
        }
        (Method::Post, ["control", "gateway", "fail"]) => {
            let g = gateway()?;
            match query(url, "count") {
                Some(c) => g.fail_next(
                    c.parse()
                        .map_err(|_| (400, format!("count {c:?} is not a number")))?,
                ),
                None => g.fail_until_cleared(),
            }
            Ok(json!({"gateway": "failing"}))
        }
        (Method::Post, ["control", "gateway", "clear"]) => {
            let g = gateway()?;
            g.clear_faults();
            g.set_delay(Duration::ZERO);
            Ok(json!({"gateway": "healthy"}))
        }
        (Method::Post, ["control", "gateway", "delay"]) => {
            let ms = query(url, "ms")
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or((400, "delay needs ?ms=<milliseconds>".to_string()))?;
            gateway()?.set_delay(Duration::from_millis(ms));
            Ok(json!({"gateway_delay_ms": ms}))
        }
        (Method::Post, ["control", "gateway", "expire-tokens"]) => {
            gateway()?.expire_tokens();
            Ok(json!({"gateway": "tokens expired"}))
        }
        (Method::Post, ["control", "gateway", "sdc"]) => {
            let index = agent_index(
                query(url, "agent").ok_or((400, "sdc needs ?agent=N&mdm=<ips>".to_string()))?,
            )?;
            let mdm = query(url, "mdm")
                .and_then(percent_decode)
                .ok_or((400, "sdc needs ?agent=N&mdm=<ips>".to_string()))?;
            let agents = t.master.agents().map_err(bad)?;
            let agent = agents
                .get(index)
                .ok_or((404, format!("no agent {}", index + 1)))?;
            let ip = agent.ip.to_string();
            let id = gateway()?.sdc_installed(&ip, &mdm).map_err(|e| (409, e))?;
            Ok(json!({"sdc": id, "ip": ip}))
        }
        (
            Method::Post,
            ["control", "gateway", what @ ("sds" | "sdc-connection" | "device" | "mdm" | "rebuild" | "fill")],
        ) => {
            let fault = health_fault(t, what, url)?;
            fault.check().map_err(|e| (400, e))?;
            let reply = json!({"gateway": what, "fault": format!("{fault:?}")});
            gateway()?.inject(fault).map_err(|e| (404, e))?;
            Ok(reply)
        }
        (Method::Get, ["control", "gateway", "events"]) => gateway()?.events().map_err(bad),
        (Method::Post, ["control", "gateway", "events", "reset"]) => {
            gateway()?.reset_events();
            Ok(json!({"gateway": "events reset"}))
        }
        (Method::Post, ["control", "gateway", "rebuild-time"]) => {
            let v =
                query(url, "seconds").ok_or((400, "rebuild-time needs ?seconds=S".to_string()))?;
            let lasts = rebuild_seconds(v).map_err(|e| (400, format!("rebuild-time: {e}")))?;
            gateway()?.set_rebuild_time(lasts).map_err(|e| (400, e))?;
            Ok(json!({"gateway_rebuild_seconds": lasts.as_secs_f64()}))
        }
        (Method::Post, ["control", "gateway", "create-system"]) => {
            let raw = query(url, "name")
                .ok_or((400, "create-system needs ?name=<system name>".to_string()))?;
            let name = percent_decode(raw).ok_or((
                400,
                format!("name {raw:?} is not a valid URL-encoded value"),
            ))?;
            let trio: Vec<Option<String>> = ["primary", "secondary", "tiebreaker"]
                .iter()
                .map(|k| query(url, k).and_then(percent_decode))
                .collect();
            let mdm = match trio.as_slice() {
                [Some(p), Some(s), Some(t)] => Some(crate::gateway::MdmIps {
                    primary: p.clone(),
                    secondary: s.clone(),
                    tiebreaker: t.clone(),
                }),
                [None, None, None] => None,
                _ => {
                    return Err((
                        400,
                        "create-system takes all of primary, secondary and tiebreaker, or none"
                            .to_string(),
                    ))
                }
            };
            create_system(gateway()?, &name, mdm)
        }
        (Method::Post, ["control", "hosts", "preinstall"]) => preinstall_hosts(t, url),
        (Method::Get | Method::Post, _) => Err((404, format!("no control endpoint {path}"))),
        _ => Err((405, format!("{method} not allowed on {path}"))),
    }
}

/// `/control/hosts/preinstall`: every agent host gets the packages, and its SDC registers
/// with the gateway (when there is one) as an SDC installed with that `MDM_IP` does.
fn preinstall_hosts(t: &Targets, url: &str) -> Result<Value, (u16, String)> {
    let param = |key: &str| query(url, key).and_then(percent_decode);
    let what = host::Preinstalled {
        version: param("version").ok_or((400, "preinstall needs ?version=V&mdm=<ips>".into()))?,
        mdm_ips: param("mdm").ok_or((400, "preinstall needs ?version=V&mdm=<ips>".into()))?,
        rexray: param("rexray"),
    };
    let agents = t.master.agents().map_err(|e| (500, e))?;
    let mut done = Vec::new();
    for a in &agents {
        let Some(root) = agent_host(t, a.index) else {
            continue;
        };
        host::preinstall(&root, &what).map_err(|e| (400, e))?;
        if let Some(g) = &t.gateway {
            g.sdc_installed(&a.ip.to_string(), &what.mdm_ips)
                .map_err(|e| (409, e))?;
        }
        done.push(a.index + 1);
    }
    Ok(json!({"preinstalled": done, "version": what.version}))
}

/// A rebuild time in seconds (`1`, `0.5`): not negative, at most a day.
pub fn rebuild_seconds(v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=86_400.0).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{v:?} is not a number of seconds from 0 to 86400"))
}

/// The health fault a `/control/gateway/<what>` request asks for.
fn health_fault(t: &Targets, what: &str, url: &str) -> Result<HealthFault, (u16, String)> {
    let param = |key: &str| {
        query(url, key)
            .and_then(percent_decode)
            .ok_or((400, format!("{what} needs ?{key}=")))
    };
    let flag = |key: &str| -> Result<bool, (u16, String)> {
        match param(key)?.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err((400, format!("{key} is true or false, not {other:?}"))),
        }
    };
    let number = |key: &str| -> Result<u64, (u16, String)> {
        let v = param(key)?;
        v.parse()
            .map_err(|_| (400, format!("{key}={v:?} is not a whole number")))
    };
    let ip = || -> Result<String, (u16, String)> {
        let index = agent_index(&param("agent")?)?;
        let agents = t.master.agents().map_err(|e| (500, e))?;
        let agent = agents
            .get(index)
            .ok_or((404, format!("no agent {}", index + 1)))?;
        Ok(agent.ip.to_string())
    };
    Ok(match what {
        "sds" => HealthFault::SdsConnected {
            ip: ip()?,
            connected: flag("connected")?,
        },
        "sdc-connection" => HealthFault::SdcConnected {
            ip: ip()?,
            connected: flag("connected")?,
        },
        "device" => HealthFault::DeviceFailed {
            ip: ip()?,
            path: param("path")?,
            failed: flag("failed")?,
        },
        "mdm" => HealthFault::MdmDegraded(flag("degraded")?),
        "rebuild" => HealthFault::Rebuild(Duration::from_secs(number("seconds")?)),
        _ => HealthFault::Fill(number("pct")?),
    })
}

/// A bound control API that does not serve yet: its URL can be handed out (to the agents'
/// executors) before the master it controls exists.
pub struct ControlListener {
    server: Server,
    addr: SocketAddr,
}

impl ControlListener {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts serving requests against `targets`.
    pub fn serve(self, targets: Targets) -> Result<ControlHandle, String> {
        if let Some(g) = &targets.gateway {
            g.watch_hosts(host_directory(Arc::downgrade(&targets.master)));
        }
        let server = Arc::new(self.server);
        let s = server.clone();
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                let json_type =
                    Header::from_bytes("Content-Type", "application/json").expect("static header");
                while let Ok(req) = s.recv() {
                    let (status, body) = match act(&targets, req.method(), req.url()) {
                        Ok(v) => (200, v),
                        Err((status, e)) => (status, json!({"error": e})),
                    };
                    let resp = Response::from_data(body.to_string().into_bytes())
                        .with_status_code(status)
                        .with_header(json_type.clone());
                    let _ = req.respond(resp);
                }
            })
            .map_err(|e| format!("control API: {e}"))?;
        Ok(ControlHandle {
            server,
            addr: self.addr,
            thread: Some(thread),
        })
    }
}

/// Binds 127.0.0.1:`port` (0: ephemeral) without serving yet.
pub fn bind(port: u16) -> Result<ControlListener, String> {
    let server = Server::http(("127.0.0.1", port))
        .map_err(|e| format!("control API: cannot listen: {e}"))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or("control API: no IP address")?;
    Ok(ControlListener { server, addr })
}

pub fn start(port: u16, targets: Targets) -> Result<ControlHandle, String> {
    bind(port)?.serve(targets)
}
