//! Medians, relative median absolute deviations and the verdict.

use serde::Serialize;

use crate::contract::{Better, Contract, MetricRule};
use crate::record::{self, Mode, Record, Refusal, Sides};

/// The verdict schema version.
pub const VERDICT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `before_after`: no material regression beyond budget.
    Pass,
    /// `before_after`: at least one material regression beyond budget.
    Fail,
    /// A side varied more than the variance budget allows; nothing was judged for that cell/metric.
    Rejected,
    /// `pinned_kafka`: differences reported, not gated.
    Report,
}

impl Outcome {
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Pass | Outcome::Report => 0,
            Outcome::Fail => 1,
            Outcome::Rejected => 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Worse than the regression budget and the difference exceeds the materiality floor.
    Regression,
    /// Better than the regression budget and the difference exceeds the materiality floor.
    Improvement,
    /// Relative change within the regression budget.
    WithinBudget,
    /// Relative change beyond the budget, but the absolute difference is below the materiality floor.
    BelowFloor,
    /// A side's relative MAD exceeds the variance budget; not judged.
    RejectedForVariance,
}

#[derive(Debug, Clone, Serialize)]
pub struct SideStats {
    pub median: f64,
    /// Median absolute deviation from the median, in the metric's unit.
    pub mad: f64,
    /// `mad / median`; null when the median is 0 and the MAD is not.
    pub relative_mad: Option<f64>,
    /// The values by round.
    pub values: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricVerdict {
    pub metric: String,
    pub unit: String,
    pub better: Better,
    pub candidate: SideStats,
    pub reference: SideStats,
    /// Candidate / reference in each round (the two trials of a round ran
    /// next to each other); null when a round's reference value is 0 and its
    /// candidate value is not.
    pub round_ratios: Option<Vec<f64>>,
    /// The median of `round_ratios`; else, when they are undefined, the
    /// candidate median / the reference median; null when that is undefined too.
    pub ratio: Option<f64>,
    /// Relative MAD of `round_ratios`: how steady the difference was.
    pub ratio_relative_mad: Option<f64>,
    /// Signed relative change `ratio - 1`, what the regression budget is compared with.
    pub change: Option<f64>,
    /// Candidate median minus reference median, in the metric's unit.
    pub difference: f64,
    pub regression_budget: f64,
    pub variance_budget: f64,
    pub materiality_floor: f64,
    pub status: Status,
}

#[derive(Debug, Clone, Serialize)]
pub struct CellVerdict {
    pub cell: String,
    /// Who loaded the broker (`java`, `loadgen`): whose budgets were used.
    pub workload: String,
    pub rounds: usize,
    pub metrics: Vec<MetricVerdict>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub regressions: usize,
    pub improvements: usize,
    pub rejected_for_variance: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub version: u32,
    pub mode: Mode,
    pub verdict: Outcome,
    pub contract_sha256: String,
    pub kafka_version: String,
    pub sides: Sides,
    pub summary: Summary,
    pub cells: Vec<CellVerdict>,
}

/// Validates `record` against `contract` and judges every cell and metric.
pub fn evaluate(record: &Record, contract: &Contract, contract_sha256: &str) -> Result<Verdict, Refusal> {
    let rounds = record::validate(record, contract, contract_sha256)?;
    let mut summary = Summary::default();
    let mut cells = Vec::new();
    for cell in &contract.cells {
        let pairs = &rounds[cell.name.as_str()];
        let mut metrics = Vec::new();
        for (metric, rule) in contract.rules_for(cell.workload()) {
            let values = |i: usize| pairs.iter().map(|p| p[i].metrics[metric]).collect::<Vec<_>>();
            let judged = judge(metric, &rule, values(0), values(1));
            match judged.status {
                Status::Regression => summary.regressions += 1,
                Status::Improvement => summary.improvements += 1,
                Status::RejectedForVariance => summary.rejected_for_variance += 1,
                Status::WithinBudget | Status::BelowFloor => {}
            }
            metrics.push(judged);
        }
        let workload = cell.workload().to_string();
        cells.push(CellVerdict { cell: cell.name.clone(), workload, rounds: pairs.len(), metrics });
    }
    let verdict = if summary.rejected_for_variance > 0 {
        Outcome::Rejected
    } else if record.mode == Mode::PinnedKafka {
        Outcome::Report
    } else if summary.regressions > 0 {
        Outcome::Fail
    } else {
        Outcome::Pass
    };
    Ok(Verdict {
        version: VERDICT_VERSION,
        mode: record.mode,
        verdict,
        contract_sha256: contract_sha256.to_string(),
        kafka_version: contract.kafka_version.clone(),
        sides: record.sides.clone(),
        summary,
        cells,
    })
}

/// Judges one metric of one cell from the per-round values of each side
/// (`candidate[i]` and `reference[i]` from round `i`).
///
/// The change judged is the median of the per-round ratios, not the ratio
/// of the medians: the two trials of a round run back to back, so a slow
/// spell of the shared machine moves both and cancels in their ratio, while
/// across rounds it does not.
pub fn judge(metric: &str, rule: &MetricRule, candidate: Vec<f64>, reference: Vec<f64>) -> MetricVerdict {
    debug_assert_eq!(candidate.len(), reference.len(), "values are paired by round");
    let round_ratios = round_ratios(&candidate, &reference);
    let candidate = stats(candidate);
    let reference = stats(reference);
    let (c, r) = (candidate.median, reference.median);
    let difference = c - r;
    let paired = round_ratios.clone().map(stats);
    let ratio = match &paired {
        Some(p) => Some(p.median),
        None => (r != 0.0).then(|| c / r),
    };
    let ratio_relative_mad = paired.and_then(|p| p.relative_mad);
    let change = ratio.map(|x| x - 1.0);
    let noisy = |s: &SideStats| s.relative_mad.is_none_or(|m| m > rule.variance_budget);
    // Positive when the candidate is worse, relative to the reference.
    let worsening = match (change, rule.better) {
        (Some(ch), Better::Lower) => ch,
        (Some(ch), Better::Higher) => -ch,
        (None, _) if difference == 0.0 => 0.0,
        (None, Better::Lower) => f64::INFINITY * difference.signum(),
        (None, Better::Higher) => -f64::INFINITY * difference.signum(),
    };
    let status = if noisy(&candidate) || noisy(&reference) {
        Status::RejectedForVariance
    } else if worsening.abs() <= rule.regression_budget {
        Status::WithinBudget
    } else if difference.abs() <= rule.materiality_floor {
        Status::BelowFloor
    } else if worsening > 0.0 {
        Status::Regression
    } else {
        Status::Improvement
    };
    MetricVerdict {
        metric: metric.to_string(),
        unit: rule.unit.clone(),
        better: rule.better,
        candidate,
        reference,
        round_ratios,
        ratio,
        ratio_relative_mad,
        change,
        difference,
        regression_budget: rule.regression_budget,
        variance_budget: rule.variance_budget,
        materiality_floor: rule.materiality_floor,
        status,
    }
}

/// Each round's candidate / reference; none when a round's reference is 0
/// and its candidate is not (two zeros are equal: a ratio of 1).
fn round_ratios(candidate: &[f64], reference: &[f64]) -> Option<Vec<f64>> {
    let ratio = |(c, r): (&f64, &f64)| {
        if *r != 0.0 {
            Some(c / r)
        } else {
            (*c == 0.0).then_some(1.0)
        }
    };
    candidate.iter().zip(reference).map(ratio).collect()
}

/// Median, MAD and relative MAD of `values` (which must not be empty).
pub fn stats(values: Vec<f64>) -> SideStats {
    let median = median(&values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - median).abs()).collect();
    let mad = median_of(deviations);
    let relative_mad = if median != 0.0 {
        Some(mad / median.abs())
    } else if mad == 0.0 {
        Some(0.0)
    } else {
        None
    };
    SideStats { median, mad, relative_mad, values }
}

pub fn median(values: &[f64]) -> f64 {
    median_of(values.to_vec())
}

fn median_of(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty(), "median of no values");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}
