//! Topic administration in a cluster: the request goes to the active controller, which
//! decides and commits; the answer is given once this broker has applied the change, so a
//! Metadata request that follows sees it. A committed change is never answered as a failure:
//! if this broker is slow to apply it (a busy machine, a very large change), the wait gives
//! up after [`APPLY_WAIT`] and the answer is the controller's, as Kafka's broker answers once
//! its controller committed.

use crate::security::acl::changes::AclError;
use crate::security::acl::{AclBinding, AclFilter};
use crate::security::sasl::scram::{ScramCredential, ScramMechanism};
use crate::security::scram_store::{Deletion, Upsertion, UserResult};
use std::time::Duration;

use uuid::Uuid;

use super::{ClusterNode, ControllerReply, ControllerRequest};
use crate::cluster::TopicError;
use crate::cluster::control::active::{ControlError, CreateTopic};
use crate::cluster::quorum::CallError;

/// How long a broker waits to apply a change the controller committed before it answers
/// anyway.
const APPLY_WAIT: Duration = Duration::from_secs(10);

pub fn topic_error(e: ControlError) -> TopicError {
    match e {
        ControlError::Topic(t) => t,
        ControlError::UnknownTopicOrPartition => TopicError::UnknownTopic,
        ControlError::InvalidRequest(m) => TopicError::InvalidTopic(m),
        other => TopicError::PolicyViolation(format!("{other:?}")),
    }
}

fn unexpected(reply: ControllerReply) -> TopicError {
    TopicError::Storage(format!("unexpected controller answer {reply:?}"))
}

fn call_error(e: CallError) -> TopicError {
    TopicError::Timeout(format!("the controller did not answer: {e}"))
}

