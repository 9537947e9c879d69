//! What an object looks like after the CVO's round trip through its Go type, for the typed
//! kinds that a plain Kubernetes cluster serves from a CRD (SecurityContextConstraints,
//! ImageStream).
//!
//! The CVO decodes a typed manifest into its Go struct and sends that struct's JSON encoding:
//! unknown fields are gone, a field tagged `omitempty` is left out when it holds its zero
//! value (`min: 0` of an ID range disappears), and a field without `omitempty` is always
//! written (`false`, or `null` for a nil list, map or pointer; a struct value, even one left
//! out of the manifest, as its fields' zero values: ImageStream's `lookupPolicy: {local:
//! false}` and each tag's `referencePolicy: {type: ""}`, `annotations: null`, `generation:
//! null`). On OpenShift the API server that
//! serves these kinds does the same round trip, so the result is what the cluster stores. On a
//! cluster that serves them from a CRD, nothing else would, so [`round_trip`] does it before
//! a create or an update is sent. Built-in kinds need nothing: the kube-apiserver decodes them
//! into the same Go types.
//!
//! `apiVersion`, `kind` and `metadata` are kept as they are (the API server handles
//! `metadata` itself); `status` is dropped, as the CVO never writes it with the main resource.

use serde_json::{Map, Value};

use super::TypedKind;

/// The JSON shape of a Go type, as `encoding/json` reads and writes it.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// A string field (zero value `""`).
    Str,
    /// A bool field (zero value `false`).
    Bool,
    /// An integer field (zero value `0`).
    Int,
    /// A pointer to a scalar: `null` when nil.
    Pointer,
    /// A slice of the shape: `null` when nil.
    List(&'static Shape),
    /// A map of strings (kept as it is): `null` when nil.
    Map,
    /// A struct value (never empty for `omitempty`).
    Struct(&'static [Field]),
    /// A pointer to a struct: `null` when nil.
    StructPointer(&'static [Field]),
}

/// One struct field: its JSON name, shape and whether it is tagged `omitempty`.
#[derive(Debug, Clone, Copy)]
struct Field {
    name: &'static str,
    shape: Shape,
    omitempty: bool,
}

const fn field(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        omitempty: false,
    }
}

const fn omitempty(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        omitempty: true,
    }
}

const STRINGS: Shape = Shape::List(&Shape::Str);

/// `corev1.SELinuxOptions`.
const SELINUX_OPTIONS: &[Field] = &[
    omitempty("user", Shape::Str),
    omitempty("role", Shape::Str),
    omitempty("type", Shape::Str),
    omitempty("level", Shape::Str),
];

/// `securityv1.IDRange`.
const ID_RANGE: &[Field] = &[omitempty("min", Shape::Int), omitempty("max", Shape::Int)];

const ID_RANGES: Shape = Shape::List(&Shape::Struct(ID_RANGE));

/// `securityv1.SecurityContextConstraints` (openshift/api `security/v1/types.go`).
const SCC: &[Field] = &[
    field("priority", Shape::Pointer),
    field("allowPrivilegedContainer", Shape::Bool),
    field("defaultAddCapabilities", STRINGS),
    field("requiredDropCapabilities", STRINGS),
    field("allowedCapabilities", STRINGS),
    field("allowHostDirVolumePlugin", Shape::Bool),
    field("volumes", STRINGS),
    omitempty(
        "allowedFlexVolumes",
        Shape::List(&Shape::Struct(&[field("driver", Shape::Str)])),
    ),
    field("allowHostNetwork", Shape::Bool),
    field("allowHostPorts", Shape::Bool),
    field("allowHostPID", Shape::Bool),
    field("allowHostIPC", Shape::Bool),
    omitempty("userNamespaceLevel", Shape::Str),
    omitempty("defaultAllowPrivilegeEscalation", Shape::Pointer),
    omitempty("allowPrivilegeEscalation", Shape::Pointer),
    omitempty(
        "seLinuxContext",
        Shape::Struct(&[
            omitempty("type", Shape::Str),
            omitempty("seLinuxOptions", Shape::StructPointer(SELINUX_OPTIONS)),
        ]),
    ),
    omitempty(
        "runAsUser",
        Shape::Struct(&[
            omitempty("type", Shape::Str),
            omitempty("uid", Shape::Pointer),
            omitempty("uidRangeMin", Shape::Pointer),
            omitempty("uidRangeMax", Shape::Pointer),
        ]),
    ),
    omitempty(
        "supplementalGroups",
        Shape::Struct(&[
            omitempty("type", Shape::Str),
            omitempty("ranges", ID_RANGES),
        ]),
    ),
    omitempty(
        "fsGroup",
        Shape::Struct(&[
            omitempty("type", Shape::Str),
            omitempty("ranges", ID_RANGES),
        ]),
    ),
    field("readOnlyRootFilesystem", Shape::Bool),
    field("users", STRINGS),
    field("groups", STRINGS),
    omitempty("seccompProfiles", STRINGS),
    omitempty("allowedUnsafeSysctls", STRINGS),
    omitempty("forbiddenSysctls", STRINGS),
];

