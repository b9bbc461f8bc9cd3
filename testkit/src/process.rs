//! A program a test starts beside the control plane (headroom-shim, headroomd): its output in a
//! log file, killed and reaped when dropped.
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

pub struct LoggedChild {
    child: Child,
    log: PathBuf,
}

impl LoggedChild {
    /// Starts `cmd` with stdin closed and stdout and stderr appended to `log` (a program started
    /// again after a kill keeps what its predecessor said).
    pub fn spawn(cmd: &mut Command, log: impl Into<PathBuf>) -> std::io::Result<LoggedChild> {
        let log = log.into();
        let out = fs::OpenOptions::new().create(true).append(true).open(&log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok(LoggedChild { child, log })
    }

    /// The log so far, without ANSI colours.
    pub fn log(&self) -> String {
        strip_ansi(&fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// The last `lines` lines of its log, without ANSI colours.
    pub fn log_tail(&self, lines: usize) -> String {
        last_lines(&self.log(), lines)
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Stops it (SIGSTOP) until the guard is dropped (SIGCONT): a program that falls behind.
    pub fn pause(&self) -> std::io::Result<Paused> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).map_err(std::io::Error::other)?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP)?;
        Ok(Paused(pid))
    }

    /// Whether it is still running (`None`), or how it ended.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }
}

/// A [`LoggedChild`] stopped until this is dropped ([`LoggedChild::pause`]).
#[must_use = "the program runs again when this is dropped"]
pub struct Paused(nix::unistd::Pid);

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

impl Drop for LoggedChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child stopped the clean way when dropped: SIGTERM, then reaped, so that a failing test or
/// benchmark leaves no daemon running and the daemon still removes what it made.
pub struct TerminatedOnDrop(pub Child);

impl Drop for TerminatedOnDrop {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

/// `text` without ANSI CSI sequences (`ESC [ … final-letter`), which tracing prints even into
/// files.
pub fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::strip_ansi;

    #[test]
    fn colours_are_stripped_and_text_kept() {
        assert_eq!(
            strip_ansi("\u{1b}[2mts\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m a=b"),
            "ts  INFO a=b"
        );
        assert_eq!(strip_ansi("plain"), "plain");
    }
}
