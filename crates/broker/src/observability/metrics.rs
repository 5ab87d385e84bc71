//! The broker's Prometheus metrics.
//!
//! Every [`Metrics`] owns its own [`Registry`] rather than using the global default one, so
//! tests (and several brokers in one process) do not see each other's series.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use super::failures::Failures;
use super::jmx_names::{self, ControllerCounts};
use super::partition_gauges::{PartitionLogGauges, PartitionLogState};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Counter, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// Request latency buckets in seconds: 50µs (a metadata request served from memory) to 10s
/// (a produce waiting on a slow disk).
const LATENCY_BUCKETS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The broker's metrics. Create once, share as `Arc<Metrics>`; every method takes `&self`.
///
/// The per-request and per-batch methods do not allocate once a label combination has been
/// seen: series are looked up by borrowed label values and numbers are formatted on the stack.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    request_errors: IntCounterVec,
    client_errors: IntCounterVec,
    request_latency: HistogramVec,
    /// Resolved children of `requests` and `request_latency` per API, so that a completed
    /// request costs one read-locked lookup instead of one per metric.
    per_api: RwLock<HashMap<&'static str, ApiSeries>>,
    topic_bytes_in: IntCounterVec,
    topic_bytes_out: IntCounterVec,
    topic_messages_in: IntCounterVec,
    connections: IntGauge,
    connections_accepted: IntCounter,
    connections_rejected: IntCounter,
    connections_throttled: IntCounter,
    /// SASL authentications that completed and that failed, as Kafka's
    /// socket-server-metrics count them.
    authentications_succeeded: IntCounter,
    authentications_failed: IntCounter,
    fetch_wakeups: IntCounter,
    /// Whether the kernel offers kTLS, and whether fetches over TLS use it.
    ktls_offered: IntGauge,
    tls_zero_copy: IntGauge,
    /// What the per-partition log gauges are built from at each scrape.
    partition_states: Arc<Mutex<Vec<PartitionLogState>>>,
    /// Kafka's ReplicaManager gauges, under the JMX exporter's names.
    replica_gauges: ReplicaGauges,
    /// The controller's counts as last published (None: not a controller).
    controller_counts: Mutex<Option<ControllerCounts>>,
    failures: Failures,
}

/// Counts of the partitions hosted here, as Kafka's ReplicaManager gauges them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaCounts {
    pub partitions: i64,
    pub leaders: i64,
    /// Led here with fewer in-sync replicas than replicas.
    pub under_replicated: i64,
    /// Led here with fewer in-sync replicas than min.insync.replicas.
    pub under_min_isr: i64,
    /// Led here with exactly min.insync.replicas in sync.
    pub at_min_isr: i64,
    /// Hosted here in a failed log directory.
    pub offline_replicas: i64,
    /// Log directories a write failed in.
    pub offline_log_dirs: i64,
}

#[derive(Debug)]
struct ReplicaGauges([IntGauge; 7]);

impl ReplicaGauges {
    const NAMES: [(&'static str, &'static str); 7] = [
        ("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker."),
        ("kafka_server_replicamanager_leadercount", "Partitions this broker leads."),
        (
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here with an ISR smaller than their replicas.",
        ),
        (
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led here with an ISR below min.insync.replicas.",
        ),
        (
            "kafka_server_replicamanager_atminisrpartitioncount",
            "Partitions led here with an ISR at min.insync.replicas.",
        ),
        ("kafka_server_replicamanager_offlinereplicacount", "Replicas hosted here in a failed log directory."),
        ("kafka_log_logmanager_offlinelogdirectorycount", "Log directories taken offline after a failed write."),
    ];

    fn new(registry: &Registry) -> Self {
        ReplicaGauges(Self::NAMES.map(|(name, help)| {
            let gauge = IntGauge::new(name, help).expect("static gauge");
            register(registry, gauge.clone());
            gauge
        }))
    }

