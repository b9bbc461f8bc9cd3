//! The generated Rust in `src/generated/` is committed; this test regenerates it into a temporary
//! directory with `protox` (no `protoc` needed), `tonic-prost-build` and `pbjson-build` (the
//! proto3 JSON mapping as serde impls), and fails if the
//! committed files differ. `HEADROOM_REGENERATE=1 cargo test -p headroom-proto --test codegen`
//! rewrites them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use prost::Message as _;

const FILES: &[&str] = &[
    "headroom.v1.rs",
    "headroom.v1.serde.rs",
    "headroom_v1_descriptor.bin",
];

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
    let descriptor = fds.encode_to_vec();
    std::fs::write(out.join("headroom_v1_descriptor.bin"), &descriptor).expect("write descriptor");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(true)
        // pbjson's well-known types: the same messages, with the proto3 JSON mapping
        // (RFC 3339 timestamps), so that every message's serde impls below can include them.
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .out_dir(out)
        .compile_fds(fds)
        .expect("generate Rust");
    // serde impls with the canonical proto3 JSON mapping (lowerCamelCase names, 64-bit integers
    // as strings, RFC 3339 timestamps), every field emitted, so `-o json` drops none.
    pbjson_build::Builder::new()
        .register_descriptors(&descriptor)
        .expect("register descriptors")
        .out_dir(out)
        .emit_fields()
        .build(&[".headroom.v1"])
        .expect("generate serde impls");
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
