//! Replaying `__consumer_offsets` into groups, as Kafka's coordinator loader does, when this
//! broker becomes the leader of partitions ([`load_partitions`]).
//!
//! Records apply in log order (later ones win; tombstones delete). Offsets in a transactional
//! batch are pending under its producer until that producer's marker (a control batch) in the
//! same partition commits them or aborts them; a transaction still open at the end of the log
//! stays pending (its marker comes later, live). [`Replay`] is the pure part: it takes
//! [`Entry`]s and builds the groups.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tracing::{info, warn};

use super::consumer::persist::Loading;
use super::consumer::records as consumer_records;
use super::offset_state::{Committed, OffsetState, TxnKey};
use super::records::{self, GroupValue, Key};
use super::store::TOPIC;
use crate::cluster::Partition;

/// One entry of `__consumer_offsets`, as replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A record with a key, at `offset` of `partition`. `producer`: the producer id of the
    /// transactional batch holding it.
    Record {
        partition: i32,
        offset: i64,
        producer: Option<i64>,
        key: Bytes,
        value: Option<Bytes>,
    },
    /// A transaction marker of `producer_id` in `partition`.
    Marker {
        partition: i32,
        producer_id: i64,
        commit: bool,
    },
}

/// What the log says about one group after replay.
#[derive(Default, Debug)]
pub struct Loaded {
    pub metadata: Option<GroupValue>,
    pub offsets: OffsetState,
    /// The group's consumer protocol (KIP-848) records, if it has any.
    pub consumer: Option<Loading>,
}

/// Groups being replayed, with the groups of each open transaction (found again at its
/// marker).
#[derive(Default)]
pub struct Replay {
    groups: HashMap<String, Loaded>,
    open: HashMap<TxnKey, HashSet<String>>,
}

impl Replay {
    pub fn apply(&mut self, e: Entry) {
        match e {
            Entry::Record {
                partition,
                offset,
                producer,
                key,
                value,
            } => self.record(partition, offset, producer, key, value),
            Entry::Marker {
                partition,
                producer_id,
                commit,
            } => {
                for g in self
                    .open
                    .remove(&(partition, producer_id))
                    .unwrap_or_default()
                {
                    if let Some(l) = self.groups.get_mut(&g) {
                        l.offsets.complete(partition, producer_id, commit);
                    }
                }
            }
        }
    }

    fn record(
        &mut self,
        partition: i32,
        offset: i64,
        producer: Option<i64>,
        key: Bytes,
        value: Option<Bytes>,
    ) {
        let key = match records::decode_key(key.clone()) {
            Ok(Some(k)) => k,
            Ok(None) => return self.consumer_record(key, value),
            Err(e) => {
                warn!("{TOPIC}: unreadable key: {e}");
                return;
            }
        };
        match (key, value) {
            (
                Key::Offset {
                    group,
                    topic,
                    partition: p,
                },
                v,
            ) => match v.map(records::decode_offset) {
                Some(Ok(v)) => {
                    let c = Committed::from_record(v, offset);
                    let offsets = &mut self.groups.entry(group.clone()).or_default().offsets;
                    match producer {
                        Some(pid) => {
                            offsets.add_pending(partition, pid, (topic, p), c);
                            self.open.entry((partition, pid)).or_default().insert(group);
                        }
                        None => offsets.commit((topic, p), c),
                    }
                }
                Some(Err(e)) => warn!(group, "{TOPIC}: unreadable offset value: {e}"),
                None => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.offsets.delete(&(topic, p));
                    }
                }
            },
            (Key::Group { group }, v) => match v.map(records::decode_group) {
                Some(Ok(v)) => self.groups.entry(group).or_default().metadata = Some(v),
                Some(Err(e)) => warn!(group, "{TOPIC}: unreadable group value: {e}"),
                None => {
                    // A group tombstone deletes the group; its offsets were tombstoned before it.
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.metadata = None;
                    }
                }
            },
        }
    }

    /// A consumer group record (other record types are not used here).
    fn consumer_record(&mut self, key: Bytes, value: Option<Bytes>) {
        let key = match consumer_records::decode_key(key) {
            Ok(Some(k)) => k,
            Ok(None) => return,
            Err(e) => {
                warn!("{TOPIC}: unreadable key: {e}");
                return;
            }
        };
        let group = key.group().to_string();
        if value.is_none() && !self.groups.contains_key(&group) {
            return;
        }
        let slot = &mut self.groups.entry(group.clone()).or_default().consumer;
        if let Err(e) = Loading::apply(slot, &key, value) {
            warn!(group, "{TOPIC}: unreadable consumer group value: {e}");
        }
    }

    /// The groups found: those with metadata, consumer group records, offsets or an open
    /// transaction.
    pub fn finish(mut self) -> HashMap<String, Loaded> {
        self.groups
            .retain(|_, g| g.metadata.is_some() || g.consumer.is_some() || !g.offsets.is_empty());
        self.groups
    }
}

