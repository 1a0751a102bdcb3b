//! Fetch (key 1), versions 4-18.
//!
//! Reads whole record batches from each partition, up to its partition_max_bytes and the
//! request's max_bytes (the first batch found is always returned, so a consumer can make
//! progress past a large batch), never beyond the high watermark; with isolation_level 1
//! (read_committed) never beyond the last stable offset, and aborted_transactions lists the
//! aborted transactions (producer id, first offset) overlapping the records read (from the
//! partitions' transaction indexes, as Kafka's collectAbortedTransactions; an empty list when
//! nothing was read; null for read_uncommitted, errors and follower fetches). Control
//! batches (transaction markers) are returned like other batches; consumers skip them.
//! Every answer carries the partition's last stable offset. Waits up to max_wait_ms for
//! min_bytes to accumulate, woken by appends. OFFSET_OUT_OF_RANGE outside
//! [log start, log end]. From v13 topics are named by id (UNKNOWN_TOPIC_ID for an unknown id).
//! Fetch sessions (KIP-227, from v7; [`sessions`]): a full fetch with epoch 0 opens a session
//! whose id the answer carries; an incremental fetch names it with the next epoch, changes
//! only the partitions it lists, and gets only the partitions with something new.
//!
//! A fetch from a replica (replica_id >= 0 up to v14, replica_state.replica_id from v15) is a
//! follower's, served as Kafka's `Partition.fetchRecords` does: this broker must lead at the
//! fetch's current_leader_epoch, and the replica must be one of the partition's followers
//! (else UNKNOWN_LEADER_EPOCH if the fetch names an epoch, NOT_LEADER_OR_FOLLOWER if not). It
//! reads up to the log end offset instead of the high watermark, and its fetch offset becomes
//! the follower's log end offset in the leader's state, which may move the high watermark the
//! response carries. From v12 a fetch naming its last_fetched_epoch whose log diverges from
//! this one (KIP-595) reads nothing and gets diverging_epoch (the epoch and end offset to
//! truncate to), consumers' fetches included; they send -1.
//!
//! The response is encoded here by hand, so that each partition's records are a file region
//! sent with sendfile (see `net::response`).

mod sessions;

pub use sessions::SessionCache;

