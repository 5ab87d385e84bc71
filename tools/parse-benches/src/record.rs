//! The performance record a runner writes, and its validation against a contract.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::contract::{Contract, METRICS};

/// The record schema version this crate understands.
pub const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Candidate krabka against a reference krabka; gates.
    BeforeAfter,
    /// Krabka (candidate) against the pinned Apache Kafka (reference); reports only.
    PinnedKafka,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Candidate,
    Reference,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub version: u32,
    pub mode: Mode,
    pub contract_sha256: String,
    /// The CPU quota every broker ran under (cores); None: unlimited.
    #[serde(default)]
    pub broker_cpu_quota_cores: Option<f64>,
    pub sides: Sides,
    pub trials: Vec<Trial>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sides {
    pub candidate: SideInfo,
    pub reference: SideInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideInfo {
    /// SHA-256 of the broker binary (for Kafka: of the release archive).
    pub binary_sha256: String,
    pub label: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trial {
    pub cell: String,
    pub round: u32,
    pub side: Side,
    /// 0 when this side ran first in its round, 1 when second.
    pub order: u8,
    pub metrics: BTreeMap<String, f64>,
}

/// Why a record cannot be judged.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Refusal {
    #[error("record version {0} is not supported (expected {RECORD_VERSION})")]
    Version(u32),
    #[error("record was made for contract sha256 {record} but the contract file has sha256 {file}")]
    ContractDigest { record: String, file: String },
    #[error("record was made with brokers under {}; the contract assumes {}", quota_text(*record), quota_text(*contract))]
    CpuQuota { record: Option<f64>, contract: Option<f64> },
    #[error("record has no trials for cell {0:?}")]
    MissingCell(String),
    #[error("record has trials for cell {0:?}, which the contract does not name")]
    UnknownCell(String),
    #[error("cell {cell:?} has {rounds} rounds; the contract requires at least {minimum}")]
    TooFewRounds { cell: String, rounds: u32, minimum: u32 },
    #[error("cell {cell:?} round {round}: {problem}")]
    BadRound { cell: String, round: u32, problem: String },
    #[error("cell {cell:?}: rounds {round} and {} both run the {first:?} side first; the contract requires alternation", round + 1)]
    NotAlternating { cell: String, round: u32, first: Side },
    #[error("cell {cell:?} round {round} {side:?}: metric {metric:?} {problem}")]
    BadMetric { cell: String, round: u32, side: Side, metric: String, problem: String },
}

/// A broker CPU quota as a refusal names it.
fn quota_text(cores: Option<f64>) -> String {
    cores.map_or("no CPU quota".to_string(), |c| format!("a CPU quota of {c} cores"))
}

/// Per cell, per round: the candidate and reference trials.
pub type Rounds<'a> = BTreeMap<&'a str, Vec<[&'a Trial; 2]>>;

/// Checks `record` against `contract` (whose file bytes hash to `contract_sha256`)
/// and groups its trials by cell and round.
pub fn validate<'a>(record: &'a Record, contract: &'a Contract, contract_sha256: &str) -> Result<Rounds<'a>, Refusal> {
    if record.version != RECORD_VERSION {
        return Err(Refusal::Version(record.version));
    }
    if !record.contract_sha256.eq_ignore_ascii_case(contract_sha256) {
        return Err(Refusal::ContractDigest {
            record: record.contract_sha256.clone(),
            file: contract_sha256.to_string(),
        });
    }
    // Figures under another quota answer another question.
    let assumed = contract.broker_cpu_quota.as_ref().map(|q| q.cores);
    let same_quota = match (record.broker_cpu_quota_cores, assumed) {
        (Some(a), Some(b)) => (a - b).abs() < 1e-6,
        (a, b) => a.is_none() && b.is_none(),
    };
    if !same_quota {
        return Err(Refusal::CpuQuota { record: record.broker_cpu_quota_cores, contract: assumed });
    }
    let names: BTreeSet<&str> = contract.cells.iter().map(|c| c.name.as_str()).collect();
    let mut by_cell: BTreeMap<&str, BTreeMap<u32, Vec<&Trial>>> = BTreeMap::new();
    for trial in &record.trials {
        if !names.contains(trial.cell.as_str()) {
            return Err(Refusal::UnknownCell(trial.cell.clone()));
        }
        check_metrics(trial)?;
        by_cell.entry(trial.cell.as_str()).or_default().entry(trial.round).or_default().push(trial);
    }
    let mut out = Rounds::new();
    for cell in &contract.cells {
        let name = cell.name.as_str();
        let rounds = by_cell.remove(name).ok_or_else(|| Refusal::MissingCell(name.to_string()))?;
        let count = rounds.len() as u32;
        if count < contract.rounds.minimum {
            return Err(Refusal::TooFewRounds {
                cell: name.to_string(),
                rounds: count,
                minimum: contract.rounds.minimum,
            });
        }
        let mut pairs = Vec::with_capacity(rounds.len());
        for (expected, (round, trials)) in rounds.into_iter().enumerate() {
            let bad = |problem: &str| Refusal::BadRound { cell: name.to_string(), round, problem: problem.to_string() };
            if round != expected as u32 {
                return Err(bad(&format!("rounds must be numbered 0, 1, 2, ... without gaps (expected {expected})")));
            }
            let pair = match trials.as_slice() {
                [a, b] if a.side != b.side => {
                    if a.side == Side::Candidate {
                        [*a, *b]
                    } else {
                        [*b, *a]
                    }
                }
                _ => return Err(bad("needs exactly one candidate and one reference trial")),
            };
            let mut orders = [pair[0].order, pair[1].order];
            orders.sort_unstable();
            if orders != [0, 1] {
                return Err(bad("the two trials must have orders 0 and 1"));
            }
            pairs.push(pair);
        }
        if contract.rounds.alternate_first_side {
            for (round, w) in pairs.windows(2).enumerate() {
                let first = |p: &[&Trial; 2]| if p[0].order == 0 { Side::Candidate } else { Side::Reference };
                if first(&w[0]) == first(&w[1]) {
                    return Err(Refusal::NotAlternating {
                        cell: name.to_string(),
                        round: round as u32,
                        first: first(&w[0]),
                    });
                }
            }
        }
        out.insert(name, pairs);
    }
    Ok(out)
}

fn check_metrics(trial: &Trial) -> Result<(), Refusal> {
    let bad = |metric: &str, problem: &str| Refusal::BadMetric {
        cell: trial.cell.clone(),
        round: trial.round,
        side: trial.side,
        metric: metric.to_string(),
        problem: problem.to_string(),
    };
    for metric in METRICS {
        match trial.metrics.get(metric) {
            None => return Err(bad(metric, "is missing")),
            Some(v) if !v.is_finite() || *v < 0.0 => return Err(bad(metric, "must be a finite non-negative number")),
            Some(_) => {}
        }
    }
    if let Some(other) = trial.metrics.keys().find(|k| !METRICS.contains(&k.as_str())) {
        return Err(bad(other, "is not a contract metric"));
    }
    Ok(())
}
