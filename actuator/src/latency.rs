//! Per-phase resize latency: request received → plan ready → first write → last write → read
//! back and verified → effective. Every phase is measured from "received", in nanoseconds, into
//! its own hdrhistogram (exported on `/metrics` by the daemon as seconds).

use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    Planned,
    FirstWrite,
    LastWrite,
    Verified,
    Effective,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Planned,
        Phase::FirstWrite,
        Phase::LastWrite,
        Phase::Verified,
        Phase::Effective,
    ];

    /// Label value for metrics (`phase="first_write"`).
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Planned => "planned",
            Phase::FirstWrite => "first_write",
            Phase::LastWrite => "last_write",
            Phase::Verified => "verified",
            Phase::Effective => "effective",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// One resize's phases, as offsets from "received" (ns). Write phases are `None` when nothing
/// had to be written; `effective` until it was observed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseLatencies {
    pub planned_ns: u64,
    pub first_write_ns: Option<u64>,
    pub last_write_ns: Option<u64>,
    pub verified_ns: u64,
    pub effective_ns: Option<u64>,
}

impl PhaseLatencies {
    pub fn get(&self, phase: Phase) -> Option<u64> {
        match phase {
            Phase::Planned => Some(self.planned_ns),
            Phase::FirstWrite => self.first_write_ns,
            Phase::LastWrite => self.last_write_ns,
            Phase::Verified => Some(self.verified_ns),
            Phase::Effective => self.effective_ns,
        }
    }
}

/// Nanoseconds from `from` to `to` (0 if `to` is earlier), saturating at u64::MAX.
pub fn nanos_between(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
}

/// Highest value tracked: one hour; larger values are clamped.
const MAX_TRACKED_NS: u64 = 3_600 * 1_000_000_000;

/// One histogram per phase.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    histograms: Vec<Histogram<u64>>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> Self {
        let histograms = Phase::ALL
            .iter()
            // Constant, valid bounds: this cannot fail.
            .map(|_| Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3).expect("valid histogram bounds"))
            .collect();
        Self { histograms }
    }

    pub fn record(&mut self, l: &PhaseLatencies) {
        for phase in Phase::ALL {
            if let Some(ns) = l.get(phase) {
                self.record_phase(phase, ns);
            }
        }
    }

    pub fn record_phase(&mut self, phase: Phase, ns: u64) {
        if let Some(h) = self.histograms.get_mut(phase.index()) {
            h.saturating_record(ns.clamp(1, MAX_TRACKED_NS));
        }
    }

    /// The histogram of `phase`, in nanoseconds.
    pub fn histogram(&self, phase: Phase) -> Option<&Histogram<u64>> {
        self.histograms.get(phase.index())
    }

    pub fn reset(&mut self) {
        self.histograms.iter_mut().for_each(Histogram::reset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_each_phase() {
        let mut r = LatencyRecorder::new();
        r.record(&PhaseLatencies {
            planned_ns: 1_000,
            first_write_ns: Some(2_000),
            last_write_ns: Some(9_000),
            verified_ns: 12_000,
            effective_ns: None,
        });
        r.record(&PhaseLatencies {
            planned_ns: 3_000,
            verified_ns: 4_000,
            ..Default::default()
        });
        let h = |p| r.histogram(p).expect("phase histogram");
        assert_eq!(h(Phase::Planned).len(), 2);
        assert_eq!(h(Phase::FirstWrite).len(), 1);
        assert_eq!(h(Phase::Effective).len(), 0);
        assert!(h(Phase::Verified).value_at_quantile(1.0) >= 12_000);
        assert!(h(Phase::Verified).equivalent(h(Phase::Verified).value_at_quantile(1.0), 12_000));
        r.reset();
        assert_eq!(r.histogram(Phase::Planned).expect("phase").len(), 0);
    }
}
