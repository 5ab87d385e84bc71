//! What the generator asks the cluster outside the produce pipeline: the
//! topic's metadata (partition leaders and broker addresses), creating the
//! topic, producer ids and the offsets the run starts at.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, Context};
use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use krabka_protocol::metadata_request::MetadataRequestTopic;
use krabka_protocol::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, ErrorCode, InitProducerIdRequest, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
};
use tokio::time::{sleep, Instant};

use crate::wire::{self, Client};

/// How long setup steps keep retrying retriable errors (a topic being
/// created, a coordinator loading, a leader being elected).
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// The topic's partition leaders and the brokers' addresses, as of the last
/// Metadata response.
#[derive(Debug, Clone)]
pub struct ClusterView {
    pub topic: String,
    /// The addresses given on the command line, tried first.
    bootstrap: Vec<String>,
    brokers: HashMap<i32, String>,
    /// Leader per partition (index = partition), -1 when it has none.
    leaders: Vec<i32>,
}

impl ClusterView {
    /// A view not yet loaded: call [`ClusterView::refresh`].
    pub fn new(bootstrap: &str, topic: &str) -> Self {
        let bootstrap = bootstrap.split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
        ClusterView { topic: topic.to_string(), bootstrap, brokers: HashMap::new(), leaders: Vec::new() }
    }

    pub fn partitions(&self) -> usize {
        self.leaders.len()
    }

    pub fn leader(&self, partition: usize) -> Option<i32> {
        self.leaders.get(partition).copied().filter(|&leader| leader >= 0)
    }

    pub fn address(&self, broker: i32) -> Option<&str> {
        self.brokers.get(&broker).map(String::as_str)
    }

    fn all_led(&self) -> bool {
        (0..self.partitions()).all(|p| self.leader(p).is_some_and(|l| self.brokers.contains_key(&l)))
    }

