//! Cluster metadata over a multi-voter KRaft quorum: the loader that
//! builds the image from what the quorum commits (on every member, leader,
//! follower or observer, as Kafka's metadata loader), and the writer that
//! commits a controller operation's records when this node is the active
//! controller.
//!
//! Operations are serialised: each plans against the image of everything
//! committed before it, proposes its records, and waits until the loader
//! has applied them. A new leader plans nothing before its image has caught
//! up with its whole log (its epoch's LeaderChange included), so no plan is
//! made on an image that misses a record the log holds. An operation on a
//! node that does not lead, or that stops leading before its records are
//! applied, fails with NOT_CONTROLLER (its records may or may not commit:
//! a client retrying a CreateTopics then sees TOPIC_ALREADY_EXISTS, as with
//! Kafka).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use krabka_controller::{MetadataError, MAX_RECORDS_PER_USER_OP};
use krabka_log::SnapshotId;
use krabka_metadata::{
    snapshot, MetadataDelta, MetadataImage, MetadataLoader, MetadataPublisher, MetadataRecord, MetadataUpdate,
};
use krabka_protocol::records::RecordBatches;
use krabka_raft::{RoleName, SnapshotPolicy};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock::now_ms;
use crate::quorum::{Committed, CommittedBatches, Quorum, QuorumStatus};

/// One operation's turn: the writer is its alone until the turn is
/// committed or dropped.
pub struct Turn<'a> {
    _guard: tokio::sync::MutexGuard<'a, ()>,
    /// The epoch this node leads: the commit fails if it changes.
    epoch: i32,
    image: Arc<MetadataImage>,
    deadline: Instant,
}

impl Turn<'_> {
    /// The image of everything committed: what the operation plans on.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }
}

/// How long an appended operation may take to commit and apply: Kafka's
/// clients' default `request.timeout.ms`.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

pub struct QuorumWriter {
    quorum: Arc<Quorum>,
    /// The latest update the loader published: its image's offset is the
    /// last offset applied.
    applied: watch::Receiver<MetadataUpdate>,
    /// Held by the one operation committing at a time.
    turn: tokio::sync::Mutex<()>,
    /// How long an operation waits for its records to commit
    /// (`controller.quorum.request.timeout.ms`).
    timeout: Duration,
    loader: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl QuorumWriter {
    /// Starts the loader over `committed` (the quorum's committed log from
    /// its start), publishing each chunk's image through `publisher` and
    /// snapshotting the image when `policy` says one is due.
    pub fn start(
        quorum: Arc<Quorum>,
        committed: CommittedBatches,
        publisher: Arc<MetadataPublisher>,
        policy: SnapshotPolicy,
        timeout: Duration,
    ) -> std::io::Result<QuorumWriter> {
        let loader = Loader { loader: MetadataLoader::new(MetadataImage::default(), 0), last_epoch: 0, policy };
        let (applied_sender, applied) = watch::channel(MetadataUpdate::unchanged(loader.loader.image().clone()));
        let snapshots = Arc::clone(&quorum);
        let thread = std::thread::Builder::new()
            .name("krabka-metadata-loader".into())
            .spawn(move || run_loader(loader, committed, &publisher, &applied_sender, &snapshots))?;
        Ok(QuorumWriter {
            quorum,
            applied,
            turn: tokio::sync::Mutex::new(()),
            timeout,
            loader: std::sync::Mutex::new(Some(thread)),
        })
    }

    pub fn quorum(&self) -> &Arc<Quorum> {
        &self.quorum
    }

    /// Waits for this node's turn to commit: it must lead, with an image
    /// that holds its whole log. The turn holds that image to plan on.
    pub async fn begin(&self) -> Result<Turn<'_>, MetadataError> {
        let guard = self.turn.lock().await;
        let deadline = Instant::now() + self.timeout;
        let epoch = self.caught_up_lead(deadline).await?;
        let image = self.applied.borrow().image.clone();
        Ok(Turn { _guard: guard, epoch, image, deadline })
    }

