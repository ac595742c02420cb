//! The gateway worker thread (design section 1): the only thread that talks to the storage
//! gateway once the scheduler runs. The dispatcher sends it [`Job`]s over a channel and never
//! waits for it; it answers with [`Report`]s through the sink it runs with.
//!
//! It owns its own retry schedule: a node whose work failed, or whose SDC is not connected
//! yet, is tried again with jittered backoff without the dispatcher asking again. The
//! gateway's health view (SDSs, devices, SDCs, the MDM cluster, every pool's figures) is
//! read in one poll of a fixed handful of requests every `poll_interval`, and once a wave of
//! attachments has been quiet for `poll_settle`; the watch on ready nodes' SDCs reads that
//! poll's SDC list. Its time is the injected [`Clock`]'s, in milliseconds.

use super::attach_plan::{self, NodeWant};
use super::outage::{Gate, Outage};
use super::poll::Listed;
use super::reconcile::Reconciler;
use super::removal::{Removals, RemoveWant};
pub use super::report::{HealthPoll, NodeReport, Report};
use super::sdcs_seen::SdcsSeen;
use crate::backoff::Backoff;
use crate::clock::{self, Clock};
use crate::gateway::api;
use crate::gateway::client::GatewayClient;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Work for the gateway worker.
#[derive(Debug, Clone)]
pub enum Job {
    /// Make the cluster hold this node's SDS and devices, then check its SDC.
    Attach(NodeWant),
    /// Poll the gateway's health view now.
    Poll,
    /// Poll it soon, at least the settle delay after the last poll.
    PollSoon,
    /// The gateway's `host:port`, for a worker started without one (experimental mode).
    Gateway(String),
    /// Take a node's SDS, or one of its devices, out (`removal.rs`); an SDS's node is
    /// worked no more.
    Remove(RemoveWant),
}

#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Between two health polls (`-health.interval`).
    pub poll_interval: Duration,
    pub threshold_pct: f64,
    /// First retry of a node that is not ready; doubles up to `retry_cap`.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// After an attachment, the health poll runs once attachments have been quiet this long
    /// (so that a wave of attachments costs one poll, not one per node), or at its regular
    /// time if that comes first.
    pub poll_settle: Duration,
    /// Pools read from the start (pre-configured mode: the flags' pool, which the start-up
    /// checks found), before any attachment has resolved them.
    pub known_pools: Vec<(String, String)>,
}

impl WorkerSettings {
    pub fn new(poll_interval: Duration, threshold_pct: f64) -> WorkerSettings {
        WorkerSettings {
            poll_interval,
            threshold_pct,
            retry_base: Duration::from_secs(1),
            retry_cap: Duration::from_secs(60),
            poll_settle: Duration::from_millis(500),
            known_pools: Vec::new(),
        }
    }
}

/// Milliseconds of `d`, for deadlines on the clock.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

struct Pending {
    want: NodeWant,
    /// When to work on it next (clock milliseconds).
    due: u64,
    backoff: Backoff,
    /// Attachment done; only the SDC is awaited.
    attached: Option<(String, Vec<String>)>,
}

/// A ready node, checked again with every health poll: only what its report and its SDC
/// check need. As a whole `Pending` it was about 500 bytes a node (the box, its want's
/// names, a protection domain and an SDS name), 5 MB at 10,000 ready nodes; as four boxed
/// texts and a list, five heap chunks and 64 bytes in the map, about 1.9 MB (heaptrack).
/// Now one text and its offsets: its host name, address and SDS id one after the other,
/// then each attached device as a netstring (`8:/dev/sdb`), whatever the names hold.
struct Watched {
    text: Box<str>,
    ip_at: u32,
    sds_at: u32,
    devices_at: u32,
}

impl Watched {
    fn of(p: Box<Pending>) -> Watched {
        let (sds_id, attached) = p.attached.unwrap_or_default();
        let (hostname, ip) = (&p.want.hostname, &p.want.ip);
        let mut text = String::with_capacity(
            hostname.len()
                + ip.len()
                + sds_id.len()
                + attached.iter().map(|d| d.len() + 4).sum::<usize>(),
        );
        let at = |text: &String| u32::try_from(text.len()).unwrap_or(u32::MAX);
        text.push_str(hostname);
        let ip_at = at(&text);
        text.push_str(ip);
        let sds_at = at(&text);
        text.push_str(&sds_id);
        let devices_at = at(&text);
        for d in &attached {
            use std::fmt::Write;
            let _ = write!(text, "{}:{d}", d.len());
        }
        Watched {
            text: text.into_boxed_str(),
            ip_at,
            sds_at,
            devices_at,
        }
    }

    fn part(&self, from: u32, to: u32) -> &str {
        self.text.get(from as usize..to as usize).unwrap_or("")
    }

    fn hostname(&self) -> &str {
        self.part(0, self.ip_at)
    }

    fn ip(&self) -> &str {
        self.part(self.ip_at, self.sds_at)
    }

    fn sds_id(&self) -> &str {
        self.part(self.sds_at, self.devices_at)
    }

    /// The attached devices, in the order given.
    fn attached(&self) -> Vec<String> {
        let mut rest = self.text.get(self.devices_at as usize..).unwrap_or("");
        let mut devices = Vec::new();
        while let Some((len, after)) = rest.split_once(':') {
            let Some(device) = len.parse().ok().and_then(|n: usize| after.get(..n)) else {
                break;
            };
            devices.push(device.to_string());
            rest = &after[device.len()..];
        }
        devices
    }

    /// Back to work: attached already, it awaits its SDC only (a new want, which a new
    /// attachment brings, replaces it whole).
    fn into_pending(self, agent: Arc<str>, due: u64, backoff: Backoff) -> Box<Pending> {
        let hostname = self.hostname().to_string();
        Box::new(Pending {
            want: NodeWant {
                agent_id: agent,
                sds_name: attach_plan::sds_name(&hostname),
                hostname,
                ip: self.ip().to_string(),
                protection_domain: String::new(),
                devices: Vec::new(),
            },
            due,
            backoff,
            attached: Some((self.sds_id().to_string(), self.attached())),
        })
    }
}

