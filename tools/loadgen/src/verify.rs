//! The exactly-once, in-order check of what a consumer reads back.
//!
//! As the Java workload counts each acknowledged record's copies (a
//! duplicate is a second copy, a missing record an acknowledged one never
//! read), but per partition and by producer sequence: a record's sequence is
//! its batch's base sequence plus its offset delta, and its key must be the
//! one built for that sequence ([`record_key`]), so content and position
//! agree. A record read after one with a higher sequence is out of order.
//! Records of other producers (earlier runs, other clients) are counted
//! apart and do not fail the run.

use crate::batches::record_key;

/// What one partition should hold: `acked` records from `producer_id`,
/// sequences 0..acked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectation {
    pub partition: i32,
    pub producer_id: i64,
    pub acked: u64,
}

/// One record as read.
#[derive(Debug, Clone, Copy)]
pub struct ReadRecord<'a> {
    pub partition: i32,
    pub producer_id: i64,
    pub seq: u64,
    pub key: Option<&'a [u8]>,
    pub value_len: Option<usize>,
}

/// The verdict, summed over partitions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Acknowledged records read exactly once (their first copy).
    pub verified: u64,
    pub duplicates: u64,
    pub missing: u64,
    pub out_of_order: u64,
    /// Records whose key or value size is not what their sequence says, and
    /// batches that failed their CRC.
    pub corrupt: u64,
    /// Records of another producer.
    pub foreign: u64,
    /// Records of ours past what was acknowledged (sent, ack lost or failed).
    pub unacked_consumed: u64,
}

impl Tally {
    /// Nothing lost, duplicated, reordered or damaged.
    pub fn is_clean(&self) -> bool {
        self.duplicates == 0 && self.missing == 0 && self.out_of_order == 0 && self.corrupt == 0
    }
}

/// The verdicts of several readers together.
impl std::ops::Add for Tally {
    type Output = Tally;

    fn add(self, other: Tally) -> Tally {
        Tally {
            verified: self.verified + other.verified,
            duplicates: self.duplicates + other.duplicates,
            missing: self.missing + other.missing,
            out_of_order: self.out_of_order + other.out_of_order,
            corrupt: self.corrupt + other.corrupt,
            foreign: self.foreign + other.foreign,
            unacked_consumed: self.unacked_consumed + other.unacked_consumed,
        }
    }
}

#[derive(Debug)]
struct PartitionCheck {
    expectation: Expectation,
    /// Copies read per sequence (saturating).
    seen: Vec<u8>,
    unique: u64,
    highest: Option<u64>,
}

/// How much of each record a reader checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Depth {
    /// Decode every record: its key must name its sequence, its value have
    /// the run's size.
    Records,
    /// Sequences from batch headers and the batch CRC only: exactly-once and
    /// order as strictly, contents by checksum, at a fraction of the cost.
    Batches,
}

#[derive(Debug)]
pub struct Verifier {
    depth: Depth,
    cycle_records: u64,
    record_size: usize,
    /// Index = partition.
    partitions: Vec<Option<PartitionCheck>>,
    tally: Tally,
}

impl Verifier {
    pub fn new(expectations: &[Expectation], cycle_records: u64, record_size: usize) -> Self {
        Self::with_depth(Depth::Records, expectations, cycle_records, record_size)
    }

    pub fn with_depth(depth: Depth, expectations: &[Expectation], cycle_records: u64, record_size: usize) -> Self {
        let count = expectations.iter().map(|e| e.partition as usize + 1).max().unwrap_or(0);
        let mut partitions: Vec<Option<PartitionCheck>> = (0..count).map(|_| None).collect();
        for &expectation in expectations {
            let seen = vec![0; expectation.acked as usize];
            partitions[expectation.partition as usize] =
                Some(PartitionCheck { expectation, seen, unique: 0, highest: None });
        }
        Verifier { depth, cycle_records, record_size, partitions, tally: Tally::default() }
    }

    pub fn record(&mut self, record: &ReadRecord<'_>) {
        let Some(Some(check)) = self.partitions.get_mut(record.partition as usize) else {
            self.tally.foreign += 1;
            return;
        };
        if record.producer_id != check.expectation.producer_id {
            self.tally.foreign += 1;
            return;
        }
        let key = record_key(record.partition, record.seq, self.cycle_records);
        let contents_wrong = record.key != Some(&key[..]) || record.value_len != Some(self.record_size);
        if self.depth == Depth::Records && contents_wrong {
            self.tally.corrupt += 1;
            return;
        }
        if record.seq >= check.expectation.acked {
            self.tally.unacked_consumed += 1;
            return;
        }
        let copies = &mut check.seen[record.seq as usize];
        if *copies > 0 {
            *copies = copies.saturating_add(1);
            self.tally.duplicates += 1;
            return;
        }
        *copies = 1;
        check.unique += 1;
        if check.highest.is_some_and(|highest| record.seq < highest) {
            self.tally.out_of_order += 1;
        }
        check.highest = check.highest.max(Some(record.seq));
    }

