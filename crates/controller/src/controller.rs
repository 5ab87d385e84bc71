//! `Controller`: the metadata image and the raft voter that commits to it.
//! A commit plans records against the current image, proposes them through
//! the voter (committed once durable), applies them to a copy of the image
//! and keeps that as the current one. Opening replays the committed log
//! after a snapshot the same way. When raft says a snapshot is due after a
//! commit, the new image is encoded (krabka-metadata's snapshot format) and
//! handed to raft to store. Publishing the new image is the caller's (the
//! broker's metadata store).

use std::sync::Arc;

use bytes::Bytes;
use krabka_log::ReplicatedLog;
use krabka_metadata::{snapshot, MetadataDelta, MetadataImage, MetadataLoader, MetadataRecord, MetadataUpdate};
use krabka_raft::{Committed, SingleVoter, Snapshot};

use crate::error::MetadataError;
use crate::limits::MAX_RECORDS_PER_USER_OP;

/// How much of the log a replay reads at a time.
const REPLAY_READ_BYTES: u32 = 1024 * 1024;

pub struct Controller<L> {
    voter: SingleVoter<L>,
    image: Arc<MetadataImage>,
}

/// What one commit did: the new image with its delta (the current image,
/// unchanged, when the plan had no records), what raft committed, if
/// anything, and the plan's own result.
pub struct Commit<T> {
    pub update: MetadataUpdate,
    pub committed: Option<Committed>,
    pub result: T,
}

impl<L: ReplicatedLog> Controller<L> {
    /// The controller of `voter`'s log: `snapshot` (the newest, as
    /// `SingleVoter::open` found it), if there is one, plus the committed
    /// records after it. A record the image refuses is logged and skipped:
    /// a damaged log must not stop the node. A log that starts past the
    /// snapshot's end (or past 0 without one) has lost records: an error.
    pub fn open(voter: SingleVoter<L>, snapshot: Option<Snapshot>) -> Result<Self, MetadataError> {
        let (snapshot_end, image) = match snapshot {
            Some((id, bytes)) => {
                let image = snapshot::decode(bytes)
                    .map_err(|e| MetadataError::Corrupt { offset: id.end_offset, reason: e.to_string() })?;
                (id.end_offset, image)
            }
            None => (0, MetadataImage::default()),
        };
        let log_start = voter.log().log_start_offset();
        if log_start > snapshot_end {
            return Err(MetadataError::Corrupt {
                offset: snapshot_end,
                reason: format!("the metadata log starts at {log_start} but no snapshot covers what came before"),
            });
        }
        let mut loader = MetadataLoader::new(image, snapshot_end);
        while loader.next_offset() < voter.high_watermark() {
            let batches = voter.read_committed(loader.next_offset(), REPLAY_READ_BYTES)?;
            if batches.is_empty() {
                break;
            }
            let before = loader.next_offset();
            loader.apply(batches)?;
            debug_assert!(loader.next_offset() > before, "a replay that does not move");
        }
        Ok(Controller { voter, image: loader.image().clone() })
    }

    /// The image of everything committed.
    pub fn image(&self) -> &Arc<MetadataImage> {
        &self.image
    }

    pub fn voter(&self) -> &SingleVoter<L> {
        &self.voter
    }

    /// The voter, for what is the log's own business (shutdown, trimming
    /// the log a snapshot covers).
    pub fn voter_mut(&mut self) -> &mut SingleVoter<L> {
        &mut self.voter
    }

    /// Runs `plan` against the current image and commits the records it
    /// returns through raft as one batch, stamped `now_ms`; then applies
    /// them. An empty plan writes nothing. More than
    /// `MAX_RECORDS_PER_USER_OP` records is refused whole: plans budget
    /// their records before building them, this is the backstop that keeps
    /// an oversized batch out of the log.
    pub fn commit<T, E>(
        &mut self,
        plan: impl FnOnce(&MetadataImage) -> Result<(Vec<MetadataRecord>, T), E>,
        now_ms: i64,
    ) -> Result<Commit<T>, E>
    where
        E: From<MetadataError>,
    {
        let (records, result) = plan(&self.image)?;
        if records.is_empty() {
            return Ok(Commit { update: MetadataUpdate::unchanged(self.image.clone()), committed: None, result });
        }
        if records.len() > MAX_RECORDS_PER_USER_OP {
            return Err(MetadataError::TooManyRecords { records: records.len() }.into());
        }
        let values: Vec<Bytes> = records.iter().map(MetadataRecord::encode).collect();
        let committed = self.voter.propose(&values, now_ms).map_err(MetadataError::from)?;
        let mut next = (*self.image).clone();
        let mut delta = MetadataDelta::default();
        for record in &records {
            if let Err(reason) = delta.apply(&mut next, record) {
                // The plan validated against this very image: a failure here is a bug.
                tracing::error!(%reason, "metadata record did not apply");
            }
        }
        next.offset = committed.last_offset;
        self.image = Arc::new(next);
        if let Some(end) = committed.snapshot_due {
            self.snapshot(end, now_ms);
        }
        let update = MetadataUpdate { image: self.image.clone(), delta: Arc::new(delta) };
        Ok(Commit { update, committed: Some(committed), result })
    }

    /// Encodes the image, which ends at `end`, and has raft store it. The
    /// change is durable in the log already: a failed snapshot only means a
    /// longer replay next start (and raft says it is due again next commit).
    fn snapshot(&mut self, end: i64, now_ms: i64) {
        debug_assert_eq!(end, self.image.offset + 1, "a snapshot of the image as committed");
        let stored = snapshot::encode(&self.image, now_ms)
            .map_err(|e| e.to_string())
            .and_then(|bytes| self.voter.install_snapshot(end, &bytes, now_ms).map_err(|e| e.to_string()));
        match stored {
            Ok(id) => {
                tracing::info!(end_offset = id.end_offset, topics = self.image.topics.len(), "wrote metadata snapshot")
            }
            Err(error) => tracing::error!(%error, "metadata snapshot failed"),
        }
    }
}
