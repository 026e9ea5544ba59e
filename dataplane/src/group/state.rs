//! The classic group state machine (Kafka's `GroupCoordinator` + `GroupMetadata`).
//!
//! ```text
//!            join                     all joined / rebalance timeout
//!   Empty ---------> PreparingRebalance ------------------------> CompletingRebalance
//!     ^                 ^   ^                                          |
//!     | last member     |   +---- join / leave / session expiry -------+ leader's SyncGroup
//!     | gone            |                                              v
//!     +-----------------+---------- join / leave / session expiry --- Stable
//! ```
//!
//! Dead is the state of a deleted (or fully expired) group; such a group is dropped from
//! the coordinator's map at the end of the call that killed it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::messages::*;
use super::records::{
    consumer_subscription_topics, partition_for, GroupMetadataKey, GroupMetadataValue,
    MemberMetadataValue, OffsetCommitKey, OffsetCommitValue, RecordError, RecordKey,
};
use super::GroupConfig;
use crate::types::{ProducerId, TopicPartition};

const NONE: i16 = 0;
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

fn code(error: ResponseError) -> i16 {
    error.code()
}

/// Kafka's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka reports in DescribeGroups and ListGroups.
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

#[derive(Debug, Clone)]
struct Member {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    session_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<JoinGroupProtocol>,
    assignment: Bytes,
    join_waiter: Option<WaiterId>,
    sync_waiter: Option<WaiterId>,
    last_heartbeat_ms: i64,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    /// Kafka's `shouldKeepAlive`: a member parked in JoinGroup or SyncGroup is waiting on
    /// the group, not gone; the rebalance timeout (or, for SyncGroup, the leader's own
    /// session) bounds that wait instead of this member's session.
    fn kept_alive(&self) -> bool {
        self.join_waiter.is_some() || self.sync_waiter.is_some()
    }

    fn session_deadline_ms(&self) -> i64 {
        self.last_heartbeat_ms + i64::from(self.session_timeout_ms)
    }
}

#[derive(Debug, Clone)]
struct InitialDelay {
    /// What is left of the rebalance timeout after the current delay.
    remaining_ms: i64,
    new_member_added: bool,
}

/// One group: membership, the current generation and the committed offsets.
#[derive(Debug, Clone)]
struct GroupMetadata {
    group_id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// group.instance.id -> member id
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED -> expiry time.
    pending_members: BTreeMap<String, i64>,
    current_state_timestamp_ms: Option<i64>,
    /// For the `consumer` protocol: the topics the members subscribe to (None when a
    /// subscription could not be parsed or the protocol is another one).
    subscribed_topics: Option<BTreeSet<String>>,
    offsets: BTreeMap<TopicPartition, CommittedOffset>,
    /// TxnOffsetCommits waiting for their transaction's marker, per producer.
    pending_txn_offsets: BTreeMap<ProducerId, BTreeMap<TopicPartition, CommittedOffset>>,
    join_deadline_ms: Option<i64>,
    initial_delay: Option<InitialDelay>,
}

/// A committed offset and the position of its record among all commit records this
/// coordinator wrote or replayed (Kafka compares the records' log offsets to decide
/// whether a transaction's commit is newer than a plain one).
#[derive(Debug, Clone)]
struct CommittedOffset {
    value: OffsetCommitValue,
    seq: u64,
}

/// What the group-level steps need besides the group.
struct Cx<'a> {
    config: &'a GroupConfig,
    now_ms: i64,
    effects: &'a mut Effects,
}

fn join_error(member_id: &str, error: ResponseError) -> JoinGroupResponse {
    JoinGroupResponse::failed(code(error), member_id)
}

fn sync_error(error: ResponseError) -> SyncGroupResponse {
    SyncGroupResponse::failed(code(error))
}

impl GroupMetadata {
    fn new(group_id: String) -> Self {
        GroupMetadata {
            group_id,
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: BTreeMap::new(),
            current_state_timestamp_ms: None,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
            pending_txn_offsets: BTreeMap::new(),
            join_deadline_ms: None,
            initial_delay: None,
        }
    }

    fn has_offsets(&self) -> bool {
        !self.offsets.is_empty() || !self.pending_txn_offsets.is_empty()
    }

    fn has_pending_txn_offset(&self, tp: &TopicPartition) -> bool {
        self.pending_txn_offsets
            .values()
            .any(|p| p.contains_key(tp))
    }

