//! Kafka's transaction index (`<base offset>.txnindex`): the aborted transactions whose
//! abort marker lies in the segment, so a `read_committed` fetch can tell the consumer
//! which producer's records to drop.
//!
//! In-memory state and Kafka's exact entry format only; the caller does the file I/O.
//! The file is append-only and never preallocated, so there are no zero entries to trim.

use crate::log::index::{check_length, IndexError};
use crate::types::{Offset, ProducerId};

const TXN_INDEX: &str = "transaction index";

/// One aborted transaction (Kafka's `AbortedTxn`).
///
/// `first_offset` is the offset of the transaction's first batch, `last_offset` that of
/// its abort marker, and `last_stable_offset` the partition's LSO once the abort
/// completed: a fetch whose upper bound is at or below it needs no older segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

impl AbortedTxn {
    /// Bytes per entry on disk: `i16` version, `i64` producer id, `i64` first offset,
    /// `i64` last offset, `i64` last stable offset, all big-endian.
    pub const ENTRY_SIZE: usize = 34;
    /// The only entry version Kafka has written.
    pub const CURRENT_VERSION: i16 = 0;

    /// The entry in its on-disk format.
    pub fn to_bytes(&self) -> [u8; Self::ENTRY_SIZE] {
        let mut b = [0u8; Self::ENTRY_SIZE];
        b[0..2].copy_from_slice(&Self::CURRENT_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.0.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.0.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.0.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.0.to_be_bytes());
        b
    }
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// What [`TransactionIndex::collect_aborted_txns`] found (Kafka's `TxnIndexSearchResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnIndexSearchResult {
    pub aborted: Vec<AbortedTxn>,
    /// True when an entry's last stable offset reached the upper bound: no later segment
    /// can hold an aborted transaction that overlaps the fetch, so the search stops here.
    pub is_complete: bool,
}

/// The aborted transactions of one segment, in the order their markers were written
/// (strictly increasing `last_offset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionIndex {
    base_offset: Offset,
    entries: Vec<AbortedTxn>,
}

impl TransactionIndex {
    /// Bytes per entry on disk.
    pub const ENTRY_SIZE: usize = AbortedTxn::ENTRY_SIZE;

    pub fn new(base_offset: Offset) -> Self {
        Self {
            base_offset,
            entries: Vec::new(),
        }
    }

    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Records an aborted transaction and returns the 34 bytes to append to the file.
    ///
    /// Panics when `last_offset` is not above the previous entry's (Kafka's
    /// `IllegalArgumentException`), is below the segment base offset, or is below
    /// `first_offset`: the producer state manager derives all three from the log, so any
    /// of them is a bug.
    pub fn append(&mut self, txn: AbortedTxn) -> [u8; AbortedTxn::ENTRY_SIZE] {
        if let Some(last) = self.entries.last() {
            assert!(
                txn.last_offset > last.last_offset,
                "aborted transaction {txn:?} does not end after the previous one {last:?}"
            );
        }
        assert!(
            txn.last_offset >= self.base_offset,
            "aborted transaction {txn:?} ends below the segment base offset {}",
            self.base_offset
        );
        assert!(
            txn.first_offset <= txn.last_offset,
            "aborted transaction {txn:?} starts after it ends"
        );
        self.entries.push(txn);
        txn.to_bytes()
    }

