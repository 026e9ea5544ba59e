//! DescribeLogDirs (35), v1-v4: the broker's one log directory with the size of each
//! partition in it (read from its owning shard) and the file system's total and usable
//! bytes (statvfs on glommio's blocking pool). `kafka-log-dirs --describe` and Cruise
//! Control read it. Twinlog moves no replicas between directories: no future logs, no
//! offset lag.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use crate::api::{str_bytes, topic_name};
use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::types::TopicPartition;

/// The sizes of `tps` (all owned by this shard); partitions not open are left out.
pub(crate) async fn sizes_on_shard(
    ctx: &Rc<ShardCtx>,
    tps: Vec<TopicPartition>,
) -> Vec<(TopicPartition, i64)> {
    let mut out = Vec::with_capacity(tps.len());
    for tp in tps {
        let Some(p) = ctx.partition(&tp) else {
            continue;
        };
        let size = match p.read().await {
            Ok(log) => log.size_in_bytes() as i64,
            Err(_) => continue,
        };
        out.push((tp, size));
    }
    out
}

/// (total, usable) bytes of the file system holding `dir`, -1 each when unknown.
async fn disk_space(dir: std::path::PathBuf) -> (i64, i64) {
    let stat = glommio::executor()
        .spawn_blocking(move || rustix::fs::statvfs(&dir))
        .await;
    match stat {
        Ok(s) => (
            s.f_blocks.saturating_mul(s.f_frsize) as i64,
            s.f_bavail.saturating_mul(s.f_frsize) as i64,
        ),
        Err(_) => (-1, -1),
    }
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let image = ctx.metadata.load();
    let wanted: Vec<TopicPartition> = match &request.topics {
        None => image
            .topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.name.clone(), p.partition))
            })
            .collect(),
        Some(topics) => topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.topic.0.to_string(), *p))
            })
            .collect(),
    };
    let mut by_shard: BTreeMap<usize, Vec<TopicPartition>> = BTreeMap::new();
    for tp in wanted {
        if let Some(p) = image.partition(&tp) {
            by_shard.entry(p.shard).or_default().push(tp);
        }
    }
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for (shard, tps) in by_shard {
        let sizes = match ctx
            .ask(shard, ShardRequest::LogSizes { partitions: tps })
            .await
        {
            Ok(ShardReply::Sizes(sizes)) => sizes,
            _ => Vec::new(),
        };
        for (tp, size) in sizes {
            by_topic.entry(tp.topic).or_default().push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_partition_size(size)
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            );
        }
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(ctx.settings.data_dir.display().to_string()))
        .with_topics(topics);
    if version >= 4 {
        let (total, usable) = disk_space(ctx.settings.data_dir.clone()).await;
        result = result.with_total_bytes(total).with_usable_bytes(usable);
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}
