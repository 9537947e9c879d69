//! The serving certificate and the TLS settings of the metrics server.
//!
//! The certificate comes from PEM files (the CVO's `--serving-cert-file`/`--serving-key-file`)
//! and is reloaded when they change, or is generated at start (self-signed, in memory) when no
//! files are given. Every handshake takes the certificate in force at that moment, so a reload
//! needs no restart and breaks no connection.
//!
//! Client certificates are requested, never required, and not checked against a CA here: as in
//! the CVO, the chain is verified by the request handler, which can then answer 401 instead of
//! failing the handshake. The handshake still checks that the client holds the private key of
//! the certificate it presents.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

/// How often the certificate files are read again to see whether they changed.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// Why a serving certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}", path = .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no PEM certificate, or no PEM private key.
    #[error("{path}: no PEM {what} in it", path = .path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
    },
    /// A file's PEM could not be decoded.
    #[error("{path}: {message}", path = .path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        message: String,
    },
    /// The key is not usable, or does not belong to the certificate.
    #[error("{cert} and {key}: {source}; hint: the key must be the certificate's", cert = .cert.display(), key = .key.display())]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
    /// A self-signed certificate could not be generated.
    #[error("generating a self-signed serving certificate: {0}")]
    Generate(String),
    /// The TLS settings were refused.
    #[error("tls settings: {0}")]
    Config(#[source] rustls::Error),
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
enum Source {
    Files { cert: PathBuf, key: PathBuf },
    Generated,
}

/// The serving certificate in force, swapped on a reload.
#[derive(Debug)]
pub struct ServingCert {
    provider: Arc<CryptoProvider>,
    source: Source,
    current: RwLock<Arc<CertifiedKey>>,
    /// The bytes of the files last loaded (certificate, key): a reload with the same bytes
    /// changes nothing.
    loaded: Mutex<(Vec<u8>, Vec<u8>)>,
}

/// The crypto provider of the server: ring, as for the rest of the crate.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl ServingCert {
    /// The certificate chain in `cert` (PEM, leaf first) and the private key in `key` (PEM,
    /// PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// [`TlsError`]: unreadable files, no certificate or key, a key that is not the
    /// certificate's.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let provider = provider();
        let (cert_pem, key_pem) = (read(cert)?, read(key)?);
        let certified = certified_key(&provider, cert, &cert_pem, key, &key_pem)?;
        Ok(ServingCert {
            provider,
            source: Source::Files {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            },
            current: RwLock::new(Arc::new(certified)),
            loaded: Mutex::new((cert_pem, key_pem)),
        })
    }

    /// A new self-signed certificate (ECDSA P-256, valid from an hour ago for a year) for the
    /// DNS names and IP addresses in `names`; nothing is written to disk.
    ///
    /// # Errors
    /// [`TlsError::Generate`].
    pub fn generate(names: &[String]) -> Result<Self, TlsError> {
        let provider = provider();
        let mut params = rcgen::CertificateParams::new(names.to_vec())
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "minicvo metrics (self-signed)");
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(365);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate().map_err(|e| TlsError::Generate(e.to_string()))?;
        let cert = params
            .self_signed(&key)
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        let der = PrivateKeyDer::try_from(key.serialize_der())
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        let certified = CertifiedKey::from_der(vec![cert.der().clone()], der, &provider)
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        Ok(ServingCert {
            provider,
            source: Source::Generated,
            current: RwLock::new(Arc::new(certified)),
            loaded: Mutex::new((Vec::new(), Vec::new())),
        })
    }

    /// Whether the certificate was generated (self-signed) rather than read from files.
    #[must_use]
    pub fn is_generated(&self) -> bool {
        matches!(self.source, Source::Generated)
    }

    /// The certificate in force.
    #[must_use]
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The SHA-256 fingerprint of the leaf certificate in force, as hex pairs joined by `:`.
    #[must_use]
    pub fn fingerprint(&self) -> String {
        let current = self.current();
        let leaf = current.cert.first().map_or(&[][..], |c| c.as_ref());
        Sha256::digest(leaf)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":")
    }

    /// Reads the files again; when their bytes changed and they hold a usable pair, the new
    /// certificate serves every later handshake. Returns whether it changed. A generated
    /// certificate never changes.
    ///
    /// # Errors
    /// [`TlsError`]: the files as they are now are not a usable pair (the previous certificate
    /// stays in force).
    pub fn reload(&self) -> Result<bool, TlsError> {
        let Source::Files { cert, key } = &self.source else {
            return Ok(false);
        };
        let (cert_pem, key_pem) = (read(cert)?, read(key)?);
        {
            let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
            if loaded.0 == cert_pem && loaded.1 == key_pem {
                return Ok(false);
            }
        }
        let certified = certified_key(&self.provider, cert, &cert_pem, key, &key_pem)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(certified);
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) = (cert_pem, key_pem);
        Ok(true)
    }

    /// Reloads every `interval` until `cancel` fires, logging each change and each failure
    /// (once per distinct message).
    pub fn spawn_reload(self: &Arc<Self>, interval: Duration, cancel: CancellationToken) {
        if self.is_generated() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let mut last_error = None;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
                let this = this.clone();
                match tokio::task::spawn_blocking(move || {
                    this.reload().map(|changed| (changed, this.fingerprint()))
                })
                .await
                {
                    Ok(Ok((true, fingerprint))) => {
                        last_error = None;
                        tracing::info!("reloaded the serving certificate (sha256 {fingerprint})");
                    }
                    Ok(Ok((false, _))) => last_error = None,
                    Ok(Err(e)) => {
                        let message = e.to_string();
                        if last_error.as_ref() != Some(&message) {
                            tracing::warn!(
                                "serving certificate not reloaded, the previous one stays: {message}"
                            );
                            last_error = Some(message);
                        }
                    }
                    Err(e) => tracing::warn!("serving certificate reload: {e}"),
                }
            }
        });
    }

    /// The server's TLS settings: TLS 1.2 and 1.3 (rustls' safe defaults), HTTP/1.1, this
    /// certificate as it is at each handshake, client certificates requested but optional.
    ///
    /// # Errors
    /// [`TlsError::Config`].
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_client_cert_verifier(Arc::new(RequestClientCert {
                algorithms: self.provider.signature_verification_algorithms,
            }))
            .with_cert_resolver(Arc::new(Resolver(self.clone())));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The names a generated certificate is for, serving on `local`: `localhost`, the loopback
