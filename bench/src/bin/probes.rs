//! `cargo xtask bench probes`: what the probes cost the workload they watch.
//!
//! Peer: the same `hackbench` (Debian rt-tests) with the probes detached, alternated round by
//! round in one run so machine noise hits both sides alike. Also the probes' own run time per
//! event from the kernel's BPF statistics (`bpf_prog_info.run_time_ns / run_cnt`), measured in
//! a separate phase because turning statistics on costs ~20 ns per run itself.
use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use headroomd::probes::{ProbeOptions, Probes};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Where to write probes.json.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// A few rounds only: a smoke test.
    #[arg(long)]
    quick: bool,
}

/// hackbench arguments: 2 groups × 20 senders × 20 receivers, 400 messages each.
const HACKBENCH: &[&str] = &["-g", "2", "-l", "400"];

fn hackbench_once() -> Result<Duration> {
    let start = Instant::now();
    let output = Command::new("hackbench")
        .args(HACKBENCH)
        .output()
        .context("run hackbench (rt-tests)")?;
    let elapsed = start.elapsed();
    if !output.status.success() {
        bail!("hackbench failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(elapsed)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rounds = if args.quick { 3 } else { 30 };
    let mut with_probes = Histogram::<u64>::new(3)?;
    let mut without = Histogram::<u64>::new(3)?;
    let (mut sum_with, mut sum_without) = (0u128, 0u128);
    hackbench_once()?; // warm-up: page cache, binary, allocator
    for round in 0..rounds {
        // Alternate which side goes first, so drift over the run cancels out.
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for attached in order {
            let probes = if attached {
                Some(Probes::load(&ProbeOptions::default())?)
            } else {
                None
            };
            let elapsed = hackbench_once()?;
            drop(probes);
            let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            if attached {
                with_probes.record(micros)?;
                sum_with += elapsed.as_micros();
            } else {
                without.record(micros)?;
                sum_without += elapsed.as_micros();
            }
        }
    }
    // Throughput ratio: same work per run, so the ratio of mean run times.
    let throughput_ratio = sum_without as f64 / sum_with.max(1) as f64;
    let loss_percent = (1.0 - throughput_ratio) * 100.0;

    // Per-event cost, statistics on.
    let probes = Probes::load(&ProbeOptions {
        run_time_stats: true,
        ..ProbeOptions::default()
    })?;
    let before = probes.run_times();
    for _ in 0..if args.quick { 1 } else { 5 } {
        hackbench_once()?;
    }
    let after = probes.run_times();
    drop(probes);
    let mut per_program = Vec::new();
    for (b, a) in before.iter().zip(&after) {
        let runs = a.run_count.saturating_sub(b.run_count);
        let ns = a.run_time_ns.saturating_sub(b.run_time_ns);
        if runs > 0 {
            per_program
                .push(json!({"program": a.program, "runs": runs, "ns_per_run": ns as f64 / runs as f64}));
        }
    }
    let switch_ns = per_program
        .iter()
        .find(|p| p["program"] == "sched_switch")
        .and_then(|p| p["ns_per_run"].as_f64())
        .unwrap_or(f64::NAN);

    println!(
        "probes: hackbench {} × {rounds} rounds each side, alternating",
        HACKBENCH.join(" ")
    );
    println!(
        "{:<22} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "run time (ms)", "p50", "p90", "p99", "p99.9", "max"
    );
    for (name, h) in [("with probes", &with_probes), ("without (peer)", &without)] {
        println!(
            "{name:<22} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            h.value_at_quantile(0.5) as f64 / 1e3,
            h.value_at_quantile(0.9) as f64 / 1e3,
            h.value_at_quantile(0.99) as f64 / 1e3,
            h.value_at_quantile(0.999) as f64 / 1e3,
            h.max() as f64 / 1e3
        );
    }
    println!("throughput with/without probes: {throughput_ratio:.4} (loss {loss_percent:.2}%; target ≤ 2%)");
    println!("sched_switch probe: {switch_ns:.0} ns per event (target ≤ 150 ns)");
    for p in &per_program {
        println!(
            "  {:<22} {:>10} runs {:>8.0} ns/run",
            p["program"].as_str().unwrap_or("?"),
            p["runs"],
            p["ns_per_run"].as_f64().unwrap_or(0.0)
        );
    }
    let summary = json!({
        "name": "probes",
        "quick": args.quick,
        "command": format!("cargo xtask bench probes{}", if args.quick { " --quick" } else { "" }),
        "peer": "hackbench without probes (same run, alternating)",
        "rounds": rounds,
        "ours_us": percentiles(&with_probes),
        "peer_us": percentiles(&without),
        "throughput_ratio": throughput_ratio,
        "throughput_loss_percent": loss_percent,
        "sched_switch_ns_per_event": switch_ns,
        "programs": per_program,
    });
    std::fs::create_dir_all(&args.out)?;
    let path = args.out.join("probes.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)?)
        .with_context(|| format!("write {}", path.display()))?;
    Ok(())
}

fn percentiles(h: &Histogram<u64>) -> serde_json::Value {
    json!({
        "p50": h.value_at_quantile(0.5), "p90": h.value_at_quantile(0.9), "p99": h.value_at_quantile(0.99),
        "p999": h.value_at_quantile(0.999), "max": h.max(), "min": h.min(), "samples": h.len(),
    })
}
