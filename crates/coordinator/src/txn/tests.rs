//! The transaction coordinator driven as a broker drives it, over a log in
//! memory and a clock of the test's own.

use std::cell::Cell;

use krabka_protocol::ErrorCode;

use super::*;
use crate::runtime::Time;
use crate::testing::MemoryLog;

const PARTITIONS: usize = 3;
const ID: &str = "payments";

struct Fixture {
    log: MemoryLog,
    coordinator: TransactionCoordinator,
    next_id: Cell<i64>,
    now: Cell<i64>,
    version: i16,
}

impl Fixture {
    fn new(version: i16) -> Self {
        let config = TxnConfig { max_timeout_ms: 900_000, id_expiration_ms: 604_800_000 };
        Fixture {
            log: MemoryLog::new(PARTITIONS),
            coordinator: TransactionCoordinator::new(config, PARTITIONS),
            next_id: Cell::new(1000),
            now: Cell::new(1_000_000),
            version,
        }
    }

    fn with_host<T>(&self, call: impl FnOnce(&TransactionCoordinator, &TxnHost<'_>) -> T) -> T {
        let producer_ids = || {
            let id = self.next_id.get();
            self.next_id.set(id + 1);
            Some(id)
        };
        let now = self.now.get();
        let host = TxnHost {
            log: &self.log,
            now: Time::new(now, now),
            transaction_version: self.version,
            producer_ids: &producer_ids,
        };
        call(&self.coordinator, &host)
    }

    fn init(&self, expected: Option<(i64, i16)>) -> Answer<(i64, i16)> {
        self.with_host(|c, h| c.init_producer_id(h, ID, 60_000, expected))
    }

    fn add(&self, (pid, epoch): (i64, i16), partitions: &[(&str, i32)]) -> Result<(), ErrorCode> {
        let partitions: Vec<TopicPartition> = partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect();
        self.with_host(|c, h| c.add_partitions(h, ID, pid, epoch, &partitions, 0))
    }

    fn end(&self, (pid, epoch): (i64, i16), commit: bool) -> Answer<(i64, i16)> {
        let end = EndTxn {
            producer_id: pid,
            producer_epoch: epoch,
            commit,
            client_transaction_version: if self.version >= 2 { 2 } else { 0 },
        };
        self.with_host(|c, h| c.end_txn(h, ID, end))
    }

    fn written(&self, markers: &Markers) {
        self.with_host(|c, h| c.markers_written(h, markers)).unwrap();
    }

    fn state(&self) -> TransactionMetadata {
        self.with_host(|c, h| c.describe(h, ID)).unwrap()
    }

    /// A coordinator of the same log, loaded afresh (a restarted broker).
    fn reloaded(&self) -> (TransactionCoordinator, Vec<Markers>) {
        let config = TxnConfig { max_timeout_ms: 900_000, id_expiration_ms: 604_800_000 };
        let coordinator = TransactionCoordinator::new(config, PARTITIONS);
        let markers = coordinator.load(&self.log, Some(PARTITIONS)).unwrap();
        (coordinator, markers)
    }
}

#[test]
fn a_new_id_gets_a_producer_id_and_each_init_bumps_its_epoch() {
    let f = Fixture::new(0);
    assert_eq!(f.init(None).result, Ok((1000, 0)));
    assert_eq!(f.init(None).result, Ok((1000, 1)));
    let state = f.state();
    assert_eq!((state.state, state.producer_epoch, state.timeout_ms), (TransactionState::Empty, 1, 60_000));
    let (reloaded, markers) = f.reloaded();
    assert!(markers.is_empty());
    let host_state = f.with_host(|_, h| reloaded.describe(h, ID)).unwrap();
    // Version 0 of the value has no place for the previous producer id.
    assert_eq!(host_state, TransactionMetadata { last_producer_epoch: -1, previous_producer_id: -1, ..state });
}

#[test]
fn requests_kafka_refuses_are_refused_with_its_errors() {
    let f = Fixture::new(0);
    let init = |timeout| f.with_host(|c, h| c.init_producer_id(h, ID, timeout, None)).result;
    assert_eq!(init(0), Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT));
    assert_eq!(init(900_001), Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT));
    assert_eq!(f.with_host(|c, h| c.init_producer_id(h, "", 1000, None)).result, Err(ErrorCode::INVALID_REQUEST));
    // No producer id at hand: the producer retries.
    let none = || None;
    let host = TxnHost { log: &f.log, now: Time::new(0, 0), transaction_version: 0, producer_ids: &none };
    assert_eq!(
        f.coordinator.init_producer_id(&host, ID, 1000, None).result,
        Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
    );
    let producer = f.init(None).result.unwrap();
    assert_eq!(f.add((producer.0 + 1, producer.1), &[("t", 0)]), Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING));
    assert_eq!(f.add((producer.0, producer.1 + 1), &[("t", 0)]), Err(ErrorCode::PRODUCER_FENCED));
    assert_eq!(f.end(producer, true).result, Err(ErrorCode::INVALID_TXN_STATE));
    assert_eq!(f.with_host(|c, h| c.describe(h, "other")), Err(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND));
    // Not led here: the client looks for the coordinator again.
    f.log.set_leader_epoch(f.coordinator.partition_for(ID), None);
    assert_eq!(f.init(None).result, Err(ErrorCode::NOT_COORDINATOR));
}

