//! The fetch engine's decisions, in Kafka's `AbstractFetcherThread` terms, as pure
//! functions of what the leader answered and what the local log holds: where to
//! truncate when histories diverge, what to do on OFFSET_OUT_OF_RANGE, and what a
//! partition error means. The mirror fetcher (`mirror.rs`) does the I/O and applies
//! them; the replica fetcher (`replica.rs`) applies the same ones, through the same
//! [`LeaderEndpoint`].

use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use kafka_protocol::ResponseError;

use crate::client::cluster::{ClusterMetadata, SourceCluster};
use crate::client::{ClientError, ConnectionConfig, KafkaConnection};

use super::MirrorPartitionStatus;

/// One partition's fetch state, Kafka's `PartitionFetchState`: whether it must check
/// divergence first, its pipelined position and generation, its error backoff, and what
/// it has seen of the leader. Time comes in as a parameter.
#[derive(Debug, Clone)]
pub struct PartitionFetchState {
    /// Check divergence (OffsetsForLeaderEpoch) before the next fetch.
    pub(crate) truncating: bool,
    pub(crate) status: MirrorPartitionStatus,
    /// Not fetched before this instant (backoff after an error).
    pub(crate) retry_at: Option<Instant>,
    /// Consecutive errors, for the backoff and for giving up.
    pub(crate) errors: u32,
    /// When the source was last asked for this partition's newest timestamp (lag).
    pub(crate) lag_probed_at: Option<Instant>,
    /// Where the next Fetch starts while the previous response's append is still
    /// pending (the pipeline); `None`: at the local log end.
    pub(crate) next_fetch_offset: Option<i64>,
    /// Changes whenever `next_fetch_offset` is forgotten (an error, a truncation, a
    /// discarded response): a response fetched under an older generation is dropped
    /// unappended, so a failed append never leaves a gap in the log.
    pub(crate) generation: u64,
    /// The epoch of the last batch of the pipelined response (the `LastFetchedEpoch`
    /// that goes with `next_fetch_offset`).
    pub(crate) next_fetch_epoch: Option<i32>,
    /// The source (leader, leader epoch) it last fetched from.
    pub(crate) source_leader: Option<(i32, i32)>,
    /// The local end at which an OFFSET_OUT_OF_RANGE answer last sent the partition to
    /// an epoch check.
    pub(crate) out_of_range_checked_at: Option<i64>,
    /// The last proactive epoch bump asked for: its target and when (one request until
    /// the image shows it or it is old, not one per append; audit B-18).
    pub(crate) bump_requested: Option<(i32, Instant)>,
    /// The log was cut where the source diverged: nothing is fetched until the
    /// replicas have converged on the cut (reference §10.3).
    pub(crate) converging: Option<super::Convergence>,
    /// When a held partition last logged why it is still held (ms).
    pub(crate) converging_reported_ms: Option<i64>,
}

impl PartitionFetchState {
    pub fn new(generation: u64) -> Self {
        PartitionFetchState {
            truncating: true,
            status: MirrorPartitionStatus {
                source_high_watermark: -1,
                source_log_start_offset: -1,
                source_leader_epoch: -1,
                last_error: None,
                truncated_records: 0,
                lag_ms: -1,
            },
            retry_at: None,
            errors: 0,
            lag_probed_at: None,
            next_fetch_offset: None,
            generation,
            next_fetch_epoch: None,
            source_leader: None,
            out_of_range_checked_at: None,
            bump_requested: None,
            converging: None,
            converging_reported_ms: None,
        }
    }

    /// Forgets the pipelined fetch position: the next Fetch starts at the log end.
    pub fn forget_position(&mut self, generation: u64) {
        self.next_fetch_offset = None;
        self.next_fetch_epoch = None;
        self.generation = generation;
    }

    /// An error: the position is forgotten (a new generation), the partition waits
    /// `base * 2^errors / 2` (at least 50 ms, at most ten times `base`) before it is
    /// fetched again, and the error is what DescribeMirrors shows.
    pub fn on_error(&mut self, message: String, base: Duration, now: Instant, generation: u64) {
        self.forget_position(generation);
        self.errors = self.errors.saturating_add(1);
        let base = base.max(Duration::from_millis(50));
        let factor = 1u32 << self.errors.min(5);
        let wait = (base * factor / 2).min(base * 10);
        self.retry_at = Some(now + wait);
        self.status.last_error = Some(message);
    }

    /// Appended cleanly: the error backoff is over.
    pub fn on_appended(&mut self) {
        self.errors = 0;
        self.retry_at = None;
        self.status.last_error = None;
        self.out_of_range_checked_at = None;
    }

