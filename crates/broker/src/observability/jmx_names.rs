//! Kafka's broker metrics under the names the Prometheus JMX exporter's
//! common Kafka rules give them (`lowercaseOutputName`: an MBean
//! `kafka.<domain>:type=<T>,name=<N>PerSec,<k>=<v>` becomes
//! `kafka_<domain>_<t>_<n>_total{<k>="<v>"}`, a gauge's `Value` drops the
//! suffix, a histogram's percentiles become a `quantile` label), so that
//! dashboards and alerts built on Kafka's MBeans chart krabka unchanged.
//!
//! They are derived at scrape time from krabka's own series (nothing more
//! is counted per request): the per-topic traffic counters, the requests
//! and their latency histogram, the partition log gauges, and the
//! controller's counts as the broker last published them.

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType, Quantile, Summary};

/// The controller's view of the cluster, as Kafka's KafkaController
/// gauges report it on a controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerCounts {
    /// This node is the active controller.
    pub active: bool,
    pub topics: i64,
    pub partitions: i64,
    /// Partitions without a leader.
    pub offline_partitions: i64,
    pub active_brokers: i64,
    pub fenced_brokers: i64,
}

/// A krabka counter family per topic and the BrokerTopicMetrics name it
/// is reported under (per topic, and summed for the whole broker).
const TOPIC_COUNTERS: [(&str, &str); 3] = [
    ("kafka_topic_messages_in_total", "kafka_server_brokertopicmetrics_messagesin_total"),
    ("kafka_topic_bytes_in_total", "kafka_server_brokertopicmetrics_bytesin_total"),
    ("kafka_topic_bytes_out_total", "kafka_server_brokertopicmetrics_bytesout_total"),
];

/// The partition log gauges and their kafka.log:type=Log names.
const LOG_GAUGES: [(&str, &str); 3] = [
    ("kafka_log_size_bytes", "kafka_log_log_size"),
    ("kafka_log_start_offset", "kafka_log_log_logstartoffset"),
    ("kafka_log_end_offset", "kafka_log_log_logendoffset"),
];

/// The percentiles Kafka's request histograms publish.
const QUANTILES: [f64; 6] = [0.50, 0.75, 0.95, 0.98, 0.99, 0.999];

/// The JMX-exporter-named families derived from `gathered` (krabka's own),
/// with the controller's gauges when this node is a controller.
pub fn derive(gathered: &[MetricFamily], controller: Option<ControllerCounts>) -> Vec<MetricFamily> {
    let find = |name: &str| gathered.iter().find(|f| f.name() == name);
    let mut derived = Vec::new();
    for (source, name) in TOPIC_COUNTERS {
        if let Some(family) = find(source) {
            derived.push(topic_counter(family, name));
        }
    }
    if let Some(requests) = find("kafka_requests_total") {
        derived.push(relabelled(requests, "kafka_network_requestmetrics_requests_total", ("api", "request")));
        derived.extend(request_type_totals(requests));
    }
    if let Some(latency) = find("kafka_request_latency_seconds") {
        derived.push(total_time_ms(latency));
    }
    for (source, name) in LOG_GAUGES {
        if let Some(family) = find(source) {
            derived.push(renamed(family, name));
        }
    }
    if let Some(counts) = controller {
        derived.extend(controller_gauges(counts));
    }
    derived.retain(|family| !family.get_metric().is_empty());
    derived
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(kind);
    family.set_metric(metrics);
    family
}

fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_string());
    pair.set_value(value.to_string());
    pair
}

fn counter(labels: Vec<LabelPair>, value: f64) -> Metric {
    let mut counter = Counter::default();
    counter.set_value(value);
    let mut metric = Metric::default();
    metric.set_label(labels);
    metric.set_counter(counter);
    metric
}

fn gauge(value: f64) -> Metric {
    let mut gauge = Gauge::default();
    gauge.set_value(value);
    let mut metric = Metric::default();
    metric.set_gauge(gauge);
    metric
}

/// A per-topic counter under its BrokerTopicMetrics name, per topic and,
/// without a label, for all topics (Kafka's AllTopics MBean).
fn topic_counter(source: &MetricFamily, name: &str) -> MetricFamily {
    let mut metrics: Vec<Metric> = source.get_metric().to_vec();
    let all: f64 = metrics.iter().map(|m| m.get_counter().get_value()).sum();
    metrics.push(counter(Vec::new(), all));
    family(name, source.help(), MetricType::COUNTER, metrics)
}

/// `source` under `name`, its label `from` renamed `to`.
fn relabelled(source: &MetricFamily, name: &str, rename: (&str, &str)) -> MetricFamily {
    let mut metrics = source.get_metric().to_vec();
    for metric in &mut metrics {
        metric.set_label(renamed_labels(metric.get_label(), rename));
    }
    family(name, source.help(), source.get_field_type(), metrics)
}

