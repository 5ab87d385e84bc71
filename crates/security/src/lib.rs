//! krabka-security: the SASL mechanisms a Kafka broker authenticates
//! clients with, as Apache Kafka 4.3.1 speaks them: PLAIN and
//! SCRAM-SHA-256/512 server state machines (and the matching clients), the
//! SCRAM credential arithmetic the controller needs for
//! AlterUserScramCredentials, the `sasl.jaas.config` parser, which
//! client quota applies to a request (`quota`), and the principal name of
//! a TLS client: its certificate's subject as Java prints it (`x509`) put
//! through `ssl.principal.mapping.rules` (`ssl_principal`).
//!
//! This crate is sans-IO. It must never open a socket, use tokio or any
//! runtime, spawn a thread, or read the clock; it does not log. The broker
//! feeds it SaslAuthenticate tokens and sends back what it answers; the
//! credentials come in through the [`Credentials`] trait. Its only effect
//! on the world is reading the operating system's random source for nonces.
//! Input from clients is never trusted: no panics on any token.
//!
//! Modules point one way: `base64`, `principal`, `mechanism` <
//! `scram::formatter` < `credentials`, `scram::messages`, `failure` < `plain`,
//! `scram::server`, `scram::client` < `server`, `client`; `jaas`, `x509` and
//! `ssl_principal` stand alone.

pub mod acl;
pub mod base64;
mod client;
mod credentials;
mod failure;
pub mod jaas;
mod mechanism;
pub mod oauthbearer;
mod plain;
mod principal;
pub mod quota;
pub mod scram;
mod server;
pub mod ssl_principal;
pub mod x509;

pub use client::SaslClient;
pub use credentials::{salted_password, Credentials, InMemoryCredentials, ScramCredential};
pub use mechanism::{SaslMechanism, ScramMechanism};
pub use principal::KafkaPrincipal;
pub use scram::constant_time_eq;
pub use server::{AuthenticationFailed, SaslServer, SaslStep};
pub use ssl_principal::{InvalidRule, NoMatchingRule, SslPrincipalMapper};
pub use x509::{subject_name, X509Error};
