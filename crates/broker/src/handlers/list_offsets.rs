//! ListOffsets: earliest, latest, max-timestamp and by-timestamp lookups.

use krabka_protocol::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use krabka_protocol::{ErrorCode, ListOffsetsRequest, ListOffsetsResponse};

use crate::authorization::Access;
use crate::errors::log_error_code;
use crate::request::RequestContext;
use krabka_security::acl::{AclOperation, ResourceType};

/// Special timestamps of ListOffsets (KIP-734, KIP-1005, KIP-1023).
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;
const READ_COMMITTED: i8 = 1;
/// The first ListOffsets response version with a leader epoch.
const LEADER_EPOCH_VERSION: i16 = 4;

pub fn handle(ctx: &RequestContext<'_>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            // DESCRIBE on the topic, under an authorizer, as Kafka asks it.
            let denied = !access.allows(AclOperation::Describe, ResourceType::Topic, &topic.name);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut out = ListOffsetsPartitionResponse {
                        partition_index: p.partition_index,
                        timestamp: -1,
                        offset: -1,
                        leader_epoch: -1,
                        ..Default::default()
                    };
                    if denied {
                        out.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
                        return out;
                    }
                    let partition = match broker.replicas.leader_partition(
                        &topic.name,
                        p.partition_index,
                        p.current_leader_epoch,
                    ) {
                        Ok(partition) => partition,
                        Err(error_code) => {
                            out.error_code = error_code;
                            return out;
                        }
                    };
                    let epoch = partition.leader_epoch();
                    let log = partition.lock_log();
                    let high_watermark = partition.high_watermark();
                    // A replica (a follower, or a debugging tool naming a
                    // broker) reads to the log end; a client to the high
                    // watermark or the last stable offset.
                    let from_replica = request.replica_id >= 0;
                    let latest = match (from_replica, request.isolation_level == READ_COMMITTED) {
                        (true, _) => log.log_end_offset(),
                        (false, true) => log.last_stable_offset(high_watermark),
                        (false, false) => high_watermark,
                    };
                    // A new leader whose high watermark has not reached the
                    // start of its epoch cannot say yet where the committed
                    // log ends (Kafka's OFFSET_NOT_AVAILABLE, retriable).
                    let epoch_start = log.leader_epochs().entries().last().map_or(0, |e| e.start_offset);
                    let not_available = !from_replica && epoch_start > high_watermark;
                    let epoch_of = |offset: i64| {
                        let entries = log.leader_epochs().entries();
                        entries.iter().rev().find(|e| e.start_offset <= offset).map_or(epoch, |e| e.epoch)
                    };
                    let found = match p.timestamp {
                        EARLIEST | EARLIEST_LOCAL => Ok(Some((-1, log.log_start_offset()))),
                        // No tiered storage: nothing is tiered or pending upload.
                        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Ok(None),
                        _ if not_available => {
                            out.error_code = ErrorCode::OFFSET_NOT_AVAILABLE.code();
                            return out;
                        }
                        LATEST => Ok(Some((-1, latest))),
                        MAX_TIMESTAMP => log.max_timestamp_offset(),
                        target => log.offset_for_timestamp(target),
                    };
                    // What a client may not fetch yet is not an answer either.
                    let by_timestamp = !matches!(p.timestamp, LATEST | EARLIEST | EARLIEST_LOCAL);
                    let found = found.map(|f| f.filter(|&(_, offset)| !by_timestamp || offset < latest));
                    match found {
                        Ok(Some((timestamp, offset))) => {
                            out.timestamp = timestamp;
                            out.offset = offset;
                            // v1-3 responses have no leader epoch (KIP-279 added it in v4).
                            if ctx.api_version >= LEADER_EPOCH_VERSION {
                                out.leader_epoch =
                                    if offset >= 0 && offset < log.log_end_offset() { epoch_of(offset) } else { epoch };
                            }
                        }
                        Ok(None) => {}
                        Err(e) => out.error_code = log_error_code(&e),
                    }
                    out
                })
                .collect();
            ListOffsetsTopicResponse { name: topic.name, partitions, ..Default::default() }
        })
        .collect();
    ListOffsetsResponse { topics, ..Default::default() }
}
