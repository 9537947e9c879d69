//! User assertions over the timeline: "X happens after Y" (or before).
//!
//! ```text
//! ASSERTION := EVENT ("after" | "before") EVENT
//! EVENT     := [PHASE ":"] ACTION ":" KIND ["." GROUP] "/" [NAMESPACE "/"] NAME ["~" TEXT]
//! PHASE     := install | upgrade                    (default: upgrade)
//! ACTION    := apply | delete | wait-start | wait-done | observed
//! ```
//!
//! `~TEXT` keeps only events whose detail contains TEXT (e.g. an observed ClusterOperator
//! status `~operator=4.14.0`). An event happens at its first match (for writes: when the write
//! completed). `X after Y` holds when both happened and X's first match is later than Y's;
//! `before` is the reverse. Example:
//!
//! `delete:ClusterRoleBinding/default-account-openshift-machine-config-operator after wait-done:ClusterOperator/machine-config`

use std::fmt;

use super::timeline::{Phase, Timeline, TimelineAction, TimelineEvent};

/// One side of an assertion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPattern {
    /// The phase.
    pub phase: Phase,
    /// The action.
    pub action: TimelineAction,
    /// Kind.
    pub kind: String,
    /// Group, when given.
    pub group: Option<String>,
    /// Namespace, when given.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Required text in the detail.
    pub detail: Option<String>,
}

impl fmt::Display for EventPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.phase, self.action, self.kind)?;
        if let Some(g) = &self.group {
            write!(f, ".{g}")?;
        }
        f.write_str("/")?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(&self.name)?;
        if let Some(d) = &self.detail {
            write!(f, "~{d}")?;
        }
        Ok(())
    }
}

impl EventPattern {
    /// Whether `e` matches.
    #[must_use]
    pub fn matches(&self, e: &TimelineEvent) -> bool {
        e.phase == self.phase
            && e.action == self.action
            && e.object.kind == self.kind
            && e.object.name == self.name
            && self.group.as_ref().is_none_or(|g| *g == e.object.group)
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| Some(ns) == e.object.namespace.as_ref())
            && self
                .detail
                .as_ref()
                .is_none_or(|d| e.detail.as_deref().is_some_and(|x| x.contains(d.as_str())))
            && (e.action == TimelineAction::Observed
                || e.action == TimelineAction::WaitStart
                || e.succeeded())
    }

    /// The first matching event.
    #[must_use]
    pub fn first<'a>(&self, timeline: &'a Timeline) -> Option<&'a TimelineEvent> {
        timeline.events.iter().find(|e| self.matches(e))
    }
}

/// A bad assertion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --assert {text:?}: {reason}")]
pub struct AssertionError {
    /// The assertion as given.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

/// "after" or "before".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// X happens after Y.
    After,
    /// X happens before Y.
    Before,
}

/// A parsed assertion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// As given.
    pub text: String,
    /// X.
    pub subject: EventPattern,
    /// after / before.
    pub order: Order,
    /// Y.
    pub reference: EventPattern,
}

fn parse_event(s: &str) -> Result<EventPattern, String> {
    let (s, detail) = match s.split_once('~') {
        Some((a, d)) => (a, Some(d.to_string())),
        None => (s, None),
    };
    let parts: Vec<&str> = s.splitn(3, ':').collect();
    let (phase, action, target) = match parts.as_slice() {
        [p, a, t] => {
            let phase = match *p {
                "install" => Phase::Install,
                "upgrade" => Phase::Upgrade,
                other => return Err(format!("unknown phase {other:?} (use install or upgrade)")),
            };
            (phase, *a, *t)
        }
        [a, t] => (Phase::Upgrade, *a, *t),
        _ => {
            return Err(format!(
                "{s:?} is not ACTION:KIND/[NAMESPACE/]NAME, e.g. delete:ClusterRoleBinding/x"
            ));
        }
    };
    let action: TimelineAction = action.parse()?;
    let segments: Vec<&str> = target.split('/').collect();
    let (kind, namespace, name) = match segments.as_slice() {
        [k, n] => (*k, None, *n),
        [k, ns, n] => (*k, Some((*ns).to_string()), *n),
        _ => return Err(format!("{target:?} is not KIND/[NAMESPACE/]NAME")),
    };
    if kind.is_empty() || name.is_empty() {
        return Err(format!("{target:?} is not KIND/[NAMESPACE/]NAME"));
    }
    let (kind, group) = match kind.split_once('.') {
        Some((k, g)) => (k.to_string(), Some(g.to_string())),
        None => (kind.to_string(), None),
    };
    Ok(EventPattern {
        phase,
        action,
        kind,
        group,
        namespace,
        name: name.to_string(),
        detail,
    })
}

