//! The generated Rust in `src/generated/` is committed; this test regenerates it into a temporary
//! directory with `protox` (no `protoc` needed) and `tonic-prost-build`, and fails if the
//! committed files differ. `HEADROOM_REGENERATE=1 cargo test -p headroom-proto --test codegen`
//! rewrites them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use prost::Message as _;

const FILES: &[&str] = &["headroom.v1.rs", "headroom_v1_descriptor.bin"];

fn generate(out: &Path) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut fds = protox::compile(
        ["headroom/v1/headroom.proto", "headroom/v1/standalone.proto"],
        [root.join("proto")],
    )
    .expect("compile proto");
    // Keep the descriptor independent of where the checkout lives and of well-known imports
    // being listed: only our file and its dependencies, sorted by name.
    fds.file.sort_by(|a, b| a.name.cmp(&b.name));
    std::fs::write(out.join("headroom_v1_descriptor.bin"), fds.encode_to_vec()).expect("write descriptor");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(true)
        .out_dir(out)
        .compile_fds(fds)
        .expect("generate Rust");
}

#[test]
fn generated_code_is_up_to_date() {
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let tmp = tempfile::tempdir().expect("tempdir");
    generate(tmp.path());
    let regenerate = std::env::var_os("HEADROOM_REGENERATE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for file in FILES {
        let fresh = std::fs::read(tmp.path().join(file)).unwrap();
        let old = std::fs::read(committed.join(file)).unwrap_or_default();
        if fresh != old {
            if regenerate {
                std::fs::write(committed.join(file), &fresh).unwrap();
            } else {
                stale.push(*file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated files {stale:?} differ from proto/proto/headroom/v1/*.proto; \
         run `HEADROOM_REGENERATE=1 cargo test -p headroom-proto --test codegen` and commit the result"
    );
}
