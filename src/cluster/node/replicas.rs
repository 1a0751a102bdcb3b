//! This broker's replicas as the metadata image assigns them: every new image is reconciled
//! with the local partitions (opened, given their role, deleted when unassigned), and the
//! partitions it follows go to the replica fetchers. Leaders' ISR changes (a follower caught
//! up, one fell behind for `replica.lag.time.max.ms`) go to the controller as AlterIsr.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use tracing::{info, warn};
use uuid::Uuid;

use crate::clock::now_ms;
use crate::cluster::metadata::{ConfigResource, MetadataImage};
use crate::cluster::topic_config;
use crate::cluster::{Controller, Partition, TopicInfo};
use crate::config::dynamic::DynamicConfigs;

/// A partition this broker follows: its leader and leader epoch.
pub struct Followed {
    pub partition: Arc<Partition>,
    pub leader: i32,
    pub leader_epoch: i32,
}

/// What reconciling one image changed.
#[derive(Default)]
pub struct Reconciled {
    pub followed: Vec<Followed>,
    /// Partitions this broker started leading (new leader epoch).
    pub became_leader: Vec<Arc<Partition>>,
    /// Partitions this broker stopped leading or no longer holds.
    pub stopped_leading: Vec<(Arc<str>, i32)>,
}

/// Makes the local replicas match `img`. Runs on a blocking thread (logs are opened and
/// deleted here).
pub fn reconcile(ctl: &Controller, img: &MetadataImage, me: i32) -> Reconciled {
    let mut out = Reconciled::default();
    let now = now_ms();
    // Topics gone from the image (deleted, or recreated under a new id) go first, so a
    // recreated topic's directories are free.
    for t in ctl.topics() {
        if !img.topics.contains_key(&t.id)
            && let Some(t) = ctl.remove_topic(&t.id)
        {
            for p in &t.partitions {
                if p.is_leader() {
                    out.stopped_leading.push((t.name.clone(), p.index));
                }
                if let Err(e) = ctl.delete_replica(p) {
                    warn!(topic = %t.name, partition = p.index, "cannot delete replica: {e:#}");
                }
            }
            info!(topic = %t.name, "deleted topic");
        }
    }
    // The dynamic broker configs this broker sees: the cluster default and its own.
    let dynamic = DynamicConfigs {
        cluster_default: img
            .configs
            .get(&ConfigResource::Broker(None))
            .cloned()
            .unwrap_or_default(),
        this_broker: img
            .configs
            .get(&ConfigResource::Broker(Some(me)))
            .cloned()
            .unwrap_or_default(),
    };
    let groups = img
        .configs
        .iter()
        .filter_map(|(r, set)| match r {
            ConfigResource::Group(g) => Some((g.clone(), set.clone())),
            _ => None,
        })
        .collect();
    if ctl.group_configs.replace_all(groups) {
        info!("group configs changed");
    }
    let quotas = img
        .configs
        .iter()
        .filter_map(|(r, set)| match r {
            ConfigResource::ClientQuota(e) => Some((
                crate::quota::QuotaEntity(e.iter().cloned().collect()),
                set.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.parse::<f64>().ok()?)))
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    if ctl.client_quotas.replace_all(quotas) {
        info!("client quotas changed");
    }
    if ctl.scram.replace_all(img.scram.clone()) {
        info!("SCRAM credentials changed");
    }
    if ctl.acls.replace_all(img.acls.values().cloned().collect()) {
        info!(count = img.acls.len(), "ACLs changed");
    }
    let defaults = if ctl.defaults().dynamic == dynamic {
        ctl.defaults()
    } else {
        info!(?dynamic, "dynamic broker configs changed");
        ctl.set_defaults(dynamic)
    };
    let mut ids: Vec<&Uuid> = img.topics.keys().collect();
    ids.sort_by_key(|id| img.topics[*id].name.clone());
    for id in ids {
        let t = &img.topics[id];
        let configs: BTreeMap<String, String> = img
            .configs
            .get(&ConfigResource::Topic(t.name.to_string()))
            .cloned()
            .unwrap_or_default();
        let old = ctl.topic_by_id(id);
        let effective = topic_config::effective(&defaults.merged, &configs);
        let mut held: Vec<Arc<Partition>> = Vec::new();
        let settings_changed = old.as_ref().is_some_and(|o| o.effective != effective);
        let mut changed = settings_changed
            || old
                .as_ref()
                .is_none_or(|o| o.partition_count != t.partitions.len() || o.configs != configs);
        for rec in &t.partitions {
            if !rec.replicas.contains(&me) {
                continue;
            }
            let p = match old.as_ref().and_then(|o| o.partition(rec.partition)) {
                Some(p) => p.clone(),
                None => match ctl.open_replica(&t.name, t.id, rec.partition, &effective) {
                    Ok(p) => {
                        changed = true;
                        p
                    }
                    Err(e) => {
                        warn!(topic = %t.name, partition = rec.partition, "cannot open replica: {e:#}");
                        continue;
                    }
                },
            };
            if settings_changed {
                p.apply_topic_config(&effective);
            } else {
                p.set_min_insync_replicas(effective.min_insync_replicas);
            }
            let was_leader = p.is_leader();
            if rec.leader == me {
                match p.become_leader(rec, now) {
                    Ok(true) => {
                        info!(topic = %t.name, partition = rec.partition, epoch = rec.leader_epoch, isr = ?rec.isr, "leading");
                        out.became_leader.push(p.clone());
                    }
                    Ok(false) => {}
                    Err(e) => {
                        warn!(topic = %t.name, partition = rec.partition, "cannot lead: {e:?}")
                    }
                }
            } else {
                match p.become_follower(rec.leader, rec.leader_epoch) {
                    Ok(true) => {
                        info!(topic = %t.name, partition = rec.partition, leader = rec.leader, epoch = rec.leader_epoch, "following")
                    }
                    Ok(false) => {}
                    Err(e) => {
                        warn!(topic = %t.name, partition = rec.partition, "cannot follow: {e:?}")
                    }
                }
                if was_leader {
                    out.stopped_leading.push((t.name.clone(), rec.partition));
                }
                if rec.leader >= 0 {
                    out.followed.push(Followed {
                        partition: p.clone(),
                        leader: rec.leader,
                        leader_epoch: rec.leader_epoch,
                    });
                }
            }
            held.push(p);
        }
        // Replicas this broker held and no longer does (a reassignment moved them away).
        if let Some(o) = &old {
            let kept: HashSet<i32> = held.iter().map(|p| p.index).collect();
            for p in &o.partitions {
                if !kept.contains(&p.index) {
                    changed = true;
                    if p.is_leader() {
                        out.stopped_leading.push((o.name.clone(), p.index));
                    }
                    if let Err(e) = ctl.delete_replica(p) {
                        warn!(topic = %o.name, partition = p.index, "cannot delete replica: {e:#}");
                    }
                    info!(topic = %o.name, partition = p.index, "replica removed from this broker");
                }
            }
        }
        if changed {
            ctl.install_topic(Arc::new(TopicInfo {
                name: t.name.clone(),
                id: t.id,
                partition_count: t.partitions.len(),
                partitions: held,
                configs,
                effective,
                internal: t.name.starts_with("__"),
            }));
        }
    }
    out
}

/// The listener address of each registered broker, for the fetchers: `listener` of its
/// registration.
pub fn addresses(img: &MetadataImage, listener: &str) -> HashMap<i32, String> {
    img.brokers
        .iter()
        .filter_map(|(id, b)| {
            b.registration
                .endpoints
                .iter()
                .find(|e| e.name == listener)
                .map(|e| (*id, format!("{}:{}", e.host, e.port)))
        })
        .collect()
}
