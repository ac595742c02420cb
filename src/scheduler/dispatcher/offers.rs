//! Offers: one launch per uncovered agent (saved before its ACCEPT leaves), declines for the rest.

use super::offer_backlog;
use super::*;
use crate::mesos::types::{Offer, Resource, TaskInfo};
use crate::scheduler::model::{Layout, Persona};
use crate::secret::Token;

/// What a launch changed, to put back when its save fails: the node as it was (`None`: the
/// launch made it).
struct Undo {
    agent: String,
    /// The node before, its launch's secret included (shared: the launch's write copies it).
    node: Option<Arc<Node>>,
}

/// How long an agent whose launch could not be recorded or saved is refused (ms is the
/// key of the grouping below): long enough to not spin, short enough to retry soon.
const LAUNCH_FAILED_REFUSE_SECS: f64 = 5.0;

/// The calls answering one batch of offers.
#[derive(Default)]
struct OfferAnswer {
    accepts: Vec<(OfferID, TaskInfo)>,
    undo: Vec<Undo>,
    /// Offers to decline, grouped by refuse time in ms (with that time in seconds).
    declines: BTreeMap<u64, (Vec<OfferID>, f64)>,
}

impl OfferAnswer {
    fn decline(&mut self, id: OfferID, refuse_seconds: f64) {
        self.declines
            .entry((refuse_seconds * 1000.0) as u64)
            .or_insert((Vec::new(), refuse_seconds))
            .0
            .push(id);
    }
}

impl Dispatcher {
    /// Answers waiting offers while the launch window has room (see `offer_backlog.rs`).
    pub(super) fn work_offer_backlog(&mut self) {
        loop {
            let room = offer_backlog::room(self.accepts_in_flight);
            if room == 0 || self.offer_backlog.is_empty() {
                return;
            }
            let (offers, errors) = self.offer_backlog.take(room);
            for e in errors {
                warn!("skipping an offer that does not decode: {e}");
            }
            if !offers.is_empty() {
                let now = self.clock.now_ms();
                self.on_offers(offers, now, true);
            }
        }
    }

    /// An OFFERS event kept encoded (protobuf): what fits waits for the launch window, the
    /// rest is answered now, decoded a window's worth at a time.
    pub(super) fn admit_encoded_offers(&mut self, offers: crate::mesos::offers::RawOffers) {
        let mut rest = self.offer_backlog.admit_encoded(offers);
        while !rest.is_empty() {
            let offers = rest
                .take_decoded(offer_backlog::LAUNCH_WINDOW)
                .into_iter()
                .filter_map(|o| {
                    o.map_err(|e| warn!("skipping an offer that does not decode: {e}"))
                        .ok()
                })
                .collect();
            self.answer_overflow(offers);
        }
    }

    /// The offers of a decoded OFFERS event (JSON), as [`Self::admit_encoded_offers`].
    pub(super) fn admit_decoded_offers(&mut self, offers: Vec<Offer>) {
        let rest = self.offer_backlog.admit_decoded(offers);
        self.answer_overflow(rest);
    }

    /// Offers beyond what may wait for the launch window: answered now, a launch among them
    /// declined for a moment (see `offer_backlog.rs`).
    fn answer_overflow(&mut self, offers: Vec<Offer>) {
        if !offers.is_empty() {
            let now = self.clock.now_ms();
            self.on_offers(offers, now, false);
        }
    }

    /// Answers offers; with `may_launch` false, what would be a launch is declined for
    /// [`offer_backlog::WINDOW_FULL_REFUSE_SECS`].
    pub(super) fn on_offers(&mut self, offers: Vec<Offer>, now: u64, may_launch: bool) {
        self.follow_hosts(
            offers
                .iter()
                .map(|o| (o.agent_id.value.as_str(), o.hostname.as_str())),
        );
        let decisions = self.decide(&offers, now, may_launch);
        // An offer names the executors running on its agent: ours that are not the
        // current launch (an old task ended, its executor did not) are shut down.
        for o in &offers {
            for e in &o.executor_ids {
                self.shutdown_executor(&e.value, &o.agent_id.value);
            }
        }
        let seq_before = self.state.model.launch_seq;
        let mut answer = self.apply_decisions(offers, decisions, now);
        if !answer.accepts.is_empty() {
            // Write ahead: the launches must be on disk before any ACCEPT leaves.
            if let Err(e) = self.save() {
                error!("cannot save state before launching ({e}); declining these offers instead");
                self.undo_launches(std::mem::take(&mut answer.undo), seq_before);
                for (id, _) in std::mem::take(&mut answer.accepts) {
                    answer.decline(id, LAUNCH_FAILED_REFUSE_SECS);
                }
            }
        }
        self.push_offer_calls(answer.accepts, answer.declines);
        self.touch_view();
    }

