//! Release signature verification, as the CVO verifies `spec.desiredUpdate.image` before it
//! downloads it (openshift/library-go `pkg/verify`, the CVO's `pkg/cvo/updatepayload.go`):
//!
//! - The verifier comes from the running release's payload: the first ConfigMap (in load
//!   order) annotated `release.openshift.io/verification-config-map`. Each `verifier-public-key-*`
//!   key is a keyring (OpenPGP public keys, ASCII-armored or binary), each `store-*` key a
//!   signature store ([`store::Store`]). Without such a ConfigMap nothing can be verified
//!   (library-go's `Reject`: "verification is not possible").
//! - An image is verified by the digest after its `@`; one named by tag cannot be.
//! - Signatures are read from the cluster's signature ConfigMaps, then, when those are not
//!   enough, from every store at once, all within the verification timeout. The image is
//!   verified when every keyring has a good signature ([`signature::check`]); else the error
//!   names the keyrings left and carries every reason a signature was not good or could not
//!   be read.

pub mod signature;
pub mod store;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use kube::Client;
use pgp::composed::SignedPublicKey;
use serde_json::Value;

use self::store::{Found, Store};
use crate::manifest::Manifest;

/// The annotation of the verifier ConfigMap in a payload.
pub const CONFIG_MAP_ANNOTATION: &str = "release.openshift.io/verification-config-map";

const KEY_PREFIX: &str = "verifier-public-key-";
const STORE_PREFIX: &str = "store-";

/// A verifier ConfigMap that cannot be used (library-go's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `data` is not a map of strings.
    #[error("{source_name} is not valid: .data accessor error: contains non-string value")]
    Data {
        /// "the config map NS/NAME".
        source_name: String,
    },
    /// A `verifier-public-key-*` value is no keyring.
    #[error("{source_name} has an invalid key {key:?} that must be a GPG public key: {reason}")]
    Key {
        /// "the config map NS/NAME".
        source_name: String,
        /// The data key.
        key: String,
        /// Why it does not read.
        reason: String,
    },
    /// A `store-*` value is no file, http or https URL.
    #[error(
        "{source_name} has an invalid key {key:?}: must be a valid URL with scheme file://, http://, or https://"
    )]
    Store {
        /// "the config map NS/NAME".
        source_name: String,
        /// The data key.
        key: String,
    },
    /// No `store-*` key.
    #[error("{source_name} did not provide any signature stores to read from and cannot be used")]
    NoStores {
        /// "the config map NS/NAME".
        source_name: String,
    },
    /// No `verifier-public-key-*` key.
    #[error(
        "{source_name} did not provide any GPG public keys to verify signatures from and cannot be used"
    )]
    NoKeys {
        /// "the config map NS/NAME".
        source_name: String,
    },
}

/// The keyrings every release image must be signed by, and where signatures are.
#[derive(Debug, Clone)]
pub struct Verifier {
    keyrings: BTreeMap<String, Vec<SignedPublicKey>>,
    stores: Vec<Store>,
}

/// Why an image is not verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct VerifyError {
    /// The CVO's text, e.g. `unable to verify sha256:… against keyrings: verifier-public-key-redhat`.
    pub message: String,
    /// Every signature that was not good, and every store that could not be read, why.
    pub causes: Vec<String>,
}

impl VerifyError {
    fn plain(message: impl Into<String>) -> Self {
        VerifyError {
            message: message.into(),
            causes: Vec::new(),
        }
    }

    /// The message and its causes, one a line (the CVO's `unwrappedErrorAggregate` of the
    /// error, for Events and accepted risks).
    #[must_use]
    pub fn detailed(&self, prefix: &str) -> String {
        let mut out = format!("{prefix}{}", self.message);
        match self.causes.as_slice() {
            [] => {}
            [one] => {
                out.push('\n');
                out.push_str(one);
            }
            many => {
                out.push_str("\n[");
                out.push_str(&many.join(", "));
                out.push(']');
            }
        }
        out
    }
}

