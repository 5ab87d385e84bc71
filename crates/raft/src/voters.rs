//! Who votes (KIP-853): the voter set and `kraft.version`, as the log's own
//! control records say them, and the history of both by offset (Kafka's
//! `KRaftControlRecordStateMachine` with its `VoterSetHistory`).
//!
//! At `kraft.version` 0 the voters are static: `controller.quorum.voters`,
//! known by id alone. At 1 they are what the latest KRaftVoters record in
//! the log (or in the snapshot it starts after, `kafka-storage format
//! --standalone`'s bootstrap snapshot included) says, committed or not:
//! each voter with its directory id, its listeners and the `kraft.version`
//! range it supports. A leader changes them one voter at a time
//! (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter), never with a change
//! uncommitted, so any two consecutive voter sets share a majority.
//!
//! The history is kept by offset because a follower's uncommitted tail can
//! be truncated away: the voter set goes back with it.

use std::collections::BTreeMap;

use bytes::Bytes;
use krabka_protocol::generated::voters_record::{Endpoint, KRaftVersionFeature, Voter};
use krabka_protocol::records::{control_batch_of, control_type_id, ControlType, RecordBatchMut, RecordBatches};
use krabka_protocol::{KRaftVersionRecord, Message as _, Uuid, VotersRecord};

/// The highest `kraft.version` this implementation supports (KIP-853's).
pub const KRAFT_VERSION_MAX: i16 = 1;

/// How much of a snapshot's start is read for its control records (the
/// voter set is in its first batch).
pub(crate) const SNAPSHOT_HEAD_BYTES: u32 = 1 << 20;

/// The voter change a leader works on (`membership`'s; the node holds it).
#[derive(Clone, Debug)]
pub(crate) struct PendingChange {
    pub(crate) request: u64,
    /// The voter being added, while the leader waits for its probe.
    pub(crate) adding: Option<VoterNode>,
    pub(crate) deadline: i64,
    /// The offset of the KRaftVoters record appended for it.
    pub(crate) offset: Option<i64>,
    /// AddRaftVoter v1's `AckWhenCommitted` false: answered once the
    /// record is appended (the next change still waits for it to commit).
    pub(crate) ack_on_append: bool,
}

/// A leader's upgrade of `kraft.version` (Kafka's `KRaftVersionUpgrade`;
/// the node holds it, `kraft_upgrade` drives it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum KraftUpgrade {
    /// Nothing to collect: not leading, or `kraft.version` is already 1.
    #[default]
    Empty,
    /// Leading at 0: the static voters as UpdateRaftVoter filled them in.
    Voters(VoterSet),
    /// The upgrade to this version is appended.
    Version(i16),
}

/// One listener a voter can be reached on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A replica as a leader tells replicas apart (Kafka's `ReplicaKey`): its
/// id and its metadata log directory's id, zero when it has none (a static
/// voter, or a fetch that names none: Fetch before v17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaKey {
    pub id: i32,
    pub directory_id: Uuid,
}

/// A voter as KRaftVoters records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterNode {
    pub id: i32,
    /// The id of its metadata log directory (zero for a static voter).
    pub directory_id: Uuid,
    pub listeners: Vec<Listener>,
    /// The `kraft.version` range it supports, (min, max).
    pub kraft_versions: (i16, i16),
}

impl VoterNode {
    pub fn key(&self) -> ReplicaKey {
        ReplicaKey { id: self.id, directory_id: self.directory_id }
    }

    /// Its address on listener `name`.
    pub fn listener(&self, name: &str) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.name == name)
    }
}

/// The voters of a quorum, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VoterSet {
    voters: BTreeMap<i32, VoterNode>,
}

impl VoterSet {
    pub fn new(voters: impl IntoIterator<Item = VoterNode>) -> Self {
        VoterSet { voters: voters.into_iter().map(|v| (v.id, v)).collect() }
    }

    /// Static voters (`controller.quorum.voters`): ids only.
    pub fn from_ids(ids: &[i32]) -> Self {
        VoterSet::new(ids.iter().map(|&id| VoterNode {
            id,
            directory_id: Uuid::ZERO,
            listeners: Vec::new(),
            kraft_versions: (0, 0),
        }))
    }

    pub fn ids(&self) -> Vec<i32> {
        self.voters.keys().copied().collect()
    }

    pub fn contains(&self, id: i32) -> bool {
        self.voters.contains_key(&id)
    }

    pub fn get(&self, id: i32) -> Option<&VoterNode> {
        self.voters.get(&id)
    }

