//! AlterConfigs and IncrementalAlterConfigs: the configs a request leaves
//! a topic or a broker resource with, validated as a whole, and the
//! `ConfigRecord`s that set and clear them. Broker resources are the
//! cluster-wide dynamic default (an empty name) and one broker's dynamic
//! configs (its id); which broker keys may change at runtime and their
//! values are the receiving broker's to check, as Kafka's
//! `ConfigAdminManager` does before it forwards the request.

use std::collections::BTreeMap;

use krabka_log::topic_config::{validate_topic_configs, MIN_INSYNC_REPLICAS};
use krabka_metadata::records::{CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::{alter_configs_request, incremental_alter_configs_request};
use krabka_protocol::{AlterConfigsRequest, ClearElrRecord, ConfigRecord, ErrorCode, IncrementalAlterConfigsRequest};

use crate::budget::RecordBudget;
use crate::elections::elr_enabled;
use crate::error::ApiError;

/// One resource's answer: an error code and message (`NONE` and no message
/// when it was altered, or would be).
pub type ConfigOutcome = (i16, Option<String>);

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Legacy AlterConfigs: each resource's overrides replaced by the request's.
pub fn plan_alter_configs(
    image: &MetadataImage,
    request: &AlterConfigsRequest,
) -> Result<(Vec<MetadataRecord>, Vec<ConfigOutcome>), ApiError> {
    let resources: Vec<(i8, &str)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.as_str())).collect();
    plan_alter(image, &resources, request.validate_only, |index, _current| {
        replaced_configs(&request.resources[index].configs)
    })
}

/// IncrementalAlterConfigs: each resource's operations applied in order to
/// its current overrides.
pub fn plan_incremental_alter_configs(
    image: &MetadataImage,
    request: &IncrementalAlterConfigsRequest,
) -> Result<(Vec<MetadataRecord>, Vec<ConfigOutcome>), ApiError> {
    let resources: Vec<(i8, &str)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.as_str())).collect();
    plan_alter(image, &resources, request.validate_only, |index, current| {
        altered_configs(current, &request.resources[index].configs)
    })
}

/// Applies `change` to each resource's topic configs; the records of every
/// resource that may change, budgeted (validate-only ones too), and each
/// resource's outcome in request order.
fn plan_alter(
    image: &MetadataImage,
    resources: &[(i8, &str)],
    validate_only: bool,
    change: impl Fn(usize, &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ApiError>,
) -> Result<(Vec<MetadataRecord>, Vec<ConfigOutcome>), ApiError> {
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    let mut outcomes = Vec::with_capacity(resources.len());
    for (index, &(resource_type, name)) in resources.iter().enumerate() {
        let outcome = match resource_type {
            CONFIG_RESOURCE_TOPIC => match image.topic(name) {
                None => Err(ApiError::new(
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                    format!("Topic {name} does not exist."),
                )),
                Some(topic) => change(index, &topic.configs).and_then(|wanted| {
                    let mut records = topic_config_records(name, &topic.configs, &wanted)?;
                    records.extend(clear_elr_if_min_isr_changed(image, name, &topic.configs, &wanted));
                    Ok(records)
                }),
            },
            CONFIG_RESOURCE_BROKER => broker_resource_configs(image, name).and_then(|current| {
                change(index, current).and_then(|wanted| broker_config_records(image, name, current, &wanted))
            }),
            other => {
                Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), format!("Unsupported resource type {other}")))
            }
        };
        match outcome {
            Ok(new_records) => {
                budget.take(new_records.len())?;
                if !validate_only {
                    records.extend(new_records);
                }
                outcomes.push((ErrorCode::NONE.code(), None));
            }
            Err(e) => outcomes.push((e.code, Some(e.message))),
        }
    }
    Ok((records, outcomes))
}

