//! `cargo xtask vm-test`: the kernel tests in a qemu guest running Debian's 6.1 LTS kernel with
//! pure cgroup v2, the closest thing to a production node these machines can run (see
//! `shared/notes/real-kernels-in-vms.md`).
//!
//! The kernel package is fetched with `apt-get download` and unpacked with `dpkg-deb -x` under
//! `target/vm/` once; the initramfs (busybox-static, the test binaries, their shared libraries
//! and the virtio modules) and an ext4 scratch disk (for page-cache and reclaim tests) are built
//! afresh on every run. The guest's `/init` runs each test binary and frames its output on the
//! serial console with markers; the host reads the console, stops a guest that overruns its
//! time limit or panics, and fails with the console's tail. A guest that does not come back with
//! a verdict for every test is a failure, never a skip.
use std::{
    collections::HashSet,
    fs,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{progress, run};

/// The guest's architecture: amd64 (the kernel tests) or arm64 (`cargo xtask vm-arm64`). Each
/// has its own folder under `target/`, kernel package, qemu and console.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    /// Debian's cloud flavour of the 6.1 LTS kernel (bookworm ships only 6.1): BTF, all cgroup
    /// v2 controllers, virtio as modules. arm64's comes from the foreign architecture's index.
    fn kernel_packages(self) -> &'static str {
        match self {
            Self::Amd64 => "linux-image-6.1.0-*-cloud-amd64-unsigned",
            Self::Arm64 => "linux-image-6.1.0-*-cloud-arm64-unsigned:arm64",
        }
    }

    /// Where its kernel, initramfs and console log live, under `target/`.
    pub(crate) fn dir(self, root: &Path) -> PathBuf {
        root.join(match self {
            Self::Amd64 => "target/vm",
            Self::Arm64 => "target/vm-arm64",
        })
    }

    /// The system emulator and the Debian package that brings it.
    fn qemu(self) -> (&'static str, &'static str) {
        match self {
            Self::Amd64 => ("qemu-system-x86_64", "qemu-system-x86"),
            Self::Arm64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// Machine and CPU: the PC's default, or arm64's `virt` board with every feature TCG has.
    fn machine(self) -> &'static [&'static str] {
        match self {
            Self::Amd64 => &["-cpu", "max"],
            Self::Arm64 => &["-machine", "virt", "-cpu", "max"],
        }
    }

    /// The serial console: the PC's UART, the `virt` board's PL011.
    fn console(self) -> &'static str {
        match self {
            Self::Amd64 => "ttyS0",
            Self::Arm64 => "ttyAMA0",
        }
    }
}

/// Modules the guest needs for its scratch disk; their dependencies are resolved from the
/// modules' own `depends=` fields.
const DISK_MODULES: &[&str] = &["virtio_pci", "virtio_blk"];

/// Prefix of every line the guest's `/init` prints for the host.
const MARK: &str = "@@headroom-vm";

/// Console lines after which the guest cannot recover: stop it at once rather than wait for the
/// time limit.
const FATAL: &[&str] = &["Kernel panic", "BUG: soft lockup", "detected stalls on CPUs"];

/// Console lines shown when a guest run fails.
const TAIL_LINES: usize = 60;

/// One test binary to run in the guest.
pub(crate) struct GuestTest {
    /// Short name, used in markers and in the report.
    pub name: String,
    /// The binary on the host.
    pub binary: PathBuf,
    /// Arguments inside the guest.
    pub args: Vec<String>,
    /// Extended regular expressions its output must match (each on some line), besides exit
    /// status 0.
    pub expect: Vec<String>,
    /// Ones it must not match.
    pub reject: Vec<String>,
    /// Carried on the scratch disk rather than in the initramfs: with an 80 MiB binary in the
    /// initramfs, the probe tests hung after the OOM test (cause not found; rootfs is shmem).
    pub on_disk: bool,
    /// Programs the test starts by their host path (`CARGO_BIN_EXE_*`): carried on the scratch
    /// disk and linked from the same absolute path in the guest.
    pub companions: Vec<PathBuf>,
}

/// What came back from a guest run.
pub(crate) struct GuestRun {
    /// `uname -r` of the guest.
    pub release: String,
    /// Every console line (also in `target/vm/console.log`).
    pub console: Vec<String>,
    /// Wall time from qemu's start to its exit.
    pub elapsed: Duration,
}

/// The unpacked kernel package.
struct Kernel {
    package: String,
    vmlinuz: PathBuf,
    modules: PathBuf,
}

/// Runs `tests` in a 6.1 guest with `cpus` vCPUs; fails unless every one of them exits 0 inside it.
pub(crate) fn vm_test(root: &Path, tests: &[GuestTest], limit: Duration, cpus: u32) -> Result<GuestRun> {
    vm_test_on(root, Arch::Amd64, tests, limit, cpus)
}

/// [`vm_test`] in a guest of `arch`: arm64's runs under `qemu-system-aarch64` (TCG) with
/// arm64's busybox and the tests' arm64 shared libraries.
pub(crate) fn vm_test_on(
    root: &Path,
    arch: Arch,
    tests: &[GuestTest],
    limit: Duration,
    cpus: u32,
) -> Result<GuestRun> {
    let vm_dir = arch.dir(root);
    fs::create_dir_all(&vm_dir).with_context(|| format!("create {}", vm_dir.display()))?;
    ensure_tools(arch)?;
    let kernel = kernel(&vm_dir, arch)?;
    let initramfs = initramfs(&vm_dir, &kernel, tests, arch)?;
    let disk = scratch_disk(&vm_dir)?;
    let result = boot(&vm_dir, &kernel, &initramfs, &disk, tests, limit, cpus, arch);
    // Made afresh each run; what the tests wrote to it is of no use afterwards.
    let _ = fs::remove_file(&disk);
    result
}

/// qemu, mkfs.ext4 and busybox: installed through apt when missing, or a failure naming what
/// is missing.
fn ensure_tools(arch: Arch) -> Result<()> {
    for (tool, package) in [
        arch.qemu(),
        ("mkfs.ext4", "e2fsprogs"),
        ("busybox", "busybox-static"),
        ("strip", "binutils"),
    ] {
        if which(tool).is_some() {
            continue;
        }
        progress(&format!("vm: {tool} missing; apt-get install {package}"));
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", package])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install() {
            progress("vm: apt-get update");
            let _ = Command::new("apt-get").arg("update").status();
            if !install() {
                bail!(
                    "{tool} is missing and `apt-get install {package}` failed: install {package} (needs root)"
                );
            }
        }
        if which(tool).is_none() {
            bail!("{tool} is still missing after installing {package}");
        }
    }
    Ok(())
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
}

/// The newest package matching [`Arch::kernel_packages`] that the apt index can install.
fn newest_kernel_package(arch: Arch) -> Result<Option<String>> {
    let out = Command::new("apt-cache")
        .args(["policy", arch.kernel_packages()])
        .output()
        .context("run apt-cache (is this a Debian machine?)")?;
    Ok(newest_candidate(&String::from_utf8_lossy(&out.stdout)))
}

