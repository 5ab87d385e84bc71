//! Judging performance records against the krabka regression contract.
//!
//! The side-by-side performance work compares krabka either with an earlier
//! krabka build (`before_after`, which gates a change) or with Apache Kafka
//! 4.3.1 (`pinned_kafka`, which only reports). What counts as a regression is
//! fixed in advance in `packaging/performance/regression-contract.json`: the
//! cells to run, the minimum number of rounds (alternating which side runs
//! first) and, per metric, a regression budget, a variance budget and a
//! materiality floor.
//!
//! A runner writes a performance record (JSON, see [`record`]) that names the
//! SHA-256 of the contract it followed. This crate checks the record against
//! the contract ([`record::validate`]), computes per-side medians and relative
//! median absolute deviations, judges each cell and metric ([`judge`]) and
//! renders the outcome as JSON and markdown ([`report`]); the markdown ends
//! with each metric's largest spread and the variance budget the contract's
//! rule gives for it ([`calibrate`]). The binary
//! `krabka-parse-benches evaluate` wraps it; the README section "Regression
//! contract" in `packaging/performance/` documents the formats.

pub mod calibrate;
pub mod contract;
pub mod judge;
pub mod record;
pub mod report;

#[cfg(test)]
mod tests;

pub use contract::Contract;
pub use judge::{evaluate, Verdict};
pub use record::{Record, Refusal};
