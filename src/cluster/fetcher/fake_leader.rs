//! A leader broker for the fetcher's tests: a TCP listener on 127.0.0.1 that decodes Fetch,
//! OffsetForLeaderEpoch and ListOffsets requests with kafka-protocol and answers them from
//! real leader [`Partition`]s, as the broker's handlers do (`read_for_follower`,
//! `end_offset_for_epoch`, the log start). It records what it was asked, and can be told to
//! misbehave on the next requests (close the connection, answer garbage).

use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use crate::cluster::Partition;
use crate::cluster::errors::partition_error_code;
use crate::cluster::partition::{FetchSlice, FollowerFetch};
use crate::log::now_ms;

/// Ways to misbehave on a request, instead of answering it.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Close the connection.
    Drop,
    /// A frame of the right correlation id followed by bytes that decode as nothing.
    Garbage,
    /// A well-formed answer to another correlation id.
    WrongCorrelation,
    /// A fetch answer whose topic array claims 0x7fffffff entries.
    HugeCount,
    /// A frame size of -1.
    NegativeSize,
}

/// One fetch request as received.
#[derive(Debug, Clone)]
pub struct SeenFetch {
    pub replica_id: i32,
    pub replica_epoch: i64,
    pub partitions: Vec<(Uuid, i32)>,
}

#[derive(Default)]
pub struct Shared {
    partitions: Mutex<Vec<Arc<Partition>>>,
    pub fetches: Mutex<Vec<SeenFetch>>,
    pub epoch_requests: AtomicUsize,
    pub list_offsets_requests: AtomicUsize,
    pub diverging_answers: AtomicUsize,
    pub connections: AtomicUsize,
    faults: Mutex<VecDeque<Fault>>,
    /// Answer OffsetForLeaderEpoch as if every asked epoch ended at the end of time, so
    /// that only a fetch's diverging epoch reveals a divergence.
    pub lie_about_epochs: AtomicBool,
}

pub struct FakeLeader {
    pub addr: String,
    pub shared: Arc<Shared>,
}

impl FakeLeader {
    pub async fn start(partitions: Vec<Arc<Partition>>) -> FakeLeader {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let shared = Arc::new(Shared::default());
        *shared.partitions.lock().unwrap() = partitions;
        let s = shared.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                s.connections.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                tokio::spawn(async move {
                    let _ = serve(&s, stream).await;
                });
            }
        });
        FakeLeader { addr, shared }
    }

    pub fn inject(&self, faults: &[Fault]) {
        self.shared.faults.lock().unwrap().extend(faults);
    }

    pub fn faults_left(&self) -> usize {
        self.shared.faults.lock().unwrap().len()
    }

    pub fn fetches(&self) -> Vec<SeenFetch> {
        self.shared.fetches.lock().unwrap().clone()
    }

    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Shared {
    fn by_id(&self, id: Uuid, index: i32) -> Option<Arc<Partition>> {
        let ps = self.partitions.lock().unwrap();
        ps.iter()
            .find(|p| p.topic_id == id && p.index == index)
            .cloned()
    }

    fn by_name(&self, name: &str, index: i32) -> Option<Arc<Partition>> {
        let ps = self.partitions.lock().unwrap();
        ps.iter()
            .find(|p| &*p.topic == name && p.index == index)
            .cloned()
    }
}

async fn serve(s: &Shared, mut stream: TcpStream) -> Result<()> {
    loop {
        let size = stream.read_i32().await?;
        let mut buf = vec![0u8; size.max(0) as usize];
        stream.read_exact(&mut buf).await?;
        if buf.len() < 4 {
            bail!("short frame");
        }
        let key = ApiKey::try_from(i16::from_be_bytes([buf[0], buf[1]]))
            .map_err(|_| anyhow::anyhow!("unknown api key"))?;
        let version = i16::from_be_bytes([buf[2], buf[3]]);
        let mut body = Bytes::from(buf);
        let header = RequestHeader::decode(&mut body, key.request_header_version(version))?;
        let corr = header.correlation_id;
        let fault = s.faults.lock().unwrap().pop_front();
        let mut out = BytesMut::new();
        out.put_i32(0);
        let mut rh = ResponseHeader::default();
        rh.correlation_id = corr;
        match fault {
            Some(Fault::Drop) => return Ok(()),
            Some(Fault::NegativeSize) => {
                stream.write_all(&(-1i32).to_be_bytes()).await?;
                continue;
            }
            Some(Fault::WrongCorrelation) => rh.correlation_id = corr.wrapping_add(1000),
            _ => {}
        }
        rh.encode(&mut out, key.response_header_version(version))?;
        match fault {
            Some(Fault::Garbage) => out.put_slice(&[0xff; 40]),
            Some(Fault::HugeCount) => {
                out.put_i32(0); // throttle
                out.put_i16(0); // error
                out.put_i32(0); // session
                out.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // compact array of 2^31-2
            }
            _ => match key {
                ApiKey::Fetch => {
                    let req = FetchRequest::decode(&mut body, version)?;
                    fetch(s, req).await.encode(&mut out, version)?;
                }
                ApiKey::OffsetForLeaderEpoch => {
                    let req = OffsetForLeaderEpochRequest::decode(&mut body, version)?;
                    offsets_for_epochs(s, req).encode(&mut out, version)?;
                }
                ApiKey::ListOffsets => {
                    let req = ListOffsetsRequest::decode(&mut body, version)?;
                    log_starts(s, req).encode(&mut out, version)?;
                }
                other => bail!("unexpected {other:?}"),
            },
        }
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        stream.write_all(&out).await?;
    }
}

