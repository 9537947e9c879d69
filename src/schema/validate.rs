//! Checks one JSON value against a compiled node, collecting every violation with its path.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::Violation;
use super::compile::{Extra, ListType, NodeId, Schemas, Special, Ty};

static QUANTITY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$").expect("regex"));
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
        .expect("regex")
});
static BASE64: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9+/\r\n]*=?=?[\r\n]*$").expect("regex"));

/// The value as the API server quotes it in messages: strings in double quotes, other
/// scalars as JSON, objects and arrays by their type.
#[must_use]
pub fn quote(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Object(_) => "\"object\"".to_owned(),
        Value::Array(_) => "\"array\"".to_owned(),
        other => other.to_string(),
    }
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A walk over one value: the arena, the path so far and the findings.
pub(crate) struct Walk<'a> {
    schemas: &'a Schemas,
    path: String,
    /// Only what decoding refuses: unknown fields, and the wrong types of built-in kinds.
    /// The server resets `status` on a create before it validates values, so that is all a
    /// status is checked for.
    decode_only: bool,
    /// What was found.
    pub out: Vec<Violation>,
}

impl<'a> Walk<'a> {
    /// A walk starting at `path` (empty for an object's root).
    pub(crate) fn new(schemas: &'a Schemas, path: &str) -> Self {
        Walk {
            schemas,
            path: path.to_owned(),
            decode_only: false,
            out: Vec::new(),
        }
    }

    fn error(&mut self, message: String) {
        self.out.push(Violation::error(&self.path, message));
    }

    fn field<R>(&mut self, key: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        let r = f(self);
        self.path.truncate(len);
        r
    }

    fn index<R>(&mut self, i: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.path.len();
        let _ = write!(self.path, "[{i}]");
        let r = f(self);
        self.path.truncate(len);
        r
    }

    fn key<R>(&mut self, k: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.path.len();
        let _ = write!(self.path, "[{k}]");
        let r = f(self);
        self.path.truncate(len);
        r
    }

    /// Whether `v` passes `id` without findings (for `anyOf`, `oneOf`, `not`).
    fn passes(&mut self, id: NodeId, v: &Value) -> bool {
        let before = self.out.len();
        self.check(id, v, false);
        let ok = self.out.len() == before;
        self.out.truncate(before);
        ok
    }

