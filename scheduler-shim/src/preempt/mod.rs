//! The preemption protocol, one for both backends: decide → reserve → re-plan → evict → follow.
//!
//! A cycle lists the node and its Deferred resizes, decides them all at once in the kubelet's
//! retry order ([`decide_all`]), and for each `preempt` or `shrink` decision: asks the backend
//! whether it may go ahead (dry run, stale headroom), shrinks the Pods that give way in place and
//! waits until that is actuated (their room is free only then), reserves the extra room, re-plans
//! when a higher-priority resize arrived meanwhile (the room is given back and the cycle ends
//! before anyone is evicted), evicts the victims, and hands the resize over to be followed to
//! completion.
//!
//! What differs between the Kubernetes API and the standalone node sits behind [`Backend`];
//! everything that decides who goes first, what is reserved and when to stop is here, so both
//! backends give the same answer on the same cluster.

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Instant;

use headroom_node_model::{Resources, extra_room_needed, room_once_gone};

use crate::cluster_file::{ClusterFile, ResizeSpec, node_state_for};
use crate::decide::{DecideError, Decision, NodeState, ResizeRequest, ServedResize, decide_all};

/// `metadata.generation` as the API server sets it: 1 for a created object that never said.
pub fn generation(meta: Option<i64>) -> i64 {
    meta.unwrap_or(1)
}

/// One Deferred resize a cycle serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resize {
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    /// The Pod's generation (see [`generation`]): a new resize of the same Pod is a new attempt.
    pub generation: i64,
    pub priority: i32,
    pub request: ResizeRequest,
}

impl Resize {
    /// What tells two resizes apart: the Pod's UID, or its key where it has none.
    pub fn identity(&self) -> &str {
        if self.uid.is_empty() { &self.key } else { &self.uid }
    }
}

/// The node as a cycle sees it.
#[derive(Clone, Debug)]
pub struct Listing {
    pub state: NodeState,
    pub resizes: Vec<Resize>,
}

/// A Deferred resize pending on the node now (to notice one that arrived during a cycle).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// As [`Resize::identity`].
    pub identity: String,
    pub key: String,
    pub priority: i32,
}

/// The room a preemption reserves for its resize.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// `<uid>:<generation>` (headroomd allows `[A-Za-z0-9._:-]` in ids): one per resize attempt,
    /// so that a shim restarted mid-resize finds its predecessor's.
    pub id: String,
    /// The resizing Pod, `namespace/name`.
    pub pod: String,
    pub pod_uid: String,
    /// The extra room: requested − admitted, never negative.
    pub amount: Resources,
    /// What the node has for the resize once the victims are gone (beyond what it admitted).
    pub available: Resources,
    /// The victims, `namespace/name`, most important first.
    pub victims: Vec<String>,
    /// The victims' UIDs: their room stops counting as used when the reservation is made.
    pub releasing_pod_uids: Vec<String>,
}

impl Reservation {
    /// The reservation `decision` needs for `resize`.
    pub fn for_decision(resize: &Resize, decision: &Decision) -> Self {
        let request = &resize.request;
        let freed = decision.freed();
        Reservation {
            id: format!("{}:{}", resize.uid, resize.generation),
            pod: resize.key.clone(),
            pod_uid: resize.uid.clone(),
            amount: extra_room_needed(request.admitted, request.requested),
            available: room_once_gone(decision.allocatable, decision.used, freed)
                .saturating_sub(request.admitted),
            victims: decision.victim_keys(),
            releasing_pod_uids: decision
                .victims
                .iter()
                .filter(|v| !v.uid.is_empty())
                .map(|v| v.uid.clone())
                .collect(),
        }
    }
}

/// How far one resize got in a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<F> {
    /// The decision was neither `preempt` nor `shrink`.
    NotPreempting,
    /// A shrink failed or was refused (live figures changed); nobody evicted, with why. Shrinks
    /// actuated before it stay: each is a complete resize of its own.
    NotShrunk(String),
    /// The backend held the preemption back (dry run, stale headroom), with why.
    Held(String),
    /// No room could be reserved; nobody evicted.
    NotReserved(String),
    /// A higher-priority resize (`by`, `namespace/name`) arrived: room given back, nobody evicted,
    /// the cycle ends here.
    Replanned { by: String },
    /// Eviction stopped (room given back), with why.
    NotEvicted(String),
    /// Victims evicted; what following the resize gave.
    Evicted(F),
}

