//! `report`: gathers every `DIR/*.json` a benchmark wrote into `DIR/report.md`, `DIR/report.json`
//! and `DIR/report-throughput.svg` (ours beside the peer), with the machine, the command that
//! reproduces each figure, the percentiles, the run's noise and the published figures (quoted,
//! never measured here).
//!
//! `cargo xtask bench` runs it last. `report --out target/bench --publish bench/` also writes
//! `bench/RESULTS.md` with the plots copied next to it.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use clap::Parser;
use headroom_bench::fmt_ns;
use plotters::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
struct Args {
    /// Directory holding the benchmarks' `*.json` and `*.svg`; the report is written there.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Also write `<DIR>/RESULTS.md` and copy the plots next to it (e.g. `--publish bench/`).
    #[arg(long, value_name = "DIR")]
    publish: Option<PathBuf>,
}

/// Figures quoted from their sources. Never measured here.
const PUBLISHED: &[(&str, &str, &str)] = &[
    (
        "cAdvisor housekeeping interval (as the kubelet embeds it)",
        "10 s",
        "kubernetes pkg/kubelet/cadvisor/cadvisor_linux.go `defaultHousekeepingInterval`",
    ),
    (
        "Koordinator koordlet collection and report intervals",
        "1 s (usage, throttling) … 10 s (PSI) … 60 s (CPI, NodeMetric report)",
        "koordinator pkg/koordlet/metricsadvisor/framework/config.go; NodeMetric reportIntervalSeconds 60",
    ),
    (
        "kubelet retry of Deferred resizes",
        "30 s initial, then every 3 min",
        "kubernetes pkg/kubelet/allocation/allocation_manager.go `initialRetryDelay`, `retryDelay`",
    ),
    (
        "Seed's event timeline (v1.37 blog walkthrough, kind cluster)",
        "ResizeDeferred 33 s ago → ResizeStarted and ResizeCompleted 32 s ago: about 1 s, at the 1 s resolution of event ages",
        "Kubernetes v1.37 blog post \"scheduler preemption for in-place Pod resize (alpha)\", step 5",
    ),
    (
        "koordlet resident memory",
        "~240 MB RSS (OOM-killed at a 256 MiB limit)",
        "koordinator-sh/koordinator#1046",
    ),
    (
        "Koordinator cgroup write latency",
        "\"cgroup <= 40us\"",
        "koordinator pkg/koordlet/metrics/resource_executor.go",
    ),
];

/// One benchmark, normalised from its JSON.
struct Bench {
    name: String,
    command: String,
    /// Label and percentiles (ns): p50, p90, p99, p99.9, max; samples.
    rows: Vec<Row>,
    ratio_p50: Option<f64>,
    ratio_p99: Option<f64>,
    /// (ours label, peer label, unit, ours, peer)
    throughput: Option<(String, String, String, f64, f64)>,
    noise: Vec<String>,
    notes: Vec<String>,
    plots: Vec<String>,
    raw: Value,
}

struct Row {
    label: String,
    samples: u64,
    p: [u64; 5],
}

fn row(v: &Value) -> Option<Row> {
    let g = |k: &str| v.get(k).and_then(Value::as_u64);
    Some(Row {
        label: v.get("label")?.as_str()?.to_owned(),
        samples: g("samples").unwrap_or(0),
        p: [
            g("p50_ns")?,
            g("p90_ns")?,
            g("p99_ns")?,
            g("p999_ns")?,
            g("max_ns")?,
        ],
    })
}

