//! Produce: each partition's record batches are validated and appended by
//! the log (offsets patched in place, the request's bytes written as they
//! came), so nothing is copied or allocated per record. acks=all is
//! refused (NOT_ENOUGH_REPLICAS) when the ISR is below
//! `min.insync.replicas`, and otherwise answered once the high watermark
//! has passed every append (Kafka's DelayedProduce): at once when the
//! leader is its only in-sync replica, else when the followers have
//! fetched it, or REQUEST_TIMED_OUT after the request's timeout.

use krabka_protocol::compression::Compression;
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::produce_response::{self, LeaderIdAndEpoch, PartitionProduceResponse, TopicProduceResponse};
use krabka_protocol::records::RecordBatches;
use krabka_protocol::ErrorCode;
use krabka_protocol::{ProduceRequest, ProduceResponse, ResponseBody, Uuid};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError};

use super::recompress::recompress;
use crate::authorization::Authorization;
use crate::broker::Broker;
use crate::client_quota_manager::QuotaKind;
use crate::clock::now_ms;
use crate::config::DynamicConfigs;
use krabka_security::acl::{AclOperation, ResourceType};

use crate::handlers::leader_hints::LeaderHints;
use crate::metadata::MetadataImage;
use crate::replica::purgatory::Waiter;
use crate::replica::{AppendError, Partition};
use crate::request::Reply;
use crate::request::RequestContext;

/// The first Produce version whose refused partitions name their leader (KIP-951).
const LEADER_HINTS_VERSION: i16 = 10;

/// A partition append decided, waiting to run.
struct PendingAppend {
    topic: usize,
    slot: usize,
    partition: Arc<Partition>,
    records: Bytes,
    min_insync_replicas: i32,
}

/// The most a batch may decompress to when the broker rewrites it.
const MAX_RECOMPRESS_BYTES: usize = 64 * 1024 * 1024;

/// Kafka's checks on batches a producer sends (its LogValidator for client
/// appends), which the log cannot make because it also takes batches from
/// the broker itself: a client's batch starts at offset 0, a partition's
/// records are one batch, no control batches, no transactional batches
/// without a transactional id on the request, and an idempotent batch must
/// carry a sequence number. Malformed batches are left to the log, which
/// answers CORRUPT_MESSAGE.
fn refuse_from_client(records: &Bytes, transactional: bool) -> Option<(i16, String)> {
    let invalid = |message: String| Some((ErrorCode::INVALID_RECORD.code(), message));
    let mut batches = 0;
    for batch in RecordBatches::new(records.clone()) {
        let Ok(batch) = batch else { return None };
        if batch.base_offset() != 0 {
            return invalid(format!(
                "the baseOffset of the record batch should be 0, but it is {}",
                batch.base_offset()
            ));
        }
        batches += 1;
        if batches > 1 {
            // Kafka takes exactly one batch per partition from a client:
            // its producers never send more.
            return invalid("Compressed outer record has more than one batch".into());
        }
        if batch.is_control() {
            return invalid("clients are not allowed to write control records".into());
        }
        if batch.is_transactional() && !transactional {
            return Some((
                ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code(),
                "transactional records need the request's transactional id".into(),
            ));
        }
        if batch.producer_id() >= 0 && batch.base_sequence() < 0 {
            return invalid(format!(
                "invalid sequence number {} for producer {}",
                batch.base_sequence(),
                batch.producer_id()
            ));
        }
    }
    None
}

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

/// Below this many record bytes in one request, spawning a task per
/// partition costs more (task hand-off, a cross-thread wake-up per
/// partition) than the page-cache copies it would overlap.
const PARALLEL_APPEND_MIN_BYTES: usize = 512 * 1024;

fn append_in_parallel(appends: &[PendingAppend]) -> bool {
    appends.len() > 1
        && crate::cpus_available() > 1
        && appends.iter().map(|a| a.records.len()).sum::<usize>() >= PARALLEL_APPEND_MIN_BYTES
}

/// What every partition of one request is checked against.
struct RequestChecks<'a> {
    /// v13+ names topics by id.
    by_id: bool,
    acks: i16,
    transactional: bool,
    /// Set under an authorizer: WRITE on each topic is checked.
    authorization: Option<Authorization<'a>>,
}

/// What one topic of a request is checked against.
struct TopicTarget {
    /// The topic is in the metadata (by name or by id).
    known: bool,
    min_insync_replicas: i32,
    forced_codec: Option<Compression>,
    /// Where the topic's answer sits in the response.
    position: usize,
}

