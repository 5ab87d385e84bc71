//! One idempotent producer: a producer id from InitProducerId, the
//! partitions it owns, a pipelined connection per leader broker. Each request
//! carries one pre-built batch per ready partition led by that broker, so a
//! request's cost to the generator is a few copies and CRCs; responses are
//! matched in order and feed the partitions' sequence bookkeeping.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::{ApiKey, ErrorCode, ProduceRequest, ProduceResponse};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::time::{sleep_until, Instant};

use crate::batches::{stamp, Stamp, Templates};
use crate::cluster::ClusterView;
use crate::link::{Event, InFlight, Link, SentBatch};
use crate::partition::PartitionState;
use crate::wire;

/// How long metadata or a connection attempt waits after failing.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// After the run ends, how long batches in flight or being retried may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub acks: i16,
    pub timeout_ms: i32,
    pub max_in_flight: usize,
    /// Records per second for this producer; None: as fast as it goes.
    pub rate: Option<f64>,
    /// When no new batch is started any more (the timed run's end, or a
    /// bounded run's give-up time).
    pub stop_after: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct Identity {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// What one producer did.
#[derive(Debug, Default)]
pub struct ProducerResult {
    pub partitions: Vec<PartitionResult>,
    pub latencies_ns: Vec<u64>,
    pub requests: u64,
    pub request_bytes: u64,
    pub retries: u64,
    pub last_ack: Option<Instant>,
    pub first_error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PartitionResult {
    pub partition: i32,
    pub producer_id: i64,
    pub acked: u64,
    pub unacked: u64,
}

/// Paces sends to a records-per-second rate, catching up after a stall as
/// the Java workload's loop does.
#[derive(Debug)]
struct Pacer {
    rate: f64,
    start: Instant,
    sent: u64,
}

impl Pacer {
    fn allowance(&self, now: Instant) -> i64 {
        (self.rate * (now - self.start).as_secs_f64()) as i64 - self.sent as i64
    }

    fn next_due(&self) -> Instant {
        self.start + Duration::from_secs_f64((self.sent + 1) as f64 / self.rate)
    }
}

pub struct Producer {
    identity: Identity,
    config: ProducerConfig,
    templates: Arc<Templates>,
    view: ClusterView,
    parts: Vec<PartitionState>,
    /// The broker each partition's batches in flight went to: a partition
    /// only moves to a new leader once they have answered.
    routes: Vec<i32>,
    links: HashMap<i32, Link>,
    events: UnboundedReceiver<Event>,
    events_tx: UnboundedSender<Event>,
    next_link_id: u64,
    pacer: Option<Pacer>,
    metadata_stale: bool,
    /// No metadata request or connection attempt before this.
    backoff_until: Option<Instant>,
    stop_at: Instant,
    stopped: bool,
    cursor: usize,
    result: ProducerResult,
}

impl Producer {
    /// A producer of `partitions` (each with its planned record count).
    pub fn new(
        identity: Identity,
        config: ProducerConfig,
        templates: Arc<Templates>,
        view: ClusterView,
        partitions: Vec<(i32, Option<u64>)>,
    ) -> Self {
        let batch_records = templates.batch_records();
        let parts: Vec<_> = partitions.iter().map(|&(p, n)| PartitionState::new(p, batch_records, n)).collect();
        let (events_tx, events) = unbounded_channel();
        let now = Instant::now();
        Producer {
            identity,
            pacer: config.rate.map(|rate| Pacer { rate, start: now, sent: 0 }),
            stop_at: now + config.stop_after,
            config,
            templates,
            view,
            routes: vec![-1; parts.len()],
            parts,
            links: HashMap::new(),
            events,
            events_tx,
            next_link_id: 0,
            metadata_stale: false,
            backoff_until: None,
            stopped: false,
            cursor: 0,
            result: ProducerResult::default(),
        }
    }

    /// Produces until every partition is done (or the drain times out).
    pub async fn run(mut self) -> ProducerResult {
        loop {
            let now = Instant::now();
            if now >= self.stop_at + DRAIN_TIMEOUT {
                self.note_error(format!("batches still unacknowledged {DRAIN_TIMEOUT:?} after the run"));
                break;
            }
            self.stop_if_due(now);
            self.expire_requests(now);
            if self.metadata_stale && self.backoff_until.is_none_or(|t| t <= now) {
                self.refresh_metadata().await;
            }
            while self.send_once().await {}
            if self.parts.iter().all(PartitionState::is_finished) {
                break;
            }
            let wake = self.next_wake();
            tokio::select! {
                Some(event) = self.events.recv() => self.on_event(event),
                () = sleep_until(wake) => {}
            }
        }
        self.finish()
    }

    fn stop_if_due(&mut self, now: Instant) {
        if !self.stopped && now >= self.stop_at {
            self.stopped = true;
            self.parts.iter_mut().for_each(PartitionState::stop);
        }
    }

    /// A request unanswered for its timeout plus a margin is lost with its connection.
    fn expire_requests(&mut self, now: Instant) {
        let limit = self.request_timeout();
        let expired: Vec<i32> = self
            .links
            .iter()
            .filter(|(_, link)| link.in_flight.front().is_some_and(|f| now - f.sent_at > limit))
            .map(|(&broker, _)| broker)
            .collect();
        for broker in expired {
            self.close_link(broker, "request timed out".to_string());
        }
    }

    fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.timeout_ms as u64) + Duration::from_secs(30)
    }

    async fn refresh_metadata(&mut self) {
        match self.view.refresh().await {
            Ok(()) => self.metadata_stale = false,
            Err(error) => {
                eprintln!("[loadgen] metadata refresh failed: {error:#}");
                self.backoff_until = Some(Instant::now() + RETRY_BACKOFF);
            }
        }
    }

    /// The earliest moment something may change without an event.
    fn next_wake(&self) -> Instant {
        let now = Instant::now();
        let mut wake = now + Duration::from_secs(1);
        let mut consider = |at: Option<Instant>| {
            if let Some(at) = at {
                wake = wake.min(at.max(now));
            }
        };
        consider(self.pacer.as_ref().map(Pacer::next_due));
        consider(self.backoff_until);
        consider((!self.stopped).then_some(self.stop_at));
        self.parts.iter().for_each(|p| consider(p.retry_at()));
        let oldest = self.links.values().filter_map(|l| l.in_flight.front()).map(|f| f.sent_at).min();
        consider(oldest.map(|sent| sent + self.request_timeout()));
        wake
    }

    /// Sends one request to each leader with a ready partition and room in
    /// flight; false when nothing was sent.
    async fn send_once(&mut self) -> bool {
        let now = Instant::now();
        if self.backoff_until.is_some_and(|t| t > now) {
            return false;
        }
        let by_leader = self.ready_batches(now);
        self.cursor = (self.cursor + 1) % self.parts.len().max(1);
        let sent = !by_leader.is_empty();
        for (leader, batches) in by_leader {
            self.send_request(leader, batches, now).await;
        }
        sent
    }

    /// The next batch of every partition that may send now, by leader,
    /// starting at a rotating partition so none is always last.
    fn ready_batches(&mut self, now: Instant) -> HashMap<i32, Vec<SentBatch>> {
        let mut budget = self.pacer.as_ref().map(|p| p.allowance(now));
        let mut by_leader: HashMap<i32, Vec<SentBatch>> = HashMap::new();
        let n = self.parts.len();
        for slot in (0..n).map(|i| (self.cursor + i) % n) {
            if budget.is_some_and(|b| b <= 0) {
                break;
            }
            let part = &self.parts[slot];
            let Some((seq, count)) = part.next_batch(now) else { continue };
            let Some(leader) = self.view.leader(part.partition as usize) else {
                self.metadata_stale = true;
                continue;
            };
            let moved = part.in_flight() > 0 && self.routes[slot] != leader;
            let full = self.links.get(&leader).is_some_and(|l| l.in_flight.len() >= self.config.max_in_flight);
            if moved || full {
                continue;
            }
            by_leader.entry(leader).or_default().push(SentBatch { slot, seq, count });
            budget = budget.map(|b| b - i64::from(count));
        }
        by_leader
    }

    async fn send_request(&mut self, leader: i32, batches: Vec<SentBatch>, now: Instant) {
        if let Err(error) = self.ensure_link(leader).await {
            eprintln!("[loadgen] {error:#}");
            self.metadata_stale = true;
            self.backoff_until = Some(now + RETRY_BACKOFF);
            return;
        }
        let Some(correlation_id) = self.links.get_mut(&leader).map(Link::next_correlation_id) else { return };
        let request =
            produce_request(&self.templates, &self.config, self.identity, &self.view.topic, &self.parts, &batches);
        let frame = request.and_then(|r| wire::request(ApiKey::Produce, wire::PRODUCE_VERSION, correlation_id, &r));
        for batch in &batches {
            self.parts[batch.slot].on_sent(batch.seq, batch.count);
            self.routes[batch.slot] = leader;
        }
        let frame = match frame {
            Ok(frame) => frame,
            Err(error) => {
                // Not a broker's doing, and the next try would fail the same way.
                let reason = format!("{error:#}");
                batches.iter().for_each(|b| self.parts[b.slot].on_fatal(reason.clone(), now));
                return self.note_error(reason);
            }
        };
        if let Some(pacer) = &mut self.pacer {
            pacer.sent += batches.iter().map(|b| u64::from(b.count)).sum::<u64>();
        }
        self.result.requests += 1;
        self.result.request_bytes += frame.len() as u64;
        let Some(link) = self.links.get_mut(&leader) else { return };
        link.in_flight.push_back(InFlight { correlation_id, sent_at: now, batches });
        if let Err(error) = link.write(&frame).await {
            self.close_link(leader, format!("writing a produce request: {error}"));
        }
    }

    async fn ensure_link(&mut self, leader: i32) -> anyhow::Result<()> {
        if self.links.contains_key(&leader) {
            return Ok(());
        }
        let address = self.view.address(leader).with_context(|| format!("no address for broker {leader}"))?;
        let link = Link::open(address, self.next_link_id, self.events_tx.clone()).await?;
        self.next_link_id += 1;
        self.links.insert(leader, link);
        Ok(())
    }

    fn on_event(&mut self, event: Event) {
        let (id, outcome) = match event {
            Event::Frame { link, frame } => (link, Ok(frame)),
            Event::Closed { link, error } => (link, Err(error)),
        };
        // A report from a connection already replaced is stale.
        let Some(broker) = self.links.iter().find(|(_, l)| l.id == id).map(|(&b, _)| b) else { return };
        let handled = outcome.and_then(|frame| self.on_response(broker, frame));
        if let Err(error) = handled {
            self.close_link(broker, error);
        }
    }

    fn on_response(&mut self, broker: i32, frame: bytes::Bytes) -> Result<(), String> {
        let link = self.links.get_mut(&broker).ok_or("no link")?;
        let in_flight = link.in_flight.pop_front().ok_or("a response nobody asked for")?;
        let decoded = wire::response::<ProduceResponse>(ApiKey::Produce, wire::PRODUCE_VERSION, frame);
        let (correlation_id, response) = match decoded {
            Ok(decoded) => decoded,
            Err(error) => {
                link.in_flight.push_front(in_flight);
                return Err(format!("{error:#}"));
            }
        };
        if correlation_id != in_flight.correlation_id {
            link.in_flight.push_front(in_flight);
            return Err(format!("response to correlation id {correlation_id} out of order"));
        }
        let now = Instant::now();
        self.result.latencies_ns.push((now - in_flight.sent_at).as_nanos() as u64);
        self.apply_response(&in_flight.batches, &response, now);
        Ok(())
    }

    fn apply_response(&mut self, batches: &[SentBatch], response: &ProduceResponse, now: Instant) {
        for batch in batches {
            let part = &mut self.parts[batch.slot];
            let code = response
                .responses
                .iter()
                .filter(|t| t.name == self.view.topic)
                .flat_map(|t| &t.partition_responses)
                .find(|r| r.index == part.partition)
                .map(|r| ErrorCode::from(r.error_code));
            match code {
                // A duplicate is a resend of a batch already in the log.
                Some(ErrorCode::NONE | ErrorCode::DUPLICATE_SEQUENCE_NUMBER) => {
                    part.on_acked(batch.seq, batch.count, now);
                    self.result.last_ack = Some(now);
                }
                Some(code) if !(code.is_retriable() || code == ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER) => {
                    let reason = format!("partition {}: {code}", part.partition);
                    part.on_fatal(reason.clone(), now);
                    self.note_error(reason);
                }
                // Retriable, or a response without the partition.
                _ => {
                    part.on_retriable(now);
                    self.result.retries += 1;
                    self.metadata_stale = true;
                }
            }
        }
    }

    /// Drops a connection; whatever it had in flight is resent (the broker
    /// recognises batches it already has by their sequences).
    fn close_link(&mut self, broker: i32, error: String) {
        let Some(link) = self.links.remove(&broker) else { return };
        eprintln!("[loadgen] connection to broker {broker} closed: {error}");
        self.metadata_stale = true;
        let now = Instant::now();
        for batch in link.in_flight.iter().flat_map(|f| &f.batches) {
            self.parts[batch.slot].on_retriable(now);
            self.result.retries += 1;
        }
    }

    fn note_error(&mut self, error: String) {
        self.result.first_error.get_or_insert(error);
    }

    fn finish(mut self) -> ProducerResult {
        for part in &self.parts {
            if let Some(failure) = part.failure() {
                self.result.first_error.get_or_insert_with(|| failure.to_string());
            }
        }
        let producer_id = self.identity.producer_id;
        self.result.partitions = self
            .parts
            .iter()
            .map(|p| PartitionResult { partition: p.partition, producer_id, acked: p.acked(), unacked: p.unacked() })
            .collect();
        self.result
    }
}

/// The produce request for `batches`: each a template stamped with this
/// producer's id and epoch, its base sequence and the send time.
fn produce_request(
    templates: &Templates,
    config: &ProducerConfig,
    identity: Identity,
    topic: &str,
    parts: &[PartitionState],
    batches: &[SentBatch],
) -> anyhow::Result<ProduceRequest> {
    let timestamp_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    let partition_data = batches
        .iter()
        .map(|batch| {
            let partition = parts[batch.slot].partition;
            let base_sequence = i32::try_from(batch.seq).context("sequence past i32::MAX")?;
            let fields = Stamp {
                producer_id: identity.producer_id,
                producer_epoch: identity.producer_epoch,
                base_sequence,
                timestamp_ms,
            };
            let records = stamp(templates.batch(partition as usize, batch.seq), &fields);
            Ok(PartitionProduceData { index: partition, records: Some(records), ..Default::default() })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(ProduceRequest {
        transactional_id: None,
        acks: config.acks,
        timeout_ms: config.timeout_ms,
        topic_data: vec![TopicProduceData { name: topic.to_string(), partition_data, ..Default::default() }],
        ..Default::default()
    })
}