use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, FetchRequest};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Data;
use super::wire::{
    put_array_len, put_bytes_len, put_no_tags, put_null_array, put_string, put_uvarint,
};
use super::{ApiSpec, RequestCtx};
use crate::clock::now_ms;
use crate::cluster::Partition;
use crate::cluster::partition::FollowerFetch;
use crate::net::response::{FrameBuf, Response};
use sessions::{Answered, FetchParams, PartitionKey, Plan, TopicKey};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::Fetch,
    min: 4,
    max: 18,
    handle: super::Handler::Data(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// One partition of the response.
#[derive(Debug, Clone)]
pub struct PartitionOut {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// A region of a segment file holding whole batches.
    pub records: Option<(Arc<File>, u64, usize)>,
    /// read_committed: (producer id, first offset) of the aborted transactions overlapping
    /// the records (None: null, as for read_uncommitted).
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// (epoch, end offset) when the fetcher's log diverges (v12+ tagged field 0).
    pub diverging_epoch: Option<(i32, i64)>,
    /// KIP-951: (leader, leader epoch) when this replica does not lead (v12+ tagged field 1).
    pub current_leader: Option<(i32, i32)>,
    /// KIP-392: the replica a consumer should fetch from instead (-1: none; v11+).
    pub preferred_read_replica: i32,
}

impl PartitionOut {
    /// Partition `index` with `error_code`, no records and unknown offsets.
    pub fn empty(index: i32, error_code: i16) -> PartitionOut {
        PartitionOut {
            index,
            error_code,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            records: None,
            aborted_transactions: None,
            diverging_epoch: None,
            current_leader: None,
            preferred_read_replica: -1,
        }
    }
}

/// A broker endpoint sent with KIP-951 hints (v16+): (id, host, port, rack).
pub type NodeEndpoint = (i32, String, i32, Option<String>);

/// One topic of the response: by name (v4-12) or id (v13+).
#[derive(Debug, Clone)]
pub struct TopicOut {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionOut>,
}

/// Encodes a Fetch response frame; record regions become file chunks.
pub fn encode_response(
    ctx: &RequestCtx,
    error_code: i16,
    session_id: i32,
    topics: &[TopicOut],
    endpoints: &[NodeEndpoint],
) -> anyhow::Result<Response> {
    encode(ctx, 0, error_code, session_id, topics, endpoints)
}

fn encode(
    ctx: &RequestCtx,
    throttle_ms: i32,
    error_code: i16,
    session_id: i32,
    topics: &[TopicOut],
    endpoints: &[NodeEndpoint],
) -> anyhow::Result<Response> {
    let v = ctx.version;
    let flex = v >= 12;
    let mut f = FrameBuf::new();
    super::write_header(ctx, f.buf())?;
    {
        let buf = f.buf();
        buf.put_i32(throttle_ms);
        if v >= 7 {
            buf.put_i16(error_code);
            buf.put_i32(session_id);
        }
        put_array_len(buf, topics.len(), flex);
    }
    for t in topics {
        let buf = f.buf();
        if v >= 13 {
            buf.put_slice(t.id.as_bytes());
        } else {
            put_string(buf, &t.name, flex);
        }
        put_array_len(buf, t.partitions.len(), flex);
        for p in &t.partitions {
            let buf = f.buf();
            buf.put_i32(p.index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            buf.put_i64(p.last_stable_offset);
            if v >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            match &p.aborted_transactions {
                None => put_null_array(buf, flex),
                Some(list) => {
                    put_array_len(buf, list.len(), flex);
                    for (producer_id, first_offset) in list {
                        buf.put_i64(*producer_id);
                        buf.put_i64(*first_offset);
                        put_no_tags(buf, flex);
                    }
                }
            }
            if v >= 11 {
                buf.put_i32(p.preferred_read_replica);
            }
            match &p.records {
                Some((file, pos, len)) => {
                    put_bytes_len(buf, *len, flex);
                    f.push_file(file.clone(), *pos, *len);
                }
                None => put_bytes_len(buf, 0, flex),
            }
            let buf = f.buf();
            if flex {
                let tags = p.diverging_epoch.is_some() as u32 + p.current_leader.is_some() as u32;
                put_uvarint(buf, tags);
                if let Some((epoch, end_offset)) = p.diverging_epoch {
                    put_uvarint(buf, 0); // diverging_epoch
                    put_uvarint(buf, 4 + 8 + 1);
                    buf.put_i32(epoch);
                    buf.put_i64(end_offset);
                    put_no_tags(buf, flex);
                }
                if let Some((leader, epoch)) = p.current_leader {
                    put_uvarint(buf, 1); // current_leader
                    put_uvarint(buf, 4 + 4 + 1);
                    buf.put_i32(leader);
                    buf.put_i32(epoch);
                    put_no_tags(buf, flex);
                }
            }
        }
        put_no_tags(f.buf(), flex);
    }
    let buf = f.buf();
    if v >= 16 && !endpoints.is_empty() {
        let mut field = bytes::BytesMut::new();
        put_array_len(&mut field, endpoints.len(), true);
        for (id, host, port, rack) in endpoints {
            field.put_i32(*id);
            put_string(&mut field, host, true);
            field.put_i32(*port);
            match rack {
                Some(r) => put_string(&mut field, r, true),
                None => put_uvarint(&mut field, 0),
            }
            put_no_tags(&mut field, true);
        }
        put_uvarint(buf, 1);
        put_uvarint(buf, 0); // node_endpoints
        put_uvarint(buf, field.len() as u32);
        buf.put_slice(&field);
    } else {
        put_no_tags(buf, flex);
    }
    Ok(f.finish())
}

/// KIP-951: partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carry the
/// current leader; returns those leaders' endpoints for the response.
fn add_leader_hints(
    b: &Data,
    listener: &str,
    topics: &mut [TopicOut],
    v: i16,
) -> Vec<NodeEndpoint> {
    if v < 12 {
        return Vec::new();
    }
    let img = b.node().image();
    let mut leaders = Vec::new();
    for t in topics.iter_mut() {
        let name = if v >= 13 {
            img.topics.get(&t.id).map(|t| t.name.to_string())
        } else {
            Some(t.name.clone())
        };
        let Some(name) = name else { continue };
        for p in &mut t.partitions {
            if !super::leader_hint::wants_hint(p.error_code) {
                continue;
            }
            p.current_leader = super::leader_hint::current_leader(&img, &name, p.index);
            if let Some((l, _)) = p.current_leader
                && !leaders.contains(&l)
            {
                leaders.push(l);
            }
        }
    }
    super::leader_hint::endpoints(listener, &img, &leaders)
}

/// KIP-392 in a cluster: a consumer sending client metadata may read from a follower; with
/// `replica.selector.class` rack-aware, the leader points a consumer of `rack` at an in-sync
/// replica in that rack (unless the leader is in it).
fn select_replicas(c: &crate::cluster::node::ClusterNode, rack: &str, wanted: &mut [Wanted]) {
    let img = c.image();
    let rack_of = |id: i32| img.brokers.get(&id).and_then(|b| b.rack());
    for w in wanted.iter_mut() {
        w.follower_read = true;
        let Ok(p) = &w.partition else { continue };
        if !c.config.rack_aware_selector || rack.is_empty() || !p.is_leader() {
            continue;
        }
        if rack_of(c.node_id) == Some(rack) {
            continue;
        }
        let st = p.replica_state();
        if let Some(r) = st
            .isr
            .iter()
            .copied()
            .find(|r| *r != c.node_id && rack_of(*r) == Some(rack))
        {
            w.preferred_read_replica = r;
        }
    }
}

/// A partition asked for, resolved against the metadata.
struct Wanted {
    topic: usize,
    index: i32,
    partition: Result<Arc<Partition>, i16>,
    fetch_offset: i64,
    max_bytes: usize,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    /// A follower's log start offset (v5+; -1: not sent).
    log_start_offset: i64,
    /// KIP-392: the leader sends a consumer to this replica of its rack (-1: read here).
    preferred_read_replica: i32,
    /// A consumer with client metadata (v11+) may read from a follower.
    follower_read: bool,
}

/// How the answer relates to a fetch session.
enum SessionUse {
    None,
    Create,
    Incremental(i32),
}

/// The partitions a fetch lists, keyed as its version names topics.
fn requested(req: &FetchRequest, v: i16) -> Vec<(PartitionKey, FetchParams)> {
    let mut out = Vec::new();
    for ft in &req.topics {
        let topic = topic_key(v, ft.topic.0.as_str(), ft.topic_id);
        for fp in &ft.partitions {
            let params = FetchParams {
                fetch_offset: fp.fetch_offset,
                max_bytes: fp.partition_max_bytes,
                current_leader_epoch: if v >= 9 { fp.current_leader_epoch } else { -1 },
                last_fetched_epoch: if v >= 12 { fp.last_fetched_epoch } else { -1 },
                log_start_offset: if v >= 5 { fp.log_start_offset } else { -1 },
            };
            out.push(((topic.clone(), fp.partition), params));
        }
    }
    out
}

fn topic_key(v: i16, name: &str, id: uuid::Uuid) -> TopicKey {
    if v >= 13 {
        TopicKey::Id(id)
    } else {
        TopicKey::Name(name.into())
    }
}

async fn handle(b: Arc<Data>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: FetchRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let replica_id = if v >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    // Negative ids are consumers (-1), Kafka's debugging consumer (-2) and so on.
    let replica = (replica_id >= 0).then_some(replica_id);
    // The follower's broker epoch (v15+; -1 before, or while it has no accepted registration):
    // the leader names it to the controller when it asks to add the follower to an ISR.
    let replica_epoch = if v >= 15 {
        req.replica_state.replica_epoch
    } else {
        -1
    };
    let (session_id, epoch) = if v >= 7 {
        (req.session_id, req.session_epoch)
    } else {
        (sessions::INVALID_SESSION_ID, sessions::FINAL_EPOCH)
    };
    let forgotten: Vec<PartitionKey> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|f| {
            let topic = topic_key(v, f.topic.0.as_str(), f.topic_id);
            f.partitions.iter().map(move |p| (topic.clone(), *p))
        })
        .collect();
    let plan = b.fetch_sessions.lock().unwrap().plan(
        session_id,
        epoch,
        v >= 13,
        requested(&req, v),
        &forgotten,
        now_ms().max(0) as u64,
    );
    let (list, session) = match plan {
        Plan::Error(code) => {
            b.metrics.errors(ctx.api_key as i16, [code]);
            return Ok(Some(encode_response(&ctx, code, 0, &[], &[])?));
        }
        Plan::Sessionless(list) => (list, SessionUse::None),
        Plan::Full(list) => (list, SessionUse::Create),
        Plan::Incremental { id, partitions } => (partitions, SessionUse::Incremental(id)),
    };
    // Followers need CLUSTER_ACTION, consumers READ on each topic (after an unknown topic id).
    let follower_denied =
        replica.is_some() && !ctx.authorize_cluster(&b, super::authz::Op::ClusterAction);
    let mut topics: Vec<TopicOut> = Vec::new();
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut last: Option<(TopicKey, Option<Arc<crate::cluster::TopicInfo>>, bool)> = None;
    for ((topic_key, index), params) in &list {
        if last.as_ref().is_none_or(|(k, _, _)| k != topic_key) {
            let topic = match topic_key {
                TopicKey::Id(id) => b.controller.topic_by_id(id),
                TopicKey::Name(name) => b.controller.topic(name),
            };
            let (name, id) = match (topic_key, &topic) {
                (_, Some(t)) => (t.name.to_string(), t.id),
                (TopicKey::Name(n), None) => (n.to_string(), uuid::Uuid::nil()),
                (TopicKey::Id(id), None) => (String::new(), *id),
            };
            let denied = follower_denied
                || ((v < 13 || topic.is_some())
                    && replica.is_none()
                    && !ctx.may_topic(&b, super::authz::Op::Read, &name));
            topics.push(TopicOut {
                name,
                id,
                partitions: Vec::new(),
            });
            last = Some((topic_key.clone(), topic, denied));
        }
        let Some((_, topic, denied)) = &last else {
            unreachable!()
        };
        let unknown = if v >= 13 {
            ResponseError::UnknownTopicId.code()
        } else {
            ResponseError::UnknownTopicOrPartition.code()
        };
        let partition = match topic {
            _ if *denied => Err(super::authz::topic_denied()),
            Some(t) => super::local_partition(t, *index).cloned(),
            None => Err(unknown),
        };
        wanted.push(Wanted {
            topic: topics.len() - 1,
            index: *index,
            partition,
            fetch_offset: params.fetch_offset,
            max_bytes: params.max_bytes.max(0) as usize,
            current_leader_epoch: params.current_leader_epoch,
            last_fetched_epoch: params.last_fetched_epoch,
            log_start_offset: params.log_start_offset,
            preferred_read_replica: -1,
            follower_read: false,
        });
    }
    if replica.is_none() && v >= 11 {
        select_replicas(b.node(), req.rack_id.as_str(), &mut wanted);
    }
    let max_bytes = req.max_bytes.max(0) as usize;
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    loop {
        let waiter = Arc::new(Notify::new());
        // A fetch that cannot wait (max wait 0, or its time is up) answers after this read
        // whatever it finds: it registers no waiter.
        if Instant::now() < deadline {
            for w in &wanted {
                if let Ok(p) = &w.partition {
                    p.add_waiter(&waiter);
                }
            }
        }
        let fetcher = Fetcher {
            replica,
            replica_epoch,
            read_committed: replica.is_none() && req.isolation_level == 1,
            cluster: b.node(),
        };
        let (outs, bytes, errors) = read_all(&wanted, max_bytes, fetcher);
        let done = bytes >= min_bytes || errors || Instant::now() >= deadline;
        if done {
            let answered = || {
                list.iter().zip(&outs).map(|((key, params), out)| {
                    let a = Answered {
                        has_records: out.records.is_some(),
                        high_watermark: out.high_watermark,
                        log_start_offset: out.log_start_offset,
                        error: out.error_code != 0,
                        diverging: out.diverging_epoch.is_some(),
                        preferred_read_replica: out.preferred_read_replica >= 0,
                    };
                    (key.clone(), *params, a)
                })
            };
            let (session_id, keep) = match session {
                SessionUse::None => (0, None),
                SessionUse::Create => {
                    let answered = answered().collect();
                    let mut cache = b.fetch_sessions.lock().unwrap();
                    let id =
                        cache.create(now_ms().max(0) as u64, replica.is_some(), v >= 13, answered);
                    (id, None)
                }
                SessionUse::Incremental(id) => {
                    let answered: Vec<_> = answered().map(|(k, _, a)| (k, a)).collect();
                    let keep = b.fetch_sessions.lock().unwrap().respond(id, &answered);
                    (id, Some(keep))
                }
            };
            for t in &mut topics {
                t.partitions.clear();
            }
            let mut fetched = Vec::new();
            for (i, (w, out)) in wanted.iter().zip(outs).enumerate() {
                if keep.as_ref().is_some_and(|k| !k[i]) {
                    continue;
                }
                if let (None, Ok(p), Some((_, _, len))) = (replica, &w.partition, &out.records) {
                    fetched.push((p, *len as u64));
                }
                topics[w.topic].partitions.push(out);
            }
            // Topics left without partitions are not sent.
            topics.retain(|t| !t.partitions.is_empty());
            let codes = topics.iter().flat_map(|t| &t.partitions);
            let codes = std::iter::once(0).chain(codes.map(|p| p.error_code));
            b.metrics.errors(ctx.api_key as i16, codes);
            let endpoints = add_leader_hints(&b, &ctx.listener, &mut topics, v);
            let mut resp = encode_response(&ctx, 0, session_id, &topics, &endpoints)?;
            // A consumer over its byte-rate quota gets an empty answer with the throttle
            // time (the bytes it would have had are not counted), as Kafka's; followers
            // are not under client quotas.
            if replica.is_none() {
                let kind = crate::quota::QuotaKind::Fetch;
                let throttle = ctx.quota(&b, kind, resp.len());
                if throttle > 0 {
                    let client = ctx.client_id.as_deref().unwrap_or("");
                    b.quotas
                        .unrecord(kind, &ctx.principal.name, client, resp.len() as f64);
                    let mut empty = encode(&ctx, throttle as i32, 0, session_id, &[], &[])?;
                    empty.mute = Duration::from_millis(throttle);
                    return Ok(Some(empty));
                }
            }
            // Bytes out count what was sent: not a throttled consumer's withheld records.
            for (p, len) in fetched {
                b.metrics.fetched(&p.stats, len);
            }
            resp.quota_exempt = replica.is_some();
            return Ok(Some(resp));
        }
        let _ = tokio::time::timeout_at(deadline, waiter.notified()).await;
    }
}

/// Who fetches: follower `replica` or a consumer (read_committed or not).
#[derive(Clone, Copy)]
struct Fetcher<'a> {
    replica: Option<i32>,
    /// The follower's broker epoch (-1: not known).
    replica_epoch: i64,
    read_committed: bool,
    cluster: &'a crate::cluster::node::ClusterNode,
}

