//! The data as the MDM sees it: which SDSs are down (their host down, their `sds` process
//! stopped or replaced, or cut off through the control API), which protection domains hold
//! data that lost a copy and rebuild it once the SDS is back, the MDM cluster's members, and
//! the two events a storage operator fears: data unavailable (an SDS of a domain goes down
//! while a copy of some of its data is already missing) and quorum lost (two of the three
//! MDM members down). Pure: the gateway's model thread tells it what the hosts show and asks
//! it for figures; time is passed in. Events are counted on transitions, never per look.

use super::health::PoolFigures;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Log lines kept; the oldest go first.
const LOG_LINES: usize = 1000;
/// One SDS down takes a copy of this share (1/N) of its domain's pools' usable capacity.
const SHARE_DIVISOR: u64 = 10;
/// The longest rebuild that can be asked for: a day.
pub const LONGEST_REBUILD: Duration = Duration::from_secs(24 * 60 * 60);
/// The MDM members in the order the gateway lists them.
const MEMBERS: [&str; 3] = ["primary", "secondary", "tie-breaker"];

/// What a host shows of one SDS process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Process {
    /// Running with this process id; another id than last time means it was restarted in
    /// between (its connection to the MDM broke).
    Running(u32),
    /// Not running, or its host is down.
    Stopped,
    /// A host the gateway cannot see into (a synthetic agent, a gateway without hosts).
    Unknown,
}

/// One SDS of the gateway's model, as its host shows it now.
#[derive(Clone, Copy, Debug)]
pub struct SdsSeen<'a> {
    pub id: &'a str,
    pub name: &'a str,
    /// Its protection domain's name.
    pub pd: &'a str,
    pub process: Process,
}

struct Track {
    name: String,
    pd: String,
    pid: Option<u32>,
    host_down: bool,
    cut_off: bool,
    /// When it came back, and how long rebuilding what it missed takes.
    back: Option<(Instant, Duration)>,
    /// Removed from the gateway while down: kept only while its data is rebuilt.
    removed: bool,
}

impl Track {
    fn down(&self) -> bool {
        self.host_down || self.cut_off
    }

    /// What of `share_kb` still lacks a copy: all of it while down, then draining linearly
    /// over the rebuild.
    fn missing_kb(&self, share_kb: u64, now: Instant) -> u64 {
        if self.down() {
            return share_kb;
        }
        let Some((at, lasts)) = self.back else {
            return 0;
        };
        let total = lasts.as_millis();
        let gone = now.saturating_duration_since(at).as_millis();
        if gone >= total {
            return 0;
        }
        (u128::from(share_kb) * (total - gone) / total) as u64
    }

    fn missing_any(&self, now: Instant) -> bool {
        self.down()
            || self
                .back
                .is_some_and(|(at, lasts)| now.saturating_duration_since(at) < lasts)
    }
}

/// A change of one SDS's state, and what it says about why.
enum Change {
    HostDown,
    HostUp(u32),
    Restarted(u32),
    CutOff(bool),
}

#[derive(Default)]
struct Events {
    data_unavailable: u64,
    quorum_loss: u64,
    max_down: BTreeMap<String, u64>,
    log: VecDeque<String>,
}

/// The MDM's view of the data and of its own cluster.
pub struct DataModel {
    rebuild_time: Duration,
    sdss: BTreeMap<String, Track>,
    /// Per member (primary, secondary, tie-breaker): its host or `mdm` process down, and
    /// cut off through the control API.
    mdm_host_down: [bool; 3],
    mdm_cut_off: [bool; 3],
    events: Events,
}

impl DataModel {
    pub fn new(rebuild_time: Duration) -> DataModel {
        DataModel {
            rebuild_time,
            sdss: BTreeMap::new(),
            mdm_host_down: [false; 3],
            mdm_cut_off: [false; 3],
            events: Events::default(),
        }
    }

    /// How long rebuilding takes after each SDS outage from now on.
    pub fn set_rebuild_time(&mut self, lasts: Duration) -> Result<(), String> {
        if lasts > LONGEST_REBUILD {
            return Err(format!(
                "a rebuild time of {}s is longer than a day",
                lasts.as_secs()
            ));
        }
        self.rebuild_time = lasts;
        Ok(())
    }

