//! Executors follow the scheduler. An executor learns the scheduler's REST address from its
//! launch (`STORAGE_SCHEDULER_URL`), but a scheduler that fails over may come back on another
//! host or port, and Mesos keeps the executors running meanwhile. So after every SUBSCRIBED
//! (first subscription and every re-subscription) the dispatcher tells each executor of a
//! live launch where it is now, with a framework MESSAGE (v1 scheduler call `MESSAGE`:
//! master -> agent -> executor event `MESSAGE`).
//!
//! The data is `{"scheduler_url":"https://host:port","scheduler_fingerprint":"sha256:..."}`:
//! a scheduler that failed over presents a new certificate, and executors accept only the
//! one they were told of. It carries no secret, since the executor already holds its own. Framework messages are best effort in Mesos (an agent
//! drops one for an executor that is not registered yet, a master in trouble refuses the
//! call), and an executor that missed its message would poll a dead address until the next
//! subscription. So an executor of a live launch that has been quiet for longer than it ever
//! is while it can reach us is told again ([`Reannounce`], pure), then again after a gap that
//! doubles, with at most [`PER_SWEEP`] messages per [`SWEEP_MS`]: one at work after
//! [`STALE_MS`], an idle one in `running` after its longest plan poll gap and the same margin
//! ([`running_stale_ms`]). Idle ones are told too: each asks for its plan every `idle_poll_s`,
//! so its silence means it lost us, and one that never hears of the new certificate fails its
//! node once the executor's pin grace runs out (`executor/src/node/endpoint.rs`).

use super::*;
use crate::scheduler::master::sender::ExecutorMessage;
use std::collections::HashMap;

/// Quiet for this long, an executor at work may be polling an address we no longer have:
/// one at work long-polls its plan, and a poll is answered within 50 s.
pub(super) const STALE_MS: u64 = 75_000;
/// What [`STALE_MS`] adds to the longest wait of a call that reaches us (a plan long poll,
/// answered within 50 s).
const STALE_MARGIN_MS: u64 = 25_000;

/// Quiet for this long, an idle executor in `running` has lost us: it asks for its plan every
/// `idle_poll_s` give or take a fifth. Never less than [`STALE_MS`], which the sweep's kept
/// deadline counts on.
pub(super) fn running_stale_ms(idle_poll_s: u64) -> u64 {
    (idle_poll_s.saturating_mul(1_200) + STALE_MARGIN_MS).max(STALE_MS)
}

/// The gap between two messages to one quiet executor doubles up to this.
pub(super) const MAX_GAP_MS: u64 = 30 * 60_000;
/// The rate bound: at most this many messages per sweep, sweeps at least `SWEEP_MS` apart.
pub(super) const PER_SWEEP: usize = 100;
pub(super) const SWEEP_MS: u64 = 5_000;

/// An executor of a live launch that is expected to talk to us.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quiet<'a> {
    pub agent: &'a str,
    pub launched_ms: u64,
    /// Its last request to this scheduler, if any.
    pub heard_ms: Option<u64>,
    /// How long it may be quiet while it can reach us (at least [`STALE_MS`]).
    pub stale_ms: u64,
}

#[derive(Debug, Clone, Copy)]
struct Told {
    /// The launch it was told about (a new launch on the agent starts afresh).
    launched_ms: u64,
    at_ms: u64,
    /// Until the next message, unless it is heard from meanwhile.
    gap_ms: u64,
}

/// Pure: which quiet executors get the address again, and when to look next.
#[derive(Debug, Default)]
pub(super) struct Reannounce {
    /// When every executor was last told (SUBSCRIBED).
    announced_ms: u64,
    /// Agent -> the last message sent to its executor since then.
    told: HashMap<String, Told>,
    next_sweep_ms: u64,
    /// From the last sweep: no executor is due before this (`None`: none was watched, or
    /// the counts started again). Sound because anything that makes an executor due
    /// sooner (a new launch, a request after a message) happens after that sweep, and is
    /// due `STALE_MS` after it at the earliest; so a sweep of every executor is needed
    /// only when this has passed, not after every batch of inputs.
    next_due_ms: Option<u64>,
}

