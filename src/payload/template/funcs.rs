//! The built-in functions of Go's `text/template`, with Go's argument types and error texts.

use std::borrow::Cow;

use super::fmt::{sprint, sprintf, sprintln};
use super::value::Value;

/// A built-in function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Builtin {
    And,
    Or,
    Not,
    Len,
    Index,
    Slice,
    Print,
    Printf,
    Println,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Html,
    Js,
    Urlquery,
    Call,
}

/// The Go type of a parameter, as far as argument checks tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Param {
    /// `reflect.Value`: anything, no value included.
    Value,
    /// `any`: anything; no value becomes `nil`.
    Any,
    /// `string`.
    String,
    /// No type (the receiver of a field chain).
    Untyped,
}

impl Param {
    /// Go's name of the type, for error messages.
    pub fn go_name(self) -> &'static str {
        match self {
            Param::Value => "reflect.Value",
            Param::Any => "interface {}",
            Param::String => "string",
            Param::Untyped => "<nil>",
        }
    }
}

/// Whether `name` is a built-in function.
pub(super) fn is_builtin(name: &str) -> bool {
    lookup(name).is_some()
}

/// The built-in function `name`.
pub(super) fn lookup(name: &str) -> Option<Builtin> {
    Some(match name {
        "and" => Builtin::And,
        "or" => Builtin::Or,
        "not" => Builtin::Not,
        "len" => Builtin::Len,
        "index" => Builtin::Index,
        "slice" => Builtin::Slice,
        "print" => Builtin::Print,
        "printf" => Builtin::Printf,
        "println" => Builtin::Println,
        "eq" => Builtin::Eq,
        "ne" => Builtin::Ne,
        "lt" => Builtin::Lt,
        "le" => Builtin::Le,
        "gt" => Builtin::Gt,
        "ge" => Builtin::Ge,
        "html" => Builtin::Html,
        "js" => Builtin::Js,
        "urlquery" => Builtin::Urlquery,
        "call" => Builtin::Call,
        _ => return None,
    })
}

impl Builtin {
    /// The fixed parameters and the type of the variadic one, if any.
    pub fn signature(self) -> (&'static [Param], Option<Param>) {
        use Builtin::{
            And, Call, Eq, Ge, Gt, Html, Index, Js, Le, Len, Lt, Ne, Not, Or, Print, Printf,
            Println, Slice, Urlquery,
        };
        match self {
            And | Or | Index | Slice | Eq | Call => (&[Param::Value], Some(Param::Value)),
            Not | Len => (&[Param::Value], None),
            Ne | Lt | Le | Gt | Ge => (&[Param::Value, Param::Value], None),
            Print | Println | Html | Js | Urlquery => (&[], Some(Param::Any)),
            Printf => (&[Param::String], Some(Param::Any)),
        }
    }

    /// Calls the function with evaluated arguments (`and`, `or` are evaluated by the caller;
    /// `call` gets the callee's name as its first argument).
    ///
    /// # Errors
    /// Go's error text of the function.
    pub fn call<'a>(self, argv: Vec<Value<'a>>) -> Result<Value<'a>, String> {
        let owned = |s: String| Value::Str(Cow::Owned(s));
        Ok(match self {
            Builtin::And | Builtin::Or => argv.into_iter().last().unwrap_or(Value::Invalid),
            Builtin::Not => Value::Bool(!argv[0].truth()),
            Builtin::Len => Value::Int(length(&argv[0])?),
            Builtin::Index => index(&argv[0], &argv[1..])?,
            Builtin::Slice => slice(&argv[0], &argv[1..])?,
            Builtin::Print => owned(sprint(&argv)),
            Builtin::Println => owned(sprintln(&argv)),
            Builtin::Printf => {
                let format = match &argv[0] {
                    Value::Str(s) => s.clone(),
                    _ => Cow::Borrowed(""),
                };
                owned(sprintf(&format, &argv[1..]))
            }
            Builtin::Eq => Value::Bool(eq(&argv[0], &argv[1..])?),
            Builtin::Ne => Value::Bool(!eq(&argv[0], &argv[1..])?),
            Builtin::Lt => Value::Bool(lt(&argv[0], &argv[1])?),
            Builtin::Le => Value::Bool(lt(&argv[0], &argv[1])? || eq(&argv[0], &argv[1..])?),
            Builtin::Gt => Value::Bool(!(lt(&argv[0], &argv[1])? || eq(&argv[0], &argv[1..])?)),
            Builtin::Ge => Value::Bool(!lt(&argv[0], &argv[1])?),
            Builtin::Html => owned(html(&eval_args(&argv))),
            Builtin::Js => owned(js(&eval_args(&argv))),
            Builtin::Urlquery => owned(urlquery(&eval_args(&argv))),
            Builtin::Call => {
                let name = match &argv[0] {
                    Value::Str(s) => s.to_string(),
                    _ => String::new(),
                };
                return Err(match &argv[1] {
                    Value::Invalid => "call of nil".to_string(),
                    f => format!("non-function {name} of type {}", f.type_name()),
                });
            }
        })
    }
}

