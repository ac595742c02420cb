//! Offers: one launch per uncovered agent (saved before its ACCEPT leaves), declines for the rest.

use super::*;
use crate::mesos::types::{Offer, Resource, TaskInfo};
use crate::scheduler::model::{Layout, Persona};

impl Dispatcher {
    pub(super) fn on_offers(&mut self, offers: Vec<crate::mesos::types::Offer>, now: u64) {
        self.follow_hosts(
            offers
                .iter()
                .map(|o| (o.agent_id.value.as_str(), o.hostname.as_str())),
        );
        let decisions = placement::decide(&self.state.model, &offers, &self.settings, now);
        // An offer names the executors running on its agent: ours that are not the
        // current launch (an old task ended, its executor did not) are shut down.
        for o in &offers {
            for e in &o.executor_ids {
                self.shutdown_executor(&e.value, &o.agent_id.value);
            }
        }
        let before = self.state.clone();
        let mut accepts = Vec::new();
        let mut declines: BTreeMap<u64, (Vec<OfferID>, f64)> = BTreeMap::new();
        for (offer, decision) in offers.into_iter().zip(decisions) {
            match decision {
                Decision::Launch {
                    persona,
                    layout,
                    task_resources,
                    executor_resources,
                } => {
                    match self.record_launch(
                        &offer,
                        persona,
                        layout,
                        task_resources,
                        executor_resources,
                        now,
                    ) {
                        Some(task) => accepts.push((offer.id, task)),
                        None => declines
                            .entry(5000)
                            .or_insert((Vec::new(), 5.0))
                            .0
                            .push(offer.id),
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
                    declines
                        .entry((refuse_seconds * 1000.0) as u64)
                        .or_insert((Vec::new(), refuse_seconds))
                        .0
                        .push(offer.id);
                }
            }
        }

        if !accepts.is_empty() {
            // Write ahead: the launches must be on disk before any ACCEPT leaves.
            if let Err(e) = self.save() {
                error!("cannot save state before launching ({e}); declining these offers instead");
                self.state = before;
                self.task_index = index_tasks(&self.state.model);
                for (id, _) in accepts.drain(..) {
                    declines.entry(5000).or_insert((Vec::new(), 5.0)).0.push(id);
                }
            }
        }
        self.push_offer_calls(accepts, declines);
        self.touch_view();
    }

    /// Records a launch on the offer's agent in the model (new task id, secret, sequence)
    /// and returns its TaskInfo; `None` when no secret could be made.
    fn record_launch(
        &mut self,
        offer: &Offer,
        persona: Persona,
        layout: Layout,
        task_resources: Vec<Resource>,
        executor_resources: Vec<Resource>,
        now: u64,
    ) -> Option<TaskInfo> {
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
        let (task_id, executor_id) = launch::ids(&offer.hostname, seq);
        info!(
            "agent {} ({}): launching {persona} executor, task {task_id}",
            offer.hostname, agent
        );
        self.grant_secret(&executor_id, secret.expose());
        // The secret of the launch this one replaces is of no use any more.
        let replaced = self
            .state
            .model
            .nodes
            .get_mut(&agent)
            .and_then(|n| n.task.take());
        if let Some(old) = replaced {
            self.revoke_secret(&old.executor_id);
            self.task_index.remove(&old.task_id);
        }
        let node = self
            .state
            .model
            .nodes
            .entry(agent.clone())
            .or_insert_with(|| Node::new(&agent, &offer.hostname, persona, now));
        self.task_index.insert(task_id.clone(), agent.clone());
        node.hostname = offer.hostname.to_string();
        if let Some(ip) = offer.url.as_ref().and_then(|u| u.address.ip.as_ref()) {
            node.ip = Some(ip.to_string());
        }
        node.persona = persona;
        node.layout = layout;
        node.phase = Phase::Launching;
        node.retry_after_ms = None;
        node.updated_ms = now;
        node.task = Some(TaskRecord {
            task_id,
            executor_id,
            state: TaskState::Staging,
            launched_at_ms: now,
            running_since_ms: None,
        });
        Some(task)
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
                }],
                filters: Some(Filters {
                    refuse_seconds: Some(5.0),
                }),
            });
            self.metrics
                .offers_accepted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
