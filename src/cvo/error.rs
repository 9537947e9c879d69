//! The CVO's error vocabulary: how a failed request becomes a reason, how a task's error is
//! worded ("Could not update … (N of M): cause"), the summary shown for a reason, and how the
//! errors of one pass are condensed into the single failure the ClusterVersion reports.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// How an error affects the run, from least to most severe (the CVO's ranking).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Effect {
    /// Reported, but the task counts as done (a Degraded operator while initializing).
    Report,
    /// Not an error yet: something is still converging (an operator updating versions).
    None,
    /// An error once the operator has been waited on for 40 minutes.
    FailAfterInterval,
    /// An error.
    Fail,
}

/// One error the way the CVO carries it (`payload.UpdateError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateError {
    /// Machine reason, e.g. `ClusterOperatorNotAvailable`.
    pub reason: String,
    /// Reason used when several errors of this reason are condensed.
    pub plural_reason: String,
    /// Human message.
    pub message: String,
    /// Message template for a condensed group; `%s` is replaced by the names.
    pub plural_message_format: String,
    /// The object concerned (operator name, `ns/name`), empty when none.
    pub name: String,
    /// The objects concerned, for a condensed group.
    pub names: Vec<String>,
    /// Detail text.
    pub nested_message: String,
    /// The errors this one stands for (a condensed group or `MultipleErrors`).
    pub nested: Vec<UpdateError>,
    /// Effect; `None` when unset (which the CVO treats like [`Effect::Fail`]).
    pub effect: Option<Effect>,
    /// The error came from a ClusterOperator task.
    pub cluster_operator: bool,
}

impl UpdateError {
    /// An error with a reason and message, no effect, not from a ClusterOperator.
    #[must_use]
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        UpdateError {
            reason: reason.to_string(),
            plural_reason: String::new(),
            message: message.into(),
            plural_message_format: String::new(),
            name: String::new(),
            names: Vec::new(),
            nested_message: String::new(),
            nested: Vec::new(),
            effect: None,
            cluster_operator: false,
        }
    }
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UpdateError {}

/// The API error classes the CVO tells apart (`reasonForPayloadSyncError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiErrorClass {
    /// 404 NotFound.
    NotFound,
    /// 409 AlreadyExists.
    AlreadyExists,
    /// 409 Conflict.
    Conflict,
    /// 504 Timeout.
    Timeout,
    /// 503 ServiceUnavailable.
    ServiceUnavailable,
    /// 500 InternalError.
    InternalError,
    /// 422 Invalid.
    Invalid,
    /// 401 Unauthorized.
    Unauthorized,
    /// 403 Forbidden.
    Forbidden,
    /// The server's own timeout (reason `ServerTimeout`).
    ServerTimeout,
    /// 429 TooManyRequests.
    TooManyRequests,
    /// The server does not serve the kind.
    NoKindMatch,
    /// Anything else (transport errors, health-check text).
    Other,
}

impl ApiErrorClass {
    /// The class of a failed request from its HTTP code and the `reason` of its `Status`.
    #[must_use]
    pub fn from_status(code: u16, reason: &str) -> Self {
        match reason {
            "NotFound" => return ApiErrorClass::NotFound,
            "AlreadyExists" => return ApiErrorClass::AlreadyExists,
            "Conflict" => return ApiErrorClass::Conflict,
            "Timeout" => return ApiErrorClass::Timeout,
            "ServiceUnavailable" => return ApiErrorClass::ServiceUnavailable,
            "InternalError" => return ApiErrorClass::InternalError,
            "Invalid" => return ApiErrorClass::Invalid,
            "Unauthorized" => return ApiErrorClass::Unauthorized,
            "Forbidden" => return ApiErrorClass::Forbidden,
            "ServerTimeout" => return ApiErrorClass::ServerTimeout,
            "TooManyRequests" => return ApiErrorClass::TooManyRequests,
            _ => {}
        }
        match code {
            404 => ApiErrorClass::NotFound,
            409 => ApiErrorClass::Conflict,
            504 => ApiErrorClass::Timeout,
            503 => ApiErrorClass::ServiceUnavailable,
            500 => ApiErrorClass::InternalError,
            422 => ApiErrorClass::Invalid,
            401 => ApiErrorClass::Unauthorized,
            403 => ApiErrorClass::Forbidden,
            429 => ApiErrorClass::TooManyRequests,
            _ => ApiErrorClass::Other,
        }
    }