/// `probes.json` is written by hand (microseconds, its own keys).
fn row_us(label: &str, v: &Value) -> Option<Row> {
    let g = |k: &str| v.get(k).and_then(Value::as_u64).map(|us| us * 1_000);
    Some(Row {
        label: label.to_owned(),
        samples: v.get("samples").and_then(Value::as_u64).unwrap_or(0),
        p: [g("p50")?, g("p90")?, g("p99")?, g("p999")?, g("max")?],
    })
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn spread(label: &str, min: u64, max: u64) -> String {
    let factor = max as f64 / min.max(1) as f64;
    format!(
        "{label}: min {} – max {} ({factor:.1}x)",
        fmt_ns(min),
        fmt_ns(max)
    )
}

fn load(path: &Path, dir: &Path) -> Result<Bench> {
    let raw: Value = serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?,
    )
    .with_context(|| format!("parse {}", path.display()))?;
    let name = raw
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| path.file_stem().and_then(|s| s.to_str()).map(str::to_owned))
        .unwrap_or_default();
    let mut b = Bench {
        command: raw.get("command").map(text).unwrap_or_default(),
        rows: Vec::new(),
        ratio_p50: raw.get("ratio_p50").and_then(Value::as_f64),
        ratio_p99: raw.get("ratio_p99").and_then(Value::as_f64),
        throughput: None,
        noise: Vec::new(),
        notes: raw
            .get("notes")
            .and_then(Value::as_array)
            .map(|n| n.iter().map(text).collect())
            .unwrap_or_default(),
        plots: Vec::new(),
        name,
        raw: Value::Null,
    };
    if raw.get("ours").is_some_and(|o| o.get("p50_ns").is_some()) {
        // headroom_bench::Comparison
        b.rows.extend(row(&raw["ours"]));
        b.rows.extend(raw.get("peer").and_then(row));
        if let Some(d) = raw.get("details").and_then(Value::as_array) {
            b.rows.extend(d.iter().filter_map(row));
        }
        let extra = &raw["extra"];
        if let Some(t) = extra.get("throughput").filter(|t| t.get("ours").is_some()) {
            let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or(k).to_owned();
            b.throughput = Some((
                s("ours_label"),
                s("peer_label"),
                s("unit"),
                t["ours"].as_f64().unwrap_or(f64::NAN),
                t["peer"].as_f64().unwrap_or(f64::NAN),
            ));
            if let (Some(lo), Some(hi)) = (t["ours_min"].as_f64(), t["ours_max"].as_f64()) {
                b.noise.push(format!(
                    "throughput, ours: {lo:.3e} – {hi:.3e} {} over rounds ({:.2}x)",
                    s("unit"),
                    hi / lo
                ));
            }
            if let (Some(lo), Some(hi)) = (t["peer_min"].as_f64(), t["peer_max"].as_f64()) {
                b.noise.push(format!(
                    "throughput, peer: {lo:.3e} – {hi:.3e} {} over rounds ({:.2}x)",
                    s("unit"),
                    hi / lo
                ));
            }
        }
        if let Some(noise) = extra.get("noise").and_then(Value::as_object) {
            for (k, v) in noise {
                if let (Some(lo), Some(hi)) = (
                    v.get("min_ns").and_then(Value::as_u64),
                    v.get("max_ns").and_then(Value::as_u64),
                ) {
                    b.noise.push(spread(k, lo, hi));
                }
            }
        }
        if b.noise.is_empty() {
            // No minimum recorded: the spread from the median to the worst sample.
            for r in b.rows.iter().take(2) {
                b.noise.push(format!(
                    "{}: p50 {} – max {} (no minimum recorded)",
                    r.label,
                    fmt_ns(r.p[0]),
                    fmt_ns(r.p[4])
                ));
            }
        }
    } else if raw.get("ours_us").is_some() {
        // probes.json
        b.rows.extend(row_us("with probes (run time)", &raw["ours_us"]));
        b.rows.extend(row_us("without probes (peer)", &raw["peer_us"]));
        if let Some(t) = raw["throughput_ratio"].as_f64() {
            b.notes.push(format!(
                "throughput with/without probes {t:.4} (loss {:.2} %; target <= 2 %)",
                raw["throughput_loss_percent"].as_f64().unwrap_or(f64::NAN)
            ));
        }
        if let Some(s) = raw["sched_switch_ns_per_event"].as_f64() {
            b.notes.push(format!(
                "sched_switch probe {s:.0} ns per event (target <= 150 ns)"
            ));
        }
        if let Some(p) = raw.get("peer").map(text) {
            b.notes.push(format!("peer: {p}"));
        }
        for (label, key) in [("with probes", "ours_us"), ("without", "peer_us")] {
            if let (Some(lo), Some(hi)) = (raw[key]["min"].as_u64(), raw[key]["max"].as_u64()) {
                b.noise.push(spread(label, lo * 1_000, hi * 1_000));
            }
        }
    }
    let mut plots: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("list {}", dir.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|f| {
            f.ends_with(".svg") && (f.starts_with(&format!("{}-", b.name)) || *f == format!("{}.svg", b.name))
        })
        .collect();
    plots.sort();
    b.plots = plots;
    b.raw = raw;
    Ok(b)
}