impl Reannounce {
    /// Every executor was just told (a SUBSCRIBED): the counts start again.
    pub(super) fn announced_to_all(&mut self, now: u64) {
        self.announced_ms = now;
        self.told.clear();
        self.next_due_ms = None;
    }

    /// The message to `q` that is still in force: none once it has been heard from since.
    fn told(&self, q: &Quiet) -> Option<Told> {
        self.told
            .get(q.agent)
            .filter(|t| t.launched_ms == q.launched_ms && q.heard_ms.is_none_or(|h| h < t.at_ms))
            .copied()
    }

    /// When `q` is due a message, and the gap after that one.
    fn due(&self, q: &Quiet) -> (u64, u64) {
        match self.told(q) {
            Some(t) => (t.at_ms.saturating_add(t.gap_ms), t.gap_ms),
            None => {
                let last_sign = q
                    .launched_ms
                    .max(q.heard_ms.unwrap_or(0))
                    .max(self.announced_ms);
                (last_sign.saturating_add(q.stale_ms), q.stale_ms)
            }
        }
    }

    /// When the first executor is due, exactly (`None`: no executor to watch): what
    /// [`Reannounce::next_sweep`] is checked against.
    #[cfg(test)]
    fn deadline<'a>(&self, quiet: impl Iterator<Item = Quiet<'a>>) -> Option<u64> {
        quiet
            .map(|q| self.due(&q).0)
            .min()
            .map(|t| t.max(self.next_sweep_ms))
    }

    /// When to sweep next as the last sweep left it, without looking at every executor
    /// (never later than [`Reannounce::deadline`]; `None`: nothing was watched then).
    pub(super) fn next_sweep(&self) -> Option<u64> {
        self.next_due_ms.map(|t| t.max(self.next_sweep_ms))
    }

    /// The agents whose executors get the address again now (at most [`PER_SWEEP`]).
    pub(super) fn sweep<'a>(
        &mut self,
        quiet: impl Iterator<Item = Quiet<'a>>,
        now: u64,
    ) -> Vec<String> {
        if now < self.next_sweep_ms || self.next_due_ms.is_some_and(|t| now < t) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let (mut watched, mut next_due) = (false, now.saturating_add(STALE_MS));
        for q in quiet {
            watched = true;
            let (at, gap) = self.due(&q);
            if at > now || out.len() == PER_SWEEP {
                next_due = next_due.min(at);
                continue;
            }
            next_due = next_due.min(now.saturating_add(gap.saturating_mul(2).min(MAX_GAP_MS)));
            self.told.insert(
                q.agent.to_string(),
                Told {
                    launched_ms: q.launched_ms,
                    at_ms: now,
                    gap_ms: gap.saturating_mul(2).min(MAX_GAP_MS),
                },
            );
            out.push(q.agent.to_string());
        }
        if !out.is_empty() {
            self.next_sweep_ms = now + SWEEP_MS;
        }
        self.next_due_ms = watched.then_some(next_due);
        out
    }
}

/// The MESSAGE data announcing the executor API's URL and the certificate's fingerprint.
pub(super) fn announcement(api_url: &str, fingerprint: &str) -> Vec<u8> {
    use crate::contract::env::{ANNOUNCED_FINGERPRINT, ANNOUNCED_SCHEDULER_URL};
    serde_json::json!({ ANNOUNCED_SCHEDULER_URL: api_url, ANNOUNCED_FINGERPRINT: fingerprint })
        .to_string()
        .into_bytes()
}

/// The MESSAGE data of a nudge: the executor's plan is now at `version`.
pub(super) fn nudge(version: u64) -> Vec<u8> {
    use crate::contract::env::NUDGE_PLAN_VERSION;
    serde_json::json!({ NUDGE_PLAN_VERSION: version })
        .to_string()
        .into_bytes()
}

