//! Replication throttles, Kafka's replication quotas: `leader.replication.throttled.rate`
//! and `follower.replication.throttled.rate` (bytes per second, dynamic broker configs,
//! per broker or cluster default) limit what a leader sends to, and a follower fetches
//! for, the replicas named by the topic configs `leader.replication.throttled.replicas`
//! / `follower.replication.throttled.replicas` (`partition:broker,...` or `*`).
//! `kafka-reassign-partitions --throttle` sets exactly these. As in Kafka, a replica in
//! the ISR is never throttled, so acks=all is not slowed down by a reassignment.
//!
//! Each shard keeps its own budget of the broker's rate divided by the shard count: the
//! partitions are spread over the shards, and no shard waits for another. A budget is a
//! token bucket holding at most one second of the rate; a throttled read is allowed
//! while it holds tokens and may overdraw it by one read (Kafka also lets the fetch that
//! crosses the limit through and throttles the next ones).

use std::cell::Cell;
use std::time::Instant;

use crate::metadata::MetadataImage;

/// `leader.replication.throttled.rate`.
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
/// `follower.replication.throttled.rate`.
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// `leader.replication.throttled.replicas`.
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
/// `follower.replication.throttled.replicas`.
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// One shard's budget for one direction (leader or follower).
#[derive(Debug)]
pub struct Quota {
    /// Bytes that may still be read, as of `at` (negative: overdrawn).
    tokens: Cell<f64>,
    at: Cell<Option<Instant>>,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            tokens: Cell::new(0.0),
            at: Cell::new(None),
        }
    }
}

impl Quota {
    /// Refills for the time since the last look, at `rate` bytes/s, up to one second's
    /// worth.
    fn refill(&self, rate: u64, now: Instant) {
        let rate = rate as f64;
        let tokens = match self.at.get() {
            None => rate,
            Some(at) => {
                let elapsed = now.saturating_duration_since(at).as_secs_f64();
                (self.tokens.get() + elapsed * rate).min(rate)
            }
        };
        self.tokens.set(tokens);
        self.at.set(Some(now));
    }

    /// Whether a throttled read may go now at `rate` bytes/s.
    pub fn allows(&self, rate: u64, now: Instant) -> bool {
        self.refill(rate, now);
        self.tokens.get() > 0.0
    }

    /// `bytes` of a throttled read went.
    pub fn record(&self, bytes: usize, rate: u64, now: Instant) {
        self.refill(rate, now);
        self.tokens.set(self.tokens.get() - bytes as f64);
    }
}

/// Which end of replication a throttle limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// What this broker, leading, sends a follower.
    Leader,
    /// What this broker, following, fetches.
    Follower,
}

/// This shard's throttle rate for `replica`'s copy of `partition` on `side`: the topic
/// names the partition on this broker in its `*.replication.throttled.replicas`, a rate
/// is set, and `replica` (the fetching follower; on the follower side this broker) is
/// not in the ISR. `None`: not throttled.
pub fn rate(
    image: &MetadataImage,
    partition: &crate::partition::Partition,
    replica: i32,
    side: Side,
    shards: usize,
) -> Option<u64> {
    let (replicas_key, rate_key) = match side {
        Side::Leader => (LEADER_REPLICAS, LEADER_RATE),
        Side::Follower => (FOLLOWER_REPLICAS, FOLLOWER_RATE),
    };
    let tp = partition.topic_partition();
    let topic = image.topic(&tp.topic)?;
    let listed = names(topic.configs.get(replicas_key), tp.partition, image.node_id);
    if !listed || partition.leadership().isr.contains(&replica) {
        return None;
    }
    shard_rate(image, rate_key, shards)
}

/// This shard's share of the broker's `key` rate (`None`: not throttled). The broker's
/// own dynamic config wins over the cluster default, as in Kafka.
pub fn shard_rate(image: &MetadataImage, key: &str, shards: usize) -> Option<u64> {
    let own = image.node_id.to_string();
    let value = image
        .broker_configs
        .get(&own)
        .and_then(|c| c.get(key))
        .or_else(|| image.broker_configs.get("").and_then(|c| c.get(key)))?;
    let rate = value.trim().parse::<i64>().ok().filter(|r| *r > 0)?;
    if rate == i64::MAX {
        return None;
    }
    Some((rate as u64 / shards.max(1) as u64).max(1))
}

/// Whether a topic's `*.replication.throttled.replicas` list names `partition` on
/// `broker` (`*`: every replica).
pub fn names(list: Option<&String>, partition: i32, broker: i32) -> bool {
    let Some(list) = list else {
        return false;
    };
    list.split(',').map(str::trim).any(|item| {
        item == "*"
            || item.split_once(':').is_some_and(|(p, b)| {
                p.trim().parse::<i32>() == Ok(partition) && b.trim().parse::<i32>() == Ok(broker)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_budget_lets_one_second_of_the_rate_through_then_refills_at_the_rate() {
        let q = Quota::default();
        let t0 = Instant::now();
        assert!(q.allows(1000, t0), "a fresh budget holds one second");
        q.record(1500, 1000, t0);
        assert!(!q.allows(1000, t0), "overdrawn by the read that crossed it");
        assert!(!q.allows(1000, t0 + Duration::from_millis(400)));
        assert!(q.allows(1000, t0 + Duration::from_millis(600)), "refilled");
        // Idle for long: still at most one second's worth.
        let later = t0 + Duration::from_secs(60);
        q.record(1000, 1000, later);
        assert!(!q.allows(1000, later));
    }

    #[test]
    fn replica_lists_name_partitions_on_brokers_or_everything() {
        let list = |s: &str| Some(s.to_string());
        assert!(names(list("0:1, 2:3").as_ref(), 2, 3));
        assert!(!names(list("0:1,2:3").as_ref(), 2, 1));
        assert!(names(list("*").as_ref(), 7, 9));
        assert!(!names(None, 0, 0));
        assert!(!names(list("").as_ref(), 0, 0));
    }

    #[test]
    fn the_brokers_own_rate_wins_over_the_default_and_is_split_over_shards() {
        let mut image =
            MetadataImage::empty("c".into(), 2, "127.0.0.1:9092".parse().expect("addr"));
        assert_eq!(shard_rate(&image, LEADER_RATE, 2), None);
        image
            .broker_configs
            .entry(String::new())
            .or_default()
            .insert(LEADER_RATE.into(), "1000".into());
        assert_eq!(shard_rate(&image, LEADER_RATE, 2), Some(500));
        image
            .broker_configs
            .entry("2".into())
            .or_default()
            .insert(LEADER_RATE.into(), "4000".into());
        assert_eq!(shard_rate(&image, LEADER_RATE, 2), Some(2000));
        assert_eq!(shard_rate(&image, FOLLOWER_RATE, 2), None);
    }
}
