//! krabka-protocol: the Kafka wire protocol.
//!
//! Every request, response, header, KRaft metadata record and coordinator
//! record type is generated from Apache Kafka's JSON message specs by
//! `tools/protocol-gen` into [`generated`] (committed, never edited by hand).
//! The hot path is written by hand: primitives and varints ([`primitives`]),
//! record batches v2 with CRC-32C ([`records`]) and the compression codecs
//! ([`compression`]), and the Fetch response with holes where record bytes
//! sent from files go ([`fetch_splice`]). Kafka's error codes have their one
//! home in [`ErrorCode`].
//!
//! This crate must never panic or allocate an unchecked amount on bytes from
//! the network or the disk: every decoder returns `Ok` or a typed error. It
//! knows nothing of logs, sockets or the broker.

pub mod compression;
pub mod error;
pub mod error_code;
pub mod fetch_splice;
pub mod frame;
pub mod generated;
#[cfg(test)]
mod generated_tests;
pub mod java;
pub mod message;
pub mod primitives;
pub mod records;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod uuid;

pub use error::{DecodeError, EncodeError};
pub use error_code::ErrorCode;
pub use generated::*;
pub use message::Message;
pub use uuid::Uuid;

/// One error code a response carries and where it sits: the topic and
/// partition of the structs around it, where they name them
/// (`ResponseBody::for_each_error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseError<'a> {
    pub topic: Option<&'a str>,
    pub partition: Option<i32>,
    pub code: i16,
}
