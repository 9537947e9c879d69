//! Which manifest changes the CVO rolls out: the merge run on two versions of one manifest.
//!
//! The live object is taken to be OLD as the CVO created it. Both OLD and NEW are merged into
//! it; a field that differs between OLD and NEW but is the same in both merge results is a
//! change the CVO never writes. Comparing the two merge results (rather than NEW's result
//! with OLD) keeps merge defaults, such as a Deployment's `replicas: 1`, out of the answer.

use serde_json::Value;

use super::generic::META_KEYS;
use super::pod::{CONTAINER_NEVER, POD_NEVER};
use super::{ClusterConfig, ClusterVersionRef, MergeError, TypedKind, merge_prepared, prepare};

/// A change between two versions of a manifest that the CVO's merge does not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRolledOut {
    /// The field, e.g. `spec.template.spec.containers[operator].startupProbe`.
    pub path: String,
    /// The merge rule that keeps the old value.
    pub rule: String,
}

/// What the CVO does when a manifest changes from OLD to NEW on a cluster OLD was applied to.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// Whether the CVO writes the object at all (its merge of NEW differs from its merge of
    /// OLD).
    pub written: bool,
    /// The changes it leaves out.
    pub not_rolled_out: Vec<NotRolledOut>,
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize, Option<String>),
}

fn config() -> ClusterConfig {
    ClusterConfig {
        cluster_version: Some(ClusterVersionRef {
            name: "version".into(),
            uid: "00000000-0000-0000-0000-000000000000".into(),
        }),
        ..ClusterConfig::default()
    }
}

/// Compares OLD and NEW through the CVO's merge.
///
/// # Errors
///
/// A [`MergeError`] when either manifest would crash the CVO's merge.
pub fn compare(old: &Value, new: &Value) -> Result<Rollout, MergeError> {
    let cfg = config();
    let old_req = prepare(old, &cfg)?;
    let new_req = prepare(new, &cfg)?;
    let a = merge_prepared(&old_req, &old_req)?.unwrap_or_else(|| old_req.clone());
    let b = merge_prepared(&old_req, &new_req)?.unwrap_or_else(|| old_req.clone());
    let mut out = Vec::new();
    let kind = super::typed_kind(
        new.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        new.get("kind").and_then(Value::as_str).unwrap_or(""),
    );
    walk(old, new, &a, &b, &mut Vec::new(), kind, &mut out, false);
    Ok(Rollout {
        written: a != b,
        not_rolled_out: out,
    })
}

/// The fields the manifest sets to a value other than the live one that the CVO's merge
/// (`merged`, or `None` when it writes nothing) leaves at the live value. Fields the manifest
/// does not set are not reported: the live object has many the server filled in.
#[must_use]
pub fn kept_against_live(
    live: &Value,
    manifest: &Value,
    merged: Option<&Value>,
) -> Vec<NotRolledOut> {
    let kind = super::typed_kind(
        manifest
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        manifest.get("kind").and_then(Value::as_str).unwrap_or(""),
    );
    let mut out = Vec::new();
    let after = merged.unwrap_or(live);
    walk(
        live,
        manifest,
        live,
        after,
        &mut Vec::new(),
        kind,
        &mut out,
        true,
    );
    out.retain(|n| {
        !n.path.starts_with("metadata.")
            || n.path.starts_with("metadata.labels")
            || n.path.starts_with("metadata.annotations")
    });
    out
}

fn at<'a>(v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    let mut cur = v;
    for s in path {
        cur = match s {
            Seg::Key(k) => cur.get(k)?,
            Seg::Index(i, None) => cur.get(i)?,
            Seg::Index(_, Some(n)) => cur
                .as_array()?
                .iter()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(n))?,
        };
    }
    Some(cur)
}

fn render(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(_, Some(n)) => s.push_str(&format!("[{n}]")),
            Seg::Index(i, None) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn keys(path: &[Seg]) -> Vec<&str> {
    path.iter()
        .filter_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(..) => None,
        })
        .collect()
}

