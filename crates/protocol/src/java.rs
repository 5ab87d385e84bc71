//! The Java arithmetic Kafka's placement rules are written in, so that a
//! key or a partition lands where Kafka puts it: `String.hashCode` and
//! Kafka's `Utils.abs`.

/// Java's `String.hashCode` over UTF-16 code units (wrapping `i32`), as
/// Kafka places group and transactional ids on its internal topics'
/// partitions and partitions on replica fetchers.
pub fn string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| hash.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// Kafka's `Utils.abs`: `Math.abs`, except that `Integer.MIN_VALUE` maps
/// to 0. (Not the value with its sign bit masked off: for a negative one
/// that is another number, and another partition.)
pub fn kafka_abs(n: i32) -> u32 {
    if n == i32::MIN {
        0
    } else {
        n.unsigned_abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_abs_are_javas() {
        // Values of Java's "...".hashCode().
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("ab"), 97 * 31 + 98);
        assert_eq!(string_hash("my-group"), -1906497762);
        assert_eq!(kafka_abs(-1906497762), 1906497762);
        assert_eq!(kafka_abs(i32::MIN), 0);
        assert_eq!(kafka_abs(i32::MAX), i32::MAX as u32);
    }
}
