//! Release images as payloads, against real local registries: the same plan and upgrade plan
//! as the directories, manifest lists, registry auth, and the digest cache.

use crate::support::image as image_support;

use image_support::layout::{Layer, Layout};
use image_support::proxy::CountingProxy;
use image_support::{
    Cli, Registry, crane_push, docker_config, json_without_images, shared_payload,
};

/// Pushes a one-layer release image of the payload `name` as `host/repo:tag`.
fn push_payload(host: &str, repo_tag: &str, name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let layer = Layer::new()
        .tree(
            "release-manifests",
            &shared_payload(name).join("release-manifests"),
        )
        .tar_gz();
    let image = layout.image(&[layer], "linux/amd64");
    layout.add(image, None);
    crane_push(dir.path(), &format!("{host}/{repo_tag}"), false, None);
    dir
}

fn plan_json(cli: &Cli, payload: &str) -> serde_json::Value {
    json_without_images(&cli.ok(&["plan", "-o", "json", payload]))
}

#[test]
fn one_layer_image_plans_like_its_directory() {
    let registry = Registry::crane();
    let _l = push_payload(&registry.host, "release:after", "mco-after-fix");
    let cli = Cli::new();
    let image = format!("{}/release:after", registry.host);
    let out = cli.ok(&["plan", "-o", "json", &image]);
    let dir = plan_json(&cli, shared_payload("mco-after-fix").to_str().unwrap());
    assert_eq!(json_without_images(&out), dir);
    // The output names the image and its digest.
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let digest = v["image"]["digest"].as_str().unwrap();
    assert!(digest.starts_with("sha256:"), "{v}");
    assert_eq!(
        v["image"]["pullSpec"].as_str().unwrap(),
        format!("{}/release@{digest}", registry.host)
    );
    let text = cli.ok(&["plan", &image]);
    assert!(
        text.starts_with(&format!("Image {}/release@{digest}\n", registry.host)),
        "{text}"
    );
}

