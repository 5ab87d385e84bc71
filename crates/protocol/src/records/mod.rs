//! Record batches (magic v2): zero-copy views, CRC-32C validation, in-place patching, a builder.
//!
//! A batch on the wire and on disk (all integers big-endian):
//!
//! ```text
//! offset  field                 covered by CRC
//!  0      baseOffset i64        no  (the leader assigns it on append)
//!  8      batchLength i32       no  (bytes after this field)
//! 12      partitionLeaderEpoch  no  (the leader stamps it on append)
//! 16      magic i8 = 2          no
//! 17      crc u32 (CRC-32C)     -
//! 21      attributes i16        yes, from here to the end of the batch
//! 23      lastOffsetDelta i32
//! 27      baseTimestamp i64
//! 35      maxTimestamp i64
//! 43      producerId i64
//! 51      producerEpoch i16
//! 53      baseSequence i32
//! 57      recordCount i32
//! 61      records (compressed as a whole when attributes bits 0-2 say so)
//! ```
//!
//! [`RecordBatch`] is a view over `Bytes` borrowed from a request frame or a
//! log segment; [`RecordBatches`] splits concatenated batches;
//! [`DecodedRecords`] iterates a batch's records without allocating per record
//! (borrowed [`RecordRef`]s, or owned [`Record`]s through [`Records`]); [`RecordBatchMut`]
//! patches the fields a leader changes on append, and [`RecordBatchHeader`]
//! reads and patches a header apart from its records; [`RecordBatchBuilder`]
//! writes batches, new or rebuilt from another's records. Nothing here panics or allocates by a length it has not checked.

mod batch;
mod builder;
mod control;
mod crc;
mod patch;
mod record;

pub use batch::{whole_batches, RecordBatch, RecordBatches, TimestampType};
pub use builder::{NewHeader, NewRecord, RecordBatchBuilder};
pub use control::{control_batch, control_batch_of, control_type_id, transaction_marker_batch, ControlType};
/// CRC-32C (Castagnoli), as Kafka computes it over a batch from `attributes` on.
pub use crc::{crc32c, crc32c_append};
pub use patch::{RecordBatchHeader, RecordBatchMut};
pub use record::{
    DecodedRecords, Header, HeaderIter, HeaderRef, HeaderRefIter, Headers, HeadersRef, Record, RecordFacts, RecordRef,
    RecordRefs, Records,
};

use crate::compression::CompressionError;
use crate::error::DecodeError;

/// Bytes before `batchLength` counts: baseOffset and batchLength itself.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The fixed header of a v2 batch, up to the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The smallest valid `batchLength`: a header with no records.
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;
/// The only magic Kafka 4 accepts.
pub const MAGIC_V2: i8 = 2;
/// `producerId`, `producerEpoch` and `baseSequence` when there is no producer.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
/// `partitionLeaderEpoch` before a leader stamps the batch.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// A timestamp that was never set.
pub const NO_TIMESTAMP: i64 = -1;

/// The smallest record: one byte each for length, attributes, timestampDelta,
/// offsetDelta, keyLength, valueLength and headersCount.
pub(crate) const MIN_RECORD_BYTES: usize = 7;

/// Attribute bits (the codec takes bits 0-2).
pub(crate) const COMPRESSION_MASK: i16 = 0x07;
pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(crate) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;
pub(crate) const DELETE_HORIZON_BIT: i16 = 0x40;

/// Field offsets within a v2 batch (Kafka's layout). Public for tools that
/// stamp pre-built batches, such as tools/loadgen.
pub mod offsets {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
    pub const RECORDS: usize = 61;
}

/// Copies `N` bytes at `at`. Callers index only inside a header whose length
/// they have checked, so the slice is always in range.
#[inline]
pub(crate) fn be_bytes<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

/// Why a record batch or a record is invalid, or could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Fewer bytes than the batch header or `batchLength` promise. At the end
    /// of a fetch response or a log segment this is a partial batch, not corruption.
    #[error("record batch truncated: needed {needed} bytes, {remaining} remain")]
    Truncated { needed: usize, remaining: usize },
    #[error("invalid record batch length {0}")]
    InvalidBatchLength(i32),
    /// A buffer meant to hold exactly one batch holds more (or less) than it.
    #[error("buffer of {buffer_bytes} bytes holds a batch of {batch_bytes} bytes")]
    BatchSizeMismatch { batch_bytes: usize, buffer_bytes: usize },
    /// A v0/v1 message set, which Kafka 4 no longer accepts.
    #[error("message format with magic {0} is no longer supported")]
    UnsupportedMagic(i8),
    /// A magic byte no Kafka version ever wrote: corruption.
    #[error("invalid magic byte {0}")]
    InvalidMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid record count {count} for a records section of {records_bytes} bytes")]
    InvalidRecordCount { count: i32, records_bytes: usize },
    #[error("invalid record length {0}")]
    InvalidRecordLength(i32),
    #[error("record declares {declared} bytes but its fields take {read}")]
    RecordSizeMismatch { declared: usize, read: usize },
    #[error("invalid {what} length {length}")]
    InvalidFieldLength { what: &'static str, length: i32 },
    #[error("records section has {left} bytes after the declared {count} records")]
    TrailingRecordBytes { count: i32, left: usize },
    #[error(transparent)]
    Compression(#[from] CompressionError),
    #[error("corrupt record: {0}")]
    Decode(#[from] DecodeError),
    /// Builder: offsets within a batch must increase.
    #[error("offset {offset} does not follow the previous offset {previous}")]
    OffsetNotIncreasing { offset: i64, previous: i64 },
    /// Builder: `offset - baseOffset` must fit an i32.
    #[error("offset {offset} is out of range for base offset {base_offset}")]
    OffsetDeltaOutOfRange { offset: i64, base_offset: i64 },
    /// Builder: a length that does not fit its field.
    #[error("{what} of {length} bytes is too large")]
    TooLarge { what: &'static str, length: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_adds_up() {
        assert_eq!(offsets::RECORDS, BATCH_HEADER_BYTES);
        assert_eq!(offsets::RECORD_COUNT + 4, offsets::RECORDS);
        assert_eq!(MIN_BATCH_LENGTH, 49);
    }
}
