//! A transaction's course after InitProducerId: partitions added to it
//! (AddPartitionsToTxn, AddOffsetsToTxn), verified by partition leaders,
//! its end prepared (EndTxn) and completed once its markers are written.

use krabka_protocol::ErrorCode;

use super::coordinator::{markers_of, partition_set, Answer, Markers, TransactionCoordinator, TxnHost};
use super::metadata::{epoch_exhausted, TopicPartition, TransactionMetadata, NO_PRODUCER_ID};
use super::state::TransactionState::*;

/// What EndTxn asks: the producer, and whether to commit or abort.
#[derive(Clone, Copy, Debug)]
pub struct EndTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// 2 for EndTxn v5 (transactions v2: the epoch bumped at every end),
    /// else 0.
    pub client_transaction_version: i16,
}

/// Whether the producer asking is the id's current one, with its
/// transaction open to more partitions (Kafka checks in this order).
fn check_producer(meta: &TransactionMetadata, producer_id: i64, producer_epoch: i16) -> Result<(), ErrorCode> {
    if meta.producer_id != producer_id {
        return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
    }
    if meta.producer_epoch != producer_epoch {
        return Err(ErrorCode::PRODUCER_FENCED);
    }
    if meta.state.is_preparing() {
        return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
    }
    Ok(())
}