    /// Commits `records`, planned on `turn`'s image, and waits until the
    /// loader has applied them; the update that did. No records: the
    /// image as it is.
    pub async fn commit(&self, turn: Turn<'_>, records: Vec<MetadataRecord>) -> Result<MetadataUpdate, MetadataError> {
        if records.is_empty() {
            return Ok(MetadataUpdate::unchanged(turn.image));
        }
        if records.len() > MAX_RECORDS_PER_USER_OP {
            return Err(MetadataError::TooManyRecords { records: records.len() });
        }
        let values: Vec<Bytes> = records.iter().map(MetadataRecord::encode).collect();
        let appended = self.quorum.propose(values, turn.epoch).await?.ok_or(MetadataError::NotController)?;
        // Appended, the records commit as fast as the voters fetch and
        // fsync them, which for a large operation (thousands of partitions)
        // takes longer than a raft request may: as Kafka's controller, the
        // wait is bounded by a client's request timeout, and ends at once
        // with NOT_CONTROLLER if the lead is lost.
        let deadline = turn.deadline.max(Instant::now() + COMMIT_TIMEOUT);
        self.applied_through(appended.last_offset, turn.epoch, deadline).await
    }

    /// Waits until a leader is known and the image holds everything this
    /// node has learned is committed (a broker's "caught up"); false when
    /// the quorum or the loader stopped first.
    pub async fn caught_up(&self) -> bool {
        let mut status = self.quorum.status();
        let mut applied = self.applied.clone();
        loop {
            let now = *status.borrow_and_update();
            let applied_end = applied.borrow_and_update().image.offset + 1;
            if now.leader_id.is_some() && now.high_watermark > 0 && applied_end >= now.high_watermark {
                return true;
            }
            tokio::select! {
                changed = status.changed() => if changed.is_err() { return false },
                changed = applied.changed() => if changed.is_err() { return false },
            }
        }
    }

    /// Waits until this node leads with an image that holds its whole log;
    /// its epoch. NOT_CONTROLLER at once when another node leads or none
    /// does; a timeout when the image does not catch up in time.
    async fn caught_up_lead(&self, deadline: Instant) -> Result<i32, MetadataError> {
        let mut status = self.quorum.status();
        let mut applied = self.applied.clone();
        loop {
            let now = *status.borrow_and_update();
            if now.role != RoleName::Leader {
                return Err(MetadataError::NotController);
            }
            if applied.borrow_and_update().image.offset + 1 >= now.log_end_offset {
                return Ok(now.epoch);
            }
            self.wait_for_change(&mut status, &mut applied, deadline).await?;
        }
    }

    /// Waits until the loader has applied `last_offset`, as long as this
    /// node leads `epoch`; the update that applied it.
    async fn applied_through(
        &self,
        last_offset: i64,
        epoch: i32,
        deadline: Instant,
    ) -> Result<MetadataUpdate, MetadataError> {
        let mut status = self.quorum.status();
        let mut applied = self.applied.clone();
        loop {
            let update = applied.borrow_and_update().clone();
            // The status is read after the image: an image past the batch
            // while this node still leads `epoch` holds this very batch (a
            // leader never truncates its own epoch); once the lead is lost
            // the offset may hold another leader's records.
            let now = *status.borrow_and_update();
            if now.role != RoleName::Leader || now.epoch != epoch {
                return Err(MetadataError::NotController);
            }
            if update.image.offset >= last_offset {
                return Ok(update);
            }
            self.wait_for_change(&mut status, &mut applied, deadline).await?;
        }
    }

    async fn wait_for_change(
        &self,
        status: &mut watch::Receiver<QuorumStatus>,
        applied: &mut watch::Receiver<MetadataUpdate>,
        deadline: Instant,
    ) -> Result<(), MetadataError> {
        let timeout = MetadataError::Timeout { timeout_ms: self.timeout.as_millis() as u64 };
        tokio::select! {
            changed = status.changed() => changed.map_err(|_| MetadataError::NotController),
            changed = applied.changed() => changed.map_err(|_| MetadataError::NotController),
            () = tokio::time::sleep_until(deadline) => Err(timeout),
        }
    }

