//! OpenAPI v3 schemas compiled into an arena of [`Node`]s, once, before any object is checked.
//!
//! Two dialects share the arena: the built-in kinds' documents (`$ref`s into
//! `components/schemas`, Go decoding rules: an object with neither `properties` nor
//! `additionalProperties` holds anything) and a CRD's structural `openAPIV3Schema` (no `$ref`,
//! `type: object` without fields holds nothing unless `x-kubernetes-preserve-unknown-fields`).

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::SchemaError;

/// Index of a node in [`Schemas::nodes`].
pub type NodeId = usize;

/// The JSON type a node asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// No type constraint.
    Any,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
    /// A string.
    String,
    /// An integral number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
}

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "object" => Ty::Object,
            "array" => Ty::Array,
            "string" => Ty::String,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            _ => return None,
        })
    }

    /// The name used in messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Ty::Any => "any",
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
        }
    }
}

/// Values with a decoding rule of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// Nothing special.
    None,
    /// An integer or a string (`x-kubernetes-int-or-string`, `IntOrString`).
    IntOrString,
    /// A `resource.Quantity`: a number or a quantity string.
    Quantity,
    /// `format: date-time` of a built-in kind (Go's RFC 3339 parser).
    DateTime,
    /// `format: byte` of a built-in kind (standard base64).
    Byte,
    /// A CRD's `JSONSchemaPropsOr…`: an object is checked against this node, an array's
    /// objects too, a boolean or string is taken as is.
    SchemaOr(NodeId),
}

/// What an object accepts besides its `properties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// Other fields are unknown fields.
    Forbid,
    /// Other fields are kept unchecked.
    Any,
    /// Other fields are map entries checked against this node.
    Schema(NodeId),
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// No uniqueness rule.
    Atomic,
    /// Items are unique.
    Set,
    /// Items are unique by these keys.
    Map(Vec<String>),
}

/// A `pattern`, compiled the first time a value is checked against it: most patterns of a
/// payload's CRDs never see a value, and compiling them all would cost more than the whole
/// validation.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The pattern as written.
    pub source: String,
    compiled: OnceLock<Option<Regex>>,
}

impl Pattern {
    fn new(source: &str) -> Self {
        Pattern {
            source: source.to_owned(),
            compiled: OnceLock::new(),
        }
    }

    /// Whether `s` matches; `true` for a pattern Rust's engine does not take (look-around,
    /// back-references), which stays unchecked rather than failing the schema.
    pub fn matches(&self, s: &str) -> bool {
        self.compiled
            .get_or_init(|| Regex::new(&self.source).ok())
            .as_ref()
            .is_none_or(|re| re.is_match(s))
    }
}

/// One compiled schema.
#[derive(Debug, Clone)]
pub struct Node {
    /// The type.
    pub ty: Ty,
    /// A special decoding rule.
    pub special: Special,
    /// `format: int32`: an integer must fit 32 bits (built-in kinds).
    pub int32: bool,
    /// A built-in kind's node: Go decoding rules (an integer is an integer literal, an empty
    /// string is a zero value the server defaults, so enums do not apply to it).
    pub builtin: bool,
    /// Declared fields.
    pub properties: HashMap<String, NodeId>,
    /// Fields besides `properties`.
    pub extra: Extra,
    /// Array items.
    pub items: Option<NodeId>,
    /// Required fields.
    pub required: Vec<String>,
    /// Allowed values; empty means any.
    pub enumeration: Vec<Value>,
    /// `null` is a value of its own.
    pub nullable: bool,
    /// `x-kubernetes-embedded-resource`: `apiVersion`, `kind` and `metadata` are implied.
    pub embedded: bool,
    /// Bounds.
    pub minimum: Option<(f64, bool)>,
    /// Bounds.
    pub maximum: Option<(f64, bool)>,
    /// String length bounds, in characters.
    pub min_length: Option<u64>,
    /// String length bounds, in characters.
    pub max_length: Option<u64>,
    /// Pattern a string must match.
    pub pattern: Option<Pattern>,
    /// Array length bounds.
    pub min_items: Option<u64>,
    /// Array length bounds.
    pub max_items: Option<u64>,
    /// Items are unique.
    pub unique_items: bool,
    /// Object size bounds.
    pub min_properties: Option<u64>,
    /// Object size bounds.
    pub max_properties: Option<u64>,
    /// `x-kubernetes-list-type`.
    pub list_type: ListType,
    /// Value validations that must all hold.
    pub all_of: Vec<NodeId>,
    /// Value validations of which one must hold.
    pub any_of: Vec<NodeId>,
    /// Value validations of which exactly one must hold.
    pub one_of: Vec<NodeId>,
    /// A value validation that must not hold.
    pub not: Option<NodeId>,
    /// `x-kubernetes-validations` (CEL) rules are declared here.
    pub cel: bool,
}

