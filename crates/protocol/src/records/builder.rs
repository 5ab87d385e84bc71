//! Writes v2 batches: plain, idempotent, transactional, control, with any codec.
//! Used for tests, control markers and coordinator records, and to rebuild a
//! batch from (some of) its records: a topic's `compression.type` and the
//! cleaner both do, through [`RecordBatchBuilder::like`] and
//! [`RecordBatchBuilder::append_record`]. The produce path never rebuilds a
//! client's batch otherwise.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{RecordBatch, TimestampType};
use super::record::Record;
use super::{
    crc32c, offsets, RecordError, BATCH_HEADER_BYTES, CONTROL_BIT, DELETE_HORIZON_BIT, LOG_OVERHEAD_BYTES, MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
};
use crate::compression::{self, Compression};
use crate::primitives::{put_varint, put_varlong, varint_size, varlong_size};

/// A header to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewHeader<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// A record to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NewRecord<'a> {
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [NewHeader<'a>],
}

/// Builds one v2 batch. Set the batch-wide fields first (`with_*`), then
/// append records, then [`RecordBatchBuilder::build`].
///
/// Records are written uncompressed as they are appended, after room for the
/// header; `build` fills the header in place, or compresses the records into a
/// new buffer when a codec is set.
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    compression: Compression,
    timestamp_type: TimestampType,
    log_append_time_ms: i64,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    is_transactional: bool,
    is_control: bool,
    delete_horizon_ms: Option<i64>,
    /// The header's room, then the uncompressed records.
    buf: BytesMut,
    record_count: i32,
    last_offset: Option<i64>,
    /// The first record's timestamp (or the delete horizon): deltas are from it.
    base_timestamp: Option<i64>,
    max_timestamp: i64,
}

impl RecordBatchBuilder {
    pub fn new(compression: Compression) -> Self {
        let mut buf = BytesMut::with_capacity(BATCH_HEADER_BYTES + 256);
        buf.put_bytes(0, BATCH_HEADER_BYTES);
        RecordBatchBuilder {
            compression,
            timestamp_type: TimestampType::CreateTime,
            log_append_time_ms: NO_TIMESTAMP,
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            is_transactional: false,
            is_control: false,
            delete_horizon_ms: None,
            buf,
            record_count: 0,
            last_offset: None,
            base_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
        }
    }

    /// A builder for a rewrite of `batch` in `compression`, carrying over what
    /// a rewrite must keep: base offset, partition leader epoch, producer id,
    /// epoch and base sequence (the producer state reads them from the log),
    /// transactional and control flags. The timestamp type and delete horizon
    /// are the caller's to choose.
    pub fn like(batch: &RecordBatch, compression: Compression) -> Self {
        RecordBatchBuilder::new(compression)
            .with_base_offset(batch.base_offset())
            .with_partition_leader_epoch(batch.partition_leader_epoch())
            .with_producer(batch.producer_id(), batch.producer_epoch(), batch.base_sequence())
            .with_transactional(batch.is_transactional())
            .with_control(batch.is_control())
    }

    /// Offsets are written as deltas from the base, so it is fixed before the first record.
    pub fn with_base_offset(mut self, base_offset: i64) -> Self {
        assert!(self.record_count == 0, "set the base offset before appending records");
        self.base_offset = base_offset;
        self
    }

    pub fn with_partition_leader_epoch(mut self, partition_leader_epoch: i32) -> Self {
        self.partition_leader_epoch = partition_leader_epoch;
        self
    }

    /// An idempotent or transactional producer's id, epoch and first sequence.
    pub fn with_producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn with_transactional(mut self, is_transactional: bool) -> Self {
        self.is_transactional = is_transactional;
        self
    }

    /// A control batch (transaction markers); its records carry the marker.
    pub fn with_control(mut self, is_control: bool) -> Self {
        self.is_control = is_control;
        self
    }

    /// LogAppendTime with this `maxTimestamp`; records keep their own deltas.
    pub fn with_log_append_time(mut self, log_append_time_ms: i64) -> Self {
        self.timestamp_type = TimestampType::LogAppendTime;
        self.log_append_time_ms = log_append_time_ms;
        self
    }

    /// Compaction's delete horizon, stored as `baseTimestamp`; timestamp deltas
    /// are from it, so it is fixed before the first record.
    pub fn with_delete_horizon_ms(mut self, delete_horizon_ms: i64) -> Self {
        assert!(self.record_count == 0, "set the delete horizon before appending records");
        self.delete_horizon_ms = Some(delete_horizon_ms);
        self
    }

    /// Records appended so far.
    pub fn record_count(&self) -> i32 {
        self.record_count
    }

    /// Uncompressed size so far, header included.
    pub fn uncompressed_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Appends a record at the next offset (the base offset first) and returns that offset.
    pub fn append(&mut self, record: &NewRecord<'_>) -> Result<i64, RecordError> {
        let offset = match self.last_offset {
            Some(last) => last
                .checked_add(1)
                .ok_or(RecordError::OffsetDeltaOutOfRange { offset: last, base_offset: self.base_offset })?,
            None => self.base_offset,
        };
        self.append_with_offset(offset, record)?;
        Ok(offset)
    }

