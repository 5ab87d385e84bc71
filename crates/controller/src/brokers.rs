//! Broker registration and heartbeats, as Kafka's cluster control: a
//! broker registers (a `RegisterBrokerRecord`, fenced, its broker epoch the
//! record's offset), then heartbeats; once it has caught up with the
//! metadata log to its registration it is unfenced (a
//! `BrokerRegistrationChangeRecord`), and fenced again when it asks to be
//! or to shut down, or when its session expires (`BrokerSessions`: when
//! each broker was last heard of, soft state of the active controller).

use std::collections::BTreeMap;

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::register_broker_record::{BrokerEndpoint, BrokerFeature};
use krabka_protocol::{
    BrokerHeartbeatRequest, BrokerRegistrationChangeRecord, BrokerRegistrationRequest, ErrorCode, RegisterBrokerRecord,
};

use crate::elections::{
    leader_and_isr_updates, leads_any, offline_directory_updates, unclean_shutdown_updates, Touched,
};
use crate::error::ApiError;
use crate::features::check_registration_features;
use crate::partition_change::NO_LEADER;
use krabka_metadata::features::METADATA_VERSION;

/// Kafka's BrokerRegistrationFencingChange values.
const FENCE: i8 = 1;
const UNFENCE: i8 = -1;
/// Kafka's BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN.
const IN_CONTROLLED_SHUTDOWN: i8 = 1;

/// When each broker was last heard of (registered or heartbeat), on the
/// active controller (Kafka's BrokerHeartbeatManager): a broker not heard
/// of for `broker.session.timeout.ms` is fenced, and while its session is
/// valid no other incarnation may take its id.
#[derive(Clone, Debug)]
pub struct BrokerSessions {
    timeout_ms: i64,
    last_contact_ms: BTreeMap<i32, i64>,
}

impl BrokerSessions {
    pub fn new(timeout_ms: i64) -> Self {
        BrokerSessions { timeout_ms, last_contact_ms: BTreeMap::new() }
    }

    /// On becoming the active controller: every registered broker's session
    /// starts now, as Kafka's new active controller gives each one.
    pub fn start_all(&mut self, image: &MetadataImage, now_ms: i64) {
        self.last_contact_ms = image.brokers.keys().map(|&id| (id, now_ms)).collect();
    }

    pub fn touch(&mut self, broker_id: i32, now_ms: i64) {
        self.last_contact_ms.insert(broker_id, now_ms);
    }

    pub fn has_valid_session(&self, broker_id: i32, now_ms: i64) -> bool {
        self.last_contact_ms.get(&broker_id).is_some_and(|&at| now_ms - at < self.timeout_ms)
    }

    /// The records fencing every unfenced broker of `image` whose session
    /// expired, and their ids.
    pub fn plan_fence_expired(&self, image: &MetadataImage, now_ms: i64) -> (Vec<MetadataRecord>, Vec<i32>) {
        let expired: Vec<&RegisterBrokerRecord> =
            image.brokers.values().filter(|b| !b.fenced && !self.has_valid_session(b.broker_id, now_ms)).collect();
        let records = expired.iter().flat_map(|b| fencing_change(image, b, FENCE)).collect();
        (records, expired.iter().map(|b| b.broker_id).collect())
    }
}

/// The records moving `broker`'s fencing by `fenced` (FENCE or UNFENCE),
/// with the leadership that follows (`elections`): a fenced broker leaves
/// every ISR (the last member stays without Eligible Leader Replicas) and
/// its partitions elect another in-sync leader, or none; an unfenced one
/// may take the partitions left without a leader. As Kafka orders them:
/// the partitions before a fencing, after an unfencing.
fn fencing_change(image: &MetadataImage, broker: &RegisterBrokerRecord, fenced: i8) -> Vec<MetadataRecord> {
    let id = broker.broker_id;
    let change = MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id: id,
        broker_epoch: broker.broker_epoch,
        fenced,
        ..Default::default()
    });
    if fenced == FENCE {
        let mut records = leader_and_isr_updates(image, id, NO_LEADER, Touched::InIsrOf(id));
        records.push(change);
        records
    } else {
        let mut records = vec![change];
        records.extend(leader_and_isr_updates(image, NO_LEADER, id, Touched::Leaderless));
        records
    }
}

