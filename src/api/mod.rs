//! The Kafka APIs this broker serves: one module per API key, each declaring its version
//! range next to its handler in a [`ApiSpec`]. [`APIS`] is the one list; dispatch and the
//! ApiVersions response are both built from it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::broker::Broker;
use crate::net::response::{FrameBuf, Response};

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod authz;
pub mod config_changes;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod leader_hint;
pub mod list_config_resources;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod share_group_offsets;
pub mod share_state;
pub mod unregister_broker;
pub mod update_features;
pub mod wire;
pub mod write_txn_markers;

// Consumer groups.
pub mod delete_groups;
pub mod describe_groups;
mod group_util;
pub mod heartbeat;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod sync_group;
pub mod throttle;

// Transactions.
pub mod txn_offset_commit;

/// What a handler gets besides the broker and the request body.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    /// The client's address (None for synthetic requests).
    pub peer: Option<std::net::SocketAddr>,
    /// Who sent the request (User:ANONYMOUS until a security protocol says otherwise).
    pub principal: Arc<crate::security::Principal>,
    /// The request's size in bytes, header included (what produce quotas count).
    pub size: usize,
    /// The listener the request arrived on: answers that name brokers give their addresses
    /// on this listener.
    pub listener: Arc<str>,
}

impl RequestCtx {
    /// A request that came from no connection: its header fields only, from nobody.
    pub fn synthetic(api_key: ApiKey, version: i16, correlation_id: i32) -> RequestCtx {
        RequestCtx {
            api_key,
            version,
            correlation_id,
            client_id: None,
            peer: None,
            principal: anonymous(),
            size: 0,
            listener: Arc::from(""),
        }
    }

    /// Records `value` against the client's quota of `kind`; the throttle time in ms.
    pub fn quota(&self, b: &Broker, kind: crate::quota::QuotaKind, value: usize) -> u64 {
        let client = self.client_id.as_deref().unwrap_or("");
        b.quotas
            .record(kind, &self.principal.name, client, value as f64)
    }

    /// Whether the request's principal may do `op` on `(rt, name)` (always, without an
    /// authorizer).
    pub fn authorize(
        &self,
        b: &Broker,
        op: crate::security::acl::AclOperation,
        rt: crate::security::acl::ResourceType,
        name: &str,
    ) -> bool {
        b.authorize(&self.principal, self.peer.map(|p| p.ip()), op, rt, name)
    }

