//! Cluster metadata: topics, partitions, configs and producer-id blocks.
//!
//! The records, the image, deltas, snapshots and the publisher are
//! krabka-metadata's, re-exported here so the broker names them in one
//! place; commits go through krabka-raft's single voter. `store.rs` is the
//! glue: every change is a KRaft metadata record committed (appended and
//! fsynced) to the `__cluster_metadata-0` log first, then applied to an
//! immutable in-memory image that request handlers share through an `Arc`.
//! On start the image is rebuilt from the newest snapshot plus the log
//! after it, so metadata survives restarts.

pub mod store;

pub use krabka_metadata::{delta, image, publisher, records, snapshot};
pub use krabka_metadata::{
    MetadataDelta, MetadataImage, MetadataPublisher, MetadataRecord, MetadataUpdate, PartitionImage, TopicImage,
};
pub use store::{MetadataError, MetadataStore};
