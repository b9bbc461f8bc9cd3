//! Confinement: every cgroup headroom writes lies under a configured Pod cgroup root, reached
//! through validated single path components and no symlinks.

use std::path::{Component, Path, PathBuf};

/// A refused path or identifier.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("invalid {kind} `{id}`: {reason}")]
    InvalidId {
        kind: &'static str,
        id: String,
        reason: &'static str,
    },
    #[error("cgroup root `{}` must be an absolute path without `.` or `..`", path.display())]
    BadRoot { path: PathBuf },
    #[error("`{}` is outside the configured pod cgroup roots", path.display())]
    OutsideRoots { path: PathBuf },
    #[error("`{}` is a symlink or not a directory; refusing to follow it", path.display())]
    NotADirectory { path: PathBuf },
    #[error("inspect `{}`: {source}", path.display())]
    Inspect { path: PathBuf, source: std::io::Error },
}

/// Longest id accepted (a cgroup directory name is at most NAME_MAX = 255 bytes).
pub const MAX_ID_LEN: usize = 253;

/// Accepts Pod UIDs, container names and container ids: `[A-Za-z0-9_.-]`, not starting with `.`.
/// Refuses `..`, `/`, NUL and everything else that could leave the root.
pub fn validate_id(kind: &'static str, id: &str) -> Result<(), PathError> {
    let fail = |reason| {
        Err(PathError::InvalidId {
            kind,
            id: id.escape_debug().to_string(),
            reason,
        })
    };
    if id.is_empty() {
        return fail("empty");
    }
    if id.len() > MAX_ID_LEN {
        return fail("too long");
    }
    if id.contains('\0') {
        return fail("contains NUL");
    }
    if id.contains('/') {
        return fail("contains `/`");
    }
    if id.starts_with('.') {
        return fail("starts with `.`");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return fail("only ASCII letters, digits, `-`, `_` and `.` are allowed");
    }
    Ok(())
}

/// A configured root must be absolute and normal (no `.`/`..`).
pub fn validate_root(root: &Path) -> Result<(), PathError> {
    let normal = root.is_absolute()
        && root
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if normal {
        Ok(())
    } else {
        Err(PathError::BadRoot {
            path: root.to_path_buf(),
        })
    }
}

/// `root/<c0>/<c1>...` after validating each component.
pub fn confined_join(root: &Path, components: &[(&'static str, &str)]) -> Result<PathBuf, PathError> {
    validate_root(root)?;
    let mut path = root.to_path_buf();
    for (kind, c) in components {
        validate_id(kind, c)?;
        path.push(c);
    }
    Ok(path)
}

/// Lexical check that `path` is `root` or below it (for paths read back from intent records).
pub fn is_within(root: &Path, path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && path.starts_with(root)
}

/// Every existing component from `root` (exclusive) down to `path` is a real directory, not a
/// symlink. Missing components are fine (they will be created with `mkdir`, which never follows).
pub fn check_no_symlinks(root: &Path, path: &Path) -> Result<(), PathError> {
    let rel = path.strip_prefix(root).map_err(|_| PathError::OutsideRoots {
        path: path.to_path_buf(),
    })?;
    let mut cur = root.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => return Err(PathError::NotADirectory { path: cur }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(PathError::Inspect { path: cur, source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused() {
        for bad in [
            "", "..", ".", "../x", "a/b", "/", "a\0b", ".hidden", "a b", "é", "x\n",
        ] {
            assert!(validate_id("pod uid", bad).is_err(), "{bad:?} accepted");
        }
        for good in ["8f1e1c4e-1b2a-4b7e-9b1e-0c2d3e4f5a6b", "app", "sidecar.v2", "c_1"] {
            validate_id("pod uid", good).expect(good);
        }
        let long = "a".repeat(MAX_ID_LEN + 1);
        assert!(validate_id("container", &long).is_err());
    }

    #[test]
    fn roots_and_joins() {
        assert!(validate_root(Path::new("relative")).is_err());
        assert!(validate_root(Path::new("/sys/fs/cgroup/../etc")).is_err());
        let p = confined_join(Path::new("/r"), &[("pod", "pod1"), ("container", "c")]).expect("join");
        assert_eq!(p, Path::new("/r/pod1/c"));
        assert!(confined_join(Path::new("/r"), &[("pod", "..")]).is_err());
        assert!(is_within(Path::new("/r"), Path::new("/r/a/b")));
        assert!(!is_within(Path::new("/r"), Path::new("/r/../etc")));
        assert!(!is_within(Path::new("/r"), Path::new("/rx/a")));
    }

    #[test]
    fn symlinks_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        std::fs::create_dir(root.join("real")).expect("mkdir");
        std::os::unix::fs::symlink("/tmp", root.join("link")).expect("symlink");
        check_no_symlinks(root, &root.join("real/missing")).expect("real dir");
        assert!(matches!(
            check_no_symlinks(root, &root.join("link/x")),
            Err(PathError::NotADirectory { .. })
        ));
    }
}
