//! The fast path must agree with serde-saphyr: for every input it either gives up (`None`) or
//! returns exactly serde-saphyr's documents, values, key order and start lines. Checked on
//! hand-written edge cases, on every manifest of the corpus, and on random mutations of them.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use std::cell::Cell;

use super::{Document, HEADER_KEYS, Keep, indent, parse_stream, parse_stream_as};
use crate::payload::json_size;
use crate::payload::parse::{FAST_PATH_JSON_EXPANSION, saphyr_documents};

thread_local! {
    /// The source line of the last `give_up()`, to say why a file is not taken.
    pub(super) static GAVE_UP_AT: Cell<u32> = const { Cell::new(0) };
}

/// Asserts the fast path agrees with serde-saphyr on `text`, and a headers-only parse with a
/// whole one; returns whether it took it.
fn agrees(text: &str) -> bool {
    let whole = parse_stream(text);
    headers_agree(text, whole.as_deref());
    let Some(fast) = whole else {
        return false;
    };
    for d in &fast {
        assert!(d.source_len <= text.len() + 1, "input: {text:?}");
        // The loader skips its object size check for documents this bound keeps small.
        let json = serde_json::to_string(&d.value).expect("serializes");
        assert!(
            json.len() <= d.source_len * FAST_PATH_JSON_EXPANSION,
            "{} bytes of JSON from {} bytes of YAML: {text:?}",
            json.len(),
            d.source_len
        );
    }
    let fast: Vec<(usize, serde_json::Value)> =
        fast.into_iter().map(|d| (d.line, d.value)).collect();
    match saphyr_documents(text) {
        Ok(reference) => {
            let render = |docs: &[(usize, serde_json::Value)]| -> Vec<(usize, String)> {
                docs.iter()
                    .map(|(l, v)| (*l, serde_json::to_string(v).expect("serializes")))
                    .collect()
            };
            assert_eq!(render(&fast), render(&reference), "input: {text:?}");
            assert_eq!(fast, reference, "input: {text:?}");
        }
        Err(e) => panic!("the fast path accepted what serde-saphyr rejects ({e}): {text:?}"),
    }
    true
}

/// Asserts a headers-only parse of `text` gives up exactly where the whole parse did, and
/// otherwise gives the same documents with only the header keys of their roots, and a JSON
/// size bound no smaller than the whole object's size.
fn headers_agree(text: &str, whole: Option<&[Document]>) {
    let headers = parse_stream_as(text, Keep::Headers);
    let (Some(headers), Some(whole)) = (&headers, whole) else {
        assert_eq!(
            headers.is_some(),
            whole.is_some(),
            "headers-only and whole parses disagree on giving up: {text:?}"
        );
        return;
    };
    assert_eq!(headers.len(), whole.len(), "input: {text:?}");
    for (h, w) in headers.iter().zip(whole) {
        let mut expected = w.value.clone();
        if let serde_json::Value::Object(map) = &mut expected {
            map.retain(|k, _| HEADER_KEYS.contains(&k.as_str()));
        }
        assert_eq!((h.line, h.source_len), (w.line, w.source_len), "{text:?}");
        assert_eq!(
            serde_json::to_string(&h.value).expect("serializes"),
            serde_json::to_string(&expected).expect("serializes"),
            "input: {text:?}"
        );
        let bound = json_size::bound(&h.value) + h.skipped_json.expect("headers-only");
        let json = serde_json::to_string(&w.value).expect("serializes").len();
        assert!(
            bound >= json,
            "bound {bound} < {json} bytes of JSON: {text:?}"
        );
    }
}

