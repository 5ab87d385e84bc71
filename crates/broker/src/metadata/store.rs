//! The metadata log and the image built from it. Writers are serialised (the
//! single combined node is its own controller); readers take the current
//! `Arc<MetadataImage>` without waiting for writers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use krabka_log::{LogConfig, LogError, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder, RecordBatches};
use krabka_protocol::ProducerIdsRecord;

use super::image::MetadataImage;
use super::records::MetadataRecord;
use super::snapshot;

/// The metadata log's directory name inside `metadata.log.dir`, as KRaft's.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

/// Producer ids are handed out in blocks; a block is one metadata record.
const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The most metadata records one user operation may write, as Kafka's
/// controller (`MAX_RECORDS_PER_USER_OP`): one commit is one batch, applied
/// atomically, so an unbounded one would be an unbounded allocation.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata log: {0}")]
    Log(#[from] LogError),
    #[error("metadata log record at offset {offset}: {reason}")]
    Corrupt { offset: i64, reason: String },
    #[error("{records} metadata records in one operation, more than {MAX_RECORDS_PER_USER_OP}")]
    TooManyRecords { records: usize },
}

pub struct MetadataStore {
    node_id: i32,
    dir: PathBuf,
    log: Mutex<MetadataLog>,
    image: RwLock<Arc<MetadataImage>>,
    /// The current producer-id block: next id to hand out, end (exclusive).
    producer_ids: Mutex<(i64, i64)>,
}

/// The log and how much was written to it since the last snapshot.
struct MetadataLog {
    log: PartitionLog,
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
        node_id: i32,
        snapshot_every_bytes: u64,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Self, MetadataError> {
        let dir = metadata_log_dir.join(METADATA_LOG_DIR_NAME);
        std::fs::create_dir_all(&dir).map_err(LogError::Io)?;
        let snapshot = snapshot::load_latest(&dir).map_err(LogError::Io)?;
        let snapshot_end = snapshot.as_ref().map_or(0, |(end, _)| *end);
        // Every metadata append is fsynced, but a crash can still tear the
        // tail mid-write: after an unclean stop the log is checked from the
        // snapshot on (it is small after a snapshot).
        let (log, _report) =
            PartitionLog::open(&dir, metadata_log_config(), snapshot_end, snapshot_end, clean_shutdown, now_ms)?;
        let mut image = snapshot.map(|(_, image)| image).unwrap_or_default();
        let mut offset = snapshot_end.max(log.log_start_offset());
        if offset > snapshot_end {
            return Err(MetadataError::Corrupt {
                offset: snapshot_end,
                reason: format!("the metadata log starts at {offset} but no snapshot covers what came before"),
            });
        }
        image.offset = snapshot_end - 1;
        let end = log.log_end_offset();
        while offset < end {
            let read = log.read(offset, 1024 * 1024, end, true)?;
            let Some(slice) = read.slice else { break };
            let bytes = slice.read_to_bytes().map_err(LogError::Io)?;
            for batch in RecordBatches::new(bytes) {
                let batch = batch.map_err(|e| MetadataError::Corrupt { offset, reason: e.to_string() })?;
                let batch_start = offset;
                offset = batch.next_offset();
                if batch.is_control() {
                    continue;
                }
                let records =
                    batch.records(usize::MAX).map_err(|e| MetadataError::Corrupt { offset, reason: e.to_string() })?;
                for record in records {
                    let record = record.map_err(|e| MetadataError::Corrupt { offset, reason: e.to_string() })?;
                    if record.offset < batch_start {
                        continue; // covered by the snapshot
                    }
                    let value = record.value.unwrap_or_default();
                    let decoded = MetadataRecord::decode(value)
                        .map_err(|reason| MetadataError::Corrupt { offset: record.offset, reason })?;
                    if let Err(reason) = image.apply(&decoded) {
                        tracing::error!(offset = record.offset, %reason, "skipping metadata record");
                    }
                    image.offset = record.offset;
                }
            }
        }
        tracing::info!(topics = image.topics.len(), records_end = end, "metadata image loaded");
        Ok(MetadataStore {
            node_id,
            dir,
            log: Mutex::new(MetadataLog { log, bytes_since_snapshot: 0, snapshot_every_bytes }),
            image: RwLock::new(Arc::new(image)),
            producer_ids: Mutex::new((0, 0)),
        })
    }

