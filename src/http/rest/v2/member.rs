//! A consumer instance's group membership: the classic consumer protocol run for it by a
//! task of its own, as the Java consumer's coordinator runs it (eager rebalancing).
//!
//! While the instance subscribes to topics, the task joins the group (JoinGroup, protocol
//! type `consumer`, the `range` and `roundrobin` assignors offered in that order, session
//! timeout 45 s, rebalance timeout 300 s), computes every member's assignment with the
//! chosen assignor when it leads, takes its own from SyncGroup, and heartbeats every 3 s. A
//! heartbeat that reports a rebalance, a changed subscription or a pattern that matches
//! other topics makes it join again; before that it commits its positions (with
//! `auto.commit.enable`) and forgets its assignment, as an eager consumer revokes all.
//! With `auto.commit.enable` it also commits its positions every 5 s and when it closes.
//! It leaves the group (LeaveGroup) when the subscription ends, when the instance is
//! deleted, and when the instance expires, which it checks on every tick.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName, consumer_protocol_assignment::TopicPartition,
    join_group_request::JoinGroupRequestProtocol, leave_group_request::MemberIdentity,
    sync_group_request::SyncGroupRequestAssignment,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::time::Instant;

use super::instance::{Instance, Instances, Mode, Tp, rebalanced};
use crate::http::console::Ctx;
use crate::http::console::cluster::metadata;
use crate::http::console::groups::{consumer_assignment, consumer_protocol};
use crate::http::console::wire::not_coordinator;
use crate::http::rest::RestError;

const SESSION_TIMEOUT_MS: i32 = 45_000;
const REBALANCE_TIMEOUT_MS: i32 = 300_000;
const HEARTBEAT: Duration = Duration::from_secs(3);
const AUTO_COMMIT: Duration = Duration::from_secs(5);
/// How often a pattern subscription looks for new topics.
const PATTERN_REFRESH: Duration = Duration::from_secs(5);
const TICK: Duration = Duration::from_millis(250);
/// The assignors offered, the preferred first.
const ASSIGNORS: [&str; 2] = ["range", "roundrobin"];

fn group_id(inst: &Instance) -> GroupId {
    GroupId(StrBytes::from_string(inst.group.clone()))
}

