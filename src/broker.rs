//! The broker: configuration plus the owners of all state (the controller owns topics and
//! partitions; each partition owns its log), wired together. Handlers never see it: each
//! group of APIs gets its context (`api::context`), built here.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kafka_protocol::ResponseError as E;
use tracing::info;

use crate::api::{Base, Data, Frontend, Groups, Txns};
use crate::clock::now_ms;
use crate::cluster::internal_topic::{EnsureFuture, InternalTopic, InternalTopics};
use crate::cluster::metadata::MetadataImage;
use crate::cluster::node::{ClusterNode, NodeCell, Reconciled, ReplicaHost};
use crate::cluster::{Controller, Partition, TopicError, TopicInfo};
use crate::config::BrokerConfig;
use crate::group::{Coordinator, GroupConfig, store};

pub struct Broker {
    /// What every handler may use: the configuration, this broker's replicas, the metadata
    /// quorum, authorization, quotas and metrics. The broker's fields of those names are
    /// these (`Deref`).
    pub base: Arc<Base>,
    /// The consumer group coordinator; it persists through `__consumer_offsets`.
    pub groups: Arc<Coordinator>,
    /// The transaction coordinator; it persists through `__transaction_state`.
    pub txns: Arc<crate::txn::Coordinator>,
    /// Where the transaction coordinator's markers go (and WriteTxnMarkers' local writes).
    pub markers: Arc<crate::api::txn_markers::BrokerMarkers>,
    /// Share groups and share partitions (their in-flight records); they persist through
    /// `share_states`.
    pub share: Arc<crate::share::Coordinator>,
    /// The coordinators' internal topics (found, or created on first use).
    pub internal_topics: Arc<dyn InternalTopics>,
    /// The share coordinator: share-partition states in `__share_group_state`.
    pub share_states: Arc<crate::share::state::ShareStates>,
    /// Connections to the other brokers for the transaction coordinator's requests.
    pub peers: Arc<crate::txn::peers::Peers>,
    /// How this broker connects to the other brokers (the inter-broker listener's security).
    pub inter_broker: crate::net::client::InterBroker,
    /// The log cleaner (compacted topics), its threads started by `spawn_background`.
    pub cleaner: Arc<crate::cluster::log_cleaner::LogCleaner>,
    /// The injected faults (`sluice.faults.enable`; `/faults` on the HTTP listener).
    pub faults: Arc<crate::faults::Registry>,
    /// The Schema Registry (`_schemas`), served on the HTTP listener.
    pub schemas: Arc<crate::registry::Registry>,
    /// The handlers: each group of APIs with its context, what the listeners dispatch to.
    pub frontend: Arc<Frontend>,
    /// What the cluster node reconciles through (it holds it weakly): the coordinators
    /// follow the leaderships of their internal partitions.
    pub coordinators: Arc<Coordinators>,
}

impl Deref for Broker {
    type Target = Base;
    fn deref(&self) -> &Base {
        &self.base
    }
}

impl Broker {
    /// Opens the log dirs; `cluster_id` is the id the metadata quorum agreed on.
    pub fn open(config: BrokerConfig, cluster_id: Option<&str>) -> Result<Arc<Broker>> {
        let locks = crate::log::lock_dirs(&config.log_dirs)?;
        Broker::open_gated(config, cluster_id, Default::default(), locks)
    }

