//! The active controller's shell: registered on every node as the quorum's controller
//! service, it serves brokers' requests while this node is the Raft leader. Each request is
//! decided by [`ActiveController`] on an image that has applied every committed entry, and its
//! records are committed as one entry before the answer goes back; requests are decided one
//! at a time, so each sees the previous one's records. A timer fences brokers whose sessions
//! expired and, with `auto.leader.rebalance.enable`, moves leaderships back to preferred
//! replicas.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::metadata_log::encode_entry;
use super::requests::{ControllerReply, ControllerRequest, PRODUCER_ID_BLOCK, QuorumView};
use crate::clock::now_ms;
use crate::cluster::control::active::{ActiveController, ControlConfig, ControlError};
use crate::cluster::features::{self, FeatureUpdate};
use crate::cluster::metadata::{ConfigResource, MetadataImage, MetadataRecord};
use crate::cluster::quorum::{
    BoxFuture, ControllerService, ProposeError, Quorum, ServiceError, VoterChangeError,
};
use crate::cluster::topic_config;
use crate::security::acl::changes::{self as acl_changes, AclError};
use crate::security::acl::{AclBinding, AclFilter};
use std::collections::BTreeSet;

struct State {
    /// The Raft term this controller state belongs to: a new term starts every broker's
    /// session afresh.
    term: u64,
    active: ActiveController,
}

pub struct Service {
    quorum: Quorum,
    image: watch::Receiver<Arc<MetadataImage>>,
    cfg: ControlConfig,
    state: Mutex<State>,
}

impl Service {
    pub fn new(
        quorum: Quorum,
        image: watch::Receiver<Arc<MetadataImage>>,
        cfg: ControlConfig,
    ) -> Arc<Service> {
        Arc::new(Service {
            quorum,
            image,
            state: Mutex::new(State {
                term: u64::MAX,
                active: ActiveController::new(cfg.clone()),
            }),
            cfg,
        })
    }

    /// Runs `decide` on an up-to-date image as the leader and commits its records as one
    /// entry. `None` when this node does not lead.
    async fn decide<T>(
        &self,
        decide: impl FnOnce(&mut ActiveController, &MetadataImage, i64) -> (Vec<MetadataRecord>, T),
    ) -> Result<T, ServiceError> {
        let mut st = self.state.lock().await;
        self.quorum
            .linearize()
            .await
            .map_err(|_| ServiceError::NotLeader)?;
        let term = self.quorum.leader_watch().borrow().1;
        if st.term != term {
            st.term = term;
            st.active = ActiveController::new(self.cfg.clone());
        }
        let img = self.image.borrow().clone();
        let (mut records, answer) = decide(&mut st.active, &img, now_ms());
        if !records.is_empty() {
            if img.cluster_id.is_none()
                && let Some(id) = self.quorum.cluster_id()
            {
                records.insert(0, MetadataRecord::ClusterId(id));
            }
            match self.quorum.propose(encode_entry(&records)).await {
                Ok(_) => {}
                Err(ProposeError::NotLeader { .. }) => return Err(ServiceError::NotLeader),
                Err(e) => return Err(ServiceError::Failed(e.to_string())),
            }
        }
        Ok(answer)
    }

    /// Commits `records` as the log's first metadata, if the log holds no topic yet (an
    /// import that already happened, before a crash, is not repeated). True when committed.
    pub(super) async fn import(&self, records: Vec<MetadataRecord>) -> Result<bool, ServiceError> {
        self.decide(|_, img, _| {
            if img.topics.is_empty() {
                (records, true)
            } else {
                (Vec::new(), false)
            }
        })
        .await
    }

