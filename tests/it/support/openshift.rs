//! The real ClusterOperator and ClusterVersion CRDs of `../shared/payloads/openshift-multi`,
//! read by path at test time, for every cluster test that touches those kinds.
//!
//! On the suite's shared plane they are installed once per test process
//! ([`shared_plane_crds`], guarded by a process-wide once) and nothing replaces them: the
//! bundled samples in `payload/` carry hand-written stand-ins of both CRDs (so they apply to a
//! plain cluster), so tests apply them through [`sample`], a copy without those CRDs, and a
//! corpus that carries them through [`without_real_crds`]. Every test that relies on the real
//! CRDs ends with [`assert_real_crds`], which fails if a stand-in replaced one during the run.
//!
//! The shared plane serves the `Default` ClusterVersion variant; the other feature-set
//! variants are exercised on private planes (`cluster_version_real_crd`,
//! `apply_cluster_version_real_crd`), with [`install`] and [`CLUSTER_VERSION_VARIANTS`].

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

/// The corpus file of the real ClusterOperator CRD.
pub const CLUSTER_OPERATOR_CRD: &str =
    "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml";

/// The feature-set variants of the real ClusterVersion CRD in the corpus.
pub const CLUSTER_VERSION_VARIANTS: [&str; 5] = [
    "Default",
    "OKD",
    "TechPreviewNoUpgrade",
    "DevPreviewNoUpgrade",
    "CustomNoUpgrade",
];

/// The corpus file of the ClusterVersion CRD variant `variant` (see
/// [`CLUSTER_VERSION_VARIANTS`]).
pub fn cluster_version_crd(variant: &str) -> String {
    format!("0000_00_cluster-version-operator_01_clusterversions-{variant}.crd.yaml")
}

/// The names of the two CRDs.
const NAMES: [&str; 2] = [
    "clusteroperators.config.openshift.io",
    "clusterversions.config.openshift.io",
];

/// The CRD of corpus file `file` (in `openshift-multi/release-manifests`).
///
/// # Panics
/// If the file cannot be read or is not a CRD.
pub fn corpus_crd(file: &str) -> CustomResourceDefinition {
    let path = super::corpus("openshift-multi/release-manifests").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The schemas of every version of `crd`, as JSON, for comparison.
fn schemas(crd: &CustomResourceDefinition) -> Vec<(String, Value)> {
    crd.spec
        .versions
        .iter()
        .map(|v| {
            (
                v.name.clone(),
                serde_json::to_value(&v.schema).expect("schema serializes"),
            )
        })
        .collect()
}

/// Installs the corpus CRD `file` under its real name and waits until it is Established.
/// A live CRD of the same name with another schema (a stand-in left by an earlier run) is
/// deleted first, so no field of it survives in a merged schema.
///
/// # Panics
/// As [`super::install_corpus_crd`].
pub async fn install(client: &Client, file: &str) {
    let want = corpus_crd(file);
    let name = want.metadata.name.clone().expect("CRD name");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if let Some(live) = crds.get_opt(&name).await.expect("read CRD")
        && schemas(&live) != schemas(&want)
    {
        let uid = live.metadata.uid.clone().unwrap_or_default();
        let _ = crds.delete(&name, &DeleteParams::foreground()).await;
        tokio::time::timeout(
            std::time::Duration::from_secs(60),
            await_condition(crds.clone(), &name, conditions::is_deleted(&uid)),
        )
        .await
        .unwrap_or_else(|_| panic!("stand-in CRD {name} still present after 60 s"))
        .expect("watch CRD deletion");
    }
    super::install_corpus_crd(client, file).await;
}

/// Installs both real CRDs (ClusterOperator and the ClusterVersion `variant`) on a plane the
/// test owns.
pub async fn install_both(client: &Client, variant: &str) {
    install(client, CLUSTER_OPERATOR_CRD).await;
    install(client, &cluster_version_crd(variant)).await;
}

/// Installs the real ClusterOperator and `Default` ClusterVersion CRDs on the shared plane,
/// once per test process; every test touching those kinds calls it first. Returns an admin
/// client of the shared plane.
pub async fn shared_plane_crds() -> Client {
    plane_crds(&super::shared_kubeconfig()).await
}

/// [`shared_plane_crds`] for the plane of the kubeconfig at `kubeconfig` (a plane of the
/// fixed-names pool): installed once per plane and test process.
pub async fn plane_crds(kubeconfig: &Path) -> Client {
    static DONE: tokio::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
        tokio::sync::Mutex::const_new(std::collections::BTreeSet::new());
    let client = super::client_at(kubeconfig, None).await;
    let mut done = DONE.lock().await;
    if !done.contains(kubeconfig) {
        install_both(&client, "Default").await;
        done.insert(kubeconfig.to_path_buf());
    }
    client
}

/// Asserts that the live ClusterOperator and ClusterVersion CRDs still have the corpus
/// schemas (ClusterVersion: `variant`): fails when a stand-in replaced one during the test.
pub async fn assert_real_crds(client: &Client, variant: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in [
        CLUSTER_OPERATOR_CRD.to_string(),
        cluster_version_crd(variant),
    ] {
        let want = corpus_crd(&file);
        let name = want.metadata.name.clone().unwrap();
        let live = crds
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("CRD {name} is gone: {e}"));
        assert!(
            schemas(&live) == schemas(&want),
            "CRD {name} no longer has the schema of {file}: a stand-in replaced it"
        );
    }
}