    /// What the hosts show of every SDS the gateway has now (those it no longer has are
    /// forgotten). `pools_degraded`: an injected fault already has every pool missing copies.
    pub fn observe_sdss(&mut self, seen: &[SdsSeen], pools_degraded: bool, now: Instant) {
        // A set, not a scan of `seen` per SDS: at 10,000 SDSs that was 50 million compares
        // every look (each 100 ms while SDSs are added), a core of the bench's machine taken
        // from the scheduler it measures.
        let present: HashSet<&str> = seen.iter().map(|s| s.id).collect();
        self.sdss
            .retain(|id, t| present.contains(id.as_str()) || (t.removed && t.missing_any(now)));
        for s in seen {
            let Some(track) = self.sdss.get(s.id) else {
                self.sdss.insert(s.id.to_string(), first_look(s));
                self.note_down_counts();
                continue;
            };
            let change = match (s.process, track.host_down, track.pid) {
                (Process::Stopped, false, _) => Change::HostDown,
                (Process::Running(pid), true, _) => Change::HostUp(pid),
                (Process::Running(pid), false, Some(was)) if was != pid => Change::Restarted(pid),
                (Process::Running(pid), false, None) => {
                    if let Some(t) = self.sdss.get_mut(s.id) {
                        t.pid = Some(pid);
                    }
                    continue;
                }
                _ => continue,
            };
            self.apply(s.id, change, pools_degraded, now);
        }
    }

    /// How long rebuilding takes now; a removal moves data for as long.
    pub fn rebuild_time(&self) -> Duration {
        self.rebuild_time
    }

    /// The SDS `id`, down, was removed: the copies it held are rebuilt from the others over
    /// the rebuild time, counted as missing until then.
    pub fn removed_while_down(&mut self, id: &str, now: Instant) {
        let Some(mut track) = self.sdss.remove(id) else {
            return;
        };
        track.host_down = false;
        track.cut_off = false;
        track.removed = true;
        track.back = Some((now, self.rebuild_time));
        self.log(format!(
            "sds {} of {} removed while down; rebuilding its data for {:.1}s",
            track.name,
            track.pd,
            self.rebuild_time.as_secs_f64()
        ));
        self.sdss.insert(format!("{id} (removed)"), track);
    }

    /// The control API cuts the SDS `id` off from the MDM, or ends that; false when the model
    /// has no such SDS.
    pub fn cut_off(&mut self, id: &str, on: bool, pools_degraded: bool, now: Instant) -> bool {
        if !self.sdss.contains_key(id) {
            return false;
        }
        self.apply(id, Change::CutOff(on), pools_degraded, now);
        true
    }

    /// Ends every cut-off the control API made (SDSs and MDM members).
    pub fn clear_cut_offs(&mut self, now: Instant) {
        let cut: Vec<String> = self
            .sdss
            .iter()
            .filter(|(_, t)| t.cut_off)
            .map(|(id, _)| id.clone())
            .collect();
        for id in cut {
            self.apply(&id, Change::CutOff(false), false, now);
        }
        for member in 0..MEMBERS.len() {
            self.set_member(member, None, Some(false));
        }
    }

    fn apply(&mut self, id: &str, change: Change, pools_degraded: bool, now: Instant) {
        let rebuild_time = self.rebuild_time;
        let Some(track) = self.sdss.get_mut(id) else {
            return;
        };
        let was_down = track.down();
        let why = match change {
            Change::HostDown => {
                track.host_down = true;
                track.pid = None;
                "its host or sds process is down"
            }
            Change::HostUp(pid) => {
                track.host_down = false;
                track.pid = Some(pid);
                "its sds process runs again"
            }
            Change::Restarted(pid) => {
                track.pid = Some(pid);
                "its sds process was restarted"
            }
            Change::CutOff(on) => {
                track.cut_off = on;
                "cut off by the control API"
            }
        };
        let restarted = matches!(change, Change::Restarted(_));
        let (name, pd) = (track.name.clone(), track.pd.clone());
        if !was_down && (track.down() || restarted) {
            self.went_down(id, &name, &pd, why, pools_degraded, now);
        }
        let Some(track) = self.sdss.get_mut(id) else {
            return;
        };
        if (was_down || restarted) && !track.down() {
            track.back = Some((now, rebuild_time));
            self.log(format!(
                "sds {name} of {pd} reconnected; rebuilding for {:.1}s",
                rebuild_time.as_secs_f64()
            ));
        }
    }

