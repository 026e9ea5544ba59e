//! The fetcher's divergence and out-of-range handling against an in-memory leader
//! ([`FakeLeader`], a [`LeaderEndpoint`]): a real shard context and partition log, no
//! sockets.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

use super::*;
use crate::client::cluster::{PartitionMetadata, TopicMetadata};
use crate::log::LogConfig;
use crate::shard::ShardSettings;
use crate::test_support::run_glommio as run;
use crate::wire::batch::BatchBuilder;

/// A leader whose history is `epochs` ((epoch, start offset), ascending) from
/// `log_start` to `log_end`.
struct FakeLeader {
    epochs: Vec<(i32, i64)>,
    log_start: i64,
    log_end: i64,
    answers_epochs: bool,
    /// The epochs it was asked about, in order.
    asked: Vec<i32>,
}

impl FakeLeader {
    fn new(epochs: Vec<(i32, i64)>, log_start: i64, log_end: i64, answers_epochs: bool) -> Self {
        FakeLeader {
            epochs,
            log_start,
            log_end,
            answers_epochs,
            asked: Vec::new(),
        }
    }

    /// Kafka's `endOffsetFor`.
    fn end_offset_for(&self, requested: i32) -> (i32, i64) {
        match self.epochs.last() {
            Some((latest, _)) if *latest == requested => return (requested, self.log_end),
            None => return (-1, -1),
            _ => {}
        }
        let Some(higher) = self.epochs.iter().position(|(e, _)| *e > requested) else {
            return (-1, -1);
        };
        match higher.checked_sub(1) {
            None => (requested, self.epochs[higher].1),
            Some(floor) => (self.epochs[floor].0, self.epochs[higher].1),
        }
    }
}

impl LeaderEndpoint for FakeLeader {
    fn pick_version(&self, api_key: i16, _min: i16, max: i16) -> Option<i16> {
        if api_key == ApiKey::OffsetForLeaderEpoch as i16 && !self.answers_epochs {
            return None;
        }
        Some(max)
    }

    fn is_broken(&self) -> bool {
        false
    }

    async fn fetch(
        &mut self,
        _request: &FetchRequest,
        _version: i16,
    ) -> Result<FetchResponse, ClientError> {
        Ok(FetchResponse::default())
    }

    async fn offsets_for_leader_epoch(
        &mut self,
        request: &OffsetForLeaderEpochRequest,
        _version: i16,
    ) -> Result<OffsetForLeaderEpochResponse, ClientError> {
        let mut topics = Vec::new();
        for t in &request.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                self.asked.push(p.leader_epoch);
                let (epoch, end) = self.end_offset_for(p.leader_epoch);
                partitions.push(
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(epoch)
                        .with_end_offset(end),
                );
            }
            topics.push(
                OffsetForLeaderTopicResult::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(partitions),
            );
        }
        Ok(OffsetForLeaderEpochResponse::default().with_topics(topics))
    }

    async fn list_offsets(
        &mut self,
        request: &ListOffsetsRequest,
        _version: i16,
    ) -> Result<ListOffsetsResponse, ClientError> {
        let topics = request
            .topics
            .iter()
            .map(|t| {
                ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let offset = if p.timestamp == -2 {
                                    self.log_start
                                } else {
                                    self.log_end
                                };
                                ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_offset(offset)
                            })
                            .collect(),
                    )
            })
            .collect();
        Ok(ListOffsetsResponse::default().with_topics(topics))
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// A shard context over `dir` with partition t-0 open and holding `batches` (base,
/// epoch, records), as a mirror destination would.
async fn shard_with(dir: &std::path::Path, batches: &[(i64, i32, i32)]) -> Rc<ShardCtx> {
    use crate::api::admin::test_support;
    let mut settings: ShardSettings = test_support::settings();
    settings.data_dir = dir.to_path_buf();
    let (ctx, _) = test_support::ctx_with(test_support::image(), settings, |_| {
        crate::controller::AdminResponse::Results(Vec::new())
    });
    ctx.open_partition(
        tp(),
        uuid::Uuid::from_u128(7),
        LogConfig::default(),
        crate::partition::Leadership::alone(0, crate::types::LeaderEpoch(0)),
    )
    .await
    .expect("open");
    let partition = ctx.partition(&tp()).expect("open");
    let mut log = partition.write().await.expect("writer");
    for &(base, epoch, records) in batches {
        let batch = BatchBuilder {
            base_offset: Offset(base),
            partition_leader_epoch: LeaderEpoch(epoch),
            last_offset_delta: records - 1,
            record_count: records,
            ..BatchBuilder::default()
        }
        .build(&[7u8; 40]);
        log.append_passthrough(batch, 0).await.expect("append");
    }
    drop(log);
    ctx
}

