//! `cargo xtask fuzz`: builds the `fuzz/` targets with cargo-fuzz and runs each for a bounded time.
//!
//! cargo-fuzz passes `-Z` flags to rustc; on the stable toolchain this project pins, they are
//! enabled with `RUSTC_BOOTSTRAP=1` (as `build-ebpf` does for `-Z build-std`). The targets are
//! built with AddressSanitizer: stable rustup toolchains ship its runtime for
//! x86_64-unknown-linux-gnu (`librustc-stable_rt.asan.a` in the sysroot), so besides libFuzzer's
//! coverage guidance, panics and Rust's own checks, an out-of-bounds or use-after-free in any
//! `unsafe` or C code the fuzzed crates reach is caught too.
use std::{
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{progress, run, setup};

/// The targets in `fuzz/fuzz_targets/`, in the order they run.
pub(crate) const TARGETS: &[&str] = &[
    "quantity",
    "cgroup_files",
    "manifest",
    "grpc_requests",
    "kube_objects",
    "state_files",
];

/// cargo-fuzz version known to work with this toolchain.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Installs cargo-fuzz unless a working one is on `$CARGO_HOME/bin`.
pub(crate) fn install_cargo_fuzz() -> Result<()> {
    let fuzz = setup::cargo_home().join("bin/cargo-fuzz");
    if fuzz.exists()
        && Command::new(&fuzz)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        progress("setup: cargo-fuzz present");
        return Ok(());
    }
    progress(&format!(
        "setup: cargo install cargo-fuzz {CARGO_FUZZ_VERSION} (about a minute)"
    ));
    run(Command::new("cargo").args([
        "install",
        "--locked",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
    ]))
}

fn cargo_fuzz(root: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("PATH", setup::path_with_cargo_bin())
        // The host workspace's flags must not mix with cargo-fuzz's instrumentation flags.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    cmd
}

/// libFuzzer's coverage counters in one status line (`#N NEW cov: C ft: F corp: K/…`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Coverage {
    pub runs: u64,
    pub cov: u64,
    pub ft: u64,
    pub corpus: u64,
}

/// Parses a libFuzzer status line; `None` for any other line.
pub(crate) fn coverage(line: &str) -> Option<Coverage> {
    let line = line.strip_prefix('#')?;
    let mut words = line.split_whitespace();
    let runs = words.next()?.parse().ok()?;
    let mut c = Coverage {
        runs,
        ..Coverage::default()
    };
    let mut seen = false;
    while let Some(word) = words.next() {
        match word {
            "cov:" => {
                c.cov = words.next()?.parse().ok()?;
                seen = true;
            }
            "ft:" => c.ft = words.next()?.parse().ok()?,
            "corp:" => c.corpus = words.next()?.split('/').next()?.parse().ok()?,
            _ => {}
        }
    }
    seen.then_some(c)
}

/// When a target's counters last grew, in its own CPU time.
///
/// The plateau is judged on `cov` (edges reached) alone. `ft` (libFuzzer's features) also counts
/// hit-count buckets per edge and, for parsers, keeps growing with input length and loop counts
/// long after the last new edge; it is reported beside, not waited for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Growth {
    pub last: Coverage,
    pub cov_grew_at: Duration,
    pub ft_grew_at: Duration,
}

impl Growth {
    /// Takes a status line's counters, read when the target had run `cpu`.
    pub(crate) fn observe(&mut self, c: Coverage, cpu: Duration) {
        if c.cov > self.last.cov {
            self.cov_grew_at = cpu;
        }
        if c.ft > self.last.ft {
            self.ft_grew_at = cpu;
        }
        self.last = c;
    }

    /// Whether no new edge was reached for `quiet` of CPU time up to `cpu`.
    pub(crate) fn plateau(&self, cpu: Duration, quiet: Duration) -> bool {
        self.last.cov > 0 && cpu.saturating_sub(self.cov_grew_at) >= quiet
    }
}

/// What one target's run reached.
struct Reached {
    target: String,
    growth: Growth,
    /// Its CPU time in all.
    cpu: Duration,
    ran: Duration,
    plateau: bool,
}

/// How the targets share the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// As any other process.
    Normal,
    /// `SCHED_IDLE` (`chrt --idle 0`): only CPU time nothing else wants, so that benchmarks and
    /// builds beside a long run keep their latency.
    Background,
}

