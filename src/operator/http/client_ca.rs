//! The CA that client certificates must chain to, and the identity a trusted certificate names.
//!
//! As the CVO: the bundle is the `client-ca-file` key of ConfigMap
//! `kube-system/extension-apiserver-authentication`, which the kube-apiserver publishes (the CA
//! of its `--client-ca-file`), read again every [`REFRESH_INTERVAL`]. `--metrics-client-ca-file`
//! names a file instead. The identity is the Kubernetes x509 convention: the user is the subject's
//! common name, the groups are its organizations.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use tokio_util::sync::CancellationToken;
use x509_cert::der::{Decode as _, Tag, Tagged as _};

use super::access::UserInfo;

/// How often the client CA is read again.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// The namespace of the ConfigMap with the API server's client CA.
pub const CONFIGMAP_NAMESPACE: &str = "kube-system";
/// The ConfigMap with the API server's client CA.
pub const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";
/// Its key holding the PEM bundle.
pub const CONFIGMAP_KEY: &str = "client-ca-file";

/// Where the client CA bundle comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCaSource {
    /// ConfigMap `kube-system/extension-apiserver-authentication`, key `client-ca-file`.
    ConfigMap,
    /// A PEM file.
    File(PathBuf),
}

impl std::fmt::Display for ClientCaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientCaSource::ConfigMap => write!(
                f,
                "configmap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} key {CONFIGMAP_KEY}"
            ),
            ClientCaSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Why the client CA could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    /// The file could not be read.
    #[error("reading {path}: {source}", path = .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The ConfigMap could not be read.
    #[error(
        "reading {source_name}: {error}; hint: the operator needs get on it (deploy/ binds Role extension-apiserver-authentication-reader)"
    )]
    Api {
        /// What was read.
        source_name: String,
        /// The API error.
        error: kube::Error,
    },
    /// The ConfigMap or its key is absent: the API server has no client CA.
    #[error(
        "{0} is absent: the API server has no --client-ca-file, so no client certificate is trusted"
    )]
    Absent(String),
    /// The bundle holds no usable certificate.
    #[error("{source_name}: {message}")]
    Invalid {
        /// Where the bundle came from.
        source_name: String,
        /// What was wrong.
        message: String,
    },
}

/// Why a client certificate gives no identity.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// No client CA is known.
    #[error("client certificate not trusted: no client CA is configured")]
    NoClientCa,
    /// The chain does not verify.
    #[error("client certificate not trusted: {0}")]
    NotTrusted(#[source] rustls::Error),
    /// The certificate names no user.
    #[error("client certificate names no user: {0}")]
    NoUser(String),
}

/// A loaded bundle.
struct Loaded {
    pem: Vec<u8>,
    verifier: Arc<dyn ClientCertVerifier>,
}