fn fetcher() -> MirrorFetcher {
    let f = MirrorFetcher::new(MirrorFetchConfig {
        mirror: "m".into(),
        bootstrap_servers: "127.0.0.1:1".into(),
        source_cluster_id: String::new(),
        client_id: "test".into(),
        fetch_wait_max_ms: 100,
        fetch_min_bytes: 1,
        fetch_response_max_bytes: 1 << 20,
        fetch_max_bytes: 1 << 20,
        fetch_backoff_ms: 100,
        request_timeout_ms: 1000,
        connect_timeout_ms: 1000,
        fetch_connections: 1,
        security: Ok(Default::default()),
    });
    f.add(tp());
    f
}

/// Source metadata naming broker 1 the leader of t-0 at `epoch`.
fn meta(epoch: i32) -> ClusterMetadata {
    let mut topics = BTreeMap::new();
    topics.insert(
        "t".to_string(),
        TopicMetadata {
            id: uuid::Uuid::from_u128(7),
            error_code: 0,
            partitions: vec![PartitionMetadata {
                partition: 0,
                leader: 1,
                leader_epoch: epoch,
                error_code: 0,
                replicas: vec![1],
                isr: vec![1],
            }],
        },
    );
    ClusterMetadata {
        cluster_id: Some("src".into()),
        controller_id: 1,
        brokers: BTreeMap::new(),
        topics,
    }
}

async fn log_range(ctx: &ShardCtx) -> (i64, i64) {
    let p = ctx.partition(&tp()).expect("open");
    let log = p.read().await.expect("reader");
    (log.log_start_offset().0, log.log_end_offset().0)
}

fn truncating(f: &MirrorFetcher) -> bool {
    f.with_state(&tp(), |s| s.truncating).expect("partition")
}

#[test]
fn an_epoch_the_leader_never_had_is_cut_in_two_rounds() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        // Locally: epoch 0 up to 100, then epoch 5 (an old primary's own writes).
        let ctx = shard_with(dir.path(), &[(0, 0, 50), (50, 0, 50), (100, 5, 50)]).await;
        // The leader went 0 -> 3 at 100 and never had epoch 5.
        let mut leader = FakeLeader::new(vec![(0, 0), (3, 100)], 0, 200, true);
        let f = fetcher();
        f.resolve_divergence(&ctx, &mut leader, &meta(3), &[tp()])
            .await
            .expect("round 1");
        assert_eq!(
            log_range(&ctx).await,
            (0, 100),
            "epoch 5 is not the leader's"
        );
        assert!(truncating(&f), "asks again with the epoch below");
        f.resolve_divergence(&ctx, &mut leader, &meta(3), &[tp()])
            .await
            .expect("round 2");
        assert_eq!(log_range(&ctx).await, (0, 100));
        assert!(!truncating(&f), "agreed at epoch 0");
        assert_eq!(leader.asked, vec![5, 0]);
        let cut = f
            .with_state(&tp(), |s| s.status.truncated_records)
            .expect("partition");
        assert_eq!(cut, 50);
    });
}

