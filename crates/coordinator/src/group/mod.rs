//! The group coordinator: consumer groups and their committed offsets,
//! stored in `__consumer_offsets` in Kafka's record formats.
//!
//! Groups are spread over the topic's partitions as Kafka spreads them
//! (`javaHashCode(group_id)` without its sign bit, modulo the partitions);
//! each partition is a shard of the runtime with its own lock, so groups on
//! different shards never wait for each other. Every change that must survive a restart is appended to the
//! shard's partition while its lock is held, so the log's order is the
//! state's order; a start replays those partitions (compaction keeps the
//! latest record per key). The host creates the topic on first use,
//! compacted, with `offsets.topic.num.partitions` partitions.

pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod migration;
pub mod records;
pub mod transactional;

use krabka_protocol::ErrorCode;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard, OnceLock};

use bytes::Bytes;
use krabka_metadata::MetadataImage;
use krabka_protocol::{
    ConsumerProtocolSubscription, GroupMetadataValue, JoinGroupResponse, Message, OffsetCommitValue, SyncGroupResponse,
};

use self::classic::{ClassicConfig, ClassicGroup, GroupState, JoinOutcome, JoinRequest, Member};
use self::consumer::{ConsumerConfig, ConsumerGroup, HeartbeatRequest, HeartbeatResponse};
use self::records::CoordinatorRecord;
use crate::runtime::{self, CoordinatorLog, Outcome, Replayed, Shards, Time, Waiter};
use krabka_protocol::group_metadata_value::MemberMetadata;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// What a call uses of its host: the `__consumer_offsets` partitions the
/// shards persist to, the metadata image the assignors read, and the time.
/// Kept this narrow so the coordinator never reaches for the broker.
pub struct GroupHost<'a> {
    pub log: &'a dyn CoordinatorLog,
    pub image: Arc<MetadataImage>,
    pub now: Time,
}

#[derive(Clone, Debug)]
pub struct GroupConfig {
    pub classic: ClassicConfig,
    pub consumer: ConsumerConfig,
    /// `offsets.topic.num.partitions`.
    pub offsets_partitions: usize,
    /// `offsets.retention.minutes` in ms.
    pub offsets_retention_ms: i64,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// The offset of the record that committed it in `__consumer_offsets`:
    /// of a transactional commit and a plain one of the same partition,
    /// the later record wins, whichever transaction ends last (as Kafka).
    pub record_offset: i64,
}

/// A group and its offsets. A group id is either a classic group or, once
/// a KIP-848 member joined it while it had no classic members, a consumer group.
struct GroupEntry {
    group: ClassicGroup,
    consumer: Option<ConsumerGroup>,
    offsets: BTreeMap<(String, i32), CommittedOffset>,
}

impl GroupEntry {
    fn new(group_id: &str, now_ms: i64) -> Self {
        GroupEntry { group: ClassicGroup::new(group_id, now_ms), consumer: None, offsets: BTreeMap::new() }
    }

    fn has_members(&self) -> bool {
        !self.group.is_empty() || self.consumer.as_ref().is_some_and(|c| !c.is_empty())
    }

    fn is_consumer_group(&self) -> bool {
        self.consumer.is_some() && self.group.is_empty()
    }
}

/// The groups of one `__consumer_offsets` partition.
#[derive(Default)]
struct Shard {
    groups: HashMap<String, GroupEntry>,
    /// Offsets committed in transactions not ended yet, by producer id:
    /// they count once its commit marker is written (TxnOffsetCommit).
    pending: HashMap<i64, Vec<(i64, CoordinatorRecord)>>,
}

/// What the cleanup removes of one group: (group id, its expired offsets,
/// whether the group itself goes).
type Expired = (String, Vec<(String, i32)>, bool);

impl Shard {
    /// Answers every parked request of the shard's classic groups
    /// NOT_COORDINATOR (consumer groups park nothing).
    fn unload(&mut self) {
        for entry in self.groups.values_mut() {
            entry.group.unload();
        }
    }

    /// A hash table never gives back what it grew to: after a burst of
    /// short-lived groups (a client naming random group ids), the table of
    /// entries would keep its peak size for the life of the process.
    fn shrink_if_sparse(&mut self) {
        let (len, capacity) = (self.groups.len(), self.groups.capacity());
        if capacity > 64 && len < capacity / 4 {
            self.groups.shrink_to(len * 2);
            debug_assert!(self.groups.capacity() >= len);
        }
    }
}

