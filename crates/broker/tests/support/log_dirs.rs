//! What the log-directory (JBOD, KIP-858) tests share: a small disk that
//! fills, where a broker's replicas are, what the metadata log says of
//! them, and a raw Produce and DescribeLogDirs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use krabka_metadata::records::decode_batches;
use krabka_metadata::MetadataRecord;
use krabka_protocol::compression::Compression;
use krabka_protocol::describe_log_dirs_response::DescribeLogDirsResult;
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, Uuid,
};

use super::cluster::metadata_log;
use super::{BrokerProcess, RawClient};

/// A tmpfs mounted for the test, unmounted however it ends (lazily: the
/// broker may still hold files there).
pub struct SmallDisk(PathBuf);

impl SmallDisk {
    pub fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let options = format!("size={size}");
        let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", &options, "tmpfs"]).arg(at).status();
        assert!(mounted.is_ok_and(|s| s.success()), "mount a tmpfs (needs root)");
        SmallDisk(at.to_path_buf())
    }

    /// Writes zeros until the disk is full; the next write there fails.
    pub fn fill(&self) {
        let _ = Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", self.0.join("filler").display()))
            .args(["bs=1M", "status=none"])
            .status();
    }

    /// Frees what [`fill`](Self::fill) took.
    pub fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).expect("remove the filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Each partition of `topic` as (leader, ISR), by index; empty when
/// `bootstrap` does not answer.
pub fn leaders_and_isrs(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<i32>)> {
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return Vec::new() };
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
    let Some(found) = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic)) else { return Vec::new() };
    let mut partitions: Vec<_> =
        found.partitions.iter().map(|p| (p.partition_index, (p.leader_id, p.isr_nodes.clone()))).collect();
    partitions.sort();
    partitions.into_iter().map(|(_, state)| state).collect()
}

/// The brokers a Metadata answer lists (registered and unfenced).
pub fn brokers_listed(bootstrap: &str) -> Vec<i32> {
    let request = MetadataRequest { topics: Some(Vec::new()), ..Default::default() };
    let answer: MetadataResponse = RawClient::connect(bootstrap).request(ApiKey::Metadata, 12, &request);
    answer.brokers.iter().map(|b| b.node_id).collect()
}

/// One Produce of `count` records of `size` bytes to `topic`-`partition`
/// (acks=1): its error code (-1: no connection).
pub fn produce(bootstrap: &str, topic: &str, partition: i32, count: usize, size: usize) -> i16 {
    let value = vec![b'x'; size];
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for _ in 0..count {
        let record = NewRecord { timestamp_ms: 1_700_000_000_000, key: None, value: Some(&value), headers: &[] };
        builder.append(&record).expect("append");
    }
    let records: Bytes = builder.build().expect("build").into_bytes();
    let partition_data = vec![PartitionProduceData { index: partition, records: Some(records), ..Default::default() }];
    let topic_data = vec![TopicProduceData { name: topic.into(), partition_data, ..Default::default() }];
    let request = ProduceRequest { acks: 1, timeout_ms: 10_000, topic_data, ..Default::default() };
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return -1 };
    let response: ProduceResponse = RawClient::from_stream(stream).request(ApiKey::Produce, 11, &request);
    response.responses[0].partition_responses[0].error_code
}

/// DescribeLogDirs (v4) of every directory of the broker at `bootstrap`.
pub fn describe_log_dirs(bootstrap: &str) -> Vec<DescribeLogDirsResult> {
    let request = DescribeLogDirsRequest { topics: None, ..Default::default() };
    let answer: DescribeLogDirsResponse = RawClient::connect(bootstrap).request(ApiKey::DescribeLogDirs, 4, &request);
    answer.results
}

/// The `directory.id` written into `dir`'s meta.properties.
pub fn directory_id(dir: &Path) -> Uuid {
    let text = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    let id = text.lines().find_map(|l| l.strip_prefix("directory.id=")).expect("a directory.id");
    krabka_format::dynamic_voters::parse_java_uuid(id.trim()).expect("a Kafka uuid")
}

/// The partitions of `topic` whose replica on broker `broker_id` the
/// metadata log (at `node`) places in `directory` now.
pub fn assigned_to(node: &BrokerProcess, topic: &str, broker_id: i32, directory: Uuid) -> Vec<i32> {
    let Ok((records, _)) = decode_batches(Bytes::from(metadata_log(node)), 0) else { return Vec::new() };
    let mut topic_id = None;
    // Each partition's replicas and their directories, as the records leave them.
    let mut placed: BTreeMap<i32, (Vec<i32>, Vec<Uuid>)> = BTreeMap::new();
    for (_, record) in &records {
        match record {
            MetadataRecord::Topic(t) if t.name == topic => {
                topic_id = Some(t.topic_id);
                placed.clear();
            }
            MetadataRecord::Partition(p) if Some(p.topic_id) == topic_id => {
                placed.insert(p.partition_id, (p.replicas.clone(), p.directories.clone()));
            }
            MetadataRecord::PartitionChange(c) if Some(c.topic_id) == topic_id => {
                let entry = placed.entry(c.partition_id).or_default();
                if let Some(replicas) = &c.replicas {
                    entry.0 = replicas.clone();
                }
                if let Some(directories) = &c.directories {
                    entry.1 = directories.clone();
                }
            }
            _ => {}
        }
    }
    let in_directory = |(replicas, directories): &(Vec<i32>, Vec<Uuid>)| {
        let at = replicas.iter().position(|&r| r == broker_id);
        at.and_then(|at| directories.get(at)) == Some(&directory)
    };
    placed.iter().filter(|(_, state)| in_directory(state)).map(|(&p, _)| p).collect()
}

/// The partitions of `topic` in log directory `dir`.
pub fn partitions_in(dir: &Path, topic: &str) -> Vec<i32> {
    let prefix = format!("{topic}-");
    let mut found: Vec<i32> = std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix)?.parse().ok()).collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found
}