/// From `apt-cache policy` text: the package with the highest ABI number that has a candidate.
fn newest_candidate(text: &str) -> Option<String> {
    let mut current = None;
    let mut best: Option<(u32, String)> = None;
    for line in text.lines() {
        if !line.starts_with(' ') {
            current = line.strip_suffix(':').map(str::to_owned);
        } else if let Some(candidate) = line.trim().strip_prefix("Candidate: ")
            && candidate != "(none)"
            && let Some(name) = &current
            && let Some(abi) = name
                .strip_prefix("linux-image-6.1.0-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|abi| abi.parse::<u32>().ok())
            && best.as_ref().is_none_or(|(b, _)| abi > *b)
        {
            best = Some((abi, name.clone()));
        }
    }
    best.map(|(_, name)| name)
}

/// The folder a package is unpacked in: its name without the `:arch` qualifier.
fn package_folder(package: &str) -> &str {
    package.split(':').next().unwrap_or(package)
}

/// Adds dpkg's foreign architecture `arm64` (and refreshes apt's index) when missing, so that
/// apt can download arm64 packages. Nothing arm64 is installed on the host.
pub(crate) fn ensure_arm64_index() -> Result<()> {
    let foreign = Command::new("dpkg")
        .arg("--print-foreign-architectures")
        .output()
        .context("run dpkg (is this a Debian machine?)")?;
    if String::from_utf8_lossy(&foreign.stdout)
        .lines()
        .any(|l| l.trim() == "arm64")
    {
        return Ok(());
    }
    progress("vm-arm64: dpkg --add-architecture arm64 && apt-get update (for apt-get download)");
    run(Command::new("dpkg").args(["--add-architecture", "arm64"]))?;
    run(Command::new("apt-get").args(["update", "-qq"]))
}

/// The kernel under `<vm_dir>/kernel/<package>/`, fetched on first use.
fn kernel(vm_dir: &Path, arch: Arch) -> Result<Kernel> {
    let kernels = vm_dir.join("kernel");
    let chosen = vm_dir.join("kernel.txt");
    if let Ok(package) = fs::read_to_string(&chosen) {
        let package = package.trim().to_owned();
        if let Ok(kernel) = unpacked(&kernels.join(package_folder(&package)), &package) {
            progress(&format!("vm: kernel {package} (cached in {})", kernels.display()));
            return Ok(kernel);
        }
    }
    if arch == Arch::Arm64 {
        ensure_arm64_index()?;
    }
    let wanted = arch.kernel_packages();
    let package = match newest_kernel_package(arch)? {
        Some(package) => package,
        None => {
            progress(&format!("vm: apt-get update (no {wanted} in the apt index)"));
            run(Command::new("apt-get").arg("update"))?;
            newest_kernel_package(arch)?
                .with_context(|| format!("apt offers no package matching {wanted}"))?
        }
    };
    let download = vm_dir.join("download");
    let _ = fs::remove_dir_all(&download);
    fs::create_dir_all(&download)?;
    progress(&format!("vm: apt-get download {package}"));
    run(Command::new("apt-get")
        .arg("download")
        .arg(&package)
        .current_dir(&download))?;
    let deb = fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .with_context(|| {
            format!(
                "apt-get download {package} left no .deb in {}",
                download.display()
            )
        })?;
    let target = kernels.join(package_folder(&package));
    let staging = kernels.join(format!("{}.partial", package_folder(&package)));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging)?;
    progress(&format!("vm: dpkg-deb -x {}", deb.display()));
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&staging))?;
    let _ = fs::remove_dir_all(&target);
    // Renamed only when complete, so an interrupted unpack is never taken for a cached kernel.
    fs::rename(&staging, &target)?;
    let _ = fs::remove_dir_all(&download);
    fs::write(&chosen, format!("{package}\n"))?;
    unpacked(&target, &package)
}

fn unpacked(dir: &Path, package: &str) -> Result<Kernel> {
    let vmlinuz = fs::read_dir(dir.join("boot"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .with_context(|| format!("no boot/vmlinuz-* in {}", dir.display()))?;
    let vmlinuz = bootable_image(&vmlinuz)?;
    let modules = fs::read_dir(dir.join("lib/modules"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .with_context(|| format!("no lib/modules/<release> in {}", dir.display()))?;
    Ok(Kernel {
        package: package.to_owned(),
        vmlinuz,
        modules,
    })
}

/// What qemu's `-kernel` boots. amd64's bzImage and arm64's `Image` (Debian's arm64 vmlinuz
/// of 6.1 is the plain `Image`, a PE/COFF file with `ARMd` at 0x38) as they are; a
/// gzip-compressed arm64 vmlinuz, which qemu does not unpack for arm64, is unpacked once next to
/// it as `Image-<release>`.
fn bootable_image(vmlinuz: &Path) -> Result<PathBuf> {
    let mut magic = [0u8; 2];
    {
        use std::io::Read;
        fs::File::open(vmlinuz)
            .and_then(|mut f| f.read_exact(&mut magic))
            .with_context(|| format!("read {}", vmlinuz.display()))?;
    }
    if magic != [0x1f, 0x8b] {
        return Ok(vmlinuz.to_path_buf());
    }
    let name = vmlinuz
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("vmlinuz")
        .replacen("vmlinuz", "Image", 1);
    let image = vmlinuz.with_file_name(name);
    if !image.exists() {
        progress(&format!(
            "vm: gzip -dc {} (qemu boots arm64's Image unpacked)",
            vmlinuz.display()
        ));
        let partial = vmlinuz.with_extension("unpacking");
        let out = fs::File::create(&partial)?;
        run(Command::new("gzip").arg("-dc").arg(vmlinuz).stdout(out))?;
        fs::rename(&partial, &image)?;
    }
    Ok(image)
}

/// Every `.ko` under `dir`, by module name.
fn module_files(dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            module_files(&path, out)?;
        } else if let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".ko"))
        {
            out.push((name.replace('-', "_"), path));
        }
    }
    Ok(())
}

/// The `depends=` field of a module's `.modinfo`.
fn module_depends(file: &Path) -> Result<Vec<String>> {
    let bytes = fs::read(file).with_context(|| format!("read {}", file.display()))?;
    let needle = b"depends=";
    let Some(start) = bytes.windows(needle.len()).position(|w| w == needle) else {
        return Ok(Vec::new());
    };
    let rest = &bytes[start + needle.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    Ok(String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.replace('-', "_"))
        .collect())
}

/// `wanted` and their dependencies, each after what it depends on.
fn modules_in_load_order(kernel: &Kernel, wanted: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let mut all = Vec::new();
    module_files(&kernel.modules, &mut all)?;
    let mut order: Vec<(String, PathBuf)> = Vec::new();
    let mut visiting = HashSet::new();
    fn visit(
        name: &str,
        all: &[(String, PathBuf)],
        order: &mut Vec<(String, PathBuf)>,
        visiting: &mut HashSet<String>,
    ) -> Result<()> {
        if order.iter().any(|(n, _)| n == name) || !visiting.insert(name.to_owned()) {
            return Ok(());
        }
        let (_, file) = all
            .iter()
            .find(|(n, _)| n == name)
            .with_context(|| format!("module {name} is not in the kernel package"))?;
        for dep in module_depends(file)? {
            visit(&dep, all, order, visiting)?;
        }
        order.push((name.to_owned(), file.clone()));
        Ok(())
    }
    for name in wanted {
        visit(name, &all, &mut order, &mut visiting)?;
    }
    Ok(order)
}

