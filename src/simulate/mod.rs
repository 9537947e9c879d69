//! Simulated operators: what stands in for a payload's operators on a test cluster, so that
//! the ClusterOperator waits of an apply finish the way they do on a real cluster.
//!
//! For each ClusterOperator of the payload ([`operators::operators`]), the simulator watches
//! the Deployments and DaemonSets of the operator's component and, once they carry the
//! payload's pod template (image, command, args, literal env, service account: where release
//! tooling puts the version), writes the ClusterOperator's `status.versions` from the
//! manifest and Available=True, Degraded=False, Progressing=False, after a delay. Each
//! operator can be scripted ([`script`]): delay, never report, Degraded, a wrong version,
//! flapping Available. With [`SimulatorOptions::wait_available`] it also waits until the
//! workload is rolled out and available, which needs a real cluster (kind): the test control
//! plane has no scheduler or kubelet, so pods never run there.
//!
//! ```text
//! watch Deployments, DaemonSets, ClusterOperators ──► per operator: workloads updated?
//!        ──► delay ──► status for the script ──► PATCH clusteroperators/<name>/status
//! ```
//!
//! With [`pods`] (the e2e harness turns them on), every Deployment and DaemonSet also has
//! live simulated pods, and an operator reports only once a pod of its new template acts for
//! its workloads, writing the status as that pod when the pod may
//! (`status_writer`).
//!
//! Modules: `run` (the operator loop), `events` (what both simulators report), `wake` (the
//! wait at the top of both loops), [`operators`](mod@operators), [`script`], [`status`], [`pods`].
//!
//! Used by `minicvo simulate` (long-running) and in-process by the e2e harness.

mod events;
pub mod operators;
pub mod pods;
mod run;
pub mod script;
pub mod status;
mod status_writer;
mod wake;

pub use events::{SimEvent, SimEventKind, SimObserver, SimSummary};
pub use operators::{OperatorSpec, Workload, operators};
pub use run::{FIELD_MANAGER, Simulator, SimulatorOptions, cluster_operators};
pub use script::{Report, Script, ScriptPhase, Scripts, Spec};