/// The executors of live launches, what we heard of them and how long each may be quiet.
fn quiet_executors<'a>(
    model: &'a ClusterModel,
    executors: &'a ExecutorApi,
) -> impl Iterator<Item = Quiet<'a>> {
    let idle = running_stale_ms(executors.idle_poll_s());
    model.active_tasks().map(move |(n, t)| Quiet {
        agent: &n.agent_id,
        launched_ms: t.launched_at_ms,
        heard_ms: executors.heard_from(&n.agent_id),
        stale_ms: if n.phase == Phase::Running {
            idle
        } else {
            STALE_MS
        },
    })
}

impl Dispatcher {
    /// One MESSAGE per executor of a live launch, carrying this scheduler's address.
    pub(super) fn announce_address(&mut self) {
        self.reannounce.announced_to_all(self.clock.now_ms());
        // Queued straight from the model: after a restart this is one MESSAGE per node.
        let targets = self
            .state
            .model
            .active_tasks()
            .map(|(n, t)| (n.agent_id.clone(), t.executor_id().into_owned()));
        let told = send_address(
            &mut self.pending,
            &self.ctx,
            framework_id_shared(&self.state.model),
            targets,
        );
        if told > 0 {
            info!(
                "telling {told} executor(s) this scheduler is at {} ({})",
                self.ctx.api_url, self.ctx.fingerprint
            );
        }
    }

    /// When an executor may next be due the address again (while subscribed).
    pub(super) fn reannounce_deadline(&self) -> Option<u64> {
        if !self.subscribed {
            return None;
        }
        self.reannounce.next_sweep()
    }

    /// The address again to executors quiet for too long (rate-bounded).
    pub(super) fn reannounce_to_quiet(&mut self) {
        if !self.subscribed {
            return;
        }
        let now = self.clock.now_ms();
        let quiet = quiet_executors(&self.state.model, &self.executors);
        let agents = self.reannounce.sweep(quiet, now);
        if agents.is_empty() {
            return;
        }
        let targets: Vec<(Arc<str>, String)> = agents
            .into_iter()
            .filter_map(|a| {
                let n = self.state.model.nodes.get(a.as_str())?;
                let executor = n.task.as_ref()?.executor_id().into_owned();
                Some((n.agent_id.clone(), executor))
            })
            .collect();
        let hosts: Vec<&str> = targets
            .iter()
            .take(5)
            .filter_map(|(a, _)| Some(self.state.model.nodes.get(a)?.hostname.as_str()))
            .collect();
        info!(
            "telling {} quiet executor(s) again that this scheduler is at {} ({}{})",
            targets.len(),
            self.ctx.api_url,
            hosts.join(", "),
            if targets.len() > hosts.len() {
                ", ..."
            } else {
                ""
            }
        );
        let framework_id = framework_id_shared(&self.state.model);
        send_address(
            &mut self.pending,
            &self.ctx,
            framework_id,
            targets.into_iter(),
        );
    }

    /// The nudges owed to idle executors whose plans moved on in this batch. Mesos delivers
    /// a MESSAGE at most once: an executor that misses one asks again on its own slow timer.
    pub(super) fn send_nudges(&mut self) {
        let nudges = self.executors.take_nudges();
        if nudges.is_empty() {
            return;
        }
        let hosts: Vec<&str> = nudges
            .iter()
            .take(5)
            .filter_map(|n| Some(self.state.model.nodes.get(&n.agent_id)?.hostname.as_str()))
            .collect();
        debug!(
            "telling {} idle executor(s) their plan changed ({}{})",
            nudges.len(),
            hosts.join(", "),
            if nudges.len() > hosts.len() {
                ", ..."
            } else {
                ""
            }
        );
        let framework_id = framework_id_shared(&self.state.model);
        for n in nudges {
            self.pending.push_message(ExecutorMessage {
                framework_id: framework_id.clone(),
                agent_id: n.agent_id,
                executor_id: n.executor_id,
                data: nudge(n.version).into(),
            });
        }
    }
}

