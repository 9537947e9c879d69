//! The parse tree of a template, and each node's text as Go shows it in an execution error
//! (`at <index .Images 1>`).

use std::borrow::Cow;
use std::fmt;

use super::literal::Number;

/// A list of nodes: a template's body, or the body of an `if`, `range` or `with`.
pub(super) type List<'a> = Vec<Node<'a>>;

/// A node of a list.
#[derive(Debug)]
pub(super) enum Node<'a> {
    /// Text outside actions.
    Text(&'a str),
    /// `{{pipeline}}`.
    Action(Pipe<'a>),
    /// `{{if}}`.
    If(Box<Branch<'a>>),
    /// `{{range}}`.
    Range(Box<Branch<'a>>),
    /// `{{with}}`.
    With(Box<Branch<'a>>),
    /// `{{template "name" pipeline}}` (and the call of a `{{block}}`).
    Template(TemplateCall<'a>),
    /// `{{break}}`.
    Break,
    /// `{{continue}}`.
    Continue,
}

/// The pipeline and lists of an `if`, `range` or `with`.
#[derive(Debug)]
pub(super) struct Branch<'a> {
    pub pipe: Pipe<'a>,
    pub list: List<'a>,
    pub else_list: Option<List<'a>>,
}

/// A call of another template.
#[derive(Debug)]
pub(super) struct TemplateCall<'a> {
    pub pos: usize,
    pub name: String,
    pub pipe: Option<Pipe<'a>>,
}

/// A pipeline: optional variable declarations, then commands joined by `|`.
#[derive(Debug)]
pub(super) struct Pipe<'a> {
    pub pos: usize,
    pub is_assign: bool,
    pub decl: Vec<&'a str>,
    pub cmds: Vec<Command<'a>>,
}

/// One stage of a pipeline: a function, field, variable or constant and its arguments.
#[derive(Debug)]
pub(super) struct Command<'a> {
    pub pos: usize,
    pub args: Vec<Arg<'a>>,
}

/// An operand.
#[derive(Debug)]
pub(super) enum Arg<'a> {
    /// A function name.
    Identifier { pos: usize, name: &'a str },
    /// `.`.
    Dot { pos: usize },
    /// `nil`.
    Nil { pos: usize },
    /// `$x` or `$x.Field.Key`: the variable name, then the fields.
    Variable { pos: usize, idents: Vec<&'a str> },
    /// `.Field.Key`.
    Field { pos: usize, idents: Vec<&'a str> },
    /// `(pipeline).Field` or `func.Field`.
    Chain {
        pos: usize,
        node: Box<Arg<'a>>,
        fields: Vec<&'a str>,
    },
    /// `true` or `false`.
    Bool { pos: usize, value: bool },
    /// A number or character constant.
    Number { pos: usize, number: Number<'a> },
    /// A quoted string: as written, and its value.
    String {
        pos: usize,
        quoted: &'a str,
        text: Cow<'a, str>,
    },
    /// A parenthesized pipeline.
    Pipe(Box<Pipe<'a>>),
}

impl Arg<'_> {
    /// Byte offset of the operand in the template text.
    pub fn pos(&self) -> usize {
        match self {
            Arg::Identifier { pos, .. }
            | Arg::Dot { pos }
            | Arg::Nil { pos }
            | Arg::Variable { pos, .. }
            | Arg::Field { pos, .. }
            | Arg::Chain { pos, .. }
            | Arg::Bool { pos, .. }
            | Arg::Number { pos, .. }
            | Arg::String { pos, .. } => *pos,
            Arg::Pipe(p) => p.pos,
        }
    }
}

impl fmt::Display for Arg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Identifier { name, .. } => f.write_str(name),
            Arg::Dot { .. } => f.write_str("."),
            Arg::Nil { .. } => f.write_str("nil"),
            Arg::Variable { idents, .. } => f.write_str(&idents.join(".")),
            Arg::Field { idents, .. } => {
                for id in idents {
                    write!(f, ".{id}")?;
                }
                Ok(())
            }
            Arg::Chain { node, fields, .. } => {
                if let Arg::Pipe(p) = node.as_ref() {
                    write!(f, "({p})")?;
                } else {
                    write!(f, "{node}")?;
                }
                for field in fields {
                    write!(f, ".{field}")?;
                }
                Ok(())
            }
            Arg::Bool { value, .. } => write!(f, "{value}"),
            Arg::Number { number, .. } => f.write_str(number.text),
            Arg::String { quoted, .. } => f.write_str(quoted),
            Arg::Pipe(p) => write!(f, "{p}"),
        }
    }
}

impl fmt::Display for Command<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, arg) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            if let Arg::Pipe(p) = arg {
                write!(f, "({p})")?;
            } else {
                write!(f, "{arg}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Pipe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            f.write_str(&self.decl.join(", "))?;
            f.write_str(if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl fmt::Display for TemplateCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{{template {}", super::fmt::quote(&self.name, false))?;
        if let Some(p) = &self.pipe {
            write!(f, " {p}")?;
        }
        f.write_str("}}")
    }
}

/// Whether a list has nothing to execute (Go's `IsEmptyTree`): only text of Unicode space.
pub(super) fn is_empty(list: &List<'_>) -> bool {
    list.iter().all(|n| match n {
        Node::Text(t) => t.trim().is_empty(),
        _ => false,
    })
}