/// Inputs the fast path must take (and get right).
const FAST: &[&str] = &[
    "a: >\n  folded\n  text\n",
    "a: >-\n  one\n  two\n\n  three\n\n\n  four\n",
    "a: >\n  a\n    more\n  b\n",
    "a: >\n  a\n\n    more\n    more 2\n\n  b\n  c\n",
    "a: >+\n  x\n  y\n\n",
    "a: >\n\n  x\n",
    "a:\n  b: >-\n    {\n      \"k\": \"v\"\n    }\n  c: 1\n",
    "a: 9e15",
    "a: [y, n, ~, 1e15, 9e15]",
    "a:\nb:\nc:\n",
    "a: \"\\0\\e\\a\"",
    "a: |\n  x\n\n\n\n  y\n",
    "a: 1",
    "1: a\nyes: b\non: c\nY: d",
    "a: 09\nb: 00\nc: 0x_1f\nd: 0X1F\ne: -.nan\nf: -inf\ng: 017\nh: -017\ni: 0o17\nj: 0b101",
    "a: 1.\nb: .5\nc: 5e\nd: -0\ne: 99999999999999999999\nf: -9223372036854775809\ng: 1_000\nh: +\ni: +12",
    "a: Y\nb: n\nc: off\nd: TRUE\ne: ~\nf: null\ng:\nh: ''\ni: \"\"\nj: NULL\nk: nil",
    "a: |\n  x",
    "a: |\n\n  x\n",
    "a: |\n  x\n\n",
    "a: |-\n  x\n",
    "a: |\n",
    "a: |\nb: 1",
    "a: |\n    x\n  \n    y\n",
    "a: |\n  # not a comment\n  x\n",
    "a: |\n    x\n  # comment\nb: 1\n",
    "a: b\n  c\n\n  d",
    "a: 'x\n  y\n\n  z'",
    "k: 'a\n\n\n  b'",
    "a: \"x\\\n  y\"",
    "a: \"x \\\n  y\"",
    "a: \"x\n\n  y\"",
    "a: 'it''s'",
    "a: \"\\u00e9\\x41\\U0001F600\"",
    "a: \"\\t\\0\\a\\b\\v\\f\\r\\ \\\"\\\\\\_\\L\\P\\/\\e\\N\"",
    "a:\n- b\n- c",
    "a:\n  - x\n  -\n  - y",
    "a: {b: c, d: [1, 2, {e: f}]}\ng: []\nh: {}",
    "a: b # c\nd: b#c\ne: 'x'  # c\nf:   \n",
    "\"a\": 1\n'b': 2",
    "x: 1\n---\n---\n# only a comment\n---\ny: 2\n",
    "# header\n--- # c\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    "a:\n- b: 1\n  c: 2\n- - x\n  - y\n-   d: 3\n    e: 4\nf: 5",
    "a:\n  b:\n    c:\n      - d\n      - e: |\n          text\n        f: g\n  h: i",
    "a: http://x:80/y\nb: a :b\nc: -v=2\nd: ?x\ne: :x",
    "a: caf\u{e9} \u{1F600}",
    "  a: 1\n  b: 2\n",
];

