//! Variance and regression budgets from measured spreads.
//!
//! The contract's rule (issue 22): a metric's variance budget is about 1.25x
//! the largest relative MAD either side showed in any cell over its rounds,
//! rounded up to a whole 5%. Every report shows that figure beside the
//! budget in force, so a run that justifies a budget change says so, and a
//! run whose noise outgrew its budget shows by how much.
//!
//! Regression budgets follow the same rule from a *null run*: a
//! `before_after` of the same source built twice, where every change the
//! judge sees is the machine's and the build's, not the code's. Its largest
//! material change per metric, with the same headroom and rounding, is the
//! smallest regression budget that does not cry wolf.
//!
//! Both are worked out per workload (the Java workload's cells, the load
//! generator's capacity cells), as the contract budgets them.

use crate::judge::{MetricVerdict, Verdict};
use crate::record::Side;

/// Room above the largest spread seen, so that the next run's noise fits.
pub const HEADROOM: f64 = 1.25;
/// Budgets are whole multiples of this.
pub const STEP: f64 = 0.05;

/// Where a metric's largest relative MAD was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct LargestSpread {
    pub relative_mad: f64,
    pub cell: String,
    pub side: Side,
}

/// One metric's spread over one workload's cells.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpread {
    pub workload: String,
    pub metric: String,
    /// The largest defined relative MAD (none when no cell had one).
    pub largest: Option<LargestSpread>,
    /// The contract's budget the verdict was judged by.
    pub variance_budget: f64,
    /// What the rule gives for `largest`.
    pub calibrated_budget: Option<f64>,
}

/// The variance budget the rule gives for a largest relative MAD: at least
/// one step, so that a run without any spread does not forbid all noise.
pub fn calibrated_budget(largest_relative_mad: f64) -> f64 {
    debug_assert!(largest_relative_mad >= 0.0);
    // Rounded to a millionth of a step first: 0.08 x 1.25 is 0.1 and must
    // not become 0.15 through binary fractions.
    let steps = ((largest_relative_mad * HEADROOM / STEP) * 1e6).round() / 1e6;
    steps.ceil().max(1.0) * STEP
}

/// Where a metric's largest material change was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct LargestChange {
    /// `|ratio - 1|` of the median per-round ratio.
    pub change: f64,
    pub cell: String,
}

/// One metric's largest material change over one workload's cells.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricChange {
    pub workload: String,
    pub metric: String,
    /// The largest change whose difference passed the materiality floor
    /// (none when no cell's did): changes under the floor are never judged.
    pub largest: Option<LargestChange>,
    /// The contract's budget the verdict was judged by.
    pub regression_budget: f64,
    /// What the rule gives for `largest` (one step when nothing was material).
    pub calibrated_budget: f64,
}

/// Every workload's metrics' spreads in `verdict`: workloads in the
/// order their first cells come, metrics in the verdict's order.
pub fn spreads(verdict: &Verdict) -> Vec<MetricSpread> {
    per_metric(verdict, metric_spread)
}

/// Every workload's metrics' largest material changes in `verdict`, in
/// the order of [`spreads`]; the regression budgets a null run justifies.
pub fn changes(verdict: &Verdict) -> Vec<MetricChange> {
    per_metric(verdict, metric_change)
}

/// Applies `summarise` to each metric's verdicts over each workload's cells.
fn per_metric<T, F>(verdict: &Verdict, summarise: F) -> Vec<T>
where
    F: for<'a> Fn(&'a str, &'a MetricVerdict, &mut dyn Iterator<Item = (&'a str, &'a MetricVerdict)>) -> T,
{
    let mut workloads: Vec<&str> = Vec::new();
    for cell in &verdict.cells {
        if !workloads.contains(&cell.workload.as_str()) {
            workloads.push(&cell.workload);
        }
    }
    let mut out = Vec::new();
    for workload in workloads {
        let cells: Vec<_> = verdict.cells.iter().filter(|c| c.workload == workload).collect();
        for (index, metric) in cells[0].metrics.iter().enumerate() {
            let mut per_cell = cells.iter().map(|cell| {
                debug_assert_eq!(cell.metrics[index].metric, metric.metric, "cells list their metrics in one order");
                (cell.cell.as_str(), &cell.metrics[index])
            });
            out.push(summarise(workload, metric, &mut per_cell));
        }
    }
    out
}

fn metric_change<'a>(
    workload: &'a str,
    first: &'a MetricVerdict,
    per_cell: &mut dyn Iterator<Item = (&'a str, &'a MetricVerdict)>,
) -> MetricChange {
    let mut largest: Option<LargestChange> = None;
    for (cell, verdict) in per_cell {
        let Some(change) = verdict.change.map(f64::abs) else { continue };
        if verdict.difference.abs() <= verdict.materiality_floor {
            continue;
        }
        if largest.as_ref().is_none_or(|l| change > l.change) {
            largest = Some(LargestChange { change, cell: cell.to_string() });
        }
    }
    let calibrated_budget = calibrated_budget(largest.as_ref().map_or(0.0, |l| l.change));
    MetricChange {
        workload: workload.to_string(),
        metric: first.metric.clone(),
        largest,
        regression_budget: first.regression_budget,
        calibrated_budget,
    }
}

fn metric_spread<'a>(
    workload: &'a str,
    first: &'a MetricVerdict,
    per_cell: &mut dyn Iterator<Item = (&'a str, &'a MetricVerdict)>,
) -> MetricSpread {
    let mut largest: Option<LargestSpread> = None;
    for (cell, verdict) in per_cell {
        for (side, stats) in [(Side::Candidate, &verdict.candidate), (Side::Reference, &verdict.reference)] {
            // Records hold no negative values, so a median of 0 has a MAD
            // of 0 and every relative MAD here is defined.
            let Some(m) = stats.relative_mad else { continue };
            if largest.as_ref().is_none_or(|l| m > l.relative_mad) {
                largest = Some(LargestSpread { relative_mad: m, cell: cell.to_string(), side });
            }
        }
    }
    let calibrated_budget = largest.as_ref().map(|l| calibrated_budget(l.relative_mad));
    let metric = first.metric.clone();
    let variance_budget = first.variance_budget;
    MetricSpread { workload: workload.to_string(), metric, largest, variance_budget, calibrated_budget }
}
