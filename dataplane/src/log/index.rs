//! Kafka's sparse segment indexes: the offset index (`.index`) and the time index
//! (`.timeindex`).
//!
//! Both hold their entries in memory and speak Kafka's exact on-disk format; they do no
//! I/O. The segment appends through [`OffsetIndex::append`] / [`TimeIndex::append`], which
//! hand back the encoded entry to write at the end of the file, and recovery feeds the
//! file's bytes to [`OffsetIndex::parse`] / [`TimeIndex::parse`], which never panic and
//! say which entry is wrong and why.
//!
//! Kafka preallocates index files (zero-filled) and trims them on a clean close, so a
//! crash can leave a run of all-zero entries at the end; `parse` treats that trailing run
//! as the end of the index. Dropping a leading all-zero entry is harmless: for the
//! offset index `(base_offset, 0)` is what [`OffsetIndex::lookup`] answers for an empty
//! index anyway, and for the time index it only loses "timestamp 0 at the base offset".
//!
//! Relative offsets and file positions are Java `int`s on disk, so both must lie in
//! `0..=i32::MAX` (Kafka rolls a segment before an offset stops fitting;
//! [`OffsetIndex::can_append_offset`] is Kafka's `canAppendOffset`).

use crate::types::Offset;

/// Why the bytes of an index file are not a valid index. `kind` is `"offset index"`,
/// `"time index"` or `"transaction index"`; `entry` counts entries from 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("{kind} is {len} bytes, not a multiple of the {entry_size}-byte entry size")]
    BadLength {
        kind: &'static str,
        len: usize,
        entry_size: usize,
    },
    #[error("{kind} entry {entry}: {field} {value} is not above the previous entry's {previous}")]
    NotIncreasing {
        kind: &'static str,
        entry: usize,
        field: &'static str,
        previous: i64,
        value: i64,
    },
    #[error(
        "{kind} entry {entry}: {field} {value} decreases from the previous entry's {previous}"
    )]
    Decreasing {
        kind: &'static str,
        entry: usize,
        field: &'static str,
        previous: i64,
        value: i64,
    },
    #[error("{kind} entry {entry}: {field} {value} is negative")]
    Negative {
        kind: &'static str,
        entry: usize,
        field: &'static str,
        value: i64,
    },
    #[error("{kind} base offset {base_offset} is outside 0..={max}")]
    BadBaseOffset {
        kind: &'static str,
        base_offset: Offset,
        max: i64,
    },
    #[error("{kind} entry {entry}: unsupported version {version}")]
    UnsupportedVersion {
        kind: &'static str,
        entry: usize,
        version: i16,
    },
    #[error("{kind} entry {entry}: last offset {last_offset} is below the segment base offset {base_offset}")]
    BelowBaseOffset {
        kind: &'static str,
        entry: usize,
        last_offset: Offset,
        base_offset: Offset,
    },
    #[error(
        "{kind} entry {entry}: first offset {first_offset} is above last offset {last_offset}"
    )]
    FirstAfterLast {
        kind: &'static str,
        entry: usize,
        first_offset: Offset,
        last_offset: Offset,
    },
}

const OFFSET_INDEX: &str = "offset index";
const TIME_INDEX: &str = "time index";

/// The largest base offset for which every relative offset (`0..=i32::MAX`) still maps to
/// an `i64` offset.
const MAX_BASE_OFFSET: i64 = i64::MAX - i32::MAX as i64;

/// Kafka's `NO_TIMESTAMP`, what the time index answers when no entry qualifies.
pub const NO_TIMESTAMP: i64 = -1;

/// `offset - base` as a relative offset, or `None` when it is not in `0..=i32::MAX`.
fn to_relative(base_offset: Offset, offset: Offset) -> Option<u32> {
    let rel = offset.0.checked_sub(base_offset.0)?;
    if (0..=i64::from(i32::MAX)).contains(&rel) {
        u32::try_from(rel).ok()
    } else {
        None
    }
}