/// The shared libraries `binary` loads (`ldd`), by absolute path.
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .with_context(|| format!("ldd {}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && !text.contains("not a dynamic executable") {
        bail!(
            "ldd {} failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        if line.contains("not found") {
            bail!(
                "{}: shared library missing on this host: {}",
                binary.display(),
                line.trim()
            );
        }
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`.
        let path = line
            .split("=>")
            .last()
            .and_then(|s| s.split_whitespace().next())
            .filter(|p| p.starts_with('/'));
        if let Some(path) = path {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

/// The shared libraries an arm64 `binary` loads, with their own, from the cross libc's
/// sysroot (`/usr/aarch64-linux-gnu`, what the cross build linked against): `(file in the
/// sysroot, path in the guest)`. The program interpreter goes where the binary names it
/// (`/lib/ld-linux-aarch64.so.1`), the others into `/lib`, which the loader always searches.
/// A file that is not a dynamic ELF (a script) needs none. Host `readelf` reads any ELF.
fn arm64_shared_libraries(binary: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    let sysroot = Path::new(crate::arm64::SYSROOT).join("lib");
    let readelf = |file: &Path, flag: &str| -> Result<Option<String>> {
        let out = Command::new("readelf")
            .arg(flag)
            .arg("-W")
            .arg(file)
            .output()
            .with_context(|| format!("readelf {flag} {}", file.display()))?;
        Ok(out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned()))
    };
    let Some(headers) = readelf(binary, "-l")? else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    if let Some(interpreter) = headers
        .lines()
        .find_map(|l| l.split_once("[Requesting program interpreter: "))
        .and_then(|(_, rest)| rest.split(']').next())
    {
        let interpreter = PathBuf::from(interpreter);
        let name = interpreter
            .file_name()
            .with_context(|| format!("interpreter {}", interpreter.display()))?;
        found.push((sysroot.join(name), interpreter.clone()));
    }
    let mut queue = vec![binary.to_path_buf()];
    let mut seen = HashSet::new();
    while let Some(file) = queue.pop() {
        let dynamic = readelf(&file, "-d")?.unwrap_or_default();
        for name in dynamic
            .lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| l.split_once("Shared library: [").map(|(_, r)| r))
            .filter_map(|r| r.split(']').next())
        {
            if !seen.insert(name.to_owned()) {
                continue;
            }
            let host = sysroot.join(name);
            if !host.exists() {
                bail!(
                    "{} needs {name}, which {} lacks (libc6-dev-arm64-cross)",
                    binary.display(),
                    sysroot.display()
                );
            }
            if found.iter().all(|(h, _)| *h != host) {
                found.push((host.clone(), Path::new("/lib").join(name)));
            }
            queue.push(host);
        }
    }
    Ok(found)
}

/// busybox for arm64 (Debian's `busybox-static:arm64`), downloaded and unpacked with
/// `dpkg-deb -x` under `<vm_dir>/busybox/` once: never installed over the host's.
fn arm64_busybox(vm_dir: &Path) -> Result<PathBuf> {
    let dir = vm_dir.join("busybox");
    let binary = dir.join("bin/busybox");
    if binary.is_file() {
        return Ok(binary);
    }
    ensure_arm64_index()?;
    let download = vm_dir.join("busybox-download");
    let _ = fs::remove_dir_all(&download);
    fs::create_dir_all(&download)?;
    progress("vm-arm64: apt-get download busybox-static:arm64");
    run(Command::new("apt-get")
        .args(["download", "busybox-static:arm64"])
        .current_dir(&download))?;
    let deb = fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download busybox-static:arm64 left no .deb")?;
    let staging = vm_dir.join("busybox.partial");
    let _ = fs::remove_dir_all(&staging);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&staging))?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&staging, &dir)?;
    let _ = fs::remove_dir_all(&download);
    if !binary.is_file() {
        bail!("busybox-static:arm64 has no bin/busybox");
    }
    Ok(binary)
}

/// Copies `from` to `root/<from's absolute path>`, following symlinks.
fn copy_to_same_path(root: &Path, from: &Path) -> Result<()> {
    let relative = from.strip_prefix("/").unwrap_or(from);
    let to = root.join(relative);
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(from, &to).with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The guest's `/init`: mounts, pure cgroup v2 with the cpu and memory controllers for
/// children, the scratch disk on /var/tmp (where the tests put their page-cache files), then
/// each test between markers.
fn init_script(modules: &[(String, PathBuf)], tests: &[GuestTest], arch: Arch) -> String {
    let mut s = String::from("#!/bin/sh\n");
    if arch == Arch::Arm64 {
        // arm64's busybox cannot run on the host to list its applets: it links them itself.
        s.push_str("/bin/busybox --install -s /bin\n");
    }
    s.push_str(
        r#"export PATH=/bin HOME=/root TMPDIR=/var/tmp RUST_BACKTRACE=1
# The guest exists to run these: a skip is a failure.
export HEADROOM_REQUIRE_PRIVILEGED=1 HEADROOM_REQUIRE_CGROUP_V2=1
fail() { echo "@@headroom-vm setup-failed $*"; poweroff -f; }
mount -t proc proc /proc || fail mount proc
mount -t sysfs sysfs /sys || fail mount sysfs
mount -t devtmpfs devtmpfs /dev || fail mount devtmpfs
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail mount cgroup2
echo "+cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control || fail enable cpu and memory controllers
"#,
    );
    for (name, _) in modules {
        s.push_str(&format!("insmod /lib/modules/{name}.ko || fail insmod {name}\n"));
    }
    s.push_str(
        r#"i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
mount -t ext4 /dev/vda /var/tmp || fail mount the ext4 scratch disk on /var/tmp
echo "@@headroom-vm kernel release=$(uname -r) cgroup=v2 controllers=$(cat /sys/fs/cgroup/cgroup.subtree_control | tr ' ' ,) cpus=$(nproc)"
"#,
    );
    for test in tests {
        let args: Vec<String> = test.args.iter().map(|a| shell_quote(a)).collect();
        let name = &test.name;
        s.push_str(&format!(
            "echo \"@@headroom-vm begin {name}\"\nset -o pipefail\n{}/tests/{name} {} 2>&1 | tee /tmp/{name}.out\nrc=$?\nset +o pipefail\n",
            if test.on_disk { "/var/tmp" } else { "" },
            args.join(" ")
        ));
        let plain = |pattern: &str| pattern.replace(['"', '$', '`', '\\'], ".");
        for pattern in &test.expect {
            s.push_str(&format!(
                "grep -Eq {} /tmp/{name}.out || {{ echo \"@@headroom-vm {name} output lacks {}\"; [ $rc -eq 0 ] && rc=98; }}\n",
                shell_quote(pattern),
                plain(pattern)
            ));
        }
        for pattern in &test.reject {
            s.push_str(&format!(
                "grep -Eq {} /tmp/{name}.out && {{ echo \"@@headroom-vm {name} output has {}\"; [ $rc -eq 0 ] && rc=98; }}\n",
                shell_quote(pattern),
                plain(pattern)
            ));
        }
        s.push_str(&format!("echo \"@@headroom-vm end {name} rc=$rc\"\n"));
    }
    s.push_str("sync\necho \"@@headroom-vm done\"\npoweroff -f\n");
    s
}

/// Builds `target/vm/initramfs.cpio` from `target/vm/initramfs/`.
fn initramfs(vm_dir: &Path, kernel: &Kernel, tests: &[GuestTest], arch: Arch) -> Result<PathBuf> {
    let dir = vm_dir.join("initramfs");
    let _ = fs::remove_dir_all(&dir);
    for sub in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "var/tmp",
        "root",
        "run",
        "tests",
        "lib/modules",
        "etc",
    ] {
        fs::create_dir_all(dir.join(sub))?;
    }
    // The host's busybox packs the image; the guest gets its architecture's.
    let busybox = which("busybox").context("busybox missing")?;
    if arch == Arch::Arm64 {
        fs::copy(arm64_busybox(vm_dir)?, dir.join("bin/busybox"))?;
        std::os::unix::fs::symlink("busybox", dir.join("bin/sh"))?;
    } else {
        fs::copy(&busybox, dir.join("bin/busybox"))?;
        let list = Command::new(&busybox)
            .arg("--list")
            .output()
            .context("busybox --list")?;
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            let applet = applet.trim();
            if !applet.is_empty() && applet != "busybox" && !applet.contains('/') {
                std::os::unix::fs::symlink("busybox", dir.join("bin").join(applet))?;
            }
        }
    }
    let mut libraries = HashSet::new();
    let mut cross_libraries = HashSet::new();
    let mut add_libraries = |binary: &Path| -> Result<()> {
        if arch == Arch::Arm64 {
            cross_libraries.extend(arm64_shared_libraries(binary)?);
        } else {
            libraries.extend(shared_libraries(binary)?);
        }
        Ok(())
    };
    let on_disk = vm_dir.join("disk-root");
    let _ = fs::remove_dir_all(&on_disk);
    fs::create_dir_all(on_disk.join("tests"))?;
    for test in tests {
        let to = if test.on_disk { &on_disk } else { &dir }
            .join("tests")
            .join(&test.name);
        // Debug info is most of a test binary's size, and the guest unpacks it into RAM.
        let stripped = Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&to)
            .arg(&test.binary)
            .status()
            .is_ok_and(|s| s.success());
        if !stripped {
            fs::copy(&test.binary, &to)
                .with_context(|| format!("copy {} into the initramfs", test.binary.display()))?;
        }
        add_libraries(&test.binary)?;
        for program in &test.companions {
            let name = program
                .file_name()
                .with_context(|| format!("companion {} has no file name", program.display()))?;
            fs::create_dir_all(on_disk.join("companions"))?;
            let stripped = Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(on_disk.join("companions").join(name))
                .arg(program)
                .status()
                .is_ok_and(|s| s.success());
            if !stripped {
                fs::copy(program, on_disk.join("companions").join(name))
                    .with_context(|| format!("copy {} onto the scratch disk", program.display()))?;
            }
            let link = dir.join(program.strip_prefix("/").unwrap_or(program));
            if let Some(parent) = link.parent() {
                fs::create_dir_all(parent)?;
            }
            std::os::unix::fs::symlink(Path::new("/var/tmp/companions").join(name), &link)?;
            add_libraries(program)?;
        }
    }
    for library in &libraries {
        copy_to_same_path(&dir, library)?;
    }
    for (host, guest) in &cross_libraries {
        let to = dir.join(guest.strip_prefix("/").unwrap_or(guest));
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(host, &to).with_context(|| format!("copy {} to {}", host.display(), to.display()))?;
    }
    let modules = modules_in_load_order(kernel, DISK_MODULES)?;
    for (name, file) in &modules {
        fs::copy(file, dir.join("lib/modules").join(format!("{name}.ko")))?;
    }
    let init = dir.join("init");
    fs::write(&init, init_script(&modules, tests, arch))?;
    fs::set_permissions(&init, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let image = vm_dir.join("initramfs.cpio");
    let file = fs::File::create(&image)?;
    let mut find = Command::new("find")
        .arg(".")
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .context("run find")?;
    let find_out = find.stdout.take().context("find stdout")?;
    let cpio = Command::new(&busybox)
        .args(["cpio", "-o", "-H", "newc"])
        .current_dir(&dir)
        .stdin(find_out)
        .stdout(file)
        .stderr(Stdio::null())
        .status()
        .context("run busybox cpio")?;
    let found = find.wait()?;
    if !cpio.success() || !found.success() {
        bail!("packing {} failed (find {found}, cpio {cpio})", image.display());
    }
    // The staging tree is a copy of what the image holds: not kept (disk space is shared).
    let _ = fs::remove_dir_all(&dir);
    let size = fs::metadata(&image)?.len();
    progress(&format!(
        "vm: initramfs {} ({} MiB: busybox, {} test binaries, {} shared libraries, {} modules)",
        image.display(),
        size >> 20,
        tests.len(),
        libraries.len() + cross_libraries.len(),
        modules.len()
    ));
    Ok(image)
}

