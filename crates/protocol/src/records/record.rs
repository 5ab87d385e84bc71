//! Records inside a batch: iterators over the (decompressed) records section
//! that allocate nothing per record.
//!
//! ```text
//! length varint (bytes after this field), attributes i8, timestampDelta varlong,
//! offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint
//! (-1 = null), value, headersCount varint,
//! headers: [headerKeyLength varint, headerKey, headerValueLength varint (-1 = null), headerValue]
//! ```
//!
//! Parsing walks the section with a [`Cursor`] (what is left of it) and
//! notes where each field lies; profiled on 100 B records, reading through
//! a `Bytes` cursor (a bounds check and a pointer update per byte) cost a
//! third of produce. Two views are built from those positions:
//! [`RecordRef`] borrows slices of the section (no per-record cost at all),
//! [`Record`] holds `Bytes` slices of it (one reference count per present
//! field, for records that outlive the iteration). A leader's validation builds neither:
//! [`DecodedRecords::for_each_fact`] hands it the few fields it checks.

use std::fmt;
use std::iter::FusedIterator;
use std::ops::Range;

use bytes::Bytes;

use super::{RecordError, MIN_RECORD_BYTES};
use crate::error::DecodeError;
use crate::primitives::{read_unsigned_varint, read_unsigned_varlong, zigzag_i32, zigzag_i64, DecodeResult};

// ---------------------------------------------------------------- parsing

