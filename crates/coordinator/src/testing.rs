//! What the crate's tests stand on: a [`CoordinatorLog`] in memory (a test
//! double of the log interface, not of anything this crate builds), and
//! metadata images with a topic.

use std::sync::Mutex;

use bytes::Bytes;
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::records::{RecordBatch, RecordBatchMut, RecordBatches};
use krabka_protocol::{PartitionRecord, TopicRecord, Uuid};

use crate::runtime::CoordinatorLog;

pub struct MemoryLog {
    partitions: Mutex<Vec<Vec<Bytes>>>,
    fail_with: Mutex<Option<i16>>,
    /// Each partition's leader epoch here, None where another node leads.
    leader_epochs: Mutex<Vec<Option<i32>>>,
}

impl MemoryLog {
    /// `partitions` partitions, all led here at epoch 0.
    pub fn new(partitions: usize) -> Self {
        MemoryLog {
            partitions: Mutex::new(vec![Vec::new(); partitions]),
            fail_with: Mutex::new(None),
            leader_epochs: Mutex::new(vec![Some(0); partitions]),
        }
    }

    /// Makes this node lead `partition` at `epoch`, or not at all (None).
    pub fn set_leader_epoch(&self, partition: usize, epoch: Option<i32>) {
        self.leader_epochs.lock().unwrap()[partition] = epoch;
    }

    /// Every later append fails with `code` (a lost leadership, a full disk).
    pub fn fail_appends(&self, code: i16) {
        *self.fail_with.lock().unwrap() = Some(code);
    }

    /// Batches appended to `partition` so far.
    pub fn batches(&self, partition: usize) -> usize {
        self.partitions.lock().unwrap()[partition].len()
    }
}

impl CoordinatorLog for MemoryLog {
    fn append(&self, partition: usize, batch: &Bytes, _now_ms: i64) -> Result<i64, i16> {
        if let Some(code) = *self.fail_with.lock().unwrap() {
            return Err(code);
        }
        let mut partitions = self.partitions.lock().unwrap();
        let log = &mut partitions[partition];
        // Offsets as a partition gives them: each batch after the last.
        let base = log.last().and_then(|b| RecordBatch::new(b.clone()).ok()).map_or(0, |b| b.last_offset() + 1);
        let mut stamped = batch.to_vec();
        RecordBatchMut::new(&mut stamped).expect("one batch").set_base_offset(base);
        log.push(Bytes::from(stamped));
        Ok(base)
    }

    fn replay(&self, partition: usize, visit: &mut dyn FnMut(RecordBatch) -> Result<(), String>) -> Result<(), String> {
        let batches = self.partitions.lock().unwrap().get(partition).cloned().unwrap_or_default();
        for bytes in batches {
            for batch in RecordBatches::new(bytes) {
                visit(batch.map_err(|e| e.to_string())?)?;
            }
        }
        Ok(())
    }

    fn leader_epoch(&self, partition: usize) -> Option<i32> {
        self.leader_epochs.lock().unwrap().get(partition).copied().flatten()
    }
}

/// An image holding `topic` (id 7...7) with `partitions` partitions.
pub fn image_with(topic: &str, partitions: i32) -> (MetadataImage, Uuid) {
    let mut image = MetadataImage::default();
    let id = Uuid([7; 16]);
    let created = TopicRecord { name: topic.into(), topic_id: id, ..Default::default() };
    image.apply(&MetadataRecord::Topic(created)).unwrap();
    for partition_id in 0..partitions {
        let partition = PartitionRecord { partition_id, topic_id: id, ..Default::default() };
        image.apply(&MetadataRecord::Partition(partition)).unwrap();
    }
    (image, id)
}
