//! Smoke tests of the test control plane itself: the API-server behaviours minicvo relies on
//! (server-side apply, CRDs, watches, RBAC) and the controllers the plane runs (namespace
//! deletion, garbage collection). Run them with `hack/test.sh --test cluster_smoke`.

use crate::support;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use serde_json::json;
use support::api_error_code;

const MANAGER: &str = "minicvo-test";

fn apply() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Retries `f` with exponential backoff (10 ms doubling to 500 ms) until it returns
/// `Ok(Some(_))`, for at most `limit`. Only for server conditions that no watch reports: the
/// handler of a just-Established CRD and the RBAC authorizer's cache are internal to the API
/// server; the only way to learn they are ready is to ask again.
async fn poll<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut backoff = Duration::from_millis(10);
    loop {
        if let Some(v) = f().await? {
            return Ok(v);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

#[tokio::test]
async fn server_side_apply_creates_then_noop_reapply_keeps_resource_version() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "ssa").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let doc = |value: &str| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": ns},
            "data": {"mode": value},
        })
    };

    let created = api
        .patch("settings", &apply(), &Patch::Apply(doc("fast")))
        .await?;
    let fetched = api.get("settings").await?;
    assert_eq!(
        fetched
            .data
            .unwrap_or_default()
            .get("mode")
            .map(String::as_str),
        Some("fast")
    );
    let managers: Vec<_> = fetched
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&(MANAGER.to_owned(), "Apply".to_owned())),
        "field manager {MANAGER} not recorded: {managers:?}"
    );

    let rv = created
        .metadata
        .resource_version
        .clone()
        .context("no resourceVersion")?;
    let again = api
        .patch("settings", &apply(), &Patch::Apply(doc("fast")))
        .await?;
    assert_eq!(
        again.metadata.resource_version.as_deref(),
        Some(rv.as_str()),
        "no-op apply wrote"
    );

    // The same comparison does see a real change, so the assertion above can fail.
    let changed = api
        .patch("settings", &apply(), &Patch::Apply(doc("slow")))
        .await?;
    assert_ne!(
        changed.metadata.resource_version.as_deref(),
        Some(rv.as_str())
    );
    assert_eq!(
        changed
            .data
            .unwrap_or_default()
            .get("mode")
            .map(String::as_str),
        Some("slow")
    );

    support::delete_namespace(&client, &ns).await;
    Ok(())
}

#[tokio::test]
async fn crd_becomes_established_and_serves_its_custom_resources() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "crd").await;
    let group = format!("{}.minicvo.test", support::unique_name("smoke"));
    let crd_name = format!("widgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": {"size": {"type": "integer", "minimum": 1}, "color": {"type": "string"}},
                        "required": ["size"],
                    }},
                }},
            }],
        },
    });
    crds.patch(&crd_name, &apply(), &Patch::Apply(&crd)).await?;
    let established = tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds.clone(), &crd_name, conditions::is_crd_established()),
    )
    .await
    .context("CRD not Established within 30s")??;
    assert!(
        established.is_some(),
        "CRD vanished while waiting for Established"
    );

    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    let widget = |size: serde_json::Value| {
        json!({
            "apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": "w1", "namespace": ns},
            "spec": {"size": size, "color": "blue"},
        })
    };
    // Established means served; allow a moment for the handler anyway.
    let applied = poll(Duration::from_secs(10), "the Widget endpoint", || async {
        match widgets
            .patch("w1", &apply(), &Patch::Apply(widget(json!(3))))
            .await
        {
            Ok(o) => Ok(Some(o)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    assert_eq!(applied.data["spec"]["size"], json!(3));
    assert_eq!(
        widgets.get("w1").await?.data["spec"]["color"],
        json!("blue")
    );

    // The schema is enforced: a size below the minimum is rejected as Invalid (422).
    // (A value of the wrong type, e.g. a string, fails earlier, in server-side apply's typed
    // conversion, and comes back as a 500 with "failed to create typed patch object".)
    let bad = widgets
        .patch("w1", &apply(), &Patch::Apply(widget(json!(0))))
        .await;
    assert_eq!(
        api_error_code(&bad),
        Some(422),
        "schema violation accepted: {bad:?}"
    );
    assert_eq!(
        widgets.get("w1").await?.data["spec"]["size"],
        json!(3),
        "rejected apply was stored"
    );

    support::delete_namespace(&client, &ns).await;
    support::delete_quietly(&crds, &crd_name).await;
    Ok(())
}

#[tokio::test]
async fn watch_sees_an_update_made_after_it_started() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "watch").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let doc = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched"}, "data": {"v": v}});
    api.patch("watched", &apply(), &Patch::Apply(doc("1")))
        .await?;

    let config = watcher::Config::default().fields("metadata.name=watched");
    let mut events = watcher(api.clone(), config).boxed();
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        let mut updated = false;
        while let Some(event) = events.try_next().await? {
            match event {
                // The initial list is done: the watch starts from its resourceVersion, so an
                // update made now must arrive as an event.
                watcher::Event::InitDone if !updated => {
                    api.patch("watched", &apply(), &Patch::Apply(doc("2")))
                        .await?;
                    updated = true;
                }
                watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) if updated => {
                    let v = cm.data.unwrap_or_default().get("v").cloned();
                    if v.as_deref() == Some("2") {
                        return anyhow::Ok(true);
                    }
                }
                _ => {}
            }
        }
        anyhow::Ok(false)
    })
    .await
    .context("no watch event for the update within 30s")??;
    assert!(seen, "watch stream ended before the update arrived");

    support::delete_namespace(&client, &ns).await;
    Ok(())
}

