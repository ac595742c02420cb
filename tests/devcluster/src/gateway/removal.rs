//! Taking an SDS or a device out, as the MDM does: `removeSds` / `removeDevice` are refused
//! when what stays in the pool could not hold its data; otherwise the object stays listed,
//! `RemovePending`, while its data moves to the others (the rebuild time), then it is gone. An
//! SDS already down has nothing to move from: it goes at once, and its data is rebuilt from the
//! other copies (`data.rs`). Pure: the gateway's model asks, time is passed in.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One object moving its data away.
#[derive(Clone, Copy, Debug)]
struct Moving {
    at: Instant,
    lasts: Duration,
}

/// The removals under way, by object id.
#[derive(Default)]
pub struct Removals {
    sdss: BTreeMap<String, Moving>,
    devices: BTreeMap<String, Moving>,
}

/// What to check before a removal: the pool's data in use, and what would stay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Room {
    pub in_use_kb: u64,
    /// Usable capacity (spare left out) of the devices that stay.
    pub staying_usable_kb: u64,
    /// SDSs that keep a device in the pool: mirrored data needs two.
    pub staying_sdss: usize,
}

impl Room {
    /// `Err(why)` when the data could not stay with two copies on what remains.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.in_use_kb == 0 {
            return Ok(());
        }
        if self.staying_sdss < 2 {
            return Err(format!(
                "Not enough capacity to remove {what}: {} SDS(s) would be left to hold two copies of the data",
                self.staying_sdss
            ));
        }
        if self.in_use_kb > self.staying_usable_kb {
            return Err(format!(
                "Not enough capacity to remove {what}: {} KB in use, {} KB would be left",
                self.in_use_kb, self.staying_usable_kb
            ));
        }
        Ok(())
    }
}

impl Removals {
    /// False when one was under way already.
    pub fn start_sds(&mut self, id: &str, now: Instant, lasts: Duration) -> bool {
        start(&mut self.sdss, id, now, lasts)
    }

    pub fn start_device(&mut self, id: &str, now: Instant, lasts: Duration) -> bool {
        start(&mut self.devices, id, now, lasts)
    }

    pub fn sds_pending(&self, id: &str) -> bool {
        self.sdss.contains_key(id)
    }

    pub fn device_pending(&self, id: &str) -> bool {
        self.devices.contains_key(id)
    }

    /// The SDSs and devices whose data has moved by `now`: to be forgotten.
    pub fn done(&mut self, now: Instant) -> (Vec<String>, Vec<String>) {
        (
            finished(&mut self.sdss, now),
            finished(&mut self.devices, now),
        )
    }

    /// What is left to move of `share_kb` for each of `sds_ids` and `device_ids` in removal:
    /// draining linearly over each one's time.
    pub fn left_kb<'a>(
        &self,
        sds_ids: impl Iterator<Item = &'a str>,
        device_ids: impl Iterator<Item = &'a str>,
        share_kb: u64,
        now: Instant,
    ) -> u64 {
        let sdss = sds_ids.filter_map(|id| self.sdss.get(id));
        let devices = device_ids.filter_map(|id| self.devices.get(id));
        sdss.chain(devices).map(|m| m.left(share_kb, now)).sum()
    }
}

impl Moving {
    fn left(&self, share_kb: u64, now: Instant) -> u64 {
        let total = self.lasts.as_millis().max(1);
        let gone = now.saturating_duration_since(self.at).as_millis();
        if gone >= total {
            return 0;
        }
        (u128::from(share_kb) * (total - gone) / total) as u64
    }
}

fn start(map: &mut BTreeMap<String, Moving>, id: &str, at: Instant, lasts: Duration) -> bool {
    if map.contains_key(id) {
        return false;
    }
    map.insert(id.to_string(), Moving { at, lasts });
    true
}