    /// Kafka's `completePendingTxnOffsetCommit`: a commit makes the transaction's
    /// offsets visible unless a newer plain commit already replaced them.
    fn complete_pending_txn(&mut self, producer_id: ProducerId, commit: bool) -> bool {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return false;
        };
        if commit {
            for (tp, c) in pending {
                if self
                    .offsets
                    .get(&tp)
                    .is_none_or(|current| current.seq < c.seq)
                {
                    self.offsets.insert(tp, c);
                }
            }
        }
        true
    }

    fn remove_offsets(&mut self, tp: &TopicPartition) -> bool {
        for pending in self.pending_txn_offsets.values_mut() {
            pending.remove(tp);
        }
        self.offsets.remove(tp).is_some()
    }

    fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.current_state_timestamp_ms = Some(now_ms);
    }

    fn record_partition(&self, config: &GroupConfig) -> i32 {
        partition_for(&self.group_id, config.offsets_topic_partitions)
    }

    /// A static member whose instance id now belongs to another member id.
    fn is_static_member_fenced(&self, instance: Option<&str>, member_id: &str) -> bool {
        instance
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|current| current != member_id)
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty protocol set;
    /// otherwise the type must match and one protocol must be supported by every member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[JoinGroupProtocol]) -> bool {
        if self.state == GroupState::Empty || self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|p| self.members.values().all(|m| m.supports(&p.name)))
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Kafka's vote: candidates are the protocols every member supports; each member
    /// votes for its most preferred candidate; most votes wins (ties go to the leader's
    /// preference, so the choice is deterministic).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect();
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some(vote) = m
                .protocols
                .iter()
                .map(|p| p.name.as_str())
                .find(|name| candidates.contains(name))
            {
                *votes.entry(vote).or_default() += 1;
            }
        }
        let preference = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .unwrap_or(first);
        let rank = |name: &str| {
            preference
                .protocols
                .iter()
                .position(|p| p.name == name)
                .unwrap_or(usize::MAX)
        };
        votes
            .into_iter()
            .max_by(|(a, va), (b, vb)| va.cmp(vb).then(rank(b).cmp(&rank(a))))
            .map(|(name, _)| name.to_owned())
    }

    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(consumer_subscription_topics(&m.metadata(protocol))?);
        }
        Some(topics)
    }

    fn join_response(&self, member_id: &str) -> JoinGroupResponse {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id {
            let protocol = self.protocol.as_deref().unwrap_or_default();
            self.members
                .values()
                .map(|m| JoinGroupMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata(protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            error_code: NONE,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader,
            skip_assignment: false,
            member_id: member_id.to_owned(),
            members,
        }
    }

    fn sync_response(&self, assignment: Bytes) -> SyncGroupResponse {
        SyncGroupResponse {
            error_code: NONE,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment,
        }
    }

    /// The earliest time something in this group times out.
    fn deadline_ms(&self) -> Option<i64> {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.kept_alive())
            .map(Member::session_deadline_ms);
        let pending = self.pending_members.values().copied();
        sessions.chain(pending).chain(self.join_deadline_ms).min()
    }

    // ---- records ----

    fn store_group(&self, cx: &mut Cx<'_>) {
        let value = GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.current_state_timestamp_ms.unwrap_or(-1),
            members: self
                .members
                .values()
                .map(|m| MemberMetadataValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(self.protocol.as_deref().unwrap_or_default()),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        };
        cx.effects.records.push(CoordinatorRecord {
            partition: self.record_partition(cx.config),
            key: GroupMetadataKey {
                group: self.group_id.clone(),
            }
            .encode(),
            value: Some(value.encode()),
        });
    }

    fn group_tombstone(&self, cx: &mut Cx<'_>) {
        cx.effects.records.push(CoordinatorRecord {
            partition: self.record_partition(cx.config),
            key: GroupMetadataKey {
                group: self.group_id.clone(),
            }
            .encode(),
            value: None,
        });
    }

    fn offset_record(
        &self,
        tp: &TopicPartition,
        value: Option<&OffsetCommitValue>,
        cx: &mut Cx<'_>,
    ) {
        cx.effects.records.push(CoordinatorRecord {
            partition: self.record_partition(cx.config),
            key: OffsetCommitKey {
                group: self.group_id.clone(),
                topic: tp.topic.clone(),
                partition: tp.partition,
            }
            .encode(),
            value: value.map(OffsetCommitValue::encode),
        });
    }

    // ---- membership ----

    fn add_member_and_rebalance(&mut self, member: Member, cx: &mut Cx<'_>) {
        if self.state == GroupState::PreparingRebalance {
            if let Some(delay) = &mut self.initial_delay {
                delay.new_member_added = true;
            }
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.members.insert(member.member_id.clone(), member);
        self.maybe_prepare_rebalance(cx);
        self.try_complete_join(cx);
    }

    fn update_member_and_rebalance(
        &mut self,
        member_id: &str,
        req: &JoinGroupRequest,
        waiter: WaiterId,
        cx: &mut Cx<'_>,
    ) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.protocols = req.protocols.clone();
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.session_timeout_ms = req.session_timeout_ms;
            m.last_heartbeat_ms = cx.now_ms;
            if let Some(old) = m.join_waiter.replace(waiter) {
                // A second JoinGroup while the first is parked: the client gave up on
                // the first one; answer it so the handler does not leak it.
                cx.effects.join_responses.push((
                    old,
                    join_error(member_id, ResponseError::RebalanceInProgress),
                ));
            }
        }
        self.maybe_prepare_rebalance(cx);
        self.try_complete_join(cx);
    }

    /// Removes a member, answering whatever it has parked with UNKNOWN_MEMBER_ID.
    fn remove_member(&mut self, member_id: &str, cx: &mut Cx<'_>) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(w) = m.join_waiter {
            cx.effects
                .join_responses
                .push((w, join_error(member_id, ResponseError::UnknownMemberId)));
        }
        if let Some(w) = m.sync_waiter {
            cx.effects
                .sync_responses
                .push((w, sync_error(ResponseError::UnknownMemberId)));
        }
        if let Some(instance) = &m.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
    }

    fn remove_member_and_update_group(&mut self, member_id: &str, cx: &mut Cx<'_>) {
        self.remove_member(member_id, cx);
        match self.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(cx)
            }
            GroupState::PreparingRebalance => self.try_complete_join(cx),
        }
    }

    fn maybe_prepare_rebalance(&mut self, cx: &mut Cx<'_>) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        ) {
            self.prepare_rebalance(cx);
        }
    }

    fn prepare_rebalance(&mut self, cx: &mut Cx<'_>) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_assignments(ResponseError::RebalanceInProgress, cx);
        }
        let rebalance_timeout_ms = self.rebalance_timeout_ms();
        let delay_ms = i64::from(cx.config.initial_rebalance_delay_ms);
        if self.state == GroupState::Empty && delay_ms > 0 {
            self.initial_delay = Some(InitialDelay {
                remaining_ms: (rebalance_timeout_ms - delay_ms).max(0),
                new_member_added: false,
            });
            self.join_deadline_ms = Some(cx.now_ms + delay_ms);
        } else {
            self.initial_delay = None;
            self.join_deadline_ms = Some(cx.now_ms + rebalance_timeout_ms);
        }
        self.transition(GroupState::PreparingRebalance, cx.now_ms);
        self.try_complete_join(cx);
    }

    fn reset_assignments(&mut self, error: ResponseError, cx: &mut Cx<'_>) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(w) = m.sync_waiter.take() {
                // Its session restarts now: it waited on the group, not on itself.
                m.last_heartbeat_ms = cx.now_ms;
                cx.effects.sync_responses.push((w, sync_error(error)));
            }
        }
    }

    fn try_complete_join(&mut self, cx: &mut Cx<'_>) {
        if self.state == GroupState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.all_members_joined()
        {
            self.complete_join(cx);
        }
    }

    /// Kafka's `onCompleteJoin`: members that did not rejoin are dropped, the next
    /// generation starts and every parked JoinGroup is answered.
    fn complete_join(&mut self, cx: &mut Cx<'_>) {
        self.join_deadline_ms = None;
        self.initial_delay = None;
        let not_rejoined: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in not_rejoined {
            self.remove_member(&id, cx);
        }
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.subscribed_topics = None;
            self.transition(GroupState::Empty, cx.now_ms);
            self.store_group(cx);
            return;
        }
        self.protocol = self.select_protocol();
        self.subscribed_topics = self.compute_subscribed_topics();
        self.transition(GroupState::CompletingRebalance, cx.now_ms);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let response = self.join_response(&id);
            if let Some(m) = self.members.get_mut(&id) {
                m.last_heartbeat_ms = cx.now_ms;
                if let Some(w) = m.join_waiter.take() {
                    cx.effects.join_responses.push((w, response));
                }
            }
        }
    }

    /// Kafka's `replaceStaticMember`: the instance id moves to a new member id and the
    /// old id's parked requests are fenced.
    fn replace_static_member(
        &mut self,
        instance: &str,
        old_id: &str,
        new_id: &str,
        cx: &mut Cx<'_>,
    ) {
        let Some(mut m) = self.members.remove(old_id) else {
            return;
        };
        if let Some(w) = m.join_waiter.take() {
            cx.effects
                .join_responses
                .push((w, join_error(old_id, ResponseError::FencedInstanceId)));
        }
        if let Some(w) = m.sync_waiter.take() {
            cx.effects
                .sync_responses
                .push((w, sync_error(ResponseError::FencedInstanceId)));
        }
        m.member_id = new_id.to_owned();
        m.last_heartbeat_ms = cx.now_ms;
        self.members.insert(new_id.to_owned(), m);
        self.static_members
            .insert(instance.to_owned(), new_id.to_owned());
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_owned());
        }
    }

    // ---- timers ----

    fn on_deadline(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now_ms;
        let expired_pending: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired_pending {
            self.pending_members.remove(&id);
            if self.state == GroupState::PreparingRebalance {
                self.try_complete_join(cx);
            }
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.kept_alive() && m.session_deadline_ms() <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "member session expired");
            self.remove_member_and_update_group(&id, cx);
        }
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let Some(deadline) = self.join_deadline_ms else {
            return;
        };
        if deadline > now {
            return;
        }
        match &mut self.initial_delay {
            Some(delay) if delay.new_member_added && delay.remaining_ms > 0 => {
                // Kafka's InitialDelayedJoin: members are still arriving, wait another
                // delay (bounded by what is left of the rebalance timeout).
                let step = i64::from(cx.config.initial_rebalance_delay_ms).min(delay.remaining_ms);
                delay.remaining_ms -= step;
                delay.new_member_added = false;
                self.join_deadline_ms = Some(now + step);
            }
            _ => self.complete_join(cx),
        }
    }

    /// Offsets past retention (Kafka's `removeExpiredOffsets`); returns them.
    fn expired_offsets(&self, config: &GroupConfig, now_ms: i64) -> Vec<TopicPartition> {
        let retention = config.offsets_retention_ms;
        let is_expired = |v: &OffsetCommitValue, base_ms: i64| match v.expire_timestamp_ms {
            Some(expire) => now_ms >= expire,
            None => now_ms - base_ms >= retention,
        };
        let empty = self.state == GroupState::Empty;
        self.offsets
            .iter()
            .map(|(tp, c)| (tp, &c.value))
            .filter(|(tp, v)| match (&self.protocol_type, empty) {
                // A group that used membership: retention counts from when it became Empty.
                (Some(_), true) => is_expired(
                    v,
                    self.current_state_timestamp_ms
                        .unwrap_or(v.commit_timestamp_ms),
                ),
                // A Stable consumer group keeps the offsets of the topics it subscribes to.
                (Some(pt), false)
                    if pt == CONSUMER_PROTOCOL_TYPE && self.state == GroupState::Stable =>
                {
                    match &self.subscribed_topics {
                        Some(topics) => {
                            !topics.contains(&tp.topic) && is_expired(v, v.commit_timestamp_ms)
                        }
                        None => false,
                    }
                }
                // Offsets committed without membership: retention counts from the commit.
                (None, _) => is_expired(v, v.commit_timestamp_ms),
                _ => false,
            })
            .map(|(tp, _)| tp.clone())
            .collect()
    }
}

