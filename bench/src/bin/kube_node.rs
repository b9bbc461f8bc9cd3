//! A Deferred resize on a real node, from `kubectl patch … --subresource resize` to the new
//! limit in the container's cgroup, the preemption paths on one cluster in alternating rounds:
//! - ours: headroomd (`--pods-from kube`) and `headroom-shim kube` (headroomd's ledger) as the
//!   DaemonSet runs them, `--preemption=delete` (as kube-scheduler: `DisruptionTarget`, then a
//!   delete), kube-scheduler running with `InPlacePodVerticalScalingSchedulerPreemption` off (it
//!   still binds new Pods);
//! - ours with `--preemption=eviction`: the Eviction API, which enforces PodDisruptionBudgets at
//!   the API server and costs it more work per victim (a read of the Pod, a list of PDBs, the
//!   condition and the delete in one call); reported beside, what that guarantee costs;
//! - peer: upstream kube-scheduler with the gate on, no shim.
//!
//! The cluster is `headroom_testkit`'s: kube-apiserver, kube-scheduler, kube-controller-manager
//! and the kubelet v1.37.2, containerd v2.4.2, on this host (`docs/real-cluster.md`). One
//! repetition is the seed's tutorial at a quarter (victim 750m, resizer 1 → 1500m, 2 CPUs): the
//! clock starts when the patch returns, and a watch (`kubectl get pods -w`) and a cgroup poll
//! (every 2 ms) stamp each phase: Deferred marked, preemption decided (the victim's
//! `DisruptionTarget` or deletion), victim deleting, victim gone, kubelet admitted
//! (`allocatedResources` at 1500m), actuated (the quota in the cgroup). The victim's grace period
//! is 30 s; its container exits at once on SIGTERM.
//!
//! Every p99 ratio is printed with its 90 % bootstrap interval (`headroom_bench::interval`): with
//! 100 repetitions a p99 is the second-largest sample, and whether the target is met is said
//! with how far this run's samples can say it.
use std::{
    collections::BTreeMap,
    io::BufReader,
    path::{Path, PathBuf},
    process::Stdio,
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use headroom_bench::{
    BenchArgs, Comparison, Summary,
    daemon::CpuTime,
    interval::{RatioInterval, ratio_interval},
    new_histogram, print_comparison, write_json,
};
use headroom_testkit::{
    ControlPlane, Node, PodCall, SchedulerGate, audit_span,
    beside::{self, Preemption},
    node::{NODE_NAME, start_cluster},
    repetitions::Repetitions,
    tutorial::{RESIZED_QUOTA_US, cpu_quota_us},
};
use serde_json::Value;

const NAMESPACE: &str = "bench";

/// The phases, in the order a resize goes through them.
const PHASES: &[&str] = &[
    "deferred",
    "decided",
    "evicted",
    "victim_gone",
    "admitted",
    "actuated",
];

/// The spans the preemptor owns, each between two phases of the same repetition: measured from
/// the preemptor's own start (the kubelet's Deferred), so that a slower kubelet or API server in
/// one round does not count against it, as it does in the cumulative "patch → phase" figures.
const OWNED: &[(&str, &str, &str)] = &[
    ("deferred → decided", "deferred", "decided"),
    ("decided → evicted", "decided", "evicted"),
    ("deferred → evicted", "deferred", "evicted"),
];

/// The same spans on the API server's clock (its audit log), without the watch that stamps the
/// phases above: from the kubelet's status write of the resizer that the preemptor reacted to
/// (the last one received before the first preemption call on the victim; received, not
/// answered: the watch event can reach the preemptor before the kubelet has its answer) to that
/// call, and on to the call that removes the victim (the delete). The Eviction API's create is
/// both the first call and the removal: its path has no "first call → delete" spans. The last two
/// are the API server's own time on the preemptor's calls (received → answered): with
/// `--preemption=delete` the same status patch and delete as upstream's, so the same work but for
/// the encoding and who asks (the Eviction API's create is other work: PDBs, its own condition).
const SERVER: &[&str] = &[
    "server: Deferred written → first call",
    "server: first call → delete",
    "server: first call answered → delete",
    "server: Deferred written → delete",
    "server: first call received → answered",
    "server: delete received → answered",
];

/// CPU time (schedstat, every thread) each process used during one repetition (its two Pods
/// started, the resize, until the victim is gone): what each costs the node's 2 CPUs, which the
/// kubelet and the API server share with it. In headroom's rounds kube-scheduler runs too (its
/// gate off: it still binds the repetition's Pods).
const CPU: &[&str] = &[
    "cpu: headroomd",
    "cpu: headroom-shim",
    "cpu: kube-scheduler",
    "cpu: kube-apiserver",
    "cpu: etcd",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Preemptor {
    Headroom(Preemption),
    Upstream,
}

impl Preemptor {
    const ALL: [Preemptor; 3] = [
        Preemptor::Headroom(Preemption::Delete),
        Preemptor::Headroom(Preemption::Eviction),
        Preemptor::Upstream,
    ];

    /// Its label in the report.
    fn label(self) -> &'static str {
        match self {
            Preemptor::Headroom(Preemption::Delete) => "headroom",
            Preemptor::Headroom(Preemption::Eviction) => "headroom (eviction)",
            Preemptor::Upstream => "upstream",
        }
    }
}

/// The common options, and how many alternating rounds (5 repetitions per path each).
#[derive(Debug, clap::Parser)]
struct Args {
    #[command(flatten)]
    common: BenchArgs,
    /// Alternating rounds of 5 repetitions per path (default 10: a p99 over 50; `--quick`: one round
    /// of 2).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    rounds: Option<u16>,
}

fn main() -> Result<()> {
    let Args { common: args, rounds } = <Args as clap::Parser>::parse();
    let (rounds, per_round) = match (args.quick, rounds) {
        (_, Some(rounds)) => (usize::from(rounds), 5),
        (true, None) => (1, 2),
        (false, None) => (10, 5),
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (mut plane, node) = start_cluster(true).context("start the real cluster")?;
    let kubeconfig = beside::apply_rbac(&plane, &workspace).map_err(anyhow::Error::msg)?;
    let repetitions = Repetitions::create(&plane, NAMESPACE)?;
    let release = workspace.join("target/release");
    let headroomd =
        std::env::var_os("HEADROOMD_BIN").map_or_else(|| release.join("headroomd"), PathBuf::from);
    let shim_bin =
        std::env::var_os("HEADROOM_SHIM_BIN").map_or_else(|| release.join("headroom-shim"), PathBuf::from);

    let per_phase: BTreeMap<&str, Histogram<u64>> = PHASES.iter().map(|p| (*p, new_histogram())).collect();
    let mut timed: BTreeMap<&str, BTreeMap<&str, Histogram<u64>>> = Preemptor::ALL
        .iter()
        .map(|p| (p.label(), per_phase.clone()))
        .collect();
    let per_span: BTreeMap<&str, Histogram<u64>> = OWNED
        .iter()
        .map(|(s, ..)| *s)
        .chain(SERVER.iter().copied())
        .chain(CPU.iter().copied())
        .map(|s| (s, new_histogram()))
        .collect();
    let mut owned: BTreeMap<&str, BTreeMap<&str, Histogram<u64>>> = Preemptor::ALL
        .iter()
        .map(|p| (p.label(), per_span.clone()))
        .collect();
    let mut victim_termination = new_histogram();
    let mut failures = Vec::new();
    let mut rep = 0usize;
    for round in 0..rounds {
        for path in Preemptor::ALL {
            // Kept for the round: dropping it stops headroomd and the shim.
            let _headroom = match path {
                Preemptor::Headroom(preemption) => {
                    plane.start_scheduler(SchedulerGate::Off)?;
                    Some(
                        beside::start_headroom(
                            &plane,
                            &headroomd,
                            &shim_bin,
                            &kubeconfig,
                            NODE_NAME,
                            preemption,
                        )
                        .map_err(anyhow::Error::msg)?,
                    )
                }
                Preemptor::Upstream => {
                    plane.start_scheduler(SchedulerGate::On)?;
                    None
                }
            };
            let pids: [Option<u32>; 5] = [
                _headroom.as_ref().map(|h| h.daemon.process.id()),
                _headroom.as_ref().map(|h| h.shim.id()),
                plane.pid("kube-scheduler"),
                plane.pid("kube-apiserver"),
                plane.pid("etcd"),
            ];
            let cpu_of = |pid: Option<u32>| pid.and_then(CpuTime::read).map_or(0, |c| c.schedstat_ns);
            // One unrecorded warm-up repetition: every path is measured warm.
            for index in 0..=per_round {
                rep += 1;
                let cpu_before = pids.map(cpu_of);
                let repetition = one_repetition(&plane, &node, &repetitions, rep);
                let cpu_used = pids.map(cpu_of);
                match repetition {
                    Ok(_) if index == 0 => {}
                    Ok(phases) => {
                        let histograms = timed.get_mut(path.label()).context("path")?;
                        for (phase, at) in &phases {
                            record(histograms.get_mut(phase).context("phase")?, *at)?;
                        }
                        let spans = owned.get_mut(path.label()).context("path")?;
                        for ((what, before), after) in CPU.iter().zip(cpu_before).zip(cpu_used) {
                            if after > before {
                                record(
                                    spans.get_mut(what).context("cpu")?,
                                    Duration::from_nanos(after - before),
                                )?;
                            }
                        }
                        for (span, from, to) in OWNED {
                            if let (Some(from), Some(to)) = (phases.get(from), phases.get(to)) {
                                record(spans.get_mut(span).context("span")?, to.saturating_sub(*from))?;
                            }
                        }
                        match server_spans(&plane, rep) {
                            Ok(server) => {
                                for (span, took) in SERVER.iter().zip(server) {
                                    if let Some(took) = took {
                                        record(spans.get_mut(span).context("span")?, took)?;
                                    }
                                }
                            }
                            Err(e) => failures.push(format!("round {round} {path:?} rep {rep}: {e:#}")),
                        }
                        if let (Some(evicted), Some(gone)) =
                            (phases.get("evicted"), phases.get("victim_gone"))
                        {
                            record(&mut victim_termination, gone.saturating_sub(*evicted))?;
                        }
                    }
                    Err(e) => failures.push(format!("round {round} {path:?} rep {rep}: {e:#}")),
                }
                repetitions.remove(&plane, rep)?;
            }
        }
    }
    if !failures.is_empty() {
        bail!("{} repetitions failed:\n{}", failures.len(), failures.join("\n"));
    }
    let (ours, peer) = (&timed["headroom"], &timed["upstream"]);
    let label = |who: &str, phase: &str| format!("{who}: patch → {phase}");
    let mut comparison = Comparison::new(
        "kube_node",
        Summary::from_histogram(&label("headroom-shim + kubelet", "actuated"), &ours["actuated"]),
    )
    .with_peer(Summary::from_histogram(
        &label("kube-scheduler (gate on) + kubelet", "actuated"),
        &peer["actuated"],
    ));
    for phase in PHASES {
        for path in Preemptor::ALL {
            comparison.details.push(Summary::from_histogram(
                &label(path.label(), phase),
                &timed[path.label()][phase],
            ));
        }
    }
    for span in OWNED
        .iter()
        .map(|(s, ..)| *s)
        .chain(SERVER.iter().copied())
        .chain(CPU.iter().copied())
    {
        for path in Preemptor::ALL {
            comparison.details.push(Summary::from_histogram(
                &format!("{}: {span}", path.label()),
                &owned[path.label()][span],
            ));
        }
    }
    comparison.details.push(Summary::from_histogram(
        "victim's own termination (deleting → gone)",
        &victim_termination,
    ));
    let mut ratios = serde_json::Map::new();
    for path in [
        Preemptor::Headroom(Preemption::Delete),
        Preemptor::Headroom(Preemption::Eviction),
    ] {
        let ours = &timed[path.label()];
        let by_phase: serde_json::Map<String, Value> = PHASES
            .iter()
            .map(|phase| {
                let interval = ratio_interval(&ours[phase], &peer[phase], 0.99, CONFIDENCE);
                println!(
                    "{phase:>12}: p99 upstream/{} = {}",
                    path.label(),
                    describe(interval, false)
                );
                ((*phase).to_string(), serde_json::json!(interval))
            })
            .collect();
        ratios.insert(path.label().to_string(), Value::Object(by_phase));
        let spans: serde_json::Map<String, Value> = OWNED
            .iter()
            .map(|(s, ..)| *s)
            .chain(SERVER.iter().copied())
            .map(|span| {
                let interval = ratio_interval(
                    &owned[path.label()][span],
                    &owned["upstream"][span],
                    0.99,
                    CONFIDENCE,
                );
                // None (null): not a span of this path (the Eviction API's single call).
                if interval.is_some() {
                    println!(
                        "{span:>40}: p99 upstream/{} = {}",
                        path.label(),
                        describe(interval, true)
                    );
                }
                (span.to_string(), serde_json::json!(interval))
            })
            .collect();
        ratios.insert(format!("{} (owned spans)", path.label()), Value::Object(spans));
    }
    comparison.extra = serde_json::json!({"p99_ratio_upstream_over": ratios});
    comparison.notes.push(format!(
        "{} repetitions per path in {rounds} alternating rounds (each after one unrecorded \
         warm-up), one real cluster (kubelet v1.37.2, containerd v2.4.2) on this 2-CPU host; \
         victim grace period 30 s, its container exits at once on SIGTERM",
        rounds * per_round
    ));
    comparison.notes.push(
        "headroom: the DaemonSet's --preemption=delete; headroom (eviction): --preemption=eviction, \
         PDBs enforced by the API server"
            .to_string(),
    );
    comparison.notes.push(
        "target: headroom's p99 at or below upstream's at the phases it owns (the spans deferred → \
         decided → evicted); the whole path within 2x of the victim's own termination"
            .to_string(),
    );
    print_comparison(&comparison);
    write_json(&args.out, &comparison)?;
    Ok(())
}

/// Of the bootstrap interval printed beside every p99 ratio.
const CONFIDENCE: f64 = 0.9;

/// Fewer repetitions per path than this (`--quick`'s 2) give no verdict on the target: a p99 of
/// a handful is its largest sample, and its bootstrap interval is as narrow as it is meaningless.
const REPETITIONS_FOR_A_VERDICT: usize = 20;

/// A p99 ratio upstream/headroom and its interval; for a span headroom owns (`judged`), also what
/// it says of the target (headroom's p99 at or below upstream's: a ratio of at least 1).
fn describe(interval: Option<RatioInterval>, judged: bool) -> String {
    let Some(interval) = interval else {
        return "no samples".into();
    };
    if !judged {
        return interval.describe();
    }
    let verdict = if interval.samples < REPETITIONS_FOR_A_VERDICT {
        "too few repetitions for a verdict"
    } else if interval.ratio >= 1.0 {
        "met"
    } else if interval.straddles_one() {
        "not met in this run, within its spread"
    } else {
        "not met"
    };
    format!("{}: {verdict}", interval.describe())
}

fn record(histogram: &mut Histogram<u64>, at: Duration) -> Result<()> {
    let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX).max(1);
    histogram.record(ns).context("record")
}

/// One resize: each phase's time after the patch returned.
fn one_repetition(
    plane: &ControlPlane,
    node: &Node,
    repetitions: &Repetitions,
    rep: usize,
) -> Result<BTreeMap<&'static str, Duration>> {
    let (victim, resizer) = (Repetitions::victim(rep), Repetitions::resizer(rep));
    let resizer_pod = repetitions
        .start(plane, rep)
        .with_context(|| format!("kubelet:\n{}", node.log_tail("kubelet", 20)))?;
    let (events, mut watch) = watch_pods(plane)?;
    // The watch's initial listing arrives first: the clock starts after it.
    thread::sleep(Duration::from_millis(300));
    while events.try_recv().is_ok() {}
    repetitions.patch(plane, rep)?;
    let started = Instant::now();
    let mut phases: BTreeMap<&'static str, Duration> = BTreeMap::new();
    let deadline = started + Duration::from_secs(120);
    while phases.len() < PHASES.len() {
        if Instant::now() > deadline {
            let _ = watch.kill();
            bail!(
                "phases seen {:?} within 120 s; kubelet:\n{}",
                phases.keys().collect::<Vec<_>>(),
                node.log_tail("kubelet", 20)
            );
        }
        if !phases.contains_key("actuated") && cpu_quota_us(&resizer_pod) == Some(RESIZED_QUOTA_US) {
            phases.insert("actuated", started.elapsed());
        }
        while let Ok((at, event)) = events.try_recv() {
            let at = at.saturating_duration_since(started);
            let object = &event["object"];
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            let mut seen = |phase: &'static str| {
                phases.entry(phase).or_insert(at);
            };
            if name == resizer {
                if condition_reason(object, "PodResizePending") == Some("Deferred") {
                    seen("deferred");
                }
                if object["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "1500m" {
                    seen("admitted");
                }
            } else if name == victim {
                if event["type"] == "DELETED" {
                    seen("victim_gone");
                }
                if condition_reason(object, "DisruptionTarget").is_some()
                    || object["metadata"]["deletionTimestamp"].is_string()
                {
                    seen("decided");
                }
                if object["metadata"]["deletionTimestamp"].is_string() {
                    seen("evicted");
                }
            }
        }
        thread::sleep(Duration::from_millis(2));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    Ok(phases)
}

