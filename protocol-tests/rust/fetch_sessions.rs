//! Incremental fetch sessions (KIP-227) over a socket against the real binary: a full fetch
//! opens a session, incremental fetches change only what they list and get only the
//! partitions with something new, and the session errors are Kafka's.

mod common;

use bytes::Bytes;
use common::{Client, TestBroker, record_batch};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsResponse, FetchRequest, FetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// Creates `topic` with `partitions` partitions; answers its topic id.
fn create(c: &mut Client, topic: &str, partitions: i32) -> uuid::Uuid {
    let r = common::create_topic_request(topic, partitions, 1, &[]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &r);
    assert_eq!(resp.topics[0].error_code, 0, "create {topic}");
    resp.topics[0].topic_id
}

fn produce(c: &mut Client, topic: &str, partition: i32, value: &[u8]) {
    let p = common::produce_one(c, topic, partition, record_batch(&[value], 0));
    assert_eq!(p.error_code, 0, "produce {topic}-{partition}");
}

/// A fetch that names topics by name (v < 13) or by id, with no wait.
struct Fetch {
    version: i16,
    topic: String,
    id: uuid::Uuid,
}

impl Fetch {
    fn request(
        &self,
        session_id: i32,
        epoch: i32,
        partitions: &[(i32, i64)],
        forgotten: &[i32],
    ) -> FetchRequest {
        let mut r = FetchRequest::default();
        r.replica_id = BrokerId(-1);
        r.max_wait_ms = 0;
        r.min_bytes = 0;
        r.max_bytes = 50 << 20;
        r.session_id = session_id;
        r.session_epoch = epoch;
        if !partitions.is_empty() {
            let mut t = FetchTopic::default();
            self.name(&mut t.topic, &mut t.topic_id);
            t.partitions = partitions
                .iter()
                .map(|&(p, offset)| {
                    let mut fp = FetchPartition::default();
                    fp.partition = p;
                    fp.fetch_offset = offset;
                    fp.partition_max_bytes = 1 << 20;
                    fp
                })
                .collect();
            r.topics = vec![t];
        }
        if !forgotten.is_empty() {
            let mut f = ForgottenTopic::default();
            self.name(&mut f.topic, &mut f.topic_id);
            f.partitions = forgotten.to_vec();
            r.forgotten_topics_data = vec![f];
        }
        r
    }

    fn name(&self, topic: &mut TopicName, id: &mut uuid::Uuid) {
        if self.version >= 13 {
            *id = self.id;
        } else {
            *topic = TopicName(StrBytes::from_string(self.topic.clone()));
        }
    }

    fn send(
        &self,
        c: &mut Client,
        session_id: i32,
        epoch: i32,
        partitions: &[(i32, i64)],
        forgotten: &[i32],
    ) -> FetchResponse {
        let r = self.request(session_id, epoch, partitions, forgotten);
        c.call(ApiKey::Fetch, self.version, &r)
    }
}

/// (partition, error, high watermark, has records) of each partition answered, in order.
fn answered(resp: &FetchResponse) -> Vec<(i32, i16, i64, bool)> {
    resp.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            let records = p.records.as_ref().is_some_and(|r: &Bytes| !r.is_empty());
            (p.partition_index, p.error_code, p.high_watermark, records)
        })
        .collect()
}

