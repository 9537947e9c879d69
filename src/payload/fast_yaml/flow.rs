//! One-line flow collections (`[...]`, `{...}`) of the fast path.

use serde_json::{Map, Value};

use super::scalar::{quoted_in_line, resolve_plain};
use super::{MAX_DEPTH, MAX_KEY_CHARS, give_up, trim_spaces_end};

/// A flow collection (`[...]`, `{...}`) that ends on its line.
pub(super) struct Flow<'s> {
    pub(super) s: &'s str,
    pub(super) pos: usize,
    pub(super) depth: usize,
}

impl Flow<'_> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    pub(super) fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    pub(super) fn node(&mut self) -> Option<Value> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return give_up();
        }
        let v = match self.peek()? {
            b'[' => self.sequence(),
            b'{' => self.mapping(),
            b'"' | b'\'' => self.quoted(),
            _ => {
                let text = self.plain()?;
                resolve_plain(text, true)
            }
        };
        self.depth -= 1;
        v
    }

    pub(super) fn quoted(&mut self) -> Option<Value> {
        let (v, close) = quoted_in_line(&self.s[self.pos..])?;
        self.pos += close;
        Some(Value::String(v))
    }

    /// A plain scalar in flow context: up to `,`, a bracket, or a comment. Any `:` gives up.
    pub(super) fn plain(&mut self) -> Option<&str> {
        let b = self.s.as_bytes();
        let start = self.pos;
        match b[start] {
            b'-' | b'?' if matches!(b.get(start + 1), None | Some(b' ' | b',' | b']' | b'}')) => {
                return give_up();
            }
            b'#' | b'&' | b'*' | b'!' | b'|' | b'>' | b'%' | b'@' | b'`' | b':' | b',' | b']'
            | b'}' => return give_up(),
            _ => {}
        }
        let mut i = start;
        while i < b.len() {
            match b[i] {
                b',' | b'[' | b']' | b'{' | b'}' => break,
                b':' => return give_up(),
                b'#' if b[i - 1] == b' ' => return give_up(),
                _ => i += 1,
            }
        }
        self.pos = i;
        Some(trim_spaces_end(&self.s[start..i]))
    }

    pub(super) fn sequence(&mut self) -> Option<Value> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_spaces();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(Value::Array(items));
        }
        loop {
            self.skip_spaces();
            items.push(self.node()?);
            self.skip_spaces();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.skip_spaces();
                    if self.peek()? == b']' {
                        return give_up();
                    }
                }
                b']' => {
                    self.pos += 1;
                    return Some(Value::Array(items));
                }
                _ => return give_up(),
            }
        }
    }

    pub(super) fn mapping(&mut self) -> Option<Value> {
        self.pos += 1;
        let mut map = Map::new();
        self.skip_spaces();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(Value::Object(map));
        }
        loop {
            self.skip_spaces();
            let key = match self.peek()? {
                b'"' | b'\'' => {
                    let (k, close) = quoted_in_line(&self.s[self.pos..])?;
                    self.pos += close;
                    if k.chars().count() > MAX_KEY_CHARS {
                        return give_up();
                    }
                    k
                }
                _ => {
                    let b = self.s.as_bytes();
                    let start = self.pos;
                    if !b[start].is_ascii_alphanumeric() {
                        return give_up();
                    }
                    let mut i = start;
                    while i < b.len() && !matches!(b[i], b':' | b',' | b'[' | b']' | b'{' | b'}') {
                        if b[i] == b'#' && b[i - 1] == b' ' {
                            return give_up();
                        }
                        i += 1;
                    }
                    self.pos = i;
                    let k = trim_spaces_end(&self.s[start..i]);
                    if matches!(k, "null" | "Null" | "NULL") || k.len() < i - start {
                        return give_up();
                    }
                    if k.len() > MAX_KEY_CHARS {
                        return give_up();
                    }
                    k.to_string()
                }
            };
            if self.peek()? != b':' || self.s.as_bytes().get(self.pos + 1) != Some(&b' ') {
                return give_up();
            }
            self.pos += 1;
            self.skip_spaces();
            if matches!(self.peek()?, b',' | b'}') {
                return give_up();
            }
            let value = self.node()?;
            let serde_json::map::Entry::Vacant(slot) = map.entry(key) else {
                return give_up();
            };
            slot.insert(value);
            self.skip_spaces();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.skip_spaces();
                    if self.peek()? == b'}' {
                        return give_up();
                    }
                }
                b'}' => {
                    self.pos += 1;
                    return Some(Value::Object(map));
                }
                _ => return give_up(),
            }
        }
    }
}
