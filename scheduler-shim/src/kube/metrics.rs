//! The shim's Prometheus metrics (text exposition format 0.0.4), kept in plain atomics and small
//! maps so that recording never allocates on the hot path of a cycle.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A watch that failed this recently, with no event since, makes the shim unready. The
/// watchers' backoff retries at least every 30 s, so a watch that keeps failing stays unready,
/// and one whose retry succeeded quietly (no change to report) is ready again after this long.
pub const WATCH_FAILURE_UNREADY_FOR: Duration = Duration::from_secs(45);

/// Upper bounds (seconds) of the end-to-end latency histogram: decision → resize actuated.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[derive(Default)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
pub struct Metrics {
    decisions: Mutex<BTreeMap<&'static str, u64>>,
    watch_errors: Mutex<BTreeMap<&'static str, u64>>,
    watch_lists: Mutex<BTreeMap<&'static str, u64>>,
    victims: Mutex<BTreeMap<&'static str, u64>>,
    blocked: Mutex<BTreeMap<&'static str, u64>>,
    headroomd_stream_errors: AtomicU64,
    replanned: AtomicU64,
    would_preempt: AtomicU64,
    preemption_failures: AtomicU64,
    gave_way: AtomicU64,
    invalid_give_way: AtomicU64,
    give_way_pressure: AtomicU64,
    resizes_completed: AtomicU64,
    resizes_timed_out: AtomicU64,
    resizes_abandoned: AtomicU64,
    reconcile_errors: AtomicU64,
    reconciles: AtomicU64,
    in_flight: AtomicU64,
    end_to_end: Mutex<Histogram>,
    latencies: Mutex<Vec<Duration>>,
    ready: AtomicBool,
    /// The last failure of each watch that has not seen an event since.
    watch_failing: Mutex<BTreeMap<&'static str, Instant>>,
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, key: &'static str, by: u64) {
    // A poisoned lock only means another thread panicked mid-increment; the counts stay usable.
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    *map.entry(key).or_default() += by;
}

