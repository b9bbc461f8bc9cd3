//! `cargo xtask bench idle`: what headroomd costs on an idle node, as a share of one core.
//!
//! Two real headroomd binaries serve side by side with their probes attached, on the same idle
//! machine over the same seconds: `--kernel-events push` (ours: the collector waits on the
//! probes' ring buffer between its 100 ms cycles) and `--kernel-events poll` (the peer: the
//! poll-only path, which sleeps between cycles). The mean over the run is `utime + stime` of
//! `/proc/PID/stat` (every thread, at the tick's 10 ms resolution, exact over a run); the
//! per-second samples, whose p50 and p99 are printed beside it, are the threads' exact run time
//! from `/proc/PID/task/*/schedstat`. Samples are CPU nanoseconds per second of wall time:
//! 5 ms per second is 0.5 % of a core, the target.
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use headroom_bench::daemon::{CpuTime, USER_HZ, headroomd_exe, start_headroomd, wait_for_socket};
use headroom_bench::{
    BenchArgs, Comparison, Summary, new_histogram, print_comparison, tokio_runtime, write_json,
};
use serde_json::json;

/// The target: headroomd at idle uses at most this share of one core.
const TARGET_PERCENT: f64 = 0.5;

/// Percent of one core for `ns` of CPU time per second.
fn percent(ns_per_second: f64) -> f64 {
    ns_per_second / 1e7
}

fn main() -> Result<()> {
    let args = BenchArgs::parse_args();
    if let Some(why) = headroom_bench::needs_root("idle", "it loads the probes") {
        bail!("{why}");
    }
    let exe = headroomd_exe()?;
    let Some(rt) = tokio_runtime("idle") else {
        bail!("idle: no Tokio runtime");
    };
    let seconds: u32 = if args.quick { 10 } else { 60 };
    // Start-up (probe load, the first walk, connections) is not idle cost.
    let warmup = Duration::from_secs(if args.quick { 2 } else { 5 });

    let tmp = tempfile::tempdir()?;
    let mut daemons = [
        ("push", start_headroomd(&exe, tmp.path(), "push")?),
        ("poll", start_headroomd(&exe, tmp.path(), "poll")?),
    ];
    for (mode, daemon) in &mut daemons {
        rt.block_on(wait_for_socket(daemon, tmp.path(), mode))?;
    }
    std::thread::sleep(warmup);

    let pids = [daemons[0].1.0.id(), daemons[1].1.0.id()];
    let read = |i: usize| {
        CpuTime::read(pids[i]).with_context(|| {
            let log = std::fs::read_to_string(tmp.path().join(format!("{}.log", daemons[i].0)));
            format!(
                "headroomd --kernel-events {} is gone; its log:\n{}",
                daemons[i].0,
                log.unwrap_or_default()
            )
        })
    };
    let first = [read(0)?, read(1)?];
    let mut previous = first;
    let mut samples: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let started = Instant::now();
    let mut last = started;
    for second in 1..=seconds {
        std::thread::sleep(
            (started + Duration::from_secs(u64::from(second))).saturating_duration_since(Instant::now()),
        );
        let now = Instant::now();
        let interval = now.duration_since(last).as_secs_f64();
        last = now;
        for (i, series) in samples.iter_mut().enumerate() {
            let current = read(i)?;
            // A thread that exited takes its run time out of the sum: that second counts 0.
            let ns = current.schedstat_ns.saturating_sub(previous[i].schedstat_ns);
            series.push(ns as f64 / interval);
            previous[i] = current;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    drop(daemons);

    let mut rows = Vec::new();
    let mut extra = serde_json::Map::new();
    let mut notes = Vec::new();
    for (i, mode) in ["push", "poll"].into_iter().enumerate() {
        let mut h = new_histogram();
        for &ns in &samples[i] {
            // 0 is not recordable; 1 ns per second is 0 % for every purpose here.
            let _ = h.record((ns as u64).max(1));
        }
        let ticks = previous[i].ticks.saturating_sub(first[i].ticks);
        let mean_stat = percent(ticks as f64 / USER_HZ as f64 * 1e9 / elapsed);
        let mean_schedstat = percent(samples[i].iter().sum::<f64>() / samples[i].len().max(1) as f64);
        let (p50, p99) = (
            percent(h.value_at_quantile(0.50) as f64),
            percent(h.value_at_quantile(0.99) as f64),
        );
        let verdict = if mean_stat <= TARGET_PERCENT {
            "met"
        } else {
            "missed"
        };
        notes.push(format!(
            "{mode}: mean {mean_stat:.3} % of a core over {elapsed:.0} s (/proc/PID/stat utime+stime, \
             {ticks} ticks); per-second samples (schedstat): mean {mean_schedstat:.3} %, p50 {p50:.3} %, \
             p99 {p99:.3} %{}",
            if mode == "push" {
                format!("; target ≤ {TARGET_PERCENT} %: {verdict}")
            } else {
                String::new()
            }
        ));
        extra.insert(
            mode.into(),
            json!({
                "mean_percent_of_a_core": mean_stat,
                "ticks": ticks,
                "samples_mean_percent": mean_schedstat,
                "samples_p50_percent": p50,
                "samples_p99_percent": p99,
                "samples_ns_per_second": samples[i],
            }),
        );
        rows.push(Summary::from_histogram(
            &format!(
                "{mode}{}: CPU time per second",
                if i == 1 { " (peer)" } else { "" }
            ),
            &h,
        ));
    }
    let [ours, peer]: [Summary; 2] = rows
        .try_into()
        .map_err(|_| anyhow::anyhow!("idle: two summaries expected"))?;
    let mut c = Comparison::new("idle", ours).with_peer(peer);
    c.notes = notes;
    c.notes.push(
        "side by side on the same machine and seconds, probes attached to both, nothing else of \
         headroom's running; a sample is CPU time used in one second of wall time (5 ms = 0.5 % \
         of a core)"
            .into(),
    );
    // The machine may not be idle (other builds): say how busy it was, so a figure is read with it.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load1 = load.split_whitespace().next().unwrap_or("?").to_owned();
    c.notes.push(format!(
        "machine load average at the end (1 min): {load1}; the probes push other processes' events \
         (throttling, cgroups created and removed) to the push daemon, so a busier machine costs it more"
    ));
    extra.insert("loadavg_1m".into(), json!(load1));
    extra.insert("seconds".into(), json!(seconds));
    extra.insert("target_percent".into(), json!(TARGET_PERCENT));
    c.extra = serde_json::Value::Object(extra);
    print_comparison(&c);
    let path = write_json(&args.out, &c)?;
    println!("wrote {}", path.display());
    Ok(())
}
