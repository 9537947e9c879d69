//! Rules of built-in kinds that the API server checks in code rather than in its OpenAPI
//! documents: RBAC rules and subjects, multi-port Service port names, and the structural
//! schema of a CRD.

use serde_json::Value;

use super::Violation;

/// Runs the rules of `group`/`kind` on `object`.
pub fn check(group: &str, kind: &str, object: &Value, out: &mut Vec<Violation>) {
    match (group, kind) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            rules(object, kind == "Role", out);
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            binding(object, kind == "RoleBinding", out);
        }
        ("", "Service") => service_ports(object, out),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => structural(object, out),
        _ => {}
    }
}

fn len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

fn rules(object: &Value, namespaced: bool, out: &mut Vec<Violation>) {
    for (i, r) in object["rules"].as_array().into_iter().flatten().enumerate() {
        let at = |f: &str| format!("rules[{i}].{f}");
        if len(&r["verbs"]) == 0 {
            out.push(Violation::error(&at("verbs"), "Required value".to_owned()));
        }
        if len(&r["nonResourceURLs"]) > 0 {
            if namespaced {
                out.push(Violation::error(
                    &at("nonResourceURLs"),
                    "Invalid value: \"array\": namespaced rules cannot apply to non-resource URLs"
                        .to_owned(),
                ));
            }
            if len(&r["apiGroups"]) > 0 || len(&r["resources"]) > 0 || len(&r["resourceNames"]) > 0
            {
                out.push(Violation::error(
                    &at("nonResourceURLs"),
                    "Invalid value: \"array\": rules cannot apply to both regular resources and \
                     non-resource URLs"
                        .to_owned(),
                ));
            }
            continue;
        }
        if len(&r["apiGroups"]) == 0 {
            out.push(Violation::error(
                &at("apiGroups"),
                "Required value: resource rules must supply at least one api group".to_owned(),
            ));
        }
        if len(&r["resources"]) == 0 {
            out.push(Violation::error(
                &at("resources"),
                "Required value: resource rules must supply at least one resource".to_owned(),
            ));
        }
    }
}

fn binding(object: &Value, namespaced: bool, out: &mut Vec<Violation>) {
    if !namespaced
        && let Some(k) = object["roleRef"]["kind"].as_str()
        && k != "ClusterRole"
    {
        out.push(Violation::error(
            "roleRef.kind",
            format!("Unsupported value: {k:?}: supported values: \"ClusterRole\""),
        ));
    }
    for (i, s) in object["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = |f: &str| format!("subjects[{i}].{f}");
        let api_group = s["apiGroup"].as_str().unwrap_or("");
        match s["kind"].as_str() {
            Some("ServiceAccount") => {
                if !api_group.is_empty() {
                    out.push(Violation::error(
                        &at("apiGroup"),
                        format!("Unsupported value: {api_group:?}: supported values: \"\""),
                    ));
                }
                if !namespaced && s["namespace"].as_str().is_none_or(str::is_empty) {
                    out.push(Violation::error(
                        &at("namespace"),
                        "Required value".to_owned(),
                    ));
                }
            }
            // An empty group is defaulted.
            Some("User" | "Group")
                if !api_group.is_empty() && api_group != "rbac.authorization.k8s.io" =>
            {
                out.push(Violation::error(
                    &at("apiGroup"),
                    format!(
                        "Unsupported value: {api_group:?}: supported values: \
                         \"rbac.authorization.k8s.io\""
                    ),
                ));
            }
            _ => {}
        }
    }
}

fn service_ports(object: &Value, out: &mut Vec<Violation>) {
    let ports = object["spec"]["ports"].as_array();
    if ports.is_some_and(|p| p.len() > 1) {
        for (i, p) in ports.into_iter().flatten().enumerate() {
            if p["name"].as_str().is_none_or(str::is_empty) {
                out.push(Violation::error(
                    &format!("spec.ports[{i}].name"),
                    "Required value".to_owned(),
                ));
            }
        }
    }
}

