//! Kafka's `LeaderEpochFileCache`: which leader epoch started at which offset, and its
//! `leader-epoch-checkpoint` text file.
//!
//! The cache answers OffsetsForLeaderEpoch (`end_offset_for`) and says which epoch an
//! offset was written in. Mutations return whether the cache changed; the caller then
//! writes [`LeaderEpochCache::to_checkpoint`] to the checkpoint file (temp file + rename,
//! as Kafka does). No I/O happens here.
//!
//! Checkpoint format (Kafka's `CheckpointFile` with the leader-epoch formatter):
//!
//! ```text
//! 0            <- version
//! 2            <- number of entries
//! 0 0          <- "<epoch> <start offset>", one line per entry
//! 3 120
//! ```
//!
//! Entries strictly increase in both epoch and start offset: `assign` keeps them so by
//! dropping conflicting entries, and `parse_checkpoint` / `from_entries` reject anything
//! else.

use std::fmt;

use crate::types::{LeaderEpoch, Offset};

/// One epoch and the offset of its first batch (Kafka's `EpochEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

impl EpochEntry {
    pub fn new(epoch: LeaderEpoch, start_offset: Offset) -> Self {
        Self {
            epoch,
            start_offset,
        }
    }
}

impl fmt::Display for EpochEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EpochEntry(epoch={}, startOffset={})",
            self.epoch, self.start_offset
        )
    }
}

/// Why a checkpoint file or a list of entries is not a valid leader epoch cache. `line`
/// counts lines of the checkpoint file from 1; it is `None` for entries that did not come
/// from a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EpochCheckpointError {
    #[error("leader-epoch-checkpoint line {line}: {field} {text:?} is not a number")]
    BadNumber {
        line: usize,
        field: &'static str,
        text: String,
    },
    #[error("leader-epoch-checkpoint has version {version}, only {expected} is supported")]
    UnsupportedVersion { version: i32, expected: i32 },
    #[error("leader-epoch-checkpoint line {line}: {text:?} is not \"<epoch> <start offset>\"")]
    MalformedLine { line: usize, text: String },
    #[error("leader-epoch-checkpoint says {expected} entries but holds {found}")]
    CountMismatch { expected: i64, found: usize },
    #[error("leader epoch entry {entry}{}: epoch {epoch} is negative", at_line(*.line))]
    NegativeEpoch {
        entry: usize,
        line: Option<usize>,
        epoch: LeaderEpoch,
    },
    #[error(
        "leader epoch entry {entry}{}: {current} does not follow {previous} (epochs and start \
         offsets must both increase)",
        at_line(*.line)
    )]
    NotMonotonic {
        entry: usize,
        line: Option<usize>,
        previous: EpochEntry,
        current: EpochEntry,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" (line {l})")).unwrap_or_default()
}

/// The checkpoint version Kafka writes and reads.
pub const CHECKPOINT_VERSION: i32 = 0;

/// Line of the first entry in a checkpoint file (after the version and count lines).
const FIRST_ENTRY_LINE: usize = 3;

