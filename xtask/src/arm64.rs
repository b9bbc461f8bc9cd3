//! `cargo xtask build-arm64`: headroomd, headroom-shim, headroomctl and kubectl-headroom for
//! `aarch64-unknown-linux-gnu`, cross-built here (rustup's target, Debian's cross gcc as the
//! linker and for ring's C), with the same probe object (`bpfel` bytecode, arch-neutral, CO-RE).
//!
//! Then it checks what it built: every binary is an AArch64 ELF, and under qemu-user each one
//! runs (`--version` names this commit) and headroomd serves gRPC on a Unix socket that the
//! arm64 headroomctl reads (`health`, `version`, `headroom`). qemu-user does not implement
//! `bpf(2)` (ENOSYS), so there headroomd runs with `--probes if-available` and must say so.
//!
//! The probes are loaded by a real arm64 kernel (`cargo xtask vm-arm64`, also the last step of
//! this job's check): Debian's 6.1 cloud kernel for arm64 boots in `qemu-system-aarch64`
//! (`virt`, `-cpu max`, TCG; `xtask/src/vm.rs` with `Arch::Arm64`), with arm64's busybox, the
//! arm64 headroomd and its arm64 shared libraries. In the guest, with pure cgroup v2,
//! `headroomd observe` runs while a busy loop runs under a 10% `cpu.max` quota in a child
//! cgroup: every program the amd64 6.1 guest attaches must attach (or the log names the one
//! refused and why), and the throttled cgroup must show throttle episodes, printed next to its
//! `cpu.stat` `nr_throttled`.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{
    build_ebpf, progress, run, setup,
    vm::{self, Arch, GuestTest},
};

pub(crate) const TARGET: &str = "aarch64-unknown-linux-gnu";
const PROGRAMS: &[(&str, &str)] = &[
    ("headroom-daemon", "headroomd"),
    ("headroom-shim", "headroom-shim"),
    ("headroom-client", "headroomctl"),
    ("kubectl-headroom", "kubectl-headroom"),
];
/// What the cross build and its check need: (command, Debian package).
const PACKAGES: &[(&str, &str)] = &[
    ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
    ("/usr/aarch64-linux-gnu/lib/libc.so.6", "libc6-dev-arm64-cross"),
    // strip and readelf for arm64 ELF files (the image's layer, `cargo xtask image`).
    ("aarch64-linux-gnu-readelf", "binutils-aarch64-linux-gnu"),
    ("qemu-aarch64-static", "qemu-user-static"),
];
/// Where the cross libc lives (qemu-user's `-L`).
pub(crate) const SYSROOT: &str = "/usr/aarch64-linux-gnu";
/// ELF `e_machine` of AArch64.
const EM_AARCH64: u16 = 183;

fn rust_target() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("rustup target list")?;
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        progress(&format!("arm64: rust target {TARGET} present"));
        return Ok(());
    }
    progress(&format!("arm64: rustup target add {TARGET}"));
    run(Command::new("rustup").args(["target", "add", TARGET]))
}

pub(crate) fn setup() -> Result<()> {
    setup::install_missing()?;
    rust_target()?;
    setup::debian(PACKAGES, "arm64")
}

/// Cross-builds the four programs in release and checks them: under qemu-user, then the
/// probes in an arm64 guest; their folder.
pub(crate) fn build(root: &Path) -> Result<PathBuf> {
    let dir = cross_build(root)?;
    check(&dir)?;
    guest(root, &dir)?;
    Ok(dir)
}

/// Cross-builds the four programs in release; their folder.
pub(crate) fn cross_build(root: &Path) -> Result<PathBuf> {
    setup()?;
    build_ebpf(root)?;
    progress(&format!("arm64: cargo build --release --target {TARGET}"));
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(root)
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
            "aarch64-linux-gnu-gcc",
        )
        .env("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc")
        .env("AR_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-ar")
        .args(["build", "--release", "--target", TARGET]);
    for (package, bin) in PROGRAMS {
        cargo.args(["-p", package, "--bin", bin]);
    }
    run(&mut cargo)?;
    Ok(root.join("target").join(TARGET).join("release"))
}