/// `corev1.ObjectReference`.
const OBJECT_REFERENCE: &[Field] = &[
    omitempty("kind", Shape::Str),
    omitempty("namespace", Shape::Str),
    omitempty("name", Shape::Str),
    omitempty("uid", Shape::Str),
    omitempty("apiVersion", Shape::Str),
    omitempty("resourceVersion", Shape::Str),
    omitempty("fieldPath", Shape::Str),
];

/// `imagev1.TagReference` (openshift/api `image/v1/types.go`).
const TAG_REFERENCE: &[Field] = &[
    field("name", Shape::Str),
    field("annotations", Shape::Map),
    omitempty("from", Shape::StructPointer(OBJECT_REFERENCE)),
    omitempty("reference", Shape::Bool),
    field("generation", Shape::Pointer),
    omitempty(
        "importPolicy",
        Shape::Struct(&[
            omitempty("insecure", Shape::Bool),
            omitempty("scheduled", Shape::Bool),
            omitempty("importMode", Shape::Str),
        ]),
    ),
    omitempty(
        "referencePolicy",
        Shape::Struct(&[field("type", Shape::Str)]),
    ),
];

/// `imagev1.ImageStream` without `status` (openshift/api `image/v1/types.go`): `spec` is
/// always written, `lookupPolicy` a struct value.
const IMAGE_STREAM: &[Field] = &[field(
    "spec",
    Shape::Struct(&[
        omitempty(
            "lookupPolicy",
            Shape::Struct(&[field("local", Shape::Bool)]),
        ),
        omitempty("dockerImageRepository", Shape::Str),
        omitempty("tags", Shape::List(&Shape::Struct(TAG_REFERENCE))),
    ]),
)];

/// The fields of a kind whose round trip matters, `None` for the others.
fn fields_of(kind: TypedKind) -> Option<&'static [Field]> {
    match kind {
        TypedKind::SecurityContextConstraints => Some(SCC),
        TypedKind::ImageStream => Some(IMAGE_STREAM),
        _ => None,
    }
}

/// Whether [`round_trip`] changes objects of `kind`.
#[must_use]
pub fn needed(kind: TypedKind) -> bool {
    fields_of(kind).is_some()
}

/// `object` as the CVO sends it after decoding it into the Go type of `kind` and encoding it
/// again; objects of other kinds are left alone.
pub fn round_trip(kind: TypedKind, object: &mut Map<String, Value>) {
    let Some(fields) = fields_of(kind) else {
        return;
    };
    let mut out = Map::new();
    for key in ["apiVersion", "kind", "metadata"] {
        if let Some(v) = object.remove(key) {
            out.insert(key.to_owned(), v);
        }
    }
    encode_fields(fields, object, &mut out);
    *object = out;
}

/// Writes the fields of a struct decoded from `from` into `out`, in the type's field order
/// (`encoding/json` writes them in that order).
fn encode_fields(fields: &[Field], from: &Map<String, Value>, out: &mut Map<String, Value>) {
    for f in fields {
        let value = encode(f.shape, from.get(f.name));
        if f.omitempty && is_empty(f.shape, &value) {
            continue;
        }
        out.insert(f.name.to_owned(), value);
    }
}

/// The encoding of a value of `shape` decoded from `v` (`None`: the field was absent, so it
/// holds its zero value).
fn encode(shape: Shape, v: Option<&Value>) -> Value {
    match shape {
        Shape::Str | Shape::Bool | Shape::Int => match v {
            Some(v) if !v.is_null() => v.clone(),
            _ => zero(shape),
        },
        Shape::Pointer => v.cloned().unwrap_or(Value::Null),
        Shape::Map => match v {
            Some(m @ Value::Object(_)) => m.clone(),
            _ => Value::Null,
        },
        Shape::List(item) => match v {
            Some(Value::Array(items)) => {
                Value::Array(items.iter().map(|i| encode(*item, Some(i))).collect())
            }
            _ => Value::Null,
        },
        Shape::Struct(fields) => {
            let empty = Map::new();
            let from = v.and_then(Value::as_object).unwrap_or(&empty);
            let mut out = Map::new();
            encode_fields(fields, from, &mut out);
            Value::Object(out)
        }
        Shape::StructPointer(fields) => match v.and_then(Value::as_object) {
            Some(from) => {
                let mut out = Map::new();
                encode_fields(fields, from, &mut out);
                Value::Object(out)
            }
            None => Value::Null,
        },
    }
}

