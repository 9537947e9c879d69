//! Scalars of the fast path: plain lines, quoted scalars, and the resolution of a plain
//! scalar to a value as serde-saphyr resolves it (kubectl's YAML 1.1 numbers and booleans).

use serde_json::{Number, Value};

use super::{give_up, trim_spaces_end};

/// The content of one line of a plain scalar: up to a comment, without trailing spaces, and
/// whether a comment followed. `None` when the line holds `: ` or ends with `:` (a mapping
/// where none may be).
pub(super) fn plain_line(s: &str) -> Option<(&str, bool)> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'#' if i > 0 && b[i - 1] == b' ' => {
                return Some((trim_spaces_end(&s[..i]), true));
            }
            b':' if matches!(b.get(i + 1), None | Some(b' ')) => return give_up(),
            _ => {}
        }
    }
    Some((trim_spaces_end(s), false))
}

/// A quoted scalar that closes on the same line: its value and the offset just after the
/// closing quote. `s` starts with the opening quote.
pub(super) fn quoted_in_line(s: &str) -> Option<(String, usize)> {
    let double = s.as_bytes()[0] == b'"';
    let mut buf = String::new();
    let mut q = Quoted {
        double,
        buf: &mut buf,
        ws_start: None,
        ended_escaped: false,
    };
    match q.push_line(&s[1..])? {
        Ok(close) => Some((buf, close + 1)),
        Err(()) => None,
    }
}

/// Accumulates the content of a quoted scalar line by line.
pub(super) struct Quoted<'b> {
    pub(super) double: bool,
    pub(super) buf: &'b mut String,
    /// Where the current run of literal trailing spaces starts in `buf`.
    pub(super) ws_start: Option<usize>,
    /// Whether the last line pushed ended with an escaped line break.
    pub(super) ended_escaped: bool,
}

impl Quoted<'_> {
    /// Appends one line (after the opening quote, or a continuation line without its
    /// indentation). `Ok(Ok(i))`: the quote closed, `i` is the offset just after it in `line`.
    /// `Ok(Err(()))`: the line ended inside the scalar (trailing literal spaces are dropped;
    /// `ended_escaped` tells whether it ended with an escaped line break). `None`: give up.
    pub(super) fn push_line(&mut self, line: &str) -> Option<Result<usize, ()>> {
        self.ended_escaped = false;
        self.ws_start = None;
        let mut chars = line.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' if !self.double => {
                    if line[i + 1..].starts_with('\'') {
                        chars.next();
                        self.push('\'');
                    } else {
                        return Some(Ok(i + 1));
                    }
                }
                '"' if self.double => return Some(Ok(i + 1)),
                '\\' if self.double => {
                    let Some((_, e)) = chars.next() else {
                        // An escaped line break: no folding space, spaces before it stay.
                        self.ended_escaped = true;
                        return Some(Err(()));
                    };
                    let unescaped = match e {
                        '0' => '\0',
                        'a' => '\u{7}',
                        'b' => '\u{8}',
                        't' => '\t',
                        'n' => '\n',
                        'v' => '\u{b}',
                        'f' => '\u{c}',
                        'r' => '\r',
                        'e' => '\u{1b}',
                        ' ' => ' ',
                        '"' => '"',
                        '/' => '/',
                        '\\' => '\\',
                        'N' => '\u{85}',
                        '_' => '\u{a0}',
                        'L' => '\u{2028}',
                        'P' => '\u{2029}',
                        'x' | 'u' | 'U' => {
                            let len = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let start = i + 2;
                            let hex = line.get(start..start + len)?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return give_up();
                            }
                            for _ in 0..len {
                                chars.next();
                            }
                            char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                        }
                        _ => return give_up(),
                    };
                    self.push(unescaped);
                }
                ' ' => {
                    if self.ws_start.is_none() {
                        self.ws_start = Some(self.buf.len());
                    }
                    self.buf.push(' ');
                }
                _ => self.push(c),
            }
        }
        if let Some(w) = self.ws_start {
            self.buf.truncate(w);
        }
        Some(Err(()))
    }

    pub(super) fn push(&mut self, c: char) {
        self.ws_start = None;
        self.buf.push(c);
    }
}

