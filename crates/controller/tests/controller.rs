//! The controller over a real partition log in a temporary directory, with
//! a fixed clock: the per-request limits, the commit backstop, replay, and
//! the metadata-writing operations.

use std::path::Path;

use krabka_controller::delete_topics::plan_delete_topics;
use krabka_controller::error::unlimited_mutations;
use krabka_controller::partitions::plan_create_partitions;
use krabka_controller::placement::Placer;
use krabka_controller::producer_ids::{plan_allocate_producer_ids, ProducerIdBlocks, PRODUCER_ID_BLOCK_SIZE};
use krabka_controller::topics::{check_total_partitions, plan_create_topics, topic_records};
use krabka_controller::{
    ApiError, Controller, MetadataError, NewTopic, Placement, TopicDefaults, MAX_RECORDS_PER_USER_OP,
};
use krabka_log::{LogConfig, PartitionLog, ReplicatedLog};
use krabka_metadata::MetadataRecord;
use krabka_protocol::create_partitions_request::CreatePartitionsTopic;
use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::{CreatePartitionsRequest, CreateTopicsRequest, ErrorCode, ProducerIdsRecord, Uuid};
use krabka_raft::SingleVoter;

/// The fake clock: every call passes the same time.
const NOW_MS: i64 = 1_700_000_000_000;
const NODE: i32 = 1;

fn open(dir: &Path) -> Controller<PartitionLog> {
    let (log, _) = PartitionLog::open(dir, LogConfig::default(), 0, 0, true, NOW_MS).unwrap();
    let (voter, snapshot) = SingleVoter::open(log, u64::MAX, NOW_MS).unwrap();
    Controller::open(voter, snapshot).unwrap()
}

fn defaults() -> TopicDefaults {
    TopicDefaults { num_partitions: 1, replication_factor: 1, placement: Placement::OnlyNode(NODE) }
}

fn request(partitions: &[i32], validate_only: bool) -> CreateTopicsRequest {
    let topics = partitions
        .iter()
        .enumerate()
        .map(|(i, &num_partitions)| CreatableTopic {
            name: format!("t{i}"),
            num_partitions,
            replication_factor: -1,
            ..Default::default()
        })
        .collect();
    CreateTopicsRequest { topics, validate_only, ..Default::default() }
}

fn assert_policy_violation(e: &ApiError, message: &str) {
    assert_eq!(e.code, ErrorCode::POLICY_VIOLATION.code());
    assert_eq!(e.message, message);
}

const TOO_MANY_PARTITIONS: &str = "Excessively large number of partitions per request.";
const TOO_MANY_RECORDS: &str = "Unable to perform excessively large batch operation.";

#[test]
fn exactly_ten_thousand_partitions_pass_the_request_check_one_more_does_not() {
    assert_eq!(MAX_RECORDS_PER_USER_OP, 10_000);
    check_total_partitions(&request(&[10_000], false), 1).unwrap();
    check_total_partitions(&request(&[4_000, 6_000], false), 1).unwrap();
    assert_policy_violation(&check_total_partitions(&request(&[10_001], false), 1).unwrap_err(), TOO_MANY_PARTITIONS);
    assert_policy_violation(
        &check_total_partitions(&request(&[5_000, 5_001], false), 1).unwrap_err(),
        TOO_MANY_PARTITIONS,
    );
    // -1 counts as num.partitions.
    check_total_partitions(&request(&[-1, 9_999], true), 1).unwrap();
    assert_policy_violation(&check_total_partitions(&request(&[-1, 9_999], true), 2).unwrap_err(), TOO_MANY_PARTITIONS);
}

#[test]
fn ten_thousand_and_one_partitions_fail_the_whole_request_and_commit_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    for validate_only in [false, true] {
        let Err(e) = controller.commit(
            |image| {
                plan_create_topics(image, &request(&[1, 10_000], validate_only), &defaults(), &mut unlimited_mutations)
            },
            NOW_MS,
        ) else {
            panic!("10,001 partitions were accepted");
        };
        assert_policy_violation(&e, TOO_MANY_PARTITIONS);
    }
    assert_eq!(controller.voter().log().log_end_offset(), 0);
    assert!(controller.image().topics.is_empty());
}

