//! A lint run's result, per profile, as text for people and as the `LintReport` JSON document
//! (documented in `docs/analysis.md`).

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Finding, Severity, Side};
use crate::output::API_VERSION;

/// The findings under one profile.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileReport {
    /// The cluster profile.
    pub profile: String,
    /// The feature set in force.
    pub feature_set: String,
    /// Where the feature set and gates come from (`features: …` in the text output), for the
    /// payload and, with `--previous`, for the previous payload.
    #[serde(skip)]
    pub features: Vec<String>,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
}

/// Counts per severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Error findings.
    pub error: usize,
    /// Warning findings.
    pub warning: usize,
    /// Info findings.
    pub info: usize,
}

impl Counts {
    fn of<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Self {
        let mut c = Counts::default();
        for f in findings {
            match f.severity {
                Severity::Error => c.error += 1,
                Severity::Warning => c.warning += 1,
                Severity::Info => c.info += 1,
            }
        }
        c
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize, w: &str| {
            if n == 1 {
                format!("{n} {w}")
            } else {
                format!("{n} {w}s")
            }
        };
        write!(
            f,
            "{}, {}, {} info",
            plural(self.error, "error"),
            plural(self.warning, "warning"),
            self.info
        )
    }
}

/// A whole lint run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The payload directory, as given.
    pub payload: String,
    /// The `--previous` payload directory, as given.
    pub previous: Option<String>,
    /// One entry per profile linted.
    pub profiles: Vec<ProfileReport>,
}

impl Report {
    /// Counts over every profile.
    #[must_use]
    pub fn counts(&self) -> Counts {
        Counts::of(self.profiles.iter().flat_map(|p| &p.findings))
    }

    /// Whether any profile has an error-level finding (`minicvo lint` then exits with 1).
    #[must_use]
    pub fn has_errors(&self) -> bool {
        self.counts().error > 0
    }
}

/// The text form: per profile a summary line, then each finding as a header line
/// (`severity[rule]: file#document object`), the message, related documents and the hint.
#[must_use]
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(out, "lint of {}", report.payload);
    if let Some(p) = &report.previous {
        let _ = write!(out, " (previous: {p})");
    }
    out.push('\n');
    for p in &report.profiles {
        let _ = writeln!(
            out,
            "\nprofile {}, feature set {}: {}",
            p.profile,
            p.feature_set,
            Counts::of(&p.findings)
        );
        for line in &p.features {
            let _ = writeln!(out, "{line}");
        }
        for f in &p.findings {
            out.push('\n');
            finding(&mut out, f);
        }
    }
    if report.profiles.len() > 1 {
        let _ = writeln!(
            out,
            "\ntotal over {} profiles: {}",
            report.profiles.len(),
            report.counts()
        );
    }
    out
}

fn finding(out: &mut String, f: &Finding) {
    match &f.location {
        Some(l) => {
            let _ = writeln!(
                out,
                "{}[{}]: {} {}",
                f.severity,
                f.rule,
                l.short(),
                l.object
            );
            let _ = writeln!(out, "  {}", f.message);
        }
        None => {
            let _ = writeln!(out, "{}[{}]: {}", f.severity, f.rule, f.message);
        }
    }
    for r in &f.related {
        let side = match r.location.payload {
            Side::Payload => "",
            Side::Previous => " (previous payload)",
        };
        let _ = writeln!(
            out,
            "  {}{side}: {} {}",
            r.role,
            r.location.short(),
            r.location.object
        );
    }
    if let Some(h) = &f.hint {
        let _ = writeln!(out, "  hint: {h}");
    }
}

/// The `LintReport` JSON document.
#[must_use]
pub fn json(report: &Report) -> Value {
    let profiles: Vec<Value> = report
        .profiles
        .iter()
        .map(|p| {
            json!({
                "profile": p.profile,
                "featureSet": p.feature_set,
                "summary": Counts::of(&p.findings),
                "findings": p.findings,
            })
        })
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "LintReport",
        "payload": report.payload,
        "previous": report.previous,
        "summary": report.counts(),
        "profiles": profiles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::lint::{Location, Rule};
    use crate::manifest::ObjectId;

    fn report() -> Report {
        let object = ObjectId {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("op".into()),
            name: "x".into(),
        };
        let loc = Location {
            payload: Side::Payload,
            file: "release-manifests/0000_50_op_01.yaml".into(),
            document: 2,
            line: 9,
            object,
            run_level: Some("50".into()),
        };
        let f = Finding::at(
            Rule::DuplicateObject,
            Severity::Error,
            loc.clone(),
            "msg".into(),
        )
        .hint("do this")
        .related("first copy", loc);
        Report {
            payload: "p".into(),
            previous: None,
            profiles: vec![ProfileReport {
                profile: "a".into(),
                feature_set: "Default".into(),
                features: Vec::new(),
                findings: vec![f],
            }],
        }
    }

    #[test]
    fn text_names_severity_rule_place_object_and_hint() {
        let t = text(&report());
        assert_eq!(
            t,
            "lint of p\n\nprofile a, feature set Default: 1 error, 0 warnings, 0 info\n\n\
             error[duplicate-object]: release-manifests/0000_50_op_01.yaml#2 ConfigMap op/x\n  msg\n  \
             first copy: release-manifests/0000_50_op_01.yaml#2 ConfigMap op/x\n  hint: do this\n"
        );
        assert!(report().has_errors());
    }

    #[test]
    fn json_is_a_lint_report_with_flat_locations() {
        let j = json(&report());
        assert_eq!(j["kind"], "LintReport");
        assert_eq!(j["apiVersion"], "minicvo/v1alpha1");
        assert_eq!(j["summary"]["error"], 1);
        let f = &j["profiles"][0]["findings"][0];
        assert_eq!(f["rule"], "duplicate-object");
        assert_eq!(f["severity"], "error");
        assert_eq!(f["file"], "release-manifests/0000_50_op_01.yaml");
        assert_eq!(f["document"], 2);
        assert_eq!(f["runLevel"], "50");
        assert_eq!(f["object"]["kind"], "ConfigMap");
        assert_eq!(f["related"][0]["role"], "first copy");
        assert_eq!(f["related"][0]["payload"], "payload");
    }
}
