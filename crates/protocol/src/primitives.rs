//! Kafka's primitive types on the wire: fixed-width big-endian integers,
//! unsigned varints (flexible versions), zig-zag varints (records), strings,
//! bytes, arrays and tagged-field sections, in classic and compact forms.
//!
//! Readers take `&mut Bytes` and advance it; `bytes` and `records` values are
//! zero-copy slices of the input. Every length is checked against what remains
//! before anything is allocated or sliced.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
pub use crate::uuid::Uuid;

pub type DecodeResult<T> = Result<T, DecodeError>;
pub type EncodeResult<T> = Result<T, EncodeError>;

#[inline]
pub fn ensure(buf: &Bytes, needed: usize) -> DecodeResult<()> {
    if buf.remaining() < needed {
        return Err(DecodeError::Truncated { needed, remaining: buf.remaining() });
    }
    Ok(())
}

macro_rules! fixed_readers {
    ($($name:ident: $ty:ty = $get:ident;)*) => {$(
        #[inline]
        pub fn $name(buf: &mut Bytes) -> DecodeResult<$ty> {
            ensure(buf, std::mem::size_of::<$ty>())?;
            Ok(buf.$get())
        }
    )*};
}

fixed_readers! {
    get_i8: i8 = get_i8;
    get_i16: i16 = get_i16;
    get_u16: u16 = get_u16;
    get_i32: i32 = get_i32;
    get_u32: u32 = get_u32;
    get_i64: i64 = get_i64;
    get_f64: f64 = get_f64;
}

/// Kafka reads any non-zero byte as true.
#[inline]
pub fn get_bool(buf: &mut Bytes) -> DecodeResult<bool> {
    Ok(get_i8(buf)? != 0)
}

#[inline]
pub fn get_uuid(buf: &mut Bytes) -> DecodeResult<Uuid> {
    ensure(buf, 16)?;
    let mut bytes = [0u8; 16];
    buf.copy_to_slice(&mut bytes);
    Ok(Uuid(bytes))
}

/// Unsigned LEB128 varint of at most 5 bytes (a u32).
#[inline]
pub fn get_unsigned_varint(buf: &mut Bytes) -> DecodeResult<u32> {
    let (value, length) = read_unsigned_varint(buf.chunk())?;
    buf.advance(length);
    Ok(value)
}

/// Unsigned LEB128 varint of at most 10 bytes (a u64).
#[inline]
pub fn get_unsigned_varlong(buf: &mut Bytes) -> DecodeResult<u64> {
    let (value, length) = read_unsigned_varlong(buf.chunk())?;
    buf.advance(length);
    Ok(value)
}

/// Zig-zag signed varint (record fields).
#[inline]
pub fn get_varint(buf: &mut Bytes) -> DecodeResult<i32> {
    Ok(zigzag_i32(get_unsigned_varint(buf)?))
}

/// Zig-zag signed varlong (record fields).
#[inline]
pub fn get_varlong(buf: &mut Bytes) -> DecodeResult<i64> {
    Ok(zigzag_i64(get_unsigned_varlong(buf)?))
}

/// The unsigned varint (at most 5 bytes) at the front of `bytes`: its value
/// and how many bytes it took. Slices are what hot parsers walk (record
/// fields are read by index, with no reference-counted cursor to move).
#[inline]
pub fn read_unsigned_varint(bytes: &[u8]) -> DecodeResult<(u32, usize)> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let &byte = bytes.get(i).ok_or(DecodeError::Truncated { needed: 1, remaining: 0 })?;
        if i == 4 && byte > 0x0f {
            return Err(DecodeError::VarintTooLong(5));
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(DecodeError::VarintTooLong(5))
}

/// The unsigned varlong (at most 10 bytes) at the front of `bytes`: its value
/// and how many bytes it took.
#[inline]
pub fn read_unsigned_varlong(bytes: &[u8]) -> DecodeResult<(u64, usize)> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let &byte = bytes.get(i).ok_or(DecodeError::Truncated { needed: 1, remaining: 0 })?;
        if i == 9 && byte > 0x01 {
            return Err(DecodeError::VarintTooLong(10));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(DecodeError::VarintTooLong(10))
}

/// Zig-zag decoding: 0, -1, 1, -2... from 0, 1, 2, 3...
#[inline]
pub fn zigzag_i32(raw: u32) -> i32 {
    ((raw >> 1) as i32) ^ -((raw & 1) as i32)
}

/// Zig-zag decoding of a varlong's value.
#[inline]
pub fn zigzag_i64(raw: u64) -> i64 {
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}

