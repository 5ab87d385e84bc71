//! This process's membership of the cluster: the incarnation id it
//! registers with and the broker epoch the active controller gave it
//! (`lifecycle.rs` registers and heartbeats; the broker holds it).

use std::sync::Mutex;

use krabka_protocol::Uuid;

/// This process's membership: its incarnation and the epoch it was given.
pub struct Membership {
    pub incarnation_id: Uuid,
    broker_epoch: Mutex<Option<i64>>,
}

impl Membership {
    pub fn new(node_id: i32) -> Self {
        let incarnation_id = Uuid::random().unwrap_or(Uuid([node_id as u8; 16]));
        Membership { incarnation_id, broker_epoch: Mutex::new(None) }
    }

    pub fn epoch(&self) -> Option<i64> {
        *self.broker_epoch.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_epoch(&self, epoch: Option<i64>) {
        *self.broker_epoch.lock().unwrap_or_else(|e| e.into_inner()) = epoch;
    }
}
