//! `duplicate-key`: a mapping that repeats a key. The CVO's decoder keeps the last value and
//! says nothing, and so does the loader; the earlier value is dead text that a reader may take
//! for the one in force. A warning at the repeat, naming both lines. Run by the caller with the
//! payload's directory, since it reads the files' text again.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Context, Finding, Location, Rule, Severity};
use crate::payload::duplicate_keys::duplicate_keys;

/// Runs the rule over the files of the plan's tasks, read from the payload at `root`. A file
/// that cannot be read again (it changed or went away since the load) is passed over: the
/// load has already read it.
#[must_use]
pub fn check(cx: &Context, root: &Path) -> Vec<Finding> {
    // The tasks of each file, by document.
    let mut files: BTreeMap<String, BTreeMap<usize, usize>> = BTreeMap::new();
    for t in &cx.plan.tasks {
        files
            .entry(t.manifest.path())
            .or_default()
            .insert(t.manifest.document, t.id);
    }
    let mut findings = Vec::new();
    for (path, documents) in files {
        let on_disk = if root.join(&path).is_file() {
            root.join(&path)
        } else {
            // A bare directory of manifests is the payload's release-manifests/.
            root.join(path.rsplit_once('/').map_or(path.as_str(), |(_, f)| f))
        };
        let Ok(text) = std::fs::read_to_string(&on_disk) else {
            continue;
        };
        if text.trim_start().starts_with('{') {
            continue;
        }
        for dup in duplicate_keys(&text) {
            let Some(&task) = documents.get(&dup.document) else {
                continue;
            };
            let location: Location = cx.location(task);
            findings.push(
                Finding::at(
                    Rule::DuplicateKey,
                    Severity::Warning,
                    location,
                    format!(
                        "key {:?} repeated at line {} (first at line {}): the CVO keeps the value at line {}",
                        dup.key, dup.line, dup.first_line, dup.line
                    ),
                )
                .hint("remove one of the two; the other is never applied"),
            );
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{load_and_plan, obj, write};
    use super::super::{Context, Rule, Severity};
    use crate::Filters;

    #[test]
    fn a_repeated_key_is_a_warning_naming_both_lines() {
        let a = obj("v1", "ConfigMap", "op", "x", "", "data:\n  k: a\n  k: b\n");
        let dir = write(&[("0000_50_op_01_a.yaml", a.as_str())]);
        let (excluded, plan) = load_and_plan(dir.path(), &Filters::default());
        let cx = Context::new(&plan, &excluded, None);
        let findings = super::check(&cx, dir.path());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.rule, f.severity),
            (Rule::DuplicateKey, Severity::Warning)
        );
        assert!(
            f.message.contains("\"k\" repeated at line"),
            "{}",
            f.message
        );
        assert_eq!(
            f.location.as_ref().unwrap().file,
            "release-manifests/0000_50_op_01_a.yaml"
        );
    }
}
