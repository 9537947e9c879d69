//! Security properties of the commands that talk to a cluster: TLS is verified unless the
//! user explicitly turns it off (and then minicvo warns), bearer tokens never reach the logs at
//! any verbosity, and Secret values never appear in logs, errors or diffs.

use crate::support;
use crate::support::apply as apply_util;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// Planted Secret values: in `stringData` in clear, and in `data` in base64 (`hunter2-...`).
const CLEAR: &str = "hunter2-clear-s3cr3t";
const ENCODED: &str = "aHVudGVyMi1iYXNlNjQtczNjcjN0";
const ENCODED_CLEAR: &str = "hunter2-base64-s3cr3t";

fn secret(ns: &str, clear: &str, encoded: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: {ns}\n  annotations:\n    {}: \"true\"\ntype: Opaque\ndata:\n  token: {encoded}\nstringData:\n  password: {clear}\n",
        apply_util::INCLUDE
    )
}

/// A payload with a ConfigMap and a Secret in `ns`.
fn payload(dir: &Path, ns: &str, clear: &str, encoded: &str) -> PathBuf {
    apply_util::write_payload(
        dir,
        "1.0.0",
        &[
            (
                "0000_10_app_00_config.yaml".into(),
                apply_util::config_map(ns, "settings", "1", &[]),
            ),
            (
                "0000_10_app_01_secret.yaml".into(),
                secret(ns, clear, encoded),
            ),
        ],
    )
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn minicvo(args: &[&str], kubeconfig: &Path, envs: &[(&str, &str)]) -> Out {
    let out = crate::support::cli::command(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .envs(envs.iter().copied())
        .output()
        .expect("minicvo runs");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The tokens of the test plane's kubeconfig.
fn tokens(kubeconfig: &Path) -> Vec<String> {
    std::fs::read_to_string(kubeconfig)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("token: "))
        .map(|t| t.trim().to_string())
        .collect()
}

fn leaked<'a>(text: &str, secrets: &[&'a str]) -> Vec<&'a str> {
    secrets
        .iter()
        .copied()
        .filter(|s| !s.is_empty() && text.contains(s))
        .collect()
}