#[test]
fn out_of_range_ahead_of_the_leader_checks_epochs_before_any_cut() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = shard_with(dir.path(), &[(0, 0, 50), (50, 0, 50), (100, 0, 50)]).await;
        // The leader lost its tail (an unclean election): epoch 0 ends at 120 there.
        let mut leader = FakeLeader::new(vec![(0, 0), (1, 120)], 0, 130, true);
        let f = fetcher();
        f.with_state(&tp(), |s| s.truncating = false);
        f.reset_out_of_range(&ctx, &mut leader, &tp())
            .await
            .expect("reset");
        assert_eq!(log_range(&ctx).await, (0, 150), "no blind cut");
        assert!(truncating(&f), "an epoch check comes first");
        f.resolve_divergence(&ctx, &mut leader, &meta(1), &[tp()])
            .await
            .expect("check");
        // Cut at the start of the batch holding 120.
        assert_eq!(log_range(&ctx).await, (0, 100));
        assert!(!truncating(&f));
    });
}

#[test]
fn out_of_range_without_epoch_answers_cuts_to_the_leaders_end() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = shard_with(dir.path(), &[(0, 0, 50), (50, 0, 50), (100, 0, 50)]).await;
        let mut leader = FakeLeader::new(Vec::new(), 0, 120, false);
        let f = fetcher();
        f.reset_out_of_range(&ctx, &mut leader, &tp())
            .await
            .expect("reset");
        assert_eq!(log_range(&ctx).await, (0, 100));
    });
}

#[test]
fn out_of_range_behind_the_leaders_retention_restarts_at_its_log_start() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = shard_with(dir.path(), &[(0, 0, 50)]).await;
        let mut leader = FakeLeader::new(vec![(0, 80)], 80, 200, true);
        let f = fetcher();
        f.reset_out_of_range(&ctx, &mut leader, &tp())
            .await
            .expect("reset");
        assert_eq!(log_range(&ctx).await, (80, 80));
    });
}

#[test]
fn a_diverging_epoch_answer_cuts_where_the_leaders_history_ends() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = shard_with(dir.path(), &[(0, 2, 50), (50, 2, 50)]).await;
        let f = fetcher();
        // The leader's epoch 2 ended at 70 (then its epoch 4).
        f.truncate_diverging(&ctx, &tp(), 2, 70)
            .await
            .expect("truncate");
        assert_eq!(
            log_range(&ctx).await,
            (0, 50),
            "cut at the batch holding 70"
        );
    });
}

/// The last offset of a batch that starts at `base`.
fn last_offset(base: i64, batch: &bytes::Bytes) -> i64 {
    let delta =
        crate::wire::RecordBatch::parse(batch.clone(), 0).map_or(0, |b| b.last_offset_delta());
    base + i64::from(delta)
}

/// A source partition in memory: whole batches (base offset, epoch, bytes).
#[derive(Debug, Default)]
struct SourceLog {
    batches: Vec<(i64, i32, bytes::Bytes)>,
}

impl SourceLog {
    fn push(&mut self, base: i64, epoch: i32, records: i32) {
        let batch = BatchBuilder {
            base_offset: Offset(base),
            partition_leader_epoch: LeaderEpoch(epoch),
            last_offset_delta: records - 1,
            record_count: records,
            ..BatchBuilder::default()
        }
        .build(&[9u8; 40]);
        self.batches.push((base, epoch, batch));
    }

    fn end(&self) -> i64 {
        self.batches
            .last()
            .map_or(0, |(base, _, b)| last_offset(*base, b) + 1)
    }

    /// (epoch, start offset) entries, Kafka's leader-epoch cache.
    fn epochs(&self) -> Vec<(i32, i64)> {
        let mut out: Vec<(i32, i64)> = Vec::new();
        for (base, epoch, _) in &self.batches {
            if out.last().is_none_or(|(e, _)| e != epoch) {
                out.push((*epoch, *base));
            }
        }
        out
    }
}

/// The in-memory source as a leader directory with one broker (id 1) whose connection
/// serves Fetch like Twinlog's handler does: DivergingEpoch for a `LastFetchedEpoch`
/// whose history ended earlier here.
struct SourceDir {
    conn: SourceConn,
}

impl LeaderDirectory for SourceDir {
    type Leader = SourceConn;

    async fn metadata(&mut self, _topics: &[String]) -> Result<ClusterMetadata, ClientError> {
        let epochs = self.conn.log.borrow().epochs();
        Ok(meta(epochs.last().map_or(0, |(e, _)| *e)))
    }

