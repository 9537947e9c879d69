//! The stored built-in schemas of each Kubernetes version, decompressed and compiled, with
//! the rules the API server checks in code added to them.

use std::collections::HashMap;
use std::io::Read;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::SchemaError;
use super::compile::{self, NodeId, Schemas};

/// The Kubernetes minor versions whose built-in schemas are stored, newest first.
pub const KUBE_VERSIONS: &[&str] = &["1.37"];

/// The default `--kube-version`: the version of the test control plane.
pub const DEFAULT_KUBE_VERSION: &str = "1.37";

fn stored(minor: &str) -> Option<&'static [u8]> {
    match minor {
        "1.37" => Some(include_bytes!("../../schemas/kube-1.37.json.gz")),
        _ => None,
    }
}

#[derive(Deserialize)]
struct StoredKind {
    group: String,
    version: String,
    kind: String,
    namespaced: bool,
    schema: String,
}

#[derive(Deserialize)]
struct StoredDoc {
    version: String,
    kinds: Vec<StoredKind>,
    schemas: Map<String, Value>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct KindInfo {
    pub(super) node: NodeId,
    pub(super) namespaced: bool,
}

/// The built-in kinds of one Kubernetes version, compiled.
#[derive(Debug)]
pub struct BuiltIn {
    /// The API server's version, e.g. `v1.37.2`.
    pub version: String,
    pub(super) schemas: Schemas,
    pub(super) kinds: HashMap<(String, String, String), KindInfo>,
    pub(super) object_meta: NodeId,
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

impl BuiltIn {
    /// Decompresses and compiles the stored schemas of `minor` (e.g. `1.37`).
    ///
    /// # Errors
    /// [`SchemaError::UnknownVersion`] when none are stored; a broken stored document.
    pub fn load(minor: &str) -> Result<Self, SchemaError> {
        let minor = minor.trim_start_matches('v');
        let bytes = stored(minor).ok_or_else(|| SchemaError::UnknownVersion {
            version: minor.to_owned(),
        })?;
        let stored_err = |message: String| SchemaError::Stored {
            version: minor.to_owned(),
            message,
        };
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut text)
            .map_err(|e| stored_err(e.to_string()))?;
        let doc: StoredDoc =
            serde_json::from_slice(&text).map_err(|e| stored_err(e.to_string()))?;
        let mut schemas = Schemas::default();
        let ids = schemas.compile_builtin(&doc.schemas)?;
        let object_meta = *ids
            .get(OBJECT_META)
            .ok_or_else(|| stored_err(format!("no {OBJECT_META}")))?;
        patch(&mut schemas, &ids);
        let mut kinds = HashMap::new();
        for k in doc.kinds {
            let node = *ids
                .get(&k.schema)
                .ok_or_else(|| stored_err(format!("kind {} names no schema", k.kind)))?;
            kinds.insert(
                (k.group, k.version, k.kind),
                KindInfo {
                    node,
                    namespaced: k.namespaced,
                },
            );
        }
        Ok(BuiltIn {
            version: doc.version,
            schemas,
            kinds,
            object_meta,
        })
    }
}

const JSON_SCHEMA_PROPS: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";

/// Value sets the API server enforces in Go code although its OpenAPI documents list none:
/// (schema, property, values).
const ENUMS: &[(&str, &str, &[&str])] = &[
    (
        "io.k8s.api.rbac.v1.RoleRef",
        "kind",
        &["Role", "ClusterRole"],
    ),
    (
        "io.k8s.api.rbac.v1.RoleRef",
        "apiGroup",
        &["rbac.authorization.k8s.io"],
    ),
    (
        "io.k8s.api.rbac.v1.Subject",
        "kind",
        &["ServiceAccount", "User", "Group"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.Subject",
        "kind",
        &["Group", "ServiceAccount", "User"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.FlowDistinguisherMethod",
        "type",
        &["ByNamespace", "ByUser"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.LimitResponse",
        "type",
        &["Queue", "Reject"],
    ),
    (
        "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationSpec",
        "type",
        &["Exempt", "Limited"],
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec",
        "scope",
        &["Cluster", "Namespaced"],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        "policyTypes",
        &["Ingress", "Egress"],
    ),
];

/// Rules of the built-in kinds that their OpenAPI documents do not carry: the
/// `JSONSchemaPropsOr…` unions of CRDs, and the value sets of [`ENUMS`].
fn patch(schemas: &mut Schemas, ids: &HashMap<String, NodeId>) {
    if let Some(&props) = ids.get(JSON_SCHEMA_PROPS) {
        for suffix in ["OrArray", "OrBool", "OrStringArray"] {
            if let Some(&id) = ids.get(&format!("{JSON_SCHEMA_PROPS}{suffix}")) {
                schemas.nodes[id].special = compile::Special::SchemaOr(props);
            }
        }
    }
    for (schema, property, values) in ENUMS {
        let Some(&id) = ids.get(*schema) else {
            continue;
        };
        let Some(&p) = schemas.nodes[id].properties.get(*property) else {
            continue;
        };
        let p = match schemas.nodes[p].items {
            Some(items) => items,
            None => p,
        };
        schemas.nodes[p].enumeration = values.iter().map(|v| Value::from(*v)).collect();
    }
}
