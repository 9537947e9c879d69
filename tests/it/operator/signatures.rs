//! Release signature verification of `spec.desiredUpdate.image`, as the CVO does it: the
//! running release (4.13.0) carries a verifier ConfigMap with two keys the test made and a
//! signature store that is a real HTTP server of the test; the update (4.14.0) is a real
//! image in a local registry, asked for by digest. Unsigned, signed for another digest, by
//! an unknown key, expired, and a store that does not answer: refused, nothing written, and
//! tried again; signed by one key only: refused, naming the other keyring; then signed by
//! both (one signature from the store, one from a signature ConfigMap in the cluster):
//! accepted, applied, `verified` in history.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::support_op::{
    Operator, condition, fresh_cluster, history_is, kubectl, patch_cv, simulator, wait_cv,
};
use super::{INSTALL_LIMIT, written};
use crate::support;
use crate::support::signing::{self, Answer, SignatureServer};

/// A copy of the sample `name` with `version` in its metadata and `extra` files added to
/// `release-manifests/`.
pub fn release_copy(name: &str, version: &str, extra: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = support::openshift::sample(name).join("release-manifests");
    let dest = dir.path().join("release-manifests");
    std::fs::create_dir_all(&dest).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        let text = std::fs::read_to_string(e.path()).unwrap();
        let file = e.file_name().to_string_lossy().into_owned();
        let text = match file.as_str() {
            "release-metadata" | "image-references" => {
                let from = if name == "old" { "4.13.0" } else { "4.14.0" };
                text.replace(
                    &format!("\"version\":\"{from}\""),
                    &format!("\"version\":\"{version}\""),
                )
                .replace(&format!("name: {from}"), &format!("name: {version}"))
            }
            _ => text,
        };
        std::fs::write(dest.join(&file), text).unwrap();
    }
    for (file, text) in extra {
        std::fs::write(dest.join(file), text).unwrap();
    }
    dir
}

/// Pushes the sample `name` as a one-layer release image; returns its digest.
fn push(host: &str, repo_tag: &str, name: &str) -> (tempfile::TempDir, String) {
    use crate::support::image::layout::{Layer, Layout};
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let layer = Layer::new()
        .tree(
            "release-manifests",
            &support::openshift::sample(name).join("release-manifests"),
        )
        .tar_gz();
    let image = layout.image(&[layer], "linux/amd64");
    let digest = image["digest"].as_str().unwrap().to_string();
    layout.add(image, None);
    crate::support::image::crane_push(dir.path(), &format!("{host}/{repo_tag}"), false, None);
    (dir, digest)
}

/// Messages of the Warning Events about ClusterVersion with `reason`.
pub async fn events(client: &kube::Client, reason: &str) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(client.clone(), "openshift-cluster-version");
    api.list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

/// Waits (30 s at most) for `n` Events with `reason` whose message contains `text`.
pub async fn wait_events(client: &kube::Client, reason: &str, text: &str, n: usize) -> Vec<String> {
    wait_events_where(client, reason, text, n, |m| m.contains(text)).await
}

