//! Kafka framing over tokio sockets: requests encoded with krabka-protocol's
//! generated messages, responses read as size-prefixed frames, and a
//! one-request-at-a-time [`Client`] for everything but the produce pipeline.
//!
//! API versions are fixed rather than negotiated: these are the newest that
//! still name topics (later Produce and Fetch versions take topic ids) and
//! every Kafka 4 broker and krabka serve them.

use anyhow::{bail, ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use krabka_protocol::frame::{encode_request, parse_response_header};
use krabka_protocol::{ApiKey, Message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const CLIENT_ID: &str = "krabka-loadgen";

pub const PRODUCE_VERSION: i16 = 11;
pub const FETCH_VERSION: i16 = 12;
pub const LIST_OFFSETS_VERSION: i16 = 7;
pub const METADATA_VERSION: i16 = 12;
pub const CREATE_TOPICS_VERSION: i16 = 7;
pub const INIT_PRODUCER_ID_VERSION: i16 = 4;

/// Responses larger than this are refused rather than allocated: a fetch asks
/// for at most 64 MiB, everything else is small.
const MAX_FRAME_BYTES: usize = 256 << 20;

/// One request frame, size prefix included.
pub fn request<M: Message>(api: ApiKey, version: i16, correlation_id: i32, body: &M) -> anyhow::Result<BytesMut> {
    let mut buf = BytesMut::new();
    encode_request(&mut buf, api, version, correlation_id, Some(CLIENT_ID), body)
        .with_context(|| format!("encoding {api:?} v{version}"))?;
    Ok(buf)
}

/// The correlation id and body of a response frame (size prefix removed).
pub fn response<M: Message>(api: ApiKey, version: i16, mut frame: Bytes) -> anyhow::Result<(i32, M)> {
    let header = parse_response_header(api, version, &mut frame).with_context(|| format!("{api:?} response header"))?;
    let body = M::decode(&mut frame, version).with_context(|| format!("decoding {api:?} v{version} response"))?;
    Ok((header.correlation_id, body))
}

/// Reads one size-prefixed frame and returns it without the prefix.
pub async fn read_frame(reader: &mut (impl AsyncRead + Unpin)) -> anyhow::Result<Bytes> {
    read_frame_into(reader, &mut BytesMut::new()).await
}

/// [`read_frame`] into `buf`'s memory, which is used again once the frame
/// last read into it is dropped. A reader's fetch responses (up to 64 MiB)
/// each in new memory cost a page fault and a cleared page per 4 KiB: about
/// a third of a fan-out reader's CPU, as much as receiving the bytes.
pub async fn read_frame_into(reader: &mut (impl AsyncRead + Unpin), buf: &mut BytesMut) -> anyhow::Result<Bytes> {
    let size = reader.read_i32().await.context("reading a response size")?;
    let size = usize::try_from(size).ok().filter(|&s| s <= MAX_FRAME_BYTES);
    let Some(size) = size else { bail!("response frame of invalid size") };
    buf.clear();
    buf.reserve(size);
    while buf.len() < size {
        let want = size - buf.len();
        let mut rest = (&mut *buf).limit(want);
        let read = reader.read_buf(&mut rest).await.context("reading a response")?;
        ensure!(read > 0, "the connection closed inside a response");
    }
    debug_assert_eq!(buf.len(), size);
    Ok(buf.split().freeze())
}

/// Connects with Nagle off: requests are written whole and waited on.
pub async fn connect(address: &str) -> anyhow::Result<TcpStream> {
    let stream = TcpStream::connect(address).await.with_context(|| format!("connecting to {address}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A connection used for one request at a time.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
    /// Where responses are read, kept from one to the next.
    responses: BytesMut,
    pub address: String,
}

impl Client {
    pub async fn connect(address: &str) -> anyhow::Result<Self> {
        let stream = connect(address).await?;
        Ok(Client { stream, next_correlation_id: 0, responses: BytesMut::new(), address: address.to_string() })
    }

    /// Sends `body` and waits for its response.
    pub async fn call<Req: Message, Resp: Message>(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> anyhow::Result<Resp> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = request(api, version, correlation_id, body)?;
        self.stream.write_all(&frame).await.with_context(|| format!("sending {api:?} to {}", self.address))?;
        let frame = read_frame_into(&mut self.stream, &mut self.responses)
            .await
            .with_context(|| format!("{api:?} from {}", self.address))?;
        let (answered, response) = response(api, version, frame)?;
        ensure!(answered == correlation_id, "{api:?} answered correlation id {answered}, expected {correlation_id}");
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    #[tokio::test]
    async fn frames_are_read_whole_into_memory_used_again_once_the_last_is_dropped() {
        let (first, second) = (vec![7u8; 100_000], vec![9u8; 90_000]);
        let stream = [framed(&first), framed(&second), framed(&[1, 2, 3])].concat();
        let mut reader = stream.as_slice();
        let mut buf = BytesMut::new();
        let frame = read_frame_into(&mut reader, &mut buf).await.unwrap();
        assert_eq!(&frame[..], &first[..]);
        let memory = frame.as_ptr();
        drop(frame);
        let frame = read_frame_into(&mut reader, &mut buf).await.unwrap();
        assert_eq!((&frame[..], frame.as_ptr()), (&second[..], memory), "the same memory");
        // Still held: the next frame goes elsewhere, and neither is disturbed.
        let third = read_frame_into(&mut reader, &mut buf).await.unwrap();
        assert_eq!((&frame[..], &third[..]), (&second[..], &[1u8, 2, 3][..]));
        let error = read_frame_into(&mut &framed(&[5; 10])[..8], &mut buf).await.unwrap_err();
        assert!(format!("{error:#}").contains("closed inside a response"), "{error:#}");
    }
}
