//! AlterClientQuotas, as Kafka 4.3.1's `ClientQuotaControlManager` decides
//! it: each entity is `user`, `client-id`, both, or `ip` alone (a name of
//! None is the type's default entity); its quota keys are Kafka's for that
//! kind of entity, each value above 0 and integral for the integral keys;
//! a removal of a quota that is not set writes nothing, nor does setting
//! the value a quota already has. An entity refused writes none of its
//! changes; the others go in one commit.

use std::net::IpAddr;

use krabka_metadata::{MetadataImage, MetadataRecord, QuotaEntity};
use krabka_protocol::client_quota_record::EntityData;
use krabka_protocol::{ClientQuotaRecord, ErrorCode};

use crate::error::ApiError;

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// How a quota key's value must look (Kafka's QuotaConfig key types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QuotaType {
    Long,
    Int,
    Double,
}

/// The quotas of user and client-id entities.
const USER_AND_CLIENT_QUOTAS: [(&str, QuotaType); 4] = [
    ("producer_byte_rate", QuotaType::Long),
    ("consumer_byte_rate", QuotaType::Long),
    ("request_percentage", QuotaType::Double),
    ("controller_mutation_rate", QuotaType::Double),
];

/// The quotas of ip entities.
const IP_QUOTAS: [(&str, QuotaType); 1] = [("connection_creation_rate", QuotaType::Int)];

/// A quota entity as a request lists it: entity type and name pairs.
pub type EntityList = Vec<(String, Option<String>)>;

/// An entity's outcome: its error, None when accepted.
pub type QuotaOutcome = (EntityList, Option<ApiError>);

/// One entity's changes: each key to a new value, or None to remove it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaAlteration {
    /// Entity type and name, as the request lists them.
    pub entity: EntityList,
    pub ops: Vec<(String, Option<f64>)>,
}

/// The records and each entity's outcome, in request order (a refused
/// entity's error, None when accepted).
pub fn plan_alter_client_quotas(
    image: &MetadataImage,
    alterations: &[QuotaAlteration],
) -> (Vec<MetadataRecord>, Vec<QuotaOutcome>) {
    let mut records = Vec::new();
    let mut outcomes: Vec<QuotaOutcome> = Vec::new();
    let mut seen: Vec<QuotaEntity> = Vec::new();
    for alteration in alterations {
        let described = describe_entity(&alteration.entity);
        let key_twice = (1..alteration.ops.len())
            .find(|&i| alteration.ops[..i].iter().any(|(k, _)| *k == alteration.ops[i].0))
            .map(|i| alteration.ops[i].0.clone());
        let as_map: QuotaEntity = alteration.entity.iter().cloned().collect();
        let outcome = if seen.contains(&as_map) || key_twice.is_some() {
            // Kafka reports a duplicate key as a duplicate entity too.
            Err(invalid(format!("Ignoring duplicate entity {described}")))
        } else {
            plan_entity(image, alteration, &mut records)
        };
        seen.push(as_map);
        outcomes.push((alteration.entity.clone(), outcome.err()));
    }
    (records, outcomes)
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::INVALID_REQUEST.code(), message)
}

/// Kafka's ClientQuotaEntity.toString.
fn describe_entity(entity: &[(String, Option<String>)]) -> String {
    let entries: Vec<String> = entity.iter().map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null"))).collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

/// Checks one entity and its changes, and adds their records.
fn plan_entity(
    image: &MetadataImage,
    alteration: &QuotaAlteration,
    records: &mut Vec<MetadataRecord>,
) -> Result<(), ApiError> {
    let entity = check_entity(&alteration.entity)?;
    let keys: &[(&str, QuotaType)] = quota_keys(&entity)?;
    let current = image.client_quotas.get(&entity);
    let mut planned = Vec::new();
    for (key, value) in &alteration.ops {
        let now = current.and_then(|quotas| quotas.get(key)).copied();
        match value {
            None if now.is_some() => planned.push(quota_record(&entity, key, 0.0, true)),
            None => {}
            Some(value) => {
                check_value(keys, key, *value)?;
                if now != Some(*value) {
                    planned.push(quota_record(&entity, key, *value, false));
                }
            }
        }
    }
    records.extend(planned);
    Ok(())
}

fn check_entity(entity: &[(String, Option<String>)]) -> Result<QuotaEntity, ApiError> {
    if entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let mut checked = QuotaEntity::new();
    for (entity_type, name) in entity {
        if checked.contains_key(entity_type) {
            return Err(invalid(format!("Invalid client quota entity, duplicate entity entry {entity_type}")));
        }
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(invalid(format!("Unhandled client quota entity type: {entity_type}")));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {entity_type} not supported")));
        }
        checked.insert(entity_type.clone(), name.clone());
    }
    Ok(checked)
}

/// The keys an entity may have: Kafka allows `ip` alone, or `user` and
/// `client-id` in any combination.
fn quota_keys(entity: &QuotaEntity) -> Result<&'static [(&'static str, QuotaType)], ApiError> {
    let Some(ip) = entity.get(IP) else {
        return Ok(&USER_AND_CLIENT_QUOTAS);
    };
    if entity.len() > 1 {
        // Kafka's message, missing space included.
        let message = "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId";
        return Err(invalid(message));
    }
    // Kafka also resolves host names; the controller makes no lookups, so
    // only addresses are taken.
    match ip {
        Some(name) if name.parse::<IpAddr>().is_err() => {
            Err(invalid(format!("{name} is not a valid IP or resolvable host.")))
        }
        _ => Ok(&IP_QUOTAS),
    }
}