/// Waits (30 s at most) for `n` Events with `reason` whose message `f` accepts (`what`
/// names them).
async fn wait_events_where(
    client: &kube::Client,
    reason: &str,
    what: &str,
    n: usize,
    f: impl Fn(&str) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found: Vec<String> = events(client, reason)
            .await
            .into_iter()
            .filter(|m| f(m))
            .collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "fewer than {n} {reason} events with {what:?}: {:#?}",
            events(client, reason).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn desired_image(image: &str) -> String {
    json!({"spec": {"desiredUpdate": {"image": image, "version": ""}}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_image_is_accepted_and_unsigned_wrong_unknown_expired_or_unreachable_ones_are_refused()
 {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let registry = crate::support::image::Registry::crane();
    let (_image, digest) = push(&registry.host, "release:new", "new");
    let image = format!("{}/release@{digest}", registry.host);
    let store = SignatureServer::start().await;
    let key = signing::key("Release Signing <release@example.com>");
    let second = signing::key("Second Signer <second@example.com>");
    let stranger = signing::key("Stranger <stranger@example.com>");
    let release = release_copy(
        "old",
        "4.13.0",
        &[(
            "0000_90_cluster-version-operator_02_verification.yaml",
            signing::verifier_manifest(&[("a", &key), ("b", &second)], &[&store.url]),
        )],
    );
    let sim = simulator("old").await;
    let mut op = Operator::start(
        "signatures",
        &[release.path().to_path_buf()],
        &["--no-leader-elect", "--no-cache", "--verify-timeout", "2s"],
    );
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;
    // The first reconciling pass after the install settles what the simulated operators
    // touched; from then on nothing of the release changes.
    super::more_passes(&op, "reconciling", 1.0).await;
    let before = written(&client).await;

    // No signature at all: refused with the CVO's reason and message.
    let started = Instant::now();
    patch_cv(&desired_image(&image));
    let cv = wait_cv(
        &client,
        "ReleaseAccepted=False",
        Duration::from_secs(60),
        |cv| condition(cv, "ReleaseAccepted").0 == "False",
    )
    .await;
    eprintln!(
        "desiredUpdate patch to ReleaseAccepted=False (unsigned): {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let (_, reason, message) = condition(&cv, "ReleaseAccepted");
    assert_eq!(reason, "RetrievePayload", "{message}");
    assert_eq!(
        message,
        format!(
            "Retrieving payload failed version=\"\" image=\"{image}\" failure=The update cannot be verified: unable to verify {digest} against keyrings: verifier-public-key-a, verifier-public-key-b"
        )
    );
    assert!(
        history_is(&cv, 0, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );
    // The Event carries why: the store had none.
    wait_events(&client, "ReleaseRejected", "no more signatures to check", 1).await;

    // Each wrong signature is refused, and the Event says why; the refusal is tried again
    // every interval, so each new store content is seen.
    // Each case's Event names its cause, and not the cause of the case before (with two
    // keyrings, a signature by one key is "by an unknown entity" for the other).
    let cases: [(&str, Vec<Answer>); 4] = [
        (
            "signature digest does not match",
            vec![Answer::Body(signing::sign(
                &key,
                &format!("sha256:{}", "f".repeat(64)),
                false,
            ))],
        ),
        (
            "signature made by unknown entity",
            vec![Answer::Body(signing::sign(&stranger, &digest, false))],
        ),
        (
            "signature expired on ",
            vec![Answer::Body(signing::sign(&key, &digest, true))],
        ),
        ("context deadline exceeded", vec![Answer::Hang]),
    ];
    for (why, answers) in cases {
        let started = Instant::now();
        store.set(&digest, answers);
        let found = wait_events_where(&client, "ReleaseRejected", why, 1, |m| {
            m.contains(why) && (why.contains("digest") || !m.contains("does not match"))
        })
        .await;
        assert!(found[0].contains(&image), "{found:?}");
        // The next try comes within an interval (1 s); a store that does not answer adds
        // the verification timeout (2 s).
        eprintln!(
            "store changed to refusal {why:?}: {:.2}s",
            started.elapsed().as_secs_f64()
        );
    }
    // The store that does not answer: refused again and again (each try bounded by
    // --verify-timeout), and nothing was written by any of it.
    wait_events(&client, "ReleaseRejected", "context deadline exceeded", 2).await;
    let cv = super::support_op::cluster_version(&client).await.unwrap();
    assert_eq!(condition(&cv, "ReleaseAccepted").1, "RetrievePayload");
    assert!(
        history_is(&cv, 0, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );
    assert_eq!(
        written(&client).await,
        before,
        "a refused image wrote objects"
    );

    // Signed by one key of two: refused, naming the keyring left.
    store.set(
        &digest,
        vec![Answer::Body(signing::sign(&key, &digest, false))],
    );
    let left = format!("unable to verify {digest} against keyrings: verifier-public-key-b");
    wait_cv(&client, "keyring b left", Duration::from_secs(30), |cv| {
        condition(cv, "ReleaseAccepted").2.ends_with(&left)
    })
    .await;

    // Signed by both, the second signature in the cluster: accepted and applied. Asked for
    // again from a cluster that asks for nothing.
    patch_cv(&json!({"spec": {"desiredUpdate": null}}).to_string());
    wait_cv(
        &client,
        "ReleaseAccepted=True",
        Duration::from_secs(30),
        |cv| condition(cv, "ReleaseAccepted").0 == "True",
    )
    .await;
    let second_signature = signing::sign(&second, &digest, false);
    let signatures = signature_config_map(&client, &digest, &second_signature).await;
    let sim = simulator("new").await;
    let started = Instant::now();
    patch_cv(&desired_image(&image));
    wait_cv(
        &client,
        "ReleaseAccepted=True for the image",
        Duration::from_secs(60),
        |cv| {
            let (status, _, message) = condition(cv, "ReleaseAccepted");
            status == "True" && message.contains(&image)
        },
    )
    .await;
    eprintln!(
        "desiredUpdate patch to ReleaseAccepted=True (signed): {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    sim.stop().await;
    let h = &cv["status"]["history"][0];
    assert_eq!(h["verified"], true, "{h:#}");
    assert_eq!(h["image"], image.as_str(), "{h:#}");
    // The preconditions' warning (no channel) is the update's accepted risk, as in the CVO.
    assert!(
        h["acceptedRisks"]
            .as_str()
            .is_some_and(|r| r
                .contains("\"ClusterVersionRecommendedUpdate\" failed because of \"NoChannel\"")),
        "{h:#}"
    );
    assert!(history_is(&cv, 1, "4.13.0", "Completed"));
    signatures
        .delete(SIGNATURES_NAME, &Default::default())
        .await
        .unwrap();
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
    assert!(op.log().contains("refused"), "{}", op.log());
}

const SIGNATURES_NAME: &str = "minicvo-test-release-signatures";

/// A signature ConfigMap in `openshift-config-managed` with `signature` for `digest` (as
/// `oc adm release mirror` writes them: `binaryData` key `sha256-<hex>-1`).
async fn signature_config_map(
    client: &kube::Client,
    digest: &str,
    signature: &[u8],
) -> kube::Api<k8s_openapi::api::core::v1::ConfigMap> {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: kube::Api<ConfigMap> =
        kube::Api::namespaced(client.clone(), "openshift-config-managed");
    let _ = api.delete(SIGNATURES_NAME, &Default::default()).await;
    let mut cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": SIGNATURES_NAME,
                     "labels": {"release.openshift.io/verification-signatures": ""}},
    }))
    .unwrap();
    cm.binary_data = Some(
        [(
            format!("{}-1", digest.replacen(':', "-", 1)),
            ByteString(signature.to_vec()),
        )]
        .into_iter()
        .collect(),
    );
    api.create(&kube::api::PostParams::default(), &cm)
        .await
        .unwrap();
    api
}

/// Regression: with `status.desired` empty (nothing installed yet) any
/// `spec.desiredUpdate.image` was taken without verification or preconditions. The CVO
/// exempts only its own image (`--release-image`): an unsigned image is refused and nothing
/// is written; the operator's own image is then installed unverified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_image_is_refused_before_anything_is_installed() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let registry = crate::support::image::Registry::crane();
    let (_new, digest) = push(&registry.host, "release:new", "new");
    let image = format!("{}/release@{digest}", registry.host);
    let (_old, own_digest) = push(&registry.host, "release:old", "old");
    let own = format!("{}/release@{own_digest}", registry.host);
    let store = SignatureServer::start().await;
    let key = signing::key("Release Signing <release@example.com>");
    let release = release_copy(
        "old",
        "4.13.0",
        &[(
            "0000_90_cluster-version-operator_02_verification.yaml",
            signing::verifier_manifest(&[("a", &key)], &[&store.url]),
        )],
    );
    // A ClusterVersion that asks for the unsigned image before anything is installed.
    let cv = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": {"clusterID": "8f3b1a52-7c1e-4d3e-9a4b-2f6d5c7e8a90",
                 "desiredUpdate": {"image": image, "version": ""}}});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), cv.to_string()).unwrap();
    kubectl(&["create", "-f", file.path().to_str().unwrap()]);
    let refused = |m: &str| m.contains(&image) && m.contains("no more signatures to check");
    let earlier = events(&client, "ReleaseRejected")
        .await
        .iter()
        .filter(|m| refused(m))
        .count();
    let mut op = Operator::start(
        "unverified-install",
        &[release.path().to_path_buf()],
        &[
            "--no-leader-elect",
            "--no-cache",
            "--verify-timeout",
            "2s",
            "--release-image",
            &own,
        ],
    );
    // Refused with the CVO's message (a ReleaseRejected Event: ClusterVersion has no status
    // to hold ReleaseAccepted before a release is taken up), tried again every interval and
    // refused again; nothing of either release is written.
    let refusal = format!(
        "Retrieving payload failed version=\"\" image=\"{image}\" failure=The update cannot be verified: unable to verify {digest} against keyrings: verifier-public-key-a"
    );
    let found = wait_events_where(
        &client,
        "ReleaseRejected",
        "two refusals",
        earlier + 2,
        refused,
    )
    .await;
    assert!(found.iter().all(|m| m.starts_with(&refusal)), "{found:#?}");
    let cv = super::support_op::cluster_version(&client).await.unwrap();
    assert!(
        cv["status"]["desired"].is_null() && cv["status"]["history"].is_null(),
        "{:#}",
        cv["status"]
    );
    assert_eq!(
        written(&client).await,
        Vec::<(String, String)>::new(),
        "a refused image wrote objects"
    );

    // The operator's own image is exempt, as the CVO's is: installed without a signature.
    let sim = simulator("old").await;
    patch_cv(&desired_image(&own));
    let cv = wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;
    let h = &cv["status"]["history"][0];
    assert_eq!(h["image"], own.as_str(), "{h:#}");
    assert_eq!(h["verified"], false, "{h:#}");
    assert_eq!(condition(&cv, "ReleaseAccepted").0, "True");
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
}
