//! Embeds the probe object built by `cargo xtask build-ebpf` (the commit comes from
//! `headroom_client::GIT_COMMIT`).
//!
//! A plain `cargo build` must work without the BPF toolchain, so a missing object is not an
//! error here: an empty one is embedded and the loader refuses it at run time with a message
//! that says how to build the probes.
use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let object = env::var_os("HEADROOM_PROBES_OBJECT")
        .map_or_else(|| manifest.join("../target/bpf/headroom-probes.o"), PathBuf::from);
    println!("cargo:rerun-if-env-changed=HEADROOM_PROBES_OBJECT");
    println!("cargo:rerun-if-changed={}", object.display());
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("headroom-probes.o");
    let bytes = fs::read(&object).unwrap_or_default();
    fs::write(&out, bytes).expect("write probe object into OUT_DIR");
}
