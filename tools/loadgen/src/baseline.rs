//! `--write-baseline DIR`: the floor a broker's produce path is measured
//! against. The same pre-built batches a run would send are appended with
//! one write(2) each to a file per partition, round-robin over the
//! partitions as producers send, on one thread and without a broker: what
//! it costs this machine to put those bytes into the page cache. Issue 22's
//! goal holds the broker's CPU per record within 2x of this one's.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde_json::{json, Value};

use crate::cli::Args;
use crate::report::cpu_seconds;
use crate::run::{build_templates, split};

/// Writes `--records` records' batches into `dir` (files `partition-N.log`,
/// removed afterwards) and returns the summary line.
pub fn write_baseline(args: &Args, dir: &Path) -> anyhow::Result<Value> {
    let partitions = args.partitions as usize;
    let planned = split(args.records, partitions);
    let templates = build_templates(args, &planned)?;
    let paths: Vec<_> = (0..partitions).map(|p| dir.join(format!("partition-{p}.log"))).collect();
    let mut files = paths.iter().map(|path| create(path)).collect::<anyhow::Result<Vec<File>>>()?;
    let b = u64::from(templates.batch_records());
    let batches = planned.iter().map(|n| n.unwrap_or(0).div_ceil(b)).max().unwrap_or(0);
    let (mut records, mut bytes, mut written) = (0u64, 0u64, 0u64);
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    for k in 0..batches {
        for (p, file) in files.iter_mut().enumerate() {
            let Some(n) = planned[p].filter(|&n| k * b < n) else { continue };
            let batch = templates.batch(p, k * b);
            file.write_all(batch).with_context(|| format!("writing {}", paths[p].display()))?;
            records += b.min(n - k * b);
            bytes += batch.len() as u64;
            written += 1;
        }
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    debug_assert_eq!(Some(records), args.records);
    drop(files);
    for path in &paths {
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(json!({
        "mode": "write_baseline",
        "records": records,
        "bytes": bytes,
        "batches_written": written,
        "wall_seconds": wall_seconds,
        "cpu_seconds": cpu,
        "cpu_us_per_record": if records > 0 { cpu * 1e6 / records as f64 } else { f64::NAN },
        "records_per_second": if wall_seconds > 0.0 { records as f64 / wall_seconds } else { 0.0 },
        "settings": args.settings(partitions, 1),
    }))
}

fn create(path: &Path) -> anyhow::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}
