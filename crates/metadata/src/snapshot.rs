//! Metadata snapshots: the image written as records to
//! `<end offset>-<epoch>.checkpoint` beside the metadata log, as KRaft names
//! them, so a start replays one snapshot plus the log after it instead of
//! every change since the cluster was formatted. A snapshot is a sequence of
//! record batches: a control batch with a SnapshotHeaderRecord, the image's
//! records, a control batch with a SnapshotFooterRecord. It is written to a
//! `.tmp` file, fsynced and renamed, so a crash leaves either the whole
//! snapshot or none; a snapshot without its footer or with a bad CRC is
//! ignored in favour of an older one (or the full log).

use std::io;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use krabka_log::fsutil::fsync_dir;
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder, RecordBatches};
use krabka_protocol::{
    ConfigRecord, Message, PartitionRecord, ProducerIdsRecord, SnapshotFooterRecord, SnapshotHeaderRecord, TopicRecord,
};

use crate::image::MetadataImage;
use crate::records::{MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};

const SUFFIX: &str = ".checkpoint";
/// Kafka's ControlRecordType ids for snapshot headers and footers.
const CONTROL_SNAPSHOT_HEADER: i16 = 3;
const CONTROL_SNAPSHOT_FOOTER: i16 = 4;
/// Metadata records per batch in a snapshot.
const RECORDS_PER_BATCH: usize = 1000;

fn file_name(end_offset: i64, epoch: i32) -> String {
    format!("{end_offset:020}-{epoch:010}{SUFFIX}")
}

fn parse_file_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (offset, epoch) = stem.split_once('-')?;
    (offset.len() == 20 && epoch.len() == 10).then_some(())?;
    epoch.parse::<i32>().ok()?;
    offset.parse().ok()
}

/// The records that rebuild `image` from nothing.
pub fn image_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id: -1,
        broker_epoch: -1,
        next_producer_id: image.next_producer_id_block,
        ..Default::default()
    })];
    let mut names: Vec<&String> = image.topics.keys().collect();
    names.sort();
    for name in names {
        let topic = &image.topics[name];
        records.push(MetadataRecord::Topic(TopicRecord {
            name: topic.name.clone(),
            topic_id: topic.id,
            ..Default::default()
        }));
        for (index, partition) in topic.partitions.iter().enumerate() {
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: index as i32,
                topic_id: topic.id,
                replicas: partition.replicas.clone(),
                isr: partition.isr.clone(),
                leader: partition.leader,
                leader_epoch: partition.leader_epoch,
                partition_epoch: partition.partition_epoch,
                ..Default::default()
            }));
        }
        for (key, value) in &topic.configs {
            records.push(config_record(CONFIG_RESOURCE_TOPIC, &topic.name, key, value));
        }
    }
    for (key, value) in &image.broker_configs {
        records.push(config_record(CONFIG_RESOURCE_BROKER, "", key, value));
    }
    records
}

fn config_record(resource_type: i8, resource_name: &str, name: &str, value: &str) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord {
        resource_type,
        resource_name: resource_name.into(),
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    })
}

fn control_batch(base_offset: i64, control_type: i16, value: Bytes, now_ms: i64) -> io::Result<Bytes> {
    let mut key = BytesMut::with_capacity(4);
    key.put_i16(0);
    key.put_i16(control_type);
    let mut builder = RecordBatchBuilder::new(Compression::None).with_control(true).with_base_offset(base_offset);
    builder
        .append(&NewRecord { timestamp_ms: now_ms, key: Some(&key), value: Some(&value), headers: &[] })
        .map_err(io::Error::other)?;
    Ok(builder.build().map_err(io::Error::other)?.into_bytes())
}