/// Builds every target, then runs each (or those named) for `seconds`; with `plateau`, a target
/// stops early once its coverage (edges, see [`Growth`]) did not grow for that much of its own
/// CPU time (wall time would count the time a busy machine kept it waiting), and a table of what
/// each reached is printed (and written to target/fuzz-plateau.md).
pub(crate) fn fuzz(
    root: &Path,
    names: &[String],
    seconds: u64,
    plateau: Option<u64>,
    priority: Priority,
    keep_corpus: bool,
) -> Result<()> {
    for name in names {
        if !TARGETS.contains(&name.as_str()) {
            bail!("unknown fuzz target `{name}`; known: {}", TARGETS.join(", "));
        }
    }
    let selected: Vec<&str> = if names.is_empty() {
        TARGETS.to_vec()
    } else {
        names.iter().map(String::as_str).collect()
    };
    install_cargo_fuzz()?;
    progress("fuzz: cargo fuzz build --sanitizer address (stable rustc, RUSTC_BOOTSTRAP=1)");
    run(cargo_fuzz(root).args(["fuzz", "build", "--sanitizer", "address"]))?;
    // The built binaries are run directly: `cargo fuzz run` would rebuild first, and the work
    // tree may have changed since the build (other crates being edited).
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output()?.stdout)?
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .context("rustc -vV did not report the host triple")?;
    let bin_dir = root.join("fuzz/target").join(host).join("release");
    let mut reached = Vec::new();
    for target in selected {
        let corpus = root.join("fuzz/corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        let artifacts = root.join("fuzz/artifacts").join(target);
        std::fs::create_dir_all(&artifacts)?;
        progress(&format!("fuzz: {target} for {seconds} s"));
        let mut cmd = target_command(&bin_dir.join(target), priority);
        cmd.current_dir(root)
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .arg(format!("-max_total_time={seconds}"))
            .args([
                "-max_len=8192",
                "-timeout=10",
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
            ])
            .arg(&corpus);
        // A dictionary of the format's words (YAML keys, JSON field names) gets past the
        // parser's first checks far sooner than byte mutations find them.
        let dict = root.join("fuzz/dicts").join(format!("{target}.dict"));
        if dict.is_file() {
            cmd.arg(format!("-dict={}", dict.display()));
        }
        // The committed corpus of the last kept run, then the hand-written seeds: read, never
        // written (new inputs go to the first directory, `fuzz/corpus/<target>`).
        let kept = root.join("fuzz/corpora").join(target);
        let seeds = root.join("fuzz/seeds").join(target);
        for dir in [&kept, &seeds] {
            if dir.is_dir() {
                cmd.arg(dir);
            }
        }
        match plateau {
            None => run(&mut cmd)?,
            Some(quiet) => reached.push(until_plateau(target, cmd, Duration::from_secs(quiet))?),
        }
        if keep_corpus {
            let merge = target_command(&bin_dir.join(target), priority);
            keep(merge, target, &[&corpus, &kept, &seeds], &kept)?;
        }
    }
    progress("fuzz: no target found a crash");
    if !reached.is_empty() {
        let mut table = String::from(
            "| target | ran (wall) | on CPU | cov last grew at (CPU) | ft last grew at (CPU) | cov | ft | corpus (libFuzzer) | plateau |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &reached {
            table.push_str(&format!(
                "| `{}` | {} s | {} s | {} s | {} s | {} | {} | {} | {} |\n",
                r.target,
                r.ran.as_secs(),
                r.cpu.as_secs(),
                r.growth.cov_grew_at.as_secs(),
                r.growth.ft_grew_at.as_secs(),
                r.growth.last.cov,
                r.growth.last.ft,
                r.growth.last.corpus,
                if r.plateau { "yes" } else { "no (time limit)" }
            ));
        }
        println!("{table}");
        std::fs::write(root.join("target/fuzz-plateau.md"), &table)?;
    }
    Ok(())
}

/// The command that runs a target binary, as `priority` says.
fn target_command(binary: &Path, priority: Priority) -> Command {
    match priority {
        Priority::Normal => Command::new(binary),
        Priority::Background => {
            // chrt execs the target: the child's pid stays the target's.
            let mut cmd = Command::new("chrt");
            cmd.args(["--idle", "0"]).arg(binary);
            cmd
        }
    }
}

/// Replaces `kept` with a set-cover merge of `inputs`, run by `cmd` (the target's command;
/// libFuzzer's `-set_cover_merge=1`: the fewest inputs that reach every feature any of them
/// reaches). The merge is written to a new
/// directory first, so a failed merge leaves the old `kept` as it was (and no half-merged
/// directory beside it to be committed by mistake).
fn keep(mut cmd: Command, target: &str, inputs: &[&Path], kept: &Path) -> Result<()> {
    let fresh = kept.with_extension("merging");
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh)?;
    }
    std::fs::create_dir_all(&fresh)?;
    progress(&format!(
        "fuzz: {target}: set-cover merge into {}",
        kept.display()
    ));
    cmd.args([
        "-merge=1",
        "-set_cover_merge=1",
        "-max_len=8192",
        "-rss_limit_mb=2048",
    ])
    .arg(&fresh)
    .args(inputs.iter().filter(|d| d.is_dir()))
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Err(error) = run(&mut cmd) {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(error.context(format!("merge the {target} corpus")));
    }
    if kept.exists() {
        std::fs::remove_dir_all(kept)?;
    }
    std::fs::rename(&fresh, kept)?;
    let (files, bytes) = std::fs::read_dir(kept)?.try_fold((0u64, 0u64), |(n, b), e| {
        Ok::<_, std::io::Error>((n + 1, b + e?.metadata()?.len()))
    })?;
    progress(&format!(
        "fuzz: {target}: kept {files} inputs, {} KiB",
        bytes / 1024
    ));
    Ok(())
}

