//! Opening a partition's directory: what a crash or a clean shutdown left
//! becomes a segment set the log can append to.
//!
//! In order: an interrupted compaction is discarded or completed
//! (`cleaner::recover_leftovers`); `.deleted` and `.tmp` leftovers and
//! indexes without a log are removed; every segment is opened, and those a
//! crash may have torn (from the one holding the recovery point on, after an
//! unclean shutdown), those a compaction swapped in, and those whose indexes
//! fail their O(1) check are re-read. The first invalid batch truncates its
//! segment, and every later segment is deleted. Leader epochs the checkpoint
//! lost come back from the batches re-read. The producer state is the log's
//! to rebuild afterwards, from [`Loaded::replay_from`].

use std::path::Path;

use tracing::warn;

use crate::checkpoint::TopicPartition;
use crate::config::LogConfig;
use crate::error::LogError;
use crate::fsutil::fsync_dir;
use crate::leader_epoch::LeaderEpochCache;
use crate::segment::{Segment, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX};
use crate::segments::SegmentSet;

/// What opening the log did, for the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    pub segments: usize,
    pub recovered_segments: usize,
    pub truncated_bytes: u64,
}

/// Where the log left off, as its checkpoints say.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checkpoints {
    pub log_start_offset: i64,
    pub recovery_point: i64,
    pub clean_shutdown: bool,
}

/// A loaded directory: the log is this plus its producer state.
pub(crate) struct Loaded {
    pub topic_partition: TopicPartition,
    pub segments: SegmentSet,
    pub leader_epochs: LeaderEpochCache,
    pub log_start_offset: i64,
    pub recovery_point: i64,
    pub report: OpenReport,
    /// The first segment recovery re-read (i64::MAX: none). Producer
    /// snapshots past it may miss what recovery changed.
    pub replay_from: i64,
}

/// How the segment loop went so far.
#[derive(Default)]
struct Progress {
    report: OpenReport,
    truncated_at: Option<i64>,
    first_recovered: Option<i64>,
}

/// Opens (or creates) the directory `dir`; see the module comment.
pub(crate) fn load(dir: &Path, config: &LogConfig, from: Checkpoints, now_ms: i64) -> Result<Loaded, LogError> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let topic_partition = TopicPartition::from_dir_name(name)
        .or_else(|| TopicPartition::from_future_dir_name(name))
        .unwrap_or_else(|| TopicPartition::new(name, 0));
    let created = !dir.exists();
    std::fs::create_dir_all(dir)?;
    if created {
        if let Some(parent) = dir.parent() {
            fsync_dir(parent)?;
        }
    }
    // A compaction a crash interrupted: drop `.cleaned`, finish `.swap`.
    let swapped = crate::cleaner::recover_leftovers(dir)?;
    let base_offsets = remove_leftovers(dir)?;
    let mut leader_epochs = LeaderEpochCache::load(dir)?;
    let mut segments = SegmentSet::new(dir);
    let partition = topic_partition.dir_name();
    let mut progress =
        Progress { report: OpenReport { segments: base_offsets.len(), ..Default::default() }, ..Default::default() };
    let recover_from = base_offsets.iter().rev().find(|&&b| b <= from.recovery_point).copied().unwrap_or(i64::MIN);
    let last_base = base_offsets.last().copied();
    for &base in &base_offsets {
        if progress.truncated_at.is_some() {
            // Everything after a truncated segment is unreachable: drop it.
            warn!(partition = %partition, base, "deleting segment after a corrupt one");
            open_segment(dir, config, base, false, now_ms)?
                .mark_deleted()?
                .iter()
                .try_for_each(std::fs::remove_file)?;
            continue;
        }
        let active = Some(base) == last_base;
        let mut segment = open_segment(dir, config, base, active, now_ms)?;
        let needs_recovery = (!from.clean_shutdown && base >= recover_from) || swapped.contains(&base);
        recover_if_needed(&mut segment, needs_recovery, active, &partition, &mut leader_epochs, &mut progress)?;
        segments.insert(segment);
    }
    if segments.is_empty() {
        segments.create(from.log_start_offset.max(0), config, now_ms)?;
        fsync_dir(dir)?;
    } else if progress.truncated_at.is_some() {
        // The last kept segment becomes the active one: make room to append.
        segments.active_mut().resize_indexes(config.segment_index_bytes)?;
    }
    let log_start_offset = from.log_start_offset.max(segments.first_base());
    let end = segments.log_end_offset();
    let recovery_point = if from.clean_shutdown {
        // A clean shutdown flushed everything (Kafka's rule too).
        end
    } else {
        // Recovery read the tail from the page cache, which a power
        // loss can still take: the recovery point moves only when a
        // flush puts the tail on disk, so the next unclean open checks
        // it again (Kafka's LogLoader keeps min(checkpoint, end) too).
        leader_epochs.truncate_from_end(end)?;
        from.recovery_point.min(end)
    };
    Ok(Loaded {
        topic_partition,
        segments,
        leader_epochs,
        log_start_offset,
        recovery_point,
        report: progress.report,
        replay_from: progress.first_recovered.unwrap_or(i64::MAX),
    })
}

