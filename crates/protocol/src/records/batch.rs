//! The zero-copy batch view, its framing and validation, and the splitter for
//! concatenated batches.

use std::fmt;
use std::iter::FusedIterator;

use bytes::Bytes;

use super::record::{DecodedRecords, Records};
use super::{
    be_bytes, crc32c, offsets, RecordError, BATCH_HEADER_BYTES, COMPRESSION_MASK, CONTROL_BIT, DELETE_HORIZON_BIT,
    LOG_OVERHEAD_BYTES, MAGIC_V2, MIN_BATCH_LENGTH, MIN_RECORD_BYTES, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};
use crate::compression::{self, Compression};

/// Which clock a batch's timestamps come from (attributes bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Set by the producer; each record carries its own.
    #[default]
    CreateTime,
    /// Set by the leader on append; every record's timestamp is `maxTimestamp`.
    LogAppendTime,
}

/// Checks the framing of the batch at the start of `buf` (enough bytes for the
/// header and for `batchLength`, magic 2) and returns the batch's size in bytes.
///
/// Magic is checked before the length so a v0/v1 message set, whose layout
/// puts its magic at the same offset 16 but whose sizes differ, is reported as
/// [`RecordError::UnsupportedMagic`] rather than as a bad length.
pub(crate) fn frame(buf: &[u8]) -> Result<usize, RecordError> {
    const MAGIC_END: usize = offsets::MAGIC + 1;
    if buf.len() < MAGIC_END {
        return Err(RecordError::Truncated { needed: MAGIC_END, remaining: buf.len() });
    }
    let magic = buf[offsets::MAGIC] as i8;
    match magic {
        MAGIC_V2 => {}
        0 | 1 => return Err(RecordError::UnsupportedMagic(magic)),
        _ => return Err(RecordError::InvalidMagic(magic)),
    }
    let batch_length = i32::from_be_bytes(be_bytes(buf, offsets::BATCH_LENGTH));
    if batch_length < MIN_BATCH_LENGTH {
        return Err(RecordError::InvalidBatchLength(batch_length));
    }
    // batch_length is positive, so the sum fits even a 32-bit usize.
    let batch_bytes = LOG_OVERHEAD_BYTES + batch_length as usize;
    if buf.len() < batch_bytes {
        return Err(RecordError::Truncated { needed: batch_bytes, remaining: buf.len() });
    }
    Ok(batch_bytes)
}

/// A magic v2 record batch: a view over exactly one batch's bytes.
///
/// Construction checks the framing only (header present, `batchLength` agrees
/// with the buffer, magic 2), which is cheap; [`RecordBatch::validate`] checks
/// the CRC and the header fields. Accessors read the header in place.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordBatch {
    /// Invariant: at least `BATCH_HEADER_BYTES` long, magic 2, and exactly
    /// `LOG_OVERHEAD_BYTES + batchLength` bytes.
    bytes: Bytes,
}

impl RecordBatch {
    /// Views `bytes`, which must hold exactly one batch.
    pub fn new(bytes: Bytes) -> Result<Self, RecordError> {
        let batch_bytes = frame(&bytes)?;
        if batch_bytes != bytes.len() {
            return Err(RecordError::BatchSizeMismatch { batch_bytes, buffer_bytes: bytes.len() });
        }
        Ok(RecordBatch { bytes })
    }

    /// Checks what a reader of the batch relies on: the CRC-32C, a known codec,
    /// and a record count that is non-negative and, for an uncompressed batch,
    /// fits the records section. Producer rules (sequence numbers, offset
    /// ranges, control batches from clients) are the broker's to check.
    pub fn validate(&self) -> Result<(), RecordError> {
        let stored = self.crc();
        let computed = self.compute_crc();
        if stored != computed {
            return Err(RecordError::CrcMismatch { stored, computed });
        }
        let compression = self.compression()?;
        let count = self.record_count();
        let records_bytes = self.bytes.len() - BATCH_HEADER_BYTES;
        let fits = match compression {
            Compression::None => count as usize <= records_bytes / MIN_RECORD_BYTES,
            _ => true,
        };
        if count < 0 || !fits {
            return Err(RecordError::InvalidRecordCount { count, records_bytes });
        }
        Ok(())
    }