/// A fresh, sparse 1 GiB ext4 image: the guest's page cache needs a real block device (files
/// in the initramfs live in shmem and never make memcg reclaim).
fn scratch_disk(vm_dir: &Path) -> Result<PathBuf> {
    let disk = vm_dir.join("scratch.ext4");
    let _ = fs::remove_file(&disk);
    fs::File::create(&disk)?.set_len(1 << 30)?;
    let mkfs = which("mkfs.ext4").context("mkfs.ext4 missing")?;
    // `-d`: the binaries marked `on_disk`, written into the image without mounting it.
    let contents = vm_dir.join("disk-root");
    run(Command::new(mkfs)
        .args(["-q", "-F", "-d"])
        .arg(&contents)
        .arg(&disk))?;
    let _ = fs::remove_dir_all(&contents);
    progress(&format!(
        "vm: scratch disk {} (ext4, 1 GiB sparse)",
        disk.display()
    ));
    Ok(disk)
}

/// Boots the guest and checks that every test came back with exit status 0.
#[allow(clippy::too_many_arguments)]
fn boot(
    vm_dir: &Path,
    kernel: &Kernel,
    initramfs: &Path,
    disk: &Path,
    tests: &[GuestTest],
    limit: Duration,
    cpus: u32,
    arch: Arch,
) -> Result<GuestRun> {
    let (emulator, _) = arch.qemu();
    let mut qemu = Command::new(emulator);
    let cpus = cpus.to_string();
    // KVM hangs on these machines (see the notes): TCG, one host thread per vCPU.
    qemu.args(["-accel", "tcg,thread=multi"])
        .args(arch.machine())
        .args(["-smp", &cpus, "-m", "2048"])
        .args(["-nographic", "-no-reboot", "-nic", "none"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initramfs)
        .arg("-drive")
        .arg(format!("file={},format=raw,if=virtio", disk.display()))
        .arg("-append")
        .arg(format!("console={} panic=-1 quiet", arch.console()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    progress(&format!(
        "vm: booting {} under qemu TCG ({cpus} vCPUs, 2 GiB, pure cgroup v2), limit {} s",
        kernel.package,
        limit.as_secs()
    ));
    let started = Instant::now();
    let mut child = qemu.spawn().with_context(|| format!("start {emulator}"))?;
    let (send, receive) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let send = send.clone();
        readers.push(std::thread::spawn(move || forward_lines(stdout, &send)));
    }
    if let Some(stderr) = child.stderr.take() {
        let send = send.clone();
        readers.push(std::thread::spawn(move || forward_lines(stderr, &send)));
    }
    drop(send);
    let log_path = vm_dir.join("console.log");
    let mut log = fs::File::create(&log_path)?;
    let mut console = Vec::new();
    let deadline = started + limit;
    let mut stopped_because = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            stopped_because = Some(format!("the guest overran its {} s time limit", limit.as_secs()));
            break;
        }
        match receive.recv_timeout(deadline - now) {
            Ok(line) => {
                let _ = writeln!(log, "{line}");
                println!("  guest| {line}");
                if let Some(fatal) = FATAL.iter().find(|f| line.contains(**f)) {
                    console.push(line);
                    stopped_because = Some(format!("the guest kernel reported `{fatal}`"));
                    break;
                }
                console.push(line);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            // Both pipes closed: qemu exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if stopped_because.is_some() {
        let _ = child.kill();
    }
    let status = child.wait().context("wait for qemu")?;
    for reader in readers {
        let _ = reader.join();
    }
    // Lines that arrived after the stop still belong in the log.
    for line in receive.try_iter() {
        let _ = writeln!(log, "{line}");
        console.push(line);
    }
    let elapsed = started.elapsed();
    let tail = || -> String {
        let from = console.len().saturating_sub(TAIL_LINES);
        let mut out = format!(
            "console tail ({}; full log in {}):\n",
            kernel.package,
            log_path.display()
        );
        for line in &console[from..] {
            out.push_str("  | ");
            out.push_str(line);
            out.push('\n');
        }
        out
    };
    if let Some(reason) = stopped_because {
        bail!(
            "VM test failed: {reason} after {:.0} s\n{}",
            elapsed.as_secs_f64(),
            tail()
        );
    }
    if let Some(setup) = console
        .iter()
        .find_map(|l| l.split_once("@@headroom-vm setup-failed ").map(|(_, r)| r))
    {
        bail!("VM test failed: the guest could not {setup}\n{}", tail());
    }
    let mut failures = Vec::new();
    for test in tests {
        let end = format!("{MARK} end {} rc=", test.name);
        match console
            .iter()
            .find_map(|l| l.split_once(&end).map(|(_, rc)| rc.trim().to_owned()))
        {
            Some(rc) if rc == "0" => {}
            Some(rc) => failures.push(format!("{} exited with status {rc}", test.name)),
            None => failures.push(format!("{} never finished", test.name)),
        }
    }
    let done = console.iter().any(|l| l.contains(&format!("{MARK} done")));
    if !done {
        failures.push("the guest did not reach the end of its /init".into());
    }
    if !status.success() {
        failures.push(format!("qemu exited with {status}"));
    }
    if !failures.is_empty() {
        bail!(
            "VM test failed on {}: {}\n{}",
            kernel.package,
            failures.join("; "),
            tail()
        );
    }
    let release = console
        .iter()
        .find_map(|l| l.split_once("@@headroom-vm kernel release=").map(|(_, r)| r))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("unknown")
        .to_owned();
    progress(&format!(
        "vm: {} tests passed in the {release} guest ({:.0} s)",
        tests.len(),
        elapsed.as_secs_f64()
    ));
    Ok(GuestRun {
        release,
        console,
        elapsed,
    })
}

fn forward_lines(pipe: impl std::io::Read, send: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                // The serial console speaks CRLF and the BIOS paints escape sequences.
                let line = String::from_utf8_lossy(&buf);
                let line: String = line
                    .trim_end_matches(['\n', '\r'])
                    .chars()
                    .filter(|c| !c.is_control() || *c == '\t')
                    .collect();
                if send.send(line).is_err() {
                    return;
                }
            }
        }
    }
}

