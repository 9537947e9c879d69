//! The parser: items into the trees of a template and of each `define` and `block` in it.
//!
//! It keeps the shape of Go's parser (three items of lookahead, one parser state per tree being
//! defined) because a parse error reports the line of the last item that state read: a parser
//! that looked ahead differently would name other lines.

use std::collections::HashMap;

use super::ast::{Branch, List, Node, TemplateCall, is_empty};
use super::item::{Item, Kind};
use super::lex::Lexer;
use super::literal;

/// Deepest nesting of parentheses Go accepts.
pub(super) const MAX_PAREN_DEPTH: usize = 10_000;

/// The trees of one parse: the template's own and each defined one, by name.
pub(super) type Trees<'a> = HashMap<String, List<'a>>;

/// A parse error: Go's message and the line it names.
#[derive(Debug)]
pub(super) struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Parses `text` as the template `name`.
///
/// # Errors
/// The first parse error, as Go reports it.
pub(super) fn parse<'a>(name: &str, text: &'a str) -> Result<Trees<'a>, ParseError> {
    let mut lex = Lexer::new(text);
    let mut trees = Trees::new();
    let mut top = Parser::new(&mut lex, &mut trees, name, name);
    let root = top.parse_top()?;
    top.add(root)?;
    Ok(trees)
}

/// Either a node, or the `{{end}}` / `{{else}}` that closes a list.
enum Parsed<'a> {
    Node(Node<'a>),
    End,
    /// `{{else}}`, with the position of the keyword after it (`if`/`with`), if any.
    Else,
}

impl Parsed<'_> {
    fn describe(&self) -> &'static str {
        match self {
            Parsed::End => "{{end}}",
            _ => "{{else}}",
        }
    }
}

pub(super) struct Parser<'p, 'a> {
    pub(super) lex: &'p mut Lexer<'a>,
    pub(super) trees: &'p mut Trees<'a>,
    /// The template being parsed (for error messages).
    pub(super) parse_name: &'p str,
    /// The name of the tree this state builds.
    pub(super) name: String,
    pub(super) token: [Item<'a>; 3],
    pub(super) peek_count: usize,
    pub(super) vars: Vec<&'a str>,
    pub(super) action_line: usize,
    pub(super) range_depth: usize,
    pub(super) paren_depth: usize,
}

impl<'p, 'a> Parser<'p, 'a> {
    fn new(
        lex: &'p mut Lexer<'a>,
        trees: &'p mut Trees<'a>,
        parse_name: &'p str,
        name: &str,
    ) -> Self {
        Parser {
            lex,
            trees,
            parse_name,
            name: name.to_string(),
            token: [Item::none(), Item::none(), Item::none()],
            peek_count: 0,
            vars: vec!["$"],
            action_line: 0,
            range_depth: 0,
            paren_depth: 0,
        }
    }

    /// A state for a nested `define` or `block`, on the same lexer and trees.
    fn child<'q>(&'q mut self, name: &str) -> Parser<'q, 'a> {
        Parser::new(self.lex, self.trees, self.parse_name, name)
    }

