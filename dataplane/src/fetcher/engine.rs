//! The fetch engine's decisions, in Kafka's `AbstractFetcherThread` terms, as pure
//! functions of what the leader answered and what the local log holds: where to
//! truncate when histories diverge, what to do on OFFSET_OUT_OF_RANGE, and what a
//! partition error means. The mirror fetcher (`mirror.rs`) does the I/O and applies
//! them; the replica fetcher of the cluster issue will apply the same ones.

use kafka_protocol::ResponseError;

/// Where a partition's log must be cut after the leader answered for an epoch
/// (OffsetsForLeaderEpoch, or a Fetch's DivergingEpoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    /// Cut the log here (None: keep it).
    pub target: Option<i64>,
    /// False: the local log did not know the leader's epoch; the cut is an intermediate
    /// one and the leader must be asked again with the new latest epoch.
    pub complete: bool,
}

impl Truncation {
    fn to(offset: i64, local_end: i64, complete: bool) -> Truncation {
        Truncation {
            target: (offset < local_end).then_some(offset.max(0)),
            complete,
        }
    }

    const KEEP: Truncation = Truncation {
        target: None,
        complete: true,
    };
}

/// Kafka's `getOffsetTruncationState`: the leader says its history for `leader_epoch`
/// ends at `leader_end`; `local_for_epoch` is the local log's own answer for that
/// epoch (its largest epoch not above it, and where that epoch ends).
pub fn truncation_target(
    leader_epoch: i32,
    leader_end: i64,
    local_for_epoch: (i32, i64),
    local_end: i64,
) -> Truncation {
    let (local_epoch, local_epoch_end) = local_for_epoch;
    if leader_epoch < 0 || leader_end < 0 {
        // The leader does not know the epoch: see `on_undefined_epoch`.
        return Truncation::KEEP;
    }
    if local_epoch < 0 || local_epoch_end < 0 {
        // No local epoch at or below the leader's: everything past the leader's end
        // is the leader's to give.
        return Truncation::to(leader_end.min(local_end), local_end, true);
    }
    if local_epoch != leader_epoch {
        // The local log never had the leader's epoch: cut where the local epoch below
        // it ends and ask again with that one.
        return Truncation::to(local_epoch_end.min(local_end), local_end, false);
    }
    Truncation::to(
        local_epoch_end.min(leader_end).min(local_end),
        local_end,
        true,
    )
}

/// The leader answered UNDEFINED for the local latest epoch: it has no such epoch. A
/// local epoch above the leader's current one cannot have come from this leader (a
/// leader's batches never carry a higher epoch than its own), so the log is cut where
/// the local epochs above `leader_current_epoch` start (`local_for_current` is the local
/// answer for that epoch) and asked again. Otherwise the epoch went out of the leader's
/// retention, and the log is kept (audit B-10).
pub fn on_undefined_epoch(
    local_latest_epoch: i32,
    leader_current_epoch: i32,
    local_for_current: (i32, i64),
    local_end: i64,
) -> Truncation {
    if leader_current_epoch < 0 || local_latest_epoch <= leader_current_epoch {
        return Truncation::KEEP;
    }
    let (epoch, end) = local_for_current;
    if epoch < 0 || end < 0 {
        // Every local epoch is above the leader's: nothing local is the leader's.
        return Truncation::to(0, local_end, false);
    }
    Truncation::to(end.min(local_end), local_end, false)
}

/// What to do on OFFSET_OUT_OF_RANGE, given the leader's earliest and latest offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutOfRange {
    /// The leader's retention passed the local end: start again at its log start.
    RestartAt(i64),
    /// The local log is ahead of the leader: find out by epochs where they diverge
    /// (never a blind cut to the leader's end).
    CheckEpochs,
    /// Ahead of a leader that cannot answer epochs (or whose answer left the log
    /// ahead): cut to its end.
    TruncateTo(i64),
    /// Ahead, and the leader has no topic ids: the topic may have been re-created.
    Refuse,
    /// In range after all (the leader moved meanwhile): fetch again.
    Retry,
}

