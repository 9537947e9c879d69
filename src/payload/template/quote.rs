//! Go's `strconv.Quote`, `QuoteToASCII`, `QuoteRune`, `CanBackquote` and `IsPrint`, which
//! `%q`, `js` and Go's error messages use.

/// Whether Go's `strconv.IsPrint` holds for `c`: a letter, mark, number, punctuation or
/// symbol (general categories L, M, N, P, S, from the Unicode 15.0 tables Go uses), or the
/// ASCII space.
pub(super) fn is_print(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    !matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::Surrogate
            | G::PrivateUse
            | G::Unassigned
            | G::SpaceSeparator
            | G::LineSeparator
            | G::ParagraphSeparator
    )
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
