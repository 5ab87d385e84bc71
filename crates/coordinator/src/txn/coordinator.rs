//! The transaction coordinator's requests: InitProducerId with a
//! transactional id, AddPartitionsToTxn (and its verification), AddOffsetsToTxn
//! and EndTxn, as Kafka 4.3.1's coordinator answers them, over the shards of
//! `__transaction_state`. A change is persisted before it is taken (the
//! runtime's rule), so the pending transitions Kafka tracks while its
//! append is in flight do not exist here: a request finds either the old
//! state or the new one.
//!
//! A transaction prepared to commit or abort hands back [`Markers`]: the
//! host writes them to the transaction's partitions and then calls
//! [`TransactionCoordinator::markers_written`], which completes it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use krabka_protocol::ErrorCode;

use super::metadata::{epoch_exhausted, TopicPartition, TransactionMetadata, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use super::records::TxnRecord;
use super::state::TransactionState::*;
use crate::runtime::{self, CoordinatorLog, Replayed, Shards, Time};

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

#[derive(Clone, Debug)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
}

/// What a call uses of its host. Kept this narrow so the coordinator never
/// reaches for the broker.
pub struct TxnHost<'a> {
    /// The `__transaction_state` partitions the shards persist to.
    pub log: &'a dyn CoordinatorLog,
    pub now: Time,
    /// The cluster's finalized `transaction.version` (0 when none is).
    pub transaction_version: i16,
    /// A fresh producer id, or None when none is at hand (the host is
    /// fetching a new block; the client is told to retry).
    pub producer_ids: &'a dyn Fn() -> Option<i64>,
}

impl TxnHost<'_> {
    /// The version of TransactionLogValue the cluster writes.
    fn log_value_version(&self) -> i16 {
        if self.transaction_version >= 1 {
            1
        } else {
            0
        }
    }

    pub(super) fn fresh_producer_id(&self) -> Result<i64, ErrorCode> {
        // Kafka's answer while its broker waits for a block of ids.
        (self.producer_ids)().ok_or(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
    }
}

/// The markers one prepared transaction needs written, then completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Markers {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The leader epoch of the id's `__transaction_state` partition: a
    /// partition leader refuses markers from an older coordinator.
    pub coordinator_epoch: i32,
    pub commit: bool,
    /// The transaction version the markers are written for (WriteTxnMarkers v2).
    pub transaction_version: i16,
    pub partitions: Vec<TopicPartition>,
}

/// A request's answer and, when it prepared a transaction's end, the
/// markers to write.
#[derive(Debug, PartialEq)]
pub struct Answer<T> {
    pub result: Result<T, ErrorCode>,
    pub markers: Option<Markers>,
}

impl<T> Answer<T> {
    pub(super) fn error(code: ErrorCode) -> Self {
        Answer { result: Err(code), markers: None }
    }
}

/// The transactional ids of one `__transaction_state` partition.
#[derive(Default)]
pub(super) struct Shard {
    pub(super) ids: HashMap<String, TransactionMetadata>,
}

pub struct TransactionCoordinator {
    pub(super) config: TxnConfig,
    shards: OnceLock<Shards<Shard>>,
    default_partitions: usize,
    /// Markers of prepared transactions found by loads on a leadership
    /// change, for the host to write.
    to_rewrite: Mutex<Vec<Markers>>,
}

/// The error a failed append of `__transaction_state` is answered with
/// (Kafka's mapping in its TransactionStateManager).
fn append_error(code: i16) -> ErrorCode {
    match ErrorCode::from(code) {
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        | ErrorCode::NOT_ENOUGH_REPLICAS
        | ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | ErrorCode::REQUEST_TIMED_OUT => ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => ErrorCode::NOT_COORDINATOR,
        ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE => ErrorCode::UNKNOWN_SERVER_ERROR,
        other => other,
    }
}

/// One record of `__transaction_state` replayed into its shard (the topic
/// holds no transactions of its own).
fn replay(shard: &mut Shard, replayed: Replayed) {
    if let Replayed::Record { key, value, .. } = replayed {
        replay_record(shard, key, value);
    }
}

fn replay_record(shard: &mut Shard, key: Bytes, value: Option<Bytes>) {
    let record = match TxnRecord::decode(key, value) {
        Ok(Some(record)) => record,
        Ok(None) => return,
        Err(error) => {
            // As Kafka: a value it cannot read is skipped with a warning.
            tracing::warn!(%error, "skipping a __transaction_state record it cannot read");
            return;
        }
    };
    let Some(value) = record.value else {
        shard.ids.remove(&record.transactional_id);
        return;
    };
    match TransactionMetadata::from_value(&record.transactional_id, &value) {
        Ok(meta) => {
            shard.ids.insert(record.transactional_id, meta);
        }
        Err(error) => tracing::warn!(%error, id = %record.transactional_id, "skipping a transaction state"),
    }
}

