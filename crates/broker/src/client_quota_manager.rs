//! Client quotas enforced, as Kafka's ClientQuotaManager: each produce
//! request's bytes and each consumer fetch response's bytes are recorded
//! in the rate of the quota entity that applies (krabka-security's
//! `applied_quota`, over the image's ClientQuotaRecords), measured over
//! `quota.window.num` windows of `quota.window.size.seconds`; a client
//! over its bound is told `throttle_time_ms` and its connection reads
//! nothing more for that long (KIP-219). A broker without quotas does no
//! work here beyond seeing that the image has none.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use krabka_metadata::MetadataImage;
use krabka_replication::throttle::ByteRate;
use krabka_security::quota::{applied_quota, ip_connection_rate, throttle_time_ms};
use krabka_security::KafkaPrincipal;

/// Which quota a rate counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// `producer_byte_rate`: produce request bytes.
    Produce,
    /// `consumer_byte_rate`: fetch response bytes of consumers.
    Fetch,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
        }
    }
}

/// The rates of the quota entities clients have used, by kind and tags,
/// and the connection creation rates of the addresses that connected.
pub struct ClientQuotaManager {
    windows: usize,
    window_ms: i64,
    rates: Mutex<HashMap<(QuotaKind, String, String), ByteRate>>,
    connection_rates: Mutex<HashMap<IpAddr, ByteRate>>,
    /// New connections per listener name, and broker-wide (None: every
    /// listener but the inter-broker one, as Kafka counts them).
    accept_rates: Mutex<HashMap<Option<String>, ByteRate>>,
}

impl ClientQuotaManager {
    pub fn new(windows: usize, window_ms: i64) -> Self {
        ClientQuotaManager {
            windows,
            window_ms,
            rates: Mutex::new(HashMap::new()),
            connection_rates: Mutex::new(HashMap::new()),
            accept_rates: Mutex::new(HashMap::new()),
        }
    }

    /// Over `quota.window.num` windows of `quota.window.size.seconds`.
    pub fn from_config(config: &crate::config::BrokerConfig) -> Self {
        let windows = config.number("quota.window.num", 11).max(1) as usize;
        let window_ms = config.number("quota.window.size.seconds", 1).max(1) * 1_000;
        Self::new(windows, window_ms)
    }

    /// Records `bytes` for the client and returns how long it must wait
    /// (0 within its quota, or when none applies).
    pub fn record(
        &self,
        kind: QuotaKind,
        image: &MetadataImage,
        (principal, client_id): (&KafkaPrincipal, &str),
        bytes: u64,
        now_ms: i64,
    ) -> u64 {
        if image.client_quotas.is_empty() {
            return 0;
        }
        let Some(quota) = applied_quota(&image.client_quotas, kind.key(), &principal.name, client_id) else {
            return 0;
        };
        let key = (kind, quota.user_tag, quota.client_tag);
        let (per_second, window_ms) = self.with_rate(&self.rates, key, |rate| {
            rate.record(bytes, now_ms);
            rate.measure(now_ms)
        });
        throttle_time_ms(per_second, quota.bound, window_ms)
    }

    /// Records a new connection from `ip` against its
    /// `connection_creation_rate` (KIP-612) and returns how long to hold
    /// it before closing it (0: it may stay), as Kafka's ConnectionQuotas
    /// delays the close of a connection over the rate.
    pub fn record_connection(&self, image: &MetadataImage, ip: IpAddr, now_ms: i64) -> u64 {
        if image.client_quotas.is_empty() {
            return 0;
        }
        let Some(bound) = ip_connection_rate(&image.client_quotas, &ip.to_string()) else { return 0 };
        let (per_second, window_ms) = self.with_rate(&self.connection_rates, ip, |rate| {
            rate.record(1, now_ms);
            rate.measure(now_ms)
        });
        throttle_time_ms(per_second, bound, window_ms)
    }

    /// Records a connection accepted on `listener` against its
    /// `listener.name.<l>.max.connection.creation.rate` and, unless it is
    /// the inter-broker listener, the broker's `max.connection.creation.rate`;
    /// returns how long to wait before accepting more (Kafka's acceptor
    /// throttles rather than refuses), 0 within both.
    pub fn record_accept(
        &self,
        listener: &str,
        (listener_rate, broker_rate): (Option<u32>, Option<u32>),
        now_ms: i64,
    ) -> u64 {
        let mut wait = 0;
        for (key, bound) in [(Some(listener.to_string()), listener_rate), (None, broker_rate)] {
            let Some(bound) = bound else { continue };
            let (per_second, window_ms) = self.with_rate(&self.accept_rates, key, |rate| {
                rate.record(1, now_ms);
                rate.measure(now_ms)
            });
            wait = wait.max(throttle_time_ms(per_second, f64::from(bound), window_ms));
        }
        wait
    }

    /// Takes back bytes recorded for a response that was not sent (a
    /// throttled fetch answers empty, as Kafka's unrecords them).
    pub fn unrecord(
        &self,
        kind: QuotaKind,
        image: &MetadataImage,
        (principal, client_id): (&KafkaPrincipal, &str),
        bytes: u64,
        now_ms: i64,
    ) {
        let Some(quota) = applied_quota(&image.client_quotas, kind.key(), &principal.name, client_id) else {
            return;
        };
        let key = (kind, quota.user_tag, quota.client_tag);
        self.with_rate(&self.rates, key, |rate| rate.unrecord(bytes, now_ms));
    }

    /// Runs `f` on the rate of `key` in `rates`, made empty on first use.
    fn with_rate<K: std::hash::Hash + Eq, T>(
        &self,
        rates: &Mutex<HashMap<K, ByteRate>>,
        key: K,
        f: impl FnOnce(&mut ByteRate) -> T,
    ) -> T {
        let mut rates = rates.lock().unwrap_or_else(|e| e.into_inner());
        f(rates.entry(key).or_insert_with(|| ByteRate::new(self.windows, self.window_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_over_its_byte_rate_waits_until_the_rate_is_back() {
        let mut image = MetadataImage::default();
        let manager = ClientQuotaManager::new(11, 1000);
        let alice = KafkaPrincipal::user("alice");
        assert_eq!(manager.record(QuotaKind::Produce, &image, (&alice, "app"), 1 << 30, 0), 0, "no quotas");
        let entity = [("user".to_string(), Some("alice".to_string()))].into();
        image.client_quotas.insert(entity, [("producer_byte_rate".to_string(), 1000.0)].into());
        // 10 s of window at 1000 B/s hold 10,000 bytes; 15,000 is 50% over.
        assert_eq!(manager.record(QuotaKind::Produce, &image, (&alice, "app"), 9_000, 0), 0);
        assert_eq!(manager.record(QuotaKind::Produce, &image, (&alice, "app"), 6_000, 0), 5_000);
        assert_eq!(manager.record(QuotaKind::Fetch, &image, (&alice, "app"), 1 << 30, 0), 0, "no fetch quota");
        let bob = KafkaPrincipal::user("bob");
        assert_eq!(manager.record(QuotaKind::Produce, &image, (&bob, "app"), 1 << 30, 0), 0, "not bob's quota");
        manager.unrecord(QuotaKind::Produce, &image, (&alice, "other-app"), 6_000, 0);
        assert_eq!(manager.record(QuotaKind::Produce, &image, (&alice, "app"), 0, 0), 0, "the user's clients share it");
    }
}
