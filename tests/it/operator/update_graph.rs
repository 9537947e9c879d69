//! The update graph through `minicvo operator`, with a real HTTP update service started here,
//! the real ClusterVersion CRD and a real registry: `RetrievedUpdates` before an upstream and a
//! channel are set, the updates listed once they are (recommended, and conditional with their
//! `Recommended` condition), every failure of the service with the CVO's reason and the
//! operator still running after hostile graphs, a version not in the graph refused, a version in
//! it resolved to its image (refused unsigned, applied with `force`); `minicvo status` on the
//! same cluster, as text (the wording of `oc adm upgrade`) and JSON. Also the fetch cost of a
//! realistic graph.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::images::push_sample;
use super::support_op::{
    Operator, condition, fresh_cluster, history_is, patch_cv, payloads, simulator, wait_cv,
};
use super::update_service::UpdateService;
use super::{INSTALL_LIMIT, written};
use crate::support;

const CHANNEL: &str = "stable-4.14";

fn node(version: &str, image: &str) -> Value {
    json!({"version": version, "payload": image, "metadata": {
        "io.openshift.upgrades.graph.release.channels": "stable-4.14,fast-4.14",
        "url": format!("https://errata.example/{version}"),
    }})
}

fn fake_image(version: &str) -> String {
    format!("quay.example/openshift/release:{version}")
}

