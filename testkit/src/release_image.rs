//! headroom's image for linux/amd64 and linux/arm64 as one OCI index, built here without a
//! container engine, the way `Containerfile` describes it (stripped binaries on Debian's glibc
//! and libgcc, user 65532, OCI labels), and checked before it is written out.
//!
//! The two images go to a throw-away registry on 127.0.0.1 (crane's), crane joins them in an
//! index (the platform read from each config), and `crane pull --format oci` writes the index
//! with both images as an OCI image layout (`index.json`, `blobs/sha256/…`), which `skopeo copy
//! oci:DIR docker://REGISTRY/…` or `crane push DIR REF` publishes as is.
//!
//! The check reads the index back from the registry: both platforms present; each platform's
//! filesystem, exported through the index, holds the three programs as ELF files of that
//! machine, and each runs `--version` on the image's own loader and libraries only (amd64
//! through the image's `ld-linux-x86-64.so.2 --library-path`, arm64 under qemu-user with the
//! image as its root, `-L`), so a library the image lacks fails here, not on a node.
use std::{
    fs,
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    images::{self, HEADROOM, HEADROOM_PROGRAMS, Platform, stdout_of},
    node::NodeError,
    process::TerminatedOnDrop,
};

/// What was built, per platform.
#[derive(Debug)]
pub struct PlatformImage {
    pub platform: Platform,
    /// The image manifest's digest.
    pub digest: String,
    /// Compressed size of its layers, as a registry stores them.
    pub compressed_bytes: u64,
    /// What `--version` printed for each program, run on the image's own libraries.
    pub versions: Vec<String>,
}

/// The written layout and what it holds.
#[derive(Debug)]
pub struct ReleaseImage {
    pub layout: PathBuf,
    pub index_digest: String,
    pub images: Vec<PlatformImage>,
}

/// Where each platform's release binaries are.
pub struct Binaries<'a> {
    pub amd64: &'a Path,
    pub arm64: &'a Path,
}

/// Builds both images, joins them in an index, checks it, and writes it as an OCI layout to
/// `out/headroom-oci` (replacing an earlier one).
pub fn build(
    crane: &Path,
    binaries: &Binaries<'_>,
    workspace: &Path,
    out: &Path,
) -> Result<ReleaseImage, NodeError> {
    let work = out.join("work");
    if work.exists() {
        fs::remove_dir_all(&work).map_err(io(format!("clear {}", work.display())))?;
    }
    fs::create_dir_all(&work).map_err(io(format!("create {}", work.display())))?;
    let registry = Registry::start(crane, &work)?;
    // Tagged as the DaemonSet names it (`example.invalid/headroom/headroom:0.1.0`).
    let index_ref = format!("{}/{}", registry.address, HEADROOM.repository);
    let mut platform_refs = Vec::new();
    for platform in Platform::ALL {
        let release = match platform {
            Platform::Amd64 => binaries.amd64,
            Platform::Arm64 => binaries.arm64,
        };
        let layer = images::headroom_layer_for(platform, release, workspace, &work)?;
        let reference = format!("{index_ref}-{}", platform.arch());
        images::push_for(platform, crane, &reference, &layer, &HEADROOM)?;
        platform_refs.push(reference);
    }
    let mut index = Command::new(crane);
    index.args(["index", "append", "--insecure", "-t", &index_ref]);
    for reference in &platform_refs {
        index.args(["-m", reference]);
    }
    stdout_of(&mut index, "crane index append")?;

    let manifest: Value = json(&stdout_of(
        Command::new(crane).args(["manifest", "--insecure", &index_ref]),
        "crane manifest (the index)",
    )?)?;
    let index_digest = stdout_of(
        Command::new(crane).args(["digest", "--insecure", &index_ref]),
        "crane digest (the index)",
    )?
    .trim()
    .to_string();
    let listed = index_platforms(&manifest)?;
    let mut built = Vec::new();
    for platform in Platform::ALL {
        let Some(digest) = listed
            .iter()
            .find(|(p, _)| *p == platform.oci())
            .map(|(_, d)| d.clone())
        else {
            return Err(failed(
                "the index",
                format!("has no {} image; it lists {listed:?}", platform.oci()),
            ));
        };
        let image: Value = json(&stdout_of(
            Command::new(crane).args(["manifest", "--insecure", &format!("{index_ref}@{digest}")]),
            "crane manifest (an image)",
        )?)?;
        let compressed_bytes = image["layers"]
            .as_array()
            .map(|layers| layers.iter().filter_map(|l| l["size"].as_u64()).sum())
            .unwrap_or(0);
        let rootfs = work.join(format!("exported-{}", platform.arch()));
        export(crane, &index_ref, platform, &rootfs)?;
        let versions = check_rootfs(platform, &rootfs)?;
        built.push(PlatformImage {
            platform,
            digest,
            compressed_bytes,
            versions,
        });
    }

    let layout = out.join("headroom-oci");
    if layout.exists() {
        fs::remove_dir_all(&layout).map_err(io(format!("clear {}", layout.display())))?;
    }
    stdout_of(
        Command::new(crane)
            .args(["pull", "--insecure", "--format", "oci", &index_ref])
            .arg(&layout),
        "crane pull --format oci",
    )?;
    let written: Value = json(
        &fs::read_to_string(layout.join("index.json")).map_err(io("read the layout's index.json".into()))?,
    )?;
    let holds_index = written["manifests"].as_array().is_some_and(|m| {
        m.iter()
            .any(|d| d["digest"].as_str() == Some(index_digest.as_str()))
    });
    if !holds_index {
        return Err(failed(
            "the OCI layout",
            format!("its index.json does not name the index {index_digest}: {written}"),
        ));
    }
    drop(registry);
    fs::remove_dir_all(&work).map_err(io(format!("remove {}", work.display())))?;
    Ok(ReleaseImage {
        layout,
        index_digest,
        images: built,
    })
}

