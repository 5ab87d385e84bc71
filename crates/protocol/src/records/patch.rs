//! In-place patching of the header fields a leader sets on append.
//!
//! `baseOffset` and `partitionLeaderEpoch` sit before the CRC-covered range,
//! so the log can stamp them without touching the CRC; LogAppendTime changes
//! covered fields and so recomputes it.

use super::batch::{frame, TimestampType};
use super::{crc32c, offsets, RecordError, TIMESTAMP_TYPE_BIT};

/// A mutable view over exactly one batch, e.g. `&mut bytes_mut[..]`.
#[derive(Debug)]
pub struct RecordBatchMut<'a> {
    /// Invariant: framed like `RecordBatch::bytes`.
    bytes: &'a mut [u8],
}

impl<'a> RecordBatchMut<'a> {
    /// Views `bytes`, which must hold exactly one batch (framing checked as in
    /// `RecordBatch::new`; the CRC is not, validate before patching).
    pub fn new(bytes: &'a mut [u8]) -> Result<Self, RecordError> {
        let batch_bytes = frame(bytes)?;
        if batch_bytes != bytes.len() {
            return Err(RecordError::BatchSizeMismatch { batch_bytes, buffer_bytes: bytes.len() });
        }
        Ok(RecordBatchMut { bytes })
    }

    /// Sets `baseOffset`; the CRC does not cover it.
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.put(offsets::BASE_OFFSET, &base_offset.to_be_bytes());
    }

    /// Sets `partitionLeaderEpoch`; the CRC does not cover it.
    pub fn set_partition_leader_epoch(&mut self, partition_leader_epoch: i32) {
        self.put(offsets::PARTITION_LEADER_EPOCH, &partition_leader_epoch.to_be_bytes());
    }

    /// Marks the batch LogAppendTime with `max_timestamp_ms` as every record's
    /// timestamp, as a leader does for topics with
    /// `message.timestamp.type=LogAppendTime`, and recomputes the CRC. Like
    /// Kafka, leaves the bytes alone when they already say so.
    pub fn set_log_append_time(&mut self, max_timestamp_ms: i64) {
        let attributes = i16::from_be_bytes(super::be_bytes(self.bytes, offsets::ATTRIBUTES));
        let max_timestamp = i64::from_be_bytes(super::be_bytes(self.bytes, offsets::MAX_TIMESTAMP));
        if attributes & TIMESTAMP_TYPE_BIT != 0 && max_timestamp == max_timestamp_ms {
            return;
        }
        self.put(offsets::ATTRIBUTES, &(attributes | TIMESTAMP_TYPE_BIT).to_be_bytes());
        self.put(offsets::MAX_TIMESTAMP, &max_timestamp_ms.to_be_bytes());
        self.update_crc();
    }

    /// The timestamp type the attributes now say.
    pub fn timestamp_type(&self) -> TimestampType {
        let attributes = i16::from_be_bytes(super::be_bytes(self.bytes, offsets::ATTRIBUTES));
        if attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Recomputes and stores the CRC-32C after a change to covered bytes.
    pub fn update_crc(&mut self) {
        let crc = crc32c(&self.bytes[offsets::ATTRIBUTES..]);
        self.put(offsets::CRC, &crc.to_be_bytes());
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.bytes
    }

    fn put(&mut self, at: usize, value: &[u8]) {
        self.bytes[at..at + value.len()].copy_from_slice(value);
    }
}
