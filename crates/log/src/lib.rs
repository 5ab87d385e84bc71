//! krabka-log: one partition's log on disk, in Apache Kafka's own format.
//!
//! Segments (`<base offset>.log`) hold record batches exactly as Kafka writes
//! them, beside sparse memory-mapped offset and time indexes; the checkpoint
//! files are Kafka's text formats. It must never lose an acknowledged record,
//! never copy record bytes on the read path (reads return file ranges for
//! sendfile), and it knows nothing of the network: the broker crate ties the
//! log to sockets. Bytes read from disk are untrusted: a corrupt file is an
//! error or a recovery, never a panic.
//!
//! Dependencies inside the crate point one way: `log.rs` (the
//! [`PartitionLog`] API) uses `validate`, `loader`, `segments` and `cleaner`,
//! which use `segment` and `index`, and none of them uses `log.rs`;
//! `manager` (the log directories, Kafka's `LogManager`) sits above them
//! all, and `replicated` (the [`ReplicatedLog`] trait raft drives, which
//! `PartitionLog` implements) above `log.rs` and `snapshots` (a replicated
//! log's snapshot files, KRaft's `<end offset>-<epoch>.checkpoint`, written
//! atomically; their bytes are the caller's to encode), which stands on
//! `fsutil` alone, as does `quorum_state` (KRaft's `quorum-state` file, the
//! election state, in Kafka's JSON). `topic_config` (Kafka's
//! topic configs, the log's settings, and their validation) stands on
//! `config_values` (typed config values) and on nothing else here.

pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod config_values;
pub mod error;
pub mod fsutil;
pub mod index;
pub mod leader_epoch;
mod loader;
pub mod log;
pub mod manager;
pub mod producer_state;
pub mod quorum_state;
pub mod replicated;
pub mod segment;
mod segments;
pub mod snapshots;
pub mod topic_config;
mod validate;

pub use crate::cleaner::CleanReport;
pub use crate::config::{CleanupPolicy, LogConfig, TimestampPolicy};
pub use crate::error::{LogError, RecordRefusal};
pub use crate::loader::OpenReport;
pub use crate::log::{AppendInfo, PartitionLog, ReadInfo};
pub use crate::manager::{LogManager, PartitionCheckpoint};
pub use crate::quorum_state::QuorumState;
pub use crate::replicated::{open_replicated_log, ReplicatedLog};
pub use crate::segment::FileSlice;
pub use crate::snapshots::SnapshotId;
