//! Which client quota applies to a request, and how long an over-quota
//! client waits, as Kafka's default quota callback and ClientQuotaManager
//! decide: the most specific of the eight user / client-id entities that
//! sets the quota, and the clients sharing it (its metric tags); the
//! throttle time is what brings the measured rate back to the bound.

use std::collections::BTreeMap;

/// A quota entity: entity type (`user`, `client-id`, `ip`) to name, None
/// naming the type's default (as ClientQuotaRecord keeps it in the image).
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// The quota that applies, and the rate bucket it is measured in: the
/// user and client-id tags Kafka's sensors carry (empty when that part of
/// the entity does not count), so that clients sharing an entity share
/// its rate.
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedQuota {
    pub bound: f64,
    pub user_tag: String,
    pub client_tag: String,
}

/// The quota `key` for `user` (the principal's name) and `client_id`, in
/// Kafka's order of precedence, or None when no entity sets it.
pub fn applied_quota(
    quotas: &BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<AppliedQuota> {
    let entity = |user: Option<Option<&str>>, client: Option<Option<&str>>| {
        let mut entity = QuotaEntity::new();
        if let Some(user) = user {
            entity.insert("user".into(), user.map(str::to_string));
        }
        if let Some(client) = client {
            entity.insert("client-id".into(), client.map(str::to_string));
        }
        entity
    };
    let (u, c) = (Some(user), Some(client_id));
    // (entity, whether the user and the client id are part of its tags)
    let candidates = [
        (entity(Some(u), Some(c)), true, true),
        (entity(Some(u), Some(None)), true, true),
        (entity(Some(u), None), true, false),
        (entity(Some(None), Some(c)), true, true),
        (entity(Some(None), Some(None)), true, true),
        (entity(Some(None), None), true, false),
        (entity(None, Some(c)), false, true),
        (entity(None, Some(None)), false, true),
    ];
    candidates.into_iter().find_map(|(entity, by_user, by_client)| {
        let bound = *quotas.get(&entity)?.get(key)?;
        Some(AppliedQuota {
            bound,
            user_tag: if by_user { user.to_string() } else { String::new() },
            client_tag: if by_client { client_id.to_string() } else { String::new() },
        })
    })
}

/// The `connection_creation_rate` of connections from `ip` (its text
/// form): the address's own entity, else the default ip entity's.
pub fn ip_connection_rate(quotas: &BTreeMap<QuotaEntity, BTreeMap<String, f64>>, ip: &str) -> Option<f64> {
    let entity = |name: Option<&str>| QuotaEntity::from([("ip".to_string(), name.map(str::to_string))]);
    let rate = |entity: QuotaEntity| quotas.get(&entity)?.get("connection_creation_rate").copied();
    rate(entity(Some(ip))).or_else(|| rate(entity(None)))
}

/// Kafka's QuotaUtils.throttleTime: how long until a measured `rate` over
/// `window_ms` comes back to `bound`, in whole milliseconds (0 within it).
pub fn throttle_time_ms(rate: f64, bound: f64, window_ms: i64) -> u64 {
    if rate <= bound || bound <= 0.0 {
        return 0;
    }
    let throttle = (rate - bound) / bound * window_ms as f64;
    debug_assert!(throttle >= 0.0);
    throttle.round().min(u32::MAX as f64) as u64
}

/// Kafka's `TokenBucket` stat, which KIP-599's controller mutation quota
/// measures with: tokens refill at the quota's rate up to a burst of
/// `windows` windows' worth, each mutation takes its partition count, and
/// the quota is violated while the tokens are below zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    last_ms: i64,
}

impl TokenBucket {
    /// The tokens left at `now_ms` under `rate` (per second) and `burst`.
    /// A new bucket is full, as Kafka's (refilled from the epoch).
    pub fn tokens(&mut self, rate: f64, burst: f64, now_ms: i64) -> f64 {
        let elapsed_seconds = (now_ms - self.last_ms).max(0) as f64 / 1000.0;
        self.tokens = burst.min(self.tokens + rate * elapsed_seconds);
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens
    }

    /// Takes `permits` tokens at `now_ms`; the tokens left.
    pub fn record(&mut self, rate: f64, burst: f64, permits: f64, now_ms: i64) -> f64 {
        let tokens = self.tokens(rate, burst, now_ms);
        self.tokens = burst.min(tokens - permits);
        self.tokens
    }
}

