//! Hand-made records judged against a small two-cell contract.

use std::collections::BTreeMap;

use crate::contract::{self, Contract, METRICS};
use crate::judge::{self, Outcome, Status, Verdict};
use crate::record::{Mode, Record, Refusal, Side, SideInfo, Sides, Trial};
use crate::report;

const CONTRACT: &str = r#"{
  "version": 1,
  "kafka_version": "4.3.1",
  "rounds": { "minimum": 5, "alternate_first_side": true },
  "cells": [
    { "name": "a", "record_bytes": 1024, "payload": "random", "compression": "lz4", "partitions": 12, "load": "saturate" },
    { "name": "b", "record_bytes": 100, "payload": "zeros", "compression": "none", "partitions": 12, "load": "rate",
      "target_records_per_second": 20000 }
  ],
  "metrics": {
    "records_per_second": { "better": "higher", "unit": "records/s", "regression_budget": 0.05, "variance_budget": 0.10, "materiality_floor": 1000 },
    "cpu_us_per_record": { "better": "lower", "unit": "us/record", "regression_budget": 0.05, "variance_budget": 0.10, "materiality_floor": 0.05 },
    "peak_rss_bytes": { "better": "lower", "unit": "bytes", "regression_budget": 0.10, "variance_budget": 0.10, "materiality_floor": 8388608 },
    "p99_latency_ms": { "better": "lower", "unit": "ms", "regression_budget": 0.10, "variance_budget": 0.20, "materiality_floor": 1.0 }
  }
}"#;

/// Typical values: 100k records/s, 10 µs/record, 200 MB, p99 5 ms.
const BASE: [f64; 4] = [100_000.0, 10.0, 200e6, 5.0];

fn contract() -> (Contract, String) {
    (Contract::from_bytes(CONTRACT.as_bytes()).unwrap(), contract::sha256_hex(CONTRACT.as_bytes()))
}

/// Small deterministic round-to-round jitter: -1%, 0, +1%.
fn jitter(round: u32) -> f64 {
    1.0 + 0.01 * (f64::from(round % 3) - 1.0)
}

/// A record with `rounds` rounds of cells `a` and `b`; the candidate runs first in even rounds.
fn record(mode: Mode, digest: &str, rounds: u32, values: impl Fn(&str, u32, Side) -> [f64; 4]) -> Record {
    let mut trials = Vec::new();
    for cell in ["a", "b"] {
        for round in 0..rounds {
            for side in [Side::Candidate, Side::Reference] {
                let first = if round % 2 == 0 { Side::Candidate } else { Side::Reference };
                let metrics: BTreeMap<String, f64> =
                    METRICS.iter().map(|m| m.to_string()).zip(values(cell, round, side)).collect();
                let order = u8::from(side != first);
                trials.push(Trial { cell: cell.to_string(), round, side, order, metrics });
            }
        }
    }
    let info = |label: &str| SideInfo { binary_sha256: "00".repeat(32), label: label.to_string() };
    Record {
        version: 1,
        mode,
        contract_sha256: digest.to_string(),
        broker_cpu_quota_cores: None,
        sides: Sides { candidate: info("krabka candidate"), reference: info("reference") },
        trials,
    }
}

fn same(_: &str, round: u32, _: Side) -> [f64; 4] {
    BASE.map(|v| v * jitter(round))
}

fn eval(record: &Record) -> Result<Verdict, Refusal> {
    let (contract, digest) = contract();
    judge::evaluate(record, &contract, &digest)
}

fn status(verdict: &Verdict, cell: &str, metric: &str) -> Status {
    let cell = verdict.cells.iter().find(|c| c.cell == cell).unwrap();
    cell.metrics.iter().find(|m| m.metric == metric).unwrap().status
}

