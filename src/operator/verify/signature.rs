//! One release signature checked against one keyring, as library-go's `pkg/verify` checks
//! it (`verifySignatureWithKeyring`, `verifyAtomicContainerSignature`): an OpenPGP signed
//! message (compressed or not) signed by a key of the keyring, not expired, whose content is
//! an "atomic container signature" JSON document for the release digest. Pure: no I/O.

use std::time::{Duration, SystemTime};

use pgp::composed::{Deserializable as _, Message, SignedPublicKey};
use pgp::types::KeyDetails as _;
use serde::Deserialize;

/// Why a signature does not attest a digest (library-go's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Not an OpenPGP message.
    #[error("could not read the message: {0}")]
    Unreadable(String),
    /// An OpenPGP message without a signature.
    #[error("not signed")]
    NotSigned,
    /// Signed by no key of the keyring, or the signature does not match the content.
    #[error("signature error: {0}")]
    Signature(String),
    /// The signature's expiration time has passed.
    #[error("signature expired on {0}")]
    Expired(String),
    /// The content is not the JSON document expected (unknown fields are refused).
    #[error("the signature is not valid JSON: {0}")]
    Json(String),
    /// `critical.type` is not "atomic container signature".
    #[error("signature is not the correct type")]
    WrongType,
    /// `critical.identity.docker-reference` is empty.
    #[error("signature must have an identity")]
    NoIdentity,
    /// `critical.image.docker-manifest-digest` is another digest.
    #[error("signature digest does not match")]
    DigestMismatch,
}

/// The signed document (containers/image's "atomic container signature").
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct Document {
    critical: Critical,
    optional: Optional,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct Critical {
    #[serde(rename = "type")]
    kind: String,
    image: Image,
    identity: Identity,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct Identity {
    #[serde(rename = "docker-reference")]
    reference: String,
}

/// Read only so that a wrong type is refused, as Go's decoder refuses it.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct Optional {
    #[allow(dead_code)]
    creator: String,
    #[allow(dead_code)]
    timestamp: i64,
}

/// A keyring that reads neither armored nor binary, or holds no key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyringError(pub String);

/// The most signed content read (a signature document is a few hundred bytes; the content
/// may be compressed, so the signature's own size does not bound it).
pub const MAX_CONTENT: u64 = 64 * 1024;

/// The `type` of an atomic container signature.
pub const ATOMIC_TYPE: &str = "atomic container signature";

/// Reads a keyring: one or more OpenPGP public keys, ASCII-armored or binary (library-go
/// accepts both).
///
/// # Errors
/// [`KeyringError`]: why neither form reads, or an empty keyring.
pub fn read_keyring(data: &[u8]) -> Result<Vec<SignedPublicKey>, KeyringError> {
    let armored = SignedPublicKey::from_armor_many(data)
        .map_err(|e| e.to_string())
        .and_then(|(keys, _)| {
            keys.collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())
        });
    let keys = match armored {
        Ok(k) if !k.is_empty() => k,
        Ok(_) => return Err(KeyringError("no public key in it".into())),
        Err(armor) => {
            let binary = SignedPublicKey::from_bytes_many(data)
                .map_err(|e| e.to_string())
                .and_then(|keys| {
                    keys.collect::<Result<Vec<_>, _>>()
                        .map_err(|e| e.to_string())
                });
            match binary {
                Ok(k) if !k.is_empty() => k,
                Ok(_) => {
                    return Err(KeyringError(format!(
                        "unable to read keyring with armor ({armor})"
                    )));
                }
                Err(bin) => {
                    return Err(KeyringError(format!(
                        "unable to read keyring with armor ({armor}) or without armor ({bin})"
                    )));
                }
            }
        }
    };
    Ok(keys)
}

/// The fingerprints of a keyring, upper-case hex, for logs and the verifier's description.
#[must_use]
pub fn fingerprints(keyring: &[SignedPublicKey]) -> Vec<String> {
    keyring
        .iter()
        .map(|k| format!("{:X}", k.fingerprint()))
        .collect()
}

