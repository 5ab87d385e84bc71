//! A consumer group of the KIP-848 protocol (ConsumerGroupHeartbeat): the
//! broker computes the target assignment with a server-side assignor and
//! moves each member towards it by epochs. A member first gives up the
//! partitions it must revoke (it keeps its epoch until it acknowledges by
//! heartbeating without them), then receives the target epoch and the new
//! partitions no other member still holds; those still held are handed over
//! in later heartbeats, once released.
//!
//! Membership is kept in memory; committed offsets are persisted by the
//! coordinator. After a broker restart members are unknown, get
//! UNKNOWN_MEMBER_ID and rejoin with epoch 0, which clients do by themselves.

use krabka_protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

use krabka_protocol::Uuid;

use super::assignor::{self, Assignment, TopicInfo};
use crate::runtime::Time;
use krabka_metadata::MetadataImage;

/// Member epoch -1: leave the group; -2: a static member leaves temporarily.
const LEAVE_EPOCH: i32 = -1;
const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
}

pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: BTreeSet<String>,
    pub subscribed_topic_regex: Option<String>,
    /// What the member owns (has been given and not revoked).
    pub assigned: Assignment,
    /// Partitions it was asked to give up and has not confirmed yet.
    pub revoking: Assignment,
    /// Monotonic ms by which a revocation must be confirmed.
    revocation_deadline: Option<i64>,
    /// Monotonic ms of the member's last heartbeat.
    last_heartbeat: i64,
    /// The assignment last sent, so unchanged ones are not resent.
    last_sent: Option<Assignment>,
    /// Set for a member that speaks the classic protocol (after an upgrade).
    pub classic: Option<ClassicProtocol>,
}

/// What a classic member of a consumer group keeps of its protocol.
#[derive(Clone, Debug)]
pub struct ClassicProtocol {
    /// (protocol name, subscription metadata), in preference order.
    pub protocols: Vec<(String, bytes::Bytes)>,
    pub session_timeout_ms: i32,
}

impl ConsumerMember {
    /// A member that just joined (epoch 0, nothing assigned); callers set
    /// what they know beyond the identity.
    fn joining(
        member_id: &str,
        instance_id: Option<String>,
        client_id: &str,
        client_host: &str,
        rebalance_timeout_ms: i32,
        mono_ms: i64,
    ) -> Self {
        ConsumerMember {
            member_id: member_id.to_string(),
            instance_id,
            rack_id: None,
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
            member_epoch: 0,
            previous_member_epoch: -1,
            rebalance_timeout_ms,
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            revocation_deadline: None,
            last_heartbeat: mono_ms,
            last_sent: None,
            classic: None,
        }
    }
}

/// One ConsumerGroupHeartbeat, as the group needs it.
pub struct HeartbeatRequest {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, PartialEq)]
pub struct HeartbeatResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    /// Present when the member's assignment changed since it was last told.
    pub assignment: Option<Assignment>,
}

impl HeartbeatResponse {
    fn error(member_id: &str, error_code: i16, message: impl Into<String>) -> Self {
        HeartbeatResponse {
            error_code,
            error_message: Some(message.into()),
            member_id: member_id.into(),
            member_epoch: -1,
            assignment: None,
        }
    }
}

pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: BTreeMap<String, ConsumerMember>,
    pub target: BTreeMap<String, Assignment>,
    /// The subscribed topics' ids and sizes the target was computed for.
    subscribed_topics: BTreeMap<String, TopicInfo>,
    pub state_timestamp_ms: i64,
}

fn remove_all(from: &mut Assignment, what: &Assignment) {
    for (topic, partitions) in what {
        if let Some(set) = from.get_mut(topic) {
            set.retain(|p| !partitions.contains(p));
            if set.is_empty() {
                from.remove(topic);
            }
        }
    }
}

fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = a.clone();
    remove_all(&mut out, b);
    out
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(topic, set)| b.get(topic).is_some_and(|other| !set.is_disjoint(other)))
}

