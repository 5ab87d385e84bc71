//! Record batches built before the timed phase, so a send costs a copy, a
//! few header stores and a CRC rather than encoding and compressing records.
//!
//! Each partition's records are numbered by their producer sequence (0, 1,
//! ...) and batch k holds sequences [k·B, (k+1)·B). Every record carries the
//! Java workload's shape: an 8-byte key, a value from [`Payloads`] and the
//! headers "run" (the run id) and "ns" (when the record was built). The key
//! is (partition << 40 | sequence mod cycle): a verifier knows from the batch
//! header which sequence a record must be and checks the key agrees.
//!
//! Memory bounds what can be built ahead: a partition gets at most T full
//! batch templates (from `--template-mib`), reused round-robin, so the cycle
//! is T·B sequences. A run of N records that fit sends every record with a
//! key of its own; a longer run repeats keys and values every cycle, which
//! costs the broker the same. A partial last batch has a template of its own.

use anyhow::{ensure, Context};
use bytes::{Bytes, BytesMut};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{crc32c, offsets, NewHeader, NewRecord, RecordBatchBuilder};

use crate::payload::Payloads;

/// Bits of the key below the partition number.
const PARTITION_SHIFT: u32 = 40;
/// Key and header bytes a record adds to its value, for sizing templates.
const RECORD_OVERHEAD_BYTES: usize = 40;

/// The key of the record with producer sequence `seq` in `partition`.
pub fn record_key(partition: i32, seq: u64, cycle_records: u64) -> [u8; 8] {
    ((partition as u64) << PARTITION_SHIFT | (seq % cycle_records)).to_be_bytes()
}

/// What to build: one entry per partition (index = partition number).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Records per partition, or None when the run is timed.
    pub records: Vec<Option<u64>>,
    pub batch_records: u32,
    pub record_size: usize,
    pub compression: Compression,
    /// Uncompressed template bytes to stay under, over all partitions.
    pub budget_bytes: usize,
    pub run_id: i64,
}

impl Plan {
    /// Batches per key cycle (T): as many as the budget allows, but no more
    /// than the longest partition has, tail included, so that a run that fits
    /// has a key per record.
    fn cycle_batches(&self) -> u64 {
        let batch_bytes = self.batch_records as usize * (self.record_size + RECORD_OVERHEAD_BYTES);
        let affordable = (self.budget_bytes / (self.records.len() * batch_bytes).max(1)).max(1) as u64;
        let b = u64::from(self.batch_records);
        let needed = self.records.iter().map(|n| n.map_or(u64::MAX, |n| n.div_ceil(b))).max();
        affordable.min(needed.unwrap_or(1).max(1))
    }
}

/// One partition's templates.
#[derive(Debug)]
struct PartitionTemplates {
    records: Option<u64>,
    full: Vec<Bytes>,
    /// The partial last batch of a bounded partition.
    tail: Option<Bytes>,
}

/// Every partition's batch templates, stamped per send with [`stamp`].
#[derive(Debug)]
pub struct Templates {
    batch_records: u32,
    cycle_records: u64,
    partitions: Vec<PartitionTemplates>,
}

impl Templates {
    pub fn build(plan: &Plan, payloads: &mut Payloads) -> anyhow::Result<Self> {
        ensure!(plan.batch_records > 0 && !plan.records.is_empty(), "empty plan");
        let b = u64::from(plan.batch_records);
        let t = plan.cycle_batches();
        let cycle_records = t * b;
        let mut partitions: Vec<PartitionTemplates> =
            plan.records.iter().map(|&records| PartitionTemplates { records, full: Vec::new(), tail: None }).collect();
        let built_at = BuildTime::now();
        // Round-robin over partitions, as a producer sends, so values are
        // drawn from the pool in the order they go out.
        for k in 0..t {
            for (p, part) in partitions.iter_mut().enumerate() {
                if part.records.is_none_or(|n| (k + 1) * b <= n) {
                    let batch =
                        build_batch(plan, payloads, p as i32, k * b, plan.batch_records, cycle_records, built_at)?;
                    part.full.push(batch);
                }
            }
        }
        for (p, part) in partitions.iter_mut().enumerate() {
            if let Some(n) = part.records.filter(|n| n % b != 0) {
                let first = n - n % b;
                part.tail =
                    Some(build_batch(plan, payloads, p as i32, first, (n % b) as u32, cycle_records, built_at)?);
            }
        }
        Ok(Templates { batch_records: plan.batch_records, cycle_records, partitions })
    }