impl Node {
    fn any() -> Node {
        Node {
            ty: Ty::Any,
            special: Special::None,
            int32: false,
            builtin: false,
            properties: HashMap::new(),
            extra: Extra::Any,
            items: None,
            required: Vec::new(),
            enumeration: Vec::new(),
            nullable: false,
            embedded: false,
            minimum: None,
            maximum: None,
            min_length: None,
            max_length: None,
            pattern: None,
            min_items: None,
            max_items: None,
            unique_items: false,
            min_properties: None,
            max_properties: None,
            list_type: ListType::Atomic,
            all_of: Vec::new(),
            any_of: Vec::new(),
            one_of: Vec::new(),
            not: None,
            cel: false,
        }
    }
}

/// An arena of compiled nodes.
#[derive(Debug, Clone, Default)]
pub struct Schemas {
    /// The nodes; ids index this.
    pub nodes: Vec<Node>,
}

/// Which rules a document follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    BuiltIn,
    Structural,
}

const REF_PREFIX: &str = "#/components/schemas/";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

impl Schemas {
    /// The node `id`.
    #[must_use]
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// Compiles every named schema of a built-in document; returns the id of each name.
    ///
    /// # Errors
    /// A `$ref` to an unknown name.
    pub fn compile_builtin(
        &mut self,
        named: &Map<String, Value>,
    ) -> Result<HashMap<String, NodeId>, SchemaError> {
        // `objects_in` counts each named schema itself: its node is the one pushed below.
        self.nodes
            .reserve(named.values().map(objects_in).sum::<usize>());
        let mut ids = HashMap::new();
        for name in named.keys() {
            ids.insert(name.clone(), self.nodes.len());
            self.nodes.push(Node::any());
        }
        for (name, schema) in named {
            let mut c = Compiler {
                schemas: self,
                dialect: Dialect::BuiltIn,
                refs: &ids,
                at: name,
            };
            let node = c.node_of(schema)?;
            let node = if name == QUANTITY {
                Node {
                    special: Special::Quantity,
                    builtin: true,
                    ..Node::any()
                }
            } else {
                node
            };
            self.nodes[ids[name]] = node;
        }
        Ok(ids)
    }

    /// Compiles a CRD's `openAPIV3Schema`; `at` names it in errors.
    ///
    /// # Errors
    /// A `$ref` (not allowed in a CRD).
    pub fn compile_structural(&mut self, schema: &Value, at: &str) -> Result<NodeId, SchemaError> {
        self.nodes.reserve(objects_in(schema));
        let refs = HashMap::new();
        let mut c = Compiler {
            schemas: self,
            dialect: Dialect::Structural,
            refs: &refs,
            at,
        };
        c.compile(schema)
    }
}

/// The objects in `v`, itself included: about as many as the nodes its schema compiles into
/// (every node but a rare boolean schema is an object), so the arena is allocated once
/// instead of regrown, and copied, while a large schema compiles.
fn objects_in(v: &Value) -> usize {
    match v {
        Value::Object(o) => 1 + o.values().map(objects_in).sum::<usize>(),
        Value::Array(a) => a.iter().map(objects_in).sum(),
        _ => 0,
    }
}

struct Compiler<'a> {
    schemas: &'a mut Schemas,
    dialect: Dialect,
    refs: &'a HashMap<String, NodeId>,
    at: &'a str,
}

