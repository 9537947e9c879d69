//! Go's `strconv.FormatFloat` for 64-bit floats: `%e`, `%f`, `%g` (shortest or to a precision),
//! `%b` and `%x`. Digits come from Rust's formatter (shortest round-trip digits, with Go's
//! choice between two equally near ones, or exact rounding half to even to a precision, as
//! Go's are); the layout around them is Go's.

/// Decimal digits of `|v|` (no leading or trailing zeros) and the decimal point's position.
struct Digits {
    d: Vec<u8>,
    dp: i32,
}

impl Digits {
    /// From Rust's `{:e}` text of `|v|` (`1.2345e-7`).
    fn from_sci(text: &str) -> Self {
        let (mantissa, exp) = text.split_once('e').unwrap_or((text, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let d: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        Self::trimmed(d, exp + 1)
    }

    /// From Rust's `{:.N}` text of `|v|` (`123.4560`).
    fn from_fixed(text: &str) -> Self {
        let int_len = text.find('.').unwrap_or(text.len());
        let d: Vec<u8> = text.bytes().filter(u8::is_ascii_digit).collect();
        Self::trimmed(d, i32::try_from(int_len).unwrap_or(0))
    }

    fn trimmed(mut d: Vec<u8>, mut dp: i32) -> Self {
        let lead = d.iter().take_while(|c| **c == b'0').count();
        if lead == d.len() {
            return Digits {
                d: Vec::new(),
                dp: 0,
            };
        }
        d.drain(..lead);
        dp -= i32::try_from(lead).unwrap_or(0);
        while d.last() == Some(&b'0') {
            d.pop();
        }
        Digits { d, dp }
    }

    fn nd(&self) -> i32 {
        i32::try_from(self.d.len()).unwrap_or(i32::MAX)
    }
}

/// The fewest digits that read back as `v`, as Go's `ryuFtoaShortest` picks them: of the
/// shortest digit strings, the one nearest `v`, and on a tie the even one. Rust's shortest
/// formatter gives the right length but may round a tie up (`562949953421312.25` →
/// `…123e14`, Go `…122e14`); `v` correctly rounded (half to even) to that length is Go's
/// choice whenever it still reads back as `v`, which it may not next to a power of two.
fn shortest(v: f64) -> Digits {
    let rust = Digits::from_sci(&format!("{:e}", v.abs()));
    let Some(prec) = rust.d.len().checked_sub(1) else {
        return rust;
    };
    let nearest = format!("{:.*e}", prec, v.abs());
    if nearest.parse::<f64>() == Ok(v.abs()) {
        Digits::from_sci(&nearest)
    } else {
        rust
    }
}

fn significant(v: f64, n: usize) -> Digits {
    Digits::from_sci(&format!("{:.*e}", n.saturating_sub(1), v.abs()))
}

/// Formats `v` as Go's `strconv.FormatFloat(v, verb, prec, 64)`; a negative `prec` asks for
/// the fewest digits that read back as `v`.
pub(super) fn format(v: f64, verb: u8, prec: i32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let neg = v.is_sign_negative();
    match verb {
        b'b' => return format_b(v),
        b'x' | b'X' => return format_x(v, verb, prec),
        _ => {}
    }
    let shortest_mode = prec < 0;
    let mut prec = prec;
    let digs = match verb {
        b'e' | b'E' => {
            if shortest_mode {
                let d = shortest(v);
                prec = (d.nd() - 1).max(0);
                d
            } else {
                significant(v, usize::try_from(prec + 1).unwrap_or(1))
            }
        }
        b'f' => {
            if shortest_mode {
                let d = shortest(v);
                prec = (d.nd() - d.dp).max(0);
                d
            } else {
                Digits::from_fixed(&format!(
                    "{:.*}",
                    usize::try_from(prec).unwrap_or(0),
                    v.abs()
                ))
            }
        }
        _ => {
            if shortest_mode {
                let d = shortest(v);
                prec = d.nd();
                d
            } else {
                if prec == 0 {
                    prec = 1;
                }
                significant(v, usize::try_from(prec).unwrap_or(1))
            }
        }
    };
    match verb {
        b'e' | b'E' => fmt_e(neg, &digs, prec, verb),
        b'f' => fmt_f(neg, &digs, prec),
        _ => {
            let mut eprec = prec;
            if eprec > digs.nd() && digs.nd() >= digs.dp {
                eprec = digs.nd();
            }
            if shortest_mode {
                eprec = 6;
            }
            let exp = digs.dp - 1;
            let e = if verb == b'G' { b'E' } else { b'e' };
            if exp < -4 || exp >= eprec {
                if prec > digs.nd() {
                    prec = digs.nd();
                }
                return fmt_e(neg, &digs, prec - 1, e);
            }
            if prec > digs.dp {
                prec = digs.nd();
            }
            fmt_f(neg, &digs, (prec - digs.dp).max(0))
        }
    }
}

fn fmt_e(neg: bool, digs: &Digits, prec: i32, e: u8) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    out.push(char::from(*digs.d.first().unwrap_or(&b'0')));
    if prec > 0 {
        out.push('.');
        let mut i = 1;
        let m = digs.nd().min(prec + 1);
        while i < m {
            out.push(char::from(digs.d[usize::try_from(i).unwrap_or(0)]));
            i += 1;
        }
        while i <= prec {
            out.push('0');
            i += 1;
        }
    }
    out.push(char::from(e));
    let mut exp = if digs.d.is_empty() { 0 } else { digs.dp - 1 };
    if exp < 0 {
        out.push('-');
        exp = -exp;
    } else {
        out.push('+');
    }
    if exp < 10 {
        out.push('0');
    }
    out.push_str(&exp.to_string());
    out
}

fn fmt_f(neg: bool, digs: &Digits, prec: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if digs.dp > 0 {
        let m = digs.nd().min(digs.dp);
        for &c in &digs.d[..usize::try_from(m).unwrap_or(0)] {
            out.push(char::from(c));
        }
        for _ in m..digs.dp {
            out.push('0');
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            let j = digs.dp + i - 1;
            let c = if (0..digs.nd()).contains(&j) {
                digs.d[usize::try_from(j).unwrap_or(0)]
            } else {
                b'0'
            };
            out.push(char::from(c));
        }
    }
    out
}

/// The mantissa (with its implicit bit) and the unbiased exponent of `v`.
fn parts(v: f64) -> (u64, i32) {
    let bits = v.to_bits();
    let exp = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0);
    let mant = bits & ((1 << 52) - 1);
    if exp == 0 {
        (mant, 1 - 1023)
    } else {
        (mant | (1 << 52), exp - 1023)
    }
}

