//! The actuator: plans a resize, checks memory usage, records its intent, writes, verifies by
//! reading back, and rolls every write back if anything fails. All or nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::convert::{self, ConversionConfig, KubeResources};
use crate::intent::{EncodedCgroups, IntentError, IntentLog, IntentRecord, IntentWrite};
use crate::latency::{LatencyRecorder, Phase, PhaseLatencies, nanos_between};
use crate::layout::Roots;
use crate::path::PathError;
use crate::plan::{self, PlanError, PlannedWrite, Target};
use crate::values::{CgroupValues, CpuQuota, Knob, PodValues, Setting};
use headroom_cgroupfs::{AnyCgroup, Cgroup, CgroupDirs, CgroupError, CgroupVersion};

/// Everything that can stop a resize. Messages name the file and the kernel's reason.
#[derive(Debug, thiserror::Error)]
pub enum ActuateError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("pod {pod_uid}: {source}")]
    Cgroup { pod_uid: String, source: CgroupError },
    #[error("pod {pod_uid}: {source}")]
    Plan { pod_uid: String, source: PlanError },
    #[error(
        "pod {pod_uid}: refusing memory limit {limit} bytes for {}: current usage is {usage} bytes; nothing was written",
        path.display()
    )]
    MemoryBelowUsage {
        pod_uid: String,
        path: PathBuf,
        usage: u64,
        limit: u64,
    },
    #[error("pod {pod_uid}: {source}; {restored} earlier write(s) rolled back")]
    RolledBack {
        pod_uid: String,
        source: CgroupError,
        restored: usize,
    },
    #[error("pod {pod_uid}: {} reads back `{read}` after writing `{wrote}`; {restored} write(s) rolled back", path.display())]
    Mismatch {
        pod_uid: String,
        path: PathBuf,
        wrote: Setting,
        read: Setting,
        restored: usize,
    },
    #[error("pod {pod_uid}: {cause}; rollback failed too: {rollback}")]
    RollbackFailed {
        pod_uid: String,
        cause: String,
        rollback: CgroupError,
    },
    #[error(transparent)]
    Intent(#[from] IntentError),
    /// Another actuator writes below this root: two would hand out the same room.
    #[error(
        "cgroup root {} is in use by another headroom process (its flock is held); two nodes must not share one",
        path.display()
    )]
    RootLocked { path: PathBuf },
    #[error("lock cgroup root {}: {source}", path.display())]
    RootLock { path: PathBuf, source: std::io::Error },
}

/// What happens to a resize found half-done at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Finish it (the resize had been decided); restore the old values if that fails.
    #[default]
    Complete,
    /// Put every value back as it was before the resize.
    Restore,
}

#[derive(Debug, Clone)]
pub struct ActuatorConfig {
    /// The Pod cgroup roots: nothing outside them is ever written.
    pub roots: Roots,
    pub conversion: ConversionConfig,
    /// Intent records; put it on tmpfs (`/run/headroom/intents`).
    pub intent_dir: PathBuf,
    pub recovery: RecoveryPolicy,
    /// Plan from the values last read back instead of re-reading them (Koordinator's
    /// `ResourceUpdateExecutor` does the same). Rollback then restores those values: set to
    /// false if something else writes these cgroups.
    pub trust_cache: bool,
    /// Kernel page size (memory limits are rounded down to it).
    pub page_size: u64,
}

impl ActuatorConfig {
    pub fn new(roots: Roots, intent_dir: PathBuf) -> Self {
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .unwrap_or(4096);
        Self {
            roots,
            conversion: ConversionConfig::default(),
            intent_dir,
            recovery: RecoveryPolicy::default(),
            trust_cache: true,
            page_size: u64::try_from(page).unwrap_or(4096),
        }
    }
}

/// A Kubernetes-level resize of a whole Pod: every container with its new resources (unchanged
/// ones included: the Pod level is derived from all of them unless `pod` is given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeRequest {
    pub pod_uid: String,
    pub containers: Vec<(String, KubeResources)>,
    /// Pod-level resources (`spec.resources`, PodLevelResources); derived when `None`.
    pub pod: Option<KubeResources>,
}

/// The outcome of a resize, for the `ApplyResize` reply.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResizeReport {
    pub pod_uid: String,
    /// Number of cgroup values written.
    pub writes: usize,
    pub latency: PhaseLatencies,
    /// Whether a CPU limit changed (the "effective" phase is then observable in `cpu.stat`).
    pub cpu_limit_changed: bool,
}

