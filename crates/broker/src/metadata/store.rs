//! The IO side of cluster metadata. Two ways to commit it:
//!
//! - the node is its quorum's only voter: it opens the
//!   `__cluster_metadata-0` log after its newest snapshot (krabka-log),
//!   hands it to raft's single voter with the snapshot policy's threshold
//!   and to the controller (krabka-controller, which decodes the snapshot,
//!   replays the log after it, commits through raft and writes the
//!   snapshots raft says are due), and publishes each image it commits;
//! - the node is one member of a multi-voter quorum (or an observer of
//!   one): `quorum_writer` follows what the quorum commits and commits when
//!   this node leads.
//!
//! Either way writers are serialised, each operation a plan (the
//! controller's, a pure function of the image) run against the image of
//! everything committed before it; readers take the current
//! `Arc<MetadataImage>` without waiting for them.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krabka_controller::features::{plan_bootstrap_features, ControllerDefaults};
use krabka_controller::{Commit, Controller, Placement};
use krabka_log::{open_replicated_log, LogConfig, PartitionLog};
use krabka_metadata::features::METADATA_VERSION;
use krabka_metadata::{MetadataImage, MetadataPublisher, MetadataRecord, MetadataUpdate};
use krabka_raft::{RoleName, SingleVoter, SnapshotPolicy};

use super::quorum_writer::QuorumWriter;
use crate::clock::now_ms;
use crate::quorum::{Quorum, QuorumSetup};

pub use krabka_controller::MetadataError;

/// The metadata log's directory name inside `metadata.log.dir`, as KRaft's.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

pub struct MetadataStore {
    writer: Writer,
    publisher: Arc<MetadataPublisher>,
    /// What this node's static config gives a new log's bootstrap records.
    defaults: ControllerDefaults,
}

enum Writer {
    /// The only voter: the controller (and its voter and log).
    Single(Box<Mutex<Controller<PartitionLog>>>),
    /// A member or observer of a multi-voter quorum.
    Quorum(QuorumWriter),
}

/// The metadata quorum as DescribeQuorum reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumView {
    pub leader_id: Option<i32>,
    pub epoch: i32,
    pub high_watermark: i64,
    pub log_end_offset: i64,
}

