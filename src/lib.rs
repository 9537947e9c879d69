//! minicvo rolls an OpenShift release payload onto any Kubernetes cluster the way the Cluster
//! Version Operator (CVO) does, and shows, diffs, lints and tests that rollout.
//!
//! The pipeline, one module per stage:
//!
//! 1. [`payload`]: read `manifests/` (templated) then `release-manifests/`, each sorted by
//!    file name; parse multi-document YAML/JSON with kubectl's YAML 1.1 scalars; read
//!    `release-metadata` and `image-references`. One bad document rejects the payload.
//! 2. [`filter`]: the CVO's inclusion checks in its order (exclude id, feature set and gates,
//!    major version, profile at load; capabilities and overrides at apply).
//! 3. [`plan`]: the CVO's task graph. Jobs are barriers; the mode's break function cuts the
//!    task list into run-level steps of parallel component nodes, node for node as the CVO
//!    builds it.
//! 4. [`output`]: the plan as text, JSON or DOT, and the rendered objects.
//! 5. [`analysis`]: offline payload review: the upgrade plan between two payloads and the
//!    ordering-hazard lint.
//! 6. [`apply`]: the execute stage: a preflight (missing kinds and namespaces, before
//!    anything is written), the CVO's parallel graph walk ([`apply::engine`]) and the actions
//!    it runs ([`apply::actions`], one module per action and per wait: `apply`, `cvo`,
//!    `delete`, `crd_wait`, `operator_wait`, `namespace_wait`, all over one `handle`), progress
//!    events, a report and the ClusterVersion record. Every
//!    request goes through [`cluster`], the one HTTP layer (connection, typed request errors,
//!    retries, watches, discovery); the ClusterOperator health rule shared with the simulator
//!    is [`clusteroperator`].
//! 7. [`diff`]: the live preview: every task compared with the cluster by server-side dry
//!    runs, nothing written.
//! 8. [`simulate`], [`e2e`], [`stub_crds`]: upgrade e2e tests: simulated operators that report
//!    their ClusterOperators, stand-in CRDs for OpenShift kinds on plain Kubernetes, and a
//!    harness that installs one payload, upgrades to another and checks the order of events.
//!
//! 9. [`schema`]: offline schema validation of objects against the built-in kinds of a
//!    Kubernetes version and the CRDs of the payload (used by `lint`).
//! 10. [`image`]: release images as payloads: pull (registry, OCI layout, archives), verify
//!     and extract `release-manifests/` and `manifests/` into a cached payload directory.
//! 11. [`rbac`]: RBAC policy rules as data (what grants what), shared by the lint and the
//!     simulated pods.
//! 12. [`update_graph`]: the update graph (Cincinnati) and what the CVO makes of it:
//!     `availableUpdates`, `conditionalUpdates`, `RetrievedUpdates`; [`upgrade_status`]: what
//!     `oc adm upgrade` shows of a ClusterVersion (`minicvo status`).
//!
//! Pure stages do no cluster I/O and are tested without one.

pub mod analysis;
pub mod apply;
pub mod cluster;
pub mod clusteroperator;
pub mod cvo;
pub mod diff;
pub mod e2e;
pub mod filter;
pub mod image;
pub mod manifest;
pub mod merge;
pub mod operator;
pub mod output;
pub mod payload;
pub mod plan;
pub mod rbac;
pub mod schema;
pub mod simulate;
pub mod stub_crds;
pub mod update_graph;
pub mod upgrade_status;

pub use filter::Filters;
pub use manifest::{Manifest, ObjectId};
pub use payload::{LoadError, LoadOptions, ObjectDetail, ParseCache, Payload, load};
pub use plan::{Action, Mode, Plan, Task};