impl ConsumerGroup {
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        ConsumerGroup {
            group_id: group_id.into(),
            group_epoch: 0,
            assignment_epoch: 0,
            assignor: assignor::UNIFORM.into(),
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed_topics: BTreeMap::new(),
            state_timestamp_ms: now_ms,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// KIP-848's group states, as ListGroups and ConsumerGroupDescribe name them.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self.members.values().any(|m| m.member_epoch != self.assignment_epoch || !m.revoking.is_empty()) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Subscribed topics as the image has them now.
    fn topics_for(&self, image: &MetadataImage) -> BTreeMap<String, TopicInfo> {
        let mut out = BTreeMap::new();
        for member in self.members.values() {
            for name in &member.subscribed_topic_names {
                if let Some(topic) = image.topic(name) {
                    out.insert(name.clone(), TopicInfo { id: topic.id, partitions: topic.partitions.len() as i32 });
                }
            }
        }
        out
    }

    fn bump_epoch(&mut self, now_ms: i64) {
        self.group_epoch += 1;
        self.state_timestamp_ms = now_ms;
    }

    /// Recomputes the target assignment when the group epoch moved on.
    fn maybe_assign(&mut self) {
        if self.assignment_epoch >= self.group_epoch {
            return;
        }
        let subscriptions: BTreeMap<String, BTreeSet<String>> =
            self.members.iter().map(|(id, m)| (id.clone(), m.subscribed_topic_names.clone())).collect();
        self.target = if self.assignor == assignor::RANGE {
            assignor::range(&subscriptions, &self.subscribed_topics)
        } else {
            assignor::uniform(&subscriptions, &self.subscribed_topics, &self.target)
        };
        self.assignment_epoch = self.group_epoch;
    }

    /// Partitions owned, or still being given up, by members other than `member_id`.
    fn held_by_others(&self, member_id: &str) -> Assignment {
        let mut held = Assignment::new();
        for (id, member) in &self.members {
            if id == member_id {
                continue;
            }
            for source in [&member.assigned, &member.revoking] {
                for (topic, set) in source {
                    held.entry(*topic).or_default().extend(set.iter().copied());
                }
            }
        }
        held
    }

    pub fn heartbeat(
        &mut self,
        request: HeartbeatRequest,
        image: &MetadataImage,
        config: &ConsumerConfig,
        now: Time,
    ) -> HeartbeatResponse {
        let member_id = request.member_id.clone();
        // One heartbeat moves the group epoch at most once, however many
        // things it changed.
        let mut bump = match request.member_epoch {
            LEAVE_EPOCH | STATIC_LEAVE_EPOCH => return self.leave(member_id, request.member_epoch, now.wall_ms),
            0 => match self.join(&request, config, now.mono_ms) {
                Ok(()) => true,
                Err(response) => return response,
            },
            epoch => match self.check_member_epoch(&request, epoch) {
                Ok(()) => false,
                Err(response) => return response,
            },
        };
        match self.choose_server_assignor(&request) {
            Ok(assignor_changed) => bump |= assignor_changed,
            Err(response) => return response,
        }
        let mut changed = self.record_heartbeat(&request, now.mono_ms);
        changed |= self.match_regex_subscriptions(&request, image);
        bump |= self.refresh_subscribed_topics(image);
        if changed || bump {
            self.bump_epoch(now.wall_ms);
        }
        self.maybe_assign();
        self.reconcile(&member_id, request.owned.as_ref(), now.mono_ms);
        self.answer(member_id)
    }

    /// Epoch -1 or -2: the member leaves, and its answer echoes that epoch.
    fn leave(&mut self, member_id: String, member_epoch: i32, now_ms: i64) -> HeartbeatResponse {
        if self.members.remove(&member_id).is_some() {
            self.target.remove(&member_id);
            self.bump_epoch(now_ms);
        }
        HeartbeatResponse {
            error_code: ErrorCode::NONE.code(),
            error_message: None,
            member_id,
            member_epoch,
            assignment: None,
        }
    }

    /// Epoch 0: the member joins, or rejoins afresh with nothing assigned.
    fn join(
        &mut self,
        request: &HeartbeatRequest,
        config: &ConsumerConfig,
        mono_ms: i64,
    ) -> Result<(), HeartbeatResponse> {
        let member_id = &request.member_id;
        if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
            return Err(HeartbeatResponse::error(
                member_id,
                ErrorCode::INVALID_REQUEST.code(),
                "SubscribedTopicNames must be set in the first request.",
            ));
        }
        if !self.members.contains_key(member_id) && self.members.len() >= config.max_size {
            return Err(HeartbeatResponse::error(
                member_id,
                ErrorCode::GROUP_MAX_SIZE_REACHED.code(),
                "The group is full.",
            ));
        }
        // A static member rejoining replaces its previous incarnation.
        if let Some(instance) = &request.instance_id {
            let previous: Vec<String> = self
                .members
                .iter()
                .filter(|(id, m)| m.instance_id.as_ref() == Some(instance) && *id != member_id)
                .map(|(id, _)| id.clone())
                .collect();
            for id in previous {
                self.members.remove(&id);
                self.target.remove(&id);
            }
        }
        let rejoin = self.members.remove(member_id).is_some();
        self.members.insert(
            member_id.clone(),
            ConsumerMember {
                rack_id: request.rack_id.clone(),
                ..ConsumerMember::joining(
                    member_id,
                    request.instance_id.clone(),
                    &request.client_id,
                    &request.client_host,
                    request.rebalance_timeout_ms,
                    mono_ms,
                )
            },
        );
        if rejoin {
            self.target.remove(member_id);
        }
        Ok(())
    }

