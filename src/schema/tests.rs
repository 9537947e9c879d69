use std::sync::{Arc, LazyLock};

use serde_json::{Value, json};

use super::{BuiltIn, Catalog, Verdict};

static BUILTIN: LazyLock<Arc<BuiltIn>> =
    LazyLock::new(|| Arc::new(BuiltIn::load("1.37").expect("stored schemas")));

fn catalog() -> Catalog {
    Catalog::new(BUILTIN.clone())
}

/// The messages of every violation, errors and warnings.
fn check(c: &Catalog, v: &Value) -> Vec<String> {
    match c.validate(v) {
        Verdict::Checked { violations, .. } => violations.iter().map(ToString::to_string).collect(),
        Verdict::NoSchema => vec!["no schema".to_owned()],
    }
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}],
                                          "resources": {"requests": {"cpu": "10m", "memory": 1024}}}]}
            }
        }
    })
}

#[test]
fn a_valid_deployment_passes() {
    assert_eq!(check(&catalog(), &deployment()), Vec::<String>::new());
}

#[test]
fn unknown_fields_are_reported_with_their_path() {
    let mut d = deployment();
    d["spec"]["replica"] = json!(3);
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = json!("Always");
    assert_eq!(
        check(&catalog(), &d),
        [
            "unknown field \"spec.template.spec.containers[0].imagePullPolicyy\"",
            "unknown field \"spec.replica\""
        ]
    );
}

#[test]
fn wrong_types_are_reported() {
    let mut d = deployment();
    d["spec"]["replicas"] = json!("3");
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(1.5);
    assert_eq!(
        check(&catalog(), &d),
        [
            "spec.replicas: Invalid value: \"string\": must be of type integer",
            "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: \"number\": must be of type integer"
        ]
    );
}

#[test]
fn int32_overflow_is_reported() {
    let mut d = deployment();
    d["spec"]["replicas"] = json!(1_i64 << 40);
    assert_eq!(check(&catalog(), &d).len(), 1);
}

#[test]
fn enums_are_checked_and_empty_strings_left_to_defaulting() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("sometimes");
    assert_eq!(
        check(&catalog(), &d),
        [
            "spec.template.spec.containers[0].imagePullPolicy: Unsupported value: \"sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\""
        ]
    );
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("");
    assert!(check(&catalog(), &d).is_empty());
}

#[test]
fn missing_required_fields_are_reported() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert_eq!(
        check(&catalog(), &d),
        ["spec.template.spec.containers[0].name: Required value"]
    );
}

#[test]
fn quantities_and_int_or_strings() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "lots"});
    d["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": true}});
    let found = check(&catalog(), &d);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("quantities must match"), "{found:?}");
    assert!(found[1].starts_with("spec.strategy.rollingUpdate.maxUnavailable"));
}

#[test]
fn names_follow_the_kind() {
    let c = catalog();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a/b", "namespace": "ns"}});
    let found = check(&c, &cm);
    assert_eq!(found.len(), 1);
    assert!(
        found[0]
            .starts_with("metadata.name: Invalid value: \"a/b\": a lowercase RFC 1123 subdomain")
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1svc", "namespace": "ns"}});
    assert!(check(&c, &svc)[0].contains("DNS-1035"));
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "system:openshift:Thing"}});
    assert!(check(&c, &role).is_empty());
}

#[test]
fn namespaces_follow_the_scope() {
    let c = catalog();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    assert!(check(&c, &cm)[0].starts_with("metadata.namespace: Required value"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "namespace": "b"}});
    let v = c.validate(&ns);
    assert_eq!(v.rejected(), Some(false), "a warning only: {v:?}");
    assert_eq!(check(&c, &ns).len(), 1);
}

#[test]
fn labels_and_annotations_keys_and_values() {
    let c = catalog();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n",
        "labels": {"ok": "a b"}, "annotations": {"a/b/c": "x"}}});
    let found = check(&c, &cm);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("metadata.labels[ok]: Invalid value: \"a b\""));
    assert!(found[1].starts_with("metadata.annotations: Invalid value: \"a/b/c\""));
}

fn crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]}
    })
}

fn widget_catalog() -> Catalog {
    let mut c = catalog();
    c.add_crd(&crd(json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "rule": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'"}]},
                    "either": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
                }},
            "status": {"type": "object"}
        }
    })))
    .unwrap();
    c
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "n"}, "spec": spec})
}

#[test]
fn a_valid_custom_resource_passes_and_cel_is_flagged() {
    let c = widget_catalog();
    let v = c.validate(&widget(json!({"size": 3, "mode": "Fast", "port": "http",
        "tags": ["a", "b"], "extra": {"anything": [1]}, "labels": {"a": "b"}, "either": {"a": "x"}})));
    assert_eq!(
        v,
        Verdict::Checked {
            violations: vec![],
            cel_unchecked: Some("widgets.example.com".to_owned())
        }
    );
}

