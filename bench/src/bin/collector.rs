//! `collector`: the collector's read of every Pod cgroup's files, one cycle, on this host's real
//! cgroupfs: headroomd's kept-open files (one `pread(2)` per file) against opening, reading and
//! closing each file every cycle, as headroomd did before and as cAdvisor's cgroup readers do.
//!
//! `cargo xtask bench collector` (or `target/release/collector --out target/bench [--quick]`).
//!
//! Both sides are headroomd's own `CgroupFileReaders` over one index of 100 scratch Pods (the
//! Pod cgroup and three containers each, in every hierarchy headroom reads): ours with the
//! default cap on open files, the peer with a cap of zero, which is the open-each-time path.
//! Cycles alternate between the sides so machine noise hits both alike. One sample is one whole
//! cycle (every cgroup's files read and handed on), wall time on one thread; the thread's CPU
//! time per cycle is printed beside it. The cgroups hold no tasks: reading an empty cgroup's
//! files costs what the kernel's formatting and (v1) statistics flush cost, not the tasks'.
use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use headroom_bench::{BenchArgs, Comparison, Summary, new_histogram, ns, print_comparison, write_json};
use headroom_cgroupfs::CgroupVersion;
use headroomd::cgroups::{CgroupHost, CgroupIndex, files::CgroupFileReaders, files::DEFAULT_MAX_OPEN_FILES};
use serde_json::json;

const NAME: &str = "collector";
const MOUNT: &str = "/sys/fs/cgroup";
const PODS: usize = 100;
const CONTAINERS: [&str; 3] = ["app", "sidecar", "pause"];

/// The scratch tree: `<root>/pod<uid>/<container>` in every hierarchy read, as the kubelet
/// makes them; removed on drop. Not the actuator's `PodCgroups`: the standalone layout has no
/// cgroup in a separate v1 `cpuacct` hierarchy (this host's), so the collector would skip
/// `cpuacct.usage` and the benchmark would measure less than a kubelet node costs.
struct Scratch {
    dirs: Vec<PathBuf>,
}

impl Scratch {
    fn create(host: &CgroupHost, root: &str) -> Result<Self> {
        let mut mounts: Vec<&Path> = host.hierarchies().iter().map(|h| h.mount.as_path()).collect();
        if let Some(acct) = &host.cpuacct {
            mounts.push(acct);
        }
        mounts.sort();
        mounts.dedup();
        let mut scratch = Self { dirs: Vec::new() };
        for mount in mounts {
            let base = mount.join(root);
            scratch.mkdir(&base)?;
            if host.version == CgroupVersion::V2 {
                enable_controllers(&base)?;
            }
            for pod in 0..PODS {
                let pod_dir = base.join(format!("pod0b5e3f2a-1c1d-4e7f-9a0b-{pod:012}"));
                scratch.mkdir(&pod_dir)?;
                if host.version == CgroupVersion::V2 {
                    enable_controllers(&pod_dir)?;
                }
                for c in CONTAINERS {
                    scratch.mkdir(&pod_dir.join(c))?;
                }
            }
        }
        Ok(scratch)
    }

    fn mkdir(&mut self, dir: &Path) -> Result<()> {
        std::fs::create_dir(dir).with_context(|| format!("create {}", dir.display()))?;
        self.dirs.push(dir.to_path_buf());
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for dir in self.dirs.iter().rev() {
            if let Err(e) = std::fs::remove_dir(dir) {
                eprintln!("{NAME}: cannot remove {}: {e}", dir.display());
            }
        }
    }
}

fn enable_controllers(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("cgroup.subtree_control"), "+cpu +memory")
        .with_context(|| format!("enable cpu and memory below {}", dir.display()))
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// One cycle over every Pod cgroup: its wall and thread CPU time, in ns.
fn one_cycle(
    readers: &mut CgroupFileReaders,
    host: &CgroupHost,
    index: &Arc<CgroupIndex>,
    expected: usize,
) -> Result<(u64, u64)> {
    let mut read = 0usize;
    let (cpu0, t0) = (thread_cpu(), Instant::now());
    readers.read_all(host, index, |files| {
        read += 1;
        std::hint::black_box(files);
    });
    let (wall, cpu) = (ns(t0.elapsed()), ns(thread_cpu().saturating_sub(cpu0)));
    if read != expected {
        bail!("read {read} of {expected} cgroups");
    }
    Ok((wall, cpu))
}

