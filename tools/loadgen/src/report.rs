//! The run's one-line JSON summary, and the generator's own CPU time.

use serde_json::{json, Value};

use crate::verify::Tally;

/// Everything the summary says, gathered by the run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The run's parameters, as given or derived (a JSON object).
    pub settings: Value,
    pub records_acked: u64,
    pub record_size: usize,
    pub wall_seconds: f64,
    pub requests: u64,
    pub request_bytes: u64,
    pub retries: u64,
    pub latencies_ns: Vec<u64>,
    /// Records meant to be sent but not acknowledged.
    pub errors: u64,
    pub first_error: Option<String>,
    /// With --consume: records read and the verdict.
    pub consumed: Option<(u64, Tally)>,
    /// From the first fetch to the last reader's end.
    pub consume_wall_seconds: f64,
    pub template_seconds: f64,
    pub cpu_seconds: f64,
    pub produce_cpu_seconds: f64,
}

impl Report {
    /// No produce error and, when verified, nothing lost, duplicated,
    /// reordered or damaged.
    pub fn ok(&self) -> bool {
        self.errors == 0 && self.consumed.is_none_or(|(_, tally)| tally.is_clean())
    }

    pub fn to_json(&self) -> Value {
        let per_second = |v: f64| if self.wall_seconds > 0.0 { v / self.wall_seconds } else { 0.0 };
        let bytes_acked = self.records_acked * self.record_size as u64;
        let per_record = |v: f64| if self.records_acked > 0 { v / self.records_acked as f64 } else { 0.0 };
        let tally = self.consumed.map(|(_, tally)| tally);
        let mut summary = json!({
            "records_acked": self.records_acked,
            "bytes_acked": bytes_acked,
            "wall_seconds": round3(self.wall_seconds),
            "records_per_second": round3(per_second(self.records_acked as f64)),
            "mib_per_second": round3(per_second(bytes_acked as f64 / (1 << 20) as f64)),
            "requests": self.requests,
            "request_bytes": self.request_bytes,
            "retries": self.retries,
            "produce_latency_ms": latency_ms(&self.latencies_ns),
            "records_consumed": self.consumed.map(|(read, _)| read),
            "consume_wall_seconds": round3(self.consume_wall_seconds),
            "consume_records_per_second": self.consumed.map(|(read, _)| {
                round3(if self.consume_wall_seconds > 0.0 { read as f64 / self.consume_wall_seconds } else { 0.0 })
            }),
            "records_verified": tally.map(|t| t.verified),
            "duplicates": tally.map(|t| t.duplicates),
            "missing": tally.map(|t| t.missing),
            "out_of_order": tally.map(|t| t.out_of_order),
            "corrupt": tally.map(|t| t.corrupt),
            "foreign": tally.map(|t| t.foreign),
            "unacked_consumed": tally.map(|t| t.unacked_consumed),
            "errors": self.errors,
            "first_error": self.first_error,
            "template_seconds": round3(self.template_seconds),
            "cpu_seconds": round3(self.cpu_seconds),
            "produce_cpu_seconds": round3(self.produce_cpu_seconds),
            "produce_cpu_us_per_record": round3(per_record(self.produce_cpu_seconds * 1e6)),
            "ok": self.ok(),
        });
        if let (Value::Object(summary), Value::Object(settings)) = (&mut summary, &self.settings) {
            summary.extend(settings.clone());
        }
        summary
    }
}

/// Nearest-rank p50, p95, p99 and max, in milliseconds (null without samples).
fn latency_ms(nanos: &[u64]) -> Value {
    let mut sorted = nanos.to_vec();
    sorted.sort_unstable();
    let rank = |p: f64| -> Option<f64> {
        let last = sorted.len().checked_sub(1)?;
        let index = ((p * sorted.len() as f64).ceil() as usize).saturating_sub(1).min(last);
        Some(round3(sorted[index] as f64 / 1e6))
    };
    json!({ "p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "max": rank(1.0) })
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// User plus system CPU seconds of this process so far (all threads).
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let nanos: Vec<u64> = (1..=100).map(|ms| ms * 1_000_000).collect();
        assert_eq!(latency_ms(&nanos), json!({ "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0 }));
        assert_eq!(latency_ms(&[]), json!({ "p50": null, "p95": null, "p99": null, "max": null }));
    }

    #[test]
    fn any_loss_fails_the_run_and_the_line_has_settings_and_verdict() {
        let tally = Tally { verified: 9, missing: 1, ..Tally::default() };
        let report = Report {
            settings: json!({ "topic": "t" }),
            records_acked: 10,
            consumed: Some((9, tally)),
            ..Report::default()
        };
        assert!(!report.ok());
        let json = report.to_json();
        assert_eq!((&json["topic"], &json["records_acked"], &json["missing"]), (&json!("t"), &json!(10), &json!(1)));
        assert_eq!(json["ok"], json!(false));
        assert!(cpu_seconds() > 0.0);
    }
}