/// The walk through a session, by names (v12) or by ids (v17).
fn session_walk(version: i16) {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let topic = format!("sessions-v{version}");
    let id = create(&mut c, &topic, 3);
    produce(&mut c, &topic, 0, b"a");
    produce(&mut c, &topic, 1, b"b");
    let f = Fetch {
        version,
        topic: topic.clone(),
        id,
    };

    // A full fetch (epoch 0) opens a session and answers every partition.
    let full = f.send(&mut c, 0, 0, &[(0, 0), (1, 0), (2, 0)], &[]);
    assert_eq!(full.error_code, 0);
    let session = full.session_id;
    assert!(session > 0, "a full fetch opens a session: {session}");
    assert_eq!(
        answered(&full),
        vec![(0, 0, 1, true), (1, 0, 1, true), (2, 0, 0, false)]
    );

    // Moving two fetch positions past the records: nothing new, nothing answered.
    let r = f.send(&mut c, session, 1, &[(0, 1), (1, 1)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, session));
    assert_eq!(answered(&r), vec![]);

    // Records on one partition: an incremental fetch naming no partition gets only that one.
    produce(&mut c, &topic, 1, b"c");
    let r = f.send(&mut c, session, 2, &[], &[]);
    assert_eq!((r.error_code, r.session_id), (0, session));
    assert_eq!(answered(&r), vec![(1, 0, 2, true)]);

    // The wrong epoch, and an unknown session, are refused without touching the session.
    let r = f.send(&mut c, session, 7, &[], &[]);
    assert_eq!(
        (r.error_code, r.session_id),
        (INVALID_FETCH_SESSION_EPOCH, 0)
    );
    assert!(r.responses.is_empty());
    let unknown = if session == i32::MAX { 1 } else { session + 1 };
    let r = f.send(&mut c, unknown, 1, &[], &[]);
    assert_eq!(
        (r.error_code, r.session_id),
        (FETCH_SESSION_ID_NOT_FOUND, 0)
    );

    // Naming topics the other way than the session does is refused.
    let other = Fetch {
        version: if version >= 13 { 12 } else { 13 },
        topic: topic.clone(),
        id,
    };
    let r = other.send(&mut c, session, 3, &[], &[]);
    assert_eq!(r.error_code, FETCH_SESSION_TOPIC_ID_ERROR);

    // The session is still at epoch 3: forgetting partition 1 stops its answers.
    let r = f.send(&mut c, session, 3, &[(1, 2)], &[]);
    assert_eq!(answered(&r), vec![]);
    let r = f.send(&mut c, session, 4, &[], &[1]);
    assert_eq!((r.error_code, answered(&r)), (0, vec![]));
    produce(&mut c, &topic, 1, b"d");
    produce(&mut c, &topic, 2, b"e");
    let r = f.send(&mut c, session, 5, &[], &[]);
    assert_eq!(answered(&r), vec![(2, 0, 1, true)]);

    // A sessionless fetch (epoch -1) naming the session closes it.
    let r = f.send(&mut c, session, -1, &[(0, 0)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, 0));
    assert_eq!(answered(&r), vec![(0, 0, 1, true)]);
    let r = f.send(&mut c, session, 6, &[], &[]);
    assert_eq!(r.error_code, FETCH_SESSION_ID_NOT_FOUND);
}

#[test]
fn a_session_by_topic_names() {
    session_walk(12);
}

#[test]
fn a_session_by_topic_ids() {
    session_walk(17);
}