    /// Any other epoch: the member must be known and at its current epoch.
    fn check_member_epoch(&self, request: &HeartbeatRequest, epoch: i32) -> Result<(), HeartbeatResponse> {
        let member_id = &request.member_id;
        let Some(member) = self.members.get(member_id) else {
            return Err(HeartbeatResponse::error(
                member_id,
                ErrorCode::UNKNOWN_MEMBER_ID.code(),
                "The member is not in the group.",
            ));
        };
        // The previous epoch is accepted when the member did not get
        // our last answer but owns exactly what it had.
        let lost_response = epoch == member.previous_member_epoch
            && request.owned.as_ref().is_some_and(|owned| *owned == member.assigned);
        if epoch != member.member_epoch && !lost_response {
            return Err(HeartbeatResponse::error(
                member_id,
                ErrorCode::FENCED_MEMBER_EPOCH.code(),
                format!("The member epoch {epoch} is not the current one ({}).", member.member_epoch),
            ));
        }
        Ok(())
    }

    /// The assignor the member asks for, if any. True when the group's changed.
    fn choose_server_assignor(&mut self, request: &HeartbeatRequest) -> Result<bool, HeartbeatResponse> {
        let Some(name) = &request.server_assignor else { return Ok(false) };
        if name != assignor::UNIFORM && name != assignor::RANGE {
            return Err(HeartbeatResponse::error(
                &request.member_id,
                ErrorCode::UNSUPPORTED_ASSIGNOR.code(),
                format!("Unknown assignor {name}."),
            ));
        }
        if *name == self.assignor {
            return Ok(false);
        }
        self.assignor = name.clone();
        Ok(true)
    }

