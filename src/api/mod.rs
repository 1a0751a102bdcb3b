//! The Kafka APIs this broker serves: one module per API key, each declaring its version
//! range next to its handler in a [`ApiSpec`]. [`APIS`] is the one list; dispatch and the
//! ApiVersions response are both built from it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

pub use crate::net::request::{
    FrameHead, RequestCtx, Served, anonymous, decode, respond, write_header,
};
use crate::net::response::Response;
pub use context::{Base, Data, Groups, Txns};

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
pub mod context;
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
pub mod injected;
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
pub mod txn_markers;
pub mod txn_offset_commit;
pub mod txn_verify;

/// What handlers ask of the request's context about the broker: quotas and authorization.
impl RequestCtx {
    /// Records `value` against the client's quota of `kind`; the throttle time in ms.
    pub fn quota(&self, b: &Base, kind: crate::quota::QuotaKind, value: usize) -> u64 {
        let client = self.client_id.as_deref().unwrap_or("");
        b.quotas
            .record(kind, &self.principal.name, client, value as f64)
    }

    /// Whether the request's principal may do `op` on `(rt, name)` (always, without an
    /// authorizer).
    pub fn authorize(
        &self,
        b: &Base,
        op: crate::security::acl::AclOperation,
        rt: crate::security::acl::ResourceType,
        name: &str,
    ) -> bool {
        b.authorize(&self.principal, self.peer.map(|p| p.ip()), op, rt, name)
    }

    /// Whether the request's principal may do `op` on the cluster resource.
    pub fn authorize_cluster(&self, b: &Base, op: crate::security::acl::AclOperation) -> bool {
        use crate::security::acl::{ResourceType, model::CLUSTER_NAME};
        self.authorize(b, op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the request's principal may do `op` on some resource of type `rt`.
    pub fn authorize_by_type(
        &self,
        b: &Base,
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
        b: &Base,
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
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Option<Response>>> + Send>>;

/// A handler, by the context it is given (`context`): a key's module names the narrowest
/// context that holds what it uses.
pub enum Handler {
    Base(fn(Arc<Base>, RequestCtx, Bytes) -> HandlerFuture),
    Groups(fn(Arc<Groups>, RequestCtx, Bytes) -> HandlerFuture),
    Txns(fn(Arc<Txns>, RequestCtx, Bytes) -> HandlerFuture),
    Data(fn(Arc<Data>, RequestCtx, Bytes) -> HandlerFuture),
}

/// One API key: the versions served and the handler. `None` from a handler means no
/// response is sent (Produce with acks=0).
pub struct ApiSpec {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    pub handle: Handler,
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

/// The versions of `key` served, from [`APIS`].
pub fn served(key: i16) -> Option<Served> {
    lookup(key).map(|s| Served {
        key: s.key,
        min: s.min,
        max: s.max,
    })
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

/// Parses the request header against [`APIS`]. An error closes the connection, as Kafka does
/// for a request it cannot parse, an unknown API key, or a version it does not serve.
pub fn parse_frame(frame: Bytes) -> Result<Parsed> {
    use crate::net::request::{Header, parse_header};
    match parse_header(frame, served)? {
        Header::UnsupportedApiVersions { correlation_id } => {
            Ok(Parsed::UnsupportedApiVersions { correlation_id })
        }
        Header::Request { ctx, body } => {
            let spec = lookup(ctx.api_key as i16).ok_or_else(|| anyhow!("unserved API key"))?;
            Ok(Parsed::Request { spec, ctx, body })
        }
    }
}

/// The handlers as the transport reaches them: each API group's context, and what the
/// dispatch itself consults (injected faults, the inter-broker gate). The broker builds it
/// once; every frame a connection reads is dispatched here.
pub struct Frontend {
    pub base: Arc<Base>,
    pub groups: Arc<Groups>,
    pub txns: Arc<Txns>,
    pub data: Arc<Data>,
    /// The injected faults (`sluice.faults.enable`; `/faults` on the HTTP listener).
    pub faults: Arc<crate::faults::Registry>,
    /// The connections to the other brokers, closed while the node is isolated.
    pub gate: crate::net::gate::Gate,
}

impl Frontend {
    /// Parses a frame and runs its handler (no client address: tests, fuzzing), as if it
    /// came on the broker's internal listener.
    pub async fn dispatch(&self, frame: Bytes) -> Result<Option<Response>> {
        let session = crate::security::Session::anonymous(None, self.base.internal_listener());
        self.dispatch_from(frame, &session).await
    }

    /// Parses a frame from the connection whose security state is `session` and runs its
    /// handler.
    pub async fn dispatch_from(
        &self,
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
                if self.gate.isolated() && injected::from_peer(&ctx, &body) {
                    anyhow::bail!("isolated from the other nodes: a broker's request is refused");
                }
                if self.faults.idle() {
                    return self.run(spec, ctx, body).await;
                }
                injected::apply(&self.faults, &self.base, ctx, body, async |ctx, body| {
                    self.run(spec, ctx, body).await
                })
                .await
            }
        }
    }

    fn handle(&self, spec: &ApiSpec, ctx: RequestCtx, body: Bytes) -> HandlerFuture {
        match spec.handle {
            Handler::Base(h) => h(self.base.clone(), ctx, body),
            Handler::Groups(h) => h(self.groups.clone(), ctx, body),
            Handler::Txns(h) => h(self.txns.clone(), ctx, body),
            Handler::Data(h) => h(self.data.clone(), ctx, body),
        }
    }

    /// Runs a parsed request's handler, throttled by the client's quotas.
    async fn run(&self, spec: &ApiSpec, ctx: RequestCtx, body: Bytes) -> Result<Option<Response>> {
        if !self.base.quotas.active() {
            return self.handle(spec, ctx, body).await;
        }
        let asked = ctx.clone();
        let (out, spent) = throttle::Timed::new(self.handle(spec, ctx, body)).await;
        let mut out = out?;
        if let Some(resp) = &mut out {
            throttle::apply(&self.base, &asked, spent, resp);
        }
        Ok(out)
    }
}

impl crate::net::dispatch::Dispatch for Frontend {
    fn dispatch<'a>(
        &'a self,
        frame: Bytes,
        session: &'a crate::security::Session,
    ) -> crate::net::dispatch::Answer<'a> {
        Box::pin(self.dispatch_from(frame, session))
    }

    fn served(&self) -> crate::net::request::ServedLookup {
        served
    }

    fn config(&self) -> &crate::config::BrokerConfig {
        &self.base.config
    }

    fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.base.metrics
    }

    fn credentials(
        &self,
    ) -> Arc<dyn crate::security::sasl::authenticator::Credentials + Send + Sync> {
        self.base.controller.scram.clone()
    }

    fn refuses_connections(&self) -> bool {
        !self.faults.idle() && self.faults.down_at(std::time::Instant::now())
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
}