/// Builds the workspace's tests (`cargo test --workspace --no-run`: the feature set of
/// `cargo xtask test`'s own run, so nothing is rebuilt) and returns the binaries of `wanted`
/// (package, integration test) in order.
pub(crate) fn test_binaries(root: &Path, wanted: &[(&str, &str)]) -> Result<Vec<PathBuf>> {
    let args = ["test", "--workspace", "--no-run"];
    let out = Command::new("cargo")
        .current_dir(root)
        .args(args)
        .arg("--message-format=json")
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo test --no-run")?;
    if !out.status.success() {
        // The compiler's messages went to stdout as JSON: build again for readable ones.
        let _ = Command::new("cargo").current_dir(root).args(args).status();
        bail!("cargo test --workspace --no-run failed");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    wanted
        .iter()
        .map(|(package, test)| {
            // One JSON object per line; the test target's artifact carries `"executable"`.
            let name = format!("\"name\":\"{test}\"");
            let id = format!("#{package}@");
            text.lines()
                .filter(|l| {
                    l.contains("\"reason\":\"compiler-artifact\"")
                        && l.contains("\"kind\":[\"test\"]")
                        && l.contains(&name)
                        && l.contains(&id)
                })
                .find_map(|l| {
                    let (_, rest) = l.split_once("\"executable\":\"")?;
                    let (path, _) = rest.split_once('"')?;
                    Some(PathBuf::from(path))
                })
                .with_context(|| format!("cargo did not report the executable of {package}'s test {test}"))
        })
        .collect()
}

/// Prefixes of the record lines the kernel tests print (and append to `$HEADROOM_FIGURES`):
/// `headroom-kernel test=… release=… mode=… throttle=… runq=… attached=a,b refused=c`,
/// `headroom-figure test=… probe=… kernel=… tolerance=… what=<free text>`,
/// `headroom-passed test=…`.
const RECORD_KERNEL: &str = "headroom-kernel ";
const RECORD_FIGURE: &str = "headroom-figure ";
const RECORD_PASSED: &str = "headroom-passed ";

/// One probe-versus-kernel comparison.
struct Figure {
    test: String,
    what: String,
    probe: String,
    kernel: String,
    tolerance: String,
}

/// What the kernel tests reported on one kernel.
#[derive(Default)]
pub(crate) struct KernelReport {
    /// Where it ran ("host", "qemu guest").
    pub place: String,
    release: String,
    mode: String,
    throttle: String,
    runq: String,
    attached: Vec<String>,
    refused: Vec<String>,
    started: Vec<String>,
    passed: Vec<String>,
    figures: Vec<Figure>,
    /// libtest's summary per guest test binary (`probes_kernel: ok. 6 passed; 0 failed`).
    binaries: Vec<String>,
}

fn fields(record: &str) -> impl Iterator<Item = (&str, &str)> {
    record.split_whitespace().filter_map(|f| f.split_once('='))
}

impl KernelReport {
    /// Collects the records in `lines` (console or records file; anything else is ignored).
    pub(crate) fn parse<'a>(place: &str, lines: impl IntoIterator<Item = &'a str>) -> Self {
        let mut report = Self {
            place: place.to_owned(),
            ..Self::default()
        };
        let mut binary = String::new();
        for line in lines {
            if let Some((_, name)) = line.split_once(&format!("{MARK} begin ")) {
                binary = name.trim().to_owned();
            } else if let Some((_, end)) = line.split_once(&format!("{MARK} end "))
                && let Some((name, rc)) = end.trim().split_once(" rc=")
                && !report
                    .binaries
                    .iter()
                    .any(|b| b.starts_with(&format!("{name}: ")))
            {
                // Not a libtest binary (the demo): its exit status and output checks.
                report.binaries.push(format!("{name}: exit {rc}"));
            } else if let Some((_, summary)) = line.split_once("test result: ")
                && !binary.is_empty()
            {
                let summary = summary.split("; 0 ignored").next().unwrap_or(summary);
                report.binaries.push(format!("{binary}: {summary}"));
            }
            if let Some((_, record)) = line.split_once(RECORD_KERNEL) {
                for (key, value) in fields(record) {
                    let list = || {
                        value
                            .split(',')
                            .filter(|v| !v.is_empty())
                            .map(str::to_owned)
                            .collect()
                    };
                    match key {
                        "test" if !report.started.iter().any(|t| t == value) => {
                            report.started.push(value.to_owned())
                        }
                        "release" => report.release = value.to_owned(),
                        "mode" => report.mode = value.to_owned(),
                        "throttle" => report.throttle = value.to_owned(),
                        "runq" => report.runq = value.to_owned(),
                        "attached" => report.attached = list(),
                        "refused" => report.refused = list(),
                        _ => {}
                    }
                }
            } else if let Some((_, record)) = line.split_once(RECORD_FIGURE) {
                // `what` is free text, last on the line.
                let (record, what) = record.split_once(" what=").unwrap_or((record, ""));
                let mut figure = Figure {
                    test: String::new(),
                    what: what.trim().to_owned(),
                    probe: String::new(),
                    kernel: String::new(),
                    tolerance: String::new(),
                };
                for (key, value) in fields(record) {
                    let value = value.to_owned();
                    match key {
                        "test" => figure.test = value,
                        "probe" => figure.probe = value,
                        "kernel" => figure.kernel = value,
                        "tolerance" => figure.tolerance = value.replace('_', " "),
                        _ => {}
                    }
                }
                report.figures.push(figure);
            } else if let Some((_, record)) = line.split_once(RECORD_PASSED)
                && let Some((_, test)) = fields(record).find(|(k, _)| *k == "test")
                && !report.passed.iter().any(|t| t == test)
            {
                report.passed.push(test.to_owned());
            }
        }
        report
    }

    /// Whether any kernel test reported here.
    pub(crate) fn is_empty(&self) -> bool {
        self.started.is_empty() && self.figures.is_empty()
    }
}

