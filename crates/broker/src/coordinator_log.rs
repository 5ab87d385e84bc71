//! The coordinators' log: an internal topic's partitions (here
//! `__consumer_offsets`), as krabka-coordinator's [`CoordinatorLog`] sees
//! them. Appends go to the partition as its leader; replay reads a
//! partition from its log start to its log end.

use std::sync::Arc;

use bytes::Bytes;
use krabka_coordinator::CoordinatorLog;
use krabka_protocol::records::{whole_batches, RecordBatch, RecordBatches};
use krabka_protocol::ErrorCode;

use crate::replica::{AppendError, Hosting, ReplicaManager};

/// How much of a partition one replay read takes.
const REPLAY_READ_BYTES: u32 = 4 * 1024 * 1024;

pub struct TopicLog {
    replicas: Arc<ReplicaManager>,
    topic: &'static str,
}

impl TopicLog {
    pub fn new(replicas: Arc<ReplicaManager>, topic: &'static str) -> Self {
        TopicLog { replicas, topic }
    }
}

impl CoordinatorLog for TopicLog {
    fn append(&self, partition: usize, batch: &Bytes, now_ms: i64) -> Result<i64, i16> {
        let Some(hosted) = self.replicas.partition(self.topic, partition as i32) else {
            // Led by another broker: the client finds the coordinator again.
            return Err(ErrorCode::NOT_COORDINATOR.code());
        };
        match hosted.append(batch, now_ms) {
            Ok((info, _)) => Ok(info.first_offset),
            // Led elsewhere since the check above: the client finds the
            // coordinator again.
            Err(AppendError::NotLeader) => Err(ErrorCode::NOT_COORDINATOR.code()),
            Err(e) => {
                tracing::error!(topic = self.topic, partition, error = %e, "could not write to a coordinator's topic");
                Err(e.code())
            }
        }
    }

    fn replay(&self, partition: usize, visit: &mut dyn FnMut(RecordBatch) -> Result<(), String>) -> Result<(), String> {
        // Replayed whether led here or not (a broker starts fenced, its
        // partitions leaderless until it is unfenced), to the log end: a
        // new leader's records above the high watermark are the
        // partition's, committed once its followers have them.
        let Some(hosted) = self.replicas.hosted_partition(self.topic, partition as i32) else { return Ok(()) };
        let log = hosted.lock_log();
        let end = log.log_end_offset();
        let mut offset = log.log_start_offset();
        while offset < end {
            let read = log.read(offset, REPLAY_READ_BYTES, end, true).map_err(|e| e.to_string())?;
            let Some(slice) = read.slice else { break };
            // A read ends inside a batch when the partition holds more than
            // one read: only the whole batches are replayed, and the next
            // read starts at the cut one (the first is always whole).
            let bytes = whole_batches(slice.read_to_bytes().map_err(|e| e.to_string())?);
            let before = offset;
            for batch in RecordBatches::new(bytes) {
                let batch = batch.map_err(|e| e.to_string())?;
                offset = batch.next_offset();
                visit(batch)?;
            }
            if offset == before {
                return Err(format!("no whole record batch at offset {offset}"));
            }
        }
        Ok(())
    }

    fn leader_epoch(&self, partition: usize) -> Option<i32> {
        if self.replicas.hosting() == Hosting::Everything {
            // A single node leads every partition for good: one load.
            return Some(0);
        }
        self.replicas.partition(self.topic, partition as i32).map(|p| p.leader_epoch())
    }
}
