//! The regression contract: cells, rounds and per-metric budgets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The contract schema version this crate understands.
pub const CONTRACT_VERSION: u32 = 1;

/// The four metrics every trial reports, in report order.
pub const METRICS: [&str; 4] = ["records_per_second", "cpu_us_per_record", "peak_rss_bytes", "p99_latency_ms"];

/// `packaging/performance/regression-contract.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    pub version: u32,
    #[serde(default)]
    pub description: String,
    /// The Apache Kafka release that `pinned_kafka` records compare with.
    pub kafka_version: String,
    pub rounds: Rounds,
    /// The CPU quota every broker runs under; None: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_cpu_quota: Option<CpuQuota>,
    pub cells: Vec<Cell>,
    /// Each metric's rule: the budgets of the Java workload's cells, and
    /// of any workload `workload_budgets` does not name.
    pub metrics: BTreeMap<String, MetricRule>,
    /// Budgets of one workload's cells that differ from `metrics`': by
    /// workload (`java`, `loadgen`), then by metric. A capacity cell's
    /// records/s and CPU per record move less than the Java client's pace,
    /// while its p99 of a millisecond or two is the scheduler's noise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workload_budgets: BTreeMap<String, BTreeMap<String, BudgetOverride>>,
}

/// The budgets of [`MetricRule`] one workload's cells are judged by
/// instead; those left out are the metric's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regression_budget: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variance_budget: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub materiality_floor: Option<f64>,
}

/// The workloads a cell may name.
pub const WORKLOADS: [&str; 2] = ["java", "loadgen"];

/// Each broker in a CPU cgroup of `cores` (cgroup v2 `cpu.max`, v1
/// `cpu.cfs_quota_us`): what the contract's figures assume.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuQuota {
    pub cores: f64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rounds {
    /// Fewest rounds per cell a record may have.
    pub minimum: u32,
    /// Whether consecutive rounds must swap which side runs first.
    pub alternate_first_side: bool,
}

/// One workload. Only `name` is used to judge; the rest tells the runner what to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    pub name: String,
    pub record_bytes: u64,
    /// `random` or `zeros`.
    pub payload: String,
    /// `compression.type` of the producer: `none`, `lz4`, ...
    pub compression: String,
    pub partitions: u32,
    /// Producer/consumer pairs running at once, each on a topic of its own
    /// (`partitions` each); one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<u32>,
    /// Who loads the broker: `java` (the Java workload, under the contract's
    /// CPU quota; the default) or `loadgen` (tools/loadgen flat out, the
    /// broker on its core without a quota: a capacity cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// `loadgen` cells: readers reading the topic back at once (fetch
    /// fan-out); the cell's records/s and CPU per record are then the
    /// read-back's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readers: Option<u32>,
    /// `saturate`, `rate` (with `target_records_per_second`), `idle_to_burst`,
    /// or `mixed`: of the `pairs`, `rate_pairs` at `target_records_per_second`
    /// each and the others flat out.
    pub load: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_pairs: Option<u32>,
    /// Java heap of the Kafka broker (`-Xms` and `-Xmx`, as `256m`) when not
    /// the runner's default: the reference experiment's small-heap check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_heap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_records_per_second: Option<u64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricRule {
    pub better: Better,
    pub unit: String,
    /// Relative worsening of the candidate median beyond which a material change is a regression.
    pub regression_budget: f64,
    /// Largest relative median absolute deviation over the rounds a side may show.
    pub variance_budget: f64,
    /// Absolute difference of medians (in `unit`) below which a change is ignored.
    pub materiality_floor: f64,
}

impl Cell {
    /// Who loads the broker: `java` unless the cell says otherwise.
    pub fn workload(&self) -> &str {
        self.workload.as_deref().unwrap_or("java")
    }

    /// A `mixed` load names how many of its pairs run at the target rate
    /// (at least one, and not all); no other load has rate pairs.
    fn check_mixed_load(&self) -> anyhow::Result<()> {
        if self.load != "mixed" {
            anyhow::ensure!(self.rate_pairs.is_none(), "cell {:?}: rate_pairs need the mixed load", self.name);
            return Ok(());
        }
        let pairs = self.pairs.unwrap_or(1);
        let rate_pairs = self.rate_pairs.unwrap_or(0);
        anyhow::ensure!(
            (1..pairs).contains(&rate_pairs) && self.target_records_per_second.is_some_and(|r| r > 0),
            "cell {:?}: a mixed load needs 1 to pairs - 1 rate_pairs and their target_records_per_second",
            self.name
        );
        Ok(())
    }
}