/// What is wrong with a malformed record, as parsing carries it: small and
/// without drop glue, so the hot path moves no [`RecordError`] around; it
/// becomes one when a walk ends on it.
#[derive(Debug, Clone, Copy)]
enum Malformed {
    Truncated,
    VarintTooLong(usize),
    FieldLength { what: &'static str, length: i32 },
    RecordLength(i32),
    SizeMismatch { declared: usize, read: usize },
}

impl From<Malformed> for RecordError {
    fn from(malformed: Malformed) -> RecordError {
        match malformed {
            Malformed::Truncated => DecodeError::Truncated { needed: 1, remaining: 0 }.into(),
            Malformed::VarintTooLong(bytes) => DecodeError::VarintTooLong(bytes).into(),
            Malformed::FieldLength { what, length } => RecordError::InvalidFieldLength { what, length },
            Malformed::RecordLength(length) => RecordError::InvalidRecordLength(length),
            Malformed::SizeMismatch { declared, read } => RecordError::RecordSizeMismatch { declared, read },
        }
    }
}

/// A read position in a records section (or a record's encoded headers):
/// what is left of it, so that each read checks one length (profiled: a
/// position checked against the section's end cost an overflow check
/// and two compares per field).
struct Cursor<'a> {
    /// The length of the whole section: positions are counted from its start.
    section_len: usize,
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos` of `section` (at most its length).
    #[inline(always)]
    fn at(section: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { section_len: section.len(), rest: &section[pos..] }
    }

    #[inline(always)]
    fn pos(&self) -> usize {
        self.section_len - self.rest.len()
    }

    #[inline(always)]
    fn remaining(&self) -> usize {
        self.rest.len()
    }

    #[inline(always)]
    fn i8(&mut self) -> Result<i8, Malformed> {
        let (&byte, rest) = self.rest.split_first().ok_or(Malformed::Truncated)?;
        self.rest = rest;
        Ok(byte as i8)
    }

    /// A one- or two-byte unsigned varint (most lengths and deltas in a
    /// record), read inline; `None` when the value is longer or the section
    /// ends first, for [`Cursor::long_unsigned`] to read.
    #[inline(always)]
    fn short_unsigned(&mut self) -> Option<u64> {
        match *self.rest {
            [first, ref rest @ ..] if first < 0x80 => {
                self.rest = rest;
                Some(u64::from(first))
            }
            [first, second, ref rest @ ..] if second < 0x80 => {
                self.rest = rest;
                Some(u64::from(first & 0x7f) | u64::from(second) << 7)
            }
            _ => None,
        }
    }

    /// An unsigned varint (`read_unsigned_varint`) or varlong
    /// (`read_unsigned_varlong`) that [`Cursor::short_unsigned`] left.
    fn long_unsigned<T>(&mut self, read: fn(&[u8]) -> DecodeResult<(T, usize)>) -> Result<T, Malformed> {
        match read(self.rest) {
            Ok((value, length)) => {
                self.rest = &self.rest[length..];
                Ok(value)
            }
            Err(DecodeError::VarintTooLong(bytes)) => Err(Malformed::VarintTooLong(bytes)),
            Err(_) => Err(Malformed::Truncated),
        }
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<i32, Malformed> {
        self.zigzag_varint().map(zigzag_i32)
    }

    /// A varint as written, before zigzag decoding.
    #[inline(always)]
    fn zigzag_varint(&mut self) -> Result<u32, Malformed> {
        match self.short_unsigned() {
            // Two bytes hold at most 14 bits.
            Some(raw) => Ok(raw as u32),
            None => self.long_unsigned(read_unsigned_varint),
        }
    }

    #[inline(always)]
    fn varlong(&mut self) -> Result<i64, Malformed> {
        let raw = match self.short_unsigned() {
            Some(raw) => raw,
            None => self.long_unsigned(read_unsigned_varlong)?,
        };
        Ok(zigzag_i64(raw))
    }

    /// A varint-length-prefixed field (-1 is null): where it lies.
    #[inline(always)]
    fn field(&mut self, what: &'static str) -> Result<Option<Range<usize>>, Malformed> {
        // Zigzag: 1 is -1 (null), other odd values other negative lengths.
        let raw = self.zigzag_varint()?;
        let Some(length) = non_negative(raw) else {
            return match raw {
                1 => Ok(None),
                _ => Err(Malformed::FieldLength { what, length: zigzag_i32(raw) }),
            };
        };
        let start = self.pos();
        match self.rest.get(length..) {
            Some(rest) => {
                self.rest = rest;
                Ok(Some(start..self.pos()))
            }
            None => Err(Malformed::FieldLength { what, length: zigzag_i32(raw) }),
        }
    }

    /// One header's key and value positions.
    #[inline(always)]
    fn header(&mut self) -> Result<(Range<usize>, Option<Range<usize>>), Malformed> {
        // Kafka rejects a null (negative) header key.
        let key = self.field("header key")?.ok_or(Malformed::FieldLength { what: "header key", length: -1 })?;
        let value = self.field("header value")?;
        Ok((key, value))
    }
}

/// A zigzag-encoded varint's value when it is not negative: zigzag keeps
/// the sign in the low bit, so that is one test and a shift.
#[inline(always)]
fn non_negative(raw: u32) -> Option<usize> {
    (raw & 1 == 0).then_some((raw >> 1) as usize)
}

/// Where one record's fields lie in the records section.
struct RawRecord {
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    headers: Range<usize>,
    header_count: usize,
}

/// Reads the record at `cursor`, checking that its fields fill exactly the
/// length it declares and that every header is well formed. `next` is set
/// to where the following record starts as soon as the length is read, so
/// that the next record's reads need not wait for this one's fields, each
/// of whose positions depends on the field before.
#[inline(always)]
fn read_record(cursor: &mut Cursor<'_>, next: &mut usize) -> Result<RawRecord, Malformed> {
    let length = cursor.zigzag_varint()?;
    let length_bytes = match non_negative(length) {
        Some(n) if n <= cursor.remaining() => n,
        _ => return Err(Malformed::RecordLength(zigzag_i32(length))),
    };
    *next = cursor.pos() + length_bytes;
    // Fields are read straight from the cursor; a record whose fields run past
    // its length is caught by the size check below.
    let start = cursor.pos();
    let attributes = cursor.i8()?;
    let timestamp_delta = cursor.varlong()?;
    let offset_delta = cursor.varint()?;
    let key = cursor.field("key")?;
    let value = cursor.field("value")?;
    let header_count = cursor.zigzag_varint()?;
    let header_count = non_negative(header_count)
        .ok_or(Malformed::FieldLength { what: "headers count", length: zigzag_i32(header_count) })?;
    let headers_start = cursor.pos();
    // Every header takes at least two bytes, so this loop ends with the input.
    for _ in 0..header_count {
        cursor.header()?;
    }
    let headers = headers_start..cursor.pos();
    let read_bytes = cursor.pos() - start;
    if read_bytes != length_bytes {
        return Err(Malformed::SizeMismatch { declared: length_bytes, read: read_bytes });
    }
    Ok(RawRecord { attributes, timestamp_delta, offset_delta, key, value, headers, header_count })
}

// ---------------------------------------------------------------- the section

/// A batch's records section, decompressed if it was compressed, with what is
/// needed to make offsets and timestamps absolute. Iterate it by reference
/// ([`DecodedRecords::iter`], borrowed [`RecordRef`]s) or by value
/// ([`Records`], owned [`Record`]s).
#[derive(Debug, Clone)]
pub struct DecodedRecords {
    data: Bytes,
    count: u32,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time_ms: Option<i64>,
}

impl DecodedRecords {
    pub(crate) fn new(
        data: Bytes,
        count: i32,
        base_offset: i64,
        base_timestamp: i64,
        log_append_time_ms: Option<i64>,
    ) -> Result<Self, RecordError> {
        // A count the data cannot hold is corruption; catching it here keeps
        // callers that size things by `len()` honest.
        let count = u32::try_from(count)
            .ok()
            .filter(|&n| n as usize <= data.len() / MIN_RECORD_BYTES)
            .ok_or(RecordError::InvalidRecordCount { count, records_bytes: data.len() })?;
        Ok(DecodedRecords { data, count, base_offset, base_timestamp, log_append_time_ms })
    }

    /// The record count the batch declares.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Hands the decompressed section's buffer back to `scratch` (see
    /// `RecordBatch::decode_records_reusing`) when nothing else holds it and
    /// `scratch` has none of its own.
    pub fn recycle(self, scratch: &mut Vec<u8>) {
        if scratch.capacity() == 0 {
            if let Ok(data) = self.data.try_into_mut() {
                *scratch = Vec::from(data);
            }
        }
    }

    /// The (decompressed) records section.
    pub fn as_bytes(&self) -> &Bytes {
        &self.data
    }

    /// Borrowed records: no per-record cost beyond parsing.
    pub fn iter(&self) -> RecordRefs<'_> {
        RecordRefs { section: &self.data, walk: self.walk() }
    }

    /// Reads every record as [`DecodedRecords::iter`] does, with the same
    /// checks and the same first error, and hands `visit` what a leader's
    /// validation reads of each ([`RecordFacts`]), in order. Nothing is built
    /// or returned per record: profiled on 100 B records, the produce path
    /// spent as long taking each [`RecordRef`] out of the iterator as
    /// reading its fields.
    #[inline]
    pub fn for_each_fact(&self, mut visit: impl FnMut(RecordFacts)) -> Result<(), RecordError> {
        let mut walk = self.walk();
        while let Some(located) = walk.next(&self.data) {
            let Located { offset, timestamp, raw } = located?;
            visit(RecordFacts { offset, timestamp, offset_delta: raw.offset_delta, has_key: raw.key.is_some() });
        }
        Ok(())
    }

    fn walk(&self) -> Walk {
        Walk {
            pos: 0,
            remaining: self.count,
            count: self.count,
            base_offset: self.base_offset,
            base_timestamp: self.base_timestamp,
            log_append_time_ms: self.log_append_time_ms,
            done: false,
        }
    }
}

impl IntoIterator for DecodedRecords {
    type Item = Result<Record, RecordError>;
    type IntoIter = Records;

    fn into_iter(self) -> Records {
        let walk = self.walk();
        Records { section: self.data, walk }
    }
}

impl<'a> IntoIterator for &'a DecodedRecords {
    type Item = Result<RecordRef<'a>, RecordError>;
    type IntoIter = RecordRefs<'a>;

    fn into_iter(self) -> RecordRefs<'a> {
        self.iter()
    }
}

/// The parsing state both iterators share: yields exactly `recordCount`
/// records, then fails if bytes are left over, as Kafka does. The first error
/// ends the walk.
#[derive(Debug, Clone)]
struct Walk {
    /// Where the next record starts in the section.
    pos: usize,
    remaining: u32,
    count: u32,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time_ms: Option<i64>,
    done: bool,
}

/// A record's absolute offset and timestamp and its field positions.
struct Located {
    offset: i64,
    timestamp: i64,
    raw: RawRecord,
}

impl Walk {
    /// The next record of `section`, the buffer this walk was made for.
    #[inline(always)]
    fn next(&mut self, section: &[u8]) -> Option<Result<Located, RecordError>> {
        if self.done {
            return None;
        }
        debug_assert!(self.pos <= section.len(), "a walk only moves within its section");
        if self.remaining == 0 {
            self.done = true;
            if self.pos != section.len() {
                let count = self.count as i32;
                return Some(Err(RecordError::TrailingRecordBytes { count, left: section.len() - self.pos }));
            }
            return None;
        }
        self.remaining -= 1;
        let mut cursor = Cursor::at(section, self.pos);
        let read = read_record(&mut cursor, &mut self.pos);
        match read {
            Ok(raw) => {
                let offset = self.base_offset.wrapping_add(i64::from(raw.offset_delta));
                let timestamp =
                    self.log_append_time_ms.unwrap_or_else(|| self.base_timestamp.wrapping_add(raw.timestamp_delta));
                Some(Ok(Located { offset, timestamp, raw }))
            }
            Err(malformed) => {
                self.done = true;
                Some(Err(malformed.into()))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // One more item (an error) may follow the records.
        (0, Some(self.remaining as usize + 1))
    }
}

// ---------------------------------------------------------------- facts

/// What a leader's checks read of one record (Kafka's LogValidator reads
/// no more of a produced record): see [`DecodedRecords::for_each_fact`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFacts {
    /// `baseOffset + offsetDelta`.
    pub offset: i64,
    /// As [`RecordRef::timestamp`].
    pub timestamp: i64,
    pub offset_delta: i32,
    pub has_key: bool,
}

/// The facts a leader would read of a record already built (tests compare
/// [`DecodedRecords::for_each_fact`] against the iterator through this).
impl From<&RecordRef<'_>> for RecordFacts {
    fn from(record: &RecordRef<'_>) -> Self {
        RecordFacts {
            offset: record.offset,
            timestamp: record.timestamp,
            offset_delta: record.offset_delta,
            has_key: record.key.is_some(),
        }
    }
}

// ---------------------------------------------------------------- borrowed view

/// One record, borrowing from its [`DecodedRecords`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// `baseOffset + offsetDelta`.
    pub offset: i64,
    /// `baseTimestamp + timestampDelta`, or the batch's `maxTimestamp` when the
    /// batch uses LogAppendTime.
    pub timestamp: i64,
    /// Unused by Kafka so far; kept as read.
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: HeadersRef<'a>,
}

/// Iterates borrowed records; see [`DecodedRecords::iter`].
#[derive(Debug, Clone)]
pub struct RecordRefs<'a> {
    section: &'a Bytes,
    walk: Walk,
}

impl<'a> Iterator for RecordRefs<'a> {
    type Item = Result<RecordRef<'a>, RecordError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let section: &'a Bytes = self.section;
        let slice = |range: Range<usize>| &section[range];
        Some(self.walk.next(section)?.map(|Located { offset, timestamp, raw }| RecordRef {
            offset,
            timestamp,
            attributes: raw.attributes,
            timestamp_delta: raw.timestamp_delta,
            offset_delta: raw.offset_delta,
            key: raw.key.map(slice),
            value: raw.value.map(slice),
            headers: HeadersRef { section, range: raw.headers, count: raw.header_count },
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.walk.size_hint()
    }
}

impl FusedIterator for RecordRefs<'_> {}

/// A borrowed record's headers, validated, read lazily.
#[derive(Clone)]
pub struct HeadersRef<'a> {
    section: &'a Bytes,
    range: Range<usize>,
    count: usize,
}

/// One borrowed header. Kafka reads the key as UTF-8; it is kept as bytes here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

impl<'a> HeadersRef<'a> {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> HeaderRefIter<'a> {
        HeaderRefIter { raw: &self.section[self.range.clone()], pos: 0, remaining: self.count }
    }
}

impl PartialEq for HeadersRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for HeadersRef<'_> {}

impl fmt::Debug for HeadersRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for HeadersRef<'a> {
    type Item = HeaderRef<'a>;
    type IntoIter = HeaderRefIter<'a>;

    fn into_iter(self) -> HeaderRefIter<'a> {
        self.iter()
    }
}

/// Iterates [`HeadersRef`]. The headers were validated when their record was
/// read, so this yields plain values.
#[derive(Debug, Clone)]
pub struct HeaderRefIter<'a> {
    raw: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> Iterator for HeaderRefIter<'a> {
    type Item = HeaderRef<'a>;

    fn next(&mut self) -> Option<HeaderRef<'a>> {
        let raw = self.raw;
        let (key, value) = next_header(raw, &mut self.pos, &mut self.remaining)?;
        Some(HeaderRef { key: &raw[key], value: value.map(|range| &raw[range]) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

impl FusedIterator for HeaderRefIter<'_> {}

/// Steps a header walk over validated bytes (`raw`, a record's headers).
fn next_header(raw: &[u8], pos: &mut usize, remaining: &mut usize) -> Option<(Range<usize>, Option<Range<usize>>)> {
    if *remaining == 0 {
        return None;
    }
    *remaining -= 1;
    let mut cursor = Cursor::at(raw, *pos);
    let header = cursor.header();
    *pos = cursor.pos();
    match header {
        Ok(header) => Some(header),
        Err(_) => {
            debug_assert!(false, "headers were validated when the record was read");
            *remaining = 0;
            None
        }
    }
}

// ---------------------------------------------------------------- owned view

/// One record, holding `Bytes` slices of the records section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `baseOffset + offsetDelta`.
    pub offset: i64,
    /// `baseTimestamp + timestampDelta`, or the batch's `maxTimestamp` when the
    /// batch uses LogAppendTime.
    pub timestamp: i64,
    /// Unused by Kafka so far; kept as read.
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Headers,
}

/// Iterates owned records; see [`DecodedRecords::into_iter`].
#[derive(Debug, Clone)]
pub struct Records {
    section: Bytes,
    walk: Walk,
}

impl Records {
    /// Records not yet yielded.
    pub fn len(&self) -> usize {
        self.walk.remaining as usize
    }

    pub fn is_empty(&self) -> bool {
        self.walk.remaining == 0
    }
}

impl Iterator for Records {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        let section = &self.section;
        Some(self.walk.next(section)?.map(|Located { offset, timestamp, raw }| Record {
            offset,
            timestamp,
            attributes: raw.attributes,
            timestamp_delta: raw.timestamp_delta,
            offset_delta: raw.offset_delta,
            key: raw.key.map(|range| section.slice(range)),
            value: raw.value.map(|range| section.slice(range)),
            headers: if raw.header_count == 0 {
                Headers::default()
            } else {
                Headers { raw: section.slice(raw.headers), count: raw.header_count }
            },
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.walk.size_hint()
    }
}

impl FusedIterator for Records {}

/// A record's headers, validated, read lazily.
#[derive(Clone, Default)]
pub struct Headers {
    /// The encoded headers (after headersCount), exactly `count` of them.
    raw: Bytes,
    count: usize,
}

/// One record header. Kafka reads the key as UTF-8; it is kept as bytes here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

impl Headers {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> HeaderIter {
        HeaderIter { raw: self.raw.clone(), pos: 0, remaining: self.count }
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for Headers {}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl IntoIterator for &Headers {
    type Item = Header;
    type IntoIter = HeaderIter;

    fn into_iter(self) -> HeaderIter {
        self.iter()
    }
}

/// Iterates [`Headers`], yielding `Bytes` slices.
#[derive(Debug, Clone)]
pub struct HeaderIter {
    raw: Bytes,
    pos: usize,
    remaining: usize,
}

impl Iterator for HeaderIter {
    type Item = Header;

    fn next(&mut self) -> Option<Header> {
        let (key, value) = next_header(&self.raw, &mut self.pos, &mut self.remaining)?;
        Some(Header { key: self.raw.slice(key), value: value.map(|range| self.raw.slice(range)) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

impl FusedIterator for HeaderIter {}
