//! Newtypes for the Kafka nouns that would otherwise be bare integers side by side.

use std::fmt;

macro_rules! newtype {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                Self(v)
            }
        }
    };
}

newtype!(
    /// A position in a partition log, counted in records.
    Offset(i64)
);
newtype!(
    /// The partition leader epoch stamped into every record batch header.
    LeaderEpoch(i32)
);
newtype!(
    /// An idempotent or transactional producer's id (-1 for none).
    ProducerId(i64)
);
newtype!(
    /// The epoch of a producer id; bumps fence older instances.
    ProducerEpoch(i16)
);

impl Offset {
    /// Kafka's "no offset" sentinel.
    pub const UNDEFINED: Offset = Offset(-1);
}

impl LeaderEpoch {
    /// Kafka's UNDEFINED_EPOCH (-1): no epoch known.
    pub const UNDEFINED: LeaderEpoch = LeaderEpoch(-1);
}

impl ProducerId {
    /// `-1`: the batch was written by a producer without idempotence.
    pub const NONE: ProducerId = ProducerId(-1);
}

impl ProducerEpoch {
    /// `-1`: no producer epoch.
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);
}

/// A topic name and a partition index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }

    /// Kafka's directory name for the partition: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a `<topic>-<partition>` directory name (topic names may contain `-`).
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() {
            return None;
        }
        let partition: i32 = partition.parse().ok()?;
        (partition >= 0).then(|| Self::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_name_round_trips_topics_with_dashes() {
        let tp = TopicPartition::new("orders-eu-1", 12);
        assert_eq!(tp.dir_name(), "orders-eu-1-12");
        assert_eq!(TopicPartition::from_dir_name("orders-eu-1-12"), Some(tp));
        assert_eq!(TopicPartition::from_dir_name("nodash"), None);
        assert_eq!(TopicPartition::from_dir_name("-3"), None);
        assert_eq!(TopicPartition::from_dir_name("t-x"), None);
    }
}
