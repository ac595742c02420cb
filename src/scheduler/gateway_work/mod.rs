//! The dispatcher's side of the storage work: which nodes need the gateway worker,
//! what it reported, and the storage-attach handshake fields of the model (`attached`,
//! `sdc_connected`, `storage_ready`).
//!
//! Runs on the dispatcher thread, never blocks: jobs are queued while the batch is handled,
//! recorded in the model (`storage_intent`), and released to the worker only after the state
//! is saved (write-ahead).

mod addrs;
pub mod attach_plan;
pub mod outage;
pub mod poll;
pub mod prereq;
pub mod reconcile;
pub mod removal;
pub mod report;
mod sdcs_seen;
pub mod startup;
pub mod worker;

use crate::hash::KeyHash;
use crate::scheduler::model::{ClusterModel, Node, Persona, Phase, Removal, WriteMark};
use attach_plan::{DeviceWant, NodeWant};
use crossbeam_channel::Sender;
use report::{AttachQueue, NodeReport, Report};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use worker::Job;

#[derive(Debug, Default)]
pub struct StorageSide {
    /// `None`: no gateway worker (experimental mode before the cluster exists, or tests).
    jobs: Option<Sender<Job>>,
    protection_domain: String,
    storage_pool: String,
    /// Jobs decided in this batch, sent after the save.
    queued: Vec<Job>,
    /// Agent (the model's own key) -> the fingerprint of the devices last handed to the
    /// worker (it retries those by itself). Not the list: at 10,000 nodes the lists were
    /// 3 MB of the scheduler's heap (heaptrack), a copy of what the worker holds.
    sent: HashMap<Arc<str>, u64, KeyHash>,
    /// Agent (the model's own key) -> the gateway error we put in `last_error` (cleared when
    /// the node is ready).
    errors: HashMap<Arc<str>, String, KeyHash>,
    /// Experimental mode: the cluster exists only once the primary MDM node has passed
    /// `cluster-init` (its executor ran the `scli` steps); no gateway work before that.
    experimental: bool,
    /// Experimental mode without a gateway flag: the worker is told the primary MDM node's
    /// address (port 443) once the cluster is built.
    gateway_on_primary: bool,
    /// Nodes whose claimed reboot was not behind them at the last batch: when one comes
    /// back, the health is polled at once, since the next reboot's grant reads it.
    rebooting: usize,
    /// A node may reboot after its `devices` phase (`reboot-final`: an isolator to load, and
    /// reboots allowed): its disks join only from `storage-attach` on, after that reboot.
    reboot_after_devices: bool,
    /// Removals handed to the worker (agent, device; `None` the SDS), until it reports them.
    removals_sent: std::collections::HashSet<(String, Option<String>)>,
    /// Nodes handed to the worker that it has not reported on yet: at most
    /// [`MAX_UNREPORTED`]. The rest wait in the model, where their wants are made again.
    /// These maps are looked up for every waiting node at every plan: `KeyHash`, not SipHash.
    unreported: HashSet<Arc<str>, KeyHash>,
    /// Nodes the last plan found due that waited for a place.
    waiting: usize,
    /// Where the model's write log stood when the last plan ended, unless this side's own
    /// state changed since. The plan reads only the nodes and this side and decides
    /// everything it can in one pass, so with neither written since, a plan would decide
    /// nothing new and is skipped: at 10,000 nodes its walk was the largest part of the
    /// dispatcher's walks after a batch, which a quiet cluster runs about once a second.
    planned: Option<WriteMark>,
    /// Walks of every node made by [`StorageSide::plan`] (tests).
    #[cfg(test)]
    walks: usize,
}

/// Attach jobs the worker holds before it has reported on them. It works one node at a time
/// (about ten a second on the dev gateway, fewer on a real one), so a larger queue only
/// holds memory: at 10,000 nodes every node's want at once (its devices, names and
/// addresses, in the plan's queue, then in the worker's) was 4 to 5 MB of the scheduler's
/// heap for as long as the worker took to get through them, minutes after a first rollout
/// or a restart. This bounds the queue, not the work: a node the worker reported on and
/// retries (a gateway error, its SDC awaited) stays in its work, and a node that leaves, or
/// that a health poll finds ready, gives its place back at the next plan while the worker
/// may still hold its job.
pub(crate) const MAX_UNREPORTED: usize = 256;

