use serde_json::{Value, json};

use super::super::testutil::{
    lint_files, obj, of_rule, op_cluster_operator, op_deployment, op_namespace,
};
use super::super::{Rule, Severity};
use super::lost_rights;
use crate::manifest::{Manifest, ObjectId, Source};

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

fn namespace() -> String {
    op_namespace()
}

fn deployment(image: &str) -> String {
    op_deployment("", image)
}

fn cluster_operator() -> String {
    op_cluster_operator("1.0.0")
}

/// ClusterRole `op` with `rules` (YAML list lines).
fn role(rules: &str) -> String {
    obj(
        RBAC_API,
        "ClusterRole",
        "",
        "op",
        "",
        &format!("rules:\n{rules}"),
    )
}

/// ClusterRoleBinding `op` of ClusterRole `role` to `subjects` (YAML list lines).
fn binding(role: &str, subjects: &str) -> String {
    obj(
        RBAC_API,
        "ClusterRoleBinding",
        "",
        "op",
        "",
        &format!(
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\nsubjects:\n{subjects}"
        ),
    )
}

const DEFAULT_SA: &str = "- kind: ServiceAccount\n  name: default\n  namespace: op\n";
const OTHER_SA: &str = "- kind: ServiceAccount\n  name: other\n  namespace: op\n";
const FULL: &str = "- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: [get, update, create]\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n";
const NARROW: &str = "- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: [get]\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n";
const WIDE: &str = "- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: [\"*\"]\n- apiGroups: [\"\"]\n  resources: [configmaps, secrets]\n  verbs: [get, list, watch]\n";

/// The old release: Deployment `op/op` runs as `op/default`, which ClusterRoleBinding `op`
/// grants ClusterRole `op` with [`FULL`] rules.
fn old() -> Vec<(&'static str, String)> {
    vec![
        ("0000_50_op_00_namespace.yaml", namespace()),
        ("0000_50_op_02_role.yaml", role(FULL)),
        ("0000_50_op_03_binding.yaml", binding("op", DEFAULT_SA)),
        ("0000_50_op_04_deployment.yaml", deployment("old")),
        ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
    ]
}

/// The new release: `extra` files (the changed RBAC objects at their positions) replace the
/// old RBAC files.
fn new(extra: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    let mut files = vec![
        ("0000_50_op_00_namespace.yaml", namespace()),
        ("0000_50_op_04_deployment.yaml", deployment("new")),
        ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
    ];
    files.extend(extra);
    files
}

/// Payload files: name and text.
type Files = Vec<(&'static str, String)>;

fn refs<'a>(files: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    files.iter().map(|(n, t)| (*n, t.as_str())).collect()
}

