//! The corpus of broken payloads and the error each one must give, shared by the offline
//! bad-input test (`tests/bad_input.rs`) and the cluster test that counts requests at a proxy.
//!
//! Most cases are directories under `tests/bad_payloads/<case>/`. The few that cannot be files
//! in git (dangling links, a FIFO, a device, a non-UTF-8 file name, huge or very deep documents)
//! are built in a temporary directory when the test runs.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a case gets its payload directory.
#[derive(Clone, Copy)]
pub enum Source {
    /// `tests/bad_payloads/<name>/`.
    Committed,
    /// Built by this function in an empty directory.
    Generated(fn(&Path)),
}

/// One broken payload and the message it must give.
pub struct Case {
    /// The case name (directory name for committed cases).
    pub name: &'static str,
    /// Where the payload comes from.
    pub source: Source,
    /// The whole error, as printed after `error: ` (hint lines included).
    pub message: &'static str,
}

const fn committed(name: &'static str, message: &'static str) -> Case {
    Case {
        name,
        source: Source::Committed,
        message,
    }
}

const fn generated(name: &'static str, build: fn(&Path), message: &'static str) -> Case {
    Case {
        name,
        source: Source::Generated(build),
        message,
    }
}

const BAD: &str = "release-manifests/0000_20_example_01_bad.yaml";

