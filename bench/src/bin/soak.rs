//! `soak`: continuous preempting resizes against a standalone node for minutes, with a
//! `stress-ng` background and many `WatchHeadroom` subscribers (some slow), to find what only
//! time finds: leaks, dangling reservations, lost resizes, latency drift.
//!
//! The node is `headroom-shim standalone` as a child process (headroomd in-process, real cgroups
//! under a unique root, real processes, eBPF probes required). Each round fills the node's free
//! CPU with low-priority Pods (unique names), resizes a high-priority Pod from 2 to 6 CPU (the
//! node is full, so the resize is Deferred and the shim must preempt 4 Pods), waits until the
//! resize is allocated, then resizes it back to 2. Every resize is counted as completed or failed
//! by cause. Pass: the node never exits on its own, its RSS stays within 10 % of the post-warm-up
//! baseline, no reservation is left, no cgroup is left after shutdown, every resize is accounted.
//!
//! `cargo xtask soak [--minutes N]` (10 minutes; `target/release/soak --minutes 10 --out
//! target/bench`); `cargo xtask test` runs `--seconds 30`. Writes `OUT/soak.json`.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use headroom_bench::{
    fmt_ns, new_histogram,
    soak::{SoakLength, rss_kib},
};
use headroom_node_model::parse_cpu_millis;
use headroom_proto::v1::{self as pb, standalone_client::StandaloneClient};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::json;
use tonic::transport::Channel;

const NAME: &str = "soak";
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";
const HIGH: &str = "soak-high";
const LOW_CPU_MILLIS: i64 = 1000;
const NODE_CPU_MILLIS: i64 = 8000;
const SMALL: &str = "2";
const LARGE: &str = "6";
/// A resize not completed within this long is failed as `timeout`.
const RESIZE_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(5);
/// Allowed RSS growth over the post-warm-up baseline.
const RSS_TOLERANCE: f64 = 0.10;

#[derive(Debug, Parser)]
#[command(about = "headroom soak test: continuous preempting resizes on a standalone node")]
struct Args {
    #[command(flatten)]
    length: SoakLength,
    /// Directory for soak.json.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Concurrent WatchHeadroom subscribers (one in four reads slowly).
    #[arg(long, default_value_t = 16)]
    subscribers: usize,
    /// The headroom-shim binary (default: next to this one).
    #[arg(long)]
    shim_bin: Option<PathBuf>,
}

// === Cleanup: every process and cgroup started, also on failure ===

/// What this run started; dropping it stops and removes all of it.
struct Started {
    node: Option<Child>,
    stress: Option<Child>,
    cgroup_root: String,
    dir: PathBuf,
}