    /// Whether the request's principal may do `op` on the cluster resource.
    pub fn authorize_cluster(&self, b: &Broker, op: crate::security::acl::AclOperation) -> bool {
        use crate::security::acl::{ResourceType, model::CLUSTER_NAME};
        self.authorize(b, op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the request's principal may do `op` on some resource of type `rt`.
    pub fn authorize_by_type(
        &self,
        b: &Broker,
        op: crate::security::acl::AclOperation,
        rt: crate::security::acl::ResourceType,
    ) -> bool {
        b.authorizer
            .as_ref()
            .is_none_or(|a| a.authorize_by_type(&self.principal, self.peer.map(|p| p.ip()), op, rt))
    }

    /// The authorized-operations bit field of `(rt, name)` for the request's principal: from
    /// the ACLs, or every operation of `rt` without an authorizer (as Kafka answers).
    pub fn authorized_operations(
        &self,
        b: &Broker,
        rt: crate::security::acl::ResourceType,
        name: &str,
    ) -> i32 {
        match &b.authorizer {
            None => crate::security::acl::authorizer::all_operations(rt),
            Some(a) => {
                a.authorized_operations(&self.principal, self.peer.map(|p| p.ip()), rt, name)
            }
        }
    }

    /// The client host as Kafka reports it (`InetAddress.toString`: "/127.0.0.1").
    pub fn client_host(&self) -> String {
        self.peer
            .map(|a| format!("/{}", a.ip()))
            .unwrap_or_default()
    }
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Option<Response>>> + Send>>;

/// One API key: the versions served and the handler. `None` from a handler means no
/// response is sent (Produce with acks=0).
pub struct ApiSpec {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    pub handle: fn(Arc<Broker>, RequestCtx, Bytes) -> HandlerFuture,
}

pub static APIS: &[ApiSpec] = &[
    produce::SPEC,
    fetch::SPEC,
    find_coordinator::SPEC,
    list_offsets::SPEC,
    metadata::SPEC,
    api_versions::SPEC,
    // Authentication (answered by the connection's authenticator on SASL listeners).
    sasl_handshake::SPEC,
    sasl_authenticate::SPEC,
    describe_user_scram_credentials::SPEC,
    alter_user_scram_credentials::SPEC,
    create_topics::SPEC,
    delete_topics::SPEC,
    delete_records::SPEC,
    create_partitions::SPEC,
    describe_cluster::SPEC,
    describe_topic_partitions::SPEC,
    list_config_resources::SPEC,
    // Producers.
    init_producer_id::SPEC,
    describe_producers::SPEC,
    describe_configs::SPEC,
    offset_for_leader_epoch::SPEC,
    // Consumer groups.
    offset_commit::SPEC,
    offset_fetch::SPEC,
    join_group::SPEC,
    heartbeat::SPEC,
    leave_group::SPEC,
    sync_group::SPEC,
    describe_groups::SPEC,
    list_groups::SPEC,
    delete_groups::SPEC,
    offset_delete::SPEC,
    consumer_group_heartbeat::SPEC,
    consumer_group_describe::SPEC,
    // Cluster administration.
    alter_replica_log_dirs::SPEC,
    describe_log_dirs::SPEC,
    elect_leaders::SPEC,
    incremental_alter_configs::SPEC,
    alter_configs::SPEC,
    alter_partition_reassignments::SPEC,
    list_partition_reassignments::SPEC,
    describe_quorum::SPEC,
    add_raft_voter::SPEC,
    remove_raft_voter::SPEC,
    update_features::SPEC,
    unregister_broker::SPEC,
    describe_client_quotas::SPEC,
    alter_client_quotas::SPEC,
    describe_acls::SPEC,
    create_acls::SPEC,
    delete_acls::SPEC,
    // Transactions.
    add_partitions_to_txn::SPEC,
    add_offsets_to_txn::SPEC,
    end_txn::SPEC,
    write_txn_markers::SPEC,
    txn_offset_commit::SPEC,
    describe_transactions::SPEC,
    list_transactions::SPEC,
    // Share groups (KIP-932).
    share_group_heartbeat::SPEC,
    share_group_describe::SPEC,
    share_fetch::SPEC,
    share_acknowledge::SPEC,
    share_group_offsets::DESCRIBE,
    share_group_offsets::ALTER,
    share_group_offsets::DELETE,
    share_state::INITIALIZE,
    share_state::READ,
    share_state::WRITE,
    share_state::DELETE,
    share_state::SUMMARY,
];

pub fn lookup(key: i16) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.key as i16 == key)
}

/// Decodes a request body. Decoding runs under `catch_unwind` as a second guard (the first is
/// the allocator, see `alloc.rs`): a malformed body must close one connection, never the broker.
pub fn decode<T: Decodable>(ctx: &RequestCtx, mut body: Bytes) -> Result<T> {
    let version = ctx.version;
    match std::panic::catch_unwind(AssertUnwindSafe(|| T::decode(&mut body, version))) {
        Ok(r) => r.map_err(|e| anyhow!("malformed {:?} v{version} request: {e}", ctx.api_key)),
        Err(_) => bail!(
            "malformed {:?} v{version} request (decoder panicked)",
            ctx.api_key
        ),
    }
}

/// Encodes a complete response frame: size, header (version chosen by the API), body.
pub fn respond<T: Encodable>(ctx: &RequestCtx, body: &T) -> Result<Option<Response>> {
    let mut frame = FrameBuf::new();
    write_header(ctx, frame.buf())?;
    body.encode(frame.buf(), ctx.version)?;
    Ok(Some(frame.finish()))
}

/// Writes the response header for `ctx` into `buf`.
pub fn write_header(ctx: &RequestCtx, buf: &mut bytes::BytesMut) -> Result<()> {
    let header_version = ctx.api_key.response_header_version(ctx.version);
    let mut header = ResponseHeader::default();
    header.correlation_id = ctx.correlation_id;
    header.encode(buf, header_version)?;
    Ok(())
}

/// A frame whose header has been parsed.
pub enum Parsed {
    /// A request for a served API at a served version; `body` follows the header.
    Request {
        spec: &'static ApiSpec,
        ctx: RequestCtx,
        body: Bytes,
    },
    /// ApiVersions above our range: answered in v0 with UNSUPPORTED_VERSION.
    UnsupportedApiVersions { correlation_id: i32 },
}

/// Parses the request header. An error closes the connection, as Kafka does for a request
/// it cannot parse, an unknown API key, or a version it does not serve.
pub fn parse_frame(mut frame: Bytes) -> Result<Parsed> {
    if frame.len() < 8 {
        bail!(
            "frame of {} bytes is shorter than a request header",
            frame.len()
        );
    }
    let size = frame.len();
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Some(spec) = lookup(key) else {
        bail!("unsupported API key {key}");
    };
    if version < spec.min || version > spec.max {
        if spec.key == ApiKey::ApiVersions && version > spec.max {
            return Ok(Parsed::UnsupportedApiVersions { correlation_id });
        }
        bail!(
            "{:?} version {version} outside served range {}..={}",
            spec.key,
            spec.min,
            spec.max
        );
    }
    let header_version = spec.key.request_header_version(version);
    let header: RequestHeader = {
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            RequestHeader::decode(&mut frame, header_version)
        }));
        match r {
            Ok(Ok(h)) => h,
            _ => bail!("malformed request header"),
        }
    };
    let ctx = RequestCtx {
        api_key: spec.key,
        version,
        correlation_id,
        client_id: header.client_id.map(|s| s.to_string()),
        peer: None,
        principal: anonymous(),
        size,
        listener: Arc::from(""),
    };
    Ok(Parsed::Request {
        spec,
        ctx,
        body: frame,
    })
}