/// Relative offset of `target` for a binary search: clamped into `u32`, so targets below
/// the base sort before every entry and huge targets after every entry. `None` means the
/// target is below the base offset.
fn search_key(base_offset: Offset, target: Offset) -> Option<u32> {
    let rel = target.0.saturating_sub(base_offset.0);
    if rel < 0 {
        None
    } else {
        Some(u32::try_from(rel).unwrap_or(u32::MAX))
    }
}

fn absolute(base_offset: Offset, relative: u32) -> Offset {
    // Entries only get in through `append` (offset - base fits) or `parse` (base checked
    // against MAX_BASE_OFFSET, relative <= i32::MAX), so this cannot overflow.
    Offset(base_offset.0 + i64::from(relative))
}

pub(crate) fn check_length(
    kind: &'static str,
    len: usize,
    entry_size: usize,
) -> Result<(), IndexError> {
    if len.is_multiple_of(entry_size) {
        Ok(())
    } else {
        Err(IndexError::BadLength {
            kind,
            len,
            entry_size,
        })
    }
}

fn check_base(kind: &'static str, base_offset: Offset) -> Result<(), IndexError> {
    if (0..=MAX_BASE_OFFSET).contains(&base_offset.0) {
        Ok(())
    } else {
        Err(IndexError::BadBaseOffset {
            kind,
            base_offset,
            max: MAX_BASE_OFFSET,
        })
    }
}

/// The entries of `bytes` without the trailing run of all-zero entries that preallocation
/// leaves behind after a crash.
fn without_zero_tail(bytes: &[u8], entry_size: usize) -> &[u8] {
    let mut end = bytes.len();
    while end >= entry_size && bytes[end - entry_size..end].iter().all(|&b| b == 0) {
        end -= entry_size;
    }
    &bytes[..end]
}

/// A non-negative Java `int` read from disk.
fn non_negative_i32(
    kind: &'static str,
    entry: usize,
    field: &'static str,
    b: [u8; 4],
) -> Result<u32, IndexError> {
    let v = i32::from_be_bytes(b);
    u32::try_from(v).map_err(|_| IndexError::Negative {
        kind,
        entry,
        field,
        value: i64::from(v),
    })
}

