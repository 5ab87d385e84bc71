//! Typed config values: parsing, range checks and the canonical text form,
//! and the error a refused value is. Topic configs (`topic_config`) and the
//! broker's server.properties keys share them, as Kafka's `ConfigDef` is
//! shared by every config.
//!
//! Kafka parses every config value by its declared type (trimming first) and
//! then applies the key's validator; DescribeConfigs prints the parsed value
//! back, so `retention.ms= 0100` is described as `100`. These helpers do the
//! same so validation and description agree.

/// A value, a key or a combination of values refused, worded the way Kafka words it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for configuration {key}: {reason}")]
    Invalid { key: String, value: String, reason: String },
    #[error("missing required configuration {0}")]
    Missing(String),
    /// A topic config name Kafka does not define (CreateTopics/AlterConfigs).
    #[error("Unknown topic config name: {0}")]
    UnknownTopicConfig(String),
    /// Values that are each valid but not together.
    #[error("{0}")]
    Conflict(String),
}
impl ConfigError {
    /// `value` is not a valid value of `key`, for `reason`.
    pub fn invalid(key: &str, value: &str, reason: impl Into<String>) -> Self {
        ConfigError::Invalid { key: key.to_string(), value: value.to_string(), reason: reason.into() }
    }
}

/// The type Kafka declares for a config, which decides how its value parses
/// and how DescribeConfigs reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
    /// A key no table declares: a custom dynamic broker config, which Kafka
    /// keeps without knowing it and describes as UNKNOWN and sensitive.
    Unknown,
}

/// The validator of one key, beyond its type.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// Any value of the type.
    Any,
    /// An integer at least this.
    AtLeast(i64),
    /// An integer within these bounds, inclusive.
    Between(i64, i64),
    /// A double within [0, 1].
    Ratio,
    /// A string that is one of these, case-sensitive as Kafka compares them.
    OneOf(&'static [&'static str]),
    /// A list whose entries are each one of these; may be empty.
    ListOf(&'static [&'static str]),
    /// A list with at least one entry.
    NonEmptyList,
    /// gzip's level: -1 (the codec's default) or 1..=9.
    GzipLevel,
    /// `*`, or `partition:broker` pairs (the replication throttle lists).
    ThrottledReplicas,
}

/// Parses `value` as `ty` under `check` and returns it in canonical form.
pub fn canonical(key: &str, ty: ConfigType, check: Check, value: &str) -> Result<String, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { key: key.to_string(), value: value.to_string(), reason };
    let trimmed = value.trim();
    match ty {
        ConfigType::Int | ConfigType::Short | ConfigType::Long => {
            let (bits, type_name) = match ty {
                ConfigType::Int => (32, "INT"),
                ConfigType::Short => (16, "SHORT"),
                _ => (64, "LONG"),
            };
            let n = parse_integer(trimmed, bits).ok_or_else(|| invalid(format!("not a number of type {type_name}")))?;
            check_integer(n, check).map_err(invalid)?;
            Ok(n.to_string())
        }
        ConfigType::Double => {
            let d: f64 = trimmed.parse().map_err(|_| invalid("not a number of type DOUBLE".into()))?;
            if d.is_nan() {
                return Err(invalid("not a number of type DOUBLE".into()));
            }
            if matches!(check, Check::Ratio) && !(0.0..=1.0).contains(&d) {
                return Err(invalid("value must be between 0 and 1".into()));
            }
            Ok(java_double(d))
        }
        ConfigType::Boolean => match parse_bool(trimmed) {
            Some(b) => Ok(b.to_string()),
            None => Err(invalid("value must be true or false".into())),
        },
        ConfigType::List => {
            let entries = split_list(trimmed);
            check_list(&entries, check).map_err(invalid)?;
            Ok(entries.join(","))
        }
        ConfigType::String | ConfigType::Class | ConfigType::Password | ConfigType::Unknown => {
            if let Check::OneOf(allowed) = check {
                if !allowed.contains(&trimmed) {
                    return Err(invalid(format!("value must be one of: {}", allowed.join(", "))));
                }
            }
            // Passwords keep their exact bytes; everything else is trimmed as Kafka does.
            Ok(if ty == ConfigType::Password { value.to_string() } else { trimmed.to_string() })
        }
    }
}

fn parse_integer(text: &str, bits: u32) -> Option<i64> {
    let n: i64 = text.parse().ok()?;
    let limit = 1i128 << (bits - 1);
    ((n as i128) >= -limit && (n as i128) < limit).then_some(n)
}

fn check_integer(n: i64, check: Check) -> Result<(), String> {
    match check {
        Check::AtLeast(min) if n < min => Err(format!("value must be at least {min}")),
        Check::Between(min, _) if n < min => Err(format!("value must be at least {min}")),
        Check::Between(_, max) if n > max => Err(format!("value must be no more than {max}")),
        Check::GzipLevel if n != -1 && !(1..=9).contains(&n) => {
            Err("value must be -1 (the codec's default) or between 1 and 9".into())
        }
        _ => Ok(()),
    }
}