/// The group an entry belongs to (None for markers and unreadable keys).
fn group_of(e: &Entry) -> Option<String> {
    match e {
        Entry::Record { key, .. } => match records::decode_key(key.clone()) {
            Ok(Some(k)) => Some(k.group().to_string()),
            Ok(None) => match consumer_records::decode_key(key.clone()) {
                Ok(Some(k)) => Some(k.group().to_string()),
                _ => None,
            },
            Err(_) => None,
        },
        Entry::Marker { .. } => None,
    }
}

fn partition_of(e: &Entry) -> i32 {
    match e {
        Entry::Record { partition, .. } | Entry::Marker { partition, .. } => *partition,
    }
}

/// The groups of partitions `parts` (of `count`) of `__consumer_offsets`, this broker having
/// become their leader: for each partition, the groups whose home it is.
pub fn load_partitions(
    parts: &[Arc<Partition>],
    count: i32,
) -> anyhow::Result<Vec<HashMap<String, Loaded>>> {
    let mut found: Vec<HashMap<String, Loaded>> = parts.iter().map(|_| HashMap::new()).collect();
    let slot: HashMap<i32, usize> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| (p.index, i))
        .collect();
    for (group, l) in replay_together(parts, count)? {
        if let Some(&i) = slot.get(&records::partition_for(&group, count)) {
            found[i].insert(group, l);
        }
    }
    Ok(found)
}

/// Reads partitions `parts` (of `count`) of `__consumer_offsets` from their start to their
/// high watermark.
///
/// A group's records are normally all in its own partition. If the topic was grown since they
/// were written, older ones sit in another partition; then those are applied first and the
/// group's own partition (where it writes now) last, so the newest state wins. Markers apply
/// in both passes: each ends only the transactions of its own partition. A group's older
/// records are found so only when this broker holds the partition they sit in (on one node,
/// always).
fn replay_together(
    parts: &[Arc<Partition>],
    count: i32,
) -> anyhow::Result<HashMap<String, Loaded>> {
    let away = |e: &Entry| -> Option<bool> {
        group_of(e).map(|g| records::partition_for(&g, count) != partition_of(e))
    };
    let mut replay = Replay::default();
    let mut records = 0usize;
    let mut moved = false;
    replay_each(parts, |e| {
        moved |= away(&e) == Some(true);
        replay.apply(e);
        records += 1;
    })?;
    if moved {
        info!("{TOPIC}: groups with records outside their partition: replaying them first");
        replay = Replay::default();
        replay_each(parts, |e| {
            if away(&e) != Some(false) {
                replay.apply(e)
            }
        })?;
        replay_each(parts, |e| {
            if away(&e) != Some(true) {
                replay.apply(e)
            }
        })?;
    }
    let groups = replay.finish();
    tracing::debug!(
        partitions = parts.len(),
        records,
        groups = groups.len(),
        "replayed {TOPIC}"
    );
    Ok(groups)
}

/// Calls `f` for every entry of `parts`, in offset order within each partition, partitions
/// in the order given.
fn replay_each(parts: &[Arc<Partition>], mut f: impl FnMut(Entry)) -> anyhow::Result<()> {
    for p in parts {
        replay_partition(p, &mut f)?;
    }
    Ok(())
}

/// Calls `f` for every record with a key and every transaction marker of `p`, from its log
/// start to its high watermark (any coordinator's topic: `__transaction_state` is read so
/// too).
pub fn replay_partition(p: &Partition, f: impl FnMut(Entry)) -> anyhow::Result<()> {
    replay_from(p, 0, f).map(|_| ())
}

