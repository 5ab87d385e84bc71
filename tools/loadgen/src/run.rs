//! A whole run: topic, producer ids, templates, the timed produce phase,
//! then (with --consume) the read-back and its verdict.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::batches::{Plan, Templates};
use crate::cli::Args;
use crate::cluster::{end_offsets, ensure_topic, init_producer_id, ClusterView};
use crate::consumer::consume;
use crate::payload::{Payloads, SplittableRandom};
use crate::producer::{Identity, Producer, ProducerConfig, ProducerResult};
use crate::report::{cpu_seconds, Report};
use crate::verify::{Expectation, Tally, Verifier};

/// Produce timeout per request, as the Java producer's request.timeout.ms.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

pub async fn run(args: &Args) -> anyhow::Result<Report> {
    let mut view = ensure_topic(&args.bootstrap, &args.topic, args.partitions, args.replication_factor).await?;
    let partitions = view.partitions();
    // A producer without a partition would hold a producer id for nothing.
    let producers = args.connections.min(partitions);
    let start_offsets = if args.consume { Some(end_offsets(&mut view).await?) } else { None };
    let mut identities = Vec::with_capacity(producers);
    for _ in 0..producers {
        let (producer_id, producer_epoch) = init_producer_id(&view).await?;
        identities.push(Identity { producer_id, producer_epoch });
    }

    let planned = split(args.records, partitions);
    let template_started = Instant::now();
    let templates = Arc::new(build_templates(args, &planned)?);
    let template_seconds = template_started.elapsed().as_secs_f64();
    eprintln!(
        "[loadgen] {} partitions, {producers} producers; {:.1} MiB of batches built in {template_seconds:.2} s, \
         keys cycle every {} records per partition",
        partitions,
        templates.size_bytes() as f64 / (1 << 20) as f64,
        templates.cycle_records()
    );

    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let results = produce(args, &view, &identities, &templates, &planned).await?;
    let produce_cpu_seconds = cpu_seconds() - cpu_before;
    let last_ack = results.iter().filter_map(|r| r.last_ack).max().unwrap_or_else(Instant::now);
    let mut report = summarize(&results, args.record_size);
    report.wall_seconds = (last_ack - started).as_secs_f64();
    report.produce_cpu_seconds = produce_cpu_seconds;
    report.template_seconds = template_seconds;
    report.settings = args.settings(partitions, producers);

    // A runner that splits the broker's CPU between the phases reads this.
    eprintln!("[loadgen] produce phase done");
    if let Some(start) = start_offsets {
        let expectations: Vec<Expectation> = results
            .iter()
            .flat_map(|r| &r.partitions)
            .map(|p| Expectation { partition: p.partition, producer_id: p.producer_id, acked: p.acked })
            .collect();
        let consume_started = Instant::now();
        let (read, tally) = read_back(args, &view, start, expectations, templates.cycle_records()).await?;
        report.consume_wall_seconds = consume_started.elapsed().as_secs_f64();
        report.consumed = Some((read, tally));
    }
    report.cpu_seconds = cpu_seconds();
    Ok(report)
}

/// `--readers` readers at once, each reading every partition from `start`
/// with a verifier of its own (a consumer group each, as Kafka counts
/// fan-out): the records read and the verdicts, summed.
async fn read_back(
    args: &Args,
    view: &ClusterView,
    start: Vec<i64>,
    expectations: Vec<Expectation>,
    cycle_records: u64,
) -> anyhow::Result<(u64, Tally)> {
    let idle = Duration::from_secs_f64(args.consume_idle_seconds);
    let start = Arc::new(start);
    let readers: Vec<_> = (0..args.readers)
        .map(|_| {
            let (mut view, start) = (view.clone(), Arc::clone(&start));
            let mut verifier = Verifier::with_depth(args.verify, &expectations, cycle_records, args.record_size);
            tokio::spawn(async move {
                let read = consume(&mut view, &start, &mut verifier, idle).await?;
                anyhow::Ok((read, verifier.tally()))
            })
        })
        .collect();
    let mut total = (0, Tally::default());
    for reader in readers {
        let (read, tally) = reader.await??;
        total = (total.0 + read, total.1 + tally);
    }
    Ok(total)
}

/// Records per partition: `records` spread evenly (the first partitions take
/// the remainder), or unbounded for a timed run.
pub(crate) fn split(records: Option<u64>, partitions: usize) -> Vec<Option<u64>> {
    let n = partitions as u64;
    (0..n).map(|p| records.map(|total| total / n + u64::from(p < total % n))).collect()
}

pub(crate) fn build_templates(args: &Args, planned: &[Option<u64>]) -> anyhow::Result<Templates> {
    let plan = Plan {
        records: planned.to_vec(),
        batch_records: args.batch_records(),
        record_size: args.record_size,
        compression: args.compression,
        budget_bytes: args.template_mib << 20,
        run_id: run_id(),
    };
    Templates::build(&plan, &mut Payloads::new(args.payload, args.record_size, args.seed))
}

/// A random run id, as the Java workload's `new SplittableRandom().nextLong()`.
fn run_id() -> i64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as i64;
    SplittableRandom::new(nanos ^ i64::from(std::process::id()) << 32).next_long()
}

/// Runs the producers together; partition p belongs to producer p mod count.
async fn produce(
    args: &Args,
    view: &ClusterView,
    identities: &[Identity],
    templates: &Arc<Templates>,
    planned: &[Option<u64>],
) -> anyhow::Result<Vec<ProducerResult>> {
    let count = identities.len();
    let stop_after = Duration::from_secs_f64(args.seconds.unwrap_or(args.timeout_seconds));
    let mut tasks = Vec::with_capacity(count);
    for (i, &identity) in identities.iter().enumerate() {
        let owned: Vec<(i32, Option<u64>)> =
            planned.iter().enumerate().filter(|(p, _)| p % count == i).map(|(p, &n)| (p as i32, n)).collect();
        let share = owned.len() as f64 / planned.len() as f64;
        let config = ProducerConfig {
            acks: args.acks,
            timeout_ms: PRODUCE_TIMEOUT_MS,
            max_in_flight: args.max_in_flight,
            rate: (args.rate > 0.0).then_some(args.rate * share),
            stop_after,
        };
        let producer = Producer::new(identity, config, Arc::clone(templates), view.clone(), owned);
        tasks.push(tokio::spawn(producer.run()));
    }
    let mut results = Vec::with_capacity(count);
    for task in tasks {
        results.push(task.await?);
    }
    Ok(results)
}

fn summarize(results: &[ProducerResult], record_size: usize) -> Report {
    let mut report = Report { record_size, ..Report::default() };
    for result in results {
        report.records_acked += result.partitions.iter().map(|p| p.acked).sum::<u64>();
        report.errors += result.partitions.iter().map(|p| p.unacked).sum::<u64>();
        report.requests += result.requests;
        report.request_bytes += result.request_bytes;
        report.retries += result.retries;
        report.latencies_ns.extend(&result.latencies_ns);
        if report.first_error.is_none() {
            report.first_error.clone_from(&result.first_error);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_spread_evenly_over_partitions() {
        assert_eq!(split(Some(20_000), 6), [3334, 3334, 3333, 3333, 3333, 3333].map(Some));
        assert_eq!(split(None, 2), [None, None]);
    }
}
