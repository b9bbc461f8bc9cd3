//! Shared benchmark helpers: every benchmark binary takes `--out DIR` and `--quick`, prints a
//! percentile table (ours vs the peer, with the ratio), writes `DIR/<name>.json` and plots
//! `DIR/<name>-*.svg`.
//!
//! ```no_run
//! # use headroom_bench::*;
//! # fn f(ours: &hdrhistogram::Histogram<u64>, peer: &hdrhistogram::Histogram<u64>) -> anyhow::Result<()> {
//! let args = BenchArgs::parse_args();
//! let c = Comparison::new("actuation", Summary::from_histogram("headroom", ours))
//!     .with_peer(Summary::from_histogram("runc update", peer));
//! print_comparison(&c);
//! write_json(&args.out, &c)?;
//! plot_percentiles(&args.out.join("actuation-percentiles.svg"), "resize latency", &[("headroom", ours), ("runc", peer)])?;
//! # Ok(()) }
//! ```

pub mod daemon;
pub mod interval;
pub mod load;
pub mod runc;
pub mod soak;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;
use hdrhistogram::Histogram;
use plotters::prelude::*;
use serde::Serialize;

/// The common command line of every benchmark.
#[derive(Debug, Clone, Parser)]
pub struct BenchArgs {
    /// Directory for `<name>.json` and `<name>-*.svg`.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Short run (smoke test for CI).
    #[arg(long)]
    pub quick: bool,
}

impl BenchArgs {
    pub fn parse_args() -> Self {
        <Self as Parser>::parse()
    }
}

/// `d` in nanoseconds, saturating (a histogram's sample).
pub fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A new nanosecond histogram (1 ns .. 1 h, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant histogram bounds are valid")
}

/// Percentiles of one distribution, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub label: String,
    pub samples: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

impl Summary {
    pub fn from_histogram(label: &str, h: &Histogram<u64>) -> Self {
        Self {
            label: label.to_owned(),
            samples: h.len(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            mean_ns: h.mean(),
        }
    }
}

/// One benchmark's result: ours, the peer measured in the same run, and how to reproduce it.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub name: String,
    pub ours: Summary,
    pub peer: Option<Summary>,
    /// peer p50 / ours p50.
    pub ratio_p50: Option<f64>,
    /// peer p99 / ours p99.
    pub ratio_p99: Option<f64>,
    /// The command line that reproduces this result.
    pub command: String,
    /// Extra rows (e.g. per-phase latencies).
    pub details: Vec<Summary>,
    pub notes: Vec<String>,
    /// Free-form, benchmark-specific data.
    pub extra: serde_json::Value,
}

fn ratio(peer: u64, ours: u64) -> Option<f64> {
    // Display only: the precision lost does not matter.
    (ours > 0).then(|| peer as f64 / ours as f64)
}

impl Comparison {
    pub fn new(name: &str, ours: Summary) -> Self {
        Self {
            name: name.to_owned(),
            ours,
            peer: None,
            ratio_p50: None,
            ratio_p99: None,
            command: reproduce_command(),
            details: Vec::new(),
            notes: Vec::new(),
            extra: serde_json::Value::Null,
        }
    }

    pub fn with_peer(mut self, peer: Summary) -> Self {
        self.ratio_p50 = ratio(peer.p50_ns, self.ours.p50_ns);
        self.ratio_p99 = ratio(peer.p99_ns, self.ours.p99_ns);
        self.peer = Some(peer);
        self
    }
}

/// `argv` joined, as the command that reproduces the run.
pub fn reproduce_command() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Human-readable duration for tables: ns, µs or ms with 1–3 significant decimals.
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", f / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", f / 1e6),
        _ => format!("{:.2} s", f / 1e9),
    }
}

/// Why benchmark `name` cannot run here (`None` as root), from the tests' one privileged gate
/// (`headroom_testkit::gate`): `<name>: needs root (<why>); run it with sudo`.
pub fn needs_root(name: &str, why: &str) -> Option<String> {
    headroom_testkit::gate::not_root().map(|_| format!("{name}: needs root ({why}); run it with sudo"))
}

/// The two-worker Tokio runtime the async benchmarks run on; `None` (said on stderr) if it
/// cannot start.
pub fn tokio_runtime(name: &str) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("{name}: start the Tokio runtime: {e}");
            None
        }
    }
}

/// Prints a percentile table: a header, then one row per summary, the label column as wide as
/// the longest label.
pub fn print_table<'a>(rows: impl IntoIterator<Item = &'a Summary>) {
    let rows: Vec<&Summary> = rows.into_iter().collect();
    let width = rows
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(28);
    println!(
        "{:<width$} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "samples", "p50", "p90", "p99", "p99.9", "max"
    );
    for s in rows {
        println!(
            "{:<width$} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            s.label,
            s.samples,
            fmt_ns(s.p50_ns),
            fmt_ns(s.p90_ns),
            fmt_ns(s.p99_ns),
            fmt_ns(s.p999_ns),
            fmt_ns(s.max_ns)
        );
    }
}

