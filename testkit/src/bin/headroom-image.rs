//! `cargo xtask image`: headroom's image for linux/amd64 and linux/arm64, one OCI index,
//! written as an OCI image layout and checked (`headroom_testkit::release_image`).
//!
//!     headroom-image --crane PATH --amd64 DIR --arm64 DIR --workspace DIR --out DIR
use std::{path::PathBuf, process::ExitCode};

use headroom_testkit::{
    images,
    release_image::{self, Binaries},
};

fn main() -> ExitCode {
    let mut crane = None;
    let mut amd64 = None;
    let mut arm64 = None;
    let mut workspace = None;
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--crane" => &mut crane,
            "--amd64" => &mut amd64,
            "--arm64" => &mut arm64,
            "--workspace" => &mut workspace,
            "--out" => &mut out,
            other => {
                eprintln!("headroom-image: unknown argument {other}");
                return ExitCode::from(2);
            }
        };
        let Some(value) = args.next() else {
            eprintln!("headroom-image: {arg} needs a value");
            return ExitCode::from(2);
        };
        *slot = Some(PathBuf::from(value));
    }
    let (Some(crane), Some(amd64), Some(arm64), Some(workspace), Some(out)) =
        (crane, amd64, arm64, workspace, out)
    else {
        eprintln!("headroom-image: --crane, --amd64, --arm64, --workspace and --out are all needed");
        return ExitCode::from(2);
    };
    let binaries = Binaries {
        amd64: &amd64,
        arm64: &arm64,
    };
    match release_image::build(&crane, &binaries, &workspace, &out) {
        Ok(image) => {
            println!(
                "headroom-image: {} index {} written as an OCI layout at {}",
                images::HEADROOM.repository,
                image.index_digest,
                image.layout.display()
            );
            for built in &image.images {
                println!(
                    "headroom-image:   {:<12} {} {:>6.1} MiB compressed; on its own libraries: {}",
                    built.platform.oci(),
                    built.digest,
                    built.compressed_bytes as f64 / (1024.0 * 1024.0),
                    built.versions.join("; ")
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("headroom-image: {error}");
            ExitCode::FAILURE
        }
    }
}