// === The machine ===

fn machine() -> Value {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".to_owned(), |(_, m)| m.trim().to_owned());
    let kernel = nix::sys::utsname::uname()
        .ok()
        .and_then(|u| u.release().to_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map(|kb| kb / 1024);
    json!({
        "cores": cores, "cpu": model, "kernel": kernel, "cgroup_mode": cgroup_mode(),
        "memory_mib": memory_mib,
    })
}

/// `unified (v2)`, `hybrid (v1 + v2)` or `legacy (v1)`, from the filesystem at /sys/fs/cgroup.
fn cgroup_mode() -> String {
    use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, statfs};
    match statfs("/sys/fs/cgroup") {
        Err(e) => format!("unknown ({e})"),
        Ok(s) if s.filesystem_type() == CGROUP2_SUPER_MAGIC => "unified (v2)".into(),
        Ok(_) => {
            let unified =
                statfs("/sys/fs/cgroup/unified").is_ok_and(|s| s.filesystem_type() == CGROUP2_SUPER_MAGIC);
            if unified {
                "hybrid (v1 controllers + v2 at /sys/fs/cgroup/unified)".into()
            } else {
                "legacy (v1)".into()
            }
        }
    }
}

// === Throughput bars ===

fn plot_throughput(path: &Path, benches: &[&Bench]) -> Result<()> {
    let panels: Vec<_> = benches
        .iter()
        .filter_map(|b| b.throughput.as_ref().map(|t| (b.name.as_str(), t)))
        .filter(|(_, t)| t.3.is_finite() && t.4.is_finite() && t.3 > 0.0 && t.4 > 0.0)
        .collect();
    if panels.is_empty() {
        return Ok(());
    }
    let width = 460 * u32::try_from(panels.len()).unwrap_or(1);
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let areas = root.split_evenly((1, panels.len()));
        for (area, (name, (ours_label, peer_label, unit, ours, peer))) in areas.iter().zip(&panels) {
            let top = ours.max(*peer);
            let bottom = ours.min(*peer);
            let log = top / bottom > 20.0;
            let bars = [
                (ours_label.as_str(), *ours, RGBColor(31, 119, 180)),
                (peer_label.as_str(), *peer, RGBColor(214, 39, 40)),
            ];
            let caption = format!("{name}: {unit} ({:.1}x)", ours / peer);
            let mut builder = ChartBuilder::on(area);
            builder
                .caption(caption, ("sans-serif", 18))
                .margin(14)
                .x_label_area_size(30)
                .y_label_area_size(80);
            let label = |b: &(&str, f64, RGBColor)| format!("{}: {:.3e}", b.0, b.1);
            if log {
                let mut chart =
                    builder.build_cartesian_2d(0f64..2f64, (bottom / 3.0..top * 3.0).log_scale())?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .disable_x_axis()
                    .y_desc(format!("{unit} (log)"))
                    .draw()?;
                for (i, b) in bars.iter().enumerate() {
                    let x = f64::from(u32::try_from(i).unwrap_or(0));
                    chart.draw_series([Rectangle::new(
                        [(x + 0.15, bottom / 3.0), (x + 0.85, b.1)],
                        b.2.filled(),
                    )])?;
                    chart.draw_series([Text::new(
                        label(b),
                        (x + 0.1, b.1 * 1.3),
                        ("sans-serif", 13).into_font(),
                    )])?;
                }
            } else {
                let mut chart = builder.build_cartesian_2d(0f64..2f64, 0f64..top * 1.2)?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .disable_x_axis()
                    .y_desc(unit.as_str())
                    .draw()?;
                for (i, b) in bars.iter().enumerate() {
                    let x = f64::from(u32::try_from(i).unwrap_or(0));
                    chart.draw_series([Rectangle::new([(x + 0.15, 0.0), (x + 0.85, b.1)], b.2.filled())])?;
                    chart.draw_series([Text::new(
                        label(b),
                        (x + 0.1, b.1 + top * 0.05),
                        ("sans-serif", 13).into_font(),
                    )])?;
                }
            }
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))
}

