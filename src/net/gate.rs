//! The node-to-node connection gate of a cluster node: whether this node may talk to another
//! one over the quorum transport (Raft RPCs, controller requests) and the inter-broker client
//! (replica fetches, the transaction coordinator's requests). Open unless a test closes it,
//! to one node (`crate::testing::Cluster::isolate` closes each side's gate to the other) or
//! to every node (the `isolate` fault, [`Gate::isolate`]); closing it to a node also cuts
//! the connections already open with that node. Client connections never pass through it;
//! the request path asks [`Gate::isolated`] to refuse the other brokers' requests on them
//! (replica fetches, transaction markers) while the node is cut off from every node.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Shared by the node's connection paths and the owner that opens and closes it.
#[derive(Clone, Default)]
pub struct Gate(Arc<Mutex<State>>, Arc<AtomicBool>);

#[derive(Default)]
struct State {
    /// The nodes this node is cut off from.
    closed: HashSet<i32>,
    /// Cut off from every node.
    isolated: bool,
    /// Per node, the token the connections with it hold: cancelled when the gate closes to it.
    open: HashMap<i32, CancellationToken>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.lock().unwrap();
        f.debug_struct("Gate")
            .field("closed", &s.closed)
            .field("isolated", &s.isolated)
            .finish()
    }
}

impl Gate {
    /// None when this node is cut off from `node`; otherwise a token the connection with it
    /// ends on once it is (`cancelled()`).
    pub fn pass(&self, node: i32) -> Option<CancellationToken> {
        let mut s = self.0.lock().unwrap();
        if s.isolated || s.closed.contains(&node) {
            return None;
        }
        Some(s.open.entry(node).or_default().clone())
    }

    /// Cuts this node off from `node`: new connections are refused and open ones end.
    pub fn close(&self, node: i32) {
        let mut s = self.0.lock().unwrap();
        s.closed.insert(node);
        if let Some(t) = s.open.remove(&node) {
            t.cancel();
        }
    }

    /// Lets this node talk to every node again (an isolation aside).
    pub fn open_all(&self) {
        self.0.lock().unwrap().closed.clear();
    }

    /// Cuts this node off from every node (`true`: open connections end, new ones are
    /// refused), or ends that (`false`).
    pub fn isolate(&self, on: bool) {
        let mut s = self.0.lock().unwrap();
        s.isolated = on;
        self.1.store(on, Ordering::Release);
        if on {
            for (_, t) in s.open.drain() {
                t.cancel();
            }
        }
    }

    /// Whether this node is cut off from every node (one atomic load).
    pub fn isolated(&self) -> bool {
        self.1.load(Ordering::Acquire)
    }

    /// `stream`, failing every read and write once `cut` is cancelled.
    pub fn wrap<S>(stream: S, cut: CancellationToken) -> Gated<S> {
        Gated {
            inner: stream,
            cut: Box::pin(cut.cancelled_owned()),
        }
    }
}

/// A byte stream through the gate: once the gate closes to its peer every call fails, so the
/// connection's owner drops it as after a broken connection.
pub struct Gated<S> {
    inner: S,
    cut: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> Gated<S> {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.cut.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "cut off by the connection gate",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Gated<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Gated<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_cuts_open_connections_and_refuses_new_ones() {
        let gate = Gate::default();
        let to_two = gate.pass(2).unwrap();
        let to_three = gate.pass(3).unwrap();
        gate.close(2);
        assert!(to_two.is_cancelled());
        assert!(!to_three.is_cancelled());
        assert!(gate.pass(2).is_none());
        gate.open_all();
        let again = gate.pass(2).unwrap();
        assert!(
            !again.is_cancelled(),
            "a connection after the heal lives on"
        );
    }

    #[test]
    fn isolation_cuts_every_node_until_ended() {
        let gate = Gate::default();
        let to_two = gate.pass(2).unwrap();
        let to_three = gate.pass(3).unwrap();
        assert!(!gate.isolated());
        gate.isolate(true);
        assert!(gate.isolated());
        assert!(to_two.is_cancelled() && to_three.is_cancelled());
        assert!(gate.pass(4).is_none());
        gate.open_all();
        assert!(gate.pass(2).is_none(), "a heal does not end an isolation");
        gate.isolate(false);
        assert!(!gate.isolated());
        assert!(!gate.pass(2).unwrap().is_cancelled());
    }

    #[tokio::test]
    async fn a_gated_stream_fails_once_cut() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let gate = Gate::default();
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = Gate::wrap(a, gate.pass(7).unwrap());
        a.write_all(b"x").await.unwrap();
        let mut one = [0u8; 1];
        b.read_exact(&mut one).await.unwrap();
        // A read waiting for data ends when the gate closes.
        let reading = tokio::spawn(async move { a.read(&mut one).await });
        tokio::task::yield_now().await;
        gate.close(7);
        let err = reading.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
    }
}