/// (platform as `os/arch`, manifest digest) of every entry of an image index.
pub fn index_platforms(index: &Value) -> Result<Vec<(String, String)>, NodeError> {
    let media = index["mediaType"].as_str().unwrap_or_default();
    if !media.ends_with("image.index.v1+json") && !media.ends_with("manifest.list.v2+json") {
        return Err(failed(
            "the index",
            format!("is not an image index (mediaType {media:?})"),
        ));
    }
    Ok(index["manifests"]
        .as_array()
        .map(|manifests| {
            manifests
                .iter()
                .filter_map(|m| {
                    let os = m["platform"]["os"].as_str()?;
                    let arch = m["platform"]["architecture"].as_str()?;
                    Some((format!("{os}/{arch}"), m["digest"].as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The filesystem of `platform`'s image, resolved through the index, unpacked at `rootfs`.
fn export(crane: &Path, index_ref: &str, platform: Platform, rootfs: &Path) -> Result<(), NodeError> {
    fs::create_dir_all(rootfs).map_err(io(format!("create {}", rootfs.display())))?;
    let tarball = rootfs.with_extension("tar");
    stdout_of(
        Command::new(crane)
            .args(["export", "--insecure", "--platform", platform.oci(), index_ref])
            .arg(&tarball),
        &format!("crane export --platform {}", platform.oci()),
    )?;
    stdout_of(
        Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(rootfs),
        "unpack the exported image",
    )?;
    Ok(())
}

/// Every program is an ELF file of `platform`'s machine and prints its version on the image's
/// own loader and libraries; what each printed.
fn check_rootfs(platform: Platform, rootfs: &Path) -> Result<Vec<String>, NodeError> {
    let mut versions = Vec::new();
    for program in HEADROOM_PROGRAMS {
        let binary = rootfs.join("usr/local/bin").join(program);
        let machine = elf_machine(&binary)?;
        if machine != platform.elf_machine() {
            return Err(failed(
                &format!("{program} in the {} image", platform.oci()),
                format!("is ELF machine {machine}, not {}", platform.elf_machine()),
            ));
        }
        let mut run = match platform {
            Platform::Amd64 => {
                let mut cmd = Command::new(rootfs.join("lib64/ld-linux-x86-64.so.2"));
                cmd.arg("--library-path")
                    .arg(rootfs.join("lib/x86_64-linux-gnu"))
                    .arg(&binary);
                cmd
            }
            Platform::Arm64 => {
                let mut cmd = Command::new("qemu-aarch64-static");
                cmd.arg("-L").arg(rootfs).arg(&binary);
                cmd
            }
        };
        run.arg("--version").env_clear();
        let printed = stdout_of(
            &mut run,
            &format!("{program} --version in the {} image", platform.oci()),
        )?;
        let first = printed.lines().next().unwrap_or_default().to_string();
        if !first.starts_with(program) {
            return Err(failed(
                &format!("{program} --version in the {} image", platform.oci()),
                format!("printed {printed:?}"),
            ));
        }
        versions.push(first);
    }
    Ok(versions)
}

fn elf_machine(binary: &Path) -> Result<u16, NodeError> {
    let bytes = fs::read(binary).map_err(io(format!("read {}", binary.display())))?;
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.len() < 20 {
        return Err(failed(&binary.display().to_string(), "is not an ELF file".into()));
    }
    Ok(u16::from_le_bytes([bytes[18], bytes[19]]))
}

/// crane's registry on 127.0.0.1, stopped when dropped.
struct Registry {
    address: String,
    _process: TerminatedOnDrop,
}

impl Registry {
    fn start(crane: &Path, work: &Path) -> Result<Self, NodeError> {
        let port = crate::supervisor::free_port().map_err(io("find a free port".into()))?;
        let address = format!("127.0.0.1:{port}");
        let storage = work.join("registry");
        fs::create_dir_all(&storage).map_err(io(format!("create {}", storage.display())))?;
        let log = fs::File::create(work.join("registry.log")).map_err(io("create registry.log".into()))?;
        let child = images::registry_serve(crane, &address, &storage)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io(format!("start {} registry serve", crane.display())))?;
        let process = TerminatedOnDrop(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&address).is_err() {
            if Instant::now() > deadline {
                return Err(NodeError::NotReady {
                    component: "registry".into(),
                    waiting_for: format!("{address} to accept connections"),
                    waited: Duration::from_secs(20),
                    log_tail: fs::read_to_string(work.join("registry.log")).unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self {
            address,
            _process: process,
        })
    }
}

fn json(text: &str) -> Result<Value, NodeError> {
    serde_json::from_str(text).map_err(|e| failed("crane's JSON", format!("{e}: {text}")))
}

fn failed(what: &str, why: String) -> NodeError {
    NodeError::Command {
        what: what.to_string(),
        status: "check failed".to_string(),
        stderr: why,
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> NodeError {
    move |source| NodeError::Io { what, source }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_index_lists_each_platform_with_its_digest() {
        let index = serde_json::json!({
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}},
                {"digest": "sha256:bb", "platform": {"os": "linux", "architecture": "arm64"}},
                {"digest": "sha256:cc"},
            ],
        });
        assert_eq!(
            index_platforms(&index).unwrap(),
            [
                ("linux/amd64".to_string(), "sha256:aa".to_string()),
                ("linux/arm64".to_string(), "sha256:bb".to_string())
            ]
        );
    }

    #[test]
    fn a_single_image_manifest_is_not_an_index() {
        let image = serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "layers": [],
        });
        let error = index_platforms(&image).unwrap_err().to_string();
        assert!(error.contains("not an image index"), "{error}");
    }
}