impl ClusterNode {
    /// Waits until the local image has applied index `at` (a controller's commit) and the
    /// replicas have been reconciled with it.
    pub async fn wait_applied(&self, check: impl Fn(&ClusterNode) -> bool) -> bool {
        let until = tokio::time::Instant::now() + APPLY_WAIT;
        while tokio::time::Instant::now() < until {
            if check(self) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// [`Self::wait_applied`] for a change the controller committed: the answer does not
    /// depend on it, so running out of time is only logged.
    async fn settle(&self, what: &str, check: impl Fn(&ClusterNode) -> bool) {
        if !self.wait_applied(check).await {
            tracing::warn!(
                "{what} was committed but not yet applied on this broker after {APPLY_WAIT:?}; answering"
            );
        }
    }

    pub async fn create_topics(
        &self,
        topics: Vec<CreateTopic>,
        validate_only: bool,
    ) -> Vec<Result<Uuid, TopicError>> {
        let n = topics.len();
        let req = ControllerRequest::CreateTopics {
            topics,
            validate_only,
        };
        let results = match self.call(req).await {
            Ok(ControllerReply::Topics(r)) if r.len() == n => r,
            Ok(other) => {
                let e = TopicError::Storage(format!("unexpected controller answer {other:?}"));
                return vec![Err(e); n];
            }
            Err(e) => return vec![Err(call_error(e)); n],
        };
        let mut out = Vec::with_capacity(n);
        for r in results {
            out.push(match r {
                Ok(id) => {
                    if !validate_only {
                        self.settle("a new topic", |c| {
                            c.host()
                                .is_some_and(|b| b.replicas().topic_by_id(&id).is_some())
                        })
                        .await;
                    }
                    Ok(id)
                }
                Err(e) => Err(topic_error(e)),
            });
        }
        out
    }

    /// CreateAcls through the active controller; once it answered, waits until this broker
    /// enforces every ACL it accepted.
    pub async fn create_acls(
        &self,
        creations: Vec<Result<AclBinding, AclError>>,
    ) -> Result<Vec<Result<(), AclError>>, TopicError> {
        let results = match self
            .call(ControllerRequest::CreateAcls(creations.clone()))
            .await
        {
            Ok(ControllerReply::AclsCreated(r)) => r,
            Ok(other) => return Err(unexpected(other)),
            Err(e) => return Err(call_error(e)),
        };
        let accepted: Vec<&AclBinding> = creations
            .iter()
            .zip(&results)
            .filter_map(|(c, r)| c.as_ref().ok().filter(|_| r.is_ok()))
            .collect();
        let applied = |c: &ClusterNode| {
            c.host().is_some_and(|b| {
                let acls = b.replicas().acls.snapshot();
                accepted.iter().all(|a| acls.contains(*a))
            })
        };
        if !accepted.is_empty() {
            self.settle("an ACL change", applied).await;
        }
        Ok(results)
    }

    /// DeleteAcls through the active controller; once it answered, waits until this broker
    /// no longer enforces the ACLs it deleted.
    pub async fn delete_acls(
        &self,
        filters: Vec<Result<AclFilter, AclError>>,
    ) -> Result<Vec<Result<Vec<AclBinding>, AclError>>, TopicError> {
        let results = match self.call(ControllerRequest::DeleteAcls(filters)).await {
            Ok(ControllerReply::AclsDeleted(r)) => r,
            Ok(other) => return Err(unexpected(other)),
            Err(e) => return Err(call_error(e)),
        };
        let deleted: Vec<&AclBinding> = results.iter().flatten().flatten().collect();
        let applied = |c: &ClusterNode| {
            c.host().is_some_and(|b| {
                let acls = b.replicas().acls.snapshot();
                deleted.iter().all(|a| !acls.contains(*a))
            })
        };
        if !deleted.is_empty() {
            self.settle("an ACL deletion", applied).await;
        }
        Ok(results)
    }

    /// AlterUserScramCredentials through the active controller; once it answered, waits
    /// until this broker authenticates with the accepted changes.
    pub async fn alter_scram(
        &self,
        deletions: Vec<Deletion>,
        upsertions: Vec<Upsertion>,
    ) -> Result<Vec<UserResult>, TopicError> {
        let req = ControllerRequest::AlterScramCredentials {
            deletions: deletions
                .iter()
                .map(|d| (d.user.clone(), d.mechanism))
                .collect(),
            upsertions: upsertions
                .iter()
                .map(|u| {
                    let salted = u.salted_password.clone();
                    (
                        u.user.clone(),
                        u.mechanism,
                        u.iterations,
                        u.salt.clone(),
                        salted,
                    )
                })
                .collect(),
        };
        let results = match self.call(req).await {
            Ok(ControllerReply::Scram(r)) => r,
            Ok(other) => {
                return Err(TopicError::Storage(format!(
                    "unexpected controller answer {other:?}"
                )));
            }
            Err(e) => return Err(call_error(e)),
        };
        let accepted = |user: &str| results.iter().any(|r| r.0 == user && r.1 == 0);
        let applied = |c: &ClusterNode| {
            let Some(b) = c.host() else { return false };
            let store = &b.replicas().scram;
            deletions.iter().filter(|d| accepted(&d.user)).all(|d| {
                ScramMechanism::from_code(d.mechanism)
                    .is_none_or(|m| store.get(&d.user, m).is_none())
            }) && upsertions.iter().filter(|u| accepted(&u.user)).all(|u| {
                ScramMechanism::from_code(u.mechanism).is_none_or(|m| {
                    store.get(&u.user, m)
                        == Some(ScramCredential::from_salted(
                            m,
                            &u.salt,
                            &u.salted_password,
                            u.iterations,
                        ))
                })
            })
        };
        if results.iter().any(|r| r.1 == 0) {
            self.settle("a credential change", applied).await;
        }
        Ok(results)
    }

    /// Sends a request answered with one result per item, waiting for this broker to apply
    /// the change (`applied` tells).
    pub async fn simple(
        &self,
        req: ControllerRequest,
        n: usize,
        applied: impl Fn(&ClusterNode) -> bool,
    ) -> Vec<Result<(), TopicError>> {
        let results = match self.call(req).await {
            Ok(ControllerReply::Done(r)) if r.len() == n => r,
            Ok(other) => {
                let e = TopicError::Storage(format!("unexpected controller answer {other:?}"));
                return vec![Err(e); n];
            }
            Err(e) => return vec![Err(call_error(e)); n],
        };
        if results.iter().any(Result::is_ok) {
            self.settle("an administrative change", applied).await;
        }
        results
            .into_iter()
            .map(|r| r.map_err(topic_error))
            .collect()
    }

    pub async fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        let id = self.image().topic(name).map(|t| t.id);
        let r = self
            .simple(
                ControllerRequest::DeleteTopics(vec![name.to_string()]),
                1,
                |c| {
                    c.host().is_some_and(|b| {
                        id.is_none_or(|id| b.replicas().topic_by_id(&id).is_none())
                    })
                },
            )
            .await;
        r.into_iter()
            .next()
            .unwrap_or(Err(TopicError::UnknownTopic))
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let want = count.max(0) as usize;
        let r = self
            .simple(
                ControllerRequest::CreatePartitions {
                    topics: vec![(name.to_string(), count, assignments)],
                    validate_only,
                },
                1,
                |c| {
                    validate_only
                        || c.host().is_some_and(|b| {
                            b.replicas()
                                .topic(name)
                                .is_some_and(|t| t.partition_count >= want)
                        })
                },
            )
            .await;
        r.into_iter()
            .next()
            .unwrap_or(Err(TopicError::UnknownTopic))
    }
}

/// The order of `p`'s replicas that makes `to` (or, with `None`, the first other in-sync
/// replica that is active) the preferred leader, and that replica; or why leadership cannot
/// move there.
pub fn leader_move(
    p: &crate::cluster::metadata::PartitionRecord,
    to: Option<i32>,
    active: &dyn Fn(i32) -> bool,
) -> Result<(Vec<i32>, i32), String> {
    if !p.adding.is_empty() || !p.removing.is_empty() {
        return Err("the partition is being reassigned".into());
    }
    let target = match to {
        Some(t) if t == p.leader => return Err(format!("broker {t} already leads it")),
        Some(t) if !p.replicas.contains(&t) => {
            return Err(format!(
                "broker {t} holds no replica of it (replicas {:?})",
                p.replicas
            ));
        }
        Some(t) if !p.isr.contains(&t) => {
            return Err(format!("broker {t} is not in sync (ISR {:?})", p.isr));
        }
        Some(t) if !active(t) => return Err(format!("broker {t} is not active")),
        Some(t) => t,
        None => p
            .replicas
            .iter()
            .copied()
            .find(|&r| r != p.leader && p.isr.contains(&r) && active(r))
            .ok_or_else(|| format!("no other in-sync replica can lead it (ISR {:?})", p.isr))?,
    };
    let mut order = vec![target];
    order.extend(p.replicas.iter().copied().filter(|&r| r != target));
    Ok((order, target))
}

impl ClusterNode {
    /// Moves the leadership of `topic`-`partition` to `to` (or another in-sync replica), as
    /// an operator would with Kafka's tools: the replicas are reordered so that it is the
    /// preferred leader (a reassignment to the same replicas), then a preferred election
    /// makes it lead. Returns the new leader once this broker's image shows it; the
    /// reordering stays, so a leader rebalance keeps it there.
    pub async fn move_leader(
        &self,
        topic: &str,
        partition: i32,
        to: Option<i32>,
    ) -> Result<i32, String> {
        let img = self.image();
        let t = img
            .topic(topic)
            .ok_or_else(|| format!("no topic {topic}"))?;
        let p = img
            .partition(&t.id, partition)
            .ok_or_else(|| format!("no partition {topic}-{partition}"))?;
        let (order, target) = leader_move(p, to, &|r| img.is_active(r))?;
        let id = t.id;
        let req =
            ControllerRequest::Reassign(vec![(topic.to_string(), partition, Some(order.clone()))]);
        match self.call(req).await {
            Ok(ControllerReply::Done(r)) if r.iter().all(Result::is_ok) => {}
            Ok(other) => return Err(format!("the controller refused the reordering: {other:?}")),
            Err(e) => return Err(format!("the controller did not answer: {e}")),
        }
        let placed = |c: &ClusterNode| {
            c.image()
                .partition(&id, partition)
                .is_some_and(|p| p.replicas == order)
        };
        if !self.wait_applied(placed).await {
            return Err("the reordered replicas were not applied in time".into());
        }
        let req = ControllerRequest::ElectLeaders {
            unclean: false,
            partitions: Some(vec![(topic.to_string(), partition)]),
        };
        match self.call(req).await {
            Ok(ControllerReply::Elections(e)) if e.iter().all(|(_, _, r)| r.is_ok()) => {}
            Ok(other) => return Err(format!("the controller refused the election: {other:?}")),
            Err(e) => return Err(format!("the controller did not answer: {e}")),
        }
        let leads = |c: &ClusterNode| {
            c.image()
                .partition(&id, partition)
                .is_some_and(|p| p.leader == target)
        };
        if !self.wait_applied(leads).await {
            return Err(format!("broker {target} did not become the leader in time"));
        }
        Ok(target)
    }
}

#[cfg(test)]
mod leader_move_tests {
    use super::leader_move;
    use crate::cluster::metadata::PartitionRecord;

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRecord {
        PartitionRecord {
            topic_id: uuid::Uuid::nil(),
            partition: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            adding: Vec::new(),
            removing: Vec::new(),
            leader,
            leader_epoch: 3,
            partition_epoch: 5,
        }
    }

