//! Small payloads written for one case, in temporary directories, and their lint.

use std::path::Path;

use tempfile::TempDir;

use super::{Context, Finding, Previous, Rule, lint};
use crate::filter::Filters;
use crate::payload::{Excluded, LoadOptions, load};
use crate::plan::{self, Mode, Plan};

/// The include annotations every test object gets.
pub const PROFILES: &str =
    "    include.release.openshift.io/self-managed-high-availability: \"true\"\n";

/// YAML of an object: `apiVersion`, `kind`, metadata (namespace when not empty, the
/// self-managed-high-availability profile, plus `annotations` lines), then `body`.
pub fn obj(api: &str, kind: &str, ns: &str, name: &str, annotations: &str, body: &str) -> String {
    let ns = if ns.is_empty() {
        String::new()
    } else {
        format!("  namespace: {ns}\n")
    };
    format!(
        "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}  annotations:\n{PROFILES}{annotations}{body}"
    )
}

/// Namespace `op`, the namespace of the one-operator test payloads.
pub fn op_namespace() -> String {
    obj("v1", "Namespace", "", "op", "", "")
}

/// Deployment `op/op`: one container `c` running `image`, after the pod-spec lines `pod`
/// (each indented by six spaces, e.g. `"      serviceAccountName: sa\n"`).
pub fn op_deployment(pod: &str, image: &str) -> String {
    obj(
        "apps/v1",
        "Deployment",
        "op",
        "op",
        "",
        &format!(
            "spec:\n  template:\n    spec:\n{pod}      containers:\n      - name: c\n        image: {image}\n"
        ),
    )
}

/// ClusterOperator `op`, waiting for `operator` at `version`.
pub fn op_cluster_operator(version: &str) -> String {
    obj(
        "config.openshift.io/v1",
        "ClusterOperator",
        "",
        "op",
        "",
        &format!("status:\n  versions:\n  - name: operator\n    version: \"{version}\"\n"),
    )
}

/// The delete annotation line, for [`obj`].
pub const DELETE: &str = "    release.openshift.io/delete: \"true\"\n";

/// Writes `files` (name, text) into a new payload's `release-manifests/`.
pub fn write(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let rm = dir.path().join("release-manifests");
    std::fs::create_dir(&rm).expect("mkdir");
    for (name, text) in files {
        std::fs::write(rm.join(name), text).expect("write");
    }
    dir
}

/// Loads a payload with the default filters (no placeholder substitution) and plans it in
/// updating mode: the manifests the load excluded, and the plan.
pub fn load_and_plan(dir: &Path, filters: &Filters) -> (Vec<Excluded>, Plan) {
    let options = LoadOptions {
        filters: filters.clone(),
        ..LoadOptions::default()
    };
    let mut payload = load(dir, &options).expect("payload loads");
    let excluded = std::mem::take(&mut payload.excluded);
    (
        excluded,
        plan::from_payload(payload, filters, Mode::Updating, 0),
    )
}

/// Lints `new` (with `old` as the previous payload when given) with the default filters.
pub fn lint_files(new: &[(&str, &str)], old: Option<&[(&str, &str)]>) -> Vec<Finding> {
    let new = write(new);
    let old = old.map(write);
    lint_dirs(new.path(), old.as_ref().map(TempDir::path))
}

/// Lints payload directories with the default filters.
pub fn lint_dirs(new: &Path, old: Option<&Path>) -> Vec<Finding> {
    lint_dirs_with(new, old, &Filters::default())
}

/// Lints payload directories under one profile.
pub fn lint_profile(new: &Path, old: Option<&Path>, profile: &str) -> Vec<Finding> {
    let filters = Filters {
        profile: profile.to_string(),
        ..Filters::default()
    };
    lint_dirs_with(new, old, &filters)
}

/// Lints payload directories with the given filters.
pub fn lint_dirs_with(new: &Path, old: Option<&Path>, filters: &Filters) -> Vec<Finding> {
    let (excluded, plan) = load_and_plan(new, filters);
    let previous = old.map(|o| load_and_plan(o, filters));
    let cx = Context::new(
        &plan,
        &excluded,
        previous.as_ref().map(|(_, plan)| Previous { plan }),
    );
    lint(&cx)
}

/// The findings of one rule.
pub fn of_rule(findings: &[Finding], rule: Rule) -> Vec<&Finding> {
    findings.iter().filter(|f| f.rule == rule).collect()
}

/// Every profile of the openshift-multi corpus.
pub const MULTI_PROFILES: &[&str] = &[
    "self-managed-high-availability",
    "single-node-developer",
    "ibm-cloud-managed",
    "hypershift",
];

/// The path of a shared corpus payload, relative to the crate root.
pub fn corpus(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/payloads")
        .join(name)
}
