//! The long-running programs of a test cluster (etcd, kube-apiserver, containerd, the kubelet,
//! …): each one's output in `<dir>/<name>.log`, and each stopped the clean way, SIGTERM and then
//! SIGKILL after a grace, in the reverse of the order they started.
use std::{
    fs, io,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

/// How long a program may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

pub(crate) struct Supervisor {
    dir: PathBuf,
    running: Vec<Supervised>,
}

struct Supervised {
    name: String,
    child: Child,
}

/// A program that exited by itself.
pub(crate) struct Exited {
    pub name: String,
    pub status: String,
    pub log_tail: String,
}

impl Supervisor {
    pub(crate) fn new(dir: &Path) -> Supervisor {
        Supervisor {
            dir: dir.to_path_buf(),
            running: Vec::new(),
        }
    }

    pub(crate) fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Starts `cmd` as `name`, stdin closed, output appended to its log (a restart keeps the
    /// earlier run's lines above a marker).
    pub(crate) fn spawn(&mut self, name: &str, cmd: &mut Command) -> io::Result<()> {
        use io::Write as _;
        let mut out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(name))?;
        if out.metadata()?.len() > 0 {
            writeln!(out, "----- {name} restarted -----")?;
        }
        // SAFETY: the closure runs between fork and exec and only calls prctl(2), which is
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                // A test process killed outright (a CI timeout) takes the cluster with it.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        self.running.push(Supervised {
            name: name.to_string(),
            child,
        });
        Ok(())
    }

    /// The process id of the running component `name`.
    pub(crate) fn pid(&self, name: &str) -> Option<u32> {
        self.running.iter().find(|p| p.name == name).map(|p| p.child.id())
    }

    pub(crate) fn is_running(&self, name: &str) -> bool {
        self.running.iter().any(|p| p.name == name)
    }

    /// Stops one program (no-op when it is not running).
    pub(crate) fn stop(&mut self, name: &str) {
        if let Some(at) = self.running.iter().position(|p| p.name == name) {
            let mut program = self.running.remove(at);
            terminate(&mut program.child, libc::SIGTERM);
        }
    }

    /// Kills one program with SIGKILL, as a crash would end it (no-op when it is not running).
    pub(crate) fn kill(&mut self, name: &str) {
        if let Some(at) = self.running.iter().position(|p| p.name == name) {
            let mut program = self.running.remove(at);
            let _ = program.child.kill();
            let _ = program.child.wait();
        }
    }

    /// The first program that has exited by itself, with its log's tail.
    pub(crate) fn exited(&mut self) -> Option<Exited> {
        let dir = self.dir.clone();
        self.running
            .iter_mut()
            .find_map(|program| match program.child.try_wait() {
                Ok(Some(status)) => Some(Exited {
                    name: program.name.clone(),
                    status: status.to_string(),
                    log_tail: tail(&dir.join(format!("{}.log", program.name)), 30),
                }),
                _ => None,
            })
    }

    /// The last lines of a program's log.
    pub(crate) fn log_tail(&self, name: &str, lines: usize) -> String {
        tail(&self.log_path(name), lines)
    }

    pub(crate) fn stop_all(&mut self) {
        while let Some(mut program) = self.running.pop() {
            terminate(&mut program.child, libc::SIGTERM);
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// `signal`, then SIGKILL if the program has not exited within [`STOP_GRACE`]; always reaped.
fn terminate(child: &mut Child, signal: libc::c_int) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) has no memory effects; the pid is a child this process has not
        // reaped yet, so it cannot have been reused.
        unsafe {
            libc::kill(pid, signal);
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub(crate) fn free_port() -> io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// The last `lines` lines of a file (empty when it cannot be read).
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