impl Verifier {
    /// The verifier of a payload: its first ConfigMap annotated
    /// [`CONFIG_MAP_ANNOTATION`]; `None` when there is none.
    ///
    /// # Errors
    /// [`ConfigError`] when that ConfigMap cannot be used.
    pub fn from_manifests(manifests: &[Manifest]) -> Result<Option<Verifier>, ConfigError> {
        let Some(m) = manifests.iter().find(|m| {
            m.id.kind == "ConfigMap"
                && m.id.group.is_empty()
                && m.annotations()
                    .is_some_and(|a| a.contains_key(CONFIG_MAP_ANNOTATION))
        }) else {
            return Ok(None);
        };
        let source_name = format!(
            "the config map {}/{}",
            m.id.namespace.as_deref().unwrap_or_default(),
            m.id.name
        );
        let empty = serde_json::Map::new();
        let data = match m.object.get("data") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(d)) => d,
            Some(_) => return Err(ConfigError::Data { source_name }),
        };
        let mut keyrings = BTreeMap::new();
        let mut stores = Vec::new();
        for (key, value) in data {
            let Some(text) = value.as_str() else {
                return Err(ConfigError::Data { source_name });
            };
            if key.starts_with(KEY_PREFIX) {
                let ring =
                    signature::read_keyring(text.as_bytes()).map_err(|e| ConfigError::Key {
                        source_name: source_name.clone(),
                        key: key.clone(),
                        reason: e.0,
                    })?;
                keyrings.insert(key.clone(), ring);
            } else if key.starts_with(STORE_PREFIX) {
                let store = Store::parse(text).ok_or_else(|| ConfigError::Store {
                    source_name: source_name.clone(),
                    key: key.clone(),
                })?;
                stores.push(store);
            } else {
                tracing::warn!(
                    "An unexpected key was found in {source_name} and will be ignored (expected store-* or verifier-public-key-*): {key}"
                );
            }
        }
        if stores.is_empty() {
            return Err(ConfigError::NoStores { source_name });
        }
        if keyrings.is_empty() {
            return Err(ConfigError::NoKeys { source_name });
        }
        Ok(Some(Verifier { keyrings, stores }))
    }

    /// The verifier in a sentence, as the CVO logs it at start.
    #[must_use]
    pub fn describe(&self) -> String {
        let rings: Vec<String> = self
            .keyrings
            .iter()
            .map(|(name, ring)| format!("{name} ({})", signature::fingerprints(ring).join(", ")))
            .collect();
        let stores: Vec<String> = self.stores.iter().map(ToString::to_string).collect();
        format!(
            "All release image digests must have GPG signatures from {} - will check for signatures in containers/image format at config maps in {} with label {:?}, {}",
            rings.join(" "),
            store::SIGNATURES_NAMESPACE,
            store::SIGNATURES_LABEL,
            stores.join(", ")
        )
    }

    /// Verifies `digest` (`sha256:HEX`): every keyring must have signed it. Signatures come
    /// from the cluster's signature ConfigMaps (when `cluster` is given) and the stores; all
    /// of it within `timeout`.
    ///
    /// # Errors
    /// [`VerifyError`] with the CVO's message and every cause.
    pub async fn verify(
        &self,
        digest: &str,
        cluster: Option<&Client>,
        timeout: Duration,
    ) -> Result<(), VerifyError> {
        check_digest(digest)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let expired = |what: &str| {
            format!("{what}: no answer within {timeout:?} (context deadline exceeded)")
        };
        // The cluster's signatures first, as the CVO's serial store consults them first: when
        // they are enough, no store is asked.
        let mut all: Vec<Found> = Vec::new();
        if let Some(c) = cluster {
            let read = store::read_cluster(c, digest, timeout, &mut all);
            if tokio::time::timeout_at(deadline, read).await.is_err() {
                all.push(Err(expired("signature config maps")));
            }
            if self.check_all(digest, &all, SystemTime::now()).is_ok() {
                return Ok(());
            }
        }
        let client = store::http_client();
        let store_reads = self.stores.iter().map(|s| {
            let client = &client;
            let expired = &expired;
            async move {
                let mut found = Vec::new();
                if tokio::time::timeout_at(deadline, s.read(digest, client, &mut found))
                    .await
                    .is_err()
                {
                    found.push(Err(expired(&s.to_string())));
                }
                found
            }
        });
        all.extend(
            futures::future::join_all(store_reads)
                .await
                .into_iter()
                .flatten(),
        );
        self.check_all(digest, &all, SystemTime::now())
    }

    /// Checks what was read: every keyring needs one good signature.
    fn check_all(&self, digest: &str, found: &[Found], now: SystemTime) -> Result<(), VerifyError> {
        let mut remaining: Vec<&String> = self.keyrings.keys().collect();
        let mut causes = Vec::new();
        for item in found {
            match item {
                Err(e) => causes.push(e.clone()),
                Ok(sig) => remaining.retain(|name| {
                    match signature::check(sig, &self.keyrings[*name], digest, now) {
                        Ok(()) => false,
                        Err(e) => {
                            causes.push(e.to_string());
                            true
                        }
                    }
                }),
            }
            if remaining.is_empty() {
                return Ok(());
            }
        }
        let names: Vec<&str> = remaining.iter().map(|s| s.as_str()).collect();
        Err(VerifyError {
            message: format!(
                "unable to verify {digest} against keyrings: {}",
                names.join(", ")
            ),
            causes,
        })
    }
}

/// library-go's digest checks before any signature is read.
fn check_digest(digest: &str) -> Result<(), VerifyError> {
    if digest.is_empty() {
        return Err(VerifyError::plain(
            "release images that are not accessed via digest cannot be verified",
        ));
    }
    // `^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`
    let valid = digest.split_once(':').is_some_and(|(algo, hash)| {
        !hash.is_empty()
            && hash
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"=_-".contains(&b))
            && algo.split(['.', '+', '_', '-']).all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            })
    });
    if valid {
        Ok(())
    } else {
        Err(VerifyError::plain(format!(
            "the provided release image digest has an invalid format: {digest:?}"
        )))
    }
}

/// The digest an image reference is pinned by (after its last `@`), or `""`.
#[must_use]
pub fn image_digest(image: &str) -> &str {
    image.rsplit_once('@').map_or("", |(_, d)| d)
}

/// Verifies `image` with the verifier of `manifests` (the running release's payload), as
/// the CVO does before it pulls an update.
///
/// # Errors
/// [`VerifyError`]: no verifier ("verification is not possible"), a verifier that cannot be
/// used, an image not pinned by digest, or signatures missing or not good.
pub async fn verify_image(
    manifests: &[Manifest],
    image: &str,
    cluster: Option<&Client>,
    timeout: Duration,
) -> Result<(), VerifyError> {
    match Verifier::from_manifests(manifests) {
        Ok(Some(v)) => {
            tracing::debug!("Verifying release authenticity: {}", v.describe());
            v.verify(image_digest(image), cluster, timeout).await
        }
        Ok(None) => Err(VerifyError::plain("verification is not possible")),
        Err(e) => Err(VerifyError::plain(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
