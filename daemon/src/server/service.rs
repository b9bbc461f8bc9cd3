//! `headroom.v1.Headroom` over the pipeline's snapshots and ledger.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use headroom_proto::v1::{self as pb, headroom_server::Headroom};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::{
    actuator::{ActuatorErrorKind, ResizeActuator},
    convert, validate,
};
use crate::pipeline::{LedgerHandle, ReserveError, ReserveRequest, SnapshotReader};

/// Limits and defaults of the service.
#[derive(Clone, Debug)]
pub struct ServiceLimits {
    /// TTL of a reservation that asks for none.
    pub default_reservation_ttl: Duration,
    /// Longest TTL accepted.
    pub max_reservation_ttl: Duration,
    /// Refuse reservations for Pods the node does not know.
    pub require_known_pod: bool,
    /// Most concurrent `WatchHeadroom` streams.
    pub max_watchers: usize,
}

impl Default for ServiceLimits {
    fn default() -> Self {
        Self {
            default_reservation_ttl: Duration::from_secs(60),
            max_reservation_ttl: Duration::from_secs(3600),
            require_known_pod: true,
            max_watchers: 1024,
        }
    }
}

/// The service. Who may call what, and each call's span, are [`super::access::AccessLayer`]'s.
#[derive(Clone)]
pub struct HeadroomService {
    reader: SnapshotReader,
    ledger: LedgerHandle,
    actuator: Arc<dyn ResizeActuator>,
    limits: ServiceLimits,
    watchers: Arc<AtomicUsize>,
}

impl HeadroomService {
    /// A service over `reader` and `ledger`.
    pub fn new(
        reader: SnapshotReader,
        ledger: LedgerHandle,
        actuator: Arc<dyn ResizeActuator>,
        limits: ServiceLimits,
    ) -> Self {
        Self {
            reader,
            ledger,
            actuator,
            limits,
            watchers: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Open `WatchHeadroom` streams.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }
}

fn ledger_status(e: ReserveError) -> Status {
    use headroom_node_model::LedgerError as L;
    match e {
        ReserveError::UnknownPod(_) => Status::not_found(e.to_string()),
        ReserveError::Closed | ReserveError::Persist(_) => Status::unavailable(e.to_string()),
        ReserveError::Ledger(L::DuplicateId(_)) => Status::already_exists(e.to_string()),
        ReserveError::Ledger(L::InsufficientHeadroom { .. }) => Status::resource_exhausted(e.to_string()),
        ReserveError::Ledger(_) => Status::invalid_argument(e.to_string()),
    }
}

/// One count of the open watches, given back on drop.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An open watch: counted, and logged in its call's span when the transport drops it.
struct WatchGuard {
    _open: Counted,
    span: tracing::Span,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.span.in_scope(|| tracing::info!("watch closed"));
    }
}

/// One `WatchHeadroom` stream's state between the messages the transport pulls.
struct Watch {
    reader: SnapshotReader,
    changed: tokio::sync::watch::Receiver<u64>,
    last_sent: Option<u64>,
    /// Earliest time of the next message (`min_interval_ms`).
    next_at: Option<Instant>,
    min_interval: Duration,
    include_pods: bool,
    ended: bool,
    _guard: WatchGuard,
}