/// `ControllerMutationQuotaManager.throttleTimeMs`: how long until a bucket
/// `tokens` below zero refills to zero at `rate`, in whole milliseconds.
pub fn token_bucket_throttle_ms(tokens: f64, rate: f64) -> u64 {
    if tokens >= 0.0 || rate <= 0.0 {
        return 0;
    }
    (-tokens / rate * 1000.0).round().min(u32::MAX as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(quotas: &mut BTreeMap<QuotaEntity, BTreeMap<String, f64>>, entity: &[(&str, Option<&str>)], value: f64) {
        let entity = entity.iter().map(|(t, n)| (t.to_string(), n.map(str::to_string))).collect();
        quotas.entry(entity).or_default().insert("producer_byte_rate".into(), value);
    }

    fn applied(
        quotas: &BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
        user: &str,
        client: &str,
    ) -> Option<(f64, String, String)> {
        applied_quota(quotas, "producer_byte_rate", user, client).map(|q| (q.bound, q.user_tag, q.client_tag))
    }

    #[test]
    fn a_token_bucket_starts_full_refills_at_its_rate_and_caps_at_its_burst() {
        let (rate, burst) = (2.0, 22.0);
        let mut bucket = TokenBucket::default();
        assert_eq!(bucket.tokens(rate, burst, 1_000_000), 22.0);
        assert_eq!(bucket.record(rate, burst, 10.0, 1_000_000), 12.0);
        assert_eq!(bucket.record(rate, burst, 10.0, 1_000_000), 2.0);
        assert_eq!(bucket.record(rate, burst, 10.0, 1_000_000), -8.0);
        assert_eq!(token_bucket_throttle_ms(-8.0, rate), 4_000);
        assert_eq!(bucket.tokens(rate, burst, 1_001_000), -6.0, "2 tokens a second");
        assert_eq!(bucket.tokens(rate, burst, 1_100_000), 22.0, "never above the burst");
        assert_eq!(token_bucket_throttle_ms(0.0, rate), 0);
    }

    #[test]
    fn the_most_specific_entity_wins_in_kafkas_order() {
        let mut quotas = BTreeMap::new();
        assert_eq!(applied(&quotas, "alice", "app"), None);
        set(&mut quotas, &[("client-id", None)], 8.0);
        assert_eq!(applied(&quotas, "alice", "app"), Some((8.0, String::new(), "app".into())));
        set(&mut quotas, &[("client-id", Some("app"))], 7.0);
        assert_eq!(applied(&quotas, "alice", "app"), Some((7.0, String::new(), "app".into())));
        set(&mut quotas, &[("user", None)], 6.0);
        assert_eq!(applied(&quotas, "alice", "app"), Some((6.0, "alice".into(), String::new())), "each user its own");
        set(&mut quotas, &[("user", None), ("client-id", None)], 5.0);
        set(&mut quotas, &[("user", None), ("client-id", Some("app"))], 4.0);
        assert_eq!(applied(&quotas, "alice", "app").unwrap().0, 4.0);
        set(&mut quotas, &[("user", Some("alice"))], 3.0);
        assert_eq!(applied(&quotas, "alice", "app"), Some((3.0, "alice".into(), String::new())));
        set(&mut quotas, &[("user", Some("alice")), ("client-id", None)], 2.0);
        set(&mut quotas, &[("user", Some("alice")), ("client-id", Some("app"))], 1.0);
        assert_eq!(applied(&quotas, "alice", "app"), Some((1.0, "alice".into(), "app".into())));
        assert_eq!(applied(&quotas, "alice", "other").unwrap().0, 2.0);
        assert_eq!(applied(&quotas, "bob", "other").unwrap().0, 5.0);
    }

    #[test]
    fn an_address_has_its_own_connection_rate_or_the_default() {
        let mut quotas = BTreeMap::new();
        assert_eq!(ip_connection_rate(&quotas, "10.0.0.1"), None);
        let ip = |name: Option<&str>| QuotaEntity::from([("ip".to_string(), name.map(str::to_string))]);
        quotas.insert(ip(None), BTreeMap::from([("connection_creation_rate".to_string(), 5.0)]));
        quotas.insert(ip(Some("10.0.0.1")), BTreeMap::from([("connection_creation_rate".to_string(), 2.0)]));
        assert_eq!(ip_connection_rate(&quotas, "10.0.0.1"), Some(2.0));
        assert_eq!(ip_connection_rate(&quotas, "10.0.0.2"), Some(5.0));
    }

    #[test]
    fn throttle_time_brings_the_rate_back_to_the_bound() {
        assert_eq!(throttle_time_ms(900.0, 1000.0, 10_000), 0);
        // 50% over for a 10 s window: 5 s of silence brings it back.
        assert_eq!(throttle_time_ms(1500.0, 1000.0, 10_000), 5000);
        assert_eq!(throttle_time_ms(1.0, 0.0, 10_000), 0);
    }
}