    /// The CVO's reason and cause text for this class.
    #[must_use]
    pub fn reason_and_cause(self) -> (&'static str, &'static str) {
        match self {
            ApiErrorClass::NotFound | ApiErrorClass::AlreadyExists => (
                "UpdatePayloadResourceNotFound",
                "resource may have been deleted",
            ),
            ApiErrorClass::Conflict => (
                "UpdatePayloadResourceConflict",
                "someone else is updating this resource",
            ),
            ApiErrorClass::Timeout | ApiErrorClass::ServiceUnavailable => (
                "UpdatePayloadClusterDown",
                "the server is down or not responding",
            ),
            ApiErrorClass::InternalError => (
                "UpdatePayloadClusterError",
                "the server is reporting an internal error",
            ),
            ApiErrorClass::Invalid => (
                "UpdatePayloadResourceInvalid",
                "the object is invalid, possibly due to local cluster configuration",
            ),
            ApiErrorClass::Unauthorized => (
                "UpdatePayloadClusterUnauthorized",
                "could not authenticate to the server",
            ),
            ApiErrorClass::Forbidden => (
                "UpdatePayloadResourceForbidden",
                "the server has forbidden updates to this resource",
            ),
            ApiErrorClass::ServerTimeout | ApiErrorClass::TooManyRequests => (
                "UpdatePayloadClusterOverloaded",
                "the server is overloaded and is not accepting updates",
            ),
            ApiErrorClass::NoKindMatch => (
                "UpdatePayloadResourceTypeMissing",
                "the server does not recognize this resource, check extension API servers",
            ),
            ApiErrorClass::Other => ("UpdatePayloadFailed", ""),
        }
    }
}

/// How the CVO names a task in messages: `{kind} "{ns}/{name}" ({index} of {total})`, the kind
/// in lower case; the file name stands in for a missing name.
#[must_use]
pub fn task_label(
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    file: &str,
    index: usize,
    total: usize,
) -> String {
    let kind = kind.to_lowercase();
    let object = match (name.is_empty(), namespace.filter(|n| !n.is_empty())) {
        (true, _) => return format!("{kind} {file:?} ({index} of {total})"),
        (false, Some(ns)) => format!("{ns}/{name}"),
        (false, None) => name.to_string(),
    };
    format!("{kind} \"{object}\" ({index} of {total})")
}

/// The error a task ends with once its retries are spent (`Task.Run`): the class's reason and
/// `Could not update {task}: {cause}` (no `: …` for an unclassified error).
#[must_use]
pub fn task_error(task: &str, class: ApiErrorClass, detail: &str) -> UpdateError {
    let (reason, cause) = class.reason_and_cause();
    let message = if cause.is_empty() {
        format!("Could not update {task}")
    } else {
        format!("Could not update {task}: {cause}")
    };
    let mut e = UpdateError::new(reason, message);
    e.nested_message = detail.to_string();
    e
}