pub struct Worker {
    gateway: Reconciler,
    settings: WorkerSettings,
    /// Boxed: a B-tree node holds eleven values inline and, filled in key order, stays about
    /// half full, so 240-byte values inline cost about twice their size (at 10,000 agents,
    /// heaptrack: 4.4 MB of tree inline, 1.0 MB of tree and 2.5 MB of boxes boxed).
    pending: BTreeMap<Arc<str>, Box<Pending>>,
    /// Ready nodes whose SDC is checked again with every health poll (a host reboot
    /// disconnects it); one that lost its MDM connection goes back to `pending`. Kept slim
    /// ([`Watched`]): in a settled cluster every node is here.
    watched: BTreeMap<Arc<str>, Watched>,
    /// The agent id each host's work is under: a host back under a new agent id (a reboot)
    /// replaces its old agent's work instead of being worked twice.
    hosts: HashMap<String, Arc<str>>,
    /// The next health poll: its interval after the last, or sooner when asked.
    poll_due: u64,
    /// The poll that shows the latest attachments: `poll_settle` after the last of them.
    settled_due: Option<u64>,
    /// When the last health poll was taken.
    polled_ms: Option<u64>,
    /// When the SDCs may be listed again for the nodes awaiting theirs (`check_sdcs`).
    sdcs_checkable: u64,
    /// The newest SDC listing's connected SDCs, while nodes await theirs (`sdcs_seen.rs`).
    sdcs_seen: Option<SdcsSeen>,
    /// The gateway as a whole: while it is unreachable only probes go out.
    outage: Outage,
    removals: Removals,
    clock: Arc<dyn Clock>,
}

impl Worker {
    pub fn new(client: GatewayClient, settings: WorkerSettings) -> Worker {
        Worker {
            gateway: Reconciler::new(client),
            outage: Outage::new(settings.retry_base, settings.retry_cap),
            settings,
            pending: BTreeMap::new(),
            watched: BTreeMap::new(),
            hosts: HashMap::new(),
            poll_due: 0,
            settled_due: None,
            polled_ms: None,
            sdcs_checkable: 0,
            sdcs_seen: None,
            removals: Removals::default(),
            clock: clock::system(),
        }
    }