/// A hook run after each successful write with the count of writes done (tests use it to
/// crash the process between two writes).
pub type WriteHook = Box<dyn FnMut(usize) + Send>;

#[derive(Debug)]
struct Slot {
    cg: AnyCgroup,
    /// Values the kernel reported last (read or read back).
    known: CgroupValues,
}

impl Slot {
    fn new(dirs: &CgroupDirs) -> Self {
        Self {
            cg: dirs.open(),
            known: CgroupValues::default(),
        }
    }

    fn current(&mut self, want: &CgroupValues, trust_cache: bool) -> Result<CgroupValues, CgroupError> {
        let mut out = CgroupValues::default();
        for knob in Knob::ALL {
            if want.get(knob).is_none() {
                continue;
            }
            let v = match self.known.get(knob) {
                Some(v) if trust_cache => v,
                _ => {
                    let v = self.cg.read(knob)?;
                    self.known.set(v);
                    v
                }
            };
            out.set(v);
        }
        Ok(out)
    }

    fn write(&mut self, s: &Setting) -> Result<(), CgroupError> {
        let r = self.cg.write(s);
        if r.is_err() {
            self.known = CgroupValues::default();
        }
        r
    }
}

#[derive(Debug)]
struct OpenPod {
    pod: Slot,
    containers: Vec<(String, Slot)>,
    /// The Pod's cgroup then its containers', as intent records name them.
    cgroups: EncodedCgroups,
}

impl OpenPod {
    fn slot(&mut self, t: Target) -> Option<&mut Slot> {
        match t {
            Target::Pod => Some(&mut self.pod),
            Target::Container(i) => self.containers.get_mut(i).map(|(_, s)| s),
        }
    }
}

/// Applies resizes to Pod cgroups. Not `Sync`: the daemon owns one behind a mutex (a resize
/// takes microseconds).
pub struct Actuator {
    cfg: ActuatorConfig,
    pods: HashMap<String, OpenPod>,
    intent: IntentLog,
    latency: LatencyRecorder,
    after_write: Option<WriteHook>,
    /// Held for the actuator's life: one writer per root.
    _root_locks: Vec<nix::fcntl::Flock<std::fs::File>>,
}

/// What [`Actuator::recover`] did with one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    Completed {
        pod_uid: String,
        writes: usize,
    },
    Restored {
        pod_uid: String,
        writes: usize,
        reason: String,
    },
    Discarded {
        pod_uid: String,
        reason: String,
    },
    /// An entry of the intent directory that is no usable record (a FIFO, symlink, directory,
    /// oversized or foreign file): renamed to `moved_to` (`None` if even that failed, said in
    /// `reason`), nothing written to any cgroup.
    SetAside {
        path: PathBuf,
        moved_to: Option<PathBuf>,
        reason: String,
    },
}

/// Locks each root that exists (a root made later, by the first Pod, is covered by the intent
/// directory's lock, which every actuator on these roots shares in the standalone layout).
fn lock_roots(roots: &Roots) -> Result<Vec<nix::fcntl::Flock<std::fs::File>>, ActuateError> {
    let mut locks = Vec::new();
    for root in roots.dirs().paths() {
        let dir = match std::fs::File::open(root) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ActuateError::RootLock {
                    path: root.to_path_buf(),
                    source,
                });
            }
        };
        let lock = crate::intent::lock_exclusive(dir).map_err(|e| match e {
            crate::intent::LockError::Held => ActuateError::RootLocked {
                path: root.to_path_buf(),
            },
            crate::intent::LockError::Io(source) => ActuateError::RootLock {
                path: root.to_path_buf(),
                source,
            },
        })?;
        locks.push(lock);
    }
    Ok(locks)
}

impl Actuator {
    pub fn new(cfg: ActuatorConfig) -> Result<Self, ActuateError> {
        cfg.roots.validate()?;
        let intent = IntentLog::open(&cfg.intent_dir)?;
        let root_locks = lock_roots(&cfg.roots)?;
        Ok(Self {
            cfg,
            pods: HashMap::new(),
            intent,
            latency: LatencyRecorder::new(),
            after_write: None,
            _root_locks: root_locks,
        })
    }

    pub fn config(&self) -> &ActuatorConfig {
        &self.cfg
    }

