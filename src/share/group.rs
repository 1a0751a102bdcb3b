//! A share group's membership (KIP-932, Kafka's ShareGroup and the share part of its
//! GroupMetadataManager): members join, heartbeat and leave with ShareGroupHeartbeat; the
//! group epoch goes up whenever the membership, a subscription or the subscribed topics'
//! partitions change; the target assignment is then recomputed by the assignor and every
//! member moves to it at its next heartbeat (share members have nothing to revoke, so there
//! is no reconciliation phase: a member's epoch is the assignment epoch). Pure: time and the
//! topic metadata are arguments.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::assignor::{self, TopicMeta};

/// A member as the coordinator knows it.
#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    /// Topic id → partitions, sorted.
    pub assignment: BTreeMap<Uuid, Vec<i32>>,
    /// When its session ends without a heartbeat.
    pub deadline: i64,
}

/// One ShareGroupHeartbeat, decoded.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged since the last heartbeat.
    pub subscribed: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub member_id: String,
    pub member_epoch: i32,
    /// Sent when the member joined or its assignment changed.
    pub assignment: Option<BTreeMap<Uuid, Vec<i32>>>,
}

/// An error code with Kafka's message.
pub type Refusal = (i16, String);

#[derive(Debug, Clone, Default)]
pub struct ShareGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// The subscribed topics' metadata the target assignment was computed from.
    metadata: Vec<TopicMeta>,
}

/// The settings membership acts under.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub session_timeout_ms: i64,
    pub max_size: usize,
}

impl ShareGroup {
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> Vec<String> {
        let mut t: Vec<String> = self
            .members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect();
        t.sort();
        t.dedup();
        t
    }

    /// Applies one heartbeat at `now`; `lookup` gives a topic's id and partition count.
    /// A left member's answer carries epoch -1.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        hb: Heartbeat,
        now: i64,
        settings: &Settings,
        lookup: &dyn Fn(&str) -> Option<TopicMeta>,
    ) -> Result<Answer, Refusal> {
        validate(group_id, &hb)?;
        if hb.member_epoch == -1 {
            if self.members.remove(&hb.member_id).is_some() {
                self.group_epoch += 1;
            }
            return Ok(Answer {
                member_id: hb.member_id,
                member_epoch: -1,
                assignment: None,
            });
        }
        let joining = hb.member_epoch == 0;
        match self.members.get(&hb.member_id) {
            None if !joining => {
                return Err((
                    ResponseError::UnknownMemberId.code(),
                    format!(
                        "Member {} is not a member of group {group_id}.",
                        hb.member_id
                    ),
                ));
            }
            None if self.members.len() >= settings.max_size => {
                return Err((
                    ResponseError::GroupMaxSizeReached.code(),
                    format!(
                        "The share group has reached its maximum capacity of {} members.",
                        settings.max_size
                    ),
                ));
            }
            Some(m) if !joining && m.epoch != hb.member_epoch => {
                let rel = if hb.member_epoch > m.epoch {
                    "greater"
                } else {
                    "smaller"
                };
                return Err((
                    ResponseError::FencedMemberEpoch.code(),
                    format!(
                        "The share group member has a {rel} member epoch ({}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                        hb.member_epoch, m.epoch
                    ),
                ));
            }
            _ => {}
        }
        let before = self.members.get(&hb.member_id).cloned();
        let member = self
            .members
            .entry(hb.member_id.clone())
            .or_insert_with(|| Member {
                member_id: hb.member_id.clone(),
                epoch: 0,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed: Vec::new(),
                assignment: BTreeMap::new(),
                deadline: 0,
            });
        member.deadline = now + settings.session_timeout_ms;
        member.client_id = hb.client_id;
        member.client_host = hb.client_host;
        if hb.rack_id.is_some() {
            member.rack_id = hb.rack_id;
        }
        let mut changed = before.is_none();
        if let Some(mut s) = hb.subscribed {
            s.sort();
            s.dedup();
            if s != member.subscribed {
                member.subscribed = s;
                changed = true;
            }
        }
        let metadata: Vec<TopicMeta> = self
            .subscribed_topics()
            .iter()
            .filter_map(|t| lookup(t))
            .collect();
        if metadata != self.metadata {
            self.metadata = metadata;
            changed = true;
        }
        if changed {
            self.group_epoch += 1;
        }
        if self.assignment_epoch < self.group_epoch {
            self.assign();
        }
        let m = self
            .members
            .get_mut(&hb.member_id)
            .expect("the member was inserted above");
        let moved = m.epoch != self.assignment_epoch;
        m.epoch = self.assignment_epoch;
        Ok(Answer {
            member_id: m.member_id.clone(),
            member_epoch: m.epoch,
            assignment: (moved || joining).then(|| m.assignment.clone()),
        })
    }

    /// Removes the members whose session ended by `now`; returns their ids.
    pub fn expire(&mut self, now: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            self.members.remove(id);
        }
        if !gone.is_empty() {
            self.group_epoch += 1;
            self.assign();
        }
        gone
    }

    /// Recomputes the target assignment; members' epochs catch up at their next heartbeat.
    fn assign(&mut self) {
        let subs: BTreeMap<String, Vec<String>> = self
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.subscribed.clone()))
            .collect();
        let mut target = assignor::assign(&subs, &self.metadata);
        for m in self.members.values_mut() {
            m.assignment = target.remove(&m.member_id).unwrap_or_default();
        }
        self.assignment_epoch = self.group_epoch;
    }
}

