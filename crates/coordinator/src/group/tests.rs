//! The coordinator driven as the broker drives it, over an in-memory log
//! and a fake clock: nothing here sleeps or reads the time.

use std::sync::{Arc, Mutex};

use super::*;
use crate::testing::{image_with, MemoryLog};

const SESSION_MS: i32 = 10_000;

fn coordinator() -> GroupCoordinator {
    let config = GroupConfig {
        classic: ClassicConfig {
            min_session_timeout_ms: 1_000,
            max_session_timeout_ms: 60_000,
            initial_rebalance_delay_ms: 0,
            max_size: 10,
        },
        consumer: ConsumerConfig { session_timeout_ms: 45_000, heartbeat_interval_ms: 5_000, max_size: 10 },
        offsets_partitions: 3,
        offsets_retention_ms: 60_000,
        offset_metadata_max_bytes: 4096,
    };
    GroupCoordinator::new(config, 3)
}

/// A coordinator as a broker starts it: loaded from `log` (empty shards
/// for an empty log), which it leads.
fn loaded(log: &MemoryLog) -> GroupCoordinator {
    let groups = coordinator();
    groups.load(log, None, Time::new(0, 0)).unwrap();
    groups
}

fn host(log: &MemoryLog, now: Time) -> GroupHost<'_> {
    GroupHost { log, image: Arc::new(MetadataImage::default()), now }
}

/// A waiter that keeps what it was called with.
fn waiter<T: Send + 'static>() -> (Waiter<T>, Arc<Mutex<Option<T>>>) {
    let slot = Arc::new(Mutex::new(None));
    let kept = slot.clone();
    (Box::new(move |value| *kept.lock().unwrap() = Some(value)), slot)
}