    fn went_down(
        &mut self,
        id: &str,
        name: &str,
        pd: &str,
        why: &str,
        degraded: bool,
        now: Instant,
    ) {
        self.log(format!("sds {name} of {pd} disconnected: {why}"));
        let others: Vec<&str> = self
            .sdss
            .iter()
            .filter(|(other, t)| other.as_str() != id && t.pd == pd && t.missing_any(now))
            .map(|(_, t)| t.name.as_str())
            .collect();
        if !others.is_empty() || degraded {
            let cause = if others.is_empty() {
                "while its pools rebuild".to_string()
            } else {
                format!("while {} lack(s) copies", others.join(", "))
            };
            let line = format!("data unavailable in {pd}: sds {name} down {cause}");
            self.events.data_unavailable += 1;
            self.log(line);
        }
        // A restarted process is down for a moment too.
        let down_now = self.down_in(pd).max(1);
        let max = self.events.max_down.entry(pd.to_string()).or_insert(0);
        *max = (*max).max(down_now);
    }

    fn note_down_counts(&mut self) {
        for (pd, n) in self.sds_down_now() {
            let max = self.events.max_down.entry(pd).or_insert(0);
            *max = (*max).max(n);
        }
    }

    fn down_in(&self, pd: &str) -> u64 {
        self.sdss
            .values()
            .filter(|t| t.pd == pd && t.down())
            .count() as u64
    }

    fn log(&mut self, line: String) {
        log::info!("gateway: {line}");
        if self.events.log.len() == LOG_LINES {
            self.events.log.pop_front();
        }
        self.events.log.push_back(line);
    }

    /// Whether the SDS `id` has lost its MDM connection.
    pub fn sds_down(&self, id: &str) -> bool {
        self.sdss.get(id).is_some_and(Track::down)
    }

    /// SDSs down per protection domain, every domain with an SDS listed.
    pub fn sds_down_now(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for t in self.sdss.values() {
            *out.entry(t.pd.clone()).or_insert(0) += u64::from(t.down());
        }
        out
    }

    /// The figures of a pool of domain `pd` that can hold `usable_kb`: what its SDSs' outages
    /// left without a copy, and what is being rebuilt.
    pub fn pool(&self, pd: &str, usable_kb: u64, now: Instant) -> PoolFigures {
        let share = usable_kb / SHARE_DIVISOR;
        let mut figures = PoolFigures::default();
        for t in self.sdss.values().filter(|t| t.pd == pd) {
            let left = t.missing_kb(share, now);
            figures.degraded_kb += left;
            if let (false, Some((_, lasts))) = (t.down(), t.back) {
                let per_second = share / lasts.as_secs().max(1);
                figures.moving_kb += per_second.min(left);
            }
        }
        figures.degraded_kb = figures.degraded_kb.min(usable_kb);
        figures.pending_rebuild_kb = figures.degraded_kb;
        figures.in_use_kb = figures.degraded_kb;
        figures
    }

    /// What the hosts show of the MDM members (primary, secondary, tie-breaker): `Some(false)`
    /// down, `Some(true)` up, `None` a host that runs no MDM the gateway can see (left as it is).
    pub fn observe_mdm(&mut self, seen: [Option<bool>; 3]) {
        for (member, up) in seen.into_iter().enumerate() {
            if let Some(up) = up {
                self.set_member(member, Some(!up), None);
            }
        }
    }

    /// The control API takes the secondary manager away (`true`) or gives it back.
    pub fn mdm_cut_off(&mut self, on: bool) {
        self.set_member(1, None, Some(on));
    }