/// [`SERVER`]'s spans for repetition `rep`, from the audit log (`None`: not a span of this path).
fn server_spans(plane: &ControlPlane, rep: usize) -> Result<[Option<Duration>; 6]> {
    let (victim, resizer) = (Repetitions::victim(rep), Repetitions::resizer(rep));
    let calls: Vec<PodCall> = plane
        .pod_calls()
        .into_iter()
        .filter(|c| c.namespace == NAMESPACE)
        .collect();
    let by_kubelet = |c: &PodCall| c.user.starts_with("system:node:");
    let preempting = |c: &&PodCall| c.name == victim && !by_kubelet(c) && (200..300).contains(&c.code);
    let removes = |c: &&PodCall| c.verb == "delete" || c.subresource == "eviction";
    let first = calls
        .iter()
        .filter(preempting)
        .min_by_key(|c| c.received)
        .with_context(|| format!("no preemption call on {victim} in the audit log"))?;
    let delete = calls
        .iter()
        .filter(preempting)
        .filter(removes)
        .min_by_key(|c| c.received)
        .with_context(|| format!("no delete or eviction of {victim} in the audit log"))?;
    let deferred = calls
        .iter()
        .filter(|c| c.name == resizer && by_kubelet(c) && c.subresource == "status")
        .filter(|c| c.received <= first.received)
        .max_by_key(|c| c.received)
        .with_context(|| format!("no status write of {resizer} by the kubelet before the preemption"))?;
    let separate = !std::ptr::eq(first, delete);
    Ok([
        Some(audit_span(deferred.received, first.received)),
        separate.then(|| audit_span(first.received, delete.received)),
        separate.then(|| audit_span(first.completed, delete.received)),
        Some(audit_span(deferred.received, delete.received)),
        Some(first.own_time()),
        separate.then(|| delete.own_time()),
    ])
}

fn condition_reason<'a>(pod: &'a Value, kind: &str) -> Option<&'a str> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["reason"].as_str().unwrap_or(""))
}

/// `kubectl get pods -w` in the namespace: each event with the moment it arrived.
fn watch_pods(plane: &ControlPlane) -> Result<(mpsc::Receiver<(Instant, Value)>, std::process::Child)> {
    let mut child = plane
        .kubectl()
        .args([
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-w",
            "--output-watch-events",
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start kubectl get pods -w")?;
    let stdout = child.stdout.take().context("kubectl's stdout")?;
    let (send, receive) = mpsc::channel();
    thread::spawn(move || {
        let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
        for event in stream.flatten() {
            if send.send((Instant::now(), event)).is_err() {
                return;
            }
        }
    });
    Ok((receive, child))
}
