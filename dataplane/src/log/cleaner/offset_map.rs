//! The cleaner's offset map (Kafka's `SkimpyOffsetMap`): for every key seen in the dirty
//! part of a log, the offset of its latest record. Kafka stores a 16-byte MD5 of each key
//! to bound memory; this map stores the keys themselves, so two keys never collide, and
//! bounds memory by counting each entry's key bytes plus a fixed overhead against
//! `log.cleaner.dedupe.buffer.size` (times `log.cleaner.io.buffer.load.factor`).

use std::collections::HashMap;

/// What one entry costs beyond its key: the offset, the box's pointer and length, and
/// the hash table's slot and control byte, rounded up.
pub const ENTRY_OVERHEAD: usize = 48;

#[derive(Debug, Default)]
pub struct OffsetMap {
    latest: HashMap<Box<[u8]>, i64>,
    used: usize,
    capacity: usize,
}

impl OffsetMap {
    /// A map that holds entries worth at most `capacity` bytes.
    pub fn new(capacity: usize) -> OffsetMap {
        OffsetMap {
            latest: HashMap::new(),
            used: 0,
            capacity,
        }
    }

    /// Records `offset` as the latest of `key`. `false` (and nothing changes) when a new
    /// key does not fit any more; a known key always updates.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if let Some(o) = self.latest.get_mut(key) {
            *o = (*o).max(offset);
            return true;
        }
        let cost = key.len() + ENTRY_OVERHEAD;
        if self.used + cost > self.capacity {
            return false;
        }
        self.used += cost;
        self.latest.insert(key.into(), offset);
        true
    }

    /// The latest offset of `key`, if it was seen.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(key).copied()
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// Bytes counted against the capacity.
    pub fn used(&self) -> usize {
        self.used
    }

    pub fn clear(&mut self) {
        self.latest.clear();
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_per_key_and_refuses_new_keys_when_full() {
        let mut map = OffsetMap::new(2 * (ENTRY_OVERHEAD + 1));
        assert!(map.put(b"a", 3));
        assert!(map.put(b"b", 4));
        assert!(map.put(b"a", 9), "a known key always updates");
        assert!(!map.put(b"c", 10), "no room for a third key");
        assert_eq!(
            (map.get(b"a"), map.get(b"b"), map.get(b"c")),
            (Some(9), Some(4), None)
        );
        assert_eq!(map.len(), 2);
        assert_eq!(map.used(), 2 * (ENTRY_OVERHEAD + 1));
        map.clear();
        assert!(map.is_empty());
        assert!(map.put(b"c", 10));
    }
}
