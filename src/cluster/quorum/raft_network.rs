//! openraft's network interface over the [`Transport`]: one [`PeerClient`] per replication
//! target, sharing the transport's connection to that node.

use std::sync::Arc;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};

use super::network::{CallFailure, Peer, Transport, now_ms};
use super::types::{NodeId, Request, Response, TypeConfig, encode};

pub struct NetworkFactory {
    pub transport: Arc<Transport>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            transport: self.transport.clone(),
            peer: self.transport.peer(target, &node.addr),
        }
    }
}

pub struct PeerClient {
    transport: Arc<Transport>,
    peer: Arc<Peer>,
}

type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failure(String);

impl PeerClient {
    async fn call<E: std::error::Error>(
        &self,
        action: RPCTypes,
        body: Request,
        option: &RPCOption,
    ) -> Result<Response, RpcError<E>> {
        let ttl = option.hard_ttl();
        self.peer
            .request(&self.transport, body, ttl)
            .await
            .map_err(|f| match f {
                CallFailure::Unreachable(..) | CallFailure::Refused(..) => {
                    RPCError::Unreachable(Unreachable::new(&Failure(f.to_string())))
                }
                CallFailure::Timeout(..) => RPCError::Timeout(Timeout {
                    action,
                    id: self.transport.id,
                    target: self.peer.target,
                    timeout: ttl,
                }),
                CallFailure::Lost(..) | CallFailure::TooLarge(_) => {
                    RPCError::Network(NetworkError::new(&Failure(f.to_string())))
                }
            })
    }

    fn unexpected<E: std::error::Error>(&self, resp: &Response) -> RpcError<E> {
        RPCError::Network(NetworkError::new(&Failure(format!(
            "node {} answered with an unexpected message: {resp:?}",
            self.peer.target
        ))))
    }

    fn remote<E: std::error::Error>(&self, e: RaftError<NodeId, E>) -> RpcError<E> {
        RPCError::RemoteError(RemoteError::new(self.peer.target, e))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        let n = rpc.entries.len();
        // Ask openraft for fewer entries when this batch would not fit one frame (the header
        // and envelope add a few bytes; a tenth of the limit is left for them).
        if n > 1 {
            let size = encode(&rpc.entries).len();
            if size > self.transport.max_frame / 10 * 9 {
                let fit = (n as u64 * (self.transport.max_frame as u64 / 2) / size as u64).max(1);
                return Err(RPCError::PayloadTooLarge(
                    PayloadTooLarge::new_entries_hint(fit),
                ));
            }
        }
        let matched = rpc
            .entries
            .last()
            .map(|e| e.log_id.index)
            .or(rpc.prev_log_id.map(|p| p.index));
        let sent_ms = now_ms();
        let leader_last = self
            .transport
            .raft()
            .and_then(|r| r.metrics().borrow().last_log_index);
        let resp = self
            .call(
                RPCTypes::AppendEntries,
                Request::AppendEntries(rpc),
                &option,
            )
            .await?;
        match resp {
            Response::AppendEntries(Ok(r)) => {
                if r.is_success() {
                    let caught_up = matched >= leader_last;
                    self.transport
                        .record_ack(self.peer.target, sent_ms, caught_up);
                }
                Ok(r)
            }
            Response::AppendEntries(Err(e)) => Err(self.remote(e)),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        let resp = self
            .call(
                RPCTypes::InstallSnapshot,
                Request::InstallSnapshot(rpc),
                &option,
            )
            .await?;
        match resp {
            Response::InstallSnapshot(Ok(r)) => {
                self.transport.record_ack(self.peer.target, now_ms(), false);
                Ok(r)
            }
            Response::InstallSnapshot(Err(e)) => Err(self.remote(e)),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        match self
            .call(RPCTypes::Vote, Request::Vote(rpc), &option)
            .await?
        {
            Response::Vote(Ok(r)) => Ok(r),
            Response::Vote(Err(e)) => Err(self.remote(e)),
            other => Err(self.unexpected(&other)),
        }
    }
}
