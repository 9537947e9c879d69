//! Bad input through the built binary: every broken payload of the corpus (`tests/bad_cases`)
//! makes `minicvo plan` and `minicvo render` exit 1 with exactly the expected error (naming the
//! file, and the document and line where there is one), print nothing on stdout, never panic,
//! finish within a timeout and stay within a memory bound.

use crate::support::bad_cases;

use std::fmt::Write as _;
use std::time::Duration;

use bad_cases::{CASES, Case, materialize, run};

/// Longest a run may take (a debug build on a shared, busy machine).
const TIMEOUT: Duration = Duration::from_secs(20);
/// Most resident memory a run may use.
const MAX_RSS_KIB: u64 = 1024 * 1024;

/// What went wrong with one case, or `None`.
fn check(case: &Case, command: &str) -> (Option<String>, String) {
    let (dir, _tmp) = materialize(case);
    let dir = dir.to_str().expect("UTF-8 temp path").to_string();
    let out = run(&[command, &dir], &[], TIMEOUT);
    let expected = format!("error: {}\n", case.message);
    let mut problems = Vec::new();
    if out.timed_out {
        problems.push(format!("did not finish within {TIMEOUT:?}"));
    }
    if out.code != Some(1) {
        problems.push(format!("exit code {:?}, expected 1", out.code));
    }
    if out.stderr.contains("panicked") || out.stderr.contains("overflowed its stack") {
        problems.push("crashed".to_string());
    }
    if out.stderr != expected {
        problems.push(format!(
            "stderr differs\n  expected: {expected:?}\n  actual:   {:?}",
            out.stderr
        ));
    }
    if !out.stdout.is_empty() {
        problems.push(format!("stdout is not empty: {:.200}", out.stdout));
    }
    if out.peak_rss_kib > MAX_RSS_KIB {
        problems.push(format!("peak RSS {} KiB", out.peak_rss_kib));
    }
    let row = format!(
        "{:<45} {command:<6} {:>7.0?} {:>7} KiB",
        case.name, out.elapsed, out.peak_rss_kib
    );
    let problem = (!problems.is_empty())
        .then(|| format!("{} ({command}): {}", case.name, problems.join("\n    ")));
    (problem, row)
}

#[test]
fn corpus_has_at_least_thirty_cases_and_every_committed_case_is_in_the_table() {
    assert!(CASES.len() >= 30, "{} cases", CASES.len());
    let mut on_disk: Vec<String> = std::fs::read_dir(bad_cases::corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut committed: Vec<&str> = CASES
        .iter()
        .filter(|c| matches!(c.source, bad_cases::Source::Committed))
        .map(|c| c.name)
        .collect();
    committed.sort_unstable();
    assert_eq!(on_disk, committed);
}

#[test]
fn every_bad_payload_fails_clearly_without_panic_hang_or_memory_blowup() {
    let mut failures = Vec::new();
    let mut table = String::new();
    for case in CASES {
        for command in ["plan", "render"] {
            let (problem, row) = check(case, command);
            writeln!(table, "{row}").unwrap();
            failures.extend(problem);
        }
    }
    eprintln!("{table}");
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        CASES.len() * 2,
        failures.join("\n")
    );
}

#[test]
fn io_error_cause_is_printed_once() {
    let case = CASES.iter().find(|c| c.name == "dangling_symlink").unwrap();
    let (dir, _tmp) = materialize(case);
    let out = run(&["plan", dir.to_str().unwrap()], &[], TIMEOUT);
    assert_eq!(
        out.stderr.matches("No such file or directory").count(),
        1,
        "{}",
        out.stderr
    );
}

/// Secret values planted in a Secret: `stringData` in clear, `data` in base64.
const SECRET_YAML: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: example\ntype: Opaque\ndata:\n  token: aHVudGVyMi1zM2NyM3Q=\nstringData:\n  password: hunter2-s3cr3t\n  quoted: \"hunter2-s3cr3t\"\n  block: |\n    hunter2-s3cr3t\n";
const SECRET_JSON: &str = "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"creds\"},\"data\":{\"token\":\"aHVudGVyMi1zM2NyM3Q=\"},\"stringData\":{\"password\":\"hunter2-s3cr3t\"}}\n";

/// Fragments of the planted values that must never appear in an error.
fn leaks(message: &str) -> bool {
    ["hunter2", "s3cr3t", "aHVudGVy", "zM2NyM3Q"]
        .iter()
        .any(|s| message.contains(s))
}

#[test]
fn load_errors_never_echo_secret_values() {
    let mut variants: Vec<String> = Vec::new();
    for base in [SECRET_YAML, SECRET_JSON] {
        let boundaries: Vec<usize> = (0..=base.len())
            .filter(|&i| base.is_char_boundary(i))
            .collect();
        for &i in &boundaries {
            variants.push(base[..i].to_string());
            for bad in [
                "\"", "'", "[", "]", "{", "}", "\t", ":", ": ", "*", "&", "!", "%", "@", "`", "|",
                ">", "\\", "#", ",", "- ", "\n", "\n  ", "\n---\n", "\u{1}", "\u{feff}", "?",
            ] {
                variants.push(format!("{}{bad}{}", &base[..i], &base[i..]));
            }
        }
    }
    for tag in [
        "!!int",
        "!!float",
        "!!bool",
        "!!binary",
        "!!timestamp",
        "!!null",
        "!!map",
        "!!seq",
        "!!str",
        "!!merge",
        "!custom",
        "&anchor",
        "*alias",
    ] {
        variants
            .push(SECRET_YAML.replace("password: hunter2", &format!("password: {tag} hunter2")));
        variants.push(SECRET_YAML.replace("token: aHVu", &format!("token: {tag} aHVu")));
    }
    variants.push(SECRET_YAML.replace("  quoted:", "  password:"));
    variants.push(SECRET_YAML.replace("block: |\n", "block: |\n  x\n"));
    let mut errors = 0;
    for text in &variants {
        for name in ["0000_10_a_secret.yaml", "0000_10_a_secret.json"] {
            if let Err(e) = minicvo::payload::parse_manifest_text(name, text) {
                errors += 1;
                let message = e.to_string();
                assert!(
                    !leaks(&message),
                    "error quotes a secret value: {message}\ninput:\n{text}"
                );
            }
        }
    }
    assert!(
        errors > 1000,
        "only {errors} variants failed to load; the test proves little"
    );
}

#[test]
fn secret_value_stays_out_of_the_cli_error() {
    let case = CASES
        .iter()
        .find(|c| c.name == "secret_with_broken_data")
        .unwrap();
    let (dir, _tmp) = materialize(case);
    for verbosity in ["-q", "-v", "-vvv"] {
        let out = run(&["plan", verbosity, dir.to_str().unwrap()], &[], TIMEOUT);
        assert_eq!(out.code, Some(1));
        assert!(!leaks(&out.stderr) && !leaks(&out.stdout), "{}", out.stderr);
    }
}
