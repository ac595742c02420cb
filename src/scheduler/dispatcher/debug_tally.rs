//! Debug lines that would come once per offer, update or call. At 10,000 agents a launch
//! wave is tens of thousands of them within seconds, which at the app definition's
//! `-loglevel=debug` costs more than the work they describe. So each kind gets a budget of
//! individual lines per period; past it the lines are only counted, and one summary line
//! per period gives the counts. A small cluster still sees every line.
//!
//! Owned by the dispatcher thread (no sharing). Nothing is formatted or counted when debug
//! is off.

use std::collections::BTreeMap;

/// Individual lines per kind and period before they are only counted.
const BUDGET: u64 = 20;
/// The length of a period.
const PERIOD_MS: u64 = 5_000;

#[derive(Default)]
pub struct DebugTally {
    /// (kind, detail) -> events this period; detail is short and never names a node.
    counts: BTreeMap<(&'static str, String), u64>,
    /// Individual lines let through this period, per kind.
    shown: BTreeMap<&'static str, u64>,
    /// Whether some line was held back this period (only then is a summary written).
    held_back: bool,
    started_ms: Option<u64>,
}

impl DebugTally {
    /// Counts one event; true when its own debug line should still be written. `detail` is
    /// only called when debug logging is on.
    pub fn note(
        &mut self,
        now_ms: u64,
        kind: &'static str,
        detail: impl FnOnce() -> String,
    ) -> bool {
        if !log::log_enabled!(log::Level::Debug) {
            return false;
        }
        self.count(now_ms, kind, detail())
    }

    fn count(&mut self, now_ms: u64, kind: &'static str, detail: String) -> bool {
        self.started_ms.get_or_insert(now_ms);
        *self.counts.entry((kind, detail)).or_default() += 1;
        let shown = self.shown.entry(kind).or_default();
        if *shown < BUDGET {
            *shown += 1;
            true
        } else {
            self.held_back = true;
            false
        }
    }

    /// Writes the summary of a period that has ended (if lines were held back) and starts
    /// a new one. Called after every batch of inputs: a quiet scheduler still gets one at
    /// its next heartbeat.
    pub fn flush_due(&mut self, now_ms: u64) {
        if let Some(line) = self.summary(now_ms) {
            log::debug!("{line}");
        }
    }

    fn summary(&mut self, now_ms: u64) -> Option<String> {
        let started = self.started_ms?;
        let elapsed = now_ms.saturating_sub(started);
        if elapsed < PERIOD_MS {
            return None;
        }
        let counts = std::mem::take(&mut self.counts);
        let held_back = std::mem::take(&mut self.held_back);
        self.shown.clear();
        self.started_ms = None;
        if !held_back {
            return None;
        }
        let parts: Vec<String> = counts
            .into_iter()
            .map(|((kind, detail), n)| format!("{n} {kind} {detail}").trim_end().to_string())
            .collect();
        Some(format!(
            "in the last {:.1} s (past {BUDGET} lines of a kind, only counted): {}",
            elapsed as f64 / 1000.0,
            parts.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_budget_lines_are_counted_and_summed_up_once_per_period() {
        let mut t = DebugTally::default();
        let shown = (0..10_000)
            .filter(|i| t.count(1_000 + i / 10, "task update", "TASK_RUNNING".into()))
            .count();
        assert_eq!(shown as u64, BUDGET);
        assert!(t.count(1_500, "call sent", "ACKNOWLEDGE".into()));
        assert_eq!(t.summary(5_999), None, "the period has not ended");
        let line = t.summary(6_000).expect("a summary");
        assert!(line.contains("in the last 5.0 s"), "{line}");
        assert!(line.contains("10000 task update TASK_RUNNING"), "{line}");
        assert!(line.contains("1 call sent ACKNOWLEDGE"), "{line}");
        // A new period: the budget is back.
        assert!(t.count(7_000, "task update", "TASK_RUNNING".into()));
    }

    #[test]
    fn no_summary_when_every_line_was_written() {
        let mut t = DebugTally::default();
        for _ in 0..BUDGET {
            assert!(t.count(0, "offer declined", "refuse 5 s".into()));
        }
        assert_eq!(t.summary(60_000), None);
        assert_eq!(t.summary(120_000), None, "the counts were reset");
    }
}
