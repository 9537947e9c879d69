//! A fast path for the YAML that release manifests are made of: block mappings and sequences,
//! plain, quoted and literal scalars, one-line flow collections and comments.
//!
//! It exists for speed only. serde-saphyr stays the reference: [`parse_stream`] either returns
//! exactly the documents serde-saphyr would return (same values, same start lines), or `None`,
//! and the caller then parses the file with serde-saphyr. It returns `None` for anything outside
//! the subset it knows for sure (anchors, aliases, tags, multi-line flow collections,
//! directives, tabs, CR line ends, complex keys) and for anything that might be an
//! error, so every error message still comes from serde-saphyr. Scalars resolve as serde-saphyr
//! resolves them into `serde_json::Value` with `legacy_octal_numbers` (kubectl's YAML 1.1:
//! `0644` is 420, `on` and `y` are booleans). `parse_tests` checks both parsers agree on the
//! corpus and on mutated inputs.
//!
//! It can also keep only the headers of each document ([`Keep::Headers`]) and parse the rest
//! without building it, giving up exactly where a whole parse would.
//!
//! The block structure is parsed here; `block.rs` holds block scalars, `scalar.rs` plain and
//! quoted scalars and their resolution to values, `flow.rs` one-line flow collections, and
//! `keys.rs` the duplicate check of mappings that are not built.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};

use self::flow::Flow;
use self::scalar::{Quoted, plain_line, quoted_in_line, resolve_plain};
use super::json_size;

mod block;
mod flow;
mod keys;
mod scalar;

/// Nesting depth past which the fast path gives up (serde-saphyr's own limit is higher).
const MAX_DEPTH: usize = 64;
/// Input size past which the fast path gives up, so that serde-saphyr's node and event
/// budgets (`parse.rs`) are the ones that apply: the fast path's syntax needs at least 1.5
/// bytes per node, so 4 MiB stays under a budget of 4 M nodes. The largest file of a real
/// payload is under 1 MiB.
const MAX_BYTES: usize = 4 << 20;
/// Longest implicit key YAML allows, in characters.
const MAX_KEY_CHARS: usize = 1024;
/// Documents per file past which the fast path gives up (serde-saphyr's budget is 100 000).
const MAX_DOCUMENTS: usize = 50_000;

/// Gives up on the fast path. Tests record where, to show why a file is not taken.
#[track_caller]
fn give_up<T>() -> Option<T> {
    #[cfg(test)]
    tests::GAVE_UP_AT.set(std::panic::Location::caller().line());
    None
}

/// One document of a stream.
#[derive(Debug, PartialEq)]
pub(crate) struct Document {
    /// The 1-based line where its root node starts.
    pub line: usize,
    /// The document.
    pub value: Value,
    /// Bytes of source text from that line to the end of the document.
    pub source_len: usize,
    /// For a headers-only document, an upper bound of what the parts not kept add to its size
    /// as compact JSON: the whole object takes at most `json_size::bound(&value)` plus this.
    pub skipped_json: Option<usize>,
}

/// What the fast path keeps of each document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The whole document.
    Whole,
    /// Only the root's `apiVersion`, `kind` and `metadata` (see [`HEADER_KEYS`]). The rest is
    /// parsed and checked all the same, without building its value, so a stream gives up
    /// exactly where a whole parse gives up; its size as JSON is bounded as it goes
    /// ([`Document::skipped_json`]).
    Headers,
}

/// The root keys a headers-only parse keeps.
pub(crate) const HEADER_KEYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Parses a multi-document YAML stream, skipping empty documents. `None` means "not sure":
/// parse it with serde-saphyr instead.
#[cfg(test)]
pub(crate) fn parse_stream(text: &str) -> Option<Vec<Document>> {
    parse_stream_as(text, Keep::Whole)
}

/// [`parse_stream`], keeping of each document what `keep` says.
pub(crate) fn parse_stream_as(text: &str, keep: Keep) -> Option<Vec<Document>> {
    if text.len() > MAX_BYTES || !simple_chars(text) {
        return give_up();
    }
    let mut lines = split_lines(text);
    if text.ends_with('\n') {
        lines.pop();
    }
    let mut p = Parser {
        lines,
        end: 0,
        depth: 0,
        mode: keep,
        keep: true,
        headers: false,
        skipped_json: 0,
        seen: Vec::new(),
        entries: Vec::new(),
        items: Vec::new(),
    };
    let n = p.lines.len();
    let mut docs = Vec::new();
    let mut start = 0;
    loop {
        let mut end = start;
        while end < n && !is_marker(p.lines[end], "---") {
            let l = p.lines[end];
            if is_marker(l, "...") || l.starts_with('%') {
                return give_up();
            }
            end += 1;
        }
        if let Some(doc) = p.document(start, end)? {
            docs.push(doc);
            if docs.len() > MAX_DOCUMENTS {
                return give_up();
            }
        }
        if end == n {
            return Some(docs);
        }
        let rest = trim_spaces_start(&p.lines[end][3..]);
        if !rest.is_empty() && !rest.starts_with('#') {
            return give_up();
        }
        start = end + 1;
    }
}

