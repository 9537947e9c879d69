//! What a simulated operator does, scripted per operator with `--simulate SPEC`.
//!
//! ```text
//! SPEC   := [PHASE ":"] TARGET "=" ITEM ("," ITEM)*
//! PHASE  := "install" | "upgrade" | "all"          (harness only; default: upgrade)
//! TARGET := a ClusterOperator name | "*"           ("*": every operator without its own spec)
//! ITEM   := "ok"                                   report the new version, Available, not Degraded
//!         | "delay:" DURATION                      report this long after the workload is updated
//!         | "never"                                never report
//!         | "degraded"                             report the version, but Degraded=True
//!         | "wrong-version" [":" VERSION]          report VERSION (default 0.0.0-wrong) instead
//!         | "flap" [":" DURATION]                  alternate Available False/True every DURATION
//! DURATION := e.g. 250ms, 2s, 1.5s, 1m, 1m30s
//! ```
//!
//! Examples: `machine-config=delay:2s`, `upgrade:machine-config=never`,
//! `example=degraded,delay:500ms`, `*=delay:100ms`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The default wrong version reported by `wrong-version`.
pub const WRONG_VERSION: &str = "0.0.0-wrong";
/// The default period of `flap`.
pub const FLAP_PERIOD: Duration = Duration::from_millis(500);

/// What an operator reports once its workload runs the new version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Report {
    /// The manifest's versions, Available=True, Degraded=False, Progressing=False.
    #[default]
    Normal,
    /// Nothing, ever.
    Never,
    /// The manifest's versions, Available=True, but Degraded=True.
    Degraded,
    /// Every version replaced by this one.
    WrongVersion(String),
    /// The manifest's versions, with Available toggling False/True every period (False first).
    Flap(Duration),
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Normal => f.write_str("ok"),
            Report::Never => f.write_str("never"),
            Report::Degraded => f.write_str("degraded"),
            Report::WrongVersion(v) => write!(f, "wrong-version:{v}"),
            Report::Flap(p) => write!(f, "flap:{}", format_duration(*p)),
        }
    }
}

/// One operator's script.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// Time between the workload being updated and the report (`None`: the default delay).
    pub delay: Option<Duration>,
    /// What is reported.
    pub report: Report,
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.report)?;
        if let Some(d) = self.delay {
            write!(f, ",delay:{}", format_duration(d))?;
        }
        Ok(())
    }
}

/// Which run of the harness a spec applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScriptPhase {
    /// The install of the old payload.
    Install,
    /// The update to the new payload.
    Upgrade,
    /// Both.
    All,
}

impl ScriptPhase {
    fn covers(self, phase: ScriptPhase) -> bool {
        self == ScriptPhase::All || self == phase
    }
}

/// A parsed `--simulate` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Where it applies (`Upgrade` when the spec names no phase).
    pub phase: ScriptPhase,
    /// The operator name, or `*`.
    pub target: String,
    /// The script.
    pub script: Script,
}

/// A bad `--simulate` spec or duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --simulate spec {spec:?}: {reason}")]
pub struct SpecError {
    /// The spec as given.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

/// Parses a duration such as `250ms`, `2s`, `1.5s`, `1m`, `1m30s`, `1h`.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{s:?} has no unit (use ms, s, m or h)"))?;
        if num_len == 0 {
            return Err(format!("{s:?} is not a duration (e.g. 500ms, 2s, 1m30s)"));
        }
        let n: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 2s, 1m30s)"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("unknown unit {u:?} in {s:?} (use ms, s, m or h)")),
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Prints a duration the way [`parse_duration`] reads it.
#[must_use]
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) || ms == 0 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) && ms >= 60_000 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

impl std::str::FromStr for Spec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| SpecError {
            spec: spec.to_string(),
            reason,
        };
        let (left, items) = spec
            .split_once('=')
            .ok_or_else(|| err("expected OPERATOR=SCRIPT, e.g. machine-config=delay:2s".into()))?;
        let (phase, target) = match left.split_once(':') {
            None => (ScriptPhase::Upgrade, left),
            Some(("install", t)) => (ScriptPhase::Install, t),
            Some(("upgrade", t)) => (ScriptPhase::Upgrade, t),
            Some(("all", t)) => (ScriptPhase::All, t),
            Some((p, _)) => {
                return Err(err(format!(
                    "unknown phase {p:?} (use install, upgrade or all)"
                )));
            }
        };
        let target = target.trim();
        if target.is_empty() {
            return Err(err("no operator name before '='".into()));
        }
        let mut script = Script::default();
        let mut report_set = false;
        for item in items.split(',').map(str::trim) {
            let (word, arg) = match item.split_once(':') {
                Some((w, a)) => (w, Some(a)),
                None => (item, None),
            };
            let report = match (word, arg) {
                ("delay", Some(a)) => {
                    script.delay = Some(parse_duration(a).map_err(err)?);
                    continue;
                }
                ("delay", None) => return Err(err("delay needs a duration, e.g. delay:2s".into())),
                ("ok", None) => Report::Normal,
                ("never", None) => Report::Never,
                ("degraded", None) => Report::Degraded,
                ("wrong-version", None) => Report::WrongVersion(WRONG_VERSION.into()),
                ("wrong-version", Some(v)) if !v.is_empty() => Report::WrongVersion(v.into()),
                ("flap", None) => Report::Flap(FLAP_PERIOD),
                ("flap", Some(a)) => {
                    let d = parse_duration(a).map_err(err)?;
                    if d.is_zero() {
                        return Err(err("the flap period must be more than 0".into()));
                    }
                    Report::Flap(d)
                }
                ("", None) => return Err(err("empty script item".into())),
                _ => {
                    return Err(err(format!(
                        "unknown item {item:?} (use ok, delay:D, never, degraded, \
                         wrong-version[:V], flap[:D])"
                    )));
                }
            };
            if report_set {
                return Err(err(
                    "more than one of ok, never, degraded, wrong-version, flap".into(),
                ));
            }
            report_set = true;
            script.report = report;
        }
        Ok(Spec {
            phase,
            target: target.to_string(),
            script,
        })
    }
}

