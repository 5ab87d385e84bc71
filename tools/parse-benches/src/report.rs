//! Markdown rendering of a verdict.

use std::fmt::Write;

use crate::calibrate::{self, MetricChange, MetricSpread};
use crate::judge::{Outcome, Status, Verdict};
use crate::record::{Mode, Side};

/// Renders `verdict` as a markdown report: a header and one table row per cell and metric.
pub fn markdown(verdict: &Verdict) -> String {
    let mut out = String::new();
    let (mode, reference) = match verdict.mode {
        Mode::BeforeAfter => ("before_after (gating)", "reference krabka".to_string()),
        Mode::PinnedKafka => ("pinned_kafka (report only)", format!("Apache Kafka {}", verdict.kafka_version)),
    };
    let outcome = match verdict.verdict {
        Outcome::Pass => "**pass**",
        Outcome::Fail => "**fail**: material regression beyond budget",
        Outcome::Rejected => "**rejected**: a side varied more than the variance budget allows",
        Outcome::Report => "**report** (not gated)",
    };
    let _ = writeln!(out, "# Performance verdict\n");
    let _ = writeln!(out, "- verdict: {outcome}");
    let _ = writeln!(out, "- mode: {mode}");
    let _ = writeln!(out, "- contract sha256: `{}`", verdict.contract_sha256);
    let sides = &verdict.sides;
    let _ = writeln!(out, "- candidate: {} (`{}`)", sides.candidate.label, sides.candidate.binary_sha256);
    let _ = writeln!(out, "- reference ({reference}): {} (`{}`)", sides.reference.label, sides.reference.binary_sha256);
    let s = &verdict.summary;
    let _ = writeln!(
        out,
        "- regressions: {}, improvements: {}, rejected for variance: {}\n",
        s.regressions, s.improvements, s.rejected_for_variance
    );
    let _ = writeln!(
        out,
        "Ratio is the median over the rounds of each round's candidate / reference (the two trials of a round ran back to back); \
         ratio rel. MAD is how much those per-round ratios spread; a side's rel. MAD is the median absolute deviation of its values \
         over the rounds divided by their median.\n"
    );
    let _ = writeln!(
        out,
        "| cell | metric | candidate median | reference median | ratio | change | ratio rel. MAD | candidate rel. MAD | reference rel. MAD | status |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for cell in &verdict.cells {
        for m in &cell.metrics {
            let _ = writeln!(
                out,
                "| {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell.cell,
                m.metric,
                m.unit,
                number(m.candidate.median),
                number(m.reference.median),
                m.ratio.map_or("n/a".to_string(), |r| format!("{r:.3}")),
                m.change.map_or("n/a".to_string(), |c| format!("{:+.1}%", c * 100.0)),
                percent(m.ratio_relative_mad),
                percent(m.candidate.relative_mad),
                percent(m.reference.relative_mad),
                status(m.status),
            );
        }
    }
    spreads(&mut out, &calibrate::spreads(verdict));
    if verdict.mode == Mode::BeforeAfter {
        changes(&mut out, &calibrate::changes(verdict));
    }
    out
}

/// Each metric's largest material change against its regression budget.
fn changes(out: &mut String, changes: &[MetricChange]) {
    let _ = writeln!(out, "\n## Largest material change\n");
    let _ = writeln!(
        out,
        "When both sides are the same source built twice (a null run), every change is the machine's or the build's, \
         and the calibrated budget ({}x the largest, rounded up to a whole {:.0}%) is the regression budget the contract's \
         rule gives. Changes under the materiality floor are left out, as the judge leaves them.\n",
        calibrate::HEADROOM,
        calibrate::STEP * 100.0
    );
    let _ = writeln!(out, "| workload | metric | largest change | cell | regression budget | calibrated budget |");
    let _ = writeln!(out, "|---|---|---:|---|---:|---:|");
    for c in changes {
        let (change, cell) = match &c.largest {
            Some(l) => (percent(Some(l.change)), l.cell.as_str()),
            None => ("n/a".to_string(), ""),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {change} | {cell} | {} | {} |",
            c.workload,
            c.metric,
            percent(Some(c.regression_budget)),
            percent(Some(c.calibrated_budget))
        );
    }
}

/// Each metric's largest relative MAD against its variance budget.
fn spreads(out: &mut String, spreads: &[MetricSpread]) {
    let _ = writeln!(out, "\n## Spread over the rounds\n");
    let _ = writeln!(
        out,
        "Calibrated budget: {}x the largest relative MAD, rounded up to a whole {:.0}% (the contract's rule).\n",
        calibrate::HEADROOM,
        calibrate::STEP * 100.0
    );
    let _ =
        writeln!(out, "| workload | metric | largest rel. MAD | cell | side | variance budget | calibrated budget |");
    let _ = writeln!(out, "|---|---|---:|---|---|---:|---:|");
    for s in spreads {
        let (mad, cell, side) = match &s.largest {
            Some(l) => (percent(Some(l.relative_mad)), l.cell.as_str(), side_name(l.side)),
            None => ("n/a".to_string(), "", ""),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {mad} | {cell} | {side} | {} | {} |",
            s.workload,
            s.metric,
            percent(Some(s.variance_budget)),
            percent(s.calibrated_budget)
        );
    }
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Candidate => "candidate",
        Side::Reference => "reference",
    }
}

fn status(status: Status) -> &'static str {
    match status {
        Status::Regression => "**regression**",
        Status::Improvement => "improvement",
        Status::WithinBudget => "within budget",
        Status::BelowFloor => "below floor",
        Status::RejectedForVariance => "**rejected for variance**",
    }
}

fn percent(value: Option<f64>) -> String {
    value.map_or("n/a".to_string(), |v| format!("{:.1}%", v * 100.0))
}

fn number(value: f64) -> String {
    if value.abs() >= 1000.0 {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.4}")
    }
}