/// Kafka's `createClearElrRecordsAsNeeded`: the ELR were chosen under the
/// old `min.insync.replicas` (a replica outside the ISR is eligible only
/// while the high watermark could not pass it), so a topic whose value
/// changes, ELR being on, starts without any.
fn clear_elr_if_min_isr_changed(
    image: &MetadataImage,
    topic: &str,
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Option<MetadataRecord> {
    let key = MIN_INSYNC_REPLICAS;
    (elr_enabled(image) && current.get(key) != wanted.get(key))
        .then(|| MetadataRecord::ClearElr(ClearElrRecord { topic_name: topic.to_string(), ..Default::default() }))
}

/// A broker resource's dynamic configs: the cluster-wide default's (an
/// empty name) or one broker's (its id, registered or not, as Kafka's
/// controller allows).
fn broker_resource_configs<'a>(image: &'a MetadataImage, name: &str) -> Result<&'a BTreeMap<String, String>, ApiError> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    if name.is_empty() {
        return Ok(&image.broker_configs);
    }
    match name.parse::<i32>() {
        Ok(id) if id >= 0 => Ok(image.per_broker_configs.get(name).unwrap_or(&NONE)),
        _ => Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), format!("Invalid broker name {name}"))),
    }
}

/// A broker resource's dynamic configs after a change, as records, with
/// Kafka's ELR rules: with ELR on, elections read `min.insync.replicas`
/// from the cluster-wide value alone, so no broker may have its own and
/// the cluster's may change (its ELRs then cleared everywhere, chosen as
/// they were under the old value) but not go.
fn broker_config_records(
    image: &MetadataImage,
    name: &str,
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    let key = MIN_INSYNC_REPLICAS;
    let min_isr_changes = current.get(key) != wanted.get(key);
    if elr_enabled(image) && min_isr_changes {
        let refusal = match (name.is_empty(), wanted.get(key)) {
            (false, _) => Some("Broker-level min.insync.replicas cannot be altered while ELR is enabled."),
            (true, None) => Some("Cluster-level min.insync.replicas cannot be removed while ELR is enabled."),
            (true, Some(_)) => None,
        };
        if let Some(message) = refusal {
            return Err(ApiError::new(ErrorCode::INVALID_CONFIG.code(), message));
        }
    }
    let mut records = config_records(CONFIG_RESOURCE_BROKER, name, current, wanted);
    if elr_enabled(image) && min_isr_changes {
        records.push(MetadataRecord::ClearElr(ClearElrRecord { topic_name: String::new(), ..Default::default() }));
    }
    Ok(records)
}

/// The records that take a resource's configs from `current` to `wanted`:
/// a value for each new or changed one, a null for each removed one.
fn config_records(
    resource_type: i8,
    resource_name: &str,
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let record = |name: &str, value: Option<&String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.to_string(),
            name: name.to_string(),
            value: value.cloned(),
            ..Default::default()
        })
    };
    let mut records: Vec<MetadataRecord> =
        wanted.iter().filter(|(k, v)| current.get(*k) != Some(*v)).map(|(k, v)| record(k, Some(v))).collect();
    records.extend(current.keys().filter(|k| !wanted.contains_key(*k)).map(|k| record(k, None)));
    records
}

/// The topic configs after a change, validated, as records: a value for
/// each new or changed one, a null for each removed one.
pub fn topic_config_records(
    topic: &str,
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    validate_topic_configs(wanted).map_err(|e| ApiError::new(ErrorCode::INVALID_CONFIG.code(), e.to_string()))?;
    Ok(config_records(CONFIG_RESOURCE_TOPIC, topic, current, wanted))
}

/// AlterConfigs' whole new set of overrides; a null value is refused.
fn replaced_configs(configs: &[alter_configs_request::AlterableConfig]) -> Result<BTreeMap<String, String>, ApiError> {
    let mut wanted = BTreeMap::new();
    for config in configs {
        let Some(value) = &config.value else {
            return Err(ApiError::new(
                ErrorCode::INVALID_REQUEST.code(),
                format!("Null value for config {}", config.name),
            ));
        };
        wanted.insert(config.name.clone(), value.clone());
    }
    Ok(wanted)
}

