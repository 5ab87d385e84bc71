//! Fetch sessions (KIP-227). The broker may decline to create a session, in
//! which case it answers with session id 0 and the client keeps sending full
//! fetch requests; krabka declines for now, which every client supports.
//! A request naming a session this broker never created is refused with
//! FETCH_SESSION_ID_NOT_FOUND, as Kafka does for an evicted session.

use krabka_protocol::FetchRequest;

use crate::errors::code;

/// Kafka's FETCH_SESSION_ID_NOT_FOUND.
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// Kafka's INVALID_FETCH_SESSION_EPOCH.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// The session epoch a client sends to close its session (or to ask for none).
const FINAL_EPOCH: i32 = -1;

#[derive(Default)]
pub struct FetchSessionCache {}

impl FetchSessionCache {
    /// Checks the request's session fields; returns the error code that
    /// refuses the whole fetch, or the session id to answer with.
    pub fn admit(&self, request: &FetchRequest) -> Result<i32, i16> {
        match (request.session_id, request.session_epoch) {
            // A new full session requested (epoch 0) or none at all (-1).
            (0, 0) | (0, FINAL_EPOCH) => Ok(0),
            (0, _) => Err(INVALID_FETCH_SESSION_EPOCH),
            // Closing a session we do not have is harmless.
            (_, FINAL_EPOCH) => Ok(0),
            _ => Err(FETCH_SESSION_ID_NOT_FOUND),
        }
    }
}

#[allow(dead_code)]
const _: i16 = code::NONE;
