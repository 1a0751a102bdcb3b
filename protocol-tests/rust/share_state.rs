//! The share-state APIs (83-87) over a socket against the real binary, as a broker-side
//! persister uses them: initialize, write (batches combined over what is recorded), read,
//! summary, delete; Kafka's errors (uninitialized share partition, fenced leader and state
//! epochs, unknown topic); FindCoordinator key type 2; and the state replayed from
//! `__share_group_state` after a kill -9.

mod common;

use common::{Client, TestBroker, coordinator, create_topic_request};
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const GROUP: &str = "ss-group";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn init(c: &mut Client, topic: Uuid, state_epoch: i32, start: i64) -> (i16, Option<String>) {
    use initialize_share_group_state_request as m;
    let mut p = m::PartitionData::default();
    p.partition = 0;
    p.state_epoch = state_epoch;
    p.start_offset = start;
    let mut t = m::InitializeStateData::default();
    t.topic_id = topic;
    t.partitions = vec![p];
    let mut r = InitializeShareGroupStateRequest::default();
    r.group_id = s(GROUP);
    r.topics = vec![t];
    let resp: InitializeShareGroupStateResponse = c.call(ApiKey::InitializeShareGroupState, 0, &r);
    let p = &resp.results[0].partitions[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// (first, last, state, count)
type B = (i64, i64, i8, i16);

fn write(
    c: &mut Client,
    topic: Uuid,
    state_epoch: i32,
    leader_epoch: i32,
    start: i64,
    batches: &[B],
) -> i16 {
    use write_share_group_state_request as m;
    let mut p = m::PartitionData::default();
    p.partition = 0;
    p.state_epoch = state_epoch;
    p.leader_epoch = leader_epoch;
    p.start_offset = start;
    p.state_batches = batches
        .iter()
        .map(|&(f, l, st, n)| {
            let mut b = m::StateBatch::default();
            b.first_offset = f;
            b.last_offset = l;
            b.delivery_state = st;
            b.delivery_count = n;
            b
        })
        .collect();
    let mut t = m::WriteStateData::default();
    t.topic_id = topic;
    t.partitions = vec![p];
    let mut r = WriteShareGroupStateRequest::default();
    r.group_id = s(GROUP);
    r.topics = vec![t];
    let resp: WriteShareGroupStateResponse = c.call(ApiKey::WriteShareGroupState, 0, &r);
    resp.results[0].partitions[0].error_code
}

/// ReadShareGroupState, retried as a broker's persister retries it while the share coordinator
/// answers COORDINATOR_LOAD_IN_PROGRESS (it replays `__share_group_state` after a restart).
fn read(
    c: &mut Client,
    topic: Uuid,
    leader_epoch: i32,
) -> read_share_group_state_response::PartitionResult {
    coordinator::retry_while(&coordinator::RETRIABLE, || {
        let r = read_once(c, topic, leader_epoch);
        (r.error_code, r)
    })
    .1
}

fn read_once(
    c: &mut Client,
    topic: Uuid,
    leader_epoch: i32,
) -> read_share_group_state_response::PartitionResult {
    use read_share_group_state_request as m;
    let mut p = m::PartitionData::default();
    p.partition = 0;
    p.leader_epoch = leader_epoch;
    let mut t = m::ReadStateData::default();
    t.topic_id = topic;
    t.partitions = vec![p];
    let mut r = ReadShareGroupStateRequest::default();
    r.group_id = s(GROUP);
    r.topics = vec![t];
    let mut resp: ReadShareGroupStateResponse = c.call(ApiKey::ReadShareGroupState, 0, &r);
    resp.results.remove(0).partitions.remove(0)
}

fn batches(p: &read_share_group_state_response::PartitionResult) -> Vec<B> {
    p.state_batches
        .iter()
        .map(|b| {
            (
                b.first_offset,
                b.last_offset,
                b.delivery_state,
                b.delivery_count,
            )
        })
        .collect()
}

fn summary(
    c: &mut Client,
    topic: Uuid,
) -> read_share_group_state_summary_response::PartitionResult {
    use read_share_group_state_summary_request as m;
    let mut p = m::PartitionData::default();
    p.partition = 0;
    let mut t = m::ReadStateSummaryData::default();
    t.topic_id = topic;
    t.partitions = vec![p];
    let mut r = ReadShareGroupStateSummaryRequest::default();
    r.group_id = s(GROUP);
    r.topics = vec![t];
    let mut resp: ReadShareGroupStateSummaryResponse =
        c.call(ApiKey::ReadShareGroupStateSummary, 0, &r);
    resp.results.remove(0).partitions.remove(0)
}

fn delete(c: &mut Client, topic: Uuid) -> i16 {
    use delete_share_group_state_request as m;
    let mut p = m::PartitionData::default();
    p.partition = 0;
    let mut t = m::DeleteStateData::default();
    t.topic_id = topic;
    t.partitions = vec![p];
    let mut r = DeleteShareGroupStateRequest::default();
    r.group_id = s(GROUP);
    r.topics = vec![t];
    let resp: DeleteShareGroupStateResponse = c.call(ApiKey::DeleteShareGroupState, 0, &r);
    resp.results[0].partitions[0].error_code
}

#[test]
fn share_state_is_kept_as_kafka_keeps_it() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    let created: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request("ss", 1, 1, &[]),
    );
    assert_eq!(created.topics[0].error_code, 0);
    let topic = created.topics[0].topic_id;

    let r = read(&mut c, topic, 0);
    assert_eq!(r.error_code, E::InvalidRequest.code());
    assert_eq!(
        r.error_message.as_deref(),
        Some("Read operation on uninitialized share partition not allowed.")
    );
    assert_eq!(write(&mut c, topic, 0, 0, 0, &[]), E::InvalidRequest.code());
    assert_eq!(
        init(&mut c, Uuid::from_u128(77), 0, 0).0,
        E::UnknownTopicOrPartition.code()
    );

    assert_eq!(init(&mut c, topic, 0, 0).0, 0);
    assert_eq!(
        write(&mut c, topic, 0, 1, 0, &[(0, 4, 2, 1), (5, 9, 0, 2)]),
        0
    );
    assert_eq!(write(&mut c, topic, 0, 1, 2, &[(3, 6, 4, 3)]), 0);
    let want = vec![(2, 2, 2, 1), (3, 6, 4, 3), (7, 9, 0, 2)];
    let r = read(&mut c, topic, 1);
    assert_eq!((r.error_code, r.state_epoch, r.start_offset), (0, 0, 2));
    assert_eq!(batches(&r), want);
    assert_eq!(
        read(&mut c, topic, 0).error_code,
        E::FencedLeaderEpoch.code()
    );
    assert_eq!(
        write(&mut c, topic, 0, 0, 3, &[]),
        E::FencedLeaderEpoch.code()
    );

    // The share coordinator of a share partition's key (type 2) is this broker.
    let key = format!(
        "{GROUP}:{}:0",
        sluice::cluster::controller::kafka_base64(topic.as_bytes())
    );
    let mut fc = FindCoordinatorRequest::default();
    fc.key_type = 2;
    fc.coordinator_keys = vec![s(&key), s("not-a-share-key")];
    let found: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 6, &fc);
    assert_eq!(found.coordinators[0].error_code, 0);
    assert_eq!(found.coordinators[0].node_id.0, 1);
    assert_eq!(found.coordinators[1].error_code, E::InvalidRequest.code());

    // Replayed from __share_group_state after a kill -9.
    std::fs::write(b.data_dir().join("sluice-share-state"), b"SLSH").unwrap();
    b.kill9();
    b.launch();
    let mut c = b.connect();
    let r = read(&mut c, topic, 1);
    assert_eq!((r.error_code, r.start_offset), (0, 2));
    assert_eq!(batches(&r), want);
    let sm = summary(&mut c, topic);
    assert_eq!(
        (
            sm.error_code,
            sm.state_epoch,
            sm.leader_epoch,
            sm.start_offset
        ),
        (0, 0, 1, 2)
    );
    assert!(!b.data_dir().join("sluice-share-state").exists());

    // A new state epoch fences writers of the old one; a delete forgets the partition.
    assert_eq!(init(&mut c, topic, 1, 5).0, 0);
    let (code, message) = init(&mut c, topic, 0, 5);
    assert_eq!(code, E::FencedStateEpoch.code());
    assert!(message.is_some());
    assert_eq!(
        write(&mut c, topic, 0, 1, 6, &[]),
        E::FencedStateEpoch.code()
    );
    let r = read(&mut c, topic, -1);
    assert_eq!((r.state_epoch, r.start_offset, batches(&r)), (1, 5, vec![]));
    assert_eq!(delete(&mut c, topic), 0);
    assert_eq!(delete(&mut c, topic), 0);
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(read(&mut c, topic, -1).error_code, E::InvalidRequest.code());
}