    /// [`Broker::open`] with the log dirs' locks already held (`dir_locks`), the connections
    /// to the other brokers through `gate`.
    pub fn open_gated(
        config: BrokerConfig,
        cluster_id: Option<&str>,
        gate: crate::net::gate::Gate,
        dir_locks: Vec<crate::log::DirLock>,
    ) -> Result<Arc<Broker>> {
        let config = Arc::new(config);
        // The client side of the inter-broker listener: bad keys stop start-up here, before
        // any data is opened.
        let mut inter_broker = crate::net::client::InterBroker::load(&config)?;
        inter_broker.gate = gate;
        let controller = Controller::open_locked(config.clone(), cluster_id, dir_locks)?;
        let advertised = config.advertised_endpoints();
        let mut group_config = GroupConfig::from_broker(&config);
        group_config.consumer.per_group = controller.group_configs.clone();
        let txn_config = crate::txn::TxnConfig::from_broker(&config);
        let mut share_config = crate::share::ShareConfig::from_broker(&config)?;
        share_config.per_group = controller.group_configs.clone();
        let share_state_config = crate::share::state::StateConfig::from_broker(&config);
        // Share-partition states live in `__share_group_state`; a state file of earlier
        // builds (start offsets only) is not read.
        let old_state_file = config.log_dirs[0].join("sluice-share-state");
        if old_state_file.exists() {
            std::fs::remove_file(&old_state_file)?;
        }
        let metrics = Arc::new(crate::metrics::Metrics::new(
            config.listeners.iter().map(|l| l.name.clone()),
        ));
        let cleaner = controller.cleaner.clone();
        let authorizer = config
            .authorizer
            .clone()
            .map(|c| crate::security::acl::Authorizer::new(c, controller.acls.clone()));
        let quotas = crate::quota::QuotaManager::new(
            controller.client_quotas.clone(),
            crate::quota::rate::RateConfig {
                samples: config.quota_window_num,
                window_ms: config.quota_window_size_seconds * 1000,
            },
        );
        let fetch_session_slots = config.max_incremental_fetch_session_cache_slots;
        let offsets_topic = store::OffsetsTopic::from_broker(&config);
        let controller = Arc::new(controller);
        let cluster = NodeCell::default();
        let internal_topics: Arc<dyn InternalTopics> = Arc::new(BrokerTopics {
            replicas: controller.clone(),
            node: cluster.clone(),
        });
        let log = Arc::new(store::TopicLog::new(internal_topics.clone(), offsets_topic));
        let share_states = Arc::new(crate::share::state::ShareStates::new(
            share_state_config,
            internal_topics.clone(),
        ));
        let peers = Arc::new(crate::txn::peers::Peers::new(
            config.node_id,
            config.socket_request_max_bytes,
            inter_broker.clone(),
            Box::new({
                let node = cluster.clone();
                move |id| peer_address(node.get()?, id)
            }),
        ));
        let share = crate::share::Coordinator::open(share_config, Some(share_states.clone()));
        share_states.rebuilds(&share);
        let schemas = Arc::new(crate::registry::Registry::new(
            internal_topics.clone(),
            // a single node keeps `_schemas` on itself
            if config.cluster.as_ref().is_some_and(|c| !c.one_voter) {
                config.schema_registry_replication_factor
            } else {
                1
            },
        ));
        let groups = Coordinator::clustered(group_config, log);
        groups.set_topics_source(Box::new({
            let replicas = controller.clone();
            move || crate::api::consumer_group_heartbeat::topics(&replicas)
        }));
        let markers = Arc::new(crate::api::txn_markers::BrokerMarkers {
            node_id: config.node_id,
            replicas: controller.clone(),
            node: cluster.clone(),
            groups: groups.clone(),
            peers: peers.clone(),
        });
        let txns = crate::txn::Coordinator::new(
            txn_config,
            Arc::new(crate::txn::store::TopicLog::new(internal_topics.clone())),
            markers.clone(),
            Arc::new(NodeIds(cluster.clone())),
        );
        let base = Arc::new(Base {
            config,
            controller,
            advertised,
            cluster,
            quotas,
            metrics,
            authorizer,
        });
        let txn_apis = Arc::new(Txns {
            base: base.clone(),
            txns: txns.clone(),
            peers: peers.clone(),
            markers: markers.clone(),
            groups: groups.clone(),
        });
        let faults = Arc::new(crate::faults::Registry::new(base.config.faults_enabled));
        let frontend = Arc::new(Frontend {
            groups: Arc::new(Groups {
                base: base.clone(),
                groups: groups.clone(),
                share: share.clone(),
                share_states: share_states.clone(),
                internal_topics: internal_topics.clone(),
            }),
            data: Arc::new(Data {
                base: base.clone(),
                txn: txn_apis.clone(),
                fetch_sessions: std::sync::Mutex::new(crate::api::fetch::SessionCache::new(
                    fetch_session_slots,
                )),
            }),
            txns: txn_apis,
            base: base.clone(),
            faults: faults.clone(),
            gate: inter_broker.gate.clone(),
        });
        let coordinators = Arc::new(Coordinators {
            replicas: base.controller.clone(),
            groups: groups.clone(),
            txns: txns.clone(),
            share_states: share_states.clone(),
        });
        Ok(Arc::new(Broker {
            base,
            faults,
            schemas,
            groups,
            txns,
            markers,
            share,
            internal_topics,
            share_states,
            peers,
            inter_broker,
            cleaner,
            frontend,
            coordinators,
        }))
    }

