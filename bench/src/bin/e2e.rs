//! `e2e`: the seed's preempting resize end to end, repeated, in standalone mode: this machine is
//! the node, headroomd runs in-process with its eBPF probes loaded, every Pod is a real cgroup
//! with a real process. One repetition = the resizer asks for more than the node has left →
//! the kubelet's admission says `Deferred` → the shim decides → reserves the room in headroomd's
//! ledger → terminates the victims (grace period 0 by default) → the kubelet's retry admits the
//! resize → `ApplyResize` writes the cgroups → they are read back. Then the node is reset (the
//! resizer shrinks back, the victims are recreated) and the next repetition starts.
//!
//! Peers, measured in the same run: `runc update` on a real runc container (busybox rootfs), and
//! `runc update` + `runc exec /bin/true` as the measurable part of a kubelet-driven resize. The
//! stock path's published figures (kubelet retry interval, the seed's event timeline) are quoted
//! beside them, labelled as not measured here.
//!
//! `cargo xtask bench e2e` (or `target/release/e2e --out target/bench [--quick]`). Needs root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use headroom_actuator::Roots;
use headroom_actuator::layout::DEFAULT_MOUNT;
use headroom_bench::load::Load;
use headroom_bench::runc::{RuncContainer, run, runc_version};
use headroom_bench::{
    BenchArgs, Comparison, Summary, fmt_ns, new_histogram, ns, plot_histogram, plot_percentiles,
    print_comparison, print_table, write_json,
};
use headroom_node_model::Resources;
use headroom_shim::standalone::run::{RunConfig, Running, hostname, intent_dir_for, start};
use headroom_shim::standalone::{StandaloneNode, Step, StepHistograms, StepLatencies, shim};
use headroomd::node::ProbeMode;
use serde_json::{Value, json};

const NAME: &str = "e2e";
const RESIZER: &str = "default/high-priority-pod";
const VICTIM_PREFIX: &str = "default/low-priority-pod";
const NODE_CPU_MILLIS: i64 = 8_000;
const NODE_MEMORY: i64 = 4 << 30;
const MIB: u64 = 1 << 20;

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: BenchArgs,
    /// Grace period of the victims in seconds (overrides terminationGracePeriodSeconds).
    #[arg(long, default_value_t = 0)]
    grace_period: u64,
    /// Measured repetitions of the main variants, `cpu-1v` and `cpu-1v+load` (default 1000, 5
    /// with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Measured repetitions of every other variant (default 300, 3 with --quick).
    #[arg(long)]
    variant_reps: Option<usize>,
    /// `runc update` + `runc exec` samples without load (default 300, 5 with --quick); half as
    /// many under load.
    #[arg(long)]
    runc_samples: Option<usize>,
    /// Only run the variants whose name contains this (the peers always run).
    #[arg(long)]
    only: Option<String>,
    /// Whether headroomd must load its eBPF probes.
    #[arg(long, value_enum, default_value_t = ProbeMode::Required)]
    probes: ProbeMode,
}

// === Interruption (Ctrl-C, SIGTERM): checked between steps; cleanup runs on the way out ===

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn check_interrupted() -> Result<()> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(())
}

// === Variants ===

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Cpu,
    Memory,
}

#[derive(Debug, Clone)]
struct Variant {
    name: &'static str,
    what: &'static str,
    victims: usize,
    victim_cpu: &'static str,
    victim_memory: &'static str,
    resource: Resource,
    /// The resizer's size before and after (CPU or memory quantity).
    from: &'static str,
    to: &'static str,
    /// How many victims the decision must pick.
    expect_evicted: usize,
    /// The victims' `headroom.io/give-way` offer, if they make one.
    give_way: Option<&'static str>,
    /// How many victims must give way in place instead.
    expect_shrunk: usize,
    load: bool,
    main: bool,
}

