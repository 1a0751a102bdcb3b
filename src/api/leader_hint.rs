//! KIP-951: a Produce or Fetch that reached a replica which does not lead (any more) is told
//! who does, so the client need not wait for a metadata refresh: the partition's current
//! leader and epoch, and that leader's endpoint, from this broker's metadata image.

use crate::cluster::metadata::MetadataImage;

/// Errors that carry the current leader.
pub fn wants_hint(code: i16) -> bool {
    use kafka_protocol::ResponseError as E;
    code == E::NotLeaderOrFollower.code() || code == E::FencedLeaderEpoch.code()
}

/// (leader, leader epoch) of `topic`-`partition` in the image, if it has a leader.
pub fn current_leader(img: &MetadataImage, topic: &str, partition: i32) -> Option<(i32, i32)> {
    let t = img.topic(topic)?;
    let p = t.partitions.get(usize::try_from(partition).ok()?)?;
    p.has_leader().then_some((p.leader, p.leader_epoch))
}

/// The endpoint on `listener` (id, host, port, rack) of each broker in `ids`, in order.
pub fn endpoints(
    listener: &str,
    img: &MetadataImage,
    ids: &[i32],
) -> Vec<(i32, String, i32, Option<String>)> {
    ids.iter()
        .filter_map(|id| {
            let s = img.brokers.get(id)?;
            let e = s
                .registration
                .endpoints
                .iter()
                .find(|e| e.name == listener)?;
            Some((
                *id,
                e.host.clone(),
                e.port as i32,
                s.registration.rack.clone(),
            ))
        })
        .collect()
}
