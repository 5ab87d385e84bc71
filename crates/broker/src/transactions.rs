//! The broker's side of the transaction coordinator: hosting it over
//! `__transaction_state`, finding the coordinator of an id, and writing
//! the markers a prepared transaction hands back (to partitions led here
//! straight into their logs, to others with WriteTxnMarkers to their
//! leaders), then reporting them written so the transaction completes.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use krabka_coordinator::group::OFFSETS_TOPIC;
use krabka_coordinator::txn::{Markers, TopicPartition, TxnHost, TRANSACTION_STATE_TOPIC};
use krabka_coordinator::CoordinatorLog;
use krabka_protocol::records::transaction_marker_batch;
use krabka_protocol::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use krabka_protocol::{ApiKey, ErrorCode, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::broker::{Broker, LiveBroker};
use crate::clock::{coordinator_time, now_ms};
use crate::replica::purgatory::Waiter;

/// How long one marker may wait for its partition's followers, and one
/// WriteTxnMarkers for its answer.
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the coordinator looks for `__transaction_state` partitions it
/// has come to lead.
const LEADERSHIP_CHECK: Duration = Duration::from_millis(250);
/// Between rounds of markers that could not be written yet.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

impl Broker {
    /// Calls the transaction coordinator with this broker as its host;
    /// `spare` is a producer id to hand out before the block's.
    pub fn with_txn_host<T>(&self, spare: Option<i64>, call: impl FnOnce(&TxnHost<'_>) -> T) -> T {
        let spare = Cell::new(spare);
        let producer_ids = || spare.take().or_else(|| self.producer_ids.try_next());
        let image = self.metadata.image();
        let transaction_version = image.features.get("transaction.version").copied().unwrap_or(0);
        let host =
            TxnHost { log: &self.txn_log, now: coordinator_time(), transaction_version, producer_ids: &producer_ids };
        call(&host)
    }

    /// The broker coordinating `transactional_id`: the leader of its
    /// `__transaction_state` partition (this one on a lone node), named by
    /// its endpoint of `listener_name`.
    pub fn txn_coordinator(&self, transactional_id: &str, listener_name: &str) -> Option<LiveBroker> {
        self.coordinator_on(TRANSACTION_STATE_TOPIC, self.txns.partition_for(transactional_id), listener_name)
    }
}

/// Writes the markers of `markers` and completes the transaction, in the
/// background; again and again until every partition has its marker, the
/// partition's topic is gone, or this broker stops coordinating the id.
pub fn spawn_markers(broker: &Arc<Broker>, markers: Markers) {
    let broker = Arc::clone(broker);
    tokio::spawn(async move { write_markers(broker, markers).await });
}

async fn write_markers(broker: Arc<Broker>, markers: Markers) {
    let mut pending: Vec<TopicPartition> = markers.partitions.clone();
    let index = broker.txns.partition_for(&markers.transactional_id);
    loop {
        if broker.txn_log.leader_epoch(index) != Some(markers.coordinator_epoch) {
            tracing::info!(transactional_id = %markers.transactional_id, "no longer its coordinator: leaving its markers to the next one");
            return;
        }
        pending = write_round(&broker, &markers, pending).await;
        if pending.is_empty() {
            break;
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
    let completed = broker.with_txn_host(None, |host| broker.txns.markers_written(host, &markers));
    if let Err(code) = completed {
        tracing::warn!(transactional_id = %markers.transactional_id, error = %code, "could not complete a transaction");
    }
}

/// One round of markers: each partition to its leader; those still to write.
async fn write_round(broker: &Arc<Broker>, markers: &Markers, pending: Vec<TopicPartition>) -> Vec<TopicPartition> {
    let image = broker.metadata.image();
    let mut by_leader: std::collections::BTreeMap<i32, Vec<TopicPartition>> = Default::default();
    for (topic, partition) in pending {
        // A deleted topic's partitions need no marker (Kafka drops them too).
        let Some(state) = image.topic(&topic).and_then(|t| t.partitions.get(partition as usize)) else { continue };
        by_leader.entry(broker.partition_leader(state)).or_default().push((topic, partition));
    }
    let mut failed = Vec::new();
    for (leader, partitions) in by_leader {
        if leader == broker.node_id {
            for tp in partitions {
                if let Err(code) = append_marker(broker, markers_of(markers), &tp.0, tp.1).await {
                    tracing::debug!(topic = %tp.0, partition = tp.1, error = code, "marker not written yet");
                    failed.push(tp);
                }
            }
        } else {
            failed.extend(send_markers(broker, leader, markers, partitions).await);
        }
    }
    failed
}

/// `items` keyed by topic, grouped per topic in the order topics first
/// appear: how Kafka's transaction messages list partitions.
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut topics: Vec<(String, Vec<T>)> = Vec::new();
    for (topic, item) in items {
        match topics.iter_mut().find(|(name, _)| *name == topic) {
            Some((_, items)) => items.push(item),
            None => topics.push((topic, vec![item])),
        }
    }
    topics
}

/// What a marker is: (producer id, producer epoch, commit, coordinator epoch).
pub type Marker = (i64, i16, bool, i32);

fn markers_of(markers: &Markers) -> Marker {
    (markers.producer_id, markers.producer_epoch, markers.commit, markers.coordinator_epoch)
}

/// Appends `marker` to `topic`-`partition` as its leader and waits until
/// its followers have it (Kafka writes markers with acks=all).
pub async fn append_marker(broker: &Broker, marker: Marker, topic: &str, partition: i32) -> Result<(), i16> {
    let (producer_id, producer_epoch, commit, coordinator_epoch) = marker;
    let Some(hosted) = broker.replicas.partition(topic, partition) else {
        let known = broker.metadata.image().topic(topic).is_some();
        let code = if known { ErrorCode::NOT_LEADER_OR_FOLLOWER } else { ErrorCode::UNKNOWN_TOPIC_OR_PARTITION };
        return Err(code.code());
    };
    let batch: Bytes = transaction_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms())
        .map_err(|_| ErrorCode::UNKNOWN_SERVER_ERROR.code())?;
    let (info, _) = hosted.append(&batch, now_ms()).map_err(|e| e.code())?;
    let required = info.last_offset + 1;
    let waiter = Waiter::new();
    hosted.watch(&waiter);
    let deadline = tokio::time::Instant::now() + MARKER_TIMEOUT;
    while hosted.high_watermark() < required {
        if !hosted.is_led_here() {
            return Err(ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
        }
        tokio::select! {
            () = waiter.woken() => {}
            () = tokio::time::sleep_until(deadline) => return Err(ErrorCode::REQUEST_TIMED_OUT.code()),
        }
    }
    if topic == OFFSETS_TOPIC {
        // The group coordinator's offsets of this transaction count now (or go).
        broker.groups.complete_transaction(partition as usize, producer_id, commit, coordinator_time());
    }
    Ok(())
}

/// WriteTxnMarkers to `leader` for `partitions`: those it did not write.
async fn send_markers(
    broker: &Broker,
    leader: i32,
    markers: &Markers,
    partitions: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    let topics = by_topic(partitions.iter().cloned())
        .into_iter()
        .map(|(name, partition_indexes)| WritableTxnMarkerTopic { name, partition_indexes, ..Default::default() })
        .collect();
    let request = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: markers.producer_id,
            producer_epoch: markers.producer_epoch,
            transaction_result: markers.commit,
            topics,
            coordinator_epoch: markers.coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    };
    let answer = broker.call_broker::<_, WriteTxnMarkersResponse>(
        (leader, "txn-markers"),
        MARKER_TIMEOUT,
        (ApiKey::WriteTxnMarkers, 1),
        &request,
    );
    let response = match answer.await {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(leader, %error, "WriteTxnMarkers failed");
            return partitions;
        }
    };
    let written: Vec<TopicPartition> = response
        .markers
        .iter()
        .flat_map(|m| m.topics.iter())
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.clone(), p.partition_index, p.error_code)))
        .filter(|(_, _, code)| *code == ErrorCode::NONE.code())
        .map(|(topic, partition, _)| (topic, partition))
        .collect();
    partitions.into_iter().filter(|tp| !written.contains(tp)).collect()
}

