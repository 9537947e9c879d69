//! Release-image test support: local registries (crane's, and the distribution registry with
//! htpasswd auth) started on 127.0.0.1 and killed on drop, OCI image layouts built from
//! hand-made layer tars (including entries no well-behaved tool writes), and a counting
//! HTTP proxy.

#![allow(dead_code)]

pub mod layout;
pub mod proxy;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The bin dir of the test tools: `$TESTPLANE_BIN`, else what `hack/build-testplane.sh`
/// prints (a cache hit once built).
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("TESTPLANE_BIN").filter(|d| !d.is_empty()) {
            return PathBuf::from(d);
        }
        let out = Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/hack/build-testplane.sh"
            ))
            .stderr(Stdio::inherit())
            .output()
            .expect("run hack/build-testplane.sh");
        assert!(out.status.success(), "hack/build-testplane.sh failed");
        let text = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(text.lines().last().expect("bin dir").trim())
    })
    .clone()
}

/// A tool from the bin dir; a missing one fails the test (never a skip).
pub fn tool(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: run hack/build-testplane.sh",
        p.display()
    );
    p
}

/// A registry child process, killed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the child's stderr until a line contains `marker`; returns that line. The rest of
/// stderr is drained on a thread so the child never blocks.
fn wait_for_line(child: &mut Child, marker: &str) -> String {
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        let line = line.expect("read registry stderr");
        if line.contains(marker) {
            std::thread::spawn(move || for _ in lines {});
            return line;
        }
    }
    panic!("the registry exited before printing {marker:?}");
}

impl Registry {
    /// `crane registry serve` on a free loopback port (no auth).
    pub fn crane() -> Self {
        let mut child = Command::new(tool("crane"))
            .args(["registry", "serve", "--address", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start crane registry");
        let line = wait_for_line(&mut child, "serving on port");
        let port = line.rsplit(' ').next().unwrap().trim().to_string();
        Self {
            child,
            host: format!("127.0.0.1:{port}"),
            _dir: None,
        }
    }

    /// The distribution registry with htpasswd basic auth for `user`/`password`.
    pub fn with_auth(user: &str, password: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let line = Command::new(tool("htpasswd"))
            .args([user, password])
            .output()
            .expect("run htpasswd");
        assert!(line.status.success());
        std::fs::write(dir.path().join("htpasswd"), &line.stdout).unwrap();
        // A free port: bind, note, release (the registry takes it right after).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  inmemory: {{}}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: minicvo-test\nauth:\n  htpasswd:\n    realm: minicvo-test\n    path: {}\n",
            dir.path().join("htpasswd").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let mut child = Command::new(tool("registry"))
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the distribution registry");
        wait_for_line(&mut child, "listening on");
        Self {
            child,
            host: format!("127.0.0.1:{port}"),
            _dir: Some(dir),
        }
    }
}

/// A docker `config.json` with basic auth for `host`, in a new temporary directory.
pub fn docker_config(host: &str, user: &str, password: &str) -> tempfile::TempDir {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    std::fs::write(
        dir.path().join("config.json"),
        format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#),
    )
    .unwrap();
    dir
}

/// `crane push LAYOUT REF` (`--index` pushes the layout's index as a manifest list);
/// `docker_config` is the directory of a `config.json` for an auth registry.
pub fn crane_push(layout: &Path, reference: &str, index: bool, docker_config: Option<&Path>) {
    let mut cmd = Command::new(tool("crane"));
    cmd.arg("push").arg(layout).arg(reference).arg("--insecure");
    if index {
        cmd.arg("--index");
    }
    if let Some(d) = docker_config {
        cmd.env("DOCKER_CONFIG", d);
    }
    let out = cmd.output().expect("run crane push");
    assert!(
        out.status.success(),
        "crane push {reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The minicvo binary with a clean environment: its own cache and an empty home, so no
/// auth file of the machine is read.
pub struct Cli {
    /// The home and cache root.
    pub home: tempfile::TempDir,
}

impl Cli {
    /// A fresh home.
    pub fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// The image cache directory this CLI uses.
    pub fn cache_dir(&self) -> PathBuf {
        self.home.path().join("cache/minicvo/images")
    }

    /// Runs minicvo with `args`; returns (success, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = super::cli::command(args)
            .env("HOME", self.home.path())
            .env("XDG_CACHE_HOME", self.home.path().join("cache"))
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("DOCKER_CONFIG")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .output()
            .expect("run minicvo");
        (
            out.status.success(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    /// Runs minicvo, expecting success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "minicvo {args:?} failed:\n{err}");
        out
    }
}

/// A shared payload directory by name (`../shared/payloads/NAME`).
pub fn shared_payload(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/payloads")
        .join(name)
}

/// Parses JSON output and drops the keys naming images, so an image's output compares with
/// its directory's.
pub fn json_without_images(text: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    if let Some(o) = v.as_object_mut() {
        for k in ["image", "oldImage", "newImage"] {
            o.remove(k);
        }
        // upgrade-plan names each payload by its path, or an image by its pull spec.
        for k in ["old", "new"] {
            if let Some(p) = o.get_mut(k).and_then(|v| v.as_object_mut()) {
                p.remove("path");
            }
        }
    }
    v
}
