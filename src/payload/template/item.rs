//! The items the lexer produces: kinds, and how a parse error shows one.

use std::borrow::Cow;

/// What an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A lexing error; the value is its message.
    Error,
    /// `true` or `false`.
    Bool,
    /// A printable ASCII character not otherwise used (`,`, `;`, ...).
    Char,
    /// A quoted character constant (`'a'`).
    CharConstant,
    /// A complex constant (`1+2i`).
    Complex,
    /// `=`.
    Assign,
    /// `:=`.
    Declare,
    /// The end of the input.
    Eof,
    /// `.Name`.
    Field,
    /// A word that is not a keyword (a function name).
    Identifier,
    /// `{{`.
    LeftDelim,
    /// `(`.
    LeftParen,
    /// A number.
    Number,
    /// `|`.
    Pipe,
    /// A backquoted string, quotes included.
    RawString,
    /// `}}`.
    RightDelim,
    /// `)`.
    RightParen,
    /// A run of spaces inside an action.
    Space,
    /// A double-quoted string, quotes included.
    String,
    /// Text outside actions.
    Text,
    /// `$` or `$name`.
    Variable,
    // Keywords.
    Block,
    Break,
    Continue,
    Dot,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

impl Kind {
    fn is_keyword(self) -> bool {
        matches!(
            self,
            Kind::Block
                | Kind::Break
                | Kind::Continue
                | Kind::Dot
                | Kind::Define
                | Kind::Else
                | Kind::End
                | Kind::If
                | Kind::Nil
                | Kind::Range
                | Kind::Template
                | Kind::With
        )
    }
}

/// One item: its kind, byte offset, text and the line it starts on.
#[derive(Debug, Clone)]
pub(super) struct Item<'a> {
    pub kind: Kind,
    pub pos: usize,
    pub val: Cow<'a, str>,
    pub line: usize,
}

impl Item<'_> {
    /// The zero item (before anything was read).
    pub fn none() -> Self {
        Item {
            kind: Kind::Eof,
            pos: 0,
            val: Cow::Borrowed(""),
            line: 0,
        }
    }
}

impl std::fmt::Display for Item<'_> {
    /// As Go shows an item in a parse error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Kind::Eof => f.write_str("EOF"),
            Kind::Error => f.write_str(&self.val),
            k if k.is_keyword() => write!(f, "<{}>", self.val),
            _ if self.val.len() > 10 => {
                let cut: String = self.val.chars().take(10).collect();
                write!(f, "{}...", super::fmt::quote(&cut, false))
            }
            _ => f.write_str(&super::fmt::quote(&self.val, false)),
        }
    }
}