impl std::str::FromStr for Assertion {
    type Err = AssertionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| AssertionError {
            text: text.to_string(),
            reason,
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        let [x, order, y] = words.as_slice() else {
            return Err(err("expected \"X after Y\" or \"X before Y\"".into()));
        };
        let order = match *order {
            "after" => Order::After,
            "before" => Order::Before,
            other => return Err(err(format!("expected after or before, not {other:?}"))),
        };
        Ok(Assertion {
            text: text.to_string(),
            subject: parse_event(x).map_err(err)?,
            order,
            reference: parse_event(y).map_err(err)?,
        })
    }
}

impl Assertion {
    /// Checks the assertion; `Ok` carries a note with the times, `Err` says why it fails.
    ///
    /// # Errors
    /// When an event never happened or the order is wrong.
    pub fn check(&self, timeline: &Timeline) -> Result<String, String> {
        let x = self
            .subject
            .first(timeline)
            .ok_or_else(|| format!("{} never happened", self.subject))?;
        let y = self
            .reference
            .first(timeline)
            .ok_or_else(|| format!("{} never happened", self.reference))?;
        let holds = match self.order {
            Order::After => x.t > y.t,
            Order::Before => x.t < y.t,
        };
        let times = format!(
            "{} at {:.3}s, {} at {:.3}s",
            self.subject, x.t, self.reference, y.t
        );
        if holds { Ok(times) } else { Err(times) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(
        phase: Phase,
        action: TimelineAction,
        kind: &str,
        name: &str,
        t: f64,
    ) -> TimelineEvent {
        TimelineEvent {
            t,
            phase,
            action,
            object: crate::manifest::ObjectId {
                group: String::new(),
                kind: kind.into(),
                namespace: None,
                name: name.into(),
            },
            run_level: None,
            node: None,
            task: None,
            start: None,
            outcome: Some(
                if action == TimelineAction::Delete {
                    "deleted"
                } else {
                    "waited"
                }
                .into(),
            ),
            detail: Some("operator=4.14.0".into()),
            harm: None,
        }
    }

    #[test]
    fn parses_the_story_assertion() {
        let a: Assertion = "delete:ClusterRoleBinding.rbac.authorization.k8s.io/default-account after wait-done:ClusterOperator/machine-config"
            .parse()
            .unwrap();
        assert_eq!(a.subject.phase, Phase::Upgrade);
        assert_eq!(a.subject.action, TimelineAction::Delete);
        assert_eq!(
            a.subject.group.as_deref(),
            Some("rbac.authorization.k8s.io")
        );
        assert_eq!(a.order, Order::After);
        assert_eq!(a.reference.kind, "ClusterOperator");
        let b: Assertion =
            "install:apply:Deployment/ns/op before install:observed:ClusterOperator/op~operator=1"
                .parse()
                .unwrap();
        assert_eq!(b.subject.namespace.as_deref(), Some("ns"));
        assert_eq!(b.reference.detail.as_deref(), Some("operator=1"));
        assert_eq!(
            b.reference.to_string(),
            "install:observed:ClusterOperator/op~operator=1"
        );
    }

    #[test]
    fn bad_assertions_say_why() {
        let e = |s: &str| s.parse::<Assertion>().unwrap_err().to_string();
        assert!(e("delete:X/a").contains("expected \"X after Y\""));
        assert!(e("delete:X/a during apply:Y/b").contains("after or before"));
        assert!(e("remove:X/a after apply:Y/b").contains("unknown action"));
        assert!(e("later:delete:X/a after apply:Y/b").contains("unknown phase"));
        assert!(e("delete:X after apply:Y/b").contains("KIND/[NAMESPACE/]NAME"));
    }

    #[test]
    fn checks_order_and_presence() {
        let tl = Timeline {
            events: vec![
                event(
                    Phase::Upgrade,
                    TimelineAction::WaitDone,
                    "ClusterOperator",
                    "mc",
                    1.0,
                ),
                event(
                    Phase::Upgrade,
                    TimelineAction::Delete,
                    "ClusterRoleBinding",
                    "crb",
                    2.0,
                ),
            ],
        };
        let ok: Assertion = "delete:ClusterRoleBinding/crb after wait-done:ClusterOperator/mc"
            .parse()
            .unwrap();
        assert!(ok.check(&tl).is_ok());
        let bad: Assertion = "delete:ClusterRoleBinding/crb before wait-done:ClusterOperator/mc"
            .parse()
            .unwrap();
        assert!(bad.check(&tl).unwrap_err().contains("at 2.000s"));
        let missing: Assertion =
            "install:delete:ClusterRoleBinding/crb after wait-done:ClusterOperator/mc"
                .parse()
                .unwrap();
        assert!(missing.check(&tl).unwrap_err().contains("never happened"));
        let detail: Assertion =
            "delete:ClusterRoleBinding/crb after wait-done:ClusterOperator/mc~operator=9"
                .parse()
                .unwrap();
        assert!(detail.check(&tl).unwrap_err().contains("never happened"));
    }
}
