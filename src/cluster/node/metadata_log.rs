//! The metadata log as the quorum's state machine: each Raft entry is one controller decision,
//! a list of [`MetadataRecord`]s applied together, so no operation is ever half-applied. After
//! each entry the new image is published (an `Arc` in a watch channel) for every reader.

use std::sync::Arc;

use tokio::sync::watch;
use tracing::warn;

use crate::cluster::metadata::{MetadataImage, MetadataRecord};
use crate::cluster::quorum::StateMachine;

pub struct MetadataLog {
    image: MetadataImage,
    publish: watch::Sender<Arc<MetadataImage>>,
}

impl MetadataLog {
    pub fn new() -> (MetadataLog, watch::Receiver<Arc<MetadataImage>>) {
        let (tx, rx) = watch::channel(Arc::new(MetadataImage::default()));
        (
            MetadataLog {
                image: MetadataImage::default(),
                publish: tx,
            },
            rx,
        )
    }
}

pub fn encode_entry(records: &[MetadataRecord]) -> Vec<u8> {
    postcard::to_stdvec(records).expect("metadata records always encode")
}

pub fn decode_entry(bytes: &[u8]) -> anyhow::Result<Vec<MetadataRecord>> {
    postcard::from_bytes(bytes).map_err(|e| anyhow::anyhow!("bad metadata entry: {e}"))
}

impl StateMachine for MetadataLog {
    fn apply(&mut self, index: u64, record: &[u8]) {
        match decode_entry(record) {
            Ok(records) => {
                for r in &records {
                    self.image.apply(index, r);
                }
            }
            // Every node skips the same entry, so the images stay equal.
            Err(e) => warn!("metadata log entry {index} skipped: {e}"),
        }
        self.image.offset = index;
        self.publish.send_replace(Arc::new(self.image.clone()));
    }

    fn snapshot(&self) -> Vec<u8> {
        self.image.to_snapshot()
    }

    fn restore(&mut self, index: u64, snapshot: &[u8]) -> anyhow::Result<()> {
        let mut img = MetadataImage::from_snapshot(snapshot)?;
        img.offset = index;
        self.image = img;
        self.publish.send_replace(Arc::new(self.image.clone()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::metadata::{BrokerRegistration, PartitionRecord};

    #[test]
    fn entries_apply_as_one_and_snapshots_restore_the_image() {
        let (mut log, rx) = MetadataLog::new();
        let id = uuid::Uuid::new_v4();
        let reg = BrokerRegistration {
            broker_id: 1,
            incarnation: uuid::Uuid::new_v4(),
            endpoints: vec![],
            rack: Some("a".into()),
        };
        let mut p = PartitionRecord::for_test(&[1], &[1], 1);
        p.topic_id = id;
        log.apply(
            3,
            &encode_entry(&[
                MetadataRecord::ClusterId("c1".into()),
                MetadataRecord::RegisterBroker(reg),
                MetadataRecord::Topic {
                    name: "t".into(),
                    id,
                },
                MetadataRecord::Partition(p.clone()),
            ]),
        );
        log.apply(4, b"\xff\xff\xff");
        let img = rx.borrow().clone();
        assert_eq!(img.offset, 4);
        assert_eq!(img.brokers[&1].epoch, 3);
        assert_eq!(img.topic("t").unwrap().partitions, vec![p]);
        let snap = log.snapshot();
        let (mut other, rx2) = MetadataLog::new();
        other.restore(4, &snap).unwrap();
        let back = rx2.borrow().clone();
        assert_eq!(back.cluster_id.as_deref(), Some("c1"));
        assert_eq!(back.brokers, img.brokers);
        assert_eq!(
            back.topic("t").unwrap().partitions,
            img.topic("t").unwrap().partitions
        );
        assert!(other.restore(5, b"junk").is_err());
    }
}