fn open_segment(dir: &Path, config: &LogConfig, base: i64, active: bool, now_ms: i64) -> std::io::Result<Segment> {
    Segment::open(dir, base, config.segment_index_bytes, active, config.index_interval_bytes, now_ms)
}

/// Removes what interrupted deletions, checkpoint writes and rolls left, and
/// returns the base offsets of the segments, in order.
fn remove_leftovers(dir: &Path) -> std::io::Result<Vec<i64>> {
    let mut base_offsets = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.ends_with(DELETED_SUFFIX) || file_name.ends_with(".tmp") {
            // Left by a deletion or a checkpoint write a crash interrupted.
            std::fs::remove_file(entry.path())?;
        } else if let Some(base) = parse_base_offset(&file_name, LOG_SUFFIX) {
            base_offsets.push(base);
        }
    }
    base_offsets.sort_unstable();
    // Indexes without a log file are orphans from an interrupted roll or delete.
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            if let Some(base) = parse_base_offset(&file_name, suffix) {
                if base_offsets.binary_search(&base).is_err() {
                    std::fs::remove_file(entry.path())?;
                }
            }
        }
    }
    Ok(base_offsets)
}

/// Re-reads `segment` when a crash or a swap calls for it, or its indexes
/// fail their O(1) check: the batches re-read teach the leader epochs, and
/// a torn or corrupt tail is cut (which ends the load's good segments).
fn recover_if_needed(
    segment: &mut Segment,
    needs_recovery: bool,
    active: bool,
    partition: &str,
    leader_epochs: &mut LeaderEpochCache,
    progress: &mut Progress,
) -> Result<(), LogError> {
    let base = segment.base_offset();
    let index_problem = segment.quick_check_indexes().err();
    if !needs_recovery && index_problem.is_none() {
        return Ok(());
    }
    if let Some(problem) = &index_problem {
        warn!(partition = %partition, base, %problem, "rebuilding a corrupt index");
    }
    progress.report.recovered_segments += 1;
    progress.first_recovered.get_or_insert(base);
    // Epochs the checkpoint lost come back from the batches.
    let mut epochs_seen: Vec<(i32, i64)> = Vec::new();
    let truncation = segment.recover(|batch| {
        let epoch = batch.partition_leader_epoch();
        if epochs_seen.last().is_none_or(|&(latest, _)| epoch > latest) {
            epochs_seen.push((epoch, batch.base_offset()));
        }
    })?;
    for (epoch, start_offset) in epochs_seen {
        leader_epochs.assign(epoch, start_offset)?;
    }
    if let Some(truncation) = truncation {
        warn!(
            partition = %partition,
            base,
            position = truncation.position,
            bytes = truncation.bytes_removed,
            reason = %truncation.reason,
            "truncated a torn or corrupt segment tail"
        );
        progress.report.truncated_bytes += truncation.bytes_removed;
        progress.truncated_at = Some(base);
    }
    if !active && progress.truncated_at.is_none() {
        segment.seal()?;
    }
    Ok(())
}

fn parse_base_offset(file_name: &str, suffix: &str) -> Option<i64> {
    let stem = file_name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok()).flatten()
}