    async fn connection(&mut self, _leader: i32) -> Result<&mut SourceConn, ClientError> {
        Ok(&mut self.conn)
    }

    async fn extra_connection(
        &mut self,
        leader: i32,
        _slot: usize,
        _meta: &ClusterMetadata,
    ) -> Result<SourceConn, ClientError> {
        Err(ClientError::UnknownBroker { broker_id: leader })
    }

    fn keep_extra_connection(&mut self, _leader: i32, _slot: usize, _conn: SourceConn) {}

    fn invalidate(&mut self, _leader: i32) {}
}

struct SourceConn {
    log: Rc<std::cell::RefCell<SourceLog>>,
    /// Answer the next Fetch NOT_LEADER_OR_FOLLOWER (a source leader change: the
    /// fetcher refreshes the metadata and checks divergence with OffsetsForLeaderEpoch).
    moved: Rc<std::cell::Cell<bool>>,
}

impl SourceConn {
    fn leader(&self) -> FakeLeader {
        let log = self.log.borrow();
        FakeLeader::new(log.epochs(), 0, log.end(), true)
    }
}

impl LeaderEndpoint for SourceConn {
    fn pick_version(&self, _api_key: i16, _min: i16, max: i16) -> Option<i16> {
        Some(max.min(12))
    }

    fn is_broken(&self) -> bool {
        false
    }

    async fn fetch(
        &mut self,
        request: &FetchRequest,
        _version: i16,
    ) -> Result<FetchResponse, ClientError> {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        // A long poll, short: lets the rest of the shard run.
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        let leader = self.leader();
        let log = self.log.borrow();
        let moved = self.moved.take();
        let mut topics = Vec::new();
        for t in &request.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                if moved {
                    partitions.push(
                        PartitionData::default()
                            .with_partition_index(p.partition)
                            .with_error_code(ResponseError::NotLeaderOrFollower.code()),
                    );
                    continue;
                }
                let mut data = PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_high_watermark(leader.log_end)
                    .with_log_start_offset(0);
                if p.last_fetched_epoch >= 0 {
                    let (e, o) = leader.end_offset_for(p.last_fetched_epoch);
                    if e < 0 || o < 0 {
                        partitions.push(data.with_error_code(1));
                        continue;
                    }
                    if e < p.last_fetched_epoch || o < p.fetch_offset {
                        data.diverging_epoch =
                            data.diverging_epoch.with_epoch(e).with_end_offset(o);
                        partitions.push(data);
                        continue;
                    }
                }
                if p.fetch_offset > leader.log_end {
                    partitions.push(data.with_error_code(1));
                    continue;
                }
                let mut records = Vec::new();
                for (base, _, b) in &log.batches {
                    if last_offset(*base, b) >= p.fetch_offset {
                        records.extend_from_slice(b);
                    }
                }
                partitions.push(data.with_records(Some(records.into())));
            }
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(partitions),
            );
        }
        Ok(FetchResponse::default().with_responses(topics))
    }

    async fn offsets_for_leader_epoch(
        &mut self,
        request: &OffsetForLeaderEpochRequest,
        version: i16,
    ) -> Result<OffsetForLeaderEpochResponse, ClientError> {
        self.leader()
            .offsets_for_leader_epoch(request, version)
            .await
    }

    async fn list_offsets(
        &mut self,
        request: &ListOffsetsRequest,
        version: i16,
    ) -> Result<ListOffsetsResponse, ClientError> {
        self.leader().list_offsets(request, version).await
    }
}

/// The destination's batches as (base offset, epoch, bytes).
async fn local_batches(ctx: &ShardCtx) -> Vec<(i64, i32, bytes::Bytes)> {
    let p = ctx.partition(&tp()).expect("open");
    let log = p.read().await.expect("reader");
    let mut out = Vec::new();
    log.for_each_batch(log.log_start_offset(), |b| {
        out.push((
            b.base_offset().0,
            b.partition_leader_epoch().0,
            b.as_bytes().clone(),
        ))
    })
    .await
    .expect("read");
    out
}

