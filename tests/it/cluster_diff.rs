//! `minicvo diff` against the test control plane: creates, no-ops, changes and deletes found
//! by server-side dry runs, Secret values never shown, and the exit code. Run with
//! `hack/test.sh --test cluster_diff`.

use crate::support;
use crate::support::cli as cli_support;

use std::path::Path;

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const SECRET: &str = "hunter2-do-not-print";

fn write(dir: &Path, name: &str, doc: &Value) {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    std::fs::write(rm.join(name), serde_json::to_string_pretty(doc).unwrap()).unwrap();
}

fn annotations(extra: &[(&str, &str)]) -> Value {
    let mut a = json!({"include.release.openshift.io/self-managed-high-availability": "true"});
    for (k, v) in extra {
        a[*k] = json!(v);
    }
    a
}

fn settings(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ns, "annotations": annotations(&[])},
        "data": {"mode": "fast"}})
}

fn creds(ns: &str, password: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns, "annotations": annotations(&[])},
        "stringData": {"password": password}})
}

fn seed(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "seed", "namespace": ns,
            "annotations": annotations(&[("release.openshift.io/create-only", "true")])},
        "data": {"initial": "yes"}})
}

fn old_settings(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "old-settings", "namespace": ns,
            "annotations": annotations(&[("release.openshift.io/delete", "true")])}})
}

fn payload(ns: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "0000_50_diff_01_config.json", &settings(ns));
    write(
        dir.path(),
        "0000_50_diff_02_secret.json",
        &creds(ns, SECRET),
    );
    write(dir.path(), "0000_50_diff_03_seed.json", &seed(ns));
    write(
        dir.path(),
        "0000_90_diff_90_deletion.json",
        &old_settings(ns),
    );
    dir
}

fn diff(dir: &Path, ns: &str, extra: &[&str]) -> cli_support::Run {
    let kubeconfig = std::env::var(support::KUBECONFIG_ENV)
        .expect("MINICVO_TEST_KUBECONFIG: run through hack/test.sh");
    let dir = dir.display().to_string();
    // The objects are written by hand here, with no ClusterVersion owner reference, while
    // other tests may have created ClusterVersion `version` on the shared plane.
    let mut args = vec![
        "diff",
        dir.as_str(),
        "--kubeconfig",
        kubeconfig.as_str(),
        "--no-cluster-version",
    ];
    args.extend_from_slice(extra);
    let mut r = cli_support::minicvo(&args);
    r.stdout = r.stdout.replace(ns, "[NS]");
    for leaked in [SECRET, "aHVudGVyMi1kby1ub3QtcHJpbnQ="] {
        assert!(
            !r.stdout.contains(leaked),
            "Secret value printed:\n{}",
            r.stdout
        );
        assert!(
            !r.stderr.contains(leaked),
            "Secret value logged:\n{}",
            r.stderr
        );
    }
    r
}

async fn apply(client: &kube::Client, ns: &str, object: &Value, manager: &str) {
    let name = object["metadata"]["name"].as_str().unwrap();
    let params = PatchParams::apply(manager).force();
    let result = match object["kind"].as_str().unwrap() {
        "Secret" => Api::<Secret>::namespaced(client.clone(), ns)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .map(|_| ()),
        _ => Api::<ConfigMap>::namespaced(client.clone(), ns)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .map(|_| ()),
    };
    result.unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_shows_creates_then_changes_and_deletes_and_never_secret_values() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "diff").await;
    let dir = payload(&ns);

    // Nothing exists yet: three creates; the delete has nothing to delete.
    let r = diff(dir.path(), &ns, &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("4 tasks: 3 create, 0 change, 1 unchanged, 0 delete, 0 skip, 0 error\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("+  password: '***'") || r.stdout.contains("+  password: \"***\""),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("(already absent)"), "{}", r.stdout);

    // Applied as minicvo would, plus an object the payload deletes.
    apply(&client, &ns, &settings(&ns), "minicvo").await;
    apply(&client, &ns, &creds(&ns, SECRET), "minicvo").await;
    let mut seeded = seed(&ns);
    seeded["data"]["initial"] = json!("changed by a user");
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &serde_json::from_value(seeded)?)
        .await?;
    let old: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "old-settings", "namespace": ns}, "data": {"x": "1"}}),
    )?;
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &old)
        .await?;
    let r = diff(dir.path(), &ns, &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("4 tasks: 0 create, 0 change, 3 unchanged, 1 delete, 0 skip, 0 error\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("create-only: the existing object is left alone")
    );

    // Drift: someone else changes the ConfigMap and the Secret; the deleted object is gone.
    let mut drifted = settings(&ns);
    drifted["data"]["mode"] = json!("slow");
    apply(&client, &ns, &drifted, "someone-else").await;
    apply(
        &client,
        &ns,
        &creds(&ns, "rotated-elsewhere"),
        "someone-else",
    )
    .await;
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .delete("old-settings", &DeleteParams::default())
        .await?;
    let r = diff(dir.path(), &ns, &["--changed-only"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("-  mode: slow\n    +  mode: fast\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("*** (before)") && r.stdout.contains("*** (after)"));
    assert!(!r.stdout.contains("rotated-elsewhere"));
    insta::assert_snapshot!(r.stdout);

    let r = diff(dir.path(), &ns, &["-o", "json"]);
    let v: Value = serde_json::from_str(&r.stdout)?;
    assert_eq!(v["kind"], "LiveDiff");
    assert_eq!(v["changes"], true);
    assert_eq!(v["summary"]["change"], 2);
    let objects = v["objects"].as_array().unwrap();
    assert_eq!(objects[0]["change"], "change");
    assert_eq!(objects[0]["name"], "settings");
    assert_eq!(objects[3]["change"], "unchanged");
    assert_eq!(objects[3]["note"], "already absent");

    // Converged again: nothing would change, exit 0.
    apply(&client, &ns, &settings(&ns), "minicvo").await;
    apply(&client, &ns, &creds(&ns, SECRET), "minicvo").await;
    let r = diff(dir.path(), &ns, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("4 tasks: 0 create, 0 change, 4 unchanged, 0 delete, 0 skip, 0 error\n"),
        "{}",
        r.stdout
    );

    support::delete_namespace(&client, &ns).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_of_a_kind_whose_crd_the_payload_creates_is_a_create_with_a_note() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "diff-crd").await;
    let group = format!("{}.example.com", support::unique_name("g"));
    let dir = tempfile::tempdir()?;
    write(
        dir.path(),
        "0000_50_diff_00_widgets.crd.json",
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("widgets.{group}"), "annotations": annotations(&[])},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    );
    write(
        dir.path(),
        "0000_50_diff_01_widget.json",
        &json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns, "annotations": annotations(&[])},
            "spec": {"size": 3}}),
    );
    let r = diff(dir.path(), &ns, &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("2 tasks: 2 create, 0 change, 0 unchanged, 0 delete, 0 skip, 0 error\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("its CustomResourceDefinition is created earlier in this plan"),
        "{}",
        r.stdout
    );
    support::delete_namespace(&client, &ns).await;
    Ok(())
}
