//! What a handler is given: one context per group of APIs, each holding only the services
//! that group uses. [`Base`] is what every handler may use (the configuration, the metadata
//! quorum and this broker's replicas, authorization, quotas and metrics); the metadata and
//! administration APIs need nothing more. [`Groups`] adds the group and share coordinators,
//! [`Txns`] the transaction coordinator and its markers, and [`Data`] (Produce and Fetch) the
//! fetch sessions and what verifying a transactional write needs. The broker builds the
//! contexts once (`Broker::open`); the handlers never see the broker itself.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use anyhow::Result;

use crate::cluster::Controller;
use crate::cluster::internal_topic::InternalTopics;
use crate::cluster::node::{ClusterNode, NodeCell};
use crate::config::{BrokerConfig, Listener};
use crate::security::Principal;
use crate::security::acl::{AclOperation, Authorizer, ResourceType};

/// What every handler may use.
pub struct Base {
    pub config: Arc<BrokerConfig>,
    /// This broker's replicas, log dirs and the metadata it has applied.
    pub controller: Arc<Controller>,
    /// This node's advertised listeners, each with the host clients get.
    pub advertised: Vec<Listener>,
    /// The metadata quorum (one voter on a single node) and this broker's part in the
    /// cluster; set by `run` before any listener accepts ([`Base::node`]).
    pub cluster: NodeCell,
    /// The per-client quota rates (the quotas themselves are the controller's).
    pub quotas: crate::quota::QuotaManager,
    /// Request, traffic and connection counters (`/metrics`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The ACL authorizer when `authorizer.class.name` is set; None allows everything.
    pub authorizer: Option<Authorizer>,
}

impl Base {
    /// The cluster node, once started (`run` starts it before any listener accepts).
    pub fn cluster(&self) -> Option<&Arc<ClusterNode>> {
        self.cluster.get()
    }

    /// This node's side of the cluster: the metadata quorum (on a single node a quorum of one
    /// voter), its image, the controller and replication. Every metadata request goes through
    /// it. Set before any listener accepts a connection, so a handler always finds it.
    pub fn node(&self) -> &Arc<ClusterNode> {
        self.cluster
            .get()
            .expect("the cluster node starts before the listeners")
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The listener whose view of the brokers internal callers take (the console, synthetic
    /// requests): the inter-broker listener in a cluster, which every broker registers, else
    /// the first advertised listener.
    pub fn internal_listener(&self) -> &str {
        match &self.config.cluster {
            Some(c) if !c.inter_broker_listener.is_empty() => &c.inter_broker_listener,
            _ => self
                .advertised
                .first()
                .map_or("PLAINTEXT", |l| l.name.as_str()),
        }
    }

    /// This node's advertised address on `listener`; None when it does not advertise that
    /// listener, and then answers on it leave this node out, as Kafka's do.
    pub fn advertised_on(&self, listener: &str) -> Option<(&str, u16)> {
        self.advertised
            .iter()
            .find(|l| l.name == listener)
            .map(|l| (l.host.as_str(), l.port))
    }

    /// Whether `principal` connecting from `host` may do `op` on `(rt, name)` (always, without
    /// an authorizer): the one decision behind every request's checks and the console's.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: Option<std::net::IpAddr>,
        op: AclOperation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        self.authorizer
            .as_ref()
            .is_none_or(|a| a.authorize(principal, host, op, rt, name))
    }

    /// A producer id never handed out before, from the controller's blocks (so ids are
    /// unique across the cluster).
    pub async fn allocate_producer_id(&self) -> Result<i64> {
        self.node().allocate_producer_id().await
    }
}

/// The consumer, classic and share group APIs, the share-state APIs and FindCoordinator.
pub struct Groups {
    pub base: Arc<Base>,
    /// The consumer group coordinator; it persists through `__consumer_offsets`.
    pub groups: Arc<crate::group::Coordinator>,
    /// Share groups and share partitions (their in-flight records).
    pub share: Arc<crate::share::Coordinator>,
    /// The share coordinator: share-partition states in `__share_group_state`.
    pub share_states: Arc<crate::share::state::ShareStates>,
    /// The coordinators' internal topics (found, or created on first use).
    pub internal_topics: Arc<dyn InternalTopics>,
}

/// The transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
/// TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions and ListTransactions.
pub struct Txns {
    pub base: Arc<Base>,
    /// The transaction coordinator; it persists through `__transaction_state`.
    pub txns: Arc<crate::txn::Coordinator>,
    /// Connections to the other brokers' transaction coordinators (verification).
    pub peers: Arc<crate::txn::peers::Peers>,
    /// Where markers go (WriteTxnMarkers' local writes).
    pub markers: Arc<super::txn_markers::BrokerMarkers>,
    /// The group coordinator, which TxnOffsetCommit writes to.
    pub groups: Arc<crate::group::Coordinator>,
}

/// Produce and Fetch.
pub struct Data {
    pub base: Arc<Base>,
    /// Verifying a transactional produce asks the transaction coordinators.
    pub txn: Arc<Txns>,
    /// Incremental fetch sessions (KIP-227) of consumers and followers.
    pub fetch_sessions: Mutex<super::fetch::SessionCache>,
}

macro_rules! on_base {
    ($($cx:ty),*) => {$(
        impl Deref for $cx {
            type Target = Base;
            fn deref(&self) -> &Base {
                &self.base
            }
        }
    )*};
}

on_base!(Groups, Txns, Data);
