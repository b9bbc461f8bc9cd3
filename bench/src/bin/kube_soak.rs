//! `kube_soak`: the tutorial's Deferred resize on the real node, over and over for minutes, with
//! headroomd (its eBPF probes attached, `--pods-from kube`) and `headroom-shim kube` (headroomd's
//! ledger; `--preemption=eviction`, the mode with the most API work per victim) beside the kubelet
//! as the DaemonSet pairs them: what only time finds
//! on the real stack. The cluster is `headroom_testkit`'s (kube-apiserver, kube-scheduler with the
//! resize-preemption gate off, kube-controller-manager, the kubelet v1.37.2, containerd v2.4.2).
//!
//! Each repetition ([`headroom_testkit::repetitions`]): a victim and a resizer start, the resizer is
//! patched 1 → 1500m, the kubelet defers, the shim evicts, the kubelet actuates (quota in the
//! cgroup), both Pods are removed. Pass: neither program exits; each one's RSS stays within 10 %
//! (plus 1 MiB) of its post-warm-up baseline; every resize is actuated within 60 s; at the end no
//! reservation is left in headroomd's ledger, no Pod in the namespace and no Pod cgroup on the
//! node.
//!
//! `sudo cargo xtask soak --cluster [--minutes N]` (10 minutes); `--seconds S` for a short run.
//! Writes `OUT/kube_soak.json`.
use std::{
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use headroom_bench::{
    fmt_ns, new_histogram,
    soak::{SoakLength, rss_kib},
};
use headroom_testkit::{
    LoggedChild, beside,
    node::{NODE_NAME, start_cluster},
    repetitions::Repetitions,
};
use serde_json::json;

const NAMESPACE: &str = "soak";
/// The shim's reservation TTL (`--resize-timeout-seconds`): a leaked reservation lives this long.
const RESIZE_TIMEOUT: Duration = Duration::from_secs(30);
/// Allowed RSS growth over the post-warm-up baseline, relative and absolute (allocator noise in
/// a process of a few MiB).
const RSS_TOLERANCE: f64 = 0.10;
const RSS_SLACK_KIB: u64 = 1024;

#[derive(Debug, clap::Parser)]
#[command(about = "headroom on the real node: continuous Deferred resizes with preemption")]
struct Args {
    #[command(flatten)]
    length: SoakLength,
    /// Directory for kube_soak.json.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
}

/// One program's RSS over the run: `(seconds since start, KiB)`.
struct RssTrack {
    name: &'static str,
    samples: Vec<(f64, u64)>,
}

impl RssTrack {
    /// The first sample after `warmup`, the largest after it, and the growth between them.
    fn verdict(&self, warmup: f64) -> (u64, u64, f64) {
        let after: Vec<u64> = self
            .samples
            .iter()
            .filter(|s| s.0 >= warmup)
            .map(|s| s.1)
            .collect();
        let baseline = after.first().copied().unwrap_or(0);
        let max = after.iter().copied().max().unwrap_or(0);
        let growth = if baseline == 0 {
            0.0
        } else {
            (max as f64 - baseline as f64) / baseline as f64
        };
        (baseline, max, growth)
    }
}

fn main() -> Result<()> {
    let args = <Args as clap::Parser>::parse();
    let (duration, warmup) = (args.length.duration(), args.length.warmup());
    if let Some(why) = headroom_bench::needs_root("kube_soak", "a real kubelet and containerd on this host") {
        bail!(why);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let release = workspace.join("target/release");
    let (plane, node) = start_cluster(false).context("start the real cluster")?;
    let kubeconfig = beside::apply_rbac(&plane, &workspace).map_err(anyhow::Error::msg)?;
    let repetitions = Repetitions::create(&plane, NAMESPACE)?;
    // The probes attached, as in production (they are the point of a soak of headroomd).
    let daemon = beside::start_headroomd(&plane, &release.join("headroomd"), &kubeconfig, NODE_NAME, &[])
        .map_err(anyhow::Error::msg)?;
    let mut shim = beside::start_paired_shim(
        &plane,
        &release.join("headroom-shim"),
        &kubeconfig,
        NODE_NAME,
        &daemon.socket,
        beside::Preemption::Eviction,
        Some(RESIZE_TIMEOUT),
    )
    .map_err(anyhow::Error::msg)?;
    let mut headroomd = daemon.process;
    let logs = |headroomd: &LoggedChild, shim: &LoggedChild| {
        format!(
            "headroomd:\n{}\nheadroom-shim:\n{}",
            headroomd.log_tail(30),
            shim.log_tail(30)
        )
    };

    println!(
        "kube_soak: {:.0} s of Deferred resizes on the real node (warm-up {:.0} s)",
        duration.as_secs_f64(),
        warmup.as_secs_f64()
    );
    let mut tracks = [
        RssTrack {
            name: "headroomd",
            samples: Vec::new(),
        },
        RssTrack {
            name: "headroom-shim",
            samples: Vec::new(),
        },
    ];
    let mut latency = new_histogram();
    let mut windows: Vec<(f64, u64, u64)> = Vec::new();
    let mut window = new_histogram();
    let mut window_start = 0.0;
    let started = Instant::now();
    let mut rep = 0usize;
    while started.elapsed() < duration {
        for (track, pid) in tracks.iter_mut().zip([headroomd.id(), shim.id()]) {
            if let Some(kib) = rss_kib(pid) {
                track.samples.push((started.elapsed().as_secs_f64(), kib));
            }
        }
        for (name, process) in [("headroomd", &mut headroomd), ("headroom-shim", &mut shim)] {
            if let Some(status) = process.try_wait()? {
                bail!("{name} exited ({status}) at repetition {rep}:\n{}", process.log());
            }
        }
        let resizer = repetitions.start(&plane, rep)?;
        repetitions.patch(&plane, rep)?;
        let patched = Instant::now();
        while !repetitions.resized(&plane, rep, &resizer) {
            if patched.elapsed() > Duration::from_secs(60) {
                bail!(
                    "repetition {rep}: the resize was not actuated within 60 s\n{}\nkubelet:\n{}",
                    logs(&headroomd, &shim),
                    node.log_tail("kubelet", 20)
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
        let ns = u64::try_from(patched.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        latency.record(ns).context("record")?;
        window.record(ns).context("record")?;
        repetitions.remove(&plane, rep)?;
        rep += 1;
        let now = started.elapsed().as_secs_f64();
        if now - window_start >= 60.0 {
            windows.push((now, window.value_at_quantile(0.5), window.value_at_quantile(0.99)));
            window.reset();
            window_start = now;
        }
    }
    for (track, pid) in tracks.iter_mut().zip([headroomd.id(), shim.id()]) {
        if let Some(kib) = rss_kib(pid) {
            track.samples.push((started.elapsed().as_secs_f64(), kib));
        }
    }

    let mut problems = Vec::new();
    // A reservation the shim failed to release would still be there after its TTL.
    let headroomctl = release.join("headroomctl");
    let deadline = Instant::now() + RESIZE_TIMEOUT + Duration::from_secs(5);
    let left_reservations = loop {
        let left = beside::reservations(&headroomctl, &daemon.socket)
            .map_err(anyhow::Error::msg)?
            .len();
        if left == 0 || Instant::now() > deadline {
            break left;
        }
        thread::sleep(Duration::from_millis(500));
    };
    if left_reservations > 0 {
        problems.push(format!("{left_reservations} reservations outlived their TTL"));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let pod_cgroups = loop {
        let left = node.pod_cgroups();
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        thread::sleep(Duration::from_millis(500));
    };
    if !pod_cgroups.is_empty() {
        problems.push(format!("Pod cgroups left on the node: {pod_cgroups:?}"));
    }
    let warm = warmup.as_secs_f64();
    let mut rss_report = serde_json::Map::new();
    for track in &tracks {
        let (baseline, max, growth) = track.verdict(warm);
        let (start, end) = (
            track.samples.first().map_or(0, |s| s.1),
            track.samples.last().map_or(0, |s| s.1),
        );
        println!(
            "{}: RSS start {start} KiB, end {end} KiB; after warm-up baseline {baseline} KiB, max {max} KiB ({:+.1} %)",
            track.name,
            growth * 100.0
        );
        if max > baseline + RSS_SLACK_KIB && growth > RSS_TOLERANCE {
            problems.push(format!(
                "{} RSS grew {:.1} % after warm-up ({baseline} → {max} KiB; limit {:.0} % plus {RSS_SLACK_KIB} KiB)",
                track.name,
                growth * 100.0,
                RSS_TOLERANCE * 100.0
            ));
        }
        rss_report.insert(
            track.name.to_string(),
            json!({"start_kib": start, "end_kib": end, "baseline_after_warmup_kib": baseline,
                   "max_after_warmup_kib": max, "growth": growth}),
        );
    }
    println!(
        "{rep} resizes in {:.0} s: patch → actuated p50 {}, p99 {}, p99.9 {}, max {}",
        started.elapsed().as_secs_f64(),
        fmt_ns(latency.value_at_quantile(0.5)),
        fmt_ns(latency.value_at_quantile(0.99)),
        fmt_ns(latency.value_at_quantile(0.999)),
        fmt_ns(latency.max())
    );
    for (at, p50, p99) in &windows {
        println!(
            "  minute ending {at:>5.0} s: p50 {}, p99 {}",
            fmt_ns(*p50),
            fmt_ns(*p99)
        );
    }
    println!(
        "left: {left_reservations} reservations, {} Pod cgroups",
        pod_cgroups.len()
    );
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    let report = json!({
        "name": "kube_soak",
        "seconds": started.elapsed().as_secs_f64(),
        "resizes": rep,
        "patch_to_actuated_ns": {"p50": latency.value_at_quantile(0.5), "p99": latency.value_at_quantile(0.99),
                                 "p999": latency.value_at_quantile(0.999), "max": latency.max()},
        "rss": rss_report,
        "left": {"reservations": left_reservations, "pod_cgroups": pod_cgroups.len()},
        "problems": problems,
    });
    let path = args.out.join("kube_soak.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("write {}", path.display()))?;
    if !problems.is_empty() {
        bail!("kube_soak failed:\n- {}", problems.join("\n- "));
    }
    println!("kube_soak: passed");
    Ok(())
}