    pub(super) fn error<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        let line = self.token[0].line;
        Err(ParseError {
            line,
            message: format!("template: {}:{line}: {}", self.parse_name, message.into()),
        })
    }

    pub(super) fn next(&mut self) -> Item<'a> {
        if self.peek_count > 0 {
            self.peek_count -= 1;
        } else {
            self.token[0] = self.lex.next_item();
        }
        self.token[self.peek_count].clone()
    }

    pub(super) fn backup(&mut self) {
        self.peek_count += 1;
    }

    pub(super) fn backup2(&mut self, t1: Item<'a>) {
        self.token[1] = t1;
        self.peek_count = 2;
    }

    pub(super) fn backup3(&mut self, t2: Item<'a>, t1: Item<'a>) {
        self.token[1] = t1;
        self.token[2] = t2;
        self.peek_count = 3;
    }

    pub(super) fn peek(&mut self) -> Item<'a> {
        if self.peek_count > 0 {
            return self.token[self.peek_count - 1].clone();
        }
        self.peek_count = 1;
        self.token[0] = self.lex.next_item();
        self.token[0].clone()
    }

    pub(super) fn next_non_space(&mut self) -> Item<'a> {
        loop {
            let t = self.next();
            if t.kind != Kind::Space {
                return t;
            }
        }
    }

    pub(super) fn peek_non_space(&mut self) -> Item<'a> {
        let t = self.next_non_space();
        self.backup();
        t
    }

    fn expect(&mut self, kind: Kind, context: &str) -> Result<Item<'a>, ParseError> {
        let t = self.next_non_space();
        if t.kind != kind {
            return self.unexpected(&t, context);
        }
        Ok(t)
    }

    pub(super) fn unexpected<T>(&self, token: &Item<'a>, context: &str) -> Result<T, ParseError> {
        if token.kind == Kind::Error {
            let mut extra = String::new();
            if self.action_line != 0 && self.action_line != token.line {
                extra = format!(
                    " in action started at {}:{}",
                    self.parse_name, self.action_line
                );
                if token.val.ends_with(" action") {
                    extra = extra[" in action".len()..].to_string();
                }
            }
            return self.error(format!("{token}{extra}"));
        }
        self.error(format!("unexpected {token} in {context}"))
    }

    /// Records the finished tree `root` under this state's name, as Go's `add`.
    fn add(&mut self, root: List<'a>) -> Result<(), ParseError> {
        match self.trees.get(&self.name) {
            Some(old) if !is_empty(old) => {
                if !is_empty(&root) {
                    return self.error(format!(
                        "template: multiple definition of template {}",
                        super::fmt::quote(&self.name, false)
                    ));
                }
            }
            _ => {
                self.trees.insert(self.name.clone(), root);
            }
        }
        Ok(())
    }

    fn parse_top(&mut self) -> Result<List<'a>, ParseError> {
        let mut root = List::new();
        while self.peek().kind != Kind::Eof {
            if self.peek().kind == Kind::LeftDelim {
                let delim = self.next();
                if self.next_non_space().kind == Kind::Define {
                    let mut def = self.child("definition");
                    def.parse_definition()?;
                    continue;
                }
                self.backup2(delim);
            }
            match self.text_or_action()? {
                Parsed::Node(n) => root.push(n),
                other => return self.error(format!("unexpected {}", other.describe())),
            }
        }
        Ok(root)
    }

    fn parse_definition(&mut self) -> Result<(), ParseError> {
        const CONTEXT: &str = "define clause";
        let name = self.next_non_space();
        if !matches!(name.kind, Kind::String | Kind::RawString) {
            return self.unexpected(&name, CONTEXT);
        }
        self.name = match literal::unquote(&name.val) {
            Ok(s) => s.into_owned(),
            Err(e) => return self.error(e),
        };
        self.expect(Kind::RightDelim, CONTEXT)?;
        let (root, end) = self.item_list()?;
        if !matches!(end, Parsed::End) {
            return self.error(format!("unexpected {} in {CONTEXT}", end.describe()));
        }
        self.add(root)
    }

    fn item_list(&mut self) -> Result<(List<'a>, Parsed<'a>), ParseError> {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
            let mut list = List::new();
            while self.peek_non_space().kind != Kind::Eof {
                match self.text_or_action()? {
                    Parsed::Node(n) => list.push(n),
                    end => return Ok((list, end)),
                }
            }
            self.error("unexpected EOF")
        })
    }

    fn text_or_action(&mut self) -> Result<Parsed<'a>, ParseError> {
        let token = self.next_non_space();
        match token.kind {
            Kind::Text => Ok(Parsed::Node(Node::Text(match token.val {
                std::borrow::Cow::Borrowed(s) => s,
                std::borrow::Cow::Owned(_) => "",
            }))),
            Kind::LeftDelim => {
                self.action_line = token.line;
                let r = self.action();
                self.action_line = 0;
                r
            }
            _ => self.unexpected(&token, "input"),
        }
    }

    fn action(&mut self) -> Result<Parsed<'a>, ParseError> {
        let token = self.next_non_space();
        match token.kind {
            Kind::Block => return self.block_control(),
            Kind::Break => return self.loop_control("{{break}}", Node::Break),
            Kind::Continue => return self.loop_control("{{continue}}", Node::Continue),
            Kind::Else => return self.else_control(),
            Kind::End => {
                self.expect(Kind::RightDelim, "end")?;
                return Ok(Parsed::End);
            }
            Kind::If => return self.branch_control("if").map(|b| Parsed::Node(Node::If(b))),
            Kind::Range => {
                return self
                    .branch_control("range")
                    .map(|b| Parsed::Node(Node::Range(b)));
            }
            Kind::Template => return self.template_control(),
            Kind::With => {
                return self
                    .branch_control("with")
                    .map(|b| Parsed::Node(Node::With(b)));
            }
            _ => {}
        }
        self.backup();
        let pipe = self.pipeline("command", Kind::RightDelim)?;
        Ok(Parsed::Node(Node::Action(pipe)))
    }

    fn loop_control(&mut self, what: &str, node: Node<'a>) -> Result<Parsed<'a>, ParseError> {
        let token = self.next_non_space();
        if token.kind != Kind::RightDelim {
            return self.unexpected(&token, what);
        }
        if self.range_depth == 0 {
            return self.error(format!("{what} outside {{{{range}}}}"));
        }
        Ok(Parsed::Node(node))
    }

    fn else_control(&mut self) -> Result<Parsed<'a>, ParseError> {
        let peek = self.peek_non_space();
        if matches!(peek.kind, Kind::If | Kind::With) {
            return Ok(Parsed::Else);
        }
        self.expect(Kind::RightDelim, "else")?;
        Ok(Parsed::Else)
    }

    fn branch_control(&mut self, context: &str) -> Result<Box<Branch<'a>>, ParseError> {
        let vars = self.vars.len();
        let r = self.branch_control_inner(context);
        self.vars.truncate(vars);
        r
    }

    fn branch_control_inner(&mut self, context: &str) -> Result<Box<Branch<'a>>, ParseError> {
        let pipe = self.pipeline(context, Kind::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let (list, next) = self.item_list()?;
        if context == "range" {
            self.range_depth -= 1;
        }
        let mut else_list = None;
        if let Parsed::Else = next {
            if context == "if" && self.peek().kind == Kind::If {
                self.next();
                let inner = self.branch_control("if")?;
                else_list = Some(vec![Node::If(inner)]);
            } else if context == "with" && self.peek().kind == Kind::With {
                self.next();
                let inner = self.branch_control("with")?;
                else_list = Some(vec![Node::With(inner)]);
            } else {
                let (list, next) = self.item_list()?;
                if !matches!(next, Parsed::End) {
                    return self.error(format!("expected end; found {}", next.describe()));
                }
                else_list = Some(list);
            }
        }
        Ok(Box::new(Branch {
            pipe,
            list,
            else_list,
        }))
    }

    fn block_control(&mut self) -> Result<Parsed<'a>, ParseError> {
        const CONTEXT: &str = "block clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let pipe = self.pipeline(CONTEXT, Kind::RightDelim)?;
        let (root, end) = {
            let mut block = self.child(&name);
            let (root, end) = block.item_list()?;
            if matches!(end, Parsed::End) {
                block.add(root)?;
                (None, end)
            } else {
                (Some(root), end)
            }
        };
        if root.is_some() {
            return self.error(format!("unexpected {} in {CONTEXT}", end.describe()));
        }
        Ok(Parsed::Node(Node::Template(TemplateCall {
            pos: token.pos,
            name,
            pipe: Some(pipe),
        })))
    }

    fn template_control(&mut self) -> Result<Parsed<'a>, ParseError> {
        const CONTEXT: &str = "template clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let mut pipe = None;
        if self.next_non_space().kind != Kind::RightDelim {
            self.backup();
            pipe = Some(self.pipeline(CONTEXT, Kind::RightDelim)?);
        }
        Ok(Parsed::Node(Node::Template(TemplateCall {
            pos: token.pos,
            name,
            pipe,
        })))
    }

    fn template_name(&self, token: &Item<'a>, context: &str) -> Result<String, ParseError> {
        match token.kind {
            Kind::String | Kind::RawString => match literal::unquote(&token.val) {
                Ok(s) => Ok(s.into_owned()),
                Err(e) => self.error(e),
            },
            _ => self.unexpected(token, context),
        }
    }
}

/// The text of an item read from the input (only error items own theirs).
pub(super) fn borrowed<'a>(val: &std::borrow::Cow<'a, str>) -> &'a str {
    match val {
        std::borrow::Cow::Borrowed(s) => s,
        std::borrow::Cow::Owned(_) => "",
    }
}