/// Inputs of all kinds: the fast path may give up, but must never disagree.
const ANY: &[&str] = &[
    // Duplicate keys where a headers-only parse builds no map: the root, a dropped subtree,
    // and a mapping past the keys scanned one by one.
    "apiVersion: v1\nkind: X\nspec:\n  a: 1\n  a: 2\n",
    "apiVersion: v1\nkind: X\nkind: Y\n",
    "kind: X\nspec:\n  x:\n    a: |\n      t\n    b: 1\n  x: 2\n",
    "kind: X\nspec:\n  k0: 0\n  k1: 1\n  k2: 2\n  k3: 3\n  k4: 4\n  k5: 5\n  k6: 6\n  k7: 7\n  k8: 8\n  k9: 9\n  k10: 10\n  k11: 11\n  k12: 12\n  k13: 13\n  k14: 14\n  k15: 15\n  k16: 16\n  k17: 17\n  k18: 18\n  k19: 19\n  k20: 20\n  k21: 21\n  k22: 22\n  k23: 23\n  k24: 24\n  k25: 25\n  k26: 26\n  k27: 27\n  k28: 28\n  k29: 29\n  k30: 30\n  k31: 31\n  k32: 32\n  k33: 33\n  k34: 34\n  k35: 35\n  k36: 36\n  k37: 37\n  k38: 38\n  k39: 39\n  k7: 7\n",
    "kind: X\nspec:\n  k0: 0\n  k1: 1\n  k2: 2\n  k3: 3\n  k4: 4\n  k5: 5\n  k6: 6\n  k7: 7\n  k8: 8\n  k9: 9\n  k10: 10\n  k11: 11\n  k12: 12\n  k13: 13\n  k14: 14\n  k15: 15\n  k16: 16\n  k17: 17\n  k18: 18\n  k19: 19\n  k20: 20\n  k21: 21\n  k22: 22\n  k23: 23\n  k24: 24\n  k25: 25\n  k26: 26\n  k27: 27\n  k28: 28\n  k29: 29\n  k30: 30\n  k31: 31\n  k32: 32\n  k33: 33\n  k34: 34\n  k35: 35\n  k36: 36\n  k37: 37\n  k38: 38\n  k39: 39\n",
    "kind: X\nmetadata:\n  name: a\n  name: b\nspec: 1\n",
    "kind: X\nspec:\n  - a: 1\n    a: 2\n",
    "a: >\n    spaced first\n  b\n",
    "a: >\n  x\n   \n  y\n",
    "a: >\n   x\n  y\n",
    "a:\n  b: 'x\n y'\n",
    "a:\n  b: 'x\n  y'\n  c: 1\n",
    "a:\n  b: \"x\n  y\"\n",
    "- 'x\n  y'\n",
    "a:\n- 'x\n  y'\n",
    "a:\n  - 'x\n  y'\n",
    "a:\n  - 'x\n   y'\n",
    "a: b\n  - c",
    "a: b\n  -c",
    "a: b\n  ? c",
    "a: b\n  :c",
    "a: b\n  [c",
    "a: b\n  ]c",
    "a: b\n  {c}",
    "a: b\n  'c' d",
    "a: b\n  \"c",
    "a: b\n  &c",
    "a: b\n  *c",
    "a: b\n  !c",
    "a: b\n  |c",
    "a: b\n  >c",
    "a: b\n  %c",
    "a: b\n  @c",
    "a: b\n  `c",
    "a: b\n  ,c",
    "- b\n  - c",
    "- a",
    "a: b # c\n  d",
    "a: b\n  c # d\n  e",
    "a: |+\n  keep\n\n\nb: 1",
    "a: |+\n  keep\n\n",
    "a: |+\n  keep",
    "null: c",
    "~: d",
    "a: .inf",
    "a: .nan",
    "a: 1e999",
    "a: - b",
    "a: -",
    "a: - 1",
    "a: x\n # c\n  y",
    "? a\n: b",
    "a: |\n   x\n  y",
    "a: |\n  x\n     \n",
    "a: [b, c,]",
    "a: [a:b]",
    "a: [http://x]",
    "a: b\nb: c\na: d",
    "a: {b: 1, b: 2}",
    "a: &x 1\nb: *x",
    "a: !!str 1",
    "<<: {a: 1}",
    "a: |+\n  keep\n\n",
    "a: |2\n   x\n",
    "%YAML 1.2\n---\na: 1",
    "a: 1\n...\n",
    "a:\tb",
    "a: b\r\n",
    "\u{feff}a: 1",
    "a: \"unterminated\n",
    "a: 'x'y",
    "a: \"\\q\"",
    "a: \"\\ud800\"",
    "a:\n  b: 1\n   c: 2",
    "a:\n    - x\n  b: 1",
    "a: b: c",
    "a: b\n  c: d",
    "- a\nb: c",
    "a: 1\n- b",
    "[a]: b",
    "just a string",
    "null",
    "---\n---\n",
    "",
    "a: \"x\n---\ny\"",
    "a: 'x\ny'",
    "a:\n  'x\n  y'",
    "a: [1,\n  2]",
    "a: {b: }",
    "a: {b : c}",
    "a: {\"b\": c}",
    "a: {yes: 1, 2: 3}",
];

#[test]
fn fast_path_takes_and_agrees_on_common_yaml() {
    for text in FAST {
        assert!(agrees(text), "the fast path gave up on {text:?}");
    }
}

#[test]
fn fast_path_never_disagrees_on_edge_cases() {
    for text in ANY {
        agrees(text);
    }
}

fn corpus_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for base in [root.join("payload"), root.join("../shared/payloads")] {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for e in entries.flatten() {
            dirs.push(e.path().join("release-manifests"));
            dirs.push(e.path().join("manifests"));
        }
    }
    let mut files = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn fast_path_agrees_on_the_whole_corpus_and_covers_most_of_it() {
    let files = corpus_files();
    assert!(files.len() > 400, "corpus not found: {} files", files.len());
    let (mut fast_bytes, mut all_bytes) = (0usize, 0usize);
    let mut slow = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("reads");
        if text.trim_start().starts_with('{') {
            continue;
        }
        all_bytes += text.len();
        if agrees(&text) {
            fast_bytes += text.len();
        } else {
            let name = f.file_name().map(|n| n.to_string_lossy().to_string());
            slow.push((name, GAVE_UP_AT.get()));
        }
    }
    // The fast path is only worth having if it takes nearly all of a real payload.
    assert!(
        fast_bytes * 100 >= all_bytes * 99,
        "fast path took {fast_bytes} of {all_bytes} bytes; gave up on {slow:?}"
    );
}

