//! The broker's shared state, `Broker`: its config, the metadata store, the
//! hosted partitions, the group coordinator, fetch sessions and metrics, and
//! opening all of it at start (meta.properties check, metadata replay,
//! partition logs, groups). It knows nothing of sockets or requests: the
//! server (`server.rs`) and the handlers take it from here.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use krabka_format::MetaProperties;
use tokio::sync::watch;

use crate::clock::{coordinator_time, now_ms};
use crate::config::BrokerConfig;
use crate::coordinator_log::TopicLog;
use crate::fetch_session::FetchSessionCache;
use crate::metadata::store::{metadata_log_config, METADATA_LOG_DIR_NAME};
use crate::metadata::{MetadataImage, MetadataStore};
use crate::observability::Metrics;
use crate::producer_id_source::ProducerIdSource;
use crate::quorum::QuorumSetup;
use crate::replica::{Hosting, LogDirectories, ReplicaManager};
use krabka_coordinator::group::classic::ClassicConfig;
use krabka_coordinator::group::consumer::ConsumerConfig;
use krabka_coordinator::group::{GroupConfig, GroupCoordinator, GroupHost, OFFSETS_TOPIC};
use krabka_coordinator::txn::{TransactionCoordinator, TxnConfig, TRANSACTION_STATE_TOPIC};
use krabka_log::LogManager;

pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub cluster_id: String,
    pub node_id: i32,
    pub metadata: MetadataStore,
    pub producer_ids: ProducerIdSource,
    /// Auto-created topics asked of another controller, not answered yet.
    pub auto_creations: crate::auto_creations::AutoCreations,
    pub replicas: Arc<ReplicaManager>,
    pub metrics: Arc<Metrics>,
    /// Produce and fetch byte rates against the client quotas.
    pub client_quotas: crate::client_quota_manager::ClientQuotaManager,
    pub fetch_sessions: FetchSessionCache,
    pub groups: GroupCoordinator,
    /// The `__consumer_offsets` partitions the group coordinator persists to.
    offsets_log: TopicLog,
    pub txns: TransactionCoordinator,
    /// The `__transaction_state` partitions the transaction coordinator persists to.
    pub(crate) txn_log: TopicLog,
    /// This process's registration with the active controller.
    pub membership: crate::membership::Membership,
    /// The markers of transactions found prepared at load, for the
    /// server to write once it runs.
    pub(crate) markers_at_load: std::sync::Mutex<Vec<krabka_coordinator::txn::Markers>>,
    /// Open client connections, against `max.connections` (the server counts them).
    pub(crate) open_connections: AtomicUsize,
    /// Open client connections by peer address (`max.connections.per.ip`).
    pub(crate) connections_per_ip: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
    /// `max.connections.per.ip.overrides` as last set dynamically.
    pub(crate) dynamic_per_ip_overrides: crate::config::connection_limits::DynamicPerIpOverrides,
    /// Whether the last image published sets any dynamic config of this
    /// broker (its own or the cluster's default): without one, what is
    /// read per connection comes from server.properties, no image taken.
    any_dynamic_config: Arc<std::sync::atomic::AtomicBool>,
    /// Set once the node serves (its image caught up, a broker unfenced
    /// and listening): what `/readyz` starts from.
    serving: std::sync::atomic::AtomicBool,
    /// Kept connections to other brokers (markers, verification).
    pub(crate) broker_channels: crate::broker_channels::BrokerChannels,
    shutdown: watch::Sender<bool>,
}

