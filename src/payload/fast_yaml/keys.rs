//! Duplicate keys in the mappings of the fast path that are not built as maps (not kept, or
//! the root of a headers-only document, whose map holds only some of its keys).

use std::borrow::Cow;
use std::collections::HashSet;

use super::Parser;

/// Mapping keys past which duplicates are found with a hash set rather than a scan.
const KEYS_SCANNED: usize = 32;

impl<'a> Parser<'a> {
    /// Records a key of the mapping whose keys start at `mark` in `seen` (or `many`, once it
    /// has more than [`KEYS_SCANNED`]); `false` when the mapping already has it.
    pub(super) fn first_time(
        &mut self,
        mark: usize,
        many: &mut Option<HashSet<Cow<'a, str>>>,
        key: Cow<'a, str>,
    ) -> bool {
        if let Some(set) = many {
            return set.insert(key);
        }
        if self.seen[mark..].contains(&key) {
            return false;
        }
        self.seen.push(key);
        if self.seen.len() - mark > KEYS_SCANNED {
            *many = Some(self.seen.drain(mark..).collect());
        }
        true
    }
}