fn variants() -> Vec<Variant> {
    let base = Variant {
        name: "cpu-1v",
        what: "the seed: 1 victim (3 CPU) on an 8-CPU node, resizer CPU 4 -> 6; the victim must go",
        victims: 1,
        victim_cpu: "3",
        victim_memory: "500Mi",
        resource: Resource::Cpu,
        from: "4",
        to: "6",
        expect_evicted: 1,
        give_way: None,
        expect_shrunk: 0,
        load: false,
        main: true,
    };
    // Shrink before evict against eviction-only (`cpu-1v`), same run, same node.
    let give_way = Variant {
        name: "cpu-1v-give-way",
        what: "the seed with low-priority-pod opted in (headroom.io/give-way: cpu=1): it shrinks 3 -> 1 CPU in place and nobody is evicted",
        give_way: Some("cpu=1"),
        expect_evicted: 0,
        expect_shrunk: 1,
        main: false,
        ..base.clone()
    };
    let five = Variant {
        name: "cpu-5v",
        what: "5 victims of 800m, resizer CPU 4 -> 6 (needs 2 CPU): only some go (3 of 5)",
        victims: 5,
        victim_cpu: "800m",
        victim_memory: "100Mi",
        expect_evicted: 3,
        main: false,
        ..base.clone()
    };
    let twenty = Variant {
        name: "cpu-20v",
        what: "20 victims of 200m, resizer CPU 4 -> 8 (needs 4 CPU): all 20 must go",
        victims: 20,
        victim_cpu: "200m",
        victim_memory: "50Mi",
        to: "8",
        expect_evicted: 20,
        main: false,
        ..base.clone()
    };
    let memory = Variant {
        name: "mem-1v",
        what: "1 victim (1 CPU, 2560Mi) on a 4Gi node, resizer memory 1Gi -> 2Gi; the victim must go",
        victims: 1,
        victim_cpu: "1",
        victim_memory: "2560Mi",
        resource: Resource::Memory,
        from: "1Gi",
        to: "2Gi",
        expect_evicted: 1,
        main: false,
        ..base.clone()
    };
    let loaded = |v: &Variant, name: &'static str| Variant {
        name,
        load: true,
        ..v.clone()
    };
    vec![
        base.clone(),
        give_way,
        five,
        twenty.clone(),
        memory.clone(),
        loaded(&base, "cpu-1v+load"),
        loaded(&memory, "mem-1v+load"),
        loaded(&twenty, "cpu-20v+load"),
    ]
}

const PRIORITY_CLASSES: &str = "\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-priority
value: 1000000
globalDefault: false
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: low-priority
value: 1000
globalDefault: false
";

fn pod_yaml(
    name: &str,
    class: &str,
    container: &str,
    (cpu, memory): (&str, &str),
    give_way: Option<&str>,
) -> String {
    let annotations = give_way.map_or(String::new(), |offer| {
        format!("  annotations:\n    headroom.io/give-way: \"{offer}\"\n")
    });
    format!(
        "---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
{annotations}spec:
  priorityClassName: {class}
  containers:
  - name: {container}
    image: nginx
    resources:
      requests:
        cpu: \"{cpu}\"
        memory: \"{memory}\"
      limits:
        cpu: \"{cpu}\"
        memory: \"{memory}\"
"
    )
}

/// PriorityClasses, the victims, the resizer. Applied again to reset: existing Pods stay.
fn manifest(v: &Variant) -> String {
    let mut yaml = PRIORITY_CLASSES.to_owned();
    for i in 0..v.victims {
        let name = if v.victims == 1 {
            "low-priority-pod".to_owned()
        } else {
            format!("low-priority-pod-{i:02}")
        };
        yaml.push_str(&pod_yaml(
            &name,
            "low-priority",
            "worker",
            (v.victim_cpu, v.victim_memory),
            v.give_way,
        ));
    }
    let (cpu, memory) = match v.resource {
        Resource::Cpu => (v.from, "1Gi"),
        Resource::Memory => ("4", v.from),
    };
    yaml.push_str(&pod_yaml(
        "high-priority-pod",
        "high-priority",
        "app",
        (cpu, memory),
        None,
    ));
    yaml
}

// === One variant on its own standalone node ===

struct VariantResult {
    variant: Variant,
    steps: StepHistograms,
    reps: usize,
    evicted: Vec<usize>,
    /// Victims shrunk in place, per repetition.
    shrunk: Vec<usize>,
    /// Resets (shrink + victims recreated), for the record.
    reset: Histogram<u64>,
}

fn running_victims(node: &StandaloneNode) -> usize {
    node.store()
        .pods
        .iter()
        .filter(|(k, p)| k.starts_with(VICTIM_PREFIX) && p.runtime.is_some())
        .count()
}

/// Running victims whose CPU request is no longer the variant's (they gave way in place).
fn shrunk_victims(node: &StandaloneNode, v: &Variant) -> Vec<String> {
    node.store()
        .pods
        .iter()
        .filter(|(k, p)| k.starts_with(VICTIM_PREFIX) && p.runtime.is_some())
        .filter(|(_, p)| {
            let cpu = p
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| {
                    c.resources
                        .as_ref()?
                        .requests
                        .as_ref()?
                        .get("cpu")
                        .map(|q| q.0.clone())
                });
            cpu.as_deref() != Some(v.victim_cpu)
        })
        .map(|(k, _)| k.clone())
        .collect()
}

async fn resize(node: &StandaloneNode, resource: Resource, to: &str) -> Result<&'static str> {
    let (cpu, memory) = match resource {
        Resource::Cpu => (Some(to), None),
        Resource::Memory => (None, Some(to)),
    };
    let r = node
        .resize(RESIZER, Some("app"), cpu, memory)
        .await
        .with_context(|| format!("resize {RESIZER} to {to}"))?;
    if r.status == "Error" || r.status == "Infeasible" {
        bail!("resize {RESIZER} to {to}: {} {}", r.status, r.message);
    }
    Ok(r.status)
}

