//! The gateway worker thread (design section 1): the only thread that talks to the storage
//! gateway once the scheduler runs. The dispatcher sends it [`Job`]s over a channel and never
//! waits for it; it answers with [`Report`]s as dispatcher inputs.
//!
//! It owns its own retry schedule: a node whose work failed, or whose SDC is not connected
//! yet, is tried again with jittered backoff without the dispatcher asking again. Pool
//! capacity is read every `capacity_interval` and soon after each attachment.

use super::plan::{self, NodeWant, SdsFacts, Step};
use crate::backoff::Backoff;
use crate::gateway::client::{code, GatewayClient, GatewayError};
use crate::scheduler::exchange::Input;
use crate::scheduler::model::PoolCapacity;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Work for the gateway worker.
#[derive(Debug, Clone)]
pub enum Job {
    /// Make the cluster hold this node's SDS and devices, then check its SDC.
    Attach(NodeWant),
    /// Read pool capacity now.
    Capacity,
    /// The gateway's `host:port`, for a worker started without one (experimental mode).
    Gateway(String),
}

/// The outcome of a node's work.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    pub agent_id: String,
    pub sds_id: Option<String>,
    /// Wanted devices present on the node's SDS.
    pub attached: Vec<String>,
    pub sdc_connected: bool,
    /// Why the node is not ready yet (the gateway's reason), `None` when it is.
    pub error: Option<String>,
}

/// What the worker tells the dispatcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Node(NodeReport),
    Capacity(Vec<PoolCapacity>),
}

#[derive(Debug, Clone)]
pub struct WorkerSettings {
    pub capacity_interval: Duration,
    pub threshold_pct: f64,
    /// First retry of a node that is not ready; doubles up to `retry_cap`.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// After an attachment, capacity is read once this quiet period passes (so that a wave
    /// of attachments costs one read, not one per node).
    pub capacity_settle: Duration,
    /// Pools read from the start (pre-configured mode: the flags' pool, which the start-up
    /// checks found), before any attachment has resolved them.
    pub known_pools: Vec<(String, String)>,
}

impl WorkerSettings {
    pub fn new(capacity_interval: Duration, threshold_pct: f64) -> WorkerSettings {
        WorkerSettings {
            capacity_interval,
            threshold_pct,
            retry_base: Duration::from_secs(1),
            retry_cap: Duration::from_secs(60),
            capacity_settle: Duration::from_millis(500),
            known_pools: Vec::new(),
        }
    }
}

struct Pending {
    want: NodeWant,
    due: Instant,
    backoff: Backoff,
    /// Attachment done; only the SDC is awaited.
    attached: Option<(String, Vec<String>)>,
}

pub struct Worker {
    client: GatewayClient,
    settings: WorkerSettings,
    /// Domain name -> id and (domain, pool) -> id, found or created.
    pd_ids: BTreeMap<String, String>,
    pool_ids: BTreeMap<(String, String), String>,
    pending: BTreeMap<String, Pending>,
    /// Ready nodes whose SDC is checked again with every capacity read (a host reboot
    /// disconnects it); one that lost its MDM connection goes back to `pending`.
    watched: BTreeMap<String, Pending>,
    capacity_due: Instant,
}

impl Worker {
    pub fn new(client: GatewayClient, settings: WorkerSettings) -> Worker {
        Worker {
            client,
            settings,
            pd_ids: BTreeMap::new(),
            pool_ids: BTreeMap::new(),
            pending: BTreeMap::new(),
            watched: BTreeMap::new(),
            capacity_due: Instant::now(),
        }
    }