/// Kafka's request checks (INVALID_REQUEST), before any state is looked at.
fn validate(group_id: &str, hb: &Heartbeat) -> Result<(), Refusal> {
    let invalid = |m: &str| Err((ResponseError::InvalidRequest.code(), m.to_string()));
    if group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if hb.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if hb.member_id.len() > 36 {
        return invalid("MemberId can't be longer than 36 characters.");
    }
    if hb.member_epoch < -1 {
        return invalid("MemberEpoch is invalid.");
    }
    if hb.member_epoch == 0 && hb.subscribed.as_ref().is_none_or(|s| s.is_empty()) {
        return invalid("SubscribedTopicNames must be set in first request.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Settings = Settings {
        session_timeout_ms: 100,
        max_size: 2,
    };

    fn topic() -> Uuid {
        Uuid::from_u128(7)
    }

    fn lookup(name: &str) -> Option<TopicMeta> {
        (name == "t").then(|| TopicMeta {
            name: "t".into(),
            id: topic(),
            partitions: 1,
        })
    }

    fn hb(member: &str, epoch: i32, subs: Option<&[&str]>) -> Heartbeat {
        Heartbeat {
            member_id: member.into(),
            member_epoch: epoch,
            rack_id: None,
            subscribed: subs.map(|s| s.iter().map(|x| x.to_string()).collect()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    #[test]
    fn members_join_share_the_partition_and_leave() {
        let mut g = ShareGroup::default();
        let a = g
            .heartbeat("g", hb("a", 0, Some(&["t"])), 0, &S, &lookup)
            .unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(a.assignment.unwrap()[&topic()], vec![0]);
        let b = g
            .heartbeat("g", hb("b", 0, Some(&["t"])), 0, &S, &lookup)
            .unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(b.assignment.unwrap()[&topic()], vec![0]);
        let a = g.heartbeat("g", hb("a", 1, None), 0, &S, &lookup).unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(a.assignment.unwrap()[&topic()], vec![0]);
        let a = g.heartbeat("g", hb("a", 2, None), 0, &S, &lookup).unwrap();
        assert_eq!(a.assignment, None);
        let left = g.heartbeat("g", hb("a", -1, None), 0, &S, &lookup).unwrap();
        assert_eq!(left.member_epoch, -1);
        assert_eq!(g.group_epoch, 3);
        assert_eq!(g.state(), "Stable");
    }

    #[test]
    fn kafkas_errors() {
        let mut g = ShareGroup::default();
        let code = |r: Result<Answer, Refusal>| r.unwrap_err().0;
        assert_eq!(
            code(g.heartbeat("", hb("a", 0, Some(&["t"])), 0, &S, &lookup)),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(g.heartbeat("g", hb("a", 0, None), 0, &S, &lookup)),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code(g.heartbeat("g", hb("a", 3, None), 0, &S, &lookup)),
            ResponseError::UnknownMemberId.code()
        );
        g.heartbeat("g", hb("a", 0, Some(&["t"])), 0, &S, &lookup)
            .unwrap();
        assert_eq!(
            code(g.heartbeat("g", hb("a", 5, None), 0, &S, &lookup)),
            ResponseError::FencedMemberEpoch.code()
        );
        g.heartbeat("g", hb("b", 0, Some(&["t"])), 0, &S, &lookup)
            .unwrap();
        assert_eq!(
            code(g.heartbeat("g", hb("c", 0, Some(&["t"])), 0, &S, &lookup)),
            ResponseError::GroupMaxSizeReached.code()
        );
    }

    #[test]
    fn silent_members_expire() {
        let mut g = ShareGroup::default();
        g.heartbeat("g", hb("a", 0, Some(&["t"])), 0, &S, &lookup)
            .unwrap();
        g.heartbeat("g", hb("b", 0, Some(&["t"])), 50, &S, &lookup)
            .unwrap();
        assert_eq!(g.expire(100), vec!["a".to_string()]);
        assert_eq!(g.members.len(), 1);
        assert_eq!(g.group_epoch, 3);
    }

    #[test]
    fn a_topic_created_later_is_assigned() {
        let mut g = ShareGroup::default();
        let none = |_: &str| None;
        let a = g
            .heartbeat("g", hb("a", 0, Some(&["t"])), 0, &S, &none)
            .unwrap();
        assert_eq!(a.assignment, Some(BTreeMap::new()));
        let a = g.heartbeat("g", hb("a", 1, None), 0, &S, &lookup).unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(a.assignment.unwrap()[&topic()], vec![0]);
    }
}