impl Compiler<'_> {
    fn err(&self, what: String) -> SchemaError {
        SchemaError::Compile {
            schema: self.at.to_owned(),
            message: what,
        }
    }

    /// Compiles `v` into a new node, or returns the target of a `$ref` wrapper.
    fn compile(&mut self, v: &Value) -> Result<NodeId, SchemaError> {
        if let Some(target) = self.ref_target(v)? {
            return Ok(target);
        }
        let node = self.node_of(v)?;
        self.schemas.nodes.push(node);
        Ok(self.schemas.nodes.len() - 1)
    }

    /// `{"$ref": ...}` or `{"allOf": [{"$ref": ...}], "default": ..., ...}` without other
    /// constraints: the referenced node itself.
    fn ref_target(&self, v: &Value) -> Result<Option<NodeId>, SchemaError> {
        let Some(o) = v.as_object() else {
            return Ok(None);
        };
        let reference = if let Some(r) = o.get("$ref") {
            r
        } else if let Some(Value::Array(all)) = o.get("allOf") {
            match all.as_slice() {
                [one] if one.get("$ref").is_some() => &one["$ref"],
                _ => return Ok(None),
            }
        } else {
            return Ok(None);
        };
        let ignorable = |k: &str| {
            matches!(
                k,
                "$ref" | "allOf" | "default" | "description" | "example" | "nullable"
            ) || k.starts_with("x-kubernetes-patch")
        };
        if !o.keys().all(|k| ignorable(k)) {
            return Ok(None);
        }
        let name = reference
            .as_str()
            .and_then(|r| r.strip_prefix(REF_PREFIX))
            .ok_or_else(|| self.err(format!("unsupported $ref {reference}")))?;
        self.refs
            .get(name)
            .copied()
            .map(Some)
            .ok_or_else(|| self.err(format!("$ref to unknown schema {name}")))
    }

    fn node_of(&mut self, v: &Value) -> Result<Node, SchemaError> {
        let mut n = Node::any();
        n.builtin = self.dialect == Dialect::BuiltIn;
        let Some(o) = v.as_object() else {
            return Ok(n);
        };
        let k = Keywords::of(o);
        let flag = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
        let num = |v: Option<&Value>| v.and_then(Value::as_f64);
        let count = |v: Option<&Value>| v.and_then(Value::as_u64);
        n.ty =
            k.ty.and_then(Value::as_str)
                .and_then(Ty::parse)
                .unwrap_or(Ty::Any);
        let format = k.format.and_then(Value::as_str).unwrap_or("");
        if flag(k.int_or_string) || format == "int-or-string" {
            n.special = Special::IntOrString;
            n.ty = Ty::Any;
        } else if self.dialect == Dialect::BuiltIn {
            match format {
                "date-time" => n.special = Special::DateTime,
                "byte" => n.special = Special::Byte,
                "int32" => n.int32 = true,
                _ => {}
            }
        }
        n.nullable = flag(k.nullable);
        n.embedded = flag(k.embedded);
        n.cel = k
            .validations
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let preserve = flag(k.preserve);
        if let Some(Value::Object(props)) = k.properties {
            for (k, s) in props {
                let id = self.compile(s)?;
                n.properties.insert(k.clone(), id);
            }
        }
        n.extra = match k.additional {
            Some(Value::Bool(false)) => Extra::Forbid,
            Some(Value::Bool(true)) => Extra::Any,
            Some(s @ Value::Object(_)) => Extra::Schema(self.compile(s)?),
            _ if preserve => Extra::Any,
            _ => match self.dialect {
                Dialect::BuiltIn if n.properties.is_empty() => Extra::Any,
                Dialect::Structural if n.ty == Ty::Any && n.properties.is_empty() => Extra::Any,
                _ => Extra::Forbid,
            },
        };
        if let Some(items) = k.items {
            n.items = Some(self.compile(items)?);
        }
        if let Some(Value::Array(r)) = k.required {
            n.required = r
                .iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect();
        }
        if let Some(Value::Array(e)) = k.enumeration {
            n.enumeration.clone_from(e);
        }
        n.minimum = num(k.minimum).map(|m| (m, flag(k.exclusive_minimum)));
        n.maximum = num(k.maximum).map(|m| (m, flag(k.exclusive_maximum)));
        n.min_length = count(k.min_length);
        n.max_length = count(k.max_length);
        n.min_items = count(k.min_items);
        n.max_items = count(k.max_items);
        n.unique_items = flag(k.unique_items);
        n.min_properties = count(k.min_properties);
        n.max_properties = count(k.max_properties);
        if let Some(p) = k.pattern.and_then(Value::as_str) {
            n.pattern = Some(Pattern::new(p));
        }
        n.list_type = match k.list_type.and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                k.list_map_keys
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Atomic,
        };
        if self.dialect == Dialect::Structural {
            for (of, list) in [(k.all_of, 0), (k.any_of, 1), (k.one_of, 2)] {
                if let Some(Value::Array(a)) = of {
                    let mut ids = Vec::with_capacity(a.len());
                    for s in a {
                        ids.push(self.compile(s)?);
                    }
                    match list {
                        0 => n.all_of = ids,
                        1 => n.any_of = ids,
                        _ => n.one_of = ids,
                    }
                }
            }
            if let Some(s) = k.not {
                n.not = Some(self.compile(s)?);
            }
        }
        Ok(n)
    }
}