    /// The member's liveness, rebalance timeout and subscription from this
    /// heartbeat. True when its subscription changed.
    fn record_heartbeat(&mut self, request: &HeartbeatRequest, mono_ms: i64) -> bool {
        let mut changed = false;
        let member = self.members.get_mut(&request.member_id).expect("member present");
        member.last_heartbeat = mono_ms;
        // -1 means "unchanged" after the first heartbeat.
        if request.rebalance_timeout_ms >= 0 {
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if let Some(names) = &request.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                changed = true;
            }
        }
        if request.subscribed_topic_regex.is_some() && request.subscribed_topic_regex != member.subscribed_topic_regex {
            member.subscribed_topic_regex = request.subscribed_topic_regex.clone();
            changed = true;
        }
        changed
    }

    /// Regular expressions are matched against the current topics (RE2/J
    /// syntax; krabka supports the common subset: literals, `.*`, `|`).
    /// True when a member's subscribed topics changed.
    fn match_regex_subscriptions(&mut self, request: &HeartbeatRequest, image: &MetadataImage) -> bool {
        let mut changed = false;
        let regex_topics: Vec<(String, String)> = self
            .members
            .iter()
            .filter_map(|(id, m)| m.subscribed_topic_regex.as_ref().map(|r| (id.clone(), r.clone())))
            .collect();
        for (id, regex) in regex_topics {
            let mut matched: BTreeSet<String> =
                image.topics.keys().filter(|t| simple_regex_match(&regex, t)).cloned().collect();
            matched.retain(|t| !t.starts_with("__"));
            let member = self.members.get_mut(&id).expect("member present");
            let explicit: BTreeSet<String> = request.subscribed_topic_names.iter().flatten().cloned().collect();
            let wanted: BTreeSet<String> = matched.union(&explicit).cloned().collect();
            if wanted != member.subscribed_topic_names && !wanted.is_empty() {
                member.subscribed_topic_names = wanted;
                changed = true;
            }
        }
        changed
    }

    /// The subscribed topics' ids and sizes as the image has them now. True
    /// when they differ from those the target was computed for.
    fn refresh_subscribed_topics(&mut self, image: &MetadataImage) -> bool {
        let topics = self.topics_for(image);
        if topics == self.subscribed_topics {
            return false;
        }
        self.subscribed_topics = topics;
        true
    }

    /// The member's epoch, and its assignment when it changed since last sent.
    fn answer(&mut self, member_id: String) -> HeartbeatResponse {
        let member = self.members.get_mut(&member_id).expect("member present");
        let current = member.assigned.clone();
        let assignment = if member.last_sent.as_ref() != Some(&current) {
            member.last_sent = Some(current.clone());
            Some(current)
        } else {
            None
        };
        HeartbeatResponse {
            error_code: ErrorCode::NONE.code(),
            error_message: None,
            member_id,
            member_epoch: member.member_epoch,
            assignment,
        }
    }

    /// Moves one member towards its target (see the module comment).
    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, mono_ms: i64) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let held = self.held_by_others(member_id);
        let assignment_epoch = self.assignment_epoch;
        let member = self.members.get_mut(member_id).expect("member present");
        // Confirmations: what the member no longer reports owning is released.
        if !member.revoking.is_empty() {
            let still_owned = owned.is_some_and(|o| intersects(o, &member.revoking));
            if still_owned {
                return; // keep waiting (the tick enforces the rebalance timeout)
            }
            member.revoking.clear();
            member.revocation_deadline = None;
        }
        let to_revoke = difference(&member.assigned, &target);
        if !to_revoke.is_empty() {
            remove_all(&mut member.assigned, &to_revoke);
            member.revoking = to_revoke;
            member.revocation_deadline = Some(mono_ms + i64::from(member.rebalance_timeout_ms.max(0)));
            return;
        }
        if member.member_epoch != assignment_epoch {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = assignment_epoch;
        }
        // New partitions, as far as their previous owners released them.
        let mut available = difference(&target, &member.assigned);
        remove_all(&mut available, &held);
        for (topic, set) in available {
            member.assigned.entry(topic).or_default().extend(set);
        }
    }

    /// Expired sessions and overdue revocations. True when members were removed.
    pub fn tick(&mut self, config: &ConsumerConfig, now: Time) -> bool {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                // Classic members keep the session timeout they asked for;
                // their revocations happen by rejoining, under that timeout.
                let session_ms =
                    m.classic.as_ref().map_or(config.session_timeout_ms, |c| i64::from(c.session_timeout_ms));
                now.mono_ms - m.last_heartbeat > session_ms.max(0)
                    || (m.classic.is_none() && m.revocation_deadline.is_some_and(|d| now.mono_ms >= d))
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = %self.group_id, member = %id, "consumer group member expired");
            self.members.remove(id);
            self.target.remove(id);
        }
        if !expired.is_empty() {
            self.bump_epoch(now.wall_ms);
        }
        !expired.is_empty()
    }

    /// The topics the group's members subscribe to (OffsetDelete checks).
    pub fn subscribed_topic_names(&self) -> BTreeSet<String> {
        self.members.values().flat_map(|m| m.subscribed_topic_names.iter().cloned()).collect()
    }

    /// OffsetCommit from a member: its epoch must be its current one.
    pub fn validate_commit(&self, member_id: &str, member_epoch: i32) -> Result<(), i16> {
        let Some(member) = self.members.get(member_id) else { return Err(ErrorCode::UNKNOWN_MEMBER_ID.code()) };
        if member_epoch != member.member_epoch {
            return Err(ErrorCode::STALE_MEMBER_EPOCH.code());
        }
        Ok(())
    }
}

impl ConsumerGroup {
    /// Converts a Stable classic group of consumers: members keep their
    /// ids, subscriptions, assignments and generation (as member epoch).
    pub fn from_classic(classic: &super::classic::ClassicGroup, image: &MetadataImage, now: Time) -> Self {
        let mut group = ConsumerGroup::new(&classic.group_id, now.wall_ms);
        group.group_epoch = classic.generation_id;
        group.assignment_epoch = classic.generation_id;
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        for member in classic.members.values() {
            let (topics, _) =
                super::migration::decode_subscription(member.metadata_for(&protocol), image).unwrap_or_default();
            let assigned = super::migration::decode_assignment(member.assignment.clone(), image);
            group.target.insert(member.member_id.clone(), assigned.clone());
            group.members.insert(
                member.member_id.clone(),
                ConsumerMember {
                    member_epoch: classic.generation_id,
                    subscribed_topic_names: topics.into_iter().collect(),
                    last_sent: Some(assigned.clone()),
                    assigned,
                    classic: Some(ClassicProtocol {
                        protocols: member.protocols.clone(),
                        session_timeout_ms: member.session_timeout_ms,
                    }),
                    ..ConsumerMember::joining(
                        &member.member_id,
                        member.group_instance_id.clone(),
                        &member.client_id,
                        &member.client_host,
                        member.rebalance_timeout_ms,
                        now.mono_ms,
                    )
                },
            );
        }
        group.subscribed_topics = group.topics_for(image);
        group
    }