impl TransactionCoordinator {
    /// AddPartitionsToTxn (AddOffsetsToTxn adds the group's offsets
    /// partition the same way, at client version 0): the transaction
    /// opened, or widened. One answer for all the partitions.
    pub fn add_partitions(
        &self,
        host: &TxnHost<'_>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        client_transaction_version: i16,
    ) -> Result<(), ErrorCode> {
        let (index, _, mut shard) = self.coordinated(host, transactional_id)?;
        let meta = shard.ids.get(transactional_id).ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)?.clone();
        check_producer(&meta, producer_id, producer_epoch)?;
        if meta.state == Ongoing && partition_set(partitions).is_subset(&meta.partitions) {
            return Ok(());
        }
        let next =
            meta.prepare_add_partitions(partitions.iter().cloned(), client_transaction_version, host.now.wall_ms)?;
        self.write(host, index, &mut shard, next)
    }

    /// AddPartitionsToTxn with VerifyOnly (a partition leader checking a
    /// transactional produce): each partition's answer, NONE when it is in
    /// the transaction, TRANSACTION_ABORTABLE when it is not.
    pub fn verify_partitions(
        &self,
        host: &TxnHost<'_>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Vec<(TopicPartition, ErrorCode)> {
        let all = |code: ErrorCode| partitions.iter().map(|p| (p.clone(), code)).collect();
        let shard = match self.coordinated(host, transactional_id) {
            Ok((_, _, shard)) => shard,
            Err(code) => return all(code),
        };
        let Some(meta) = shard.ids.get(transactional_id) else { return all(ErrorCode::INVALID_PRODUCER_ID_MAPPING) };
        if let Err(code) = check_producer(meta, producer_id, producer_epoch) {
            return all(code);
        }
        partitions
            .iter()
            .map(|p| {
                let code = if meta.partitions.contains(p) { ErrorCode::NONE } else { ErrorCode::TRANSACTION_ABORTABLE };
                (p.clone(), code)
            })
            .collect()
    }

    /// EndTxn: the transaction prepared to commit or abort, its markers
    /// handed back. The answer's producer id and epoch are what the
    /// producer goes on with under transactions v2 (the epoch bumped, or a
    /// new id at epoch 0 once it is exhausted), -1/-1 before.
    pub fn end_txn(&self, host: &TxnHost<'_>, transactional_id: &str, end: EndTxn) -> Answer<(i64, i16)> {
        let (index, coordinator_epoch, mut shard) = match self.coordinated(host, transactional_id) {
            Ok(found) => found,
            Err(code) => return Answer::error(code),
        };
        let Some(meta) = shard.ids.get(transactional_id).cloned() else {
            return Answer::error(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        let v2 = end.client_transaction_version >= 2;
        let retry_on_overflow = v2
            && meta.previous_producer_id == end.producer_id
            && epoch_exhausted(end.producer_epoch)
            && meta.producer_epoch == 0;
        let retry_on_bump = v2 && i32::from(meta.producer_epoch) == i32::from(end.producer_epoch) + 1;
        let is_retry = retry_on_bump || retry_on_overflow;
        if meta.producer_id != end.producer_id && !retry_on_overflow {
            return Answer::error(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        let valid_epoch = match (v2, meta.state) {
            (false, _) => end.producer_epoch == meta.producer_epoch,
            (true, PrepareCommit | PrepareAbort) => retry_on_bump,
            (true, CompleteCommit | CompleteAbort) => is_retry || end.producer_epoch == meta.producer_epoch,
            (true, _) => end.producer_epoch == meta.producer_epoch,
        };
        if !valid_epoch {
            return Answer::error(ErrorCode::PRODUCER_FENCED);
        }
        // An early success tells a retrying producer where it stands.
        let current = if v2 { (meta.producer_id, meta.producer_epoch) } else { (-1, -1) };
        let (target, no_partition_added) = match (meta.state, end.commit) {
            (Ongoing, true) => (PrepareCommit, false),
            (Ongoing, false) => (PrepareAbort, false),
            (CompleteCommit, true) | (CompleteAbort, false) if is_retry || !v2 => {
                return Answer { result: Ok(current), markers: None };
            }
            // Transactions v2 end an empty transaction by aborting it
            // (bumping the epoch), but not a commit being retried.
            (CompleteCommit, false) if v2 && is_retry => return Answer::error(ErrorCode::INVALID_TXN_STATE),
            (CompleteCommit | CompleteAbort | Empty, false) if v2 => (PrepareAbort, true),
            (PrepareCommit, true) | (PrepareAbort, false) => {
                return Answer::error(ErrorCode::CONCURRENT_TRANSACTIONS);
            }
            _ => return Answer::error(ErrorCode::INVALID_TXN_STATE),
        };
        let next_producer_id = if v2 && meta.epoch_exhausted() {
            match host.fresh_producer_id() {
                Ok(id) => id,
                Err(code) => return Answer::error(code),
            }
        } else {
            NO_PRODUCER_ID
        };
        let now = host.now.wall_ms;
        let next = match meta.prepare_abort_or_commit(
            target,
            end.client_transaction_version,
            next_producer_id,
            no_partition_added,
            now,
        ) {
            Ok(next) => next,
            Err(code) => return Answer::error(code),
        };
        let complete = next.prepare_complete(now).map(|c| (c.producer_id, c.producer_epoch));
        let markers = markers_of(&next, coordinator_epoch);
        if let Err(code) = self.write(host, index, &mut shard, next) {
            return Answer::error(code);
        }
        let result = if v2 { complete } else { Ok((-1, -1)) };
        Answer { result, markers: Some(markers) }
    }

    /// Every marker of `markers` written (or its partition gone): the
    /// transaction completed (CompleteCommit, CompleteAbort). Nothing is
    /// done when the id moved on meanwhile or this node no longer
    /// coordinates it at the markers' epoch: the new coordinator writes
    /// them again.
    pub fn markers_written(&self, host: &TxnHost<'_>, markers: &Markers) -> Result<(), ErrorCode> {
        let (index, coordinator_epoch, mut shard) = self.coordinated(host, &markers.transactional_id)?;
        if coordinator_epoch != markers.coordinator_epoch {
            return Err(ErrorCode::NOT_COORDINATOR);
        }
        let Some(meta) = shard.ids.get(&markers.transactional_id) else { return Ok(()) };
        let prepared = if markers.commit { PrepareCommit } else { PrepareAbort };
        if meta.state != prepared
            || meta.producer_id != markers.producer_id
            || meta.producer_epoch != markers.producer_epoch
        {
            return Ok(());
        }
        let next = meta.prepare_complete(host.now.wall_ms)?;
        self.write(host, index, &mut shard, next)
    }
}
