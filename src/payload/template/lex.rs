//! The lexer: template text into items (text, delimiters, and the words of an action).
//!
//! It follows the states of Go's `text/template/parse` lexer one for one (text, left
//! delimiter, comment, inside an action, space, identifier, field or variable, quoted string,
//! raw string, character, number), because the parser's error messages report the line of the
//! last item read, and a different split into items would move them.

use std::borrow::Cow;

use super::item::{Item, Kind};

const LEFT: &str = "{{";
const RIGHT: &str = "}}";
const LEFT_COMMENT: &str = "/*";
const RIGHT_COMMENT: &str = "*/";
/// A trim marker and the space beside it.
const TRIM_LEN: usize = 2;

#[derive(Clone, Copy)]
enum State {
    Text,
    LeftDelim,
    Comment,
    RightDelim,
    InsideAction,
    Space,
    Identifier,
    Field,
    Variable,
    Char,
    Number,
    Quote,
    RawQuote,
}

/// The lexer over one template text.
pub(super) struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    at_eof: bool,
    paren_depth: i32,
    line: usize,
    start_line: usize,
    item: Option<Item<'a>>,
    inside_action: bool,
}

impl<'a> Lexer<'a> {
    pub fn new(input: &'a str) -> Self {
        Lexer {
            input,
            pos: 0,
            start: 0,
            at_eof: false,
            paren_depth: 0,
            line: 1,
            start_line: 1,
            item: None,
            inside_action: false,
        }
    }

