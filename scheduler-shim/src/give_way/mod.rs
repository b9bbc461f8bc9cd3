//! Shrink before evict: lower-priority Pods that offered to give way in place (the
//! [`annotation::ANNOTATION`]) are shrunk towards their floor, from live figures, before anyone
//! is evicted for a Deferred resize.
//!
//! - [`annotation`]: what a Pod offers, and the node and namespace switches;
//! - [`plan`]: the pure planner the decision core calls (fewest evictions, then fewest Pods
//!   touched, then least taken);
//! - [`patch`]: a planned Pod-level shrink as per-container requests and limits, the shape both
//!   the `/resize` subresource and the standalone node take.
//!
//! Upstream kube-scheduler has no such step (it only evicts); `docs/upstream-differences.md` says
//! why headroom adds it and when it stays out of the way.

pub mod aftercare;
pub mod annotation;
pub mod patch;
pub mod plan;
#[cfg(test)]
mod tests;

use headroom_node_model::Resources;
use serde::{Deserialize, Serialize};

/// Reason of the Event on a Pod shrunk in place for another Pod's resize.
pub const REASON_GAVE_WAY: &str = "GaveWay";
/// Reason of the Warning Event on a Pod whose give-way annotation cannot be read.
pub const REASON_INVALID: &str = "InvalidGiveWay";
/// Reason of the Warning Event on a shrunk Pod that came under pressure right after its shrink.
pub const REASON_PRESSURE: &str = "GiveWayPressure";

/// What a Pod offered, as floors of its Pod-level requests (the sum over its containers).
/// A resource without a floor is not offered and never shrunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub cpu_floor_millis: Option<i64>,
    pub memory_floor_bytes: Option<i64>,
}

/// Whether a Pod may be shrunk, as its annotation and the operator's switches say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "detail")]
pub enum GiveWay {
    /// No annotation: never shrunk.
    #[default]
    NotOffered,
    Offered(Offer),
    /// The annotation cannot be read (the message says why); never shrunk until it is fixed.
    Invalid(String),
    /// The Pod offered, but an operator switched shrinking off for its namespace.
    NamespaceOff,
}

/// Live figures of one Pod from headroomd, fresh only: a backend leaves a figure `None` when
/// headroomd has none or when it is stale, and the planner then does not shrink on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveFigures {
    /// CPU usage of the Pod's cgroup, millicores.
    pub cpu_usage_millis: Option<i64>,
    /// Share of CFS periods throttled between the last two readings, per mille.
    pub cpu_throttled_permille: Option<u32>,
    /// `memory.current` − inactive file, bytes.
    pub memory_working_set_bytes: Option<i64>,
}

impl LiveFigures {
    /// From headroomd's figures: usage in cores, throttled ratio in [0, 1], working set in bytes.
    pub fn from_measured(
        cpu_usage_cores: Option<f64>,
        throttled_ratio: Option<f64>,
        working_set: Option<f64>,
    ) -> Self {
        let finite = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0);
        LiveFigures {
            // Saturating float-to-int casts: a hostile or broken figure cannot wrap.
            cpu_usage_millis: finite(cpu_usage_cores).map(|c| (c * 1000.0).ceil() as i64),
            cpu_throttled_permille: finite(throttled_ratio).map(|r| (r.min(1.0) * 1000.0).round() as u32),
            memory_working_set_bytes: finite(working_set).map(|b| b.ceil() as i64),
        }
    }
}

/// The node's rules for shrinking (stated in `docs/operations.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Off for the whole node (`--give-way off`, or the Node's annotation).
    pub enabled: bool,
    /// No CPU shrink of a Pod throttled in more than this share of periods (per mille).
    pub max_throttled_permille: u32,
    /// CPU is never shrunk below the live usage plus this share of it (percent).
    pub cpu_usage_margin_percent: u32,
    /// Memory is never shrunk below the working set plus this share of it (percent) ...
    pub memory_margin_percent: u32,
    /// ... and never by less margin than this (bytes).
    pub memory_margin_min_bytes: i64,
}

impl Policy {
    /// Shrinking off: the decision is upstream's, eviction only.
    pub const OFF: Policy = Policy {
        enabled: false,
        ..Policy::DEFAULT
    };
    /// The defaults: 10 % of periods throttled at most, 25 % CPU margin over usage, memory at
    /// least 10 % (and 32 MiB) over the working set.
    pub const DEFAULT: Policy = Policy {
        enabled: true,
        max_throttled_permille: 100,
        cpu_usage_margin_percent: 25,
        memory_margin_percent: 10,
        memory_margin_min_bytes: 32 << 20,
    };
}

impl Default for Policy {
    /// On: only Pods that offered are ever shrunk, so a node without such Pods decides as upstream.
    fn default() -> Self {
        Policy::DEFAULT
    }
}

/// One planned shrink: the Pod-level requests go from `from` to `to` (only resources the resize is
/// short of change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shrink {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub priority: i32,
    pub from: Resources,
    pub to: Resources,
    /// The live figures the plan used.
    pub live: LiveFigures,
}

impl Shrink {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// What the shrink gives back.
    pub fn freed(&self) -> Resources {
        self.from.saturating_sub(self.to).max(Resources::ZERO)
    }
}

/// Why a lower-priority Pod that could have given way was or was not shrunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub namespace: String,
    pub name: String,
    pub live: LiveFigures,
    /// `Some(to)` when shrunk.
    pub shrunk_to: Option<Resources>,
    /// In a sentence: why (not).
    pub reason: String,
}