/// `cargo xtask vm-arm64`: the cross build, then its probes in an arm64 guest; with
/// `write_docs`, the kernel support page regenerated with the arm64 row.
pub(crate) fn vm_arm64(root: &Path, write_docs: bool) -> Result<()> {
    let dir = cross_build(root)?;
    guest(root, &dir)?;
    vm::rewrite_kernel_page(root, write_docs)
}

/// The arm64 guest's time limit: a boot takes seconds and headroomd's run about half a minute
/// under TCG; a guest that overruns this is a hang.
const GUEST_LIMIT: Duration = Duration::from_secs(240);

/// Name of the guest check, in markers and records.
const GUEST_TEST: &str = "headroomd_observe";

/// The guest's script: `headroomd observe` with its log in JSON, and, once the probes are
/// loaded, a busy loop under a 10% quota in a fresh child cgroup for 3 s, so that its whole
/// life is inside the probes' window. Every line the host reads carries a `@@arm64` prefix.
const GUEST_SCRIPT: &str = r#"#!/bin/sh
headroomd="$1"
cg=/sys/fs/cgroup/headroom-busy
"$headroomd" --version | sed 's/^/@@arm64 version /'
"$headroomd" --log-format json observe --duration 6 --json >/tmp/observe.json 2>/tmp/observe.log &
pid=$!
i=0
while ! grep -q '"probes loaded"' /tmp/observe.log; do
    kill -0 $pid 2>/dev/null || break
    [ $i -ge 1200 ] && break
    sleep 0.1; i=$((i+1))
done
mkdir $cg && echo "10000 100000" > $cg/cpu.max || echo "@@arm64 no child cgroup with cpu.max"
sh -c "echo \$\$ > $cg/cgroup.procs && while :; do :; done" &
busy=$!
sleep 3
kill $busy
wait $busy 2>/dev/null
wait $pid
rc=$?
sed 's/^/@@arm64 log /' /tmp/observe.log
sed 's/^/@@arm64 observe /' /tmp/observe.json
echo "@@arm64 cpu.stat $(tr ' \n' '= ' < $cg/cpu.stat)"
echo "@@arm64 headroomd rc=$rc"
exit $rc
"#;

/// What the guest reported.
#[derive(Debug, Default, PartialEq)]
struct GuestReport {
    /// `attached` of headroomd's "probes loaded" line.
    attached: Option<usize>,
    /// The cgroup mode headroomd found (`V2` logged; `v2` as the kernel table writes it).
    mode: String,
    throttle_model: String,
    runq_model: String,
    /// (program, why) of each "probe not attached" line.
    refused: Vec<(String, String)>,
    /// The busy cgroup's throttle episodes and throttled time, from `observe --json`.
    episodes: Option<u64>,
    throttled_ns: Option<u64>,
    /// The busy cgroup's `cpu.stat`.
    nr_throttled: Option<u64>,
    throttled_usec: Option<u64>,
}

/// The value of `"key":` in one JSON object line: a string (unescaped) or a bare number.
fn json_field(line: &str, key: &str) -> Option<String> {
    let (_, rest) = line.split_once(&format!("\"{key}\":"))?;
    let rest = rest.trim_start();
    if let Some(string) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = string.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Some(out),
                '\\' => out.push(chars.next()?),
                c => out.push(c),
            }
        }
        None
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim().to_owned())
    }
}

