//! Requests a simulated pod sends as itself: impersonating its ServiceAccount (user
//! `system:serviceaccount:NS:NAME` with the service-account groups), so the API server's own
//! authorizer decides, as it would for a real pod's token.

use std::time::Duration;

use kube::Client;
use serde_json::{Value, json};

use crate::cluster::request::{self, RequestError, Response};
use crate::rbac::{PolicyRule, rules_of};

/// Longest time for one request of a simulated pod.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A ServiceAccount a pod runs as.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// The namespace (the pod's).
    pub namespace: String,
    /// The ServiceAccount name.
    pub name: String,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a rules review answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rights {
    /// `resourceRules` and `nonResourceRules`.
    pub rules: Vec<PolicyRule>,
    /// The review says it could not list every rule.
    pub incomplete: bool,
}

impl Identity {
    /// The user name the API server sees.
    #[must_use]
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    fn request(
        &self,
        method: http::Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<&Value>,
    ) -> http::Request<Vec<u8>> {
        let mut b = http::Request::builder()
            .method(method)
            .uri(path)
            .header("Accept", "application/json")
            .header("Impersonate-User", self.user())
            .header("Impersonate-Group", "system:serviceaccounts")
            .header(
                "Impersonate-Group",
                format!("system:serviceaccounts:{}", self.namespace),
            )
            .header("Impersonate-Group", "system:authenticated");
        if let Some(ct) = content_type {
            b = b.header("Content-Type", ct);
        }
        let bytes = body.map(|v| v.to_string().into_bytes()).unwrap_or_default();
        b.body(bytes).expect("a valid request")
    }

    /// Sends `method path` with a JSON `body` as this identity.
    ///
    /// # Errors
    /// The [`RequestError`] of the answer (403 when the authorizer refuses).
    pub async fn send(
        &self,
        client: &Client,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Response, RequestError> {
        let ct = match method {
            http::Method::PATCH => Some("application/merge-patch+json"),
            _ if body.is_some() => Some("application/json"),
            _ => None,
        };
        request::send(client, self.request(method, path, ct, body), TIMEOUT).await
    }

    /// Whether it may do `verb` on `resource` (maybe `resource/subresource`) of `group`,
    /// named `name`, cluster-wide or in `namespace` (a SelfSubjectAccessReview, as itself).
    ///
    /// # Errors
    /// The [`RequestError`] of the review.
    pub async fn may(
        &self,
        client: &Client,
        verb: &str,
        group: &str,
        resource: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<bool, RequestError> {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {
                "verb": verb, "group": group, "resource": resource,
                "subresource": subresource, "name": name,
                "namespace": namespace.unwrap_or_default(),
            }},
        });
        let answer = self
            .send(
                client,
                http::Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                Some(&review),
            )
            .await?;
        Ok(answer
            .body
            .pointer("/status/allowed")
            .and_then(Value::as_bool)
            == Some(true))
    }

    /// Its effective rights in its namespace (a SelfSubjectRulesReview, as itself).
    ///
    /// # Errors
    /// The [`RequestError`] of the review.
    pub async fn rights(&self, client: &Client) -> Result<Rights, RequestError> {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": self.namespace},
        });
        let answer = self
            .send(
                client,
                http::Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                Some(&review),
            )
            .await?;
        let status = answer.body.get("status").unwrap_or(&Value::Null);
        let mut rules = rules_of(status.get("resourceRules"));
        rules.extend(rules_of(status.get("nonResourceRules")));
        Ok(Rights {
            rules,
            incomplete: status.get("incomplete").and_then(Value::as_bool) == Some(true),
        })
    }
}