/// The framework id, once for a batch of MESSAGEs.
fn framework_id_shared(model: &ClusterModel) -> Option<Arc<str>> {
    model.framework_id.as_deref().map(Arc::from)
}

/// Queues the address MESSAGE to each (agent, executor); how many. It takes the queue and
/// the context rather than the dispatcher so that `targets` can still borrow the model.
fn send_address(
    pending: &mut pending::Pending,
    ctx: &LaunchContext,
    framework_id: Option<Arc<str>>,
    targets: impl Iterator<Item = (Arc<str>, String)>,
) -> usize {
    let data: Arc<[u8]> = announcement(&ctx.api_url, &ctx.fingerprint).into();
    let mut told = 0;
    for (agent_id, executor_id) in targets {
        pending.push_message(ExecutorMessage {
            framework_id: framework_id.clone(),
            agent_id,
            executor_id,
            data: data.clone(),
        });
        told += 1;
    }
    told
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(agent: &str, heard_ms: Option<u64>) -> Quiet<'_> {
        Quiet {
            agent,
            launched_ms: 0,
            heard_ms,
            stale_ms: STALE_MS,
        }
    }

    #[test]
    fn a_quiet_executor_is_told_again_after_stale_then_after_a_doubling_gap() {
        let mut r = Reannounce::default();
        r.announced_to_all(10_000);
        let quiet = [q("a1", None)];
        assert_eq!(r.deadline(quiet.into_iter()), Some(10_000 + STALE_MS));
        assert!(r.sweep(quiet.into_iter(), 10_000 + STALE_MS - 1).is_empty());
        let t1 = 10_000 + STALE_MS;
        assert_eq!(r.sweep(quiet.into_iter(), t1), vec!["a1".to_string()]);
        assert_eq!(r.deadline(quiet.into_iter()), Some(t1 + 2 * STALE_MS));
        assert!(r.sweep(quiet.into_iter(), t1 + 2 * STALE_MS - 1).is_empty());
        let t2 = t1 + 2 * STALE_MS;
        assert_eq!(r.sweep(quiet.into_iter(), t2).len(), 1);
        assert_eq!(r.deadline(quiet.into_iter()), Some(t2 + 4 * STALE_MS));
        // The gap stops growing at its cap.
        let mut t = t2;
        for _ in 0..20 {
            t = r.deadline(quiet.into_iter()).unwrap();
            assert_eq!(r.sweep(quiet.into_iter(), t).len(), 1);
        }
        assert_eq!(r.deadline(quiet.into_iter()), Some(t + MAX_GAP_MS));
    }

    #[test]
    fn an_executor_heard_from_is_left_alone_and_its_count_starts_again() {
        let mut r = Reannounce::default();
        r.announced_to_all(0);
        assert!(r.sweep([q("a1", None)].into_iter(), STALE_MS).len() == 1);
        // It reached us after the message: quiet again only STALE_MS after that request.
        let heard = STALE_MS + 500;
        let talking = [q("a1", Some(heard))];
        assert_eq!(r.deadline(talking.into_iter()), Some(heard + STALE_MS));
        assert!(r
            .sweep(talking.into_iter(), heard + STALE_MS - 1)
            .is_empty());
        assert_eq!(r.sweep(talking.into_iter(), heard + STALE_MS).len(), 1);
        // A new launch on the agent is a new executor: the count starts from its launch.
        let relaunched = [Quiet {
            agent: "a1",
            launched_ms: 500_000,
            heard_ms: Some(heard),
            stale_ms: STALE_MS,
        }];
        assert_eq!(r.deadline(relaunched.into_iter()), Some(500_000 + STALE_MS));
        // A new subscription told everyone.
        r.announced_to_all(900_000);
        assert_eq!(r.deadline(relaunched.into_iter()), Some(900_000 + STALE_MS));
    }

    /// An idle executor asks every idle poll, up to a fifth late: quiet past that and the
    /// margin it has lost us; a short poll is still given [`STALE_MS`].
    #[test]
    fn an_idle_executor_is_quiet_too_long_after_its_longest_poll_gap() {
        assert_eq!(running_stale_ms(60), 72_000 + STALE_MARGIN_MS);
        assert_eq!(running_stale_ms(300), 360_000 + STALE_MARGIN_MS);
        assert_eq!(running_stale_ms(5), STALE_MS);
        let mut r = Reannounce::default();
        r.announced_to_all(0);
        let idle = [Quiet {
            stale_ms: running_stale_ms(60),
            ..q("a1", Some(1_000))
        }];
        assert!(r.sweep(idle.into_iter(), 1_000 + 72_000).is_empty());
        assert_eq!(
            r.deadline(idle.into_iter()),
            Some(1_000 + running_stale_ms(60))
        );
        assert_eq!(
            r.sweep(idle.into_iter(), 1_000 + running_stale_ms(60)),
            vec!["a1"]
        );
    }

    #[test]
    fn the_remembered_next_sweep_is_never_later_than_the_exact_one() {
        let mut r = Reannounce::default();
        r.announced_to_all(0);
        assert_eq!(r.next_sweep(), None, "nothing watched yet");
        let mut quiet = vec![q("a1", None), q("a2", Some(40_000))];
        assert!(r.sweep(quiet.clone().into_iter(), 1_000).is_empty());
        assert_eq!(r.next_sweep(), Some(STALE_MS));
        // Until then no executor is looked at: a sweep is a no-op.
        assert!(r.sweep(std::iter::empty(), STALE_MS - 1).is_empty());
        assert_eq!(r.sweep(quiet.clone().into_iter(), STALE_MS), vec!["a1"]);
        assert_eq!(r.next_sweep(), r.deadline(quiet.clone().into_iter()));
        // A launch after that sweep is due STALE_MS after it at the earliest.
        quiet.push(Quiet {
            agent: "a3",
            launched_ms: STALE_MS + 10,
            heard_ms: None,
            stale_ms: STALE_MS,
        });
        let (remembered, exact) = (r.next_sweep(), r.deadline(quiet.clone().into_iter()));
        assert!(remembered <= exact, "{remembered:?} > {exact:?}");
        let mut now = STALE_MS;
        for _ in 0..10 {
            now = r.next_sweep().unwrap();
            r.sweep(quiet.clone().into_iter(), now);
            assert!(r.next_sweep() <= r.deadline(quiet.clone().into_iter()));
        }
        assert!(now > 4 * STALE_MS, "{now}");
        // With nothing at work, nothing to wake for.
        r.sweep(std::iter::empty(), now + MAX_GAP_MS);
        assert_eq!(r.next_sweep(), None);
    }

    #[test]
    fn messages_are_bounded_per_sweep_and_sweeps_are_spaced() {
        let names: Vec<String> = (0..1_000).map(|i| format!("a{i}")).collect();
        let quiet = || names.iter().map(|a| q(a, None));
        let mut r = Reannounce::default();
        let mut now = STALE_MS;
        let mut told = std::collections::BTreeSet::new();
        let mut sweeps = 0;
        while told.len() < names.len() {
            let batch = r.sweep(quiet(), now);
            assert_eq!(batch.len(), PER_SWEEP, "at {now}");
            told.extend(batch);
            assert!(r.sweep(quiet(), now + SWEEP_MS - 1).is_empty(), "spaced");
            if told.len() < names.len() {
                assert_eq!(r.deadline(quiet()), Some(now + SWEEP_MS));
            }
            now += SWEEP_MS;
            sweeps += 1;
        }
        assert_eq!(sweeps, names.len() / PER_SWEEP);
    }
}
