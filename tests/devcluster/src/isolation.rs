//! The stand-in for Mesos' cgroup isolators (`cgroups/mem`, `cgroups/cpu` with
//! `--cgroups_enable_cfs`), applied to a process group since no cgroup is ours to create here:
//! the launcher's tasks, and the dev agents' executors (`master/process.rs`; there the kill
//! ends the container's tasks with REASON_CONTAINER_LIMITATION_MEMORY). What it does, precisely:
//!
//! - **mem**: every `PERIOD` (100 ms) the resident set of every process in the task's group
//!   is summed (`/proc/<pid>/statm`, resident pages x 4 KiB). Above the app's `mem` MB the
//!   whole group is SIGKILLed and the task ends `TASK_FAILED` with the memory isolator's
//!   "Memory limit exceeded" message; the launcher then relaunches it with the app's
//!   backoff. A member's own peak (`VmHWM` in `/proc/<pid>/status`) over `mem` kills too, as
//!   the kernel would have at the moment of the allocation. Differences from a cgroup: only
//!   RSS counts (no page cache, no kernel memory), and a peak of a member that lived less
//!   than one period can go unseen.
//! - **cpus**: a CFS-bandwidth emulation, quota = `cpus` x `PERIOD` per period. CPU time is
//!   read from `/proc/<pid>/stat` (utime + stime + reaped children's, in 10 ms ticks); a period
//!   that used more than its quota SIGSTOPs the group for as long as the overrun takes to
//!   earn back at `cpus` (so the long-run share is `cpus`), then SIGCONT. It is counted as a
//!   throttled period, as `cpu.stat`'s `nr_throttled` would. Coarser than the kernel: the
//!   overrun happens first and is paid back after, at tick and period granularity.
//!
//! [`Isolator::tick`] is the pure decision; [`group_usage`] reads `/proc`.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often usage is sampled: CFS' default `cpu.cfs_period_us` (100 ms).
pub const PERIOD: Duration = Duration::from_millis(100);
/// USER_HZ: the unit of the CPU times in `/proc/<pid>/stat`.
const TICKS_PER_SEC: f64 = 100.0;

/// What a task's process group uses now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub rss_bytes: u64,
    /// The largest high-water mark of any one member: a group peak between two samples
    /// that a cgroup would have caught.
    pub peak_rss_bytes: u64,
    /// CPU time so far, in ticks (utime + stime + cutime + cstime of each member).
    pub cpu_ticks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Throttle: stop the group.
    Stop,
    /// The throttle is over.
    Continue,
    /// Over the memory limit: kill the group and fail the task with this message.
    OomKill,
}

/// One task's limits and the state of its enforcement.
#[derive(Debug)]
pub struct Isolator {
    cpus: f64,
    mem_bytes: u64,
    last_ticks: Option<u64>,
    stopped_until: Option<Instant>,
    pub max_rss_bytes: u64,
    pub rss_bytes: u64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled: Duration,
    pub cpu_ticks: u64,
}

impl Isolator {
    pub fn new(cpus: f64, mem_mb: f64) -> Isolator {
        Isolator {
            cpus,
            mem_bytes: (mem_mb * 1024.0 * 1024.0) as u64,
            last_ticks: None,
            stopped_until: None,
            max_rss_bytes: 0,
            rss_bytes: 0,
            nr_periods: 0,
            nr_throttled: 0,
            throttled: Duration::ZERO,
            cpu_ticks: 0,
        }
    }

    /// One period's decision from the group's usage now.
    pub fn tick(&mut self, now: Instant, usage: Usage) -> Option<Action> {
        self.rss_bytes = usage.rss_bytes;
        let peak = usage.rss_bytes.max(usage.peak_rss_bytes);
        self.max_rss_bytes = self.max_rss_bytes.max(peak);
        self.cpu_ticks = self.cpu_ticks.max(usage.cpu_ticks);
        if peak > self.mem_bytes {
            return Some(Action::OomKill);
        }
        // A member that exits unreaped takes its ticks along: never count backwards.
        let used_ticks = usage
            .cpu_ticks
            .saturating_sub(self.last_ticks.unwrap_or(usage.cpu_ticks));
        let baseline = self.last_ticks.replace(usage.cpu_ticks).is_none();
        if baseline {
            return None;
        }
        if let Some(until) = self.stopped_until {
            if now < until {
                return None;
            }
            self.stopped_until = None;
            return Some(Action::Continue);
        }
        self.nr_periods += 1;
        let used = used_ticks as f64 / TICKS_PER_SEC;
        let quota = self.cpus * PERIOD.as_secs_f64();
        if used > quota {
            let pause = Duration::from_secs_f64((used - quota) / self.cpus);
            self.nr_throttled += 1;
            self.throttled += pause;
            self.stopped_until = Some(now + pause);
            return Some(Action::Stop);
        }
        None
    }

    /// The memory isolator's words for the kill.
    pub fn oom_message(&self) -> String {
        format!(
            "Memory limit exceeded: Requested: {}MB Maximum Used: {}MB",
            self.mem_bytes / (1024 * 1024),
            self.max_rss_bytes / (1024 * 1024)
        )
    }

