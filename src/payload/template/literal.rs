//! Constants in actions: quoted strings, character constants and numbers, read with the rules
//! of Go's `strconv` (`Unquote`, `UnquoteChar`, `ParseInt`/`ParseUint`/`ParseFloat` with base
//! prefixes and `_` separators) and sorted into int, unsigned and float the way
//! `text/template/parse` does.

use std::borrow::Cow;

/// Go's `strconv.ErrSyntax` text.
const SYNTAX: &str = "invalid syntax";

/// A number constant and the types it fits.
#[derive(Debug, Clone)]
pub(super) struct Number<'a> {
    /// As written.
    pub text: &'a str,
    pub is_int: bool,
    pub is_uint: bool,
    pub is_float: bool,
    pub int: i64,
    pub float: f64,
}

/// Reads a number or character constant (`kind_char` for `'x'`).
///
/// # Errors
/// Go's message for a malformed constant.
pub(super) fn number(text: &str, kind_char: bool, complex: bool) -> Result<Number<'_>, String> {
    let mut n = Number {
        text,
        is_int: false,
        is_uint: false,
        is_float: false,
        int: 0,
        float: 0.0,
    };
    if kind_char {
        let quote = text.chars().next().unwrap_or('\'');
        let (r, _, tail) = unquote_char(&text[1..], quote)?;
        if tail != "'" {
            return Err(format!("malformed character constant: {text}"));
        }
        let r = i64::from(r);
        n.is_int = true;
        n.is_uint = true;
        n.is_float = true;
        n.int = r;
        #[allow(clippy::cast_precision_loss)]
        {
            n.float = r as f64;
        }
        return Ok(n);
    }
    if complex || (text.ends_with('i') && parse_float(&text[..text.len() - 1]).is_some()) {
        return Err(format!(
            "minicvo does not support complex constants: {}",
            super::fmt::quote(text, false)
        ));
    }
    let u = parse_uint(text);
    if let Some(u) = u {
        n.is_uint = true;
        let _ = u;
    }
    if let Some(i) = parse_int(text) {
        n.is_int = true;
        n.int = i;
        if i == 0 {
            n.is_uint = true;
        }
    }
    #[allow(clippy::cast_precision_loss)]
    if n.is_int {
        n.is_float = true;
        n.float = n.int as f64;
    } else if let Some(u) = u {
        n.is_float = true;
        n.float = u as f64;
    } else if let Some(f) = parse_float(text) {
        if !text.contains(['.', 'e', 'E', 'p', 'P']) {
            return Err(format!(
                "integer overflow: {}",
                super::fmt::quote(text, false)
            ));
        }
        n.is_float = true;
        n.float = f;
        #[allow(clippy::cast_possible_truncation)]
        if (f as i64) as f64 == f {
            n.is_int = true;
            n.int = f as i64;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        if (f as u64) as f64 == f {
            n.is_uint = true;
        }
    }
    if !n.is_int && !n.is_uint && !n.is_float {
        return Err(format!(
            "illegal number syntax: {}",
            super::fmt::quote(text, false)
        ));
    }
    Ok(n)
}