    /// A decision per offer: with the launch window full, only what needs no launch.
    fn decide(&self, offers: &[Offer], now: u64, may_launch: bool) -> Vec<Decision> {
        if may_launch {
            return placement::decide(&self.state.model, offers, &self.settings, now);
        }
        placement::screen_declines(&self.state.model, offers, now)
            .into_iter()
            .map(|d| {
                d.unwrap_or(Decision::Decline {
                    reason: "the launch window is full".into(),
                    refuse_seconds: offer_backlog::WINDOW_FULL_REFUSE_SECS,
                })
            })
            .collect()
    }

    /// Records each launch in the model (not yet saved) and sorts the offers into ACCEPTs and
    /// DECLINEs grouped by their refuse time.
    fn apply_decisions(
        &mut self,
        offers: Vec<Offer>,
        decisions: Vec<Decision>,
        now: u64,
    ) -> OfferAnswer {
        let mut answer = OfferAnswer::default();
        for (offer, decision) in offers.into_iter().zip(decisions) {
            match decision {
                Decision::Launch {
                    persona,
                    layout,
                    task_resources,
                    executor_resources,
                } => {
                    let resources = (task_resources, executor_resources);
                    match self.record_launch(&offer, persona, layout, resources, now) {
                        Some((task, u)) => {
                            answer.accepts.push((offer.id, task));
                            answer.undo.push(u);
                        }
                        None => answer.decline(offer.id, LAUNCH_FAILED_REFUSE_SECS),
                    }
                }
                Decision::Decline {
                    reason,
                    refuse_seconds,
                } => {
                    let line = || format!("(refuse {refuse_seconds} s)");
                    if self.debug_tally.note(now, "offer declined", line) {
                        debug!(
                            "declining offer {} for {refuse_seconds} s: {reason}",
                            offer.id.value
                        );
                    }
                    answer.decline(offer.id, refuse_seconds);
                }
            }
        }
        answer
    }

    /// Puts back what launches changed, newest first (their save failed, so no ACCEPT
    /// leaves): nodes, executor secrets (published again), launch sequence.
    fn undo_launches(&mut self, undo: Vec<Undo>, seq_before: u64) {
        for u in undo.into_iter().rev() {
            let launched = self
                .state
                .model
                .nodes
                .get_mut(&u.agent)
                .and_then(|n| n.task.take());
            if let Some(mut task) = launched {
                self.revoke_secret(&mut task);
            }
            match u.node {
                Some(node) => {
                    if let Some(task) = &node.task {
                        self.publish_grant(task);
                    }
                    self.state.model.nodes.insert_shared(node);
                }
                None => {
                    self.state.model.nodes.remove(&u.agent);
                    if let Some(unmanaged) = &mut self.unmanaged_agents {
                        unmanaged.insert(u.agent);
                    }
                }
            }
        }
        self.state.model.launch_seq = seq_before;
    }

    /// Records a launch on the offer's agent in the model (new task id, secret, sequence)
    /// and returns its TaskInfo with what to put back should its save fail; `None` when no
    /// secret could be made.
    fn record_launch(
        &mut self,
        offer: &Offer,
        persona: Persona,
        layout: Layout,
        (task_resources, executor_resources): (Vec<Resource>, Vec<Resource>),
        now: u64,
    ) -> Option<(TaskInfo, Undo)> {
        let secret = match random_token() {
            Ok(s) => s,
            Err(e) => {
                error!(
                    "agent {}: cannot make an executor secret: {e}",
                    offer.hostname
                );
                return None;
            }
        };
        self.state.model.launch_seq += 1;
        let seq = self.state.model.launch_seq;
        let agent = offer.agent_id.value.to_string();
        self.refresh_executor_digest(&offer.hostname);
        let task = launch::task_info(
            &self.ctx,
            launch::Launch {
                agent_id: &agent,
                hostname: &offer.hostname,
                seq,
                persona,
                task_resources,
                executor_resources,
                secret: secret.expose(),
            },
        );
        let (task_id, executor_id) = crate::contract::ids::make(&offer.hostname, seq);
        info!(
            "agent {} ({}): launching {persona} executor, task {task_id}",
            offer.hostname, agent
        );
        if let Some(unmanaged) = &mut self.unmanaged_agents {
            unmanaged.remove(&agent);
        }
        let undo = Undo {
            agent: agent.clone(),
            node: self.state.model.nodes.get_shared(&agent).cloned(),
        };
        // The secret of the launch this one replaces is of no use any more.
        let replaced = self
            .state
            .model
            .nodes
            .get_mut(&agent)
            .and_then(|n| n.task.take());
        if let Some(mut old) = replaced {
            self.revoke_secret(&mut old);
        }
        let launch = TaskRecord::new(&task_id, &executor_id, TaskState::Staging, now)
            .with_secret(Token::new(&secret));
        self.publish_grant(&launch);
        self.put_launch_on_node(offer, persona, layout, launch, now);
        Some((task, undo))
    }