fn hits(extra: Vec<(&'static str, String)>) -> Vec<super::super::Finding> {
    let findings = lint_files(&refs(&new(extra)), Some(&refs(&old())));
    of_rule(&findings, Rule::RightsLostBeforeRollout)
        .into_iter()
        .cloned()
        .collect()
}

/// The old binding, unchanged.
fn keep_binding() -> (&'static str, String) {
    ("0000_50_op_03_binding.yaml", binding("op", DEFAULT_SA))
}

#[test]
fn shapes_table() {
    // (case, NEW's RBAC files, expected number of findings, text every finding contains)
    let cases: Vec<(&str, Files, usize, &str)> = vec![
        (
            "narrowed before the update",
            vec![("0000_50_op_02_role.yaml", role(NARROW)), keep_binding()],
            1,
            "before the update of Deployment.apps op/op",
        ),
        (
            "narrowed after the update, before the ClusterOperator wait",
            vec![("0000_50_op_05_role.yaml", role(NARROW)), keep_binding()],
            1,
            "before ClusterOperator op reports the new version",
        ),
        (
            "narrowed by another component of the same run-level",
            vec![("0000_50_other_02_role.yaml", role(NARROW)), keep_binding()],
            1,
            "in parallel with the update of Deployment.apps op/op",
        ),
        (
            "narrowed after the ClusterOperator wait",
            vec![("0000_90_op_00_role.yaml", role(NARROW)), keep_binding()],
            0,
            "",
        ),
        (
            "widened before the update",
            vec![("0000_50_op_02_role.yaml", role(WIDE)), keep_binding()],
            0,
            "",
        ),
        (
            "unchanged",
            vec![("0000_50_op_02_role.yaml", role(FULL)), keep_binding()],
            0,
            "",
        ),
        (
            "binding drops the account before the update",
            vec![
                ("0000_50_op_02_role.yaml", role(FULL)),
                ("0000_50_op_03_binding.yaml", binding("op", OTHER_SA)),
            ],
            1,
            "drops ServiceAccount op/default from the subjects of ClusterRoleBinding.rbac.authorization.k8s.io op",
        ),
        (
            "binding drops the account after the ClusterOperator wait",
            vec![
                ("0000_50_op_02_role.yaml", role(FULL)),
                ("0000_90_op_03_binding.yaml", binding("op", OTHER_SA)),
            ],
            0,
            "",
        ),
        (
            "binding names another role before the update",
            vec![
                ("0000_50_op_02_role.yaml", role(FULL)),
                ("0000_50_op_03_binding.yaml", binding("other", DEFAULT_SA)),
            ],
            1,
            "from ClusterRole.rbac.authorization.k8s.io op to ClusterRole.rbac.authorization.k8s.io other",
        ),
        (
            "binding keeps the account among others",
            vec![
                ("0000_50_op_02_role.yaml", role(FULL)),
                (
                    "0000_50_op_03_binding.yaml",
                    binding("op", &format!("{OTHER_SA}{DEFAULT_SA}")),
                ),
            ],
            0,
            "",
        ),
        (
            "aggregated role",
            vec![
                (
                    "0000_50_op_02_role.yaml",
                    obj(
                        RBAC_API,
                        "ClusterRole",
                        "",
                        "op",
                        "",
                        "aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels:\n      x: y\nrules: []\n",
                    ),
                ),
                keep_binding(),
            ],
            0,
            "",
        ),
    ];
    for (case, extra, want, text) in cases {
        let found = hits(extra);
        assert_eq!(found.len(), want, "{case}: {found:#?}");
        for f in &found {
            assert_eq!(f.severity, Severity::Error, "{case}");
            assert!(f.message.contains(text), "{case}: {}", f.message);
            assert!(
                f.message.contains("ServiceAccount op/default"),
                "{case}: {}",
                f.message
            );
            assert!(f.related.iter().any(|r| r.role == "user"), "{case}");
            assert!(
                f.related
                    .iter()
                    .any(|r| r.role == "update" || r.role == "wait"),
                "{case}"
            );
        }
    }
}

#[test]
fn narrowing_names_role_lost_rights_binding_and_positions() {
    let found = hits(vec![
        ("0000_50_op_02_role.yaml", role(NARROW)),
        keep_binding(),
    ]);
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(
        f.location.as_ref().unwrap().file,
        "release-manifests/0000_50_op_02_role.yaml"
    );
    assert!(
        f.message.contains(
            "narrows ClusterRole.rbac.authorization.k8s.io op (granted to ServiceAccount op/default by ClusterRoleBinding.rbac.authorization.k8s.io op): the pods lose update,create on leases.coordination.k8s.io"
        ),
        "{}",
        f.message
    );
    let roles: Vec<&str> = f.related.iter().map(|r| r.role.as_str()).collect();
    assert_eq!(roles, ["user", "binding", "update"]);
    assert_eq!(
        f.related[2].location.file,
        "release-manifests/0000_50_op_04_deployment.yaml"
    );
    assert!(f.hint.as_ref().unwrap().contains("ClusterOperator op"));
}

#[test]
fn no_previous_payload_no_finding() {
    let files = new(vec![
        ("0000_50_op_02_role.yaml", role(NARROW)),
        keep_binding(),
    ]);
    let findings = lint_files(&refs(&files), None);
    assert!(of_rule(&findings, Rule::RightsLostBeforeRollout).is_empty());
}

fn role_manifest(rules: Value) -> Manifest {
    Manifest {
        source: Source::ReleaseManifests,
        file: "0000_50_a_00.yaml".into(),
        document: 0,
        line: 1,
        id: ObjectId {
            group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            namespace: None,
            name: "r".into(),
        },
        api_version: RBAC_API.into(),
        object: json!({"apiVersion": RBAC_API, "kind": "ClusterRole",
            "metadata": {"name": "r"}, "rules": rules})
        .into(),
    }
}

fn lost(old: Value, new: Value) -> usize {
    lost_rights(&role_manifest(old), &role_manifest(new)).len()
}

#[test]
fn wildcards_and_names_match_as_the_authorizer_does() {
    let pods = |verbs: Value| json!([{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]);
    // (case, old rules, new rules, rights lost)
    let cases = [
        (
            "verb * kept by *",
            pods(json!(["*"])),
            pods(json!(["*"])),
            0,
        ),
        (
            "verb * not kept by a list",
            pods(json!(["*"])),
            pods(json!([
                "get", "list", "watch", "create", "update", "patch", "delete"
            ])),
            1,
        ),
        (
            "a verb kept by *",
            pods(json!(["get", "list"])),
            pods(json!(["*"])),
            0,
        ),
        (
            "verbs split over two rules",
            pods(json!(["get", "list"])),
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
            0,
        ),
        (
            "resource * not kept by one resource",
            json!([{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]),
            pods(json!(["get"])),
            1,
        ),
        (
            "group * kept by group *",
            json!([{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]),
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]),
            0,
        ),
        (
            "a group kept by group *",
            pods(json!(["get"])),
            json!([{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]),
            0,
        ),
        (
            "group * not kept by the core group",
            json!([{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]),
            pods(json!(["get"])),
            1,
        ),
        (
            "subresource kept by */sub",
            json!([{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["update"]}]),
            json!([{"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["update"]}]),
            0,
        ),
        (
            "subresource not kept by its resource",
            json!([{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["update"]}]),
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["update"]}]),
            1,
        ),
        (
            "every name not kept by one name",
            pods(json!(["get"])),
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]}]),
            1,
        ),
        (
            "one name kept by every name",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a", "b"]}]),
            pods(json!(["get"])),
            0,
        ),
        (
            "a name dropped",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a", "b"]}]),
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]}]),
            1,
        ),
        (
            "URL kept by a prefix pattern",
            json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
            json!([{"nonResourceURLs": ["/met*"], "verbs": ["get"]}]),
            0,
        ),
        (
            "URL dropped",
            json!([{"nonResourceURLs": ["/metrics", "/healthz"], "verbs": ["get"]}]),
            json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]),
            1,
        ),
        (
            "every rule dropped",
            pods(json!(["get", "list"])),
            json!([]),
            2,
        ),
    ];
    for (case, old, new, want) in cases {
        assert_eq!(lost(old, new), want, "{case}");
    }
}