#[test]
fn a_commit_is_prepared_then_completed_by_its_markers() {
    let f = Fixture::new(0);
    let producer = f.init(None).result.unwrap();
    f.add(producer, &[("orders", 1), ("orders", 0)]).unwrap();
    f.add(producer, &[("audit", 0), ("orders", 1)]).unwrap();
    assert_eq!(f.state().state, TransactionState::Ongoing);
    let ended = f.end(producer, true);
    assert_eq!(ended.result, Ok((-1, -1)));
    let markers = ended.markers.unwrap();
    assert_eq!(markers.partitions, [("audit".to_string(), 0), ("orders".to_string(), 0), ("orders".to_string(), 1)]);
    assert_eq!((markers.producer_id, markers.producer_epoch, markers.commit), (producer.0, producer.1, true));
    // While the markers are written the producer waits.
    assert_eq!(f.add(producer, &[("orders", 2)]), Err(ErrorCode::CONCURRENT_TRANSACTIONS));
    assert_eq!(f.end(producer, true).result, Err(ErrorCode::CONCURRENT_TRANSACTIONS));
    assert_eq!(f.end(producer, false).result, Err(ErrorCode::INVALID_TXN_STATE));
    assert_eq!(f.init(None).result, Err(ErrorCode::CONCURRENT_TRANSACTIONS));
    // A restart before the markers are written writes them again.
    let (_, again) = f.reloaded();
    assert_eq!(again, std::slice::from_ref(&markers));
    f.written(&markers);
    let state = f.state();
    assert_eq!(state.state, TransactionState::CompleteCommit);
    assert!(state.partitions.is_empty());
    // A retried EndTxn succeeds; the other outcome is refused.
    assert_eq!(f.end(producer, true).result, Ok((-1, -1)));
    assert_eq!(f.end(producer, false).result, Err(ErrorCode::INVALID_TXN_STATE));
    // The next transaction starts from the completed one.
    f.add(producer, &[("orders", 0)]).unwrap();
    assert_eq!(f.state().start_ms, f.now.get());
}

