//! After a shrink: the Pod is watched for [`WATCH_FOR`]; if its throttling or its working set
//! crosses a threshold in that time, it gave away more than it could (its floor is too low), and
//! the backend reports it once (a Warning `GiveWayPressure` Event and a metric).

use std::time::{Duration, Instant};

use headroom_node_model::Resources;

use super::LiveFigures;

/// How long a shrunk Pod is watched.
pub const WATCH_FOR: Duration = Duration::from_secs(120);
/// Throttled in more than this share of CFS periods (per mille) after a CPU shrink.
pub const THROTTLED_PERMILLE: u32 = 250;
/// A working set above this share (percent) of the shrunk memory request.
pub const WORKING_SET_PERCENT: i64 = 90;

/// A Pod shrunk in place, being watched.
#[derive(Clone, Debug)]
pub struct Watched {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Its requests before and after the shrink.
    pub from: Resources,
    pub to: Resources,
    /// The Pod it made room for, `namespace/name`.
    pub for_pod: String,
    pub since: Instant,
}

impl Watched {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why `w` is under pressure on its figures `live`, if it is. Only what it gave away counts: CPU
/// throttling after a CPU shrink, the working set after a memory shrink.
pub fn pressure(w: &Watched, live: &LiveFigures) -> Option<String> {
    let mut why = Vec::new();
    if w.to.cpu_millis < w.from.cpu_millis
        && let Some(t) = live.cpu_throttled_permille
        && t > THROTTLED_PERMILLE
    {
        why.push(format!(
            "throttled in {}.{}% of CFS periods (above {}%)",
            t / 10,
            t % 10,
            THROTTLED_PERMILLE / 10
        ));
    }
    if w.to.memory_bytes < w.from.memory_bytes
        && let Some(ws) = live.memory_working_set_bytes
        && ws.saturating_mul(100) > w.to.memory_bytes.saturating_mul(WORKING_SET_PERCENT)
    {
        why.push(format!(
            "working set {} is above {WORKING_SET_PERCENT}% of its {} request",
            headroom_node_model::format_memory_bytes(ws),
            headroom_node_model::format_memory_bytes(w.to.memory_bytes)
        ));
    }
    if why.is_empty() {
        return None;
    }
    Some(format!(
        "{} after giving way to {} ({} → {}): {}; raise its headroom.io/give-way floor, or resize it back up",
        humantime(w.since.elapsed()),
        w.for_pod,
        w.from,
        w.to,
        why.join(", ")
    ))
}

fn humantime(d: Duration) -> String {
    format!("{} s", d.as_secs())
}

/// Checks every watched Pod: returns the ones under pressure (each reported once: removed from
/// `watched`) with why, and drops those watched long enough.
pub fn check(
    watched: &mut Vec<Watched>,
    live: impl Fn(&str) -> Option<LiveFigures>,
    now: Instant,
) -> Vec<(Watched, String)> {
    let mut reports = Vec::new();
    watched.retain(|w| {
        if now.saturating_duration_since(w.since) > WATCH_FOR {
            return false;
        }
        match live(&w.uid).and_then(|l| pressure(w, &l)) {
            Some(why) => {
                reports.push((w.clone(), why));
                false
            }
            None => true,
        }
    });
    reports
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MI: i64 = 1 << 20;

    fn watched(from: Resources, to: Resources) -> Watched {
        Watched {
            namespace: "default".into(),
            name: "low".into(),
            uid: "u".into(),
            from,
            to,
            for_pod: "default/high".into(),
            since: Instant::now(),
        }
    }

    #[test]
    fn only_what_was_given_away_counts() {
        let cpu = watched(Resources::new(3000, 512 * MI), Resources::new(1000, 512 * MI));
        let busy = LiveFigures {
            cpu_throttled_permille: Some(600),
            memory_working_set_bytes: Some(500 * MI),
            ..LiveFigures::default()
        };
        let why = pressure(&cpu, &busy).unwrap();
        assert!(
            why.contains("throttled in 60.0%") && !why.contains("working set"),
            "{why}"
        );
        let memory = watched(Resources::new(1000, 512 * MI), Resources::new(1000, 128 * MI));
        let why = pressure(&memory, &busy).unwrap();
        assert!(
            why.contains("working set 500Mi") && !why.contains("throttled"),
            "{why}"
        );
        let quiet = LiveFigures {
            cpu_throttled_permille: Some(100),
            memory_working_set_bytes: Some(100 * MI),
            ..LiveFigures::default()
        };
        assert_eq!(pressure(&cpu, &quiet), None);
        assert_eq!(pressure(&memory, &quiet), None);
    }

    #[test]
    fn reported_once_and_forgotten_after_the_watch() {
        let mut list = vec![watched(Resources::new(3000, 0), Resources::new(1000, 0))];
        let busy = |_: &str| {
            Some(LiveFigures {
                cpu_throttled_permille: Some(900),
                ..LiveFigures::default()
            })
        };
        assert_eq!(check(&mut list, busy, Instant::now()).len(), 1);
        assert!(list.is_empty());
        let mut list = vec![watched(Resources::new(3000, 0), Resources::new(1000, 0))];
        let later = Instant::now() + WATCH_FOR + Duration::from_secs(1);
        assert!(check(&mut list, busy, later).is_empty());
        assert!(list.is_empty(), "still watched after {WATCH_FOR:?}");
    }
}