/// The member task of `inst`, until the instance is deleted, expires or the broker closes.
pub(super) async fn run(inst: Arc<Instance>, registry: Weak<Instances>) {
    let mut next_heartbeat = Instant::now();
    let mut next_commit = Instant::now() + AUTO_COMMIT;
    let mut next_pattern = Instant::now();
    loop {
        tokio::select! {
            _ = inst.closed.cancelled() => break,
            _ = inst.wake.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        if inst.expired(crate::clock::now_ms()) {
            tracing::info!(
                "REST consumer instance {} of group {} expired",
                inst.name,
                inst.group
            );
            if let Some(r) = registry.upgrade() {
                r.forget(&inst);
            }
            break;
        }
        let Some(ctx) = inst.ctx() else { return };
        if Instant::now() >= next_pattern {
            next_pattern = Instant::now() + PATTERN_REFRESH;
            if let Err(e) = refresh_pattern(&inst, &ctx).await {
                tracing::debug!("REST consumer {}: pattern: {}", inst.name, e.message);
            }
        }
        let (wanted, joined, rejoin) = {
            let st = inst.lock();
            (st.wanted(), st.joined.clone(), st.rejoin)
        };
        match (wanted, joined) {
            (None, Some(_)) => leave(&inst, &ctx).await,
            (None, None) => {}
            (Some(w), Some(j)) if w == j && !rejoin => {
                if Instant::now() >= next_heartbeat {
                    next_heartbeat = Instant::now() + HEARTBEAT;
                    heartbeat(&inst, &ctx).await;
                }
            }
            (Some(w), _) => {
                let joined = tokio::select! {
                    _ = inst.closed.cancelled() => break,
                    r = join(&inst, &ctx, w) => r,
                };
                if let Err(e) = joined {
                    tracing::debug!("REST consumer {}: join: {}", inst.name, e.message);
                    inst.lock().error = Some((e.status, e.code, e.message));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                next_heartbeat = Instant::now() + HEARTBEAT;
            }
        }
        if inst.settings.auto_commit && Instant::now() >= next_commit {
            next_commit = Instant::now() + AUTO_COMMIT;
            auto_commit(&inst, &ctx).await;
        }
    }
    if let Some(ctx) = inst.ctx() {
        if inst.settings.auto_commit {
            auto_commit(&inst, &ctx).await;
        }
        leave(&inst, &ctx).await;
    }
}

/// Commits the positions that moved since the last automatic commit.
async fn auto_commit(inst: &Instance, ctx: &Ctx) {
    let moved: Vec<(Tp, i64, Option<String>)> = {
        let st = inst.lock();
        st.consumed()
            .into_iter()
            .filter(|(tp, o)| st.auto_committed.get(tp) != Some(o))
            .map(|(tp, o)| (tp, o, None))
            .collect()
    };
    if moved.is_empty() {
        return;
    }
    match inst.commit(ctx, &moved).await {
        Ok(()) => {
            let mut st = inst.lock();
            for (tp, o, _) in moved {
                st.auto_committed.insert(tp, o);
            }
        }
        Err(e) => tracing::debug!("REST consumer {}: auto-commit: {}", inst.name, e.message),
    }
}

/// Matches a pattern subscription against the topics the instance may describe.
pub(super) async fn refresh_pattern(inst: &Instance, ctx: &Ctx) -> Result<(), RestError> {
    if !matches!(inst.lock().mode, Mode::Pattern(..)) {
        return Ok(());
    }
    let md = metadata(ctx, None).await?;
    let names: Vec<String> = md
        .topics
        .iter()
        .filter(|t| t.error_code == 0 && !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    let mut st = inst.lock();
    if let Mode::Pattern(re, matched) = &mut st.mode {
        let mut now: Vec<String> = names.into_iter().filter(|n| re.is_match(n)).collect();
        now.sort();
        *matched = now;
    }
    Ok(())
}

/// A subscription pattern compiled to match whole topic names only (as Java's
/// `Pattern.matcher(name).matches()`).
pub(super) fn anchored(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
}

/// One heartbeat; an answer that ends the generation asks for a new join.
async fn heartbeat(inst: &Instance, ctx: &Ctx) {
    let (generation, member_id) = {
        let st = inst.lock();
        (st.generation, st.member_id.clone())
    };
    let mut req = HeartbeatRequest::default();
    req.group_id = group_id(inst);
    req.generation_id = generation;
    req.member_id = StrBytes::from_string(member_id);
    let resp = inst
        .to_coordinator(
            ctx,
            (ApiKey::Heartbeat, 4),
            &req,
            |r: &HeartbeatResponse| not_coordinator(r.error_code),
        )
        .await;
    let code = match resp {
        Ok(r) => r.error_code,
        Err(e) => {
            tracing::debug!("REST consumer {}: heartbeat: {}", inst.name, e.message);
            return;
        }
    };
    if code == 0 {
        return;
    }
    let mut st = inst.lock();
    if rebalanced(code) {
        st.rejoin = true;
        if code != ResponseError::RebalanceInProgress.code() {
            st.member_id.clear();
            st.generation = -1;
        }
    } else if crate::http::console::wire::denied(code) {
        let e = RestError::kafka(code, None);
        st.error = Some((e.status, e.code, e.message));
    }
}

/// Leaves the group (also a join cut short that got a member id) and forgets the
/// assignment.
async fn leave(inst: &Instance, ctx: &Ctx) {
    let member_id = {
        let mut st = inst.lock();
        st.joined = None;
        revoke(&mut st);
        if st.member_id.is_empty() {
            return;
        }
        std::mem::take(&mut st.member_id)
    };
    let mut m = MemberIdentity::default();
    m.member_id = StrBytes::from_string(member_id);
    m.reason = Some(StrBytes::from_static_str(
        "the consumer instance unsubscribed, was deleted or expired",
    ));
    let mut req = LeaveGroupRequest::default();
    req.group_id = group_id(inst);
    req.members = vec![m];
    let resp = inst
        .to_coordinator(
            ctx,
            (ApiKey::LeaveGroup, 4),
            &req,
            |r: &LeaveGroupResponse| not_coordinator(r.error_code),
        )
        .await;
    if let Err(e) = resp {
        tracing::debug!("REST consumer {}: leave: {}", inst.name, e.message);
    }
}

/// Forgets the assignment and its positions, as an eager consumer revokes all.
fn revoke(st: &mut super::instance::State) {
    st.assignment.clear();
    st.positions.clear();
    st.generation = -1;
}

/// Joins the group with `topics`, computes the assignment when leading, and takes this
/// member's from SyncGroup.
async fn join(inst: &Instance, ctx: &Ctx, topics: Vec<String>) -> Result<(), RestError> {
    if inst.settings.auto_commit && inst.lock().joined.is_some() {
        auto_commit(inst, ctx).await;
    }
    {
        let mut st = inst.lock();
        revoke(&mut st);
        st.joined = None;
    }
    let subscription = encode_subscription(&topics);
    for _ in 0..8 {
        let member_id = inst.lock().member_id.clone();
        let mut req = JoinGroupRequest::default();
        req.group_id = group_id(inst);
        req.session_timeout_ms = SESSION_TIMEOUT_MS;
        req.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
        req.member_id = StrBytes::from_string(member_id);
        req.protocol_type = StrBytes::from_static_str("consumer");
        req.protocols = ASSIGNORS
            .iter()
            .map(|name| {
                let mut p = JoinGroupRequestProtocol::default();
                p.name = StrBytes::from_static_str(name);
                p.metadata = subscription.clone();
                p
            })
            .collect();
        let resp: JoinGroupResponse = inst
            .to_coordinator(
                ctx,
                (ApiKey::JoinGroup, 7),
                &req,
                |r: &JoinGroupResponse| not_coordinator(r.error_code),
            )
            .await?;
        let code = resp.error_code;
        if code == ResponseError::MemberIdRequired.code() {
            inst.lock().member_id = resp.member_id.to_string();
            continue;
        }
        if code == ResponseError::UnknownMemberId.code() {
            inst.lock().member_id.clear();
            continue;
        }
        if retry_join(code) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        if code != 0 {
            return Err(RestError::kafka(code, None));
        }
        let member_id = resp.member_id.to_string();
        let protocol = resp.protocol_name.as_ref().map(|p| p.to_string());
        let assignments = if resp.leader == resp.member_id {
            lead(ctx, protocol.as_deref().unwrap_or("range"), &resp).await?
        } else {
            Vec::new()
        };
        let mut sync = SyncGroupRequest::default();
        sync.group_id = group_id(inst);
        sync.generation_id = resp.generation_id;
        sync.member_id = resp.member_id.clone();
        sync.protocol_type = Some(StrBytes::from_static_str("consumer"));
        sync.protocol_name = protocol.map(StrBytes::from_string);
        sync.assignments = assignments;
        let synced: SyncGroupResponse = inst
            .to_coordinator(
                ctx,
                (ApiKey::SyncGroup, 5),
                &sync,
                |r: &SyncGroupResponse| not_coordinator(r.error_code),
            )
            .await?;
        let code = synced.error_code;
        if code == ResponseError::UnknownMemberId.code() {
            inst.lock().member_id.clear();
            continue;
        }
        if rebalanced(code) || retry_join(code) {
            inst.lock().member_id = member_id;
            continue;
        }
        if code != 0 {
            return Err(RestError::kafka(code, None));
        }
        let mut st = inst.lock();
        st.member_id = member_id;
        st.generation = resp.generation_id;
        st.assignment = decode_assignment(synced.assignment);
        st.joined = Some(topics);
        st.rejoin = false;
        st.error = None;
        return Ok(());
    }
    Err(RestError::kafka(
        ResponseError::RebalanceInProgress.code(),
        Some("the group kept rebalancing while the consumer instance joined".into()),
    ))
}

/// Errors a JoinGroup or SyncGroup is tried again after.
fn retry_join(code: i16) -> bool {
    [
        ResponseError::RebalanceInProgress,
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::CoordinatorLoadInProgress,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// The leader's assignments of every member, with the group's chosen assignor.
async fn lead(
    ctx: &Ctx,
    protocol: &str,
    resp: &JoinGroupResponse,
) -> Result<Vec<SyncGroupRequestAssignment>, RestError> {
    let members: Vec<(String, Vec<String>)> = resp
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                decode_subscription(m.metadata.clone()),
            )
        })
        .collect();
    let topics: Vec<String> = members
        .iter()
        .flat_map(|(_, ts)| ts.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let md = metadata(ctx, Some(&topics)).await?;
    let counts: BTreeMap<String, i32> = md
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| {
            let n = t.name.as_ref()?.0.to_string();
            Some((n, t.partitions.len() as i32))
        })
        .collect();
    let plan = assign(protocol, &members, &counts);
    Ok(members
        .iter()
        .map(|(id, _)| {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = StrBytes::from_string(id.clone());
            a.assignment = encode_assignment(plan.get(id).map_or(&[][..], |v| v.as_slice()));
            a
        })
        .collect())
}

/// Every member's partitions: `range` (each topic's partitions in consecutive runs over the
/// members subscribed to it, sorted by member id, the first ones one more) or `roundrobin`
/// (all partitions, sorted, dealt in turn to the members subscribed to their topic).
pub(super) fn assign(
    protocol: &str,
    members: &[(String, Vec<String>)],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<Tp>> {
    let mut out: BTreeMap<String, Vec<Tp>> = members
        .iter()
        .map(|(m, _)| (m.clone(), Vec::new()))
        .collect();
    let mut sorted: Vec<&(String, Vec<String>)> = members.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let subscribed = |m: &(String, Vec<String>), t: &str| m.1.iter().any(|s| s == t);
    if protocol == "roundrobin" {
        let mut turn = 0usize;
        for (topic, count) in partitions {
            if !sorted.iter().any(|m| subscribed(m, topic)) {
                continue;
            }
            for p in 0..*count {
                while !subscribed(sorted[turn % sorted.len()], topic) {
                    turn += 1;
                }
                let m = &sorted[turn % sorted.len()].0;
                out.entry(m.clone()).or_default().push((topic.clone(), p));
                turn += 1;
            }
        }
        return out;
    }
    for (topic, count) in partitions {
        let takers: Vec<&String> = sorted
            .iter()
            .filter(|m| subscribed(m, topic))
            .map(|m| &m.0)
            .collect();
        if takers.is_empty() {
            continue;
        }
        let n = takers.len() as i32;
        let (each, extra) = (count / n, count % n);
        for (i, m) in takers.into_iter().enumerate() {
            let i = i as i32;
            let start = i * each + i.min(extra);
            let len = each + i32::from(i < extra);
            let tps = (start..start + len).map(|p| (topic.clone(), p));
            out.entry(m.clone()).or_default().extend(tps);
        }
    }
    out
}

/// A member's JoinGroup metadata: ConsumerProtocolSubscription v0 behind its version.
fn encode_subscription(topics: &[String]) -> Bytes {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics
        .iter()
        .map(|t| StrBytes::from_string(t.clone()))
        .collect();
    versioned(&s)
}

/// The topics of a member's subscription; none when it does not decode.
fn decode_subscription(b: Bytes) -> Vec<String> {
    consumer_protocol::<ConsumerProtocolSubscription>(b).map_or_else(Vec::new, |s| {
        s.topics.iter().map(|t| t.to_string()).collect()
    })
}

/// A member's SyncGroup assignment: ConsumerProtocolAssignment v0 behind its version.
fn encode_assignment(tps: &[Tp]) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in tps {
        by_topic.entry(t).or_default().push(*p);
    }
    let mut a = ConsumerProtocolAssignment::default();
    a.assigned_partitions = by_topic
        .into_iter()
        .map(|(t, ps)| {
            let mut tp = TopicPartition::default();
            tp.topic = TopicName(StrBytes::from_string(t.to_string()));
            tp.partitions = ps;
            tp
        })
        .collect();
    versioned(&a)
}

/// An embedded consumer protocol message as version 0, behind its version.
fn versioned<T: Encodable>(msg: &T) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    if msg.encode(&mut buf, 0).is_err() {
        return Bytes::new();
    }
    buf.freeze()
}

fn decode_assignment(b: Bytes) -> Vec<Tp> {
    consumer_assignment(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(v: &[(&str, i32)]) -> Vec<Tp> {
        v.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    #[test]
    fn range_gives_consecutive_runs_per_topic() {
        let members = vec![
            ("b".to_string(), vec!["t".to_string(), "u".to_string()]),
            ("a".to_string(), vec!["t".to_string()]),
        ];
        let counts = BTreeMap::from([("t".to_string(), 5), ("u".to_string(), 2)]);
        let plan = assign("range", &members, &counts);
        assert_eq!(plan["a"], tps(&[("t", 0), ("t", 1), ("t", 2)]));
        assert_eq!(plan["b"], tps(&[("t", 3), ("t", 4), ("u", 0), ("u", 1)]));
    }

    #[test]
    fn roundrobin_deals_partitions_in_turn() {
        let members = vec![
            ("a".to_string(), vec!["t".to_string()]),
            ("b".to_string(), vec!["t".to_string(), "u".to_string()]),
        ];
        let counts = BTreeMap::from([("t".to_string(), 3), ("u".to_string(), 2)]);
        let plan = assign("roundrobin", &members, &counts);
        assert_eq!(plan["a"], tps(&[("t", 0), ("t", 2)]));
        assert_eq!(plan["b"], tps(&[("t", 1), ("u", 0), ("u", 1)]));
        let none = assign("range", &members, &BTreeMap::new());
        assert!(none.values().all(Vec::is_empty));
    }

    #[test]
    fn subscriptions_and_assignments_round_trip() {
        let s = encode_subscription(&["a".to_string(), "b".to_string()]);
        assert_eq!(decode_subscription(s), ["a", "b"]);
        assert!(decode_subscription(Bytes::from_static(&[0, 9, 1])).is_empty());
        let a = encode_assignment(&tps(&[("t", 1), ("u", 0), ("t", 3)]));
        assert_eq!(decode_assignment(a), tps(&[("t", 1), ("t", 3), ("u", 0)]));
    }

    #[test]
    fn patterns_match_whole_names() {
        let re = anchored("orders-.*").unwrap();
        assert!(re.is_match("orders-eu"));
        assert!(!re.is_match("old-orders-eu"));
        assert!(anchored("a|ab").unwrap().is_match("ab"));
        assert!(anchored("(").is_err());
    }
}