    async fn serve(&self, req: ControllerRequest) -> Result<ControllerReply, ServiceError> {
        Ok(match req {
            ControllerRequest::Register {
                registration: reg,
                previous_incarnation,
            } => {
                let id = reg.broker_id;
                let r = self
                    .decide(|a, img, now| split(a.register(img, reg, previous_incarnation, now)))
                    .await?;
                // The broker epoch is the index of the entry holding the registration.
                ControllerReply::Registered(r.map(|()| {
                    let img = self.image.borrow();
                    img.brokers.get(&id).map_or(0, |b| b.epoch)
                }))
            }
            ControllerRequest::Heartbeat(hb) => ControllerReply::Heartbeat(
                self.decide(|a, img, now| split(a.heartbeat(img, &hb, now)))
                    .await?,
            ),
            ControllerRequest::CreateTopics {
                topics,
                validate_only,
            } => ControllerReply::Topics(
                self.decide(|a, img, _| {
                    let mut view = img.clone();
                    let mut records = Vec::new();
                    let mut out = Vec::new();
                    for t in &topics {
                        let start = placement_start(&t.name);
                        out.push(match a.create_topic(&view, t, start) {
                            Ok((rs, id)) => {
                                for r in &rs {
                                    view.apply(view.offset, r);
                                }
                                records.extend(rs);
                                Ok(id)
                            }
                            Err(e) => Err(e),
                        });
                    }
                    if validate_only {
                        records.clear();
                    }
                    (records, out)
                })
                .await?,
            ),
            ControllerRequest::DeleteTopics(names) => ControllerReply::Done(
                self.decide(|a, img, _| {
                    each(img, &names, |view, name| {
                        a.delete_topic(view, name).map(|(r, _)| (r, ()))
                    })
                })
                .await?,
            ),
            ControllerRequest::CreatePartitions {
                topics,
                validate_only,
            } => ControllerReply::Done(
                self.decide(|a, img, _| {
                    let (records, out) = each(img, &topics, |view, (name, count, assign)| {
                        a.create_partitions(
                            view,
                            name,
                            *count,
                            assign.as_deref(),
                            placement_start(name),
                        )
                    });
                    (if validate_only { Vec::new() } else { records }, out)
                })
                .await?,
            ),
            ControllerRequest::AlterIsr(req) => ControllerReply::Isr(
                self.decide(|a, img, _| match a.alter_isr(img, &req) {
                    Ok((r, p)) => (r, Ok(p)),
                    Err(e) => (Vec::new(), Err(e)),
                })
                .await?,
            ),
            ControllerRequest::ElectLeaders {
                unclean,
                partitions,
            } => ControllerReply::Elections(
                self.decide(|a, img, _| {
                    let wanted: Vec<(String, i32)> = match &partitions {
                        Some(p) => p.clone(),
                        None => {
                            let mut all: Vec<(String, i32)> = img
                                .topics
                                .values()
                                .flat_map(|t| {
                                    (0..t.partitions.len() as i32).map(|i| (t.name.to_string(), i))
                                })
                                .collect();
                            all.sort();
                            all
                        }
                    };
                    let (records, results) =
                        each(img, &wanted, |view, (t, p)| a.elect(view, t, *p, unclean));
                    let out = wanted
                        .into_iter()
                        .zip(results)
                        .map(|((t, p), r)| (t, p, r))
                        .collect();
                    (records, out)
                })
                .await?,
            ),
            ControllerRequest::Reassign(items) => ControllerReply::Done(
                self.decide(|a, img, _| {
                    each(img, &items, |view, (t, p, target)| {
                        a.reassign(view, t, *p, target.as_deref())
                    })
                })
                .await?,
            ),
            ControllerRequest::AllocateProducerIds {
                broker_id,
                broker_epoch,
            } => ControllerReply::ProducerIds(
                self.decide(|_, img, _| match img.brokers.get(&broker_id) {
                    Some(b) if b.epoch == broker_epoch => {
                        let first = img.next_producer_id;
                        (
                            vec![MetadataRecord::ProducerIds {
                                broker_id,
                                broker_epoch,
                                next_producer_id: first + PRODUCER_ID_BLOCK,
                            }],
                            Ok(first),
                        )
                    }
                    _ => (Vec::new(), Err(ControlError::StaleBrokerEpoch)),
                })
                .await?,
            ),
            ControllerRequest::AlterTopicConfigs(items) => ControllerReply::Done(
                self.decide(|_, img, _| {
                    each(img, &items, |view, (topic, name, value)| {
                        if view.topic(topic).is_none() {
                            return Err(ControlError::UnknownTopicOrPartition);
                        }
                        if let Some(v) = value {
                            topic_config::validate(name, v).map_err(|m| {
                                ControlError::Topic(crate::cluster::TopicError::InvalidConfig(m))
                            })?;
                        }
                        let mut records = vec![MetadataRecord::Config {
                            resource: ConfigResource::Topic(topic.clone()),
                            name: name.clone(),
                            value: value.clone(),
                        }];
                        // Allowing unclean election elects at once where no ISR member lives.
                        if name == "unclean.leader.election.enable"
                            && value
                                .as_deref()
                                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
                        {
                            let mut after = view.clone();
                            for r in &records {
                                after.apply(after.offset, r);
                            }
                            records.extend(unclean_elections(&after, topic));
                        }
                        Ok((records, ()))
                    })
                })
                .await?,
            ),
            ControllerRequest::AlterBrokerConfigs(items) => ControllerReply::Done(
                self.decide(|_, img, _| {
                    each(img, &items, |_, (broker, name, value)| {
                        if let Some(v) = value {
                            crate::config::dynamic::validate(name, v).map_err(|m| {
                                ControlError::Topic(crate::cluster::TopicError::InvalidConfig(m))
                            })?;
                        }
                        Ok((
                            vec![MetadataRecord::Config {
                                resource: ConfigResource::Broker(*broker),
                                name: name.clone(),
                                value: value.clone(),
                            }],
                            (),
                        ))
                    })
                })
                .await?,
            ),
            ControllerRequest::AlterGroupConfigs(items) => ControllerReply::Done(
                self.decide(|_, img, _| {
                    each(img, &items, |_, (group, name, value)| {
                        Ok((
                            vec![MetadataRecord::Config {
                                resource: ConfigResource::Group(group.clone()),
                                name: name.clone(),
                                value: value.clone(),
                            }],
                            (),
                        ))
                    })
                })
                .await?,
            ),
            ControllerRequest::AlterClientQuotas(items) => ControllerReply::Done(
                self.decide(|_, img, _| {
                    each(img, &items, |_, (entity, name, value)| {
                        Ok((
                            vec![MetadataRecord::Config {
                                resource: ConfigResource::ClientQuota(entity.clone()),
                                name: name.clone(),
                                value: value.clone(),
                            }],
                            (),
                        ))
                    })
                })
                .await?,
            ),
            ControllerRequest::AlterScramCredentials {
                deletions,
                upsertions,
            } => ControllerReply::Scram(
                self.decide(|_, img, _| scram_records(img, &deletions, &upsertions))
                    .await?,
            ),
            ControllerRequest::CreateAcls(creations) => ControllerReply::AclsCreated(
                self.decide(|_, img, _| acl_create_records(img, &creations))
                    .await?,
            ),
            ControllerRequest::DeleteAcls(filters) => ControllerReply::AclsDeleted(
                self.decide(|_, img, _| acl_delete_records(img, &filters))
                    .await?,
            ),
            ControllerRequest::UnregisterBroker(id) => ControllerReply::Done(vec![
                self.decide(|active, img, _| match active.unregister(img, id) {
                    Ok((records, ())) => (records, Ok(())),
                    Err(e) => (Vec::new(), Err(e)),
                })
                .await?,
            ]),
            ControllerRequest::UpdateFeatures {
                updates,
                validate_only,
            } => {
                let me = self.quorum.node_id() as i32;
                let updates: Vec<FeatureUpdate> = updates
                    .into_iter()
                    .map(|(feature, level, upgrade_type)| FeatureUpdate {
                        feature,
                        level,
                        upgrade_type,
                    })
                    .collect();
                ControllerReply::Features(
                    self.decide(|_, img, _| {
                        match features::decide(&img.feature_levels(), &updates, me) {
                            Err(e) => (Vec::new(), Err(e)),
                            Ok(_) if validate_only => (Vec::new(), Ok(())),
                            Ok(levels) => (
                                levels
                                    .into_iter()
                                    .map(|(name, level)| MetadataRecord::Config {
                                        resource: ConfigResource::Features,
                                        name,
                                        value: Some(level.to_string()),
                                    })
                                    .collect(),
                                Ok(()),
                            ),
                        }
                    })
                    .await?,
                )
            }
            ControllerRequest::DescribeQuorum => {
                let status = self.quorum.status().await;
                match QuorumView::of_leader(&status) {
                    Some(view) => ControllerReply::Quorum(view),
                    None => return Err(ServiceError::NotLeader),
                }
            }
            ControllerRequest::ChangeVoters { change, timeout_ms } => {
                let timeout = Duration::from_millis(timeout_ms);
                match self.quorum.change_voters(change, timeout).await {
                    Err(VoterChangeError::NotLeader) => return Err(ServiceError::NotLeader),
                    r => ControllerReply::Voters(r),
                }
            }
        })
    }