/// One resize's decision and what came of it.
#[derive(Clone, Debug)]
pub struct Served<F> {
    pub resize: Resize,
    pub decision: Decision,
    pub step: Step<F>,
}

/// What [`Backend::mark_victims`] did, by victim uid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marked {
    /// Marked now: to be unmarked if the preemption stops short of evicting them.
    pub marked: BTreeSet<String>,
    /// Gone already (nothing to evict).
    pub gone: BTreeSet<String>,
    /// Why a victim could not be marked; the preemption stops ([`Backend::evict`] reports it).
    pub failed: Option<String>,
}

/// What differs between the backends. Errors of one resize's step are `Err(why)`: the backend
/// has reported them (events, metrics, logs) already; the protocol only decides what comes next.
pub trait Backend {
    type Error: From<DecideError>;
    /// What following an evicted-for resize gives.
    type Followed;

    /// The node and the Deferred resizes this cycle serves; `None` when there is nothing to do.
    fn list(&mut self) -> impl Future<Output = Result<Option<Listing>, Self::Error>> + Send;

    /// Every decision, in the order served, with when the cycle's decisions were made.
    fn decided(&mut self, _resize: &Resize, _decision: &Decision, _at: Instant) {}

    /// Whether a `preempt` decision may go ahead.
    fn may_preempt(
        &mut self,
        _resize: &Resize,
        _decision: &Decision,
    ) -> impl Future<Output = Result<(), String>> + Send {
        async { Ok(()) }
    }

    /// Shrinks the decision's Pods in place and returns once every shrink is actuated (re-checking
    /// each Pod's live figures first). Only called when the decision has shrinks.
    fn shrink(
        &mut self,
        resize: &Resize,
        decision: &Decision,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Marks the victims as about to be disrupted, as upstream's first write does (the
    /// `DisruptionTarget` condition). It runs while the room is being reserved, so the future
    /// owns what it needs: a mark takes nothing from anyone. Default: nothing to mark.
    fn mark_victims(&self, _decision: &Decision) -> impl Future<Output = Marked> + Send + 'static {
        async { Marked::default() }
    }

