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
    /// `uid:gid`, or empty for root.
    pub user: &'a str,
    pub labels: &'a [(&'a str, &'a str)],
}

/// A web server standing in for nginx: busybox's httpd on port 80, stopping at once on SIGTERM
/// (a shell as PID 1 gets no default signal handlers, so it traps TERM itself).
pub const NGINX: ImageSpec<'static> = ImageSpec {
    repository: "library/nginx:latest",
    entrypoint: &["/bin/sh", "-c"],
    cmd: &["trap 'exit 0' TERM; httpd -f -p 80 -h /www & wait"],
    user: "",
    labels: &[],
};

/// The sandbox: sleeps until SIGTERM.
pub const PAUSE: ImageSpec<'static> = ImageSpec {
    repository: "pause:3.10.2",
    entrypoint: &["/bin/sh", "-c"],
    cmd: &["trap 'exit 0' TERM; while :; do sleep 3600 & wait; done"],
    user: "",
    labels: &[],
};

/// busybox itself (`busybox:latest`), for Pods that name their own command.
pub const BUSYBOX_IMAGE: ImageSpec<'static> = ImageSpec {
    repository: "library/busybox:latest",
    entrypoint: &[],
    cmd: &["/bin/sh"],
    user: "",
    labels: &[],
};

/// headroom's own image, as `Containerfile` describes it: the three binaries on glibc and
/// libgcc only, user 65532 by default (the DaemonSet chooses uid 0 deliberately).
pub const HEADROOM: ImageSpec<'static> = ImageSpec {
    repository: "headroom/headroom:0.1.0",
    entrypoint: &["/usr/local/bin/headroomd"],
    cmd: &[],
    user: "65532:65532",
    labels: &[
        ("org.opencontainers.image.title", "headroom"),
        ("org.opencontainers.image.licenses", "MIT OR Apache-2.0"),
    ],
};

/// The reference the DaemonSet in `deploy/` names ([`HEADROOM`] in the node's registry, which
/// containerd mirrors for `example.invalid`).
pub const HEADROOM_REFERENCE: &str = "example.invalid/headroom/headroom:0.1.0";

/// The programs in [`HEADROOM`].
pub const HEADROOM_PROGRAMS: &[&str] = &["headroomd", "headroom-shim", "headroomctl"];

/// The layer of [`HEADROOM`], from the binaries in `release` (`cargo xtask build`) and the
/// licence texts in `workspace` (binutils' `strip` drops their debug information): what
/// Containerfile's second stage copies onto distroless `cc`,
/// written here without a container engine. The shared libraries are the ones `ldd` names
/// (glibc, libgcc, the loader), copied from this machine: Debian's, as in distroless.
pub fn headroom_layer(release: &Path, workspace: &Path, dir: &Path) -> Result<PathBuf, NodeError> {
    let rootfs = dir.join("headroom-rootfs");
    let io = |what: String| move |source| NodeError::Io { what, source };
    let bin = rootfs.join("usr/local/bin");
    for sub in ["usr/local/bin", "etc", "tmp", "usr/share/doc/headroom"] {
        fs::create_dir_all(rootfs.join(sub)).map_err(io(format!("create rootfs/{sub}")))?;
    }
    let mut libraries = std::collections::BTreeSet::new();
    for program in HEADROOM_PROGRAMS {
        let source = release.join(program);
        if !source.is_file() {
            return Err(NodeError::Missing {
                what: (*program).to_string(),
                path: source,
                how: "run `cargo xtask build`".to_string(),
            });
        }
        // Debug information stays out, as in a release image (a debug build is 5× larger).
        run(
            Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(bin.join(program))
                .arg(&source),
            &format!("strip {program} into the image"),
        )?;
        let output = Command::new("ldd")
            .arg(&source)
            .output()
            .map_err(io(format!("ldd {program}")))?;
        libraries.extend(ldd_paths(&String::from_utf8_lossy(&output.stdout)));
    }
    for library in &libraries {
        let target = rootfs.join(library.strip_prefix("/").unwrap_or(library));
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io(format!("create {}", parent.display())))?;
        }
        // fs::copy follows the symlink: the image holds the file under the name ldd resolved.
        fs::copy(library, &target).map_err(io(format!("copy {}", library.display())))?;
    }
    for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
        fs::copy(
            workspace.join(licence),
            rootfs.join("usr/share/doc/headroom").join(licence),
        )
        .map_err(io(format!("copy {licence}")))?;
    }
    fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    )
    .map_err(io("write etc/passwd".to_string()))?;
    let layer = dir.join("headroom-layer.tar");
    tar(&rootfs, &layer, "headroom")?;
    Ok(layer)
}

/// The absolute paths in `ldd`'s output (`libc.so.6 => /lib/... (0x…)`, `/lib64/ld-… (0x…)`).
fn ldd_paths(output: &str) -> Vec<PathBuf> {
    output
        .lines()
        .filter_map(|line| {
            let path = line.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

fn tar(rootfs: &Path, layer: &Path, what: &str) -> Result<(), NodeError> {
    run(
        Command::new("tar")
            .arg("--numeric-owner")
            .arg("--owner=0")
            .arg("--group=0")
            .arg("-C")
            .arg(rootfs)
            .arg("-cf")
            .arg(layer)
            .arg("."),
        &format!("tar the {what} root filesystem"),
    )
}

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
    tar(&rootfs, &layer, "busybox")?;
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
    if !spec.cmd.is_empty() {
        mutate.arg(format!("--cmd={}", spec.cmd.join(",")));
    }
    if !spec.user.is_empty() {
        mutate.arg(format!("--user={}", spec.user));
    }
    for (key, value) in spec.labels {
        mutate.arg(format!("--label={key}={value}"));
    }
    run(&mut mutate, &format!("crane mutate {reference}"))
}

pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<(), NodeError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_every_resolved_library_and_the_loader() {
        let output = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            ldd_paths(output),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }
}