    /// The current image: cheap, never waits for a writer.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Runs `plan` against the current image under the writer lock; the
    /// records it returns are appended, fsynced, then applied. Returns the
    /// new image and the plan's result. An empty plan writes nothing.
    pub fn commit<T, E>(
        &self,
        plan: impl FnOnce(&MetadataImage) -> Result<(Vec<MetadataRecord>, T), E>,
    ) -> Result<(Arc<MetadataImage>, T), E>
    where
        E: From<MetadataError>,
    {
        let mut guard = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.image();
        let (records, result) = plan(&current)?;
        if records.is_empty() {
            return Ok((current, result));
        }
        if records.len() > MAX_RECORDS_PER_USER_OP {
            // Plans check their counts before building records; this is the
            // backstop that keeps an oversized batch out of the log.
            return Err(MetadataError::TooManyRecords { records: records.len() }.into());
        }
        let now_ms = now_ms();
        let mut builder = RecordBatchBuilder::new(Compression::None);
        let values: Vec<Bytes> = records.iter().map(MetadataRecord::encode).collect();
        for value in &values {
            let record = NewRecord { timestamp_ms: now_ms, key: None, value: Some(value), headers: &[] };
            builder.append(&record).map_err(|e| MetadataError::Corrupt { offset: -1, reason: e.to_string() })?;
        }
        let batch = builder.build().map_err(|e| MetadataError::Corrupt { offset: -1, reason: e.to_string() })?;
        let info = guard.log.append_as_leader(batch.as_bytes(), 0, now_ms).map_err(MetadataError::from)?;
        guard.log.flush(now_ms).map_err(MetadataError::from)?;
        guard.bytes_since_snapshot += info.bytes;
        let mut next = (*current).clone();
        for record in &records {
            if let Err(reason) = next.apply(record) {
                // The plan validated against this very image: a failure here is a bug.
                tracing::error!(%reason, "metadata record did not apply");
            }
        }
        next.offset = info.last_offset;
        let next = Arc::new(next);
        *self.image.write().unwrap_or_else(|e| e.into_inner()) = next.clone();
        if guard.bytes_since_snapshot >= guard.snapshot_every_bytes {
            // The change is durable in the log already: a failed snapshot
            // only means a longer replay next start.
            if let Err(e) = self.snapshot(&mut guard, &next, now_ms) {
                tracing::error!(error = %e, "metadata snapshot failed");
            }
        }
        Ok((next, result))
    }

    /// Writes a snapshot of `image` and drops the log and snapshots it replaces.
    fn snapshot(&self, guard: &mut MetadataLog, image: &MetadataImage, now_ms: i64) -> Result<(), MetadataError> {
        let end = image.offset + 1;
        snapshot::write(&self.dir, image, end, now_ms).map_err(LogError::Io)?;
        guard.log.delete_records_before(end, now_ms)?;
        guard.log.delete_pending_files()?;
        snapshot::delete_older(&self.dir, end).map_err(LogError::Io)?;
        guard.bytes_since_snapshot = 0;
        tracing::info!(end_offset = end, topics = image.topics.len(), "wrote metadata snapshot");
        Ok(())
    }

    /// Hands out a producer id, reserving a new block in the metadata log
    /// when the current one is used up (so ids are never reused after a restart).
    pub fn allocate_producer_id(&self) -> Result<i64, MetadataError> {
        let mut ids = self.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.0 >= ids.1 {
            let node_id = self.node_id;
            let (_, block_start) = self.commit(|image| {
                let start = image.next_producer_id_block;
                let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
                    broker_id: node_id,
                    broker_epoch: 0,
                    next_producer_id: start + PRODUCER_ID_BLOCK_SIZE,
                    ..Default::default()
                });
                Ok::<_, MetadataError>((vec![record], start))
            })?;
            *ids = (block_start, block_start + PRODUCER_ID_BLOCK_SIZE);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }

    /// The metadata log's end offset (DescribeQuorum reports it).
    pub fn log_end_offset(&self) -> i64 {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).log.log_end_offset()
    }

    /// Flushes and closes the metadata log (clean shutdown).
    pub fn close(&self) -> Result<(), MetadataError> {
        let mut guard = self.log.lock().unwrap_or_else(|e| e.into_inner());
        // Flush, snapshot producer state and trim the indexes, as for any log.
        guard.log.prepare_clean_shutdown(now_ms())?;
        Ok(())
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
