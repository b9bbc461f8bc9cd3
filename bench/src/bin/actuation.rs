//! `actuation`: 3-container Pod resizes through headroom's actuator on this host's real
//! cgroups, against the same kind of resize through `runc update` on a real runc container
//! (busybox rootfs, `linux.cgroupsPath` under the same scratch root), measured in one run.
//!
//! `cargo xtask bench actuation` (or `target/release/actuation --out target/bench [--quick]`).
//! Needs root and the v1 cpu/memory hierarchies; prints `SKIPPED (<reason>)` otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use headroom_actuator::{
    Actuator, ActuatorConfig, CgroupSetup, KubeResources, Phase, PodCgroups, ResizeRequest, ScratchRoots,
    convert, detect_setup,
};
use headroom_bench::runc::{RuncContainer, run, runc_version};
use headroom_bench::{
    BenchArgs, Comparison, Summary, new_histogram, ns, plot_histogram, plot_percentiles, print_comparison,
    write_json,
};
use serde_json::json;

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: BenchArgs,
    /// Actuator resizes to time (default 10000, 300 with --quick).
    #[arg(long)]
    resizes: Option<usize>,
    /// `runc update` calls to time (default 1000, 30 with --quick).
    #[arg(long)]
    runc_updates: Option<usize>,
    /// CFS-period "effective" observations (default 20, 5 with --quick).
    #[arg(long)]
    effective: Option<usize>,
}

const NAME: &str = "actuation";
const MOUNT: &str = "/sys/fs/cgroup";
const CONTAINERS: [&str; 3] = ["app", "sidecar", "logger"];
const MIB: u64 = 1 << 20;

fn res(cpu: u64, limit: u64, mem_mib: u64) -> KubeResources {
    KubeResources {
        cpu_request_milli: cpu,
        cpu_limit_milli: Some(limit),
        memory_limit_bytes: Some(mem_mib * MIB),
    }
}

fn sizes() -> [[KubeResources; 3]; 2] {
    [
        [res(500, 1000, 256), res(250, 500, 128), res(100, 200, 64)],
        [res(1000, 2000, 384), res(500, 1000, 192), res(200, 400, 96)],
    ]
}

fn request(uid: &str, size: &[KubeResources; 3]) -> ResizeRequest {
    ResizeRequest {
        pod_uid: uid.to_owned(),
        containers: CONTAINERS
            .iter()
            .zip(size)
            .map(|(c, r)| ((*c).to_owned(), *r))
            .collect(),
        pod: None,
    }
}

fn skip_reason() -> Option<String> {
    if let Some(why) = headroom_bench::needs_root("actuation", "it writes cgroups") {
        return Some(why);
    }
    match detect_setup(Path::new(MOUNT)) {
        Err(e) => Some(e.to_string()),
        Ok(CgroupSetup::Unified) => Some("unified (v2) host: this benchmark's scratch roots are v1".into()),
        Ok(_) => None,
    }
}

