//! krabka-broker: the server that speaks Kafka's protocol over krabka's logs.
//!
//! It ties the wire layer (krabka-protocol) to the partition logs (krabka-log):
//! listeners and connections, request dispatch, the handlers of each API, the
//! metadata image and its log, and observability. It must never block one
//! connection on another, never copy record bytes on produce or fetch, and
//! never acknowledge a record the log has not accepted.

pub mod config;
pub mod connection;
pub mod errors;
pub mod group;
pub mod handlers;
pub mod log_manager;
pub mod metadata;
pub mod observability;
pub mod replica_manager;
pub mod server;
