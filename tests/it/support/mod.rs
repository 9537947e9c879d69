//! Support for the integration tests, in one module: clients for the test control plane,
//! unique names, per-test namespaces (with a guard that deletes them on drop) and best-effort
//! cleanup here; the rest in submodules.
//!
//! The plane is started by `hack/test.sh` (see `hack/TESTPLANE.md`), which exports
//! `MINICVO_TEST_KUBECONFIG`: a kubeconfig whose current context is a cluster admin
//! (`system:masters`) and whose `alice` context is an unprivileged user (group `testers`, no
//! rights until a test binds a Role).
//!
//! Tests share one plane and run in parallel, so each test works in its own namespace
//! ([`test_namespace`], [`NamespaceGuard`]) or with unique names ([`unique_name`]) and never
//! depends on another.
//!
//! What replaced what (the helper modules of the former one-binary-per-file layout):
//!
//! | before (`mod X;` in `tests/<topic>.rs`) | now (`use crate::support::...`) |
//! |---|---|
//! | `tests/support/mod.rs` (`mod support;`) | this module, `crate::support` |
//! | `tests/apply_util/mod.rs` (`mod apply_util;`) | [`apply`] (`use crate::support::apply as apply_util;`) |
//! | `tests/cli_support/mod.rs` (`mod cli_support;`) | [`cli`] (`use crate::support::cli as cli_support;`) |
//! | `tests/fault_support/` (`mod fault_support;`) | [`fault`] (`use crate::support::fault as fault_support;`) |
//! | `tests/bad_cases/mod.rs` (`mod bad_cases;`) | [`bad_cases`] |
//!
//! Cluster tests that touch ClusterOperator or ClusterVersion run against the real CRDs of
//! `../shared/payloads/openshift-multi`, never a stand-in: see [`openshift`].
//!
//! A new test topic is a file `tests/it/<topic>.rs` with a `mod <topic>;` line in
//! `tests/it/main.rs`; it reaches the helpers through `crate::support`.

pub mod apply;
pub mod bad_cases;
pub mod cli;
pub mod fault;
pub mod go_tool;
pub mod harm;
pub mod image;
pub mod locks;
pub mod node;
pub mod objects;
pub mod openshift;
pub mod signing;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};
use serde::de::DeserializeOwned;

/// The environment variable naming the test plane's kubeconfig.
pub const KUBECONFIG_ENV: &str = "MINICVO_TEST_KUBECONFIG";
/// The kubeconfig context of the unprivileged test user.
pub const USER_CONTEXT: &str = "alice";
/// The user name the unprivileged context authenticates as (for `RoleBinding` subjects).
pub const USER_NAME: &str = "alice";
/// The label put on every namespace made by [`test_namespace`], to find leftovers.
pub const TEST_LABEL: &str = "minicvo.test/owned";

/// A client for the current context of `$MINICVO_TEST_KUBECONFIG` (the plane's admin).
///
/// # Panics
/// If `MINICVO_TEST_KUBECONFIG` is unset or the kubeconfig cannot be used: a cluster test
/// without a cluster is a failure, never a skip.
pub async fn admin_client() -> Client {
    client_for(None).await
}

/// The payload corpus `name` of the shared reference material (`../shared/payloads/<name>`
/// from the crate root).
pub fn corpus(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/payloads")
        .join(name)
}

/// Installs the real CRD `file` of `openshift-multi/release-manifests` under its real name
/// (server-side apply, forced) and waits until it is Established. Only for private planes or
/// kinds no other test stands in for: CRDs are cluster-wide.
///
/// # Panics
/// If the file cannot be read or the CRD is not Established within 60 s.
pub async fn install_corpus_crd(client: &Client, file: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};
    let path = corpus("openshift-multi/release-manifests").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
    let name = crd.metadata.name.clone().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &name,
        &PatchParams::apply("minicvo-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|e| panic!("installing {file}: {e}"));
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("CRD established within 60 s")
    .unwrap();
}

/// A client for the unprivileged `alice` context of `$MINICVO_TEST_KUBECONFIG`.
///
/// # Panics
/// As [`admin_client`], and if the kubeconfig has no `alice` context.
pub async fn user_client() -> Client {
    client_for(Some(USER_CONTEXT)).await
}

