//! Where release signatures are read from, as library-go reads them: a signature store by
//! URL (`file://DIR` or `http(s)://BASE`, each signature at `<store>/sha256=<hex>/signature-<n>`
//! for n = 1, 2, … until a miss, at most 9), and the cluster's ConfigMaps in
//! `openshift-config-managed` labelled `release.openshift.io/verification-signatures`, whose
//! `binaryData` keys start with `sha256-<hex>`.
//!
//! Every failure to read one signature is kept as text for the verification's error, in
//! library-go's words where it has them.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use kube::Client;
use serde_json::Value;

use crate::cluster::request;

/// At most this many signatures are read from one store (library-go's `maxSignatureSearch`,
/// against a store that an attacker controls).
pub const MAX_SIGNATURES: usize = 9;

/// Bytes read of one signature at most (library-go's limit); a longer body is cut there.
pub const MAX_SIGNATURE_BYTES: usize = 50 * 1024;

/// The namespace of the signature ConfigMaps.
pub const SIGNATURES_NAMESPACE: &str = "openshift-config-managed";

/// The label that marks a signature ConfigMap.
pub const SIGNATURES_LABEL: &str = "release.openshift.io/verification-signatures";

/// One signature, or why one could not be read.
pub type Found = Result<Vec<u8>, String>;

/// A signature store named by a `store-*` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// `file://DIR`.
    File(PathBuf),
    /// `http://…` or `https://…`.
    Http(reqwest::Url),
}

impl Store {
    /// Parses a `store-*` value; `None` for what is not a URL, or a scheme other than
    /// `file`, `http` and `https`.
    #[must_use]
    pub fn parse(value: &str) -> Option<Store> {
        let url = reqwest::Url::parse(value.trim()).ok()?;
        match url.scheme() {
            "file" => Some(Store::File(PathBuf::from(url.path()))),
            "http" | "https" => Some(Store::Http(url)),
            _ => None,
        }
    }

    /// Reads the signatures of `digest` (`ALGO:HEX`) into `found`, until a miss.
    pub async fn read(&self, digest: &str, client: &reqwest::Client, found: &mut Vec<Found>) {
        let Some(segment) = key_prefix(digest, "=") else {
            found.push(Err(
                "the provided digest must be of the form ALGO:HASH".into()
            ));
            return;
        };
        match self {
            Store::File(dir) => {
                for n in 1..=MAX_SIGNATURES {
                    let path = dir.join(&segment).join(format!("signature-{n}"));
                    match tokio::fs::read(&path).await {
                        Ok(data) => found.push(Ok(data)),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                        Err(e) => found.push(Err(format!("{}: {e}", path.display()))),
                    }
                }
            }
            Store::Http(base) => {
                for n in 1..=MAX_SIGNATURES {
                    let mut url = base.clone();
                    let path = format!(
                        "{}/{segment}/signature-{n}",
                        base.path().trim_end_matches('/')
                    );
                    url.set_path(&path);
                    let shown = url.to_string();
                    let response = match client.get(url).send().await {
                        Ok(r) => r,
                        Err(e) => {
                            found.push(Err(format!("Get \"{shown}\": {}", error_chain(&e))));
                            continue;
                        }
                    };
                    let status = response.status();
                    if status == reqwest::StatusCode::NOT_FOUND {
                        found.push(Err(format!(
                            "unable to retrieve signature from {shown}: no more signatures to check"
                        )));
                        break;
                    }
                    if !status.is_success() {
                        found.push(Err(format!(
                            "unable to retrieve signature from {shown}: response status {}",
                            status.as_u16()
                        )));
                        continue;
                    }
                    match limited_body(response).await {
                        Ok(data) if data.is_empty() => {}
                        Ok(data) => found.push(Ok(data)),
                        Err(e) => found.push(Err(format!(
                            "unable to retrieve signature from {shown}: {}",
                            error_chain(&e)
                        ))),
                    }
                }
            }
        }
    }
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::File(dir) => write!(f, "file://{}", dir.display()),
            Store::Http(url) => write!(f, "containers/image signature store under {url}"),
        }
    }
}

