//! krabka-metadata: the cluster's metadata as KRaft keeps it in
//! `__cluster_metadata`: the records, the image they build, what each
//! commit changed, and the snapshot encoding of the image.
//!
//! It must never decide anything (what a request may change is the
//! controller's), never commit (records reach the log through raft; this
//! crate applies what was committed), never touch a file or a socket or
//! read the clock (times come in as arguments; snapshot files are
//! krabka-log's, and when to take one is krabka-raft's), and never import
//! the log, raft or the broker.
//!
//! Modules point one way: `records` (the wire frames) < `image` (records
//! applied) < `delta` (what applying changed) < `loader` (committed batches
//! applied, chunk by chunk) and `publisher` (the current image and its
//! subscribers); `features` names Kafka's feature flags and the ranges
//! krabka supports; `directory_id` Kafka's reserved log-directory ids;
//! `snapshot` encodes an image as snapshot
//! bytes and decodes them back.

pub mod delta;
pub mod directory_id;
pub mod features;
pub mod image;
pub mod loader;
pub mod publisher;
pub mod records;
pub mod snapshot;

pub use delta::MetadataDelta;
pub use image::{MetadataImage, PartitionImage, QuotaEntity, TopicImage};
pub use loader::MetadataLoader;
pub use publisher::{MetadataPublisher, MetadataUpdate};
pub use records::MetadataRecord;