/// The zero value of a scalar shape.
fn zero(shape: Shape) -> Value {
    match shape {
        Shape::Bool => Value::Bool(false),
        Shape::Int => Value::from(0),
        _ => Value::String(String::new()),
    }
}

/// Go's `omitempty` test: a zero scalar, a nil pointer, an empty list; a struct value is
/// never empty.
fn is_empty(shape: Shape, v: &Value) -> bool {
    match (shape, v) {
        (_, Value::Null) => true,
        (Shape::Bool, Value::Bool(b)) => !b,
        (Shape::Str, Value::String(s)) => s.is_empty(),
        (Shape::Int, Value::Number(n)) => n.as_f64() == Some(0.0),
        (Shape::List(_), Value::Array(a)) => a.is_empty(),
        (Shape::Map, Value::Object(m)) => m.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scc(v: Value) -> Value {
        let mut o = v.as_object().unwrap().clone();
        round_trip(TypedKind::SecurityContextConstraints, &mut o);
        Value::Object(o)
    }

    #[test]
    fn zero_range_bounds_are_left_out() {
        let out =
            scc(json!({"fsGroup": {"type": "MustRunAs", "ranges": [{"min": 0, "max": 65534}]}}));
        assert_eq!(
            out["fsGroup"],
            json!({"type": "MustRunAs", "ranges": [{"max": 65534}]})
        );
    }

    #[test]
    fn fields_without_omitempty_are_always_written() {
        let out = scc(json!({"apiVersion": "security.openshift.io/v1",
            "kind": "SecurityContextConstraints", "metadata": {"name": "x"},
            "users": [], "allowHostNetwork": true, "unknown": 1, "status": {}}));
        assert_eq!(out["priority"], Value::Null);
        assert_eq!(out["allowHostIPC"], json!(false));
        assert_eq!(out["users"], json!([]));
        assert_eq!(out["groups"], Value::Null);
        assert_eq!(out["allowHostNetwork"], json!(true));
        assert!(out.get("unknown").is_none() && out.get("status").is_none());
        // Struct values are never empty: written even when absent.
        assert_eq!(out["seLinuxContext"], json!({}));
        assert!(out.get("allowPrivilegeEscalation").is_none());
        assert!(out.get("seccompProfiles").is_none());
        assert_eq!(out["metadata"], json!({"name": "x"}));
    }

    #[test]
    fn pointers_keep_zero_values() {
        let out = scc(json!({"allowPrivilegeEscalation": false,
            "runAsUser": {"type": "MustRunAsRange", "uidRangeMin": 0}}));
        assert_eq!(out["allowPrivilegeEscalation"], json!(false));
        assert_eq!(
            out["runAsUser"],
            json!({"type": "MustRunAsRange", "uidRangeMin": 0})
        );
    }

    #[test]
    fn image_streams_get_the_go_types_struct_values_and_nulls() {
        let mut o = json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "cli", "namespace": "openshift"},
            "spec": {"tags": [{"name": "latest",
                "importPolicy": {"scheduled": true, "importMode": "PreserveOriginal"},
                "from": {"kind": "DockerImage", "name": "quay.io/x@sha256:1"}}]}})
        .as_object()
        .unwrap()
        .clone();
        round_trip(TypedKind::ImageStream, &mut o);
        assert_eq!(
            o["spec"],
            json!({"lookupPolicy": {"local": false}, "tags": [{"name": "latest",
                "annotations": null,
                "from": {"kind": "DockerImage", "name": "quay.io/x@sha256:1"},
                "generation": null,
                "importPolicy": {"scheduled": true, "importMode": "PreserveOriginal"},
                "referencePolicy": {"type": ""}}]})
        );
        // A stream without tags: the spec is still written, with its lookup policy.
        let mut bare = json!({"kind": "ImageStream", "metadata": {"name": "x"}, "status": {}})
            .as_object()
            .unwrap()
            .clone();
        round_trip(TypedKind::ImageStream, &mut bare);
        assert_eq!(bare["spec"], json!({"lookupPolicy": {"local": false}}));
        assert!(bare.get("status").is_none());
    }

    #[test]
    fn other_kinds_are_untouched() {
        let mut o = json!({"spec": {"x": 0}}).as_object().unwrap().clone();
        let before = o.clone();
        round_trip(TypedKind::ConfigMap, &mut o);
        assert_eq!(o, before);
        assert!(!needed(TypedKind::Deployment));
    }
}
