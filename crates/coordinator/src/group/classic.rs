//! A classic consumer group (JoinGroup / SyncGroup / Heartbeat / LeaveGroup)
//! as Kafka's coordinator runs it: states Empty -> PreparingRebalance ->
//! CompletingRebalance -> Stable, generations, a leader that computes the
//! assignment, rebalance and session timeouts, the initial rebalance delay,
//! KIP-394 member ids, static members (`group.instance.id`).
//!
//! The group is pure state: callers hold its shard's lock, pass the clock,
//! and persist the records it asks for. Delayed answers (a JoinGroup parked
//! until the rebalance completes, a SyncGroup waiting for the leader) are
//! the host's [`Waiter`]s, kept on the member and called under the lock.

use krabka_protocol::ErrorCode;
use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use krabka_protocol::join_group_response::JoinGroupResponseMember;
use krabka_protocol::{JoinGroupResponse, SyncGroupResponse};

use crate::runtime::{Outcome, Time, Waiter};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names DescribeGroups and ListGroups use.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// Group limits and timings from the broker config (Kafka's `group.*` keys).
#[derive(Clone, Debug)]
pub struct ClassicConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i64,
    pub max_size: usize,
}

impl ClassicConfig {
    /// Whether a joining member's session timeout is within
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
    pub fn accepts_session_timeout(&self, session_timeout_ms: i32) -> bool {
        (self.min_session_timeout_ms..=self.max_session_timeout_ms).contains(&session_timeout_ms)
    }
}

pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// When the member last showed it is alive (monotonic ms).
    pub last_heartbeat: i64,
    pub join_waiter: Option<Waiter<JoinGroupResponse>>,
    pub sync_waiter: Option<Waiter<SyncGroupResponse>>,
}

impl Member {
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(name, _)| name == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}

/// What a JoinGroup asks of the group.
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: an unknown member first gets its id (KIP-394).
    pub require_known_member_id: bool,
}

/// A JoinGroup's answer: now, or later through the waiter it was given.
pub type JoinOutcome = Outcome<JoinGroupResponse>;

pub struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation_id: i32,
    pub leader_id: Option<String>,
    /// Members by id; `join_order` keeps the order they joined in.
    pub members: HashMap<String, Member>,
    join_order: Vec<String>,
    /// Ids handed out by MEMBER_ID_REQUIRED, waiting for the member's rejoin.
    pending_members: HashMap<String, i64>,
    static_members: HashMap<String, String>,
    /// When the current PreparingRebalance or CompletingRebalance gives up waiting.
    pub rebalance_deadline: Option<i64>,
    /// For a group rebalancing from Empty: the initial delay (KIP-134) ends here.
    initial_delay_until: Option<i64>,
    pub state_timestamp_ms: i64,
}

pub(super) fn error_join(member_id: &str, error_code: i16) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code,
        generation_id: -1,
        member_id: member_id.into(),
        protocol_name: None,
        ..Default::default()
    }
}

