//! `cargo xtask …`: everything a fresh machine needs, then the project's jobs.
//!
//! Every step is idempotent and prints one progress line (`xtask: …`), so a second run on a
//! set-up machine is fast and says what it skipped.
mod arm64;
mod fuzz;
mod helm;
mod k8s;
mod licenses;
mod lint;
mod node;
mod setup;
mod vm;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "headroom's developer and CI tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what is missing: rust-src, bpf-linker (against rustc's LLVM), Debian packages.
    Setup,
    /// Build the probes for bpfel-unknown-none into target/bpf/headroom-probes.o.
    BuildEbpf,
    /// Set up, build the probes, then build every binary in release mode and their man pages
    /// (target/man/).
    Build {
        /// Only what the image holds (headroomd, headroom-shim, headroomctl), with only the build's
        /// own tools (rust-src, bpf-linker): Containerfile's lean build stage, no test packages.
        #[arg(long)]
        image_programs: bool,
    },
    /// Build the binaries and write their man pages (NAME.1, NAME-SUBCOMMAND.1) into target/man/.
    Man,
    /// Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and the
    /// kubelet from their Go modules (`k8s/`) into target/k8s/<version>/, once per version.
    BuildK8s,
    /// Build the node's programs (containerd, its runc shim, ctr, crictl, crane, the CNI
    /// plugins) from their Go modules (`k8s/node/`) into target/node/<version>/.
    BuildNode,
    /// Build Helm from its Go module (`k8s/helm/`) into target/helm/<version>/, once per version.
    BuildHelm,
    /// Cross-build headroomd, headroom-shim, headroomctl and kubectl-headroom for arm64
    /// (aarch64-unknown-linux-gnu) into target/aarch64-unknown-linux-gnu/release/, and check
    /// them under qemu-user (AArch64 ELF, --version, headroomd serving what headroomctl reads).
    BuildArm64,
    /// headroom's image for linux/amd64 and linux/arm64 as one OCI index, written as an OCI
    /// image layout to target/image/headroom-oci and checked (each platform's programs run on
    /// the image's own libraries).
    Image,
    /// Boot Debian's 6.1 arm64 kernel in qemu-system-aarch64 (TCG) with the arm64 headroomd:
    /// its probes attach and see a throttled cgroup (`--write-docs`: the arm64 row in
    /// docs/kernels.md).
    VmArm64 {
        /// Also regenerate docs/kernels.md with the arm64 row.
        #[arg(long)]
        write_docs: bool,
    },
    /// Run the main job on its embedded default: the seed's tutorial, standalone, on this machine.
    /// With `--cluster`: the tutorial as kubectl commands against a real cluster built here (the
    /// control plane, the kubelet and containerd), once with upstream's preemption and once with
    /// headroom-shim (root).
    Demo {
        /// The tutorial against a real cluster on this machine instead of the standalone node.
        #[arg(long)]
        cluster: bool,
        /// Extra arguments for the demo.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run every test (privileged ones too when root), lints, and the benchmarks' quick mode.
    Test {
        /// Skip `cargo fmt --check` and `cargo clippy`.
        #[arg(long)]
        no_lint: bool,
        /// Skip the benchmarks' quick mode.
        #[arg(long)]
        no_bench: bool,
    },
    /// Run benchmarks (all, or one by name) and write target/bench/report.{md,json}.
    Bench {
        /// Benchmark names; none means all.
        names: Vec<String>,
        /// Run each briefly, as a smoke test.
        #[arg(long)]
        quick: bool,
    },
    /// Run the cargo-fuzz targets in fuzz/ (all, or those named), each for a bounded time.
    Fuzz {
        /// Target names; none means all.
        targets: Vec<String>,
        /// Seconds per target (at most, with --plateau).
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Stop a target once its coverage (edges: cov) has not grown for this many seconds of its CPU
        /// time, and print (and write to target/fuzz-plateau.md) what each reached.
        #[arg(long, value_name = "SECONDS")]
        plateau: Option<u64>,
        /// Run the targets as SCHED_IDLE (`chrt --idle 0`): they take only CPU nothing else
        /// wants, so a long run can go on beside builds and benchmarks.
        #[arg(long)]
        background: bool,
        /// After each target, replace the committed fuzz/corpora/TARGET with a set-cover merge
        /// (libFuzzer `-set_cover_merge=1`) of it, the run's corpus and the seeds: the smallest
        /// set with the same coverage, from which the next run, on any machine, resumes.
        #[arg(long)]
        keep_corpus: bool,
    },
    /// The kernel tests on the host and in a qemu guest with Debian's 6.1 kernel and pure
    /// cgroup v2; writes the kernel support table to target/kernels/kernels.md.
    VmTest {
        /// Also copy the table to docs/kernels.md.
        #[arg(long)]
        write_docs: bool,
        /// Only the guest (keeps the host's records from the last run).
        #[arg(long)]
        guest_only: bool,
    },
    /// The probes' map memory in qemu guests with many vCPUs (TCG): per-CPU growth and the
    /// 64-CPU, 500-cgroup figure, in target/kernels/maps.md.
    VmMaps {
        /// vCPU counts to boot.
        #[arg(long, value_delimiter = ',', default_values_t = [16, 64])]
        cpus: Vec<u32>,
    },
    /// Soak test: continuous preempting resizes on a standalone node (root), figures in
    /// target/bench/soak.json; `--cluster`: on the real node (kubelet, containerd, the control
    /// plane) with headroomd and the shim beside it, figures in target/bench/kube_soak.json.
    Soak {
        /// Length of the run.
        #[arg(long, default_value_t = 10.0)]
        minutes: f64,
        /// On the real node instead of the standalone one.
        #[arg(long)]
        cluster: bool,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = workspace_root();
    match cli.task {
        Task::Setup => setup::install_missing(),
        Task::BuildEbpf => {
            setup::install_missing()?;
            build_ebpf(&root).map(drop)
        }
        Task::BuildK8s => k8s::build(&root).map(drop),
        Task::BuildNode => node::build(&root).map(drop),
        Task::BuildHelm => helm::build(&root).map(drop),
        Task::BuildArm64 => arm64::build(&root).map(drop),
        Task::VmArm64 { write_docs } => arm64::vm_arm64(&root, write_docs),
        Task::Build { image_programs } if image_programs => {
            setup::build_tools()?;
            build_ebpf(&root)?;
            cargo(
                &root,
                &[
                    "build",
                    "--release",
                    "--locked",
                    "-p",
                    "headroom-daemon",
                    "--bin",
                    "headroomd",
                    "-p",
                    "headroom-shim",
                    "--bin",
                    "headroom-shim",
                    "-p",
                    "headroom-client",
                    "--bin",
                    "headroomctl",
                ],
            )
        }
        Task::Build { .. } => {
            setup::install_missing()?;
            build_ebpf(&root)?;
            cargo(&root, &["build", "--release", "--workspace", "--bins"])?;
            man_pages(&root)
        }
        Task::Man => {
            cargo(&root, &["build", "--release", "--workspace", "--bins"])?;
            man_pages(&root)
        }
        Task::Demo { cluster, args } => {
            setup::install_missing()?;
            build_ebpf(&root)?;
            cargo(&root, &["build", "--release", "--workspace", "--bins"])?;
            if cluster {
                return cluster_demo(&root, &args);
            }
            let mut demo = Command::new(root.join("target/release/headroom-shim"));
            demo.arg("demo").args(args);
            run(&mut demo)
        }
        Task::Test { no_lint, no_bench } => test(&root, no_lint, no_bench),
        Task::Image => {
            // The cross build sets up and builds the probes first.
            let arm64 = arm64::cross_build(&root)?;
            image(&root, &arm64)
        }
        Task::Bench { names, quick } => {
            setup::install_missing()?;
            build_ebpf(&root)?;
            bench(&root, &names, quick)
        }
        Task::Fuzz {
            targets,
            seconds,
            plateau,
            background,
            keep_corpus,
        } => fuzz::fuzz(
            &root,
            &targets,
            seconds,
            plateau,
            if background {
                fuzz::Priority::Background
            } else {
                fuzz::Priority::Normal
            },
            keep_corpus,
        ),
        Task::VmTest {
            write_docs,
            guest_only,
        } => {
            setup::install_missing()?;
            build_ebpf(&root)?;
            vm::kernel_tests(&root, guest_only, write_docs)
        }
        Task::VmMaps { cpus } => {
            setup::install_missing()?;
            build_ebpf(&root)?;
            vm::map_memory(&root, &cpus)
        }
        Task::Soak { minutes, cluster } => {
            setup::install_missing()?;
            build_ebpf(&root)?;
            if cluster {
                kube_soak(&root, &["--minutes", &minutes.to_string()])
            } else {
                soak(&root, &["--minutes", &minutes.to_string()])
            }
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Whether this process runs as root (the privileged tests need it).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

fn test(root: &Path, no_lint: bool, no_bench: bool) -> Result<()> {
    disk_report(root, "before the builds");
    setup::install_missing()?;
    build_ebpf(root)?;
    if !no_lint {
        progress("lint: cargo fmt --check");
        cargo(root, &["fmt", "--all", "--", "--check"])?;
        progress("lint: cargo clippy --all-targets -- -D warnings");
        cargo(
            root,
            &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
        )?;
        lint::kubernetes_shim(root)?;
        lint::other_workspaces(root)?;
        licenses::check(root)?;
    }
    // The real control plane the Kubernetes tests start (built once per version).
    let k8s_bin = k8s::build(root)?;
    // The real node beside it: containerd, crane's registry, the CNI plugins.
    let node_bin = node::build(root)?;
    // The chart tests' helm (helm lint, helm template; built once per version).
    let helm_bin = helm::build(root)?;
    if !no_lint {
        progress("lint: gofmt -l && go vet ./... (k8s/)");
        k8s::lint(root)?;
    }
    let mut test = Command::new("cargo");
    test.current_dir(root)
        .env("HEADROOM_K8S_BIN", &k8s_bin)
        .env("HEADROOM_NODE_BIN", &node_bin)
        .env("HEADROOM_HELM", &helm_bin)
        .args([
            "test",
            "--workspace",
            // Every failing test binary is reported, not only the first.
            "--no-fail-fast",
            "--",
            "--test-threads=1",
        ]);
    if is_root() {
        // On these machines the privileged tests must run: a skip becomes a failure.
        test.env("HEADROOM_REQUIRE_PRIVILEGED", "1");
        progress("test: running as root; privileged tests are required to run");
    } else {
        progress("test: not root; privileged tests will report SKIPPED with the reason");
    }
    // The kernel tests' probe-versus-kernel figures, for the kernel support table.
    let records = vm::host_records(root);
    let _ = std::fs::remove_file(&records);
    std::fs::create_dir_all(root.join("target/kernels"))?;
    test.env("HEADROOM_FIGURES", &records);
    disk_report(root, "before the tests");
    run(&mut test)?;
    progress("test: kernel tests in a Debian 6.1 guest (pure cgroup v2)");
    vm::kernel_tests(root, true, false)?;
    progress("test: the arm64 build, checked under qemu-user");
    let arm64_release = arm64::build(root)?;
    disk_report(root, "after the arm64 build");
    progress("test: the two-platform image (OCI layout), checked");
    image(root, &arm64_release)?;
    if !no_bench {
        bench(root, &[], true)?;
        progress("soak: 30 s short run");
        soak(root, &["--seconds", "30"])?;
        progress("soak --cluster: 60 s short run on the real node");
        kube_soak(root, &["--seconds", "60"])?;
    }
    disk_report(root, "at the end");
    Ok(())
}

/// The seed's tutorial against a real cluster on this machine, both preemption paths.
fn cluster_demo(root: &Path, args: &[String]) -> Result<()> {
    if !is_root() {
        bail!("demo --cluster runs a kubelet and containerd on this machine: it needs root");
    }
    let k8s_bin = k8s::build(root)?;
    let node_bin = node::build(root)?;
    let release = root.join("target/release");
    let mut demo = Command::new(release.join("headroom-cluster-demo"));
    demo.current_dir(root)
        .env("HEADROOM_K8S_BIN", &k8s_bin)
        .env("HEADROOM_NODE_BIN", &node_bin)
        .arg("--headroomd")
        .arg(release.join("headroomd"))
        .arg("--shim")
        .arg(release.join("headroom-shim"))
        .arg("--workspace")
        .arg(root)
        .args(args);
    run(&mut demo)
}

/// headroom's image for both platforms (`headroom-image`, the testkit's), from the amd64
/// release build and the arm64 cross build in `arm64_release`, into target/image/.
fn image(root: &Path, arm64_release: &Path) -> Result<()> {
    let node_bin = node::build(root)?;
    // The same package set as `bench`, so features unify the same way and nothing rebuilds.
    cargo(root, &["build", "--release", "--workspace", "--bins"])?;
    let release = root.join("target/release");
    let mut cmd = Command::new(release.join("headroom-image"));
    cmd.current_dir(root)
        .arg("--crane")
        .arg(node_bin.join("crane"))
        .arg("--amd64")
        .arg(&release)
        .arg("--arm64")
        .arg(arm64_release)
        .arg("--workspace")
        .arg(root)
        .arg("--out")
        .arg(root.join("target/image"));
    run(&mut cmd)
}

/// Builds in release and runs `target/release/soak ARGS --out target/bench`.
fn soak(root: &Path, args: &[&str]) -> Result<()> {
    // The same package set as `bench`, so features unify the same way and nothing rebuilds.
    cargo(root, &["build", "--release", "--workspace", "--bins"])?;
    let mut cmd = Command::new(root.join("target/release/soak"));
    cmd.current_dir(root).args(args).args(["--out", "target/bench"]);
    run(&mut cmd)
}

/// Builds the cluster's programs and this workspace in release, and runs
/// `target/release/kube_soak ARGS --out target/bench` on the real node.
fn kube_soak(root: &Path, args: &[&str]) -> Result<()> {
    let (k8s_bin, node_bin) = (k8s::build(root)?, node::build(root)?);
    cargo(root, &["build", "--release", "--workspace", "--bins"])?;
    let mut cmd = Command::new(root.join("target/release/kube_soak"));
    cmd.current_dir(root)
        .args(args)
        .args(["--out", "target/bench"])
        .env("HEADROOM_K8S_BIN", k8s_bin)
        .env("HEADROOM_NODE_BIN", node_bin);
    run(&mut cmd)
}

/// Benchmarks in the order a report reads them.
const BENCHMARKS: &[&str] = &[
    "probes",
    "pipeline",
    "collector",
    "events",
    "idle",
    "actuation",
    "shim",
    "e2e",
    "kube_preemption",
    "api_calls",
    "kube_node",
];

fn bench(root: &Path, names: &[String], quick: bool) -> Result<()> {
    let available: Vec<&str> = BENCHMARKS
        .iter()
        .copied()
        .filter(|name| root.join(format!("bench/src/bin/{name}.rs")).exists())
        .collect();
    let selected: Vec<&str> = if names.is_empty() {
        available.clone()
    } else {
        for name in names {
            if !BENCHMARKS.contains(&name.as_str()) {
                bail!("unknown benchmark `{name}`; known: {}", BENCHMARKS.join(", "));
            }
            if !available.contains(&name.as_str()) {
                bail!("benchmark `{name}` is not written yet (no bench/src/bin/{name}.rs)");
            }
        }
        names.iter().map(String::as_str).collect()
    };
    cargo(root, &["build", "--release", "--workspace", "--bins"])?;
    let out_dir = root.join("target/bench");
    std::fs::create_dir_all(&out_dir).with_context(|| format!("create {}", out_dir.display()))?;
    for name in &selected {
        progress(&format!("bench: {name}{}", if quick { " (quick)" } else { "" }));
        let mut cmd = Command::new(root.join(format!("target/release/{name}")));
        cmd.current_dir(root).arg("--out").arg(&out_dir);
        if quick {
            cmd.arg("--quick");
        }
        run(&mut cmd)?;
    }
    let mut report = Command::new(root.join("target/release/report"));
    report.current_dir(root).arg("--out").arg(&out_dir);
    if root.join("bench/src/bin/report.rs").exists() {
        run(&mut report)?;
    }
    Ok(())
}

/// Builds the probes and copies the object where `daemon/build.rs` looks for it.
fn build_ebpf(root: &Path) -> Result<PathBuf> {
    progress("build-ebpf: cargo build --release --target bpfel-unknown-none -Z build-std=core");
    let ebpf = root.join("ebpf");
    let target_dir = root.join("target/ebpf");
    let mut build = Command::new("cargo");
    build
        .current_dir(&ebpf)
        // Stable rustc with RUSTC_BOOTSTRAP: `-Z build-std` without depending on a nightly.
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target_dir)
        // The host workspace's flags (coverage, sanitizers) must not leak into BPF code.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("PATH", setup::path_with_cargo_bin())
        .args(["build", "--release", "--locked"]);
    run(&mut build)?;
    let built = target_dir.join("bpfel-unknown-none/release/headroom");
    let object = root.join("target/bpf/headroom-probes.o");
    std::fs::create_dir_all(root.join("target/bpf"))?;
    let fresh = std::fs::read(&built).with_context(|| format!("read {}", built.display()))?;
    if std::fs::read(&object).ok().as_deref() != Some(fresh.as_slice()) {
        std::fs::write(&object, &fresh).with_context(|| format!("write {}", object.display()))?;
    }
    progress(&format!(
        "build-ebpf: {} ({} bytes)",
        object.display(),
        fresh.len()
    ));
    Ok(object)
}

/// The binaries with a command line, each writing its own pages (`NAME man DIR`, hidden).
const MAN_PAGES_OF: &[&str] = &["headroomd", "headroom-shim", "headroomctl", "kubectl-headroom"];

/// `target/man/`: the release binaries' man pages (built before; never committed).
fn man_pages(root: &Path) -> Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let dir = target.join("man");
    for bin in MAN_PAGES_OF {
        progress(&format!("man: {bin} → {}", dir.display()));
        run(Command::new(target.join("release").join(bin))
            .arg("man")
            .arg(&dir))?;
    }
    Ok(())
}

fn cargo(root: &Path, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).args(args);
    run(&mut cmd)
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn progress(line: &str) {
    println!("xtask: {line}");
}

/// One progress line with the free space where `target/` lives: these machines share their disk,
/// and a run that fails for want of it should say so up front.
fn disk_report(root: &Path, when: &str) {
    // A fresh run left 18 GiB in target/ and put up to 7 GiB in Go's caches (README, "Disk").
    const FRESH_BUILD_NEEDS_GIB: f64 = 26.0;
    let out = Command::new("df").args(["-P", "-k"]).arg(root).output();
    let free_kib = out.ok().and_then(|out| {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .nth(1)?
            .split_whitespace()
            .nth(3)?
            .parse::<u64>()
            .ok()
    });
    let Some(kib) = free_kib else {
        return progress(&format!("disk {when}: df did not answer"));
    };
    let gib = gib_of(kib);
    let warning = if gib < FRESH_BUILD_NEEDS_GIB {
        format!(" WARNING: a fresh build needs about {FRESH_BUILD_NEEDS_GIB} GiB")
    } else {
        String::new()
    };
    // What target/ holds, biggest first: an ENOSPC later in the run names its cause here.
    let held = target_sizes(&root.join("target"))
        .iter()
        .take(6)
        .map(|(name, kib)| format!("{name} {:.1}", gib_of(*kib)))
        .collect::<Vec<_>>()
        .join(", ");
    progress(&format!(
        "disk {when}: {gib:.1} GiB free{warning}; target/ holds (GiB) {held}"
    ));
}

fn gib_of(kib: u64) -> f64 {
    kib as f64 / (1024.0 * 1024.0)
}

/// Each entry of `target` with its size in KiB (`du -sk`), biggest first.
fn target_sizes(target: &Path) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(target) else {
        return Vec::new();
    };
    let mut sizes: Vec<(String, u64)> = entries
        .flatten()
        .filter_map(|entry| {
            let out = Command::new("du").arg("-sk").arg(entry.path()).output().ok()?;
            let kib = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some((entry.file_name().to_string_lossy().into_owned(), kib))
        })
        .collect();
    sizes.sort_by_key(|(_, kib)| std::cmp::Reverse(*kib));
    sizes
}