/// addresses, the host name (`HOSTNAME`, a pod's name) and the address bound when it is a
/// specific one.
#[must_use]
pub fn names_for(local: std::net::SocketAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    // Only a name that is a DNS name: anything else would fail the generation.
    if let Ok(host) = std::env::var("HOSTNAME")
        && !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        names.push(host.to_ascii_lowercase());
    }
    let ip = local.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        names.push(ip.to_string());
    }
    names
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The pair in the two PEM texts, checked to belong together.
fn certified_key(
    provider: &CryptoProvider,
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert.to_path_buf(),
            message: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Missing {
            path: cert.to_path_buf(),
            what: "certificate",
        });
    }
    let private = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::Missing {
            path: key.to_path_buf(),
            what: "private key",
        },
        e => TlsError::Pem {
            path: key.to_path_buf(),
            message: e.to_string(),
        },
    })?;
    CertifiedKey::from_der(chain, private, provider).map_err(|source| TlsError::Key {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        source,
    })
}

/// Gives every handshake the certificate in force.
#[derive(Debug)]
struct Resolver(Arc<ServingCert>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current())
    }
}

/// Asks for a client certificate, accepts a handshake without one, and leaves the chain to the
/// request handler; the handshake's signature is still verified, so a client that presents a
/// certificate holds its key.
#[derive(Debug)]
struct RequestClientCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
