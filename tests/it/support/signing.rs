//! Release signatures made by the tests: OpenPGP keys and signed "atomic container
//! signature" documents (rpgp, the crate minicvo verifies with), a verifier ConfigMap for a
//! payload, and a signature store: a real HTTP server on 127.0.0.1 whose answers a test sets
//! per path (a signature, nothing, or no answer at all).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use pgp::composed::{
    ArmorOptions, KeyType, MessageBuilder, SecretKeyParamsBuilder, SignedSecretKey, SubpacketConfig,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{Subpacket, SubpacketData};
use pgp::types::{CompressionAlgorithm, KeyDetails as _, Password, Timestamp};
use serde_json::json;

/// A new signing key (Ed25519) with one user id.
pub fn key(uid: &str) -> SignedSecretKey {
    let mut params = SecretKeyParamsBuilder::default();
    params
        .key_type(KeyType::Ed25519Legacy)
        .can_certify(true)
        .can_sign(true)
        .primary_user_id(uid.into());
    params
        .build()
        .unwrap()
        .generate(rand08::thread_rng())
        .unwrap()
}

/// The key's public part, ASCII-armored (a `verifier-public-key-*` value).
pub fn armored(key: &SignedSecretKey) -> String {
    key.to_public_key()
        .to_armored_string(ArmorOptions::default())
        .unwrap()
}

/// A signature of `digest` as `gpg --sign` makes one (compressed, one-pass signed); with
/// `expired`, it was made two days ago and expired a day ago.
pub fn sign(key: &SignedSecretKey, digest: &str, expired: bool) -> Vec<u8> {
    let doc = json!({
        "critical": {
            "type": "atomic container signature",
            "image": {"docker-manifest-digest": digest},
            "identity": {"docker-reference": "quay.example/release:4.14.0"},
        },
        "optional": {"creator": "minicvo tests"},
    })
    .to_string();
    let mut b = MessageBuilder::from_bytes("", doc.into_bytes());
    b.compression(CompressionAlgorithm::ZLIB);
    if expired {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let created = u32::try_from(now - 2 * 86_400).unwrap();
        let hashed = vec![
            Subpacket::regular(SubpacketData::IssuerFingerprint(key.fingerprint())).unwrap(),
            Subpacket::regular(SubpacketData::SignatureCreationTime(Timestamp::from_secs(
                created,
            )))
            .unwrap(),
            Subpacket::regular(SubpacketData::SignatureExpirationTime(
                pgp::types::Duration::from_secs(86_400),
            ))
            .unwrap(),
        ];
        b.sign_with_subpackets(
            &key.primary_key,
            Password::empty(),
            HashAlgorithm::Sha256,
            SubpacketConfig::UserDefined {
                hashed,
                unhashed: vec![],
            },
        );
    } else {
        b.sign(&key.primary_key, Password::empty(), HashAlgorithm::Sha256);
    }
    b.to_vec(rand08::thread_rng()).unwrap()
}

/// The verifier ConfigMap a release carries (the CVO's
/// `0000_90_cluster-version-operator_02_verification.yaml` in spirit), as YAML.
pub fn verifier_manifest(keys: &[(&str, &SignedSecretKey)], stores: &[&str]) -> String {
    let mut data = serde_json::Map::new();
    for (name, k) in keys {
        data.insert(format!("verifier-public-key-{name}"), json!(armored(k)));
    }
    for (i, s) in stores.iter().enumerate() {
        data.insert(format!("store-{i}"), json!(s));
    }
    let cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "release-verification",
            "namespace": "openshift-config-managed",
            "annotations": {
                "release.openshift.io/verification-config-map": "",
                "include.release.openshift.io/self-managed-high-availability": "true",
                "include.release.openshift.io/single-node-developer": "true",
            },
        },
        "data": data,
    });
    serde_json::to_string_pretty(&cm).unwrap()
}

/// What the store answers for one path.
#[derive(Clone, Debug)]
pub enum Answer {
    /// 200 with these bytes.
    Body(Vec<u8>),
    /// Never answers (the connection stays open).
    Hang,
}

/// A signature store over HTTP: `GET /sigs/sha256=<hex>/signature-<n>` answers what was set
/// for that path, else 404. Stops when dropped.
pub struct SignatureServer {
    /// `http://127.0.0.1:PORT/sigs`.
    pub url: String,
    answers: Arc<Mutex<BTreeMap<String, Answer>>>,
    requests: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SignatureServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SignatureServer {
    /// Starts the server on a free loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let answers: Arc<Mutex<BTreeMap<String, Answer>>> = Arc::default();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let (a, r) = (answers.clone(), requests.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (a, r) = (a.clone(), r.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                        let path = req.uri().path().to_string();
                        r.lock().unwrap().push(path.clone());
                        let answer = a.lock().unwrap().get(&path).cloned();
                        async move {
                            let response = match answer {
                                Some(Answer::Body(b)) => {
                                    hyper::Response::new(Full::new(Bytes::from(b)))
                                }
                                Some(Answer::Hang) => {
                                    tokio::time::sleep(Duration::from_secs(3600)).await;
                                    hyper::Response::new(Full::new(Bytes::new()))
                                }
                                None => {
                                    let mut r = hyper::Response::new(Full::new(Bytes::new()));
                                    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                                    r
                                }
                            };
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        SignatureServer {
            url: format!("http://127.0.0.1:{port}/sigs"),
            answers,
            requests,
            task,
        }
    }

    /// Sets the answers for `digest`: `signature-1`, `signature-2`, … answer these, the next
    /// is a 404 (`[]`: no signature at all).
    pub fn set(&self, digest: &str, answers: Vec<Answer>) {
        let prefix = format!("/sigs/{}", digest.replacen(':', "=", 1));
        let mut all = self.answers.lock().unwrap();
        all.retain(|k, _| !k.starts_with(&prefix));
        for (i, a) in answers.into_iter().enumerate() {
            all.insert(format!("{prefix}/signature-{}", i + 1), a);
        }
    }

    /// The paths asked for so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}