/// Kafka's controlled shutdown, first step: the broker is marked in
/// controlled shutdown, leaves every ISR and leads nothing more.
fn controlled_shutdown_change(image: &MetadataImage, broker: &RegisterBrokerRecord) -> Vec<MetadataRecord> {
    let id = broker.broker_id;
    let mut records = Vec::new();
    if !broker.in_controlled_shutdown {
        records.push(MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: id,
            broker_epoch: broker.broker_epoch,
            in_controlled_shutdown: IN_CONTROLLED_SHUTDOWN,
            ..Default::default()
        }));
    }
    records.extend(leader_and_isr_updates(image, id, NO_LEADER, Touched::InIsrOf(id)));
    records
}

/// BrokerRegistration: the record registering the broker, fenced, and its
/// broker epoch, the offset the record will have (`image` holds the whole
/// log, so that is the offset after it). As Kafka's, every registration
/// writes a new record with a new epoch; another incarnation of an id
/// that is unfenced with a valid session is refused
/// (DUPLICATE_BROKER_REGISTRATION): a broker fenced by its controlled
/// shutdown comes back at once.
pub fn plan_register_broker(
    image: &MetadataImage,
    request: &BrokerRegistrationRequest,
    cluster_id: &str,
    sessions: &BrokerSessions,
    now_ms: i64,
) -> Result<(Vec<MetadataRecord>, i64), ApiError> {
    if request.cluster_id != cluster_id {
        let message = format!("Expected cluster ID {cluster_id}, but got cluster ID {}", request.cluster_id);
        return Err(ApiError::new(ErrorCode::INCONSISTENT_CLUSTER_ID.code(), message));
    }
    if let Some(existing) = image.brokers.get(&request.broker_id) {
        // As Kafka's heartbeat manager: a fenced broker (its controlled
        // shutdown done, or its session expired) has no session to keep.
        let live = !existing.fenced && sessions.has_valid_session(request.broker_id, now_ms);
        if existing.incarnation_id != request.incarnation_id && live {
            let message = "Another broker is registered with that broker id.";
            return Err(ApiError::new(ErrorCode::DUPLICATE_BROKER_REGISTRATION.code(), message));
        }
    }
    // A log krabka wrote before it finalized features takes any broker.
    if image.features.contains_key(METADATA_VERSION) {
        check_log_dirs(image, request)?;
        check_registration_features(image, &request.features)?;
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
    // A broker registering again while the image still shows it unfenced
    // (its session ran out, not yet fenced) leaves its ISRs and
    // leadership as a fenced one does: the new incarnation starts fenced.
    let existing = image.brokers.get(&request.broker_id);
    let was_active = existing.is_some_and(|b| !b.fenced);
    // A new incarnation whose last clean shutdown was not at the epoch the
    // image holds (or that had none) may have lost unflushed records.
    let unclean = existing
        .is_none_or(|b| b.incarnation_id != request.incarnation_id && b.broker_epoch != request.previous_broker_epoch);
    let mut records = vec![MetadataRecord::RegisterBroker(record)];
    let id = request.broker_id;
    let unclean_updates = if unclean { unclean_shutdown_updates(image, id) } else { Vec::new() };
    if !unclean_updates.is_empty() {
        records.extend(unclean_updates);
    } else if was_active {
        records.extend(leader_and_isr_updates(image, id, NO_LEADER, Touched::InIsrOf(id)));
    }
    Ok((records, broker_epoch))
}

/// What a heartbeat is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// The log directories a broker registers with, as Kafka checks them
/// (metadata.version 3.7-IV2 and later): at least one, no reserved or
/// repeated id, none another broker registered.
fn check_log_dirs(image: &MetadataImage, request: &BrokerRegistrationRequest) -> Result<(), ApiError> {
    let invalid = |message: String| Err(ApiError::new(ErrorCode::INVALID_REGISTRATION.code(), message));
    if request.log_dirs.is_empty() {
        return invalid("No directories specified in request".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for dir in &request.log_dirs {
        // Kafka reserves the first 100 ids (UNASSIGNED, LOST, MIGRATING...).
        if dir.0[..15].iter().all(|&b| b == 0) && dir.0[15] < 100 {
            return invalid(format!("Reserved directory ID in request: {dir}"));
        }
        if !seen.insert(dir.0) {
            return invalid(format!("Duplicate directory ID in request: {dir}"));
        }
        let owner = image.brokers.values().find(|b| b.broker_id != request.broker_id && b.log_dirs.contains(dir));
        if let Some(owner) = owner {
            return invalid(format!("Broker {} is already registered with directory {dir}", owner.broker_id));
        }
    }
    Ok(())
}

/// The registration of `broker_id` if it carries `broker_epoch`, else
/// STALE_BROKER_EPOCH (Kafka's `checkBrokerEpoch`): a request from an old
/// incarnation, or from a broker whose registration is gone.
pub fn check_broker_epoch(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<&RegisterBrokerRecord, ApiError> {
    image.brokers.get(&broker_id).filter(|b| b.broker_epoch == broker_epoch).ok_or_else(|| {
        let message = format!("Broker {broker_id} is not registered with epoch {broker_epoch}.");
        ApiError::new(ErrorCode::STALE_BROKER_EPOCH.code(), message)
    })
}

/// BrokerHeartbeat from a registered broker of the epoch it was given
/// (else STALE_BROKER_EPOCH), as Kafka's heartbeat manager moves its
/// state: it is caught up once it has read the log to its registration; a
/// fenced broker caught up and not asking to be fenced is unfenced; one
/// asking to be fenced is fenced. One asking to shut down is first put in
/// controlled shutdown while it leads anything (its leadership moves to
/// other in-sync replicas), then, leading nothing, fenced and told to
/// shut down.
pub fn plan_broker_heartbeat(
    image: &MetadataImage,
    request: &BrokerHeartbeatRequest,
) -> Result<(Vec<MetadataRecord>, HeartbeatOutcome), ApiError> {
    check_broker_epoch(image, request.broker_id, request.broker_epoch)?;
    // Directories newly offline move their partitions first, and the
    // state change is planned on the image after them: an unfencing must
    // not elect the broker where its replica is in a failed directory.
    let offline = offline_directory_updates(image, request.broker_id, &request.offline_log_dirs);
    let after_offline;
    let image = if offline.is_empty() {
        image
    } else {
        let mut next = image.clone();
        for record in &offline {
            next.apply(record).map_err(|e| ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), e))?;
        }
        after_offline = next;
        &after_offline
    };
    let broker = check_broker_epoch(image, request.broker_id, request.broker_epoch)?;
    let is_caught_up = request.current_metadata_offset >= broker.broker_epoch;
    let next = next_state(image, broker, request, is_caught_up);
    let state_change = match next {
        BrokerState::Unfenced if broker.fenced => fencing_change(image, broker, UNFENCE),
        BrokerState::Fenced | BrokerState::ShutDownNow if !broker.fenced => fencing_change(image, broker, FENCE),
        BrokerState::ControlledShutdown => controlled_shutdown_change(image, broker),
        _ => Vec::new(),
    };
    let records = offline.into_iter().chain(state_change).collect();
    let outcome = HeartbeatOutcome {
        is_caught_up,
        is_fenced: matches!(next, BrokerState::Fenced | BrokerState::ShutDownNow),
        should_shut_down: next == BrokerState::ShutDownNow,
    };
    Ok((records, outcome))
}

/// A broker's state as Kafka's heartbeat manager names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BrokerState {
    Fenced,
    Unfenced,
    ControlledShutdown,
    ShutDownNow,
}

fn next_state(
    image: &MetadataImage,
    broker: &RegisterBrokerRecord,
    request: &BrokerHeartbeatRequest,
    is_caught_up: bool,
) -> BrokerState {
    let leads = || leads_any(image, broker.broker_id);
    if broker.fenced {
        return match (request.want_shut_down, request.want_fence || !is_caught_up) {
            (true, _) => BrokerState::ShutDownNow,
            (false, true) => BrokerState::Fenced,
            (false, false) => BrokerState::Unfenced,
        };
    }
    if broker.in_controlled_shutdown || request.want_shut_down {
        return match (request.want_fence, leads()) {
            (true, _) | (false, false) => BrokerState::ShutDownNow,
            (false, true) => BrokerState::ControlledShutdown,
        };
    }
    if request.want_fence {
        BrokerState::Fenced
    } else {
        BrokerState::Unfenced
    }
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
    fn on_a_bootstrapped_log_a_registration_needs_log_dirs_and_the_finalized_features() {
        use crate::features::plan_bootstrap_features;
        use krabka_protocol::broker_registration_request::Feature;
        let mut image = MetadataImage::default();
        let bootstrap = plan_bootstrap_features(&image, Default::default());
        apply(&mut image, &bootstrap);
        let sessions = BrokerSessions::new(9_000);
        let refused_on = |image: &MetadataImage, request: &BrokerRegistrationRequest| {
            plan_register_broker(image, request, "cluster", &sessions, 0).unwrap_err().code
        };
        let refused = |request: &BrokerRegistrationRequest| refused_on(&image, request);
        let mut request = registration(1);
        assert_eq!(refused(&request), ErrorCode::INVALID_REGISTRATION.code(), "no log dirs");
        request.log_dirs = vec![Uuid([7; 16]), Uuid([7; 16])];
        assert_eq!(refused(&request), ErrorCode::INVALID_REGISTRATION.code(), "a repeated log dir");
        let mut unassigned = [0u8; 16];
        unassigned[15] = 2;
        request.log_dirs = vec![Uuid(unassigned)];
        assert_eq!(refused(&request), ErrorCode::INVALID_REGISTRATION.code(), "a reserved log dir");
        request.log_dirs = vec![Uuid([7; 16])];
        let range = |name: &str, min, max| Feature {
            name: name.into(),
            min_supported_version: min,
            max_supported_version: max,
            ..Default::default()
        };
        let others = [
            range("group.version", 0, 1),
            range("eligible.leader.replicas.version", 0, 1),
            range("transaction.version", 0, 2),
        ];
        request.features = others.to_vec();
        assert_eq!(refused(&request), ErrorCode::INVALID_REGISTRATION.code(), "no metadata.version");
        request.features = [&[range("metadata.version", 7, 21)][..], &others].concat();
        assert_eq!(refused(&request), ErrorCode::UNSUPPORTED_VERSION.code(), "metadata.version 30 unsupported");
        request.features = [&[range("metadata.version", 7, 30)][..], &others].concat();
        let (records, _) = plan_register_broker(&image, &request, "cluster", &sessions, 0).unwrap();
        apply(&mut image, &records);
        let mut other = registration(2);
        other.broker_id = 3;
        other.features = request.features.clone();
        other.log_dirs = vec![Uuid([7; 16])];
        assert_eq!(refused_on(&image, &other), ErrorCode::INVALID_REGISTRATION.code(), "broker 2's log dir");
    }

    #[test]
    fn a_broker_registers_fenced_and_is_unfenced_once_caught_up() {
        let mut image = MetadataImage { offset: 41, ..Default::default() };
        let sessions = BrokerSessions::new(9_000);
        let e = plan_register_broker(&image, &registration(1), "other", &sessions, 0).unwrap_err();
        assert_eq!(e.code, ErrorCode::INCONSISTENT_CLUSTER_ID.code());
        let (records, epoch) = plan_register_broker(&image, &registration(1), "cluster", &sessions, 0).unwrap();
        assert_eq!(epoch, 42, "the broker epoch is the registration's offset");
        apply(&mut image, &records);
        assert!(image.brokers[&2].fenced);

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
        let (_, epoch) = plan_register_broker(&image, &registration(2), "cluster", &sessions, 0).unwrap();
        assert_eq!(epoch, image.offset + 1);
    }

    /// Brokers 1-3 (broker 2 with directories A and B), and t-0, t-1 on
    /// [2, 3, 1] led by 2, t-0's replica on 2 in A and t-1's in B.
    fn two_directories() -> (MetadataImage, [Uuid; 2]) {
        use crate::test_images::{one_partition, TOPIC};
        let dirs = [Uuid([0xa; 16]), Uuid([0xb; 16])];
        let mut image = one_partition(3, &[], &[2, 3, 1], 2);
        image.brokers.get_mut(&2).unwrap().log_dirs = dirs.to_vec();
        let topic = std::sync::Arc::make_mut(image.topics.get_mut("t").unwrap());
        let mut second = topic.partitions[0].clone();
        topic.partitions[0].directories = vec![dirs[0], Uuid([0; 16]), Uuid([0; 16])];
        second.directories = vec![dirs[1], Uuid([0; 16]), Uuid([0; 16])];
        topic.partitions.push(second);
        assert!(image.topic_by_id(&TOPIC).is_some());
        (image, dirs)
    }

    #[test]
    fn a_directory_reported_offline_moves_only_its_partitions() {
        let (mut image, [a, b]) = two_directories();
        let mut request = heartbeat(20, 100, false);
        request.offline_log_dirs = vec![a];
        let (records, outcome) = plan_broker_heartbeat(&image, &request).unwrap();
        assert!(!outcome.is_fenced, "the broker goes on serving its other directory");
        apply(&mut image, &records);
        let partitions = &image.topics["t"].partitions;
        assert_eq!((partitions[0].leader, partitions[0].isr.clone()), (3, vec![3, 1]), "t-0 is in the failed A");
        assert_eq!((partitions[1].leader, partitions[1].isr.clone()), (2, vec![2, 3, 1]), "t-1 is in B");
        assert_eq!(image.brokers[&2].log_dirs, [b]);
        // Reported again, it changes nothing more; broker 2 may not lead t-0.
        let (records, _) = plan_broker_heartbeat(&image, &request).unwrap();
        assert!(records.is_empty(), "{records:?}");
        assert!(!crate::elections::may_lead(&image, &image.topics["t"].partitions[0], 2));
    }

    #[test]
    fn an_unfencing_with_a_directory_offline_does_not_elect_the_broker_there() {
        let (mut image, [a, _]) = two_directories();
        image.brokers.get_mut(&2).unwrap().fenced = true;
        let topic = std::sync::Arc::make_mut(image.topics.get_mut("t").unwrap());
        for partition in &mut topic.partitions {
            (partition.leader, partition.isr) = (-1, vec![2]);
        }
        let mut request = heartbeat(20, 100, false);
        request.offline_log_dirs = vec![a];
        let (records, outcome) = plan_broker_heartbeat(&image, &request).unwrap();
        assert!(!outcome.is_fenced);
        apply(&mut image, &records);
        let leaders: Vec<i32> = image.topics["t"].partitions.iter().map(|p| p.leader).collect();
        assert_eq!(leaders, [-1, 2], "t-0's only in-sync replica is in the failed directory");
    }

    #[test]
    fn a_fenced_broker_leads_nothing_and_takes_its_partitions_back_when_unfenced() {
        use krabka_protocol::{PartitionRecord, TopicRecord};
        let mut image = MetadataImage::default();
        let topic = TopicRecord { name: "t".into(), topic_id: Uuid([7; 16]), ..Default::default() };
        let partition = |id, leader| PartitionRecord {
            topic_id: Uuid([7; 16]),
            partition_id: id,
            replicas: vec![leader],
            isr: vec![leader],
            leader,
            ..Default::default()
        };
        apply(&mut image, &[MetadataRecord::Topic(topic), MetadataRecord::Partition(partition(0, 2))]);
        apply(&mut image, &[MetadataRecord::Partition(partition(1, 3))]);
        let sessions = BrokerSessions::new(9_000);
        let (records, epoch) = plan_register_broker(&image, &registration(1), "cluster", &sessions, 0).unwrap();
        apply(&mut image, &records);
        let (records, _) = plan_broker_heartbeat(&image, &heartbeat(epoch, epoch, false)).unwrap();
        apply(&mut image, &records);
        let leaders = |image: &MetadataImage| image.topics["t"].partitions.iter().map(|p| p.leader).collect::<Vec<_>>();
        assert_eq!(leaders(&image), [2, 3]);
        let (records, fenced) = sessions.plan_fence_expired(&image, 9_000);
        assert_eq!(fenced, [2]);
        apply(&mut image, &records);
        assert_eq!(leaders(&image), [-1, 3], "broker 2's partition has no leader; broker 3's keeps its own");
        assert_eq!(image.topics["t"].partitions[0].isr, [2], "the last in-sync replica stays in the ISR");
        let (records, outcome) = plan_broker_heartbeat(&image, &heartbeat(epoch, image.offset, false)).unwrap();
        assert!(!outcome.is_fenced);
        apply(&mut image, &records);
        assert_eq!(leaders(&image), [2, 3]);
    }

    #[test]
    fn a_controlled_shutdown_moves_leadership_then_fences_and_lets_the_broker_go() {
        use krabka_protocol::{PartitionRecord, TopicRecord};
        let mut image = MetadataImage::default();
        let topic = TopicRecord { name: "t".into(), topic_id: Uuid([7; 16]), ..Default::default() };
        let other = RegisterBrokerRecord { broker_id: 3, broker_epoch: 1, fenced: false, ..Default::default() };
        apply(&mut image, &[MetadataRecord::Topic(topic), MetadataRecord::RegisterBroker(other)]);
        let sessions = BrokerSessions::new(9_000);
        let (records, epoch) = plan_register_broker(&image, &registration(1), "cluster", &sessions, 0).unwrap();
        apply(&mut image, &records);
        let (records, _) = plan_broker_heartbeat(&image, &heartbeat(epoch, epoch, false)).unwrap();
        apply(&mut image, &records);
        let partition = PartitionRecord {
            topic_id: Uuid([7; 16]),
            partition_id: 0,
            replicas: vec![2, 3],
            isr: vec![2, 3],
            leader: 2,
            leader_epoch: 0,
            partition_epoch: 0,
            ..Default::default()
        };
        apply(&mut image, &[MetadataRecord::Partition(partition)]);
        let mut leaving = heartbeat(epoch, image.offset, false);
        leaving.want_shut_down = true;
        let (records, outcome) = plan_broker_heartbeat(&image, &leaving).unwrap();
        assert!(!outcome.should_shut_down && !outcome.is_fenced, "it still leads: controlled shutdown first");
        apply(&mut image, &records);
        let p = &image.topics["t"].partitions[0];
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (3, vec![3], 1));
        assert!(image.brokers[&2].in_controlled_shutdown);
        let (records, outcome) = plan_broker_heartbeat(&image, &leaving).unwrap();
        assert!(outcome.should_shut_down && outcome.is_fenced, "leading nothing, it may go");
        apply(&mut image, &records);
        assert!(image.brokers[&2].fenced);
    }

    #[test]
    fn a_session_keeps_the_id_and_its_expiry_fences_the_broker() {
        let mut image = MetadataImage { offset: 9, ..Default::default() };
        let mut sessions = BrokerSessions::new(9_000);
        let (records, epoch) = plan_register_broker(&image, &registration(1), "cluster", &sessions, 0).unwrap();
        apply(&mut image, &records);
        sessions.touch(2, 1_000);
        let (records, _) = plan_broker_heartbeat(&image, &heartbeat(epoch, epoch, false)).unwrap();
        apply(&mut image, &records);
        assert!(!image.brokers[&2].fenced);
        // Another incarnation of id 2 while the session lives: refused.
        let e = plan_register_broker(&image, &registration(2), "cluster", &sessions, 9_999).unwrap_err();
        assert_eq!(e.code, ErrorCode::DUPLICATE_BROKER_REGISTRATION.code());
        assert_eq!(sessions.plan_fence_expired(&image, 9_999).1, Vec::<i32>::new(), "at the limit, still valid");
        // At exactly the timeout the session is gone: fenced, and the id is free.
        let (records, fenced) = sessions.plan_fence_expired(&image, 10_000);
        assert_eq!(fenced, [2]);
        apply(&mut image, &records);
        assert!(image.brokers[&2].fenced);
        assert!(plan_register_broker(&image, &registration(2), "cluster", &sessions, 10_000).is_ok());
        // A new active controller gives every broker a fresh session.
        sessions.start_all(&image, 20_000);
        assert!(sessions.has_valid_session(2, 28_999) && !sessions.has_valid_session(2, 29_000));
    }

    #[test]
    fn a_broker_fenced_for_its_shutdown_registers_again_within_its_session() {
        let mut image = MetadataImage { offset: 9, ..Default::default() };
        let mut sessions = BrokerSessions::new(9_000);
        let (records, epoch) = plan_register_broker(&image, &registration(1), "cluster", &sessions, 0).unwrap();
        apply(&mut image, &records);
        sessions.touch(2, 1_000);
        let (records, _) = plan_broker_heartbeat(&image, &heartbeat(epoch, epoch, false)).unwrap();
        apply(&mut image, &records);
        // Its controlled shutdown fences it; the restarted process (another
        // incarnation) registers at once, as with Kafka.
        let (records, outcome) = plan_broker_heartbeat(&image, &heartbeat(epoch, image.offset, true)).unwrap();
        apply(&mut image, &records);
        assert!(outcome.is_fenced && image.brokers[&2].fenced);
        assert!(plan_register_broker(&image, &registration(2), "cluster", &sessions, 2_000).is_ok());
    }

    /// Brokers 3, 2 and 1 of t-0 (replicas [1, 2, 3], min ISR 2, ELR on)
    /// fenced in turn: 2 and 1 stay eligible; then broker 2 registers
    /// anew after a shutdown that was clean (`previous`: its epoch) or not.
    fn elr_after_three_fencings(previous_epoch: i64) -> MetadataImage {
        use crate::features::ELR_VERSION;
        use crate::test_images::one_partition;
        let mut image = one_partition(3, &[], &[1, 2, 3], 1);
        image.features.insert(ELR_VERSION.into(), 1);
        image.broker_configs.insert("min.insync.replicas".into(), "2".into());
        for id in [3, 2, 1] {
            let broker = image.brokers[&id].clone();
            let records = fencing_change(&image, &broker, FENCE);
            apply(&mut image, &records);
        }
        let t0 = &image.topics["t"].partitions[0];
        assert_eq!((t0.leader, t0.isr.as_slice(), t0.elr.as_slice()), (-1, &[][..], &[2, 1][..]), "{t0:?}");
        let mut request = registration(9);
        request.previous_broker_epoch = previous_epoch;
        let (records, epoch) =
            plan_register_broker(&image, &request, "cluster", &BrokerSessions::new(9_000), 0).unwrap();
        apply(&mut image, &records);
        let (records, _) = plan_broker_heartbeat(&image, &heartbeat(epoch, image.offset, false)).unwrap();
        apply(&mut image, &records);
        image
    }

    #[test]
    fn an_eligible_replica_back_from_a_clean_shutdown_leads_and_one_from_a_crash_does_not() {
        let image = elr_after_three_fencings(20);
        let t0 = &image.topics["t"].partitions[0];
        assert_eq!((t0.leader, t0.isr.as_slice()), (2, &[2][..]), "elected from the ELR: {t0:?}");
        let image = elr_after_three_fencings(-1);
        let t0 = &image.topics["t"].partitions[0];
        assert_eq!(t0.leader, -1, "an unclean shutdown drops it from the ELR: {t0:?}");
        assert_eq!(t0.elr, [1]);
        assert!(!t0.last_known_elr.contains(&2), "{t0:?}");
    }
}