    /// The controller's timer, on every node; it acts while this node leads.
    pub async fn run_timers(
        self: Arc<Self>,
        session_timeout_ms: i64,
        rebalance: Option<Duration>,
        cancel: CancellationToken,
    ) {
        let every = Duration::from_millis((session_timeout_ms / 8).clamp(50, 1000) as u64);
        let mut last_rebalance = tokio::time::Instant::now();
        let mut wake = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(wake) => {}
            }
            wake = tokio::time::Instant::now() + every;
            if self.quorum.leader() != Some(self.quorum.node_id()) {
                continue;
            }
            let fenced = self.decide(|a, img, now| (a.tick(img, now), ())).await;
            if let Err(ServiceError::Failed(e)) = fenced {
                warn!("controller timer: {e}");
            }
            // Wake again at the next session deadline if it comes before the regular tick
            // (a millisecond late, so that the deadline has passed when the tick decides).
            let next = self
                .state
                .lock()
                .await
                .active
                .next_expiry(&self.image.borrow());
            if let Some(at) = next {
                let until = Duration::from_millis((at - now_ms() + 1).max(1) as u64);
                wake = wake.min(tokio::time::Instant::now() + until);
            }
            if let Some(every) = rebalance
                && last_rebalance.elapsed() >= every
            {
                last_rebalance = tokio::time::Instant::now();
                let moved = self
                    .decide(|a, img, _| {
                        let r = a.rebalance_leaders(img);
                        let n = r.len();
                        (r, n)
                    })
                    .await;
                if let Ok(n) = moved
                    && n > 0
                {
                    info!("moved {n} leadership(s) back to preferred replicas");
                }
            }
        }
    }
}

