//! Metrics, logs and profiles of the broker.
//!
//! - [`init_tracing`] installs the process-wide log subscriber (stderr, text or JSON).
//! - [`Metrics`] owns a Prometheus registry that the network layer and the handlers update on
//!   their hot paths; share it as `Arc<Metrics>`.
//! - [`failures`] logs a failure that repeats per request once and counts every one.
//! - [`http::serve`] exposes `/metrics`, `/healthz` and `/debug/pprof/profile` over a small
//!   HTTP/1.1 server of its own.

pub mod failures;
pub mod http;
mod jmx_names;
mod metrics;
mod partition_gauges;
mod profile;
mod tracing_setup;

pub use failures::FailureKind;
pub use jmx_names::ControllerCounts;
pub use metrics::{Metrics, ReplicaCounts};
pub use partition_gauges::PartitionLogState;
pub use tracing_setup::init_tracing;