/// What a log line says about a request that was not served, read leniently from the fixed
/// start of every request header (API key, version, correlation id, then the client id in all
/// header versions but v0), so it also works on frames that [`parse_frame`] rejects.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FrameHead {
    pub api_key: Option<i16>,
    pub version: Option<i16>,
    pub client_id: Option<String>,
}

impl FrameHead {
    pub fn peek(frame: &[u8]) -> FrameHead {
        let i16_at = |at: usize| {
            frame
                .get(at..at + 2)
                .map(|b| i16::from_be_bytes([b[0], b[1]]))
        };
        let client_id = i16_at(8).and_then(|len| {
            let len = usize::try_from(len).ok()?;
            let bytes = frame.get(10..10 + len)?;
            Some(String::from_utf8_lossy(bytes).into_owned())
        });
        FrameHead {
            api_key: i16_at(0),
            version: i16_at(2),
            client_id,
        }
    }

    /// The key's name, as Kafka logs it ("Metadata"), or "unknown".
    pub fn api_name(&self) -> String {
        match self.api_key.map(ApiKey::try_from) {
            Some(Ok(k)) => format!("{k:?}"),
            _ => "unknown".to_string(),
        }
    }
}

/// The principal of a request that came from no authenticated connection.
pub fn anonymous() -> Arc<crate::security::Principal> {
    Arc::new(crate::security::Principal::anonymous())
}

/// Parses a frame and runs its handler (no client address: tests, fuzzing), as if it came
/// on the broker's internal listener.
pub async fn dispatch(broker: &Arc<Broker>, frame: Bytes) -> Result<Option<Response>> {
    let session = crate::security::Session::anonymous(None, broker.internal_listener());
    dispatch_from(broker, frame, &session).await
}

/// Parses a frame from the connection whose security state is `session` and runs its handler.
pub async fn dispatch_from(
    broker: &Arc<Broker>,
    frame: Bytes,
    session: &crate::security::Session,
) -> Result<Option<Response>> {
    match parse_frame(frame)? {
        Parsed::UnsupportedApiVersions { correlation_id } => {
            Ok(Some(api_versions::unsupported_version(correlation_id)))
        }
        Parsed::Request {
            spec,
            mut ctx,
            body,
        } => {
            ctx.peer = session.peer;
            ctx.principal = session.principal.clone();
            ctx.listener = session.listener.clone();
            if !broker.quotas.active() {
                return (spec.handle)(broker.clone(), ctx, body).await;
            }
            let asked = ctx.clone();
            let (out, spent) = throttle::Timed::new((spec.handle)(broker.clone(), ctx, body)).await;
            let mut out = out?;
            if let Some(resp) = &mut out {
                throttle::apply(broker, &asked, spent, resp);
            }
            Ok(out)
        }
    }
}

