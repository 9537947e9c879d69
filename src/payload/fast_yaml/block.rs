//! Literal (`|`) and folded (`>`) block scalars of the fast path.

use serde_json::Value;

use super::{Parser, give_up, indent, json_size, only_comment, trim_spaces_start};

/// Block scalar chomping: `|-`, `|`, `|+`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chomp {
    Strip,
    Clip,
    Keep,
}

/// The text of a block scalar, built only when its value is kept: a scalar that is not kept
/// (see `Parser::keep`) is checked line by line all the same, so the same input gives up, and
/// only measured (`json`: the bytes it takes inside a JSON string, at most).
struct Text {
    buf: String,
    keep: bool,
    json: usize,
}

impl Text {
    fn push(&mut self, c: char) {
        if self.keep {
            self.buf.push(c);
        } else {
            self.json += json_size::text(c.encode_utf8(&mut [0; 4]));
        }
    }

    fn push_str(&mut self, s: &str) {
        if self.keep {
            self.buf.push_str(s);
        } else {
            self.json += json_size::text(s);
        }
    }

    fn newlines(&mut self, n: usize) {
        for _ in 0..n {
            self.push('\n');
        }
    }
}

impl Parser<'_> {
    /// A literal (`|`) or folded (`>`) block scalar whose header is at `(li, col)`, with
    /// chomping (`-`, `+`) but no indentation indicator.
    pub(super) fn block_scalar(
        &mut self,
        li: usize,
        col: usize,
        parent: usize,
        folded: bool,
    ) -> Option<(Value, usize)> {
        let header = &self.lines[li][col + 1..];
        let (chomp, rest) = match header.as_bytes().first() {
            Some(b'-') => (Chomp::Strip, &header[1..]),
            Some(b'+') => (Chomp::Keep, &header[1..]),
            _ => (Chomp::Clip, header),
        };
        if !only_comment(rest) {
            return give_up();
        }
        let mut i = li + 1;
        let mut leading = 0usize;
        while i < self.end && trim_spaces_start(self.lines[i]).is_empty() {
            if self.lines[i].len() > parent {
                return give_up();
            }
            leading += 1;
            i += 1;
        }
        if i == self.end || indent(self.lines[i]) <= parent {
            // An empty scalar.
            if leading > 0 || chomp == Chomp::Keep {
                return give_up();
            }
            return Some((Value::String(String::new()), i));
        }
        let n = indent(self.lines[i]);
        // Built at its final size (at most): no regrowth of a long script or config.
        let capacity = if self.keep {
            leading + self.block_bytes(i, n) + 1
        } else {
            0
        };
        let mut buf = Text {
            buf: String::with_capacity(capacity),
            keep: self.keep,
            json: 0,
        };
        buf.newlines(leading);
        let mut empties = 0usize;
        let mut first = true;
        // Whether the previous line of a folded scalar was more indented (kept as is).
        let mut prev_spaced = false;
        while i < self.end {
            let l = self.lines[i];
            let ind = indent(l);
            if ind == l.len() {
                if l.len() > n {
                    return give_up();
                }
                empties += 1;
                i += 1;
                continue;
            }
            if ind < n {
                break;
            }
            let text = &l[n..];
            let spaced = text.starts_with(' ');
            if !first {
                if folded && !spaced && !prev_spaced {
                    // Folding: one line break is a space; with empty lines, it is dropped.
                    if empties == 0 {
                        buf.push(' ');
                    }
                } else {
                    buf.push('\n');
                }
            }
            buf.newlines(empties);
            empties = 0;
            first = false;
            prev_spaced = spaced;
            buf.push_str(text);
            i += 1;
        }
        match chomp {
            Chomp::Strip => {}
            Chomp::Clip => buf.push('\n'),
            Chomp::Keep => {
                buf.newlines(empties + 1);
            }
        }
        debug_assert!(buf.buf.len() <= capacity || !self.keep);
        self.skipped_json += buf.json;
        Some((Value::String(buf.buf), i))
    }

    /// At least the bytes of the block scalar text whose first content line is `i`,
    /// indented by `n`, with its line breaks: each line's text after the indentation and one
    /// break. Folding and chomping only take away from it.
    fn block_bytes(&self, mut i: usize, n: usize) -> usize {
        let mut bytes = 0;
        while i < self.end {
            let l = self.lines[i];
            let ind = indent(l);
            if ind < n && ind < l.len() {
                break;
            }
            bytes += l.len().saturating_sub(n) + 1;
            i += 1;
        }
        bytes
    }
}