#[test]
fn under_transactions_v2_every_end_bumps_the_epoch() {
    let f = Fixture::new(2);
    let producer = f.init(None).result.unwrap();
    f.add(producer, &[("orders", 0)]).unwrap();
    let ended = f.end(producer, true);
    let bumped = (producer.0, producer.1 + 1);
    assert_eq!(ended.result, Ok(bumped));
    let markers = ended.markers.unwrap();
    assert_eq!((markers.producer_epoch, markers.transaction_version), (bumped.1, 2));
    // A retry of the end while markers are written waits; one after learns the epoch.
    assert_eq!(f.end(producer, true).result, Err(ErrorCode::CONCURRENT_TRANSACTIONS));
    f.written(&markers);
    assert_eq!(f.end(producer, true).result, Ok(bumped));
    assert_eq!(f.end(producer, false).result, Err(ErrorCode::INVALID_TXN_STATE));
    // An abort with nothing added is an empty transaction of its own.
    let empty = f.end(bumped, false);
    assert_eq!(empty.result, Ok((producer.0, producer.1 + 2)));
    assert!(empty.markers.unwrap().partitions.is_empty());
    // The value is written at version 1 with the client's version.
    let (reloaded, _) = f.reloaded();
    let loaded = f.with_host(|_, h| reloaded.describe(h, ID)).unwrap();
    assert_eq!((loaded.client_transaction_version, loaded.state), (2, TransactionState::PrepareAbort));
}

#[test]
fn an_exhausted_epoch_hands_the_producer_a_new_id_at_its_end() {
    let f = Fixture::new(2);
    let producer = f.init(None).result.unwrap();
    // Epoch 32766 by a state written as Kafka would have written it.
    let index = f.coordinator.partition_for(ID);
    let mut meta = f.state();
    meta.producer_epoch = i16::MAX - 1;
    let record = records::TxnRecord { transactional_id: ID.into(), value: Some(meta.to_value(1)) };
    crate::runtime::persist(&f.log, index, &[record.encode(1)], 0).unwrap();
    let (coordinator, _) = f.reloaded();
    let f = Fixture { coordinator, ..f };
    let old = (producer.0, i16::MAX - 1);
    f.add(old, &[("orders", 0)]).unwrap();
    let ended = f.end(old, true);
    // 32766 is exhausted: the markers take the last epoch, and the
    // producer goes on as a new id at epoch 0.
    let rotated = (f.next_id.get() - 1, 0);
    assert_eq!(ended.result, Ok(rotated));
    let markers = ended.markers.unwrap();
    assert_eq!((markers.producer_id, markers.producer_epoch), (producer.0, i16::MAX));
    f.written(&markers);
    let state = f.state();
    assert_eq!((state.producer_id, state.producer_epoch, state.previous_producer_id), (rotated.0, 0, producer.0));
    // The end retried from the old id and the last epoch it was given.
    assert_eq!(f.end((producer.0, i16::MAX - 1), true).result, Ok(rotated));
}

#[test]
fn a_newer_producer_fences_the_old_one_and_aborts_its_transaction() {
    let f = Fixture::new(0);
    let zombie = f.init(None).result.unwrap();
    f.add(zombie, &[("orders", 0)]).unwrap();
    let fencing = f.init(None);
    assert_eq!(fencing.result, Err(ErrorCode::CONCURRENT_TRANSACTIONS));
    let markers = fencing.markers.unwrap();
    assert_eq!((markers.producer_epoch, markers.commit), (zombie.1 + 1, false));
    assert_eq!(f.add(zombie, &[("orders", 1)]), Err(ErrorCode::PRODUCER_FENCED));
    assert_eq!(f.end(zombie, true).result, Err(ErrorCode::PRODUCER_FENCED));
    assert_eq!(f.init(None).result, Err(ErrorCode::CONCURRENT_TRANSACTIONS));
    f.written(&markers);
    assert_eq!(f.state().state, TransactionState::CompleteAbort);
    assert_eq!(f.init(None).result, Ok((zombie.0, zombie.1 + 2)));
}

#[test]
fn a_producer_retrying_its_init_keeps_the_epoch_it_was_given() {
    let f = Fixture::new(0);
    let first = f.init(None).result.unwrap();
    let second = f.init(Some(first)).result.unwrap();
    assert_eq!(second, (first.0, first.1 + 1));
    // The answer was lost; the producer asks again with its old epoch.
    assert_eq!(f.init(Some(first)).result, Ok(second));
    assert_eq!(f.init(Some((first.0, 7))).result, Err(ErrorCode::PRODUCER_FENCED));
    assert_eq!(f.init(Some((first.0 + 5, 0))).result, Err(ErrorCode::PRODUCER_FENCED));
}

