//! Cluster metadata: topics, partitions, configs and producer-id blocks.
//!
//! Every change is a KRaft metadata record appended (and fsynced) to the
//! `__cluster_metadata-0` log first, then applied to an immutable in-memory
//! image that request handlers share through an `Arc`. On start the image is
//! rebuilt by replaying that log, so metadata survives restarts.

pub mod image;
pub mod records;
pub mod snapshot;
pub mod store;

pub use image::{MetadataImage, PartitionImage, TopicImage};
pub use records::MetadataRecord;
pub use store::{MetadataError, MetadataStore};