/// Go's `reflect.Value.String` of a value (`call`'s name for a piped callee).
pub(super) fn reflect_string(v: &Value<'_>) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Invalid => "<invalid Value>".to_string(),
        other => format!("<{} Value>", other.type_name()),
    }
}

fn length(item: &Value<'_>) -> Result<i64, String> {
    match item {
        Value::Invalid => Err("reflect: call of reflect.Value.Type on zero Value".into()),
        Value::Str(s) => Ok(i64::try_from(s.len()).unwrap_or(i64::MAX)),
        Value::Map(m) => Ok(i64::try_from(m.len()).unwrap_or(i64::MAX)),
        other => Err(format!("len of type {}", other.type_name())),
    }
}

/// An index into a string of `len` bytes (which may be `len` itself, as in Go).
fn index_arg(index: &Value<'_>, len: usize) -> Result<usize, String> {
    let x = match index {
        Value::Int(i) => *i,
        Value::Byte(b) => i64::from(*b),
        Value::Invalid => return Err("cannot index slice/array with nil".into()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ));
        }
    };
    match usize::try_from(x) {
        Ok(u) if u <= len => Ok(u),
        _ => Err(format!("index out of range: {x}")),
    }
}

fn index<'a>(item: &Value<'a>, indexes: &[Value<'a>]) -> Result<Value<'a>, String> {
    if let Value::Invalid = item {
        return Err("index of untyped nil".into());
    }
    let mut item = item.clone();
    for index in indexes {
        item = match &item {
            Value::Str(s) => {
                let x = index_arg(index, s.len())?;
                match s.as_bytes().get(x) {
                    Some(b) => Value::Byte(*b),
                    None => return Err("reflect: string index out of range".into()),
                }
            }
            Value::Map(m) => {
                let key = match index {
                    Value::Str(k) => k,
                    Value::Invalid => return Err("value is nil; should be of type string".into()),
                    other => {
                        return Err(format!(
                            "value has type {}; should be string",
                            other.type_name()
                        ));
                    }
                };
                Value::str(m.get(key.as_ref()).map_or("", String::as_str))
            }
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

fn slice<'a>(item: &Value<'a>, indexes: &[Value<'a>]) -> Result<Value<'a>, String> {
    if let Value::Invalid = item {
        return Err("slice of untyped nil".into());
    }
    if indexes.len() > 3 {
        return Err(format!("too many slice indexes: {}", indexes.len()));
    }
    let Value::Str(s) = item else {
        return Err(format!("can't slice item of type {}", item.type_name()));
    };
    if indexes.len() == 3 {
        return Err("cannot 3-index slice a string".into());
    }
    let mut idx = [0, s.len()];
    for (i, index) in indexes.iter().enumerate() {
        idx[i] = index_arg(index, s.len())?;
    }
    if idx[0] > idx[1] {
        return Err(format!("invalid slice index: {} > {}", idx[0], idx[1]));
    }
    match s.get(idx[0]..idx[1]) {
        Some(part) => Ok(Value::Str(match s {
            Cow::Borrowed(b) => Cow::Borrowed(&b[idx[0]..idx[1]]),
            Cow::Owned(_) => Cow::Owned(part.to_string()),
        })),
        None => Err(format!(
            "minicvo does not support slicing a string inside a UTF-8 sequence: [{}:{}]",
            idx[0], idx[1]
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Uint,
    Float,
    String,
}

fn basic_kind(v: &Value<'_>) -> Option<Kind> {
    match v {
        Value::Bool(_) => Some(Kind::Bool),
        Value::Int(_) => Some(Kind::Int),
        Value::Byte(_) => Some(Kind::Uint),
        Value::Float(_) => Some(Kind::Float),
        Value::Str(_) => Some(Kind::String),
        _ => None,
    }
}

fn as_int(v: &Value<'_>) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::Byte(b) => i64::from(*b),
        _ => 0,
    }
}

fn is_valid(v: &Value<'_>) -> bool {
    !matches!(v, Value::Invalid)
}

fn incompatible(a: &Value<'_>, b: &Value<'_>) -> String {
    format!(
        "incompatible types for comparison: {} and {}",
        a.type_name(),
        b.type_name()
    )
}

fn eq(arg1: &Value<'_>, rest: &[Value<'_>]) -> Result<bool, String> {
    if rest.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic_kind(arg1);
    for arg in rest {
        let k2 = basic_kind(arg);
        let truth = if k1 == k2 {
            match (arg1, arg) {
                (Value::Bool(a), Value::Bool(b)) => a == b,
                (Value::Float(a), Value::Float(b)) => a == b,
                (Value::Str(a), Value::Str(b)) => a == b,
                (Value::Int(_) | Value::Byte(_), _) => as_int(arg1) == as_int(arg),
                _ => {
                    let same = std::mem::discriminant(arg1) == std::mem::discriminant(arg);
                    if !same && is_valid(arg1) && is_valid(arg) {
                        return Err(format!(
                            "non-comparable types {}: {}, {}: {}",
                            sprintf("%s", std::slice::from_ref(arg1)),
                            arg1.type_name(),
                            arg.type_name(),
                            sprintf("%v", std::slice::from_ref(arg))
                        ));
                    }
                    if !is_valid(arg1) || !is_valid(arg) {
                        !is_valid(arg1) && !is_valid(arg)
                    } else {
                        return Err(format!(
                            "non-comparable type {}: {}",
                            sprintf("%s", std::slice::from_ref(arg)),
                            arg.type_name()
                        ));
                    }
                }
            }
        } else {
            match (k1, k2) {
                (Some(Kind::Int), Some(Kind::Uint)) | (Some(Kind::Uint), Some(Kind::Int)) => {
                    as_int(arg1) == as_int(arg)
                }
                _ if is_valid(arg1) && is_valid(arg) => return Err(incompatible(arg1, arg)),
                _ => false,
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lt(arg1: &Value<'_>, arg2: &Value<'_>) -> Result<bool, String> {
    const BAD: &str = "invalid type for comparison";
    let k1 = basic_kind(arg1).ok_or(BAD)?;
    let k2 = basic_kind(arg2).ok_or(BAD)?;
    Ok(match (arg1, arg2) {
        _ if k1 != k2 => match (k1, k2) {
            (Kind::Int, Kind::Uint) | (Kind::Uint, Kind::Int) => as_int(arg1) < as_int(arg2),
            _ => return Err(incompatible(arg1, arg2)),
        },
        (Value::Float(a), Value::Float(b)) => a < b,
        (Value::Str(a), Value::Str(b)) => a < b,
        (Value::Int(_) | Value::Byte(_), _) => as_int(arg1) < as_int(arg2),
        _ => return Err(BAD.into()),
    })
}

/// The text of the arguments of `html`, `js` and `urlquery`: one string as it is, anything
/// else printed, no value as `<no value>`.
fn eval_args(args: &[Value<'_>]) -> String {
    if let [Value::Str(s)] = args {
        return s.to_string();
    }
    let shown: Vec<Value<'_>> = args
        .iter()
        .map(|a| match a {
            Value::Invalid => Value::str("<no value>"),
            other => other.clone(),
        })
        .collect();
    sprint(&shown)
}

fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{FFFD}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if c < ' ' => out.push_str(&format!("\\u00{:02X}", u32::from(c))),
            c if c.is_ascii() || super::fmt::is_print(c) => out.push(c),
            c => out.push_str(&format!("\\u{:04X}", u32::from(c))),
        }
    }
    out
}

fn urlquery(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
