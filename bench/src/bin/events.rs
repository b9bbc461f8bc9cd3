//! `cargo xtask bench events`: how old a kernel event is when a `WatchHeadroom` subscriber
//! receives it, measured on the kernel's own clock: the subscriber's CLOCK_BOOTTIME at receipt
//! minus the probe's `bpf_ktime_get_boot_ns` stamp.
//!
//! Two real headroomd binaries serve side by side in the same run, on the same kernel events:
//! `--kernel-events push` (ours: the collector waits on the ring buffer) and `--kernel-events
//! poll` (the peer: events taken at the 100 ms cycle, as before). Each has several subscribers.
//! The workload is real: a busy loop in a Pod cgroup with a 10% CPU quota (every throttle
//! episode's begin and end is an event) and a reader of a cold file through a 32 MiB memcg limit
//! (every reclaim stall is one). Measured idle, then (without `--quick`) under
//! `stress-ng --cpu 1 --vm 1`.
use std::{
    collections::HashMap,
    io::Write as _,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use headroom_bench::daemon::{headroomd_exe, start_headroomd, wait_for_socket};
use headroom_bench::load::Load;
use headroom_bench::{
    BenchArgs, Comparison, Summary, new_histogram, plot_percentiles, print_comparison, tokio_runtime,
    write_json,
};
use headroom_client::headroom_client;
use headroom_proto::v1::{KernelEventKind, WatchHeadroomRequest};
use headroom_testkit::scratch::{TestCgroup, spawn_in, stop};
use headroomd::{cgroups::CgroupHost, probes::boottime_ns};
use serde_json::json;

#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: BenchArgs,
    /// Which workload runs: both, or only the throttled loop or only the memcg reader.
    #[arg(long, value_enum, default_value_t = Workload::Both)]
    workload: Workload,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Workload {
    Both,
    Throttle,
    Reclaim,
}

/// Subscribers per daemon.
const SUBSCRIBERS: usize = 4;

/// Which histogram a sample goes to: daemon mode, phase, event class.
type Key = (&'static str, &'static str, &'static str);
type Histograms = Arc<Mutex<HashMap<Key, Histogram<u64>>>>;

/// A Pod's cgroup and its container's, removed on drop: the container first (fields drop in
/// order), since a cgroup with a child cannot be removed.
struct PodCgroups {
    app: TestCgroup,
    _pod: TestCgroup,
}

/// `<mount>/headroom/pod<uid>/app`, the Pod layout headroomd's resolver knows.
fn pod_cgroup(mount: &Path, uid: &str) -> Result<PodCgroups> {
    let root = mount.join("headroom");
    std::fs::create_dir_all(&root).with_context(|| format!("create {}", root.display()))?;
    let v2 = mount.join("cgroup.controllers").exists();
    let delegate = |dir: &Path| {
        if v2 {
            // The controllers must reach the container's level; refused ones show up as
            // missing events, not as a panic.
            let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+cpu +memory");
        }
    };
    delegate(mount);
    delegate(&root);
    let pod = TestCgroup {
        path: root.join(format!("pod{uid}")),
    };
    std::fs::create_dir(&pod.path).with_context(|| format!("create {}", pod.path.display()))?;
    delegate(&pod.path);
    let app = TestCgroup {
        path: pod.path.join("app"),
    };
    std::fs::create_dir(&app.path).with_context(|| format!("create {}", app.path.display()))?;
    Ok(PodCgroups { app, _pod: pod })
}

fn uid(n: u32) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), n)
}

/// A file of `mib` MiB, dropped from the page cache: reading it charges the reader's memcg.
fn cold_file(mib: usize) -> Result<tempfile::NamedTempFile> {
    let mut file = tempfile::NamedTempFile::new_in("/var/tmp")?;
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..mib {
        file.write_all(&chunk)?;
    }
    file.as_file().sync_all()?;
    nix::fcntl::posix_fadvise(
        file.as_file(),
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )?;
    Ok(file)
}

fn class(kind: i32) -> Option<&'static str> {
    match KernelEventKind::try_from(kind).ok()? {
        KernelEventKind::ThrottleBegin | KernelEventKind::ThrottleEnd => Some("throttle"),
        KernelEventKind::MemcgReclaimStall | KernelEventKind::DirectReclaimStall => Some("reclaim"),
        _ => None,
    }
}