/// A field the CVO never reconciles, so the walk reports it whole.
fn never(path: &[Seg], kind: Option<TypedKind>) -> Option<&'static str> {
    let k = keys(path);
    let pod = k.windows(2).any(|w| w == ["template", "spec"]);
    let in_container = pod
        && matches!(path.iter().rev().nth(1), Some(Seg::Index(..)))
        && k.len() >= 2
        && matches!(k[k.len() - 2], "containers" | "initContainers");
    let last = *k.last()?;
    if in_container && CONTAINER_NEVER.contains(&last) {
        return Some("the CVO never updates this container field");
    }
    if pod
        && k.len() >= 2
        && k[k.len() - 2] == "spec"
        && k[k.len() - 3..].first() == Some(&"template")
        && POD_NEVER.contains(&last)
    {
        return Some("the CVO never updates this pod spec field");
    }
    if kind == Some(TypedKind::DaemonSet)
        && k.len() == 2
        && k[0] == "spec"
        && matches!(
            last,
            "updateStrategy" | "minReadySeconds" | "revisionHistoryLimit"
        )
    {
        return Some("the CVO never updates this DaemonSet field");
    }
    if kind == Some(TypedKind::Service)
        && k.len() == 2
        && k[0] == "spec"
        && !matches!(last, "ports" | "type" | "selector")
    {
        return Some("the CVO never updates this Service field");
    }
    None
}

/// The rule that explains a change that was not rolled out.
fn explain(
    path: &[Seg],
    old: Option<&Value>,
    new: Option<&Value>,
    kind: Option<TypedKind>,
) -> String {
    if let Some(r) = never(path, kind) {
        return r.to_owned();
    }
    let k = keys(path);
    let removed = old.is_some() && new.is_none();
    if kind.is_none() {
        if k.first().is_some_and(|f| META_KEYS.contains(f)) {
            return "a kind without a typed merge is updated only when a field outside metadata changes".into();
        }
        return "the generic merge does not write this field".into();
    }
    let parent = if k.len() >= 2 { k[k.len() - 2] } else { "" };
    match parent {
        "labels" | "annotations" if removed => {
            return format!("{parent} are never removed");
        }
        "data" | "binaryData" if removed && kind == Some(TypedKind::ConfigMap) => {
            return "ConfigMap keys are never removed".into();
        }
        "nodeSelector" if removed => return "nodeSelector keys are never removed".into(),
        _ => {}
    }
    if k.contains(&"tolerations") {
        return "tolerations are only ever added".into();
    }
    if k.contains(&"ownerReferences") {
        return "owner references are merged by UID and never removed".into();
    }
    if removed {
        return format!(
            "the CVO's {} merge never clears this field when the manifest drops it",
            kind.map_or("typed", kind_name)
        );
    }
    format!(
        "the CVO's {} merge does not write this change",
        kind.map_or("typed", kind_name)
    )
}

fn kind_name(k: TypedKind) -> &'static str {
    use TypedKind as T;
    match k {
        T::Deployment => "Deployment",
        T::DaemonSet => "DaemonSet",
        T::Job => "Job",
        T::CronJob => "CronJob",
        T::ConfigMap => "ConfigMap",
        T::Namespace => "Namespace",
        T::Service => "Service",
        T::ServiceAccount => "ServiceAccount",
        T::Role => "Role",
        T::RoleBinding => "RoleBinding",
        T::ClusterRole => "ClusterRole",
        T::ClusterRoleBinding => "ClusterRoleBinding",
        T::CustomResourceDefinition => "CustomResourceDefinition",
        T::ValidatingWebhookConfiguration => "ValidatingWebhookConfiguration",
        T::ImageStream => "ImageStream",
        T::SecurityContextConstraints => "SecurityContextConstraints",
        T::OperatorGroup => "OperatorGroup",
    }
}

