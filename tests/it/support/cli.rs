//! Running the built `minicvo` binary for CLI tests, with one place that makes output stable
//! for snapshots (absolute paths and timings filtered).

use std::path::PathBuf;

/// The crate root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Exit code, stdout and stderr of one run.
pub struct Run {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// `minicvo ARGS` from the crate root, with colours off and `RUST_LOG` unset, ready to run or
/// spawn (e.g. a background `minicvo simulate`): the one way the tests start the binary.
pub fn command(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_minicvo"));
    c.current_dir(root())
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .args(args);
    c
}

/// Runs `minicvo ARGS` (see [`command`]) to completion.
pub fn minicvo(args: &[&str]) -> Run {
    let out = command(args).output().expect("runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: stable(&String::from_utf8_lossy(&out.stdout)),
        stderr: stable(&String::from_utf8_lossy(&out.stderr)),
    }
}

/// Output with the crate root and temp dirs replaced by placeholders and durations by `[T]`.
pub fn stable(text: &str) -> String {
    let root = root().display().to_string();
    let tmp = std::env::temp_dir().display().to_string();
    let text = text.replace(&root, "[ROOT]").replace(&tmp, "[TMP]");
    let durations = regex::Regex::new(r"\b\d+(\.\d+)?(ms|s|µs)\b").expect("regex");
    durations.replace_all(&text, "[T]").into_owned()
}