/// Reads every wanted partition; returns the outputs, bytes found and whether any errored.
fn read_all(
    wanted: &[Wanted],
    max_bytes: usize,
    fetcher: Fetcher<'_>,
) -> (Vec<PartitionOut>, usize, bool) {
    let mut outs = Vec::with_capacity(wanted.len());
    let mut total = 0usize;
    let mut errors = false;
    for w in wanted {
        let mut out = PartitionOut::empty(w.index, 0);
        if w.preferred_read_replica >= 0
            && let Ok(p) = &w.partition
        {
            out.preferred_read_replica = w.preferred_read_replica;
            out.high_watermark = p.high_watermark();
            out.last_stable_offset = p.last_stable_offset();
            out.log_start_offset = p.log_start_offset();
            outs.push(out);
            continue;
        }
        let p = match &w.partition {
            Err(code) => Err(*code),
            Ok(p) => {
                let limit = w.max_bytes.min(max_bytes.saturating_sub(total));
                read_one(p, w, limit, total == 0, fetcher)
                    .map(|read| (p, read))
                    .map_err(|e| super::errors::partition_error_code(&e))
            }
        };
        match p {
            Ok((p, (slice, diverging))) => {
                out.high_watermark = p.high_watermark();
                out.last_stable_offset = p.last_stable_offset();
                out.log_start_offset = p.log_start_offset();
                out.diverging_epoch = diverging;
                out.aborted_transactions = slice
                    .aborted
                    .map(|a| a.iter().map(|t| (t.producer_id, t.first_offset)).collect());
                if let Some(file) = slice.file
                    && slice.len > 0
                {
                    total += slice.len;
                    out.records = Some((file, slice.position, slice.len));
                }
            }
            Err(code) => {
                out.error_code = code;
                errors = true;
            }
        }
        outs.push(out);
    }
    (outs, total, errors)
}