/// The transaction coordinator's clock: writes the markers of transactions
/// found prepared at load, then aborts transactions past their timeout and
/// expires idle transactional ids, each at Kafka's interval.
pub async fn transaction_clock_loop(broker: Arc<Broker>) {
    let at_load = std::mem::take(&mut *broker.markers_at_load.lock().unwrap_or_else(|e| e.into_inner()));
    for markers in at_load {
        spawn_markers(&broker, markers);
    }
    let settings = &broker.config.transactions;
    let abort_every = Duration::from_millis(settings.abort_check_interval_ms.max(1) as u64);
    let expire_every = Duration::from_millis(settings.expiry_check_interval_ms.max(1) as u64);
    let (mut last_abort, mut last_expiry) = (tokio::time::Instant::now(), tokio::time::Instant::now());
    loop {
        tokio::time::sleep(LEADERSHIP_CHECK).await;
        // Partitions led here since the last look are loaded, and their
        // prepared transactions' markers written again.
        for markers in broker.txns.take_markers_to_rewrite(&broker.txn_log) {
            spawn_markers(&broker, markers);
        }
        if last_abort.elapsed() >= abort_every {
            last_abort = tokio::time::Instant::now();
            let aborted = broker.with_txn_host(None, |host| broker.txns.abort_timed_out(host));
            for markers in aborted {
                spawn_markers(&broker, markers);
            }
        }
        if last_expiry.elapsed() >= expire_every {
            last_expiry = tokio::time::Instant::now();
            let expired = broker.with_txn_host(None, |host| broker.txns.expire_ids(host));
            if expired > 0 {
                tracing::info!(expired, "transactional ids expired");
            }
        }
    }
}

