//! The tutorial's resize on the real node ([`crate::node`]), numbered, for the tests and
//! benchmarks that run it many times: repetition `n` is a victim `victim-n` (750m, low priority)
//! and a resizer `resizer-n` (1 CPU, high priority) in one namespace, and the resizer's patch to
//! 1500m fits only once the victim is gone (2 CPUs; [`crate::tutorial`]'s quarter of the seed).
use std::{
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    ControlPlane, ControlPlaneError,
    tutorial::{RESIZE_PATCH, RESIZED_QUOTA_US, cpu_quota_us},
};

#[derive(Debug, thiserror::Error)]
pub enum RepetitionError {
    #[error(transparent)]
    Kubectl(#[from] ControlPlaneError),
    #[error("repetition {rep}: {what} not within {waited:?}")]
    Timeout {
        rep: usize,
        what: &'static str,
        waited: Duration,
    },
    #[error("repetition {rep}'s Pods were not removed: {listed}")]
    Left { rep: usize, listed: String },
}

/// The repetitions' namespace and PriorityClasses (`<namespace>-low`, `<namespace>-high`).
#[derive(Debug, Clone)]
pub struct Repetitions {
    namespace: String,
}

impl Repetitions {
    /// Creates the namespace and the two PriorityClasses.
    pub fn create(plane: &ControlPlane, namespace: &str) -> Result<Repetitions, RepetitionError> {
        let repetitions = Repetitions {
            namespace: namespace.to_string(),
        };
        plane.kubectl_stdin(&["apply", "-f", "-"], &repetitions.fixtures())?;
        Ok(repetitions)
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn victim(rep: usize) -> String {
        format!("victim-{rep}")
    }

    pub fn resizer(rep: usize) -> String {
        format!("resizer-{rep}")
    }

    fn fixtures(&self) -> String {
        let ns = &self.namespace;
        format!(
            "apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {ns}-low}}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {ns}-high}}
value: 1000000
"
        )
    }

    /// Both Pods of repetition `rep`: 30 s of grace each; their container (busybox's httpd as
    /// `nginx`) exits at once on SIGTERM.
    fn pods(&self, rep: usize) -> String {
        let ns = &self.namespace;
        let pod = |name: &str, class: &str, cpu: &str| {
            format!(
                "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}}}
spec:
  priorityClassName: {ns}-{class}
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: nginx
    resources:
      requests: {{cpu: {cpu}, memory: 256Mi}}
      limits: {{cpu: {cpu}, memory: 256Mi}}
"
            )
        };
        format!(
            "{}---\n{}",
            pod(&Repetitions::victim(rep), "low", "750m"),
            pod(&Repetitions::resizer(rep), "high", "\"1\"")
        )
    }

    /// Creates repetition `rep`'s Pods and waits until both run; returns the resizer as the API
    /// server has it then (its container ID is all [`cpu_quota_us`] needs, and the resize keeps
    /// it).
    pub fn start(&self, plane: &ControlPlane, rep: usize) -> Result<Value, RepetitionError> {
        plane.kubectl_stdin(&["apply", "-f", "-"], &self.pods(rep))?;
        let names = [Repetitions::victim(rep), Repetitions::resizer(rep)];
        let waited = Duration::from_secs(90);
        let deadline = Instant::now() + waited;
        while !names.iter().all(|n| plane.pod_running(&self.namespace, n)) {
            if Instant::now() > deadline {
                return Err(RepetitionError::Timeout {
                    rep,
                    what: "both Pods running",
                    waited,
                });
            }
            thread::sleep(Duration::from_millis(100));
        }
        plane
            .get_json("pod", &self.namespace, &Repetitions::resizer(rep))
            .ok_or(RepetitionError::Timeout {
                rep,
                what: "the resizer listed",
                waited,
            })
    }

    /// `kubectl patch pod resizer-N --subresource resize` to 1500m.
    pub fn patch(&self, plane: &ControlPlane, rep: usize) -> Result<(), RepetitionError> {
        plane.kubectl_ok(&[
            "patch",
            "pod",
            &Repetitions::resizer(rep),
            "-n",
            &self.namespace,
            "--subresource",
            "resize",
            "--patch",
            RESIZE_PATCH,
        ])?;
        Ok(())
    }

    /// Whether the resize is whole: the kubelet's `allocatedResources` and the container's CFS
    /// quota both at 1500m. `resizer` is what [`Repetitions::start`] returned.
    pub fn resized(&self, plane: &ControlPlane, rep: usize, resizer: &Value) -> bool {
        // The cgroup first: a file read, where the API server's view costs a kubectl.
        cpu_quota_us(resizer) == Some(RESIZED_QUOTA_US)
            && plane
                .get_json("pod", &self.namespace, &Repetitions::resizer(rep))
                .is_some_and(|pod| {
                    pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "1500m"
                })
    }

    /// Removes repetition `rep`'s Pods (force, and waits until they are gone from the API
    /// server), checks that the namespace is empty, and gives the kubelet half a second to tear
    /// the sandboxes down before the next repetition needs the room.
    pub fn remove(&self, plane: &ControlPlane, rep: usize) -> Result<(), RepetitionError> {
        plane.kubectl_ok(&[
            "delete",
            "pod",
            &Repetitions::victim(rep),
            &Repetitions::resizer(rep),
            "-n",
            &self.namespace,
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
            "--wait=true",
            "--timeout=60s",
        ])?;
        let listed = plane.kubectl_ok(&["get", "pods", "-n", &self.namespace, "-o", "name"])?;
        if !listed.trim().is_empty() {
            return Err(RepetitionError::Left { rep, listed });
        }
        thread::sleep(Duration::from_millis(500));
        Ok(())
    }
}