/// The kernel support table (Markdown), from the tests' own records.
pub(crate) fn render_table(reports: &[KernelReport]) -> String {
    let mut out = String::from(
        "| kernel | where | cgroup mode | throttle model | run-queue model | probes attached | probes refused | kernel tests passed | test binaries |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let passed: Vec<&str> = r
            .started
            .iter()
            .map(|t| if r.passed.contains(t) { t.as_str() } else { "" })
            .filter(|t| !t.is_empty())
            .collect();
        let failed: Vec<&str> = r
            .started
            .iter()
            .filter(|t| !r.passed.contains(t))
            .map(String::as_str)
            .collect();
        let mut tests = format!("{}/{}: {}", passed.len(), r.started.len(), passed.join(", "));
        if !failed.is_empty() {
            tests.push_str(&format!("; **not passed**: {}", failed.join(", ")));
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} |\n",
            or_dash(&r.release),
            r.place,
            or_dash(&r.mode),
            or_dash(&r.throttle),
            or_dash(&r.runq),
            r.attached.len(),
            r.attached.join(", "),
            if r.refused.is_empty() {
                "none".to_owned()
            } else {
                r.refused.join(", ")
            },
            tests,
            if r.binaries.is_empty() {
                "probes_kernel".to_owned()
            } else {
                r.binaries.join("; ")
            }
        ));
    }
    out.push_str("\n| kernel | test | comparison | probes | kernel's own figure | tolerance |\n|---|---|---|---|---|---|\n");
    for r in reports {
        for f in &r.figures {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                or_dash(&r.release),
                f.test,
                f.what,
                f.probe,
                f.kernel,
                f.tolerance
            ));
        }
    }
    out
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "–" } else { s }
}

/// The guest's time limit: the whole VM part must stay within 10 minutes of `cargo xtask test`.
pub(crate) const GUEST_LIMIT: Duration = Duration::from_secs(420);

/// Where the host's kernel tests append their records (`$HEADROOM_FIGURES`).
pub(crate) fn host_records(root: &Path) -> PathBuf {
    root.join("target/kernels/host.records")
}

/// The test binaries run in the guest, built if needed.
fn guest_tests(root: &Path) -> Result<Vec<GuestTest>> {
    progress(
        "vm: cargo test --workspace --no-run (probes_kernel, actuator's v2_real, cgroupfs's stats_real, shim's standalone_give_way)",
    );
    let binaries = test_binaries(
        root,
        &[
            ("headroom-daemon", "probes_kernel"),
            ("headroom-actuator", "v2_real"),
            ("headroom-shim", "standalone_give_way"),
            ("headroom-cgroupfs", "stats_real"),
        ],
    )?;
    let (probes, actuator, give_way, stats) = (
        binaries[0].clone(),
        binaries[1].clone(),
        binaries[2].clone(),
        binaries[3].clone(),
    );
    let args: Vec<String> = vec!["--test-threads=1".into(), "--nocapture".into()];
    let test = |name: &str, binary: PathBuf, args: Vec<String>| GuestTest {
        name: name.into(),
        binary,
        args,
        expect: Vec::new(),
        reject: Vec::new(),
        on_disk: false,
        companions: Vec::new(),
    };
    // The demo is the standalone backend, a feature the Kubernetes-only build leaves out.
    progress("vm: cargo build -p headroom-shim --bin headroom-shim --features standalone (the demo)");
    run(Command::new("cargo").current_dir(root).args([
        "build",
        "-p",
        "headroom-shim",
        "--bin",
        "headroom-shim",
        "--features",
        "standalone",
    ]))?;
    Ok(vec![
        GuestTest {
            // Ends with the resizer's cpu.max at 6 CPUs and the victim's cgroup gone.
            expect: vec![
                "resizer cpu limit: .*cpu.max = 600000 100000".into(),
                "victim cgroup: .* removed".into(),
            ],
            reject: vec!["STILL PRESENT".into()],
            on_disk: true,
            ..test(
                "headroom-shim",
                root.join("target/debug/headroom-shim"),
                vec!["demo".into()],
            )
        },
        GuestTest {
            // headroomd itself, for the test that serves with a BTF lacking a field.
            companions: vec![root.join("target/debug/headroomd")],
            // `--include-ignored`: the tests that exhaust the machine's memory run here only.
            ..test(
                "probes_kernel",
                probes,
                [args.as_slice(), &["--include-ignored".into()]].concat(),
            )
        },
        test("actuator_v2_real", actuator, args.clone()),
        // The collector's kept-open cgroup files on v2.
        test("cgroupfs_stats_real", stats, args.clone()),
        GuestTest {
            // Shrink before evict on v2 cgroups: the seed gives way, a Pod without the
            // annotation is evicted. The memory cases need python3, which the guest lacks.
            on_disk: true,
            ..test(
                "standalone_give_way",
                give_way,
                [
                    args.as_slice(),
                    &["the_seeds".into(), "without_the_annotation".into()],
                ]
                .concat(),
            )
        },
    ])
}

/// Where the amd64 guest's rows come from.
const AMD64_GUEST: &str = "qemu guest (TCG)";
/// Where the arm64 guest's row comes from.
pub(crate) const ARM64_GUEST: &str = "qemu guest arm64 (TCG, headroomd observe)";

/// The last amd64 guest's console, as `kernel_tests` keeps it.
fn amd64_guest_console(root: &Path) -> PathBuf {
    root.join("target/kernels/guest-amd64.console")
}

/// Where `cargo xtask vm-arm64` writes its guest's records (the kernel tests' record format).
pub(crate) fn arm64_records(root: &Path) -> PathBuf {
    root.join("target/kernels/arm64.records")
}

/// The kernel support table and its page: the host's row, the amd64 guest's, and the arm64
/// guest's when `cargo xtask vm-arm64` has left its records.
fn kernel_page(root: &Path, host: KernelReport, guest: KernelReport) -> (String, String) {
    let mut reports = Vec::new();
    if host.is_empty() {
        progress("kernel tests: no host records (not root?): the table shows the guest only");
    } else {
        reports.push(host);
    }
    reports.push(guest);
    let arm64 = fs::read_to_string(arm64_records(root))
        .map(|text| KernelReport::parse(ARM64_GUEST, text.lines()))
        .ok()
        .filter(|r| !r.is_empty());
    let arm64_text = if arm64.is_some() {
        "\n\nThe arm64 row is `cargo xtask vm-arm64`'s: Debian's 6.1 cloud kernel for arm64 booted\n\
         in `qemu-system-aarch64` (`virt`, `-cpu max`, TCG), the cross-built arm64 headroomd\n\
         running `observe` while a busy loop runs under a 10% `cpu.max` quota; its figure is the\n\
         probes' throttle episodes next to that cgroup's `cpu.stat` `nr_throttled`. The probe\n\
         tests themselves (`probes_kernel`) run on amd64 only. `cargo xtask vm-arm64\n\
         --write-docs` reruns it and rewrites this page from the last runs' records."
    } else {
        ""
    };
    reports.extend(arm64);
    let table = render_table(&reports);
    let page = format!(
        "# Kernel support\n\n\
         Generated by `cargo xtask test` (or `cargo xtask vm-test --write-docs`, which also copies it\n\
         here) from the records the kernel tests print (`daemon/tests/probes_kernel.rs`): on the\n\
         host, and in a qemu guest booting Debian's 6.1 LTS cloud kernel with pure cgroup v2\n\
         (`xtask/src/vm.rs`). Do not edit by hand; regenerate with\n\
         `cargo xtask vm-test --write-docs` as root.\n\n\
         The guest runs under TCG (about 7x slower than the host); the comparisons are against\n\
         the guest kernel's own accounting (`cpu.stat`, `memory.stat`, `memory.events`,\n\
         `/proc/<pid>/schedstat`), so they are fair, but absolute timings are not.{arm64_text}\n\n{table}"
    );
    (table, page)
}