    #[test]
    fn the_target_becomes_the_preferred_replica() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 1);
        let all = |_| true;
        assert_eq!(leader_move(&p, Some(3), &all), Ok((vec![3, 1, 2], 3)));
        // No target: the first other in-sync active replica.
        assert_eq!(leader_move(&p, None, &|r| r != 2), Ok((vec![3, 1, 2], 3)));
        assert_eq!(leader_move(&p, None, &all), Ok((vec![2, 1, 3], 2)));
    }

    #[test]
    fn a_move_that_cannot_happen_says_why() {
        let p = partition(&[1, 2, 3], &[1, 2], 1);
        let all = |_| true;
        assert!(
            leader_move(&p, Some(1), &all)
                .unwrap_err()
                .contains("already leads")
        );
        assert!(
            leader_move(&p, Some(4), &all)
                .unwrap_err()
                .contains("no replica")
        );
        assert!(
            leader_move(&p, Some(3), &all)
                .unwrap_err()
                .contains("not in sync")
        );
        assert!(
            leader_move(&p, Some(2), &|r| r != 2)
                .unwrap_err()
                .contains("not active")
        );
        let alone = partition(&[1, 2], &[1], 1);
        assert!(leader_move(&alone, None, &all).is_err());
    }
}

#[cfg(test)]
mod acl_tests {
    use std::path::Path;

