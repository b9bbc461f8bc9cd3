//! grpc.health.v1 as the DaemonSet's probes read it: readiness and liveness are two different
//! questions, answered by two service names.
//!
//! - `""` and `headroom.v1.Headroom` (readiness): NOT_SERVING until the Pod source has listed,
//!   the probes are attached (or knowingly skipped) and the pipeline publishes; NOT_SERVING again
//!   whenever one of them fails. A node that is not ready takes no part in decisions.
//! - `liveness`: NOT_SERVING only when the pipeline has stopped publishing for
//!   [`LIVENESS_STALL`]: a watch outage is a reason to be unready, never to be restarted.
use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use tonic_health::{ServingStatus, server::HealthReporter};

use crate::{
    collector::{ProbeReport, ProbeReportCell},
    pipeline::{PodSource, Snapshot, SnapshotReader},
};

/// The service name the liveness probe checks.
pub const LIVENESS_SERVICE: &str = "liveness";
/// The service name of headroom's own API (follows readiness).
pub const HEADROOM_SERVICE: &str = "headroom.v1.Headroom";

/// The aggregator publishes at least every tick (100 ms) while it runs.
const SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(5);
/// The collector reads the probes every cycle (100 ms).
const PROBE_REPORT_MAX_AGE: Duration = Duration::from_secs(5);
/// A pipeline this long without a snapshot is hung: restart it.
pub const LIVENESS_STALL: Duration = Duration::from_secs(60);

/// What readiness looks at, read fresh on every evaluation.
#[derive(Clone)]
pub struct ReadinessInputs {
    /// Snapshots.
    pub reader: SnapshotReader,
    /// The Pod source (down until it has listed).
    pub pod_source: Arc<dyn PodSource>,
    /// The probes' report, `None` when this daemon runs no collector.
    pub probes: Option<ProbeReportCell>,
    /// Why the probes are not loaded, when that was a decision (skipped on purpose or allowed
    /// to be missing): not a reason to be unready.
    pub probes_skipped: Option<String>,
}

/// Why the daemon is not ready, `Ok` when it is. Pure, so each rule is tested on its own.
pub fn evaluate(
    snapshot: &Snapshot,
    pod_source_down: bool,
    probes: Option<&ProbeReport>,
    probes_skipped: bool,
    now: SystemTime,
    now_mono: Instant,
) -> Result<(), String> {
    if pod_source_down {
        return Err("the Pod source has not listed, or its watch failed".into());
    }
    let age = now.duration_since(snapshot.generated_at).unwrap_or_default();
    if age > SNAPSHOT_MAX_AGE {
        return Err(format!("no snapshot for {} s", age.as_secs()));
    }
    match probes {
        None => Ok(()),
        Some(_) if probes_skipped => Ok(()),
        Some(r) if !r.loaded => match r.updated_at {
            // The collector has not read the probes yet.
            None => Err("probes not read yet".into()),
            Some(_) => Err("probes not loaded".into()),
        },
        Some(r) => {
            if r.programs_attached == 0 {
                return Err("no probe program attached".into());
            }
            if let Some(e) = &r.read_error {
                return Err(format!("probe maps cannot be read: {e}"));
            }
            match r.updated_at {
                Some(t) if now_mono.duration_since(t) <= PROBE_REPORT_MAX_AGE => Ok(()),
                Some(t) => Err(format!(
                    "probes not read for {} s",
                    now_mono.duration_since(t).as_secs()
                )),
                None => Err("probes not read yet".into()),
            }
        }
    }
}

/// Whether the pipeline still publishes.
pub fn alive(snapshot: &Snapshot, now: SystemTime) -> bool {
    now.duration_since(snapshot.generated_at).unwrap_or_default() <= LIVENESS_STALL
}

