//! The coordinator of a cluster node: it serves only the groups of the `__consumer_offsets`
//! partitions it has loaded (NOT_COORDINATOR otherwise, COORDINATOR_LOAD_IN_PROGRESS while
//! loading), writes each group's records to its partition in the epoch it loaded it in, and
//! drops a partition's groups when it stops leading it. Paused tokio clock, in-memory log.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;

use super::coordinator::{Coordinator, SyncParams};
use super::offset_state::Committed;
use super::records;
use super::replay::Loaded;
use super::store::{Leader, MemoryLog};
use super::tests::{config, join_new, join_params, simple_commit, spawn_join, sync};
use crate::group::loader::PartitionLoads;

const PARTITIONS: i32 = 50;

fn clustered() -> (Arc<Coordinator>, Arc<MemoryLog>) {
    let log = Arc::new(MemoryLog::default());
    (Coordinator::clustered(config(0), log.clone()), log)
}

fn home(group: &str) -> i32 {
    records::partition_for(group, PARTITIONS)
}

/// A group id whose partition differs from `group`'s.
fn elsewhere(group: &str) -> String {
    (0..)
        .map(|i| format!("other-{i}"))
        .find(|g| home(g) != home(group))
        .unwrap()
}

/// Every group API answers `code` for `group`.
async fn all_answer(c: &Arc<Coordinator>, group: &str, code: i16) {
    assert_eq!(
        c.join(join_params(group, "", None, &["range"])).await.error,
        code
    );
    assert_eq!(
        c.join(join_params(group, "m-1", None, &["range"]))
            .await
            .error,
        code
    );
    let s = c
        .sync(SyncParams {
            group_id: group.into(),
            member_id: "m-1".into(),
            instance_id: None,
            generation: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        })
        .await;
    assert_eq!(s.error, code);
    assert_eq!(c.heartbeat(group, "m-1", None, 1).await, code);
    assert_eq!(c.leave(group, &[("m-1".into(), None)]).await.0, code);
    assert_eq!(c.commit(simple_commit(group, 1)).await, Err(code));
    assert_eq!(c.fetch_offsets(group, None, false).await.err(), Some(code));
    assert_eq!(
        c.delete_offsets(group, vec![("t".into(), 0)]).await,
        Err(code)
    );
    assert_eq!(c.describe(group).await.err(), Some(code));
    assert_eq!(c.delete_group(group).await, code);
}

#[tokio::test(start_paused = true)]
async fn only_loaded_partitions_are_served() {
    let (c, log) = clustered();
    let g = "g";
    let other = elsewhere(g);
    all_answer(&c, g, E::NotCoordinator.code()).await;
    assert!(c.list().await.is_empty());

    assert!(c.begin_load(home(g), 4, PARTITIONS));
    all_answer(&c, g, E::CoordinatorLoadInProgress.code()).await;
    all_answer(&c, &other, E::NotCoordinator.code()).await;

    // The replayed partition holds g's offset (and, from before the topic was laid out as
    // now, a record of a group that is not this partition's: left to its own coordinator).
    let mut loaded: HashMap<String, Loaded> = HashMap::new();
    for (id, offset) in [(g.to_string(), 17), (other.clone(), 5)] {
        let mut l = Loaded::default();
        l.offsets.commit(
            ("t".into(), 0),
            Committed {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 1,
                record_offset: 0,
            },
        );
        loaded.insert(id, l);
    }
    assert!(!c.finish_load(home(g), 3, HashMap::new()), "a stale load");
    assert!(c.finish_load(home(g), 4, loaded));
    let f = c.fetch_offsets(g, None, false).await.unwrap();
    assert_eq!(f[0].1[0].offset, 17);
    all_answer(&c, &other, E::NotCoordinator.code()).await;
    let listed: Vec<String> = c.list().await.into_iter().map(|l| l.group_id).collect();
    assert_eq!(listed, vec![g.to_string()]);

    // Writes go to the group's partition in the epoch it was loaded in.
    assert_eq!(c.commit(simple_commit(g, 18)).await, Ok(vec![0]));
    assert_eq!(
        log.targets.lock().unwrap().last().copied(),
        Some(Some(Leader {
            partition: home(g),
            epoch: 4
        }))
    );
    // Led again at a newer epoch without a gap: still served, writes carry the new epoch.
    assert!(!c.begin_load(home(g), 5, PARTITIONS));
    assert_eq!(c.commit(simple_commit(g, 19)).await, Ok(vec![0]));
    assert_eq!(
        log.targets.lock().unwrap().last().copied(),
        Some(Some(Leader {
            partition: home(g),
            epoch: 5
        }))
    );
    assert_eq!(
        c.fetch_offsets(g, None, false).await.unwrap()[0].1[0].offset,
        19
    );
}

#[tokio::test(start_paused = true)]
async fn unloading_answers_waiting_members_and_drops_the_groups() {
    let (c, _log) = clustered();
    let g = "g";
    assert!(c.begin_load(home(g), 1, PARTITIONS));
    assert!(c.finish_load(home(g), 1, HashMap::new()));
    let a = join_new(&c, g, &["range"]).await;
    assert_eq!(a.error, 0);
    let s = sync(
        &c,
        g,
        &a,
        vec![(a.member_id.clone(), Bytes::from_static(b"A"))],
    )
    .await;
    assert_eq!(s.error, 0);
    // A second member starts a rebalance: its JoinGroup waits for the first to rejoin.
    let first = c.join(join_params(g, "", None, &["range"])).await;
    assert_eq!(first.error, E::MemberIdRequired.code());
    let waiting = spawn_join(&c, join_params(g, &first.member_id, None, &["range"]));
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());

    c.unload(home(g));
    let r = waiting.await.unwrap();
    assert_eq!(r.error, E::NotCoordinator.code());
    all_answer(&c, g, E::NotCoordinator.code()).await;
    assert!(c.list().await.is_empty());

    // Loaded again (a later leadership): the group is what the log holds, here nothing.
    assert!(c.begin_load(home(g), 3, PARTITIONS));
    assert!(c.finish_load(home(g), 3, HashMap::new()));
    assert!(c.describe(g).await.unwrap().is_none());
    assert_eq!(
        c.heartbeat(g, &a.member_id, None, a.generation).await,
        E::UnknownMemberId.code()
    );
}
