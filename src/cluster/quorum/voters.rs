//! Voter changes on the leader: Kafka's AddRaftVoter and RemoveRaftVoter (KIP-853) carried out
//! as openraft membership changes. A voter is added by promoting a learner (a node that is
//! running and already receives the log, so it has caught up before it counts toward a
//! commit); a removed voter stays in the membership as a learner, so a node that is also a
//! broker keeps following the metadata log as an observer.
//!
//! A replica is identified by its id and directory id (Kafka's `ReplicaKey`): each node's
//! quorum directory has a random id, created with it (`directory-id` in `metadata.log.dir`),
//! which the leader learns in the handshake of its connection with the node. A request naming
//! another directory id than the node's (a replaced disk, a stale id) matches no replica.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use openraft::ChangeMembers;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use serde::{Deserialize, Serialize};

use super::Quorum;
use super::types::NodeId;

const DIRECTORY_ID_FILE: &str = "directory-id";

/// This quorum directory's id: read from `directory-id`, or chosen at random and written
/// (beside, then renamed into place) when the directory has none.
pub fn directory_id(dir: &Path) -> Result<[u8; 16]> {
    let path = dir.join(DIRECTORY_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => uuid::Uuid::parse_str(text.trim())
            .map(|u| *u.as_bytes())
            .with_context(|| format!("{} is corrupt", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4();
            crate::cluster::controller::write_atomically(&path, format!("{id}\n").as_bytes())?;
            Ok(*id.as_bytes())
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// A change to the set of voters; `directory_id` is the one the request names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VoterChange {
    /// The node and the `host:port` the request names for its controller listener.
    Add {
        id: NodeId,
        directory_id: [u8; 16],
        addr: String,
    },
    Remove {
        id: NodeId,
        directory_id: [u8; 16],
    },
}

/// A member as the leader knows it: its directory id (if met) and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub directory_id: Option<[u8; 16]>,
    pub addr: String,
}

/// Why a voter change was not made, with Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum VoterChangeError {
    #[error("not the leader")]
    NotLeader,
    /// Kafka's DUPLICATE_VOTER.
    #[error("{0}")]
    Duplicate(String),
    /// Kafka's VOTER_NOT_FOUND.
    #[error("{0}")]
    NotFound(String),
    /// Kafka's REQUEST_TIMED_OUT: another change pending, the node not ready, or no commit in
    /// time.
    #[error("{0}")]
    TimedOut(String),
    /// Kafka's INVALID_REQUEST.
    #[error("{0}")]
    Invalid(String),
}

/// Kafka's `ReplicaKey` as its messages print it (the directory id in Kafka's base64).
fn key(id: NodeId, directory_id: Option<[u8; 16]>) -> String {
    let dir = directory_id.map_or("<undefined>".to_string(), |d| {
        crate::cluster::controller::kafka_base64(&d)
    });
    format!("ReplicaKey(id={id}, directoryId={dir})")
}

fn keys(voters: &BTreeMap<NodeId, Member>) -> String {
    let all: Vec<String> = voters
        .iter()
        .map(|(&v, m)| key(v, m.directory_id))
        .collect();
    format!("[{}]", all.join(", "))
}

/// Whether `change` can be made to a membership of `voters` and `learners`, pure. A node is
/// ready to vote when it is a learner with the directory id and at the address the request
/// names (where Kafka's leader would reach it).
pub fn check(
    change: &VoterChange,
    voters: &BTreeMap<NodeId, Member>,
    learners: &BTreeMap<NodeId, Member>,
) -> Result<(), VoterChangeError> {
    match change {
        VoterChange::Add {
            id, directory_id, ..
        } if voters.contains_key(id) => Err(VoterChangeError::Duplicate(format!(
            "The voter id for {} is already part of the set of voters {}.",
            key(*id, Some(*directory_id)),
            keys(voters)
        ))),
        VoterChange::Add {
            id,
            directory_id,
            addr,
        } => match learners.get(id) {
            Some(m) if m.directory_id == Some(*directory_id) && &m.addr == addr => Ok(()),
            _ => Err(VoterChangeError::TimedOut(format!(
                "New voter {} is not ready to receive requests",
                key(*id, Some(*directory_id))
            ))),
        },
        VoterChange::Remove { id, directory_id } => match voters.get(id) {
            Some(m) if m.directory_id == Some(*directory_id) && voters.len() == 1 => Err(
                VoterChangeError::Invalid("Cannot remove the only voter of the quorum".to_string()),
            ),
            Some(m) if m.directory_id == Some(*directory_id) => Ok(()),
            _ => Err(VoterChangeError::NotFound(format!(
                "Cannot remove voter {} from the set of voters {}",
                key(*id, Some(*directory_id)),
                keys(voters)
            ))),
        },
    }
}

impl Quorum {
    /// Makes `change` as the leader and returns once the new membership is committed, or
    /// `TimedOut` after `timeout` (the change may still complete later, as in Kafka).
    pub async fn change_voters(
        &self,
        change: VoterChange,
        timeout: Duration,
    ) -> Result<(), VoterChangeError> {
        let raft = &self.inner.raft;
        let (leading, membership) = {
            let m = raft.metrics();
            let m = m.borrow();
            (
                m.current_leader == Some(self.inner.id) && m.state.is_leader(),
                m.membership_config.membership().clone(),
            )
        };
        if !leading {
            return Err(VoterChangeError::NotLeader);
        }
        let member = |id: NodeId| {
            let addr = membership.get_node(&id).map(|n| n.addr.clone());
            let directory_id = self.inner.transport.directory_of(id);
            (
                id,
                Member {
                    directory_id,
                    addr: addr.unwrap_or_default(),
                },
            )
        };
        let voters: BTreeMap<NodeId, Member> = membership.voter_ids().map(member).collect();
        let learners: BTreeMap<NodeId, Member> = membership.learner_ids().map(member).collect();
        check(&change, &voters, &learners)?;
        let id = match change {
            VoterChange::Add { id, .. } | VoterChange::Remove { id, .. } => id,
        };
        let members = match change {
            VoterChange::Add { .. } => ChangeMembers::AddVoterIds(BTreeSet::from([id])),
            VoterChange::Remove { .. } => ChangeMembers::RemoveVoters(BTreeSet::from([id])),
        };
        let pending = || {
            VoterChangeError::TimedOut(
                "Request timed out waiting for leader to handle previous add or remove voter request"
                    .to_string(),
            )
        };
        // retain: a removed voter stays a learner (an observer).
        match tokio::time::timeout(timeout, raft.change_membership(members, true)).await {
            Err(_) => Err(VoterChangeError::TimedOut(format!(
                "Request timed out waiting for the voter change of {} to commit",
                key(id, None)
            ))),
            Ok(Ok(_)) => {
                tracing::info!(
                    node = self.inner.id,
                    ?change,
                    "changed the metadata quorum's voters"
                );
                Ok(())
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                Err(VoterChangeError::NotLeader)
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => match e {
                ChangeMembershipError::InProgress(_) => Err(pending()),
                ChangeMembershipError::EmptyMembership(e) => {
                    Err(VoterChangeError::Invalid(e.to_string()))
                }
                ChangeMembershipError::LearnerNotFound(e) => {
                    Err(VoterChangeError::TimedOut(e.to_string()))
                }
            },
            Ok(Err(e)) => Err(VoterChangeError::TimedOut(e.to_string())),
        }
    }

    /// The address each member (voter or learner) is reached at.
    pub fn member_addresses(&self) -> BTreeMap<NodeId, String> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        m.membership_config
            .membership()
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: [u8; 16] = [1; 16];
    const D2: [u8; 16] = [2; 16];

    fn members(ids: &[NodeId]) -> BTreeMap<NodeId, Member> {
        ids.iter()
            .map(|&id| {
                let m = Member {
                    directory_id: Some(if id == 4 { D2 } else { D1 }),
                    addr: format!("h:{id}"),
                };
                (id, m)
            })
            .collect()
    }

    fn add(id: NodeId, directory_id: [u8; 16], addr: &str) -> VoterChange {
        VoterChange::Add {
            id,
            directory_id,
            addr: addr.to_string(),
        }
    }

    #[test]
    fn adding_needs_a_learner_with_that_directory_at_that_address() {
        let (v, l) = (members(&[1, 2]), members(&[3, 4]));
        assert_eq!(check(&add(3, D1, "h:3"), &v, &l), Ok(()));
        assert!(matches!(
            check(&add(2, D1, "h:2"), &v, &l),
            Err(VoterChangeError::Duplicate(m)) if m.starts_with("The voter id for ReplicaKey(id=2")
        ));
        for bad in [add(9, D1, "h:9"), add(4, D2, "h:5"), add(4, D1, "h:4")] {
            assert!(
                matches!(check(&bad, &v, &l), Err(VoterChangeError::TimedOut(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn removing_needs_the_voters_directory_id_and_not_the_last_voter() {
        let (v, l) = (members(&[1, 2, 3]), BTreeMap::new());
        let remove = |id, directory_id| VoterChange::Remove { id, directory_id };
        assert_eq!(check(&remove(2, D1), &v, &l), Ok(()));
        assert!(matches!(
            check(&remove(7, D1), &v, &l),
            Err(VoterChangeError::NotFound(_))
        ));
        assert!(matches!(
            check(&remove(2, D2), &v, &l),
            Err(VoterChangeError::NotFound(_))
        ));
        assert!(matches!(
            check(&remove(1, D1), &members(&[1]), &l),
            Err(VoterChangeError::Invalid(_))
        ));
    }
}
