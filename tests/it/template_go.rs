//! Manifest templates rendered by minicvo and by Go's `text/template` (the program
//! `hack/tools/gotemplate`, which renders them as the CVO does) must agree: the same output, or
//! the same error text, for every case of `tests/template_cases/` and every file of the shared
//! payload corpora that contains `{{`.
//!
//! The Go program comes from `$TESTPLANE_BIN/gotemplate` (built by `hack/build-testplane.sh`)
//! or, when that is missing, is built here with the installed Go toolchain. No Go is a
//! failure, never a skip. No cluster is needed.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use minicvo::payload::template::{TemplateData, render};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Case {
    name: String,
    text: String,
    data: TemplateData,
    data_json: Value,
}

fn data_sets() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(root().join("tests/template_cases/data.json"))
        .expect("tests/template_cases/data.json");
    serde_json::from_str(&text).expect("data.json is a JSON object of data sets")
}

fn template_data(v: &Value) -> TemplateData {
    TemplateData {
        release_image: v["releaseImage"].as_str().unwrap_or_default().to_string(),
        cluster_profile: v["clusterProfile"].as_str().unwrap_or_default().to_string(),
        images: v["images"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The cases of `cases.txt` (format in its header) and the corpus files of
/// `payload_files.txt`.
fn cases() -> Vec<Case> {
    let sets = data_sets();
    let case = |name: String, text: String, set: &str| {
        let data_json = sets
            .get(set)
            .unwrap_or_else(|| panic!("case {name}: no data set {set} in data.json"))
            .clone();
        Case {
            name,
            text,
            data: template_data(&data_json),
            data_json,
        }
    };
    let file = std::fs::read_to_string(root().join("tests/template_cases/cases.txt"))
        .expect("tests/template_cases/cases.txt");
    let mut out = Vec::new();
    let mut current: Option<(String, String, Vec<&str>)> = None;
    let finish = |c: Option<(String, String, Vec<&str>)>, out: &mut Vec<Case>| {
        if let Some((name, set, lines)) = c {
            out.push(case(name, lines.join("\n"), &set));
        }
    };
    let mut lines: Vec<&str> = file.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    for line in lines {
        if let Some(header) = line.strip_prefix("### ") {
            finish(current.take(), &mut out);
            let mut words = header.split_whitespace();
            let name = words.next().expect("a case name").to_string();
            let set = words
                .find_map(|w| w.strip_prefix("data="))
                .unwrap_or("default")
                .to_string();
            current = Some((name, set, Vec::new()));
        } else if let Some((_, _, body)) = current.as_mut() {
            body.push(line);
        }
    }
    finish(current.take(), &mut out);
    let corpus = root().join("../shared/payloads");
    let list = std::fs::read_to_string(root().join("tests/template_cases/payload_files.txt"))
        .expect("tests/template_cases/payload_files.txt");
    for rel in list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let text = std::fs::read_to_string(corpus.join(rel))
            .unwrap_or_else(|e| panic!("corpus file {rel}: {e}"));
        out.push(case(format!("payload:{rel}"), text, "default"));
    }
    out
}

/// Go's results, by case, in order.
fn go_results(cases: &[Case]) -> Vec<Value> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let program = crate::support::go_tool::go_tool("gotemplate", tmp.path());
    let input: Vec<Value> = cases
        .iter()
        .map(|c| json!({"name": c.name, "text": c.text, "data": c.data_json}))
        .collect();
    let mut child = Command::new(&program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", program.display()));
    let stdin = child.stdin.take().expect("stdin");
    let body = serde_json::to_vec(&input).expect("cases as JSON");
    let writer = std::thread::spawn(move || {
        let mut stdin = stdin;
        stdin
            .write_all(&body)
            .expect("cases written to the Go program");
    });
    let out = child.wait_with_output().expect("the Go program's output");
    writer.join().expect("writer");
    assert!(out.status.success(), "{} failed", program.display());
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).expect("Go results as JSON");
    assert_eq!(results.len(), cases.len(), "one Go result per case");
    results
}

#[test]
fn templates_render_as_go_renders_them() {
    let cases = cases();
    assert!(
        cases.len() > 200,
        "the case table is there ({})",
        cases.len()
    );
    let go = go_results(&cases);
    let mut mismatches = Vec::new();
    for (case, go) in cases.iter().zip(&go) {
        assert_eq!(go["name"], case.name.as_str());
        let ours = render(&case.text, &case.data);
        let same = match (&ours, go.get("output"), go.get("error")) {
            (Ok(out), Some(Value::String(g)), None) => out == g,
            (Err(e), None, Some(Value::String(g))) => {
                e.message == *g && g.starts_with(&format!("template: manifest:{}:", e.line))
            }
            _ => false,
        };
        if !same {
            let go_says = go.get("output").map_or_else(
                || format!("error {}", go["error"]),
                |o| format!("output {o}"),
            );
            let we_say = match &ours {
                Ok(o) => format!("output {o:?}"),
                Err(e) => format!("error (line {}) {:?}", e.line, e.message),
            };
            mismatches.push(format!(
                "{}:\n  go:      {go_says}\n  minicvo: {we_say}",
                case.name
            ));
        }
    }
    let equal = cases.len() - mismatches.len();
    eprintln!("template cases equal to Go: {equal} of {}", cases.len());
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ from Go:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}