/// The group coordinator for the groups of the `__consumer_offsets` partitions this
/// broker leads. Pure: see the module docs for the effects contract.
#[derive(Debug)]
pub struct GroupCoordinator {
    config: GroupConfig,
    groups: BTreeMap<String, GroupMetadata>,
    /// (deadline, group) for every group that has one; `deadline_of` mirrors it.
    deadlines: BTreeSet<(i64, String)>,
    deadline_of: HashMap<String, i64>,
    next_offsets_expiration_ms: Option<i64>,
    /// Counts commit records in write/replay order (see [`CommittedOffset`]).
    commit_seq: u64,
}

impl GroupCoordinator {
    /// The JoinGroup/SyncGroup calls parked in this coordinator's groups.
    pub fn parked_waiters(&self) -> Vec<WaiterId> {
        self.groups
            .values()
            .flat_map(|g| g.members.values())
            .flat_map(|m| [m.join_waiter, m.sync_waiter])
            .flatten()
            .collect()
    }

    pub fn new(config: GroupConfig) -> Self {
        GroupCoordinator {
            config,
            groups: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            deadline_of: HashMap::new(),
            next_offsets_expiration_ms: None,
            commit_seq: 0,
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The state of a group, `None` when the coordinator does not know it.
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|g| g.state)
    }

    /// The generation of a group, `None` when unknown.
    pub fn group_generation(&self, group_id: &str) -> Option<i32> {
        self.groups.get(group_id).map(|g| g.generation)
    }

