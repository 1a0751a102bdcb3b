//! A broker's registration with the active controller (a new incarnation id each start),
//! its heartbeats every `broker.heartbeat.interval.ms` (carrying the metadata offset it has
//! applied: the controller unfences it once it has caught up with its own registration), and
//! re-registration when the controller no longer knows its epoch (it was fenced and
//! unregistered, or a new controller lost it).
//!
//! Each incarnation records its id in `<metadata log dir>/incarnation` (the directory the
//! quorum holds locked while the process runs) and registers with the id found there before
//! it: the controller may then replace a registered incarnation with that id at once, since
//! the process that wrote it no longer holds the directory.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{info, warn};
use uuid::Uuid;

use super::{ClusterNode, ControllerReply, ControllerRequest};
use crate::cluster::control::active::{ControlError, Heartbeat, HeartbeatReply};
use crate::cluster::metadata::{BrokerRegistration, Endpoint, HTTP_ENDPOINT};
use crate::config::Listener;

/// The file, in the metadata log directory, naming the incarnation that last ran from it.
pub const INCARNATION_FILE: &str = "incarnation";

/// Records `current` as the incarnation running from `dir` and returns the one recorded
/// before, if any. The caller holds `dir`'s lock, so the previous one has exited.
pub fn swap_incarnation(dir: &Path, current: Uuid) -> Option<Uuid> {
    let path = dir.join(INCARNATION_FILE);
    let previous = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| Uuid::parse_str(s.trim()).ok());
    let tmp = dir.join(format!("{INCARNATION_FILE}.tmp"));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, current.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = written {
        warn!("cannot record this incarnation in {}: {e}", path.display());
    }
    previous
}

/// What a broker registers: each advertised listener, then its HTTP listener, bound on
/// `http` (the host it is configured with and the port it got), under [`HTTP_ENDPOINT`]. An
/// HTTP listener on all interfaces (empty host, `0.0.0.0`, `::`) is registered at the host
/// the inter-broker listener advertises, where the other nodes reach this one.
pub fn registered_endpoints(
    advertised: &[Listener],
    inter_broker_listener: &str,
    http: Option<(&str, u16)>,
) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = advertised
        .iter()
        .map(|l| Endpoint {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
        })
        .collect();
    if let Some((host, port)) = http {
        let wildcard = matches!(host, "" | "0.0.0.0" | "::");
        let host = match advertised.iter().find(|l| l.name == inter_broker_listener) {
            Some(l) if wildcard && !l.host.is_empty() => l.host.clone(),
            _ if wildcard => "127.0.0.1".to_string(),
            _ => host.to_string(),
        };
        out.push(Endpoint {
            name: HTTP_ENDPOINT.to_string(),
            host,
            port,
        });
    }
    out
}

impl ClusterNode {
    fn registration(&self) -> Option<BrokerRegistration> {
        // Nothing to register once the broker is gone.
        self.host.upgrade()?;
        Some(BrokerRegistration {
            broker_id: self.node_id,
            incarnation: self.incarnation,
            endpoints: self.endpoints.clone(),
            rack: self.config.rack.clone(),
        })
    }