#[test]
fn transactions_past_their_timeout_are_aborted_and_idle_ids_expire() {
    let f = Fixture::new(2);
    let producer = f.init(None).result.unwrap();
    f.add(producer, &[("orders", 0)]).unwrap();
    f.now.set(f.now.get() + 60_000);
    assert!(f.with_host(|c, h| c.abort_timed_out(h)).is_empty(), "not past its timeout yet");
    f.now.set(f.now.get() + 1);
    let aborted = f.with_host(|c, h| c.abort_timed_out(h));
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].commit, aborted[0].producer_epoch), (false, producer.1 + 1));
    assert_eq!(f.add(producer, &[("orders", 0)]), Err(ErrorCode::PRODUCER_FENCED));
    f.written(&aborted[0]);
    assert_eq!(f.with_host(|c, h| c.expire_ids(h)), 0);
    f.now.set(f.now.get() + 604_800_000);
    let listed = f.with_host(|c, h| c.list(h, &ListFilter { min_duration_ms: -1, ..Default::default() }));
    assert_eq!(listed, [(ID.to_string(), producer.0, TransactionState::CompleteAbort)]);
    assert_eq!(f.with_host(|c, h| c.expire_ids(h)), 1);
    assert_eq!(f.with_host(|c, h| c.describe(h, ID)), Err(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND));
    let (reloaded, _) = f.reloaded();
    assert_eq!(f.with_host(|_, h| reloaded.describe(h, ID)), Err(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND));
    // An expired id starts over with a new producer id.
    assert_eq!(f.init(None).result, Ok((producer.0 + 1, 0)));
}

#[test]
fn list_filters_by_state_producer_and_duration() {
    let f = Fixture::new(0);
    let producer = f.init(None).result.unwrap();
    f.add(producer, &[("orders", 0)]).unwrap();
    f.now.set(f.now.get() + 5_000);
    let list = |filter: ListFilter| f.with_host(|c, h| c.list(h, &filter)).len();
    let any = ListFilter { min_duration_ms: -1, ..Default::default() };
    assert_eq!(list(any), 1);
    assert_eq!(list(ListFilter { states: &[TransactionState::Empty], ..any }), 0);
    assert_eq!(list(ListFilter { producer_ids: &[producer.0], ..any }), 1);
    let payments_only = |id: &str| id.starts_with("pay");
    assert_eq!(list(ListFilter { id_matches: Some(&payments_only), ..any }), 1);
    let none = |_: &str| false;
    assert_eq!(list(ListFilter { id_matches: Some(&none), ..any }), 0);
    assert_eq!(list(ListFilter { min_duration_ms: 5_000, ..any }), 0, "strictly longer");
    assert_eq!(list(ListFilter { min_duration_ms: 4_999, ..any }), 1);
}

#[test]
fn a_new_leader_of_the_partition_writes_a_prepared_transactions_markers_again() {
    let f = Fixture::new(0);
    let producer = f.init(None).result.unwrap();
    f.add(producer, &[("orders", 0)]).unwrap();
    let markers = f.end(producer, true).markers.unwrap();
    assert!(f.coordinator.take_markers_to_rewrite(&f.log).is_empty(), "still led at the same epoch");
    // Led elsewhere, then here again at a new leader epoch.
    let index = f.coordinator.partition_for(ID);
    f.log.set_leader_epoch(index, None);
    assert_eq!(f.with_host(|c, h| c.markers_written(h, &markers)), Err(ErrorCode::NOT_COORDINATOR));
    f.log.set_leader_epoch(index, Some(1));
    let again = f.coordinator.take_markers_to_rewrite(&f.log);
    assert_eq!(again, [Markers { coordinator_epoch: 1, ..markers.clone() }]);
    // The old coordinator epoch's report changes nothing; the new one completes it.
    assert_eq!(f.with_host(|c, h| c.markers_written(h, &markers)), Err(ErrorCode::NOT_COORDINATOR));
    f.written(&again[0]);
    assert_eq!(f.state().state, TransactionState::CompleteCommit);
}