/// The scripts of every operator for one run: per-operator specs, a `*` spec, and the default
/// delay for operators whose script names none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scripts {
    /// Scripts by operator name (`*` for the fallback).
    pub by_operator: BTreeMap<String, Script>,
    /// Delay used when a script sets none.
    pub default_delay: Duration,
}

impl Scripts {
    /// The scripts of `specs` that cover `phase` (later specs win).
    #[must_use]
    pub fn for_phase(specs: &[Spec], phase: ScriptPhase, default_delay: Duration) -> Self {
        let mut by_operator = BTreeMap::new();
        for s in specs.iter().filter(|s| s.phase.covers(phase)) {
            by_operator.insert(s.target.clone(), s.script.clone());
        }
        Scripts {
            by_operator,
            default_delay,
        }
    }

    /// Every spec, whatever its phase (for `minicvo simulate`, which has one run).
    #[must_use]
    pub fn all(specs: &[Spec], default_delay: Duration) -> Self {
        Self::for_phase(specs, ScriptPhase::All, default_delay).merged_with(specs)
    }

    fn merged_with(mut self, specs: &[Spec]) -> Self {
        for s in specs {
            self.by_operator.insert(s.target.clone(), s.script.clone());
        }
        self
    }

    /// The script of `operator`: its own, else `*`, else the default.
    #[must_use]
    pub fn of(&self, operator: &str) -> Script {
        let mut s = self
            .by_operator
            .get(operator)
            .or_else(|| self.by_operator.get("*"))
            .cloned()
            .unwrap_or_default();
        s.delay.get_or_insert(self.default_delay);
        s
    }

    /// Named operators that are not among `known` (probably typos).
    #[must_use]
    pub fn unknown<'a>(&'a self, known: &[&str]) -> Vec<&'a str> {
        self.by_operator
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "*" && !known.contains(k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> Spec {
        s.parse().unwrap()
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("").is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(3)), "3s");
    }

    #[test]
    fn specs_parse() {
        let s = spec("machine-config=delay:2s");
        assert_eq!(s.phase, ScriptPhase::Upgrade);
        assert_eq!(s.target, "machine-config");
        assert_eq!(s.script.delay, Some(Duration::from_secs(2)));
        assert_eq!(s.script.report, Report::Normal);

        let s = spec("install:example=degraded,delay:500ms");
        assert_eq!(s.phase, ScriptPhase::Install);
        assert_eq!(s.script.report, Report::Degraded);
        assert_eq!(s.script.delay, Some(Duration::from_millis(500)));

        assert_eq!(spec("all:*=never").script.report, Report::Never);
        assert_eq!(
            spec("x=wrong-version").script.report,
            Report::WrongVersion(WRONG_VERSION.into())
        );
        assert_eq!(
            spec("x=wrong-version:1.2.3").script.report,
            Report::WrongVersion("1.2.3".into())
        );
        assert_eq!(spec("x=flap").script.report, Report::Flap(FLAP_PERIOD));
        assert_eq!(
            spec("x=flap:1s").script.report,
            Report::Flap(Duration::from_secs(1))
        );
        assert_eq!(
            spec("x=flap:1s,delay:2s").script.to_string(),
            "flap:1s,delay:2s"
        );
    }

    #[test]
    fn bad_specs_say_why() {
        let e = |s: &str| s.parse::<Spec>().unwrap_err().to_string();
        assert!(e("machine-config").contains("OPERATOR=SCRIPT"));
        assert!(e("later:x=ok").contains("unknown phase"));
        assert!(e("=ok").contains("no operator"));
        assert!(e("x=sometimes").contains("unknown item \"sometimes\""));
        assert!(e("x=never,degraded").contains("more than one"));
        assert!(e("x=delay").contains("needs a duration"));
        assert!(e("x=delay:soon").contains("not a duration"));
        assert!(e("x=flap:0").contains("more than 0"));
    }

    #[test]
    fn scripts_resolve_by_phase_name_and_star() {
        let specs = vec![
            spec("*=delay:1s"),
            spec("install:a=never"),
            spec("upgrade:b=degraded"),
            spec("all:c=wrong-version"),
        ];
        let up = Scripts::for_phase(&specs, ScriptPhase::Upgrade, Duration::from_millis(5));
        assert_eq!(up.of("a").report, Report::Normal);
        assert_eq!(up.of("a").delay, Some(Duration::from_secs(1)));
        assert_eq!(up.of("b").report, Report::Degraded);
        assert_eq!(up.of("b").delay, Some(Duration::from_millis(5)));
        assert_eq!(
            up.of("c").report,
            Report::WrongVersion(WRONG_VERSION.into())
        );
        let install = Scripts::for_phase(&specs, ScriptPhase::Install, Duration::ZERO);
        assert_eq!(install.of("a").report, Report::Never);
        assert_eq!(install.of("b").report, Report::Normal);
        assert_eq!(install.of("zzz").delay, Some(Duration::ZERO));
        assert_eq!(up.unknown(&["a", "b"]), vec!["c"]);
        let all = Scripts::all(&specs, Duration::ZERO);
        assert_eq!(all.of("a").report, Report::Never);
        assert_eq!(all.of("b").report, Report::Degraded);
    }
}