    /// JoinGroup from a classic member: answered at once as a follower of
    /// the broker's assignment, with its member epoch as the generation.
    /// Returns (generation, protocol name).
    pub fn classic_join(
        &mut self,
        request: &super::classic::JoinRequest,
        member_id: &str,
        image: &MetadataImage,
        config: &ConsumerConfig,
        now: Time,
    ) -> Result<(i32, String), i16> {
        let Some((protocol, metadata)) = request.protocols.first() else {
            return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code());
        };
        let Some((topics, owned)) = super::migration::decode_subscription(metadata.clone(), image) else {
            return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code());
        };
        if !self.members.contains_key(member_id) && self.members.len() >= config.max_size {
            return Err(ErrorCode::GROUP_MAX_SIZE_REACHED.code());
        }
        let topics: BTreeSet<String> = topics.into_iter().collect();
        let mut bump = false;
        let member = self.members.entry(member_id.to_string()).or_insert_with(|| {
            bump = true;
            ConsumerMember::joining(
                member_id,
                request.group_instance_id.clone(),
                &request.client_id,
                &request.client_host,
                request.rebalance_timeout_ms,
                now.mono_ms,
            )
        });
        member.classic = Some(ClassicProtocol {
            protocols: request.protocols.clone(),
            session_timeout_ms: request.session_timeout_ms,
        });
        member.last_heartbeat = now.mono_ms;
        if member.subscribed_topic_names != topics {
            member.subscribed_topic_names = topics;
            bump = true;
        }
        // A classic member rejoining holds only what it reports owning
        // (nothing for eager assignors, which revoke all before joining).
        let empty = BTreeSet::new();
        member.assigned = member
            .assigned
            .iter()
            .filter_map(|(id, set)| {
                let kept: BTreeSet<i32> = set.intersection(owned.get(id).unwrap_or(&empty)).copied().collect();
                (!kept.is_empty()).then_some((*id, kept))
            })
            .collect();
        member.revoking.clear();
        let topics = self.topics_for(image);
        if topics != self.subscribed_topics {
            self.subscribed_topics = topics;
            bump = true;
        }
        if bump {
            self.bump_epoch(now.wall_ms);
        }
        self.maybe_assign();
        self.reconcile(member_id, Some(&owned), now.mono_ms);
        Ok((self.members[member_id].member_epoch, protocol.clone()))
    }

    /// SyncGroup from a classic member: its current assignment.
    pub fn classic_sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        image: &MetadataImage,
    ) -> Result<bytes::Bytes, i16> {
        let member = self.members.get_mut(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID.code())?;
        if member.member_epoch != generation_id {
            return Err(ErrorCode::ILLEGAL_GENERATION.code());
        }
        member.last_sent = Some(member.assigned.clone());
        Ok(super::migration::encode_assignment(&member.assigned, image))
    }

    /// Heartbeat from a classic member: a rejoin is requested whenever its
    /// assignment has to move.
    pub fn classic_heartbeat(&mut self, member_id: &str, generation_id: i32, now: Time) -> i16 {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let assignment_epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(member_id) else { return ErrorCode::UNKNOWN_MEMBER_ID.code() };
        member.last_heartbeat = now.mono_ms;
        if generation_id != member.member_epoch {
            return ErrorCode::ILLEGAL_GENERATION.code();
        }
        if member.assigned != target || member.member_epoch != assignment_epoch {
            return ErrorCode::REBALANCE_IN_PROGRESS.code();
        }
        ErrorCode::NONE.code()
    }

    /// LeaveGroup of a classic member.
    pub fn classic_leave(&mut self, member_id: &str, now_ms: i64) -> i16 {
        if self.members.remove(member_id).is_none() {
            return ErrorCode::UNKNOWN_MEMBER_ID.code();
        }
        self.target.remove(member_id);
        self.bump_epoch(now_ms);
        ErrorCode::NONE.code()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }
}

/// Matches the regular expressions consumers typically subscribe with:
/// literal characters, `.`, `.*`, `.+`, `|` alternatives and escaped `\.`.
pub fn simple_regex_match(pattern: &str, text: &str) -> bool {
    pattern.split('|').any(|alternative| matches_at(alternative.as_bytes(), text.as_bytes()))
}

