//! Fetch: plans reads as file ranges, answers at once when `fetch.min.bytes`
//! is met (or `max_wait_ms` is 0), else parks on the partitions it reads
//! (the replica manager's purgatory) and reads again when one of them
//! changes, until enough arrives or the wait expires. The response is
//! encoded around the file ranges, which the connection sends with
//! sendfile(2).

use krabka_protocol::ErrorCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_log::{FileSlice, LogError};
use krabka_protocol::fetch_response::{
    AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use krabka_protocol::fetch_splice::{
    encode_spliced_fetch_response, FramePart, SplicedFetchHeader, SplicedPartition, SplicedTopic,
};
use krabka_protocol::FetchRequest;

use crate::authorization::Authorization;
use crate::broker::Broker;
use crate::client_quota_manager::QuotaKind;
use crate::errors::log_error_code;
use crate::fetch_session::{SessionContext, SessionPartition};
use crate::handlers::leader_hints::LeaderHints;
use crate::replica::purgatory::Waiter;
use crate::replica::Partition;
use crate::request::RequestContext;
use crate::request::{Chunk, Reply, Response};
use krabka_metadata::MetadataImage;
use krabka_replication::divergence::leader_divergence;
use krabka_security::acl::{AclOperation, ResourceType};
use krabka_security::KafkaPrincipal;
use std::collections::HashMap;

/// The first Fetch version whose refused partitions name their leader (KIP-951).
const LEADER_HINTS_VERSION: i16 = 16;
/// READ_COMMITTED in FetchRequest.isolation_level.
const READ_COMMITTED: i8 = 1;

/// Everything the fetch needs to (re)plan its reads from a task.
struct FetchPlan {
    broker: Arc<Broker>,
    /// The client's listener, whose endpoints leader hints name.
    listener_name: Arc<str>,
    api_version: i16,
    correlation_id: i32,
    session: SessionContext,
    read_committed: bool,
    max_bytes: i32,
    min_bytes: i32,
    wanted: Vec<SessionPartition>,
    started: Instant,
    /// A follower's fetch: its broker id and epoch. It reads past the high
    /// watermark to the log end, and its fetch offsets are its progress.
    replica: Option<(i32, i64)>,
    /// A consumer that may read from followers (KIP-392, Fetch v11+), and
    /// its rack when the leader is to point it at a replica in that rack.
    consumer: Option<ConsumerPlacement>,
    /// A consumer whose fetches count against a `consumer_byte_rate`
    /// (None for followers, and when the image has no client quotas).
    quota_client: Option<QuotaClient>,
    /// Under an authorizer, the partitions of `wanted` the principal may
    /// not read (empty: all may be read).
    denied: Vec<bool>,
    /// The request quota's throttle the response announces (KIP-124).
    request_throttle_ms: i32,
    /// Who each partition error is logged for (None: not logged).
    audience: Option<crate::request::ErrorAudience>,
}

/// A consumer's principal and client id, the image whose quotas apply to
/// it, and its connection's throttle.
struct QuotaClient {
    principal: KafkaPrincipal,
    client_id: String,
    image: Arc<MetadataImage>,
    connection_throttle: Arc<AtomicU64>,
}

/// What KIP-392 knows of a consumer's fetch.
struct ConsumerPlacement {
    /// Its `client.rack`, when `replica.selector.class` is the rack-aware
    /// selector (else None: the leader serves it).
    rack: Option<String>,
}

/// One partition's answer: the response fields plus the records to send.
struct PartitionResult {
    topic_index: usize,
    data: PartitionData,
    slice: Option<FileSlice>,
}

pub fn handle(ctx: &RequestContext<'_>, request: FetchRequest) -> Reply {
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let by_id = ctx.api_version >= 13;
    let (session, wanted) = match broker.fetch_sessions.admit(&request, by_id, &image) {
        Ok(admitted) => admitted,
        Err(error_code) => {
            let empty = (&[] as &[SplicedTopic<'_>], &[] as &[NodeEndpoint]);
            return Reply::Now(encode_response(
                (ctx.api_version, ctx.correlation_id, 0),
                (error_code.code(), 0),
                empty,
                &[],
            ));
        }
    };
    let mut plan = FetchPlan {
        broker: broker.clone(),
        listener_name: ctx.connection.listener_name.clone(),
        api_version: ctx.api_version,
        correlation_id: ctx.correlation_id,
        session,
        read_committed: request.isolation_level == READ_COMMITTED,
        max_bytes: request.max_bytes,
        min_bytes: request.min_bytes,
        wanted,
        started: ctx.started,
        audience: crate::request::ErrorAudience::of(ctx),
        replica: replica_of(&request, ctx.api_version),
        consumer: consumer_placement(broker, &request, ctx.api_version),
        quota_client: None,
        denied: Vec::new(),
        request_throttle_ms: 0,
    };
    // Followers' fetches are exempt from the request quota, as in Kafka.
    if plan.replica.is_some() {
        ctx.exempt_from_request_quota();
    } else {
        plan.request_throttle_ms = i32::try_from(ctx.request_throttle_ms()).unwrap_or(i32::MAX);
    }
    if let Some(authorization) = Authorization::of(ctx, &image) {
        plan.denied = denied_partitions(&authorization, plan.replica.is_some(), &plan.wanted);
    }
    // Built only when some quota exists: most brokers have none, and this
    // is every consumer fetch.
    if plan.replica.is_none() && !image.client_quotas.is_empty() {
        plan.quota_client = Some(QuotaClient {
            principal: ctx.connection.principal.clone(),
            client_id: ctx.client_id.unwrap_or_default().to_string(),
            image: image.clone(),
            connection_throttle: ctx.connection.throttle_ms.clone(),
        });
    }
    // A follower refused CLUSTER_ACTION makes no progress.
    if plan.replica.is_some() && !plan.denied.contains(&true) {
        plan.record_follower_progress();
    }
    let (results, bytes, errors) = plan.read();
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    if request.max_wait_ms <= 0 || bytes >= i64::from(plan.min_bytes) || errors || plan.wanted.is_empty() {
        return Reply::Now(plan.finish(results));
    }
    // Read again once watching: what the first read found is superseded.
    drop(results);
    Reply::Later(tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + max_wait;
        let waiter = Waiter::new();
        let mut watched = vec![None; plan.wanted.len()];
        let latest = loop {
            // Watch, then read: a change that lands between the last read
            // and the watch is seen by this read.
            plan.watch(&waiter, &mut watched);
            let (results, bytes, errors) = plan.read();
            if bytes >= i64::from(plan.min_bytes) || errors {
                break results;
            }
            tokio::select! {
                _ = waiter.woken() => plan.broker.metrics.fetch_woken(),
                _ = tokio::time::sleep_until(deadline) => break results,
            }
        };
        plan.finish(latest)
    }))
}

/// Which of `wanted` may not be read: by a follower without CLUSTER_ACTION
/// on the cluster, all; by a consumer, those of topics it may not READ.
/// A topic id nobody knows (no name) is left to answer UNKNOWN_TOPIC_ID.
fn denied_partitions(authorization: &Authorization<'_>, follower: bool, wanted: &[SessionPartition]) -> Vec<bool> {
    if follower {
        let allowed = authorization.allows_cluster(AclOperation::ClusterAction);
        return vec![!allowed; wanted.len()];
    }
    let mut verdicts: HashMap<&str, bool> = HashMap::new();
    wanted
        .iter()
        .map(|p| {
            !p.topic.is_empty()
                && *verdicts
                    .entry(p.topic.as_str())
                    .or_insert_with(|| !authorization.allows(AclOperation::Read, ResourceType::Topic, &p.topic))
        })
        .collect()
}

/// The follower a fetch comes from, with its broker epoch (-1 before
/// v15), if it is a replica's (ReplicaState from v15, ReplicaId before).
fn replica_of(request: &FetchRequest, version: i16) -> Option<(i32, i64)> {
    let (id, epoch) = if version >= 15 {
        (request.replica_state.replica_id, request.replica_state.replica_epoch)
    } else {
        (request.replica_id, -1)
    };
    (id >= 0).then_some((id, epoch))
}

/// Kafka's rack-aware selector (`replica.selector.class`), the one it ships.
const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
/// The first Fetch version with client metadata (rack id): from it a
/// consumer may read from a follower (KIP-392).
const FOLLOWER_FETCH_VERSION: i16 = 11;

/// A consumer's fetch from v11: it may read from a follower, and is pointed
/// at a replica in its rack when the rack-aware selector is configured.
fn consumer_placement(broker: &Broker, request: &FetchRequest, version: i16) -> Option<ConsumerPlacement> {
    if version < FOLLOWER_FETCH_VERSION || replica_of(request, version).is_some() {
        return None;
    }
    let selector = broker.config.raw.get("replica.selector.class").map(|c| c.trim());
    let rack = (selector == Some(RACK_AWARE_SELECTOR) && !request.rack_id.is_empty()).then(|| request.rack_id.clone());
    Some(ConsumerPlacement { rack })
}

impl FetchPlan {
    /// The partition this fetch reads `wanted` from: one led here, or for
    /// a consumer that may read from followers (KIP-392) one hosted here.
    fn partition(&self, wanted: &SessionPartition) -> Option<Arc<Partition>> {
        if wanted.topic.is_empty() {
            return None;
        }
        match self.consumer {
            Some(_) => self.broker.replicas.hosted_partition(&wanted.topic, wanted.partition),
            None => self.broker.replicas.partition(&wanted.topic, wanted.partition),
        }
    }

    /// The replica a rack-aware consumer should read `partition` (led
    /// here) from instead, as Kafka's RackAwareReplicaSelector picks it: a
    /// replica in the consumer's rack that has the fetch offset and is
    /// caught up, the most advanced one; none when the leader is in that
    /// rack too.
    fn preferred_read_replica(&self, partition: &Partition, fetch_offset: i64) -> Option<i32> {
        let rack = self.consumer.as_ref()?.rack.as_deref()?;
        let image = self.broker.metadata.image();
        let in_rack = |id: i32| image.brokers.get(&id).and_then(|b| b.rack.as_deref()) == Some(rack);
        if in_rack(self.broker.node_id) {
            return None;
        }
        let lag_ms = self.broker.config.number("replica.lag.time.max.ms", 30_000);
        let candidates = partition.caught_up_followers(fetch_offset, crate::clock::now_ms(), lag_ms);
        candidates.into_iter().filter(|&(id, _)| in_rack(id)).max_by_key(|&(_, end)| end).map(|(id, _)| id)
    }

    /// Whether a reassignment's throttle holds `partition` back from
    /// `follower` (Kafka's shouldLeaderThrottle): a throttled replica, a
    /// follower outside the ISR, the leader's rate over its bound.
    fn held_back(&self, partition: &Partition, follower: i32) -> bool {
        if !partition.leader_throttled() || partition.committed_isr().contains(&follower) {
            return false;
        }
        let quota = &self.broker.replicas.throttles.leader;
        quota.lock().unwrap_or_else(|e| e.into_inner()).is_exceeded(crate::clock::now_ms())
    }

    /// The bytes of throttled partitions a replica fetch sends count
    /// against the leader's rate (in-sync followers' too, as Kafka counts).
    fn record_throttled_bytes(&self, results: &[PartitionResult]) {
        if self.replica.is_none() {
            return;
        }
        let throttled = results.iter().filter_map(|r| {
            let slice = r.slice.as_ref()?;
            let partition = self.partition(&self.wanted[r.topic_index])?;
            partition.leader_throttled().then_some(u64::from(slice.length))
        });
        let bytes: u64 = throttled.sum();
        if bytes > 0 {
            let quota = &self.broker.replicas.throttles.leader;
            quota.lock().unwrap_or_else(|e| e.into_inner()).record(bytes, crate::clock::now_ms());
        }
    }

    /// A consumer over its `consumer_byte_rate`: Kafka answers it with no
    /// partitions and the throttle time (the bytes not sent taken back
    /// from its rate), and mutes its connection for that long.
    fn over_client_quota(&self, results: &[PartitionResult]) -> Option<Response> {
        let QuotaClient { principal, client_id, image, connection_throttle } = self.quota_client.as_ref()?;
        let bytes: u64 = results.iter().filter_map(|r| r.slice.as_ref()).map(|s| u64::from(s.length)).sum();
        let (quotas, client, now) =
            (&self.broker.client_quotas, (principal, client_id.as_str()), crate::clock::now_ms());
        let throttle_ms = quotas.record(QuotaKind::Fetch, image, client, bytes, now);
        if throttle_ms == 0 {
            return None;
        }
        quotas.unrecord(QuotaKind::Fetch, image, client, bytes, now);
        connection_throttle.fetch_max(throttle_ms, Ordering::Relaxed);
        let throttle_time_ms = (throttle_ms.min(i32::MAX as u64) as i32).max(self.request_throttle_ms);
        let head = (self.api_version, self.correlation_id, self.session.session_id());
        let empty = (&[] as &[SplicedTopic<'_>], &[] as &[NodeEndpoint]);
        self.broker.metrics.request_completed("Fetch", 0, self.started.elapsed());
        Some(encode_response(head, (ErrorCode::NONE.code(), throttle_time_ms), empty, &[]))
    }

    /// A follower's fetch offsets are its log end: each partition led here
    /// records it (the high watermark may move), and one that caught up is
    /// proposed back into the ISR. Once per request, not per re-read.
    fn record_follower_progress(&self) {
        let Some((follower, broker_epoch)) = self.replica else { return };
        let now = crate::clock::now_ms();
        for wanted in &self.wanted {
            let Some(partition) = self.broker.replicas.partition(&wanted.topic, wanted.partition) else { continue };
            if partition.check_leader_epoch(wanted.current_leader_epoch).is_err() {
                tracing::trace!(topic = %partition.topic, partition = partition.index, follower, epoch = wanted.current_leader_epoch, "follower fetch with another leader epoch");
                continue;
            }
            let log = partition.lock_log();
            let in_range = (log.log_start_offset()..=log.log_end_offset()).contains(&wanted.fetch_offset);
            if !in_range || diverging_epoch(&log, wanted).is_some() {
                tracing::trace!(topic = %partition.topic, partition = partition.index, follower, in_range, offset = wanted.fetch_offset, "follower fetch out of range or diverging");
                continue;
            }
            tracing::debug!(topic = %partition.topic, partition = partition.index, follower, offset = wanted.fetch_offset, leader_end = log.log_end_offset(), "follower fetch");
            let expanded = partition.record_follower_fetch(&log, follower, broker_epoch, wanted.fetch_offset, now);
            drop(log);
            if let Some(isr) = expanded {
                self.broker.replicas.isr_changes.push(partition, isr);
            }
        }
    }

    /// Parks `waiter` on every wanted partition it does not watch yet:
    /// `watched[i]` is the partition watched for `wanted[i]` (a topic
    /// deleted and created again under its name is a new partition).
    fn watch(&self, waiter: &Arc<Waiter>, watched: &mut [Option<Arc<Partition>>]) {
        for (wanted, watched) in self.wanted.iter().zip(watched) {
            if wanted.topic.is_empty() {
                continue;
            }
            let Some(partition) = self.partition(wanted) else { continue };
            if watched.as_ref().is_none_or(|w| !Arc::ptr_eq(w, &partition)) {
                partition.watch(waiter);
                *watched = Some(partition);
            }
        }
    }

    /// Plans every partition's read. Returns the results, the record bytes
    /// found, and whether any partition failed (which answers at once).
    fn read(&self) -> (Vec<PartitionResult>, i64, bool) {
        let mut results = Vec::with_capacity(self.wanted.len());
        let mut total: i64 = 0;
        let mut errors = false;
        let response_max = i64::from(self.max_bytes.max(0));
        for (topic_index, wanted) in self.wanted.iter().enumerate() {
            let mut data = PartitionData {
                partition_index: wanted.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                // Kafka's empty records, not null, when there are none.
                records: Some(Bytes::new()),
                ..Default::default()
            };
            if self.denied.get(topic_index).copied().unwrap_or(false) {
                data.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
                errors = true;
                results.push(PartitionResult { topic_index, data, slice: None });
                continue;
            }
            let Some(partition) = self.partition(wanted) else {
                let not_led_here = self.broker.replicas.not_led_here(&wanted.topic, wanted.partition);
                data.error_code = if not_led_here == ErrorCode::NOT_LEADER_OR_FOLLOWER.code() {
                    not_led_here
                } else if self.api_version >= 13 {
                    ErrorCode::UNKNOWN_TOPIC_ID.code()
                } else {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                };
                errors = true;
                results.push(PartitionResult { topic_index, data, slice: None });
                continue;
            };
            if let Err(error_code) = partition.check_leader_epoch(wanted.current_leader_epoch) {
                data.error_code = error_code;
                errors = true;
                results.push(PartitionResult { topic_index, data, slice: None });
                continue;
            }
            let log = partition.lock_log();
            let high_watermark = partition.high_watermark();
            let last_stable = log.last_stable_offset(high_watermark);
            data.high_watermark = high_watermark;
            data.last_stable_offset = last_stable;
            data.log_start_offset = log.log_start_offset();
            if let Some(preferred) =
                partition.is_led_here().then(|| self.preferred_read_replica(&partition, wanted.fetch_offset)).flatten()
            {
                // KIP-392: no records from here; the consumer goes there.
                data.preferred_read_replica = preferred;
                results.push(PartitionResult { topic_index, data, slice: None });
                continue;
            }
            if let Some(diverging) = diverging_epoch(&log, wanted) {
                // The follower's log went another way: it truncates first.
                data.diverging_epoch = diverging;
                results.push(PartitionResult { topic_index, data, slice: None });
                errors = true;
                continue;
            }
            if self.replica.is_some_and(|(follower, _)| self.held_back(&partition, follower)) {
                // KIP-73: nothing of a throttled partition for a follower
                // outside the ISR while the leader's rate is over its bound.
                results.push(PartitionResult { topic_index, data, slice: None });
                continue;
            }
            let upper = match (self.replica, self.read_committed) {
                (Some(_), _) => i64::MAX,
                (None, true) => last_stable,
                (None, false) => high_watermark,
            };
            // KIP-74: the first partition with data returns at least one
            // whole batch, even past the byte limits.
            let min_one_batch = total == 0;
            let budget = (response_max - total).max(0).min(i64::from(wanted.max_bytes.max(0))) as u32;
            match log.read(wanted.fetch_offset, budget, upper, min_one_batch) {
                Ok(read) => {
                    if self.read_committed {
                        data.aborted_transactions = Some(
                            log.aborted_transactions(wanted.fetch_offset, upper)
                                .into_iter()
                                .map(|t| AbortedTransaction {
                                    producer_id: t.producer_id,
                                    first_offset: t.first_offset,
                                    ..Default::default()
                                })
                                .collect(),
                        );
                    }
                    if let Some(slice) = &read.slice {
                        total += i64::from(slice.length);
                    }
                    results.push(PartitionResult { topic_index, data, slice: read.slice });
                }
                Err(e) => {
                    data.error_code = log_error_code(&e);
                    if !matches!(e, LogError::OffsetOutOfRange { .. }) {
                        tracing::error!(topic = %wanted.topic, partition = wanted.partition, error = %e, "fetch read failed");
                    }
                    errors = true;
                    results.push(PartitionResult { topic_index, data, slice: None });
                }
            }
        }
        (results, total, errors)
    }

    /// Picks what the response carries (all of it, or only what changed in
    /// an incremental session), remembers what the session told the client,
    /// and encodes the frame.
    fn finish(&self, results: Vec<PartitionResult>) -> Response {
        self.record_throttled_bytes(&results);
        if let Some(throttled) = self.over_client_quota(&results) {
            return throttled;
        }
        let mut included = Vec::with_capacity(results.len());
        match &self.session {
            SessionContext::Sessionless => included = results,
            SessionContext::Full(session) | SessionContext::Incremental(session) => {
                let incremental = matches!(self.session, SessionContext::Incremental(_));
                let mut state = session.lock().unwrap_or_else(|e| e.into_inner());
                for result in results {
                    let wanted = &self.wanted[result.topic_index];
                    let data = &result.data;
                    let stored = state.partitions.iter_mut().find(|p| {
                        p.partition == wanted.partition && p.topic_id == wanted.topic_id && p.topic == wanted.topic
                    });
                    let changed = stored.as_ref().is_none_or(|p| {
                        p.sent_high_watermark != data.high_watermark
                            || p.sent_last_stable_offset != data.last_stable_offset
                            || p.sent_log_start_offset != data.log_start_offset
                    });
                    if let Some(p) = stored {
                        p.sent_high_watermark = data.high_watermark;
                        p.sent_last_stable_offset = data.last_stable_offset;
                        p.sent_log_start_offset = data.log_start_offset;
                    }
                    if !incremental || changed || result.slice.is_some() || data.error_code != ErrorCode::NONE.code() {
                        included.push(result);
                    }
                }
            }
        }
        let mut hints = LeaderHints::new(&self.broker, &self.listener_name);
        if self.api_version >= LEADER_HINTS_VERSION {
            for result in &mut included {
                let code = result.data.error_code;
                if code == ErrorCode::NOT_LEADER_OR_FOLLOWER.code() || code == ErrorCode::FENCED_LEADER_EPOCH.code() {
                    let wanted = &self.wanted[result.topic_index];
                    let (leader_id, leader_epoch) = hints.leader_of(&wanted.topic, wanted.partition);
                    result.data.current_leader = LeaderIdAndEpoch { leader_id, leader_epoch, ..Default::default() };
                }
            }
        }
        let node_endpoints = hints.fetch_endpoints();
        // Group partitions under their topics, in first-seen order.
        let mut topics: Vec<SplicedTopic<'_>> = Vec::new();
        let mut grouped: Vec<PartitionResult> = Vec::with_capacity(included.len());
        for mut result in included {
            let wanted = &self.wanted[result.topic_index];
            let index = match topics.iter().position(|t| t.name == wanted.topic && t.id == wanted.topic_id) {
                Some(index) => index,
                None => {
                    topics.push(SplicedTopic { name: &wanted.topic, id: wanted.topic_id });
                    topics.len() - 1
                }
            };
            result.topic_index = index;
            grouped.push(result);
        }
        // Stable: partitions keep their order within a topic.
        grouped.sort_by_key(|result| result.topic_index);
        let session_id = self.session.session_id();
        let response = encode_response(
            (self.api_version, self.correlation_id, session_id),
            (ErrorCode::NONE.code(), self.request_throttle_ms),
            (&topics, &node_endpoints),
            &grouped,
        );
        for result in &grouped {
            if let Some(slice) = &result.slice {
                self.broker.metrics.bytes_out(topics[result.topic_index].name, u64::from(slice.length));
            }
            let (code, partition) = (result.data.error_code, result.data.partition_index);
            if code != 0 {
                self.broker.metrics.client_error("Fetch", code);
                if let Some(audience) = &self.audience {
                    audience.log(Some(topics[result.topic_index].name), Some(partition), code);
                }
            }
        }
        self.broker.metrics.request_completed("Fetch", 0, self.started.elapsed());
        response
    }
}

/// Where a fetcher's log parts from this one, if it does (KIP-320): the
/// epoch of its last batch ends here before its fetch offset, or is newer
/// than any here. Consumers are checked as followers are, as Kafka does.
fn diverging_epoch(log: &krabka_log::PartitionLog, wanted: &SessionPartition) -> Option<EpochEndOffset> {
    let found = (wanted.last_fetched_epoch >= 0).then(|| log.end_offset_for_epoch(wanted.last_fetched_epoch)).flatten();
    let (epoch, end_offset) = leader_divergence(found, wanted.last_fetched_epoch, wanted.fetch_offset)?;
    Some(EpochEndOffset { epoch, end_offset, ..Default::default() })
}

impl SplicedPartition for PartitionResult {
    type Records = FileSlice;

    fn topic_index(&self) -> usize {
        self.topic_index
    }

    fn data(&self) -> &PartitionData {
        &self.data
    }

    fn records(&self) -> Option<(&FileSlice, u32)> {
        self.slice.as_ref().map(|slice| (slice, slice.length))
    }
}

/// The response frame, with each partition's records left as a file range
/// for the connection to send with sendfile(2). `results` are grouped by
/// topic in topic order.
fn encode_response(
    (version, correlation_id, session_id): (i16, i32, i32),
    (error_code, throttle_time_ms): (i16, i32),
    (topics, node_endpoints): (&[SplicedTopic<'_>], &[NodeEndpoint]),
    results: &[PartitionResult],
) -> Response {
    let header =
        SplicedFetchHeader { version, correlation_id, throttle_time_ms, error_code, session_id, node_endpoints };
    let chunks = encode_spliced_fetch_response(&header, topics, results, |part| match part {
        FramePart::Bytes(bytes) => Chunk::Bytes(bytes),
        FramePart::Records(slice) => Chunk::File(slice.clone()),
    })
    .expect("fetch response encodes");
    Response { chunks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::fetch_response::FetchableTopicResponse;
    use krabka_protocol::{ApiKey, FetchResponse, Message, Uuid};
    use std::io::Write;

    /// The frame sends the file ranges themselves (the encoding is tested
    /// in krabka-protocol's fetch_splice): with them read in, it equals the
    /// generated encoder's bytes, for every Fetch version.
    #[test]
    fn records_are_sent_as_file_ranges_and_the_frame_matches_the_generated_encoder() {
        let mut file = tempfile::tempfile().unwrap();
        let contents: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&contents).unwrap();
        let file = Arc::new(file);
        for version in 4..=FetchResponse::MAX_VERSION {
            let slice = |position: u64, length: u32| FileSlice { file: file.clone(), position, length };
            let topics = vec![
                SplicedTopic { name: "alpha", id: Uuid::random().unwrap() },
                SplicedTopic { name: "beta", id: Uuid::random().unwrap() },
            ];
            let empty = Some(Bytes::new());
            let partition = |topic_index, partition_index, slice| PartitionResult {
                topic_index,
                data: PartitionData {
                    partition_index,
                    high_watermark: 7,
                    records: empty.clone(),
                    ..Default::default()
                },
                slice,
            };
            let results = vec![
                partition(0, 0, Some(slice(5, 100))),
                partition(0, 1, None),
                partition(1, 4, Some(slice(150, 150))),
            ];
            let response = encode_response((version, 77, 9), (ErrorCode::NONE.code(), 0), (&topics, &[]), &results);
            let files = response.chunks.iter().filter(|c| matches!(c, Chunk::File(_))).count();
            assert_eq!(files, 2, "fetch v{version}: one file range per partition with records");
            let mut ours = Vec::new();
            for chunk in &response.chunks {
                match chunk {
                    Chunk::Bytes(b) => ours.extend_from_slice(b),
                    Chunk::File(s) => ours.extend_from_slice(&s.read_to_bytes().unwrap()),
                }
            }
            let records = |r: &PartitionResult| r.slice.as_ref().map(|s| s.read_to_bytes().unwrap()).or(empty.clone());
            let expected_body = FetchResponse {
                session_id: if version >= 7 { 9 } else { 0 },
                responses: (0..2)
                    .map(|t| FetchableTopicResponse {
                        topic: if version < 13 { topics[t].name.to_string() } else { String::new() },
                        topic_id: if version >= 13 { topics[t].id } else { Uuid::ZERO },
                        partitions: results
                            .iter()
                            .filter(|r| r.topic_index == t)
                            .map(|r| PartitionData { records: records(r), ..r.data.clone() })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            let mut expected = bytes::BytesMut::new();
            krabka_protocol::frame::encode_response(&mut expected, ApiKey::Fetch, version, 77, &expected_body).unwrap();
            assert_eq!(ours, expected.to_vec(), "fetch v{version}");
        }
    }
}