const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// Every schema of a CRD version that describes a field or items (not the value validations
/// of `allOf`, `anyOf`, `oneOf`, `not`) has a type, unless it is int-or-string or keeps
/// unknown fields; the root is an object.
fn structural(crd: &Value, out: &mut Vec<Violation>) {
    for (i, v) in crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(root) = v.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
        match root["type"].as_str() {
            None | Some("") => out.push(Violation::error(
                &format!("{path}.type"),
                "Required value: must not be empty at the root".to_owned(),
            )),
            Some("object") => {}
            Some(t) => out.push(Violation::error(
                &format!("{path}.type"),
                format!("Invalid value: {t:?}: must be object at the root"),
            )),
        }
        node(root, &path, out);
    }
}

fn node(s: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(o) = s.as_object() else { return };
    if let Some(t) = o.get("type").and_then(Value::as_str)
        && !t.is_empty()
        && !TYPES.contains(&t)
    {
        out.push(Violation::error(
            &format!("{path}.type"),
            format!(
                "Unsupported value: {t:?}: supported values: {}",
                quoted(TYPES)
            ),
        ));
    }
    let mut child = |c: &Value, p: String, what: &str| {
        let typed = c["type"].as_str().is_some_and(|t| !t.is_empty())
            || c["x-kubernetes-int-or-string"] == Value::Bool(true)
            || c["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true);
        if c.is_object() && !typed {
            out.push(Violation::error(
                &format!("{p}.type"),
                format!("Required value: must not be empty for specified {what}"),
            ));
        }
        node(c, &p, out);
    };
    if let Some(Value::Object(props)) = o.get("properties") {
        for (k, c) in props {
            child(c, format!("{path}.properties[{k}]"), "object fields");
        }
    }
    if let Some(items) = o.get("items")
        && items.is_object()
    {
        child(items, format!("{path}.items"), "array items");
    }
    if let Some(a) = o.get("additionalProperties")
        && a.is_object()
    {
        child(a, format!("{path}.additionalProperties"), "object fields");
    }
}

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(group: &str, kind: &str, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        check(group, kind, v, &mut out);
        out.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rbac_rules_need_verbs_groups_and_resources() {
        let role = json!({"rules": [{"verbs": ["get"], "resources": ["pods"]},
                                    {"apiGroups": [""], "resources": ["pods"]},
                                    {"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        assert_eq!(
            run("rbac.authorization.k8s.io", "Role", &role),
            [
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[1].verbs: Required value",
                "rules[2].nonResourceURLs: Invalid value: \"array\": namespaced rules cannot apply to non-resource URLs"
            ]
        );
        assert_eq!(
            run("rbac.authorization.k8s.io", "ClusterRole", &role).len(),
            2
        );
    }

    #[test]
    fn bindings_check_role_kind_and_subjects() {
        let b = json!({"roleRef": {"kind": "Role", "name": "x", "apiGroup": "rbac.authorization.k8s.io"},
                       "subjects": [{"kind": "ServiceAccount", "name": "a"},
                                    {"kind": "User", "name": "u", "apiGroup": "x"},
                                    {"kind": "Group", "name": "g"}]});
        assert_eq!(
            run("rbac.authorization.k8s.io", "ClusterRoleBinding", &b),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value",
                "subjects[1].apiGroup: Unsupported value: \"x\": supported values: \"rbac.authorization.k8s.io\""
            ]
        );
        assert_eq!(run("rbac.authorization.k8s.io", "RoleBinding", &b).len(), 1);
    }

    #[test]
    fn services_with_several_ports_name_them() {
        let s = json!({"spec": {"ports": [{"port": 1, "name": "a"}, {"port": 2}]}});
        assert_eq!(
            run("", "Service", &s),
            ["spec.ports[1].name: Required value"]
        );
    }

    #[test]
    fn crd_schemas_are_structural() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "properties": {"spec": {"properties": {"a": {"type": "strin"}, "b": {"x-kubernetes-int-or-string": true}}}}}}}]}});
        assert_eq!(
            run("apiextensions.k8s.io", "CustomResourceDefinition", &crd),
            [
                "spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the root",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].type: Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
            ]
        );
    }
}