    /// Runs until the job channel closes or the dispatcher is gone.
    pub fn run(mut self, jobs: Receiver<Job>, to: Sender<Input>) {
        loop {
            let now = Instant::now();
            let next = self
                .pending
                .values()
                .map(|p| p.due)
                .chain(std::iter::once(self.capacity_due))
                .min()
                .unwrap_or(now);
            match jobs.recv_timeout(next.saturating_duration_since(now)) {
                Ok(job) => self.take(job),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            while let Ok(job) = jobs.try_recv() {
                self.take(job);
            }
            for report in self.work_due() {
                if to.send(Input::Storage(report)).is_err() {
                    return;
                }
            }
        }
    }

    fn take(&mut self, job: Job) {
        match job {
            Job::Attach(want) => {
                self.watched.remove(&want.agent_id);
                let backoff = Backoff::new(self.settings.retry_base, self.settings.retry_cap);
                self.pending.insert(
                    want.agent_id.clone(),
                    Pending {
                        want,
                        due: Instant::now(),
                        backoff,
                        attached: None,
                    },
                );
            }
            Job::Capacity => self.capacity_due = Instant::now(),
            Job::Gateway(address) => {
                log::info!("storage gateway at {address}");
                self.client.set_address(&address);
            }
        }
    }

    /// Does whatever is due; the reports to send.
    pub fn work_due(&mut self) -> Vec<Report> {
        let now = Instant::now();
        if self.client.address().is_empty() {
            // No gateway yet (experimental mode before the cluster is built): the work
            // waits; the next job wakes the worker.
            for p in self.pending.values_mut() {
                p.due = now + self.settings.retry_base;
            }
            self.capacity_due = now + self.settings.capacity_interval;
            return Vec::new();
        }
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(a, _)| a.clone())
            .collect();
        let mut reports = Vec::new();
        let mut attached_any = false;
        let mut awaiting_sdc = Vec::new();
        for agent in &due {
            let Some(p) = self.pending.get(agent) else {
                continue;
            };
            if p.attached.is_some() {
                awaiting_sdc.push(agent.clone());
                continue;
            }
            let want = p.want.clone();
            match self.attach(&want) {
                Ok((sds_id, attached, added)) => {
                    attached_any |= added;
                    if let Some(p) = self.pending.get_mut(agent) {
                        p.attached = Some((sds_id, attached));
                    }
                    awaiting_sdc.push(agent.clone());
                }
                Err(e) => {
                    log::warn!("{}: storage attach: {e}", want.hostname);
                    reports.push(Report::Node(NodeReport {
                        agent_id: want.agent_id.clone(),
                        sds_id: None,
                        attached: Vec::new(),
                        sdc_connected: false,
                        error: Some(e),
                    }));
                    self.retry_later(agent);
                }
            }
        }
        if !awaiting_sdc.is_empty() {
            reports.extend(self.check_sdcs(&awaiting_sdc));
        }
        if attached_any {
            let soon = Instant::now() + self.settings.capacity_settle;
            self.capacity_due = self.capacity_due.min(soon);
        }
        if self.capacity_due <= Instant::now() {
            self.capacity_due = Instant::now() + self.settings.capacity_interval;
            reports.extend(self.recheck_watched());
            match self.capacity() {
                Ok(pools) => reports.push(Report::Capacity(pools)),
                Err(e) => log::warn!("storage pool capacity: {e}"),
            }
        }
        reports
    }

    fn retry_later(&mut self, agent: &str) {
        if let Some(p) = self.pending.get_mut(agent) {
            p.due = Instant::now() + p.backoff.next_delay();
        }
    }

    /// One `GET /api/types/Sdc/instances` for every node awaiting its SDC.
    fn check_sdcs(&mut self, agents: &[String]) -> Vec<Report> {
        let connected: Result<BTreeSet<String>, GatewayError> =
            self.client.list("/api/types/Sdc/instances").map(|sdcs| {
                sdcs.iter()
                    .filter(|s| s["mdmConnectionState"].as_str() == Some("Connected"))
                    .filter_map(|s| s["sdcIp"].as_str().map(str::to_string))
                    .collect()
            });
        let mut reports = Vec::new();
        for agent in agents {
            let Some(p) = self.pending.get(agent) else {
                continue;
            };
            let (sds_id, attached) = p.attached.clone().unwrap_or_default();
            let (sdc_connected, error) = match &connected {
                Ok(set) if set.contains(&p.want.ip) => (true, None),
                Ok(_) => (
                    false,
                    Some(format!(
                        "waiting for the SDC at {} to connect to the MDMs",
                        p.want.ip
                    )),
                ),
                Err(e) => (false, Some(e.to_string())),
            };
            reports.push(Report::Node(NodeReport {
                agent_id: agent.clone(),
                sds_id: Some(sds_id),
                attached,
                sdc_connected,
                error,
            }));
            if sdc_connected {
                if let Some(mut p) = self.pending.remove(agent) {
                    p.backoff.reset();
                    self.watched.insert(agent.clone(), p);
                }
            } else {
                self.retry_later(agent);
            }
        }
        reports
    }