/// Waits (on the executor) until the local log ends at `end`.
async fn until_local_end(ctx: &ShardCtx, end: i64) {
    for _ in 0..400 {
        if log_range(ctx).await.1 == end {
            return;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("local log end {:?}, wanted {end}", log_range(ctx).await);
}

type SharedSource = Rc<std::cell::RefCell<SourceLog>>;

/// A source t-0 of two 10-record batches at epoch 0 and the fetch loop copying it into
/// `ctx`, returned once the copy ends at 20: (the source, its "leader moved" switch,
/// the fetcher, the loop's task).
async fn copying_twenty(
    ctx: &Rc<ShardCtx>,
) -> (
    SharedSource,
    Rc<std::cell::Cell<bool>>,
    Rc<MirrorFetcher>,
    glommio::Task<()>,
) {
    let source = Rc::new(std::cell::RefCell::new(SourceLog::default()));
    let moved = Rc::new(std::cell::Cell::new(false));
    source.borrow_mut().push(0, 0, 10);
    source.borrow_mut().push(10, 0, 10);
    let f = Rc::new(fetcher());
    let directory = SourceDir {
        conn: SourceConn {
            log: Rc::clone(&source),
            moved: Rc::clone(&moved),
        },
    };
    let task = glommio::spawn_local(Rc::clone(&f).run_with(Rc::clone(ctx), directory));
    until_local_end(ctx, 20).await;
    (source, moved, f, task)
}

#[test]
fn the_fetch_loop_copies_then_follows_a_source_that_rewrote_its_tail() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = shard_with(dir.path(), &[]).await;
        let (source, _, f, task) = copying_twenty(&ctx).await;
        // The source loses its tail (an unclean election) and writes on at epoch 2; the
        // copy already holds the lost batch. Only the epochs tell.
        {
            let mut log = source.borrow_mut();
            log.batches.pop();
            log.push(10, 2, 15);
        }
        until_local_end(&ctx, 25).await;
        let expected = source.borrow().batches.clone();
        assert_eq!(
            local_batches(&ctx).await,
            expected,
            "byte-identical to the source"
        );
        let cut = f
            .with_state(&tp(), |s| s.status.truncated_records)
            .expect("partition");
        assert_eq!(cut, 10, "the lost batch was cut");
        f.shutdown();
        task.await;
    });
}

#[test]
fn nothing_is_copied_past_a_divergence_cut_until_the_replicas_converge_on_it() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = shard_with(dir.path(), &[]).await;
        // A follower (node 1) in the ISR: a cut must wait until it has fetched from
        // no further than the cut.
        let partition = ctx.partition(&tp()).expect("open");
        assert!(partition.set_leadership(
            crate::partition::Leadership {
                leader: 0,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: 1,
                replicas: vec![0, 1],
                isr: vec![0, 1],
            },
            crate::shard::now_ms(),
        ));
        let (source, moved, f, task) = copying_twenty(&ctx).await;
        // The follower holds everything so far.
        let now = crate::shard::now_ms();
        partition.on_follower_fetch(1, 20, 20, 0, now);
        {
            let mut log = source.borrow_mut();
            log.batches.pop();
            log.push(10, 2, 15);
        }
        moved.set(true);
        // Cut at 10 (the leader change is checked with OffsetsForLeaderEpoch), then held:
        // the round that cut must not fetch the new tail either.
        until_local_end(&ctx, 10).await;
        for _ in 0..30 {
            glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            assert_eq!(log_range(&ctx).await.1, 10, "copied past the cut");
        }
        assert!(f
            .with_state(&tp(), |s| s.converging.is_some())
            .expect("partition"));
        // The follower fetches from the cut: the copy goes on.
        partition.on_follower_fetch(1, 10, 10, 0, crate::shard::now_ms());
        until_local_end(&ctx, 25).await;
        let expected = source.borrow().batches.clone();
        assert_eq!(local_batches(&ctx).await, expected);
        f.shutdown();
        task.await;
    });
}