#[test]
fn layered_image_with_whiteouts_plans_like_its_directory() {
    let registry = Registry::crane();
    let src = shared_payload("mco-after-fix").join("release-manifests");
    let mut files: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (low, high) = files.split_at(files.len() / 2);
    let extra = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: removed-by-a-whiteout\n  namespace: default\n";
    // Layer 0: half the files, a file a whiteout removes, a stray manifests/ file an opaque
    // whiteout removes, and a wrong version of a file layer 2 replaces.
    let mut l0 = Layer::new();
    l0.dir("release-manifests/");
    for f in low {
        l0.file(
            &format!(
                "release-manifests/{}",
                f.file_name().unwrap().to_string_lossy()
            ),
            &std::fs::read(f).unwrap(),
        );
    }
    let replaced = high[0].file_name().unwrap().to_string_lossy().into_owned();
    l0.file("release-manifests/0000_99_zz_removed.yaml", extra)
        .file(&format!("release-manifests/{replaced}"), b"not: [valid")
        .dir("manifests/")
        .file("manifests/0000_99_stray.yaml", extra)
        .file("usr/share/unrelated", b"ignored");
    // Layer 1: the whiteouts.
    let mut l1 = Layer::new();
    l1.file("release-manifests/.wh.0000_99_zz_removed.yaml", b"")
        .file("manifests/.wh..wh..opq", b"");
    // Layer 2: the other half.
    let mut l2 = Layer::new();
    for f in high {
        l2.file(
            &format!(
                "release-manifests/{}",
                f.file_name().unwrap().to_string_lossy()
            ),
            &std::fs::read(f).unwrap(),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let image = layout.image(&[l0.tar_gz(), l1.tar_gz(), l2.tar()], "linux/amd64");
    layout.add(image, None);
    crane_push(
        dir.path(),
        &format!("{}/release:layered", registry.host),
        false,
        None,
    );

    let cli = Cli::new();
    let got = plan_json(&cli, &format!("{}/release:layered", registry.host));
    let want = plan_json(&cli, shared_payload("mco-after-fix").to_str().unwrap());
    assert_eq!(got, want);
}

#[test]
fn upgrade_plan_of_two_images_equals_the_directories() {
    let registry = Registry::crane();
    let _a = push_payload(&registry.host, "release:before", "mco-before-fix");
    let _b = push_payload(&registry.host, "release:after", "mco-after-fix");
    let cli = Cli::new();
    let images = json_without_images(&cli.ok(&[
        "upgrade-plan",
        "-o",
        "json",
        &format!("{}/release:before", registry.host),
        &format!("{}/release:after", registry.host),
    ]));
    let dirs = json_without_images(&cli.ok(&[
        "upgrade-plan",
        "-o",
        "json",
        shared_payload("mco-before-fix").to_str().unwrap(),
        shared_payload("mco-after-fix").to_str().unwrap(),
    ]));
    assert_eq!(images, dirs);
    let text = cli.ok(&[
        "upgrade-plan",
        &format!("{}/release:before", registry.host),
        &format!("{}/release:after", registry.host),
    ]);
    assert!(
        text.starts_with(&format!("Old image {}/release@sha256:", registry.host)),
        "{text}"
    );
}

#[test]
fn manifest_list_picks_the_platform() {
    let registry = Registry::crane();
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let layer = |name: &str| {
        Layer::new()
            .tree(
                "release-manifests",
                &shared_payload(name).join("release-manifests"),
            )
            .tar_gz()
    };
    let amd = layout.image(&[layer("mco-after-fix")], "linux/amd64");
    let arm = layout.image(&[layer("mco-before-fix")], "linux/arm64");
    layout.add(amd, None).add(arm, None);
    crane_push(
        dir.path(),
        &format!("{}/release:multi", registry.host),
        true,
        None,
    );

    let cli = Cli::new();
    let image = format!("{}/release:multi", registry.host);
    let arm_out = cli.ok(&["plan", "-o", "json", "--platform", "linux/arm64", &image]);
    assert_eq!(
        json_without_images(&arm_out),
        plan_json(&cli, shared_payload("mco-before-fix").to_str().unwrap())
    );
    let v: serde_json::Value = serde_json::from_str(&arm_out).unwrap();
    assert_eq!(v["image"]["platform"], "linux/arm64");
    assert_ne!(v["image"]["digest"], v["image"]["manifestDigest"]);
    assert_eq!(
        json_without_images(&cli.ok(&["plan", "-o", "json", "--platform", "linux/amd64", &image])),
        plan_json(&cli, shared_payload("mco-after-fix").to_str().unwrap())
    );
    let (ok, _, err) = cli.run(&["plan", "--platform", "linux/s390x", &image]);
    assert!(!ok);
    assert!(
        err.contains(&format!("image {image}: the manifest list has no linux/s390x image (it has: linux/amd64, linux/arm64)")),
        "{err}"
    );
}

#[test]
fn auth_registry_needs_the_credentials_and_names_the_files_looked_at() {
    let registry = Registry::with_auth("puller", "s3cret");
    let auth = docker_config(&registry.host, "puller", "s3cret");
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let layer = Layer::new()
        .tree(
            "release-manifests",
            &shared_payload("mco-after-fix").join("release-manifests"),
        )
        .tar_gz();
    let image_desc = layout.image(&[layer], "linux/amd64");
    layout.add(image_desc, None);
    let image = format!("{}/release:auth", registry.host);
    crane_push(dir.path(), &image, false, Some(auth.path()));

    let cli = Cli::new();
    // Missing: no auth file anywhere.
    let (ok, _, err) = cli.run(&["plan", &image]);
    assert!(!ok);
    let home = cli.home.path().display();
    assert!(
        err.contains(&format!(
            "image {image}: registry {} answered 401 Unauthorized; no credentials for {} in {home}/.docker/config.json (not found), {home}/.config/containers/auth.json (not found)",
            registry.host, registry.host
        )),
        "{err}"
    );
    // Given with --registry-config.
    let config = auth.path().join("config.json");
    let out = cli.ok(&[
        "plan",
        "-o",
        "json",
        "--registry-config",
        config.to_str().unwrap(),
        &image,
    ]);
    assert_eq!(
        json_without_images(&out),
        plan_json(&cli, shared_payload("mco-after-fix").to_str().unwrap())
    );
    // Wrong credentials: the message names the file they came from.
    let wrong = docker_config(&registry.host, "puller", "wrong");
    let wrong_config = wrong.path().join("config.json");
    let (ok, _, err) = cli.run(&[
        "plan",
        "--no-cache",
        "--registry-config",
        wrong_config.to_str().unwrap(),
        &format!("{}/release:auth", registry.host),
    ]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "the credentials for {} from {} were refused",
            registry.host,
            wrong_config.display()
        )),
        "{err}"
    );
}