/// Documents to mutate: one of each construct the fast path handles.
const SEEDS: &[&str] = &[
    "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: |\n      sum(rate(x[5m])) > 0\n    annotations:\n      description: >-\n        folded text\n        over lines\n\n        and a paragraph\n          kept\n      summary: >\n        one\n    labels: {severity: warning}\n",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  namespace: b\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: c\n        args: [\"--v=2\", x]\n        env:\n        - name: A\n          value: 'q''s'\n      volumes:\n      - configMap:\n          defaultMode: 0644\n",
    "a:\n  description: a long plain\n    scalar folded\n\n    over lines\n  rule: 'self.x ? y\n    : z'\n  b: |-\n    line 1\n      line 2\n\n    line 3\n  c: \"esc\\\n    aped \\u00e9\"\n---\nd:\n- - 1\n  - {e: f, g: [h, 'i']}\n- k: ~\n  l:\n  - m\n",
];

fn mutate(seed: &str, edits: &[(usize, usize, u8)]) -> String {
    const INSERTS: &[&str] = &[
        " ", "  ", "\n", "-", "- ", ":", ": ", "#", " #", "'", "\"", "\\", "|", "|-", ">", "[",
        "]", "{", "}", ",", "&a ", "*a", "!", "?", "---\n", "...", "0", "1.5", "~", "yes", "\n  ",
    ];
    let mut s = seed.as_bytes().to_vec();
    for &(pos, len, what) in edits {
        let pos = pos % (s.len() + 1);
        match what % 3 {
            0 => {
                let ins = INSERTS[usize::from(what) % INSERTS.len()].as_bytes();
                s.splice(pos..pos, ins.iter().copied());
            }
            1 => {
                let end = (pos + len % 8).min(s.len());
                s.drain(pos..end);
            }
            _ => {
                // Re-indent the line holding `pos`.
                let start = s[..pos]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                if len % 2 == 0 {
                    s.insert(start, b' ');
                } else if s.get(start) == Some(&b' ') {
                    s.remove(start);
                }
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn fast_path_never_disagrees_on_mutated_manifests(
        seed in 0..SEEDS.len(),
        edits in proptest::collection::vec((0usize..4096, 0usize..16, any::<u8>()), 1..4),
    ) {
        agrees(&mutate(SEEDS[seed], &edits));
    }
}

/// The mutation test has teeth only if the fast path takes a fair share of the mutants: a
/// fast path that gave up on everything would pass it trivially.
#[test]
fn fast_path_takes_a_fair_share_of_mutants_and_agrees_on_all() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let total = 10_000;
    let mut taken = 0;
    for _ in 0..total {
        let seed = usize::try_from(next() % SEEDS.len() as u64).expect("small");
        let edits: Vec<(usize, usize, u8)> = (0..1 + next() % 3)
            .map(|_| {
                let [a, b, c, ..] = next().to_le_bytes();
                (usize::from(a) << 4 | usize::from(b), usize::from(b % 16), c)
            })
            .collect();
        if agrees(&mutate(SEEDS[seed], &edits)) {
            taken += 1;
        }
    }
    assert!(
        taken * 5 >= total,
        "the fast path took only {taken} of {total} mutants"
    );
}

/// The word-at-a-time indentation count is the count of leading spaces, for every length
/// and every place of the first other byte (ASCII, a tab, a multi-byte character).
#[test]
fn indent_counts_leading_spaces_at_every_length() {
    for len in 0..40 {
        let all = " ".repeat(len);
        assert_eq!(indent(&all), len, "{len} spaces");
        for first in 0..len {
            for other in ["x", "\t", "é", "#"] {
                let line = format!("{}{other}{}", " ".repeat(first), " ".repeat(len - first));
                assert_eq!(indent(&line), first, "{line:?}");
            }
        }
    }
}
