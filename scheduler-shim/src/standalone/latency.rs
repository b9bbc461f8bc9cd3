//! The latency of each step of a preempting resize, one record per resize and an hdrhistogram per
//! step (the benchmark reuses both).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The steps, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Resize asked for → the shim saw it Deferred.
    DeferredDetected,
    /// The decision core.
    Decision,
    /// The opted-in victims shrunk in place (admitted, actuated, counted by headroomd).
    GaveWay,
    /// The extra room reserved in headroomd's ledger.
    Reservation,
    /// First SIGTERM → every victim process gone and its cgroups removed.
    VictimsTerminated,
    /// The kubelet's retry admitted the resize and `ApplyResize` wrote the cgroups.
    Actuation,
    /// Of which headroomd's actuator itself: cgroup writes and their read-back, as `ApplyResize`
    /// reports it (the rest of `Actuation` is the gRPC round trip and the admission).
    CgroupWrites,
    /// The cgroup files read back equal to the new values.
    Verified,
}

impl Step {
    pub const ALL: [Step; 8] = [
        Step::DeferredDetected,
        Step::Decision,
        Step::GaveWay,
        Step::Reservation,
        Step::VictimsTerminated,
        Step::Actuation,
        Step::CgroupWrites,
        Step::Verified,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Step::DeferredDetected => "deferred_detected",
            Step::Decision => "decision",
            Step::GaveWay => "gave_way",
            Step::Reservation => "reservation",
            Step::VictimsTerminated => "victims_terminated",
            Step::Actuation => "actuation",
            Step::CgroupWrites => "cgroup_writes",
            Step::Verified => "verified",
        }
    }

    /// What a person reads in the demo.
    pub const fn describe(self) -> &'static str {
        match self {
            Step::DeferredDetected => "resize requested -> Deferred seen by the shim",
            Step::Decision => "decision (victims chosen)",
            Step::GaveWay => "opted-in Pods shrunk in place and counted",
            Step::Reservation => "room reserved in headroomd's ledger",
            Step::VictimsTerminated => "victims terminated, cgroups removed",
            Step::Actuation => "resize admitted and cgroups written (ApplyResize)",
            Step::CgroupWrites => "  of which the actuator's cgroup writes + read-back",
            Step::Verified => "cgroup values read back and verified",
        }
    }
}

/// One preempting resize: each step's own duration (ns), `None` for a step that did not run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepLatencies {
    /// `namespace/name` of the resizing Pod.
    pub pod: String,
    pub deferred_detected_ns: Option<u64>,
    pub decision_ns: Option<u64>,
    pub gave_way_ns: Option<u64>,
    pub reservation_ns: Option<u64>,
    pub victims_terminated_ns: Option<u64>,
    pub actuation_ns: Option<u64>,
    pub cgroup_writes_ns: Option<u64>,
    pub verified_ns: Option<u64>,
    /// Resize asked for → verified.
    pub total_ns: Option<u64>,
}

pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl StepLatencies {
    pub fn get(&self, step: Step) -> Option<u64> {
        match step {
            Step::DeferredDetected => self.deferred_detected_ns,
            Step::Decision => self.decision_ns,
            Step::GaveWay => self.gave_way_ns,
            Step::Reservation => self.reservation_ns,
            Step::VictimsTerminated => self.victims_terminated_ns,
            Step::Actuation => self.actuation_ns,
            Step::CgroupWrites => self.cgroup_writes_ns,
            Step::Verified => self.verified_ns,
        }
    }

    pub fn set(&mut self, step: Step, d: Duration) {
        let v = Some(nanos(d));
        match step {
            Step::DeferredDetected => self.deferred_detected_ns = v,
            Step::Decision => self.decision_ns = v,
            Step::GaveWay => self.gave_way_ns = v,
            Step::Reservation => self.reservation_ns = v,
            Step::VictimsTerminated => self.victims_terminated_ns = v,
            Step::Actuation => self.actuation_ns = v,
            Step::CgroupWrites => self.cgroup_writes_ns = v,
            Step::Verified => self.verified_ns = v,
        }
    }
}

/// A histogram per step plus one for the total, 1 ns .. 1 h at 3 significant digits.
#[derive(Debug, Clone)]
pub struct StepHistograms {
    steps: Vec<Histogram<u64>>,
    total: Histogram<u64>,
}

impl StepHistograms {
    pub fn new() -> Result<Self, hdrhistogram::CreationError> {
        let histogram = || Histogram::new_with_bounds(1, 3_600_000_000_000, 3);
        Ok(Self {
            steps: Step::ALL.iter().map(|_| histogram()).collect::<Result<_, _>>()?,
            total: histogram()?,
        })
    }
}

impl StepHistograms {
    pub fn record(&mut self, l: &StepLatencies) {
        for (i, step) in Step::ALL.iter().enumerate() {
            if let (Some(ns), Some(h)) = (l.get(*step), self.steps.get_mut(i)) {
                h.saturating_record(ns.max(1));
            }
        }
        if let Some(ns) = l.total_ns {
            self.total.saturating_record(ns.max(1));
        }
    }

    pub fn step(&self, step: Step) -> Option<&Histogram<u64>> {
        Step::ALL
            .iter()
            .position(|s| *s == step)
            .and_then(|i| self.steps.get(i))
    }

    pub fn total(&self) -> &Histogram<u64> {
        &self.total
    }
}
