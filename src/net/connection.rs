//! One client connection: a reader that cuts length-prefixed frames (bounded by
//! `socket.request.max.bytes`) and a loop that answers them strictly in order, as Kafka does
//! (a connection has one request in flight at the broker; clients pipeline, we read ahead).
//!
//! The connection is generic over its transport: any byte stream to read frames from, and a
//! [`Sink`] that writes responses. Plain TCP writes file regions with sendfile(2); TLS
//! (`super::tls`) reads them into a buffer and encrypts them.

use std::future::Future;
use std::io::IoSlice;
use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::dispatch::Dispatch;
use super::request::FrameHead;
use super::response::{Chunk, Response};
use super::sasl::{FrameLimit, Gate, SaslGate};
use crate::security::Session;

/// How many decoded-but-unanswered frames a connection may read ahead.
const READ_AHEAD: usize = 64;

/// Where a connection's responses go: the transport seam. Bytes are written as they are;
/// a file region is the transport's to move (sendfile on plain TCP, read and encrypt under
/// TLS). A kernel-TLS transport (the `tls` ULP: the session keys handed to the kernel after
/// the handshake) would implement [`Sink::write_file`] with sendfile again; these kernels
/// offer no `tls` ULP, so there is none.
pub trait Sink: Send + 'static {
    /// Writes the byte chunks in order (file chunks among them are skipped).
    fn write_bytes(&mut self, chunks: &[Chunk])
    -> impl Future<Output = std::io::Result<()>> + Send;
    /// Writes `len` bytes of `file` from `position`.
    fn write_file(
        &mut self,
        file: &std::fs::File,
        position: u64,
        len: usize,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
    /// The response is complete: push out anything buffered.
    fn end_response(&mut self) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// Serves one plain TCP connection.
pub async fn serve(stream: TcpStream, front: Arc<dyn Dispatch>, listener: Arc<str>) {
    let peer = stream.peer_addr().ok();
    let session = Session::anonymous(peer, &listener);
    let _counted = front.metrics().connection_opened(&listener);
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    run(rd, wr, session, front).await;
}

/// Reads frames from `rd` and answers them in order through `wr`, until either side ends.
pub async fn run<R, W>(rd: R, wr: W, mut session: Session, front: Arc<dyn Dispatch>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: Sink,
{
    let peer = session.peer;
    let (tx, mut rx) = mpsc::channel::<Bytes>(READ_AHEAD);
    let sasl_cfg = front.config().sasl.get(&*session.listener).cloned();
    let limit = Arc::new(FrameLimit::new(
        front.config().socket_request_max_bytes,
        sasl_cfg.as_ref().map(|c| c.max_receive_size),
    ));
    let mut sasl = sasl_cfg.map(|c| SaslGate::new(c, &*front, peer, limit.clone()));
    let reader = tokio::spawn(read_frames(rd, limit, tx));
    let mut writer = Writer::new(wr);
    while let Some(frame) = rx.recv().await {
        if let Some(gate) = sasl.as_mut() {
            let (reply, close) = match gate.check(&frame, &mut session).await {
                Gate::Serve => (None, false),
                Gate::Reply(r) => (Some(r), false),
                Gate::Close(r) => (r, true),
            };
            if let Some(r) = reply {
                writer.queue(r);
                if let Err(e) = writer.flush().await {
                    debug!(?peer, "write failed: {e}");
                    reader.abort();
                    return;
                }
                if !close {
                    continue;
                }
            }
            if close {
                reader.abort();
                return;
            }
        }
        let started = std::time::Instant::now();
        // A second handle on the frame (a reference count), for the log line if it fails.
        let mut mute = std::time::Duration::ZERO;
        match front.dispatch(frame.clone(), &session).await {
            Ok(Some(resp)) => {
                mute = resp.mute;
                writer.queue(resp)
            }
            Ok(None) => {}
            Err(e) => {
                // The connection ends here, so this is its only such line; the frames read
                // ahead behind this one are dropped unread.
                let head = FrameHead::peek(&frame);
                warn!(
                    client = %addr(peer),
                    client_id = head.client_id.as_deref().unwrap_or("-"),
                    api_key = %or_dash(head.api_key),
                    api = %head.api_name(),
                    version = %or_dash(head.version),
                    "closing connection: request not served: {e:#}"
                );
                reader.abort();
                return;
            }
        }
        // Each response is written as soon as it is ready. (Holding responses back while more
        // requests were queued, to write them together, stalled pipelining producers: a client
        // with 5 requests in flight got no answer until all 5 were processed, so it and the
        // broker took turns instead of overlapping; 1 KiB produce ran at half the speed.)
        if let Err(e) = writer.flush().await {
            debug!(?peer, "write failed: {e}");
            reader.abort();
            return;
        }
        let head = FrameHead::peek(&frame[..frame.len().min(4)]);
        if let (Some(key), Some(version)) = (head.api_key, head.version) {
            front.metrics().request(key, version, started.elapsed());
        }
        // A throttled client: its next request waits (the reader still reads ahead).
        if !mute.is_zero() {
            tokio::time::sleep(mute).await;
        }
    }
    // The reader has stopped: end of stream, a read error, or a frame it would not read.
    match reader.await {
        Ok(Err(e @ FrameError::Size { .. })) => warn!(
            client = %addr(peer),
            "closing connection: request not served: {e}"
        ),
        // Undecodable transport data (a TLS record that does not decrypt): the client's fault,
        // worth one line. Plain TCP reads never fail this way.
        Ok(Err(FrameError::Io(e))) if e.kind() == std::io::ErrorKind::InvalidData => warn!(
            client = %addr(peer),
            "closing connection: {e}"
        ),
        Ok(Err(e)) => debug!(?peer, "closing connection: {e}"),
        Ok(Ok(())) | Err(_) => {}
    }
}

pub(super) fn addr(peer: Option<std::net::SocketAddr>) -> String {
    peer.map_or_else(|| "-".to_string(), |a| a.to_string())
}

fn or_dash(v: Option<i16>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Why the reader stopped before the end of the stream.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    #[error("frame size {size} outside 0..={max} ({setting})")]
    Size {
        size: i32,
        max: usize,
        setting: &'static str,
    },
    #[error("connection closed inside a frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The read buffer allocated for a frame (more for a larger one).
const READ_BUFFER: usize = 64 * 1024;
/// What an idle connection reads into before it allocates a buffer.
const IDLE_READ: usize = 512;

/// Reads frames until EOF or a protocol violation (bad length), which ends the connection.
async fn read_frames(
    mut rd: impl AsyncRead + Unpin,
    limit: Arc<FrameLimit>,
    tx: mpsc::Sender<Bytes>,
) -> Result<(), FrameError> {
    let mut buf = BytesMut::new();
    loop {
        if buf.is_empty() {
            // Between frames the connection holds no read buffer (the frames being handled
            // keep their bytes alive by themselves): the next bytes are read into a small
            // array of the task's, then a buffer is allocated for the frame they start.
            buf = BytesMut::new();
            let mut first = [0u8; IDLE_READ];
            let n = rd.read(&mut first).await?;
            if n == 0 {
                return Ok(());
            }
            buf.reserve(READ_BUFFER.max(n));
            buf.extend_from_slice(&first[..n]);
        }
        while buf.len() < 4 {
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(READ_BUFFER);
            }
            if rd.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let (max, setting) = limit.current();
        if len < 0 || len as usize > max {
            return Err(FrameError::Size {
                size: len,
                max,
                setting,
            });
        }
        let need = 4 + len as usize;
        while buf.len() < need {
            let missing = need - buf.len();
            buf.reserve(missing.clamp(4096, 1 << 20));
            if rd.read_buf(&mut buf).await? == 0 {
                return Err(FrameError::Truncated);
            }
        }
        buf.advance(4);
        let frame = buf.split_to(len as usize).freeze();
        if tx.send(frame).await.is_err() {
            return Ok(());
        }
    }
}

/// Writes responses in order through the transport's [`Sink`].
struct Writer<W> {
    wr: W,
    pending: Vec<Chunk>,
}

impl<W: Sink> Writer<W> {
    fn new(wr: W) -> Writer<W> {
        Writer {
            wr,
            pending: Vec::new(),
        }
    }

    fn queue(&mut self, resp: Response) {
        self.pending.extend(resp.chunks);
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        let chunks = std::mem::take(&mut self.pending);
        let mut i = 0;
        while i < chunks.len() {
            match &chunks[i] {
                Chunk::File {
                    file,
                    position,
                    len,
                } => {
                    self.wr.write_file(file, *position, *len).await?;
                    i += 1;
                }
                Chunk::Bytes(_) => {
                    let start = i;
                    while i < chunks.len() && matches!(chunks[i], Chunk::Bytes(_)) {
                        i += 1;
                    }
                    self.wr.write_bytes(&chunks[start..i]).await?;
                }
            }
        }
        self.wr.end_response().await
    }
}

/// Plain TCP: bytes with (vectored) write, file regions with sendfile.
impl Sink for OwnedWriteHalf {
    async fn write_bytes(&mut self, chunks: &[Chunk]) -> std::io::Result<()> {
        write_all_vectored(self, chunks).await
    }

    async fn write_file(
        &mut self,
        file: &std::fs::File,
        position: u64,
        len: usize,
    ) -> std::io::Result<()> {
        send_file(self, file, position, len).await
    }

    async fn end_response(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn write_all_vectored(wr: &mut OwnedWriteHalf, chunks: &[Chunk]) -> std::io::Result<()> {
    let mut bufs: Vec<&[u8]> = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Bytes(b) if !b.is_empty() => Some(&b[..]),
            _ => None,
        })
        .collect();
    let mut first = 0;
    while first < bufs.len() {
        let slices: Vec<IoSlice<'_>> = bufs[first..]
            .iter()
            .take(64)
            .map(|b| IoSlice::new(b))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let b = bufs[first];
            if n >= b.len() {
                n -= b.len();
                first += 1;
            } else {
                bufs[first] = &b[n..];
                n = 0;
            }
        }
    }
    Ok(())
}

/// Sends `len` bytes of `file` from `position` to the socket with sendfile(2): the kernel
/// moves the bytes, no user-space copy.
async fn send_file(
    wr: &OwnedWriteHalf,
    file: &std::fs::File,
    position: u64,
    len: usize,
) -> std::io::Result<()> {
    let stream: &TcpStream = wr.as_ref();
    let mut offset = position as i64;
    let mut remaining = len;
    while remaining > 0 {
        stream.writable().await?;
        let res = stream.try_io(Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile64(
                stream.as_fd(),
                file.as_fd(),
                Some(&mut offset),
                remaining,
            )
            .map_err(std::io::Error::from)
        });
        match res {
            Ok(0) => {
                // The file is shorter than the region: the frame cannot be completed.
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file ended inside a fetch region",
                ));
            }
            Ok(n) => remaining -= n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
