//! What a running Pod is on this machine: its cgroups (`headroom_actuator::PodCgroups`, values
//! converted from the Pod's resources as the kubelet converts them) and one real process per
//! container. The image is ignored: every container runs `sleep infinity`, which exits on SIGTERM
//! like a well-behaved workload.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use headroom_actuator::convert::pod_values;
use headroom_actuator::{ConversionConfig, KubeResources, PodCgroups, Roots};
use headroom_cgroupfs::CgroupError;
use headroom_node_model::{QuantityError, parse_cpu_millis, parse_memory_bytes};
use k8s_openapi::api::core::v1::{Container, Pod};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use thiserror::Error;

/// The command every container runs.
pub const CONTAINER_COMMAND: [&str; 2] = ["sleep", "infinity"];

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("pod {pod}: container {container}: {resource} {value:?}: {source}")]
    Quantity {
        pod: String,
        container: String,
        resource: &'static str,
        value: String,
        source: QuantityError,
    },
    #[error("pod {pod}: cgroups: {source}")]
    Cgroup { pod: String, source: CgroupError },
    #[error("pod {pod}: container {container}: starting `{}`: {source}", CONTAINER_COMMAND.join(" "))]
    Spawn {
        pod: String,
        container: String,
        source: std::io::Error,
    },
}

/// A Pod's cgroups and processes.
#[derive(Debug)]
pub struct PodRuntime {
    cgroups: PodCgroups,
    /// (container, process), in spec order.
    processes: Vec<(String, Child)>,
}

/// A container's resources as the actuator takes them.
pub fn kube_resources(pod: &str, container: &Container) -> Result<KubeResources, RuntimeError> {
    let resources = container.resources.as_ref();
    let get = |map: Option<&std::collections::BTreeMap<String, _>>, name: &str| {
        map.and_then(|m| m.get(name))
            .map(|q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| q.0.clone())
    };
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let parse = |resource: &'static str, value: String, f: fn(&str) -> Result<i64, QuantityError>| {
        let parsed = f(&value).map_err(|source| RuntimeError::Quantity {
            pod: pod.to_string(),
            container: container.name.clone(),
            resource,
            value: value.clone(),
            source,
        })?;
        // Negative quantities are refused by the parser's callers in the API server; clamp here.
        Ok::<u64, RuntimeError>(u64::try_from(parsed).unwrap_or(0))
    };
    // A request left out but with a limit is the limit (API server defaulting).
    let cpu_request = get(requests, "cpu").or_else(|| get(limits, "cpu"));
    Ok(KubeResources {
        cpu_request_milli: match cpu_request {
            Some(v) => parse("cpu", v, parse_cpu_millis)?,
            None => 0,
        },
        cpu_limit_milli: get(limits, "cpu")
            .map(|v| parse("cpu", v, parse_cpu_millis))
            .transpose()?,
        memory_limit_bytes: get(limits, "memory")
            .map(|v| parse("memory", v, parse_memory_bytes))
            .transpose()?,
    })
}

/// Every container's resources, in spec order.
pub fn pod_resources(pod: &Pod) -> Result<Vec<(String, KubeResources)>, RuntimeError> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| Ok((c.name.clone(), kube_resources(name, c)?)))
        .collect()
}

impl PodRuntime {
    /// Creates the Pod's cgroups with its initial values and starts one process per container.
    /// On failure, whatever was started or created is stopped and removed again.
    pub fn start(roots: &Roots, pod: &Pod, uid: &str) -> Result<Self, RuntimeError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let containers = pod_resources(pod)?;
        let names: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
        let initial = pod_values(&containers, None, roots.version(), &ConversionConfig::default());
        let cgroup_err = |source| RuntimeError::Cgroup {
            pod: name.clone(),
            source,
        };
        let cgroups = PodCgroups::create(roots, uid, &names, Some(&initial)).map_err(cgroup_err)?;
        let mut this = Self {
            cgroups,
            processes: Vec::new(),
        };
        for container in &names {
            let mut command = Command::new(CONTAINER_COMMAND[0]);
            command
                .args(&CONTAINER_COMMAND[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let spawned = spawn_tied_to_this_process(command);
            let child = match spawned {
                Ok(child) => child,
                Err(source) => {
                    this.kill_now();
                    return Err(RuntimeError::Spawn {
                        pod: name,
                        container: (*container).to_string(),
                        source,
                    });
                }
            };
            let pid = child.id();
            this.processes.push(((*container).to_string(), child));
            if let Err(source) = this.cgroups.add_process(container, pid) {
                this.kill_now();
                return Err(cgroup_err(source));
            }
        }
        Ok(this)
    }

    pub fn cgroups(&self) -> &PodCgroups {
        &self.cgroups
    }

    /// Pids of the containers' processes that have not been reaped.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(|(_, c)| c.id()).collect()
    }