/// Checks that `signature` attests `digest` with a key of `keyring`, at `now`.
///
/// # Errors
/// [`SignatureError`]: the first check that fails, in library-go's order.
pub fn check(
    signature: &[u8],
    keyring: &[SignedPublicKey],
    digest: &str,
    now: SystemTime,
) -> Result<(), SignatureError> {
    let content = verified_content(signature, keyring, now)?;
    check_document(&content, digest)
}

/// The content of the signed message, once its signature is found good and unexpired.
fn verified_content(
    signature: &[u8],
    keyring: &[SignedPublicKey],
    now: SystemTime,
) -> Result<Vec<u8>, SignatureError> {
    let unreadable = |e: pgp::errors::Error| SignatureError::Unreadable(e.to_string());
    let mut message = Message::from_bytes(signature).map_err(unreadable)?;
    while message.is_compressed() {
        message = message.decompress().map_err(unreadable)?;
    }
    if !message.is_signed() {
        return Err(SignatureError::NotSigned);
    }
    // The content is untrusted and may be compressed: read at most a bound of it (a
    // signature document is a few hundred bytes).
    let mut content = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut message, MAX_CONTENT + 1),
        &mut content,
    )
    .map_err(|e| SignatureError::Unreadable(e.to_string()))?;
    if content.len() as u64 > MAX_CONTENT {
        return Err(SignatureError::Unreadable(format!(
            "the signed content is larger than {MAX_CONTENT} bytes"
        )));
    }
    let Message::Signed { reader, .. } = &message else {
        return Err(SignatureError::NotSigned);
    };
    let mut error = SignatureError::Signature(UNKNOWN_ISSUER.into());
    for index in 0..reader.num_signatures() {
        let Some(sig) = reader.signature(index) else {
            continue;
        };
        for key in issuers(keyring, sig) {
            match message.verify_nested_explicit(index, key) {
                Ok(sig) => {
                    if let (Some(created), Some(life)) =
                        (sig.created(), sig.signature_expiration_time())
                        && life.as_secs() != 0
                    {
                        let expiry = SystemTime::UNIX_EPOCH
                            + Duration::from_secs(u64::from(created.as_secs()))
                            + Duration::from_secs(u64::from(life.as_secs()));
                        if now > expiry {
                            return Err(SignatureError::Expired(go_time(expiry)));
                        }
                    }
                    return Ok(content);
                }
                Err(e) => error = SignatureError::Signature(format!("invalid signature: {e}")),
            }
        }
    }
    Err(error)
}

/// x/crypto/openpgp's text for a signature by no key of the keyring.
const UNKNOWN_ISSUER: &str = "openpgp: signature made by unknown entity";

/// The keys (primary or subkeys) of `keyring` that `sig` names as its issuer.
fn issuers<'k>(
    keyring: &'k [SignedPublicKey],
    sig: &pgp::packet::Signature,
) -> Vec<&'k dyn pgp::types::VerifyingKey> {
    let ids = sig.issuer_key_id();
    let fps = sig.issuer_fingerprint();
    let named = |fp: pgp::types::Fingerprint, id: pgp::types::KeyId| {
        fps.iter().any(|f| **f == fp) || ids.iter().any(|i| **i == id)
    };
    let mut out: Vec<&dyn pgp::types::VerifyingKey> = Vec::new();
    for key in keyring {
        if named(key.fingerprint(), key.legacy_key_id()) {
            out.push(key);
        }
        for sub in &key.public_subkeys {
            if named(sub.fingerprint(), sub.legacy_key_id()) {
                out.push(sub);
            }
        }
    }
    out
}

/// Go's `time.Time` text (`2006-01-02 15:04:05 +0000 UTC`), as library-go prints an expiry.
fn go_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(i64::MAX)).map_or_else(
        |_| format!("{secs}"),
        |ts| ts.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string(),
    )
}

/// `verifyAtomicContainerSignature`.
fn check_document(content: &[u8], digest: &str) -> Result<(), SignatureError> {
    let doc: Document =
        serde_json::from_slice(content).map_err(|e| SignatureError::Json(e.to_string()))?;
    if doc.critical.kind != ATOMIC_TYPE {
        return Err(SignatureError::WrongType);
    }
    if doc.critical.identity.reference.is_empty() {
        return Err(SignatureError::NoIdentity);
    }
    if doc.critical.image.digest != digest {
        return Err(SignatureError::DigestMismatch);
    }
    Ok(())
}