    /// Checks `v` against node `id`. `strict`: report fields the schema does not declare
    /// (off inside `allOf`/`anyOf`/`oneOf`/`not`, which only validate values).
    pub(crate) fn check(&mut self, id: NodeId, v: &Value, strict: bool) {
        let n = self.schemas.node(id);
        if self.decode_only && !n.builtin {
            // A custom resource's values are checked after decoding.
            if let Value::Object(o) = v {
                self.unknown_only(id, o);
            } else if let (Value::Array(items), Some(item)) = (v, n.items) {
                for (i, x) in items.iter().enumerate() {
                    self.index(i, |w| w.check(item, x, strict));
                }
            }
            return;
        }
        if v.is_null() {
            if !n.nullable && n.ty != Ty::Any && !n.builtin {
                self.error(format!(
                    "Invalid value: \"null\": must be of type {}",
                    n.ty.name()
                ));
            }
            return;
        }
        match n.special {
            Special::None => {}
            Special::SchemaOr(target) => {
                // The API server decodes these unions with a decoder of their own that does
                // not refuse unknown fields, down to the leaves.
                match v {
                    Value::Object(_) => self.check(target, v, false),
                    Value::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            if item.is_object() {
                                self.index(i, |w| w.check(target, item, false));
                            }
                        }
                    }
                    _ => {}
                }
                return;
            }
            Special::IntOrString => {
                if !(v.is_string() || v.is_i64() || v.is_u64()) {
                    self.error(format!(
                        "Invalid value: {}: must be of type integer or string",
                        quote(v)
                    ));
                    return;
                }
            }
            Special::Quantity => {
                match v {
                    Value::Number(_) => {}
                    Value::String(s) if QUANTITY.is_match(s) => {}
                    Value::String(s) => self.error(format!(
                        "Invalid value: {s:?}: quantities must match the regular expression \
                         '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                    )),
                    _ => self.error(format!(
                        "Invalid value: {}: must be of type string or number",
                        quote(v)
                    )),
                }
                return;
            }
            Special::DateTime => {
                if let Value::String(s) = v
                    && !DATE_TIME.is_match(s)
                {
                    self.error(format!(
                        "Invalid value: {s:?}: must be a date-time in RFC 3339 format"
                    ));
                    return;
                }
            }
            Special::Byte => {
                if let Value::String(s) = v
                    && !(BASE64.is_match(s)
                        && s.chars().filter(|c| !matches!(c, '\r' | '\n')).count() % 4 == 0)
                {
                    self.error("Invalid value: \"<bytes>\": must be base64-encoded".to_owned());
                    return;
                }
            }
        }
        let type_ok = match n.ty {
            Ty::Any => true,
            Ty::Object => v.is_object(),
            Ty::Array => v.is_array(),
            Ty::String => v.is_string(),
            Ty::Boolean => v.is_boolean(),
            Ty::Number => v.is_number(),
            Ty::Integer => {
                v.is_i64()
                    || v.is_u64()
                    || (!n.builtin && v.as_f64().is_some_and(|f| f.fract() == 0.0))
            }
        };
        if !type_ok {
            self.error(format!(
                "Invalid value: \"{}\": must be of type {}",
                type_of(v),
                n.ty.name()
            ));
            return;
        }
        if self.decode_only {
            match v {
                Value::Array(items) => self.array(id, items, strict),
                Value::Object(_) => self.object(id, v, strict),
                _ => {}
            }
            return;
        }
        if n.int32
            && let Some(i) = v.as_i64()
            && i32::try_from(i).is_err()
        {
            self.error(format!("Invalid value: {i}: must fit in 32 bits"));
        }
        let allowed = n.enumeration.is_empty()
            || n.enumeration.contains(v)
            || (n.builtin && v.as_str() == Some(""));
        if !allowed {
            let supported: Vec<String> = n.enumeration.iter().map(quote).collect();
            self.error(format!(
                "Unsupported value: {}: supported values: {}",
                quote(v),
                supported.join(", ")
            ));
        }
        match v {
            Value::String(s) => self.string(id, s),
            Value::Number(_) => self.number(id, v),
            Value::Array(items) => self.array(id, items, strict),
            Value::Object(_) => self.object(id, v, strict),
            _ => {}
        }
        let n = self.schemas.node(id);
        for &b in &n.all_of {
            self.check(b, v, false);
        }
        if !n.any_of.is_empty() && !n.any_of.clone().iter().any(|&b| self.passes(b, v)) {
            self.error(format!(
                "Invalid value: {}: must validate at least one schema (anyOf)",
                quote(v)
            ));
        }
        let n = self.schemas.node(id);
        if !n.one_of.is_empty() {
            let matched = n
                .one_of
                .clone()
                .iter()
                .filter(|&&b| self.passes(b, v))
                .count();
            if matched != 1 {
                self.error(format!(
                    "Invalid value: {}: must validate one and only one schema (oneOf)",
                    quote(v)
                ));
            }
        }
        if let Some(not) = self.schemas.node(id).not
            && self.passes(not, v)
        {
            self.error(format!(
                "Invalid value: {}: must not validate the schema (not)",
                quote(v)
            ));
        }
    }

    /// Unknown fields of a custom resource's object, nothing else.
    fn unknown_only(&mut self, id: NodeId, o: &serde_json::Map<String, Value>) {
        let n = self.schemas.node(id);
        for (k, val) in o {
            if val.is_null() {
                continue;
            }
            if let Some(&p) = n.properties.get(k) {
                self.field(k, |w| w.check(p, val, true));
            } else {
                match n.extra {
                    Extra::Any => {}
                    Extra::Forbid => {
                        self.field(k, |w| w.out.push(Violation::unknown_field(&w.path)))
                    }
                    Extra::Schema(s) => self.key(k, |w| w.check(s, val, true)),
                }
            }
        }
    }

    fn string(&mut self, id: NodeId, s: &str) {
        let n = self.schemas.node(id);
        let len = s.chars().count() as u64;
        if let Some(max) = n.max_length
            && len > max
        {
            self.error(format!("Too long: may not be more than {max} bytes"));
        }
        if let Some(min) = n.min_length
            && len < min
        {
            self.error(format!(
                "Invalid value: {s:?}: should be at least {min} chars long"
            ));
        }
        if let Some(p) = &n.pattern
            && !p.matches(s)
        {
            self.error(format!("Invalid value: {s:?}: should match '{}'", p.source));
        }
    }

