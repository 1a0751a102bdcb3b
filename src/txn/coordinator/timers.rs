//! The coordinator's timers: transactions open past their timeout are aborted (their
//! producer fenced), transactional ids idle for `transactional.id.expiration.ms` forgotten.

use std::time::Duration;

use super::*;

impl Coordinator {
    /// Starts the periodic abort of timed-out transactions and expiry of idle ids.
    pub fn start(self: &Arc<Self>) {
        for pc in self.resume.lock().unwrap().take().unwrap_or_default() {
            let me = self.clone();
            tokio::spawn(async move { me.complete(pc).await });
        }
        let me = Arc::downgrade(self);
        let every = Duration::from_millis(self.cfg.abort_interval_ms.max(1));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(c) = me.upgrade() else { return };
                c.abort_timed_out(now_ms()).await;
            }
        });
        let me = Arc::downgrade(self);
        let every = Duration::from_millis(self.cfg.id_expiration_interval_ms.max(1));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(c) = me.upgrade() else { return };
                c.expire_ids(now_ms()).await;
            }
        });
    }

    /// Ids of Active partitions whose state matches `f`.
    fn select(&self, f: impl Fn(&TxnMetadata) -> bool) -> Vec<(String, i32, Entry)> {
        let g = self.inner.lock().unwrap();
        g.txns
            .iter()
            .filter_map(|(id, e)| {
                let epoch = g.owned.check(id).ok()?;
                f(&e.lock().unwrap()).then(|| (id.clone(), epoch, e.clone()))
            })
            .collect()
    }

    /// Aborts every transaction open past its timeout (the producer is fenced: its epoch
    /// goes up). Returns how many aborts were started.
    pub async fn abort_timed_out(self: &Arc<Self>, now: i64) -> usize {
        let mut n = 0;
        for (id, _, entry) in self.select(|md| rules::timed_out(md, now)) {
            let fence = {
                let mut md = entry.lock().unwrap();
                if !rules::timed_out(&md, now) {
                    continue;
                }
                md.prepare_fence_epoch()
            };
            let Ok(t) = fence else { continue };
            info!(
                transactional_id = id,
                "aborting a transaction open longer than its timeout"
            );
            match self.abort_fenced(&id, &entry, &t).await {
                NONE => n += 1,
                code => info!(
                    transactional_id = id,
                    "timed-out abort not started: error {code}"
                ),
            }
        }
        n
    }

    /// Aborts `id`'s open transaction under the epoch of `fence` (prepared on `entry`);
    /// a fence that could not even be started is dropped. The abort follows the transaction
    /// version the producer began the transaction with (as Kafka's coordinator does), so a
    /// downgrade of `transaction.version` leaves open transactions ending as they began.
    pub(super) async fn abort_fenced(
        self: &Arc<Self>,
        id: &str,
        entry: &Entry,
        fence: &Transit,
    ) -> i16 {
        let (code, _, _) = self
            .end(
                id,
                fence.producer_id,
                fence.producer_epoch,
                false,
                false,
                fence.client_version,
            )
            .await;
        if code != NONE {
            let mut md = entry.lock().unwrap();
            if md.pending == Some(TxnState::PrepareEpochFence) {
                md.abandon();
            }
        }
        code
    }

    /// Forgets the ids idle for `transactional.id.expiration.ms` (writing their tombstones).
    /// Returns how many were removed.
    pub async fn expire_ids(&self, now: i64) -> usize {
        let expiration = self.cfg.id_expiration_ms;
        let mut n = 0;
        for (id, epoch, entry) in self.select(|md| rules::expired(md, now, expiration)) {
            let dead = {
                let mut md = entry.lock().unwrap();
                if !rules::expired(&md, now, expiration) {
                    continue;
                }
                md.prepare_dead()
            };
            let Ok(t) = dead else { continue };
            if self.write(&id, epoch, &t, |_| false).await.is_ok() {
                n += 1;
            }
        }
        n
    }
}