/// A process killed and reaped on drop.
struct Proc(std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let quick = args.common.quick;
    let n_resizes = args.resizes.unwrap_or(if quick { 300 } else { 10_000 });
    let n_runc = args.runc_updates.unwrap_or(if quick { 30 } else { 1000 });
    let n_effective = args.effective.unwrap_or(if quick { 5 } else { 20 });
    if let Some(reason) = skip_reason() {
        eprintln!("{NAME}: SKIPPED ({reason})");
        return Ok(());
    }

    let scratch = ScratchRoots::create_v1(Path::new(MOUNT), "headroom-bench")?;
    let scratch_name = match scratch.roots() {
        headroom_actuator::Roots::V1 { cpu, .. } => cpu
            .file_name()
            .and_then(|n| n.to_str())
            .context("scratch root name")?
            .to_owned(),
        headroom_actuator::Roots::V2 { .. } => bail!("unexpected v2 scratch roots"),
    };
    let [small, big] = sizes();
    let uid = "bench-0000-4000-8000-000000000001";
    let initial = convert::pod_values(
        &request(uid, &small).containers,
        None,
        headroom_actuator::CgroupVersion::V1,
        &Default::default(),
    );
    let pod = PodCgroups::create(scratch.roots(), uid, &CONTAINERS, Some(&initial))?;
    // A real (idle) process in every container.
    let mut sleepers = Vec::new();
    for c in CONTAINERS {
        let p = Proc(
            Command::new("/bin/sleep")
                .arg("100000")
                .spawn()
                .context("spawn sleep")?,
        );
        pod.add_process(c, p.0.id())?;
        sleepers.push(p);
    }
    // Intent records on tmpfs (they only need to outlive the process; see actuator::intent).
    let intents = tempfile::Builder::new()
        .prefix("headroom-bench-intents")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .context("intent dir")?;
    let mut actuator = Actuator::new(ActuatorConfig::new(
        scratch.roots().clone(),
        intents.path().to_path_buf(),
    ))?;

    // --- ours ---
    for i in 0..200 {
        actuator.resize(
            &request(uid, if i % 2 == 0 { &big } else { &small }),
            Instant::now(),
        )?;
    }
    actuator.latency_mut().reset();
    let reqs = [request(uid, &big), request(uid, &small)];
    let mut ours = new_histogram();
    let mut writes = 0;
    for i in 0..n_resizes {
        let received = Instant::now();
        let report = actuator.resize(&reqs[i % 2], received)?;
        ours.saturating_record(ns(received.elapsed()));
        writes = report.writes;
    }
    let phases: Vec<Summary> = [
        Phase::Planned,
        Phase::FirstWrite,
        Phase::LastWrite,
        Phase::Verified,
    ]
    .iter()
    .filter_map(|p| {
        actuator
            .latency()
            .histogram(*p)
            .map(|h| Summary::from_histogram(&format!("  phase {}", p.name()), h))
    })
    .collect();

    // --- naive baseline: open/write/close per file, no read-back (what most agents do) ---
    let naive = naive_baseline(&pod, if quick { 300 } else { 2000 })?;

    // --- peer: runc update ---
    let peer = runc_peer(&scratch_name, n_runc);

    // --- effective: a busy loop in `app`, time until the next CFS period with the new quota ---
    let mut effective = new_histogram();
    {
        let busy = Proc(
            Command::new("/bin/sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .context("spawn busy loop")?,
        );
        pod.add_process("app", busy.0.id())?;
        std::thread::sleep(Duration::from_millis(150));
        for i in 0..n_effective {
            let received = Instant::now();
            let mut report = actuator.resize(&reqs[i % 2], received)?;
            if let Some(d) = actuator.wait_effective(&mut report, received, Duration::from_secs(1))? {
                effective.saturating_record(ns(d));
            }
        }
    }
    drop(sleepers);

    let mut c = Comparison::new(NAME, Summary::from_histogram("headroom actuator (pod+3)", &ours));
    let mut notes = vec![
        format!("one sample = one resize of a 3-container Pod: plan, memory check, intent record (one pwrite on tmpfs, no fdatasync: see actuator::intent), {writes} cgroup writes, read-back verification"),
        "ratio compares one actuator resize (Pod + 3 containers) with ONE `runc update` (one container); the kubelet path needs one per container".into(),
        format!("targets: p50 <= 30 µs, p99 <= 100 µs, >= 100x runc at p50; measured p50 {}, p99 {}", headroom_bench::fmt_ns(c.ours.p50_ns), headroom_bench::fmt_ns(c.ours.p99_ns)),
    ];
    let peer_hist = match peer {
        Ok(h) => {
            c = c.with_peer(Summary::from_histogram("runc update (1 container)", &h));
            Some(h)
        }
        Err(e) => {
            notes.push(format!("peer not measured: {e:#}"));
            None
        }
    };
    c.details = phases;
    c.details
        .push(Summary::from_histogram("naive open/write/close x12", &naive));
    c.details.push(Summary::from_histogram(
        "  effective (next CFS period)",
        &effective,
    ));
    if let (Some(r), true) = (c.ratio_p50, c.peer.is_some()) {
        notes.push(format!(
            "p50 ratio {r:.0}x {} the 100x target",
            if r >= 100.0 { "meets" } else { "misses" }
        ));
    }
    c.notes = notes;
    c.extra = json!({
        "resizes": n_resizes,
        "runc_updates": n_runc,
        "writes_per_resize": writes,
        "cgroup_setup": "v1 (hybrid host)",
        "runc_version": runc_version(),
    });
    print_comparison(&c);
    let out = &args.common.out;
    let json_path = write_json(out, &c)?;
    let mut series: Vec<(&str, &Histogram<u64>)> =
        vec![("headroom actuator", &ours), ("naive open/write/close", &naive)];
    if let Some(h) = &peer_hist {
        series.push(("runc update", h));
    }
    plot_percentiles(
        &out.join(format!("{NAME}-percentiles.svg")),
        "3-container Pod resize latency",
        &series,
    )?;
    plot_histogram(
        &out.join(format!("{NAME}-histogram.svg")),
        "3-container Pod resize latency",
        &series,
    )?;
    println!(
        "wrote {} and {NAME}-{{percentiles,histogram}}.svg",
        json_path.display()
    );
    drop(actuator);
    pod.remove()?;
    drop(scratch);
    Ok(())
}

/// The same 12 values written the naive way: open, write, close each file, alternating sizes.
fn naive_baseline(pod: &PodCgroups, n: usize) -> Result<Histogram<u64>> {
    let mut files = Vec::new();
    for dirs in std::iter::once(pod.pod_dirs()?).chain(
        CONTAINERS
            .iter()
            .map(|c| pod.container_dirs(c))
            .collect::<Result<Vec<_>, _>>()?,
    ) {
        if let headroom_cgroupfs::CgroupDirs::V1 { cpu, memory } = dirs {
            let read = |p: PathBuf| -> Result<(PathBuf, String)> {
                let v = std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
                Ok((p, v.trim().to_owned()))
            };
            files.push(read(cpu.join("cpu.shares"))?);
            files.push(read(cpu.join("cpu.cfs_quota_us"))?);
            files.push(read(memory.join("memory.limit_in_bytes"))?);
        }
    }
    let mut h = new_histogram();
    for _ in 0..n {
        let t = Instant::now();
        // Rewriting the current values keeps the kernel order constraints trivially satisfied.
        for (p, v) in &files {
            std::fs::write(p, v).with_context(|| format!("write {}", p.display()))?;
        }
        h.saturating_record(ns(t.elapsed()));
    }
    Ok(h)
}

fn runc_peer(scratch_name: &str, n: usize) -> Result<Histogram<u64>> {
    let id = format!("headroom-bench-{}", std::process::id());
    let container = RuncContainer::start(&id, Some(scratch_name))?;
    let updates = [
        ("200000", (384 * MIB).to_string()),
        ("100000", (256 * MIB).to_string()),
    ];
    // Warm-up (page cache for the runc binary).
    for (q, m) in &updates {
        run(Command::new("runc").args([
            "update",
            "--cpu-quota",
            q,
            "--cpu-period",
            "100000",
            "--memory",
            m,
            &id,
        ]))?;
    }
    let mut h = new_histogram();
    for i in 0..n {
        let (q, m) = &updates[i % 2];
        let t = Instant::now();
        run(Command::new("runc").args([
            "update",
            "--cpu-quota",
            q,
            "--cpu-period",
            "100000",
            "--memory",
            m,
            &id,
        ]))?;
        h.saturating_record(ns(t.elapsed()));
    }
    // Check the kernel took the last update.
    let quota_file = container.cgroup_dir("cpu").join("cpu.cfs_quota_us");
    let quota =
        std::fs::read_to_string(&quota_file).with_context(|| format!("read {}", quota_file.display()))?;
    let want = updates[(n + 1) % 2].0;
    if quota.trim() != want {
        bail!(
            "runc update did not take: {} is {} instead of {want}",
            quota_file.display(),
            quota.trim()
        );
    }
    drop(container);
    Ok(h)
}