/// The client CA in force; empty until a bundle was read.
pub struct ClientCa {
    source: ClientCaSource,
    current: RwLock<Option<Loaded>>,
    /// Bumped on every change, so cached decisions of an older CA are not reused.
    generation: AtomicU64,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa")
            .field("source", &self.source)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl ClientCa {
    /// An empty client CA that [`ClientCa::refresh`] reads from `source`.
    #[must_use]
    pub fn new(source: ClientCaSource) -> Self {
        ClientCa {
            source,
            current: RwLock::new(None),
            generation: AtomicU64::new(0),
        }
    }

    /// Where the bundle comes from.
    #[must_use]
    pub fn source(&self) -> &ClientCaSource {
        &self.source
    }

    /// A number that changes whenever the bundle does.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether a bundle is loaded.
    #[must_use]
    pub fn is_loaded(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Reads the bundle again; returns whether it changed. On an error the previous bundle
    /// stays, except when the ConfigMap or its key is gone ([`ClientCaError::Absent`]): then no
    /// certificate is trusted any more.
    ///
    /// # Errors
    /// [`ClientCaError`].
    pub async fn refresh(&self, client: &kube::Client) -> Result<bool, ClientCaError> {
        let name = self.source.to_string();
        let pem = match &self.source {
            ClientCaSource::File(path) => {
                tokio::fs::read(path)
                    .await
                    .map_err(|source| ClientCaError::Read {
                        path: path.clone(),
                        source,
                    })?
            }
            ClientCaSource::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), CONFIGMAP_NAMESPACE);
                let found =
                    api.get_opt(CONFIGMAP_NAME)
                        .await
                        .map_err(|error| ClientCaError::Api {
                            source_name: name.clone(),
                            error,
                        })?;
                match found
                    .and_then(|cm| cm.data)
                    .and_then(|mut d| d.remove(CONFIGMAP_KEY))
                {
                    Some(text) => text.into_bytes(),
                    None => {
                        self.clear();
                        return Err(ClientCaError::Absent(name));
                    }
                }
            }
        };
        if self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|l| l.pem == pem)
        {
            return Ok(false);
        }
        let verifier = verifier(&pem).map_err(|message| ClientCaError::Invalid {
            source_name: name,
            message,
        })?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) =
            Some(Loaded { pem, verifier });
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }

    /// Forgets the bundle; returns whether there was one.
    fn clear(&self) -> bool {
        let had = self
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .is_some();
        if had {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        had
    }

    /// Refreshes now and then every `interval` until `cancel` fires, logging each change and
    /// each new error.
    pub fn spawn_refresh(
        self: &Arc<Self>,
        client: kube::Client,
        interval: Duration,
        cancel: CancellationToken,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut last_error = None;
            loop {
                match this.refresh(&client).await {
                    Ok(true) => {
                        last_error = None;
                        tracing::info!("client CA for /metrics loaded from {}", this.source);
                    }
                    Ok(false) => last_error = None,
                    Err(e) => {
                        let message = e.to_string();
                        if last_error.as_ref() != Some(&message) {
                            tracing::warn!("client CA for /metrics: {message}");
                            last_error = Some(message);
                        }
                    }
                }
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
            }
        });
    }

    /// The identity of a client that presented `chain` (leaf first), if it chains to the CA
    /// for client authentication.
    ///
    /// # Errors
    /// [`CertError`].
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<UserInfo, CertError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(CertError::NoUser("no certificate".into()));
        };
        {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            let loaded = current.as_ref().ok_or(CertError::NoClientCa)?;
            loaded
                .verifier
                .verify_client_cert(leaf, intermediates, UnixTime::now())
                .map_err(CertError::NotTrusted)?;
        }
        subject(leaf).map_err(CertError::NoUser)
    }
}

/// A verifier of client certificates chaining to the certificates of `pem`.
fn verifier(pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("bad PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("bad CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| e.to_string())
}

/// The user (common name) and groups (organizations) of a certificate's subject.
fn subject(leaf: &CertificateDer<'_>) -> Result<UserInfo, String> {
    const COMMON_NAME: x509_cert::der::oid::ObjectIdentifier =
        x509_cert::der::oid::ObjectIdentifier::new_unwrap("2.5.4.3");
    const ORGANIZATION: x509_cert::der::oid::ObjectIdentifier =
        x509_cert::der::oid::ObjectIdentifier::new_unwrap("2.5.4.10");
    let cert = x509_cert::Certificate::from_der(leaf.as_ref()).map_err(|e| e.to_string())?;
    let mut user = None;
    let mut groups = Vec::new();
    for rdn in &cert.tbs_certificate.subject.0 {
        for atv in rdn.0.iter() {
            let text = match atv.value.tag() {
                Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::TeletexString => {
                    std::str::from_utf8(atv.value.value()).ok()
                }
                _ => None,
            };
            match (atv.oid, text) {
                (COMMON_NAME, Some(t)) if user.is_none() => user = Some(t.to_string()),
                (ORGANIZATION, Some(t)) => groups.push(t.to_string()),
                _ => {}
            }
        }
    }
    match user {
        Some(name) if !name.is_empty() => Ok(UserInfo {
            name,
            uid: String::new(),
            groups,
            extra: Default::default(),
        }),
        _ => Err("the subject has no common name".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_gives_user_and_groups() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:serviceaccount:ns:prom");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "monitoring");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let u = subject(cert.der()).unwrap();
        assert_eq!(u.name, "system:serviceaccount:ns:prom");
        assert_eq!(u.groups, ["monitoring"]);
    }

    #[test]
    fn a_subject_without_common_name_names_no_user() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert!(subject(cert.der()).is_err());
    }
}
