//! Cluster metadata: topics, partitions, configs and producer-id blocks.
//!
//! The records, the image, deltas, the snapshot encoding and the publisher
//! are krabka-metadata's, re-exported here so the broker names them in one
//! place. Decisions and commits are krabka-controller's (through
//! krabka-raft's single voter, which decides when to snapshot and stores
//! snapshots through krabka-log); `store.rs` is the glue: it opens the
//! `__cluster_metadata-0` log, passes the snapshot threshold, runs
//! controller operations under one writer lock and publishes the immutable
//! image each commit makes (request handlers share it through an `Arc`).
//! On start the image is rebuilt from the newest snapshot plus the log
//! after it, so metadata survives restarts.

pub mod store;

pub use krabka_metadata::{delta, image, publisher, records, snapshot};
pub use krabka_metadata::{
    MetadataDelta, MetadataImage, MetadataPublisher, MetadataRecord, MetadataUpdate, PartitionImage, TopicImage,
};
pub use store::{MetadataError, MetadataStore};
