//! Offers the master takes back. Mesos rescinds an offer when its agent is removed, and when
//! it was held longer than `--offer_timeout`: the RESCIND event and the framework's ACCEPT of
//! that offer can cross on the wire. The master then finds the ACCEPT's offer invalid and
//! answers each task of its LAUNCH with TASK_DROPPED (TASK_LOST for a framework that is not
//! partition-aware), SOURCE_MASTER, REASON_INVALID_OFFERS (`accept` does that part); the
//! offer's resources went back to the allocator without a filter when it was rescinded.
//!
//! The fault makes that race certain: armed for an agent, the next ACCEPT naming an offer of
//! that agent finds the offer rescinded just before it lands.

use super::state::*;

impl Cluster {
    /// Arms the race for agent `agent`'s next accepted offer.
    pub(super) fn rescind_before_next_accept(&mut self, agent: usize) -> Result<(), String> {
        let a = self
            .agents
            .get(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        log::info!(
            "{}: its next accepted offer is rescinded before the ACCEPT lands",
            a.hostname
        );
        self.rescind_before_accept.insert(agent);
        Ok(())
    }

    /// Before an ACCEPT of `offer_ids` is handled: rescinds those of them whose agent has the
    /// race armed (once per arming).
    pub(super) fn rescind_raced(&mut self, offer_ids: &[String]) {
        if self.rescind_before_accept.is_empty() {
            return;
        }
        for oid in offer_ids {
            let Some(o) = self.offers.get(oid) else {
                continue;
            };
            if !self.rescind_before_accept.remove(&o.agent) {
                continue;
            }
            let (fw, agent) = (o.framework.clone(), o.agent);
            log::info!(
                "offer {oid} of {} timed out just before its ACCEPT landed: rescinded",
                self.agents[agent].hostname
            );
            self.offers.remove(oid);
            self.rescind(&fw, oid);
            self.request_allocation();
        }
    }

    /// The master removed agent `agent` (marked it unreachable): its outstanding offers are
    /// rescinded and the allocator forgets every framework's filters for it.
    pub(super) fn agent_removed_from_allocation(&mut self, agent: usize) {
        self.rescind_offers_of(agent);
        self.rescind_inverse_offers_of(&[agent]);
        for fw in self.frameworks.values_mut() {
            fw.filters.retain(|f| f.agent != agent);
        }
    }

    /// Every outstanding offer of agent `agent` is withdrawn (RESCIND to its framework).
    pub(super) fn rescind_offers_of(&mut self, agent: usize) {
        let offers: Vec<(String, String)> = self
            .offers
            .iter()
            .filter(|(_, o)| o.agent == agent)
            .map(|(id, o)| (id.clone(), o.framework.clone()))
            .collect();
        for (oid, fw) in offers {
            self.offers.remove(&oid);
            self.rescind(&fw, &oid);
        }
    }
}