/// Reads a length prefix: i16/i32 in classic form, unsigned varint N+1 in
/// compact form. `None` is null (-1, or 0 compact). The length is checked
/// against the remaining bytes when `bounded` (strings, bytes, and arrays,
/// whose every element takes at least one byte, as Kafka's own reader assumes).
#[inline]
fn get_length(buf: &mut Bytes, compact: bool, wide: bool, what: &'static str) -> DecodeResult<Option<usize>> {
    let length: i64 = if compact {
        i64::from(get_unsigned_varint(buf)?) - 1
    } else if wide {
        i64::from(get_i32(buf)?)
    } else {
        i64::from(get_i16(buf)?)
    };
    if length < -1 {
        return Err(DecodeError::InvalidLength { what, length });
    }
    if length == -1 {
        return Ok(None);
    }
    let length = length as usize;
    ensure(buf, length).map_err(|_| DecodeError::InvalidLength { what, length: length as i64 })?;
    Ok(Some(length))
}

#[inline]
pub fn get_nullable_string(buf: &mut Bytes, compact: bool) -> DecodeResult<Option<String>> {
    let Some(length) = get_length(buf, compact, false, "string")? else { return Ok(None) };
    let raw = buf.split_to(length);
    match std::str::from_utf8(&raw) {
        Ok(text) => Ok(Some(text.to_owned())),
        Err(_) => Err(DecodeError::InvalidUtf8),
    }
}

#[inline]
pub fn get_string(buf: &mut Bytes, compact: bool, field: &'static str) -> DecodeResult<String> {
    get_nullable_string(buf, compact)?.ok_or(DecodeError::UnexpectedNull(field))
}

#[inline]
pub fn get_nullable_bytes(buf: &mut Bytes, compact: bool) -> DecodeResult<Option<Bytes>> {
    let Some(length) = get_length(buf, compact, true, "bytes")? else { return Ok(None) };
    Ok(Some(buf.split_to(length)))
}

#[inline]
pub fn get_bytes(buf: &mut Bytes, compact: bool, field: &'static str) -> DecodeResult<Bytes> {
    get_nullable_bytes(buf, compact)?.ok_or(DecodeError::UnexpectedNull(field))
}

/// An array's element count; `None` when null.
#[inline]
pub fn get_array_length(buf: &mut Bytes, compact: bool) -> DecodeResult<Option<usize>> {
    get_length(buf, compact, true, "array")
}

/// Reads a non-null array, each element with `read`.
#[inline]
pub fn get_array<T>(
    buf: &mut Bytes,
    compact: bool,
    field: &'static str,
    read: impl FnMut(&mut Bytes) -> DecodeResult<T>,
) -> DecodeResult<Vec<T>> {
    get_nullable_array(buf, compact, read)?.ok_or(DecodeError::UnexpectedNull(field))
}

/// Reads a possibly-null array, each element with `read`.
#[inline]
pub fn get_nullable_array<T>(
    buf: &mut Bytes,
    compact: bool,
    mut read: impl FnMut(&mut Bytes) -> DecodeResult<T>,
) -> DecodeResult<Option<Vec<T>>> {
    let Some(length) = get_array_length(buf, compact)? else { return Ok(None) };
    // The length is bounded by the input size, but an element may be far larger
    // in memory than on the wire: grow as elements actually decode.
    let mut items = Vec::with_capacity(length.min(64));
    for _ in 0..length {
        items.push(read(buf)?);
    }
    Ok(Some(items))
}

/// A tagged field we do not know: kept so it can be written back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RawTaggedField {
    pub tag: u32,
    pub data: Bytes,
}

