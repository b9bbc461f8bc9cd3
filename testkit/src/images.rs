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
        (
            "org.opencontainers.image.description",
            "headroomd + headroom-shim: live node headroom and preemption for Deferred in-place Pod resizes",
        ),
        ("org.opencontainers.image.licenses", "MIT OR Apache-2.0"),
        (
            "org.opencontainers.image.source",
            "https://example.invalid/headroom",
        ),
        ("org.opencontainers.image.version", "0.1.0"),
    ],
};

/// The reference the DaemonSet in `deploy/` names ([`HEADROOM`] in the node's registry, which
/// containerd mirrors for `example.invalid`).
pub const HEADROOM_REFERENCE: &str = "example.invalid/headroom/headroom:0.1.0";

/// The programs in [`HEADROOM`].
pub const HEADROOM_PROGRAMS: &[&str] = &["headroomd", "headroom-shim", "headroomctl"];

/// A platform headroom's image is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    Amd64,
    Arm64,
}

impl Platform {
    pub const ALL: [Platform; 2] = [Platform::Amd64, Platform::Arm64];

    /// As OCI writes it (`os/architecture`).
    pub fn oci(self) -> &'static str {
        match self {
            Platform::Amd64 => "linux/amd64",
            Platform::Arm64 => "linux/arm64",
        }
    }

    /// The architecture alone (`amd64`), for tags and folder names.
    pub fn arch(self) -> &'static str {
        match self {
            Platform::Amd64 => "amd64",
            Platform::Arm64 => "arm64",
        }
    }

    /// ELF `e_machine`: EM_X86_64, EM_AARCH64.
    pub fn elf_machine(self) -> u16 {
        match self {
            Platform::Amd64 => 62,
            Platform::Arm64 => 183,
        }
    }

    /// binutils for this platform's ELF files (the host's own for amd64, Debian's cross
    /// binutils, `binutils-aarch64-linux-gnu`, for arm64).
    fn binutil(self, tool: &str) -> String {
        match self {
            Platform::Amd64 => tool.to_string(),
            Platform::Arm64 => format!("aarch64-linux-gnu-{tool}"),
        }
    }
}

/// Where Debian's cross packages put arm64's glibc and libgcc (`libc6-arm64-cross`,
/// `libgcc-s1-arm64-cross`): the same builds as the arm64 packages, installed beside the host's.
pub const ARM64_SYSROOT_LIB: &str = "/usr/aarch64-linux-gnu/lib";

/// The layer of [`HEADROOM`] for amd64, from the binaries in `release` (`cargo xtask build`).
pub fn headroom_layer(release: &Path, workspace: &Path, dir: &Path) -> Result<PathBuf, NodeError> {
    headroom_layer_for(Platform::Amd64, release, workspace, dir)
}