    pub fn version(&self) -> CgroupVersion {
        self.cfg.roots.version()
    }

    pub fn latency(&self) -> &LatencyRecorder {
        &self.latency
    }

    pub fn latency_mut(&mut self) -> &mut LatencyRecorder {
        &mut self.latency
    }

    pub fn intent_log_mut(&mut self) -> &mut IntentLog {
        &mut self.intent
    }

    pub fn set_after_write_hook(&mut self, hook: Option<WriteHook>) {
        self.after_write = hook;
    }

    /// The Pods whose cgroup files are held open (each resized since it started).
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> {
        self.pods.keys().map(String::as_str)
    }

    /// Drops cached handles and values of a Pod (after it was removed or changed elsewhere).
    pub fn forget(&mut self, pod_uid: &str) {
        self.pods.remove(pod_uid);
        // The Pod is gone: its (empty) record goes too, or the intent directory would keep a
        // file for every Pod ever resized on this node.
        if let Err(e) = self.intent.remove(pod_uid) {
            tracing::debug!(pod_uid, "no intent record to remove: {e}");
        }
    }

    /// Converts a Kubernetes-level resize and applies it.
    pub fn resize(&mut self, req: &ResizeRequest, received: Instant) -> Result<ResizeReport, ActuateError> {
        let desired = convert::pod_values(
            &req.containers,
            req.pod.as_ref(),
            self.version(),
            &self.cfg.conversion,
        );
        self.apply(&req.pod_uid, &desired, received)
    }

