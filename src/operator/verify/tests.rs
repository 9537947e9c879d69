use std::time::{Duration, SystemTime};

use pgp::composed::{
    ArmorOptions, KeyType, MessageBuilder, SecretKeyParamsBuilder, SignedSecretKey, SubpacketConfig,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{Subpacket, SubpacketData};
use pgp::types::{KeyDetails as _, Password, Timestamp};
use serde_json::json;

use super::signature::{self, SignatureError};
use super::*;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn key(uid: &str) -> SignedSecretKey {
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

fn armored(key: &SignedSecretKey) -> String {
    key.to_public_key()
        .to_armored_string(ArmorOptions::default())
        .unwrap()
}

fn document(digest: &str) -> String {
    json!({
        "critical": {
            "type": "atomic container signature",
            "image": {"docker-manifest-digest": digest},
            "identity": {"docker-reference": "registry.example/release:4.14.0"},
        },
        "optional": {"creator": "minicvo tests", "timestamp": 1_700_000_000},
    })
    .to_string()
}

/// A signed, compressed message as `gpg --sign` makes it; `validity` sets a creation time
/// and an expiration.
fn sign(key: &SignedSecretKey, content: &str, validity: Option<(u32, Duration)>) -> Vec<u8> {
    let mut b = MessageBuilder::from_bytes("", content.as_bytes().to_vec());
    b.compression(pgp::types::CompressionAlgorithm::ZLIB);
    match validity {
        None => {
            b.sign(&key.primary_key, Password::empty(), HashAlgorithm::Sha256);
        }
        Some((created, life)) => {
            let hashed = vec![
                Subpacket::regular(SubpacketData::IssuerFingerprint(key.fingerprint())).unwrap(),
                Subpacket::regular(SubpacketData::SignatureCreationTime(Timestamp::from_secs(
                    created,
                )))
                .unwrap(),
                Subpacket::regular(SubpacketData::SignatureExpirationTime(
                    pgp::types::Duration::from_secs(u32::try_from(life.as_secs()).unwrap()),
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
        }
    }
    b.to_vec(rand08::thread_rng()).unwrap()
}

fn ring(key: &SignedSecretKey) -> Vec<pgp::composed::SignedPublicKey> {
    signature::read_keyring(armored(key).as_bytes()).unwrap()
}

#[test]
fn a_signature_by_the_key_over_the_digest_is_good() {
    let k = key("Release <release@example.com>");
    let sig = sign(&k, &document(DIGEST), None);
    assert_eq!(
        signature::check(&sig, &ring(&k), DIGEST, SystemTime::now()),
        Ok(())
    );
}

#[test]
fn every_check_of_library_go_refuses_what_it_should() {
    let k = key("Release <release@example.com>");
    let now = SystemTime::now();
    let other = DIGEST.replace("0123", "ffff");
    let check = |sig: &[u8]| signature::check(sig, &ring(&k), DIGEST, now);
    assert_eq!(
        check(&sign(&k, &document(&other), None)),
        Err(SignatureError::DigestMismatch)
    );
    let stranger = key("Stranger <x@example.com>");
    assert!(matches!(
        check(&sign(&stranger, &document(DIGEST), None)),
        Err(SignatureError::Signature(m)) if m.contains("unknown entity")
    ));
    let wrong_type = document(DIGEST).replace("atomic container signature", "cosign");
    assert_eq!(
        check(&sign(&k, &wrong_type, None)),
        Err(SignatureError::WrongType)
    );
    let no_identity = document(DIGEST).replace("registry.example/release:4.14.0", "");
    assert_eq!(
        check(&sign(&k, &no_identity, None)),
        Err(SignatureError::NoIdentity)
    );
    let unknown_field = document(DIGEST).replace("\"type\"", "\"extra\":1,\"type\"");
    assert!(matches!(
        check(&sign(&k, &unknown_field, None)),
        Err(SignatureError::Json(m)) if m.contains("unknown field")
    ));
    assert!(matches!(
        check(b"not openpgp"),
        Err(SignatureError::Unreadable(_))
    ));
    // Expired a day ago; one that expires tomorrow is good.
    let day = Duration::from_secs(86_400);
    let secs = |t: SystemTime| {
        u32::try_from(t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs()).unwrap()
    };
    let old = sign(&k, &document(DIGEST), Some((secs(now - 2 * day), day)));
    assert!(
        matches!(check(&old), Err(SignatureError::Expired(m)) if m.ends_with("+0000 UTC")),
        "{:?}",
        check(&old)
    );
    let fresh = sign(&k, &document(DIGEST), Some((secs(now - day), 2 * day)));
    assert_eq!(check(&fresh), Ok(()));
}

#[test]
fn a_tampered_message_is_refused() {
    let k = key("Release <release@example.com>");
    // Uncompressed, so that the JSON text is in the clear and can be changed.
    let mut b = MessageBuilder::from_bytes("", document(DIGEST).into_bytes());
    b.sign(&k.primary_key, Password::empty(), HashAlgorithm::Sha256);
    let mut sig = b.to_vec(rand08::thread_rng()).unwrap();
    let at = sig.windows(8).position(|w| w == b"registry").unwrap();
    sig[at] = b'R';
    assert!(matches!(
        signature::check(&sig, &ring(&k), DIGEST, SystemTime::now()),
        Err(SignatureError::Signature(m)) if m.starts_with("invalid signature")
    ));
}

fn manifests(data: serde_json::Value) -> Vec<Manifest> {
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "release-verification", "namespace": "openshift-config-managed",
                     "annotations": {CONFIG_MAP_ANNOTATION: ""}},
        "data": data,
    });
    vec![Manifest {
        source: crate::manifest::Source::ReleaseManifests,
        file: "0000_90_cluster-version-operator_00_verify.yaml".into(),
        document: 0,
        line: 1,
        id: crate::manifest::ObjectId {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("openshift-config-managed".into()),
            name: "release-verification".into(),
        },
        api_version: "v1".into(),
        object: cm.into(),
    }]
}

#[test]
fn the_verifier_comes_from_the_annotated_config_map() {
    let k = key("Release <release@example.com>");
    assert!(Verifier::from_manifests(&[]).unwrap().is_none());
    let good = manifests(json!({
        "verifier-public-key-test": armored(&k),
        "store-local": "file:///nowhere",
    }));
    let v = Verifier::from_manifests(&good).unwrap().unwrap();
    assert!(
        v.describe().contains("verifier-public-key-test ("),
        "{}",
        v.describe()
    );
    let no_store = manifests(json!({"verifier-public-key-test": armored(&k)}));
    assert_eq!(
        Verifier::from_manifests(&no_store).unwrap_err().to_string(),
        "the config map openshift-config-managed/release-verification did not provide any signature stores to read from and cannot be used"
    );
    let no_key = manifests(json!({"store-local": "file:///x"}));
    assert!(matches!(
        Verifier::from_manifests(&no_key),
        Err(ConfigError::NoKeys { .. })
    ));
    let bad_key = manifests(json!({"verifier-public-key-x": "junk", "store-local": "file:///x"}));
    assert!(matches!(
        Verifier::from_manifests(&bad_key),
        Err(ConfigError::Key { .. })
    ));
    let bad_store =
        manifests(json!({"verifier-public-key-x": armored(&k), "store-local": "ftp://x"}));
    assert!(matches!(
        Verifier::from_manifests(&bad_store),
        Err(ConfigError::Store { .. })
    ));
}

#[tokio::test]
async fn every_keyring_must_have_signed_and_the_error_names_the_rest() {
    let (a, b) = (key("A <a@example.com>"), key("B <b@example.com>"));
    let dir = tempfile::tempdir().unwrap();
    let sigs = dir.path().join(store::key_prefix(DIGEST, "=").unwrap());
    std::fs::create_dir_all(&sigs).unwrap();
    std::fs::write(sigs.join("signature-1"), sign(&a, &document(DIGEST), None)).unwrap();
    let store = format!("file://{}", dir.path().display());
    let only_a = manifests(json!({"verifier-public-key-a": armored(&a), "store-dir": store}));
    let both = manifests(json!({
        "verifier-public-key-a": armored(&a), "verifier-public-key-b": armored(&b), "store-dir": store,
    }));
    let t = Duration::from_secs(5);
    assert_eq!(
        verify_image(&only_a, &format!("r@{DIGEST}"), None, t).await,
        Ok(())
    );
    let err = verify_image(&both, &format!("r@{DIGEST}"), None, t)
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        format!("unable to verify {DIGEST} against keyrings: verifier-public-key-b")
    );
    assert!(
        err.causes.iter().any(|c| c.contains("unknown entity")),
        "{err:?}"
    );
    // Signed by B too: verified.
    std::fs::write(sigs.join("signature-2"), sign(&b, &document(DIGEST), None)).unwrap();
    assert_eq!(
        verify_image(&both, &format!("r@{DIGEST}"), None, t).await,
        Ok(())
    );
    // A tag, no verifier, a bad digest.
    let tag = verify_image(&both, "r:4.14.0", None, t).await.unwrap_err();
    assert_eq!(
        tag.message,
        "release images that are not accessed via digest cannot be verified"
    );
    let none = verify_image(&[], &format!("r@{DIGEST}"), None, t)
        .await
        .unwrap_err();
    assert_eq!(none.message, "verification is not possible");
    let bad = verify_image(&both, "r@SHA256:x", None, t)
        .await
        .unwrap_err();
    assert!(
        bad.message
            .starts_with("the provided release image digest has an invalid format")
    );
}

#[test]
fn the_detailed_error_lists_the_causes_as_the_cvo_aggregates_them() {
    let e = VerifyError {
        message: "m".into(),
        causes: vec!["a".into(), "b".into()],
    };
    assert_eq!(e.detailed("p: "), "p: m\n[a, b]");
    let one = VerifyError {
        message: "m".into(),
        causes: vec!["a".into()],
    };
    assert_eq!(one.detailed(""), "m\na");
}

#[test]
fn a_keyring_reads_armored_or_binary_and_junk_says_both_ways_failed() {
    use pgp::ser::Serialize as _;
    let k = key("Release <release@example.com>");
    let binary = k.to_public_key().to_bytes().unwrap();
    let ring = signature::read_keyring(&binary).unwrap();
    assert_eq!(ring.len(), 1);
    assert_eq!(
        signature::fingerprints(&ring),
        signature::fingerprints(&super::tests::ring(&k))
    );
    // Two keys in binary form are two keys; of two armored blocks only the first is read,
    // as by x/crypto's ReadArmoredKeyRing.
    let b = key("B <b@example.com>");
    let mut both = binary.clone();
    both.extend(b.to_public_key().to_bytes().unwrap());
    assert_eq!(signature::read_keyring(&both).unwrap().len(), 2);
    let two = format!("{}\n{}", armored(&k), armored(&b));
    assert_eq!(signature::read_keyring(two.as_bytes()).unwrap().len(), 1);
    let junk = signature::read_keyring(b"junk").unwrap_err();
    assert!(junk.0.contains("with armor"), "{junk}");
}

#[test]
fn a_compressed_signature_that_inflates_past_the_bound_is_refused() {
    let k = key("Release <release@example.com>");
    let big = format!("{}{}", document(DIGEST), " ".repeat(200_000));
    let sig = sign(&k, &big, None);
    assert!(sig.len() < 10_000, "{}", sig.len());
    assert!(matches!(
        signature::check(&sig, &ring(&k), DIGEST, SystemTime::now()),
        Err(SignatureError::Unreadable(m)) if m.contains("larger than")
    ));
}