/// The layer of [`HEADROOM`] for `platform`, from the binaries in `release` (built for that
/// platform) and the licence texts in `workspace` (binutils' `strip` drops their debug
/// information): what Containerfile's second stage copies onto distroless `cc`, written here
/// without a container engine. The shared libraries are the ones the binaries need, Debian's, as
/// in distroless: for amd64 those `ldd` resolves on this machine; for arm64 the closure of the
/// ELF `NEEDED` entries and the interpreter, from Debian's cross packages ([`ARM64_SYSROOT_LIB`]),
/// placed where arm64's loader looks (`/lib/aarch64-linux-gnu`, the loader in `/lib`).
pub fn headroom_layer_for(
    platform: Platform,
    release: &Path,
    workspace: &Path,
    dir: &Path,
) -> Result<PathBuf, NodeError> {
    let rootfs = dir.join(format!("headroom-rootfs-{}", platform.arch()));
    let io = |what: String| move |source| NodeError::Io { what, source };
    if rootfs.exists() {
        fs::remove_dir_all(&rootfs).map_err(io(format!("clear {}", rootfs.display())))?;
    }
    let bin = rootfs.join("usr/local/bin");
    for sub in ["usr/local/bin", "etc", "tmp", "usr/share/doc/headroom"] {
        fs::create_dir_all(rootfs.join(sub)).map_err(io(format!("create rootfs/{sub}")))?;
    }
    // (where it lands in the image, where it comes from)
    let mut libraries = std::collections::BTreeSet::new();
    for program in HEADROOM_PROGRAMS {
        let source = release.join(program);
        if !source.is_file() {
            return Err(NodeError::Missing {
                what: format!("{program} for {}", platform.oci()),
                path: source,
                how: match platform {
                    Platform::Amd64 => "run `cargo xtask build`".to_string(),
                    Platform::Arm64 => "run `cargo xtask build-arm64`".to_string(),
                },
            });
        }
        // Debug information stays out, as in a release image (a debug build is 5× larger).
        run(
            Command::new(platform.binutil("strip"))
                .arg("--strip-debug")
                .arg("-o")
                .arg(bin.join(program))
                .arg(&source),
            &format!("strip {program} ({}) into the image", platform.arch()),
        )?;
        if platform == Platform::Amd64 {
            let output = Command::new("ldd")
                .arg(&source)
                .output()
                .map_err(io(format!("ldd {program}")))?;
            for path in ldd_paths(&String::from_utf8_lossy(&output.stdout)) {
                libraries.insert((path.clone(), path));
            }
        }
    }
    if platform == Platform::Arm64 {
        let programs: Vec<PathBuf> = HEADROOM_PROGRAMS.iter().map(|p| release.join(p)).collect();
        libraries.extend(arm64_libraries(&programs)?);
    }
    for (in_image, library) in &libraries {
        let target = rootfs.join(in_image.strip_prefix("/").unwrap_or(in_image));
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
    let layer = dir.join(format!("headroom-layer-{}.tar", platform.arch()));
    tar(&rootfs, &layer, "headroom")?;
    Ok(layer)
}

/// arm64 binaries' shared libraries, as (path in the image, file on this machine): their
/// interpreter and the closure of `NEEDED`, found in [`ARM64_SYSROOT_LIB`], each read once. The
/// interpreter is not copied a second time where libc names it: the loader is already loaded
/// under that name.
fn arm64_libraries(binaries: &[PathBuf]) -> Result<Vec<(PathBuf, PathBuf)>, NodeError> {
    let readelf = |what: &str, file: &Path| {
        stdout_of(
            Command::new(Platform::Arm64.binutil("readelf"))
                .args([what, "--wide"])
                .arg(file),
            &format!("readelf {what} {}", file.display()),
        )
    };
    let sysroot = Path::new(ARM64_SYSROOT_LIB);
    let mut found = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut queue = Vec::new();
    for binary in binaries {
        if let Some(interpreter) = elf_interpreter(&readelf("--program-headers", binary)?) {
            let name = Path::new(&interpreter)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if seen.insert(name.clone()) {
                found.push((PathBuf::from(&interpreter), sysroot.join(name)));
            }
        }
        queue.extend(
            elf_needed(&readelf("--dynamic", binary)?)
                .into_iter()
                .map(|name| (name, binary.clone())),
        );
    }
    while let Some((name, needed_by)) = queue.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let file = sysroot.join(&name);
        if !file.is_file() {
            return Err(NodeError::Missing {
                what: format!("arm64 library {name} (needed by {})", needed_by.display()),
                path: file,
                how: "apt-get install libc6-arm64-cross libgcc-s1-arm64-cross (cargo xtask build-arm64 does)"
                    .to_string(),
            });
        }
        queue.extend(
            elf_needed(&readelf("--dynamic", &file)?)
                .into_iter()
                .map(|next| (next, file.clone())),
        );
        found.push((Path::new("/lib/aarch64-linux-gnu").join(&name), file));
    }
    Ok(found)
}

