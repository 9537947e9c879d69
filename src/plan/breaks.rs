//! Break functions: how the CVO cuts a serial list of tasks into steps of parallel nodes, by
//! the run-level and component parsed from each file name.

use std::sync::LazyLock;

use regex::Regex;

use super::go_rand::GoRand;
use super::graph::{Node, Step};

static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^0000_(\d+)_([a-zA-Z0-9]+(-[a-zA-Z0-9]+)*?)_").expect("valid regex")
});

/// Run-level and component of a file name, with the CVO's pattern
/// `^0000_(\d+)_([a-zA-Z0-9]+(-[a-zA-Z0-9]+)*?)_`. Run-levels stay strings.
#[must_use]
pub fn level_and_component(file: &str) -> Option<(String, String)> {
    let c = NAME.captures(file)?;
    Some((c[1].to_string(), c[2].to_string()))
}

fn node(tasks: &[usize]) -> Node {
    Node {
        tasks: tasks.to_vec(),
        ..Node::default()
    }
}

/// The updating-mode break: one step per run-level with several components (one node per
/// adjacent component block); stretches of single-component run-levels and unmatched names
/// collapse into one serial node.
#[must_use]
pub fn by_number_and_component(tasks: &[usize], key: &[Option<(String, String)>]) -> Vec<Step> {
    scan(tasks, key, false)
}

/// The install-mode break: the same scan, but every block becomes a parallel node of one
/// single step, so run-level order is lost.
#[must_use]
pub fn flatten_by_number_and_component(
    tasks: &[usize],
    key: &[Option<(String, String)>],
) -> Vec<Step> {
    scan(tasks, key, true)
}

fn scan(tasks: &[usize], key: &[Option<(String, String)>], flatten: bool) -> Vec<Step> {
    let count = tasks.len();
    if count <= 1 {
        return Vec::new();
    }
    let m = |k: usize| key[tasks[k]].as_ref();
    let mut buckets: Vec<Step> = Vec::new();
    // The flat variant shares one `groups` list across the whole scan.
    let mut shared: Step = Vec::new();
    // Bucket index of the open serial node (updating variant only).
    let mut last: Option<usize> = None;
    let mut i = 0;
    while i < count {
        let mut base = m(i);
        let mut j = i + 1;
        let mut local: Step = Vec::new();
        let groups = if flatten { &mut shared } else { &mut local };
        while j < count {
            let next = m(j);
            let (Some(b), Some(n)) = (base, next) else {
                break;
            };
            if b.0 != n.0 {
                break;
            }
            if b.1 != n.1 {
                groups.push(node(&tasks[i..j]));
                i = j;
            }
            base = next;
            j += 1;
        }
        if !groups.is_empty() {
            groups.push(node(&tasks[i..j]));
            i = j;
            if !flatten {
                buckets.push(local);
            }
            last = None;
            continue;
        }
        if flatten {
            // `groups` is empty only before the first block; the first block opens it.
            shared.push(node(&tasks[i..j]));
            i = j;
            continue;
        }
        match last {
            None => {
                buckets.push(vec![node(&tasks[i..j])]);
                last = Some(buckets.len() - 1);
            }
            Some(b) => buckets[b][0].tasks.extend_from_slice(&tasks[i..j]),
        }
        i = j;
    }
    if flatten { vec![shared] } else { buckets }
}

/// Rotates every step left by `attempt % len` (short steps) or `attempt * len / stride % len`.
pub fn shift_order(steps: &mut [Step], attempt: usize, stride: usize) {
    for step in steps.iter_mut() {
        let max = step.len();
        if max == 0 {
            continue;
        }
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let shift = if max < stride {
            attempt % max
        } else {
            ((attempt as f64) * (max as f64) / (stride as f64)) as usize % max
        };
        step.rotate_left(shift);
    }
}

/// Shuffles every step with Go's `math/rand` `Shuffle`.
pub fn permute_order(steps: &mut [Step], rng: &mut GoRand) {
    for step in steps.iter_mut() {
        let n = step.len();
        rng.shuffle(n, |i, j| step.swap(i, j));
    }
}