#[tokio::test]
async fn unprivileged_user_is_forbidden_until_a_role_binding_grants_access() -> Result<()> {
    let admin = support::admin_client().await;
    let alice = support::user_client().await;
    let ns = support::test_namespace(&admin, "rbac").await;
    let as_alice: Api<ConfigMap> = Api::namespaced(alice.clone(), &ns);
    let cm = |name: &str| {
        serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
    };

    let list = as_alice.list(&ListParams::default()).await;
    assert_eq!(
        api_error_code(&list),
        Some(403),
        "alice could list before the grant: {list:?}"
    );
    let create = as_alice
        .create(&PostParams::default(), &cm("before")?)
        .await;
    assert_eq!(
        api_error_code(&create),
        Some(403),
        "alice could create before the grant: {create:?}"
    );

    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "configmap-editor", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-configmap-editor", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": support::USER_NAME}],
    });
    Api::<Role>::namespaced(admin.clone(), &ns)
        .patch("configmap-editor", &apply(), &Patch::Apply(&role))
        .await?;
    Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .patch("alice-configmap-editor", &apply(), &Patch::Apply(&binding))
        .await?;

    // The RBAC authorizer reads from an informer cache: allow a few seconds.
    poll(
        Duration::from_secs(10),
        "alice's grant to take effect",
        || async {
            match as_alice.list(&ListParams::default()).await {
                Ok(_) => Ok(Some(())),
                Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
                Err(e) => Err(e.into()),
            }
        },
    )
    .await?;
    as_alice
        .create(&PostParams::default(), &cm("after")?)
        .await?;
    let stored = Api::<ConfigMap>::namespaced(admin.clone(), &ns)
        .get("after")
        .await?;
    assert_eq!(
        stored.data.unwrap_or_default().get("k").map(String::as_str),
        Some("v")
    );

    // The grant is scoped: other resources and other namespaces stay forbidden.
    let secrets = Api::<Secret>::namespaced(alice.clone(), &ns)
        .list(&ListParams::default())
        .await;
    assert_eq!(
        api_error_code(&secrets),
        Some(403),
        "alice can list secrets: {secrets:?}"
    );
    let everywhere = Api::<ConfigMap>::all(alice.clone())
        .list(&ListParams::default())
        .await;
    assert_eq!(
        api_error_code(&everywhere),
        Some(403),
        "alice can list all configmaps: {everywhere:?}"
    );

    support::delete_namespace(&admin, &ns).await;
    Ok(())
}

#[tokio::test]
async fn namespace_deletion_completes() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "nsdel").await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "content"}, "data": {"k": "v"}});
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .patch("content", &apply(), &Patch::Apply(&cm))
        .await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let uid = namespaces
        .get(&ns)
        .await?
        .metadata
        .uid
        .context("namespace without uid")?;
    namespaces.delete(&ns, &DeleteParams::default()).await?;

    // Only kube-controller-manager's namespace controller empties and removes it.
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(namespaces.clone(), &ns, conditions::is_deleted(&uid)),
    )
    .await
    .context(
        "namespace still present 60s after deletion (is kube-controller-manager running?)",
    )??;
    let gone = namespaces.get_opt(&ns).await?;
    assert!(gone.is_none(), "namespace {ns} still exists: {gone:?}");
    Ok(())
}

#[tokio::test]
async fn garbage_collector_deletes_dependents_of_a_deleted_owner() -> Result<()> {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "gc").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = api
        .patch(
            "owner",
            &apply(),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}),
            ),
        )
        .await?;
    let owner_uid = owner.metadata.uid.context("owner without uid")?;
    let dependent = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dependent", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid},
        ]},
    });
    let dependent_uid = api
        .patch("dependent", &apply(), &Patch::Apply(&dependent))
        .await?
        .metadata
        .uid
        .context("dependent without uid")?;

    api.delete("owner", &DeleteParams::background()).await?;
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(
            api.clone(),
            "dependent",
            conditions::is_deleted(&dependent_uid),
        ),
    )
    .await
    .context("dependent still present 60s after its owner was deleted (garbage collector)")??;
    assert!(
        api.get_opt("dependent").await?.is_none(),
        "dependent survived its owner"
    );

    support::delete_namespace(&client, &ns).await;
    Ok(())
}