    /// Asks the bootstrap servers, then the known brokers, for the topic's
    /// metadata; the first answer wins.
    pub async fn refresh(&mut self) -> anyhow::Result<()> {
        let mut candidates = self.bootstrap.clone();
        candidates.extend(self.brokers.values().cloned());
        let mut last_error = None;
        for address in candidates {
            match self.metadata_from(&address).await {
                Ok(response) => return self.apply(response),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no bootstrap server given")))
    }

    async fn metadata_from(&self, address: &str) -> anyhow::Result<MetadataResponse> {
        let topic = MetadataRequestTopic { name: Some(self.topic.clone()), ..Default::default() };
        let request =
            MetadataRequest { topics: Some(vec![topic]), allow_auto_topic_creation: false, ..Default::default() };
        Client::connect(address).await?.call(ApiKey::Metadata, wire::METADATA_VERSION, &request).await
    }

    fn apply(&mut self, response: MetadataResponse) -> anyhow::Result<()> {
        self.brokers = response.brokers.iter().map(|b| (b.node_id, format!("{}:{}", b.host, b.port))).collect();
        let Some(topic) = response.topics.iter().find(|t| t.name.as_deref() == Some(self.topic.as_str())) else {
            bail!("metadata response without topic {}", self.topic);
        };
        let code = ErrorCode::from(topic.error_code);
        if code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION || code == ErrorCode::LEADER_NOT_AVAILABLE {
            self.leaders.clear();
            return Ok(());
        }
        if code != ErrorCode::NONE {
            bail!("metadata for topic {}: {code}", self.topic);
        }
        let count = topic.partitions.iter().map(|p| p.partition_index + 1).max().unwrap_or(0).max(0) as usize;
        self.leaders = vec![-1; count];
        for partition in &topic.partitions {
            let usable = ErrorCode::from(partition.error_code) == ErrorCode::NONE;
            self.leaders[partition.partition_index as usize] = if usable { partition.leader_id } else { -1 };
        }
        Ok(())
    }
}

/// The topic's view once every partition has a leader, creating the topic
/// first when it does not exist. An existing topic keeps its partitions.
pub async fn ensure_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i16,
) -> anyhow::Result<ClusterView> {
    let mut view = ClusterView::new(bootstrap, topic);
    view.refresh().await.context("first metadata request")?;
    if view.partitions() == 0 {
        create_topic(&view, partitions, replication).await?;
    }
    let deadline = Instant::now() + SETUP_TIMEOUT;
    while view.partitions() == 0 || !view.all_led() {
        if Instant::now() > deadline {
            bail!("topic {topic} has no leader for every partition after {SETUP_TIMEOUT:?}");
        }
        sleep(RETRY_BACKOFF).await;
        view.refresh().await?;
    }
    if view.partitions() != partitions as usize {
        eprintln!(
            "[loadgen] topic {topic} exists with {} partitions (not {partitions}); using them",
            view.partitions()
        );
    }
    Ok(view)
}

async fn create_topic(view: &ClusterView, partitions: i32, replication: i16) -> anyhow::Result<()> {
    let topic = CreatableTopic {
        name: view.topic.clone(),
        num_partitions: partitions,
        replication_factor: replication,
        ..Default::default()
    };
    let request = CreateTopicsRequest { topics: vec![topic], timeout_ms: 30_000, ..Default::default() };
    let mut client = Client::connect(&view.bootstrap[0]).await?;
    let response: CreateTopicsResponse =
        client.call(ApiKey::CreateTopics, wire::CREATE_TOPICS_VERSION, &request).await?;
    for result in response.topics {
        let code = ErrorCode::from(result.error_code);
        // Another client may create it between our metadata and CreateTopics.
        if code != ErrorCode::NONE && code != ErrorCode::TOPIC_ALREADY_EXISTS {
            bail!("creating topic {}: {code} {}", result.name, result.error_message.unwrap_or_default());
        }
    }
    Ok(())
}

/// A fresh idempotent producer id and epoch, as an idempotent Kafka producer
/// gets one (InitProducerId without a transactional id, from any broker).
pub async fn init_producer_id(view: &ClusterView) -> anyhow::Result<(i64, i16)> {
    let request =
        InitProducerIdRequest { transactional_id: None, transaction_timeout_ms: 60_000, ..Default::default() };
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut client = Client::connect(&view.bootstrap[0]).await?;
    loop {
        let response: InitProducerIdResponse =
            client.call(ApiKey::InitProducerId, wire::INIT_PRODUCER_ID_VERSION, &request).await?;
        let code = ErrorCode::from(response.error_code);
        if code == ErrorCode::NONE {
            return Ok((response.producer_id, response.producer_epoch));
        }
        if !code.is_retriable() || Instant::now() > deadline {
            bail!("InitProducerId: {code}");
        }
        sleep(RETRY_BACKOFF).await;
    }
}

/// Each partition's log end offset (index = partition): where this run's
/// records will start, and so where the verifier reads from.
pub async fn end_offsets(view: &mut ClusterView) -> anyhow::Result<Vec<i64>> {
    let mut offsets = vec![-1i64; view.partitions()];
    let deadline = Instant::now() + SETUP_TIMEOUT;
    while offsets.contains(&-1) {
        if Instant::now() > deadline {
            bail!("ListOffsets did not answer for every partition within {SETUP_TIMEOUT:?}");
        }
        for (broker, partitions) in missing_by_leader(view, &offsets) {
            let Some(address) = view.address(broker) else { continue };
            let response = list_latest(address, &view.topic, &partitions).await?;
            for partition in response.topics.iter().flat_map(|t| &t.partitions) {
                if ErrorCode::from(partition.error_code) == ErrorCode::NONE {
                    offsets[partition.partition_index as usize] = partition.offset;
                }
            }
        }
        if offsets.contains(&-1) {
            sleep(RETRY_BACKOFF).await;
            view.refresh().await?;
        }
    }
    Ok(offsets)
}

/// Partitions without an offset yet, grouped by their leader.
fn missing_by_leader(view: &ClusterView, offsets: &[i64]) -> HashMap<i32, Vec<i32>> {
    let mut by_leader: HashMap<i32, Vec<i32>> = HashMap::new();
    for (p, _) in offsets.iter().enumerate().filter(|(_, &o)| o == -1) {
        if let Some(leader) = view.leader(p) {
            by_leader.entry(leader).or_default().push(p as i32);
        }
    }
    by_leader
}

async fn list_latest(address: &str, topic: &str, partitions: &[i32]) -> anyhow::Result<ListOffsetsResponse> {
    // Timestamp -1: the latest offset (the log end offset).
    let partitions =
        partitions.iter().map(|&p| ListOffsetsPartition { partition_index: p, timestamp: -1, ..Default::default() });
    let topic = ListOffsetsTopic { name: topic.to_string(), partitions: partitions.collect(), ..Default::default() };
    let request = ListOffsetsRequest { replica_id: -1, topics: vec![topic], ..Default::default() };
    Client::connect(address).await?.call(ApiKey::ListOffsets, wire::LIST_OFFSETS_VERSION, &request).await
}
