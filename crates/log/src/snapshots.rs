//! The snapshots of a replicated log, as KRaft stores them beside the
//! segments of the partition directory: `<end offset, 20 digits>-<epoch,
//! 10 digits>.checkpoint`, each a sequence of record batches that holds
//! everything before its end offset and closes with a control batch holding
//! a snapshot footer. What the records mean is the caller's (raft never
//! reads them; krabka-metadata encodes and decodes them); this module only
//! stores them: written to a `.tmp` sibling, fsynced, renamed, the directory
//! fsynced, so a crash leaves the whole snapshot or none (the loader removes
//! a leftover `.tmp` when the log opens), and a file that is not whole
//! batches with good CRCs up to its footer is skipped for an older one.
//!
//! A snapshot fetched from the leader arrives in chunks: they are written
//! to `<name>.part` as they come (Kafka's `.checkpoint.part`), so the
//! download never has to fit in memory, and the file is renamed to its
//! snapshot name only once it is whole and checked. A `.part` name is never
//! read as a snapshot, and opening the log deletes any a crash left.

use std::io;
use std::path::Path;

use bytes::Bytes;
use krabka_protocol::records::{control_type_id, ControlType, RecordBatch, RecordBatches};

use crate::fsutil::{atomic_write, fsync_dir};

const SUFFIX: &str = ".checkpoint";
const PART_SUFFIX: &str = ".checkpoint.part";

/// The 8-byte base offset and 4-byte length that start every batch.
const LOG_OVERHEAD: usize = 12;

/// A snapshot's name: every offset before `end_offset` is in it, and
/// `epoch` is the epoch of its last record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
}

impl SnapshotId {
    pub fn file_name(&self) -> String {
        format!("{:020}-{:010}{SUFFIX}", self.end_offset, self.epoch)
    }

    /// The id a snapshot file's name spells; None for any other file.
    pub fn parse(name: &str) -> Option<SnapshotId> {
        let stem = name.strip_suffix(SUFFIX)?;
        let (offset, epoch) = stem.split_once('-')?;
        (offset.len() == 20 && epoch.len() == 10).then_some(())?;
        Some(SnapshotId { end_offset: offset.parse().ok()?, epoch: epoch.parse().ok()? })
    }
}

