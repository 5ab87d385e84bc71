//! The log directory of each replica this broker hosts, to be told to the
//! controller when the metadata names another (AssignReplicasToDirs,
//! KIP-858): a controller places a new replica of a broker with several
//! directories in none (`UNASSIGNED`), and learns from the broker where it
//! went, so that a directory's failure moves exactly its replicas. The
//! sender (`crate::assign_dirs`) drains the queue.

use std::collections::BTreeMap;
use std::sync::Mutex;

use krabka_protocol::Uuid;
use tokio::sync::Notify;

/// A replica: its topic's id and its partition index.
pub type ReplicaKey = (Uuid, i32);

#[derive(Default)]
pub struct DirAssignmentQueue {
    /// The directory each replica is in, the latest word for each.
    queued: Mutex<BTreeMap<ReplicaKey, Uuid>>,
    ready: Notify,
}

impl DirAssignmentQueue {
    /// Asks for the controller to record `directory` for `replica`.
    pub fn push(&self, replica: ReplicaKey, directory: Uuid) {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).insert(replica, directory);
        self.ready.notify_one();
    }

    /// Waits for assignments and takes them all.
    pub async fn next_batch(&self) -> BTreeMap<ReplicaKey, Uuid> {
        loop {
            let taken = std::mem::take(&mut *self.queued.lock().unwrap_or_else(|e| e.into_inner()));
            if !taken.is_empty() {
                return taken;
            }
            self.ready.notified().await;
        }
    }

    /// What is queued now, left queued.
    #[cfg(test)]
    pub fn queued(&self) -> BTreeMap<ReplicaKey, Uuid> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts back what was not sent, unless a newer word came meanwhile.
    pub fn requeue(&self, batch: BTreeMap<ReplicaKey, Uuid>) {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        for (replica, directory) in batch {
            queued.entry(replica).or_insert(directory);
        }
        drop(queued);
        self.ready.notify_one();
    }
}
