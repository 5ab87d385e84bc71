//! A leader's answer to a follower's fetch, written to the follower's
//! partitions: records appended as they came, a divergence truncated
//! (KIP-320), an offset out of the leader's range resolved.

use std::collections::HashMap;
use std::sync::Arc;

use krabka_protocol::fetch_response::PartitionData;
use krabka_protocol::records::whole_batches;
use krabka_protocol::{ErrorCode, FetchResponse, Uuid};
use krabka_replication::divergence::follower_truncation;

use crate::clock::now_ms;
use crate::replica::{AppendError, FetchedFromLeader, Partition};

/// What was asked of one partition (or what the fetch session holds of
/// it), to match its answer with.
pub(super) struct Sent {
    pub partition: Arc<Partition>,
    pub fetch_offset: i64,
    pub leader_epoch: i32,
}

/// The record bytes `response` brings for partitions this follower
/// throttles, which count against its rate (Kafka counts them in sync or not).
pub(super) fn throttled_bytes(sent: &HashMap<(Uuid, i32), Sent>, response: &FetchResponse) -> u64 {
    let partitions = response.responses.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p)));
    partitions
        .filter(|(topic_id, p)| {
            sent.get(&(*topic_id, p.partition_index)).is_some_and(|s| s.partition.follower_throttled())
        })
        .map(|(_, p)| p.records.as_ref().map_or(0, |r| r.len() as u64))
        .sum()
}

/// Writes each partition's answer; the partitions that answered an error,
/// with it, to be left out of fetches for a backoff.
pub(super) fn apply_response(sent: &HashMap<(Uuid, i32), Sent>, response: FetchResponse) -> Vec<((Uuid, i32), i16)> {
    let mut failed = Vec::new();
    let now = now_ms();
    for topic in response.responses {
        for data in topic.partitions {
            let key = (topic.topic_id, data.partition_index);
            let Some(sent) = sent.get(&key) else { continue };
            if let Err(error) = apply_partition(sent, data, now) {
                failed.push((key, error));
            }
        }
    }
    failed
}

/// One partition's answer: records appended, a divergence truncated, an
/// offset out of range resolved; Err with the error code otherwise.
fn apply_partition(sent: &Sent, data: PartitionData, now: i64) -> Result<(), i16> {
    let partition = &sent.partition;
    if partition.leader_epoch() != sent.leader_epoch || partition.is_led_here() {
        // The partition changed hands while the fetch was out: its answer is stale.
        return Ok(());
    }
    let storage_error = |e: &dyn std::fmt::Display| {
        tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "follower write failed");
        ErrorCode::KAFKA_STORAGE_ERROR.code()
    };
    match data.error_code {
        0 if data.diverging_epoch.epoch >= 0 && data.diverging_epoch.end_offset >= 0 => {
            let (epoch, leader_end) = (data.diverging_epoch.epoch, data.diverging_epoch.end_offset);
            let (local, local_log_end) = partition.end_offset_for_epoch(epoch);
            let offset = follower_truncation(leader_end, local, local_log_end);
            tracing::info!(topic = %partition.topic, partition = partition.index, epoch, offset, "truncating a diverged follower");
            partition.truncate_to(offset, sent.fetch_offset, now).map_err(|e| storage_error(&e))
        }
        0 => {
            let fetched = FetchedFromLeader {
                fetch_offset: sent.fetch_offset,
                records: whole_batches(data.records.unwrap_or_default()),
                leader_high_watermark: data.high_watermark,
                leader_log_start: data.log_start_offset,
            };
            let appended = partition.append_from_leader(&fetched, now);
            tracing::debug!(topic = %partition.topic, partition = partition.index, offset = fetched.fetch_offset, bytes = fetched.records.len(), ?appended, "follower fetched");
            match appended {
                Ok(_) => Ok(()),
                Err(AppendError::NotLeader) => Ok(()),
                Err(e) => Err(storage_error(&e)),
            }
        }
        code if code == ErrorCode::OFFSET_OUT_OF_RANGE.code() => {
            let outcome = if data.log_start_offset > sent.fetch_offset {
                let offset = data.log_start_offset;
                tracing::info!(topic = %partition.topic, partition = partition.index, offset, "follower behind the leader's log start: starting over there");
                partition.truncate_fully_and_start_at(offset, sent.fetch_offset, now)
            } else {
                // Past the leader's end: what it has not got is not committed.
                let offset = data.high_watermark.max(0);
                tracing::info!(topic = %partition.topic, partition = partition.index, offset, "follower past the leader's log end: truncating to its high watermark");
                partition.truncate_to(offset, sent.fetch_offset, now)
            };
            outcome.map_err(|e| storage_error(&e))
        }
        code => Err(code),
    }
}