/// `strconv.ParseUint(s, 0, 64)`.
fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let b = s.as_bytes();
    let (base, digits) = if b[0] == b'0' {
        match b.get(1).map(u8::to_ascii_lowercase) {
            Some(b'b') if s.len() >= 3 => (2, &s[2..]),
            Some(b'o') if s.len() >= 3 => (8, &s[2..]),
            Some(b'x') if s.len() >= 3 => (16, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else {
        (10, s)
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for c in digits.chars() {
        if c == '_' {
            underscores = true;
            continue;
        }
        let d = c.to_digit(36)?;
        if d >= base {
            return None;
        }
        n = n.checked_mul(u64::from(base))?.checked_add(u64::from(d))?;
    }
    if underscores && !underscore_ok(s) {
        return None;
    }
    Some(n)
}

/// `strconv.ParseInt(s, 0, 64)`.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let u = parse_uint(rest)?;
    if neg {
        if u > 1 << 63 {
            return None;
        }
        Some(0i64.wrapping_sub_unsigned(u))
    } else {
        i64::try_from(u).ok()
    }
}

/// Whether `_` separates digits only (Go's `underscoreOK`), a base prefix counting as a digit.
fn underscore_ok(s: &str) -> bool {
    let mut b = s.as_bytes();
    if let Some(b'+' | b'-') = b.first() {
        b = &b[1..];
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
            continue;
        }
        if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

/// `strconv.ParseFloat(s, 64)` for the numbers the lexer lets through; `None` for a syntax
/// error or a value out of range.
pub(super) fn parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let neg = match b.first() {
        Some(b'+') => {
            i = 1;
            false
        }
        Some(b'-') => {
            i = 1;
            true
        }
        _ => false,
    };
    let hex = b.len() > i + 2 && b[i] == b'0' && b[i + 1].eq_ignore_ascii_case(&b'x');
    if hex {
        i += 2;
    }
    let mut mantissa = String::new();
    let mut hex_mant = HexMantissa::default();
    let (mut saw_dot, mut saw_digits, mut underscores) = (false, false, false);
    while i < b.len() {
        let c = b[i];
        if c == b'_' {
            underscores = true;
        } else if c == b'.' {
            if saw_dot {
                break;
            }
            saw_dot = true;
            mantissa.push('.');
            hex_mant.dot();
        } else if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw_digits = true;
            mantissa.push(char::from(c));
            hex_mant.digit(c);
        } else {
            break;
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    let mut exp: Option<i32> = None;
    if i < b.len()
        && (if hex {
            b[i].eq_ignore_ascii_case(&b'p')
        } else {
            b[i].eq_ignore_ascii_case(&b'e')
        })
    {
        i += 1;
        let mut esign = 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            if b[i] == b'-' {
                esign = -1;
            }
            i += 1;
        }
        if i >= b.len() || !b[i].is_ascii_digit() {
            return None;
        }
        let mut e: i32 = 0;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            if b[i] == b'_' {
                underscores = true;
            } else if e < 10_000 {
                e = e * 10 + i32::from(b[i] - b'0');
            }
            i += 1;
        }
        exp = Some(esign * e);
    }
    if i != b.len() || (hex && exp.is_none()) {
        return None;
    }
    if underscores && !underscore_ok(s) {
        return None;
    }
    let value = if hex {
        hex_mant.value(exp.unwrap_or(0))?
    } else {
        let mut text = mantissa;
        if let Some(e) = exp {
            text.push_str(&format!("e{e}"));
        }
        text.parse::<f64>().ok()?
    };
    if value.is_infinite() {
        return None;
    }
    Some(if neg { -value } else { value })
}

/// The digits of a hex float as Go's `strconv.readFloat` keeps them: the first 16 significant
/// hex digits, whether a non-zero digit was dropped after them, and the point's position.
#[derive(Default)]
struct HexMantissa {
    mantissa: u64,
    trunc: bool,
    /// Significant digits seen (leading zeros skipped).
    nd: i32,
    /// Digits kept in `mantissa`.
    nd_mant: i32,
    /// Digits before the point, less the leading zeros (as Go counts them).
    dp: i32,
    saw_dot: bool,
}

impl HexMantissa {
    fn dot(&mut self) {
        self.saw_dot = true;
        self.dp = self.nd;
    }

    fn digit(&mut self, c: u8) {
        if c == b'0' && self.nd == 0 {
            self.dp -= 1;
            return;
        }
        self.nd += 1;
        if self.nd_mant < 16 {
            let d = char::from(c).to_digit(16).unwrap_or(0);
            self.mantissa = self.mantissa * 16 + u64::from(d);
            self.nd_mant += 1;
        } else if c != b'0' {
            self.trunc = true;
        }
    }

    /// The value times `2^exp`, rounded half to even as Go's `atofHex` rounds it (subnormals
    /// included); `None` when it overflows.
    fn value(&self, exp: i32) -> Option<f64> {
        const MANT_BITS: i32 = 52;
        const BIAS: i32 = -1023;
        let dp = if self.saw_dot { self.dp } else { self.nd };
        let mut mantissa = self.mantissa;
        let mut exp = if mantissa == 0 {
            0
        } else {
            dp * 4 + exp - self.nd_mant * 4
        };
        let max_exp = (1 << 11) + BIAS - 2;
        let min_exp = BIAS + 1;
        exp += MANT_BITS;
        while mantissa != 0 && mantissa >> (MANT_BITS + 2) == 0 {
            mantissa <<= 1;
            exp -= 1;
        }
        if self.trunc {
            mantissa |= 1;
        }
        while mantissa >> (1 + MANT_BITS + 2) != 0 {
            mantissa = (mantissa >> 1) | (mantissa & 1);
            exp += 1;
        }
        while mantissa > 1 && exp < min_exp - 2 {
            mantissa = (mantissa >> 1) | (mantissa & 1);
            exp += 1;
        }
        let mut round = mantissa & 3;
        mantissa >>= 2;
        round |= mantissa & 1;
        exp += 2;
        if round == 3 {
            mantissa += 1;
            if mantissa == 1 << (1 + MANT_BITS) {
                mantissa >>= 1;
                exp += 1;
            }
        }
        if mantissa >> MANT_BITS == 0 {
            exp = BIAS;
        }
        if exp > max_exp {
            return None;
        }
        let biased = u64::try_from(exp - BIAS).ok()? & 0x7ff;
        let bits = (mantissa & ((1 << MANT_BITS) - 1)) | (biased << MANT_BITS);
        Some(f64::from_bits(bits))
    }
}

/// `strconv.Unquote` of a string constant as written (`"..."` or `` `...` ``).
///
/// # Errors
/// `invalid syntax`, as Go says for a bad escape.
pub(super) fn unquote(quoted: &str) -> Result<Cow<'_, str>, String> {
    let syntax = || SYNTAX.to_string();
    if quoted.len() < 2 {
        return Err(syntax());
    }
    let quote = quoted.as_bytes()[0];
    if quoted.as_bytes()[quoted.len() - 1] != quote {
        return Err(syntax());
    }
    let inner = &quoted[1..quoted.len() - 1];
    if quote == b'`' {
        if inner.contains('`') {
            return Err(syntax());
        }
        if inner.contains('\r') {
            return Ok(Cow::Owned(inner.replace('\r', "")));
        }
        return Ok(Cow::Borrowed(inner));
    }
    if !inner.contains(['\\', '\n']) && !inner.contains('"') {
        return Ok(Cow::Borrowed(inner));
    }
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while !rest.is_empty() {
        if rest.starts_with('\n') {
            return Err(syntax());
        }
        let (c, byte_escape, tail) = unquote_char(rest, '"')?;
        if byte_escape && c > 0x7f {
            return Err(
                "minicvo does not support a \\x or octal escape above 0x7f in a string".into(),
            );
        }
        out.push(char::from_u32(c).ok_or_else(syntax)?);
        rest = tail;
    }
    Ok(Cow::Owned(out))
}