fn main() -> Result<()> {
    let args = BenchArgs::parse_args();
    if let Some(why) = headroom_bench::needs_root(NAME, "it creates cgroups") {
        bail!("{why}");
    }
    let host = CgroupHost::detect(Path::new(MOUNT)).context("detect the cgroup setup")?;
    let root = format!("headroom-bench-collector-{}", std::process::id());
    let scratch = Scratch::create(&host, &root)?;
    let index = Arc::new(CgroupIndex::build_with(
        &host.hierarchies(),
        std::slice::from_ref(&root),
    ));
    let pod_cgroups = index.iter().filter(|(_, i)| i.pod.is_some()).count();
    let expected = PODS * (1 + CONTAINERS.len()) * host.hierarchies().len();
    // The host's own Pods (if any) are read too, by both sides alike.
    if pod_cgroups < expected {
        bail!("the index holds {pod_cgroups} Pod cgroups, fewer than the {expected} created");
    }

    let mut ours = CgroupFileReaders::new(DEFAULT_MAX_OPEN_FILES);
    let mut peer = CgroupFileReaders::new(0);
    let cycles = if args.quick { 200 } else { 3_000 };
    let (mut ours_wall, mut peer_wall) = (new_histogram(), new_histogram());
    let (mut ours_cpu, mut peer_cpu) = (new_histogram(), new_histogram());
    let mut readings = [0usize; 2];
    // One untimed cycle each: the first opens ours' files.
    for (side, readers) in [&mut ours, &mut peer].into_iter().enumerate() {
        readers.read_all(&host, &index, |_| readings[side] += 1);
    }
    if readings != [pod_cgroups; 2] {
        bail!("a cycle read {readings:?} cgroups, not {pod_cgroups} each: the files are not readable");
    }
    for cycle in 0..cycles {
        // Alternating which side goes first, so neither always reads a cache the other warmed.
        let first_ours = cycle % 2 == 0;
        for side_is_ours in [first_ours, !first_ours] {
            let (readers, wall, cpu) = if side_is_ours {
                (&mut ours, &mut ours_wall, &mut ours_cpu)
            } else {
                (&mut peer, &mut peer_wall, &mut peer_cpu)
            };
            let (w, c) =
                one_cycle(readers, &host, &index, pod_cgroups).with_context(|| format!("cycle {cycle}"))?;
            wall.record(w.max(1))?;
            cpu.record(c.max(1))?;
        }
    }
    let open = ours.open_files();
    drop((ours, peer));
    drop(scratch);

    let mut c = Comparison::new(
        NAME,
        Summary::from_histogram("kept-open files (headroomd)", &ours_wall),
    )
    .with_peer(Summary::from_histogram("open-read-close each cycle", &peer_wall));
    c.details = vec![
        Summary::from_histogram("CPU per cycle: kept-open", &ours_cpu),
        Summary::from_histogram("CPU per cycle: open-read-close", &peer_cpu),
    ];
    c.notes = vec![
        format!(
            "one sample = one collector cycle over {pod_cgroups} Pod cgroups ({PODS} Pods x {} cgroups x {} hierarchies, cgroup {:?}), {cycles} cycles per side, alternating",
            1 + CONTAINERS.len(),
            host.hierarchies().len(),
            host.version
        ),
        format!("files kept open by headroomd's side: {open}"),
    ];
    c.extra = json!({ "pod_cgroups": pod_cgroups, "open_files": open, "cgroup_version": format!("{:?}", host.version) });
    print_comparison(&c);
    write_json(&args.out, &c)?;
    Ok(())
}