/// Kafka's offset index (`<base offset>.index`): a sparse map from offset to the byte
/// position of the batch that contains it, searched to start a read near an offset.
///
/// Entry format (8 bytes, big-endian): `i32` offset relative to the segment base offset,
/// `i32` byte position in the segment file. Relative offsets strictly increase and
/// positions never decrease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetIndex {
    base_offset: Offset,
    /// (relative offset, file position)
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    /// Bytes per entry on disk.
    pub const ENTRY_SIZE: usize = 8;

    pub fn new(base_offset: Offset) -> Self {
        Self {
            base_offset,
            entries: Vec::new(),
        }
    }

    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Whether `offset` can be stored relative to this index's base offset (Kafka's
    /// `canAppendOffset`); the segment rolls when it cannot.
    pub fn can_append_offset(&self, offset: Offset) -> bool {
        to_relative(self.base_offset, offset).is_some()
    }

    /// Adds an entry mapping `offset` to `position` when `offset` is above the last
    /// entry's offset, and returns the 8 bytes to append to the `.index` file; returns
    /// `None` (and changes nothing) for an offset that is not above the last one.
    ///
    /// Panics when `offset` cannot be stored relative to the base offset or `position`
    /// is below the last entry's position or above `i32::MAX`: the segment decides both,
    /// so either is a bug.
    pub fn append(&mut self, offset: Offset, position: u32) -> Option<[u8; 8]> {
        let rel = to_relative(self.base_offset, offset);
        assert!(
            rel.is_some(),
            "offset {offset} does not fit an offset index with base offset {}",
            self.base_offset
        );
        let rel = rel?;
        if let Some(&(last_rel, last_position)) = self.entries.last() {
            if rel <= last_rel {
                return None;
            }
            assert!(
                position >= last_position,
                "offset index position {position} for offset {offset} is below the last \
                 entry's position {last_position}"
            );
        }
        assert!(
            i32::try_from(position).is_ok(),
            "offset index position {position} does not fit a Java int"
        );
        self.entries.push((rel, position));
        Some(encode_offset_entry(rel, position))
    }

    /// The entry with the largest offset `<= target`, as `(offset, position)`, or
    /// `(base_offset, 0)` when there is none (Kafka's `lookup`).
    pub fn lookup(&self, target: Offset) -> (Offset, u32) {
        let slot = search_key(self.base_offset, target).and_then(|key| {
            self.entries
                .partition_point(|&(rel, _)| rel <= key)
                .checked_sub(1)
        });
        match slot {
            Some(i) => {
                let (rel, position) = self.entries[i];
                (absolute(self.base_offset, rel), position)
            }
            None => (self.base_offset, 0),
        }
    }

    /// Drops every entry whose offset is `>= offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&mut self, offset: Offset) {
        let keep = match search_key(self.base_offset, offset) {
            None => 0,
            Some(key) => self.entries.partition_point(|&(rel, _)| rel < key),
        };
        self.entries.truncate(keep);
    }

    /// Drops every entry (Kafka's `reset`).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// `(offset, position)` pairs in increasing order.
    pub fn entries(&self) -> impl Iterator<Item = (Offset, u32)> + '_ {
        self.entries
            .iter()
            .map(|&(rel, position)| (absolute(self.base_offset, rel), position))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Size of the entries on disk, in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.entries.len() * Self::ENTRY_SIZE
    }

    pub fn last_entry(&self) -> Option<(Offset, u32)> {
        self.entries
            .last()
            .map(|&(rel, position)| (absolute(self.base_offset, rel), position))
    }

    /// The whole index in its on-disk format (trimmed: no preallocated zeros).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_in_bytes());
        for &(rel, position) in &self.entries {
            out.extend_from_slice(&encode_offset_entry(rel, position));
        }
        out
    }

    /// Reads an `.index` file's bytes. The length must be a multiple of 8; a trailing run
    /// of all-zero entries (preallocation left by a crash) ends the index; relative
    /// offsets and positions must be non-negative, offsets strictly increasing and
    /// positions non-decreasing.
    pub fn parse(base_offset: Offset, bytes: &[u8]) -> Result<OffsetIndex, IndexError> {
        check_base(OFFSET_INDEX, base_offset)?;
        check_length(OFFSET_INDEX, bytes.len(), Self::ENTRY_SIZE)?;
        let body = without_zero_tail(bytes, Self::ENTRY_SIZE);
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(body.len() / Self::ENTRY_SIZE);
        for (i, c) in body.chunks_exact(Self::ENTRY_SIZE).enumerate() {
            let rel =
                non_negative_i32(OFFSET_INDEX, i, "relative offset", [c[0], c[1], c[2], c[3]])?;
            let position = non_negative_i32(OFFSET_INDEX, i, "position", [c[4], c[5], c[6], c[7]])?;
            if let Some(&(last_rel, last_position)) = entries.last() {
                if rel <= last_rel {
                    return Err(IndexError::NotIncreasing {
                        kind: OFFSET_INDEX,
                        entry: i,
                        field: "relative offset",
                        previous: i64::from(last_rel),
                        value: i64::from(rel),
                    });
                }
                if position < last_position {
                    return Err(IndexError::Decreasing {
                        kind: OFFSET_INDEX,
                        entry: i,
                        field: "position",
                        previous: i64::from(last_position),
                        value: i64::from(position),
                    });
                }
            }
            entries.push((rel, position));
        }
        Ok(OffsetIndex {
            base_offset,
            entries,
        })
    }
}

fn encode_offset_entry(rel: u32, position: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&rel.to_be_bytes());
    b[4..].copy_from_slice(&position.to_be_bytes());
    b
}

