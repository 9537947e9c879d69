//! Broken payloads are refused before any request.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_payloads_send_no_request_to_the_api_server() {
    let tmp = tempfile::tempdir().unwrap();
    let (proxy, kc) = proxy(plane(Scenario::Faults), FaultMix::none(), tmp.path()).await;
    let mut failures = Vec::new();
    let mut table = vec![
        "| case | exit | connections | requests |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for case in bad_cases::CASES {
        let (dir, _keep) = bad_cases::materialize(case);
        let before = proxy.stats.counts();
        let kc = kc.clone();
        let out = tokio::task::spawn_blocking(move || {
            bad_cases::run(
                &[
                    "apply",
                    dir.to_str().unwrap(),
                    "--kubeconfig",
                    kc.to_str().unwrap(),
                ],
                &[],
                Duration::from_secs(20),
            )
        })
        .await
        .unwrap();
        let counts = proxy.stats.counts().since(&before);
        table.push(format!(
            "| {} | {:?} | {} | {} |",
            case.name, out.code, counts.connections, counts.requests
        ));
        let expected = format!("error: {}\n", case.message);
        if out.code != Some(1) || out.stderr != expected || counts.connections + counts.requests > 0
        {
            failures.push(format!(
                "{}: exit {:?}, {} connections, {} requests\n  expected {expected:?}\n  actual   {:?}",
                case.name, out.code, counts.connections, counts.requests, out.stderr
            ));
        }
    }
    // The control: a valid payload through the same proxy does reach the server.
    let dir = tempfile::tempdir().unwrap();
    let payload = fault_support::write_synthetic(dir.path(), "rel-control", "1.0.0");
    let before = proxy.stats.counts();
    let run = apply_async(
        &payload,
        &kc,
        &["--dry-run", "server", "--no-cluster-version"],
    )
    .await;
    let counts = proxy.stats.counts().since(&before);
    assert!(
        counts.requests > 0,
        "a valid payload sent no request either: {}",
        run.stderr
    );
    eprintln!("\n{}\n", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
