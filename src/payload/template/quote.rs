//! Go's `strconv.Quote`, `QuoteToASCII`, `QuoteRune`, `CanBackquote` and `IsPrint`, which
//! `%q`, `js` and Go's error messages use.

/// Whether Go's `strconv.IsPrint` holds for `c` (close to it for characters Rust's standard
/// library cannot classify: unassigned code points count as printable here).
pub(super) fn is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(u32::from(c),
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F | 0xE000..=0xF8FF
        | 0xF0000..=0x10FFFF | 0xFFFE | 0xFFFF)
}

/// `strconv.Quote` (`ascii`: `QuoteToASCII`).
pub(super) fn quote(s: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        escape_into(&mut out, c, '"', ascii);
    }
    out.push('"');
    out
}

/// `strconv.QuoteRune` (`ascii`: `QuoteRuneToASCII`).
pub(super) fn quote_rune(c: char, ascii: bool) -> String {
    let mut out = String::from("'");
    escape_into(&mut out, c, '\'', ascii);
    out.push('\'');
    out
}

fn escape_into(out: &mut String, c: char, quote: char, ascii: bool) {
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if if ascii {
        c.is_ascii() && is_print(c)
    } else {
        is_print(c)
    } {
        out.push(c);
        return;
    }
    match c {
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        c if c < ' ' || c == '\x7f' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
        c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
        c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
    }
}

/// `strconv.CanBackquote`.
pub(super) fn can_backquote(s: &str) -> bool {
    s.chars().all(|c| {
        if c.len_utf8() > 1 {
            return c != '\u{feff}';
        }
        !((c < ' ' && c != '\t') || c == '`' || c == '\x7f')
    })
}
