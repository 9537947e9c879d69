//! The executor: walks a parsed template with the data and writes the output.
//!
//! Like Go's, it remembers the last node it evaluated and names that node (position and text)
//! in an execution error, so it sets that node at the same steps Go does.

use super::ast::{Arg, Branch, Command, List, Node, Pipe, TemplateCall};
use super::fmt::print_one;
use super::funcs::Param;
use super::literal::Number;
use super::parse::Trees;
use super::value::Value;

/// How deep templates may call each other, as in Go.
const MAX_DEPTH: usize = 100_000;

/// An execution error: Go's message and the line it names.
#[derive(Debug)]
pub(super) struct ExecError {
    pub line: usize,
    pub message: String,
}

pub(super) type Result<T> = std::result::Result<T, ExecError>;

/// How a walk ended: normally, or at a `{{break}}` or `{{continue}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

/// The node an error names.
#[derive(Clone, Copy)]
pub(super) enum At<'t, 'a> {
    Pipe(&'t Pipe<'a>),
    Command(&'t Command<'a>),
    Arg(&'t Arg<'a>),
    Template(&'t TemplateCall<'a>),
}

impl At<'_, '_> {
    fn pos(&self) -> usize {
        match self {
            At::Pipe(p) => p.pos,
            At::Command(c) => c.pos,
            At::Arg(a) => a.pos(),
            At::Template(t) => t.pos,
        }
    }

    fn context(&self) -> String {
        match self {
            At::Pipe(p) => p.to_string(),
            At::Command(c) => c.to_string(),
            At::Arg(a) => a.to_string(),
            At::Template(t) => t.to_string(),
        }
    }
}

/// Executes the template `name` of `trees` (parsed from `text`) with `data` as dot.
///
/// # Errors
/// The first execution error, as Go reports it.
pub(super) fn execute<'a>(
    trees: &Trees<'a>,
    name: &str,
    text: &'a str,
    data: Value<'a>,
    capacity: usize,
) -> Result<String> {
    let mut state = State {
        trees,
        text,
        parse_name: name,
        name: name.to_string(),
        vars: vec![("$", data.clone())],
        depth: 0,
        node: None,
        out: String::with_capacity(capacity),
    };
    let Some(root) = trees.get(name) else {
        return Err(state.error(format!(
            "{} is an incomplete or empty template",
            super::fmt::quote(name, false)
        )));
    };
    state.walk_list(&data, root)?;
    Ok(state.out)
}

pub(super) struct State<'t, 'a> {
    trees: &'t Trees<'a>,
    text: &'a str,
    parse_name: &'t str,
    /// The template being executed.
    name: String,
    vars: Vec<(&'a str, Value<'a>)>,
    depth: usize,
    node: Option<At<'t, 'a>>,
    out: String,
}

impl<'t, 'a> State<'t, 'a> {
    pub(super) fn at(&mut self, node: At<'t, 'a>) {
        self.node = Some(node);
    }

    pub(super) fn error(&self, message: impl Into<String>) -> ExecError {
        let message = message.into();
        let Some(node) = self.node else {
            return ExecError {
                line: 0,
                message: format!("template: {}: {message}", self.name),
            };
        };
        let pos = node.pos().min(self.text.len());
        let before = &self.text[..pos];
        let line = 1 + memchr::memchr_iter(b'\n', before.as_bytes()).count();
        let col = before.rfind('\n').map_or(pos, |nl| pos - nl - 1);
        ExecError {
            line,
            message: format!(
                "template: {}:{line}:{col}: executing {} at <{}>: {message}",
                self.parse_name,
                super::fmt::quote(&self.name, false),
                node.context()
            ),
        }
    }

