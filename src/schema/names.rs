//! Object names, namespaces, label and annotation keys and values, as the API server checks
//! them.

use std::sync::LazyLock;

use regex::Regex;

/// Which rule a kind's `metadata.name` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain: at most 253 characters of `[a-z0-9.-]`, alphanumeric at both ends.
    Subdomain,
    /// RFC 1123 label: at most 63 characters of `[a-z0-9-]`, alphanumeric at both ends.
    Label,
    /// RFC 1035 label: an RFC 1123 label that starts with a letter.
    Label1035,
    /// A path segment: anything but `.`, `..` and names holding `/` or `%`.
    PathSegment,
}

const SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const LABEL1035_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

fn anchored(fmt: &str) -> Regex {
    Regex::new(&format!("^{fmt}$")).expect("regex")
}

static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(SUBDOMAIN_FMT));
static LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_FMT));
static LABEL1035: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL1035_FMT));
static QUALIFIED: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));

/// The name rule of a built-in kind (`group` empty for the core group). Custom resources
/// follow [`NameRule::Subdomain`].
#[must_use]
pub fn rule_of(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Label1035,
        ("rbac.authorization.k8s.io", _)
        | ("apiregistration.k8s.io", _)
        | ("policy", "PodDisruptionBudget") => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

/// Why `name` breaks `rule`, worded as the API server words it; `None` when it is valid.
#[must_use]
pub fn check_name(rule: NameRule, name: &str) -> Option<String> {
    match rule {
        NameRule::Subdomain => subdomain(name),
        NameRule::Label => label(name),
        NameRule::Label1035 => {
            if name.len() > 63 {
                Some("must be no more than 63 characters".to_owned())
            } else if LABEL1035.is_match(name) {
                None
            } else {
                Some(format!(
                    "a DNS-1035 label must consist of lower case alphanumeric characters or \
                     '-', start with an alphabetic character, and end with an alphanumeric \
                     character (e.g. 'my-name',  or 'abc-123', regex used for validation is \
                     '{LABEL1035_FMT}')"
                ))
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                Some(format!("may not be '{name}'"))
            } else if name.contains('/') {
                Some("may not contain '/'".to_owned())
            } else if name.contains('%') {
                Some("may not contain '%'".to_owned())
            } else {
                None
            }
        }
    }
}

/// RFC 1123 subdomain check.
#[must_use]
pub fn subdomain(s: &str) -> Option<String> {
    if s.len() > 253 {
        Some("must be no more than 253 characters".to_owned())
    } else if SUBDOMAIN.is_match(s) {
        None
    } else {
        Some(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is '{SUBDOMAIN_FMT}')"
        ))
    }
}

/// RFC 1123 label check.
#[must_use]
pub fn label(s: &str) -> Option<String> {
    if s.len() > 63 {
        Some("must be no more than 63 characters".to_owned())
    } else if LABEL.is_match(s) {
        None
    } else {
        Some(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
             '123-abc', regex used for validation is '{LABEL_FMT}')"
        ))
    }
}

/// A label or annotation key: an optional DNS subdomain prefix and `/`, then a name of at
/// most 63 characters.
#[must_use]
pub fn qualified_name(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".to_owned());
        }
        if let Some(why) = subdomain(p) {
            return Some(format!("prefix part {why}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".to_owned());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".to_owned());
    }
    if !QUALIFIED.is_match(name) {
        return Some(format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
             '123-abc', regex used for validation is '{QUALIFIED_FMT}')"
        ));
    }
    None
}

/// A label value: empty, or at most 63 characters of the qualified-name alphabet.
#[must_use]
pub fn label_value(v: &str) -> Option<String> {
    if v.len() > 63 {
        Some("must be no more than 63 characters".to_owned())
    } else if LABEL_VALUE.is_match(v) {
        None
    } else {
        Some(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (e.g. \
             'MyValue',  or 'my_value',  or '12345', regex used for validation is \
             '{LABEL_VALUE_FMT}')"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_names() {
        assert!(check_name(NameRule::Subdomain, "a.b-c").is_none());
        assert!(check_name(NameRule::Subdomain, "a/b").is_some());
        assert!(check_name(NameRule::Subdomain, "A").is_some());
        assert!(check_name(NameRule::Subdomain, "-a").is_some());
        assert!(check_name(NameRule::Subdomain, &"a".repeat(254)).is_some());
    }

    #[test]
    fn label_names_and_namespaces() {
        assert!(check_name(NameRule::Label, "openshift-etcd").is_none());
        assert!(check_name(NameRule::Label, "a.b").is_some());
        assert!(check_name(NameRule::Label, &"a".repeat(64)).is_some());
    }

    #[test]
    fn services_need_a_leading_letter() {
        assert!(check_name(NameRule::Label1035, "etcd").is_none());
        assert!(check_name(NameRule::Label1035, "1etcd").is_some());
        assert_eq!(rule_of("", "Service"), NameRule::Label1035);
    }

    #[test]
    fn rbac_names_are_path_segments() {
        assert_eq!(
            rule_of("rbac.authorization.k8s.io", "ClusterRole"),
            NameRule::PathSegment
        );
        assert!(check_name(NameRule::PathSegment, "system:openshift:x").is_none());
        assert!(check_name(NameRule::PathSegment, "a/b").is_some());
        assert!(check_name(NameRule::PathSegment, "..").is_some());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(qualified_name("app.kubernetes.io/name").is_none());
        assert!(qualified_name("a/b/c").is_some());
        assert!(qualified_name("/x").is_some());
        assert!(qualified_name("Bad_Prefix.io/x").is_some());
        assert!(label_value("").is_none());
        assert!(label_value("v1.2_x").is_none());
        assert!(label_value("a b").is_some());
        assert!(label_value(&"a".repeat(64)).is_some());
    }
}