    fn set(&self, counts: ReplicaCounts) {
        let values = [
            counts.partitions,
            counts.leaders,
            counts.under_replicated,
            counts.under_min_isr,
            counts.at_min_isr,
            counts.offline_replicas,
            counts.offline_log_dirs,
        ];
        for (gauge, value) in self.0.iter().zip(values) {
            gauge.set(value);
        }
    }
}

#[derive(Debug, Clone)]
struct ApiSeries {
    requests: IntCounter,
    latency: Histogram,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = counter_vec(&registry, "kafka_requests_total", "Requests completed, by API.", &["api"]);
        let request_errors = counter_vec(
            &registry,
            "kafka_request_errors_total",
            "Requests completed with a non-zero top-level error code, by API and code.",
            &["api", "error"],
        );
        let client_errors = counter_vec(
            &registry,
            "krabka_client_errors_total",
            "Error codes told to clients, top level and per topic or partition, by API and error name.",
            &["api", "error"],
        );
        let request_latency = HistogramVec::new(
            HistogramOpts::new("kafka_request_latency_seconds", "Time from a request's arrival to its response.")
                .buckets(LATENCY_BUCKETS.to_vec()),
            &["api"],
        )
        .expect("static histogram definition");
        register(&registry, request_latency.clone());

        let topic_bytes_in =
            counter_vec(&registry, "kafka_topic_bytes_in_total", "Record bytes produced, by topic.", &["topic"]);
        let topic_bytes_out =
            counter_vec(&registry, "kafka_topic_bytes_out_total", "Record bytes fetched, by topic.", &["topic"]);
        let topic_messages_in =
            counter_vec(&registry, "kafka_topic_messages_in_total", "Records produced, by topic.", &["topic"]);

        let connections = IntGauge::new("kafka_connections", "Open client connections.").expect("static gauge");
        register(&registry, connections.clone());
        let connections_accepted = IntCounter::new("kafka_connections_accepted_total", "Client connections accepted.")
            .expect("static counter");
        register(&registry, connections_accepted.clone());
        let connections_rejected = IntCounter::new(
            "kafka_connections_rejected_total",
            "Client connections refused, e.g. over the connection limit.",
        )
        .expect("static counter");
        register(&registry, connections_rejected.clone());
        let connections_throttled = IntCounter::new(
            "kafka_connections_throttled_total",
            "Connections whose accept waited for a max.connection.creation.rate.",
        )
        .expect("static counter");
        register(&registry, connections_throttled.clone());
        let authentications_succeeded = IntCounter::new(
            "kafka_server_socket_server_metrics_successful_authentication_total",
            "SASL authentications completed (re-authentications included).",
        )
        .expect("static counter");
        register(&registry, authentications_succeeded.clone());
        let authentications_failed = IntCounter::new(
            "kafka_server_socket_server_metrics_failed_authentication_total",
            "SASL authentications refused (wrong credentials, unsupported mechanism).",
        )
        .expect("static counter");
        register(&registry, authentications_failed.clone());
        let fetch_wakeups = IntCounter::new(
            "kafka_fetch_wakeups_total",
            "Times a parked fetch was woken by a change to a partition it waits on, and read again.",
        )
        .expect("static counter");
        register(&registry, fetch_wakeups.clone());
        let ktls_offered = IntGauge::new(
            "krabka_ktls_offered",
            "1 when the kernel offers kTLS (the tls TCP upper-layer protocol), probed at start.",
        )
        .expect("static gauge");
        register(&registry, ktls_offered.clone());
        let tls_zero_copy = IntGauge::new(
            "krabka_tls_fetch_zero_copy",
            "1 when fetches over TLS go from the file to the socket without a copy (kTLS); 0: encrypted in user space.",
        )
        .expect("static gauge");
        register(&registry, tls_zero_copy.clone());

        let (partition_gauges, partition_states) = PartitionLogGauges::new();
        register(&registry, partition_gauges);
        let replica_gauges = ReplicaGauges::new(&registry);

        register(&registry, ProcessCollector::new());
        let failures = Failures::new(&registry);

