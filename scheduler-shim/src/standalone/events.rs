//! The events store: `core/v1` Events as the kubelet and the scheduler post them, listed like
//! `kubectl get events` (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE).

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// Event reasons and sources, word for word (pkg/kubelet/events, pkg/scheduler).
pub mod reasons {
    pub const RESIZE_DEFERRED: &str = "ResizeDeferred";
    pub const RESIZE_INFEASIBLE: &str = "ResizeInfeasible";
    pub const RESIZE_STARTED: &str = "ResizeStarted";
    pub const RESIZE_COMPLETED: &str = "ResizeCompleted";
    pub const RESIZE_ERROR: &str = "ResizeError";
    pub const PREEMPTED: &str = "Preempted";
    pub const KILLING: &str = "Killing";
    pub const SCHEDULED: &str = "Scheduled";
    pub const STARTED: &str = "Started";
    pub const NORMAL: &str = "Normal";
    pub const WARNING: &str = "Warning";
    pub const KUBELET: &str = "kubelet";
    pub const SCHEDULER: &str = "default-scheduler";
}

/// Events a node keeps; the oldest quarter goes when it is full.
pub const KEPT_EVENTS: usize = 4_096;

#[derive(Debug, Default)]
pub struct EventStore {
    events: Vec<Event>,
    seq: u64,
}

impl EventStore {
    /// Records an event about `pod`. As the API server's event correlator does, an event equal
    /// to the newest one of its object (same type, reason, message) bumps `count` instead.
    pub fn record(&mut self, pod: &Pod, type_: &str, reason: &str, message: String, source: &str) {
        let now = Time(jiff::Timestamp::now());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let same = |e: &Event| {
            e.involved_object.name.as_deref() == Some(name.as_str())
                && e.type_.as_deref() == Some(type_)
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message.as_str())
        };
        if let Some(last) = self.events.last_mut().filter(|e| same(e)) {
            last.count = Some(last.count.unwrap_or(1).saturating_add(1));
            last.last_timestamp = Some(now);
            return;
        }
        self.seq += 1;
        // The API server forgets events after an hour (--event-ttl); a standalone node running
        // for days keeps the latest ones only.
        if self.events.len() >= KEPT_EVENTS {
            self.events.drain(..KEPT_EVENTS / 4);
        }
        let namespace = pod.metadata.namespace.clone();
        self.events.push(Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:016x}", self.seq)),
                namespace: namespace.clone(),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace,
                uid: pod.metadata.uid.clone(),
                ..ObjectReference::default()
            },
            type_: Some(type_.into()),
            reason: Some(reason.into()),
            message: Some(message),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(EventSource {
                component: Some(source.into()),
                host: None,
            }),
            reporting_component: Some(source.into()),
            ..Event::default()
        });
    }

    /// Events, oldest first; only those about `name` when given
    /// (`--field-selector involvedObject.name=NAME`).
    pub fn list(&self, name: Option<&str>) -> Vec<Event> {
        self.events
            .iter()
            .filter(|e| name.is_none_or(|n| e.involved_object.name.as_deref() == Some(n)))
            .cloned()
            .collect()
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub last_seen: String,
    pub type_: String,
    pub reason: String,
    pub object: String,
    pub message: String,
}

/// Formats rows like `kubectl get events`.
pub fn table(rows: &[EventRow]) -> String {
    let header = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];
    let cells: Vec<[&str; 5]> = rows
        .iter()
        .map(|r| [&*r.last_seen, &*r.type_, &*r.reason, &*r.object, &*r.message])
        .collect();
    headroom_client::kubectl::table(&header, &cells)
}

/// A stored event as a table row, LAST SEEN relative to `now`.
pub fn row(event: &Event, now: jiff::Timestamp) -> EventRow {
    let last = event
        .last_timestamp
        .as_ref()
        .or(event.first_timestamp.as_ref())
        .map_or(now, |t| t.0);
    EventRow {
        last_seen: headroom_client::kubectl::human_duration(now.duration_since(last).as_secs()),
        type_: event.type_.clone().unwrap_or_default(),
        reason: event.reason.clone().unwrap_or_default(),
        object: format!(
            "{}/{}",
            event
                .involved_object
                .kind
                .as_deref()
                .unwrap_or("Pod")
                .to_lowercase(),
            event.involved_object.name.as_deref().unwrap_or_default()
        ),
        message: event.message.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_events_are_counted_not_duplicated() {
        let mut store = EventStore::default();
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        store.record(
            &pod,
            reasons::WARNING,
            reasons::RESIZE_DEFERRED,
            "m".into(),
            reasons::KUBELET,
        );
        store.record(
            &pod,
            reasons::WARNING,
            reasons::RESIZE_DEFERRED,
            "m".into(),
            reasons::KUBELET,
        );
        store.record(
            &pod,
            reasons::NORMAL,
            reasons::RESIZE_STARTED,
            "s".into(),
            reasons::KUBELET,
        );
        let events = store.list(Some("p"));
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].count, Some(2));
        assert!(store.list(Some("q")).is_empty());
        let text = table(&[row(&events[1], jiff::Timestamp::now())]);
        assert!(
            text.starts_with("LAST SEEN   TYPE     REASON          OBJECT   MESSAGE\n"),
            "{text}"
        );
        assert!(text.ends_with("Normal   ResizeStarted   pod/p    s"), "{text}");
    }
}