    use crate::security::acl::changes::{binding_from_wire, filter_from_wire};
    use crate::testing::LocalBroker;

    /// A one-voter node on `dir` (kept when it stops), driven by the test.
    fn start(dir: &Path) -> LocalBroker {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        crate::testing::Broker::builder()
            .data_dir(dir)
            .start_on(rt)
            .unwrap()
    }

    #[test]
    fn acls_are_kept_in_the_metadata_log_and_read_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let wire = |name: &str, pt: i8, principal: &str, host: &str| {
            binding_from_wire((
                2,
                name.to_string(),
                pt,
                principal.to_string(),
                host.to_string(),
                3,
                3,
            ))
        };
        let creations = vec![
            wire("orders", 3, "User:alice", "*"),
            wire("in\tvoices", 4, "User:b\\ob", "10.0.0.1"),
            wire("", 3, "User:alice", "*"),
        ];
        let node = start(dir.path());
        let c = node.broker().cluster().unwrap().clone();
        let results = node.block_on(c.create_acls(creations.clone())).unwrap();
        assert!(results[0].is_ok() && results[1].is_ok() && results[2].is_err());
        let before = node.broker().controller.acls.snapshot();
        assert_eq!(before.len(), 2);
        drop((c, node));

        let node = start(dir.path());
        assert_eq!(node.broker().controller.acls.snapshot(), before);
        let c = node.broker().cluster().unwrap().clone();
        let filter = filter_from_wire((2, None, 4, None, None, 1, 1));
        let deleted = node.block_on(c.delete_acls(vec![filter])).unwrap();
        assert_eq!(deleted[0].as_ref().unwrap().len(), 1);
        drop((c, node));
        let node = start(dir.path());
        let left: Vec<_> = node
            .broker()
            .controller
            .acls
            .snapshot()
            .iter()
            .cloned()
            .collect();
        assert_eq!(left, vec![creations[0].clone().unwrap()]);
    }
}
