//! The response writer of a TLS connection. rustls encrypts what it is given into TLS records,
//! so small pieces (a response header, a partition header) are gathered into one reused
//! buffer first, and a file region (record data of a fetch) is read from the page cache
//! straight into that buffer: one copy into user space, then one encrypting pass. There is no
//! sendfile under user-space TLS (see [`super::super::connection::Sink`] for the kernel-TLS
//! seam).

use std::os::unix::fs::FileExt;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::net::connection::Sink;
use crate::net::response::Chunk;

/// How much plaintext is gathered before it goes to rustls: a few maximum-size TLS records
/// (16 KiB each), so records come out full and writes large.
const BUF: usize = 256 * 1024;

pub struct TlsSink<W> {
    wr: W,
    /// Plaintext waiting for rustls: `buf[..filled]`. Allocated (and zeroed) once per
    /// connection, so reading a file region into it costs the copy and nothing more.
    buf: Box<[u8]>,
    filled: usize,
}

impl<W> TlsSink<W> {
    pub fn new(wr: W) -> TlsSink<W> {
        TlsSink {
            wr,
            buf: vec![0; BUF].into_boxed_slice(),
            filled: 0,
        }
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> TlsSink<W> {
    async fn drain(&mut self) -> std::io::Result<()> {
        if self.filled > 0 {
            self.wr.write_all(&self.buf[..self.filled]).await?;
            self.filled = 0;
        }
        Ok(())
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> Sink for TlsSink<W> {
    async fn write_bytes(&mut self, chunks: &[Chunk]) -> std::io::Result<()> {
        for c in chunks {
            let Chunk::Bytes(b) = c else { continue };
            if self.filled + b.len() > BUF {
                self.drain().await?;
            }
            if b.len() >= BUF {
                self.wr.write_all(b).await?;
            } else {
                self.buf[self.filled..self.filled + b.len()].copy_from_slice(b);
                self.filled += b.len();
            }
        }
        Ok(())
    }

    async fn write_file(
        &mut self,
        file: &std::fs::File,
        position: u64,
        len: usize,
    ) -> std::io::Result<()> {
        let mut at = position;
        let mut remaining = len;
        while remaining > 0 {
            if self.filled == BUF {
                self.drain().await?;
            }
            let start = self.filled;
            let n = remaining.min(BUF - start);
            // Segment data just written or read is in the page cache; this read does not wait
            // for the disk in the common case, as the plain path's sendfile would not.
            if let Err(e) = file.read_exact_at(&mut self.buf[start..start + n], at) {
                return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "segment file ended inside a fetch region",
                    )
                } else {
                    e
                });
            }
            self.filled += n;
            at += n as u64;
            remaining -= n;
        }
        Ok(())
    }

    async fn end_response(&mut self) -> std::io::Result<()> {
        self.drain().await?;
        self.wr.flush().await
    }
}
