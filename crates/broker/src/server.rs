//! The broker: start-up (log dirs, metadata replay, partition logs), the
//! listener's accept loop with its connection limit, background log
//! housekeeping, and graceful shutdown (stop accepting, let in-flight
//! requests finish, flush, checkpoint, mark the clean shutdown).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use krabka_format::MetaProperties;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::BrokerConfig;
use crate::connection;
use crate::group::classic::ClassicConfig;
use crate::group::consumer::ConsumerConfig;
use crate::group::{GroupConfig, GroupCoordinator, OFFSETS_TOPIC};
use crate::log_manager::LogManager;
use crate::metadata::store::now_ms;
use crate::metadata::MetadataStore;
use crate::observability::Metrics;
use crate::replica_manager::ReplicaManager;

pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub cluster_id: String,
    pub node_id: i32,
    pub metadata: MetadataStore,
    pub replicas: ReplicaManager,
    pub metrics: Arc<Metrics>,
    pub fetch_sessions: crate::handlers::fetch_session::FetchSessionCache,
    pub groups: GroupCoordinator,
    open_connections: AtomicUsize,
    shutdown: watch::Sender<bool>,
}

/// One of the `max.connections`: counted while its connection task lives,
/// however that task ends (a panicking handler included), so a bug cannot
/// leak slots until the broker refuses every client.
struct ConnectionSlot(Arc<Broker>);

impl ConnectionSlot {
    fn take(broker: Arc<Broker>) -> Self {
        broker.open_connections.fetch_add(1, Ordering::Relaxed);
        broker.metrics.connection_opened();
        ConnectionSlot(broker)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.connection_closed();
    }
}

/// How long shutdown waits for in-flight requests before closing anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