async fn set(health: &HealthReporter, ready: bool) {
    let status = if ready {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    health.set_service_status("", status).await;
    health.set_service_status(HEADROOM_SERVICE, status).await;
}

/// Sets the statuses once now, then keeps them current every `period` until the task is
/// aborted. Transitions are logged with their reason.
pub async fn spawn(
    health: HealthReporter,
    inputs: ReadinessInputs,
    period: Duration,
) -> tokio::task::JoinHandle<()> {
    let check = move |last: Option<bool>| {
        let inputs = inputs.clone();
        let health = health.clone();
        async move {
            let snapshot = inputs.reader.load();
            let report = inputs.probes.as_ref().map(|c| c.load_full());
            let verdict = evaluate(
                &snapshot,
                inputs.pod_source.is_down(),
                report.as_deref(),
                inputs.probes_skipped.is_some(),
                SystemTime::now(),
                Instant::now(),
            );
            let ready = verdict.is_ok();
            if last != Some(ready) {
                match &verdict {
                    Ok(()) => tracing::info!("ready (grpc health SERVING)"),
                    Err(why) if last.is_some() => tracing::warn!(%why, "not ready (grpc health NOT_SERVING)"),
                    Err(why) => tracing::info!(%why, "not ready yet (grpc health NOT_SERVING)"),
                }
                set(&health, ready).await;
            }
            let live = if alive(&snapshot, SystemTime::now()) {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            health.set_service_status(LIVENESS_SERVICE, live).await;
            ready
        }
    };
    let mut last = Some(check(None).await);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            last = Some(check(last).await);
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    fn snapshot(age: Duration, now: SystemTime) -> Snapshot {
        let (_handle, reader) = crate::pipeline::spawn(
            Default::default(),
            Arc::new(crate::node::NoResolver),
            Arc::new(crate::pipeline::InMemoryPodSource::default()),
        )
        .unwrap();
        let mut s = (*reader.load()).clone();
        s.generated_at = now - age;
        s
    }

    fn report(attached: usize, read: Option<Duration>, now: Instant) -> ProbeReport {
        ProbeReport {
            loaded: true,
            programs_attached: attached,
            programs_total: 7,
            health: Default::default(),
            map_memory_bytes: 0,
            map_cgroups: 0,
            read_error: None,
            updated_at: read.map(|d| now - d),
            stats: HashMap::new(),
            ..ProbeReport::default()
        }
    }

    #[test]
    fn each_condition_on_its_own() {
        let (now, mono) = (SystemTime::now(), Instant::now() + Duration::from_secs(3600));
        let fresh = snapshot(Duration::from_millis(100), now);
        let ok = report(7, Some(Duration::from_millis(50)), mono);
        assert_eq!(evaluate(&fresh, false, Some(&ok), false, now, mono), Ok(()));
        assert_eq!(evaluate(&fresh, false, None, false, now, mono), Ok(()));
        // The Pod source has not listed / its watch failed.
        assert!(evaluate(&fresh, true, Some(&ok), false, now, mono).is_err());
        // The pipeline stopped publishing.
        let old = snapshot(Duration::from_secs(30), now);
        assert!(evaluate(&old, false, Some(&ok), false, now, mono).is_err());
        assert!(alive(&old, now));
        assert!(!alive(&snapshot(Duration::from_secs(61), now), now));
        // Probes loaded but nothing attached, not read yet, no longer read, or unreadable.
        assert!(
            evaluate(
                &fresh,
                false,
                Some(&report(0, Some(Duration::ZERO), mono)),
                false,
                now,
                mono
            )
            .is_err()
        );
        assert!(evaluate(&fresh, false, Some(&report(7, None, mono)), false, now, mono).is_err());
        let silent = report(7, Some(Duration::from_secs(10)), mono);
        assert!(evaluate(&fresh, false, Some(&silent), false, now, mono).is_err());
        let mut broken = ok.clone();
        broken.read_error = Some("EPERM".into());
        assert!(evaluate(&fresh, false, Some(&broken), false, now, mono).is_err());
        // Skipped on purpose (--probes off, or allowed to be missing): ready without them.
        assert_eq!(
            evaluate(&fresh, false, Some(&ProbeReport::default()), true, now, mono),
            Ok(())
        );
    }
}