/// `[Requesting program interpreter: /lib/ld-linux-aarch64.so.1]` in `readelf -l`'s output.
fn elf_interpreter(program_headers: &str) -> Option<String> {
    let (_, rest) = program_headers.split_once("Requesting program interpreter: ")?;
    Some(rest.split(']').next()?.trim().to_string())
}

/// The `(NEEDED) Shared library: [libc.so.6]` entries in `readelf -d`'s output.
fn elf_needed(dynamic: &str) -> Vec<String> {
    dynamic
        .lines()
        .filter(|line| line.contains("(NEEDED)"))
        .filter_map(|line| {
            let (_, rest) = line.split_once('[')?;
            Some(rest.split(']').next()?.to_string())
        })
        .collect()
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
    push_for(
        Platform::Amd64,
        crane,
        &format!("{registry}/{}", spec.repository),
        layer,
        spec,
    )
}

/// Pushes `layer` as `reference`, an image for `platform`, with `spec`'s entrypoint, command,
/// user and labels.
pub fn push_for(
    platform: Platform,
    crane: &Path,
    reference: &str,
    layer: &Path,
    spec: &ImageSpec<'_>,
) -> Result<(), NodeError> {
    let reference = reference.to_string();
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
        &format!("--set-platform={}", platform.oci()),
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
    stdout_of(cmd, what).map(drop)
}

/// Runs `cmd`; its standard output, or an error with its status and standard error.
pub(crate) fn stdout_of(cmd: &mut Command, what: &str) -> Result<String, NodeError> {
    let output = cmd.output().map_err(|source| NodeError::Io {
        what: what.to_string(),
        source,
    })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(NodeError::Command {
            what: what.to_string(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// crane's registry serving on `address` (`127.0.0.1:PORT`), its blobs in `storage`: the node's
/// mirror and the image build's scratch registry.
pub(crate) fn registry_serve(crane: &Path, address: &str, storage: &Path) -> Command {
    let mut cmd = Command::new(crane);
    cmd.args(["registry", "serve", "--address", address, "--disk"])
        .arg(storage);
    cmd
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The image written here and the one Containerfile builds carry the same user, entrypoint
    /// and labels.
    #[test]
    fn the_headroom_image_matches_containerfile() {
        let containerfile =
            fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Containerfile")).unwrap();
        for (key, value) in HEADROOM.labels {
            assert!(
                containerfile.contains(&format!("{key}=\"{value}\"")),
                "Containerfile lacks the label {key}=\"{value}\""
            );
        }
        assert!(containerfile.contains(&format!("USER {}", HEADROOM.user)));
        assert!(containerfile.contains(&format!(
            "ENTRYPOINT [\"{}\"]",
            HEADROOM.entrypoint.join("\", \"")
        )));
        // The image's tag and version label follow the workspace's version.
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            HEADROOM.repository.ends_with(&format!(":{version}")),
            "{}",
            HEADROOM.repository
        );
        assert!(
            HEADROOM_REFERENCE.ends_with(&format!(":{version}")),
            "{HEADROOM_REFERENCE}"
        );
        assert!(
            HEADROOM
                .labels
                .contains(&("org.opencontainers.image.version", version)),
            "the version label is not {version}"
        );
    }

    #[test]
    fn readelf_output_gives_the_interpreter_and_the_needed_libraries() {
        let headers = "  INTERP         0x000238 0x0000000000000238 0x0000000000000238 0x00001b 0x00001b R   0x1\n      [Requesting program interpreter: /lib/ld-linux-aarch64.so.1]\n  LOAD ...\n";
        assert_eq!(
            elf_interpreter(headers).as_deref(),
            Some("/lib/ld-linux-aarch64.so.1")
        );
        assert_eq!(elf_interpreter("  LOAD only\n"), None);
        let dynamic = " 0x0000000000000001 (NEEDED)             Shared library: [libgcc_s.so.1]\n 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]\n 0x000000000000000e (SONAME)             Library soname: [libfoo.so]\n";
        assert_eq!(elf_needed(dynamic), ["libgcc_s.so.1", "libc.so.6"]);
    }

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