/// The write-ahead record of an attach job (`Node.storage_intent`).
fn intent(want: &NodeWant) -> Box<str> {
    let devices = if want.devices.is_empty() {
        "no devices".to_string()
    } else {
        want.devices
            .iter()
            .map(|d| d.path.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("SDS {} at {} with {devices}", want.sds_name, want.ip).into()
}

/// A device an operator takes out (removed, or being removed) is no longer wanted.
fn taken_out(node: &Node, path: &str) -> bool {
    node.devices_removed.iter().any(|d| d == path)
        || node.devices_removing.iter().any(|d| d == path)
}

impl StorageSide {
    pub fn new(jobs: Sender<Job>, protection_domain: &str, storage_pool: &str) -> StorageSide {
        StorageSide {
            jobs: Some(jobs),
            protection_domain: protection_domain.to_string(),
            storage_pool: storage_pool.to_string(),
            ..Default::default()
        }
    }

    /// Experimental mode (see the `experimental` field).
    pub fn experimental(mut self, on: bool) -> StorageSide {
        self.experimental = on;
        self
    }

    /// Nodes may reboot after their `devices` phase (see `reboot_after_devices`).
    pub fn reboot_after_devices(mut self, on: bool) -> StorageSide {
        self.reboot_after_devices = on;
        self
    }

    /// The gateway runs on the primary MDM node (see `gateway_on_primary`).
    pub fn gateway_on_primary(mut self, on: bool) -> StorageSide {
        self.gateway_on_primary = on;
        self
    }

    /// Experimental mode: the primary has passed `cluster-init` (in a phase after it, not
    /// failed or lost).
    fn cluster_built(model: &ClusterModel) -> bool {
        model.nodes.values().any(|n| {
            n.persona == Persona::Primary
                && matches!(
                    n.phase,
                    Phase::VolumeDriver
                        | Phase::RebootFinal
                        | Phase::StorageAttach
                        | Phase::Running
                )
        })
    }

    /// The node's devices for the cluster, less those an operator takes out.
    fn wanted(&self, node: &Node) -> Vec<DeviceWant> {
        let mut all =
            attach_plan::wanted_devices(node, &self.protection_domain, &self.storage_pool);
        all.retain(|d| !taken_out(node, &d.path));
        all
    }

    /// Whether every device of [`StorageSide::wanted`] is attached, without making the list:
    /// the plan checks each ready node after every walk, and at 10,000 nodes the lists it
    /// made and dropped for that were most of its cost.
    fn all_attached(node: &Node) -> bool {
        attach_plan::wanted_paths(node)
            .filter(|p| !taken_out(node, p))
            .all(|p| node.attached.contains(p))
    }

    /// Queues the removals the model holds and the worker has not been given (all of them
    /// after a restart: the worker finds by name what it had started).
    fn plan_removals(&mut self, node: &Node) {
        let sds = matches!(node.removal, Some(Removal::Draining | Removal::Replacing));
        let devices = node.devices_removing.iter().map(|d| Some(d.clone()));
        let wanted: Vec<Option<String>> = sds.then_some(None).into_iter().chain(devices).collect();
        for device in wanted {
            let key = (node.agent_id.to_string(), device.clone());
            if self.removals_sent.contains(&key) {
                continue;
            }
            self.removals_sent.insert(key);
            self.queued.push(Job::Remove(removal::RemoveWant {
                agent_id: node.agent_id.to_string(),
                hostname: node.hostname.clone(),
                sds_name: attach_plan::sds_name(&node.hostname),
                sds_id: node.sds_id.as_deref().map(str::to_string),
                device,
            }));
        }
    }

    /// The worker reported this removal's end: a new one may be sent.
    pub fn removal_done(&mut self, agent: &str, device: Option<&str>) {
        self.planned = None;
        self.removals_sent
            .remove(&(agent.to_string(), device.map(str::to_string)));
        if device.is_none() {
            self.sent.remove(agent);
            self.errors.remove(agent);
            self.unreported.remove(agent);
        }
    }

    /// Whether the cluster should match the node's devices now: they are known, and no reboot
    /// of its install is ahead (it has reported its devices, or reached `storage-attach` when
    /// `reboot-final` may follow the devices), so that a node holding data never reboots in
    /// its install; or it holds data already.
    fn attach_due(&self, node: &Node) -> bool {
        let from = if self.reboot_after_devices {
            Phase::StorageAttach
        } else {
            Phase::Devices
        };
        let reached = |p: Phase| p >= from && p <= Phase::Running;
        // Devices an executor reported (not a layout's) mean it was past `devices`, whatever
        // phase it reported since (a failed phase retried reports an earlier one), unless it
        // is back before the prerequisites' reboot.
        let reported = from == Phase::Devices
            && !node.devices.is_empty()
            && !matches!(node.phase, Phase::Environment | Phase::RebootPrerequisites);
        let due = reached(node.phase)
            || node.progress.is_some_and(reached)
            || !node.attached.is_empty()
            || reported;
        due && (node.phase == Phase::StorageAttach
            || !node.devices.is_empty()
            || !node.layout.sds.is_empty())
    }

    /// Experimental mode: the gateway on the primary MDM node, once its address is known
    /// (false until then).
    fn announce_gateway(&mut self, model: &ClusterModel) -> bool {
        let primary = model
            .nodes
            .values()
            .find(|n| n.persona == Persona::Primary)
            .and_then(|n| n.ip.as_deref()?.parse::<std::net::IpAddr>().ok());
        let Some(ip) = primary else {
            return false;
        };
        self.queued
            .push(Job::Gateway(std::net::SocketAddr::new(ip, 443).to_string()));
        self.gateway_on_primary = false;
        true
    }

    /// Decides the work of this batch and records it in the model; true when the model
    /// changed (it must be saved before [`StorageSide::release`]).
    pub fn plan(&mut self, model: &mut ClusterModel) -> bool {
        if self.planned == Some(model.nodes.mark()) {
            return false;
        }
        if self.jobs.is_none() || (self.experimental && !Self::cluster_built(model)) {
            return false;
        }
        if self.gateway_on_primary && !self.announce_gateway(model) {
            return false;
        }
        let rebooting = model.nodes.values().filter(|n| n.rebooting).count();
        if rebooting < self.rebooting {
            self.queued.push(Job::Poll);
        }
        self.rebooting = rebooting;
        self.give_places_back(model);
        self.waiting = 0;
        let mut changed = false;
        for mut node in model.nodes.values_mut() {
            if node.removal.is_some() || !node.devices_removing.is_empty() {
                self.plan_removals(&node);
            }
            // Most nodes of a big cluster are not there yet: skip them before any allocation.
            if !node.launchable() || !self.attach_due(&node) {
                continue;
            }
            let ready = node.sdc_connected && Self::all_attached(&node);
            if node.storage_ready != ready {
                node.storage_ready = ready;
                changed = true;
            }
            if ready {
                // The health poll saw the SDC first: the worker's "waiting for the SDC"
                // is over too.
                self.clear_error(&mut node);
            }
            if ready || !node.covered() {
                continue;
            }
            // Without an address or a place no job goes, whatever the want: asked before
            // making it (at 10,000 nodes most wait for a place at every plan).
            let Some(ip) = node.ip.as_deref() else {
                continue;
            };
            if !self.has_place(&node.agent_id) {
                // One the worker retries (it reported an error: the gateway's, or its SDC
                // awaited) is with it, not waiting.
                self.waiting += usize::from(!self.errors.contains_key(&*node.agent_id));
                continue;
            }
            let wanted = self.wanted(&node);
            let fingerprint = attach_plan::fingerprint(&wanted);
            if self.sent.get(&*node.agent_id) == Some(&fingerprint) {
                continue;
            }
            let want = NodeWant {
                agent_id: node.agent_id.clone(),
                hostname: node.hostname.clone(),
                ip: ip.to_string(),
                sds_name: attach_plan::sds_name(&node.hostname),
                protection_domain: wanted
                    .first()
                    .map(|d| d.protection_domain.clone())
                    .unwrap_or_else(|| self.protection_domain.clone()),
                devices: wanted,
            };
            node.storage_intent = Some(intent(&want));
            changed = true;
            self.sent.insert(node.agent_id.clone(), fingerprint);
            self.unreported.insert(node.agent_id.clone());
            self.queued.push(Job::Attach(want));
        }
        // After its own writes: they are part of what it decided.
        self.planned = Some(model.nodes.mark());
        #[cfg(test)]
        {
            self.walks += 1;
        }
        changed
    }

    /// A node the worker will not report on (it left, or its work ended otherwise) gives its
    /// place back.
    fn give_places_back(&mut self, model: &ClusterModel) {
        if !self.unreported.is_empty() {
            self.unreported.retain(|agent| {
                model
                    .nodes
                    .get(agent)
                    .is_some_and(|n| n.launchable() && n.covered() && !n.storage_ready)
            });
        }
    }

    /// How the attach work stands after the last plan.
    pub fn queue(&self) -> AttachQueue {
        AttachQueue {
            with_worker: self.unreported.len(),
            waiting: self.waiting,
        }
    }

    /// Whether an attach job for `agent` may go to the worker now (see [`MAX_UNREPORTED`]).
    fn has_place(&self, agent: &str) -> bool {
        self.unreported.len() < MAX_UNREPORTED || self.unreported.contains(agent)
    }

    /// A health poll as soon as the worker is free (a disruptive step just ended).
    pub fn poll_soon(&mut self) {
        if self.jobs.is_some() && !self.queued.iter().any(|j| matches!(j, Job::PollSoon)) {
            self.queued.push(Job::PollSoon);
        }
    }

    /// Hands the batch's jobs to the worker; call once their intents are saved.
    pub fn release(&mut self) {
        let Some(jobs) = &self.jobs else {
            return;
        };
        for job in self.queued.drain(..) {
            if jobs.send(job).is_err() {
                log::error!("the gateway worker is gone; storage work stops");
                self.jobs = None;
                break;
            }
        }
    }

    /// Takes a worker report into the model; true when it changed.
    pub fn on_report(&mut self, model: &mut ClusterModel, report: Report) -> bool {
        // A node's outcome gives back its place (which another node's plan reads) even when
        // it writes nothing.
        self.planned = None;
        match report {
            Report::Node(r) => self.on_node(model, r),
            // The dispatcher keeps it with the state it saves; the model has no place for it.
            Report::Certificate { .. } => false,
            // The dispatcher acts on these (`dispatcher/op_remove.rs`).
            Report::Removed(_) => false,
            // The dispatcher hands these to the health model (`scheduler/health/`), which
            // keeps the pools and logs their changes.
            Report::Health(_) | Report::HealthFailed { .. } => false,
        }
    }

    /// Takes back the gateway error this side put in the node's `last_error`, if still there.
    /// Reads before it writes: through a walk's `NodeMut` a write is a new revision (the
    /// save and the parked plan requests then look at the node), and the plan clears every
    /// ready node after every walk.
    fn clear_error(&mut self, node: &mut impl std::ops::DerefMut<Target = Node>) {
        let Some(mine) = self.errors.remove(&*node.agent_id) else {
            return;
        };
        if node.last_error.as_deref() == Some(mine.as_str()) {
            node.last_error = None;
        }
    }

    fn on_node(&mut self, model: &mut ClusterModel, r: NodeReport) -> bool {
        self.unreported.remove(r.agent_id.as_str());
        let Some(mut node) = model.nodes.get_mut(&r.agent_id) else {
            return false;
        };
        if r.sds_id.is_some() {
            node.sds_id = r.sds_id.map(Into::into);
        }
        if r.error.is_none() || !r.attached.is_empty() {
            // Reports and polls come from one worker thread in order: a poll read after
            // this report is the first that can list what it attached.
            node.attached_after_poll = !r.attached.is_empty();
            node.attached = r.attached;
        }
        node.sdc_connected = r.sdc_connected;
        node.storage_ready = node.sdc_connected && Self::all_attached(node);
        match r.error {
            Some(e) => {
                node.last_error = Some(e.as_str().into());
                self.errors.insert(node.agent_id.clone(), e);
            }
            None => self.clear_error(&mut node),
        }
        if node.storage_ready {
            node.storage_intent = None;
            log::info!(
                "{}: storage ready ({} device(s) attached, SDC connected)",
                node.hostname,
                node.attached.len()
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{Persona, TaskRecord};

    fn model_with_node(devices: &[&str]) -> ClusterModel {
        let mut m = ClusterModel::default();
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        n.ip = Some("10.0.0.5".into());
        n.devices = devices.iter().map(|d| d.to_string()).collect();
        n.phase = Phase::StorageAttach;
        n.task = Some(TaskRecord::new(
            "t",
            "e",
            crate::mesos::types::TaskState::Running,
            0,
        ));
        m.nodes.insert("a1", n);
        m
    }

    #[test]
    fn a_node_with_devices_gets_one_job_recorded_before_release() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb"]);
        assert!(s.plan(&mut m));
        assert!(m.nodes["a1"].storage_intent.is_some());
        assert!(rx.try_recv().is_err(), "nothing leaves before the save");
        s.release();
        assert!(matches!(rx.try_recv(), Ok(Job::Attach(w)) if w.devices.len() == 1));
        // The same devices again: the worker already has them.
        assert!(!s.plan(&mut m));
        s.release();
        assert!(rx.try_recv().is_err());
    }

    /// With no node written and nothing of its own changed since, a plan would decide
    /// nothing new: it does not walk the nodes. A write walks them again.
    #[test]
    fn a_plan_walks_the_nodes_only_after_something_changed() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb"]);
        assert!(s.plan(&mut m));
        assert_eq!(s.walks, 1);
        assert!(!s.plan(&mut m));
        assert!(!s.plan(&mut m));
        assert_eq!(s.walks, 1, "nothing changed: no walk");
        m.nodes
            .get_mut("a1")
            .unwrap()
            .devices
            .push("/dev/sdc".into());
        assert!(s.plan(&mut m), "a new device is a new job");
        assert_eq!(s.walks, 2);
        s.release();
        assert_eq!(attach_jobs(&rx).len(), 2);
    }

    /// The worker's end of a node's SDS removal changes no node, only what this side sent:
    /// the next plan walks, and sends the node's devices again.
    #[test]
    fn a_removal_done_is_planned_for_though_no_node_changed() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb"]);
        assert!(s.plan(&mut m));
        s.release();
        assert_eq!(attach_jobs(&rx).len(), 1);
        s.removal_done("a1", None);
        assert!(s.plan(&mut m));
        s.release();
        assert_eq!(attach_jobs(&rx), vec!["a1".to_string()]);
    }

    /// The worker's report that a1's SDS `s1` holds `/dev/sdb`.
    fn sdb_attached(sdc_connected: bool, error: Option<&str>) -> Report {
        Report::Node(NodeReport {
            agent_id: "a1".into(),
            sds_id: Some("s1".into()),
            attached: vec!["/dev/sdb".into()],
            sdc_connected,
            error: error.map(str::to_string),
        })
    }

    /// The health poll may see the SDC connect before the worker's own check: the node is
    /// ready, and the worker's "waiting for the SDC" leaves its `last_error` with it.
    #[test]
    fn an_sdc_seen_by_the_health_poll_clears_the_workers_wait() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb"]);
        s.plan(&mut m);
        s.on_report(
            &mut m,
            sdb_attached(false, Some("waiting for the SDC at 10.0.0.1")),
        );
        m.nodes.get_mut("a1").unwrap().sdc_connected = true;
        s.plan(&mut m);
        let n = &m.nodes["a1"];
        assert!(n.storage_ready);
        assert_eq!(n.last_error, None);
    }

    /// The attach jobs of nodes the worker has reported on nothing yet, as received.
    fn attach_jobs(rx: &crossbeam_channel::Receiver<Job>) -> Vec<String> {
        rx.try_iter()
            .filter_map(|j| match j {
                Job::Attach(w) => Some(w.agent_id.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The worker gets at most `MAX_UNREPORTED` nodes it has not reported on; each report,
    /// and each node that leaves, lets one more go. The others wait in the model: at
    /// 10,000 nodes all their wants at once were megabytes held for as long as the worker
    /// took to get through them.
    #[test]
    fn the_worker_holds_a_bounded_number_of_nodes_it_has_not_reported_on() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = ClusterModel::default();
        let n = MAX_UNREPORTED + 44;
        for i in 0..n {
            let mut node = model_with_node(&["/dev/sdb"]).nodes["a1"].clone();
            node.agent_id = format!("a{i}").into();
            node.hostname = format!("h{i}");
            m.nodes.insert(format!("a{i}"), node);
        }
        s.plan(&mut m);
        s.release();
        let first = attach_jobs(&rx);
        assert_eq!(first.len(), MAX_UNREPORTED);
        // The operator sees who waits (the waiting nodes have no storage state of their own).
        let queue = |with_worker, waiting| AttachQueue {
            with_worker,
            waiting,
        };
        assert_eq!(s.queue(), queue(MAX_UNREPORTED, 44));
        // Nothing more while none is reported on.
        s.plan(&mut m);
        s.release();
        assert_eq!(attach_jobs(&rx), Vec::<String>::new());
        assert_eq!(s.queue(), queue(MAX_UNREPORTED, 44));
        // A report (an error too) frees a place; so does a node that left.
        s.on_report(
            &mut m,
            Report::Node(NodeReport {
                agent_id: first[0].clone(),
                sds_id: None,
                attached: Vec::new(),
                sdc_connected: false,
                error: Some("the gateway refused".into()),
            }),
        );
        m.nodes.remove(&first[1]);
        s.plan(&mut m);
        s.release();
        let next = attach_jobs(&rx);
        assert_eq!(next.len(), 2, "{next:?}");
        assert!(next.iter().all(|a| !first.contains(a)));
        // The node the worker retries is with it still, not waiting.
        assert_eq!(s.queue(), queue(MAX_UNREPORTED, 42));
    }

    /// The plan runs after every batch: a ready node it finds as it left it must stay
    /// unwritten, or every batch gives every node a new revision, and the store's save and
    /// the parked plan requests look at all of them again (at 10,000 agents, most of the
    /// dispatcher's CPU).
    #[test]
    fn a_ready_node_is_not_written_by_a_plan_that_finds_nothing_to_do() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb"]);
        s.plan(&mut m);
        s.on_report(&mut m, sdb_attached(true, None));
        assert!(m.nodes["a1"].storage_ready);
        let mark = m.nodes.mark();
        let revision = m.nodes["a1"].revision.get();
        assert!(!s.plan(&mut m));
        assert_eq!(
            m.nodes["a1"].revision.get(),
            revision,
            "the node was written"
        );
        assert_eq!(m.nodes.written_since(mark), Some(&[][..]));
    }

    #[test]
    fn ready_once_every_device_is_attached_and_the_sdc_connected() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb", "/dev/sdc"]);
        s.plan(&mut m);
        let report = |attached: &[&str], sdc, error: Option<&str>| {
            Report::Node(NodeReport {
                agent_id: "a1".into(),
                sds_id: Some("s1".into()),
                attached: attached.iter().map(|d| d.to_string()).collect(),
                sdc_connected: sdc,
                error: error.map(str::to_string),
            })
        };
        s.on_report(
            &mut m,
            report(
                &["/dev/sdb", "/dev/sdc"],
                false,
                Some("waiting for the SDC"),
            ),
        );
        assert!(!m.nodes["a1"].storage_ready);
        assert_eq!(
            m.nodes["a1"].last_error.as_deref(),
            Some("waiting for the SDC")
        );
        s.on_report(&mut m, report(&["/dev/sdb", "/dev/sdc"], true, None));
        let n = &m.nodes["a1"];
        assert!(n.storage_ready && n.sdc_connected);
        assert_eq!(n.sds_id.as_deref(), Some("s1"));
        assert_eq!(n.last_error, None);
        assert_eq!(n.storage_intent, None);
        // A new disk reported later: not ready until it is attached too.
        m.nodes
            .get_mut("a1")
            .unwrap()
            .devices
            .push("/dev/sdd".into());
        assert!(s.plan(&mut m));
        assert!(!m.nodes["a1"].storage_ready);
    }

    #[test]
    fn a_new_device_of_a_running_node_is_attached_write_ahead_and_the_node_stays_running() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&["/dev/sdb"]);
        s.plan(&mut m);
        s.release();
        let _ = rx.try_recv();
        let attached = |list: &[&str]| {
            Report::Node(NodeReport {
                agent_id: "a1".into(),
                sds_id: Some("s1".into()),
                attached: list.iter().map(|d| d.to_string()).collect(),
                sdc_connected: true,
                error: None,
            })
        };
        s.on_report(&mut m, attached(&["/dev/sdb"]));
        let n = m.nodes.get_mut("a1").unwrap();
        n.phase = Phase::Running;
        assert!(n.storage_ready && n.storage_intent.is_none());
        n.devices.push("/dev/sdd".into());
        assert!(s.plan(&mut m), "the intent is saved before the job leaves");
        let intent = m.nodes["a1"].storage_intent.clone().expect("an intent");
        assert!(intent.contains("/dev/sdb,/dev/sdd"), "{intent}");
        assert!(rx.try_recv().is_err(), "nothing leaves before the save");
        s.release();
        let Ok(Job::Attach(want)) = rx.try_recv() else {
            panic!("no attach job");
        };
        let paths: Vec<&str> = want.devices.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["/dev/sdb", "/dev/sdd"]);
        s.on_report(&mut m, attached(&["/dev/sdb", "/dev/sdd"]));
        let n = &m.nodes["a1"];
        assert!(n.storage_ready && n.storage_intent.is_none());
        assert_eq!(n.phase, Phase::Running);
    }

    #[test]
    fn experimental_mode_waits_for_the_primary_to_pass_cluster_init() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp").experimental(true);
        let mut m = model_with_node(&["/dev/sdb"]);
        let mut primary = Node::new("p1", "mdm1", Persona::Primary, 0);
        primary.phase = Phase::ClusterInit;
        m.nodes.insert("p1", primary);
        assert!(!s.plan(&mut m));
        s.release();
        assert!(
            rx.try_recv().is_err(),
            "no gateway work before the cluster exists"
        );
        m.nodes.get_mut("p1").unwrap().phase = Phase::StorageAttach;
        assert!(s.plan(&mut m));
        s.release();
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn the_gateway_on_the_primary_is_announced_once_the_cluster_is_built() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp")
            .experimental(true)
            .gateway_on_primary(true);
        let mut m = model_with_node(&["/dev/sdb"]);
        let mut primary = Node::new("p1", "mdm1", Persona::Primary, 0);
        primary.ip = Some("10.0.0.21".into());
        primary.phase = Phase::StorageAttach;
        m.nodes.insert("p1", primary);
        assert!(s.plan(&mut m));
        s.release();
        assert!(matches!(rx.try_recv(), Ok(Job::Gateway(a)) if a == "10.0.0.21:443"));
        assert!(matches!(rx.try_recv(), Ok(Job::Attach(_))));
        s.plan(&mut m);
        s.release();
        assert!(rx.try_recv().is_err(), "announced once");
    }

    #[test]
    fn with_a_reboot_ahead_disks_join_only_from_storage_attach() {
        for (reboot_after_devices, phase, attached) in [
            (false, Phase::Environment, false),
            (false, Phase::RebootPrerequisites, false),
            (false, Phase::Packages, true),
            (false, Phase::Devices, true),
            (false, Phase::VolumeDriver, true),
            (true, Phase::Devices, false),
            (true, Phase::VolumeDriver, false),
            (true, Phase::RebootFinal, false),
            (true, Phase::StorageAttach, true),
            (true, Phase::Running, true),
        ] {
            let (tx, rx) = crossbeam_channel::unbounded();
            let mut s = StorageSide::new(tx, "pd", "sp").reboot_after_devices(reboot_after_devices);
            let mut m = model_with_node(&["/dev/sdb"]);
            let n = m.nodes.get_mut("a1").unwrap();
            n.phase = phase;
            n.progress = Some(phase);
            s.plan(&mut m);
            s.release();
            let sent = matches!(rx.try_recv(), Ok(Job::Attach(_)));
            assert_eq!(sent, attached, "{reboot_after_devices} {phase}");
        }
        // Relaunched (its phase `launching`) after reaching storage-attach: still due.
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp").reboot_after_devices(true);
        let mut m = model_with_node(&["/dev/sdb"]);
        let n = m.nodes.get_mut("a1").unwrap();
        n.phase = Phase::Launching;
        n.progress = Some(Phase::StorageAttach);
        s.plan(&mut m);
        s.release();
        assert!(matches!(rx.try_recv(), Ok(Job::Attach(_))));
    }

    #[test]
    fn a_host_back_from_its_reboot_gets_the_health_polled() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut s = StorageSide::new(tx, "pd", "sp");
        let mut m = model_with_node(&[]);
        m.nodes.get_mut("a1").unwrap().rebooting = true;
        s.plan(&mut m);
        s.release();
        while rx.try_recv().is_ok() {}
        m.nodes.get_mut("a1").unwrap().rebooting = false;
        s.plan(&mut m);
        s.release();
        assert!(std::iter::from_fn(|| rx.try_recv().ok()).any(|j| matches!(j, Job::Poll)));
    }

    #[test]
    fn without_a_worker_nothing_is_planned() {
        let mut s = StorageSide::default();
        let mut m = model_with_node(&["/dev/sdb"]);
        assert!(!s.plan(&mut m));
        assert!(!m.nodes["a1"].storage_ready);
    }
}