fn check_list(entries: &[String], check: Check) -> Result<(), String> {
    match check {
        Check::ThrottledReplicas => return check_throttled(entries),
        Check::NonEmptyList if entries.is_empty() => return Err("the list must not be empty".into()),
        _ => {}
    }
    // Kafka 4 refuses empty and repeated entries in every validated list.
    if entries.iter().any(String::is_empty) {
        return Err("list entries must not be empty".into());
    }
    if entries.iter().enumerate().any(|(i, e)| entries[..i].contains(e)) {
        return Err("list entries must not be repeated".into());
    }
    if let Check::ListOf(allowed) = check {
        if let Some(bad) = entries.iter().find(|e| !allowed.contains(&e.as_str())) {
            return Err(format!("{bad:?} is not one of: {}", allowed.join(", ")));
        }
    }
    Ok(())
}

fn check_throttled(entries: &[String]) -> Result<(), String> {
    let is_pair = |e: &str| {
        e.split_once(':').is_some_and(|(p, b)| {
            !p.is_empty() && !b.is_empty() && p.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
        })
    };
    let wildcard = entries.len() == 1 && entries[0] == "*";
    if wildcard || entries.iter().all(|e| is_pair(e)) {
        Ok(())
    } else {
        Err("must be * or a list of partitionId:brokerId pairs".into())
    }
}

/// Kafka's list syntax: comma separated, whitespace around entries ignored, "" is the empty list.
pub fn split_list(text: &str) -> Vec<String> {
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    text.split(',').map(|e| e.trim().to_string()).collect()
}

/// Java's `Boolean` config parsing: `true`/`false` in any case.
pub fn parse_bool(text: &str) -> Option<bool> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// `Double.toString`: plain decimals in [1e-3, 1e7), else `d.dddE±n`; always a fraction digit.
pub fn java_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let magnitude = d.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = d.to_string();
        return if plain.contains('.') { plain } else { format!("{plain}.0") };
    }
    let sci = format!("{d:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exponent}")
}

/// Reads back a value `canonical` accepted; `fallback` covers hand-built configs.
pub fn int_or(text: Option<&str>, fallback: i64) -> i64 {
    text.and_then(|t| t.trim().parse().ok()).unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_range_checked_and_canonical() {
        assert_eq!(canonical("k", ConfigType::Int, Check::AtLeast(1), " 0100 ").unwrap(), "100");
        assert!(canonical("k", ConfigType::Int, Check::AtLeast(1), "0").is_err());
        assert!(canonical("k", ConfigType::Int, Check::Any, "2147483648").is_err());
        assert!(canonical("k", ConfigType::Short, Check::Any, "40000").is_err());
        assert_eq!(canonical("k", ConfigType::Long, Check::Any, "9223372036854775807").unwrap(), "9223372036854775807");
        assert!(canonical("k", ConfigType::Long, Check::Any, "1.5").is_err());
        assert!(canonical("k", ConfigType::Int, Check::GzipLevel, "0").is_err());
        assert!(canonical("k", ConfigType::Int, Check::GzipLevel, "-1").is_ok());
    }

    #[test]
    fn doubles_print_as_java_does() {
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1e-5), "1.0E-5");
        assert_eq!(java_double(f64::MAX), "1.7976931348623157E308");
        assert_eq!(java_double(12345678.0), "1.2345678E7");
        assert!(canonical("k", ConfigType::Double, Check::Ratio, "1.5").is_err());
        assert!(canonical("k", ConfigType::Double, Check::Ratio, "NaN").is_err());
    }

    #[test]
    fn lists_and_booleans() {
        let policies = Check::ListOf(&["compact", "delete"]);
        assert_eq!(canonical("k", ConfigType::List, policies, "compact , delete").unwrap(), "compact,delete");
        assert_eq!(canonical("k", ConfigType::List, policies, "").unwrap(), "");
        assert!(canonical("k", ConfigType::List, policies, "delete,delete").is_err());
        assert!(canonical("k", ConfigType::List, policies, "compact,").is_err());
        assert!(canonical("k", ConfigType::List, Check::NonEmptyList, " ").is_err());
        assert_eq!(canonical("k", ConfigType::Boolean, Check::Any, "TRUE").unwrap(), "true");
        assert!(canonical("k", ConfigType::Boolean, Check::Any, "yes").is_err());
        assert!(canonical("k", ConfigType::List, Check::ThrottledReplicas, "0:1, 1:2").is_ok());
        assert!(canonical("k", ConfigType::List, Check::ThrottledReplicas, "*").is_ok());
        assert!(canonical("k", ConfigType::List, Check::ThrottledReplicas, "0-1").is_err());
    }
}