    /// May be fetched at `now` (not backing off).
    pub fn is_ready(&self, now: Instant) -> bool {
        self.converging.is_none() && self.retry_at.is_none_or(|at| at <= now)
    }

    /// A response fetched under `generation` may be appended.
    pub fn accepts(&self, generation: u64) -> bool {
        self.generation == generation
    }

    /// The leader (and its epoch) the next fetch goes to; a change sends the partition
    /// to a divergence check first. Returns whether it must check.
    pub fn on_leader_seen(&mut self, leader: i32, epoch: i32) -> bool {
        self.status.source_leader_epoch = epoch;
        if leader_changed(self.source_leader, (leader, epoch)) {
            self.truncating = true;
        }
        self.source_leader = Some((leader, epoch));
        self.truncating
    }

    /// A response ending at `next_offset` with its last batch at `last_epoch` was taken
    /// for a fetch at `fetch_offset`: the next fetch goes on from there (the pipeline).
    pub fn on_fetched(&mut self, fetch_offset: i64, next_offset: i64, last_epoch: i32) {
        if next_offset > fetch_offset {
            self.next_fetch_offset = Some(next_offset);
            self.next_fetch_epoch = Some(last_epoch);
        }
    }

    /// Where the next fetch starts and its `LastFetchedEpoch`: the pipelined position,
    /// or the local log end and latest epoch (`local`, asked only when needed).
    pub fn position(&self, local: impl FnOnce() -> (i64, i32)) -> (i64, i32) {
        match self.next_fetch_offset {
            Some(offset) => (offset, self.next_fetch_epoch.unwrap_or(-1)),
            None => local(),
        }
    }
}

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

/// The leader side of a fetch, Kafka's `LeaderEndpoint`: the requests the engine sends
/// the broker that leads a partition. The mirror fetcher's is a consumer connection to
/// a source broker or, for followers, the partition's leader ([`KafkaConnection`] both);
/// tests use an in-memory leader.
///
/// [`KafkaConnection`]: crate::client::KafkaConnection
#[allow(async_fn_in_trait)]
pub trait LeaderEndpoint {
    /// The version of `api_key` both sides speak within `[min, max]`, if any.
    fn pick_version(&self, api_key: i16, min: i16, max: i16) -> Option<i16>;
    /// The connection failed and must not be used again.
    fn is_broken(&self) -> bool;
    async fn fetch(
        &mut self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<FetchResponse, ClientError>;
    async fn offsets_for_leader_epoch(
        &mut self,
        request: &OffsetForLeaderEpochRequest,
        version: i16,
    ) -> Result<OffsetForLeaderEpochResponse, ClientError>;
    async fn list_offsets(
        &mut self,
        request: &ListOffsetsRequest,
        version: i16,
    ) -> Result<ListOffsetsResponse, ClientError>;
}

impl LeaderEndpoint for crate::client::KafkaConnection {
    fn pick_version(&self, api_key: i16, min: i16, max: i16) -> Option<i16> {
        crate::client::KafkaConnection::pick_version(self, api_key, min, max)
    }

    fn is_broken(&self) -> bool {
        crate::client::KafkaConnection::is_broken(self)
    }

    async fn fetch(
        &mut self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<FetchResponse, ClientError> {
        self.send(request, version).await
    }

    async fn offsets_for_leader_epoch(
        &mut self,
        request: &OffsetForLeaderEpochRequest,
        version: i16,
    ) -> Result<OffsetForLeaderEpochResponse, ClientError> {
        self.send(request, version).await
    }

    async fn list_offsets(
        &mut self,
        request: &ListOffsetsRequest,
        version: i16,
    ) -> Result<ListOffsetsResponse, ClientError> {
        self.send(request, version).await
    }
}

/// Where the leaders are and how to reach them: the cluster side of the fetch engine.
/// The mirror's is the source cluster (Metadata, a pooled connection per broker and
/// extra ones for parallel Fetches: [`SourceDirectory`]); tests use an in-memory one.
#[allow(async_fn_in_trait)]
pub trait LeaderDirectory {
    type Leader: LeaderEndpoint;
    /// Leaders and epochs of the partitions of `topics`.
    async fn metadata(&mut self, topics: &[String]) -> Result<ClusterMetadata, ClientError>;
    /// The pooled connection to `leader`.
    async fn connection(&mut self, leader: i32) -> Result<&mut Self::Leader, ClientError>;
    /// Another connection to `leader` (slot > 0: several Fetches in flight), kept from
    /// an earlier round or opened now.
    async fn extra_connection(
        &mut self,
        leader: i32,
        slot: usize,
        meta: &ClusterMetadata,
    ) -> Result<Self::Leader, ClientError>;
    /// Keeps an extra connection for the next round.
    fn keep_extra_connection(&mut self, leader: i32, slot: usize, conn: Self::Leader);
    /// The pooled connection to `leader` failed: open a new one next time.
    fn invalidate(&mut self, leader: i32);
}

/// The mirror's source cluster as a [`LeaderDirectory`].
#[derive(Debug)]
pub struct SourceDirectory {
    cluster: SourceCluster,
    extra: std::collections::HashMap<(i32, usize), KafkaConnection>,
    extra_config: ConnectionConfig,
}

impl SourceDirectory {
    pub fn new(bootstrap_servers: &str, config: ConnectionConfig) -> Result<Self, ClientError> {
        Ok(SourceDirectory {
            cluster: SourceCluster::new(bootstrap_servers, config.clone())?,
            extra: std::collections::HashMap::new(),
            extra_config: config,
        })
    }
}

impl LeaderDirectory for SourceDirectory {
    type Leader = KafkaConnection;