/// Unclean elections for the offline partitions of `topic`.
fn unclean_elections(img: &MetadataImage, topic: &str) -> Vec<MetadataRecord> {
    let Some(t) = img.topic(topic) else {
        return Vec::new();
    };
    let active = |r: i32| img.is_active(r);
    t.partitions
        .iter()
        .filter(|p| !p.has_leader())
        .filter_map(|p| {
            crate::cluster::control::election::elect_unclean(p, &active)
                .ok()
                .map(MetadataRecord::PartitionChange)
        })
        .collect()
}

/// Decides each item on the image as the previous items' records leave it.
/// Kafka's ScramControlManager on the image: the accepted changes as records, one result per
/// user.
fn scram_records(
    img: &MetadataImage,
    deletions: &[(String, i8)],
    upsertions: &[super::requests::ScramUpsertion],
) -> (
    Vec<MetadataRecord>,
    Vec<crate::security::scram_store::UserResult>,
) {
    use crate::security::scram_store::{Change, Deletion, Upsertion, plan_alter};
    let deletions: Vec<Deletion> = deletions
        .iter()
        .map(|(user, mechanism)| Deletion {
            user: user.clone(),
            mechanism: *mechanism,
        })
        .collect();
    let upsertions: Vec<Upsertion> = upsertions
        .iter()
        .map(|(user, mechanism, iterations, salt, salted)| Upsertion {
            user: user.clone(),
            mechanism: *mechanism,
            iterations: *iterations,
            salt: salt.clone(),
            salted_password: salted.clone(),
        })
        .collect();
    let (changes, results) = plan_alter(&img.scram, &deletions, &upsertions);
    let records = changes
        .into_iter()
        .map(|c| match c {
            Change::Upsert {
                user,
                mech,
                credential,
            } => MetadataRecord::UserScramCredential {
                name: user,
                mechanism: mech.code(),
                salt: credential.salt,
                stored_key: credential.stored_key,
                server_key: credential.server_key,
                iterations: credential.iterations,
            },
            Change::Delete { user, mech } => MetadataRecord::RemoveUserScramCredential {
                name: user,
                mechanism: mech.code(),
            },
        })
        .collect();
    (records, results)
}

