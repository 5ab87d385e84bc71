//! krabka-format: formats a storage directory the way `kafka-storage.sh format`
//! does, so that a broker starts on a directory that names its cluster and node.
//!
//! A formatted log directory holds `meta.properties` (version 1, KRaft):
//! `cluster.id`, `node.id` and `directory.id`. This crate also holds the small
//! Java-properties reader the broker's configuration builds on. It must never
//! overwrite a directory that is already formatted for another cluster or node.
//!
//! With KIP-853's flags (`--standalone`, `--initial-controllers`,
//! `--no-initial-controllers`; checked in `dynamic_quorum`, voters parsed in
//! `dynamic_voters`) it also writes the metadata log's bootstrap snapshot
//! naming the initial voters (`bootstrap_snapshot`), as Kafka 4.3.1 does.

pub mod bootstrap_snapshot;
pub mod dynamic_quorum;
pub mod dynamic_voters;
pub mod meta_properties;
pub mod properties;
pub mod storage;

pub use krabka_protocol::Uuid as KafkaUuid;
pub use meta_properties::{format_log_dir, FormatError, MetaProperties};
