//! Taking up a new release as the CVO does (`syncPayload`, `RetrievePayload`): its image's
//! signature is verified before it is pulled, and once it is loaded the preconditions run.
//! An unverified image or a blocking precondition refuses the release unless
//! `spec.desiredUpdate.force` is set; what was forced through, and the preconditions'
//! warnings, become the history entry's `acceptedRisks`.
//!
//! Only the operator's own release is exempt, as the CVO exempts only the image it runs
//! (`--release-image`): `--release` asked for by version, or an image equal to
//! `--release-image`. Any other image is verified, also on a cluster with nothing installed
//! yet. The release already accepted (`status.desired`) is not checked again, as the
//! CVO does not check the payload it has loaded again.

use std::time::Duration;

use kube::Client;
use serde_json::Value;

use super::admin_acks;
use super::desired::Desired;
use super::preconditions;
use super::verify;
use crate::cvo::status::{self, Risk};
use crate::manifest::Manifest;

/// Why a desired release was refused: ReleaseAccepted's reason and message, and the Event's
/// message when it says more (the CVO's events carry every cause).
#[derive(Debug)]
pub(super) struct Refusal {
    pub reason: &'static str,
    pub message: String,
    pub event: Option<String>,
}

impl Refusal {
    pub fn new(reason: &'static str, message: String) -> Self {
        Refusal {
            reason,
            message,
            event: None,
        }
    }
}

/// A warning about a release taken up: (reason, message) of a Warning Event.
pub(super) type Warning = (&'static str, String);

/// The operator's own release: `--release` and its image (`--release-image`, may be empty).
#[derive(Debug, Clone, Copy)]
pub(super) struct Own<'a> {
    pub version: &'a str,
    pub image: &'a str,
}

/// The release asked for is exempt from the checks: the operator's own release (its
/// version asked for without an image, or its image), or the one `status.desired` says the
/// cluster was accepted for. An image is exempt only by being one of those images: with
/// `status.desired` empty (nothing installed yet), any other image is checked.
pub(super) fn is_exempt(cv: Option<&Value>, wanted: &Desired, own: Own<'_>) -> bool {
    let desired = |k: &str| {
        cv.and_then(|cv| cv.pointer(&format!("/status/desired/{k}")))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if wanted.image.is_empty() {
        let accepted = desired("version");
        wanted.version == own.version || (!accepted.is_empty() && wanted.version == accepted)
    } else {
        let accepted = desired("image");
        (!own.image.is_empty() && wanted.image == own.image)
            || (!accepted.is_empty() && wanted.image == accepted)
    }
}

/// Verifies the image of `wanted` with the verifier of `running` (the running release's
/// manifests): `Ok(true)` verified, `Ok(false)` unverified but forced (with the warning to
/// record and the accepted risk), else the refusal.
pub(super) async fn verify_image(
    client: &Client,
    running: &[Manifest],
    wanted: &Desired,
    timeout: Duration,
    risks: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Result<bool, Refusal> {
    let Err(e) = verify::verify_image(running, &wanted.image, Some(client), timeout).await else {
        return Ok(true);
    };
    let (version, image) = (&wanted.version, &wanted.image);
    if wanted.force {
        let risk = e.detailed(&format!(
            "Target release version={version:?} image={image:?} cannot be verified, but continuing anyway because the update was forced: "
        ));
        tracing::warn!("{}", risk.replace('\n', " // "));
        warnings.push(("RetrievePayload", risk.clone()));
        risks.push(risk);
        return Ok(false);
    }
    let failure = |text: String| {
        format!("Retrieving payload failed version={version:?} image={image:?} failure={text}")
    };
    Err(Refusal {
        reason: "RetrievePayload",
        message: failure(format!("The update cannot be verified: {}", e.message)),
        event: Some(failure(
            e.detailed("The update cannot be verified: ")
                .replace('\n', " // "),
        )),
    })
}

/// Runs the preconditions for an update of `cv` to `version` (the loaded payload's), with
/// ClusterVersion's `Upgradeable` as the CVO would have it now (from `sources`). A block refuses the release unless forced; warnings are accepted
/// risks.
pub(super) fn check_preconditions(
    cv: Option<&Value>,
    sources: &Sources,
    wanted: &Desired,
    version: &str,
    risks: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Result<(), Refusal> {
    let fresh = cv.map(|cv| with_upgradeable(cv, sources));
    let failures = preconditions::run(fresh.as_ref(), version);
    let Some(summary) = preconditions::summarize(&failures, wanted.force) else {
        return Ok(());
    };
    let image = &wanted.image;
    if summary.blocking {
        return Err(Refusal::new(
            "PreconditionChecks",
            format!(
                "Preconditions failed for payload loaded version={version:?} image={image:?}: {}",
                summary.message
            ),
        ));
    }
    warnings.push((
        "PreconditionWarn",
        format!(
            "precondition warning for payload loaded version={version:?} image={image:?}: {}",
            summary.message
        ),
    ));
    risks.push(summary.message);
    Ok(())
}

/// The risks behind `Upgradeable` now, for the status writes of a pass: overrides, the
/// admin-ack risks, then the ClusterOperators' (the CVO's order of its risk sources).
pub(super) fn risks(cv: Option<&Value>, sources: &Sources) -> Vec<Risk> {
    let mut out = sources.admin_acks.clone();
    out.extend(preconditions::upgradeable_risks(cv, &sources.operators));
    out
}

/// `cv` with its `Upgradeable` condition recomputed from the risks now.
fn with_upgradeable(cv: &Value, sources: &Sources) -> Value {
    let mut cv = cv.clone();
    let progressing = cv
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|l| {
            l.iter()
                .any(|c| c["type"] == "Progressing" && c["status"] == "True")
        });
    // Deletions in progress are known to the pass that runs them; keep what it wrote.
    let deleting = cv
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|c| c["type"] == "Upgradeable"))
        .is_some_and(|c| {
            c["reason"] == "ResourceDeletionInProgress"
                || c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("resource deletions are in progress"))
        });
    if deleting {
        return cv;
    }
    let found = status::upgradeable_condition(progressing, &[], &risks(Some(&cv), sources));
    if let Some(list) = cv
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        list.retain(|c| c["type"] != "Upgradeable");
        if let Some((reason, message)) = found {
            list.push(serde_json::json!({"type": "Upgradeable", "status": "False",
                "reason": reason, "message": message}));
        }
    }
    cv
}

