//! Whether a partition's replicas hold the same bytes, and when they do
//! not, where they part: the batches (base offset, leader epoch, CRC) of
//! each copy around the first difference, so that a failed run says which
//! replica diverged and how.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_protocol::records::RecordBatches;

/// The bytes of every segment of `topic`-`partition` under `log_dir`, in
/// segment order (empty when the partition has no directory there).
pub fn partition_log(log_dir: &Path, topic: &str, partition: i32) -> Vec<u8> {
    let dir = log_dir.join(format!("{topic}-{partition}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files.iter().flat_map(|f| std::fs::read(f).unwrap_or_default()).collect()
}

/// Waits until `copies` (one per replica, e.g. from [`partition_log`]) are
/// all the same and not empty; on timeout panics with where they differ.
pub fn wait_for_same_bytes(what: &str, timeout: Duration, mut copies: impl FnMut() -> Vec<Vec<u8>>) {
    let deadline = Instant::now() + timeout;
    loop {
        let read = copies();
        if read.first().is_some_and(|c| !c.is_empty()) && read.iter().all(|c| *c == read[0]) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", divergence(&read));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each copy's size and its batches from the first one that is not the
/// same in every copy (a few of them).
pub fn divergence(copies: &[Vec<u8>]) -> String {
    let batches: Vec<Vec<(i64, i32, u32, usize)>> = copies.iter().map(|c| batch_summaries(c)).collect();
    // Past the longest every copy reads None: the same batches with
    // different bytes (a torn tail, or empty copies) point there.
    let longest = batches.iter().map(Vec::len).max().unwrap_or(0);
    let first_difference =
        (0..longest).find(|&i| batches.iter().any(|b| b.get(i) != batches[0].get(i))).unwrap_or(longest);
    let mut report = String::new();
    for (replica, (copy, summary)) in copies.iter().zip(&batches).enumerate() {
        let shown: Vec<String> = summary
            .iter()
            .skip(first_difference)
            .take(4)
            .map(|(offset, epoch, crc, len)| format!("offset {offset} epoch {epoch} crc {crc:08x} len {len}"))
            .collect();
        let in_batches: usize = summary.iter().map(|b| b.3).sum();
        report += &format!(
            "  copy {replica}: {} bytes ({in_batches} in {} whole batches); from batch {first_difference}: [{}]\n",
            copy.len(),
            summary.len(),
            shown.join("; ")
        );
    }
    report
}

/// (base offset, partition leader epoch, CRC, size) of each whole batch.
fn batch_summaries(bytes: &[u8]) -> Vec<(i64, i32, u32, usize)> {
    RecordBatches::new(Bytes::copy_from_slice(bytes))
        .map_while(Result::ok)
        .map(|b| (b.base_offset(), b.partition_leader_epoch(), b.crc(), b.size_bytes()))
        .collect()
}
