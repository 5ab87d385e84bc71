//! Which of a broker's fetchers copies a partition, as Kafka's
//! `AbstractFetcherManager.getFetcherId` decides: with
//! `num.replica.fetchers` fetchers per source broker a follower spreads
//! its partitions over that many connections to each leader, and with
//! `num.replica.alter.log.dirs.threads` movers the moves between its own
//! log directories over that many workers.

use krabka_protocol::java::{kafka_abs, string_hash};

/// The fetcher (0 to `fetchers` - 1) of `topic`-`partition`:
/// `Utils.abs(31 * topic.hashCode() + partition) % fetchers`.
pub fn fetcher_id(topic: &str, partition: i32, fetchers: u32) -> u32 {
    debug_assert!(fetchers > 0, "at least one fetcher");
    kafka_abs(string_hash(topic).wrapping_mul(31).wrapping_add(partition)) % fetchers.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_go_to_the_fetcher_kafka_gives_them() {
        // (topic, partition, fetcher of 3, fetcher of 4), from Java 17.
        let javas = [
            ("replicated", 0, 1, 3),
            ("replicated", 1, 0, 2),
            ("replicated", 2, 2, 1),
            ("__consumer_offsets", 0, 2, 3),
            ("__consumer_offsets", 3, 2, 0),
            ("t", 1, 0, 1),
            ("a-much-longer-topic-name-here", 1, 0, 3),
            ("a-much-longer-topic-name-here", 3, 1, 1),
        ];
        for (topic, partition, of_three, of_four) in javas {
            assert_eq!(fetcher_id(topic, partition, 3), of_three, "{topic}-{partition} of 3");
            assert_eq!(fetcher_id(topic, partition, 4), of_four, "{topic}-{partition} of 4");
            assert_eq!(fetcher_id(topic, partition, 1), 0);
        }
    }
}