/// Every case, committed and generated.
pub const CASES: &[Case] = &[
    committed(
        "api_version_is_a_list",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): apiVersion must be a string, found a list",
    ),
    committed(
        "bare_directory_with_broken_file",
        "0000_20_example_01_bad.yaml: document 0 (line 2): invalid YAML: unclosed bracket '[' (column 7)",
    ),
    committed(
        "broken_file_in_manifests_dir",
        "manifests/0000_00_cvo_01_bad.yaml: document 0 (line 4): invalid YAML: unclosed bracket '[' (column 9)",
    ),
    committed(
        "duplicate_object_in_one_file",
        "release-manifests/0000_20_example_01_bad.yaml: document 1 (line 9): duplicate object ConfigMap example/x, first defined in document 0 (line 1)",
    ),
    committed(
        "empty_name",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name",
    ),
    committed(
        "image_references_malformed",
        "release-manifests/image-references: invalid image references: not valid YAML at line 7: \"-\" is only valid inside a block (column 3)",
    ),
    committed(
        "image_references_missing_name",
        "release-manifests/image-references: invalid image references: missing metadata.name\nhint: name the ImageStream after the release version, 4.14.0",
    ),
    committed(
        "image_references_not_an_image_stream",
        "release-manifests/image-references: invalid image references: expected apiVersion image.openshift.io/v1 kind ImageStream, found \"v1\" \"ConfigMap\"",
    ),
    committed(
        "image_references_tags_not_a_list",
        "release-manifests/image-references: invalid image references: spec.tags must be a list",
    ),
    committed(
        "image_references_version_mismatch",
        "release-manifests/image-references: version from image-references (4.13.0) differs from release-metadata (4.14.0)",
    ),
    committed(
        "invalid_tagged_scalar",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 9): invalid YAML: not a valid integer (column 19)",
    ),
    committed(
        "invalid_utf8",
        "release-manifests/0000_20_example_01_bad.yaml: not valid UTF-8 text (byte 52)",
    ),
    committed(
        "json_duplicate_object",
        "release-manifests/0000_20_example_01_bad.json: document 1 (line 2): duplicate object ConfigMap x, first defined in document 0 (line 1)",
    ),
    committed(
        "json_stream_second_object_broken",
        "release-manifests/0000_20_example_01_bad.json: document 1 (line 2): invalid JSON: trailing comma (column 63)",
    ),
    committed(
        "json_trailing_garbage",
        "release-manifests/0000_20_example_01_bad.json: document 1 (line 1): invalid JSON: expected value (column 64)",
    ),
    committed(
        "kind_is_a_number",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): kind must be a string, found a number",
    ),
    committed(
        "list_document",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): expected an object with apiVersion, kind and metadata, found a list",
    ),
    committed(
        "malformed_yaml_bad_indentation",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 3): invalid YAML: mapping values are not allowed in this context (column 11)",
    ),
    committed(
        "malformed_yaml_unclosed_flow",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 3): invalid YAML: unclosed bracket '[' (column 18)",
    ),
    committed(
        "metadata_is_a_list",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): metadata must be an object, found a list",
    ),
    committed(
        "missing_api_version",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): object has no apiVersion: must contain kubernetes required fields apiVersion, kind and metadata.name",
    ),
    committed(
        "missing_kind",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): object has no kind: must contain kubernetes required fields apiVersion, kind and metadata.name",
    ),
    committed(
        "missing_metadata",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name",
    ),
    committed(
        "missing_name",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name",
    ),
    committed(
        "name_is_a_number",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): metadata.name must be a string, found a number",
    ),
    committed(
        "namespace_is_a_mapping",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): metadata.namespace must be a string, found an object",
    ),
    committed(
        "non_finite_float",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 9): invalid YAML: not a finite number (column 13)",
    ),
    committed(
        "null_document_before_malformed_one",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 8): invalid YAML: unclosed bracket '[' (column 18)",
    ),
    committed(
        "release_metadata_empty",
        "release-manifests/release-metadata: invalid release metadata: not valid JSON at line 1: EOF while parsing a value",
    ),
    committed(
        "release_metadata_invalid_semver",
        "release-manifests/release-metadata: invalid release metadata: version \"4.14\" is not SemVer: unexpected end of input while parsing minor version number",
    ),
    committed(
        "release_metadata_is_a_list",
        "release-manifests/release-metadata: invalid release metadata: expected a JSON object",
    ),
    committed(
        "release_metadata_missing_kind",
        "release-manifests/release-metadata: invalid release metadata: missing kind, expected \"cincinnati-metadata-v0\"",
    ),
    committed(
        "release_metadata_missing_version",
        "release-manifests/release-metadata: invalid release metadata: missing version",
    ),
    committed(
        "release_metadata_not_json",
        "release-manifests/release-metadata: invalid release metadata: not valid JSON at line 1: expected value (column 1)",
    ),
    committed(
        "release_metadata_previous_not_strings",
        "release-manifests/release-metadata: invalid release metadata: previous must be a list of strings",
    ),
    committed(
        "release_metadata_truncated",
        "release-manifests/release-metadata: invalid release metadata: not valid JSON at line 1: EOF while parsing a string (column 38)",
    ),
    committed(
        "release_metadata_version_is_a_number",
        "release-manifests/release-metadata: invalid release metadata: version must be a string, found 4.14",
    ),
    committed(
        "release_metadata_wrong_kind",
        "release-manifests/release-metadata: invalid release metadata: unrecognized kind \"cincinnati-metadata-v1\", expected \"cincinnati-metadata-v0\"",
    ),
    committed(
        "scalar_document",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): expected an object with apiVersion, kind and metadata, found a string",
    ),
    committed(
        "second_document_malformed",
        "release-manifests/0000_20_example_01_bad.yaml: document 1 (line 16): invalid YAML: unclosed bracket '{' (column 7)",
    ),
    committed(
        "secret_with_broken_data",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 8): invalid YAML: unclosed quote (column 13)",
    ),
    committed(
        "tab_indentation",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 9): invalid YAML: tabs disallowed within this context (block indentation) (column 2)",
    ),
    committed(
        "truncated_json",
        "release-manifests/0000_20_example_01_bad.json: document 0 (line 1): invalid JSON: EOF while parsing a string (column 68)",
    ),
    committed(
        "truncated_yaml_in_quoted_string",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 9): invalid YAML: unclosed quote (column 8)",
    ),
    committed(
        "unknown_alias",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 9): invalid YAML: alias references unknown anchor (column 8)",
    ),
    committed(
        "utf16_file",
        "release-manifests/0000_20_example_01_bad.yaml: not valid UTF-8 text (byte 0)",
    ),
    committed(
        "yaml_alias_bomb",
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 11): invalid YAML: aliases expand to too much data (column 16)\nhint: YAML aliases (*name) may not expand into a huge document (a YAML bomb)",
    ),
    generated(
        "dangling_symlink",
        |d| link(d, BAD, "/nonexistent/minicvo-bad-input"),
        "release-manifests/0000_20_example_01_bad.yaml: cannot read: No such file or directory (os error 2)",
    ),
    generated(
        "symlink_loop",
        |d| link(d, BAD, "0000_20_example_01_bad.yaml"),
        "release-manifests/0000_20_example_01_bad.yaml: cannot read: Too many levels of symbolic links (os error 40)",
    ),
    generated(
        "fifo",
        |d| {
            let status = Command::new("mkfifo")
                .arg(d.join(BAD))
                .status()
                .expect("mkfifo runs");
            assert!(status.success(), "mkfifo failed");
        },
        "release-manifests/0000_20_example_01_bad.yaml: cannot read: not a regular file (a FIFO)",
    ),
    generated(
        "endless_device",
        |d| link(d, BAD, "/dev/zero"),
        "release-manifests/0000_20_example_01_bad.yaml: cannot read: not a regular file (a character device)",
    ),
    generated(
        "dangling_release_metadata",
        |d| {
            fs::remove_file(d.join("release-manifests/release-metadata")).unwrap();
            link(
                d,
                "release-manifests/release-metadata",
                "/nonexistent/minicvo",
            );
        },
        "release-manifests/release-metadata: cannot read: No such file or directory (os error 2)",
    ),
    generated(
        "release_metadata_is_a_directory",
        |d| {
            fs::remove_file(d.join("release-manifests/release-metadata")).unwrap();
            fs::create_dir(d.join("release-manifests/release-metadata")).unwrap();
        },
        "release-manifests/release-metadata: cannot read: not a regular file (a directory)",
    ),
    generated(
        "dangling_image_references",
        |d| {
            link(
                d,
                "release-manifests/image-references",
                "/nonexistent/minicvo",
            )
        },
        "release-manifests/image-references: cannot read: No such file or directory (os error 2)",
    ),
    generated(
        "non_utf8_file_name",
        |d| {
            use std::os::unix::ffi::OsStrExt as _;
            let name = std::ffi::OsStr::from_bytes(b"0000_20_example_01_bad\xff.yaml");
            fs::write(d.join("release-manifests").join(name), GOOD).unwrap();
        },
        "release-manifests/0000_20_example_01_bad\u{fffd}.yaml: cannot read: file name is not valid UTF-8\nhint: rename the file",
    ),
    generated(
        "huge_scalar_50mb",
        |d| {
            let text = format!("{GOOD_HEAD}data:\n  blob: {}\n", "a".repeat(50_000_000));
            fs::write(d.join(BAD), text).unwrap();
        },
        "release-manifests/0000_20_example_01_bad.yaml: cannot read: file is larger than 16 MiB, the most the loader reads",
    ),
    generated(
        "object_larger_than_the_apiserver_accepts",
        |d| {
            let text = format!("{GOOD_HEAD}data:\n  blob: {}\n", "a".repeat(4 << 20));
            fs::write(d.join(BAD), text).unwrap();
        },
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1): object is larger than 3 MiB as JSON, more than the kube-apiserver accepts in one request",
    ),
    generated(
        "deep_yaml_100000",
        |d| {
            let n = 100_000;
            let text = format!("{GOOD_HEAD}data: {}{}\n", "[".repeat(n), "]".repeat(n));
            fs::write(d.join(BAD), text).unwrap();
        },
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 8): invalid YAML: nested too deeply (at most 512 levels, 255 inside [ ] or { }) (column 262)",
    ),
    generated(
        "deep_yaml_block_600",
        |d| {
            let mut text = format!("{GOOD_HEAD}data:\n");
            for i in 1..=600 {
                text.push_str(&" ".repeat(i));
                text.push_str("k:\n");
            }
            fs::write(d.join(BAD), text).unwrap();
        },
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 520): invalid YAML: nested more than 512 levels deep (column 513)",
    ),
    generated(
        "deep_json_100000",
        |d| {
            let n = 100_000;
            let text = format!(
                "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"x\"}},\"data\":{}{}}}\n",
                "[".repeat(n),
                "]".repeat(n)
            );
            fs::write(
                d.join("release-manifests/0000_20_example_01_bad.json"),
                text,
            )
            .unwrap();
        },
        "release-manifests/0000_20_example_01_bad.json: document 0 (line 1): invalid JSON: nested too deeply (at most 128 levels) (column 196)",
    ),
    generated(
        "too_many_values",
        |d| {
            let line = format!("{}\n", "0,".repeat(1000));
            let text = format!("{GOOD_HEAD}data: [\n{}0]\n", line.repeat(1_100));
            fs::write(d.join(BAD), text).unwrap();
        },
        "release-manifests/0000_20_example_01_bad.yaml: document 0 (line 1008): invalid YAML: more than 1000000 values in one file (column 1967)\nhint: split the file",
    ),
    generated(
        "too_many_documents",
        |d| {
            let text = "---\na: 1\n".repeat(100_001);
            fs::write(d.join(BAD), text).unwrap();
        },
        "release-manifests/0000_20_example_01_bad.yaml: document 100000 (line 200001): invalid YAML: more than 100000 documents in one file (column 1)\nhint: split the file",
    ),
];