/// [`replay_partition`] from offset `from` on (or the log start, if later): records below
/// `from` are skipped. Returns the offset it read up to (the high watermark it saw), where
/// the next call starts.
pub fn replay_from(p: &Partition, from: i64, mut f: impl FnMut(Entry)) -> anyhow::Result<i64> {
    let from = from.max(p.log_start_offset());
    let mut offset = from;
    let end = p.high_watermark();
    while offset < end {
        let slice = p
            .read(offset, 1 << 20, true)
            .map_err(|e| anyhow::anyhow!("reading {}-{}: {e:?}", p.topic, p.index))?;
        if slice.len == 0 {
            break;
        }
        let Some(file) = slice.file else { break };
        let mut buf = vec![0u8; slice.len];
        std::os::unix::fs::FileExt::read_exact_at(&*file, &mut buf, slice.position)?;
        let buf = Bytes::from(buf);
        let mut pos = 0usize;
        for h in crate::log::batch::batches(&buf) {
            let h = h.map_err(|e| anyhow::anyhow!("{}-{}: {e}", p.topic, p.index))?;
            let whole = buf.slice(pos..pos + h.total_size());
            pos += h.total_size();
            offset = h.next_offset();
            if h.next_offset() <= from {
                continue;
            }
            if h.is_control() {
                match crate::log::control::parse_end_txn_marker(&whole) {
                    Ok(Some(m)) => f(Entry::Marker {
                        partition: p.index,
                        producer_id: h.producer_id,
                        commit: m.commit,
                    }),
                    Ok(None) => {}
                    Err(e) => warn!("{}-{}: unreadable control batch: {e}", p.topic, p.index),
                }
                continue;
            }
            if h.compression() != Some(crate::log::Compression::None) {
                warn!("{}-{}: skipping a compressed batch", p.topic, p.index);
                continue;
            }
            let mut b = whole;
            let set = match RecordBatchDecoder::decode(&mut b) {
                Ok(set) => set,
                Err(e) => {
                    warn!("{}-{}: unreadable batch: {e}", p.topic, p.index);
                    continue;
                }
            };
            let producer = h.is_transactional().then_some(h.producer_id);
            for r in set.records {
                if r.offset < from {
                    continue;
                }
                if let Some(key) = r.key {
                    f(Entry::Record {
                        partition: p.index,
                        offset: r.offset,
                        producer,
                        key,
                        value: r.value,
                    });
                }
            }
        }
    }
    Ok(offset.max(from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::{OffsetValue, encode_key, encode_offset};

    fn offset_record(
        partition: i32,
        at: i64,
        producer: Option<i64>,
        group: &str,
        p: i32,
        value: Option<i64>,
    ) -> Entry {
        Entry::Record {
            partition,
            offset: at,
            producer,
            key: encode_key(&Key::Offset {
                group: group.into(),
                topic: "t".into(),
                partition: p,
            }),
            value: value.map(|o| {
                encode_offset(&OffsetValue {
                    offset: o,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp: 1,
                })
            }),
        }
    }

    fn marker(partition: i32, producer_id: i64, commit: bool) -> Entry {
        Entry::Marker {
            partition,
            producer_id,
            commit,
        }
    }

    fn committed(l: &HashMap<String, Loaded>, g: &str, p: i32) -> Option<i64> {
        l.get(g)?
            .offsets
            .get(&("t".to_string(), p))
            .map(|c| c.offset)
    }

    #[test]
    fn markers_commit_or_abort_and_open_transactions_stay_pending() {
        let mut r = Replay::default();
        r.apply(offset_record(0, 0, None, "g", 0, Some(1)));
        r.apply(offset_record(0, 1, Some(7), "g", 0, Some(10)));
        r.apply(offset_record(0, 2, Some(7), "h", 0, Some(11)));
        r.apply(offset_record(0, 3, Some(8), "g", 1, Some(20)));
        r.apply(offset_record(0, 4, Some(9), "g", 2, Some(30)));
        r.apply(marker(0, 7, true));
        r.apply(marker(0, 8, false));
        // A marker of another partition ends another transaction.
        r.apply(marker(1, 9, true));
        let l = r.finish();
        assert_eq!(committed(&l, "g", 0), Some(10));
        assert_eq!(committed(&l, "h", 0), Some(11));
        assert_eq!(committed(&l, "g", 1), None);
        assert_eq!(committed(&l, "g", 2), None);
        let g = &l["g"].offsets;
        assert!(g.has_pending(&("t".into(), 2)) && g.has_producer(9));
        assert!(!g.has_producer(7) && !g.has_producer(8));
    }

    #[test]
    fn a_group_with_only_an_open_transaction_is_kept() {
        let mut r = Replay::default();
        r.apply(offset_record(0, 0, Some(7), "g", 0, Some(10)));
        let l = r.finish();
        assert!(l["g"].offsets.has_open_txns());
        assert_eq!(committed(&l, "g", 0), None);
    }

    #[test]
    fn a_tombstone_drops_pending_offsets_and_a_later_plain_commit_wins() {
        let mut r = Replay::default();
        r.apply(offset_record(0, 0, Some(7), "g", 0, Some(10)));
        r.apply(offset_record(0, 1, None, "g", 0, None));
        r.apply(offset_record(0, 2, Some(7), "g", 1, Some(11)));
        r.apply(offset_record(0, 3, None, "g", 1, Some(12)));
        r.apply(marker(0, 7, true));
        let l = r.finish();
        assert_eq!(committed(&l, "g", 0), None);
        assert_eq!(committed(&l, "g", 1), Some(12));
    }
}
