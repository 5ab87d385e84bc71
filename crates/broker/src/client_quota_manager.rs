//! Client quotas enforced, as Kafka's ClientQuotaManager: each produce
//! request's bytes and each consumer fetch response's bytes are recorded
//! in the rate of the quota entity that applies (krabka-security's
//! `applied_quota`, over the image's ClientQuotaRecords), measured over
//! `quota.window.num` windows of `quota.window.size.seconds`; a client
//! over its bound is told `throttle_time_ms` and its connection reads
//! nothing more for that long (KIP-219). CreateTopics, DeleteTopics and
//! CreatePartitions take partition mutations from a token bucket
//! (`controller_mutation_rate`, KIP-599). A broker without quotas does no
//! work here beyond seeing that the image has none.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use krabka_controller::error::{ApiError, THROTTLED};
use krabka_metadata::{MetadataImage, MetadataPublisher};
use krabka_protocol::ErrorCode;
use krabka_replication::throttle::ByteRate;
use krabka_security::quota::{
    applied_quota, ip_connection_rate, throttle_time_ms, token_bucket_throttle_ms, TokenBucket,
};
use krabka_security::KafkaPrincipal;

/// Which quota a rate counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// `producer_byte_rate`: produce request bytes.
    Produce,
    /// `consumer_byte_rate`: fetch response bytes of consumers.
    Fetch,
    /// `request_percentage` (KIP-124): the CPU time a client's requests
    /// take, in nanoseconds; the bound is a percentage of one core.
    Request,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
        }
    }

    /// The quota's bound in the unit recorded (per second).
    fn bound(self, quota: f64) -> f64 {
        match self {
            QuotaKind::Produce | QuotaKind::Fetch => quota,
            // 1% of a core is 10 ms of CPU time a second.
            QuotaKind::Request => quota * 10_000_000.0,
        }
    }
}

/// One client's request quota (KIP-124), when one applies to it.
pub struct RequestQuota<'a> {
    manager: &'a ClientQuotaManager,
    key: (QuotaKind, String, String),
    bound: f64,
}

impl RequestQuota<'_> {
    /// How long the client must wait for the CPU time its requests took
    /// so far (0 within its quota), as the throttle of this request's
    /// response: the time is recorded once the request is served.
    pub fn throttle_ms(&self, now_ms: i64) -> u64 {
        let (per_second, window_ms) =
            self.manager.with_rate(&self.manager.rates, self.key.clone(), |rate| rate.measure(now_ms));
        // Kafka bounds the request quota's throttle by one window.
        throttle_time_ms(per_second, self.bound, window_ms).min(self.manager.window_ms as u64)
    }

    /// Records `cpu_nanos` of CPU time one request took.
    pub fn record(&self, cpu_nanos: u64, now_ms: i64) {
        self.manager.with_rate(&self.manager.rates, self.key.clone(), |rate| rate.record(cpu_nanos, now_ms));
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
    /// KIP-599's partition mutations per (user, client-id) tags, and the
    /// burst in seconds of rate their buckets hold
    /// (`controller.quota.window.num` x `controller.quota.window.size.seconds`).
    mutation_buckets: Mutex<HashMap<(String, String), TokenBucket>>,
    mutation_burst_seconds: f64,
    /// Whether the image holds any client quota: read for every request,
    /// so that a broker without quotas does not look the image up for them.
    any_quota: Arc<AtomicBool>,
}

/// One request's controller mutation quota (KIP-599), as Kafka's
/// ControllerMutationQuota: a strict one (CreateTopics v6+, DeleteTopics
/// v5+, CreatePartitions v3+) refuses each mutation asked for while the
/// bucket is below zero; a permissive one (older versions) lets it through.
/// Either way the response carries, and the connection waits, the time
/// until the bucket is back at zero.
pub struct MutationQuota<'a> {
    manager: &'a ClientQuotaManager,
    /// The bucket's tags and the rate; None: no quota applies.
    applied: Option<((String, String), f64)>,
    strict: bool,
    throttle_ms: u64,
}

