//! A private test control plane for the reliability tests: they restart its kube-apiserver and
//! apply the sample payload's fixed names, so they must not share the suite's plane.
//!
//! Started with `hack/testplane.sh start` (the same script and binaries as the shared plane),
//! watched by the script's watchdog so it stops when the test process exits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A running private plane.
pub struct Plane {
    /// Its work directory (`$TESTPLANE_DIR`).
    pub dir: PathBuf,
    /// `https://127.0.0.1:PORT` of its kube-apiserver.
    pub server: String,
    /// The kube-apiserver this process started by [`Plane::restart_apiserver`], if any.
    restarted: Mutex<Option<Child>>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

impl Plane {
    /// Starts a plane.
    ///
    /// # Panics
    /// If it does not start: a reliability test without a cluster is a failure, never a skip.
    pub fn start() -> Plane {
        let out = Command::new("bash")
            .arg(root().join("hack/testplane.sh"))
            .arg("start")
            .env("TESTPLANE_WATCH_PID", std::process::id().to_string())
            .stderr(Stdio::inherit())
            .output()
            .expect("hack/testplane.sh runs");
        assert!(
            out.status.success(),
            "hack/testplane.sh start failed ({})",
            out.status
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = stdout
            .lines()
            .find_map(|l| l.strip_prefix("export TESTPLANE_DIR="))
            .expect("TESTPLANE_DIR in the output")
            .trim()
            .to_string();
        let dir = PathBuf::from(dir);
        let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).unwrap();
        let server = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .expect("server in the kubeconfig")
            .to_string();
        Plane {
            dir,
            server,
            restarted: Mutex::new(None),
        }
    }

    /// The kubectl of the test plane's bin dir (the one this plane's kube-apiserver runs from).
    pub fn kubectl(&self) -> PathBuf {
        // The plane's kube-apiserver runs from the test plane's bin dir, next to kubectl.
        let pid = std::fs::read_to_string(self.dir.join("kube-apiserver.pid")).unwrap();
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
        let arg0 = cmdline.split(|&b| b == 0).next().unwrap();
        Path::new(std::str::from_utf8(arg0).unwrap()).with_file_name("kubectl")
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The CA, serving certificate and key of the kube-apiserver.
    pub fn pki(&self) -> (PathBuf, PathBuf, PathBuf) {
        let p = self.dir.join("pki");
        (
            p.join("ca.crt"),
            p.join("apiserver.crt"),
            p.join("apiserver.key"),
        )
    }

    /// A copy of the admin kubeconfig that points at `server` instead, written into `dir`.
    pub fn kubeconfig_for(&self, server: &str, dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let text = text.replace(
            &format!("server: {}", self.server),
            &format!("server: {server}"),
        );
        let path = dir.join("kubeconfig");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// An admin client that talks to the plane directly (not through a proxy).
    pub async fn client(&self) -> Client {
        let kc = Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }

    fn apiserver_pid(&self) -> u32 {
        std::fs::read_to_string(self.dir.join("kube-apiserver.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Kills the kube-apiserver (SIGKILL, as a crash), keeps it down for `down`, starts it
    /// again with the same command line and waits until it is ready. Returns how long it was
    /// unreachable.
    ///
    /// # Panics
    /// If it does not come back within 60 s.
    pub fn restart_apiserver(&self, down: Duration) -> Duration {
        let pid = self.apiserver_pid();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("apiserver running");
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let killed = Instant::now();
        assert!(
            Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
        let mut restarted = self.restarted.lock().unwrap();
        if let Some(mut ours) = restarted.take() {
            // Started by us: reap it.
            let _ = ours.wait();
        }
        // The plane script's kube-apiserver is not our child, so no wait() reports its exit:
        // check /proc until it is gone.
        while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // The outage itself (the fault under test), not a synchronisation.
        std::thread::sleep(down);
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("kube-apiserver.log"))
            .unwrap();
        let mut cmd = Command::new(&args[0]);
        cmd.args(&args[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().expect("kube-apiserver restarts");
        std::fs::write(
            self.dir.join("kube-apiserver.pid"),
            format!("{}\n", child.id()),
        )
        .unwrap();
        *restarted = Some(child);
        drop(restarted);
        let (ca, _, _) = self.pki();
        // Readiness is a server condition no event reports: ask /readyz with backoff.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut backoff = Duration::from_millis(20);
        loop {
            let ok = Command::new("curl")
                .args(["-fsS", "--max-time", "2", "--cacert"])
                .arg(&ca)
                .arg(format!("{}/readyz", self.server))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return killed.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver did not come back within 60 s"
            );
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }
}

impl Drop for Plane {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("hack/testplane.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
    }
}
