//! One request frame (size prefix removed), as the broker reads it off a socket.
//!
//! Checks: parsing the header and decoding the body never panic; and when the
//! body decodes, it re-encodes at the same version, that encoding decodes
//! back to an equal value using every byte, and encoding is then stable. The
//! same holds for the request header. "Equal" forgives NaN and the order of
//! unknown tagged fields (see `assert_same_message`). Re-encoded bytes are
//! not compared with the input: non-canonical input (a bool byte of 7, a
//! padded varint, tagged fields out of order) legitimately comes back canonical.
#![no_main]

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::{Message, RequestBody, RequestHeader};
use krabka_protocol_fuzz::assert_same_message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = RequestFrame::parse(Bytes::copy_from_slice(data)) else { return };
    let api_key = frame.api_key;
    let version = frame.api_version();
    let info = api_key.info();
    assert!((info.min_version..=info.max_version).contains(&version));
    assert_eq!(frame.header.request_api_key, api_key as i16);

    // The header round-trips at its own version.
    let header_version = info.request_header_version(version);
    let header_bytes = frame
        .header
        .to_bytes(header_version)
        .unwrap_or_else(|e| panic!("decoded request header does not re-encode at v{header_version}: {e}"));
    let mut rest = header_bytes.clone();
    let header = RequestHeader::decode(&mut rest, header_version)
        .unwrap_or_else(|e| panic!("re-encoded request header does not decode at v{header_version}: {e}"));
    assert!(rest.is_empty(), "re-encoded request header left {} bytes", rest.len());
    assert_same_message(&frame.header, &header, "request header");

    let Ok(body) = frame.decode_body() else { return };
    assert_eq!(body.api_key(), api_key);

    let mut first = BytesMut::new();
    body.encode(&mut first, version)
        .unwrap_or_else(|e| panic!("decoded {api_key:?} v{version} request does not re-encode: {e}"));
    let first = first.freeze();
    let mut rest = first.clone();
    let again = RequestBody::decode(api_key, version, &mut rest)
        .unwrap_or_else(|e| panic!("re-encoded {api_key:?} v{version} request does not decode: {e}"));
    assert!(rest.is_empty(), "re-encoded {api_key:?} v{version} request left {} bytes unread", rest.len());

    let mut second = BytesMut::new();
    again.encode(&mut second, version).expect("second encoding");
    assert_eq!(first, second.freeze(), "{api_key:?} v{version} request encoding is not stable");
    assert_same_message(&body, &again, &format!("{api_key:?} v{version} request"));
});