    /// Ready nodes whose SDC has lost its MDM connection: reported, and retried until it
    /// is back. One Sdc list for all of them.
    fn recheck_watched(&mut self) -> Vec<Report> {
        if self.watched.is_empty() {
            return Vec::new();
        }
        let Ok(sdcs) = self.client.list("/api/types/Sdc/instances") else {
            return Vec::new();
        };
        let lost: Vec<String> = self
            .watched
            .iter()
            .filter(|(_, p)| {
                !sdcs.iter().any(|s| {
                    s["sdcIp"].as_str() == Some(p.want.ip.as_str())
                        && s["mdmConnectionState"].as_str() == Some("Connected")
                })
            })
            .map(|(a, _)| a.clone())
            .collect();
        let mut reports = Vec::new();
        for agent in lost {
            let Some(mut p) = self.watched.remove(&agent) else {
                continue;
            };
            log::warn!(
                "{}: the SDC at {} lost its MDM connection",
                p.want.hostname,
                p.want.ip
            );
            let (sds_id, attached) = p.attached.clone().unwrap_or_default();
            reports.push(Report::Node(NodeReport {
                agent_id: agent.clone(),
                sds_id: Some(sds_id),
                attached,
                sdc_connected: false,
                error: Some(format!(
                    "the SDC at {} is not connected to the MDMs",
                    p.want.ip
                )),
            }));
            p.due = Instant::now() + p.backoff.next_delay();
            self.pending.insert(agent, p);
        }
        reports
    }

    fn pd_id(&mut self, pd: &str) -> Result<String, GatewayError> {
        if let Some(id) = self.pd_ids.get(pd) {
            return Ok(id.clone());
        }
        let id = match self
            .client
            .query_id("ProtectionDomain", &json!({ "name": pd }))?
        {
            Some(id) => id,
            None => {
                log::info!("creating protection domain {pd:?}");
                match self
                    .client
                    .create("ProtectionDomain", &json!({ "name": pd }))
                {
                    Ok(id) => id,
                    // Created meanwhile by someone else: a domain is shared, take it.
                    Err(e) if e.error_code() == Some(code::PD_NAME_IN_USE) => self
                        .client
                        .query_id("ProtectionDomain", &json!({ "name": pd }))?
                        .ok_or(e)?,
                    Err(e) => return Err(e),
                }
            }
        };
        self.pd_ids.insert(pd.to_string(), id.clone());
        Ok(id)
    }