impl TransactionCoordinator {
    /// `partitions` is `transaction.state.log.num.partitions`, the count to
    /// size by when the topic does not exist at load.
    pub fn new(config: TxnConfig, partitions: usize) -> Self {
        TransactionCoordinator {
            config,
            shards: OnceLock::new(),
            default_partitions: partitions,
            to_rewrite: Mutex::default(),
        }
    }

    pub(super) fn shards(&self) -> &Shards<Shard> {
        self.shards.get_or_init(|| Shards::new(self.default_partitions))
    }

    /// The `__transaction_state` partition of `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> usize {
        self.shards().index_of(transactional_id)
    }

    /// Replays `__transaction_state` into memory (on start), its shards sized
    /// by `partitions`, the topic's partition count when it exists. Returns
    /// the markers of the transactions found prepared, to write again.
    pub fn load(&self, log: &dyn CoordinatorLog, partitions: Option<usize>) -> Result<Vec<Markers>, String> {
        let count = partitions.unwrap_or(self.default_partitions).max(1);
        self.shards.get_or_init(|| Shards::new(count));
        self.shards().load(log, |_, shard, replayed| replay(shard, replayed))?;
        Ok((0..self.shards().len()).flat_map(|index| self.prepared(log, index)).collect())
    }

    /// Whether this node coordinates the ids of partition `index` (it leads
    /// it), replaying it first when it came to lead it since it was loaded;
    /// the markers of the transactions that replay found prepared wait in
    /// [`take_markers_to_rewrite`](Self::take_markers_to_rewrite).
    pub fn follow_leadership(&self, log: &dyn CoordinatorLog, index: usize) -> bool {
        let before = self.shards().loaded_epoch(index);
        match self.shards().load_if_led_anew(index, log, |_, shard, replayed| replay(shard, replayed)) {
            Ok(true) => {
                if before != log.leader_epoch(index) {
                    let prepared = self.prepared(log, index);
                    self.to_rewrite.lock().unwrap_or_else(|e| e.into_inner()).extend(prepared);
                }
                true
            }
            Ok(false) => false,
            Err(error) => {
                tracing::error!(partition = index, %error, "could not load a transaction state partition");
                false
            }
        }
    }

    /// Loads every partition this node has come to lead since it was last
    /// loaded (Kafka loads one when its broker is elected its leader); the
    /// markers of the prepared transactions found, to write again.
    pub fn take_markers_to_rewrite(&self, log: &dyn CoordinatorLog) -> Vec<Markers> {
        for index in 0..self.shards().len() {
            self.follow_leadership(log, index);
        }
        std::mem::take(&mut *self.to_rewrite.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The markers of every prepared transaction of shard `index`.
    fn prepared(&self, log: &dyn CoordinatorLog, index: usize) -> Vec<Markers> {
        let Some(epoch) = log.leader_epoch(index) else { return Vec::new() };
        let shard = self.shards().lock(index);
        shard.ids.values().filter(|meta| meta.state.is_preparing()).map(|meta| markers_of(meta, epoch)).collect()
    }

    /// The shard of `transactional_id`, locked, if this node coordinates it.
    pub(super) fn coordinated(
        &self,
        host: &TxnHost<'_>,
        transactional_id: &str,
    ) -> Result<(usize, i32, MutexGuard<'_, Shard>), ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        let index = self.partition_for(transactional_id);
        if !self.follow_leadership(host.log, index) {
            return Err(ErrorCode::NOT_COORDINATOR);
        }
        let epoch = host.log.leader_epoch(index).ok_or(ErrorCode::NOT_COORDINATOR)?;
        Ok((index, epoch, self.shards().lock(index)))
    }

    /// Persists `next` as the id's state, then takes it.
    pub(super) fn write(
        &self,
        host: &TxnHost<'_>,
        index: usize,
        shard: &mut Shard,
        next: TransactionMetadata,
    ) -> Result<(), ErrorCode> {
        let record = TxnRecord {
            transactional_id: next.transactional_id.clone(),
            value: Some(next.to_value(host.log_value_version())),
        };
        runtime::persist(host.log, index, &[record.encode(host.log_value_version())], host.now.wall_ms)
            .map_err(append_error)?;
        shard.ids.insert(next.transactional_id.clone(), next);
        Ok(())
    }

    /// InitProducerId with a transactional id: the producer's id and epoch
    /// (bumped, or a new id once the epoch is exhausted), fencing any
    /// older producer of the id. An open transaction is aborted first; the
    /// producer is told CONCURRENT_TRANSACTIONS and retries.
    pub fn init_producer_id(
        &self,
        host: &TxnHost<'_>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Answer<(i64, i16)> {
        let timeout_valid = (1..=self.config.max_timeout_ms).contains(&timeout_ms);
        if !transactional_id.is_empty() && !timeout_valid {
            return Answer::error(ErrorCode::INVALID_TRANSACTION_TIMEOUT);
        }
        let (index, coordinator_epoch, mut shard) = match self.coordinated(host, transactional_id) {
            Ok(found) => found,
            Err(code) => return Answer::error(code),
        };
        // A new id is kept only once its first state is written.
        let meta = match shard.ids.get(transactional_id) {
            Some(meta) => meta.clone(),
            None => match host.fresh_producer_id() {
                Ok(id) => TransactionMetadata::new(transactional_id, id, timeout_ms, host.now.wall_ms),
                Err(code) => return Answer::error(code),
            },
        };
        if let Some((producer_id, epoch)) = expected {
            let valid = meta.producer_epoch == NO_PRODUCER_EPOCH
                || producer_id == meta.producer_id
                || (producer_id == meta.previous_producer_id && epoch_exhausted(epoch));
            if !valid {
                return Answer::error(ErrorCode::PRODUCER_FENCED);
            }
        }
        let now = host.now.wall_ms;
        let next = match meta.state {
            PrepareCommit | PrepareAbort => return Answer::error(ErrorCode::CONCURRENT_TRANSACTIONS),
            Ongoing => {
                let markers = self.fence_and_abort(host, index, coordinator_epoch, &mut shard, &meta);
                let code = markers.as_ref().err().copied().unwrap_or(ErrorCode::CONCURRENT_TRANSACTIONS);
                return Answer { result: Err(code), markers: markers.ok() };
            }
            Empty | CompleteCommit | CompleteAbort => {
                if meta.epoch_exhausted() && expected.is_none_or(|(_, epoch)| epoch == meta.producer_epoch) {
                    match host.fresh_producer_id() {
                        Ok(id) => meta.prepare_rotate_producer_id(id, timeout_ms, expected.is_some(), now),
                        Err(code) => Err(code),
                    }
                } else {
                    meta.prepare_increment_epoch(timeout_ms, expected.map(|(_, epoch)| epoch), now)
                }
            }
            Dead | PrepareEpochFence => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        };
        let result = next.and_then(|next| {
            let answer = (next.producer_id, next.producer_epoch);
            self.write(host, index, &mut shard, next).map(|()| answer)
        });
        Answer { result, markers: None }
    }

    /// Fences the producer of the open transaction `meta` (a newer
    /// producer's InitProducerId, a timeout) and aborts the transaction:
    /// the markers of the abort, once it is prepared. Under transaction
    /// version 2 the abort bumps the epoch itself; before, the fence's bump
    /// is the abort's epoch. (Kafka keeps a fence whose abort could not be
    /// written in memory, and does not bump again; here nothing changed,
    /// so the next fence bumps from the same epoch to the same value.)
    pub(super) fn fence_and_abort(
        &self,
        host: &TxnHost<'_>,
        index: usize,
        coordinator_epoch: i32,
        shard: &mut Shard,
        meta: &TransactionMetadata,
    ) -> Result<Markers, ErrorCode> {
        let now = host.now.wall_ms;
        let next = if host.transaction_version >= 2 {
            let next_producer_id = if meta.epoch_exhausted() { host.fresh_producer_id()? } else { NO_PRODUCER_ID };
            meta.prepare_abort_or_commit(PrepareAbort, 2, next_producer_id, false, now)?
        } else {
            let mut fenced = meta.prepare_fence_epoch()?;
            fenced.last_producer_epoch = NO_PRODUCER_EPOCH;
            fenced.prepare_abort_or_commit(PrepareAbort, 0, NO_PRODUCER_ID, false, now)?
        };
        let markers = markers_of(&next, coordinator_epoch);
        self.write(host, index, shard, next)?;
        Ok(markers)
    }
}

/// The markers that end the transaction `meta` was prepared to end.
pub(super) fn markers_of(meta: &TransactionMetadata, coordinator_epoch: i32) -> Markers {
    debug_assert!(meta.state.is_preparing());
    Markers {
        transactional_id: meta.transactional_id.clone(),
        producer_id: meta.producer_id,
        producer_epoch: meta.producer_epoch,
        coordinator_epoch,
        commit: meta.state == PrepareCommit,
        transaction_version: meta.client_transaction_version,
        partitions: meta.partitions.iter().cloned().collect(),
    }
}

/// The partitions of a request as a set.
pub(super) fn partition_set(partitions: &[TopicPartition]) -> BTreeSet<TopicPartition> {
    partitions.iter().cloned().collect()
}