    /// Appends a record read from another batch at its own offset, keeping its
    /// timestamp, key, value and headers.
    pub fn append_record(&mut self, record: &Record) -> Result<(), RecordError> {
        let headers: Vec<_> = record.headers.iter().collect();
        let new_headers: Vec<NewHeader<'_>> =
            headers.iter().map(|h| NewHeader { key: &h.key, value: h.value.as_deref() }).collect();
        self.append_with_offset(
            record.offset,
            &NewRecord {
                timestamp_ms: record.timestamp,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers: &new_headers,
            },
        )
    }

    /// Appends a record at `offset`, which must exceed the previous one (gaps
    /// are allowed, as compaction leaves them).
    pub fn append_with_offset(&mut self, offset: i64, record: &NewRecord<'_>) -> Result<(), RecordError> {
        if let Some(previous) = self.last_offset {
            if offset <= previous {
                return Err(RecordError::OffsetNotIncreasing { offset, previous });
            }
        }
        let offset_delta = offset
            .checked_sub(self.base_offset)
            .and_then(|delta| i32::try_from(delta).ok())
            .filter(|&delta| delta >= 0)
            .ok_or(RecordError::OffsetDeltaOutOfRange { offset, base_offset: self.base_offset })?;
        let record_count = self
            .record_count
            .checked_add(1)
            .ok_or(RecordError::TooLarge { what: "record count", length: self.record_count as usize })?;
        // The first record fixes the base timestamp (unless a delete horizon did).
        let base_timestamp = self.base_timestamp.or(self.delete_horizon_ms).unwrap_or(record.timestamp_ms);
        let timestamp_delta = record.timestamp_ms.wrapping_sub(base_timestamp);

        let body_bytes = record_body_bytes(record, timestamp_delta, offset_delta)?;
        let body_length =
            i32::try_from(body_bytes).map_err(|_| RecordError::TooLarge { what: "record", length: body_bytes })?;
        self.buf.reserve(varint_size(body_length) + body_bytes);
        put_varint(&mut self.buf, body_length);
        self.buf.put_i8(0); // record attributes: unused
        put_varlong(&mut self.buf, timestamp_delta);
        put_varint(&mut self.buf, offset_delta);
        put_varint_bytes(&mut self.buf, record.key);
        put_varint_bytes(&mut self.buf, record.value);
        put_varint(&mut self.buf, record.headers.len() as i32);
        for header in record.headers {
            put_varint_bytes(&mut self.buf, Some(header.key));
            put_varint_bytes(&mut self.buf, header.value);
        }

        self.record_count = record_count;
        self.base_timestamp = Some(base_timestamp);
        self.last_offset = Some(offset);
        self.max_timestamp = self.max_timestamp.max(record.timestamp_ms);
        Ok(())
    }

    /// Writes the header (and compresses the records when a codec is set).
    pub fn build(self) -> Result<RecordBatch, RecordError> {
        let header = self.header_fields();
        let bytes = match self.compression {
            Compression::None => {
                let mut batch = self.buf;
                write_header(&header, &mut batch)?;
                batch.freeze()
            }
            codec => {
                let records = &self.buf[BATCH_HEADER_BYTES..];
                let mut batch = Vec::with_capacity(BATCH_HEADER_BYTES + records.len() / 2 + 64);
                batch.resize(BATCH_HEADER_BYTES, 0);
                compression::compress(codec, records, &mut batch)?;
                write_header(&header, &mut batch)?;
                Bytes::from(batch)
            }
        };
        RecordBatch::new(bytes)
    }

    fn header_fields(&self) -> HeaderFields {
        let last_offset_delta = match self.last_offset {
            // Checked on append to fit an i32 from the base offset.
            Some(last) => (last - self.base_offset) as i32,
            None => 0,
        };
        let max_timestamp = match self.timestamp_type {
            TimestampType::LogAppendTime => self.log_append_time_ms,
            TimestampType::CreateTime => self.max_timestamp,
        };
        HeaderFields {
            base_offset: self.base_offset,
            partition_leader_epoch: self.partition_leader_epoch,
            attributes: self.attributes(),
            last_offset_delta,
            base_timestamp: self.delete_horizon_ms.or(self.base_timestamp).unwrap_or(NO_TIMESTAMP),
            max_timestamp,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            record_count: self.record_count,
        }
    }

    fn attributes(&self) -> i16 {
        let mut attributes = i16::from(self.compression.id());
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        if self.is_transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.is_control {
            attributes |= CONTROL_BIT;
        }
        if self.delete_horizon_ms.is_some() {
            attributes |= DELETE_HORIZON_BIT;
        }
        attributes
    }
}

