//! One hosted partition: its log behind a lock, its leader epoch and high
//! watermark, and the requests parked on it; and what Produce needs of its
//! topic's configs.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, PartitionCheckpoint, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::{ErrorCode, Uuid};

use super::purgatory::{Waiter, WatchList};
use crate::config::topic::{effective_topic_configs, topic_compression};
use crate::config::BrokerConfig;

pub struct Partition {
    pub topic: Arc<str>,
    pub topic_id: Uuid,
    pub index: i32,
    pub log_dir: PathBuf,
    pub(super) log: Mutex<PartitionLog>,
    pub(super) leader_epoch: AtomicI32,
    /// Whether the image names this broker the leader (every partition, on
    /// a single node); a replica whose broker is fenced is led by nobody.
    pub(super) led_here: AtomicBool,
    pub(super) high_watermark: AtomicI64,
    pub(super) watchers: WatchList,
}

impl Partition {
    /// A partition this node hosts, led here when `led_here`: its high
    /// watermark starts at the log end (it is its only replica).
    pub(super) fn hosted(
        topic: &str,
        topic_id: Uuid,
        index: i32,
        log: PartitionLog,
        leader_epoch: i32,
        led_here: bool,
    ) -> Self {
        let log_dir = log.dir().parent().map(PathBuf::from).unwrap_or_default();
        let high_watermark = log.log_end_offset();
        Partition {
            topic: Arc::from(topic),
            topic_id,
            index,
            log_dir,
            log: Mutex::new(log),
            leader_epoch: AtomicI32::new(leader_epoch),
            led_here: AtomicBool::new(led_here),
            high_watermark: AtomicI64::new(high_watermark),
            watchers: WatchList::default(),
        }
    }

    pub fn lock_log(&self) -> MutexGuard<'_, PartitionLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    pub fn is_led_here(&self) -> bool {
        self.led_here.load(Ordering::Acquire)
    }

    /// Follows the image's leadership: leading a new epoch starts it at the
    /// log end (Kafka's makeLeader), so OffsetForLeaderEpoch knows it
    /// before any append; the requests parked here are woken to find out.
    /// Done under the log's lock, which every append holds: an append sees
    /// the leadership before or after the change, never half of it.
    pub(super) fn set_leadership(&self, led_here: bool, leader_epoch: i32) -> Result<(), LogError> {
        let mut log = self.lock_log();
        if led_here && leader_epoch != self.leader_epoch() {
            log.assign_leader_epoch(leader_epoch)?;
        }
        self.leader_epoch.store(leader_epoch, Ordering::Release);
        let changed = self.led_here.swap(led_here, Ordering::AcqRel) != led_here;
        drop(log);
        if changed {
            self.watchers.wake_all();
        }
        Ok(())
    }

    /// A client's `current_leader_epoch` against ours (-1 skips the check):
    /// newer is UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH, as Kafka.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), i16> {
        let epoch = self.leader_epoch();
        match current_leader_epoch {
            requested if requested < 0 || requested == epoch => Ok(()),
            requested if requested > epoch => Err(ErrorCode::UNKNOWN_LEADER_EPOCH.code()),
            _ => Err(ErrorCode::FENCED_LEADER_EPOCH.code()),
        }
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Appends records as leader, moves the high watermark and wakes the
    /// requests parked on this partition.
    pub fn append(&self, records: &Bytes, now_ms: i64) -> Result<(AppendInfo, i64), AppendError> {
        let appended = self.append_unwoken(records, now_ms)?;
        self.wake_waiters();
        Ok(appended)
    }

    /// [`Partition::append`] without the wake-up: a Produce request appends
    /// all its partitions first and then wakes them, as Kafka completes
    /// delayed fetches after the whole request, so a fetch parked on several
    /// of them answers once with all their records.
    pub fn append_unwoken(&self, records: &Bytes, now_ms: i64) -> Result<(AppendInfo, i64), AppendError> {
        let mut log = self.lock_log();
        // Checked under the lock: leadership moves only under it too, so
        // a partition that stopped being led here between the request's
        // check and this append takes nothing (Kafka's appendRecordsToLeader
        // checks under its leader-ISR lock).
        if !self.is_led_here() {
            return Err(AppendError::NotLeader);
        }
        let info = log.append_as_leader(records, self.leader_epoch(), now_ms)?;
        let end = log.log_end_offset();
        // The ISR is this node alone: what it appended is replicated. The
        // high watermark never passes the log end, nor moves back.
        debug_assert!(info.last_offset < end, "appended up to {} but the log ends at {end}", info.last_offset);
        debug_assert!(self.high_watermark() <= end, "high watermark {} past the log end {end}", self.high_watermark());
        self.high_watermark.store(end, Ordering::Release);
        Ok((info, log.log_start_offset()))
    }

    /// Wakes the requests parked on this partition (they read it again).
    pub fn wake_waiters(&self) {
        self.watchers.wake_all();
    }

    /// DeleteRecords: moves the log start to `offset` (returns the new low
    /// watermark) and wakes the fetches parked below it, now out of range.
    pub fn delete_records_before(&self, offset: i64, now_ms: i64) -> Result<i64, LogError> {
        let low_watermark = self.lock_log().delete_records_before(offset, now_ms)?;
        self.watchers.wake_all();
        Ok(low_watermark)
    }

    /// Parks `waiter` on this partition until `waiter` is dropped.
    pub fn watch(&self, waiter: &Arc<Waiter>) {
        self.watchers.watch(waiter);
    }

    pub(super) fn checkpoint(&self) -> PartitionCheckpoint {
        let log = self.lock_log();
        PartitionCheckpoint {
            topic_partition: log.topic_partition().clone(),
            log_dir: self.log_dir.clone(),
            recovery_point: log.recovery_point(),
            log_start_offset: log.log_start_offset(),
            high_watermark: self.high_watermark(),
            cleaner_offset: log.cleaner_checkpoint(),
        }
    }
}