fn check_value(keys: &[(&str, QuotaType)], key: &str, value: f64) -> Result<(), ApiError> {
    let Some(&(_, quota_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    // NaN is no quota either.
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (limit, article, name) = match quota_type {
        QuotaType::Double => return Ok(()),
        QuotaType::Int => (f64::from(i32::MAX), "an", "INT"),
        QuotaType::Long => (i64::MAX as f64, "a", "LONG"),
    };
    if value > limit {
        return Err(invalid(format!("Proposed value for {key} is too large for {article} {name}.")));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

fn quota_record(entity: &QuotaEntity, key: &str, value: f64, remove: bool) -> MetadataRecord {
    let entity = entity
        .iter()
        .map(|(entity_type, entity_name)| EntityData {
            entity_type: entity_type.clone(),
            entity_name: entity_name.clone(),
            ..Default::default()
        })
        .collect();
    MetadataRecord::ClientQuota(ClientQuotaRecord { entity, key: key.into(), value, remove, ..Default::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alteration(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
        QuotaAlteration {
            entity: entity.iter().map(|(t, n)| (t.to_string(), n.map(str::to_string))).collect(),
            ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    fn messages(outcomes: &[QuotaOutcome]) -> Vec<String> {
        outcomes.iter().map(|(_, e)| e.as_ref().map_or(String::new(), |e| e.message.clone())).collect()
    }

    #[test]
    fn quotas_are_set_changed_and_removed_with_records_only_for_changes() {
        let mut image = MetadataImage::default();
        let alice = [(USER, Some("alice"))];
        let set = alteration(&alice, &[("producer_byte_rate", Some(1024.0)), ("request_percentage", Some(12.5))]);
        let (records, outcomes) = plan_alter_client_quotas(&image, std::slice::from_ref(&set));
        assert_eq!(messages(&outcomes), [""]);
        assert_eq!(records.len(), 2);
        for record in &records {
            image.apply(record).unwrap();
        }
        let (records, _) = plan_alter_client_quotas(&image, &[set]);
        assert!(records.is_empty(), "the same values again write nothing");
        let remove = alteration(&alice, &[("producer_byte_rate", None), ("consumer_byte_rate", None)]);
        let (records, _) = plan_alter_client_quotas(&image, &[remove]);
        assert_eq!(records.len(), 1, "only a quota that is set is removed");
        image.apply(&records[0]).unwrap();
        let entity: QuotaEntity = [(USER.to_string(), Some("alice".to_string()))].into();
        assert_eq!(image.client_quotas[&entity].keys().collect::<Vec<_>>(), ["request_percentage"]);
        let defaults = alteration(&[(USER, None), (CLIENT_ID, None)], &[("consumer_byte_rate", Some(1e6))]);
        let ip = alteration(&[(IP, Some("10.0.0.1"))], &[("connection_creation_rate", Some(5.0))]);
        let (records, outcomes) = plan_alter_client_quotas(&image, &[defaults, ip]);
        assert_eq!((records.len(), messages(&outcomes)), (2, vec![String::new(), String::new()]));
    }

    #[test]
    fn refusals_carry_kafkas_messages_and_write_nothing() {
        let image = MetadataImage::default();
        let cases = [
            (alteration(&[], &[("producer_byte_rate", Some(1.0))]), "Invalid empty client quota entity"),
            (alteration(&[("group", Some("g"))], &[]), "Unhandled client quota entity type: group"),
            (alteration(&[(USER, Some(""))], &[]), "Empty user not supported"),
            (
                alteration(&[(IP, Some("10.0.0.1")), (USER, Some("u"))], &[]),
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ),
            (alteration(&[(IP, Some("not an ip"))], &[]), "not an ip is not a valid IP or resolvable host."),
            (
                alteration(&[(USER, Some("a"))], &[("connection_creation_rate", Some(1.0))]),
                "Invalid configuration key connection_creation_rate",
            ),
            (
                alteration(&[(USER, Some("b"))], &[("producer_byte_rate", Some(0.0))]),
                "Quota producer_byte_rate must be greater than 0",
            ),
            (
                alteration(&[(USER, Some("c"))], &[("producer_byte_rate", Some(1.5))]),
                "producer_byte_rate cannot be a fractional value.",
            ),
            (
                alteration(&[(IP, None)], &[("connection_creation_rate", Some(3e9))]),
                "Proposed value for connection_creation_rate is too large for an INT.",
            ),
            (
                alteration(
                    &[(USER, Some("d"))],
                    &[("producer_byte_rate", Some(1.0)), ("producer_byte_rate", Some(2.0))],
                ),
                "Ignoring duplicate entity ClientQuotaEntity(entries={user=d})",
            ),
        ];
        let (alterations, expected): (Vec<_>, Vec<_>) = cases.into_iter().unzip();
        let (records, outcomes) = plan_alter_client_quotas(&image, &alterations);
        assert_eq!(messages(&outcomes), expected);
        assert!(records.is_empty(), "{records:?}");
        assert!(outcomes.iter().all(|(_, e)| e.as_ref().unwrap().code == ErrorCode::INVALID_REQUEST.code()));
    }
}