    /// The task's entry of the agent's `/monitor/statistics` (Mesos' field names).
    pub fn statistics(&self) -> Value {
        json!({
            "cpus_limit": self.cpus,
            "mem_limit_bytes": self.mem_bytes,
            "mem_rss_bytes": self.rss_bytes,
            "mem_max_rss_bytes": self.max_rss_bytes,
            "cpus_nr_periods": self.nr_periods,
            "cpus_nr_throttled": self.nr_throttled,
            "cpus_throttled_time_secs": self.throttled.as_secs_f64(),
            "cpus_time_secs": self.cpu_ticks as f64 / TICKS_PER_SEC,
        })
    }
}

/// Sums the usage of every process whose process group is `pgid`.
pub fn group_usage(pgid: u32) -> Usage {
    usage_of_groups(Some(pgid))
        .remove(&pgid)
        .unwrap_or_default()
}

/// [`group_usage`] for many enforcers at once (a dev agent's every executor): one pass over
/// `/proc` serves every caller for half a period, so a hundred executors cost one scan, not a
/// hundred.
pub fn shared_group_usage(pgid: u32) -> Usage {
    type Sample = Option<(Instant, HashMap<u32, Usage>)>;
    static LAST: Mutex<Sample> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if last
        .as_ref()
        .is_none_or(|(at, _)| at.elapsed() >= PERIOD / 2)
    {
        *last = Some((Instant::now(), usage_of_groups(None)));
    }
    last.as_ref()
        .and_then(|(_, groups)| groups.get(&pgid).copied())
        .unwrap_or_default()
}

/// The usage of each process group (only `only`, when given), summed over its members.
fn usage_of_groups(only: Option<u32>) -> HashMap<u32, Usage> {
    let mut groups: HashMap<u32, Usage> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return groups;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After `(comm)`: state, ppid, pgrp, ... utime (14), stime, cutime, cstime (17).
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let Some(pgid) = f.get(2).and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        if only.is_some_and(|only| only != pgid) {
            continue;
        }
        let total = groups.entry(pgid).or_default();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        total.cpu_ticks += num(11) + num(12) + num(13) + num(14);
        // One read gives both the resident set now and its high-water mark.
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            total.rss_bytes += status_bytes(&status, "VmRSS:");
            total.peak_rss_bytes = total.peak_rss_bytes.max(high_water_mark(&status));
        }
    }
    groups
}

/// `VmHWM` of a `/proc/<pid>/status`, in bytes; 0 when absent (a kernel thread, a zombie).
fn high_water_mark(status: &str) -> u64 {
    status_bytes(status, "VmHWM:")
}

/// A `<field> <n> kB` line of a `/proc/<pid>/status`, in bytes; 0 when absent.
fn status_bytes(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_over_the_limit_kills() {
        let mut iso = Isolator::new(1.0, 32.0);
        let now = Instant::now();
        let under = Usage {
            rss_bytes: 32 * 1024 * 1024,
            ..Usage::default()
        };
        assert_eq!(iso.tick(now, under), None);
        let over = Usage {
            rss_bytes: 40 * 1024 * 1024,
            ..Usage::default()
        };
        assert_eq!(iso.tick(now, over), Some(Action::OomKill));
        assert_eq!(
            iso.oom_message(),
            "Memory limit exceeded: Requested: 32MB Maximum Used: 40MB"
        );
    }

    #[test]
    fn a_peak_between_samples_kills_as_a_cgroup_would_have() {
        let mut iso = Isolator::new(1.0, 32.0);
        let spiked = Usage {
            rss_bytes: 8 * 1024 * 1024,
            peak_rss_bytes: 48 * 1024 * 1024,
            cpu_ticks: 0,
        };
        assert_eq!(iso.tick(Instant::now(), spiked), Some(Action::OomKill));
        assert_eq!(
            iso.oom_message(),
            "Memory limit exceeded: Requested: 32MB Maximum Used: 48MB"
        );
    }

    #[test]
    fn the_high_water_mark_is_read_from_proc_status() {
        let status = "Name:\ttail\nVmPeak:\t  70000 kB\nVmHWM:\t   67516 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(high_water_mark(status), 67516 * 1024);
        assert_eq!(high_water_mark("Name:\tkthreadd\n"), 0);
        assert_eq!(high_water_mark("VmHWM:\t garbage kB\n"), 0);
    }

    #[test]
    fn cpu_over_quota_stops_until_repaid_then_continues() {
        // 0.5 cpus: 50 ms per 100 ms period.
        let mut iso = Isolator::new(0.5, 1024.0);
        let t0 = Instant::now();
        let at = |ticks| Usage {
            cpu_ticks: ticks,
            ..Usage::default()
        };
        assert_eq!(
            iso.tick(t0, at(1000)),
            None,
            "the first sample is a baseline"
        );
        assert_eq!(iso.tick(t0 + PERIOD, at(1005)), None, "50 ms: within quota");
        // 100 ms used in a period: 50 ms over, repaid at 0.5 cpus in 100 ms.
        let t2 = t0 + 2 * PERIOD;
        assert_eq!(iso.tick(t2, at(1015)), Some(Action::Stop));
        assert_eq!(iso.nr_throttled, 1);
        assert_eq!(iso.tick(t2 + PERIOD / 2, at(1015)), None);
        assert_eq!(iso.tick(t2 + PERIOD, at(1015)), Some(Action::Continue));
        assert_eq!(iso.tick(t2 + 2 * PERIOD, at(1016)), None);
        assert_eq!(iso.nr_periods, 3);
        assert_eq!(iso.statistics()["cpus_nr_throttled"], 1);
        // A member's ticks leaving with it never count as negative use.
        assert_eq!(iso.tick(t2 + 3 * PERIOD, at(900)), None);
    }
}