/// The shared plane's kubeconfig, `$MINICVO_TEST_KUBECONFIG`.
///
/// # Panics
/// If it is unset: a cluster test without a cluster is a failure, never a skip.
pub fn shared_kubeconfig() -> std::path::PathBuf {
    let Some(path) = std::env::var_os(KUBECONFIG_ENV) else {
        panic!(
            "{KUBECONFIG_ENV} is not set: cluster tests need the test control plane; \
             hint: run them through `hack/test.sh`, or `eval \"$(hack/testplane.sh start)\"` first"
        );
    };
    path.into()
}

async fn client_for(context: Option<&str>) -> Client {
    client_at(&shared_kubeconfig(), context).await
}

/// A client for `context` (`None`: the current one) of the kubeconfig at `path`.
///
/// # Panics
/// If the kubeconfig cannot be read or has no such context.
pub async fn client_at(path: &std::path::Path, context: Option<&str>) -> Client {
    let shown = path.display().to_string();
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read kubeconfig {shown}: {e}"));
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap_or_else(|e| panic!("cannot load context {context:?} of kubeconfig {shown}: {e}"));
    Client::try_from(config).unwrap_or_else(|e| panic!("cannot build a client for {shown}: {e}"))
}

/// `prefix` plus a short suffix unique across tests and test processes, usable as a
/// DNS-1123 label (lowercase alphanumerics and `-`, at most 63 characters).
pub fn unique_name(prefix: &str) -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() ^ u64::from(d.subsec_nanos()) << 32);
        nanos ^ (u64::from(std::process::id()) << 40)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // splitmix64: distinct counters give well-spread suffixes even with close seeds.
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;

    let mut head: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(50)
        .collect();
    while head.starts_with('-') {
        head.remove(0);
    }
    while head.ends_with('-') {
        head.pop();
    }
    if head.is_empty() {
        head.push('t');
    }
    format!("{head}-{:010x}", z & 0xff_ffff_ffff)
}

/// Creates a fresh namespace named after `prefix` (see [`unique_name`]). It carries the label
/// [`TEST_LABEL`], and the returned [`NamespaceGuard`] (which derefs to the name) deletes it when
/// dropped, so a failing test does not leak it.
///
/// # Panics
/// If the namespace cannot be created.
pub async fn test_namespace(client: &Client, prefix: &str) -> NamespaceGuard {
    let name = unique_name(prefix);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(TEST_LABEL.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("cannot create test namespace {name}: {e}"));
    NamespaceGuard(name)
}

/// A namespace that is deleted (best effort, without waiting for it to go) when the guard is
/// dropped, on success and on panic alike. Derefs to the namespace name.
#[derive(Debug)]
pub struct NamespaceGuard(String);

impl NamespaceGuard {
    /// Guards an existing namespace `name` (e.g. one a payload under test creates).
    pub fn adopt(name: impl Into<String>) -> Self {
        NamespaceGuard(name.into())
    }
}

impl std::ops::Deref for NamespaceGuard {
    type Target = String;
    fn deref(&self) -> &String {
        &self.0
    }
}

impl serde::Serialize for NamespaceGuard {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl std::fmt::Display for NamespaceGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        // The test's runtime may be blocked in this drop (or gone), and a kube client only
        // works on the runtime that built it: delete from a short-lived runtime of our own.
        let name = std::mem::take(&mut self.0);
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let client = admin_client().await;
                delete_namespace(&client, &name).await;
            });
        })
        .join();
    }
}

/// Best-effort deletion of a test namespace; it does not wait for the deletion to finish
/// (kube-controller-manager empties and removes it in the background). Errors are ignored.
pub async fn delete_namespace(client: &Client, name: &str) {
    delete_quietly(&Api::<Namespace>::all(client.clone()), name).await;
}

/// Best-effort deletion of one object (e.g. a cluster-scoped CRD a test created); errors,
/// including "not found", are ignored.
pub async fn delete_quietly<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let _ = api.delete(name, &DeleteParams::background()).await;
}

/// The HTTP status code of an API error, or `None` for a success or a non-API error.
pub fn api_error_code<T>(result: &Result<T, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

pub use locks::{LockGuard, file_lock, fixed_names_lock, fixed_names_plane};