    /// When `tick` must be called next.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let group = self.deadlines.first().map(|(d, _)| *d);
        group
            .into_iter()
            .chain(self.next_offsets_expiration_ms)
            .min()
    }

    /// After a call touched `group_id`: drop it if it died or never held anything,
    /// re-index its deadline, and fill in the next deadline.
    fn finish(&mut self, touched: &[&str], now_ms: i64, mut effects: Effects) -> Effects {
        if self.next_offsets_expiration_ms.is_none() {
            self.next_offsets_expiration_ms =
                Some(now_ms + self.config.offsets_retention_check_interval_ms);
        }
        for &group_id in touched {
            let mut remove = false;
            let mut deadline = None;
            if let Some(g) = self.groups.get(group_id) {
                // A group that never completed a generation, has no members and no
                // offsets was never written anywhere: forget it.
                remove = g.state == GroupState::Dead
                    || (g.state == GroupState::Empty
                        && g.generation == 0
                        && g.members.is_empty()
                        && g.pending_members.is_empty()
                        && !g.has_offsets());
                deadline = g.deadline_ms();
            }
            if remove {
                self.groups.remove(group_id);
                deadline = None;
            }
            if let Some(old) = self.deadline_of.remove(group_id) {
                self.deadlines.remove(&(old, group_id.to_owned()));
            }
            if let Some(d) = deadline {
                self.deadline_of.insert(group_id.to_owned(), d);
                self.deadlines.insert((d, group_id.to_owned()));
            }
        }
        effects.next_deadline_ms = self.next_deadline_ms();
        effects
    }

    /// JoinGroup. The response arrives in the returned effects or in those of a later
    /// call, keyed by `waiter`.
    pub fn join_group(&mut self, req: JoinGroupRequest, waiter: WaiterId, now_ms: i64) -> Effects {
        let mut effects = Effects::default();
        let group_id = req.group_id.clone();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        if let Err((member_id, error)) = Self::join_inner(&mut self.groups, req, waiter, &mut cx) {
            // The response for errors found before the member was parked.
            cx.effects
                .join_responses
                .push((waiter, join_error(&member_id, error)));
        }
        self.finish(&[&group_id], now_ms, effects)
    }

    fn join_inner(
        groups: &mut BTreeMap<String, GroupMetadata>,
        req: JoinGroupRequest,
        waiter: WaiterId,
        cx: &mut Cx<'_>,
    ) -> Result<(), (String, ResponseError)> {
        let member_id = req.member_id.clone();
        let err = |e: ResponseError| (member_id.clone(), e);
        if req.group_id.is_empty() {
            return Err(err(ResponseError::InvalidGroupId));
        }
        if req.session_timeout_ms < cx.config.min_session_timeout_ms
            || req.session_timeout_ms > cx.config.max_session_timeout_ms
        {
            return Err(err(ResponseError::InvalidSessionTimeout));
        }
        let unknown = req.member_id.is_empty();
        if !unknown && !groups.contains_key(&req.group_id) {
            return Err(err(ResponseError::UnknownMemberId));
        }
        let group = groups
            .entry(req.group_id.clone())
            .or_insert_with(|| GroupMetadata::new(req.group_id.clone()));
        if group.state == GroupState::Dead {
            return Err(err(ResponseError::CoordinatorNotAvailable));
        }
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            return Err(err(ResponseError::InconsistentGroupProtocol));
        }
        let instance = req.group_instance_id.clone();
        let known_static = instance
            .as_ref()
            .and_then(|i| group.static_members.get(i))
            .cloned();
        if unknown {
            if known_static.is_none()
                && group.members.len() + group.pending_members.len() >= cx.config.group_size_max
            {
                return Err(err(ResponseError::GroupMaxSizeReached));
            }
            let prefix = instance.as_deref().unwrap_or(&req.client_id);
            let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
            if let (Some(instance), Some(old_id)) = (instance.as_deref(), known_static) {
                Self::static_rejoin(group, instance, &old_id, &new_id, &req, waiter, cx);
            } else if instance.is_none() && req.require_known_member_id {
                group.pending_members.insert(
                    new_id.clone(),
                    cx.now_ms + i64::from(req.session_timeout_ms),
                );
                return Err((new_id, ResponseError::MemberIdRequired));
            } else {
                group.add_member_and_rebalance(new_member(&req, new_id, waiter, cx.now_ms), cx);
            }
            return Ok(());
        }
        if group.pending_members.remove(&member_id).is_some() {
            group.add_member_and_rebalance(new_member(&req, member_id, waiter, cx.now_ms), cx);
            return Ok(());
        }
        if group.is_static_member_fenced(instance.as_deref(), &member_id) {
            return Err(err(ResponseError::FencedInstanceId));
        }
        let Some(member) = group.members.get(&member_id) else {
            return Err(err(ResponseError::UnknownMemberId));
        };
        let same_protocols = member.protocols == req.protocols;
        match group.state {
            GroupState::PreparingRebalance => {
                group.update_member_and_rebalance(&member_id, &req, waiter, cx)
            }
            GroupState::CompletingRebalance if same_protocols => {
                // The member lost the JoinGroup response: send it again.
                cx.effects
                    .join_responses
                    .push((waiter, group.join_response(&member_id)));
            }
            GroupState::Stable if same_protocols && group.leader.as_deref() != Some(&member_id) => {
                cx.effects
                    .join_responses
                    .push((waiter, group.join_response(&member_id)));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.update_member_and_rebalance(&member_id, &req, waiter, cx)
            }
            GroupState::Empty | GroupState::Dead => {
                return Err(err(ResponseError::UnknownMemberId));
            }
        }
        Ok(())
    }

    /// Kafka's `updateStaticMemberAndRebalance`: a static member restarted and joined
    /// without its member id. In a Stable group whose protocol choice does not change it
    /// takes over the old member's place without a rebalance.
    fn static_rejoin(
        group: &mut GroupMetadata,
        instance: &str,
        old_id: &str,
        new_id: &str,
        req: &JoinGroupRequest,
        waiter: WaiterId,
        cx: &mut Cx<'_>,
    ) {
        group.replace_static_member(instance, old_id, new_id, cx);
        if let Some(m) = group.members.get_mut(new_id) {
            m.protocols = req.protocols.clone();
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.session_timeout_ms = req.session_timeout_ms;
            m.client_id = req.client_id.clone();
            m.client_host = req.client_host.clone();
        }
        match group.state {
            GroupState::Stable if group.select_protocol() == group.protocol => {
                group.store_group(cx);
                let mut response = group.join_response(new_id);
                response.skip_assignment = group.leader.as_deref() == Some(new_id);
                cx.effects.join_responses.push((waiter, response));
            }
            GroupState::Stable => {
                // The protocol choice would change: rebalance so that the choice and the
                // assignments agree again.
                if let Some(m) = group.members.get_mut(new_id) {
                    m.join_waiter = Some(waiter);
                }
                group.prepare_rebalance(cx);
            }
            GroupState::CompletingRebalance => {
                // The leader may already be assigning to the old member id.
                if let Some(m) = group.members.get_mut(new_id) {
                    m.join_waiter = Some(waiter);
                }
                group.prepare_rebalance(cx);
            }
            GroupState::PreparingRebalance => {
                if let Some(m) = group.members.get_mut(new_id) {
                    m.join_waiter = Some(waiter);
                }
                group.try_complete_join(cx);
            }
            GroupState::Empty | GroupState::Dead => {
                // A group with a static member is never Empty or Dead.
                cx.effects.join_responses.push((
                    waiter,
                    join_error(new_id, ResponseError::UnknownServerError),
                ));
            }
        }
    }

    /// SyncGroup. Followers wait for the leader's assignment.
    pub fn sync_group(&mut self, req: SyncGroupRequest, waiter: WaiterId, now_ms: i64) -> Effects {
        let mut effects = Effects::default();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        let result = match self.groups.get_mut(&req.group_id) {
            None => Err(ResponseError::UnknownMemberId),
            Some(group) => Self::sync_inner(group, &req, waiter, &mut cx),
        };
        if let Err(error) = result {
            cx.effects.sync_responses.push((waiter, sync_error(error)));
        }
        self.finish(&[&req.group_id], now_ms, effects)
    }

    fn sync_inner(
        group: &mut GroupMetadata,
        req: &SyncGroupRequest,
        waiter: WaiterId,
        cx: &mut Cx<'_>,
    ) -> Result<(), ResponseError> {
        if group.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if group.is_static_member_fenced(req.group_instance_id.as_deref(), &req.member_id) {
            return Err(ResponseError::FencedInstanceId);
        }
        if !group.members.contains_key(&req.member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        if req.generation_id != group.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        let type_mismatch = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_ref() != Some(t));
        let name_mismatch = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol.as_ref() != Some(n));
        if type_mismatch || name_mismatch {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => Err(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            GroupState::CompletingRebalance => {
                if let Some(m) = group.members.get_mut(&req.member_id) {
                    if let Some(old) = m.sync_waiter.replace(waiter) {
                        cx.effects
                            .sync_responses
                            .push((old, sync_error(ResponseError::RebalanceInProgress)));
                    }
                }
                if group.leader.as_deref() == Some(req.member_id.as_str()) {
                    let assignments: HashMap<&str, &Bytes> = req
                        .assignments
                        .iter()
                        .map(|(id, a)| (id.as_str(), a))
                        .collect();
                    for m in group.members.values_mut() {
                        m.assignment = assignments
                            .get(m.member_id.as_str())
                            .map(|a| (*a).clone())
                            .unwrap_or_default();
                    }
                    group.store_group(cx);
                    group.transition(GroupState::Stable, cx.now_ms);
                    let ids: Vec<String> = group.members.keys().cloned().collect();
                    for id in ids {
                        let Some(m) = group.members.get_mut(&id) else {
                            continue;
                        };
                        m.last_heartbeat_ms = cx.now_ms;
                        let assignment = m.assignment.clone();
                        if let Some(w) = m.sync_waiter.take() {
                            let response = group.sync_response(assignment);
                            cx.effects.sync_responses.push((w, response));
                        }
                    }
                }
                Ok(())
            }
            GroupState::Stable => {
                let assignment = group
                    .members
                    .get_mut(&req.member_id)
                    .map(|m| {
                        m.last_heartbeat_ms = cx.now_ms;
                        m.assignment.clone()
                    })
                    .unwrap_or_default();
                cx.effects
                    .sync_responses
                    .push((waiter, group.sync_response(assignment)));
                Ok(())
            }
        }
    }

    /// Heartbeat: returns the error code.
    pub fn heartbeat(&mut self, req: &HeartbeatRequest, now_ms: i64) -> (i16, Effects) {
        let error = match self.groups.get_mut(&req.group_id) {
            None => code(ResponseError::UnknownMemberId),
            Some(group) => Self::heartbeat_inner(group, req, now_ms),
        };
        let effects = self.finish(&[&req.group_id], now_ms, Effects::default());
        (error, effects)
    }

    fn heartbeat_inner(group: &mut GroupMetadata, req: &HeartbeatRequest, now_ms: i64) -> i16 {
        if group.state == GroupState::Dead {
            return code(ResponseError::CoordinatorNotAvailable);
        }
        if group.is_static_member_fenced(req.group_instance_id.as_deref(), &req.member_id) {
            return code(ResponseError::FencedInstanceId);
        }
        let generation = group.generation;
        let state = group.state;
        let Some(member) = group.members.get_mut(&req.member_id) else {
            return code(ResponseError::UnknownMemberId);
        };
        if req.generation_id != generation {
            return code(ResponseError::IllegalGeneration);
        }
        match state {
            GroupState::Empty | GroupState::Dead => code(ResponseError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.last_heartbeat_ms = now_ms;
                NONE
            }
            GroupState::PreparingRebalance => {
                member.last_heartbeat_ms = now_ms;
                code(ResponseError::RebalanceInProgress)
            }
        }
    }

    /// LeaveGroup (v3+ batch form; v0-v2 send one member).
    pub fn leave_group(
        &mut self,
        req: &LeaveGroupRequest,
        now_ms: i64,
    ) -> (LeaveGroupResponse, Effects) {
        let mut effects = Effects::default();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        let response = match self.groups.get_mut(&req.group_id) {
            None => LeaveGroupResponse {
                error_code: NONE,
                members: req
                    .members
                    .iter()
                    .map(|m| (m.clone(), code(ResponseError::UnknownMemberId)))
                    .collect(),
            },
            Some(group) if group.state == GroupState::Dead => LeaveGroupResponse {
                error_code: code(ResponseError::CoordinatorNotAvailable),
                members: Vec::new(),
            },
            Some(group) => {
                let mut members = Vec::with_capacity(req.members.len());
                for leaving in &req.members {
                    let id = if leaving.member_id.is_empty() {
                        leaving
                            .group_instance_id
                            .as_ref()
                            .and_then(|i| group.static_members.get(i))
                            .cloned()
                            .unwrap_or_default()
                    } else {
                        leaving.member_id.clone()
                    };
                    let error = if group
                        .is_static_member_fenced(leaving.group_instance_id.as_deref(), &id)
                    {
                        code(ResponseError::FencedInstanceId)
                    } else if group.pending_members.remove(&id).is_some() {
                        if group.state == GroupState::PreparingRebalance {
                            group.try_complete_join(&mut cx);
                        }
                        NONE
                    } else if group.members.contains_key(&id) {
                        group.remove_member_and_update_group(&id, &mut cx);
                        NONE
                    } else {
                        code(ResponseError::UnknownMemberId)
                    };
                    members.push((leaving.clone(), error));
                }
                LeaveGroupResponse {
                    error_code: NONE,
                    members,
                }
            }
        };
        (response, self.finish(&[&req.group_id], now_ms, effects))
    }

    /// OffsetCommit, group-managed (generation and member checked) or simple
    /// (generation -1, allowed while the group has no members).
    pub fn offset_commit(
        &mut self,
        req: &OffsetCommitRequest,
        now_ms: i64,
    ) -> (OffsetCommitResponse, Effects) {
        let mut effects = Effects::default();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        let all = |error: ResponseError| OffsetCommitResponse {
            partitions: req
                .partitions
                .iter()
                .map(|p| (p.partition.clone(), code(error)))
                .collect(),
        };
        if req.group_id.is_empty() {
            return (all(ResponseError::InvalidGroupId), effects);
        }
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id >= 0 {
                return (all(ResponseError::IllegalGeneration), effects);
            }
            self.groups.insert(
                req.group_id.clone(),
                GroupMetadata::new(req.group_id.clone()),
            );
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return (all(ResponseError::UnknownServerError), effects);
        };
        let check = if group.state == GroupState::Dead {
            Err(ResponseError::CoordinatorNotAvailable)
        } else if req.generation_id < 0 && group.state == GroupState::Empty {
            Ok(())
        } else if group.is_static_member_fenced(req.group_instance_id.as_deref(), &req.member_id) {
            Err(ResponseError::FencedInstanceId)
        } else if !group.members.contains_key(&req.member_id) {
            Err(ResponseError::UnknownMemberId)
        } else if req.generation_id != group.generation {
            Err(ResponseError::IllegalGeneration)
        } else if group.state == GroupState::CompletingRebalance {
            Err(ResponseError::RebalanceInProgress)
        } else {
            if let Some(m) = group.members.get_mut(&req.member_id) {
                m.last_heartbeat_ms = now_ms;
            }
            Ok(())
        };
        let response = match check {
            Err(error) => all(error),
            Ok(()) => {
                let expire_timestamp_ms =
                    (req.retention_time_ms >= 0).then(|| now_ms + req.retention_time_ms);
                let mut partitions = Vec::with_capacity(req.partitions.len());
                for p in &req.partitions {
                    let metadata = p.metadata.clone().unwrap_or_default();
                    if metadata.len() > cx.config.offset_metadata_bytes_max {
                        partitions.push((
                            p.partition.clone(),
                            code(ResponseError::OffsetMetadataTooLarge),
                        ));
                        continue;
                    }
                    let value = OffsetCommitValue {
                        offset: p.offset,
                        leader_epoch: if expire_timestamp_ms.is_some() {
                            -1
                        } else {
                            p.leader_epoch
                        },
                        metadata,
                        commit_timestamp_ms: now_ms,
                        expire_timestamp_ms,
                    };
                    group.offset_record(&p.partition, Some(&value), &mut cx);
                    self.commit_seq += 1;
                    let committed = CommittedOffset {
                        value,
                        seq: self.commit_seq,
                    };
                    group.offsets.insert(p.partition.clone(), committed);
                    partitions.push((p.partition.clone(), NONE));
                }
                OffsetCommitResponse { partitions }
            }
        };
        (response, self.finish(&[&req.group_id], now_ms, effects))
    }

    /// OffsetFetch for one group (the v8+ multi-group form calls this per group).
    pub fn offset_fetch(&self, req: &OffsetFetchRequest) -> OffsetFetchResponse {
        let group = self.groups.get(&req.group_id);
        let entry = |tp: &TopicPartition, c: Option<&CommittedOffset>| {
            if req.require_stable && group.is_some_and(|g| g.has_pending_txn_offset(tp)) {
                return OffsetFetchPartition {
                    partition: tp.clone(),
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                    error_code: code(ResponseError::UnstableOffsetCommit),
                };
            }
            let v = c.map(|c| &c.value);
            OffsetFetchPartition {
                partition: tp.clone(),
                offset: v.map_or(-1, |v| v.offset),
                leader_epoch: v.map_or(-1, |v| v.leader_epoch),
                metadata: v.map(|v| v.metadata.clone()).unwrap_or_default(),
                error_code: NONE,
            }
        };
        let partitions = match &req.partitions {
            Some(wanted) => wanted
                .iter()
                .map(|tp| entry(tp, group.and_then(|g| g.offsets.get(tp))))
                .collect(),
            None => group
                .map(|g| g.offsets.iter().map(|(tp, v)| entry(tp, Some(v))).collect())
                .unwrap_or_default(),
        };
        OffsetFetchResponse {
            error_code: NONE,
            partitions,
        }
    }

    /// DescribeGroups. An unknown group is described as Dead with no error, as Kafka
    /// does before DescribeGroups v6 (the handler maps it to GROUP_ID_NOT_FOUND for v6+).
    pub fn describe_groups(&self, group_ids: &[String]) -> Vec<DescribedGroup> {
        group_ids
            .iter()
            .map(|id| match self.groups.get(id) {
                None => DescribedGroup {
                    group_id: id.clone(),
                    error_code: NONE,
                    state: GroupState::Dead.name().to_owned(),
                    protocol_type: String::new(),
                    protocol_data: String::new(),
                    members: Vec::new(),
                },
                Some(g) => {
                    let stable = g.state == GroupState::Stable;
                    let protocol = g.protocol.clone().unwrap_or_default();
                    DescribedGroup {
                        group_id: id.clone(),
                        error_code: NONE,
                        state: g.state.name().to_owned(),
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocol_data: if stable {
                            protocol.clone()
                        } else {
                            String::new()
                        },
                        members: g
                            .members
                            .values()
                            .map(|m| DescribedMember {
                                member_id: m.member_id.clone(),
                                group_instance_id: m.group_instance_id.clone(),
                                client_id: m.client_id.clone(),
                                client_host: m.client_host.clone(),
                                metadata: if stable {
                                    m.metadata(&protocol)
                                } else {
                                    Bytes::new()
                                },
                                assignment: if stable {
                                    m.assignment.clone()
                                } else {
                                    Bytes::new()
                                },
                            })
                            .collect(),
                    }
                }
            })
            .collect()
    }

    /// ListGroups, optionally filtered by state names (v4+; empty: all).
    pub fn list_groups(&self, states: &[String]) -> Vec<ListedGroup> {
        self.groups
            .values()
            .filter(|g| {
                states.is_empty()
                    || states
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state.name()))
            })
            .map(|g| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.name().to_owned(),
            })
            .collect()
    }

    /// DeleteGroups: only Empty groups; writes tombstones for their offsets and metadata.
    pub fn delete_groups(
        &mut self,
        group_ids: &[String],
        now_ms: i64,
    ) -> (Vec<(String, i16)>, Effects) {
        let mut effects = Effects::default();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        let mut results = Vec::with_capacity(group_ids.len());
        for id in group_ids {
            let error = match self.groups.get_mut(id) {
                None => code(ResponseError::GroupIdNotFound),
                Some(g) if g.state == GroupState::Dead => code(ResponseError::GroupIdNotFound),
                Some(g) if g.state == GroupState::Empty => {
                    let tps: Vec<TopicPartition> = g.offsets.keys().cloned().collect();
                    for tp in &tps {
                        g.offset_record(tp, None, &mut cx);
                    }
                    g.offsets.clear();
                    g.pending_txn_offsets.clear();
                    // Kafka writes no group tombstone for generation 0: such a group
                    // only ever stored offsets.
                    if g.generation > 0 {
                        g.group_tombstone(&mut cx);
                    }
                    g.transition(GroupState::Dead, now_ms);
                    NONE
                }
                Some(_) => code(ResponseError::NonEmptyGroup),
            };
            results.push((id.clone(), error));
        }
        let touched: Vec<&str> = group_ids.iter().map(String::as_str).collect();
        let effects = self.finish(&touched, now_ms, effects);
        (results, effects)
    }

    /// OffsetDelete: not for topics a Stable (or rebalancing) consumer group subscribes to.
    pub fn offset_delete(
        &mut self,
        group_id: &str,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> (OffsetDeleteResponse, Effects) {
        let mut effects = Effects::default();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        let response = match self.groups.get_mut(group_id) {
            None => OffsetDeleteResponse {
                error_code: code(ResponseError::GroupIdNotFound),
                partitions: Vec::new(),
            },
            Some(g) if g.state == GroupState::Dead => OffsetDeleteResponse {
                error_code: code(ResponseError::GroupIdNotFound),
                partitions: Vec::new(),
            },
            Some(g)
                if g.state != GroupState::Empty
                    && g.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) =>
            {
                OffsetDeleteResponse {
                    error_code: code(ResponseError::NonEmptyGroup),
                    partitions: Vec::new(),
                }
            }
            Some(g) => {
                let subscribed = if g.state == GroupState::Empty {
                    BTreeSet::new()
                } else {
                    g.subscribed_topics.clone().unwrap_or_default()
                };
                let mut out = Vec::with_capacity(partitions.len());
                for tp in partitions {
                    if subscribed.contains(&tp.topic) {
                        out.push((tp.clone(), code(ResponseError::GroupSubscribedToTopic)));
                        continue;
                    }
                    if g.remove_offsets(tp) {
                        g.offset_record(tp, None, &mut cx);
                    }
                    out.push((tp.clone(), NONE));
                }
                OffsetDeleteResponse {
                    error_code: NONE,
                    partitions: out,
                }
            }
        };
        (response, self.finish(&[group_id], now_ms, effects))
    }

    /// Runs every timer due at `now_ms`: pending-member and session expiry, rebalance
    /// timeouts and initial delays, and (every `offsets.retention.check.interval.ms`)
    /// offset expiration.
    pub fn tick(&mut self, now_ms: i64) -> Effects {
        let mut effects = Effects::default();
        let due: Vec<String> = self
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now_ms)
            .map(|(_, g)| g.clone())
            .collect();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        for id in &due {
            if let Some(g) = self.groups.get_mut(id) {
                g.on_deadline(&mut cx);
            }
        }
        let mut touched: Vec<String> = due;
        if self.next_offsets_expiration_ms.is_some_and(|t| t <= now_ms) {
            for g in self.groups.values_mut() {
                let expired = g.expired_offsets(cx.config, now_ms);
                for tp in &expired {
                    g.remove_offsets(tp);
                    g.offset_record(tp, None, &mut cx);
                }
                if !expired.is_empty() {
                    tracing::info!(group = %g.group_id, count = expired.len(), "expired offsets removed");
                }
                if g.state == GroupState::Empty && !g.has_offsets() && g.pending_members.is_empty()
                {
                    if g.generation > 0 {
                        g.group_tombstone(&mut cx);
                    }
                    g.transition(GroupState::Dead, now_ms);
                    touched.push(g.group_id.clone());
                }
            }
            self.next_offsets_expiration_ms =
                Some(now_ms + self.config.offsets_retention_check_interval_ms);
        }
        let touched_refs: Vec<&str> = touched.iter().map(String::as_str).collect();
        self.finish(&touched_refs, now_ms, effects)
    }

    /// Rebuilds groups and committed offsets from a `__consumer_offsets` partition's
    /// records (key, value; `None` is a tombstone), oldest first, none of them
    /// transactional. See [`GroupCoordinator::load_entries`].
    pub fn load<'a, I>(&mut self, records: I, now_ms: i64) -> Result<(), RecordError>
    where
        I: IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    {
        self.load_entries(
            records.into_iter().map(|(key, value)| LoadEntry::Record {
                key,
                value,
                producer_id: None,
            }),
            now_ms,
        )
    }

    /// Rebuilds groups and committed offsets from a `__consumer_offsets` partition,
    /// oldest entry first: records (transactional ones with their producer id) and
    /// transaction markers. Groups with members come back Stable with their sessions
    /// restarting at `now_ms`, as in Kafka; transactional offsets whose marker is not in
    /// the log stay pending. On a corrupt record nothing is applied.
    pub fn load_entries<'a, I>(&mut self, entries: I, now_ms: i64) -> Result<(), RecordError>
    where
        I: IntoIterator<Item = LoadEntry<'a>>,
    {
        enum Decoded {
            Offset(
                OffsetCommitKey,
                Option<OffsetCommitValue>,
                Option<ProducerId>,
            ),
            Group(String, Option<GroupMetadataValue>),
            Marker(ProducerId, bool),
        }
        let mut decoded = Vec::new();
        for entry in entries {
            let (key, value, producer_id) = match entry {
                LoadEntry::Record {
                    key,
                    value,
                    producer_id,
                } => (key, value, producer_id),
                LoadEntry::TxnMarker {
                    producer_id,
                    commit,
                } => {
                    decoded.push(Decoded::Marker(producer_id, commit));
                    continue;
                }
            };
            match RecordKey::decode(key)? {
                RecordKey::OffsetCommit(k) => {
                    let v = value.map(OffsetCommitValue::decode).transpose()?;
                    decoded.push(Decoded::Offset(k, v, producer_id));
                }
                RecordKey::GroupMetadata(k) => {
                    let v = value.map(GroupMetadataValue::decode).transpose()?;
                    decoded.push(Decoded::Group(k.group, v));
                }
                RecordKey::Unknown { version } => {
                    tracing::warn!(version, "unknown __consumer_offsets key version; skipped");
                }
            }
        }
        let mut touched = BTreeSet::new();
        for record in decoded {
            match record {
                Decoded::Offset(k, v, producer_id) => {
                    let g = self
                        .groups
                        .entry(k.group.clone())
                        .or_insert_with(|| GroupMetadata::new(k.group.clone()));
                    let tp = TopicPartition::new(k.topic, k.partition);
                    self.commit_seq += 1;
                    let committed = v.map(|value| CommittedOffset {
                        value,
                        seq: self.commit_seq,
                    });
                    match (producer_id, committed) {
                        (Some(pid), Some(c)) => {
                            g.pending_txn_offsets.entry(pid).or_default().insert(tp, c);
                        }
                        (Some(pid), None) => {
                            if let Some(p) = g.pending_txn_offsets.get_mut(&pid) {
                                p.remove(&tp);
                            }
                        }
                        (None, Some(c)) => {
                            g.offsets.insert(tp, c);
                        }
                        (None, None) => {
                            g.offsets.remove(&tp);
                        }
                    }
                    touched.insert(k.group);
                }
                Decoded::Group(id, v) => {
                    let g = self
                        .groups
                        .entry(id.clone())
                        .or_insert_with(|| GroupMetadata::new(id.clone()));
                    let offsets = std::mem::take(&mut g.offsets);
                    let pending = std::mem::take(&mut g.pending_txn_offsets);
                    *g = GroupMetadata::new(id.clone());
                    g.offsets = offsets;
                    g.pending_txn_offsets = pending;
                    if let Some(v) = v {
                        apply_group_value(g, v, now_ms);
                    }
                    touched.insert(id);
                }
                Decoded::Marker(pid, commit) => {
                    for g in self.groups.values_mut() {
                        if g.complete_pending_txn(pid, commit) {
                            touched.insert(g.group_id.clone());
                        }
                    }
                }
            }
        }
        let touched: Vec<&str> = touched.iter().map(String::as_str).collect();
        let _ = self.finish(&touched, now_ms, Effects::default());
        Ok(())
    }

    /// TxnOffsetCommit: the offsets stay invisible (pending) until
    /// [`GroupCoordinator::complete_txn`] sees the transaction's marker. The returned
    /// records must be appended in a transactional batch with the request's producer id
    /// and epoch (the partition's producer state fences stale epochs).
    pub fn txn_offset_commit(
        &mut self,
        req: &TxnOffsetCommitRequest,
        now_ms: i64,
    ) -> (OffsetCommitResponse, Effects) {
        let mut effects = Effects::default();
        let mut cx = Cx {
            config: &self.config,
            now_ms,
            effects: &mut effects,
        };
        let all = |error: ResponseError| OffsetCommitResponse {
            partitions: req
                .partitions
                .iter()
                .map(|p| (p.partition.clone(), code(error)))
                .collect(),
        };
        if req.group_id.is_empty() {
            return (all(ResponseError::InvalidGroupId), effects);
        }
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| GroupMetadata::new(req.group_id.clone()));
        // Kafka's doTxnCommitOffsets: membership is checked only when the producer sent it
        // (TxnOffsetCommit v3+), and the group's state does not matter.
        let check = if group.state == GroupState::Dead {
            Err(ResponseError::CoordinatorNotAvailable)
        } else if group.is_static_member_fenced(req.group_instance_id.as_deref(), &req.member_id) {
            Err(ResponseError::FencedInstanceId)
        } else if !req.member_id.is_empty() && !group.members.contains_key(&req.member_id) {
            Err(ResponseError::UnknownMemberId)
        } else if req.generation_id >= 0 && req.generation_id != group.generation {
            Err(ResponseError::IllegalGeneration)
        } else {
            Ok(())
        };
        let response = match check {
            Err(error) => all(error),
            Ok(()) => {
                let mut partitions = Vec::with_capacity(req.partitions.len());
                for p in &req.partitions {
                    let metadata = p.metadata.clone().unwrap_or_default();
                    if metadata.len() > cx.config.offset_metadata_bytes_max {
                        partitions.push((
                            p.partition.clone(),
                            code(ResponseError::OffsetMetadataTooLarge),
                        ));
                        continue;
                    }
                    let value = OffsetCommitValue {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata,
                        commit_timestamp_ms: now_ms,
                        expire_timestamp_ms: None,
                    };
                    group.offset_record(&p.partition, Some(&value), &mut cx);
                    self.commit_seq += 1;
                    let committed = CommittedOffset {
                        value,
                        seq: self.commit_seq,
                    };
                    group
                        .pending_txn_offsets
                        .entry(req.producer_id)
                        .or_default()
                        .insert(p.partition.clone(), committed);
                    partitions.push((p.partition.clone(), NONE));
                }
                OffsetCommitResponse { partitions }
            }
        };
        (response, self.finish(&[&req.group_id], now_ms, effects))
    }

    /// A transaction's COMMIT (`commit`) or ABORT marker was written to the listed
    /// `__consumer_offsets` partitions: its pending offsets in groups of those
    /// partitions become visible or are dropped (Kafka's `handleTxnCompletion`).
    pub fn complete_txn(
        &mut self,
        producer_id: ProducerId,
        partitions: &[i32],
        commit: bool,
        now_ms: i64,
    ) -> Effects {
        let mut touched = Vec::new();
        for g in self.groups.values_mut() {
            let partition = partition_for(&g.group_id, self.config.offsets_topic_partitions);
            if partitions.contains(&partition) && g.complete_pending_txn(producer_id, commit) {
                touched.push(g.group_id.clone());
            }
        }
        let touched: Vec<&str> = touched.iter().map(String::as_str).collect();
        self.finish(&touched, now_ms, Effects::default())
    }
}

