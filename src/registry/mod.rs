//! A Confluent-compatible Schema Registry, kept in the compacted topic `_schemas` in
//! Confluent's record format (`records.rs`), served on the HTTP listener by
//! `http/registry/`.
//!
//! [`Registry`] is the shell around the pure [`store::Store`]: before answering, it reads
//! `_schemas` partition 0 on from where it stopped (up to the high watermark) and applies
//! each record, so every node answers reads from its own replica and a restarted broker
//! finds everything again. Writes are serialised through one writer: one at a time on this
//! node (the state caught up, the request decided, its records appended to `_schemas` and
//! committed, then read back), and only on the broker that leads `_schemas` partition 0;
//! another broker's `write` answers 50004, and `http/registry/forward.rs` sends the request
//! to the writer instead. Ids are decided by that one writer from a state that holds every
//! record in its log: a broker that has just become the leader first waits until its high
//! watermark reaches its log end (what the previous leader wrote is then all applied), so
//! ids stay unique across a change of writer.
//!
//! The topic is created on first write as Confluent's registry creates it: one partition,
//! `cleanup.policy=compact`, the replication factor of
//! `sluice.schema.registry.topic.replication.factor` (one on a single node).
//!
//! Beside the registry itself: the Confluent wire format that serialized keys and values
//! travel in ([`wire`]) and Avro's JSON encoding ([`avro_json`]), which the REST Proxy's
//! schema-based embedded formats use, and [`decode`], which shows such keys and values as
//! JSON in the console.

pub mod avro_json;
pub mod decode;
pub mod difference;
pub mod errors;
pub mod formats;
pub mod json_diff;
pub mod json_schema;
mod json_shape;
pub mod protobuf;
pub mod records;
pub mod store;
pub mod wire;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use tracing::warn;

use crate::clock::now_ms;
use crate::cluster::TopicInfo;
use crate::cluster::internal_topic::{InternalTopic, InternalTopics};
use crate::group::replay::Entry;
use crate::group::store::Leader;
pub use errors::Error;
use records::Record;
use store::Store;

pub const TOPIC: &str = "_schemas";

/// How long a write waits for its records to be committed.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a wait for the high watermark looks again, woken or not.
const RECHECK: Duration = Duration::from_millis(100);

/// The state read so far and where reading goes on.
#[derive(Default)]
struct Loaded {
    store: Store,
    next: i64,
}

pub struct Registry {
    topics: Arc<dyn InternalTopics>,
    replication_factor: i16,
    loaded: Mutex<Loaded>,
    /// One write at a time: decided, appended, committed and read back before the next.
    writes: tokio::sync::Mutex<()>,
}

impl Registry {
    pub fn new(topics: Arc<dyn InternalTopics>, replication_factor: i16) -> Registry {
        Registry {
            topics,
            replication_factor,
            loaded: Mutex::new(Loaded::default()),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// Answers from the state, caught up with `_schemas` first.
    pub fn read<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        let mut l = self.loaded.lock().unwrap();
        self.catch_up(&mut l);
        f(&l.store)
    }

    /// Applies the records of `_schemas` past `l.next`, up to its high watermark.
    fn catch_up(&self, l: &mut Loaded) {
        let Some(p) = self
            .topics
            .topic(TOPIC)
            .and_then(|t| t.partition(0).cloned())
        else {
            return;
        };
        let store = &mut l.store;
        let read = crate::group::replay::replay_from(&p, l.next, |e| {
            let Entry::Record {
                key, value, offset, ..
            } = e
            else {
                return;
            };
            match records::decode(&key, value.as_deref()) {
                Ok(Some(r)) => store.apply(r),
                Ok(None) => {}
                Err(why) => warn!("{TOPIC}-0 offset {offset}: unreadable record: {why}"),
            }
        });
        match read {
            Ok(next) => l.next = next,
            Err(e) => warn!("cannot read {TOPIC}: {e:#}"),
        }
    }

    /// Decides a write on the caught-up state (`decide` gives the answer and the records to
    /// append), appends the records and waits until they are committed and applied.
    pub async fn write<T>(
        &self,
        decide: impl FnOnce(&Store) -> Result<(T, Vec<Record>), Error>,
    ) -> Result<T, Error> {
        let _one = self.writes.lock().await;
        let topic = self.ensure_topic().await?;
        let p = topic.partition(0).cloned().ok_or(Error::not_leader())?;
        if !p.is_leader() {
            return Err(Error::not_leader());
        }
        let committed = crate::group::loader::committed(&p, || p.is_leader());
        match tokio::time::timeout(WRITE_TIMEOUT, committed).await {
            Ok(true) => {}
            Ok(false) => return Err(Error::not_leader()),
            Err(_) => {
                return Err(Error::timeout(format!(
                    "{TOPIC} is not writable yet (its new leader has not committed its log)"
                )));
            }
        }
        let (answer, records) = {
            let mut l = self.loaded.lock().unwrap();
            self.catch_up(&mut l);
            decide(&l.store)?
        };
        if records.is_empty() {
            return Ok(answer);
        }
        let encoded: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            records.iter().map(records::encode).collect();
        let batch: crate::group::store::Records = encoded
            .into_iter()
            .map(|(k, v)| (k.into(), v.map(Into::into)))
            .collect();
        let mut buf = crate::group::store::encode_batch(&batch, now_ms(), None)
            .map_err(|e| Error::store(format!("{e:#}")))?;
        let at = Leader {
            partition: 0,
            epoch: p.leader_epoch(),
        };
        crate::group::store::append_committed(
            &*self.topics,
            TOPIC,
            TOPIC,
            at,
            &mut buf,
            WRITE_TIMEOUT,
        )
        .await
        .map_err(|code| match E::try_from_code(code) {
            Some(E::NotCoordinator) => Error::not_leader(),
            Some(E::CoordinatorNotAvailable) => Error::timeout(format!(
                "{TOPIC} is not writable yet (too few in-sync replicas)"
            )),
            other => Error::store(format!("{other:?}")),
        })?;
        let mut l = self.loaded.lock().unwrap();
        self.catch_up(&mut l);
        Ok(answer)
    }

    /// The offset of `_schemas` partition 0 the state is read up to.
    pub fn position(&self) -> i64 {
        self.loaded.lock().unwrap().next
    }

    /// Waits, up to `timeout`, until the state is read up to `offset` (a write the writer
    /// answered at that position is then seen here). False when the time ran out, or this
    /// broker holds no replica of `_schemas` to read from.
    pub async fn caught_up_to(&self, offset: i64, timeout: Duration) -> bool {
        let Some(p) = self
            .topics
            .topic(TOPIC)
            .and_then(|t| t.partition(0).cloned())
        else {
            return false;
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let waiter = Arc::new(tokio::sync::Notify::new());
            p.add_waiter(&waiter);
            {
                let mut l = self.loaded.lock().unwrap();
                self.catch_up(&mut l);
                if l.next >= offset {
                    return true;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            let recheck = (tokio::time::Instant::now() + RECHECK).min(deadline);
            let _ = tokio::time::timeout_at(recheck, waiter.notified()).await;
        }
    }

    async fn ensure_topic(&self) -> Result<Arc<TopicInfo>, Error> {
        let configs = [("cleanup.policy", "compact".to_string())];
        self.topics
            .ensure(InternalTopic::new(
                TOPIC,
                1,
                self.replication_factor,
                &configs,
            ))
            .await
            .map_err(|_| Error::timeout(format!("{TOPIC} cannot be created yet")))
    }
}
