//! One client connection: a reader that cuts length-prefixed frames (bounded by
//! `socket.request.max.bytes`) and a loop that answers them strictly in order, as Kafka does
//! (a connection has one request in flight at the broker; clients pipeline, we read ahead).

use std::io::IoSlice;
use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::response::{Chunk, Response};
use crate::api;
use crate::broker::Broker;
use crate::security::Session;

/// How many decoded-but-unanswered frames a connection may read ahead.
const READ_AHEAD: usize = 64;

pub async fn serve(stream: TcpStream, broker: Arc<Broker>, listener: Arc<str>) {
    let peer = stream.peer_addr().ok();
    let session = Session::anonymous(peer, &listener);
    let _counted = broker.metrics.connection_opened(&listener);
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Bytes>(READ_AHEAD);
    let max = broker.config.socket_request_max_bytes;
    let reader = tokio::spawn(read_frames(rd, max, tx));
    let mut writer = Writer::new(wr);
    while let Some(frame) = rx.recv().await {
        let started = std::time::Instant::now();
        // A second handle on the frame (a reference count), for the log line if it fails.
        match api::dispatch_from(&broker, frame.clone(), &session).await {
            Ok(Some(resp)) => writer.queue(resp),
            Ok(None) => {}
            Err(e) => {
                // The connection ends here, so this is its only such line; the frames read
                // ahead behind this one are dropped unread.
                let head = api::FrameHead::peek(&frame);
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
        let head = api::FrameHead::peek(&frame[..frame.len().min(4)]);
        if let (Some(key), Some(version)) = (head.api_key, head.version) {
            broker.metrics.request(key, version, started.elapsed());
        }
    }
    // The reader has stopped: end of stream, a read error, or a frame it would not read.
    match reader.await {
        Ok(Err(e @ FrameError::Size { .. })) => warn!(
            client = %addr(peer),
            "closing connection: request not served: {e}"
        ),
        Ok(Err(e)) => debug!(?peer, "closing connection: {e}"),
        Ok(Ok(())) | Err(_) => {}
    }
}

fn addr(peer: Option<std::net::SocketAddr>) -> String {
    peer.map_or_else(|| "-".to_string(), |a| a.to_string())
}

fn or_dash(v: Option<i16>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Why the reader stopped before the end of the stream.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    #[error("frame size {size} outside 0..={max} (socket.request.max.bytes)")]
    Size { size: i32, max: usize },
    #[error("connection closed inside a frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads frames until EOF or a protocol violation (bad length), which ends the connection.
async fn read_frames(
    mut rd: OwnedReadHalf,
    max: usize,
    tx: mpsc::Sender<Bytes>,
) -> Result<(), FrameError> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while buf.len() < 4 {
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(64 * 1024);
            }
            if rd.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if len < 0 || len as usize > max {
            return Err(FrameError::Size { size: len, max });
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

/// Writes responses in order: bytes with (vectored) write, file regions with sendfile.
struct Writer {
    wr: OwnedWriteHalf,
    pending: Vec<Chunk>,
}

impl Writer {
    fn new(wr: OwnedWriteHalf) -> Writer {
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
                    send_file(&self.wr, file, *position, *len).await?;
                    i += 1;
                }
                Chunk::Bytes(_) => {
                    let start = i;
                    while i < chunks.len() && matches!(chunks[i], Chunk::Bytes(_)) {
                        i += 1;
                    }
                    write_all_vectored(&mut self.wr, &chunks[start..i]).await?;
                }
            }
        }
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
