//! Request and response framing: the i32 size prefix, the request header
//! (v1, or v2 for flexible API versions) and the response header (v0, or v1
//! for flexible versions, except ApiVersions which always answers with v0 so
//! that a client can read it before it knows what the broker speaks).
//!
//! Kafka 4.3.1 has no request header v0 any more: it was only used by
//! ControlledShutdown v0, which Kafka 4 removed.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::generated::{ApiKey, RequestBody, RequestHeader, ResponseHeader};
use crate::message::Message;

/// Bytes in the size prefix of every frame.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// A request whose header is parsed and whose body is left as bytes, so the
/// broker can decide how (and whether) to decode it.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestFrame {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    /// The rest of the frame after the header: a zero-copy slice.
    pub body: Bytes,
}

/// Why a request frame's header could not be taken. The variants that know
/// the correlation id let the broker still answer the client.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("request header truncated: {0} bytes")]
    Truncated(usize),
    #[error("unknown API key {api_key}")]
    UnknownApiKey { api_key: i16, api_version: i16, correlation_id: i32 },
    #[error("{api_key:?} does not support version {api_version}")]
    UnsupportedVersion { api_key: ApiKey, api_version: i16, correlation_id: i32 },
    #[error("bad request header: {0}")]
    Header(DecodeError),
}

/// The leading fields every request header version shares.
fn peek_ids(frame: &Bytes) -> Result<(i16, i16, i32), FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::Truncated(frame.len()));
    }
    let mut head = &frame[..8];
    Ok((head.get_i16(), head.get_i16(), head.get_i32()))
}

impl RequestFrame {
    /// Parses the header of one request frame (size prefix already removed).
    pub fn parse(mut frame: Bytes) -> Result<Self, FrameError> {
        let (raw_key, api_version, correlation_id) = peek_ids(&frame)?;
        let Some(api_key) = ApiKey::from_i16(raw_key) else {
            return Err(FrameError::UnknownApiKey { api_key: raw_key, api_version, correlation_id });
        };
        let info = api_key.info();
        if api_version < info.min_version || api_version > info.max_version {
            return Err(FrameError::UnsupportedVersion { api_key, api_version, correlation_id });
        }
        let header =
            RequestHeader::decode(&mut frame, info.request_header_version(api_version)).map_err(FrameError::Header)?;
        Ok(RequestFrame { api_key, header, body: frame })
    }

    pub fn api_version(&self) -> i16 {
        self.header.request_api_version
    }

    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }

    /// The frame as the client sent it, without its size prefix: what an
    /// Envelope carries when a broker forwards the request.
    pub fn to_bytes(&self) -> Result<Bytes, EncodeError> {
        let mut buf = BytesMut::with_capacity(64 + self.body.len());
        self.header.encode(&mut buf, self.api_key.info().request_header_version(self.api_version()))?;
        buf.extend_from_slice(&self.body);
        Ok(buf.freeze())
    }

    /// Decodes the body; `records` fields stay slices of the frame.
    pub fn decode_body(&self) -> Result<RequestBody, DecodeError> {
        RequestBody::decode(self.api_key, self.api_version(), &mut self.body.clone())
    }
}