/// `current` with IncrementalAlterConfigs' SET, DELETE, APPEND and
/// SUBTRACT applied in order (the last two on comma-separated lists).
fn altered_configs(
    current: &BTreeMap<String, String>,
    configs: &[incremental_alter_configs_request::AlterableConfig],
) -> Result<BTreeMap<String, String>, ApiError> {
    let mut wanted = current.clone();
    for config in configs {
        let name = config.name.clone();
        match (config.config_operation, &config.value) {
            (OP_SET, Some(value)) => {
                wanted.insert(name, value.clone());
            }
            (OP_DELETE, _) => {
                wanted.remove(&name);
            }
            (op @ (OP_APPEND | OP_SUBTRACT), Some(value)) => {
                let existing = wanted.get(&name).map_or("", String::as_str);
                let items = edited_list(existing, value, op == OP_APPEND);
                wanted.insert(name, items);
            }
            (op, _) => {
                return Err(ApiError::new(
                    ErrorCode::INVALID_REQUEST.code(),
                    format!("Invalid operation {op} or null value for config {name}"),
                ))
            }
        }
    }
    Ok(wanted)
}

/// `existing`'s list with `value`'s entries appended (those not there yet)
/// or removed.
fn edited_list(existing: &str, value: &str, append: bool) -> String {
    let mut items: Vec<String> =
        existing.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if append {
            if !items.iter().any(|i| i == item) {
                items.push(item.to_string());
            }
        } else {
            items.retain(|i| i != item);
        }
    }
    items.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use incremental_alter_configs_request::AlterableConfig;
    use std::sync::Arc;

    fn op(name: &str, config_operation: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig { name: name.into(), config_operation, value: value.map(String::from), ..Default::default() }
    }

    #[test]
    fn incremental_operations_apply_in_order() {
        let current = BTreeMap::from([("cleanup.policy".to_string(), "delete".to_string())]);
        let ops = [
            op("cleanup.policy", OP_APPEND, Some("compact, delete")),
            op("retention.ms", OP_SET, Some("100")),
            op("cleanup.policy", OP_SUBTRACT, Some("delete")),
            op("segment.ms", OP_DELETE, None),
        ];
        let wanted = altered_configs(&current, &ops).unwrap();
        assert_eq!(wanted["cleanup.policy"], "compact");
        assert_eq!(wanted["retention.ms"], "100");
        assert!(altered_configs(&current, &[op("retention.ms", OP_SET, None)]).is_err());
        assert!(altered_configs(&current, &[op("retention.ms", 9, Some("1"))]).is_err());
    }

    #[test]
    fn records_set_what_changed_and_clear_what_went() {
        let current = BTreeMap::from([("a.b".to_string(), "1".to_string()), ("retention.ms".into(), "5".into())]);
        let wanted = BTreeMap::from([("retention.ms".to_string(), "6".to_string())]);
        let records = topic_config_records("t", &current, &wanted).unwrap();
        let values: Vec<(String, Option<String>)> = records
            .into_iter()
            .map(|r| match r {
                MetadataRecord::Config(c) => (c.name, c.value),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(values, [("retention.ms".to_string(), Some("6".to_string())), ("a.b".to_string(), None)]);
        let bad = BTreeMap::from([("retention.ms".to_string(), "x".to_string())]);
        assert_eq!(topic_config_records("t", &current, &bad).unwrap_err().code, ErrorCode::INVALID_CONFIG.code());
    }

    #[test]
    fn changing_a_topics_min_isr_clears_its_elr_when_elr_is_on() {
        use crate::test_images::one_partition;
        let mut image = one_partition(3, &[], &[1, 2, 3], 1);
        let t0 = Arc::make_mut(image.topics.get_mut("t").unwrap());
        t0.partitions[0].elr = vec![2];
        let epoch = t0.partitions[0].partition_epoch;
        let request = IncrementalAlterConfigsRequest {
            resources: vec![incremental_alter_configs_request::AlterConfigsResource {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: "t".into(),
                configs: vec![op("min.insync.replicas", OP_SET, Some("1"))],
                ..Default::default()
            }],
            ..Default::default()
        };
        let (records, _) = plan_incremental_alter_configs(&image, &request).unwrap();
        assert_eq!(records.len(), 1, "ELR off: the config only");
        image.features.insert("eligible.leader.replicas.version".into(), 1);
        let (records, _) = plan_incremental_alter_configs(&image, &request).unwrap();
        assert!(matches!(&records[1], MetadataRecord::ClearElr(c) if c.topic_name == "t"), "{records:?}");
        for record in &records {
            image.apply(record).unwrap();
        }
        let p = &image.topics["t"].partitions[0];
        assert!(p.elr.is_empty() && p.partition_epoch == epoch + 1, "{p:?}");
        let decoded = MetadataRecord::decode(records[1].encode()).unwrap();
        assert_eq!(decoded, records[1], "ClearElrRecord v0 as Kafka frames it");
    }

    fn broker_request(name: &str, configs: Vec<AlterableConfig>) -> IncrementalAlterConfigsRequest {
        IncrementalAlterConfigsRequest {
            resources: vec![incremental_alter_configs_request::AlterConfigsResource {
                resource_type: CONFIG_RESOURCE_BROKER,
                resource_name: name.into(),
                configs,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn broker_resources_follow_kafkas_elr_rules() {
        use crate::test_images::one_partition;
        let mut image = one_partition(3, &[], &[1, 2, 3], 1);
        Arc::make_mut(image.topics.get_mut("t").unwrap()).partitions[0].elr = vec![2];
        let outcome = |image: &MetadataImage, name: &str, config: AlterableConfig| {
            plan_incremental_alter_configs(image, &broker_request(name, vec![config])).unwrap()
        };
        // ELR off: a broker's own min.insync.replicas is a config like any.
        let (records, outcomes) = outcome(&image, "2", op(MIN_INSYNC_REPLICAS, OP_SET, Some("2")));
        assert_eq!(outcomes, [(0, None)]);
        assert!(
            matches!(&records[..], [MetadataRecord::Config(c)] if c.resource_name == "2" && c.resource_type == CONFIG_RESOURCE_BROKER)
        );

        image.features.insert("eligible.leader.replicas.version".into(), 1);
        image.broker_configs.insert(MIN_INSYNC_REPLICAS.into(), "2".into());
        let (records, outcomes) = outcome(&image, "2", op(MIN_INSYNC_REPLICAS, OP_SET, Some("2")));
        assert!(records.is_empty());
        assert_eq!(outcomes[0].0, ErrorCode::INVALID_CONFIG.code());
        assert_eq!(
            outcomes[0].1.as_deref(),
            Some("Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
        );
        let (_, outcomes) = outcome(&image, "", op(MIN_INSYNC_REPLICAS, OP_DELETE, None));
        assert_eq!(
            outcomes[0].1.as_deref(),
            Some("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
        );
        let (_, outcomes) = outcome(&image, "x", op("log.retention.ms", OP_SET, Some("1")));
        assert_eq!(outcomes[0], (ErrorCode::INVALID_REQUEST.code(), Some("Invalid broker name x".into())));

        // The cluster's value changes: every ELR is cleared (an empty topic name).
        let (records, outcomes) = outcome(&image, "", op(MIN_INSYNC_REPLICAS, OP_SET, Some("3")));
        assert_eq!(outcomes, [(0, None)]);
        assert!(matches!(&records[1], MetadataRecord::ClearElr(c) if c.topic_name.is_empty()), "{records:?}");
        for record in &records {
            image.apply(record).unwrap();
        }
        assert_eq!(image.broker_configs[MIN_INSYNC_REPLICAS], "3");
        assert!(image.topics["t"].partitions[0].elr.is_empty());
        // Another key of the cluster's leaves the ELRs alone.
        let (records, _) = outcome(&image, "", op("log.retention.ms", OP_SET, Some("1000")));
        assert_eq!(records.len(), 1);
    }
}