        Metrics {
            registry,
            requests,
            request_errors,
            client_errors,
            request_latency,
            per_api: RwLock::new(HashMap::new()),
            topic_bytes_in,
            topic_bytes_out,
            topic_messages_in,
            connections,
            connections_accepted,
            connections_rejected,
            connections_throttled,
            authentications_succeeded,
            authentications_failed,
            fetch_wakeups,
            ktls_offered,
            tls_zero_copy,
            partition_states,
            replica_gauges,
            controller_counts: Mutex::new(None),
            failures,
        }
    }

    /// Failures that repeat per request, logged once and counted.
    pub fn failures(&self) -> &Failures {
        &self.failures
    }

    /// One request answered: `error_code` is the response's top-level Kafka error code (0 for none).
    pub fn request_completed(&self, api: &'static str, error_code: i16, latency: Duration) {
        let series = self.api_series(api);
        series.requests.inc();
        series.latency.observe(latency.as_secs_f64());
        if error_code != 0 {
            let code = IntLabel::new(error_code.into());
            self.request_errors.with_label_values(&[api, code.as_str()]).inc();
        }
    }

    /// One error code told to a client (a response may carry several).
    pub fn client_error(&self, api: &'static str, code: i16) {
        let name = krabka_protocol::ErrorCode::from(code).name();
        self.client_errors.with_label_values(&[api, name]).inc();
    }

    fn api_series(&self, api: &'static str) -> ApiSeries {
        if let Some(series) = self.per_api.read().unwrap_or_else(PoisonError::into_inner).get(api) {
            return series.clone();
        }
        let mut per_api = self.per_api.write().unwrap_or_else(PoisonError::into_inner);
        per_api
            .entry(api)
            .or_insert_with(|| ApiSeries {
                requests: self.requests.with_label_values(&[api]),
                latency: self.request_latency.with_label_values(&[api]),
            })
            .clone()
    }

    /// Record bytes appended to `topic` by producers.
    pub fn bytes_in(&self, topic: &str, bytes: u64) {
        self.topic_bytes_in.with_label_values(&[topic]).inc_by(bytes);
    }

    /// Record bytes sent to fetchers (consumers and followers) from `topic`.
    pub fn bytes_out(&self, topic: &str, bytes: u64) {
        self.topic_bytes_out.with_label_values(&[topic]).inc_by(bytes);
    }

    /// Records appended to `topic` by producers.
    pub fn messages_in(&self, topic: &str, records: u64) {
        self.topic_messages_in.with_label_values(&[topic]).inc_by(records);
    }

    /// What the kTLS probe found, and whether TLS fetches are zero-copy.
    pub fn tls_fetch_path(&self, ktls_offered: bool, zero_copy: bool) {
        self.ktls_offered.set(i64::from(ktls_offered));
        self.tls_zero_copy.set(i64::from(zero_copy));
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
        self.connections_accepted.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    pub fn connection_rejected(&self) {
        self.connections_rejected.inc();
    }

    pub fn connection_throttled(&self) {
        self.connections_throttled.inc();
    }

    pub fn authenticated(&self) {
        self.authentications_succeeded.inc();
    }

    pub fn failed_authentication(&self) {
        self.authentications_failed.inc();
    }

    /// A parked fetch woke to read again.
    pub fn fetch_woken(&self) {
        self.fetch_wakeups.inc();
    }

    /// The size and offsets of every hosted partition's log, published as gauges (replacing
    /// the last states: a partition no longer hosted drops out).
    pub fn publish_partition_states(&self, states: Vec<PartitionLogState>) {
        *self.partition_states.lock().unwrap_or_else(PoisonError::into_inner) = states;
    }

    /// The replica manager's partition counts (published with the log states).
    pub fn publish_replica_counts(&self, counts: ReplicaCounts) {
        self.replica_gauges.set(counts);
    }

    /// The controller's counts (KafkaController's gauges), on a controller.
    pub fn publish_controller_counts(&self, counts: ControllerCounts) {
        *self.controller_counts.lock().unwrap_or_else(PoisonError::into_inner) = Some(counts);
    }

    /// Drops every series of a deleted topic: its traffic counters and its partitions' gauges.
    pub fn remove_topic(&self, topic: &str) {
        self.partition_states.lock().unwrap_or_else(PoisonError::into_inner).retain(|s| &*s.topic != topic);
        for counters in [&self.topic_bytes_in, &self.topic_bytes_out, &self.topic_messages_in] {
            // Absent when the topic never saw that kind of traffic.
            let _ = counters.remove_label_values(&[topic]);
        }
    }

    /// All metrics in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut text = String::with_capacity(16 * 1024);
        let mut families = self.registry.gather();
        let controller = *self.controller_counts.lock().unwrap_or_else(PoisonError::into_inner);
        families.extend(jmx_names::derive(&families, controller));
        if let Err(err) = TextEncoder::new().encode_utf8(&families, &mut text) {
            // Only possible with an inconsistent metric family, which would be a bug here; a
            // partial page is more useful to the scraper than none.
            tracing::error!(error = %err, "encoding metrics");
        }
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn register(registry: &Registry, collector: impl Collector + 'static) {
    // Names are constants and each Metrics has a fresh registry, so this cannot collide.
    registry.register(Box::new(collector)).expect("metric registered once in a fresh registry");
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let vec = IntCounterVec::new(Opts::new(name, help), labels).expect("static counter definition");
    register(registry, vec.clone());
    vec
}

/// An integer formatted on the stack, for use as a label value without allocating.
struct IntLabel {
    buf: [u8; 20],
    len: usize,
}

impl IntLabel {
    fn new(value: i64) -> Self {
        // 20 bytes hold i64::MIN ("-9223372036854775808"), so the write cannot run out of room.
        let mut buf = [0u8; 20];
        let mut rest = &mut buf[..];
        let _ = write!(rest, "{value}");
        let len = 20 - rest.len();
        IntLabel { buf, len }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

/// `process_resident_memory_bytes` and `process_cpu_seconds_total`, read from /proc at scrape
/// time. Prometheus' own process collector needs its "process" feature (and procfs), which
/// this crate does not enable; two /proc reads are all it takes.
struct ProcessCollector {
    resident: IntGauge,
    cpu: Counter,
    /// Serialises scrapes: the CPU counter is reset and re-filled on each.
    update: Mutex<()>,
}

impl ProcessCollector {
    fn new() -> Self {
        ProcessCollector {
            resident: IntGauge::new("process_resident_memory_bytes", "Resident memory size in bytes.")
                .expect("static gauge"),
            cpu: Counter::new("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")
                .expect("static counter"),
            update: Mutex::new(()),
        }
    }
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.resident.desc().into_iter().chain(self.cpu.desc()).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _serial = self.update.lock().unwrap_or_else(PoisonError::into_inner);
        let mut families = Vec::with_capacity(2);
        // Off Linux (or without /proc) the series are simply absent.
        if let Some(bytes) = read_resident_bytes() {
            self.resident.set(i64::try_from(bytes).unwrap_or(i64::MAX));
            families.extend(self.resident.collect());
        }
        if let Some(seconds) = read_cpu_seconds() {
            self.cpu.reset();
            self.cpu.inc_by(seconds);
            families.extend(self.cpu.collect());
        }
        families
    }
}

/// Resident set size: the second field of /proc/self/statm, in pages.
fn read_resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages.saturating_mul(u64::try_from(page_size).ok().filter(|&size| size > 0)?))
}

