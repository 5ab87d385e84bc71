//! Offsets committed inside a transaction (TxnOffsetCommit, KIP-98 and
//! KIP-447): written to the group's `__consumer_offsets` partition in a
//! transactional batch of the producer, and counted only once the
//! producer's commit marker follows (an abort marker drops them), as Kafka's
//! group coordinator keeps them pending.

use krabka_protocol::ErrorCode;

use super::records::CoordinatorRecord;
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
/// committed or dropped. A committed one counts only where no later record
/// (a plain OffsetCommit written after it, while the transaction was open)
/// committed the partition already: Kafka keeps the offset of the later
/// record, so that compaction of the topic, which keeps the last record of
/// each key, cannot bring back another offset than the one in force.
pub(super) fn complete(shard: &mut Shard, producer_id: i64, commit: bool, now: Time) {
    let Some(pending) = shard.pending.remove(&producer_id) else { return };
    if !commit {
        return;
    }
    for (record_offset, record) in pending {
        if let CoordinatorRecord::Offset { key, .. } = &record {
            let committed =
                shard.groups.get(&key.group).and_then(|e| e.offsets.get(&(key.topic.clone(), key.partition)));
            if committed.is_some_and(|c| c.record_offset > record_offset) {
                continue;
            }
        }
        apply(shard, record, record_offset, now);
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
        let first_offset = match runtime::persist_transactional(host.log, index, &encoded, now_ms, producer) {
            Ok(first_offset) => first_offset,
            Err(code) => {
                // The producer's epoch was fenced by a newer one on the log.
                let fenced = code == ErrorCode::INVALID_PRODUCER_EPOCH.code();
                fail_accepted(&mut results, if fenced { ErrorCode::PRODUCER_FENCED.code() } else { code });
                return results;
            }
        };
        shard.pending.entry(committer.producer_id).or_default().extend((first_offset..).zip(records));
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
            .filter_map(|(_, record)| match record {
                CoordinatorRecord::Offset { key, .. } if key.group == group_id => {
                    Some((key.topic.clone(), key.partition))
                }
                _ => None,
            })
            .collect()
    }
}