/// Appends a size-prefixed frame to `buf` written by `write`, then fills in
/// the size. Frames are bounded by i32::MAX as Kafka's are.
fn framed(buf: &mut BytesMut, write: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_i32(0);
    write(buf)?;
    let size = buf.len() - start - SIZE_PREFIX_BYTES;
    let size = i32::try_from(size).map_err(|_| EncodeError::TooLong { what: "frame", length: size })?;
    buf[start..start + SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Appends one response frame: size, header (version chosen by the API), body.
pub fn encode_response<M: Message>(
    buf: &mut BytesMut,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &M,
) -> Result<(), EncodeError> {
    let header_version = api_key.info().response_header_version(api_version);
    framed(buf, |buf| {
        ResponseHeader { correlation_id, ..Default::default() }.encode(buf, header_version)?;
        body.encode(buf, api_version)
    })
}

/// Appends one request frame (for clients and tests): size, header, body.
pub fn encode_request<M: Message>(
    buf: &mut BytesMut,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    body: &M,
) -> Result<(), EncodeError> {
    request_frame(buf, api_key, api_version, correlation_id, client_id, |buf| body.encode(buf, api_version))
}

/// Appends one request frame of any API's body, as [`encode_request`].
pub fn encode_request_body(
    buf: &mut BytesMut,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    body: &RequestBody,
) -> Result<(), EncodeError> {
    request_frame(buf, body.api_key(), api_version, correlation_id, client_id, |buf| body.encode(buf, api_version))
}

fn request_frame(
    buf: &mut BytesMut,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    write_body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let header_version = api_key.info().request_header_version(api_version);
    let header = RequestHeader {
        request_api_key: api_key as i16,
        request_api_version: api_version,
        correlation_id,
        client_id: client_id.map(str::to_owned),
        ..Default::default()
    };
    framed(buf, |buf| {
        header.encode(buf, header_version)?;
        write_body(buf)
    })
}

/// Reads the correlation id and body of a response frame (size prefix
/// removed), given the API and version of the request it answers.
pub fn parse_response_header(
    api_key: ApiKey,
    api_version: i16,
    frame: &mut Bytes,
) -> Result<ResponseHeader, DecodeError> {
    ResponseHeader::decode(frame, api_key.info().response_header_version(api_version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::{ApiVersionsRequest, ApiVersionsResponse, FetchRequest, MetadataRequest};

    fn without_prefix(buf: BytesMut) -> Bytes {
        let mut frame = buf.freeze();
        let size = frame.get_i32() as usize;
        assert_eq!(size, frame.len());
        frame
    }

    #[test]
    fn flexible_request_uses_header_v2_and_round_trips() {
        let request = MetadataRequest { allow_auto_topic_creation: true, ..Default::default() };
        let mut buf = BytesMut::new();
        encode_request(&mut buf, ApiKey::Metadata, 12, 7, Some("client-1"), &request).unwrap();
        let frame = RequestFrame::parse(without_prefix(buf)).unwrap();
        assert_eq!(frame.api_key, ApiKey::Metadata);
        assert_eq!(frame.correlation_id(), 7);
        assert_eq!(frame.header.client_id.as_deref(), Some("client-1"));
        assert_eq!(frame.decode_body().unwrap(), RequestBody::Metadata(Box::new(request)));
    }

    #[test]
    fn a_parsed_frame_gives_back_the_bytes_the_client_sent() {
        for (version, client_id) in [(12, Some("client-1")), (8, None)] {
            let request = MetadataRequest { allow_auto_topic_creation: true, ..Default::default() };
            let mut buf = BytesMut::new();
            encode_request(&mut buf, ApiKey::Metadata, version, 7, client_id, &request).unwrap();
            let sent = without_prefix(buf);
            assert_eq!(RequestFrame::parse(sent.clone()).unwrap().to_bytes().unwrap(), sent, "v{version}");
        }
    }

    #[test]
    fn api_versions_response_header_is_always_v0() {
        // v3 is flexible, yet its response header has no tagged-field byte.
        let mut buf = BytesMut::new();
        encode_response(&mut buf, ApiKey::ApiVersions, 3, 42, &ApiVersionsResponse::default()).unwrap();
        let mut frame = without_prefix(buf);
        assert_eq!(frame.get_i32(), 42);
        let body = ApiVersionsResponse::decode(&mut frame, 3).unwrap();
        assert_eq!(body, ApiVersionsResponse::default());
        assert!(frame.is_empty());
    }

    #[test]
    fn client_id_keeps_the_classic_string_form_in_header_v2() {
        let mut buf = BytesMut::new();
        encode_request(&mut buf, ApiKey::ApiVersions, 3, 1, Some("ab"), &ApiVersionsRequest::default()).unwrap();
        let frame = without_prefix(buf);
        // api key, version, correlation id, then an i16 length 2 and "ab".
        assert_eq!(&frame[8..12], &[0, 2, b'a', b'b']);
    }

    #[test]
    fn unknown_keys_and_versions_keep_the_correlation_id() {
        let mut raw = BytesMut::new();
        raw.put_i16(999);
        raw.put_i16(0);
        raw.put_i32(5);
        raw.put_i16(-1);
        assert_eq!(
            RequestFrame::parse(raw.freeze()),
            Err(FrameError::UnknownApiKey { api_key: 999, api_version: 0, correlation_id: 5 })
        );
        let mut raw = BytesMut::new();
        raw.put_i16(ApiKey::Fetch as i16);
        raw.put_i16(FetchRequest::MAX_VERSION + 1);
        raw.put_i32(6);
        assert!(matches!(
            RequestFrame::parse(raw.freeze()),
            Err(FrameError::UnsupportedVersion { api_key: ApiKey::Fetch, correlation_id: 6, .. })
        ));
        assert_eq!(RequestFrame::parse(Bytes::from_static(&[0, 1])), Err(FrameError::Truncated(2)));
    }
}
