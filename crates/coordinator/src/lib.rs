//! krabka-coordinator: the coordinators that keep their state in an
//! internal topic, and the runtime they share. Today that is the group
//! coordinator (consumer groups and their committed offsets, in
//! `__consumer_offsets`) and the transaction coordinator (transactional
//! ids and their transactions' states, in `__transaction_state`).
//!
//! `runtime` is the machinery: one shard per partition of the internal
//! topic with a lock each, persist then apply (the in-memory state moves
//! only after the log accepted its records), replay on load, and the
//! [`CoordinatorLog`] trait the host implements to append and read back.
//! `group` is the group coordinator on top of it, `txn` the transaction
//! coordinator.
//!
//! This crate is sans-IO. It must never open a socket, spawn a task or
//! thread, block on anything but its own shard locks, or read the clock:
//! every entry point that needs the time takes a [`Time`], so tests drive a
//! fake clock. It never reaches into the broker: the broker implements
//! [`CoordinatorLog`] over its partitions, passes the metadata image in,
//! and completes the delayed JoinGroup / SyncGroup answers this crate hands
//! back as actions.
//!
//! Modules point one way: `runtime` < `group` (and inside it `records`,
//! `assignor` < `migration`, `classic` < `consumer` < `group/mod.rs`),
//! `runtime` < `txn`.

pub mod group;
pub mod runtime;
#[cfg(test)]
mod testing;
pub mod txn;

pub use runtime::{CoordinatorLog, Time};