impl ClassicGroup {
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        ClassicGroup {
            group_id: group_id.into(),
            state: GroupState::Empty,
            protocol_type: None,
            protocol_name: None,
            generation_id: 0,
            leader_id: None,
            members: HashMap::new(),
            join_order: Vec::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay_until: None,
            state_timestamp_ms: now_ms,
        }
    }

    /// A group restored from its last GroupMetadata record: members must
    /// heartbeat within their session timeout from now.
    pub fn restore(&mut self, members: Vec<Member>) {
        for member in members {
            if let Some(instance) = &member.group_instance_id {
                self.static_members.insert(instance.clone(), member.member_id.clone());
            }
            self.join_order.push(member.member_id.clone());
            self.members.insert(member.member_id.clone(), member);
        }
        self.state = if self.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn set_state(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// The protocols every member supports, in the order members prefer them.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols.iter().any(|(name, _)| candidates.iter().any(|c| c == name))
    }

    fn candidate_protocols(&self) -> Vec<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else { return Vec::new() };
        let mut candidates: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for member in members {
            candidates.retain(|c| member.protocols.iter().any(|(n, _)| n == c));
        }
        candidates
    }

    /// Each member votes for its most preferred candidate; most votes wins.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        // Ties go to the protocol first preferred by the earliest member.
        candidates.into_iter().find(|c| votes.get(c.as_str()) == Some(&best))
    }

    /// JoinGroup. When the answer must wait for the rebalance, `waiter` is
    /// kept and called with it; otherwise it is dropped unused.
    pub fn join(
        &mut self,
        request: JoinRequest,
        waiter: Waiter<JoinGroupResponse>,
        config: &ClassicConfig,
        now: Time,
    ) -> JoinOutcome {
        let member_id = request.member_id.clone();
        if self.state == GroupState::Dead {
            return JoinOutcome::Now(error_join(&member_id, ErrorCode::COORDINATOR_NOT_AVAILABLE.code()));
        }
        if !config.accepts_session_timeout(request.session_timeout_ms) {
            return JoinOutcome::Now(error_join(&member_id, ErrorCode::INVALID_SESSION_TIMEOUT.code()));
        }
        if !self.supports_protocols(&request.protocol_type, &request.protocols) {
            return JoinOutcome::Now(error_join(&member_id, ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code()));
        }
        let known = self.members.contains_key(&member_id) || self.pending_members.contains_key(&member_id);
        if member_id.is_empty() {
            // A static member rejoining under a new id replaces its old self.
            if let Some(instance) = &request.group_instance_id {
                if let Some(old_id) = self.static_members.get(instance).cloned() {
                    self.remove_member(&old_id);
                }
            }
            if self.members.len() >= config.max_size {
                return JoinOutcome::Now(error_join("", ErrorCode::GROUP_MAX_SIZE_REACHED.code()));
            }
            let new_id = new_member_id(&request.client_id, request.group_instance_id.as_deref());
            if request.require_known_member_id && request.group_instance_id.is_none() {
                self.pending_members.insert(new_id.clone(), now.mono_ms);
                return JoinOutcome::Now(error_join(&new_id, ErrorCode::MEMBER_ID_REQUIRED.code()));
            }
            return self.add_member_and_rebalance(new_id, request, waiter, config, now);
        }
        if !known {
            return JoinOutcome::Now(error_join(&member_id, ErrorCode::UNKNOWN_MEMBER_ID.code()));
        }
        if let Some(instance) = &request.group_instance_id {
            if self.static_members.get(instance).is_some_and(|id| *id != member_id) {
                return JoinOutcome::Now(error_join(&member_id, ErrorCode::FENCED_INSTANCE_ID.code()));
            }
        }
        if self.pending_members.remove(&member_id).is_some() {
            if self.members.len() >= config.max_size {
                return JoinOutcome::Now(error_join(&member_id, ErrorCode::GROUP_MAX_SIZE_REACHED.code()));
            }
            return self.add_member_and_rebalance(member_id, request, waiter, config, now);
        }
        // A known member rejoining.
        let changed = {
            let member = self.members.get_mut(&member_id).expect("known member");
            let changed = member.protocols != request.protocols;
            member.protocols = request.protocols;
            member.session_timeout_ms = request.session_timeout_ms;
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
            member.last_heartbeat = now.mono_ms;
            member.join_waiter = Some(waiter);
            changed
        };
        match self.state {
            GroupState::PreparingRebalance => {}
            GroupState::CompletingRebalance | GroupState::Stable => {
                let is_leader = self.leader_id.as_deref() == Some(member_id.as_str());
                if changed || is_leader {
                    self.prepare_rebalance(config, now);
                } else {
                    // Nothing changed: the member just gets the current generation back.
                    let response = self.join_response_for(&member_id);
                    if let Some(member) = self.members.get_mut(&member_id) {
                        member.join_waiter = None;
                    }
                    return JoinOutcome::Now(response);
                }
            }
            GroupState::Empty | GroupState::Dead => self.prepare_rebalance(config, now),
        }
        self.maybe_complete_join(now);
        Outcome::Wait
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        request: JoinRequest,
        waiter: Waiter<JoinGroupResponse>,
        config: &ClassicConfig,
        now: Time,
    ) -> JoinOutcome {
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        if let Some(instance) = &request.group_instance_id {
            self.static_members.insert(instance.clone(), member_id.clone());
        }
        self.join_order.push(member_id.clone());
        self.members.insert(
            member_id.clone(),
            Member {
                member_id,
                group_instance_id: request.group_instance_id,
                client_id: request.client_id,
                client_host: request.client_host,
                session_timeout_ms: request.session_timeout_ms,
                rebalance_timeout_ms: request.rebalance_timeout_ms,
                protocol_type: request.protocol_type,
                protocols: request.protocols,
                assignment: Bytes::new(),
                last_heartbeat: now.mono_ms,
                join_waiter: Some(waiter),
                sync_waiter: None,
            },
        );
        if self.state == GroupState::PreparingRebalance {
            // KIP-134: each member joining an initially empty group extends
            // the delay, up to the rebalance timeout.
            if let (Some(until), Some(deadline)) = (self.initial_delay_until, self.rebalance_deadline) {
                let extended = until.max(now.mono_ms) + config.initial_rebalance_delay_ms.max(0);
                self.initial_delay_until = Some(extended.min(deadline));
            }
        } else {
            self.prepare_rebalance(config, now);
        }
        self.maybe_complete_join(now);
        Outcome::Wait
    }

    /// Moves to PreparingRebalance: members must rejoin within the longest
    /// rebalance timeout; sync waiters learn that a rebalance started.
    pub fn prepare_rebalance(&mut self, config: &ClassicConfig, now: Time) {
        for member in self.members.values_mut() {
            if let Some(waiter) = member.sync_waiter.take() {
                waiter(SyncGroupResponse { error_code: ErrorCode::REBALANCE_IN_PROGRESS.code(), ..Default::default() });
            }
        }
        let timeout = self.members.values().map(|m| i64::from(m.rebalance_timeout_ms.max(0))).max().unwrap_or(0);
        let deadline = now.mono_ms + timeout;
        self.initial_delay_until = if self.state == GroupState::Empty && config.initial_rebalance_delay_ms > 0 {
            Some((now.mono_ms + config.initial_rebalance_delay_ms).min(deadline))
        } else {
            None
        };
        self.rebalance_deadline = Some(deadline);
        self.set_state(GroupState::PreparingRebalance, now.wall_ms);
    }

    /// Completes the join phase when every member has rejoined (and the
    /// initial delay is over), or when the deadline passed (members that did
    /// not rejoin are dropped). Returns true when a generation was formed.
    pub fn maybe_complete_join(&mut self, now: Time) -> bool {
        if self.state != GroupState::PreparingRebalance {
            return false;
        }
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some()) && self.pending_members.is_empty();
        let delay_over = self.initial_delay_until.is_none_or(|until| now.mono_ms >= until);
        let deadline_passed = self.rebalance_deadline.is_some_and(|d| now.mono_ms >= d);
        if !(deadline_passed || (all_joined && delay_over)) {
            return false;
        }
        let missing: Vec<String> =
            self.members.values().filter(|m| m.join_waiter.is_none()).map(|m| m.member_id.clone()).collect();
        for member_id in missing {
            self.remove_member(&member_id);
        }
        self.pending_members.clear();
        self.initial_delay_until = None;
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.leader_id = None;
            self.rebalance_deadline = None;
            self.set_state(GroupState::Empty, now.wall_ms);
            return true;
        }
        self.protocol_name = self.select_protocol();
        if self.leader_id.as_ref().is_none_or(|l| !self.members.contains_key(l)) {
            self.leader_id = self.join_order.iter().find(|id| self.members.contains_key(*id)).cloned();
        }
        let max_rebalance = self.members.values().map(|m| i64::from(m.rebalance_timeout_ms.max(0))).max().unwrap_or(0);
        self.rebalance_deadline = Some(now.mono_ms + max_rebalance);
        self.set_state(GroupState::CompletingRebalance, now.wall_ms);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for member_id in ids {
            let response = self.join_response_for(&member_id);
            if let Some(member) = self.members.get_mut(&member_id) {
                member.last_heartbeat = now.mono_ms;
                member.assignment = Bytes::new();
                if let Some(waiter) = member.join_waiter.take() {
                    waiter(response);
                }
            }
        }
        true
    }

    fn join_response_for(&self, member_id: &str) -> JoinGroupResponse {
        let is_leader = self.leader_id.as_deref() == Some(member_id);
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if is_leader {
            self.join_order
                .iter()
                .filter_map(|id| self.members.get(id))
                .map(|m| JoinGroupResponseMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                    ..Default::default()
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            error_code: ErrorCode::NONE.code(),
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone().unwrap_or_default(),
            member_id: member_id.into(),
            members,
            ..Default::default()
        }
    }

    /// SyncGroup. Returns the response now, or Wait when `waiter` was kept
    /// for it; true in the second slot when the group became Stable (persist it).
    pub fn sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        assignments: Vec<(String, Bytes)>,
        waiter: Waiter<SyncGroupResponse>,
        now_ms: i64,
    ) -> (Outcome<SyncGroupResponse>, bool) {
        let error = |code| (Outcome::Now(SyncGroupResponse { error_code: code, ..Default::default() }), false);
        if !self.members.contains_key(member_id) {
            return error(ErrorCode::UNKNOWN_MEMBER_ID.code());
        }
        if generation_id != self.generation_id {
            return error(ErrorCode::ILLEGAL_GENERATION.code());
        }
        match self.state {
            GroupState::PreparingRebalance => error(ErrorCode::REBALANCE_IN_PROGRESS.code()),
            GroupState::Empty | GroupState::Dead => error(ErrorCode::UNKNOWN_MEMBER_ID.code()),
            GroupState::Stable => {
                let member = &self.members[member_id];
                (Outcome::Now(self.sync_response(member.assignment.clone())), false)
            }
            GroupState::CompletingRebalance => {
                if let Some(member) = self.members.get_mut(member_id) {
                    member.sync_waiter = Some(waiter);
                }
                if self.leader_id.as_deref() != Some(member_id) {
                    return (Outcome::Wait, false);
                }
                let assigned: HashMap<String, Bytes> = assignments.into_iter().collect();
                let response_base = self.sync_response(Bytes::new());
                for member in self.members.values_mut() {
                    member.assignment = assigned.get(&member.member_id).cloned().unwrap_or_default();
                    if let Some(waiter) = member.sync_waiter.take() {
                        waiter(SyncGroupResponse { assignment: member.assignment.clone(), ..response_base.clone() });
                    }
                }
                self.rebalance_deadline = None;
                self.set_state(GroupState::Stable, now_ms);
                (Outcome::Wait, true)
            }
        }
    }

    fn sync_response(&self, assignment: Bytes) -> SyncGroupResponse {
        SyncGroupResponse {
            error_code: ErrorCode::NONE.code(),
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
            ..Default::default()
        }
    }

    pub fn heartbeat(&mut self, member_id: &str, generation_id: i32, now: Time) -> i16 {
        let Some(member) = self.members.get_mut(member_id) else { return ErrorCode::UNKNOWN_MEMBER_ID.code() };
        member.last_heartbeat = now.mono_ms;
        if generation_id != self.generation_id {
            return ErrorCode::ILLEGAL_GENERATION.code();
        }
        match self.state {
            GroupState::PreparingRebalance => ErrorCode::REBALANCE_IN_PROGRESS.code(),
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::NONE.code(),
            GroupState::Empty | GroupState::Dead => ErrorCode::UNKNOWN_MEMBER_ID.code(),
        }
    }

    /// LeaveGroup of one member (by id, or by instance id for static members).
    pub fn leave(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        config: &ClassicConfig,
        now: Time,
    ) -> i16 {
        let id = match group_instance_id {
            Some(instance) => match self.static_members.get(instance) {
                Some(id) if member_id.is_empty() || id == member_id => id.clone(),
                Some(_) => return ErrorCode::FENCED_INSTANCE_ID.code(),
                None => return ErrorCode::UNKNOWN_MEMBER_ID.code(),
            },
            None => member_id.to_string(),
        };
        if self.pending_members.remove(&id).is_some() {
            return ErrorCode::NONE.code();
        }
        if !self.members.contains_key(&id) {
            return ErrorCode::UNKNOWN_MEMBER_ID.code();
        }
        self.remove_member(&id);
        self.member_gone(config, now);
        ErrorCode::NONE.code()
    }

    /// Its coordinator leaves this node (Kafka's `onUnloaded`): each
    /// parked JoinGroup and SyncGroup is answered NOT_COORDINATOR, so that
    /// its member finds the new coordinator and joins there, keeping its
    /// member id, instead of waiting out its rebalance timeout here.
    pub fn unload(&mut self) {
        let not_coordinator = ErrorCode::NOT_COORDINATOR.code();
        for member in self.members.values_mut() {
            if let Some(waiter) = member.join_waiter.take() {
                waiter(error_join(&member.member_id, not_coordinator));
            }
            if let Some(waiter) = member.sync_waiter.take() {
                waiter(SyncGroupResponse { error_code: not_coordinator, ..Default::default() });
            }
        }
    }

    fn remove_member(&mut self, member_id: &str) {
        if let Some(member) = self.members.remove(member_id) {
            if let Some(instance) = &member.group_instance_id {
                self.static_members.remove(instance);
            }
            if let Some(waiter) = member.join_waiter {
                waiter(error_join(member_id, ErrorCode::UNKNOWN_MEMBER_ID.code()));
            }
            if let Some(waiter) = member.sync_waiter {
                waiter(SyncGroupResponse { error_code: ErrorCode::UNKNOWN_MEMBER_ID.code(), ..Default::default() });
            }
        }
        self.join_order.retain(|id| id != member_id);
        if self.leader_id.as_deref() == Some(member_id) {
            self.leader_id = None;
        }
    }

    /// After a member left or expired: rebalance, or finish the one running.
    fn member_gone(&mut self, config: &ClassicConfig, now: Time) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(config, now),
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => return,
        }
        self.maybe_complete_join(now);
    }

    /// Clock work: expired sessions, passed deadlines. Returns true when the
    /// group's generation or state changed in a way worth persisting.
    pub fn tick(&mut self, config: &ClassicConfig, now: Time) -> bool {
        let before = (self.generation_id, self.state);
        // Members waiting in a join are covered by the rebalance timeout.
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.join_waiter.is_none() && now.mono_ms - m.last_heartbeat > i64::from(m.session_timeout_ms.max(0))
            })
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &expired {
            tracing::info!(group = %self.group_id, member = %member_id, "member session expired");
            self.remove_member(member_id);
        }
        let session_ms = self.members.values().map(|m| i64::from(m.session_timeout_ms.max(0))).max().unwrap_or(0);
        self.pending_members.retain(|_, since| now.mono_ms - *since <= session_ms.max(30_000));
        if !expired.is_empty() {
            self.member_gone(config, now);
        }
        match self.state {
            GroupState::PreparingRebalance => {
                self.maybe_complete_join(now);
            }
            GroupState::CompletingRebalance if self.rebalance_deadline.is_some_and(|d| now.mono_ms >= d) => {
                // The leader never sent the assignment: start over.
                self.prepare_rebalance(config, now);
            }
            _ => {}
        }
        before != (self.generation_id, self.state)
    }
}

pub fn new_member_id(client_id: &str, group_instance_id: Option<&str>) -> String {
    let prefix = group_instance_id.unwrap_or(client_id);
    // Without the system's randomness, a counter keeps ids unique in this
    // process (the clock is not read here).
    static FALLBACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let uuid = krabka_protocol::Uuid::random()
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("fallback-{}", FALLBACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    format!("{prefix}-{uuid}")
}