fn main() -> Result<()> {
    let Args {
        common: args,
        workload,
    } = <Args as clap::Parser>::parse();
    if let Some(why) = headroom_bench::needs_root("events", "it loads the probes and creates cgroups") {
        bail!("{why}");
    }
    let exe = headroomd_exe()?;
    let host = CgroupHost::detect(Path::new("/sys/fs/cgroup")).context("detect the cgroup layout")?;
    let Some(rt) = tokio_runtime("events") else {
        bail!("events: no Tokio runtime");
    };
    let seconds = if args.quick { 3 } else { 20 };
    let phases: &[&'static str] = if args.quick {
        &["idle"]
    } else {
        &["idle", "stress-ng"]
    };

    let tmp = tempfile::tempdir()?;
    let mut daemons = [
        ("push", start_headroomd(&exe, tmp.path(), "push")?),
        ("poll", start_headroomd(&exe, tmp.path(), "poll")?),
    ];
    for (mode, daemon) in &mut daemons {
        rt.block_on(wait_for_socket(daemon, tmp.path(), mode))?;
    }
    let (cpu_uid, memory_uid) = (uid(1), uid(2));
    let busy_pod = pod_cgroup(&host.cpu.mount, &cpu_uid)?;
    busy_pod.app.set_cpu_quota(10_000, 100_000);
    let reader_pod = pod_cgroup(&host.memory.mount, &memory_uid)?;
    reader_pod.app.set_memory_limit(32 << 20);
    let file = cold_file(if args.quick { 96 } else { 192 })?;
    // The collector indexes the new cgroups before anything is measured.
    std::thread::sleep(Duration::from_millis(300));

    let histograms: Histograms = Arc::new(Mutex::new(HashMap::new()));
    let phase = Arc::new(Mutex::new(None::<&'static str>));
    let gaps = Arc::new(Mutex::new(HashMap::<&'static str, u64>::new()));
    let ours: [String; 2] = [cpu_uid.clone(), memory_uid.clone()];
    let mut tasks = Vec::new();
    for (mode, _) in &daemons {
        let mode: &'static str = mode;
        for _ in 0..SUBSCRIBERS {
            let socket = tmp.path().join(format!("{mode}.sock"));
            let (histograms, phase, gaps, ours) =
                (histograms.clone(), phase.clone(), gaps.clone(), ours.clone());
            let mut stream = rt.block_on(async {
                let mut client = headroom_client(&socket).await?;
                anyhow::Ok(
                    client
                        .watch_headroom(WatchHeadroomRequest {
                            include_pods: false,
                            min_interval_ms: 0,
                        })
                        .await?
                        .into_inner(),
                )
            })?;
            tasks.push(rt.spawn(async move {
                let mut last: Option<u64> = None;
                while let Ok(Some(snapshot)) = stream.message().await {
                    let received = boottime_ns();
                    let Some(phase) = *phase.lock().unwrap_or_else(|e| e.into_inner()) else {
                        last = snapshot.kernel_events.last().map(|e| e.sequence).or(last);
                        continue;
                    };
                    let mut h = histograms.lock().unwrap_or_else(|e| e.into_inner());
                    for e in &snapshot.kernel_events {
                        if last.is_some_and(|l| e.sequence <= l) {
                            continue;
                        }
                        if let Some(l) = last
                            && e.sequence > l + 1
                        {
                            // Events that left the 64-event window between two snapshots.
                            *gaps
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .entry(mode)
                                .or_default() += e.sequence - l - 1;
                        }
                        last = Some(e.sequence);
                        let Some(class) = class(e.kind) else { continue };
                        if !ours.contains(&e.pod_uid) {
                            continue;
                        }
                        // A stamp after the receipt would be a clock mix-up: kept visible as 0.
                        let age = received.saturating_sub(e.boottime_ns).max(1);
                        let _ = h
                            .entry((mode, phase, class))
                            .or_insert_with(new_histogram)
                            .record(age);
                    }
                }
            }));
        }
    }

    let busy =
        (workload != Workload::Reclaim).then(|| spawn_in(&[&busy_pod.app], "sh -c 'while :; do :; done'"));
    let reader = (workload != Workload::Throttle).then(|| {
        spawn_in(
            &[&reader_pod.app],
            &format!(
                "sh -c 'while :; do cat \"{}\" >/dev/null; done'",
                file.path().display()
            ),
        )
    });
    std::thread::sleep(Duration::from_secs(1)); // warm-up: first episodes, page cache churn
    for &name in phases {
        let load = if name == "stress-ng" {
            Some(Load::start(None)?)
        } else {
            None
        };
        *phase.lock().unwrap_or_else(|e| e.into_inner()) = Some(name);
        std::thread::sleep(Duration::from_secs(seconds));
        *phase.lock().unwrap_or_else(|e| e.into_inner()) = None;
        drop(load);
        std::thread::sleep(Duration::from_millis(500));
    }
    busy.map(stop);
    reader.map(stop);
    drop(daemons);
    for task in tasks {
        let _ = rt.block_on(task);
    }

    let h = histograms.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let empty = new_histogram();
    let merged = |mode: &'static str, phase: &'static str| {
        let mut all = new_histogram();
        for class in ["throttle", "reclaim"] {
            if let Some(one) = h.get(&(mode, phase, class)) {
                let _ = all.add(one);
            }
        }
        all
    };
    let (push_idle, poll_idle) = (merged("push", "idle"), merged("poll", "idle"));
    if push_idle.is_empty() || poll_idle.is_empty() {
        bail!(
            "events: no kernel event reached a subscriber (push {}, poll {})",
            push_idle.len(),
            poll_idle.len()
        );
    }
    let mut c = Comparison::new(
        "events",
        Summary::from_histogram("push: kernel event → subscriber (idle)", &push_idle),
    )
    .with_peer(Summary::from_histogram(
        "poll, 100 ms cycle (peer, idle)",
        &poll_idle,
    ));
    let mut extra = serde_json::Map::new();
    for &phase in phases {
        for class in ["throttle", "reclaim"] {
            for mode in ["push", "poll"] {
                let one = h.get(&(mode, phase, class)).unwrap_or(&empty);
                c.details
                    .push(Summary::from_histogram(&format!("{mode} {phase} {class}"), one));
            }
        }
        if phase != "idle" {
            let (push, poll) = (merged("push", phase), merged("poll", phase));
            for (mode, one) in [("push", &push), ("poll", &poll)] {
                c.details
                    .push(Summary::from_histogram(&format!("{mode} {phase} all"), one));
            }
            extra.insert(
                format!("{phase}_ratio_p99"),
                json!(poll.value_at_quantile(0.99) as f64 / push.value_at_quantile(0.99).max(1) as f64),
            );
            c.notes.push(format!(
                "under {phase}: push p99 {:.2} ms (target ≤ 20 ms), poll p99 {:.2} ms",
                push.value_at_quantile(0.99) as f64 / 1e6,
                poll.value_at_quantile(0.99) as f64 / 1e6
            ));
        }
    }
    let gaps = gaps.lock().unwrap_or_else(|e| e.into_inner()).clone();
    c.notes.push(format!(
        "idle: push p99 {:.2} ms (target ≤ 5 ms); p99.9 push {:.2} ms, poll {:.2} ms",
        push_idle.value_at_quantile(0.99) as f64 / 1e6,
        push_idle.value_at_quantile(0.999) as f64 / 1e6,
        poll_idle.value_at_quantile(0.999) as f64 / 1e6
    ));
    c.notes.push(format!(
        "{SUBSCRIBERS} subscribers per daemon, {seconds} s per phase; events that left the 64-event window unseen (summed over subscribers): push {}, poll {}",
        gaps.get("push").copied().unwrap_or(0),
        gaps.get("poll").copied().unwrap_or(0)
    ));
    extra.insert("subscribers".into(), json!(SUBSCRIBERS));
    extra.insert("seconds_per_phase".into(), json!(seconds));
    extra.insert("window_gaps".into(), json!(gaps));
    c.extra = serde_json::Value::Object(extra);
    print_comparison(&c);
    let path = write_json(&args.out, &c)?;
    println!("wrote {}", path.display());
    plot_percentiles(
        &args.out.join("events-percentiles.svg"),
        "kernel event → WatchHeadroom subscriber (CLOCK_BOOTTIME)",
        &[("push", &push_idle), ("poll (peer)", &poll_idle)],
    )?;
    Ok(())
}
