//! What the coordinator does on its own and what it reports: aborting
//! transactions past their timeout, expiring idle transactional ids, and
//! DescribeTransactions / ListTransactions.

use krabka_protocol::ErrorCode;

use super::coordinator::{Markers, TransactionCoordinator, TxnHost};
use super::metadata::TransactionMetadata;
use super::records::TxnRecord;
use super::state::TransactionState::{self, *};
use crate::runtime::{self, KeyValue};

/// ListTransactions' filters (empty: any).
#[derive(Clone, Copy, Default)]
pub struct ListFilter<'a> {
    pub states: &'a [TransactionState],
    pub producer_ids: &'a [i64],
    /// Only transactions running longer than this (ms); negative: any.
    pub min_duration_ms: i64,
    /// Only ids this matches (the handler compiles the pattern).
    pub id_matches: Option<&'a dyn Fn(&str) -> bool>,
}

impl TransactionCoordinator {
    /// Aborts every open transaction past its timeout, on the shards this
    /// node leads (Kafka's "transaction-abort" task): its producer fenced,
    /// the abort prepared; the markers to write.
    pub fn abort_timed_out(&self, host: &TxnHost<'_>) -> Vec<Markers> {
        let now = host.now.wall_ms;
        let mut aborted = Vec::new();
        for index in 0..self.shards().len() {
            let Some(coordinator_epoch) = host.log.leader_epoch(index) else { continue };
            if !self.follow_leadership(host.log, index) {
                continue;
            }
            let mut shard = self.shards().lock(index);
            let expired: Vec<TransactionMetadata> = shard
                .ids
                .values()
                .filter(|m| m.state == Ongoing && m.start_ms + i64::from(m.timeout_ms) < now)
                .cloned()
                .collect();
            for meta in expired {
                match self.fence_and_abort(host, index, coordinator_epoch, &mut shard, &meta) {
                    Ok(markers) => {
                        tracing::info!(transactional_id = %meta.transactional_id, "aborting a timed-out transaction");
                        aborted.push(markers);
                    }
                    Err(code) => {
                        tracing::warn!(transactional_id = %meta.transactional_id, error = %code, "could not abort a timed-out transaction");
                    }
                }
            }
        }
        aborted
    }

    /// Removes the ids idle for `transactional.id.expiration.ms` with no
    /// open transaction (tombstones written first), on the shards this
    /// node leads; how many went.
    pub fn expire_ids(&self, host: &TxnHost<'_>) -> usize {
        let horizon = host.now.wall_ms - self.config.id_expiration_ms;
        let mut expired = 0;
        for index in 0..self.shards().len() {
            if !self.follow_leadership(host.log, index) {
                continue;
            }
            let mut shard = self.shards().lock(index);
            let ids: Vec<String> = shard
                .ids
                .values()
                .filter(|m| m.state.is_complete() && m.last_update_ms <= horizon)
                .map(|m| m.transactional_id.clone())
                .collect();
            let tombstones: Vec<KeyValue> =
                ids.iter().map(|id| TxnRecord { transactional_id: id.clone(), value: None }.encode(0)).collect();
            match runtime::persist(host.log, index, &tombstones, host.now.wall_ms) {
                Ok(_) => {
                    for id in &ids {
                        shard.ids.remove(id);
                    }
                    expired += ids.len();
                }
                Err(code) => tracing::warn!(partition = index, error = code, "could not expire transactional ids"),
            }
        }
        expired
    }

    /// DescribeTransactions of one id.
    pub fn describe(&self, host: &TxnHost<'_>, transactional_id: &str) -> Result<TransactionMetadata, ErrorCode> {
        let (_, _, shard) = self.coordinated(host, transactional_id)?;
        shard.ids.get(transactional_id).cloned().ok_or(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND)
    }

    /// ListTransactions: the ids this node coordinates that pass `filter`,
    /// with their producer id and state.
    pub fn list(&self, host: &TxnHost<'_>, filter: &ListFilter<'_>) -> Vec<(String, i64, TransactionState)> {
        let now = host.now.wall_ms;
        let passes = |m: &TransactionMetadata| {
            (filter.states.is_empty() || filter.states.contains(&m.state))
                && (filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id))
                && (filter.min_duration_ms < 0 || now - m.start_ms > filter.min_duration_ms)
                && filter.id_matches.is_none_or(|matches| matches(&m.transactional_id))
        };
        let mut listed = Vec::new();
        for index in 0..self.shards().len() {
            if !self.follow_leadership(host.log, index) {
                continue;
            }
            let shard = self.shards().lock(index);
            listed.extend(
                shard
                    .ids
                    .values()
                    .filter(|m| m.state != Dead && passes(m))
                    .map(|m| (m.transactional_id.clone(), m.producer_id, m.state)),
            );
        }
        listed.sort();
        listed
    }
}