/// `epochs_checked_at` is the local end at which an epoch check already ran for an
/// out-of-range answer.
pub fn on_out_of_range(
    local_end: i64,
    leader_earliest: i64,
    leader_latest: i64,
    leader_has_topic_ids: bool,
    leader_answers_epochs: bool,
    epochs_checked_at: Option<i64>,
) -> OutOfRange {
    if local_end < leader_earliest {
        OutOfRange::RestartAt(leader_earliest)
    } else if local_end > leader_latest {
        if !leader_has_topic_ids {
            OutOfRange::Refuse
        } else if leader_answers_epochs && epochs_checked_at != Some(local_end) {
            OutOfRange::CheckEpochs
        } else {
            OutOfRange::TruncateTo(leader_latest)
        }
    } else {
        OutOfRange::Retry
    }
}

/// A partition-level error of a Fetch or OffsetsForLeaderEpoch answer, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionError {
    /// The broker asked is no longer the leader, or the topic/partition moved away.
    NotLeader(i16),
    /// Our view of the leader epoch is older (FENCED) or newer (UNKNOWN) than the
    /// leader's.
    StaleEpoch(i16),
    OffsetOutOfRange,
    Other(i16),
}

impl PartitionError {
    pub fn from_code(code: i16) -> Option<PartitionError> {
        let e = |r: ResponseError| r.code();
        Some(match code {
            0 => return None,
            c if c == e(ResponseError::OffsetOutOfRange) => PartitionError::OffsetOutOfRange,
            c if c == e(ResponseError::FencedLeaderEpoch)
                || c == e(ResponseError::UnknownLeaderEpoch) =>
            {
                PartitionError::StaleEpoch(c)
            }
            c if c == e(ResponseError::NotLeaderOrFollower)
                || c == e(ResponseError::UnknownTopicOrPartition)
                || c == e(ResponseError::LeaderNotAvailable)
                || c == e(ResponseError::UnknownTopicId)
                || c == e(ResponseError::InconsistentTopicId) =>
            {
                PartitionError::NotLeader(c)
            }
            c => PartitionError::Other(c),
        })
    }

    /// The source metadata must be read again before the next try.
    pub fn needs_metadata_refresh(self) -> bool {
        matches!(
            self,
            PartitionError::NotLeader(_) | PartitionError::StaleEpoch(_)
        )
    }

    /// After the refresh the partition re-checks divergence: the leader or its epoch
    /// changed, and with it possibly the history.
    pub fn needs_epoch_check(self) -> bool {
        matches!(self, PartitionError::StaleEpoch(_))
    }

    pub fn code(self) -> i16 {
        match self {
            PartitionError::NotLeader(c)
            | PartitionError::StaleEpoch(c)
            | PartitionError::Other(c) => c,
            PartitionError::OffsetOutOfRange => ResponseError::OffsetOutOfRange.code(),
        }
    }
}