/// What `Upgradeable` is computed from besides ClusterVersion.
#[derive(Debug, Clone, Default)]
pub(super) struct Sources {
    /// Every ClusterOperator.
    pub operators: Vec<Value>,
    /// The risks of unacknowledged admin gates ([`admin_acks`]).
    pub admin_acks: Vec<Risk>,
}

/// Reads the sources of `Upgradeable` for a cluster running `version`; `ships`: its release
/// ships the `admin-gates` ConfigMap.
pub(super) async fn sources(client: &Client, version: &str, ships: bool) -> Sources {
    let ((gates, acks), operators) = tokio::join!(
        admin_acks::read(client, Duration::from_secs(10)),
        operators(client)
    );
    Sources {
        operators,
        admin_acks: admin_acks::risks(version, &gates, &acks, ships),
    }
}

/// Every ClusterOperator (empty when they cannot be listed).
async fn operators(client: &Client) -> Vec<Value> {
    let url = "/apis/config.openshift.io/v1/clusteroperators";
    let Ok(req) = kube::core::Request::new(url).list(&kube::api::ListParams::default()) else {
        return Vec::new();
    };
    match crate::cluster::request::send(client, req, Duration::from_secs(10)).await {
        Ok(r) => r
            .body
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        Err(e) => {
            tracing::debug!("listing clusteroperators: {e}");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_own_release_and_the_accepted_one_are_exempt() {
        let want = |version: &str, image: &str| Desired {
            version: version.into(),
            image: image.into(),
            ..Desired::default()
        };
        let own = Own {
            version: "4.13.0",
            image: "r@sha256:own",
        };
        // Nothing installed yet: the own release by version or image, nothing else.
        assert!(is_exempt(None, &want("4.13.0", ""), own));
        assert!(is_exempt(None, &want("", "r@sha256:own"), own));
        assert!(!is_exempt(None, &want("4.14.0", ""), own));
        assert!(!is_exempt(None, &want("", "r@sha256:other"), own));
        let fresh = json!({"spec": {"desiredUpdate": {"image": "r@sha256:other"}}, "status": {}});
        assert!(!is_exempt(Some(&fresh), &want("", "r@sha256:other"), own));
        let empty = json!({"status": {"desired": {"version": "", "image": ""}}});
        assert!(!is_exempt(Some(&empty), &want("", "r@sha256:other"), own));
        // Without --release-image no image is the own release, not even an empty one.
        let no_image = Own { image: "", ..own };
        assert!(!is_exempt(
            Some(&empty),
            &want("", "r@sha256:own"),
            no_image
        ));
        // The release accepted before is not checked again.
        let cv = json!({"status": {"desired": {"version": "4.13.1", "image": "r@sha256:a"}}});
        assert!(is_exempt(Some(&cv), &want("4.13.1", ""), own));
        assert!(is_exempt(Some(&cv), &want("", "r@sha256:a"), own));
        assert!(!is_exempt(Some(&cv), &want("4.14.0", ""), own));
        assert!(!is_exempt(Some(&cv), &want("", "r@sha256:b"), own));
    }

    #[test]
    fn a_clusteroperator_not_upgradeable_blocks_a_minor_update_unless_forced() {
        let cv = json!({"status": {"desired": {"version": "4.13.0", "image": ""},
            "history": [{"state": "Completed", "version": "4.13.0", "image": ""}], "conditions": []}});
        let co = json!({"metadata": {"name": "network"}, "status": {"conditions": [
            {"type": "Upgradeable", "status": "False", "reason": "Migrating", "message": "wait for the migration"}]}});
        let (mut risks, mut warnings) = (Vec::new(), Vec::new());
        let want = Desired {
            version: "4.14.0".into(),
            ..Desired::default()
        };
        let sources = Sources {
            operators: vec![co],
            admin_acks: Vec::new(),
        };
        let refused = check_preconditions(
            Some(&cv),
            &sources,
            &want,
            "4.14.0",
            &mut risks,
            &mut warnings,
        )
        .err()
        .unwrap();
        assert_eq!(refused.reason, "PreconditionChecks");
        assert!(refused.message.starts_with("Preconditions failed for payload loaded version=\"4.14.0\" image=\"\": Multiple precondition checks failed:\n* Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": wait for the migration"), "{}", refused.message);
        let forced = Desired {
            force: true,
            ..want
        };
        check_preconditions(
            Some(&cv),
            &sources,
            &forced,
            "4.14.0",
            &mut risks,
            &mut warnings,
        )
        .unwrap();
        assert!(
            risks[0].starts_with("Forced through blocking failures: "),
            "{risks:?}"
        );
        assert_eq!(warnings[0].0, "PreconditionWarn");
    }
}