    async fn metadata(&mut self, topics: &[String]) -> Result<ClusterMetadata, ClientError> {
        self.cluster.metadata(Some(topics)).await
    }

    async fn connection(&mut self, leader: i32) -> Result<&mut KafkaConnection, ClientError> {
        self.cluster.connection(leader).await
    }

    async fn extra_connection(
        &mut self,
        leader: i32,
        slot: usize,
        meta: &ClusterMetadata,
    ) -> Result<KafkaConnection, ClientError> {
        if let Some(c) = self
            .extra
            .remove(&(leader, slot))
            .filter(|c| !c.is_broken())
        {
            return Ok(c);
        }
        match meta.brokers.get(&leader) {
            Some(addr) => KafkaConnection::connect_with(addr, &self.extra_config).await,
            None => Err(ClientError::UnknownBroker { broker_id: leader }),
        }
    }

    fn keep_extra_connection(&mut self, leader: i32, slot: usize, conn: KafkaConnection) {
        if !conn.is_broken() {
            self.extra.insert((leader, slot), conn);
        }
    }

    fn invalidate(&mut self, leader: i32) {
        self.cluster.invalidate(leader);
    }
}

/// Why the fetcher could not go on with a partition: typed, with whether retrying can
/// help. The message is what DescribeMirrors and the FAILED record show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The mirror's source cannot be reached with its config (bad bootstrap servers).
    #[error("mirror {mirror}: {message}")]
    SourceConfig { mirror: String, message: String },
    /// The bootstrap address now reaches another cluster.
    #[error("{0}")]
    ClusterIdChanged(String),
    #[error("the source broker does not support Fetch v4 or newer")]
    FetchUnsupported,
    /// A source without topic ids shows signs of a deleted and re-created topic.
    #[error("{0}")]
    RecreatedWithoutTopicId(String),
    /// A fetched batch failed its frame or CRC check.
    #[error("{0}")]
    CorruptBatch(String),
    #[error("partition {0} is not open on this shard")]
    NotOpen(crate::types::TopicPartition),
    #[error("partition {0} is closed")]
    Closed(crate::types::TopicPartition),
    /// The source's batch boundaries differ from the local log's at its end.
    #[error("source batch {base}..={last} straddles the local log end {end}; checking divergence")]
    Straddle { base: i64, last: i64, end: i64 },
    /// Raising the destination epoch above a mirrored batch's failed.
    #[error("{0}")]
    EpochBump(String),
    /// The local log refused or failed the append.
    #[error("appending mirrored batches: {message}")]
    Append {
        message: String,
        invalid_batch: bool,
    },
    #[error("restarting the log at the source batch: {0}")]
    Restart(String),
    /// No source broker answers (reference §6.3: an IO error fails the partition, and
    /// the FAILED retry with backoff brings it back once the source is reachable).
    #[error("the source cluster is unreachable: {0}")]
    SourceUnreachable(String),
    /// The source refused the mirror's credentials or TLS settings: FAILED with the
    /// broker's reason, retried with backoff, and at once when the mirror's configs
    /// change.
    #[error("the source cluster refused the mirror's security settings: {0}")]
    SourceAuthentication(String),
    /// Held after a cut where the source diverged, the partition could not be checked
    /// any more (this broker stopped leading it). Not converging in time only holds it.
    #[error("{0}")]
    NotConverged(String),
}

impl FetchError {
    /// Whether a retry can help (else the partition goes FAILED non-retryable).
    pub fn retryable(&self) -> bool {
        match self {
            FetchError::SourceConfig { .. }
            | FetchError::ClusterIdChanged(_)
            | FetchError::FetchUnsupported
            | FetchError::RecreatedWithoutTopicId(_)
            | FetchError::CorruptBatch(_) => false,
            FetchError::Append { invalid_batch, .. } => !invalid_batch,
            FetchError::NotOpen(_)
            | FetchError::Closed(_)
            | FetchError::Straddle { .. }
            | FetchError::EpochBump(_)
            | FetchError::Restart(_)
            | FetchError::SourceUnreachable(_)
            | FetchError::SourceAuthentication(_)
            | FetchError::NotConverged(_) => true,
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
    fn a_response_from_an_older_generation_is_never_appended() {
        // The pipeline: a fetch at 0 returns up to 100; the next goes out at 100 while
        // the first is appended. An error meanwhile forgets the position (generation
        // 2): both responses in flight are dropped and the next fetch starts at the
        // log end, so a failed append cannot leave a hole.
        let mut s = PartitionFetchState::new(1);
        s.truncating = false;
        assert_eq!(s.position(|| (0, -1)), (0, -1));
        s.on_fetched(0, 100, 3);
        assert_eq!(s.position(|| unreachable!()), (100, 3));
        assert!(s.accepts(1));
        s.on_error("boom".into(), Duration::from_millis(100), Instant::now(), 2);
        assert!(!s.accepts(1), "the old generation's responses are dropped");
        assert!(s.accepts(2));
        assert_eq!(s.position(|| (40, 2)), (40, 2), "back to the log end");
        // An empty response does not move the position.
        s.on_fetched(40, 40, 2);
        assert_eq!(s.position(|| (40, 2)), (40, 2));
    }

    #[test]
    fn errors_back_off_exponentially_up_to_ten_times_the_base_and_clear_on_append() {
        let base = Duration::from_millis(100);
        let now = Instant::now();
        let mut s = PartitionFetchState::new(1);
        let mut waits = Vec::new();
        for g in 2..9 {
            s.on_error("e".into(), base, now, g);
            waits.push(s.retry_at.map(|at| (at - now).as_millis()));
            assert!(!s.is_ready(now));
        }
        let expected = [100, 200, 400, 800, 1000, 1000, 1000].map(Some);
        assert_eq!(waits, expected);
        assert!(s.is_ready(now + Duration::from_secs(1)));
        assert_eq!(s.status.last_error.as_deref(), Some("e"));
        s.on_appended();
        assert!(s.is_ready(now) && s.errors == 0 && s.status.last_error.is_none());
        // A base below 50 ms counts as 50.
        let mut s = PartitionFetchState::new(1);
        s.on_error("e".into(), Duration::from_millis(1), now, 2);
        assert_eq!(s.retry_at.map(|at| (at - now).as_millis()), Some(50));
    }

    #[test]
    fn a_new_leader_or_epoch_sends_the_partition_to_a_divergence_check() {
        let mut s = PartitionFetchState::new(1);
        assert!(s.on_leader_seen(1, 4), "a (re)start checks first");
        s.truncating = false;
        assert!(!s.on_leader_seen(1, 4));
        assert!(s.on_leader_seen(2, 4), "moved leader");
        s.truncating = false;
        assert!(s.on_leader_seen(2, 5), "bumped epoch");
        assert_eq!(s.status.source_leader_epoch, 5);
    }

    #[test]
    fn fetch_errors_say_whether_a_retry_can_help() {
        let tp = crate::types::TopicPartition::new("t", 0);
        assert!(!FetchError::FetchUnsupported.retryable());
        assert!(!FetchError::CorruptBatch("crc".into()).retryable());
        assert!(!FetchError::ClusterIdChanged("other".into()).retryable());
        assert!(FetchError::NotOpen(tp.clone()).retryable());
        assert!(FetchError::Straddle {
            base: 1,
            last: 5,
            end: 3
        }
        .retryable());
        let append = |invalid_batch| FetchError::Append {
            message: "x".into(),
            invalid_batch,
        };
        assert!(append(false).retryable() && !append(true).retryable());
        assert_eq!(
            FetchError::NotOpen(tp).to_string(),
            "partition t-0 is not open on this shard"
        );
    }

    #[test]
    fn a_changed_leader_or_epoch_is_a_change_the_first_sighting_is_not() {
        assert!(!leader_changed(None, (1, 4)));
        assert!(!leader_changed(Some((1, 4)), (1, 4)));
        assert!(leader_changed(Some((1, 4)), (2, 4)));
        assert!(leader_changed(Some((1, 4)), (1, 5)));
    }
}
