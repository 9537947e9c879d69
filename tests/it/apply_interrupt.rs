//! Ctrl-C during a ClusterOperator wait: no new work starts, the wait ends, the summary is
//! still printed, and `minicvo apply` exits 130.

use crate::support;
use crate::support::apply as apply_util;

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[tokio::test]
async fn ctrl_c_stops_the_run_and_exits_130() {
    let admin = support::openshift::shared_plane_crds().await;
    let co = support::unique_name("never");
    let ns = support::unique_name("after-int");
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(
        dir.path(),
        "5.0.0",
        &[
            (
                "0000_50_never_00_clusteroperator.yaml".into(),
                apply_util::cluster_operator(&co, "5.0.0"),
            ),
            (
                "0000_60_next_00_namespace.yaml".into(),
                apply_util::namespace(&ns),
            ),
        ],
    );
    let mut child = apply_util::apply_command(dir.path(), &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let started = Instant::now();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "apply ended before waiting: {seen}"
        );
        seen.push_str(&line);
        if line.contains(&format!("waiting on clusteroperator {co}")) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{seen}");
    }
    let interrupted_at = Instant::now();
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    let took = interrupted_at.elapsed();
    assert_eq!(status.code(), Some(130), "stderr: {seen}{rest}");
    assert!(took < Duration::from_secs(10), "took {took:?} to stop");
    assert!(rest.contains("interrupted"), "{rest}");
    let report: Value = serde_json::from_str(&stdout).expect("the summary is still printed");
    assert_eq!(report["stopped"], "interrupted");
    assert_eq!(report["counts"]["interrupted"], 1);
    assert_eq!(report["counts"]["notRun"], 1);
    assert_eq!(report["counts"]["failed"], 0);
    let ops = apply_util::operators(&admin);
    support::delete_quietly(&ops, &co).await;
    support::openshift::assert_real_crds(&admin, "Default").await;
}