/// Regenerates the kernel support page from the records the last runs left (the host's, the
/// amd64 guest's console, the arm64 guest's) into `target/kernels/kernels.md`, and with
/// `write_docs` into `docs/kernels.md`; used by `cargo xtask vm-arm64 --write-docs`.
pub(crate) fn rewrite_kernel_page(root: &Path, write_docs: bool) -> Result<()> {
    let host_text = fs::read_to_string(host_records(root)).unwrap_or_default();
    let host = KernelReport::parse("host", host_text.lines());
    // The console `kernel_tests` kept, or the amd64 guest's own log if it is a kernel-tests run.
    let kept = fs::read_to_string(amd64_guest_console(root)).ok().or_else(|| {
        fs::read_to_string(root.join("target/vm/console.log"))
            .ok()
            .filter(|log| log.contains(&format!("{MARK} begin actuator_v2_real")))
    });
    let Some(console) = kept else {
        bail!(
            "no amd64 guest records to rebuild the kernel page from ({} or a kernel-tests console in target/vm/): run `cargo xtask vm-test` first",
            amd64_guest_console(root).display()
        );
    };
    let guest = KernelReport::parse(AMD64_GUEST, console.lines());
    if guest.is_empty() {
        bail!("the kept amd64 guest console holds no kernel-test records");
    }
    let (table, page) = kernel_page(root, host, guest);
    fs::create_dir_all(root.join("target/kernels"))?;
    fs::write(root.join("target/kernels/kernels.md"), &page)?;
    println!("{table}");
    if write_docs {
        fs::write(root.join("docs/kernels.md"), &page)?;
        progress("vm-arm64: docs/kernels.md regenerated with the arm64 row");
    }
    Ok(())
}

/// The programs the amd64 guest's row of `docs/kernels.md` lists as attached on 6.1: what the
/// arm64 guest must attach too.
pub(crate) fn amd64_guest_programs(root: &Path) -> Result<Vec<String>> {
    let page = root.join("docs/kernels.md");
    let text = fs::read_to_string(&page).with_context(|| format!("read {}", page.display()))?;
    programs_of_row(&text, "-cloud-amd64", AMD64_GUEST)
        .with_context(|| format!("{} has no amd64 guest row listing its probes", page.display()))
}

/// From the kernel table: the "probes attached" cell (`9 (a, b, …)`) of the first row whose
/// kernel ends in `kernel_suffix` and whose place is `place`.
fn programs_of_row(text: &str, kernel_suffix: &str, place: &str) -> Option<Vec<String>> {
    text.lines().find_map(|line| {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // ["", kernel, where, mode, throttle, runq, attached, refused, …]
        if cells.len() < 8 || !cells[1].ends_with(kernel_suffix) || cells[2] != place {
            return None;
        }
        let (count, list) = cells[6].split_once(" (")?;
        let list: Vec<String> = list
            .trim_end_matches(')')
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        (count.parse::<usize>().ok()? == list.len()).then_some(list)
    })
}

