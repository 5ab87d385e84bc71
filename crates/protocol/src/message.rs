//! The trait every generated message implements: one type covers all the
//! versions a spec declares, and the version is chosen at decode/encode time.

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{DecodeResult, EncodeResult};

pub trait Message: Sized + Clone + Debug + Default + PartialEq {
    /// The spec's name, e.g. `ProduceRequest`.
    const NAME: &'static str;
    const MIN_VERSION: i16;
    const MAX_VERSION: i16;
    /// The first version with compact encodings and tagged fields, if any.
    const FLEXIBLE_MIN_VERSION: Option<i16>;

    /// Decodes without checking the version (see [`Message::decode`]).
    fn decode_body(buf: &mut Bytes, version: i16) -> DecodeResult<Self>;
    /// Encodes without checking the version (see [`Message::encode`]).
    fn encode_body(&self, buf: &mut BytesMut, version: i16) -> EncodeResult<()>;

    fn supports_version(version: i16) -> bool {
        (Self::MIN_VERSION..=Self::MAX_VERSION).contains(&version)
    }

    fn is_flexible(version: i16) -> bool {
        Self::FLEXIBLE_MIN_VERSION.is_some_and(|min| version >= min)
    }

    /// Decodes the message as of `version`, refusing versions the spec lacks.
    fn decode(buf: &mut Bytes, version: i16) -> DecodeResult<Self> {
        if !Self::supports_version(version) {
            return Err(DecodeError::UnsupportedVersion { message: Self::NAME, version });
        }
        Self::decode_body(buf, version)
    }

    /// Encodes the message as of `version`. Fails when a field set to a
    /// non-default value does not exist at that version and is not ignorable.
    fn encode(&self, buf: &mut BytesMut, version: i16) -> EncodeResult<()> {
        if !Self::supports_version(version) {
            return Err(EncodeError::UnsupportedVersion { message: Self::NAME, version });
        }
        self.encode_body(buf, version)
    }

    /// Encodes into a fresh buffer.
    fn to_bytes(&self, version: i16) -> EncodeResult<Bytes> {
        let mut buf = BytesMut::new();
        self.encode(&mut buf, version)?;
        Ok(buf.freeze())
    }
}