fn finished(map: &mut BTreeMap<String, Moving>, now: Instant) -> Vec<String> {
    let done: Vec<String> = map
        .iter()
        .filter(|(_, m)| now.saturating_duration_since(m.at) >= m.lasts)
        .map(|(id, _)| id.clone())
        .collect();
    for id in &done {
        map.remove(id);
    }
    done
}

// --- the gateway's side ------------------------------------------------------------------

use super::{code, Kind, Model, Reply, SHARE_OF_POOL};

impl Model {
    /// `POST /api/instances/<Type>::<id>/action/<action>`.
    pub(super) fn instance_action(&mut self, kind: Kind, id: &str, action: &str) -> Reply {
        if self.system.is_none() {
            return Reply::mdm(code::NOT_CONNECTED, "Not connected");
        }
        let now = Instant::now();
        match (kind, action) {
            (Kind::Sds, "removeSds") => self.remove_sds(id, now),
            (Kind::Device, "removeDevice") => self.remove_device(id, now),
            _ => Reply::error(
                404,
                code::NONE,
                &format!("No action {action} on type {}", kind.type_name()),
            ),
        }
    }

    fn remove_sds(&mut self, id: &str, now: Instant) -> Reply {
        let Some(sds) = self.sds(id) else {
            return Kind::Sds.not_found();
        };
        if self.removals.sds_pending(id) {
            return in_progress("SDS");
        }
        let what = format!("SDS {}", sds.name.as_deref().unwrap_or(id));
        self.observe(now);
        if self.data.sds_down(id) {
            // Nothing to move from it: the other copies are rebuilt.
            log::info!("gateway: {what} removed while disconnected; its data is rebuilt");
            self.data.removed_while_down(id, now);
            self.forget_sds(id);
            return empty_ok();
        }
        let leaving: Vec<String> = self
            .devices
            .iter()
            .filter(|d| d.sds_id == id)
            .map(|d| d.id.clone())
            .collect();
        if let Err(why) = self.room_without(&leaving, &what) {
            return Reply::mdm(code::NOT_ENOUGH_CAPACITY, &why);
        }
        let lasts = self.data.rebuild_time();
        self.removals.start_sds(id, now, lasts);
        log::info!(
            "gateway: {what} RemovePending; its data moves for {:.1}s",
            lasts.as_secs_f64()
        );
        empty_ok()
    }

    fn remove_device(&mut self, id: &str, now: Instant) -> Reply {
        let Some(device) = self.devices.iter().find(|d| d.id == id) else {
            return Kind::Device.not_found();
        };
        if self.removals.device_pending(id) || self.removals.sds_pending(&device.sds_id) {
            return in_progress("device");
        }
        let what = format!("device {}", device.path);
        if let Err(why) = self.room_without(&[id.to_string()], &what) {
            return Reply::mdm(code::NOT_ENOUGH_CAPACITY, &why);
        }
        let lasts = self.data.rebuild_time();
        self.removals.start_device(id, now, lasts);
        log::info!("gateway: {what} RemovePending");
        empty_ok()
    }

    /// Whether the pools of `leaving` devices keep room for their data without them.
    fn room_without(&self, leaving: &[String], what: &str) -> Result<(), String> {
        let pools: Vec<String> = self
            .devices
            .iter()
            .filter(|d| leaving.contains(&d.id))
            .map(|d| d.pool_id.clone())
            .collect();
        for pool in self.pools.iter().filter(|p| pools.contains(&p.id)) {
            let staying: Vec<&super::Device> = self
                .devices
                .iter()
                .filter(|d| d.pool_id == pool.id && !leaving.contains(&d.id))
                .filter(|d| !self.removals.device_pending(&d.id))
                .filter(|d| !self.removals.sds_pending(&d.sds_id))
                .collect();
            let max_kb: u64 = staying.iter().map(|d| d.capacity_kb).sum();
            let mut sdss: Vec<&str> = staying.iter().map(|d| d.sds_id.as_str()).collect();
            sdss.sort_unstable();
            sdss.dedup();
            Room {
                in_use_kb: self.pool_capacity(pool).health.in_use_kb,
                staying_usable_kb: max_kb - max_kb * pool.spare_percentage / 100,
                staying_sdss: sdss.len(),
            }
            .check(what)?;
        }
        Ok(())
    }

