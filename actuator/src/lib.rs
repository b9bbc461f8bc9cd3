//! headroom's actuator: applies in-place resizes to Pod and container cgroups (v1 and v2), in
//! the kubelet's order, all or nothing, with an intent record for crash recovery and the
//! latency of every phase in hdrhistogram.
//!
//! - [`convert`]: Kubernetes → cgroup values (shares, quota, v2 weights), pure.
//! - [`plan`]: current + desired values → ordered writes, pure.
//! - cgroup files, values, setup detection and path confinement: [`headroom_cgroupfs`].
//! - [`apply`]: [`Actuator`] (writes, read-back verification, rollback, recovery).
//! - [`layout`]: Pod cgroup roots and the standalone [`PodCgroups`] helper.
//! - [`intent`], [`latency`].

pub mod apply;
pub mod convert;
pub mod intent;
pub mod latency;
pub mod layout;
pub mod plan;

// The cgroup values and path confinement are cgroupfs's; the actuator speaks in them.
pub use headroom_cgroupfs::{path, values};

pub use apply::{
    ActuateError, Actuator, ActuatorConfig, Recovery, RecoveryPolicy, ResizeReport, ResizeRequest,
};
pub use convert::{ConversionConfig, KubeResources, WeightFormula};
pub use headroom_cgroupfs::{CgroupSetup, CgroupVersion, detect_setup};
pub use latency::{LatencyRecorder, Phase, PhaseLatencies};
pub use layout::{PodCgroups, Roots, ScratchRoots};
pub use values::{CgroupValues, CpuMax, CpuQuota, CpuRequest, MemoryMax, PodValues, Setting};