/// `strconv.UnquoteChar`: the first character of `s` (which is inside `quote`s), whether it
/// was a byte escape (`\x`, octal), and the rest.
fn unquote_char(s: &str, quote: char) -> Result<(u32, bool, &str), String> {
    let syntax = || SYNTAX.to_string();
    let mut chars = s.chars();
    let c = chars.next().ok_or_else(syntax)?;
    if c == quote {
        return Err(syntax());
    }
    if c != '\\' {
        return Ok((u32::from(c), false, chars.as_str()));
    }
    let e = chars.next().ok_or_else(syntax)?;
    let rest = chars.as_str();
    let simple = match e {
        'a' => Some(7),
        'b' => Some(8),
        'f' => Some(12),
        'n' => Some(10),
        'r' => Some(13),
        't' => Some(9),
        'v' => Some(11),
        '\\' => Some(u32::from('\\')),
        '\'' | '"' if e == quote => Some(u32::from(e)),
        _ => None,
    };
    if let Some(v) = simple {
        return Ok((v, false, rest));
    }
    match e {
        'x' | 'u' | 'U' => {
            let n = match e {
                'x' => 2,
                'u' => 4,
                _ => 8,
            };
            let digits = rest.get(..n).ok_or_else(syntax)?;
            let mut v: u32 = 0;
            for d in digits.chars() {
                v = (v << 4) | d.to_digit(16).ok_or_else(syntax)?;
            }
            if e != 'x' && char::from_u32(v).is_none() {
                return Err(syntax());
            }
            Ok((v, e == 'x', &rest[n..]))
        }
        '0'..='7' => {
            let digits = rest.get(..2).ok_or_else(syntax)?;
            let mut v = e.to_digit(8).unwrap_or(0);
            for d in digits.chars() {
                v = (v << 3) | d.to_digit(8).ok_or_else(syntax)?;
            }
            if v > 255 {
                return Err(syntax());
            }
            Ok((v, true, &rest[2..]))
        }
        _ => Err(syntax()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_take_go_bases_and_separators() {
        assert_eq!(number("0x1F", false, false).unwrap().int, 31);
        assert_eq!(number("017", false, false).unwrap().int, 15);
        assert_eq!(number("1_000", false, false).unwrap().int, 1000);
        assert!((number("0x1p-2", false, false).unwrap().float - 0.25).abs() < 1e-12);
        assert_eq!(
            number("08", false, false).unwrap_err(),
            "integer overflow: \"08\""
        );
        assert!(number("1__0", false, false).is_err());
    }

    /// Expected values are Go's `strconv.ParseFloat(s, 64)`.
    #[test]
    fn hex_floats_round_as_go_does() {
        let bits = |s: &str| parse_float(s).map(f64::to_bits);
        assert_eq!(bits("0x1p-1074"), Some(1));
        assert_eq!(bits("-0x1p-1074"), Some((1 << 63) | 1));
        assert_eq!(bits("0x1p-1075"), Some(0), "a tie rounds to even");
        assert_eq!(bits("0x3p-1076"), Some(1));
        assert_eq!(bits("0x1.8p-1074"), Some(2));
        assert_eq!(bits("0x1.00000000000008p0"), Some(1f64.to_bits()));
        assert_eq!(bits("0x1.00000000000008000001p0"), Some(1f64.to_bits() + 1));
        assert_eq!(bits("0x1.00000000000018p0"), Some(1f64.to_bits() + 2));
        assert_eq!(bits("0x1.fffffffffffffp1023"), Some(f64::MAX.to_bits()));
        assert_eq!(bits("0x1.8p1"), Some(3f64.to_bits()));
        assert_eq!(bits("0X1P+2"), Some(4f64.to_bits()));
        assert_eq!(bits("0x_1p0"), Some(1f64.to_bits()));
        assert_eq!(bits("0x1p1024"), None);
        assert_eq!(bits("0x1.fffffffffffff8p1023"), None);
        assert_eq!(bits("0x1.8"), None);
        assert_eq!(bits("0x1__0p0"), None);
    }

    #[test]
    fn strings_unquote_like_go() {
        assert_eq!(unquote(r#""a\tb\u00e9""#).unwrap(), "a\tb\u{e9}");
        assert_eq!(unquote("`x\\n`").unwrap(), "x\\n");
        assert_eq!(unquote(r#""\q""#).unwrap_err(), "invalid syntax");
        assert_eq!(number("'\\n'", true, false).unwrap().int, 10);
    }
}