/// Kafka's time index (`<base offset>.timeindex`): a sparse map from the largest
/// timestamp seen so far to the offset of the record that carried it, searched by
/// ListOffsets and time-based retention.
///
/// Entry format (12 bytes, big-endian): `i64` timestamp (ms), `i32` offset relative to
/// the segment base offset. Timestamps strictly increase (starting above
/// [`NO_TIMESTAMP`]) and offsets never decrease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeIndex {
    base_offset: Offset,
    /// (timestamp ms, relative offset)
    entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    /// Bytes per entry on disk.
    pub const ENTRY_SIZE: usize = 12;

    pub fn new(base_offset: Offset) -> Self {
        Self {
            base_offset,
            entries: Vec::new(),
        }
    }

    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Whether `offset` can be stored relative to this index's base offset.
    pub fn can_append_offset(&self, offset: Offset) -> bool {
        to_relative(self.base_offset, offset).is_some()
    }

    /// Kafka's `maybeAppend`: adds `(timestamp_ms, offset)` only when `timestamp_ms` is
    /// above the last entry's timestamp (above [`NO_TIMESTAMP`] for an empty index) and
    /// returns the 12 bytes to append to the `.timeindex` file; otherwise `None`.
    ///
    /// Panics when `offset` is below the last entry's offset or cannot be stored relative
    /// to the base offset; the segment passes its offset of the max timestamp so far, so
    /// either is a bug.
    pub fn append(&mut self, timestamp_ms: i64, offset: Offset) -> Option<[u8; 12]> {
        let rel = to_relative(self.base_offset, offset);
        assert!(
            rel.is_some(),
            "offset {offset} does not fit a time index with base offset {}",
            self.base_offset
        );
        let rel = rel?;
        let (last_ts, last_rel) = self.entries.last().copied().unwrap_or((NO_TIMESTAMP, 0));
        assert!(
            rel >= last_rel,
            "time index offset {offset} is below the last entry's offset {}",
            absolute(self.base_offset, last_rel)
        );
        if timestamp_ms <= last_ts {
            return None;
        }
        self.entries.push((timestamp_ms, rel));
        Some(encode_time_entry(timestamp_ms, rel))
    }

    /// The entry with the largest timestamp `<= target_ms`, as `(timestamp, offset)`, or
    /// `(NO_TIMESTAMP, base_offset)` when there is none (Kafka's `lookup`).
    pub fn lookup(&self, target_ms: i64) -> (i64, Offset) {
        match self
            .entries
            .partition_point(|&(ts, _)| ts <= target_ms)
            .checked_sub(1)
        {
            Some(i) => {
                let (ts, rel) = self.entries[i];
                (ts, absolute(self.base_offset, rel))
            }
            None => (NO_TIMESTAMP, self.base_offset),
        }
    }

    /// Drops every entry whose offset is `>= offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&mut self, offset: Offset) {
        let keep = match search_key(self.base_offset, offset) {
            None => 0,
            Some(key) => self.entries.partition_point(|&(_, rel)| rel < key),
        };
        self.entries.truncate(keep);
    }

    /// Drops every entry (Kafka's `reset`).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// `(timestamp, offset)` pairs in increasing order.
    pub fn entries(&self) -> impl Iterator<Item = (i64, Offset)> + '_ {
        self.entries
            .iter()
            .map(|&(ts, rel)| (ts, absolute(self.base_offset, rel)))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Size of the entries on disk, in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.entries.len() * Self::ENTRY_SIZE
    }

    pub fn last_entry(&self) -> Option<(i64, Offset)> {
        self.entries
            .last()
            .map(|&(ts, rel)| (ts, absolute(self.base_offset, rel)))
    }

    /// The whole index in its on-disk format (trimmed: no preallocated zeros).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_in_bytes());
        for &(ts, rel) in &self.entries {
            out.extend_from_slice(&encode_time_entry(ts, rel));
        }
        out
    }

    /// Reads a `.timeindex` file's bytes. The length must be a multiple of 12; a trailing
    /// run of all-zero entries ends the index; timestamps must strictly increase from
    /// above [`NO_TIMESTAMP`], relative offsets must be non-negative and non-decreasing.
    pub fn parse(base_offset: Offset, bytes: &[u8]) -> Result<TimeIndex, IndexError> {
        check_base(TIME_INDEX, base_offset)?;
        check_length(TIME_INDEX, bytes.len(), Self::ENTRY_SIZE)?;
        let body = without_zero_tail(bytes, Self::ENTRY_SIZE);
        let mut entries: Vec<(i64, u32)> = Vec::with_capacity(body.len() / Self::ENTRY_SIZE);
        for (i, c) in body.chunks_exact(Self::ENTRY_SIZE).enumerate() {
            let ts = i64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            let rel =
                non_negative_i32(TIME_INDEX, i, "relative offset", [c[8], c[9], c[10], c[11]])?;
            let (last_ts, last_rel) = entries.last().copied().unwrap_or((NO_TIMESTAMP, 0));
            if ts <= last_ts {
                return Err(IndexError::NotIncreasing {
                    kind: TIME_INDEX,
                    entry: i,
                    field: "timestamp",
                    previous: last_ts,
                    value: ts,
                });
            }
            if rel < last_rel {
                return Err(IndexError::Decreasing {
                    kind: TIME_INDEX,
                    entry: i,
                    field: "relative offset",
                    previous: i64::from(last_rel),
                    value: i64::from(rel),
                });
            }
            entries.push((ts, rel));
        }
        Ok(TimeIndex {
            base_offset,
            entries,
        })
    }
}