/// Why an append as leader failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The partition is no longer led here (NOT_LEADER_OR_FOLLOWER).
    #[error("this broker no longer leads the partition")]
    NotLeader,
    #[error(transparent)]
    Log(#[from] LogError),
}

impl AppendError {
    /// The Kafka error code it answers with.
    pub fn code(&self) -> i16 {
        match self {
            AppendError::NotLeader => ErrorCode::NOT_LEADER_OR_FOLLOWER.code(),
            AppendError::Log(e) => crate::errors::log_error_code(e),
        }
    }
}

/// The partitions of one topic, indexed by partition id: every partition
/// the image has, None where another broker holds it.
pub struct HostedTopic {
    pub id: Uuid,
    pub partitions: Vec<Option<Arc<Partition>>>,
    pub produce: ProducePolicy,
}

impl HostedTopic {
    /// Partition `index` if this broker hosts it and leads it.
    pub fn led_partition(&self, index: i32) -> Option<&Arc<Partition>> {
        let hosted = usize::try_from(index).ok().and_then(|i| self.partitions.get(i))?.as_ref()?;
        hosted.is_led_here().then_some(hosted)
    }

    /// Whether the topic has partition `index`, wherever it lives.
    pub fn has_partition(&self, index: i32) -> bool {
        usize::try_from(index).is_ok_and(|i| i < self.partitions.len())
    }

    pub fn hosted(&self) -> impl Iterator<Item = &Arc<Partition>> {
        self.partitions.iter().flatten()
    }
}

/// What Produce needs of a topic's configs, worked out when they change
/// rather than on every request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducePolicy {
    /// `min.insync.replicas` (override, broker key or default).
    pub min_insync_replicas: i32,
    /// The codec `compression.type` forces, None for `producer`.
    pub forced_codec: Option<Compression>,
}

impl ProducePolicy {
    pub(super) fn of(broker: &BrokerConfig, overrides: &std::collections::BTreeMap<String, String>) -> Self {
        let effective = effective_topic_configs(broker, overrides);
        ProducePolicy {
            min_insync_replicas: effective.get("min.insync.replicas").and_then(|v| v.trim().parse().ok()).unwrap_or(1),
            forced_codec: topic_compression(broker, overrides).forced_codec(),
        }
    }
}
