//! The values a manifest template can compute with: the CVO's data (its struct, the image
//! map and their strings), constants, and what the built-in functions return.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::TemplateData;

/// A value, with the Go type it stands for.
#[derive(Debug, Clone)]
pub(super) enum Value<'a> {
    /// No value: a missing map key, `nil`, or a template called without data.
    Invalid,
    /// `bool`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `uint8`: a byte of a string (`index "abc" 0`).
    Byte(u8),
    /// `float64`.
    Float(f64),
    /// `string`.
    Str(Cow<'a, str>),
    /// `map[string]string`: the image references.
    Map(&'a BTreeMap<String, String>),
    /// `payload.manifestRenderConfig`: the data itself.
    Struct(&'a TemplateData),
}

/// Go's name of the data's type.
pub(super) const STRUCT_TYPE: &str = "payload.manifestRenderConfig";

/// The data's fields, in declaration order.
pub(super) const FIELDS: [&str; 3] = ["ReleaseImage", "ClusterProfile", "Images"];

impl<'a> Value<'a> {
    /// Go's name of the value's type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Invalid => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Byte(_) => "uint8",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::Map(_) => "map[string]string",
            Value::Struct(_) => STRUCT_TYPE,
        }
    }

    /// Go's truth of a value (`if`, `with`, `and`, `or`, `not`): false for the zero value and
    /// empty collections.
    pub fn truth(&self) -> bool {
        match self {
            Value::Invalid => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Byte(b) => *b != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Map(m) => !m.is_empty(),
            Value::Struct(_) => true,
        }
    }

    /// The data's field `name`.
    pub fn field(data: &'a TemplateData, name: &str) -> Option<Value<'a>> {
        Some(match name {
            "ReleaseImage" => Value::Str(Cow::Borrowed(&data.release_image)),
            "ClusterProfile" => Value::Str(Cow::Borrowed(&data.cluster_profile)),
            "Images" => Value::Map(&data.images),
            _ => return None,
        })
    }

    /// A string value borrowed from the data.
    pub fn str(s: &'a str) -> Self {
        Value::Str(Cow::Borrowed(s))
    }
}
