//! The per-partition log gauges (`kafka_log_size_bytes`, `kafka_log_start_offset`,
//! `kafka_log_end_offset`), built when Prometheus scrapes rather than kept as series.
//!
//! A `GaugeVec` child holds its label values, descriptor and hash entries: about 2 KiB for
//! the three gauges of one partition, which at tens of thousands of hosted partitions was a
//! fifth of the broker's memory. Here a partition costs one [`PartitionLogState`] (under 50
//! bytes, its topic name shared with the partition), and a scrape builds the families from
//! the latest states.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Gauge, LabelPair, Metric, MetricFamily, MetricType};

/// One hosted partition's log, as last published.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionLogState {
    pub topic: Arc<str>,
    pub partition: i32,
    pub size_bytes: u64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// A family's name, its help, and what it reads from a state.
type GaugeDefinition = (&'static str, &'static str, fn(&PartitionLogState) -> f64);

const GAUGES: [GaugeDefinition; 3] = [
    ("kafka_log_size_bytes", "Bytes on disk of a partition's log.", |s| s.size_bytes as f64),
    ("kafka_log_start_offset", "First offset still in a partition's log.", |s| s.log_start_offset as f64),
    ("kafka_log_end_offset", "Offset the next record of a partition will get.", |s| s.log_end_offset as f64),
];

/// The collector: the descriptors of the three families and the states they are built from.
#[derive(Debug)]
pub(super) struct PartitionLogGauges {
    descs: Vec<Desc>,
    states: Arc<Mutex<Vec<PartitionLogState>>>,
}

impl PartitionLogGauges {
    /// The collector and the handle through which the broker publishes states to it.
    pub(super) fn new() -> (Self, Arc<Mutex<Vec<PartitionLogState>>>) {
        let labels = vec!["topic".to_string(), "partition".to_string()];
        let descs = GAUGES
            .iter()
            .map(|(name, help, _)| {
                Desc::new(name.to_string(), help.to_string(), labels.clone(), Default::default())
                    .expect("static gauge definition")
            })
            .collect();
        let states = Arc::new(Mutex::new(Vec::new()));
        (PartitionLogGauges { descs, states: states.clone() }, states)
    }
}

impl Collector for PartitionLogGauges {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        if states.is_empty() {
            // An empty family is an error to the text encoder: no partitions, no families.
            return Vec::new();
        }
        GAUGES
            .iter()
            .map(|(name, help, value)| {
                let mut family = MetricFamily::default();
                family.set_name(name.to_string());
                family.set_help(help.to_string());
                family.set_field_type(MetricType::GAUGE);
                family.set_metric(states.iter().map(|state| gauge_of(state, value(state))).collect());
                family
            })
            .collect()
    }
}

/// One series: labels in name order, as the vector types give them.
fn gauge_of(state: &PartitionLogState, value: f64) -> Metric {
    let label = |name: &str, value: String| {
        let mut pair = LabelPair::default();
        pair.set_name(name.to_string());
        pair.set_value(value);
        pair
    };
    let mut gauge = Gauge::default();
    gauge.set_value(value);
    let mut metric = Metric::default();
    metric.set_label(vec![label("partition", state.partition.to_string()), label("topic", state.topic.to_string())]);
    metric.set_gauge(gauge);
    metric
}