/// Leader epoch → start offset history of one partition (Kafka's `LeaderEpochFileCache`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderEpochCache {
    /// Strictly increasing in both epoch and start offset.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding exactly `entries`, which must have non-negative epochs and
    /// strictly increasing epochs and start offsets.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<Self, EpochCheckpointError> {
        validate(&entries, None)?;
        Ok(Self { entries })
    }

    /// Kafka's `assign`: records that `epoch` started at `start_offset`.
    ///
    /// Ignored (returns false) when `epoch` is negative, or when it is the latest epoch
    /// and `start_offset` is not below that entry's start (an epoch's start offset is its
    /// first batch; later batches of the same epoch change nothing). Otherwise every
    /// entry from the end with an epoch `>= epoch` or a start offset `>= start_offset` is
    /// dropped, so the cache stays monotonic, and the new entry is added. Returns true
    /// when the cache changed and must be persisted.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 {
            return false;
        }
        let new = EpochEntry::new(epoch, start_offset);
        let update_needed = match self.entries.last() {
            Some(latest) => latest.epoch != epoch || start_offset < latest.start_offset,
            None => true,
        };
        if !update_needed {
            return false;
        }
        // Kafka's maybeTruncateNonMonotonicEntries: removed[0] is the latest entry.
        let mut removed = Vec::new();
        while let Some(last) = self.entries.last().copied() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                removed.push(last);
                self.entries.pop();
            } else {
                break;
            }
        }
        // Replacing the latest entry at the same start offset means no data was written in
        // it, which is expected; anything else is a real conflict worth a warning.
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|r| r.start_offset != start_offset)
        {
            tracing::warn!(
                new = %new,
                removed = ?removed,
                remaining = self.entries.len(),
                "new leader epoch entry caused truncation of conflicting entries"
            );
        }
        self.entries.push(new);
        tracing::debug!(entry = %new, entries = self.entries.len(), "appended leader epoch entry");
        true
    }

    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Kafka's `epochForOffset`: the epoch of the entry with the greatest start offset
    /// `<= offset`, or `None` when `offset` is below every start offset.
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        let after = self.entries.partition_point(|e| e.start_offset <= offset);
        after.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Kafka's `endOffsetFor`, answering OffsetsForLeaderEpoch: the largest epoch `<=
    /// requested` this log knows and the end offset of `requested` (the start offset of the
    /// next higher epoch, or `log_end_offset` for the latest epoch).
    /// `(UNDEFINED, UNDEFINED)` when `requested` is undefined, the cache is empty, or no
    /// epoch above `requested` exists while `requested` is not the latest. When
    /// `requested` is below every epoch, the answer is `requested` with the first entry's
    /// start offset.
    pub fn end_offset_for(
        &self,
        requested: LeaderEpoch,
        log_end_offset: Offset,
    ) -> (LeaderEpoch, Offset) {
        const UNDEFINED: (LeaderEpoch, Offset) = (LeaderEpoch::UNDEFINED, Offset::UNDEFINED);
        if requested == LeaderEpoch::UNDEFINED {
            return UNDEFINED;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher_at = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(higher) = self.entries.get(higher_at) else {
            return UNDEFINED;
        };
        match higher_at.checked_sub(1) {
            None => (requested, higher.start_offset),
            Some(floor) => (self.entries[floor].epoch, higher.start_offset),
        }
    }

    /// Kafka's `truncateFromEnd`: removes the entries with start offset `>= end_offset`
    /// after the log was truncated to `end_offset`. A negative `end_offset` (undefined)
    /// changes nothing. Returns true when the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        if end_offset.0 < 0 {
            return false;
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        if keep == self.entries.len() {
            return false;
        }
        let removed = self.entries.split_off(keep);
        tracing::debug!(
            removed = ?removed,
            end_offset = end_offset.0,
            entries = self.entries.len(),
            "cleared leader epoch entries after truncating the log end"
        );
        true
    }

    /// Kafka's `truncateFromStart`: after the log start moved to `start_offset`, removes
    /// the entries that start at or below it, except that the last of them is kept and
    /// moved to start at `start_offset` (its epoch still covers the new log start). A
    /// negative `start_offset` or one not above the earliest entry's start changes
    /// nothing. Returns true when the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        if start_offset.0 < 0 {
            return false;
        }
        match self.entries.first() {
            Some(first) if first.start_offset < start_offset => {}
            _ => return false,
        }
        let covered = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        // covered >= 1 because the first entry starts below start_offset.
        let kept_epoch = self.entries[covered - 1].epoch;
        self.entries.drain(..covered - 1);
        self.entries[0] = EpochEntry::new(kept_epoch, start_offset);
        tracing::debug!(
            start_offset = start_offset.0,
            entries = self.entries.len(),
            "cleared leader epoch entries below the log start offset"
        );
        true
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `leader-epoch-checkpoint` file contents, exactly as Kafka writes them.
    pub fn to_checkpoint(&self) -> String {
        let mut out = format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            out.push_str(&format!("{} {}\n", e.epoch.0, e.start_offset.0));
        }
        out
    }

    /// Reads a `leader-epoch-checkpoint` file the way Kafka's `CheckpointReadBuffer`
    /// does: an empty file, or one that ends after the version line, is an empty cache;
    /// otherwise the version must be 0, the count line a number, every following line
    /// `<epoch><whitespace><start offset>` and their number equal to the count. A final
    /// newline is optional (`\r\n` line ends are accepted too). Entries must then be
    /// monotonic, as [`from_entries`](Self::from_entries) requires.
    pub fn parse_checkpoint(text: &str) -> Result<Self, EpochCheckpointError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let Some((line, version)) = lines.next() else {
            return Ok(Self::new());
        };
        let version: i32 = parse_number(line, "version", version)?;
        if version != CHECKPOINT_VERSION {
            return Err(EpochCheckpointError::UnsupportedVersion {
                version,
                expected: CHECKPOINT_VERSION,
            });
        }
        let Some((line, count)) = lines.next() else {
            return Ok(Self::new());
        };
        // Java reads the count as an int; a negative one can only mismatch.
        let expected: i32 = parse_number(line, "entry count", count)?;
        let mut entries = Vec::new();
        for (line, text) in lines {
            entries.push(parse_entry(line, text)?);
        }
        if i64::from(expected) != entries.len() as i64 {
            return Err(EpochCheckpointError::CountMismatch {
                expected: i64::from(expected),
                found: entries.len(),
            });
        }
        validate(&entries, Some(FIRST_ENTRY_LINE))?;
        Ok(Self { entries })
    }
}