    fn pool_id(&mut self, pd: &str, pool: &str) -> Result<String, GatewayError> {
        let key = (pd.to_string(), pool.to_string());
        if let Some(id) = self.pool_ids.get(&key) {
            return Ok(id.clone());
        }
        let pd_id = self.pd_id(pd)?;
        let query = json!({ "name": pool, "protectionDomainName": pd });
        let id = match self.client.query_id("StoragePool", &query)? {
            Some(id) => id,
            None => {
                log::info!("creating storage pool {pool:?} in protection domain {pd:?}");
                match self.client.create(
                    "StoragePool",
                    &json!({ "name": pool, "protectionDomainId": pd_id }),
                ) {
                    Ok(id) => id,
                    Err(e) if e.error_code() == Some(code::POOL_NAME_IN_USE) => {
                        self.client.query_id("StoragePool", &query)?.ok_or(e)?
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.pool_ids.insert(key, id.clone());
        Ok(id)
    }

    /// The node's SDS as the gateway holds it, found by name.
    fn sds_facts(&mut self, name: &str) -> Result<Option<SdsFacts>, GatewayError> {
        let Some(id) = self.client.query_id("Sds", &json!({ "name": name }))? else {
            return Ok(None);
        };
        let sds = self.client.get(&format!("/api/instances/Sds::{id}"))?;
        let devices = self
            .client
            .list(&format!("/api/instances/Sds::{id}/relationships/Device"))?;
        Ok(SdsFacts::from_json(&sds, &devices))
    }

    /// Makes the gateway hold the node's SDS and devices: (SDS id, attached, added any).
    fn attach(&mut self, want: &NodeWant) -> Result<(String, Vec<String>, bool), String> {
        let fail = |e: GatewayError| e.to_string();
        let pd_id = self.pd_id(&want.protection_domain).map_err(fail)?;
        for d in &want.devices {
            self.pool_id(&d.protection_domain, &d.pool).map_err(fail)?;
        }
        let facts = self.sds_facts(&want.sds_name).map_err(fail)?;
        let pools = self.pool_ids.clone();
        let lookup = |pd: &str, pool: &str| pools.get(&(pd.to_string(), pool.to_string())).cloned();
        let steps = plan::plan_node(want, facts.as_ref(), &lookup)?;
        let mut sds_id = facts.as_ref().map(|f| f.id.clone());
        let mut present: Vec<String> = facts.map(|f| f.devices).unwrap_or_default();
        let added = !steps.is_empty();
        let mut errors = Vec::new();
        for step in steps {
            match step {
                Step::CreateSds { devices } => {
                    let (id, with_devices) = self.create_sds(want, &pd_id, &devices)?;
                    present = if with_devices {
                        devices.iter().map(|(path, _)| path.clone()).collect()
                    } else {
                        // Devices that did not go in with the SDS are added one by one below.
                        let on_sds = self
                            .client
                            .list(&format!("/api/instances/Sds::{id}/relationships/Device"))
                            .map_err(fail)?;
                        SdsFacts::from_json(&json!({"id": id}), &on_sds)
                            .map(|f| f.devices)
                            .unwrap_or_default()
                    };
                    for (path, pool) in devices {
                        if !present.contains(&path) {
                            match self.add_device(&id, &path, &pool) {
                                Ok(()) => present.push(path),
                                Err(e) => errors.push(format!("{path}: {e}")),
                            }
                        }
                    }
                    sds_id = Some(id);
                }
                Step::AddDevice { path, pool } => {
                    let Some(id) = sds_id.clone() else { continue };
                    match self.add_device(&id, &path, &pool) {
                        Ok(()) => present.push(path),
                        Err(e) => errors.push(format!("{path}: {e}")),
                    }
                }
            }
        }
        let sds_id = sds_id.ok_or_else(|| "no SDS".to_string())?;
        let attached: Vec<String> = want
            .devices
            .iter()
            .filter(|d| present.contains(&d.path))
            .map(|d| d.path.clone())
            .collect();
        if !errors.is_empty() {
            return Err(format!(
                "SDS {} ({sds_id}): {} of {} devices attached; {}",
                want.sds_name,
                attached.len(),
                want.devices.len(),
                errors.join("; ")
            ));
        }
        log::info!(
            "{}: SDS {} ({sds_id}) holds {} device(s)",
            want.hostname,
            want.sds_name,
            attached.len()
        );
        Ok((sds_id, attached, added))
    }

    /// Creates the SDS, with its devices in the same call. When the create fails because of
    /// a device, the SDS is created alone (devices are added one by one after). When the
    /// name or address is taken, the SDS at our address is ours (a restart after a create
    /// whose answer was lost).
    fn create_sds(
        &mut self,
        want: &NodeWant,
        pd_id: &str,
        devices: &[(String, String)],
    ) -> Result<(String, bool), String> {
        let body = |with_devices: bool| {
            let mut b = json!({
                "name": want.sds_name,
                "protectionDomainId": pd_id,
                "sdsIpList": [{"SdsIp": {"ip": want.ip, "role": "all"}}],
            });
            if with_devices && !devices.is_empty() {
                b["deviceInfoList"] = devices
                    .iter()
                    .map(|(path, pool)| json!({"devicePath": path, "storagePoolId": pool}))
                    .collect();
            }
            b
        };
        log::info!(
            "{}: creating SDS {} at {} with {} device(s)",
            want.hostname,
            want.sds_name,
            want.ip,
            devices.len()
        );
        let first = self.client.create("Sds", &body(true));
        let e = match first {
            Ok(id) => return Ok((id, true)),
            Err(e) => e,
        };
        match e.error_code() {
            Some(code::SDS_NAME_IN_USE) | Some(code::SDS_ADDRESS_IN_USE) => {
                let id = self.sds_at(&want.ip).map_err(|e| e.to_string())?;
                id.map(|id| (id, false))
                    .ok_or_else(|| format!("{e}; and no SDS at {} was found to be ours", want.ip))
            }
            Some(c) if c != code::NONE && !devices.is_empty() => {
                log::warn!(
                    "{}: SDS with devices refused ({e}); creating it without them",
                    want.hostname
                );
                self.client
                    .create("Sds", &body(false))
                    .map(|id| (id, false))
                    .map_err(|e| e.to_string())
            }
            _ => Err(e.to_string()),
        }
    }

    /// The id of an SDS listening at `ip`, if any.
    fn sds_at(&mut self, ip: &str) -> Result<Option<String>, GatewayError> {
        let all = self.client.list("/api/types/Sds/instances")?;
        Ok(all
            .iter()
            .filter_map(|s| SdsFacts::from_json(s, &[]))
            .find(|f| f.ips.iter().any(|i| i == ip))
            .map(|f| f.id))
    }

    fn add_device(&mut self, sds_id: &str, path: &str, pool_id: &str) -> Result<(), GatewayError> {
        let body = json!({
            "deviceCurrentPathname": path,
            "sdsId": sds_id,
            "storagePoolId": pool_id,
        });
        match self.client.create("Device", &body) {
            Ok(_) => Ok(()),
            // Already on this SDS (an earlier call whose answer was lost): what we wanted.
            Err(e) if e.error_code() == Some(code::DEVICE_ALREADY_EXISTS) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Capacity of every pool the framework uses (found so far).
    fn capacity(&mut self) -> Result<Vec<PoolCapacity>, GatewayError> {
        for (pd, pool) in self.settings.known_pools.clone() {
            self.pool_id(&pd, &pool)?;
        }
        let pools: Vec<((String, String), String)> = self
            .pool_ids
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if pools.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = pools.iter().map(|(_, id)| id.as_str()).collect();
        let stats = self.client.post(
            "/api/types/StoragePool/instances/action/querySelectedStatistics",
            &json!({
                "ids": ids,
                "properties": ["maxCapacityInKb", "capacityInUseInKb",
                    "capacityAvailableForVolumeAllocationInKb", "spareCapacityInKb"],
            }),
        )?;
        let read_ms = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        Ok(pools
            .into_iter()
            .map(|((pd, pool), id)| {
                capacity_of(
                    &stats[id.as_str()],
                    pd,
                    pool,
                    id,
                    self.settings.threshold_pct,
                    read_ms,
                )
            })
            .collect())
    }
}

/// One pool's statistics in bytes, and whether its use is above the threshold (pure).
pub fn capacity_of(
    stats: &Value,
    protection_domain: String,
    pool: String,
    id: String,
    threshold_pct: f64,
    read_ms: u64,
) -> PoolCapacity {
    let kb = |k: &str| stats.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (max, used, available, spare) = (
        kb("maxCapacityInKb"),
        kb("capacityInUseInKb"),
        kb("capacityAvailableForVolumeAllocationInKb"),
        kb("spareCapacityInKb"),
    );
    let usable = max.saturating_sub(spare);
    let used_pct = if usable == 0 {
        0.0
    } else {
        used as f64 * 100.0 / usable as f64
    };
    PoolCapacity {
        protection_domain,
        pool,
        id,
        capacity_bytes: max * 1024,
        used_bytes: used * 1024,
        available_bytes: available * 1024,
        spare_bytes: spare * 1024,
        used_pct,
        over_threshold: used_pct > threshold_pct,
        read_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_in_bytes_and_flagged_above_the_threshold() {
        let stats = json!({"maxCapacityInKb": 1000, "capacityInUseInKb": 810,
            "capacityAvailableForVolumeAllocationInKb": 40, "spareCapacityInKb": 0});
        let c = capacity_of(&stats, "pd".into(), "sp".into(), "id".into(), 80.0, 1);
        assert_eq!(c.capacity_bytes, 1_024_000);
        assert_eq!(c.used_bytes, 829_440);
        assert!(c.over_threshold);
        let c = capacity_of(&stats, "pd".into(), "sp".into(), "id".into(), 90.0, 1);
        assert!(!c.over_threshold);
        let empty = capacity_of(&json!({}), "pd".into(), "sp".into(), "id".into(), 80.0, 1);
        assert_eq!(empty.used_pct, 0.0);
    }
}
