//! Go's `fmt` for the template values: `print`, `println`, `printf` (flags, width, precision,
//! argument indexes, `*`, and the `%!verb(type=value)` / `%!(EXTRA ...)` / `%!v(MISSING)`
//! reports of a bad call) and the text of a printed value (`{{.Images}}` is `map[k:v]`).
//!
//! Also `strconv.Quote` and friends, which `%q` and Go's error messages use.

use super::float;
use super::quote::{can_backquote, quote_rune};
pub(super) use super::quote::{is_print, quote};
use super::value::{FIELDS, STRUCT_TYPE, Value};

/// The text `{{value}}` prints (Go's `fmt.Fprint` of one operand).
pub(super) fn print_one(out: &mut String, v: &Value<'_>) {
    let mut p = Printer::new(out);
    p.print_arg(v, 'v');
}

/// `fmt.Sprint`: operands side by side, a space between two when neither is a string.
pub(super) fn sprint(args: &[Value<'_>]) -> String {
    let mut out = String::new();
    let mut p = Printer::new(&mut out);
    let mut prev_string = false;
    for (i, a) in args.iter().enumerate() {
        let is_string = matches!(a, Value::Str(_));
        if i > 0 && !is_string && !prev_string {
            p.buf.push(' ');
        }
        p.print_arg(a, 'v');
        prev_string = is_string;
    }
    out
}

/// `fmt.Sprintln`: operands joined by spaces, then a newline.
pub(super) fn sprintln(args: &[Value<'_>]) -> String {
    let mut out = String::new();
    let mut p = Printer::new(&mut out);
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            p.buf.push(' ');
        }
        p.print_arg(a, 'v');
    }
    out.push('\n');
    out
}

/// `fmt.Sprintf`.
pub(super) fn sprintf(format: &str, args: &[Value<'_>]) -> String {
    let mut out = String::new();
    Printer::new(&mut out).do_printf(format, args);
    out
}

#[derive(Default, Clone, Copy)]
pub(super) struct Flags {
    pub(super) plus: bool,
    pub(super) minus: bool,
    pub(super) sharp: bool,
    pub(super) space: bool,
    pub(super) zero: bool,
    pub(super) plus_v: bool,
    pub(super) sharp_v: bool,
    pub(super) wid: Option<usize>,
    pub(super) prec: Option<usize>,
}

pub(super) struct Printer<'o> {
    pub(super) buf: &'o mut String,
    pub(super) f: Flags,
}

impl<'o> Printer<'o> {
    pub(super) fn new(buf: &'o mut String) -> Self {
        Printer {
            buf,
            f: Flags::default(),
        }
    }

    fn write_padding(&mut self, n: usize) {
        let c = if self.f.zero && !self.f.minus {
            '0'
        } else {
            ' '
        };
        self.buf.extend(std::iter::repeat_n(c, n));
    }

    fn pad(&mut self, s: &str) {
        let Some(wid) = self.f.wid.filter(|w| *w > 0) else {
            self.buf.push_str(s);
            return;
        };
        let n = wid.saturating_sub(s.chars().count());
        if self.f.minus {
            self.buf.push_str(s);
            self.write_padding(n);
        } else {
            self.write_padding(n);
            self.buf.push_str(s);
        }
    }

    /// `pad` with zero padding off (numbers pad with zeros through their precision).
    fn pad_spaces(&mut self, s: &str) {
        let zero = self.f.zero;
        self.f.zero = false;
        self.pad(s);
        self.f.zero = zero;
    }

    pub(super) fn print_arg(&mut self, v: &Value<'_>, verb: char) {
        if let Value::Invalid = v {
            match verb {
                'T' | 'v' => self.pad("<nil>"),
                _ => self.bad_verb(verb, v),
            }
            return;
        }
        match verb {
            'T' => return self.fmt_s(v.type_name()),
            'p' => return self.bad_verb(verb, v),
            // Go's `handleMethods`: `%w` of a value that is not an error (and outside
            // `fmt.Errorf`) reports the whole map or struct, not each element.
            'w' if matches!(v, Value::Map(_) | Value::Struct(_)) => {
                return self.bad_verb(verb, v);
            }
            _ => {}
        }
        self.print_value(v, verb);
    }

