//! Every crate's `license` field has its license text beside it: the root workspace's crates
//! (`MIT OR Apache-2.0`, inherited) at the repository root, the probes (`MIT OR GPL-2.0`) in
//! `ebpf/`. The probes' object also declares its licence to the kernel (the `license` section,
//! which decides whether GPL-only helpers load); that string must say the same as the crate.
//!
//! Run by `cargo xtask test` (lint step) and by this module's tests.
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::progress;

/// The SPDX identifiers headroom uses, the file each one's text lives in (the Rust projects'
/// `LICENSE-<ID>` convention) and a line only that licence's full text contains.
const TEXTS: &[(&str, &str, &str)] = &[
    (
        "MIT",
        "LICENSE-MIT",
        "Permission is hereby granted, free of charge, to any person obtaining a copy",
    ),
    ("Apache-2.0", "LICENSE-APACHE", "END OF TERMS AND CONDITIONS"),
    ("GPL-2.0", "LICENSE-GPL-2.0", "GNU GENERAL PUBLIC LICENSE"),
];

/// The kernel's name (the `license` section) for each dual licence the probes may carry: the
/// kernel's `license_is_gpl_compatible` accepts "Dual MIT/GPL" for MIT OR GPL-2.0.
const KERNEL_LICENSE: &[(&str, &str)] = &[("MIT OR GPL-2.0", "Dual MIT/GPL")];

/// One crate's manifest and the licence expression it declares (after workspace inheritance).
#[derive(Debug)]
struct Declared {
    manifest: PathBuf,
    expression: String,
}

/// Checks every crate under `root` (the root workspace's members and the workspaces of their
/// own, `ebpf/` and `fuzz/`); all problems are reported together.
pub(crate) fn check(root: &Path) -> Result<()> {
    progress("lint: every crate's license field has its license text");
    let mut problems = Vec::new();
    for declared in declared(root)? {
        problems.extend(problems_of(root, &declared));
    }
    problems.extend(kernel_section(root)?);
    if !problems.is_empty() {
        bail!("licenses:\n  {}", problems.join("\n  "));
    }
    Ok(())
}

/// The root manifest and every `*/Cargo.toml` one level below it (where all crates live).
fn declared(root: &Path) -> Result<Vec<Declared>> {
    let root_manifest = root.join("Cargo.toml");
    let workspace: toml::Table = read_toml(&root_manifest)?;
    let inherited = workspace
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("license"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned);
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(root).with_context(|| format!("list {}", root.display()))? {
        let manifest = entry?.path().join("Cargo.toml");
        if manifest.is_file() {
            manifests.push(manifest);
        }
    }
    manifests.sort();
    let mut out = Vec::new();
    for manifest in manifests {
        let table = read_toml(&manifest)?;
        let Some(package) = table.get("package") else {
            continue;
        };
        let expression = match package.get("license") {
            Some(toml::Value::String(s)) => Some(s.clone()),
            // `license.workspace = true`: the root workspace's value.
            Some(toml::Value::Table(t)) if t.get("workspace") == Some(&toml::Value::Boolean(true)) => {
                inherited.clone()
            }
            _ => None,
        };
        out.push(Declared {
            manifest,
            expression: expression.unwrap_or_default(),
        });
    }
    Ok(out)
}

fn read_toml(path: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    text.parse().with_context(|| format!("parse {}", path.display()))
}

/// What is wrong with one crate: no licence, an identifier headroom has no text for, or a text
/// missing (or not the full text) in the crate's directory and every directory up to `root`.
fn problems_of(root: &Path, declared: &Declared) -> Vec<String> {
    let name = declared.manifest.display();
    if declared.expression.trim().is_empty() {
        return vec![format!("{name}: no `license` field")];
    }
    let crate_dir = declared.manifest.parent().unwrap_or(root);
    let mut problems = Vec::new();
    for id in spdx_ids(&declared.expression) {
        let Some((_, file, marker)) = TEXTS.iter().find(|(known, _, _)| *known == id) else {
            problems.push(format!("{name}: no license text known for SPDX id {id:?}"));
            continue;
        };
        let found = crate_dir
            .ancestors()
            .take_while(|dir| dir.starts_with(root))
            .map(|dir| dir.join(file))
            .find(|path| path.is_file());
        match found {
            None => problems.push(format!(
                "{name}: license {id} but no {file} in {} or above",
                crate_dir.display()
            )),
            Some(path) => {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if !text.contains(marker) {
                    problems.push(format!(
                        "{}: not the full {id} text (no {marker:?})",
                        path.display()
                    ));
                }
            }
        }
    }
    problems
}