    fn open_pod<'p>(
        pods: &'p mut HashMap<String, OpenPod>,
        roots: &Roots,
        pod_uid: &str,
        desired: &PodValues,
    ) -> Result<&'p mut OpenPod, ActuateError> {
        let reusable = pods.get(pod_uid).is_some_and(|p| {
            p.containers.len() == desired.containers.len()
                && p.containers
                    .iter()
                    .zip(&desired.containers)
                    .all(|((a, _), (b, _))| a == b)
        });
        if !reusable {
            let pod_dirs = roots.pod_dirs(pod_uid)?;
            roots.check(&pod_dirs)?;
            let mut containers = Vec::with_capacity(desired.containers.len());
            let mut all_dirs = vec![pod_dirs.clone()];
            for (name, _) in &desired.containers {
                let dirs = roots.container_dirs(pod_uid, name)?;
                roots.check(&dirs)?;
                containers.push((name.clone(), Slot::new(&dirs)));
                all_dirs.push(dirs);
            }
            let cgroups = EncodedCgroups::new(&all_dirs).map_err(|source| IntentError::Encode {
                pod_uid: pod_uid.to_owned(),
                source,
            })?;
            pods.insert(
                pod_uid.to_owned(),
                OpenPod {
                    pod: Slot::new(&pod_dirs),
                    containers,
                    cgroups,
                },
            );
        }
        pods.get_mut(pod_uid)
            .ok_or_else(|| ActuateError::Path(PathError::OutsideRoots { path: pod_uid.into() }))
    }

    /// Reads the values the kernel holds now for the knobs `like` names (no cache).
    pub fn read(&mut self, pod_uid: &str, like: &PodValues) -> Result<PodValues, ActuateError> {
        let trust = false;
        let err = |source| ActuateError::Cgroup {
            pod_uid: pod_uid.to_owned(),
            source,
        };
        let pod = Self::open_pod(&mut self.pods, &self.cfg.roots, pod_uid, like)?;
        let mut out = PodValues {
            pod: pod.pod.current(&like.pod, trust).map_err(err)?,
            containers: Vec::new(),
        };
        for ((name, slot), (_, want)) in pod.containers.iter_mut().zip(&like.containers) {
            out.containers
                .push((name.clone(), slot.current(want, trust).map_err(err)?));
        }
        Ok(out)
    }

    /// Applies `desired` (knobs left `None` are not touched) all or nothing.
    pub fn apply(
        &mut self,
        pod_uid: &str,
        desired: &PodValues,
        received: Instant,
    ) -> Result<ResizeReport, ActuateError> {
        let span = tracing::debug_span!("apply", pod_uid);
        let _enter = span.enter();
        let trust = self.cfg.trust_cache;
        let page = self.cfg.page_size;
        let cg_err = |source| ActuateError::Cgroup {
            pod_uid: pod_uid.to_owned(),
            source,
        };

        // 1. Current values and plan.
        let pod = Self::open_pod(&mut self.pods, &self.cfg.roots, pod_uid, desired)?;
        let mut current = PodValues {
            pod: pod.pod.current(&desired.pod, trust).map_err(cg_err)?,
            containers: Vec::new(),
        };
        for ((name, slot), (_, want)) in pod.containers.iter_mut().zip(&desired.containers) {
            current
                .containers
                .push((name.clone(), slot.current(want, trust).map_err(cg_err)?));
        }
        let plan = plan::plan(&current, desired).map_err(|source| ActuateError::Plan {
            pod_uid: pod_uid.to_owned(),
            source,
        })?;
        let planned = Instant::now();
        let mut latency = PhaseLatencies {
            planned_ns: nanos_between(received, planned),
            ..Default::default()
        };
        if plan.is_empty() {
            latency.verified_ns = latency.planned_ns;
            self.latency.record(&latency);
            return Ok(ResizeReport {
                pod_uid: pod_uid.to_owned(),
                writes: 0,
                latency,
                cpu_limit_changed: false,
            });
        }

        // 2. The kubelet's memory check: never set a limit below usage.
        for check in &plan.memory_checks {
            let Some(slot) = pod.slot(check.target) else {
                continue;
            };
            let usage = slot.cg.memory_usage().map_err(cg_err)?;
            if usage > check.limit_bytes {
                return Err(ActuateError::MemoryBelowUsage {
                    pod_uid: pod_uid.to_owned(),
                    path: slot.cg.file(Knob::MemoryMax),
                    usage,
                    limit: check.limit_bytes,
                });
            }
        }

        // 3. Intent record, durable before the first write.
        let index = |t: Target| match t {
            Target::Pod => 0,
            Target::Container(i) => i + 1,
        };
        let writes: Vec<IntentWrite> = plan
            .writes
            .iter()
            .map(|w| IntentWrite {
                cgroup: index(w.target),
                previous: w.previous,
                next: w.next,
            })
            .collect();
        self.intent.begin_encoded(pod_uid, &pod.cgroups, &writes)?;

        // 4. Writes.
        let mut first_write = None;
        for (done, w) in plan.writes.iter().enumerate() {
            let Some(slot) = pod.slot(w.target) else { continue };
            if let Err(source) = slot.write(&w.next) {
                warn!(pod_uid, error = %source, "write failed; rolling back");
                let outcome = rollback(pod, &plan.writes[..done]);
                return self.finish_failed(pod_uid, outcome, done, |restored| ActuateError::RolledBack {
                    pod_uid: pod_uid.to_owned(),
                    source,
                    restored,
                });
            }
            if first_write.is_none() {
                first_write = Some(Instant::now());
            }
            if let Some(hook) = self.after_write.as_mut() {
                hook(done + 1);
            }
        }
        let last_write = Instant::now();

        // 5. Read back and verify.
        for (i, w) in plan.writes.iter().enumerate() {
            let Some(slot) = pod.slot(w.target) else { continue };
            let expected = w.next.kernel_normalized(page);
            let read = slot.cg.read(w.next.knob());
            match read {
                Ok(read) if read == expected => slot.known.set(read),
                other => {
                    let path = slot.cg.file(w.next.knob());
                    let outcome = rollback(pod, &plan.writes);
                    let n = plan.writes.len();
                    return match other {
                        Ok(read) => {
                            warn!(pod_uid, path = %path.display(), %read, "verification failed; rolled back");
                            self.finish_failed(pod_uid, outcome, n, |restored| ActuateError::Mismatch {
                                pod_uid: pod_uid.to_owned(),
                                path,
                                wrote: w.next,
                                read,
                                restored,
                            })
                        }
                        Err(source) => self.finish_failed(pod_uid, outcome, n, |restored| {
                            debug!(i, "read-back failed");
                            ActuateError::RolledBack {
                                pod_uid: pod_uid.to_owned(),
                                source,
                                restored,
                            }
                        }),
                    };
                }
            }
        }
        let verified = Instant::now();
        self.intent.clear(pod_uid)?;

        latency.first_write_ns = first_write.map(|t| nanos_between(received, t));
        latency.last_write_ns = Some(nanos_between(received, last_write));
        latency.verified_ns = nanos_between(received, verified);
        let cpu_limit_changed = plan.writes.iter().any(|w| w.next.knob() == Knob::CpuMax);
        // "Effective" is recorded by `wait_effective` (it takes up to a CFS period); without a
        // CPU limit change, the kernel applied everything synchronously.
        if !cpu_limit_changed {
            latency.effective_ns = Some(latency.verified_ns);
        }
        self.latency.record(&latency);
        debug!(
            pod_uid,
            writes = plan.writes.len(),
            verified_ns = latency.verified_ns,
            "resized"
        );
        Ok(ResizeReport {
            pod_uid: pod_uid.to_owned(),
            writes: plan.writes.len(),
            latency,
            cpu_limit_changed,
        })
    }

    fn finish_failed(
        &mut self,
        pod_uid: &str,
        rollback: Result<(), CgroupError>,
        attempted: usize,
        make: impl FnOnce(usize) -> ActuateError,
    ) -> Result<ResizeReport, ActuateError> {
        self.pods.remove(pod_uid); // re-read everything next time
        match rollback {
            Ok(()) => {
                self.intent.clear(pod_uid)?;
                Err(make(attempted))
            }
            // Leave the intent record: `recover` will retry the restoration (or discard it if
            // the cgroups are gone). The cause is told without the "rolled back" it would claim.
            Err(rollback) => Err(ActuateError::RollbackFailed {
                pod_uid: pod_uid.to_owned(),
                cause: failure_cause(&make(0)),
                rollback,
            }),
        }
    }

    /// Waits until the new CPU limit is in effect, observed as the Pod cgroup's next CFS period
    /// (`cpu.stat` `nr_periods` advancing), records the "effective" phase and returns it (from
    /// "received"). `None` if no period was observed before `timeout` (idle Pod: the period
    /// timer only runs while tasks are runnable).
    pub fn wait_effective(
        &mut self,
        report: &mut ResizeReport,
        received: Instant,
        timeout: Duration,
    ) -> Result<Option<Duration>, ActuateError> {
        if let Some(ns) = report.latency.effective_ns {
            return Ok(Some(Duration::from_nanos(ns)));
        }
        let pod_uid = report.pod_uid.clone();
        let err = |source| ActuateError::Cgroup {
            pod_uid: pod_uid.clone(),
            source,
        };
        let Some(pod) = self.pods.get_mut(&report.pod_uid) else {
            return Ok(None);
        };
        let unlimited = matches!(pod.pod.known.cpu_max, Some(m) if m.quota == CpuQuota::Max);
        let ns = if unlimited {
            Some(report.latency.verified_ns)
        } else {
            let start = pod.pod.cg.cpu_stat().map_err(err)?.nr_periods;
            let deadline = Instant::now() + timeout;
            loop {
                if pod.pod.cg.cpu_stat().map_err(err)?.nr_periods != start {
                    break Some(nanos_between(received, Instant::now()));
                }
                if Instant::now() >= deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        };
        if let Some(ns) = ns {
            report.latency.effective_ns = Some(ns);
            self.latency.record_phase(Phase::Effective, ns);
        }
        Ok(ns.map(Duration::from_nanos))
    }

    /// Repairs resizes a previous process left half-done (call once at start, before serving).
    pub fn recover(&mut self) -> Result<Vec<Recovery>, ActuateError> {
        let span = tracing::info_span!("recover", dir = %self.intent.dir().display());
        let _enter = span.enter();
        let mut out = Vec::new();
        let scan = self.intent.pending()?;
        // Nothing in the directory stops the start: what is not a record is moved aside, loudly.
        for bad in scan.unusable {
            let reason = bad.error.to_string();
            let outcome = match self.intent.set_aside(&bad.path) {
                Ok(to) => {
                    warn!(path = %bad.path.display(), moved_to = %to.display(), "{reason}; moved aside");
                    Recovery::SetAside {
                        path: bad.path,
                        moved_to: Some(to),
                        reason,
                    }
                }
                Err(e) => {
                    warn!(path = %bad.path.display(), "{reason}; left in place: {e}");
                    Recovery::SetAside {
                        path: bad.path,
                        moved_to: None,
                        reason: format!("{reason}; left in place: {e}"),
                    }
                }
            };
            out.push(outcome);
        }
        for (pod_uid, record) in scan.pending {
            self.pods.remove(&pod_uid);
            let outcome = match record {
                Err(e) => Recovery::Discarded {
                    pod_uid: pod_uid.clone(),
                    reason: e.to_string(),
                },
                Ok(record) => self.recover_one(&record)?,
            };
            info!(?outcome, "intent record handled");
            self.intent.remove(&pod_uid)?;
            out.push(outcome);
        }
        Ok(out)
    }

    fn recover_one(&mut self, record: &IntentRecord) -> Result<Recovery, ActuateError> {
        let pod_uid = record.pod_uid.clone();
        let mut writes = Vec::with_capacity(record.writes.len());
        for w in &record.writes {
            let Some(dirs) = record.cgroup_of(w) else {
                return Ok(Recovery::Discarded {
                    pod_uid,
                    reason: "inconsistent record".into(),
                });
            };
            self.cfg.roots.check(dirs)?;
            writes.push((dirs, w));
        }
        if record
            .cgroups
            .iter()
            .any(|d| d.paths().iter().any(|p| !p.exists()))
        {
            return Ok(Recovery::Discarded {
                pod_uid,
                reason: "the pod's cgroups are gone".into(),
            });
        }
        let mut cgs: HashMap<CgroupDirs, AnyCgroup> = HashMap::new();
        let mut cg = |dirs: &CgroupDirs| -> AnyCgroup { dirs.open() };
        let restore = |cgs: &mut HashMap<CgroupDirs, AnyCgroup>,
                       cg: &mut dyn FnMut(&CgroupDirs) -> AnyCgroup| {
            let mut first_err = None;
            for (dirs, w) in writes.iter().rev() {
                let h = cgs.entry((*dirs).clone()).or_insert_with(|| cg(dirs));
                if let Err(e) = h.write(&w.previous) {
                    first_err.get_or_insert(e);
                }
            }
            first_err.map_or(Ok(()), Err)
        };
        let err = |source| ActuateError::Cgroup {
            pod_uid: pod_uid.clone(),
            source,
        };
        if self.cfg.recovery == RecoveryPolicy::Restore {
            restore(&mut cgs, &mut cg).map_err(err)?;
            return Ok(Recovery::Restored {
                pod_uid,
                writes: record.writes.len(),
                reason: "policy".into(),
            });
        }
        // Complete: same safety check as a fresh resize, then the writes in their order.
        let mut failure = None;
        for (dirs, w) in &writes {
            let h = cgs.entry((*dirs).clone()).or_insert_with(|| cg(dirs));
            if let (
                Setting::MemoryMax(prev),
                Setting::MemoryMax(next @ crate::values::MemoryMax::Bytes(limit)),
            ) = (w.previous, w.next)
                && next < prev
            {
                match h.memory_usage() {
                    Ok(usage) if usage > limit => {
                        failure = Some(format!(
                            "usage {usage} bytes is above the new limit {limit} bytes"
                        ));
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failure = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        if failure.is_none() {
            for (dirs, w) in &writes {
                let h = cgs.entry((*dirs).clone()).or_insert_with(|| cg(dirs));
                if let Err(e) = h.write(&w.next) {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        match failure {
            None => Ok(Recovery::Completed {
                pod_uid,
                writes: record.writes.len(),
            }),
            Some(reason) => {
                restore(&mut cgs, &mut cg).map_err(err)?;
                Ok(Recovery::Restored {
                    pod_uid,
                    writes: record.writes.len(),
                    reason,
                })
            }
        }
    }
}

/// What went wrong, without the Pod prefix and the rollback count of `err`'s own message (for
/// [`ActuateError::RollbackFailed`], whose rollback did not succeed).
fn failure_cause(err: &ActuateError) -> String {
    match err {
        ActuateError::RolledBack { source, .. } => source.to_string(),
        ActuateError::Mismatch {
            path, wrote, read, ..
        } => format!("{} reads back `{read}` after writing `{wrote}`", path.display()),
        other => other.to_string(),
    }
}

/// Writes back `previous` for `done` writes, in reverse order (the reverse of a valid kubelet
/// order is itself valid). Keeps going after an error and returns the first one.
fn rollback(pod: &mut OpenPod, done: &[PlannedWrite]) -> Result<(), CgroupError> {
    let mut first_err = None;
    for w in done.iter().rev() {
        let Some(slot) = pod.slot(w.target) else { continue };
        if let Err(e) = slot.write(&w.previous) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}
