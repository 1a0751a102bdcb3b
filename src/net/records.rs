//! Record batches as a Kafka client reads them from a Fetch answer: the answer's records
//! split into whole v2 batches (a Fetch may end inside one, which is left out), and each
//! batch decoded into its records, compressed batches through the log's codecs. Nothing in
//! the answer is trusted: odd lengths end the split, and a batch that does not decode is an
//! error, never a panic.

use std::panic::AssertUnwindSafe;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

/// A compressed batch decompresses to at most this.
const MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

/// A consumer's Fetch (v12, no session, read uncommitted) of one partition from `offset`, at
/// most `max_bytes`, waiting up to `max_wait_ms` for a first record.
pub fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: i32,
    max_wait_ms: i32,
) -> FetchRequest {
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.current_leader_epoch = -1;
    fp.fetch_offset = offset;
    fp.last_fetched_epoch = -1;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = max_bytes;
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(StrBytes::from_string(topic.to_string()));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = i32::from(max_wait_ms > 0);
    req.max_bytes = max_bytes;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = vec![ft];
    req
}

/// One whole batch of a Fetch answer's records.
#[derive(Debug, PartialEq, Eq)]
pub struct RawBatch {
    pub base_offset: i64,
    /// The offset after the batch's last.
    pub next_offset: i64,
    pub control: bool,
    pub bytes: Bytes,
}

/// The batch header's size up to and including the record count (magic 2).
const BATCH_HEADER: usize = 61;

/// Splits records into whole v2 batches; a cut-off last batch (a Fetch may end inside one)
/// and anything after a batch whose length makes no sense are left out.
pub fn split_batches(b: &Bytes) -> Vec<RawBatch> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while b.len() - at >= BATCH_HEADER {
        let h = &b[at..];
        let base_offset = i64::from_be_bytes(h[0..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(h[8..12].try_into().unwrap_or_default());
        let Ok(len) = usize::try_from(len) else { break };
        let total = 12 + len;
        if total < BATCH_HEADER || total > b.len() - at {
            break;
        }
        let magic = h[16];
        let attributes = i16::from_be_bytes([h[21], h[22]]);
        let last_delta = i32::from_be_bytes(h[23..27].try_into().unwrap_or_default());
        out.push(RawBatch {
            base_offset,
            next_offset: base_offset
                .saturating_add(i64::from(last_delta))
                .saturating_add(1),
            control: magic != 2 || attributes & 0x20 != 0,
            bytes: b.slice(at..at + total),
        });
        at += total;
    }
    out
}

/// The records of one batch; never panics on odd data.
pub fn decode(batch: Bytes) -> Result<Vec<Record>, String> {
    let decompress = |data: &mut Bytes, c: Compression| -> anyhow::Result<Bytes> {
        let codec = crate::log::Compression::from_id(c as u8)
            .ok_or_else(|| anyhow::anyhow!("unknown codec {}", c as u8))?;
        let out = crate::log::compression::decompress(codec, data, MAX_DECOMPRESSED)?;
        Ok(Bytes::from(out))
    };
    let mut b = batch;
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        RecordBatchDecoder::decode_with_custom_compression(&mut b, Some(decompress))
    }));
    match r {
        Ok(Ok(set)) => Ok(set.records),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err("the decoder panicked".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions, TimestampType};

    fn batch(base: i64, values: &[&str], compression: Compression) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base + i as i64,
                // The encoder keeps records in one batch while offset - sequence is constant.
                sequence: i as i32 - 1,
                timestamp: 1000 + i as i64,
                key: None,
                value: Some(Bytes::from(v.to_string())),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        if compression == Compression::None {
            RecordBatchEncoder::encode(&mut buf, &records, &opts).unwrap();
        } else {
            let codec = crate::log::Compression::from_id(compression as u8).unwrap();
            RecordBatchEncoder::encode_with_custom_compression(
                &mut buf,
                &records,
                &RecordEncodeOptions {
                    version: 2,
                    compression,
                },
                Some(
                    |input: &mut bytes::BytesMut, out: &mut bytes::BytesMut, _c| {
                        out.extend_from_slice(&crate::log::compression::compress(codec, input));
                        Ok(())
                    },
                ),
            )
            .unwrap();
        }
        buf.freeze()
    }

    #[test]
    fn batches_split_and_decode_compressed_or_not() {
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&batch(0, &["a", "b"], Compression::None));
        all.extend_from_slice(&batch(2, &["c"], Compression::Gzip));
        all.extend_from_slice(&batch(3, &["d", "e", "f"], Compression::Zstd));
        let whole = all.len();
        // A Fetch may end inside a batch: the cut one is left out.
        all.extend_from_slice(&batch(6, &["g"], Compression::None)[..30]);
        let all = all.freeze();
        let batches = split_batches(&all);
        assert_eq!(batches.len(), 3);
        assert_eq!(batches.iter().map(|b| b.bytes.len()).sum::<usize>(), whole);
        assert_eq!(batches[2].next_offset, 6);
        let values: Vec<String> = batches
            .into_iter()
            .flat_map(|b| decode(b.bytes).unwrap())
            .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(values, ["a", "b", "c", "d", "e", "f"]);
    }

    #[test]
    fn odd_batches_are_errors_not_panics() {
        let mut b = batch(0, &["x"], Compression::None).to_vec();
        let n = b.len();
        b[n - 3] ^= 0xff;
        // Whatever a flipped byte makes of the batch, decoding returns.
        let _ = decode(Bytes::from(b));
        let mut junk = vec![0u8; 80];
        junk[11] = 68;
        junk[16] = 2;
        for b in split_batches(&Bytes::from(junk)) {
            assert!(decode(b.bytes).is_err());
        }
        assert!(split_batches(&Bytes::from_static(&[0xff; 100])).is_empty());
    }
}