pub struct GroupCoordinator {
    config: GroupConfig,
    /// One shard per `__consumer_offsets` partition, sized when the groups
    /// are loaded (by the topic's partition count, once the metadata has
    /// caught up, as Kafka sizes its coordinator) or first used.
    shards: OnceLock<Shards<Shard>>,
    /// The count to size by when the topic does not exist:
    /// `offsets.topic.num.partitions`.
    default_partitions: usize,
    /// Set when the node shuts down ([`unload_all`](Self::unload_all)):
    /// no JoinGroup or SyncGroup parks any more.
    closed: AtomicBool,
}

/// One partition of an OffsetCommit: (topic, partition, offset, leader epoch, metadata).
pub type OffsetToCommit = (String, i32, i64, i32, Option<String>);

/// Committed offsets by topic: (topic, [(partition, offset if committed)]).
pub type TopicOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

/// What DescribeGroups reports of one group.
pub struct GroupDescription {
    pub state: String,
    pub protocol_type: String,
    pub protocol_name: String,
    /// (member id, instance id, client id, client host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

/// One record of `__consumer_offsets` replayed into its shard.
fn replay_record(index: usize, shard: &mut Shard, replayed: Replayed, now: Time) {
    let (offset, key, value, producer_id) = match replayed {
        Replayed::Record { offset, key, value, producer_id } => (offset, key, value, producer_id),
        Replayed::Marker { producer_id, commit } => return transactional::complete(shard, producer_id, commit, now),
    };
    match (CoordinatorRecord::decode(key, value), producer_id) {
        (Ok(decoded), None) => apply(shard, decoded, offset, now),
        (Ok(decoded), Some(producer_id)) => shard.pending.entry(producer_id).or_default().push((offset, decoded)),
        (Err(e), _) => tracing::warn!(partition = index, offset, error = %e, "skipping a group record"),
    }
}

impl GroupCoordinator {
    /// `partitions` is `offsets.topic.num.partitions`, the count to size
    /// by when the topic does not exist at load.
    pub fn new(config: GroupConfig, partitions: usize) -> Self {
        GroupCoordinator {
            config,
            shards: OnceLock::new(),
            default_partitions: partitions,
            closed: AtomicBool::new(false),
        }
    }

