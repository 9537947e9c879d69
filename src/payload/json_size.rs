//! The size of a value as compact JSON: an upper bound without writing it, and the exact test
//! against a limit. The loader rejects objects larger than the kube-apiserver accepts.

use serde_json::Value;

/// An upper bound of the bytes `s` takes inside a JSON string, without its quotes: `"`, `\\`
/// and control characters print escaped, as at most 6 bytes.
pub(crate) fn text(s: &str) -> usize {
    let escaped: usize = s
        .bytes()
        .map(|b| usize::from(b < 0x20 || b == b'"' || b == b'\\'))
        .sum();
    s.len() + 5 * escaped
}

/// An upper bound of the size of `value` as compact JSON, without writing it: strings count
/// their escapes, numbers count as 24 bytes (the longest a number prints as). Several times
/// cheaper than serializing, so only objects near the limit are serialized.
pub(crate) fn bound(value: &Value) -> usize {
    let string = |s: &str| text(s) + 2;
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => string(s),
        Value::Array(items) => 2 + items.iter().map(|v| bound(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| string(k) + 2 + bound(v))
                .sum::<usize>()
        }
    }
}

/// Whether `value` serialized as compact JSON takes more than `limit` bytes. Stops writing as
/// soon as the limit is passed.
pub(crate) fn exceeds(value: &Value, limit: usize) -> bool {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written += buf.len();
            if self.written > self.limit {
                return Err(std::io::Error::other("limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, value).is_err()
}
