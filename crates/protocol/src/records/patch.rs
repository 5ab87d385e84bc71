//! In-place patching of the header fields a leader or the cleaner sets.
//!
//! `baseOffset` and `partitionLeaderEpoch` sit before the CRC-covered range,
//! so the log can stamp them without touching the CRC; every other setter
//! changes covered bytes and so recomputes it: no setter leaves a batch whose
//! CRC is stale.
//!
//! Two shapes of the same fields: [`RecordBatchMut`] over a whole batch in
//! one buffer, and [`RecordBatchHeader`], a copy of the 61-byte header alone,
//! for the append path, which writes a patched header in front of records it
//! never copies, and for readers of a log file, which look at headers without
//! reading records.

use std::fmt;

use super::batch::{frame, RecordBatch, TimestampType};
use super::{be_bytes, crc32c, crc32c_append, offsets, RecordError, BATCH_HEADER_BYTES, MAGIC_V2, TIMESTAMP_TYPE_BIT};

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
        put(self.bytes, offsets::BASE_OFFSET, &base_offset.to_be_bytes());
    }

    /// Sets `partitionLeaderEpoch`; the CRC does not cover it.
    pub fn set_partition_leader_epoch(&mut self, partition_leader_epoch: i32) {
        put(self.bytes, offsets::PARTITION_LEADER_EPOCH, &partition_leader_epoch.to_be_bytes());
    }

    /// Marks the batch LogAppendTime with `max_timestamp_ms` as every record's
    /// timestamp, as a leader does for topics with
    /// `message.timestamp.type=LogAppendTime`, and recomputes the CRC. Like
    /// Kafka, leaves the bytes alone when they already say so.
    pub fn set_log_append_time(&mut self, max_timestamp_ms: i64) {
        if stamp_log_append_time(self.bytes, max_timestamp_ms) {
            self.update_crc();
        }
    }

    /// Sets `lastOffsetDelta` and recomputes the CRC. The cleaner keeps a
    /// filtered batch's original delta, so the producer's last sequence (and
    /// the offsets a follower expects) survive records it removed.
    pub fn set_last_offset_delta(&mut self, last_offset_delta: i32) {
        put(self.bytes, offsets::LAST_OFFSET_DELTA, &last_offset_delta.to_be_bytes());
        self.update_crc();
    }

    /// Sets `maxTimestamp` and recomputes the CRC (an emptied batch keeps the
    /// time of the records it had, which retention and time lookups read).
    pub fn set_max_timestamp(&mut self, max_timestamp_ms: i64) {
        put(self.bytes, offsets::MAX_TIMESTAMP, &max_timestamp_ms.to_be_bytes());
        self.update_crc();
    }

    /// The timestamp type the attributes now say.
    pub fn timestamp_type(&self) -> TimestampType {
        timestamp_type_of(self.bytes)
    }

    /// Recomputes and stores the CRC-32C after a change to covered bytes.
    pub fn update_crc(&mut self) {
        let crc = crc32c(&self.bytes[offsets::ATTRIBUTES..]);
        put(self.bytes, offsets::CRC, &crc.to_be_bytes());
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.bytes
    }
}

/// A copy of one batch's fixed header. Any 61 bytes make one (a reader of a
/// file checks [`RecordBatchHeader::batch_length`] and
/// [`RecordBatchHeader::magic`] before trusting the rest); no accessor can
/// panic, whatever the bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchHeader {
    bytes: [u8; BATCH_HEADER_BYTES],
}

impl RecordBatchHeader {
    pub fn from_bytes(bytes: [u8; BATCH_HEADER_BYTES]) -> Self {
        RecordBatchHeader { bytes }
    }

    /// The header of `batch`, copied.
    pub fn of(batch: &RecordBatch) -> Self {
        let mut bytes = [0u8; BATCH_HEADER_BYTES];
        bytes.copy_from_slice(&batch.as_bytes()[..BATCH_HEADER_BYTES]);
        RecordBatchHeader { bytes }
    }

    pub fn as_bytes(&self) -> &[u8; BATCH_HEADER_BYTES] {
        &self.bytes
    }

    pub fn base_offset(&self) -> i64 {
        i64::from_be_bytes(be_bytes(&self.bytes, offsets::BASE_OFFSET))
    }

    pub fn batch_length(&self) -> i32 {
        i32::from_be_bytes(be_bytes(&self.bytes, offsets::BATCH_LENGTH))
    }

    pub fn partition_leader_epoch(&self) -> i32 {
        i32::from_be_bytes(be_bytes(&self.bytes, offsets::PARTITION_LEADER_EPOCH))
    }

    pub fn magic(&self) -> i8 {
        self.bytes[offsets::MAGIC] as i8
    }