/// The (leader, epoch) a partition fetches from changed since it was last seen: its
/// history may have changed too, so it re-checks divergence before fetching on.
pub fn leader_changed(last_seen: Option<(i32, i32)>, now: (i32, i32)) -> bool {
    last_seen.is_some_and(|seen| seen != now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(target: i64, complete: bool) -> Truncation {
        Truncation {
            target: Some(target),
            complete,
        }
    }

    #[test]
    fn same_epoch_cuts_to_the_lower_end() {
        // Local epoch 3 ends at 150 (log end 150); the leader's epoch 3 ends at 120.
        assert_eq!(truncation_target(3, 120, (3, 150), 150), cut(120, true));
        // The leader has more of epoch 3 than we do: nothing to cut.
        assert_eq!(truncation_target(3, 200, (3, 150), 150), Truncation::KEEP);
        // Our epoch 3 ended at 100 (epoch 5 follows locally); the leader's epoch 3
        // went on to 180: cut our epoch-5 records.
        assert_eq!(truncation_target(3, 180, (3, 100), 200), cut(100, true));
    }

    #[test]
    fn an_epoch_the_local_log_never_had_gives_an_intermediate_cut() {
        // The leader answers epoch 3 ending at 150; locally epoch 0 runs to 100, then
        // epoch 5: cut at 100 and ask again with epoch 0.
        assert_eq!(truncation_target(3, 150, (0, 100), 200), cut(100, false));
        // Cutting at the log end is no cut, but still incomplete.
        assert_eq!(
            truncation_target(3, 150, (0, 200), 200),
            Truncation {
                target: None,
                complete: false
            }
        );
    }

    #[test]
    fn no_local_epoch_below_the_leaders_cuts_to_the_leaders_end() {
        assert_eq!(truncation_target(2, 40, (-1, -1), 100), cut(40, true));
    }

    #[test]
    fn an_undefined_answer_keeps_the_log_unless_its_epochs_are_above_the_leaders() {
        assert_eq!(truncation_target(-1, -1, (3, 100), 100), Truncation::KEEP);
        // Retention passed our epoch on the leader, whose epoch is higher: keep.
        assert_eq!(on_undefined_epoch(3, 7, (3, 100), 100), Truncation::KEEP);
        // Our epoch 12 is above the leader's 7: that tail is not the leader's. Our
        // epochs up to 7 end at 80.
        assert_eq!(on_undefined_epoch(12, 7, (5, 80), 100), cut(80, false));
        assert_eq!(on_undefined_epoch(12, 7, (-1, -1), 100), cut(0, false));
        assert_eq!(on_undefined_epoch(12, -1, (5, 80), 100), Truncation::KEEP);
    }

    #[test]
    fn out_of_range_never_cuts_blindly() {
        use OutOfRange::*;
        assert_eq!(on_out_of_range(10, 50, 90, true, true, None), RestartAt(50));
        assert_eq!(on_out_of_range(120, 0, 90, true, true, None), CheckEpochs);
        // The epoch check ran at this end and left the log ahead: cut to the end.
        assert_eq!(
            on_out_of_range(120, 0, 90, true, true, Some(120)),
            TruncateTo(90)
        );
        assert_eq!(
            on_out_of_range(120, 0, 90, true, false, None),
            TruncateTo(90)
        );
        assert_eq!(on_out_of_range(120, 0, 90, false, true, None), Refuse);
        assert_eq!(on_out_of_range(60, 0, 90, true, true, None), Retry);
    }

    #[test]
    fn partition_errors_are_typed() {
        use PartitionError::*;
        assert_eq!(PartitionError::from_code(0), None);
        assert_eq!(PartitionError::from_code(1), Some(OffsetOutOfRange));
        for code in [3, 5, 6, 100, 103] {
            let e = PartitionError::from_code(code).expect("error");
            assert!(e.needs_metadata_refresh(), "{code}");
            assert!(!e.needs_epoch_check(), "{code}");
            assert_eq!(e.code(), code);
        }
        for code in [74, 75] {
            let e = PartitionError::from_code(code).expect("error");
            assert!(
                e.needs_metadata_refresh() && e.needs_epoch_check(),
                "{code}"
            );
        }
        let other = PartitionError::from_code(87).expect("error");
        assert_eq!(other, Other(87));
        assert!(!other.needs_metadata_refresh());
    }

    #[test]
    fn a_changed_leader_or_epoch_is_a_change_the_first_sighting_is_not() {
        assert!(!leader_changed(None, (1, 4)));
        assert!(!leader_changed(Some((1, 4)), (1, 4)));
        assert!(leader_changed(Some((1, 4)), (2, 4)));
        assert!(leader_changed(Some((1, 4)), (1, 5)));
    }
}