/// `text` split at every `\n`, as `str::split` does. The vectorized search of `memchr` finds
/// several line ends per step, where `str::split` starts a search per line.
fn split_lines(text: &str) -> Vec<&str> {
    // Sized for lines of about 32 bytes, so that growing it rarely copies it.
    let mut lines = Vec::with_capacity(text.len() / 32 + 1);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', text.as_bytes()) {
        lines.push(&text[start..end]);
        start = end + 1;
    }
    lines.push(&text[start..]);
    lines
}

/// Whether the text holds only characters the fast path handles: printable characters and
/// `\n`. Tabs, CR, control characters, the BOM and the YAML 1.1 line breaks (NEL, LS, PS)
/// go to serde-saphyr.
fn simple_chars(text: &str) -> bool {
    // Printable ASCII and `\n` only, checked 64 bytes at a time without branches (the
    // compiler vectorizes the inner loop).
    let ascii = text.as_bytes().chunks(64).all(|chunk| {
        let bad = chunk.iter().fold(0u8, |acc, &b| {
            acc | u8::from((b < 0x20 && b != b'\n') || b >= 0x7f)
        });
        bad == 0
    });
    if ascii {
        return true;
    }
    text.chars().all(|c| match c {
        '\n' | ' '..='~' => true,
        '\u{a0}'..='\u{d7ff}' => !matches!(c, '\u{2028}' | '\u{2029}'),
        '\u{e000}'..='\u{fffd}' => c != '\u{feff}',
        '\u{10000}'.. => true,
        _ => false,
    })
}

/// `---` or `...` at column 0, followed by the end of the line or a space.
fn is_marker(line: &str, marker: &str) -> bool {
    line.starts_with(marker) && matches!(line.as_bytes().get(3), None | Some(b' '))
}