    /// Stops the quorum (resigning if it leads), then the loader once it has
    /// applied what the quorum handed out.
    pub fn stop(&self) {
        self.quorum.stop();
        if let Some(loader) = self.loader.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = loader.join();
        }
    }
}

/// The metadata loader with what it needs to snapshot its image: the
/// epoch of the last batch it applied, and the policy.
struct Loader {
    loader: MetadataLoader,
    last_epoch: i32,
    policy: SnapshotPolicy,
}

impl Loader {
    /// Applies what the quorum committed: a snapshot replaces the image
    /// (its delta is the difference, for subscribers), batches apply to it.
    fn apply(&mut self, committed: Committed) -> Result<MetadataUpdate, String> {
        match committed {
            Committed::Snapshot { id, bytes } => {
                let image = snapshot::decode(bytes).map_err(|e| format!("snapshot {id:?}: {e}"))?;
                let old = self.loader.image().clone();
                self.loader = MetadataLoader::new(image, id.end_offset);
                self.last_epoch = id.epoch;
                self.policy.taken(now_ms());
                tracing::info!(end_offset = id.end_offset, epoch = id.epoch, "metadata image loaded from a snapshot");
                let image = self.loader.image().clone();
                Ok(MetadataUpdate { delta: Arc::new(MetadataDelta::between(&old, &image)), image })
            }
            Committed::Batches(batches) => {
                if let Some(Ok(last)) = RecordBatches::new(batches.clone()).last() {
                    self.last_epoch = last.partition_leader_epoch();
                }
                self.policy.committed(batches.len() as u64);
                self.loader.apply(batches).map_err(|corrupt| format!("offset {}: {}", corrupt.offset, corrupt.reason))
            }
        }
    }

    /// The image as a snapshot, when one is due.
    fn snapshot_if_due(&mut self) -> Option<(SnapshotId, Bytes)> {
        let now = now_ms();
        if !self.policy.due(now) {
            return None;
        }
        self.policy.taken(now);
        let image = self.loader.image();
        let id = SnapshotId { end_offset: self.loader.next_offset(), epoch: self.last_epoch };
        match snapshot::encode(image, now) {
            Ok(bytes) => Some((id, bytes)),
            Err(e) => {
                tracing::error!(error = %e, "encoding a metadata snapshot failed");
                None
            }
        }
    }
}

/// How often the loader gives freed memory back while it applies.
const RELEASE_EVERY: Duration = Duration::from_secs(1);

/// The loader thread: applies each committed chunk, publishes the image,
/// and hands the quorum a snapshot of it when one is due. A chunk that does
/// not decode stops it: the image must not skip what the log holds, and
/// the operations waiting on it then time out.
fn run_loader(
    mut loader: Loader,
    committed: CommittedBatches,
    publisher: &MetadataPublisher,
    applied: &watch::Sender<MetadataUpdate>,
    quorum: &Quorum,
) {
    // Each image replaces the last: a burst of topic creations frees
    // megabytes of old images and deltas that the allocator keeps resident
    // unless asked (at most once a second while chunks come).
    let mut last_release = std::time::Instant::now();
    for chunk in committed {
        match loader.apply(chunk) {
            Ok(update) => {
                publisher.publish(&update);
                applied.send_replace(update);
                if last_release.elapsed() >= RELEASE_EVERY {
                    crate::memory::release_free_memory();
                    last_release = std::time::Instant::now();
                }
            }
            Err(reason) => {
                tracing::error!(%reason, "committed metadata does not decode; the metadata loader stopped");
                return;
            }
        }
        if let Some((id, bytes)) = loader.snapshot_if_due() {
            quorum.store_snapshot(id, bytes);
        }
    }
}
