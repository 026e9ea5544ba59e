//! Per-partition log settings, named after Kafka's topic configs.

/// Log settings. Defaults are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment when an append would grow it past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes between two offset-index entries.
    pub index_interval_bytes: u32,
    /// `retention.bytes` (-1: unlimited): delete whole old segments beyond this size.
    pub retention_bytes: i64,
    /// `retention.ms` (-1: unlimited): delete whole segments whose newest record is older.
    pub retention_ms: i64,
    /// `flush.messages`: fsync after this many records (u64::MAX: leave it to the OS).
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the last flush is older than this (u64::MAX: never by time).
    pub flush_ms: u64,
    /// `producer.id.expiration.ms`: forget idle producer ids after this long.
    pub producer_id_expiration_ms: i64,
    /// `max.message.bytes`: the largest record batch accepted from a client.
    pub max_message_bytes: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            retention_bytes: -1,
            retention_ms: 7 * 24 * 3600 * 1000,
            flush_messages: u64::MAX,
            flush_ms: u64::MAX,
            producer_id_expiration_ms: 24 * 3600 * 1000,
            max_message_bytes: 1_048_588,
        }
    }
}
