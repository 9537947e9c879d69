//! Who may read `/metrics`: an authenticated client that the API server authorizes to `get` the
//! non-resource URL `/metrics`.
//!
//! Authentication, in the order the kube-apiserver tries them:
//! 1. a client certificate that chains to the client CA ([`ClientCa`]; the CVO's rule): the user
//!    is its common name, the groups its organizations;
//! 2. a bearer token (`Authorization: Bearer ...`), checked with a `TokenReview` (the Kubernetes
//!    convention of kube-rbac-proxy and the control-plane components).
//!
//! Authorization: a `SubjectAccessReview` of that user, `get` on `/metrics`. Decisions are cached
//! for [`CACHE_TTL`] per credential (the default of the apiserver's delegated authentication and
//! authorization), so a scrape every few seconds costs two API requests per ten seconds, not per
//! scrape.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use rustls::pki_types::CertificateDer;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::client_ca::ClientCa;

/// How long a decision about one credential is reused.
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Credentials remembered at most; past that the cache starts over.
pub const CACHE_ENTRIES: usize = 1024;
/// Bound on one TokenReview or SubjectAccessReview.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The path and verb a client must be allowed.
pub const METRICS_PATH: &str = "/metrics";

/// An authenticated user, as a TokenReview or a client certificate names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The user's UID (empty for a certificate).
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes (from a TokenReview).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The answer to one request for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Serve the metrics.
    Allowed {
        /// Who asked.
        user: String,
    },
    /// 401: no credential, or none that authenticates.
    Unauthenticated(String),
    /// 403: authenticated, not authorized.
    Forbidden {
        /// Who asked.
        user: String,
    },
    /// 500: the API server could not say whether the user is authorized.
    Failed(String),
}

/// Authentication and authorization of `/metrics`.
pub struct Access {
    client: kube::Client,
    client_ca: Arc<ClientCa>,
    cache: Mutex<HashMap<[u8; 32], (Instant, Decision)>>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("client_ca", &self.client_ca)
            .finish_non_exhaustive()
    }
}

impl Access {
    /// Reviews with `client` (which needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`, ClusterRole `system:auth-delegator`), trusting client
    /// certificates of `client_ca`.
    #[must_use]
    pub fn new(client: kube::Client, client_ca: Arc<ClientCa>) -> Self {
        Access {
            client,
            client_ca,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The client CA.
    #[must_use]
    pub fn client_ca(&self) -> &Arc<ClientCa> {
        &self.client_ca
    }

    /// Decides a request that carried `authorization` (the header's value) over a connection
    /// whose client presented `chain`.
    pub async fn decide(
        &self,
        authorization: Option<&[u8]>,
        chain: Option<&[CertificateDer<'static>]>,
    ) -> Decision {
        let mut cert_error = None;
        if let Some(chain) = chain.filter(|c| !c.is_empty()) {
            let key = self.key(b"cert", chain[0].as_ref());
            if let Some(d) = self.cached(&key) {
                return d;
            }
            match self.client_ca.verify(chain) {
                Ok(user) => {
                    let d = self.authorize(&user).await;
                    return self.remember(key, d);
                }
                Err(e) => cert_error = Some(e.to_string()),
            }
        }
        let Some(token) = authorization.and_then(bearer) else {
            return Decision::Unauthenticated(cert_error.unwrap_or_else(|| {
                "no client certificate and no bearer token; hint: send a ServiceAccount token \
                 as 'Authorization: Bearer TOKEN'"
                    .into()
            }));
        };
        let key = self.key(b"token", token);
        if let Some(d) = self.cached(&key) {
            return d;
        }
        let d = match self.review_token(token).await {
            Ok(Some(user)) => self.authorize(&user).await,
            Ok(None) => Decision::Unauthenticated("the bearer token is not valid".into()),
            Err(e) => {
                tracing::warn!(
                    "/metrics: reviewing a bearer token: {e}; hint: the operator needs create on \
                     tokenreviews (ClusterRole system:auth-delegator)"
                );
                // Not cached: the next request asks again.
                return Decision::Unauthenticated("the bearer token could not be reviewed".into());
            }
        };
        self.remember(key, d)
    }

    /// The cache key of a credential: its SHA-256 with the kind and the client CA's generation
    /// (a new CA invalidates what the old one decided).
    fn key(&self, kind: &[u8], credential: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(kind);
        h.update(self.client_ca.generation().to_le_bytes());
        h.update(credential);
        h.finalize().into()
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, d)| d.clone())
    }

    /// Caches `d` unless it is a failure, and returns it.
    fn remember(&self, key: [u8; 32], d: Decision) -> Decision {
        if matches!(d, Decision::Failed(_)) {
            return d;
        }
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now(), d.clone()));
        d
    }

    /// The user a token belongs to (`None`: not authenticated).
    async fn review_token(&self, token: &[u8]) -> Result<Option<UserInfo>, String> {
        let token = std::str::from_utf8(token).map_err(|_| "the token is not UTF-8".to_string())?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| format!("no answer within {REVIEW_TIMEOUT:?}"))?
                .map_err(|e| e.to_string())?;
        let Some(status) = answer.status else {
            return Ok(None);
        };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let Some(user) = status.user else {
            return Ok(None);
        };
        Ok(Some(UserInfo {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }

    /// Whether `user` may `get` `/metrics`.
    async fn authorize(&self, user: &UserInfo) -> Decision {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.into()),
                    verb: Some("get".into()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = match tokio::time::timeout(
            REVIEW_TIMEOUT,
            api.create(&PostParams::default(), &review),
        )
        .await
        {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                tracing::warn!(
                    "/metrics: reviewing the access of {}: {e}; hint: the operator needs create \
                     on subjectaccessreviews (ClusterRole system:auth-delegator)",
                    user.name
                );
                return Decision::Failed("authorization could not be checked".into());
            }
            Err(_) => return Decision::Failed("authorization could not be checked".into()),
        };
        if answer.status.is_some_and(|s| s.allowed) {
            Decision::Allowed {
                user: user.name.clone(),
            }
        } else {
            Decision::Forbidden {
                user: user.name.clone(),
            }
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` value (the scheme in any case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_needs_a_token() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bear"), None);
    }
}