pub async fn handle(ctx: &RequestContext<'_>, request: ProduceRequest) -> Reply {
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let now = now_ms();
    let checks = RequestChecks {
        by_id: ctx.api_version >= 13,
        acks: request.acks,
        transactional: request.transactional_id.is_some(),
        authorization: Authorization::of(ctx, &image),
    };
    let transactional_id = request.transactional_id.as_deref();
    if let (Some(authorization), Some(id)) = (&checks.authorization, transactional_id) {
        if !authorization.allows(AclOperation::Write, ResourceType::TransactionalId, id) {
            return refuse_whole(ctx, &request, ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        }
    }
    // Kafka counts the request's size against producer_byte_rate; its
    // record batches are nearly all of it.
    let batch_bytes: usize = request
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    let client = (&ctx.connection.principal, ctx.client_id.unwrap_or_default());
    let throttle_ms = broker.client_quotas.record(QuotaKind::Produce, &image, client, batch_bytes as u64, now);
    ctx.connection.throttle(throttle_ms);
    let mut appends: Vec<PendingAppend> = Vec::new();
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic_data in request.topic_data {
        let response = decide_topic(broker, &image, &checks, topic_data, responses.len(), &mut appends);
        responses.push(response);
    }
    if let Some(transactional_id) = request.transactional_id.as_deref() {
        let dynamic = DynamicConfigs::of(&image, broker.node_id);
        let verify = broker.config.value_under(&dynamic, "transaction.partition.verification.enable");
        if verify.as_deref() != Some("false") {
            verify_transactions(ctx, transactional_id, &mut appends, &mut responses).await;
        }
    }
    let outcomes = run_appends(&appends, now).await;
    let replicated_at = answer_appends(broker, &appends, outcomes, &mut responses);
    tracing::debug!(acks = request.acks, ?replicated_at, "produce appended");
    if request.acks == -1 {
        let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
        await_replication(&appends, &replicated_at, timeout, &mut responses).await;
    }
    if request.acks == 0 {
        broker.metrics.request_completed("Produce", 0, ctx.started.elapsed());
        return Reply::Nothing;
    }
    if ctx.api_version < 8 {
        for topic in &mut responses {
            for p in &mut topic.partition_responses {
                p.error_message = None;
                p.record_errors.clear();
            }
        }
    }
    let node_endpoints = if ctx.api_version >= LEADER_HINTS_VERSION {
        name_leaders(broker, &ctx.connection.listener_name, &image, &mut responses)
    } else {
        Vec::new()
    };
    let throttle_time_ms = throttle_ms.min(i32::MAX as u64) as i32;
    ctx.reply(ResponseBody::Produce(Box::new(ProduceResponse {
        responses,
        node_endpoints,
        throttle_time_ms,
        ..Default::default()
    })))
}

/// The whole request refused with `error` on every partition, as Kafka
/// answers a transactional producer without WRITE on its transactional id.
fn refuse_whole(ctx: &RequestContext<'_>, request: &ProduceRequest, error: ErrorCode) -> Reply {
    let responses = request
        .topic_data
        .iter()
        .map(|t| TopicProduceResponse {
            name: t.name.clone(),
            topic_id: t.topic_id,
            partition_responses: t.partition_data.iter().map(|p| failed(p.index, error.code(), None)).collect(),
            ..Default::default()
        })
        .collect();
    if request.acks == 0 {
        return Reply::Nothing;
    }
    ctx.reply(ResponseBody::Produce(Box::new(ProduceResponse { responses, ..Default::default() })))
}

/// KIP-890: a transactional batch that would open its producer's
/// transaction on a partition goes in only if the coordinator has the
/// partition in that transaction (part 1), or adds it (part 2, from
/// Produce v12); the others are answered with its error
/// (not in the transaction: INVALID_TXN_STATE, TRANSACTION_ABORTABLE from
/// v11, which knows it) and not appended.
async fn verify_transactions(
    ctx: &RequestContext<'_>,
    transactional_id: &str,
    appends: &mut Vec<PendingAppend>,
    responses: &mut [TopicProduceResponse],
) {
    let broker = ctx.broker;
    // The appends opening a transaction: (index, producer).
    let opening: Vec<(usize, (i64, i16))> = appends
        .iter()
        .enumerate()
        .filter_map(|(i, append)| {
            let batch = RecordBatches::new(append.records.clone()).next()?.ok()?;
            if !batch.is_transactional() {
                return None;
            }
            let log = append.partition.lock_log();
            // Open at this epoch only, as Kafka 4.3.1's hasOngoingTransaction:
            // under transactions v2 the next transaction's first batch (one
            // epoch up) can come before the last one's marker.
            let open = log
                .producer_state()
                .producers()
                .get(&batch.producer_id())
                .is_some_and(|p| p.current_txn_first_offset.is_some() && p.epoch == batch.producer_epoch());
            (!open).then_some((i, (batch.producer_id(), batch.producer_epoch())))
        })
        .collect();
    let Some(&(_, producer)) = opening.first() else { return };
    let partitions: Vec<(String, i32)> =
        opening.iter().map(|&(i, _)| (appends[i].partition.topic.to_string(), appends[i].partition.index)).collect();
    // Produce v12 is transactions v2: the leader adds the partition itself.
    let add = ctx.api_version >= 12;
    let answers = crate::transactions::check_in_transaction(broker, transactional_id, producer, partitions, add).await;
    let mut refused = Vec::new();
    for &(i, _) in &opening {
        let asked = (&*appends[i].partition.topic, appends[i].partition.index);
        // By name: a coordinator answers in its own order. No answer: retried.
        let code = answers
            .iter()
            .find(|((topic, partition), _)| (topic.as_str(), *partition) == asked)
            .map_or(ErrorCode::NOT_ENOUGH_REPLICAS, |(_, code)| *code);
        if code == ErrorCode::NONE {
            continue;
        }
        let code = if code == ErrorCode::TRANSACTION_ABORTABLE && ctx.api_version < 11 {
            ErrorCode::INVALID_TXN_STATE
        } else {
            code
        };
        let append = &appends[i];
        let response = &mut responses[append.topic].partition_responses[append.slot];
        *response = failed(response.index, code.code(), Some("the partition is not in the transaction".into()));
        refused.push(i);
    }
    let mut index = 0;
    appends.retain(|_| {
        index += 1;
        !refused.contains(&(index - 1))
    });
}

/// KIP-951: each partition refused with NOT_LEADER_OR_FOLLOWER names its
/// leader; the leaders' endpoints, for the response.
fn name_leaders(
    broker: &Broker,
    listener_name: &str,
    image: &MetadataImage,
    responses: &mut [TopicProduceResponse],
) -> Vec<produce_response::NodeEndpoint> {
    let mut hints = LeaderHints::new(broker, listener_name);
    for topic in responses {
        let name = match image.topic_by_id(&topic.topic_id) {
            Some(t) if topic.name.is_empty() => t.name.clone(),
            _ => topic.name.clone(),
        };
        for p in &mut topic.partition_responses {
            if p.error_code == ErrorCode::NOT_LEADER_OR_FOLLOWER.code() {
                let (leader_id, leader_epoch) = hints.leader_of(&name, p.index);
                p.current_leader = LeaderIdAndEpoch { leader_id, leader_epoch, ..Default::default() };
            }
        }
    }
    hints.produce_endpoints()
}

/// One topic's answers before any append runs: accepted partitions are
/// queued in `appends` and hold a placeholder until they are answered.
fn decide_topic(
    broker: &Broker,
    image: &MetadataImage,
    checks: &RequestChecks<'_>,
    topic_data: TopicProduceData,
    position: usize,
    appends: &mut Vec<PendingAppend>,
) -> TopicProduceResponse {
    let by_id = checks.by_id;
    let topic = if by_id { image.topic_by_id(&topic_data.topic_id) } else { image.topic(&topic_data.name) };
    let hosted = topic.and_then(|t| broker.replicas.topic(&t.name).filter(|h| h.id == t.id));
    // min.insync.replicas above 1 cannot be met by a single replica.
    let (min_insync_replicas, forced_codec) =
        hosted.as_ref().map_or((1, None), |h| (h.produce.min_insync_replicas, h.produce.forced_codec));
    let target = TopicTarget { known: topic.is_some(), min_insync_replicas, forced_codec, position };
    let mut partition_responses = Vec::with_capacity(topic_data.partition_data.len());
    // Kafka checks WRITE before it looks for the topic, so a principal
    // cannot learn which topics exist; by id, an unknown id is told first.
    let name = topic.map_or(topic_data.name.as_str(), |t| t.name.as_str());
    let authorized = |a: &Authorization<'_>| a.allows(AclOperation::Write, ResourceType::Topic, name);
    let denied = !(by_id && topic.is_none()) && checks.authorization.as_ref().is_some_and(|a| !authorized(a));
    for data in topic_data.partition_data {
        if denied {
            partition_responses.push(failed(data.index, ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(), None));
            continue;
        }
        let partition = hosted.as_ref().and_then(|h| h.led_partition(data.index));
        let not_led = hosted.as_ref().filter(|_| partition.is_none()).map(|h| h.not_led_error(data.index));
        let placed = Placed { partition, not_led };
        let response = decide_partition(checks, &target, placed, partition_responses.len(), data, appends);
        partition_responses.push(response);
    }
    TopicProduceResponse {
        name: if by_id { String::new() } else { topic_data.name },
        topic_id: if by_id { topic_data.topic_id } else { Uuid::ZERO },
        partition_responses,
        ..Default::default()
    }
}

/// Where a produced partition is: led here, or led by another broker.
struct Placed<'a> {
    partition: Option<&'a Arc<Partition>>,
    /// Why a partition of a topic hosted here is not led here.
    not_led: Option<i16>,
}