fn bytes_of(s: &FetchSlice) -> Bytes {
    let mut buf = vec![0u8; s.len];
    if let Some(f) = &s.file {
        f.read_exact_at(&mut buf, s.position).unwrap();
    }
    Bytes::from(buf)
}

/// A follower fetch, long-polled up to max_wait_ms for bytes, as the broker serves it.
async fn fetch(s: &Shared, req: FetchRequest) -> FetchResponse {
    let replica = req.replica_state.replica_id.0;
    s.fetches.lock().unwrap().push(SeenFetch {
        replica_id: replica,
        replica_epoch: req.replica_state.replica_epoch,
        partitions: req
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition)))
            .collect(),
    });
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    loop {
        let waiter = Arc::new(Notify::new());
        let mut resp = FetchResponse::default();
        let mut bytes = 0usize;
        let mut answer_now = false;
        for t in &req.topics {
            let mut tr = FetchableTopicResponse::default();
            tr.topic_id = t.topic_id;
            for fp in &t.partitions {
                let mut pd = PartitionData::default();
                pd.partition_index = fp.partition;
                pd.records = Some(Bytes::new());
                let Some(p) = s.by_id(t.topic_id, fp.partition) else {
                    pd.error_code = kafka_protocol::ResponseError::UnknownTopicId.code();
                    answer_now = true;
                    tr.partitions.push(pd);
                    continue;
                };
                p.add_waiter(&waiter);
                let fetch = FollowerFetch {
                    offset: fp.fetch_offset,
                    max_bytes: fp.partition_max_bytes.max(0) as usize,
                    min_one_batch: bytes == 0,
                    current_leader_epoch: fp.current_leader_epoch,
                    last_fetched_epoch: fp.last_fetched_epoch,
                    log_start_offset: fp.log_start_offset,
                    broker_epoch: req.replica_state.replica_epoch,
                };
                match p.read_for_follower(replica, &fetch, now_ms()) {
                    Ok(r) => {
                        let data = bytes_of(&r.slice);
                        bytes += data.len();
                        pd.records = Some(data);
                        if let Some((epoch, end_offset)) = r.diverging {
                            pd.diverging_epoch.epoch = epoch;
                            pd.diverging_epoch.end_offset = end_offset;
                            s.diverging_answers.fetch_add(1, Ordering::SeqCst);
                            answer_now = true;
                        }
                        pd.high_watermark = p.high_watermark();
                        pd.last_stable_offset = pd.high_watermark;
                        pd.log_start_offset = p.log_start_offset();
                    }
                    Err(e) => {
                        pd.error_code = partition_error_code(&e);
                        pd.high_watermark = -1;
                        pd.last_stable_offset = -1;
                        pd.log_start_offset = -1;
                        answer_now = true;
                    }
                }
                tr.partitions.push(pd);
            }
            resp.responses.push(tr);
        }
        if answer_now || bytes >= req.min_bytes.max(0) as usize || Instant::now() >= deadline {
            return resp;
        }
        let _ = tokio::time::timeout_at(deadline, waiter.notified()).await;
    }
}

fn offsets_for_epochs(
    s: &Shared,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    s.epoch_requests.fetch_add(1, Ordering::SeqCst);
    let lie = s.lie_about_epochs.load(Ordering::SeqCst);
    let mut resp = OffsetForLeaderEpochResponse::default();
    for t in req.topics {
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic.clone();
        for asked in t.partitions {
            let mut r = EpochEndOffset::default();
            r.partition = asked.partition;
            match s.by_name(t.topic.0.as_str(), asked.partition) {
                None => {
                    r.error_code = kafka_protocol::ResponseError::UnknownTopicOrPartition.code()
                }
                Some(p) => {
                    match p.end_offset_for_epoch(asked.current_leader_epoch, asked.leader_epoch) {
                        Ok(_) if lie => {
                            r.leader_epoch = asked.leader_epoch;
                            r.end_offset = i64::MAX;
                        }
                        Ok((epoch, end)) => {
                            r.leader_epoch = epoch;
                            r.end_offset = end;
                        }
                        Err(e) => r.error_code = partition_error_code(&e),
                    }
                }
            }
            tr.partitions.push(r);
        }
        resp.topics.push(tr);
    }
    resp
}

/// ListOffsets: only the log start (-2) is asked by the fetcher.
fn log_starts(s: &Shared, req: ListOffsetsRequest) -> ListOffsetsResponse {
    s.list_offsets_requests.fetch_add(1, Ordering::SeqCst);
    let mut resp = ListOffsetsResponse::default();
    for t in req.topics {
        let mut tr = ListOffsetsTopicResponse::default();
        tr.name = t.name.clone();
        for asked in t.partitions {
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = asked.partition_index;
            r.timestamp = -1;
            r.offset = -1;
            match s.by_name(t.name.0.as_str(), asked.partition_index) {
                None => {
                    r.error_code = kafka_protocol::ResponseError::UnknownTopicOrPartition.code()
                }
                Some(p) => match p.check_epoch(asked.current_leader_epoch) {
                    Ok(()) if asked.timestamp == -2 => r.offset = p.log_start_offset(),
                    Ok(()) => r.error_code = kafka_protocol::ResponseError::InvalidRequest.code(),
                    Err(e) => r.error_code = partition_error_code(&e),
                },
            }
            tr.partitions.push(r);
        }
        resp.topics.push(tr);
    }
    resp
}