/// 4.13.0 → 4.13.1 and → 4.14.0 (the registry's image of the `new` sample); conditional:
/// → 4.14.1 (a PromQL risk, not evaluated here) and → 4.14.2 (a risk that always applies).
fn graph(new_image: &str) -> Value {
    json!({
        "nodes": [
            node("4.13.0", &fake_image("4.13.0")),
            node("4.13.1", &fake_image("4.13.1")),
            node("4.14.0", new_image),
            node("4.14.1", &fake_image("4.14.1")),
            node("4.14.2", &fake_image("4.14.2")),
        ],
        "edges": [[0, 1], [0, 2]],
        "conditionalEdges": [
            {"edges": [{"from": "4.13.0", "to": "4.14.1"}], "risks": [{
                "name": "NeedsMetrics", "message": "Only some clusters are affected.",
                "url": "https://bugs.example/1",
                "matchingRules": [{"type": "PromQL", "promql": {"promql": "group(cluster_version)"}}]}]},
            {"edges": [{"from": "4.13.0", "to": "4.14.2"}], "risks": [{
                "name": "AlwaysBroken", "message": "Every cluster is affected.",
                "url": "https://bugs.example/2", "matchingRules": [{"type": "Always"}]}]},
        ],
    })
}

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn status_cli(extra: &[&str]) -> support::cli::Run {
    let kc = support::apply::kubeconfig().display().to_string();
    let mut args = vec!["status", "--kubeconfig", kc.as_str()];
    args.extend_from_slice(extra);
    let run = support::cli::minicvo(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run
}

/// With `MINICVO_OC_UPGRADE` naming a program that runs `oc adm upgrade` on a ClusterVersion
/// JSON file (writing FILE.stdout and FILE.stderr; `hack/oc-upgrade/`), what real oc prints
/// for `cv` must be what `minicvo status` printed.
fn same_as_oc(cv: &Value, include_not_recommended: bool, run: &support::cli::Run) {
    let Some(oc) = std::env::var_os("MINICVO_OC_UPGRADE") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cv.json");
    std::fs::write(&file, serde_json::to_vec(cv).unwrap()).unwrap();
    let mut c = std::process::Command::new(oc);
    c.arg(&file);
    if include_not_recommended {
        c.arg("--include-not-recommended");
    }
    assert!(c.status().unwrap().success());
    let read =
        |ext: &str| std::fs::read_to_string(dir.path().join(format!("cv.json.{ext}"))).unwrap();
    assert_eq!(
        support::cli::stable(&read("stdout")),
        run.stdout,
        "oc's stdout"
    );
    assert_eq!(
        support::cli::stable(&read("stderr")),
        run.stderr,
        "oc's stderr"
    );
    eprintln!(
        "oc adm upgrade (include-not-recommended: {include_not_recommended}) printed the same"
    );
}

fn retrieved(cv: &Value) -> (String, String, String) {
    condition(cv, "RetrievedUpdates")
}

fn versions(list: &Value, pointer: &str) -> Vec<String> {
    list.as_array()
        .map(|l| {
            l.iter()
                .filter_map(|u| u.pointer(pointer).and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Waits for `RetrievedUpdates` with `reason` (empty: `True`).
async fn wait_retrieved(client: &kube::Client, reason: &str) -> Value {
    wait_cv(
        client,
        &format!("RetrievedUpdates {reason:?}"),
        Duration::from_secs(30),
        |cv| {
            let (s, r, _) = retrieved(cv);
            if reason.is_empty() {
                s == "True"
            } else {
                r == reason
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_update_graph_lists_updates_resolves_a_version_and_reports_every_failure() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    // No ClusterVersion yet: `status` says so and exits 1 (oc: "No cluster version
    // information available").
    let kc = support::apply::kubeconfig().display().to_string();
    let run = support::cli::minicvo(&["status", "--kubeconfig", &kc]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .starts_with("error: No cluster version information available"),
        "{}",
        run.stderr
    );
    let registry = crate::support::image::Registry::crane();
    let _pushed = push_sample(&registry.host, "release:new", "new");
    let new_image = format!("{}/release:new", registry.host);
    let service = UpdateService::start().await;
    service.serve(200, body(&graph(&new_image)));
    let sim = simulator("old").await;
    // Only 4.13.0 is on disk: 4.14.0 can only come through the graph.
    let mut op = Operator::start(
        "graph",
        &payloads(&["old"]),
        &["--no-leader-elect", "--no-cache"],
    );
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;

    // No upstream (the default) and no channel: the CVO's default update service, which is
    // not asked without a channel (NoChannel), and `status` says so as oc does.
    let cv = wait_retrieved(&client, "NoChannel").await;
    assert_eq!(
        retrieved(&cv),
        (
            "False".into(),
            "NoChannel".into(),
            "The update channel has not been configured.".into()
        )
    );
    assert!(
        cv["status"]["availableUpdates"].is_null(),
        "{:#}",
        cv["status"]
    );
    let run = status_cli(&[]);
    assert_eq!(run.stdout, "Cluster version is 4.13.0\n\n");
    assert_eq!(
        run.stderr,
        "warning: Cannot display available updates:\n  Reason: NoChannel\n  Message: The update channel has not been configured.\n\n"
    );
    same_as_oc(&cv, false, &run);

    // An upstream without a channel: still NoChannel, and the service is not asked.
    patch_cv(&json!({"spec": {"upstream": service.url}}).to_string());
    super::more_passes(&op, "reconciling", 1.0).await;
    let cv = wait_retrieved(&client, "NoChannel").await;
    assert_eq!(
        retrieved(&cv).2,
        "The update channel has not been configured."
    );
    assert!(service.asked().is_empty(), "asked without a channel");

    // A channel: the graph is fetched and the updates listed.
    let set = Instant::now();
    patch_cv(&json!({"spec": {"channel": CHANNEL}}).to_string());
    let cv = wait_retrieved(&client, "").await;
    eprintln!(
        "channel set → availableUpdates written: {:.2}s",
        set.elapsed().as_secs_f64()
    );
    let id = cv["spec"]["clusterID"].as_str().unwrap();
    let asked = service.asked().last().cloned().unwrap();
    assert_eq!(
        asked.target,
        format!(
            "/graph?arch={}&channel={CHANNEL}&id={id}&version=4.13.0",
            minicvo::cvo::status::go_arch()
        )
    );
    assert_eq!(asked.accept, "application/json");
    let status = &cv["status"];
    assert_eq!(
        status["availableUpdates"],
        json!([
            {"version": "4.14.0", "image": new_image, "url": "https://errata.example/4.14.0", "channels": ["fast-4.14", "stable-4.14"]},
            {"version": "4.13.1", "image": fake_image("4.13.1"), "url": "https://errata.example/4.13.1", "channels": ["fast-4.14", "stable-4.14"]},
        ]),
        "{status:#}"
    );
    assert_eq!(
        versions(&status["conditionalUpdates"], "/release/version"),
        ["4.14.2", "4.14.1"]
    );
    let recommended = |i: usize| {
        let c = &status["conditionalUpdates"][i]["conditions"][0];
        (c["type"].clone(), c["status"].clone(), c["reason"].clone())
    };
    assert_eq!(
        recommended(0),
        (json!("Recommended"), json!("False"), json!("AlwaysBroken"))
    );
    assert_eq!(
        recommended(1),
        (
            json!("Recommended"),
            json!("Unknown"),
            json!("EvaluationFailed")
        )
    );
    assert_eq!(
        status["conditionalUpdates"][1]["risks"][0]["name"],
        "NeedsMetrics"
    );
    // `status.desired` takes the graph node's URL and channels (the CVO's mergeReleaseMetadata).
    assert_eq!(
        status["desired"]["channels"],
        json!(["fast-4.14", "stable-4.14"])
    );
    assert_eq!(status["desired"]["url"], "https://errata.example/4.13.0");

    // `minicvo status`: oc adm upgrade's text, with and without the updates not recommended.
    let table = format!(
        "Cluster version is 4.13.0\n\nUpstream: {}\nChannel: {CHANNEL} (available channels: fast-4.14, stable-4.14)\n\nRecommended updates:\n\n  VERSION     IMAGE\n  4.14.0      {new_image}\n  4.13.1      {}\n",
        service.url,
        fake_image("4.13.1")
    );
    let run = status_cli(&[]);
    assert_eq!(
        run.stdout,
        format!(
            "{table}\nAdditional updates which are not recommended, or where the recommended status is \"Unknown\", for your cluster configuration are available, to view those re-run the command with --include-not-recommended.\n"
        )
    );
    assert_eq!(run.stderr, "");
    same_as_oc(&cv, false, &run);
    let run = status_cli(&["--include-not-recommended"]);
    assert_eq!(
        run.stdout,
        format!(
            "{table}\nUpdates with known issues:\n\n  Version: 4.14.2\n  Image: {}\n  Reason: AlwaysBroken\n  Message: Every cluster is affected. https://bugs.example/2\n\n  Version: 4.14.1\n  Image: {}\n  Reason: EvaluationFailed\n  Message: Could not evaluate exposure to update risk NeedsMetrics ({})\n    NeedsMetrics description: Only some clusters are affected.\n    NeedsMetrics URL: https://bugs.example/1\n",
            fake_image("4.14.2"),
            fake_image("4.14.1"),
            minicvo::update_graph::risks::NO_PROMQL
        )
    );
    same_as_oc(&cv, true, &run);
    let run = status_cli(&["-o", "json"]);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["version"], "4.13.0");
    assert_eq!(
        (doc["channel"].as_str(), doc["upstream"].as_str()),
        (Some(CHANNEL), Some(service.url.as_str()))
    );
    assert_eq!(
        versions(&doc["recommendedUpdates"], "/version"),
        ["4.14.0", "4.13.1"]
    );
    assert_eq!(
        doc["conditionalUpdates"][1]["recommended"]["status"],
        "Unknown"
    );
    assert_eq!(doc["retrievedUpdates"]["status"], "True");
    assert_eq!(
        doc["availableChannels"],
        json!(["fast-4.14", "stable-4.14"])
    );
    assert_eq!(doc["progressing"]["message"], "Cluster version is 4.13.0");

    // The service fails: each failure has the CVO's reason, the operator keeps running. A
    // failed refresh keeps the updates it had (the CVO's cache), a version not in the graph
    // clears them.
    let good = body(&graph(&new_image));
    let mut missing_current = graph(&new_image);
    missing_current["nodes"][0]["version"] = json!("4.12.0");
    let mut bad_edge = graph(&new_image);
    bad_edge["edges"] = json!([[0, 1], [0, 99]]);
    let deep = format!(
        r#"{{"nodes": [{{"version": "4.13.0", "payload": "x", "metadata": {{"a": {}{}}}}}]}}"#,
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let huge = vec![b' '; 17 * 1024 * 1024];
    let failures: Vec<(u16, Vec<u8>, &str, String, bool)> = vec![
        (
            500,
            good.clone(),
            "ResponseFailed",
            "unexpected HTTP status: 500 Internal Server Error".into(),
            true,
        ),
        (
            200,
            b"{\"nodes\": [".to_vec(),
            "ResponseInvalid",
            "EOF while parsing".into(),
            true,
        ),
        (
            200,
            br#"{"nodes": [{"version": 4.13, "payload": 7}], "edges": "many"}"#.to_vec(),
            "ResponseInvalid",
            "invalid type".into(),
            true,
        ),
        (
            200,
            deep.into_bytes(),
            "ResponseInvalid",
            "recursion limit exceeded".into(),
            true,
        ),
        (
            200,
            huge,
            "ResponseFailed",
            "the graph is larger than 16 MiB".into(),
            true,
        ),
        (
            200,
            body(&bad_edge),
            "ResponseInvalid",
            "edge [0, 99] leads to no node (the graph has 5)".into(),
            true,
        ),
        (
            200,
            body(&missing_current),
            "VersionNotFound",
            format!(
                "currently reconciling cluster version 4.13.0 not found in the \"{CHANNEL}\" channel"
            ),
            false,
        ),
    ];
    for (code, answer, reason, message, keeps) in failures {
        let started = Instant::now();
        service.serve(code, answer);
        let cv = wait_retrieved(&client, reason).await;
        let (s, _, m) = retrieved(&cv);
        assert_eq!(s, "False");
        assert!(
            m.starts_with("Unable to retrieve available updates: ") && m.contains(&message),
            "{reason}: {m}"
        );
        assert_eq!(
            !cv["status"]["availableUpdates"].is_null(),
            keeps,
            "{reason}: {:#}",
            cv["status"]
        );
        assert!(
            op.child.try_wait().unwrap().is_none(),
            "the operator stopped on {reason}\n{}",
            op.log()
        );
        eprintln!(
            "{reason} reported {:.2}s after the service changed",
            started.elapsed().as_secs_f64()
        );
        service.serve(200, good.clone());
        wait_retrieved(&client, "").await;
    }
    // An update service that is not there: RemoteFailed; the query changed, so nothing is kept.
    let closed = format!("http://127.0.0.1:{}/graph", super::support_op::free_port());
    patch_cv(&json!({"spec": {"upstream": closed}}).to_string());
    let cv = wait_retrieved(&client, "RemoteFailed").await;
    let m = retrieved(&cv).2;
    assert!(
        m.starts_with(&format!(
            "Unable to retrieve available updates: Get \"{closed}?arch="
        )) && m.to_lowercase().contains("connection refused"),
        "{m}"
    );
    assert!(cv["status"]["availableUpdates"].is_null());
    let run = status_cli(&[]);
    assert!(
        run.stderr
            .starts_with("warning: Cannot display available updates:\n  Reason: RemoteFailed\n"),
        "{}",
        run.stderr
    );
    patch_cv(&json!({"spec": {"upstream": service.url}}).to_string());
    wait_retrieved(&client, "").await;

    // A version the graph does not offer: refused as the CVO refuses it, nothing written.
    let before = written(&client).await;
    patch_cv(&json!({"spec": {"desiredUpdate": {"version": "4.99.0"}}}).to_string());
    let cv = wait_cv(&client, "Invalid=True", Duration::from_secs(30), |cv| {
        condition(cv, "Invalid").0 == "True"
    })
    .await;
    assert_eq!(
        condition(&cv, "Invalid"),
        (
            "True".into(),
            "InvalidClusterVersion".into(),
            "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"4.99.0\": when image is empty the update must be an available update".into()
        )
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        written(&client).await,
        before,
        "objects written for a refused version"
    );
    let cv = super::support_op::cluster_version(&client).await.unwrap();
    assert!(
        history_is(&cv, 0, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );

    // A version the graph offers: resolved to its image, which is verified as any image is;
    // unsigned (and named by tag) it is refused, as the CVO refuses it.
    patch_cv(&json!({"spec": {"desiredUpdate": {"version": "4.14.0"}}}).to_string());
    let cv = wait_cv(
        &client,
        "the resolved image refused",
        Duration::from_secs(30),
        |cv| {
            let (status, reason, message) = condition(cv, "ReleaseAccepted");
            status == "False" && reason == "RetrievePayload" && message.contains(&new_image)
        },
    )
    .await;
    assert!(
        condition(&cv, "ReleaseAccepted")
            .2
            .ends_with("failure=The update cannot be verified: verification is not possible"),
        "{:#}",
        cv["status"]["conditions"]
    );
    // With force: pulled and applied.
    let sim = simulator("new").await;
    let patched = Instant::now();
    patch_cv(&json!({"spec": {"desiredUpdate": {"version": "4.14.0", "force": true}}}).to_string());
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    eprintln!(
        "desiredUpdate 4.14.0 by version → Completed: {:.2}s",
        patched.elapsed().as_secs_f64()
    );
    sim.stop().await;
    assert_eq!(
        cv["status"]["history"][0]["image"],
        new_image.as_str(),
        "{:#}",
        cv["status"]["history"]
    );
    assert_eq!(cv["status"]["desired"]["image"], new_image.as_str());
    assert_eq!(
        condition(&cv, "Invalid").0,
        "",
        "Invalid is removed once a release is accepted"
    );
    // The graph is asked again from the new version (no updates from it in this graph).
    let cv = wait_cv(
        &client,
        "updates from 4.14.0",
        Duration::from_secs(30),
        |cv| retrieved(cv).0 == "True" && cv["status"]["availableUpdates"].is_null(),
    )
    .await;
    assert!(
        cv["status"].get("conditionalUpdates").is_none(),
        "{:#}",
        cv["status"]
    );
    assert!(
        service
            .asked()
            .iter()
            .any(|a| a.target.ends_with("&version=4.14.0"))
    );

    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
    let log = op.log();
    let fetched = log
        .lines()
        .find(|l| l.contains("update graph http://"))
        .unwrap_or_else(|| panic!("no fetch logged\n{log}"));
    eprintln!("{fetched}");
    support::openshift::assert_real_crds(&client, "Default").await;
}

/// A graph the size of a real channel's: 1000 releases (10 minors of 100), each with edges to
/// the next 40, and 60 conditional edge groups of 20 edges with PromQL risks.
fn realistic_graph() -> Value {
    let versions: Vec<String> = (10..20)
        .flat_map(|minor| (0..100).map(move |patch| format!("4.{minor}.{patch}")))
        .collect();
    let nodes: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let minor: u32 = v.split('.').nth(1).unwrap().parse().unwrap();
            let channels: Vec<String> = ["candidate", "fast", "stable", "eus"]
                .iter()
                .flat_map(|c| [format!("{c}-4.{minor}"), format!("{c}-4.{}", minor + 1)])
                .collect();
            json!({"version": v, "payload": format!("quay.io/openshift-release-dev/ocp-release@sha256:{i:064x}"),
                   "metadata": {"io.openshift.upgrades.graph.release.channels": channels.join(","),
                                "io.openshift.upgrades.graph.release.manifestref": format!("sha256:{:064x}", minor),
                                "url": format!("https://access.redhat.com/errata/RHBA-2026:{}", v.len() * 13)}})
        })
        .collect();
    let n = versions.len();
    let edges: Vec<Value> = (0..n)
        .flat_map(|i| (i + 1..(i + 41).min(n)).map(move |j| json!([i, j])))
        .collect();
    let conditional: Vec<Value> = (0..60)
        .map(|g| {
            let edges: Vec<Value> = (0..20)
                .map(|k| json!({"from": versions[(g * 15 + k) % n], "to": versions[(g * 15 + k + 30) % n]}))
                .collect();
            json!({"edges": edges, "risks": [{"name": format!("Risk{g}"), "url": format!("https://issues.redhat.com/browse/OCPBUGS-{g}"),
                "message": "Clusters with this configuration may lose access to their storage after the update.",
                "matchingRules": [{"type": "PromQL", "promql": {"promql": "group(cluster_operator_conditions{name=\"aro\"}) or 0 * group(cluster_operator_conditions)"}}]}]})
        })
        .collect();
    json!({"nodes": nodes, "edges": edges, "conditionalEdges": conditional})
}

#[tokio::test]
async fn graph_fetch_cost_of_a_realistic_graph() {
    let service = UpdateService::start().await;
    let graph = body(&realistic_graph());
    service.serve(200, graph.clone());
    let query = minicvo::update_graph::status::Query {
        upstream: service.url.clone(),
        channel: "stable-4.15".into(),
        id: "1d3c4a27-6a4f-4b2b-9c1e-2b3f5d1c0a9e".into(),
        arch: "amd64".into(),
        version: semver::Version::new(4, 15, 50),
        to_multi: false,
    };
    let mut fetches = Vec::new();
    let mut parses = Vec::new();
    let mut found = None;
    for _ in 0..5 {
        let f = minicvo::operator::updates::fetch::fetch(&query, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(f.body.len(), graph.len());
        fetches.push(f.elapsed.as_secs_f64() * 1000.0);
        let t = std::time::Instant::now();
        let u = minicvo::update_graph::cincinnati::updates(&f.body, &query.version, &query.channel)
            .unwrap();
        let r = minicvo::update_graph::status::Retrieved::success(&u, false);
        parses.push(t.elapsed().as_secs_f64() * 1000.0);
        found = Some((u.updates.len(), u.conditional.len(), r.updates.len()));
    }
    fetches.sort_by(f64::total_cmp);
    parses.sort_by(f64::total_cmp);
    let (edges, conditional, listed) = found.unwrap();
    eprintln!(
        "realistic graph: {} bytes ({:.1} MiB), 1000 nodes, 39180 edges, 60 conditional groups; fetch median {:.1} ms (min {:.1}), parse + evaluate median {:.1} ms (min {:.1}); {edges} edges and {conditional} conditional updates from 4.15.50, {listed} listed",
        graph.len(),
        graph.len() as f64 / 1048576.0,
        fetches[2],
        fetches[0],
        parses[2],
        parses[0]
    );
    // 40 edges from 4.15.50, one of them also conditional (the conditional one wins); its
    // PromQL risk cannot be evaluated, so only the 39 unconditional ones are listed.
    assert_eq!((edges, conditional, listed), (39, 1, 39));
    // (Timings are reported, not asserted: BENCHMARKS.md holds them.)
}

fn query(upstream: &str) -> minicvo::update_graph::status::Query {
    minicvo::update_graph::status::Query {
        upstream: upstream.to_string(),
        channel: CHANNEL.into(),
        id: "1d3c4a27-6a4f-4b2b-9c1e-2b3f5d1c0a9e".into(),
        arch: "amd64".into(),
        version: semver::Version::new(4, 13, 0),
        to_multi: false,
    }
}

#[tokio::test]
async fn a_service_that_stalls_is_given_up_after_the_timeout() {
    let timeout = Duration::from_millis(500);
    let service = UpdateService::start().await;
    service.serve(200, body(&graph("x")));
    service.stall(false);
    let started = Instant::now();
    let e = minicvo::operator::updates::fetch::fetch(&query(&service.url), timeout)
        .await
        .unwrap_err();
    assert_eq!(e.reason, "RemoteFailed", "{e}");
    assert!(e.message.ends_with("no answer within 500ms"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    service.stall(true);
    let started = Instant::now();
    let e = minicvo::operator::updates::fetch::fetch(&query(&service.url), timeout)
        .await
        .unwrap_err();
    assert_eq!(e.reason, "ResponseFailed", "{e}");
    assert_eq!(e.message, "the body did not arrive within 500ms");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}