impl MutationQuota<'_> {
    /// Asks for `partitions` partition mutations at `now_ms`.
    pub fn apply(&mut self, partitions: usize, now_ms: i64) -> Result<(), ApiError> {
        let Some((key, rate)) = &self.applied else { return Ok(()) };
        let burst = rate * self.manager.mutation_burst_seconds;
        let mut buckets = self.manager.mutation_buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(key.clone()).or_default();
        if self.strict {
            let tokens = bucket.tokens(*rate, burst, now_ms);
            if tokens < 0.0 {
                self.throttle_ms = token_bucket_throttle_ms(tokens, *rate);
                return Err(ApiError::new(ErrorCode::THROTTLING_QUOTA_EXCEEDED.code(), THROTTLED));
            }
        }
        let tokens = bucket.record(*rate, burst, partitions as f64, now_ms);
        if !self.strict {
            self.throttle_ms = self.throttle_ms.max(token_bucket_throttle_ms(tokens, *rate));
        }
        Ok(())
    }

    /// How long the client waits (0: within its quota).
    pub fn throttle_ms(&self) -> u64 {
        self.throttle_ms
    }
}

impl ClientQuotaManager {
    pub fn new(windows: usize, window_ms: i64) -> Self {
        ClientQuotaManager {
            windows,
            window_ms,
            rates: Mutex::new(HashMap::new()),
            connection_rates: Mutex::new(HashMap::new()),
            accept_rates: Mutex::new(HashMap::new()),
            mutation_buckets: Mutex::new(HashMap::new()),
            mutation_burst_seconds: windows as f64 * window_ms as f64 / 1000.0,
            any_quota: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Keeps [`Self::any_quota`] in step with `publisher`'s images.
    pub fn follow(&self, publisher: &MetadataPublisher) {
        let any_quota = Arc::clone(&self.any_quota);
        publisher.subscribe(move |update| any_quota.store(!update.image.client_quotas.is_empty(), Ordering::Relaxed));
    }

    /// Whether any client quota is configured (as of the last image
    /// published; false unless [`Self::follow`] was called).
    pub fn any_quota(&self) -> bool {
        self.any_quota.load(Ordering::Relaxed)
    }

    /// Over `quota.window.num` windows of `quota.window.size.seconds`; the
    /// controller mutation buckets over `controller.quota.window.*`.
    pub fn from_config(config: &crate::config::BrokerConfig) -> Self {
        let windows = config.number("quota.window.num", 11).max(1) as usize;
        let window_ms = config.number("quota.window.size.seconds", 1).max(1) * 1_000;
        let mutation_windows = config.number("controller.quota.window.num", 11).max(1);
        let mutation_window_seconds = config.number("controller.quota.window.size.seconds", 1).max(1);
        ClientQuotaManager {
            mutation_burst_seconds: (mutation_windows * mutation_window_seconds) as f64,
            ..Self::new(windows, window_ms)
        }
    }

    /// The controller mutation quota of one CreateTopics, DeleteTopics or
    /// CreatePartitions from `principal` and `client_id`.
    pub fn mutation_quota(
        &self,
        image: &MetadataImage,
        (principal, client_id): (&KafkaPrincipal, &str),
        strict: bool,
    ) -> MutationQuota<'_> {
        let applied = (!image.client_quotas.is_empty())
            .then(|| applied_quota(&image.client_quotas, "controller_mutation_rate", &principal.name, client_id))
            .flatten()
            .map(|quota| ((quota.user_tag, quota.client_tag), quota.bound));
        MutationQuota { manager: self, applied, strict, throttle_ms: 0 }
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
        throttle_time_ms(per_second, kind.bound(quota.bound), window_ms)
    }

    /// The request quota of `principal` and `client_id`, if one applies.
    pub fn request_quota(
        &self,
        image: &MetadataImage,
        (principal, client_id): (&KafkaPrincipal, &str),
    ) -> Option<RequestQuota<'_>> {
        if image.client_quotas.is_empty() {
            return None;
        }
        let kind = QuotaKind::Request;
        let quota = applied_quota(&image.client_quotas, kind.key(), &principal.name, client_id)?;
        Some(RequestQuota {
            manager: self,
            key: (kind, quota.user_tag, quota.client_tag),
            bound: kind.bound(quota.bound),
        })
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