/// The identifiers of an SPDX expression (`A OR B`, `A AND (B OR C)`, `A WITH exception`).
fn spdx_ids(expression: &str) -> Vec<&str> {
    let mut ids = Vec::new();
    let mut after_with = false;
    for token in expression.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        match token {
            "" => {}
            "OR" | "AND" => after_with = false,
            "WITH" => after_with = true,
            // An exception names no licence text of its own here.
            _ if after_with => after_with = false,
            id => ids.push(id.trim_end_matches('+')),
        }
    }
    ids
}

/// The probes' `license` section says what `ebpf/Cargo.toml` says.
fn kernel_section(root: &Path) -> Result<Vec<String>> {
    let manifest = root.join("ebpf/Cargo.toml");
    let source = root.join("ebpf/src/main.rs");
    if !manifest.is_file() {
        return Ok(Vec::new());
    }
    let table = read_toml(&manifest)?;
    let expression = table
        .get("package")
        .and_then(|p| p.get("license"))
        .and_then(toml::Value::as_str)
        .unwrap_or_default();
    let Some((_, kernel)) = KERNEL_LICENSE.iter().find(|(e, _)| *e == expression) else {
        return Ok(vec![format!(
            "{}: no kernel licence string known for {expression:?}",
            manifest.display()
        )]);
    };
    let text = std::fs::read_to_string(&source).with_context(|| format!("read {}", source.display()))?;
    let wanted = format!("*b\"{kernel}\\0\"");
    let declared = text.contains("link_section = \"license\"") && text.contains(&wanted);
    Ok(if declared {
        Vec::new()
    } else {
        vec![format!(
            "{}: the `license` section is not {kernel:?} (ebpf/Cargo.toml says {expression})",
            source.display()
        )]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crate_has_its_license_text() {
        let root = crate::workspace_root();
        let declared = declared(&root).expect("read the manifests");
        // The root workspace's members and the two workspaces of their own are all seen.
        for krate in ["common", "daemon", "client", "xtask", "ebpf", "fuzz"] {
            assert!(
                declared
                    .iter()
                    .any(|d| d.manifest == root.join(krate).join("Cargo.toml")),
                "{krate} not checked: {declared:?}"
            );
        }
        check(&root).expect("every license field has its text");
    }

    #[test]
    fn spdx_expressions_name_their_ids() {
        assert_eq!(spdx_ids("MIT OR Apache-2.0"), ["MIT", "Apache-2.0"]);
        assert_eq!(
            spdx_ids("(MIT OR GPL-2.0) AND Apache-2.0"),
            ["MIT", "GPL-2.0", "Apache-2.0"]
        );
        assert_eq!(spdx_ids("GPL-2.0+ WITH Linux-syscall-note"), ["GPL-2.0"]);
    }

    #[test]
    fn a_missing_or_partial_text_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(
            root.join("Cargo.toml"),
            "[workspace.package]\nlicense = \"MIT OR Apache-2.0\"\n",
        )
        .expect("write");
        std::fs::create_dir(root.join("a")).expect("mkdir");
        std::fs::write(
            root.join("a/Cargo.toml"),
            "[package]\nname = \"a\"\nlicense.workspace = true\n",
        )
        .expect("write");
        std::fs::create_dir(root.join("b")).expect("mkdir");
        std::fs::write(root.join("b/Cargo.toml"), "[package]\nname = \"b\"\n").expect("write");
        // MIT's text is there; Apache's is only a pointer, not the text.
        std::fs::write(
            root.join("LICENSE-MIT"),
            "Permission is hereby granted, free of charge, to any person obtaining a copy\n",
        )
        .expect("write");
        std::fs::write(root.join("LICENSE-APACHE"), "see apache.org\n").expect("write");
        let err = format!("{:#}", check(root).expect_err("problems found"));
        assert!(err.contains("not the full Apache-2.0 text"), "{err}");
        assert!(err.contains("b/Cargo.toml: no `license` field"), "{err}");
        assert!(!err.contains("LICENSE-MIT"), "{err}");
    }
}