/// utime + stime from /proc/self/stat, converted from clock ticks to seconds.
fn read_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may itself contain spaces and
    // parentheses, so count fields from the last ')': field 3 (state) comes first after it.
    let (_, fields) = stat.rsplit_once(')')?;
    let mut fields = fields.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks_per_second <= 0 {
        return None;
    }
    Some((utime + stime) as f64 / ticks_per_second as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample line `name{labels} value` of `text`, if present.
    fn sample<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
    }

    #[test]
    fn kafkas_mbeans_are_exposed_under_the_jmx_exporters_names() {
        let metrics = Metrics::new();
        metrics.request_completed("Produce", 0, Duration::from_micros(30));
        metrics.request_completed("Produce", 0, Duration::from_millis(3));
        metrics.messages_in("orders", 5);
        metrics.messages_in("payments", 2);
        metrics.bytes_out("orders", 100);
        metrics.publish_controller_counts(ControllerCounts { active: true, topics: 2, ..Default::default() });
        let text = metrics.render();

        let per_topic = r#"kafka_server_brokertopicmetrics_messagesin_total{topic="orders"}"#;
        assert_eq!(sample(&text, per_topic), Some("5"), "{text}");
        assert_eq!(sample(&text, "kafka_server_brokertopicmetrics_messagesin_total"), Some("7"));
        assert_eq!(sample(&text, "kafka_server_brokertopicmetrics_bytesout_total"), Some("100"));
        assert_eq!(sample(&text, r#"kafka_network_requestmetrics_requests_total{request="Produce"}"#), Some("2"));
        assert_eq!(sample(&text, "kafka_server_brokertopicmetrics_totalproducerequests_total"), Some("2"));
        let count = r#"kafka_network_requestmetrics_totaltimems_count{request="Produce"}"#;
        assert_eq!(sample(&text, count), Some("2"));
        // Half the requests took 30 µs (bucket 50 µs), half 3 ms (bucket 5 ms).
        let p99 = r#"kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}"#;
        let p99: f64 = sample(&text, p99).expect("p99").parse().unwrap();
        assert!((2.5..=5.0).contains(&p99), "p99 {p99} ms");
        assert_eq!(sample(&text, "kafka_controller_kafkacontroller_activecontrollercount"), Some("1"));
        assert_eq!(sample(&text, "kafka_controller_kafkacontroller_globaltopiccount"), Some("2"));
    }

    #[test]
    fn requests_errors_and_latency() {
        let metrics = Metrics::new();
        metrics.request_completed("Produce", 0, Duration::from_micros(30));
        metrics.request_completed("Produce", 6, Duration::from_millis(3));
        metrics.request_completed("Fetch", -1, Duration::from_secs(20));
        let text = metrics.render();

        assert_eq!(sample(&text, r#"kafka_requests_total{api="Produce"}"#), Some("2"), "{text}");
        assert_eq!(sample(&text, r#"kafka_requests_total{api="Fetch"}"#), Some("1"));
        assert_eq!(sample(&text, r#"kafka_request_errors_total{api="Produce",error="6"}"#), Some("1"));
        assert_eq!(sample(&text, r#"kafka_request_errors_total{api="Fetch",error="-1"}"#), Some("1"));
        // Successful requests do not create an error series.
        assert!(!text.contains(r#"error="0""#));
        assert_eq!(sample(&text, r#"kafka_request_latency_seconds_bucket{api="Produce",le="0.00005"}"#), Some("1"));
        assert_eq!(sample(&text, r#"kafka_request_latency_seconds_bucket{api="Produce",le="0.005"}"#), Some("2"));
        assert_eq!(sample(&text, r#"kafka_request_latency_seconds_bucket{api="Fetch",le="10"}"#), Some("0"));
        assert_eq!(sample(&text, r#"kafka_request_latency_seconds_count{api="Fetch"}"#), Some("1"));
        assert!(text.contains("# TYPE kafka_request_latency_seconds histogram"));
    }

    #[test]
    fn topics_and_connections() {
        let metrics = Metrics::new();
        metrics.bytes_in("orders", 100);
        metrics.bytes_in("orders", 50);
        metrics.messages_in("orders", 3);
        metrics.bytes_out("orders", 7);
        metrics.bytes_in("payments", 1);
        metrics.connection_opened();
        metrics.connection_opened();
        metrics.connection_closed();
        metrics.connection_rejected();
        let text = metrics.render();

        assert_eq!(sample(&text, r#"kafka_topic_bytes_in_total{topic="orders"}"#), Some("150"), "{text}");
        assert_eq!(sample(&text, r#"kafka_topic_messages_in_total{topic="orders"}"#), Some("3"));
        assert_eq!(sample(&text, r#"kafka_topic_bytes_out_total{topic="orders"}"#), Some("7"));
        assert_eq!(sample(&text, "kafka_connections"), Some("1"));
        assert_eq!(sample(&text, "kafka_connections_accepted_total"), Some("2"));
        assert_eq!(sample(&text, "kafka_connections_rejected_total"), Some("1"));

        metrics.remove_topic("orders");
        let text = metrics.render();
        assert!(!text.contains(r#"topic="orders""#), "{text}");
        assert_eq!(sample(&text, r#"kafka_topic_bytes_in_total{topic="payments"}"#), Some("1"));
    }

    #[test]
    fn partition_gauges_and_their_removal() {
        let metrics = Metrics::new();
        // The per-partition families; the LogManager's offline-directory
        // gauge (`kafka_log_logmanager_*`) is always there.
        let families = ["kafka_log_size_bytes", "kafka_log_start_offset", "kafka_log_end_offset"];
        let text = metrics.render();
        assert!(families.iter().all(|f| !text.contains(f)), "no partitions, no log families: {text}");
        let state = |topic: &str, partition, size_bytes, log_start_offset, log_end_offset| PartitionLogState {
            topic: Arc::from(topic),
            partition,
            size_bytes,
            log_start_offset,
            log_end_offset,
        };
        metrics.publish_partition_states(vec![state("orders", 0, 4096, 10, 250), state("orders", 1, 0, 0, 0)]);
        metrics.publish_partition_states(vec![
            state("orders", 0, 8192, 10, 300),
            state("orders", 1, 0, 0, 0),
            state("payments", 0, 1, 2, 3),
        ]);
        let text = metrics.render();
        assert_eq!(sample(&text, r#"kafka_log_size_bytes{partition="0",topic="orders"}"#), Some("8192"), "{text}");
        assert_eq!(sample(&text, r#"kafka_log_start_offset{partition="0",topic="orders"}"#), Some("10"));
        assert_eq!(sample(&text, r#"kafka_log_end_offset{partition="0",topic="orders"}"#), Some("300"));
        assert_eq!(sample(&text, r#"kafka_log_end_offset{partition="1",topic="orders"}"#), Some("0"));
        assert!(text.contains("# TYPE kafka_log_size_bytes gauge"), "{text}");
        assert!(text.contains("# HELP kafka_log_end_offset Offset the next record"), "{text}");

        // A partition no longer hosted drops out with the next publication.
        metrics.publish_partition_states(vec![state("orders", 1, 0, 0, 0), state("payments", 0, 1, 2, 3)]);
        let text = metrics.render();
        assert!(!text.contains(r#"{partition="0",topic="orders"}"#), "{text}");
        assert_eq!(sample(&text, r#"kafka_log_size_bytes{partition="1",topic="orders"}"#), Some("0"));

        metrics.bytes_in("orders", 5);
        metrics.remove_topic("orders");
        let text = metrics.render();
        assert!(!text.contains(r#"topic="orders""#), "{text}");
        assert_eq!(sample(&text, r#"kafka_log_end_offset{partition="0",topic="payments"}"#), Some("3"));
    }

    #[test]
    fn registries_are_independent() {
        let first = Metrics::new();
        let second = Metrics::new();
        first.bytes_in("orders", 1);
        assert!(!second.render().contains("orders"));
    }

    #[test]
    fn process_metrics_are_rendered() {
        let text = Metrics::new().render();
        if cfg!(target_os = "linux") {
            let resident: u64 = sample(&text, "process_resident_memory_bytes")
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("no resident memory in {text}"));
            assert!(resident > 0);
            let cpu: f64 = sample(&text, "process_cpu_seconds_total")
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("no cpu seconds in {text}"));
            assert!(cpu >= 0.0);
            assert!(text.contains("# TYPE process_cpu_seconds_total counter"));
        }
    }

    #[test]
    fn int_labels() {
        for value in [0, 7, -1, 32767, i64::MIN, i64::MAX] {
            assert_eq!(IntLabel::new(value).as_str(), value.to_string());
        }
    }
}
