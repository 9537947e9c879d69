//! One Kubernetes object document of a payload, with where it came from.

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

/// Annotation that marks a manifest as a tombstone: the object is deleted, never applied.
pub const DELETE_ANNOTATION: &str = "release.openshift.io/delete";
/// Annotation that makes the object created when missing and never updated.
pub const CREATE_ONLY_ANNOTATION: &str = "release.openshift.io/create-only";

/// The payload directory a manifest was read from. `manifests/` comes first and is templated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `manifests/`: the CVO's own manifests, rendered as Go templates.
    Manifests,
    /// `release-manifests/`: every operator's manifests, never templated.
    ReleaseManifests,
}

impl Source {
    /// The directory name inside the payload root.
    #[must_use]
    pub fn dir_name(self) -> &'static str {
        match self {
            Source::Manifests => "manifests",
            Source::ReleaseManifests => "release-manifests",
        }
    }
}

/// The identity the CVO uses for an object: group, kind, namespace and name (no version).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ObjectId {
    /// API group, empty for the core group.
    pub group: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Namespace, `None` when the manifest gives none.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        match &self.namespace {
            Some(ns) => write!(f, "{kind} {ns}/{}", self.name),
            None => write!(f, "{kind} {}", self.name),
        }
    }
}

impl ObjectId {
    /// `Kind namespace/name` or `Kind name`, without the group: how progress lines, reports,
    /// failures and the e2e timeline name an object.
    #[must_use]
    pub fn short(&self) -> ShortId<'_> {
        ShortId(self)
    }
}

/// [`ObjectId::short`]: `Kind namespace/name` or `Kind name`.
#[derive(Debug, Clone, Copy)]
pub struct ShortId<'a>(&'a ObjectId);

impl fmt::Display for ShortId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = self.0;
        match &id.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", id.kind, id.name),
            None => write!(f, "{} {}", id.kind, id.name),
        }
    }
}

/// Serializes an [`ObjectId`] as `kind`, `namespace`, `name` (no `group`): the shape of the
/// object fields of the apply report and events, for `#[serde(flatten, serialize_with)]`.
///
/// # Errors
/// The serializer's.
pub fn serialize_without_group<S: serde::Serializer>(
    id: &ObjectId,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct WithoutGroup<'a> {
        kind: &'a str,
        namespace: &'a Option<String>,
        name: &'a str,
    }
    WithoutGroup {
        kind: &id.kind,
        namespace: &id.namespace,
        name: &id.name,
    }
    .serialize(serializer)
}

/// One parsed object document together with its file, document index and line.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Directory the file was read from.
    pub source: Source,
    /// File name (basename), the key of all CVO ordering.
    pub file: String,
    /// Index of the document inside the file, counting only non-empty documents, from 0.
    pub document: usize,
    /// 1-based line where the document starts.
    pub line: usize,
    /// `apiVersion` as written.
    pub api_version: String,
    /// Group, kind, namespace and name.
    pub id: ObjectId,
    /// The whole object, exactly as parsed. Shared, not copied, by clones of the manifest and
    /// by loads that parse the same file text ([`crate::payload::ParseCache`]); a change goes
    /// through `Arc::make_mut`, which copies a shared object first.
    pub object: std::sync::Arc<Value>,
}

impl Manifest {
    /// Path of the file relative to the payload root, e.g. `release-manifests/0000_50_x_00.yaml`.
    #[must_use]
    pub fn path(&self) -> String {
        format!("{}/{}", self.source.dir_name(), self.file)
    }

    /// The API version part of `apiVersion` (`v1` in `apps/v1`).
    #[must_use]
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, v)| v)
    }

    /// `metadata.annotations`, if the object has any.
    #[must_use]
    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.object.get("metadata")?.get("annotations")?.as_object()
    }

    /// The string value of one annotation.
    #[must_use]
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations()?.get(key)?.as_str()
    }

    /// Whether the object's GVK is exactly `batch/v1 Job`, the CVO's graph barrier.
    #[must_use]
    pub fn is_job(&self) -> bool {
        self.id.group == "batch" && self.version() == "v1" && self.id.kind == "Job"
    }

    /// Whether this is a `config.openshift.io/v1 ClusterOperator`, which is waited on, not applied.
    #[must_use]
    pub fn is_cluster_operator(&self) -> bool {
        self.id.group == "config.openshift.io"
            && self.version() == "v1"
            && self.id.kind == "ClusterOperator"
    }

    /// Whether this is a CustomResourceDefinition.
    #[must_use]
    pub fn is_crd(&self) -> bool {
        self.id.group == "apiextensions.k8s.io" && self.id.kind == "CustomResourceDefinition"
    }

    /// Whether the delete annotation is set to `"true"`.
    #[must_use]
    pub fn is_delete(&self) -> bool {
        self.annotation(DELETE_ANNOTATION) == Some("true")
    }

    /// Whether the create-only annotation is `"true"` (case-insensitive, as the CVO reads it).
    #[must_use]
    pub fn is_create_only(&self) -> bool {
        self.annotation(CREATE_ONLY_ANNOTATION)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// A short human label: `file#document kind namespace/name`.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}#{} {}", self.file, self.document, self.id)
    }
}