    /// The key of the voter replica `key` is, None when it is an observer
    /// (Kafka's `ReplicaState.matchesKey`): a voter without a directory id
    /// (a static one) is whichever replica has its id; one with a directory
    /// id only the replica that names that directory, so a replica naming
    /// none, or another (a replaced disk), is not that voter.
    pub fn voter_key(&self, key: ReplicaKey) -> Option<ReplicaKey> {
        let voter = self.voters.get(&key.id)?;
        (voter.directory_id == Uuid::ZERO || voter.directory_id == key.directory_id).then(|| voter.key())
    }

    pub fn nodes(&self) -> impl Iterator<Item = &VoterNode> {
        self.voters.values()
    }

    pub fn len(&self) -> usize {
        self.voters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.voters.is_empty()
    }

    /// The set with `node` added; None when its id already votes.
    pub fn add(&self, node: VoterNode) -> Option<VoterSet> {
        let mut next = self.clone();
        next.voters.insert(node.id, node).is_none().then_some(next)
    }

    /// The set without voter (`id`, `directory_id`); None when no voter
    /// has that key, or when no voter would be left (Kafka refuses both).
    pub fn remove(&self, id: i32, directory_id: Uuid) -> Option<VoterSet> {
        let mut next = self.clone();
        next.voters.remove(&id).filter(|v| v.directory_id == directory_id)?;
        (!next.voters.is_empty()).then_some(next)
    }

    /// The set with voter `node`'s listeners and version range replaced;
    /// None when no voter has its id and directory id.
    pub fn update(&self, node: VoterNode) -> Option<VoterSet> {
        let mut next = self.clone();
        let slot = next.voters.get_mut(&node.id).filter(|v| v.directory_id == node.directory_id)?;
        *slot = node;
        Some(next)
    }

    /// The set with voter `node.id` replaced by `node`, whatever directory
    /// id it had (a static voter has none; Kafka's
    /// `updateVoterIgnoringDirectoryId`); None when the id does not vote.
    pub fn replace_by_id(&self, node: VoterNode) -> Option<VoterSet> {
        let mut next = self.clone();
        let id = node.id;
        *next.voters.get_mut(&id)? = node;
        Some(next)
    }

    /// Whether `node` votes here with other listeners or another version
    /// range than it has now (Kafka's `voterNodeNeedsUpdate`).
    pub fn needs_update(&self, node: &VoterNode) -> bool {
        self.voters.get(&node.id).is_some_and(|v| v.directory_id == node.directory_id && v != node)
    }

    /// The VotersRecord (version 0) of this set.
    pub fn to_record(&self) -> Bytes {
        let record =
            VotersRecord { version: 0, voters: self.voters.values().map(voter_record).collect(), ..Default::default() };
        record.to_bytes(0).expect("a VotersRecord encodes at version 0")
    }

    /// The set a VotersRecord holds; None when it does not decode.
    pub fn from_record(mut value: Bytes) -> Option<VoterSet> {
        let record = VotersRecord::decode(&mut value, 0).ok()?;
        Some(VoterSet::new(record.voters.into_iter().map(|v| VoterNode {
            id: v.voter_id,
            directory_id: v.voter_directory_id,
            listeners: v.endpoints.into_iter().map(|e| Listener { name: e.name, host: e.host, port: e.port }).collect(),
            kraft_versions: (
                v.k_raft_version_feature.min_supported_version,
                v.k_raft_version_feature.max_supported_version,
            ),
        })))
    }
}