impl Watch {
    async fn next(&mut self) -> Option<Result<pb::HeadroomSnapshot, Status>> {
        if self.ended {
            return None;
        }
        if let Some(at) = self.next_at.take() {
            tokio::time::sleep_until(at.into()).await;
        }
        loop {
            let snapshot = self.reader.load();
            self.changed.mark_unchanged();
            if self.last_sent != Some(snapshot.version) {
                self.last_sent = Some(snapshot.version);
                if !self.min_interval.is_zero() {
                    self.next_at = Some(Instant::now() + self.min_interval);
                }
                return Some(Ok(convert::snapshot(&snapshot, self.include_pods)));
            }
            if self.changed.changed().await.is_err() {
                self.ended = true;
                return Some(Err(Status::unavailable("headroomd is shutting down")));
            }
        }
    }
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<pb::HeadroomSnapshot, Status>> + Send>>;

#[tonic::async_trait]
impl Headroom for HeadroomService {
    async fn get_headroom(
        &self,
        request: Request<pb::GetHeadroomRequest>,
    ) -> Result<Response<pb::HeadroomSnapshot>, Status> {
        {
            let snapshot = self.reader.load();
            Ok(Response::new(convert::snapshot(
                &snapshot,
                request.get_ref().include_pods,
            )))
        }
    }

    type WatchHeadroomStream = SnapshotStream;