/// Waits for the shim to finish the Deferred resize (its record is appended last).
async fn wait_done(node: &StandaloneNode, before: u64, timeout: Duration) -> Result<StepLatencies> {
    let deadline = Instant::now() + timeout;
    let mut polls = 0u32;
    loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        check_interrupted()?;
        polls += 1;
        let pending = shim::is_pending(node, RESIZER);
        // The pending state is cleared just before the record is appended; a failed resize stays
        // pending with a record: look at the records when done or every 50 polls.
        if (!pending || polls.is_multiple_of(50))
            && let Some(l) = node.latency_at(before)
        {
            if l.total_ns.is_some() {
                return Ok(l);
            }
            let why = shim::pending_condition(node, RESIZER)
                .map(|(r, m)| format!("{r}: {m}"))
                .unwrap_or_else(|| "no PodResizePending condition".into());
            let events: Vec<String> = node
                .store()
                .events
                .list(Some(RESIZER.rsplit('/').next().unwrap_or(RESIZER)))
                .iter()
                .rev()
                .take(3)
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.reason.as_deref().unwrap_or(""),
                        e.message.as_deref().unwrap_or("")
                    )
                })
                .collect();
            bail!("the preempting resize failed ({why}); latest events {events:?}; record: {l:?}");
        }
        if Instant::now() > deadline {
            bail!(
                "the resize did not complete within {timeout:?} (pending: {pending}, records: {})",
                node.latency_count()
            );
        }
    }
}