fn matches_at(pattern: &[u8], text: &[u8]) -> bool {
    match pattern {
        [] => text.is_empty(),
        [b'\\', c, rest @ ..] => text.first() == Some(c) && matches_at(rest, &text[1..]),
        [b'.', b'*', rest @ ..] => (0..=text.len()).any(|i| matches_at(rest, &text[i..])),
        [b'.', b'+', rest @ ..] => (1..=text.len()).any(|i| matches_at(rest, &text[i..])),
        [b'.', rest @ ..] => !text.is_empty() && matches_at(rest, &text[1..]),
        [c, rest @ ..] => text.first() == Some(c) && matches_at(rest, &text[1..]),
    }
}

/// Topic ids in an assignment (for responses that name topics).
pub fn topic_ids(assignment: &Assignment) -> Vec<Uuid> {
    assignment.keys().copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::image_with;

    fn request(member: &str, epoch: i32, owned: Option<Assignment>) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: member.into(),
            member_epoch: epoch,
            instance_id: None,
            rack_id: None,
            // Clients send -1 ("unchanged") after joining.
            rebalance_timeout_ms: if epoch == 0 { 10_000 } else { -1 },
            subscribed_topic_names: (epoch == 0).then(|| vec!["t".to_string()]),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    #[test]
    fn members_revoke_before_others_are_assigned() {
        let (image, id) = image_with("t", 4);
        let config = ConsumerConfig { session_timeout_ms: 45_000, heartbeat_interval_ms: 5000, max_size: 100 };
        let now = Time::new(0, 1_000_000);
        let mut group = ConsumerGroup::new("g", 0);
        let a = group.heartbeat(request("a", 0, None), &image, &config, now);
        assert_eq!(a.member_epoch, 1);
        assert_eq!(assignor::count(a.assignment.as_ref().unwrap()), 4);
        let a_owned = a.assignment.clone();
        // b joins: a must revoke two partitions before b gets them.
        let b = group.heartbeat(request("b", 0, None), &image, &config, now);
        assert_eq!(b.member_epoch, 2);
        assert_eq!(assignor::count(b.assignment.as_ref().unwrap()), 0, "a still holds them");
        let a2 = group.heartbeat(request("a", 1, a_owned), &image, &config, now);
        assert_eq!(a2.member_epoch, 1, "a keeps its epoch until it revokes");
        let a_now = a2.assignment.clone().unwrap();
        assert_eq!(assignor::count(&a_now), 2);
        assert_eq!(group.state_name(), "Reconciling");
        // While a revokes, its rebalance timeout (10 s) protects it.
        assert!(!group.tick(&config, now.plus_ms(1_000)));
        // a confirms (owns only the two it kept): epoch 2; then b gets the rest.
        let a3 = group.heartbeat(request("a", 1, Some(a_now.clone())), &image, &config, now);
        assert_eq!(a3.member_epoch, 2);
        let b2 = group.heartbeat(request("b", 2, Some(Assignment::new())), &image, &config, now);
        let b_now = b2.assignment.unwrap();
        assert_eq!(assignor::count(&b_now), 2);
        assert!(!intersects(&a_now, &b_now));
        assert_eq!(group.state_name(), "Stable");
        // Fencing: an old epoch is refused; an unknown member too.
        assert_eq!(
            group.heartbeat(request("b", 1, None), &image, &config, now).error_code,
            ErrorCode::FENCED_MEMBER_EPOCH.code()
        );
        assert_eq!(
            group.heartbeat(request("z", 3, None), &image, &config, now).error_code,
            ErrorCode::UNKNOWN_MEMBER_ID.code()
        );
        assert_eq!(group.validate_commit("a", 2), Ok(()));
        assert_eq!(group.validate_commit("a", 1), Err(ErrorCode::STALE_MEMBER_EPOCH.code()));
        // b's session expires: a gets everything back at the next epoch.
        assert!(group.tick(&config, now.plus_ms(46_000)) || group.members.len() == 2);
        let _ = id;
    }

    #[test]
    fn simple_regexes() {
        assert!(simple_regex_match("orders-.*", "orders-eu"));
        assert!(simple_regex_match("a|b", "b"));
        assert!(!simple_regex_match("orders-.+", "orders-"));
        assert!(simple_regex_match("t\\.x", "t.x"));
        assert!(!simple_regex_match("t\\.x", "tyx"));
    }
}