/// Writes the snapshot of `image`, which holds every record before
/// `end_offset`. Returns its path.
pub fn write(dir: &Path, image: &MetadataImage, end_offset: i64, now_ms: i64) -> io::Result<PathBuf> {
    let mut out = BytesMut::new();
    let header = SnapshotHeaderRecord { version: 0, last_contained_log_timestamp: now_ms, ..Default::default() };
    out.extend_from_slice(&control_batch(
        0,
        CONTROL_SNAPSHOT_HEADER,
        header.to_bytes(0).map_err(io::Error::other)?,
        now_ms,
    )?);
    let values: Vec<Bytes> = image_records(image).iter().map(MetadataRecord::encode).collect();
    let mut next_offset = 1i64;
    for chunk in values.chunks(RECORDS_PER_BATCH) {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(next_offset);
        for value in chunk {
            builder
                .append(&NewRecord { timestamp_ms: now_ms, key: None, value: Some(value), headers: &[] })
                .map_err(io::Error::other)?;
        }
        next_offset += chunk.len() as i64;
        out.extend_from_slice(builder.build().map_err(io::Error::other)?.as_bytes());
    }
    let footer = SnapshotFooterRecord { version: 0, ..Default::default() };
    out.extend_from_slice(&control_batch(
        next_offset,
        CONTROL_SNAPSHOT_FOOTER,
        footer.to_bytes(0).map_err(io::Error::other)?,
        now_ms,
    )?);
    let path = dir.join(file_name(end_offset, 0));
    let tmp = dir.join(format!("{}.tmp", file_name(end_offset, 0)));
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&out)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    fsync_dir(dir)?;
    Ok(path)
}

/// Reads one snapshot into an image; None when it is torn or corrupt.
fn read(path: &Path) -> Option<MetadataImage> {
    let bytes = Bytes::from(std::fs::read(path).ok()?);
    let mut image = MetadataImage::default();
    let mut saw_footer = false;
    for batch in RecordBatches::new(bytes) {
        let batch = batch.ok()?;
        batch.validate().ok()?;
        for record in batch.records(usize::MAX).ok()? {
            let record = record.ok()?;
            if batch.is_control() {
                let key = record.key.unwrap_or_default();
                if key.len() == 4 && i16::from_be_bytes([key[2], key[3]]) == CONTROL_SNAPSHOT_FOOTER {
                    saw_footer = true;
                }
                continue;
            }
            let decoded = MetadataRecord::decode(record.value.unwrap_or_default()).ok()?;
            image.apply(&decoded).ok()?;
        }
    }
    saw_footer.then_some(image)
}

/// The newest readable snapshot in `dir`: (end offset, image).
pub fn load_latest(dir: &Path) -> io::Result<Option<(i64, MetadataImage)>> {
    let mut found = Vec::new();
    if dir.exists() {
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(offset) = parse_file_name(&name) {
                found.push((offset, dir.join(name)));
            }
        }
    }
    found.sort();
    for (offset, path) in found.into_iter().rev() {
        match read(&path) {
            Some(image) => return Ok(Some((offset, image))),
            None => tracing::warn!(path = %path.display(), "ignoring an unreadable metadata snapshot"),
        }
    }
    Ok(None)
}

/// Removes snapshots older than the one ending at `keep`.
pub fn delete_older(dir: &Path, keep: i64) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if parse_file_name(&name).is_some_and(|offset| offset < keep) {
            std::fs::remove_file(dir.join(name))?;
        }
    }
    fsync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::Uuid;

    #[test]
    fn snapshot_round_trips_the_image_and_torn_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut image = MetadataImage::default();
        let id = Uuid::random().unwrap();
        image
            .apply(&MetadataRecord::Topic(TopicRecord { name: "t".into(), topic_id: id, ..Default::default() }))
            .unwrap();
        for p in 0..3 {
            image
                .apply(&MetadataRecord::Partition(PartitionRecord {
                    partition_id: p,
                    topic_id: id,
                    replicas: vec![1],
                    isr: vec![1],
                    leader: 1,
                    ..Default::default()
                }))
                .unwrap();
        }
        image.apply(&config_record(CONFIG_RESOURCE_TOPIC, "t", "retention.ms", "5")).unwrap();
        image.next_producer_id_block = 3000;
        write(dir.path(), &image, 42, 1).unwrap();
        let (offset, loaded) = load_latest(dir.path()).unwrap().unwrap();
        assert_eq!(offset, 42);
        assert_eq!(loaded.topics["t"].partitions.len(), 3);
        assert_eq!(loaded.topics["t"].configs["retention.ms"], "5");
        assert_eq!(loaded.next_producer_id_block, 3000);
        // A newer snapshot cut short (no footer) is skipped for the older one.
        let newer = write(dir.path(), &image, 50, 1).unwrap();
        let bytes = std::fs::read(&newer).unwrap();
        std::fs::write(&newer, &bytes[..bytes.len() - 10]).unwrap();
        assert_eq!(load_latest(dir.path()).unwrap().unwrap().0, 42);
        delete_older(dir.path(), 50).unwrap();
        assert!(load_latest(dir.path()).unwrap().is_none());
    }
}