impl Contract {
    /// Parses contract bytes and checks them for consistency.
    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Self> {
        let contract: Contract = serde_json::from_slice(bytes)?;
        contract.check()?;
        Ok(contract)
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.version == CONTRACT_VERSION,
            "contract version {} is not supported (expected {CONTRACT_VERSION})",
            self.version
        );
        anyhow::ensure!(self.rounds.minimum >= 2, "rounds.minimum must be at least 2");
        if let Some(quota) = &self.broker_cpu_quota {
            anyhow::ensure!(quota.cores.is_finite() && quota.cores > 0.0, "broker_cpu_quota.cores must be positive");
        }
        anyhow::ensure!(!self.cells.is_empty(), "contract names no cells");
        let mut seen = std::collections::BTreeSet::new();
        for cell in &self.cells {
            anyhow::ensure!(seen.insert(cell.name.as_str()), "cell {:?} is named twice", cell.name);
            anyhow::ensure!(cell.pairs != Some(0), "cell {:?} has no producer/consumer pair", cell.name);
            let workload = cell.workload();
            anyhow::ensure!(WORKLOADS.contains(&workload), "cell {:?}: unknown workload {workload:?}", cell.name);
            if workload == "loadgen" {
                anyhow::ensure!(cell.readers != Some(0), "cell {:?} has no reader", cell.name);
                anyhow::ensure!(cell.load == "saturate", "cell {:?}: a capacity cell saturates", cell.name);
                anyhow::ensure!(cell.pairs.is_none(), "cell {:?}: pairs are the Java workload's", cell.name);
            } else {
                anyhow::ensure!(cell.readers.is_none(), "cell {:?}: readers are the load generator's", cell.name);
            }
            cell.check_mixed_load()?;
            if let Some(heap) = &cell.kafka_heap {
                let digits = heap.trim_end_matches(['m', 'g']);
                anyhow::ensure!(
                    workload == "java" && digits.len() + 1 == heap.len() && digits.parse::<u32>().is_ok_and(|n| n > 0),
                    "cell {:?}: kafka_heap {heap:?} is not a JVM size such as \"256m\" of a Java cell",
                    cell.name
                );
            }
        }
        for metric in METRICS {
            anyhow::ensure!(self.metrics.contains_key(metric), "contract lacks metric {metric:?}");
        }
        for (name, rule) in &self.metrics {
            anyhow::ensure!(METRICS.contains(&name.as_str()), "unknown metric {name:?} in contract");
            check_budgets(name, [rule.regression_budget, rule.variance_budget, rule.materiality_floor].map(Some))?;
        }
        for (workload, overrides) in &self.workload_budgets {
            anyhow::ensure!(WORKLOADS.contains(&workload.as_str()), "workload_budgets: unknown workload {workload:?}");
            for (name, o) in overrides {
                anyhow::ensure!(
                    METRICS.contains(&name.as_str()),
                    "workload_budgets.{workload}: unknown metric {name:?}"
                );
                check_budgets(
                    &format!("workload_budgets.{workload}.{name}"),
                    [o.regression_budget, o.variance_budget, o.materiality_floor],
                )?;
            }
        }
        Ok(())
    }

    /// Metric rules in [`METRICS`] order (the Java workload's).
    pub fn rules(&self) -> impl Iterator<Item = (&'static str, &MetricRule)> {
        METRICS.iter().map(|m| (*m, &self.metrics[*m]))
    }

    /// The metric rules `workload`'s cells are judged by, in [`METRICS`]
    /// order: each metric's, with the budgets `workload_budgets` sets for
    /// that workload instead.
    pub fn rules_for(&self, workload: &str) -> Vec<(&'static str, MetricRule)> {
        let overrides = self.workload_budgets.get(workload);
        self.rules()
            .map(|(metric, rule)| {
                let mut rule = rule.clone();
                if let Some(o) = overrides.and_then(|o| o.get(metric)) {
                    rule.regression_budget = o.regression_budget.unwrap_or(rule.regression_budget);
                    rule.variance_budget = o.variance_budget.unwrap_or(rule.variance_budget);
                    rule.materiality_floor = o.materiality_floor.unwrap_or(rule.materiality_floor);
                }
                (metric, rule)
            })
            .collect()
    }
}

/// Regression budget, variance budget and materiality floor of `what`,
/// where given: finite and not negative.
fn check_budgets(what: &str, values: [Option<f64>; 3]) -> anyhow::Result<()> {
    let names = ["regression_budget", "variance_budget", "materiality_floor"];
    for (name, value) in names.iter().zip(values) {
        if let Some(v) = value {
            anyhow::ensure!(v.is_finite() && v >= 0.0, "{what}.{name} must be a finite non-negative number");
        }
    }
    Ok(())
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
