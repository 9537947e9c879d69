//! The parser's pipelines and operands: variable declarations, commands, field chains and
//! constants.

use super::ast::{Arg, Command, Pipe};
use super::funcs::is_builtin;
use super::item::Kind;
use super::literal;
use super::parse::{MAX_PAREN_DEPTH, ParseError, Parser, borrowed};

impl<'a> Parser<'_, 'a> {
    pub(super) fn pipeline(&mut self, context: &str, end: Kind) -> Result<Pipe<'a>, ParseError> {
        let token = self.peek_non_space();
        let mut pipe = Pipe {
            pos: token.pos,
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        loop {
            let v = self.peek_non_space();
            if v.kind != Kind::Variable {
                break;
            }
            self.next();
            let after = self.peek();
            let next = self.peek_non_space();
            let name = borrowed(&v.val);
            if matches!(next.kind, Kind::Assign | Kind::Declare) {
                pipe.is_assign = next.kind == Kind::Assign;
                self.next_non_space();
                pipe.decl.push(name);
                self.vars.push(name);
            } else if next.kind == Kind::Char && next.val == "," {
                self.next_non_space();
                pipe.decl.push(name);
                self.vars.push(name);
                if context == "range" && pipe.decl.len() < 2 {
                    match self.peek_non_space().kind {
                        Kind::Variable | Kind::RightDelim | Kind::RightParen => continue,
                        _ => return self.error("range can only initialize variables"),
                    }
                }
                return self.error(format!("too many declarations in {context}"));
            } else if after.kind == Kind::Space {
                self.backup3(v, after);
            } else {
                self.backup2(v);
            }
            break;
        }
        loop {
            let token = self.next_non_space();
            match token.kind {
                k if k == end => {
                    self.check_pipeline(&pipe, context)?;
                    return Ok(pipe);
                }
                Kind::Bool
                | Kind::CharConstant
                | Kind::Complex
                | Kind::Dot
                | Kind::Field
                | Kind::Identifier
                | Kind::Number
                | Kind::Nil
                | Kind::RawString
                | Kind::String
                | Kind::Variable
                | Kind::LeftParen => {
                    self.backup();
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => return self.unexpected(&token, context),
            }
        }
    }

    fn check_pipeline(&self, pipe: &Pipe<'a>, context: &str) -> Result<(), ParseError> {
        if pipe.cmds.is_empty() {
            return self.error(format!("missing value for {context}"));
        }
        for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
            if matches!(
                c.args[0],
                Arg::Bool { .. }
                    | Arg::Dot { .. }
                    | Arg::Nil { .. }
                    | Arg::Number { .. }
                    | Arg::String { .. }
            ) {
                return self.error(format!(
                    "non executable command in pipeline stage {}",
                    i + 1
                ));
            }
        }
        Ok(())
    }

    fn command(&mut self) -> Result<Command<'a>, ParseError> {
        let pos = self.peek_non_space().pos;
        let mut cmd = Command {
            pos,
            args: Vec::new(),
        };
        loop {
            self.peek_non_space();
            if let Some(operand) = self.operand()? {
                cmd.args.push(operand);
            }
            let token = self.next();
            match token.kind {
                Kind::Space => continue,
                Kind::RightDelim | Kind::RightParen => self.backup(),
                Kind::Pipe => {}
                _ => return self.unexpected(&token, "operand"),
            }
            break;
        }
        if cmd.args.is_empty() {
            return self.error("empty command");
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> Result<Option<Arg<'a>>, ParseError> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().kind != Kind::Field {
            return Ok(Some(node));
        }
        let pos = self.peek().pos;
        let mut fields = Vec::new();
        while self.peek().kind == Kind::Field {
            let f = self.next();
            fields.push(&borrowed(&f.val)[1..]);
        }
        Ok(Some(match node {
            Arg::Field { mut idents, .. } => {
                idents.extend(fields);
                Arg::Field { pos, idents }
            }
            Arg::Variable { mut idents, .. } => {
                idents.extend(fields);
                Arg::Variable { pos, idents }
            }
            Arg::Bool { .. }
            | Arg::String { .. }
            | Arg::Number { .. }
            | Arg::Nil { .. }
            | Arg::Dot { .. } => {
                return self.error(format!(
                    "unexpected . after term {}",
                    super::fmt::quote(&node.to_string(), false)
                ));
            }
            node => Arg::Chain {
                pos,
                node: Box::new(node),
                fields,
            },
        }))
    }

    fn term(&mut self) -> Result<Option<Arg<'a>>, ParseError> {
        let token = self.next_non_space();
        let pos = token.pos;
        let arg = match token.kind {
            Kind::Identifier => {
                let name = borrowed(&token.val);
                if !is_builtin(name) {
                    return self.error(format!(
                        "function {} not defined",
                        super::fmt::quote(name, false)
                    ));
                }
                Arg::Identifier { pos, name }
            }
            Kind::Dot => Arg::Dot { pos },
            Kind::Nil => Arg::Nil { pos },
            Kind::Variable => {
                let name = borrowed(&token.val);
                if !self.vars.contains(&name) {
                    return self.error(format!(
                        "undefined variable {}",
                        super::fmt::quote(name, false)
                    ));
                }
                Arg::Variable {
                    pos,
                    idents: vec![name],
                }
            }
            Kind::Field => Arg::Field {
                pos,
                idents: vec![&borrowed(&token.val)[1..]],
            },
            Kind::Bool => Arg::Bool {
                pos,
                value: token.val == "true",
            },
            Kind::CharConstant | Kind::Complex | Kind::Number => {
                let text = borrowed(&token.val);
                match literal::number(
                    text,
                    token.kind == Kind::CharConstant,
                    token.kind == Kind::Complex,
                ) {
                    Ok(number) => Arg::Number { pos, number },
                    Err(e) => return self.error(e),
                }
            }
            Kind::LeftParen => {
                if self.paren_depth >= MAX_PAREN_DEPTH {
                    return self.error("max expression depth exceeded");
                }
                self.paren_depth += 1;
                let pipe = stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
                    self.pipeline("parenthesized pipeline", Kind::RightParen)
                });
                self.paren_depth -= 1;
                Arg::Pipe(Box::new(pipe?))
            }
            Kind::String | Kind::RawString => {
                let quoted = borrowed(&token.val);
                match literal::unquote(quoted) {
                    Ok(text) => Arg::String { pos, quoted, text },
                    Err(e) => return self.error(e),
                }
            }
            _ => {
                self.backup();
                return Ok(None);
            }
        };
        Ok(Some(arg))
    }
}
