//! krabka-broker: the server that speaks Kafka's protocol over krabka's logs.
//!
//! It ties the wire layer (krabka-protocol) to the partition logs (krabka-log),
//! the metadata image (krabka-metadata), its controller (krabka-controller)
//! and quorum (krabka-raft): listeners and connections, request dispatch,
//! the handlers of each API (which translate the wire format and call the
//! controller for every metadata change), and observability. It must never block one
//! connection on another, never copy record bytes on produce or fetch, and
//! never acknowledge a record the log has not accepted.

pub mod active_controller;
pub mod alter_partition;
pub mod authentication;
pub mod authorization;
pub mod auto_creations;
pub mod broker;
pub mod broker_channels;
pub mod client_quota_manager;
pub mod clock;
pub mod cluster_control;
pub mod config;
pub mod connection;
pub mod controller_registration;
pub mod coordinator_log;
pub mod cpu_time;
pub mod errors;
pub mod fetch_session;
pub mod handlers;
pub mod jwks_endpoint;
pub mod lifecycle;
pub mod log_dir_events;
pub mod membership;
pub mod memory;
pub mod metadata;
pub mod observability;
pub mod producer_id_source;
pub mod quorum;
pub mod replica;
pub mod replica_fetcher;
pub mod request;
pub mod server;
pub mod transactions;
pub mod transport;
pub mod wire;

/// CPUs this process may run on (its affinity mask, e.g. under `taskset`),
/// read once.
pub fn cpus_available() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Tokio worker threads for `num.network.threads`: more workers than CPUs
/// only adds context switches between them, but two keep the broker
/// answering while one blocks in a file write or fsync.
pub fn worker_threads(num_network_threads: usize) -> usize {
    num_network_threads.clamp(1, cpus_available().max(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_threads_are_capped_by_cpus_but_at_least_two_when_asked() {
        let cap = cpus_available().max(2);
        assert_eq!(worker_threads(0), 1);
        assert_eq!(worker_threads(1), 1);
        assert_eq!(worker_threads(2), 2);
        assert_eq!(worker_threads(1000), cap);
        assert!(worker_threads(3) <= 3);
    }
}
