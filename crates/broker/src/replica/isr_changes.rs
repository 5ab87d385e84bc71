//! The ISR changes leaders here want sent to the controller: a follower
//! that caught up (found while serving its fetch) or followers that lag
//! (found by the periodic check). The AlterPartition sender
//! (`crate::alter_partition`) drains the queue; the partition itself keeps
//! the change pending until the controller answers.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::Partition;

#[derive(Default)]
pub struct IsrChangeQueue {
    queued: Mutex<Vec<(Arc<Partition>, Vec<i32>)>>,
    ready: Notify,
}

impl IsrChangeQueue {
    /// Asks for `isr` to become `partition`'s ISR.
    pub fn push(&self, partition: Arc<Partition>, isr: Vec<i32>) {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).push((partition, isr));
        self.ready.notify_one();
    }

    /// Waits for changes and takes them all.
    pub async fn next_batch(&self) -> Vec<(Arc<Partition>, Vec<i32>)> {
        loop {
            let taken = std::mem::take(&mut *self.queued.lock().unwrap_or_else(|e| e.into_inner()));
            if !taken.is_empty() {
                return taken;
            }
            self.ready.notified().await;
        }
    }
}
