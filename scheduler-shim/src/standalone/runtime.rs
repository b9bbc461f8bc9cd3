//! What a running Pod is on this machine: its cgroups (`headroom_actuator::PodCgroups`, values
//! converted from the Pod's resources as the kubelet converts them) and one real process per
//! container, started inside its container's cgroup. There are no images: a container runs its
//! `command` and `args` as a host process ([`container_command`]), and `sleep infinity` (which
//! exits on SIGTERM like a well-behaved workload) when it gives neither.

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

/// What a container that names no command runs.
pub const DEFAULT_COMMAND: [&str; 2] = ["sleep", "infinity"];

/// What a container runs here, and its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerCommand {
    /// Program and arguments, never empty.
    pub argv: Vec<String>,
    /// `env` entries with a plain `value`, expanded, in spec order.
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
}

/// The container's `command` followed by its `args`, with `$(VAR)` references expanded from its
/// `env` as the kubelet expands them. Without an image there is no ENTRYPOINT or CMD: `args`
/// alone are the whole command line, and neither gives [`DEFAULT_COMMAND`]. `env` entries taken
/// from elsewhere (`valueFrom`) are left out.
pub fn container_command(container: &Container) -> ContainerCommand {
    let mut env: Vec<(String, String)> = Vec::new();
    for var in container.env.iter().flatten() {
        let Some(value) = &var.value else { continue };
        // An entry may refer to the entries before it.
        let value = expand(value, &env);
        env.push((var.name.clone(), value));
    }
    let argv: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(|a| expand(a, &env))
        .collect();
    let argv = if argv.first().is_some_and(|p| !p.is_empty()) {
        argv
    } else {
        DEFAULT_COMMAND.map(String::from).to_vec()
    };
    ContainerCommand {
        argv,
        env,
        working_dir: container.working_dir.clone().filter(|d| !d.is_empty()),
    }
}

/// The kubelet's `$(VAR)` expansion (k8s.io/kubernetes `third_party/forked/golang/expansion`):
/// `$(NAME)` becomes NAME's value when defined and stays as written otherwise, `$$` is a literal
/// `$`, and any other `$` is kept.
pub fn expand(input: &str, env: &[(String, String)]) -> String {
    let lookup = |name: &str| env.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(open) = after.strip_prefix('(')
            && let Some(close) = open.find(')')
        {
            let name = &open[..close];
            match lookup(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &open[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

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
    #[error("pod {pod}: container {container}: starting `{command}`: {source}")]
    Spawn {
        pod: String,
        container: String,
        command: String,
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
        let specs = pod.spec.iter().flat_map(|s| s.containers.iter());
        for container in specs {
            let run = container_command(container);
            let procs = match this.cgroups.procs_files(&container.name) {
                Ok(procs) => procs,
                Err(source) => {
                    this.kill_now();
                    return Err(cgroup_err(source));
                }
            };
            let mut command = Command::new(&run.argv[0]);
            command
                .args(&run.argv[1..])
                .envs(run.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some(dir) = &run.working_dir {
                command.current_dir(dir);
            }
            join_cgroup_before_exec(&mut command, procs);
            let child = match spawn_tied_to_this_process(command) {
                Ok(child) => child,
                Err(source) => {
                    this.kill_now();
                    return Err(RuntimeError::Spawn {
                        pod: name,
                        container: container.name.clone(),
                        command: run.argv.join(" "),
                        source,
                    });
                }
            };
            this.processes.push((container.name.clone(), child));
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

/// Has the child write `0` (itself) to each of its container's `cgroup.procs` between fork and
/// exec: a real workload may fork at once, and whatever it starts must be charged to its cgroup
/// from the first instruction, not after the parent moves it.
fn join_cgroup_before_exec(command: &mut Command, procs: Vec<std::fs::File>) {
    use std::os::fd::AsRawFd as _;
    // SAFETY: the closure runs between fork and exec and calls only write(2), which is
    // async-signal-safe; the files stay open because the closure owns them.
    unsafe {
        command.pre_exec(move || {
            for file in &procs {
                if libc::write(file.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::EnvVar;

    fn var(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(value.into()),
            ..Default::default()
        }
    }

    #[test]
    fn dollar_references_expand_as_the_kubelet_expands_them() {
        let env = vec![
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "x y".to_string()),
        ];
        for (input, want) in [
            ("$(A)", "1"),
            ("pre-$(A)-$(B)", "pre-1-x y"),
            ("$$(A)", "$(A)"),
            ("$(MISSING)", "$(MISSING)"),
            ("$A $", "$A $"),
            ("$(unclosed", "$(unclosed"),
            ("", ""),
        ] {
            assert_eq!(expand(input, &env), want, "{input:?}");
        }
    }

    #[test]
    fn command_then_args_with_env_and_the_default_without_either() {
        let container = Container {
            name: "c".into(),
            command: Some(vec!["sh".into(), "-c".into()]),
            args: Some(vec!["echo $(GREETING) > $(OUT)".into()]),
            env: Some(vec![
                var("GREETING", "hi"),
                var("OUT", "/tmp/$(GREETING).txt"),
                EnvVar {
                    name: "FROM_FIELD".into(),
                    value: None,
                    ..Default::default()
                },
            ]),
            working_dir: Some("/tmp".into()),
            ..Default::default()
        };
        let run = container_command(&container);
        assert_eq!(run.argv, ["sh", "-c", "echo hi > /tmp/hi.txt"]);
        assert_eq!(
            run.env,
            [
                ("GREETING".to_string(), "hi".to_string()),
                ("OUT".to_string(), "/tmp/hi.txt".to_string())
            ]
        );
        assert_eq!(run.working_dir.as_deref(), Some("/tmp"));

        let args_only = Container {
            args: Some(vec!["yes".into()]),
            ..Default::default()
        };
        assert_eq!(container_command(&args_only).argv, ["yes"]);
        let neither = Container::default();
        assert_eq!(container_command(&neither).argv, DEFAULT_COMMAND);
        let empty = Container {
            command: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(container_command(&empty).argv, DEFAULT_COMMAND);
    }
}
