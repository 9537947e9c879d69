//! Running as the unprivileged `alice` context: the first write is Forbidden, fails at once
//! (no retries), and the error names the object.

use crate::support;
use crate::support::apply as apply_util;

use minicvo::Mode;
use minicvo::apply::EventKind;
use serde_json::Value;

#[tokio::test]
async fn an_unprivileged_user_gets_forbidden_naming_the_object() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "forbidden").await;
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(
        dir.path(),
        "1.0.0",
        &[(
            "0000_10_app_00_config.yaml".into(),
            apply_util::config_map(&ns, "settings", "1", &[]),
        )],
    );

    // Library: the failure names the object and no retry happened.
    let conn = apply_util::connection(Some(support::USER_CONTEXT)).await;
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let (report, events) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(!report.ok);
    let e = &report.errors[0];
    assert_eq!(
        (e.object.kind.as_str(), e.object.name.as_str()),
        ("ConfigMap", "settings")
    );
    assert!(e.message.contains("forbidden"), "{}", e.message);
    assert!(e.message.contains("\"settings\""), "{}", e.message);
    assert!(e.message.contains("alice"), "{}", e.message);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Retrying { .. }))
    );

    // Binary: exit code 1, the message on stderr.
    let output = assert_cmd::Command::from_std(apply_util::apply_command(
        dir.path(),
        &["--context", "alice"],
    ))
    .timeout(std::time::Duration::from_secs(120))
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["errors"][0]["name"], "settings");
    assert!(stderr.contains("ConfigMap"), "{stderr}");
    assert!(stderr.contains("is forbidden"), "{stderr}");
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn an_unknown_context_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "1.0.0", &[]);
    let output = crate::support::cli::command(&[])
        .args(["apply", "--context", "nobody", "--kubeconfig"])
        .arg(apply_util::kubeconfig())
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("context \"nobody\""), "{stderr}");
}