/// Runs one target, reading libFuzzer's status lines, until its coverage has not grown for
/// `quiet` of its CPU time (SIGINT: libFuzzer then exits cleanly) or it stops by itself (time
/// limit, crash).
fn until_plateau(target: &str, mut cmd: Command, quiet: Duration) -> Result<Reached> {
    let started = Instant::now();
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {target}"))?;
    let schedstat = format!("/proc/{}/schedstat", child.id());
    // The last CPU time read (the process's entry goes when it exits), read at most once a
    // second: libFuzzer prints thousands of lines a second while it finds new inputs.
    let mut cpu = Duration::ZERO;
    let mut cpu_read_at: Option<Instant> = None;
    let stderr = child.stderr.take().context("libFuzzer's stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let (mut growth, mut plateau) = (Growth::default(), false);
    let mut tail: Vec<String> = Vec::new();
    loop {
        if cpu_read_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            cpu_read_at = Some(Instant::now());
            if let Some(now) = std::fs::read_to_string(&schedstat)
                .ok()
                .as_deref()
                .and_then(cpu_time)
            {
                cpu = now;
            }
        }
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                if let Some(c) = coverage(&line) {
                    growth.observe(c, cpu);
                }
                tail.push(line);
                if tail.len() > 40 {
                    tail.remove(0);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if !plateau && growth.plateau(cpu, quiet) {
            plateau = true;
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
        }
    }
    let status = child.wait()?;
    if !plateau && !status.success() {
        bail!("fuzz target {target} failed ({status}):\n{}", tail.join("\n"));
    }
    let ran = started.elapsed();
    progress(&format!(
        "fuzz: {target}: cov {} ft {} corpus {} after {} s ({} s on CPU); cov last grew at {} s, ft at {} s on CPU{}",
        growth.last.cov,
        growth.last.ft,
        growth.last.corpus,
        ran.as_secs(),
        cpu.as_secs(),
        growth.cov_grew_at.as_secs(),
        growth.ft_grew_at.as_secs(),
        if plateau { " (plateau)" } else { "" }
    ));
    Ok(Reached {
        target: target.to_string(),
        growth,
        cpu,
        ran,
        plateau,
    })
}

/// The CPU time in `/proc/<pid>/schedstat` (its first field, in nanoseconds). libFuzzer runs
/// the inputs on its main thread, so the process's main task is where the work shows.
fn cpu_time(schedstat: &str) -> Option<Duration> {
    schedstat
        .split_whitespace()
        .next()?
        .parse()
        .ok()
        .map(Duration::from_nanos)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn libfuzzer_status_lines_are_parsed() {
        assert_eq!(
            coverage("#1048576\tpulse  cov: 812 ft: 3301 corp: 411/52Kb lim: 4096 exec/s: 34952 rss: 412Mb"),
            Some(Coverage {
                runs: 1_048_576,
                cov: 812,
                ft: 3301,
                corpus: 411
            })
        );
        assert_eq!(
            coverage(
                "#27\tNEW    cov: 77 ft: 78 corp: 2/5b lim: 4 exec/s: 0 rss: 30Mb L: 4/4 MS: 1 ChangeBit-"
            )
            .map(|c| c.cov),
            Some(77)
        );
        assert_eq!(coverage("INFO: Seed: 1234"), None);
        assert_eq!(
            cpu_time("370634052273 546159640543 298093\n"),
            Some(Duration::from_nanos(370_634_052_273))
        );
        assert_eq!(cpu_time(""), None);
        assert_eq!(coverage("#2\tINITED exec/s: 0 rss: 30Mb"), None);
    }

    #[test]
    fn the_plateau_waits_for_edges_not_features() {
        let at = |c: u64, f: u64| Coverage {
            runs: 1,
            cov: c,
            ft: f,
            corpus: 1,
        };
        let secs = Duration::from_secs;
        let mut growth = Growth::default();
        assert!(!growth.plateau(secs(1000), secs(10)), "nothing seen yet");
        growth.observe(at(100, 400), secs(5));
        growth.observe(at(120, 450), secs(20));
        // Features keep growing, edges do not.
        growth.observe(at(120, 900), secs(40));
        assert_eq!((growth.cov_grew_at, growth.ft_grew_at), (secs(20), secs(40)));
        assert!(!growth.plateau(secs(29), secs(10)));
        assert!(growth.plateau(secs(30), secs(10)));
        growth.observe(at(121, 900), secs(45));
        assert!(
            !growth.plateau(secs(50), secs(10)),
            "a new edge restarts the window"
        );
    }
}
