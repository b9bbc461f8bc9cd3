//! The `runc` peer: a real runc container (busybox-static rootfs) to time `runc update` and
//! `runc exec` against, as containerd does for a CRI `UpdateContainerResources` call.
use std::{
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};
use serde_json::json;

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// A detached runc container, deleted on drop together with the cgroups runc made for it.
pub struct RuncContainer {
    /// Container id.
    pub id: String,
    /// `linux.cgroupsPath` relative to every hierarchy (`parent/id` or `id`).
    cgroup: String,
    /// A parent directory runc created in hierarchies nobody else prepared; removed if empty.
    parent: Option<String>,
    bundle: tempfile::TempDir,
}

impl RuncContainer {
    /// Starts `sleep` in a container `id` whose cgroup is `<parent>/<id>` (or `<id>`).
    pub fn start(id: &str, parent: Option<&str>) -> Result<Self> {
        let bundle = tempfile::Builder::new()
            .prefix("headroom-runc-bundle")
            .tempdir()
            .context("bundle dir")?;
        let bin = bundle.path().join("rootfs/bin");
        std::fs::create_dir_all(&bin).context("rootfs")?;
        std::fs::copy("/bin/busybox", bin.join("busybox")).context("copy /bin/busybox (busybox-static)")?;
        for applet in ["sh", "sleep", "true"] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).context("busybox applet link")?;
        }
        run(Command::new("runc").arg("spec").current_dir(bundle.path()))?;
        let config_path = bundle.path().join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&config_path).context("read config.json")?)?;
        let cgroup = parent.map_or_else(|| id.to_owned(), |p| format!("{p}/{id}"));
        config["process"]["terminal"] = json!(false);
        config["process"]["args"] = json!(["/bin/sh", "-c", "sleep 100000"]);
        config["linux"]["cgroupsPath"] = json!(format!("/{cgroup}"));
        std::fs::write(&config_path, serde_json::to_vec_pretty(&config)?).context("write config.json")?;
        let container = Self {
            id: id.to_owned(),
            cgroup,
            parent: parent.map(str::to_owned),
            bundle,
        };
        // Detached: the container inherits runc's stdio, so no pipes (`output()` would wait for
        // the container to close them, i.e. forever).
        let status = Command::new("runc")
            .args(["run", "-d", "--bundle"])
            .arg(container.bundle.path())
            .arg(&container.id)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("start runc run")?;
        if !status.success() {
            bail!("runc run -d {} failed: {status}", container.id);
        }
        Ok(container)
    }

    /// The container's directory in the `controller` hierarchy (cgroup v1).
    pub fn cgroup_dir(&self, controller: &str) -> std::path::PathBuf {
        Path::new(CGROUP_MOUNT).join(controller).join(&self.cgroup)
    }
}

impl Drop for RuncContainer {
    fn drop(&mut self) {
        let _ = Command::new("runc")
            .args(["delete", "-f", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Ok(entries) = std::fs::read_dir(CGROUP_MOUNT) {
            for e in entries.flatten() {
                let _ = std::fs::remove_dir(e.path().join(&self.cgroup));
                // Only an empty parent goes: a prepared one (the actuator's scratch roots in
                // cpu and memory) still holds its own cgroups and is removed by its owner.
                if let Some(parent) = &self.parent {
                    let _ = std::fs::remove_dir(e.path().join(parent));
                }
            }
        }
        let _ = std::fs::remove_dir(Path::new(CGROUP_MOUNT).join(&self.cgroup));
    }
}

/// Runs `cmd`, failing with its stderr when it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `runc --version`'s first line.
pub fn runc_version() -> String {
    Command::new("runc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}
