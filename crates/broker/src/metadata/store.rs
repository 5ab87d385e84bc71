//! The IO side of cluster metadata on the one combined node: it opens the
//! `__cluster_metadata-0` log after its newest snapshot (krabka-log),
//! hands it to raft's voter with the snapshot policy's threshold and to the
//! controller (krabka-controller, which decodes the snapshot, replays the
//! log after it, commits through raft and writes the snapshots raft says
//! are due), and publishes each image the controller commits. Writers are
//! serialised (the node is its own controller); readers take the current
//! `Arc<MetadataImage>` without waiting for them.

use std::path::Path;
use std::sync::{Arc, Mutex};

use krabka_controller::{Commit, Controller};
use krabka_log::{open_replicated_log, LogConfig, PartitionLog};
use krabka_metadata::{MetadataImage, MetadataPublisher, MetadataUpdate};
use krabka_raft::SingleVoter;

use crate::clock::now_ms;

pub use krabka_controller::MetadataError;

/// The metadata log's directory name inside `metadata.log.dir`, as KRaft's.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

pub struct MetadataStore {
    /// The one writer: the controller (and its voter and log).
    writer: Mutex<Controller<PartitionLog>>,
    publisher: MetadataPublisher,
}

fn metadata_log_config() -> LogConfig {
    // Metadata is never deleted by retention (a snapshot would replace it).
    LogConfig { retention_ms: -1, retention_bytes: -1, segment_bytes: 64 * 1024 * 1024, ..LogConfig::default() }
}

impl MetadataStore {
    /// Opens the metadata log under `metadata_log_dir` and replays it.
    /// `snapshot_every_bytes` is `metadata.log.max.record.bytes.between.snapshots`.
    pub fn open(
        metadata_log_dir: &Path,
        snapshot_every_bytes: u64,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Self, MetadataError> {
        let dir = metadata_log_dir.join(METADATA_LOG_DIR_NAME);
        // Every commit is fsynced, but a crash can still tear the tail
        // mid-write: after an unclean stop the log is checked from the
        // snapshot on (it is small after a snapshot).
        let log = open_replicated_log(&dir, metadata_log_config(), clean_shutdown, now_ms)?;
        let (voter, snapshot) = SingleVoter::open(log, snapshot_every_bytes, now_ms)?;
        let controller = Controller::open(voter, snapshot)?;
        let image = controller.image().clone();
        tracing::info!(
            topics = image.topics.len(),
            records_end = controller.voter().high_watermark(),
            "metadata image loaded"
        );
        Ok(MetadataStore { writer: Mutex::new(controller), publisher: MetadataPublisher::new(image) })
    }

    /// The current image: cheap, never waits for a writer.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.image()
    }

    /// Who is told of every commit (the image and what changed).
    pub fn publisher(&self) -> &MetadataPublisher {
        &self.publisher
    }

    /// Runs one controller operation (`op`, given the controller and the
    /// time) under the writer lock; what it commits is published (and
    /// snapshotted when raft says one is due, by the controller).
    /// Returns the new image with its delta, and the operation's result.
    pub fn control<T, E>(
        &self,
        op: impl FnOnce(&mut Controller<PartitionLog>, i64) -> Result<Commit<T>, E>,
    ) -> Result<(MetadataUpdate, T), E> {
        let mut controller = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Commit { update, committed, result } = op(&mut controller, now_ms())?;
        if committed.is_some() {
            self.publisher.publish(&update);
        }
        Ok((update, result))
    }

    /// The metadata log's end offset (DescribeQuorum reports it).
    pub fn log_end_offset(&self) -> i64 {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).voter().log().log_end_offset()
    }

    /// Flushes and closes the metadata log (clean shutdown).
    pub fn close(&self) -> Result<(), MetadataError> {
        let mut controller = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Flush, snapshot producer state and trim the indexes, as for any log.
        controller.voter_mut().log_mut().prepare_clean_shutdown(now_ms())?;
        Ok(())
    }
}
