//! `fmt.Sprintf`'s reading of a format: flags, width and precision (`*` included), argument
//! indexes (`%[2]s`), and the reports of a bad call (`%!(NOVERB)`, `%!d(MISSING)`,
//! `%!d(BADINDEX)`, `%!(BADWIDTH)`, `%!(BADPREC)`, `%!(EXTRA type=value)`).

use super::fmt::{Flags, Printer};
use super::value::Value;

impl Printer<'_> {
    pub(super) fn do_printf(&mut self, format: &str, args: &[Value<'_>]) {
        let fb = format.as_bytes();
        let end = fb.len();
        let mut arg_num = 0usize;
        let mut after_index;
        let mut reordered = false;
        let mut i = 0;
        'format: while i < end {
            let mut good_arg_num = true;
            let last = i;
            while i < end && fb[i] != b'%' {
                i += 1;
            }
            if i > last {
                self.buf.push_str(&format[last..i]);
            }
            if i >= end {
                break;
            }
            i += 1;
            self.f = Flags::default();
            while i < end {
                let c = fb[i];
                match c {
                    b'#' => self.f.sharp = true,
                    b'0' => self.f.zero = true,
                    b'+' => self.f.plus = true,
                    b'-' => self.f.minus = true,
                    b' ' => self.f.space = true,
                    _ => {
                        if c.is_ascii_lowercase() && arg_num < args.len() {
                            if c == b'v' || c == b'w' {
                                self.move_sharp_plus();
                            }
                            self.print_arg(&args[arg_num], char::from(c));
                            arg_num += 1;
                            i += 1;
                            continue 'format;
                        }
                        break;
                    }
                }
                i += 1;
            }
            (arg_num, i, after_index) = arg_number(
                arg_num,
                format,
                i,
                args.len(),
                &mut good_arg_num,
                &mut reordered,
            );
            if i < end && fb[i] == b'*' {
                i += 1;
                let (w, ok, n) = int_from_arg(args, arg_num);
                arg_num = n;
                if !ok {
                    self.buf.push_str("%!(BADWIDTH)");
                }
                self.f.wid = ok.then(|| usize::try_from(w.unsigned_abs()).unwrap_or(0));
                if ok && w < 0 {
                    self.f.minus = true;
                    self.f.zero = false;
                }
                after_index = false;
            } else {
                let (w, present, ni) = parse_num(fb, i, end);
                self.f.wid = present.then_some(w);
                i = ni;
                if after_index && present {
                    good_arg_num = false;
                }
            }
            if i + 1 < end && fb[i] == b'.' {
                i += 1;
                if after_index {
                    good_arg_num = false;
                }
                (arg_num, i, after_index) = arg_number(
                    arg_num,
                    format,
                    i,
                    args.len(),
                    &mut good_arg_num,
                    &mut reordered,
                );
                if i < end && fb[i] == b'*' {
                    i += 1;
                    let (p, ok, n) = int_from_arg(args, arg_num);
                    arg_num = n;
                    let ok = ok && p >= 0;
                    self.f.prec = ok.then(|| usize::try_from(p.unsigned_abs()).unwrap_or(0));
                    if !ok {
                        self.buf.push_str("%!(BADPREC)");
                    }
                    after_index = false;
                } else {
                    let (p, present, ni) = parse_num(fb, i, end);
                    i = ni;
                    self.f.prec = Some(if present { p } else { 0 });
                }
            }
            if !after_index {
                (arg_num, i, after_index) = arg_number(
                    arg_num,
                    format,
                    i,
                    args.len(),
                    &mut good_arg_num,
                    &mut reordered,
                );
            }
            let _ = after_index;
            if i >= end {
                self.buf.push_str("%!(NOVERB)");
                break;
            }
            let verb = format[i..].chars().next().unwrap_or('%');
            i += verb.len_utf8();
            match verb {
                '%' => self.buf.push('%'),
                _ if !good_arg_num => {
                    self.buf.push_str("%!");
                    self.buf.push(verb);
                    self.buf.push_str("(BADINDEX)");
                }
                _ if arg_num >= args.len() => {
                    self.buf.push_str("%!");
                    self.buf.push(verb);
                    self.buf.push_str("(MISSING)");
                }
                _ => {
                    if verb == 'v' || verb == 'w' {
                        self.move_sharp_plus();
                    }
                    self.print_arg(&args[arg_num], verb);
                    arg_num += 1;
                }
            }
        }
        if !reordered && arg_num < args.len() {
            self.f = Flags::default();
            self.buf.push_str("%!(EXTRA ");
            for (k, a) in args[arg_num..].iter().enumerate() {
                if k > 0 {
                    self.buf.push_str(", ");
                }
                if let Value::Invalid = a {
                    self.buf.push_str("<nil>");
                } else {
                    self.buf.push_str(a.type_name());
                    self.buf.push('=');
                    self.print_arg(a, 'v');
                }
            }
            self.buf.push(')');
        }
    }
}

/// A decimal number at `fb[i..end]`: its value, whether there was one, and the index after.
fn parse_num(fb: &[u8], mut i: usize, end: usize) -> (usize, bool, usize) {
    let start = i;
    let mut n = 0usize;
    while i < end && fb[i].is_ascii_digit() {
        if n > 1_000_000 {
            return (0, false, end);
        }
        n = n * 10 + usize::from(fb[i] - b'0');
        i += 1;
    }
    (n, i > start, i)
}

/// An argument index `[n]` at `format[i..]`: the next argument, index after it, and whether
/// one was read.
fn arg_number(
    arg_num: usize,
    format: &str,
    i: usize,
    num_args: usize,
    good: &mut bool,
    reordered: &mut bool,
) -> (usize, usize, bool) {
    let fb = format.as_bytes();
    if fb.len() <= i || fb[i] != b'[' {
        return (arg_num, i, false);
    }
    *reordered = true;
    let (index, wid, ok) = parse_arg_number(&fb[i..]);
    if let Some(index) = index.filter(|x| ok && *x < num_args) {
        return (index, i + wid, true);
    }
    *good = false;
    (arg_num, i + wid, ok)
}

fn parse_arg_number(f: &[u8]) -> (Option<usize>, usize, bool) {
    if f.len() < 3 {
        return (None, 1, false);
    }
    for i in 1..f.len() {
        if f[i] == b']' {
            let (width, ok, newi) = parse_num(f, 1, i);
            if !ok || newi != i {
                return (None, i + 1, false);
            }
            // Argument numbers count from 1; `[0]` is a bad index.
            return (width.checked_sub(1), i + 1, true);
        }
    }
    (None, 1, false)
}

/// `*` in a format: the int argument at `arg_num`, whether it is one, and the next argument.
fn int_from_arg(args: &[Value<'_>], arg_num: usize) -> (i64, bool, usize) {
    let Some(a) = args.get(arg_num) else {
        return (0, false, arg_num);
    };
    let n = match a {
        Value::Int(i) => Some(*i),
        Value::Byte(b) => Some(i64::from(*b)),
        _ => None,
    };
    match n {
        Some(n) if n.unsigned_abs() <= 1_000_000 => (n, true, arg_num + 1),
        _ => (0, false, arg_num + 1),
    }
}
