//! The broker's server: the listener's accept loop with its connection
//! limit, background log housekeeping and the group clock, and graceful
//! shutdown (stop accepting, let in-flight requests finish, flush,
//! checkpoint, mark the clean shutdown).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::config::dynamic::DynamicConfigs;
use crate::config::oauthbearer::BearerValidator;
use crate::config::security::ClientListener;
use crate::connection;
use crate::observability::PartitionLogState;
use crate::replica::ReplicaManager;

/// One of the `max.connections` and of its peer's `max.connections.per.ip`:
/// counted while its connection task lives, however that task ends (a
/// panicking handler included), so a bug cannot leak slots until the
/// broker refuses every client.
struct ConnectionSlot(Arc<Broker>, IpAddr);

impl ConnectionSlot {
    /// A slot for a connection from `ip`, or which limit refuses it.
    fn take(broker: Arc<Broker>, ip: IpAddr) -> Result<Self, (&'static str, usize)> {
        // Both limits may change at runtime (dynamic broker configs).
        let config = &broker.config;
        let image = broker.any_dynamic_config().then(|| broker.metadata.image());
        let dynamic =
            image.as_deref().map_or(DynamicConfigs::none(), |image| DynamicConfigs::of(image, broker.node_id));
        let now = |key: &str, file: usize| {
            if dynamic.is_empty() {
                return file;
            }
            config.value_under(&dynamic, key).and_then(|v| v.parse().ok()).unwrap_or(file)
        };
        let limit = now("max.connections", config.max_connections);
        if broker.open_connections.load(Ordering::Relaxed) >= limit {
            return Err(("max.connections", limit));
        }
        let dynamic_overrides = if dynamic.is_empty() { None } else { dynamic_per_ip_overrides(&broker, &dynamic) };
        let overrides = dynamic_overrides.as_deref().unwrap_or(&config.max_connections_per_ip_overrides);
        let per_ip = match overrides.get(&ip) {
            Some(count) => *count,
            None => now("max.connections.per.ip", config.max_connections_per_ip),
        };
        {
            let mut counts = broker.connections_per_ip.lock().unwrap_or_else(|e| e.into_inner());
            let count = counts.entry(ip).or_insert(0);
            if *count >= per_ip {
                if *count == 0 {
                    counts.remove(&ip);
                }
                return Err(("max.connections.per.ip", per_ip));
            }
            *count += 1;
        }
        broker.open_connections.fetch_add(1, Ordering::Relaxed);
        broker.metrics.connection_opened();
        Ok(ConnectionSlot(broker, ip))
    }
}

/// The per-address overrides a dynamic config sets (None: server.properties'
/// apply), parsed once per value.
fn dynamic_per_ip_overrides(broker: &Broker, dynamic: &DynamicConfigs) -> Option<Arc<BTreeMap<IpAddr, usize>>> {
    const KEY: &str = "max.connections.per.ip.overrides";
    let set_dynamically = dynamic.own.contains_key(KEY) || dynamic.cluster.contains_key(KEY);
    if !set_dynamically {
        return None;
    }
    broker.dynamic_per_ip_overrides.parsed(broker.config.value_under(dynamic, KEY)?)
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.0.connections_per_ip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.1) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.1);
            }
        }
        drop(counts);
        self.0.open_connections.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.connection_closed();
    }
}

/// How long shutdown waits for in-flight requests before closing anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

impl Broker {
    /// Serves the client `listeners` until shutdown, then closes the
    /// storage cleanly.
    /// Says, in the log and the metrics, how fetches over TLS reach the
    /// socket: encrypted in user space, whether or not the kernel offers
    /// kTLS (krabka does not hand TLS sessions to the kernel).
    fn report_tls_fetch_path(&self) {
        let offered = crate::transport::kernel_offers_ktls();
        self.metrics.tls_fetch_path(offered, false);
        tracing::info!(
            ktls_offered = offered,
            "fetches over TLS are read from the segment and encrypted in user space"
        );
    }

