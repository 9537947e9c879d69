//! Kubernetes RBAC rules as data: what a role's (or a rules review's) policy rules grant, one
//! right at a time, matched as the API server's RBAC authorizer matches them, and which rights
//! one set of rules grants that another does not. Used by the lint rule that finds rights taken
//! from running pods and by the simulated pods that check their own rights.

use std::fmt;

use serde_json::Value;

use crate::manifest::Manifest;

/// One right a role grants: a verb on a resource, or on a non-resource URL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Right {
    /// A verb on `resource` (maybe `name/subresource`) of an API group, maybe one name only.
    Resource {
        /// The verb, or `*`.
        verb: String,
        /// The API group (`""` for core), or `*`.
        group: String,
        /// The resource, or `*`, `*/sub`, `res/sub`.
        resource: String,
        /// The object name; `None` for every name.
        name: Option<String>,
    },
    /// A verb on a non-resource URL (ClusterRoles only).
    Url {
        /// The verb, or `*`.
        verb: String,
        /// The URL path, maybe ending in `*`.
        url: String,
    },
}

impl Right {
    /// The verb, or `*`.
    #[must_use]
    pub fn verb(&self) -> &str {
        match self {
            Right::Resource { verb, .. } | Right::Url { verb, .. } => verb,
        }
    }
}

/// The right without its verb: `pods`, `leases.coordination.k8s.io named x`, `URL /metrics`.
pub struct Target<'a>(pub &'a Right);

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Right::Resource {
                group,
                resource,
                name,
                ..
            } => {
                f.write_str(resource)?;
                if !group.is_empty() {
                    write!(f, ".{group}")?;
                }
                if let Some(n) = name {
                    write!(f, " named {n}")?;
                }
                Ok(())
            }
            Right::Url { url, .. } => write!(f, "URL {url}"),
        }
    }
}

/// One entry of a role's `rules` (or of a rules review's `resourceRules` /
/// `nonResourceRules`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The `rules` of a Role or ClusterRole.
#[must_use]
pub fn policy_rules(role: &Manifest) -> Vec<PolicyRule> {
    rules_of(role.object.get("rules"))
}

/// The rules of a JSON array of policy rules (`rules`, `resourceRules`, `nonResourceRules`).
#[must_use]
pub fn rules_of(rules: Option<&Value>) -> Vec<PolicyRule> {
    rules
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| PolicyRule {
            verbs: strings(r, "verbs"),
            groups: strings(r, "apiGroups"),
            resources: strings(r, "resources"),
            names: strings(r, "resourceNames"),
            urls: strings(r, "nonResourceURLs"),
        })
        .collect()
}

impl PolicyRule {
    /// Every right of the rule, one verb and one target each.
    #[must_use]
    pub fn rights(&self) -> Vec<Right> {
        let mut out = Vec::new();
        let names: Vec<Option<&String>> = if self.names.is_empty() {
            vec![None]
        } else {
            self.names.iter().map(Some).collect()
        };
        for verb in &self.verbs {
            for group in &self.groups {
                for resource in &self.resources {
                    for name in &names {
                        out.push(Right::Resource {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            name: name.cloned(),
                        });
                    }
                }
            }
            for url in &self.urls {
                out.push(Right::Url {
                    verb: verb.clone(),
                    url: url.clone(),
                });
            }
        }
        out
    }

    /// Whether the rule grants `right`, matching as Kubernetes' RBAC authorizer does: `*` matches
    /// any verb, group, resource or URL; `*/sub` matches subresource `sub` of any resource; an
    /// empty `resourceNames` matches every name; a URL pattern ending in `*` matches by prefix.
    /// A `*` in `right` is only granted by a `*` (or a prefix pattern that covers it).
    #[must_use]
    pub fn grants(&self, right: &Right) -> bool {
        let has = |list: &[String], x: &str| list.iter().any(|v| v == "*" || v == x);
        if !has(&self.verbs, right.verb()) {
            return false;
        }
        match right {
            Right::Resource {
                group,
                resource,
                name,
                ..
            } => {
                has(&self.groups, group)
                    && self.resources.iter().any(|r| resource_matches(r, resource))
                    && (self.names.is_empty()
                        || name.as_ref().is_some_and(|n| self.names.contains(n)))
            }
            Right::Url { url, .. } => self.urls.iter().any(|u| {
                u == url
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| url.starts_with(prefix))
            }),
        }
    }
}

fn resource_matches(rule: &str, resource: &str) -> bool {
    if rule == "*" || rule == resource {
        return true;
    }
    match (rule.strip_prefix("*/"), resource.split_once('/')) {
        (Some(sub), Some((_, asked))) => sub == asked,
        _ => false,
    }
}

/// The rights `old`'s rules grant that `new`'s rules do not, in rule order, without repeats.
#[must_use]
pub fn lost_rights(old: &Manifest, new: &Manifest) -> Vec<Right> {
    lost(&policy_rules(old), &policy_rules(new))
}

/// The rights `old` grants that `new` does not, in rule order, without repeats.
#[must_use]
pub fn lost(old: &[PolicyRule], new: &[PolicyRule]) -> Vec<Right> {
    let kept = new;
    let mut lost: Vec<Right> = Vec::new();
    for right in old.iter().flat_map(PolicyRule::rights) {
        if !kept.iter().any(|r| r.grants(&right)) && !lost.contains(&right) {
            lost.push(right);
        }
    }
    lost
}

/// The verbs leader election uses on its Lease (client-go's `LeaseLock`: get, create, update).
pub const LEADER_ELECTION_VERBS: [&str; 3] = ["get", "create", "update"];

/// The rights the pods of a release are known to use that `old` grants and `new` does not:
/// leader election on `leases.coordination.k8s.io` ([`LEADER_ELECTION_VERBS`]), for every lease
/// name and for each name `old` grants by `resourceNames`. Every operator of a release leads
/// through a Lease (library-go's leader election), and losing it stops the operator; no other
/// right is known to be used from the manifests alone.
#[must_use]
pub fn known_used_lost(old: &[PolicyRule], new: &[PolicyRule]) -> Vec<Right> {
    let mut names: Vec<Option<String>> = vec![None];
    for r in old.iter().flat_map(PolicyRule::rights) {
        if let Right::Resource {
            resource,
            name: Some(n),
            ..
        } = &r
            && (resource == "leases" || resource == "*")
            && !names.contains(&Some(n.clone()))
        {
            names.push(Some(n.clone()));
        }
    }
    let mut out = Vec::new();
    for verb in LEADER_ELECTION_VERBS {
        for name in &names {
            let probe = Right::Resource {
                verb: verb.to_owned(),
                group: "coordination.k8s.io".to_owned(),
                resource: "leases".to_owned(),
                name: name.clone(),
            };
            if old.iter().any(|r| r.grants(&probe)) && !new.iter().any(|r| r.grants(&probe)) {
                out.push(probe);
            }
        }
    }
    out
}

/// `get,list on pods; update on leases.coordination.k8s.io named x`.
#[must_use]
pub fn describe(lost: &[Right]) -> String {
    let mut by_target: Vec<(String, Vec<&str>)> = Vec::new();
    for r in lost {
        let target = Target(r).to_string();
        match by_target.iter_mut().find(|(t, _)| *t == target) {
            Some((_, verbs)) => verbs.push(r.verb()),
            None => by_target.push((target, vec![r.verb()])),
        }
    }
    by_target
        .iter()
        .map(|(t, verbs)| format!("{} on {t}", verbs.join(",")))
        .collect::<Vec<_>>()
        .join("; ")
}
