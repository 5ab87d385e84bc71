//! One transactional id's state and the transitions Kafka's coordinator
//! makes on it. A transition computes the next state (Kafka's "transit
//! metadata") without touching this one; the coordinator persists it to
//! `__transaction_state` and only then takes it as the id's state.

use std::collections::BTreeSet;

use krabka_protocol::{ErrorCode, TransactionLogValue};

use super::records::partitions_schema;
use super::state::TransactionState::{self, *};

/// No producer id (Kafka's `RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;
/// No producer epoch (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// True for an epoch past which a producer gets a new producer id
/// (Kafka's `isEpochExhausted`: Short.MaxValue - 1 and up).
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A partition of a transaction: (topic, partition).
pub type TopicPartition = (String, i32);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last rotation (NO_PRODUCER_ID if none):
    /// a retried EndTxn from the old id is recognised by it.
    pub previous_producer_id: i64,
    /// The producer id the transaction being completed hands over to, when
    /// its epoch bump exhausted the current one (transactions v2).
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump: a producer that retries after the
    /// bump's answer was lost is recognised by it (KIP-360).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TransactionState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (-1 with none).
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The transaction version the producer's last EndTxn spoke (2: the
    /// epoch is bumped at every transaction's end).
    pub client_transaction_version: i16,
}