    /// Parses a frame and runs its handler as if it came on the internal listener (tests,
    /// fuzzing, benchmarks: `Frontend::dispatch`).
    pub async fn dispatch(
        &self,
        frame: bytes::Bytes,
    ) -> Result<Option<crate::net::response::Response>> {
        self.frontend.dispatch(frame).await
    }

    /// Periodic housekeeping: retention every `log.retention.check.interval.ms`; every
    /// `producer.id.expiration.check.interval.ms`, partitions forget producers idle for
    /// `producer.id.expiration.ms`; the log dirs' high watermark, recovery point and log
    /// start checkpoints (`cluster::checkpoints`); the log cleaner's threads.
    pub fn spawn_background(self: &Arc<Self>) {
        self.groups.start();
        self.txns.start();
        self.share.start();
        let replicas = Arc::downgrade(&self.controller);
        let controller: crate::cluster::log_cleaner::WithController = Arc::new(
            move |pass: &mut dyn FnMut(&Controller)| match replicas.upgrade() {
                Some(c) => {
                    pass(&c);
                    true
                }
                None => false,
            },
        );
        self.cleaner.start(controller, &self.config);
        let cp = &self.controller.checkpoints;
        self.spawn_periodic(cp.high_watermark_interval_ms, |b| {
            let _ = b
                .controller
                .checkpoints
                .write_high_watermarks(&b.controller.topics());
        });
        self.spawn_periodic(cp.recovery_point_interval_ms, |b| {
            let _ = b
                .controller
                .checkpoints
                .write_recovery_points(&b.controller.topics());
        });
        self.spawn_periodic(cp.log_start_interval_ms, |b| {
            let _ = b
                .controller
                .checkpoints
                .write_log_starts(&b.controller.topics());
        });
        self.spawn_periodic(self.config.log_retention_check_interval_ms, |b| {
            b.controller.apply_retention(now_ms())
        });
        self.spawn_periodic(self.config.producer_id_expiration_check_interval_ms, |b| {
            for t in b.controller.topics() {
                for p in &t.partitions {
                    p.remove_expired_producers(now_ms(), b.config.producer_id_expiration_ms);
                }
            }
        });
    }

    /// Runs `job` on the blocking pool every `every_ms`, the first time after one interval.
    fn spawn_periodic(self: &Arc<Self>, every_ms: u64, job: fn(&Broker)) {
        let b = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(every_ms));
            tick.tick().await;
            loop {
                tick.tick().await;
                let b2 = b.clone();
                let _ = tokio::task::spawn_blocking(move || job(&b2)).await;
            }
        });
    }
}

/// The inter-broker listener address of broker `id`, from the metadata image.
fn peer_address(node: &ClusterNode, id: i32) -> Option<String> {
    let img = node.image();
    crate::cluster::node::replicas::addresses(&img, &node.config.inter_broker_listener).remove(&id)
}