/// Reads a tagged-field section, handing each field's bytes to `known`, which
/// returns `Ok(false)` for tags it does not know; those are kept in `unknown`.
pub fn get_tagged_fields(
    buf: &mut Bytes,
    unknown: &mut Vec<RawTaggedField>,
    mut known: impl FnMut(u32, &mut Bytes) -> DecodeResult<bool>,
) -> DecodeResult<()> {
    let count = get_unsigned_varint(buf)? as usize;
    // Each field takes at least two bytes (tag and size).
    ensure(buf, count.saturating_mul(2))
        .map_err(|_| DecodeError::InvalidLength { what: "tagged fields", length: count as i64 })?;
    for _ in 0..count {
        let tag = get_unsigned_varint(buf)?;
        let size = get_unsigned_varint(buf)? as usize;
        ensure(buf, size).map_err(|_| DecodeError::InvalidLength { what: "tagged field", length: size as i64 })?;
        let mut data = buf.split_to(size);
        if known(tag, &mut data)? {
            if data.has_remaining() {
                return Err(DecodeError::TaggedFieldSize { tag, left: data.remaining() });
            }
        } else {
            unknown.push(RawTaggedField { tag, data });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- writers

#[inline]
pub fn put_unsigned_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[inline]
pub fn put_unsigned_varlong(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[inline]
pub fn put_varint(buf: &mut BytesMut, value: i32) {
    put_unsigned_varint(buf, ((value << 1) ^ (value >> 31)) as u32);
}

#[inline]
pub fn put_varlong(buf: &mut BytesMut, value: i64) {
    put_unsigned_varlong(buf, ((value << 1) ^ (value >> 63)) as u64);
}

/// Bytes an unsigned varint takes.
#[inline]
pub fn unsigned_varint_size(value: u32) -> usize {
    match value {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

/// Bytes a zig-zag varint takes.
#[inline]
pub fn varint_size(value: i32) -> usize {
    unsigned_varint_size(((value << 1) ^ (value >> 31)) as u32)
}

/// Bytes a zig-zag varlong takes.
#[inline]
pub fn varlong_size(value: i64) -> usize {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    let mut size = 1;
    while raw >= 0x80 {
        raw >>= 7;
        size += 1;
    }
    size
}

#[inline]
pub fn put_bool(buf: &mut BytesMut, value: bool) {
    buf.put_i8(value as i8);
}

#[inline]
pub fn put_uuid(buf: &mut BytesMut, value: &Uuid) {
    buf.put_slice(&value.0);
}

/// Writes a length prefix for a value of `length` (None = null).
#[inline]
fn put_length(
    buf: &mut BytesMut,
    length: Option<usize>,
    compact: bool,
    wide: bool,
    what: &'static str,
) -> EncodeResult<()> {
    match (length, compact) {
        (None, true) => put_unsigned_varint(buf, 0),
        (None, false) if wide => buf.put_i32(-1),
        (None, false) => buf.put_i16(-1),
        (Some(n), true) => {
            let n = u32::try_from(n).ok().filter(|&n| n < u32::MAX && (wide || n <= i16::MAX as u32));
            let n = n.ok_or(EncodeError::TooLong { what, length: length.unwrap_or_default() })?;
            put_unsigned_varint(buf, n + 1)
        }
        (Some(n), false) if wide => {
            let n = i32::try_from(n).map_err(|_| EncodeError::TooLong { what, length: n })?;
            buf.put_i32(n)
        }
        (Some(n), false) => {
            let n = i16::try_from(n).map_err(|_| EncodeError::TooLong { what, length: n })?;
            buf.put_i16(n)
        }
    }
    Ok(())
}

#[inline]
pub fn put_nullable_string(buf: &mut BytesMut, value: Option<&str>, compact: bool) -> EncodeResult<()> {
    put_length(buf, value.map(str::len), compact, false, "string")?;
    if let Some(text) = value {
        buf.put_slice(text.as_bytes());
    }
    Ok(())
}

#[inline]
pub fn put_string(buf: &mut BytesMut, value: &str, compact: bool) -> EncodeResult<()> {
    put_nullable_string(buf, Some(value), compact)
}

#[inline]
pub fn put_nullable_bytes(buf: &mut BytesMut, value: Option<&[u8]>, compact: bool) -> EncodeResult<()> {
    put_length(buf, value.map(<[u8]>::len), compact, true, "bytes")?;
    if let Some(data) = value {
        buf.put_slice(data);
    }
    Ok(())
}

#[inline]
pub fn put_bytes(buf: &mut BytesMut, value: &[u8], compact: bool) -> EncodeResult<()> {
    put_nullable_bytes(buf, Some(value), compact)
}

#[inline]
pub fn put_array_length(buf: &mut BytesMut, length: Option<usize>, compact: bool) -> EncodeResult<()> {
    put_length(buf, length, compact, true, "array")
}

#[inline]
pub fn put_array<T>(
    buf: &mut BytesMut,
    items: &[T],
    compact: bool,
    write: impl FnMut(&mut BytesMut, &T) -> EncodeResult<()>,
) -> EncodeResult<()> {
    put_nullable_array(buf, Some(items), compact, write)
}

#[inline]
pub fn put_nullable_array<T>(
    buf: &mut BytesMut,
    items: Option<&[T]>,
    compact: bool,
    mut write: impl FnMut(&mut BytesMut, &T) -> EncodeResult<()>,
) -> EncodeResult<()> {
    put_array_length(buf, items.map(<[T]>::len), compact)?;
    for item in items.unwrap_or_default() {
        write(buf, item)?;
    }
    Ok(())
}

/// Writes a tagged-field section: `known` fields (already encoded, tag order
/// not required) merged with the preserved unknown ones, in ascending tag order.
pub fn put_tagged_fields(
    buf: &mut BytesMut,
    mut known: Vec<(u32, BytesMut)>,
    unknown: &[RawTaggedField],
) -> EncodeResult<()> {
    if known.is_empty() && unknown.is_empty() {
        buf.put_u8(0);
        return Ok(());
    }
    let mut fields: Vec<(u32, &[u8])> = Vec::with_capacity(known.len() + unknown.len());
    known.sort_by_key(|(tag, _)| *tag);
    fields.extend(known.iter().map(|(tag, data)| (*tag, &data[..])));
    fields.extend(unknown.iter().map(|field| (field.tag, &field.data[..])));
    fields.sort_by_key(|(tag, _)| *tag);
    put_unsigned_varint(buf, fields.len() as u32);
    for (tag, data) in fields {
        put_unsigned_varint(buf, tag);
        let size =
            u32::try_from(data.len()).map_err(|_| EncodeError::TooLong { what: "tagged field", length: data.len() })?;
        put_unsigned_varint(buf, size);
        buf.put_slice(data);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes_of(f: impl FnOnce(&mut BytesMut)) -> Bytes {
        let mut buf = BytesMut::new();
        f(&mut buf);
        buf.freeze()
    }

    proptest! {
        #[test]
        fn unsigned_varint_round_trip(value: u32) {
            let mut encoded = bytes_of(|b| put_unsigned_varint(b, value));
            prop_assert_eq!(encoded.len(), unsigned_varint_size(value));
            prop_assert_eq!(get_unsigned_varint(&mut encoded).unwrap(), value);
            prop_assert!(encoded.is_empty());
        }

        #[test]
        fn varint_round_trip(value: i32) {
            let mut encoded = bytes_of(|b| put_varint(b, value));
            prop_assert_eq!(encoded.len(), varint_size(value));
            prop_assert_eq!(get_varint(&mut encoded).unwrap(), value);
        }

        #[test]
        fn varlong_round_trip(value: i64) {
            let mut encoded = bytes_of(|b| put_varlong(b, value));
            prop_assert_eq!(encoded.len(), varlong_size(value));
            prop_assert_eq!(get_varlong(&mut encoded).unwrap(), value);
        }

        #[test]
        fn readers_never_panic(data: Vec<u8>, compact: bool) {
            let data = Bytes::from(data);
            let _ = get_nullable_string(&mut data.clone(), compact);
            let _ = get_nullable_bytes(&mut data.clone(), compact);
            let _ = get_array_length(&mut data.clone(), compact);
            let _ = get_varlong(&mut data.clone());
            let _ = get_tagged_fields(&mut data.clone(), &mut Vec::new(), |_, b| { b.advance(b.remaining()); Ok(true) });
        }
    }

    #[test]
    fn zigzag_matches_kafka_examples() {
        // From the Kafka protocol guide: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3.
        assert_eq!(&bytes_of(|b| put_varint(b, 0))[..], &[0]);
        assert_eq!(&bytes_of(|b| put_varint(b, -1))[..], &[1]);
        assert_eq!(&bytes_of(|b| put_varint(b, 1))[..], &[2]);
        assert_eq!(&bytes_of(|b| put_varint(b, -2))[..], &[3]);
        assert_eq!(&bytes_of(|b| put_varint(b, 300))[..], &[0xd8, 0x04]);
    }

    #[test]
    fn overlong_varints_are_errors() {
        let mut five_plus = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert_eq!(get_unsigned_varint(&mut five_plus), Err(DecodeError::VarintTooLong(5)));
        let mut six = Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
        assert!(get_unsigned_varint(&mut six).is_err());
        let mut max = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(get_unsigned_varint(&mut max), Ok(u32::MAX));
    }

    #[test]
    fn lengths_beyond_the_buffer_fail_before_allocating() {
        let mut huge_string = Bytes::from_static(&[0x7f, 0xff, b'a']);
        assert!(matches!(get_nullable_string(&mut huge_string, false), Err(DecodeError::InvalidLength { .. })));
        let mut huge_array = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(get_array_length(&mut huge_array, false), Err(DecodeError::InvalidLength { .. })));
        let mut negative = Bytes::from_static(&[0xff, 0xfe]);
        assert!(matches!(get_nullable_string(&mut negative, false), Err(DecodeError::InvalidLength { .. })));
        let mut null = Bytes::from_static(&[0x00]);
        assert_eq!(get_nullable_string(&mut null, true), Ok(None));
    }

    #[test]
    fn tagged_fields_keep_unknown_in_order() {
        let unknown = vec![RawTaggedField { tag: 5, data: Bytes::from_static(b"xy") }];
        let mut known_data = BytesMut::new();
        known_data.put_i32(7);
        let mut encoded = bytes_of(|b| {
            put_tagged_fields(b, vec![(9, known_data), (0, BytesMut::from(&b"z"[..]))], &unknown).unwrap()
        });
        let mut seen = Vec::new();
        let mut kept = Vec::new();
        get_tagged_fields(&mut encoded, &mut kept, |tag, data| {
            seen.push(tag);
            if tag == 5 {
                return Ok(false);
            }
            data.advance(data.remaining());
            Ok(true)
        })
        .unwrap();
        assert_eq!(seen, vec![0, 5, 9]);
        assert_eq!(kept, unknown);
    }
}