    /// Registers until the controller accepts (a previous incarnation's session must
    /// expire first unless it shut down cleanly).
    async fn register(&self) {
        let mut refused_logged = false;
        loop {
            if self.cancel.is_cancelled() {
                return;
            }
            let Some(reg) = self.registration() else {
                return;
            };
            let req = ControllerRequest::Register {
                registration: reg,
                previous_incarnation: self.previous_incarnation,
            };
            match self.call(req).await {
                Ok(ControllerReply::Registered(Ok(epoch))) => {
                    self.broker_epoch.store(epoch as i64, Ordering::Release);
                    info!("registered with the controller: broker epoch {epoch}");
                    return;
                }
                Ok(ControllerReply::Registered(Err(ControlError::DuplicateBrokerRegistration))) => {
                    if !refused_logged {
                        info!(
                            "registration refused: another incarnation of node {} is still \
                             registered and this one cannot show it has exited; retrying until \
                             its session expires",
                            self.node_id
                        );
                        refused_logged = true;
                    }
                }
                Ok(other) => warn!("registration: unexpected answer {other:?}"),
                Err(e) => tracing::debug!("registration: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One heartbeat with the current state; a stale epoch makes the broker register again.
    pub(super) async fn heartbeat_once(&self) -> anyhow::Result<HeartbeatReply> {
        let epoch = self.broker_epoch.load(Ordering::Acquire);
        if epoch < 0 {
            self.register().await;
        }
        let hb = Heartbeat {
            broker_id: self.node_id,
            broker_epoch: self.broker_epoch.load(Ordering::Acquire).max(0) as u64,
            metadata_offset: self.image().offset,
            want_fence: false,
            want_shutdown: self.shutting_down.load(Ordering::Acquire),
        };
        match self.call(ControllerRequest::Heartbeat(hb)).await {
            Ok(ControllerReply::Heartbeat(Ok(r))) => Ok(r),
            Ok(ControllerReply::Heartbeat(Err(ControlError::StaleBrokerEpoch))) => {
                info!("the controller no longer knows this broker's epoch: registering again");
                self.broker_epoch.store(-1, Ordering::Release);
                anyhow::bail!("stale broker epoch")
            }
            Ok(other) => anyhow::bail!("unexpected answer {other:?}"),
            Err(e) => anyhow::bail!("{e}"),
        }
    }

    /// Registers, then heartbeats until the node stops.
    pub(super) async fn heartbeats(self: Arc<Self>) {
        self.register().await;
        let every = Duration::from_millis(self.config.heartbeat_interval_ms);
        let mut fenced = true;
        loop {
            let sent_offset = self.image().offset;
            match self.heartbeat_once().await {
                Ok(r) => {
                    if fenced != r.is_fenced {
                        fenced = r.is_fenced;
                        info!("broker is {}", if fenced { "fenced" } else { "unfenced" });
                    }
                    if !fenced {
                        self.unfenced.send_replace(true);
                    }
                    // A fenced broker that has caught up is unfenced by its next heartbeat: it
                    // sends it as soon as its image reaches its epoch (the offset of its
                    // registration), else after a short wait.
                    let wait = if r.is_fenced {
                        Duration::from_millis(100).min(every)
                    } else {
                        every
                    };
                    let epoch = self.broker_epoch.load(Ordering::Acquire).max(0) as u64;
                    let behind = r.is_fenced && sent_offset < epoch;
                    let mut images = self.image.clone();
                    tokio::select! {
                        _ = self.cancel.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                        _ = images.wait_for(|i| i.offset >= epoch), if behind => {}
                    }
                }
                Err(e) => {
                    tracing::debug!("heartbeat: {e}");
                    tokio::select! {
                        _ = self.cancel.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_millis(100).min(every)) => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_incarnation_learns_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(swap_incarnation(dir.path(), a), None);
        assert_eq!(swap_incarnation(dir.path(), b), Some(a));
        assert_eq!(swap_incarnation(dir.path(), Uuid::new_v4()), Some(b));
    }

    #[test]
    fn the_http_listener_registers_beside_the_kafka_listeners() {
        let l = |name: &str, host: &str, port| Listener {
            name: name.into(),
            host: host.into(),
            port,
        };
        let advertised = [
            l("PLAINTEXT", "10.0.0.7", 9092),
            l("INTERNAL", "node7", 9094),
        ];
        let reg = |http| BrokerRegistration {
            broker_id: 7,
            incarnation: Uuid::nil(),
            endpoints: registered_endpoints(&advertised, "INTERNAL", http),
            rack: None,
        };
        let none = reg(None);
        assert_eq!(none.endpoints.len(), 2);
        assert_eq!(none.http_address(), None);
        assert_eq!(
            reg(Some(("127.0.0.1", 8090))).http_address().as_deref(),
            Some("127.0.0.1:8090")
        );
        // on all interfaces: where the inter-broker listener is advertised
        for any in ["", "0.0.0.0", "::"] {
            let r = reg(Some((any, 8090)));
            assert_eq!(r.http_address().as_deref(), Some("node7:8090"));
            assert_eq!(r.endpoints[..2], none.endpoints[..]);
        }
        assert_eq!(
            reg(Some(("::1", 8090))).http_address().as_deref(),
            Some("[::1]:8090")
        );
    }
}