/// A copy of the plane's kubeconfig with `edit` applied to its text.
fn kubeconfig_with(dir: &Path, edit: impl Fn(&str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(apply_util::kubeconfig()).unwrap();
    let path = dir.join("kubeconfig");
    std::fs::write(&path, edit(&text)).unwrap();
    path
}

#[tokio::test]
async fn tls_is_verified_by_default() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "tls-default").await;
    let dir = tempfile::tempdir().unwrap();
    let p = payload(dir.path(), &ns, CLEAR, ENCODED);
    // Without the plane's CA the server certificate cannot be verified.
    let kc = kubeconfig_with(dir.path(), |t| {
        t.lines()
            .filter(|l| !l.contains("certificate-authority-data"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let p = p.to_str().unwrap();
    for args in [
        &["apply", "--no-progress", "--no-cluster-version", p][..],
        &["diff", p][..],
    ] {
        let out = minicvo(args, &kc, &[]);
        assert_ne!(out.code, Some(0), "{args:?} succeeded without a trusted CA");
        let lower = out.stderr.to_lowercase();
        assert!(
            lower.contains("certificate") || lower.contains("unknownissuer"),
            "{args:?}: the error does not say the certificate is not trusted:\n{}",
            out.stderr
        );
    }
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    assert!(
        cms.get_opt("settings").await.unwrap().is_none(),
        "an object was written over an unverified connection"
    );
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn skipping_tls_verification_in_the_kubeconfig_warns() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "tls-insecure").await;
    let dir = tempfile::tempdir().unwrap();
    let p = payload(dir.path(), &ns, CLEAR, ENCODED);
    let kc = kubeconfig_with(dir.path(), |t| {
        t.lines()
            .map(|l| {
                if l.contains("certificate-authority-data") {
                    "    insecure-skip-tls-verify: true".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    let out = minicvo(
        &[
            "apply",
            "--no-progress",
            "--no-cluster-version",
            p.to_str().unwrap(),
        ],
        &kc,
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("TLS verification is off"),
        "no warning about the unverified connection:\n{}",
        out.stderr
    );
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn insecure_skip_tls_verify_is_explicit_and_warns() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "tls-flag").await;
    let dir = tempfile::tempdir().unwrap();
    let p = payload(dir.path(), &ns, CLEAR, ENCODED);
    let p = p.to_str().unwrap();
    let kc = kubeconfig_with(dir.path(), |t| {
        t.lines()
            .filter(|l| !l.contains("certificate-authority-data"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    for args in [
        &[
            "apply",
            "--no-progress",
            "--no-cluster-version",
            "--insecure-skip-tls-verify",
            p,
        ][..],
        &["diff", "--insecure-skip-tls-verify", p][..],
    ] {
        let out = minicvo(args, &kc, &[]);
        assert_ne!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("TLS verification is off"),
            "{args:?}: no warning about the unverified connection:\n{}",
            out.stderr
        );
    }
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    assert!(cms.get_opt("settings").await.unwrap().is_some());
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn tokens_and_secret_values_never_reach_the_logs_at_any_verbosity() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "no-leaks").await;
    let dir = tempfile::tempdir().unwrap();
    let p = payload(dir.path(), &ns, CLEAR, ENCODED);
    let p = p.to_str().unwrap();
    let kc = apply_util::kubeconfig();
    let tokens = tokens(&kc);
    assert_eq!(tokens.len(), 2, "admin and alice tokens in the kubeconfig");
    let mut secrets: Vec<&str> = tokens.iter().map(String::as_str).collect();
    secrets.extend([CLEAR, ENCODED, ENCODED_CLEAR]);

    let mut runs = Vec::new();
    for verbosity in ["-q", "-v", "-vv", "-vvv"] {
        let out = minicvo(
            &[
                "apply",
                verbosity,
                "--no-progress",
                "--no-cluster-version",
                "-o",
                "json",
                p,
            ],
            &kc,
            &[],
        );
        runs.push((format!("apply {verbosity}"), out));
    }
    // Everything every library logs, including the HTTP client and TLS layers.
    let out = minicvo(
        &["apply", "--no-progress", "--no-cluster-version", p],
        &kc,
        &[("RUST_LOG", "trace")],
    );
    runs.push(("apply RUST_LOG=trace".into(), out));
    let out = minicvo(&["diff", "-vvv", p], &kc, &[("RUST_LOG", "trace")]);
    runs.push(("diff RUST_LOG=trace".into(), out));
    // Failing requests: the unprivileged user is forbidden everything.
    let out = minicvo(
        &[
            "apply",
            "-vvv",
            "--no-progress",
            "--no-cluster-version",
            "--context",
            "alice",
            p,
        ],
        &kc,
        &[("RUST_LOG", "trace")],
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    runs.push(("apply as alice RUST_LOG=trace".into(), out));

    for (what, out) in &runs {
        let found = leaked(&out.stderr, &secrets);
        assert!(found.is_empty(), "{what}: stderr shows {found:?}");
        let found = leaked(&out.stdout, &secrets);
        assert!(found.is_empty(), "{what}: stdout shows {found:?}");
    }
    assert!(
        runs[4].1.stderr.len() > 10_000,
        "RUST_LOG=trace logged little; the test proves little"
    );
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn secret_values_stay_out_of_diffs_and_errors() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "secret-diff").await;
    let kc = apply_util::kubeconfig();
    let old_dir = tempfile::tempdir().unwrap();
    let old = payload(old_dir.path(), &ns, CLEAR, ENCODED);
    let out = minicvo(
        &[
            "apply",
            "--no-progress",
            "--no-cluster-version",
            old.to_str().unwrap(),
        ],
        &kc,
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);

    // New values: the live diff and the offline upgrade plan say the Secret changes, and show
    // neither the old nor the new values.
    let new_clear = "hunter2-changed-s3cr3t";
    let new_encoded = "aHVudGVyMi1jaGFuZ2VkLWI2NA=="; // hunter2-changed-b64
    let new_dir = tempfile::tempdir().unwrap();
    let new = payload(new_dir.path(), &ns, new_clear, new_encoded);
    let secrets = [
        CLEAR,
        ENCODED,
        ENCODED_CLEAR,
        new_clear,
        new_encoded,
        "hunter2-changed-b64",
    ];
    let new = new.to_str().unwrap();
    for args in [&["diff", new][..], &["diff", "-o", "json", new][..]] {
        let out = minicvo(args, &kc, &[]);
        assert_eq!(
            out.code,
            Some(1),
            "{args:?}: the Secret changes\n{}",
            out.stderr
        );
        assert!(out.stdout.contains("creds"), "{args:?}: {}", out.stdout);
        let found = leaked(&format!("{}{}", out.stdout, out.stderr), &secrets);
        assert!(
            found.is_empty(),
            "{args:?} shows {found:?}:\n{}",
            out.stdout
        );
    }
    let out = crate::support::cli::command(&["upgrade-plan", "--diff"])
        .arg(&old)
        .arg(new)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("creds"), "{text}");
    let found = leaked(&text, &secrets);
    assert!(
        found.is_empty(),
        "upgrade-plan --diff shows {found:?}:\n{text}"
    );

    // A Secret the API server rejects: the error names it but shows no value.
    let bad_dir = tempfile::tempdir().unwrap();
    let bad = apply_util::write_payload(
        bad_dir.path(),
        "1.0.0",
        &[(
            "0000_10_app_01_secret.yaml".into(),
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n  namespace: {ns}\n  annotations:\n    {}: \"true\"\ntype: kubernetes.io/tls\nstringData:\n  not-a-cert: {CLEAR}\n",
                apply_util::INCLUDE
            ),
        )],
    );
    let out = minicvo(
        &[
            "apply",
            "-vvv",
            "--no-progress",
            "--no-cluster-version",
            "-o",
            "json",
            bad.to_str().unwrap(),
        ],
        &kc,
        &[],
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("tls"), "{}", out.stderr);
    let found = leaked(&format!("{}{}", out.stdout, out.stderr), &secrets);
    assert!(
        found.is_empty(),
        "a rejected Secret's error shows {found:?}:\n{}",
        out.stderr
    );
    support::delete_namespace(&admin, &ns).await;
}