// === Markdown ===

fn markdown(machine: &Value, benches: &[&Bench], plot_prefix: &str, throughput_svg: bool) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# headroom benchmark report\n");
    let _ = writeln!(
        md,
        "Every figure below was measured on this machine in this run unless it is in the last section, \
         **Published figures (not measured here)**. Each benchmark prints a ratio against a peer measured \
         in the same run (rounds alternate where the benchmark allows it). Regenerate everything with \
         `cargo xtask bench` (then `target/release/report --out target/bench --publish bench/`).\n"
    );
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(md, "| cores | {} |", machine["cores"]);
    let _ = writeln!(md, "| CPU | {} |", text(&machine["cpu"]));
    let _ = writeln!(md, "| memory | {} MiB |", machine["memory_mib"]);
    let _ = writeln!(md, "| kernel (`uname -r`) | {} |", text(&machine["kernel"]));
    let _ = writeln!(md, "| cgroup mode | {} |", text(&machine["cgroup_mode"]));
    let _ = writeln!(md, "| generated | {} |\n", text(&machine["generated_at"]));

    let _ = writeln!(md, "## Summary\n");
    let _ = writeln!(
        md,
        "| benchmark | ours | peer | ratio p50 (peer/ours) | ratio p99 | throughput (ours vs peer) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for b in benches {
        let ours = b.rows.first();
        let peer = b.rows.get(1).filter(|_| b.ratio_p50.is_some());
        let tp = b
            .throughput
            .as_ref()
            .map_or_else(String::new, |(_, _, unit, o, p)| {
                format!("{o:.3e} vs {p:.3e} {unit} ({:.2}x)", o / p)
            });
        let _ = writeln!(
            md,
            "| [{}](#{}) | {} | {} | {} | {} | {} |",
            b.name,
            b.name,
            ours.map_or_else(String::new, |r| format!("{}: p50 {}", r.label, fmt_ns(r.p[0]))),
            peer.map_or_else(String::new, |r| format!("{}: p50 {}", r.label, fmt_ns(r.p[0]))),
            b.ratio_p50.map_or_else(|| "–".into(), |r| format!("{r:.2}x")),
            b.ratio_p99.map_or_else(|| "–".into(), |r| format!("{r:.2}x")),
            tp
        );
    }
    if throughput_svg {
        let _ = writeln!(
            md,
            "\n![throughput, ours beside the peer]({plot_prefix}report-throughput.svg)\n"
        );
    }

    for b in benches {
        let _ = writeln!(md, "\n## {}\n", b.name);
        // Relative to the checkout (benchmarks record their argv, which xtask gives as
        // absolute paths), so the line works in anyone's clone.
        let command = match std::env::current_dir() {
            Ok(root) => b.command.replace(&format!("{}/", root.display()), ""),
            Err(_) => b.command.clone(),
        };
        let _ = writeln!(md, "Reproduce: `{command}`");
        // The soak is its own xtask job, not one of `cargo xtask bench`'s benchmarks.
        let xtask = if b.name == "soak" {
            "cargo xtask soak".to_string()
        } else if b.name == "kube_soak" {
            "sudo cargo xtask soak --cluster".to_string()
        } else {
            format!("cargo xtask bench {}", b.name)
        };
        let _ = writeln!(md, "(or `{xtask}`)\n");
        let _ = writeln!(md, "| | samples | p50 | p90 | p99 | p99.9 | max |");
        let _ = writeln!(md, "|---|---|---|---|---|---|---|");
        for r in &b.rows {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.label,
                r.samples,
                fmt_ns(r.p[0]),
                fmt_ns(r.p[1]),
                fmt_ns(r.p[2]),
                fmt_ns(r.p[3]),
                fmt_ns(r.p[4])
            );
        }
        if let (Some(r50), Some(r99)) = (b.ratio_p50, b.ratio_p99) {
            let _ = writeln!(md, "\nRatio (peer / ours): p50 **{r50:.2}x**, p99 **{r99:.2}x**.");
        }
        if let Some((ol, pl, unit, o, p)) = &b.throughput {
            let _ = writeln!(
                md,
                "\nThroughput: {ol} **{o:.3e} {unit}**, {pl} {p:.3e} {unit}: **{:.2}x**.",
                o / p
            );
        }
        if !b.noise.is_empty() {
            let _ = writeln!(md, "\nNoise (min–max spread in this run):\n");
            for n in &b.noise {
                let _ = writeln!(md, "- {n}");
            }
        }
        if !b.notes.is_empty() {
            let _ = writeln!(md, "\nNotes:\n");
            for n in &b.notes {
                let _ = writeln!(md, "- {n}");
            }
        }
        if !b.plots.is_empty() {
            let _ = writeln!(md, "\nPlots:\n");
            for p in &b.plots {
                let _ = writeln!(md, "- [{p}]({plot_prefix}{p})");
            }
            for p in &b.plots {
                let _ = writeln!(md, "\n![{p}]({plot_prefix}{p})");
            }
        }
    }

    let _ = writeln!(md, "\n## Published figures (not measured here)\n");
    let _ = writeln!(
        md,
        "Quoted from their sources for comparison; **published, not measured here**.\n"
    );
    let _ = writeln!(md, "| figure | value | source |\n|---|---|---|");
    for (figure, value, source) in PUBLISHED {
        let _ = writeln!(md, "| {figure} | {value} | {source} |");
    }
    md
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = &args.out;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("list {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json") && p.file_stem().is_some_and(|s| s != "report")
        })
        .collect();
    // The order of `cargo xtask bench`, then anything else.
    const ORDER: [&str; 7] = ["probes", "pipeline", "events", "idle", "actuation", "shim", "e2e"];
    paths.sort_by_key(|p| {
        let stem = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        (ORDER.iter().position(|o| *o == stem).unwrap_or(ORDER.len()), stem)
    });
    let mut benches = Vec::new();
    for p in &paths {
        match load(p, dir) {
            Ok(b) => benches.push(b),
            Err(e) => eprintln!("report: skipping {}: {e:#}", p.display()),
        }
    }
    let mut machine = machine();
    machine["generated_at"] = json!(jiff::Timestamp::now().to_string());
    let refs: Vec<&Bench> = benches.iter().collect();
    let throughput_svg = dir.join("report-throughput.svg");
    plot_throughput(&throughput_svg, &refs)?;
    let has_tp = throughput_svg.exists() && refs.iter().any(|b| b.throughput.is_some());
    let md = markdown(&machine, &refs, "", has_tp);
    std::fs::write(dir.join("report.md"), &md)
        .with_context(|| format!("write {}/report.md", dir.display()))?;
    let report = json!({
        "machine": machine,
        "benchmarks": benches.iter().map(|b| json!({
            "name": b.name, "command": b.command, "plots": b.plots, "noise": b.noise, "result": b.raw,
        })).collect::<Vec<_>>(),
        "published_not_measured": PUBLISHED.iter().map(|(f, v, s)| json!({"figure": f, "value": v, "source": s}))
            .collect::<Vec<_>>(),
    });
    std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("write {}/report.json", dir.display()))?;
    println!(
        "report: {} benchmark(s) → {}/report.md, report.json{}",
        benches.len(),
        dir.display(),
        if has_tp { ", report-throughput.svg" } else { "" }
    );
    if let Some(publish) = &args.publish {
        std::fs::create_dir_all(publish).with_context(|| format!("create {}", publish.display()))?;
        let mut svgs: Vec<String> = benches.iter().flat_map(|b| b.plots.clone()).collect();
        if has_tp {
            svgs.push("report-throughput.svg".into());
        }
        for svg in &svgs {
            std::fs::copy(dir.join(svg), publish.join(svg))
                .with_context(|| format!("copy {svg} to {}", publish.display()))?;
        }
        let results = publish.join("RESULTS.md");
        std::fs::write(&results, &md).with_context(|| format!("write {}", results.display()))?;
        println!(
            "report: published {} and {} plot(s)",
            results.display(),
            svgs.len()
        );
    }
    Ok(())
}
