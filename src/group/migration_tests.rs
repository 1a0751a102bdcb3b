//! Classic and consumer-protocol members in one group through the coordinator (its timers on
//! a paused tokio clock): the upgrade of a running classic group, classic members' requests
//! in the consumer group, their own session timeout, and the downgrade.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError as E;
use tokio::time::advance;
use uuid::Uuid;

use super::consumer::classic::{decode_assignment, encode_assignment};
use super::consumer::heartbeat::tests::{hb, join as consumer_join};
use super::consumer::{Assignment, TopicMeta, Topics};
use super::coordinator::{Coordinator, JoinParams};
use super::state::State;
use super::tests::{coordinator, sync};

fn topics() -> Topics {
    Topics::from([(
        "t".to_string(),
        TopicMeta {
            id: Uuid::from_u128(7),
            partitions: 4,
            internal: false,
        },
    )])
}

/// A v1 ConsumerProtocolSubscription of `t` owning `owned`.
fn subscription(owned: &[i32]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(1);
    b.put_i32(1);
    b.put_i16(1);
    b.put_slice(b"t");
    b.put_i32(-1);
    b.put_i32(1);
    b.put_i16(1);
    b.put_slice(b"t");
    b.put_i32(owned.len() as i32);
    for p in owned {
        b.put_i32(*p);
    }
    b.freeze()
}

fn classic(member: &str, owned: &[i32]) -> JoinParams {
    JoinParams {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        client_id: "classic".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(owned))],
        require_known_member_id: false,
        supports_skip_assignment: false,
    }
}

fn partitions(b: &Bytes) -> Vec<i32> {
    decode_assignment(b)
        .unwrap()
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect()
}

fn mixed() -> Arc<Coordinator> {
    let (c, _) = coordinator(0);
    c.set_topics_source(Box::new(topics));
    c
}

/// A classic group of one member owning all 4 partitions, then a consumer-protocol member
/// `c` joins: answers the classic member's JoinGroup result.
async fn upgraded(c: &Arc<Coordinator>) -> super::state::JoinResult {
    let a = c.join(classic("", &[])).await;
    assert_eq!((a.error, a.generation), (0, 1));
    let all = encode_assignment(1, &vec![("t".into(), vec![0, 1, 2, 3])]);
    let s = sync(c, "g", &a, vec![(a.member_id.clone(), all)]).await;
    assert_eq!(partitions(&s.assignment), vec![0, 1, 2, 3]);
    let hb = c
        .consumer_heartbeat("g", consumer_join("c"), &topics())
        .await
        .unwrap();
    assert_eq!(hb.member_epoch, 2);
    a
}

#[tokio::test(start_paused = true)]
async fn a_running_classic_group_is_upgraded_then_downgraded() {
    let c = mixed();
    let a = upgraded(&c).await;
    let g = c.consumer_describe("g").await.unwrap();
    assert_eq!(g.members.len(), 2);
    assert!(g.members[&a.member_id].classic.is_some());
    // The classic member is told to rejoin; it rejoins owning nothing (eager) and gets two.
    let code = c.heartbeat("g", &a.member_id, None, 1).await;
    assert_eq!(code, E::RebalanceInProgress.code());
    let a2 = c.join(classic(&a.member_id, &[])).await;
    assert_eq!((a2.error, a2.generation, a2.leader.as_str()), (0, 2, ""));
    assert_eq!(a2.protocol_name.as_deref(), Some("range"));
    assert!(a2.members.is_empty());
    let s = sync(&c, "g", &a2, Vec::new()).await;
    assert_eq!(s.error, 0);
    let mine = partitions(&s.assignment);
    assert_eq!(mine.len(), 2);
    assert_eq!(c.heartbeat("g", &a.member_id, None, 2).await, 0);
    // c takes the other two.
    let g = c.consumer_describe("g").await.unwrap();
    let owned = g.members["c"].assigned.clone();
    let out = c
        .consumer_heartbeat("g", hb("c", 2, &owned), &topics())
        .await
        .unwrap();
    let theirs: Vec<i32> = out.assignment.unwrap().into_values().flatten().collect();
    assert_eq!(theirs.len(), 2);
    assert!(theirs.iter().all(|p| !mine.contains(p)));
    // c leaves: the group is classic again and rebalances.
    let leave = hb("c", -1, &Assignment::new());
    let out = c.consumer_heartbeat("g", leave, &topics()).await.unwrap();
    assert_eq!(out.member_epoch, -1);
    let d = c.describe("g").await.unwrap().unwrap();
    assert_eq!(d.state, State::PreparingRebalance);
    assert_eq!(d.members.len(), 1);
    assert_eq!(
        c.heartbeat("g", &a.member_id, None, 2).await,
        E::RebalanceInProgress.code()
    );
    let a3 = c.join(classic(&a.member_id, &[])).await;
    assert_eq!((a3.error, a3.generation), (0, 3));
    assert_eq!(
        a3.leader, a.member_id,
        "the classic member leads the classic group"
    );
}

#[tokio::test(start_paused = true)]
async fn a_classic_member_keeps_its_own_session_timeout() {
    let c = mixed();
    let a = upgraded(&c).await;
    // 11 s without heartbeats: the classic member's 10 s session is over, c's 45 s is not.
    advance(Duration::from_secs(11)).await;
    tokio::task::yield_now().await;
    let g = c.consumer_describe("g").await.unwrap();
    assert!(
        !g.members.contains_key(&a.member_id),
        "classic member expired"
    );
    assert!(g.members.contains_key("c"));
    // The consumer group is not downgraded by a classic member's expiry.
    assert_eq!(
        c.heartbeat("g", &a.member_id, None, 1).await,
        E::UnknownMemberId.code()
    );
}

#[tokio::test(start_paused = true)]
async fn the_last_consumer_members_expiry_downgrades_the_group() {
    let c = mixed();
    let a = upgraded(&c).await;
    // The classic member heartbeats (and rejoins) every few seconds; c falls silent.
    let mut generation = 1;
    for _ in 0..30 {
        advance(Duration::from_secs(2)).await;
        let code = c.heartbeat("g", &a.member_id, None, generation).await;
        if code == E::RebalanceInProgress.code() {
            let j = c.join(classic(&a.member_id, &[])).await;
            assert_eq!(j.error, 0);
            generation = j.generation;
            if c.consumer_describe("g").await.is_err() {
                break;
            }
            sync(&c, "g", &j, Vec::new()).await;
        }
    }
    // After c's 45 s session the group is classic, a its leader.
    let d = c.describe("g").await.unwrap().unwrap();
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id, a.member_id);
    assert!(c.consumer_describe("g").await.is_err());
}