    fn print_value(&mut self, v: &Value<'_>, verb: char) {
        match v {
            Value::Invalid => {
                if verb == 'v' {
                    self.buf.push_str("<nil>");
                } else {
                    self.bad_verb(verb, v);
                }
            }
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad(if *b { "true" } else { "false" }),
                _ => self.bad_verb(verb, v),
            },
            Value::Int(i) => self.fmt_integer(i.unsigned_abs(), *i < 0, true, verb, v),
            Value::Byte(b) => self.fmt_integer(u64::from(*b), false, false, verb, v),
            Value::Float(x) => self.fmt_float(*x, verb, v),
            Value::Str(s) => self.fmt_string(s, verb, v),
            Value::Map(m) => {
                if self.f.sharp_v {
                    self.buf.push_str("map[string]string{");
                } else {
                    self.buf.push_str("map[");
                }
                for (i, (k, val)) in m.iter().enumerate() {
                    if i > 0 {
                        self.buf.push_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    self.print_value(&Value::str(k), verb);
                    self.buf.push(':');
                    self.print_value(&Value::str(val), verb);
                }
                self.buf.push(if self.f.sharp_v { '}' } else { ']' });
            }
            Value::Struct(data) => {
                if self.f.sharp_v {
                    self.buf.push_str(STRUCT_TYPE);
                }
                self.buf.push('{');
                for (i, name) in FIELDS.iter().enumerate() {
                    if i > 0 {
                        self.buf.push_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    if self.f.plus_v || self.f.sharp_v {
                        self.buf.push_str(name);
                        self.buf.push(':');
                    }
                    let field = Value::field(data, name).unwrap_or(Value::Invalid);
                    self.print_value(&field, verb);
                }
                self.buf.push('}');
            }
        }
    }

    /// `%!verb(type=value)`.
    fn bad_verb(&mut self, verb: char, v: &Value<'_>) {
        self.buf.push_str("%!");
        self.buf.push(verb);
        self.buf.push('(');
        if let Value::Invalid = v {
            self.buf.push_str("<nil>");
        } else {
            self.buf.push_str(v.type_name());
            self.buf.push('=');
            self.print_arg(v, 'v');
        }
        self.buf.push(')');
    }

    fn fmt_s(&mut self, s: &str) {
        let s = self.truncate(s);
        self.pad(s);
    }

    fn truncate<'s>(&self, s: &'s str) -> &'s str {
        match self.f.prec {
            Some(p) => s.char_indices().nth(p).map_or(s, |(i, _)| &s[..i]),
            None => s,
        }
    }

    fn fmt_string(&mut self, s: &str, verb: char, v: &Value<'_>) {
        match verb {
            'v' if self.f.sharp_v => self.fmt_q(s),
            'v' | 's' => self.fmt_s(s),
            'x' => self.fmt_sx(s, false),
            'X' => self.fmt_sx(s, true),
            'q' => self.fmt_q(s),
            _ => self.bad_verb(verb, v),
        }
    }

    fn fmt_q(&mut self, s: &str) {
        let s = self.truncate(s);
        if self.f.sharp && can_backquote(s) {
            let q = format!("`{s}`");
            self.pad(&q);
            return;
        }
        let q = quote(s, self.f.plus);
        self.pad(&q);
    }

    fn fmt_sx(&mut self, s: &str, upper: bool) {
        let digits: &[u8; 16] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let mut length = s.len();
        if let Some(p) = self.f.prec
            && p < length
        {
            length = p;
        }
        let mut width = 2 * length;
        if width == 0 {
            if let Some(w) = self.f.wid {
                self.write_padding(w);
            }
            return;
        }
        if self.f.space {
            if self.f.sharp {
                width *= 2;
            }
            width += length - 1;
        } else if self.f.sharp {
            width += 2;
        }
        let wid = self.f.wid.unwrap_or(0);
        if wid > width && !self.f.minus {
            self.write_padding(wid - width);
        }
        let x = if upper { "0X" } else { "0x" };
        if self.f.sharp {
            self.buf.push_str(x);
        }
        for (i, c) in s.bytes().take(length).enumerate() {
            if self.f.space && i > 0 {
                self.buf.push(' ');
                if self.f.sharp {
                    self.buf.push_str(x);
                }
            }
            self.buf.push(char::from(digits[usize::from(c >> 4)]));
            self.buf.push(char::from(digits[usize::from(c & 0xf)]));
        }
        if wid > width && self.f.minus {
            self.write_padding(wid - width);
        }
    }

    fn fmt_integer(&mut self, u: u64, negative: bool, signed: bool, verb: char, v: &Value<'_>) {
        match verb {
            'v' if self.f.sharp_v && !signed => {
                let sharp = self.f.sharp;
                self.f.sharp = true;
                self.integer(u, false, 16, verb, false);
                self.f.sharp = sharp;
            }
            'v' | 'd' => self.integer(u, negative, 10, verb, false),
            'b' => self.integer(u, negative, 2, verb, false),
            'o' | 'O' => self.integer(u, negative, 8, verb, false),
            'x' => self.integer(u, negative, 16, verb, false),
            'X' => self.integer(u, negative, 16, verb, true),
            'c' => {
                let c = self.rune_of(u, negative);
                self.pad(c.encode_utf8(&mut [0; 4]));
            }
            'q' => {
                let c = self.rune_of(u, negative);
                let q = quote_rune(c, self.f.plus);
                self.pad(&q);
            }
            'U' => self.fmt_unicode(u, negative),
            _ => self.bad_verb(verb, v),
        }
    }

    fn rune_of(&self, u: u64, negative: bool) -> char {
        if negative {
            return char::REPLACEMENT_CHARACTER;
        }
        u32::try_from(u)
            .ok()
            .and_then(char::from_u32)
            .unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    fn fmt_unicode(&mut self, u: u64, negative: bool) {
        let u = if negative { u.wrapping_neg() } else { u };
        let prec = self.f.prec.filter(|p| *p > 4).unwrap_or(4);
        let mut s = format!("U+{u:0prec$X}");
        if self.f.sharp
            && let Some(c) = u32::try_from(u).ok().and_then(char::from_u32)
            && is_print(c)
        {
            s.push_str(&format!(" '{c}'"));
        }
        self.pad_spaces(&s);
    }

    fn integer(&mut self, u: u64, negative: bool, base: u32, verb: char, upper: bool) {
        let mut prec = 0usize;
        if let Some(p) = self.f.prec {
            prec = p;
            if p == 0 && u == 0 {
                let zero = self.f.zero;
                self.f.zero = false;
                self.write_padding(self.f.wid.unwrap_or(0));
                self.f.zero = zero;
                return;
            }
        } else if self.f.zero
            && !self.f.minus
            && let Some(w) = self.f.wid
        {
            prec = w;
            if negative || self.f.plus || self.f.space {
                prec = prec.saturating_sub(1);
            }
        }
        let mut digits: Vec<u8> = Vec::with_capacity(24);
        let mut n = u;
        let table: &[u8; 16] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        loop {
            let d = usize::try_from(n % u64::from(base)).unwrap_or(0);
            digits.push(table[d]);
            n /= u64::from(base);
            if n == 0 {
                break;
            }
        }
        while digits.len() < prec {
            digits.push(b'0');
        }
        if self.f.sharp {
            match base {
                2 => digits.extend_from_slice(b"b0"),
                8 if digits.last() != Some(&b'0') => digits.push(b'0'),
                16 => digits.extend_from_slice(if upper { b"X0" } else { b"x0" }),
                _ => {}
            }
        }
        if verb == 'O' {
            digits.extend_from_slice(b"o0");
        }
        if negative {
            digits.push(b'-');
        } else if self.f.plus {
            digits.push(b'+');
        } else if self.f.space {
            digits.push(b' ');
        }
        digits.reverse();
        let s = String::from_utf8(digits).unwrap_or_default();
        self.pad_spaces(&s);
    }

    fn fmt_float(&mut self, x: f64, verb: char, v: &Value<'_>) {
        let (fverb, prec) = match verb {
            'v' => (b'g', -1),
            'b' | 'g' | 'G' | 'x' | 'X' => (verb as u8, -1),
            'f' | 'e' | 'E' => (verb as u8, 6),
            'F' => (b'f', 6),
            _ => return self.bad_verb(verb, v),
        };
        let prec = self
            .f
            .prec
            .map_or(prec, |p| i32::try_from(p).unwrap_or(i32::MAX));
        let text = float::format(x, fverb, prec);
        let mut num: Vec<u8> = if text.starts_with(['-', '+']) {
            text.into_bytes()
        } else {
            let mut n = vec![b'+'];
            n.extend_from_slice(text.as_bytes());
            n
        };
        if self.f.space && num[0] == b'+' && !self.f.plus {
            num[0] = b' ';
        }
        if num[1] == b'I' || num[1] == b'N' {
            if num[1] == b'N' && !self.f.space && !self.f.plus {
                num.remove(0);
            }
            let s = String::from_utf8(num).unwrap_or_default();
            return self.pad_spaces(&s);
        }
        if self.f.sharp && fverb != b'b' {
            let mut digits: i32 = match fverb {
                b'g' | b'G' | b'x' => {
                    if prec == -1 {
                        6
                    } else {
                        prec
                    }
                }
                _ => 0,
            };
            let mut tail = Vec::new();
            let mut has_dot = false;
            let mut saw_nonzero = false;
            let mut i = 1;
            while i < num.len() {
                match num[i] {
                    b'.' => has_dot = true,
                    b'p' | b'P' => {
                        tail = num.split_off(i);
                        break;
                    }
                    b'e' | b'E' if fverb != b'x' && fverb != b'X' => {
                        tail = num.split_off(i);
                        break;
                    }
                    c => {
                        if c != b'0' {
                            saw_nonzero = true;
                        }
                        if saw_nonzero {
                            digits -= 1;
                        }
                    }
                }
                i += 1;
            }
            if !has_dot {
                if num.len() == 2 && num[1] == b'0' {
                    digits -= 1;
                }
                num.push(b'.');
            }
            while digits > 0 {
                num.push(b'0');
                digits -= 1;
            }
            num.extend(tail);
        }
        let s = String::from_utf8(num).unwrap_or_default();
        if self.f.plus || !s.starts_with('+') {
            if self.f.zero
                && !self.f.minus
                && let Some(w) = self.f.wid.filter(|w| *w > s.len())
            {
                self.buf.push_str(&s[..1]);
                self.write_padding(w - s.len());
                self.buf.push_str(&s[1..]);
                return;
            }
            return self.pad(&s);
        }
        self.pad(&s[1..]);
    }

    pub(super) fn move_sharp_plus(&mut self) {
        self.f.sharp_v = self.f.sharp;
        self.f.sharp = false;
        self.f.plus_v = self.f.plus;
        self.f.plus = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printf_reports_bad_calls_like_go() {
        let s = |x: &'static str| Value::str(x);
        assert_eq!(sprintf("%d", &[s("x")]), "%!d(string=x)");
        assert_eq!(sprintf("%s", &[s("a"), Value::Int(3)]), "a%!(EXTRA int=3)");
        assert_eq!(sprintf("%s %d", &[s("a")]), "a %!d(MISSING)");
        assert_eq!(
            sprintf("%05d|%-4s|%x", &[Value::Int(-42), s("ab"), s("hi")]),
            "-0042|ab  |6869"
        );
    }

    #[test]
    fn print_spaces_between_non_strings() {
        assert_eq!(
            sprint(&[Value::Int(1), Value::Int(2), Value::str("a"), Value::Int(3)]),
            "1 2a3"
        );
    }
}