/// The keywords of one schema object that compiling reads, found in one pass over its
/// entries (instead of a hashed lookup per keyword).
#[derive(Default)]
struct Keywords<'v> {
    ty: Option<&'v Value>,
    format: Option<&'v Value>,
    int_or_string: Option<&'v Value>,
    nullable: Option<&'v Value>,
    embedded: Option<&'v Value>,
    validations: Option<&'v Value>,
    preserve: Option<&'v Value>,
    properties: Option<&'v Value>,
    additional: Option<&'v Value>,
    items: Option<&'v Value>,
    required: Option<&'v Value>,
    enumeration: Option<&'v Value>,
    minimum: Option<&'v Value>,
    exclusive_minimum: Option<&'v Value>,
    maximum: Option<&'v Value>,
    exclusive_maximum: Option<&'v Value>,
    min_length: Option<&'v Value>,
    max_length: Option<&'v Value>,
    min_items: Option<&'v Value>,
    max_items: Option<&'v Value>,
    unique_items: Option<&'v Value>,
    min_properties: Option<&'v Value>,
    max_properties: Option<&'v Value>,
    pattern: Option<&'v Value>,
    list_type: Option<&'v Value>,
    list_map_keys: Option<&'v Value>,
    all_of: Option<&'v Value>,
    any_of: Option<&'v Value>,
    one_of: Option<&'v Value>,
    not: Option<&'v Value>,
}

impl<'v> Keywords<'v> {
    fn of(o: &'v serde_json::Map<String, Value>) -> Self {
        let mut k = Keywords::default();
        for (key, v) in o {
            let slot = match key.as_str() {
                "type" => &mut k.ty,
                "format" => &mut k.format,
                "x-kubernetes-int-or-string" => &mut k.int_or_string,
                "nullable" => &mut k.nullable,
                "x-kubernetes-embedded-resource" => &mut k.embedded,
                "x-kubernetes-validations" => &mut k.validations,
                "x-kubernetes-preserve-unknown-fields" => &mut k.preserve,
                "properties" => &mut k.properties,
                "additionalProperties" => &mut k.additional,
                "items" => &mut k.items,
                "required" => &mut k.required,
                "enum" => &mut k.enumeration,
                "minimum" => &mut k.minimum,
                "exclusiveMinimum" => &mut k.exclusive_minimum,
                "maximum" => &mut k.maximum,
                "exclusiveMaximum" => &mut k.exclusive_maximum,
                "minLength" => &mut k.min_length,
                "maxLength" => &mut k.max_length,
                "minItems" => &mut k.min_items,
                "maxItems" => &mut k.max_items,
                "uniqueItems" => &mut k.unique_items,
                "minProperties" => &mut k.min_properties,
                "maxProperties" => &mut k.max_properties,
                "pattern" => &mut k.pattern,
                "x-kubernetes-list-type" => &mut k.list_type,
                "x-kubernetes-list-map-keys" => &mut k.list_map_keys,
                "allOf" => &mut k.all_of,
                "anyOf" => &mut k.any_of,
                "oneOf" => &mut k.one_of,
                "not" => &mut k.not,
                _ => continue,
            };
            *slot = Some(v);
        }
        k
    }
}