fn join_request() -> JoinRequest {
    JoinRequest {
        member_id: String::new(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: false,
    }
}

/// One member joins and syncs: a Stable group of generation 1.
fn stable_group(groups: &GroupCoordinator, log: &MemoryLog, now: Time) -> String {
    let (join_waiter, joined) = waiter();
    assert_eq!(groups.join(&host(log, now), "g", join_request(), join_waiter), Outcome::Wait);
    let joined = joined.lock().unwrap().take().expect("the join completed at once");
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    assert_eq!(joined.leader, joined.member_id);
    let member = joined.member_id;
    let (sync_waiter, synced) = waiter();
    let assignment = vec![(member.clone(), Bytes::from_static(b"all"))];
    assert_eq!(groups.sync(&host(log, now), "g", &member, 1, assignment, sync_waiter), Outcome::Wait);
    assert_eq!(synced.lock().unwrap().take().expect("the leader's sync completed").assignment, "all");
    member
}

#[test]
fn a_silent_member_expires_on_the_fake_clock_and_the_empty_group_is_persisted() {
    let log = MemoryLog::new(3);
    let groups = loaded(&log);
    let start = Time::new(1_700_000_000_000, 0);
    let member = stable_group(&groups, &log, start);
    let shard = groups.partition_for("g");
    assert_eq!(log.batches(shard), 1, "the Stable generation was persisted");
    assert_eq!(groups.describe_group("g").unwrap().state, "Stable");

    // Heartbeats keep the member; the session runs from the last one.
    assert_eq!(groups.heartbeat("g", &member, 1, start.plus_ms(6_000)), 0);
    groups.tick(&host(&log, start.plus_ms(15_000)));
    assert_eq!(groups.describe_group("g").unwrap().state, "Stable");
    assert_eq!(log.batches(shard), 1);

    // Silent past its session timeout: removed, and the group is Empty.
    groups.tick(&host(&log, start.plus_ms(6_000 + i64::from(SESSION_MS) + 1)));
    let described = groups.describe_group("g").unwrap();
    assert_eq!((described.state.as_str(), described.members.len()), ("Empty", 0));
    assert_eq!(log.batches(shard), 2, "the Empty generation was persisted");
    assert_eq!(groups.heartbeat("g", &member, 1, start.plus_ms(20_000)), ErrorCode::UNKNOWN_MEMBER_ID.code());

    // A restart replays the log into the same state.
    let reloaded = coordinator();
    assert_eq!(reloaded.load(&log, None, start.plus_ms(30_000)), Ok(2));
    assert_eq!(reloaded.describe_group("g").unwrap().state, "Empty");
    assert_eq!(reloaded.list_groups(), vec![("g".into(), "consumer".into(), "Empty".into(), "classic")]);
}

#[test]
fn a_restored_member_must_heartbeat_within_its_session_from_the_load() {
    let log = MemoryLog::new(3);
    let start = Time::new(1_700_000_000_000, 0);
    let member = stable_group(&coordinator(), &log, start);
    // The broker restarts an hour later; its monotonic clock starts afresh.
    let restart = Time::new(start.wall_ms + 3_600_000, 0);
    let groups = coordinator();
    groups.load(&log, None, restart).unwrap();
    groups.tick(&host(&log, restart.plus_ms(i64::from(SESSION_MS) - 1)));
    assert_eq!(groups.heartbeat("g", &member, 1, restart.plus_ms(i64::from(SESSION_MS) - 1)), 0);
    groups.tick(&host(&log, restart.plus_ms(2 * i64::from(SESSION_MS))));
    assert_eq!(groups.describe_group("g").unwrap().state, "Empty");
}

#[test]
fn nothing_changes_when_the_log_refuses_the_records() {
    let log = MemoryLog::new(3);
    let groups = loaded(&log);
    let now = Time::new(1_700_000_000_000, 0);
    let offsets = vec![("t".to_string(), 0, 42, -1, None)];
    // Unknown topics are refused before anything is written.
    let codes = groups.commit_offsets(&host(&log, now), "g", "", None, -1, &offsets);
    assert_eq!(codes, vec![ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()]);
    assert_eq!(groups.delete_group(&host(&log, now), "missing"), ErrorCode::GROUP_ID_NOT_FOUND.code());
    log.fail_appends(ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
    groups.tick(&host(&log, now));
    assert_eq!(groups.delete_group(&host(&log, now), "g"), ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
    assert!(groups.describe_group("g").is_some(), "the group stays until its deletion is persisted");
}

#[test]
fn offsets_of_an_empty_group_expire_after_the_retention_on_the_fake_clock() {
    let log = MemoryLog::new(3);
    let groups = loaded(&log);
    let start = Time::new(1_700_000_000_000, 0);
    let image = Arc::new(image_with("t", 2).0);
    let at = |now: Time| GroupHost { log: &log, image: image.clone(), now };
    let offsets = vec![("t".to_string(), 0, 42, 3, Some("m".to_string())), ("t".to_string(), 5, 1, -1, None)];
    let codes = groups.commit_offsets(&at(start), "g", "", None, -1, &offsets);
    assert_eq!(codes, vec![0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()]);
    let committed = CommittedOffset {
        offset: 42,
        leader_epoch: 3,
        metadata: "m".into(),
        commit_timestamp_ms: start.wall_ms,
        record_offset: 0,
    };
    let fetched = groups.fetch_offsets("g", None);
    assert_eq!(fetched, vec![("t".to_string(), vec![(0, Some(committed.clone()))])]);

    // offsets.retention (60 s here) counts from when the group emptied.
    groups.expire_offsets(&at(start.plus_ms(59_999)));
    assert_eq!(groups.fetch_offsets("g", None).len(), 1);
    groups.expire_offsets(&at(start.plus_ms(60_000)));
    assert!(groups.fetch_offsets("g", None).is_empty());
    assert!(groups.describe_group("g").is_none(), "a group with nothing left goes too");

    // The log says the same: commit, then the offset's and the group's tombstones.
    let reloaded = coordinator();
    assert_eq!(reloaded.load(&log, None, start.plus_ms(70_000)), Ok(3));
    assert!(reloaded.describe_group("g").is_none());
}

#[test]
fn a_coordinator_that_comes_to_lead_a_partition_replays_what_its_leader_wrote_meanwhile() {
    // One log seen by two nodes: A leads its partitions, B follows (its
    // replica holds what A wrote, its shards do not).
    let log = MemoryLog::new(3);
    let now = Time::new(1_700_000_000_000, 0);
    let (a, b) = (coordinator(), coordinator());
    let shard = a.partition_for("g");
    log.set_leader_epoch(shard, None);
    b.load(&log, None, now).unwrap();
    log.set_leader_epoch(shard, Some(0));
    let member = stable_group(&a, &log, now);
    assert!(b.describe_group("g").is_none(), "B has not read it");
    assert!(b.follow_leadership(&host(&log, now), shard), "B leads it at epoch 0, which it was not loaded at");
    assert_eq!(b.describe_group("g").unwrap().state, "Stable");
    // Leadership moves to B at a new epoch: B replays the partition.
    log.set_leader_epoch(shard, Some(1));
    assert!(b.follow_leadership(&host(&log, now), shard));
    assert_eq!(b.describe_group("g").unwrap().state, "Stable");
    assert_eq!(b.heartbeat("g", &member, 1, now.plus_ms(1)), 0, "the member is known to the new coordinator");
    // A partition nobody here leads is not coordinated: it is unloaded,
    // and replayed when it is led here again (its member never expired).
    log.set_leader_epoch(shard, None);
    assert!(!b.follow_leadership(&host(&log, now), shard));
    assert!(b.describe_group("g").is_none(), "a partition not led here is unloaded");
    b.tick(&host(&log, now.plus_ms(10 * i64::from(SESSION_MS))));
    log.set_leader_epoch(shard, Some(2));
    assert!(b.follow_leadership(&host(&log, now), shard));
    assert_eq!(b.describe_group("g").unwrap().state, "Stable");
}

#[test]
fn a_parked_join_is_answered_not_coordinator_when_the_partition_moves_away() {
    let log = MemoryLog::new(3);
    let now = Time::new(1_700_000_000_000, 0);
    let groups = loaded(&log);
    let shard = groups.partition_for("g");
    let first = stable_group(&groups, &log, now);
    // A second member starts a rebalance that waits for the first to rejoin.
    let (join_waiter, joined) = waiter();
    assert_eq!(groups.join(&host(&log, now), "g", join_request(), join_waiter), Outcome::Wait);
    assert!(joined.lock().unwrap().is_none(), "parked for the rebalance");
    // Leadership moves away: the next clock tick unloads the partition.
    log.set_leader_epoch(shard, None);
    groups.tick(&host(&log, now.plus_ms(100)));
    let answer = joined.lock().unwrap().take().expect("answered once the partition moved away");
    assert_eq!((answer.error_code, answer.generation_id), (ErrorCode::NOT_COORDINATOR.code(), -1));
    assert!(!answer.member_id.is_empty() && answer.member_id != first, "with its own member id, to join again with");
    assert!(groups.describe_group("g").is_none());
    // Led here again: the group is what the log says (the second member
    // never completed a generation), its first member still known.
    log.set_leader_epoch(shard, Some(1));
    assert!(groups.follow_leadership(&host(&log, now), shard));
    let described = groups.describe_group("g").unwrap();
    assert_eq!((described.state.as_str(), described.members.len()), ("Stable", 1));
    assert_eq!(groups.heartbeat("g", &first, 1, now.plus_ms(200)), 0);
}

#[test]
fn shutting_down_answers_parked_joins_and_syncs_and_parks_nothing_more() {
    let log = MemoryLog::new(3);
    let now = Time::new(1_700_000_000_000, 0);
    let groups = loaded(&log);
    let first = stable_group(&groups, &log, now);
    let (join_waiter, joined) = waiter();
    assert_eq!(groups.join(&host(&log, now), "g", join_request(), join_waiter), Outcome::Wait);
    groups.unload_all();
    let not_coordinator = ErrorCode::NOT_COORDINATOR.code();
    assert_eq!(joined.lock().unwrap().take().expect("answered at shutdown").error_code, not_coordinator);
    // The first member's rejoin and sync are answered at once, not parked.
    let rejoin = JoinRequest { member_id: first.clone(), ..join_request() };
    let (join_waiter, _) = waiter();
    match groups.join(&host(&log, now), "g", rejoin, join_waiter) {
        Outcome::Now(answer) => assert_eq!((answer.error_code, answer.member_id), (not_coordinator, first.clone())),
        Outcome::Wait => panic!("a join parked after shutdown"),
    }
    let (sync_waiter, _) = waiter();
    match groups.sync(&host(&log, now), "g", &first, 1, Vec::new(), sync_waiter) {
        Outcome::Now(answer) => assert_eq!(answer.error_code, not_coordinator),
        Outcome::Wait => panic!("a sync parked after shutdown"),
    }
}

#[test]
fn offsets_committed_in_a_transaction_count_once_it_commits_also_after_a_reload() {
    use krabka_protocol::records::transaction_marker_batch;
    let log = MemoryLog::new(3);
    let groups = loaded(&log);
    let now = Time::new(1_700_000_000_000, 0);
    let image = Arc::new(image_with("t", 2).0);
    let host = GroupHost { log: &log, image, now };
    let committer = |producer_id| transactional::TxnCommitter {
        producer_id,
        producer_epoch: 0,
        member_id: "",
        group_instance_id: None,
        generation_id: -1,
    };
    let offsets = |offset| vec![("t".to_string(), 0, offset, -1, None)];
    assert_eq!(groups.commit_transactional_offsets(&host, "g", committer(7), &offsets(10)), vec![0]);
    assert_eq!(groups.commit_transactional_offsets(&host, "g", committer(8), &offsets(20)), vec![0]);
    assert!(groups.fetch_offsets("g", None).iter().all(|(_, p)| p.iter().all(|(_, o)| o.is_none())));
    assert_eq!(groups.pending_partitions("g"), [("t".to_string(), 0), ("t".to_string(), 0)]);
    // Producer 7 commits, producer 8 aborts: markers on the group's partition.
    let index = groups.partition_for("g");
    for (producer_id, commit) in [(7, true), (8, false)] {
        let marker = transaction_marker_batch(producer_id, 0, commit, 0, now.wall_ms).unwrap();
        log.append(index, &marker, now.wall_ms).unwrap();
        groups.complete_transaction(index, producer_id, commit, now);
    }
    let offset_of = |groups: &GroupCoordinator| {
        groups.fetch_offsets("g", None).into_iter().flat_map(|(_, p)| p).find_map(|(_, o)| o).map(|o| o.offset)
    };
    assert_eq!(offset_of(&groups), Some(10));
    assert!(groups.pending_partitions("g").is_empty());
    // A reload reads the same from the log: the markers decide.
    let reloaded = loaded(&log);
    assert_eq!(offset_of(&reloaded), Some(10));
    assert!(reloaded.pending_partitions("g").is_empty());

    // A plain commit written while a transaction's commit of the same
    // partition is open wins over it (the later record), and a
    // transaction's commit written after a plain one wins over that.
    let end = |producer_id, groups: &GroupCoordinator| {
        let marker = transaction_marker_batch(producer_id, 0, true, 0, now.wall_ms).unwrap();
        log.append(index, &marker, now.wall_ms).unwrap();
        groups.complete_transaction(index, producer_id, true, now);
    };
    assert_eq!(groups.commit_transactional_offsets(&host, "g", committer(9), &offsets(30)), vec![0]);
    assert_eq!(groups.commit_offsets(&host, "g", "", None, -1, &offsets(40)), vec![0]);
    end(9, &groups);
    assert_eq!(offset_of(&groups), Some(40));
    assert_eq!(offset_of(&loaded(&log)), Some(40));
    assert_eq!(groups.commit_offsets(&host, "g", "", None, -1, &offsets(50)), vec![0]);
    assert_eq!(groups.commit_transactional_offsets(&host, "g", committer(10), &offsets(60)), vec![0]);
    end(10, &groups);
    assert_eq!(offset_of(&groups), Some(60));
    assert_eq!(offset_of(&loaded(&log)), Some(60));
}
