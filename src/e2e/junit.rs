//! JUnit XML for CI systems: one `<testsuite>` per phase (plus one for the whole run), one
//! `<testcase>` per check, a `<failure>` listing the findings of a failed check.

use std::fmt::Write as _;

use super::checks::Check;
use super::timeline::Phase;

/// A run outcome shown as a test case next to the checks (e.g. "install completed").
#[derive(Debug, Clone, PartialEq)]
pub struct RunCase {
    /// The phase.
    pub phase: Phase,
    /// Seconds it took.
    pub seconds: f64,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

/// Escapes text for XML attributes and content.
#[must_use]
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

struct Case {
    name: String,
    seconds: f64,
    failure: Option<(String, String)>,
    output: Option<String>,
}

fn suite(out: &mut String, name: &str, cases: &[Case]) {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let time: f64 = cases.iter().map(|c| c.seconds).sum();
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">",
        escape(name),
        cases.len()
    );
    for c in cases {
        let _ = write!(
            out,
            "    <testcase classname=\"minicvo.e2e.{}\" name=\"{}\" time=\"{:.3}\"",
            escape(name),
            escape(&c.name),
            c.seconds
        );
        if c.failure.is_none() && c.output.is_none() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        if let Some((message, body)) = &c.failure {
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"finding\">{}</failure>",
                escape(message),
                escape(body)
            );
        }
        if let Some(o) = &c.output {
            let _ = writeln!(out, "      <system-out>{}</system-out>", escape(o));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n");
}

/// The JUnit document for the runs and checks.
#[must_use]
pub fn junit(runs: &[RunCase], checks: &[Check]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let total = runs.len() + checks.len();
    let failures = runs.iter().filter(|r| r.failure.is_some()).count()
        + checks.iter().filter(|c| !c.passed()).count();
    let _ = writeln!(
        out,
        "<testsuites name=\"minicvo e2e upgrade\" tests=\"{total}\" failures=\"{failures}\">"
    );
    let mut groups: Vec<(String, Vec<Case>)> = Vec::new();
    let mut push = |group: String, case: Case| match groups.iter_mut().find(|g| g.0 == group) {
        Some(g) => g.1.push(case),
        None => groups.push((group, vec![case])),
    };
    for r in runs {
        push(
            r.phase.to_string(),
            Case {
                name: format!("{} completed", r.phase),
                seconds: r.seconds,
                failure: r
                    .failure
                    .clone()
                    .map(|f| (f.lines().next().unwrap_or_default().to_string(), f.clone())),
                output: None,
            },
        );
    }
    for c in checks {
        // Checks of the whole run: the live pods' own suite, the user's assertions.
        let group = match c.phase {
            Some(p) => p.to_string(),
            None if c.name == super::harm::LIVE_PODS_CHECK => "live-pods".to_string(),
            None => "assertions".to_string(),
        };
        push(
            group,
            Case {
                name: c.name.clone(),
                seconds: 0.0,
                failure: (!c.passed()).then(|| {
                    (
                        format!(
                            "{} finding{}: {}",
                            c.failures.len(),
                            if c.failures.len() == 1 { "" } else { "s" },
                            c.failures[0]
                        ),
                        c.failures.join("\n"),
                    )
                }),
                output: (!c.notes.is_empty()).then(|| c.notes.join("\n")),
            },
        );
    }
    for (name, cases) in &groups {
        suite(&mut out, name, cases);
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_escaping() {
        let checks = vec![
            Check {
                phase: Some(Phase::Upgrade),
                name: "delete-before-workload-update".into(),
                description: String::new(),
                failures: vec!["a <b> & \"c\"".into()],
                notes: Vec::new(),
            },
            Check {
                phase: None,
                name: "assert x after y".into(),
                description: String::new(),
                failures: Vec::new(),
                notes: vec!["x at 1s".into()],
            },
        ];
        let runs = vec![RunCase {
            phase: Phase::Install,
            seconds: 1.5,
            failure: None,
        }];
        let x = junit(&runs, &checks);
        assert!(
            x.contains("<testsuites name=\"minicvo e2e upgrade\" tests=\"3\" failures=\"1\">"),
            "{x}"
        );
        assert!(
            x.contains("<testsuite name=\"install\" tests=\"1\" failures=\"0\""),
            "{x}"
        );
        assert!(
            x.contains("message=\"1 finding: a &lt;b&gt; &amp; &quot;c&quot;\""),
            "{x}"
        );
        assert!(x.contains("<system-out>x at 1s</system-out>"), "{x}");
        assert!(
            x.contains("name=\"install completed\" time=\"1.500\"/>"),
            "{x}"
        );
    }
}