async fn repetitions(
    running: &Running,
    v: &Variant,
    warmup: usize,
    reps: usize,
    grace: Duration,
) -> Result<VariantResult> {
    let node = &running.node;
    let yaml = manifest(v);
    node.apply_manifest(&yaml)
        .context("apply the variant's manifest")?;
    if v.give_way.is_some() {
        // A Pod is shrunk only on fresh live figures, and a throttling rate needs two readings
        // of its cgroup: let headroomd read the new Pods first (untimed).
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let mut steps = StepHistograms::new().context("histograms")?;
    let mut reset = new_histogram();
    let mut evicted = Vec::new();
    let mut shrunk = Vec::new();
    let timeout = grace + Duration::from_secs(30);
    for i in 0..warmup + reps {
        check_interrupted()?;
        if running_victims(node) != v.victims {
            bail!(
                "repetition {i}: {} victims running instead of {}",
                running_victims(node),
                v.victims
            );
        }
        let before = node.latency_count();
        let status = resize(node, v.resource, v.to).await?;
        if status != "Deferred" {
            bail!("repetition {i}: the resize was {status}, not Deferred");
        }
        let l = wait_done(node, before, timeout).await?;
        let gone = v.victims - running_victims(node).min(v.victims);
        let gave_way = shrunk_victims(node, v);
        if (gone, gave_way.len()) != (v.expect_evicted, v.expect_shrunk) && v.give_way.is_some() {
            bail!(
                "repetition {i}: {gone} evicted and {gave_way:?} shrunk, expected {} and {}",
                v.expect_evicted,
                v.expect_shrunk
            );
        }
        // Reset: the resizer shrinks back (fits at once), the shrunk victims grow back, the
        // evicted ones are recreated.
        let t = Instant::now();
        let status = resize(node, v.resource, v.from).await?;
        if status != "Completed" {
            bail!("repetition {i}: shrinking back was {status}, not Completed");
        }
        for victim in &gave_way {
            let back = node
                .resize(victim, Some("worker"), Some(v.victim_cpu), None)
                .await
                .with_context(|| format!("grow {victim} back"))?;
            if back.status != "Completed" {
                bail!(
                    "repetition {i}: growing {victim} back was {}: {}",
                    back.status,
                    back.message
                );
            }
        }
        node.apply_manifest(&yaml).context("recreate the victims")?;
        if i >= warmup {
            steps.record(&l);
            evicted.push(gone);
            shrunk.push(gave_way.len());
            reset.saturating_record(ns(t.elapsed()));
        }
    }
    Ok(VariantResult {
        variant: v.clone(),
        steps,
        reps,
        evicted,
        shrunk,
        reset,
    })
}

struct NodeSetup {
    roots: Roots,
    socket_dir: PathBuf,
    grace: Duration,
    probes: ProbeMode,
}

async fn run_variant(setup: &NodeSetup, v: &Variant, warmup: usize, reps: usize) -> Result<VariantResult> {
    let cfg = RunConfig {
        node_name: hostname(),
        allocatable: Resources::new(NODE_CPU_MILLIS, NODE_MEMORY),
        roots: setup.roots.clone(),
        grace_period_override: Some(setup.grace),
        headroomd_socket: setup.socket_dir.join("headroomd.sock"),
        shim_socket: None,
        reservation_ttl: Duration::from_secs(60),
        probes: setup.probes,
        give_way: Default::default(),
    };
    let running = start(cfg)
        .await
        .with_context(|| format!("{}: start the standalone node", v.name))?;
    let result = repetitions(&running, v, warmup, reps, setup.grace).await;
    // Always: every Pod killed, every cgroup removed, headroomd stopped.
    let stopped = running.stop().await;
    // The intent records' directory (empty after a clean stop; left alone otherwise).
    let _ = std::fs::remove_dir(intent_dir_for(&setup.roots));
    let result = result.with_context(|| format!("variant {}", v.name))?;
    stopped.with_context(|| format!("{}: stop the standalone node", v.name))?;
    Ok(result)
}

// === Background load ===

// === Peer: runc ===

fn runc_container() -> Result<RuncContainer> {
    // Not `headroom-e2e-<pid>`: that is the standalone node's cgroup root in this run.
    RuncContainer::start(&format!("headroom-e2e-runc-{}", std::process::id()), None)
}

struct PeerResult {
    update: Histogram<u64>,
    exec: Histogram<u64>,
    /// `runc update` + `runc exec /bin/true`, per sample.
    path: Histogram<u64>,
    /// `/bin/true` spawned and reaped on the host.
    spawn: Histogram<u64>,
}

/// CPU 4 <-> 6 (quota and shares), memory limit rewritten, as the resize does.
fn runc_update(c: &RuncContainer, i: usize) -> Result<()> {
    let (quota, shares) = if i.is_multiple_of(2) {
        ("600000", "6144")
    } else {
        ("400000", "4096")
    };
    let memory = (1024 * MIB).to_string();
    run(Command::new("runc").args([
        "update",
        "--cpu-quota",
        quota,
        "--cpu-period",
        "100000",
        "--cpu-share",
        shares,
        "--memory",
        &memory,
        &c.id,
    ]))
}

fn runc_exec(c: &RuncContainer) -> Result<()> {
    run(Command::new("runc").args(["exec", &c.id, "/bin/true"]))
}

fn measure_peer(c: &RuncContainer, n: usize) -> Result<PeerResult> {
    for i in 0..3 {
        runc_update(c, i)?;
        runc_exec(c)?;
    }
    let mut r = PeerResult {
        update: new_histogram(),
        exec: new_histogram(),
        path: new_histogram(),
        spawn: new_histogram(),
    };
    for i in 0..n {
        check_interrupted()?;
        let t = Instant::now();
        runc_update(c, i)?;
        let update = t.elapsed();
        let t = Instant::now();
        runc_exec(c)?;
        let exec = t.elapsed();
        r.update.saturating_record(ns(update));
        r.exec.saturating_record(ns(exec));
        r.path.saturating_record(ns(update + exec));
        let t = Instant::now();
        let status = Command::new("/bin/true").status().context("spawn /bin/true")?;
        r.spawn.saturating_record(ns(t.elapsed()));
        if !status.success() {
            bail!("/bin/true failed: {status}");
        }
    }
    // The kernel took the last update.
    let want = if n.saturating_sub(1).is_multiple_of(2) {
        "600000"
    } else {
        "400000"
    };
    let v1 = c.cgroup_dir("cpu").join("cpu.cfs_quota_us");
    let v2 = c.cgroup_dir("").join("cpu.max");
    let got = std::fs::read_to_string(&v1)
        .or_else(|_| std::fs::read_to_string(&v2))
        .context("read the runc container's CPU quota")?;
    if n > 0 && !got.trim().starts_with(want) {
        bail!("runc update did not take: quota {} instead of {want}", got.trim());
    }
    Ok(r)
}

async fn peer(c: &std::sync::Arc<RuncContainer>, n: usize) -> Result<PeerResult> {
    let c = c.clone();
    tokio::task::spawn_blocking(move || measure_peer(&c, n))
        .await
        .context("peer thread")?
}

// === Report ===

const PUBLISHED: [(&str, &str, &str); 2] = [
    (
        "kubelet retry of Deferred resizes",
        "30 s initial, then every 3 min",
        "kubernetes pkg/kubelet/allocation/allocation_manager.go `initialRetryDelay`, `retryDelay`",
    ),
    (
        "seed's event timeline (kind cluster)",
        "ResizeDeferred 33 s ago -> ResizeStarted/ResizeCompleted 32 s ago: about 1 s (1 s resolution)",
        "Kubernetes v1.37 blog post \"scheduler preemption for in-place Pod resize (alpha)\", step 5",
    ),
];

fn phase_rows(r: &VariantResult) -> Vec<Summary> {
    let mut rows: Vec<Summary> = Step::ALL
        .iter()
        .filter_map(|s| {
            // A step the variant never takes (no shrink, no eviction) has no row.
            r.steps
                .step(*s)
                .filter(|h| !h.is_empty())
                .map(|h| Summary::from_histogram(&format!("{} {}", r.variant.name, s.name()), h))
        })
        .collect();
    rows.push(whole(r));
    rows
}

fn whole(r: &VariantResult) -> Summary {
    Summary::from_histogram(&format!("{} whole path", r.variant.name), r.steps.total())
}

fn print_variant(r: &VariantResult) {
    let v = &r.variant;
    println!(
        "-- {} ({} reps{}): {} --",
        v.name,
        r.reps,
        if v.load { ", stress-ng load" } else { "" },
        v.what
    );
    print_table(&phase_rows(r));
    let (lo, hi) = (r.evicted.iter().min(), r.evicted.iter().max());
    let range = |lo: Option<&usize>, hi: Option<&usize>| match (lo, hi) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
        _ => "-".into(),
    };
    println!(
        "victims evicted per repetition: {} (expected {} of {}), shrunk in place: {} (expected {}); reset p50 {}",
        range(lo, hi),
        v.expect_evicted,
        v.victims,
        range(r.shrunk.iter().min(), r.shrunk.iter().max()),
        v.expect_shrunk,
        fmt_ns(r.reset.value_at_quantile(0.5))
    );
}

