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
use tracing::debug;

use super::response::{Chunk, Response};
use crate::api;
use crate::broker::Broker;

/// How many decoded-but-unanswered frames a connection may read ahead.
const READ_AHEAD: usize = 64;

pub async fn serve(stream: TcpStream, broker: Arc<Broker>) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Bytes>(READ_AHEAD);
    let max = broker.config.socket_request_max_bytes;
    let reader = tokio::spawn(async move {
        if let Err(e) = read_frames(rd, max, tx).await {
            debug!(?peer, "closing connection: {e}");
        }
    });
    let mut writer = Writer::new(wr);
    while let Some(frame) = rx.recv().await {
        match api::dispatch_from(&broker, frame, peer).await {
            Ok(Some(resp)) => writer.queue(resp),
            Ok(None) => {}
            Err(e) => {
                debug!(?peer, "closing connection: {e:#}");
                break;
            }
        }
        // Each response is written as soon as it is ready. (Holding responses back while more
        // requests were queued, to write them together, stalled pipelining producers: a client
        // with 5 requests in flight got no answer until all 5 were processed, so it and the
        // broker took turns instead of overlapping; 1 KiB produce ran at half the speed.)
        if let Err(e) = writer.flush().await {
            debug!(?peer, "write failed: {e}");
            break;
        }
    }
    let _ = writer.flush().await;
    reader.abort();
}

/// Reads frames until EOF or a protocol violation (bad length), which ends the connection.
async fn read_frames(
    mut rd: OwnedReadHalf,
    max: usize,
    tx: mpsc::Sender<Bytes>,
) -> anyhow::Result<()> {
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
            anyhow::bail!("frame size {len} outside 0..={max} (socket.request.max.bytes)");
        }
        let need = 4 + len as usize;
        while buf.len() < need {
            let missing = need - buf.len();
            buf.reserve(missing.clamp(4096, 1 << 20));
            if rd.read_buf(&mut buf).await? == 0 {
                anyhow::bail!("connection closed inside a frame");
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