    pub async fn run(self: &Arc<Self>, listeners: Vec<(TcpListener, Arc<ClientListener>)>) -> anyhow::Result<()> {
        let housekeeping = tokio::spawn(housekeeping_loop(self.clone()));
        let group_clock = tokio::spawn(group_clock_loop(self.clone()));
        let transaction_clock = tokio::spawn(crate::transactions::transaction_clock_loop(self.clone()));
        // Replication: followers fetch, leaders send ISR changes.
        let mut replication = vec![
            tokio::spawn(crate::replica_fetcher::run_replica_fetchers(self.clone())),
            tokio::spawn(crate::alter_partition::send_isr_changes(self.clone())),
            tokio::spawn(crate::alter_partition::shrink_lagging_isrs(self.clone())),
            tokio::spawn(crate::log_dir_events::take_failed_dirs_offline(self.clone())),
            tokio::spawn(crate::log_dir_events::send_dir_assignments(self.clone())),
        ];
        replication.extend(crate::log_dir_events::movers(self).map(|mover| tokio::spawn(mover)));
        // OAUTHBEARER listeners whose JWKS is fetched from an endpoint.
        for listener in &listeners {
            let validator = listener.1.sasl.as_ref().and_then(|sasl| sasl.bearer_validator.as_ref());
            if let Some(BearerValidator::Fetched(jwks)) = validator {
                tokio::spawn(crate::jwks_endpoint::keep_fresh(jwks.clone(), self.shutdown_signal()));
            }
        }
        if listeners.iter().any(|(_, listener)| listener.tls.is_some()) {
            self.report_tls_fetch_path();
        }
        let mut connections = JoinSet::new();
        let mut shutdown = self.shutdown_signal();
        // One accept loop per listener, all feeding this one, which holds
        // the connection limit for them all.
        let (accepted_tx, mut accepted) = tokio::sync::mpsc::channel(64);
        let acceptors: Vec<_> = listeners
            .into_iter()
            .map(|(socket, listener)| tokio::spawn(accept_loop(self.clone(), socket, listener, accepted_tx.clone())))
            .collect();
        drop(accepted_tx);
        loop {
            tokio::select! {
                Some((stream, peer, listener)) = accepted.recv() => {
                    let now = crate::clock::now_ms();
                    let hold_ms = self.client_quotas.record_connection(&self.metadata.image(), peer.ip(), now);
                    if hold_ms > 0 {
                        // Over its address's connection_creation_rate: closed
                        // after the throttle time, as Kafka's acceptor does,
                        // so a reconnecting client is slowed down too.
                        self.metrics.connection_rejected();
                        tracing::debug!(%peer, hold_ms, "connection_creation_rate exceeded");
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                            drop(stream);
                        });
                        continue;
                    }
                    let slot = match ConnectionSlot::take(self.clone(), peer.ip()) {
                        Ok(slot) => slot,
                        Err((key, limit)) => {
                            self.metrics.connection_rejected();
                            tracing::warn!(%peer, limit, "{key} reached");
                            drop(stream);
                            continue;
                        }
                    };
                    connections.spawn(async move {
                        // The slot is given back when the task ends, even by a panic.
                        let broker = slot.0.clone();
                        connection::serve(stream, peer, broker, listener).await;
                        drop(slot);
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        for acceptor in acceptors {
            acceptor.abort();
        }
        // Fenced first, so clients are sent elsewhere while this one drains.
        crate::lifecycle::controlled_shutdown(self).await;
        // A parked JoinGroup would hold its connection for its whole
        // rebalance timeout: answered now, its member joins elsewhere.
        self.groups.unload_all();
        tracing::info!(open = connections.len(), "shutting down: finishing in-flight requests");
        let drained =
            tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("connections still open after the grace period; closing them");
            connections.abort_all();
        }
        housekeeping.abort();
        group_clock.abort();
        transaction_clock.abort();
        for task in replication {
            task.abort();
        }
        self.close().await
    }
}

/// The cluster as this controller's image has it, for KafkaController's gauges.
fn controller_counts(broker: &Broker) -> crate::observability::ControllerCounts {
    let image = broker.metadata.image();
    let partitions = image.topics.values().flat_map(|t| &t.partitions);
    let (all, offline) = partitions.fold((0, 0), |(all, offline), p| (all + 1, offline + i64::from(p.leader < 0)));
    let fenced = image.brokers.values().filter(|b| b.fenced).count() as i64;
    crate::observability::ControllerCounts {
        active: broker.metadata.is_active_controller(),
        topics: image.topics.len() as i64,
        partitions: all,
        offline_partitions: offline,
        active_brokers: image.brokers.len() as i64 - fenced,
        fenced_brokers: fenced,
    }
}

/// `max.connection.creation.rate` now (it may change at runtime as a
/// dynamic broker config); None: unbounded.
fn broker_creation_rate(broker: &Broker) -> Option<u32> {
    if !broker.any_dynamic_config() {
        return broker.config.max_connection_creation_rate;
    }
    let image = broker.metadata.image();
    let dynamic = DynamicConfigs::of(&image, broker.node_id);
    if dynamic.is_empty() {
        return broker.config.max_connection_creation_rate;
    }
    let value = broker.config.value_under(&dynamic, "max.connection.creation.rate")?;
    value.parse::<u32>().ok().filter(|&rate| rate < i32::MAX as u32)
}

/// Accepts `socket`'s connections for the server loop, tagged with their
/// listener.
async fn accept_loop(
    broker: Arc<Broker>,
    socket: TcpListener,
    listener: Arc<ClientListener>,
    accepted: tokio::sync::mpsc::Sender<(TcpStream, SocketAddr, Arc<ClientListener>)>,
) {
    // The inter-broker listener is not held to the broker-wide rate, so
    // that replication keeps its connections under a flood of clients.
    let inter_broker = listener.name == broker.config.inter_broker_listener_name;
    loop {
        match socket.accept().await {
            Ok((stream, peer)) => {
                let broker_rate = if inter_broker { None } else { broker_creation_rate(&broker) };
                let rates = (listener.max_connection_creation_rate, broker_rate);
                let paced = rates.0.is_some() || rates.1.is_some();
                // Over a creation rate: this connection waits (it is not
                // refused), and so does every one behind it (Kafka's acceptor).
                let wait_ms = if paced {
                    broker.client_quotas.record_accept(&listener.name, rates, crate::clock::now_ms())
                } else {
                    0
                };
                if wait_ms > 0 {
                    broker.metrics.connection_throttled();
                    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                }
                if accepted.send((stream, peer, listener.clone())).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, listener = %listener.name, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Retention, flush, compaction and checkpoints on Kafka's schedules.
async fn housekeeping_loop(broker: Arc<Broker>) {
    let config = &broker.config;
    let tick = Duration::from_millis(1000);
    let retention_every = Duration::from_millis(config.log_retention_check_interval_ms.max(1) as u64);
    let cleaner_every = Duration::from_millis(config.log_cleaner_backoff_ms.max(1) as u64);
    let producer_expiry_every = Duration::from_millis(config.producer_id_expiration_check_interval_ms.max(1) as u64);
    let checkpoint_every =
        Duration::from_millis(config.number("log.flush.offset.checkpoint.interval.ms", 60_000).max(1) as u64);
    // Gauges only need to be as fresh as a Prometheus scrape.
    let gauges_every = Duration::from_secs(5);
    let (mut last_retention, mut last_clean, mut last_checkpoint) = (Instant::now(), Instant::now(), Instant::now());
    let mut last_producer_expiry = Instant::now();
    let mut last_gauges = Instant::now() - gauges_every;
    loop {
        tokio::time::sleep(tick).await;
        let retention = last_retention.elapsed() >= retention_every;
        let clean = config.log_cleaner_enable && last_clean.elapsed() >= cleaner_every;
        let checkpoint = last_checkpoint.elapsed() >= checkpoint_every;
        let expire_producers = last_producer_expiry.elapsed() >= producer_expiry_every;
        let gauges = last_gauges.elapsed() >= gauges_every;
        let worker = broker.clone();
        // Log housekeeping does file I/O: keep it off the request threads.
        let done = tokio::task::spawn_blocking(move || {
            worker.replicas.housekeeping(retention, clean, expire_producers);
            if gauges {
                worker.metrics.publish_partition_states(partition_log_states(&worker.replicas));
                worker.metrics.publish_replica_counts(worker.replicas.replica_counts());
                if worker.config.is_controller() {
                    worker.metrics.publish_controller_counts(controller_counts(&worker));
                }
            }
            if checkpoint {
                worker.replicas.write_checkpoints();
            }
        })
        .await;
        if done.is_err() {
            tracing::error!("housekeeping task panicked");
        }
        let now = Instant::now();
        if retention {
            last_retention = now;
        }
        if clean {
            last_clean = now;
        }
        if checkpoint {
            last_checkpoint = now;
        }
        if expire_producers {
            last_producer_expiry = now;
        }
        if gauges {
            last_gauges = now;
        }
    }
}

/// The size and offsets of every hosted partition's log, for the metrics.
fn partition_log_states(replicas: &ReplicaManager) -> Vec<PartitionLogState> {
    let partitions = replicas.all_partitions();
    let mut states = Vec::with_capacity(partitions.len());
    for partition in partitions {
        let log = partition.lock_log();
        states.push(PartitionLogState {
            topic: partition.topic.clone(),
            partition: partition.index,
            size_bytes: log.size_bytes(),
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
        });
    }
    states
}

/// Group sessions and rebalance deadlines, and offset expiry.
async fn group_clock_loop(broker: Arc<Broker>) {
    let tick = Duration::from_millis(100);
    let expire_every = Duration::from_millis(
        broker.config.raw.get("offsets.retention.check.interval.ms").and_then(|v| v.parse().ok()).unwrap_or(600_000u64),
    );
    let mut last_expiry = Instant::now();
    loop {
        tokio::time::sleep(tick).await;
        broker.groups.tick(&broker.group_host());
        if last_expiry.elapsed() >= expire_every {
            last_expiry = Instant::now();
            let worker = broker.clone();
            let _ = tokio::task::spawn_blocking(move || {
                worker.groups.expire_offsets(&worker.group_host());
                crate::memory::release_free_memory();
            })
            .await;
        }
    }
}