/// The header fields `build` writes, taken before the record buffer moves.
struct HeaderFields {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
}

/// Fills the header of `batch` (header room, then the records section as
/// stored), batch length and CRC last.
fn write_header(fields: &HeaderFields, batch: &mut [u8]) -> Result<(), RecordError> {
    let batch_length = batch.len() - LOG_OVERHEAD_BYTES;
    let batch_length =
        i32::try_from(batch_length).map_err(|_| RecordError::TooLarge { what: "batch", length: batch_length })?;
    let mut put = |at: usize, value: &[u8]| batch[at..at + value.len()].copy_from_slice(value);
    put(offsets::BASE_OFFSET, &fields.base_offset.to_be_bytes());
    put(offsets::BATCH_LENGTH, &batch_length.to_be_bytes());
    put(offsets::PARTITION_LEADER_EPOCH, &fields.partition_leader_epoch.to_be_bytes());
    put(offsets::MAGIC, &MAGIC_V2.to_be_bytes());
    put(offsets::ATTRIBUTES, &fields.attributes.to_be_bytes());
    put(offsets::LAST_OFFSET_DELTA, &fields.last_offset_delta.to_be_bytes());
    put(offsets::BASE_TIMESTAMP, &fields.base_timestamp.to_be_bytes());
    put(offsets::MAX_TIMESTAMP, &fields.max_timestamp.to_be_bytes());
    put(offsets::PRODUCER_ID, &fields.producer_id.to_be_bytes());
    put(offsets::PRODUCER_EPOCH, &fields.producer_epoch.to_be_bytes());
    put(offsets::BASE_SEQUENCE, &fields.base_sequence.to_be_bytes());
    put(offsets::RECORD_COUNT, &fields.record_count.to_be_bytes());
    let crc = crc32c(&batch[offsets::ATTRIBUTES..]);
    batch[offsets::CRC..offsets::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// The record's size after its length varint, checking every length fits an i32.
fn record_body_bytes(record: &NewRecord<'_>, timestamp_delta: i64, offset_delta: i32) -> Result<usize, RecordError> {
    let mut total: usize = 1 + varlong_size(timestamp_delta) + varint_size(offset_delta);
    total += varint_bytes_size(record.key, "key")?;
    total += varint_bytes_size(record.value, "value")?;
    let header_count = i32::try_from(record.headers.len())
        .map_err(|_| RecordError::TooLarge { what: "headers", length: record.headers.len() })?;
    total += varint_size(header_count);
    for header in record.headers {
        total += varint_bytes_size(Some(header.key), "header key")?;
        total += varint_bytes_size(header.value, "header value")?;
    }
    Ok(total)
}

fn varint_bytes_size(value: Option<&[u8]>, what: &'static str) -> Result<usize, RecordError> {
    match value {
        None => Ok(varint_size(-1)),
        Some(data) => {
            let length = i32::try_from(data.len()).map_err(|_| RecordError::TooLarge { what, length: data.len() })?;
            Ok(varint_size(length) + data.len())
        }
    }
}

/// Lengths were checked by `record_body_bytes`.
fn put_varint_bytes(buf: &mut BytesMut, value: Option<&[u8]>) {
    match value {
        None => put_varint(buf, -1),
        Some(data) => {
            put_varint(buf, data.len() as i32);
            buf.put_slice(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuilt_batch_keeps_the_header_fields_and_the_kept_records() {
        let headers = [NewHeader { key: b"h", value: None }];
        let mut builder = RecordBatchBuilder::new(Compression::Snappy)
            .with_base_offset(40)
            .with_partition_leader_epoch(6)
            .with_producer(9, 2, 100)
            .with_transactional(true);
        for (i, value) in [&b"a"[..], b"b", b"c"].into_iter().enumerate() {
            let record =
                NewRecord { timestamp_ms: 500 + i as i64, key: Some(b"k"), value: Some(value), headers: &headers };
            builder.append(&record).unwrap();
        }
        let original = builder.build().unwrap();
        let records: Vec<Record> = original.records(1 << 20).unwrap().map(Result::unwrap).collect();
        let mut rebuilt = RecordBatchBuilder::like(&original, Compression::None);
        for record in [&records[0], &records[2]] {
            rebuilt.append_record(record).unwrap();
        }
        let rebuilt = rebuilt.build().unwrap();
        rebuilt.validate().unwrap();
        assert_eq!(rebuilt.compression().unwrap(), Compression::None);
        assert_eq!((rebuilt.base_offset(), rebuilt.partition_leader_epoch()), (40, 6));
        assert_eq!((rebuilt.producer_id(), rebuilt.producer_epoch(), rebuilt.base_sequence()), (9, 2, 100));
        assert!(rebuilt.is_transactional() && !rebuilt.is_control());
        let kept: Vec<Record> = rebuilt.records(1 << 20).unwrap().map(Result::unwrap).collect();
        assert_eq!(kept, vec![records[0].clone(), records[2].clone()]);
    }
}