impl Metrics {
    pub fn watch_error(&self, resource: &'static str) {
        bump(&self.watch_errors, resource, 1);
        self.watch_failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(resource, Instant::now());
    }
    /// The watch of `resource` listed in full: at start, and again when its resource version
    /// expired (410 Gone) or the list failed part-way.
    pub fn watch_listed(&self, resource: &'static str) {
        bump(&self.watch_lists, resource, 1);
    }
    /// The watch of `resource` delivered an event: it works again.
    pub fn watch_ok(&self, resource: &'static str) {
        let mut failing = self.watch_failing.lock().unwrap_or_else(|p| p.into_inner());
        if !failing.is_empty() {
            failing.remove(resource);
        }
    }
    /// Watches that failed within [`WATCH_FAILURE_UNREADY_FOR`] and saw no event since.
    pub fn failing_watches(&self, now: Instant) -> Vec<&'static str> {
        self.watch_failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) < WATCH_FAILURE_UNREADY_FOR)
            .map(|(r, _)| *r)
            .collect()
    }
    pub fn decision(&self, outcome: &'static str) {
        bump(&self.decisions, outcome, 1);
    }
    pub fn preempted(&self, mode: &'static str, victims: u64) {
        bump(&self.victims, mode, victims);
    }
    /// A preemption not made because headroomd's live headroom was not fresh (`stale`,
    /// `unreachable`).
    pub fn preemption_blocked(&self, reason: &'static str) {
        bump(&self.blocked, reason, 1);
    }
    pub fn blocked_count(&self) -> u64 {
        self.blocked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .sum()
    }
    /// headroomd's `WatchHeadroom` stream failed or ended (subscribed again with backoff).
    pub fn headroomd_stream_error(&self) {
        self.headroomd_stream_errors.fetch_add(1, Ordering::Relaxed);
    }
    /// A preemption given up before any eviction because a higher-priority resize arrived.
    pub fn replanned(&self) {
        self.replanned.fetch_add(1, Ordering::Relaxed);
    }
    pub fn would_preempt(&self, victims: u64) {
        self.would_preempt.fetch_add(victims, Ordering::Relaxed);
    }
    /// A lower-priority Pod shrunk in place for a resize.
    pub fn gave_way(&self) {
        self.gave_way.fetch_add(1, Ordering::Relaxed);
    }
    /// A Pod that gave way came under pressure within the watch after its shrink.
    pub fn give_way_pressure(&self) {
        self.give_way_pressure.fetch_add(1, Ordering::Relaxed);
    }
    /// A Pod's `headroom.io/give-way` annotation could not be read.
    pub fn invalid_give_way(&self) {
        self.invalid_give_way.fetch_add(1, Ordering::Relaxed);
    }
    pub fn preemption_failed(&self) {
        self.preemption_failures.fetch_add(1, Ordering::Relaxed);
    }
    pub fn reconciled(&self, ok: bool) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.reconcile_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
    pub fn set_in_flight(&self, n: usize) {
        self.in_flight.store(n as u64, Ordering::Relaxed);
    }
    pub fn timed_out(&self) {
        self.resizes_timed_out.fetch_add(1, Ordering::Relaxed);
    }
    pub fn abandoned(&self) {
        self.resizes_abandoned.fetch_add(1, Ordering::Relaxed);
    }
    /// A preempted-for resize was actuated by the kubelet, `latency` after the decision.
    pub fn completed(&self, latency: Duration) {
        self.resizes_completed.fetch_add(1, Ordering::Relaxed);
        let seconds = latency.as_secs_f64();
        let mut h = self.end_to_end.lock().unwrap_or_else(|p| p.into_inner());
        for (bucket, bound) in h.buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
        drop(h);
        self.latencies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(latency);
    }
    /// Every end-to-end latency recorded so far, in order.
    pub fn latencies(&self) -> Vec<Duration> {
        self.latencies.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn completed_count(&self) -> u64 {
        self.resizes_completed.load(Ordering::Relaxed)
    }
    pub fn watch_error_count(&self) -> u64 {
        self.watch_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .sum()
    }
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }
    /// Synced once, and no watch failing now.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) && self.failing_watches(Instant::now()).is_empty()
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            name.to_string()
        };
        let mut lines = Vec::new();
        let name = family(
            "headroom_shim_decisions_total",
            "counter",
            "Decisions on Deferred resizes, by outcome.",
        );
        // Every outcome from the start, at 0: rate() and dashboards see a series before the
        // first decision of that kind, and a counter appearing later is not a missed increase.
        let mut decisions = self.decisions.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for outcome in crate::decide::Outcome::ALL {
            decisions.entry(outcome.as_str()).or_insert(0);
        }
        for (outcome, n) in &decisions {
            lines.push(format!("{name}{{outcome=\"{outcome}\"}} {n}"));
        }
        out.push_str(&lines.join("\n"));
        if !lines.is_empty() {
            out.push('\n');
        }
        let push_map = |out: &mut String,
                        name: &str,
                        help: &str,
                        label: &str,
                        map: &Mutex<BTreeMap<&'static str, u64>>,
                        known: &[&'static str]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let mut map = map.lock().unwrap_or_else(|p| p.into_inner()).clone();
            for key in known {
                map.entry(key).or_insert(0);
            }
            for (key, n) in &map {
                let _ = writeln!(out, "{name}{{{label}=\"{key}\"}} {n}");
            }
        };
        push_map(
            &mut out,
            "headroom_shim_victims_total",
            "Pods preempted, by mode.",
            "mode",
            &self.victims,
            &["delete", "eviction"],
        );
        push_map(
            &mut out,
            "headroom_shim_preemptions_blocked_total",
            "Preemptions not made because headroomd's live headroom was stale or unreachable, by reason.",
            "reason",
            &self.blocked,
            &["stale", "unreachable"],
        );
        push_map(
            &mut out,
            "headroom_shim_watch_errors_total",
            "Watch errors (retried with backoff), by resource.",
            "resource",
            &self.watch_errors,
            &[],
        );
        push_map(
            &mut out,
            "headroom_shim_watch_lists_total",
            "Full lists by resource: one at start, one more each time a watch had to re-list (410 Gone).",
            "resource",
            &self.watch_lists,
            &[],
        );
        let counters = [
            (
                "headroom_shim_dry_run_would_preempt_total",
                "Pods that would have been preempted in dry-run mode.",
                &self.would_preempt,
            ),
            (
                "headroom_shim_preemption_failures_total",
                "Preemptions abandoned because an API call failed.",
                &self.preemption_failures,
            ),
            (
                "headroom_shim_give_way_shrinks_total",
                "Lower-priority Pods shrunk in place (they offered with headroom.io/give-way) instead of evicted.",
                &self.gave_way,
            ),
            (
                "headroom_shim_give_way_pressure_total",
                "Pods that gave way and were throttled or near their memory request within 120 s after.",
                &self.give_way_pressure,
            ),
            (
                "headroom_shim_give_way_invalid_annotations_total",
                "headroom.io/give-way annotations refused as malformed (one per Pod and value).",
                &self.invalid_give_way,
            ),
            (
                "headroom_shim_replans_total",
                "Preemptions given up before any eviction because a higher-priority resize arrived.",
                &self.replanned,
            ),
            (
                "headroom_shim_headroomd_stream_errors_total",
                "headroomd WatchHeadroom streams that failed or ended (resubscribed with backoff).",
                &self.headroomd_stream_errors,
            ),
            (
                "headroom_shim_resizes_completed_total",
                "Preempted-for resizes the kubelet actuated.",
                &self.resizes_completed,
            ),
            (
                "headroom_shim_resizes_timed_out_total",
                "Preempted-for resizes not actuated within the timeout.",
                &self.resizes_timed_out,
            ),
            (
                "headroom_shim_resizes_abandoned_total",
                "Preempted-for resizes whose Pod went away or was replaced.",
                &self.resizes_abandoned,
            ),
            (
                "headroom_shim_reconciles_total",
                "Reconcile cycles.",
                &self.reconciles,
            ),
            (
                "headroom_shim_reconcile_errors_total",
                "Reconcile cycles that failed.",
                &self.reconcile_errors,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP headroom_shim_in_flight_resizes Preempted-for resizes waiting for the kubelet.\n\
             # TYPE headroom_shim_in_flight_resizes gauge\nheadroom_shim_in_flight_resizes {}",
            self.in_flight.load(Ordering::Relaxed)
        );
        let name = "headroom_shim_resize_end_to_end_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} From the preemption decision to the resize actuated (PodResizeInProgress gone, allocatedResources updated).\n# TYPE {name} histogram"
        );
        let h = self.end_to_end.lock().unwrap_or_else(|p| p.into_inner());
        for (bound, n) in LATENCY_BUCKETS.iter().zip(h.buckets) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}",
            h.count, h.sum, h.count
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.decision("preempt");
        m.preempted("delete", 2);
        m.completed(Duration::from_millis(700));
        let text = m.render();
        assert!(
            text.contains("headroom_shim_decisions_total{outcome=\"preempt\"} 1"),
            "{text}"
        );
        // The outcomes not seen yet are there at 0 (dashboards and rate() need the series).
        assert!(
            text.contains("headroom_shim_decisions_total{outcome=\"deferred\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("headroom_shim_victims_total{mode=\"delete\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("headroom_shim_resize_end_to_end_seconds_bucket{le=\"0.5\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("headroom_shim_resize_end_to_end_seconds_bucket{le=\"1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("headroom_shim_resize_end_to_end_seconds_count 1"),
            "{text}"
        );
    }
}