impl Broker {
    /// Opens the storage: checks `meta.properties`, replays the metadata
    /// log, opens every partition log.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        let started = Instant::now();
        let StartingDirs { meta, ids: dir_ids, unreadable } = read_log_dirs(&config)?;
        let config = Arc::new(config);
        let log_manager = LogManager::open(&config.log_dirs, &[METADATA_LOG_DIR_NAME], &unreadable)
            .context("opening log directories")?;
        anyhow::ensure!(
            !log_manager.is_offline(&config.metadata_log_dir),
            "the metadata log's directory {} could not be read",
            config.metadata_log_dir.display()
        );
        let log_manager = Arc::new(log_manager);
        let log_dirs =
            Arc::new(LogDirectories::new(dir_ids, config.metadata_log_dir.clone(), Arc::clone(&log_manager)));
        log_manager.remove_leftover_deletions();
        let snapshot_every_bytes = config
            .raw
            .get("metadata.log.max.record.bytes.between.snapshots")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(20 * 1024 * 1024);
        // A controller-only node always runs the quorum (as its only voter
        // too): brokers elsewhere follow it.
        let metadata = if config.quorum.is_shared(config.node_id) || !config.is_broker() {
            let directory_id =
                MetaProperties::read(&config.metadata_log_dir)?.map_or(meta.directory_id, |m| m.directory_id);
            let log_dir = config.metadata_log_dir.join(METADATA_LOG_DIR_NAME);
            let setup =
                QuorumSetup::from_config(&config, &meta.cluster_id, directory_id, log_dir, metadata_log_config());
            let timeout = Duration::from_millis(config.quorum.request_timeout_ms.max(1) as u64);
            let runtime =
                tokio::runtime::Handle::try_current().context("joining the metadata quorum needs a runtime")?;
            MetadataStore::join_quorum(setup, &runtime, timeout).context("joining the metadata quorum")?
        } else {
            let metadata_clean = log_manager.was_clean_shutdown(&config.metadata_log_dir);
            MetadataStore::open(&config.metadata_log_dir, snapshot_every_bytes, metadata_clean, now_ms())
                .context("opening the metadata log")?
        }
        .with_defaults(config.controller_defaults());
        let image = metadata.image();
        // In a shared quorum the image starts empty: what is stray is known
        // only once it has caught up (`catch_up_metadata`).
        let caught_up = metadata.quorum().is_none();
        if caught_up {
            remove_stray_partitions(&log_manager, &image)?;
        }
        let hosting = if caught_up { Hosting::Everything } else { Hosting::ReplicasOf(config.node_id) };
        let replicas = Arc::new(ReplicaManager::new(config.clone(), log_manager, hosting, log_dirs));
        // At start a log that cannot open stops the broker; later ones are
        // the subscriber's to report.
        let subscriber = Arc::clone(&replicas);
        metadata
            .publisher()
            .subscribe_after(
                |image| replicas.sync_with_image(image),
                move |update| {
                    if let Err(e) = subscriber.apply_update(update) {
                        tracing::error!(error = %e, "could not open or delete partition logs");
                    }
                },
            )
            .context("opening partition logs")?;
        tracing::info!(
            partitions = replicas.all_partitions().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "storage loaded"
        );
        // Sized by the offsets topic when the groups load (after catch-up
        // in a shared quorum), by this default when it does not exist yet.
        let groups = GroupCoordinator::new(group_config(&config), config.offsets_topic_num_partitions.max(1) as usize);
        let txn_config = TxnConfig {
            max_timeout_ms: config.transactions.max_timeout_ms,
            id_expiration_ms: config.transactions.id_expiration_ms,
        };
        let txns =
            TransactionCoordinator::new(txn_config, config.transactions.state_log_num_partitions.max(1) as usize);
        let fetch_sessions = FetchSessionCache::new(config.max_incremental_fetch_session_cache_slots);
        let membership = crate::membership::Membership::new(config.node_id);
        let broker = Arc::new(Broker {
            groups,
            offsets_log: TopicLog::new(replicas.clone(), OFFSETS_TOPIC),
            txns,
            txn_log: TopicLog::new(replicas.clone(), TRANSACTION_STATE_TOPIC),
            node_id: config.node_id,
            producer_ids: ProducerIdSource::new(config.node_id),
            auto_creations: Default::default(),
            cluster_id: meta.cluster_id,
            client_quotas: crate::client_quota_manager::ClientQuotaManager::from_config(&config),
            config,
            metadata,
            replicas,
            metrics: Arc::new(Metrics::new()),

            fetch_sessions,
            membership,
            markers_at_load: Default::default(),
            open_connections: AtomicUsize::new(0),
            connections_per_ip: Default::default(),
            dynamic_per_ip_overrides: Default::default(),
            any_dynamic_config: Default::default(),
            serving: Default::default(),
            broker_channels: Default::default(),
            shutdown: watch::channel(false).0,
        });
        broker.client_quotas.follow(broker.metadata.publisher());
        broker.follow_dynamic_configs();
        if caught_up {
            broker.load_groups(started)?;
        }
        Ok(broker)
    }

    /// In a shared quorum, waits until the image has caught up with what the
    /// quorum committed, then does what needs the whole image: removing the
    /// logs of deleted topics, opening the replicas they kept closed, and
    /// loading the groups. Nothing to do on a
    /// node that is its quorum's only voter (`open` did it).
    pub async fn catch_up_metadata(&self) -> anyhow::Result<()> {
        if self.metadata.quorum().is_none() {
            return Ok(());
        }
        let started = Instant::now();
        tracing::info!("waiting for the metadata quorum to catch up");
        // Stray logs are judged against a whole image only.
        anyhow::ensure!(self.metadata.caught_up().await, "the metadata quorum stopped before catching up");
        remove_stray_partitions(self.replicas.log_manager(), &self.metadata.image())?;
        // Replicas refused a directory that held a stray of the same name
        // open now (an update published meanwhile waits).
        let synced = self.metadata.publisher().with_current(|image| self.replicas.sync_unopened(image));
        if let Err(error) = synced {
            tracing::error!(%error, "could not open or delete partition logs");
        }
        self.load_groups(started)
    }

    /// Keeps [`Self::any_dynamic_config`] in step with the published images.
    fn follow_dynamic_configs(&self) {
        let any = Arc::clone(&self.any_dynamic_config);
        let node_id = self.node_id;
        self.metadata.publisher().subscribe(move |update| {
            let set = !crate::config::DynamicConfigs::of(&update.image, node_id).is_empty();
            any.store(set, std::sync::atomic::Ordering::Relaxed);
        });
    }

    /// Whether any dynamic broker config applies to this broker (as of the
    /// last image published).
    pub(crate) fn any_dynamic_config(&self) -> bool {
        self.any_dynamic_config.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until the image shows this broker registered (at the epoch its
    /// registration got) and unfenced, as Kafka's broker does before it
    /// enables request processing: a client's first Metadata answer then
    /// lists this broker and a controller. Before that a client would learn
    /// a cluster without brokers (librdkafka's admin client waits for a
    /// controller until its request times out). Only a node sharing a
    /// metadata quorum registers; a single node has nothing to wait for.
    /// The node serves from now on.
    pub fn mark_serving(&self) {
        self.serving.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the node is ready (`/readyz`): serving, not shutting down,
    /// and a broker sharing a quorum registered and unfenced in its image.
    pub fn readiness(&self) -> Result<(), String> {
        if *self.shutdown.borrow() {
            return Err("shutting down".into());
        }
        if !self.serving.load(std::sync::atomic::Ordering::Acquire) {
            return Err("starting: loading the logs and catching up with the metadata log".into());
        }
        if self.config.is_broker() && self.metadata.quorum().is_some() {
            let image = self.metadata.image();
            let registration = image.brokers.get(&self.node_id);
            let epoch = self.membership.epoch();
            if !registration.is_some_and(|b| !b.fenced && Some(b.broker_epoch) == epoch) {
                return Err("fenced by the controller".into());
            }
        }
        Ok(())
    }

    pub async fn wait_until_unfenced(&self) {
        if self.metadata.quorum().is_none() {
            return;
        }
        let started = Instant::now();
        loop {
            let image = self.metadata.image();
            let registered = image.brokers.get(&self.node_id);
            let epoch = self.membership.epoch();
            if registered.is_some_and(|b| !b.fenced && Some(b.broker_epoch) == epoch) {
                tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "unfenced by the controller");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Loads the coordinators' topics: the groups, and the transactional
    /// ids (whose prepared transactions' markers are then written again).
    fn load_groups(&self, started: Instant) -> anyhow::Result<()> {
        let image = self.metadata.image();
        let partitions = image.topic(OFFSETS_TOPIC).map(|t| t.partitions.len());
        let records = self
            .groups
            .load(&self.offsets_log, partitions, coordinator_time())
            .map_err(|e| anyhow::anyhow!("loading {OFFSETS_TOPIC}: {e}"))?;
        tracing::info!(records, elapsed_ms = started.elapsed().as_millis() as u64, "groups loaded");
        let partitions = image.topic(TRANSACTION_STATE_TOPIC).map(|t| t.partitions.len());
        let prepared = self
            .txns
            .load(&self.txn_log, partitions)
            .map_err(|e| anyhow::anyhow!("loading {TRANSACTION_STATE_TOPIC}: {e}"))?;
        *self.markers_at_load.lock().unwrap_or_else(|e| e.into_inner()) = prepared;
        Ok(())
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Asks every loop to stop; `run` then finishes the shutdown.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// The live brokers on this node's first advertised listener (the
    /// inter-broker one on a controller-only node): for decisions that
    /// need ids, not a client's endpoints.
    pub fn live_brokers(&self) -> Vec<LiveBroker> {
        // A controller-only node is no broker: only the registered ones, on
        // the inter-broker listener.
        let listener_name = if self.config.is_broker() {
            self.config.advertised_listener().name.as_str()
        } else {
            self.config.inter_broker_listener_name.as_str()
        };
        self.live_brokers_on(listener_name)
    }

    /// The brokers clients are told of (Metadata, DescribeCluster): every
    /// registered broker that is not fenced, on its endpoint of the
    /// listener the client came in on, as Kafka answers (on a lone node,
    /// this one always).
    pub fn live_brokers_on(&self, listener_name: &str) -> Vec<LiveBroker> {
        // A node that is its quorum's only voter is the whole cluster; in a
        // shared quorum this broker is listed as the others are, from the
        // image, so not while it is fenced (starting, or cut off from the
        // controller), as Kafka's metadata cache lists its own broker.
        let single = self.metadata.quorum().is_none();
        let this = (single && self.config.is_broker()).then(|| {
            let listener = self.config.advertised_listeners.iter().find(|l| l.name == listener_name);
            let listener = listener.unwrap_or_else(|| self.config.advertised_listener());
            LiveBroker {
                id: self.node_id,
                host: listener.host.clone(),
                port: listener.port,
                rack: self.config.raw.get("broker.rack").cloned(),
            }
        });
        let image = self.metadata.image();
        let listed_apart = |id: i32| single && id == self.node_id;
        let others = image.brokers.values().filter(|b| !b.fenced && !listed_apart(b.broker_id));
        let others = others.filter_map(|b| {
            let endpoint = b.end_points.iter().find(|e| e.name == listener_name)?;
            Some(LiveBroker { id: b.broker_id, host: endpoint.host.clone(), port: endpoint.port, rack: b.rack.clone() })
        });
        let mut brokers: Vec<LiveBroker> = this.into_iter().chain(others).collect();
        brokers.sort_by_key(|b| b.id);
        brokers
    }

    /// The leader clients are told of for `partition`: the image's in a
    /// shared quorum; on a node that is its quorum's only voter, this one
    /// (it hosts every partition, whatever node id a log it imported names).
    pub fn partition_leader(&self, partition: &crate::metadata::PartitionImage) -> i32 {
        if self.metadata.quorum().is_some() {
            partition.leader
        } else {
            self.node_id
        }
    }

    /// The replicas of `partition` on brokers that are not live (not
    /// registered, or fenced) or in a log directory their broker no longer
    /// lists online, as Metadata's OfflineReplicas lists them (Kafka's
    /// `isReplicaOffline`); none on a node that is its quorum's only voter.
    pub fn offline_replicas(&self, image: &MetadataImage, partition: &crate::metadata::PartitionImage) -> Vec<i32> {
        if self.metadata.quorum().is_none() {
            return Vec::new();
        }
        let online = |id: &i32| {
            image.brokers.get(id).is_some_and(|b| {
                let directory = partition.directory_of(*id);
                !b.fenced && directory.is_none_or(|d| krabka_metadata::directory_id::is_online(d, &b.log_dirs))
            })
        };
        partition.replicas.iter().copied().filter(|id| !online(id)).collect()
    }

    /// The broker coordinating `group_id` (Kafka's group coordinator is
    /// the leader of the group's `__consumer_offsets` partition): this one
    /// on a node that is its quorum's only voter; None while that partition
    /// has no live leader (or the topic does not exist yet). Named by its
    /// endpoint of `listener_name`.
    pub fn group_coordinator(&self, group_id: &str, listener_name: &str) -> Option<LiveBroker> {
        self.coordinator_on(OFFSETS_TOPIC, self.groups.partition_for(group_id), listener_name)
    }

    /// The live leader of a coordinator's topic partition: that
    /// coordinator's broker (None while it has no live leader).
    pub fn coordinator_on(&self, topic: &str, partition: usize, listener_name: &str) -> Option<LiveBroker> {
        let image = self.metadata.image();
        let state = image.topic(topic)?.partitions.get(partition)?.clone();
        let leader = self.partition_leader(&state);
        self.live_brokers_on(listener_name).into_iter().find(|b| b.id == leader)
    }

    /// Whether this broker coordinates `group_id`: it leads the group's
    /// `__consumer_offsets` partition (always, on a node that is its
    /// quorum's only voter). Group requests elsewhere answer NOT_COORDINATOR.
    pub fn coordinates(&self, group_id: &str) -> bool {
        // A node that came to lead the partition loads it first.
        self.metadata.quorum().is_none()
            || self.groups.follow_leadership(&self.group_host(), self.groups.partition_for(group_id))
    }

    /// `body` to broker `id` at `version`, on a connection kept for
    /// `purpose` (markers, verification), each exchange within `timeout`.
    pub async fn call_broker<M: krabka_protocol::Message, R: krabka_protocol::Message>(
        &self,
        (id, purpose): (i32, &'static str),
        timeout: std::time::Duration,
        request: (krabka_protocol::ApiKey, i16),
        body: &M,
    ) -> Result<R, String> {
        let connect = || self.connect_to_broker(id, timeout, purpose);
        self.broker_channels.call((id, purpose), connect, request, body).await
    }

    /// A connection to broker `id`'s inter-broker listener, as the image
    /// lists it (its first listener if it has none of that name).
    pub async fn connect_to_broker(
        &self,
        id: i32,
        timeout: std::time::Duration,
        purpose: &str,
    ) -> Result<crate::quorum::Channel, String> {
        let image = self.metadata.image();
        let registration = image.brokers.get(&id).ok_or("the broker is not registered")?;
        let listener = &self.config.inter_broker_listener_name;
        let endpoint = registration
            .end_points
            .iter()
            .find(|e| &e.name == listener)
            .or_else(|| registration.end_points.first())
            .ok_or("the broker registered no listener")?;
        let client_id = format!("broker-{}-{purpose}", self.node_id);
        let mut channel = crate::quorum::Channel::connect(&endpoint.host, endpoint.port, timeout, client_id).await?;
        // A TLS endpoint (SSL 1, SASL_SSL 3): as a client of this broker's
        // own listener of that name (its truststore and certificate).
        if matches!(endpoint.security_protocol, 1 | 3) {
            let own = self.config.security.client_listener(&endpoint.name).and_then(|l| l.tls.as_ref());
            let tls = own.ok_or_else(|| format!("listener {} is TLS here only on the peer", endpoint.name))?;
            channel = channel.start_tls(tls.client.get(), &endpoint.host).await?;
        }
        // A SASL endpoint (SASL_PLAINTEXT 2, SASL_SSL 3, as registered):
        // log in as the broker's own user.
        let sasl = matches!(endpoint.security_protocol, 2 | 3);
        if let Some(login) = self.config.security.inter_broker_login.as_ref().filter(|_| sasl) {
            channel.authenticate(login.mechanism, &login.username, &login.password).await?;
        }
        Ok(channel)
    }

    /// The controller clients are told of: the active controller when it
    /// is a live broker (a combined node), else this broker.
    pub fn controller_id(&self) -> i32 {
        let leader = self.metadata.quorum_view(self.node_id).leader_id;
        leader.filter(|&id| self.live_brokers().iter().any(|b| b.id == id)).unwrap_or(self.node_id)
    }

    /// What a group coordinator call may use of the broker: the offsets
    /// topic's log, the current metadata image, and the time now.
    pub fn group_host(&self) -> GroupHost<'_> {
        GroupHost { log: &self.offsets_log, image: self.metadata.image(), now: coordinator_time() }
    }

    /// `close_storage` off the runtime's workers: it joins the raft and
    /// loader threads and fsyncs every log, which must not hold up (or wait
    /// on) the tasks a worker runs.
    pub async fn close(self: &Arc<Self>) -> anyhow::Result<()> {
        let broker = Arc::clone(self);
        tokio::task::spawn_blocking(move || broker.close_storage()).await.context("the closing thread")?
    }

    /// Flushes and seals every log, then marks the clean shutdown.
    pub fn close_storage(&self) -> anyhow::Result<()> {
        // The metadata first: a loader still applying images could open a
        // partition log after the logs were sealed.
        self.metadata.close().context("closing the metadata log")?;
        self.replicas.shutdown().context("closing partition logs")?;
        // The epoch goes in the marker: registering with it next time tells
        // the controller nothing unflushed was lost (KIP-966).
        let epoch = self.membership.epoch().unwrap_or(-1);
        self.replicas.log_manager().mark_clean_shutdown(epoch).context("writing the clean-shutdown marker")?;
        tracing::info!("clean shutdown complete");
        Ok(())
    }
}

/// A broker as Metadata and DescribeCluster list it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBroker {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// What the log directories' `meta.properties` say at start.
struct StartingDirs {
    /// The node's identity (cluster and node id), as every readable
    /// directory records it.
    meta: MetaProperties,
    /// Each readable directory with its `directory.id`, in `log.dirs` order.
    ids: Vec<(std::path::PathBuf, krabka_protocol::Uuid)>,
    /// Directories whose `meta.properties` could not be read or written:
    /// they start offline (Kafka's `errorLogDirs`).
    unreadable: Vec<std::path::PathBuf>,
}

/// Reads every log directory's `meta.properties`. One that cannot be read
/// starts offline, unless it holds the metadata log; an empty one (added
/// since formatting, or a replaced disk) gets its own `directory.id`, as
/// Kafka's broker writes one at start. Every readable one must name the
/// same cluster and this node.
fn read_log_dirs(config: &BrokerConfig) -> anyhow::Result<StartingDirs> {
    let first_dir = config.log_dirs.first().context("log.dirs is empty")?;
    let mut read = Vec::new();
    let mut unreadable = Vec::new();
    for dir in &config.log_dirs {
        match MetaProperties::read(dir) {
            Ok(meta) => read.push((dir, meta)),
            Err(e) if *dir == config.metadata_log_dir => {
                return Err(e).with_context(|| format!("reading the metadata log's directory {}", dir.display()))
            }
            Err(e) => {
                tracing::error!(dir = %dir.display(), error = %e, "log directory offline: its meta.properties cannot be read");
                unreadable.push(dir.clone());
            }
        }
    }
    let metadata_dir_formatted = read.iter().any(|(dir, meta)| **dir == config.metadata_log_dir && meta.is_some());
    let in_log_dirs = config.log_dirs.contains(&config.metadata_log_dir);
    let meta = read.iter().find_map(|(_, meta)| meta.clone()).filter(|_| metadata_dir_formatted || !in_log_dirs);
    let meta = meta.with_context(|| {
        format!("{} is not formatted: run `krabka-format format -c <server.properties>` first", first_dir.display())
    })?;
    anyhow::ensure!(
        meta.node_id == config.node_id,
        "{} was formatted for node {} but node.id is {}",
        first_dir.display(),
        meta.node_id,
        config.node_id
    );
    let mut ids = Vec::new();
    for (dir, found) in read {
        let Some(found) = found else {
            let formatted = krabka_format::format_log_dir(dir, &meta.cluster_id, meta.node_id)
                .and_then(|_| MetaProperties::read(dir));
            match formatted {
                Ok(Some(formatted)) => ids.push((dir.clone(), formatted.directory_id)),
                written => {
                    let error =
                        written.err().map(|e| e.to_string()).unwrap_or_else(|| "not found after writing".into());
                    tracing::error!(dir = %dir.display(), %error, "log directory offline: its meta.properties cannot be written");
                    unreadable.push(dir.clone());
                }
            }
            continue;
        };
        anyhow::ensure!(found.cluster_id == meta.cluster_id, "{} belongs to another cluster", dir.display());
        anyhow::ensure!(found.node_id == meta.node_id, "{} was formatted for another node", dir.display());
        ids.push((dir.clone(), found.directory_id));
    }
    Ok(StartingDirs { meta, ids, unreadable })
}

/// Removes the partition logs `image` does not have (a topic deleted while
/// the broker was down).
fn remove_stray_partitions(log_manager: &LogManager, image: &MetadataImage) -> anyhow::Result<()> {
    for stray in log_manager.stray_partitions(|tp, id| {
        image
            .topic(&tp.topic)
            .is_some_and(|t| (tp.partition as usize) < t.partitions.len() && id.is_none_or(|id| *id == t.id))
    }) {
        tracing::info!(dir = %stray.display(), "removing the log of a deleted topic");
        log_manager.delete_partition_dir(&stray)?;
    }
    Ok(())
}

/// Kafka's `group.*` and `offsets.*` settings.
fn group_config(config: &BrokerConfig) -> GroupConfig {
    let raw =
        |key: &str, default: i64| -> i64 { config.raw.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(default) };
    GroupConfig {
        classic: ClassicConfig {
            min_session_timeout_ms: raw("group.min.session.timeout.ms", 6_000) as i32,
            max_session_timeout_ms: raw("group.max.session.timeout.ms", 1_800_000) as i32,
            initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            max_size: raw("group.max.size", i64::from(i32::MAX)).max(1) as usize,
        },
        consumer: ConsumerConfig {
            session_timeout_ms: raw("group.consumer.session.timeout.ms", 45_000),
            heartbeat_interval_ms: raw("group.consumer.heartbeat.interval.ms", 5_000) as i32,
            max_size: raw("group.consumer.max.size", i64::from(i32::MAX)).max(1) as usize,
        },
        offsets_partitions: config.offsets_topic_num_partitions.max(1) as usize,
        offsets_retention_ms: raw("offsets.retention.minutes", 10_080).saturating_mul(60_000),
        offset_metadata_max_bytes: raw("offset.metadata.max.bytes", 4_096).max(0) as usize,
    }
}
