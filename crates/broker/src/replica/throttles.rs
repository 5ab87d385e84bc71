//! This broker's replication throttles (KIP-73): the leader-side and
//! follower-side byte rates a reassignment's `--throttle` bounds, and the
//! rate of moves between its log directories that
//! `--replica-alter-log-dirs-throttle` bounds (KIP-113), read from the
//! dynamic broker configs, and which hosted replicas the topics'
//! throttled-replica lists name. The rules (the sampled rate, the lists)
//! are krabka-replication's `throttle`.

use std::sync::Mutex;

use krabka_replication::{ReplicationQuota, Throttled};

use super::partition::Partition;
use crate::config::{BrokerConfig, DynamicConfigs};
use crate::metadata::TopicImage;

/// The per-broker rate keys (bytes per second), as Kafka names them.
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
pub const ALTER_LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";
/// The topic configs naming the throttled replicas (`partition:broker`, or `*`).
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

pub struct ReplicationThrottles {
    /// What this broker, as leader, sends followers of throttled partitions.
    pub leader: Mutex<ReplicationQuota>,
    /// What this broker, as follower, fetches of throttled partitions.
    pub follower: Mutex<ReplicationQuota>,
    /// What moves between this broker's log directories copy (every move
    /// is held to it, as Kafka's alter-log-dirs quota).
    pub alter_log_dirs: Mutex<ReplicationQuota>,
}

impl ReplicationThrottles {
    /// Unbounded, over `replication.quota.window.num` windows of
    /// `replication.quota.window.size.seconds`.
    pub fn new(config: &BrokerConfig) -> Self {
        let windows = config.number("replication.quota.window.num", 11).max(1) as usize;
        let window_ms = config.number("replication.quota.window.size.seconds", 1).max(1) * 1_000;
        let quota = || Mutex::new(ReplicationQuota::new(windows, window_ms));
        ReplicationThrottles { leader: quota(), follower: quota(), alter_log_dirs: quota() }
    }

    /// Takes the rates the dynamic configs give this broker (its own over
    /// the cluster's over server.properties; unset or Long.MAX_VALUE: none).
    pub fn set_bounds(&self, config: &BrokerConfig, dynamic: &DynamicConfigs) {
        let bound = |key: &str| {
            let value = dynamic.own.get(key).or_else(|| dynamic.cluster.get(key)).or_else(|| config.raw.get(key));
            value.and_then(|v| v.trim().parse::<i64>().ok()).filter(|&rate| (0..i64::MAX).contains(&rate))
        };
        let quotas = [(&self.leader, LEADER_RATE), (&self.follower, FOLLOWER_RATE)];
        for (quota, key) in quotas.into_iter().chain([(&self.alter_log_dirs, ALTER_LOG_DIRS_RATE)]) {
            let bound = bound(key).map(|rate| rate as u64);
            let mut quota = quota.lock().unwrap_or_else(|e| e.into_inner());
            if quota.bound() != bound {
                tracing::info!(key, ?bound, "replication throttle");
                quota.set_bound(bound);
            }
        }
    }
}

/// Marks each hosted replica of `topic` throttled as its lists say for
/// broker `node_id`.
pub fn mark_throttled<'a>(topic: &TopicImage, node_id: i32, hosted: impl Iterator<Item = &'a Partition>) {
    let list = |key: &str| Throttled::parse(topic.configs.get(key).map(String::as_str), node_id);
    let (leader, follower) = (list(LEADER_REPLICAS), list(FOLLOWER_REPLICAS));
    for partition in hosted {
        partition.set_throttled(leader.contains(partition.index), follower.contains(partition.index));
    }
}