    /// Kafka's `collectAbortedTxns`: the entries with `last_offset >= fetch_offset` and
    /// `first_offset < upper_bound_offset`, in index order, stopping after the first
    /// entry whose `last_stable_offset >= upper_bound_offset` (then `is_complete`).
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: Offset,
        upper_bound_offset: Offset,
    ) -> TxnIndexSearchResult {
        let mut aborted = Vec::new();
        for txn in &self.entries {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                aborted.push(*txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                return TxnIndexSearchResult {
                    aborted,
                    is_complete: true,
                };
            }
        }
        TxnIndexSearchResult {
            aborted,
            is_complete: false,
        }
    }

    /// [`collect_aborted_txns`](Self::collect_aborted_txns) without the completeness flag.
    pub fn collect_aborted(
        &self,
        fetch_offset: Offset,
        upper_bound_offset: Offset,
    ) -> Vec<AbortedTxn> {
        self.collect_aborted_txns(fetch_offset, upper_bound_offset)
            .aborted
    }

    /// Drops every entry with `last_offset >= offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&mut self, offset: Offset) {
        let keep = self.entries.partition_point(|t| t.last_offset < offset);
        self.entries.truncate(keep);
    }

    /// Drops every entry (Kafka's `reset`).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
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

    /// The whole index in its on-disk format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_in_bytes());
        for txn in &self.entries {
            out.extend_from_slice(&txn.to_bytes());
        }
        out
    }

    /// Reads a `.txnindex` file's bytes: the length must be a multiple of 34, every
    /// entry version 0, `first_offset <= last_offset`, `last_offset` at or above the base
    /// offset (Kafka's `sanityCheck`) and strictly increasing.
    pub fn parse(base_offset: Offset, bytes: &[u8]) -> Result<TransactionIndex, IndexError> {
        check_length(TXN_INDEX, bytes.len(), Self::ENTRY_SIZE)?;
        let mut entries: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / Self::ENTRY_SIZE);
        for (i, c) in bytes.chunks_exact(Self::ENTRY_SIZE).enumerate() {
            let version = i16::from_be_bytes([c[0], c[1]]);
            if version != AbortedTxn::CURRENT_VERSION {
                return Err(IndexError::UnsupportedVersion {
                    kind: TXN_INDEX,
                    entry: i,
                    version,
                });
            }
            let txn = AbortedTxn {
                producer_id: ProducerId(be_i64(c, 2)),
                first_offset: Offset(be_i64(c, 10)),
                last_offset: Offset(be_i64(c, 18)),
                last_stable_offset: Offset(be_i64(c, 26)),
            };
            if txn.last_offset < base_offset {
                return Err(IndexError::BelowBaseOffset {
                    kind: TXN_INDEX,
                    entry: i,
                    last_offset: txn.last_offset,
                    base_offset,
                });
            }
            if txn.first_offset > txn.last_offset {
                return Err(IndexError::FirstAfterLast {
                    kind: TXN_INDEX,
                    entry: i,
                    first_offset: txn.first_offset,
                    last_offset: txn.last_offset,
                });
            }
            if let Some(last) = entries.last() {
                if txn.last_offset <= last.last_offset {
                    return Err(IndexError::NotIncreasing {
                        kind: TXN_INDEX,
                        entry: i,
                        field: "last offset",
                        previous: last.last_offset.0,
                        value: txn.last_offset.0,
                    });
                }
            }
            entries.push(txn);
        }
        Ok(TransactionIndex {
            base_offset,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        }
    }

    fn index(base: i64, txns: &[AbortedTxn]) -> TransactionIndex {
        let mut idx = TransactionIndex::new(Offset(base));
        for t in txns {
            idx.append(*t);
        }
        idx
    }

    #[test]
    fn entry_encoding_is_kafkas() {
        let t = txn(0x0102, 0x0304, 0x0506, 0x0708);
        let b = t.to_bytes();
        let mut want = vec![0u8, 0];
        for v in [0x0102i64, 0x0304, 0x0506, 0x0708] {
            want.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(b.to_vec(), want);
        let mut idx = TransactionIndex::new(Offset(0));
        assert_eq!(idx.append(t), b);
    }

    #[test]
    fn round_trip() {
        let idx = index(
            100,
            &[
                txn(1, 90, 100, 95),
                txn(-7, 101, 150, 151),
                txn(i64::MAX, 120, 200, 110),
            ],
        );
        let bytes = idx.to_bytes();
        assert_eq!(bytes.len(), 3 * 34);
        let back = TransactionIndex::parse(Offset(100), &bytes).expect("parse");
        assert_eq!(back, idx);
        assert_eq!(back.len(), 3);
        assert_eq!(back.entries()[1].producer_id, ProducerId(-7));
        assert!(TransactionIndex::parse(Offset(0), &[])
            .expect("empty")
            .is_empty());
    }

    #[test]
    #[should_panic(expected = "does not end after")]
    fn append_asserts_last_offsets_increase() {
        index(0, &[txn(1, 0, 10, 11), txn(2, 5, 10, 11)]);
    }

    #[test]
    #[should_panic(expected = "below the segment base offset")]
    fn append_asserts_last_offset_in_segment() {
        index(100, &[txn(1, 0, 99, 100)]);
    }

    /// Kafka's TransactionIndexTest.testCollectAbortedTransactions, plus the stop rule.
    #[test]
    fn collect_aborted_txns() {
        let txns = [
            txn(0, 0, 10, 11),
            txn(1, 5, 15, 13),
            txn(2, 18, 35, 25),
            txn(3, 32, 50, 40),
        ];
        let idx = index(0, &txns);
        let r = idx.collect_aborted_txns(Offset(0), Offset(32));
        assert_eq!(r.aborted, txns[..3].to_vec());
        assert!(r.is_complete, "txn 3's LSO 40 >= 32");
        let r = idx.collect_aborted_txns(Offset(0), Offset(60));
        assert_eq!(r.aborted, txns.to_vec());
        assert!(!r.is_complete);
        // Before the first entry, between, exact boundaries, after the last.
        assert_eq!(idx.collect_aborted(Offset(0), Offset(0)), vec![]);
        assert_eq!(
            idx.collect_aborted(Offset(0), Offset(1)),
            txns[..1].to_vec()
        );
        assert_eq!(
            idx.collect_aborted(Offset(10), Offset(12)),
            txns[..2].to_vec()
        );
        assert_eq!(
            idx.collect_aborted(Offset(11), Offset(12)),
            txns[1..2].to_vec()
        );
        assert_eq!(idx.collect_aborted(Offset(16), Offset(18)), vec![]);
        assert_eq!(
            idx.collect_aborted(Offset(16), Offset(19)),
            txns[2..3].to_vec()
        );
        assert_eq!(idx.collect_aborted(Offset(51), Offset(100)), vec![]);
        // The search stops at txn 0 (LSO 11 >= 11) even though txn 1 overlaps.
        let r = idx.collect_aborted_txns(Offset(0), Offset(11));
        assert_eq!(r.aborted, txns[..1].to_vec());
        assert!(r.is_complete);
    }

    #[test]
    fn truncate_to() {
        let txns = [txn(0, 0, 10, 11), txn(1, 5, 15, 13), txn(2, 18, 35, 25)];
        let full = index(0, &txns);
        for (to, left) in [(36, 3), (35, 2), (16, 2), (15, 1), (11, 1), (10, 0), (0, 0)] {
            let mut idx = full.clone();
            idx.truncate_to(Offset(to));
            assert_eq!(idx.entries(), &txns[..left], "truncate_to({to})");
        }
        let mut idx = full.clone();
        idx.truncate_to(Offset(15));
        idx.append(txn(9, 12, 14, 15));
        idx.clear();
        assert!(idx.is_empty());
    }

    #[test]
    fn parse_rejects_corruption() {
        let good = index(0, &[txn(1, 0, 10, 11), txn(2, 12, 20, 21)]).to_bytes();
        assert_eq!(
            TransactionIndex::parse(Offset(0), &good[..40]),
            Err(IndexError::BadLength {
                kind: "transaction index",
                len: 40,
                entry_size: 34
            })
        );
        let mut bad = good.clone();
        bad[34..36].copy_from_slice(&1i16.to_be_bytes());
        assert_eq!(
            TransactionIndex::parse(Offset(0), &bad),
            Err(IndexError::UnsupportedVersion {
                kind: "transaction index",
                entry: 1,
                version: 1
            })
        );
        let mut bad = good[34..].to_vec();
        bad.extend_from_slice(&good[..34]);
        assert_eq!(
            TransactionIndex::parse(Offset(0), &bad),
            Err(IndexError::NotIncreasing {
                kind: "transaction index",
                entry: 1,
                field: "last offset",
                previous: 20,
                value: 10
            })
        );
        assert!(matches!(
            TransactionIndex::parse(Offset(15), &good),
            Err(IndexError::BelowBaseOffset { entry: 0, .. })
        ));
        let bad = txn(1, 11, 10, 12).to_bytes();
        assert!(matches!(
            TransactionIndex::parse(Offset(0), &bad),
            Err(IndexError::FirstAfterLast { entry: 0, .. })
        ));
    }
}