    /// The next item.
    pub fn next_item(&mut self) -> Item<'a> {
        self.item = None;
        let mut state = if self.inside_action {
            State::InsideAction
        } else {
            State::Text
        };
        loop {
            if let Some(next) = self.step(state) {
                state = next;
            } else {
                return self.item.take().unwrap_or(Item {
                    kind: Kind::Eof,
                    pos: self.pos,
                    val: Cow::Borrowed("EOF"),
                    line: self.start_line,
                });
            }
        }
    }

    fn step(&mut self, state: State) -> Option<State> {
        match state {
            State::Text => self.lex_text(),
            State::LeftDelim => self.lex_left_delim(),
            State::Comment => self.lex_comment(),
            State::RightDelim => self.lex_right_delim(),
            State::InsideAction => self.lex_inside_action(),
            State::Space => self.lex_space(),
            State::Identifier => self.lex_identifier(),
            State::Field => self.lex_field_or_variable(Kind::Field),
            State::Variable => {
                if self.at_terminator() {
                    return self.emit(Kind::Variable);
                }
                self.lex_field_or_variable(Kind::Variable)
            }
            State::Char => self.lex_quoted('\'', Kind::CharConstant, "character constant"),
            State::Number => self.lex_number(),
            State::Quote => self.lex_quoted('"', Kind::String, "quoted string"),
            State::RawQuote => self.lex_raw_quote(),
        }
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn next(&mut self) -> Option<char> {
        let Some(c) = self.rest().chars().next() else {
            self.at_eof = true;
            return None;
        };
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn peek(&mut self) -> Option<char> {
        let c = self.next();
        self.backup();
        c
    }

    fn backup(&mut self) {
        if !self.at_eof && self.pos > 0 {
            let c = self.input[..self.pos].chars().next_back().unwrap_or('\0');
            self.pos -= c.len_utf8();
            if c == '\n' {
                self.line -= 1;
            }
        }
    }

    fn this_item(&mut self, kind: Kind) -> Item<'a> {
        let item = Item {
            kind,
            pos: self.start,
            val: Cow::Borrowed(&self.input[self.start..self.pos]),
            line: self.start_line,
        };
        self.start = self.pos;
        self.start_line = self.line;
        item
    }

    fn emit(&mut self, kind: Kind) -> Option<State> {
        let item = self.this_item(kind);
        self.item = Some(item);
        None
    }

    fn ignore(&mut self) {
        self.line += newlines(&self.input[self.start..self.pos]);
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn accept(&mut self, valid: &str) -> bool {
        if self.next().is_some_and(|c| valid.contains(c)) {
            return true;
        }
        self.backup();
        false
    }

    fn accept_run(&mut self, valid: &str) {
        while self.next().is_some_and(|c| valid.contains(c)) {}
        self.backup();
    }

    fn errorf(&mut self, message: String) -> Option<State> {
        self.item = Some(Item {
            kind: Kind::Error,
            pos: self.start,
            val: Cow::Owned(message),
            line: self.start_line,
        });
        self.start = 0;
        self.pos = 0;
        self.input = &self.input[..0];
        None
    }

    fn lex_text(&mut self) -> Option<State> {
        if let Some(x) = self.rest().find(LEFT) {
            if x > 0 {
                self.pos += x;
                let delim_end = self.pos + LEFT.len();
                let trim = if has_left_trim_marker(&self.input[delim_end..]) {
                    let text = &self.input[self.start..self.pos];
                    text.len() - text.trim_end_matches(is_space).len()
                } else {
                    0
                };
                self.pos -= trim;
                self.line += newlines(&self.input[self.start..self.pos]);
                let item = self.this_item(Kind::Text);
                self.pos += trim;
                self.ignore();
                if !item.val.is_empty() {
                    self.item = Some(item);
                    return None;
                }
            }
            return Some(State::LeftDelim);
        }
        self.pos = self.input.len();
        if self.pos > self.start {
            self.line += newlines(&self.input[self.start..self.pos]);
            return self.emit(Kind::Text);
        }
        self.emit(Kind::Eof)
    }

    fn at_right_delim(&self) -> (bool, bool) {
        let rest = self.rest();
        if has_right_trim_marker(rest) && rest[TRIM_LEN..].starts_with(RIGHT) {
            return (true, true);
        }
        (rest.starts_with(RIGHT), false)
    }

    fn lex_left_delim(&mut self) -> Option<State> {
        self.pos += LEFT.len();
        let trim = has_left_trim_marker(self.rest());
        let after_marker = if trim { TRIM_LEN } else { 0 };
        if self.input[self.pos + after_marker..].starts_with(LEFT_COMMENT) {
            self.pos += after_marker;
            self.ignore();
            return Some(State::Comment);
        }
        let item = self.this_item(Kind::LeftDelim);
        self.inside_action = true;
        self.pos += after_marker;
        self.ignore();
        self.paren_depth = 0;
        self.item = Some(item);
        None
    }

    fn lex_comment(&mut self) -> Option<State> {
        self.pos += LEFT_COMMENT.len();
        let Some(x) = self.rest().find(RIGHT_COMMENT) else {
            return self.errorf("unclosed comment".into());
        };
        self.pos += x + RIGHT_COMMENT.len();
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.errorf("comment ends before closing delimiter".into());
        }
        self.line += newlines(&self.input[self.start..self.pos]);
        self.start = self.pos;
        self.start_line = self.line;
        if trim {
            self.pos += TRIM_LEN;
        }
        self.pos += RIGHT.len();
        if trim {
            self.pos += left_trim_len(self.rest());
        }
        self.ignore();
        Some(State::Text)
    }

    fn lex_right_delim(&mut self) -> Option<State> {
        let (_, trim) = self.at_right_delim();
        if trim {
            self.pos += TRIM_LEN;
            self.ignore();
        }
        self.pos += RIGHT.len();
        let item = self.this_item(Kind::RightDelim);
        if trim {
            self.pos += left_trim_len(self.rest());
            self.ignore();
        }
        self.inside_action = false;
        self.item = Some(item);
        None
    }

    fn lex_inside_action(&mut self) -> Option<State> {
        let (delim, _) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return Some(State::RightDelim);
            }
            return self.errorf("unclosed left paren".into());
        }
        let Some(r) = self.next() else {
            return self.errorf("unclosed action".into());
        };
        match r {
            _ if is_space(r) => {
                self.backup();
                Some(State::Space)
            }
            '=' => self.emit(Kind::Assign),
            ':' => {
                if self.next() != Some('=') {
                    return self.errorf("expected :=".into());
                }
                self.emit(Kind::Declare)
            }
            '|' => self.emit(Kind::Pipe),
            '"' => Some(State::Quote),
            '`' => Some(State::RawQuote),
            '$' => Some(State::Variable),
            '\'' => Some(State::Char),
            '.' if self
                .input
                .as_bytes()
                .get(self.pos)
                .is_some_and(|b| !b.is_ascii_digit()) =>
            {
                Some(State::Field)
            }
            '.' | '+' | '-' | '0'..='9' => {
                self.backup();
                Some(State::Number)
            }
            _ if is_alphanumeric(r) => {
                self.backup();
                Some(State::Identifier)
            }
            '(' => {
                self.paren_depth += 1;
                self.emit(Kind::LeftParen)
            }
            ')' => {
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    return self.errorf("unexpected right paren".into());
                }
                self.emit(Kind::RightParen)
            }
            ' '..='~' => self.emit(Kind::Char),
            _ => self.errorf(format!(
                "unrecognized character in action: {}",
                unicode_sharp(r)
            )),
        }
    }

    fn lex_space(&mut self) -> Option<State> {
        let mut spaces = 0;
        while self.peek().is_some_and(is_space) {
            self.next();
            spaces += 1;
        }
        let before = &self.input[self.pos - 1..];
        if has_right_trim_marker(before) && before[TRIM_LEN..].starts_with(RIGHT) {
            self.backup();
            if spaces == 1 {
                return Some(State::RightDelim);
            }
        }
        self.emit(Kind::Space)
    }

    fn lex_identifier(&mut self) -> Option<State> {
        let r = loop {
            match self.next() {
                Some(r) if is_alphanumeric(r) => {}
                r => break r,
            }
        };
        self.backup();
        if !self.at_terminator() {
            return self.errorf(format!("bad character {}", unicode_sharp_opt(r)));
        }
        let kind = match &self.input[self.start..self.pos] {
            "block" => Kind::Block,
            "break" => Kind::Break,
            "continue" => Kind::Continue,
            "define" => Kind::Define,
            "else" => Kind::Else,
            "end" => Kind::End,
            "if" => Kind::If,
            "range" => Kind::Range,
            "nil" => Kind::Nil,
            "template" => Kind::Template,
            "with" => Kind::With,
            "true" | "false" => Kind::Bool,
            _ => Kind::Identifier,
        };
        self.emit(kind)
    }

    fn lex_field_or_variable(&mut self, kind: Kind) -> Option<State> {
        if self.at_terminator() {
            return self.emit(if kind == Kind::Variable {
                Kind::Variable
            } else {
                Kind::Dot
            });
        }
        let r = loop {
            match self.next() {
                Some(r) if is_alphanumeric(r) => {}
                r => break r,
            }
        };
        self.backup();
        if !self.at_terminator() {
            return self.errorf(format!("bad character {}", unicode_sharp_opt(r)));
        }
        self.emit(kind)
    }

    fn at_terminator(&mut self) -> bool {
        match self.peek() {
            None | Some('.' | ',' | '|' | ':' | ')' | '(') => true,
            Some(r) if is_space(r) => true,
            Some(_) => self.rest().starts_with(RIGHT),
        }
    }

    /// A string or character constant up to its closing `quote`.
    fn lex_quoted(&mut self, quote: char, kind: Kind, what: &str) -> Option<State> {
        loop {
            match self.next() {
                Some('\\') => {
                    if matches!(self.next(), None | Some('\n')) {
                        return self.errorf(format!("unterminated {what}"));
                    }
                }
                None | Some('\n') => return self.errorf(format!("unterminated {what}")),
                Some(c) if c == quote => break,
                Some(_) => {}
            }
        }
        self.emit(kind)
    }

    fn lex_raw_quote(&mut self) -> Option<State> {
        loop {
            match self.next() {
                None => return self.errorf("unterminated raw quoted string".into()),
                Some('`') => break,
                Some(_) => {}
            }
        }
        self.emit(Kind::RawString)
    }

    fn lex_number(&mut self) -> Option<State> {
        if !self.scan_number() {
            let text = self.input[self.start..self.pos].to_string();
            return self.errorf(format!(
                "bad number syntax: {}",
                super::fmt::quote(&text, false)
            ));
        }
        if matches!(self.peek(), Some('+' | '-')) {
            if !self.scan_number() || !self.input[..self.pos].ends_with('i') {
                let text = self.input[self.start..self.pos].to_string();
                return self.errorf(format!(
                    "bad number syntax: {}",
                    super::fmt::quote(&text, false)
                ));
            }
            return self.emit(Kind::Complex);
        }
        self.emit(Kind::Number)
    }

    fn scan_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 23 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if self.peek().is_some_and(is_alphanumeric) {
            self.next();
            return false;
        }
        true
    }
}