    /// Whether records are decoded and their keys and sizes checked.
    pub fn checks_contents(&self) -> bool {
        self.depth == Depth::Records
    }

    /// A batch that cannot be read (bad CRC, undecodable records).
    pub fn corrupt_batch(&mut self) {
        self.tally.corrupt += 1;
    }

    /// Every acknowledged record of `partition` has been read.
    pub fn is_complete(&self, partition: i32) -> bool {
        match self.partitions.get(partition as usize) {
            Some(Some(check)) => check.unique >= check.expectation.acked,
            _ => true,
        }
    }

    pub fn tally(&self) -> Tally {
        let checks = self.partitions.iter().flatten();
        let (verified, acked) = checks.fold((0, 0), |(v, a), c| (v + c.unique, a + c.expectation.acked));
        Tally { verified, missing: acked - verified, ..self.tally }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CYCLE: u64 = 1 << 20;

    fn verifier(acked: u64) -> Verifier {
        let expectations =
            [Expectation { partition: 0, producer_id: 7, acked }, Expectation { partition: 1, producer_id: 8, acked }];
        Verifier::new(&expectations, CYCLE, 10)
    }

    fn read(verifier: &mut Verifier, partition: i32, producer_id: i64, seqs: &[u64]) {
        for &seq in seqs {
            let key = record_key(partition, seq, CYCLE);
            verifier.record(&ReadRecord { partition, producer_id, seq, key: Some(&key), value_len: Some(10) });
        }
    }

    #[test]
    fn every_record_once_in_order_is_clean() {
        let mut v = verifier(4);
        read(&mut v, 0, 7, &[0, 1, 2, 3]);
        read(&mut v, 1, 8, &[0, 1, 2, 3]);
        assert!(v.is_complete(0) && v.is_complete(1));
        assert_eq!(v.tally(), Tally { verified: 8, ..Tally::default() });
        assert!(v.tally().is_clean());
    }

    #[test]
    fn a_duplicate_and_a_gap_are_counted_and_fail() {
        let mut v = verifier(4);
        read(&mut v, 0, 7, &[0, 1, 1, 3]);
        read(&mut v, 1, 8, &[0, 1, 2, 3]);
        let tally = v.tally();
        assert_eq!((tally.verified, tally.duplicates, tally.missing), (7, 1, 1));
        assert!(!v.is_complete(0));
        assert!(!tally.is_clean());
    }

    #[test]
    fn a_record_after_a_later_one_is_out_of_order() {
        let mut v = verifier(3);
        read(&mut v, 0, 7, &[0, 2, 1]);
        read(&mut v, 1, 8, &[0, 1, 2]);
        let tally = v.tally();
        assert_eq!((tally.verified, tally.out_of_order, tally.missing), (6, 1, 0));
        assert!(!tally.is_clean());
    }

    #[test]
    fn batch_depth_counts_sequences_without_contents() {
        let mut v =
            Verifier::with_depth(Depth::Batches, &[Expectation { partition: 0, producer_id: 7, acked: 3 }], CYCLE, 10);
        for seq in [0, 1, 1, 2] {
            v.record(&ReadRecord { partition: 0, producer_id: 7, seq, key: None, value_len: None });
        }
        let tally = v.tally();
        assert_eq!((tally.verified, tally.duplicates, tally.corrupt, tally.missing), (3, 1, 0, 0));
    }

    #[test]
    fn wrong_keys_are_corrupt_and_other_producers_foreign() {
        let mut v = verifier(1);
        let wrong = record_key(0, 5, CYCLE);
        v.record(&ReadRecord { partition: 0, producer_id: 7, seq: 0, key: Some(&wrong), value_len: Some(10) });
        read(&mut v, 0, 99, &[0]);
        read(&mut v, 5, 7, &[0]);
        read(&mut v, 1, 8, &[0, 1]);
        let tally = v.tally();
        assert_eq!((tally.corrupt, tally.foreign, tally.unacked_consumed, tally.missing), (1, 2, 1, 1));
    }
}
