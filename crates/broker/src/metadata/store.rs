//! The glue between the metadata crate and raft on the one combined node:
//! a commit plans records against the current image, the single voter
//! commits them to `__cluster_metadata-0`, the image applies them, and the
//! publisher hands out the new image with its delta. A start replays the
//! newest snapshot plus the committed log after it through the same
//! pieces. Writers are serialised (the node is its own controller);
//! readers take the current `Arc<MetadataImage>` without waiting for them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use krabka_log::{LogConfig, LogError, PartitionLog};
use krabka_metadata::records::{decode_batches, CorruptRecord};
use krabka_metadata::{snapshot, MetadataDelta, MetadataImage, MetadataPublisher, MetadataRecord, MetadataUpdate};
use krabka_raft::SingleVoter;

use crate::clock::now_ms;

/// The metadata log's directory name inside `metadata.log.dir`, as KRaft's.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

/// The most metadata records one user operation may write, as Kafka's
/// controller (`MAX_RECORDS_PER_USER_OP`): one commit is one batch, applied
/// atomically, so an unbounded one would be an unbounded allocation.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// How much of the log a replay reads at a time.
const REPLAY_READ_BYTES: u32 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata log: {0}")]
    Log(#[from] LogError),
    #[error("metadata log record at offset {offset}: {reason}")]
    Corrupt { offset: i64, reason: String },
    #[error("{records} metadata records in one operation, more than {MAX_RECORDS_PER_USER_OP}")]
    TooManyRecords { records: usize },
}

impl From<CorruptRecord> for MetadataError {
    fn from(e: CorruptRecord) -> Self {
        MetadataError::Corrupt { offset: e.offset, reason: e.reason }
    }
}

pub struct MetadataStore {
    dir: PathBuf,
    writer: Mutex<Writer>,
    publisher: MetadataPublisher,
}

/// What only the writer touches: the voter (and its log), and how much was
/// committed since the last snapshot.
struct Writer {
    voter: SingleVoter<PartitionLog>,
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
        let voter = SingleVoter::open(log, now_ms)?;
        let mut image = snapshot.map(|(_, image)| image).unwrap_or_default();
        image.offset = snapshot_end - 1;
        let mut delta = MetadataDelta::from_empty(&image);
        replay(&voter, snapshot_end, &mut image, &mut delta)?;
        tracing::info!(topics = image.topics.len(), records_end = voter.high_watermark(), "metadata image loaded");
        Ok(MetadataStore {
            dir,
            writer: Mutex::new(Writer { voter, bytes_since_snapshot: 0, snapshot_every_bytes }),
            publisher: MetadataPublisher::new(Arc::new(image)),
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

    /// Runs `plan` against the current image under the writer lock; the
    /// records it returns are committed through raft (appended, fsynced),
    /// then applied and published. Returns the new image with its delta,
    /// and the plan's result. An empty plan writes nothing.
    pub fn commit<T, E>(
        &self,
        plan: impl FnOnce(&MetadataImage) -> Result<(Vec<MetadataRecord>, T), E>,
    ) -> Result<(MetadataUpdate, T), E>
    where
        E: From<MetadataError>,
    {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.image();
        let (records, result) = plan(&current)?;
        if records.is_empty() {
            return Ok((MetadataUpdate::unchanged(current), result));
        }
        if records.len() > MAX_RECORDS_PER_USER_OP {
            // Plans check their counts before building records; this is the
            // backstop that keeps an oversized batch out of the log.
            return Err(MetadataError::TooManyRecords { records: records.len() }.into());
        }
        let now_ms = now_ms();
        let values: Vec<Bytes> = records.iter().map(MetadataRecord::encode).collect();
        let committed = writer.voter.propose(&values, now_ms).map_err(MetadataError::from)?;
        writer.bytes_since_snapshot += committed.bytes;
        let mut next = (*current).clone();
        let mut delta = MetadataDelta::default();
        for record in &records {
            if let Err(reason) = delta.apply(&mut next, record) {
                // The plan validated against this very image: a failure here is a bug.
                tracing::error!(%reason, "metadata record did not apply");
            }
        }
        next.offset = committed.last_offset;
        let update = MetadataUpdate { image: Arc::new(next), delta: Arc::new(delta) };
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
        debug_assert!(end <= writer.voter.high_watermark(), "a snapshot of uncommitted records");
        snapshot::write(&self.dir, image, end, now_ms).map_err(LogError::Io)?;
        let log = writer.voter.log_mut();
        log.delete_records_before(end, now_ms)?;
        log.delete_pending_files()?;
        snapshot::delete_older(&self.dir, end).map_err(LogError::Io)?;
        writer.bytes_since_snapshot = 0;
        tracing::info!(end_offset = end, topics = image.topics.len(), "wrote metadata snapshot");
        Ok(())
    }

    /// The metadata log's end offset (DescribeQuorum reports it).
    pub fn log_end_offset(&self) -> i64 {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).voter.log().log_end_offset()
    }

    /// Flushes and closes the metadata log (clean shutdown).
    pub fn close(&self) -> Result<(), MetadataError> {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Flush, snapshot producer state and trim the indexes, as for any log.
        writer.voter.log_mut().prepare_clean_shutdown(now_ms())?;
        Ok(())
    }
}

/// Applies the committed records from `from_offset` on to `image`, noting
/// them in `delta`. A record the image refuses is logged and skipped: a
/// damaged log must not stop the broker.
fn replay(
    voter: &SingleVoter<PartitionLog>,
    from_offset: i64,
    image: &mut MetadataImage,
    delta: &mut MetadataDelta,
) -> Result<(), MetadataError> {
    let mut offset = from_offset;
    while offset < voter.high_watermark() {
        let batches = voter.read_committed(offset, REPLAY_READ_BYTES)?;
        if batches.is_empty() {
            break;
        }
        let (records, next_offset) = decode_batches(batches, offset)?;
        debug_assert!(next_offset > offset, "a replay that does not move");
        for (record_offset, record) in records {
            if let Err(reason) = delta.apply(image, &record) {
                tracing::error!(offset = record_offset, %reason, "skipping metadata record");
            }
            image.offset = record_offset;
        }
        offset = next_offset;
    }
    Ok(())
}