/// The HTTP client of the stores (rustls with ring, as the image pulls use).
#[must_use]
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The body, at most [`MAX_SIGNATURE_BYTES`] of it.
async fn limited_body(mut response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_SIGNATURE_BYTES - out.len();
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= MAX_SIGNATURE_BYTES {
            break;
        }
    }
    Ok(out)
}

/// An error with its sources, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `ALGO<divider>HEX` of `ALGO:HEX` (library-go's `DigestToKeyPrefix`).
#[must_use]
pub fn key_prefix(digest: &str, divider: &str) -> Option<String> {
    let (algo, hash) = digest.split_once(':')?;
    if algo.is_empty() || hash.is_empty() || hash.contains(':') {
        return None;
    }
    Some(format!("{algo}{divider}{hash}"))
}

/// Reads the signatures of `digest` from the cluster's signature ConfigMaps into `found`
/// (`binaryData` keys that start with `sha256-<hex>`, every ConfigMap in name order).
pub async fn read_cluster(
    client: &Client,
    digest: &str,
    timeout: Duration,
    found: &mut Vec<Found>,
) {
    let Some(prefix) = key_prefix(digest, "-") else {
        return;
    };
    let params = kube::api::ListParams::default().labels(SIGNATURES_LABEL);
    let url = format!("/api/v1/namespaces/{SIGNATURES_NAMESPACE}/configmaps");
    let req = match kube::core::Request::new(&url).list(&params) {
        Ok(r) => r,
        Err(e) => {
            found.push(Err(e.to_string()));
            return;
        }
    };
    let items = match request::send(client, req, timeout).await {
        Ok(r) => r
            .body
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        Err(e) => {
            found.push(Err(format!(
                "config maps in {SIGNATURES_NAMESPACE} with label {SIGNATURES_LABEL:?}: {e}"
            )));
            return;
        }
    };
    for cm in &items {
        let name = cm
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(data) = cm.get("binaryData").and_then(Value::as_object) {
            for (key, value) in data {
                if !key.starts_with(&prefix) {
                    continue;
                }
                match value
                    .as_str()
                    .map(|v| base64::engine::general_purpose::STANDARD.decode(v))
                {
                    Some(Ok(bytes)) => found.push(Ok(bytes)),
                    _ => found.push(Err(format!("key {key} of config map {name} is not base64"))),
                }
            }
        }
        found.push(Err(format!(
            "prefix {prefix} in config map {name}: no more signatures to check"
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_are_file_and_http_urls_only() {
        assert_eq!(
            Store::parse(" file:///var/sigs \n"),
            Some(Store::File(PathBuf::from("/var/sigs")))
        );
        assert!(matches!(
            Store::parse("https://mirror.example/sigs"),
            Some(Store::Http(_))
        ));
        assert_eq!(Store::parse("ftp://x/y"), None);
        assert_eq!(Store::parse("not a url"), None);
        assert_eq!(key_prefix("sha256:ab", "="), Some("sha256=ab".into()));
        assert_eq!(key_prefix("sha256ab", "="), None);
        assert_eq!(key_prefix("sha256:a:b", "-"), None);
    }

    #[tokio::test]
    async fn a_file_store_is_read_until_the_first_missing_signature() {
        let dir = tempfile::tempdir().unwrap();
        let sigs = dir.path().join("sha256=ab");
        std::fs::create_dir_all(&sigs).unwrap();
        for n in [1, 2, 4] {
            std::fs::write(sigs.join(format!("signature-{n}")), [n]).unwrap();
        }
        let store = Store::parse(&format!("file://{}", dir.path().display())).unwrap();
        let mut found = Vec::new();
        store.read("sha256:ab", &http_client(), &mut found).await;
        assert_eq!(found, vec![Ok(vec![1]), Ok(vec![2])]);
    }
}