    /// Takes the marks back when the preemption stops before evicting (no reservation, a
    /// re-plan), as the disruption controller clears a stale mark, but at once.
    fn unmark_victims(&mut self, _decision: &Decision, _marked: &Marked) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Reserves the room.
    fn reserve(
        &mut self,
        resize: &Resize,
        reservation: &Reservation,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Gives the room back (before any eviction, or after one that failed).
    fn release(&mut self, reservation: &Reservation) -> impl Future<Output = ()> + Send;

    /// The Deferred resizes pending on the node now.
    fn pending(&self) -> Vec<Pending>;

    /// The cycle ends for `first`, a higher-priority resize that arrived after the decisions.
    fn replanned(&mut self, _resize: &Resize, _first: &str) {}

    /// Evicts the victims, given what marking them did; unmarks those it does not evict.
    fn evict(
        &mut self,
        resize: &Resize,
        decision: &Decision,
        reservation: &Reservation,
        marked: Marked,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Follows the resize once its victims are gone (now, or from later cycles).
    fn follow(
        &mut self,
        resize: &Resize,
        reservation: Reservation,
    ) -> impl Future<Output = Self::Followed> + Send;
}

/// The resizes of `cluster`'s (only) node named by `resizes` (`namespace`, `name`, `uid`,
/// `generation`), modelled for the decision core. One that cannot be modelled is skipped with a
/// warning; `None` when none can.
pub fn listing(
    cluster: &ClusterFile,
    resizes: impl IntoIterator<Item = (String, String, String, Option<i64>)>,
) -> Option<Listing> {
    let mut state = None;
    let mut served = Vec::new();
    for (namespace, name, uid, meta_generation) in resizes {
        let spec = ResizeSpec {
            namespace: namespace.clone(),
            name: name.clone(),
            ..ResizeSpec::default()
        };
        match node_state_for(cluster, &spec) {
            Ok((node_state, request)) => {
                let priority = node_state
                    .pods
                    .iter()
                    .find(|p| p.is(&namespace, &name))
                    .map_or(0, |p| p.priority);
                state.get_or_insert(node_state);
                served.push(Resize {
                    key: format!("{namespace}/{name}"),
                    uid,
                    generation: generation(meta_generation),
                    priority,
                    request,
                });
            }
            Err(error) => {
                tracing::warn!(pod = %format!("{namespace}/{name}"), %error, "resize skipped: cannot model it")
            }
        }
    }
    state.map(|state| Listing {
        state,
        resizes: served,
    })
}

/// The most important resize pending now that this cycle did not decide and that outranks
/// `resize` (the first listed among equals).
pub fn arrived_since(pending: &[Pending], resize: &Resize, decided: &BTreeSet<String>) -> Option<String> {
    pending
        .iter()
        .filter(|p| !decided.contains(&p.identity) && p.priority > resize.priority)
        .fold(None::<&Pending>, |best, p| match best {
            Some(b) if b.priority >= p.priority => Some(b),
            _ => Some(p),
        })
        .map(|p| p.key.clone())
}

/// One cycle over the node's Deferred resizes.
pub async fn cycle<B: Backend>(backend: &mut B) -> Result<Vec<Served<B::Followed>>, B::Error> {
    let Some(Listing { state, resizes }) = backend.list().await? else {
        return Ok(Vec::new());
    };
    // Every resize this cycle decides; one that shows up later re-plans.
    let decided: BTreeSet<String> = resizes.iter().map(|r| r.identity().to_string()).collect();
    let requests: Vec<ResizeRequest> = resizes.iter().map(|r| r.request.clone()).collect();
    let decisions = decide_all(&state, &requests)?;
    let decided_at = Instant::now();
    let mut served = Vec::with_capacity(decisions.len());
    for ServedResize { resize, decision } in decisions {
        let Some(resize) = resizes.get(resize) else {
            continue;
        };
        backend.decided(resize, &decision, decided_at);
        let step = serve(backend, resize, &decision, &decided).await;
        let replanned = matches!(step, Step::Replanned { .. });
        served.push(Served {
            resize: resize.clone(),
            decision,
            step,
        });
        if replanned {
            break;
        }
    }
    Ok(served)
}

async fn serve<B: Backend>(
    backend: &mut B,
    resize: &Resize,
    decision: &Decision,
    decided: &BTreeSet<String>,
) -> Step<B::Followed> {
    if !decision.makes_room() {
        return Step::NotPreempting;
    }
    if let Err(why) = backend.may_preempt(resize, decision).await {
        return Step::Held(why);
    }
    if !decision.shrinks.is_empty()
        && let Err(why) = backend.shrink(resize, decision).await
    {
        return Step::NotShrunk(why);
    }
    let reservation = Reservation::for_decision(resize, decision);
    // The reservation is a durable write in another process: the marks go out meanwhile, and
    // only the eviction itself waits for both.
    let marking = backend.mark_victims(decision);
    let (reserved, marked) = futures::future::join(backend.reserve(resize, &reservation), marking).await;
    if let Err(why) = reserved {
        backend.unmark_victims(decision, &marked).await;
        return Step::NotReserved(why);
    }
    // A higher-priority resize that arrived on this node while this one was being decided goes
    // first (as in the scheduler): give the room back and re-plan before anyone is evicted.
    if let Some(first) = arrived_since(&backend.pending(), resize, decided) {
        backend.release(&reservation).await;
        backend.unmark_victims(decision, &marked).await;
        backend.replanned(resize, &first);
        return Step::Replanned { by: first };
    }
    if decision.victims.is_empty() {
        return Step::Evicted(backend.follow(resize, reservation).await);
    }
    match backend.evict(resize, decision, &reservation, marked).await {
        Ok(()) => Step::Evicted(backend.follow(resize, reservation).await),
        Err(why) => {
            backend.release(&reservation).await;
            Step::NotEvicted(why)
        }
    }
}