#[test]
fn cache_hit_does_only_the_manifest_head() {
    let registry = Registry::crane();
    let _l = push_payload(&registry.host, "release:cached", "mco-after-fix");
    let proxy = CountingProxy::start(&registry.host);
    let cli = Cli::new();
    let image = format!("{}/release:cached", proxy.host);
    let first = cli.ok(&["plan", "-o", "json", &image]);
    let requests = proxy.take();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /v2/release/blobs/sha256:")),
        "{requests:?}"
    );
    let second = cli.ok(&["plan", "-o", "json", &image]);
    assert_eq!(first, second);
    let requests = proxy.take();
    assert_eq!(
        requests,
        ["HEAD /v2/release/manifests/cached"],
        "{requests:?}"
    );
    // By digest, a cached image needs no request at all.
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    let by_digest = format!(
        "{}/release@{}",
        proxy.host,
        v["image"]["digest"].as_str().unwrap()
    );
    cli.ok(&["plan", &by_digest]);
    assert_eq!(proxy.take(), Vec::<String>::new());
    // --no-cache pulls again and leaves no new entry.
    let entries = std::fs::read_dir(cli.cache_dir()).unwrap().count();
    cli.ok(&["plan", "--no-cache", &image]);
    assert!(proxy.take().iter().any(|r| r.contains("/blobs/")));
    assert_eq!(std::fs::read_dir(cli.cache_dir()).unwrap().count(), entries);
}