    /// Container names, in spec order.
    pub fn containers(&self) -> Vec<String> {
        self.processes.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Signals the containers' processes and every other process in the Pod's cgroups (one
    /// added from outside, as `kubectl exec` adds one): the runtime stops them all, as `runc kill
    /// --all` does.
    fn signal_all(&mut self, signal: Signal) {
        for (_, child) in &mut self.processes {
            if matches!(child.try_wait(), Ok(None))
                && let Ok(pid) = i32::try_from(child.id())
            {
                // ESRCH means it exited in between: fine.
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
        for pid in self.foreign_pids() {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
    }

    /// Processes in the Pod's cgroups that this runtime did not start.
    fn foreign_pids(&self) -> Vec<u32> {
        let own: Vec<u32> = self.processes.iter().map(|(_, c)| c.id()).collect();
        self.cgroups
            .pids()
            .unwrap_or_default()
            .into_iter()
            .filter(|pid| !own.contains(pid))
            .collect()
    }

    /// Waits until no process is left in the Pod's cgroups that this runtime did not start (a
    /// foreign one is not our child: it cannot be waited for, only watched leave).
    async fn wait_foreign_gone(&self, deadline: Instant) -> bool {
        loop {
            if self.foreign_pids().is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    fn all_exited(&mut self) -> bool {
        self.processes
            .iter_mut()
            .all(|(_, c)| !matches!(c.try_wait(), Ok(None)))
    }

    /// The kubelet's graceful stop: SIGTERM, SIGKILL after `grace`, then the cgroups are removed.
    pub async fn terminate(mut self, grace: Duration) -> Result<(), RuntimeError> {
        self.signal_all(Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        let exited = self.wait_exited(deadline).await;
        if !exited || !self.wait_foreign_gone(deadline).await {
            self.signal_all(Signal::SIGKILL);
            // SIGKILL cannot be caught: this returns as soon as the kernel reaped the tasks.
            let deadline = Instant::now() + Duration::from_secs(10);
            self.wait_exited(deadline).await;
            self.wait_foreign_gone(deadline).await;
        }
        let name = self.cgroups.uid().to_string();
        let result = self.cgroups.remove();
        self.processes.clear();
        result.map_err(|source| RuntimeError::Cgroup { pod: name, source })
    }

    /// Waits until every process exited or `deadline` passed; true when all exited.
    ///
    /// Each process is waited on through a pidfd, which becomes readable the moment the process
    /// exits: no polling interval is added to the eviction (polling with a timer cost 1–2 ms per
    /// victim, and far more when the CPU was busy).
    async fn wait_exited(&mut self, deadline: Instant) -> bool {
        for (_, child) in &mut self.processes {
            if !matches!(child.try_wait(), Ok(None)) {
                continue;
            }
            let Ok(pid) = i32::try_from(child.id()) else {
                continue;
            };
            let pidfd = pidfd_open(pid).ok().and_then(|fd| {
                // SAFETY: the OwnedFd is moved into the AsyncFd: it stays open and the same
                // descriptor until the AsyncFd is dropped.
                unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                    .ok()
            });
            let exited = match pidfd {
                Some(fd) => tokio::time::timeout_at(deadline.into(), fd.readable())
                    .await
                    .is_ok(),
                // No pidfd (kernel < 5.3, or no reactor): poll.
                None => {
                    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    !matches!(child.try_wait(), Ok(None))
                }
            };
            if !exited {
                return false;
            }
            // Reap it now, so nothing is left as a zombie in the cgroup.
            let _ = child.try_wait();
        }
        self.all_exited()
    }

    /// SIGKILL and reap everything, remove the cgroups (cleanup on error or Ctrl-C; blocking).
    pub fn kill_now(&mut self) {
        let _ = kill_everything_in(&self.cgroups, Instant::now() + Duration::from_secs(2));
        for (_, child) in &mut self.processes {
            // A child that escaped its cgroup (it cannot, but the kill must not depend on it).
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = child.wait();
        }
        self.processes.clear();
        if let Err(e) = self.cgroups.remove() {
            tracing::warn!(pod_uid = self.cgroups.uid(), error = %e, "cgroup cleanup failed");
        }
    }
}

impl Drop for PodRuntime {
    /// A Pod dropped without `terminate` (error paths, panics) must not leave processes or
    /// cgroups behind.
    fn drop(&mut self) {
        if !self.processes.is_empty() {
            self.kill_now();
        }
    }
}

/// `pidfd_open(2)`: a file descriptor that becomes readable when process `pid` exits.
fn pidfd_open(pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    // SAFETY: plain syscall with two integer arguments; on success the returned descriptor is
    // ours alone, so wrapping it in an OwnedFd is sound.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| std::io::Error::other("pidfd out of range"))?;
    // SAFETY: `fd` was just returned by pidfd_open, is open and owned by nothing else.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

type SpawnJob = (Command, mpsc::SyncSender<std::io::Result<Child>>);

/// Starts `command` so that the kernel SIGKILLs it when this process dies
/// (`PR_SET_PDEATHSIG`): a node killed with SIGKILL takes its containers with it, as a
/// container's shim does, instead of leaving them running unowned.
///
/// The signal follows the death of the thread that forked, not of the process, and tokio's
/// blocking threads exit when idle; so every container is forked by one thread that lives as
/// long as the process.
fn spawn_tied_to_this_process(mut command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Result<mpsc::Sender<SpawnJob>, String>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("pod-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .map(|_| tx)
            .map_err(|e| e.to_string())
    });
    let spawner = spawner
        .as_ref()
        .map_err(|e| std::io::Error::other(format!("no container spawner thread: {e}")))?;
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (prctl, getppid); its error is made without allocating.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl: then nothing would signal us.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::sync_channel(1);
    spawner
        .send((command, reply))
        .map_err(|_| std::io::Error::other("the container spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the container spawner thread is gone"))?
}

/// A Pod an earlier run of this node left under its cgroup roots, and what was done with it.
#[derive(Debug)]
pub struct Reaped {
    pub uid: String,
    /// Processes that were still in its cgroups and were killed.
    pub killed: usize,
    /// Whether its cgroups could be removed.
    pub removed: Result<(), CgroupError>,
}

/// Kills every process in the Pod cgroups under `roots` and removes them: what a node that
/// stopped without its clean-up (SIGKILL, OOM kill, power to the process lost) left. Its own
/// containers died with it (`PR_SET_PDEATHSIG`); a process added from outside did not, and the
/// cgroups and their limits stay until someone removes them. Nothing is adopted: the Pods'
/// specs and statuses lived in the dead node's memory, and a Pod the store does not hold would
/// count against no allocation (docs/reliability.md, defect 4). The caller must hold the roots'
/// lock, so that no live node's Pods are reaped.
pub fn reap_leftovers(roots: &Roots) -> Result<Vec<Reaped>, CgroupError> {
    let mut reaped = Vec::new();
    for cgroups in PodCgroups::found_under(roots)? {
        let killed = kill_everything_in(&cgroups, Instant::now() + Duration::from_secs(5))?;
        reaped.push(Reaped {
            uid: cgroups.uid().to_string(),
            killed: killed.len(),
            removed: cgroups.remove(),
        });
    }
    Ok(reaped)
}

/// SIGKILLs every process in `cgroups` until none is left (a process forking meanwhile is caught
/// on the next pass) or `deadline`; the pids killed. Not a child's wait: a zombie has already
/// left its cgroups.
fn kill_everything_in(
    cgroups: &PodCgroups,
    deadline: Instant,
) -> Result<std::collections::BTreeSet<u32>, CgroupError> {
    let mut killed = std::collections::BTreeSet::new();
    loop {
        let pids = cgroups.pids()?;
        if pids.is_empty() || Instant::now() >= deadline {
            return Ok(killed);
        }
        for pid in pids {
            if let Ok(raw) = i32::try_from(pid) {
                // ESRCH means it exited in between: fine.
                let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
                killed.insert(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Removes the Pod cgroup roots if they are empty (the standalone root is shared with nobody
/// else unless another standalone node runs; a non-empty root is left alone).
pub fn remove_roots(roots: &Roots) {
    for dir in roots.dirs().paths() {
        match std::fs::remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::info!(root = %dir.display(), error = %e, "pod cgroup root left in place"),
        }
    }
}
