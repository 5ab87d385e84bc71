//! Metrics, logs and profiles (placeholder, being filled in).
#![allow(unused_variables)]

use std::time::Duration;

#[derive(Default)]
pub struct Metrics;

impl Metrics {
    pub fn new() -> Self {
        Metrics
    }
    pub fn request_completed(&self, api: &'static str, error_code: i16, latency: Duration) {}
    pub fn bytes_in(&self, topic: &str, bytes: u64) {}
    pub fn bytes_out(&self, topic: &str, bytes: u64) {}
    pub fn messages_in(&self, topic: &str, records: u64) {}
    pub fn connection_opened(&self) {}
    pub fn connection_closed(&self) {}
    pub fn connection_rejected(&self) {}
    pub fn set_partition_state(&self, topic: &str, partition: i32, size: u64, start: i64, end: i64) {}
    pub fn remove_topic(&self, topic: &str) {}
}

pub fn init_tracing(level: &str, json: bool) -> anyhow::Result<()> {
    Ok(())
}

pub mod http {
    pub async fn serve(
        listener: tokio::net::TcpListener,
        metrics: std::sync::Arc<super::Metrics>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
    }
}