    pub(super) fn fail<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(self.error(message))
    }

    fn walk_list(&mut self, dot: &Value<'a>, list: &'t List<'a>) -> Result<Flow> {
        for node in list {
            let flow = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.walk(dot, node))?;
            if flow != Flow::Normal {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &Value<'a>, node: &'t Node<'a>) -> Result<Flow> {
        match node {
            Node::Text(t) => self.out.push_str(t),
            Node::Action(pipe) => {
                let val = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    match val {
                        Value::Invalid => self.out.push_str("<no value>"),
                        v => print_one(&mut self.out, &v),
                    }
                }
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
            Node::If(b) => return self.walk_if_or_with(false, dot, b),
            Node::With(b) => return self.walk_if_or_with(true, dot, b),
            Node::Range(b) => return self.walk_range(dot, b),
            Node::Template(t) => self.walk_template(dot, t)?,
        }
        Ok(Flow::Normal)
    }

    fn walk_if_or_with(&mut self, with: bool, dot: &Value<'a>, b: &'t Branch<'a>) -> Result<Flow> {
        let mark = self.vars.len();
        let r = (|| {
            let val = self.eval_pipeline(dot, &b.pipe)?;
            if val.truth() {
                if with {
                    self.walk_list(&val, &b.list)
                } else {
                    self.walk_list(dot, &b.list)
                }
            } else if let Some(else_list) = &b.else_list {
                self.walk_list(dot, else_list)
            } else {
                Ok(Flow::Normal)
            }
        })();
        self.vars.truncate(mark);
        r
    }

    fn walk_range(&mut self, dot: &Value<'a>, r: &'t Branch<'a>) -> Result<Flow> {
        let mark0 = self.vars.len();
        let res = self.walk_range_inner(dot, r);
        self.vars.truncate(mark0);
        res
    }

    fn walk_range_inner(&mut self, dot: &Value<'a>, r: &'t Branch<'a>) -> Result<Flow> {
        let val = self.eval_pipeline(dot, &r.pipe)?;
        let mark = self.vars.len();
        let ran = match &val {
            Value::Int(_) | Value::Byte(_) => {
                if r.pipe.decl.len() > 1 {
                    let shown = super::fmt::sprintf("%v", std::slice::from_ref(&val));
                    return self.fail(format!(
                        "can't use {shown} to iterate over more than one variable"
                    ));
                }
                let n = match val {
                    Value::Int(n) => n,
                    Value::Byte(b) => i64::from(b),
                    _ => 0,
                };
                let mut ran = false;
                for i in 0..n.max(0) {
                    ran = true;
                    let elem = match val {
                        Value::Byte(_) => Value::Byte(u8::try_from(i).unwrap_or(0)),
                        _ => Value::Int(i),
                    };
                    if self.one_iteration(r, mark, Value::Invalid, elem)? == Flow::Break {
                        break;
                    }
                }
                ran
            }
            Value::Map(m) => {
                for (k, v) in m.iter() {
                    if self.one_iteration(r, mark, Value::str(k), Value::str(v))? == Flow::Break {
                        break;
                    }
                }
                !m.is_empty()
            }
            Value::Invalid => false,
            other => {
                let shown = super::fmt::sprintf("%v", std::slice::from_ref(other));
                return self.fail(format!("range can't iterate over {shown}"));
            }
        };
        if ran {
            return Ok(Flow::Normal);
        }
        if let Some(else_list) = &r.else_list {
            // A break in the else list ends this range only, as in Go.
            let flow = self.walk_list(dot, else_list)?;
            if flow == Flow::Continue {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn one_iteration(
        &mut self,
        r: &'t Branch<'a>,
        mark: usize,
        index: Value<'a>,
        elem: Value<'a>,
    ) -> Result<Flow> {
        let decl = &r.pipe.decl;
        if let Some(first) = decl.first() {
            if r.pipe.is_assign {
                let v = if decl.len() > 1 {
                    index.clone()
                } else {
                    elem.clone()
                };
                self.set_var(first, v)?;
            } else {
                let top = self.vars.len() - 1;
                self.vars[top].1 = elem.clone();
            }
        }
        if decl.len() > 1 {
            if r.pipe.is_assign {
                self.set_var(decl[1], elem.clone())?;
            } else {
                let second = self.vars.len() - 2;
                self.vars[second].1 = index;
            }
        }
        let flow = self.walk_list(&elem, &r.list);
        self.vars.truncate(mark);
        let flow = flow?;
        Ok(if flow == Flow::Break {
            Flow::Break
        } else {
            Flow::Normal
        })
    }

    fn walk_template(&mut self, dot: &Value<'a>, t: &'t TemplateCall<'a>) -> Result<()> {
        self.at(At::Template(t));
        let Some(tree) = self.trees.get(&t.name) else {
            return self.fail(format!(
                "template {} not defined",
                super::fmt::quote(&t.name, false)
            ));
        };
        if self.depth == MAX_DEPTH {
            return self.fail(format!("exceeded maximum template depth ({MAX_DEPTH})"));
        }
        let new_dot = match &t.pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => Value::Invalid,
        };
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$", new_dot.clone())]);
        let saved_name = std::mem::replace(&mut self.name, t.name.clone());
        let saved_node = self.node;
        self.depth += 1;
        let r = self.walk_list(&new_dot, tree);
        self.depth -= 1;
        self.vars = saved_vars;
        self.name = saved_name;
        self.node = saved_node;
        r.map(|_| ())
    }

    pub(super) fn eval_pipeline(
        &mut self,
        dot: &Value<'a>,
        pipe: &'t Pipe<'a>,
    ) -> Result<Value<'a>> {
        self.at(At::Pipe(pipe));
        let mut value: Option<Value<'a>> = None;
        for cmd in &pipe.cmds {
            let v = stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
                self.eval_command(dot, cmd, value.take())
            })?;
            value = Some(v);
        }
        let value = value.unwrap_or(Value::Invalid);
        for name in &pipe.decl {
            if pipe.is_assign {
                self.set_var(name, value.clone())?;
            } else {
                self.vars.push((name, value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, args: &'t [Arg<'a>], fin: Option<&Value<'a>>) -> Result<()> {
        if args.len() > 1 || fin.is_some() {
            return self.fail(format!("can't give argument to non-function {}", args[0]));
        }
        Ok(())
    }

    fn eval_command(
        &mut self,
        dot: &Value<'a>,
        cmd: &'t Command<'a>,
        fin: Option<Value<'a>>,
    ) -> Result<Value<'a>> {
        let first = &cmd.args[0];
        match first {
            Arg::Field { idents, .. } => {
                self.at(At::Arg(first));
                self.eval_field_chain(dot.clone(), idents, &cmd.args, fin)
            }
            Arg::Chain { .. } => self.eval_chain(dot, first, &cmd.args, fin),
            Arg::Identifier { name, .. } => {
                self.eval_function(dot, first, name, At::Command(cmd), &cmd.args[1..], fin)
            }
            Arg::Pipe(p) => {
                self.not_a_function(&cmd.args, fin.as_ref())?;
                self.eval_pipeline(dot, p)
            }
            Arg::Variable { .. } => self.eval_variable(dot, first, &cmd.args, fin),
            _ => {
                self.at(At::Arg(first));
                self.not_a_function(&cmd.args, fin.as_ref())?;
                match first {
                    Arg::Bool { value, .. } => Ok(Value::Bool(*value)),
                    Arg::Dot { .. } => Ok(dot.clone()),
                    Arg::Number { number, .. } => self.ideal_constant(first, number),
                    Arg::String { text, .. } => Ok(Value::Str(text.clone())),
                    _ => self.fail("nil is not a command"),
                }
            }
        }
    }

    pub(super) fn ideal_constant(
        &mut self,
        node: &'t Arg<'a>,
        n: &Number<'a>,
    ) -> Result<Value<'a>> {
        self.at(At::Arg(node));
        let t = n.text;
        let hex_int = t.len() > 2
            && t.starts_with('0')
            && matches!(t.as_bytes()[1], b'x' | b'X')
            && !t.contains(['p', 'P']);
        if n.is_float && !hex_int && !t.starts_with('\'') && t.contains(['.', 'e', 'E', 'p', 'P']) {
            return Ok(Value::Float(n.float));
        }
        if n.is_int {
            return Ok(Value::Int(n.int));
        }
        if n.is_uint {
            return self.fail(format!("{t} overflows int"));
        }
        Ok(Value::Invalid)
    }

    pub(super) fn eval_chain(
        &mut self,
        dot: &Value<'a>,
        chain: &'t Arg<'a>,
        args: &'t [Arg<'a>],
        fin: Option<Value<'a>>,
    ) -> Result<Value<'a>> {
        self.at(At::Arg(chain));
        let Arg::Chain { node, fields, .. } = chain else {
            return Ok(Value::Invalid);
        };
        if let Arg::Nil { .. } = node.as_ref() {
            return self.fail(format!("indirection through explicit nil in {chain}"));
        }
        let receiver = self.eval_arg(dot, Param::Untyped, node)?;
        self.eval_field_chain(receiver, fields, args, fin)
    }

    pub(super) fn eval_variable(
        &mut self,
        dot: &Value<'a>,
        var: &'t Arg<'a>,
        args: &'t [Arg<'a>],
        fin: Option<Value<'a>>,
    ) -> Result<Value<'a>> {
        let _ = dot;
        self.at(At::Arg(var));
        let Arg::Variable { idents, .. } = var else {
            return Ok(Value::Invalid);
        };
        let value = self.var_value(idents[0])?;
        if idents.len() == 1 {
            self.not_a_function(args, fin.as_ref())?;
            return Ok(value);
        }
        self.eval_field_chain(value, &idents[1..], args, fin)
    }

    pub(super) fn eval_field_chain(
        &mut self,
        mut receiver: Value<'a>,
        idents: &[&'a str],
        args: &'t [Arg<'a>],
        fin: Option<Value<'a>>,
    ) -> Result<Value<'a>> {
        let n = idents.len();
        for ident in &idents[..n - 1] {
            receiver = self.eval_field(ident, &[], None, receiver)?;
        }
        self.eval_field(idents[n - 1], args, fin.as_ref(), receiver)
    }

    fn eval_field(
        &self,
        name: &str,
        args: &[Arg<'a>],
        fin: Option<&Value<'a>>,
        receiver: Value<'a>,
    ) -> Result<Value<'a>> {
        let has_args = args.len() > 1 || fin.is_some();
        match receiver {
            Value::Invalid => return Ok(Value::Invalid),
            Value::Struct(data) => {
                if let Some(v) = Value::field(data, name) {
                    if has_args {
                        return self.fail(format!(
                            "{name} has arguments but cannot be invoked as function"
                        ));
                    }
                    return Ok(v);
                }
            }
            Value::Map(m) => {
                if has_args {
                    return self.fail(format!("{name} is not a method but has arguments"));
                }
                return Ok(m.get(name).map_or(Value::Invalid, |v| Value::str(v)));
            }
            _ => {}
        }
        self.fail(format!(
            "can't evaluate field {name} in type {}",
            receiver.type_name()
        ))
    }

    fn var_value(&self, name: &str) -> Result<Value<'a>> {
        match self.vars.iter().rev().find(|(n, _)| *n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => self.fail(format!("undefined variable: {name}")),
        }
    }

    fn set_var(&mut self, name: &str, value: Value<'a>) -> Result<()> {
        match self.vars.iter_mut().rev().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                *v = value;
                Ok(())
            }
            None => self.fail(format!("undefined variable: {name}")),
        }
    }
}