/// Deployment `op/op` running as ServiceAccount `op/other`.
fn moved_deployment() -> String {
    op_deployment("      serviceAccountName: other\n", "new")
}

/// The new release moves the Deployment to `op/other`; `extra` are its RBAC files.
fn moved(extra: Vec<(&'static str, String)>) -> Vec<super::super::Finding> {
    let mut files = vec![
        ("0000_50_op_00_namespace.yaml", namespace()),
        ("0000_50_op_02_role.yaml", role(FULL)),
        keep_binding(),
        ("0000_50_op_04_deployment.yaml", moved_deployment()),
        ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
    ];
    files.extend(extra);
    let findings = lint_files(&refs(&files), Some(&refs(&old())));
    of_rule(&findings, Rule::RightsLostBeforeRollout)
        .into_iter()
        .cloned()
        .collect()
}

/// ClusterRoleBinding `name` of ClusterRole `role` to `subjects`.
fn named_binding(name: &str, role: &str, subjects: &str) -> String {
    obj(
        RBAC_API,
        "ClusterRoleBinding",
        "",
        name,
        "",
        &format!(
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\nsubjects:\n{subjects}"
        ),
    )
}

#[test]
fn new_account_bound_after_the_update_starts_without_the_old_rights() {
    // (case, NEW's extra files, expected findings, text every finding contains)
    let cases: Vec<(&str, Files, usize, &str)> = vec![
        (
            "binding one run-level after the Deployment",
            vec![(
                "0000_55_op_02_binding.yaml",
                named_binding("op-other", "op", OTHER_SA),
            )],
            1,
            "applied after the update of Deployment.apps op/op, whose new pods run as ServiceAccount op/other: they start without ClusterRole.rbac.authorization.k8s.io op",
        ),
        (
            "binding by another component of the same run-level",
            vec![(
                "0000_50_other_02_binding.yaml",
                named_binding("op-other", "op", OTHER_SA),
            )],
            1,
            "applied in parallel with the update",
        ),
        (
            "binding before the Deployment",
            vec![(
                "0000_50_op_03_binding.yaml",
                named_binding("op-other", "op", OTHER_SA),
            )],
            0,
            "",
        ),
        (
            "late binding of a role the old pods did not hold",
            vec![(
                "0000_55_op_02_binding.yaml",
                named_binding("op-other", "view", OTHER_SA),
            )],
            0,
            "",
        ),
        (
            "late binding, but an earlier one already grants the role",
            vec![
                (
                    "0000_50_op_03_early.yaml",
                    named_binding("op-early", "op", OTHER_SA),
                ),
                (
                    "0000_55_op_02_binding.yaml",
                    named_binding("op-other", "op", OTHER_SA),
                ),
            ],
            0,
            "",
        ),
    ];
    for (case, extra, want, text) in cases {
        let found = moved(extra);
        assert_eq!(found.len(), want, "{case}: {found:#?}");
        for f in &found {
            assert_eq!(f.severity, Severity::Error, "{case}");
            assert!(f.message.contains(text), "{case}: {}", f.message);
            let roles: Vec<&str> = f.related.iter().map(|r| r.role.as_str()).collect();
            assert_eq!(roles, ["user", "update"], "{case}");
            assert!(
                f.hint.as_ref().unwrap().contains("before the update"),
                "{case}"
            );
        }
    }
}

#[test]
fn same_account_with_its_old_binding_needs_no_new_binding() {
    // The Deployment keeps its account; a late extra binding of the same role adds nothing new.
    let found = hits(vec![
        ("0000_50_op_02_role.yaml", role(FULL)),
        keep_binding(),
        (
            "0000_55_op_02_binding.yaml",
            named_binding("op-again", "op", DEFAULT_SA),
        ),
    ]);
    assert!(found.is_empty(), "{found:#?}");
}

/// ClusterRole `op` keeping leader election ([`FULL`]'s lease rights) but losing `list` on
/// configmaps.
const KEEPS_LEASES: &str = "- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: [get, update, create]\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n";

/// Only a lost right the pods are known to use (leader election) is an error; a lost right
/// nothing shows they use, or one the rule cannot see, is a warning (the dns operator's
/// ClusterRole losing `create` on networks.config.openshift.io in 4.22 is one).
#[test]
fn rights_not_known_to_be_used_are_a_warning() {
    let cases: Vec<(&str, Files, Severity, &str)> = vec![
        (
            "narrowed, leader election kept",
            vec![
                ("0000_50_op_02_role.yaml", role(KEEPS_LEASES)),
                keep_binding(),
            ],
            Severity::Warning,
            "the pods lose list on configmaps; none of the lost rights is known to be used by the pods",
        ),
        (
            "narrowed, leader election lost",
            vec![("0000_50_op_02_role.yaml", role(NARROW)), keep_binding()],
            Severity::Error,
            "the pods lose update,create on leases.coordination.k8s.io; leader election needs create,update on leases.coordination.k8s.io",
        ),
        (
            "a `*` verb narrowed to the verbs leader election uses",
            vec![
                (
                    "0000_50_op_02_role.yaml",
                    role(
                        "- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: [get, update, create]\n- apiGroups: [\"\"]\n  resources: [configmaps, secrets]\n  verbs: [get, list, watch]\n",
                    ),
                ),
                keep_binding(),
            ],
            Severity::Warning,
            "none of the lost rights is known to be used",
        ),
    ];
    for (case, extra, severity, text) in cases {
        // The old role grants every verb on leases for the third case.
        let old_rules = if case.starts_with("a `*`") {
            WIDE
        } else {
            FULL
        };
        let mut old_files = old();
        old_files[1].1 = role(old_rules);
        let findings = lint_files(&refs(&new(extra)), Some(&refs(&old_files)));
        let found = of_rule(&findings, Rule::RightsLostBeforeRollout);
        assert_eq!(found.len(), 1, "{case}: {found:#?}");
        assert_eq!(found[0].severity, severity, "{case}: {}", found[0].message);
        assert!(
            found[0].message.contains(text),
            "{case}: {}",
            found[0].message
        );
    }
}

/// A binding of a role the previous payload does not ship (a default role of the API server):
/// what the pods lose is unknown, so dropping their account from it is a warning.
#[test]
fn subject_dropped_from_a_role_outside_the_payload_is_a_warning() {
    let mut old_files = old();
    old_files[2].1 = binding("view", DEFAULT_SA);
    let extra = vec![
        ("0000_50_op_02_role.yaml", role(FULL)),
        ("0000_50_op_03_binding.yaml", binding("view", OTHER_SA)),
    ];
    let findings = lint_files(&refs(&new(extra)), Some(&refs(&old_files)));
    let found = of_rule(&findings, Rule::RightsLostBeforeRollout);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(
        found[0]
            .message
            .contains("the role is not in the previous payload"),
        "{}",
        found[0].message
    );
}

#[test]
fn leader_election_rights_are_probed_by_verb_and_lease_name() {
    use crate::rbac::{known_used_lost, rules_of};
    let rules = |v: Value| rules_of(Some(&v));
    let leases = |verbs: Value, names: Value| json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": verbs, "resourceNames": names}]);
    // `*` kept as get, create, update: nothing leader election uses is lost.
    assert!(
        known_used_lost(
            &rules(leases(json!(["*"]), json!([]))),
            &rules(leases(json!(["get", "create", "update"]), json!([])))
        )
        .is_empty()
    );
    // update on the named lease lost.
    let lost = known_used_lost(
        &rules(leases(json!(["get", "update"]), json!(["op-lock"]))),
        &rules(leases(json!(["get"]), json!(["op-lock"]))),
    );
    assert_eq!(
        crate::rbac::describe(&lost),
        "update on leases.coordination.k8s.io named op-lock"
    );
    // Rights on other resources never count.
    assert!(
        known_used_lost(
            &rules(json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}])),
            &[]
        )
        .is_empty()
    );
}