impl GuestReport {
    fn parse<'a>(console: impl IntoIterator<Item = &'a str>) -> Self {
        let mut report = Self::default();
        for line in console {
            if let Some((_, log)) = line.split_once("@@arm64 log ") {
                match json_field(log, "message").as_deref() {
                    Some("probes loaded") => {
                        report.attached = json_field(log, "attached").and_then(|a| a.parse().ok());
                        report.mode = json_field(log, "version").unwrap_or_default().to_lowercase();
                        report.throttle_model = json_field(log, "throttle_model").unwrap_or_default();
                        report.runq_model = match json_field(log, "runq_model").as_deref() {
                            Some("sched_info") => "SchedInfo".into(),
                            Some("wakeup map") => "WakeupMap".into(),
                            other => other.unwrap_or_default().to_owned(),
                        };
                    }
                    Some(message) if message.starts_with("probe not attached") => {
                        let program = json_field(log, "program").unwrap_or_default();
                        report.refused.push((program, message.to_owned()));
                    }
                    _ => {}
                }
            } else if let Some((_, json)) = line.split_once("@@arm64 observe ")
                && json.contains("headroom-busy")
            {
                report.episodes = json_field(json, "throttle_episodes").and_then(|v| v.parse().ok());
                report.throttled_ns = json_field(json, "throttled_ns").and_then(|v| v.parse().ok());
            } else if let Some((_, stat)) = line.split_once("@@arm64 cpu.stat ") {
                for (key, value) in stat.split_whitespace().filter_map(|f| f.split_once('=')) {
                    match key {
                        "nr_throttled" => report.nr_throttled = value.parse().ok(),
                        "throttled_usec" => report.throttled_usec = value.parse().ok(),
                        _ => {}
                    }
                }
            }
        }
        report
    }

    /// Fails unless every program of `expected` attached or was refused by name, and the busy
    /// cgroup was throttled and seen so by the probes. Returns the attached programs.
    fn check(&self, expected: &[String]) -> Result<Vec<String>> {
        let attached = self
            .attached
            .context("headroomd never logged \"probes loaded\": the probes did not load")?;
        let unknown: Vec<&str> = self
            .refused
            .iter()
            .map(|(p, _)| p.as_str())
            .filter(|p| !expected.iter().any(|e| e == p))
            .collect();
        if !unknown.is_empty() {
            bail!("headroomd refused programs the amd64 6.1 guest does not list: {unknown:?}");
        }
        let names: Vec<String> = expected
            .iter()
            .filter(|e| !self.refused.iter().any(|(p, _)| p == *e))
            .cloned()
            .collect();
        if attached != names.len() {
            bail!(
                "headroomd attached {attached} programs; the amd64 6.1 guest attaches {} ({}) and the log names {} refused ({:?})",
                expected.len(),
                expected.join(", "),
                self.refused.len(),
                self.refused
            );
        }
        let nr_throttled = self
            .nr_throttled
            .context("the guest printed no cpu.stat nr_throttled for the busy cgroup")?;
        let episodes = self
            .episodes
            .context("headroomd observe reported no activity for the busy cgroup (headroom-busy)")?;
        if nr_throttled == 0 {
            bail!("the busy cgroup was never throttled (cpu.stat nr_throttled 0): the check proves nothing");
        }
        if episodes == 0 {
            bail!("the probes saw 0 throttle episodes; cpu.stat nr_throttled is {nr_throttled}");
        }
        Ok(names)
    }

    /// The kernel tests' record lines (`xtask/src/vm.rs`), for the kernel support table.
    fn records(&self, release: &str, attached: &[String], passed: bool) -> String {
        let refused: Vec<&str> = self.refused.iter().map(|(p, _)| p.as_str()).collect();
        let mut out = format!(
            "headroom-kernel test={GUEST_TEST} release={release} mode={} throttle={} runq={} attached={} refused={}\n",
            self.mode,
            self.throttle_model,
            self.runq_model,
            attached.join(","),
            refused.join(",")
        );
        let or_dash = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
        out.push_str(&format!(
            "headroom-figure test={GUEST_TEST} probe={} kernel={} tolerance=>0 what=throttle episodes vs nr_throttled (arm64, 10% quota, 3 s)\n",
            or_dash(self.episodes),
            or_dash(self.nr_throttled)
        ));
        out.push_str(&format!(
            "headroom-figure test={GUEST_TEST} probe={} kernel={} tolerance=printed what=throttled ms vs cpu.stat (arm64)\n",
            or_dash(self.throttled_ns.map(|ns| ns / 1_000_000)),
            or_dash(self.throttled_usec.map(|us| us / 1_000))
        ));
        if passed {
            out.push_str(&format!("headroom-passed test={GUEST_TEST}\n"));
        }
        out.push_str(&format!(
            "@@headroom-vm end {GUEST_TEST} rc={}\n",
            if passed { 0 } else { 1 }
        ));
        out
    }
}

