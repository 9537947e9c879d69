//! `spec.desiredUpdate.image`: a release image pulled from a real local registry and applied,
//! a missing one refused. The running release has no verifier, so, as with the CVO, no image
//! can be verified: refused without `force`, applied with it, the forced verification an
//! accepted risk. Also the operator's `--log-format json`.

use std::time::Duration;

use serde_json::{Value, json};

use super::support_op::{
    Operator, condition, fresh_cluster, history_is, patch_cv, payloads, simulator, wait_cv,
    wait_refused,
};
use super::{INSTALL_LIMIT, written};
use crate::support;

/// Pushes the sample `name` (without its OpenShift CRDs) as a one-layer release image.
pub(super) fn push_sample(host: &str, repo_tag: &str, name: &str) -> tempfile::TempDir {
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
    layout.add(image, None);
    crate::support::image::crane_push(dir.path(), &format!("{host}/{repo_tag}"), false, None);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desired_image_is_pulled_from_the_registry_and_a_missing_one_is_refused() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let registry = crate::support::image::Registry::crane();
    let _image = push_sample(&registry.host, "release:new", "new");
    let sim = simulator("old").await;
    // Only the old release is on disk: 4.14.0 can only come from the image.
    let mut op = Operator::start(
        "images",
        &payloads(&["old"]),
        &["--no-leader-elect", "--no-cache", "--log-format", "json"],
    );
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;

    // An image the registry does not have (forced past the verification, so the pull is
    // tried): refused, nothing written.
    let before = written(&client).await;
    let missing = format!("{}/release:missing", registry.host);
    let patch = |image: &str| {
        json!({"spec": {"desiredUpdate": {"image": image, "version": "", "force": false}}})
            .to_string()
    };
    patch_cv(
        &json!({"spec": {"desiredUpdate": {"image": missing, "version": "", "force": true}}})
            .to_string(),
    );
    let cv = wait_refused(&client, Duration::from_secs(60)).await;
    let (_, reason, message) = condition(&cv, "ReleaseAccepted");
    assert_eq!(reason, "RetrievePayload", "{message}");
    assert!(message.contains(&missing), "{message}");
    assert!(!message.contains("cannot be verified"), "{message}");
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

    // The image that exists cannot be verified (no verifier in the running release): refused.
    let image = format!("{}/release:new", registry.host);
    patch_cv(&patch(&image));
    let cv = wait_cv(
        &client,
        "the image refused",
        Duration::from_secs(60),
        |cv| {
            let (status, _, message) = condition(cv, "ReleaseAccepted");
            status == "False" && message.contains(&image)
        },
    )
    .await;
    assert_eq!(
        condition(&cv, "ReleaseAccepted").2,
        format!(
            "Retrieving payload failed version=\"\" image=\"{image}\" failure=The update cannot be verified: verification is not possible"
        )
    );
    assert_eq!(
        written(&client).await,
        before,
        "an unverified image wrote objects"
    );

    // With force: pulled and applied; the unverified image is an accepted risk.
    let sim = simulator("new").await;
    patch_cv(
        &json!({"spec": {"desiredUpdate": {"image": image, "version": "", "force": true}}})
            .to_string(),
    );
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    sim.stop().await;
    assert_eq!(
        cv["status"]["history"][0]["image"],
        image.as_str(),
        "{:#}",
        cv["status"]["history"]
    );
    assert_eq!(cv["status"]["desired"]["version"], "4.14.0");
    assert_eq!(
        condition(&cv, "ReleaseAccepted").0,
        "True",
        "{:#}",
        cv["status"]["conditions"]
    );
    assert!(
        history_is(&cv, 1, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );
    let forced = format!(
        "Target release version=\"\" image=\"{image}\" cannot be verified, but continuing anyway because the update was forced: verification is not possible"
    );
    let h = &cv["status"]["history"][0];
    assert_eq!(h["verified"], false, "{h:#}");
    assert!(
        h["acceptedRisks"]
            .as_str()
            .is_some_and(|r| r.starts_with(&forced)),
        "{h:#}"
    );
    super::signatures::wait_events(&client, "RetrievePayload", &forced, 1).await;
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
    // --log-format json: every line an object; the pull is logged.
    let lines: Vec<Value> = op
        .log()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string()),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(&format!("pulled {image}")))),
        "{lines:#?}"
    );
    support::openshift::assert_real_crds(&client, "Default").await;
}