/// The fresh figures of the Pod `uid` in a headroomd snapshot (with Pods): those measured within
/// `max_age` of `now` and not marked stale; all `None` for a Pod the snapshot does not have.
pub fn live_of(
    snapshot: &headroom_proto::v1::HeadroomSnapshot,
    uid: &str,
    now: std::time::SystemTime,
    max_age: std::time::Duration,
) -> LiveFigures {
    use headroom_proto::v1::Figure;
    let fresh = |f: &Option<Figure>| -> Option<f64> {
        let f = f.as_ref()?;
        let at = f.measured_at.as_ref()?;
        let measured = std::time::UNIX_EPOCH
            + std::time::Duration::new(u64::try_from(at.seconds).ok()?, u32::try_from(at.nanos).ok()?);
        let age = now.duration_since(measured).unwrap_or_default();
        (!f.stale && age <= max_age).then_some(f.value)
    };
    let Some(entry) = snapshot
        .pods
        .iter()
        .find(|p| !uid.is_empty() && p.pod.as_ref().is_some_and(|r| r.uid == uid))
    else {
        return LiveFigures::default();
    };
    let Some(pressure) = entry.pod_cgroup.as_ref() else {
        return LiveFigures::default();
    };
    // CFS throttles the innermost group over its quota first: a container can be throttled
    // while its Pod's own group is not, so the most throttled of them counts.
    let throttled = std::iter::once(pressure)
        .chain(entry.containers.iter().filter_map(|c| c.pressure.as_ref()))
        .filter_map(|p| fresh(&p.cpu_throttled_ratio))
        .reduce(f64::max);
    LiveFigures::from_measured(
        fresh(&pressure.cpu_usage_cores),
        throttled,
        fresh(&pressure.memory_working_set_bytes),
    )
}

/// Fills each Pod's [`LiveFigures`] from a headroomd snapshot ([`live_of`], by UID).
pub fn fill_live(
    snapshot: &headroom_proto::v1::HeadroomSnapshot,
    pods: &mut [crate::decide::PodInput],
    now: std::time::SystemTime,
    max_age: std::time::Duration,
) {
    for pod in pods.iter_mut() {
        pod.live = live_of(snapshot, &pod.uid, now, max_age);
    }
}

/// The operator's switches for shrink-before-evict, as the backends and `plan` take them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GiveWaySettings {
    pub policy: Policy,
    /// Namespaces whose Pods are never shrunk, whatever they offer.
    pub off_namespaces: std::collections::BTreeSet<String>,
}

/// The operator's switches, as flags of `plan`, `standalone`, `demo` and `kube`.
#[derive(Clone, Debug, clap::Args)]
pub struct GiveWayArgs {
    /// Shrink Pods that offered to give way (annotation headroom.io/give-way) before evicting.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub give_way: Switch,
    /// A namespace whose Pods are never shrunk, whatever they offer (repeatable).
    #[arg(long, value_name = "NAMESPACE")]
    pub give_way_off_namespace: Vec<String>,
    /// No CPU shrink of a Pod throttled in more than this share of its CFS periods.
    #[arg(long, default_value_t = 10, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub give_way_max_throttled_percent: u32,
    /// Memory is never shrunk below the working set plus this share of it (and at least 32Mi).
    #[arg(long, default_value_t = 10, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub give_way_memory_margin_percent: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl GiveWayArgs {
    pub fn settings(&self) -> GiveWaySettings {
        GiveWaySettings {
            policy: Policy {
                enabled: self.give_way == Switch::On,
                max_throttled_permille: self.give_way_max_throttled_percent * 10,
                memory_margin_percent: self.give_way_memory_margin_percent,
                ..Policy::DEFAULT
            },
            off_namespaces: self.give_way_off_namespace.iter().cloned().collect(),
        }
    }
}

/// One Pod's figures in a `plan --live` file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LiveEntry {
    cpu_usage: Option<String>,
    cpu_throttled_percent: Option<f64>,
    working_set: Option<String>,
}

/// `plan --live`: `NAMESPACE/NAME: {cpuUsage, cpuThrottledPercent, workingSet}` per Pod.
pub fn parse_live_file(text: &str) -> Result<std::collections::BTreeMap<String, LiveFigures>, String> {
    let entries: std::collections::BTreeMap<String, LiveEntry> =
        serde_yaml::from_str(text).map_err(|e| format!("live figures: {e}"))?;
    entries
        .into_iter()
        .map(|(key, e)| {
            let bad = |what: &str, m: String| format!("{key}: {what}: {m}");
            let usage = e
                .cpu_usage
                .map(|q| {
                    headroom_node_model::parse_cpu_millis(&q).map_err(|m| bad("cpuUsage", m.to_string()))
                })
                .transpose()?;
            let working_set = e
                .working_set
                .map(|q| {
                    headroom_node_model::parse_memory_bytes(&q).map_err(|m| bad("workingSet", m.to_string()))
                })
                .transpose()?;
            let throttled = match e.cpu_throttled_percent {
                Some(p) if !(0.0..=100.0).contains(&p) => {
                    return Err(bad("cpuThrottledPercent", format!("{p} is not in 0..100")));
                }
                p => p,
            };
            Ok((
                key,
                LiveFigures {
                    cpu_usage_millis: usage,
                    cpu_throttled_permille: throttled.map(|p| (p * 10.0).round() as u32),
                    memory_working_set_bytes: working_set,
                },
            ))
        })
        .collect()
}

/// The `GaveWay` Event's message on a shrunk Pod: what it gave and for whom.
pub fn gave_way_message(shrink: &Shrink, for_pod: &str, for_uid: &str, node: &str) -> String {
    format!(
        "Resized in place from {} to {} to make room for pod {for_pod} ({for_uid}) on node {node}",
        shrink.from, shrink.to
    )
}