    fn set_member(&mut self, member: usize, host_down: Option<bool>, cut_off: Option<bool>) {
        let before = self.mdm_down();
        let was = before[member];
        if let Some(d) = host_down {
            self.mdm_host_down[member] = d;
        }
        if let Some(c) = cut_off {
            self.mdm_cut_off[member] = c;
        }
        let after = self.mdm_down();
        if was == after[member] {
            return;
        }
        let role = MEMBERS[member];
        self.log(format!(
            "mdm {role} {}",
            if after[member] { "down" } else { "back" }
        ));
        let count = |d: [bool; 3]| d.iter().filter(|d| **d).count();
        if count(before) < 2 && count(after) >= 2 {
            self.events.quorum_loss += 1;
            self.log(format!(
                "quorum lost: {} of 3 mdm members down",
                count(after)
            ));
        }
    }

    fn mdm_down(&self) -> [bool; 3] {
        [0, 1, 2].map(|m| self.mdm_host_down[m] || self.mdm_cut_off[m])
    }

    /// The system's `mdmCluster` with its down members `Disconnected`.
    pub fn mdm_cluster(&self, cluster: &mut Value) {
        let down = self.mdm_down();
        let n = down.iter().filter(|d| **d).count();
        if n == 0 {
            return;
        }
        cluster["clusterState"] = json!("ClusteredDegraded");
        cluster["goodNodesNum"] = json!(3 - n);
        let managers_down = down[..2].iter().filter(|d| **d).count();
        cluster["goodReplicasNum"] = json!(2 - managers_down);
        for (member, is_down) in down.into_iter().enumerate() {
            if !is_down {
                continue;
            }
            let slot = match member {
                0 => cluster.get_mut("master"),
                1 => cluster.get_mut("slaves").and_then(|s| s.get_mut(0)),
                _ => cluster.get_mut("tieBreakers").and_then(|s| s.get_mut(0)),
            };
            if let Some(slot) = slot {
                slot["status"] = json!("Disconnected");
            }
        }
    }

    /// The counters since the start or the last reset, as `GET /control/gateway/events`
    /// answers them.
    pub fn events(&self) -> Value {
        let mut max = self.events.max_down.clone();
        for pd in self.sds_down_now().into_keys() {
            max.entry(pd).or_insert(0);
        }
        json!({
            "data_unavailable": self.events.data_unavailable,
            "quorum_loss": self.events.quorum_loss,
            "max_sds_down_per_domain": max,
            "sds_down_now": self.sds_down_now(),
            "log": self.events.log,
        })
    }

    /// Zeroes the counters; the largest number down starts again from what is down now.
    pub fn reset_events(&mut self) {
        self.events = Events::default();
        self.note_down_counts();
    }
}

