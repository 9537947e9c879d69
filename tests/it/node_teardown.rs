//! The plane with a node leaves nothing behind: a second plane with a node, started by this
//! test (two can run at once: their bridge, network, subnet and ports are their own), runs
//! pods and is crashed (every process SIGKILLed, its containers left running); the next
//! `start --nodes 1` cleans what it left, and a normal `stop` of that one leaves no process,
//! mount, bridge, CNI cache entry or directory either.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::cli::root;

/// `hack/testplane.sh ARGS` with the suite's tool dirs; returns stdout, panics on failure.
fn testplane(args: &[&str]) -> String {
    let mut c = Command::new("bash");
    c.arg(root().join("hack/testplane.sh")).args(args);
    for var in ["TESTPLANE_BIN", "TESTPLANE_NODE_BIN"] {
        let v = std::env::var(var)
            .unwrap_or_else(|_| panic!("{var} is not set; run through hack/test.sh"));
        c.env(var, v);
    }
    c.env_remove("TESTPLANE_WATCH_PID")
        .env_remove("TESTPLANE_NODES");
    let out = c.output().expect("bash runs");
    assert!(
        out.status.success(),
        "hack/testplane.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `export NAME=...` in `start`'s output.
fn export(env: &str, name: &str) -> String {
    env.lines()
        .find_map(|l| l.strip_prefix(&format!("export {name}=")))
        .unwrap_or_else(|| panic!("no {name} in {env}"))
        .trim_matches('\'')
        .to_string()
}

fn kubectl(kubeconfig: &str, args: &[&str]) {
    let bin = PathBuf::from(std::env::var("TESTPLANE_BIN").unwrap()).join("kubectl");
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What of plane `dir` is still there: processes naming it, mounts under it, its bridge, its
/// CNI cache entries, the directory.
fn left_of(dir: &str, bridge: &str, network: &str) -> Vec<String> {
    let mut left = Vec::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(p.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(dir) && !cmd.contains("testplane.sh") {
            left.push(format!(
                "process {}: {cmd}",
                p.file_name().to_string_lossy()
            ));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for m in mounts.lines().filter_map(|l| l.split(' ').nth(4)) {
        if m.starts_with(&format!("{dir}/")) {
            left.push(format!("mount {m}"));
        }
    }
    if Path::new("/sys/class/net").join(bridge).exists() {
        left.push(format!("bridge {bridge}"));
    }
    for f in std::fs::read_dir("/var/lib/cni/results")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = f.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{network}-")) {
            left.push(format!("CNI cache {name}"));
        }
    }
    if Path::new(dir).exists() {
        left.push(format!("directory {dir}"));
    }
    left
}

fn node_env(dir: &str) -> (String, String) {
    let env = std::fs::read_to_string(Path::new(dir).join("node/env")).expect("node/env");
    let get = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap()
            .to_string()
    };
    (get("NODE_BRIDGE"), get("NODE_NETWORK"))
}

#[tokio::test]
async fn a_crashed_plane_with_a_node_is_cleaned_by_the_next_start_and_stop_leaves_nothing() {
    tokio::task::spawn_blocking(|| {
        let first = testplane(&["start", "--nodes", "1"]);
        let dir = export(&first, "TESTPLANE_DIR");
        let kubeconfig = export(&first, "KUBECONFIG");
        let registry = export(&first, "TESTPLANE_REGISTRY");
        let (bridge, network) = node_env(&dir);
        kubectl(
            &kubeconfig,
            &[
                "create",
                "deployment",
                "p",
                "--image",
                &format!("{registry}/minicvo/pause:1"),
                "--replicas",
                "2",
            ],
        );
        kubectl(
            &kubeconfig,
            &[
                "wait",
                "--for=condition=Available",
                "deployment/p",
                "--timeout=60s",
            ],
        );

        // The crash: every process of the plane killed, its pods' containers left running.
        for c in [
            "kube-scheduler",
            "kubelet",
            "containerd",
            "registry",
            "kube-controller-manager",
            "kube-apiserver",
            "etcd",
        ] {
            let pid = std::fs::read_to_string(Path::new(&dir).join(format!("{c}.pid"))).unwrap();
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while left_of(&dir, &bridge, &network)
            .iter()
            .any(|l| l.contains("/bin/etcd "))
        {
            assert!(std::time::Instant::now() < deadline, "etcd did not die");
            std::thread::sleep(Duration::from_millis(50));
        }
        let crashed = left_of(&dir, &bridge, &network);
        assert!(
            crashed.iter().any(|l| l.starts_with("mount "))
                && crashed.iter().any(|l| l.starts_with("bridge ")),
            "the crash left nothing to clean, so this test proves nothing: {crashed:#?}"
        );

        let second = testplane(&["start", "--nodes", "1"]);
        let dir2 = export(&second, "TESTPLANE_DIR");
        let (bridge2, network2) = node_env(&dir2);
        let left = left_of(&dir, &bridge, &network);
        assert!(
            left.is_empty(),
            "the next start left the crashed plane's: {left:#?}"
        );

        testplane(&["stop", &dir2]);
        let left = left_of(&dir2, &bridge2, &network2);
        assert!(left.is_empty(), "stop left: {left:#?}");
    })
    .await
    .unwrap();
}
