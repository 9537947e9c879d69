//! The Go reference programs of `hack/tools/` (Go's `text/template`, library-go's manifest
//! decoder): from the test plane's bin directory, where `hack/build-testplane.sh` builds them,
//! or built now with the installed Go toolchain. No Go is a failure, never a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The program `hack/tools/<name>`: `$TESTPLANE_BIN/<name>` when it is there, else built into
/// `dir`.
///
/// # Panics
/// If Go does not run or the build fails.
pub fn go_tool(name: &str, dir: &Path) -> PathBuf {
    if let Ok(bin) = std::env::var("TESTPLANE_BIN") {
        let p = Path::new(&bin).join(name);
        if p.is_file() {
            return p;
        }
    }
    let out = dir.join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("hack/tools")
        .join(name);
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&source)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-modcacherw")
        .status();
    match status {
        Ok(s) if s.success() => out,
        Ok(s) => panic!("go build of hack/tools/{name} failed ({s})"),
        Err(e) => panic!(
            "the Go toolchain is needed to build the reference program hack/tools/{name} and `go` does not run: {e}"
        ),
    }
}