    /// Reads time from `clock` instead of the system clock (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Worker {
        self.clock = clock;
        self
    }

    /// Runs until the job channel closes or `report` refuses a report (its receiver is
    /// gone).
    pub fn run(mut self, jobs: Receiver<Job>, mut report: impl FnMut(Report) -> bool) {
        loop {
            let now = self.clock.now_ms();
            let next = self.next_wake();
            match jobs.recv_timeout(Duration::from_millis(next.saturating_sub(now))) {
                Ok(job) => self.take(job),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            while let Ok(job) = jobs.try_recv() {
                self.take(job);
            }
            for r in self.work_due() {
                if !report(r) {
                    return;
                }
            }
            if let Some(fingerprint) = self.gateway.client().newly_trusted() {
                let address = self.gateway.client().address().to_string();
                if !report(Report::Certificate {
                    fingerprint,
                    address,
                }) {
                    return;
                }
            }
        }
    }

    /// The earliest deadline: the next probe while the gateway is down (due nodes wait for
    /// it), else the earliest node or health poll.
    fn next_wake(&self) -> u64 {
        if let Some(probe) = self.outage.next_probe() {
            return probe;
        }
        self.pending
            .values()
            .map(|p| p.due)
            .chain(self.removals.next_due())
            .chain(std::iter::once(self.poll_at()))
            .min()
            .unwrap_or(self.poll_at())
    }

    /// When the next health poll runs: when due, or once a wave of attachments has settled.
    fn poll_at(&self) -> u64 {
        self.settled_due
            .map_or(self.poll_due, |settled| settled.min(self.poll_due))
    }

    /// Whether the gateway may be used now: open, or down and this probe is answered.
    fn gateway_answers(&mut self) -> bool {
        let now = self.clock.now_ms();
        match self.outage.gate(now) {
            Gate::Open => true,
            Gate::Closed { .. } => false,
            Gate::Probe => {
                let probe = api::probe(self.gateway.client());
                let now = self.clock.now_ms();
                let down_for = self.outage.down_for(now).unwrap_or_default();
                if self.outage.after_request(probe.as_ref().err(), now) {
                    let wait = self.outage.next_probe().unwrap_or(now).saturating_sub(now);
                    log::debug!(
                        "storage gateway at {} still down; next probe in {wait} ms",
                        self.gateway.client().address()
                    );
                    return false;
                }
                log::info!(
                    "storage gateway at {} answers again after {}s down; {} node(s) resume",
                    self.gateway.client().address(),
                    down_for.as_secs(),
                    self.pending.len()
                );
                true
            }
        }
    }

    /// After a gateway call: true when its last request found the gateway gone, which ends
    /// the pass (logged once per outage).
    fn gateway_gone(&mut self) -> bool {
        let now = self.clock.now_ms();
        let was_up = self.outage.gate(now) == Gate::Open;
        let error = self.gateway.client().unanswered().cloned();
        if !self.outage.after_request(error.as_ref(), now) {
            return false;
        }
        if was_up {
            let wait = self.outage.next_probe().unwrap_or(now).saturating_sub(now);
            log::warn!(
                "{}; gateway work stops ({} node(s) waiting), one probe in {wait} ms and then \
                 with backoff until it answers",
                error.map(|e| e.to_string()).unwrap_or_default(),
                self.pending.len()
            );
        }
        true
    }

    fn take(&mut self, job: Job) {
        match job {
            Job::Attach(want) => {
                let before = self
                    .hosts
                    .insert(want.hostname.clone(), want.agent_id.clone());
                if let Some(old) = before.filter(|old| *old != want.agent_id) {
                    log::info!(
                        "{}: its work moves from agent {old} to agent {}",
                        want.hostname,
                        want.agent_id
                    );
                    self.pending.remove(&old);
                    self.watched.remove(&old);
                }
                self.watched.remove(&want.agent_id);
                let backoff = self.backoff();
                self.pending.insert(
                    want.agent_id.clone(),
                    Box::new(Pending {
                        want,
                        due: self.clock.now_ms(),
                        backoff,
                        attached: None,
                    }),
                );
            }
            Job::Remove(want) => {
                if want.device.is_none() {
                    self.pending.remove(want.agent_id.as_str());
                    self.watched.remove(want.agent_id.as_str());
                    self.hosts.retain(|_, agent| **agent != *want.agent_id);
                }
                let (base, cap) = (self.settings.retry_base, self.settings.retry_cap);
                self.removals.take(want, self.clock.now_ms(), base, cap);
            }
            Job::Poll => self.poll_due = self.clock.now_ms(),
            // A step waiting on a rebuild asks again and again: a quarter of the health
            // interval apart (at least 250 ms), so that a rebuild is seen done soon after it
            // is, without polling a minutes-long one twice a second.
            Job::PollSoon => self.poll_soon(),
            Job::Gateway(address) => {
                log::info!("storage gateway at {address}");
                self.gateway.client().set_address(&address);
                // Whatever was down was the old address.
                self.outage = Outage::new(self.settings.retry_base, self.settings.retry_cap);
            }
        }
    }

    /// A node's retry backoff, from its first attempt.
    fn backoff(&self) -> Backoff {
        Backoff::new(self.settings.retry_base, self.settings.retry_cap)
    }

    fn poll_soon(&mut self) {
        let gap = (ms(self.settings.poll_interval) / 4).max(250);
        let earliest = self.polled_ms.map_or(0, |t| t + gap);
        self.poll_due = self.poll_due.min(earliest.max(self.clock.now_ms()));
    }

    /// Does whatever is due; the reports to send. The first request that finds the gateway
    /// gone ends the pass: nodes not reached stay due for when it answers again.
    pub fn work_due(&mut self) -> Vec<Report> {
        let now = self.clock.now_ms();
        if self.gateway.client().address().is_empty() {
            // No gateway yet (experimental mode before the cluster is built): the work
            // waits; the next job wakes the worker.
            for p in self.pending.values_mut() {
                p.due = now + ms(self.settings.retry_base);
            }
            self.poll_due = now + ms(self.settings.poll_interval);
            return Vec::new();
        }
        if !self.gateway_answers() {
            return self.poll_missed(now).into_iter().collect();
        }
        let mut reports = Vec::new();
        let Some((attached_any, awaiting_sdc)) = self.attach_due(now, &mut reports) else {
            reports.extend(self.poll_missed(now));
            return reports;
        };
        if !awaiting_sdc.is_empty() {
            reports.extend(self.check_sdcs(&awaiting_sdc, now));
        }
        if self.outage.next_probe().is_none() {
            reports.extend(self.removals.start_due(self.gateway.client(), now));
            self.gateway_gone();
        }
        // A removal is done when a poll no longer lists its object: look often meanwhile.
        if self.removals.watching() {
            self.poll_soon();
        }
        if self.outage.next_probe().is_some() {
            reports.extend(self.poll_missed(now));
            return reports;
        }
        if attached_any {
            // Moved on by each attachment: a wave that attaches for minutes costs a poll per
            // interval, not one per `poll_settle` (each poll lists every node's SDS, device
            // and SDC).
            self.settled_due = Some(self.clock.now_ms() + ms(self.settings.poll_settle));
        }
        if self.poll_at() <= self.clock.now_ms() {
            self.poll(&mut reports);
        }
        if self.sdcs_seen.as_ref().is_some_and(|s| !s.fresh(now)) {
            self.sdcs_seen = None;
        }
        reports
    }

    /// One health poll: its report, and the watched nodes whose SDC it found disconnected.
    fn poll(&mut self, reports: &mut Vec<Report>) {
        self.polled_ms = Some(self.clock.now_ms());
        self.settled_due = None;
        self.poll_due = self.clock.now_ms() + ms(self.settings.poll_interval);
        let polled = self.gateway.health(
            &self.settings.known_pools,
            self.settings.threshold_pct,
            &*self.clock,
            &self.removals.devices_watched(),
        );
        match polled {
            Ok(poll) => {
                reports.extend(self.recheck_watched(&poll.listed));
                // The newest listing answers, dated when the poll began; a settled cluster
                // holds none.
                let at = self.polled_ms.unwrap_or_default();
                self.sdcs_seen = (!self.pending.is_empty())
                    .then(|| SdcsSeen::of_ips(at, poll.listed.connected_ips()));
                reports.extend(self.removals.check(&poll));
                reports.push(Report::Health(Box::new(poll)));
            }
            Err(e) => {
                // Its SDC listing may have been read before the poll failed: what it showed
                // is not known, so no older listing answers for it.
                self.sdcs_seen = None;
                if self.gateway_gone() {
                    log::debug!("storage health poll: {e}");
                } else {
                    log::warn!("storage health poll: {e}");
                }
                reports.push(Report::HealthFailed {
                    error: e.to_string(),
                    at_ms: self.clock.now_ms(),
                });
            }
        }
    }

    /// A poll that came due while the gateway is down: reported failed (the health model
    /// counts the data's age from the last poll that was answered), and due again after one
    /// interval.
    fn poll_missed(&mut self, now: u64) -> Option<Report> {
        if self.poll_due > now {
            return None;
        }
        self.poll_due = now + ms(self.settings.poll_interval);
        Some(Report::HealthFailed {
            error: format!(
                "the storage gateway at {} does not answer",
                self.gateway.client().address()
            ),
            at_ms: now,
        })
    }

    /// Attaches every node due at `now`: (added any device, the nodes awaiting their SDC),
    /// or `None` when the gateway turned out to be gone (the pass ends).
    fn attach_due(&mut self, now: u64, reports: &mut Vec<Report>) -> Option<(bool, Vec<Arc<str>>)> {
        let due: Vec<Arc<str>> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(a, _)| a.clone())
            .collect();
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
            let outcome = self.gateway.attach(&want);
            let gone = self.gateway_gone();
            match outcome {
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
                        agent_id: want.agent_id.to_string(),
                        sds_id: None,
                        attached: Vec::new(),
                        sdc_connected: false,
                        error: Some(e),
                    }));
                    // A gateway that is gone is no fault of this node: it stays due.
                    if !gone {
                        self.retry_later(agent);
                    }
                }
            }
            if gone {
                return None;
            }
        }
        Some((attached_any, awaiting_sdc))
    }

    fn retry_later(&mut self, agent: &str) {
        let now = self.clock.now_ms();
        if let Some(p) = self.pending.get_mut(agent) {
            p.due = now + ms(p.backoff.next_delay());
        }
    }

    /// One `GET /api/types/Sdc/instances` for every node awaiting its SDC, at most once per
    /// `poll_settle`: the nodes due before then wait for it. Each listing names every SDC
    /// of the cluster; one after every pass of attachments made a 10,000-node rollout's
    /// attach quadratic (a pass attaches the few nodes whose jobs came meanwhile). A node
    /// whose SDC the newest listing showed connected a moment ago needs none
    /// (`sdcs_seen.rs`).
    fn check_sdcs(&mut self, agents: &[Arc<str>], now: u64) -> Vec<Report> {
        let mut reports = Vec::new();
        // The pass's attachments may have taken a while since `now`.
        let seen_now = self.clock.now_ms();
        let seen = self.sdcs_seen.as_ref().filter(|s| s.fresh(seen_now));
        let (known, unknown): (Vec<Arc<str>>, Vec<Arc<str>>) =
            agents.iter().cloned().partition(|agent| {
                seen.zip(self.pending.get(agent))
                    .is_some_and(|(seen, p)| seen.connected(&p.want.ip))
            });
        for agent in &known {
            reports.extend(self.sdc_checked(agent, Ok(true)));
        }
        if unknown.is_empty() {
            return reports;
        }
        if now < self.sdcs_checkable {
            for agent in &unknown {
                if let Some(p) = self.pending.get_mut(agent) {
                    p.due = p.due.max(self.sdcs_checkable);
                }
            }
            return reports;
        }
        self.sdcs_checkable = now + ms(self.settings.poll_settle);
        let connected = api::connected_sdc_ips(self.gateway.client());
        self.sdcs_seen = connected
            .as_ref()
            .ok()
            .map(|set| SdcsSeen::new(now, &mut set.iter().map(String::as_str)));
        if connected.is_err() && self.gateway_gone() {
            return reports;
        }
        for agent in &unknown {
            let found = match &connected {
                Ok(set) => Ok(self
                    .pending
                    .get(agent)
                    .is_some_and(|p| set.contains(&p.want.ip))),
                Err(e) => Err(e.to_string()),
            };
            reports.extend(self.sdc_checked(agent, found));
        }
        reports
    }

    /// A node awaiting its SDC, checked: whether the SDC is connected, or why that is not
    /// known. Ready, it is watched from now on; else retried with backoff.
    fn sdc_checked(&mut self, agent: &Arc<str>, found: Result<bool, String>) -> Option<Report> {
        let p = self.pending.get(agent)?;
        let (sds_id, attached) = p.attached.clone().unwrap_or_default();
        let (sdc_connected, error) = match found {
            Ok(true) => (true, None),
            Ok(false) => (
                false,
                Some(format!(
                    "waiting for the SDC at {} to connect to the MDMs",
                    p.want.ip
                )),
            ),
            Err(e) => (false, Some(e)),
        };
        if sdc_connected {
            // From now on only its SDC is checked, and a new attachment comes with a want of
            // its own.
            if let Some(p) = self.pending.remove(agent) {
                self.watched.insert(agent.clone(), Watched::of(p));
            }
        } else {
            self.retry_later(agent);
        }
        Some(Report::Node(NodeReport {
            agent_id: agent.to_string(),
            sds_id: Some(sds_id),
            attached,
            sdc_connected,
            error,
        }))
    }

    /// Ready nodes whose SDC has lost its MDM connection in the poll's SDC list: reported,
    /// and retried until it is back.
    fn recheck_watched(&mut self, listed: &Listed) -> Vec<Report> {
        let lost: Vec<Arc<str>> = self
            .watched
            .iter()
            .filter(|(_, w)| !listed.sdc_connected(w.ip()))
            .map(|(a, _)| a.clone())
            .collect();
        let mut reports = Vec::new();
        for agent in lost {
            let Some(w) = self.watched.remove(&agent) else {
                continue;
            };
            log::warn!(
                "{}: the SDC at {} lost its MDM connection",
                w.hostname(),
                w.ip()
            );
            reports.push(Report::Node(NodeReport {
                agent_id: agent.to_string(),
                sds_id: Some(w.sds_id().to_string()),
                attached: w.attached(),
                sdc_connected: false,
                error: Some(format!(
                    "the SDC at {} is not connected to the MDMs",
                    w.ip()
                )),
            }));
            let mut backoff = self.backoff();
            let due = self.clock.now_ms() + ms(backoff.next_delay());
            let p = w.into_pending(agent.clone(), due, backoff);
            self.pending.insert(agent, p);
        }
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::gateway::client::GatewayConfig;
    use crate::secret::Secret;

    /// A watched node's one text gives back each part as it was put in, whatever the parts
    /// hold (a device name with the separator's characters in it, none at all).
    #[test]
    fn a_watched_node_keeps_its_names_in_one_text_and_gives_each_back() {
        let pending = |hostname: &str, ip: &str, sds: &str, devices: &[&str]| {
            Box::new(Pending {
                want: NodeWant {
                    agent_id: "a1".into(),
                    hostname: hostname.into(),
                    ip: ip.into(),
                    sds_name: String::new(),
                    protection_domain: String::new(),
                    devices: Vec::new(),
                },
                due: 0,
                backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(2)),
                attached: Some((sds.into(), devices.iter().map(|d| d.to_string()).collect())),
            })
        };
        assert!(
            std::mem::size_of::<Watched>() <= 32,
            "one text and its offsets"
        );
        let odd = ["/dev/sdb", "12:/dev/x:3", "", "/dev/disk/by-id/ünï"];
        for (host, ip, sds, devices) in [
            ("h1.example", "10.0.0.1", "sds-1", &odd[..]),
            ("", "", "", &[][..]),
            ("höst", "::1", "7", &["/dev/sdc"][..]),
        ] {
            let w = Watched::of(pending(host, ip, sds, devices));
            assert_eq!(
                (w.hostname(), w.ip(), w.sds_id(), w.attached()),
                (
                    host,
                    ip,
                    sds,
                    devices.iter().map(|d| d.to_string()).collect()
                )
            );
            let back = w.into_pending(
                "a1".into(),
                0,
                Backoff::new(Duration::from_secs(1), Duration::from_secs(2)),
            );
            assert_eq!(back.want.hostname, host);
            assert_eq!(back.want.ip, ip);
            assert_eq!(
                back.attached.as_ref().map(|(s, d)| (s.as_str(), d.len())),
                Some((sds, devices.len()))
            );
        }
    }

    #[test]
    fn deadlines_follow_the_injected_clock() {
        let client = GatewayClient::new(GatewayConfig::new("", Secret::new("pw"), "2.0")).unwrap();
        let clock = ManualClock::at(1_000);
        let settings = WorkerSettings::new(Duration::from_secs(60), 80.0);
        let mut w = Worker::new(client, settings).with_clock(clock.clone());
        w.take(Job::Attach(NodeWant {
            agent_id: "a1".into(),
            hostname: "h1".into(),
            ip: "10.0.0.5".into(),
            sds_name: "h1".into(),
            protection_domain: "pd".into(),
            devices: Vec::new(),
        }));
        assert_eq!(w.pending["a1"].due, 1_000);
        // No gateway address yet: the work waits one retry period of the clock's time.
        assert!(w.work_due().is_empty());
        assert_eq!(w.pending["a1"].due, 2_000);
        assert_eq!(w.poll_due, 61_000);
        clock.advance(5_000);
        w.take(Job::Poll);
        assert_eq!(w.poll_due, 6_000);
    }

    /// A step waiting on a rebuild asks for polls again and again: they come a quarter of the
    /// health interval after the last poll, never sooner, never later than one already due.
    #[test]
    fn polls_asked_soon_are_a_quarter_interval_apart() {
        let client = GatewayClient::new(GatewayConfig::new("", Secret::new("pw"), "2.0")).unwrap();
        let clock = ManualClock::at(100_000);
        let settings = WorkerSettings::new(Duration::from_secs(60), 80.0);
        let mut w = Worker::new(client, settings).with_clock(clock.clone());
        w.poll_due = 160_000;
        w.take(Job::PollSoon);
        assert_eq!(w.poll_due, 100_000, "no poll yet: at once");
        w.polled_ms = Some(100_000);
        w.poll_due = 160_000;
        w.take(Job::PollSoon);
        assert_eq!(w.poll_due, 115_000);
        clock.advance(20_000);
        w.take(Job::PollSoon);
        assert_eq!(w.poll_due, 115_000, "already due: unchanged");
        w.poll_due = 110_000;
        w.take(Job::PollSoon);
        assert_eq!(w.poll_due, 110_000, "never later than one due");
    }

    /// A watched node whose SDC the poll lists disconnected, or not at all, goes back to
    /// work and is reported; one connected at its address stays watched.
    #[test]
    fn a_poll_sends_back_exactly_the_watched_nodes_whose_sdc_is_not_connected() {
        let client = GatewayClient::new(GatewayConfig::new("", Secret::new("pw"), "2.0")).unwrap();
        let settings = WorkerSettings::new(Duration::from_secs(60), 80.0);
        let mut w = Worker::new(client, settings).with_clock(ManualClock::at(1_000));
        for (agent, ip) in [("a1", "10.0.0.1"), ("a2", "10.0.0.2"), ("a3", "10.0.0.3")] {
            w.take(Job::Attach(NodeWant {
                agent_id: agent.into(),
                hostname: format!("h-{agent}"),
                ip: ip.into(),
                sds_name: agent.into(),
                protection_domain: "pd".into(),
                devices: Vec::new(),
            }));
            let mut p = w.pending.remove(agent).unwrap();
            p.attached = Some((format!("sds-{agent}"), vec!["/dev/sdb".into()]));
            w.watched.insert(agent.into(), Watched::of(p));
        }
        let sdc = crate::gateway::types::Sdc::at;
        // a2's SDC is disconnected, a3's is not listed (another address is connected).
        let mut listed = Listed::default();
        listed.sdc(sdc("10.0.0.1", "Connected"));
        listed.sdc(sdc("10.0.0.2", "Disconnected"));
        listed.sdc(sdc("10.0.0.9", "Connected"));
        let lost: Vec<NodeReport> = w
            .recheck_watched(&listed)
            .into_iter()
            .filter_map(|r| match r {
                Report::Node(n) if !n.sdc_connected => Some(n),
                _ => None,
            })
            .collect();
        let agents: Vec<&str> = lost.iter().map(|n| n.agent_id.as_str()).collect();
        assert_eq!(agents, ["a2", "a3"]);
        // Each reported with what it holds, and back at work awaiting its SDC only.
        assert_eq!(lost[0].sds_id.as_deref(), Some("sds-a2"));
        assert_eq!(lost[0].attached, ["/dev/sdb"]);
        let back = &w.pending["a2"];
        assert_eq!(back.want.ip, "10.0.0.2");
        assert_eq!(back.want.hostname, "h-a2");
        assert_eq!(
            back.attached,
            Some(("sds-a2".to_string(), vec!["/dev/sdb".to_string()]))
        );
        assert_eq!(w.watched.keys().map(|k| &**k).collect::<Vec<_>>(), ["a1"]);
        assert_eq!(
            w.pending.keys().map(|k| &**k).collect::<Vec<_>>(),
            ["a2", "a3"]
        );
    }

    #[test]
    fn a_host_back_under_a_new_agent_id_is_worked_once() {
        let client = GatewayClient::new(GatewayConfig::new("", Secret::new("pw"), "2.0")).unwrap();
        let settings = WorkerSettings::new(Duration::from_secs(60), 80.0);
        let mut w = Worker::new(client, settings).with_clock(ManualClock::at(1_000));
        let want = |agent: &str, host: &str| NodeWant {
            agent_id: agent.into(),
            hostname: host.into(),
            ip: "10.0.0.5".into(),
            sds_name: host.into(),
            protection_domain: "pd".into(),
            devices: Vec::new(),
        };
        w.take(Job::Attach(want("a1", "h1")));
        w.take(Job::Attach(want("a2", "h2")));
        // a1 was ready and watched when its host rebooted.
        let p = w.pending.remove("a1").unwrap();
        w.watched.insert("a1".into(), Watched::of(p));
        w.take(Job::Attach(want("a1b", "h1")));
        assert_eq!(
            w.pending.keys().map(|k| &**k).collect::<Vec<_>>(),
            ["a1b", "a2"]
        );
        assert!(w.watched.is_empty());
        // The same agent again is no move.
        w.take(Job::Attach(want("a1b", "h1")));
        assert_eq!(w.pending.len(), 2);
    }

    fn want(i: usize) -> NodeWant {
        NodeWant {
            agent_id: format!("a{i}").into(),
            hostname: format!("h{i}"),
            ip: format!("10.0.0.{i}"),
            sds_name: format!("h{i}"),
            protection_domain: "pd".into(),
            devices: Vec::new(),
        }
    }

    #[test]
    fn a_gateway_that_is_gone_costs_one_request_per_backoff_step_not_one_per_node() {
        // A port nobody listens on: every connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let mut config = GatewayConfig::new(&format!("127.0.0.1:{port}"), Secret::new("pw"), "2.0");
        config.retries = 0;
        let client = GatewayClient::new(config).unwrap();
        let clock = ManualClock::at(1_000);
        let settings = WorkerSettings::new(Duration::from_secs(60), 80.0);
        let mut w = Worker::new(client, settings).with_clock(clock.clone());
        for i in 1..=5 {
            w.take(Job::Attach(want(i)));
        }
        let sent = |w: &mut Worker| w.gateway.client().requests();
        let reports = w.work_due();
        assert_eq!(
            sent(&mut w),
            1,
            "the pass stops at the first refused connection"
        );
        // The node's failure, and the poll that was due.
        assert!(
            matches!(
                reports.as_slice(),
                [Report::Node(_), Report::HealthFailed { .. }]
            ),
            "{reports:?}"
        );
        // Nothing goes out before the probe is due, however often the worker wakes.
        let probe = w.next_wake();
        assert!((1_500..=2_000).contains(&probe), "{probe}");
        w.take(Job::Attach(want(6)));
        assert!(w.work_due().is_empty());
        // A poll asked for meanwhile is reported failed at once, without a request.
        w.take(Job::Poll);
        let reports = w.work_due();
        assert!(
            matches!(reports.as_slice(), [Report::HealthFailed { .. }]),
            "{reports:?}"
        );
        assert!(w.work_due().is_empty(), "once per poll that came due");
        assert_eq!(sent(&mut w), 1);
        // Each due probe is one request, and the steps grow.
        let mut last = probe;
        for step in 2..=6u64 {
            clock.advance(w.next_wake() - clock.now_ms());
            assert!(w.work_due().is_empty());
            assert_eq!(sent(&mut w), step);
            assert!(w.next_wake() - last >= (1_000u64 << (step - 1)) / 2);
            last = w.next_wake();
        }
        // Every node is still there, due as soon as the gateway answers.
        assert_eq!(w.pending.len(), 6);
        assert!(w.pending.values().all(|p| p.due <= clock.now_ms()));
        // A gateway at another address is not known to be down.
        w.take(Job::Gateway(format!("127.0.0.2:{port}")));
        assert!(w.next_wake() <= clock.now_ms());
    }

    const PASSWORD: &str = "Worker-Pa55";

    /// The dev cluster's gateway, answering without its usual latency (these tests count
    /// requests, not time).
    fn dev_gateway() -> devcluster::gateway::GatewayHandle {
        use devcluster::gateway::{start, GatewayConfig as SimConfig, MdmIps};
        let mut config = SimConfig::new(
            PASSWORD,
            MdmIps {
                primary: "10.0.0.11".into(),
                secondary: "10.0.0.12".into(),
                tiebreaker: "10.0.0.13".into(),
            },
        );
        config.latency = Duration::ZERO;
        start(config).unwrap_or_else(|e| panic!("gateway: {e}"))
    }

    fn worker_on(addr: &str, clock: Arc<dyn Clock>) -> Worker {
        let mut config = GatewayConfig::new(addr, Secret::new(PASSWORD), "2.0");
        config.retries = 0;
        let client = GatewayClient::new(config).unwrap();
        let mut settings = WorkerSettings::new(Duration::from_secs(60), 80.0);
        settings.known_pools = vec![("default".into(), "default".into())];
        Worker::new(client, settings).with_clock(clock)
    }

    /// A worker on a dev gateway of its own, its clock at 1,000 ms.
    fn worker_rig() -> (devcluster::gateway::GatewayHandle, Arc<ManualClock>, Worker) {
        let gw = dev_gateway();
        let clock = ManualClock::at(1_000);
        let w = worker_on(&gw.addr().to_string(), clock.clone());
        (gw, clock, w)
    }

    fn with_device(i: usize) -> NodeWant {
        NodeWant {
            ip: format!("10.1.{}.{}", i / 200, i % 200 + 1),
            devices: vec![super::super::attach_plan::DeviceWant {
                path: "/dev/sdb".into(),
                protection_domain: "default".into(),
                pool: "default".into(),
            }],
            protection_domain: "default".into(),
            ..want(i)
        }
    }

    /// `nodes` attached and watched; then the requests of one poll, as the poll counted them
    /// and as the gateway served them.
    fn requests_of_one_poll(nodes: usize) -> (u32, u64) {
        let (gw, _clock, mut w) = worker_rig();
        for i in 0..nodes {
            let want = with_device(i);
            gw.sdc_installed(&want.ip, "10.0.0.11").unwrap();
            w.take(Job::Attach(want));
        }
        w.work_due();
        assert_eq!(w.watched.len(), nodes, "every node attached and watched");
        w.take(Job::Poll);
        let served = gw.snapshot()["requests"].as_u64().unwrap();
        let reports = w.work_due();
        let served = gw.snapshot()["requests"].as_u64().unwrap() - served;
        let [Report::Health(poll)] = reports.as_slice() else {
            panic!("one health report, got {reports:?}");
        };
        assert_eq!(poll.listed.counts(), (nodes, nodes, nodes));
        assert_eq!(poll.pools.len(), 1);
        assert_eq!(
            poll.pools[0].capacity_bytes,
            nodes as u64 * 100 * 1024 * 1024 * 1024
        );
        assert_eq!(
            poll.mdm.as_ref().and_then(|m| m.cluster_state.as_deref()),
            Some("ClusteredNormal")
        );
        (poll.requests, served)
    }

    #[test]
    fn one_poll_is_a_fixed_number_of_requests_for_1_and_for_100_nodes() {
        let one = requests_of_one_poll(1);
        let hundred = requests_of_one_poll(100);
        // Systems, SDSs, devices, SDCs and one querySelectedStatistics.
        assert_eq!(one, (5, 5));
        assert_eq!(hundred, one);
    }

    /// A steady poll lists each node's storage as the last poll's, which the model holds,
    /// rather than a copy; and the worker keeps none that no node holds any more.
    #[test]
    fn a_steady_poll_shares_the_storages_nodes_took_from_the_last() {
        use crate::scheduler::model::NodeStorage;
        use std::sync::Weak;
        let (gw, _clock, mut w) = worker_rig();
        let wants: Vec<NodeWant> = (0..3).map(with_device).collect();
        for want in &wants {
            gw.sdc_installed(&want.ip, "10.0.0.11").unwrap();
            w.take(Job::Attach(want.clone()));
        }
        w.work_due();
        let mut storages = || -> Vec<Arc<NodeStorage>> {
            w.take(Job::Poll);
            let reports = w.work_due();
            let poll = reports.iter().find_map(|r| match r {
                Report::Health(p) => Some(p),
                _ => None,
            });
            let listed = &poll.expect("a health report").listed;
            let of = |want: &NodeWant| listed.storage_of(None, Some(&want.ip)).cloned();
            wants.iter().map(|want| of(want).expect("listed")).collect()
        };
        // Held as the model holds them.
        let held = storages();
        assert!(held.iter().all(|s| s.devices.len() == 1), "{held:?}");
        let again = storages();
        assert!(held.iter().zip(&again).all(|(a, b)| Arc::ptr_eq(a, b)));
        let gone: Vec<Weak<NodeStorage>> = held.iter().map(Arc::downgrade).collect();
        drop((held, again));
        let fresh = storages();
        assert!(
            gone.iter().all(|g| g.upgrade().is_none()),
            "kept: {fresh:?}"
        );
    }

    #[test]
    fn a_pool_not_named_yet_is_named_by_one_listing_then_cached() {
        let (gw, clock, mut attaching) = worker_rig();
        let want = with_device(1);
        gw.sdc_installed(&want.ip, "10.0.0.11").unwrap();
        attaching.take(Job::Attach(want));
        attaching.work_due();
        // A scheduler started afresh, without the flags' pool: it learns the pool's name.
        let mut w = worker_on(&gw.addr().to_string(), clock.clone());
        w.settings.known_pools.clear();
        let polls: Vec<u32> = (0..2)
            .map(|_| {
                w.take(Job::Poll);
                match w.work_due().as_slice() {
                    [Report::Health(poll)] => {
                        assert_eq!(poll.pools.len(), 1);
                        assert_eq!(poll.pools[0].pool, "default");
                        poll.requests
                    }
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        // The first: a login, and the domains and pools listed once.
        assert_eq!(polls, [8, 5]);
    }

    #[test]
    fn a_failed_poll_reports_health_failed_and_does_not_block() {
        let gw = dev_gateway();
        gw.fail_until_cleared();
        let w = worker_on(&gw.addr().to_string(), ManualClock::at(1_000));
        let (jobs, rx) = crossbeam_channel::unbounded();
        let (reports, got) = crossbeam_channel::unbounded();
        let worker = std::thread::spawn(move || w.run(rx, |r| reports.send(r).is_ok()));
        let health = || loop {
            let report = got.recv_timeout(Duration::from_secs(10)).expect("a report");
            if !matches!(report, Report::Certificate { .. }) {
                return report;
            }
        };
        let report = health();
        assert!(
            matches!(&report, Report::HealthFailed { error, at_ms: 1_000 } if error.contains("500")),
            "{report:?}"
        );
        // The gateway answers again: the next poll asked for succeeds.
        gw.clear_faults();
        jobs.send(Job::Poll).unwrap();
        let report = health();
        assert!(matches!(report, Report::Health(_)), "{report:?}");
        drop(jobs);
        worker.join().unwrap();
    }

    fn remove(i: usize) -> Job {
        Job::Remove(RemoveWant {
            agent_id: format!("a{i}"),
            hostname: format!("h{i}"),
            sds_name: format!("h{i}"),
            sds_id: None,
            device: None,
        })
    }

    fn removals(reports: &[Report]) -> Vec<&super::super::report::RemovalReport> {
        reports
            .iter()
            .filter_map(|r| match r {
                Report::Removed(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// `count` nodes attached and watched on the dev gateway.
    fn attached(
        gw: &devcluster::gateway::GatewayHandle,
        clock: &Arc<ManualClock>,
        count: usize,
    ) -> Worker {
        let mut w = worker_on(&gw.addr().to_string(), clock.clone());
        for i in 1..=count {
            let want = with_device(i);
            gw.sdc_installed(&want.ip, "10.0.0.11").unwrap();
            w.take(Job::Attach(want));
        }
        w.work_due();
        assert_eq!(w.watched.len(), count);
        w
    }

    #[test]
    fn an_sds_removed_is_reported_once_the_gateway_lists_it_no_more() {
        let gw = dev_gateway();
        gw.set_rebuild_time(Duration::from_millis(300)).unwrap();
        let clock = ManualClock::at(1_000);
        let mut w = attached(&gw, &clock, 3);
        w.take(remove(1));
        assert!(!w.watched.contains_key("a1"), "its node is worked no more");
        let reports = w.work_due();
        assert!(removals(&reports).is_empty(), "{reports:?}");
        let mut c = worker_on(&gw.addr().to_string(), clock.clone()).gateway;
        let listed = |c: &mut Reconciler| {
            let sdss = api::sdss(c.client()).unwrap();
            sdss.into_iter().find(|s| s.name.as_deref() == Some("h1"))
        };
        let pending = listed(&mut c).expect("listed while its data moves");
        assert_eq!(pending.sds_state.as_deref(), Some("RemovePending"));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while listed(&mut c).is_some() {
            assert!(std::time::Instant::now() < deadline, "the SDS never went");
            std::thread::yield_now();
        }
        // The next poll (soon: a removal is watched) sees it gone.
        clock.advance(60_000);
        let reports = w.work_due();
        let done = removals(&reports);
        assert_eq!(done.len(), 1, "{reports:?}");
        assert_eq!(
            (done[0].agent_id.as_str(), &done[0].outcome),
            ("a1", &Ok(()))
        );
        clock.advance(60_000);
        assert!(removals(&w.work_due()).is_empty(), "reported once");
    }

    #[test]
    fn a_removal_the_other_sdss_could_not_hold_is_refused() {
        let gw = dev_gateway();
        let clock = ManualClock::at(1_000);
        let mut w = attached(&gw, &clock, 2);
        gw.inject(devcluster::gateway::HealthFault::Fill(60))
            .unwrap();
        w.take(remove(2));
        let reports = w.work_due();
        let done = removals(&reports);
        assert_eq!(done.len(), 1, "{reports:?}");
        let why = done[0].outcome.clone().unwrap_err();
        assert!(why.contains("Not enough capacity"), "{why}");
        let sdss = api::sdss(w.gateway.client()).unwrap();
        assert_eq!(sdss.len(), 2, "nothing removed");
        assert!(sdss
            .iter()
            .all(|s| s.sds_state.as_deref() == Some("Normal")));
    }

    /// A wave of attachments is polled once it has been quiet for `poll_settle`: each pass
    /// that attaches moves that poll on, so a wave spread over seconds is not polled every
    /// `poll_settle` (each poll lists every node's SDS, device and SDC). A wave longer than
    /// the interval is still polled at its regular time.
    #[test]
    fn a_wave_of_attachments_is_polled_once_it_goes_quiet() {
        let (gw, clock, mut w) = worker_rig();
        let polls = |reports: Vec<Report>| {
            reports
                .iter()
                .filter(|r| matches!(r, Report::Health(_)))
                .count()
        };
        let attach = |w: &mut Worker, i: usize| {
            let want = with_device(i);
            gw.sdc_installed(&want.ip, "10.0.0.11").unwrap();
            w.take(Job::Attach(want));
            let polled = polls(w.work_due());
            clock.advance(300);
            polled
        };
        // Nothing polled yet: the first pass polls at once, before the wave.
        assert_eq!(polls(w.work_due()), 1);
        let during: usize = (0..10).map(|i| attach(&mut w, i)).sum();
        assert_eq!(during, 0, "no poll while attachments come 300 ms apart");
        clock.advance(200);
        assert_eq!(
            polls(w.work_due()),
            1,
            "one poll, 500 ms after the last attachment"
        );
        assert_eq!(w.watched.len(), 10, "every node attached");
        clock.advance(1_000);
        assert_eq!(polls(w.work_due()), 0, "no other before the interval");

        w.poll_due = clock.now_ms() + 1_000;
        let during: usize = (10..17).map(|i| attach(&mut w, i)).sum();
        assert_eq!(during, 1, "a longer wave: its regular poll");
    }

    /// Nodes attached in a stream have their SDCs checked together, at most once per
    /// `poll_settle`: each check lists every SDC of the cluster, and one after every pass
    /// made a large rollout's attach quadratic.
    #[test]
    fn a_stream_of_attachments_lists_the_sdcs_once_per_settle_period() {
        let (gw, clock, mut w) = worker_rig();
        w.work_due();
        let mut checks = 0;
        let mut check = |reports: Vec<Report>| {
            let ready = reports
                .iter()
                .filter(|r| matches!(r, Report::Node(n) if n.sdc_connected))
                .count();
            checks += usize::from(ready > 0);
            ready
        };
        let mut ready = 0;
        for i in 0..10 {
            let want = with_device(i);
            gw.sdc_installed(&want.ip, "10.0.0.11").unwrap();
            w.take(Job::Attach(want));
            ready += check(w.work_due());
            clock.advance(100);
        }
        let deadline = clock.now_ms() + 10_000;
        while ready < 10 && clock.now_ms() < deadline {
            clock.advance(w.next_wake().saturating_sub(clock.now_ms()).max(1));
            ready += check(w.work_due());
        }
        assert_eq!(ready, 10, "every node's SDC found connected");
        assert_eq!(w.watched.len(), 10);
        // At 0, 500 and 1,000 ms: not one listing per attachment.
        assert_eq!(checks, 3, "SDC listings for 10 attachments 100 ms apart");
    }

    /// The SDC listings the dev gateway has answered.
    fn sdc_listings(gw: &devcluster::gateway::GatewayHandle) -> u64 {
        gw.snapshot()["listings"]["Sdc"].as_u64().unwrap_or(0)
    }

    /// A host's SDC is installed long before its disks join: a listing a moment old shows
    /// it, and the nodes attached meanwhile are ready without one of their own. Once the
    /// listing is older than `REUSE_MS`, the next node's check lists again.
    #[test]
    fn nodes_whose_sdc_a_fresh_listing_showed_connected_need_no_listing() {
        let (gw, clock, mut w) = worker_rig();
        for i in 0..30 {
            gw.sdc_installed(&with_device(i).ip, "10.0.0.11").unwrap();
        }
        w.work_due();
        let before = sdc_listings(&gw);
        let listed_at = clock.now_ms();
        let mut ready = 0;
        for i in 0..20 {
            w.take(Job::Attach(with_device(i)));
            ready += w
                .work_due()
                .iter()
                .filter(|r| matches!(r, Report::Node(n) if n.sdc_connected))
                .count();
            clock.advance(100);
        }
        assert_eq!(ready, 20, "each node ready in the pass that attached it");
        assert_eq!(
            sdc_listings(&gw) - before,
            1,
            "SDC listings for 20 attachments 100 ms apart"
        );
        let reuse = super::super::sdcs_seen::REUSE_MS;
        clock.advance(listed_at + reuse - clock.now_ms());
        w.take(Job::Attach(with_device(20)));
        w.work_due();
        assert_eq!(sdc_listings(&gw) - before, 1, "still fresh at {reuse} ms");
        clock.advance(1);
        w.take(Job::Attach(with_device(21)));
        w.work_due();
        assert_eq!(sdc_listings(&gw) - before, 2, "the listing grew old: again");
    }

    /// A poll that fails may have read the SDCs before it failed: no older listing answers
    /// after it, and the next check lists again.
    #[test]
    fn after_a_failed_poll_an_older_listing_answers_for_no_node() {
        let (gw, clock, mut w) = worker_rig();
        let (a, b) = (with_device(0), with_device(1));
        let b_ip = b.ip.clone();
        gw.sdc_installed(&a.ip, "10.0.0.11").unwrap();
        gw.sdc_installed(&b_ip, "10.0.0.11").unwrap();
        w.work_due();
        // b's attach fails and is retried; a's check lists the SDCs, b's connected among them.
        w.take(Job::Attach(b));
        gw.fail_next(1);
        w.work_due();
        w.take(Job::Attach(a));
        w.work_due();
        assert!(w.watched.contains_key("a0") && w.pending.contains_key("a1"));
        gw.set_sdc_connected(&b_ip, false);
        clock.advance(100);
        w.take(Job::Poll);
        gw.fail_next(1);
        let failed = w.work_due();
        assert!(failed
            .iter()
            .any(|r| matches!(r, Report::HealthFailed { .. })));
        clock.advance(w.next_wake().saturating_sub(clock.now_ms()).max(1));
        let retried = w.work_due();
        assert!(
            !retried
                .iter()
                .any(|r| matches!(r, Report::Node(n) if n.agent_id == "a1" && n.sdc_connected)),
            "ready from the listing before the failed poll: {retried:?}"
        );
    }

    /// The newest listing answers: a poll that finds a ready node's SDC gone replaces the
    /// check that found it connected a moment before, and the node is not taken back as
    /// ready until a listing shows its SDC again.
    #[test]
    fn an_sdc_a_poll_found_gone_is_not_taken_back_from_an_older_listing() {
        let (gw, clock, mut w) = worker_rig();
        let want = with_device(0);
        let ip = want.ip.clone();
        gw.sdc_installed(&ip, "10.0.0.11").unwrap();
        w.work_due();
        w.take(Job::Attach(want));
        w.work_due();
        assert!(w.watched.contains_key("a0"), "ready and watched");
        gw.set_sdc_connected(&ip, false);
        clock.advance(1_000);
        w.take(Job::Poll);
        let lost = w.work_due();
        assert!(lost
            .iter()
            .any(|r| matches!(r, Report::Node(n) if n.agent_id == "a0" && !n.sdc_connected)));
        for _ in 0..5 {
            clock.advance(w.next_wake().saturating_sub(clock.now_ms()).max(1));
            let again = w.work_due();
            assert!(
                !again
                    .iter()
                    .any(|r| matches!(r, Report::Node(n) if n.sdc_connected)),
                "taken back as ready: {again:?}"
            );
        }
        gw.sdc_installed(&ip, "10.0.0.11").unwrap();
        let deadline = clock.now_ms() + 120_000;
        while !w.watched.contains_key("a0") && clock.now_ms() < deadline {
            clock.advance(w.next_wake().saturating_sub(clock.now_ms()).max(1));
            w.work_due();
        }
        assert!(
            w.watched.contains_key("a0"),
            "ready again once its SDC is back"
        );
    }
}