/// The coordinators' internal topics on this broker: the topics it holds replicas of,
/// created through the active controller.
struct BrokerTopics {
    replicas: Arc<Controller>,
    node: NodeCell,
}

impl InternalTopics for BrokerTopics {
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.replicas.topic(name)
    }

    fn ensure<'a>(&'a self, t: InternalTopic<'a>) -> EnsureFuture<'a> {
        Box::pin(async move {
            if let Some(topic) = self.replicas.topic(t.name) {
                return Ok(topic);
            }
            let node = self.node.get().ok_or(E::CoordinatorNotAvailable.code())?;
            let create = crate::cluster::control::active::CreateTopic {
                name: t.name.to_string(),
                num_partitions: t.num_partitions,
                replication_factor: t.replication_factor,
                assignments: None,
                configs: t.configs,
            };
            let created = node
                .create_topics(vec![create], false)
                .await
                .pop()
                .unwrap_or(Err(TopicError::UnknownTopic))
                .map(|_| ());
            match created {
                Ok(()) | Err(TopicError::AlreadyExists(_)) => {}
                Err(e) => info!("cannot create {} yet: {e:?}", t.name),
            }
            self.replicas
                .topic(t.name)
                .ok_or(E::CoordinatorNotAvailable.code())
        })
    }
}

/// The transaction coordinator's producer ids: the controller's blocks.
struct NodeIds(NodeCell);

impl crate::txn::coordinator::ProducerIds for NodeIds {
    fn allocate(&self) -> crate::txn::coordinator::IdFuture<'_> {
        use crate::txn::state::COORDINATOR_NOT_AVAILABLE;
        Box::pin(async move {
            let node = self.0.get().ok_or(COORDINATOR_NOT_AVAILABLE)?;
            node.allocate_producer_id().await.map_err(|e| {
                tracing::warn!("producer id allocation failed: {e:#}");
                COORDINATOR_NOT_AVAILABLE
            })
        })
    }
}

/// The coordinators whose partitions the cluster node reconciles: each loads its state when
/// this broker becomes the leader of one of its internal topic's partitions and unloads it
/// when it stops leading.
pub struct Coordinators {
    replicas: Arc<Controller>,
    groups: Arc<Coordinator>,
    txns: Arc<crate::txn::Coordinator>,
    share_states: Arc<crate::share::state::ShareStates>,
}

impl ReplicaHost for Coordinators {
    fn replicas(&self) -> &Controller {
        &self.replicas
    }

    /// A reconciled image: coordinators move with the leaderships of their internal
    /// partitions (the group coordinator with `__consumer_offsets`'s, the transaction
    /// coordinator with `__transaction_state`'s, the share coordinator with
    /// `__share_group_state`'s).
    fn on_replicas_changed(&self, img: &MetadataImage, r: Reconciled) {
        let offsets = crate::group::store::TOPIC;
        let txns = crate::txn::store::TOPIC;
        let shares = crate::share::state::TOPIC;
        for (topic, index) in r.stopped_leading {
            if &*topic == offsets {
                crate::group::loader::stopped_leading(&self.groups, index);
            } else if &*topic == txns {
                crate::txn::loader::stopped_leading(&self.txns, index);
            } else if &*topic == shares {
                crate::group::loader::PartitionLoads::unload(&*self.share_states, index);
            }
        }
        let count = |name| img.topic(name).map_or(0, |t| t.partitions.len() as i32);
        let led = |name: &str| -> Vec<Arc<Partition>> {
            let led = r.became_leader.iter().filter(|p| &*p.topic == name);
            led.cloned().collect()
        };
        use crate::group::loader::became_leader;
        became_leader(&self.groups, led(offsets), count(offsets));
        became_leader(&self.txns, led(txns), count(txns));
        became_leader(&self.share_states, led(shares), count(shares));
    }
}