fn new_member(req: &JoinGroupRequest, member_id: String, waiter: WaiterId, now_ms: i64) -> Member {
    Member {
        member_id,
        group_instance_id: req.group_instance_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type.clone(),
        protocols: req.protocols.clone(),
        assignment: Bytes::new(),
        join_waiter: Some(waiter),
        sync_waiter: None,
        last_heartbeat_ms: now_ms,
    }
}

fn apply_group_value(g: &mut GroupMetadata, v: GroupMetadataValue, now_ms: i64) {
    g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
    g.generation = v.generation;
    g.protocol = v.protocol;
    g.leader = v.leader;
    g.current_state_timestamp_ms =
        (v.current_state_timestamp_ms >= 0).then_some(v.current_state_timestamp_ms);
    let protocol = g.protocol.clone().unwrap_or_default();
    for m in v.members {
        if let Some(instance) = &m.group_instance_id {
            g.static_members
                .insert(instance.clone(), m.member_id.clone());
        }
        g.members.insert(
            m.member_id.clone(),
            Member {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocols: vec![JoinGroupProtocol {
                    name: protocol.clone(),
                    metadata: m.subscription,
                }],
                assignment: m.assignment,
                join_waiter: None,
                sync_waiter: None,
                last_heartbeat_ms: now_ms,
            },
        );
    }
    g.state = if g.members.is_empty() {
        GroupState::Empty
    } else {
        GroupState::Stable
    };
    g.subscribed_topics = g.compute_subscribed_topics();
}

#[cfg(test)]
mod tests;