impl TransactionMetadata {
    /// A transactional id seen for the first time: not yet written.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            client_transaction_version: 0,
        }
    }

    /// The metadata a record of `__transaction_state` holds.
    pub fn from_value(transactional_id: &str, value: &TransactionLogValue) -> Result<Self, String> {
        let state = TransactionState::from_id(value.transaction_status)
            .ok_or_else(|| format!("unknown transaction status {}", value.transaction_status))?;
        // Kafka reads no partitions for Empty, whatever the record holds.
        let partitions = value
            .transaction_partitions
            .iter()
            .filter(|_| state != Empty)
            .flatten()
            .flat_map(|topic| topic.partition_ids.iter().map(|&p| (topic.topic.clone(), p)))
            .collect();
        Ok(TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            // Not written: as Kafka, a loaded id has none.
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms: value.transaction_timeout_ms,
            state,
            partitions,
            start_ms: value.transaction_start_timestamp_ms,
            last_update_ms: value.transaction_last_update_timestamp_ms,
            client_transaction_version: value.client_transaction_version,
        })
    }

    /// The record value of this state, at log value `version` (0 has no
    /// place for the producer id hand-over or the client's version).
    pub fn to_value(&self, version: i16) -> TransactionLogValue {
        debug_assert!(self.state != PrepareEpochFence, "a fence is written as its abort");
        let v1 = version >= 1;
        TransactionLogValue {
            producer_id: self.producer_id,
            previous_producer_id: if v1 { self.previous_producer_id } else { NO_PRODUCER_ID },
            next_producer_id: if v1 { self.next_producer_id } else { NO_PRODUCER_ID },
            producer_epoch: self.producer_epoch,
            next_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms: self.timeout_ms,
            transaction_status: self.state.id(),
            // Kafka writes no partition list for Empty.
            transaction_partitions: (self.state != Empty).then(|| partitions_schema(&self.partitions)),
            transaction_last_update_timestamp_ms: self.last_update_ms,
            transaction_start_timestamp_ms: self.start_ms,
            client_transaction_version: if v1 { self.client_transaction_version } else { 0 },
            ..Default::default()
        }
    }

    /// True when one more bump would reach the last epoch (Short.MaxValue
    /// is never handed out: a transaction v2 commit needs one bump more).
    pub fn epoch_exhausted(&self) -> bool {
        epoch_exhausted(self.producer_epoch)
    }

    /// This state moved to `state`, checked against Kafka's transitions.
    fn to(&self, state: TransactionState, now_ms: i64) -> Result<Self, ErrorCode> {
        if !state.valid_previous().contains(&self.state) {
            return Err(ErrorCode::INVALID_TXN_STATE);
        }
        // Kafka records the producer id every transition starts from.
        Ok(TransactionMetadata {
            state,
            last_update_ms: now_ms,
            previous_producer_id: self.producer_id,
            ..self.clone()
        })
    }

    /// InitProducerId on an id with no open transaction: the epoch bumped,
    /// or kept when `expected` is a retry of the bump that made it (KIP-360);
    /// PRODUCER_FENCED when `expected` is neither.
    pub fn prepare_increment_epoch(
        &self,
        timeout_ms: i32,
        expected: Option<i16>,
        now_ms: i64,
    ) -> Result<Self, ErrorCode> {
        debug_assert!(!self.epoch_exhausted());
        let bumped = self.producer_epoch + 1;
        let (epoch, last) = match expected {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped, self.producer_epoch)
            }
            Some(e) if e == self.last_producer_epoch => (self.producer_epoch, self.last_producer_epoch),
            Some(_) => return Err(ErrorCode::PRODUCER_FENCED),
        };
        let mut next = self.to(Empty, now_ms)?;
        next.producer_epoch = epoch;
        next.last_producer_epoch = last;
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_ms = -1;
        Ok(next)
    }

    /// InitProducerId when the epoch is exhausted (or the id is new): a
    /// fresh producer id at epoch 0.
    pub fn prepare_rotate_producer_id(
        &self,
        producer_id: i64,
        timeout_ms: i32,
        keep_last_epoch: bool,
        now_ms: i64,
    ) -> Result<Self, ErrorCode> {
        let mut next = self.to(Empty, now_ms)?;
        next.producer_id = producer_id;
        next.producer_epoch = 0;
        next.last_producer_epoch = if keep_last_epoch { self.producer_epoch } else { NO_PRODUCER_EPOCH };
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_ms = -1;
        Ok(next)
    }

    /// An open transaction's producer fenced (a newer producer, a timeout):
    /// the epoch bumped so the old producer's writes are refused, before the
    /// transaction is aborted (the last epoch is kept). Never written itself.
    pub fn prepare_fence_epoch(&self) -> Result<Self, ErrorCode> {
        let mut next = self.to(PrepareEpochFence, self.last_update_ms)?;
        if self.producer_epoch < i16::MAX {
            next.producer_epoch = self.producer_epoch + 1;
        }
        Ok(next)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): the
    /// transaction open, started now if none was.
    pub fn prepare_add_partitions(
        &self,
        added: impl IntoIterator<Item = TopicPartition>,
        client_transaction_version: i16,
        now_ms: i64,
    ) -> Result<Self, ErrorCode> {
        let mut next = self.to(Ongoing, now_ms)?;
        if self.state.is_complete() {
            next.start_ms = now_ms;
        }
        next.partitions.extend(added);
        next.client_transaction_version = client_transaction_version;
        Ok(next)
    }

    /// EndTxn (or an abort the coordinator decided): PrepareCommit or
    /// PrepareAbort, the epoch bumped under transactions v2 (handing over to
    /// `next_producer_id` when that exhausts it), the start time taken as
    /// now when nothing was added (an empty abort).
    pub fn prepare_abort_or_commit(
        &self,
        state: TransactionState,
        client_transaction_version: i16,
        next_producer_id: i64,
        no_partition_added: bool,
        now_ms: i64,
    ) -> Result<Self, ErrorCode> {
        debug_assert!(state.is_preparing());
        let mut next = self.to(state, now_ms)?;
        if client_transaction_version >= 2 {
            if self.producer_epoch < i16::MAX {
                next.producer_epoch = self.producer_epoch + 1;
            } else if state == PrepareCommit {
                return Err(ErrorCode::INVALID_PRODUCER_EPOCH);
            }
            next.last_producer_epoch = self.producer_epoch;
        }
        next.next_producer_id = next_producer_id;
        next.client_transaction_version = client_transaction_version;
        if no_partition_added {
            next.start_ms = now_ms;
        }
        Ok(next)
    }

    /// Every marker written: CompleteCommit or CompleteAbort, the partitions
    /// cleared, and a pending producer id hand-over made (epoch 0).
    pub fn prepare_complete(&self, now_ms: i64) -> Result<Self, ErrorCode> {
        let state = match self.state {
            PrepareCommit => CompleteCommit,
            PrepareAbort => CompleteAbort,
            _ => return Err(ErrorCode::INVALID_TXN_STATE),
        };
        let mut next = self.to(state, now_ms)?;
        if self.client_transaction_version >= 2 && self.next_producer_id != NO_PRODUCER_ID {
            next.producer_id = self.next_producer_id;
            next.producer_epoch = 0;
        }
        next.next_producer_id = NO_PRODUCER_ID;
        next.partitions.clear();
        Ok(next)
    }

    /// The id expired: its tombstone.
    pub fn prepare_dead(&self, now_ms: i64) -> Result<Self, ErrorCode> {
        let mut next = self.to(Dead, now_ms)?;
        next.partitions.clear();
        Ok(next)
    }
}