    fn number(&mut self, id: NodeId, v: &Value) {
        let n = self.schemas.node(id);
        let Some(x) = v.as_f64() else { return };
        if let Some((min, exclusive)) = n.minimum
            && (x < min || (exclusive && x == min))
        {
            let op = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            self.error(format!("Invalid value: {v}: should be {op} {min}"));
        }
        if let Some((max, exclusive)) = n.maximum
            && (x > max || (exclusive && x == max))
        {
            let op = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            self.error(format!("Invalid value: {v}: should be {op} {max}"));
        }
    }

    fn array(&mut self, id: NodeId, items: &[Value], strict: bool) {
        let n = self.schemas.node(id);
        if self.decode_only {
            if let Some(item_id) = n.items {
                for (i, item) in items.iter().enumerate() {
                    self.index(i, |w| w.check(item_id, item, strict));
                }
            }
            return;
        }
        let len = items.len() as u64;
        if let Some(max) = n.max_items
            && len > max
        {
            self.error(format!("Too many: {len}: must have at most {max} items"));
        }
        if let Some(min) = n.min_items
            && len < min
        {
            self.error(format!(
                "Invalid value: {len}: should have at least {min} items"
            ));
        }
        match (&n.list_type, n.unique_items) {
            (ListType::Set, _) | (ListType::Atomic, true) => {
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    if !seen.insert(item.to_string()) {
                        let shown = quote(item);
                        self.index(i, |w| w.error(format!("Duplicate value: {shown}")));
                    }
                }
            }
            (ListType::Map(keys), _) => {
                let keys = keys.clone();
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let Some(o) = item.as_object() else { continue };
                    let key: Vec<String> = keys
                        .iter()
                        .map(|k| o.get(k).map_or_else(String::new, ToString::to_string))
                        .collect();
                    if !seen.insert(key.clone()) {
                        let shown = keys
                            .iter()
                            .zip(&key)
                            .map(|(k, v)| format!("\"{k}\":{v}"))
                            .collect::<Vec<_>>()
                            .join(",");
                        self.index(i, |w| w.error(format!("Duplicate value: map[{shown}]")));
                    }
                }
            }
            (ListType::Atomic, false) => {}
        }
        if let Some(item_id) = self.schemas.node(id).items {
            for (i, item) in items.iter().enumerate() {
                self.index(i, |w| w.check(item_id, item, strict));
            }
        }
    }

    fn object(&mut self, id: NodeId, v: &Value, strict: bool) {
        let Some(o) = v.as_object() else { return };
        let n = self.schemas.node(id);
        let len = o.len() as u64;
        if let Some(max) = n.max_properties
            && len > max
        {
            self.error(format!("Too many: {len}: must have at most {max} items"));
        }
        if let Some(min) = n.min_properties
            && len < min
        {
            self.error(format!(
                "Invalid value: {len}: should have at least {min} properties"
            ));
        }
        let decode_only = self.decode_only;
        for r in n.required.iter().filter(|_| !decode_only) {
            let prop = n.properties.get(r).map(|&p| self.schemas.node(p));
            let nullable = prop.is_some_and(|p| p.nullable);
            // A built-in kind's missing boolean decodes as `false`, a valid value.
            let zero_ok = prop.is_some_and(|p| p.builtin && p.ty == Ty::Boolean);
            if !zero_ok && o.get(r).is_none_or(|v| v.is_null() && !nullable) {
                let r = r.clone();
                self.field(&r, |w| w.error("Required value".to_owned()));
            }
        }
        let embedded = n.embedded;
        for (k, val) in o {
            if val.is_null() {
                continue;
            }
            let n = self.schemas.node(id);
            if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                if k != "metadata"
                    && let Some(&p) = n.properties.get(k)
                {
                    self.field(k, |w| w.check(p, val, strict));
                }
                continue;
            }
            if let Some(&p) = n.properties.get(k) {
                let status = self.path.is_empty() && k == "status" && !self.decode_only;
                self.field(k, |w| {
                    w.decode_only |= status;
                    w.check(p, val, strict);
                    w.decode_only &= !status;
                });
                continue;
            }
            match n.extra {
                Extra::Any => {}
                Extra::Forbid => {
                    if strict {
                        let at = self.path.clone();
                        self.field(k, |w| {
                            w.out.push(Violation::unknown_field(&w.path));
                        });
                        debug_assert_eq!(at, self.path);
                    }
                }
                Extra::Schema(s) => self.key(k, |w| w.check(s, val, strict)),
            }
        }
    }
}