/// Whether `text` (one manifest file) defines the ClusterOperator or ClusterVersion CRD.
fn defines_real_crd(text: &str) -> bool {
    text.contains("kind: CustomResourceDefinition")
        && NAMES.iter().any(|n| text.contains(&format!("name: {n}\n")))
}

/// A copy of payload `src` (`manifests/` and `release-manifests/`, files only) without the
/// files that define the ClusterOperator or ClusterVersion CRD, so applying it (and `e2e
/// --clean`, which deletes a payload's CRDs) never touches the real ones. The copy lives under
/// the test target dir, named after the source and its content, and is made once.
pub fn without_real_crds(src: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut files = Vec::new();
    for sub in ["manifests", "release-manifests"] {
        let Ok(entries) = std::fs::read_dir(src.join(sub)) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                let bytes = std::fs::read(e.path()).unwrap();
                files.push((sub, e.file_name(), bytes));
            }
        }
    }
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("payloads-without-openshift-crds");
    let label = src
        .file_name()
        .map_or_else(|| "payload".into(), |n| n.to_string_lossy().into_owned());
    let dest = base.join(format!("{label}-{:016x}", h.finish()));
    if dest.is_dir() {
        return dest;
    }
    std::fs::create_dir_all(&base).unwrap();
    let staging = tempfile::tempdir_in(&base).unwrap();
    for (sub, name, bytes) in &files {
        if defines_real_crd(&String::from_utf8_lossy(bytes)) {
            continue;
        }
        let dir = staging.path().join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    // Another test (or process) may have made the same copy meanwhile: either one is fine.
    let staged = staging.keep();
    if std::fs::rename(&staged, &dest).is_err() {
        let _ = std::fs::remove_dir_all(&staged);
    }
    assert!(dest.is_dir(), "cannot make {}", dest.display());
    dest
}

/// The bundled sample `payload/<name>` without its stand-in ClusterOperator and
/// ClusterVersion CRDs (see [`without_real_crds`]).
pub fn sample(name: &str) -> PathBuf {
    without_real_crds(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("payload")
            .join(name),
    )
}

/// `kubectl get clusterversion version --no-headers` with `kubectl` on the plane of
/// `kubeconfig`: the columns an admin sees (NAME, VERSION, AVAILABLE, PROGRESSING, SINCE,
/// STATUS), trailing whitespace trimmed.
pub fn clusterversion_line(kubectl: &Path, kubeconfig: &Path) -> String {
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "clusterversion", "version", "--no-headers"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}