    pub fn batch_records(&self) -> u32 {
        self.batch_records
    }

    /// Sequences per key cycle: the verifier's modulus.
    pub fn cycle_records(&self) -> u64 {
        self.cycle_records
    }

    /// The template of the batch starting at `seq` (a batch boundary).
    pub fn batch(&self, partition: usize, seq: u64) -> &Bytes {
        let part = &self.partitions[partition];
        let b = u64::from(self.batch_records);
        match (&part.tail, part.records) {
            (Some(tail), Some(n)) if seq + b > n => tail,
            _ => &part.full[((seq / b) % part.full.len() as u64) as usize],
        }
    }

    /// Bytes held by all templates.
    pub fn size_bytes(&self) -> usize {
        let part_bytes = |p: &PartitionTemplates| p.full.iter().chain(&p.tail).map(Bytes::len).sum::<usize>();
        self.partitions.iter().map(part_bytes).sum()
    }
}

/// When templates were built: the records' CreateTime until a send stamps
/// the batch's, and their "ns" header (the Java workload stamps its send time
/// there; a pre-built record can only say when it was made).
#[derive(Debug, Clone, Copy)]
struct BuildTime {
    ms: i64,
    ns: i64,
}

impl BuildTime {
    fn now() -> Self {
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        BuildTime { ms: since_epoch.as_millis() as i64, ns: since_epoch.as_nanos() as i64 }
    }
}

fn build_batch(
    plan: &Plan,
    payloads: &mut Payloads,
    partition: i32,
    first_seq: u64,
    count: u32,
    cycle_records: u64,
    at: BuildTime,
) -> anyhow::Result<Bytes> {
    let run = plan.run_id.to_be_bytes();
    let ns = at.ns.to_be_bytes();
    let headers = [NewHeader { key: b"run", value: Some(&run) }, NewHeader { key: b"ns", value: Some(&ns) }];
    let mut builder = RecordBatchBuilder::new(plan.compression);
    for seq in first_seq..first_seq + u64::from(count) {
        let key = record_key(partition, seq, cycle_records);
        let record =
            NewRecord { timestamp_ms: at.ms, key: Some(&key), value: Some(payloads.next_value()), headers: &headers };
        builder.append(&record).context("building a record batch")?;
    }
    Ok(builder.build().context("building a record batch")?.into_bytes())
}

/// The header fields a send sets on a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// CreateTime of every record: the batch's base and max timestamp, the
    /// records' deltas being zero.
    pub timestamp_ms: i64,
}