/// Kafka's AclControlManager.createAcls on the image: an AccessControlEntry record with a
/// new id per ACL to add, one result per creation.
fn acl_create_records(
    img: &MetadataImage,
    creations: &[Result<AclBinding, AclError>],
) -> (Vec<MetadataRecord>, Vec<Result<(), AclError>>) {
    let existing: BTreeSet<AclBinding> = img.acls.values().cloned().collect();
    let (added, results) = acl_changes::plan_create(&existing, creations);
    let records = added.iter().map(acl_record).collect();
    (records, results)
}

/// The record adding the ACL `b`, under a new id.
pub(super) fn acl_record(b: &AclBinding) -> MetadataRecord {
    let (rt, name, pt, principal, host, op, perm) = acl_changes::binding_to_wire(b);
    MetadataRecord::AccessControlEntry {
        id: uuid::Uuid::new_v4(),
        resource_type: rt,
        resource_name: name,
        pattern_type: pt,
        principal,
        host,
        operation: op,
        permission_type: perm,
    }
}

/// Kafka's AclControlManager.deleteAcls on the image: a RemoveAccessControlEntry record per
/// ACL some filter selects, and per filter the ACLs it selected.
fn acl_delete_records(
    img: &MetadataImage,
    filters: &[Result<AclFilter, AclError>],
) -> (Vec<MetadataRecord>, Vec<Result<Vec<AclBinding>, AclError>>) {
    let (removed, results) = acl_changes::plan_delete(img.acls.values(), filters);
    let records = img
        .acls
        .iter()
        .filter(|(_, b)| removed.contains(b))
        .map(|(id, _)| MetadataRecord::RemoveAccessControlEntry { id: *id })
        .collect();
    (records, results)
}

fn each<I>(
    img: &MetadataImage,
    items: &[I],
    mut one: impl FnMut(&MetadataImage, &I) -> Result<(Vec<MetadataRecord>, ()), ControlError>,
) -> (Vec<MetadataRecord>, Vec<Result<(), ControlError>>) {
    let mut view = img.clone();
    let mut records = Vec::new();
    let mut out = Vec::new();
    for item in items {
        out.push(match one(&view, item) {
            Ok((rs, ())) => {
                for r in &rs {
                    view.apply(view.offset, r);
                }
                records.extend(rs);
                Ok(())
            }
            Err(e) => Err(e),
        });
    }
    (records, out)
}

fn split<T>(
    r: Result<(Vec<MetadataRecord>, T), ControlError>,
) -> (Vec<MetadataRecord>, Result<T, ControlError>) {
    match r {
        Ok((records, t)) => (records, Ok(t)),
        Err(e) => (Vec::new(), Err(e)),
    }
}

/// The per-topic start of the replica placement: spread over topics, stable for a name.
fn placement_start(name: &str) -> usize {
    name.bytes()
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
}

impl ControllerService for Service {
    fn handle(&self, request: Vec<u8>) -> BoxFuture<'_, Result<Vec<u8>, ServiceError>> {
        Box::pin(async move {
            let reply = match ControllerRequest::decode(&request) {
                Ok(req) => self.serve(req).await?,
                Err(e) => ControllerReply::Invalid(e.to_string()),
            };
            Ok(reply.encode())
        })
    }
}