#[test]
fn custom_resources_break_their_schema() {
    let c = widget_catalog();
    let found = check(
        &c,
        &widget(
            json!({"mode": "Medium", "port": 1.5, "name": "ABCDEFG", "tags": ["a", "a"],
                       "labels": {"a": 1}, "bogus": 1, "either": {"a": "x", "b": "y"}}),
        ),
    );
    let expected = [
        "spec.size: Required value",
        "spec.mode: Unsupported value: \"Medium\": supported values: \"Fast\", \"Slow\"",
        "spec.port: Invalid value: 1.5: must be of type integer or string",
        "spec.name: Too long: may not be more than 5 bytes",
        "spec.name: Invalid value: \"ABCDEFG\": should match '^[a-z]+$'",
        "spec.tags[1]: Duplicate value: \"a\"",
        "spec.labels[a]: Invalid value: \"integer\": must be of type string",
        "unknown field \"spec.bogus\"",
        "spec.either: Invalid value: \"object\": must validate one and only one schema (oneOf)",
    ];
    let mut found = found;
    let mut expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    found.sort();
    expected.sort();
    assert_eq!(found, expected);
}

#[test]
fn custom_resource_bounds_and_versions() {
    let c = widget_catalog();
    assert_eq!(
        check(&c, &widget(json!({"size": 11}))),
        ["spec.size: Invalid value: 11: should be less than or equal to 10"]
    );
    let mut w = widget(json!({"size": 1}));
    w["apiVersion"] = json!("example.com/v2");
    assert!(check(&c, &w)[0].starts_with("apiVersion: Unsupported value"));
    let mut w = widget(json!({"size": 1}));
    w["metadata"]["bogus"] = json!(1);
    assert_eq!(check(&c, &w), ["unknown field \"metadata.bogus\""]);
}

#[test]
fn unknown_kinds_have_no_schema() {
    let c = catalog();
    let w = widget(json!({}));
    assert_eq!(c.validate(&w), Verdict::NoSchema);
}

#[test]
fn crd_names_must_match_plural_and_group() {
    let c = catalog();
    let mut d = crd(json!({"type": "object"}));
    assert!(check(&c, &d).is_empty(), "{:?}", check(&c, &d));
    d["metadata"]["name"] = json!("widget.example.com");
    assert_eq!(
        check(&c, &d),
        [
            "metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group"
        ]
    );
}

#[test]
fn an_unknown_kube_version_is_an_error() {
    let e = BuiltIn::load("1.2").unwrap_err();
    assert_eq!(
        e.to_string(),
        "no stored schemas for Kubernetes 1.2; stored: 1.37"
    );
}

#[test]
fn status_is_checked_only_for_what_decoding_refuses() {
    let mut c = catalog();
    c.add_crd(&crd(json!({"type": "object", "properties": {
        "status": {"type": "object", "required": ["phase"],
                   "properties": {"phase": {"type": "string", "enum": ["Up"]}}}}})))
        .unwrap();
    let mut w = widget(json!(null));
    w.as_object_mut().unwrap().remove("spec");
    w["status"] = json!({"phase": "Down"});
    assert!(check(&c, &w).is_empty(), "{:?}", check(&c, &w));
    w["status"]["bogus"] = json!(1);
    assert_eq!(check(&c, &w), ["unknown field \"status.bogus\""]);
}

#[test]
fn nulls_list_maps_any_of_and_not() {
    let mut c = catalog();
    c.add_crd(&crd(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "opt": {"type": "string"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "either": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
        "notc": {"type": "string", "not": {"pattern": "^c"}}
    }}}})))
    .unwrap();
    let ok = widget(
        json!({"opt": null, "ports": [{"name": "a"}, {"name": "b"}], "either": "b1", "notc": "d"}),
    );
    assert!(check(&c, &ok).is_empty(), "{:?}", check(&c, &ok));
    let bad = widget(json!({"ports": [{"name": "a"}, {"name": "a"}], "either": "c", "notc": "c"}));
    assert_eq!(
        check(&c, &bad),
        [
            "spec.ports[1]: Duplicate value: map[\"name\":\"a\"]",
            "spec.either: Invalid value: \"c\": must validate at least one schema (anyOf)",
            "spec.notc: Invalid value: \"c\": must not validate the schema (not)"
        ]
    );
}

#[test]
fn embedded_resources_imply_their_type_fields() {
    let mut c = catalog();
    c.add_crd(&crd(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"data": {"type": "string"}}}}}}}),
    ))
    .unwrap();
    let w = widget(json!({"template": {"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "x"}, "data": "y"}}));
    assert!(check(&c, &w).is_empty(), "{:?}", check(&c, &w));
}

#[test]
fn built_in_times_and_bytes_are_decoded() {
    let c = catalog();
    let s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n",
                   "creationTimestamp": "yesterday"}, "data": {"k": "not base64!"}});
    let found = check(&c, &s);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("metadata.creationTimestamp: Invalid value: \"yesterday\""));
    assert_eq!(
        found[1],
        "data[k]: Invalid value: \"<bytes>\": must be base64-encoded"
    );
}

#[test]
fn a_crd_schema_inside_items_is_decoded_leniently() {
    // The API server decodes `items` and `additionalProperties` of a CRD schema without
    // strict field validation, but still refuses wrong types there.
    let c = catalog();
    let mut d = crd(
        json!({"type": "object", "properties": {"list": {"type": "array",
        "items": {"type": "string", "optional": true}}}}),
    );
    assert!(check(&c, &d).is_empty(), "{:?}", check(&c, &d));
    d["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["list"]["items"]["description"] =
        json!(5);
    assert_eq!(check(&c, &d).len(), 1);
}