/// The head of a valid ConfigMap (7 lines), for generated files.
pub const GOOD_HEAD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: example\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n";
/// A valid ConfigMap.
pub const GOOD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n  namespace: example\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\ndata:\n  key: value\n";
/// A valid `release-metadata`.
pub const META: &str = "{\"kind\":\"cincinnati-metadata-v0\",\"version\":\"4.14.0\"}\n";

fn link(dir: &Path, at: &str, target: &str) {
    std::os::unix::fs::symlink(target, dir.join(at)).unwrap();
}

/// The committed corpus directory.
pub fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad_payloads")
}

/// A payload directory for `case`, plus the temporary directory that owns it (for generated
/// cases): a valid payload (release-metadata 4.14.0, one ConfigMap) that the generator breaks.
pub fn materialize(case: &Case) -> (PathBuf, Option<tempfile::TempDir>) {
    match case.source {
        Source::Committed => (corpus_dir().join(case.name), None),
        Source::Generated(build) => {
            let tmp = tempfile::Builder::new()
                .prefix(&format!("minicvo-bad-{}-", case.name))
                .tempdir()
                .unwrap();
            let root = tmp.path().join(case.name);
            let rm = root.join("release-manifests");
            fs::create_dir_all(&rm).unwrap();
            fs::write(rm.join("release-metadata"), META).unwrap();
            fs::write(rm.join("0000_10_example_00_good.yaml"), GOOD).unwrap();
            build(&root);
            (root, Some(tmp))
        }
    }
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code; `None` when killed by a signal or by the timeout.
    pub code: Option<i32>,
    /// Whether the run was killed for taking longer than the timeout.
    pub timed_out: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Peak resident memory of the child, in KiB.
    pub peak_rss_kib: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs `minicvo ARGS` with `envs`, killing it (and its process group) after `timeout`, and
/// measures its peak RSS: with GNU time's `%M` when `/usr/bin/time` exists (exact), else by
/// polling `VmHWM` in `/proc/<pid>/status` (a lower bound that misses at most the last few
/// milliseconds).
pub fn run(args: &[&str], envs: &[(&str, &str)], timeout: Duration) -> Outcome {
    let time = Path::new("/usr/bin/time");
    let rss_file = tempfile::NamedTempFile::new().unwrap();
    // The binary as `support::cli::command` starts it, under GNU time when there is one.
    let base = super::cli::command(args);
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(rss_file.path())
            .arg(base.get_program())
            .args(base.get_args());
        c
    } else {
        let mut c = Command::new(base.get_program());
        c.args(base.get_args());
        c
    };
    if let Some(dir) = base.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("minicvo starts");
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let mut polled_kib = 0;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        polled_kib = polled_kib.max(vm_hwm_kib(pid).unwrap_or(0));
        if start.elapsed() > timeout {
            timed_out = true;
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let _ = child.kill();
            break child.wait().unwrap();
        }
        // Sampling the child's peak memory while it runs (and enforcing the timeout), not a
        // synchronisation: the exit itself is seen by try_wait.
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    let timed_kib = fs::read_to_string(rss_file.path())
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse::<u64>().ok()));
    Outcome {
        code: if timed_out { None } else { status.code() },
        timed_out,
        stdout,
        stderr,
        peak_rss_kib: timed_kib.unwrap_or(polled_kib),
        elapsed,
    }
}

/// `VmHWM` (peak RSS, KiB) of a process.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