fn format_b(v: f64) -> String {
    let (mant, exp) = parts(v);
    let exp = exp - 52;
    let sign = if v.is_sign_negative() { "-" } else { "" };
    let plus = if exp >= 0 { "+" } else { "" };
    format!("{sign}{mant}p{plus}{exp}")
}

fn format_x(v: f64, verb: u8, prec: i32) -> String {
    let (mut mant, mut exp) = parts(v);
    if mant == 0 {
        exp = 0;
    }
    mant <<= 60 - 52;
    while mant != 0 && mant & (1 << 60) == 0 {
        mant <<= 1;
        exp -= 1;
    }
    if (0..15).contains(&prec) {
        let shift = u32::try_from(prec * 4).unwrap_or(0);
        let extra = (mant << shift) & ((1 << 60) - 1);
        mant >>= 60 - shift;
        if extra | (mant & 1) > 1 << 59 {
            mant += 1;
        }
        mant <<= 60 - shift;
        if mant & (1 << 61) != 0 {
            mant >>= 1;
            exp += 1;
        }
    }
    let hex: &[u8; 16] = if verb == b'X' {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = String::new();
    if v.is_sign_negative() {
        out.push('-');
    }
    out.push('0');
    out.push(char::from(verb));
    out.push(if (mant >> 60) & 1 == 1 { '1' } else { '0' });
    mant <<= 4;
    let digit = |m: u64| char::from(hex[usize::try_from((m >> 60) & 15).unwrap_or(0)]);
    if prec < 0 && mant != 0 {
        out.push('.');
        while mant != 0 {
            out.push(digit(mant));
            mant <<= 4;
        }
    } else if prec > 0 {
        out.push('.');
        for _ in 0..prec {
            out.push(digit(mant));
            mant <<= 4;
        }
    }
    out.push(if verb == b'X' { 'P' } else { 'p' });
    if exp < 0 {
        out.push('-');
        exp = -exp;
    } else {
        out.push('+');
    }
    if exp < 10 {
        out.push('0');
    }
    out.push_str(&exp.to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::format;

    #[test]
    fn matches_go_layouts() {
        assert_eq!(format(1e6, b'g', -1), "1e+06");
        assert_eq!(format(100_000.0, b'g', -1), "100000");
        assert_eq!(format(2.5e-7, b'g', -1), "2.5e-07");
        assert_eq!(format(1234.5678, b'e', 6), "1.234568e+03");
        assert_eq!(format(2.5, b'f', 0), "2");
        assert_eq!(format(1.23456, b'g', 3), "1.23");
        assert_eq!(format(0.0, b'e', 2), "0.00e+00");
        assert_eq!(format(1.5, b'x', -1), "0x1.8p+00");
    }

    /// Expected texts are Go's `strconv.FormatFloat(v, 'g'/'e', -1, 64)`.
    #[test]
    fn shortest_digits_round_a_tie_to_even_as_go_does() {
        assert_eq!(
            format(2f64.powi(49) + 0.25, b'g', -1),
            "5.629499534213122e+14"
        );
        assert_eq!(
            format(-(2f64.powi(49) + 0.25), b'g', -1),
            "-5.629499534213122e+14"
        );
        assert_eq!(
            format(2f64.powi(50) + 0.75, b'e', -1),
            "1.1258999068426248e+15"
        );
        assert_eq!(format(2f64.powi(-25), b'g', -1), "2.9802322387695312e-08");
        assert_eq!(format(2f64.powi(49) + 0.25, b'f', -1), "562949953421312.2");
        // At a power of two the even digit would not read back: Go takes the other one.
        assert_eq!(format(2f64.powi(-24), b'g', -1), "5.960464477539063e-08");
        assert_eq!(format(f64::from_bits(1), b'g', -1), "5e-324");
    }
}