/// `SummaryForReason`: the short text the Progressing condition shows for a reason.
#[must_use]
pub fn summary_for_reason(reason: &str, name: &str) -> String {
    let named = |with: String, without: &str| {
        if name.is_empty() {
            without.to_string()
        } else {
            with
        }
    };
    match reason {
        "UpdatePayloadResourceNotFound" | "UpdatePayloadResourceConflict" => {
            "some resources could not be updated".into()
        }
        "UpdatePayloadClusterDown" => "the control plane is down or not responding".into(),
        "UpdatePayloadClusterError" => "the control plane is reporting an internal error".into(),
        "UpdatePayloadClusterOverloaded" => {
            "the control plane is overloaded and is not accepting updates".into()
        }
        "UpdatePayloadClusterUnauthorized" => "could not authenticate to the server".into(),
        "UpdatePayloadRetrievalFailed" => "could not download the update".into(),
        "UpdatePayloadResourceForbidden" => "the server is rejecting updates".into(),
        "UpdatePayloadResourceTypeMissing" => {
            "a required extension is not available to update".into()
        }
        "UpdatePayloadResourceInvalid" => "some cluster configuration is invalid".into(),
        "UpdatePayloadIntegrity" => "the contents of the update are invalid".into(),
        "ImageVerificationFailed" => "the image may not be safe to use".into(),
        "UpgradePreconditionCheckFailed" => "it may not be safe to apply this update".into(),
        "ClusterOperatorDegraded" => named(
            format!("the cluster operator {name} is degraded"),
            "a cluster operator is degraded",
        ),
        "ClusterOperatorNotAvailable" => named(
            format!("the cluster operator {name} is not available"),
            "a cluster operator is not available",
        ),
        "ClusterOperatorsNotAvailable" => "some cluster operators are not available".into(),
        "ClusterOperatorNoVersions" => named(
            format!("the cluster operator {name} does not declare expected versions"),
            "a cluster operator does not declare expected versions",
        ),
        "WorkloadNotAvailable" => named(
            format!("the workload {name} has not yet successfully rolled out"),
            "a workload has not yet rolled out",
        ),
        "WorkloadNotProgressing" => named(
            format!("the workload {name} cannot roll out"),
            "a workload cannot roll out",
        ),
        r if r.starts_with("UpdatePayload") => "the update could not be applied".into(),
        r => named(
            format!("{name} has an unknown error: {r}"),
            &format!("an unknown error has occurred: {r}"),
        ),
    }
}

/// The failure of a pass (`summarizeTaskGraphErrors`): ClusterOperator errors grouped by
/// reason, then one error as is or several as `MultipleErrors`. `None` when there is none.
#[must_use]
pub fn summarize(errors: Vec<UpdateError>) -> Option<UpdateError> {
    let mut out = condense_cluster_operators(errors);
    match out.len() {
        0 => None,
        1 => out.pop(),
        _ => Some(multiple(out)),
    }
}

/// `condenseClusterOperators`: other errors first in their order, then one entry per
/// ClusterOperator reason, reasons sorted.
#[must_use]
pub fn condense_cluster_operators(errors: Vec<UpdateError>) -> Vec<UpdateError> {
    let mut out = Vec::new();
    let mut groups: BTreeMap<String, Vec<UpdateError>> = BTreeMap::new();
    for e in errors {
        if e.cluster_operator {
            groups.entry(e.reason.clone()).or_default().push(e);
        } else {
            out.push(e);
        }
    }
    for (_, mut group) in groups {
        if group.len() == 1 {
            out.extend(group.pop());
            continue;
        }
        let mut names: Vec<String> = group.iter().map(|e| e.name.clone()).collect();
        names.sort();
        let name = names.join(", ");
        let first = &group[0];
        let effect = group.iter().filter_map(|e| e.effect).max();
        let mut e = UpdateError::new(
            &first.plural_reason,
            first.plural_message_format.replace("%s", &name),
        );
        e.plural_reason.clone_from(&first.plural_reason);
        e.plural_message_format
            .clone_from(&first.plural_message_format);
        e.name = name;
        e.names = names;
        e.effect = effect;
        e.cluster_operator = true;
        e.nested_message = group
            .iter()
            .map(|g| g.message.clone())
            .collect::<Vec<_>>()
            .join(", ");
        e.nested = group;
        out.push(e);
    }
    out
}

