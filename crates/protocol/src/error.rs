//! Typed errors for decoding and encoding. Decoders never panic: every way
//! bytes can be wrong has a variant here, so the broker can map it to the
//! Kafka error code (usually CORRUPT_MESSAGE or INVALID_REQUEST).

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated: needed {needed} bytes, {remaining} remain")]
    Truncated { needed: usize, remaining: usize },
    #[error("invalid length {length} for {what}")]
    InvalidLength { what: &'static str, length: i64 },
    #[error("null value for non-nullable {0}")]
    UnexpectedNull(&'static str),
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("varint longer than {0} bytes")]
    VarintTooLong(usize),
    #[error("{message} does not support version {version}")]
    UnsupportedVersion { message: &'static str, version: i16 },
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("tagged field {tag} left {left} bytes unread")]
    TaggedFieldSize { tag: u32, left: usize },
    #[error("{left} trailing bytes after the message")]
    TrailingBytes { left: usize },
    #[error("invalid value for {what}: {value}")]
    InvalidValue { what: &'static str, value: i64 },
}

/// Why a message could not be encoded at the requested version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("{message} does not support version {version}")]
    UnsupportedVersion { message: &'static str, version: i16 },
    #[error("field {field} of {message} is not supported at version {version} and is not ignorable")]
    FieldNotSupported { message: &'static str, field: &'static str, version: i16 },
    #[error("null value for non-nullable {0}")]
    UnexpectedNull(&'static str),
    #[error("{what} is too long: {length}")]
    TooLong { what: &'static str, length: usize },
}
