//! ListOffsets: earliest, latest, max-timestamp and by-timestamp lookups.

use krabka_protocol::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use krabka_protocol::{ListOffsetsRequest, ListOffsetsResponse};

use crate::errors::log_error_code;
use crate::request::RequestContext;

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
    let broker = ctx.broker;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
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
                    let latest = if request.isolation_level == READ_COMMITTED {
                        log.last_stable_offset(high_watermark)
                    } else {
                        high_watermark
                    };
                    let epoch_of = |offset: i64| {
                        let entries = log.leader_epochs().entries();
                        entries.iter().rev().find(|e| e.start_offset <= offset).map_or(epoch, |e| e.epoch)
                    };
                    let found = match p.timestamp {
                        LATEST => Ok(Some((-1, latest))),
                        EARLIEST | EARLIEST_LOCAL => Ok(Some((-1, log.log_start_offset()))),
                        // No tiered storage: nothing is tiered or pending upload.
                        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Ok(None),
                        MAX_TIMESTAMP => log.max_timestamp_offset(),
                        target => log.offset_for_timestamp(target),
                    };
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