impl Broker {
    /// Opens the storage: checks `meta.properties`, replays the metadata
    /// log, opens every partition log.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        let started = Instant::now();
        let first_dir = config.log_dirs.first().context("log.dirs is empty")?;
        let meta = MetaProperties::read(first_dir)?.with_context(|| {
            format!("{} is not formatted: run `krabka-format format -c <server.properties>` first", first_dir.display())
        })?;
        if meta.node_id != config.node_id {
            anyhow::bail!(
                "{} was formatted for node {} but node.id is {}",
                first_dir.display(),
                meta.node_id,
                config.node_id
            );
        }
        for dir in &config.log_dirs[1..] {
            if let Some(other) = MetaProperties::read(dir)? {
                anyhow::ensure!(other.cluster_id == meta.cluster_id, "{} belongs to another cluster", dir.display());
            }
        }
        let config = Arc::new(config);
        let log_manager = LogManager::open(&config.log_dirs).context("opening log directories")?;
        log_manager.remove_leftover_deletions();
        let snapshot_every_bytes = config
            .raw
            .get("metadata.log.max.record.bytes.between.snapshots")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(20 * 1024 * 1024);
        let metadata_clean = log_manager.was_clean_shutdown(&config.metadata_log_dir);
        let metadata = MetadataStore::open(
            &config.metadata_log_dir,
            config.node_id,
            snapshot_every_bytes,
            metadata_clean,
            now_ms(),
        )
        .context("opening the metadata log")?;
        let image = metadata.image();
        for stray in log_manager.stray_partitions(|tp, id| {
            image
                .topic(&tp.topic)
                .is_some_and(|t| (tp.partition as usize) < t.partitions.len() && id.is_none_or(|id| *id == t.id))
        }) {
            tracing::info!(dir = %stray.display(), "removing the log of a deleted topic");
            log_manager.delete_partition_dir(&stray)?;
        }
        let replicas = ReplicaManager::new(config.clone(), log_manager);
        replicas.sync_with_image(&image).context("opening partition logs")?;
        tracing::info!(
            partitions = replicas.all_partitions().len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "storage loaded"
        );
        let groups = GroupCoordinator::new(
            group_config(&config),
            image
                .topic(OFFSETS_TOPIC)
                .map_or(config.offsets_topic_num_partitions.max(1) as usize, |t| t.partitions.len()),
        );
        let broker = Arc::new(Broker {
            groups,
            node_id: config.node_id,
            cluster_id: meta.cluster_id,
            config,
            metadata,
            replicas,
            metrics: Arc::new(Metrics::new()),
            fetch_sessions: Default::default(),
            open_connections: AtomicUsize::new(0),
            shutdown: watch::channel(false).0,
        });
        let records = broker.groups.load(&broker).map_err(|e| anyhow::anyhow!("loading {OFFSETS_TOPIC}: {e}"))?;
        tracing::info!(records, elapsed_ms = started.elapsed().as_millis() as u64, "groups loaded");
        Ok(broker)
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Asks every loop to stop; `run` then finishes the shutdown.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Serves `listener` until shutdown, then closes the storage cleanly.
    pub async fn run(self: &Arc<Self>, listener: TcpListener) -> anyhow::Result<()> {
        let housekeeping = tokio::spawn(housekeeping_loop(self.clone()));
        let group_clock = tokio::spawn(group_clock_loop(self.clone()));
        let mut connections = JoinSet::new();
        let mut shutdown = self.shutdown_signal();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(pair) => pair,
                        Err(e) => {
                            // EMFILE and friends: back off instead of spinning.
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    if self.open_connections.load(Ordering::Relaxed) >= self.config.max_connections {
                        self.metrics.connection_rejected();
                        tracing::warn!(%peer, limit = self.config.max_connections, "max.connections reached");
                        drop(stream);
                        continue;
                    }
                    let slot = ConnectionSlot::take(self.clone());
                    connections.spawn(async move {
                        // The slot is given back when the task ends, even by a panic.
                        let broker = slot.0.clone();
                        connection::serve(stream, peer, broker).await;
                        drop(slot);
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        drop(listener);
        tracing::info!(open = connections.len(), "shutting down: finishing in-flight requests");
        let drained =
            tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("connections still open after the grace period; closing them");
            connections.abort_all();
        }
        housekeeping.abort();
        group_clock.abort();
        self.close_storage()
    }

    fn close_storage(&self) -> anyhow::Result<()> {
        self.replicas.shutdown().context("closing partition logs")?;
        self.metadata.close().context("closing the metadata log")?;
        self.replicas.log_manager().mark_clean_shutdown().context("writing the clean-shutdown marker")?;
        tracing::info!("clean shutdown complete");
        Ok(())
    }
}

/// Retention, flush, compaction and checkpoints on Kafka's schedules.
async fn housekeeping_loop(broker: Arc<Broker>) {
    let config = &broker.config;
    let tick = Duration::from_millis(1000);
    let retention_every = Duration::from_millis(config.log_retention_check_interval_ms.max(1) as u64);
    let cleaner_every = Duration::from_millis(config.log_cleaner_backoff_ms.max(1) as u64);
    let producer_expiry_every = Duration::from_millis(config.producer_id_expiration_check_interval_ms.max(1) as u64);
    // Kafka's log.flush.offset.checkpoint.interval.ms default.
    let checkpoint_every = Duration::from_secs(60);
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
            for partition in worker.replicas.all_partitions().into_iter().filter(|_| gauges) {
                let log = partition.lock_log();
                worker.metrics.set_partition_state(
                    &partition.topic,
                    partition.index,
                    log.size_bytes(),
                    log.log_start_offset(),
                    log.log_end_offset(),
                );
            }
            if checkpoint {
                if let Err(e) = worker.replicas.write_checkpoints() {
                    tracing::error!(error = %e, "writing checkpoints failed");
                }
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

/// Group sessions and rebalance deadlines, and offset expiry.
async fn group_clock_loop(broker: Arc<Broker>) {
    let tick = Duration::from_millis(100);
    let expire_every = Duration::from_millis(
        broker.config.raw.get("offsets.retention.check.interval.ms").and_then(|v| v.parse().ok()).unwrap_or(600_000u64),
    );
    let mut last_expiry = Instant::now();
    loop {
        tokio::time::sleep(tick).await;
        broker.groups.tick(&broker);
        if last_expiry.elapsed() >= expire_every {
            last_expiry = Instant::now();
            let worker = broker.clone();
            let _ = tokio::task::spawn_blocking(move || worker.groups.expire_offsets(&worker)).await;
        }
    }
}