    fn shards(&self) -> &Shards<Shard> {
        self.shards.get_or_init(|| Shards::new(self.default_partitions))
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn partition_for(&self, group_id: &str) -> usize {
        self.shards().index_of(group_id)
    }

    fn shard(&self, group_id: &str) -> (usize, MutexGuard<'_, Shard>) {
        let index = self.partition_for(group_id);
        (index, self.shards().lock(index))
    }

    /// Replays `__consumer_offsets` into memory (on start), its shards
    /// sized by `partitions`, the topic's partition count when it exists.
    /// Returns the number of records read.
    pub fn load(&self, log: &dyn CoordinatorLog, partitions: Option<usize>, now: Time) -> Result<usize, String> {
        let count = partitions.unwrap_or(self.default_partitions).max(1);
        let shards = self.shards.get_or_init(|| Shards::new(count));
        if shards.len() != count {
            tracing::warn!(
                shards = shards.len(),
                partitions = count,
                "group coordinator sized before the offsets topic was known"
            );
        }
        self.shards().load(log, |index, shard, replayed| replay_record(index, shard, replayed, now))
    }

    /// Whether this node coordinates the groups of partition `index` (it
    /// leads it); a partition it has come to lead since it was loaded is
    /// replayed first, so groups move with leadership and keep every
    /// committed offset. A partition that cannot be read is not
    /// coordinated here.
    pub fn follow_leadership(&self, host: &GroupHost<'_>, index: usize) -> bool {
        let now = host.now;
        let replay = |index, shard: &mut Shard, replayed| replay_record(index, shard, replayed, now);
        match self.shards().load_if_led_anew(index, host.log, replay) {
            Ok(true) => true,
            Ok(false) => {
                self.shards().unload_if_not_led(index, host.log, Shard::unload);
                false
            }
            Err(error) => {
                tracing::error!(partition = index, %error, "could not load a coordinator partition");
                false
            }
        }
    }

    /// The node shuts down (Kafka closes its coordinator runtime, unloading
    /// every partition): every parked JoinGroup and SyncGroup is answered
    /// NOT_COORDINATOR now, and none parks from here on, so that no
    /// connection holds the shutdown up waiting for a rebalance.
    pub fn unload_all(&self) {
        self.closed.store(true, Ordering::Release);
        for index in 0..self.shards().len() {
            self.shards().lock(index).unload();
        }
    }

    /// Whether the node is shutting down; read under a shard's lock, so
    /// that [`unload_all`](Self::unload_all) answers whatever parked before.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Appends records to the shard's partition (the caller holds the shard lock).
    /// The offset of the first record when it succeeds.
    fn persist(&self, host: &GroupHost<'_>, shard: usize, records: &[CoordinatorRecord]) -> Result<i64, i16> {
        let encoded: Vec<runtime::KeyValue> = records.iter().map(CoordinatorRecord::encode).collect();
        runtime::persist(host.log, shard, &encoded, host.now.wall_ms)
    }

    fn group_record(group: &ClassicGroup) -> CoordinatorRecord {
        let protocol = group.protocol_name.clone().unwrap_or_default();
        let members = group
            .members
            .values()
            .map(|m| MemberMetadata {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout: m.rebalance_timeout_ms,
                session_timeout: m.session_timeout_ms,
                subscription: m.metadata_for(&protocol),
                assignment: m.assignment.clone(),
                ..Default::default()
            })
            .collect();
        CoordinatorRecord::Group {
            group: group.group_id.clone(),
            value: Some(GroupMetadataValue {
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                generation: group.generation_id,
                protocol: group.protocol_name.clone(),
                leader: group.leader_id.clone(),
                current_state_timestamp: group.state_timestamp_ms,
                members,
                ..Default::default()
            }),
        }
    }

    /// Persists a group whose generation or state moved (Stable with its
    /// assignment, or Empty).
    fn persist_group(&self, host: &GroupHost<'_>, shard: usize, group: &ClassicGroup) {
        if matches!(group.state, GroupState::Stable | GroupState::Empty) {
            if let Err(code) = self.persist(host, shard, &[Self::group_record(group)]) {
                tracing::error!(group = %group.group_id, code, "could not persist group state");
            }
        }
    }

    /// JoinGroup; a parked join is answered through `waiter`.
    pub fn join(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        request: JoinRequest,
        waiter: Waiter<JoinGroupResponse>,
    ) -> JoinOutcome {
        let (index, mut shard) = self.shard(group_id);
        if self.is_closed() {
            return JoinOutcome::Now(classic::error_join(&request.member_id, ErrorCode::NOT_COORDINATOR.code()));
        }
        let now_ms = host.now.wall_ms;
        let entry = shard.groups.entry(group_id.to_string()).or_insert_with(|| GroupEntry::new(group_id, now_ms));
        if let Some(consumer) = entry.consumer.as_mut().filter(|c| !c.is_empty()) {
            // A classic member of a group that moved to the consumer protocol.
            let fail = |code: i16, member_id: String| {
                JoinOutcome::Now(JoinGroupResponse {
                    error_code: code,
                    generation_id: -1,
                    member_id,
                    ..Default::default()
                })
            };
            if request.protocol_type != migration::CONSUMER_PROTOCOL_TYPE {
                return fail(ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code(), request.member_id);
            }
            let member_id = if request.member_id.is_empty() {
                let id = classic::new_member_id(&request.client_id, request.group_instance_id.as_deref());
                if request.require_known_member_id {
                    return fail(ErrorCode::MEMBER_ID_REQUIRED.code(), id);
                }
                id
            } else {
                request.member_id.clone()
            };
            return match consumer.classic_join(&request, &member_id, &host.image, &self.config.consumer, host.now) {
                Ok((generation_id, protocol)) => JoinOutcome::Now(JoinGroupResponse {
                    generation_id,
                    protocol_type: Some(migration::CONSUMER_PROTOCOL_TYPE.into()),
                    protocol_name: Some(protocol),
                    // Nobody leads: the broker assigns, the member follows.
                    leader: String::new(),
                    member_id,
                    ..Default::default()
                }),
                Err(code) => fail(code, member_id),
            };
        }
        entry.consumer = None;
        let generation = entry.group.generation_id;
        let outcome = entry.group.join(request, waiter, &self.config.classic, host.now);
        if entry.group.generation_id != generation {
            self.persist_group(host, index, &entry.group);
        }
        outcome
    }

    pub fn sync(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        assignments: Vec<(String, Bytes)>,
        waiter: Waiter<SyncGroupResponse>,
    ) -> Outcome<SyncGroupResponse> {
        let (index, mut shard) = self.shard(group_id);
        if self.is_closed() {
            return Outcome::Now(SyncGroupResponse {
                error_code: ErrorCode::NOT_COORDINATOR.code(),
                ..Default::default()
            });
        }
        let Some(entry) = shard.groups.get_mut(group_id) else {
            return Outcome::Now(SyncGroupResponse {
                error_code: ErrorCode::UNKNOWN_MEMBER_ID.code(),
                ..Default::default()
            });
        };
        if let Some(consumer) = entry.consumer.as_mut().filter(|c| c.has_member(member_id)) {
            let protocol = consumer.members[member_id]
                .classic
                .as_ref()
                .and_then(|c| c.protocols.first().map(|(name, _)| name.clone()));
            return Outcome::Now(match consumer.classic_sync(member_id, generation_id, &host.image) {
                Ok(assignment) => SyncGroupResponse {
                    protocol_type: Some(migration::CONSUMER_PROTOCOL_TYPE.into()),
                    protocol_name: protocol,
                    assignment,
                    ..Default::default()
                },
                Err(code) => SyncGroupResponse { error_code: code, ..Default::default() },
            });
        }
        let (result, stabilised) = entry.group.sync(member_id, generation_id, assignments, waiter, host.now.wall_ms);
        if stabilised {
            self.persist_group(host, index, &entry.group);
        }
        result
    }

    pub fn heartbeat(&self, group_id: &str, member_id: &str, generation_id: i32, now: Time) -> i16 {
        let (_, mut shard) = self.shard(group_id);
        match shard.groups.get_mut(group_id) {
            Some(entry) => match entry.consumer.as_mut().filter(|c| c.has_member(member_id)) {
                Some(consumer) => consumer.classic_heartbeat(member_id, generation_id, now),
                None => entry.group.heartbeat(member_id, generation_id, now),
            },
            None => ErrorCode::UNKNOWN_MEMBER_ID.code(),
        }
    }

    /// LeaveGroup: one code per (member id, instance id).
    pub fn leave(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<i16>, i16> {
        let (index, mut shard) = self.shard(group_id);
        let Some(entry) = shard.groups.get_mut(group_id) else { return Err(ErrorCode::UNKNOWN_MEMBER_ID.code()) };
        if let Some(consumer) = entry.consumer.as_mut().filter(|c| !c.is_empty()) {
            let now_ms = host.now.wall_ms;
            return Ok(members.iter().map(|(member, _)| consumer.classic_leave(member, now_ms)).collect());
        }
        let generation = (entry.group.generation_id, entry.group.state);
        let codes = members
            .iter()
            .map(|(member, instance)| entry.group.leave(member, instance.as_deref(), &self.config.classic, host.now))
            .collect();
        if generation != (entry.group.generation_id, entry.group.state) {
            self.persist_group(host, index, &entry.group);
        }
        Ok(codes)
    }

    /// Clock work for every group: sessions, rebalance deadlines.
    pub fn tick(&self, host: &GroupHost<'_>) {
        for index in 0..self.shards().len() {
            if !self.follow_leadership(host, index) {
                continue;
            }
            let mut shard = self.shards().lock(index);
            for entry in shard.groups.values_mut() {
                if entry.group.tick(&self.config.classic, host.now) {
                    self.persist_group(host, index, &entry.group);
                }
                if let Some(consumer) = entry.consumer.as_mut() {
                    consumer.tick(&self.config.consumer, host.now);
                }
            }
        }
    }

    /// Removes offsets `offsets.retention.minutes` after their group became
    /// empty (KIP-211), and groups with nothing left.
    pub fn expire_offsets(&self, host: &GroupHost<'_>) {
        for index in 0..self.shards().len() {
            if !self.follow_leadership(host, index) {
                continue;
            }
            let mut shard = self.shards().lock(index);
            let expired = self.expired_offsets(&shard, host.now.wall_ms);
            if expired.is_empty() {
                continue;
            }
            let mut records = Vec::new();
            for (group_id, offsets, group_goes) in &expired {
                for (topic, partition) in offsets {
                    records.push(CoordinatorRecord::offset(group_id, topic, *partition, None));
                }
                if *group_goes {
                    records.push(CoordinatorRecord::Group { group: group_id.clone(), value: None });
                }
            }
            // Persist, then apply: a failed write leaves the state as it was.
            if let Err(code) = self.persist(host, index, &records) {
                tracing::error!(partition = index, code, "could not expire offsets");
                continue;
            }
            for (group_id, offsets, group_goes) in expired {
                if group_goes {
                    shard.groups.remove(&group_id);
                } else if let Some(entry) = shard.groups.get_mut(&group_id) {
                    offsets.iter().for_each(|key| drop(entry.offsets.remove(key)));
                }
            }
            shard.shrink_if_sparse();
            tracing::info!(partition = index, records = records.len(), "expired committed offsets");
        }
    }

    /// What `expire_offsets` removes from one shard at `now_ms`: per empty
    /// group, its expired offsets and whether the group goes with them.
    fn expired_offsets(&self, shard: &Shard, now_ms: i64) -> Vec<Expired> {
        let retention = self.config.offsets_retention_ms;
        let mut expired = Vec::new();
        for (group_id, entry) in &shard.groups {
            let empty_since = match &entry.consumer {
                Some(consumer) if entry.group.is_empty() => consumer.state_timestamp_ms,
                _ => entry.group.state_timestamp_ms,
            };
            if entry.has_members() || entry.group.state != GroupState::Empty {
                continue;
            }
            // Offsets expire `offsets.retention.minutes` after the group
            // emptied (KIP-211); an empty group with no offsets left goes
            // at once, as Kafka's cleanup removes it (a client naming
            // random group ids would otherwise grow the broker for days).
            let expiring = now_ms - empty_since >= retention;
            let offsets: Vec<(String, i32)> = entry
                .offsets
                .iter()
                .filter(|(_, o)| expiring && now_ms - o.commit_timestamp_ms >= retention)
                .map(|(k, _)| k.clone())
                .collect();
            let group_goes = offsets.len() == entry.offsets.len();
            if group_goes || !offsets.is_empty() {
                expired.push((group_id.clone(), offsets, group_goes));
            }
        }
        expired
    }

    /// ConsumerGroupHeartbeat (KIP-848).
    pub fn consumer_heartbeat(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        request: HeartbeatRequest,
    ) -> HeartbeatResponse {
        let (index, mut shard) = self.shard(group_id);
        let now_ms = host.now.wall_ms;
        let entry = shard.groups.entry(group_id.to_string()).or_insert_with(|| GroupEntry::new(group_id, now_ms));
        let upgradable = entry.group.protocol_type.as_deref() == Some(migration::CONSUMER_PROTOCOL_TYPE);
        if !entry.group.is_empty() && upgradable && request.member_epoch == 0 {
            if entry.group.state != GroupState::Stable {
                // Convert only a settled group; the member retries.
                return HeartbeatResponse {
                    error_code: ErrorCode::COORDINATOR_NOT_AVAILABLE.code(),
                    error_message: Some(format!("Group {group_id} is rebalancing; retry.")),
                    member_id: request.member_id,
                    member_epoch: -1,
                    assignment: None,
                };
            }
            tracing::info!(group = %group_id, members = entry.group.members.len(), "upgrading a classic group to the consumer protocol");
            entry.consumer = Some(ConsumerGroup::from_classic(&entry.group, &host.image, host.now));
            let generation = entry.group.generation_id;
            entry.group = ClassicGroup::new(group_id, now_ms);
            entry.group.generation_id = generation;
            self.persist_group(host, index, &entry.group);
        }
        if !entry.group.is_empty() {
            return HeartbeatResponse {
                error_code: ErrorCode::GROUP_ID_NOT_FOUND.code(),
                error_message: Some(format!("Group {group_id} is not a consumer group.")),
                member_id: request.member_id,
                member_epoch: -1,
                assignment: None,
            };
        }
        let consumer = entry.consumer.get_or_insert_with(|| ConsumerGroup::new(group_id, now_ms));
        consumer.heartbeat(request, &host.image, &self.config.consumer, host.now)
    }

    /// Runs `describe` on a consumer group (KIP-848); Err when the group is
    /// missing or classic.
    pub fn with_consumer_group<T>(
        &self,
        group_id: &str,
        describe: impl FnOnce(&ConsumerGroup) -> T,
    ) -> Result<T, (i16, String)> {
        let (_, shard) = self.shard(group_id);
        match shard.groups.get(group_id) {
            Some(entry) if entry.is_consumer_group() => Ok(describe(entry.consumer.as_ref().expect("consumer group"))),
            Some(_) => {
                Err((ErrorCode::GROUP_ID_NOT_FOUND.code(), format!("Group {group_id} is not a consumer group.")))
            }
            None => Err((ErrorCode::GROUP_ID_NOT_FOUND.code(), format!("Group {group_id} not found."))),
        }
    }

    /// OffsetCommit: one code per partition, in request order.
    pub fn commit_offsets(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        offsets: &[OffsetToCommit],
    ) -> Vec<i16> {
        let (index, mut shard) = self.shard(group_id);
        let now_ms = host.now.wall_ms;
        let entry = shard.groups.entry(group_id.to_string()).or_insert_with(|| GroupEntry::new(group_id, now_ms));
        if let Some(code) = commit_error(entry, member_id, group_instance_id, generation_id, false) {
            return vec![code; offsets.len()];
        }
        let (mut results, records) = self.offset_records(host, group_id, offsets);
        let first_offset = match self.persist(host, index, &records) {
            Ok(first_offset) => first_offset,
            Err(code) => {
                fail_accepted(&mut results, code);
                return results;
            }
        };
        for (record_offset, record) in (first_offset..).zip(records) {
            apply(&mut shard, record, record_offset, host.now);
        }
        results
    }

    /// The records committing `offsets` (those that may be), and each
    /// offset's answer.
    fn offset_records(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        offsets: &[OffsetToCommit],
    ) -> (Vec<i16>, Vec<CoordinatorRecord>) {
        let (image, now_ms) = (&host.image, host.now.wall_ms);
        let mut results = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        for (topic, partition, offset, leader_epoch, metadata) in offsets {
            let exists =
                image.topic(topic).is_some_and(|t| *partition >= 0 && (*partition as usize) < t.partitions.len());
            let metadata = metadata.clone().unwrap_or_default();
            let code = if !exists {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
            } else if metadata.len() > self.config.offset_metadata_max_bytes {
                ErrorCode::OFFSET_METADATA_TOO_LARGE.code()
            } else {
                let value = OffsetCommitValue {
                    offset: *offset,
                    leader_epoch: *leader_epoch,
                    metadata,
                    commit_timestamp: now_ms,
                    expire_timestamp: -1,
                    ..Default::default()
                };
                records.push(CoordinatorRecord::offset(group_id, topic, *partition, Some(value)));
                ErrorCode::NONE.code()
            };
            results.push(code);
        }
        (results, records)
    }

    /// OffsetFetch: the committed offsets of `topics` (None: all of them).
    pub fn fetch_offsets(&self, group_id: &str, topics: Option<&[(String, Vec<i32>)]>) -> TopicOffsets {
        let (_, shard) = self.shard(group_id);
        let offsets = shard.groups.get(group_id).map(|e| &e.offsets);
        match topics {
            Some(topics) => topics
                .iter()
                .map(|(topic, partitions)| {
                    let found = partitions
                        .iter()
                        .map(|p| (*p, offsets.and_then(|o| o.get(&(topic.clone(), *p))).cloned()))
                        .collect();
                    (topic.clone(), found)
                })
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<(i32, Option<CommittedOffset>)>> = BTreeMap::new();
                for ((topic, partition), committed) in offsets.into_iter().flatten() {
                    by_topic.entry(topic.clone()).or_default().push((*partition, Some(committed.clone())));
                }
                by_topic.into_iter().collect()
            }
        }
    }

    /// (group id, protocol type, state name, group type) of every group.
    pub fn list_groups(&self) -> Vec<(String, String, String, &'static str)> {
        let mut out = Vec::new();
        for index in 0..self.shards().len() {
            let shard = self.shards().lock(index);
            for (id, entry) in &shard.groups {
                match &entry.consumer {
                    Some(consumer) if entry.is_consumer_group() => {
                        out.push((id.clone(), "consumer".to_string(), consumer.state_name().to_string(), "consumer"))
                    }
                    _ => out.push((
                        id.clone(),
                        entry.group.protocol_type.clone().unwrap_or_default(),
                        entry.group.state.name().to_string(),
                        "classic",
                    )),
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub fn describe_group(&self, group_id: &str) -> Option<GroupDescription> {
        let (_, shard) = self.shard(group_id);
        let entry = shard.groups.get(group_id)?;
        if let Some(consumer) = entry.consumer.as_ref().filter(|_| entry.is_consumer_group()) {
            return Some(GroupDescription {
                state: consumer.state_name().into(),
                protocol_type: "consumer".into(),
                protocol_name: String::new(),
                members: consumer
                    .members
                    .values()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.instance_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            Bytes::new(),
                            Bytes::new(),
                        )
                    })
                    .collect(),
            });
        }
        let group = &entry.group;
        let protocol = group.protocol_name.clone().unwrap_or_default();
        let stable = group.state == GroupState::Stable;
        let mut members: Vec<_> = group
            .members
            .values()
            .map(|m| {
                (
                    m.member_id.clone(),
                    m.group_instance_id.clone(),
                    m.client_id.clone(),
                    m.client_host.clone(),
                    m.metadata_for(&protocol),
                    if stable { m.assignment.clone() } else { Bytes::new() },
                )
            })
            .collect();
        members.sort_by(|a, b| a.0.cmp(&b.0));
        Some(GroupDescription {
            state: group.state.name().into(),
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            // Kafka reports the protocol only once the group is Stable.
            protocol_name: if stable { protocol } else { String::new() },
            members,
        })
    }

    /// DeleteGroups: only empty groups; their offsets go with them.
    pub fn delete_group(&self, host: &GroupHost<'_>, group_id: &str) -> i16 {
        let (index, mut shard) = self.shard(group_id);
        let Some(entry) = shard.groups.get(group_id) else { return ErrorCode::GROUP_ID_NOT_FOUND.code() };
        if entry.has_members() {
            return ErrorCode::NON_EMPTY_GROUP.code();
        }
        let mut records: Vec<CoordinatorRecord> = entry
            .offsets
            .keys()
            .map(|(topic, partition)| CoordinatorRecord::offset(group_id, topic, *partition, None))
            .collect();
        records.push(CoordinatorRecord::Group { group: group_id.to_string(), value: None });
        if let Err(code) = self.persist(host, index, &records) {
            return code;
        }
        shard.groups.remove(group_id);
        ErrorCode::NONE.code()
    }

    /// OffsetDelete: the group-level code, and one code per partition.
    pub fn delete_offsets(
        &self,
        host: &GroupHost<'_>,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
    ) -> (i16, Vec<Vec<i16>>) {
        let (index, mut shard) = self.shard(group_id);
        let Some(entry) = shard.groups.get_mut(group_id) else {
            return (ErrorCode::GROUP_ID_NOT_FOUND.code(), Vec::new());
        };
        let mut subscribed = subscribed_topics(&entry.group);
        if let Some(consumer) = &entry.consumer {
            subscribed.extend(consumer.subscribed_topic_names());
        }
        if !entry.group.is_empty() && entry.group.protocol_type.as_deref() != Some("consumer") {
            return (ErrorCode::NON_EMPTY_GROUP.code(), Vec::new());
        }
        let mut records = Vec::new();
        let mut results = Vec::new();
        for (topic, partitions) in topics {
            let busy = entry.has_members() && subscribed.iter().any(|t| t == topic);
            results.push(
                partitions
                    .iter()
                    .map(|p| {
                        if busy {
                            return ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC.code();
                        }
                        if entry.offsets.remove(&(topic.clone(), *p)).is_some() {
                            records.push(CoordinatorRecord::offset(group_id, topic, *p, None));
                        }
                        ErrorCode::NONE.code()
                    })
                    .collect(),
            );
        }
        if let Err(code) = self.persist(host, index, &records) {
            return (code, Vec::new());
        }
        (ErrorCode::NONE.code(), results)
    }
}

/// Topics a consumer-protocol group's members subscribe to.
fn subscribed_topics(group: &ClassicGroup) -> Vec<String> {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let mut topics = Vec::new();
    for member in group.members.values() {
        let mut metadata = member.metadata_for(&protocol);
        if metadata.len() < 2 {
            continue;
        }
        let version = i16::from_be_bytes([metadata[0], metadata[1]]);
        let _ = bytes::Buf::get_i16(&mut metadata);
        if let Ok(subscription) = ConsumerProtocolSubscription::decode(&mut metadata, version.clamp(0, 3)) {
            topics.extend(subscription.topics);
        }
    }
    topics.sort();
    topics.dedup();
    topics
}

/// Applies one loaded record to a shard.
/// Whether an offset commit from `member_id` at `generation_id` may go to
/// the group of `entry`: the error that refuses it (Kafka's checks; a
/// transactional commit is taken while a classic group completes a rebalance).
fn commit_error(
    entry: &GroupEntry,
    member_id: &str,
    group_instance_id: Option<&str>,
    generation_id: i32,
    transactional: bool,
) -> Option<i16> {
    let group = &entry.group;
    if let Some(consumer) = entry.consumer.as_ref().filter(|c| !c.is_empty()) {
        return consumer.validate_commit(member_id, generation_id).err();
    }
    if group.state == GroupState::Dead {
        Some(ErrorCode::COORDINATOR_NOT_AVAILABLE.code())
    } else if generation_id < 0 && member_id.is_empty() && group.is_empty() {
        None // a commit from outside the group (admin tools, assign() consumers)
    } else if !group.members.contains_key(member_id) {
        Some(ErrorCode::UNKNOWN_MEMBER_ID.code())
    } else if group_instance_id.is_some()
        && group.members.get(member_id).and_then(|m| m.group_instance_id.as_deref()) != group_instance_id
    {
        Some(ErrorCode::FENCED_INSTANCE_ID.code())
    } else if generation_id != group.generation_id {
        Some(ErrorCode::ILLEGAL_GENERATION.code())
    } else if group.state == GroupState::CompletingRebalance && !transactional {
        Some(ErrorCode::REBALANCE_IN_PROGRESS.code())
    } else {
        None
    }
}

/// The answers of offsets that could be committed, when their records
/// could not be written: `code`.
fn fail_accepted(results: &mut [i16], code: i16) {
    for result in results.iter_mut().filter(|c| **c == ErrorCode::NONE.code()) {
        *result = code;
    }
}

fn apply(shard: &mut Shard, record: CoordinatorRecord, record_offset: i64, now: Time) {
    match record {
        CoordinatorRecord::Offset { key, value } => {
            let entry =
                shard.groups.entry(key.group.clone()).or_insert_with(|| GroupEntry::new(&key.group, now.wall_ms));
            match value {
                Some(value) => {
                    entry.offsets.insert(
                        (key.topic, key.partition),
                        CommittedOffset {
                            offset: value.offset,
                            leader_epoch: value.leader_epoch,
                            metadata: value.metadata,
                            commit_timestamp_ms: value.commit_timestamp,
                            record_offset,
                        },
                    );
                }
                None => {
                    entry.offsets.remove(&(key.topic, key.partition));
                }
            }
        }
        CoordinatorRecord::Group { group, value: None } => {
            shard.groups.remove(&group);
        }
        CoordinatorRecord::Group { group, value: Some(value) } => {
            let entry = shard
                .groups
                .entry(group.clone())
                .or_insert_with(|| GroupEntry::new(&group, value.current_state_timestamp));
            let mut restored = ClassicGroup::new(&group, value.current_state_timestamp);
            restored.generation_id = value.generation;
            restored.protocol_type = (!value.protocol_type.is_empty()).then_some(value.protocol_type.clone());
            restored.protocol_name = value.protocol.clone();
            restored.leader_id = value.leader.clone();
            let protocol = value.protocol.clone().unwrap_or_default();
            restored.restore(
                value
                    .members
                    .into_iter()
                    .map(|m| Member {
                        member_id: m.member_id,
                        group_instance_id: m.group_instance_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        session_timeout_ms: m.session_timeout,
                        rebalance_timeout_ms: m.rebalance_timeout,
                        protocol_type: value.protocol_type.clone(),
                        protocols: vec![(protocol.clone(), m.subscription)],
                        assignment: m.assignment,
                        last_heartbeat: now.mono_ms,
                        join_waiter: None,
                        sync_waiter: None,
                    })
                    .collect(),
            );
            entry.group = restored;
        }
        CoordinatorRecord::Other => {}
    }
}

#[cfg(test)]
mod tests;