#[test]
fn before_after_pass() {
    let (_, digest) = contract();
    // Candidate 2% faster and 2% cheaper: within budget everywhere.
    let r = record(Mode::BeforeAfter, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if side == Side::Candidate {
            v[0] *= 1.02;
            v[1] *= 0.98;
        }
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(v.verdict, Outcome::Pass);
    assert_eq!(v.verdict.exit_code(), 0);
    assert_eq!(v.summary.regressions, 0);
    assert_eq!(status(&v, "a", "records_per_second"), Status::WithinBudget);
    let m = &v.cells[0].metrics[0];
    assert!((m.ratio.unwrap() - 1.02).abs() < 1e-9);
    assert_eq!(v.cells[0].rounds, 5);
}

#[test]
fn before_after_material_regression_fails() {
    let (_, digest) = contract();
    // Cell b: candidate throughput 20% lower (20k records/s, far above the 1k floor).
    let r = record(Mode::BeforeAfter, &digest, 6, |c, round, side| {
        let mut v = same(c, round, side);
        if c == "b" && side == Side::Candidate {
            v[0] *= 0.8;
        }
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(v.verdict, Outcome::Fail);
    assert_eq!(v.verdict.exit_code(), 1);
    assert_eq!(v.summary.regressions, 1);
    assert_eq!(status(&v, "b", "records_per_second"), Status::Regression);
    assert_eq!(status(&v, "a", "records_per_second"), Status::WithinBudget);
    let md = report::markdown(&v);
    assert!(md.contains("| b | records_per_second (records/s) | 80000 | 100000 | 0.800 | -20.0% |"), "{md}");
    assert!(md.contains("**regression**"));
}

#[test]
fn change_below_materiality_floor_passes() {
    let (_, digest) = contract();
    // p99 0.5 ms -> 0.7 ms is +40%, but 0.2 ms is below the 1 ms floor.
    let r = record(Mode::BeforeAfter, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        v[3] = if side == Side::Candidate { 0.7 } else { 0.5 } * jitter(round);
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(v.verdict, Outcome::Pass);
    assert_eq!(status(&v, "a", "p99_latency_ms"), Status::BelowFloor);
    assert_eq!(status(&v, "b", "p99_latency_ms"), Status::BelowFloor);
}

#[test]
fn improvement_is_not_a_regression() {
    let (_, digest) = contract();
    let r = record(Mode::BeforeAfter, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if side == Side::Candidate {
            v[2] *= 0.5;
        }
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(v.verdict, Outcome::Pass);
    assert_eq!(status(&v, "a", "peak_rss_bytes"), Status::Improvement);
    assert_eq!(v.summary.improvements, 2);
}

#[test]
fn noisy_side_rejects_for_variance() {
    let (_, digest) = contract();
    // Reference throughput of cell a swings between 60k and 140k records/s.
    let r = record(Mode::BeforeAfter, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if c == "a" && side == Side::Reference {
            v[0] = [60_000.0, 140_000.0, 100_000.0, 60_000.0, 140_000.0][round as usize];
        }
        // A real regression elsewhere does not turn "rejected" into "fail".
        if c == "b" && side == Side::Candidate {
            v[0] *= 0.5;
        }
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(v.verdict, Outcome::Rejected);
    assert_eq!(v.verdict.exit_code(), 3);
    assert_eq!(status(&v, "a", "records_per_second"), Status::RejectedForVariance);
    assert_eq!(status(&v, "b", "records_per_second"), Status::Regression);
    assert_eq!(v.summary.rejected_for_variance, 1);
    let m = &v.cells[0].metrics[0];
    assert_eq!(m.reference.median, 100_000.0);
    assert!((m.reference.relative_mad.unwrap() - 0.4).abs() < 1e-9);
}

#[test]
fn digest_mismatch_refused() {
    let r = record(Mode::BeforeAfter, &"ab".repeat(32), 5, same);
    match eval(&r) {
        Err(Refusal::ContractDigest { record, .. }) => assert_eq!(record, "ab".repeat(32)),
        other => panic!("expected a digest refusal, got {other:?}"),
    }
}

#[test]
fn digest_is_compared_case_insensitively() {
    let (_, digest) = contract();
    assert!(eval(&record(Mode::BeforeAfter, &digest.to_uppercase(), 5, same)).is_ok());
}

#[test]
fn missing_cell_refused() {
    let (_, digest) = contract();
    let mut r = record(Mode::BeforeAfter, &digest, 5, same);
    r.trials.retain(|t| t.cell != "b");
    assert_eq!(eval(&r).unwrap_err(), Refusal::MissingCell("b".to_string()));
}

#[test]
fn unknown_cell_refused() {
    let (_, digest) = contract();
    let mut r = record(Mode::BeforeAfter, &digest, 5, same);
    r.trials[0].cell = "c".to_string();
    assert_eq!(eval(&r).unwrap_err(), Refusal::UnknownCell("c".to_string()));
}

#[test]
fn too_few_rounds_refused() {
    let (_, digest) = contract();
    let r = record(Mode::BeforeAfter, &digest, 4, same);
    assert_eq!(eval(&r).unwrap_err(), Refusal::TooFewRounds { cell: "a".to_string(), rounds: 4, minimum: 5 });
}

#[test]
fn non_alternating_order_refused() {
    let (_, digest) = contract();
    let mut r = record(Mode::BeforeAfter, &digest, 5, same);
    // Candidate first in every round of cell b.
    for t in r.trials.iter_mut().filter(|t| t.cell == "b") {
        t.order = u8::from(t.side == Side::Reference);
    }
    let err = eval(&r).unwrap_err();
    assert_eq!(err, Refusal::NotAlternating { cell: "b".to_string(), round: 0, first: Side::Candidate });
    assert!(err.to_string().contains("alternation"));
}

#[test]
fn round_without_both_sides_refused() {
    let (_, digest) = contract();
    let mut r = record(Mode::BeforeAfter, &digest, 5, same);
    r.trials[1].side = Side::Candidate;
    assert!(matches!(eval(&r).unwrap_err(), Refusal::BadRound { round: 0, .. }));
}

#[test]
fn missing_metric_refused() {
    let (_, digest) = contract();
    let mut r = record(Mode::BeforeAfter, &digest, 5, same);
    r.trials[3].metrics.remove("peak_rss_bytes");
    assert!(matches!(eval(&r).unwrap_err(), Refusal::BadMetric { .. }));
}

#[test]
fn pinned_kafka_reports_without_gating() {
    let (_, digest) = contract();
    // Krabka at half of Kafka's throughput and a third of its memory.
    let r = record(Mode::PinnedKafka, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if side == Side::Candidate {
            v[0] *= 0.5;
            v[2] /= 3.0;
        }
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(v.verdict, Outcome::Report);
    assert_eq!(v.verdict.exit_code(), 0);
    assert_eq!(status(&v, "a", "records_per_second"), Status::Regression);
    assert_eq!(status(&v, "a", "peak_rss_bytes"), Status::Improvement);
    assert!((v.cells[0].metrics[0].ratio.unwrap() - 0.5).abs() < 1e-9);
    let md = report::markdown(&v);
    assert!(md.contains("Apache Kafka 4.3.1"));
    assert!(md.contains("**report**"));
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["verdict"], "report");
    assert_eq!(json["mode"], "pinned_kafka");
    assert_eq!(json["cells"][0]["metrics"][0]["status"], "regression");
}

#[test]
fn stats_median_and_mad() {
    let s = judge::stats(vec![1.0, 2.0, 3.0, 4.0, 100.0]);
    assert_eq!(s.median, 3.0);
    assert_eq!(s.mad, 1.0);
    assert!((s.relative_mad.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(judge::median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    assert_eq!(judge::stats(vec![0.0, 0.0, 0.0]).relative_mad, Some(0.0));
    assert_eq!(judge::stats(vec![0.0, 0.0, 1.0, 1.0]).relative_mad, Some(1.0));
    assert_eq!(judge::stats(vec![-1.0, 0.0, 1.0]).relative_mad, None);
}

#[test]
fn shipped_contract_parses() {
    let bytes = include_bytes!("../../../packaging/performance/regression-contract.json");
    let c = Contract::from_bytes(bytes).unwrap();
    let names: Vec<&str> = c.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "1k-random-lz4-p12-saturate",
            "100b-random-lz4-p12-saturate",
            "1k-random-none-p12-saturate",
            "1k-zeros-lz4-p12-saturate",
            "100k-random-lz4-p12-saturate",
            "1k-random-lz4-4x12-saturate",
            "1k-random-lz4-p12-20k-rate",
            "idle-to-burst",
            "fresh-256m-3x12-3x12at20k",
            "cap-1k-random-lz4-p12",
            "cap-100b-random-lz4-p12",
            "cap-1k-random-none-p12",
            "cap-1k-zeros-lz4-p12",
            "cap-100k-random-lz4-p12",
            "cap-1k-random-lz4-p12-fanout3",
        ]
    );
    assert!(c.rounds.minimum >= 5 && c.rounds.alternate_first_side);
    assert_eq!(c.kafka_version, "4.3.1");
    // The reference experiment's 2 CPUs per broker beside a 6-core client,
    // on a 2-core machine: a third of a core beside a client on the other.
    assert_eq!(c.broker_cpu_quota.map(|q| q.cores), Some(0.33));
    let pairs: Vec<u32> = c.cells.iter().map(|c| c.pairs.unwrap_or(1)).collect();
    assert_eq!(&pairs[..9], [1, 1, 1, 1, 1, 4, 1, 1, 6], "the concurrency cell runs four pairs, the fresh one six");
    let fresh = &c.cells[8];
    assert_eq!(
        (fresh.load.as_str(), fresh.rate_pairs, fresh.target_records_per_second),
        ("mixed", Some(3), Some(20_000))
    );
    assert_eq!(fresh.kafka_heap.as_deref(), Some("256m"));
    let capacity: Vec<(&str, u32)> = c
        .cells
        .iter()
        .filter(|c| c.workload.as_deref() == Some("loadgen"))
        .map(|c| (c.name.as_str(), c.readers.unwrap_or(1)))
        .collect();
    assert_eq!(capacity.len(), 6, "five payloads and a fan-out cell run with the load generator");
    assert_eq!(capacity[5], ("cap-1k-random-lz4-p12-fanout3", 3));
}

#[test]
fn capacity_and_mixed_cell_fields_are_checked() {
    let bytes = include_str!("../../../packaging/performance/regression-contract.json");
    for (from, to, error) in [
        (r#""workload": "loadgen""#, r#""workload": "jmh""#, "unknown workload"),
        (r#""readers": 3"#, r#""readers": 0"#, "has no reader"),
        (r#""pairs": 4,"#, r#""pairs": 4, "readers": 2,"#, "readers are the load generator's"),
        (r#""rate_pairs": 3"#, r#""rate_pairs": 6"#, "a mixed load needs"),
        (r#""rate_pairs": 3"#, r#""rate_pairs": 0"#, "a mixed load needs"),
        (r#""load": "mixed""#, r#""load": "saturate""#, "rate_pairs need the mixed load"),
        (r#""kafka_heap": "256m""#, r#""kafka_heap": "256""#, "is not a JVM size"),
        (r#""kafka_heap": "256m""#, r#""kafka_heap": "0m""#, "is not a JVM size"),
    ] {
        assert!(bytes.contains(from), "{from}");
        let changed = bytes.replacen(from, to, 1);
        let refused = Contract::from_bytes(changed.as_bytes()).unwrap_err().to_string();
        assert!(refused.contains(error), "{to}: {refused}");
    }
}

#[test]
fn a_record_made_under_another_cpu_quota_is_refused() {
    let quoted =
        CONTRACT.replacen(r#""kafka_version""#, r#""broker_cpu_quota": { "cores": 0.33 }, "kafka_version""#, 1);
    let with_quota = Contract::from_bytes(quoted.as_bytes()).unwrap();
    let digest = contract::sha256_hex(quoted.as_bytes());
    let mut record = record(Mode::BeforeAfter, &digest, 5, same);
    for (quota, refused) in [(None, true), (Some(0.5), true), (Some(0.33), false)] {
        record.broker_cpu_quota_cores = quota;
        let judged = judge::evaluate(&record, &with_quota, &digest);
        assert_eq!(matches!(judged, Err(Refusal::CpuQuota { .. })), refused, "quota {quota:?}: {judged:?}");
    }
    // And one made under a quota against a contract without one.
    let (plain, plain_digest) = contract();
    let mut record = self::record(Mode::BeforeAfter, &plain_digest, 5, same);
    record.broker_cpu_quota_cores = Some(0.33);
    assert!(matches!(judge::evaluate(&record, &plain, &plain_digest), Err(Refusal::CpuQuota { .. })));
}

#[test]
fn a_contract_quota_must_be_positive() {
    let zero = CONTRACT.replacen(r#""kafka_version""#, r#""broker_cpu_quota": { "cores": 0 }, "kafka_version""#, 1);
    assert!(Contract::from_bytes(zero.as_bytes()).is_err());
}

#[test]
fn calibrated_budget_is_headroom_rounded_up_to_a_step() {
    use crate::calibrate::calibrated_budget;
    // 0.08 x 1.25 is exactly 0.10: a whole step, not rounded past it.
    assert!((calibrated_budget(0.08) - 0.10).abs() < 1e-12);
    assert!((calibrated_budget(0.081) - 0.15).abs() < 1e-12);
    assert!((calibrated_budget(0.4) - 0.50).abs() < 1e-12);
    // No spread at all still leaves one step of room.
    assert!((calibrated_budget(0.0) - 0.05).abs() < 1e-12);
}

#[test]
fn spreads_name_the_largest_relative_mad_and_its_budget() {
    let (_, digest) = contract();
    // Reference throughput of cell b swings 40% (MAD 40k of 100k).
    let r = record(Mode::PinnedKafka, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if c == "b" && side == Side::Reference {
            v[0] = [60_000.0, 140_000.0, 100_000.0, 60_000.0, 140_000.0][round as usize];
        }
        v
    });
    let v = eval(&r).unwrap();
    let spreads = crate::calibrate::spreads(&v);
    let rps = spreads.iter().find(|s| s.metric == "records_per_second").unwrap();
    let largest = rps.largest.as_ref().unwrap();
    assert_eq!((largest.cell.as_str(), largest.side), ("b", Side::Reference));
    assert!((largest.relative_mad - 0.4).abs() < 1e-9);
    assert!((rps.calibrated_budget.unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(rps.variance_budget, 0.10);
    // The jitter of `same` is +-1% in every round: a MAD of 1% of the median.
    let cpu = spreads.iter().find(|s| s.metric == "cpu_us_per_record").unwrap();
    assert!((cpu.largest.as_ref().unwrap().relative_mad - 0.01).abs() < 1e-9);
    assert!((cpu.calibrated_budget.unwrap() - 0.05).abs() < 1e-12);
    let md = report::markdown(&v);
    assert!(md.contains("| java | records_per_second | 40.0% | b | reference | 10.0% | 50.0% |"), "{md}");
}

#[test]
fn rounds_are_judged_by_their_paired_ratios() {
    let (contract, _) = contract();
    let rule = contract.rules().find(|(m, _)| *m == "records_per_second").unwrap().1;
    // The machine slowed both sides by 9% in rounds 3 and 4 but only the
    // reference's slow rounds sit above its median: the medians differ by
    // 8%, while every round's pair is within 8% and their median is 1.
    let reference = vec![100_000.0, 100_000.0, 100_000.0, 91_000.0, 91_000.0];
    let candidate = vec![98_000.0, 102_000.0, 92_000.0, 91_000.0, 91_000.0];
    let v = judge::judge("records_per_second", rule, candidate, reference);
    assert!(v.candidate.median / v.reference.median < 0.95, "the medians alone would call it a regression");
    assert_eq!(v.round_ratios.as_deref(), Some(&[0.98, 1.02, 0.92, 1.0, 1.0][..]));
    assert!((v.ratio.unwrap() - 1.0).abs() < 1e-12);
    assert!((v.ratio_relative_mad.unwrap() - 0.02).abs() < 1e-12);
    assert_eq!(v.status, Status::WithinBudget);
    // A round whose reference is 0 while its candidate is not has no ratio:
    // then the ratio of the medians stands in.
    let v = judge::judge("records_per_second", rule, vec![2.0, 1.0, 1.0], vec![0.0, 1.0, 2.0]);
    assert_eq!(v.round_ratios, None);
    assert_eq!(v.ratio, Some(1.0));
    let v = judge::judge("records_per_second", rule, vec![0.0, 1.0], vec![0.0, 2.0]);
    assert_eq!(v.round_ratios.as_deref(), Some(&[1.0, 0.5][..]));
}

#[test]
fn a_null_run_calibrates_the_regression_budgets() {
    let (_, digest) = contract();
    // Cell b's candidate steadily 7% slower; cell a's p99 10% worse, but
    // that is 0.5 ms, under the 1 ms floor.
    let r = record(Mode::BeforeAfter, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if side == Side::Candidate && c == "b" {
            v[0] *= 0.93;
        }
        if side == Side::Candidate && c == "a" {
            v[3] *= 1.1;
        }
        v
    });
    let v = eval(&r).unwrap();
    assert_eq!(status(&v, "b", "records_per_second"), Status::Regression);
    let changes = crate::calibrate::changes(&v);
    let rps = changes.iter().find(|c| c.metric == "records_per_second").unwrap();
    let largest = rps.largest.as_ref().unwrap();
    assert_eq!(largest.cell, "b");
    assert!((largest.change - 0.07).abs() < 1e-9);
    assert!((rps.calibrated_budget - 0.10).abs() < 1e-12);
    let p99 = changes.iter().find(|c| c.metric == "p99_latency_ms").unwrap();
    assert_eq!(p99.largest, None);
    assert!((p99.calibrated_budget - 0.05).abs() < 1e-12);
    let md = report::markdown(&v);
    assert!(md.contains("| java | records_per_second | 7.0% | b | 5.0% | 10.0% |"), "{md}");
    assert!(md.contains("| java | p99_latency_ms | n/a |  | 10.0% | 5.0% |"), "{md}");
    // Kafka is not the same source built twice: no such table.
    let r = record(Mode::PinnedKafka, &digest, 5, same);
    assert!(!report::markdown(&eval(&r).unwrap()).contains("Largest material change"));
}

/// [`CONTRACT`] with cell `b` a capacity cell (the load generator's) and
/// budgets of its own: p99 may spread 90%, records/s may move 2%.
fn contract_with_workload_budgets() -> (Contract, String) {
    let text = CONTRACT
        .replace(
            r#""load": "rate",
      "target_records_per_second": 20000 }"#,
            r#""load": "saturate", "workload": "loadgen" }"#,
        )
        .replace(
            r#"  "metrics": {"#,
            r#"  "workload_budgets": { "loadgen": {
    "p99_latency_ms": { "variance_budget": 0.9 },
    "records_per_second": { "regression_budget": 0.02 } } },
  "metrics": {"#,
        );
    (Contract::from_bytes(text.as_bytes()).unwrap(), contract::sha256_hex(text.as_bytes()))
}

#[test]
fn a_workloads_budgets_judge_only_its_cells() {
    let (contract, digest) = contract_with_workload_budgets();
    let loadgen = contract.rules_for("loadgen");
    let rule = |rules: &[(&str, contract::MetricRule)], metric: &str| {
        rules.iter().find(|(m, _)| *m == metric).unwrap().1.clone()
    };
    assert_eq!(rule(&loadgen, "p99_latency_ms").variance_budget, 0.9);
    assert_eq!(rule(&loadgen, "p99_latency_ms").regression_budget, 0.10, "left out: the metric's");
    assert_eq!(rule(&contract.rules_for("java"), "p99_latency_ms").variance_budget, 0.20);
    // Both cells: p99 spreads 40% on the reference side and records/s is
    // steadily 4% lower on the candidate's.
    let r = record(Mode::BeforeAfter, &digest, 5, |c, round, side| {
        let mut v = same(c, round, side);
        if side == Side::Reference {
            v[3] = [3.0, 7.0, 5.0, 3.0, 7.0][round as usize];
        } else {
            v[0] *= 0.96;
        }
        v
    });
    let v = judge::evaluate(&r, &contract, &digest).unwrap();
    assert_eq!(v.cells.iter().map(|c| c.workload.as_str()).collect::<Vec<_>>(), ["java", "loadgen"]);
    assert_eq!(status(&v, "a", "p99_latency_ms"), Status::RejectedForVariance);
    assert_eq!(status(&v, "b", "p99_latency_ms"), Status::WithinBudget);
    assert_eq!(status(&v, "a", "records_per_second"), Status::WithinBudget);
    assert_eq!(status(&v, "b", "records_per_second"), Status::Regression);
    // Spreads and changes are each workload's.
    let spreads = crate::calibrate::spreads(&v);
    let p99: Vec<_> = spreads.iter().filter(|s| s.metric == "p99_latency_ms").collect();
    assert_eq!(
        p99.iter().map(|s| (s.workload.as_str(), s.variance_budget)).collect::<Vec<_>>(),
        [("java", 0.20), ("loadgen", 0.9)]
    );
    let md = report::markdown(&v);
    assert!(md.contains("| loadgen | records_per_second | 4.0% | b | 2.0% | 5.0% |"), "{md}");
}

#[test]
fn workload_budgets_name_known_workloads_and_metrics() {
    let refused = |budgets: &str| {
        let text =
            CONTRACT.replace(r#"  "metrics": {"#, &format!("  \"workload_budgets\": {budgets},\n  \"metrics\": {{"));
        Contract::from_bytes(text.as_bytes()).unwrap_err().to_string()
    };
    assert!(refused(r#"{ "kafka": {} }"#).contains("unknown workload"));
    assert!(refused(r#"{ "loadgen": { "p50": { "variance_budget": 0.1 } } }"#).contains("unknown metric"));
    let negative = refused(r#"{ "loadgen": { "p99_latency_ms": { "variance_budget": -0.1 } } }"#);
    assert!(negative.contains("must be a finite non-negative number"), "{negative}");
}
