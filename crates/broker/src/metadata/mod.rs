//! Cluster metadata: topics, partitions, configs and producer-id blocks.
//!
//! The records, the image, deltas, the snapshot encoding and the publisher
//! are krabka-metadata's, re-exported here so the broker names them in one
//! place. Decisions are krabka-controller's plans; `store.rs` is the glue
//! that commits them, one at a time, and publishes the immutable image
//! each commit makes (request handlers share it through an `Arc`). On a
//! node that is its quorum's only voter it commits through krabka-raft's
//! single voter (which decides when to snapshot and stores snapshots
//! through krabka-log), and on start rebuilds the image from the newest
//! snapshot plus the log after it. In a multi-voter quorum
//! (`quorum_writer.rs`) the image follows what the quorum commits, and
//! the node commits only while it is the active controller.

mod quorum_writer;
pub mod store;

pub use krabka_metadata::{delta, image, publisher, records, snapshot};
pub use krabka_metadata::{
    MetadataDelta, MetadataImage, MetadataPublisher, MetadataRecord, MetadataUpdate, PartitionImage, TopicImage,
};
pub use store::{MetadataError, MetadataStore, QuorumView};