/// Runs the kernel tests on the host (unless `host_done`: `cargo xtask test` already ran them
/// with `$HEADROOM_FIGURES` set) and in the 6.1 guest, then writes the kernel support table to
/// `target/kernels/kernels.md` (and `docs/kernels.md` with `write_docs`).
pub(crate) fn kernel_tests(root: &Path, host_done: bool, write_docs: bool) -> Result<()> {
    let records = host_records(root);
    // A host failure is reported after the guest has run too: both kernels' figures count.
    let mut host_result = Ok(());
    if !host_done {
        let _ = fs::remove_file(&records);
        if let Some(parent) = records.parent() {
            fs::create_dir_all(parent)?;
        }
        let binary = test_binaries(root, &[("headroom-daemon", "probes_kernel")])?.remove(0);
        progress("kernel tests: probes_kernel on the host");
        host_result = run(Command::new(&binary)
            .arg("--test-threads=1")
            .env("HEADROOM_REQUIRE_PRIVILEGED", "1")
            .env("HEADROOM_FIGURES", &records));
    }
    let host_text = fs::read_to_string(&records).unwrap_or_default();
    let host = KernelReport::parse("host", host_text.lines());
    let tests = guest_tests(root)?;
    let started = Instant::now();
    // `HEADROOM_VM_LIMIT_SECS` shortens the limit, to check that a hang is cut off.
    let limit = std::env::var("HEADROOM_VM_LIMIT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(GUEST_LIMIT, Duration::from_secs);
    let guest_result = vm_test(root, &tests, limit, 2);
    let guest_console = match &guest_result {
        Ok(run) => run.console.join("\n"),
        Err(_) => fs::read_to_string(root.join("target/vm/console.log")).unwrap_or_default(),
    };
    // Kept for `cargo xtask vm-arm64 --write-docs`, which regenerates the page without
    // booting this guest again.
    fs::create_dir_all(root.join("target/kernels"))?;
    fs::write(amd64_guest_console(root), &guest_console)?;
    let guest = KernelReport::parse(AMD64_GUEST, guest_console.lines());
    let (table, page) = kernel_page(root, host, guest);
    let out = root.join("target/kernels/kernels.md");
    fs::write(&out, &page)?;
    println!("{table}");
    progress(&format!(
        "kernel tests: table in {} (VM part {:.0} s)",
        out.display(),
        started.elapsed().as_secs_f64()
    ));
    host_result.context("the kernel tests failed on the host")?;
    let run = guest_result?;
    progress(&format!(
        "kernel tests: passed on the host and in the {} guest ({:.0} s in qemu)",
        run.release,
        run.elapsed.as_secs_f64()
    ));
    if write_docs {
        fs::write(root.join("docs/kernels.md"), &page)?;
        progress("kernel tests: docs/kernels.md updated");
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn newest_installable_kernel_package() {
        let policy = "linux-image-6.1.0-9-cloud-amd64-unsigned:\n  Installed: (none)\n  Candidate: 6.1.27-1\n\
                      linux-image-6.1.0-57-cloud-amd64-unsigned:\n  Installed: (none)\n  Candidate: 6.1.192-3\n\
                      linux-image-6.1.0-58-cloud-amd64-unsigned:\n  Installed: (none)\n  Candidate: (none)\n";
        assert_eq!(
            newest_candidate(policy).as_deref(),
            Some("linux-image-6.1.0-57-cloud-amd64-unsigned")
        );
        assert_eq!(newest_candidate(""), None);
    }

    #[test]
    fn records_make_the_table() {
        let console = [
            "@@headroom-vm begin probes_kernel",
            "test a ... headroom-kernel test=throttling release=6.1.0-57 mode=v2 throttle=CfsRqThrottled runq=SchedInfo attached=sched_switch,mark refused=",
            "headroom-figure test=throttling probe=61 kernel=60 tolerance=5% what=throttle episodes vs nr_throttled",
            "headroom-passed test=throttling",
            "headroom-kernel test=oom release=6.1.0-57 mode=v2 throttle=CfsRqThrottled runq=SchedInfo attached=sched_switch,mark refused=",
            "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured",
        ];
        let report = KernelReport::parse("guest", console);
        let table = render_table(&[report]);
        assert!(
            table.contains(
                "| 6.1.0-57 | guest | v2 | CfsRqThrottled | SchedInfo | 2 (sched_switch, mark) | none |"
            ),
            "{table}"
        );
        // `oom` started but never passed: named as such.
        assert!(table.contains("1/2: throttling; **not passed**: oom"), "{table}");
        assert!(table.contains("probes_kernel: ok. 2 passed; 0 failed"), "{table}");
        assert!(
            table.contains("| 6.1.0-57 | throttling | throttle episodes vs nr_throttled | 61 | 60 | 5% |"),
            "{table}"
        );
        assert!(KernelReport::parse("host", ["unrelated"]).is_empty());
    }

    #[test]
    fn the_amd64_guests_programs_are_read_from_the_table() {
        let page = "| kernel | where | cgroup mode | throttle model | run-queue model | probes attached | probes refused | kernel tests passed | test binaries |\n\
                    |---|---|---|---|---|---|---|---|---|\n\
                    | 6.18.44 | host | v1-hybrid | TaskThrottled | SchedInfo | 3 (a, b, c) | none | x | y |\n\
                    | 6.1.0-57-cloud-amd64 | qemu guest (TCG) | v2 | CfsRqThrottled | SchedInfo | 2 (sched_switch, cgroup_mkdir) | none | x | y |\n";
        assert_eq!(
            programs_of_row(page, "-cloud-amd64", AMD64_GUEST).unwrap(),
            ["sched_switch", "cgroup_mkdir"]
        );
        assert_eq!(programs_of_row(page, "-cloud-arm64", AMD64_GUEST), None);
        // A count that disagrees with its list is not taken.
        let wrong = page.replace("| 2 (sched_switch", "| 3 (sched_switch");
        assert_eq!(programs_of_row(&wrong, "-cloud-amd64", AMD64_GUEST), None);
    }

    #[test]
    fn arch_specific_guest_settings() {
        assert_eq!(
            package_folder("linux-image-6.1.0-57-cloud-arm64-unsigned:arm64"),
            "linux-image-6.1.0-57-cloud-arm64-unsigned"
        );
        assert_eq!(
            package_folder("linux-image-6.1.0-57-cloud-amd64-unsigned"),
            "linux-image-6.1.0-57-cloud-amd64-unsigned"
        );
        assert_eq!(Arch::Amd64.console(), "ttyS0");
        assert_eq!(Arch::Arm64.console(), "ttyAMA0");
        assert_eq!(Arch::Arm64.machine(), ["-machine", "virt", "-cpu", "max"]);
        // amd64's init is as it was: no applet installation, which its busybox list replaces.
        assert!(!init_script(&[], &[], Arch::Amd64).contains("--install"));
        assert!(
            init_script(&[], &[], Arch::Arm64).starts_with("#!/bin/sh\n/bin/busybox --install -s /bin\n")
        );
        // The newest candidate of the foreign architecture's index keeps its qualifier.
        let policy = "linux-image-6.1.0-56-cloud-arm64-unsigned:arm64:\n  Candidate: 6.1.170-1\n\
                      linux-image-6.1.0-57-cloud-arm64-unsigned:arm64:\n  Candidate: 6.1.192-3\n";
        assert_eq!(
            newest_candidate(policy).as_deref(),
            Some("linux-image-6.1.0-57-cloud-arm64-unsigned:arm64")
        );
    }

    #[test]
    fn a_gzipped_vmlinuz_is_unpacked_once_and_a_plain_image_is_booted_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("vmlinuz-6.1.0-57-cloud-arm64");
        fs::write(&plain, b"MZ\x40\xfa plain Image").unwrap();
        assert_eq!(bootable_image(&plain).unwrap(), plain);
        let gzipped = dir.path().join("vmlinuz-6.1.0-58-cloud-arm64");
        let out = Command::new("gzip").arg("-c").arg(&plain).output().unwrap();
        fs::write(&gzipped, out.stdout).unwrap();
        let image = bootable_image(&gzipped).unwrap();
        assert_eq!(image, dir.path().join("Image-6.1.0-58-cloud-arm64"));
        assert_eq!(fs::read(&image).unwrap(), b"MZ\x40\xfa plain Image");
        // Cached: a second call does not unpack again.
        fs::write(&image, b"kept").unwrap();
        assert_eq!(fs::read(bootable_image(&gzipped).unwrap()).unwrap(), b"kept");
    }

    #[test]
    fn module_dependencies_from_modinfo() {
        let dir = std::env::temp_dir().join(format!("headroom-vm-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("virtio_blk.ko");
        fs::write(
            &file,
            b"\x7fELF...license=GPL\0depends=virtio,virtio_ring\0intree=Y\0",
        )
        .unwrap();
        assert_eq!(module_depends(&file).unwrap(), ["virtio", "virtio_ring"]);
        fs::write(&file, b"\x7fELF...depends=\0").unwrap();
        assert!(module_depends(&file).unwrap().is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}

/// The probes' map memory on many-CPU guests (`-smp` 16 and 64, TCG): `probes_kernel`'s
/// map-sizing test in each, its kernel figures (fdinfo `memlock`) compared, the per-CPU growth
/// printed and written to `target/kernels/maps.md`.
pub(crate) fn map_memory(root: &Path, cpu_counts: &[u32]) -> Result<()> {
    let binary = test_binaries(root, &[("headroom-daemon", "probes_kernel")])?.remove(0);
    let mut rows: Vec<MapTotals> = Vec::new();
    for &cpus in cpu_counts {
        progress(&format!("vm maps: probes in a {cpus}-vCPU guest"));
        let test = GuestTest {
            name: "probes_kernel".into(),
            binary: binary.clone(),
            args: [
                "--exact",
                "maps_are_sized_at_load_and_their_memory_is_the_kernels",
                "--test-threads=1",
                "--nocapture",
            ]
            .map(String::from)
            .to_vec(),
            expect: vec!["headroom-map-total ".into()],
            reject: Vec::new(),
            on_disk: false,
            companions: Vec::new(),
        };
        let run = vm_test(root, &[test], GUEST_LIMIT, cpus)?;
        let totals = run
            .console
            .iter()
            .find_map(|l| MapTotals::parse(l))
            .with_context(|| format!("the {cpus}-vCPU guest printed no headroom-map-total record"))?;
        if totals.cpus != u64::from(cpus) {
            bail!("the {cpus}-vCPU guest's probes saw {} CPUs", totals.cpus);
        }
        rows.push(totals);
    }
    let table = render_map_table(&rows);
    print!("{table}");
    let out = root.join("target/kernels/maps.md");
    fs::create_dir_all(out.parent().unwrap_or(root))?;
    fs::write(&out, &table).with_context(|| format!("write {}", out.display()))?;
    progress(&format!("vm maps: table in {}", out.display()));
    Ok(())
}

/// One `headroom-map-total` record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MapTotals {
    pub cpus: u64,
    /// Kernel memory of every map: sized for 512 and 1,024 cgroups, and as headroomd sizes
    /// them for a node with 500 cgroups.
    pub at_512: u64,
    pub at_1024: u64,
    pub node_500: u64,
    pub growth_per_cgroup_and_cpu: u64,
}

impl MapTotals {
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let (_, record) = line.split_once("headroom-map-total ")?;
        let value = |name: &str| {
            fields(record).find_map(|(k, v)| (k == name).then(|| v.parse::<u64>().ok()).flatten())
        };
        Some(Self {
            cpus: value("cpus")?,
            at_512: value("bytes_512")?,
            at_1024: value("bytes_1024")?,
            node_500: value("bytes_node_500")?,
            growth_per_cgroup_and_cpu: value("growth_per_cgroup_and_cpu")?,
        })
    }
}

/// The issue's target: all probe maps within 32 MiB on a 64-CPU node with 500 cgroups.
const MAP_TARGET_BYTES: u64 = 32 << 20;

fn render_map_table(rows: &[MapTotals]) -> String {
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20));
    let mut out = String::from(
        "| vCPUs | maps at 512 cgroups | at 1,024 | node with 500 cgroups (as sized at load) | growth per cgroup and CPU |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} B |\n",
            r.cpus,
            mib(r.at_512),
            mib(r.at_1024),
            mib(r.node_500),
            r.growth_per_cgroup_and_cpu
        ));
    }
    // Per-CPU growth between the two largest guests, and the fixed part it leaves.
    if let [.., a, b] = rows
        && b.cpus > a.cpus
    {
        let per_cpu = b.node_500.saturating_sub(a.node_500) / (b.cpus - a.cpus);
        let fixed = a.node_500.saturating_sub(per_cpu * a.cpus);
        out.push_str(&format!(
            "\nnode with 500 cgroups: {} per CPU + {} fixed (from the {}- and {}-vCPU guests)\n",
            mib(per_cpu),
            mib(fixed),
            a.cpus,
            b.cpus
        ));
    }
    if let Some(r) = rows.iter().find(|r| r.cpus == 64) {
        out.push_str(&format!(
            "target: all maps <= 32 MiB on 64 CPUs with 500 cgroups: {} (measured {})\n",
            if r.node_500 <= MAP_TARGET_BYTES {
                "MET"
            } else {
                "NOT MET"
            },
            mib(r.node_500)
        ));
    }
    out
}