type Read = (crate::cluster::partition::FetchSlice, Option<(i32, i64)>);

/// One partition's read: a follower's up to the log end (recording its fetch offset), a
/// consumer's up to the high watermark (read_committed: the last stable offset, with the
/// aborted transactions); none when the fetcher's log diverges.
fn read_one(
    p: &Arc<Partition>,
    w: &Wanted,
    limit: usize,
    min_one_batch: bool,
    fetcher: Fetcher<'_>,
) -> Result<Read, crate::cluster::PartitionError> {
    let Fetcher {
        replica,
        replica_epoch,
        read_committed,
        cluster,
    } = fetcher;
    if let Some(replica) = replica {
        let fetch = FollowerFetch {
            offset: w.fetch_offset,
            max_bytes: limit,
            min_one_batch,
            current_leader_epoch: w.current_leader_epoch,
            last_fetched_epoch: w.last_fetched_epoch,
            log_start_offset: w.log_start_offset,
            broker_epoch: replica_epoch,
        };
        let read = p.read_for_follower(replica, &fetch, now_ms())?;
        if let Some(isr) = &read.isr_expansion {
            tracing::debug!(topic = %p.topic, partition = p.index, ?isr, "ISR expansion proposed");
            cluster.propose_isr(p);
        }
        return Ok((read.slice, read.diverging));
    }
    if w.follower_read {
        p.check_epoch_as_replica(w.current_leader_epoch)?;
    } else {
        p.check_epoch(w.current_leader_epoch)?;
    }
    if let Some(d) = p.diverging_epoch(w.last_fetched_epoch, w.fetch_offset)? {
        return Ok((crate::cluster::partition::FetchSlice::empty(), Some(d)));
    }
    if read_committed {
        return Ok((
            p.read_committed(w.fetch_offset, limit, min_one_batch)?,
            None,
        ));
    }
    Ok((p.read(w.fetch_offset, limit, min_one_batch)?, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        FetchResponse, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use std::io::Write;

    fn flatten(resp: &Response) -> Vec<u8> {
        resp.to_vec().unwrap()
    }

    /// Our hand-written encoding equals the crate's encoding of the same response with the
    /// records inlined, for every served version.
    #[test]
    fn hand_encoding_matches_crate_for_all_versions() {
        let dir = std::env::temp_dir().join(format!("sluice-fetch-enc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("seg");
        let payload: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let mut f = File::create(&path).unwrap();
        f.write_all(b"xxxxx").unwrap();
        f.write_all(&payload).unwrap();
        drop(f);
        let file = Arc::new(File::open(&path).unwrap());
        let id = uuid::Uuid::new_v4();
        for v in 4..=18i16 {
            let ctx = RequestCtx::synthetic(ApiKey::Fetch, v, 12345);
            let topics = vec![TopicOut {
                name: "orders".into(),
                id,
                partitions: vec![
                    PartitionOut {
                        index: 0,
                        error_code: 0,
                        high_watermark: 42,
                        last_stable_offset: 42,
                        log_start_offset: 3,
                        records: Some((file.clone(), 5, payload.len())),
                        aborted_transactions: Some(vec![(7, 30), (9, 33)]),
                        diverging_epoch: None,
                        current_leader: None,
                        preferred_read_replica: -1,
                    },
                    PartitionOut {
                        index: 1,
                        error_code: 1,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                        records: None,
                        aborted_transactions: None,
                        diverging_epoch: Some((3, 120)),
                        current_leader: None,
                        preferred_read_replica: -1,
                    },
                ],
            }];
            let ours = flatten(&encode_response(&ctx, 0, 0, &topics, &[]).unwrap());

            let mut expected = bytes::BytesMut::new();
            expected.put_i32(0);
            let mut h = ResponseHeader::default();
            h.correlation_id = 12345;
            h.encode(&mut expected, ApiKey::Fetch.response_header_version(v))
                .unwrap();
            let mut r = FetchResponse::default();
            let mut t = FetchableTopicResponse::default();
            if v >= 13 {
                t.topic_id = id;
            } else {
                t.topic = TopicName(StrBytes::from_static_str("orders"));
            }
            let mut p0 = PartitionData::default();
            p0.partition_index = 0;
            p0.high_watermark = 42;
            p0.last_stable_offset = 42;
            if v >= 5 {
                p0.log_start_offset = 3;
            }
            p0.aborted_transactions = Some(
                [(7, 30), (9, 33)]
                    .into_iter()
                    .map(|(pid, first)| {
                        let mut a =
                            kafka_protocol::messages::fetch_response::AbortedTransaction::default();
                        a.producer_id = kafka_protocol::messages::ProducerId(pid);
                        a.first_offset = first;
                        a
                    })
                    .collect(),
            );
            if v >= 11 {
                p0.preferred_read_replica = kafka_protocol::messages::BrokerId(-1);
            }
            p0.records = Some(Bytes::from(payload.clone()));
            let mut p1 = PartitionData::default();
            p1.partition_index = 1;
            p1.error_code = 1;
            p1.high_watermark = -1;
            p1.last_stable_offset = -1;
            if v >= 5 {
                p1.log_start_offset = -1;
            }
            p1.aborted_transactions = None;
            if v >= 11 {
                p1.preferred_read_replica = kafka_protocol::messages::BrokerId(-1);
            }
            p1.records = Some(Bytes::new());
            if v >= 12 {
                p1.diverging_epoch.epoch = 3;
                p1.diverging_epoch.end_offset = 120;
            }
            t.partitions = vec![p0, p1];
            r.responses = vec![t];
            r.encode(&mut expected, v).unwrap();
            let size = (expected.len() - 4) as i32;
            expected[..4].copy_from_slice(&size.to_be_bytes());
            assert_eq!(ours, expected.to_vec(), "fetch v{v}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