fn first_look(s: &SdsSeen) -> Track {
    Track {
        name: s.name.to_string(),
        pd: s.pd.to_string(),
        pid: match s.process {
            Process::Running(pid) => Some(pid),
            _ => None,
        },
        host_down: s.process == Process::Stopped,
        cut_off: false,
        back: None,
        removed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn seen<'a>(id: &'a str, pd: &'a str, process: Process) -> SdsSeen<'a> {
        SdsSeen {
            id,
            name: id,
            pd,
            process,
        }
    }

    /// Three SDSs in pd1, one in pd2, all running; rebuilds take 10 s.
    fn cluster(t0: Instant) -> DataModel {
        let mut m = DataModel::new(10 * SEC);
        m.observe_sdss(&hosts([Process::Running(1); 4]), false, t0);
        m
    }

    fn hosts(p: [Process; 4]) -> Vec<SdsSeen<'static>> {
        vec![
            seen("sds-1", "pd1", p[0]),
            seen("sds-2", "pd1", p[1]),
            seen("sds-3", "pd1", p[2]),
            seen("sds-4", "pd2", p[3]),
        ]
    }

    fn count(m: &DataModel, key: &str) -> u64 {
        m.events()[key].as_u64().unwrap()
    }

    #[test]
    fn an_sds_down_degrades_its_domain_until_back_and_rebuilt() {
        let t0 = Instant::now();
        let mut m = cluster(t0);
        let up = Process::Running(1);
        m.observe_sdss(&hosts([up, Process::Stopped, up, up]), false, t0);
        assert!(m.sds_down("sds-2"));
        let pool = m.pool("pd1", 1_000_000, t0 + 5 * SEC);
        assert_eq!(pool.degraded_kb, 100_000, "a tenth lacks a copy while down");
        assert_eq!(pool.pending_rebuild_kb, 100_000);
        assert_eq!(
            m.pool("pd2", 1_000_000, t0).degraded_kb,
            0,
            "the other domain"
        );
        // Back at t0+6 (a new process): drains over the 10 s rebuild time.
        let back = t0 + 6 * SEC;
        m.observe_sdss(&hosts([up, Process::Running(7), up, up]), false, back);
        assert!(!m.sds_down("sds-2"));
        assert_eq!(m.pool("pd1", 1_000_000, back + 5 * SEC).degraded_kb, 50_000);
        assert_eq!(m.pool("pd1", 1_000_000, back + 5 * SEC).moving_kb, 10_000);
        assert_eq!(
            m.pool("pd1", 1_000_000, back + 10 * SEC),
            PoolFigures::default()
        );
        assert_eq!(count(&m, "data_unavailable"), 0);
        assert_eq!(m.events()["max_sds_down_per_domain"]["pd1"], 1);
        assert_eq!(m.events()["sds_down_now"]["pd1"], 0);
    }

    #[test]
    fn a_second_sds_down_while_a_copy_is_missing_is_one_event_not_one_per_look() {
        let t0 = Instant::now();
        let mut m = cluster(t0);
        let (up, down) = (Process::Running(1), Process::Stopped);
        m.observe_sdss(&hosts([down, up, up, up]), false, t0);
        // pd2's SDS down at the same time is another domain: no event.
        m.observe_sdss(&hosts([down, up, up, down]), false, t0);
        assert_eq!(count(&m, "data_unavailable"), 0);
        for _ in 0..5 {
            m.observe_sdss(&hosts([down, down, up, down]), false, t0 + SEC);
        }
        assert_eq!(count(&m, "data_unavailable"), 1);
        assert_eq!(m.events()["max_sds_down_per_domain"]["pd1"], 2);
        assert_eq!(m.events()["sds_down_now"]["pd1"], 2);
        // One back and rebuilding, then the other back, then down again while the first
        // one's rebuild is not done: another event.
        let back = t0 + 2 * SEC;
        m.observe_sdss(&hosts([Process::Running(2), down, up, up]), false, back);
        m.observe_sdss(
            &hosts([Process::Running(2), Process::Running(3), up, up]),
            false,
            back,
        );
        m.observe_sdss(
            &hosts([Process::Running(2), down, up, up]),
            false,
            back + SEC,
        );
        assert_eq!(count(&m, "data_unavailable"), 2);
        // Once rebuilt, one down alone is no event.
        m.observe_sdss(
            &hosts([Process::Running(2), Process::Running(4), up, up]),
            false,
            back + SEC,
        );
        m.observe_sdss(
            &hosts([down, Process::Running(4), up, up]),
            false,
            back + 30 * SEC,
        );
        assert_eq!(count(&m, "data_unavailable"), 2);
        let log = m.events()["log"].to_string();
        assert!(log.contains("data unavailable in pd1"), "{log}");
    }

    #[test]
    fn a_restarted_process_is_an_outage_and_rebuilds() {
        let t0 = Instant::now();
        let mut m = cluster(t0);
        let up = Process::Running(1);
        m.observe_sdss(&hosts([up, Process::Running(9), up, up]), false, t0);
        assert!(!m.sds_down("sds-2"));
        assert_eq!(m.pool("pd1", 1_000_000, t0).degraded_kb, 100_000);
        assert_eq!(m.events()["max_sds_down_per_domain"]["pd1"], 1);
        let log = m.events()["log"].to_string();
        assert!(
            log.contains("sds sds-2 of pd1 disconnected: its sds process was restarted"),
            "{log}"
        );
        assert!(log.contains("sds sds-2 of pd1 reconnected"), "{log}");
        // A restart of another SDS of pd1 during that rebuild makes data unavailable.
        m.observe_sdss(
            &hosts([Process::Running(5), Process::Running(9), up, up]),
            false,
            t0 + SEC,
        );
        assert_eq!(count(&m, "data_unavailable"), 1);
    }

    #[test]
    fn cut_offs_count_like_host_outages_and_clear() {
        let t0 = Instant::now();
        let mut m = cluster(t0);
        assert!(m.cut_off("sds-1", true, false, t0));
        assert!(!m.cut_off("sds-9", true, false, t0));
        assert!(m.sds_down("sds-1"));
        // An injected rebuild of every pool: one SDS down is already too many.
        assert!(m.cut_off("sds-4", true, true, t0));
        assert_eq!(count(&m, "data_unavailable"), 1);
        m.clear_cut_offs(t0 + SEC);
        assert!(!m.sds_down("sds-1") && !m.sds_down("sds-4"));
        assert_eq!(
            m.pool("pd1", 1_000, t0 + SEC).degraded_kb,
            100,
            "rebuilding"
        );
        m.reset_events();
        assert_eq!(count(&m, "data_unavailable"), 0);
        assert_eq!(m.events()["log"], json!([]));
        assert_eq!(m.events()["max_sds_down_per_domain"]["pd1"], 0);
    }

    #[test]
    fn mdm_members_degrade_the_cluster_and_two_lose_quorum_once() {
        let mut m = DataModel::new(SEC);
        let mut cluster = json!({
            "clusterState": "ClusteredNormal", "goodNodesNum": 3, "goodReplicasNum": 2,
            "master": {"name": "mdm1"}, "slaves": [{"status": "Normal"}],
            "tieBreakers": [{"status": "Normal"}],
        });
        m.observe_mdm([Some(true), Some(true), None]);
        m.mdm_cluster(&mut cluster);
        assert_eq!(cluster["clusterState"], "ClusteredNormal");
        m.observe_mdm([Some(true), None, Some(false)]);
        let mut one = cluster.clone();
        m.mdm_cluster(&mut one);
        assert_eq!(one["clusterState"], "ClusteredDegraded");
        assert_eq!(one["goodNodesNum"], 2);
        assert_eq!(one["goodReplicasNum"], 2);
        assert_eq!(one["tieBreakers"][0]["status"], "Disconnected");
        assert_eq!(count(&m, "quorum_loss"), 0);
        for _ in 0..3 {
            m.observe_mdm([Some(false), None, Some(false)]);
        }
        assert_eq!(count(&m, "quorum_loss"), 1);
        let mut two = cluster.clone();
        m.mdm_cluster(&mut two);
        assert_eq!(two["goodNodesNum"], 1);
        assert_eq!(two["goodReplicasNum"], 1);
        assert_eq!(two["master"]["status"], "Disconnected");
        // Back to one down and down again: a second loss. The injected secondary counts too.
        m.observe_mdm([Some(true), None, Some(false)]);
        m.mdm_cut_off(true);
        assert_eq!(count(&m, "quorum_loss"), 2);
        let mut both = cluster.clone();
        m.mdm_cluster(&mut both);
        assert_eq!(both["goodNodesNum"], 1);
        assert_eq!(both["slaves"][0]["status"], "Disconnected");
    }

    #[test]
    fn a_rebuild_time_over_a_day_is_refused() {
        let mut m = DataModel::new(SEC);
        assert!(m.set_rebuild_time(LONGEST_REBUILD * 2).is_err());
        assert!(m.set_rebuild_time(Duration::ZERO).is_ok());
        let t0 = Instant::now();
        m.observe_sdss(&[seen("a", "pd", Process::Running(1))], false, t0);
        m.observe_sdss(&[seen("a", "pd", Process::Running(2))], false, t0);
        assert_eq!(m.pool("pd", 1_000, t0).degraded_kb, 0, "no rebuild time");
    }
}
