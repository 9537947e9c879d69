//! `oc adm upgrade`'s text. The expected wording in the tests comes from reading oc's source
//! (`pkg/cli/admin/upgrade/upgrade.go` at openshift/oc 6b8e30c, April 2026): the formats,
//! their order, which go to stderr, and the table `text/tabwriter` draws (minimum cell width
//! 14, padding 1, spaces).

use std::fmt::Write as _;

use serde_json::Value;

use super::{Shown, condition, recommended, sorted, text_of};

/// A multi-line message indented as oc indents it.
fn indent(message: &str) -> String {
    message.replace('\n', "\n  ")
}

/// `Reason: …` and `Message: …` of a condition.
fn reason_message(c: &Value) -> String {
    format!(
        "  Reason: {}\n  Message: {}\n",
        text_of(c, "reason"),
        indent(text_of(c, "message"))
    )
}

/// Go's `text/tabwriter` as `oc adm upgrade` sets it up (min width 14, padding 1, spaces) for
/// rows of two cells: the first column padded, the last cell as it is.
fn table(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(a, _)| a.chars().count() + 1)
        .max()
        .unwrap_or(0)
        .max(14);
    let mut out = String::new();
    for (a, b) in rows {
        let _ = writeln!(out, "{a:<width$}{b}");
    }
    out
}

