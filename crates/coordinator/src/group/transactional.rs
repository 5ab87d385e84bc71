//! Offsets committed inside a transaction (TxnOffsetCommit, KIP-98 and
//! KIP-447): written to the group's `__consumer_offsets` partition in a
//! transactional batch of the producer, and counted only once the
//! producer's commit marker follows (an abort marker drops them), as Kafka's
//! group coordinator keeps them pending.

use krabka_protocol::ErrorCode;

use super::{apply, commit_error, fail_accepted, GroupCoordinator, GroupEntry, GroupHost, OffsetToCommit, Shard};
use crate::runtime::{self, KeyValue, Time};

/// Who commits offsets in a transaction: the producer and, from KIP-447
/// clients, the consumer group member it consumed as.
#[derive(Clone, Copy, Debug)]
pub struct TxnCommitter<'a> {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
    pub generation_id: i32,
}

/// `producer_id`'s transaction ended on a shard: its pending offsets
/// committed (applied in the order written) or dropped.
pub(super) fn complete(shard: &mut Shard, producer_id: i64, commit: bool, now: Time) {
    let Some(pending) = shard.pending.remove(&producer_id) else { return };
    if commit {
        for record in pending {
            apply(shard, record, now);
        }
    }
}

impl GroupCoordinator {
    /// TxnOffsetCommit: each offset's answer. Accepted offsets are pending
    /// until the transaction ends.
    pub fn commit_transactional_offsets(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        committer: TxnCommitter<'_>,
        offsets: &[OffsetToCommit],
    ) -> Vec<i16> {
        let (index, mut shard) = self.shard(group_id);
        let now_ms = host.now.wall_ms;
        let entry = shard.groups.entry(group_id.to_string()).or_insert_with(|| GroupEntry::new(group_id, now_ms));
        let refused =
            commit_error(entry, committer.member_id, committer.group_instance_id, committer.generation_id, true);
        if let Some(code) = refused {
            return vec![code; offsets.len()];
        }
        let (mut results, records) = self.offset_records(host, group_id, offsets);
        let encoded: Vec<KeyValue> = records.iter().map(|r| r.encode()).collect();
        let producer = (committer.producer_id, committer.producer_epoch);
        if let Err(code) = runtime::persist_transactional(host.log, index, &encoded, now_ms, producer) {
            // The producer's epoch was fenced by a newer one on the log.
            let code =
                if code == ErrorCode::INVALID_PRODUCER_EPOCH.code() { ErrorCode::PRODUCER_FENCED.code() } else { code };
            fail_accepted(&mut results, code);
            return results;
        }
        shard.pending.entry(committer.producer_id).or_default().extend(records);
        results
    }

    /// A transaction marker of `producer_id` written to `__consumer_offsets`
    /// partition `index`: its pending offsets there committed or dropped.
    pub fn complete_transaction(&self, index: usize, producer_id: i64, commit: bool, now: Time) {
        if index < self.shards().len() {
            complete(&mut self.shards().lock(index), producer_id, commit, now);
        }
    }

    /// Whether offsets of `group_id` wait on a transaction (OffsetFetch with
    /// RequireStable answers UNSTABLE_OFFSET_COMMIT for its partitions then).
    pub fn pending_partitions(&self, group_id: &str) -> Vec<(String, i32)> {
        let (_, shard) = self.shard(group_id);
        shard
            .pending
            .values()
            .flatten()
            .filter_map(|record| match record {
                super::records::CoordinatorRecord::Offset { key, .. } if key.group == group_id => {
                    Some((key.topic.clone(), key.partition))
                }
                _ => None,
            })
            .collect()
    }
}