/// Boots the arm64 guest with the arm64 headroomd of `dir` and checks its probes there.
pub(crate) fn guest(root: &Path, dir: &Path) -> Result<()> {
    let expected = vm::amd64_guest_programs(root)?;
    let vm_dir = Arch::Arm64.dir(root);
    std::fs::create_dir_all(&vm_dir)?;
    let script = vm_dir.join("headroomd-observe.sh");
    std::fs::write(&script, GUEST_SCRIPT)?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let headroomd = dir.join("headroomd");
    let test = GuestTest {
        name: GUEST_TEST.into(),
        binary: script,
        args: vec![headroomd.display().to_string()],
        expect: vec!["@@arm64 cpu.stat ".into()],
        reject: Vec::new(),
        on_disk: false,
        companions: vec![headroomd],
    };
    let started = Instant::now();
    let result = vm::vm_test_on(root, Arch::Arm64, &[test], GUEST_LIMIT, 2);
    let console = match &result {
        Ok(run) => run.console.clone(),
        Err(_) => std::fs::read_to_string(vm_dir.join("console.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect(),
    };
    let report = GuestReport::parse(console.iter().map(String::as_str));
    let release = console
        .iter()
        .find_map(|l| l.split_once("@@headroom-vm kernel release=").map(|(_, r)| r))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("unknown")
        .to_owned();
    let checked = result.and_then(|_| report.check(&expected));
    let attached = checked.as_ref().map_or_else(|_| Vec::new(), Clone::clone);
    let records = vm::arm64_records(root);
    std::fs::create_dir_all(records.parent().unwrap_or(root))?;
    std::fs::write(&records, report.records(&release, &attached, checked.is_ok()))?;
    let attached = checked?;
    progress(&format!(
        "vm-arm64: {release}: {} of {} programs attached ({}){}; throttle model {}, run-queue model {}",
        attached.len(),
        expected.len(),
        attached.join(", "),
        if report.refused.is_empty() {
            String::new()
        } else {
            format!("; refused: {:?}", report.refused)
        },
        report.throttle_model,
        report.runq_model
    ));
    let or_dash = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    progress(&format!(
        "vm-arm64: busy loop under cpu.max 10000 100000 for 3 s: throttle episodes {} vs cpu.stat nr_throttled {}; throttled {} ms vs cpu.stat throttled_usec {} ms",
        or_dash(report.episodes),
        or_dash(report.nr_throttled),
        or_dash(report.throttled_ns.map(|ns| ns / 1_000_000)),
        or_dash(report.throttled_usec.map(|us| us / 1_000)),
    ));
    progress(&format!(
        "vm-arm64: passed in {:.0} s (records in {})",
        started.elapsed().as_secs_f64(),
        records.display()
    ));
    Ok(())
}

fn machine(binary: &Path) -> Result<u16> {
    let bytes = std::fs::read(binary).with_context(|| format!("read {}", binary.display()))?;
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.len() < 20 {
        bail!("{} is not an ELF file", binary.display());
    }
    Ok(u16::from_le_bytes([bytes[18], bytes[19]]))
}

fn qemu(binary: &Path) -> Command {
    let mut cmd = Command::new("qemu-aarch64-static");
    cmd.arg("-L").arg(SYSROOT).arg(binary);
    cmd
}

fn stdout_of(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every binary is AArch64 and runs under qemu-user; headroomd serves what headroomctl reads.
fn check(dir: &Path) -> Result<()> {
    let commit = stdout_of(Command::new("git").args(["rev-parse", "--short=12", "HEAD"]))?;
    let commit = commit.trim();
    for (_, bin) in PROGRAMS {
        let path = dir.join(bin);
        let em = machine(&path)?;
        if em != EM_AARCH64 {
            bail!(
                "{} is ELF machine {em}, not AArch64 ({EM_AARCH64})",
                path.display()
            );
        }
        let version = stdout_of(qemu(&path).arg("--version"))?;
        if !version.contains(&format!("(commit {commit})")) {
            bail!("{bin} --version under qemu-aarch64 says {version:?}, not commit {commit}");
        }
        progress(&format!(
            "arm64: {bin}: AArch64 ELF, runs under qemu-user: {}",
            version.trim()
        ));
    }
    serve_and_read(dir)
}

/// headroomd (arm64, no probes: qemu-user has no bpf(2)) serving; the arm64 headroomctl reads it.
fn serve_and_read(dir: &Path) -> Result<()> {
    let scratch = dir.join("arm64-check");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let socket = scratch.join("headroomd.sock");
    let log = scratch.join("headroomd.log");
    let mut daemon = qemu(&dir.join("headroomd"))
        .args(["serve", "--probes", "if-available", "--node-name", "arm64-node"])
        .args([
            "--allocatable-cpu",
            "4",
            "--allocatable-memory",
            "8Gi",
            "--metrics-listen",
            "",
        ])
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("start headroomd under qemu-aarch64")?;
    let result = (|| {
        let ctl = |args: &[&str]| {
            stdout_of(
                qemu(&dir.join("headroomctl"))
                    .arg("--socket")
                    .arg(&socket)
                    .args(args),
            )
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match ctl(&["health"]) {
                Ok(text) if text.trim() == "SERVING" => break,
                other if Instant::now() > deadline => {
                    bail!("headroomd (arm64) never served within 60 s: {other:?}")
                }
                _ => std::thread::sleep(Duration::from_millis(250)),
            }
        }
        let version = ctl(&["version"])?;
        if version.lines().filter(|l| l.contains("(commit ")).count() != 2 {
            bail!("headroomctl version (arm64) did not name both versions: {version}");
        }
        let snapshot = ctl(&["headroom", "-o", "json"])?;
        for want in [r#""nodeName": "arm64-node""#, r#""allocatable": "4000""#] {
            if !snapshot.contains(want) {
                bail!("the arm64 headroomd's snapshot lacks {want}: {snapshot}");
            }
        }
        Ok(())
    })();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    result.with_context(|| format!("headroomd's log:\n{log}"))?;
    if !log.contains("serving without eBPF probes") {
        bail!("headroomd (arm64, qemu-user) did not say it serves without probes:\n{log}");
    }
    progress(
        "arm64: headroomd served gRPC under qemu-user and the arm64 headroomctl read it (health, version, headroom); probes need an arm64 kernel",
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_of_this_binary_is_read() {
        let me = std::env::current_exe().unwrap();
        // x86_64 = 62; this test runs on the build host.
        assert_eq!(machine(&me).unwrap(), 62);
        let dir = tempfile::tempdir().unwrap();
        let not_elf = dir.path().join("x");
        std::fs::write(&not_elf, "#!/bin/sh\n").unwrap();
        assert!(machine(&not_elf).is_err());
    }

    fn nine() -> Vec<String> {
        [
            "sched_switch",
            "sched_process_exit",
            "memcg_reclaim_begin",
            "memcg_reclaim_end",
            "direct_reclaim_begin",
            "direct_reclaim_end",
            "oom_mark_victim",
            "cgroup_mkdir",
            "cgroup_rmdir",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn the_guest_report_is_read_from_the_console() {
        let console = [
            r#"@@arm64 log {"timestamp":"t","level":"INFO","message":"probes loaded","version":"V2","throttle_model":"CfsRqThrottled","runq_model":"sched_info","attached":9,"target":"headroomd::probes"}"#,
            r#"@@arm64 observe {"hierarchy_id":0,"cgroup_id":7,"paths":["/sys/fs/cgroup/other"],"throttle_episodes":3}"#,
            r#"@@arm64 observe {"hierarchy_id":0,"cgroup_id":9,"paths":["/sys/fs/cgroup/headroom-busy"],"pod_uid":null,"throttle_episodes":27,"throttled_ns":2600000000,"runq_latency_hist":[[1024,3]]}"#,
            "@@arm64 cpu.stat usage_usec=300000 user_usec=1 nr_periods=30 nr_throttled=27 throttled_usec=2610000 ",
        ];
        let report = GuestReport::parse(console);
        assert_eq!(report.attached, Some(9));
        assert_eq!(report.throttle_model, "CfsRqThrottled");
        assert_eq!(report.mode, "v2");
        assert_eq!(report.runq_model, "SchedInfo");
        assert_eq!((report.episodes, report.nr_throttled), (Some(27), Some(27)));
        assert_eq!(
            (report.throttled_ns, report.throttled_usec),
            (Some(2_600_000_000), Some(2_610_000))
        );
        assert_eq!(report.check(&nine()).unwrap(), nine());
        let records = report.records("6.1.0-57-cloud-arm64", &nine(), true);
        let row = vm::KernelReport::parse("arm64", records.lines());
        assert!(!row.is_empty());
        assert!(
            records.contains(" mode=v2 throttle=CfsRqThrottled runq=SchedInfo "),
            "{records}"
        );
        assert!(records.contains("probe=27 kernel=27"), "{records}");
        assert!(
            records.contains("@@headroom-vm end headroomd_observe rc=0"),
            "{records}"
        );
    }

    #[test]
    fn a_refused_program_must_be_named_and_the_count_must_agree() {
        let loaded = |n: usize| {
            format!(
                r#"@@arm64 log {{"level":"INFO","message":"probes loaded","throttle_model":"CfsRqThrottled","runq_model":"sched_info","attached":{n}}}"#
            )
        };
        let refused = r#"@@arm64 log {"level":"WARN","message":"probe not attached: the kernel said \"no\"","program":"oom_mark_victim","tracepoint":"mark_victim"}"#;
        let busy = r#"@@arm64 observe {"paths":["/sys/fs/cgroup/headroom-busy"],"throttle_episodes":5,"throttled_ns":1}"#;
        let stat = "@@arm64 cpu.stat nr_throttled=5 throttled_usec=1";
        // 8 attached and the ninth named: passes, without it.
        let report = GuestReport::parse([loaded(8).as_str(), refused, busy, stat]);
        assert_eq!(
            report.refused,
            [(
                "oom_mark_victim".to_owned(),
                "probe not attached: the kernel said \"no\"".to_owned()
            )]
        );
        let attached = report.check(&nine()).unwrap();
        assert_eq!(attached.len(), 8);
        assert!(!attached.contains(&"oom_mark_victim".to_owned()));
        // 8 attached and none named: fails.
        assert!(
            GuestReport::parse([loaded(8).as_str(), busy, stat])
                .check(&nine())
                .is_err()
        );
        // Never loaded, never throttled, or throttled but unseen: fails.
        assert!(GuestReport::parse([busy, stat]).check(&nine()).is_err());
        let idle = "@@arm64 cpu.stat nr_throttled=0 throttled_usec=0";
        assert!(
            GuestReport::parse([loaded(9).as_str(), busy, idle])
                .check(&nine())
                .is_err()
        );
        let unseen = r#"@@arm64 observe {"paths":["/sys/fs/cgroup/headroom-busy"],"throttle_episodes":0}"#;
        assert!(
            GuestReport::parse([loaded(9).as_str(), unseen, stat])
                .check(&nine())
                .is_err()
        );
        assert!(
            GuestReport::parse([loaded(9).as_str(), stat])
                .check(&nine())
                .is_err()
        );
    }
}