/// Prints the table: ours, the peer, the ratio, then the detail rows and notes.
pub fn print_comparison(c: &Comparison) {
    println!("== {} ==", c.name);
    print_table(std::iter::once(&c.ours).chain(&c.peer));
    if let (Some(r50), Some(r99)) = (c.ratio_p50, c.ratio_p99) {
        println!("ratio (peer / ours): p50 {r50:.1}x, p99 {r99:.1}x");
    }
    if !c.details.is_empty() {
        println!("-- details --");
        print_table(&c.details);
    }
    for n in &c.notes {
        println!("note: {n}");
    }
}

/// Writes `dir/<name>.json`.
pub fn write_json(dir: &Path, c: &Comparison) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join(format!("{}.json", c.name));
    let json = serde_json::to_string_pretty(c).context("serialise summary")?;
    std::fs::write(&path, json).with_context(|| format!("write {}", path.display()))?;
    Ok(path)
}

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Smallest and largest recorded latency of all `series`, in µs (1 ns .. 1 µs when empty).
fn range_us(series: &[&(&str, &Histogram<u64>)]) -> (f64, f64) {
    let (lo, hi) = series.iter().fold((f64::MAX, 1e-3f64), |(lo, hi), (_, h)| {
        (lo.min(h.min().max(1) as f64 / 1e3), hi.max(h.max() as f64 / 1e3))
    });
    (if lo == f64::MAX { 1e-3 } else { lo }, hi)
}

/// Percentile curves (x: 0 → 99.99 %, log of 1/(1-q); y: latency in µs, log scale).
pub fn plot_percentiles(path: &Path, title: &str, series: &[(&str, &Histogram<u64>)]) -> Result<()> {
    let nonempty: Vec<_> = series.iter().filter(|(_, h)| !h.is_empty()).collect();
    let (lo, hi) = range_us(&nonempty);
    let lo = lo / 1.5;
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..4f64, (lo..hi * 1.5).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency (µs)")
            .x_labels(5)
            .x_label_formatter(&|x| format!("{}%", 100.0 - 100.0 * 10f64.powf(-x)))
            .draw()?;
        for (i, (label, h)) in nonempty.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = (0..=400)
                .map(|k| {
                    let x = f64::from(k) / 100.0;
                    let q = 1.0 - 10f64.powf(-x);
                    (x, h.value_at_quantile(q).max(1) as f64 / 1e3)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(*label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))
}

/// Latency histogram: sample counts per logarithmic latency bucket (x in µs, log scale).
pub fn plot_histogram(path: &Path, title: &str, series: &[(&str, &Histogram<u64>)]) -> Result<()> {
    let nonempty: Vec<_> = series.iter().filter(|(_, h)| !h.is_empty()).collect();
    let (lo, hi) = range_us(&nonempty);
    let lo = lo / 1.2;
    let hi = hi * 1.2;
    const BUCKETS: usize = 80;
    let step = (hi / lo).ln() / BUCKETS as f64;
    let mut all = Vec::new();
    let mut top = 1f64;
    for (label, h) in &nonempty {
        let mut counts = vec![0u64; BUCKETS];
        for v in h.iter_recorded() {
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let b = (((v.value_iterated_to() as f64 / 1e3) / lo).ln() / step) as usize;
            counts[b.min(BUCKETS - 1)] += v.count_at_value();
        }
        let total = h.len().max(1) as f64;
        let pts: Vec<(f64, f64)> = counts
            .iter()
            .enumerate()
            .flat_map(|(i, &c)| {
                let x0 = lo * (step * i as f64).exp();
                let x1 = lo * (step * (i + 1) as f64).exp();
                let y = 100.0 * c as f64 / total;
                [(x0, y), (x1, y)]
            })
            .collect();
        top = pts.iter().fold(top, |t, p| t.max(p.1));
        all.push((*label, pts));
    }
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..top * 1.1)?;
        chart
            .configure_mesh()
            .x_desc("latency (µs)")
            .y_desc("% of samples")
            .draw()?;
        for (i, (label, pts)) in all.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(*label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn summary_ratio_json_and_plots() {
        let mut ours = new_histogram();
        let mut peer = new_histogram();
        for i in 1..=1000u64 {
            ours.record(i * 10).unwrap();
            peer.record(i * 4000).unwrap();
        }
        let s = Summary::from_histogram("ours", &ours);
        assert!(ours.equivalent(s.p50_ns, 5000) && ours.equivalent(s.max_ns, 10_000));
        let c = Comparison::new("t", s).with_peer(Summary::from_histogram("peer", &peer));
        let r = c.ratio_p50.unwrap();
        assert!((390.0..410.0).contains(&r), "{r}");
        let dir = tempfile::tempdir().unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(write_json(dir.path(), &c).unwrap()).unwrap())
                .unwrap();
        assert_eq!(json["name"], "t");
        assert_eq!(json["ours"]["samples"], 1000);
        let svg = dir.path().join("t-p.svg");
        plot_percentiles(&svg, "t", &[("ours", &ours), ("peer", &peer)]).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
        plot_histogram(
            &dir.path().join("t-h.svg"),
            "t",
            &[("ours", &ours), ("peer", &peer)],
        )
        .unwrap();
        assert_eq!(fmt_ns(1500), "1.5 µs");
    }
}