/// `newMultipleError`: reason `MultipleErrors`, the unique messages sorted under
/// "Multiple errors are preventing progress:".
#[must_use]
pub fn multiple(errors: Vec<UpdateError>) -> UpdateError {
    let mut messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
    messages.sort_unstable();
    messages.dedup();
    let mut message = String::from("Multiple errors are preventing progress:");
    for m in messages {
        message.push_str("\n* ");
        message.push_str(m);
    }
    let mut e = UpdateError::new("MultipleErrors", message);
    e.nested = errors;
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn co(name: &str, reason: &str, plural: &str, format: &str, effect: Effect) -> UpdateError {
        let mut e = UpdateError::new(reason, format!("Cluster operator {name} is x"));
        e.plural_reason = plural.into();
        e.plural_message_format = format.into();
        e.name = name.into();
        e.effect = Some(effect);
        e.cluster_operator = true;
        e
    }

    #[test]
    fn task_labels_and_wrapped_errors_read_like_the_cvo() {
        let t = task_label("ConfigMap", Some("ns"), "a", "f.yaml", 3, 10);
        assert_eq!(t, "configmap \"ns/a\" (3 of 10)");
        assert_eq!(
            task_label("ClusterRole", None, "r", "f.yaml", 1, 2),
            "clusterrole \"r\" (1 of 2)"
        );
        let e = task_error(&t, ApiErrorClass::Invalid, "spec.x: Invalid");
        assert_eq!(e.reason, "UpdatePayloadResourceInvalid");
        assert_eq!(
            e.message,
            "Could not update configmap \"ns/a\" (3 of 10): the object is invalid, possibly due to local cluster configuration"
        );
        let e = task_error(&t, ApiErrorClass::Other, "boom");
        assert_eq!(e.reason, "UpdatePayloadFailed");
        assert_eq!(e.message, "Could not update configmap \"ns/a\" (3 of 10)");
    }

    #[test]
    fn status_codes_map_to_the_cvo_reasons() {
        let r = |c, s| ApiErrorClass::from_status(c, s).reason_and_cause().0;
        assert_eq!(r(409, "AlreadyExists"), "UpdatePayloadResourceNotFound");
        assert_eq!(r(409, ""), "UpdatePayloadResourceConflict");
        assert_eq!(r(500, "ServerTimeout"), "UpdatePayloadClusterOverloaded");
        assert_eq!(r(500, ""), "UpdatePayloadClusterError");
        assert_eq!(r(503, ""), "UpdatePayloadClusterDown");
        assert_eq!(r(403, "Forbidden"), "UpdatePayloadResourceForbidden");
        assert_eq!(r(418, ""), "UpdatePayloadFailed");
    }

    #[test]
    fn summaries_name_the_object_or_fall_back() {
        assert_eq!(
            summary_for_reason("ClusterOperatorDegraded", "dns"),
            "the cluster operator dns is degraded"
        );
        assert_eq!(
            summary_for_reason("ClusterOperatorDegraded", ""),
            "a cluster operator is degraded"
        );
        assert_eq!(
            summary_for_reason("UpdatePayloadSomethingNew", "x"),
            "the update could not be applied"
        );
        assert_eq!(
            summary_for_reason("MultipleErrors", ""),
            "an unknown error has occurred: MultipleErrors"
        );
        assert_eq!(
            summary_for_reason("ClusterOperatorsDegraded", "a, b"),
            "a, b has an unknown error: ClusterOperatorsDegraded"
        );
    }

    #[test]
    fn operator_errors_are_condensed_by_reason_after_the_others() {
        let na = |n| {
            co(
                n,
                "ClusterOperatorNotAvailable",
                "ClusterOperatorsNotAvailable",
                "Cluster operators %s are not available",
                Effect::Fail,
            )
        };
        let deg = co(
            "dns",
            "ClusterOperatorDegraded",
            "ClusterOperatorsDegraded",
            "Cluster operators %s are degraded",
            Effect::FailAfterInterval,
        );
        let plain = UpdateError::new("UpdatePayloadFailed", "Could not update x");
        let out = condense_cluster_operators(vec![na("b"), plain.clone(), deg.clone(), na("a")]);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], plain);
        assert_eq!(out[1], deg);
        assert_eq!(out[2].reason, "ClusterOperatorsNotAvailable");
        assert_eq!(out[2].name, "a, b");
        assert_eq!(out[2].message, "Cluster operators a, b are not available");
        assert_eq!(out[2].effect, Some(Effect::Fail));
        let all = summarize(vec![na("b"), plain, deg, na("a")]).unwrap();
        assert_eq!(all.reason, "MultipleErrors");
        assert_eq!(
            all.message,
            "Multiple errors are preventing progress:\n* Cluster operator dns is x\n* Cluster operators a, b are not available\n* Could not update x"
        );
        assert!(summarize(Vec::new()).is_none());
        assert_eq!(
            summarize(vec![na("z")]).unwrap().reason,
            "ClusterOperatorNotAvailable"
        );
    }

    #[test]
    fn a_group_takes_its_most_severe_effect() {
        let mk = |n, e| co(n, "R", "Rs", "%s", e);
        let out = condense_cluster_operators(vec![mk("a", Effect::Report), mk("b", Effect::None)]);
        assert_eq!(out[0].effect, Some(Effect::None));
    }
}