    async fn watch_headroom(
        &self,
        request: Request<pb::WatchHeadroomRequest>,
    ) -> Result<Response<Self::WatchHeadroomStream>, Status> {
        // The stream's task keeps the call's span (access::AccessLayer opened it).
        let span = tracing::Span::current();
        let open = self.watchers.fetch_add(1, Ordering::Relaxed);
        let guard = Counted(self.watchers.clone());
        if open >= self.limits.max_watchers {
            tracing::warn!(
                open,
                limit = self.limits.max_watchers,
                "watch refused: too many watchers"
            );
            return Err(Status::resource_exhausted(format!(
                "too many WatchHeadroom streams open ({open}); the limit is {}",
                self.limits.max_watchers
            )));
        }
        let req = request.into_inner();
        let min_interval = Duration::from_millis(u64::from(req.min_interval_ms.min(60_000)));
        let include_pods = req.include_pods;
        tracing::info!(include_pods, ?min_interval, "watch opened");
        // Lazy: a message is made only when the transport asks for the next one, from the
        // newest snapshot. A subscriber that stops reading holds what HTTP/2 has buffered and
        // nothing queued behind it; everything newer coalesces into "load the newest".
        let watch = Watch {
            changed: self.reader.subscribe(),
            reader: self.reader.clone(),
            last_sent: None,
            next_at: None,
            min_interval,
            include_pods,
            ended: false,
            _guard: WatchGuard { _open: guard, span },
        };
        let stream = futures::stream::unfold(watch, |mut watch| async move {
            let item = watch.next().await?;
            Some((item, watch))
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_pods(
        &self,
        request: Request<pb::ListPodsRequest>,
    ) -> Result<Response<pb::ListPodsResponse>, Status> {
        {
            let req = request.get_ref();
            if !req.namespace.is_empty()
                && validate::pod_id("namespace", &format!("{}/x", req.namespace)).is_err()
            {
                return Err(Status::invalid_argument(format!(
                    "namespace {} is not a valid namespace",
                    validate::shown(&req.namespace)
                )));
            }
            if !req.pod_uid.is_empty() {
                validate::pod_uid("pod_uid", &req.pod_uid)?;
            }
            let snapshot = self.reader.load();
            let pods: Vec<pb::PodPressure> = snapshot
                .pods
                .iter()
                .filter(|p| req.namespace.is_empty() || p.pod.namespace == req.namespace)
                .filter(|p| req.pod_uid.is_empty() || p.pod.uid == req.pod_uid)
                .map(convert::pod)
                .collect();
            if !req.pod_uid.is_empty() && pods.is_empty() {
                return Err(Status::not_found(format!(
                    "unknown pod uid {:?}: not on this node",
                    req.pod_uid
                )));
            }
            Ok(Response::new(pb::ListPodsResponse {
                pods,
                generated_at: Some(convert::timestamp(snapshot.generated_at)),
                version: snapshot.version,
            }))
        }
    }

    async fn reserve(
        &self,
        request: Request<pb::ReserveRequest>,
    ) -> Result<Response<pb::ReserveResponse>, Status> {
        {
            let req = request.get_ref();
            validate::reservation_id("reservation_id", &req.reservation_id)?;
            validate::pod_id("pod", &req.pod)?;
            let allocatable = self.reader.load().node.headroom.allocatable;
            let amount = validate::resource_amount(req.amount.as_ref(), allocatable)?;
            let releasing = validate::releasing_pod_uids(&req.releasing_pod_uids, &req.pod)?;
            let ttl = match req.ttl_seconds {
                0 => self.limits.default_reservation_ttl,
                s => Duration::from_secs(u64::from(s)),
            };
            if ttl > self.limits.max_reservation_ttl {
                return Err(Status::invalid_argument(format!(
                    "ttl_seconds {} exceeds the limit of {} s",
                    req.ttl_seconds,
                    self.limits.max_reservation_ttl.as_secs()
                )));
            }
            let (view, node) = self
                .ledger
                .reserve(ReserveRequest {
                    id: req.reservation_id.clone(),
                    pod: req.pod.clone(),
                    amount,
                    ttl,
                    require_known_pod: self.limits.require_known_pod,
                    releasing,
                })
                .await
                .map_err(ledger_status)?;
            Ok(Response::new(pb::ReserveResponse {
                reservation: Some(convert::reservation(&view)),
                node: Some(convert::node_headroom(&node, std::time::SystemTime::now(), false)),
            }))
        }
    }

    async fn release(
        &self,
        request: Request<pb::ReleaseRequest>,
    ) -> Result<Response<pb::ReleaseResponse>, Status> {
        {
            let id = &request.get_ref().reservation_id;
            validate::reservation_id("reservation_id", id)?;
            match self.ledger.release(id.clone()).await.map_err(ledger_status)? {
                Some((view, node)) => Ok(Response::new(pb::ReleaseResponse {
                    reservation: Some(convert::reservation(&view)),
                    node: Some(convert::node_headroom(&node, std::time::SystemTime::now(), false)),
                })),
                None => Err(Status::not_found(format!(
                    "no reservation {id:?} (never made, released or expired)"
                ))),
            }
        }
    }

    async fn apply_resize(
        &self,
        request: Request<pb::ApplyResizeRequest>,
    ) -> Result<Response<pb::ApplyResizeResponse>, Status> {
        {
            let allocatable = self.reader.load().node.headroom.allocatable;
            let resize = validate::resize(request.get_ref(), allocatable)?;
            if self.limits.require_known_pod && self.reader.load().pod(&resize.pod_uid).is_none() {
                return Err(Status::not_found(format!(
                    "unknown pod uid {:?}: not on this node",
                    resize.pod_uid
                )));
            }
            let reservation = resize.reservation_id.clone();
            let outcome = self.actuator.apply(resize).await.map_err(|e| {
                tracing::warn!(error = %e, "resize not applied");
                let message = e.to_string();
                match e.kind() {
                    ActuatorErrorKind::Unavailable => Status::unimplemented(message),
                    ActuatorErrorKind::NotFound => Status::not_found(message),
                    ActuatorErrorKind::Invalid => Status::invalid_argument(message),
                    ActuatorErrorKind::Precondition => Status::failed_precondition(message),
                    ActuatorErrorKind::Failed => Status::internal(message),
                }
            })?;
            if let Some(id) = reservation
                && self
                    .ledger
                    .release(id.clone())
                    .await
                    .map_err(ledger_status)?
                    .is_none()
            {
                tracing::info!(reservation = %id, "resize applied; its reservation had already gone");
            }
            let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            tracing::info!(total_ns = nanos(outcome.total), "resize applied");
            Ok(Response::new(pb::ApplyResizeResponse {
                phases: outcome
                    .phases
                    .iter()
                    .map(|(phase, d)| pb::PhaseLatency {
                        phase: phase.clone(),
                        duration_ns: nanos(*d),
                    })
                    .collect(),
                total_ns: nanos(outcome.total),
            }))
        }
    }
}