/// One partition's answer, or its placeholder when its append is queued
/// (at `slot` of its topic's answers). The guards go in Kafka's order.
fn decide_partition(
    checks: &RequestChecks<'_>,
    target: &TopicTarget,
    Placed { partition, not_led }: Placed<'_>,
    slot: usize,
    data: PartitionProduceData,
    appends: &mut Vec<PendingAppend>,
) -> PartitionProduceResponse {
    let index = data.index;
    let records = match (target.forced_codec, data.records) {
        (Some(codec), Some(records)) => match recompress(&records, codec, MAX_RECOMPRESS_BYTES) {
            Ok(rewritten) => Some(rewritten),
            Err(e) => return failed(index, ErrorCode::CORRUPT_MESSAGE.code(), Some(e.to_string())),
        },
        (_, records) => records,
    };
    let refused = records.as_ref().and_then(|records| refuse_from_client(records, checks.transactional));
    let min_isr = target.min_insync_replicas;
    match (partition, records) {
        _ if !matches!(checks.acks, -1..=1) => failed(index, ErrorCode::INVALID_REQUIRED_ACKS.code(), None),
        (Some(_), _) if refused.is_some() => {
            let (error, message) = refused.expect("checked");
            failed(index, error, Some(message))
        }
        (None, _) if checks.by_id && !target.known => failed(index, ErrorCode::UNKNOWN_TOPIC_ID.code(), None),
        (None, _) => failed(index, not_led.unwrap_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()), None),
        (Some(partition), _) if checks.acks == -1 && (partition.committed_isr().len() as i32) < min_isr => failed(
            index,
            ErrorCode::NOT_ENOUGH_REPLICAS.code(),
            Some(format!(
                "The size of the current ISR {:?} is insufficient to satisfy the min.isr requirement of {min_isr} for partition {}-{index}",
                partition.committed_isr(),
                partition.topic
            )),
        ),
        (Some(_), None) => failed(index, ErrorCode::INVALID_RECORD.code(), Some("no records".into())),
        (Some(partition), Some(records)) => {
            let partition = partition.clone();
            let pending = PendingAppend { topic: target.position, slot, partition, records, min_insync_replicas: min_isr };
            appends.push(pending);
            failed(index, ErrorCode::UNKNOWN_SERVER_ERROR.code(), None)
        }
    }
}