fn parse_number<T: std::str::FromStr>(
    line: usize,
    field: &'static str,
    text: &str,
) -> Result<T, EpochCheckpointError> {
    text.parse().map_err(|_| EpochCheckpointError::BadNumber {
        line,
        field,
        text: text.to_string(),
    })
}

/// Kafka's formatter splits the line on `\s+` and wants exactly two fields; like Java's
/// `split`, leading whitespace makes an empty first field and trailing whitespace is
/// dropped.
fn parse_entry(line: usize, text: &str) -> Result<EpochEntry, EpochCheckpointError> {
    let malformed = || EpochCheckpointError::MalformedLine {
        line,
        text: text.to_string(),
    };
    if text.starts_with(char::is_whitespace) {
        return Err(malformed());
    }
    let mut fields = text.split_whitespace();
    let (Some(epoch), Some(start), None) = (fields.next(), fields.next(), fields.next()) else {
        return Err(malformed());
    };
    Ok(EpochEntry::new(
        LeaderEpoch(parse_number(line, "epoch", epoch)?),
        Offset(parse_number(line, "start offset", start)?),
    ))
}

fn validate(entries: &[EpochEntry], first_line: Option<usize>) -> Result<(), EpochCheckpointError> {
    let line_of = |i: usize| first_line.map(|l| l + i);
    for (i, e) in entries.iter().enumerate() {
        if e.epoch.0 < 0 {
            return Err(EpochCheckpointError::NegativeEpoch {
                entry: i,
                line: line_of(i),
                epoch: e.epoch,
            });
        }
        if let Some(prev) = i.checked_sub(1).map(|p| entries[p]) {
            if e.epoch <= prev.epoch || e.start_offset <= prev.start_offset {
                return Err(EpochCheckpointError::NotMonotonic {
                    entry: i,
                    line: line_of(i),
                    previous: prev,
                    current: *e,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start: i64) -> EpochEntry {
        EpochEntry::new(LeaderEpoch(epoch), Offset(start))
    }

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::new();
        for &(epoch, start) in entries {
            assert!(c.assign(LeaderEpoch(epoch), Offset(start)));
        }
        c
    }

    fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect()
    }

    #[test]
    fn end_offset_for_matches_kafka() {
        let c = cache(&[(0, 0), (1, 10), (3, 20)]);
        let leo = Offset(30);
        let table = [
            (3, (3, 30)),
            (2, (1, 20)),
            (1, (1, 20)),
            (0, (0, 10)),
            (4, (-1, -1)),
            (-1, (-1, -1)),
        ];
        for (req, (epoch, offset)) in table {
            assert_eq!(
                c.end_offset_for(LeaderEpoch(req), leo),
                (LeaderEpoch(epoch), Offset(offset)),
                "requested epoch {req}"
            );
        }
        let c = cache(&[(2, 10)]);
        assert_eq!(
            c.end_offset_for(LeaderEpoch(1), leo),
            (LeaderEpoch(1), Offset(10))
        );
        assert_eq!(c.end_offset_for(LeaderEpoch(2), leo), (LeaderEpoch(2), leo));
        assert_eq!(
            c.end_offset_for(LeaderEpoch(3), leo),
            (LeaderEpoch::UNDEFINED, Offset::UNDEFINED)
        );
        let empty = LeaderEpochCache::new();
        for req in [-1, 0, 5] {
            assert_eq!(
                empty.end_offset_for(LeaderEpoch(req), leo),
                (LeaderEpoch::UNDEFINED, Offset::UNDEFINED)
            );
        }
        // LeaderEpochFileCacheTest.shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested
        let c = cache(&[(0, 10), (2, 13), (4, 17)]);
        assert_eq!(
            c.end_offset_for(LeaderEpoch(0), leo),
            (LeaderEpoch(0), Offset(13))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(1), leo),
            (LeaderEpoch(0), Offset(13))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(2), leo),
            (LeaderEpoch(2), Offset(17))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(3), leo),
            (LeaderEpoch(2), Offset(17))
        );
    }

    /// LeaderEpochFileCacheTest.shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch
    #[test]
    fn later_batches_of_an_epoch_do_not_move_its_start() {
        let mut c = LeaderEpochCache::new();
        assert!(c.assign(LeaderEpoch(1), Offset(5)));
        assert!(!c.assign(LeaderEpoch(1), Offset(6)));
        assert!(!c.assign(LeaderEpoch(1), Offset(7)));
        assert!(c.assign(LeaderEpoch(2), Offset(8)));
        assert!(!c.assign(LeaderEpoch(2), Offset(9)));
        assert_eq!(pairs(&c), vec![(1, 5), (2, 8)]);
        assert_eq!(
            c.end_offset_for(LeaderEpoch(1), Offset(11)),
            (LeaderEpoch(1), Offset(8))
        );
    }

    #[test]
    fn assign_ignores_negative_epochs() {
        let mut c = cache(&[(1, 5)]);
        assert!(!c.assign(LeaderEpoch(-1), Offset(10)));
        assert_eq!(pairs(&c), vec![(1, 5)]);
    }

    /// LeaderEpochFileCacheTest.shouldTruncateIfMatchingEpochButEarlierStartingOffset
    #[test]
    fn same_epoch_earlier_start_replaces_the_latest_entry() {
        let mut c = cache(&[(2, 6), (3, 8), (4, 11)]);
        assert!(c.assign(LeaderEpoch(4), Offset(9)));
        assert_eq!(pairs(&c), vec![(2, 6), (3, 8), (4, 9)]);
        // Earlier than the previous epoch's start too: that entry goes as well.
        assert!(c.assign(LeaderEpoch(4), Offset(7)));
        assert_eq!(pairs(&c), vec![(2, 6), (4, 7)]);
    }

    /// LeaderEpochFileCacheTest.shouldEnforceMonotonicallyIncreasingEpochs and
    /// shouldEnforceOffsetsIncreaseMonotonically.
    #[test]
    fn assign_truncates_non_monotonic_entries() {
        let mut c = cache(&[(1, 5), (2, 6)]);
        assert!(c.assign(LeaderEpoch(1), Offset(7)));
        assert_eq!(pairs(&c), vec![(1, 7)]);
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(1)));
        assert_eq!(
            c.end_offset_for(LeaderEpoch(1), Offset(8)),
            (LeaderEpoch(1), Offset(8))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(2), Offset(8)),
            (LeaderEpoch::UNDEFINED, Offset::UNDEFINED)
        );

        let mut c = cache(&[(2, 6)]);
        assert!(c.assign(LeaderEpoch(3), Offset(5)));
        assert_eq!(pairs(&c), vec![(3, 5)]);

        let mut c = cache(&[(0, 0), (1, 10), (3, 20)]);
        assert!(c.assign(LeaderEpoch(2), Offset(15)));
        assert_eq!(pairs(&c), vec![(0, 0), (1, 10), (2, 15)]);
    }

    #[test]
    fn epoch_for_offset_boundaries() {
        let c = cache(&[(1, 10), (3, 20), (4, 30)]);
        assert_eq!(c.epoch_for_offset(Offset(0)), None, "before first");
        assert_eq!(c.epoch_for_offset(Offset(9)), None);
        assert_eq!(
            c.epoch_for_offset(Offset(10)),
            Some(LeaderEpoch(1)),
            "exact"
        );
        assert_eq!(
            c.epoch_for_offset(Offset(19)),
            Some(LeaderEpoch(1)),
            "between"
        );
        assert_eq!(c.epoch_for_offset(Offset(20)), Some(LeaderEpoch(3)));
        assert_eq!(
            c.epoch_for_offset(Offset(30)),
            Some(LeaderEpoch(4)),
            "exact last"
        );
        assert_eq!(
            c.epoch_for_offset(Offset(1000)),
            Some(LeaderEpoch(4)),
            "after last"
        );
        assert_eq!(LeaderEpochCache::new().epoch_for_offset(Offset(5)), None);
        assert_eq!(c.earliest_entry(), Some(e(1, 10)));
        assert_eq!(c.latest_entry(), Some(e(4, 30)));
    }

    #[test]
    fn truncate_from_end() {
        let full = cache(&[(2, 6), (3, 8), (4, 11)]);
        let cases: [(i64, &[(i32, i64)]); 7] = [
            (12, &[(2, 6), (3, 8), (4, 11)]),
            (11, &[(2, 6), (3, 8)]),
            (9, &[(2, 6), (3, 8)]),
            (8, &[(2, 6)]),
            (6, &[]),
            (0, &[]),
            (-1, &[(2, 6), (3, 8), (4, 11)]),
        ];
        for (end, want) in cases {
            let mut c = full.clone();
            let changed = c.truncate_from_end(Offset(end));
            assert_eq!(pairs(&c), want.to_vec(), "truncate_from_end({end})");
            assert_eq!(changed, want.len() != 3, "truncate_from_end({end})");
        }
    }

    #[test]
    fn truncate_from_start() {
        let full = cache(&[(2, 6), (3, 8), (4, 11)]);
        let cases: [(i64, &[(i32, i64)]); 8] = [
            (-1, &[(2, 6), (3, 8), (4, 11)]),
            (1, &[(2, 6), (3, 8), (4, 11)]),
            (6, &[(2, 6), (3, 8), (4, 11)]),
            (7, &[(2, 7), (3, 8), (4, 11)]),
            (8, &[(3, 8), (4, 11)]),
            (9, &[(3, 9), (4, 11)]),
            (11, &[(4, 11)]),
            (12, &[(4, 12)]),
        ];
        for (start, want) in cases {
            let mut c = full.clone();
            let changed = c.truncate_from_start(Offset(start));
            assert_eq!(pairs(&c), want.to_vec(), "truncate_from_start({start})");
            assert_eq!(changed, start > 6, "truncate_from_start({start})");
        }
        assert!(!LeaderEpochCache::new().truncate_from_start(Offset(5)));
    }

    #[test]
    fn checkpoint_round_trip() {
        let c = cache(&[(0, 0), (3, 120), (7, 1 << 40)]);
        let text = c.to_checkpoint();
        assert_eq!(text, "0\n3\n0 0\n3 120\n7 1099511627776\n");
        assert_eq!(LeaderEpochCache::parse_checkpoint(&text), Ok(c.clone()));
        assert_eq!(
            LeaderEpochCache::parse_checkpoint(text.trim_end()),
            Ok(c.clone()),
            "no final newline"
        );
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(LeaderEpochCache::parse_checkpoint(&crlf), Ok(c.clone()));
        let tabs = "0\n3\n0\t0\n3  120 \n7 1099511627776\n";
        assert_eq!(LeaderEpochCache::parse_checkpoint(tabs), Ok(c));
        let empty = LeaderEpochCache::new();
        assert_eq!(empty.to_checkpoint(), "0\n0\n");
        assert_eq!(
            LeaderEpochCache::parse_checkpoint("0\n0\n"),
            Ok(empty.clone())
        );
        // Kafka's reader: an empty file, or a version line alone, is an empty cache.
        assert_eq!(LeaderEpochCache::parse_checkpoint(""), Ok(empty.clone()));
        assert_eq!(LeaderEpochCache::parse_checkpoint("0\n"), Ok(empty));
    }

    #[test]
    fn checkpoint_rejects_corruption() {
        use EpochCheckpointError as E;
        let parse = LeaderEpochCache::parse_checkpoint;
        assert_eq!(
            parse("1\n0\n"),
            Err(E::UnsupportedVersion {
                version: 1,
                expected: 0
            })
        );
        assert_eq!(
            parse("zero\n0\n"),
            Err(E::BadNumber {
                line: 1,
                field: "version",
                text: "zero".into()
            })
        );
        assert!(matches!(parse("0\nx\n"), Err(E::BadNumber { line: 2, .. })));
        assert_eq!(
            parse("0\n2\n0 0\n"),
            Err(E::CountMismatch {
                expected: 2,
                found: 1
            })
        );
        assert!(matches!(
            parse("0\n1\n0 0\n1 5\n"),
            Err(E::CountMismatch {
                expected: 1,
                found: 2
            })
        ));
        assert!(matches!(
            parse("0\n-1\n"),
            Err(E::CountMismatch {
                expected: -1,
                found: 0
            })
        ));
        assert_eq!(
            parse("0\n1\n0 0 0\n"),
            Err(E::MalformedLine {
                line: 3,
                text: "0 0 0".into()
            })
        );
        assert!(matches!(
            parse("0\n1\n00\n"),
            Err(E::MalformedLine { line: 3, .. })
        ));
        assert!(matches!(
            parse("0\n1\n 0 0\n"),
            Err(E::MalformedLine { line: 3, .. })
        ));
        assert!(matches!(
            parse("0\n1\n0 0\n\n"),
            Err(E::MalformedLine { line: 4, .. })
        ));
        assert_eq!(
            parse("0\n2\n0 0\n1 abc\n"),
            Err(E::BadNumber {
                line: 4,
                field: "start offset",
                text: "abc".into()
            })
        );
        assert!(matches!(
            parse("0\n1\n99999999999 0\n"),
            Err(E::BadNumber {
                line: 3,
                field: "epoch",
                ..
            })
        ));
        assert_eq!(
            parse("0\n3\n0 0\n2 10\n2 20\n"),
            Err(E::NotMonotonic {
                entry: 2,
                line: Some(5),
                previous: e(2, 10),
                current: e(2, 20)
            })
        );
        assert!(matches!(
            parse("0\n2\n0 10\n1 10\n"),
            Err(E::NotMonotonic {
                entry: 1,
                line: Some(4),
                ..
            })
        ));
        assert!(matches!(
            parse("0\n1\n-1 0\n"),
            Err(E::NegativeEpoch {
                entry: 0,
                line: Some(3),
                ..
            })
        ));
        let err = parse("0\n2\n3 10\n1 20\n").expect_err("not monotonic");
        assert_eq!(
            err.to_string(),
            "leader epoch entry 1 (line 4): EpochEntry(epoch=1, startOffset=20) does not \
             follow EpochEntry(epoch=3, startOffset=10) (epochs and start offsets must both \
             increase)"
        );
    }

    #[test]
    fn from_entries_validates() {
        let c = LeaderEpochCache::from_entries(vec![e(0, 0), e(2, 5)]).expect("valid");
        assert_eq!(c.len(), 2);
        assert_eq!(
            LeaderEpochCache::from_entries(vec![e(2, 5), e(1, 6)]),
            Err(EpochCheckpointError::NotMonotonic {
                entry: 1,
                line: None,
                previous: e(2, 5),
                current: e(1, 6)
            })
        );
        let err = LeaderEpochCache::from_entries(vec![e(-2, 0)]).expect_err("negative");
        assert_eq!(
            err.to_string(),
            "leader epoch entry 0: epoch -2 is negative"
        );
        let mut c = c;
        c.clear();
        assert!(c.is_empty());
        assert_eq!(c.latest_epoch(), None);
    }
}