fn encode_time_entry(timestamp_ms: i64, rel: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&timestamp_ms.to_be_bytes());
    b[8..].copy_from_slice(&rel.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_index(base: i64, entries: &[(i64, u32)]) -> OffsetIndex {
        let mut idx = OffsetIndex::new(Offset(base));
        for &(o, p) in entries {
            assert!(idx.append(Offset(o), p).is_some());
        }
        idx
    }

    fn time_index(base: i64, entries: &[(i64, i64)]) -> TimeIndex {
        let mut idx = TimeIndex::new(Offset(base));
        for &(ts, o) in entries {
            assert!(idx.append(ts, Offset(o)).is_some());
        }
        idx
    }

    #[test]
    fn offset_entry_encoding_is_kafkas() {
        let mut idx = OffsetIndex::new(Offset(100));
        let b = idx
            .append(Offset(0x0102_0304 + 100), 0x0a0b_0c0d)
            .expect("appended");
        assert_eq!(b, [1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(idx.to_bytes(), b.to_vec());
    }

    #[test]
    fn offset_append_skips_non_increasing_offsets() {
        let mut idx = offset_index(100, &[(105, 10)]);
        assert_eq!(idx.append(Offset(105), 20), None);
        assert_eq!(idx.append(Offset(104), 20), None);
        assert_eq!(idx.len(), 1);
        // A skipped offset does not check the position.
        assert_eq!(idx.append(Offset(103), 0), None);
        assert!(
            idx.append(Offset(106), 10).is_some(),
            "equal position is fine"
        );
    }

    #[test]
    #[should_panic(expected = "below the last entry's position")]
    fn offset_append_asserts_positions_do_not_go_back() {
        let mut idx = offset_index(100, &[(105, 10)]);
        idx.append(Offset(106), 9);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn offset_append_asserts_offset_not_below_base() {
        OffsetIndex::new(Offset(100)).append(Offset(99), 0);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn offset_append_asserts_relative_offset_fits_an_int() {
        OffsetIndex::new(Offset(0)).append(Offset(i64::from(i32::MAX) + 1), 0);
    }

    #[test]
    fn can_append_offset_is_the_relative_int_range() {
        let idx = OffsetIndex::new(Offset(10));
        assert!(idx.can_append_offset(Offset(10)));
        assert!(idx.can_append_offset(Offset(10 + i64::from(i32::MAX))));
        assert!(!idx.can_append_offset(Offset(11 + i64::from(i32::MAX))));
        assert!(!idx.can_append_offset(Offset(9)));
        assert!(!idx.can_append_offset(Offset(i64::MIN)));
    }

    #[test]
    fn offset_lookup_boundaries() {
        let idx = offset_index(100, &[(110, 1000), (120, 2000), (130, 3000)]);
        assert_eq!(idx.lookup(Offset(0)), (Offset(100), 0), "below base");
        assert_eq!(idx.lookup(Offset(i64::MIN)), (Offset(100), 0));
        assert_eq!(
            idx.lookup(Offset(105)),
            (Offset(100), 0),
            "before first entry"
        );
        assert_eq!(idx.lookup(Offset(110)), (Offset(110), 1000), "exact first");
        assert_eq!(idx.lookup(Offset(119)), (Offset(110), 1000), "between");
        assert_eq!(idx.lookup(Offset(120)), (Offset(120), 2000), "exact middle");
        assert_eq!(idx.lookup(Offset(130)), (Offset(130), 3000), "exact last");
        assert_eq!(
            idx.lookup(Offset(10_000)),
            (Offset(130), 3000),
            "after last"
        );
        assert_eq!(idx.lookup(Offset(i64::MAX)), (Offset(130), 3000));
        assert_eq!(
            OffsetIndex::new(Offset(7)).lookup(Offset(50)),
            (Offset(7), 0)
        );
    }

    #[test]
    fn offset_truncate_to() {
        let full = offset_index(100, &[(110, 1000), (120, 2000), (130, 3000)]);
        let cases = [
            (131, 3),
            (130, 2),
            (125, 2),
            (120, 1),
            (111, 1),
            (110, 0),
            (100, 0),
            (50, 0),
            (i64::MIN, 0),
        ];
        for (to, left) in cases {
            let mut idx = full.clone();
            idx.truncate_to(Offset(to));
            assert_eq!(idx.len(), left, "truncate_to({to})");
        }
        let mut idx = full.clone();
        idx.truncate_to(Offset(120));
        assert_eq!(idx.last_entry(), Some((Offset(110), 1000)));
        // Appending after truncation may reuse the truncated offsets and lower positions.
        assert!(idx.append(Offset(115), 1500).is_some());
    }

    #[test]
    fn offset_round_trip_and_accessors() {
        let idx = offset_index(1 << 40, &[((1 << 40) + 1, 0), ((1 << 40) + 7, 4096)]);
        assert_eq!(idx.base_offset(), Offset(1 << 40));
        assert_eq!(
            idx.entries().collect::<Vec<_>>(),
            vec![(Offset((1 << 40) + 1), 0), (Offset((1 << 40) + 7), 4096)]
        );
        let bytes = idx.to_bytes();
        assert_eq!(bytes.len(), 16);
        assert_eq!(OffsetIndex::parse(Offset(1 << 40), &bytes), Ok(idx));
        let empty = OffsetIndex::parse(Offset(3), &[]).expect("empty index");
        assert!(empty.is_empty());
        assert_eq!(empty.last_entry(), None);
    }

    #[test]
    fn offset_parse_ends_at_trailing_zeros() {
        let idx = offset_index(0, &[(5, 100), (9, 200)]);
        let mut bytes = idx.to_bytes();
        bytes.extend_from_slice(&[0u8; 8 * 3]);
        assert_eq!(OffsetIndex::parse(Offset(0), &bytes), Ok(idx));
        // A fully preallocated, never-written index.
        let zeros = OffsetIndex::parse(Offset(0), &[0u8; 64]).expect("zeros");
        assert!(zeros.is_empty());
        // A leading (0, 0) entry followed by real entries is kept.
        let mut bytes = vec![0u8; 8];
        bytes.extend_from_slice(&encode_offset_entry(3, 50));
        let idx = OffsetIndex::parse(Offset(10), &bytes).expect("leading zero entry");
        assert_eq!(
            idx.entries().collect::<Vec<_>>(),
            vec![(Offset(10), 0), (Offset(13), 50)]
        );
    }

    #[test]
    fn offset_parse_rejects_corruption() {
        assert_eq!(
            OffsetIndex::parse(Offset(0), &[0u8; 12]),
            Err(IndexError::BadLength {
                kind: "offset index",
                len: 12,
                entry_size: 8
            })
        );
        let mut bytes = encode_offset_entry(5, 100).to_vec();
        bytes.extend_from_slice(&encode_offset_entry(5, 200));
        assert_eq!(
            OffsetIndex::parse(Offset(0), &bytes),
            Err(IndexError::NotIncreasing {
                kind: "offset index",
                entry: 1,
                field: "relative offset",
                previous: 5,
                value: 5
            })
        );
        let mut bytes = encode_offset_entry(5, 100).to_vec();
        bytes.extend_from_slice(&encode_offset_entry(6, 99));
        assert!(matches!(
            OffsetIndex::parse(Offset(0), &bytes),
            Err(IndexError::Decreasing {
                entry: 1,
                field: "position",
                ..
            })
        ));
        // Zeros in the middle are not a tail: entry 1 goes backwards.
        let mut bytes = encode_offset_entry(5, 100).to_vec();
        bytes.extend_from_slice(&[0u8; 8]);
        bytes.extend_from_slice(&encode_offset_entry(6, 200));
        assert!(matches!(
            OffsetIndex::parse(Offset(0), &bytes),
            Err(IndexError::NotIncreasing { entry: 1, .. })
        ));
        let bytes = encode_offset_entry(0x8000_0000, 100);
        assert!(matches!(
            OffsetIndex::parse(Offset(0), &bytes),
            Err(IndexError::Negative {
                entry: 0,
                field: "relative offset",
                ..
            })
        ));
        let bytes = encode_offset_entry(1, 0xffff_ffff);
        assert!(matches!(
            OffsetIndex::parse(Offset(0), &bytes),
            Err(IndexError::Negative {
                entry: 0,
                field: "position",
                value: -1,
                ..
            })
        ));
        assert!(matches!(
            OffsetIndex::parse(Offset(-1), &[]),
            Err(IndexError::BadBaseOffset { .. })
        ));
        assert!(matches!(
            OffsetIndex::parse(Offset(i64::MAX), &[]),
            Err(IndexError::BadBaseOffset { .. })
        ));
        // Error messages name the entry.
        let err = OffsetIndex::parse(Offset(0), &[0xffu8; 8]).expect_err("negative");
        assert_eq!(
            err.to_string(),
            "offset index entry 0: relative offset -1 is negative"
        );
    }

    #[test]
    fn time_entry_encoding_is_kafkas() {
        let mut idx = TimeIndex::new(Offset(10));
        let b = idx
            .append(0x0102_0304_0506_0708, Offset(10 + 0x0a0b))
            .expect("appended");
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x0a, 0x0b]);
        assert_eq!(idx.to_bytes(), b.to_vec());
    }

    #[test]
    fn time_append_is_kafkas_maybe_append() {
        let mut idx = TimeIndex::new(Offset(100));
        assert_eq!(idx.append(NO_TIMESTAMP, Offset(100)), None, "not above -1");
        assert!(idx.append(0, Offset(100)).is_some());
        assert!(idx.append(1000, Offset(105)).is_some());
        assert_eq!(idx.append(1000, Offset(106)), None, "equal timestamp");
        assert_eq!(idx.append(999, Offset(107)), None, "older timestamp");
        assert!(idx.append(1001, Offset(107)).is_some());
        assert!(
            idx.append(1002, Offset(107)).is_some(),
            "same offset is fine"
        );
        assert_eq!(idx.len(), 4);
        assert_eq!(idx.last_entry(), Some((1002, Offset(107))));
    }

    #[test]
    #[should_panic(expected = "below the last entry's offset")]
    fn time_append_asserts_offsets_do_not_go_back() {
        let mut idx = time_index(100, &[(1000, 105)]);
        idx.append(2000, Offset(104));
    }

    #[test]
    fn time_lookup_boundaries() {
        let idx = time_index(100, &[(1000, 110), (2000, 120), (3000, 130)]);
        assert_eq!(idx.lookup(i64::MIN), (NO_TIMESTAMP, Offset(100)));
        assert_eq!(idx.lookup(999), (NO_TIMESTAMP, Offset(100)), "before first");
        assert_eq!(idx.lookup(1000), (1000, Offset(110)), "exact first");
        assert_eq!(idx.lookup(1999), (1000, Offset(110)), "between");
        assert_eq!(idx.lookup(2000), (2000, Offset(120)), "exact middle");
        assert_eq!(idx.lookup(3000), (3000, Offset(130)), "exact last");
        assert_eq!(idx.lookup(i64::MAX), (3000, Offset(130)), "after last");
        assert_eq!(
            TimeIndex::new(Offset(5)).lookup(7),
            (NO_TIMESTAMP, Offset(5))
        );
    }

    #[test]
    fn time_truncate_to() {
        let full = time_index(100, &[(1000, 110), (2000, 120), (3000, 120), (4000, 130)]);
        let cases = [
            (131, 4),
            (130, 3),
            (121, 3),
            (120, 1),
            (111, 1),
            (110, 0),
            (0, 0),
        ];
        for (to, left) in cases {
            let mut idx = full.clone();
            idx.truncate_to(Offset(to));
            assert_eq!(idx.len(), left, "truncate_to({to})");
        }
        let mut idx = full.clone();
        idx.truncate_to(Offset(125));
        assert_eq!(idx.last_entry(), Some((3000, Offset(120))));
        idx.clear();
        assert!(idx.is_empty());
    }

    #[test]
    fn time_round_trip() {
        let idx = time_index(7, &[(0, 7), (1_700_000_000_000, 9), (1_700_000_000_001, 9)]);
        assert_eq!(
            idx.entries().collect::<Vec<_>>(),
            vec![
                (0, Offset(7)),
                (1_700_000_000_000, Offset(9)),
                (1_700_000_000_001, Offset(9))
            ]
        );
        let bytes = idx.to_bytes();
        assert_eq!(bytes.len(), 36);
        assert_eq!(TimeIndex::parse(Offset(7), &bytes), Ok(idx.clone()));
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0u8; 24]);
        assert_eq!(TimeIndex::parse(Offset(7), &padded), Ok(idx));
        assert!(TimeIndex::parse(Offset(7), &[0u8; 120])
            .expect("zeros")
            .is_empty());
    }

    #[test]
    fn time_parse_rejects_corruption() {
        assert_eq!(
            TimeIndex::parse(Offset(0), &[1u8; 13]),
            Err(IndexError::BadLength {
                kind: "time index",
                len: 13,
                entry_size: 12
            })
        );
        let mut bytes = encode_time_entry(5, 1).to_vec();
        bytes.extend_from_slice(&encode_time_entry(5, 2));
        assert_eq!(
            TimeIndex::parse(Offset(0), &bytes),
            Err(IndexError::NotIncreasing {
                kind: "time index",
                entry: 1,
                field: "timestamp",
                previous: 5,
                value: 5
            })
        );
        let mut bytes = encode_time_entry(5, 2).to_vec();
        bytes.extend_from_slice(&encode_time_entry(6, 1));
        assert!(matches!(
            TimeIndex::parse(Offset(0), &bytes),
            Err(IndexError::Decreasing {
                entry: 1,
                field: "relative offset",
                ..
            })
        ));
        let bytes = encode_time_entry(-5, 2);
        assert!(matches!(
            TimeIndex::parse(Offset(0), &bytes),
            Err(IndexError::NotIncreasing {
                entry: 0,
                field: "timestamp",
                previous: -1,
                ..
            })
        ));
        let bytes = encode_time_entry(5, 0x8000_0001);
        assert!(matches!(
            TimeIndex::parse(Offset(0), &bytes),
            Err(IndexError::Negative { entry: 0, .. })
        ));
    }
}
