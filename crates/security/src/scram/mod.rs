//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks
//! them: `formatter` < `messages` < `server`, `client`.

pub(crate) mod client;
pub(crate) mod formatter;
pub(crate) mod messages;
pub(crate) mod server;
#[cfg(test)]
mod tests;

pub use formatter::{constant_time_eq, sasl_name, secure_random_string, username_from_sasl_name};