/// Decodes any served request's body into its typed form under the same guards as the
/// handlers use (for the fuzz target and tests; handlers decode their own type).
pub fn decode_any(ctx: &RequestCtx, body: Bytes) -> Result<kafka_protocol::messages::RequestKind> {
    let mut body = body;
    let (key, version) = (ctx.api_key, ctx.version);
    match std::panic::catch_unwind(AssertUnwindSafe(|| {
        kafka_protocol::messages::RequestKind::decode(key, &mut body, version)
    })) {
        Ok(r) => r.map_err(|e| anyhow!("malformed {key:?} v{version} request: {e}")),
        Err(_) => bail!("malformed {key:?} v{version} request (decoder panicked)"),
    }
}

/// This broker's replica of partition `index` of `topic`, or the error a client gets for it:
/// UNKNOWN_TOPIC_OR_PARTITION when the topic has no such partition, NOT_LEADER_OR_FOLLOWER
/// when other brokers hold it (a cluster; the client refreshes its metadata).
pub fn local_partition(
    topic: &crate::cluster::TopicInfo,
    index: i32,
) -> Result<&Arc<crate::cluster::Partition>, i16> {
    match topic.partition(index) {
        Some(p) => Ok(p),
        None if topic.has_partition(index) => {
            Err(kafka_protocol::ResponseError::NotLeaderOrFollower.code())
        }
        None => Err(kafka_protocol::ResponseError::UnknownTopicOrPartition.code()),
    }
}

#[cfg(test)]
mod tests {
    use super::FrameHead;

    /// docs/apis.md has a row per API key whose Sluice column is what [`super::APIS`]
    /// advertises ("—" for a key not served).
    #[test]
    fn the_api_table_in_docs_says_what_is_served() {
        use kafka_protocol::messages::ApiKey;
        let mut rows = std::collections::BTreeMap::new();
        for line in include_str!("../../docs/apis.md").lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if let (Some(key), true) = (
                cells.get(1).and_then(|c| c.parse::<i16>().ok()),
                cells.len() == 8,
            ) {
                rows.insert(key, (cells[2].to_string(), cells[5].to_string()));
            }
        }
        for spec in super::APIS {
            let want = if spec.min == spec.max {
                spec.min.to_string()
            } else {
                format!("{}–{}", spec.min, spec.max)
            };
            let key = spec.key as i16;
            let (name, got) = rows
                .get(&key)
                .unwrap_or_else(|| panic!("no row for {:?}", spec.key));
            assert_eq!(name, &format!("{:?}", spec.key), "key {key}");
            assert_eq!(got, &want, "{name}");
        }
        for (key, (name, got)) in &rows {
            if !super::APIS.iter().any(|s| s.key as i16 == *key) {
                assert_eq!(got, "—", "{name} is not served");
            }
        }
        for k in 0..200i16 {
            if let Ok(api) = ApiKey::try_from(k) {
                assert!(rows.contains_key(&k), "no row for {api:?}");
            }
        }
    }

    #[test]
    fn frame_head_reads_what_is_there() {
        let mut f = vec![0, 3, 0, 99, 0, 0, 0, 7, 0, 2, b'i', b'd', 0xff];
        assert_eq!(
            FrameHead::peek(&f),
            FrameHead {
                api_key: Some(3),
                version: Some(99),
                client_id: Some("id".into()),
            }
        );
        assert_eq!(FrameHead::peek(&f).api_name(), "Metadata");
        f[8..10].copy_from_slice(&(-1i16).to_be_bytes());
        assert_eq!(FrameHead::peek(&f).client_id, None);
        f[8..10].copy_from_slice(&100i16.to_be_bytes());
        assert_eq!(
            FrameHead::peek(&f).client_id,
            None,
            "client id past the frame end"
        );
        assert_eq!(FrameHead::peek(&f[..3]).version, None);
        assert_eq!(FrameHead::peek(&[0x27, 0x0f]).api_name(), "unknown");
        assert_eq!(FrameHead::peek(&[]), FrameHead::default());
    }
}