#[test]
fn image_without_release_manifests_is_refused() {
    let registry = Registry::crane();
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let layer = Layer::new().file("etc/hostname", b"x\n").tar_gz();
    let desc = layout.image(&[layer], "linux/amd64");
    layout.add(desc, None);
    let image = format!("{}/base:1", registry.host);
    crane_push(dir.path(), &image, false, None);
    let cli = Cli::new();
    let (ok, _, err) = cli.run(&["lint", &image]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "image {image}: no release-manifests/ in the image; it is not a release image"
        )),
        "{err}"
    );
    // No entry (nor staging directory) is left in the cache.
    let left: Vec<_> = std::fs::read_dir(cli.cache_dir()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Pushes a one-layer release image of a small payload (a namespace and a ConfigMap holding
/// `value`, release `version`) as `host/repo_tag`; returns its pull spec by digest.
fn push_small(host: &str, repo_tag: &str, ns: &str, version: &str, value: &str) -> String {
    let inc = "    include.release.openshift.io/self-managed-high-availability: \"true\"\n";
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(dir.path());
    let mut layer = Layer::new();
    layer
        .dir("release-manifests/")
        .file(
            "release-manifests/release-metadata",
            format!(r#"{{"kind": "cincinnati-metadata-v0", "version": "{version}"}}"#).as_bytes(),
        )
        .file(
            "release-manifests/0000_50_img_00_ns.yaml",
            format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n{inc}")
                .as_bytes(),
        )
        .file(
            "release-manifests/0000_50_img_01_cm.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\n  annotations:\n{inc}data:\n  value: \"{value}\"\n"
            )
            .as_bytes(),
        );
    let image = layout.image(&[layer.tar_gz()], "linux/amd64");
    layout.add(image, None);
    let reference = format!("{host}/{repo_tag}");
    crane_push(dir.path(), &reference, false, None);
    let v: serde_json::Value =
        serde_json::from_str(&Cli::new().ok(&["plan", "-o", "json", &reference])).unwrap();
    v["image"]["pullSpec"].as_str().unwrap().to_string()
}

/// `minicvo apply IMAGE` records the image by digest, as the CVO records the release it
/// runs, in the real ClusterVersion: `desired.image` and the history entry's image; the mode
/// is chosen by that pull spec (the same image reconciles, another image of the same version
/// updates).
#[tokio::test]
async fn apply_of_an_image_records_its_pull_spec_by_digest_in_clusterversion() {
    use crate::support;
    // ClusterVersion `version` is shared with the other fixed-name tests.
    let _lock = support::fixed_names_lock().await;
    let admin = support::openshift::shared_plane_crds().await;
    let registry = Registry::crane();
    let ns = support::NamespaceGuard::adopt(support::unique_name("img-apply"));
    let version = "4.99.7";
    let a = push_small(&registry.host, "release:a", &ns, version, "a");
    let b = push_small(&registry.host, "release:b", &ns, version, "b");
    assert_ne!(a, b);
    let kc = std::env::var(support::KUBECONFIG_ENV).expect("MINICVO_TEST_KUBECONFIG");
    let cli = Cli::new();
    let apply = |image: &str, extra: &[&str]| {
        let mut args = vec!["apply", image, "--kubeconfig", kc.as_str(), "--no-progress"];
        args.extend_from_slice(extra);
        let (ok, out, err) = cli.run(&args);
        assert!(ok, "minicvo apply {image} failed:\n{out}\n{err}");
        err
    };
    let gvk = kube::api::GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let cvs: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        admin.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    let status = || async { cvs.get("version").await.unwrap().data["status"].clone() };

    // The tag is resolved to a digest; the digest is what the cluster records.
    apply(
        &format!("{}/release:a", registry.host),
        &["--mode", "updating"],
    );
    let s = status().await;
    assert_eq!(s["desired"]["image"], a.as_str(), "{s:#}");
    assert_eq!(s["desired"]["version"], version);
    assert_eq!(s["history"][0]["image"], a.as_str(), "{s:#}");
    assert_eq!(s["history"][0]["version"], version);
    assert_eq!(s["history"][0]["state"], "Completed");

    let err = apply(&a, &[]);
    assert!(
        err.contains(&format!(
            "mode: reconciling (the cluster already runs {version})"
        )),
        "{err}"
    );
    let err = apply(&format!("{}/release:b", registry.host), &[]);
    assert!(
        err.contains(&format!("mode: updating (the cluster runs {version})")),
        "{err}"
    );
    let s = status().await;
    assert_eq!(s["desired"]["image"], b.as_str(), "{s:#}");
    assert_eq!(s["history"][0]["image"], b.as_str(), "{s:#}");
    assert_eq!(s["history"][0]["state"], "Completed");
    assert_eq!(s["history"][1]["image"], a.as_str(), "{s:#}");
    support::openshift::assert_real_crds(&admin, "Default").await;
}

/// Docker archives written by crane plan like the payload directory: its default tarball
/// format (`manifest.json`, the config, compressed layers named by digest) and
/// `--format=legacy` (classic `docker save`: uncompressed `ID/layer.tar`, checked against the
/// config's diff_ids).
#[test]
fn docker_archives_written_by_crane_plan_like_their_directory() {
    let registry = Registry::crane();
    let _l = push_payload(&registry.host, "release:after", "mco-after-fix");
    let tmp = tempfile::tempdir().unwrap();
    let cli = Cli::new();
    let want = plan_json(&cli, shared_payload("mco-after-fix").to_str().unwrap());
    for (format, layer_suffix) in [("tarball", ".tar.gz"), ("legacy", "/layer.tar")] {
        let archive = tmp.path().join(format!("{format}.tar"));
        let out = std::process::Command::new(image_support::tool("crane"))
            .args(["pull", "--insecure", "--format", format])
            .arg(format!("{}/release:after", registry.host))
            .arg(&archive)
            .output()
            .expect("run crane pull");
        assert!(
            out.status.success(),
            "crane pull --format {format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A docker archive: manifest.json at the top naming the layer files, no OCI index.
        let names: Vec<String> = tar::Archive::new(std::fs::File::open(&archive).unwrap())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(names.iter().any(|n| n == "manifest.json"), "{names:?}");
        assert!(!names.iter().any(|n| n == "index.json"), "{names:?}");
        assert!(
            names.iter().any(|n| n.ends_with(layer_suffix)),
            "{format}: {names:?}"
        );
        let got = plan_json(&cli, &format!("docker-archive:{}", archive.display()));
        assert_eq!(got, want, "{format}");
    }
}