/// A copy of `template` with `stamp`'s fields and a fresh CRC.
/// krabka-protocol's RecordBatchMut patches only what a leader changes, so
/// the producer fields are written here, at krabka-protocol's offsets.
pub fn stamp(template: &[u8], stamp: &Stamp) -> Bytes {
    let mut batch = BytesMut::from(template);
    let mut put = |at: usize, value: &[u8]| batch[at..at + value.len()].copy_from_slice(value);
    put(offsets::BASE_TIMESTAMP, &stamp.timestamp_ms.to_be_bytes());
    put(offsets::MAX_TIMESTAMP, &stamp.timestamp_ms.to_be_bytes());
    put(offsets::PRODUCER_ID, &stamp.producer_id.to_be_bytes());
    put(offsets::PRODUCER_EPOCH, &stamp.producer_epoch.to_be_bytes());
    put(offsets::BASE_SEQUENCE, &stamp.base_sequence.to_be_bytes());
    let crc = crc32c(&batch[offsets::ATTRIBUTES..]);
    batch[offsets::CRC..offsets::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
    batch.freeze()
}

#[cfg(test)]
mod tests {
    use krabka_protocol::records::RecordBatch;

    use super::*;
    use crate::payload::{PayloadKind, POOL_SEED};

    fn plan(records: Vec<Option<u64>>, compression: Compression, budget_bytes: usize) -> Plan {
        Plan { records, batch_records: 4, record_size: 100, compression, budget_bytes, run_id: 77 }
    }

    fn built(plan: &Plan) -> Templates {
        Templates::build(plan, &mut Payloads::new(PayloadKind::Random, plan.record_size, POOL_SEED)).unwrap()
    }

    /// The (sequence, key) of each record of a stamped batch, after checking
    /// what every record and the header must say.
    fn decode(batch: Bytes, want: &Stamp, codec: Compression) -> Vec<(u64, [u8; 8])> {
        let batch = RecordBatch::new(batch).unwrap();
        batch.validate().unwrap();
        assert_eq!(batch.compression().unwrap(), codec);
        assert_eq!((batch.producer_id(), batch.producer_epoch()), (want.producer_id, want.producer_epoch));
        assert_eq!(batch.base_sequence(), want.base_sequence);
        let records = batch.records(1 << 20).unwrap().map(Result::unwrap);
        records
            .map(|r| {
                assert_eq!(r.timestamp, want.timestamp_ms);
                assert_eq!(r.value.as_ref().map(|v| v.len()), Some(100));
                let names: Vec<_> = r.headers.iter().map(|h| h.key.to_vec()).collect();
                assert_eq!(names, [b"run".to_vec(), b"ns".to_vec()]);
                let seq = want.base_sequence as u64 + r.offset as u64;
                (seq, r.key.as_deref().unwrap().try_into().unwrap())
            })
            .collect()
    }

    #[test]
    fn stamped_batches_decode_with_valid_crc_and_their_sequences_keys() {
        for codec in Compression::ALL {
            let plan = plan(vec![Some(10), Some(9)], codec, 1 << 20);
            let templates = built(&plan);
            assert_eq!(templates.cycle_records(), 12, "3 batches of 4 cover the longer partition");
            for (partition, seq, count) in [(0, 0, 4), (0, 4, 4), (0, 8, 2), (1, 8, 1)] {
                let want = Stamp { producer_id: 42, producer_epoch: 3, base_sequence: seq as i32, timestamp_ms: 1_700 };
                let records = decode(stamp(templates.batch(partition, seq), &want), &want, codec);
                let expected: Vec<_> = (seq..seq + count).map(|s| (s, record_key(partition as i32, s, 12))).collect();
                assert_eq!(records, expected, "{codec} partition {partition} seq {seq}");
            }
        }
    }

    #[test]
    fn a_small_budget_reuses_templates_and_keys_follow_the_cycle() {
        // Room for one batch per partition: every batch is the same template.
        let plan = plan(vec![None, None], Compression::Lz4, 1);
        let templates = built(&plan);
        assert_eq!(templates.cycle_records(), 4);
        let want = Stamp { producer_id: 1, producer_epoch: 0, base_sequence: 400, timestamp_ms: 5 };
        let records = decode(stamp(templates.batch(1, 400), &want), &want, Compression::Lz4);
        assert_eq!(records[3], (403, record_key(1, 3, 4)));
        assert_eq!(records[3].1, (1u64 << 40 | 3).to_be_bytes());
    }

    #[test]
    fn stamping_leaves_the_template_alone() {
        let templates = built(&plan(vec![Some(4)], Compression::None, 1 << 20));
        let before = templates.batch(0, 0).clone();
        let want = Stamp { producer_id: 9, producer_epoch: 9, base_sequence: 0, timestamp_ms: 9 };
        let _ = stamp(templates.batch(0, 0), &want);
        assert_eq!(templates.batch(0, 0), &before);
        assert!(templates.size_bytes() >= 4 * 100);
    }
}