    /// CRC-32C of the bytes from `attributes` to the end, in one call.
    #[inline]
    pub fn compute_crc(&self) -> u32 {
        crc32c(&self.bytes[offsets::ATTRIBUTES..])
    }

    /// The records section ready to iterate: decompressed once, into one
    /// buffer of at most `max_decompressed_bytes`, when the batch is
    /// compressed, and a view of the batch otherwise. Call
    /// [`RecordBatch::validate`] first for untrusted input.
    pub fn decode_records(&self, max_decompressed_bytes: usize) -> Result<DecodedRecords, RecordError> {
        let count = self.record_count();
        let stored = self.records_section();
        // As Kafka does, an empty batch is not decompressed at all.
        let data = match self.compression()? {
            _ if count == 0 => Bytes::new(),
            Compression::None => stored,
            codec => Bytes::from(compression::decompress(codec, &stored, max_decompressed_bytes)?),
        };
        DecodedRecords::new(data, count, self.base_offset(), self.base_timestamp(), self.log_append_time_ms())
    }

    /// The broker's append time every record carries, when the batch has
    /// LogAppendTime timestamps (Kafka stores it as the max timestamp).
    fn log_append_time_ms(&self) -> Option<i64> {
        match self.timestamp_type() {
            TimestampType::LogAppendTime => Some(self.max_timestamp()),
            TimestampType::CreateTime => None,
        }
    }

    /// [`RecordBatch::decode_records`] decompressing into `scratch`, a
    /// buffer the caller keeps across batches and gets back with
    /// [`DecodedRecords::recycle`]: a reader of every batch (the leader's
    /// validation) then neither allocates nor faults in fresh pages per
    /// batch. An uncompressed batch leaves `scratch` alone.
    pub fn decode_records_reusing(
        &self,
        max_decompressed_bytes: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<DecodedRecords, RecordError> {
        let count = self.record_count();
        let codec = self.compression()?;
        if count == 0 || codec == Compression::None {
            return self.decode_records(max_decompressed_bytes);
        }
        scratch.clear();
        compression::decompress_into(codec, &self.bytes[offsets::RECORDS..], max_decompressed_bytes, scratch)?;
        let data = Bytes::from(std::mem::take(scratch));
        DecodedRecords::new(data, count, self.base_offset(), self.base_timestamp(), self.log_append_time_ms())
    }

    /// Owned records (`Bytes` keys and values); see [`RecordBatch::decode_records`]
    /// for the borrowed view, which costs less per record.
    pub fn records(&self, max_decompressed_bytes: usize) -> Result<Records, RecordError> {
        Ok(self.decode_records(max_decompressed_bytes)?.into_iter())
    }

    /// The records section as stored (compressed when the batch is).
    pub fn records_section(&self) -> Bytes {
        self.bytes.slice(offsets::RECORDS..)
    }

    /// The whole batch.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The batch's size on the wire and on disk.
    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }

    #[inline]
    fn i16_at(&self, at: usize) -> i16 {
        i16::from_be_bytes(be_bytes(&self.bytes, at))
    }

    #[inline]
    fn i32_at(&self, at: usize) -> i32 {
        i32::from_be_bytes(be_bytes(&self.bytes, at))
    }

    #[inline]
    fn i64_at(&self, at: usize) -> i64 {
        i64::from_be_bytes(be_bytes(&self.bytes, at))
    }

    pub fn base_offset(&self) -> i64 {
        self.i64_at(offsets::BASE_OFFSET)
    }

    pub fn batch_length(&self) -> i32 {
        self.i32_at(offsets::BATCH_LENGTH)
    }

    pub fn partition_leader_epoch(&self) -> i32 {
        self.i32_at(offsets::PARTITION_LEADER_EPOCH)
    }

    pub fn magic(&self) -> i8 {
        self.bytes[offsets::MAGIC] as i8
    }