/// Whether each of `partitions` is in the open transaction of
/// `transactional_id`'s producer (KIP-890 part 1: a partition leader asks
/// before it appends a transaction's first batch), or, with `add`, adds
/// them to it (part 2, transactions v2: producers leave that to the
/// leaders); asked of the coordinator here or with AddPartitionsToTxn
/// (v4 verify only, v5 adding) of another broker. Errors a producer cannot
/// act on (the coordinator moving, loading) come back as
/// NOT_ENOUGH_REPLICAS, which it retries, as Kafka answers them.
pub async fn check_in_transaction(
    broker: &Broker,
    transactional_id: &str,
    producer: (i64, i16),
    partitions: Vec<TopicPartition>,
    add: bool,
) -> Vec<(TopicPartition, ErrorCode)> {
    let mut answers = ask_once(broker, transactional_id, producer, partitions, add).await;
    if add {
        // Transactions v2: the coordinator answers CONCURRENT_TRANSACTIONS
        // while it writes the last transaction's markers, which takes
        // milliseconds; asked again here, as Kafka's leader does, the
        // producer need not wait out its own retry backoff (100 ms).
        let settings = &broker.config.transactions;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(settings.add_partitions_retry_max_ms as u64);
        let backoff = Duration::from_millis(settings.add_partitions_retry_backoff_ms as u64);
        loop {
            let busy: Vec<TopicPartition> = answers
                .iter()
                .filter(|(_, code)| *code == ErrorCode::CONCURRENT_TRANSACTIONS)
                .map(|(tp, _)| tp.clone())
                .collect();
            if busy.is_empty() || tokio::time::Instant::now() + backoff > deadline {
                break;
            }
            tokio::time::sleep(backoff).await;
            let again = ask_once(broker, transactional_id, producer, busy, add).await;
            answers.retain(|(tp, _)| !again.iter().any(|(asked, _)| asked == tp));
            answers.extend(again);
        }
    }
    // Errors a producer cannot act on come back as NOT_ENOUGH_REPLICAS,
    // which it retries; CONCURRENT_TRANSACTIONS too, except for an add
    // (transactions v2 producers retry it themselves), as Kafka.
    let mut retriable =
        vec![ErrorCode::NOT_COORDINATOR, ErrorCode::COORDINATOR_NOT_AVAILABLE, ErrorCode::COORDINATOR_LOAD_IN_PROGRESS];
    if !add {
        retriable.push(ErrorCode::CONCURRENT_TRANSACTIONS);
    }
    answers
        .into_iter()
        .map(|(tp, code)| (tp, if retriable.contains(&code) { ErrorCode::NOT_ENOUGH_REPLICAS } else { code }))
        .collect()
}