    /// The node of the offer's agent (made when new) now runs `launch`.
    fn put_launch_on_node(
        &mut self,
        offer: &Offer,
        persona: Persona,
        layout: Layout,
        launch: TaskRecord,
        now: u64,
    ) {
        let agent = offer.agent_id.value.to_string();
        let nodes = &mut self.state.model.nodes;
        if !nodes.contains_key(&agent) {
            nodes.insert(
                agent.clone(),
                Node::new(&agent, &offer.hostname, persona, now),
            );
        }
        let Some(node) = nodes.get_mut(&agent) else {
            unreachable!("inserted above")
        };
        node.hostname = offer.hostname.to_string();
        if let Some(ip) = offer.url.as_ref().and_then(|u| u.address.ip.as_ref()) {
            node.ip = Some(ip.to_string().into());
        }
        node.persona = persona;
        node.layout = layout.into();
        node.executor_sha256 = self.ctx.executor_sha256.as_deref().map(Into::into);
        node.phase = Phase::Launching;
        node.retry_after_ms = None;
        node.updated_ms = now;
        let executor_id = launch.executor_id().into_owned();
        node.task = Some(launch);
        let agent = node.agent_id.clone();
        self.executors.launched(&executor_id, agent);
    }

    /// The ACCEPT of each launch and one DECLINE per refusal period.
    fn push_offer_calls(
        &mut self,
        accepts: Vec<(OfferID, TaskInfo)>,
        declines: BTreeMap<u64, (Vec<OfferID>, f64)>,
    ) {
        for (offer_id, task) in accepts {
            let mut c = self.call(call::Type::Accept);
            c.accept = Some(call::Accept {
                offer_ids: vec![offer_id],
                operations: vec![offer::Operation {
                    r#type: Some(offer::operation::Type::Launch),
                    launch: Some(offer::operation::Launch {
                        task_infos: vec![task],
                    }),
                    ..Default::default()
                }],
                // What the launch leaves of the agent is of no use: refused like a covered
                // agent's offer. Re-offered after 5 s (the old filter), a 10,000-agent wave
                // came back as 10,000 offers to queue and decline; a node that
                // loses its launch brings a REVIVE, which clears the filter (`offer_mode.rs`).
                filters: Some(Filters {
                    refuse_seconds: Some(placement::REFUSE_COVERED_SECS),
                }),
            });
            self.metrics
                .offers_accepted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.accepts_in_flight += 1;
            self.pending.push(c);
        }
        for (_, (offer_ids, refuse)) in declines {
            self.metrics
                .offers_declined
                .fetch_add(offer_ids.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let mut c = self.call(call::Type::Decline);
            c.decline = Some(call::Decline {
                offer_ids,
                filters: Some(Filters {
                    refuse_seconds: Some(refuse),
                }),
            });
            self.pending.push(c);
        }
    }
}

impl Dispatcher {
    /// Launches from now on name the digest of `binary`, the one the REST server serves.
    pub fn set_executor_binary(
        &mut self,
        binary: Arc<crate::scheduler::executor_binary::ExecutorBinary>,
    ) {
        self.executor_binary = Some(binary);
    }

    /// The digest of the binary served now (read again only when the file changed). When it
    /// cannot be read, the launch goes ahead with no digest and its command refuses to run.
    fn refresh_executor_digest(&mut self, host: &str) {
        let Some(binary) = &self.executor_binary else {
            return;
        };
        let digest = match binary.get() {
            Ok(b) => {
                self.ctx.executor_gzipped = b.gzipped().is_some();
                Some(b.sha256().to_owned())
            }
            Err(e) => {
                error!("agent {host}: the executor binary cannot be read, the launch will not run: {e}");
                None
            }
        };
        if let Some(d) = digest
            .as_deref()
            .filter(|d| self.ctx.executor_sha256.as_deref() != Some(*d))
        {
            info!("agent {host}: launches check the fetched executor binary against SHA-256 {d}");
        }
        self.ctx.executor_sha256 = digest;
    }
}