    /// The CRC as stored; compare with [`RecordBatch::compute_crc`].
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes(be_bytes(&self.bytes, offsets::CRC))
    }

    pub fn attributes(&self) -> i16 {
        self.i16_at(offsets::ATTRIBUTES)
    }

    /// The codec (attributes bits 0-2); ids 5-7 are an error.
    pub fn compression(&self) -> Result<Compression, RecordError> {
        Ok(Compression::from_id((self.attributes() & COMPRESSION_MASK) as u8)?)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }

    /// Set by compaction: `baseTimestamp` then holds the delete horizon.
    pub fn has_delete_horizon_ms(&self) -> bool {
        self.attributes() & DELETE_HORIZON_BIT != 0
    }

    /// The delete horizon compaction set, if any.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.has_delete_horizon_ms().then(|| self.base_timestamp())
    }

    pub fn last_offset_delta(&self) -> i32 {
        self.i32_at(offsets::LAST_OFFSET_DELTA)
    }

    /// `baseOffset + lastOffsetDelta`; wraps rather than panics on corrupt input.
    pub fn last_offset(&self) -> i64 {
        self.base_offset().wrapping_add(i64::from(self.last_offset_delta()))
    }

    /// The offset after this batch: where the next batch starts.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(offsets::BASE_TIMESTAMP)
    }

    pub fn max_timestamp(&self) -> i64 {
        self.i64_at(offsets::MAX_TIMESTAMP)
    }

    pub fn producer_id(&self) -> i64 {
        self.i64_at(offsets::PRODUCER_ID)
    }

    pub fn producer_epoch(&self) -> i16 {
        self.i16_at(offsets::PRODUCER_EPOCH)
    }

    pub fn base_sequence(&self) -> i32 {
        self.i32_at(offsets::BASE_SEQUENCE)
    }

    pub fn record_count(&self) -> i32 {
        self.i32_at(offsets::RECORD_COUNT)
    }
}

impl fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset())
            .field("batch_length", &self.batch_length())
            .field("partition_leader_epoch", &self.partition_leader_epoch())
            .field("crc", &format_args!("{:#010x}", self.crc()))
            .field("attributes", &format_args!("{:#06x}", self.attributes()))
            .field("last_offset_delta", &self.last_offset_delta())
            .field("base_timestamp", &self.base_timestamp())
            .field("max_timestamp", &self.max_timestamp())
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .field("record_count", &self.record_count())
            .finish()
    }
}

/// Splits a buffer of concatenated batches (a Produce request's `records`, a
/// fetch response, a log segment) into [`RecordBatch`] views, front to back.
///
/// Each batch is framed on its own, so a corrupt batch never changes what was
/// yielded before it. The first framing error is yielded and ends the
/// iteration (past it there is no way to find the next batch). A
/// [`RecordError::Truncated`] last item is a partial batch: normal at the end
/// of a fetch response, a torn write at the end of a log segment.
#[derive(Debug, Clone)]
pub struct RecordBatches {
    rest: Bytes,
    failed: bool,
}

impl RecordBatches {
    pub fn new(bytes: Bytes) -> Self {
        RecordBatches { rest: bytes, failed: false }
    }

    /// The bytes not yet yielded (after an error: from the failing batch on).
    pub fn remaining(&self) -> &Bytes {
        &self.rest
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        match frame(&self.rest) {
            Ok(batch_bytes) => Some(Ok(RecordBatch { bytes: self.rest.split_to(batch_bytes) })),
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }
}

impl FusedIterator for RecordBatches {}

/// The whole batches at the front of `records`, without a partial batch at
/// the end: a leader answers a fetch with up to MaxBytes of its segment and a
/// bounded read of a log stops the same way, inside a batch that is read
/// again next time (Kafka's followers drop that tail too). Any other framing
/// error keeps `records` whole, for the log that appends it to refuse.
pub fn whole_batches(records: Bytes) -> Bytes {
    let mut whole = 0;
    for batch in RecordBatches::new(records.clone()) {
        match batch {
            Ok(batch) => whole += batch.as_bytes().len(),
            Err(RecordError::Truncated { .. }) => break,
            Err(_) => return records,
        }
    }
    debug_assert!(whole <= records.len());
    records.slice(..whole)
}