/// `labels` with the label `from` renamed `to`, the rest unchanged.
fn renamed_labels(labels: &[LabelPair], (from, to): (&str, &str)) -> Vec<LabelPair> {
    labels.iter().map(|l| if l.name() == from { label(to, l.value()) } else { l.clone() }).collect()
}

fn renamed(source: &MetricFamily, name: &str) -> MetricFamily {
    family(name, source.help(), source.get_field_type(), source.get_metric().to_vec())
}

/// Kafka's broker-wide TotalProduceRequestsPerSec and TotalFetchRequestsPerSec.
fn request_type_totals(requests: &MetricFamily) -> Vec<MetricFamily> {
    let count = |api: &str| {
        let of_api = |m: &&Metric| m.get_label().iter().any(|l| l.name() == "api" && l.value() == api);
        requests.get_metric().iter().filter(of_api).map(|m| m.get_counter().get_value()).sum::<f64>()
    };
    [("Produce", "totalproducerequests"), ("Fetch", "totalfetchrequests")]
        .into_iter()
        .map(|(api, name)| {
            let name = format!("kafka_server_brokertopicmetrics_{name}_total");
            family(&name, &format!("{api} requests."), MetricType::COUNTER, vec![counter(Vec::new(), count(api))])
        })
        .collect()
}

/// RequestMetrics' TotalTimeMs per request: the percentiles (estimated
/// from the latency histogram's buckets, as Prometheus' histogram_quantile
/// does) in milliseconds, the count and the sum.
fn total_time_ms(latency: &MetricFamily) -> MetricFamily {
    let metrics = latency
        .get_metric()
        .iter()
        .map(|source| {
            let histogram = source.get_histogram();
            let buckets: Vec<(f64, u64)> =
                histogram.get_bucket().iter().map(|b| (b.upper_bound(), b.cumulative_count())).collect();
            let count = histogram.get_sample_count();
            let quantiles = QUANTILES.iter().map(|&q| {
                let mut quantile = Quantile::default();
                quantile.set_quantile(q);
                quantile.set_value(estimate_quantile(q, &buckets, count) * 1000.0);
                quantile
            });
            let mut summary = Summary::default();
            summary.set_sample_count(count);
            summary.set_sample_sum(histogram.get_sample_sum() * 1000.0);
            summary.set_quantile(quantiles.collect());
            let mut metric = Metric::default();
            metric.set_label(renamed_labels(source.get_label(), ("api", "request")));
            debug_assert!(metric.get_label().iter().all(|l| l.name() != "api"));
            metric.set_summary(summary);
            metric
        })
        .collect();
    let help = "Time from a request's arrival to its response, in milliseconds.";
    family("kafka_network_requestmetrics_totaltimems", help, MetricType::SUMMARY, metrics)
}

/// The `q` quantile of a histogram of `count` observations with
/// cumulative `buckets` (upper bound, count), interpolated linearly
/// within its bucket; one past the last finite bound reads as that bound.
fn estimate_quantile(q: f64, buckets: &[(f64, u64)], count: u64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    let rank = q * count as f64;
    let mut lower = (0.0, 0u64);
    for &(bound, cumulative) in buckets.iter().filter(|(bound, _)| bound.is_finite()) {
        if cumulative as f64 >= rank {
            let within = (rank - lower.1 as f64) / (cumulative - lower.1).max(1) as f64;
            return lower.0 + (bound - lower.0) * within;
        }
        lower = (bound, cumulative);
    }
    lower.0
}

fn controller_gauges(counts: ControllerCounts) -> Vec<MetricFamily> {
    let values = [
        ("activecontrollercount", "1 on the active controller.", i64::from(counts.active)),
        ("globaltopiccount", "Topics in the cluster.", counts.topics),
        ("globalpartitioncount", "Partitions in the cluster.", counts.partitions),
        ("offlinepartitionscount", "Partitions without a leader.", counts.offline_partitions),
        ("activebrokercount", "Registered, unfenced brokers.", counts.active_brokers),
        ("fencedbrokercount", "Registered, fenced brokers.", counts.fenced_brokers),
    ];
    values
        .into_iter()
        .map(|(name, help, value)| {
            let name = format!("kafka_controller_kafkacontroller_{name}");
            family(&name, help, MetricType::GAUGE, vec![gauge(value as f64)])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        // 10 observations: 4 at or under 1, 10 at or under 2.
        let buckets = [(1.0, 4), (2.0, 10), (f64::INFINITY, 10)];
        assert_eq!(estimate_quantile(0.2, &buckets, 10), 0.5);
        assert_eq!(estimate_quantile(0.7, &buckets, 10), 1.5);
        assert_eq!(estimate_quantile(0.5, &[], 0), 0.0);
        // Past the last finite bound: that bound.
        assert_eq!(estimate_quantile(0.99, &[(1.0, 1), (f64::INFINITY, 10)], 10), 1.0);
    }
}