/// The snapshots in `dir`, oldest first (none when `dir` does not exist).
pub fn list(dir: &Path) -> io::Result<Vec<SnapshotId>> {
    let mut found = Vec::new();
    if dir.exists() {
        for entry in std::fs::read_dir(dir)? {
            if let Some(id) = SnapshotId::parse(&entry?.file_name().to_string_lossy()) {
                found.push(id);
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// The snapshots in `dir` with their sizes in bytes, oldest first.
pub fn list_with_sizes(dir: &Path) -> io::Result<Vec<(SnapshotId, u64)>> {
    let mut found = Vec::new();
    for id in list(dir)? {
        found.push((id, std::fs::metadata(dir.join(id.file_name()))?.len()));
    }
    Ok(found)
}

/// Up to `max_bytes` of snapshot `id` from byte `position`, with the
/// snapshot's whole size (what a leader sends a follower in FetchSnapshot,
/// the bytes unaligned to batches); None when there is no such snapshot.
pub fn read_range(dir: &Path, id: SnapshotId, position: u64, max_bytes: u32) -> io::Result<Option<(u64, Bytes)>> {
    use std::os::unix::fs::FileExt;
    let file = match std::fs::File::open(dir.join(id.file_name())) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let size = file.metadata()?.len();
    let length = size.saturating_sub(position).min(u64::from(max_bytes)) as usize;
    let mut bytes = vec![0; length];
    file.read_exact_at(&mut bytes, position)?;
    Ok(Some((size, Bytes::from(bytes))))
}

/// Writes snapshot `id` atomically: after a crash it is whole or absent.
pub fn write(dir: &Path, id: SnapshotId, bytes: &[u8]) -> io::Result<()> {
    atomic_write(&dir.join(id.file_name()), bytes)
}

/// Snapshot `id`'s bytes; None when it is torn or corrupt.
pub fn read(dir: &Path, id: SnapshotId) -> io::Result<Option<Bytes>> {
    let bytes = Bytes::from(std::fs::read(dir.join(id.file_name()))?);
    Ok(is_whole(&bytes).then_some(bytes))
}

/// Whole batches with good CRCs, the last a control batch with the footer.
fn is_whole(bytes: &Bytes) -> bool {
    let mut last = None;
    for batch in RecordBatches::new(bytes.clone()) {
        match batch {
            Ok(batch) if batch.validate().is_ok() => last = Some(batch),
            _ => return false,
        }
    }
    last.is_some_and(|batch| is_footer(&batch))
}

fn is_footer(batch: &RecordBatch) -> bool {
    if !batch.is_control() {
        return false;
    }
    let Ok(mut records) = batch.records(usize::MAX) else {
        return false;
    };
    records.any(|record| {
        record
            .ok()
            .and_then(|r| r.key)
            .is_some_and(|key| control_type_id(&key) == Some(ControlType::SnapshotFooter.id()))
    })
}

fn part_path(dir: &Path, id: SnapshotId) -> std::path::PathBuf {
    dir.join(format!("{}.part", id.file_name()))
}

/// Writes `bytes` of the snapshot `id` being fetched at `position` of its
/// partial file. Position 0 starts the download over: any partial file (of
/// this or an abandoned download) is removed first. Any other position must
/// be where the file ends, as the chunks come in order.
pub fn write_part(dir: &Path, id: SnapshotId, position: u64, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let path = part_path(dir, id);
    let file = if position == 0 {
        delete_parts(dir)?;
        std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?
    } else {
        std::fs::OpenOptions::new().write(true).open(&path)?
    };
    let size = file.metadata()?.len();
    if size != position {
        let message = format!("{} holds {size} bytes, a chunk at {position}", path.display());
        return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
    }
    file.write_all_at(bytes, position)
}

/// Makes the partial snapshot `id` a snapshot when it is whole (batches
/// with good CRCs up to a footer): synced, renamed, the directory synced.
/// Returns its size; None (and the partial file is gone) when it is not.
pub fn freeze_part(dir: &Path, id: SnapshotId) -> io::Result<Option<u64>> {
    let path = part_path(dir, id);
    let file = std::fs::File::open(&path)?;
    if !is_whole_file(&file)? {
        tracing::warn!(file = %path.display(), "a fetched snapshot is not whole: dropped");
        std::fs::remove_file(&path)?;
        return Ok(None);
    }
    file.sync_all()?;
    let size = file.metadata()?.len();
    std::fs::rename(&path, dir.join(id.file_name()))?;
    fsync_dir(dir)?;
    Ok(Some(size))
}

/// Removes every partial snapshot in `dir` (none is ever resumed); returns
/// how many.
pub fn delete_parts(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().ends_with(PART_SUFFIX) {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    if removed > 0 {
        fsync_dir(dir)?;
    }
    Ok(removed)
}

/// [`is_whole`] for a file, read one batch at a time so that a snapshot
/// never has to fit in memory.
fn is_whole_file(file: &std::fs::File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let size = file.metadata()?.len();
    let (mut position, mut last_is_footer) = (0u64, false);
    while position < size {
        let mut head = [0u8; LOG_OVERHEAD];
        if size - position < LOG_OVERHEAD as u64 {
            return Ok(false);
        }
        file.read_exact_at(&mut head, position)?;
        let length = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        let total = LOG_OVERHEAD as u64 + u64::try_from(length).unwrap_or(u64::MAX);
        // A length past the file's end is a torn or corrupt batch (and is
        // never allocated for).
        if total > size - position {
            return Ok(false);
        }
        let mut bytes = vec![0u8; total as usize];
        file.read_exact_at(&mut bytes, position)?;
        match RecordBatch::new(Bytes::from(bytes)) {
            Ok(batch) if batch.validate().is_ok() => last_is_footer = is_footer(&batch),
            _ => return Ok(false),
        }
        position += total;
    }
    Ok(last_is_footer)
}

/// The newest whole snapshot in `dir`, with its bytes; torn ones are
/// skipped (and logged).
pub fn latest(dir: &Path) -> io::Result<Option<(SnapshotId, Bytes)>> {
    for id in list(dir)?.into_iter().rev() {
        match read(dir, id)? {
            Some(bytes) => return Ok(Some((id, bytes))),
            None => tracing::warn!(dir = %dir.display(), file = %id.file_name(), "ignoring a torn snapshot"),
        }
    }
    Ok(None)
}

/// The newest whole snapshot's id, each file checked one batch at a time
/// (what a log needs to open: unlike [`latest`], no snapshot is held in
/// memory).
pub fn latest_id(dir: &Path) -> io::Result<Option<SnapshotId>> {
    for id in list(dir)?.into_iter().rev() {
        if is_whole_file(&std::fs::File::open(dir.join(id.file_name()))?)? {
            return Ok(Some(id));
        }
        tracing::warn!(dir = %dir.display(), file = %id.file_name(), "ignoring a torn snapshot");
    }
    Ok(None)
}

/// Removes the snapshots that end before `end_offset`; returns how many.
pub fn delete_before(dir: &Path, end_offset: i64) -> io::Result<usize> {
    let doomed: Vec<SnapshotId> = list(dir)?.into_iter().filter(|id| id.end_offset < end_offset).collect();
    for id in &doomed {
        std::fs::remove_file(dir.join(id.file_name()))?;
    }
    fsync_dir(dir)?;
    Ok(doomed.len())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

    /// A snapshot in Kafka's shape: a batch of `values`, then the footer.
    pub(crate) fn snapshot_bytes(values: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut builder = RecordBatchBuilder::new(Compression::None);
        for value in values {
            let value = Bytes::copy_from_slice(value.as_bytes());
            builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
        }
        out.extend_from_slice(builder.build().unwrap().as_bytes());
        let key = Bytes::from_static(&[0, 0, 0, 4]);
        let mut footer = RecordBatchBuilder::new(Compression::None).with_control(true).with_base_offset(9);
        footer
            .append(&NewRecord { timestamp_ms: 1, key: Some(&key), value: Some(&Bytes::new()), headers: &[] })
            .unwrap();
        out.extend_from_slice(footer.build().unwrap().as_bytes());
        out
    }

    pub(crate) fn id(end_offset: i64) -> SnapshotId {
        SnapshotId { end_offset, epoch: 0 }
    }

    #[test]
    fn names_are_kraft_s() {
        let id = SnapshotId { end_offset: 42, epoch: 3 };
        assert_eq!(id.file_name(), "00000000000000000042-0000000003.checkpoint");
        assert_eq!(SnapshotId::parse(&id.file_name()), Some(id));
        for other in ["00000000000000000042-0000000003.checkpoint.tmp", "42-3.checkpoint", "leader-epoch-checkpoint"] {
            assert_eq!(SnapshotId::parse(other), None, "{other}");
        }
    }

    #[test]
    fn the_newest_whole_snapshot_wins_and_older_ones_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        assert!(latest(dir.path()).unwrap().is_none());
        let first = snapshot_bytes(&["a"]);
        write(dir.path(), id(10), &first).unwrap();
        write(dir.path(), id(20), &snapshot_bytes(&["b", "c"])).unwrap();
        assert_eq!(list(dir.path()).unwrap(), vec![id(10), id(20)]);
        let (newest, bytes) = latest(dir.path()).unwrap().unwrap();
        assert_eq!((newest, bytes.len()), (id(20), snapshot_bytes(&["b", "c"]).len()));
        assert_eq!(delete_before(dir.path(), 20).unwrap(), 1);
        assert_eq!(list(dir.path()).unwrap(), vec![id(20)]);
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")));
    }

    #[test]
    fn a_range_of_a_snapshot_reads_as_the_file_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = snapshot_bytes(&["a", "b"]);
        write(dir.path(), id(10), &bytes).unwrap();
        let size = bytes.len() as u64;
        assert_eq!(list_with_sizes(dir.path()).unwrap(), vec![(id(10), size)]);
        let (whole, first) = read_range(dir.path(), id(10), 0, 7).unwrap().unwrap();
        assert_eq!((whole, &first[..]), (size, &bytes[..7]));
        let (_, rest) = read_range(dir.path(), id(10), 7, u32::MAX).unwrap().unwrap();
        assert_eq!(&rest[..], &bytes[7..]);
        let (_, past) = read_range(dir.path(), id(10), size + 5, 10).unwrap().unwrap();
        assert!(past.is_empty());
        assert!(read_range(dir.path(), id(20), 0, 10).unwrap().is_none());
    }

    #[test]
    fn a_torn_or_footless_newest_snapshot_falls_back_to_the_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let older = snapshot_bytes(&["a"]);
        write(dir.path(), id(10), &older).unwrap();
        let newer = snapshot_bytes(&["b"]);
        // Cut anywhere, the newer one is not whole.
        for cut in [1, 10, newer.len() / 2, newer.len() - 1] {
            std::fs::write(dir.path().join(id(20).file_name()), &newer[..cut]).unwrap();
            assert_eq!(latest(dir.path()).unwrap().unwrap(), (id(10), Bytes::from(older.clone())), "cut at {cut}");
        }
        // Whole batches without the footer are not a snapshot either.
        let first_batch = RecordBatches::new(Bytes::from(newer.clone())).next().unwrap().unwrap();
        std::fs::write(dir.path().join(id(20).file_name()), first_batch.as_bytes()).unwrap();
        assert_eq!(latest(dir.path()).unwrap().unwrap().0, id(10));
        // A flipped byte fails the CRC.
        let mut flipped = newer.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 0xff;
        std::fs::write(dir.path().join(id(20).file_name()), &flipped).unwrap();
        assert_eq!(latest(dir.path()).unwrap().unwrap().0, id(10));
    }

    #[test]
    fn a_partial_snapshot_is_no_snapshot_until_frozen_whole() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = snapshot_bytes(&["a", "b"]);
        let half = bytes.len() / 2;
        write_part(dir.path(), id(10), 0, &bytes[..half]).unwrap();
        assert!(list(dir.path()).unwrap().is_empty() && latest(dir.path()).unwrap().is_none());
        // Chunks come in order: one anywhere but at the end is refused.
        assert!(write_part(dir.path(), id(10), half as u64 + 1, &bytes[half..]).is_err());
        write_part(dir.path(), id(10), half as u64, &bytes[half..]).unwrap();
        assert_eq!(freeze_part(dir.path(), id(10)).unwrap(), Some(bytes.len() as u64));
        assert_eq!(latest(dir.path()).unwrap().unwrap(), (id(10), Bytes::from(bytes.clone())));
        // Starting another drops an abandoned one; one cut short or
        // corrupt is never frozen.
        write_part(dir.path(), id(20), 0, &bytes[..half]).unwrap();
        write_part(dir.path(), id(30), 0, &bytes[..half]).unwrap();
        assert!(!dir.path().join(format!("{}.part", id(20).file_name())).exists());
        assert_eq!(freeze_part(dir.path(), id(30)).unwrap(), None);
        let mut flipped = bytes.clone();
        flipped[half] ^= 0xff;
        write_part(dir.path(), id(30), 0, &flipped).unwrap();
        assert_eq!(freeze_part(dir.path(), id(30)).unwrap(), None);
        assert_eq!(list(dir.path()).unwrap(), vec![id(10)]);
        write_part(dir.path(), id(40), 0, &bytes).unwrap();
        assert_eq!(delete_parts(dir.path()).unwrap(), 1);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![id(10).file_name()]);
    }
}
