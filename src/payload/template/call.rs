//! Calls of the built-in functions and the evaluation of their arguments, with Go's checks:
//! argument count, parameter types (`printf`'s format is a `string`), `and`/`or` evaluating
//! only as far as needed, and `error calling NAME: ...` for a function's own error.

use std::borrow::Cow;

use super::ast::Arg;
use super::exec::{At, Result, State};
use super::funcs::{Builtin, Param, lookup, reflect_string};
use super::value::Value;

impl<'t, 'a> State<'t, 'a> {
    pub(super) fn eval_function(
        &mut self,
        dot: &Value<'a>,
        ident: &'t Arg<'a>,
        name: &str,
        node: At<'t, 'a>,
        args: &'t [Arg<'a>],
        fin: Option<Value<'a>>,
    ) -> Result<Value<'a>> {
        self.at(At::Arg(ident));
        let Some(f) = lookup(name) else {
            return self.fail(format!(
                "{} is not a defined function",
                super::fmt::quote(name, false)
            ));
        };
        let (fixed, variadic) = f.signature();
        let num_in = args.len() + usize::from(fin.is_some());
        if variadic.is_some() {
            if num_in < fixed.len() {
                return self.fail(format!(
                    "wrong number of args for {name}: want at least {} got {}",
                    fixed.len(),
                    args.len()
                ));
            }
        } else if num_in != fixed.len() {
            return self.fail(format!(
                "wrong number of args for {name}: want {} got {num_in}",
                fixed.len()
            ));
        }
        if matches!(f, Builtin::And | Builtin::Or) {
            let mut v = Value::Invalid;
            for arg in args {
                v = self.eval_arg(dot, Param::Value, arg)?;
                if v.truth() == (f == Builtin::Or) {
                    return Ok(v);
                }
            }
            if let Some(fv) = fin {
                v = fv;
            }
            return Ok(v);
        }
        let mut argv = Vec::with_capacity(num_in + 1);
        if f == Builtin::Call {
            let callee = match args.first() {
                Some(a) => a.to_string(),
                None => fin.as_ref().map_or_else(String::new, reflect_string),
            };
            argv.push(Value::Str(Cow::Owned(callee)));
        }
        for (i, arg) in args.iter().enumerate() {
            let param = fixed.get(i).copied().or(variadic).unwrap_or(Param::Any);
            argv.push(self.eval_arg(dot, param, arg)?);
        }
        if let Some(fv) = fin {
            let param = if num_in - 1 < fixed.len() {
                fixed[num_in - 1]
            } else {
                variadic.unwrap_or(Param::Any)
            };
            argv.push(self.validate_type(fv, param)?);
        }
        match f.call(argv) {
            Ok(v) => Ok(v),
            Err(e) => {
                self.at(node);
                self.fail(format!("error calling {name}: {e}"))
            }
        }
    }

    pub(super) fn validate_type(&self, value: Value<'a>, param: Param) -> Result<Value<'a>> {
        if param != Param::String {
            return Ok(value);
        }
        match value {
            Value::Str(_) => Ok(value),
            Value::Invalid => self.fail("invalid value; expected string"),
            other => self.fail(format!(
                "wrong type for value; expected string; got {}",
                other.type_name()
            )),
        }
    }

    pub(super) fn eval_arg(
        &mut self,
        dot: &Value<'a>,
        param: Param,
        n: &'t Arg<'a>,
    ) -> Result<Value<'a>> {
        self.at(At::Arg(n));
        let v = match n {
            Arg::Dot { .. } => dot.clone(),
            Arg::Nil { .. } => {
                if param == Param::String {
                    return self.fail(format!("cannot assign nil to {}", param.go_name()));
                }
                return Ok(Value::Invalid);
            }
            Arg::Field { idents, .. } => {
                self.at(At::Arg(n));
                self.eval_field_chain(dot.clone(), idents, std::slice::from_ref(n), None)?
            }
            Arg::Variable { .. } => self.eval_variable(dot, n, &[], None)?,
            Arg::Pipe(p) => self.eval_pipeline(dot, p)?,
            Arg::Identifier { name, .. } => {
                self.eval_function(dot, n, name, At::Arg(n), &[], None)?
            }
            Arg::Chain { .. } => self.eval_chain(dot, n, &[], None)?,
            Arg::Bool { value, .. } => {
                if param == Param::String {
                    return self.fail(format!("expected string; found {n}"));
                }
                Value::Bool(*value)
            }
            Arg::Number { number, .. } => {
                if param == Param::String {
                    return self.fail(format!("expected string; found {n}"));
                }
                self.ideal_constant(n, number)?
            }
            Arg::String { text, .. } => Value::Str(text.clone()),
        };
        self.validate_type(v, param)
    }
}