#[allow(clippy::too_many_arguments)]
fn walk(
    old: &Value,
    new: &Value,
    a: &Value,
    b: &Value,
    path: &mut Vec<Seg>,
    kind: Option<TypedKind>,
    out: &mut Vec<NotRolledOut>,
    only_new: bool,
) {
    let (o, n) = (at(old, path), at(new, path));
    if o == n || (only_new && n.is_none()) {
        return;
    }
    let landed = at(a, path) != at(b, path);
    let whole = never(path, kind).is_some();
    let none = serde_json::Map::new();
    let objects = match (o, n) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => Some((x, y)),
        (Some(Value::Object(x)), None) => Some((x, &none)),
        (None, Some(Value::Object(y))) => Some((&none, y)),
        _ => None,
    };
    if !whole && let Some((x, y)) = objects {
        let mut ks: Vec<String> = x.keys().cloned().collect();
        ks.extend(y.keys().filter(|k| !x.contains_key(*k)).cloned());
        for k in ks {
            path.push(Seg::Key(k));
            walk(old, new, a, b, path, kind, out, only_new);
            path.pop();
        }
        return;
    }
    match (o, n) {
        (Some(Value::Array(x)), Some(Value::Array(y))) if !whole && x.len() == y.len() => {
            for (i, e) in y.iter().enumerate() {
                let name = e.get("name").and_then(Value::as_str).map(str::to_owned);
                let same_name = name.is_some()
                    && x.iter()
                        .any(|p| p.get("name").and_then(Value::as_str) == name.as_deref());
                path.push(Seg::Index(i, name.filter(|_| same_name)));
                walk(old, new, a, b, path, kind, out, only_new);
                path.pop();
            }
        }
        _ if !landed => out.push(NotRolledOut {
            path: render(path),
            rule: explain(path, o, n, kind),
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn found(old: Value, new: Value) -> (bool, Vec<(String, String)>) {
        let r = compare(&old, &new).unwrap();
        (
            r.written,
            r.not_rolled_out
                .into_iter()
                .map(|n| (n.path, n.rule))
                .collect(),
        )
    }

    fn ds(strategy: &str, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d", "namespace": "n"},
               "spec": {"updateStrategy": {"type": strategy},
                        "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    #[test]
    fn daemonset_update_strategy_is_not_rolled_out() {
        let (written, f) = found(ds("OnDelete", "i"), ds("RollingUpdate", "i"));
        assert!(!written);
        assert_eq!(
            f,
            [(
                "spec.updateStrategy".to_owned(),
                "the CVO never updates this DaemonSet field".to_owned()
            )]
        );
        let (written, f) = found(ds("OnDelete", "i"), ds("RollingUpdate", "j"));
        assert!(written);
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn container_fields_and_removed_labels() {
        let d = |pull: &str, labels: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels},
                   "spec": {"template": {"spec": {"containers": [{"name": "op", "image": "i", "imagePullPolicy": pull}]}}}})
        };
        let (written, f) = found(d("Always", json!({"a": "1"})), d("IfNotPresent", json!({})));
        assert!(!written);
        assert_eq!(
            f,
            [
                (
                    "metadata.labels.a".to_owned(),
                    "labels are never removed".to_owned()
                ),
                (
                    "spec.template.spec.containers[op].imagePullPolicy".to_owned(),
                    "the CVO never updates this container field".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn generic_annotation_only_change_is_not_written() {
        let s = |v: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "annotations": {"a": v}},
                   "data": {"k": "dg=="}})
        };
        let (written, f) = found(s("1"), s("2"));
        assert!(!written);
        assert_eq!(f[0].0, "metadata.annotations.a");
        assert!(f[0].1.contains("without a typed merge"), "{}", f[0].1);
    }

    #[test]
    fn configmap_key_removal_and_a_real_change() {
        let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data});
        let (written, f) = found(cm(json!({"a": "1", "b": "2"})), cm(json!({"a": "3"})));
        assert!(written);
        assert_eq!(
            f,
            [(
                "data.b".to_owned(),
                "ConfigMap keys are never removed".to_owned()
            )]
        );
    }
}
