//! One response body, as a client (or a broker talking to another broker)
//! reads it after the response header.
//!
//! Input: bytes 0-1 (big-endian) pick the API, as an index into
//! `ApiKey::ALL` modulo its length; bytes 2-3 pick the version, mapped into
//! the API's range (`min + v % (max - min + 1)`); the rest is the body.
//! Checks as for requests: decoding never panics, and a decoded body
//! re-encodes at the same version, decodes back to an equal value using
//! every byte, and encodes to the same bytes again ("equal" forgiving NaN and
//! the order of unknown tagged fields, see `assert_same_message`).
#![no_main]

use bytes::{Bytes, BytesMut};
use krabka_protocol::{ApiKey, ResponseBody};
use krabka_protocol_fuzz::assert_same_message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((selector, body)) = data.split_first_chunk::<4>() else { return };
    let index = usize::from(u16::from_be_bytes([selector[0], selector[1]])) % ApiKey::ALL.len();
    let api_key = ApiKey::ALL[index];
    let info = api_key.info();
    let span = i32::from(info.max_version) - i32::from(info.min_version) + 1;
    let version =
        (i32::from(info.min_version) + i32::from(u16::from_be_bytes([selector[2], selector[3]])) % span) as i16;

    let Ok(decoded) = ResponseBody::decode(api_key, version, &mut Bytes::copy_from_slice(body)) else { return };
    assert_eq!(decoded.api_key(), api_key);

    let mut first = BytesMut::new();
    decoded
        .encode(&mut first, version)
        .unwrap_or_else(|e| panic!("decoded {api_key:?} v{version} response does not re-encode: {e}"));
    let first = first.freeze();
    let mut rest = first.clone();
    let again = ResponseBody::decode(api_key, version, &mut rest)
        .unwrap_or_else(|e| panic!("re-encoded {api_key:?} v{version} response does not decode: {e}"));
    assert!(rest.is_empty(), "re-encoded {api_key:?} v{version} response left {} bytes unread", rest.len());

    let mut second = BytesMut::new();
    again.encode(&mut second, version).expect("second encoding");
    assert_eq!(first, second.freeze(), "{api_key:?} v{version} response encoding is not stable");
    assert_same_message(&decoded, &again, &format!("{api_key:?} v{version} response"));
});
