//! The IO side of cluster metadata on the one combined node: it opens the
//! `__cluster_metadata-0` log and the newest snapshot, hands them to the
//! controller (krabka-controller, which replays them and commits through
//! raft), publishes each image the controller commits, and writes
//! snapshots. Writers are serialised (the node is its own controller);
//! readers take the current `Arc<MetadataImage>` without waiting for them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use krabka_controller::{Commit, Controller};
use krabka_log::{LogConfig, LogError, PartitionLog};
use krabka_metadata::{snapshot, MetadataImage, MetadataPublisher, MetadataUpdate};
use krabka_raft::SingleVoter;

use crate::clock::now_ms;

pub use krabka_controller::MetadataError;

/// The metadata log's directory name inside `metadata.log.dir`, as KRaft's.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

pub struct MetadataStore {
    dir: PathBuf,
    writer: Mutex<Writer>,
    publisher: MetadataPublisher,
}

/// What only the writer touches: the controller (and its log), and how much
/// was committed since the last snapshot.
struct Writer {
    controller: Controller<PartitionLog>,
    bytes_since_snapshot: u64,
    snapshot_every_bytes: u64,
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
        std::fs::create_dir_all(&dir).map_err(LogError::Io)?;
        let snapshot = snapshot::load_latest(&dir).map_err(LogError::Io)?;
        let snapshot_end = snapshot.as_ref().map_or(0, |(end, _)| *end);
        // Every commit is fsynced, but a crash can still tear the tail
        // mid-write: after an unclean stop the log is checked from the
        // snapshot on (it is small after a snapshot).
        let (log, _report) =
            PartitionLog::open(&dir, metadata_log_config(), snapshot_end, snapshot_end, clean_shutdown, now_ms)?;
        if log.log_start_offset() > snapshot_end {
            return Err(MetadataError::Corrupt {
                offset: snapshot_end,
                reason: format!(
                    "the metadata log starts at {} but no snapshot covers what came before",
                    log.log_start_offset()
                ),
            });
        }
        let controller = Controller::open(SingleVoter::open(log, now_ms)?, snapshot)?;
        let image = controller.image().clone();
        tracing::info!(
            topics = image.topics.len(),
            records_end = controller.voter().high_watermark(),
            "metadata image loaded"
        );
        Ok(MetadataStore {
            dir,
            writer: Mutex::new(Writer { controller, bytes_since_snapshot: 0, snapshot_every_bytes }),
            publisher: MetadataPublisher::new(image),
        })
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
    /// time) under the writer lock; what it commits is published, and a
    /// snapshot is written when enough was committed since the last.
    /// Returns the new image with its delta, and the operation's result.
    pub fn control<T, E>(
        &self,
        op: impl FnOnce(&mut Controller<PartitionLog>, i64) -> Result<Commit<T>, E>,
    ) -> Result<(MetadataUpdate, T), E> {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let now_ms = now_ms();
        let Commit { update, committed, result } = op(&mut writer.controller, now_ms)?;
        let Some(committed) = committed else {
            return Ok((update, result));
        };
        writer.bytes_since_snapshot += committed.bytes;
        self.publisher.publish(&update);
        if writer.bytes_since_snapshot >= writer.snapshot_every_bytes {
            // The change is durable in the log already: a failed snapshot
            // only means a longer replay next start.
            if let Err(e) = self.snapshot(&mut writer, &update.image, now_ms) {
                tracing::error!(error = %e, "metadata snapshot failed");
            }
        }
        Ok((update, result))
    }

    /// Writes a snapshot of `image` and drops the log and snapshots it replaces.
    fn snapshot(&self, writer: &mut Writer, image: &MetadataImage, now_ms: i64) -> Result<(), MetadataError> {
        let end = image.offset + 1;
        debug_assert!(end <= writer.controller.voter().high_watermark(), "a snapshot of uncommitted records");
        snapshot::write(&self.dir, image, end, now_ms).map_err(LogError::Io)?;
        let log = writer.controller.voter_mut().log_mut();
        log.delete_records_before(end, now_ms)?;
        log.delete_pending_files()?;
        snapshot::delete_older(&self.dir, end).map_err(LogError::Io)?;
        writer.bytes_since_snapshot = 0;
        tracing::info!(end_offset = end, topics = image.topics.len(), "wrote metadata snapshot");
        Ok(())
    }

    /// The metadata log's end offset (DescribeQuorum reports it).
    pub fn log_end_offset(&self) -> i64 {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).controller.voter().log().log_end_offset()
    }

    /// Flushes and closes the metadata log (clean shutdown).
    pub fn close(&self) -> Result<(), MetadataError> {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Flush, snapshot producer state and trim the indexes, as for any log.
        writer.controller.voter_mut().log_mut().prepare_clean_shutdown(now_ms())?;
        Ok(())
    }
}
