//! Which Pod and container a cgroup path belongs to, for every layout the kubelet makes
//! (systemd and cgroupfs drivers; containerd, cri-o and docker scopes; v1 and v2 alike,
//! since the path below the hierarchy root is the same) and for headroom's standalone one.

/// The Pod (and maybe container) a cgroup belongs to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PodCgroup {
    /// Pod UID with dashes (`97dba925-6b5f-4e2f-99f9-d51c30016586`).
    pub pod_uid: String,
    /// Container id (runtime id for kubelet layouts, container name for standalone);
    /// `None` for the Pod-level cgroup itself.
    pub container: Option<String>,
    /// QoS class directory (`guaranteed`, `burstable`, `besteffort`) when the layout shows it.
    pub qos: Option<&'static str>,
}

/// Parses a cgroup path relative to its hierarchy root (leading `/` optional).
///
/// Returns `None` for cgroups that are not a Pod's or a container's (system slices, the
/// `kubepods` and QoS levels themselves, anything unrecognised).
pub fn parse_pod_path(relative: &str) -> Option<PodCgroup> {
    parse_pod_path_under(relative, &[])
}

/// As [`parse_pod_path`], also accepting Pod directories under `pod_roots` (a standalone node's
/// `--cgroup-root`, beside the default `headroom`).
pub fn parse_pod_path_under(relative: &str, pod_roots: &[String]) -> Option<PodCgroup> {
    let parts: Vec<&str> = relative.split('/').filter(|p| !p.is_empty()).collect();
    // Find the Pod level: the first component naming a Pod, in any layout.
    let (index, pod_uid) = parts
        .iter()
        .enumerate()
        .find_map(|(i, part)| pod_uid_of(part).map(|uid| (i, uid)))?;
    // A Pod directory only counts under a known parent (kubepods… or headroom).
    let root = parts.first()?;
    let known_root =
        root.starts_with("kubepods") || *root == "headroom" || pod_roots.iter().any(|r| r == root);
    if !known_root {
        return None;
    }
    let qos = parts[..index].iter().find_map(|part| qos_of(part));
    let container = match parts.get(index + 1) {
        None => None,
        Some(child) if parts.len() == index + 2 => Some(container_id_of(child)?),
        Some(_) => return None, // deeper than a container: not ours to name
    };
    Some(PodCgroup {
        pod_uid,
        container,
        qos,
    })
}

/// `pod<uid>` (cgroupfs driver, headroom) or `kubepods[-qos]-pod<uid_with_underscores>.slice`.
fn pod_uid_of(part: &str) -> Option<String> {
    let uid = if let Some(slice) = part.strip_suffix(".slice") {
        let (_, after) = slice.rsplit_once("-pod")?;
        after.replace('_', "-")
    } else {
        part.strip_prefix("pod")?.to_string()
    };
    is_uid(&uid).then_some(uid)
}

fn is_uid(text: &str) -> bool {
    // RFC 4122 text form; static Pods use the config hash (32 hex digits) instead.
    let hex_or_dash = text.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    hex_or_dash
        && (text.len() == 36 && text.matches('-').count() == 4 || text.len() == 32 && !text.contains('-'))
}

fn qos_of(part: &str) -> Option<&'static str> {
    let part = part.strip_suffix(".slice").unwrap_or(part);
    if part.ends_with("burstable") {
        Some("burstable")
    } else if part.ends_with("besteffort") {
        Some("besteffort")
    } else {
        None
    }
}

/// Container id from `cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`,
/// a bare `<id>` (cgroupfs driver) or a container name (headroom standalone).
fn container_id_of(part: &str) -> Option<String> {
    if let Some(scope) = part.strip_suffix(".scope") {
        let id = ["cri-containerd-", "crio-conmon-", "crio-", "docker-", "cri-o-"]
            .iter()
            .find_map(|prefix| scope.strip_prefix(prefix))?;
        return (!id.is_empty()).then(|| id.to_string());
    }
    if part.contains('.') {
        return None; // some other unit (`*.mount`, `*.service`)
    }
    Some(part.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "97dba925-6b5f-4e2f-99f9-d51c30016586";
    const UID_: &str = "97dba925_6b5f_4e2f_99f9_d51c30016586";
    const CID: &str = "4f1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcdef";

    fn pod(container: Option<&str>, qos: Option<&'static str>) -> Option<PodCgroup> {
        Some(PodCgroup {
            pod_uid: UID.into(),
            container: container.map(str::to_string),
            qos,
        })
    }

    #[test]
    fn systemd_driver_layouts() {
        let burstable =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice");
        assert_eq!(parse_pod_path(&burstable), pod(None, Some("burstable")));
        assert_eq!(
            parse_pod_path(&format!("{burstable}/cri-containerd-{CID}.scope")),
            pod(Some(CID), Some("burstable"))
        );
        let guaranteed = format!("/kubepods.slice/kubepods-pod{UID_}.slice/crio-{CID}.scope");
        assert_eq!(parse_pod_path(&guaranteed), pod(Some(CID), None));
        let besteffort = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{CID}.scope"
        );
        assert_eq!(parse_pod_path(&besteffort), pod(Some(CID), Some("besteffort")));
    }

    #[test]
    fn cgroupfs_driver_layouts() {
        assert_eq!(
            parse_pod_path(&format!("/kubepods/burstable/pod{UID}/{CID}")),
            pod(Some(CID), Some("burstable"))
        );
        assert_eq!(parse_pod_path(&format!("/kubepods/pod{UID}")), pod(None, None));
        assert_eq!(
            parse_pod_path(&format!("kubepods/besteffort/pod{UID}")),
            pod(None, Some("besteffort"))
        );
    }

    #[test]
    fn headroom_standalone_layout() {
        assert_eq!(
            parse_pod_path(&format!("/headroom/pod{UID}/app")),
            pod(Some("app"), None)
        );
    }

    #[test]
    fn a_configured_standalone_root_is_recognised_and_only_that_one() {
        let path = format!("/my-node/pod{UID}/app");
        assert_eq!(parse_pod_path(&path), None);
        assert_eq!(
            parse_pod_path_under(&path, &["my-node".into()]),
            pod(Some("app"), None)
        );
        assert_eq!(
            parse_pod_path_under(&format!("/other/pod{UID}/app"), &["my-node".into()]),
            None
        );
    }

    #[test]
    fn not_pods() {
        for path in [
            "/",
            "/system.slice/containerd.service",
            "/kubepods.slice",
            "/kubepods.slice/kubepods-burstable.slice",
            "/user.slice/pod97dba925-6b5f-4e2f-99f9-d51c30016586",
            "/kubepods/podnot-a-uid",
            &format!("/kubepods/pod{UID}/{CID}/deeper"),
            &format!("/kubepods.slice/kubepods-pod{UID_}.slice/var-lib.mount"),
        ] {
            assert_eq!(parse_pod_path(path), None, "{path}");
        }
    }
}