/// What `oc adm upgrade` prints for `cluster_version`; `include_not_recommended` is
/// `--include-not-recommended`.
#[must_use]
pub fn text(cluster_version: &Value, include_not_recommended: bool) -> Shown {
    let mut out = String::new();
    let mut err = String::new();
    match condition(cluster_version, "Failing") {
        Some(c) if c["status"] != "False" => {
            let _ = write!(
                out,
                "Failing={}:\n\n{}\n",
                text_of(c, "status"),
                reason_message(c)
            );
        }
        Some(_) => {}
        None => err.push_str(
            "warning: No current Failing info, see `oc describe clusterversion` for more details.\n",
        ),
    }
    match condition(cluster_version, "Progressing") {
        Some(c) if !text_of(c, "message").is_empty() => {
            if c["status"] == "True" {
                let _ = writeln!(out, "info: An upgrade is in progress. {}", text_of(c, "message"));
            } else {
                let _ = writeln!(out, "{}", text_of(c, "message"));
            }
        }
        _ => err.push_str(
            "warning: No current Progressing info, see `oc describe clusterversion` for more details.\n",
        ),
    }
    out.push('\n');
    if let Some(c) = condition(cluster_version, "Upgradeable").filter(|c| c["status"] == "False") {
        let _ = write!(out, "Upgradeable=False\n\n{}\n", reason_message(c));
    }
    if let Some(c) = condition(cluster_version, "ReleaseAccepted").filter(|c| c["status"] != "True")
    {
        let _ = write!(
            out,
            "ReleaseAccepted={}\n\n{}\n",
            text_of(c, "status"),
            reason_message(c)
        );
    }
    let spec = &cluster_version["spec"];
    let channel = text_of(spec, "channel");
    if !channel.is_empty() {
        match text_of(spec, "upstream") {
            "" => {
                out.push_str("Upstream is unset, so the cluster will use an appropriate default.\n")
            }
            u => {
                let _ = writeln!(out, "Upstream: {u}");
            }
        }
        let channels: Vec<&str> = cluster_version
            .pointer("/status/desired/channels")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if channels.is_empty() {
            let _ = writeln!(out, "Channel: {channel}");
        } else {
            let _ = writeln!(
                out,
                "Channel: {channel} (available channels: {})",
                channels.join(", ")
            );
        }
    }
    let retrieved =
        condition(cluster_version, "RetrievedUpdates").filter(|c| c["status"] == "False");
    let available = sorted(cluster_version.pointer("/status/availableUpdates"), |u| {
        text_of(u, "version")
    });
    if available.is_empty() {
        match retrieved {
            Some(c) => {
                let _ = write!(
                    err,
                    "warning: Cannot display available updates:\n{}\n",
                    reason_message(c)
                );
            }
            None => out.push_str(
                "No updates available. You may still upgrade to a specific release image with --to-image or wait for new updates to be available.\n",
            ),
        }
    } else {
        out.push_str("\nRecommended updates:\n\n");
        let mut rows = vec![("  VERSION".to_string(), "IMAGE".to_string())];
        rows.extend(available.iter().map(|u| {
            (
                format!("  {}", text_of(u, "version")),
                text_of(u, "image").to_string(),
            )
        }));
        out.push_str(&table(&rows));
        if let Some(c) = retrieved {
            let _ = write!(
                err,
                "warning: Cannot refresh available updates:\n{}\n",
                reason_message(c)
            );
        }
    }
    let conditional = sorted(cluster_version.pointer("/status/conditionalUpdates"), |u| {
        u.pointer("/release/version")
            .and_then(Value::as_str)
            .unwrap_or_default()
    });
    let not_recommended: Vec<(&Value, &Value)> = conditional
        .iter()
        .filter_map(|u| {
            recommended(u)
                .filter(|c| c["status"] != "True")
                .map(|c| (*u, c))
        })
        .collect();
    if include_not_recommended {
        if not_recommended.is_empty() {
            out.push_str("\nNo updates which are not recommended based on your cluster configuration are available.\n");
        } else {
            out.push_str("\nUpdates with known issues:\n");
            for (u, c) in &not_recommended {
                let _ = write!(
                    out,
                    "\n  Version: {}\n  Image: {}\n  Reason: {}\n  Message: {}\n",
                    text_of(&u["release"], "version"),
                    text_of(&u["release"], "image"),
                    text_of(c, "reason"),
                    indent(text_of(c, "message").trim())
                );
            }
        }
    } else if !not_recommended.is_empty() {
        // oc looks at the status's own order here, not the sorted one.
        let qualifier = cluster_version
            .pointer("/status/conditionalUpdates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(recommended)
            .find(|c| c["status"] != "True" && c["status"] != "False")
            .map(|c| {
                format!(
                    ", or where the recommended status is {:?},",
                    text_of(c, "status")
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\nAdditional updates which are not recommended{qualifier} for your cluster configuration are available, to view those re-run the command with --include-not-recommended."
        );
    }
    Shown {
        stdout: out,
        stderr: err,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cv(conditions: &Value, status: &Value) -> Value {
        let mut s = status.clone();
        s["conditions"] = conditions.clone();
        s["desired"] = json!({"version": "4.13.0", "image": "quay.example/r@sha256:13",
                               "channels": ["fast-4.14", "stable-4.14"]});
        json!({"spec": {"channel": "stable-4.14", "upstream": "http://127.0.0.1:8080/graph"},
               "status": s})
    }

    fn conditions(retrieved: &Value) -> Value {
        json!([
            {"type": "Failing", "status": "False"},
            {"type": "Progressing", "status": "False", "message": "Cluster version is 4.13.0"},
            {"type": "ReleaseAccepted", "status": "True"},
            retrieved,
        ])
    }

    #[test]
    fn recommended_updates_are_a_table_and_risky_ones_are_mentioned() {
        let status = json!({
            "availableUpdates": [
                {"version": "4.13.1", "image": "quay.example/r@sha256:131"},
                {"version": "4.14.0", "image": "quay.example/r@sha256:140"}],
            "conditionalUpdates": [{
                "release": {"version": "4.14.1", "image": "quay.example/r@sha256:141"},
                "risks": [],
                "conditions": [{"type": "Recommended", "status": "Unknown", "reason": "EvaluationFailed",
                                "message": "Could not evaluate exposure to update risk R (x)\n  R description: d\n  R URL: https://x"}]}],
        });
        let shown = text(
            &cv(
                &conditions(&json!({"type": "RetrievedUpdates", "status": "True"})),
                &status,
            ),
            false,
        );
        assert_eq!(shown.stderr, "");
        assert_eq!(
            shown.stdout,
            "Cluster version is 4.13.0\n\
             \n\
             Upstream: http://127.0.0.1:8080/graph\n\
             Channel: stable-4.14 (available channels: fast-4.14, stable-4.14)\n\
             \n\
             Recommended updates:\n\
             \n\
            \x20 VERSION     IMAGE\n\
            \x20 4.14.0      quay.example/r@sha256:140\n\
            \x20 4.13.1      quay.example/r@sha256:131\n\
             \n\
             Additional updates which are not recommended, or where the recommended status is \"Unknown\", for your cluster configuration are available, to view those re-run the command with --include-not-recommended.\n"
        );
        let all = text(
            &cv(
                &conditions(&json!({"type": "RetrievedUpdates", "status": "True"})),
                &status,
            ),
            true,
        );
        assert!(
            all.stdout.ends_with(
                "\nUpdates with known issues:\n\
             \n\
            \x20 Version: 4.14.1\n\
            \x20 Image: quay.example/r@sha256:141\n\
            \x20 Reason: EvaluationFailed\n\
            \x20 Message: Could not evaluate exposure to update risk R (x)\n\
            \x20   R description: d\n\
            \x20   R URL: https://x\n"
            ),
            "{}",
            all.stdout
        );
    }

    #[test]
    fn a_failed_retrieval_is_a_warning_on_stderr() {
        let retrieved = json!({"type": "RetrievedUpdates", "status": "False", "reason": "NoChannel",
                               "message": "The update channel has not been configured."});
        let mut c = cv(&conditions(&retrieved), &json!({"availableUpdates": null}));
        c["spec"] = json!({});
        let shown = text(&c, false);
        assert_eq!(shown.stdout, "Cluster version is 4.13.0\n\n");
        assert_eq!(
            shown.stderr,
            "warning: Cannot display available updates:\n  Reason: NoChannel\n  Message: The update channel has not been configured.\n\n"
        );
    }

    #[test]
    fn failing_progressing_and_refusals_come_first() {
        let conds = json!([
            {"type": "Failing", "status": "True", "reason": "ClusterOperatorNotAvailable", "message": "Cluster operator dns is not available"},
            {"type": "Progressing", "status": "True", "message": "Unable to apply 4.14.0: the cluster operator dns is not available"},
            {"type": "Upgradeable", "status": "False", "reason": "R", "message": "line one\nline two"},
            {"type": "ReleaseAccepted", "status": "False", "reason": "RetrievePayload", "message": "m"},
        ]);
        let mut c = cv(&conds, &json!({}));
        c["spec"] = json!({"channel": "stable-4.14"});
        c["status"]["desired"]["channels"] = json!(null);
        let shown = text(&c, false);
        assert_eq!(
            shown.stdout,
            "Failing=True:\n\n  Reason: ClusterOperatorNotAvailable\n  Message: Cluster operator dns is not available\n\n\
             info: An upgrade is in progress. Unable to apply 4.14.0: the cluster operator dns is not available\n\n\
             Upgradeable=False\n\n  Reason: R\n  Message: line one\n  line two\n\n\
             ReleaseAccepted=False\n\n  Reason: RetrievePayload\n  Message: m\n\n\
             Upstream is unset, so the cluster will use an appropriate default.\n\
             Channel: stable-4.14\n\
             No updates available. You may still upgrade to a specific release image with --to-image or wait for new updates to be available.\n"
        );
        let bare = text(&json!({"spec": {}, "status": {}}), false);
        assert_eq!(
            bare.stderr,
            "warning: No current Failing info, see `oc describe clusterversion` for more details.\n\
             warning: No current Progressing info, see `oc describe clusterversion` for more details.\n"
        );
    }

    #[test]
    fn the_table_widens_for_long_versions() {
        let rows = vec![
            ("  VERSION".to_string(), "IMAGE".to_string()),
            ("  4.14.0-0.nightly-2026".to_string(), "i".to_string()),
        ];
        assert_eq!(
            table(&rows),
            "  VERSION               IMAGE\n  4.14.0-0.nightly-2026 i\n"
        );
    }
}