/// The metadata log's config, as KRaft's.
pub fn metadata_log_config() -> LogConfig {
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
        let publisher = Arc::new(MetadataPublisher::new(image));
        Ok(MetadataStore {
            writer: Writer::Single(Box::new(Mutex::new(controller))),
            publisher,
            defaults: ControllerDefaults::default(),
        })
    }

    /// Joins the multi-voter quorum `setup` describes (starting its driver
    /// and connections on `runtime`); the image starts empty and follows
    /// what the quorum commits. Operations wait at most `timeout` for
    /// their records to commit.
    pub fn join_quorum(
        setup: QuorumSetup,
        runtime: &tokio::runtime::Handle,
        timeout: Duration,
    ) -> Result<Self, MetadataError> {
        let policy = SnapshotPolicy::new(setup.snapshot_every_bytes, setup.snapshot_interval_ms, now_ms());
        let (quorum, committed) = Quorum::start(setup, runtime)?;
        let publisher = Arc::new(MetadataPublisher::new(Arc::new(MetadataImage::default())));
        let writer = QuorumWriter::start(Arc::new(quorum), committed, Arc::clone(&publisher), policy, timeout)
            .map_err(|e| MetadataError::Log(e.into()))?;
        Ok(MetadataStore { writer: Writer::Quorum(writer), publisher, defaults: ControllerDefaults::default() })
    }

    /// What this node's static config gives the records that bootstrap a
    /// new log (the cluster's `min.insync.replicas`, ELR being on).
    pub fn with_defaults(mut self, defaults: ControllerDefaults) -> Self {
        self.defaults = defaults;
        self
    }

    /// The quorum this node is a member or observer of, if it is not its
    /// quorum's only voter (its controller listener serves it).
    pub fn quorum(&self) -> Option<&Arc<Quorum>> {
        match &self.writer {
            Writer::Single(_) => None,
            Writer::Quorum(writer) => Some(writer.quorum()),
        }
    }

    /// Waits until the image holds what the quorum has committed, as far
    /// as this node knows (at once for the only voter); false when the
    /// quorum or its loader stopped first.
    pub async fn caught_up(&self) -> bool {
        match &self.writer {
            Writer::Single(_) => true,
            Writer::Quorum(writer) => writer.caught_up().await,
        }
    }

    /// Whether another node decides what this one cannot: it shares a
    /// quorum that another node leads (or none leads yet), so requests
    /// only the controller decides go to that node.
    pub fn defers_to_another_controller(&self) -> bool {
        self.quorum().is_some() && !self.is_active_controller()
    }

    /// Who takes new replicas: this node alone when it is its quorum's
    /// only voter, else the registered brokers.
    pub fn placement(&self, node_id: i32) -> Placement {
        match &self.writer {
            Writer::Single(_) => Placement::OnlyNode(node_id),
            Writer::Quorum(_) => Placement::RegisteredBrokers,
        }
    }

    /// Whether this node is the active controller now.
    pub fn is_active_controller(&self) -> bool {
        match &self.writer {
            Writer::Single(_) => true,
            Writer::Quorum(writer) => writer.quorum().status().borrow().role == RoleName::Leader,
        }
    }

    /// The current image: cheap, never waits for a writer.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.image()
    }

    /// Who is told of every commit (the image and what changed).
    pub fn publisher(&self) -> &MetadataPublisher {
        &self.publisher
    }

    /// Runs one controller operation, `plan` (the records to commit and
    /// the request's result, decided on the image of everything committed
    /// before it), and commits its records; what it commits is published
    /// (and snapshotted when raft says one is due, by the controller).
    /// Returns the new image with its delta, and the plan's result. On a
    /// node that is not the active controller: NOT_CONTROLLER.
    pub async fn control<T, E>(
        &self,
        plan: impl FnOnce(&MetadataImage) -> Result<(Vec<MetadataRecord>, T), E>,
    ) -> Result<(MetadataUpdate, T), E>
    where
        E: From<MetadataError>,
    {
        self.finalize_features().await?;
        self.commit_plan(plan).await
    }

    /// Finalizes krabka's feature levels in a log that has none yet, as
    /// Kafka's controller writes its bootstrap levels when it first leads
    /// an empty log: a commit of its own before the operation's, so the
    /// operation's records sit at the offsets its plan counted on (a
    /// broker epoch is its registration's offset).
    pub async fn finalize_features(&self) -> Result<(), MetadataError> {
        if self.image().features.contains_key(METADATA_VERSION) {
            return Ok(());
        }
        let defaults = self.defaults;
        self.commit_plan(|image| Ok::<_, MetadataError>((plan_bootstrap_features(image, defaults), ()))).await?;
        Ok(())
    }

    async fn commit_plan<T, E>(
        &self,
        plan: impl FnOnce(&MetadataImage) -> Result<(Vec<MetadataRecord>, T), E>,
    ) -> Result<(MetadataUpdate, T), E>
    where
        E: From<MetadataError>,
    {
        match &self.writer {
            Writer::Single(controller) => {
                let mut controller = controller.lock().unwrap_or_else(|e| e.into_inner());
                let Commit { update, committed, result } = controller.commit(plan, now_ms())?;
                if committed.is_some() {
                    self.publisher.publish(&update);
                }
                Ok((update, result))
            }
            Writer::Quorum(writer) => {
                let turn = writer.begin().await?;
                let (records, result) = plan(turn.image())?;
                Ok((writer.commit(turn, records).await?, result))
            }
        }
    }

    /// The metadata quorum now: who leads which epoch, and how far the log
    /// is committed and written here. `node_id` is this node's (the only
    /// voter leads).
    pub fn quorum_view(&self, node_id: i32) -> QuorumView {
        match &self.writer {
            Writer::Single(controller) => {
                let controller = controller.lock().unwrap_or_else(|e| e.into_inner());
                let voter = controller.voter();
                QuorumView {
                    leader_id: Some(node_id),
                    epoch: voter.epoch(),
                    high_watermark: voter.high_watermark(),
                    log_end_offset: voter.log().log_end_offset(),
                }
            }
            Writer::Quorum(writer) => {
                let status = *writer.quorum().status().borrow();
                QuorumView {
                    leader_id: status.leader_id,
                    epoch: status.epoch,
                    high_watermark: status.high_watermark,
                    log_end_offset: status.log_end_offset,
                }
            }
        }
    }

    /// Flushes and closes the metadata log (clean shutdown).
    /// A quorum member resigns its lead first, if it has it.
    pub fn close(&self) -> Result<(), MetadataError> {
        match &self.writer {
            Writer::Single(controller) => {
                let mut controller = controller.lock().unwrap_or_else(|e| e.into_inner());
                // Flush, snapshot producer state and trim the indexes, as for any log.
                controller.voter_mut().log_mut().prepare_clean_shutdown(now_ms())?;
            }
            // The driver closes the log when it stops (flushed, indexes trimmed).
            Writer::Quorum(writer) => writer.stop(),
        }
        Ok(())
    }
}
