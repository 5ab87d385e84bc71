//! Broker registration and heartbeats, as Kafka's cluster control: a
//! broker registers (a `RegisterBrokerRecord`, fenced, its broker epoch the
//! record's offset), then heartbeats; once it has caught up with the
//! metadata log to its registration it is unfenced (a
//! `BrokerRegistrationChangeRecord`), and fenced again when it asks to be
//! or to shut down.

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::register_broker_record::{BrokerEndpoint, BrokerFeature};
use krabka_protocol::{
    BrokerHeartbeatRequest, BrokerRegistrationChangeRecord, BrokerRegistrationRequest, ErrorCode, RegisterBrokerRecord,
};

use crate::error::ApiError;

/// Kafka's BrokerRegistrationFencingChange values.
const FENCE: i8 = 1;
const UNFENCE: i8 = -1;

/// BrokerRegistration: the record registering the broker, fenced, and its
/// broker epoch, the offset the record will have (`image` holds the whole
/// log, so that is the offset after it). A retry of the same incarnation
/// gets the epoch it was given, and writes nothing.
pub fn plan_register_broker(
    image: &MetadataImage,
    request: &BrokerRegistrationRequest,
    cluster_id: &str,
) -> Result<(Vec<MetadataRecord>, i64), ApiError> {
    if request.cluster_id != cluster_id {
        let message = format!("Expected cluster ID {cluster_id}, but got cluster ID {}", request.cluster_id);
        return Err(ApiError::new(ErrorCode::INCONSISTENT_CLUSTER_ID.code(), message));
    }
    if let Some(existing) = image.brokers.get(&request.broker_id) {
        if existing.incarnation_id == request.incarnation_id {
            return Ok((Vec::new(), existing.broker_epoch));
        }
    }
    let broker_epoch = image.offset + 1;
    let record = RegisterBrokerRecord {
        broker_id: request.broker_id,
        incarnation_id: request.incarnation_id,
        broker_epoch,
        end_points: request
            .listeners
            .iter()
            .map(|l| BrokerEndpoint {
                name: l.name.clone(),
                host: l.host.clone(),
                port: l.port,
                security_protocol: l.security_protocol,
                ..Default::default()
            })
            .collect(),
        features: request
            .features
            .iter()
            .map(|f| BrokerFeature {
                name: f.name.clone(),
                min_supported_version: f.min_supported_version,
                max_supported_version: f.max_supported_version,
                ..Default::default()
            })
            .collect(),
        rack: request.rack.clone(),
        fenced: true,
        log_dirs: request.log_dirs.clone(),
        ..Default::default()
    };
    Ok((vec![MetadataRecord::RegisterBroker(record)], broker_epoch))
}

/// What a heartbeat is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// BrokerHeartbeat from a registered broker of the epoch it was given
/// (else STALE_BROKER_EPOCH): it is caught up once it has read the log to
/// its registration; a caught-up broker that does not ask to be fenced is
/// unfenced, one that asks to be fenced or to shut down is fenced.
pub fn plan_broker_heartbeat(
    image: &MetadataImage,
    request: &BrokerHeartbeatRequest,
) -> Result<(Vec<MetadataRecord>, HeartbeatOutcome), ApiError> {
    let Some(broker) = image.brokers.get(&request.broker_id).filter(|b| b.broker_epoch == request.broker_epoch) else {
        let message = format!("Broker {} is not registered with epoch {}.", request.broker_id, request.broker_epoch);
        return Err(ApiError::new(ErrorCode::STALE_BROKER_EPOCH.code(), message));
    };
    let is_caught_up = request.current_metadata_offset >= broker.broker_epoch;
    let fence = request.want_fence || request.want_shut_down;
    let change = match (broker.fenced, fence) {
        (false, true) => Some(FENCE),
        (true, false) if is_caught_up => Some(UNFENCE),
        _ => None,
    };
    let is_fenced = match change {
        Some(change) => change == FENCE,
        None => broker.fenced,
    };
    let records = change
        .map(|fenced| {
            MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                broker_id: broker.broker_id,
                broker_epoch: broker.broker_epoch,
                fenced,
                ..Default::default()
            })
        })
        .into_iter()
        .collect();
    // Nothing leads on a broker but what it hosts alone: it may stop at once.
    let outcome = HeartbeatOutcome { is_caught_up, is_fenced, should_shut_down: request.want_shut_down };
    Ok((records, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::broker_registration_request::Listener;
    use krabka_protocol::Uuid;

    fn registration(incarnation: u8) -> BrokerRegistrationRequest {
        BrokerRegistrationRequest {
            broker_id: 2,
            cluster_id: "cluster".into(),
            incarnation_id: Uuid([incarnation; 16]),
            listeners: vec![Listener { name: "PLAINTEXT".into(), host: "h".into(), port: 9092, ..Default::default() }],
            ..Default::default()
        }
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for record in records {
            image.apply(record).unwrap();
            image.offset += 1;
        }
    }

    fn heartbeat(epoch: i64, offset: i64, want_fence: bool) -> BrokerHeartbeatRequest {
        BrokerHeartbeatRequest {
            broker_id: 2,
            broker_epoch: epoch,
            current_metadata_offset: offset,
            want_fence,
            ..Default::default()
        }
    }

    #[test]
    fn a_broker_registers_fenced_and_is_unfenced_once_caught_up() {
        let mut image = MetadataImage { offset: 41, ..Default::default() };
        let e = plan_register_broker(&image, &registration(1), "other").unwrap_err();
        assert_eq!(e.code, ErrorCode::INCONSISTENT_CLUSTER_ID.code());
        let (records, epoch) = plan_register_broker(&image, &registration(1), "cluster").unwrap();
        assert_eq!(epoch, 42, "the broker epoch is the registration's offset");
        apply(&mut image, &records);
        assert!(image.brokers[&2].fenced);
        // A retry of the same incarnation writes nothing and gets the same epoch.
        assert_eq!(plan_register_broker(&image, &registration(1), "cluster").unwrap(), (Vec::new(), 42));

        let (records, outcome) = plan_broker_heartbeat(&image, &heartbeat(42, 10, false)).unwrap();
        assert!(records.is_empty() && !outcome.is_caught_up && outcome.is_fenced, "not caught up: stays fenced");
        let (records, outcome) = plan_broker_heartbeat(&image, &heartbeat(42, 42, false)).unwrap();
        assert!(outcome.is_caught_up && !outcome.is_fenced);
        apply(&mut image, &records);
        assert!(!image.brokers[&2].fenced);
        let (records, outcome) = plan_broker_heartbeat(&image, &heartbeat(42, 43, true)).unwrap();
        assert!(outcome.is_fenced);
        apply(&mut image, &records);
        assert!(image.brokers[&2].fenced);

        let e = plan_broker_heartbeat(&image, &heartbeat(7, 43, false)).unwrap_err();
        assert_eq!(e.code, ErrorCode::STALE_BROKER_EPOCH.code(), "a heartbeat from an old incarnation");
        // A new incarnation registers again, with a new epoch.
        let (_, epoch) = plan_register_broker(&image, &registration(2), "cluster").unwrap();
        assert_eq!(epoch, image.offset + 1);
    }
}