    /// Forgets what finished moving; called before each request is served.
    pub(super) fn finish_removals(&mut self, now: Instant) {
        let (sdss, devices) = self.removals.done(now);
        for id in sdss {
            log::info!("gateway: SDS {id} removed: its data moved");
            self.forget_sds(&id);
        }
        for id in devices {
            log::info!("gateway: device {id} removed: its data moved");
            self.devices.retain(|d| d.id != id);
        }
    }

    fn forget_sds(&mut self, id: &str) {
        self.sdss.retain(|s| s.id != id);
        self.devices.retain(|d| d.sds_id != id);
    }

    /// What still moves off the SDSs and devices of pool `pool_id` in removal (the share of
    /// the pool's usable capacity each holds, as an outage counts it).
    pub(super) fn rebalance_kb(&self, pool_id: &str, usable_kb: u64, now: Instant) -> u64 {
        let share = usable_kb / SHARE_OF_POOL;
        let in_pool = self.devices.iter().filter(|d| d.pool_id == pool_id);
        let mut sdss: Vec<&str> = in_pool.clone().map(|d| d.sds_id.as_str()).collect();
        sdss.sort_unstable();
        sdss.dedup();
        let devices = in_pool.map(|d| d.id.as_str());
        self.removals
            .left_kb(sdss.into_iter(), devices, share, now)
            .min(usable_kb)
    }

    /// `sdsState` or `deviceState` while a removal is under way.
    pub(super) fn removal_state(&self, kind: Kind, id: &str, sds_id: &str) -> Option<&'static str> {
        let pending = match kind {
            Kind::Sds => self.removals.sds_pending(id),
            _ => self.removals.device_pending(id) || self.removals.sds_pending(sds_id),
        };
        pending.then_some("RemovePending")
    }
}

fn in_progress(what: &str) -> Reply {
    Reply::mdm(
        code::REMOVE_IN_PROGRESS,
        &format!("The {what} is already being removed"),
    )
}

/// Actions answer 200 with an empty body.
fn empty_ok() -> Reply {
    Reply {
        status: 200,
        body: String::new(),
        delay: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_moves_its_share_over_its_time_then_is_done() {
        let t0 = Instant::now();
        let mut r = Removals::default();
        assert!(r.start_sds("s1", t0, Duration::from_secs(10)));
        assert!(!r.start_sds("s1", t0, Duration::from_secs(10)), "once");
        assert!(r.sds_pending("s1"));
        let half = t0 + Duration::from_secs(5);
        assert_eq!(
            r.left_kb(["s1"].into_iter(), [].into_iter(), 1000, half),
            500
        );
        assert_eq!(r.done(half), (vec![], vec![]));
        let end = t0 + Duration::from_secs(10);
        assert_eq!(r.done(end), (vec!["s1".to_string()], vec![]));
        assert!(!r.sds_pending("s1"));
    }

    #[test]
    fn data_that_the_rest_could_not_hold_twice_refuses_the_removal() {
        let room = |in_use_kb, staying_usable_kb, staying_sdss| Room {
            in_use_kb,
            staying_usable_kb,
            staying_sdss,
        };
        assert!(room(0, 0, 0).check("SDS h1").is_ok(), "no data, no limit");
        assert!(room(100, 200, 2).check("SDS h1").is_ok());
        let e = room(300, 200, 2).check("SDS h1").unwrap_err();
        assert!(e.contains("Not enough capacity to remove SDS h1"), "{e}");
        assert!(room(100, 200, 1).check("SDS h1").is_err());
    }
}