    /// Magic 2, the only format this header layout describes.
    pub fn is_v2(&self) -> bool {
        self.magic() == MAGIC_V2
    }

    pub fn last_offset_delta(&self) -> i32 {
        i32::from_be_bytes(be_bytes(&self.bytes, offsets::LAST_OFFSET_DELTA))
    }

    pub fn max_timestamp(&self) -> i64 {
        i64::from_be_bytes(be_bytes(&self.bytes, offsets::MAX_TIMESTAMP))
    }

    pub fn timestamp_type(&self) -> TimestampType {
        timestamp_type_of(&self.bytes)
    }

    /// Sets `baseOffset`; the CRC does not cover it.
    pub fn set_base_offset(&mut self, base_offset: i64) {
        put(&mut self.bytes, offsets::BASE_OFFSET, &base_offset.to_be_bytes());
    }

    /// Sets `partitionLeaderEpoch`; the CRC does not cover it.
    pub fn set_partition_leader_epoch(&mut self, partition_leader_epoch: i32) {
        put(&mut self.bytes, offsets::PARTITION_LEADER_EPOCH, &partition_leader_epoch.to_be_bytes());
    }

    /// [`RecordBatchMut::set_log_append_time`] for a header whose `records`
    /// (the batch's bytes after the header, as stored) live elsewhere: the
    /// CRC is computed over both without joining them.
    pub fn set_log_append_time(&mut self, max_timestamp_ms: i64, records: &[u8]) {
        if stamp_log_append_time(&mut self.bytes, max_timestamp_ms) {
            let crc = crc32c_append(crc32c(&self.bytes[offsets::ATTRIBUTES..]), records);
            put(&mut self.bytes, offsets::CRC, &crc.to_be_bytes());
        }
    }

    /// Marks the header CreateTime with `max_timestamp_ms` (the latest of its
    /// records' timestamps, as a leader computes it) for `records` that live
    /// elsewhere; the CRC is recomputed only when a byte changed.
    pub fn set_create_time(&mut self, max_timestamp_ms: i64, records: &[u8]) {
        let attributes = i16::from_be_bytes(be_bytes(&self.bytes, offsets::ATTRIBUTES));
        if attributes & TIMESTAMP_TYPE_BIT == 0 && self.max_timestamp() == max_timestamp_ms {
            return;
        }
        put(&mut self.bytes, offsets::ATTRIBUTES, &(attributes & !TIMESTAMP_TYPE_BIT).to_be_bytes());
        put(&mut self.bytes, offsets::MAX_TIMESTAMP, &max_timestamp_ms.to_be_bytes());
        let crc = crc32c_append(crc32c(&self.bytes[offsets::ATTRIBUTES..]), records);
        put(&mut self.bytes, offsets::CRC, &crc.to_be_bytes());
    }
}

impl fmt::Debug for RecordBatchHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordBatchHeader")
            .field("base_offset", &self.base_offset())
            .field("batch_length", &self.batch_length())
            .field("partition_leader_epoch", &self.partition_leader_epoch())
            .field("magic", &self.magic())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("max_timestamp", &self.max_timestamp())
            .finish()
    }
}

/// Sets the LogAppendTime bit and `maxTimestamp` in `header` (a batch or its
/// header alone); false when both already said so, and the CRC stands.
fn stamp_log_append_time(header: &mut [u8], max_timestamp_ms: i64) -> bool {
    let attributes = i16::from_be_bytes(be_bytes(header, offsets::ATTRIBUTES));
    let max_timestamp = i64::from_be_bytes(be_bytes(header, offsets::MAX_TIMESTAMP));
    if attributes & TIMESTAMP_TYPE_BIT != 0 && max_timestamp == max_timestamp_ms {
        return false;
    }
    put(header, offsets::ATTRIBUTES, &(attributes | TIMESTAMP_TYPE_BIT).to_be_bytes());
    put(header, offsets::MAX_TIMESTAMP, &max_timestamp_ms.to_be_bytes());
    true
}

fn timestamp_type_of(header: &[u8]) -> TimestampType {
    let attributes = i16::from_be_bytes(be_bytes(header, offsets::ATTRIBUTES));
    if attributes & TIMESTAMP_TYPE_BIT != 0 {
        TimestampType::LogAppendTime
    } else {
        TimestampType::CreateTime
    }
}

fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::compression::Compression;
    use crate::records::{NewRecord, RecordBatchBuilder};

    fn batch(compression: Compression, timestamps: &[i64]) -> RecordBatch {
        let mut builder = RecordBatchBuilder::new(compression).with_producer(4, 1, 10);
        for &timestamp_ms in timestamps {
            builder.append(&NewRecord { timestamp_ms, key: Some(b"k"), value: Some(b"v"), headers: &[] }).unwrap();
        }
        builder.build().unwrap()
    }

    /// The header patched apart from its records, joined again.
    fn joined(header: &RecordBatchHeader, batch: &RecordBatch) -> RecordBatch {
        let mut bytes = BytesMut::from(&header.as_bytes()[..]);
        bytes.extend_from_slice(&batch.as_bytes()[BATCH_HEADER_BYTES..]);
        RecordBatch::new(bytes.freeze()).unwrap()
    }

    #[test]
    fn a_patched_header_matches_the_whole_batch_patched() {
        for compression in [Compression::None, Compression::Zstd] {
            let original = batch(compression, &[1_000, 1_005]);
            let mut header = RecordBatchHeader::of(&original);
            header.set_base_offset(77);
            header.set_partition_leader_epoch(3);
            header.set_log_append_time(5_000, &original.as_bytes()[BATCH_HEADER_BYTES..]);
            let mut bytes = BytesMut::from(&original.as_bytes()[..]);
            let mut whole = RecordBatchMut::new(&mut bytes).unwrap();
            whole.set_base_offset(77);
            whole.set_partition_leader_epoch(3);
            whole.set_log_append_time(5_000);
            let patched = joined(&header, &original);
            patched.validate().unwrap();
            assert_eq!(patched.as_bytes(), &bytes.freeze());
            assert_eq!((patched.base_offset(), patched.partition_leader_epoch()), (77, 3));
            assert_eq!((header.max_timestamp(), header.timestamp_type()), (5_000, TimestampType::LogAppendTime));
        }
    }

    #[test]
    fn a_header_set_to_create_time_keeps_a_valid_crc() {
        let original = batch(Compression::Lz4, &[1_000, 1_005]);
        let records = &original.as_bytes()[BATCH_HEADER_BYTES..];
        let mut header = RecordBatchHeader::of(&original);
        header.set_create_time(1_005, records);
        assert_eq!(header, RecordBatchHeader::of(&original), "nothing to change");
        header.set_log_append_time(9_000, records);
        header.set_create_time(1_003, records);
        let patched = joined(&header, &original);
        patched.validate().unwrap();
        assert_eq!((patched.max_timestamp(), patched.timestamp_type()), (1_003, TimestampType::CreateTime));
    }

    #[test]
    fn header_offsets_and_epoch_leave_the_crc_alone() {
        let original = batch(Compression::None, &[1]);
        let mut header = RecordBatchHeader::of(&original);
        header.set_base_offset(i64::MAX - 1);
        header.set_partition_leader_epoch(-1);
        let patched = joined(&header, &original);
        patched.validate().unwrap();
        assert_eq!(patched.crc(), original.crc());
        assert_eq!(header.base_offset(), i64::MAX - 1);
        assert_eq!(header.batch_length(), original.batch_length());
        assert_eq!(header.last_offset_delta(), 0);
        assert!(header.is_v2());
    }

    #[test]
    fn log_append_time_already_set_keeps_the_bytes() {
        let original = batch(Compression::None, &[1, 2]);
        let mut header = RecordBatchHeader::of(&original);
        header.set_log_append_time(9, &original.as_bytes()[BATCH_HEADER_BYTES..]);
        let once = *header.as_bytes();
        // A wrong `records` would show in the CRC if it were recomputed.
        header.set_log_append_time(9, b"not the records");
        assert_eq!(header.as_bytes(), &once);
    }

    #[test]
    fn last_offset_delta_and_max_timestamp_keep_the_crc_valid() {
        let original = batch(Compression::Lz4, &[10, 30]);
        let mut bytes = BytesMut::from(&original.as_bytes()[..]);
        let mut patch = RecordBatchMut::new(&mut bytes).unwrap();
        patch.set_last_offset_delta(6);
        patch.set_max_timestamp(55);
        let patched = RecordBatch::new(bytes.freeze()).unwrap();
        patched.validate().unwrap();
        assert_eq!((patched.last_offset_delta(), patched.max_timestamp()), (6, 55));
        assert_eq!(patched.base_timestamp(), original.base_timestamp());
        assert_eq!(patched.record_count(), 2);
    }

    #[test]
    fn any_bytes_make_a_header_that_reads_without_panicking() {
        let header = RecordBatchHeader::from_bytes([0xff; BATCH_HEADER_BYTES]);
        assert_eq!((header.base_offset(), header.batch_length(), header.magic()), (-1, -1, -1));
        assert!(!header.is_v2());
        assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
        assert!(format!("{header:?}").contains("batch_length: -1"));
    }
}