fn newlines(s: &str) -> usize {
    memchr::memchr_iter(b'\n', s.as_bytes()).count()
}

/// Go's template spaces: space, tab, carriage return, newline.
pub(super) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Go's `isAlphaNumeric`: `_`, `unicode.IsLetter` (general category L) or `unicode.IsDigit`
/// (Nd), with Go's Unicode 15.0 tables. Rust's `is_alphabetic` also takes Nl (`Ⅻ`) and marks,
/// and `is_numeric` No (`²`), which Go rejects.
fn is_alphanumeric(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    c == '_'
        || c.is_ascii_alphanumeric()
        || (!c.is_ascii()
            && matches!(
                get_general_category(c),
                G::UppercaseLetter
                    | G::LowercaseLetter
                    | G::TitlecaseLetter
                    | G::ModifierLetter
                    | G::OtherLetter
                    | G::DecimalNumber
            ))
}

fn has_left_trim_marker(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && b[0] == b'-' && is_space(char::from(b[1]))
}

fn has_right_trim_marker(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && is_space(char::from(b[0])) && b[1] == b'-'
}

fn left_trim_len(s: &str) -> usize {
    s.len() - s.trim_start_matches(is_space).len()
}

/// `%#U` of Go's fmt: `U+263A '☺'`, or `U+0001` for a character that does not print.
pub(super) fn unicode_sharp(c: char) -> String {
    if super::fmt::is_print(c) {
        format!("U+{:04X} '{c}'", u32::from(c))
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

fn unicode_sharp_opt(c: Option<char>) -> String {
    // Go reports the end of input as the rune -1.
    c.map_or_else(|| "U+FFFFFFFFFFFFFFFF".to_string(), unicode_sharp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, String)> {
        let mut l = Lexer::new(text);
        let mut out = Vec::new();
        loop {
            let i = l.next_item();
            let done = matches!(i.kind, Kind::Eof | Kind::Error);
            out.push((i.kind, i.val.into_owned()));
            if done {
                return out;
            }
        }
    }

    #[test]
    fn splits_an_action_into_words() {
        let k = kinds("a {{- .X | printf \"%q\" -}} b");
        let got: Vec<Kind> = k.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            got,
            [
                Kind::Text,
                Kind::LeftDelim,
                Kind::Field,
                Kind::Space,
                Kind::Pipe,
                Kind::Space,
                Kind::Identifier,
                Kind::Space,
                Kind::String,
                Kind::RightDelim,
                Kind::Text,
                Kind::Eof
            ]
        );
        assert_eq!(k[0].1, "a");
        assert_eq!(k[10].1, "b");
    }

    #[test]
    fn identifiers_take_go_letters_and_digits_only() {
        // Go's unicode.IsLetter / IsDigit: Lt, Lm and Nd count, No (`²`), Nl (`Ⅻ`), spacing
        // marks (`ि`) and Unicode 16 letters (`Ᲊ`, U+1C89) do not.
        for ok in ["$ǅ", "$ʰ", "$x٣", "$中文", "$x０"] {
            assert_eq!(kinds(&format!("{{{{{ok}}}}}"))[1].0, Kind::Variable, "{ok}");
        }
        for bad in ["$x²", "$vⅫ", "$कि", "$a\u{1C89}"] {
            let k = kinds(&format!("{{{{{bad}}}}}"));
            let (kind, message) = k.last().unwrap();
            assert_eq!(*kind, Kind::Error, "{bad}");
            assert!(message.starts_with("bad character U+"), "{bad}: {message}");
        }
    }

    #[test]
    fn reports_an_unclosed_action() {
        let k = kinds("{{ .X");
        assert_eq!(k.last().unwrap().1, "unclosed action");
    }
}
