//! krabka-loadgen: a native load generator for Kafka-compatible brokers.
//!
//! Idempotent producers send record batches built before the timed phase
//! (the Java workload's payloads, every codec) over pipelined connections,
//! flat out or at a rate; a consumer reads them back and checks each
//! partition holds every acknowledged record exactly once, in order. The
//! generator runs on one thread so that its CPU per record, reported beside
//! the throughput, is one core's and can be compared with the broker's.
//!
//! Modules, from the wire up: [`wire`] (framing, a simple client),
//! [`cluster`] (metadata, topic, producer ids, offsets), [`payload`] and
//! [`batches`] (values and pre-built batches), [`partition`] (one
//! partition's sequence bookkeeping), [`link`] and [`producer`] (the produce
//! pipeline), [`consumer`] and [`verify`] (read-back and verdict),
//! [`report`], [`cli`] and [`run`]; [`baseline`] writes the same batches
//! with write(2), the floor a broker's produce path is measured against.

pub mod baseline;
pub mod batches;
pub mod cli;
pub mod cluster;
pub mod consumer;
pub mod link;
pub mod partition;
pub mod payload;
pub mod producer;
pub mod report;
pub mod run;
pub mod verify;
pub mod wire;
