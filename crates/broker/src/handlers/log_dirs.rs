//! The log directories' admin APIs: DescribeLogDirs (each directory with
//! its replicas, a move's future replica marked as one) and
//! AlterReplicaLogDirs (moving replicas between this broker's
//! directories, KIP-113; the replica manager's `alter_log_dir`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use krabka_protocol::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use krabka_protocol::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use krabka_protocol::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, ErrorCode,
};
use krabka_security::acl::AclOperation;

use crate::authorization::allowed_on_cluster;
use crate::request::RequestContext;

/// (total, usable) bytes of the file system holding `path`.
fn disk_space(path: &Path) -> (i64, i64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return (-1, -1) };
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and stat a valid out-parameter.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return (-1, -1);
    }
    let block = stat.f_frsize as i64;
    (stat.f_blocks as i64 * block, stat.f_bavail as i64 * block)
}

type ReplicasByDir = BTreeMap<PathBuf, BTreeMap<String, Vec<DescribeLogDirsPartition>>>;

pub fn describe_log_dirs(ctx: &RequestContext<'_>, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let broker = ctx.broker;
    if !allowed_on_cluster(ctx, AclOperation::Describe) {
        let error_code = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
        return DescribeLogDirsResponse { error_code, ..Default::default() };
    }
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(topics) => topics.iter().any(|t| t.topic == topic && t.partitions.contains(&partition)),
    };
    let mut by_dir: ReplicasByDir =
        broker.replicas.log_manager().log_dirs().into_iter().map(|d| (d, BTreeMap::new())).collect();
    for partition in broker.replicas.all_partitions() {
        if !wanted(&partition.topic, partition.index) {
            continue;
        }
        let size = partition.lock_log().size_bytes() as i64;
        let replica = |partition_size, offset_lag, is_future_key| DescribeLogDirsPartition {
            partition_index: partition.index,
            partition_size,
            offset_lag,
            is_future_key,
            ..Default::default()
        };
        if let Some(topics) = by_dir.get_mut(&partition.log_dir()) {
            topics.entry(partition.topic.to_string()).or_default().push(replica(size, 0, false));
        }
        // A move's future replica, listed in its directory with how far
        // it is behind (Kafka's tool reads a move's progress from this).
        let Some((dir, size, lag)) = partition.future_state() else { continue };
        if let Some(topics) = by_dir.get_mut(&dir) {
            topics.entry(partition.topic.to_string()).or_default().push(replica(size as i64, lag, true));
        }
    }
    let results = by_dir.into_iter().map(|(dir, topics)| dir_result(ctx, &dir, topics)).collect();
    DescribeLogDirsResponse { results, ..Default::default() }
}

fn dir_result(
    ctx: &RequestContext<'_>,
    dir: &Path,
    topics: BTreeMap<String, Vec<DescribeLogDirsPartition>>,
) -> DescribeLogDirsResult {
    if ctx.broker.replicas.log_dirs.is_offline(dir) {
        // Kafka lists a failed directory with only its error.
        let error_code = ErrorCode::KAFKA_STORAGE_ERROR.code();
        return DescribeLogDirsResult { log_dir: dir.display().to_string(), error_code, ..Default::default() };
    }
    let (total_bytes, usable_bytes) = disk_space(dir);
    DescribeLogDirsResult {
        log_dir: dir.display().to_string(),
        topics: topics
            .into_iter()
            .map(|(name, mut partitions)| {
                partitions.sort_by_key(|p| (p.partition_index, p.is_future_key));
                DescribeLogDirsTopic { name, partitions, ..Default::default() }
            })
            .collect(),
        total_bytes: if ctx.api_version >= 4 { total_bytes } else { -1 },
        usable_bytes: if ctx.api_version >= 4 { usable_bytes } else { -1 },
        ..Default::default()
    }
}

/// AlterReplicaLogDirs: ALTER on the cluster, then each partition's
/// destination (the last one named, as Kafka's map keeps it).
pub fn alter_replica_log_dirs(
    ctx: &RequestContext<'_>,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let mut destinations: BTreeMap<(String, i32), String> = BTreeMap::new();
    for dir in request.dirs {
        for topic in dir.topics {
            for partition in topic.partitions {
                destinations.insert((topic.name.clone(), partition), dir.path.clone());
            }
        }
    }
    let authorized = allowed_on_cluster(ctx, AclOperation::Alter);
    let mut results: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for ((topic, partition_index), path) in destinations {
        let error_code = if authorized {
            ctx.broker.replicas.alter_log_dir(&topic, partition_index, Path::new(&path))
        } else {
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code()
        };
        let result = AlterReplicaLogDirPartitionResult { partition_index, error_code, ..Default::default() };
        results.entry(topic).or_default().push(result);
    }
    let results = results
        .into_iter()
        .map(|(topic_name, partitions)| AlterReplicaLogDirTopicResult { topic_name, partitions, ..Default::default() })
        .collect();
    AlterReplicaLogDirsResponse { results, ..Default::default() }
}