impl Started {
    /// SIGTERM to the node, then SIGKILL after `grace`; the exit status if it stopped on SIGTERM.
    fn stop_node(&mut self, grace: Duration) -> Option<String> {
        let mut child = self.node.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return Some(format!("had already exited: {status}"));
        }
        let _ = kill(pid_of(&child), Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status.to_string());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    fn stop_stress(&mut self) {
        if let Some(mut child) = self.stress.take() {
            // stress-ng was started as the leader of its own process group: its workers too.
            let _ = killpg(pid_of(&child), Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.stop_stress();
        let _ = self.stop_node(Duration::from_secs(10));
        remove_cgroups(&self.cgroup_root);
        remove_intent_dirs(&self.cgroup_root);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn pid_of(child: &Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX))
}

/// `/sys/fs/cgroup/NAME` (v2) and `/sys/fs/cgroup/<controller>/NAME` (v1) that exist.
fn cgroup_dirs(root: &str) -> Vec<PathBuf> {
    let mut dirs = vec![Path::new(CGROUP_MOUNT).join(root)];
    if let Ok(entries) = fs::read_dir(CGROUP_MOUNT) {
        for e in entries.flatten() {
            dirs.push(e.path().join(root));
        }
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// Kills whatever is left in the cgroups below `dir` and removes them, deepest first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    for _ in 0..50 {
        if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn remove_cgroups(root: &str) {
    for dir in cgroup_dirs(root) {
        remove_tree(&dir);
    }
}

/// The node's intent directories (`/dev/shm/headroom/intents/<roots>`, named after the roots).
fn intent_dirs(root: &str) -> Vec<PathBuf> {
    fs::read_dir("/dev/shm/headroom/intents")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains(root))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn remove_intent_dirs(root: &str) {
    for dir in intent_dirs(root) {
        let _ = fs::remove_dir_all(dir);
    }
}

// === The workload ===

fn manifest() -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: soak-high}}
value: 1000000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: soak-low-a}}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: soak-low-b}}
value: 2000
---
apiVersion: v1
kind: Pod
metadata: {{name: {HIGH}}}
spec:
  priorityClassName: soak-high
  containers:
  - name: app
    image: busybox
    resources:
      requests: {{cpu: \"{SMALL}\", memory: 256Mi}}
      limits: {{cpu: \"{SMALL}\", memory: 256Mi}}
"
    )
}

fn low_pods(round: u64, n: i64) -> String {
    (0..n)
        .map(|i| {
            let class = if (round + u64::try_from(i).unwrap_or(0)).is_multiple_of(2) {
                "soak-low-a"
            } else {
                "soak-low-b"
            };
            format!(
                "apiVersion: v1
kind: Pod
metadata: {{name: soak-low-r{round}-{i}}}
spec:
  priorityClassName: {class}
  containers:
  - name: worker
    image: busybox
    resources:
      requests: {{cpu: {LOW_CPU_MILLIS}m, memory: 64Mi}}
      limits: {{cpu: {LOW_CPU_MILLIS}m, memory: 64Mi}}
"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

#[derive(Default)]
struct Tally {
    issued: u64,
    completed: u64,
    failed: BTreeMap<String, u64>,
    preempted: u64,
    rounds: u64,
    apply_errors: u64,
}

impl Tally {
    fn fail(&mut self, cause: String) {
        *self.failed.entry(cause).or_default() += 1;
    }
    fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// A failure cause short enough to group by: the status and the message's first words.
fn cause(status: &str, message: &str) -> String {
    let short: String = message.chars().take(80).collect();
    if short.is_empty() {
        status.to_string()
    } else {
        format!("{status}: {short}")
    }
}

/// Resizes the high-priority Pod's CPU to `to` and waits until it is allocated; the latency or
/// the cause of failure.
async fn resize_and_wait(c: &mut StandaloneClient<Channel>, to: &str) -> Result<Duration, String> {
    let target = parse_cpu_millis(to).map_err(|e| format!("bad target {to}: {e}"))?;
    let started = Instant::now();
    let response = c
        .resize(pb::ResizePodRequest {
            pod: HIGH.into(),
            cpu: to.into(),
            ..pb::ResizePodRequest::default()
        })
        .await
        .map_err(|s| cause(&format!("rpc {:?}", s.code()), s.message()))?
        .into_inner();
    match response.status.as_str() {
        "Completed" | "Deferred" | "InProgress" => {}
        other => return Err(cause(other, &response.message)),
    }
    loop {
        let pods = c
            .get_pods(pb::GetPodsRequest {})
            .await
            .map_err(|s| cause(&format!("GetPods rpc {:?}", s.code()), s.message()))?
            .into_inner()
            .pods;
        let Some(high) = pods.iter().find(|p| p.name == HIGH) else {
            return Err("the high-priority Pod is gone".into());
        };
        match high.resize.as_str() {
            "Infeasible" | "Error" => return Err(cause(&high.resize, "")),
            "" if parse_cpu_millis(&high.allocated_cpu).ok() == Some(target) => {
                return Ok(started.elapsed());
            }
            _ => {}
        }
        if started.elapsed() > RESIZE_TIMEOUT {
            return Err("timeout".into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Running Pods and the CPU they hold.
async fn running(c: &mut StandaloneClient<Channel>) -> Result<(usize, i64)> {
    let pods = c.get_pods(pb::GetPodsRequest {}).await?.into_inner().pods;
    let running: Vec<_> = pods.iter().filter(|p| p.phase == "Running").collect();
    let cpu = running
        .iter()
        .map(|p| parse_cpu_millis(&p.allocated_cpu).unwrap_or(0))
        .sum();
    Ok((running.len(), cpu))
}

// === WatchHeadroom subscribers ===

#[derive(Debug, Default, Clone)]
struct SubscriberResult {
    messages: u64,
    error: Option<String>,
}

async fn subscriber(
    socket: PathBuf,
    index: usize,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> SubscriberResult {
    let mut result = SubscriberResult::default();
    let delay = match index % 4 {
        0 => Some(Duration::from_millis(500)),
        _ => None,
    };
    let mut client = match headroom_client::headroom_client(&socket).await {
        Ok(c) => c,
        Err(e) => {
            result.error = Some(format!("connect: {e}"));
            return result;
        }
    };
    let stream = client
        .watch_headroom(pb::WatchHeadroomRequest {
            include_pods: index.is_multiple_of(2),
            min_interval_ms: 0,
        })
        .await;
    let mut stream = match stream {
        Ok(s) => s.into_inner(),
        Err(s) => {
            result.error = Some(format!("WatchHeadroom: {:?}: {}", s.code(), s.message()));
            return result;
        }
    };
    loop {
        tokio::select! {
            _ = stop.changed() => return result,
            m = stream.message() => match m {
                Ok(Some(_)) => result.messages += 1,
                Ok(None) => {
                    result.error = Some("stream ended before the run did".into());
                    return result;
                }
                Err(s) => {
                    result.error = Some(format!("stream: {:?}: {}", s.code(), s.message()));
                    return result;
                }
            },
        }
        if let Some(d) = delay {
            tokio::select! {
                _ = stop.changed() => return result,
                () = tokio::time::sleep(d) => {}
            }
        }
    }
}

// === The run ===

async fn wait_for_socket(path: &Path, started: &mut Started, timeout: Duration) -> Result<Channel> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(child) = started.node.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            bail!("the node exited during start-up: {status}");
        }
        if path.exists()
            && let Ok(ch) = headroom_client::connect_uds(path).await
        {
            return Ok(ch);
        }
        if Instant::now() > deadline {
            bail!("{} did not appear within {timeout:?}", path.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

async fn soak(args: &Args) -> Result<bool> {
    let duration = args.length.duration();
    anyhow::ensure!(
        duration >= Duration::from_secs(5),
        "the run must last at least 5 s"
    );
    let interval = if args.length.is_short() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(60)
    };
    let warmup = args.length.warmup();
    let shim_bin = match &args.shim_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("no directory for this binary")?
            .join("headroom-shim"),
    };
    anyhow::ensure!(
        shim_bin.exists(),
        "{} not found (build it: cargo build --release -p headroom-shim --features standalone)",
        shim_bin.display()
    );
    let cgroup_root = format!("headroom-soak-{}", std::process::id());
    let dir = PathBuf::from(format!("/run/headroom/{cgroup_root}"));
    fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let mut started = Started {
        node: None,
        stress: None,
        cgroup_root: cgroup_root.clone(),
        dir: dir.clone(),
    };
    let shim_sock = dir.join("shim.sock");
    let headroomd_sock = dir.join("headroomd.sock");
    let manifest_path = dir.join("manifest.yaml");
    fs::write(&manifest_path, manifest())?;
    let log_path = dir.join("node.log");
    let log = fs::File::create(&log_path)?;

    let node = Command::new(&shim_bin)
        .arg("standalone")
        .arg("--manifest")
        .arg(&manifest_path)
        .args(["--node-cpu", "8", "--node-memory", "16Gi", "--grace-period", "0"])
        .args(["--cgroup-root", &cgroup_root, "--probes", "required"])
        .arg("--socket")
        .arg(&shim_sock)
        .arg("--headroomd-socket")
        .arg(&headroomd_sock)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", shim_bin.display()))?;
    let node_pid = node.id();
    started.node = Some(node);
    let channel = match wait_for_socket(&shim_sock, &mut started, Duration::from_secs(60)).await {
        Ok(ch) => ch,
        Err(e) => bail!("{e:#}\n--- node log ---\n{}", tail(&log_path, 30)),
    };
    let mut control = StandaloneClient::new(channel);
    let mut headroom = headroom_client::headroom_client(&headroomd_sock).await?;
    println!(
        "{NAME}: node pid {node_pid} up (cgroup root {cgroup_root}, probes required); running {:.1} min",
        duration.as_secs_f64() / 60.0
    );

    let stress_timeout = (duration + Duration::from_secs(60)).as_secs().to_string();
    started.stress = Some(
        Command::new("stress-ng")
            .args([
                "--cpu",
                "1",
                "--vm",
                "1",
                "--vm-bytes",
                "128M",
                "--timeout",
                &stress_timeout,
            ])
            .args(["--quiet"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("start stress-ng (apt-get install stress-ng)")?,
    );

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let subscribers: Vec<_> = (0..args.subscribers)
        .map(|i| tokio::spawn(subscriber(headroomd_sock.clone(), i, stop_rx.clone())))
        .collect();

    // RSS sampler: at start, then every interval.
    let t0 = Instant::now();
    let rss: Arc<Mutex<Vec<(f64, u64)>>> = Arc::default();
    let sampler = {
        let rss = rss.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            loop {
                tick.tick().await;
                if let Some(kib) = rss_kib(node_pid) {
                    rss.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((t0.elapsed().as_secs_f64(), kib));
                }
            }
        })
    };

    let mut tally = Tally::default();
    let mut up_all = new_histogram();
    let mut down_all = new_histogram();
    let mut windows: Vec<Histogram<u64>> = Vec::new();
    let mut crashed: Option<String> = None;
    let deadline = t0 + duration;
    let record = |windows: &mut Vec<Histogram<u64>>, all: &mut Histogram<u64>, d: Duration| {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let w = usize::try_from(t0.elapsed().as_nanos() / interval.as_nanos()).unwrap_or(0);
        while windows.len() <= w {
            windows.push(new_histogram());
        }
        let _ = windows[w].record(ns);
        let _ = all.record(ns);
    };

    while Instant::now() < deadline {
        if let Some(child) = started.node.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            crashed = Some(status.to_string());
            break;
        }
        tally.rounds += 1;
        let round = tally.rounds;
        let (_, used) = match running(&mut control).await {
            Ok(r) => r,
            Err(e) => {
                tally.apply_errors += 1;
                eprintln!("{NAME}: GetPods: {e:#}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let fill = ((NODE_CPU_MILLIS - used) / LOW_CPU_MILLIS).max(0);
        if fill > 0
            && let Err(s) = control
                .apply_manifest(pb::ApplyManifestRequest {
                    yaml: low_pods(round, fill),
                })
                .await
        {
            tally.apply_errors += 1;
            eprintln!("{NAME}: ApplyManifest: {:?}: {}", s.code(), s.message());
        }
        let before = running(&mut control).await.map(|r| r.0).unwrap_or(0);
        tally.issued += 1;
        match resize_and_wait(&mut control, LARGE).await {
            Ok(d) => {
                tally.completed += 1;
                record(&mut windows, &mut up_all, d);
            }
            Err(c) => tally.fail(c),
        }
        let after = running(&mut control).await.map(|r| r.0).unwrap_or(before);
        tally.preempted += u64::try_from(before.saturating_sub(after)).unwrap_or(0);
        tally.issued += 1;
        match resize_and_wait(&mut control, SMALL).await {
            Ok(d) => {
                tally.completed += 1;
                let _ = down_all.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            }
            Err(c) => tally.fail(c),
        }
    }
    let elapsed = t0.elapsed();
    if let Some(kib) = rss_kib(node_pid) {
        rss.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((elapsed.as_secs_f64(), kib));
    }
    sampler.abort();

    // Reservations: every resize is over, so none may be left (give the pipeline 5 s to publish).
    let mut reservations = Vec::new();
    let settle = Instant::now() + Duration::from_secs(5);
    loop {
        match headroom
            .get_headroom(pb::GetHeadroomRequest { include_pods: false })
            .await
        {
            Ok(s) => reservations = s.into_inner().reservations,
            Err(s) => eprintln!("{NAME}: GetHeadroom: {:?}: {}", s.code(), s.message()),
        }
        if reservations.is_empty() || Instant::now() > settle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let _ = stop_tx.send(true);
    let mut subs = Vec::new();
    for s in subscribers {
        subs.push(s.await.unwrap_or_else(|e| SubscriberResult {
            messages: 0,
            error: Some(format!("task: {e}")),
        }));
    }
    drop(control);
    drop(headroom);

    started.stop_stress();
    let stop_status = if crashed.is_some() {
        None
    } else {
        started.stop_node(Duration::from_secs(20))
    };
    let leftover_cgroups: Vec<String> = cgroup_dirs(&cgroup_root)
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    // The actuator keeps one record file per resized Pod and marks it done when the resize is
    // done: a record still pending (or unreadable) is a resize left half-done.
    let leftover_intents: Vec<String> = intent_dirs(&cgroup_root)
        .iter()
        .filter_map(|d| headroom_actuator::intent::IntentLog::open(d).ok())
        .flat_map(|log| match log.pending() {
            Ok(scan) => scan
                .pending
                .into_iter()
                .map(|(uid, record)| format!("{}/{uid}: {record:?}", log.dir().display()))
                .chain(scan.unusable.into_iter().map(|u| u.error.to_string()))
                .collect(),
            Err(e) => vec![e.to_string()],
        })
        .collect();
    let node_log = tail(&log_path, 20);
    drop(started); // removes whatever is left

    // === Figures and verdict ===
    let samples = rss
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let start_rss = samples.first().map_or(0, |s| s.1);
    let end_rss = samples.last().map_or(0, |s| s.1);
    let warm = warmup.as_secs_f64();
    let baseline = samples.iter().find(|s| s.0 >= warm).map_or(end_rss, |s| s.1);
    let post_max = samples
        .iter()
        .filter(|s| s.0 >= warm)
        .map(|s| s.1)
        .max()
        .unwrap_or(end_rss);
    let growth = if baseline == 0 {
        0.0
    } else {
        (post_max as f64 - baseline as f64) / baseline as f64
    };

    let mut problems = Vec::new();
    if let Some(status) = &crashed {
        problems.push(format!("the node process exited during the run: {status}"));
    }
    match &stop_status {
        Some(s) if crashed.is_none() && !s.contains("exit status: 0") => {
            problems.push(format!("the node stopped badly on SIGTERM: {s}"));
        }
        None if crashed.is_none() => problems.push("the node did not stop within 20 s of SIGTERM".into()),
        _ => {}
    }
    if growth > RSS_TOLERANCE {
        problems.push(format!(
            "node RSS grew {:.1} % after warm-up ({baseline} KiB → max {post_max} KiB; limit {:.0} %)",
            growth * 100.0,
            RSS_TOLERANCE * 100.0
        ));
    }
    if !reservations.is_empty() {
        problems.push(format!(
            "{} reservation(s) left: {:?}",
            reservations.len(),
            reservations.iter().map(|r| r.id.as_str()).collect::<Vec<_>>()
        ));
    }
    if !leftover_cgroups.is_empty() {
        problems.push(format!("cgroups left after shutdown: {leftover_cgroups:?}"));
    }
    if !leftover_intents.is_empty() {
        problems.push(format!(
            "intent records left after shutdown: {leftover_intents:?}"
        ));
    }
    if tally.completed + tally.failed_total() != tally.issued {
        problems.push(format!(
            "resizes unaccounted: issued {}, completed {}, failed {}",
            tally.issued,
            tally.completed,
            tally.failed_total()
        ));
    }
    if tally.failed_total() > 0 {
        problems.push(format!("{} resize(s) failed", tally.failed_total()));
    }
    if tally.apply_errors > 0 {
        problems.push(format!("{} ApplyManifest/GetPods error(s)", tally.apply_errors));
    }
    if tally.completed == 0 {
        problems.push("no resize completed".into());
    }
    for (i, s) in subs.iter().enumerate() {
        if let Some(e) = &s.error {
            problems.push(format!("WatchHeadroom subscriber {i}: {e}"));
        } else if s.messages == 0 {
            problems.push(format!("WatchHeadroom subscriber {i} received nothing"));
        }
    }

    let p = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0 } else { h.value_at_quantile(q) };
    println!(
        "\n{NAME}: {:.1} s, {} rounds; node 8 CPU / 16Gi; stress-ng --cpu 1 --vm 1 --vm-bytes 128M; {} WatchHeadroom subscribers ({} slow)",
        elapsed.as_secs_f64(),
        tally.rounds,
        subs.len(),
        subs.len().div_ceil(4)
    );
    println!(
        "resizes: {} issued, {} completed, {} failed; {} Pods preempted",
        tally.issued,
        tally.completed,
        tally.failed_total(),
        tally.preempted
    );
    for (c, n) in &tally.failed {
        println!("  failed ({c}): {n}");
    }
    println!(
        "preempting resize 2→6 CPU, request → allocated: p50 {}  p99 {}  max {}  (n={})",
        fmt_ns(p(&up_all, 0.5)),
        fmt_ns(p(&up_all, 0.99)),
        fmt_ns(up_all.max()),
        up_all.len()
    );
    println!(
        "shrinking resize 6→2 CPU: p50 {}  p99 {}  max {}  (n={})",
        fmt_ns(p(&down_all, 0.5)),
        fmt_ns(p(&down_all, 0.99)),
        fmt_ns(down_all.max()),
        down_all.len()
    );
    println!(
        "node RSS: start {start_rss} KiB, end {end_rss} KiB; after warm-up ({:.0} s) baseline {baseline} KiB, max {post_max} KiB ({:+.1} %)",
        warm,
        growth * 100.0
    );
    println!(
        "{:>10}  {:>9}  {:>9}  {:>9}  {:>10}",
        "window", "resizes", "p50", "p99", "RSS KiB"
    );
    let iv = interval.as_secs_f64();
    let mut window_rows = Vec::new();
    for (i, h) in windows.iter().enumerate() {
        let (from, to) = (i as f64 * iv, (i + 1) as f64 * iv);
        let rss_at = samples
            .iter()
            .filter(|s| s.0 <= to + 0.5)
            .map(|s| s.1)
            .next_back()
            .unwrap_or(0);
        println!(
            "{:>10}  {:>9}  {:>9}  {:>9}  {:>10}",
            format!("{from:.0}-{to:.0}s"),
            h.len(),
            fmt_ns(p(h, 0.5)),
            fmt_ns(p(h, 0.99)),
            rss_at
        );
        window_rows.push(json!({
            "from_s": from, "to_s": to, "resizes": h.len(),
            "p50_ns": p(h, 0.5), "p99_ns": p(h, 0.99), "max_ns": h.max(), "rss_kib": rss_at,
        }));
    }
    println!(
        "subscribers: messages received {:?}",
        subs.iter().map(|s| s.messages).collect::<Vec<_>>()
    );
    println!(
        "end: {} reservation(s) left, {} cgroup(s) left after shutdown, node stop: {}",
        reservations.len(),
        leftover_cgroups.len(),
        stop_status.as_deref().unwrap_or("killed")
    );

    let report = json!({
        "name": NAME,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "seconds": elapsed.as_secs_f64(),
        "rounds": tally.rounds,
        "resizes": {
            "issued": tally.issued, "completed": tally.completed,
            "failed": tally.failed_total(), "failed_by_cause": tally.failed,
        },
        "pods_preempted": tally.preempted,
        "preempting_resize_ns": {"p50": p(&up_all, 0.5), "p99": p(&up_all, 0.99), "max": up_all.max(), "n": up_all.len()},
        "shrinking_resize_ns": {"p50": p(&down_all, 0.5), "p99": p(&down_all, 0.99), "max": down_all.max(), "n": down_all.len()},
        "windows": window_rows,
        "rss_kib": {
            "start": start_rss, "end": end_rss, "baseline_after_warmup": baseline,
            "max_after_warmup": post_max, "growth": growth,
            "samples": samples.iter().map(|s| json!({"t_s": s.0, "kib": s.1})).collect::<Vec<_>>(),
        },
        "subscribers": subs.iter().map(|s| json!({"messages": s.messages, "error": s.error})).collect::<Vec<_>>(),
        "reservations_left": reservations.len(),
        "cgroups_left": leftover_cgroups,
        "node_stop": stop_status,
        "problems": problems,
        "passed": problems.is_empty(),
    });
    fs::create_dir_all(&args.out)?;
    let path = args.out.join("soak.json");
    fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    println!("wrote {}", path.display());

    if problems.is_empty() {
        println!("{NAME}: PASSED");
        Ok(true)
    } else {
        for pr in &problems {
            eprintln!("{NAME}: FAIL: {pr}");
        }
        eprintln!("--- node log (last lines) ---\n{node_log}");
        Ok(false)
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if let Some(why) = headroom_bench::needs_root(
        NAME,
        &format!(
            "the standalone node creates cgroups under {CGROUP_MOUNT}, moves processes into them and loads eBPF probes"
        ),
    ) {
        eprintln!("{why}");
        return std::process::ExitCode::from(2);
    }
    let Some(rt) = headroom_bench::tokio_runtime(NAME) else {
        return std::process::ExitCode::FAILURE;
    };
    let result = rt.block_on(async {
        tokio::select! {
            r = soak(&args) => r,
            // Dropping the run's future drops `Started`: node, stress-ng and cgroups are removed.
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted; everything started was removed")),
        }
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    match result {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{NAME}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
