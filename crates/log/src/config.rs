//! Per-log settings, named and defaulted as Kafka's topic configs are.

/// How record timestamps are kept (`message.timestamp.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampPolicy {
    /// Keep the producer's timestamps.
    #[default]
    CreateTime,
    /// Stamp each batch with the broker's clock on append.
    LogAppendTime,
}

/// `cleanup.policy`: what happens to old segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// `delete`: `retention.ms` / `retention.bytes` remove whole segments.
    #[default]
    Delete,
    /// `compact`: the cleaner keeps the latest record per key.
    Compact,
    /// `compact,delete`: both.
    CompactDelete,
}

impl CleanupPolicy {
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }

    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is this old.
    pub segment_ms: i64,
    /// `segment.index.bytes`: preallocated size of each index.
    pub segment_index_bytes: usize,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u64,
    /// `flush.messages`: fsync after this many records (Kafka leaves it off).
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the last flush is this old (off by default).
    pub flush_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older; -1 keeps all.
    pub retention_ms: i64,
    /// `retention.bytes`: delete the oldest segments past this size; -1 keeps all.
    pub retention_bytes: i64,
    /// `max.message.bytes`: the largest record batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub timestamp_policy: TimestampPolicy,
    /// `message.timestamp.before.max.ms`: on a CreateTime topic, how far
    /// behind the leader's clock a record's timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far ahead of it.
    pub timestamp_after_max_ms: i64,
    /// Cap on one batch's decompressed size when the log must look inside it
    /// (timestamp lookups); protects memory from a compressed bomb on disk.
    pub max_decompressed_batch_bytes: usize,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long tombstones outlive the segment they are in.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: clean only when this share of the
    /// cleanable bytes is past the cleaner checkpoint.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records newer than this are never compacted.
    pub min_compaction_lag_ms: i64,
    /// `log.cleaner.dedupe.buffer.size` (a broker key): the memory a cleaner
    /// pass's offset map may use; a pass that fills it cleans up to where it
    /// stopped and the next pass carries on.
    pub cleaner_dedupe_buffer_bytes: u64,
    /// `producer.id.expiration.ms` (a broker key): an idle producer's state
    /// is dropped this long after its last batch's timestamp.
    pub producer_id_expiration_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            max_message_bytes: 1024 * 1024 + 12,
            timestamp_policy: TimestampPolicy::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 60 * 60 * 1000,
            max_decompressed_batch_bytes: 64 * 1024 * 1024,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            cleaner_dedupe_buffer_bytes: 128 * 1024 * 1024,
            producer_id_expiration_ms: 24 * 60 * 60 * 1000,
        }
    }
}
