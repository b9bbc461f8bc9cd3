//! The node's container images, built here from busybox-static (no registry outside this
//! machine is reachable) and pushed with crane into the node's own registry on 127.0.0.1.
//!
//! containerd treats that registry as the mirror of `docker.io`, `registry.k8s.io` and
//! `example.invalid` (`hosts.toml`), so an unmodified `image: nginx` resolves to
//! `docker.io/library/nginx:latest` and is pulled from here, as a mirror serves it in an
//! air-gapped cluster.
use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use crate::node::NodeError;

/// busybox-static as Debian installs it (`busybox-static`).
pub const BUSYBOX: &str = "/bin/busybox";

/// The sandbox ("pause") image the kubelet and containerd ask for by default.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10.2";

/// One image: where it lands in the registry and what it runs.
pub struct ImageSpec<'a> {
    /// The repository and tag under the registry, as the mirror is asked for it
    /// (`library/nginx:latest` for `docker.io/library/nginx:latest`).
    pub repository: &'a str,
    pub entrypoint: &'a [&'a str],
    pub cmd: &'a [&'a str],
}

/// A web server standing in for nginx: busybox's httpd on port 80, stopping at once on SIGTERM
/// (a shell as PID 1 gets no default signal handlers, so it traps TERM itself).
pub const NGINX: ImageSpec<'static> = ImageSpec {
    repository: "library/nginx:latest",
    entrypoint: &["/bin/sh", "-c"],
    cmd: &["trap 'exit 0' TERM; httpd -f -p 80 -h /www & wait"],
};

/// The sandbox: sleeps until SIGTERM.
pub const PAUSE: ImageSpec<'static> = ImageSpec {
    repository: "pause:3.10.2",
    entrypoint: &["/bin/sh", "-c"],
    cmd: &["trap 'exit 0' TERM; while :; do sleep 3600 & wait; done"],
};

/// busybox itself (`busybox:latest`), for Pods that name their own command.
pub const BUSYBOX_IMAGE: ImageSpec<'static> = ImageSpec {
    repository: "library/busybox:latest",
    entrypoint: &[],
    cmd: &["/bin/sh"],
};

/// The applets linked in `/bin` of every image (what tests and shells use).
const APPLETS: &[&str] = &[
    "sh", "sleep", "httpd", "cat", "ls", "echo", "kill", "ps", "sync", "true", "false", "dd", "head", "yes",
    "env", "mkdir", "rm", "wc",
];

/// A root filesystem of busybox-static and its applets, as one uncompressed layer tarball.
pub fn busybox_layer(dir: &Path) -> Result<PathBuf, NodeError> {
    if !Path::new(BUSYBOX).is_file() {
        return Err(NodeError::Missing {
            what: "busybox-static".to_string(),
            path: PathBuf::from(BUSYBOX),
            how: "apt-get install busybox-static (cargo xtask setup does)".to_string(),
        });
    }
    let rootfs = dir.join("rootfs");
    let io = |what: String| move |source| NodeError::Io { what, source };
    for sub in ["bin", "www", "tmp", "etc"] {
        fs::create_dir_all(rootfs.join(sub)).map_err(io(format!("create rootfs/{sub}")))?;
    }
    fs::copy(BUSYBOX, rootfs.join("bin/busybox")).map_err(io("copy busybox".to_string()))?;
    for applet in APPLETS {
        let link = rootfs.join("bin").join(applet);
        if !link.exists() {
            symlink("busybox", &link).map_err(io(format!("link bin/{applet}")))?;
        }
    }
    fs::write(rootfs.join("www/index.html"), "headroom test image\n")
        .map_err(io("write www/index.html".to_string()))?;
    fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n")
        .map_err(io("write etc/passwd".to_string()))?;
    let layer = dir.join("busybox-layer.tar");
    run(
        Command::new("tar")
            .arg("--numeric-owner")
            .arg("--owner=0")
            .arg("--group=0")
            .arg("-C")
            .arg(&rootfs)
            .arg("-cf")
            .arg(&layer)
            .arg("."),
        "tar the busybox root filesystem",
    )?;
    Ok(layer)
}

/// Pushes `layer` as `registry/spec.repository` for linux/amd64, with its entrypoint and command.
pub fn push(crane: &Path, registry: &str, layer: &Path, spec: &ImageSpec<'_>) -> Result<(), NodeError> {
    let reference = format!("{registry}/{}", spec.repository);
    run(
        Command::new(crane)
            .args(["append", "--insecure", "--oci-empty-base", "-f"])
            .arg(layer)
            .arg("-t")
            .arg(&reference),
        &format!("crane append {reference}"),
    )?;
    let mut mutate = Command::new(crane);
    mutate.args([
        "mutate",
        "--insecure",
        "--set-platform=linux/amd64",
        &reference,
        "--tag",
        &reference,
    ]);
    if !spec.entrypoint.is_empty() {
        mutate.arg(format!("--entrypoint={}", spec.entrypoint.join(",")));
    }
    mutate.arg(format!("--cmd={}", spec.cmd.join(",")));
    run(&mut mutate, &format!("crane mutate {reference}"))
}

fn run(cmd: &mut Command, what: &str) -> Result<(), NodeError> {
    let output = cmd.output().map_err(|source| NodeError::Io {
        what: what.to_string(),
        source,
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(NodeError::Command {
            what: what.to_string(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}
