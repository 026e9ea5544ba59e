//! The metadata applier: what committed metadata means for this node's shards, worked
//! out from the images before and after a change, not from the plan the controller made
//! (the split of commit from apply: a node that did not plan a change, a follower of the
//! quorum, applies it the same way). A partition with a replica on this node is opened
//! when it appears here, deleted with its topic (or when its replica leaves this node),
//! reconfigured when its topic's log config changes, and handed its new leadership
//! (leader, epochs, ISR) whenever that moves: leading it or following its leader.

use dataplane::controller::AdminResult;
use dataplane::metadata::MetadataImage;
use dataplane::types::TopicPartition;

use crate::state::PartitionAction;

/// The shard work that takes this node from `old` to `new`. `results`, the answer items of
/// the request that made the change (if this node made it), give each action the
/// `result_index` its failure is reported on: the item named after its topic, or after
/// the partition (`topic-partition`).
pub fn actions_between(
    old: &MetadataImage,
    new: &MetadataImage,
    results: &[AdminResult],
) -> Vec<PartitionAction> {
    let node = new.node_id;
    let result_index = |tp: &TopicPartition| {
        let label = tp.to_string();
        results
            .iter()
            .position(|r| r.name == tp.topic)
            .or_else(|| results.iter().position(|r| r.name == label))
            .unwrap_or(0)
    };
    let mut out = Vec::new();
    // Topics gone (by id: a topic deleted and created again under its name is both).
    for topic in old.topics.values() {
        if new.topics_by_id.contains_key(&topic.id) {
            continue;
        }
        for p in topic
            .partitions
            .iter()
            .filter(|p| p.replicas.contains(&node))
        {
            let tp = TopicPartition::new(topic.name.clone(), p.partition);
            out.push(PartitionAction::Delete {
                result_index: result_index(&tp),
                tp,
                shard: p.shard,
            });
        }
    }
    for topic in new.topics.values() {
        let before = old
            .topics_by_id
            .get(&topic.id)
            .and_then(|name| old.topics.get(name));
        for p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.clone(), p.partition);
            let index = result_index(&tp);
            let was = before
                .and_then(|t| t.partitions.get(p.partition as usize))
                .filter(|w| w.replicas.contains(&node));
            if !p.replicas.contains(&node) {
                if let Some(w) = was {
                    // The replica moved off this node (reassignment).
                    out.push(PartitionAction::Delete {
                        result_index: index,
                        tp,
                        shard: w.shard,
                    });
                }
                continue;
            }
            match was {
                None => out.push(PartitionAction::Open {
                    result_index: index,
                    tp,
                    topic_id: topic.id,
                    config: topic.log_config.clone(),
                    leadership: p.leadership(),
                    shard: p.shard,
                }),
                Some(was) => {
                    if before.is_some_and(|t| t.log_config != topic.log_config) {
                        out.push(PartitionAction::UpdateConfig {
                            result_index: index,
                            tp: tp.clone(),
                            config: topic.log_config.clone(),
                            shard: p.shard,
                        });
                    }
                    if was.leadership() != p.leadership() {
                        out.push(PartitionAction::SetLeadership {
                            result_index: index,
                            tp,
                            leadership: p.leadership(),
                            shard: p.shard,
                        });
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use dataplane::log::LogConfig;
    use dataplane::metadata::{PartitionImage, TopicImage};

    use super::*;

    fn image(topics: Vec<TopicImage>) -> MetadataImage {
        let mut m = MetadataImage::empty("c".into(), 0, "127.0.0.1:9092".parse().expect("addr"));
        for t in topics {
            m.topics_by_id.insert(t.id, t.name.clone());
            m.topics.insert(t.name.clone(), Arc::new(t));
        }
        m
    }

    fn topic(name: &str, id: u128, epochs: &[i32], retention_ms: i64) -> TopicImage {
        TopicImage {
            name: name.into(),
            id: uuid::Uuid::from_u128(id),
            partitions: epochs
                .iter()
                .enumerate()
                .map(|(i, e)| PartitionImage::single(i as i32, 0, *e, i % 2))
                .collect(),
            configs: BTreeMap::new(),
            log_config: LogConfig {
                retention_ms,
                ..LogConfig::default()
            },
            internal: false,
        }
    }

    fn kinds(actions: &[PartitionAction]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                PartitionAction::Open { tp, .. } => format!("open {tp}"),
                PartitionAction::Delete { tp, .. } => format!("delete {tp}"),
                PartitionAction::UpdateConfig { tp, .. } => format!("config {tp}"),
                PartitionAction::SetLeadership { tp, leadership, .. } => format!(
                    "lead {tp}@{} by {} isr {:?}",
                    leadership.leader_epoch.0, leadership.leader, leadership.isr
                ),
            })
            .collect()
    }

    #[test]
    fn new_gone_grown_reconfigured_and_re_led_partitions_become_shard_work() {
        let old = image(vec![topic("a", 1, &[0, 0], 10), topic("b", 2, &[0], 10)]);
        let new = image(vec![
            // a: one more partition, a new retention, partition 1 at a new epoch.
            topic("a", 1, &[0, 3, 0], 20),
            // b deleted and created again under its name: a new id.
            topic("b", 3, &[0], 10),
        ]);
        let results = vec![AdminResult::ok("b"), AdminResult::ok("a")];
        let actions = actions_between(&old, &new, &results);
        assert_eq!(
            kinds(&actions),
            vec![
                "delete b-0",
                "config a-0",
                "config a-1",
                "lead a-1@3 by 0 isr [0]",
                "open a-2",
                "open b-0",
            ]
        );
        // Failures are reported on the answer item of their topic.
        for a in &actions {
            let want = if a.tp().topic == "a" { 1 } else { 0 };
            assert_eq!(a.result_index(), want, "{a:?}");
        }
        assert!(
            actions_between(&new, &new, &[]).is_empty(),
            "no change, no work"
        );
        // Partitions with no replica here are not this node's work.
        let mut theirs = topic("c", 4, &[0], 10);
        theirs.partitions[0] = PartitionImage::single(0, 7, 0, 0);
        assert!(actions_between(&old, &image(vec![theirs]), &[])
            .iter()
            .all(|a| !matches!(a, PartitionAction::Open { .. })));
    }

    #[test]
    fn a_follower_replica_is_opened_here_and_follows_every_leadership_change() {
        let replicated = |leader: i32, epoch: i32, isr: Vec<i32>| {
            let mut t = topic("r", 5, &[0], 10);
            t.partitions[0] = PartitionImage {
                partition: 0,
                leader,
                leader_epoch: epoch,
                partition_epoch: epoch,
                replicas: vec![7, 0, 8],
                isr,
                adding: Vec::new(),
                removing: Vec::new(),
                shard: 1,
            };
            image(vec![t])
        };
        let empty = image(vec![]);
        let led_by_7 = replicated(7, 0, vec![7, 0, 8]);
        assert_eq!(
            kinds(&actions_between(&empty, &led_by_7, &[])),
            vec!["open r-0"]
        );
        // The ISR shrinks: the follower hears of it too.
        let shrunk = replicated(7, 0, vec![7, 0]);
        assert_eq!(
            kinds(&actions_between(&led_by_7, &shrunk, &[])),
            vec!["lead r-0@0 by 7 isr [7, 0]"]
        );
        // Its leader fails over to this node.
        let ours = replicated(0, 1, vec![0]);
        assert_eq!(
            kinds(&actions_between(&shrunk, &ours, &[])),
            vec!["lead r-0@1 by 0 isr [0]"]
        );
        // The replica moves away (reassignment): its log goes.
        let mut moved = topic("r", 5, &[0], 10);
        moved.partitions[0] = PartitionImage {
            replicas: vec![7, 8],
            isr: vec![7, 8],
            ..PartitionImage::single(0, 7, 2, 1)
        };
        assert_eq!(
            kinds(&actions_between(&ours, &image(vec![moved]), &[])),
            vec!["delete r-0"]
        );
    }
}