#[test]
fn a_full_cache_answers_without_a_session() {
    let http_port = common::free_port();
    let http = format!("sluice.http.server.listeners=http://127.0.0.1:{http_port}");
    let b = TestBroker::start(&["max.incremental.fetch.session.cache.slots=1", &http]);
    let mut c = b.connect();
    let id = create(&mut c, "one-slot", 1);
    produce(&mut c, "one-slot", 0, b"x");
    let f = Fetch {
        version: 17,
        topic: "one-slot".into(),
        id,
    };
    let first = f.send(&mut c, 0, 0, &[(0, 0)], &[]);
    assert!(first.session_id > 0);
    // The only slot is taken by a session under two minutes old: the next full fetch is
    // answered in full, without a session.
    let mut other = b.connect();
    let second = f.send(&mut other, 0, 0, &[(0, 0)], &[]);
    assert_eq!((second.error_code, second.session_id), (0, 0));
    assert_eq!(answered(&second), vec![(0, 0, 1, true)]);
    // The first session still works.
    let r = f.send(&mut c, first.session_id, 1, &[(0, 1)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, first.session_id));
    // /metrics counts one session of one partition, as Kafka's FetchSessionCache gauges.
    let metrics = common::http_get(http_port, "/metrics").expect("/metrics answers");
    for line in [
        "kafka_server_fetchsessioncache_numincrementalfetchsessions 1",
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached 1",
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
}

#[test]
fn no_slots_means_no_sessions() {
    let b = TestBroker::start(&["max.incremental.fetch.session.cache.slots=0"]);
    let mut c = b.connect();
    let id = create(&mut c, "no-slot", 1);
    let f = Fetch {
        version: 17,
        topic: "no-slot".into(),
        id,
    };
    let r = f.send(&mut c, 0, 0, &[(0, 0)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, 0));
    assert_eq!(answered(&r), vec![(0, 0, 0, false)]);
}

#[test]
fn an_incremental_answer_over_many_partitions_carries_only_the_changed_one() {
    const PARTITIONS: i32 = 1000;
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let id = create(&mut c, "wide", PARTITIONS);
    let f = Fetch {
        version: 17,
        topic: "wide".into(),
        id,
    };
    let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let req = f.request(0, 0, &all, &[]);
    c.send(ApiKey::Fetch, 17, &req);
    let (_, full_frame) = c.recv_frame(ApiKey::Fetch, 17).unwrap();
    let full: FetchResponse = {
        use kafka_protocol::protocol::Decodable;
        let mut body = full_frame.clone();
        FetchResponse::decode(&mut body, 17).unwrap()
    };
    assert!(full.session_id > 0);
    assert_eq!(answered(&full).len(), PARTITIONS as usize);

    produce(&mut c, "wide", 517, b"only here");
    let req = f.request(full.session_id, 1, &[], &[]);
    c.send(ApiKey::Fetch, 17, &req);
    let (_, inc_frame) = c.recv_frame(ApiKey::Fetch, 17).unwrap();
    let inc: FetchResponse = {
        use kafka_protocol::protocol::Decodable;
        let mut body = inc_frame.clone();
        FetchResponse::decode(&mut body, 17).unwrap()
    };
    assert_eq!(answered(&inc), vec![(517, 0, 1, true)]);
    // The full answer lists a thousand partitions; the incremental one, one batch.
    assert!(
        inc_frame.len() * 20 < full_frame.len(),
        "incremental {} bytes, full {} bytes",
        inc_frame.len(),
        full_frame.len()
    );
    // Re-read while the position stays; once it moves past the batch, nothing is new.
    let r = f.send(&mut c, full.session_id, 2, &[], &[]);
    assert_eq!(answered(&r), vec![(517, 0, 1, true)]);
    let r = f.send(&mut c, full.session_id, 3, &[(517, 1)], &[]);
    assert_eq!((r.error_code, answered(&r)), (0, vec![]));
}

#[test]
fn a_follower_session_evicts_a_consumer_session_when_the_cache_is_full() {
    let b = TestBroker::start(&["max.incremental.fetch.session.cache.slots=1"]);
    let mut c = b.connect();
    let id = create(&mut c, "evict", 1);
    let f = Fetch {
        version: 17,
        topic: "evict".into(),
        id,
    };
    let consumer = f.send(&mut c, 0, 0, &[(0, 0)], &[]);
    assert!(consumer.session_id > 0);
    // A replica's fetch is privileged: its session takes the consumer's slot, whatever the
    // answer for its partitions (this single node has no followers).
    let mut r = f.request(0, 0, &[(0, 0)], &[]);
    r.replica_state.replica_id = BrokerId(7);
    let mut follower = b.connect();
    let replica: FetchResponse = follower.call(ApiKey::Fetch, 17, &r);
    assert!(replica.session_id > 0, "the replica gets a session");
    let gone = f.send(&mut c, consumer.session_id, 1, &[], &[]);
    assert_eq!(gone.error_code, FETCH_SESSION_ID_NOT_FOUND);
}