/// Leading spaces of a line (bytes, not chars: the hot loop of the fast path), eight bytes
/// at a time: manifests are indented deeply.
fn indent(line: &str) -> usize {
    const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
    let b = line.as_bytes();
    let mut words = b.chunks_exact(8);
    let mut n = 0;
    for word in &mut words {
        let mut w = [0; 8];
        w.copy_from_slice(word);
        // The first byte that is not a space is the lowest non-zero byte of the difference.
        let other = u64::from_le_bytes(w) ^ SPACES;
        if other != 0 {
            return n + (other.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + words.remainder().iter().take_while(|&&c| c == b' ').count()
}

/// `s` without leading spaces.
fn trim_spaces_start(s: &str) -> &str {
    &s[indent(s)..]
}

/// `s` without trailing spaces.
fn trim_spaces_end(s: &str) -> &str {
    &s[..s.len() - s.bytes().rev().take_while(|&b| b == b' ').count()]
}

/// Whether `rest` (the text at a node position) starts a block sequence entry.
fn is_entry(rest: &str) -> bool {
    rest.starts_with('-') && matches!(rest.as_bytes().get(1), None | Some(b' '))
}

/// What the text after a node ends with: nothing, or spaces and then a comment.
fn only_comment(rest: &str) -> bool {
    let t = trim_spaces_start(rest);
    t.is_empty() || (t.starts_with('#') && t.len() < rest.len())
}

struct Parser<'a> {
    lines: Vec<&'a str>,
    /// One past the last line of the current document.
    end: usize,
    depth: usize,
    /// What to keep of the documents.
    mode: Keep,
    /// Whether the node being parsed is kept. A node that is not is parsed and checked as
    /// usual, but its collections stay empty and its strings are not copied.
    keep: bool,
    /// Whether the current document keeps only its headers.
    headers: bool,
    /// The JSON size bound of what the current document does not keep, so far.
    skipped_json: usize,
    /// The keys of the mappings being parsed whose duplicates the map itself cannot find
    /// (they are not built, or not all their keys are kept); each mapping's run of keys
    /// starts where the stack was when it started.
    seen: Vec<Cow<'a, str>>,
    /// The entries of the mappings being built, each mapping's run starting where the stack
    /// was when it started: a mapping is built once its size is known, with no slack and no
    /// regrowth.
    entries: Vec<(Cow<'a, str>, Value)>,
    /// The items of the sequences being built, as `entries` holds mapping entries.
    items: Vec<Value>,
}

/// What is at a block node position.
enum KeyScan<'a> {
    /// A mapping key, and the byte offset in the line just after its `:`.
    Key(Cow<'a, str>, usize),
    /// Not a mapping key: a scalar or a collection.
    NotKey,
}

impl<'a> Parser<'a> {
    /// The document in lines `start..end`: `Some(None)` when it is empty.
    fn document(&mut self, start: usize, end: usize) -> Option<Option<Document>> {
        self.end = end;
        let Some(first) = self.next_content(start) else {
            return Some(None);
        };
        // Lines are slices of one text: their distance in memory is their distance in it.
        let last = self.lines[end - 1];
        let source_len =
            last.as_ptr() as usize + last.len() + 1 - self.lines[first].as_ptr() as usize;
        self.headers = self.mode == Keep::Headers;
        self.skipped_json = 0;
        let col = indent(self.lines[first]);
        // Only a block mapping root: anything else is rare and left to serde-saphyr.
        let KeyScan::Key(..) = self.key_at(first, col)? else {
            return give_up();
        };
        let (value, next) = self.mapping(first, col)?;
        if self.next_content(next).is_some() {
            return give_up();
        }
        Some(Some(Document {
            line: first + 1,
            value,
            source_len,
            skipped_json: self.headers.then_some(self.skipped_json),
        }))
    }

    /// The first line at or after `from` that is neither blank nor a comment.
    fn next_content(&self, from: usize) -> Option<usize> {
        (from..self.end).find(|&i| {
            let t = trim_spaces_start(self.lines[i]);
            !t.is_empty() && !t.starts_with('#')
        })
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// Whether the block node at `(li, col)` starts with a mapping key, and that key.
    fn key_at(&self, li: usize, col: usize) -> Option<KeyScan<'a>> {
        let line = self.lines[li];
        let s = &line[col..];
        let b = s.as_bytes();
        match b[0] {
            b'"' | b'\'' => {
                let Some((key, close)) = quoted_in_line(s) else {
                    return Some(KeyScan::NotKey);
                };
                let after = &s[close..];
                if let Some(rest) = after.strip_prefix(':')
                    && (rest.is_empty() || rest.starts_with(' '))
                {
                    if close > MAX_KEY_CHARS {
                        return give_up();
                    }
                    return Some(KeyScan::Key(Cow::Owned(key), col + close + 1));
                }
                if trim_spaces_start(after).starts_with(':') {
                    return give_up();
                }
                Some(KeyScan::NotKey)
            }
            b'-' | b'?' | b':' if matches!(b.get(1), None | Some(b' ')) => Some(KeyScan::NotKey),
            b'[' | b'{' | b'|' | b'>' | b'#' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b','
            | b']' | b'}' | b'-' | b'?' | b':' => Some(KeyScan::NotKey),
            _ => {
                let mut i = 0;
                while i < b.len() {
                    match b[i] {
                        b'#' if b[i - 1] == b' ' => return Some(KeyScan::NotKey),
                        b':' if matches!(b.get(i + 1), None | Some(b' ')) => {
                            let key = trim_spaces_end(&s[..i]);
                            // Keys are taken as written; null-like keys, merge keys and keys
                            // with comments or a second `: ` go to serde-saphyr.
                            if matches!(key, "" | "~" | "null" | "Null" | "NULL" | "<<")
                                || key.len() > MAX_KEY_CHARS
                            {
                                return give_up();
                            }
                            return Some(KeyScan::Key(Cow::Borrowed(key), col + i + 1));
                        }
                        _ => {}
                    }
                    i += 1;
                }
                Some(KeyScan::NotKey)
            }
        }
    }

    /// A block node that starts at `(li, col)`, the first content of its line or of a
    /// sequence entry. `parent` is the indentation of the enclosing block.
    fn node(&mut self, li: usize, col: usize, parent: usize) -> Option<(Value, usize)> {
        self.enter()?;
        let rest = &self.lines[li][col..];
        let out = if is_entry(rest) {
            self.sequence(li, col)
        } else if let KeyScan::Key(..) = self.key_at(li, col)? {
            self.mapping(li, col)
        } else {
            self.inline(li, col, parent)
        };
        self.depth -= 1;
        out
    }

    /// A block mapping whose first key is at `(li, m)`; its keys are at column `m`. The root
    /// of a headers-only document keeps only [`HEADER_KEYS`].
    fn mapping(&mut self, mut li: usize, m: usize) -> Option<(Value, usize)> {
        let keep = self.keep;
        let filter = self.headers && self.depth == 0;
        let mark = self.seen.len();
        let first = self.entries.len();
        let mut many: Option<HashSet<Cow<'a, str>>> = None;
        let mut map = Map::new();
        loop {
            let KeyScan::Key(key, after) = self.key_at(li, m)? else {
                return give_up();
            };
            let next = if keep && !filter {
                // Built whole at the end (duplicates are found then).
                let (value, next) = self.value(li, after, m)?;
                self.entries.push((key, value));
                next
            } else {
                if !self.first_time(mark, &mut many, key.clone()) {
                    return give_up();
                }
                let kept = keep && HEADER_KEYS.contains(&&*key);
                self.keep = kept;
                let (value, next) = self.value(li, after, m)?;
                self.keep = keep;
                if kept {
                    map.insert(key.into_owned(), value);
                } else {
                    // `"key":` and a comma.
                    self.skipped_json += json_size::text(&key) + 4 + json_size::bound(&value);
                }
                next
            };
            let Some(nl) = self.next_content(next) else {
                self.seen.truncate(mark);
                return Some((self.built_map(first, map)?, self.end));
            };
            let ind = indent(self.lines[nl]);
            if ind < m {
                self.seen.truncate(mark);
                return Some((self.built_map(first, map)?, nl));
            }
            if ind > m {
                return give_up();
            }
            li = nl;
        }
    }

    /// The mapping whose entries are on the stack from `first` (a whole mapping), or `map`
    /// (a mapping filled as it went). `None` on a duplicate key.
    fn built_map(&mut self, first: usize, map: Map<String, Value>) -> Option<Value> {
        if self.entries.len() == first {
            return Some(Value::Object(map));
        }
        let mut map = Map::with_capacity(self.entries.len() - first);
        for (key, value) in self.entries.drain(first..) {
            if map.insert(key.into_owned(), value).is_some() {
                return give_up();
            }
        }
        Some(Value::Object(map))
    }

    /// The value of a mapping key at indentation `m` whose `:` ends at byte `after`.
    fn value(&mut self, li: usize, after: usize, m: usize) -> Option<(Value, usize)> {
        let line = self.lines[li];
        let rest = &line[after..];
        if only_comment(rest) {
            let Some(nl) = self.next_content(li + 1) else {
                return Some((Value::Null, self.end));
            };
            let l = self.lines[nl];
            let ind = indent(l);
            if ind > m {
                return self.node(nl, ind, m);
            }
            if ind == m && is_entry(&l[m..]) {
                self.enter()?;
                let out = self.sequence(nl, m);
                self.depth -= 1;
                return out;
            }
            return Some((Value::Null, nl));
        }
        let col = line.len() - trim_spaces_start(rest).len();
        self.enter()?;
        let out = self.inline(li, col, m);
        self.depth -= 1;
        out
    }

    /// A block sequence whose entries start with `-` at column `s`.
    fn sequence(&mut self, mut li: usize, s: usize) -> Option<(Value, usize)> {
        let first = self.items.len();
        loop {
            let line = self.lines[li];
            let rest = &line[s + 1..];
            let (item, next) = if only_comment(rest) {
                match self.next_content(li + 1) {
                    None => (Value::Null, self.end),
                    Some(nl) => {
                        let ind = indent(self.lines[nl]);
                        if ind > s {
                            self.node(nl, ind, s)?
                        } else {
                            (Value::Null, nl)
                        }
                    }
                }
            } else {
                let col = line.len() - trim_spaces_start(rest).len();
                self.node(li, col, s)?
            };
            if self.keep {
                self.items.push(item);
            } else {
                self.skipped_json += json_size::bound(&item) + 1;
            }
            let Some(nl) = self.next_content(next) else {
                return Some((Value::Array(self.items.drain(first..).collect()), self.end));
            };
            let l = self.lines[nl];
            let ind = indent(l);
            if ind == s && is_entry(&l[s..]) {
                li = nl;
                continue;
            }
            if ind <= s {
                return Some((Value::Array(self.items.drain(first..).collect()), nl));
            }
            return give_up();
        }
    }

    /// A scalar or flow collection at `(li, col)`, inside a block indented at `parent`.
    /// Returns the value and the first line after it.
    fn inline(&mut self, li: usize, col: usize, parent: usize) -> Option<(Value, usize)> {
        let line = self.lines[li];
        let s = &line[col..];
        let b = s.as_bytes();
        match b[0] {
            b'|' => self.block_scalar(li, col, parent, false),
            b'>' => self.block_scalar(li, col, parent, true),
            b'"' | b'\'' => self.quoted(li, col, parent),
            b'[' | b'{' => {
                let mut f = Flow {
                    s: line,
                    pos: col,
                    depth: self.depth,
                };
                let v = f.node()?;
                only_comment(&line[f.pos..]).then_some((v, li + 1))
            }
            b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b']' | b'}' | b',' | b'#' => give_up(),
            b'-' | b'?' | b':' if matches!(b.get(1), None | Some(b' ')) => None,
            _ => self.plain(li, col, parent),
        }
    }

    /// A plain scalar, possibly folded over more-indented lines.
    fn plain(&mut self, li: usize, col: usize, parent: usize) -> Option<(Value, usize)> {
        let (first, commented) = plain_line(&self.lines[li][col..])?;
        if commented {
            // A comment ends the scalar; a continuation line would be an error.
            return Some((self.plain_value(first)?, li + 1));
        }
        let mut folded: Option<String> = None;
        let mut breaks = 0usize;
        let mut next = li + 1;
        for i in li + 1..self.end {
            let l = self.lines[i];
            let t = trim_spaces_start(l);
            if t.is_empty() {
                breaks += 1;
                continue;
            }
            if l.len() - t.len() <= parent || t.starts_with('#') {
                break;
            }
            // A continuation line may start with any indicator but a block one.
            if is_entry(t) || t.starts_with("? ") || t == "?" {
                return give_up();
            }
            let (t, commented) = plain_line(t)?;
            if commented {
                return give_up();
            }
            if !self.keep {
                // Not kept: nothing to fold, only to measure (each break prints as `\n`).
                // Folded text always resolves to a string (it holds a space or a line break,
                // which no number, boolean or null has).
                if folded.is_none() {
                    self.skipped_json += json_size::text(first);
                }
                self.skipped_json += json_size::text(t) + 2 * breaks.max(1);
                folded = Some(String::new());
                next = i + 1;
                breaks = 0;
                continue;
            }
            let buf = folded.get_or_insert_with(|| first.to_string());
            if breaks == 0 {
                buf.push(' ');
            }
            for _ in 0..breaks {
                buf.push('\n');
            }
            buf.push_str(t);
            breaks = 0;
            next = i + 1;
        }
        match folded {
            None => Some((self.plain_value(first)?, li + 1)),
            Some(_) if !self.keep => Some((Value::String(String::new()), next)),
            Some(buf) => Some((resolve_plain(&buf, true)?, next)),
        }
    }

    /// A one-line plain scalar resolved; a string not kept is measured.
    fn plain_value(&mut self, s: &str) -> Option<Value> {
        let v = resolve_plain(s, self.keep)?;
        if !self.keep && v.is_string() {
            self.skipped_json += json_size::text(s);
        }
        Some(v)
    }

    /// A single- or double-quoted scalar starting at `(li, col)`, possibly over several lines.
    fn quoted(&mut self, li: usize, col: usize, parent: usize) -> Option<(Value, usize)> {
        let line = self.lines[li];
        if let Some((v, close)) = quoted_in_line(&line[col..]) {
            return only_comment(&line[col + close..]).then_some((Value::String(v), li + 1));
        }
        let double = line.as_bytes()[col] == b'"';
        let mut buf = String::new();
        let mut q = Quoted {
            double,
            buf: &mut buf,
            ws_start: None,
            ended_escaped: false,
        };
        // The first line has no closing quote: it ends with a line break.
        if q.push_line(&line[col + 1..])?.is_ok() {
            return give_up();
        }
        let mut escaped_break = q.ended_escaped;
        let mut i = li + 1;
        loop {
            if i >= self.end {
                return give_up();
            }
            let l = self.lines[i];
            let t = trim_spaces_start(l);
            if t.is_empty() {
                q.buf.push('\n');
                i += 1;
                // An empty line after a break: the break itself is dropped.
                escaped_break = true;
                continue;
            }
            // serde-saphyr takes continuation lines as deep as the key; shallower ones it may not.
            if l.len() - t.len() < parent {
                return give_up();
            }
            if !escaped_break {
                q.buf.push(' ');
            }
            match q.push_line(t)? {
                Ok(close) => {
                    let after = &t[close..];
                    return only_comment(after).then_some((Value::String(buf), i + 1));
                }
                Err(()) => {
                    escaped_break = q.ended_escaped;
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
