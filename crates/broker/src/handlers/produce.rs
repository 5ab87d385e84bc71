//! Produce: each partition's record batches are validated and appended by
//! the log (offsets patched in place, the request's bytes written as they
//! came), so nothing is copied or allocated per record. On one node the ISR
//! is this broker alone: acks=all is satisfied once the append returns.

use krabka_protocol::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use krabka_protocol::{ProduceRequest, ProduceResponse, ResponseBody, Uuid};

use super::recompress::{forced_codec, recompress};
use super::RequestContext;
use crate::config::topic::topic_compression;
use crate::connection::Reply;
use crate::errors::{code, log_error_code};
use crate::metadata::store::now_ms;

/// The most a batch may decompress to when the broker rewrites it.
const MAX_RECOMPRESS_BYTES: usize = 64 * 1024 * 1024;

fn failed(index: i32, error_code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse {
        index,
        error_code,
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        error_message: message,
        ..Default::default()
    }
}

pub fn handle(ctx: &RequestContext<'_>, request: ProduceRequest) -> Reply {
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let now = now_ms();
    let by_id = ctx.api_version >= 13;
    let mut appended = false;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic_data in request.topic_data {
        let topic = if by_id { image.topic_by_id(&topic_data.topic_id) } else { image.topic(&topic_data.name) };
        let hosted = topic.and_then(|t| broker.replicas.topic(&t.name).filter(|h| h.id == t.id));
        // min.insync.replicas above 1 cannot be met by a single replica.
        let min_isr: i32 = topic
            .and_then(|t| t.configs.get("min.insync.replicas"))
            .or_else(|| broker.config.raw.get("min.insync.replicas"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1);
        let forced = topic.and_then(|t| forced_codec(topic_compression(&broker.config, &t.configs)));
        let mut partition_responses = Vec::with_capacity(topic_data.partition_data.len());
        for data in topic_data.partition_data {
            let index = data.index;
            let partition = hosted.as_ref().and_then(|h| usize::try_from(index).ok().and_then(|i| h.partitions.get(i)));
            let records = match (forced, data.records) {
                (Some(codec), Some(records)) => match recompress(&records, codec, MAX_RECOMPRESS_BYTES) {
                    Ok(rewritten) => Some(rewritten),
                    Err(e) => {
                        partition_responses.push(failed(index, code::CORRUPT_MESSAGE, Some(e.to_string())));
                        continue;
                    }
                },
                (_, records) => records,
            };
            let response = match (partition, records) {
                _ if !matches!(request.acks, -1..=1) => failed(index, code::INVALID_REQUIRED_ACKS, None),
                _ if request.transactional_id.is_some() => failed(
                    index,
                    code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    Some("transactions are not supported yet".into()),
                ),
                (None, _) if by_id && topic.is_none() => failed(index, code::UNKNOWN_TOPIC_ID, None),
                (None, _) => failed(index, code::UNKNOWN_TOPIC_OR_PARTITION, None),
                (Some(_), _) if request.acks == -1 && min_isr > 1 => failed(
                    index,
                    code::NOT_ENOUGH_REPLICAS,
                    Some(format!(
                        "The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of {min_isr}"
                    )),
                ),
                (Some(_), None) => failed(index, code::INVALID_RECORD, Some("no records".into())),
                (Some(partition), Some(records)) => match partition.append(&records, now) {
                    Ok((info, log_start_offset)) => {
                        appended = true;
                        broker.metrics.bytes_in(&partition.topic, records.len() as u64);
                        broker.metrics.messages_in(&partition.topic, info.record_count as u64);
                        PartitionProduceResponse {
                            index,
                            error_code: code::NONE,
                            base_offset: info.first_offset,
                            log_append_time_ms: info.log_append_time_ms,
                            log_start_offset,
                            ..Default::default()
                        }
                    }
                    Err(e) => {
                        let error_code = log_error_code(&e);
                        if error_code == code::KAFKA_STORAGE_ERROR {
                            tracing::error!(topic = %partition.topic, partition = index, error = %e, "append failed");
                        } else {
                            tracing::debug!(topic = %partition.topic, partition = index, error = %e, "append refused");
                        }
                        failed(index, error_code, Some(e.to_string()))
                    }
                },
            };
            partition_responses.push(response);
        }
        responses.push(TopicProduceResponse {
            name: if by_id { String::new() } else { topic_data.name },
            topic_id: if by_id { topic_data.topic_id } else { Uuid::ZERO },
            partition_responses,
            ..Default::default()
        });
    }
    if appended {
        broker.replicas.notify_appended();
    }
    if request.acks == 0 {
        broker.metrics.request_completed("Produce", 0, ctx.started.elapsed());
        return Reply::Nothing;
    }
    if ctx.api_version < 8 {
        for topic in &mut responses {
            for p in &mut topic.partition_responses {
                p.error_message = None;
            }
        }
    }
    ctx.reply(ResponseBody::Produce(Box::new(ProduceResponse { responses, ..Default::default() })))
}