fn voter_record(node: &VoterNode) -> Voter {
    Voter {
        voter_id: node.id,
        voter_directory_id: node.directory_id,
        endpoints: node
            .listeners
            .iter()
            .map(|l| Endpoint { name: l.name.clone(), host: l.host.clone(), port: l.port, ..Default::default() })
            .collect(),
        k_raft_version_feature: KRaftVersionFeature {
            min_supported_version: node.kraft_versions.0,
            max_supported_version: node.kraft_versions.1,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The KRaftVersionRecord (version 0) for `kraft_version`.
pub fn kraft_version_record(kraft_version: i16) -> Bytes {
    let record = KRaftVersionRecord { version: 0, k_raft_version: kraft_version, ..Default::default() };
    record.to_bytes(0).expect("a KRaftVersionRecord encodes at version 0")
}

/// `snapshot` (a snapshot as its writer encoded it: a first control batch
/// holding only its SnapshotHeader, then the rest) with KRaftVersion and,
/// when there is one, KRaftVoters added to that first batch, as Kafka's
/// snapshot writer puts them there at `kraft.version` 1; the batches after
/// it move up by the records added. None when there is nothing to add
/// (`kraft.version` 0) or the snapshot does not start that way.
pub(crate) fn with_kraft_control(snapshot: &[u8], kraft_version: i16, voters: Option<&VoterSet>) -> Option<Vec<u8>> {
    if kraft_version < 1 {
        return None;
    }
    let bytes = Bytes::copy_from_slice(snapshot);
    let first = RecordBatches::new(bytes.clone()).next()?.ok()?;
    let mut records = first.records(usize::MAX).ok()?;
    let header = records.next()?.ok()?;
    let is_header = header.key.as_deref().and_then(control_type_id) == Some(ControlType::SnapshotHeader.id());
    if !first.is_control() || !is_header || records.next().is_some() {
        return None;
    }
    let header_value = header.value.unwrap_or_default();
    let version = kraft_version_record(kraft_version);
    let voters = voters.map(VoterSet::to_record);
    let mut control = vec![(ControlType::SnapshotHeader, &header_value[..]), (ControlType::KRaftVersion, &version[..])];
    if let Some(voters) = &voters {
        control.push((ControlType::KRaftVoters, &voters[..]));
    }
    let added = control.len() as i64 - 1;
    let rebuilt = control_batch_of(first.base_offset(), &control, header.timestamp).ok()?;
    let mut out = rebuilt.to_vec();
    let mut rest = bytes.slice(first.as_bytes().len()..).to_vec();
    let mut at = 0;
    while at + 12 <= rest.len() {
        let length = i32::from_be_bytes(rest[at + 8..at + 12].try_into().ok()?) as usize + 12;
        let batch = rest.get_mut(at..at + length)?;
        let base = i64::from_be_bytes(batch[..8].try_into().ok()?);
        RecordBatchMut::new(batch).ok()?.set_base_offset(base + added);
        at += length;
    }
    out.extend_from_slice(&rest);
    Some(out)
}

/// `kraft.version` and the voter sets of a log, by the offset of the
/// record that set them (a snapshot's count at its end offset minus one).
#[derive(Clone, Debug)]
pub(crate) struct VoterHistory {
    static_voters: VoterSet,
    kraft_versions: Vec<(i64, i16)>,
    voter_sets: Vec<(i64, VoterSet)>,
}

impl VoterHistory {
    pub(crate) fn new(static_voters: VoterSet) -> Self {
        VoterHistory { static_voters, kraft_versions: Vec::new(), voter_sets: Vec::new() }
    }

    /// The latest `kraft.version` (0 until a record says otherwise).
    pub(crate) fn kraft_version(&self) -> i16 {
        self.kraft_versions.last().map_or(0, |(_, v)| *v)
    }

    /// The latest voter set, committed or not: the static one until the
    /// log holds a KRaftVoters record.
    pub(crate) fn latest(&self) -> &VoterSet {
        self.voter_sets.last().map_or(&self.static_voters, |(_, set)| set)
    }

    /// The offset of the latest KRaftVoters record (-1 for a bootstrap
    /// snapshot's), None when the voters are static.
    pub(crate) fn latest_offset(&self) -> Option<i64> {
        self.voter_sets.last().map(|(offset, _)| *offset)
    }

    /// `kraft.version` and the voter set (None when static) after every
    /// offset before `end_offset`: what a snapshot ending there holds.
    pub(crate) fn at(&self, end_offset: i64) -> (i16, Option<VoterSet>) {
        let version = self.kraft_versions.iter().rev().find(|(o, _)| *o < end_offset).map_or(0, |(_, v)| *v);
        let voters = self.voter_sets.iter().rev().find(|(o, _)| *o < end_offset).map(|(_, s)| s.clone());
        (version, voters)
    }

    /// Reads the control records of `batches` (whole batches, in offset
    /// order after what the history holds).
    pub(crate) fn read_batches(&mut self, batches: &Bytes) {
        for batch in RecordBatches::new(batches.clone()).map_while(Result::ok) {
            if !batch.is_control() {
                continue;
            }
            let Ok(records) = batch.records(usize::MAX) else { continue };
            for record in records.map_while(Result::ok) {
                let kind = record.key.as_deref().and_then(control_type_id).and_then(ControlType::from_id);
                let (Some(kind), Some(value)) = (kind, record.value) else { continue };
                self.record(record.offset, kind, value);
            }
        }
    }

    /// One control record at `offset`; those raft does not track are ignored.
    pub(crate) fn record(&mut self, offset: i64, kind: ControlType, mut value: Bytes) {
        debug_assert!(
            self.voter_sets.last().is_none_or(|(o, _)| *o < offset),
            "voter history read out of offset order"
        );
        match kind {
            ControlType::KRaftVersion => {
                if let Ok(record) = KRaftVersionRecord::decode(&mut value, 0) {
                    self.kraft_versions.push((offset, record.k_raft_version));
                }
            }
            ControlType::KRaftVoters => {
                if let Some(set) = VoterSet::from_record(value) {
                    self.voter_sets.push((offset, set));
                }
            }
            _ => {}
        }
    }

    /// Forgets what the log held at `end` and after (a truncation).
    pub(crate) fn truncate(&mut self, end: i64) {
        self.kraft_versions.retain(|(o, _)| *o < end);
        self.voter_sets.retain(|(o, _)| *o < end);
    }

    /// Starts again from a snapshot ending at `end_offset` (its bytes): what
    /// it holds counts at `end_offset - 1`.
    pub(crate) fn reset_to_snapshot(&mut self, end_offset: i64, snapshot: &Bytes) {
        self.kraft_versions.clear();
        self.voter_sets.clear();
        let mut tmp = VoterHistory::new(VoterSet::default());
        tmp.read_batches(snapshot);
        if let Some((_, version)) = tmp.kraft_versions.pop() {
            self.kraft_versions.push((end_offset - 1, version));
        }
        if let Some((_, set)) = tmp.voter_sets.pop() {
            self.voter_sets.push((end_offset - 1, set));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::records::control_batch_of;

    fn node(id: i32) -> VoterNode {
        VoterNode {
            id,
            directory_id: Uuid([id as u8; 16]),
            listeners: vec![Listener { name: "CONTROLLER".into(), host: "localhost".into(), port: 9000 + id as u16 }],
            kraft_versions: (0, 1),
        }
    }

    #[test]
    fn a_voter_set_round_trips_its_record_and_changes_one_voter_at_a_time() {
        let set = VoterSet::new([node(1), node(2)]);
        assert_eq!(VoterSet::from_record(set.to_record()), Some(set.clone()));
        assert_eq!(set.add(node(2)), None, "a duplicate voter");
        assert_eq!(set.add(node(3)).unwrap().ids(), vec![1, 2, 3]);
        assert_eq!(set.remove(2, Uuid::ZERO), None, "the directory id must match");
        assert_eq!(set.remove(2, node(2).directory_id).unwrap().ids(), vec![1]);
        assert_eq!(VoterSet::new([node(1)]).remove(1, node(1).directory_id), None, "the last voter stays");
        let mut moved = node(1);
        moved.listeners[0].port = 1;
        assert!(set.needs_update(&moved) && !set.needs_update(&node(1)));
        assert_eq!(set.update(moved.clone()).unwrap().get(1), Some(&moved));
    }

    #[test]
    fn a_snapshot_gets_the_voters_in_its_header_batch_and_its_batches_move_up() {
        use krabka_protocol::records::{control_batch, NewRecord, RecordBatchBuilder};
        let mut snapshot = control_batch(0, ControlType::SnapshotHeader, b"header", 7).unwrap().to_vec();
        let mut builder = RecordBatchBuilder::new(krabka_protocol::compression::Compression::None).with_base_offset(1);
        builder.append(&NewRecord { timestamp_ms: 7, key: None, value: Some(b"state"), headers: &[] }).unwrap();
        snapshot.extend_from_slice(builder.build().unwrap().as_bytes());
        assert_eq!(with_kraft_control(&snapshot, 0, None), None, "kraft.version 0 adds nothing");
        let set = VoterSet::new([node(1)]);
        let rewritten = Bytes::from(with_kraft_control(&snapshot, 1, Some(&set)).unwrap());
        let batches: Vec<_> = RecordBatches::new(rewritten.clone()).map(Result::unwrap).collect();
        assert_eq!(batches.len(), 2);
        batches.iter().for_each(|b| b.validate().unwrap());
        assert_eq!((batches[0].last_offset(), batches[1].base_offset()), (2, 3));
        let mut history = VoterHistory::new(VoterSet::default());
        history.reset_to_snapshot(10, &rewritten);
        assert_eq!((history.kraft_version(), history.latest()), (1, &set));
    }

    #[test]
    fn the_history_follows_the_log_its_truncations_and_snapshots() {
        let mut history = VoterHistory::new(VoterSet::from_ids(&[1, 2, 3]));
        assert_eq!((history.kraft_version(), history.latest().ids()), (0, vec![1, 2, 3]));
        let one = VoterSet::new([node(1)]);
        let version = kraft_version_record(1);
        let voters = one.to_record();
        let batch = control_batch_of(
            5,
            &[
                (ControlType::SnapshotHeader, b"".as_slice()),
                (ControlType::KRaftVersion, &version),
                (ControlType::KRaftVoters, &voters),
            ],
            0,
        )
        .unwrap();
        history.read_batches(&batch);
        assert_eq!((history.kraft_version(), history.latest_offset()), (1, Some(7)));
        let two = one.add(node(2)).unwrap();
        history.record(10, ControlType::KRaftVoters, two.to_record());
        assert_eq!(history.latest(), &two);
        assert_eq!(history.at(10), (1, Some(one.clone())));
        history.truncate(10);
        assert_eq!(history.latest(), &one);
        history.reset_to_snapshot(0, &batch);
        assert_eq!((history.latest_offset(), history.kraft_version()), (Some(-1), 1));
    }
}
