//! Small helpers shared by the group API modules.

use kafka_protocol::ResponseError;
use kafka_protocol::protocol::StrBytes;

use super::Base;
use crate::group::coordinator::CommitOffset;

pub fn sb(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

/// One partition of an OffsetCommit or TxnOffsetCommit request.
pub struct RequestedOffset {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// A commit request's offsets against the topics this broker knows: those of known
/// partitions go to the coordinator, the others answer UNKNOWN_TOPIC_OR_PARTITION.
pub struct ResolvedCommit {
    /// The offsets of known partitions, in request order.
    pub offsets: Vec<CommitOffset>,
    /// Per requested topic, per partition: the error code to answer.
    pub codes: Vec<Vec<i16>>,
    /// Where each of `offsets` answers in `codes`: (topic index, partition index).
    slots: Vec<(usize, usize)>,
}

impl ResolvedCommit {
    /// `refused` names the error of a topic the caller may not commit for (authorization,
    /// checked before the topic's existence).
    pub fn new(
        b: &Base,
        topics: Vec<(String, Vec<RequestedOffset>)>,
        refused: impl Fn(&str) -> Option<i16>,
    ) -> ResolvedCommit {
        let mut r = ResolvedCommit {
            offsets: Vec::new(),
            codes: Vec::new(),
            slots: Vec::new(),
        };
        for (ti, (name, partitions)) in topics.into_iter().enumerate() {
            let topic = b.controller.topic(&name);
            let mut codes = Vec::new();
            if let Some(code) = refused(&name) {
                codes.resize(partitions.len(), code);
                r.codes.push(codes);
                continue;
            }
            for (pi, p) in partitions.into_iter().enumerate() {
                match &topic {
                    Some(info)
                        if p.partition >= 0 && (p.partition as usize) < info.partition_count =>
                    {
                        r.offsets.push(CommitOffset {
                            topic: info.name.to_string(),
                            partition: p.partition,
                            offset: p.offset,
                            leader_epoch: p.leader_epoch,
                            metadata: p.metadata,
                        });
                        r.slots.push((ti, pi));
                        codes.push(0);
                    }
                    _ => codes.push(ResponseError::UnknownTopicOrPartition.code()),
                }
            }
            r.codes.push(codes);
        }
        r
    }

    /// Takes the coordinator's answer for `offsets`: one code each, or one for all.
    pub fn answer(&mut self, result: &Result<Vec<i16>, i16>) {
        for (i, &(ti, pi)) in self.slots.iter().enumerate() {
            self.codes[ti][pi] = match result {
                Ok(codes) => codes[i],
                Err(code) => *code,
            };
        }
    }
}