#[test]
fn a_create_topics_of_exactly_the_record_limit_commits_one_past_it_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    // 10,000 partitions pass the partition check, but with the TopicRecord
    // they are 10,001 records: Kafka refuses the batch, validate-only too.
    for validate_only in [false, true] {
        let Err(e) = controller.commit(
            |image| {
                plan_create_topics(image, &request(&[10_000], validate_only), &defaults(), &mut unlimited_mutations)
            },
            NOW_MS,
        ) else {
            panic!("10,001 records were accepted");
        };
        assert_policy_violation(&e, TOO_MANY_RECORDS);
    }
    assert_eq!(controller.voter().log().log_end_offset(), 0);
    // 9,999 partitions and the topic: exactly 10,000 records, one batch.
    let commit = controller
        .commit(
            |image| plan_create_topics(image, &request(&[9_999], false), &defaults(), &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap();
    let (name, topic) = &commit.result[0];
    assert_eq!((name.as_str(), topic.as_ref().unwrap().partitions), ("t0", 9_999));
    let committed = commit.committed.unwrap();
    assert_eq!((committed.first_offset, committed.last_offset), (0, 9_999));
    assert_eq!(controller.image().topic("t0").unwrap().partitions.len(), 9_999);
}

#[test]
fn validate_only_counts_but_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    let commit = controller
        .commit(
            |image| plan_create_topics(image, &request(&[3, -1], true), &defaults(), &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap();
    assert!(commit.committed.is_none());
    assert!(commit.result.iter().all(|(_, topic)| topic.is_ok()));
    assert!(controller.image().topics.is_empty());
}

#[test]
fn the_commit_backstop_refuses_an_oversized_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    let record = MetadataRecord::ProducerIds(ProducerIdsRecord { next_producer_id: 1, ..Default::default() });
    let at_limit = vec![record.clone(); MAX_RECORDS_PER_USER_OP];
    let commit = controller.commit(|_| Ok::<_, MetadataError>((at_limit, ())), NOW_MS).unwrap();
    assert_eq!(commit.committed.unwrap().last_offset, MAX_RECORDS_PER_USER_OP as i64 - 1);
    let over = vec![record; MAX_RECORDS_PER_USER_OP + 1];
    let refused = controller.commit(|_| Ok::<_, MetadataError>((over, ())), NOW_MS).err().unwrap();
    assert!(matches!(refused, MetadataError::TooManyRecords { records: 10_001 }), "{refused:?}");
    assert_eq!(controller.voter().log().log_end_offset(), MAX_RECORDS_PER_USER_OP as i64);
    assert_policy_violation(&ApiError::from(refused), TOO_MANY_RECORDS);
}

#[test]
fn topic_records_builds_what_it_is_given_the_callers_budget_it() {
    let topic = NewTopic {
        name: "big".into(),
        partitions: 20_000,
        configs: Default::default(),
        assignments: Vec::new(),
        replication_factor: 1,
    };
    let image = krabka_metadata::MetadataImage::default();
    let mut placer = Placer::new(&image, Placement::OnlyNode(NODE));
    assert_eq!(topic_records(&image, &mut placer, &topic).unwrap().len(), topic.record_count());
}

#[test]
fn a_reopened_controller_replays_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    controller
        .commit(
            |image| plan_create_topics(image, &request(&[2, 3], false), &defaults(), &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap();
    let grow = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic { name: "t0".into(), count: 4, assignments: None, ..Default::default() }],
        ..Default::default()
    };
    let results = controller
        .commit(
            |image| plan_create_partitions(image, &grow, Placement::OnlyNode(NODE), &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap()
        .result;
    assert_eq!(results[0].error_code, 0);
    let deleted = controller
        .commit(
            |image| plan_delete_topics(image, &[(Some("t1".into()), Uuid::ZERO)], true, &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap()
        .result;
    assert_eq!(deleted[0].error_code, 0);
    let image = controller.image().clone();
    drop(controller);
    let reopened = open(dir.path());
    assert_eq!(reopened.image().offset, image.offset);
    assert_eq!(reopened.image().topics.len(), 1);
    assert_eq!(reopened.image().topic("t0").unwrap().partitions.len(), 4);
    assert!(reopened.image().topic("t1").is_none());
}

/// A controller over the log after its newest snapshot, as the broker
/// opens it, that snapshots after every `snapshot_every_bytes` committed.
fn open_snapshotting(dir: &Path, snapshot_every_bytes: u64) -> Controller<PartitionLog> {
    let log = krabka_log::open_replicated_log(dir, LogConfig::default(), false, NOW_MS).unwrap();
    let (voter, snapshot) = SingleVoter::open(log, snapshot_every_bytes, NOW_MS).unwrap();
    Controller::open(voter, snapshot).unwrap()
}

#[test]
fn a_due_snapshot_is_written_and_a_reopen_starts_from_it_plus_the_log_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open_snapshotting(dir.path(), 0);
    let commit = controller
        .commit(
            |image| plan_create_topics(image, &request(&[2, 3], false), &defaults(), &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap();
    let end = commit.committed.unwrap().high_watermark;
    assert_eq!(commit.committed.unwrap().snapshot_due, Some(end));
    let snapshot = controller.voter().log().latest_snapshot().unwrap().unwrap();
    assert_eq!(snapshot.0.end_offset, end);
    assert_eq!(controller.voter().log().log_start_offset(), end, "the log the snapshot covers is gone");
    drop(controller);
    // Far from due: the next commit stays in the log only.
    let mut controller = open_snapshotting(dir.path(), u64::MAX);
    assert_eq!(controller.image().topics.len(), 2);
    let deleted = controller
        .commit(
            |image| plan_delete_topics(image, &[(Some("t1".into()), Uuid::ZERO)], true, &mut unlimited_mutations),
            NOW_MS,
        )
        .unwrap()
        .result;
    assert_eq!(deleted[0].error_code, 0);
    let image = controller.image().clone();
    drop(controller);
    let reopened = open_snapshotting(dir.path(), u64::MAX);
    assert_eq!(reopened.image().offset, image.offset);
    assert_eq!(reopened.image().topic("t0").unwrap().partitions.len(), 2);
    assert!(reopened.image().topic("t1").is_none());
    assert_eq!(reopened.voter().log().latest_snapshot().unwrap().unwrap().0.end_offset, end);
}

#[test]
fn a_log_that_starts_past_every_snapshot_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open_snapshotting(dir.path(), 0);
    controller
        .commit(|image| plan_create_topics(image, &request(&[1], false), &defaults(), &mut unlimited_mutations), NOW_MS)
        .unwrap();
    drop(controller);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "checkpoint") && path.to_string_lossy().contains("-00000") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let (log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 1, 1, false, NOW_MS).unwrap();
    let (voter, snapshot) = SingleVoter::open(log, u64::MAX, NOW_MS).unwrap();
    assert!(snapshot.is_none());
    let Err(MetadataError::Corrupt { offset: 0, .. }) = Controller::open(voter, snapshot) else {
        panic!("a log without its start opened");
    };
}

#[test]
fn producer_ids_are_unique_across_blocks_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    let blocks = ProducerIdBlocks::new(NODE);
    let allocate = |controller: &mut Controller<PartitionLog>| {
        blocks
            .allocate(|node| {
                controller.commit(|image| plan_allocate_producer_ids(image, node), NOW_MS).map(|c| c.result)
            })
            .unwrap()
    };
    let ids: Vec<i64> = (0..PRODUCER_ID_BLOCK_SIZE + 2).map(|_| allocate(&mut controller)).collect();
    assert_eq!(ids, (0..PRODUCER_ID_BLOCK_SIZE + 2).collect::<Vec<_>>());
    assert_eq!(controller.image().next_producer_id_block, 2 * PRODUCER_ID_BLOCK_SIZE);
    drop(controller);
    // A restart abandons what is left of its block.
    let mut controller = open(dir.path());
    let blocks = ProducerIdBlocks::new(NODE);
    let id = blocks
        .allocate(|node| controller.commit(|image| plan_allocate_producer_ids(image, node), NOW_MS).map(|c| c.result))
        .unwrap();
    assert_eq!(id, 2 * PRODUCER_ID_BLOCK_SIZE);
}

/// KIP-599: each topic created, deleted or grown asks the quota for its
/// partitions; a refusal is that topic's outcome and the others go on.
#[test]
fn a_refused_mutation_fails_only_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let mut controller = open(dir.path());
    let mut asked = Vec::new();
    let mut refuse_second = |partitions: usize| {
        asked.push(partitions);
        if asked.len() == 2 {
            Err(ApiError::new(89, "The throttling quota has been exceeded."))
        } else {
            Ok(())
        }
    };
    let created = controller
        .commit(|image| plan_create_topics(image, &request(&[2, 3, 4], false), &defaults(), &mut refuse_second), NOW_MS)
        .unwrap();
    let outcomes: Vec<Option<i16>> = created.result.iter().map(|(_, o)| o.as_ref().err().map(|e| e.code)).collect();
    assert_eq!(outcomes, [None, Some(89), None]);
    assert_eq!(asked, [2, 3, 4]);
    let image = controller.image();
    assert!(image.topic("t0").is_some() && image.topic("t1").is_none() && image.topic("t2").is_some());
}