/// Resolves a plain scalar as serde-saphyr does for an untyped value with
/// `legacy_octal_numbers`: null, YAML 1.1 boolean, integer (signed, unsigned, `0x`, `0o`,
/// `0b`, leading-zero octal, `_` separators), float, else string. `None` for a non-finite
/// float, which serde-saphyr rejects. A string is only copied when `keep` is set (otherwise
/// it is returned empty: the caller drops the value and needs only to know it resolves).
pub(super) fn resolve_plain(s: &str, keep: bool) -> Option<Value> {
    let string = || Value::String(if keep { s.to_string() } else { String::new() });
    let Some(&first) = s.as_bytes().first() else {
        return Some(Value::Null);
    };
    if first.is_ascii_alphabetic() {
        if matches!(s, "null" | "Null" | "NULL") {
            return Some(Value::Null);
        }
        return Some(match yaml11_bool(s) {
            Some(b) => Value::Bool(b),
            None => string(),
        });
    }
    if s == "~" {
        return Some(Value::Null);
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if matches!(unsigned.as_bytes(), [b'0', b'X' | b'O' | b'B', ..])
        || (unsigned.len() < s.len() && matches!(unsigned, ".nan" | ".NaN" | ".NAN"))
    {
        return Some(string());
    }
    if let Some(rest) = s.strip_prefix('-') {
        if let Some(v) = int_magnitude(rest).and_then(neg_i64) {
            return Some(Value::from(v));
        }
    } else if let Some(v) = int_magnitude(unsigned).and_then(|m| u64::try_from(m).ok()) {
        return Some(Value::from(v));
    }
    if matches!(
        unsigned,
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF"
    ) {
        return give_up();
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() => Number::from_f64(f).map(Value::Number),
        Ok(_) if unsigned.as_bytes().first().is_some_and(u8::is_ascii_digit) => None,
        _ => Some(string()),
    }
}

pub(super) fn neg_i64(magnitude: u128) -> Option<i64> {
    let m = i128::try_from(magnitude).ok()?;
    i64::try_from(-m).ok()
}

pub(super) fn yaml11_bool(s: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["true", "yes", "y", "on"];
    const FALSE: [&str; 4] = ["false", "no", "n", "off"];
    if s.len() > 5 {
        return None;
    }
    if TRUE.iter().any(|t| s.eq_ignore_ascii_case(t)) {
        Some(true)
    } else if FALSE.iter().any(|t| s.eq_ignore_ascii_case(t)) {
        Some(false)
    } else {
        None
    }
}

/// The magnitude of an integer without its sign, YAML 1.1 style: `0x`, `0o`, `0b` prefixes,
/// a leading `0` for octal, `_` between digits.
pub(super) fn int_magnitude(rest: &str) -> Option<u128> {
    fn strip(d: &str) -> &str {
        d.strip_prefix('_').unwrap_or(d)
    }
    let (radix, digits) = if let Some(r) = rest.strip_prefix("0x") {
        (16, strip(r))
    } else if let Some(r) = rest.strip_prefix("0o") {
        (8, strip(r))
    } else if let Some(r) = rest.strip_prefix("0b") {
        (2, strip(r))
    } else if rest == "0" {
        (8, "0")
    } else if let Some(r) = rest.strip_prefix('0') {
        (8, strip(r))
    } else {
        (10, rest)
    };
    let bytes = digits.as_bytes();
    let mut value: u128 = 0;
    let mut saw = false;
    for (i, &b) in bytes.iter().enumerate() {
        let d = match b {
            b'_' => {
                if i == 0 || bytes[i - 1] == b'_' || i + 1 == bytes.len() || bytes[i + 1] == b'_' {
                    return None;
                }
                continue;
            }
            b'0'..=b'9' => u32::from(b - b'0'),
            b'a'..=b'f' => u32::from(b - b'a') + 10,
            b'A'..=b'F' => u32::from(b - b'A') + 10,
            _ => return None,
        };
        if d >= radix {
            return None;
        }
        value = value
            .checked_mul(u128::from(radix))?
            .checked_add(u128::from(d))?;
        saw = true;
    }
    saw.then_some(value)
}