fn target(name: &str, goal: &str, measured: String, met: Option<bool>) -> (String, Value) {
    let verdict = match met {
        Some(true) => "MET",
        Some(false) => "MISSED",
        None => "NOT MEASURED",
    };
    (
        format!("target {name} ({goal}): {verdict} (measured {measured})"),
        json!({"target": name, "goal": goal, "measured": measured, "met": met}),
    )
}

fn summary_json(s: &Summary) -> Value {
    serde_json::to_value(s).unwrap_or(Value::Null)
}

fn noise(label: &str, h: &Histogram<u64>) -> (String, Value) {
    (label.to_owned(), json!({"min_ns": h.min(), "max_ns": h.max()}))
}

// === Main ===

struct Counts {
    main: usize,
    other: usize,
    warmup_main: usize,
    warmup_other: usize,
    runc: usize,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Quiet by default (the bench prints its own lines); RUST_LOG=headroom_shim=debug shows why.
    headroom_client::logging::init(headroom_client::logging::LogFormat::Text, "warn");
    if let Some(why) = headroom_bench::needs_root(
        NAME,
        &format!(
            "it creates cgroups under {DEFAULT_MOUNT}, moves processes into them, loads eBPF probes and runs runc"
        ),
    ) {
        eprintln!("{why}");
        return std::process::ExitCode::from(2);
    }
    let Some(rt) = headroom_bench::tokio_runtime(NAME) else {
        return std::process::ExitCode::FAILURE;
    };
    let result = rt.block_on(async {
        tokio::spawn(async {
            let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            eprintln!("{NAME}: interrupted; cleaning up");
            INTERRUPTED.store(true, Ordering::Relaxed);
        });
        bench(&args).await
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{NAME}: {e:#}");
            eprintln!("{NAME}: every Pod process, cgroup, runc container and stress-ng started was removed");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn bench(args: &Args) -> Result<()> {
    let quick = args.common.quick;
    let counts = Counts {
        main: args.reps.unwrap_or(if quick { 5 } else { 1000 }),
        other: args.variant_reps.unwrap_or(if quick { 3 } else { 300 }),
        warmup_main: if quick { 2 } else { 20 },
        warmup_other: if quick { 1 } else { 10 },
        runc: args.runc_samples.unwrap_or(if quick { 5 } else { 300 }),
    };
    let grace = Duration::from_secs(args.grace_period);
    let setup_kind =
        headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)).context("detect the cgroup setup")?;
    let pid = std::process::id();
    let socket_dir = PathBuf::from(format!("/run/headroom/e2e-{pid}"));
    std::fs::create_dir_all(&socket_dir).with_context(|| format!("create {}", socket_dir.display()))?;
    let setup = NodeSetup {
        roots: Roots::standalone(
            Path::new(DEFAULT_MOUNT),
            setup_kind,
            &format!("headroom-e2e-{pid}"),
        ),
        socket_dir: socket_dir.clone(),
        grace,
        probes: args.probes,
    };
    let started = Instant::now();
    let load_before = loadavg();
    let result = measure_all(args, &setup, &counts).await;
    let _ = std::fs::remove_dir_all(&socket_dir);
    let (results, peers, peers_load) = result?;
    let elapsed = started.elapsed();
    let loads = (load_before, loadavg());
    report(args, &counts, results, peers, peers_load, elapsed, loads)
}

/// `/proc/loadavg`'s first three fields: how busy the machine was apart from this benchmark.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

type Measured = (Vec<VariantResult>, Option<PeerResult>, Option<PeerResult>);

async fn measure_all(args: &Args, setup: &NodeSetup, counts: &Counts) -> Result<Measured> {
    let selected: Vec<Variant> = variants()
        .into_iter()
        .filter(|v| args.only.as_deref().is_none_or(|o| v.name.contains(o)))
        .collect();
    if selected.is_empty() {
        bail!(
            "--only {:?} matches no variant",
            args.only.as_deref().unwrap_or_default()
        );
    }
    let container = match runc_container() {
        Ok(c) => Some(std::sync::Arc::new(c)),
        Err(e) => {
            eprintln!("{NAME}: runc peer not measured: {e:#}");
            None
        }
    };
    let mut results = Vec::new();
    let mut peers = None;
    let mut peers_load = None;
    for load in [false, true] {
        let group: Vec<&Variant> = selected.iter().filter(|v| v.load == load).collect();
        if group.is_empty() {
            continue;
        }
        let timeout = if args.common.quick { 300 } else { 3600 };
        let _load = if load {
            eprintln!("{NAME}: starting stress-ng --cpu 1 --vm 1 --vm-bytes 256M");
            Some(Load::start(Some(Duration::from_secs(timeout)))?)
        } else {
            None
        };
        if let Some(c) = &container {
            let n = if load {
                counts.runc.div_ceil(2)
            } else {
                counts.runc
            };
            eprintln!(
                "{NAME}: peer: {n} x (runc update + runc exec /bin/true){}",
                if load { " under load" } else { "" }
            );
            let measured = peer(c, n).await?;
            if load {
                peers_load = Some(measured);
            } else {
                peers = Some(measured);
            }
        }
        for v in group {
            let (warmup, reps) = if v.main {
                (counts.warmup_main, counts.main)
            } else {
                (counts.warmup_other, counts.other)
            };
            eprintln!("{NAME}: {} ({warmup} warm-up + {reps} repetitions)", v.name);
            results.push(run_variant(setup, v, warmup, reps).await?);
        }
    }
    drop(container);
    Ok((results, peers, peers_load))
}

fn report(
    args: &Args,
    counts: &Counts,
    results: Vec<VariantResult>,
    peers: Option<PeerResult>,
    peers_load: Option<PeerResult>,
    elapsed: Duration,
    loads: (String, String),
) -> Result<()> {
    for r in &results {
        print_variant(r);
    }
    let find = |name: &str| results.iter().find(|r| r.variant.name == name);
    let main = find("cpu-1v")
        .or_else(|| results.first())
        .context("no variant ran")?;
    let main_whole = main.steps.total();
    let mut c = Comparison::new(
        NAME,
        Summary::from_histogram(
            &format!(
                "headroom whole path {} (grace {} s)",
                main.variant.name, args.grace_period
            ),
            main_whole,
        ),
    );
    if let Some(p) = &peers {
        c = c.with_peer(Summary::from_histogram(
            "runc update + runc exec (kubelet-path part)",
            &p.path,
        ));
    }
    let mut details = phase_rows(main);
    details.pop(); // the whole path is `ours`
    let mut noise_rows = serde_json::Map::new();
    for (label, p) in [("", &peers), (" under load", &peers_load)] {
        if let Some(p) = p {
            details.push(Summary::from_histogram(
                &format!("peer runc update{label}"),
                &p.update,
            ));
            details.push(Summary::from_histogram(
                &format!("peer runc exec /bin/true{label}"),
                &p.exec,
            ));
            details.push(Summary::from_histogram(
                &format!("peer update + exec{label}"),
                &p.path,
            ));
            details.push(Summary::from_histogram(
                &format!("peer spawn /bin/true (host){label}"),
                &p.spawn,
            ));
            let (k, v) = noise(&format!("peer update + exec{label}"), &p.path);
            noise_rows.insert(k, v);
        }
    }
    for r in &results {
        if r.variant.name != main.variant.name {
            details.extend(phase_rows(r));
        }
        let (k, v) = noise(&format!("{} whole path", r.variant.name), r.steps.total());
        noise_rows.insert(k, v);
    }
    c.details = details;

    // Targets.
    let p99 = |r: Option<&VariantResult>| r.map(|r| r.steps.total().value_at_quantile(0.99));
    let (t1, j1) = {
        let m = p99(find("cpu-1v"));
        target(
            "whole path p99, grace 0, no load",
            "<= 5 ms",
            m.map_or("-".into(), fmt_ns),
            m.map(|v| v <= 5_000_000 && args.grace_period == 0),
        )
    };
    let (t2, j2) = {
        let m = p99(find("cpu-1v+load"));
        target(
            "whole path p99, grace 0, stress-ng load",
            "<= 20 ms",
            m.map_or("-".into(), fmt_ns),
            m.map(|v| v <= 20_000_000 && args.grace_period == 0),
        )
    };
    // Like for like with `runc update` (which writes one container's cgroup and reports nothing
    // else): the actuator's own cgroup writes and read-back, as ApplyResize reports them. The
    // whole `actuation` step (gRPC round trip and admission included) is in the phase table.
    let actuation_p50 = main
        .steps
        .step(Step::CgroupWrites)
        .map(|h| h.value_at_quantile(0.5));
    let (t3, j3) = {
        let runc = peers.as_ref().map(|p| p.update.value_at_quantile(0.5));
        // Display only: the precision lost does not matter.
        let ratio = match (actuation_p50, runc) {
            (Some(a), Some(r)) if a > 0 => Some(r as f64 / a as f64),
            _ => None,
        };
        target(
            "actuation (actuator's cgroup writes + read-back) vs runc update at p50",
            ">= 100x faster",
            match (actuation_p50, runc, ratio) {
                (Some(a), Some(r), Some(x)) => {
                    format!(
                        "cgroup writes {} vs runc update {}: {x:.0}x",
                        fmt_ns(a),
                        fmt_ns(r)
                    )
                }
                _ => "-".into(),
            },
            ratio.map(|x| x >= 100.0),
        )
    };
    let (t4, j4) = give_way_against_eviction(find("cpu-1v-give-way"), find("cpu-1v"));
    let mut notes = vec![t1, t2, t3, t4];
    notes.push(format!(
        "one repetition: resize requested -> Deferred -> decision -> reservation (headroomd ledger) -> victims SIGTERM/SIGKILL after a {} s grace period, cgroups removed -> the kubelet's retry admits -> ApplyResize (gRPC to headroomd, cgroup writes) -> read back; whole path = resize request -> verified, as the shim records it; then the node is reset (resizer shrinks back, victims recreated), not timed",
        args.grace_period
    ));
    notes.push(format!(
        "standalone node: {} CPU, {} MiB; real cgroups ({}), one real process per container, headroomd in-process with probes {:?}; repetitions: {} for cpu-1v and cpu-1v+load, {} for the others (after {}/{} warm-up)",
        NODE_CPU_MILLIS / 1000,
        NODE_MEMORY >> 20,
        main_roots_kind(),
        args.probes,
        counts.main,
        counts.other,
        counts.warmup_main,
        counts.warmup_other
    ));
    notes.push(format!(
        "machine load average (1/5/15 min) before the run {}, after {} on {} cores: other work on the machine (builds, tests) shows up in every figure here, the peers' included",
        loads.0,
        loads.1,
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    ));
    for r in &results {
        notes.push(format!("variant {}: {}", r.variant.name, r.variant.what));
    }
    notes.push("background load (+load variants): stress-ng --cpu 1 --vm 1 --vm-bytes 256M on this 2-core machine, started before and stopped after those variants; peers under load measured under the same load".into());
    notes.push("peer `runc update` (one container: cpu quota, shares, memory) is the step the kubelet's CRI UpdateContainerResources ends in; `runc update + runc exec /bin/true` is the measurable part of a kubelet-driven resize here, a lower bound: it leaves out the API server, the kubelet's sync loop, the victims' runc kill/delete and, above all, the retry wait below".into());
    for (figure, value, source) in PUBLISHED {
        notes.push(format!(
            "published, not measured here: {figure}: {value} ({source})"
        ));
    }
    c.notes = notes;
    c.extra = json!({
        "grace_period_s": args.grace_period,
        "probes": format!("{:?}", args.probes),
        "node": {"cpu_millis": NODE_CPU_MILLIS, "memory_bytes": NODE_MEMORY},
        "runc_version": runc_version(),
        "elapsed_s": elapsed.as_secs_f64(),
        "loadavg_before": loads.0,
        "loadavg_after": loads.1,
        "targets": [j1, j2, j3, j4],
        "noise": noise_rows,
        "variants": results.iter().map(|r| json!({
            "name": r.variant.name,
            "description": r.variant.what,
            "victims": r.variant.victims,
            "expected_evicted": r.variant.expect_evicted,
            "evicted_min": r.evicted.iter().min(),
            "evicted_max": r.evicted.iter().max(),
            "give_way": r.variant.give_way,
            "expected_shrunk": r.variant.expect_shrunk,
            "shrunk_min": r.shrunk.iter().min(),
            "shrunk_max": r.shrunk.iter().max(),
            "resource": format!("{:?}", r.variant.resource).to_lowercase(),
            "from": r.variant.from,
            "to": r.variant.to,
            "background_load": r.variant.load,
            "repetitions": r.reps,
            "phases": phase_rows(r).iter().map(summary_json).collect::<Vec<_>>(),
            "reset": summary_json(&Summary::from_histogram("reset", &r.reset)),
        })).collect::<Vec<_>>(),
        "published_not_measured": PUBLISHED.iter().map(|(f, v, s)| json!({"figure": f, "value": v, "source": s})).collect::<Vec<_>>(),
    });
    println!();
    print_comparison(&c);
    let out = &args.common.out;
    let json_path = write_json(out, &c)?;
    plots(out, &results, main, peers.as_ref(), peers_load.as_ref())?;
    println!(
        "wrote {} and {NAME}-*.svg ({:.1} s)",
        json_path.display(),
        elapsed.as_secs_f64()
    );
    Ok(())
}

/// Shrink before evict against eviction-only on the seed's scenario, measured in the same run:
/// the whole path at p50/p99 and the disruptions (Pods evicted or restarted) per resize.
fn give_way_against_eviction(
    give_way: Option<&VariantResult>,
    eviction: Option<&VariantResult>,
) -> (String, Value) {
    let (Some(g), Some(e)) = (give_way, eviction) else {
        return target(
            "shrink before evict vs eviction-only, seed scenario",
            "fewer disruptions; whole path reported",
            "-".into(),
            None,
        );
    };
    let q = |r: &VariantResult, q: f64| r.steps.total().value_at_quantile(q);
    let per_resize = |r: &VariantResult| {
        let n = r.evicted.len().max(1);
        r.evicted.iter().sum::<usize>() as f64 / n as f64
    };
    // Display only: the precision lost does not matter.
    let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { f64::NAN };
    let (g50, g99, e50, e99) = (q(g, 0.5), q(g, 0.99), q(e, 0.5), q(e, 0.99));
    target(
        "shrink before evict vs eviction-only, seed scenario, same run",
        "fewer disruptions per resize; whole path p50/p99 with the ratio",
        format!(
            "{}: p50 {} p99 {}, {:.2} Pods evicted/restarted per resize; {}: p50 {} p99 {}, {:.2} per resize; give-way/evict p50 {:.2}x p99 {:.2}x",
            g.variant.name,
            fmt_ns(g50),
            fmt_ns(g99),
            per_resize(g),
            e.variant.name,
            fmt_ns(e50),
            fmt_ns(e99),
            per_resize(e),
            ratio(g50, e50),
            ratio(g99, e99)
        ),
        Some(per_resize(g) < per_resize(e)),
    )
}

fn main_roots_kind() -> String {
    match headroom_actuator::detect_setup(Path::new(DEFAULT_MOUNT)) {
        Ok(s) => format!("{s:?}"),
        Err(e) => format!("unknown: {e}"),
    }
}

fn plots(
    out: &Path,
    results: &[VariantResult],
    main: &VariantResult,
    peers: Option<&PeerResult>,
    peers_load: Option<&PeerResult>,
) -> Result<()> {
    let find = |name: &str| results.iter().find(|r| r.variant.name == name);
    // Whole path: ours vs the kubelet-path part, with and without load.
    let mut series: Vec<(String, &Histogram<u64>)> = Vec::new();
    for name in ["cpu-1v", "cpu-1v+load"] {
        if let Some(r) = find(name) {
            series.push((format!("headroom {name}"), r.steps.total()));
        }
    }
    if let Some(p) = peers {
        series.push(("runc update + exec".into(), &p.path));
    }
    if let Some(p) = peers_load {
        series.push(("runc update + exec, load".into(), &p.path));
    }
    let refs: Vec<(&str, &Histogram<u64>)> = series.iter().map(|(l, h)| (l.as_str(), *h)).collect();
    plot_percentiles(
        &out.join(format!("{NAME}-whole-percentiles.svg")),
        "resize request -> verified (whole path)",
        &refs,
    )?;
    plot_histogram(
        &out.join(format!("{NAME}-whole-histogram.svg")),
        "resize request -> verified (whole path)",
        &refs,
    )?;
    // Actuation vs runc update.
    let mut series: Vec<(&str, &Histogram<u64>)> = Vec::new();
    if let Some(h) = main.steps.step(Step::Actuation) {
        series.push(("headroom actuation (ApplyResize incl. gRPC)", h));
    }
    if let Some(h) = main.steps.step(Step::CgroupWrites) {
        series.push(("headroom actuator: cgroup writes + read-back", h));
    }
    if let Some(p) = peers {
        series.push(("runc update", &p.update));
    }
    plot_percentiles(
        &out.join(format!("{NAME}-actuation-percentiles.svg")),
        "actuation phase vs runc update",
        &series,
    )?;
    // The main variant's phases.
    let series: Vec<(&str, &Histogram<u64>)> = [Step::Reservation, Step::VictimsTerminated, Step::Actuation]
        .iter()
        .filter_map(|s| main.steps.step(*s).map(|h| (s.name(), h)))
        .chain(std::iter::once(("whole path", main.steps.total())))
        .collect();
    plot_histogram(
        &out.join(format!("{NAME}-phases-histogram.svg")),
        &format!("{}: phases", main.variant.name),
        &series,
    )?;
    // Whole path per variant (no load, then with load).
    for (suffix, load) in [("variants", false), ("variants-load", true)] {
        let series: Vec<(&str, &Histogram<u64>)> = results
            .iter()
            .filter(|r| r.variant.load == load)
            .take(4)
            .map(|r| (r.variant.name, r.steps.total()))
            .collect();
        if !series.is_empty() {
            plot_percentiles(
                &out.join(format!("{NAME}-{suffix}-percentiles.svg")),
                &format!(
                    "whole path per variant{}",
                    if load { " (stress-ng load)" } else { "" }
                ),
                &series,
            )?;
        }
    }
    Ok(())
}