/// Runs the queued appends, their outcomes in the same order.
///
/// Large requests spanning several partitions are appended in parallel
/// when the broker may run on more than one CPU; the request is answered
/// (and the next one on this connection read) only when all are done, so
/// one producer's batches stay in order.
async fn run_appends(appends: &[PendingAppend], now: i64) -> Vec<Result<(AppendInfo, i64), AppendError>> {
    let outcomes = if append_in_parallel(appends) {
        let tasks: Vec<_> = appends
            .iter()
            .map(|a| {
                let (partition, records) = (a.partition.clone(), a.records.clone());
                tokio::spawn(async move { partition.append_unwoken(&records, now) })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(tasks.len());
        for task in tasks {
            let failed = |e: tokio::task::JoinError| Err(LogError::Io(std::io::Error::other(e.to_string())).into());
            outcomes.push(task.await.unwrap_or_else(failed));
        }
        outcomes
    } else {
        appends.iter().map(|a| a.partition.append_unwoken(&a.records, now)).collect()
    };
    // Every partition is appended before any parked fetch is woken.
    for (append, outcome) in appends.iter().zip(&outcomes) {
        if outcome.is_ok() {
            append.partition.wake_waiters();
        }
    }
    outcomes
}

/// Replaces each queued append's placeholder by its outcome; for each
/// append, the high watermark that replicates it (None if it failed).
fn answer_appends(
    broker: &Broker,
    appends: &[PendingAppend],
    outcomes: Vec<Result<(AppendInfo, i64), AppendError>>,
    responses: &mut [TopicProduceResponse],
) -> Vec<Option<i64>> {
    let mut replicated_at = Vec::with_capacity(appends.len());
    for (append, outcome) in appends.iter().zip(outcomes) {
        let index = responses[append.topic].partition_responses[append.slot].index;
        replicated_at.push(outcome.as_ref().ok().map(|(info, _)| info.last_offset + 1));
        let response = match outcome {
            Ok((info, log_start_offset)) => {
                broker.metrics.bytes_in(&append.partition.topic, append.records.len() as u64);
                broker.metrics.messages_in(&append.partition.topic, info.record_count as u64);
                PartitionProduceResponse {
                    index,
                    error_code: ErrorCode::NONE.code(),
                    base_offset: info.first_offset,
                    log_append_time_ms: info.log_append_time_ms,
                    log_start_offset,
                    ..Default::default()
                }
            }
            Err(e) => {
                let error_code = e.code();
                let topic = &append.partition.topic;
                if error_code == ErrorCode::KAFKA_STORAGE_ERROR.code() {
                    tracing::error!(%topic, partition = index, error = %e, "append failed");
                } else {
                    tracing::debug!(%topic, partition = index, error = %e, "append refused");
                }
                let mut response = failed(index, error_code, Some(e.to_string()));
                response.record_errors = record_errors(&e);
                response
            }
        };
        responses[append.topic].partition_responses[append.slot] = response;
    }
    replicated_at
}

/// The records a refused append names (Kafka's record errors, v8+).
fn record_errors(error: &AppendError) -> Vec<produce_response::BatchIndexAndErrorMessage> {
    let AppendError::Log(LogError::RecordsRefused { record_errors, .. }) = error else { return Vec::new() };
    record_errors
        .iter()
        .map(|e| produce_response::BatchIndexAndErrorMessage {
            batch_index: e.index,
            batch_index_error_message: Some(e.message.clone()),
            ..Default::default()
        })
        .collect()
}

/// acks=all: waits until each successful append's partition has a high
/// watermark at `replicated_at` (its followers have it), then checks the
/// ISR still meets min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND
/// if not, as Kafka). A partition no longer led here is
/// NOT_LEADER_OR_FOLLOWER, and what is not replicated by `timeout`
/// REQUEST_TIMED_OUT.
async fn await_replication(
    appends: &[PendingAppend],
    replicated_at: &[Option<i64>],
    timeout: Duration,
    responses: &mut [TopicProduceResponse],
) {
    let deadline = tokio::time::Instant::now() + timeout;
    let waiter = Waiter::new();
    let mut watching = false;
    let mut outcome: Vec<Option<i16>> = vec![None; appends.len()];
    loop {
        for ((append, required), outcome) in appends.iter().zip(replicated_at).zip(outcome.iter_mut()) {
            let Some(required) = *required else { continue };
            if outcome.is_some() {
                continue;
            }
            let partition = &append.partition;
            if !partition.is_led_here() {
                *outcome = Some(ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
            } else if partition.high_watermark() >= required {
                let enough = partition.in_sync_replicas().len() as i32 >= append.min_insync_replicas;
                let code = if enough { ErrorCode::NONE } else { ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND };
                *outcome = Some(code.code());
            }
        }
        let waiting = replicated_at.iter().zip(&outcome).any(|(required, done)| required.is_some() && done.is_none());
        if !waiting {
            break;
        }
        if !watching {
            // Watch, then look again: a move between the look above and
            // the watch is seen (alone in its ISR, a leader never gets here).
            for append in appends {
                append.partition.watch(&waiter);
            }
            watching = true;
            continue;
        }
        tokio::select! {
            () = waiter.woken() => {}
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    for ((append, required), outcome) in appends.iter().zip(replicated_at).zip(outcome) {
        if required.is_none() {
            continue;
        }
        let code = outcome.unwrap_or(ErrorCode::REQUEST_TIMED_OUT.code());
        if outcome.is_none() {
            let partition = &append.partition;
            tracing::debug!(topic = %partition.topic, partition = partition.index, required, high_watermark = partition.high_watermark(), "acks=all produce timed out");
        }
        if code != ErrorCode::NONE.code() {
            let response = &mut responses[append.topic].partition_responses[append.slot];
            response.error_code = code;
        }
    }
}