/// One round of [`check_in_transaction`]: the coordinator's answers as it
/// gives them.
async fn ask_once(
    broker: &Broker,
    transactional_id: &str,
    producer: (i64, i16),
    partitions: Vec<TopicPartition>,
    add: bool,
) -> Vec<(TopicPartition, ErrorCode)> {
    let listener = &broker.config.inter_broker_listener_name;
    let coordinator = broker.txn_coordinator(transactional_id, listener).map(|c| c.id);
    let (pid, epoch) = producer;
    let answers = match coordinator {
        Some(id) if id == broker.node_id => broker.with_txn_host(None, |host| {
            if add {
                let code = broker.txns.add_partitions(host, transactional_id, pid, epoch, &partitions, 2).err();
                partitions.iter().map(|tp| (tp.clone(), code.unwrap_or(ErrorCode::NONE))).collect()
            } else {
                broker.txns.verify_partitions(host, transactional_id, pid, epoch, &partitions)
            }
        }),
        Some(id) => match ask_coordinator(broker, id, transactional_id, producer, &partitions, add).await {
            Ok(answers) => answers,
            Err(_) => partitions.iter().map(|tp| (tp.clone(), ErrorCode::NOT_COORDINATOR)).collect(),
        },
        None => partitions.iter().map(|tp| (tp.clone(), ErrorCode::COORDINATOR_NOT_AVAILABLE)).collect(),
    };
    answers
}

/// AddPartitionsToTxn to the coordinator on broker `id`: v4 verify only,
/// or v5 adding the partitions.
async fn ask_coordinator(
    broker: &Broker,
    id: i32,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    partitions: &[TopicPartition],
    add: bool,
) -> Result<Vec<(TopicPartition, ErrorCode)>, String> {
    use krabka_protocol::add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
    use krabka_protocol::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
    let topics = by_topic(partitions.iter().cloned())
        .into_iter()
        .map(|(name, partitions)| AddPartitionsToTxnTopic { name, partitions, ..Default::default() })
        .collect();
    let request = AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            verify_only: !add,
            topics,
            ..Default::default()
        }],
        ..Default::default()
    };
    let version = if add { 5 } else { 4 };
    let response: AddPartitionsToTxnResponse = broker
        .call_broker((id, "txn-verification"), MARKER_TIMEOUT, (ApiKey::AddPartitionsToTxn, version), &request)
        .await?;
    if response.error_code != 0 {
        let code = ErrorCode::from(response.error_code);
        return Ok(partitions.iter().map(|tp| (tp.clone(), code)).collect());
    }
    Ok(response
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .flat_map(|t| {
            t.results_by_partition.iter().map(move |p| ((t.name.clone(), p.partition_index), p.partition_error_code))
        })
        .map(|(tp, code)| (tp, ErrorCode::from(code)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::by_topic;

    #[test]
    fn partitions_are_grouped_by_topic_in_first_seen_order() {
        let pairs = [("b", 1), ("a", 0), ("b", 0), ("a", 2)].map(|(t, p)| (t.to_string(), p));
        assert_eq!(by_topic(pairs), [("b".to_string(), vec![1, 0]), ("a".to_string(), vec![0, 2])]);
        assert!(by_topic(Vec::<(String, i32)>::new()).is_empty());
    }
}
